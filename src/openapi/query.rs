//! The query parameters of an entity's list and live routes: paging and the CSV switch, each
//! field's filters with their operators, `sort` and `fields`.

use crate::schema::{Entity, FieldType};
use serde_json::{Value as Json, json};

/// The schema of a filter's value on a field of type `ty`.
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

/// The list query parameters of `e`: per readable column its equality filter, its comparison
/// filters (`[contains]` for text), then `sort` and `fields`.
pub(super) fn query_params(e: &Entity) -> Vec<Json> {
    let mut out = Vec::new();
    let columns: Vec<(&str, FieldType)> = std::iter::once(("id", FieldType::Integer))
        .chain(
            e.fields
                .iter()
                .filter(|f| !f.secret)
                .map(|f| (f.name.as_str(), f.ty.clone())),
        )
        .chain([
            ("created_dt", FieldType::Datetime),
            ("updated_dt", FieldType::Datetime),
        ])
        .collect();
    let text = json!({"type": "string", "pattern": "^[^\\u0000]*$"});
    for (name, ty) in &columns {
        let param = |suffix: &str, description: String, schema: Json| {
            json!({
                "name": format!("{name}{suffix}"), "in": "query", "required": false,
                "description": description, "schema": schema
            })
        };
        out.push(param(
            "",
            format!("only objects whose `{name}` equals this"),
            filter_schema(ty),
        ));
        for (op, words) in [
            ("gt", "is greater than"),
            ("gte", "is greater than or equal to"),
            ("lt", "is less than"),
            ("lte", "is less than or equal to"),
        ] {
            out.push(param(
                &format!("[{op}]"),
                format!("only objects whose `{name}` {words} this (null values never match)"),
                filter_schema(ty),
            ));
        }
        out.push(param(
            "[ne]",
            format!("only objects whose `{name}` differs from this (null values match)"),
            filter_schema(ty),
        ));
        out.push(param(
            "[in]",
            format!(
                "only objects whose `{name}` equals one of these comma-separated values (at most {})",
                crate::engine::query::MAX_IN
            ),
            text.clone(),
        ));
        if matches!(ty, FieldType::String | FieldType::Text | FieldType::Enum(_)) {
            out.push(param(
                "[contains]",
                format!("only objects whose `{name}` holds this text, ignoring case"),
                text.clone(),
            ));
        }
    }
    let names = columns
        .iter()
        // Names are identifiers (`[a-z][a-z0-9_]*`): nothing to escape.
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join("|");
    out.push(json!({
        "name": "sort", "in": "query", "required": false,
        "description": "comma-separated fields to order by, each ascending or, with a leading `-`, descending; nulls come first going up and last going down, and objects equal on every key are in id order",
        "schema": {"type": "string", "pattern": format!("^-?({names})(,-?({names}))*$")},
        "example": "-created_dt,id"
    }));
    out.push(json!({
        "name": "fields", "in": "query", "required": false,
        "description": "comma-separated fields to return, in this order (JSON and CSV)",
        "schema": {"type": "string", "pattern": format!("^({names})(,({names}))*$")},
        "example": "id,created_dt"
    }));
    out.push(json!({
        "name": "changed_by", "in": "query", "required": false,
        "description": "only the objects this background request (yours, or anyone's for an admin) created or changed; 404 for a request you cannot see",
        "schema": {"type": "string", "pattern": "^[0-9a-fA-F]{32}$"},
        "example": "0123456789abcdef0123456789abcdef"
    }));
    out
}

/// The list operation's parameters: paging, the CSV switch, then [`query_params`].
pub(super) fn list_params(e: &Entity) -> Vec<Json> {
    let mut params = vec![
        json!({"name": "limit", "in": "query", "description": "most objects in the page", "schema": {"type": "integer", "minimum": 0, "maximum": 10000, "default": 1000}}),
        json!({"name": "offset", "in": "query", "description": "objects to skip; not with `cursor`", "schema": {"type": "integer", "minimum": 0, "maximum": i64::MAX}}),
        json!({"name": "cursor", "in": "query", "description": "continue after the last object of an earlier page: the value from that reply's `Link: <...>; rel=\"next\"` header; not with `offset`", "schema": {"type": "string", "pattern": "^[A-Za-z0-9_-]*$"}}),
        json!({"name": "t", "in": "query", "description": "csv: the same data as CSV", "schema": {"type": "string", "enum": ["csv", "json"]}}),
    ];
    params.extend(query_params(e));
    params
}
