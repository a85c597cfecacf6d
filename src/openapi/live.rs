//! The live-changes routes of an entity in the document: `GET /<res>/events` (a
//! `text/event-stream`) and `GET /<res>/changes` (JSON pages).

use super::entity::{open_to_anyone, rules_note};
use super::query::query_params;
use super::{errors, json_content, type_name};
use crate::schema::{Action, Entity};
use serde_json::{Map, Value as Json, json};

/// The two routes of `e` under `prefix`, operationIds ending in `suffix`.
pub fn paths(prefix: &str, suffix: &str, e: &Entity, paths: &mut Map<String, Json>) {
    let t = type_name(&e.name);
    let mut events = json!({"get": events_op(e, &format!("follow{t}{suffix}"))});
    let mut changes = json!({"get": changes_op(e, &format!("changesOf{t}{suffix}"))});
    open_to_anyone(e, Action::List, &mut events["get"]);
    open_to_anyone(e, Action::List, &mut changes["get"]);
    paths.insert(format!("{prefix}/{}/events", e.name), events);
    paths.insert(format!("{prefix}/{}/changes", e.name), changes);
}

/// The filters of a list and `fields`.
fn filter_params(e: &Entity) -> Vec<Json> {
    let mut params = query_params(e);
    params.retain(|p| p["name"] != "sort");
    params
}

fn events_op(e: &Entity, id: &str) -> Json {
    let name = &e.name;
    let mut params = vec![
        json!({"name": "last_event_id", "in": "query", "description": "resume after this change (as the `Last-Event-ID` header does)", "schema": {"type": "integer", "minimum": 0}}),
    ];
    params.push(json!({"name": "Last-Event-ID", "in": "header", "description": "resume after this change: every matching change after it comes once, then the stream goes on live", "schema": {"type": "integer", "minimum": 0}}));
    params.extend(filter_params(e));
    let mut responses = Map::new();
    responses.insert("200".into(), json!({
        "description": "Server-Sent Events. `ready` (data `{\"seq\": n}`, `id: n`) once the stream is live: every change committed after `n` follows. Then `create`, `update` and `delete`, each `id: <seq>` with data `{\"op\", \"id\", \"object\"}` (the object as GET returns it, `fields` applied; a delete carries the last stored object). An update that takes an object out of the filters or the caller's `list` rule comes as `delete`, one that brings it in as `create`. `reset` (data `{\"seq\": n}`) when the changes asked for are no longer kept, or the stream fell more than the server's lag limit behind: reload, then resume from `n`. A comment line every 15 seconds on an idle stream.",
        "content": {"text/event-stream": {"schema": {"type": "string"}}}
    }));
    responses.extend(errors(&["400", "401", "403", "404"]));
    json!({
        "operationId": id,
        "summary": format!("Follow the changes of {name}"),
        "description": format!(
            "The committed changes of `{name}` as they happen, in commit order, numbered by one sequence shared by every server on the database. \
             Takes the list filters and `fields`. Browsers' `EventSource` may sign in with `_token=`.{}",
            rules_note(e, &[Action::List])
        ),
        "tags": [name],
        "parameters": params,
        "responses": responses
    })
}

fn changes_op(e: &Entity, id: &str) -> Json {
    let name = &e.name;
    let mut params = vec![
        json!({"name": "after", "in": "query", "description": "the changes after this number (default 0: every change still kept)", "schema": {"type": "integer", "minimum": 0}}),
        json!({"name": "limit", "in": "query", "description": "most changes in the page", "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}}),
    ];
    params.extend(filter_params(e));
    let change = json!({
        "type": "object",
        "required": ["seq", "op", "id", "object"],
        "properties": {
            "seq": {"type": "integer"},
            "op": {"type": "string", "enum": ["create", "update", "delete"]},
            "id": {"type": "integer"},
            "object": {"type": "object"}
        }
    });
    let schema = json!({
        "type": "object",
        "required": ["changes", "next"],
        "properties": {
            "changes": {"type": "array", "items": change},
            "next": {"type": "integer", "description": "ask for the changes after this number next"}
        }
    });
    let mut responses = Map::new();
    responses.insert(
        "200".into(),
        json!({"description": "a page of changes", "content": json_content(schema)}),
    );
    responses.extend(errors(&["400", "401", "403", "404", "410"]));
    json!({
        "operationId": id,
        "summary": format!("Changes of {name} after a number"),
        "description": format!(
            "The same changes as `/{name}/events`, as JSON pages for sync clients: ask again with `after` set to `next`. \
             410 when the changes after `after` are no longer kept: reload, then go on from the number the answer names.{}",
            rules_note(e, &[Action::List])
        ),
        "tags": [name],
        "parameters": params,
        "responses": responses
    })
}
