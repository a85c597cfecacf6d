//! Conversions between field types and JSON values: strings from query strings, forms and CSV
//! cells become typed JSON; typed JSON is checked and normalised. One place, so a CSV row, a
//! batch item and a REST call convert values identically.

use super::FieldType;
use chrono::{NaiveDate, NaiveDateTime};
use serde_json::Value as Json;

/// Parses a boolean the way the contract spells them: `1/0/true/false/yes/no`.
pub fn parse_bool(s: &str) -> Option<bool> {
    crate::input::flag(s)
}

/// Converts a string value to the JSON value of a field of type `ty`.
/// An empty string means null for every type that is not textual.
pub fn coerce_str(ty: &FieldType, s: &str) -> Result<Json, String> {
    if s.contains('\0') {
        return Err("text may not contain NUL characters".into());
    }
    let t = s.trim();
    match ty {
        FieldType::String | FieldType::Text => Ok(Json::String(s.to_string())),
        _ if t.is_empty() => Ok(Json::Null),
        FieldType::Integer | FieldType::Reference(_) => t
            .parse::<i64>()
            .map(Json::from)
            .map_err(|_| format!("`{t}` is not an integer")),
        FieldType::Decimal => decimal(t),
        FieldType::Boolean => parse_bool(t)
            .map(Json::Bool)
            .ok_or_else(|| format!("`{t}` is not a boolean (1/0/true/false/yes/no)")),
        FieldType::Date | FieldType::Datetime | FieldType::Enum(_) => {
            normalize(ty, &Json::String(t.to_string()))
        }
    }
}

/// [`coerce_str`] of a string that may be owned: owned text is kept as it is, not copied, and
/// a value of another type is read where it is.
pub fn coerce_string(ty: &FieldType, s: impl AsRef<str> + Into<String>) -> Result<Json, String> {
    match ty {
        FieldType::String | FieldType::Text if !s.as_ref().contains('\0') => {
            Ok(Json::String(s.into()))
        }
        _ => coerce_str(ty, s.as_ref()),
    }
}

/// The exact decimal `text` holds, as a JSON number with its digits (normalized).
fn decimal(text: &str) -> Result<Json, String> {
    crate::decimal::parse(text)
        .map(|d| Json::Number(crate::decimal::to_json_number(&d)))
        .map_err(|e| e.to_string())
}

/// Checks semantic validity the JSON Schema cannot express and puts values in their stored
/// form: dates must exist, datetimes become `YYYY-MM-DD HH:MM:SS`, decimals must fit exactly
/// and lose trailing zeros.
pub fn normalize(ty: &FieldType, v: &Json) -> Result<Json, String> {
    match (ty, v) {
        (FieldType::Decimal, Json::Number(n)) => return decimal(n.as_str()),
        (FieldType::Decimal, Json::String(s)) => return decimal(s.trim()),
        _ => {}
    }
    let Json::String(s) = v else {
        return Ok(v.clone());
    };
    match ty {
        FieldType::Date => NaiveDate::parse_from_str(s, "%Y-%m-%d")
            .map(|d| Json::String(d.format("%Y-%m-%d").to_string()))
            .map_err(|_| format!("`{s}` is not a date (YYYY-MM-DD)")),
        FieldType::Datetime => parse_datetime(s)
            .map(|d| Json::String(d.format("%Y-%m-%d %H:%M:%S").to_string()))
            .ok_or_else(|| format!("`{s}` is not a datetime (YYYY-MM-DD HH:MM:SS)")),
        FieldType::Enum(values) => {
            if values.iter().any(|x| x == s) {
                Ok(v.clone())
            } else {
                Err(format!("`{s}` is not one of: {}", values.join(", ")))
            }
        }
        _ => Ok(v.clone()),
    }
}

fn parse_datetime(s: &str) -> Option<NaiveDateTime> {
    [
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%dT%H:%M:%SZ",
    ]
    .iter()
    .find_map(|f| NaiveDateTime::parse_from_str(s, f).ok())
}

/// Whether a JSON value has the field type's JSON shape (null aside).
pub fn json_matches(ty: &FieldType, v: &Json) -> bool {
    match ty {
        FieldType::Integer | FieldType::Reference(_) => v.as_i64().is_some(),
        FieldType::Decimal => {
            v.is_number()
                || v.as_str()
                    .is_some_and(|s| crate::decimal::parse(s.trim()).is_ok())
        }
        FieldType::Boolean => v.is_boolean(),
        _ => v.is_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coerces_strings() {
        assert_eq!(
            coerce_str(&FieldType::Integer, " 42 ").unwrap(),
            Json::from(42)
        );
        assert_eq!(
            coerce_str(&FieldType::Boolean, "Yes").unwrap(),
            Json::Bool(true)
        );
        assert_eq!(
            coerce_str(&FieldType::Boolean, "0").unwrap(),
            Json::Bool(false)
        );
        assert!(coerce_str(&FieldType::Boolean, "maybe").is_err());
        assert_eq!(
            coerce_str(&FieldType::Decimal, "1.50").unwrap().to_string(),
            "1.5"
        );
        assert_eq!(
            coerce_str(&FieldType::Decimal, " 12345678901234567.89 ")
                .unwrap()
                .to_string(),
            "12345678901234567.89"
        );
        assert!(coerce_str(&FieldType::Decimal, "NaN").is_err());
        assert!(coerce_str(&FieldType::Decimal, "1e40").is_err());
        let sent: Json = serde_json::from_str("0.1000000000000000055").unwrap();
        assert_eq!(
            normalize(&FieldType::Decimal, &sent).unwrap().to_string(),
            "0.1000000000000000055"
        );
        assert_eq!(coerce_str(&FieldType::Integer, "").unwrap(), Json::Null);
        assert_eq!(coerce_str(&FieldType::String, "").unwrap(), Json::from(""));
        assert!(coerce_str(&FieldType::Date, "2024-02-30").is_err());
        assert_eq!(
            coerce_str(&FieldType::Datetime, "2024-02-03T04:05:06").unwrap(),
            Json::from("2024-02-03 04:05:06")
        );
        let e = FieldType::Enum(vec!["a".into(), "b".into()]);
        assert!(coerce_str(&e, "c").is_err());
    }
}
