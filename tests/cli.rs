//! The `entiserve` binary: `check`, and `serve` on a fresh data directory.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_entiserve"))
}

#[test]
fn check_passes_on_the_shipped_entities() {
    let out = bin()
        .args(["check", "--entities"])
        .arg(common::shipped_entities())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn check_reports_every_error_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("broken.yaml"),
        "name: broken\nfields:\n  a: { type: string }\n  b: { type: strng }\n  c:\n    type: reference\n    entity: nowhere\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("worse.yaml"), "fields: [unclosed\n").unwrap();
    let out = bin()
        .args(["check", "--entities"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    let broken = dir.path().join("broken.yaml").display().to_string();
    assert!(text.contains(&format!("{broken}:4: ")), "{text}");
    assert!(text.contains(&format!("{broken}:7: ")), "{text}");
    assert!(text.contains("worse.yaml:"), "{text}");
}

#[test]
fn serve_starts_on_sqlite_and_prints_the_admin_password() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = bin()
        .args(["serve", "--bind", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .arg("--entities")
        .arg(common::shipped_entities())
        .env_remove("ENTISERVE_ADMIN_PASSWORD")
        .env_remove("DATABASE_URL")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut password = None;
    let mut addr = None;
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(p) = line.strip_prefix("created user `admin` with password: ") {
            password = Some(p.to_string());
        }
        if let Some(a) = line.strip_prefix("entiserve listening on http://") {
            addr = Some(a.to_string());
            break;
        }
    }
    let (password, addr) = (
        password.expect("password printed"),
        addr.expect("address printed"),
    );
    std::thread::spawn(move || for _ in lines {});
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let r = reqwest::Client::new()
            .get(format!("http://{addr}/users/me"))
            .basic_auth("admin", Some(&password))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    });
    assert!(dir.path().join("data/entiserve.db").exists());
    // SIGTERM: a clean exit.
    unsafe_kill(child.id(), "TERM");
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

fn unsafe_kill(pid: u32, sig: &str) {
    Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
}
