//! Authentication and access rules of CONTRACT.md section 2.

mod common;

use common::*;
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn credentials_are_required_except_for_healthz() {
    let app = spawn_app().await;
    let r = app.client.get(app.url("/healthz")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()["content-type"],
        "application/json; charset=utf-8"
    );
    assert_eq!(
        r.json::<serde_json::Value>().await.unwrap(),
        serde_json::json!({"status": "ok"})
    );
    for path in [
        "/campaigns",
        "/v2.5/campaigns",
        "/users/me",
        "/campaigns/1",
        "/nothing",
    ] {
        let r = app.client.get(app.url(path)).send().await.unwrap();
        assert!(r.headers().contains_key("www-authenticate"));
        let (s, b) = json(r).await;
        assert_eq!((s, error_code(&b)), (401, "unauthorized".into()), "{path}");
    }
    let (s, _) = json(
        app.as_user("admin", "wrong", Method::GET, "/campaigns")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 401);
    let (s, _) = json(
        app.as_user("ghost", "x", Method::GET, "/campaigns")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 401);
    let r = app
        .client
        .get(app.url("/campaigns"))
        .header("authorization", "Basic !!!")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    app.stop().await;
}

#[tokio::test]
async fn tokens_by_json_form_and_query() {
    let app = spawn_app().await;
    let r = app
        .client
        .post(app.url("/auth/token"))
        .json(&json!({"login": "admin", "password": ADMIN_PASSWORD}))
        .send()
        .await
        .unwrap();
    let (s, b) = json(r).await;
    assert_eq!(s, 200, "{b}");
    let token = b["token"].as_str().unwrap().to_string();
    assert_eq!(b["expires_dt"].as_str().unwrap().len(), 19);

    let r = app
        .client
        .get(app.url("/users/me"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    let (s, me) = json(r).await;
    assert_eq!((s, me["login"].as_str()), (200, Some("admin")));
    assert!(me.get("password").is_none(), "password never returned");
    let r = app
        .client
        .get(app.url(&format!("/v2.5/campaigns?_token={token}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    let r = app
        .client
        .post(app.url("/auth/token"))
        .form(&[
            ("login", "admin"),
            ("password", ADMIN_PASSWORD),
            ("ttl", "1"),
        ])
        .send()
        .await
        .unwrap();
    let (s, b) = json(r).await;
    assert_eq!(s, 200);
    let short = b["token"].as_str().unwrap().to_string();
    let r = app
        .client
        .post(app.url(&format!(
            "/auth/token?login=admin&password={ADMIN_PASSWORD}"
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    for bad in [json!({"login": "admin", "password": "nope"})] {
        let (s, b) = json(
            app.client
                .post(app.url("/auth/token"))
                .json(&bad)
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!((s, error_code(&b)), (401, "unauthorized".into()));
    }
    for ttl in ["0", "604801", "soon"] {
        let body = json!({"login": "admin", "password": ADMIN_PASSWORD, "ttl": ttl});
        let (s, _) = json(
            app.client
                .post(app.url("/auth/token"))
                .json(&body)
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(s, 400, "ttl {ttl}");
    }
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let r = app
        .client
        .get(app.url("/users/me"))
        .bearer_auth(&short)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401, "expired token");
    let r = app
        .client
        .get(app.url("/users/me"))
        .bearer_auth("not-a-token")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    app.stop().await;
}

#[tokio::test]
async fn users_rules() {
    let app = spawn_app().await;
    let alice = app.create_user("alice", "alice-password").await;
    let bob = app.create_user("bob", "bob-password").await;
    let a = |m, p: &str| app.as_user("alice", "alice-password", m, p);

    let (s, me) = json(a(Method::GET, "/users/me").send().await.unwrap()).await;
    assert_eq!((s, me["id"].as_i64()), (200, Some(alice)));
    assert_eq!(me["role"], "user");
    let (s, _) = json(
        a(Method::GET, &format!("/users/{alice}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200);
    let (s, b) = json(
        a(Method::GET, &format!("/users/{bob}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    // Another user's record does not exist for a user (the rule `view: id = @caller.id`).
    assert_eq!((s, error_code(&b)), (404, "not_found".into()));
    let r = a(Method::GET, "/users").send().await.unwrap();
    assert_eq!(
        r.headers()["x-total-count"],
        "1",
        "a user lists only themselves"
    );
    let (s, _) = json(
        a(Method::POST, "/users")
            .json(&json!({"login": "eve"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 403);
    let (s, _) = json(
        a(Method::DELETE, &format!("/users/{bob}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        s, 404,
        "a record the user may not view, which only admins delete"
    );
    let (s, _) = json(
        a(Method::PUT, &format!("/users/{bob}"))
            .json(&json!({"first_name": "B"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 404, "a record the user may not view");
    let (s, b) = json(
        a(Method::PUT, &format!("/users/{alice}"))
            .json(&json!({"role": "admin"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 403, "a user cannot promote themselves: {b}");
    let (s, b) = json(
        a(Method::PUT, &format!("/users/{alice}"))
            .json(&json!({"first_name": "Alice"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((s, b["first_name"].as_str()), (200, Some("Alice")));
    assert!(b.get("password").is_none());

    // Any signed-in user writes campaigns.
    let (s, _) = json(
        a(Method::POST, "/campaigns")
            .json(&json!({"name": "hers"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200);

    // A password change takes effect at once, cached credentials notwithstanding.
    let (s, _) = json(
        a(Method::PUT, &format!("/users/{alice}"))
            .json(&json!({"password": "new-password"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200);
    let (s, _) = json(a(Method::GET, "/users/me").send().await.unwrap()).await;
    assert_eq!(s, 401, "old password refused");
    let (s, _) = json(
        app.as_user("alice", "new-password", Method::GET, "/users/me")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200);

    // The admin deletes a user; their credentials stop working.
    let (s, _) = json(
        app.admin(Method::DELETE, &format!("/users/{bob}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200);
    let (s, _) = json(
        app.as_user("bob", "bob-password", Method::GET, "/users/me")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 401);
    app.stop().await;
}
