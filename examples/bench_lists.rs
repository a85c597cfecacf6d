//! List benchmark: lists on a 1M-row table, with the server in this process and the client on
//! the same machine.
//!
//! ```text
//! cargo run --release --example bench_lists                        # SQLite
//! cargo run --release --example bench_lists -- --database-url postgres://postgres@127.0.0.1:5432/test
//! ```
//!
//! It starts the server in this process (on its own runtime) on port 0 with a fresh data
//! directory (PostgreSQL: a fresh database `entiserve_bench_<hex>`, dropped afterwards), fills
//! `campaigns` with `--rows` rows in one `INSERT ... SELECT` on its own connection (the
//! row-count triggers see it as any writer), and measures over HTTP with HTTP Basic on every
//! request:
//!
//! 1. `GET /campaigns?limit=100`: the first page with `X-Total-Count`;
//! 2. the page after row 900,000 (scaled with `--rows`), reached by the `cursor` of the `Link`
//!    header of `?offset=899900&limit=100`;
//! 3. `GET /campaigns/<random id>` alone, then while eight clients list pages (the first page and
//!    random deep pages by cursor, back to back): median and p99.
//!
//! Each figure is the median over `--runs` runs of the per-run median (or p99). Beside it, the
//! baseline from the same run: the `sqlite3` CLI (per-query time of a script of repeated queries,
//! less the CLI's start-up) or `psql` (`\timing`), running the queries the server runs and the
//! queries a list cost before counts were kept and pages continued by cursor. Progress goes to
//! stderr, the report (commands, Markdown table, targets) to stdout.

#[path = "support/bench.rs"]
mod support;

use anyhow::{Context, Result, ensure};
use clap::Parser;
use entiserve::engine::cursor;
use entiserve::storage::redact;
use reqwest::Client;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use support::{Stats, elapsed_ms, random_hex, with_database};

const ADMIN_PASSWORD: &str = "bench";
/// Every target, in ms.
const TARGET_MS: f64 = 5.0;
/// Columns of a campaigns row, as the server selects them.
const COLUMNS: &str =
    "\"id\", \"name\", \"type\", \"description\", \"is_active\", \"created_dt\", \"updated_dt\"";

#[derive(Parser, Debug)]
#[command(about = "Benchmark of entiserve's list pages, cursors and point reads on a large table")]
struct Args {
    /// A PostgreSQL server URL: measure PostgreSQL (a fresh database on it) instead of SQLite.
    #[arg(long)]
    database_url: Option<String>,
    /// Rows of the table.
    #[arg(long, default_value_t = 1_000_000)]
    rows: i64,
    /// Runs of every measurement.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Requests per run of the page measurements.
    #[arg(long, default_value_t = 200)]
    requests: usize,
    /// Seconds per run of the GET-by-id measurements.
    #[arg(long, default_value_t = 3)]
    seconds: u64,
    /// Skip the sqlite3 / psql baselines.
    #[arg(long)]
    no_baseline: bool,
}

/// The server under test and how to reach its database from outside.
struct Server {
    base: String,
    client: Client,
    stop: tokio::sync::oneshot::Sender<()>,
    handle: std::thread::JoinHandle<Result<()>>,
    /// SQLite file, or PostgreSQL URL of the bench database.
    db: Db,
}

enum Db {
    Sqlite(std::path::PathBuf),
    Postgres {
        admin: String,
        url: String,
        name: String,
    },
}

impl Server {
    fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.client
            .get(format!("{}{path}", self.base))
            .basic_auth("admin", Some(ADMIN_PASSWORD))
    }
}

async fn start(args: &Args, dir: &Path) -> Result<Server> {
    let entities = Path::new(env!("CARGO_MANIFEST_DIR")).join("entities");
    let mut s = entiserve::settings::Settings::new(dir.join("data"), entities);
    s.bind = "127.0.0.1:0".parse()?;
    s.admin_password = Some(ADMIN_PASSWORD.into());
    let db = match &args.database_url {
        Some(admin) => {
            use sqlx::Connection;
            let name = format!("entiserve_bench_{}", random_hex());
            let mut c = sqlx::PgConnection::connect(admin).await?;
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
                .execute(&mut c)
                .await?;
            let url = with_database(admin, &name)?;
            s.database_url = Some(url.clone());
            Db::Postgres {
                admin: admin.clone(),
                url,
                name,
            }
        }
        None => Db::Sqlite(dir.join("data").join("entiserve.db")),
    };
    // The server gets its own runtime (threads), as a separate process would: the clients'
    // tasks never wait in its queues, nor it in theirs.
    let (ready, addr) = tokio::sync::oneshot::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let handle = std::thread::spawn(move || -> Result<()> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("server")
            .build()?;
        rt.block_on(async move {
            let app = match entiserve::App::build(s).await {
                Ok(app) => app,
                Err(e) => {
                    let _ = ready.send(Err(e));
                    return Ok(());
                }
            };
            let _ = ready.send(Ok(app.addr()));
            app.run_until(async {
                let _ = stopped.await;
            })
            .await
        })
    });
    let base = format!("http://{}", addr.await??);
    Ok(Server {
        base,
        client: Client::builder().pool_max_idle_per_host(64).build()?,
        stop,
        handle,
        db,
    })
}

/// Fills `campaigns` with `rows` rows in one statement.
async fn seed(db: &Db, rows: i64) -> Result<()> {
    let values = "'campaign ' || i, 1 + i % 5, 'seeded row ' || i, {TRUE}, '2026-01-01 00:00:00', '2026-01-01 00:00:00'";
    match db {
        Db::Sqlite(path) => {
            let sql = format!(
                "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < {rows}) \
                 INSERT INTO \"campaigns\" (\"name\", \"type\", \"description\", \"is_active\", \"created_dt\", \"updated_dt\") \
                 SELECT {} FROM s",
                values.replace("{TRUE}", "1")
            );
            let path = path.clone();
            tokio::task::spawn_blocking(move || -> Result<()> {
                let c = rusqlite::Connection::open(&path)?;
                c.busy_timeout(Duration::from_secs(30))?;
                // The server counts the rows its own statements write (and all of them at
                // start); a writer beside it keeps the count itself.
                c.execute_batch(&format!(
                    "BEGIN IMMEDIATE; {sql}; \
                     UPDATE \"entity_counts\" SET \"n\" = \"n\" + {rows} WHERE \"entity\" = 'campaigns'; \
                     COMMIT; PRAGMA optimize;"
                ))?;
                Ok(())
            })
            .await??;
        }
        Db::Postgres { url, .. } => {
            use sqlx::Connection;
            let mut c = sqlx::PgConnection::connect(url).await?;
            let sql = format!(
                "INSERT INTO \"campaigns\" (\"name\", \"type\", \"description\", \"is_active\", \"created_dt\", \"updated_dt\") \
                 SELECT {} FROM generate_series(1, {rows}) AS i",
                values.replace("{TRUE}", "TRUE")
            );
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                .execute(&mut c)
                .await?;
            sqlx::raw_sql("VACUUM ANALYZE \"campaigns\"")
                .execute(&mut c)
                .await?;
        }
    }
    Ok(())
}

/// The time of one GET and its body, checking its status (and the total count when given).
async fn timed(s: &Server, path: &str, total: Option<i64>) -> Result<f64> {
    let t = Instant::now();
    let r = s.get(path).send().await?;
    ensure!(r.status() == 200, "GET {path}: {}", r.status());
    if let Some(n) = total {
        let got = r.headers()["x-total-count"].to_str()?.parse::<i64>()?;
        ensure!(got == n, "GET {path}: X-Total-Count {got}, expected {n}");
    }
    ensure!(!r.bytes().await?.is_empty(), "GET {path}: empty body");
    Ok(elapsed_ms(t))
}

fn p99(v: &Stats) -> f64 {
    let s = v.sorted();
    s[((s.len() as f64 * 0.99).ceil() as usize).clamp(1, s.len()) - 1]
}

/// Per-run medians of `requests` sequential GETs of `path`.
async fn pages(s: &Server, args: &Args, path: &str, total: i64) -> Result<Stats> {
    let mut runs = Stats::default();
    for _ in 0..args.runs {
        let mut one = Stats::default();
        for _ in 0..args.requests {
            one.push(timed(s, path, Some(total)).await?);
        }
        runs.push(one.median());
    }
    Ok(runs)
}

/// Per-run (median, p99) of GET by id for `seconds`, with `listers` clients listing meanwhile.
async fn point_reads(
    s: &Arc<Server>,
    args: &Args,
    listers: usize,
) -> Result<(Stats, Stats, usize)> {
    let (mut medians, mut p99s, mut listed) = (Stats::default(), Stats::default(), 0);
    for _ in 0..args.runs {
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        for _ in 0..listers {
            let (s, stop, rows) = (s.clone(), stop.clone(), args.rows);
            tasks.push(tokio::spawn(async move {
                let mut n = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    let path = if n.is_multiple_of(2) {
                        "/campaigns?limit=100".to_string()
                    } else {
                        let after = rand::random_range(1..rows - 100);
                        format!("/campaigns?limit=100&cursor={}", cursor::after_id(after))
                    };
                    timed(&s, &path, Some(rows)).await?;
                    n += 1;
                }
                anyhow::Ok(n)
            }));
        }
        let mut one = Stats::default();
        let end = Instant::now() + Duration::from_secs(args.seconds);
        while Instant::now() < end {
            let id = rand::random_range(1..=args.rows);
            one.push(timed(s, &format!("/campaigns/{id}"), None).await?);
        }
        stop.store(true, Ordering::Relaxed);
        for t in tasks {
            listed += t.await??;
        }
        medians.push(one.median());
        p99s.push(p99(&one));
    }
    Ok((medians, p99s, listed))
}

// ---------------------------------------------------------------------------------------------
// Baselines: the CLIs running the same queries
// ---------------------------------------------------------------------------------------------

/// Per-query ms of `queries` (one script, repeated `reps` times), over `runs` runs.
fn baseline(db: &Db, queries: &[String], reps: usize, runs: usize) -> Result<Stats> {
    let mut out = Stats::default();
    for _ in 0..runs {
        out.push(match db {
            Db::Sqlite(path) => {
                // The CLI's timer has 1 ms resolution: time a script of repeated queries and
                // subtract the start-up of an empty one.
                let script = queries.join(";\n") + ";\n";
                let full = format!(".output /dev/null\n{}", script.repeat(reps));
                let empty = sqlite_cli(path, ".output /dev/null\n")?;
                let t = sqlite_cli(path, &full)?;
                ((t - empty) / reps as f64).max(0.0)
            }
            Db::Postgres { url, .. } => {
                let mut cmd = std::process::Command::new("psql");
                cmd.args(["-X", "-q", "-At", "-d", url, "-c", "\\timing on"]);
                for _ in 0..reps {
                    for q in queries {
                        cmd.args(["-c", q]);
                    }
                }
                let out = cmd.stderr(Stdio::inherit()).output()?;
                ensure!(out.status.success(), "psql failed");
                let times: Vec<f64> = String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .filter_map(|l| l.strip_prefix("Time: "))
                    .filter_map(|t| t.split(' ').next()?.parse().ok())
                    .collect();
                ensure!(times.len() == reps * queries.len(), "psql timings");
                // The queries of one repetition together, median over repetitions.
                let per_rep = Stats(
                    times
                        .chunks(queries.len())
                        .map(|c| c.iter().sum())
                        .collect(),
                );
                per_rep.median()
            }
        });
    }
    Ok(out)
}

fn sqlite_cli(path: &Path, script: &str) -> Result<f64> {
    use std::io::Write;
    let t = Instant::now();
    let mut child = std::process::Command::new("sqlite3")
        .arg(path)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .context("run sqlite3 (apt-get install sqlite3)")?;
    child
        .stdin
        .take()
        .context("stdin")?
        .write_all(script.as_bytes())?;
    ensure!(child.wait()?.success(), "sqlite3 failed");
    Ok(elapsed_ms(t))
}

// ---------------------------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------------------------

struct Line {
    what: String,
    server: f64,
    target: bool,
    same: Option<f64>,
    before: Option<f64>,
}

fn fmt(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.2}"))
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let label = if args.database_url.is_some() {
        "PostgreSQL"
    } else {
        "SQLite"
    };
    let dir = tempfile::tempdir()?;
    let server = Arc::new(start(&args, dir.path()).await?);
    eprintln!("seeding {} rows ({label})", args.rows);
    let t = Instant::now();
    seed(&server.db, args.rows).await?;
    eprintln!("seeded in {:.1} s", elapsed_ms(t) / 1000.0);
    let rows = args.rows;
    let deep = rows * 9 / 10;

    // Warm the caches the way a running server has them.
    for _ in 0..20 {
        timed(&server, "/campaigns?limit=100", Some(rows)).await?;
    }
    let first = pages(&server, &args, "/campaigns?limit=100", rows).await?;
    eprintln!("first page: {:?}", first.0);
    let r = server
        .get(&format!("/campaigns?offset={}&limit=100", deep - 100))
        .send()
        .await?;
    let link = r.headers()["link"].to_str()?.to_string();
    let target = link
        .strip_prefix('<')
        .and_then(|l| l.split_once('>'))
        .map(|(t, _)| t.to_string())
        .context("a Link header")?;
    ensure!(target.contains(&cursor::after_id(deep)), "{target}");
    let by_cursor = pages(&server, &args, &target, rows).await?;
    eprintln!("page by cursor at row {deep}: {:?}", by_cursor.0);
    let (alone, alone_p99, _) = point_reads(&server, &args, 0).await?;
    let (busy, busy_p99, listed) = point_reads(&server, &args, 8).await?;
    eprintln!(
        "GET by id alone: median {:?} p99 {:?}; with 8 listers ({listed} pages): median {:?} p99 {:?}",
        alone.0, alone_p99.0, busy.0, busy_p99.0
    );

    let table = "\"campaigns\"";
    let page = format!("SELECT {COLUMNS} FROM {table} ORDER BY \"id\" LIMIT 101");
    let kept = match server.db {
        Db::Sqlite(_) => "SELECT \"n\" FROM \"entity_counts\" WHERE \"entity\" = 'campaigns'".to_string(),
        Db::Postgres { .. } => "SELECT c.\"n\" + COALESCE((SELECT SUM(x.\"n\") FROM \"entity_count_deltas\" x WHERE x.\"entity\" = 'campaigns'), 0)::BIGINT FROM \"entity_counts\" c WHERE c.\"entity\" = 'campaigns'".to_string(),
    };
    let count = format!("SELECT COUNT(*) FROM {table}");
    let keyset =
        format!("SELECT {COLUMNS} FROM {table} WHERE \"id\" > {deep} ORDER BY \"id\" LIMIT 101");
    let offset = format!("SELECT {COLUMNS} FROM {table} ORDER BY \"id\" LIMIT 100 OFFSET {deep}");
    let point = format!(
        "SELECT {COLUMNS} FROM {table} WHERE \"id\" = {}",
        rows / 2 + 17
    );
    let base = |q: &[String], reps: usize| -> Result<Option<f64>> {
        if args.no_baseline {
            return Ok(None);
        }
        Ok(Some(baseline(&server.db, q, reps, args.runs)?.median()))
    };
    let lines = vec![
        Line {
            what: "list page of 100 with `X-Total-Count`, median".into(),
            server: first.median(),
            target: true,
            same: base(&[page.clone(), kept.clone()], 200)?,
            before: base(&[page.clone(), count.clone()], 5)?,
        },
        Line {
            what: format!("page after row {deep} by `cursor`, median"),
            server: by_cursor.median(),
            target: true,
            same: base(&[keyset.clone(), kept.clone()], 200)?,
            before: base(&[offset.clone(), count.clone()], 5)?,
        },
        Line {
            what: "GET by id alone, median".into(),
            server: alone.median(),
            target: false,
            same: base(std::slice::from_ref(&point), 500)?,
            before: None,
        },
        Line {
            what: "GET by id alone, p99".into(),
            server: alone_p99.median(),
            target: false,
            same: None,
            before: None,
        },
        Line {
            what: "GET by id while 8 clients list pages, median".into(),
            server: busy.median(),
            target: false,
            same: None,
            before: None,
        },
        Line {
            what: "GET by id while 8 clients list pages, p99".into(),
            server: busy_p99.median(),
            target: true,
            same: base(std::slice::from_ref(&point), 500)?,
            before: None,
        },
    ];

    let cli = match &server.db {
        Db::Sqlite(_) => "sqlite3",
        Db::Postgres { .. } => "psql",
    };
    let url = args.database_url.as_deref().map(redact);
    println!(
        "\n$ cargo run --release --example bench_lists --{}{}",
        url.as_deref()
            .map_or(String::new(), |u| format!(" --database-url {u}")),
        if args.rows == 1_000_000 {
            String::new()
        } else {
            format!(" --rows {}", args.rows)
        }
    );
    println!(
        "\n{label}, {rows} rows, {} runs (medians of the runs' figures), ms:\n",
        args.runs
    );
    println!(
        "| measurement | entiserve | `{cli}`: the server's queries | `{cli}`: `COUNT(*)` and `OFFSET`, as before | target |"
    );
    println!("| --- | ---: | ---: | ---: | ---: |");
    let mut missed = Vec::new();
    for l in &lines {
        let target = if l.target {
            if l.server > TARGET_MS {
                missed.push(l.what.clone());
            }
            format!("<= {TARGET_MS}")
        } else {
            String::new()
        };
        println!(
            "| {} | {:.2} | {} | {} | {target} |",
            l.what,
            l.server,
            fmt(l.same),
            fmt(l.before)
        );
    }
    if missed.is_empty() {
        println!("\nEvery target met.");
    } else {
        println!("\nMissed: {}", missed.join("; "));
    }

    let server = Arc::try_unwrap(server)
        .ok()
        .context("no request outlives the measurements")?;
    let _ = server.stop.send(());
    server
        .handle
        .join()
        .map_err(|_| anyhow::anyhow!("the server thread panicked"))??;
    if let Db::Postgres { admin, name, .. } = &server.db {
        use sqlx::Connection;
        let mut c = sqlx::PgConnection::connect(admin).await?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"
        )))
        .execute(&mut c)
        .await?;
    }
    Ok(())
}
