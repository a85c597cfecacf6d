//! `entiserve migrate-data`: an installation on SQLite, holding every kind of row (objects with
//! references, users with passwords, a token, a background batch with an idempotency key, a
//! background upload, an undo, a deleted object, the history of entity changes), copied into a
//! new PostgreSQL database; a server on the copy serves the same objects under the same ids,
//! signs in the same users, takes the same token and answers for the old requests; every table
//! holds the same rows; a second copy into the now filled database is refused and changes
//! nothing. Also: a table whose rows name later rows of itself, copied both ways; a database
//! copied while its server writes.
//!
//! Needs PostgreSQL (`TEST_DATABASE_URL`). Without it the test says so and passes, unless
//! `ENTISERVE_REQUIRE_PG` is set (CI sets it for its PostgreSQL pass), in which case it fails.

mod common;

use common::upload::background_rows;
use common::*;
use entiserve::storage::copy;
use entiserve::storage::{PoolExec, Row, Storage};
use reqwest::Method;
use serde_json::{Value as Json, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn pg_admin_url() -> Option<String> {
    match std::env::var("TEST_DATABASE_URL") {
        Ok(u) if !u.is_empty() => Some(u),
        _ if std::env::var_os("ENTISERVE_REQUIRE_PG").is_some() => {
            panic!("TEST_DATABASE_URL is not set and ENTISERVE_REQUIRE_PG is")
        }
        _ => {
            eprintln!(
                "SKIPPED: the migrate-data test needs PostgreSQL (TEST_DATABASE_URL); set \
                 ENTISERVE_REQUIRE_PG=1 to fail instead"
            );
            None
        }
    }
}

async fn get(app: &TestApp, path: &str) -> Json {
    let (s, b) = json(app.admin(Method::GET, path).send().await.unwrap()).await;
    assert_eq!(s, 200, "GET {path}: {b}");
    b
}

/// What the API shows of the installation: every object of every entity, the admin's
/// requests, and for each of `rids` its record, details and result.
async fn shown(app: &TestApp, rids: &[&str]) -> Json {
    let mut out = serde_json::Map::new();
    for e in ["campaigns", "markers", "assets", "users"] {
        out.insert(
            e.into(),
            get(app, &format!("/{e}?limit=10000&sort=id")).await,
        );
    }
    out.insert("bgrs".into(), get(app, "/bgrs").await);
    for rid in rids {
        out.insert(
            format!("{rid} record"),
            get(app, &format!("/bgrs/{rid}")).await,
        );
        out.insert(
            format!("{rid} details"),
            Json::Array(all_details(app, rid).await),
        );
        out.insert(format!("{rid} result"), app.result_text(rid).await.into());
    }
    Json::Object(out)
}

/// Every row of every table the copy covers, read with the target's column types.
async fn rows_of(
    db: &dyn Storage,
    types_from: &dyn Storage,
    entities: &Path,
) -> BTreeMap<String, Vec<Row>> {
    let catalog =
        entiserve::schema::compile_dir(entities, &entiserve::plugins::Registry::builtin().names())
            .unwrap();
    let mut out = BTreeMap::new();
    for t in copy::tables(&catalog) {
        let cols = copy::columns(&mut PoolExec(types_from), types_from.dialect(), &t.name)
            .await
            .unwrap();
        assert!(!cols.is_empty(), "table {} exists", t.name);
        let mut pages = copy::Pages::new(db.dialect(), &t, &cols, 1000);
        let mut all = Vec::new();
        loop {
            let page = pages.next(&mut PoolExec(db)).await.unwrap();
            if page.is_empty() {
                break;
            }
            all.extend(page);
        }
        out.insert(t.name.clone(), all);
    }
    out
}

fn migrate(from: &str, to: &str, entities: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_entiserve"))
        .args(["migrate-data", "--from", from, "--to", to, "--entities"])
        .arg(entities)
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_installation_moves_to_postgres_whole() {
    let Some(admin_url) = pg_admin_url() else {
        return;
    };
    // An installation on SQLite, whatever the suite's backend.
    let dir = tempfile::tempdir().unwrap();
    let entities = dir.path().join("entities");
    std::fs::create_dir_all(&entities).unwrap();
    for e in std::fs::read_dir(shipped_entities()).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, entities.join(p.file_name().unwrap())).unwrap();
    }
    let mut settings = entiserve::settings::Settings::new(dir.path().join("data"), &entities);
    settings.bind = "127.0.0.1:0".parse().unwrap();
    settings.admin_password = Some(ADMIN_PASSWORD.into());
    settings.shutdown_grace = Duration::from_secs(2);
    settings.helper_exe = env!("CARGO_BIN_EXE_entiserve").into();
    let sqlite_url = settings.database_url();
    let app = start(dir, entities.clone(), settings.clone(), None).await;

    let c1 = app
        .create("campaigns", json!({"name": "spring", "type": 2}))
        .await["id"]
        .as_i64()
        .unwrap();
    let c2 = app
        .create(
            "campaigns",
            json!({"name": "autumn", "description": "ünïcode ✓", "is_active": false}),
        )
        .await["id"]
        .as_i64()
        .unwrap();
    let m1 = app
        .create(
            "markers",
            json!({"name": "p1", "campaign_id": c1, "page": 1}),
        )
        .await["id"]
        .as_i64()
        .unwrap();
    app.create("markers", json!({"name": "p2", "campaign_id": c2}))
        .await;
    app.create(
        "assets",
        json!({"name": "video", "marker_id": m1, "url": "https://example.com/v"}),
    )
    .await;
    app.create_user("kim", "kim-password-1").await;
    let (s, t) = json(
        app.client
            .post(app.url("/auth/token"))
            .json(&json!({"login": "kim", "password": "kim-password-1"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200, "{t}");
    let token = t["token"].as_str().unwrap().to_string();

    // A background batch under an idempotency key, a background upload, an undo of the batch.
    let batch = |app: &TestApp| {
        app.admin(Method::POST, "/campaigns")
            .header("Idempotency-Key", "move-1")
            .json(&json!([{"name": "batch one"}, {"name": "batch two"}]))
    };
    let (s, first) = json(batch(&app).send().await.unwrap()).await;
    assert_eq!(s, 202, "{first}");
    let batch_rid = first["request"].as_str().unwrap().to_string();
    let rec = app.wait_ended(&batch_rid, Duration::from_secs(60)).await;
    assert_eq!(rec["status_id"], "4", "{rec}");
    let (upload_rid, rec, result) = background_rows(
        &app,
        "campaigns",
        b"op;name;type\nc;upload one;1\nc;upload two;3\n",
        &[],
    )
    .await;
    assert_eq!(rec["status_id"], "4", "{rec}");
    assert!(result[1..].iter().all(|r| r[0] == "OK"), "{result:?}");
    let (s, u) = json(
        app.admin(Method::POST, &format!("/bgrs/{batch_rid}/undo"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 202, "{u}");
    let undo_rid = u["request"].as_str().unwrap().to_string();
    let rec = app.wait_ended(&undo_rid, Duration::from_secs(60)).await;
    assert_eq!(rec["status_id"], "4", "{rec}");
    // The last object created is deleted: its id is not handed out again.
    let doomed = app.create("campaigns", json!({"name": "doomed"})).await["id"]
        .as_i64()
        .unwrap();
    let r = app
        .admin(Method::DELETE, &format!("/campaigns/{doomed}"))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());

    let rids = [batch_rid.as_str(), upload_rid.as_str(), undo_rid.as_str()];
    let before = shown(&app, &rids).await;
    assert_eq!(before["campaigns"].as_array().unwrap().len(), 4, "{before}");
    let changed_before = get(&app, &format!("/campaigns?changed_by={upload_rid}&sort=id")).await;
    assert_eq!(changed_before.as_array().unwrap().len(), 2);
    let (dir, entities, _) = app.stop_keeping().await;

    let pg = PgDb::create(&admin_url).await;
    // The files go into an object store (here a file:// one) with the rows.
    let store = dir.path().join("store");
    let store_url = format!("file://{}", store.display());
    let out = Command::new(env!("CARGO_BIN_EXE_entiserve"))
        .args(["migrate-data", "--from", &sqlite_url, "--to", &pg.url])
        .arg("--entities")
        .arg(&entities)
        .args(["--storage-url", &store_url, "--data-dir"])
        .arg(&settings.data_dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("campaigns: 4 rows copied"), "{stdout}");
    assert!(stdout.contains("users: 2 rows copied"), "{stdout}");
    assert!(stdout.contains("bg_requests: 3 rows copied"), "{stdout}");

    // Every table holds the same rows, system columns included.
    let source = entiserve::storage::open(&sqlite_url).await.unwrap();
    let target = entiserve::storage::open(&pg.url).await.unwrap();
    let source_rows = rows_of(source.as_ref(), target.as_ref(), &entities).await;
    let target_rows = rows_of(target.as_ref(), target.as_ref(), &entities).await;
    for (table, rows) in &source_rows {
        assert_eq!(rows, &target_rows[table], "table {table}");
    }
    for table in [
        "bg_changes",
        "entity_changes",
        "entity_definitions",
        "idempotency_keys",
    ] {
        assert!(!source_rows[table].is_empty(), "{table} has rows to copy");
    }
    source.close().await;

    assert!(stdout.contains(" files ("), "{stdout}");
    assert!(
        store.join("media/keep1m").is_dir(),
        "the upload's result file is in the store"
    );

    // A server on the copy, with a new, empty data directory and the files in the store.
    settings.database_url = Some(pg.url.clone());
    settings.data_dir = dir.path().join("new-data");
    settings.storage_url = Some(store_url.clone());
    let app = start(dir, entities.clone(), settings, None).await;
    let after = shown(&app, &rids).await;
    assert_eq!(after, before);
    let r = app.admin(Method::GET, "/campaigns").send().await.unwrap();
    assert_eq!(r.headers()["x-total-count"], "4", "the kept row count");
    let changed_after = get(&app, &format!("/campaigns?changed_by={upload_rid}&sort=id")).await;
    assert_eq!(changed_after, changed_before);
    let (s1, me) = json(
        app.as_user("kim", "kim-password-1", Method::GET, "/users/me")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((s1, me["login"].as_str()), (200, Some("kim")), "{me}");
    let (s1, me) = json(
        app.client
            .get(app.url("/users/me"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((s1, me["login"].as_str()), (200, Some("kim")), "{me}");
    // The idempotency key still answers with the first request.
    let (s1, again) = json(batch(&app).send().await.unwrap()).await;
    assert_eq!((s1, &again), (202, &first));
    // New rows take ids above every id handed out before.
    let new = app.create("campaigns", json!({"name": "new"})).await["id"]
        .as_i64()
        .unwrap();
    assert!(new > doomed, "{new} > {doomed}");
    let user = app.create_user("lee", "lee-password-1").await;
    let max_user = before["users"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["id"].as_i64().unwrap())
        .max()
        .unwrap();
    assert!(user > max_user);
    let (dir, entities, _) = app.stop_keeping().await;

    // A second copy into the filled database is refused and writes nothing.
    let filled = rows_of(target.as_ref(), target.as_ref(), &entities).await;
    let out = migrate(&sqlite_url, &pg.url, &entities);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("not empty"), "{stderr}");
    assert_eq!(
        rows_of(target.as_ref(), target.as_ref(), &entities).await,
        filled
    );
    target.close().await;
    drop(dir);
}

/// A table whose rows name rows of the same table, some of them copied later (a higher id, a
/// later page): copied to PostgreSQL and from there back into a new SQLite file, every row the
/// same each way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_naming_later_rows_of_their_table_copy_both_ways() {
    let Some(admin_url) = pg_admin_url() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let entities = dir.path().join("entities");
    std::fs::create_dir_all(&entities).unwrap();
    for e in std::fs::read_dir(shipped_entities()).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, entities.join(p.file_name().unwrap())).unwrap();
    }
    std::fs::write(
        entities.join("nodes.yaml"),
        "name: nodes\naccess: { read: user, write: user }\nfields:\n  name: { type: string, required: true }\n  parent: { type: reference, entity: nodes }\n  weight: { type: decimal }\n  leaf: { type: boolean }\n",
    )
    .unwrap();
    let mut settings = entiserve::settings::Settings::new(dir.path().join("data"), &entities);
    settings.bind = "127.0.0.1:0".parse().unwrap();
    settings.admin_password = Some(ADMIN_PASSWORD.into());
    settings.shutdown_grace = Duration::from_secs(2);
    let sqlite_url = settings.database_url();
    let app = start(dir, entities.clone(), settings, None).await;
    let items: Vec<Json> = (0..1200)
        .map(|i| json!({"name": format!("n{i}"), "weight": i as f64 / 3.0, "leaf": i % 2 == 0}))
        .collect();
    let (s, b) = json(
        app.admin(Method::POST, "/nodes?bgrs=false")
            .json(&items)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    let ids: Vec<i64> = get(&app, "/nodes?limit=10000&sort=id")
        .await
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids.len(), 1200);
    let (first, last) = (ids[0], ids[ids.len() - 1]);
    let (s, b) = json(
        app.admin(Method::PUT, &format!("/nodes/{first}"))
            .json(&json!({"parent": last}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    let (_dir, entities, _) = app.stop_keeping().await;

    let pg = PgDb::create(&admin_url).await;
    // Definitions other than the source's (here without `nodes`) are refused before anything
    // is written.
    let out = migrate(&sqlite_url, &pg.url, &shipped_entities());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("entity definitions") && stderr.contains("`nodes`"),
        "{stderr}"
    );
    let target = entiserve::storage::open(&pg.url).await.unwrap();
    let users = copy::columns(&mut PoolExec(target.as_ref()), target.dialect(), "users").await;
    assert!(users.unwrap().is_empty(), "no table was made");
    let out = migrate(&sqlite_url, &pg.url, &entities);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let back_dir = tempfile::tempdir().unwrap();
    let back_url = format!("sqlite://{}", back_dir.path().join("back.db").display());
    let out = migrate(&pg.url, &back_url, &entities);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("nodes: 1200 rows copied"), "{stdout}");

    let source = entiserve::storage::open(&sqlite_url).await.unwrap();
    let back = entiserve::storage::open(&back_url).await.unwrap();
    let there = rows_of(target.as_ref(), target.as_ref(), &entities).await;
    assert_eq!(
        rows_of(source.as_ref(), target.as_ref(), &entities).await,
        there
    );
    assert_eq!(
        rows_of(back.as_ref(), target.as_ref(), &entities).await,
        there
    );
    // The reference is in force again on PostgreSQL, and both copies count their rows.
    let e = target
        .execute(
            "UPDATE \"nodes\" SET \"parent\" = 999999 WHERE \"id\" = $1",
            &[entiserve::storage::Value::int(first)],
        )
        .await;
    assert!(
        matches!(e, Err(entiserve::storage::StorageError::ForeignKey)),
        "{e:?}"
    );
    for db in [&target, &back] {
        let n = db
            .fetch(
                "SELECT \"n\" FROM \"entity_counts\" WHERE \"entity\" = 'nodes'",
                &[],
                &[entiserve::schema::ColType::Int],
            )
            .await
            .unwrap();
        assert_eq!(n[0][0].as_i64(), Some(1200));
    }
    // A new row on the SQLite copy takes an id above the copied ones.
    let next = back
        .fetch_write(
            "INSERT INTO \"nodes\" (\"name\", \"created_dt\", \"updated_dt\") VALUES ('new', 'x', 'x') RETURNING \"id\"",
            &[],
            &[entiserve::schema::ColType::Int],
        )
        .await
        .unwrap();
    assert_eq!(next[0][0].as_i64(), Some(last + 1));
    for db in [source, target, back] {
        db.close().await;
    }
}

/// A server goes on writing while its database is copied: its calls are not held up, and the
/// copy is the database at one instant (every marker's campaign is in it, though the
/// campaigns were read before the markers, and at most one campaign lacks its marker).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_server_is_copied_as_of_one_instant() {
    let Some(admin_url) = pg_admin_url() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let entities = shipped_entities();
    let mut settings = entiserve::settings::Settings::new(dir.path().join("data"), &entities);
    settings.bind = "127.0.0.1:0".parse().unwrap();
    settings.admin_password = Some(ADMIN_PASSWORD.into());
    settings.shutdown_grace = Duration::from_secs(2);
    let sqlite_url = settings.database_url();
    let app = start(dir, entities.clone(), settings, None).await;
    const BULK: usize = 20_000;
    let items: Vec<Json> = (0..BULK)
        .map(|i| json!({"name": format!("bulk {i}"), "description": "x".repeat(100)}))
        .collect();
    let r = app
        .admin(Method::POST, "/campaigns?bgrs=false")
        .json(&items)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    // Pairs of a campaign and a marker naming it, one after the other, until told to stop.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let pairs = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let writer = {
        let (client, base) = (app.client.clone(), app.base.clone());
        let (stop, pairs) = (stop.clone(), pairs.clone());
        tokio::spawn(async move {
            let post = |path: &str, body: Json| {
                client
                    .post(format!("{base}{path}"))
                    .basic_auth("admin", Some(ADMIN_PASSWORD))
                    .json(&body)
                    .send()
            };
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let (s, c) = json(
                    post("/campaigns", json!({"name": format!("live {i}")}))
                        .await
                        .unwrap(),
                )
                .await;
                assert_eq!(s, 200, "{c}");
                let m = json!({"name": "m", "campaign_id": c["id"]});
                let (s, m) = json(post("/markers", m).await.unwrap()).await;
                assert_eq!(s, 200, "{m}");
                pairs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                i += 1;
            }
        })
    };
    while pairs.load(std::sync::atomic::Ordering::Relaxed) < 5 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let pg = PgDb::create(&admin_url).await;
    let before = pairs.load(std::sync::atomic::Ordering::Relaxed);
    let (from, to, ents) = (sqlite_url.clone(), pg.url.clone(), entities.clone());
    let out = tokio::task::spawn_blocking(move || migrate(&from, &to, &ents))
        .await
        .unwrap();
    let during = pairs.load(std::sync::atomic::Ordering::Relaxed) - before;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.await.unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(during > 0, "the server's writes went on during the copy");

    let target = entiserve::storage::open(&pg.url).await.unwrap();
    let count = |table: &'static str| {
        let target = target.clone();
        async move {
            copy::count(&mut PoolExec(target.as_ref()), target.dialect(), table)
                .await
                .unwrap()
        }
    };
    let (campaigns, markers) = (count("campaigns").await, count("markers").await);
    let live = campaigns - BULK as i64;
    assert!(live >= before as i64, "{live} live campaigns copied");
    assert!(
        markers == live || markers == live - 1,
        "{campaigns} campaigns, {markers} markers"
    );
    target.close().await;
    app.stop().await;
}
