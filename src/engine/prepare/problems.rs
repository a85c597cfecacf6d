//! A call's parameters checked against its entity's JSON Schema, and each failing field's
//! problem in the words of someone filling in a form (a secret's without its value).

use super::invalid;
use crate::engine::{CallError, Op};
use crate::schema::{Entity, FieldType, value};
use serde_json::{Map, Value as Json};
use std::collections::BTreeMap;

/// Checks `params` against the entity's schema (a save as an update; what a create needs
/// besides is checked later), every failing field with its message.
pub(super) fn validate(
    e: &Entity,
    op: Op,
    params: Map<String, Json>,
    at: &[usize],
) -> Result<Map<String, Json>, CallError> {
    if crate::schema::surely_valid_at(&e.fields, op == Op::Create, &params, at) {
        return Ok(params);
    }
    let instance = Json::Object(params);
    let validator = if op == Op::Create {
        &e.create_validator
    } else {
        &e.update_validator
    };
    let mut bad = BTreeMap::new();
    let errors = if validator.is_valid(&instance) {
        None
    } else {
        Some(validator.iter_errors(&instance))
    };
    for err in errors.into_iter().flatten() {
        let path = err
            .instance_path()
            .as_str()
            .trim_start_matches('/')
            .to_string();
        let field = if path.is_empty() {
            match err.kind() {
                jsonschema::error::ValidationErrorKind::Required { property } => {
                    property.as_str().unwrap_or("").to_string()
                }
                _ => String::new(),
            }
        } else {
            path.split('/').next().unwrap_or("").to_string()
        };
        let msg = if field.is_empty() || path.is_empty() {
            "is required".to_string()
        } else if e.field(&field).is_some_and(|f| f.secret) {
            secret_problem(err.kind()).to_string()
        } else if let Some(problem) = string_problem(e, &field, &instance) {
            problem
        } else {
            field_problem(e.field(&field), &err)
        };
        bad.entry(field).or_insert(msg);
    }
    if !bad.is_empty() {
        return Err(invalid(bad));
    }
    let Json::Object(params) = instance else {
        unreachable!("built as an object")
    };
    Ok(params)
}

/// The problem with a date, datetime or enum value given as a string, in the words
/// [`super::coerce_strings`] uses for a CSV cell or form value: the same value fails with the same
/// message whichever way it came.
fn string_problem(e: &Entity, field: &str, instance: &Json) -> Option<String> {
    let f = e.field(field)?;
    if !matches!(
        f.ty,
        FieldType::Date | FieldType::Datetime | FieldType::Enum(_)
    ) {
        return None;
    }
    let v = instance.get(field).filter(|v| v.is_string())?;
    value::normalize(&f.ty, v).err()
}

/// The text of a schema error; for an optional field (`anyOf: [<the field's schema>, null]`)
/// the problem with the field's own schema rather than "not valid under any of the schemas".
fn field_problem(f: Option<&crate::schema::Field>, err: &jsonschema::ValidationError) -> String {
    let own = match err.kind() {
        jsonschema::error::ValidationErrorKind::AnyOf { context } => {
            context.first().and_then(|errors| errors.first())
        }
        _ => None,
    }
    .unwrap_or(err);
    f.and_then(|f| plain_problem(f, own.kind()))
        .unwrap_or_else(|| own.to_string())
}

/// What a value of field `f` must be, in the words of someone filling in a form, for the
/// schema errors that have such words.
fn plain_problem(
    f: &crate::schema::Field,
    kind: &jsonschema::error::ValidationErrorKind,
) -> Option<String> {
    use jsonschema::error::ValidationErrorKind as K;
    let must = match (kind, &f.ty) {
        (K::MaxLength { limit }, _) => format!("at most {limit} characters"),
        (
            K::Type { .. }
            | K::Minimum { .. }
            | K::Maximum { .. }
            | K::Format { .. }
            | K::Pattern { .. },
            ty,
        ) => match ty {
            FieldType::String | FieldType::Text => "text".to_string(),
            FieldType::Integer => "a whole number such as 42".to_string(),
            FieldType::Decimal => "a decimal number such as 12.50".to_string(),
            FieldType::Boolean => "true or false".to_string(),
            FieldType::Date => "a date such as 2026-11-25".to_string(),
            FieldType::Datetime => "a date and time such as 2026-11-25 14:30:00".to_string(),
            FieldType::Enum(values) => format!("one of: {}", values.join(", ")),
            FieldType::Reference(target) => {
                format!("the id of a `{target}` object (a whole number from 1)")
            }
        },
        _ => return None,
    };
    Some(format!("`{}` must be {must}", f.name))
}

/// What is wrong with a secret's value, without the value.
fn secret_problem(kind: &jsonschema::error::ValidationErrorKind) -> &'static str {
    use jsonschema::error::ValidationErrorKind as K;
    match kind {
        K::MaxLength { .. } => "is too long",
        K::MinLength { .. } => "is too short",
        K::Type { .. } => "must be a string",
        // `anyOf: [<the field's schema>, null]`: the field's own problem.
        K::AnyOf { context } => {
            let problems: Vec<_> = context
                .iter()
                .flatten()
                .map(|e| secret_problem(e.kind()))
                .collect();
            let length = problems.iter().find(|p| p.starts_with("is too"));
            length.or(problems.first()).copied().unwrap_or("is invalid")
        }
        _ => "is invalid",
    }
}
