//! Batch benchmark: the real `entiserve` server over HTTP, with the client on the same machine.
//!
//! ```text
//! cargo run --release --example bench_batch                       # SQLite (+ PostgreSQL if TEST_DATABASE_URL is set)
//! cargo run --release --example bench_batch -- --database-url postgres://postgres@127.0.0.1:5432/test
//! cargo run --release --example bench_batch -- --backend sqlite --sync-runs 11 --bg-runs 5
//! ```
//!
//! For each backend it builds (`cargo build --release --bin entiserve`, skip with
//! `--no-build`) and spawns `target/release/entiserve serve` on a free port with a fresh data
//! directory, then measures:
//!
//! 1. a synchronous batch (`POST /v2.5/campaigns?bgrs=false`) of 10,000 creates: the wall time
//!    of the HTTP request with the body prepared beforehand; 1 warm-up, then N runs;
//! 2. a background batch (`POST /v2.5/campaigns`) of 100,000 creates: the time from sending the
//!    POST until `GET /bgrs/<rid>` (polled every 5 ms) reports `status_id` 4; the time to the
//!    202 reply (the enqueue) is shown on its own row;
//! 3. a baseline: the `sqlite3` CLI running 10,000 `INSERT`s of the same rows into a table of
//!    the same shape in one transaction (`sqlite3 <db> < file.sql`), if `sqlite3` is on PATH.
//!
//! Every result is checked (item count, every item status 200). For PostgreSQL a fresh
//! database `entiserve_bench_<hex>` is created on the given server and dropped afterwards.
//! Progress goes to stderr; the report (commands run, Markdown table, targets) to stdout.

#[path = "support/bench.rs"]
mod support;

use anyhow::{Context, Result, bail, ensure};
use clap::{Parser, ValueEnum};
use entiserve::storage::redact;
use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::{Stats, elapsed_ms, random_hex, with_database};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStderr, Command};

/// Sync 10k creates median target, in ms: SQLite, PostgreSQL.
const SYNC_TARGET_MS: [f64; 2] = [40.0, 60.0];
/// Background 100k creates target (POST to finished), in ms: SQLite, PostgreSQL.
const BG_TARGET_MS: [f64; 2] = [600.0, 1000.0];

/// The target of `backend` among `targets` (SQLite's, PostgreSQL's).
fn target_of(backend: Backend, targets: [f64; 2]) -> f64 {
    match backend {
        Backend::Sqlite => targets[0],
        Backend::Postgres => targets[1],
    }
}
const ADMIN_PASSWORD: &str = "bench";
const LISTENING: &str = "entiserve listening on http://";

#[derive(Parser, Debug)]
#[command(about = "Benchmark of entiserve's synchronous and background batches")]
struct Args {
    /// Backend(s) to measure; default: sqlite, plus postgres when a database URL is known.
    #[arg(long, value_enum)]
    backend: Vec<Backend>,
    /// A PostgreSQL server URL; a fresh database is created on it and dropped afterwards.
    #[arg(long, env = "TEST_DATABASE_URL")]
    database_url: Option<String>,
    /// Items of the synchronous batch.
    #[arg(long, default_value_t = 10_000)]
    sync_items: usize,
    /// Timed runs of the synchronous batch (after one warm-up).
    #[arg(long, default_value_t = 7)]
    sync_runs: usize,
    /// Items of the background batch.
    #[arg(long, default_value_t = 100_000)]
    bg_items: usize,
    /// Timed runs of the background batch.
    #[arg(long, default_value_t = 3)]
    bg_runs: usize,
    /// Polling interval of `GET /bgrs/<rid>`, in ms.
    #[arg(long, default_value_t = 5)]
    poll_ms: u64,
    /// The server binary; default: target/release/entiserve next to this example.
    #[arg(long)]
    server_bin: Option<PathBuf>,
    /// Do not run `cargo build --release --bin entiserve` first.
    #[arg(long)]
    no_build: bool,
    /// Entity definitions the server serves.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/entities"))]
    entities: PathBuf,
    /// Skip the sqlite3 CLI baseline.
    #[arg(long)]
    no_baseline: bool,
    /// Every N-th item (items N-1, 2N-1, ...) carries a `type` that is not an integer, which
    /// the server refuses: `--fail-every 100` gives 1% failing items. Those items must fail and
    /// every other one must be created. 0: none fails.
    #[arg(long, default_value_t = 0)]
    fail_every: usize,
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
    items: usize,
    stats: Stats,
    /// Target in ms, checked against the median.
    target: Option<f64>,
}

/// What the report prints: the commands that ran and the measured rows.
#[derive(Default)]
struct Report {
    commands: Vec<String>,
    rows: Vec<Row>,
}

impl Report {
    fn command(&mut self, c: String) {
        eprintln!("$ {c}");
        self.commands.push(c);
    }
    fn median_of(&self, backend: &str, what_prefix: &str) -> Option<f64> {
        self.rows
            .iter()
            .find(|r| r.backend == backend && r.what.starts_with(what_prefix))
            .map(|r| r.stats.median())
    }
}

// ---------------------------------------------------------------------------------------------
// Workload
// ---------------------------------------------------------------------------------------------

/// The name of item `i` of the run `tag`: unique per run.
fn item_name(tag: &str, i: usize) -> String {
    format!("bench {tag} {i}")
}

/// Whether item `i` is one of those made to fail (see `Args::fail_every`).
fn failing(i: usize, fail_every: usize) -> bool {
    fail_every > 0 && i % fail_every == fail_every - 1
}

/// How the report names a workload with failing items.
fn failing_note(fail_every: usize) -> String {
    match fail_every {
        0 => String::new(),
        n => format!(", 1 item in {n} failing"),
    }
}

/// The JSON array of `n` campaign creates, every `fail_every`-th with a `type` the server
/// refuses.
fn campaigns_body(tag: &str, n: usize, fail_every: usize) -> Vec<u8> {
    let items: Vec<Json> = (0..n)
        .map(|i| {
            let kind = if failing(i, fail_every) {
                Json::from("not a number")
            } else {
                Json::from(2)
            };
            serde_json::json!({"name": item_name(tag, i), "type": kind, "description": "x"})
        })
        .collect();
    serde_json::to_vec(&items).expect("JSON of plain values")
}

/// Checks a batch result: `n` items, those made to fail with a 4xx status, every other one
/// with 200.
fn check_items(body: &[u8], n: usize, fail_every: usize) -> Result<()> {
    let items: Vec<Json> = serde_json::from_slice(body).context("the batch result is JSON")?;
    ensure!(
        items.len() == n,
        "the batch result has {} items, not {n}",
        items.len()
    );
    let wrong = |(i, item): &(usize, &Json)| {
        let status = item["status"].as_u64().unwrap_or(0);
        if failing(*i, fail_every) {
            !(400..500).contains(&status)
        } else {
            status != 200
        }
    };
    if let Some((i, bad)) = items.iter().enumerate().find(wrong) {
        let count = items.iter().enumerate().filter(wrong).count();
        bail!("{count} of {n} items did not end as they should; the first, item {i}: {bad}");
    }
    Ok(())
}

fn check_status(got: reqwest::StatusCode, want: u16, body: &[u8]) -> Result<()> {
    ensure!(
        got.as_u16() == want,
        "HTTP {got} instead of {want}: {}",
        String::from_utf8_lossy(&body[..body.len().min(500)])
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The server
// ---------------------------------------------------------------------------------------------

/// A spawned server and the last lines of its stderr.
struct Server {
    child: Child,
    base: String,
    log: Arc<Mutex<Vec<String>>>,
}

impl Server {
    async fn start(
        report: &mut Report,
        bin: &Path,
        entities: &Path,
        data_dir: &Path,
        database_url: Option<&str>,
    ) -> Result<Server> {
        let mut args: Vec<String> = vec![
            "serve".into(),
            "--bind".into(),
            "127.0.0.1:0".into(),
            "--data-dir".into(),
            data_dir.display().to_string(),
            "--entities".into(),
            entities.display().to_string(),
        ];
        if let Some(url) = database_url {
            args.extend(["--database-url".into(), url.to_string()]);
        }
        let shown: Vec<String> = args.iter().map(|a| redact(a)).collect();
        report.command(format!(
            "ENTISERVE_ADMIN_PASSWORD={ADMIN_PASSWORD} RUST_LOG=warn {} {}",
            bin.display(),
            shown.join(" ")
        ));
        let mut child = Command::new(bin)
            .args(&args)
            .env("ENTISERVE_ADMIN_PASSWORD", ADMIN_PASSWORD)
            .env("RUST_LOG", "warn")
            .env_remove("DATABASE_URL")
            .env_remove("ENTISERVE_DEV")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start {}", bin.display()))?;
        let stderr = child.stderr.take().expect("stderr is piped");
        let log = Arc::new(Mutex::new(Vec::new()));
        let addr = tokio::time::timeout(
            Duration::from_secs(120),
            wait_listening(stderr, log.clone()),
        )
        .await
        .context("the server did not start within 120 s")??;
        Ok(Server {
            child,
            base: format!("http://{addr}"),
            log,
        })
    }

    /// The last lines of stderr and, if the server has exited, how.
    fn post_mortem(&mut self) -> String {
        use std::os::unix::process::ExitStatusExt;
        let exit = match self.child.try_wait() {
            Ok(Some(s)) => match s.signal() {
                Some(sig) => format!("the server was killed by signal {sig}"),
                None => format!("the server exited with {s} (0: a SIGINT/SIGTERM shutdown)"),
            },
            Ok(None) => {
                "the server is still running (refused connections then mean a SIGTERM/SIGINT \
                 shutdown that waits for running requests)"
                    .into()
            }
            Err(e) => format!("the server's state is unknown: {e}"),
        };
        let log = self.log.lock().expect("log lock");
        let tail = log[log.len().saturating_sub(20)..].join("\n");
        format!("{exit}; its last stderr lines:\n{tail}")
    }

    async fn stop(mut self) -> Result<()> {
        self.child.kill().await.context("cannot stop the server")
    }
}

/// Reads stderr until the listening line and returns its address; then keeps draining stderr
/// into `log` (the last 200 lines) so that the server never blocks on a full pipe.
async fn wait_listening(stderr: ChildStderr, log: Arc<Mutex<Vec<String>>>) -> Result<String> {
    let mut lines = BufReader::new(stderr).lines();
    let push = |log: &Mutex<Vec<String>>, line: String| {
        let mut l = log.lock().expect("log lock");
        if l.len() >= 200 {
            l.remove(0);
        }
        l.push(line);
    };
    while let Some(line) = lines.next_line().await? {
        push(&log, line.clone());
        if let Some((_, addr)) = line.split_once(LISTENING) {
            let addr = addr.trim().to_string();
            tokio::spawn(async move {
                while let Ok(Some(line)) = lines.next_line().await {
                    push(&log, line);
                }
            });
            return Ok(addr);
        }
    }
    let tail = log.lock().expect("log lock").join("\n");
    bail!("the server exited before listening:\n{tail}")
}

/// An HTTP client of one server.
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

    /// POSTs a prepared batch body; returns the status and the whole response body.
    async fn post(&self, path: &str, body: Vec<u8>) -> Result<(reqwest::StatusCode, Vec<u8>)> {
        let resp = self
            .client
            .post(format!("{}{path}", self.base))
            .basic_auth("admin", Some(ADMIN_PASSWORD))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await?;
        let status = resp.status();
        Ok((status, resp.bytes().await?.to_vec()))
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
        check_status(status, 200, &body)?;
        Ok(body)
    }
}

// ---------------------------------------------------------------------------------------------
// Measurements
// ---------------------------------------------------------------------------------------------

/// One synchronous batch of `n` creates: the wall time of the request, in ms.
async fn time_sync_batch(api: &Api, tag: &str, n: usize, fail_every: usize) -> Result<f64> {
    let body = campaigns_body(tag, n, fail_every);
    let t = Instant::now();
    let (status, reply) = api.post("/v2.5/campaigns?bgrs=false", body).await?;
    let ms = elapsed_ms(t);
    check_status(status, 200, &reply)?;
    check_items(&reply, n, fail_every)?;
    Ok(ms)
}

/// One background batch of `n` creates: (ms to the 202 reply, ms until finished).
async fn time_background_batch(
    api: &Api,
    tag: &str,
    n: usize,
    fail_every: usize,
    poll: Duration,
) -> Result<(f64, f64)> {
    let body = campaigns_body(tag, n, fail_every);
    let t = Instant::now();
    let (status, reply) = api.post("/v2.5/campaigns", body).await?;
    let enqueue_ms = elapsed_ms(t);
    check_status(status, 202, &reply)?;
    let accepted: Json = serde_json::from_slice(&reply)?;
    let rid = accepted["request"]
        .as_str()
        .context("the 202 reply names the request")?
        .to_string();
    wait_finished(api, &rid, poll).await?;
    let total_ms = elapsed_ms(t);
    let result = api.get(&format!("/v2.5/bgrs/{rid}/result")).await?;
    check_items(&result, n, fail_every)?;
    Ok((enqueue_ms, total_ms))
}

/// Polls `GET /bgrs/<rid>` every `poll` until its `status_id` is 4 (finished).
async fn wait_finished(api: &Api, rid: &str, poll: Duration) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        let body = api.get(&format!("/v2.5/bgrs/{rid}")).await?;
        let record: Json = serde_json::from_slice(&body)?;
        match record[0]["status_id"].as_str() {
            Some("4") => return Ok(()),
            Some("2") => {}
            other => bail!("background request {rid} ended with status_id {other:?}: {record}"),
        }
        ensure!(
            Instant::now() < deadline,
            "background request {rid} did not finish in 900 s"
        );
        tokio::time::sleep(poll).await;
    }
}

/// Both batch measurements on a running server; rows are added to `report`.
async fn measure_server(
    report: &mut Report,
    args: &Args,
    backend: Backend,
    api: &Api,
) -> Result<()> {
    let label = backend.label();
    let run_tag = random_hex();
    eprintln!("[{label}] sync warm-up ({} items)", args.sync_items);
    let fail = args.fail_every;
    time_sync_batch(api, &format!("{run_tag} warm"), args.sync_items, fail).await?;
    let mut sync = Vec::new();
    for run in 1..=args.sync_runs {
        let tag = format!("{run_tag} sync{run}");
        let ms = time_sync_batch(api, &tag, args.sync_items, fail).await?;
        eprintln!("[{label}] sync run {run}: {ms:.1} ms");
        sync.push(ms);
    }
    report.rows.push(Row {
        backend: label.into(),
        what: format!("sync batch, HTTP request{}", failing_note(fail)),
        items: args.sync_items,
        stats: Stats(sync),
        target: (args.sync_items == 10_000).then(|| target_of(backend, SYNC_TARGET_MS)),
    });
    let poll = Duration::from_millis(args.poll_ms);
    let (mut enqueue, mut total) = (Vec::new(), Vec::new());
    for run in 1..=args.bg_runs {
        let tag = format!("{run_tag} bg{run}");
        let (e, t) = time_background_batch(api, &tag, args.bg_items, fail, poll).await?;
        eprintln!("[{label}] background run {run}: 202 after {e:.1} ms, finished after {t:.1} ms");
        enqueue.push(e);
        total.push(t);
    }
    report.rows.push(Row {
        backend: label.into(),
        what: format!("background batch, POST → finished{}", failing_note(fail)),
        items: args.bg_items,
        stats: Stats(total),
        target: (args.bg_items == 100_000).then(|| target_of(backend, BG_TARGET_MS)),
    });
    report.rows.push(Row {
        backend: label.into(),
        what: "↳ of which POST → 202 (enqueue)".into(),
        items: args.bg_items,
        stats: Stats(enqueue),
        target: None,
    });
    Ok(())
}

/// Starts a server for `backend`, measures it and stops it.
async fn bench_backend(
    report: &mut Report,
    args: &Args,
    bin: &Path,
    backend: Backend,
    database_url: Option<&str>,
) -> Result<()> {
    let data = tempfile::Builder::new()
        .prefix("entiserve-bench-")
        .tempdir()?;
    let mut server = Server::start(report, bin, &args.entities, data.path(), database_url).await?;
    let api = Api::new(&server.base)?;
    let result = measure_server(report, args, backend, &api).await;
    if result.is_err() {
        eprintln!("[{}] {}", backend.label(), server.post_mortem());
    }
    server.stop().await?;
    result
}

/// A throwaway PostgreSQL database.
struct PgDatabase {
    admin_url: String,
    name: String,
    url: String,
}

impl PgDatabase {
    async fn create(report: &mut Report, admin_url: &str) -> Result<PgDatabase> {
        let name = format!("entiserve_bench_{}", random_hex());
        let db = PgDatabase {
            admin_url: admin_url.to_string(),
            url: with_database(admin_url, &name)?,
            name,
        };
        db.execute(report, format!("CREATE DATABASE \"{}\"", db.name))
            .await?;
        Ok(db)
    }

    async fn drop_database(self, report: &mut Report) -> Result<()> {
        let sql = format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name);
        self.execute(report, sql).await
    }

    async fn execute(&self, report: &mut Report, sql: String) -> Result<()> {
        use sqlx::Connection;
        report.command(format!("sqlx on {}: {sql}", redact(&self.admin_url)));
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

async fn bench_postgres(report: &mut Report, args: &Args, bin: &Path) -> Result<()> {
    let admin_url = args
        .database_url
        .as_deref()
        .context("--backend postgres needs --database-url or TEST_DATABASE_URL")?;
    let db = PgDatabase::create(report, admin_url).await?;
    let url = db.url.clone();
    let result = bench_backend(report, args, bin, Backend::Postgres, Some(&url)).await;
    db.drop_database(report).await?;
    result
}

// ---------------------------------------------------------------------------------------------
// The sqlite3 CLI baseline
// ---------------------------------------------------------------------------------------------

/// The campaigns table as the server creates it on SQLite (see src/storage/ddl.rs).
const BASELINE_SCHEMA: &str = "PRAGMA journal_mode = WAL;
CREATE TABLE \"campaigns\" (\"id\" INTEGER PRIMARY KEY AUTOINCREMENT, \"name\" TEXT, \
\"type\" INTEGER DEFAULT 1, \"description\" TEXT, \"is_active\" INTEGER DEFAULT 1, \
\"created_dt\" TEXT NOT NULL, \"updated_dt\" TEXT NOT NULL);\n";

/// `BEGIN; INSERT ... (one per row); COMMIT;` with the server's connection pragmas.
fn baseline_sql(tag: &str, n: usize) -> String {
    let mut sql = String::with_capacity(n * 200);
    sql.push_str("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;\nBEGIN;\n");
    for i in 0..n {
        sql.push_str(&format!(
            "INSERT INTO \"campaigns\" (\"name\", \"type\", \"description\", \"is_active\", \
             \"created_dt\", \"updated_dt\") VALUES ('{}', 2, 'x', 1, \
             '2025-01-01 00:00:00', '2025-01-01 00:00:00');\n",
            item_name(tag, i)
        ));
    }
    sql.push_str("COMMIT;\n");
    sql
}

/// Runs `sqlite3 db < file`; returns the wall time in ms.
fn run_sqlite3(db: &Path, file: &Path) -> Result<f64> {
    let input = std::fs::File::open(file)?;
    let t = Instant::now();
    let out = std::process::Command::new("sqlite3")
        .arg(db)
        .stdin(input)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()?;
    let ms = elapsed_ms(t);
    ensure!(
        out.status.success() && out.stderr.is_empty(),
        "sqlite3 failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(ms)
}

fn sqlite3_available() -> bool {
    std::process::Command::new("sqlite3")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The baseline: 1 warm-up, then `runs` timed imports of `n` fresh rows into one database.
fn sqlite3_baseline(report: &mut Report, n: usize, runs: usize) -> Result<()> {
    let dir = tempfile::Builder::new()
        .prefix("entiserve-baseline-")
        .tempdir()?;
    let db = dir.path().join("baseline.db");
    let schema = dir.path().join("schema.sql");
    std::fs::write(&schema, BASELINE_SCHEMA)?;
    run_sqlite3(&db, &schema)?;
    let tag = random_hex();
    let mut times = Vec::new();
    for run in 0..=runs {
        let file = dir.path().join(format!("insert{run}.sql"));
        std::fs::write(&file, baseline_sql(&format!("{tag} base{run}"), n))?;
        if run == 0 {
            report.command(format!(
                "sqlite3 {} < {} (schema: {}; one file per run)",
                db.display(),
                file.display(),
                schema.display()
            ));
        }
        let ms = run_sqlite3(&db, &file)?;
        if run > 0 {
            eprintln!("[sqlite3] baseline run {run}: {ms:.1} ms");
            times.push(ms);
        }
    }
    report.rows.push(Row {
        backend: "sqlite3 CLI".into(),
        what: "baseline: INSERTs in 1 transaction".into(),
        items: n,
        stats: Stats(times),
        target: None,
    });
    Ok(())
}

/// The baseline unless `--no-baseline` or `sqlite3` is not on PATH.
fn baseline(report: &mut Report, args: &Args) -> Result<()> {
    if args.no_baseline {
        return Ok(());
    }
    if !sqlite3_available() {
        eprintln!("sqlite3 is not on PATH: no baseline");
        return Ok(());
    }
    sqlite3_baseline(report, args.sync_items, args.sync_runs)
}

// ---------------------------------------------------------------------------------------------
// Driver and report
// ---------------------------------------------------------------------------------------------

/// The server binary, built first unless `--no-build`.
fn server_binary(report: &mut Report, args: &Args) -> Result<PathBuf> {
    if let Some(bin) = &args.server_bin {
        return Ok(bin.clone());
    }
    let manifest_dir = env!("CARGO_MANIFEST_DIR");
    if !args.no_build {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        report.command(format!(
            "{cargo} build --release --quiet --bin entiserve (in {manifest_dir})"
        ));
        let status = std::process::Command::new(&cargo)
            .args(["build", "--release", "--quiet", "--bin", "entiserve"])
            .current_dir(manifest_dir)
            .status()?;
        ensure!(status.success(), "building the server failed");
    }
    // This example runs from target/<profile>/examples/; the server sits in target/<profile>/.
    let exe = std::env::current_exe()?;
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .map(|dir| dir.join("entiserve"))
        .context("locating target/release/entiserve")?;
    ensure!(
        bin.exists(),
        "{} is missing; build it or pass --server-bin",
        bin.display()
    );
    Ok(bin)
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

fn verdict(row: &Row) -> String {
    match row.target {
        Some(t) if row.stats.median() <= t => format!("≤ {t:.0} ms: **PASS**"),
        Some(t) => format!("≤ {t:.0} ms: **FAIL**"),
        None => "—".into(),
    }
}

fn print_report(report: &Report) {
    let argv: Vec<String> = std::env::args().map(|a| redact(&a)).collect();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("\n## entiserve batch benchmark");
    println!();
    println!(
        "Client and server on the same machine ({cores} cores). Commands: `{}`",
        argv.join(" ")
    );
    for c in &report.commands {
        println!("- `{c}`");
    }
    println!();
    println!(
        "| Backend | Measurement | Items | Runs | Median ms | Min ms | Max ms | Items/s (median) | Target (median) |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---|");
    for r in &report.rows {
        let s = &r.stats;
        println!(
            "| {} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.0} | {} |",
            r.backend,
            r.what,
            r.items,
            s.0.len(),
            s.median(),
            s.min(),
            s.max(),
            r.items as f64 * 1000.0 / s.median(),
            verdict(r)
        );
    }
    if let Some(base) = report.median_of("sqlite3 CLI", "baseline") {
        println!();
        for b in [Backend::Sqlite, Backend::Postgres] {
            if let Some(ours) = report.median_of(b.label(), "sync") {
                println!(
                    "- {} sync batch / sqlite3 CLI baseline (medians): {:.1}×",
                    b.label(),
                    ours / base
                );
            }
        }
    }
}

async fn run(args: Args) -> Result<()> {
    ensure!(
        args.sync_runs > 0 && args.bg_runs > 0,
        "runs must be at least 1"
    );
    let mut report = Report::default();
    let bin = server_binary(&mut report, &args)?;
    let mut failures = Vec::new();
    // The baseline first, before any server has loaded the machine or the disk.
    if let Err(e) = baseline(&mut report, &args) {
        failures.push(format!("sqlite3 baseline: {e:#}"));
    }
    for backend in backends(&args) {
        let result = match backend {
            Backend::Sqlite => bench_backend(&mut report, &args, &bin, backend, None).await,
            Backend::Postgres => bench_postgres(&mut report, &args, &bin).await,
        };
        if let Err(e) = result {
            eprintln!("[{}] failed: {e:#}", backend.label());
            failures.push(format!("{}: {e:#}", backend.label()));
        }
    }
    print_report(&report);
    ensure!(failures.is_empty(), "{}", failures.join("\n"));
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    run(Args::parse()).await
}
