//! The one OpenAPI 3.1 document of the server: the fixed routes (authentication, health,
//! background requests, the uploader) and, generated from the catalog in force, every entity's
//! CRUD and batch routes with their request and response schemas. Built per catalog, so it
//! changes together with the routes when the entities are reloaded.

mod fixed;

use crate::schema::{Catalog, Entity, FieldType};
use serde_json::{Map, Value as Json, json};

/// Path prefixes every route exists under.
pub const PREFIXES: [&str; 2] = ["", "/v2.5"];

/// The whole document for `catalog`.
pub fn document(catalog: &Catalog) -> Json {
    let mut paths = Map::new();
    let mut schemas = fixed::schemas();
    let names: Vec<&String> = catalog.entities.keys().collect();
    schemas["Upload"]["properties"]["entity"]["enum"] = json!(names);
    for prefix in PREFIXES {
        fixed::paths(prefix, &mut paths);
        for e in catalog.entities.values() {
            entity_paths(prefix, e, &mut paths);
        }
    }
    for e in catalog.entities.values() {
        let t = type_name(&e.name);
        schemas.insert(t.clone(), object_schema(e));
        schemas.insert(format!("{t}Create"), payload(&e.create_schema));
        schemas.insert(format!("{t}Update"), payload(&e.update_schema));
        let mut put_item = payload(&e.update_schema);
        put_item["properties"]["id"] = json!({"type": "integer", "minimum": 1});
        put_item["required"] = json!(["id"]);
        schemas.insert(format!("{t}BatchUpdate"), put_item);
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "entiserve",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Entities from YAML as a REST API, with batches, durable background requests and a CSV uploader."
        },
        "servers": [{"url": "/"}],
        "security": [{"basic": []}, {"bearer": []}, {"token": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {
                "basic": {"type": "http", "scheme": "basic"},
                "bearer": {"type": "http", "scheme": "bearer"},
                "token": {"type": "apiKey", "in": "query", "name": "_token"}
            },
            "schemas": schemas,
            "responses": fixed::responses(),
        }
    })
}

/// `campaigns` -> `Campaigns`.
fn type_name(entity: &str) -> String {
    entity
        .split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

fn reference(name: &str) -> Json {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

fn response_ref(name: &str) -> Json {
    json!({"$ref": format!("#/components/responses/{name}")})
}

/// A payload schema as a component (without the document-level keys), saying also what the
/// engine checks besides the schema: text never holds NUL.
fn payload(s: &Json) -> Json {
    let mut s = s.clone();
    if let Some(o) = s.as_object_mut() {
        o.remove("$schema");
        o.remove("title");
    }
    no_nul(&mut s);
    s
}

/// Adds the no-NUL pattern to every free-text string schema inside `s`.
fn no_nul(s: &mut Json) {
    match s {
        Json::Object(o) => {
            let free_text = o.get("type").and_then(Json::as_str) == Some("string")
                && !["pattern", "enum", "format"]
                    .iter()
                    .any(|k| o.contains_key(*k));
            if free_text {
                o.insert("pattern".into(), json!("^[^\\x00]*$"));
            }
            o.values_mut().for_each(no_nul);
        }
        Json::Array(a) => a.iter_mut().for_each(no_nul),
        _ => {}
    }
}

/// The schema of an object as the API returns it.
fn object_schema(e: &Entity) -> Json {
    let mut props = Map::new();
    props.insert("id".into(), json!({"type": "integer"}));
    for f in e.fields.iter().filter(|f| !f.secret) {
        let mut s = crate::schema::field_schema(f);
        if let Some(o) = s.as_object_mut() {
            // Stored values are returned as they are; only their type is promised.
            o.remove("maxLength");
            o.remove("format");
            o.remove("pattern");
            o.remove("minimum");
            o.remove("maximum");
            o.remove("enum");
        }
        let t = s["type"].clone();
        s["type"] = json!([t, "null"]);
        props.insert(f.name.clone(), s);
    }
    props.insert("created_dt".into(), json!({"type": "string"}));
    props.insert("updated_dt".into(), json!({"type": "string"}));
    json!({"type": "object", "properties": props, "required": ["id", "created_dt", "updated_dt"]})
}

/// The error responses `codes`; a route that checks credentials (401) may also throttle
/// failed sign-ins (429).
fn errors(codes: &[&str]) -> Map<String, Json> {
    let throttled = codes.contains(&"401").then_some("429");
    codes
        .iter()
        .copied()
        .chain(throttled)
        .map(|c| (c.to_string(), response_ref(&format!("E{c}"))))
        .collect()
}

fn json_content(schema: Json) -> Json {
    json!({"application/json": {"schema": schema}})
}

fn bgrs_param() -> Json {
    json!({
        "name": "bgrs", "in": "query", "required": false,
        "description": "1/yes/true: run in the background; 0/no/false: synchronously",
        "schema": {"type": "string", "enum": ["1", "0", "yes", "no", "true", "false"]}
    })
}

fn filter_schema(ty: &FieldType) -> Json {
    match ty {
        FieldType::Integer | FieldType::Reference(_) => {
            json!({"type": "integer", "minimum": i64::MIN, "maximum": i64::MAX})
        }
        FieldType::Decimal => json!({"type": "number"}),
        FieldType::Boolean => {
            json!({"type": "string", "enum": ["1", "0", "true", "false", "yes", "no"]})
        }
        FieldType::Enum(v) => json!({"type": "string", "enum": v}),
        FieldType::Date => json!({"type": "string", "format": "date"}),
        _ => json!({"type": "string", "pattern": "^[^\\u0000]*$"}),
    }
}

fn entity_paths(prefix: &str, e: &Entity, paths: &mut Map<String, Json>) {
    let t = type_name(&e.name);
    let name = &e.name;
    let mut list_params = vec![
        json!({"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 0, "maximum": 10000, "default": 1000}}),
        json!({"name": "offset", "in": "query", "description": "objects to skip; not with `cursor`", "schema": {"type": "integer", "minimum": 0, "maximum": i64::MAX}}),
        json!({"name": "cursor", "in": "query", "description": "continue after the last object of an earlier page: the value from that reply's `Link: <...>; rel=\"next\"` header; not with `offset`", "schema": {"type": "string", "pattern": "^[A-Za-z0-9_-]*$"}}),
        json!({"name": "t", "in": "query", "description": "csv: the same data as CSV", "schema": {"type": "string", "enum": ["csv", "json"]}}),
    ];
    for f in e.fields.iter().filter(|f| !f.secret) {
        list_params.push(json!({
            "name": f.name, "in": "query", "required": false,
            "description": format!("only objects whose `{}` equals this", f.name),
            "schema": filter_schema(&f.ty)
        }));
    }
    let mut list_resp = Map::new();
    list_resp.insert(
        "200".into(),
        json!({
            "description": format!("a page of {name}"),
            "headers": {
                "X-Total-Count": {"description": "objects matching the filters", "schema": {"type": "integer"}},
                "Link": {"description": "`<url>; rel=\"next\"` (RFC 8288) while more objects follow: this request's query with a `cursor` that continues after this page's last object", "schema": {"type": "string"}}
            },
            "content": {
                "application/json": {"schema": {"type": "array", "items": reference(&t)}},
                "text/csv": {"schema": {"type": "string"}}
            }
        }),
    );
    list_resp.extend(errors(&["400", "401", "403", "404", "405"]));
    let one = json!({"description": format!("the {name} object"), "content": json_content(reference(&t))});
    let batch_ok = json!({
        "description": "the object (single call), or one result item per batch item (bgrs=false)",
        "content": json_content(json!({"oneOf": [reference(&t), {"type": "array", "items": reference("BatchItem")}]}))
    });
    let accepted = json!({"description": "running in the background", "content": json_content(reference("Accepted"))});
    let mut create_resp = Map::new();
    create_resp.insert("200".into(), batch_ok.clone());
    create_resp.insert("202".into(), accepted.clone());
    create_resp.extend(errors(&[
        "400", "401", "403", "404", "405", "409", "413", "415",
    ]));
    let mut batch_resp = Map::new();
    batch_resp.insert(
        "200".into(),
        json!({"description": "one result item per batch item", "content": json_content(json!({"type": "array", "items": reference("BatchItem")}))}),
    );
    batch_resp.insert("202".into(), accepted.clone());
    batch_resp.extend(errors(&["400", "401", "403", "404", "405", "413", "415"]));
    let delete_item =
        json!({"description": "an id, or an object with `id`; a bad item gets its own 400 result"});
    paths.insert(
        format!("{prefix}/{name}"),
        json!({
            "get": {"summary": format!("List {name}"), "tags": [name], "parameters": list_params, "responses": list_resp},
            "post": {
                "summary": format!("Create one {name} object, or a batch of them"),
                "tags": [name],
                "parameters": [bgrs_param()],
                "requestBody": {"required": true, "content": json_content(json!({"oneOf": [
                    reference(&format!("{t}Create")),
                    {"type": "array", "items": {"description": format!("each item is checked on its own as a {t}Create; a bad item gets its own 400 result")}}
                ]}))},
                "responses": create_resp
            },
            "put": {
                "summary": format!("Update a batch of {name} objects"),
                "tags": [name],
                "parameters": [bgrs_param()],
                "requestBody": {"required": true, "content": json_content(json!({"type": "array", "items": {"description": format!("each item is checked on its own as a {t}BatchUpdate; a bad item gets its own 400 result")}}))},
                "responses": batch_resp.clone()
            },
            "delete": {
                "summary": format!("Delete a batch of {name} objects"),
                "tags": [name],
                "parameters": [bgrs_param()],
                "requestBody": {"required": true, "content": json_content(json!({"type": "array", "items": delete_item}))},
                "responses": batch_resp
            }
        }),
    );
    let id_param = json!({"name": "id", "in": "path", "required": true, "schema": {"type": "integer", "minimum": 1, "maximum": i64::MAX}});
    let mut get_resp = Map::new();
    get_resp.insert("200".into(), one.clone());
    get_resp.extend(errors(&["401", "403", "404"]));
    let mut write_resp = Map::new();
    write_resp.insert("200".into(), one);
    write_resp.insert("202".into(), accepted);
    write_resp.extend(errors(&["400", "401", "403", "404", "409", "413", "415"]));
    paths.insert(
        format!("{prefix}/{name}/{{id}}"),
        json!({
            "get": {"summary": format!("One {name} object"), "tags": [name], "parameters": [id_param], "responses": get_resp},
            "put": {
                "summary": format!("Change the given fields of a {name} object"),
                "tags": [name],
                "parameters": [id_param, bgrs_param()],
                "requestBody": {"required": false, "content": json_content(reference(&format!("{t}Update")))},
                "responses": write_resp.clone()
            },
            "delete": {
                "summary": format!("Delete a {name} object"),
                "tags": [name],
                "parameters": [id_param, bgrs_param()],
                "responses": write_resp
            }
        }),
    );
}
