//! Plugins: a plugin registered by the program (the `slug` example) runs on every path a
//! change can take (REST call, batch item, CSV row), and entity files naming an unknown
//! plugin are refused.

mod common;

#[path = "../examples/custom_plugin/slug.rs"]
mod slug;

use common::*;
use reqwest::Method;
use reqwest::multipart::{Form, Part};
use serde_json::json;
use std::sync::Arc;

const ARTICLES: &str = "examples/custom_plugin/entities/articles.yaml";

#[tokio::test]
async fn a_registered_plugin_runs_for_rest_batch_and_csv_alike() {
    let plugins = entiserve::plugins::Registry::builtin().with(Arc::new(slug::Slug));
    let app = spawn_with_plugins(plugins, |s| {
        std::fs::copy(ARTICLES, s.entities_dir.join("articles.yaml")).unwrap();
    })
    .await;
    let (s, a) = json(
        app.admin(Method::POST, "/articles")
            .json(&json!({"title": "Hello, World!"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200, "{a}");
    assert_eq!(a["slug"], "hello-world");
    // A slug given explicitly is kept.
    let (_, b) = json(
        app.admin(Method::POST, "/articles")
            .json(&json!({"title": "Other", "slug": "mine"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(b["slug"], "mine");
    let (s, items) = json(
        app.admin(Method::POST, "/v2.5/articles?bgrs=0")
            .json(&json!([{"title": "From A Batch"}]))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200);
    let body: serde_json::Value = serde_json::from_str(items[0]["body"].as_str().unwrap()).unwrap();
    assert_eq!(body["slug"], "from-a-batch");
    let form = Form::new().text("entity", "articles").part(
        "csvfile",
        Part::bytes(b"op;title\nc;Row Of A CSV\n".to_vec()).file_name("a.csv"),
    );
    let r = app
        .admin(Method::POST, "/tools/uploader.ex.php")
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let (_, list) = json(
        app.admin(Method::GET, "/articles?title=Row%20Of%20A%20CSV")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(list[0]["slug"], "row-of-a-csv");
    app.stop().await;
}

#[test]
fn an_unknown_plugin_name_is_a_compile_error_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("things.yaml"),
        "name: things\nfields:\n  name: { type: string }\nplugins:\n  - no_such_plugin\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_entiserve"))
        .args(["check", "--entities"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("things.yaml:4: unknown plugin `no_such_plugin`"),
        "{text}"
    );
}
