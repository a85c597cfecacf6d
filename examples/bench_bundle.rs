//! Bundle benchmark: a ZIP of a 2,000-page `pages.pdf`, a 2,000-row assets CSV and a `res/`
//! folder of 2,000 small files, uploaded in the background to a server started in this
//! process, with the client on the same machine.
//!
//! ```text
//! cargo build --release                                   # the PDF child is target/release/entiserve
//! cargo run --release --example bench_bundle              # SQLite
//! cargo run --release --example bench_bundle -- --database-url postgres://postgres@127.0.0.1:5432/postgres
//! RUNS=5 cargo run --release --example bench_bundle -- --pages 500
//! ```
//!
//! The server is [`entiserve::App`] on `127.0.0.1:0` with a fresh data directory, the shipped
//! entities and `helper_exe` set to `target/release/entiserve` (next to this example's
//! directory): the uploaded PDF is split by that binary's `pdf-pages` child, as in production.
//! Build it first; the example refuses to run without it.
//!
//! Each run uploads the bundle (`entity=assets`, `bgrs=1`) and polls `GET /bgrs/<rid>` every
//! `--poll-ms` until the request is finished, measuring
//!
//! 1. upload → 202: sending the ZIP, extracting it, splitting pages.pdf in the contained
//!    child, storing 2,000 one-page PDFs and 2,000 res/ files, checking the CSV, enqueueing;
//! 2. 202 → finished: a campaign and 2,000 markers (one per page), then 2,000 asset rows whose
//!    page numbers become marker ids and whose `res/...` links become stored files' URLs;
//! 3. the progress values seen while polling.
//!
//! Every run is checked: status 4 and HTTP status 200, 2,000 `OK` rows in the result CSV,
//! 2,000 markers in the log. For context, measured in the same run on the same PDF: the
//! split in this process with no child (`entiserve::pdf::split`, pages kept in memory; and
//! `split_each` writing each page to a file, as the child does) and in the contained child
//! (`entiserve::pdf::split_contained`): the difference is the cost of containment. `sync`
//! runs before each timed step, so that one step's writes are not paid for by the next.
//! For PostgreSQL a fresh database `entiserve_bench_<hex>` is created on the given server and
//! dropped afterwards. Progress goes to stderr, with the server's log when `RUST_LOG` is set
//! (`RUST_LOG=info` shows the intake's steps); the report (Markdown) to stdout.

#[path = "../tests/support/pdf.rs"]
mod pdf_sample;
#[path = "support/bench.rs"]
mod support;

use anyhow::{Context, Result, bail, ensure};
use clap::{Parser, ValueEnum};
use entiserve::storage::redact;
use serde_json::Value as Json;
use std::io::{Cursor, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::{Stats, elapsed_ms, random_hex, with_database};
use zip::ZipWriter;
use zip::write::SimpleFileOptions;

const ADMIN_PASSWORD: &str = "bench";
/// A 1x1 transparent PNG: each res/img/N.png.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0xda, 0x63, 0x64, 0x60, 0xf8, 0x5f,
    0x0f, 0x00, 0x02, 0x87, 0x01, 0x80, 0xeb, 0x47, 0xba, 0x92, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

#[derive(Parser, Debug)]
#[command(about = "Benchmark of a background ZIP bundle upload: pages.pdf, CSV and res/")]
struct Args {
    /// Timed runs per backend; medians are reported.
    #[arg(long, env = "RUNS", default_value_t = 3)]
    runs: usize,
    /// Pages of pages.pdf, rows of the CSV and files in res/img/.
    #[arg(long, default_value_t = 2000)]
    pages: usize,
    /// A PostgreSQL server URL: PostgreSQL is measured too, on a fresh database created on
    /// it and dropped afterwards.
    #[arg(long, env = "TEST_DATABASE_URL")]
    database_url: Option<String>,
    /// Backend(s) to measure; default: sqlite, plus postgres when a database URL is given.
    #[arg(long, value_enum)]
    backend: Vec<Backend>,
    /// Polling interval of `GET /bgrs/<rid>`, in ms.
    #[arg(long, default_value_t = 10)]
    poll_ms: u64,
    /// An object store for the server's files (`s3://bucket/prefix`, with the usual AWS_*
    /// variables; `file:///path`, ...): every backend is then measured twice, with its files
    /// in the data directory and in the store (a fresh prefix below the URL per server), and
    /// the baseline stores the files into the store too.
    #[arg(long, env = "STORAGE_URL")]
    storage_url: Option<String>,
    /// Entity definitions the server serves.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/entities"))]
    entities: PathBuf,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    fn label(self) -> &'static str {
        match self {
            Backend::Sqlite => "SQLite",
            Backend::Postgres => "PostgreSQL",
        }
    }
}

/// One line of the report table.
struct Row {
    backend: String,
    what: String,
    stats: Stats,
}

#[derive(Default)]
struct Report {
    rows: Vec<Row>,
    /// Per backend: the progress values seen in each run.
    progress: Vec<(String, Vec<Vec<String>>)>,
    notes: Vec<String>,
}

// ---------------------------------------------------------------------------------------------
// Workload
// ---------------------------------------------------------------------------------------------

/// The assets CSV: row N creates `asset N` on page N with the link `res/img/N.png`.
fn assets_csv(rows: usize) -> String {
    let mut csv = String::from("op;name;marker_id;url;type\r\n");
    for n in 1..=rows {
        csv.push_str(&format!("c;asset {n};{n};res/img/{n}.png;image\r\n"));
    }
    csv
}

/// The bundle: assets.csv, pages.pdf and res/img/1.png ... res/img/N.png, deflated.
fn bundle(pdf: &[u8], n: usize) -> Result<Vec<u8>> {
    let opts = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    let mut z = ZipWriter::new(Cursor::new(Vec::new()));
    z.start_file("assets.csv", opts)?;
    z.write_all(assets_csv(n).as_bytes())?;
    z.start_file("pages.pdf", opts)?;
    z.write_all(pdf)?;
    z.add_directory("res/", opts)?;
    z.add_directory("res/img/", opts)?;
    for i in 1..=n {
        z.start_file(format!("res/img/{i}.png"), opts)?;
        z.write_all(PNG)?;
    }
    Ok(z.finish()?.into_inner())
}

// ---------------------------------------------------------------------------------------------
// The server, in this process
// ---------------------------------------------------------------------------------------------

/// `target/<profile>/entiserve`: this example runs from `target/<profile>/examples/`.
fn helper_exe() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("locating this example")?;
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .map(|dir| dir.join("entiserve"))
        .context("locating target/release/entiserve")?;
    if !bin.is_file() {
        bail!(
            "{} is missing: the server reads pages.pdf in a child process of that binary. \
             Build it first with `cargo build --release`, then run \
             `cargo run --release --example bench_bundle`",
            bin.display()
        );
    }
    if cfg!(debug_assertions) {
        eprintln!(
            "warning: this is a debug build; run with `cargo run --release --example bench_bundle`"
        );
    }
    Ok(bin)
}

struct Server {
    base: String,
    stop: tokio::sync::oneshot::Sender<()>,
    handle: tokio::task::JoinHandle<Result<()>>,
}

impl Server {
    async fn start(
        args: &Args,
        helper: &Path,
        data_dir: &Path,
        database_url: Option<&str>,
        storage_url: Option<&str>,
    ) -> Result<Server> {
        let mut s = entiserve::settings::Settings::new(data_dir, &args.entities);
        s.bind = "127.0.0.1:0".parse()?;
        s.admin_password = Some(ADMIN_PASSWORD.into());
        s.shutdown_grace = Duration::from_secs(5);
        s.database_url = database_url.map(str::to_string);
        s.storage_url = storage_url.map(str::to_string);
        s.helper_exe = helper.to_path_buf();
        let app = entiserve::App::build(s)
            .await
            .context("the server does not start")?;
        let base = format!("http://{}", app.addr());
        let (stop, rx) = tokio::sync::oneshot::channel::<()>();
        let handle = tokio::spawn(app.run_until(async {
            let _ = rx.await;
        }));
        Ok(Server { base, stop, handle })
    }

    async fn stop(self) -> Result<()> {
        let _ = self.stop.send(());
        self.handle.await.context("the server task failed")?
    }
}

/// An HTTP client of one server, as `admin`.
struct Api {
    client: reqwest::Client,
    base: String,
}

impl Api {
    fn new(base: &str) -> Result<Api> {
        let client = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(900))
            .build()?;
        Ok(Api {
            client,
            base: base.to_string(),
        })
    }

    async fn get(&self, path: &str) -> Result<Vec<u8>> {
        let resp = self
            .client
            .get(format!("{}{path}", self.base))
            .basic_auth("admin", Some(ADMIN_PASSWORD))
            .send()
            .await?;
        let status = resp.status();
        let body = resp.bytes().await?.to_vec();
        ensure!(
            status.as_u16() == 200,
            "GET {path}: HTTP {status}: {}",
            String::from_utf8_lossy(&body[..body.len().min(500)])
        );
        Ok(body)
    }

    async fn get_json(&self, path: &str) -> Result<Json> {
        Ok(serde_json::from_slice(&self.get(path).await?)?)
    }

    /// Uploads `zip` as `name` into `assets` in the background; the request id.
    async fn upload_background(&self, name: &str, zip: Vec<u8>) -> Result<String> {
        let part = reqwest::multipart::Part::bytes(zip)
            .file_name(name.to_string())
            .mime_str("application/zip")?;
        let form = reqwest::multipart::Form::new()
            .text("entity", "assets")
            .text("bgrs", "1")
            .part("csvfile", part);
        let resp = self
            .client
            .post(format!("{}/tools/uploader.ex.php", self.base))
            .basic_auth("admin", Some(ADMIN_PASSWORD))
            .multipart(form)
            .send()
            .await?;
        let status = resp.status();
        let body = resp.bytes().await?;
        ensure!(
            status.as_u16() == 202,
            "the upload got HTTP {status} instead of 202: {}",
            String::from_utf8_lossy(&body[..body.len().min(500)])
        );
        let reply: Json = serde_json::from_slice(&body)?;
        Ok(reply["request"]
            .as_str()
            .context("the 202 reply names the request")?
            .to_string())
    }
}

// ---------------------------------------------------------------------------------------------
// Measurements
// ---------------------------------------------------------------------------------------------

/// One run's measurements.
struct Run {
    intake_ms: f64,
    rows_ms: f64,
    progress: Vec<String>,
}

/// Uploads the bundle once, follows it to the end and checks the outcome.
async fn one_run(api: &Api, zip: Vec<u8>, name: &str, pages: usize, poll: Duration) -> Result<Run> {
    let t = Instant::now();
    let rid = api.upload_background(name, zip).await?;
    let intake_ms = elapsed_ms(t);
    let t = Instant::now();
    let deadline = t + Duration::from_secs(900);
    let mut progress: Vec<String> = Vec::new();
    let record = loop {
        let body = api.get_json(&format!("/bgrs/{rid}")).await?;
        let record = body[0].clone();
        if let Some(p) = record["progress"].as_str()
            && progress.last().map(String::as_str) != Some(p)
        {
            progress.push(p.to_string());
        }
        if record["status_id"] != "2" {
            break record;
        }
        ensure!(
            Instant::now() < deadline,
            "request {rid} did not finish in 900 s"
        );
        tokio::time::sleep(poll).await;
    };
    let rows_ms = elapsed_ms(t);
    ensure!(
        record["status_id"] == "4" && record["status"] == "200",
        "request {rid} ended as {record}"
    );
    let result = api.get(&format!("/bgrs/{rid}/result")).await?;
    let text = String::from_utf8_lossy(&result);
    let ok = text
        .lines()
        .skip(1)
        .filter(|l| l.starts_with("OK;"))
        .count();
    if ok != pages {
        let first_bad = text.lines().skip(1).find(|l| !l.starts_with("OK;"));
        bail!("{ok} of {pages} rows OK in request {rid}; the first other: {first_bad:?}");
    }
    let details = api.get_json(&format!("/bgrs/{rid}/details")).await?;
    let made = format!("{pages} markers created from pages.pdf");
    ensure!(
        details.as_array().is_some_and(|d| d
            .iter()
            .any(|e| e["details"].as_str().is_some_and(|s| s.starts_with(&made)))),
        "the log of {rid} does not say `{made}`: {details}"
    );
    Ok(Run {
        intake_ms,
        rows_ms,
        progress,
    })
}

/// A fresh place below the `--storage-url` for one server or one baseline: its URL and its
/// name below the URL.
fn fresh_store(url: &str, what: &str) -> (String, String) {
    let name = format!("bench-bundle-{what}-{}", random_hex());
    (format!("{}/{name}", url.trim_end_matches('/')), name)
}

/// Removes what a benchmark stored under `name` below the `--storage-url`.
async fn remove_store(url: &str, name: &str) {
    let removed = match entiserve::files::Files::open(Some(url), Path::new(".")) {
        Ok(files) => files.remove_prefix(name).await.map_err(anyhow::Error::from),
        Err(e) => Err(e),
    };
    if let Err(e) = removed {
        eprintln!("cannot remove {name} from the store: {e:#}");
    }
}

/// Starts a server for `backend` (its files in `storage_url` when given), runs the bundle
/// `args.runs` times and stops it.
async fn bench_backend(
    report: &mut Report,
    args: &Args,
    helper: &Path,
    zip: &[u8],
    backend: Backend,
    database_url: Option<&str>,
    storage_url: Option<&str>,
) -> Result<()> {
    let label = match storage_url {
        Some(_) => format!("{}, object store", backend.label()),
        None => backend.label().to_string(),
    };
    let label = label.as_str();
    let data = tempfile::Builder::new()
        .prefix("entiserve-bench-")
        .tempdir()?;
    let place = storage_url.map(|u| (u, fresh_store(u, "server")));
    if let Some((_, (u, _))) = &place {
        eprintln!("[{label}] files in {}", redact(u));
    }
    let server_store = place.as_ref().map(|(_, (u, _))| u.as_str());
    let server = Server::start(args, helper, data.path(), database_url, server_store).await?;
    let api = Api::new(&server.base)?;
    // The first request verifies the password (argon2); later ones hit the credential cache.
    api.get("/users/me").await?;
    let tag = random_hex();
    let (mut intake, mut rows, mut total, mut seen) = (
        Stats::default(),
        Stats::default(),
        Stats::default(),
        Vec::new(),
    );
    let mut result = Ok(());
    for run in 1..=args.runs {
        let name = format!("bench-{tag}-{run}.zip");
        settle();
        match one_run(
            &api,
            zip.to_vec(),
            &name,
            args.pages,
            Duration::from_millis(args.poll_ms),
        )
        .await
        {
            Ok(r) => {
                eprintln!(
                    "[{label}] run {run}: 202 after {:.0} ms, finished {:.0} ms later; progress {}",
                    r.intake_ms,
                    r.rows_ms,
                    r.progress.join(" → ")
                );
                intake.0.push(r.intake_ms);
                rows.0.push(r.rows_ms);
                total.0.push(r.intake_ms + r.rows_ms);
                seen.push(r.progress);
            }
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    server.stop().await?;
    if let Some((base, (_, name))) = &place {
        remove_store(base, name).await;
    }
    result?;
    for (what, stats) in [
        (
            "upload → 202 (intake: receive, extract, split in the child, store files)",
            intake,
        ),
        ("202 → finished (campaign, markers, asset rows)", rows),
        ("upload → finished", total),
    ] {
        report.rows.push(Row {
            backend: label.into(),
            what: what.into(),
            stats,
        });
    }
    report.progress.push((label.into(), seen));
    Ok(())
}

/// A throwaway PostgreSQL database.
struct PgDatabase {
    admin_url: String,
    name: String,
    url: String,
}

impl PgDatabase {
    async fn create(admin_url: &str) -> Result<PgDatabase> {
        let name = format!("entiserve_bench_{}", random_hex());
        let db = PgDatabase {
            admin_url: admin_url.to_string(),
            url: with_database(admin_url, &name)?,
            name,
        };
        db.execute(format!("CREATE DATABASE \"{}\"", db.name))
            .await?;
        Ok(db)
    }

    async fn drop_database(self) -> Result<()> {
        let sql = format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name);
        self.execute(sql).await
    }

    async fn execute(&self, sql: String) -> Result<()> {
        use sqlx::Connection;
        eprintln!("sqlx on {}: {sql}", redact(&self.admin_url));
        let mut conn = sqlx::PgConnection::connect(&self.admin_url)
            .await
            .with_context(|| format!("cannot connect to {}", redact(&self.admin_url)))?;
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .execute(&mut conn)
            .await?;
        conn.close().await?;
        Ok(())
    }
}

/// PostgreSQL on a fresh database, dropped afterwards.
async fn bench_postgres(
    report: &mut Report,
    args: &Args,
    helper: &Path,
    zip: &[u8],
    storage_url: Option<&str>,
) -> Result<()> {
    let admin_url = args
        .database_url
        .as_deref()
        .context("--backend postgres needs --database-url")?;
    let db = PgDatabase::create(admin_url).await?;
    let url = db.url.clone();
    let result = bench_backend(
        report,
        args,
        helper,
        zip,
        Backend::Postgres,
        Some(&url),
        storage_url,
    )
    .await;
    db.drop_database().await?;
    result
}

/// Flushes dirty pages so that one measurement's writes are not paid for by the next.
fn settle() {
    let _ = std::process::Command::new("sync").status();
}

/// Parts of the intake without the server, interleaved per run: the ZIP extraction; the PDF
/// split in this process with the pages kept in memory, in this process with the pages
/// written to files as the child writes them, and in the contained child; storing the pages
/// and res/ files in a local file store as the plugins do.
async fn baselines(
    report: &mut Report,
    args: &Args,
    helper: &Path,
    pdf: &[u8],
    zip: &[u8],
) -> Result<()> {
    use entiserve::pdf::{ChildLimits, PdfError, page_file, split, split_contained, split_each};
    let max = entiserve::settings::Settings::new(".", ".").pdf_max_pages;
    let dir = tempfile::Builder::new()
        .prefix("entiserve-bench-split-")
        .tempdir()?;
    let input = dir.path().join("pages.pdf");
    std::fs::write(&input, pdf)?;
    let archive = dir.path().join("bundle.zip");
    std::fs::write(&archive, zip)?;
    let limits = entiserve::uploader::bundle::ZipLimits::default();
    let store_cap = entiserve::settings::Settings::new("data", "entities").max_upload_store_bytes;
    let store = entiserve::files::Files::local(dir.path().join("media"));
    let remote_place = args
        .storage_url
        .as_deref()
        .map(|u| fresh_store(u, "baseline"));
    let remote = match &remote_place {
        Some((u, _)) => Some(
            entiserve::files::Files::open(Some(u), dir.path())
                .context("the --storage-url store does not open")?,
        ),
        None => None,
    };
    let (mut extract, mut memory, mut files, mut child, mut put) = Default::default();
    let mut put_remote = Stats::default();
    for run in 1..=args.runs {
        let out = dir.path().join(format!("extract-{run}"));
        settle();
        let t = Instant::now();
        let extracted = entiserve::uploader::bundle::extract(&archive, &out, &limits, store_cap)?;
        Stats::push(&mut extract, elapsed_ms(t));
        ensure!(
            extracted.res.len() == args.pages,
            "extract gave {} res/ files",
            extracted.res.len()
        );

        settle();
        let t = Instant::now();
        let n = split(pdf, max)?.len();
        Stats::push(&mut memory, elapsed_ms(t));
        ensure!(n == args.pages, "split gave {n} pages");

        let out = dir.path().join(format!("in-process-{run}"));
        std::fs::create_dir_all(&out)?;
        settle();
        let t = Instant::now();
        let n = split_each(pdf, max, |n, page| {
            std::fs::write(out.join(page_file(n)), page)
                .map_err(|e| PdfError::Failed(e.to_string()))
        })?;
        Stats::push(&mut files, elapsed_ms(t));
        ensure!(n == args.pages, "split_each gave {n} pages");

        let out = dir.path().join(format!("child-{run}"));
        settle();
        let t = Instant::now();
        let n = split_contained(helper, &input, &out, max, &ChildLimits::default()).await?;
        Stats::push(&mut child, elapsed_ms(t));
        ensure!(n == args.pages, "the child split {n} pages");

        // Into the object store first (copies: the local files are moved below).
        if let Some(remote) = &remote {
            settle();
            let t = Instant::now();
            for p in 1..=n {
                let key = format!("markers/run{run}/pages/page-{p:03}.pdf");
                remote.put_copy(&key, &out.join(page_file(p))).await?;
            }
            for (rel, file) in &extracted.res {
                remote
                    .put_copy(&format!("assets/run{run}/res/{rel}"), file)
                    .await?;
            }
            Stats::push(&mut put_remote, elapsed_ms(t));
            eprintln!(
                "[baseline] run {run}: store into the object store {:.0} ms",
                put_remote.0[run - 1]
            );
        }

        // As the plugins store them: the one-page PDFs, then the res/ files (renames).
        settle();
        let t = Instant::now();
        for p in 1..=n {
            let key = format!("markers/run{run}/pages/page-{p:03}.pdf");
            store.put(&key, &out.join(page_file(p))).await?;
        }
        for (rel, file) in &extracted.res {
            store
                .put(&format!("assets/run{run}/res/{rel}"), file)
                .await?;
        }
        Stats::push(&mut put, elapsed_ms(t));
        eprintln!(
            "[baseline] run {run}: extract {:.0} ms; split in memory {:.0} ms, to files {:.0} ms, \
             in the child {:.0} ms; store {:.0} ms",
            extract.0[run - 1],
            memory.0[run - 1],
            files.0[run - 1],
            child.0[run - 1],
            put.0[run - 1]
        );
    }
    let entries = format!(
        "`bundle::extract` in this process: the ZIP's {} entries to files",
        args.pages + 4
    );
    let stored = format!(
        "`Files::put` (local directory) of the {} pages and {} res/ files",
        args.pages, args.pages
    );
    for (what, stats) in [
        (entries.as_str(), extract),
        ("`pdf::split` in this process, pages kept in memory", memory),
        (
            "`pdf::split_each` in this process, pages written to files",
            files,
        ),
        (
            "`pdf::split_contained`: the `pdf-pages` child, pages written to files",
            child,
        ),
        (&stored, put),
    ] {
        report.rows.push(Row {
            backend: "baseline".into(),
            what: what.into(),
            stats,
        });
    }
    if let (Some(base), Some((_, name))) = (&args.storage_url, &remote_place) {
        remove_store(base, name).await;
        report.rows.push(Row {
            backend: "baseline".into(),
            what: format!(
                "`Files::put_copy` (object store, one at a time) of the {} pages and {} res/ files",
                args.pages, args.pages
            ),
            stats: put_remote,
        });
    }
    Ok(())
}

fn backends(args: &Args) -> Vec<Backend> {
    if !args.backend.is_empty() {
        return args.backend.clone();
    }
    let mut b = vec![Backend::Sqlite];
    if args.database_url.is_some() {
        b.push(Backend::Postgres);
    }
    b
}

fn print_report(report: &Report, args: &Args, pdf_len: usize, zip_len: usize) {
    let argv: Vec<String> = std::env::args().map(|a| redact(&a)).collect();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("\n## entiserve bundle benchmark");
    println!();
    println!(
        "Server in the client's process, {cores} cores. Command: `{}`",
        argv.join(" ")
    );
    println!(
        "Bundle: {} pages in pages.pdf ({:.1} MB), {} CSV rows, {} files in res/img/; ZIP {:.1} MB; {} runs.",
        args.pages,
        pdf_len as f64 / 1e6,
        args.pages,
        args.pages,
        zip_len as f64 / 1e6,
        args.runs
    );
    for n in &report.notes {
        println!("- {n}");
    }
    println!();
    println!("| Backend | Measurement | Runs | Median ms | Min ms | Max ms |");
    println!("|---|---|---:|---:|---:|---:|");
    for r in &report.rows {
        let s = &r.stats;
        println!(
            "| {} | {} | {} | {:.0} | {:.0} | {:.0} |",
            r.backend,
            r.what,
            s.0.len(),
            s.median(),
            s.min(),
            s.max()
        );
    }
    println!();
    for (backend, runs) in &report.progress {
        for (i, p) in runs.iter().enumerate() {
            println!(
                "- {backend}, run {}: progress seen {}",
                i + 1,
                p.join(" → ")
            );
        }
    }
}

async fn run(args: Args) -> Result<()> {
    ensure!(args.runs > 0, "runs must be at least 1");
    ensure!(args.pages > 0, "pages must be at least 1");
    let helper = helper_exe()?;
    let t = Instant::now();
    let pdf = pdf_sample::sample_pdf(args.pages);
    let zip = bundle(&pdf, args.pages)?;
    eprintln!(
        "bundle built in {:.0} ms: pages.pdf {} bytes, ZIP {} bytes",
        elapsed_ms(t),
        pdf.len(),
        zip.len()
    );
    let mut report = Report::default();
    report
        .notes
        .push(format!("PDF child: `{} pdf-pages`", helper.display()));
    let mut failures = Vec::new();
    // The baselines first, before any server has loaded the machine.
    if let Err(e) = baselines(&mut report, &args, &helper, &pdf, &zip).await {
        failures.push(format!("baseline: {e:#}"));
    }
    let stores: Vec<Option<&str>> = match &args.storage_url {
        Some(u) => vec![None, Some(u.as_str())],
        None => vec![None],
    };
    for backend in backends(&args) {
        for &store in &stores {
            let result = match backend {
                Backend::Sqlite => {
                    bench_backend(&mut report, &args, &helper, &zip, backend, None, store).await
                }
                Backend::Postgres => bench_postgres(&mut report, &args, &helper, &zip, store).await,
            };
            let label = format!(
                "{}{}",
                backend.label(),
                if store.is_some() {
                    ", object store"
                } else {
                    ""
                }
            );
            if let Err(e) = result {
                eprintln!("[{label}] failed: {e:#}");
                failures.push(format!("{label}: {e:#}"));
            }
        }
    }
    print_report(&report, &args, pdf.len(), zip.len());
    ensure!(failures.is_empty(), "{}", failures.join("\n"));
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    // The in-process server's log, on stderr, only when asked for (`RUST_LOG=info`).
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    run(Args::parse()).await
}
