//! Record hooks in JavaScript (CONTRACT.md section 11, "Hooks in JavaScript"), against a real
//! server on the backend the suite runs on (SQLite, or PostgreSQL with `TEST_DATABASE_URL`).
//!
//! `tests/fixtures/hooks/items.js` defines the six hooks of `items`: `beforeCreate` trims the
//! name and derives a slug (and, for some names, refuses, loops, allocates without end, throws,
//! reads through `ctx` or reports what the sandbox holds), `beforeUpdate` derives the slug again
//! or refuses, `beforeDelete` refuses to delete a kept item, and the `after*` hooks write an
//! audit row and keep a counter in other entities through `ctx`. `chain.js` nests writes
//! through `ctx` deeper than hooks may go.
//!
//! Covered: each hook; single calls, batches (plain and all or nothing), background calls,
//! uploads (synchronous and in the background) and dry runs; refusal statuses; an `after*`
//! write rolled back with its item and with its all-or-nothing batch; the sandbox; an endless
//! loop and a memory bomb failing their item alone while the server answers; the nesting limit;
//! a reload, a broken file keeping the hooks in force, and `entiserve check` on a broken hook.

mod common;

use common::upload::{UPLOAD, form, rows};
use common::*;
use reqwest::Method;
use serde_json::{Value as Json, json};
use std::path::Path;
use std::time::{Duration, Instant};

/// The entity and hook files of these tests.
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/hooks");
const FILES: [&str; 6] = [
    "items.yaml",
    "items.js",
    "audit.yaml",
    "counters.yaml",
    "chain.yaml",
    "chain.js",
];

/// A server on the fixtures, its admin and one user (`uma`).
async fn start_app(dev: bool) -> TestApp {
    let dir = tempfile::tempdir().unwrap();
    let entities = dir.path().join("entities");
    std::fs::create_dir_all(&entities).unwrap();
    for f in FILES {
        std::fs::copy(Path::new(FIXTURES).join(f), entities.join(f)).unwrap();
    }
    let (mut s, db) = test_settings(dir.path(), &entities).await;
    s.dev = dev;
    let app = start(dir, entities, s, db).await;
    app.create_user("uma", "uma-password-1").await;
    app
}

/// `body` sent by `uma` with `m` to `path`: the status and the JSON answer.
async fn uma(app: &TestApp, m: Method, path: &str, body: Json) -> (u16, Json) {
    let r = app.as_user("uma", "uma-password-1", m, path);
    json(r.json(&body).send().await.unwrap()).await
}

/// Every object of `entity`, in id order, as the admin lists them.
async fn all(app: &TestApp, entity: &str) -> Vec<Json> {
    let path = format!("/{entity}?limit=1000&sort=id");
    let (s, page) = json(app.admin(Method::GET, &path).send().await.unwrap()).await;
    assert_eq!(s, 200, "{page}");
    page.as_array().cloned().unwrap_or_default()
}

/// The `n` of the items counter (0 when there is none).
async fn counter(app: &TestApp) -> i64 {
    let found = all(app, "counters").await;
    found.first().map_or(0, |c| c["n"].as_i64().unwrap())
}

/// The `op` of every audit row, in order.
async fn audit_ops(app: &TestApp) -> Vec<String> {
    all(app, "audit")
        .await
        .iter()
        .map(|a| a["action"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_hook_runs_on_single_calls() {
    let app = start_app(false).await;
    let (s, item) = uma(
        &app,
        Method::POST,
        "/items",
        json!({"name": "  Hello World  "}),
    )
    .await;
    assert_eq!(s, 200, "{item}");
    assert_eq!(item["name"], "Hello World");
    assert_eq!(item["slug"], "hello-world");
    let id = item["id"].as_i64().unwrap();
    let audit = all(&app, "audit").await;
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0]["object_id"], id);
    assert_eq!(audit[0]["action"], "create");
    assert_eq!(audit[0]["login"], "uma");
    assert_eq!(counter(&app).await, 1);

    let path = format!("/items/{id}");
    let (s, item) = uma(&app, Method::PUT, &path, json!({"name": "Second Name"})).await;
    assert_eq!(s, 200, "{item}");
    assert_eq!(item["slug"], "second-name");
    assert_eq!(
        audit_ops(&app).await,
        ["create", "update:Hello World>Second Name"]
    );

    let (s, item) = uma(&app, Method::DELETE, &path, json!({})).await;
    assert_eq!(s, 200, "{item}");
    assert_eq!(item["name"], "Second Name");
    assert_eq!(
        audit_ops(&app).await,
        ["create", "update:Hello World>Second Name", "delete"]
    );
    assert_eq!(counter(&app).await, 0);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_carry_their_status_and_apply_nothing() {
    let app = start_app(false).await;
    let cases = [
        (json!({"name": "refuse"}), 400, "no refuse, please"),
        (json!({"name": "teapot"}), 418, "I am a teapot"),
        (
            json!({"name": "cheap", "price": 1, "cost": 5}),
            422,
            "the price is below the cost",
        ),
    ];
    for (body, status, message) in cases {
        let (s, err) = uma(&app, Method::POST, "/items", body).await;
        assert_eq!(s, status, "{err}");
        assert_eq!(err, json!({"error": "refused", "description": message}));
    }
    assert!(all(&app, "items").await.is_empty());
    assert!(all(&app, "audit").await.is_empty());

    let kept = app
        .create("items", json!({"name": "kept", "note": "keep"}))
        .await;
    let path = format!("/items/{}", kept["id"]);
    let (s, err) = uma(&app, Method::DELETE, &path, json!({})).await;
    assert_eq!((s, err["error"].as_str()), (403, Some("refused")), "{err}");
    assert_eq!(err["description"], "this item is kept");
    let (s, err) = uma(&app, Method::PUT, &path, json!({"note": "frozen"})).await;
    assert_eq!(s, 409, "{err}");
    assert_eq!(err["description"], "frozen by uma");
    let (s, now) = json(app.admin(Method::GET, &path).send().await.unwrap()).await;
    assert_eq!((s, now["note"].as_str()), (200, Some("keep")), "{now}");
    // The `after*` hooks of the refused calls did not run.
    assert_eq!(audit_ops(&app).await, ["create"]);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_fail_their_item_alone_while_the_server_answers() {
    let app = start_app(false).await;
    let ok = app.create("items", json!({"name": "first"})).await;
    for (name, expected) in [
        ("loop", "items.js: the hook ran longer than 100 ms"),
        ("bomb", "items.js: the hook used more than 64 MiB"),
        ("throw", "items.js:19: TypeError"),
    ] {
        let slow = {
            let client = reqwest::Client::new();
            let url = app.url("/items");
            tokio::spawn(async move {
                let r = client
                    .post(url)
                    .basic_auth("uma", Some("uma-password-1"))
                    .json(&json!({"name": name}))
                    .send()
                    .await
                    .unwrap();
                json(r).await
            })
        };
        // Other requests are answered while the hook runs.
        let path = format!("/items/{}", ok["id"]);
        let started = Instant::now();
        let (s, got) = json(app.admin(Method::GET, &path).send().await.unwrap()).await;
        assert_eq!((s, got["name"].as_str()), (200, Some("first")), "{got}");
        assert!(started.elapsed() < Duration::from_secs(2));
        let (s, err) = slow.await.unwrap();
        assert_eq!(s, 500, "{name}: {err}");
        assert_eq!(err["error"], "hook_failed", "{err}");
        let description = err["description"].as_str().unwrap();
        assert!(description.starts_with(expected), "{name}: {description}");
    }
    // The server goes on, hooks included.
    let (s, after) = uma(&app, Method::POST, "/items", json!({"name": "After All"})).await;
    assert_eq!(
        (s, after["slug"].as_str()),
        (200, Some("after-all")),
        "{after}"
    );
    assert_eq!(all(&app, "items").await.len(), 2);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sandbox_has_no_modules_network_process_or_std() {
    let app = start_app(false).await;
    let (s, item) = uma(&app, Method::POST, "/items", json!({"name": "sandbox"})).await;
    assert_eq!(s, 200, "{item}");
    assert_eq!(
        item["note"],
        "undefined,undefined,undefined,undefined,undefined"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctx_reads_and_refuses_writes_before_the_change() {
    let app = start_app(false).await;
    let first = app.create("items", json!({"name": "Target"})).await;
    let id = first["id"].as_i64().unwrap();
    let (s, item) = uma(
        &app,
        Method::POST,
        "/items",
        json!({"name": "peek", "price": id}),
    )
    .await;
    assert_eq!((s, item["note"].as_str()), (200, Some("Target")), "{item}");
    let body = json!({"name": "peek", "price": 999_999});
    let (s, item) = uma(&app, Method::POST, "/items", body).await;
    assert_eq!((s, item["note"].as_str()), (200, Some("none")), "{item}");
    let (s, err) = uma(
        &app,
        Method::POST,
        "/items",
        json!({"name": "write-before"}),
    )
    .await;
    assert_eq!(
        (s, err["error"].as_str()),
        (500, Some("hook_failed")),
        "{err}"
    );
    assert!(
        err["description"]
            .as_str()
            .unwrap()
            .contains("ctx.create is for after* hooks"),
        "{err}"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_after_hook_failure_rolls_back_its_item_and_its_writes() {
    let app = start_app(false).await;
    let items = json!([
        {"name": "One"},
        {"name": "Two", "note": "fail-after"},
        {"name": "refuse"},
        {"name": "Three"}
    ]);
    let (s, out) = uma(&app, Method::POST, "/items?bgrs=0", items.clone()).await;
    assert_eq!(s, 200, "{out}");
    let (statuses, bodies) = results(&out);
    assert_eq!(statuses, [200, 500, 400, 200], "{out}");
    assert_eq!(bodies[0]["slug"], "one", "{out}");
    assert_eq!(bodies[1]["error"], "hook_failed", "{out}");
    assert_eq!(bodies[2]["error"], "refused", "{out}");
    let names: Vec<Json> = all(&app, "items")
        .await
        .iter()
        .map(|i| i["name"].clone())
        .collect();
    assert_eq!(names, [json!("One"), json!("Three")]);
    // The failed item's audit row and counter step went with it.
    assert_eq!(audit_ops(&app).await, ["create", "create"]);
    assert_eq!(counter(&app).await, 2);

    // All or nothing: one failing item takes every item's hook writes with it.
    let (s, out) = uma(&app, Method::POST, "/items?bgrs=0&atomic=1", items).await;
    assert_eq!(s, 200, "{out}");
    let (statuses, bodies) = results(&out);
    assert_eq!(statuses, [409, 500, 400, 409], "{out}");
    assert_eq!(bodies[0]["error"], "not_applied", "{out}");
    assert_eq!(all(&app, "items").await.len(), 2);
    assert_eq!(audit_ops(&app).await.len(), 2);
    assert_eq!(counter(&app).await, 2);
    app.stop().await;
}

/// The statuses and parsed bodies of a batch's results.
fn results(out: &Json) -> (Vec<u64>, Vec<Json>) {
    out.as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let body = serde_json::from_str(o["body"].as_str().unwrap()).unwrap();
            (o["status"].as_u64().unwrap(), body)
        })
        .unzip()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_runs_run_the_hooks_and_keep_nothing() {
    let app = start_app(false).await;
    let (s, item) = uma(
        &app,
        Method::POST,
        "/items?dry_run=1",
        json!({"name": "Dry Run"}),
    )
    .await;
    assert_eq!(s, 200, "{item}");
    assert_eq!(item["slug"], "dry-run", "{item}");
    let (s, err) = uma(
        &app,
        Method::POST,
        "/items?dry_run=1",
        json!({"name": "teapot"}),
    )
    .await;
    assert_eq!(s, 418, "{err}");
    let f = form(
        "items",
        "dry.csv",
        b"op;name\nc;Dry Row\n".to_vec(),
        &[("dry_run", "1")],
    );
    let r = app
        .admin(Method::POST, UPLOAD)
        .multipart(f)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let result = rows(&r.text().await.unwrap());
    assert_eq!(result.len(), 2, "{result:?}");
    assert!(all(&app, "items").await.is_empty());
    assert!(all(&app, "audit").await.is_empty());
    assert_eq!(counter(&app).await, 0);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_calls_and_uploads_run_the_hooks() {
    let app = start_app(false).await;
    let (s, queued) = uma(
        &app,
        Method::POST,
        "/items?bgrs=1",
        json!({"name": "Queued Call"}),
    )
    .await;
    assert_eq!(s, 202, "{queued}");
    let rid = queued["request"].as_str().unwrap().to_string();
    app.wait_finished(&rid).await;
    let mut csv = String::from("op;name;price;cost\n");
    for i in 0..700 {
        csv.push_str(&format!("c; Row {i} ;;\n"));
    }
    csv.push_str("c;refuse;;\nc;Cheap;1;5\n");
    for bg in [false, true] {
        let fields: &[(&str, &str)] = if bg { &[("bgrs", "1")] } else { &[] };
        let f = form("items", "rows.csv", csv.as_bytes().to_vec(), fields);
        let r = app.as_user("uma", "uma-password-1", Method::POST, UPLOAD);
        let r = r.multipart(f).send().await.unwrap();
        let text = if bg {
            let (s, body) = json(r).await;
            assert_eq!(s, 202, "{body}");
            let rid = body["request"].as_str().unwrap().to_string();
            app.wait_finished(&rid).await;
            app.result_text(&rid).await
        } else {
            assert_eq!(r.status().as_u16(), 200);
            r.text().await.unwrap()
        };
        let result = rows(&text);
        assert_eq!(result.len(), 703, "header and 702 rows");
        let res = result[0].iter().position(|c| c == "res").unwrap();
        assert!(
            result[701][res].contains("no refuse, please"),
            "{:?}",
            result[701]
        );
        assert!(
            result[702][res].contains("the price is below the cost"),
            "{:?}",
            result[702]
        );
    }
    assert_eq!(
        count(&app, "items").await,
        1401,
        "one call and 700 rows twice"
    );
    // The first page: the call's item, then the rows in order.
    let items = all(&app, "items").await;
    assert_eq!(items[0]["slug"], "queued-call");
    assert!(
        items[1..]
            .iter()
            .all(|i| i["slug"].as_str().unwrap().starts_with("row-"))
    );
    assert_eq!(items[1]["name"], "Row 0", "trimmed: {}", items[1]);
    assert_eq!(count(&app, "audit").await, 1401);
    assert_eq!(counter(&app).await, 1401);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_through_ctx_nest_at_most_four_levels() {
    let app = start_app(false).await;
    let (s, first) = uma(&app, Method::POST, "/chain", json!({"level": 7})).await;
    assert_eq!(s, 200, "{first}");
    let levels: Vec<i64> = all(&app, "chain")
        .await
        .iter()
        .map(|c| c["level"].as_i64().unwrap())
        .collect();
    assert_eq!(levels, [7, 8, 9, 10]);
    let (s, err) = uma(&app, Method::POST, "/chain", json!({"level": 6})).await;
    assert_eq!(
        (s, err["error"].as_str()),
        (500, Some("hook_failed")),
        "{err}"
    );
    assert!(
        err["description"].as_str().unwrap().contains("4 levels"),
        "{err}"
    );
    assert_eq!(
        all(&app, "chain").await.len(),
        4,
        "nothing of the deeper chain stays"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_reload_and_a_broken_file_keeps_the_hooks_in_force() {
    let app = start_app(true).await;
    let file = app.entities.join("items.js");
    let source = std::fs::read_to_string(&file).unwrap();
    let changed = source.replace(
        "record.slug = slugify(record.name);\n  return record;",
        "record.slug = \"v2-\" + slugify(record.name);\n  return record;",
    );
    assert_ne!(changed, source);
    std::fs::write(&file, changed).unwrap();
    let mut n = 0;
    eventually("the changed hook runs", Duration::from_secs(20), || {
        n += 1;
        let app = &app;
        async move {
            let body = json!({"name": format!("Reloaded {n}")});
            let (s, item) = uma(app, Method::POST, "/items", body).await;
            s == 200 && item["slug"].as_str().unwrap().starts_with("v2-")
        }
    })
    .await;
    std::fs::write(
        &file,
        "function beforeCreate(record) {\n  return record.\n}\n",
    )
    .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (s, item) = uma(&app, Method::POST, "/items", json!({"name": "Still Here"})).await;
    assert_eq!(
        (s, item["slug"].as_str()),
        (200, Some("v2-still-here")),
        "{item}"
    );
    app.stop().await;
}

#[test]
fn check_compiles_hooks_and_names_the_broken_line() {
    let dir = tempfile::tempdir().unwrap();
    for f in FILES {
        std::fs::copy(Path::new(FIXTURES).join(f), dir.path().join(f)).unwrap();
    }
    let bin = env!("CARGO_BIN_EXE_entiserve");
    let ok = std::process::Command::new(bin)
        .args(["check", "--entities"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stdout)
    );
    std::fs::write(
        dir.path().join("chain.js"),
        "// one\nfunction afterCreate(record, ctx) {\n  ctx.create(\"chain\", {level: }\n}\n",
    )
    .unwrap();
    let broken = std::process::Command::new(bin)
        .args(["check", "--entities"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(broken.status.code(), Some(1));
    let out = String::from_utf8_lossy(&broken.stdout);
    let line = out
        .lines()
        .find(|l| l.contains("chain.js"))
        .unwrap_or_default();
    assert!(line.contains("chain.js:3: "), "{out}");
    assert!(line.contains("SyntaxError"), "{out}");
}
