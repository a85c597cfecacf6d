//! Stored rows become API objects: every column in entity order, secrets left out; and the
//! cells of their CSV form, formulas neutralised.

use crate::schema::Entity;
use crate::storage::{Row, Value};
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value as Json};

/// The JSON object of a row read with the entity's full column list.
pub fn object(e: &Entity, row: &Row) -> Json {
    let mut m = Map::with_capacity(row.len());
    for (name, v) in entries(e, row) {
        m.insert(name.to_string(), v.map_or(Json::Null, Value::to_json));
    }
    Json::Object(m)
}

/// The same object as [`object`], written straight from the row when serialized: no tree of
/// values is built for it.
pub struct RowObject<'a>(pub &'a Entity, pub &'a Row);

impl Serialize for RowObject<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        for (name, v) in entries(self.0, self.1) {
            m.serialize_entry(name, &Cell(v))?;
        }
        m.end()
    }
}

/// The object of [`RowObject`] with only the columns given, in their order (as [`project`]
/// makes it), written straight from the row.
pub struct RowFields<'a>(pub &'a Entity, pub &'a Row, pub &'a [String]);

impl Serialize for RowFields<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        for c in self.2 {
            if let Some((name, v)) = entries(self.0, self.1).find(|(name, _)| name == c) {
                m.serialize_entry(name, &Cell(v))?;
            }
        }
        m.end()
    }
}

/// A stored value as [`Value::to_json`] gives it; a missing one is null.
struct Cell<'a>(Option<&'a Value>);

impl Serialize for Cell<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Some(Value::Int(Some(i))) => s.serialize_i64(*i),
            Some(Value::Bool(Some(b))) => s.serialize_bool(*b),
            Some(Value::Text(Some(t))) => s.serialize_str(t),
            Some(v @ (Value::Float(Some(_)) | Value::Decimal(Some(_)))) => v.to_json().serialize(s),
            _ => s.serialize_unit(),
        }
    }
}

/// The members of a row's object, in order: `id`, the fields but secrets, the two times; a
/// value the row lacks is `None`.
fn entries<'a>(e: &'a Entity, row: &'a Row) -> impl Iterator<Item = (&'a str, Option<&'a Value>)> {
    let n = e.fields.len();
    let id = row.first().map(|v| ("id", Some(v)));
    let fields = e.fields.iter().enumerate().filter(|(_, f)| !f.secret);
    let times = ["created_dt", "updated_dt"].into_iter().enumerate();
    id.into_iter()
        .chain(fields.map(move |(i, f)| (f.name.as_str(), row.get(1 + i))))
        .chain(times.map(move |(k, name)| (name, row.get(1 + n + k))))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::test_catalog;

    #[test]
    fn a_row_object_is_written_as_its_object_would_be() {
        let text = "fields:\n  n: { type: integer }\n  p: { type: decimal }\n  b: { type: boolean }\n  s: { type: string }\n  pw: { type: string, secret: true }\n  note: { type: text }\n";
        let catalog = test_catalog(&[("things.yaml", text)]);
        let e = catalog.get("things").unwrap();
        let decimal = crate::decimal::parse("12.50").unwrap();
        let full: Row = vec![
            Value::Int(Some(7)),
            Value::Int(Some(-3)),
            Value::Decimal(Some(decimal)),
            Value::Bool(Some(false)),
            Value::Text(Some("a \"quoted\" \\ name\n\t\u{1}é😀".into())),
            Value::Text(Some("hidden".into())),
            Value::Text(None),
            Value::Text(Some("2026-11-26 10:00:00".into())),
            Value::Text(Some("2026-11-26 10:00:01".into())),
        ];
        let floats: Row = vec![Value::Int(Some(1)), Value::Float(Some(0.1))];
        let cols: Vec<String> = ["note", "id", "pw", "nope", "b"].map(String::from).into();
        for row in [full, floats, vec![Value::Int(Some(2))], Vec::new()] {
            let written = serde_json::to_string(&RowObject(e, &row)).unwrap();
            assert_eq!(written, object(e, &row).to_string());
            let some = serde_json::to_string(&RowFields(e, &row, &cols)).unwrap();
            assert_eq!(some, project(object(e, &row), &cols).to_string());
        }
        let written = serde_json::to_string(&RowObject(e, &vec![Value::Int(Some(9))])).unwrap();
        assert!(!written.contains("pw"), "{written}");
        assert!(written.starts_with("{\"id\":9,\"n\":null,"), "{written}");
    }
}
