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
        if f.nullable() {
            let inner = s.clone();
            s = json!({"anyOf": [inner, {"type": "null"}]});
        }
        props.insert(f.name.clone(), s);
        if create && f.needed() {
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

/// Whether `params` certainly passes the payload schema [`payload_schema`] derives from
/// `fields`, decided by reading the fields directly: a few comparisons where the compiled
/// validator walks its keywords for every value. `false` means "not certain" (a date, a
/// pattern, a value of the wrong type, a name that is no field, a missing required field): the
/// compiled validator then decides, and words what fails. Every `true` is one the compiled
/// validator gives too.
pub fn surely_valid(fields: &[Field], create: bool, params: &Map<String, Json>) -> bool {
    let at: Option<Vec<usize>> = positions(fields, params.keys()).collect();
    at.is_some_and(|at| surely_valid_at(fields, create, params, &at))
}

/// [`surely_valid`] of parameters whose fields are known: `at[i]` is the position in
/// `fields` of the `i`-th parameter's field (see [`positions`]).
pub fn surely_valid_at(
    fields: &[Field],
    create: bool,
    params: &Map<String, Json>,
    at: &[usize],
) -> bool {
    debug_assert_eq!(params.len(), at.len());
    let mut needed_given = 0;
    for (v, &i) in params.values().zip(at) {
        let f = &fields[i];
        if !value_surely_valid(f, v) {
            return false;
        }
        needed_given += usize::from(f.needed());
    }
    // The names of a map differ: every needed field is given when as many are.
    !create || needed_given == fields.iter().filter(|f| f.needed()).count()
}

/// The position in `fields` of each of `names`, in order; `None` for a name that is no field.
/// Names mostly come in field order: each is looked for from the field after the last one
/// found.
pub fn positions<'a, S: AsRef<str> + 'a>(
    fields: &'a [Field],
    names: impl IntoIterator<Item = &'a S>,
) -> impl Iterator<Item = Option<usize>> {
    let mut next = 0;
    names.into_iter().map(move |name| {
        let name = name.as_ref();
        let i = (next..fields.len())
            .chain(0..next)
            .find(|&i| fields[i].name == name)?;
        next = i + 1;
        Some(i)
    })
}

/// Whether `v` certainly passes `f`'s schema in the payload (see [`surely_valid`]).
fn value_surely_valid(f: &Field, v: &Json) -> bool {
    match (&f.ty, v) {
        (_, Json::Null) => f.nullable(),
        (FieldType::String | FieldType::Text, Json::String(s)) => within(f, s),
        (FieldType::Enum(values), Json::String(s)) => within(f, s) && values.contains(s),
        (FieldType::Integer, Json::Number(n)) => n.is_i64() || n.is_u64(),
        (FieldType::Reference(_), Json::Number(n)) => {
            n.as_i64().is_some_and(|i| i >= 1) || n.as_u64().is_some_and(|u| u >= 1)
        }
        // A decimal's pattern applies to strings only.
        (FieldType::Decimal, Json::Number(_)) => true,
        (FieldType::Boolean, Json::Bool(_)) => true,
        _ => false,
    }
}

/// Whether `s` is within `f`'s `maxLength`, counted in characters as JSON Schema counts them.
fn within(f: &Field, s: &str) -> bool {
    match f.max_length {
        None => true,
        // At most one character a byte: the short texts need no count.
        Some(n) => s.len() as u64 <= n || s.chars().count() as u64 <= n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every type, each required, defaulted, limited in length or plain.
    fn fields() -> Vec<Field> {
        let types = [
            FieldType::String,
            FieldType::Text,
            FieldType::Integer,
            FieldType::Decimal,
            FieldType::Boolean,
            FieldType::Date,
            FieldType::Datetime,
            FieldType::Enum(vec!["red".into(), "grün".into()]),
            FieldType::Reference("others".into()),
        ];
        let mut out = Vec::new();
        for (i, ty) in types.into_iter().enumerate() {
            let mut plain = Field::new(&format!("plain{i}"), ty.clone());
            plain.max_length = (i % 2 == 0).then_some(4);
            // A required date is never certain (its format): no create would be.
            if !matches!(ty, FieldType::Date | FieldType::Datetime) {
                let mut required = Field::new(&format!("required{i}"), ty.clone());
                required.required = true;
                required.max_length = Some(3);
                out.push(required);
            }
            let mut defaulted = Field::new(&format!("defaulted{i}"), ty.clone());
            defaulted.default = Some(Json::Null);
            let mut by_caller = Field::new(&format!("caller{i}"), ty);
            by_caller.required = true;
            by_caller.default_caller = true;
            out.extend([plain, defaulted, by_caller]);
        }
        out
    }

    /// A value every field of the type takes, within 3 characters.
    fn good(ty: &FieldType) -> Json {
        match ty {
            FieldType::String | FieldType::Text => Json::from("ab"),
            FieldType::Integer | FieldType::Reference(_) => Json::from(1),
            FieldType::Decimal => Json::from(1.5),
            FieldType::Boolean => Json::from(true),
            FieldType::Enum(_) => Json::from("red"),
            FieldType::Date | FieldType::Datetime => Json::from("2024-02-29"),
        }
    }

    fn values() -> Vec<Json> {
        let mut out: Vec<Json> = [
            "null",
            "true",
            "false",
            "0",
            "1",
            "-1",
            "1.0",
            "1.5",
            "-0.0",
            "1e3",
            "9223372036854775807",
            "9223372036854775808",
            "18446744073709551616",
            "\"\"",
            "\"abc\"",
            "\"abcd\"",
            "\"abcde\"",
            "\"äöü\"",
            "\"äöüß\"",
            "\"äöüßx\"",
            "\"red\"",
            "\"grün\"",
            "\"Red\"",
            "\"12.50\"",
            "\" 12.5 \"",
            "\"1e5\"",
            "\"2024-02-29\"",
            "\"2023-02-29\"",
            "\"2024-02-29 10:00:00\"",
            "\"2024-02-29T10:00:00Z\"",
            "[]",
            "{}",
            "[1]",
        ]
        .iter()
        .map(|t| serde_json::from_str(t).unwrap())
        .collect();
        out.push(Json::String("x".repeat(300)));
        out
    }

    /// Never certain where the compiled validator refuses: each value in each field alone, in
    /// a create and an update, and creates that leave out each required field.
    #[test]
    fn certain_only_where_the_validator_agrees() {
        let fields = fields();
        let mut certain = 0;
        for create in [true, false] {
            let schema = payload_schema("t", &fields, create);
            let validator = jsonschema::options()
                .should_validate_formats(true)
                .build(&schema)
                .unwrap();
            let required: Map<String, Json> = fields
                .iter()
                .filter(|f| f.needed())
                .map(|f| (f.name.clone(), good(&f.ty)))
                .collect();
            for f in &fields {
                for v in values() {
                    let mut params = required.clone();
                    params.insert(f.name.clone(), v.clone());
                    let instance = Json::Object(params.clone());
                    if surely_valid(&fields, create, &params) {
                        certain += 1;
                        assert!(validator.is_valid(&instance), "{create} {instance}");
                    }
                }
            }
            for left_out in required.keys() {
                let mut params = required.clone();
                params.remove(left_out);
                let instance = Json::Object(params.clone());
                assert_eq!(
                    surely_valid(&fields, create, &params),
                    validator.is_valid(&instance),
                    "{create} {instance}"
                );
            }
        }
        assert!(
            certain > 300,
            "the common values are decided here: {certain}"
        );
    }

    /// Each name's field is found wherever it is, whatever the order of the names; a name
    /// that is no field has none.
    #[test]
    fn positions_find_each_name_in_any_order() {
        let fields = fields();
        let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
        let n = names.len();
        for order in [
            (0..n).collect::<Vec<_>>(),
            (0..n).rev().collect(),
            (0..n).map(|i| (i * 7) % n).collect(),
            vec![3, 3, 0],
        ] {
            let asked: Vec<String> = order.iter().map(|&i| names[i].to_string()).collect();
            let found: Vec<Option<usize>> = positions(&fields, &asked).collect();
            assert_eq!(found, order.iter().map(|&i| Some(i)).collect::<Vec<_>>());
        }
        let asked = ["plain2", "nothing", "", "required0"].map(String::from);
        let found: Vec<Option<usize>> = positions(&fields, &asked).collect();
        let at = |name: &str| names.iter().position(|n| *n == name);
        assert_eq!(found, vec![at("plain2"), None, None, at("required0")]);
        assert!(found[0].is_some() && found[3].is_some());
    }

    /// What a CSV row or a typical JSON body sends is decided without the compiled validator.
    #[test]
    fn the_common_values_are_certain() {
        let fields = fields();
        let mut params = Map::new();
        params.insert("required0".into(), Json::from("abc"));
        params.insert("required1".into(), Json::from("äöü"));
        params.insert("required2".into(), Json::from(12));
        params.insert("required3".into(), Json::from(2.5));
        params.insert("required4".into(), Json::from(true));
        params.insert("required7".into(), Json::from("red"));
        params.insert("required8".into(), Json::from(7));
        params.insert("plain1".into(), Json::Null);
        assert!(surely_valid(&fields, true, &params));
        // A date is left to the validator (its format).
        params.insert("plain5".into(), Json::from("2024-02-29"));
        assert!(!surely_valid(&fields, true, &params));
    }
}
