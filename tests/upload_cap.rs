//! The bytes one upload may store (CONTRACT.md section 10): one-page PDFs and `res/` files
//! together are capped; over the cap the upload is a 413 naming the cap, nothing is applied
//! and nothing it wrote stays in the data directory.

mod common;
#[path = "support/pdf.rs"]
mod pdf_sample;

use common::*;
use pdf_sample::{sample_pdf, shared_image_pdf};
use reqwest::Method;
use reqwest::multipart::{Form, Part};
use std::collections::BTreeMap;
use std::io::{Cursor, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const UPLOAD: &str = "/tools/uploader.ex.php";
/// The cap the tests' servers run with.
const CAP: u64 = 8_000_000;

fn zip_of(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut z = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, bytes) in files {
        z.start_file(*name, opts).unwrap();
        z.write_all(bytes).unwrap();
    }
    z.finish().unwrap().into_inner()
}

async fn upload(
    app: &TestApp,
    entity: &str,
    bytes: Vec<u8>,
    fields: &[(&str, &str)],
) -> (u16, String) {
    let mut f = Form::new()
        .text("entity", entity.to_string())
        .part("csvfile", Part::bytes(bytes).file_name("bundle.zip"));
    for (k, v) in fields {
        f = f.text(k.to_string(), v.to_string());
    }
    let r = app
        .admin(Method::POST, UPLOAD)
        .multipart(f)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// Every file below the data directory with its size, but the SQLite database's own files.
fn listing(data: &Path) -> BTreeMap<PathBuf, u64> {
    let mut out = BTreeMap::new();
    let mut todo = vec![data.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if !p
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("entiserve.db"))
            {
                let len = e.metadata().map(|m| m.len()).unwrap_or(0);
                out.insert(p.strip_prefix(data).unwrap().to_path_buf(), len);
            }
        }
    }
    out
}

/// Waits (a refused upload's stored files are removed as its request ends) until the data
/// directory holds exactly `before`.
async fn assert_listing_returns_to(data: &Path, before: &BTreeMap<PathBuf, u64>) {
    let start = Instant::now();
    loop {
        let now = listing(data);
        if &now == before {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the data directory changed:\nbefore {before:?}\nafter {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn total(app: &TestApp, entity: &str) -> u64 {
    let r = app
        .admin(Method::GET, &format!("/{entity}?limit=1"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.headers()["x-total-count"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// Checks a refusal: 413, the contract's error, naming the cap and its flag.
fn assert_over_cap(status: u16, body: &str) {
    let b: serde_json::Value = serde_json::from_str(body).unwrap_or_else(|_| panic!("{body}"));
    assert_eq!(
        (status, error_code(&b).as_str()),
        (413, "payload_too_large"),
        "{b}"
    );
    let desc = b["description"].as_str().unwrap();
    assert!(
        desc.contains(&CAP.to_string()) && desc.contains("--max-upload-store-bytes"),
        "{desc}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pdf_whose_pages_share_one_large_image_is_refused_and_leaves_nothing() {
    let app = spawn_with(|s| s.max_upload_store_bytes = CAP).await;
    let data = app.dir.path().join("data");
    // Each one-page PDF carries the 1 MB image: 60 pages would store 60 MB.
    let pdf = shared_image_pdf(60, 1_000_000);
    assert!(pdf.len() < 1_100_000);
    let csv: &[u8] = b"op;name;campaign_id\r\n";
    let bundle = zip_of(&[("markers.csv", csv), ("pages.pdf", &pdf)]);
    // Warm up the upload directories, so that the listing is the steady state.
    let (s, body) = upload(
        &app,
        "markers",
        zip_of(&[("markers.csv", csv), ("pages.pdf", &sample_pdf(1))]),
        &[],
    )
    .await;
    assert_eq!(s, 200, "{body}");
    let campaigns = total(&app, "campaigns").await;
    let markers = total(&app, "markers").await;
    let before = listing(&data);

    let started = Instant::now();
    let (s, body) = upload(&app, "markers", bundle.clone(), &[]).await;
    assert_over_cap(s, &body);
    let took = started.elapsed();
    assert_listing_returns_to(&data, &before).await;
    // In the background too, refused before it is queued.
    let (s, body) = upload(&app, "markers", bundle, &[("bgrs", "1")]).await;
    assert_over_cap(s, &body);
    assert_listing_returns_to(&data, &before).await;
    assert_eq!(total(&app, "campaigns").await, campaigns);
    assert_eq!(total(&app, "markers").await, markers);

    // Under the cap the same kind of PDF is accepted: 5 pages of about 1 MB each.
    let (s, body) = upload(
        &app,
        "markers",
        zip_of(&[
            ("markers.csv", csv),
            ("pages.pdf", &shared_image_pdf(5, 1_000_000)),
        ]),
        &[],
    )
    .await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(total(&app, "markers").await, markers + 5);
    let stored: u64 = listing(&data)
        .iter()
        .filter(|(p, _)| p.starts_with("media/files"))
        .map(|(_, len)| len)
        .sum::<u64>()
        - before
            .iter()
            .filter(|(p, _)| p.starts_with("media/files"))
            .map(|(_, len)| len)
            .sum::<u64>();
    assert!((5_000_000..CAP).contains(&stored), "stored {stored} bytes");
    eprintln!("refused after {took:?}; 5 pages stored {stored} bytes");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_and_res_files_count_together() {
    let app = spawn_with(|s| s.max_upload_store_bytes = CAP).await;
    let data = app.dir.path().join("data");
    let random = |n: usize| (0..n).map(|_| rand::random::<u8>()).collect::<Vec<u8>>();
    let csv: &[u8] = b"op;name;marker_id;url\r\nc;a;1;res/a.bin\r\n";
    // Warm up the upload directories.
    let (s, body) = upload(
        &app,
        "assets",
        zip_of(&[
            ("assets.csv", csv),
            ("pages.pdf", &sample_pdf(1)),
            ("res/a.bin", b"x"),
        ]),
        &[],
    )
    .await;
    assert_eq!(s, 200, "{body}");
    let counts = [
        total(&app, "campaigns").await,
        total(&app, "markers").await,
        total(&app, "assets").await,
    ];
    let before = listing(&data);

    // res/ alone over the cap: refused before it is extracted.
    let (a, b) = (random(5_000_000), random(4_000_000));
    let (s, body) = upload(
        &app,
        "assets",
        zip_of(&[("assets.csv", csv), ("res/a.bin", &a), ("res/b.bin", &b)]),
        &[],
    )
    .await;
    assert_over_cap(s, &body);
    assert_listing_returns_to(&data, &before).await;

    // Pages (about 5 MB) and res/ (5 MB) each fit, together they do not.
    let (s, body) = upload(
        &app,
        "assets",
        zip_of(&[
            ("assets.csv", csv),
            ("pages.pdf", &shared_image_pdf(5, 1_000_000)),
            ("res/a.bin", &a),
        ]),
        &[],
    )
    .await;
    assert_over_cap(s, &body);
    assert_listing_returns_to(&data, &before).await;
    assert_eq!(
        [
            total(&app, "campaigns").await,
            total(&app, "markers").await,
            total(&app, "assets").await,
        ],
        counts
    );
    // Either part alone is accepted.
    let (s, body) = upload(
        &app,
        "assets",
        zip_of(&[
            ("assets.csv", csv),
            ("pages.pdf", &sample_pdf(1)),
            ("res/a.bin", &a),
        ]),
        &[],
    )
    .await;
    assert_eq!(s, 200, "{body}");
    assert!(body.contains("OK"), "{body}");
    app.stop().await;
}
