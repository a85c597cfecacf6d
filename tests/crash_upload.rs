//! Crash safety of a background CSV upload, against the real `entiserve` binary.
//!
//! A 200,000-row background upload (`bgrs=1`) is interrupted by a SIGKILL of the server
//! running it; a new server on the same data directory resumes it from its last committed
//! chunk. Every row must be applied exactly once: a result file of 200,000 rows, all `OK`,
//! in input order, with distinct ids; exactly 200,000 campaigns; one `Line: <n> done` detail
//! per row; and a `resumed (worker …)` detail from the second server. The same holds for rows
//! that name their object by key: saves that create markers, then deletes of them by key.

mod common;

use common::process::{PASSWORD, Server, worker_pid};

use serde_json::Value as Json;
use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

const ROWS: usize = 200_000;

/// What this test asks of a server.
trait UploadOps {
    async fn get_text(&self, path: &str) -> String;
}

impl UploadOps for Server {
    /// GET `path`, expecting 200; returns the body text.
    async fn get_text(&self, path: &str) -> String {
        let r = self.get(path).await;
        let status = r.status();
        let text = r.text().await.unwrap();
        assert_eq!(status, 200, "{} GET {path}: {text}", self.label);
        text
    }
}

/// The name of data row `i` (counted from 1, like the `Line: <n>` details).
fn name(i: usize) -> String {
    format!("crash row {i}")
}

/// `op,name,description` and rows 1..=ROWS creating `crash row <i>`.
fn big_csv() -> Vec<u8> {
    let mut csv = String::with_capacity(ROWS * 40);
    csv.push_str("op,name,description\n");
    for i in 1..=ROWS {
        csv.push_str(&format!("c,{},line {i}\n", name(i)));
    }
    csv.into_bytes()
}

/// Polls every 20 ms until the request has committed some chunks but not all of them.
async fn wait_midway(server: &Server, rid: &str) -> f64 {
    let start = Instant::now();
    loop {
        let (status, progress) = server.progress(rid).await;
        assert_running(rid, &status, progress);
        if progress > 0.0 {
            return progress;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{rid} made no progress in 60 s (status {status})"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn assert_running(rid: &str, status: &str, progress: f64) {
    assert!(
        status != "4" && progress < 100.0,
        "{rid} finished (status {status}, progress {progress}) before it could be killed"
    );
}

/// Data rows in the result file on disk (0 when it is not there).
fn rows_on_disk(result_file: &Path) -> usize {
    std::fs::read(result_file)
        .map(|b| b.iter().filter(|&&c| c == b'\n').count().saturating_sub(1))
        .unwrap_or(0)
}

/// Once the request is midway, tries for up to a second to catch the moment when the
/// result file on disk holds rows of a chunk that has not committed yet (written before
/// the chunk's commit), so that the restart must cut the file back. Returns the progress
/// and whether that moment was caught; if not, the kill still lands mid-run.
async fn wait_uncommitted_rows(server: &Server, rid: &str, result_file: &Path) -> (f64, bool) {
    let mut progress = wait_midway(server, rid).await;
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline {
        // The file first: if it is ahead of the commit read after it, it was ahead then
        // (best effort: a commit may still slip in before the kill).
        let on_disk = rows_on_disk(result_file);
        let (status, p) = server.progress(rid).await;
        assert_running(rid, &status, p);
        progress = p;
        let committed = (p * ROWS as f64 / 100.0).round() as usize;
        if on_disk > committed {
            return (progress, true);
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    (progress, false)
}

/// The result file: a header plus one `OK` row per input row, in input order, distinct ids.
fn assert_result(text: &str) {
    let records: Vec<csv::StringRecord> = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(text.as_bytes())
        .records()
        .enumerate()
        .map(|(n, r)| r.unwrap_or_else(|e| panic!("result record {n}: {e}")))
        .collect();
    assert_eq!(records.len(), ROWS + 1, "the header and one row per line");
    let header: Vec<&str> = records[0].iter().collect();
    assert_eq!(header, ["res", "id", "op", "name", "description"]);
    let mut ids = HashSet::with_capacity(ROWS);
    for (i, r) in records.iter().enumerate().skip(1) {
        assert_eq!(r.len(), 5, "result row {i}: {r:?}");
        assert_eq!(&r[0], "OK", "result row {i}: {r:?}");
        assert_eq!(&r[3], name(i), "result row {i} out of order: {r:?}");
        let id: i64 = r[1]
            .parse()
            .unwrap_or_else(|e| panic!("result row {i}: id {:?}: {e}", &r[1]));
        assert!(ids.insert(id), "result row {i}: id {id} appears twice");
    }
}

/// One `Line: <n> done` detail for each n in 1..=ROWS, each `Result: 200`; and a
/// `resumed (worker …)` entry by the second server after a `started` one by the first.
fn assert_details(details: &[String], first_pid: u32, second_pid: u32) {
    let mut seen = vec![0u32; ROWS + 1];
    let mut lines = 0usize;
    for d in details {
        let Some(rest) = d.strip_prefix("Line: ") else {
            continue;
        };
        let (n, tail) = rest
            .split_once(" done. ")
            .unwrap_or_else(|| panic!("malformed detail {d:?}"));
        let n: usize = n
            .parse()
            .unwrap_or_else(|e| panic!("detail {d:?}: line {n:?}: {e}"));
        assert!((1..=ROWS).contains(&n), "detail {d:?}: no such line");
        assert!(tail.starts_with("Result: 200."), "detail {d:?}");
        seen[n] += 1;
        lines += 1;
    }
    let missing: Vec<usize> = (1..=ROWS).filter(|&n| seen[n] == 0).collect();
    let twice: Vec<usize> = (1..=ROWS).filter(|&n| seen[n] > 1).collect();
    assert!(
        missing.is_empty() && twice.is_empty(),
        "{lines} line details: {} lines missing (first {:?}), {} more than once (first {:?})",
        missing.len(),
        &missing[..missing.len().min(10)],
        twice.len(),
        &twice[..twice.len().min(10)],
    );
    assert_eq!(lines, ROWS, "one detail per line");

    let workers: Vec<&String> = details
        .iter()
        .filter(|d| d.starts_with("started (worker ") || d.starts_with("resumed (worker "))
        .collect();
    assert!(
        details
            .iter()
            .any(|d| worker_pid(d, "started") == Some(first_pid)),
        "no `started (worker {first_pid}-…)` entry: {workers:?}"
    );
    assert!(
        details
            .iter()
            .any(|d| worker_pid(d, "resumed") == Some(second_pid)),
        "no `resumed (worker {second_pid}-…)` entry: {workers:?}"
    );
    assert_eq!(
        details.last().map(String::as_str),
        Some("done"),
        "{workers:?}"
    );
}

#[tokio::test]
async fn background_upload_survives_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let csv = big_csv();
    let t0 = Instant::now();
    let mut first = Server::start("first", &data, None);
    let rid = first.upload_background("campaigns", csv, &[]).await;
    let uploaded = t0.elapsed();
    let result_file = data.join(format!("media/keep1m/bgrs.{rid}.result.csv"));
    let (progress, ahead) = wait_uncommitted_rows(&first, &rid, &result_file).await;
    first.kill();
    let on_disk = rows_on_disk(&result_file);
    eprintln!(
        "uploaded in {uploaded:?}; killed at {progress}% after {:?} with {on_disk} result \
         rows on disk (file seen ahead of the commit: {ahead})",
        t0.elapsed()
    );

    let second = Server::start("second", &data, None);
    let took = second.wait_finished(&rid, Duration::from_secs(180)).await;
    eprintln!("finished {took:?} after the restart");

    let result = second.get_text(&format!("/v2.5/bgrs/{rid}/result")).await;
    assert_result(&result);
    assert_eq!(
        second.campaign_count().await,
        ROWS as u64,
        "exactly one campaign per CSV line"
    );
    let details = second.details(&rid).await;
    assert_details(&details, first.pid(), second.pid());
    eprintln!("total {:?}", t0.elapsed());
}

/// Rows in the upload of saves and deletes by key.
const KEYED_ROWS: usize = 60_000;

/// `op,campaign_id,name,page`: rows 1..=half save (create) marker `key <i>` in campaign `cid`
/// by key, rows half+1..=2*half delete them again by key. A row applied twice, or not at all,
/// shows: a second delete of a key, or a delete of a key never saved, fails with 404.
fn keyed_csv(cid: i64) -> Vec<u8> {
    let half = KEYED_ROWS / 2;
    let mut csv = String::from("op,campaign_id,name,page\n");
    for i in 1..=half {
        csv.push_str(&format!("s,{cid},key {i},{i}\n"));
    }
    for i in 1..=half {
        csv.push_str(&format!("d,{cid},key {i},\n"));
    }
    csv.into_bytes()
}

#[tokio::test]
async fn background_saves_and_deletes_by_key_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut first = Server::start("first", &data, None);
    let r = first
        .client
        .post(format!("{}/campaigns", first.base))
        .basic_auth("admin", Some(PASSWORD))
        .json(&serde_json::json!({"name": "keyed"}))
        .send()
        .await
        .unwrap();
    let cid = r.json::<Json>().await.unwrap()["id"].as_i64().unwrap();
    let rid = first
        .upload_background("markers", keyed_csv(cid), &[])
        .await;
    let progress = wait_midway(&first, &rid).await;
    first.kill();
    eprintln!("killed at {progress}%");

    let second = Server::start("second", &data, None);
    second.wait_finished(&rid, Duration::from_secs(180)).await;
    let result = second.get_text(&format!("/v2.5/bgrs/{rid}/result")).await;
    let records: Vec<csv::StringRecord> = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_reader(result.as_bytes())
        .records()
        .map(Result::unwrap)
        .collect();
    assert_eq!(records.len(), KEYED_ROWS, "one result row per line");
    let half = KEYED_ROWS / 2;
    let mut ids = HashSet::with_capacity(half);
    for (i, r) in records.iter().enumerate() {
        assert_eq!(&r[0], "OK", "result row {}: {r:?}", i + 1);
        let name = format!("key {}", i % half + 1);
        assert_eq!(&r[4], name.as_str(), "result row {} out of order", i + 1);
        let id: i64 = r[1]
            .parse()
            .unwrap_or_else(|e| panic!("row {}: {e}", i + 1));
        if i < half {
            assert!(ids.insert(id), "result row {}: id {id} twice", i + 1);
        } else {
            assert_eq!(
                r[1],
                records[i - half][1],
                "row {} deletes what its save made",
                i + 1
            );
        }
    }
    let r = second
        .get(&format!("/markers?campaign_id={cid}&limit=1"))
        .await;
    assert_eq!(
        r.headers()["x-total-count"],
        "0",
        "every saved marker deleted once"
    );
    let details = second.details(&rid).await;
    let lines = details.iter().filter(|d| d.starts_with("Line: ")).count();
    assert_eq!(lines, KEYED_ROWS, "one detail per line");
    assert!(
        details
            .iter()
            .any(|d| worker_pid(d, "resumed") == Some(second.pid())),
        "resumed by the second server"
    );
}
