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
