//! Several servers on one PostgreSQL database and one object store (`--storage-url`), as behind
//! a load balancer (CONTRACT.md section 10, "Running more than one server"): real `entiserve
//! serve` processes, each with a data directory of its own, none shared.
//!
//! - A background upload whose server is killed with SIGKILL, and whose data directory is then
//!   deleted whole, is taken over by another server once the lease runs out: every row applied
//!   exactly once, the result complete, served by any server.
//! - What a bundle stored (the markers' one-page PDFs, `res/` files) and results are served by
//!   every server with `Content-Length`, a strong `ETag` that every server gives alike,
//!   `Range` (206 with `Content-Range`, 416 past the end) and `If-None-Match` (304).
//! - The event stream and `DELETE /bgrs/<rid>` work on a server other than the one running the
//!   request: it ends cancelled there, and the stream ends with its `finished` event.
//! - `/readyz` answers 200 while the store answers, and 503 naming the store once it stops.
//!
//! Needs PostgreSQL (`TEST_DATABASE_URL`) and an S3-compatible store (`TEST_S3_URL` and the
//! `AWS_*` variables; `scripts/seaweedfs.sh` starts SeaweedFS and prints them). Each test makes
//! its own database and its own prefix in the bucket. Without them each test says SKIPPED and
//! passes, unless `ENTISERVE_REQUIRE_PG` or `ENTISERVE_REQUIRE_S3` is set (CI sets both in its
//! PostgreSQL pass), in which case it fails.

mod common;
#[path = "support/pdf.rs"]
mod pdf_sample;

use common::PgDb;
use common::process::{Server, database_and_store, worker_pid};
use reqwest::Method;
use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use reqwest::multipart::{Form, Part};
use serde_json::Value as Json;
use std::collections::{HashMap, HashSet};
use std::io::{Cursor, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tempfile::TempDir;

const UPLOAD: &str = "/tools/uploader.ex.php";

/// One database, one place in the store, and a directory for the servers' data directories.
/// Declared before the servers of a test, so that they stop before the database is dropped.
struct Fleet {
    db: PgDb,
    store: String,
    dir: TempDir,
}

impl Fleet {
    /// A fresh database and prefix; None (the test is skipped) without PostgreSQL and a store.
    async fn new(prefix: &str) -> Option<Fleet> {
        let (database, store) = database_and_store(prefix)?;
        Some(Fleet {
            db: PgDb::create(&database).await,
            store,
            dir: tempfile::tempdir().unwrap(),
        })
    }

    /// The data directory of server `label`.
    fn data_dir(&self, label: &str) -> PathBuf {
        self.dir.path().join(label)
    }

    /// Starts server `label` on the database and the store, with a data directory of its own.
    fn start(&self, label: &'static str) -> Server {
        Server::start_with(
            label,
            &self.data_dir(label),
            Some(&self.db.url),
            &["--storage-url", &self.store],
        )
    }
}

/// Uploads `bytes` as `file_name` into `entity` in the background; the request id.
async fn upload_background(
    server: &Server,
    entity: &str,
    file_name: &str,
    bytes: Vec<u8>,
) -> String {
    let form = Form::new()
        .text("entity", entity.to_string())
        .text("bgrs", "1")
        .part(
            "csvfile",
            Part::bytes(bytes).file_name(file_name.to_string()),
        );
    let r = server
        .request(Method::POST, UPLOAD)
        .multipart(form)
        .send()
        .await
        .expect("POST the upload");
    let status = r.status();
    let text = r.text().await.unwrap();
    assert_eq!(status, 202, "{} upload: {text}", server.label);
    let body: Json = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    body["request"].as_str().expect("a request id").to_string()
}

/// `op,name,description` and `rows` rows creating campaigns `<what> row <i>`, i from 1.
fn campaigns_csv(what: &str, rows: usize) -> Vec<u8> {
    let mut csv = String::with_capacity(rows * 40);
    csv.push_str("op,name,description\n");
    for i in 1..=rows {
        csv.push_str(&format!("c,{what} row {i},line {i}\n"));
    }
    csv.into_bytes()
}

/// The pid of the worker that started the request, from the first page of its details.
async fn started_by(server: &Server, rid: &str) -> u32 {
    let start = Instant::now();
    loop {
        let page = server.get_json(&format!("/bgrs/{rid}/details")).await;
        let pid = page.as_array().unwrap().iter().find_map(|d| {
            let text = d["details"].as_str()?;
            worker_pid(text, "started")
        });
        if let Some(pid) = pid {
            return pid;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{rid} was not started in 30 s: {page}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A GET as admin with extra headers: status, headers, body.
async fn fetch(
    server: &Server,
    path: &str,
    extra: &[(&str, &str)],
) -> (StatusCode, HeaderMap, Vec<u8>) {
    let mut req = server.request(Method::GET, path);
    for (k, v) in extra {
        req = req.header(*k, *v);
    }
    let r = req
        .send()
        .await
        .unwrap_or_else(|e| panic!("{} GET {path}: {e}", server.label));
    let (status, headers) = (r.status(), r.headers().clone());
    let body = r.bytes().await.unwrap().to_vec();
    (status, headers, body)
}

fn header_of<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name)
        .map(|v| v.to_str().expect("an ASCII header value"))
}

/// A stored file (or result) served whole by `server`: 200, `Accept-Ranges: bytes`,
/// `Content-Length` of the body, a strong `ETag`. Its bytes and ETag.
async fn served_whole(server: &Server, path: &str) -> (Vec<u8>, String) {
    let (status, h, body) = fetch(server, path, &[]).await;
    let what = format!("{} GET {path}", server.label);
    assert_eq!(status, 200, "{what}: {}", String::from_utf8_lossy(&body));
    assert_eq!(
        header_of(&h, "accept-ranges"),
        Some("bytes"),
        "{what}: {h:?}"
    );
    let length: usize = header_of(&h, "content-length")
        .unwrap_or_else(|| panic!("{what}: no Content-Length: {h:?}"))
        .parse()
        .unwrap();
    assert_eq!(length, body.len(), "{what}: Content-Length");
    let etag = header_of(&h, "etag")
        .unwrap_or_else(|| panic!("{what}: no ETag: {h:?}"))
        .to_string();
    assert!(
        etag.starts_with('"') && etag.ends_with('"') && etag.len() > 2,
        "{what}: a strong ETag, not {etag}"
    );
    (body, etag)
}

/// `Range: bytes=<spec>` on `path` answers 206 with `want` (the bytes `first..` of `whole`)
/// and the right `Content-Range` and `Content-Length`.
async fn served_range(
    server: &Server,
    path: &str,
    spec: &str,
    whole: &[u8],
    first: usize,
    last: usize,
) {
    let range = format!("bytes={spec}");
    let (status, h, body) = fetch(server, path, &[("range", &range)]).await;
    let what = format!("{} GET {path} with Range: {range}", server.label);
    assert_eq!(status, 206, "{what}: {h:?}");
    assert_eq!(
        header_of(&h, "content-range"),
        Some(format!("bytes {first}-{last}/{}", whole.len()).as_str()),
        "{what}"
    );
    assert_eq!(
        header_of(&h, "content-length"),
        Some((last - first + 1).to_string().as_str()),
        "{what}"
    );
    assert!(
        body == whole[first..=last],
        "{what}: not the bytes asked for"
    );
}

/// `If-None-Match` with `etag` answers 304 with no body.
async fn not_modified(server: &Server, path: &str, etag: &str) {
    let (status, h, body) = fetch(server, path, &[("if-none-match", etag)]).await;
    let what = format!("{} GET {path} with If-None-Match: {etag}", server.label);
    assert_eq!(status, 304, "{what}: {h:?}");
    assert!(body.is_empty(), "{what}: a body with the 304");
    assert_eq!(header_of(&h, "etag"), Some(etag), "{what}");
}

/// Polls `GET /bgrs/<rid>` on `server` until the request has ended; its record.
async fn wait_ended(server: &Server, rid: &str, limit: Duration) -> Json {
    let start = Instant::now();
    loop {
        let rec = server.get_json(&format!("/bgrs/{rid}")).await[0].clone();
        if rec["status_id"] != "2" {
            return rec;
        }
        assert!(
            start.elapsed() < limit,
            "{rid} not ended after {limit:?}: {rec}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The records of a CSV text with `delimiter`, header first.
fn records(text: &str, delimiter: u8) -> Vec<csv::StringRecord> {
    csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .has_headers(false)
        .from_reader(text.as_bytes())
        .records()
        .enumerate()
        .map(|(n, r)| r.unwrap_or_else(|e| panic!("result record {n}: {e}")))
        .collect()
}

/// Rows in the takeover upload.
const ROWS: usize = 200_000;

/// Server A takes a 200,000-row background upload; once it has committed part of it, the server
/// running it is killed (SIGKILL) and its data directory deleted. The other server, running all
/// along on the same database and store, takes it over when the lease (15 s) runs out and
/// finishes it; a third server, started afterwards on an empty directory, serves the same
/// result. Every row is applied exactly once.
///
/// Observed (two cores, debug build, SeaweedFS, the other tests of this file running
/// alongside; five runs): the survivor's first chunk after the kill came 15.6-16.3 s after the
/// SIGKILL (the 15 s lease, `jobs::LEASE_SECS`, plus the workers' 0.5 s claim poll and one
/// chunk), the request finished 22-25 s after it, and this test took 28-38 s in all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_whose_server_died_disk_and_all_is_finished_by_another() {
    let Some(fleet) = Fleet::new("fleet-takeover").await else {
        return;
    };
    let t0 = Instant::now();
    // One after the other, so that B does not race A's migrations.
    let a = fleet.start("A");
    let b = fleet.start("B");
    let rid = upload_background(&a, "campaigns", "big.csv", campaigns_csv("fleet", ROWS)).await;

    // Both servers claim work: the one that started the request is the one to kill (nearly
    // always A, which is woken by its own upload).
    let runner = started_by(&a, &rid).await;
    let (mut dead, survivor) = if runner == a.pid() {
        (a, b)
    } else {
        assert_eq!(runner, b.pid(), "the runner is neither server");
        (b, a)
    };
    // Killed about a quarter of the way: a good part of the result is in the store by then.
    let start = Instant::now();
    let progress = loop {
        let (status, progress) = dead.progress(&rid).await;
        assert!(
            status == "2" && progress < 100.0,
            "{rid} ended (status {status}, progress {progress}) before it could be killed"
        );
        if progress >= 25.0 {
            break progress;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "not a quarter done in 60 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    dead.kill();
    let killed = Instant::now();
    let dead_dir = fleet.data_dir(dead.label);
    std::fs::remove_dir_all(&dead_dir)
        .unwrap_or_else(|e| panic!("delete {}: {e}", dead_dir.display()));
    let (_, at_kill) = survivor.progress(&rid).await;
    eprintln!(
        "{} killed at {progress}% seen ({at_kill}% committed) after {:?}; its data directory \
         deleted",
        dead.label,
        t0.elapsed()
    );

    // The takeover: the first progress past what the dead server committed.
    loop {
        let (status, p) = survivor.progress(&rid).await;
        if p > at_kill || status != "2" {
            break;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(60),
            "{} did not take {rid} over in 60 s (progress {p})",
            survivor.label
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let takeover = killed.elapsed();
    let rec = wait_ended(&survivor, &rid, Duration::from_secs(120)).await;
    eprintln!(
        "{} took over {takeover:?} after the kill and finished {:?} after it",
        survivor.label,
        killed.elapsed()
    );
    assert_eq!(rec["status_id"], "4", "finished: {rec}");
    assert_eq!(rec["progress"], "100.00", "{rec}");

    // The result, whole from the survivor and from a server that never saw the upload, and in
    // part by a range.
    let c = fleet.start("C");
    let path = format!("/bgrs/{rid}/result");
    let (result, etag) = served_whole(&survivor, &path).await;
    let (from_c, etag_c) = served_whole(&c, &path).await;
    assert!(
        from_c == result,
        "C serves the same result as {}",
        survivor.label
    );
    assert_eq!(
        etag_c, etag,
        "one ETag for one stored result, whichever server"
    );
    let link = rec["result"].as_str().unwrap();
    assert_eq!(link, format!("media/keep1m/bgrs.{rid}.result.csv"), "{rec}");
    let (by_link, etag_link) = served_whole(&c, &format!("/{link}")).await;
    assert!(by_link == result, "C serves the record's result link");
    assert_eq!(etag_link, etag, "one ETag for the result by either path");
    served_range(&c, &path, "0-99", &result, 0, 99).await;
    let mid = result.len() / 2;
    served_range(
        &survivor,
        &path,
        &format!("{mid}-{}", mid + 999),
        &result,
        mid,
        mid + 999,
    )
    .await;
    not_modified(&c, &path, &etag).await;
    let text = String::from_utf8(result).expect("a UTF-8 result");

    // One row per line, all OK, in input order, with distinct ids ...
    let rows = records(&text, b',');
    assert_eq!(rows.len(), ROWS + 1, "the header and one row per line");
    let head: Vec<&str> = rows[0].iter().collect();
    assert_eq!(head, ["res", "id", "op", "name", "description"]);
    let mut named: HashMap<i64, String> = HashMap::with_capacity(ROWS);
    for (i, r) in rows.iter().enumerate().skip(1) {
        assert_eq!(r.len(), 5, "result row {i}: {r:?}");
        assert_eq!(&r[0], "OK", "result row {i}: {r:?}");
        assert_eq!(
            r[3],
            format!("fleet row {i}"),
            "result row {i} out of order: {r:?}"
        );
        let id: i64 = r[1]
            .parse()
            .unwrap_or_else(|e| panic!("result row {i}: id {:?}: {e}", &r[1]));
        assert!(
            named.insert(id, r[3].to_string()).is_none(),
            "result row {i}: id {id} twice"
        );
    }
    // ... and exactly those campaigns in the database, each once.
    assert_eq!(
        c.campaign_count().await,
        ROWS as u64,
        "one campaign per line"
    );
    let stored = {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(&fleet.db.url).await.unwrap();
        let rows: Vec<(i64, String)> = sqlx::query_as("SELECT id, name FROM campaigns")
            .fetch_all(&mut conn)
            .await
            .unwrap();
        rows
    };
    assert_eq!(stored.len(), ROWS, "campaigns in the database");
    let mismatched: Vec<_> = stored
        .iter()
        .filter(|(id, name)| named.get(id) != Some(name))
        .take(5)
        .collect();
    assert!(
        mismatched.is_empty(),
        "campaigns not as the result says: {mismatched:?}"
    );

    // One `Line: <n> done` per line; started by the dead server, resumed by the survivor.
    let details = c.details(&rid).await;
    let mut seen = vec![0u32; ROWS + 1];
    for d in &details {
        let Some(rest) = d.strip_prefix("Line: ") else {
            continue;
        };
        let (n, tail) = rest
            .split_once(" done. ")
            .unwrap_or_else(|| panic!("malformed detail {d:?}"));
        let n: usize = n.parse().unwrap_or_else(|e| panic!("detail {d:?}: {e}"));
        assert!((1..=ROWS).contains(&n), "detail {d:?}: no such line");
        assert!(tail.starts_with("Result: 200."), "detail {d:?}");
        seen[n] += 1;
    }
    let wrong: Vec<(usize, u32)> = (1..=ROWS)
        .filter(|&n| seen[n] != 1)
        .map(|n| (n, seen[n]))
        .take(10)
        .collect();
    assert!(wrong.is_empty(), "(line, details) not once: {wrong:?}");
    let workers: Vec<&String> = details.iter().filter(|d| d.contains("(worker ")).collect();
    assert!(
        details
            .iter()
            .any(|d| worker_pid(d, "started") == Some(dead.pid())),
        "started by {} (pid {}): {workers:?}",
        dead.label,
        dead.pid()
    );
    assert!(
        details
            .iter()
            .any(|d| worker_pid(d, "resumed") == Some(survivor.pid())),
        "resumed by {} (pid {}): {workers:?}",
        survivor.label,
        survivor.pid()
    );
    assert_eq!(
        details.last().map(String::as_str),
        Some("done"),
        "{workers:?}"
    );
    eprintln!("takeover {takeover:?}; total {:?}", t0.elapsed());
}

type Zip = zip::ZipWriter<Cursor<Vec<u8>>>;

fn random_bytes(n: usize) -> Vec<u8> {
    (0..n).map(|_| rand::random::<u8>()).collect()
}

/// A bundle uploaded to A in the background: every marker PDF, every `res/` file and the
/// result are served by B (and alike by A): whole with Content-Length and ETag, by ranges, and
/// 304 for the ETag either server gave.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_and_results_are_served_by_every_server() {
    let Some(fleet) = Fleet::new("fleet-files").await else {
        return;
    };
    let a = fleet.start("A");
    let b = fleet.start("B");
    for s in [&a, &b] {
        let (status, body) = readyz(s).await;
        assert_eq!(status, 200, "{} /readyz: {body}", s.label);
    }

    // Assets on pages 1 and 3 of a three-page PDF, linking a small and a large res/ file (the
    // large one goes to the store in parts).
    let small = random_bytes(5000);
    let large = random_bytes(6 * 1024 * 1024 + 123);
    let csv = "op;name;marker_id;url;content\r\n\
               c;first;1;res/data.bin;\"See res/media/clip.bin\"\r\n\
               c;third;3;res/media/clip.bin;\r\n";
    let bundle = {
        let mut z: Zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let deflated = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        let stored = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        z.start_file("assets.csv", deflated).unwrap();
        z.write_all(csv.as_bytes()).unwrap();
        z.start_file("pages.pdf", deflated).unwrap();
        z.write_all(&pdf_sample::sample_pdf(3)).unwrap();
        z.start_file("res/data.bin", deflated).unwrap();
        z.write_all(&small).unwrap();
        z.start_file("res/media/clip.bin", stored).unwrap();
        z.write_all(&large).unwrap();
        z.finish().unwrap().into_inner()
    };
    let rid = upload_background(&a, "assets", "fleet.zip", bundle).await;
    let rec = wait_ended(&b, &rid, Duration::from_secs(60)).await;
    assert_eq!(rec["status_id"], "4", "{rec}");

    // The result, from B and from A alike.
    let path = format!("/bgrs/{rid}/result");
    let (result, etag) = served_whole(&b, &path).await;
    let (from_a, etag_a) = served_whole(&a, &path).await;
    assert!(from_a == result, "A and B serve one result");
    assert_eq!(etag_a, etag, "A and B give the result one ETag");
    let text = String::from_utf8(result.clone()).unwrap();
    let rows = records(&text, b';');
    assert_eq!(rows.len(), 3, "{text}");
    assert!(rows[1..].iter().all(|r| &r[0] == "OK"), "{text}");
    served_range(&b, &path, "10-19", &result, 10, 19).await;
    not_modified(&b, &path, &etag).await;

    // The markers' one-page PDFs.
    let campaigns = b.get_json("/campaigns?name=fleet.zip").await;
    let cid = campaigns[0]["id"].as_i64().expect("the bundle's campaign");
    let markers = b
        .get_json(&format!("/markers?campaign_id={cid}&sort=page"))
        .await;
    let markers = markers.as_array().unwrap();
    assert_eq!(markers.len(), 3, "{markers:?}");
    let mut marker_ids = Vec::new();
    for (i, m) in markers.iter().enumerate() {
        let page = i + 1;
        marker_ids.push(m["id"].as_i64().unwrap());
        let file = m["file"].as_str().expect("a file URL");
        let (pdf, etag) = served_whole(&b, file).await;
        let (_, h, _) = fetch(&b, file, &[]).await;
        assert_eq!(
            header_of(&h, "content-type"),
            Some("application/pdf"),
            "{file}"
        );
        let doc = lopdf::Document::load_mem(&pdf).expect("a readable PDF");
        let pages = doc.get_pages();
        assert_eq!(pages.len(), 1, "{file}");
        let content = String::from_utf8_lossy(&doc.get_page_content(pages[&1])).to_string();
        assert!(
            content.contains(&format!("(Page {page})")),
            "{file}: {content}"
        );
        let (from_a, etag_a) = served_whole(&a, file).await;
        assert!(from_a == pdf, "A and B serve one {file}");
        assert_eq!(etag_a, etag, "A and B give {file} one ETag");
        served_range(&b, file, "0-7", &pdf, 0, 7).await;
        assert!(pdf.starts_with(b"%PDF-"), "{file}");
        not_modified(&b, file, &etag).await;
        not_modified(&a, file, &etag).await;
        // Credentials are still needed.
        let r = b
            .client
            .get(format!("{}{file}", b.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "{file} without credentials");
    }

    // The res/ files, linked from the assets.
    let assets = b.get_json("/assets?sort=id").await;
    let assets = assets.as_array().unwrap();
    assert_eq!(assets.len(), 2, "{assets:?}");
    assert_eq!(
        assets[0]["marker_id"].as_i64(),
        Some(marker_ids[0]),
        "{assets:?}"
    );
    assert_eq!(
        assets[1]["marker_id"].as_i64(),
        Some(marker_ids[2]),
        "{assets:?}"
    );
    let small_url = assets[0]["url"].as_str().unwrap().to_string();
    let large_url = assets[1]["url"].as_str().unwrap().to_string();
    assert!(small_url.starts_with("/media/files/assets/"), "{small_url}");
    assert!(small_url.ends_with("/res/data.bin"), "{small_url}");
    assert_eq!(assets[0]["content"], format!("See {large_url}"));
    let (got, small_etag) = served_whole(&b, &small_url).await;
    assert!(got == small, "res/data.bin served as uploaded");
    served_range(&b, &small_url, "100-199", &small, 100, 199).await;
    not_modified(&b, &small_url, &small_etag).await;

    let (got, etag) = served_whole(&b, &large_url).await;
    assert!(got == large, "res/media/clip.bin served as uploaded");
    let n = large.len();
    // Seeking as a video player does: a range in the middle, from a point to the end, the end.
    served_range(
        &b,
        &large_url,
        "3000000-3065535",
        &large,
        3_000_000,
        3_065_535,
    )
    .await;
    served_range(
        &b,
        &large_url,
        &format!("{}-", n - 70_000),
        &large,
        n - 70_000,
        n - 1,
    )
    .await;
    served_range(&b, &large_url, "-1000", &large, n - 1000, n - 1).await;
    served_range(&a, &large_url, "5-5", &large, 5, 5).await;
    let (status, h, _) = fetch(&b, &large_url, &[("range", &format!("bytes={n}-"))]).await;
    assert_eq!(status, 416, "a range past the end: {h:?}");
    assert_eq!(
        header_of(&h, "content-range"),
        Some(format!("bytes */{n}").as_str())
    );
    not_modified(&a, &large_url, &etag).await;
    let (status, _, _) = fetch(&b, &large_url.replace("clip.bin", "none.bin"), &[]).await;
    assert_eq!(status, 404, "a file that is not stored");
}

/// An open `GET /bgrs/<rid>/events` stream, read event by event.
struct Events {
    response: reqwest::Response,
    buf: Vec<u8>,
}

impl Events {
    async fn open(server: &Server, rid: &str) -> Events {
        let response = server
            .request(Method::GET, &format!("/bgrs/{rid}/events"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{} events of {rid}", server.label);
        let ctype = header_of(response.headers(), "content-type").unwrap_or_default();
        assert!(ctype.starts_with("text/event-stream"), "{ctype}");
        Events {
            response,
            buf: Vec::new(),
        }
    }

    /// The next event, (kind, data); None once the stream has ended.
    async fn next(&mut self) -> Option<(String, Json)> {
        loop {
            if let Some(at) = self.buf.windows(2).position(|w| w == b"\n\n") {
                let block: Vec<u8> = self.buf.drain(..at + 2).collect();
                let block = String::from_utf8(block).expect("UTF-8 events");
                let Some(data) = block.lines().find_map(|l| l.strip_prefix("data: ")) else {
                    continue; // a keep-alive comment
                };
                let kind = block
                    .lines()
                    .find_map(|l| l.strip_prefix("event: "))
                    .unwrap_or("message");
                let data = serde_json::from_str(data).unwrap_or_else(|e| panic!("{e}: {data}"));
                return Some((kind.to_string(), data));
            }
            let chunk = tokio::time::timeout(Duration::from_secs(30), self.response.chunk())
                .await
                .expect("an event, or the end of the stream, within 30 s")
                .expect("read the stream");
            match chunk {
                Some(bytes) => self.buf.extend_from_slice(&bytes),
                None => {
                    assert!(self.buf.iter().all(u8::is_ascii_whitespace), "a cut event");
                    return None;
                }
            }
        }
    }
}

/// Rows in the upload that is cancelled.
const CANCEL_ROWS: usize = 300_000;

/// A big background upload runs on one server; the other follows its event stream and
/// cancels it. It ends cancelled on the server running it, the stream on the other server
/// carries every entry and ends with `finished`, and the result, served by the other server,
/// marks the rows after the cancel as not run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_and_cancel_work_from_another_server() {
    let Some(fleet) = Fleet::new("fleet-cancel").await else {
        return;
    };
    let a = fleet.start("A");
    let b = fleet.start("B");
    let csv = campaigns_csv("cancel", CANCEL_ROWS);
    let rid = upload_background(&a, "campaigns", "cancel.csv", csv).await;
    let runner_pid = started_by(&b, &rid).await;
    let (runner, other) = if runner_pid == a.pid() {
        (&a, &b)
    } else {
        assert_eq!(runner_pid, b.pid(), "the runner is neither server");
        (&b, &a)
    };

    // Followed on the other server until it shows progress; then cancelled there.
    let mut stream = Events::open(other, &rid).await;
    let mut events = Vec::new();
    loop {
        let ev = stream
            .next()
            .await
            .expect("the stream ended before any progress");
        assert_ne!(
            ev.0, "finished",
            "{rid} ended before it could be cancelled: {}",
            ev.1
        );
        let progress: Option<f64> =
            (ev.0 == "progress").then(|| ev.1["progress"].as_str().unwrap().parse().unwrap());
        events.push(ev);
        if progress.is_some_and(|p| p > 0.0) {
            break;
        }
    }
    let cancel = async {
        let r = other
            .request(Method::DELETE, &format!("/bgrs/{rid}"))
            .send()
            .await
            .unwrap();
        let status = r.status();
        (status, r.text().await.unwrap())
    };
    let rest = async {
        let mut rest = Vec::new();
        while let Some(ev) = stream.next().await {
            rest.push(ev);
        }
        rest
    };
    let ((status, body), rest) = tokio::join!(cancel, rest);
    assert!(
        status == 200 || status == 202,
        "DELETE on {}: {status} {body}",
        other.label
    );
    events.extend(rest);

    // The stream on the other server: every entry, progress, then `finished`, cancelled.
    let (last, rec) = events.last().unwrap();
    assert_eq!(last, "finished", "the stream ends with `finished`");
    assert_eq!(rec["status_id"], "5", "{rec}");
    assert_eq!(events.iter().filter(|(k, _)| k == "finished").count(), 1);
    let details: Vec<&str> = events
        .iter()
        .filter(|(k, _)| k == "detail")
        .map(|(_, d)| d["details"].as_str().unwrap())
        .collect();
    let ids: Vec<i64> = events
        .iter()
        .filter(|(k, _)| k == "detail")
        .map(|(_, d)| d["id"].as_str().unwrap().parse().unwrap())
        .collect();
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "entries in order, each once"
    );
    assert_eq!(
        ids.len(),
        other.details(&rid).await.len(),
        "the stream carried every entry"
    );
    let workers: Vec<&&str> = details.iter().filter(|d| d.contains("(worker ")).collect();
    assert_eq!(
        workers.len(),
        1,
        "run by one worker, never taken over: {workers:?}"
    );
    assert_eq!(
        worker_pid(workers[0], "started"),
        Some(runner.pid()),
        "{workers:?}"
    );
    assert!(
        details.last().unwrap().starts_with("cancelled"),
        "{:?}",
        details.last()
    );

    // Ended cancelled on the server running it.
    let rec = runner.get_json(&format!("/bgrs/{rid}")).await[0].clone();
    assert_eq!(rec["status_id"], "5", "{rec}");
    assert_eq!(rec["status_name"], "cancelled", "{rec}");
    let progress: f64 = rec["progress"].as_str().unwrap().parse().unwrap();
    assert!(progress < 100.0, "{rec}");

    // The result from the other server: OK up to the cancel, not run after it.
    let (result, _) = served_whole(other, &format!("/bgrs/{rid}/result")).await;
    let text = String::from_utf8(result).unwrap();
    let rows = records(&text, b',');
    assert_eq!(
        rows.len(),
        CANCEL_ROWS + 1,
        "the header and one row per line"
    );
    let (mut ok, mut not_run) = (0usize, 0usize);
    let mut ids = HashSet::new();
    for (i, r) in rows.iter().enumerate().skip(1) {
        assert_eq!(
            r[3],
            format!("cancel row {i}"),
            "result row {i} out of order"
        );
        if &r[0] == "OK" {
            assert_eq!(
                not_run, 0,
                "result row {i}: OK after a row that did not run"
            );
            assert!(ids.insert(r[1].to_string()), "result row {i}: id twice");
            ok += 1;
        } else {
            assert!(r[0].starts_with("not run"), "result row {i}: {r:?}");
            assert_eq!(
                &r[1], "",
                "result row {i}: an id for a row that did not run"
            );
            not_run += 1;
        }
    }
    assert!(ok > 0 && not_run > 0, "ok {ok}, not run {not_run}");
    let lines = details.iter().filter(|d| d.starts_with("Line: ")).count();
    assert_eq!(lines, ok, "one entry per row that ran");
    assert_eq!(
        other.campaign_count().await,
        ok as u64,
        "applied = marked OK"
    );
}

/// A TCP relay to the store that can be cut: every connection through it, and the port.
struct Relay {
    url: String,
    task: tokio::task::JoinHandle<()>,
}

impl Relay {
    /// Relays `127.0.0.1:<new port>` to `target` (`host:port`).
    async fn to(target: String) -> Relay {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            // Dropped with the task: every relayed connection ends with it.
            let mut open = tokio::task::JoinSet::new();
            while let Ok((mut inbound, _)) = listener.accept().await {
                let target = target.clone();
                open.spawn(async move {
                    if let Ok(mut out) = tokio::net::TcpStream::connect(&target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
                    }
                });
            }
        });
        Relay { url, task }
    }

    /// Closes the port and every connection through it.
    async fn cut(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

/// `GET /readyz` without credentials, answered within 15 s: status and body.
async fn readyz(server: &Server) -> (u16, Json) {
    let r = tokio::time::timeout(
        Duration::from_secs(15),
        server.client.get(format!("{}/readyz", server.base)).send(),
    )
    .await
    .unwrap_or_else(|_| panic!("{} /readyz did not answer within 15 s", server.label))
    .unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    (status, body)
}

/// A server reaches the store through a relay: ready while the relay runs; once it is cut, 503
/// with the store named as the part that failed, the database still `ok`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_names_a_store_that_stops_answering() {
    let Some(fleet) = Fleet::new("fleet-readyz").await else {
        return;
    };
    let endpoint = std::env::var("AWS_ENDPOINT_URL")
        .expect("AWS_ENDPOINT_URL, the S3-compatible store's address (scripts/seaweedfs.sh)");
    let target = endpoint
        .split_once("://")
        .map_or(endpoint.as_str(), |(_, rest)| rest)
        .trim_end_matches('/')
        .to_string();
    let relay = Relay::to(target).await;
    let server = Server::start_env(
        "D",
        &fleet.data_dir("D"),
        Some(&fleet.db.url),
        &["--storage-url", &fleet.store],
        &[("AWS_ENDPOINT_URL", &relay.url)],
    );
    let (status, body) = readyz(&server).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "ok", "{body}");
    assert_eq!(body["store"], "ok", "{body}");

    relay.cut().await;
    let (status, body) = readyz(&server).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["status"], "unavailable", "{body}");
    assert_eq!(body["database"], "ok", "{body}");
    let store = body["store"].as_str().expect("why the store failed");
    assert!(!store.is_empty() && store != "ok", "{body}");
}
