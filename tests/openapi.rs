//! The OpenAPI document as tools read it: stable operationIds, declared tags, typed batch items,
//! examples that their schemas accept, and nothing unused.

mod common;

use common::*;
use reqwest::Method;
use serde_json::{Value as Json, json};
use std::collections::{BTreeMap, BTreeSet};

const METHODS: [&str; 4] = ["get", "post", "put", "delete"];

/// Every operation: (path, method, operation).
fn operations(doc: &Json) -> Vec<(String, String, Json)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for m in METHODS {
            if let Some(op) = item.get(m) {
                out.push((path.clone(), m.to_string(), op.clone()));
            }
        }
    }
    out
}

/// `schema` with every `#/components/...` reference replaced by its target, so that a plain
/// JSON Schema validator can check values against it.
fn inline(doc: &Json, schema: &Json) -> Json {
    match schema {
        Json::Object(m) => {
            if let Some(Json::String(r)) = m.get("$ref") {
                return inline(doc, resolve_ref(doc, r));
            }
            Json::Object(m.iter().map(|(k, v)| (k.clone(), inline(doc, v))).collect())
        }
        Json::Array(a) => Json::Array(a.iter().map(|v| inline(doc, v)).collect()),
        v => v.clone(),
    }
}

#[tokio::test]
async fn every_operation_has_a_unique_id_a_summary_a_description_and_a_declared_tag() {
    let app = spawn_app().await;
    let doc = openapi_document(&app).await;
    let declared: BTreeMap<String, Json> = doc["tags"]
        .as_array()
        .expect("top-level tags")
        .iter()
        .map(|t| (t["name"].as_str().unwrap().to_string(), t.clone()))
        .collect();
    for (name, t) in &declared {
        assert!(
            t["description"].as_str().is_some_and(|d| !d.is_empty()),
            "tag {name} has a description"
        );
    }
    for tag in ["auth", "bgrs", "uploader", "system", "campaigns", "users"] {
        assert!(declared.contains_key(tag), "tag {tag} is declared");
    }
    let mut ids = BTreeMap::new();
    for (path, m, op) in operations(&doc) {
        let id = op["operationId"]
            .as_str()
            .unwrap_or_else(|| panic!("{m} {path} has an operationId"))
            .to_string();
        assert!(
            id.chars().next().unwrap().is_ascii_lowercase()
                && id.chars().all(|c| c.is_ascii_alphanumeric()),
            "{id} is camelCase"
        );
        if let Some(other) = ids.insert(id.clone(), format!("{m} {path}")) {
            panic!("{id} names both {other} and {m} {path}");
        }
        for key in ["summary", "description"] {
            assert!(
                op[key].as_str().is_some_and(|s| !s.is_empty()),
                "{m} {path} has a {key}"
            );
        }
        for tag in op["tags"].as_array().expect("tags") {
            assert!(
                declared.contains_key(tag.as_str().unwrap()),
                "{m} {path}: tag {tag} is declared"
            );
        }
        // Routes that take no credentials (health, this document, the pages) may have no
        // error reply of their own.
        let public = op["security"] == json!([]);
        if !public {
            let responses = op["responses"].as_object().unwrap();
            assert!(
                responses.keys().any(|c| c.starts_with('4')),
                "{m} {path} declares its 4xx replies"
            );
        }
    }
    // The ids are part of the API: these stay as they are.
    for (id, at) in [
        ("listCampaigns", "get /campaigns"),
        ("createCampaigns", "post /campaigns"),
        ("updateCampaigns", "put /campaigns"),
        ("deleteCampaigns", "delete /campaigns"),
        ("getCampaign", "get /campaigns/{id}"),
        ("updateCampaign", "put /campaigns/{id}"),
        ("deleteCampaign", "delete /campaigns/{id}"),
        ("getCampaignV25", "get /v2.5/campaigns/{id}"),
        ("getUser", "get /users/{id}"),
        ("signIn", "post /auth/token"),
        ("uploadFile", "post /tools/uploader.ex.php"),
        ("getBackgroundRequest", "get /bgrs/{rid}"),
        ("getBackgroundRequestResult", "get /bgrs/{rid}/result"),
    ] {
        assert_eq!(ids.get(id).map(String::as_str), Some(at), "{id}");
    }
    assert!(doc["info"]["license"]["name"].is_string());
    assert!(doc["info"]["contact"].is_object());
    app.stop().await;
}

#[tokio::test]
async fn batch_items_are_typed_and_nothing_is_unused() {
    let app = spawn_app().await;
    let doc = openapi_document(&app).await;
    let body = |path: &str, m: &str| {
        doc["paths"][path][m]["requestBody"]["content"]["application/json"]["schema"].clone()
    };
    assert_eq!(
        body("/campaigns", "post")["oneOf"][1]["items"],
        json!({"$ref": "#/components/schemas/CampaignsCreate"})
    );
    assert_eq!(
        body("/v2.5/markers", "put")["items"],
        json!({"$ref": "#/components/schemas/MarkersBatchUpdate"})
    );
    assert_eq!(
        body("/users", "delete")["items"],
        json!({"$ref": "#/components/schemas/BatchDeleteItem"})
    );
    let mut used: BTreeSet<String> = json_refs(&doc["paths"]).into_iter().collect();
    // Components used only by other components count too.
    loop {
        let mut more = BTreeSet::new();
        for r in &used {
            more.extend(json_refs(resolve_ref(&doc, r)));
        }
        let before = used.len();
        used.extend(more);
        if used.len() == before {
            break;
        }
    }
    for kind in ["schemas", "responses"] {
        for name in doc["components"][kind].as_object().unwrap().keys() {
            let r = format!("#/components/{kind}/{name}");
            assert!(used.contains(&r), "{r} is used");
        }
    }
    app.stop().await;
}

#[tokio::test]
async fn request_examples_fit_their_schemas_and_the_server_takes_them() {
    let app = spawn_app().await;
    let doc = openapi_document(&app).await;
    for (path, m, op) in operations(&doc) {
        let Some(content) = op["requestBody"]["content"].as_object() else {
            continue;
        };
        for (media, c) in content {
            let example = c
                .get("example")
                .unwrap_or_else(|| panic!("{m} {path} {media} has an example"));
            let schema = inline(&doc, &c["schema"]);
            let v = jsonschema::validator_for(&schema).unwrap();
            assert!(
                v.is_valid(example),
                "{m} {path} {media}: the example fits the schema: {:?}",
                v.iter_errors(example)
                    .map(|e| e.to_string())
                    .collect::<Vec<_>>()
            );
        }
    }
    // The create example is a payload the server accepts as it is.
    let example = doc["paths"]["/campaigns"]["post"]["requestBody"]["content"]["application/json"]
        ["example"]
        .clone();
    let r = app
        .admin(Method::POST, "/campaigns")
        .json(&example)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{example}");
    app.stop().await;
}

/// The route table, the router and the document agree: every route and method the table
/// holds is in the document, every path and method of the document is in the table, and the
/// router answers each of them (never "no such route" or 405).
#[tokio::test]
async fn the_router_and_the_document_have_the_same_routes() {
    use entiserve::routes::{Owner, PREFIX, under};
    let app = spawn_app().await;
    let doc = openapi_document(&app).await;
    let entities = ["campaigns", "markers", "assets", "users"];
    let mut table: BTreeSet<(String, String)> = BTreeSet::new();
    for prefix in ["", PREFIX] {
        for r in under(prefix) {
            let paths: Vec<String> = match r.owner {
                Owner::Entity => entities
                    .iter()
                    .map(|e| r.path.replace(":entity", e))
                    .collect(),
                _ => vec![r.path.to_string()],
            };
            for p in paths {
                let templated: Vec<String> = p
                    .split('/')
                    .map(|s| match s.strip_prefix(':') {
                        Some(name) => format!("{{{name}}}"),
                        None => s.to_string(),
                    })
                    .collect();
                for m in r.methods {
                    table.insert((
                        format!("{prefix}{}", templated.join("/")),
                        m.to_ascii_lowercase(),
                    ));
                }
            }
        }
    }
    let documented: BTreeSet<(String, String)> = operations(&doc)
        .into_iter()
        .map(|(p, m, _)| (p, m))
        .collect();
    assert_eq!(
        table.difference(&documented).collect::<Vec<_>>(),
        Vec::<&(String, String)>::new(),
        "routes the document lacks"
    );
    assert_eq!(
        documented.difference(&table).collect::<Vec<_>>(),
        Vec::<&(String, String)>::new(),
        "documented routes the table lacks"
    );
    for (path, m) in &documented {
        let concrete = path
            .replace("{rid}", "0123456789abcdef0123456789abcdef")
            .replace("{id}", "1")
            .replace("{file}", "x")
            .replace("{key}", "campaigns/x/y.pdf")
            .replace("{name}", "common.css");
        let method = Method::from_bytes(m.to_ascii_uppercase().as_bytes()).unwrap();
        let r = app.admin(method, &concrete).send().await.unwrap();
        let status = r.status().as_u16();
        let streamed = r
            .headers()
            .get("content-type")
            .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
        if streamed {
            // A live stream does not end: its head is the answer.
            assert_eq!(status, 200, "{m} {path}");
            continue;
        }
        let body = r.text().await.unwrap_or_default();
        // The router's own refusals; a handler may still answer 404 or 405 of its own.
        assert!(
            !body.contains("no such route") && !body.contains("this method is not allowed here"),
            "{m} {path} is routed: {status} {body}"
        );
    }
    app.stop().await;
}

/// A validator for `schema` (a document schema, references inlined) that also checks formats.
fn validator(doc: &Json, schema: &Json) -> jsonschema::Validator {
    jsonschema::options()
        .should_validate_formats(true)
        .build(&inline(doc, schema))
        .unwrap()
}

/// `schema`'s value type when it may not be null: its `type`, or `None` for a schema that
/// admits null.
fn never_null(schema: &Json) -> Option<&Json> {
    let t = &schema["type"];
    let nullable = t == "null"
        || t.as_array().is_some_and(|a| a.contains(&json!("null")))
        || schema.get("anyOf").is_some();
    (!nullable && !t.is_null()).then_some(t)
}

/// A server on the shipped entities and `gadgets` (one field of every type).
async fn spawn_with_gadgets() -> TestApp {
    spawn_with(|s| {
        std::fs::copy(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("clients/lint/entities/gadgets.yaml"),
            s.entities_dir.join("gadgets.yaml"),
        )
        .unwrap();
    })
    .await
}

/// The read schemas promise what objects hold: every field present, `id` and the required
/// fields never null, and the constraints of the create schemas (`enum`, `maxLength`,
/// `format`).
#[tokio::test]
async fn read_schemas_never_make_ids_or_required_fields_nullable() {
    let app = spawn_with_gadgets().await;
    let doc = openapi_document(&app).await;
    let schemas = &doc["components"]["schemas"];
    for t in ["Campaigns", "Markers", "Assets", "Users", "Gadgets"] {
        let s = &schemas[t];
        assert_eq!(
            never_null(&s["properties"]["id"]),
            Some(&json!("integer")),
            "{t}.id: {s}"
        );
        let required: BTreeSet<&str> = s["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap())
            .collect();
        let properties: BTreeSet<&str> = s["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(required, properties, "{t}: every field is in every object");
    }
    let campaigns = &schemas["Campaigns"]["properties"];
    assert_eq!(never_null(&campaigns["name"]), Some(&json!("string")));
    assert_eq!(campaigns["name"]["maxLength"], 255);
    assert!(
        never_null(&campaigns["description"]).is_none(),
        "optional: may be null"
    );
    let markers = &schemas["Markers"]["properties"];
    assert_eq!(never_null(&markers["campaign_id"]), Some(&json!("integer")));
    let users = &schemas["Users"]["properties"];
    assert!(
        users.get("password").is_none(),
        "secret fields are never returned"
    );
    assert_eq!(never_null(&users["login"]), Some(&json!("string")));
    assert_eq!(users["login"]["maxLength"], 64);
    assert_eq!(users["role"]["anyOf"][0]["enum"], json!(["admin", "user"]));
    let gadgets = &schemas["Gadgets"]["properties"];
    assert_eq!(never_null(&gadgets["code"]), Some(&json!("string")));
    assert_eq!(gadgets["code"]["maxLength"], 32);
    assert_eq!(gadgets["released"]["anyOf"][0]["format"], "date");
    assert_eq!(
        gadgets["state"]["anyOf"][0]["enum"],
        json!(["draft", "live", "retired"])
    );
    // One object is read, changed and deleted as the object schema says.
    for (m, path) in [
        ("get", "/campaigns/{id}"),
        ("put", "/campaigns/{id}"),
        ("delete", "/campaigns/{id}"),
    ] {
        assert_eq!(
            doc["paths"][path][m]["responses"]["200"]["content"]["application/json"]["schema"],
            json!({"$ref": "#/components/schemas/Campaigns"}),
            "{m} {path}"
        );
    }
    app.stop().await;
}

/// A dry run's reply has a schema of its own: an object it would create has a null id, which
/// the object schema refuses; real replies fit the object schema.
#[tokio::test]
async fn a_dry_run_reply_has_its_own_schema_and_replies_fit_their_schemas() {
    let app = spawn_with_gadgets().await;
    let doc = openapi_document(&app).await;
    let schemas = &doc["components"]["schemas"];
    let dry = &schemas["CampaignsDryRun"];
    assert_eq!(dry["properties"]["id"]["type"], "null", "{dry}");
    assert_eq!(
        never_null(&dry["properties"]["name"]),
        Some(&json!("string"))
    );
    let create = &doc["paths"]["/campaigns"]["post"]["responses"]["200"]["content"]["application/json"]
        ["schema"];
    assert!(
        create["oneOf"]
            .as_array()
            .unwrap()
            .contains(&json!({"$ref": "#/components/schemas/CampaignsDryRun"})),
        "{create}"
    );
    let object = validator(&doc, &json!({"$ref": "#/components/schemas/Campaigns"}));
    let dry_run = validator(
        &doc,
        &json!({"$ref": "#/components/schemas/CampaignsDryRun"}),
    );
    let create_reply = validator(&doc, create);
    let post = |query: &'static str, body: Json| {
        let r = app
            .admin(Method::POST, &format!("/campaigns{query}"))
            .json(&body);
        async move {
            let r = r.send().await.unwrap();
            assert_eq!(r.status(), 200);
            r.json::<Json>().await.unwrap()
        }
    };
    let would = post("?dry_run=1", json!({"name": "dry"})).await;
    assert!(would["id"].is_null(), "{would}");
    assert!(dry_run.is_valid(&would), "{would}");
    assert!(!object.is_valid(&would), "{would}");
    assert!(create_reply.is_valid(&would), "{would}");
    let made = post("", json!({"name": "real"})).await;
    assert!(object.is_valid(&made), "{made}");
    assert!(!dry_run.is_valid(&made), "{made}");
    assert!(create_reply.is_valid(&made), "{made}");
    // Read back, the object and a page of objects fit their schemas, the id going straight
    // into the path.
    let id = made["id"].as_i64().unwrap();
    let got: Json = app
        .admin(Method::GET, &format!("/campaigns/{id}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(object.is_valid(&got), "{got}");
    // A dry run that changes an existing object answers with its id.
    let changed: Json = app
        .admin(Method::PUT, &format!("/campaigns/{id}?dry_run=1"))
        .json(&json!({"description": "maybe"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(object.is_valid(&changed), "{changed}");
    // Every type of field, with values and without.
    let gadgets = validator(&doc, &json!({"$ref": "#/components/schemas/Gadgets"}));
    let full = app
        .create(
            "gadgets",
            json!({"code": "g-1", "notes": "n", "stock": 3, "price": 12.5, "in_stock": false,
                   "released": "2024-02-29", "checked_at": "2024-01-02 03:04:05",
                   "state": "live", "campaign_id": id}),
        )
        .await;
    let bare = app.create("gadgets", json!({"code": "g-2"})).await;
    for g in [&full, &bare] {
        assert!(
            gadgets.is_valid(g),
            "{g}: {:?}",
            gadgets
                .iter_errors(g)
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
        );
    }
    let list_schema = &doc["paths"]["/gadgets"]["get"]["responses"]["200"]["content"]["application/json"]
        ["schema"];
    let page: Json = app
        .admin(Method::GET, "/gadgets")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(page.as_array().map(Vec::len), Some(2));
    assert!(validator(&doc, list_schema).is_valid(&page), "{page}");
    app.stop().await;
}
