//! Changing entities safely, against the real server on the backend the suite runs on: renames
//! keep values across a restart and a reload, conversions are checked row by row, a start that
//! would hide data refuses, `plan` changes nothing, and a server whose definitions another
//! server changed answers 503 for that entity until it reloads.

mod common;

use common::*;
use entiserve::settings::Settings;
use reqwest::Method;
use serde_json::{Value as Json, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use tempfile::TempDir;

const BEFORE: &str =
    "# products as first written\nfields:\n  title: { type: string }\n  price: { type: string }\n";

/// A fresh directory with `products.yaml` (the users entity is built in).
async fn fresh(yaml: &str) -> (TempDir, PathBuf, Option<PgDb>) {
    let dir = tempfile::tempdir().unwrap();
    let entities = dir.path().join("entities");
    std::fs::create_dir_all(&entities).unwrap();
    std::fs::write(entities.join("products.yaml"), yaml).unwrap();
    let db = match std::env::var("TEST_DATABASE_URL") {
        Ok(u) if !u.is_empty() => Some(PgDb::create(&u).await),
        _ => None,
    };
    (dir, entities, db)
}

fn settings(dir: &Path, entities: &Path, url: &str, dev: bool) -> Settings {
    let mut s = Settings::new(dir.join("data"), entities);
    s.bind = "127.0.0.1:0".parse().unwrap();
    s.admin_password = Some(ADMIN_PASSWORD.into());
    s.shutdown_grace = Duration::from_secs(2);
    s.database_url = Some(url.to_string());
    s.dev = dev;
    s
}

/// Starts a server on `dir`'s database and entities.
async fn boot(dir: TempDir, entities: PathBuf, db: Option<PgDb>, dev: bool) -> TestApp {
    let url = database_url(dir.path(), &db);
    let s = settings(dir.path(), &entities, &url, dev);
    start(dir, entities, s, db).await
}

/// What a start refuses with, or `None` when it starts.
async fn refused_start(dir: &Path, entities: &Path, db: &Option<PgDb>) -> Option<String> {
    let s = settings(dir, entities, &database_url(dir, db), false);
    match entiserve::App::build(s).await {
        Ok(app) => {
            drop(app);
            None
        }
        Err(e) => Some(format!("{e:#}")),
    }
}

async fn get(app: &TestApp, path: &str) -> (u16, Json) {
    json(app.admin(Method::GET, path).send().await.unwrap()).await
}

async fn post(app: &TestApp, path: &str, body: Json) -> (u16, Json) {
    json(
        app.admin(Method::POST, path)
            .json(&body)
            .send()
            .await
            .unwrap(),
    )
    .await
}

/// `entiserve plan` on `dir`: exit code and output.
fn plan(dir: &Path, entities: &Path, db: &Option<PgDb>) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_entiserve"))
        .arg("plan")
        .arg("--entities")
        .arg(entities)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg("--database-url")
        .arg(database_url(dir, db))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rename_and_a_conversion_keep_every_value_across_a_restart_and_a_reload() {
    let (dir, entities, db) = fresh(BEFORE).await;
    let app = boot(dir, entities, db, false).await;
    let (s, a) = post(
        &app,
        "/products",
        json!({"title": "a rather long product title", "price": "12.50"}),
    )
    .await;
    assert_eq!(s, 200, "{a}");
    let (_, b) = post(&app, "/products", json!({"title": "b", "price": " 3 "})).await;
    let (dir, entities, db) = app.stop_keeping().await;

    let after = "fields:\n  name: { type: string, required: true, renamed_from: title }\n  price: { type: decimal }\n";
    std::fs::write(entities.join("products.yaml"), after).unwrap();
    let (code, out) = plan(dir.path(), &entities, &db);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("rename column `products.title` to `products.name`"),
        "{out}"
    );
    assert!(
        out.contains("convert `products.price` from string to decimal"),
        "{out}"
    );
    // The plan changed nothing: it says the same again.
    assert_eq!(plan(dir.path(), &entities, &db).1, out);

    let app = boot(dir, entities, db, true).await;
    let (_, one) = get(&app, &format!("/products/{}", a["id"])).await;
    assert_eq!(one["name"], "a rather long product title");
    assert_eq!(one["price"], json!(12.5));
    assert!(one.get("title").is_none());
    let (_, two) = get(&app, &format!("/products/{}", b["id"])).await;
    assert_eq!(two["price"], json!(3), "a decimal is normalized: 3.0 is 3");
    let (code, out) = plan(app.dir.path(), &app.entities, &app.db);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("nothing to change"), "{out}");

    // The entity renamed through a reload: its rows follow.
    let entities = app.entities.clone();
    std::fs::remove_file(entities.join("products.yaml")).unwrap();
    std::fs::write(
        entities.join("goods.yaml"),
        format!("renamed_from: products\n{after}"),
    )
    .unwrap();
    eventually("goods served", Duration::from_secs(20), || async {
        get(&app, &format!("/goods/{}", a["id"])).await.1["name"] == "a rather long product title"
    })
    .await;
    assert_eq!(get(&app, "/products").await.0, 404);
    assert_eq!(
        get(&app, &format!("/goods/{}", b["id"])).await.1["price"],
        json!(3)
    );
    let (s, c) = post(&app, "/goods", json!({"name": "c", "price": 1.25})).await;
    assert_eq!(s, 200, "{c}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_that_do_not_fit_refuse_the_change_naming_the_rows() {
    let (dir, entities, db) = fresh(BEFORE).await;
    let app = boot(dir, entities, db, false).await;
    post(&app, "/products", json!({"title": "ok", "price": "12.50"})).await;
    let (_, bad) = post(&app, "/products", json!({"price": "abc"})).await;
    let (dir, entities, db) = app.stop_keeping().await;

    // string -> decimal with a row holding "abc": refused at start, naming it.
    std::fs::write(
        entities.join("products.yaml"),
        "fields:\n  title: { type: string }\n  price: { type: decimal }\n",
    )
    .unwrap();
    let why = refused_start(dir.path(), &entities, &db)
        .await
        .expect("the start is refused");
    assert!(why.contains("products.yaml:3:"), "{why}");
    assert!(why.contains("`products.price`"), "{why}");
    assert!(
        why.contains(&format!("id {}", bad["id"])) && why.contains("\"abc\""),
        "{why}"
    );
    let (code, out) = plan(dir.path(), &entities, &db);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("\"abc\""), "{out}");

    // `required` added while a row has no title: refused too.
    std::fs::write(
        entities.join("products.yaml"),
        "fields:\n  title: { type: string, required: true }\n  price: { type: string }\n",
    )
    .unwrap();
    let why = refused_start(dir.path(), &entities, &db)
        .await
        .expect("refused");
    assert!(
        why.contains("`required: true`") && why.contains(&format!("id {}", bad["id"])),
        "{why}"
    );

    // A shorter max_length than a stored value: refused.
    std::fs::write(
        entities.join("products.yaml"),
        "fields:\n  title: { type: string, max_length: 1 }\n  price: { type: string }\n",
    )
    .unwrap();
    let why = refused_start(dir.path(), &entities, &db)
        .await
        .expect("refused");
    assert!(
        why.contains("max_length: 1") && why.contains("\"ok\""),
        "{why}"
    );

    // A removed field whose column holds values: the server does not start.
    std::fs::write(
        entities.join("products.yaml"),
        "fields:\n  price: { type: string }\n",
    )
    .unwrap();
    let why = refused_start(dir.path(), &entities, &db)
        .await
        .expect("refused");
    assert!(why.contains("`products.title` was removed"), "{why}");

    // Nothing changed: the first definitions serve every value as it was.
    std::fs::write(entities.join("products.yaml"), BEFORE).unwrap();
    let app = boot(dir, entities, db, false).await;
    let (_, rows) = get(&app, "/products").await;
    let prices: Vec<&Json> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["price"])
        .collect();
    assert_eq!(prices, [&json!("12.50"), &json!("abc")]);
    assert_eq!(rows[0]["title"], "ok");
    app.stop().await;
}

#[test]
fn plan_exits_2_when_the_definitions_do_not_compile() {
    let dir = tempfile::tempdir().unwrap();
    let entities = dir.path().join("entities");
    std::fs::create_dir_all(&entities).unwrap();
    std::fs::write(
        entities.join("products.yaml"),
        "fields:\n  title: { type: strng }\n",
    )
    .unwrap();
    let (code, out) = plan(dir.path(), &entities, &None);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("did you mean `string`?"), "{out}");
    // No database yet: everything would be created, and nothing is.
    std::fs::write(entities.join("products.yaml"), BEFORE).unwrap();
    let (code, out) = plan(dir.path(), &entities, &None);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("create table `products`"), "{out}");
    assert!(!dir.path().join("data/entiserve.db").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_whose_definitions_another_changed_answers_503_until_it_reloads() {
    let (dir, entities, db) = fresh(BEFORE).await;
    let url = database_url(dir.path(), &db);
    let a = boot(dir, entities, db, true).await;
    let (_, row) = post(&a, "/products", json!({"title": "kept", "price": "1"})).await;
    // A second server on the same database, with its own copy of the files.
    let dir_b = tempfile::tempdir().unwrap();
    let entities_b = dir_b.path().join("entities");
    std::fs::create_dir_all(&entities_b).unwrap();
    std::fs::write(entities_b.join("products.yaml"), BEFORE).unwrap();
    let s = settings(dir_b.path(), &entities_b, &url, true);
    let b = start(dir_b, entities_b.clone(), s, None).await;
    assert_eq!(get(&b, "/products").await.0, 200);

    let renamed =
        "fields:\n  name: { type: string, renamed_from: title }\n  price: { type: string }\n";
    std::fs::write(a.entities.join("products.yaml"), renamed).unwrap();
    eventually("A serves the rename", Duration::from_secs(20), || async {
        get(&a, &format!("/products/{}", row["id"])).await.1["name"] == "kept"
    })
    .await;
    eventually(
        "B answers 503 for products",
        Duration::from_secs(20),
        || async { get(&b, "/products").await.0 == 503 },
    )
    .await;
    let (s, body) = post(&b, "/products", json!({"title": "stale"})).await;
    assert_eq!(
        (s, error_code(&body)),
        (503, "unavailable".to_string()),
        "{body}"
    );
    assert_eq!(
        get(&b, "/users/me").await.0,
        200,
        "other entities still served"
    );

    std::fs::write(entities_b.join("products.yaml"), renamed).unwrap();
    eventually(
        "B serves products again",
        Duration::from_secs(20),
        || async { get(&b, &format!("/products/{}", row["id"])).await.1["name"] == "kept" },
    )
    .await;
    b.stop().await;
    a.stop().await;
}

#[tokio::test]
async fn the_api_speaks_the_users_terms_and_suggests_the_field_meant() {
    let (dir, entities, db) = fresh(
        "fields:\n  name: { type: string, max_length: 5 }\n  price: { type: decimal }\n  released: { type: date }\n",
    )
    .await;
    let app = boot(dir, entities, db, false).await;
    let (s, b) = post(&app, "/products", json!({"nme": "x"})).await;
    assert_eq!(
        (s, error_code(&b)),
        (400, "unknown_field".to_string()),
        "{b}"
    );
    assert!(
        b["description"]
            .as_str()
            .unwrap()
            .contains("did you mean `name`?"),
        "{b}"
    );
    let (s, b) = post(&app, "/products", json!({"price": "x", "name": "toolong"})).await;
    assert_eq!(s, 400, "{b}");
    assert_eq!(
        b["fields"]["price"], "`price` must be a decimal number such as 12.50",
        "{b}"
    );
    assert_eq!(
        b["fields"]["name"], "`name` must be at most 5 characters",
        "{b}"
    );
    app.stop().await;
}

/// The index names of `table` in the database of `dir`.
async fn indexes(dir: &Path, db: &Option<PgDb>, table: &str) -> Vec<String> {
    let storage = entiserve::storage::open(&database_url(dir, db))
        .await
        .unwrap();
    let names = entiserve::storage::ddl::index_names(storage.as_ref(), table)
        .await
        .unwrap();
    storage.close().await;
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_true_creates_an_index_and_taking_it_away_drops_it() {
    let (dir, entities, db) = fresh(BEFORE).await;
    let app = boot(dir, entities, db, false).await;
    let (s, a) = post(&app, "/products", json!({"title": "t", "price": "1"})).await;
    assert_eq!(s, 200, "{a}");
    let (dir, entities, db) = app.stop_keeping().await;
    assert!(
        !indexes(dir.path(), &db, "products")
            .await
            .contains(&"products_title_idx".into())
    );

    let indexed = "fields:\n  title: { type: string, index: true }\n  price: { type: string }\n";
    std::fs::write(entities.join("products.yaml"), indexed).unwrap();
    let (code, out) = plan(dir.path(), &entities, &db);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("create an index on `products.title`"), "{out}");
    let app = boot(dir, entities, db, false).await;
    let (dir, entities, db) = app.stop_keeping().await;
    assert!(
        indexes(dir.path(), &db, "products")
            .await
            .contains(&"products_title_idx".into()),
        "the index exists after the start"
    );
    let (code, out) = plan(dir.path(), &entities, &db);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("nothing to change"), "{out}");

    // Renamed, the index follows the column.
    let renamed = "fields:\n  name: { type: string, index: true, renamed_from: title }\n  price: { type: string }\n";
    std::fs::write(entities.join("products.yaml"), renamed).unwrap();
    let app = boot(dir, entities, db, false).await;
    let (_, one) = get(&app, "/products?name=t").await;
    assert_eq!(one[0]["id"], a["id"]);
    let (dir, entities, db) = app.stop_keeping().await;
    let names = indexes(dir.path(), &db, "products").await;
    assert!(names.contains(&"products_name_idx".into()), "{names:?}");
    assert!(!names.contains(&"products_title_idx".into()), "{names:?}");

    let plain = "fields:\n  name: { type: string }\n  price: { type: string }\n";
    std::fs::write(entities.join("products.yaml"), plain).unwrap();
    let (code, out) = plan(dir.path(), &entities, &db);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("drop the index on `products.name`"), "{out}");
    let app = boot(dir, entities, db, false).await;
    let (dir, _entities, db) = app.stop_keeping().await;
    let names = indexes(dir.path(), &db, "products").await;
    assert!(!names.contains(&"products_name_idx".into()), "{names:?}");
}
