//! Many writers at once (CONTRACT.md section 10): overlapping batches, uploads and single calls
//! changing the same rows all succeed; contention is retried inside the server, never shown
//! to a client. On PostgreSQL (`TEST_DATABASE_URL`) these are the cases that deadlocked.

mod common;

use common::*;
use rand::seq::SliceRandom;
use reqwest::Method;
use reqwest::multipart::{Form, Part};
use serde_json::{Value as Json, json};
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const ROWS: usize = 2000;
const CLIENTS: usize = 4;
const BATCHES: usize = 4;

/// Creates `n` campaigns with one synchronous batch; their ids.
async fn campaigns(app: &TestApp, n: usize) -> Vec<i64> {
    let items: Vec<Json> = (0..n).map(|i| json!({"name": format!("c{i}")})).collect();
    let (s, b) = json(
        app.admin(Method::POST, "/v2.5/campaigns?bgrs=false")
            .json(&items)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    b.as_array()
        .unwrap()
        .iter()
        .map(|i| {
            assert_eq!(i["status"], 200, "{i}");
            let body: Json = serde_json::from_str(i["body"].as_str().unwrap()).unwrap();
            body["id"].as_i64().unwrap()
        })
        .collect()
}

/// `ids` in a random order.
fn shuffled(ids: &[i64]) -> Vec<i64> {
    let mut v = ids.to_vec();
    v.shuffle(&mut rand::rng());
    v
}

/// The name batch `batch` of client `client` writes into campaign `id`.
fn name_of(client: usize, batch: usize, id: i64) -> String {
    format!("client {client} batch {batch} row {id}")
}

/// A PUT batch of every id, in a random order, naming each row after its writer.
fn put_items(ids: &[i64], client: usize, batch: usize) -> Vec<Json> {
    shuffled(ids)
        .into_iter()
        .map(|id| json!({"id": id, "name": name_of(client, batch, id), "type": batch + 1}))
        .collect()
}

/// Checks that a result item at `i` of batch `items` is a 200 holding what it wrote.
fn check_item(items: &[Json], i: usize, item: &Json) {
    assert_eq!(item["status"], 200, "item {i}: {item}");
    let body: Json = serde_json::from_str(item["body"].as_str().unwrap()).unwrap();
    assert_eq!(body["id"], items[i]["id"], "item {i} out of order: {body}");
    assert_eq!(body["name"], items[i]["name"], "item {i}: {body}");
}

async fn names(app: &TestApp) -> HashMap<i64, String> {
    app.campaign_names().await.into_iter().collect()
}

/// Every row ends with a value one of the writers wrote.
async fn check_final(app: &TestApp, ids: &[i64], written: impl Fn(i64) -> HashSet<String>) {
    let now = names(app).await;
    for id in ids {
        let name = &now[id];
        assert!(
            written(*id).contains(name),
            "campaign {id} holds `{name}`, which no writer wrote"
        );
    }
}

fn all_writes(id: i64) -> HashSet<String> {
    (0..CLIENTS)
        .flat_map(|c| (0..BATCHES).map(move |b| name_of(c, b, id)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn overlapping_synchronous_batches_of_the_same_rows_all_succeed() {
    let app = spawn_app().await;
    let ids = campaigns(&app, ROWS).await;
    let started = Instant::now();
    let mut clients = Vec::new();
    for client in 0..CLIENTS {
        let (http, url, ids) = (
            app.client.clone(),
            app.url("/campaigns?bgrs=false"),
            ids.clone(),
        );
        clients.push(tokio::spawn(async move {
            for batch in 0..BATCHES {
                let items = put_items(&ids, client, batch);
                let r = http
                    .put(&url)
                    .basic_auth("admin", Some(ADMIN_PASSWORD))
                    .json(&items)
                    .send()
                    .await
                    .unwrap();
                let (s, b) = json(r).await;
                assert_eq!(s, 200, "{b}");
                let out = b.as_array().unwrap();
                assert_eq!(out.len(), items.len());
                for (i, item) in out.iter().enumerate() {
                    check_item(&items, i, item);
                }
            }
        }));
    }
    for c in clients {
        c.await.unwrap();
    }
    eprintln!(
        "{CLIENTS} clients x {BATCHES} batches x {ROWS} rows: {:?}",
        started.elapsed()
    );
    check_final(&app, &ids, all_writes).await;
    app.stop().await;
}

/// Waits until request `rid` is finished (with status 200); its stored result.
async fn finished_result_text(app: &TestApp, rid: &str) -> String {
    let rec = app.wait_ended(rid, Duration::from_secs(120)).await;
    assert_eq!(rec["status_id"], "4", "{rec}");
    assert_eq!(rec["status"], "200", "{rec}");
    app.result_text(rid).await
}

/// Waits until request `rid` is finished; its result items.
async fn finished_result(app: &TestApp, rid: &str) -> Vec<Json> {
    let text = finished_result_text(app, rid).await;
    let b: Json = serde_json::from_str(&text).unwrap();
    b.as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn overlapping_background_batches_of_the_same_rows_all_succeed() {
    let app = spawn_app().await;
    let ids = campaigns(&app, ROWS).await;
    let mut submitted = Vec::new();
    let mut sends = Vec::new();
    for client in 0..CLIENTS {
        for batch in 0..BATCHES {
            let items = put_items(&ids, client, batch);
            let r = app
                .admin(Method::PUT, "/v2.5/campaigns")
                .json(&items)
                .send();
            sends.push(async move {
                let (s, b) = json(r.await.unwrap()).await;
                assert_eq!(s, 202, "{b}");
                (b["request"].as_str().unwrap().to_string(), items)
            });
        }
    }
    for (rid, items) in futures::future::join_all(sends).await {
        submitted.push((rid, items));
    }
    for (rid, items) in &submitted {
        let out = finished_result(&app, rid).await;
        assert_eq!(out.len(), items.len(), "{rid}");
        for (i, item) in out.iter().enumerate() {
            check_item(items, i, item);
        }
    }
    check_final(&app, &ids, all_writes).await;
    app.stop().await;
}

/// A CSV updating every id in `ids` (in that order), naming each row after `who`.
fn update_csv(ids: &[i64], who: &str) -> Vec<u8> {
    let mut out = String::from("op;id;name\r\n");
    for id in ids {
        out.push_str(&format!("u;{id};{who} row {id}\r\n"));
    }
    out.into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn overlapping_uploads_of_the_same_rows_all_succeed() {
    let app = spawn_app().await;
    let ids = campaigns(&app, ROWS).await;
    // Two run while their requests wait, two in the background.
    let who = ["upload a", "upload b", "upload c", "upload d"];
    let mut runs = Vec::new();
    for (n, w) in who.into_iter().enumerate() {
        let background = n >= 2;
        let csv = update_csv(&shuffled(&ids), w);
        let form = Form::new()
            .text("entity", "campaigns")
            .text("bgrs", if background { "1" } else { "0" })
            .part("csvfile", Part::bytes(csv).file_name(format!("{w}.csv")));
        let r = app
            .admin(Method::POST, "/tools/uploader.ex.php")
            .multipart(form)
            .send();
        let app = &app;
        runs.push(async move {
            let r = r.await.unwrap();
            let status = r.status();
            let text = r.text().await.unwrap();
            if !background {
                assert_eq!(status, 200, "{text}");
                return text;
            }
            assert_eq!(status, 202, "{text}");
            let b: Json = serde_json::from_str(&text).unwrap();
            finished_result_text(app, b["request"].as_str().unwrap()).await
        });
    }
    for text in futures::future::join_all(runs).await {
        let rows: Vec<Vec<String>> = csv::ReaderBuilder::new()
            .delimiter(b';')
            .has_headers(true)
            .from_reader(text.as_bytes())
            .records()
            .map(|r| r.unwrap().iter().map(str::to_string).collect())
            .collect();
        assert_eq!(rows.len(), ROWS);
        for r in &rows {
            assert_eq!(r[0], "OK", "{r:?}");
        }
    }
    check_final(&app, &ids, |id| {
        who.iter().map(|w| format!("{w} row {id}")).collect()
    })
    .await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn overlapping_single_puts_of_the_same_rows_all_succeed() {
    let app = spawn_app().await;
    let ids = campaigns(&app, 50).await;
    let mut clients = Vec::new();
    for client in 0..8 {
        let (http, base, ids) = (app.client.clone(), app.url("/campaigns"), ids.clone());
        clients.push(tokio::spawn(async move {
            for round in 0..3 {
                for id in shuffled(&ids) {
                    let name = name_of(client, round, id);
                    let r = http
                        .put(format!("{base}/{id}"))
                        .basic_auth("admin", Some(ADMIN_PASSWORD))
                        .json(&json!({"name": name}))
                        .send()
                        .await
                        .unwrap();
                    let (s, b) = json(r).await;
                    assert_eq!((s, b["name"].as_str()), (200, Some(name.as_str())), "{b}");
                }
            }
        }));
    }
    for c in clients {
        c.await.unwrap();
    }
    check_final(&app, &ids, |id| {
        (0..8)
            .flat_map(|c| (0..3).map(move |r| name_of(c, r, id)))
            .collect()
    })
    .await;
    app.stop().await;
}

/// Warnings logged by the servers of this test binary.
static WARNINGS: Mutex<Vec<u8>> = Mutex::new(Vec::new());

struct Capture;

impl std::io::Write for Capture {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        WARNINGS.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// On PostgreSQL: a writer outside the server that takes row locks in the opposite order
/// deadlocks with a batch; the batch is the victim (the outside session detects deadlocks
/// late), is retried, and still answers 200 for every item.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deadlock_with_another_writer_is_retried() {
    use sqlx::Connection;
    let app = spawn_app().await;
    let Some(db) = &app.db else {
        eprintln!("skipped: deadlocks need PostgreSQL (set TEST_DATABASE_URL)");
        app.stop().await;
        return;
    };
    tracing_subscriber::fmt()
        .with_writer(|| Capture)
        .with_ansi(false)
        .with_max_level(tracing::Level::WARN)
        .init();
    let ids = campaigns(&app, 2).await;
    let (low, high) = (ids[0], ids[1]);
    let before = entiserve::storage::contention::counts();
    let mut outside = sqlx::PgConnection::connect(&db.url).await.unwrap();
    let run = |sql: String| sqlx::query(sqlx::AssertSqlSafe(sql));
    run("SET deadlock_timeout = '20s'".into())
        .execute(&mut outside)
        .await
        .unwrap();
    run("BEGIN".into()).execute(&mut outside).await.unwrap();
    run(format!(
        "UPDATE campaigns SET description = 'outside' WHERE id = {high}"
    ))
    .execute(&mut outside)
    .await
    .unwrap();
    // The batch locks `low`, then waits for `high`.
    let items = vec![
        json!({"id": high, "name": "batch high"}),
        json!({"id": low, "name": "batch low"}),
    ];
    let batch = tokio::spawn(
        app.admin(Method::PUT, "/campaigns?bgrs=false")
            .json(&items)
            .send(),
    );
    let waiting = Instant::now();
    loop {
        let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
             AND wait_event_type = 'Lock'",
        )
        .fetch_one(&mut outside)
        .await
        .unwrap();
        if n > 0 {
            break;
        }
        assert!(
            waiting.elapsed() < Duration::from_secs(10),
            "the batch never waited"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Now the outside writer wants `low`: a cycle, which the batch's session breaks after
    // its deadlock_timeout (1 s by default) by failing itself.
    run(format!(
        "UPDATE campaigns SET description = 'outside' WHERE id = {low}"
    ))
    .execute(&mut outside)
    .await
    .unwrap();
    run("COMMIT".into()).execute(&mut outside).await.unwrap();
    let (s, b) = json(batch.await.unwrap().unwrap()).await;
    assert_eq!(s, 200, "{b}");
    for (i, item) in b.as_array().unwrap().iter().enumerate() {
        check_item(&items, i, item);
    }
    let after = entiserve::storage::contention::counts();
    assert!(
        after.deadlock_retries > before.deadlock_retries,
        "no deadlock was retried: {before:?} -> {after:?}"
    );
    let logged = String::from_utf8_lossy(&WARNINGS.lock().unwrap()).into_owned();
    assert!(
        logged.lines().any(|l| l.contains("WARN")
            && l.contains("lost to another writer; retrying")
            && l.contains("attempt=1")
            && l.contains("class=deadlock")),
        "no retry in the log: {logged}"
    );
    let now = names(&app).await;
    assert_eq!(
        (now[&low].as_str(), now[&high].as_str()),
        ("batch low", "batch high")
    );
    app.stop().await;
}
