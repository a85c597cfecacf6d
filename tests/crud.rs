//! CRUD routes of CONTRACT.md section 4 against a real server.

mod common;

use common::*;
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn create_get_list_update_delete() {
    let app = spawn_app().await;
    let c = app
        .create("campaigns", json!({"name": "Spring", "is_active": false}))
        .await;
    assert_eq!(c["name"], "Spring");
    assert_eq!(c["type"], 1, "default applied");
    assert_eq!(c["is_active"], false);
    assert!(c["created_dt"].as_str().unwrap().len() == 19);
    let id = c["id"].as_i64().unwrap();

    let (s, got) = json(
        app.admin(Method::GET, &format!("/campaigns/{id}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(got, c);

    // Same routes under /v2.5.
    let (s, got) = json(
        app.admin(Method::GET, &format!("/v2.5/campaigns/{id}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((s, &got), (200, &c));

    // Update: body and query string, body wins on a clash; only given fields change.
    let r = app
        .admin(
            Method::PUT,
            &format!("/campaigns/{id}?description=from+query&type=3"),
        )
        .json(&json!({"type": 9}))
        .send()
        .await
        .unwrap();
    let (s, u) = json(r).await;
    assert_eq!(s, 200, "{u}");
    assert_eq!(u["type"], 9);
    assert_eq!(u["description"], "from query");
    assert_eq!(u["name"], "Spring");
    assert_eq!(u["is_active"], false);

    let (s, d) = json(
        app.admin(Method::DELETE, &format!("/campaigns/{id}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(d["id"], id);
    let (s, e) = json(
        app.admin(Method::GET, &format!("/campaigns/{id}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 404);
    assert_eq!(error_code(&e), "not_found");
    app.stop().await;
}

#[tokio::test]
async fn create_from_form_query_and_multipart() {
    let app = spawn_app().await;
    let r = app
        .admin(Method::POST, "/campaigns")
        .form(&[("name", "Formed"), ("is_active", "no"), ("type", "4")])
        .send()
        .await
        .unwrap();
    let (s, b) = json(r).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(
        (b["is_active"].clone(), b["type"].clone()),
        (json!(false), json!(4))
    );

    let (s, b) = json(
        app.admin(Method::POST, "/campaigns?name=Queried&is_active=yes")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["is_active"], true);

    let form = reqwest::multipart::Form::new()
        .text("name", "Multi")
        .text("description", "a; b");
    let (s, b) = json(
        app.admin(Method::POST, "/v2.5/campaigns")
            .multipart(form)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["description"], "a; b");
    app.stop().await;
}

#[tokio::test]
async fn list_pages_filters_counts_and_csv() {
    let app = spawn_app().await;
    for i in 0..5 {
        app.create("campaigns", json!({"name": format!("c{i}"), "type": i % 2}))
            .await;
    }
    let r = app
        .admin(Method::GET, "/campaigns?limit=2&offset=1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-total-count"], "5");
    let (s, b) = json(r).await;
    assert_eq!(s, 200);
    let names: Vec<&str> = b
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["c1", "c2"]);

    let r = app
        .admin(Method::GET, "/campaigns?type=1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-total-count"], "2");
    let (_, b) = json(r).await;
    assert_eq!(b.as_array().unwrap().len(), 2);

    let r = app
        .admin(Method::GET, "/campaigns?is_active=1&limit=1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-total-count"], "5");

    let r = app
        .admin(Method::GET, "/campaigns?t=csv&type=0")
        .send()
        .await
        .unwrap();
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/csv")
    );
    let text = r.text().await.unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next().unwrap(),
        "id,name,type,description,is_active,created_dt,updated_dt"
    );
    let first: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!((first[1], first[2], first[4]), ("c0", "0", "1"));
    assert_eq!(text.lines().count(), 4);

    for bad in [
        "/campaigns?limit=10001",
        "/campaigns?limit=x",
        "/campaigns?offset=-1",
        "/campaigns?type=abc",
    ] {
        let (s, b) = json(app.admin(Method::GET, bad).send().await.unwrap()).await;
        assert_eq!(s, 400, "{bad}: {b}");
        error_code(&b);
    }
    let (s, b) = json(
        app.admin(Method::GET, "/campaigns?colour=red")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((s, error_code(&b)), (400, "unknown_field".into()));
    assert!(b["description"].as_str().unwrap().contains("colour"));
    // An unknown field of 100,000 characters is named by its first 40.
    let long = "c".repeat(100_000);
    let (s, b) = json(
        app.admin(Method::POST, "/campaigns")
            .json(&json!({"name": "x", long.as_str(): 1}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((s, error_code(&b)), (400, "unknown_field".into()), "{b}");
    assert_eq!(
        b["description"],
        format!("unknown field `{}...`", "c".repeat(40)),
    );
    app.stop().await;
}

#[tokio::test]
async fn validation_errors_name_the_field_and_change_nothing() {
    let app = spawn_app().await;
    let cases = [
        (
            json!({"name": "x", "colour": "red"}),
            "unknown_field",
            "colour",
        ),
        (json!({"type": 1}), "validation_failed", "name"),
        (
            json!({"name": "x", "type": "many"}),
            "validation_failed",
            "type",
        ),
        (
            json!({"name": "x", "is_active": "perhaps"}),
            "validation_failed",
            "is_active",
        ),
        (
            json!({"name": "x".repeat(256)}),
            "validation_failed",
            "name",
        ),
        (json!({"name": "x", "id": 5}), "validation_failed", "id"),
    ];
    for (body, code, field) in cases {
        let (s, b) = json(
            app.admin(Method::POST, "/campaigns")
                .json(&body)
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(s, 400, "{body}: {b}");
        assert_eq!(error_code(&b), code, "{b}");
        assert!(b["fields"].get(field).is_some(), "{b} should name {field}");
    }
    let (s, b) = json(
        app.admin(Method::POST, "/campaigns?is_active=maybe&name=x")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((s, error_code(&b)), (400, "validation_failed".into()));
    let r = app.admin(Method::GET, "/campaigns").send().await.unwrap();
    assert_eq!(r.headers()["x-total-count"], "0", "nothing was created");

    // Enum, date and max length on an entity that has them.
    let (s, b) = json(
        app.admin(Method::POST, "/users")
            .json(&json!({"login": "u", "role": "king"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (s, error_code(&b)),
        (400, "validation_failed".into()),
        "{b}"
    );
    app.stop().await;
}

#[tokio::test]
async fn references_and_conflicts() {
    let app = spawn_app().await;
    let c = app.create("campaigns", json!({"name": "c"})).await;
    let (s, b) = json(
        app.admin(Method::POST, "/markers")
            .json(&json!({"name": "m", "campaign_id": 999}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (s, error_code(&b)),
        (400, "invalid_reference".into()),
        "{b}"
    );
    assert!(b["fields"].get("campaign_id").is_some());

    let m = app
        .create("markers", json!({"name": "m", "campaign_id": c["id"]}))
        .await;
    let (s, b) = json(
        app.admin(Method::DELETE, &format!("/campaigns/{}", c["id"]))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((s, error_code(&b)), (409, "referenced".into()), "{b}");
    let (s, _) = json(
        app.admin(Method::GET, &format!("/campaigns/{}", c["id"]))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200, "still there");

    // Update to a missing reference.
    let (s, b) = json(
        app.admin(Method::PUT, &format!("/markers/{}", m["id"]))
            .json(&json!({"campaign_id": 12345}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (s, error_code(&b)),
        (400, "invalid_reference".into()),
        "{b}"
    );

    // Unique violation.
    app.create_user("dup", "password-1").await;
    let (s, b) = json(
        app.admin(Method::POST, "/users")
            .json(&json!({"login": "dup"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((s, error_code(&b)), (409, "conflict".into()), "{b}");
    assert!(b["fields"].get("login").is_some(), "{b}");
    app.stop().await;
}

#[tokio::test]
async fn http_level_errors() {
    let app = spawn_app().await;
    let cases: Vec<(reqwest::RequestBuilder, u16, &str)> = vec![
        (app.admin(Method::GET, "/nothing"), 404, "not_found"),
        (app.admin(Method::GET, "/campaigns/abc"), 404, "not_found"),
        (
            app.admin(Method::GET, "/campaigns/123456"),
            404,
            "not_found",
        ),
        (
            app.admin(Method::PUT, "/campaigns/123456")
                .json(&json!({"name": "x"})),
            404,
            "not_found",
        ),
        (
            app.admin(Method::DELETE, "/campaigns/123456"),
            404,
            "not_found",
        ),
        (
            app.admin(Method::PATCH, "/campaigns/1"),
            405,
            "method_not_allowed",
        ),
        (
            app.admin(Method::POST, "/campaigns/1"),
            405,
            "method_not_allowed",
        ),
        (
            app.admin(Method::GET, "/campaigns")
                .json(&json!([{"name": "x"}])),
            405,
            "method_not_allowed",
        ),
        (
            app.admin(Method::POST, "/campaigns")
                .header("content-type", "text/plain")
                .body("name=x"),
            415,
            "unsupported_media_type",
        ),
        (
            app.admin(Method::POST, "/campaigns")
                .header("content-type", "application/json")
                .body("{\"name\": "),
            400,
            "bad_request",
        ),
        (
            app.admin(Method::POST, "/campaigns")
                .header("content-type", "application/json")
                .body("42"),
            400,
            "bad_request",
        ),
    ];
    for (req, status, code) in cases {
        let r = req.send().await.unwrap();
        let url = r.url().to_string();
        let (s, b) = json(r).await;
        assert_eq!((s, error_code(&b).as_str()), (status, code), "{url}: {b}");
        let text = b.to_string().to_lowercase();
        assert!(
            !text.contains("sqlite") && !text.contains("select") && !text.contains("panicked"),
            "{b}"
        );
    }
    app.stop().await;
}

#[tokio::test]
async fn a_fifth_entity_needs_only_yaml() {
    let app = spawn_with(|s| {
        std::fs::write(
            s.entities_dir.join("gadgets.yaml"),
            "access: { read: user, write: user }\nfields:\n  name: { type: string, required: true, unique: true }\n  weight: { type: decimal }\n  made: { type: date }\n  seen: { type: datetime }\n  kind: { type: enum, values: [small, big] }\n  campaign_id: { type: reference, entity: campaigns }\n",
        )
        .unwrap();
    })
    .await;
    let g = app
        .create("gadgets", json!({"name": "g1", "weight": 1.5, "made": "2024-02-29", "seen": "2024-01-02T03:04:05", "kind": "big"}))
        .await;
    assert_eq!(g["seen"], "2024-01-02 03:04:05");
    assert_eq!(g["weight"], 1.5);
    let (s, b) = json(
        app.admin(Method::POST, "/gadgets?name=g2&made=2023-02-29")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (s, error_code(&b)),
        (400, "validation_failed".into()),
        "{b}"
    );
    let (s, b) = json(
        app.admin(Method::POST, "/gadgets")
            .json(&json!({"name": "g3", "kind": "huge"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (s, error_code(&b)),
        (400, "validation_failed".into()),
        "{b}"
    );
    let (s, b) = json(
        app.admin(Method::POST, "/gadgets")
            .json(&json!({"name": "g1"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((s, error_code(&b)), (409, "conflict".into()), "{b}");
    let r = app
        .admin(Method::GET, "/v2.5/gadgets?kind=big")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-total-count"], "1");
    app.stop().await;
}

/// Point reads keep a snapshot between reads while nothing is written (SQLite): a read on
/// another connection, right after a write's answer, still sees the write, while a third
/// connection keeps reading.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_right_after_a_write_sees_it_on_another_connection() {
    let app = spawn_app().await;
    let first = app
        .create("campaigns", json!({"name": "read all the time"}))
        .await;
    let busy_url = app.url(&format!("/campaigns/{}", first["id"]));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let busy = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut reads = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let r = client
                    .get(&busy_url)
                    .basic_auth("admin", Some(ADMIN_PASSWORD))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), 200);
                reads += 1;
            }
            reads
        })
    };
    let reader = reqwest::Client::new();
    let read = |id: i64| {
        reader
            .get(app.url(&format!("/campaigns/{id}")))
            .basic_auth("admin", Some(ADMIN_PASSWORD))
            .send()
    };
    for i in 0..150 {
        let c = app
            .create("campaigns", json!({"name": format!("n{i}")}))
            .await;
        let id = c["id"].as_i64().unwrap();
        let (s, got) = json(read(id).await.unwrap()).await;
        assert_eq!(
            (s, &got["name"]),
            (200, &json!(format!("n{i}"))),
            "create {i}"
        );
        let s = app
            .admin(Method::PUT, &format!("/campaigns/{id}"))
            .json(&json!({"description": format!("v{i}")}))
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(s, 200);
        let (_, got) = json(read(id).await.unwrap()).await;
        assert_eq!(got["description"], json!(format!("v{i}")), "update {i}");
        let s = app
            .admin(Method::DELETE, &format!("/campaigns/{id}"))
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(s, 200);
        assert_eq!(read(id).await.unwrap().status(), 404, "delete {i}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(busy.await.unwrap() > 0);
}

/// Reads of one object while nothing is written are answered from what their thread's snapshot
/// read (`src/storage/near/`); each write is seen by the reads after it, on every thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_again_see_each_write_at_once() {
    let app = spawn_app().await;
    let c = app.create("campaigns", json!({"name": "v0"})).await;
    let path = format!("/campaigns/{}", c["id"]);
    let read_all = || async {
        let reads = (0..16)
            .map(|_| async { json(app.admin(Method::GET, &path).send().await.unwrap()).await });
        futures::future::join_all(reads).await
    };
    for round in 1..=20 {
        for (s, o) in read_all().await {
            assert_eq!(s, 200, "{o}");
            assert_eq!(o["name"], format!("v{}", round - 1), "round {round}");
        }
        let (s, o) = json(
            app.admin(Method::PUT, &path)
                .json(&json!({"name": format!("v{round}")}))
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(s, 200, "{o}");
    }
    let (s, _) = json(app.admin(Method::DELETE, &path).send().await.unwrap()).await;
    assert_eq!(s, 200);
    for (s, o) in read_all().await {
        assert_eq!(s, 404, "deleted: {o}");
    }
    app.stop().await;
}
