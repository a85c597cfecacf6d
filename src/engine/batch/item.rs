//! A batch item (an element of a JSON array sent to `/<res>`) as the call it stands for.

use crate::engine::{Call, CallError, Op};
use serde_json::{Map, Value as Json};

/// The call a batch item stands for, or why it stands for none.
pub fn item_call(entity: &str, op: Op, item: Json) -> Result<Call, CallError> {
    let id_of = |v: &Json| -> Option<i64> {
        v.as_i64()
            .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
    };
    match (op, item) {
        (Op::Create | Op::Save, Json::Object(m)) => Ok(Call {
            entity: entity.to_string(),
            op,
            id: None,
            params: m,
            prehashed: false,
        }),
        (Op::Update, Json::Object(mut params)) => {
            // Without `id` the item names its object by the entity's key (checked when the
            // call is prepared).
            let id = match params.remove("id") {
                None => None,
                Some(v) => Some(id_of(&v).ok_or_else(|| {
                    CallError::invalid_field(
                        "id",
                        "each item of a PUT batch needs an integer `id` (or the entity's key)",
                    )
                })?),
            };
            Ok(Call {
                entity: entity.to_string(),
                op,
                id,
                params,
                prehashed: false,
            })
        }
        (Op::Delete, Json::Object(m)) => {
            let id = m.get("id").and_then(id_of).ok_or_else(|| {
                CallError::invalid_field("id", "each item of a DELETE batch needs an integer `id`")
            })?;
            Ok(Call {
                entity: entity.to_string(),
                op,
                id: Some(id),
                params: Map::new(),
                prehashed: false,
            })
        }
        (Op::Delete, v) => match id_of(&v) {
            Some(id) => Ok(Call {
                entity: entity.to_string(),
                op,
                id: Some(id),
                params: Map::new(),
                prehashed: false,
            }),
            None => Err(CallError::invalid_field(
                "id",
                "a DELETE batch item is an id or an object with `id`",
            )),
        },
        _ => Err(CallError::Invalid {
            description: "a batch item must be a JSON object".into(),
            fields: Default::default(),
        }),
    }
}
