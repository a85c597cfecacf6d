//! Crash safety of durable background requests, against the real `entiserve` binary.
//!
//! A 100,000-item background batch is interrupted by a SIGKILL of the server running it:
//! on SQLite a new server on the same data directory resumes it; on PostgreSQL (only when
//! `TEST_DATABASE_URL` is set) a second server on the same database takes it over once the
//! dead server's lease expires. Either way every item must be applied exactly once: 100,000
//! results, all 200, in input order, with distinct ids, and exactly 100,000 campaigns.

mod common;

use reqwest::Client;
use serde_json::{Value as Json, json};
use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const PASSWORD: &str = "crash-secret";
const ITEMS: usize = 100_000;

/// A running `entiserve serve` process; killed when dropped.
struct Server {
    label: &'static str,
    child: Child,
    base: String,
    client: Client,
}

impl Server {
    /// Starts a server on `data_dir` (and `database_url`, else SQLite) and waits until it
    /// listens. Its stderr is echoed (captured by the test harness) so it never blocks.
    fn start(label: &'static str, data_dir: &Path, database_url: Option<&str>) -> Server {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_entiserve"));
        cmd.args(["serve", "--bind", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir)
            .arg("--entities")
            .arg(common::shipped_entities())
            .env("ENTISERVE_ADMIN_PASSWORD", PASSWORD)
            .env_remove("DATABASE_URL")
            .env_remove("ENTISERVE_DEV")
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(url) = database_url {
            cmd.args(["--database-url", url]);
        }
        let mut child = cmd.spawn().expect("start entiserve");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[{label}] {line}");
                if let Some(addr) = line.strip_prefix("entiserve listening on ") {
                    let _ = tx.send(addr.to_string());
                }
            }
        });
        let base = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("server {label} did not start listening: {e}"));
        Server {
            label,
            child,
            base,
            client: Client::new(),
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, then reap.
    fn kill(&mut self) {
        self.child.kill().expect("SIGKILL the server");
        let _ = self.child.wait();
    }

    /// GET `path` as admin; panics when the server is unreachable (did it die?).
    async fn get(&self, path: &str) -> reqwest::Response {
        self.client
            .get(format!("{}{path}", self.base))
            .basic_auth("admin", Some(PASSWORD))
            .send()
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "server {} (pid {}) unreachable: {e}",
                    self.label,
                    self.pid()
                )
            })
    }

    /// GET `path`, expecting 200 and JSON.
    async fn get_json(&self, path: &str) -> Json {
        let r = self.get(path).await;
        let status = r.status();
        let text = r.text().await.unwrap();
        assert_eq!(status, 200, "{} GET {path}: {text}", self.label);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("GET {path}: {e}: {text}"))
    }

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

    /// `(status_id, progress)` of the request.
    async fn progress(&self, rid: &str) -> (String, f64) {
        let rec = &self.get_json(&format!("/bgrs/{rid}")).await[0];
        let status = rec["status_id"].as_str().unwrap().to_string();
        let progress = rec["progress"].as_str().unwrap().parse().unwrap();
        (status, progress)
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

    /// Polls until the request is finished; panics after `timeout`.
    async fn wait_finished(&self, rid: &str, timeout: Duration) -> Duration {
        let start = Instant::now();
        loop {
            let (status, progress) = self.progress(rid).await;
            if status == "4" {
                return start.elapsed();
            }
            assert!(
                start.elapsed() < timeout,
                "{rid} not finished after {timeout:?} (status {status}, progress {progress})"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// `X-Total-Count` of the campaigns.
    async fn campaign_count(&self) -> u64 {
        let r = self.get("/campaigns?limit=1").await;
        assert_eq!(r.status(), 200);
        let total = r.headers()["x-total-count"].to_str().unwrap();
        total.parse().unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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
