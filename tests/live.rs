//! Live changes (CONTRACT.md section 11, "Live changes") against a real server on the backend
//! the suite runs on (SQLite, or PostgreSQL with `TEST_DATABASE_URL`): `GET /<res>/events`
//! and `GET /<res>/changes`.
//!
//! Covered: `ready` then events with exact payloads (as GET answers, `fields` applied, a
//! delete carrying the last stored object); objects entering and leaving a filter and the
//! caller's `list` rule; a 10,000-item batch and a 100,000-row upload delivered once each, in
//! order; resuming with `Last-Event-ID` (and `last_event_id=`) with nothing lost or doubled;
//! `reset` for a number no longer kept or never given; a slow consumer reset, with the server's
//! memory bounded meanwhile; the JSON pages;
//! bad input answered 400; a server killed with SIGKILL mid-stream and the stream resumed on
//! another server (the same data directory restarted on SQLite, a second server on
//! PostgreSQL); two servers on one PostgreSQL database.

mod common;

use common::process::Server;
use common::sse::{Sse, Stream};
use common::upload::{UPLOAD, form};
use common::*;
use reqwest::Method;
use serde_json::{Value as Json, json};
use std::time::Duration;

/// Opens `path` as admin and waits for its first event.
async fn subscribe(app: &TestApp, path: &str) -> (Stream, Sse) {
    let r = app.admin(Method::GET, path).send().await.unwrap();
    let mut s = Stream::new(r);
    let first = s.next().await;
    (s, first)
}

async fn get(app: &TestApp, path: &str) -> Json {
    let (st, body) = json(app.admin(Method::GET, path).send().await.unwrap()).await;
    assert_eq!(st, 200, "{path}: {body}");
    body
}

async fn call(app: &TestApp, m: Method, path: &str, body: Json) -> Json {
    let (st, out) = json(app.admin(m, path).json(&body).send().await.unwrap()).await;
    assert!(st < 300, "{path}: {st} {out}");
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_then_each_change_as_get_answers_it() {
    let app = spawn_app().await;
    let (mut s, ready) = subscribe(&app, "/campaigns/events").await;
    assert_eq!(ready.event, "ready");
    let start = ready.id.expect("ready has an id");
    assert_eq!(ready.data, json!({"seq": start}));

    let created = app.create("campaigns", json!({"name": "Spring"})).await;
    let id = created["id"].as_i64().unwrap();
    let ev = s.next().await;
    assert_eq!(ev.event, "create");
    // One number a change: the next after `ready` (on PostgreSQL a change committed just
    // before `ready`, such as the admin's creation at start, may take a number after it).
    let first = ev.id.unwrap();
    assert!(
        first == start + 1 || first == start + 2,
        "{first} after {start}"
    );
    let now = get(&app, &format!("/campaigns/{id}")).await;
    assert_eq!(ev.data, json!({"op": "create", "id": id, "object": now}));

    call(
        &app,
        Method::PUT,
        &format!("/campaigns/{id}"),
        json!({"name": "Summer"}),
    )
    .await;
    let ev = s.next().await;
    let now = get(&app, &format!("/campaigns/{id}")).await;
    assert_eq!((ev.event.as_str(), ev.id), ("update", Some(first + 1)));
    assert_eq!(ev.data, json!({"op": "update", "id": id, "object": now}));

    let (st, _) = json(
        app.admin(Method::DELETE, &format!("/campaigns/{id}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(st, 200);
    let ev = s.next().await;
    assert_eq!((ev.event.as_str(), ev.id), ("delete", Some(first + 2)));
    assert_eq!(ev.data, json!({"op": "delete", "id": id, "object": now}));

    // The same changes as a JSON page, and nothing after them.
    let page = get(&app, &format!("/campaigns/changes?after={start}")).await;
    let changes = page["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 3, "{page}");
    assert_eq!(
        changes[2],
        json!({"seq": first + 2, "op": "delete", "id": id, "object": now})
    );
    assert_eq!(page["next"], first + 2);
    let rest = get(&app, &format!("/campaigns/changes?after={}", first + 2)).await;
    assert_eq!(rest, json!({"changes": [], "next": first + 2}));
    // A change of another entity is not an event of this one.
    app.create("markers", json!({"name": "m", "campaign_id": app.create("campaigns", json!({"name": "x"})).await["id"]}))
        .await;
    let ev = s.next().await;
    assert_eq!(ev.data["object"]["name"], "x");
    assert!(s.next_within(Duration::from_millis(500)).await.is_none());
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_enter_and_leave_a_filter_and_fields_apply() {
    let app = spawn_app().await;
    let (mut s, _) = subscribe(&app, "/campaigns/events?type=2&fields=id,name").await;
    let a = app
        .create("campaigns", json!({"name": "a", "type": 1}))
        .await["id"]
        .as_i64()
        .unwrap();
    let b = app
        .create("campaigns", json!({"name": "b", "type": 2}))
        .await["id"]
        .as_i64()
        .unwrap();
    let ev = s.next().await;
    assert_eq!(
        ev.data,
        json!({"op": "create", "id": b, "object": {"id": b, "name": "b"}})
    );
    // a enters the filter: a create; b leaves it: a delete of b as it was.
    call(
        &app,
        Method::PUT,
        &format!("/campaigns/{a}"),
        json!({"type": 2}),
    )
    .await;
    call(
        &app,
        Method::PUT,
        &format!("/campaigns/{b}"),
        json!({"type": 3, "name": "b2"}),
    )
    .await;
    call(
        &app,
        Method::PUT,
        &format!("/campaigns/{a}"),
        json!({"name": "a2"}),
    )
    .await;
    let evs = s.take(3).await;
    let got: Vec<(String, Json)> = evs.into_iter().map(|e| (e.event, e.data)).collect();
    assert_eq!(
        got,
        vec![
            (
                "create".into(),
                json!({"op": "create", "id": a, "object": {"id": a, "name": "a"}})
            ),
            (
                "delete".into(),
                json!({"op": "delete", "id": b, "object": {"id": b, "name": "b"}})
            ),
            (
                "update".into(),
                json!({"op": "update", "id": a, "object": {"id": a, "name": "a2"}})
            ),
        ]
    );
    // Changes outside the filter send nothing.
    call(
        &app,
        Method::PUT,
        &format!("/campaigns/{b}"),
        json!({"name": "b3"}),
    )
    .await;
    assert!(s.next_within(Duration::from_millis(500)).await.is_none());
    app.stop().await;
}

/// A stream of `path` as `login`, after its `ready`.
async fn subscribe_as(app: &TestApp, login: &str, path: &str) -> Stream {
    let r = app
        .as_user(login, "live-password-1", Method::GET, path)
        .send()
        .await
        .unwrap();
    let mut s = Stream::new(r);
    assert_eq!(s.next().await.event, "ready");
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_list_rule_decides_what_each_subscriber_sees() {
    // tests/fixtures/rules: a note is listed by its owner and by editors.
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/rules");
    let dir = tempfile::tempdir().unwrap();
    let entities = dir.path().join("entities");
    std::fs::create_dir_all(&entities).unwrap();
    for f in ["users.yaml", "notes.yaml"] {
        std::fs::copy(std::path::Path::new(fixtures).join(f), entities.join(f)).unwrap();
    }
    let (s, db) = test_settings(dir.path(), &entities).await;
    let app = start(dir, entities, s, db).await;
    let mut ids = Vec::new();
    for (login, role) in [("uma", "user"), ("eda", "editor")] {
        let u = app
            .create(
                "users",
                json!({"login": login, "password": "live-password-1", "role": role}),
            )
            .await;
        ids.push(u["id"].as_i64().unwrap());
    }
    let (uma, eda) = (ids[0], ids[1]);
    let mut as_uma = subscribe_as(&app, "uma", "/notes/events?fields=id,title").await;
    let mut as_eda = subscribe_as(&app, "eda", "/notes/events?fields=id,title").await;
    let mine = app
        .create("notes", json!({"title": "mine", "owner_id": uma}))
        .await["id"]
        .as_i64()
        .unwrap();
    let theirs = app
        .create("notes", json!({"title": "theirs", "owner_id": eda}))
        .await["id"]
        .as_i64()
        .unwrap();
    // The admin gives uma's note to eda: it leaves uma's view.
    call(
        &app,
        Method::PUT,
        &format!("/notes/{mine}"),
        json!({"owner_id": eda}),
    )
    .await;
    let ev = as_uma.next().await;
    assert_eq!(
        ev.data,
        json!({"op": "create", "id": mine, "object": {"id": mine, "title": "mine"}})
    );
    let ev = as_uma.next().await;
    assert_eq!(
        ev.data,
        json!({"op": "delete", "id": mine, "object": {"id": mine, "title": "mine"}})
    );
    assert!(
        as_uma
            .next_within(Duration::from_millis(500))
            .await
            .is_none(),
        "uma never sees {theirs}"
    );
    let ops: Vec<(String, i64)> = as_eda
        .take(3)
        .await
        .into_iter()
        .map(|e| (e.event, e.data["id"].as_i64().unwrap()))
        .collect();
    assert_eq!(
        ops,
        vec![
            ("create".into(), mine),
            ("create".into(), theirs),
            ("update".into(), mine)
        ]
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_and_an_upload_arrive_once_each_in_order() {
    let app = spawn_with(|s| s.events_lag_max = 1_000_000).await;
    let (mut s, ready) = subscribe(&app, "/campaigns/events?fields=id").await;
    let start = ready.id.unwrap();
    let items: Vec<Json> = (0..10_000)
        .map(|i| json!({"name": format!("b{i}")}))
        .collect();
    // A batch this large runs in the background (202); its changes are events all the same.
    let (st, _) = json(
        app.admin(Method::POST, "/campaigns")
            .json(&items)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert!(st == 200 || st == 202, "{st}");
    let mut csv = String::from("op,name\n");
    for i in 0..100_000 {
        csv.push_str(&format!("c,u{i}\n"));
    }
    let f = form("campaigns", "rows.csv", csv.into_bytes(), &[]);
    let r = app
        .admin(Method::POST, UPLOAD)
        .multipart(f)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let evs = s.take(110_000).await;
    let mut last = start;
    let mut ids = std::collections::BTreeSet::new();
    for e in &evs {
        assert_eq!(e.event, "create");
        let seq = e.id.unwrap();
        assert!(seq > last, "{seq} after {last}");
        last = seq;
        assert!(ids.insert(e.data["id"].as_i64().unwrap()), "{e:?} twice");
    }
    assert!(s.next_within(Duration::from_millis(500)).await.is_none());
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_event_id_resumes_exactly_and_an_unknown_number_resets() {
    let app = spawn_app().await;
    let (mut s, ready) = subscribe(&app, "/campaigns/events").await;
    assert_eq!(ready.event, "ready");
    for i in 0..3 {
        app.create("campaigns", json!({"name": format!("r{i}")}))
            .await;
    }
    let seen = s.take(2).await;
    let at = seen[1].id.unwrap();
    drop(s);
    for i in 3..6 {
        app.create("campaigns", json!({"name": format!("r{i}")}))
            .await;
    }
    let r = app
        .admin(Method::GET, "/campaigns/events")
        .header("Last-Event-ID", at.to_string())
        .send()
        .await
        .unwrap();
    let mut s = Stream::new(r);
    let ready = s.next().await;
    assert_eq!((ready.event.as_str(), ready.id), ("ready", Some(at)));
    let resumed = s.take(4).await;
    let names: Vec<Json> = resumed
        .iter()
        .map(|e| e.data["object"]["name"].clone())
        .collect();
    assert_eq!(
        names,
        vec![json!("r2"), json!("r3"), json!("r4"), json!("r5")]
    );
    assert!(s.next_within(Duration::from_millis(300)).await.is_none());
    // The query parameter does the same. (On PostgreSQL a change committed just before a
    // stream's `ready` may be numbered after it, so numbers are read off the events.)
    let (r4, r5) = (resumed[2].id.unwrap(), resumed[3].id.unwrap());
    let (mut q, _) = subscribe(&app, &format!("/campaigns/events?last_event_id={r4}")).await;
    assert_eq!(q.next().await.data["object"]["name"], "r5");
    // A number never given: reset, with the newest number, and the stream ends.
    let (mut f, first) = subscribe(&app, "/campaigns/events?last_event_id=999999").await;
    assert_eq!((first.event.as_str(), first.id), ("reset", Some(r5)));
    assert!(f.next_within(Duration::from_secs(2)).await.is_none());
    // Bad numbers are refused.
    for bad in ["abc", "-1"] {
        let (st, body) = json(
            app.admin(Method::GET, "/campaigns/events")
                .header("Last-Event-ID", bad)
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(st, 400, "{bad}: {body}");
    }
    // Each route's own way to say where to start, refused on the other route: a stream
    // given `after` would otherwise start now and skip what the client meant to resume from.
    let (st, body) = json(
        app.admin(Method::GET, "/campaigns/events?after=5")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(st, 400, "{body}");
    assert!(
        body["description"]
            .as_str()
            .unwrap()
            .contains("Last-Event-ID"),
        "{body}"
    );
    for q in [
        "after=x",
        "limit=0",
        "limit=5000",
        "sort=name",
        "nope=1",
        "last_event_id=5",
    ] {
        let (st, body) = json(
            app.admin(Method::GET, &format!("/campaigns/changes?{q}"))
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(st, 400, "{q}: {body}");
    }
    let (st, _) = json(
        app.admin(Method::GET, "/nothing/events")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(st, 404);
    let (st, _) = json(
        app.client
            .get(app.url("/campaigns/events"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(st, 401);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_that_falls_behind_is_reset() {
    let app = spawn_with(|s| s.events_lag_max = 100).await;
    let (mut s, _) = subscribe(&app, "/campaigns/events").await;
    // Long names fill the socket's buffers, so the stream falls behind.
    let long = "x".repeat(2000);
    for _ in 0..8 {
        let items: Vec<Json> = (0..2000)
            .map(|_| json!({"name": "slow", "description": long}))
            .collect();
        let (st, _) = json(
            app.admin(Method::POST, "/campaigns")
                .json(&items)
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert!(st == 200 || st == 202, "{st}");
    }
    // Read nothing until every change is made: the socket's buffers and the stream's channel
    // fill meanwhile.
    for _ in 0..600 {
        if count(&app, "campaigns").await == 16_000 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(count(&app, "campaigns").await, 16_000);
    let mut last = None;
    while let Some(ev) = s.next_within(Duration::from_secs(5)).await {
        last = Some(ev.event);
    }
    assert_eq!(last.as_deref(), Some("reset"), "the stream ends with reset");
    app.stop().await;
}

/// A subscriber that reads nothing costs the server no memory that grows with what it has
/// not read: its group's queue holds a few pages, and once it is let go it holds only its
/// place in the log. The server's peak is taken after 64 batches of 1,000 objects of 2 KB and
/// again after 64 more: the second 128 MB of event text adds little. The stream, read at last,
/// ends with `reset`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_consumer_is_reset_with_the_servers_memory_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let db = test_pg().await;
    let url = db.as_ref().map(|d| d.url.clone());
    let server = Server::start_with(
        "slow",
        &dir.path().join("slow"),
        url.as_deref(),
        &["--events-lag-max", "5000"],
    );
    let mut s = stream_on(&server, None).await;
    assert_eq!(s.next().await.event, "ready");
    let long = "y".repeat(2048);
    let items: Vec<Json> = (0..1000)
        .map(|_| json!({"name": "slow", "description": long}))
        .collect();
    let mut peaks = Vec::new();
    for _ in 0..2 {
        for _ in 0..64 {
            let r = server
                .request(Method::POST, "/campaigns")
                .json(&items)
                .send()
                .await
                .unwrap();
            assert!(r.status().is_success(), "{}", r.status());
        }
        // The hub hands the last pages on, or lets the stream go, meanwhile.
        tokio::time::sleep(Duration::from_secs(3)).await;
        peaks.push(server.memory_kb("VmHWM") / 1024);
    }
    assert!(
        peaks[1] < peaks[0] + 32,
        "the peak grew from {} to {} MB with 128 MB more events waiting for one stream",
        peaks[0],
        peaks[1]
    );
    let mut last = None;
    while let Some(ev) = s.next_within(Duration::from_secs(10)).await {
        last = Some(ev.event);
    }
    assert_eq!(last.as_deref(), Some("reset"), "the stream ends with reset");
}

/// A campaign created through `server`.
async fn create_on(server: &Server, name: &str) -> i64 {
    let r = server
        .request(Method::POST, "/campaigns")
        .json(&json!({"name": name}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    r.json::<Json>().await.unwrap()["id"].as_i64().unwrap()
}

async fn stream_on(server: &Server, after: Option<i64>) -> Stream {
    let mut r = server.request(Method::GET, "/campaigns/events");
    if let Some(n) = after {
        r = r.header("Last-Event-ID", n.to_string());
    }
    Stream::new(r.send().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_by_sigkill_resumes_on_another_server() {
    let dir = tempfile::tempdir().unwrap();
    let db = test_pg().await;
    let url = db.as_ref().map(|d| d.url.clone());
    let mut a = Server::start("a", &dir.path().join("a"), url.as_deref());
    let mut s = stream_on(&a, None).await;
    assert_eq!(s.next().await.event, "ready");
    for i in 0..5 {
        create_on(&a, &format!("k{i}")).await;
    }
    let got = s.take(3).await;
    let at = got[2].id.unwrap();
    a.kill();
    // The stream ends with the server, whatever of the last two changes it had sent.
    while let Some(ev) = s.next_within(Duration::from_secs(5)).await {
        assert!(ev.id.unwrap() <= at + 2, "{ev:?}");
    }
    // SQLite: the same data directory, restarted; PostgreSQL: another server.
    let b = match &url {
        Some(_) => Server::start("b", &dir.path().join("b"), url.as_deref()),
        None => Server::start("b", &dir.path().join("a"), None),
    };
    let mut r = stream_on(&b, Some(at)).await;
    assert_eq!(r.next().await.id, Some(at));
    create_on(&b, "k5").await;
    let names: Vec<Json> = r
        .take(3)
        .await
        .into_iter()
        .map(|e| e.data["object"]["name"].clone())
        .collect();
    assert_eq!(names, vec![json!("k3"), json!("k4"), json!("k5")]);
    assert!(r.next_within(Duration::from_millis(300)).await.is_none());
    drop(b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_postgresql_database_see_each_others_changes() {
    let Some(db) = test_pg().await else {
        if std::env::var("ENTISERVE_REQUIRE_PG").is_ok() {
            panic!("TEST_DATABASE_URL is required");
        }
        eprintln!("SKIPPED: two servers need PostgreSQL (TEST_DATABASE_URL)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let a = Server::start("a", &dir.path().join("a"), Some(&db.url));
    let b = Server::start("b", &dir.path().join("b"), Some(&db.url));
    let mut on_a = stream_on(&a, None).await;
    let mut on_b = stream_on(&b, None).await;
    let ra = on_a.next().await.id.unwrap();
    let rb = on_b.next().await.id.unwrap();
    assert_eq!(ra, rb, "one sequence for the installation");
    let x = create_on(&a, "through a").await;
    let y = create_on(&b, "through b").await;
    for s in [&mut on_a, &mut on_b] {
        let evs = s.take(2).await;
        let ids: Vec<i64> = evs.iter().map(|e| e.data["id"].as_i64().unwrap()).collect();
        assert_eq!(ids, vec![x, y]);
        assert_eq!(evs[0].id, Some(ra + 1));
        assert_eq!(evs[1].id, Some(ra + 2));
    }
}

/// A server that shuts down ends its streams at once (their clients resume elsewhere, or after
/// the restart), instead of holding its shutdown for the whole grace period.
#[tokio::test]
async fn streams_end_when_the_server_shuts_down() {
    let app = spawn_with(|s| s.shutdown_grace = Duration::from_secs(30)).await;
    let (mut s, ready) = subscribe(&app, "/campaigns/events").await;
    assert_eq!(ready.event, "ready");
    let t0 = std::time::Instant::now();
    app.stop().await;
    let took = t0.elapsed();
    assert!(took < Duration::from_secs(10), "shutdown took {took:?}");
    assert!(
        s.next_within(Duration::from_secs(5)).await.is_none(),
        "the stream went on after the shutdown"
    );
}
