//! The list query language, read against an entity: filters (`field=value` and
//! `field[op]=value`), `sort=field,-field` and `fields=a,b`. Every name is a readable column
//! (`id`, the fields that are not secret, `created_dt`, `updated_dt`); anything else is a 400
//! naming it, with the nearest known name. Values are coerced with the fields' own coercion.

use super::{CallError, cursor};
use crate::schema::{ColType, Entity, FieldType, format, value};
use crate::storage::entity::{Cond, Filter, SortKey};
use crate::storage::{Row, Value};
use serde_json::Value as Json;

/// The comparison operators of `field[op]=value`.
pub const OPERATORS: &[&str] = &["gt", "gte", "lt", "lte", "ne", "in", "contains"];

/// Most values one `field[in]=` may list.
pub const MAX_IN: usize = 1000;

/// Most filters one list, count or stream may have. They all hold together (AND), and SQLite
/// refuses a condition nested deeper than 1,000 levels; far more than a query ever names.
pub const MAX_FILTERS: usize = 100;

/// The type of a readable column, `None` for names that are not one (secrets included).
fn column_type(e: &Entity, name: &str) -> Option<FieldType> {
    match name {
        "id" => Some(FieldType::Integer),
        "created_dt" | "updated_dt" => Some(FieldType::Datetime),
        _ => e.field(name).filter(|f| !f.secret).map(|f| f.ty.clone()),
    }
}

/// The names a list may filter, sort and choose.
pub fn readable(e: &Entity) -> impl Iterator<Item = &str> {
    e.columns().filter(|c| e.field(c).is_none_or(|f| !f.secret))
}

fn unknown(e: &Entity, name: &str) -> CallError {
    let hint = format::nearest(name, readable(e)).map(str::to_string);
    CallError::UnknownFields(vec![(name.to_string(), hint)])
}

fn typed(e: &Entity, name: &str) -> Result<FieldType, CallError> {
    column_type(e, name).ok_or_else(|| unknown(e, name))
}

fn is_text(ty: &FieldType) -> bool {
    matches!(ty, FieldType::String | FieldType::Text | FieldType::Enum(_))
}

/// One filter value of column `name` as stored.
fn coerce(name: &str, ty: &FieldType, s: &str) -> Result<Value, CallError> {
    if s.trim().is_empty() && !matches!(ty, FieldType::String | FieldType::Text) {
        return Err(CallError::invalid_field(
            name,
            "an empty filter value matches nothing; leave the filter out",
        ));
    }
    let j = value::coerce_str(ty, s).map_err(|msg| CallError::invalid_field(name, msg))?;
    Ok(Value::from_json(ty.col_type(), &j))
}

/// The filters of a list's non-reserved query parameters.
pub fn filters(e: &Entity, pairs: Vec<(String, String)>) -> Result<Vec<Filter>, CallError> {
    if pairs.len() > MAX_FILTERS {
        return Err(CallError::Invalid {
            description: format!(
                "at most {MAX_FILTERS} filters in one query; this one has {}",
                pairs.len()
            ),
            fields: Default::default(),
        });
    }
    let mut out = Vec::with_capacity(pairs.len());
    for (key, v) in pairs {
        let (name, op) = match key.strip_suffix(']').and_then(|k| k.split_once('[')) {
            Some((name, op)) => (name, Some(op)),
            None => (key.as_str(), None),
        };
        let ty = typed(e, name)?;
        let cond = match op {
            None => Cond::Eq(coerce(name, &ty, &v)?),
            Some("gt") => Cond::Gt(coerce(name, &ty, &v)?),
            Some("gte") => Cond::Gte(coerce(name, &ty, &v)?),
            Some("lt") => Cond::Lt(coerce(name, &ty, &v)?),
            Some("lte") => Cond::Lte(coerce(name, &ty, &v)?),
            Some("ne") => Cond::Ne(coerce(name, &ty, &v)?),
            Some("in") => {
                let items: Vec<&str> = v.split(',').collect();
                if items.len() > MAX_IN {
                    return Err(CallError::invalid_field(
                        name,
                        format!("`in` takes at most {MAX_IN} values"),
                    ));
                }
                Cond::In(
                    items
                        .into_iter()
                        .map(|s| coerce(name, &ty, s))
                        .collect::<Result<_, _>>()?,
                )
            }
            Some("contains") if is_text(&ty) => {
                if v.contains('\0') {
                    return Err(CallError::invalid_field(
                        name,
                        "text may not contain NUL characters",
                    ));
                }
                Cond::Contains(v)
            }
            Some("contains") => {
                return Err(CallError::invalid_field(
                    name,
                    format!(
                        "`contains` applies to text fields; `{name}` is a {}",
                        ty.name()
                    ),
                ));
            }
            Some(op) => {
                let hint = format::nearest(op, OPERATORS.iter().copied())
                    .map(|h| format!(" (did you mean `{name}[{h}]`?)"))
                    .unwrap_or_default();
                return Err(CallError::invalid_field(
                    &key,
                    format!(
                        "unknown operator `{op}`{hint}; the operators are {}",
                        OPERATORS.join(", ")
                    ),
                ));
            }
        };
        out.push(Filter {
            column: name.to_string(),
            cond,
        });
    }
    Ok(out)
}

/// `changed_by=<rid>`: the objects a background request created or changed.
pub fn changed_by(rid: String) -> Result<Filter, CallError> {
    if rid.len() != 32 || !rid.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(CallError::invalid_field(
            "changed_by",
            "the id of a background request: 32 hexadecimal digits",
        ));
    }
    Ok(Filter {
        column: "id".into(),
        cond: Cond::ChangedBy(rid.to_ascii_lowercase()),
    })
}

/// The names of a comma-separated list, each checked to be a readable column, repeats left out.
fn names<'a>(e: &Entity, param: &str, list: &'a str) -> Result<Vec<&'a str>, CallError> {
    let mut out: Vec<&str> = Vec::new();
    for item in list.split(',') {
        if item.is_empty() {
            return Err(CallError::invalid_field(
                param,
                "name fields separated by commas, without empty entries",
            ));
        }
        typed(e, item.strip_prefix('-').unwrap_or(item))?;
        if !out
            .iter()
            .any(|o| o.trim_start_matches('-') == item.trim_start_matches('-'))
        {
            out.push(item);
        }
    }
    Ok(out)
}

/// `sort=field,-field`: the sort keys, `-` for descending.
pub fn sort(e: &Entity, list: &str) -> Result<Vec<SortKey>, CallError> {
    Ok(names(e, "sort", list)?
        .into_iter()
        .map(|n| match n.strip_prefix('-') {
            Some(c) => SortKey {
                column: c.to_string(),
                desc: true,
            },
            None => SortKey {
                column: n.to_string(),
                desc: false,
            },
        })
        .collect())
}

/// `fields=a,b`: the columns to return, in this order.
pub fn fields(e: &Entity, list: &str) -> Result<Vec<String>, CallError> {
    let names = names(e, "fields", list)?;
    if let Some(n) = names.iter().find(|n| n.starts_with('-')) {
        return Err(unknown(e, n));
    }
    Ok(names.into_iter().map(str::to_string).collect())
}

/// The cursor keys of `row` (read with the entity's full column list): its sort values, then
/// its id.
pub fn cursor_keys(e: &Entity, sort: &[SortKey], row: &Row) -> Vec<Json> {
    let pos = |c: &str| e.columns().position(|x| x == c).unwrap_or(0);
    sort.iter()
        .map(|k| row[pos(&k.column)].to_json())
        .chain(std::iter::once(row[0].to_json()))
        .collect()
}

/// The stored values a decoded cursor continues after, checked against `sort`'s keys.
pub fn after(e: &Entity, sort: &[SortKey], keys: &[Json]) -> Result<Vec<Value>, CallError> {
    if keys.len() != sort.len() + 1 {
        return Err(cursor::bad());
    }
    let types = sort
        .iter()
        .map(|k| e.col_type(&k.column).unwrap_or(ColType::Text))
        .chain(std::iter::once(ColType::Int));
    types
        .zip(keys)
        .map(|(t, j)| {
            let fits = match t {
                _ if j.is_null() => true,
                ColType::Int => j.as_i64().is_some(),
                ColType::Float => j.is_number(),
                ColType::Decimal => j
                    .as_number()
                    .is_some_and(|n| crate::decimal::from_json_number(n).is_ok()),
                ColType::Bool => j.is_boolean(),
                ColType::Text => j.is_string(),
            };
            if fits {
                Ok(Value::from_json(t, j))
            } else {
                Err(cursor::bad())
            }
        })
        .collect()
}
