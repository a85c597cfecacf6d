//! Crash safety of an undo, against the real `entiserve` binary, on SQLite or (with
//! `TEST_DATABASE_URL`) PostgreSQL.
//!
//! Upload A creates 20,000 campaigns. Upload B creates 30,000 more, renames 19,000 of A's
//! and deletes the other 1,000. B's undo is interrupted by a SIGKILL of the server running it
//! while it is partly done; a new server on the same data directory and database finishes it.
//! Every change is reverted exactly once: the campaigns are A's again (none renamed, the
//! deleted ones back, B's own gone), the undo names no conflict (a change reverted twice
//! would find its object already back), and it was started by both servers.

mod common;

use common::process::{PASSWORD, Server};
use serde_json::Value as Json;
use std::time::{Duration, Instant};

const A: usize = 20_000;
const CREATED: usize = 30_000;
const RENAMED: usize = 19_000;

async fn post(server: &Server, path: &str) -> Json {
    let r = server
        .client
        .post(format!("{}{path}", server.base))
        .basic_auth("admin", Some(PASSWORD))
        .send()
        .await
        .expect("POST");
    let status = r.status();
    let text = r.text().await.unwrap();
    assert_eq!(status, 202, "POST {path}: {text}");
    serde_json::from_str(&text).unwrap()
}

async fn total(server: &Server, query: &str) -> u64 {
    let r = server.get(&format!("/campaigns?limit=1&{query}")).await;
    assert_eq!(r.status(), 200);
    r.headers()["x-total-count"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// A background upload of campaigns from `csv`, waited for until it finished: its request id.
async fn upload_finished(server: &Server, csv: String) -> String {
    let rid = server
        .upload_background("campaigns", csv.into_bytes(), &[])
        .await;
    server.wait_finished(&rid, Duration::from_secs(300)).await;
    rid
}

#[tokio::test]
async fn an_undo_killed_midway_finishes_on_another_server_exactly_once() {
    let db = match std::env::var("TEST_DATABASE_URL") {
        Ok(u) if !u.is_empty() => Some(common::PgDb::create(&u).await),
        _ => None,
    };
    let url = db.as_ref().map(|d| d.url.as_str());
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut first = Server::start("first", &data, url);

    let mut a = String::from("op;name\n");
    for i in 0..A {
        a.push_str(&format!("c;original {i}\n"));
    }
    upload_finished(&first, a).await;
    let first_id = first.get_json("/campaigns?limit=1&sort=id").await[0]["id"]
        .as_i64()
        .unwrap();
    let mut b = String::from("op;id;name\n");
    for i in 0..CREATED {
        b.push_str(&format!("c;;added {i}\n"));
    }
    for i in 0..A {
        let id = first_id + i as i64;
        if i < RENAMED {
            b.push_str(&format!("u;{id};renamed {i}\n"));
        } else {
            b.push_str(&format!("d;{id};\n"));
        }
    }
    let rid_b = upload_finished(&first, b).await;
    assert_eq!(total(&first, "").await, (CREATED + RENAMED) as u64);

    let undo = post(&first, &format!("/bgrs/{rid_b}/undo")).await;
    let u = undo["request"].as_str().unwrap().to_string();
    let start = Instant::now();
    loop {
        let (status, progress) = first.progress(&u).await;
        assert_eq!(status, "2", "the undo ended before it could be interrupted");
        if progress > 5.0 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "no progress");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    first.kill();

    let second = Server::start("second", &data, url);
    second.wait_finished(&u, Duration::from_secs(300)).await;
    assert_eq!(total(&second, "").await, A as u64, "A's campaigns, no more");
    assert_eq!(total(&second, "name[contains]=renamed").await, 0);
    assert_eq!(total(&second, "name[contains]=added").await, 0);
    assert_eq!(total(&second, "name[contains]=original").await, A as u64);
    assert_eq!(
        total(&second, &format!("changed_by={u}")).await,
        A as u64,
        "the undo changed each of A's objects once"
    );
    let r = second.get(&format!("/v2.5/bgrs/{u}/result")).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.text().await.unwrap(), "[]", "no change reverted twice");
    let details = second
        .get_json(&format!("/bgrs/{u}/details?limit=1000"))
        .await;
    let starts = details
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| {
            d["details"]
                .as_str()
                .is_some_and(|t| t.starts_with("started (worker "))
        })
        .count();
    assert_eq!(
        starts, 2,
        "started by the first server, finished by the second"
    );
    drop(second);
    drop(db);
}
