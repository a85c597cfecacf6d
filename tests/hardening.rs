//! What a hostile client sends cannot exhaust the server or leave files behind: bodies are
//! bounded while they are read (memory measured on a real server process), refused uploads
//! clean up, cross-site requests are refused, and malformed bundles are 4xx.

mod common;

use bytes::Bytes;
use common::process::{PASSWORD, Server};
use common::zips::zip_of;
use common::{ADMIN_PASSWORD, PgDb, error_code, json, spawn_with};
use reqwest::Method;
use reqwest::multipart::{Form, Part};
use serde_json::json;
use std::path::Path;
use tempfile::TempDir;

/// A server process (SQLite, or PostgreSQL with `TEST_DATABASE_URL`), with its data directory.
/// Fields drop in order: the server stops before its database is dropped.
struct Proc {
    server: Server,
    _dir: TempDir,
    _db: Option<PgDb>,
}

async fn process(label: &'static str, args: &[&str]) -> Proc {
    let dir = tempfile::tempdir().unwrap();
    let db = match std::env::var("TEST_DATABASE_URL") {
        Ok(u) if !u.is_empty() => Some(PgDb::create(&u).await),
        _ => None,
    };
    let server = Server::start_with(
        label,
        &dir.path().join("data"),
        db.as_ref().map(|d| d.url.as_str()),
        args,
    );
    Proc {
        server,
        _dir: dir,
        _db: db,
    }
}

/// A body of `total` bytes made of `prefix`, then `fill` repeated, then `suffix`, produced
/// as it is sent (the client never holds it whole).
fn streamed(prefix: Vec<u8>, fill: u8, total: usize, suffix: Vec<u8>) -> reqwest::Body {
    const CHUNK: usize = 256 * 1024;
    let middle = total - prefix.len() - suffix.len();
    let fills = middle / CHUNK;
    let rest = middle % CHUNK;
    let chunks = std::iter::once(Bytes::from(prefix))
        .chain(std::iter::repeat_n(Bytes::from(vec![fill; CHUNK]), fills))
        .chain(std::iter::once(Bytes::from(vec![fill; rest])))
        .chain(std::iter::once(Bytes::from(suffix)))
        .map(Ok::<_, std::io::Error>);
    reqwest::Body::wrap_stream(futures::stream::iter(chunks))
}

/// Status of a response, or 0 when the server closed the connection while the body was sent
/// (it may answer 413 and stop reading).
async fn status_of(r: reqwest::Result<reqwest::Response>) -> u16 {
    match r {
        Ok(r) => r.status().as_u16(),
        Err(_) => 0,
    }
}

#[tokio::test]
async fn a_huge_form_field_sent_without_credentials_is_refused_while_it_streams() {
    let p = process("bigfield", &[]).await;
    let s = &p.server;
    let before = s.memory_kb("VmRSS");
    let boundary = "XBOUNDARYX";
    let total = 300 << 20;
    let mut sends = Vec::new();
    for _ in 0..4 {
        let body = streamed(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"login\"\r\n\r\n")
                .into_bytes(),
            b'a',
            total,
            format!("\r\n--{boundary}--\r\n").into_bytes(),
        );
        let req = s
            .client
            .post(format!("{}/auth/token", s.base))
            .header(
                "content-type",
                format!("multipart/form-data; boundary={boundary}"),
            )
            .body(body);
        sends.push(tokio::spawn(
            async move { status_of(req.send().await).await },
        ));
    }
    for h in sends {
        let status = h.await.unwrap();
        assert!(status == 413 || status == 0, "status {status}");
    }
    let peak = s.memory_kb("VmHWM");
    assert!(
        peak < before + 50 * 1024,
        "peak {peak} kB after 4 x 300 MB fields (before: {before} kB)"
    );
    // Still serving.
    assert_eq!(s.get("/users/me").await.status(), 200);
}

#[tokio::test]
async fn a_100_mb_json_array_is_refused_without_building_it() {
    let p = process("bigarray", &[]).await;
    let s = &p.server;
    let total = 100 << 20;
    // Chunked (no Content-Length): refused once the batch limit is passed while reading.
    let body = streamed(b"[".to_vec(), b'0', total, b"]".to_vec());
    let fill_commas = {
        // `[0,0,0,...]`: the middle is "0," repeated; build it as its own stream.
        let mut v = Vec::with_capacity(256 * 1024);
        while v.len() < 256 * 1024 {
            v.extend_from_slice(b"0,");
        }
        v
    };
    let chunks = std::iter::once(Bytes::from_static(b"["))
        .chain(std::iter::repeat_n(
            Bytes::from(fill_commas),
            total / (256 * 1024),
        ))
        .chain(std::iter::once(Bytes::from_static(b"0]")))
        .map(Ok::<_, std::io::Error>);
    let commas = reqwest::Body::wrap_stream(futures::stream::iter(chunks));
    for b in [commas, body] {
        let r = s
            .client
            .post(format!("{}/campaigns?bgrs=false", s.base))
            .basic_auth("admin", Some(PASSWORD))
            .header("content-type", "application/json")
            .body(b)
            .send()
            .await;
        let status = status_of(r).await;
        assert!(status == 413 || status == 0, "status {status}");
    }
    // With a declared length: refused before a byte is read.
    let r = s
        .client
        .post(format!("{}/campaigns?bgrs=false", s.base))
        .basic_auth("admin", Some(PASSWORD))
        .header("content-type", "application/json")
        .body(vec![b' '; total])
        .send()
        .await;
    let status = status_of(r).await;
    assert!(status == 413 || status == 0, "status {status}");
    let peak = s.memory_kb("VmHWM");
    assert!(peak < 300 * 1024, "peak {peak} kB");
    assert_eq!(s.campaign_count().await, 0, "nothing ran");
}

/// Uploads to `campaigns` a CSV of `head`, then `total` bytes of `fill`, then `tail`, made as
/// it is sent (the client never holds it whole): the reply.
async fn upload_streamed(
    s: &Server,
    head: &str,
    fill: u8,
    total: usize,
    tail: &str,
) -> reqwest::Response {
    let boundary = "XBOUNDARYX";
    let head = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"entity\"\r\n\r\ncampaigns\r\n\
         --{boundary}\r\nContent-Disposition: form-data; name=\"csvfile\"; filename=\"c.csv\"\r\n\
         Content-Type: text/csv\r\n\r\n{head}"
    );
    let body = streamed(
        head.into_bytes(),
        fill,
        total,
        format!("{tail}\r\n--{boundary}--\r\n").into_bytes(),
    );
    s.client
        .post(format!("{}/tools/uploader.ex.php", s.base))
        .basic_auth("admin", Some(PASSWORD))
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(body)
        .send()
        .await
        .expect("the server answers")
}

/// The status and JSON body of a refusal; a reply that is not JSON (the result file of an
/// upload that ran) fails with its status and first line only.
async fn refusal(r: reqwest::Response) -> (u16, serde_json::Value) {
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or_else(|_| {
        let first = text.lines().next().unwrap_or_default();
        panic!(
            "not a refusal ({status}): {}",
            &first[..first.len().min(200)]
        )
    });
    (status, body)
}

/// Checks that the upload `sent` was refused with `status` and a description holding each of
/// `needles`, that the server's peak memory stayed within 64 MB of `before` (kB) while it came
/// in, and that nothing ran.
async fn refused_without_holding(
    s: &Server,
    before: u64,
    sent: reqwest::Response,
    status: (u16, &str),
    needles: &[&str],
) {
    let (got, b) = refusal(sent).await;
    assert_eq!((got, error_code(&b).as_str()), status, "{b}");
    let d = b["description"].as_str().unwrap_or_default();
    for needle in needles {
        assert!(d.contains(needle), "{needle}: {d}");
    }
    let peak = s.memory_kb("VmHWM");
    assert!(
        peak < before + 64 * 1024,
        "peak {peak} kB after {status:?} (before: {before} kB)"
    );
    assert_eq!(s.campaign_count().await, 0, "nothing ran");
}

/// A CSV whose first line never ends (no header, or not a CSV file) is refused once 1 MiB of
/// it has arrived, naming the limit: the separator is chosen from the header line, which is
/// held while it is read, and a line held whole takes several times its size in memory.
#[tokio::test]
async fn a_first_line_longer_than_any_header_is_refused_without_holding_it() {
    let p = process("longheader", &[]).await;
    let s = &p.server;
    let before = s.memory_kb("VmRSS");
    let r = upload_streamed(s, "op,name,", b'n', 100 << 20, "\nc,a,b").await;
    let header = "header: the first line is longer than 1024 KiB";
    refused_without_holding(s, before, r, (400, "bad_request"), &[header]).await;
}

/// A row is one call, so it is bounded as the body of one call is (`--max-body-bytes`, 1 MiB
/// here): a file with a 100 MB cell is refused with 413 naming its line and the limit, before
/// any row runs, and the server never holds the cell (the rows are read whole, and a row's
/// values are copied several times on their way to the database). A row under the limit runs.
#[tokio::test]
async fn a_row_longer_than_one_call_is_refused_without_holding_it() {
    let p = process("longrow", &[]).await;
    let s = &p.server;
    let before = s.memory_kb("VmRSS");
    let head = "op,name,description\nc,first,ok\nc,big,";
    let r = upload_streamed(s, head, b'd', 100 << 20, "\nc,last,ok").await;
    let needles = [
        "line 2: the row is longer than 1 MiB",
        "--max-body-bytes",
        "nothing was applied",
    ];
    refused_without_holding(s, before, r, (413, "payload_too_large"), &needles).await;
    let r = upload_streamed(s, head, b'd', 1_000_000, "\nc,last,ok").await;
    assert_eq!(r.status(), 200);
    let result = r.text().await.unwrap();
    assert_eq!(
        result.lines().filter(|l| l.starts_with("OK")).count(),
        3,
        "{}",
        &result[..result.len().min(300)]
    );
    assert_eq!(s.campaign_count().await, 3, "every row ran");
}

#[tokio::test]
async fn batch_bodies_are_bounded_by_bytes_and_by_items() {
    let app = spawn_with(|s| {
        s.max_batch_items = 10;
        s.max_batch_bytes = 4096;
        s.max_body_bytes = 1024;
    })
    .await;
    let items: Vec<_> = (0..11).map(|i| json!({"name": format!("c{i}")})).collect();
    let r = app
        .admin(Method::POST, "/campaigns?bgrs=false")
        .json(&items)
        .send()
        .await
        .unwrap();
    let (s, b) = json(r).await;
    assert_eq!(
        (s, error_code(&b)),
        (413, "payload_too_large".into()),
        "{b}"
    );
    assert!(
        b["description"].as_str().unwrap().contains("10 items"),
        "{b}"
    );
    let big: Vec<_> = (0..5).map(|_| json!({"name": "x".repeat(1000)})).collect();
    let r = app
        .admin(Method::POST, "/campaigns?bgrs=false")
        .json(&big)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    // A single call's body is held to the small limit.
    let r = app
        .admin(Method::POST, "/campaigns")
        .json(&json!({"name": "x".repeat(2000)}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    // Within the limits all is well.
    let ok: Vec<_> = (0..10).map(|i| json!({"name": format!("c{i}")})).collect();
    let r = app
        .admin(Method::POST, "/campaigns?bgrs=false")
        .json(&ok)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = app
        .admin(Method::GET, "/campaigns?limit=1")
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.headers()["x-total-count"],
        "10",
        "only the good batch ran"
    );
    app.stop().await;
}

#[tokio::test]
async fn form_fields_are_bounded_and_files_go_only_to_the_uploader() {
    let app = spawn_with(|s| s.max_field_bytes = 1000).await;
    let r = app
        .admin(Method::POST, "/campaigns")
        .multipart(Form::new().text("name", "y".repeat(1001)))
        .send()
        .await
        .unwrap();
    let (s, b) = json(r).await;
    assert_eq!(s, 413, "{b}");
    assert!(b["description"].as_str().unwrap().contains("`name`"), "{b}");
    let r = app
        .admin(Method::POST, "/campaigns")
        .multipart(Form::new().part("name", Part::bytes(b"z".to_vec()).file_name("a.txt")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let r = app
        .admin(Method::POST, "/campaigns")
        .multipart(Form::new().text("name", "fine"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    app.stop().await;
}

/// Every file under `dir`.
fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p.display().to_string());
        }
    }
    out
}

fn csv_part(text: &str) -> Part {
    Part::bytes(text.as_bytes().to_vec()).file_name("c.csv")
}

#[tokio::test]
async fn refused_uploads_leave_nothing_behind() {
    let app = spawn_with(|s| s.max_field_bytes = 4096).await;
    let uploads = app.dir.path().join("data").join("uploads");
    let csv = "op,name\nc,a\n";
    let cases: Vec<(&str, Form, u16)> = vec![
        (
            "a later field over its limit",
            Form::new()
                .part("csvfile", csv_part(csv))
                .text("entity", "campaigns")
                .text("encoding", "x".repeat(5000)),
            413,
        ),
        (
            "two csvfile parts",
            Form::new()
                .text("entity", "campaigns")
                .part("csvfile", csv_part(csv))
                .part("csvfile", csv_part(csv)),
            400,
        ),
        (
            "an unknown entity",
            Form::new()
                .part("csvfile", csv_part(csv))
                .text("entity", "nope"),
            400,
        ),
        (
            "a broken CSV",
            Form::new()
                .part("csvfile", csv_part("op,name\nc,\"open\n"))
                .text("entity", "campaigns"),
            400,
        ),
    ];
    for (what, form, want) in cases {
        let r = app
            .admin(Method::POST, "/tools/uploader.ex.php")
            .multipart(form)
            .send()
            .await
            .unwrap();
        let (s, b) = json(r).await;
        assert_eq!(s, want, "{what}: {b}");
        // The handler's cleanup runs as it returns.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert_eq!(files_under(&uploads), Vec::<String>::new(), "{what}");
    }
    let r = app
        .admin(Method::GET, "/campaigns?limit=1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-total-count"], "0");
    app.stop().await;
}

#[tokio::test]
async fn orphaned_scratch_files_are_removed_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let uploads = data.join("uploads");
    std::fs::create_dir_all(uploads.join("0123.bundle/res")).unwrap();
    std::fs::write(uploads.join("0123.bundle/res/a.txt"), "x").unwrap();
    std::fs::write(uploads.join("4567.upload"), "op,name\n").unwrap();
    std::fs::write(uploads.join("89ab.utf8.csv"), "op,name\n").unwrap();
    let db = match std::env::var("TEST_DATABASE_URL") {
        Ok(u) if !u.is_empty() => Some(PgDb::create(&u).await),
        _ => None,
    };
    let s = Server::start("orphans", &data, db.as_ref().map(|d| d.url.as_str()));
    assert_eq!(files_under(&uploads), Vec::<String>::new());
    drop(s);
}

#[tokio::test]
async fn cross_site_state_changes_are_refused() {
    let app = spawn_with(|s| s.allowed_origins = vec!["https://app.example.com".into()]).await;
    let host = app.base.trim_start_matches("http://").to_string();
    let form = |login: &str| {
        Form::new()
            .text("login", login.to_string())
            .text("password", "long-enough-1")
            .text("role", "admin")
    };
    // A page on another site, riding the browser's Basic credentials.
    let r = app
        .admin(Method::POST, "/users")
        .header("origin", "http://evil.example")
        .multipart(form("mallory"))
        .send()
        .await
        .unwrap();
    let (s, b) = json(r).await;
    assert_eq!((s, error_code(&b)), (403, "forbidden".into()), "{b}");
    let r = app
        .admin(Method::POST, "/users")
        .header("sec-fetch-site", "cross-site")
        .multipart(form("mallory"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = app
        .admin(Method::POST, "/users")
        .header("origin", "null")
        .multipart(form("mallory"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = app
        .admin(Method::DELETE, "/users/1")
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = app
        .admin(Method::GET, "/users?login=mallory")
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.headers()["x-total-count"],
        "0",
        "mallory was never created"
    );
    // The server's own pages, clients without Origin, and listed origins are fine.
    let r = app
        .admin(Method::POST, "/users")
        .header("origin", format!("http://{host}"))
        .header("sec-fetch-site", "same-origin")
        .multipart(form("own_page"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = app
        .admin(Method::POST, "/users")
        .multipart(form("script"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = app
        .admin(Method::POST, "/campaigns")
        .header("origin", "https://app.example.com")
        .header("sec-fetch-site", "cross-site")
        .json(&json!({"name": "from the app"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        "https://app.example.com"
    );
    // Reads from another site are not state changes.
    let r = app
        .admin(Method::GET, "/campaigns")
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers().get("access-control-allow-origin").is_none());
    // Preflights: answered for listed origins only.
    let r = app
        .client
        .request(Method::OPTIONS, app.url("/campaigns"))
        .header("origin", "https://app.example.com")
        .header("access-control-request-method", "PUT")
        .header(
            "access-control-request-headers",
            "authorization, content-type",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        "https://app.example.com"
    );
    assert!(
        r.headers()["access-control-allow-methods"]
            .to_str()
            .unwrap()
            .contains("PUT")
    );
    let r = app
        .client
        .request(Method::OPTIONS, app.url("/campaigns"))
        .header("origin", "http://evil.example")
        .header("access-control-request-method", "PUT")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    app.stop().await;
}

#[tokio::test]
async fn a_bundle_whose_res_paths_collide_is_a_400() {
    let app = spawn_with(|_| {}).await;
    let csv: &[u8] = b"op,name,url\nc,a,res/a\n";
    for files in [
        vec![
            ("assets.csv", csv),
            ("res/a", b"file".as_slice()),
            ("res/a/b", b"nested".as_slice()),
        ],
        vec![
            ("assets.csv", csv),
            ("res/a/b", b"nested".as_slice()),
            ("res/a", b"file".as_slice()),
        ],
    ] {
        let form = Form::new().text("entity", "assets").part(
            "csvfile",
            Part::bytes(zip_of(&files)).file_name("bundle.zip"),
        );
        let r = app
            .admin(Method::POST, "/tools/uploader.ex.php")
            .multipart(form)
            .send()
            .await
            .unwrap();
        let (s, b) = json(r).await;
        assert_eq!((s, error_code(&b)), (400, "bad_request".into()), "{b}");
        assert!(b["description"].as_str().unwrap().contains("res/a"), "{b}");
    }
    let r = app
        .admin(Method::GET, "/assets?limit=1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-total-count"], "0");
    assert_eq!(
        files_under(&app.dir.path().join("data").join("media")),
        Vec::<String>::new()
    );
    assert_eq!(
        app.as_user("admin", ADMIN_PASSWORD, Method::GET, "/healthz")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    app.stop().await;
}

#[tokio::test]
async fn connections_that_wait_too_long_for_a_request_are_closed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let app = spawn_with(|s| s.header_timeout = std::time::Duration::from_secs(1)).await;
    let addr = app.base.trim_start_matches("http://").to_string();
    // Headers trickled a byte at a time never finish: closed after about the timeout.
    let mut slow = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let started = std::time::Instant::now();
    let mut closed = false;
    for b in b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "
        .iter()
        .cycle()
        .take(40)
    {
        if slow.write_all(&[*b]).await.is_err() {
            closed = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let mut buf = [0u8; 64];
        if let Ok(Ok(0)) =
            tokio::time::timeout(std::time::Duration::from_millis(1), slow.read(&mut buf)).await
        {
            closed = true;
            break;
        }
    }
    assert!(closed, "a trickling client was never cut off");
    let took = started.elapsed();
    assert!(took < std::time::Duration::from_secs(3), "{took:?}");
    // An idle keep-alive connection is closed after a request.
    let mut idle = tokio::net::TcpStream::connect(&addr).await.unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = vec![0u8; 4096];
    let n = idle.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    let eof = tokio::time::timeout(std::time::Duration::from_secs(5), idle.read(&mut buf))
        .await
        .expect("closed within the timeout");
    assert!(matches!(eof, Ok(0) | Err(_)), "{eof:?}");
    // A request whose work takes longer than the timeout is answered.
    let users: Vec<_> = (0..40)
        .map(|i| json!({"login": format!("slow{i}"), "password": "long-enough-pw"}))
        .collect();
    let started = std::time::Instant::now();
    let r = app
        .admin(Method::POST, "/users?bgrs=false")
        .json(&users)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let (_, b) = json(r).await;
    assert!(b.as_array().unwrap().iter().all(|i| i["status"] == 200));
    eprintln!("40 password hashes took {:?}", started.elapsed());
    app.stop().await;
}
