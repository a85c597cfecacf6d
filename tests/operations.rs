//! What operators rely on: `/readyz` checks the database and the file store, every response
//! carries an `X-Request-Id` (the client's when it sends a fitting one), and with
//! `--log-format json` every log line is a JSON object that carries the id of the request it
//! was written for, also when a worker writes it for the background work that request started.

mod common;

use common::*;
use reqwest::Method;
use serde_json::{Value as Json, json};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

#[tokio::test]
async fn readyz_checks_the_database_and_the_store() {
    let app = spawn_app().await;
    let r = app.client.get(app.url("/readyz")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let body: Json = r.json().await.unwrap();
    assert_eq!(
        body,
        json!({"status": "ok", "database": "ok", "store": "ok"})
    );
    // The prefixed path is not a route: /readyz is for load balancers, like /healthz.
    let r = app
        .client
        .get(app.url("/v2.5/readyz"))
        .send()
        .await
        .unwrap();
    assert_ne!(r.status(), 200);

    // The file store's directory replaced by a file: not ready, naming the store; the
    // process still lives.
    let data = app.dir.path().join("data");
    let moved = app.dir.path().join("data-moved");
    std::fs::rename(&data, &moved).unwrap();
    std::fs::write(&data, "not a directory").unwrap();
    let r = app.client.get(app.url("/readyz")).send().await.unwrap();
    assert_eq!(r.status(), 503);
    let body: Json = r.json().await.unwrap();
    assert_eq!(body["status"], "unavailable", "{body}");
    assert!(
        body["store"]
            .as_str()
            .unwrap()
            .contains("cannot create a file"),
        "{body}"
    );
    let r = app.client.get(app.url("/healthz")).send().await.unwrap();
    assert_eq!(r.status(), 200, "alive while not ready");
    std::fs::remove_file(&data).unwrap();
    std::fs::rename(&moved, &data).unwrap();
    let r = app.client.get(app.url("/readyz")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    app.stop().await;
}

#[tokio::test]
async fn every_response_carries_a_request_id() {
    let app = spawn_app().await;
    // The client's id is kept.
    let r = app
        .admin(Method::GET, "/campaigns")
        .header("x-request-id", "client-chosen-42")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-request-id"], "client-chosen-42");
    // Errors carry one too; without the client's, the server makes one.
    let r = app.client.get(app.url("/campaigns")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let made = r.headers()["x-request-id"].to_str().unwrap().to_string();
    assert_eq!(made.len(), 32, "{made}");
    assert!(made.chars().all(|c| c.is_ascii_hexdigit()), "{made}");
    let r = app.client.get(app.url("/healthz")).send().await.unwrap();
    assert_ne!(
        r.headers()["x-request-id"].to_str().unwrap(),
        made,
        "a new one each time"
    );
    // A cross-site write refused before it reaches a route carries one too.
    let r = app
        .admin(Method::POST, "/campaigns")
        .header("origin", "https://elsewhere.example")
        .json(&json!({"name": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(r.headers()["x-request-id"].len(), 32);
    // One that does not fit (too long, or with spaces) is replaced.
    for bad in ["x".repeat(129), "two words".to_string()] {
        let r = app
            .client
            .get(app.url("/healthz"))
            .header("x-request-id", bad.as_str())
            .send()
            .await
            .unwrap();
        let got = r.headers()["x-request-id"].to_str().unwrap();
        assert!(got != bad && got.len() == 32, "{bad} -> {got}");
    }
    app.stop().await;
}

#[tokio::test]
async fn json_logs_carry_the_request_id() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_entiserve"))
        .args([
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--log-format",
            "json",
            "--data-dir",
        ])
        .arg(dir.path().join("data"))
        .arg("--entities")
        .arg(shipped_entities())
        .env("ENTISERVE_ADMIN_PASSWORD", ADMIN_PASSWORD)
        .env("RUST_LOG", "entiserve=debug")
        .env_remove("DATABASE_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let next = |rx: &std::sync::mpsc::Receiver<String>| {
        rx.recv_timeout(Duration::from_secs(30))
            .expect("a log line within 30 s")
    };
    let base = loop {
        let line = next(&rx);
        if let Some(addr) = line.strip_prefix("entiserve listening on ") {
            break addr.to_string();
        }
    };
    let r = reqwest::Client::new()
        .get(format!("{base}/campaigns"))
        .basic_auth("admin", Some(ADMIN_PASSWORD))
        .header("x-request-id", "trace-me-7")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let found = loop {
        let line = next(&rx);
        let Ok(v) = serde_json::from_str::<Json>(&line) else {
            continue;
        };
        assert!(v["level"].is_string() && v["timestamp"].is_string(), "{v}");
        if v["fields"]["message"] == "request answered" {
            break v;
        }
    };
    assert_eq!(found["span"]["request_id"], "trace-me-7", "{found}");
    assert_eq!(found["fields"]["status"], 200, "{found}");

    // The background work a request starts logs under its id too.
    let r = reqwest::Client::new()
        .post(format!("{base}/campaigns?bgrs=1"))
        .basic_auth("admin", Some(ADMIN_PASSWORD))
        .header("x-request-id", "batch-trace-9")
        .json(&json!([{"name": "one"}, {"name": "two"}]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let rid = r.json::<Json>().await.unwrap()["request"]
        .as_str()
        .unwrap()
        .to_string();
    let worker = loop {
        let line = next(&rx);
        let Ok(v) = serde_json::from_str::<Json>(&line) else {
            continue;
        };
        if v["fields"]["message"] == "background request runs" {
            break v;
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(worker["span"]["name"], "background", "{worker}");
    assert_eq!(worker["span"]["request_id"], "batch-trace-9", "{worker}");
    assert_eq!(worker["span"]["rid"], rid.as_str(), "{worker}");
}

/// The value of the sample `name{labels}` in a Prometheus text scrape (0 when absent).
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map_or(0.0, |v| v.trim().parse().unwrap())
}

async fn scrape(app: &TestApp) -> String {
    let r = app.admin(Method::GET, "/metrics").send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    r.text().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_requests_and_changes_for_admins() {
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let metrics_addr = free.local_addr().unwrap();
    drop(free);
    let app = spawn_with(|s| s.metrics_bind = Some(metrics_addr)).await;
    app.create_user("watcher", "watcher-password").await;
    let r = app.client.get(app.url("/metrics")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = app
        .as_user("watcher", "watcher-password", Method::GET, "/metrics")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);

    let created = "entiserve_changes_applied_total{entity=\"campaigns\",op=\"create\"}";
    let before = sample(&scrape(&app).await, created);
    // A synchronous batch of three creates.
    let (s, _) = json(
        app.admin(Method::POST, "/campaigns?bgrs=0")
            .json(&json!([{"name": "m1"}, {"name": "m2"}, {"name": "m3"}]))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200);
    // And a background one, waited for.
    let (s, b) = json(
        app.admin(Method::POST, "/campaigns?bgrs=1")
            .json(&json!([{"name": "m4"}, {"name": "m5"}]))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 202);
    // Scraped while it may still run, then after its end.
    scrape(&app).await;
    app.wait_ended(b["request"].as_str().unwrap(), Duration::from_secs(30))
        .await;
    let text = scrape(&app).await;
    assert!(
        sample(&text, created) >= before + 5.0,
        "5 more creates: {before} then {}",
        sample(&text, created)
    );
    assert!(
        sample(
            &text,
            "entiserve_http_requests_total{method=\"POST\",route=\"/:entity\",status=\"200\"}"
        ) >= 1.0,
        "{text}"
    );
    assert!(
        text.contains(
            "entiserve_http_request_duration_seconds_bucket{method=\"POST\",route=\"/:entity\""
        ),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("entiserve_background_requests{")
                && l.contains("status=\"finished\"")
                && !l.ends_with(" 0")),
        "the finished background batch in the queue gauge: {text}"
    );

    // The batch has ended: no request is counted in progress any more.
    assert!(
        !text
            .lines()
            .any(|l| l.starts_with("entiserve_background_requests{")
                && l.contains("status=\"in progress\"")
                && !l.ends_with(" 0")),
        "{text}"
    );

    // The same without credentials on --metrics-bind.
    let r = reqwest::get(format!("http://{metrics_addr}/metrics"))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains(created));
    app.stop().await;
}

/// `GET /healthz` and the GET of one object by a plain path are handed to their handlers by the
/// front layer itself, other spellings by the router: every spelling answers the same, with the
/// front layer's headers, and is counted under its route.
#[tokio::test]
async fn every_spelling_of_a_read_answers_the_same() {
    let app = spawn_app().await;
    let c = app.create("campaigns", json!({"name": "Spelt"})).await;
    let id = c["id"].as_i64().unwrap();
    // The metrics are the process's: other tests of this file add to them too.
    let reads_series =
        "entiserve_http_requests_total{method=\"GET\",route=\"/:entity/:id\",status=\"200\"}";
    let health_series =
        "entiserve_http_requests_total{method=\"GET\",route=\"/healthz\",status=\"200\"}";
    let before = scrape(&app).await;
    let escaped_id: String = id
        .to_string()
        .bytes()
        .map(|b| format!("%{b:02X}"))
        .collect();
    let spellings = [
        format!("/campaigns/{id}"),
        format!("/v2.5/campaigns/{id}"),
        format!("//campaigns/{id}"),
        format!("/cam%70aigns/{id}"),
        format!("/campaigns/{escaped_id}"),
    ];
    for path in &spellings {
        let r = app.admin(Method::GET, path).send().await.unwrap();
        assert_eq!(r.headers()["content-type"], "application/json", "{path}");
        assert_eq!(r.headers()["x-request-id"].len(), 32, "{path}");
        assert_eq!(json(r).await, (200, c.clone()), "{path}");
        let anonymous = reqwest::get(app.url(path)).await.unwrap();
        assert!(
            anonymous.headers().contains_key("www-authenticate"),
            "{path}"
        );
        let (s, body) = json(anonymous).await;
        assert_eq!(
            (s, error_code(&body)),
            (401, "unauthorized".to_string()),
            "{path}"
        );
    }
    for (path, description) in [
        ("/campaigns/0", "campaigns `0` does not exist"),
        ("/campaigns/%30", "campaigns `0` does not exist"),
        ("/campaigns/x", "campaigns `x` does not exist"),
        (
            &*format!("/campaigns/{}", "é".repeat(3000)),
            &*format!("campaigns `{}...` does not exist", "é".repeat(40)),
        ),
        ("/nowhere/1", "there is no resource `nowhere`"),
        (
            &*format!("/{}/1", "n".repeat(3000)),
            &*format!("there is no resource `{}...`", "n".repeat(40)),
        ),
        (&*format!("/campaigns/{id}/"), "no such route"),
    ] {
        let (s, body) = json(app.admin(Method::GET, path).send().await.unwrap()).await;
        assert_eq!(
            (s, body["description"].as_str()),
            (404, Some(description)),
            "{path}"
        );
    }
    let r = app
        .admin(Method::GET, "/healthz")
        .header("x-request-id", "health-1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()["content-type"],
        "application/json; charset=utf-8"
    );
    assert_eq!(r.headers()["x-request-id"], "health-1");
    assert_eq!(r.text().await.unwrap(), r#"{"status":"ok"}"#);
    let head = app.admin(Method::HEAD, "/healthz").send().await.unwrap();
    assert_eq!(head.status(), 200);
    let text = scrape(&app).await;
    let reads = sample(&text, reads_series) - sample(&before, reads_series);
    assert!(
        reads >= spellings.len() as f64,
        "{reads} reads counted: {text}"
    );
    let health = sample(&text, health_series) - sample(&before, health_series);
    assert!(health >= 1.0, "{health} health checks counted: {text}");
}
