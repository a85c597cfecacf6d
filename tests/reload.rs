//! Live reload of entity definitions (`--dev`) and the OpenAPI document, against a real server.

mod common;

use common::*;
use reqwest::Method;
use serde_json::{Value as Json, json};
use std::time::Duration;

async fn status(app: &TestApp, m: Method, path: &str, body: Option<Json>) -> (u16, Json) {
    let mut r = app.admin(m, path);
    if let Some(b) = body {
        r = r.json(&b);
    }
    json(r.send().await.unwrap()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entities_change_without_a_restart() {
    let app = spawn_with(|s| s.dev = true).await;
    let dir = app.entities.clone();
    // A new file becomes a resource.
    std::fs::write(
        dir.join("gadgets.yaml"),
        "fields:\n  name: { type: string, required: true }\n",
    )
    .unwrap();
    eventually("/gadgets exists", Duration::from_secs(15), || async {
        status(&app, Method::GET, "/gadgets", None).await.0 == 200
    })
    .await;
    let (s, g) = status(
        &app,
        Method::POST,
        "/gadgets",
        Some(json!({"name": "first"})),
    )
    .await;
    assert_eq!(s, 200, "{g}");
    let (s, _) = status(
        &app,
        Method::POST,
        "/gadgets",
        Some(json!({"name": "x", "colour": "red"})),
    )
    .await;
    assert_eq!(s, 400, "validation follows the file");

    // An added field is accepted afterwards; existing rows keep their values.
    std::fs::write(
        dir.join("gadgets.yaml"),
        "fields:\n  name: { type: string, required: true }\n  colour: { type: enum, values: [red, blue] }\n",
    )
    .unwrap();
    eventually("colour accepted", Duration::from_secs(15), || async {
        status(
            &app,
            Method::POST,
            "/gadgets",
            Some(json!({"name": "second", "colour": "red"})),
        )
        .await
        .0 == 200
    })
    .await;
    let (_, first) = status(&app, Method::GET, &format!("/gadgets/{}", g["id"]), None).await;
    assert_eq!(first["name"], "first");
    assert_eq!(first["colour"], Json::Null);
    let (_, doc) = status(&app, Method::GET, "/openapi.json", None).await;
    assert!(
        doc["components"]["schemas"]["GadgetsCreate"]["properties"]["colour"].is_object(),
        "the document follows"
    );

    // An invalid file leaves the previous definition serving.
    std::fs::write(
        dir.join("gadgets.yaml"),
        "fields:\n  name: { type: strng }\n",
    )
    .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (s, b) = status(
        &app,
        Method::POST,
        "/gadgets",
        Some(json!({"name": "third", "colour": "blue"})),
    )
    .await;
    assert_eq!(s, 200, "still the last good definition: {b}");

    // A destructive change is refused and the data stays.
    std::fs::write(
        dir.join("gadgets.yaml"),
        "fields:\n  name: { type: string, required: true }\n",
    )
    .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (_, again) = status(&app, Method::GET, &format!("/gadgets/{}", b["id"]), None).await;
    assert_eq!(again["colour"], "blue", "the field is still served");
    let (s, _) = status(
        &app,
        Method::POST,
        "/gadgets",
        Some(json!({"name": "fourth", "colour": "red"})),
    )
    .await;
    assert_eq!(s, 200);

    // With allow_destructive the field stops being served, and its column keeps the data.
    std::fs::write(
        dir.join("gadgets.yaml"),
        "allow_destructive: true\nfields:\n  name: { type: string, required: true }\n",
    )
    .unwrap();
    eventually("colour gone", Duration::from_secs(15), || async {
        status(&app, Method::GET, &format!("/gadgets/{}", b["id"]), None)
            .await
            .1
            .get("colour")
            .is_none()
    })
    .await;
    std::fs::write(
        dir.join("gadgets.yaml"),
        "fields:\n  name: { type: string, required: true }\n  colour: { type: enum, values: [red, blue] }\n",
    )
    .unwrap();
    eventually(
        "colour back with its data",
        Duration::from_secs(15),
        || async {
            status(&app, Method::GET, &format!("/gadgets/{}", b["id"]), None)
                .await
                .1["colour"]
                == "blue"
        },
    )
    .await;

    // Removing an entity whose table has rows is refused.
    std::fs::remove_file(dir.join("gadgets.yaml")).unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(status(&app, Method::GET, "/gadgets", None).await.0, 200);
    app.stop().await;
}

#[tokio::test]
async fn the_openapi_document_covers_every_route() {
    let app = spawn_app().await;
    let doc = openapi_document(&app).await;
    assert_eq!(doc["openapi"], "3.1.0");
    let paths = doc["paths"].as_object().unwrap();
    for p in [
        "/healthz",
        "/auth/token",
        "/users/me",
        "/bgrs/{rid}",
        "/v2.5/bgrs/{rid}/result",
        "/tools/uploader.ex.php",
        "/campaigns",
        "/v2.5/campaigns/{id}",
        "/markers",
        "/assets/{id}",
        "/users",
    ] {
        assert!(paths.contains_key(p), "{p} is documented");
    }
    // Every $ref resolves.
    for r in json_refs(&doc) {
        assert!(!resolve_ref(&doc, &r).is_null(), "{r} resolves");
    }
    // The whole document is valid OpenAPI 3.1: checked against the OpenAPI Initiative's
    // published JSON Schema of OpenAPI 3.1 documents (spec.openapis.org/oas/3.1/schema/2022-10-07,
    // kept in tests/fixtures).
    let oas: Json = serde_json::from_str(include_str!("fixtures/openapi-3.1-schema.json")).unwrap();
    let validator = jsonschema::validator_for(&oas).expect("the OpenAPI 3.1 schema compiles");
    let problems: Vec<String> = validator
        .iter_errors(&doc)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(problems.is_empty(), "not valid OpenAPI 3.1: {problems:?}");
    let mut broken = doc.clone();
    broken["paths"]["/healthz"]["get"]["responses"]["200"] = json!({"content": 5});
    assert!(!validator.is_valid(&broken), "the check can fail");
    // The entity schemas are valid JSON Schema and say what the engine enforces.
    let create = &doc["components"]["schemas"]["CampaignsCreate"];
    assert_eq!(create["required"], json!(["name"]));
    assert!(jsonschema::meta::is_valid(create));
    let page = app.client.get(app.url("/docs")).send().await.unwrap();
    assert!(
        page.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    // A 405 names the methods that are allowed.
    let r = app.admin(Method::PATCH, "/campaigns").send().await.unwrap();
    assert_eq!(r.status(), 405);
    assert_eq!(r.headers()["allow"], "GET, POST, PUT, DELETE");
    app.stop().await;
}
