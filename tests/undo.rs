//! Undo (`POST /bgrs/<rid>/undo`) and `changed_by`, against a real server on the backend the
//! suite runs on: an upload's creates, updates and deletes reverted and the undo undone; an
//! object changed since left alone and named; a deleted user back with their password; who
//! may undo, and when.

mod common;

use common::upload::{background_rows, start_background};
use common::*;
use reqwest::Method;
use serde_json::{Value as Json, json};
use std::collections::BTreeMap;
use std::time::Duration;

async fn send(app: &TestApp, m: Method, path: &str, body: Option<Json>) -> (u16, Json) {
    let mut r = app.admin(m, path);
    if let Some(b) = body {
        r = r.json(&b);
    }
    json(r.send().await.unwrap()).await
}

/// Every campaign, by id, as (name, type).
async fn campaigns(app: &TestApp) -> BTreeMap<i64, (String, i64)> {
    let (s, b) = send(app, Method::GET, "/campaigns?limit=1000", None).await;
    assert_eq!(s, 200, "{b}");
    b.as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["id"].as_i64().unwrap(),
                (
                    c["name"].as_str().unwrap().to_string(),
                    c["type"].as_i64().unwrap(),
                ),
            )
        })
        .collect()
}

/// Undoes `rid` and waits for the undo: its id, record and result items.
async fn undo(app: &TestApp, rid: &str) -> (String, Json, Vec<Json>) {
    let (s, b) = send(app, Method::POST, &format!("/bgrs/{rid}/undo"), None).await;
    assert_eq!(s, 202, "{b}");
    let u = b["request"].as_str().unwrap().to_string();
    let rec = app.wait_ended(&u, Duration::from_secs(60)).await;
    assert_eq!(rec["status_id"], "4", "{rec}");
    let result: Json = serde_json::from_str(&app.result_text(&u).await).unwrap();
    let items = result
        .as_array()
        .unwrap()
        .iter()
        .map(|i| serde_json::from_str(i["body"].as_str().unwrap()).unwrap())
        .collect();
    (u, rec, items)
}

/// The ids `GET /<entity>?changed_by=<rid>` lists, and its `X-Total-Count`.
async fn changed_by(app: &TestApp, entity: &str, rid: &str) -> (Vec<i64>, u64) {
    let r = app
        .admin(
            Method::GET,
            &format!("/{entity}?changed_by={rid}&sort=id&limit=1000"),
        )
        .send()
        .await
        .unwrap();
    let total = r.headers()["x-total-count"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let (s, b) = json(r).await;
    assert_eq!(s, 200, "{b}");
    let ids = b
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_i64().unwrap())
        .collect();
    (ids, total)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_is_undone_and_the_undo_undone() {
    let app = spawn_app().await;
    let kept = app
        .create("campaigns", json!({"name": "kept", "type": 1}))
        .await["id"]
        .as_i64()
        .unwrap();
    let updated = app
        .create("campaigns", json!({"name": "before", "type": 1}))
        .await["id"]
        .as_i64()
        .unwrap();
    let deleted = app
        .create("campaigns", json!({"name": "deleted", "type": 3}))
        .await["id"]
        .as_i64()
        .unwrap();
    let before = campaigns(&app).await;

    let csv = format!(
        "op;id;name;type\nc;;new one;1\nc;;new two;2\nu;{updated};after;5\nu;{updated};after again;6\nd;{deleted};;\n"
    );
    let (rid, rec, result) = background_rows(&app, "campaigns", csv.as_bytes(), &[]).await;
    assert_eq!(rec["status_id"], "4", "{rec}");
    assert!(result[1..].iter().all(|r| r[0] == "OK"), "{result:?}");
    let after = campaigns(&app).await;
    assert_eq!(after.len(), 4);
    let created: Vec<i64> = after
        .keys()
        .copied()
        .filter(|id| !before.contains_key(id))
        .collect();
    assert_eq!(created.len(), 2);

    // What changed: the objects created or updated (the deleted one is gone).
    let (ids, total) = changed_by(&app, "campaigns", &rid).await;
    let mut want = vec![updated];
    want.extend(&created);
    want.sort();
    assert_eq!((ids, total), (want, 3));
    // Filters and the count still apply next to it.
    let r = app
        .admin(
            Method::GET,
            &format!("/campaigns?changed_by={rid}&type[gte]=2"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-total-count"], "2");

    // The preview counts each object once.
    let (s, p) = send(&app, Method::GET, &format!("/bgrs/{rid}/undo"), None).await;
    assert_eq!(s, 200, "{p}");
    assert_eq!(p["objects"], 4, "{p}");
    assert_eq!(p["entities"]["campaigns"], 4, "{p}");

    let (u, urec, conflicts) = undo(&app, &rid).await;
    assert_eq!(conflicts, Vec::<Json>::new());
    assert_eq!(urec["name"], format!("POST /bgrs/{rid}/undo"));
    assert_eq!(campaigns(&app).await, before, "back as before the upload");
    assert!(before.contains_key(&kept) && before.contains_key(&deleted));

    // The undo listed what it changed, and can itself be undone.
    let (ids, _) = changed_by(&app, "campaigns", &u).await;
    assert_eq!(ids, vec![updated, deleted]);
    let (_, _, conflicts) = undo(&app, &u).await;
    assert_eq!(conflicts, Vec::<Json>::new());
    assert_eq!(
        campaigns(&app).await,
        after,
        "the upload's effects, with their ids"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_changed_since_are_left_and_named() {
    let app = spawn_app().await;
    let target = app
        .create("campaigns", json!({"name": "target", "type": 1}))
        .await["id"]
        .as_i64()
        .unwrap();
    let csv = format!("op;id;name;type\nc;;a;1\nc;;b;1\nc;;c;1\nu;{target};t2;2\n");
    let (rid, _, result) = background_rows(&app, "campaigns", csv.as_bytes(), &[]).await;
    let idc = result[0].iter().position(|h| h == "id").unwrap();
    let b_id: i64 = result[2][idc].parse().unwrap();
    // Someone changes a created object and the updated one after the upload.
    for id in [b_id, target] {
        let (s, body) = send(
            &app,
            Method::PUT,
            &format!("/campaigns/{id}"),
            Some(json!({"name": format!("edited {id}")})),
        )
        .await;
        assert_eq!(s, 200, "{body}");
    }
    let (_, _, conflicts) = undo(&app, &rid).await;
    let mut named: Vec<(String, i64)> = conflicts
        .iter()
        .map(|c| {
            assert_eq!(c["error"], "conflict", "{c}");
            (
                c["entity"].as_str().unwrap().to_string(),
                c["id"].as_i64().unwrap(),
            )
        })
        .collect();
    named.sort();
    let mut want = vec![
        ("campaigns".to_string(), b_id),
        ("campaigns".to_string(), target),
    ];
    want.sort();
    assert_eq!(named, want);
    let now = campaigns(&app).await;
    assert_eq!(
        now.len(),
        2,
        "a and c deleted, b and the target kept: {now:?}"
    );
    assert_eq!(now[&b_id].0, format!("edited {b_id}"));
    assert_eq!(now[&target].0, format!("edited {target}"));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_deleting_a_user_is_undone_and_the_user_signs_in_again() {
    let app = spawn_app().await;
    let id = app.create_user("carol", "carol-password-1").await;
    let signed_in = |app: &TestApp| {
        app.as_user("carol", "carol-password-1", Method::GET, "/campaigns")
            .send()
    };
    assert_eq!(signed_in(&app).await.unwrap().status(), 200);
    let (s, b) = send(&app, Method::DELETE, "/users", Some(json!([id]))).await;
    assert_eq!(s, 202, "{b}");
    let rid = b["request"].as_str().unwrap().to_string();
    app.wait_ended(&rid, Duration::from_secs(60)).await;
    assert_eq!(signed_in(&app).await.unwrap().status(), 401);

    let (_, _, conflicts) = undo(&app, &rid).await;
    assert_eq!(conflicts, Vec::<Json>::new());
    assert_eq!(signed_in(&app).await.unwrap().status(), 200);
    let (s, u) = send(&app, Method::GET, &format!("/users/{id}"), None).await;
    assert_eq!((s, u["login"].as_str()), (200, Some("carol")));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_owner_or_an_admin_undoes_a_finished_request() {
    let app = spawn_app().await;
    app.create_user("dave", "dave-password-1").await;
    app.create_user("erin", "erin-password-1").await;
    let as_dave = |m: Method, path: &str| app.as_user("dave", "dave-password-1", m, path);
    let r = as_dave(Method::POST, "/campaigns")
        .json(&json!([{"name": "d1"}, {"name": "d2"}]))
        .send()
        .await
        .unwrap();
    let (s, b) = json(r).await;
    assert_eq!(s, 202, "{b}");
    let rid = b["request"].as_str().unwrap().to_string();
    app.wait_ended(&rid, Duration::from_secs(60)).await;

    // Someone else: as if it did not exist, for the undo and for `changed_by`.
    for (m, path) in [
        (Method::POST, format!("/bgrs/{rid}/undo")),
        (Method::GET, format!("/bgrs/{rid}/undo")),
        (Method::GET, format!("/campaigns?changed_by={rid}")),
    ] {
        let r = app
            .as_user("erin", "erin-password-1", m, &path)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404, "{path}");
    }
    let (s, b) = send(&app, Method::GET, "/campaigns?changed_by=nothex", None).await;
    assert_eq!(s, 400, "{b}");
    // The owner may.
    let r = as_dave(Method::POST, &format!("/bgrs/{rid}/undo"))
        .send()
        .await
        .unwrap();
    let (s, b) = json(r).await;
    assert_eq!(s, 202, "{b}");
    let u = b["request"].as_str().unwrap();
    app.wait_ended(u, Duration::from_secs(60)).await;
    assert_eq!(campaigns(&app).await.len(), 0);

    // Not while it runs: a large upload is still going when its undo is asked for.
    let mut csv = String::from("op;name\n");
    for i in 0..200_000 {
        csv.push_str(&format!("c;n{i}\n"));
    }
    let big = start_background(&app, "campaigns", csv.as_bytes(), &[]).await;
    let (s, b) = send(&app, Method::POST, &format!("/bgrs/{big}/undo"), None).await;
    assert_eq!(
        (s, error_code(&b)),
        (409, "not_finished".to_string()),
        "{b}"
    );
    app.wait_ended(&big, Duration::from_secs(120)).await;
    app.stop().await;
}

/// An upload of several chunks (on PostgreSQL, several to a transaction) in which rows of two
/// later chunks break a constraint: every other row applies once, is listed as changed by the
/// upload, and is undone, whatever ran again after the failures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_upload_with_failing_rows_is_recorded_and_undone_whole() {
    let app = spawn_app().await;
    let campaign = app.create("campaigns", json!({"name": "markers"})).await["id"]
        .as_i64()
        .unwrap();
    let mut csv = String::from("op;name;campaign_id\n");
    for i in 1..=3500 {
        // Rows 1700 and 2600 name a campaign that does not exist.
        let c = if i == 1700 || i == 2600 {
            999_999
        } else {
            campaign
        };
        csv.push_str(&format!("c;m{i};{c}\n"));
    }
    let (rid, rec, result) = background_rows(&app, "markers", csv.as_bytes(), &[]).await;
    assert_eq!(rec["status_id"], "4", "{rec}");
    assert_eq!(result.len(), 3501);
    for (n, row) in result[1..].iter().enumerate() {
        let line = n + 1;
        if line == 1700 || line == 2600 {
            assert!(row[0].contains("campaign_id"), "{line}: {row:?}");
        } else {
            assert_eq!(row[0], "OK", "{line}: {row:?}");
        }
    }
    let total = |app: &TestApp| {
        let r = app.admin(Method::GET, "/markers?limit=1");
        async move {
            let r = r.send().await.unwrap();
            r.headers()["x-total-count"].to_str().unwrap().to_string()
        }
    };
    assert_eq!(total(&app).await, "3498");
    let (_, changed) = changed_by(&app, "markers", &rid).await;
    assert_eq!(changed, 3498);
    let (_, _, conflicts) = undo(&app, &rid).await;
    assert_eq!(conflicts, Vec::<Json>::new());
    assert_eq!(total(&app).await, "0");
    app.stop().await;
}
