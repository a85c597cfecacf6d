//! A stored value converted to a field's new type, by the rules a CSV cell or a REST value of
//! that type follows; `Err` says why it does not fit.

use crate::schema::value::{coerce_str, normalize};
use crate::schema::{Field, FieldType};
use serde_json::Value as Json;

/// `stored` (a value of the field's old type) as a value of `to`'s type.
pub fn value(stored: &Json, to: &Field) -> Result<Json, String> {
    let new = match (stored, &to.ty) {
        (Json::String(s), ty) => coerce_str(ty, s)?,
        (Json::Number(n), FieldType::String | FieldType::Text) => Json::String(n.to_string()),
        (Json::Number(n), FieldType::Integer | FieldType::Reference(_)) => match n.as_i64() {
            Some(i) => Json::from(i),
            None => match n.as_f64() {
                Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Json::from(f as i64),
                _ => return Err(format!("{n} is not a whole number")),
            },
        },
        (Json::Number(n), FieldType::Decimal) => match crate::decimal::from_json_number(n) {
            Ok(d) => Json::Number(crate::decimal::to_json_number(&d)),
            Err(e) => return Err(e.to_string()),
        },
        (Json::Number(n), FieldType::Boolean) => match n.as_i64() {
            Some(0) => Json::Bool(false),
            Some(1) => Json::Bool(true),
            _ => return Err(format!("{n} is not 0 or 1")),
        },
        (Json::Number(n), ty @ FieldType::Enum(_)) => normalize(ty, &Json::String(n.to_string()))?,
        (Json::Bool(b), FieldType::String | FieldType::Text) => Json::String(b.to_string()),
        (Json::Bool(b), FieldType::Integer) => Json::from(i64::from(*b)),
        (Json::Bool(b), FieldType::Boolean) => Json::Bool(*b),
        (Json::Bool(b), ty @ FieldType::Enum(_)) => normalize(ty, &Json::String(b.to_string()))?,
        (v, ty) => return Err(format!("{v} is not a {}", ty.name())),
    };
    if let (Some(max), Json::String(s)) = (to.max_length, &new)
        && s.chars().count() as u64 > max
    {
        return Err(format!("longer than {max} characters"));
    }
    Ok(new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn field(ty: FieldType) -> Field {
        Field::new("f", ty)
    }

    #[test]
    fn text_converts_where_it_reads_as_the_new_type() {
        assert_eq!(
            value(&json!("12.50"), &field(FieldType::Decimal)),
            Ok(json!(12.5))
        );
        assert_eq!(
            value(&json!("12345678901234567.89"), &field(FieldType::Decimal))
                .unwrap()
                .to_string(),
            "12345678901234567.89"
        );
        assert!(value(&json!("1e40"), &field(FieldType::Decimal)).is_err());
        assert!(value(&json!("abc"), &field(FieldType::Decimal)).is_err());
        assert_eq!(
            value(&json!(" 7 "), &field(FieldType::Integer)),
            Ok(json!(7))
        );
        assert_eq!(
            value(&json!("yes"), &field(FieldType::Boolean)),
            Ok(json!(true))
        );
        assert!(value(&json!("2024-02-30"), &field(FieldType::Date)).is_err());
        let e = field(FieldType::Enum(vec!["s".into(), "m".into()]));
        assert!(value(&json!("xl"), &e).is_err());
    }

    #[test]
    fn numbers_convert_exactly_or_not_at_all() {
        assert_eq!(value(&json!(3), &field(FieldType::Decimal)), Ok(json!(3)));
        assert_eq!(
            value(&json!(i64::MAX), &field(FieldType::Decimal))
                .unwrap()
                .to_string(),
            i64::MAX.to_string()
        );
        assert_eq!(value(&json!(3.0), &field(FieldType::Integer)), Ok(json!(3)));
        assert!(value(&json!(3.5), &field(FieldType::Integer)).is_err());
        assert_eq!(
            value(&json!(12.5), &field(FieldType::String)),
            Ok(json!("12.5"))
        );
    }
}
