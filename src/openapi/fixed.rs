//! The fixed part of the OpenAPI document: routes that do not depend on the entities, and the
//! shared schemas and error responses.

use super::{errors, json_content, reference};
use serde_json::{Map, Value as Json, json};

/// A yes/no form field: `1`, `yes` or `true` (any case) for yes; `0`, `no`, `false`, empty or
/// absent for no.
fn flag(what: &str) -> Json {
    json!({
        "type": "string",
        "description": format!("1/yes/true to {what}; 0/no/false (the default) not to"),
        "pattern": "^\\s*([01]|[Yy][Ee][Ss]|[Nn][Oo]|[Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee])?\\s*$"
    })
}

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
            "BatchDeleteItem".to_string(),
            json!({
                "description": "an object to delete: its id, or an object with `id`",
                "oneOf": [
                    {"type": "integer", "minimum": 1},
                    {"type": "object", "properties": {"id": {"type": "integer", "minimum": 1}}, "required": ["id"]}
                ]
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
                    "bgrs": flag("run in the background and answer 202 at once"),
                    "encoding": {"type": "string", "description": "the file's character encoding (a WHATWG label such as utf-8, windows-1252, iso-8859-1); default utf-8"},
                    "show_progress": flag("stream one line per row as it runs instead of the result file"),
                    "get_content": flag("answer with the result file's content"),
                    "campaign_id": {"type": "string", "description": "the campaign a ZIP bundle's pages belong to; empty or absent: a new campaign", "pattern": "^\\s*([+-]?[0-9]+)?\\s*$"}
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

/// The tags of the fixed routes; every entity adds its own.
pub fn tags() -> Vec<Json> {
    [
        ("auth", "Signing in and out, and the signed-in user."),
        (
            "bgrs",
            "Background requests: their records, logs, live events, results and cancelling.",
        ),
        (
            "uploader",
            "CSV and ZIP uploads that create, update and delete objects row by row, and the files they store.",
        ),
        ("system", "Health and this document."),
    ]
    .into_iter()
    .map(|(name, description)| json!({"name": name, "description": description}))
    .collect()
}

/// One operation: its id (with the prefix's `suffix`), tag, summary, description, parameters,
/// request body (`Json::Null` for none) and responses.
struct Op<'a> {
    id: &'a str,
    tag: &'a str,
    summary: &'a str,
    description: &'a str,
    parameters: Vec<Json>,
    body: Json,
    responses: Map<String, Json>,
}

impl Op<'_> {
    fn render(self, suffix: &str) -> Json {
        let mut o = json!({
            "operationId": format!("{}{suffix}", self.id),
            "tags": [self.tag],
            "summary": self.summary,
            "description": self.description,
            "responses": self.responses,
        });
        if !self.parameters.is_empty() {
            o["parameters"] = Json::Array(self.parameters);
        }
        if !self.body.is_null() {
            o["requestBody"] = self.body;
        }
        o
    }
}

/// The fixed routes under `prefix`, with operationIds ending in `suffix`.
pub fn paths(prefix: &str, suffix: &str, paths: &mut Map<String, Json>) {
    let rid = json!({"name": "rid", "in": "path", "required": true, "description": "the id of the background request", "schema": {"type": "string"}});
    let with = |mut ok: Map<String, Json>, codes: &[&str]| {
        ok.extend(errors(codes));
        ok
    };
    let ok = |desc: &str, content: Json| -> Map<String, Json> {
        Map::from_iter([(
            "200".to_string(),
            json!({"description": desc, "content": content}),
        )])
    };
    let add = |paths: &mut Map<String, Json>, path: &str, ops: Vec<(&str, Op)>| {
        let item: Map<String, Json> = ops
            .into_iter()
            .map(|(method, op)| (method.to_string(), op.render(suffix)))
            .collect();
        paths.insert(format!("{prefix}{path}"), Json::Object(item));
    };
    let public = |mut op: Json| {
        op["security"] = json!([]);
        op
    };
    let mut health = Op {
        id: "getHealth",
        tag: "system",
        summary: "Readiness",
        description: "200 while the server accepts requests. Needs no credentials.",
        parameters: vec![],
        body: Json::Null,
        responses: ok(
            "the server accepts requests",
            json_content(json!({"type": "object"})),
        ),
    }
    .render(suffix);
    health = public(health);
    let mut document = Op {
        id: "getOpenApiDocument",
        tag: "system",
        summary: "This document",
        description: "The OpenAPI 3.1 document of every route, with the entities in force. Needs no credentials.",
        parameters: vec![],
        body: Json::Null,
        responses: ok("OpenAPI 3.1", json_content(json!({"type": "object"}))),
    }
    .render(suffix);
    document = public(document);
    if prefix.is_empty() {
        paths.insert("/healthz".into(), json!({"get": health}));
    }
    paths.insert(format!("{prefix}/openapi.json"), json!({"get": document}));
    let token_example = json!({"login": "admin", "password": "a-long-password", "ttl": 3600});
    let mut sign_in = Op {
        id: "signIn",
        tag: "auth",
        summary: "A bearer token for a login and password",
        description: "Checks the login and password and answers with a token for `Authorization: Bearer` (or `_token=` in the query), valid for `ttl` seconds (default 86400). The same fields are also taken from an `application/x-www-form-urlencoded` body or from the query string, for HTML forms and simple scripts. Failed attempts are throttled per login and client address: 429 with `Retry-After`.",
        parameters: vec![],
        body: json!({"required": false, "content": {
            "application/json": {"schema": reference("TokenRequest"), "example": token_example}
        }}),
        responses: with(
            ok("the token", json_content(reference("Token"))),
            &["400", "401", "403", "413", "415"],
        ),
    }
    .render(suffix);
    sign_in = public(sign_in);
    let sign_out = Op {
        id: "signOut",
        tag: "auth",
        summary: "Signs out the bearer token the request presents",
        description: "The token stops working at once, on every server. A password change, a role change or deleting the user ends all of the user's tokens as well.",
        parameters: vec![],
        body: Json::Null,
        responses: with(
            Map::from_iter([("204".to_string(), json!({"description": "signed out"}))]),
            &["400", "401", "403"],
        ),
    }
    .render(suffix);
    paths.insert(
        format!("{prefix}/auth/token"),
        json!({"post": sign_in, "delete": sign_out}),
    );
    add(
        paths,
        "/users/me",
        vec![(
            "get",
            Op {
                id: "getCurrentUser",
                tag: "auth",
                summary: "The current user",
                description: "The `users` object of the credentials the request presents.",
                parameters: vec![],
                body: Json::Null,
                responses: with(ok("the user", json_content(reference("Users"))), &["401"]),
            },
        )],
    );
    let records = json_content(json!({"type": "array", "items": reference("BgRequest")}));
    add(
        paths,
        "/bgrs",
        vec![(
            "get",
            Op {
                id: "listBackgroundRequests",
                tag: "bgrs",
                summary: "The caller's background requests, newest first (admins: everyone's)",
                description: "Filtered by status and name; at most `limit` records (default 100) from `offset`.",
                parameters: vec![
                    json!({"name": "status_id", "in": "query", "description": "only requests in this state (1 queued, 2 running, 3 finished, 4 failed, 5 cancelled)", "schema": {"type": "integer", "minimum": 0, "maximum": 100}}),
                    json!({"name": "name", "in": "query", "description": "only requests with this name (e.g. `POST /campaigns`)", "schema": {"type": "string"}}),
                    json!({"name": "limit", "in": "query", "description": "most records in the reply", "schema": {"type": "integer", "minimum": 0, "maximum": 1000, "default": 100}}),
                    json!({"name": "offset", "in": "query", "description": "records to skip", "schema": {"type": "integer", "minimum": 0, "maximum": i64::MAX}}),
                ],
                body: Json::Null,
                responses: with(ok("requests", records.clone()), &["400", "401"]),
            },
        )],
    );
    let mut cancel_ok = ok("the cancelled record in an array", records.clone());
    cancel_ok.insert(
        "202".into(),
        json!({"description": "cancel asked for; the worker has not stopped yet", "content": records.clone()}),
    );
    add(
        paths,
        "/bgrs/{rid}",
        vec![
            (
                "get",
                Op {
                    id: "getBackgroundRequest",
                    tag: "bgrs",
                    summary: "A background request",
                    description: "Its record, with progress and, once finished, the status and location of its result. Owner or admin only.",
                    parameters: vec![rid.clone()],
                    body: Json::Null,
                    responses: with(ok("one record in an array", records), &["401", "404"]),
                },
            ),
            (
                "delete",
                Op {
                    id: "cancelBackgroundRequest",
                    tag: "bgrs",
                    summary: "Cancel an unfinished request",
                    description: "It stops before its next chunk, keeps what ran, ends as status_id 5 `cancelled`, and its result marks the rest as not run. 409 when it has already finished.",
                    parameters: vec![rid.clone()],
                    body: Json::Null,
                    responses: with(cancel_ok, &["401", "404", "409"]),
                },
            ),
        ],
    );
    add(
        paths,
        "/bgrs/{rid}/details",
        vec![(
            "get",
            Op {
                id: "listBackgroundRequestDetails",
                tag: "bgrs",
                summary: "The log of a background request, a page at a time",
                description: "Entries oldest first, at most `limit` (at most 1000) per reply; `since` (the id of the last entry received) goes on after that entry.",
                parameters: vec![
                    rid.clone(),
                    json!({"name": "since", "in": "query", "description": "only entries after the entry with this id", "schema": {"type": "integer", "minimum": i64::MIN, "maximum": i64::MAX}}),
                    json!({"name": "limit", "in": "query", "description": "most entries in the reply (default 1000)", "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 1000}}),
                ],
                body: Json::Null,
                responses: with(
                    ok(
                        "at most `limit` entries in order",
                        json_content(
                            json!({"type": "array", "maxItems": 1000, "items": reference("Detail")}),
                        ),
                    ),
                    &["400", "401", "404"],
                ),
            },
        )],
    );
    let result_content = json!({
        "application/json": {"schema": {}},
        "text/csv": {"schema": {"type": "string"}}
    });
    add(
        paths,
        "/bgrs/{rid}/result",
        vec![(
            "get",
            Op {
                id: "getBackgroundRequestResult",
                tag: "bgrs",
                summary: "The stored result of a finished request",
                description: "A batch's result items, a single call's body, or the uploader's result CSV, with the content type they were stored with. Kept for a month: 410 after.",
                parameters: vec![rid.clone()],
                body: Json::Null,
                responses: with(
                    ok(
                        "batch items, a single call's body, or the uploader's result CSV",
                        result_content.clone(),
                    ),
                    &["401", "404", "410"],
                ),
            },
        )],
    );
    add(
        paths,
        "/bgrs/{rid}/events",
        vec![(
            "get",
            Op {
                id: "streamBackgroundRequestEvents",
                tag: "bgrs",
                summary: "Server-Sent Events of progress and log entries until the request finishes",
                description: "A user may hold a limited number of streams open at once (`--max-streams-per-user`, default 16); beyond it, 429 with `Retry-After`.",
                parameters: vec![rid],
                body: Json::Null,
                responses: with(
                    ok(
                        "an event stream: `detail` events carry a Detail, `progress` and `finished` events a BgRequest, as JSON",
                        json!({"text/event-stream": {"schema": {}}}),
                    ),
                    &["401", "404", "429"],
                ),
            },
        )],
    );
    add(
        paths,
        "/media/keep1m/{file}",
        vec![(
            "get",
            Op {
                id: "getResultFile",
                tag: "bgrs",
                summary: "A stored result file",
                description: "The file a finished request's `result` names. Kept for a month: 410 after.",
                parameters: vec![
                    json!({"name": "file", "in": "path", "required": true, "description": "the file name from the request's `result`", "schema": {"type": "string"}}),
                ],
                body: Json::Null,
                responses: with(ok("the file", result_content), &["401", "404", "410"]),
            },
        )],
    );
    add(
        paths,
        "/media/files/{key}",
        vec![(
            "get",
            Op {
                id: "getStoredFile",
                tag: "uploader",
                summary: "A file stored from an uploaded bundle",
                description: "A marker's one-page PDF or a `res/` file of a ZIP bundle, for users who may read its entity.",
                parameters: vec![
                    json!({"name": "key", "in": "path", "required": true, "description": "the rest of the path: <entity>/<bundle>/...", "schema": {"type": "string"}}),
                ],
                body: Json::Null,
                responses: with(
                    ok(
                        "the file",
                        json!({"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}),
                    ),
                    &["401", "404"],
                ),
            },
        )],
    );
    let mut upload_ok = ok(
        "the result CSV, or the progress log (show_progress=1)",
        json!({
            "text/csv": {"schema": {"type": "string"}},
            "text/plain": {"schema": {"type": "string"}}
        }),
    );
    upload_ok.insert(
        "202".into(),
        json!({"description": "running in the background: follow it at /bgrs/{rid}", "content": json_content(reference("Accepted"))}),
    );
    add(
        paths,
        "/tools/uploader.ex.php",
        vec![(
            "post",
            Op {
                id: "uploadFile",
                tag: "uploader",
                summary: "Apply the create/update/delete rows of a CSV file (or a ZIP bundle) to one entity",
                description: "The CSV's `op` column says what each row does (`c`, `u`, `d`); the whole file is checked before any row runs. Synchronously the reply is the result CSV: every row with its `res`. With `bgrs=1` it runs in the background (202) and the result CSV is the request's result.",
                parameters: vec![],
                body: json!({"required": true, "content": {"multipart/form-data": {
                    "schema": reference("Upload"),
                    "example": {"entity": "campaigns", "bgrs": "1", "csvfile": "op,name\nc,spring catalogue\n"}
                }}}),
                responses: with(upload_ok, &["400", "401", "413", "415"]),
            },
        )],
    );
}
