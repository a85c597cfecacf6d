//! Dry runs and all-or-nothing requests (CONTRACT.md section 10) against a real server, on
//! single calls, batches (synchronous and background), CSV uploads (synchronous, streamed and
//! background) and ZIP bundles: a dry run answers as the real run would, without ids for
//! would-be creations, and keeps nothing (rows, markers, campaigns, stored files); an
//! all-or-nothing request with a failing row applies nothing and words every other row.

mod common;
#[path = "support/pdf.rs"]
mod pdf_sample;

use common::upload::{UPLOAD, background_rows, form, rows, sync_rows, upload};
use common::*;
use reqwest::Method;
use serde_json::{Value as Json, json};
use std::io::{Cursor, Write};
use std::time::Duration;

/// The files the uploads' plugins stored.
fn stored_files(app: &TestApp) -> Vec<std::path::PathBuf> {
    files_below(&app.dir.path().join("data/media/files"))
}

/// An object without what differs between a dry run and the real run.
fn without_ids(v: &Json) -> Json {
    let mut v = v.clone();
    if let Some(m) = v.as_object_mut() {
        for k in ["id", "created_dt", "updated_dt"] {
            m.remove(k);
        }
    }
    v
}

async fn send(app: &TestApp, m: Method, path: &str, body: Option<Json>) -> (u16, Json) {
    let mut r = app.admin(m, path);
    if let Some(b) = body {
        r = r.json(&b);
    }
    json(r.send().await.unwrap()).await
}

/// Batch result items as (status, parsed body).
fn items(b: &Json) -> Vec<(u16, Json)> {
    b.as_array()
        .unwrap_or_else(|| panic!("an array: {b}"))
        .iter()
        .map(|i| {
            (
                i["status"].as_u64().unwrap() as u16,
                serde_json::from_str(i["body"].as_str().unwrap()).unwrap(),
            )
        })
        .collect()
}

async fn background(app: &TestApp, m: Method, path: &str, body: Json) -> (String, Json) {
    let (s, b) = send(app, m, path, Some(body)).await;
    assert_eq!(s, 202, "{b}");
    let rid = b["request"].as_str().unwrap().to_string();
    let rec = app.wait_ended(&rid, Duration::from_secs(60)).await;
    (rid, rec)
}

async fn stored_result(app: &TestApp, rid: &str) -> Vec<(u16, Json)> {
    let (s, b) = send(app, Method::GET, &format!("/v2.5/bgrs/{rid}/result"), None).await;
    assert_eq!(s, 200, "{b}");
    items(&b)
}

#[tokio::test]
async fn single_calls_dry_run_and_keep_nothing() {
    let app = spawn_app().await;
    let c = app.create("campaigns", json!({"name": "kept"})).await;
    let id = c["id"].as_i64().unwrap();

    let (s, b) = send(
        &app,
        Method::POST,
        "/campaigns?dry_run=1",
        Some(json!({"name": "would be"})),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["id"], Json::Null, "a would-be creation has no id: {b}");
    assert_eq!(b["name"], "would be");
    assert_eq!(count(&app, "campaigns").await, 1);

    let (s, b) = send(
        &app,
        Method::PUT,
        &format!("/campaigns/{id}?dry_run=yes"),
        Some(json!({"name": "renamed"})),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(
        (b["id"].as_i64(), b["name"].as_str()),
        (Some(id), Some("renamed"))
    );
    let (_, now) = send(&app, Method::GET, &format!("/campaigns/{id}"), None).await;
    assert_eq!(now["name"], "kept");

    let (s, b) = send(
        &app,
        Method::DELETE,
        &format!("/campaigns/{id}?dry_run=true"),
        None,
    )
    .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["id"].as_i64(), Some(id));
    assert_eq!(count(&app, "campaigns").await, 1);

    // Failures are the real run's.
    let (s, b) = send(
        &app,
        Method::POST,
        "/markers?dry_run=1",
        Some(json!({"name": "m", "campaign_id": 999})),
    )
    .await;
    assert_eq!(s, 400, "{b}");
    assert_eq!(error_code(&b), "invalid_reference");
    let (s, b) = send(&app, Method::DELETE, "/campaigns/999?dry_run=1", None).await;
    assert_eq!((s, error_code(&b)), (404, "not_found".to_string()));

    // In the background: the record says it was a dry run.
    let (rid, rec) = background(
        &app,
        Method::POST,
        "/campaigns?bgrs=1&dry_run=1",
        json!({"name": "later"}),
    )
    .await;
    assert_eq!(
        (rec["dry_run"].as_str(), rec["atomic"].as_str()),
        (Some("1"), Some("0"))
    );
    assert_eq!(rec["status"], "200", "{rec}");
    let (s, r) = send(&app, Method::GET, &format!("/bgrs/{rid}/result"), None).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(
        (&r["id"], &r["name"]),
        (&Json::Null, &json!("later")),
        "{r}"
    );
    assert_eq!(count(&app, "campaigns").await, 1);

    // A bad flag is a 400 through the flag parser.
    for path in [
        "/campaigns?dry_run=maybe".to_string(),
        format!("/campaigns/{id}?dry_run=maybe"),
    ] {
        let (s, b) = send(&app, Method::PUT, &path, Some(json!({"name": "x"}))).await;
        if path.ends_with("campaigns?dry_run=maybe") {
            assert_eq!(s, 405, "PUT on a collection needs an array: {b}");
            continue;
        }
        assert_eq!(s, 400, "{b}");
        assert!(
            b["description"].as_str().unwrap().contains("dry_run"),
            "{b}"
        );
    }
    let (s, b) = send(
        &app,
        Method::POST,
        "/campaigns?dry_run=maybe",
        Some(json!({"name": "x"})),
    )
    .await;
    assert_eq!(s, 400, "{b}");
    let (s, b) = send(
        &app,
        Method::POST,
        "/campaigns?atomic=perhaps",
        Some(json!([{"name": "x"}])),
    )
    .await;
    assert_eq!(s, 400, "{b}");
    assert!(b["description"].as_str().unwrap().contains("atomic"), "{b}");
    assert_eq!(count(&app, "campaigns").await, 1);
    app.stop().await;
}

#[tokio::test]
async fn batch_dry_runs_answer_as_the_real_run_without_ids() {
    let app = spawn_app().await;
    let kept = app.create("campaigns", json!({"name": "kept"})).await;
    let kid = kept["id"].as_i64().unwrap();
    let batch = json!([{"name": "a"}, {"nam": "b"}, {"name": "c", "type": "x"}, {"name": "d"}]);

    let (s, b) = send(
        &app,
        Method::POST,
        "/campaigns?bgrs=0&dry_run=1",
        Some(batch.clone()),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    let dry = items(&b);
    assert_eq!(count(&app, "campaigns").await, 1, "a dry run keeps nothing");
    let (rid, rec) = background(&app, Method::POST, "/campaigns?dry_run=1", batch.clone()).await;
    assert_eq!(rec["dry_run"], "1", "{rec}");
    assert_eq!(rec["status"], "200", "{rec}");
    let dry_bg = stored_result(&app, &rid).await;
    assert_eq!(count(&app, "campaigns").await, 1, "a dry run keeps nothing");

    let (s, b) = send(&app, Method::POST, "/campaigns?bgrs=0", Some(batch)).await;
    assert_eq!(s, 200, "{b}");
    let real = items(&b);
    assert_eq!(count(&app, "campaigns").await, 3);
    for run in [&dry, &dry_bg] {
        assert_eq!(run.len(), real.len());
        for ((ds, db), (rs, rb)) in run.iter().zip(&real) {
            assert_eq!(ds, rs);
            assert_eq!(without_ids(db), without_ids(rb));
            if *rs == 200 {
                assert_eq!(db["id"], Json::Null, "{db}");
                assert!(rb["id"].as_i64().is_some(), "{rb}");
            }
        }
    }

    // Updates and deletes in a dry run: the answers, and nothing changed.
    let a = real[0].1["id"].as_i64().unwrap();
    let (s, b) = send(
        &app,
        Method::PUT,
        "/campaigns?bgrs=0&dry_run=1",
        Some(json!([{"id": a, "name": "A"}, {"id": 99999, "name": "none"}])),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    let r = items(&b);
    assert_eq!(
        (r[0].0, r[0].1["name"].as_str(), r[0].1["id"].as_i64()),
        (200, Some("A"), Some(a))
    );
    assert_eq!(r[1].0, 404);
    let (s, b) = send(
        &app,
        Method::DELETE,
        "/campaigns?bgrs=0&dry_run=1",
        Some(json!([kid, a])),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    assert!(items(&b).iter().all(|(s, _)| *s == 200), "{b}");
    let (_, now) = send(&app, Method::GET, &format!("/campaigns/{a}"), None).await;
    assert_eq!(now["name"], "a");
    assert_eq!(count(&app, "campaigns").await, 3);
    app.stop().await;
}

/// Asserts an all-or-nothing batch's answer: item `failed` (1-based) with `code`, every
/// other one a 409 `not_applied` naming it.
fn assert_not_applied(r: &[(u16, Json)], failed: usize, code: &str) {
    for (i, (s, b)) in r.iter().enumerate() {
        if i + 1 == failed {
            assert_eq!(error_code(b), code, "{r:?}");
            continue;
        }
        assert_eq!(*s, 409, "item {}: {b}", i + 1);
        assert_eq!(error_code(b), "not_applied", "{b}");
        let d = b["description"].as_str().unwrap();
        assert!(d.contains(&format!("item {failed} failed")), "{d}");
    }
}

#[tokio::test]
async fn atomic_batches_apply_all_or_nothing() {
    let app = spawn_app().await;
    let batch = json!([{"name": "a"}, {"name": "b"}, {"nam": "c"}, {"name": "d"}]);

    let (s, b) = send(
        &app,
        Method::POST,
        "/campaigns?bgrs=0&atomic=1",
        Some(batch.clone()),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    assert_not_applied(&items(&b), 3, "unknown_field");
    assert_eq!(count(&app, "campaigns").await, 0, "nothing applied");

    let (rid, rec) = background(&app, Method::POST, "/campaigns?atomic=1", batch).await;
    assert_eq!(
        (rec["atomic"].as_str(), rec["dry_run"].as_str()),
        (Some("1"), Some("0"))
    );
    assert_not_applied(&stored_result(&app, &rid).await, 3, "unknown_field");
    assert_eq!(count(&app, "campaigns").await, 0, "nothing applied");
    let details = all_details(&app, &rid).await;
    assert!(
        details
            .iter()
            .any(|d| d["details"] == "all or nothing: item 3 failed, so nothing was applied"),
        "{details:?}"
    );

    // A failure the database finds (a taken unique login) undoes the items before it.
    let users = json!([
        {"login": "u-one", "password": "password-1"},
        {"login": "u-two", "password": "password-2"},
        {"login": "u-one", "password": "password-3"}
    ]);
    let before = count(&app, "users").await;
    let (s, b) = send(&app, Method::POST, "/users?bgrs=0&atomic=1", Some(users)).await;
    assert_eq!(s, 200, "{b}");
    assert_not_applied(&items(&b), 3, "conflict");
    assert_eq!(count(&app, "users").await, before);

    // All valid: all applied, synchronously and in the background.
    let (s, b) = send(
        &app,
        Method::POST,
        "/campaigns?bgrs=0&atomic=1",
        Some(json!([{"name": "a"}, {"name": "b"}])),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    let r = items(&b);
    assert!(
        r.iter().all(|(s, b)| *s == 200 && b["id"].is_i64()),
        "{r:?}"
    );
    let (rid, _) = background(
        &app,
        Method::POST,
        "/campaigns?atomic=1",
        json!([{"name": "c"}, {"name": "d"}, {"name": "e"}]),
    )
    .await;
    let r = stored_result(&app, &rid).await;
    assert!(
        r.iter().all(|(s, b)| *s == 200 && b["id"].is_i64()),
        "{r:?}"
    );
    assert_eq!(count(&app, "campaigns").await, 5);
    let ids: Vec<i64> = r.iter().map(|(_, b)| b["id"].as_i64().unwrap()).collect();

    // PUT and DELETE batches: one missing object, nothing changed.
    let (s, b) = send(
        &app,
        Method::PUT,
        "/campaigns?bgrs=0&atomic=1",
        Some(json!([{"id": ids[0], "name": "C"}, {"id": 99999, "name": "none"}])),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    assert_not_applied(&items(&b), 2, "not_found");
    let (_, now) = send(&app, Method::GET, &format!("/campaigns/{}", ids[0]), None).await;
    assert_eq!(now["name"], "c");
    let (rid, _) = background(
        &app,
        Method::DELETE,
        "/campaigns?atomic=1",
        json!([ids[0], ids[1], 99999]),
    )
    .await;
    assert_not_applied(&stored_result(&app, &rid).await, 3, "not_found");
    assert_eq!(count(&app, "campaigns").await, 5);

    // Both: what would happen to an all-or-nothing batch, and nothing kept.
    let (s, b) = send(
        &app,
        Method::POST,
        "/campaigns?bgrs=0&atomic=1&dry_run=1",
        Some(json!([{"name": "x"}, {"name": "y"}])),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    assert!(
        items(&b)
            .iter()
            .all(|(s, b)| *s == 200 && b["id"].is_null()),
        "{b}"
    );
    let (s, b) = send(
        &app,
        Method::POST,
        "/campaigns?bgrs=0&atomic=1&dry_run=1",
        Some(json!([{"name": "x"}, {"nam": "y"}])),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    assert_not_applied(&items(&b), 2, "unknown_field");
    assert_eq!(count(&app, "campaigns").await, 5);
    app.stop().await;
}

/// A result without its id column.
fn without_id_column(r: &[Vec<String>], at: usize) -> Vec<Vec<String>> {
    r.iter()
        .map(|row| {
            let mut row = row.clone();
            row.remove(at);
            row
        })
        .collect()
}

#[tokio::test]
async fn csv_dry_runs_in_every_mode_keep_nothing() {
    let app = spawn_app().await;
    let kept = app.create("campaigns", json!({"name": "kept"})).await;
    let gone = app.create("campaigns", json!({"name": "to delete"})).await;
    let (k, g) = (kept["id"].as_i64().unwrap(), gone["id"].as_i64().unwrap());
    let csv = format!(
        "op;id;name;type\r\nc;;one;1\r\nu;{k};renamed;2\r\nc;;bad;x\r\n;;skipped;\r\nd;{g};;\r\nc;;two;3\r\nu;99999;none;1\r\n"
    );
    let csv = csv.as_bytes();

    let dry = sync_rows(&app, "campaigns", csv, &[("dry_run", "1")]).await;
    assert_eq!(count(&app, "campaigns").await, 2);
    let (_, rec, dry_bg) = background_rows(&app, "campaigns", csv, &[("dry_run", "yes")]).await;
    assert_eq!(
        (rec["dry_run"].as_str(), rec["status"].as_str()),
        (Some("1"), Some("200"))
    );
    assert_eq!(count(&app, "campaigns").await, 2);
    let (s, streamed) = upload(
        &app,
        form(
            "campaigns",
            "f.csv",
            csv.to_vec(),
            &[
                ("dry_run", "1"),
                ("show_progress", "1"),
                ("get_content", "1"),
            ],
        ),
    )
    .await;
    assert_eq!(s, 200, "{streamed}");
    assert!(
        streamed.contains("Line: 1 done. Result: 200. OK"),
        "{streamed}"
    );
    assert!(
        streamed.contains("Line: 3 done. Result: 400."),
        "{streamed}"
    );
    assert_eq!(count(&app, "campaigns").await, 2);
    let (_, now) = send(&app, Method::GET, &format!("/campaigns/{k}"), None).await;
    assert_eq!(now["name"], "kept");

    let real = sync_rows(&app, "campaigns", csv, &[]).await;
    assert_eq!(count(&app, "campaigns").await, 3);
    assert_eq!(real[0], ["res", "op", "id", "name", "type"]);
    let id_col = real[0].iter().position(|h| h == "id").unwrap();
    for run in [&dry, &dry_bg] {
        assert_eq!(run.len(), real.len());
        assert_eq!(
            without_id_column(run, id_col),
            without_id_column(&real, id_col),
            "res as for real"
        );
        // Would-be creations have no id; the real ones have.
        assert_eq!(run[1][id_col], "");
        assert!(real[1][id_col].parse::<i64>().is_ok(), "{real:?}");
        assert_eq!(run[2][id_col], k.to_string());
    }
    app.stop().await;
}

#[tokio::test]
async fn csv_atomic_uploads_apply_all_or_nothing() {
    let app = spawn_app().await;
    let csv = b"op;name;type\r\nc;one;1\r\nc;two;x\r\n;skipped;\r\nc;three;3\r\nc;;4\r\n";
    let check = |r: &[Vec<String>]| {
        assert_eq!(r.len(), 6, "{r:?}");
        let res: Vec<&str> = r[1..].iter().map(|x| x[0].as_str()).collect();
        assert!(
            res[1].contains("type"),
            "the failing line keeps its error: {r:?}"
        );
        assert!(
            res[4].contains("name"),
            "every failing line keeps its error: {r:?}"
        );
        assert_eq!(res[2], "", "a skipped row stays skipped: {r:?}");
        for i in [0, 3] {
            assert!(
                res[i].starts_with("not applied: line 2 failed"),
                "line {}: {r:?}",
                i + 1
            );
        }
        assert!(r[1..].iter().all(|x| x[1].is_empty()), "no ids: {r:?}");
        assert!(!res.contains(&"OK"));
    };
    check(&sync_rows(&app, "campaigns", csv, &[("atomic", "1")]).await);
    assert_eq!(count(&app, "campaigns").await, 0);
    let (rid, rec, r) = background_rows(&app, "campaigns", csv, &[("atomic", "1")]).await;
    check(&r);
    assert_eq!(
        (rec["atomic"].as_str(), rec["dry_run"].as_str()),
        (Some("1"), Some("0"))
    );
    assert_eq!(count(&app, "campaigns").await, 0);
    let details: Vec<String> = all_details(&app, &rid)
        .await
        .iter()
        .map(|d| d["details"].as_str().unwrap().to_string())
        .collect();
    assert!(
        details
            .iter()
            .any(|d| d.starts_with("Line: 1 done. Result: 409. not applied: line 2 failed")),
        "{details:?}"
    );
    assert!(
        !details.iter().any(|d| d.contains("Result: 200")),
        "{details:?}"
    );
    let per_line = details.iter().filter(|d| d.starts_with("Line: ")).count();
    assert_eq!(per_line, 4, "one detail per line that ran: {details:?}");
    assert!(details.iter().all(|d| !d.contains('\0')), "{details:?}");
    assert_eq!(
        details.last().unwrap(),
        "all or nothing: line 2 failed, so nothing was applied"
    );
    // With a dry run: the same words, nothing kept.
    check(&sync_rows(&app, "campaigns", csv, &[("atomic", "1"), ("dry_run", "1")]).await);
    assert_eq!(count(&app, "campaigns").await, 0);

    // A row the database refuses (a taken login) undoes the rows before it.
    let users =
        b"op;login;password\r\nc;w-one;password-1\r\nc;w-two;password-2\r\nc;w-one;password-3\r\n";
    let before = count(&app, "users").await;
    let r = sync_rows(&app, "users", users, &[("atomic", "1")]).await;
    assert!(r[1][0].starts_with("not applied: line 3 failed"), "{r:?}");
    assert!(r[3][0].contains("login"), "{r:?}");
    assert_eq!(count(&app, "users").await, before);

    // Every row valid: every row applied, with ids.
    let good = b"op;name\r\nc;one\r\nc;two\r\nc;three\r\n";
    let r = sync_rows(&app, "campaigns", good, &[("atomic", "1")]).await;
    assert!(
        r[1..]
            .iter()
            .all(|x| x[0] == "OK" && x[1].parse::<i64>().is_ok()),
        "{r:?}"
    );
    let (_, _, r) = background_rows(&app, "campaigns", good, &[("atomic", "1")]).await;
    assert!(
        r[1..]
            .iter()
            .all(|x| x[0] == "OK" && x[1].parse::<i64>().is_ok()),
        "{r:?}"
    );
    assert_eq!(count(&app, "campaigns").await, 6);

    // A bad flag is a 400.
    let (s, text) = upload(
        &app,
        form("campaigns", "f.csv", good.to_vec(), &[("atomic", "maybe")]),
    )
    .await;
    assert_eq!(s, 400, "{text}");
    let (s, text) = upload(
        &app,
        form("campaigns", "f.csv", good.to_vec(), &[("dry_run", "maybe")]),
    )
    .await;
    assert_eq!(s, 400, "{text}");
    assert!(text.contains("dry_run"), "{text}");
    assert_eq!(count(&app, "campaigns").await, 6);
    app.stop().await;
}

/// A bundle for assets: two pages, one `res/` file, rows naming a page and the file.
fn bundle(bad_row: bool) -> Vec<u8> {
    let mut csv = String::from("op;name;marker_id;url\r\nc;first;1;res/pic.bin\r\nc;second;2;\r\n");
    if bad_row {
        csv.push_str("c;third;7;\r\n");
    }
    let mut z = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default();
    z.start_file("assets.csv", opts).unwrap();
    z.write_all(csv.as_bytes()).unwrap();
    z.start_file("pages.pdf", opts).unwrap();
    z.write_all(&pdf_sample::sample_pdf(2)).unwrap();
    z.start_file("res/pic.bin", opts).unwrap();
    z.write_all(&[7u8; 2000]).unwrap();
    z.finish().unwrap().into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bundle_dry_runs_keep_no_rows_markers_campaign_or_files() {
    let app = spawn_app().await;
    let upload_zip = |fields: Vec<(&'static str, &'static str)>, bad: bool| {
        let f = form("assets", "b.zip", bundle(bad), &fields);
        let app = &app;
        async move { upload(app, f).await }
    };
    let (s, dry) = upload_zip(vec![("dry_run", "1")], false).await;
    assert_eq!(s, 200, "{dry}");
    let dry = rows(&dry);
    assert_eq!(
        bundle_counts(&app).await,
        [0, 0, 0],
        "no campaign, marker or asset"
    );
    assert_eq!(
        stored_files(&app),
        Vec::<std::path::PathBuf>::new(),
        "no stored file"
    );

    let (s, text) = upload_zip(vec![("dry_run", "1"), ("bgrs", "1")], false).await;
    assert_eq!(s, 202, "{text}");
    let rid = serde_json::from_str::<Json>(&text).unwrap()["request"]
        .as_str()
        .unwrap()
        .to_string();
    let rec = app.wait_ended(&rid, Duration::from_secs(60)).await;
    assert_eq!(rec["dry_run"], "1");
    let dry_bg = rows(&app.result_text(&rid).await);
    assert_eq!(bundle_counts(&app).await, [0, 0, 0]);
    // The request is recorded as ended in its last transaction; the worker removes the files
    // the run stored right after it.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !stored_files(&app).is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(stored_files(&app), Vec::<std::path::PathBuf>::new());

    // All or nothing with a row naming no page: nothing kept either.
    let (s, text) = upload_zip(vec![("atomic", "1")], true).await;
    assert_eq!(s, 200, "{text}");
    let r = rows(&text);
    assert!(r[3][0].contains("page"), "{r:?}");
    assert!(r[1][0].starts_with("not applied: line 3 failed"), "{r:?}");
    assert_eq!(bundle_counts(&app).await, [0, 0, 0]);
    assert_eq!(stored_files(&app), Vec::<std::path::PathBuf>::new());

    // The real run: the same result but for the ids and the stored files' names.
    let (s, real) = upload_zip(vec![], false).await;
    assert_eq!(s, 200, "{real}");
    let real = rows(&real);
    assert_eq!(bundle_counts(&app).await, [1, 2, 2]);
    assert_eq!(stored_files(&app).len(), 3, "two pages and one res/ file");
    for run in [&dry, &dry_bg] {
        assert_eq!(run.len(), 3, "{run:?}");
        assert_eq!(run[0], real[0]);
        for (d, r) in run.iter().zip(&real).skip(1) {
            assert_eq!(d[0], "OK", "{d:?}");
            assert_eq!(d[0], r[0]);
            assert_eq!(d[1], "", "no id for a would-be asset: {d:?}");
            assert!(r[1].parse::<i64>().is_ok());
            assert_eq!(d[2], r[2]);
        }
        assert!(run[1][5].starts_with("/media/files/assets/"), "{run:?}");
    }
    app.stop().await;
}

#[tokio::test]
async fn a_dry_run_key_never_stands_in_for_the_real_run() {
    let app = spawn_app().await;
    let post = |path: &'static str, key: &'static str| {
        app.admin(Method::POST, path)
            .header("Idempotency-Key", key)
            .json(&json!([{"name": "keyed"}]))
            .send()
    };
    let (s, dry) = json(post("/campaigns?dry_run=1", "k1").await.unwrap()).await;
    assert_eq!(s, 202, "{dry}");
    let (_, again) = json(post("/campaigns?dry_run=1", "k1").await.unwrap()).await;
    assert_eq!(again, dry, "a retried dry run answers as the first");
    let (s, real) = json(post("/campaigns", "k1").await.unwrap()).await;
    assert_eq!(s, 202, "{real}");
    assert_ne!(real, dry, "the real run is not the dry run's retry");
    app.wait_ended(real["request"].as_str().unwrap(), Duration::from_secs(60))
        .await;
    app.wait_ended(dry["request"].as_str().unwrap(), Duration::from_secs(60))
        .await;
    assert_eq!(count(&app, "campaigns").await, 1);

    // The same for the uploader.
    let csv = b"op;name\r\nc;by upload\r\n".to_vec();
    let send_upload = |dry: bool| {
        let mut f = form("campaigns", "k.csv", csv.clone(), &[("bgrs", "1")]);
        if dry {
            f = f.text("dry_run", "1");
        }
        app.admin(Method::POST, UPLOAD)
            .header("Idempotency-Key", "k2")
            .multipart(f)
            .send()
    };
    let (s, dry) = json(send_upload(true).await.unwrap()).await;
    assert_eq!(s, 202, "{dry}");
    let (s, real) = json(send_upload(false).await.unwrap()).await;
    assert_eq!(s, 202, "{real}");
    assert_ne!(real, dry);
    let rec = app
        .wait_ended(real["request"].as_str().unwrap(), Duration::from_secs(60))
        .await;
    assert_eq!(rec["dry_run"], "0");
    assert_eq!(count(&app, "campaigns").await, 2);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_atomic_upload_is_never_half_applied() {
    let app = spawn_app().await;
    const ROWS: usize = 60_000;
    let mut csv = String::from("op,name\n");
    for i in 1..=ROWS {
        csv.push_str(&format!("c,cancel row {i}\n"));
    }
    let (s, text) = upload(
        &app,
        form(
            "campaigns",
            "big.csv",
            csv.into_bytes(),
            &[("bgrs", "1"), ("atomic", "1")],
        ),
    )
    .await;
    assert_eq!(s, 202, "{text}");
    let rid = serde_json::from_str::<Json>(&text).unwrap()["request"]
        .as_str()
        .unwrap()
        .to_string();
    let result_file = app
        .dir
        .path()
        .join(format!("data/media/keep1m/bgrs.{rid}.result.csv"));
    eventually("result rows on disk", Duration::from_secs(60), || {
        let f = result_file.clone();
        async move { std::fs::metadata(&f).is_ok_and(|m| m.len() > 100) }
    })
    .await;
    let asked = std::time::Instant::now();
    let r = app
        .admin(Method::DELETE, &format!("/bgrs/{rid}"))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    eprintln!("the cancel answered after {:?}", asked.elapsed());
    assert!([200, 202, 409].contains(&status), "{status}");
    let rec = app.wait_ended(&rid, Duration::from_secs(120)).await;
    eprintln!(
        "cancel answered {status}; the request ended as {}",
        rec["status_name"]
    );
    let result = rows(&app.result_text(&rid).await.replace(',', ";"));
    assert_eq!(result.len(), ROWS + 1);
    match rec["status_id"].as_str() {
        Some("5") => {
            assert_eq!(
                count(&app, "campaigns").await,
                0,
                "a cancel applies nothing"
            );
            assert!(
                result[1..]
                    .iter()
                    .all(|r| r[0] == "not run: the request was cancelled"),
                "{:?}",
                &result[..3]
            );
        }
        Some("4") => {
            assert_eq!(count(&app, "campaigns").await, ROWS as i64, "whole: {rec}");
            assert!(result[1..].iter().all(|r| r[0] == "OK"));
        }
        other => panic!("{other:?}: {rec}"),
    }
    let details: Vec<String> = all_details(&app, &rid)
        .await
        .iter()
        .map(|d| d["details"].as_str().unwrap().to_string())
        .collect();
    assert!(details.iter().all(|d| !d.contains('\0')), "{details:?}");
    let per_line = details.iter().filter(|d| d.starts_with("Line: ")).count();
    assert!(per_line == 0 || per_line == ROWS, "{per_line} line details");
    assert_eq!(
        details.iter().filter(|d| d.starts_with("started")).count(),
        1,
        "ran once, without a failure: {details:?}"
    );
    app.stop().await;
}
