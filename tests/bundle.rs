//! ZIP bundle uploads (CONTRACT.md section 7; SPEC.md section 4 "ZIP archive processing")
//! against a real server: pages.pdf becoming markers, page numbers mapped in assets, res/
//! links rewritten and served, hostile archives and PDFs refused with nothing applied, and
//! bundles run in the background.

mod common;
#[path = "support/pdf.rs"]
mod pdf_sample;

use common::zips::zip_of;
use common::*;
use lopdf::Document;
use pdf_sample::sample_pdf;
use reqwest::Method;
use serde_json::{Value as Json, json};
use std::collections::{BTreeSet, HashMap};
use std::io::{Cursor, Write};
use std::time::{Duration, Instant};
use zip::ZipWriter;
use zip::write::SimpleFileOptions;

/// Where [`deep_pdf`] puts its deeply nested value.
#[derive(Clone, Copy)]
enum Deep {
    /// Inside the only page's dictionary: the page cannot be read.
    InPage,
    /// As the document catalog (the trailer's `/Root`).
    AsRoot,
}

/// A one-page PDF with a correct xref and trailer, holding a value that nests `open`/`close`
/// `depth` times.
fn deep_pdf(open: &str, close: &str, depth: usize, at: Deep) -> Vec<u8> {
    let mut deep = String::with_capacity(depth * (open.len() + close.len() + 2));
    for _ in 0..depth {
        deep.push_str(open);
        deep.push(' ');
    }
    for _ in 0..depth {
        deep.push_str(close);
        deep.push(' ');
    }
    let page = "/Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R";
    let objects = match at {
        Deep::InPage => [
            "<< /Type /Catalog /Pages 2 0 R >>".to_string(),
            "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_string(),
            format!("<< {page} /Deep {deep} >>"),
            "<< /Length 0 >>\nstream\n\nendstream".to_string(),
        ],
        Deep::AsRoot => [
            deep,
            "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_string(),
            format!("<< {page} >>"),
            "<< /Length 0 >>\nstream\n\nendstream".to_string(),
        ],
    };
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, o) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{o}\nendobj\n", i + 1).as_bytes());
    }
    let xref = out.len();
    out.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for o in offsets {
        out.extend_from_slice(format!("{o:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

type Zip = ZipWriter<Cursor<Vec<u8>>>;

fn deflated() -> SimpleFileOptions {
    SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated)
}

fn stored() -> SimpleFileOptions {
    SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored)
}

/// A ZIP written by `f`.
fn build_zip(f: impl FnOnce(&mut Zip)) -> Vec<u8> {
    let mut z = ZipWriter::new(Cursor::new(Vec::new()));
    f(&mut z);
    z.finish().unwrap().into_inner()
}

/// Offsets of every occurrence of `sig` in `bytes`.
fn find_all(bytes: &[u8], sig: &[u8]) -> Vec<usize> {
    bytes
        .windows(sig.len())
        .enumerate()
        .filter(|(_, w)| *w == sig)
        .map(|(i, _)| i)
        .collect()
}

/// Applies `patch` at `local_off` from each local header and `central_off` from each central
/// directory header.
fn patch_headers(
    mut bytes: Vec<u8>,
    local_off: usize,
    central_off: usize,
    patch: impl Fn(&mut [u8]),
) -> Vec<u8> {
    let locals = find_all(&bytes, b"PK\x03\x04");
    let centrals = find_all(&bytes, b"PK\x01\x02");
    assert!(!locals.is_empty() && locals.len() == centrals.len());
    for at in locals {
        patch(&mut bytes[at + local_off..at + local_off + 2]);
    }
    for at in centrals {
        patch(&mut bytes[at + central_off..at + central_off + 2]);
    }
    bytes
}

fn random_bytes(n: usize) -> Vec<u8> {
    (0..n).map(|_| rand::random::<u8>()).collect()
}

/// A synchronous upload that must succeed: its result CSV's rows (header first).
async fn sync_rows(
    app: &TestApp,
    entity: &str,
    name: &str,
    bytes: Vec<u8>,
    fields: &[(&str, &str)],
) -> Vec<Vec<String>> {
    let r = upload::upload_response(app, upload::form(entity, name, bytes, fields)).await;
    let status = r.status();
    let h = r.headers().clone();
    let text = r.text().await.unwrap();
    assert_eq!(status, 200, "{text}");
    assert!(
        h["content-type"].to_str().unwrap().starts_with("text/csv"),
        "{h:?}"
    );
    assert_eq!(
        h["content-disposition"],
        format!("attachment; filename=\"{name}res.csv\"").as_str()
    );
    upload::rows(&text)
}

async fn healthy(app: &TestApp) {
    let r = app.client.get(app.url("/healthz")).send().await.unwrap();
    assert_eq!(r.status(), 200, "the server stopped serving");
}

/// A JSON list as admin.
async fn list(app: &TestApp, path_and_query: &str) -> Vec<Json> {
    let (s, b) = json(app.admin(Method::GET, path_and_query).send().await.unwrap()).await;
    assert_eq!(s, 200, "{path_and_query}: {b}");
    b.as_array().unwrap().clone()
}

/// The markers of campaign `cid`, by page.
async fn markers_of(app: &TestApp, cid: i64) -> Vec<Json> {
    let mut m = list(app, &format!("/markers?campaign_id={cid}&limit=10000")).await;
    m.sort_by_key(|m| m["page"].as_i64());
    m
}

/// The one campaign named `name`; its id.
async fn campaign_named(app: &TestApp, name: &str) -> i64 {
    let c = list(app, &format!("/campaigns?name={name}")).await;
    assert_eq!(c.len(), 1, "campaigns named {name}: {c:?}");
    c[0]["id"].as_i64().unwrap()
}

/// A stored file fetched as admin: content type and bytes.
async fn fetch(app: &TestApp, url_path: &str) -> (String, Vec<u8>) {
    let r = app.admin(Method::GET, url_path).send().await.unwrap();
    assert_eq!(r.status(), 200, "GET {url_path}");
    let ctype = r.headers()["content-type"].to_str().unwrap().to_string();
    (ctype, r.bytes().await.unwrap().to_vec())
}

/// The bundle id in a stored file's URL `/media/files/<entity>/<bundle>/<rest>`.
fn bundle_of(url: &str, entity: &str, rest: &str) -> String {
    let mid = url
        .strip_prefix(&format!("/media/files/{entity}/"))
        .and_then(|u| u.strip_suffix(rest))
        .and_then(|u| u.strip_suffix('/'))
        .unwrap_or_else(|| panic!("{url} is not /media/files/{entity}/<bundle>/{rest}"));
    assert!(
        !mid.is_empty() && mid.chars().all(|c| c.is_ascii_alphanumeric()),
        "{url}"
    );
    mid.to_string()
}

/// Checks that `markers` are pages 1..=n of one bundle, each serving a one-page PDF of its
/// page; returns the bundle id.
async fn check_page_markers(app: &TestApp, markers: &[Json], cid: i64, n: usize) -> String {
    assert_eq!(markers.len(), n, "{markers:?}");
    let mut bundles = BTreeSet::new();
    for (i, m) in markers.iter().enumerate() {
        let page = i + 1;
        assert_eq!(m["name"], format!("page {page:03}"), "{m}");
        assert_eq!(m["page"].as_i64(), Some(page as i64), "{m}");
        assert_eq!(m["campaign_id"].as_i64(), Some(cid), "{m}");
        let file = m["file"].as_str().unwrap();
        bundles.insert(bundle_of(
            file,
            "markers",
            &format!("pages/page-{page:03}.pdf"),
        ));
        let (ctype, bytes) = fetch(app, file).await;
        assert_eq!(ctype, "application/pdf");
        let doc = Document::load_mem(&bytes).expect("a readable PDF");
        let pages = doc.get_pages();
        assert_eq!(pages.len(), 1, "{file}");
        let content = String::from_utf8_lossy(&doc.get_page_content(pages[&1])).to_string();
        assert!(
            content.contains(&format!("(Page {page})")),
            "{file}: {content}"
        );
        for other in (1..=n).filter(|o| *o != page) {
            assert!(!content.contains(&format!("(Page {other})")), "{file}");
        }
        // A client joining the base URL and the path with one slash too many gets it too.
        let (_, again) = fetch(app, &format!("/{file}")).await;
        assert_eq!(again, bytes);
    }
    assert_eq!(bundles.len(), 1, "one bundle: {bundles:?}");
    bundles.into_iter().next().unwrap()
}

/// A request's details: (dt, text) in order.
async fn details(app: &TestApp, rid: &str) -> Vec<(String, String)> {
    all_details(app, rid)
        .await
        .iter()
        .map(|e| {
            (
                e["dt"].as_str().unwrap().to_string(),
                e["details"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// An asset by its id (as the result CSV gives it).
async fn asset(app: &TestApp, id: &str) -> Json {
    let (s, a) = json(
        app.admin(Method::GET, &format!("/assets/{id}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200, "asset {id}: {a}");
    a
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_become_markers_in_a_given_or_a_new_campaign() {
    let app = spawn_app().await;
    let given = app
        .create("campaigns", serde_json::json!({"name": "Spring catalogue"}))
        .await;
    let cid = given["id"].as_i64().unwrap();
    let pdf = sample_pdf(3);

    // In the given campaign; the CSV itself has no rows.
    let bundle = zip_of(&[
        ("markers.csv", b"op;name;campaign_id\r\n"),
        ("pages.pdf", &pdf),
    ]);
    let cid_text = cid.to_string();
    let r = sync_rows(
        &app,
        "markers",
        "given.zip",
        bundle.clone(),
        &[("campaign_id", &cid_text)],
    )
    .await;
    assert_eq!(r, [["res", "id", "op", "name", "campaign_id"]]);
    assert_eq!(
        bundle_counts(&app).await,
        [1, 3, 0],
        "no campaign is created"
    );
    let first = check_page_markers(&app, &markers_of(&app, cid).await, cid, 3).await;
    healthy(&app).await;

    // Without campaign_id: a new campaign named exactly after the uploaded file.
    let r = sync_rows(&app, "markers", "catalogue.zip", bundle, &[]).await;
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(bundle_counts(&app).await, [2, 6, 0]);
    let new_cid = campaign_named(&app, "catalogue.zip").await;
    assert_ne!(new_cid, cid);
    let second = check_page_markers(&app, &markers_of(&app, new_cid).await, new_cid, 3).await;
    assert_ne!(first, second, "each upload stores its pages apart");
    assert_eq!(
        markers_of(&app, cid).await.len(),
        3,
        "the first set is untouched"
    );

    // Stored pages are served only with credentials.
    let m = markers_of(&app, new_cid).await;
    let file = m[0]["file"].as_str().unwrap();
    let r = app.client.get(app.url(file)).send().await.unwrap();
    assert_eq!(r.status(), 401);
    healthy(&app).await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asset_rows_map_page_numbers_to_the_new_markers() {
    let app = spawn_app().await;
    let csv = "op;name;marker_id;url;content\r\n\
               c;first;1;;\r\n\
               c;third;3;;\r\n\
               c;beyond;4;;\r\n\
               c;loose;;;no marker\r\n\
               c;zero;0;;\r\n\
               c;again first; 1 ;;\r\n";
    let bundle = zip_of(&[
        ("assets.csv", csv.as_bytes()),
        ("pages.pdf", &sample_pdf(3)),
    ]);
    // Markers that exist already, so that the new markers' ids differ from page numbers.
    let other = app.create("campaigns", json!({"name": "other"})).await;
    for n in 0..10 {
        app.create(
            "markers",
            json!({"name": format!("m{n}"), "campaign_id": other["id"]}),
        )
        .await;
    }
    let r = sync_rows(&app, "assets", "mapped.zip", bundle, &[]).await;
    assert_eq!(
        r[0],
        ["res", "id", "op", "name", "marker_id", "url", "content"]
    );
    assert_eq!(r.len(), 7, "{r:?}");
    let res: Vec<&str> = r[1..].iter().map(|x| x[0].as_str()).collect();
    assert_eq!(res[0], "OK", "{r:?}");
    assert_eq!(res[1], "OK", "{r:?}");
    assert!(
        res[2].contains('4') && res[2].contains("page"),
        "a page beyond the PDF fails its row: {r:?}"
    );
    assert_eq!(r[3][1], "", "no id for a failed row");
    assert_eq!(res[3], "OK", "{r:?}");
    assert!(
        res[4].contains('0') && res[4].contains("page"),
        "page 0 does not exist: {r:?}"
    );
    assert_eq!(res[5], "OK", "{r:?}");
    assert_eq!(bundle_counts(&app).await, [2, 13, 4]);

    let cid = campaign_named(&app, "mapped.zip").await;
    let markers = markers_of(&app, cid).await;
    check_page_markers(&app, &markers, cid, 3).await;
    let page_id = |n: usize| markers[n - 1]["id"].as_i64().unwrap();
    let expect: [(&str, Option<i64>); 4] = [
        ("first", Some(page_id(1))),
        ("third", Some(page_id(3))),
        ("loose", None),
        ("again first", Some(page_id(1))),
    ];
    for (row, (name, marker)) in [1usize, 2, 4, 6].into_iter().zip(expect) {
        let id: i64 = r[row][1].parse().unwrap();
        let (s, a) = json(
            app.admin(Method::GET, &format!("/assets/{id}"))
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(s, 200);
        assert_eq!(a["name"], name);
        assert_eq!(a["marker_id"].as_i64(), marker, "{a}");
        // The result holds what was applied, so it can be uploaded again as a plain CSV.
        let cell = marker.map(|m| m.to_string()).unwrap_or_default();
        assert_eq!(r[row][4], cell, "{r:?}");
    }
    // A failed row keeps the page number it was given.
    assert_eq!(r[3][4], "4", "{r:?}");
    healthy(&app).await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn res_links_are_rewritten_and_served() {
    let app = spawn_app().await;
    let data = random_bytes(5000);
    let image = random_bytes(3000);
    let csv = "op;name;url;content\r\n\
               c;one;res/data.bin;\"See res/img/b+é.bin. And (res/data.bin)\"\r\n\
               c;two;res/missing.png;hello\r\n\
               c;three;;\"<img src=\"\"res/img/b+é.bin\"\">\"\r\n\
               c;four;;\"pres/data.bin is no link; res/ alone neither\"\r\n";
    let bundle = build_zip(|z| {
        z.start_file("links.csv", deflated()).unwrap();
        z.write_all(csv.as_bytes()).unwrap();
        z.add_directory("res/", stored()).unwrap();
        z.add_directory("res/img/", stored()).unwrap();
        z.start_file("res/data.bin", deflated()).unwrap();
        z.write_all(&data).unwrap();
        z.start_file("res/img/b+é.bin", stored()).unwrap();
        z.write_all(&image).unwrap();
    });
    // Recognised by content: the bundle's name ends in .csv.
    let r = sync_rows(&app, "assets", "bundle.csv", bundle, &[]).await;
    assert_eq!(r[0], ["res", "id", "op", "name", "url", "content"]);
    let res: Vec<&str> = r[1..].iter().map(|x| x[0].as_str()).collect();
    assert_eq!(res[0], "OK", "{r:?}");
    assert!(
        res[1].contains("res/missing.png"),
        "a missing res/ file fails its row: {r:?}"
    );
    assert_eq!(r[2][1], "");
    assert_eq!(res[2], "OK", "{r:?}");
    assert_eq!(res[3], "OK", "{r:?}");
    assert_eq!(
        bundle_counts(&app).await,
        [0, 0, 3],
        "no campaign or marker without pages.pdf"
    );

    let one = asset(&app, &r[1][1]).await;
    let url = one["url"].as_str().unwrap().to_string();
    let b = bundle_of(&url, "assets", "res/data.bin");
    let base = format!("/media/files/assets/{b}/res");
    let image_url = format!("{base}/img/b%2B%C3%A9.bin");
    assert_eq!(
        one["content"],
        format!("See {image_url}. And ({base}/data.bin)")
    );
    assert_eq!(
        r[1][4], one["url"],
        "the result holds the stored file's URL"
    );
    assert_eq!(r[1][5], one["content"]);
    let three = asset(&app, &r[3][1]).await;
    assert_eq!(three["content"], format!("<img src=\"{image_url}\">"));
    let four = asset(&app, &r[4][1]).await;
    assert_eq!(
        four["content"], "pres/data.bin is no link; res/ alone neither",
        "only whole res/<path> words are links"
    );

    let (ctype, bytes) = fetch(&app, &url).await;
    assert_eq!(ctype, "application/octet-stream");
    assert!(bytes == data, "data.bin served as uploaded");
    let (_, bytes) = fetch(&app, &image_url).await;
    assert!(bytes == image, "img/b+é.bin served as uploaded");
    let r = app.client.get(app.url(&url)).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = app
        .admin(Method::GET, &format!("{base}/nothing.bin"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);

    // A plain CSV named .zip is a CSV: its res/ text stays as it is.
    let r = sync_rows(
        &app,
        "assets",
        "plain.zip",
        b"op;name;url\r\nc;five;res/data.bin\r\n".to_vec(),
        &[],
    )
    .await;
    assert_eq!(r[1][0], "OK", "{r:?}");
    assert_eq!(asset(&app, &r[1][1]).await["url"], "res/data.bin");
    healthy(&app).await;
    app.stop().await;
}

/// One hostile upload and what its refusal must say.
struct Hostile {
    what: &'static str,
    entity: &'static str,
    bytes: Vec<u8>,
    fields: Vec<(&'static str, String)>,
    status: u16,
    needle: &'static str,
}

fn hostile(what: &'static str, bytes: Vec<u8>, status: u16, needle: &'static str) -> Hostile {
    Hostile {
        what,
        entity: "assets",
        bytes,
        fields: Vec::new(),
        status,
        needle,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_bundles_are_refused_and_change_nothing() {
    let app = spawn_app().await;
    // Something to count: one of each.
    let c = app
        .create("campaigns", serde_json::json!({"name": "existing"}))
        .await;
    let cid = c["id"].as_i64().unwrap();
    let m = app
        .create(
            "markers",
            serde_json::json!({"name": "m", "campaign_id": cid}),
        )
        .await;
    app.create(
        "assets",
        serde_json::json!({"name": "a", "marker_id": m["id"]}),
    )
    .await;
    let before = bundle_counts(&app).await;
    assert_eq!(before, [1, 1, 1]);

    // Rows that would create something if a refusal let them through.
    let csv: &[u8] = b"op;name;marker_id;url\r\nc;hostile;1;res/a.bin\r\n";
    let pdf = sample_pdf(3);
    let res = random_bytes(2000);
    let valid = zip_of(&[("a.csv", csv), ("pages.pdf", &pdf), ("res/a.bin", &res)]);
    let plain_zip = zip_of(&[("a.csv", csv)]);

    let mut cases = vec![
        hostile(
            "../evil.csv",
            zip_of(&[("../evil.csv", csv)]),
            400,
            "escaping",
        ),
        hostile("/abs.csv", zip_of(&[("/abs.csv", csv)]), 400, "escaping"),
        hostile(
            "res/../../x",
            zip_of(&[("a.csv", csv), ("res/../../x", b"x")]),
            400,
            "escaping",
        ),
        hostile(
            "backslashes",
            zip_of(&[("a.csv", csv), ("res\\..\\..\\x", b"x")]),
            400,
            "escaping",
        ),
        hostile(
            "a symlink entry",
            build_zip(|z| {
                z.start_file("a.csv", deflated()).unwrap();
                z.write_all(csv).unwrap();
                z.add_symlink("res/a.bin", "/etc/passwd", SimpleFileOptions::default())
                    .unwrap();
            }),
            400,
            "link",
        ),
        hostile(
            "two CSVs",
            zip_of(&[("a.csv", csv), ("b.csv", csv)]),
            400,
            "2 CSV",
        ),
        hostile("no CSV", zip_of(&[("pages.pdf", &pdf)]), 400, "no CSV"),
        hostile(
            "a CSV in a folder",
            zip_of(&[("sub/a.csv", csv)]),
            400,
            "sub/a.csv",
        ),
        hostile(
            "an unknown top-level file",
            zip_of(&[("a.csv", csv), ("notes.txt", b"hello")]),
            400,
            "notes.txt",
        ),
        hostile(
            "an unknown folder",
            build_zip(|z| {
                z.start_file("a.csv", deflated()).unwrap();
                z.write_all(csv).unwrap();
                z.add_directory("docs/", stored()).unwrap();
            }),
            400,
            "docs/",
        ),
        hostile(
            "a truncated ZIP",
            valid[..valid.len() / 2].to_vec(),
            400,
            "the ZIP archive cannot be used",
        ),
        hostile(
            "a zip bomb",
            build_zip(|z| {
                z.start_file("a.csv", deflated()).unwrap();
                z.write_all(csv).unwrap();
                z.start_file("res/zeros.bin", deflated().large_file(true))
                    .unwrap();
                let zeros = vec![0u8; 1 << 20];
                for _ in 0..300 {
                    z.write_all(&zeros).unwrap();
                }
            }),
            413,
            "expands",
        ),
        hostile(
            "over 10000 entries",
            build_zip(|z| {
                z.start_file("a.csv", stored()).unwrap();
                z.write_all(csv).unwrap();
                for i in 0..10_000 {
                    z.start_file(format!("res/{i}"), stored()).unwrap();
                }
            }),
            413,
            "entries",
        ),
        hostile(
            "an encrypted entry",
            patch_headers(plain_zip.clone(), 6, 8, |f| f[0] |= 1),
            400,
            "encrypted",
        ),
        hostile(
            "an unsupported compression method",
            patch_headers(
                build_zip(|z| {
                    z.start_file("a.csv", stored()).unwrap();
                    z.write_all(csv).unwrap();
                }),
                8,
                10,
                |m| m.copy_from_slice(&12u16.to_le_bytes()),
            ),
            400,
            "compression",
        ),
        hostile(
            "a PDF of 100000 nested arrays",
            zip_of(&[
                ("a.csv", csv),
                ("pages.pdf", &deep_pdf("[", "]", 100_000, Deep::InPage)),
            ]),
            400,
            "pages.pdf is not a readable PDF",
        ),
        hostile(
            "a PDF of 100000 nested dictionaries",
            zip_of(&[
                ("a.csv", csv),
                ("pages.pdf", &deep_pdf("<< /A", ">>", 100_000, Deep::AsRoot)),
            ]),
            400,
            "pages.pdf is not a readable PDF",
        ),
        hostile(
            "a PDF that is not a PDF",
            zip_of(&[("a.csv", csv), ("pages.pdf", b"GIF89a, not a PDF at all")]),
            400,
            "pages.pdf",
        ),
        hostile(
            "a PDF with a header and nothing else",
            zip_of(&[("a.csv", csv), ("pages.pdf", b"%PDF-1.4\n garbage\n%%EOF")]),
            400,
            "pages.pdf",
        ),
        hostile(
            "a res/ name with an empty segment (after pages.pdf was stored)",
            zip_of(&[
                ("a.csv", csv),
                ("pages.pdf", &pdf),
                ("res/a.bin", &res),
                ("res/x//y.bin", b"y"),
            ]),
            400,
            "res/x//y.bin",
        ),
        hostile(
            "a CSV with an unknown column (after pages.pdf and res/ were stored)",
            zip_of(&[
                ("a.csv", b"op;name;colour\r\nc;x;red\r\n"),
                ("pages.pdf", &pdf),
                ("res/a.bin", &res),
            ]),
            400,
            "colour",
        ),
        Hostile {
            what: "a campaign_id that does not exist",
            fields: vec![("campaign_id", "999999".into())],
            needle: "campaign_id",
            ..hostile("", valid.clone(), 400, "")
        },
        Hostile {
            what: "a campaign_id that is not a number",
            fields: vec![("campaign_id", "abc".into())],
            needle: "campaign_id",
            ..hostile("", valid.clone(), 400, "")
        },
        Hostile {
            what: "pages.pdf for an entity without markers",
            entity: "users",
            ..hostile(
                "",
                zip_of(&[("u.csv", b"op;login\r\nc;zz\r\n"), ("pages.pdf", &pdf)]),
                400,
                "does not use",
            )
        },
        Hostile {
            what: "res/ for an entity without links",
            entity: "users",
            ..hostile(
                "",
                zip_of(&[("u.csv", b"op;login\r\nc;zz\r\n"), ("res/a.bin", &res)]),
                400,
                "does not use",
            )
        },
    ];
    // The names really are in the archives as written.
    assert!(!find_all(&cases[0].bytes, b"../evil.csv").is_empty());
    assert!(!find_all(&cases[1].bytes, b"/abs.csv").is_empty());
    let users_before = count(&app, "users").await;

    for case in cases.drain(..) {
        let fields: Vec<(&str, &str)> = case.fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let started = Instant::now();
        let r = upload::upload_response(
            &app,
            upload::form(case.entity, "hostile.zip", case.bytes, &fields),
        )
        .await;
        let s = r.status().as_u16();
        let text = r.text().await.unwrap();
        let b: Json = serde_json::from_str(&text)
            .unwrap_or_else(|_| panic!("{}: not refused ({s}): {text}", case.what));
        let code = error_code(&b);
        assert_eq!(s, case.status, "{}: {b}", case.what);
        let want = if s == 413 {
            "payload_too_large"
        } else {
            "bad_request"
        };
        assert_eq!(code, want, "{}: {b}", case.what);
        let desc = b["description"].as_str().unwrap();
        assert!(
            desc.to_lowercase().contains(&case.needle.to_lowercase()),
            "{}: `{}` not in {b}",
            case.what,
            case.needle
        );
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{} took {:?}",
            case.what,
            started.elapsed()
        );
        assert_eq!(
            bundle_counts(&app).await,
            before,
            "{}: nothing applied",
            case.what
        );
        assert_eq!(count(&app, "users").await, users_before, "{}", case.what);
        healthy(&app).await;
    }
    assert!(
        list(&app, "/bgrs").await.is_empty(),
        "no request was recorded"
    );

    // Files stored before a refusal are removed; no scratch file is left.
    let data = app.dir.path().join("data");
    let start = Instant::now();
    loop {
        let left: Vec<_> = files_below(&data.join("media").join("files"))
            .into_iter()
            .chain(files_below(&data.join("uploads")))
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "left behind: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    healthy(&app).await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundle_runs_in_the_background() {
    let app = spawn_app().await;
    let pic = random_bytes(4000);
    let csv = "op;name;marker_id;url;content\r\n\
               c;first;1;res/pic.bin;\"look: res/pic.bin\"\r\n\
               c;second;2;;\r\n\
               c;beyond;9;;\r\n";
    let bundle = zip_of(&[
        ("bg.csv", csv.as_bytes()),
        ("pages.pdf", &sample_pdf(2)),
        ("res/pic.bin", &pic),
    ]);
    let rid = upload::start_background_named(&app, "assets", "bg.zip", bundle, &[]).await;
    let rec = app.wait_ended(&rid, Duration::from_secs(60)).await;
    assert_eq!(rec["status_id"], "4", "{rec}");
    assert_eq!(rec["status_name"], "finished");
    assert_eq!(rec["status"], "200");
    assert_eq!(rec["progress"], "100.00");
    assert_eq!(rec["name"], "uploader");
    assert_eq!(rec["result"], format!("media/keep1m/bgrs.{rid}.result.csv"));

    let d: Vec<String> = details(&app, &rid).await.into_iter().map(|e| e.1).collect();
    let at = |pred: &dyn Fn(&str) -> bool| {
        d.iter()
            .position(|l| pred(l))
            .unwrap_or_else(|| panic!("missing in {d:?}"))
    };
    let started = at(&|l| l == "zip extraction started");
    let completed = at(&|l| l.starts_with("zip extraction completed"));
    let line1 = at(&|l| l == "Line: 1 done. Result: 200. OK");
    let line2 = at(&|l| l == "Line: 2 done. Result: 200. OK");
    let line3 = at(&|l| l.starts_with("Line: 3 done. Result: 400. "));
    assert!(
        started < completed && completed < line1 && line1 < line2 && line2 < line3,
        "{d:?}"
    );
    assert!(d[completed].contains("pages.pdf"), "{d:?}");
    assert!(d[line3].contains('9') && d[line3].contains("page"), "{d:?}");
    assert_eq!(d.last().unwrap(), "done", "{d:?}");

    let r = app
        .admin(Method::GET, &format!("/v2.5/bgrs/{rid}/result"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/csv")
    );
    let r = upload::rows(&r.text().await.unwrap());
    assert_eq!(
        r[0],
        ["res", "id", "op", "name", "marker_id", "url", "content"]
    );
    assert_eq!((r[1][0].as_str(), r[2][0].as_str()), ("OK", "OK"), "{r:?}");
    assert!(r[3][0].contains("page"), "{r:?}");
    assert_eq!(bundle_counts(&app).await, [1, 2, 2]);

    let cid = campaign_named(&app, "bg.zip").await;
    let markers = markers_of(&app, cid).await;
    check_page_markers(&app, &markers, cid, 2).await;
    let first = asset(&app, &r[1][1]).await;
    assert_eq!(first["marker_id"], markers[0]["id"]);
    let url = first["url"].as_str().unwrap();
    bundle_of(url, "assets", "res/pic.bin");
    assert_eq!(first["content"], format!("look: {url}"));
    assert!(fetch(&app, url).await.1 == pic);
    assert_eq!(asset(&app, &r[2][1]).await["marker_id"], markers[1]["id"]);
    healthy(&app).await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_pages_and_rows_in_the_background() {
    const N: usize = 2000;
    let app = spawn_app().await;
    let t0 = Instant::now();
    let mut csv = String::from("op;name;marker_id;url;content\r\n");
    for n in 1..=N {
        csv.push_str(&format!("c;asset {n};{n};;\r\n"));
    }
    let bundle = zip_of(&[("big.csv", csv.as_bytes()), ("pages.pdf", &sample_pdf(N))]);
    let built = t0.elapsed();
    let rid = upload::start_background_named(&app, "assets", "big.zip", bundle, &[]).await;
    let accepted = t0.elapsed();

    // Every progress value seen while it runs, in order.
    let mut seen: Vec<String> = Vec::new();
    let start = Instant::now();
    let polled = async {
        loop {
            let (s, rec) = app.bg_record(&rid).await;
            assert_eq!(s, 200, "{rec}");
            let p = rec["progress"].as_str().unwrap().to_string();
            if seen.last() != Some(&p) {
                seen.push(p);
            }
            if rec["status_id"] != "2" {
                break rec;
            }
            assert!(
                start.elapsed() < Duration::from_secs(150),
                "not finished: {rec}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    // Three more pollers beside that one, without pauses: a chunk of 1,000 rows commits within
    // a few milliseconds of the one before, less than one poll and its pause take.
    let poller = |delay: u64| {
        let (app, rid) = (&app, &rid);
        async move {
            tokio::time::sleep(Duration::from_micros(delay)).await;
            let mut values = BTreeSet::new();
            loop {
                let (_, rec) = app.bg_record(rid).await;
                values.insert(rec["progress"].as_str().unwrap_or("").to_string());
                if rec["status_id"] != "2" || start.elapsed() > Duration::from_secs(150) {
                    break values;
                }
            }
        }
    };
    let (rec, more1, more2, more3) = tokio::join!(polled, poller(500), poller(1000), poller(1500));
    let ran = t0.elapsed();
    assert_eq!(rec["status_id"], "4", "{rec}");
    assert_eq!(rec["status"], "200", "{rec}");
    assert_eq!(rec["progress"], "100.00");
    let values: Vec<f64> = seen.iter().map(|p| p.parse().unwrap()).collect();
    assert!(
        values.windows(2).all(|w| w[0] <= w[1]),
        "progress never goes down: {seen:?}"
    );
    assert!(
        seen.iter().all(|p| p.split_once('.').unwrap().1.len() == 2),
        "{seen:?}"
    );
    let below: BTreeSet<&String> = seen
        .iter()
        .chain(more1.iter().chain(&more2).chain(&more3))
        .filter(|p| *p != "100.00")
        .collect();

    let d = details(&app, &rid).await;
    let lines: Vec<&(String, String)> = d.iter().filter(|e| e.1.starts_with("Line: ")).collect();
    assert_eq!(lines.len(), N, "one detail per row");
    for (i, (_, l)) in lines.iter().enumerate() {
        assert_eq!(*l, format!("Line: {} done. Result: 200. OK", i + 1));
    }
    // Rows run in 1000-row chunks, each committing its lines at once (one timestamp each).
    let chunk_dts: Vec<BTreeSet<&str>> = lines
        .chunks(1000)
        .map(|c| c.iter().map(|e| e.0.as_str()).collect())
        .collect();
    assert!(chunk_dts.iter().all(|c| c.len() == 1), "{chunk_dts:?}");
    let chunks_apart = chunk_dts[0] != chunk_dts[1];
    // On SQLite each chunk commits with its progress. On PostgreSQL a span of chunks commits
    // once it has run 250 ms (or 16 chunks), so both of these chunks may commit together and
    // the progress then goes from 0 to 100 at once: nothing between to see.
    let chunks_commit_alone = std::env::var("TEST_DATABASE_URL").is_err();
    assert!(
        !chunks_commit_alone || below.len() >= 2 || chunks_apart,
        "progress was seen moving ({below:?}) or the two row chunks committed apart ({chunk_dts:?})"
    );
    assert!(
        d.iter().any(|e| e
            .1
            .starts_with(&format!("{N} markers created from pages.pdf"))),
        "{:?}",
        &d[..d.len().min(10)]
    );
    assert_eq!(d.last().unwrap().1, "done");

    assert_eq!(bundle_counts(&app).await, [1, N as i64, N as i64]);
    let cid = campaign_named(&app, "big.zip").await;
    let markers = markers_of(&app, cid).await;
    assert_eq!(markers.len(), N);
    let by_name: HashMap<String, i64> = markers
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap().to_string(),
                m["id"].as_i64().unwrap(),
            )
        })
        .collect();
    for (i, m) in markers.iter().enumerate() {
        assert_eq!(m["page"].as_i64(), Some(i as i64 + 1));
    }
    assert!(by_name.contains_key("page 001") && by_name.contains_key("page 2000"));
    let assets = list(&app, "/assets?limit=10000").await;
    assert_eq!(assets.len(), N);
    for a in &assets {
        let n: usize = a["name"]
            .as_str()
            .unwrap()
            .strip_prefix("asset ")
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(
            a["marker_id"].as_i64(),
            Some(by_name[&format!("page {n:03}")]),
            "{a}"
        );
    }
    // The last page is served as its own one-page PDF.
    let last = markers.last().unwrap()["file"].as_str().unwrap();
    bundle_of(last, "markers", "pages/page-2000.pdf");
    let (_, bytes) = fetch(&app, last).await;
    let doc = Document::load_mem(&bytes).unwrap();
    let pages = doc.get_pages();
    assert_eq!(pages.len(), 1);
    assert!(String::from_utf8_lossy(&doc.get_page_content(pages[&1])).contains("(Page 2000)"));
    healthy(&app).await;
    eprintln!(
        "2000 pages: built {built:?}, accepted after {accepted:?}, finished after {ran:?}; progress seen {seen:?}"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pdf_over_the_page_limit_is_refused() {
    let app = spawn_with(|s| s.pdf_max_pages = 5).await;
    let csv: &[u8] = b"op;name;marker_id\r\nc;x;1\r\n";
    let r = upload::upload_response(
        &app,
        upload::form(
            "assets",
            "six.zip",
            zip_of(&[("a.csv", csv), ("pages.pdf", &sample_pdf(6))]),
            &[],
        ),
    )
    .await;
    let (s, b) = json(r).await;
    assert_eq!((s, error_code(&b).as_str()), (400, "bad_request"), "{b}");
    let desc = b["description"].as_str().unwrap();
    assert!(desc.contains("6 pages") && desc.contains('5'), "{b}");
    assert_eq!(bundle_counts(&app).await, [0, 0, 0]);
    healthy(&app).await;
    // At the limit it is accepted.
    let r = sync_rows(
        &app,
        "assets",
        "five.zip",
        zip_of(&[("a.csv", csv), ("pages.pdf", &sample_pdf(5))]),
        &[],
    )
    .await;
    assert_eq!(r[1][0], "OK", "{r:?}");
    assert_eq!(bundle_counts(&app).await, [1, 5, 1]);
    app.stop().await;
}
