//! Derives the JSON Schema of an entity's create and update payloads from its fields.

use super::{Field, FieldType};
use serde_json::{Map, Value as Json, json};

/// What a decimal field's string must look like (its exact value is checked on storing).
pub const DECIMAL_PATTERN: &str = "^ *[-+]?([0-9]+([.][0-9]*)?|[.][0-9]+) *$";

/// JSON Schema of one field's value as a client may send it (without the null alternative).
pub fn field_schema(f: &Field) -> Json {
    schema_of(f, false)
}

/// JSON Schema of one field's value as the API returns it: a decimal is always a number.
pub fn read_field_schema(f: &Field) -> Json {
    schema_of(f, true)
}

fn schema_of(f: &Field, read: bool) -> Json {
    let mut s = match &f.ty {
        FieldType::String | FieldType::Text => json!({"type": "string"}),
        FieldType::Integer => json!({"type": "integer"}),
        FieldType::Decimal if read => json!({"type": "number"}),
        // A JSON number, or a string holding one exactly (`"12.50"`): a client whose numbers
        // are binary floats can still send every digit.
        FieldType::Decimal => json!({
            "type": ["number", "string"],
            "pattern": DECIMAL_PATTERN,
        }),
        FieldType::Boolean => json!({"type": "boolean"}),
        FieldType::Date => json!({"type": "string", "format": "date"}),
        FieldType::Datetime => json!({
            "type": "string",
            "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}Z?$"
        }),
        FieldType::Enum(values) => json!({"type": "string", "enum": values}),
        FieldType::Reference(_) => json!({"type": "integer", "minimum": 1}),
    };
    if let Some(n) = f.max_length {
        s["maxLength"] = json!(n);
    }
    if let Some(d) = &f.description {
        s["description"] = json!(d);
    }
    s
}

/// The schema of a create (`create = true`) or update payload.
pub fn payload_schema(entity: &str, fields: &[Field], create: bool) -> Json {
    let mut props = Map::new();
    let mut required = Vec::new();
    for f in fields {
        let mut s = field_schema(f);
        let defaulted = f.default.is_some() || f.default_caller;
        if !f.required && !defaulted {
            // Optional fields without a default may be cleared with null.
            let inner = s.clone();
            s = json!({"anyOf": [inner, {"type": "null"}]});
        }
        props.insert(f.name.clone(), s);
        if create && f.required && !defaulted {
            required.push(f.name.clone());
        }
    }
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": format!("{entity} {}", if create { "create" } else { "update" }),
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": false,
    })
}
