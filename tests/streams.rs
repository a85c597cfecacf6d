//! Following background requests: `GET /bgrs/<rid>/details` comes a page at a time, and the
//! Server-Sent-Events streams of `GET /bgrs/<rid>/events` share one watcher per request and
//! are capped per user (CONTRACT.md section 10, "Safety").

mod common;

use common::*;
use reqwest::Method;
use reqwest::multipart::{Form, Part};
use serde_json::Value as Json;
use std::time::{Duration, Instant};

const UPLOAD: &str = "/tools/uploader.ex.php";

/// Starts a background upload of `rows` campaigns; returns the request id.
async fn start_upload(app: &TestApp, login: (&str, &str), rows: usize) -> String {
    let mut csv = String::from("op,name\n");
    for i in 1..=rows {
        csv.push_str(&format!("c,stream {i}\n"));
    }
    let f = Form::new()
        .text("entity", "campaigns")
        .text("bgrs", "1")
        .part(
            "csvfile",
            Part::bytes(csv.into_bytes()).file_name("rows.csv"),
        );
    let r = app
        .as_user(login.0, login.1, Method::POST, UPLOAD)
        .multipart(f)
        .send()
        .await
        .unwrap();
    let (s, b) = json(r).await;
    assert_eq!(s, 202, "{b}");
    b["request"].as_str().unwrap().to_string()
}

async fn page(app: &TestApp, rid: &str, query: &str) -> (u16, Json) {
    json(
        app.admin(Method::GET, &format!("/bgrs/{rid}/details{query}"))
            .send()
            .await
            .unwrap(),
    )
    .await
}

fn ids(entries: &[Json]) -> Vec<i64> {
    entries
        .iter()
        .map(|e| e["id"].as_str().unwrap().parse().unwrap())
        .collect()
}

#[tokio::test]
async fn details_come_a_page_at_a_time_and_since_walks_them_all_once() {
    let app = spawn_app().await;
    let rid = start_upload(&app, ("admin", ADMIN_PASSWORD), 2500).await;
    app.wait_finished(&rid).await;

    let (s, first) = json(
        app.admin(Method::GET, &format!("/v2.5/bgrs/{rid}/details"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200);
    let first = first.as_array().unwrap().clone();
    assert_eq!(first.len(), 1000, "one page");
    assert!(
        !first[0]["details"].as_str().unwrap().starts_with("Line: "),
        "oldest first: the start message"
    );

    let all = all_details(&app, &rid).await;
    assert_eq!(all[..1000], first[..], "the first page starts the walk");
    let all_ids = ids(&all);
    assert!(
        all_ids.windows(2).all(|w| w[0] < w[1]),
        "in order, once each"
    );
    let lines: Vec<&str> = all
        .iter()
        .filter_map(|e| e["details"].as_str())
        .filter(|d| d.starts_with("Line: "))
        .collect();
    assert_eq!(lines.len(), 2500);
    for (i, l) in lines.iter().enumerate() {
        assert!(l.starts_with(&format!("Line: {} done.", i + 1)), "{l}");
    }
    assert_eq!(all.last().unwrap()["details"], "done");

    // Smaller pages walk the same entries.
    let mut walked = Vec::new();
    let mut since = 0;
    loop {
        let (s, p) = page(&app, &rid, &format!("?since={since}&limit=333")).await;
        assert_eq!(s, 200);
        let p = p.as_array().unwrap().clone();
        assert!(p.len() <= 333);
        let Some(last) = ids(&p).last().copied() else {
            break;
        };
        since = last;
        walked.extend(p);
    }
    assert_eq!(walked, all);

    for bad in ["?limit=0", "?limit=1001", "?limit=x", "?since=x"] {
        let (s, b) = page(&app, &rid, bad).await;
        assert_eq!(s, 400, "{bad}: {b}");
        assert_eq!(error_code(&b), "bad_request", "{bad}");
    }
    app.stop().await;
}

/// The events of a stream: (kind, data).
fn events(text: &str) -> Vec<(String, Json)> {
    text.split("\n\n")
        .filter(|b| b.lines().any(|l| l.starts_with("data: ")))
        .map(|block| {
            let kind = block
                .lines()
                .find_map(|l| l.strip_prefix("event: "))
                .unwrap_or("message")
                .to_string();
            let data = block
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .unwrap();
            (kind, serde_json::from_str(data).unwrap())
        })
        .collect()
}

async fn stream(app: &TestApp, rid: &str) -> String {
    let r = app
        .admin(Method::GET, &format!("/bgrs/{rid}/events"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    tokio::time::timeout(Duration::from_secs(120), r.text())
        .await
        .expect("the stream ends")
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_of_one_request_each_get_every_entry_then_finished() {
    let app = spawn_app().await;
    let rid = start_upload(&app, ("admin", ADMIN_PASSWORD), 6000).await;
    // Several streams at once, one joining late, and one after the request finished.
    let early = tokio::join!(stream(&app, &rid), stream(&app, &rid), async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        stream(&app, &rid).await
    });
    let after = stream(&app, &rid).await;
    let all = ids(&all_details(&app, &rid).await);
    for text in [early.0, early.1, early.2, after] {
        let ev = events(&text);
        let details: Vec<i64> = ev
            .iter()
            .filter(|(k, _)| k == "detail")
            .map(|(_, d)| d["id"].as_str().unwrap().parse().unwrap())
            .collect();
        assert_eq!(details, all, "every entry once, in order");
        let (last, rec) = ev.last().unwrap();
        assert_eq!(last, "finished");
        assert_eq!(rec["progress"], "100.00");
        let progress: Vec<f64> = ev
            .iter()
            .filter(|(k, _)| k == "progress")
            .map(|(_, d)| d["progress"].as_str().unwrap().parse().unwrap())
            .collect();
        assert!(progress.windows(2).all(|w| w[0] <= w[1]), "{progress:?}");
        // Nothing comes after `finished`, and it comes once.
        assert_eq!(ev.iter().filter(|(k, _)| k == "finished").count(), 1);
    }
    app.stop().await;
}

/// `GET /bgrs/<rid>/events` as admin, the response as soon as its head arrives.
async fn open(app: &TestApp, rid: &str) -> reqwest::Response {
    app.admin(Method::GET, &format!("/bgrs/{rid}/events"))
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_holds_at_most_the_set_number_of_streams() {
    let app = spawn_with(|s| s.max_streams_per_user = 2).await;
    app.create_user("other", "other-password").await;
    let rid = start_upload(&app, ("admin", ADMIN_PASSWORD), 100_000).await;
    let first = open(&app, &rid).await;
    let second = open(&app, &rid).await;
    assert_eq!(first.status(), 200);
    assert_eq!(second.status(), 200);

    let third = open(&app, &rid).await;
    assert_eq!(third.status(), 429);
    let retry: u64 = third.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(retry >= 1);
    let (_, b) = json(third).await;
    assert_eq!(error_code(&b), "too_many_streams");

    // Another user's streams are counted apart.
    let theirs = start_upload(&app, ("other", "other-password"), 10).await;
    let r = app
        .as_user(
            "other",
            "other-password",
            Method::GET,
            &format!("/bgrs/{theirs}/events"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    drop(r);

    // A closed stream gives its place back.
    drop(first);
    let start = Instant::now();
    let fourth = loop {
        let r = open(&app, &rid).await;
        if r.status() == 200 {
            break r;
        }
        assert_eq!(r.status(), 429);
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the closed stream's place never came back"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let r = app
        .admin(Method::DELETE, &format!("/bgrs/{rid}"))
        .send()
        .await
        .unwrap();
    assert!(r.status() == 200 || r.status() == 202);
    // The held streams end with the request.
    for s in [second, fourth] {
        let text = tokio::time::timeout(Duration::from_secs(60), s.text())
            .await
            .expect("the stream ends")
            .unwrap();
        assert_eq!(events(&text).last().unwrap().0, "finished");
    }
    // ...and give their places back.
    let start = Instant::now();
    loop {
        let r = open(&app, &rid).await;
        if r.status() == 200 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(20));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    app.stop().await;
}
