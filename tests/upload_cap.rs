//! The bytes one upload may store (CONTRACT.md section 10): one-page PDFs and `res/` files
//! together are capped; over the cap the upload is a 413 naming the cap, nothing is applied
//! and nothing it wrote stays in the data directory.

mod common;
#[path = "support/pdf.rs"]
mod pdf_sample;

use common::zips::zip_of;
use common::*;
use pdf_sample::{sample_pdf, shared_image_pdf};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The cap the tests' servers run with.
const CAP: u64 = 8_000_000;

/// Every file below the data directory with its size, but the SQLite database's own files.
fn listing(data: &Path) -> BTreeMap<PathBuf, u64> {
    files_below(data)
        .into_iter()
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("entiserve.db"))
        })
        .map(|p| {
            let len = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
            (p.strip_prefix(data).unwrap().to_path_buf(), len)
        })
        .collect()
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
    let (s, body) = upload::upload(
        &app,
        upload::form(
            "markers",
            "bundle.zip",
            zip_of(&[("markers.csv", csv), ("pages.pdf", &sample_pdf(1))]),
            &[],
        ),
    )
    .await;
    assert_eq!(s, 200, "{body}");
    let campaigns = count(&app, "campaigns").await;
    let markers = count(&app, "markers").await;
    let before = listing(&data);

    let started = Instant::now();
    let (s, body) = upload::upload(
        &app,
        upload::form("markers", "bundle.zip", bundle.clone(), &[]),
    )
    .await;
    assert_over_cap(s, &body);
    let took = started.elapsed();
    assert_listing_returns_to(&data, &before).await;
    // In the background too, refused before it is queued.
    let (s, body) = upload::upload(
        &app,
        upload::form("markers", "bundle.zip", bundle, &[("bgrs", "1")]),
    )
    .await;
    assert_over_cap(s, &body);
    assert_listing_returns_to(&data, &before).await;
    assert_eq!(count(&app, "campaigns").await, campaigns);
    assert_eq!(count(&app, "markers").await, markers);

    // Under the cap the same kind of PDF is accepted: 5 pages of about 1 MB each.
    let (s, body) = upload::upload(
        &app,
        upload::form(
            "markers",
            "bundle.zip",
            zip_of(&[
                ("markers.csv", csv),
                ("pages.pdf", &shared_image_pdf(5, 1_000_000)),
            ]),
            &[],
        ),
    )
    .await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(count(&app, "markers").await, markers + 5);
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
    let (s, body) = upload::upload(
        &app,
        upload::form(
            "assets",
            "bundle.zip",
            zip_of(&[
                ("assets.csv", csv),
                ("pages.pdf", &sample_pdf(1)),
                ("res/a.bin", b"x"),
            ]),
            &[],
        ),
    )
    .await;
    assert_eq!(s, 200, "{body}");
    let counts = bundle_counts(&app).await;
    let before = listing(&data);

    // res/ alone over the cap: refused before it is extracted.
    let (a, b) = (random(5_000_000), random(4_000_000));
    let (s, body) = upload::upload(
        &app,
        upload::form(
            "assets",
            "bundle.zip",
            zip_of(&[("assets.csv", csv), ("res/a.bin", &a), ("res/b.bin", &b)]),
            &[],
        ),
    )
    .await;
    assert_over_cap(s, &body);
    assert_listing_returns_to(&data, &before).await;

    // Pages (about 5 MB) and res/ (5 MB) each fit, together they do not.
    let (s, body) = upload::upload(
        &app,
        upload::form(
            "assets",
            "bundle.zip",
            zip_of(&[
                ("assets.csv", csv),
                ("pages.pdf", &shared_image_pdf(5, 1_000_000)),
                ("res/a.bin", &a),
            ]),
            &[],
        ),
    )
    .await;
    assert_over_cap(s, &body);
    assert_listing_returns_to(&data, &before).await;
    assert_eq!(bundle_counts(&app).await, counts);
    // Either part alone is accepted.
    let (s, body) = upload::upload(
        &app,
        upload::form(
            "assets",
            "bundle.zip",
            zip_of(&[
                ("assets.csv", csv),
                ("pages.pdf", &sample_pdf(1)),
                ("res/a.bin", &a),
            ]),
            &[],
        ),
    )
    .await;
    assert_eq!(s, 200, "{body}");
    assert!(body.contains("OK"), "{body}");
    app.stop().await;
}
