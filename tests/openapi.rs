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
        let body = r.text().await.unwrap_or_default();
        // The router's own refusals; a handler may still answer 404 or 405 of its own.
        assert!(
            !body.contains("no such route") && !body.contains("this method is not allowed here"),
            "{m} {path} is routed: {status} {body}"
        );
    }
    app.stop().await;
}
