//! The fixed routes' part of the document: written by poem-openapi from the handlers' types
//! (`http::api`) as OpenAPI 3.0, converted once to 3.1 here. Also the schemas and
//! error responses the entities' routes share with it.

use super::{json_content, reference};
use crate::routes::{self, Owner};
use poem_openapi::registry::{MetaSchema, MetaSchemaRef, Registry};
use poem_openapi::types::{ToJSON, Type};
use serde_json::{Map, Value as Json, json};
use std::borrow::Cow;

/// A `users` object as the API returns it; its schema is the catalog's (`Users`).
pub struct Users(pub Json);

impl Type for Users {
    const IS_REQUIRED: bool = true;
    type RawValueType = Self;
    type RawElementValueType = Self;

    fn name() -> Cow<'static, str> {
        "Users".into()
    }

    fn schema_ref() -> MetaSchemaRef {
        MetaSchemaRef::Reference("Users".into())
    }

    /// A stand-in: the merged document holds the catalog's schema under this name.
    fn register(registry: &mut Registry) {
        registry.create_schema::<Self, _>("Users".into(), |_| MetaSchema::new("object"));
    }

    fn as_raw_value(&self) -> Option<&Self> {
        Some(self)
    }

    fn raw_element_iter<'a>(&'a self) -> Box<dyn Iterator<Item = &'a Self> + 'a> {
        Box::new(std::iter::once(self))
    }
}

impl ToJSON for Users {
    fn to_json(&self) -> Option<Json> {
        Some(self.0.clone())
    }
}

/// The fixed routes' paths, schemas, security schemes and tags, in OpenAPI 3.1 form, from
/// `doc`, the OpenAPI 3.0 document poem-openapi writes for their handlers (`http::api::spec`,
/// which the app passes in: the routes sit above the document they are described in).
pub fn fixed_part(mut doc: Json) -> Json {
    to_3_1(&mut doc);
    let schemas = doc["components"]["schemas"].clone();
    let paths = doc["paths"].as_object_mut().expect("a document has paths");
    for item in paths.values_mut() {
        for op in item
            .as_object_mut()
            .into_iter()
            .flat_map(|o| o.values_mut())
        {
            // A handler that takes no credential is public.
            if op.get("security").is_none() {
                op["security"] = json!([]);
            }
            lift_examples(op, &schemas);
        }
    }
    doc
}

/// A request body's example, shown where tools look for it: next to its media type.
fn lift_examples(op: &mut Json, schemas: &Json) {
    let Some(content) = op
        .pointer_mut("/requestBody/content")
        .and_then(Json::as_object_mut)
    else {
        return;
    };
    for media in content.values_mut() {
        let example = media["schema"]["$ref"]
            .as_str()
            .and_then(|r| r.strip_prefix("#/components/schemas/"))
            .and_then(|name| schemas[name]["examples"].get(0));
        if let Some(e) = example {
            media["example"] = e.clone();
        }
    }
}

/// OpenAPI 3.0 schemas to 3.1: `nullable` becomes a `null` type, binary strings a content
/// media type, and a schema's `example` its `examples`.
fn to_3_1(v: &mut Json) {
    match v {
        Json::Object(o) => {
            if o.remove("nullable") == Some(Json::Bool(true))
                && let Some(t) = o.get("type").cloned()
            {
                o.insert("type".into(), json!([t, "null"]));
            }
            if o.get("format").and_then(Json::as_str) == Some("binary") {
                o.remove("format");
                o.insert("contentMediaType".into(), json!("application/octet-stream"));
            }
            let is_schema = o.contains_key("type") || o.contains_key("properties");
            if is_schema && let Some(e) = o.remove("example") {
                o.insert("examples".into(), json!([e]));
            }
            o.values_mut().for_each(to_3_1);
        }
        Json::Array(a) => a.iter_mut().for_each(to_3_1),
        _ => {}
    }
}

/// The fixed routes under `prefix`, with operationIds ending in `suffix`, from `fixed`
/// ([`fixed_part`]).
pub fn paths(fixed: &Json, prefix: &str, suffix: &str, out: &mut Map<String, Json>) {
    let Some(paths) = fixed["paths"].as_object() else {
        return;
    };
    for route in routes::under(prefix).filter(|r| r.owner != Owner::Entity) {
        let path = template(route.path);
        let Some(item) = paths.get(&path) else {
            continue;
        };
        let mut item = item.clone();
        for op in item
            .as_object_mut()
            .into_iter()
            .flat_map(|o| o.values_mut())
        {
            if let Some(id) = op["operationId"].as_str() {
                op["operationId"] = json!(format!("{id}{suffix}"));
            }
        }
        out.insert(format!("{prefix}{path}"), item);
    }
}

/// A router path (`/bgrs/:rid`) as a document path (`/bgrs/{rid}`).
pub fn template(path: &str) -> String {
    path.split('/')
        .map(|s| match s.strip_prefix(':') {
            Some(name) => format!("{{{name}}}"),
            None => s.to_string(),
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// The upload example names an entity in force.
pub fn example_entity(paths: &mut Map<String, Json>, names: &[&String]) {
    let entity = names
        .iter()
        .find(|n| n.as_str() == "campaigns")
        .or(names.first());
    let Some(entity) = entity else {
        return;
    };
    for (prefix, _) in super::PREFIXES {
        if let Some(example) = paths
            .get_mut(&format!("{prefix}/tools/uploader.ex.php"))
            .and_then(|p| p.pointer_mut("/post/requestBody/content/multipart~1form-data/example"))
        {
            example["entity"] = json!(entity);
        }
    }
}

/// Schemas the entities' routes use besides their own.
pub fn entity_schemas() -> Map<String, Json> {
    Map::from_iter([
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
    ])
}

/// The error responses of the entities' routes, by status.
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
            "410",
            "no longer kept: reload, then go on from the number the description names",
        ),
        (
            "409",
            "conflict: a unique value is taken, or the object is still referenced",
        ),
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
