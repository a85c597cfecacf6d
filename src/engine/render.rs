//! Stored rows become API objects: every column in entity order, secrets left out; and the
//! cells of their CSV form, formulas neutralised.

use crate::schema::Entity;
use crate::storage::Row;
use serde_json::{Map, Value as Json};

/// The JSON object of a row read with the entity's full column list.
pub fn object(e: &Entity, row: &Row) -> Json {
    let mut m = Map::with_capacity(row.len());
    let mut vals = row.iter();
    if let Some(id) = vals.next() {
        m.insert("id".into(), id.to_json());
    }
    for f in &e.fields {
        let v = vals.next();
        if !f.secret {
            m.insert(f.name.clone(), v.map_or(Json::Null, |v| v.to_json()));
        }
    }
    for name in ["created_dt", "updated_dt"] {
        m.insert(name.into(), vals.next().map_or(Json::Null, |v| v.to_json()));
    }
    Json::Object(m)
}

/// Header of the CSV form of an entity's objects.
pub fn csv_header(e: &Entity) -> Vec<String> {
    std::iter::once("id".to_string())
        .chain(
            e.fields
                .iter()
                .filter(|f| !f.secret)
                .map(|f| f.name.clone()),
        )
        .chain(["created_dt".to_string(), "updated_dt".to_string()])
        .collect()
}

/// A JSON value as a CSV cell: booleans `1`/`0`, null empty.
pub fn csv_cell(v: &Json) -> String {
    match v {
        Json::Null => String::new(),
        Json::Bool(b) => (if *b { "1" } else { "0" }).to_string(),
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The CSV cell of column `name` of an object: text fields (string, text, enum) escaped so a
/// spreadsheet never runs them as formulas ([`crate::csvsafe`]); other columns hold validated
/// values (numbers, booleans, dates, ids) and are written as they are.
pub fn csv_field(e: &Entity, name: &str, v: &Json) -> String {
    let cell = csv_cell(v);
    if e.field(name).is_some_and(is_text) {
        crate::csvsafe::escape(&cell).into_owned()
    } else {
        cell
    }
}

/// Whether a field holds free text in CSV (string, text, enum), as opposed to a validated
/// number, boolean, date or id.
pub fn is_text(f: &crate::schema::Field) -> bool {
    use crate::schema::FieldType as T;
    matches!(f.ty, T::String | T::Text | T::Enum(_))
}

/// An object with only the columns `cols`, in that order.
pub fn project(obj: Json, cols: &[String]) -> Json {
    let Json::Object(mut m) = obj else {
        return obj;
    };
    Json::Object(
        cols.iter()
            .filter_map(|c| m.remove(c).map(|v| (c.clone(), v)))
            .collect(),
    )
}
