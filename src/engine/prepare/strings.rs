//! String parameters (query string, form fields, CSV cells) made the JSON values of their
//! fields, before the same checks as any call's parameters.

use super::invalid;
use crate::engine::CallError;
use crate::schema::{Entity, value};
use serde_json::{Map, Value as Json};
use std::collections::BTreeMap;

/// Converts string parameters (query string, form, CSV cells) to the fields' JSON types.
/// Names that are not fields are passed through untouched, for validation to name them.
/// Names and values may be borrowed (CSV cells): only what the parameters keep is copied.
pub fn coerce_strings<K, V>(
    e: &Entity,
    params: impl IntoIterator<Item = (K, V)>,
) -> Result<Map<String, Json>, CallError>
where
    K: AsRef<str> + Into<String>,
    V: AsRef<str> + Into<String>,
{
    // Sized for every field at once: growing the map rehashes its keys.
    let mut out = Map::with_capacity(e.fields.len());
    let mut bad = BTreeMap::new();
    for (k, v) in params {
        match coerce_one(e, k.as_ref(), v) {
            Ok(j) => {
                out.insert(k.into(), j);
            }
            Err(msg) => {
                bad.insert(k.into(), msg);
            }
        }
    }
    if bad.is_empty() {
        Ok(out)
    } else {
        Err(invalid(bad))
    }
}

/// [`coerce_strings`] into a map that already holds every name, in order, each with a
/// placeholder (a copy of one map made once for many rows: a copy keeps the names' hashes,
/// where inserting hashes each name again): the values take the places in turn, each with the
/// field its name is (known to the caller, which found it once for many rows; `None` for a
/// name that is no field), and the map ends as [`coerce_strings`] would have made it of the
/// same names and values.
pub fn coerce_into<'f, V>(
    params: &mut Map<String, Json>,
    values: impl IntoIterator<Item = (Option<&'f crate::schema::Field>, V)>,
) -> Result<(), CallError>
where
    V: AsRef<str> + Into<String>,
{
    let mut bad = BTreeMap::new();
    for ((k, slot), (f, v)) in params.iter_mut().zip(values) {
        match coerce_as(f, v) {
            Ok(j) => *slot = j,
            Err(msg) => {
                bad.insert(k.clone(), msg);
            }
        }
    }
    if bad.is_empty() {
        Ok(())
    } else {
        Err(invalid(bad))
    }
}

/// One string value of the parameter `name` as its field's JSON type; a name that is no field
/// keeps its text, for validation to name it.
fn coerce_one<V>(e: &Entity, name: &str, v: V) -> Result<Json, String>
where
    V: AsRef<str> + Into<String>,
{
    coerce_as(e.field(name), v)
}

/// One string value as the JSON type of field `f`; with no field, its text.
fn coerce_as<V>(f: Option<&crate::schema::Field>, v: V) -> Result<Json, String>
where
    V: AsRef<str> + Into<String>,
{
    match f {
        Some(f) => value::coerce_string(&f.ty, v),
        None => Ok(Json::String(v.into())),
    }
}
