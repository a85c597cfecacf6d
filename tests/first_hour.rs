//! The first hour of a new user, each rough edge as it was met, against a real server on the
//! backend the suite runs on: files separated by tabs or bars, misspelt columns and entities,
//! a Latin-1 file sent as UTF-8, creates without a required column, decimals sent as strings,
//! a second undo, `GET /` from a browser and from a client, plain logs in a file, and YAML
//! syntax errors on the line of the mistake.

mod common;

use common::upload::{UPLOAD, background_rows, form, upload_json};
use common::*;
use reqwest::Method;
use serde_json::json;
use std::time::Duration;

const PRODUCTS: &str = "access: { read: user, write: user }
fields:
  sku:   { type: string, required: true, unique: true }
  name:  { type: string, required: true }
  price: { type: decimal }
";

async fn spawn_products() -> TestApp {
    spawn_with(|s| std::fs::write(s.entities_dir.join("products.yaml"), PRODUCTS).unwrap()).await
}

/// A synchronous upload into products: the status and the body as text.
async fn upload_products(app: &TestApp, bytes: Vec<u8>, fields: &[(&str, &str)]) -> (u16, String) {
    let r = app
        .admin(Method::POST, UPLOAD)
        .multipart(form("products", "p.csv", bytes, fields))
        .send()
        .await
        .unwrap();
    let s = r.status().as_u16();
    (s, r.text().await.unwrap())
}

#[tokio::test]
async fn tab_and_bar_separated_files_are_read() {
    let app = spawn_products().await;
    for (sep, tag) in [('\t', "tab"), ('|', "bar")] {
        let csv = format!(
            "op{sep}id{sep}sku{sep}name\nc{sep}{sep}{tag}-1{sep}one\nc{sep}{sep}{tag}-2{sep}two\n"
        );
        let (s, body) = upload_products(&app, csv.into_bytes(), &[]).await;
        assert_eq!(s, 200, "{tag}: {body}");
        let lines: Vec<&str> = body.lines().collect();
        assert_eq!(lines.len(), 3, "{body}");
        assert!(
            lines[0].starts_with(&format!("res{sep}")),
            "the result keeps the separator: {body}"
        );
        assert!(lines[1..].iter().all(|l| l.starts_with("OK")), "{body}");
    }
    assert_eq!(count(&app, "products").await, 4);
    app.stop().await;
}

#[tokio::test]
async fn a_misspelt_column_or_entity_is_refused_with_the_nearest_name() {
    let app = spawn_products().await;
    let d = refused(&app, "products", b"op;id;sku;nmae\nc;;a;A\n").await;
    assert!(d.contains("`nmae` is not a field of products"), "{d}");
    assert!(d.contains("did you mean `name`?"), "{d}");
    let d = refused(&app, "prodcts", b"op;id;sku;name\nc;;a;A\n").await;
    assert!(d.contains("`prodcts`"), "{d}");
    assert!(d.contains("did you mean `products`?"), "{d}");
    // A separator the uploader does not read leaves one column: it says which ones it reads.
    let d = refused(&app, "products", b"op:id:sku:name\nc::a:A\n").await;
    assert!(d.contains("`,`, `;`, a tab or `|`"), "{d}");
    assert_eq!(count(&app, "products").await, 0);
    app.stop().await;
}

/// Uploads `csv` into `entity`, expecting the whole file refused: the description.
async fn refused(app: &TestApp, entity: &str, csv: &[u8]) -> String {
    let (s, b) = upload_json(app, form(entity, "p.csv", csv.to_vec(), &[])).await;
    assert_eq!(s, 400, "{b}");
    b["description"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_latin1_file_sent_as_utf8_names_the_editors_line_and_the_encoding_option() {
    let app = spawn_products().await;
    // "Café" in Latin-1 on the second line as an editor counts (the header is the first).
    let mut bytes = b"op;id;sku;name\nc;;a;Caf".to_vec();
    bytes.push(0xE9);
    bytes.extend_from_slice(b"\n");
    let d = refused(&app, "products", &bytes).await;
    assert!(d.contains("line 2 of the file"), "{d}");
    assert!(d.contains("`encoding`"), "{d}");
    assert_eq!(count(&app, "products").await, 0);
    // Named, it is read.
    let (s, b) = upload_products(&app, bytes, &[("encoding", "ISO-8859-1")]).await;
    assert_eq!(s, 200, "{b}");
    let (_, got) = json(
        app.admin(Method::GET, "/products?sku=a")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(got[0]["name"], "Café", "{got}");
    app.stop().await;
}

#[tokio::test]
async fn creates_without_a_required_column_are_refused_before_anything_is_applied() {
    let app = spawn_products().await;
    let mut csv = String::from("op;id;sku\n");
    for i in 0..500 {
        csv.push_str(&format!("c;;sku-{i}\n"));
    }
    let (s, b) = upload_json(&app, form("products", "p.csv", csv.into_bytes(), &[])).await;
    assert_eq!(s, 400, "{b}");
    let d = b["description"].as_str().unwrap();
    assert!(d.contains("`name`"), "{d}");
    assert!(d.contains("required"), "{d}");
    assert_eq!(count(&app, "products").await, 0);
    // The same file in the background: refused the same way, no request made.
    let (s, b) = upload_json(
        &app,
        form(
            "products",
            "p.csv",
            b"op;id;sku\nc;;x\n".to_vec(),
            &[("bgrs", "1")],
        ),
    )
    .await;
    assert_eq!(s, 400, "{b}");
    // Updates need no such column.
    let made = app
        .create("products", json!({"sku": "kept", "name": "before"}))
        .await;
    let csv = format!("op;id;sku\nu;{};renamed\n", made["id"]);
    let (s, b) = upload_products(&app, csv.into_bytes(), &[]).await;
    assert_eq!(s, 200, "{b}");
    assert!(b.contains("OK;u;"), "{b}");
    app.stop().await;
}

#[tokio::test]
async fn a_decimal_sent_as_a_string_is_stored_exactly() {
    let app = spawn_products().await;
    let body = r#"{"sku": "s1", "name": "one", "price": "12.50"}"#;
    let (s, b) = send_raw(&app, Method::POST, "/products", body).await;
    assert_eq!(s, 200, "{b}");
    let path = format!("/products/{}", b["id"]);
    let text = get_text(&app, &path).await;
    assert!(text.contains("\"price\":12.5"), "{text}");
    let body = r#"{"price": "79228162514264337593543950335"}"#;
    let (s, b2) = send_raw(&app, Method::PUT, &path, body).await;
    assert_eq!(s, 200, "{b2}");
    let text = get_text(&app, &path).await;
    assert!(
        text.contains("\"price\":79228162514264337593543950335"),
        "{text}"
    );
    // Text that is no number is refused in a person's words.
    for bad in [r#""twelve""#, r#""12,50""#, "true"] {
        let (s, e) = send_raw(&app, Method::PUT, &path, &format!(r#"{{"price": {bad}}}"#)).await;
        assert_eq!(s, 400, "{bad}: {e}");
        assert!(
            e["description"]
                .as_str()
                .unwrap()
                .contains("`price` must be a decimal number such as 12.50"),
            "{bad}: {e}"
        );
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_undo_is_refused_as_already_undone() {
    let app = spawn_products().await;
    let (rid, _, _) = background_rows(&app, "products", b"op;id;sku;name\nc;;u1;one\n", &[]).await;
    let (s, b) = json(
        app.admin(Method::POST, &format!("/bgrs/{rid}/undo"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 202, "{b}");
    let undo = b["request"].as_str().unwrap().to_string();
    app.wait_ended(&undo, Duration::from_secs(60)).await;
    assert_eq!(count(&app, "products").await, 0);
    let (s, b) = json(
        app.admin(Method::POST, &format!("/bgrs/{rid}/undo"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 409, "{b}");
    assert_eq!(error_code(&b), "already_undone");
    assert!(b["description"].as_str().unwrap().contains(&undo), "{b}");
    // The undo itself can still be undone: the product comes back.
    let (s, b) = json(
        app.admin(Method::POST, &format!("/bgrs/{undo}/undo"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 202, "{b}");
    app.wait_ended(b["request"].as_str().unwrap(), Duration::from_secs(60))
        .await;
    assert_eq!(count(&app, "products").await, 1);
    app.stop().await;
}

#[tokio::test]
async fn the_root_sends_a_browser_to_the_console_and_gives_clients_an_index() {
    let app = spawn_app().await;
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let r = no_redirects
        .get(app.url("/"))
        .header(
            "accept",
            "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    let to = r.headers()["location"].to_str().unwrap().to_string();
    assert_eq!(to, "/tools/data");
    let page = app.client.get(app.url(&to)).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let (s, b) = json(no_redirects.get(app.url("/")).send().await.unwrap()).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["api"]["document"], "/openapi.json", "{b}");
    assert_eq!(b["api"]["reference"], "/docs", "{b}");
    assert_eq!(b["console"]["data"], "/tools/data");
    // Every entry point it names answers.
    for (group, key) in [
        ("api", "document"),
        ("api", "reference"),
        ("health", "live"),
    ] {
        let path = b[group][key].as_str().unwrap();
        let r = app.client.get(app.url(path)).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
    }
    app.stop().await;
}

#[test]
fn logs_written_to_a_pipe_carry_no_colour_codes() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    // Standard error is a pipe, as for a log file or a collector; NO_COLOR is not set, so only
    // the missing terminal keeps colours out.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_entiserve"))
        .args(["serve", "--bind", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .arg("--entities")
        .arg(shipped_entities())
        .env("ENTISERVE_ADMIN_PASSWORD", "plain-logs-password")
        .env("RUST_LOG", "info")
        .env_remove("NO_COLOR")
        .env_remove("DATABASE_URL")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = Vec::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let done = line.starts_with("entiserve listening on ");
            lines.push(line);
            if done {
                break;
            }
        }
        let _ = tx.send(lines);
    });
    let lines = rx.recv_timeout(Duration::from_secs(60));
    let _ = child.kill();
    let _ = child.wait();
    let lines = lines.expect("the server started");
    assert!(
        lines.iter().filter(|l| l.contains(" INFO ")).count() >= 1,
        "{lines:?}"
    );
    let coloured: Vec<&String> = lines.iter().filter(|l| l.contains('\u{1b}')).collect();
    assert!(coloured.is_empty(), "{coloured:?}");
}

#[test]
fn yaml_syntax_errors_are_reported_on_the_line_of_the_mistake() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("products.yaml"),
        "fields:\n  sku: {type: string\n  name: string\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("orders.yaml"),
        "fields:\n  code string\n  total: decimal\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_entiserve"))
        .args(["check", "--entities"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        printed.contains("products.yaml:2: invalid YAML"),
        "{printed}"
    );
    assert!(printed.contains("orders.yaml:2: invalid YAML"), "{printed}");
    assert!(printed.contains("`code string` has no `:`"), "{printed}");
}
