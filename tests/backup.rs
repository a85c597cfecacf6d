//! Backups of the embedded default (SQLite in the data directory), taken while a server writes:
//! restored into a new directory, a server starts on them and finishes the upload the backup cut
//! off, every row once; altered, cut-off and misplaced restores are refused.

mod common;
#[path = "support/pdf.rs"]
mod pdf_sample;

use common::*;
use entiserve::backup;
use entiserve::settings::Settings;
use reqwest::Method;
use reqwest::multipart::{Form, Part};
use serde_json::json;
use std::io::{Cursor, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const ROWS: usize = 1_000_000;

fn sqlite_settings(dir: &Path, entities: &Path) -> Settings {
    let mut s = Settings::new(dir.join("data"), entities);
    s.bind = "127.0.0.1:0".parse().unwrap();
    s.admin_password = Some(ADMIN_PASSWORD.into());
    s.shutdown_grace = Duration::from_secs(2);
    s.helper_exe = PathBuf::from(env!("CARGO_BIN_EXE_entiserve"));
    s
}

async fn sqlite_server() -> TestApp {
    let dir = tempfile::tempdir().unwrap();
    let s = sqlite_settings(dir.path(), &shipped_entities());
    start(dir, shipped_entities(), s, None).await
}

/// A synchronous upload of a ZIP bundle of `files` for `entity`, which must apply every row.
async fn bundle(app: &TestApp, entity: &str, files: &[(&str, &[u8])]) {
    let mut z = zip::ZipWriter::new(Cursor::new(Vec::new()));
    for (name, bytes) in files {
        z.start_file(*name, zip::write::SimpleFileOptions::default())
            .unwrap();
        z.write_all(bytes).unwrap();
    }
    let zipped = z.finish().unwrap().into_inner();
    let form = Form::new()
        .text("entity", entity.to_string())
        .part("csvfile", Part::bytes(zipped).file_name("bundle.zip"));
    let r = app
        .admin(Method::POST, "/tools/uploader.ex.php")
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    assert!(text.lines().skip(1).all(|l| l.starts_with("OK")), "{text}");
}

/// The uploader form of `n` campaigns named `prefix-<i>`, run in the `background` or not.
fn rows_form(prefix: &str, n: usize, background: bool) -> Form {
    let mut csv = String::from("op,name\n");
    for i in 0..n {
        csv.push_str(&format!("c,{prefix}-{i}\n"));
    }
    let bgrs = if background { "1" } else { "0" };
    upload::form("campaigns", "rows.csv", csv.into_bytes(), &[("bgrs", bgrs)])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backup_taken_during_an_upload_restores_and_the_upload_finishes_once() {
    let app = sqlite_server().await;
    app.create_user("reader", "reader-password").await;
    let (s, small) = upload::upload(&app, rows_form("small", 3, false)).await;
    assert_eq!(s, 200, "{small}");
    // Stored files of both plugins: one-page PDFs of markers and res/ files of assets.
    let pdf = pdf_sample::sample_pdf(3);
    bundle(
        &app,
        "markers",
        &[("markers.csv", b"op;name\r\n"), ("pages.pdf", &pdf)],
    )
    .await;
    bundle(
        &app,
        "assets",
        &[
            ("assets.csv", b"op;name;url\r\nc;one;res/data.bin\r\n"),
            ("res/data.bin", &[7u8; 5000]),
        ],
    )
    .await;
    let (s, body) = upload::upload(&app, rows_form("row", ROWS, true)).await;
    assert_eq!(s, 202, "{body}");
    let rid = serde_json::from_str::<serde_json::Value>(&body).unwrap()["request"]
        .as_str()
        .unwrap()
        .to_string();
    // Single creates beside it, while the upload runs.
    let writer = {
        let (client, base) = (app.client.clone(), app.base.clone());
        tokio::spawn(async move {
            for i in 0..200 {
                let r = client
                    .post(format!("{base}/campaigns"))
                    .basic_auth("admin", Some(ADMIN_PASSWORD))
                    .json(&json!({"name": format!("single-{i}")}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), 200);
            }
        })
    };
    // Wait until the upload is under way, then back up.
    loop {
        let (_, rec) = json(
            app.admin(Method::GET, &format!("/bgrs/{rid}"))
                .send()
                .await
                .unwrap(),
        )
        .await;
        let p: f64 = rec[0]["progress"].as_str().unwrap().parse().unwrap();
        assert!(
            p < 100.0,
            "the upload finished before the backup: make it longer"
        );
        if p > 5.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let target = tempfile::tempdir().unwrap();
    let inst = backup::Installation {
        data_dir: app.dir.path().join("data"),
        database_url: format!(
            "sqlite://{}",
            app.dir.path().join("data/entiserve.db").display()
        ),
    };
    let to = target.path().to_path_buf();
    let taken = tokio::task::spawn_blocking(move || backup::backup(&inst, &to))
        .await
        .unwrap()
        .expect("the backup completes");
    writer.await.unwrap();
    assert_eq!(backup::list(target.path()), vec![taken.clone()]);
    app.stop().await;

    // Restore into a new directory and start a server there.
    let restored = tempfile::tempdir().unwrap();
    backup::restore(&taken, &restored.path().join("data")).expect("restored");
    let s = sqlite_settings(restored.path(), &shipped_entities());
    let app = start(restored, shipped_entities(), s, None).await;
    let rec = app.wait_ended(&rid, Duration::from_secs(240)).await;
    assert_eq!(rec["status_id"], "4", "{rec}");
    let db = rusqlite::Connection::open(app.dir.path().join("data/entiserve.db")).unwrap();
    let (all, distinct): (i64, i64) = db
        .query_row(
            "SELECT COUNT(*), COUNT(DISTINCT name) FROM campaigns WHERE name LIKE 'row-%'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(
        (all, distinct),
        (ROWS as i64, ROWS as i64),
        "every row exactly once"
    );
    // The earlier result file is there, byte for byte; existing users sign in.
    let r = app
        .client
        .post(app.url("/auth/token"))
        .json(&json!({"login": "reader", "password": "reader-password"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let files = backup::verify(&taken).unwrap().files;
    let result = files
        .iter()
        .find(|f| f.path.starts_with("files/media/keep1m/") && !f.path.contains(&rid))
        .expect("the finished upload's result file in the backup");
    let rel = result.path.trim_start_matches("files/");
    let r = app
        .admin(Method::GET, &format!("/{rel}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "the stored result file downloads");
    let bytes = r.bytes().await.unwrap();
    use sha2::Digest;
    assert_eq!(hex::encode(sha2::Sha256::digest(&bytes)), result.sha256);
    // Every stored file (3 one-page PDFs, one res/ file) downloads with its checksum.
    let stored: Vec<_> = files
        .iter()
        .filter(|f| f.path.starts_with("files/media/files/"))
        .collect();
    assert_eq!(stored.len(), 4, "{stored:?}");
    for f in stored {
        let r = app
            .admin(
                Method::GET,
                &format!("/{}", f.path.trim_start_matches("files/")),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{}", f.path);
        let bytes = r.bytes().await.unwrap();
        assert_eq!(
            hex::encode(sha2::Sha256::digest(&bytes)),
            f.sha256,
            "{}",
            f.path
        );
    }
    app.stop().await;
}

#[tokio::test]
async fn altered_cut_off_and_misplaced_restores_are_refused() {
    let app = sqlite_server().await;
    let (s, _) = upload::upload(&app, rows_form("x", 10, false)).await;
    assert_eq!(s, 200);
    let target = tempfile::tempdir().unwrap();
    let data = app.dir.path().join("data");
    let out = Command::new(env!("CARGO_BIN_EXE_entiserve"))
        .args(["backup", "--to"])
        .arg(target.path())
        .arg("--data-dir")
        .arg(&data)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let taken = PathBuf::from(String::from_utf8_lossy(&out.stdout).lines().last().unwrap());
    assert!(taken.join(backup::MANIFEST).is_file());

    // Into a directory that is not empty: refused.
    let busy = tempfile::tempdir().unwrap();
    std::fs::write(busy.path().join("something"), "x").unwrap();
    let why = backup::restore(&taken, busy.path())
        .unwrap_err()
        .to_string();
    assert!(
        why.contains("the target is not empty: nothing was restored"),
        "{why}"
    );

    // One byte altered: refused before anything is written, naming the file.
    let db = taken.join(backup::DATABASE);
    let mut bytes = std::fs::read(&db).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 1;
    std::fs::write(&db, &bytes).unwrap();
    let fresh = tempfile::tempdir().unwrap();
    let target_dir = fresh.path().join("data");
    let out = Command::new(env!("CARGO_BIN_EXE_entiserve"))
        .args(["restore", "--from"])
        .arg(&taken)
        .arg("--data-dir")
        .arg(&target_dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("`entiserve.db` does not match its checksum: nothing was restored"),
        "{err}"
    );
    assert!(!target_dir.exists(), "nothing written");
    app.stop().await;

    // A backup killed half-way is not listed, and cannot be restored.
    let big = tempfile::tempdir().unwrap();
    rusqlite::Connection::open(big.path().join("entiserve.db"))
        .unwrap()
        .execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
        .unwrap();
    let uploads = big.path().join("uploads");
    std::fs::create_dir_all(&uploads).unwrap();
    for i in 0..8 {
        let f = std::fs::File::create(uploads.join(format!("part{i}"))).unwrap();
        f.set_len(64 << 20).unwrap();
    }
    let cut = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_entiserve"))
        .args(["backup", "--to"])
        .arg(cut.path())
        .arg("--data-dir")
        .arg(big.path())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _ = child.kill();
    let status = child.wait().unwrap();
    assert!(!status.success(), "killed before it finished");
    let started: Vec<PathBuf> = std::fs::read_dir(cut.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(started.len(), 1, "the backup had begun");
    assert!(
        backup::list(cut.path()).is_empty(),
        "a cut-off backup is not listed"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_entiserve"))
        .args(["backup", "--list", "--to"])
        .arg(cut.path())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    let why = backup::restore(&started[0], &cut.path().join("restored"))
        .unwrap_err()
        .to_string();
    assert!(why.contains("not a complete backup"), "{why}");

    // Pruning after a complete backup removes one cut off long before it, and nothing that
    // is not named like a backup.
    std::fs::remove_dir_all(&uploads).unwrap();
    let old = cut.path().join("20000101000000-abcdef");
    std::fs::rename(&started[0], &old).unwrap();
    std::fs::create_dir(cut.path().join("notes")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_entiserve"))
        .args(["backup", "--to"])
        .arg(cut.path())
        .arg("--data-dir")
        .arg(big.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let complete = backup::list(cut.path());
    assert_eq!(complete.len(), 1);
    let removed = backup::prune(cut.path(), 1).unwrap();
    assert_eq!(removed, vec![old.clone()]);
    assert!(!old.exists());
    assert!(cut.path().join("notes").is_dir(), "not a backup: kept");
    assert_eq!(backup::list(cut.path()), complete);
    // One cut off recently may still be another taker's running backup: kept.
    let recent = complete[0]
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    let running = cut.path().join(format!("{}-000000", &recent[..14]));
    std::fs::create_dir(&running).unwrap();
    let newer = Command::new(env!("CARGO_BIN_EXE_entiserve"))
        .args(["backup", "--to"])
        .arg(cut.path())
        .arg("--data-dir")
        .arg(big.path())
        .output()
        .unwrap();
    assert!(newer.status.success(), "{newer:?}");
    backup::prune(cut.path(), 1).unwrap();
    assert!(
        running.is_dir(),
        "a recent backup without a manifest is kept"
    );
}

#[tokio::test]
async fn scheduled_backups_are_taken_and_only_the_newest_kept() {
    let dir = tempfile::tempdir().unwrap();
    let target = tempfile::tempdir().unwrap();
    let mut s = sqlite_settings(dir.path(), &shipped_entities());
    s.backup_to = Some(target.path().display().to_string());
    s.backup_every = Duration::from_millis(400);
    s.backup_keep = 2;
    let app = start(dir, shipped_entities(), s, None).await;
    app.create("campaigns", json!({"name": "kept"})).await;
    // Wait until the first backup has been taken and later removed for newer ones.
    let start = std::time::Instant::now();
    let mut first = None;
    loop {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "backups are taken and pruned"
        );
        let kept = backup::list(target.path());
        // A new backup is published before the oldest is pruned: for that moment there is
        // one more than are kept.
        assert!(
            kept.len() <= 3,
            "at most 2 kept, and the one just taken: {kept:?}"
        );
        match (&first, kept.first()) {
            (None, Some(f)) => first = Some(f.clone()),
            (Some(f), Some(now)) if now != f && kept.len() == 2 => break,
            _ => {}
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The age of the last good backup is in the metrics.
    let text = app
        .admin(Method::GET, "/metrics")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let age: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("entiserve_backup_age_seconds "))
        .unwrap_or_else(|| panic!("no backup age in {text}"))
        .trim()
        .parse()
        .unwrap();
    assert!((0.0..30.0).contains(&age), "{age}");
    app.stop().await;
    let kept = backup::list(target.path());
    assert!(kept.len() <= 3 && !kept.is_empty(), "{kept:?}");
    let newest = kept.last().unwrap();
    let restored = tempfile::tempdir().unwrap();
    backup::restore(newest, &restored.path().join("data")).unwrap();
}

#[tokio::test]
async fn a_backup_records_which_database_and_where_it_was() {
    // SQLite, or PostgreSQL with TEST_DATABASE_URL.
    let app = spawn_app().await;
    let (s, _) = upload::upload(&app, rows_form("pos", 5, false)).await;
    assert_eq!(s, 200);
    let target = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_entiserve"));
    cmd.args(["backup", "--to"])
        .arg(target.path())
        .arg("--data-dir")
        .arg(app.dir.path().join("data"));
    let pg = app.db.as_ref().map(|d| d.url.clone());
    if let Some(url) = &pg {
        cmd.args(["--database-url", url]);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let taken = PathBuf::from(String::from_utf8_lossy(&out.stdout).lines().last().unwrap());
    let m = backup::verify(&taken).unwrap();
    assert!(
        m.files
            .iter()
            .any(|f| f.path.starts_with("files/media/keep1m/")),
        "the result file: {m:?}"
    );
    let restored = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_entiserve"))
        .args(["restore", "--from"])
        .arg(&taken)
        .arg("--data-dir")
        .arg(restored.path().join("data"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    match pg {
        Some(_) => {
            assert!(m.database.is_none());
            let db = m.postgres.as_deref().expect("the database named");
            assert!(db.starts_with("postgres"), "{db}");
            let lsn = m.postgres_lsn.as_deref().expect("its position");
            let (hi, lo) = lsn.split_once('/').expect("an LSN such as 0/3000148");
            assert!(
                [hi, lo]
                    .iter()
                    .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_hexdigit())),
                "{lsn}"
            );
            assert!(
                said.contains(&format!("write-ahead log position {lsn}")),
                "{said}"
            );
        }
        None => {
            assert!(m.database.is_some() && m.postgres.is_none() && m.postgres_lsn.is_none());
            assert!(restored.path().join("data/entiserve.db").is_file());
        }
    }
    app.stop().await;
}
