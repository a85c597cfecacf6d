//! A full disk, for real: the data directory is a small tmpfs mounted for the test (CI runs as
//! root; without the right to mount, the tests say so and are skipped, unless
//! `ENTISERVE_REQUIRE_TMPFS` is set). A 48 MB upload into it answers 507
//! `insufficient_storage`, applies nothing and leaves nothing behind, and the server goes
//! on serving. On PostgreSQL the database lives elsewhere and the data directory holds the
//! uploads; on SQLite it holds both.

mod common;

use common::process::Server;
use reqwest::Method;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs of `mb` MiB mounted at a fresh directory; unmounted when dropped.
struct Tmpfs {
    at: PathBuf,
    _dir: tempfile::TempDir,
}

impl Tmpfs {
    /// None, after saying why, when this process may not mount (not root): the test is then
    /// skipped, unless `ENTISERVE_REQUIRE_TMPFS` is set (`.ci/run` sets it), when it fails.
    fn mount(mb: u64) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().unwrap();
        let at = dir.path().join("disk");
        std::fs::create_dir(&at).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mb}m"), "tmpfs"])
            .arg(&at)
            .output()
            .expect("run mount");
        if out.status.success() {
            return Some(Tmpfs { at, _dir: dir });
        }
        let why = format!(
            "this test mounts a small tmpfs as a full disk, which needs root: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        assert!(
            std::env::var_os("ENTISERVE_REQUIRE_TMPFS").is_none(),
            "{why}"
        );
        eprintln!("SKIPPED: {why}");
        None
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.at).status();
    }
}

/// A server whose data directory is on a fresh tmpfs of `mb` MiB (its database there too on
/// SQLite, in a fresh PostgreSQL database otherwise).
async fn server_on_tmpfs(
    label: &'static str,
    mb: u64,
) -> Option<(Tmpfs, Option<common::PgDb>, Server)> {
    let disk = Tmpfs::mount(mb)?;
    let db = common::test_pg().await;
    let s = Server::start(
        label,
        &disk.at.join("data"),
        db.as_ref().map(|d| d.url.as_str()),
    );
    Some((disk, db, s))
}

/// Posts an upload form as the admin.
async fn post_upload(s: &Server, form: reqwest::multipart::Form) -> reqwest::Response {
    s.request(Method::POST, "/tools/uploader.ex.php")
        .multipart(form)
        .send()
        .await
        .unwrap()
}

/// Every file below `dir`, sorted.
fn sorted_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = common::files_below(dir);
    files.sort();
    files
}

/// A CSV of `rows` campaign creates, about 100 bytes a row.
fn big_csv(rows: usize) -> Vec<u8> {
    let mut csv = String::with_capacity(rows * 100);
    csv.push_str("op;id;name;description\n");
    for i in 0..rows {
        csv.push_str(&format!(
            "c;;campaign {i:08};a description long enough to make this file weigh what it should {i}\n"
        ));
    }
    csv.into_bytes()
}

#[tokio::test]
async fn an_upload_onto_a_full_disk_is_a_507_that_applies_and_leaves_nothing() {
    let Some((disk, _db, s)) = server_on_tmpfs("full", 24).await else {
        return;
    };
    let data = disk.at.join("data");
    let before = sorted_files(&data);
    let csv = big_csv(520_000);
    assert!(csv.len() > 48_000_000, "{}", csv.len());
    for background in [false, true] {
        let mut form = reqwest::multipart::Form::new()
            .text("entity", "campaigns")
            .part(
                "csvfile",
                reqwest::multipart::Part::bytes(csv.clone()).file_name("big.csv"),
            );
        if background {
            form = form.text("bgrs", "1");
        }
        let r = post_upload(&s, form).await;
        let status = r.status().as_u16();
        let body: serde_json::Value = r.json().await.unwrap();
        assert_eq!(status, 507, "{body}");
        assert_eq!(body["error"], "insufficient_storage", "{body}");
        assert!(
            body["description"].as_str().unwrap().contains("full"),
            "{body}"
        );
    }
    assert_eq!(s.campaign_count().await, 0, "nothing applied");
    assert_eq!(sorted_files(&data), before, "nothing left behind");
    // The server goes on: a small upload still works.
    let r = post_upload(
        &s,
        reqwest::multipart::Form::new()
            .text("entity", "campaigns")
            .part(
                "csvfile",
                reqwest::multipart::Part::bytes(b"op;id;name\nc;;small\n".to_vec())
                    .file_name("small.csv"),
            ),
    )
    .await;
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    assert_eq!(s.campaign_count().await, 1);
    drop(s);
}

/// Fills the file system of `dir` with one file until it is full; its path.
fn fill(dir: &Path) -> PathBuf {
    use std::io::Write;
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).unwrap();
    let block = vec![0u8; 1 << 20];
    while f.write_all(&block).is_ok() {}
    let _ = f.write_all(&block[..4096]);
    path
}

#[tokio::test]
async fn a_background_upload_waits_for_space_and_says_so() {
    let Some((disk, _db, s)) = server_on_tmpfs("waits", 320).await else {
        return;
    };
    let rows = 200_000;
    let form = reqwest::multipart::Form::new()
        .text("entity", "campaigns")
        .text("bgrs", "1")
        .part(
            "csvfile",
            reqwest::multipart::Part::bytes(big_csv(rows)).file_name("big.csv"),
        );
    let r = post_upload(&s, form).await;
    assert_eq!(r.status(), 202);
    let rid = r.json::<serde_json::Value>().await.unwrap()["request"]
        .as_str()
        .unwrap()
        .to_string();
    // The disk fills up while the rows run, for a few seconds.
    let filler = fill(&disk.at);
    let (status, _) = s.progress(&rid).await;
    assert_ne!(status, "4", "the upload finished before the disk was full");
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    let (status, _) = s.progress(&rid).await;
    assert_ne!(status, "4", "the upload finished on a full disk");
    std::fs::remove_file(filler).unwrap();
    s.wait_finished(&rid, std::time::Duration::from_secs(120))
        .await;
    assert_eq!(s.campaign_count().await, rows as u64, "every row, once");
    // Each wait has its line (on SQLite, whose database shares the full disk, written once
    // there is room again).
    let waits = s
        .details(&rid)
        .await
        .into_iter()
        .filter(|d| d.starts_with("waiting for space"))
        .count();
    assert!(waits >= 1, "{:?}", s.details(&rid).await);
}
