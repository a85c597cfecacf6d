//! The fixed part of the OpenAPI document: routes that do not depend on the entities, and the
//! shared schemas and error responses.

use super::{errors, json_content, reference};
use serde_json::{Map, Value as Json, json};

/// Shared component schemas.
pub fn schemas() -> Map<String, Json> {
    let s = |v: Json| v;
    let strings = |names: &[&str]| -> Json {
        let props: Map<String, Json> = names
            .iter()
            .map(|n| (n.to_string(), json!({"type": "string"})))
            .collect();
        json!({"type": "object", "properties": props, "required": names})
    };
    Map::from_iter([
        (
            "Error".to_string(),
            s(json!({
                "type": "object",
                "properties": {
                    "error": {"type": "string", "description": "snake_case error code"},
                    "description": {"type": "string"},
                    "fields": {"type": "object", "additionalProperties": {"type": "string"}}
                },
                "required": ["error", "description"]
            })),
        ),
        (
            "BatchItem".to_string(),
            json!({
                "type": "object",
                "properties": {
                    "status": {"type": "integer", "description": "HTTP status of this item"},
                    "body": {"type": "string", "description": "the JSON text of this item's response"}
                },
                "required": ["status", "body"]
            }),
        ),
        (
            "Accepted".to_string(),
            json!({"type": "object", "properties": {"request": {"type": "string", "pattern": "^[0-9a-f]{32}$"}}, "required": ["request"]}),
        ),
        (
            "BgRequest".to_string(),
            strings(&[
                "id",
                "rid",
                "user_id",
                "name",
                "created_dt",
                "status_id",
                "status_name",
                "progress",
                "finished_dt",
                "result",
                "status",
                "content_type",
            ]),
        ),
        (
            "Detail".to_string(),
            strings(&["id", "rid", "dt", "details"]),
        ),
        (
            "Token".to_string(),
            json!({"type": "object", "properties": {"token": {"type": "string"}, "expires_dt": {"type": "string"}}, "required": ["token", "expires_dt"]}),
        ),
        (
            "TokenRequest".to_string(),
            json!({
                "type": "object",
                "properties": {
                    "login": {"type": "string"},
                    "password": {"type": "string"},
                    "ttl": {"type": "integer", "minimum": 1, "maximum": 604800}
                },
                "required": ["login", "password"],
                "additionalProperties": false
            }),
        ),
        (
            "Upload".to_string(),
            json!({
                "type": "object",
                "properties": {
                    "entity": {"type": "string"},
                    "csvfile": {"type": "string", "contentMediaType": "application/octet-stream"},
                    "bgrs": {"type": "string", "enum": ["0", "1"]},
                    "encoding": {"type": "string"},
                    "show_progress": {"type": "string", "enum": ["0", "1"]},
                    "get_content": {"type": "string", "enum": ["0", "1"]},
                    "campaign_id": {"type": "string", "pattern": "^[0-9]+$"}
                },
                "required": ["entity", "csvfile"]
            }),
        ),
    ])
}

/// The error responses, by status.
pub fn responses() -> Json {
    let mut m = Map::new();
    for (code, what) in [
        (
            "400",
            "bad input: validation, unknown field, malformed body",
        ),
        ("401", "no or wrong credentials"),
        ("403", "not allowed for this role"),
        ("404", "no such resource, route or id"),
        ("405", "method not allowed here"),
        (
            "409",
            "conflict: a unique value is taken, or the object is still referenced",
        ),
        ("410", "the result was kept for its keep time and is gone"),
        ("413", "over a size limit"),
        ("415", "wrong content type"),
        (
            "429",
            "too many at once: try again after `Retry-After` seconds",
        ),
    ] {
        m.insert(
            format!("E{code}"),
            json!({"description": what, "content": json_content(reference("Error"))}),
        );
    }
    m.insert(
        "E429".into(),
        json!({
            "description": "too many failed sign-ins from this client: wait `Retry-After` seconds",
            "headers": {"Retry-After": {"description": "seconds to wait", "schema": {"type": "integer"}}},
            "content": json_content(reference("Error"))
        }),
    );
    Json::Object(m)
}

/// The fixed routes under `prefix`.
pub fn paths(prefix: &str, paths: &mut Map<String, Json>) {
    let rid = json!({"name": "rid", "in": "path", "required": true, "schema": {"type": "string"}});
    let with = |mut ok: Map<String, Json>, codes: &[&str]| {
        ok.extend(errors(codes));
        Json::Object(ok)
    };
    let ok = |desc: &str, content: Json| -> Map<String, Json> {
        Map::from_iter([(
            "200".to_string(),
            json!({"description": desc, "content": content}),
        )])
    };
    if prefix.is_empty() {
        paths.insert(
            "/healthz".into(),
            json!({"get": {"summary": "Readiness", "security": [], "responses": {"200": {"description": "the server accepts requests", "content": json_content(json!({"type": "object"}))}}}}),
        );
        paths.insert(
            "/openapi.json".into(),
            json!({"get": {"summary": "This document", "security": [], "responses": {"200": {"description": "OpenAPI 3.1", "content": json_content(json!({"type": "object"}))}}}}),
        );
    }
    paths.insert(
        format!("{prefix}/auth/token"),
        json!({"post": {
            "summary": "A bearer token for a login and password",
            "tags": ["auth"],
            "security": [],
            "requestBody": {"required": true, "content": {
                "application/json": {"schema": reference("TokenRequest")},
                "application/x-www-form-urlencoded": {"schema": reference("TokenRequest")}
            }},
            "responses": with(ok("the token", json_content(reference("Token"))), &["400", "401", "403", "413", "415"])
        },
        "delete": {
            "summary": "Signs out the bearer token the request presents",
            "tags": ["auth"],
            "responses": with(Map::from_iter([("204".to_string(), json!({"description": "signed out"}))]), &["400", "401", "403"])
        }}),
    );
    paths.insert(
        format!("{prefix}/users/me"),
        json!({"get": {"summary": "The current user", "tags": ["auth"], "responses": with(ok("the user", json_content(reference("Users"))), &["401"])}}),
    );
    paths.insert(
        format!("{prefix}/bgrs"),
        json!({"get": {
            "summary": "The caller's background requests, newest first (admins: everyone's)",
            "tags": ["bgrs"],
            "parameters": [
                {"name": "status_id", "in": "query", "schema": {"type": "integer", "minimum": 0, "maximum": 100}},
                {"name": "name", "in": "query", "schema": {"type": "string"}},
                {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 0, "maximum": 1000}},
                {"name": "offset", "in": "query", "schema": {"type": "integer", "minimum": 0, "maximum": i64::MAX}}
            ],
            "responses": with(ok("requests", json_content(json!({"type": "array", "items": reference("BgRequest")}))), &["400", "401"])
        }}),
    );
    let records = json_content(json!({"type": "array", "items": reference("BgRequest")}));
    let mut cancel_ok = ok("the cancelled record in an array", records.clone());
    cancel_ok.insert(
        "202".into(),
        json!({"description": "cancel asked for; the worker has not stopped yet", "content": records}),
    );
    paths.insert(
        format!("{prefix}/bgrs/{{rid}}"),
        json!({"get": {"summary": "A background request", "tags": ["bgrs"], "parameters": [rid],
            "responses": with(ok("one record in an array", json_content(json!({"type": "array", "items": reference("BgRequest")}))), &["401", "404"])},
            "delete": {"summary": "Cancel an unfinished request: it stops before its next chunk, keeps what ran, ends as status_id 5 `cancelled`, and its result marks the rest as not run",
                "tags": ["bgrs"], "parameters": [rid],
                "responses": with(cancel_ok, &["401", "404", "409"])}}),
    );
    paths.insert(
        format!("{prefix}/bgrs/{{rid}}/details"),
        json!({"get": {"summary": "The log of a background request, a page at a time",
            "description": "Entries oldest first, at most `limit` (at most 1000) per reply; `since` (the id of the last entry received) goes on after that entry.",
            "tags": ["bgrs"],
            "parameters": [rid,
                {"name": "since", "in": "query", "description": "only entries after the entry with this id", "schema": {"type": "integer", "minimum": i64::MIN, "maximum": i64::MAX}},
                {"name": "limit", "in": "query", "description": "most entries in the reply (default 1000)", "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 1000}}],
            "responses": with(ok("at most `limit` entries in order", json_content(json!({"type": "array", "maxItems": 1000, "items": reference("Detail")}))), &["400", "401", "404"])}}),
    );
    let result_content = json!({
        "application/json": {"schema": {}},
        "text/csv": {"schema": {"type": "string"}}
    });
    paths.insert(
        format!("{prefix}/bgrs/{{rid}}/result"),
        json!({"get": {"summary": "The stored result of a finished request", "tags": ["bgrs"], "parameters": [rid],
            "responses": with(ok("batch items, a single call's body, or the uploader's result CSV", result_content.clone()), &["401", "404", "410"])}}),
    );
    paths.insert(
        format!("{prefix}/bgrs/{{rid}}/events"),
        json!({"get": {"summary": "Server-Sent Events of progress and log entries until the request finishes",
            "description": "A user may hold a limited number of streams open at once (`--max-streams-per-user`, default 16); beyond it, 429 with `Retry-After`.",
            "tags": ["bgrs"], "parameters": [rid],
            "responses": with(ok("an event stream: `detail` events carry a Detail, `progress` and `finished` events a BgRequest, as JSON", json!({"text/event-stream": {"schema": {}}})), &["401", "404", "429"])}}),
    );
    paths.insert(
        format!("{prefix}/media/keep1m/{{file}}"),
        json!({"get": {"summary": "A stored result file", "tags": ["bgrs"],
            "parameters": [{"name": "file", "in": "path", "required": true, "schema": {"type": "string"}}],
            "responses": with(ok("the file", result_content), &["401", "404", "410"])}}),
    );
    paths.insert(
        format!("{prefix}/media/files/{{key}}"),
        json!({"get": {"summary": "A file stored from an uploaded bundle (a marker's page PDF, a res/ file), for users who may read its entity",
            "tags": ["uploader"],
            "parameters": [{"name": "key", "in": "path", "required": true, "description": "the rest of the path: <entity>/<bundle>/...", "schema": {"type": "string"}}],
            "responses": with(ok("the file", json!({"*/*": {"schema": {"type": "string", "format": "binary"}}})), &["401", "404"])}}),
    );
    let mut upload_ok = ok(
        "the result CSV, or the progress log (show_progress=1)",
        json!({
            "text/csv": {"schema": {"type": "string"}},
            "text/plain": {"schema": {"type": "string"}}
        }),
    );
    upload_ok.insert("202".into(), json!({"description": "running in the background", "content": json_content(reference("Accepted"))}));
    paths.insert(
        format!("{prefix}/tools/uploader.ex.php"),
        json!({"post": {
            "summary": "Apply the create/update/delete rows of a CSV file to one entity",
            "tags": ["uploader"],
            "requestBody": {"required": true, "content": {"multipart/form-data": {"schema": reference("Upload")}}},
            "responses": with(upload_ok, &["400", "401", "413", "415"])
        }}),
    );
}
