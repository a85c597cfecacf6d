//! The CSV uploader (CONTRACT.md section 7) against a real server.

mod common;

use common::*;
use reqwest::Method;
use reqwest::multipart::{Form, Part};
use serde_json::{Value as Json, json};
use std::time::{Duration, Instant};

const UPLOAD: &str = "/tools/uploader.ex.php";

fn form(entity: &str, name: &str, bytes: Vec<u8>) -> Form {
    Form::new()
        .text("entity", entity.to_string())
        .part("csvfile", Part::bytes(bytes).file_name(name.to_string()))
}

/// A synchronous upload's result CSV.
async fn sync_upload(
    app: &TestApp,
    entity: &str,
    name: &str,
    bytes: Vec<u8>,
) -> (reqwest::header::HeaderMap, Vec<u8>) {
    let r = upload::upload_response(app, form(entity, name, bytes)).await;
    assert_eq!(r.status(), 200);
    let h = r.headers().clone();
    (h, r.bytes().await.unwrap().to_vec())
}

fn rows(text: &str, sep: u8) -> Vec<Vec<String>> {
    csv::ReaderBuilder::new()
        .delimiter(sep)
        .has_headers(false)
        .from_reader(text.as_bytes())
        .records()
        .map(|r| r.unwrap().iter().map(str::to_string).collect())
        .collect()
}

#[tokio::test]
async fn the_semicolon_example_and_reupload() {
    let app = spawn_app().await;
    let csv = "res;op;id;name;type;is_active;description\r\n;c;;Spring;1;1;\"First; with a separator\"\r\n;c;;Summer;2;0;\"Two\nlines\"\r\n;;;Skipped;1;1;\r\n;c;;Autumn;x;1;\r\n";
    let (h, body) = sync_upload(&app, "campaigns", "campaigns.csv", csv.as_bytes().to_vec()).await;
    assert!(h["content-type"].to_str().unwrap().starts_with("text/csv"));
    assert_eq!(
        h["content-disposition"],
        "attachment; filename=\"campaigns.csvres.csv\""
    );
    let text = String::from_utf8(body).unwrap();
    let r = rows(&text, b';');
    assert_eq!(
        r[0],
        [
            "res",
            "op",
            "id",
            "name",
            "type",
            "is_active",
            "description"
        ]
    );
    assert_eq!(r[1][0], "OK");
    assert_eq!(r[2][0], "OK");
    assert_eq!(r[2][6], "Two\nlines");
    assert_eq!(r[3][0], "", "an empty op is ignored");
    assert!(r[4][0].contains("type"), "{:?}", r[4]);
    let id1: i64 = r[1][2].parse().unwrap();
    let (s, c) = json(
        app.admin(Method::GET, &format!("/campaigns/{id1}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(c["description"], "First; with a separator");
    assert_eq!(count(&app, "campaigns").await, 2);

    // The result file goes back as it is, with some ops changed.
    let mut again = text.replacen(";c;", ";u;", 1);
    again = again.replace(&format!("OK;c;{}", r[2][2]), &format!("OK;d;{}", r[2][2]));
    let again = again.replace("Spring", "Spring II");
    let (_, body) = sync_upload(&app, "campaigns", "again.csv", again.into_bytes()).await;
    let r2 = rows(&String::from_utf8(body).unwrap(), b';');
    assert_eq!(
        (r2[1][0].as_str(), r2[2][0].as_str()),
        ("OK", "OK"),
        "{r2:?}"
    );
    assert_eq!(r2[1][2], r[1][2], "same id");
    let (_, c) = json(
        app.admin(Method::GET, &format!("/campaigns/{id1}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(c["name"], "Spring II");
    assert_eq!(
        count(&app, "campaigns").await,
        1,
        "row 2 deleted, row 4 failed again"
    );
    app.stop().await;
}

#[tokio::test]
async fn comma_files_without_res_or_id_get_both() {
    let app = spawn_app().await;
    let csv = "op,name,description\nc,\"Comma, Inc\",\"He said \"\"hi\"\"\"\nc,,no name\n";
    let (_, body) = sync_upload(&app, "campaigns", "c.csv", csv.as_bytes().to_vec()).await;
    let r = rows(&String::from_utf8(body).unwrap(), b',');
    assert_eq!(r[0], ["res", "id", "op", "name", "description"]);
    assert_eq!(r[1][0], "OK");
    assert!(r[1][1].parse::<i64>().is_ok());
    assert_eq!(r[1][4], "He said \"hi\"");
    assert!(r[2][0].contains("name"), "{:?}", r[2]);
    assert_eq!(r[2][1], "");
    app.stop().await;
}

#[tokio::test]
async fn every_row_error() {
    let app = spawn_app().await;
    let c = app.create("campaigns", json!({"name": "existing"})).await;
    let cid = c["id"].as_i64().unwrap();
    let csv = format!(
        "op,id,name,campaign_id\nc,5,x,{cid}\nu,,x,{cid}\nd,,,\nz,,x,{cid}\nc,,x,999999\nu,888888,x,\nd,777777,,\nu,abc,x,\nc,,,{cid}\nc,,=cmd(),{cid}\n"
    );
    let (_, body) = sync_upload(&app, "markers", "m.csv", csv.into_bytes()).await;
    let r = rows(&String::from_utf8(body).unwrap(), b',');
    let res: Vec<&str> = r[1..].iter().map(|x| x[0].as_str()).collect();
    assert!(res[0].contains("must be empty"), "{res:?}");
    // markers have a key: `u` and `d` without an id name their object by it.
    assert!(res[1].contains("no markers object has"), "{res:?}");
    assert!(
        res[2].contains("is needed to find the object by its key"),
        "{res:?}"
    );
    assert!(res[3].contains("unknown op"), "{res:?}");
    assert!(res[4].contains("campaign_id"), "{res:?}");
    assert!(res[5].contains("does not exist"), "{res:?}");
    assert!(res[6].contains("does not exist"), "{res:?}");
    assert!(res[7].contains("integer"), "{res:?}");
    assert!(res[8].contains("name"), "{res:?}");
    assert_eq!(
        res[9], "OK",
        "a value starting with = is data, stored as given"
    );
    for e in &res {
        assert!(!e.starts_with(['=', '+', '-', '@']), "{e}");
    }
    assert_eq!(count(&app, "markers").await, 1);
    app.stop().await;
}

/// Rows that fail in the middle of a chunk of many (a taken key and a missing reference among
/// creates, a taken key among updates) get their errors, and every other row of the chunk and
/// of the chunks around it runs.
#[tokio::test]
async fn a_failing_row_inside_a_chunk_leaves_the_others() {
    let app = spawn_app().await;
    let c = app.create("campaigns", json!({"name": "chunks"})).await;
    let cid = c["id"].as_i64().unwrap();
    // Three chunks of creates; in the second, row 1500 takes the key of row 10 (committed in
    // the first chunk) and row 1700 names a campaign that does not exist.
    let mut csv = String::from("op,id,name,campaign_id\n");
    for i in 1..=2500 {
        match i {
            1500 => csv.push_str(&format!("c,,m10,{cid}\n")),
            1700 => csv.push_str("c,,m1700,999999\n"),
            _ => csv.push_str(&format!("c,,m{i},{cid}\n")),
        }
    }
    let (_, body) = sync_upload(&app, "markers", "c.csv", csv.into_bytes()).await;
    let r = rows(&String::from_utf8(body).unwrap(), b',');
    assert_eq!(r.len(), 2501);
    let at = r[0].iter().position(|c| c == "id").expect("an id column");
    let mut ids = std::collections::HashMap::new();
    for (n, row) in r[1..].iter().enumerate() {
        let line = n + 1;
        match line {
            1500 => {
                assert!(row[0].contains("already has this key"), "{line}: {row:?}");
                assert_eq!(row[at], "", "{line}");
            }
            1700 => {
                assert!(row[0].contains("campaign_id"), "{line}: {row:?}");
                assert_eq!(row[at], "", "{line}");
            }
            _ => {
                assert_eq!(row[0], "OK", "{line}: {row:?}");
                let id: i64 = row[at].parse().expect("an id");
                assert!(ids.insert(line, id).is_none());
            }
        }
    }
    assert_eq!(count(&app, "markers").await, 2498);

    // A chunk of updates by id in which row 500 renames its marker to a name taken by a
    // marker that the upload does not change.
    let mut csv = String::from("op,id,name,campaign_id\n");
    for line in 1..=1000usize {
        let id = ids[&line];
        if line == 500 {
            csv.push_str(&format!("u,{id},m2400,{cid}\n"));
        } else {
            csv.push_str(&format!("u,{id},n{line},{cid}\n"));
        }
    }
    let (_, body) = sync_upload(&app, "markers", "u.csv", csv.into_bytes()).await;
    let r = rows(&String::from_utf8(body).unwrap(), b',');
    assert_eq!(r.len(), 1001);
    for (n, row) in r[1..].iter().enumerate() {
        let line = n + 1;
        if line == 500 {
            assert!(row[0].contains("already has this key"), "{line}: {row:?}");
        } else {
            assert_eq!(row[0], "OK", "{line}: {row:?}");
        }
    }
    for (line, name) in [
        (1, "n1"),
        (499, "n499"),
        (500, "m500"),
        (501, "n501"),
        (1000, "n1000"),
    ] {
        let (s, b) = json(
            app.admin(Method::GET, &format!("/markers/{}", ids[&line]))
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(s, 200, "{b}");
        assert_eq!(b["name"], name, "{line}: {b}");
    }
    assert_eq!(count(&app, "markers").await, 2498);
    app.stop().await;
}

#[tokio::test]
async fn whole_file_rejections_change_nothing() {
    let app = spawn_app().await;
    let cases: Vec<(Form, &str)> = vec![
        (
            form("campaigns", "a.csv", b"op,name,colour\nc,x,red\n".to_vec()),
            "colour",
        ),
        (
            form("campaigns", "a.csv", b"name,type\nx,1\n".to_vec()),
            "op",
        ),
        (
            form("campaigns", "a.csv", b"op,name\nc,x\nc,\"broken\n".to_vec()),
            "line 2",
        ),
        (
            form("campaigns", "a.csv", b"op,name\nc,x\nc,x,extra\n".to_vec()),
            "line 2",
        ),
        (
            form("campaigns", "a.csv", b"op,name\nc,x\nc,caf\xe9\n".to_vec()),
            // As an editor counts: the header is line 1.
            "line 3 of the file",
        ),
        (
            form("campaigns", "a.csv", b"op,name,name\nc,x,y\n".to_vec()),
            "twice",
        ),
        (form("campaigns", "a.csv", Vec::new()), "empty"),
        (
            form("campaigns", "a.csv", b"op,name\nc,x\n".to_vec()).text("encoding", "klingon"),
            "encoding",
        ),
        (
            form("gizmos", "a.csv", b"op,name\nc,x\n".to_vec()),
            "gizmos",
        ),
        (
            Form::new().part(
                "csvfile",
                Part::bytes(b"op,name\nc,x\n".to_vec()).file_name("a.csv"),
            ),
            "entity",
        ),
        (Form::new().text("entity", "campaigns"), "csvfile"),
        (
            form("campaigns", "a.csv", b"op,name\nc,x\n".to_vec()).text("bgrs", "sometimes"),
            "bgrs",
        ),
        (
            // UTF-8 sent as UTF-16: it decodes, into a header of strange characters.
            form("campaigns", "a.csv", b"op,name\nc,one\n".to_vec()).text("encoding", "UTF-16"),
            "the file was read as UTF-16LE: if it was saved in another encoding, name that one \
             in the `encoding` option",
        ),
    ];
    for (f, needle) in cases {
        let r = upload::upload_response(&app, f).await;
        let (s, b) = json(r).await;
        assert_eq!(
            (s, error_code(&b).as_str()),
            (400, "bad_request"),
            "{needle}: {b}"
        );
        assert!(
            b["description"].as_str().unwrap().contains(needle),
            "{needle}: {b}"
        );
    }
    assert_eq!(count(&app, "campaigns").await, 0);
    // A column name of a megabyte is not echoed whole.
    let long = format!("op,{}\nc,x\n", "n".repeat(1_000_000));
    let (s, b) = upload::upload_json(&app, form("campaigns", "a.csv", long.into_bytes())).await;
    let d = b["description"].as_str().unwrap();
    assert_eq!(s, 400, "{d}");
    assert!(
        d.contains(&format!("`{}...` is not a field", "n".repeat(40))),
        "{d}"
    );
    assert!(d.len() < 300, "{d}");
    // In UTF-8, a header that does not fit is only about the header.
    let (_, b) = upload::upload_json(
        &app,
        form("campaigns", "a.csv", b"op,name,colour\nc,x,red\n".to_vec()),
    )
    .await;
    assert!(
        !b["description"].as_str().unwrap().contains("read as"),
        "{b}"
    );
    let r = app
        .admin(Method::POST, UPLOAD)
        .body("op,name\n")
        .header("content-type", "text/csv")
        .send()
        .await
        .unwrap();
    assert!(r.status() == 400 || r.status() == 415, "{}", r.status());
    app.stop().await;
}

#[tokio::test]
async fn latin_encodings_round_trip() {
    let app = spawn_app().await;
    for (label, name, bytes) in [
        (
            "ISO-8859-1",
            "Café Müller Øresund",
            b"op;name\nc;Caf\xe9 M\xfcller \xd8resund\n".to_vec(),
        ),
        (
            "ISO-8859-2",
            "Łódź Žluťoučký kůň",
            b"op;name\nc;\xa3\xf3d\xbc \xaelu\xbbou\xe8k\xfd k\xf9\xf2\n".to_vec(),
        ),
    ] {
        let r = upload::upload_response(
            &app,
            form("campaigns", "l.csv", bytes.clone()).text("encoding", label),
        )
        .await;
        assert_eq!(r.status(), 200, "{label}");
        let out = r.bytes().await.unwrap().to_vec();
        let (enc, _) = (
            encoding_rs::Encoding::for_label(label.as_bytes()).unwrap(),
            0,
        );
        let (text, _, bad) = enc.decode(&out);
        assert!(!bad);
        let r = rows(&text, b';');
        assert_eq!(r[1][0], "OK", "{label}: {r:?}");
        assert_eq!(r[1][3], name);
        let encoded_name = &bytes[10..bytes.len() - 1];
        assert!(
            out.windows(encoded_name.len()).any(|w| w == encoded_name),
            "{label}: same bytes back"
        );
        let id = &r[1][1];
        let (_, c) = json(
            app.admin(Method::GET, &format!("/campaigns/{id}"))
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(c["name"], name, "{label}");
    }
    app.stop().await;
}

#[tokio::test]
async fn utf16_results_are_utf16_and_go_back_as_they_are() {
    let app = spawn_app().await;
    let text = "op;name;type\r\nc;Grüße 𝄞;1\r\nc;Zwei;x\r\n";
    for (label, mark) in [("UTF-16LE", &[0xFF, 0xFE][..]), ("UTF-16BE", &[][..])] {
        let enc = encoding_rs::Encoding::for_label(label.as_bytes()).unwrap();
        let utf16 = |t: &str| -> Vec<u8> {
            let mut b = mark.to_vec();
            for u in t.encode_utf16() {
                b.extend_from_slice(&if label == "UTF-16LE" {
                    u.to_le_bytes()
                } else {
                    u.to_be_bytes()
                });
            }
            b
        };
        let r = upload::upload_response(
            &app,
            form("campaigns", "u.csv", utf16(text)).text("encoding", label),
        )
        .await;
        assert_eq!(r.status(), 200, "{label}");
        assert_eq!(
            r.headers()["content-type"],
            format!("text/csv; charset={label}").as_str()
        );
        let out = r.bytes().await.unwrap().to_vec();
        assert!(
            out.starts_with(mark),
            "{label}: the input's mark comes back"
        );
        let (result, bad) = enc.decode_without_bom_handling(&out[mark.len()..]);
        assert!(!bad, "{label}: {out:?}");
        let r = rows(&result, b';');
        assert_eq!(r[0], ["res", "id", "op", "name", "type"], "{label}");
        assert_eq!(r[1][0], "OK", "{label}: {r:?}");
        assert_eq!(r[1][3], "Grüße 𝄞");
        assert!(r[2][0].contains("type"), "{label}: {r:?}");
        assert_eq!(out, [mark, &utf16(&result)[mark.len()..]].concat());

        // The result goes back as it is, its created row now an update.
        let again = result.replacen(";c;Grüße 𝄞", ";u;Grüße 𝄞 II", 1);
        let r2 = upload::upload_response(
            &app,
            form("campaigns", "again.csv", utf16(&again)).text("encoding", label),
        )
        .await;
        assert_eq!(r2.status(), 200, "{label}");
        let out2 = r2.bytes().await.unwrap().to_vec();
        let (result2, bad) = enc.decode_without_bom_handling(&out2[mark.len()..]);
        assert!(!bad, "{label}");
        assert_eq!(rows(&result2, b';')[1][0], "OK", "{label}: {result2}");
        let (_, c) = json(
            app.admin(Method::GET, &format!("/campaigns/{}", r[1][1]))
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(c["name"], "Grüße 𝄞 II", "{label}");

        // In the background: the stored result and its failed rows read in the same encoding.
        let rid =
            upload::start_background(&app, "campaigns", &utf16(text), &[("encoding", label)]).await;
        app.wait_ended(&rid, Duration::from_secs(60)).await;
        let stored = app
            .admin(Method::GET, &format!("/bgrs/{rid}/result"))
            .send()
            .await
            .unwrap();
        assert_eq!(
            stored.headers()["content-type"],
            format!("text/csv; charset={label}").as_str()
        );
        let stored = stored.bytes().await.unwrap();
        assert!(stored.starts_with(mark), "{label}");
        let (text, bad) = enc.decode_without_bom_handling(&stored[mark.len()..]);
        assert!(!bad, "{label}");
        let mut stored_rows = rows(&text, b';');
        assert_ne!(stored_rows[1][1], r[1][1], "{label}: a new object");
        stored_rows[1][1] = r[1][1].clone();
        assert_eq!(stored_rows, r, "{label}");
        let (s, f) = json(
            app.admin(Method::GET, &format!("/bgrs/{rid}/failed"))
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(s, 200, "{f}");
        assert_eq!(
            (f["ran"].as_i64(), f["failed"].as_i64()),
            (Some(2), Some(1)),
            "{f}"
        );
        assert_eq!(
            f["columns"],
            json!(["res", "id", "op", "name", "type"]),
            "{f}"
        );
        assert_eq!(f["rows"][0]["line"], 2, "{f}");
        assert_eq!(f["rows"][0]["cells"][3], "Zwei", "{f}");
    }
    app.stop().await;
}

#[tokio::test]
async fn progress_modes_and_background() {
    let app = spawn_app().await;
    let csv = b"op;name\nc;one\nc;\nc;three\n".to_vec();
    let r = upload::upload_response(
        &app,
        form("campaigns", "p.csv", csv.clone()).text("show_progress", "1"),
    )
    .await;
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let text = r.text().await.unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "Line: 1 done. Result: 200. OK");
    assert!(
        lines[1].starts_with("Line: 2 done. Result: 400. "),
        "{text}"
    );
    assert_eq!(lines[2], "Line: 3 done. Result: 200. OK");
    let link = lines[3].strip_prefix("Result: ").expect("a link");
    assert!(
        link.starts_with("media/keep1m/") && link.ends_with(".csv"),
        "{link}"
    );
    let r = app
        .admin(Method::GET, &format!("/{link}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().starts_with("res;id;op;name"));

    let r = upload::upload_response(
        &app,
        form("campaigns", "p.csv", csv.clone())
            .text("show_progress", "1")
            .text("get_content", "1"),
    )
    .await;
    let text = r.text().await.unwrap();
    assert!(
        text.starts_with("Line: 1 done. Result: 200. OK\n"),
        "{text}"
    );
    assert!(text.contains("\nres;id;op;name\r\nOK;"), "{text}");

    let r = upload::upload_response(&app, form("campaigns", "p.csv", csv).text("bgrs", "1")).await;
    let (s, b) = json(r).await;
    assert_eq!(s, 202);
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
        assert!(start.elapsed() < Duration::from_secs(30));
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(rec["name"], "uploader");
    assert_eq!(rec["result"], format!("media/keep1m/bgrs.{rid}.result.csv"));
    let (_, d) = json(
        app.admin(Method::GET, &format!("/bgrs/{rid}/details"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let d: Vec<String> = d
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["details"].as_str().unwrap().to_string())
        .collect();
    assert!(
        d.contains(&"Line: 1 done. Result: 200. OK".to_string()),
        "{d:?}"
    );
    assert!(
        d.iter()
            .any(|l| l.starts_with("Line: 2 done. Result: 400.")),
        "{d:?}"
    );
    assert_eq!(d.last().unwrap(), "done");
    let r = app
        .admin(Method::GET, &format!("/v2.5/bgrs/{rid}/result"))
        .send()
        .await
        .unwrap();
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/csv")
    );
    let text = r.text().await.unwrap();
    assert_eq!(rows(&text, b';').len(), 4);

    // Another user sees neither the request nor its file.
    app.create_user("mallory", "m-password").await;
    for path in [
        format!("/bgrs/{rid}"),
        format!("/v2.5/bgrs/{rid}/result"),
        format!("/media/keep1m/bgrs.{rid}.result.csv"),
    ] {
        let (s, _) = json(
            app.as_user("mallory", "m-password", Method::GET, &path)
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(s, 404, "{path}");
    }
    app.stop().await;
}

#[tokio::test]
async fn rows_run_as_the_uploading_user() {
    let app = spawn_app().await;
    app.create_user("uma", "uma-password").await;
    let f = form("users", "u.csv", b"op,login\nc,newbie\n".to_vec());
    let r = app
        .as_user("uma", "uma-password", Method::POST, UPLOAD)
        .multipart(f)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    assert!(rows(&text, b',')[1][0].contains("may not"), "{text}");
    let _: Json = json!(null);
    app.stop().await;
}

#[tokio::test]
async fn an_idempotency_key_makes_a_retried_upload_answer_as_the_first() {
    let app = spawn_app().await;
    let send = |key: String| {
        let f = form("campaigns", "once.csv", b"op,name\nc,only once\n".to_vec()).text("bgrs", "1");
        app.admin(Method::POST, UPLOAD)
            .header("Idempotency-Key", key)
            .multipart(f)
            .send()
    };
    let first = send("upload-key-1".into()).await.unwrap();
    assert_eq!(first.status(), 202);
    let first = first.text().await.unwrap();
    let again = send("upload-key-1".into()).await.unwrap();
    assert_eq!(again.status(), 202);
    assert_eq!(again.text().await.unwrap(), first, "the same request id");
    let long = send("k".repeat(256)).await.unwrap();
    assert_eq!(long.status(), 400);
    let (_, b) = json(long).await;
    assert_eq!(error_code(&b), "bad_request", "{b}");
    app.stop().await;
}

/// Every campaign, following the list's `Link` headers, by id.
async fn all_campaigns(app: &TestApp) -> std::collections::BTreeMap<i64, Json> {
    let mut out = std::collections::BTreeMap::new();
    let mut next = Some("/campaigns?limit=1000".to_string());
    while let Some(path) = next {
        let r = app.admin(Method::GET, &path).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        next = r
            .headers()
            .get("link")
            .and_then(|l| l.to_str().ok())
            .and_then(|l| l.split(',').find(|p| p.contains("rel=\"next\"")))
            .and_then(|p| Some(p[p.find('<')? + 1..p.find('>')?].to_string()));
        for o in r.json::<Json>().await.unwrap().as_array().unwrap() {
            out.insert(o["id"].as_i64().unwrap(), o.clone());
        }
    }
    out
}

/// Chunks of creates (which PostgreSQL copies into the table, one copy across the chunks of a
/// transaction) with an update and a delete between them, and values of every kind the
/// campaigns store: each created row's result names the object its line made, and the ids
/// rise in line order past every id there was before.
#[tokio::test]
async fn chunks_of_creates_come_back_as_the_objects_their_lines_made() {
    let app = spawn_app().await;
    let kept = app.create("campaigns", json!({"name": "kept"})).await;
    let gone = app.create("campaigns", json!({"name": "gone"})).await;
    let (kept, gone) = (kept["id"].as_i64().unwrap(), gone["id"].as_i64().unwrap());
    let mut csv = String::from("op,id,name,type,description,is_active\n");
    for line in 1..=3200usize {
        match line {
            1400 => csv.push_str(&format!("u,{kept},renamed,,,\n")),
            1401 => csv.push_str(&format!("d,{gone},,,,\n")),
            _ => csv.push_str(&format!(
                "c,,\"bulk, {line}\",{},{},{}\n",
                line % 5,
                match line % 3 {
                    0 => String::new(),
                    1 => format!("\"ligne {line} \u{e9}t\u{e9} \"\"quoted\"\"\""),
                    _ => "\"two\nlines\"".to_string(),
                },
                line % 2
            )),
        }
    }
    let (_, body) = sync_upload(&app, "campaigns", "bulk.csv", csv.into_bytes()).await;
    let r = rows(&String::from_utf8(body).unwrap(), b',');
    assert_eq!(r.len(), 3201, "the header and a row per line");
    let at = r[0].iter().position(|c| c == "id").expect("an id column");
    let stored = all_campaigns(&app).await;
    assert_eq!(stored.len(), 3198 + 1, "the creates and the kept campaign");
    assert_eq!(stored[&kept]["name"], "renamed");
    assert!(!stored.contains_key(&gone));
    let mut last = gone;
    for (n, row) in r[1..].iter().enumerate() {
        let line = n + 1;
        assert_eq!(row[0], "OK", "{line}: {row:?}");
        if line == 1400 || line == 1401 {
            continue;
        }
        let id: i64 = row[at].parse().expect("an id");
        assert!(id > last, "{line}: id {id} after {last}");
        last = id;
        let o = &stored[&id];
        assert_eq!(o["name"], format!("bulk, {line}"), "{line}: {o}");
        assert_eq!(o["type"], json!(line % 5), "{line}: {o}");
        assert_eq!(o["is_active"], json!(line % 2 == 1), "{line}: {o}");
        let description = match line % 3 {
            0 => Json::Null,
            1 => json!(format!("ligne {line} \u{e9}t\u{e9} \"quoted\"")),
            _ => json!("two\nlines"),
        };
        assert_eq!(o["description"], description, "{line}: {o}");
    }
    let after = app.create("campaigns", json!({"name": "after"})).await;
    assert!(after["id"].as_i64().unwrap() > last, "{after}");
    app.stop().await;
}

/// The form's text fields may come in the query string (`?bgrs=1`, as on every other POST);
/// the form's own value wins, and a field named twice in the query is refused.
#[tokio::test]
async fn form_fields_may_come_in_the_query_string() {
    let app = spawn_app().await;
    let csv = b"op,name\nc,from the query\n".to_vec();
    let post = |query: &'static str, f: Form| {
        app.admin(Method::POST, &format!("{UPLOAD}?{query}"))
            .multipart(f)
            .send()
    };
    let (s, b) = json(
        post("bgrs=1", form("campaigns", "q.csv", csv.clone()))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 202, "{b}");
    let rid = b["request"].as_str().expect("a request id").to_string();
    let rec = app.wait_finished(&rid).await;
    assert_eq!(rec["status"], "200", "{rec}");

    let r = post(
        "bgrs=1",
        form("campaigns", "q.csv", csv.clone()).text("bgrs", "0"),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 200, "the form's bgrs=0 wins");
    assert!(r.text().await.unwrap().starts_with("res,id,op,name\r\nOK,"));

    let only_file = Form::new().part("csvfile", Part::bytes(csv.clone()).file_name("q.csv"));
    let r = post("entity=campaigns&dry_run=yes", only_file)
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    assert!(text.starts_with("res,id,op,name\r\nOK,,c,"), "{text}");

    let (s, b) = json(
        post("bgrs=1&bgrs=0", form("campaigns", "q.csv", csv.clone()))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 400);
    assert_eq!(
        b["description"],
        "the query string holds `bgrs` more than once"
    );
    let (s, b) = json(
        post("bgrs=sometimes", form("campaigns", "q.csv", csv))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 400, "{b}");
    let names: Vec<String> = all_campaigns(&app)
        .await
        .into_values()
        .filter_map(|o| o["name"].as_str().map(String::from))
        .collect();
    assert_eq!(
        names.iter().filter(|n| *n == "from the query").count(),
        2,
        "{names:?}"
    );
}

/// The file is checked as it arrives in the encoding named before it (in the query string or
/// an earlier field); an `encoding` field after the file still decides, and a refusal reads
/// the same whichever way the check ran. No working copy is left behind.
#[tokio::test]
async fn the_encoding_decides_wherever_the_form_names_it() {
    let app = spawn_app().await;
    let latin = b"op;name\nc;Caf\xe9\n".to_vec();
    let part = |bytes: &[u8]| Part::bytes(bytes.to_vec()).file_name("e.csv");
    let before = Form::new()
        .text("entity", "campaigns")
        .text("encoding", "windows-1252")
        .part("csvfile", part(&latin));
    let after = form("campaigns", "e.csv", latin.clone()).text("encoding", "windows-1252");
    for (how, f, path) in [
        ("before", before, UPLOAD.to_string()),
        ("after", after, UPLOAD.to_string()),
        (
            "query",
            form("campaigns", "e.csv", latin.clone()),
            format!("{UPLOAD}?encoding=windows-1252"),
        ),
    ] {
        let r = app
            .admin(Method::POST, &path)
            .multipart(f)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{how}");
        let out = r.bytes().await.unwrap();
        let (text, _, bad) = encoding_rs::WINDOWS_1252.decode(&out);
        assert!(!bad, "{how}");
        let lines = rows(&text, b';');
        assert_eq!(lines[1][0], "OK", "{how}: {lines:?}");
        assert_eq!(lines[1][3], "Café", "{how}");
    }
    // The same bytes read as UTF-8: refused at their line, the encoding named before the
    // file or not at all.
    let utf8_before = Form::new()
        .text("entity", "campaigns")
        .text("encoding", "UTF-8")
        .part("csvfile", part(&latin));
    for (how, f) in [
        ("named before", utf8_before),
        ("not named", form("campaigns", "e.csv", latin.clone())),
    ] {
        let (s, body) = upload::upload(&app, f).await;
        assert_eq!(s, 400, "{how}: {body}");
        assert!(
            body.contains("line 2 of the file: bytes that are not valid UTF-8"),
            "{how}: {body}"
        );
    }
    let (s, body) = upload::upload(
        &app,
        form("campaigns", "e.csv", b"op,name\nc,\"open\n".to_vec()),
    )
    .await;
    assert_eq!(s, 400, "{body}");
    assert!(
        body.contains("line 1: a quoted field is never closed"),
        "{body}"
    );
    assert_eq!(all_campaigns(&app).await.len(), 3);
    // A check set aside is dropped on its own thread, a moment after the reply.
    let uploads = app.dir.path().join("data").join("uploads");
    let start = Instant::now();
    loop {
        let left: Vec<_> = std::fs::read_dir(&uploads)
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
            .unwrap_or_default();
        if left.is_empty() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "left in the uploads folder: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    app.stop().await;
}
