//! Batches and background requests (CONTRACT.md sections 5 and 6) against a real server.

mod common;

use common::*;
use reqwest::Method;
use serde_json::{Value as Json, json};
use std::time::{Duration, Instant};

async fn submit(app: &TestApp, m: Method, path: &str, body: Json) -> String {
    let (s, b) = json(app.admin(m, path).json(&body).send().await.unwrap()).await;
    assert_eq!(s, 202, "{b}");
    let rid = b["request"].as_str().unwrap().to_string();
    assert_eq!(b.as_object().unwrap().len(), 1);
    assert_eq!(rid.len(), 32);
    assert!(
        rid.chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    );
    rid
}

async fn result(app: &TestApp, rid: &str) -> Vec<(u16, Json)> {
    let (s, b) = json(
        app.admin(Method::GET, &format!("/v2.5/bgrs/{rid}/result"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    items(&b)
}

/// Reads the campaign `created` names by its id and expects exactly `created`; returns the id.
async fn read_back(app: &TestApp, created: &Json) -> i64 {
    let id = created["id"].as_i64().expect("an id");
    let (s, read) = json(
        app.admin(Method::GET, &format!("/v2.5/campaigns/{id}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200, "{read}");
    assert_eq!(*created, read);
    id
}

/// Result items as (status, parsed body), checking the exact shape.
fn items(b: &Json) -> Vec<(u16, Json)> {
    b.as_array()
        .expect("an array")
        .iter()
        .map(|i| {
            let o = i.as_object().unwrap();
            assert_eq!(o.len(), 2, "{i}");
            let body = serde_json::from_str(o["body"].as_str().expect("body is a string")).unwrap();
            (
                o["status"].as_u64().expect("status is an integer") as u16,
                body,
            )
        })
        .collect()
}

#[tokio::test]
async fn background_batch_with_a_bad_item_among_good_ones() {
    let app = spawn_app().await;
    let rid = submit(
        &app,
        Method::POST,
        "/v2.5/campaigns",
        json!([{"name": "a"}, {"nam": "b"}, {"name": "c", "type": "x"}, {"name": "d"}]),
    )
    .await;
    let rec = app.wait_finished(&rid).await;
    let keys: Vec<&String> = rec.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "id",
            "rid",
            "user_id",
            "name",
            "created_dt",
            "status_id",
            "status_name",
            "progress",
            "finished_dt",
            "result",
            "status",
            "content_type",
            "dry_run",
            "atomic",
            "kind",
            "entity",
            "title"
        ]
    );
    assert!(
        rec.as_object().unwrap().values().all(Json::is_string),
        "{rec}"
    );
    assert_eq!(rec["status_name"], "finished");
    assert_eq!(rec["title"], "batch of 4 creates of campaigns");
    assert_eq!(rec["progress"], "100.00");
    assert_eq!(rec["name"], "batch");
    assert_eq!(rec["status"], "200");
    assert_eq!(rec["rid"], rid.as_str());
    assert_eq!(rec["finished_dt"].as_str().unwrap().len(), 19);
    assert_eq!(
        rec["result"],
        format!("media/keep1m/bgrs.{rid}.result.json")
    );

    let r = result(&app, &rid).await;
    let statuses: Vec<u16> = r.iter().map(|(s, _)| *s).collect();
    assert_eq!(statuses, [200, 400, 400, 200]);
    assert_eq!(r[0].1["name"], "a");
    assert!(r[0].1["id"].as_i64().is_some());
    assert_eq!(r[1].1["error"], "unknown_field");
    assert_eq!(r[3].1["name"], "d");
    let listed = app.admin(Method::GET, "/campaigns").send().await.unwrap();
    assert_eq!(listed.headers()["x-total-count"], "2");

    // The stored file path serves the same result; unprefixed result route too.
    let (s, same) = json(
        app.admin(
            Method::GET,
            &format!("/media/keep1m/bgrs.{rid}.result.json"),
        )
        .send()
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(items(&same), r);
    let (s, _) = json(
        app.admin(Method::GET, &format!("/bgrs/{rid}/result"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200);
    app.stop().await;
}

#[tokio::test]
async fn synchronous_update_and_delete_batches_with_missing_ids() {
    let app = spawn_app().await;
    let a = app.create("campaigns", json!({"name": "a"})).await;
    let b = app.create("campaigns", json!({"name": "b"})).await;
    let (s, body) = json(
        app.admin(Method::PUT, "/v2.5/campaigns?bgrs=false")
            .json(&json!([{"id": a["id"], "name": "A"}, {"name": "no id"}, {"id": 999999, "name": "x"}, {"id": b["id"], "type": 5}]))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200, "{body}");
    let r = items(&body);
    assert_eq!(
        r.iter().map(|x| x.0).collect::<Vec<_>>(),
        [200, 400, 404, 200]
    );
    assert_eq!(r[0].1["name"], "A");
    assert_eq!(r[3].1["type"], 5);
    assert_eq!(r[3].1["name"], "b", "only the given fields change");

    let (s, body) = json(
        app.admin(Method::DELETE, "/campaigns?bgrs=0")
            .json(&json!([a["id"], {"id": 424242}, {"nope": 1}, b["id"].to_string()]))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200, "{body}");
    let r = items(&body);
    assert_eq!(
        r.iter().map(|x| x.0).collect::<Vec<_>>(),
        [200, 404, 400, 200]
    );
    assert_eq!(r[0].1["id"], a["id"]);
    let listed = app.admin(Method::GET, "/campaigns").send().await.unwrap();
    assert_eq!(listed.headers()["x-total-count"], "0");
    app.stop().await;
}

#[tokio::test]
async fn empty_batches() {
    let app = spawn_app().await;
    let (s, b) = json(
        app.admin(Method::POST, "/campaigns?bgrs=no")
            .json(&json!([]))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((s, b), (200, json!([])));
    let rid = submit(&app, Method::POST, "/campaigns", json!([])).await;
    let rec = app.wait_finished(&rid).await;
    assert_eq!(rec["progress"], "100.00");
    assert!(result(&app, &rid).await.is_empty());
    app.stop().await;
}

#[tokio::test]
async fn a_single_call_in_the_background() {
    let app = spawn_app().await;
    let rid = submit(
        &app,
        Method::POST,
        "/campaigns?bgrs=1&name=solo",
        json!({"type": 3}),
    )
    .await;
    let rec = app.wait_finished(&rid).await;
    assert_eq!(rec["name"], "POST /campaigns");
    assert_eq!(rec["status"], "200");
    let (s, body) = json(
        app.admin(Method::GET, &format!("/v2.5/bgrs/{rid}/result"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(
        (body["name"].as_str(), body["type"].as_i64()),
        (Some("solo"), Some(3))
    );

    // Input that cannot run is refused at once; nothing is queued.
    let id = body["id"].as_i64().unwrap();
    let r = app
        .admin(Method::PUT, &format!("/v2.5/campaigns/{id}?bgrs=yes"))
        .json(&json!({"type": "many"}))
        .send()
        .await
        .unwrap();
    let (s, b) = json(r).await;
    assert_eq!((s, error_code(&b)), (400, "validation_failed".into()));

    // A call that fails when it runs: the record carries its status, the result its error.
    let rid = submit(
        &app,
        Method::PUT,
        "/v2.5/campaigns/999999?bgrs=yes",
        json!({"type": 2}),
    )
    .await;
    let rec = app.wait_finished(&rid).await;
    assert_eq!(rec["status"], "404");
    assert_eq!(rec["name"], "PUT /v2.5/campaigns/999999");
    let r = app
        .admin(Method::GET, &format!("/bgrs/{rid}/result"))
        .send()
        .await
        .unwrap();
    let (_, body) = json(r).await;
    assert_eq!(body["error"], "not_found");

    let rid = submit(
        &app,
        Method::DELETE,
        &format!("/campaigns/{id}?bgrs=true"),
        json!({}),
    )
    .await;
    assert_eq!(app.wait_finished(&rid).await["status"], "200");
    let (s, _) = json(
        app.admin(Method::GET, &format!("/campaigns/{id}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 404);
    app.stop().await;
}

#[tokio::test]
async fn other_users_see_nothing() {
    let app = spawn_app().await;
    app.create_user("eve", "eve-password").await;
    let rid = submit(&app, Method::POST, "/campaigns", json!([{"name": "mine"}])).await;
    app.wait_finished(&rid).await;
    for path in [
        format!("/bgrs/{rid}"),
        format!("/v2.5/bgrs/{rid}"),
        format!("/bgrs/{rid}/details"),
        format!("/v2.5/bgrs/{rid}/result"),
        format!("/bgrs/{rid}/events"),
        format!("/media/keep1m/bgrs.{rid}.result.json"),
    ] {
        let (s, b) = json(
            app.as_user("eve", "eve-password", Method::GET, &path)
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!((s, error_code(&b)), (404, "not_found".into()), "{path}");
    }
    let (s, b) = json(
        app.as_user("eve", "eve-password", Method::GET, "/bgrs")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((s, b), (200, json!([])));
    // Her own request is hers to see; the admin sees both.
    let (s, b) = json(
        app.as_user("eve", "eve-password", Method::POST, "/campaigns")
            .json(&json!([{"name": "hers"}]))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 202);
    let hers = b["request"].as_str().unwrap().to_string();
    let (s, _) = json(
        app.as_user("eve", "eve-password", Method::GET, &format!("/bgrs/{hers}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200);
    let (_, all) = json(app.admin(Method::GET, "/bgrs").send().await.unwrap()).await;
    assert_eq!(all.as_array().unwrap().len(), 2);
    assert_eq!(all[0]["rid"], hers.as_str(), "newest first");
    app.stop().await;
}

#[tokio::test]
async fn idempotency_keys_return_the_first_reply() {
    let app = spawn_app().await;
    let send = |key: &str, sync: bool| {
        let path = if sync {
            "/campaigns?bgrs=false"
        } else {
            "/campaigns"
        };
        app.admin(Method::POST, path)
            .header("Idempotency-Key", key)
            .json(&json!([{"name": "once"}]))
    };
    let (s1, b1) = json(send("k1", false).send().await.unwrap()).await;
    let (s2, b2) = json(send("k1", false).send().await.unwrap()).await;
    assert_eq!((s1, s2), (202, 202));
    assert_eq!(b1, b2, "same request id");
    app.wait_finished(b1["request"].as_str().unwrap()).await;
    let (s3, b3) = json(send("k2", true).send().await.unwrap()).await;
    let (s4, b4) = json(send("k2", true).send().await.unwrap()).await;
    assert_eq!((s3, s4), (200, 200));
    assert_eq!(b3, b4);
    let r = app.admin(Method::GET, "/campaigns").send().await.unwrap();
    assert_eq!(r.headers()["x-total-count"], "2", "each key ran once");
    // Another user's same key is theirs.
    app.create_user("kim", "kim-password").await;
    let (s, b) = json(
        app.as_user("kim", "kim-password", Method::POST, "/campaigns")
            .header("Idempotency-Key", "k1")
            .json(&json!([]))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 202);
    assert_ne!(b, b1);
    app.stop().await;
}

#[tokio::test]
async fn item_limit_and_shape_errors() {
    let app = spawn_with(|s| s.max_batch_items = 3).await;
    let four = json!([{"name": "1"}, {"name": "2"}, {"name": "3"}, {"name": "4"}]);
    for q in ["", "?bgrs=false"] {
        let (s, b) = json(
            app.admin(Method::POST, &format!("/campaigns{q}"))
                .json(&four)
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!((s, error_code(&b)), (413, "payload_too_large".into()));
    }
    let r = app.admin(Method::GET, "/campaigns").send().await.unwrap();
    assert_eq!(r.headers()["x-total-count"], "0", "nothing ran");
    let (s, _) = json(
        app.admin(Method::POST, "/campaigns?bgrs=false")
            .json(&json!([{"name": "1"}, {"name": "2"}, {"name": "3"}]))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200);

    let (s, b) = json(
        app.admin(Method::GET, "/campaigns")
            .json(&json!([1]))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((s, error_code(&b)), (405, "method_not_allowed".into()));
    let (s, b) = json(
        app.admin(Method::PUT, "/campaigns")
            .json(&json!({"id": 1}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((s, error_code(&b)), (405, "method_not_allowed".into()));
    let (s, b) = json(
        app.admin(Method::POST, "/campaigns")
            .header("content-type", "text/plain")
            .body("[{\"name\":\"x\"}]")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((s, error_code(&b)), (415, "unsupported_media_type".into()));
    let (s, b) = json(
        app.admin(Method::POST, "/campaigns?bgrs=maybe")
            .json(&json!([]))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((s, error_code(&b)), (400, "bad_request".into()));
    let (s, b) = json(
        app.admin(Method::POST, "/gizmos")
            .json(&json!([]))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((s, error_code(&b)), (404, "not_found".into()));
    let (s, b) = json(
        app.admin(Method::GET, "/bgrs/0123456789abcdef0123456789abcdef")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((s, error_code(&b)), (404, "not_found".into()));
    app.stop().await;
}

#[tokio::test]
async fn results_expire_after_the_keep_time() {
    let app = spawn_with(|s| s.result_keep = Duration::from_secs(1)).await;
    let rid = submit(
        &app,
        Method::POST,
        "/campaigns",
        json!([{"name": "short-lived"}]),
    )
    .await;
    app.wait_finished(&rid).await;
    let (s, _) = json(
        app.admin(Method::GET, &format!("/v2.5/bgrs/{rid}/result"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200);
    let start = Instant::now();
    loop {
        let (s, b) = json(
            app.admin(Method::GET, &format!("/v2.5/bgrs/{rid}/result"))
                .send()
                .await
                .unwrap(),
        )
        .await;
        if s == 410 {
            assert_eq!(error_code(&b), "gone");
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "never expired");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (s, _) = json(
        app.admin(
            Method::GET,
            &format!("/media/keep1m/bgrs.{rid}.result.json"),
        )
        .send()
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(s, 410);
    let (s, _) = json(
        app.admin(Method::GET, &format!("/bgrs/{rid}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200, "the record stays");
    app.stop().await;
}

#[tokio::test]
async fn details_since_and_events_in_order() {
    let app = spawn_app().await;
    let items: Vec<Json> = (0..2500)
        .map(|i| json!({"name": format!("n{i}")}))
        .collect();
    let rid = submit(&app, Method::POST, "/campaigns", Json::Array(items)).await;
    let resp = app
        .admin(Method::GET, &format!("/bgrs/{rid}/events"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let text = tokio::time::timeout(Duration::from_secs(60), resp.text())
        .await
        .expect("the stream ends")
        .unwrap();
    let mut kinds = Vec::new();
    let mut detail_ids = Vec::new();
    let mut progress = Vec::new();
    for block in text.split("\n\n").filter(|b| !b.trim().is_empty()) {
        let event = block
            .lines()
            .find_map(|l| l.strip_prefix("event: "))
            .unwrap_or("message");
        let data: Json = serde_json::from_str(
            block
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .unwrap(),
        )
        .unwrap();
        match event {
            "detail" => detail_ids.push(data["id"].as_str().unwrap().parse::<i64>().unwrap()),
            "progress" => progress.push(data["progress"].as_str().unwrap().parse::<f64>().unwrap()),
            _ => {}
        }
        kinds.push(event.to_string());
    }
    assert_eq!(kinds.last().map(String::as_str), Some("finished"));
    assert!(detail_ids.windows(2).all(|w| w[0] < w[1]), "{detail_ids:?}");
    assert!(
        progress.windows(2).all(|w| w[0] <= w[1]),
        "progress never goes down: {progress:?}"
    );
    assert_eq!(progress.last(), Some(&100.0));

    let (_, all) = json(
        app.admin(Method::GET, &format!("/bgrs/{rid}/details"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let all = all.as_array().unwrap().clone();
    assert!(all.len() >= 4, "{all:?}");
    assert!(all[0]["details"].as_str().unwrap().contains("accepted"));
    assert_eq!(all.last().unwrap()["details"], "done");
    for e in &all {
        assert_eq!(e.as_object().unwrap().len(), 4);
        assert!(e.as_object().unwrap().values().all(Json::is_string));
    }
    let since = all[1]["id"].as_str().unwrap();
    let (_, later) = json(
        app.admin(Method::GET, &format!("/bgrs/{rid}/details?since={since}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(later.as_array().unwrap()[..], all[2..]);
    assert_eq!(result(&app, &rid).await.len(), 2500);
    app.stop().await;
}

/// The objects a batch of creates answers with are those a read of them gives, to the byte:
/// on PostgreSQL only their ids come back from the insert, the rest is what was bound.
#[tokio::test]
async fn a_batchs_created_objects_are_what_reading_them_gives() {
    let app = spawn_app().await;
    let calls = json!([
        {"name": "plain", "type": 2, "description": "x", "is_active": false},
        {"name": "ünïcødé 漢字 😀 \"quoted\" \\ back\nline\ttab", "type": -9007199254740991i64},
        {"name": "defaults only"},
        {"name": "nulls", "description": null},
        {"name": "", "type": 9007199254740991i64, "description": "", "is_active": true},
        // Same-shaped creates, inserted together, with columns whose rows all hold one value
        // (bound once on PostgreSQL), a null among them, and a first column that repeats.
        {"name": "between"},
        {"name": "same a", "type": 3, "description": "shared", "is_active": false},
        {"name": "same b", "type": 3, "description": "shared", "is_active": false},
        {"name": "same c", "type": 3, "description": "shared", "is_active": false},
        {"name": "between"},
        {"name": "twin", "type": 4, "description": "d1", "is_active": true},
        {"name": "twin", "type": 5, "description": "d2", "is_active": true},
        {"name": "twin", "type": 6, "description": "d2", "is_active": true},
        {"name": "between"},
        {"name": "null a", "type": 7, "description": null},
        {"name": "null b", "type": 8, "description": null},
    ]);
    let rid = submit(&app, Method::POST, "/v2.5/campaigns", calls.clone()).await;
    app.wait_finished(&rid).await;
    let background = result(&app, &rid).await;
    let (s, b) = json(
        app.admin(Method::POST, "/v2.5/campaigns?bgrs=false")
            .json(&calls)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    let now = items(&b);
    assert_eq!((background.len(), now.len()), (16, 16));
    for (status, created) in background.into_iter().chain(now) {
        assert_eq!(status, 200, "{created}");
        read_back(&app, &created).await;
    }
    app.stop().await;
}

/// Creates that break a key or a reference inside the database, among many that do not, in
/// a synchronous and in a background batch: each fails alone with its own error, in call order
/// (of two items with the same key the earlier is created), every other item is created once,
/// and the ids rise in item order. Each batch is sent twice: with only broken keys (which
/// PostgreSQL's second try passes over) and with a broken reference too (tried in halves).
#[tokio::test]
async fn creates_failing_in_the_database_fail_alone_and_in_order() {
    let app = spawn_app().await;
    let (s, c) = json(
        app.admin(Method::POST, "/v2.5/campaigns")
            .json(&json!({"name": "keys"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200, "{c}");
    let campaign = c["id"].as_i64().unwrap();
    let (s, b) = json(
        app.admin(Method::POST, "/v2.5/markers")
            .json(&json!({"name": "taken", "campaign_id": campaign}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    // Item -> why it fails.
    let taken = [3usize, 250, 599];
    let repeats = 400; // repeats the name of item 100
    let dangling = 401; // names a campaign that does not exist
    let body = |prefix: &str, with_dangling: bool| -> Json {
        (0..600)
            .map(|i| {
                let name = match i {
                    _ if taken.contains(&i) => "taken".to_string(),
                    _ if i == repeats => format!("{prefix} 100"),
                    _ => format!("{prefix} {i}"),
                };
                let c = if with_dangling && i == dangling {
                    999_999_999
                } else {
                    campaign
                };
                json!({"name": name, "campaign_id": c, "page": i})
            })
            .collect()
    };
    let check = |got: Vec<(u16, Json)>, with_dangling: bool| {
        assert_eq!(got.len(), 600);
        let mut last_id = 0;
        for (i, (status, obj)) in got.into_iter().enumerate() {
            if taken.contains(&i) || i == repeats {
                assert_eq!(status, 409, "item {i}: {obj}");
                assert_eq!(obj["error"], "conflict", "item {i}: {obj}");
            } else if with_dangling && i == dangling {
                assert!((400..500).contains(&status), "item {i}: {status} {obj}");
            } else {
                assert_eq!(status, 200, "item {i}: {obj}");
                assert_eq!(obj["page"], i as i64, "item {i}: {obj}");
                let id = obj["id"].as_i64().unwrap();
                assert!(id > last_id, "item {i}: id {id} after {last_id}");
                last_id = id;
            }
        }
    };
    for with_dangling in [false, true] {
        let tag = if with_dangling { "dangling" } else { "keys" };
        let (s, b) = json(
            app.admin(Method::POST, "/v2.5/markers?bgrs=false")
                .json(&body(&format!("now {tag}"), with_dangling))
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(s, 200, "{b}");
        check(items(&b), with_dangling);
        let later = body(&format!("later {tag}"), with_dangling);
        let rid = submit(&app, Method::POST, "/v2.5/markers", later).await;
        app.wait_finished(&rid).await;
        check(result(&app, &rid).await, with_dangling);
    }
    // Each created once: the marker made first, and 596 or 595 of each batch.
    let listed = app
        .admin(
            Method::GET,
            &format!("/v2.5/markers?campaign_id={campaign}&limit=1&fields=id"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(listed.status(), 200);
    let total = listed.headers()["x-total-count"]
        .to_str()
        .unwrap()
        .to_string();
    assert_eq!(total, (1 + 2 * (596 + 595)).to_string());
    app.stop().await;
}

/// A large batch of creates, whose rows go in with one statement, answers with the objects a
/// read of each id gives, ids rising in item order. On PostgreSQL the table's ids step by 3
/// here, so the ids the statement made are not consecutive: each object must still get its
/// own.
#[tokio::test]
async fn a_large_batchs_ids_are_its_objects_even_when_ids_skip() {
    use sqlx::Connection;
    let app = spawn_app().await;
    let first = json!({"name": "first"});
    let (s, b) = json(
        app.admin(Method::POST, "/v2.5/campaigns")
            .json(&first)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    let mut last = b["id"].as_i64().expect("an id");
    if let Some(db) = &app.db {
        let mut conn = sqlx::PgConnection::connect(&db.url).await.unwrap();
        sqlx::query("ALTER TABLE campaigns ALTER COLUMN id SET INCREMENT BY 3")
            .execute(&mut conn)
            .await
            .unwrap();
    }
    let calls: Json = (0..300)
        .map(|i| json!({"name": format!("row {i}"), "type": i, "description": "same"}))
        .collect();
    let (s, b) = json(
        app.admin(Method::POST, "/v2.5/campaigns?bgrs=false")
            .json(&calls)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    let got = items(&b);
    assert_eq!(got.len(), 300);
    for (i, (status, created)) in got.into_iter().enumerate() {
        assert_eq!(status, 200, "item {i}: {created}");
        assert_eq!(created["name"], format!("row {i}"), "{created}");
        let id = read_back(&app, &created).await;
        if app.db.is_some() {
            assert!(id >= last + 3, "item {i}: id {id} after {last}");
        } else {
            assert!(id > last, "item {i}: id {id} after {last}");
        }
        last = id;
    }
    app.stop().await;
}
