//! The one OpenAPI 3.1 document of the server: the fixed routes (authentication, health,
//! background requests, the uploader, files, pages), as poem-openapi writes them from their
//! handlers' types and converted once to 3.1 ([`fixed`]), merged with every entity's CRUD and
//! batch routes generated from the catalog in force ([`entity`]) and their live changes
//! ([`live`]). Built per catalog, so it
//! changes together with the routes when the entities are reloaded.

mod entity;
mod fixed;
mod live;
mod query;

pub use fixed::{Users, fixed_part};

use crate::routes::PREFIX;
use crate::schema::{Catalog, Entity};
use serde_json::{Map, Value as Json, json};

/// Path prefixes every route exists under, with the suffix that tells their operationIds
/// apart.
pub const PREFIXES: [(&str, &str); 2] = [("", ""), (PREFIX, "V25")];

/// The whole document for `catalog`; `fixed` is [`fixed_part`].
pub fn document(catalog: &Catalog, fixed: &Json) -> Json {
    let mut paths = Map::new();
    let mut schemas = fixed["components"]["schemas"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    schemas.extend(fixed::entity_schemas());
    let names: Vec<&String> = catalog.entities.keys().collect();
    if let Some(upload) = schemas.get_mut("Upload") {
        upload["properties"]["entity"]["enum"] = json!(names);
    }
    for (prefix, suffix) in PREFIXES {
        fixed::paths(fixed, prefix, suffix, &mut paths);
        for e in catalog.entities.values() {
            entity::paths(prefix, suffix, e, &mut paths);
            live::paths(prefix, suffix, e, &mut paths);
        }
    }
    fixed::example_entity(&mut paths, &names);
    let mut tags = fixed["tags"].as_array().cloned().unwrap_or_default();
    for e in catalog.entities.values() {
        entity::schemas(e, &mut schemas);
        tags.push(entity::tag(e));
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "entiserve",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Entities from YAML as a REST API, with batches, durable background requests and a CSV uploader. Every route also exists under the prefix `/v2.5`; those copies carry the same operationIds with the suffix `V25`.",
            "license": {"name": "MIT OR Apache-2.0", "identifier": "MIT OR Apache-2.0"},
            "contact": {"name": "entiserve"}
        },
        "servers": [{"url": "/", "description": "this server"}],
        "security": [{"basic": []}, {"bearer": []}, {"token": []}],
        "tags": tags,
        "paths": paths,
        "components": {
            "securitySchemes": fixed["components"]["securitySchemes"],
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

/// A stored timestamp as the API writes it (UTC, `YYYY-MM-DD HH:MM:SS`).
fn timestamp(about: &str) -> Json {
    json!({
        "type": "string",
        "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}$",
        "description": about
    })
}

/// The schema of an object as the API returns it: every readable field is present; `id` and
/// the required fields are never null; a value carries the type, `enum`, `maxLength` and
/// `format` of its field, as the create schema does. `id` is the schema of the id.
fn read_schema(e: &Entity, id: Json) -> Json {
    let mut props = Map::new();
    props.insert("id".into(), id);
    for f in e.fields.iter().filter(|f| !f.secret) {
        let s = crate::schema::read_field_schema(f);
        let s = if f.required {
            s
        } else {
            json!({"anyOf": [s, {"type": "null"}]})
        };
        props.insert(f.name.clone(), s);
    }
    props.insert(
        "created_dt".into(),
        timestamp("when the object was created"),
    );
    props.insert(
        "updated_dt".into(),
        timestamp("when the object was last changed"),
    );
    let required: Vec<&String> = props.keys().collect();
    json!({"type": "object", "properties": props, "required": required})
}

/// The schema of an object as the API returns it.
fn object_schema(e: &Entity) -> Json {
    read_schema(
        e,
        json!({"type": "integer", "minimum": 1, "description": "the object's id"}),
    )
}

/// The schema of a dry run's answer for an object it would create: the object as it would be
/// stored, without an id.
fn dry_run_schema(e: &Entity) -> Json {
    let mut s = read_schema(
        e,
        json!({"type": "null", "description": "no id: the object was not kept"}),
    );
    s["description"] = json!(format!(
        "a {} object a dry run (`dry_run=1`) would create, as it would be stored but without an id; a dry run that changes or deletes an object answers with that object as it would be",
        e.name
    ));
    s
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
