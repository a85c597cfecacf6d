//! The engine's errors: everything a single call can fail with, each with its HTTP status and
//! contract error code. The same value becomes a REST error, a batch item's body and a CSV `res`.

use crate::schema::format::shown;
use serde_json::{Map, Value as Json, json};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq)]
pub enum CallError {
    /// No entity of that name.
    UnknownEntity(String),
    /// Another server on the database changed this entity's definition.
    ChangedElsewhere(String),
    /// No object with that id.
    NotFound { entity: String, id: i64 },
    /// No object with that natural key: its fields and the values looked for.
    NoKeyMatch {
        entity: String,
        key: Vec<(String, Json)>,
    },
    /// The caller's role does not allow this.
    Forbidden(String),
    /// The payload names fields the entity does not have.
    /// Names the entity does not have, each with the nearest field name when one is close.
    UnknownFields(Vec<(String, Option<String>)>),
    /// Values of the wrong type or shape; field name -> problem.
    Invalid {
        description: String,
        fields: BTreeMap<String, String>,
    },
    /// A reference names an object that does not exist.
    InvalidReference { field: Option<String> },
    /// A unique field's value is taken.
    Conflict { field: Option<String> },
    /// Another object has the same natural key (of several fields).
    KeyTaken { key: Vec<String> },
    /// The object is referenced by others and cannot be deleted.
    Referenced { by: Vec<String> },
    /// A storage failure; details are logged, not shown.
    Internal,
    /// The disk or the store is full: nothing was applied.
    InsufficientStorage,
    /// A hook refused the change (`throw new Refuse(message, status)`), with a 4xx status.
    Refused { message: String, status: u16 },
    /// A hook failed (an exception, its time or memory limit): `<file>:<line>: <message>`.
    HookFailed(String),
    /// The call succeeded but was not applied: `failed` (`line 7`, `item 3`) failed in the
    /// same all-or-nothing request.
    NotApplied { failed: String },
}

impl CallError {
    pub fn invalid_field(field: &str, problem: impl Into<String>) -> CallError {
        let problem = problem.into();
        CallError::Invalid {
            description: format!("invalid value for `{field}`: {problem}"),
            fields: BTreeMap::from([(field.to_string(), problem)]),
        }
    }

    pub fn status(&self) -> u16 {
        match self {
            CallError::UnknownEntity(_)
            | CallError::NotFound { .. }
            | CallError::NoKeyMatch { .. } => 404,
            CallError::Forbidden(_) => 403,
            CallError::UnknownFields(_)
            | CallError::Invalid { .. }
            | CallError::InvalidReference { .. } => 400,
            CallError::Conflict { .. }
            | CallError::KeyTaken { .. }
            | CallError::Referenced { .. }
            | CallError::NotApplied { .. } => 409,
            CallError::Refused { status, .. } => *status,
            CallError::Internal | CallError::HookFailed(_) => 500,
            CallError::InsufficientStorage => 507,
            CallError::ChangedElsewhere(_) => 503,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            CallError::UnknownEntity(_)
            | CallError::NotFound { .. }
            | CallError::NoKeyMatch { .. } => "not_found",
            CallError::Forbidden(_) => "forbidden",
            CallError::UnknownFields(_) => "unknown_field",
            CallError::Invalid { .. } => "validation_failed",
            CallError::InvalidReference { .. } => "invalid_reference",
            CallError::Conflict { .. } | CallError::KeyTaken { .. } => "conflict",
            CallError::Referenced { .. } => "referenced",
            CallError::Refused { .. } => "refused",
            CallError::HookFailed(_) => "hook_failed",
            CallError::Internal => "internal_error",
            CallError::InsufficientStorage => "insufficient_storage",
            CallError::NotApplied { .. } => "not_applied",
            CallError::ChangedElsewhere(_) => "unavailable",
        }
    }

    pub fn description(&self) -> String {
        match self {
            CallError::UnknownEntity(e) => format!("there is no resource `{}`", shown(e)),
            CallError::ChangedElsewhere(e) => format!(
                "another server on this database changed the definition of `{e}`; this server serves it again once its own entity files match (reload it)"
            ),
            CallError::NotFound { entity, id } => format!("{entity} {id} does not exist"),
            CallError::NoKeyMatch { entity, key } => {
                let shown: Vec<String> = key.iter().map(|(k, v)| format!("{k} {v}")).collect();
                format!("no {entity} object has {}", shown.join(" and "))
            }
            CallError::Forbidden(why) => why.clone(),
            CallError::UnknownFields(f) => {
                let names: Vec<String> = f
                    .iter()
                    .map(|(n, hint)| match hint {
                        Some(h) => format!("`{}` (did you mean `{h}`?)", shown(n)),
                        None => format!("`{}`", shown(n)),
                    })
                    .collect();
                format!("unknown field {}", names.join(", "))
            }
            CallError::Invalid { description, .. } => description.clone(),
            CallError::InvalidReference { field: Some(f) } => {
                format!("`{f}` refers to an object that does not exist")
            }
            CallError::InvalidReference { field: None } => {
                "a reference names an object that does not exist".into()
            }
            CallError::Conflict { field: Some(f) } => {
                format!("another object already has this `{f}`")
            }
            CallError::Conflict { field: None } => "a unique value is already taken".into(),
            CallError::KeyTaken { key } => {
                let names: Vec<String> = key.iter().map(|k| format!("`{k}`")).collect();
                format!("another object already has this key ({})", names.join(", "))
            }
            CallError::Referenced { by } if !by.is_empty() => {
                format!("the object is still referenced by {}", by.join(", "))
            }
            CallError::Referenced { .. } => {
                "the object is still referenced by other objects".into()
            }
            CallError::Refused { message, .. } => message.clone(),
            CallError::HookFailed(message) => message.clone(),
            CallError::Internal => "the server failed to handle this request".into(),
            CallError::InsufficientStorage => {
                "the server's disk or file store is full: nothing was applied; try again once \
                 space is freed"
                    .into()
            }
            CallError::NotApplied { failed } => {
                format!("not applied: {failed} failed, and all or nothing was asked for")
            }
        }
    }

    /// Field name -> problem, for errors about particular fields.
    pub fn fields(&self) -> Option<Map<String, Json>> {
        let pairs: Vec<(String, String)> = match self {
            CallError::UnknownFields(f) => f
                .iter()
                .map(|(n, hint)| {
                    let what = match hint {
                        Some(h) => format!("unknown field; did you mean `{h}`?"),
                        None => "unknown field".into(),
                    };
                    (n.clone(), what)
                })
                .collect(),
            CallError::Invalid { fields, .. } => fields.clone().into_iter().collect(),
            CallError::InvalidReference { field: Some(f) } => {
                vec![(f.clone(), "no such object".into())]
            }
            CallError::Conflict { field: Some(f) } => vec![(f.clone(), "already taken".into())],
            CallError::KeyTaken { key } => key
                .iter()
                .map(|k| {
                    let others: Vec<&str> =
                        key.iter().filter(|o| *o != k).map(String::as_str).collect();
                    (
                        k.clone(),
                        format!("already taken together with {}", others.join(", ")),
                    )
                })
                .collect(),
            _ => return None,
        };
        // An error about no field in particular (too many filters) has no `fields`.
        (!pairs.is_empty()).then(|| {
            pairs
                .into_iter()
                .map(|(k, v)| (k, Json::String(v)))
                .collect()
        })
    }

    /// The contract's error object.
    pub fn body(&self) -> Json {
        let mut b = json!({"error": self.code(), "description": self.description()});
        if let Some(f) = self.fields() {
            b["fields"] = Json::Object(f);
        }
        b
    }
}

impl CallError {
    /// `names` are not fields of `e` (or not ones a client may name): each with the nearest
    /// field name as a hint.
    pub fn unknown_fields(e: &crate::schema::Entity, names: Vec<String>) -> CallError {
        CallError::UnknownFields(
            names
                .into_iter()
                .map(|n| {
                    let known = e
                        .fields
                        .iter()
                        .filter(|f| !f.secret)
                        .map(|f| f.name.as_str());
                    let hint = crate::schema::format::nearest(&n, known).map(str::to_string);
                    (n, hint)
                })
                .collect(),
        )
    }
}

impl crate::schema::Catalog {
    /// The entity a call names, if this server may serve it now.
    pub fn entity(&self, name: &str) -> Result<std::sync::Arc<crate::schema::Entity>, CallError> {
        let e = self
            .get(name)
            .cloned()
            .ok_or_else(|| CallError::UnknownEntity(name.to_string()))?;
        if self.changed_elsewhere.contains(name) {
            return Err(CallError::ChangedElsewhere(name.to_string()));
        }
        Ok(e)
    }
}
