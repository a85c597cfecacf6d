//! The entity part of the document: for every entity of the catalog, its list, create, batch,
//! read, update and delete operations, each with a stable `operationId` (see
//! [`operation_ids`]), a summary and description, typed request bodies (a batch's items are
//! the entity's create, update or delete schema) and an example.

use super::query::list_params;
use super::{errors, json_content, reference, type_name};
use crate::schema::rules::Rule;
use crate::schema::{Action, Entity, FieldType};
use serde_json::{Map, Value as Json, json};

/// What a batch reply says about items, for every batch operation.
const PER_ITEM: &str = "Each item is checked and applied on its own, in order: the reply \
    holds one result per item (`status` and `body`, as the single call would answer), and an \
    item that is invalid or fails gets its own 4xx result while the others apply. \
    `bgrs=false` answers with the results; otherwise the batch runs in the background (202) \
    and the results are its stored result. `atomic=1` applies the batch whole or not at all; \
    `dry_run=1` runs it and then rolls it back.";

/// The operationIds of an entity's operations, camelCase from the action and the entity: the
/// plural for collections (`listCampaigns`), the singular for one object (`getCampaign`).
pub struct OperationIds {
    pub list: String,
    pub create: String,
    pub update_batch: String,
    pub delete_batch: String,
    pub get: String,
    pub update: String,
    pub delete: String,
}

/// The ids of `entity`'s operations; `suffix` tells the copies under a prefix apart (`V25`).
pub fn operation_ids(entity: &str, suffix: &str) -> OperationIds {
    let plural = type_name(entity);
    let mut one = singular(&plural);
    if one == plural {
        one.push_str("ById");
    }
    let id = |verb: &str, noun: &str| format!("{verb}{noun}{suffix}");
    OperationIds {
        list: id("list", &plural),
        create: id("create", &plural),
        update_batch: id("update", &plural),
        delete_batch: id("delete", &plural),
        get: id("get", &one),
        update: id("update", &one),
        delete: id("delete", &one),
    }
}

/// `Campaigns` -> `Campaign`, `Categories` -> `Category`, `Boxes` -> `Box`; a word that does
/// not look plural stays as it is.
fn singular(plural: &str) -> String {
    if let Some(stem) = plural.strip_suffix("ies") {
        return format!("{stem}y");
    }
    for ending in ["sses", "xes", "ches", "shes", "zes"] {
        if plural.ends_with(ending) {
            return plural[..plural.len() - 2].to_string();
        }
    }
    match plural.strip_suffix('s') {
        Some(stem) if !["s", "u", "i"].iter().any(|e| stem.ends_with(e)) && !stem.is_empty() => {
            stem.to_string()
        }
        _ => plural.to_string(),
    }
}

/// The component schemas of `e`: the object, its create and update payloads, and a PUT batch
/// item (an update with its `id`).
pub fn schemas(e: &Entity, out: &mut Map<String, Json>) {
    let t = type_name(&e.name);
    let mut object = super::object_schema(e);
    let mut create = super::payload(&e.create_schema);
    let mut columns = object.clone();
    if let Some(o) = columns.as_object_mut() {
        o.remove("required");
        o.insert(
            "description".into(),
            json!(format!(
                "a {} object with the columns a list's `fields` chose",
                e.name
            )),
        );
    }
    if let Some(about) = key_about(e) {
        object["description"] = json!(format!("a {} object. {about}", e.name));
        create["description"] = json!(format!("a new {} object. {about}", e.name));
    }
    out.insert(t.clone(), object);
    out.insert(format!("{t}Columns"), columns);
    out.insert(format!("{t}DryRun"), super::dry_run_schema(e));
    out.insert(format!("{t}Create"), create);
    out.insert(format!("{t}Update"), super::payload(&e.update_schema));
    let mut put_item = super::payload(&e.update_schema);
    put_item["properties"]["id"] = json!({"type": "integer", "minimum": 1});
    if e.has_key() {
        // Named by id, or by the key's fields.
        put_item["anyOf"] = json!([{"required": ["id"]}, {"required": e.key}]);
        put_item["description"] = json!(format!(
            "a change to one {} object, named by its id or, without `id`, by its key ({})",
            e.name,
            key_list(e)
        ));
    } else {
        put_item["required"] = json!(["id"]);
        put_item["description"] = json!(format!(
            "a change to one {} object, named by its id",
            e.name
        ));
    }
    out.insert(format!("{t}BatchUpdate"), put_item);
}

/// `` `campaign_id`, `name` ``: the key's fields.
fn key_list(e: &Entity) -> String {
    e.key
        .iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a schema says about the entity's key, when it has one.
fn key_about(e: &Entity) -> Option<String> {
    e.has_key().then(|| {
        format!(
            "Key: {} (unique together; names an object in `PUT` batch items without `id`, in `POST ?upsert=1` and in CSV rows without `id`).",
            key_list(e)
        )
    })
}

fn upsert_param(e: &Entity) -> Json {
    json!({
        "name": "upsert", "in": "query", "required": false,
        "description": format!(
            "1/yes/true: create or update by the key ({}): an object whose key matches the payload's is updated with the fields given, else one is created. The same for each item of a batch. Default: create.",
            key_list(e)
        ),
        "schema": {"type": "string", "enum": ["1", "0", "yes", "no", "true", "false"]}
    })
}

/// The tag of `e`'s operations, with its description.
pub fn tag(e: &Entity) -> Json {
    let file = e
        .source
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    json!({
        "name": e.name,
        "description": format!(
            "The `{}` objects, as defined in `{file}`: list, create, read, change and delete them, one at a time or in batches.",
            e.name
        )
    })
}

/// A create payload for `e` that its schema accepts: every field with a value of its type.
fn example(e: &Entity) -> Json {
    let mut m = Map::new();
    for f in &e.fields {
        let v = match &f.ty {
            FieldType::String | FieldType::Text if f.secret => json!("a-long-secret"),
            FieldType::String | FieldType::Text => json!("example"),
            FieldType::Integer => json!(1),
            FieldType::Decimal => json!(12.5),
            FieldType::Boolean => json!(true),
            FieldType::Date => json!("2026-01-31"),
            FieldType::Datetime => json!("2026-01-31 12:00:00"),
            FieldType::Enum(values) => json!(values.first().cloned().unwrap_or_default()),
            FieldType::Reference(_) => json!(1),
        };
        let v = match (v, f.max_length) {
            (Json::String(s), Some(n)) => Json::String(s.chars().take(n as usize).collect()),
            (v, _) => v,
        };
        m.insert(f.name.clone(), v);
    }
    Json::Object(m)
}

fn bgrs_param() -> Json {
    json!({
        "name": "bgrs", "in": "query", "required": false,
        "description": "1/yes/true: run in the background and answer 202; 0/no/false: synchronously. Default: synchronously for one object, in the background for a batch (an array body).",
        "schema": {"type": "string", "enum": ["1", "0", "yes", "no", "true", "false"]}
    })
}

fn dry_run_param() -> Json {
    json!({
        "name": "dry_run", "in": "query", "required": false,
        "description": "1/yes/true: check and execute everything as for real inside a transaction that is then rolled back, and answer (or store, in the background) what would happen; an object that would be created has `id` null. Nothing is kept. 0/no/false (the default): apply.",
        "schema": {"type": "string", "enum": ["1", "0", "yes", "no", "true", "false"]}
    })
}

fn atomic_param() -> Json {
    json!({
        "name": "atomic", "in": "query", "required": false,
        "description": "1/yes/true: apply the whole batch in one transaction, or nothing of it when an item fails; the failing items carry their error and every other item a 409 `not_applied` naming the first failing item. 0/no/false (the default): each item applies on its own. A single object is all or nothing by itself.",
        "schema": {"type": "string", "enum": ["1", "0", "yes", "no", "true", "false"]}
    })
}

/// A JSON request body with its schema and example.
fn body(required: bool, schema: Json, example: Json) -> Json {
    json!({"required": required, "content": {"application/json": {"schema": schema, "example": example}}})
}

/// The operations of `e` under `prefix`, with operationIds ending in `suffix`: the collection
/// (list, create, batch change and delete) and one object (read, change, delete).
pub fn paths(prefix: &str, suffix: &str, e: &Entity, paths: &mut Map<String, Json>) {
    let ids = operation_ids(&e.name, suffix);
    let example = example(e);
    let batch_ops = [bgrs_param(), dry_run_param(), atomic_param()];
    let mut collection = Map::new();
    collection.insert("get".into(), list_op(e, &ids));
    collection.insert("post".into(), create_op(e, &ids, &example));
    collection.insert("put".into(), batch_update_op(e, &ids, &example, &batch_ops));
    collection.insert("delete".into(), batch_delete_op(e, &ids, &batch_ops));
    open_to_anyone(e, Action::List, &mut collection["get"]);
    open_to_anyone(e, Action::Create, &mut collection["post"]);
    paths.insert(format!("{prefix}/{}", e.name), Json::Object(collection));
    let mut one = object_ops(e, &ids, example);
    open_to_anyone(e, Action::View, &mut one["get"]);
    paths.insert(format!("{prefix}/{}/{{id}}", e.name), one);
}

/// Marks an operation whose rule is `public` as needing no credentials (an empty security
/// requirement beside the document's schemes).
pub(super) fn open_to_anyone(e: &Entity, a: Action, op: &mut Json) {
    if matches!(e.access.rule(a), Rule::Public) {
        op["security"] = json!([{}, {"basic": []}, {"bearer": []}, {"token": []}]);
    }
}

/// The access rules an operation answers to, in words: each rule as the entity file writes it
/// and what a caller it refuses gets.
pub(super) fn rules_note(e: &Entity, actions: &[Action]) -> String {
    let parts: Vec<String> = actions
        .iter()
        .map(|&a| {
            let rule = e.access.written(a);
            let means = match (a, e.access.rule(a)) {
                (_, Rule::Public) => "open to anyone, without credentials".to_string(),
                (Action::List, Rule::Expr(_)) => {
                    "objects it does not admit are not listed, counted or exported".to_string()
                }
                (Action::View, Rule::Expr(_)) => {
                    "an object it does not admit answers 404, here and on PUT and DELETE"
                        .to_string()
                }
                (_, Rule::Expr(_)) => {
                    "403 for an object the caller may view but this rule does not admit".to_string()
                }
                (_, Rule::Roles(_)) => "403 for any other role".to_string(),
            };
            format!("`{}`: `{rule}` ({means})", a.key())
        })
        .collect();
    format!(" Access (admins pass every rule): {}.", parts.join("; "))
}

/// `GET /<res>`: a page of objects.
fn list_op(e: &Entity, ids: &OperationIds) -> Json {
    let (name, t) = (&e.name, type_name(&e.name));
    let mut responses = Map::new();
    responses.insert(
        "200".into(),
        json!({
            "description": format!("a page of {name}"),
            "headers": {
                "X-Total-Count": {"description": "objects matching the filters", "schema": {"type": "integer"}},
                "Link": {"description": "`<url>; rel=\"next\"` (RFC 8288) while more objects follow: this request's query with a `cursor` that continues after this page's last object", "schema": {"type": "string"}}
            },
            "content": {
                "application/json": {"schema": {"type": "array", "items": {"anyOf": [reference(&t), reference(&format!("{t}Columns"))]}}},
                "text/csv": {"schema": {"type": "string"}}
            }
        }),
    );
    responses.extend(errors(&["400", "401", "403", "404", "405"]));
    json!({
        "operationId": ids.list,
        "summary": format!("List {name}"),
        "description": format!(
            "A page of `{name}` objects in id order, or in the order `sort` names. \
             Filters: `field=value` (equal), `field[gt]`, `[gte]`, `[lt]`, `[lte]`, `[ne]`, `[in]` (comma-separated values) \
             and `[contains]` (text, ignoring case), on any field, `id`, `created_dt` and `updated_dt`; all must hold. \
             `fields` chooses the columns. `X-Total-Count` counts every object matching the filters; while more follow, \
             `Link` gives the next page. `t=csv` returns the page as CSV.{}",
            rules_note(e, &[Action::List])
        ),
        "tags": [name],
        "parameters": list_params(e),
        "responses": responses
    })
}

/// The 202 answer of a call or batch run in the background.
fn accepted() -> Json {
    json!({"description": "running in the background: follow it at /bgrs/{rid}", "content": json_content(reference("Accepted"))})
}

/// The results of a batch run now, one per item.
fn batch_results() -> Json {
    json!({"type": "array", "items": reference("BatchItem")})
}

/// `POST /<res>`: one object, or a batch of them.
fn create_op(e: &Entity, ids: &OperationIds, example: &Json) -> Json {
    let (name, t) = (&e.name, type_name(&e.name));
    let mut responses = Map::new();
    responses.insert(
        "200".into(),
        json!({
            "description": format!(
                "the created object (one object sent; `{t}DryRun` for a dry run that would create it), or one result per item (an array sent, bgrs=false)"
            ),
            "content": json_content(json!({"oneOf": [
                reference(&t),
                reference(&format!("{t}DryRun")),
                batch_results()
            ]}))
        }),
    );
    responses.insert("202".into(), accepted());
    responses.extend(errors(&[
        "400", "401", "403", "404", "405", "409", "413", "415",
    ]));
    let mut params = vec![bgrs_param(), dry_run_param(), atomic_param()];
    let upsert = if e.has_key() {
        params.push(upsert_param(e));
        format!(
            " With `upsert=1` each object is created, or updated when an object with its key ({}) exists.",
            key_list(e)
        )
    } else {
        String::new()
    };
    let create = reference(&format!("{t}Create"));
    json!({
        "operationId": ids.create,
        "summary": format!("Create one {name} object, or a batch of them"),
        "description": format!(
            "One `{t}Create` object creates one object and answers with it (or 202 with `bgrs=1`). \
             An array of them is a batch. {PER_ITEM}{upsert}{}",
            rules_note(e, &[Action::Create])
        ),
        "tags": [name],
        "parameters": params,
        "requestBody": body(true, json!({"oneOf": [create, {"type": "array", "items": create}]}), example.clone()),
        "responses": responses
    })
}

/// The answers of a batch change or delete.
fn batch_responses() -> Map<String, Json> {
    let mut responses = Map::new();
    responses.insert(
        "200".into(),
        json!({"description": "one result per item, in order", "content": json_content(batch_results())}),
    );
    responses.insert("202".into(), accepted());
    responses.extend(errors(&["400", "401", "403", "404", "405", "413", "415"]));
    responses
}

/// `PUT /<res>`: a batch of changes.
fn batch_update_op(e: &Entity, ids: &OperationIds, example: &Json, params: &[Json]) -> Json {
    let (name, t) = (&e.name, type_name(&e.name));
    let mut item = example.clone();
    item["id"] = json!(1);
    let description = if e.has_key() {
        format!(
            "Each item names an object by `id`, or without `id` by its key ({}), and gives the fields to change; no object with that key is a 404 item. {PER_ITEM}",
            key_list(e)
        )
    } else {
        format!("Each item names an object by `id` and gives the fields to change. {PER_ITEM}")
    };
    json!({
        "operationId": ids.update_batch,
        "summary": format!("Change a batch of {name} objects"),
        "description": description,
        "tags": [name],
        "parameters": params,
        "requestBody": body(true, json!({"type": "array", "items": reference(&format!("{t}BatchUpdate"))}), json!([item])),
        "responses": batch_responses()
    })
}

/// `DELETE /<res>`: a batch of deletes.
fn batch_delete_op(e: &Entity, ids: &OperationIds, params: &[Json]) -> Json {
    let name = &e.name;
    json!({
        "operationId": ids.delete_batch,
        "summary": format!("Delete a batch of {name} objects"),
        "description": format!("Each item is an id, or an object with `id`. {PER_ITEM}"),
        "tags": [name],
        "parameters": params,
        "requestBody": body(true, json!({"type": "array", "items": reference("BatchDeleteItem")}), json!([1, {"id": 2}])),
        "responses": batch_responses()
    })
}

/// `/<res>/{id}`: read, change and delete one object. Each answers with the object, whose id
/// is known even in a dry run.
fn object_ops(e: &Entity, ids: &OperationIds, example: Json) -> Json {
    let (name, t) = (&e.name, type_name(&e.name));
    let id_param = json!({"name": "id", "in": "path", "required": true, "description": format!("the id of the {name} object"), "schema": {"type": "integer", "minimum": 1, "maximum": i64::MAX}});
    let one = json!({"description": format!("the {name} object"), "content": json_content(reference(&t))});
    let mut get_resp = Map::new();
    get_resp.insert("200".into(), one.clone());
    get_resp.extend(errors(&["401", "403", "404"]));
    let mut write_resp = Map::new();
    write_resp.insert("200".into(), one);
    write_resp.insert("202".into(), accepted());
    write_resp.extend(errors(&["400", "401", "403", "404", "409", "413", "415"]));
    let write_params = [id_param.clone(), bgrs_param(), dry_run_param()];
    json!({
        "get": {
            "operationId": ids.get,
            "summary": format!("Read one {name} object"),
            "description": format!("The `{name}` object with this id.{}", rules_note(e, &[Action::View])),
            "tags": [name],
            "parameters": [id_param],
            "responses": get_resp
        },
        "put": {
            "operationId": ids.update,
            "summary": format!("Change the given fields of a {name} object"),
            "description": format!("Fields left out keep their values; an optional field without a default may be cleared with null. Answers with the whole changed object (or 202 with `bgrs=1`).{}", rules_note(e, &[Action::View, Action::Update])),
            "tags": [name],
            "parameters": write_params,
            "requestBody": body(false, reference(&format!("{t}Update")), example),
            "responses": write_resp.clone()
        },
        "delete": {
            "operationId": ids.delete,
            "summary": format!("Delete a {name} object"),
            "description": format!("Answers with the deleted object (or 202 with `bgrs=1`); 409 while other objects still reference it.{}", rules_note(e, &[Action::View, Action::Delete])),
            "tags": [name],
            "parameters": write_params,
            "responses": write_resp
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_ids_are_camel_case_from_entity_and_action() {
        let ids = operation_ids("campaigns", "");
        assert_eq!(
            [&ids.list, &ids.create, &ids.get, &ids.update, &ids.delete],
            [
                "listCampaigns",
                "createCampaigns",
                "getCampaign",
                "updateCampaign",
                "deleteCampaign"
            ]
        );
        assert_eq!(operation_ids("user_groups", "V25").get, "getUserGroupV25");
        assert_eq!(operation_ids("categories", "").get, "getCategory");
        assert_eq!(operation_ids("boxes", "").get, "getBox");
        // A name that does not look plural keeps the single-object ids apart.
        let status = operation_ids("status", "");
        assert_eq!(status.update_batch, "updateStatus");
        assert_eq!(status.update, "updateStatusById");
    }
}
