//! Crash safety of durable background requests, against the real `entiserve` binary.
//!
//! A 100,000-item background batch is interrupted by a SIGKILL of the server running it:
//! on SQLite a new server on the same data directory resumes it; on PostgreSQL (only when
//! `TEST_DATABASE_URL` is set) a second server on the same database takes it over once the
//! dead server's lease expires. Either way every item must be applied exactly once: 100,000
//! results, all 200, in input order, with distinct ids, and exactly 100,000 campaigns.

mod common;

use common::process::{PASSWORD, Server};

use serde_json::{Value as Json, json};
use std::collections::HashSet;
use std::time::{Duration, Instant};

const ITEMS: usize = 100_000;

/// What this test asks of a server.
trait BatchOps {
    async fn post_batch(&self) -> String;
    async fn workers(&self, rid: &str) -> Vec<String>;
}

impl BatchOps for Server {
    /// POSTs the batch `crash 0`..`crash 99999` in the background; returns the request id.
    async fn post_batch(&self) -> String {
        let items: Vec<Json> = (0..ITEMS).map(|i| json!({"name": name(i)})).collect();
        let r = self
            .client
            .post(format!("{}/v2.5/campaigns", self.base))
            .basic_auth("admin", Some(PASSWORD))
            .json(&items)
            .send()
            .await
            .expect("POST the batch");
        let status = r.status();
        let body: Json = r.json().await.unwrap();
        assert_eq!(status, 202, "{body}");
        body["request"].as_str().expect("a request id").to_string()
    }

    /// Worker ids of the `started (worker <id>)` details entries, in order.
    async fn workers(&self, rid: &str) -> Vec<String> {
        let details = self.get_json(&format!("/bgrs/{rid}/details")).await;
        details
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|d| {
                let text = d["details"].as_str()?;
                let id = text.strip_prefix("started (worker ")?.strip_suffix(')')?;
                Some(id.to_string())
            })
            .collect()
    }
}

fn name(i: usize) -> String {
    format!("crash {i}")
}

/// The pid part of a worker id `<pid>-<8 hex>`.
fn pid_of(worker: &str) -> u32 {
    let (pid, _) = worker.split_once('-').expect("worker id is <pid>-<hex>");
    pid.parse().expect("a numeric pid")
}

/// Polls every 20 ms until the request has applied some chunks but not all of them.
async fn wait_midway(server: &Server, rid: &str) -> f64 {
    let start = Instant::now();
    loop {
        let (status, progress) = server.progress(rid).await;
        assert!(
            status == "2" && progress < 100.0,
            "{rid} finished (status {status}, progress {progress}) before it could be killed"
        );
        if progress > 0.0 {
            return progress;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{rid} made no progress in 60 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every item applied exactly once: 100,000 results in input order, all 200, distinct ids,
/// and exactly 100,000 campaigns.
async fn assert_exactly_once(server: &Server, rid: &str) {
    let results = server.get_json(&format!("/v2.5/bgrs/{rid}/result")).await;
    let results = results.as_array().expect("the result is an array");
    assert_eq!(results.len(), ITEMS, "one result per item");
    let mut ids = HashSet::with_capacity(ITEMS);
    for (i, r) in results.iter().enumerate() {
        assert_eq!(r["status"], 200, "item {i}: {r}");
        let body: Json = serde_json::from_str(r["body"].as_str().unwrap()).unwrap();
        assert_eq!(body["name"], name(i), "item {i} out of order: {body}");
        let id = body["id"]
            .as_i64()
            .unwrap_or_else(|| panic!("item {i}: {body}"));
        assert!(ids.insert(id), "item {i}: id {id} appears twice");
    }
    assert_eq!(server.campaign_count().await, ITEMS as u64, "campaigns");
}

#[tokio::test]
async fn sqlite_batch_survives_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let t0 = Instant::now();
    let mut first = Server::start("first", &data, None);
    let rid = first.post_batch().await;
    let posted = t0.elapsed();
    let progress = wait_midway(&first, &rid).await;
    first.kill();
    eprintln!(
        "posted in {posted:?}; killed at {progress}% after {:?}",
        t0.elapsed()
    );

    let second = Server::start("second", &data, None);
    let took = second.wait_finished(&rid, Duration::from_secs(120)).await;
    eprintln!("finished {took:?} after the restart");
    let workers = second.workers(&rid).await;
    assert!(workers.len() >= 2, "started twice: {workers:?}");
    assert_eq!(pid_of(&workers[0]), first.pid(), "{workers:?}");
    assert_eq!(pid_of(workers.last().unwrap()), second.pid(), "{workers:?}");
    assert_exactly_once(&second, &rid).await;
    eprintln!("total {:?}", t0.elapsed());
}

#[tokio::test]
async fn postgres_two_servers_one_killed() {
    let Some(url) = std::env::var("TEST_DATABASE_URL")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        eprintln!("TEST_DATABASE_URL is not set; skipping the PostgreSQL crash test");
        return;
    };
    let db = common::PgDb::create(&url).await;
    let dir = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    // A first, so that B does not race A's migrations.
    let a = Server::start("A", &dir.path().join("a"), Some(&db.url));
    let b = Server::start("B", &dir.path().join("b"), Some(&db.url));
    let rid = a.post_batch().await;
    let progress = wait_midway(&a, &rid).await;
    let runner = pid_of(a.workers(&rid).await.last().expect("a started entry"));
    let (mut dead, survivor) = if runner == a.pid() {
        (a, b)
    } else {
        assert_eq!(runner, b.pid(), "the runner is neither server");
        (b, a)
    };
    dead.kill();
    eprintln!(
        "killed {} at {progress}% after {:?}",
        dead.label,
        t0.elapsed()
    );

    let took = survivor.wait_finished(&rid, Duration::from_secs(180)).await;
    eprintln!("{} finished it {took:?} after the kill", survivor.label);
    let workers = survivor.workers(&rid).await;
    assert_eq!(
        pid_of(workers.last().unwrap()),
        survivor.pid(),
        "{workers:?}"
    );
    assert_exactly_once(&survivor, &rid).await;
    eprintln!("total {:?}", t0.elapsed());
    // The servers stop before their database is dropped.
    drop((dead, survivor));
    drop(db);
}
