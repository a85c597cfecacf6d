//! Backups into an S3-compatible object store (SeaweedFS in CI): taken from a live server,
//! listed, pruned, refused when altered or cut off, and restored into a new data directory that
//! a server starts on.
//!
//! Needs `TEST_S3_URL` (for example `s3://entiserve-tests`, a bucket that exists) and the
//! `AWS_*` variables that reach it (`AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`, keys, region);
//! `scripts/seaweedfs.sh` starts such a store and prints them. Without `TEST_S3_URL` the test
//! says so and passes, unless `ENTISERVE_REQUIRE_S3` is set (CI sets it), in which case it
//! fails.

mod common;

use common::*;
use entiserve::backup::{self, Target};
use entiserve::settings::Settings;
use object_store::ObjectStoreExt;
use reqwest::Method;
use reqwest::multipart::{Form, Part};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn store_url() -> Option<String> {
    match std::env::var("TEST_S3_URL") {
        Ok(u) if !u.is_empty() => Some(format!(
            "{}/backups-{}",
            u.trim_end_matches('/'),
            hex::encode(rand::random::<[u8; 6]>())
        )),
        _ if std::env::var_os("ENTISERVE_REQUIRE_S3").is_some() => {
            panic!("TEST_S3_URL is not set and ENTISERVE_REQUIRE_S3 is: run scripts/seaweedfs.sh")
        }
        _ => {
            eprintln!(
                "SKIPPED: the object-store test needs TEST_S3_URL and AWS_* (scripts/seaweedfs.sh \
                 prints them); set ENTISERVE_REQUIRE_S3=1 to fail instead"
            );
            None
        }
    }
}

fn settings(dir: &Path) -> Settings {
    let mut s = Settings::new(dir.join("data"), shipped_entities());
    s.bind = "127.0.0.1:0".parse().unwrap();
    s.admin_password = Some(ADMIN_PASSWORD.into());
    s.shutdown_grace = Duration::from_secs(2);
    s.helper_exe = PathBuf::from(env!("CARGO_BIN_EXE_entiserve"));
    s
}

fn cli(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_entiserve"))
        .args(args)
        .output()
        .unwrap()
}

/// Uploads `n` campaigns `<name>-<i>` synchronously; returns the result file.
async fn upload_rows(app: &TestApp, name: &str, n: usize) -> bytes::Bytes {
    let mut csv = String::from("op,name\n");
    for i in 0..n {
        csv.push_str(&format!("c,{name}-{i}\n"));
    }
    let form = Form::new().text("entity", "campaigns").part(
        "csvfile",
        Part::bytes(csv.into_bytes()).file_name("rows.csv"),
    );
    let r = app
        .admin(Method::POST, "/tools/uploader.ex.php")
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.bytes().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backups_in_an_object_store_are_listed_pruned_checked_and_restored() {
    let Some(url) = store_url() else { return };
    let dir = tempfile::tempdir().unwrap();
    let s = settings(dir.path());
    let app = start(dir, shipped_entities(), s, None).await;
    app.create_user("reader", "reader-password").await;
    let kept = app.create("campaigns", json!({"name": "kept"})).await;
    upload_rows(&app, "row", 500).await;
    let data = app.dir.path().join("data");
    let data_arg = data.display().to_string();

    // Two backups through the command line: each prints its location last.
    let mut taken = Vec::new();
    for _ in 0..2 {
        let out = cli(&["backup", "--to", &url, "--data-dir", &data_arg]);
        assert!(out.status.success(), "{out:?}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let at = stdout.lines().last().unwrap().to_string();
        assert!(at.starts_with(&url), "{at}");
        taken.push(at);
    }
    let out = cli(&["backup", "--list", "--to", &url]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .collect::<Vec<_>>(),
        taken
    );

    // Pruned to the newest one; a backup cut off before it (no manifest) goes too.
    let target = Target::parse(&url).unwrap();
    let cut_off = entiserve::objects::open(&url)
        .unwrap()
        .child("20000101000000-000000");
    cut_off
        .write(backup::DATABASE, b"partial".to_vec())
        .await
        .unwrap();
    let other = entiserve::objects::open(&url).unwrap().child("notes");
    other
        .write("readme.txt", b"not a backup".to_vec())
        .await
        .unwrap();
    assert_eq!(backup::target::prune(&target, 1).await.unwrap(), 2);
    assert!(
        other.read("readme.txt").await.unwrap().is_some(),
        "not a backup: kept"
    );
    assert_eq!(
        backup::target::list(&target).await.unwrap(),
        vec![taken[1].clone()]
    );
    assert_eq!(cut_off.read(backup::DATABASE).await.unwrap(), None);
    let newest = taken[1].clone();
    app.stop().await;

    // Restored into a new directory: a server starts on it with the same objects, users and
    // result file.
    let restored = tempfile::tempdir().unwrap();
    let out = cli(&[
        "restore",
        "--from",
        &newest,
        "--data-dir",
        &restored.path().join("data").display().to_string(),
    ]);
    assert!(out.status.success(), "{out:?}");
    let s = settings(restored.path());
    let app = start(restored, shipped_entities(), s, None).await;
    let (status, got) = json(
        app.admin(Method::GET, &format!("/campaigns/{}", kept["id"]))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, got["name"].clone()), (200, json!("kept")));
    let r = app
        .admin(Method::GET, "/campaigns?name=row-499")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-total-count"], "1");
    let r = app
        .client
        .post(app.url("/auth/token"))
        .json(&json!({"login": "reader", "password": "reader-password"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "existing users sign in");
    let backup_place = entiserve::objects::open(&newest).unwrap();
    let manifest: backup::Manifest =
        serde_json::from_slice(&backup_place.read(backup::MANIFEST).await.unwrap().unwrap())
            .unwrap();
    let result = manifest
        .files
        .iter()
        .find(|f| f.path.starts_with("files/media/keep1m/"))
        .expect("the upload's result file in the backup");
    let r = app
        .admin(
            Method::GET,
            &format!("/{}", result.path.trim_start_matches("files/")),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    use sha2::Digest;
    assert_eq!(
        hex::encode(sha2::Sha256::digest(r.bytes().await.unwrap())),
        result.sha256
    );
    app.stop().await;

    // Into a directory that is not empty: refused.
    let busy = tempfile::tempdir().unwrap();
    std::fs::write(busy.path().join("something"), "x").unwrap();
    let out = cli(&[
        "restore",
        "--from",
        &newest,
        "--data-dir",
        &busy.path().display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not empty"));

    // One byte of the stored database altered: refused, naming the file, nothing written.
    let key = backup_place.key(backup::DATABASE);
    let mut bytes = backup_place
        .store
        .get(&key)
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .to_vec();
    let at = bytes.len() / 2;
    bytes[at] ^= 1;
    backup_place.store.put(&key, bytes.into()).await.unwrap();
    let fresh = tempfile::tempdir().unwrap();
    let into = fresh.path().join("data");
    let out = cli(&[
        "restore",
        "--from",
        &newest,
        "--data-dir",
        &into.display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("`entiserve.db` does not match its checksum"),
        "{err}"
    );
    assert!(!into.exists(), "nothing written");
    let leftovers: Vec<_> = std::fs::read_dir(fresh.path()).unwrap().collect();
    assert!(leftovers.is_empty(), "no scratch left: {leftovers:?}");

    // A backup without its manifest (cut off before the end) is neither listed nor restored.
    backup_place
        .store
        .delete(&backup_place.key(backup::MANIFEST))
        .await
        .unwrap();
    assert!(backup::target::list(&target).await.unwrap().is_empty());
    let out = cli(&[
        "restore",
        "--from",
        &newest,
        "--data-dir",
        &into.display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a complete backup"));
    backup_place.remove_all().await.unwrap();
    other.remove_all().await.unwrap();
}

/// A server that keeps its files in an object store (`--storage-url`): `backup --storage-url`
/// copies them from the store into the backup (a local folder here), and `restore
/// --storage-url` puts them into another, empty store, where a server on the restored database
/// serves them; a store that already holds files is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_files_of_a_server_on_an_object_store_are_backed_up_and_restored_into_another() {
    let Some(url) = store_url() else { return };
    let (files_a, files_b) = (format!("{url}/files-a"), format!("{url}/files-b"));
    let dir = tempfile::tempdir().unwrap();
    let mut s = settings(dir.path());
    s.storage_url = Some(files_a.clone());
    let app = start(dir, shipped_entities(), s, None).await;
    let result = upload_rows(&app, "stored", 300).await;
    let data = app.dir.path().join("data");
    let stored: Vec<_> = std::fs::read_dir(data.join("media/keep1m"))
        .map(|d| d.flatten().collect())
        .unwrap_or_default();
    assert!(stored.is_empty(), "the result file is in the store only");

    let backups = tempfile::tempdir().unwrap();
    let to = backups.path().display().to_string();
    let out = cli(&[
        "backup",
        "--to",
        &to,
        "--data-dir",
        &data.display().to_string(),
        "--storage-url",
        &files_a,
    ]);
    assert!(out.status.success(), "{out:?}");
    let at = String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap()
        .to_string();
    let manifest: backup::Manifest =
        serde_json::from_slice(&std::fs::read(Path::new(&at).join(backup::MANIFEST)).unwrap())
            .unwrap();
    let entry = manifest
        .files
        .iter()
        .find(|f| f.path.starts_with("files/media/keep1m/"))
        .expect("the store's result file in the backup");
    use sha2::Digest;
    assert_eq!(hex::encode(sha2::Sha256::digest(&result)), entry.sha256);
    app.stop().await;

    // Into a store that already holds files: refused, nothing written.
    let fresh = tempfile::tempdir().unwrap();
    let into = fresh.path().join("data");
    let restore_into = |store: &str| {
        let into = into.display().to_string();
        cli(&[
            "restore",
            "--from",
            &at,
            "--data-dir",
            &into,
            "--storage-url",
            store,
        ])
    };
    let out = restore_into(&files_a);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the target is not empty: nothing was restored"),
        "{err}"
    );
    assert!(err.contains("already holds files"), "{err}");
    assert!(!into.exists(), "nothing written");

    // Into an empty one: the files go there, and a server on it serves the result.
    let out = restore_into(&files_b);
    assert!(out.status.success(), "{out:?}");
    assert!(
        !into.join("media/keep1m").exists(),
        "kept in the store only"
    );
    let mut s = settings(fresh.path());
    s.storage_url = Some(files_b.clone());
    let app = start(fresh, shipped_entities(), s, None).await;
    let path = format!("/{}", entry.path.trim_start_matches("files/"));
    let r = app.admin(Method::GET, &path).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.bytes().await.unwrap(), result);
    app.stop().await;
    for place in [&files_a, &files_b] {
        entiserve::objects::open(place)
            .unwrap()
            .remove_all()
            .await
            .unwrap();
    }
}
