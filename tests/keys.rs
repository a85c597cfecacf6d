//! Natural keys (`key:` in the entity YAML), against the real server on the backend the suite
//! runs on: objects named by key in REST upserts, batch items and CSV rows (`u`, `d`, `s`),
//! 404 when no object has the key, 409 for a taken key, many saves of one key at once, a ZIP
//! bundle whose marker names repeat in a campaign, and a key that the stored rows do not fit
//! refusing the start.

mod common;
#[path = "support/pdf.rs"]
mod pdf_sample;

use common::zips::zip_of;
use common::*;
use reqwest::Method;
use reqwest::multipart::{Form, Part};
use serde_json::{Value as Json, json};
use std::path::Path;
use std::time::Duration;

const UPLOAD: &str = "/tools/uploader.ex.php";

async fn send(app: &TestApp, m: Method, path: &str, body: Json) -> (u16, Json) {
    json(app.admin(m, path).json(&body).send().await.unwrap()).await
}

async fn post(app: &TestApp, path: &str, body: Json) -> (u16, Json) {
    send(app, Method::POST, path, body).await
}

/// The items of a synchronous batch reply as (status, body).
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

async fn markers_of(app: &TestApp, cid: i64) -> Vec<Json> {
    let (s, b) = json(
        app.admin(Method::GET, &format!("/markers?campaign_id={cid}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    b.as_array().unwrap().clone()
}

/// A synchronous upload of comma-separated `csv` that must succeed: its result rows (header
/// first).
async fn upload_keyed(app: &TestApp, entity: &str, csv: &str) -> Vec<Vec<String>> {
    let f = upload::form(entity, "keys.csv", csv.as_bytes().to_vec(), &[]);
    let (s, text) = upload::upload(app, f).await;
    assert_eq!(s, 200, "{text}");
    upload::rows_split_by(&text, b',')
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_and_batches_name_objects_by_key() {
    let app = spawn_app().await;
    let cid = app.create("campaigns", json!({"name": "c"})).await["id"]
        .as_i64()
        .unwrap();
    let (s, m1) = post(&app, "/markers", json!({"name": "m1", "campaign_id": cid})).await;
    assert_eq!(s, 200, "{m1}");

    // A taken composite key is a 409 naming the key's fields.
    let (s, b) = post(&app, "/markers", json!({"name": "m1", "campaign_id": cid})).await;
    assert_eq!((s, error_code(&b).as_str()), (409, "conflict"), "{b}");
    assert!(
        b["description"]
            .as_str()
            .unwrap()
            .contains("`campaign_id`, `name`"),
        "{b}"
    );
    assert!(b["fields"]["name"].is_string(), "{b}");
    // The same name in another campaign is another key.
    let other = app.create("campaigns", json!({"name": "other"})).await["id"]
        .as_i64()
        .unwrap();
    let (s, _) = post(
        &app,
        "/markers",
        json!({"name": "m1", "campaign_id": other}),
    )
    .await;
    assert_eq!(s, 200);

    // upsert=1: the object with the key is updated (only the fields given), else created.
    let (s, up) = post(
        &app,
        "/markers?upsert=1",
        json!({"name": "m1", "campaign_id": cid, "page": 5}),
    )
    .await;
    assert_eq!(s, 200, "{up}");
    assert_eq!(up["id"], m1["id"]);
    assert_eq!(up["page"], 5);
    assert_eq!(up["created_dt"], m1["created_dt"]);
    let (s, m2) = post(
        &app,
        "/v2.5/markers?upsert=yes",
        json!({"name": "m2", "campaign_id": cid}),
    )
    .await;
    assert_eq!(s, 200, "{m2}");
    assert_ne!(m2["id"], m1["id"]);
    // Without the whole key, an upsert cannot tell: 400 naming the missing field.
    let (s, b) = post(&app, "/markers?upsert=1", json!({"name": "m9"})).await;
    assert_eq!(
        (s, error_code(&b).as_str()),
        (400, "validation_failed"),
        "{b}"
    );
    assert!(b["fields"]["campaign_id"].is_string(), "{b}");
    // An entity without a key, and a bad flag.
    let (s, b) = post(&app, "/campaigns?upsert=1", json!({"name": "x"})).await;
    assert_eq!(s, 400, "{b}");
    assert!(
        b["description"].as_str().unwrap().contains("has no key"),
        "{b}"
    );
    let (s, b) = post(&app, "/markers?upsert=maybe", json!({"name": "x"})).await;
    assert_eq!(s, 400, "{b}");
    // upsert=0 is a plain create.
    let (s, _) = post(
        &app,
        "/markers?upsert=0",
        json!({"name": "m2", "campaign_id": cid}),
    )
    .await;
    assert_eq!(s, 409);

    // A batch of upserts: each item on its own, a later item seeing an earlier one.
    let (s, b) = post(
        &app,
        "/markers?upsert=1&bgrs=false",
        json!([
            {"name": "m1", "campaign_id": cid, "page": 6},
            {"name": "m3", "campaign_id": cid},
            {"name": "m3", "campaign_id": cid, "page": 2},
            {"name": "m4"}
        ]),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    let r = items(&b);
    assert_eq!(r[0].0, 200, "{r:?}");
    assert_eq!(r[0].1["id"], m1["id"]);
    assert_eq!(r[0].1["page"], 6);
    assert_eq!((r[1].0, r[2].0, r[3].0), (200, 200, 400), "{r:?}");
    assert_eq!(r[2].1["id"], r[1].1["id"]);
    assert_eq!(r[2].1["page"], 2);

    // PUT items without `id` name their object by key; no match is a 404 item.
    let (s, b) = send(
        &app,
        Method::PUT,
        "/markers?bgrs=false",
        json!([
            {"campaign_id": cid, "name": "m2", "page": 9},
            {"campaign_id": cid, "name": "nope", "page": 1},
            {"name": "m2", "page": 1},
            {"id": m1["id"], "page": 10}
        ]),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    let r = items(&b);
    assert_eq!(r[0].0, 200, "{r:?}");
    assert_eq!(r[0].1["id"], m2["id"]);
    assert_eq!(r[0].1["page"], 9);
    assert_eq!(r[1].0, 404, "{r:?}");
    assert_eq!(error_code(&r[1].1), "not_found");
    assert!(
        r[1].1["description"].as_str().unwrap().contains("\"nope\""),
        "{r:?}"
    );
    assert_eq!(r[2].0, 400, "{r:?}");
    assert_eq!((r[3].0, &r[3].1["page"]), (200, &json!(10)), "{r:?}");
    // Without a key, a PUT item still needs its id.
    let (_, b) = send(
        &app,
        Method::PUT,
        "/campaigns?bgrs=false",
        json!([{"name": "x"}]),
    )
    .await;
    let r = items(&b);
    assert_eq!(r[0].0, 400, "{r:?}");
    assert!(
        r[0].1["description"]
            .as_str()
            .unwrap()
            .contains("has no key"),
        "{r:?}"
    );

    // In the background: the stored items keep the op.
    let (s, b) = post(
        &app,
        "/markers?upsert=1",
        json!([{"name": "m1", "campaign_id": cid, "page": 11}, {"name": "m5", "campaign_id": cid}]),
    )
    .await;
    assert_eq!(s, 202, "{b}");
    let rid = b["request"].as_str().unwrap();
    let rec = app.wait_ended(rid, Duration::from_secs(60)).await;
    assert_eq!(rec["status"], "200", "{rec}");
    let (_, b) = json(
        app.admin(Method::GET, &format!("/bgrs/{rid}/result"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let r = items(&b);
    assert_eq!((r[0].0, &r[0].1["id"]), (200, &m1["id"]), "{r:?}");
    assert_eq!(r[1].0, 200, "{r:?}");
    let names: Vec<String> = markers_of(&app, cid)
        .await
        .iter()
        .map(|m| m["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["m1", "m2", "m3", "m5"]);

    // users are keyed by login: a secret is hashed once and the user can sign in.
    let (s, u) = post(
        &app,
        "/users?upsert=1",
        json!({"login": "kim", "password": "first-password"}),
    )
    .await;
    assert_eq!(s, 200, "{u}");
    let (s, u2) = post(
        &app,
        "/users?upsert=1",
        json!({"login": "kim", "first_name": "Kim", "password": "second-password"}),
    )
    .await;
    assert_eq!(s, 200, "{u2}");
    assert_eq!(u2["id"], u["id"]);
    assert_eq!(u2["first_name"], "Kim");
    let r = app
        .as_user("kim", "second-password", Method::GET, "/users/me")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_save_needs_what_a_create_needs_only_when_it_creates() {
    let app = spawn_with(|s| {
        std::fs::write(
            s.entities_dir.join("parts.yaml"),
            "key: sku\nfields:\n  sku: { type: string }\n  title: { type: string, required: true }\n  stock: { type: integer, default: 4 }\n",
        )
        .unwrap();
    })
    .await;
    let (s, b) = post(&app, "/parts?upsert=1", json!({"sku": "a"})).await;
    assert_eq!(
        (s, error_code(&b).as_str()),
        (400, "validation_failed"),
        "{b}"
    );
    assert_eq!(b["fields"]["title"], "is required", "{b}");
    let (s, made) = post(&app, "/parts?upsert=1", json!({"sku": "a", "title": "A"})).await;
    assert_eq!((s, &made["stock"]), (200, &json!(4)), "{made}");
    // Updating, the required field may be left out and the default is not written again.
    let (s, b) = send(
        &app,
        Method::PUT,
        &format!("/parts/{}", made["id"]),
        json!({"stock": 9}),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    let (s, b) = post(&app, "/parts?upsert=1", json!({"sku": "a"})).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(
        (&b["id"], &b["title"], &b["stock"]),
        (&made["id"], &json!("A"), &json!(9))
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_saves_of_one_key_make_one_object() {
    let app = spawn_app().await;
    let cid = app.create("campaigns", json!({"name": "c"})).await["id"]
        .as_i64()
        .unwrap();
    let mut tasks = Vec::new();
    for n in 0..24 {
        let req = app
            .admin(Method::POST, "/markers?upsert=1")
            .json(&json!({"name": "same", "campaign_id": cid, "page": n}));
        tasks.push(tokio::spawn(async move {
            json(req.send().await.unwrap()).await
        }));
    }
    let mut ids = std::collections::BTreeSet::new();
    for t in tasks {
        let (s, b) = t.await.unwrap();
        assert_eq!(s, 200, "{b}");
        ids.insert(b["id"].as_i64().unwrap());
    }
    assert_eq!(ids.len(), 1, "one object: {ids:?}");
    assert_eq!(markers_of(&app, cid).await.len(), 1);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csv_rows_name_objects_by_key_and_save() {
    let app = spawn_app().await;
    let cid = app.create("campaigns", json!({"name": "c"})).await["id"]
        .as_i64()
        .unwrap();
    let csv = format!(
        "op,id,campaign_id,name,page\n\
         s,,{cid},a,1\n\
         s,,{cid},a,2\n\
         u,,{cid},a,3\n\
         u,,{cid},zz,1\n\
         c,,{cid},b,1\n\
         c,,{cid},b,1\n\
         d,,{cid},b,\n\
         d,,{cid},b,\n\
         u,,,a,4\n\
         x,,{cid},a,1\n"
    );
    let r = upload_keyed(&app, "markers", &csv).await;
    assert_eq!(r[0], ["res", "op", "id", "campaign_id", "name", "page"]);
    let res: Vec<&str> = r[1..].iter().map(|x| x[0].as_str()).collect();
    let ids: Vec<&str> = r[1..].iter().map(|x| x[2].as_str()).collect();
    assert_eq!(&res[..3], ["OK", "OK", "OK"], "{r:?}");
    let a = ids[0];
    assert!(!a.is_empty(), "a saved row gets its id: {r:?}");
    assert_eq!([ids[1], ids[2]], [a, a], "{r:?}");
    assert!(
        res[3].contains("no markers object has") && res[3].contains("\"zz\""),
        "{r:?}"
    );
    assert_eq!(ids[3], "", "{r:?}");
    assert_eq!(res[4], "OK");
    assert!(res[5].contains("already has this key"), "{r:?}");
    assert_eq!(res[6], "OK");
    assert_eq!(
        ids[6], ids[4],
        "a row deleted by key gets the id it had: {r:?}"
    );
    assert!(res[7].contains("no markers object has"), "{r:?}");
    assert!(res[8].contains("campaign_id"), "{r:?}");
    assert!(res[9].contains("use c, u, d or s"), "{r:?}");
    let m = markers_of(&app, cid).await;
    assert_eq!(m.len(), 1, "{m:?}");
    assert_eq!(
        (m[0]["name"].as_str(), m[0]["page"].as_i64()),
        (Some("a"), Some(3))
    );

    // `s` with an id updates that object; the result uploads again as it is.
    let csv = format!("op,id,name,page\ns,{a},a,7\n");
    let r = upload_keyed(&app, "markers", &csv).await;
    assert_eq!(r[1][0], "OK", "{r:?}");
    assert_eq!(markers_of(&app, cid).await[0]["page"], 7);

    // An entity without a key: `s` without an id creates, `u` without one fails the row.
    let r = upload_keyed(&app, "campaigns", "op,id,name\ns,,fresh\nu,,stale\n").await;
    assert_eq!(r[1][0], "OK", "{r:?}");
    assert!(!r[1][2].is_empty(), "{r:?}");
    assert!(r[2][0].contains("has no key"), "{r:?}");

    // users by login, in a background upload (secrets are sealed in the stored rows).
    let form = Form::new().text("entity", "users").text("bgrs", "1").part(
        "csvfile",
        Part::bytes(
            b"op,login,password,first_name\ns,lee,lee-password-1,Lee\ns,lee,,Leigh\n".to_vec(),
        )
        .file_name("users.csv"),
    );
    let (s, b) = json(
        app.admin(Method::POST, UPLOAD)
            .multipart(form)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 202, "{b}");
    let rid = b["request"].as_str().unwrap();
    app.wait_ended(rid, Duration::from_secs(60)).await;
    let text = app.result_text(rid).await;
    let rows: Vec<&str> = text.lines().collect();
    assert!(
        rows[1].starts_with("OK,") && rows[2].starts_with("OK,"),
        "{text}"
    );
    let r = app
        .as_user("lee", "lee-password-1", Method::GET, "/users/me")
        .send()
        .await
        .unwrap();
    let (s, me) = json(r).await;
    assert_eq!((s, me["first_name"].as_str()), (200, Some("Leigh")), "{me}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pdf_uploaded_again_into_its_campaign_updates_its_markers() {
    let app = spawn_app().await;
    let cid = app.create("campaigns", json!({"name": "c"})).await["id"]
        .as_i64()
        .unwrap();
    let bundle = zip_of(&[
        ("markers.csv", b"op;name;campaign_id\r\n"),
        ("pages.pdf", &pdf_sample::sample_pdf(2)),
    ]);
    let mut seen = Vec::new();
    for round in 0..2 {
        let form = Form::new()
            .text("entity", "markers")
            .text("bgrs", "1")
            .text("campaign_id", cid.to_string())
            .part(
                "csvfile",
                Part::bytes(bundle.clone()).file_name("pages.zip"),
            );
        let (s, b) = json(
            app.admin(Method::POST, UPLOAD)
                .multipart(form)
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(s, 202, "{b}");
        let rid = b["request"].as_str().unwrap();
        let rec = app.wait_ended(rid, Duration::from_secs(60)).await;
        assert_eq!(rec["status"], "200", "{rec}");
        let details: Vec<String> = all_details(&app, rid)
            .await
            .iter()
            .map(|d| d["details"].as_str().unwrap().to_string())
            .collect();
        let note = if round == 0 {
            format!("2 markers created from pages.pdf in campaign {cid}")
        } else {
            format!("2 markers from pages.pdf in campaign {cid}: 0 created, 2 updated")
        };
        assert!(details.iter().any(|d| d.starts_with(&note)), "{details:?}");
        let m = markers_of(&app, cid).await;
        assert_eq!(m.len(), 2, "{m:?}");
        seen.push(
            m.iter()
                .map(|m| {
                    (
                        m["id"].as_i64().unwrap(),
                        m["file"].as_str().unwrap().to_string(),
                    )
                })
                .collect::<Vec<_>>(),
        );
    }
    // The same markers, with the new upload's files.
    let ids = |v: &Vec<(i64, String)>| v.iter().map(|x| x.0).collect::<Vec<_>>();
    assert_eq!(ids(&seen[0]), ids(&seen[1]));
    assert_ne!(seen[0][0].1, seen[1][0].1);
    app.stop().await;
}

/// A fresh directory with `products.yaml` (the users entity is built in).
async fn fresh(yaml: &str) -> (tempfile::TempDir, std::path::PathBuf, Option<PgDb>) {
    let dir = tempfile::tempdir().unwrap();
    let entities = dir.path().join("entities");
    std::fs::create_dir_all(&entities).unwrap();
    std::fs::write(entities.join("products.yaml"), yaml).unwrap();
    let (_, db) = test_settings(dir.path(), &entities).await;
    (dir, entities, db)
}

fn settings(dir: &Path, entities: &Path, db: &Option<PgDb>) -> entiserve::settings::Settings {
    let mut s = entiserve::settings::Settings::new(dir.join("data"), entities);
    s.bind = "127.0.0.1:0".parse().unwrap();
    s.admin_password = Some(ADMIN_PASSWORD.into());
    s.shutdown_grace = Duration::from_secs(2);
    s.database_url = Some(database_url(dir, db));
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_the_stored_rows_do_not_fit_is_refused_naming_them() {
    let yaml = "fields:\n  code: { type: string }\n  color: { type: string }\n";
    let (dir, entities, db) = fresh(yaml).await;
    let s = settings(dir.path(), &entities, &db);
    let app = start(dir, entities, s, db).await;
    let mut ids = Vec::new();
    for (code, color) in [("a", "red"), ("a", "blue"), ("b", "red"), ("c", "")] {
        let mut body = json!({"code": code});
        if !color.is_empty() {
            body["color"] = json!(color);
        }
        ids.push(app.create("products", body).await["id"].as_i64().unwrap());
    }
    let (dir, entities, db) = app.stop_keeping().await;

    // `key: code` while two rows share `a`: the start is refused, naming the rows.
    std::fs::write(entities.join("products.yaml"), format!("key: code\n{yaml}")).unwrap();
    let s = settings(dir.path(), &entities, &db);
    let why = match entiserve::App::build(s).await {
        Ok(_) => panic!("the start is refused"),
        Err(e) => format!("{e:#}"),
    };
    assert!(why.contains("products.yaml:1:"), "{why}");
    assert!(
        why.contains(&format!("ids {}, {} share code \"a\"", ids[0], ids[1])),
        "{why}"
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_entiserve"))
        .arg("plan")
        .arg("--entities")
        .arg(&entities)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .arg("--database-url")
        .arg(database_url(dir.path(), &db))
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("share code \"a\""), "{text}");

    // `key: [code, color]` fits (a row without a color never collides): it applies, and the
    // key is enforced from then on.
    std::fs::write(
        entities.join("products.yaml"),
        format!("key: [code, color]\n{yaml}"),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_entiserve"))
        .arg("plan")
        .arg("--entities")
        .arg(&entities)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .arg("--database-url")
        .arg(database_url(dir.path(), &db))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("key [code, color] on `products`: no two of the 4 rows share it"),
        "{text}"
    );
    let s = settings(dir.path(), &entities, &db);
    let app = start(dir, entities, s, db).await;
    let (s, b) = post(&app, "/products", json!({"code": "a", "color": "red"})).await;
    assert_eq!(s, 409, "{b}");
    let (s, b) = post(
        &app,
        "/products?upsert=1",
        json!({"code": "b", "color": "red", "color_note": 1}),
    )
    .await;
    assert_eq!((s, error_code(&b).as_str()), (400, "unknown_field"), "{b}");
    let (s, b) = send(
        &app,
        Method::PUT,
        "/products?bgrs=0",
        json!([{"code": "b", "color": "red"}]),
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(items(&b)[0].1["id"], ids[2]);
    let (dir, entities, db) = app.stop_keeping().await;

    // The key dropped: its index goes, and the rows may share the values again.
    std::fs::write(entities.join("products.yaml"), yaml).unwrap();
    let s = settings(dir.path(), &entities, &db);
    let app = start(dir, entities, s, db).await;
    let (s, b) = post(&app, "/products", json!({"code": "a", "color": "red"})).await;
    assert_eq!(s, 200, "{b}");
    let (s, b) = post(&app, "/products?upsert=1", json!({"code": "a"})).await;
    assert_eq!(s, 400, "{b}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_runs_show_the_ids_of_objects_found_by_key_and_none_for_new_ones() {
    let app = spawn_app().await;
    let cid = app.create("campaigns", json!({"name": "c"})).await["id"]
        .as_i64()
        .unwrap();
    let a = app
        .create(
            "markers",
            json!({"campaign_id": cid, "name": "a", "page": 1}),
        )
        .await["id"]
        .as_i64()
        .unwrap();
    let a_text = a.to_string();

    // CSV: a save that updates, one that would create, an update and a delete by key.
    let csv = format!(
        "op,id,campaign_id,name,page\n\
         s,,{cid},a,5\n\
         s,,{cid},new,1\n\
         u,,{cid},a,6\n\
         d,,{cid},a,\n"
    );
    let form = Form::new()
        .text("entity", "markers")
        .text("dry_run", "1")
        .part(
            "csvfile",
            Part::bytes(csv.into_bytes()).file_name("dry.csv"),
        );
    let r = app
        .admin(Method::POST, UPLOAD)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    let rows: Vec<Vec<String>> = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(text.as_bytes())
        .records()
        .map(|r| r.unwrap().iter().map(str::to_string).collect())
        .collect();
    assert_eq!(rows[0], ["res", "op", "id", "campaign_id", "name", "page"]);
    let got: Vec<(&str, &str)> = rows[1..]
        .iter()
        .map(|r| (r[0].as_str(), r[2].as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("OK", a_text.as_str()),
            ("OK", ""),
            ("OK", a_text.as_str()),
            ("OK", a_text.as_str())
        ],
        "{text}"
    );

    // A batch upsert and single upserts.
    let (s, b) = post(
        &app,
        "/markers?upsert=1&dry_run=1&bgrs=0",
        json!([
            {"campaign_id": cid, "name": "a", "page": 9},
            {"campaign_id": cid, "name": "other", "page": 1}
        ]),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    let it = items(&b);
    assert_eq!((it[0].0, it[0].1["id"].clone()), (200, json!(a)), "{b}");
    assert_eq!((it[1].0, it[1].1["id"].clone()), (200, Json::Null), "{b}");
    let (s, b) = post(
        &app,
        "/markers?upsert=1&dry_run=1",
        json!({"campaign_id": cid, "name": "a", "page": 7}),
    )
    .await;
    assert_eq!(
        (s, b["id"].clone(), b["page"].clone()),
        (200, json!(a), json!(7))
    );
    let (s, b) = post(
        &app,
        "/markers?upsert=1&dry_run=1",
        json!({"campaign_id": cid, "name": "fresh"}),
    )
    .await;
    assert_eq!((s, b["id"].clone()), (200, Json::Null), "{b}");

    // The same batch in the background.
    let (s, b) = post(
        &app,
        "/markers?upsert=1&dry_run=1&bgrs=1",
        json!([
            {"campaign_id": cid, "name": "a", "page": 9},
            {"campaign_id": cid, "name": "other", "page": 1}
        ]),
    )
    .await;
    assert_eq!(s, 202, "{b}");
    let rid = b["request"].as_str().unwrap().to_string();
    app.wait_ended(&rid, std::time::Duration::from_secs(30))
        .await;
    let (s, result) = json(
        app.admin(Method::GET, &format!("/bgrs/{rid}/result"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200, "{result}");
    let it = items(&result);
    assert_eq!(it[0].1["id"], json!(a), "{result}");
    assert_eq!(it[1].1["id"], Json::Null, "{result}");

    // Nothing was kept.
    let all = markers_of(&app, cid).await;
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(
        (all[0]["id"].clone(), all[0]["page"].clone()),
        (json!(a), json!(1))
    );
    app.stop().await;
}
