//! Uploads through the uploader's form, as a browser or client sends them.

use super::{TestApp, json};
use reqwest::Method;
use reqwest::multipart::{Form, Part};
use serde_json::Value as Json;
use std::time::Duration;

/// The uploader's route.
pub const UPLOAD: &str = "/tools/uploader.ex.php";

/// The uploader form: `entity`, the file as `csvfile` named `name`, and more fields.
pub fn form(entity: &str, name: &str, bytes: Vec<u8>, fields: &[(&str, &str)]) -> Form {
    let mut f = Form::new()
        .text("entity", entity.to_string())
        .part("csvfile", Part::bytes(bytes).file_name(name.to_string()));
    for (k, v) in fields {
        f = f.text(k.to_string(), v.to_string());
    }
    f
}

/// Posts a form as the admin: the response.
pub async fn upload_response(app: &TestApp, f: Form) -> reqwest::Response {
    app.admin(Method::POST, UPLOAD)
        .multipart(f)
        .send()
        .await
        .unwrap()
}

/// Posts a form as the admin: the status and the body.
pub async fn upload(app: &TestApp, f: Form) -> (u16, String) {
    let r = upload_response(app, f).await;
    let s = r.status().as_u16();
    (s, r.text().await.unwrap())
}

/// The rows of a `;`-separated result file (header first).
pub fn rows(text: &str) -> Vec<Vec<String>> {
    rows_split_by(text, b';')
}

/// The rows of a result file whose fields `delimiter` separates (header first).
pub fn rows_split_by(text: &str, delimiter: u8) -> Vec<Vec<String>> {
    csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .has_headers(false)
        .from_reader(text.as_bytes())
        .records()
        .map(|r| r.unwrap().iter().map(str::to_string).collect())
        .collect()
}

/// A synchronous upload's result rows (header first).
pub async fn sync_rows(
    app: &TestApp,
    entity: &str,
    bytes: &[u8],
    fields: &[(&str, &str)],
) -> Vec<Vec<String>> {
    let (s, text) = upload(app, form(entity, "f.csv", bytes.to_vec(), fields)).await;
    assert_eq!(s, 200, "{text}");
    rows(&text)
}

/// Starts a background upload: its request id.
pub async fn start_background(
    app: &TestApp,
    entity: &str,
    bytes: &[u8],
    fields: &[(&str, &str)],
) -> String {
    start_background_named(app, entity, "f.csv", bytes.to_vec(), fields).await
}

/// Starts a background upload of the file `name`: its request id.
pub async fn start_background_named(
    app: &TestApp,
    entity: &str,
    name: &str,
    bytes: Vec<u8>,
    fields: &[(&str, &str)],
) -> String {
    let mut all = vec![("bgrs", "1")];
    all.extend_from_slice(fields);
    let (s, text) = upload(app, form(entity, name, bytes, &all)).await;
    assert_eq!(s, 202, "{text}");
    let b = serde_json::from_str::<Json>(&text).unwrap();
    b["request"].as_str().unwrap().to_string()
}

/// A background upload, ended: its request id, record and result rows.
pub async fn background_rows(
    app: &TestApp,
    entity: &str,
    bytes: &[u8],
    fields: &[(&str, &str)],
) -> (String, Json, Vec<Vec<String>>) {
    let rid = start_background(app, entity, bytes, fields).await;
    let rec = app.wait_ended(&rid, Duration::from_secs(60)).await;
    let result = rows(&app.result_text(&rid).await);
    (rid, rec, result)
}

/// A JSON reply to a form post, for checks of refusals.
pub async fn upload_json(app: &TestApp, f: Form) -> (u16, Json) {
    json(upload_response(app, f).await).await
}
