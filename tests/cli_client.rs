//! The command-line client, `entiserve upload` and `entiserve bgrs`, run as the real binary
//! against a real `entiserve serve` process (SQLite, or PostgreSQL when `TEST_DATABASE_URL` is
//! set): exit codes, the result file, the messages, Ctrl-C.

mod common;

use common::PgDb;
use common::process::{PASSWORD, Server};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;
use tempfile::TempDir;

/// A server, a working directory for the client's files, and the database when on PostgreSQL.
/// Fields drop in order: the server stops before its database is dropped.
struct Setup {
    server: Server,
    dir: TempDir,
    _db: Option<PgDb>,
}

async fn setup(label: &'static str) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let db = match std::env::var("TEST_DATABASE_URL") {
        Ok(u) if !u.is_empty() => Some(PgDb::create(&u).await),
        _ => None,
    };
    let server = Server::start(
        label,
        &dir.path().join("data"),
        db.as_ref().map(|d| d.url.as_str()),
    );
    Setup {
        server,
        dir,
        _db: db,
    }
}

impl Setup {
    /// A file in the working directory.
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn write(&self, name: &str, content: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, content).unwrap();
        p
    }

    /// The client binary, pointed at this server as admin, in the working directory.
    fn client(&self) -> Command {
        let mut c = client();
        c.env("ENTISERVE_URL", &self.server.base)
            .env("ENTISERVE_PASSWORD", PASSWORD)
            .current_dir(self.dir.path());
        c
    }

    fn run(&self, args: &[&str]) -> Run {
        Run::of(self.client().args(args).output().unwrap())
    }
}

/// The client binary with no server settings from the environment.
fn client() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_entiserve"));
    c.env_remove("ENTISERVE_URL")
        .env_remove("ENTISERVE_USER")
        .env_remove("ENTISERVE_PASSWORD")
        .stdin(Stdio::null());
    c
}

/// A finished client run.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn of(o: Output) -> Run {
        Run {
            code: o.status.code(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }

    /// Asserts the exit code, showing the output when it differs.
    fn expect(self, code: i32) -> Run {
        assert_eq!(
            self.code,
            Some(code),
            "stdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    /// The request id from `background request <rid> started`.
    fn rid(&self) -> String {
        rid_in(&self.stderr).unwrap_or_else(|| panic!("no request id in:\n{}", self.stderr))
    }
}

fn rid_in(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        l.strip_prefix("background request ")
            .and_then(|r| r.strip_suffix(" started"))
            .map(str::to_string)
    })
}

/// The rows of a `;` result file, split into cells (header first).
fn rows(path: &Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut r = csv::ReaderBuilder::new()
        .delimiter(b';')
        .has_headers(false)
        .from_reader(text.as_bytes());
    r.records()
        .map(|r| r.unwrap().iter().map(str::to_string).collect())
        .collect()
}

#[tokio::test]
async fn upload_of_valid_rows_exits_0_with_every_row_ok() {
    let s = setup("cli-ok").await;
    s.write(
        "campaigns.csv",
        "op;name;description\nc;Alpha;first\nc;Beta;second\nc;Gamma;\n",
    );
    let run = s
        .run(&["upload", "campaigns.csv", "--entity", "campaigns"])
        .expect(0);
    assert!(
        run.stdout
            .contains("3 rows: 3 OK, 0 failed; result written to campaigns.csvres.csv"),
        "{}",
        run.stdout
    );
    let rid = run.rid();
    assert_eq!(rid.len(), 32, "{rid}");

    let rows = rows(&s.path("campaigns.csvres.csv"));
    assert_eq!(rows[0], ["res", "id", "op", "name", "description"]);
    assert_eq!(rows.len(), 4, "{rows:?}");
    let campaigns = s.server.get_json("/campaigns").await;
    for (row, name) in rows[1..].iter().zip(["Alpha", "Beta", "Gamma"]) {
        assert_eq!(row[0], "OK", "{row:?}");
        assert_eq!(row[3], name);
        let id: i64 = row[1]
            .parse()
            .unwrap_or_else(|_| panic!("no id in {row:?}"));
        let stored = campaigns
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .unwrap_or_else(|| panic!("campaign {id} not stored: {campaigns}"));
        assert_eq!(stored["name"], name);
    }
    assert_eq!(s.server.campaign_count().await, 3);
}

#[tokio::test]
async fn a_dry_run_says_what_would_happen_and_all_or_nothing_applies_nothing_on_a_failure() {
    let s = setup("cli-dry").await;
    s.write("dry.csv", "op;name\nc;Would-be one\nc;Would-be two\n");
    let before = s.server.get("/campaigns").await.headers()["x-total-count"].clone();
    let run = s
        .run(&["upload", "dry.csv", "--entity", "campaigns", "--dry-run"])
        .expect(0);
    assert!(
        run.stdout.contains("2 rows: 2 OK, 0 failed"),
        "{}",
        run.stdout
    );
    let dry = rows(&s.path("dry.csvres.csv"));
    assert_eq!(dry[0], ["res", "id", "op", "name"]);
    assert!(
        dry[1..].iter().all(|r| r[0] == "OK" && r[1].is_empty()),
        "no ids for would-be creations: {dry:?}"
    );
    let after = s.server.get("/campaigns").await.headers()["x-total-count"].clone();
    assert_eq!(before, after, "nothing kept");

    s.write(
        "whole.csv",
        "op;id;name\nc;;Kept only if all pass\nu;999999;missing\n",
    );
    let run = s
        .run(&["upload", "whole.csv", "--entity", "campaigns", "--atomic"])
        .expect(2);
    assert!(run.stdout.contains("0 OK, 2 failed"), "{}", run.stdout);
    let whole = rows(&s.path("whole.csvres.csv"));
    assert!(whole[1][0].contains("not applied"), "{whole:?}");
    let after = s.server.get("/campaigns").await.headers()["x-total-count"].clone();
    assert_eq!(before, after, "nothing applied");
}

#[tokio::test]
async fn failed_rows_exit_2_with_their_res_text_and_out_chooses_the_file() {
    let s = setup("cli-failed").await;
    s.write(
        "mixed.csv",
        "op;id;name\nc;;kept\nc;7;id on create\nu;999999;missing\n;;skipped\n",
    );
    let run = s
        .run(&[
            "upload",
            "mixed.csv",
            "--entity",
            "campaigns",
            "--out",
            "answers.csv",
        ])
        .expect(2);
    assert!(
        run.stdout
            .contains("4 rows: 1 OK, 2 failed, 1 skipped; result written to answers.csv"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("line 2: "), "{}", run.stdout);
    assert!(run.stdout.contains("line 3: "), "{}", run.stdout);
    assert!(
        !s.path("mixed.csvres.csv").exists(),
        "--out replaces the default"
    );

    let rows = rows(&s.path("answers.csv"));
    assert_eq!(rows[0], ["res", "op", "id", "name"]);
    assert_eq!(rows[1][0], "OK");
    assert!(rows[1][2].parse::<i64>().is_ok(), "{:?}", rows[1]);
    assert!(
        rows[2][0] != "OK" && rows[2][0].contains("id"),
        "create with an id: {:?}",
        rows[2]
    );
    assert!(
        rows[3][0] != "OK" && rows[3][0].contains("999999"),
        "update of a missing id: {:?}",
        rows[3]
    );
    assert!(run.stdout.contains(&format!("line 2: {}", rows[2][0])));
    assert!(run.stdout.contains(&format!("line 3: {}", rows[3][0])));
    assert_eq!(s.server.campaign_count().await, 1);
}

#[tokio::test]
async fn a_refused_file_or_wrong_password_exits_1_and_changes_nothing() {
    let s = setup("cli-refused").await;
    s.write("bad.csv", "op;name;bogus\nc;x;y\n");
    let run = s
        .run(&["upload", "bad.csv", "--entity", "campaigns"])
        .expect(1);
    let first = run.stderr.lines().find(|l| l.starts_with("error: "));
    assert!(
        first
            .is_some_and(|l| l.starts_with("error: the file was refused: ") && l.contains("bogus")),
        "{}",
        run.stderr
    );
    assert!(!s.path("bad.csvres.csv").exists());
    assert_eq!(s.server.campaign_count().await, 0);

    s.write("good.csv", "op;name\nc;x\n");
    let run = Run::of(
        s.client()
            .env("ENTISERVE_PASSWORD", "not the password")
            .args(["upload", "good.csv", "--entity", "campaigns"])
            .output()
            .unwrap(),
    )
    .expect(1);
    assert!(
        run.stderr
            .contains("error: the server refused the credentials (401)"),
        "{}",
        run.stderr
    );
    assert_eq!(s.server.campaign_count().await, 0);
}

#[test]
fn a_closed_port_exits_1_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.csv"), "op;name\nc;x\n").unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let run = Run::of(
        client()
            .env("ENTISERVE_PASSWORD", "x")
            .current_dir(dir.path())
            .args(["upload", "a.csv", "--entity", "campaigns", "--url", &url])
            .output()
            .unwrap(),
    )
    .expect(1);
    assert!(
        run.stderr
            .contains(&format!("error: cannot reach {url}: connection failed")),
        "{}",
        run.stderr
    );
    assert!(!dir.path().join("a.csvres.csv").exists());

    let run = Run::of(
        client()
            .env("ENTISERVE_PASSWORD", "x")
            .args(["bgrs", "--url", &url])
            .output()
            .unwrap(),
    )
    .expect(1);
    assert!(run.stderr.contains("cannot reach"), "{}", run.stderr);
}

#[tokio::test]
async fn bgrs_lists_requests_newest_first_and_shows_one_with_its_details() {
    let s = setup("cli-bgrs").await;
    s.write("one.csv", "op,name\nc,first\n");
    s.write("two.csv", "op,name\nc,second\nc,third\n");
    let one = s
        .run(&["upload", "one.csv", "--entity", "campaigns"])
        .expect(0)
        .rid();
    let two = s
        .run(&["upload", "two.csv", "--entity", "campaigns"])
        .expect(0)
        .rid();

    let list = s.run(&["bgrs"]).expect(0).stdout;
    let lines: Vec<&str> = list.lines().collect();
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(
        header,
        ["RID", "NAME", "STATUS", "PROGRESS", "CREATED", "FINISHED"]
    );
    assert!(lines[1].starts_with(&two), "newest first:\n{list}");
    assert!(lines[2].starts_with(&one), "newest first:\n{list}");
    for l in &lines[1..3] {
        assert!(l.contains(" uploader "), "{l}");
        assert!(l.contains(" finished "), "{l}");
        assert!(l.contains(" 100.00% "), "{l}");
    }
    // Aligned: the NAME column starts at the same place on every line.
    let at = lines[0].find("NAME").unwrap();
    assert!(lines[1..3].iter().all(|l| l[at..].starts_with("uploader")));

    let show = s.run(&["bgrs", &two]).expect(0).stdout;
    let field = |name: &str| {
        show.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|| panic!("no {name} in:\n{show}"))
    };
    assert_eq!(field("rid"), two);
    assert_eq!(field("status_name"), "finished");
    assert_eq!(field("name"), "uploader");
    assert!(show.contains("Line: 1 done. Result: 200. OK"), "{show}");
    assert!(show.contains("Line: 2 done. Result: 200. OK"), "{show}");
    assert!(show.lines().any(|l| l.ends_with("  done")), "{show}");

    let missing = "0".repeat(32);
    let run = s.run(&["bgrs", &missing]).expect(1);
    assert!(
        run.stderr
            .contains(&format!("error: no background request {missing}")),
        "{}",
        run.stderr
    );
}

/// A create CSV of `rows` campaigns, big enough to be still running when Ctrl-C comes.
fn big_csv(s: &Setup, rows: usize) -> PathBuf {
    let mut csv = String::from("op,name,description\n");
    for i in 1..=rows {
        csv.push_str(&format!("c,interrupted {i},row {i}\n"));
    }
    s.write("big.csv", &csv)
}

/// Starts an upload of `big.csv`, waits until its request started, sends SIGINT and answers
/// the question with `answer`; returns the request id and the finished run.
fn interrupt_upload(s: &Setup, answer: &str) -> (String, Run) {
    let mut child: Child = s
        .client()
        .args(["upload", "big.csv", "--entity", "campaigns"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    let rid = loop {
        let mut line = String::new();
        if stderr.read_line(&mut line).unwrap() == 0 {
            let _ = child.kill();
            panic!("the client ended before its request started:\n{seen}");
        }
        seen.push_str(&line);
        if let Some(rid) = rid_in(&line) {
            break rid;
        }
    };
    // SAFETY: a signal to our own child, which has not been reaped.
    assert_eq!(
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) },
        0
    );
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(answer.as_bytes()).unwrap();
    drop(stdin);
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    let out = child.wait_with_output().unwrap();
    let mut run = Run::of(out);
    run.stderr = seen + &rest;
    (rid, run)
}

#[tokio::test]
async fn ctrl_c_then_no_leaves_the_request_running() {
    let s = setup("cli-ctrl-c-no").await;
    big_csv(&s, 200_000);
    let (rid, run) = interrupt_upload(&s, "n\n");
    let run = run.expect(130);
    assert!(
        run.stderr
            .contains(&format!("Cancel the request {rid} on the server? [y/N] ")),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains(&format!(
            "the request goes on in the background: entiserve bgrs {rid}"
        )),
        "{}",
        run.stderr
    );
    assert!(!s.path("big.csvres.csv").exists());
    s.server.wait_finished(&rid, Duration::from_secs(300)).await;
    assert_eq!(s.server.campaign_count().await, 200_000);
}

#[tokio::test]
async fn ctrl_c_then_yes_cancels_the_request_and_downloads_the_result() {
    let s = setup("cli-ctrl-c-yes").await;
    big_csv(&s, 200_000);
    let (rid, run) = interrupt_upload(&s, "y\n");
    let run = run.expect(130);
    assert!(
        run.stderr.contains(&format!("cancelling {rid}")),
        "{}",
        run.stderr
    );
    assert!(
        run.stdout.contains(&format!("request {rid} was cancelled")),
        "{}",
        run.stdout
    );
    let summary = run
        .stdout
        .lines()
        .find(|l| l.starts_with("200000 rows: "))
        .unwrap_or_else(|| panic!("no summary in:\n{}", run.stdout));
    assert!(
        summary.contains(" OK, 0 failed, ")
            && summary.ends_with(" not run; result written to big.csvres.csv"),
        "{summary}"
    );
    let record = &s.server.get_json(&format!("/bgrs/{rid}")).await[0];
    assert_eq!(record["status_id"], "5", "{record}");
    assert_eq!(record["status_name"], "cancelled", "{record}");

    let text = std::fs::read_to_string(s.path("big.csvres.csv")).unwrap();
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let res: Vec<String> = r.records().map(|r| r.unwrap()[0].to_string()).collect();
    assert_eq!(res.len(), 200_000, "every row is in the result");
    let ok = res.iter().filter(|r| *r == "OK").count();
    assert!(ok < 200_000, "cancelled before the end");
    assert!(
        res[ok..].iter().all(|r| r.starts_with("not run")),
        "the rows after the last OK did not run"
    );
    assert!(summary.starts_with(&format!(
        "200000 rows: {ok} OK, 0 failed, {} not run",
        200_000 - ok
    )));
    assert_eq!(s.server.campaign_count().await, ok as u64);
}
