//! Backup benchmark: `entiserve backup` of a 1M-row SQLite database against `sqlite3 .backup` of
//! the same file in the same run, and the latency of single creates while a backup runs.
//!
//! ```text
//! cargo run --release --example bench_backup [-- --rows 1000000 --runs 5]
//! ```
//!
//! It starts the server in this process (on its own runtime) with a fresh data directory,
//! fills `campaigns` with `--rows` rows in one `INSERT ... SELECT`, and then, `--runs` times,
//! alternating: times a backup ([`entiserve::backup::backup`]: the online-backup snapshot, the
//! files, the manifest with checksums) and `sqlite3 <db> ".backup <file>"`. Separately it runs
//! single `POST /campaigns` back to back for the length of a backup, once without and once
//! with a backup running, and reports their p99. Progress goes to stderr, the report to stdout.

#[path = "support/bench.rs"]
mod support;

use anyhow::{Context, Result, ensure};
use clap::Parser;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::{Stats, elapsed_ms};

const ADMIN_PASSWORD: &str = "bench";

#[derive(Parser, Debug)]
#[command(about = "Benchmark of entiserve backup against sqlite3 .backup")]
struct Args {
    /// Rows of the table.
    #[arg(long, default_value_t = 1_000_000)]
    rows: i64,
    /// Runs of every measurement.
    #[arg(long, default_value_t = 5)]
    runs: usize,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let dir = tempfile::tempdir()?;
    let data = dir.path().join("data");
    let entities = Path::new(env!("CARGO_MANIFEST_DIR")).join("entities");
    let mut s = entiserve::settings::Settings::new(data.clone(), entities);
    s.bind = "127.0.0.1:0".parse()?;
    s.admin_password = Some(ADMIN_PASSWORD.into());
    let (ready, addr) = std::sync::mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = std::thread::spawn(move || -> Result<()> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        rt.block_on(async move {
            let app = entiserve::App::build(s).await?;
            let _ = ready.send(app.addr());
            app.run_until(async {
                let _ = stopped.await;
            })
            .await
        })
    });
    let base = format!("http://{}", addr.recv()?);
    let db = data.join("entiserve.db");
    eprintln!("seeding {} rows", args.rows);
    seed(&db, args.rows)?;
    let size = std::fs::metadata(&db)?.len();

    let rt = tokio::runtime::Runtime::new()?;
    let client = reqwest::Client::new();
    let inst = entiserve::backup::Installation {
        data_dir: data.clone(),
        database_url: format!("sqlite://{}", db.display()),
    };
    let out = dir.path().join("backups");
    let (mut ours, mut theirs) = (Stats::default(), Stats::default());
    for run in 0..args.runs {
        eprintln!("run {} of {}", run + 1, args.runs);
        let t = Instant::now();
        let taken = entiserve::backup::backup(&inst, &out)?;
        ours.push(elapsed_ms(t));
        std::fs::remove_dir_all(&taken)?;
        let target = dir.path().join("sqlite3.backup");
        let t = Instant::now();
        let status = std::process::Command::new("sqlite3")
            .arg(&db)
            .arg(format!(".backup '{}'", target.display()))
            .status()
            .context("sqlite3 (Debian: apt-get install sqlite3)")?;
        theirs.push(elapsed_ms(t));
        ensure!(status.success(), "sqlite3 .backup failed");
        std::fs::remove_file(&target)?;
    }

    // Single creates for the length of one backup, without and with a backup running.
    let span = Duration::from_millis(ours.median() as u64).max(Duration::from_millis(500));
    let quiet = rt.block_on(creates(&client, &base, span, None))?;
    let busy = rt.block_on(creates(&client, &base, span, Some((inst, out.clone()))))?;

    let _ = stop.send(());
    let _ = server.join();
    let ratio = ours.median() / theirs.median();
    println!(
        "Command: cargo run --release --example bench_backup -- --rows {} --runs {}",
        args.rows, args.runs
    );
    println!();
    println!(
        "| figure ({} rows, {:.0} MB database) | median | baseline (same run) | ratio |",
        args.rows,
        size as f64 / 1e6
    );
    println!("| --- | ---: | ---: | ---: |");
    println!(
        "| `entiserve backup` | {:.0} ms | `sqlite3 .backup`: {:.0} ms | {ratio:.2}x |",
        ours.median(),
        theirs.median()
    );
    println!(
        "| single create p99 while a backup runs | {:.2} ms ({} creates) | without a backup: {:.2} ms | |",
        busy.p99(),
        busy.0.len(),
        quiet.p99()
    );
    println!();
    println!(
        "targets: backup at most 1.2x sqlite3 .backup: {}; create p99 during a backup at most 20 ms: {}",
        if ratio <= 1.2 { "met" } else { "MISSED" },
        if busy.p99() <= 20.0 { "met" } else { "MISSED" }
    );
    Ok(())
}

/// Runs single creates back to back for `span` (beside a backup into `backup.1` when given);
/// their latencies.
async fn creates(
    client: &reqwest::Client,
    base: &str,
    span: Duration,
    backup: Option<(entiserve::backup::Installation, PathBuf)>,
) -> Result<Stats> {
    let running = backup.map(|(inst, out)| {
        tokio::task::spawn_blocking(move || entiserve::backup::backup(&inst, &out).map(|_| ()))
    });
    let mut stats = Stats::default();
    let t0 = Instant::now();
    let mut i = 0u64;
    while t0.elapsed() < span {
        let t = Instant::now();
        let r = client
            .post(format!("{base}/campaigns"))
            .basic_auth("admin", Some(ADMIN_PASSWORD))
            .json(&serde_json::json!({"name": format!("during backup {i}")}))
            .send()
            .await?;
        ensure!(r.status() == 200, "create: {}", r.status());
        stats.push(elapsed_ms(t));
        i += 1;
    }
    if let Some(h) = running {
        h.await??;
    }
    Ok(stats)
}

/// Fills `campaigns` with `rows` rows in one statement, beside the server.
fn seed(db: &Path, rows: i64) -> Result<()> {
    let c = rusqlite::Connection::open(db)?;
    c.busy_timeout(Duration::from_secs(30))?;
    c.execute_batch(&format!(
        "BEGIN IMMEDIATE; \
         WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < {rows}) \
         INSERT INTO \"campaigns\" (\"name\", \"type\", \"description\", \"is_active\", \"created_dt\", \"updated_dt\") \
         SELECT 'campaign ' || i, 1 + i % 5, 'seeded row ' || i, 1, '2026-01-01 00:00:00', '2026-01-01 00:00:00' FROM s; \
         UPDATE \"entity_counts\" SET \"n\" = \"n\" + {rows} WHERE \"entity\" = 'campaigns'; \
         COMMIT;"
    ))?;
    Ok(())
}
