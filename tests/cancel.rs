//! Cancelling background requests (`DELETE /bgrs/<rid>`): the request stops, ends as
//! `cancelled`, keeps what ran, and its result marks the rest as not run. Runs on SQLite, and
//! on PostgreSQL when TEST_DATABASE_URL is set.

mod common;

use common::*;
use reqwest::Method;
use reqwest::multipart::{Form, Part};
use serde_json::{Value as Json, json};
use std::time::{Duration, Instant};

async fn record(app: &TestApp, rid: &str) -> Json {
    let (s, b) = json(
        app.admin(Method::GET, &format!("/bgrs/{rid}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    b[0].clone()
}

/// Waits until the request has done some work (progress above 0), then cancels it.
async fn cancel_once_running(app: &TestApp, rid: &str) -> Json {
    let start = Instant::now();
    loop {
        let rec = record(app, rid).await;
        let progress: f64 = rec["progress"].as_str().unwrap().parse().unwrap();
        if progress > 0.0 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "never started");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let r = app
        .admin(Method::DELETE, &format!("/bgrs/{rid}"))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let (_, body) = json(r).await;
    assert!(status == 200 || status == 202, "{status} {body}");
    let start = Instant::now();
    loop {
        let rec = record(app, rid).await;
        if rec["status_id"] != "2" {
            return rec;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "never stopped");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_upload_keeps_exactly_the_rows_its_result_marks_done() {
    let app = spawn_app().await;
    let mut csv = String::from("op;name;description\n");
    for i in 0..100_000 {
        csv.push_str(&format!("c;cancel {i};row {i}\n"));
    }
    let f = Form::new()
        .text("entity", "campaigns")
        .text("bgrs", "1")
        .part(
            "csvfile",
            Part::bytes(csv.into_bytes()).file_name("big.csv"),
        );
    let (s, b) = json(
        app.admin(Method::POST, "/tools/uploader.ex.php")
            .multipart(f)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 202, "{b}");
    let rid = b["request"].as_str().unwrap().to_string();
    let rec = cancel_once_running(&app, &rid).await;
    assert_eq!(rec["status_id"], "5", "{rec}");
    assert_eq!(rec["status_name"], "cancelled");
    assert_ne!(rec["finished_dt"], "");
    let progress: f64 = rec["progress"].as_str().unwrap().parse().unwrap();
    assert!(progress < 100.0, "{rec}");

    let r = app
        .admin(Method::GET, &format!("/bgrs/{rid}/result"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    let mut rd = csv::ReaderBuilder::new()
        .delimiter(b';')
        .from_reader(text.as_bytes());
    assert_eq!(rd.headers().unwrap().get(0), Some("res"));
    assert_eq!(rd.headers().unwrap().get(1), Some("id"));
    let (mut ok, mut not_run, mut rows) = (0usize, 0usize, 0usize);
    let mut ids = std::collections::HashSet::new();
    let mut seen_not_run = false;
    for rec in rd.records() {
        let rec = rec.unwrap();
        rows += 1;
        match rec.get(0).unwrap() {
            "OK" => {
                assert!(!seen_not_run, "an OK row after a not-run row");
                ok += 1;
                assert!(ids.insert(rec.get(1).unwrap().to_string()));
            }
            other => {
                assert!(other.starts_with("not run"), "{other}");
                assert_eq!(rec.get(1), Some(""), "a row that did not run has no id");
                seen_not_run = true;
                not_run += 1;
            }
        }
    }
    assert_eq!(rows, 100_000);
    assert!(ok > 0 && not_run > 0, "ok {ok}, not run {not_run}");
    assert_eq!(
        count(&app, "campaigns").await,
        ok as i64,
        "applied rows = rows marked OK"
    );

    let d = all_details(&app, &rid).await;
    let lines = d
        .iter()
        .filter(|e| e["details"].as_str().unwrap().starts_with("Line: "))
        .count();
    assert_eq!(lines, ok, "one detail line per row that ran");
    let last = d.last().unwrap()["details"].clone();
    assert!(last.as_str().unwrap().starts_with("cancelled"), "{last}");

    // A second cancel, and a cancel of a finished request, are conflicts.
    let r = app
        .admin(Method::DELETE, &format!("/bgrs/{rid}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_batch_marks_the_items_that_did_not_run() {
    let app = spawn_app().await;
    let items: Vec<Json> = (0..100_000)
        .map(|i| json!({"name": format!("batch {i}")}))
        .collect();
    let (s, b) = json(
        app.admin(Method::POST, "/v2.5/campaigns")
            .json(&items)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 202, "{b}");
    let rid = b["request"].as_str().unwrap().to_string();
    let rec = cancel_once_running(&app, &rid).await;
    assert_eq!(rec["status_id"], "5", "{rec}");
    let (s, results) = json(
        app.admin(Method::GET, &format!("/v2.5/bgrs/{rid}/result"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200);
    let results = results.as_array().unwrap();
    assert_eq!(results.len(), 100_000);
    let ok = results.iter().filter(|r| r["status"] == 200).count();
    let not_run = results
        .iter()
        .filter(|r| r["status"] == 409 && r["body"].as_str().unwrap().contains("\"not_run\""))
        .count();
    assert_eq!(ok + not_run, 100_000);
    assert!(ok > 0 && not_run > 0, "ok {ok}, not run {not_run}");
    assert_eq!(count(&app, "campaigns").await, ok as i64);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_owner_or_an_admin_cancels() {
    let app = spawn_app().await;
    app.create_user("carol", "carol-secret").await;
    let items: Vec<Json> = (0..50_000)
        .map(|i| json!({"name": format!("c {i}")}))
        .collect();
    let (_, b) = json(
        app.admin(Method::POST, "/campaigns")
            .json(&items)
            .send()
            .await
            .unwrap(),
    )
    .await;
    let rid = b["request"].as_str().unwrap().to_string();
    let r = app
        .as_user(
            "carol",
            "carol-secret",
            Method::DELETE,
            &format!("/bgrs/{rid}"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let r = app
        .admin(Method::DELETE, "/bgrs/00000000000000000000000000000000")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    app.stop().await;
}
