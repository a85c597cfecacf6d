//! The sign-in throttle seen from another process: a person who waits as `Retry-After` asks
//! always gets the right password checked, and a guesser never learns a password from a
//! throttled login, not even one the server remembers from a recent sign-in. The server is a
//! real `entiserve serve` process; every wait and timing is the client's own.

mod common;

use common::process::Server;
use reqwest::StatusCode;
use serde_json::json;
use std::time::{Duration, Instant};

/// A client whose connections come from `ip` (any 127.x.y.z address is this machine).
fn client_from(ip: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(Some(ip.parse().unwrap()))
        .build()
        .unwrap()
}

/// One sign-in by Basic credentials: the status and `Retry-After`, if any.
async fn sign_in(
    s: &Server,
    client: &reqwest::Client,
    login: &str,
    password: &str,
) -> (StatusCode, Option<u64>) {
    let r = client
        .get(format!("{}/users/me", s.base))
        .basic_auth(login, Some(password))
        .send()
        .await
        .unwrap();
    let retry = r
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().parse().unwrap());
    (r.status(), retry)
}

async fn create_user(s: &Server, login: &str, password: &str) {
    let r = s
        .request(reqwest::Method::POST, "/users")
        .json(&json!({"login": login, "password": password}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
}

/// Wrong passwords until the first 429, which must come once the free failures are spent.
async fn guess_until_throttled(s: &Server, client: &reqwest::Client, login: &str) -> (u32, u64) {
    for n in 1..=20 {
        match sign_in(s, client, login, &format!("wrong guess {n}")).await {
            (StatusCode::UNAUTHORIZED, _) => continue,
            (StatusCode::TOO_MANY_REQUESTS, Some(wait)) => return (n, wait),
            other => panic!("guess {n} answered {other:?}"),
        }
    }
    panic!("20 wrong passwords were never throttled");
}

#[tokio::test]
async fn a_person_who_waits_as_told_gets_the_right_password_checked() {
    let dir = tempfile::tempdir().unwrap();
    let db = common::test_pg().await;
    let s = Server::start(
        "waits",
        &dir.path().join("data"),
        db.as_ref().map(|d| d.url.as_str()),
    );
    create_user(&s, "bob", "bobs-right-password").await;
    let bob = client_from("127.0.0.5");
    let (guesses, wait) = guess_until_throttled(&s, &bob, "bob").await;
    assert_eq!(guesses, 6, "five wrong passwords are free");
    assert_eq!(wait, 1);
    // While the wait lasts, even the right password is refused, and the wait does not grow.
    let (status, again) = sign_in(&s, &bob, "bob", "bobs-right-password").await;
    assert_eq!(status, 429);
    assert!(again.unwrap() <= wait, "{again:?}");
    // Waiting as told, the right password signs in.
    tokio::time::sleep(Duration::from_secs(wait)).await;
    let (status, _) = sign_in(&s, &bob, "bob", "bobs-right-password").await;
    assert_eq!(status, 200, "the right password after the wait");
    // It cleared bob's failures: the next wrong one is free again.
    let (status, _) = sign_in(&s, &bob, "bob", "one more slip").await;
    assert_eq!(status, 401);

    // Once past the free failures, each wrong password after a wait doubles the wait, and the
    // right one is still checked after each.
    let (_, first) = guess_until_throttled(&s, &bob, "bob").await;
    tokio::time::sleep(Duration::from_secs(first)).await;
    let (status, second) = sign_in(&s, &bob, "bob", "still wrong").await;
    assert_eq!(
        status, 429,
        "a wrong password after the wait throttles again"
    );
    assert_eq!(second, Some(first * 2), "with a doubled wait");
    tokio::time::sleep(Duration::from_secs(second.unwrap())).await;
    let started = Instant::now();
    let (status, _) = sign_in(&s, &bob, "bob", "bobs-right-password").await;
    assert_eq!(status, 200, "after {:?}", started.elapsed());
}

#[tokio::test]
async fn a_remembered_password_is_not_let_through_a_throttled_login() {
    let dir = tempfile::tempdir().unwrap();
    let db = common::test_pg().await;
    let s = Server::start(
        "remembered",
        &dir.path().join("data"),
        db.as_ref().map(|d| d.url.as_str()),
    );
    create_user(&s, "cy", "cys-right-password").await;
    let guesser = client_from("127.0.0.6");
    // cy signs in, so the server remembers the credentials.
    let (status, _) = sign_in(&s, &guesser, "cy", "cys-right-password").await;
    assert_eq!(status, 200);
    // Thirty guesses from the same address: the free ones are checked, the rest refused fast.
    let mut statuses = Vec::new();
    let mut refused_times = Vec::new();
    for n in 0..30 {
        let started = Instant::now();
        let (status, _) = sign_in(&s, &guesser, "cy", &format!("guess {n}")).await;
        if status == 429 {
            refused_times.push(started.elapsed());
        }
        statuses.push(status.as_u16());
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == 401).count(),
        5,
        "{statuses:?}"
    );
    assert!(statuses[5..].iter().all(|s| *s == 429), "{statuses:?}");
    refused_times.sort();
    let median = refused_times[refused_times.len() / 2];
    assert!(
        median < Duration::from_millis(50),
        "a throttled attempt is refused before any password check: median {median:?}"
    );
    // The right password, among the guesses, is refused like them: nothing tells it apart.
    let (status, retry) = sign_in(&s, &guesser, "cy", "cys-right-password").await;
    assert_eq!(
        status, 429,
        "a remembered password must not pass the throttle"
    );
    let wait = retry.expect("Retry-After");
    // cy, waiting as told, signs in again.
    tokio::time::sleep(Duration::from_secs(wait)).await;
    let (status, _) = sign_in(&s, &guesser, "cy", "cys-right-password").await;
    assert_eq!(status, 200);
}
