//! The `entiserve` binary: `check`, and `serve` on a fresh data directory.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_entiserve"))
}

/// Reads a starting server's stderr up to its `listening` line: the lines before it and the
/// address. The rest of stderr is drained on a thread.
fn until_listening(child: &mut std::process::Child) -> (Vec<String>, String) {
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut before = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(a) = line.strip_prefix("entiserve listening on http://") {
            let addr = a.to_string();
            std::thread::spawn(move || for _ in lines {});
            return (before, addr);
        }
        before.push(line);
    }
    panic!("the server ended before listening: {before:?}");
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
    let (before, addr) = until_listening(&mut child);
    let password = before
        .iter()
        .find_map(|l| l.strip_prefix("created user `admin` with password: "))
        .expect("password printed")
        .to_string();
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

#[test]
fn serve_in_an_empty_folder_serves_the_shipped_entities_built_in() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = bin()
        .current_dir(dir.path())
        .args(["serve", "--bind", "127.0.0.1:0"])
        .env("ENTISERVE_ADMIN_PASSWORD", "built-in-pass")
        .env("RUST_LOG", "info")
        .env_remove("ENTISERVE_ENTITIES")
        .env_remove("ENTISERVE_DATA_DIR")
        .env_remove("DATABASE_URL")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (before, addr) = until_listening(&mut child);
    assert!(
        before
            .iter()
            .any(|l| l.contains("serving the shipped entities built in")),
        "the start says where the entities come from"
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let client = reqwest::Client::new();
        for entity in ["campaigns", "markers", "assets", "users"] {
            let r = client
                .get(format!("http://{addr}/{entity}"))
                .basic_auth("admin", Some("built-in-pass"))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200, "{entity}");
        }
    });
    assert!(dir.path().join("data/entiserve.db").exists());
    assert!(
        !dir.path().join("entities").exists(),
        "nothing written but data"
    );
    unsafe_kill(child.id(), "TERM");
    assert!(child.wait().unwrap().success());
}

#[test]
fn init_writes_the_shipped_entities_an_example_of_hooks_and_an_example_upload_and_never_overwrites()
{
    let dir = tempfile::tempdir().unwrap();
    let out = bin().arg("init").arg(dir.path()).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    for name in ["assets", "campaigns", "markers", "users"] {
        let written =
            std::fs::read_to_string(dir.path().join(format!("entities/{name}.yaml"))).unwrap();
        let shipped =
            std::fs::read_to_string(common::shipped_entities().join(format!("{name}.yaml")))
                .unwrap();
        // campaigns.yaml names its example hooks, which write to the audit entity.
        let hooks: Vec<&str> = written
            .lines()
            .filter(|l| l.starts_with("hooks:"))
            .collect();
        let written: String = written
            .lines()
            .filter(|l| !l.starts_with("hooks:"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(written, shipped, "{name}.yaml");
        match name {
            "campaigns" => assert!(hooks[0].starts_with("hooks: campaigns.js "), "{hooks:?}"),
            _ => assert!(hooks.is_empty(), "{name}.yaml: {hooks:?}"),
        }
    }
    for file in [
        "audit.yaml",
        "campaigns.js",
        "entiserve.d.ts",
        "entity.schema.json",
    ] {
        assert!(dir.path().join("entities").join(file).is_file(), "{file}");
    }
    assert!(dir.path().join("uploads/campaigns.csv").is_file());
    let check = bin()
        .arg("check")
        .arg("--entities")
        .arg(dir.path().join("entities"))
        .output()
        .unwrap();
    assert!(check.status.success(), "{check:?}");
    assert!(
        String::from_utf8_lossy(&check.stdout).contains("audit"),
        "{check:?}"
    );
    // A second init changes nothing and says which file is in the way.
    std::fs::write(dir.path().join("entities/users.yaml"), "edited").unwrap();
    let again = bin().arg("init").arg(dir.path()).output().unwrap();
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("exists"));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("entities/users.yaml")).unwrap(),
        "edited"
    );
}

/// A PostgreSQL URL that cannot be opened stops `serve` at once, with the reason in one line: a
/// port nothing listens on (the pool alone would retry for a minute and say only that it timed
/// out) and, with `TEST_DATABASE_URL`, a database that is not on that server.
#[test]
fn serve_says_at_once_why_it_cannot_open_a_postgresql_database() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut cases = vec![(
        format!("postgres://postgres@127.0.0.1:{port}/test"),
        "Connection refused",
    )];
    if let Ok(u) = std::env::var("TEST_DATABASE_URL")
        && let Some((server, _)) = u.rsplit_once('/')
    {
        cases.push((
            format!("{server}/entiserve_no_such_database"),
            "database \"entiserve_no_such_database\" does not exist; create it first",
        ));
    }
    for (url, want) in cases {
        let dir = tempfile::tempdir().unwrap();
        let started = std::time::Instant::now();
        let out = bin()
            .args(["serve", "--bind", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path())
            .args(["--database-url", &url])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{err}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "took {:?}: {err}",
            started.elapsed()
        );
        let last = err.lines().last().unwrap_or_default();
        assert!(last.contains(want), "{last}");
        assert!(!last.contains(" at line "), "{last}");
    }
}
