//! A real `entiserve serve` process for tests that kill and restart servers.

use reqwest::Client;
use serde_json::Value as Json;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The admin password of every process started here.
pub const PASSWORD: &str = "process-secret";

/// A running `entiserve serve` process; killed when dropped.
pub struct Server {
    pub label: &'static str,
    pub child: Child,
    pub base: String,
    pub client: Client,
}

impl Server {
    /// Starts a server on `data_dir` (and `database_url`, else SQLite) and waits until it
    /// listens. Its stderr is echoed (captured by the test harness) so it never blocks.
    pub fn start(label: &'static str, data_dir: &Path, database_url: Option<&str>) -> Server {
        Self::start_with(label, data_dir, database_url, &[])
    }

    /// [`Server::start`] with more `serve` arguments.
    pub fn start_with(
        label: &'static str,
        data_dir: &Path,
        database_url: Option<&str>,
        args: &[&str],
    ) -> Server {
        Self::start_env(label, data_dir, database_url, args, &[])
    }

    /// [`Server::start_with`] with more environment variables (on top of the test's own).
    pub fn start_env(
        label: &'static str,
        data_dir: &Path,
        database_url: Option<&str>,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Server {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_entiserve"));
        cmd.args(["serve", "--bind", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir)
            .arg("--entities")
            .arg(super::shipped_entities())
            .env("ENTISERVE_ADMIN_PASSWORD", PASSWORD)
            .env_remove("DATABASE_URL")
            .env_remove("ENTISERVE_DEV")
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(url) = database_url {
            cmd.args(["--database-url", url]);
        }
        cmd.args(args);
        cmd.envs(env.iter().copied());
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

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A `kB` figure of the process from `/proc/<pid>/status` (`VmRSS`, `VmHWM`: the peak).
    pub fn memory_kb(&self, key: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("read /proc/<pid>/status");
        status
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no {key} in /proc/<pid>/status"))
    }

    /// SIGKILL, then reap.
    pub fn kill(&mut self) {
        self.child.kill().expect("SIGKILL the server");
        let _ = self.child.wait();
    }

    /// A request to `path` as admin.
    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.client
            .request(method, format!("{}{path}", self.base))
            .basic_auth("admin", Some(PASSWORD))
    }

    /// GET `path` as admin; panics when the server is unreachable (did it die?).
    pub async fn get(&self, path: &str) -> reqwest::Response {
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
    pub async fn get_json(&self, path: &str) -> Json {
        let r = self.get(path).await;
        let status = r.status();
        let text = r.text().await.unwrap();
        assert_eq!(status, 200, "{} GET {path}: {text}", self.label);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("GET {path}: {e}: {text}"))
    }

    /// `(status_id, progress)` of the request.
    pub async fn progress(&self, rid: &str) -> (String, f64) {
        let rec = &self.get_json(&format!("/bgrs/{rid}")).await[0];
        let status = rec["status_id"].as_str().unwrap().to_string();
        let progress = rec["progress"].as_str().unwrap().parse().unwrap();
        (status, progress)
    }

    /// Polls until the request is finished; panics after `timeout`.
    pub async fn wait_finished(&self, rid: &str, timeout: Duration) -> Duration {
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

    /// Uploads `csv` as `big.csv` into `entity` in the background, with the form's other
    /// `fields`; returns the request id.
    pub async fn upload_background(
        &self,
        entity: &str,
        csv: Vec<u8>,
        fields: &[(&str, &str)],
    ) -> String {
        let mut all = vec![("bgrs", "1")];
        all.extend_from_slice(fields);
        let form = super::upload::form(entity, "big.csv", csv, &all);
        let r = self
            .request(reqwest::Method::POST, super::upload::UPLOAD)
            .multipart(form)
            .send()
            .await
            .expect("POST the upload");
        let status = r.status();
        let text = r.text().await.unwrap();
        assert_eq!(status, 202, "upload: {text}");
        let body: Json = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        body["request"].as_str().expect("a request id").to_string()
    }

    /// The `details` texts of the request, in order, page by page.
    pub async fn details(&self, rid: &str) -> Vec<String> {
        let mut texts = Vec::new();
        let mut since = "0".to_string();
        loop {
            let page = self
                .get_json(&format!("/bgrs/{rid}/details?since={since}"))
                .await;
            let page = page.as_array().expect("details are an array");
            let Some(last) = page.last() else {
                return texts;
            };
            since = last["id"].as_str().expect("an entry id").to_string();
            texts.extend(
                page.iter()
                    .map(|d| d["details"].as_str().expect("a details text").to_string()),
            );
        }
    }

    /// `X-Total-Count` of the campaigns.
    pub async fn campaign_count(&self) -> u64 {
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

/// What tests of several servers sharing one PostgreSQL database and one object store need:
/// `TEST_DATABASE_URL` (a database to create test databases from) and a fresh place in the
/// store, `TEST_S3_URL/<prefix>-<random>` (the `AWS_*` variables that reach it are the test's
/// own, and every server started here inherits them; `scripts/seaweedfs.sh` prints them).
///
/// Without one of them the test says so and passes (`None`), unless `ENTISERVE_REQUIRE_PG`
/// or `ENTISERVE_REQUIRE_S3` asks for the missing one (CI sets both in its PostgreSQL pass):
/// then it fails.
pub fn database_and_store(prefix: &str) -> Option<(String, String)> {
    let set = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let database = set("TEST_DATABASE_URL");
    let store = set("TEST_S3_URL");
    if database.is_none() && std::env::var_os("ENTISERVE_REQUIRE_PG").is_some() {
        panic!("TEST_DATABASE_URL is not set and ENTISERVE_REQUIRE_PG is");
    }
    if store.is_none() && std::env::var_os("ENTISERVE_REQUIRE_S3").is_some() {
        panic!("TEST_S3_URL is not set and ENTISERVE_REQUIRE_S3 is: run scripts/seaweedfs.sh");
    }
    let (Some(database), Some(store)) = (database, store) else {
        eprintln!(
            "SKIPPED: this test needs PostgreSQL (TEST_DATABASE_URL) and an object store \
             (TEST_S3_URL and AWS_*, printed by scripts/seaweedfs.sh); set \
             ENTISERVE_REQUIRE_PG=1 and ENTISERVE_REQUIRE_S3=1 to fail instead"
        );
        return None;
    };
    let place = format!(
        "{}/{prefix}-{}",
        store.trim_end_matches('/'),
        hex::encode(rand::random::<[u8; 6]>())
    );
    Some((database, place))
}

/// The pid part of a worker entry `<what> (worker <pid>-<hex>)`.
#[allow(dead_code)]
pub fn worker_pid(detail: &str, what: &str) -> Option<u32> {
    let worker = detail
        .strip_prefix(what)?
        .strip_prefix(" (worker ")?
        .strip_suffix(')')?;
    worker.split_once('-')?.0.parse().ok()
}
