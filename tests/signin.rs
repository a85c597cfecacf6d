//! Sign-in under attack and secrets at rest: guessing is throttled per login and address
//! without slowing token requests or locking the real user out from elsewhere; tokens end with
//! a sign-out, a password or role change, or the user's deletion; passwords have a minimum
//! length; and no secret is stored in clear by background work or uploads.

mod common;

use common::process::{PASSWORD, Server};
use common::{error_code, json, spawn_app};
use reqwest::Method;
use reqwest::multipart::{Form, Part};
use serde_json::{Value as Json, json};
use std::path::Path;
use std::time::{Duration, Instant};

/// A client whose connections come from `ip` (any 127.x.y.z address is this machine).
fn client_from(ip: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(Some(ip.parse().unwrap()))
        .build()
        .unwrap()
}

#[tokio::test]
async fn guessing_is_throttled_and_token_reads_stay_fast() {
    let dir = tempfile::tempdir().unwrap();
    let db = common::test_pg().await;
    let s = Server::start(
        "guess",
        &dir.path().join("data"),
        db.as_ref().map(|d| d.url.as_str()),
    );
    let token = {
        let r = s
            .client
            .post(format!("{}/auth/token", s.base))
            .json(&json!({"login": "admin", "password": PASSWORD}))
            .send()
            .await
            .unwrap();
        json(r).await.1["token"].as_str().unwrap().to_string()
    };
    let stop = Instant::now() + Duration::from_secs(6);
    let mut guessers = Vec::new();
    for g in 0..48 {
        let (base, client) = (s.base.clone(), client_from("127.0.0.1"));
        guessers.push(tokio::spawn(async move {
            let (mut throttled, mut refused, mut retry_after) = (0u32, 0u32, 0u64);
            let mut n = 0;
            while Instant::now() < stop {
                n += 1;
                let r = client
                    .get(format!("{base}/users/me"))
                    .basic_auth("admin", Some(format!("guess-{g}-{n}")))
                    .send()
                    .await
                    .unwrap();
                match r.status().as_u16() {
                    429 => {
                        throttled += 1;
                        let ra: u64 = r.headers()["retry-after"]
                            .to_str()
                            .unwrap()
                            .parse()
                            .unwrap();
                        retry_after = retry_after.max(ra);
                        let (_, b) = json(r).await;
                        assert_eq!(error_code(&b), "too_many_requests");
                    }
                    401 => refused += 1,
                    other => panic!("a guess got {other}"),
                }
            }
            (throttled, refused, retry_after)
        }));
    }
    // Meanwhile, a client with a token reads.
    let mut times = Vec::new();
    let reader = client_from("127.0.0.3");
    while Instant::now() < stop {
        let t = Instant::now();
        let r = reader
            .get(format!("{}/users/me", s.base))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        r.bytes().await.unwrap();
        times.push(t.elapsed());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (mut throttled, mut refused, mut retry_after) = (0, 0, 0);
    for g in guessers {
        let (t, r, ra) = g.await.unwrap();
        throttled += t;
        refused += r;
        retry_after = retry_after.max(ra);
    }
    times.sort();
    let p95 = times[times.len() * 95 / 100];
    assert!(p95 < Duration::from_millis(100), "token reads p95 {p95:?}");
    assert!(
        throttled > 0 && refused > 0,
        "{throttled} throttled, {refused} refused"
    );
    assert!(
        refused <= 25,
        "at most the free failures are checked: {refused} wrong passwords were checked"
    );
    assert!(retry_after >= 2, "Retry-After grows: {retry_after}");
    let peak = s.memory_kb("VmHWM");
    assert!(peak < 300 * 1024, "peak {peak} kB");
    // The real admin, from another address, is not locked out, by Basic or by token.
    let elsewhere = client_from("127.0.0.2");
    let r = elsewhere
        .get(format!("{}/users/me", s.base))
        .basic_auth("admin", Some("a fresh wrong guess"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = elsewhere
        .post(format!("{}/auth/token", s.base))
        .json(&json!({"login": "admin", "password": PASSWORD}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // From the guessing address, further guesses are not even checked.
    let r = client_from("127.0.0.1")
        .post(format!("{}/auth/token", s.base))
        .json(&json!({"login": "admin", "password": "one more guess"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    assert!(r.headers().contains_key("retry-after"));
}

async fn token_of(app: &common::TestApp, login: &str, password: &str) -> String {
    let r = app
        .client
        .post(app.url("/auth/token"))
        .json(&json!({"login": login, "password": password}))
        .send()
        .await
        .unwrap();
    let (s, b) = json(r).await;
    assert_eq!(s, 200, "{b}");
    b["token"].as_str().unwrap().to_string()
}

async fn me_status(app: &common::TestApp, token: &str) -> u16 {
    app.client
        .get(app.url("/users/me"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test]
async fn tokens_end_with_sign_out_password_or_role_change_and_deletion() {
    let app = spawn_app().await;
    let id = app.create_user("tina", "tina-pass-1").await;
    // Sign-out ends only the presented token.
    let (a, b) = (
        token_of(&app, "tina", "tina-pass-1").await,
        token_of(&app, "tina", "tina-pass-1").await,
    );
    assert_eq!(me_status(&app, &a).await, 200);
    let r = app
        .client
        .delete(app.url("/auth/token"))
        .bearer_auth(&a)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(me_status(&app, &a).await, 401);
    assert_eq!(me_status(&app, &b).await, 200);
    let r = app
        .client
        .delete(app.url(&format!("/v2.5/auth/token?_token={b}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(me_status(&app, &b).await, 401);
    // A password change ends every token at once, even ones just used (and cached).
    let (c, d) = (
        token_of(&app, "tina", "tina-pass-1").await,
        token_of(&app, "tina", "tina-pass-1").await,
    );
    assert_eq!(me_status(&app, &c).await, 200);
    let r = app
        .client
        .put(app.url(&format!("/users/{id}")))
        .bearer_auth(&c)
        .json(&json!({"password": "tina-pass-2"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(me_status(&app, &c).await, 401);
    assert_eq!(me_status(&app, &d).await, 401);
    // So does a role change, by an admin.
    let e = token_of(&app, "tina", "tina-pass-2").await;
    assert_eq!(me_status(&app, &e).await, 200);
    let r = app
        .admin(Method::PUT, &format!("/users/{id}"))
        .json(&json!({"role": "admin"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(me_status(&app, &e).await, 401);
    // Other changes keep tokens.
    let f = token_of(&app, "tina", "tina-pass-2").await;
    let r = app
        .admin(Method::PUT, &format!("/users/{id}"))
        .json(&json!({"first_name": "Tina"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(me_status(&app, &f).await, 200);
    // Deleting the user ends the rest (and is not blocked by them).
    let r = app
        .admin(Method::DELETE, &format!("/users/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(me_status(&app, &f).await, 401);
    // Signing out needs the token itself.
    let r = app
        .admin(Method::DELETE, "/auth/token")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    app.stop().await;
}

#[tokio::test]
async fn passwords_have_a_minimum_length_everywhere() {
    let app = spawn_app().await;
    let r = app
        .admin(Method::POST, "/users")
        .json(&json!({"login": "short", "password": "x"}))
        .send()
        .await
        .unwrap();
    let (s, b) = json(r).await;
    assert_eq!(s, 400, "{b}");
    assert!(
        b["fields"]["password"].as_str().unwrap().contains("8"),
        "{b}"
    );
    assert!(
        !b.to_string().contains("\"x\""),
        "the value is not echoed: {b}"
    );
    let r = app
        .admin(Method::POST, "/users?bgrs=false")
        .json(&json!([{"login": "s1", "password": "1234567"}, {"login": "s2", "password": "12345678"}]))
        .send()
        .await
        .unwrap();
    let (s, b) = json(r).await;
    assert_eq!(s, 200);
    assert_eq!(b[0]["status"], 400);
    assert_eq!(b[1]["status"], 200);
    // In the background, the refusal is recorded per item.
    let r = app
        .admin(Method::POST, "/users")
        .json(&json!([{"login": "b1", "password": "short"}, {"login": "b2", "password": "long-enough"}]))
        .send()
        .await
        .unwrap();
    let (_, b) = json(r).await;
    let rid = b["request"].as_str().unwrap().to_string();
    let result = wait_result(&app, &rid).await;
    let items: Json = serde_json::from_str(&result).unwrap();
    assert_eq!(items[0]["status"], 400, "{items}");
    assert!(
        items[0]["body"].as_str().unwrap().contains("at least 8"),
        "{items}"
    );
    assert_eq!(items[1]["status"], 200, "{items}");
    // A single call in the background: refused before it is queued.
    let r = app
        .admin(Method::POST, "/users?bgrs=1")
        .json(&json!({"login": "b3", "password": "short"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    for (login, pw) in [("s2", "12345678"), ("b2", "long-enough")] {
        let r = app
            .as_user(login, pw, Method::GET, "/users/me")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{login} signs in");
    }
    app.stop().await;
}

/// Waits for a background request and returns its result text.
async fn wait_result(app: &common::TestApp, rid: &str) -> String {
    app.wait_ended(rid, Duration::from_secs(60)).await;
    app.result_text(rid).await
}

/// Whether any file under `dir` holds `needle`.
fn found_in(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut hits = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            hits.extend(found_in(&p, needle));
        } else if let Ok(bytes) = std::fs::read(&p)
            && bytes.windows(needle.len()).any(|w| w == needle)
        {
            hits.push(p.display().to_string());
        }
    }
    hits
}

#[tokio::test]
async fn background_work_never_stores_a_secret_in_clear() {
    let app = spawn_app().await;
    // A background batch of users with passwords, and a background single call.
    let r = app
        .admin(Method::POST, "/users")
        .json(&json!([
            {"login": "q1", "password": "Queue-Secret-One"},
            {"login": "q2", "password": "Queue-Secret-Two"}
        ]))
        .send()
        .await
        .unwrap();
    let rid1 = json(r).await.1["request"].as_str().unwrap().to_string();
    let r = app
        .admin(Method::POST, "/users?bgrs=1")
        .json(&json!({"login": "q3", "password": "Queue-Secret-Three"}))
        .send()
        .await
        .unwrap();
    let rid2 = json(r).await.1["request"].as_str().unwrap().to_string();
    // A background upload of users with passwords.
    let csv = "op,login,password\nc,q4,Upload-Secret-Four\nc,q5,Upload-Secret-Five\n";
    let form = Form::new().text("entity", "users").text("bgrs", "1").part(
        "csvfile",
        Part::bytes(csv.as_bytes().to_vec()).file_name("u.csv"),
    );
    let r = app
        .admin(Method::POST, "/tools/uploader.ex.php")
        .multipart(form)
        .send()
        .await
        .unwrap();
    let rid3 = json(r).await.1["request"].as_str().unwrap().to_string();
    for rid in [&rid1, &rid2, &rid3] {
        let result = wait_result(&app, rid).await;
        assert!(!result.contains("Secret"), "{result}");
    }
    for (login, pw) in [
        ("q1", "Queue-Secret-One"),
        ("q3", "Queue-Secret-Three"),
        ("q5", "Upload-Secret-Five"),
    ] {
        let r = app
            .as_user(login, pw, Method::GET, "/users/me")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{login} signs in");
    }
    // Nothing on disk (database, logs of requests, results, scratch) holds one in clear.
    if app.db.is_none() {
        let hits = found_in(&app.dir.path().join("data"), b"-Secret-");
        assert!(hits.is_empty(), "found in {hits:?}");
    }
    app.stop().await;
}

#[tokio::test]
async fn expired_tokens_are_refused_and_purged() {
    use entiserve::auth::{Auth, AuthError};
    use entiserve::engine::password;
    use entiserve::schema::ColType;
    use entiserve::storage::{self, Value};
    let dir = tempfile::tempdir().unwrap();
    let db = common::test_pg().await;
    let url = match &db {
        Some(d) => d.url.clone(),
        None => format!("sqlite://{}", dir.path().join("t.db").display()),
    };
    let store = storage::connect(&url).await.unwrap();
    let hash = password::hash("purge-password").unwrap();
    store
        .execute(
            "INSERT INTO \"users\" (\"login\", \"password\", \"role\", \"created_dt\", \"updated_dt\") VALUES ('pat', $1, 'user', '2026-01-01 00:00:00', '2026-01-01 00:00:00')"
                .replace("$1", if url.starts_with("sqlite") { "?1" } else { "$1" })
                .as_str(),
            &[Value::text(hash)],
        )
        .await
        .unwrap();
    let auth = Auth::new(store.clone(), 5);
    let short = auth
        .issue("pat", "purge-password", Duration::from_secs(1), None)
        .await
        .unwrap();
    let long = auth
        .issue("pat", "purge-password", Duration::from_secs(3600), None)
        .await
        .unwrap();
    let count = || async {
        store
            .fetch("SELECT COUNT(*) FROM \"auth_tokens\"", &[], &[ColType::Int])
            .await
            .unwrap()[0][0]
            .as_i64()
            .unwrap()
    };
    assert_eq!(count().await, 2);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert!(matches!(
        auth.token(&short.token).await,
        Err(AuthError::BadToken)
    ));
    assert_eq!(auth.purge().await.unwrap(), 1);
    assert_eq!(count().await, 1);
    assert!(auth.token(&long.token).await.is_ok());
    store.close().await;
}

#[tokio::test]
async fn password_hashing_never_holds_up_other_writers() {
    let app = spawn_app().await;
    let users: Vec<_> = (0..40)
        .map(|i| json!({"login": format!("h{i}"), "password": "first-password"}))
        .collect();
    let r = app
        .admin(Method::POST, "/users?bgrs=false")
        .json(&users)
        .send()
        .await
        .unwrap();
    let (_, created) = json(r).await;
    let changes: Vec<Json> = created
        .as_array()
        .unwrap()
        .iter()
        .map(|item| {
            let obj: Json = serde_json::from_str(item["body"].as_str().unwrap()).unwrap();
            json!({"id": obj["id"], "password": "second-password"})
        })
        .collect();
    let batch = {
        let req = app.admin(Method::PUT, "/users?bgrs=false").json(&changes);
        tokio::spawn(async move {
            let started = Instant::now();
            let r = req.send().await.unwrap();
            assert_eq!(r.status(), 200);
            let items: Json = r.json().await.unwrap();
            assert!(items.as_array().unwrap().iter().all(|i| i["status"] == 200));
            started.elapsed()
        })
    };
    // Other writes meanwhile.
    let mut slowest = Duration::ZERO;
    let mut n = 0;
    while !batch.is_finished() {
        let t = Instant::now();
        let r = app
            .admin(Method::POST, "/campaigns")
            .json(&json!({"name": format!("during {n}")}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        slowest = slowest.max(t.elapsed());
        n += 1;
    }
    let took = batch.await.unwrap();
    assert!(n > 0);
    assert!(
        slowest * 3 < took,
        "a campaign create waited {slowest:?} while the password batch took {took:?}"
    );
    let r = app
        .as_user("h7", "second-password", Method::GET, "/users/me")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    app.stop().await;
}

/// A client with many connections open signs in on all of them at once with the right
/// password: each request succeeds. The checks of the same credentials take turns, so they
/// count as one attempt, not as a burst of failures for the throttle to refuse.
#[tokio::test]
async fn the_right_password_on_many_connections_at_once_is_never_throttled() {
    let app = spawn_app().await;
    app.create_user("many", "many-connections-pw").await;
    let statuses = signed_in_at_once(&app, "many", "many-connections-pw", 48).await;
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    // A wrong password is still throttled after the free failures.
    let statuses = signed_in_at_once(&app, "many", "not-the-password", 12).await;
    assert!(statuses.contains(&429), "{statuses:?}");
    assert!(
        statuses.iter().all(|s| *s == 401 || *s == 429),
        "{statuses:?}"
    );
    app.stop().await;
}

/// The statuses of `n` requests sent at once, each signing in as `login` with `password`.
async fn signed_in_at_once(
    app: &common::TestApp,
    login: &str,
    password: &str,
    n: usize,
) -> Vec<u16> {
    let calls = (0..n).map(|_| {
        app.as_user(login, password, Method::GET, "/v2.5/campaigns")
            .send()
    });
    futures::future::join_all(calls)
        .await
        .into_iter()
        .map(|r| r.unwrap().status().as_u16())
        .collect()
}
