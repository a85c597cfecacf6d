//! Crash safety of an all-or-nothing background upload (`atomic=1`), against the real
//! `entiserve` binary, on SQLite or (with `TEST_DATABASE_URL`) PostgreSQL.
//!
//! A 200,000-row upload is interrupted by a SIGKILL of the server running it while its one
//! transaction is open (result rows already on disk, nothing committed). A new server on the
//! same data directory and database runs it again from the start. Nothing is ever half
//! applied: while it runs again the campaigns number 0 or all of them, never some; at the
//! end every row is applied exactly once (a result of 200,000 `OK` rows in input order with
//! distinct ids, exactly 200,000 campaigns, one `Line: <n> done` detail per row).

mod common;

use common::process::Server;

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

const ROWS: usize = 200_000;

fn name(i: usize) -> String {
    format!("atomic row {i}")
}

fn big_csv() -> Vec<u8> {
    let mut csv = String::with_capacity(ROWS * 40);
    csv.push_str("op,name,description\n");
    for i in 1..=ROWS {
        csv.push_str(&format!("c,{},line {i}\n", name(i)));
    }
    csv.into_bytes()
}

/// Data rows in the result file on disk (0 when it is not there).
fn rows_on_disk(result_file: &Path) -> usize {
    std::fs::read(result_file)
        .map(|b| b.iter().filter(|&&c| c == b'\n').count().saturating_sub(1))
        .unwrap_or(0)
}

/// Waits until the run has written some result rows but not all: its transaction is open.
async fn wait_midway(server: &Server, rid: &str, result_file: &Path) -> usize {
    let start = Instant::now();
    loop {
        let on_disk = rows_on_disk(result_file);
        let (status, progress) = server.progress(rid).await;
        assert!(
            status == "2" && progress == 0.0,
            "{rid}: status {status}, progress {progress}: nothing commits before the end"
        );
        if on_disk > 0 && on_disk < ROWS / 2 {
            return on_disk;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "{rid} wrote no result rows in 120 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn assert_result(text: &str) {
    let records: Vec<csv::StringRecord> = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(text.as_bytes())
        .records()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(records.len(), ROWS + 1, "the header and one row per line");
    let mut ids = HashSet::with_capacity(ROWS);
    for (i, r) in records.iter().enumerate().skip(1) {
        assert_eq!(&r[0], "OK", "result row {i}: {r:?}");
        assert_eq!(&r[3], name(i), "result row {i} out of order: {r:?}");
        let id: i64 = r[1].parse().unwrap();
        assert!(ids.insert(id), "result row {i}: id {id} appears twice");
    }
}

fn assert_details(details: &[String]) {
    let mut seen = vec![0u32; ROWS + 1];
    for d in details {
        let Some(rest) = d.strip_prefix("Line: ") else {
            continue;
        };
        let (n, tail) = rest.split_once(" done. ").unwrap();
        assert!(tail.starts_with("Result: 200."), "{d}");
        seen[n.parse::<usize>().unwrap()] += 1;
    }
    let wrong: Vec<usize> = (1..=ROWS).filter(|&n| seen[n] != 1).collect();
    assert!(
        wrong.is_empty(),
        "{} lines without exactly one detail (first {:?})",
        wrong.len(),
        &wrong[..wrong.len().min(10)]
    );
    let starts = details
        .iter()
        .filter(|d| d.starts_with("started (worker "))
        .count();
    assert_eq!(
        starts, 2,
        "run by the first server, then from the start by the second"
    );
    assert_eq!(
        details.last().map(String::as_str),
        Some("done: every line was applied")
    );
}

#[tokio::test]
async fn atomic_background_upload_runs_again_whole_after_sigkill() {
    let db = match std::env::var("TEST_DATABASE_URL") {
        Ok(u) if !u.is_empty() => Some(common::PgDb::create(&u).await),
        _ => None,
    };
    let url = db.as_ref().map(|d| d.url.as_str());
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut first = Server::start("first", &data, url);
    let rid = first
        .upload_background("campaigns", big_csv(), &[("atomic", "1")])
        .await;
    let result_file = data.join(format!("media/keep1m/bgrs.{rid}.result.csv"));
    let on_disk = wait_midway(&first, &rid, &result_file).await;
    assert_eq!(
        first.campaign_count().await,
        0,
        "nothing applied before the end"
    );
    first.kill();
    eprintln!("killed with {on_disk} result rows on disk and nothing committed");

    let second = Server::start("second", &data, url);
    let start = Instant::now();
    loop {
        let n = second.campaign_count().await;
        assert!(
            n == 0 || n == ROWS as u64,
            "{n} campaigns: an all-or-nothing upload was half applied"
        );
        let (status, _) = second.progress(&rid).await;
        if status == "4" {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "{rid} did not finish after the restart"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!("ran again whole in {:?}", start.elapsed());
    assert_eq!(second.campaign_count().await, ROWS as u64);
    let r = second.get(&format!("/v2.5/bgrs/{rid}/result")).await;
    assert_eq!(r.status(), 200);
    assert_result(&r.text().await.unwrap());
    assert_details(&second.details(&rid).await);
    drop(second);
    drop(db);
}
