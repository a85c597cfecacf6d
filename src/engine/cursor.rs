//! List cursors: opaque tokens that continue a list right after the last row a page returned.
//! A cursor is the base64url (unpadded) text of a small JSON array: the last row's sort values,
//! then its id. Lists are ordered by id alone today, so the array holds just the id; a cursor of
//! another shape is refused, which keeps old cursors from being misread once `sort` adds keys.

use super::CallError;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value as Json;

/// The cursor that continues after the row with `id`.
pub fn encode(id: i64) -> String {
    URL_SAFE_NO_PAD.encode(Json::Array(vec![Json::from(id)]).to_string())
}

/// The id a cursor continues after; a validation error (400) for anything this server did not
/// issue.
pub fn decode(cursor: &str) -> Result<i64, CallError> {
    let bad = || {
        CallError::invalid_field(
            "cursor",
            "not a cursor this server issued; follow the `Link` header of a list reply",
        )
    };
    let bytes = URL_SAFE_NO_PAD.decode(cursor.trim()).map_err(|_| bad())?;
    match serde_json::from_slice::<Json>(&bytes).map_err(|_| bad())? {
        Json::Array(keys) if keys.len() == 1 => keys[0].as_i64().ok_or_else(bad),
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_what_it_did_not_issue() {
        for id in [0, 1, 42, i64::MAX] {
            assert_eq!(decode(&encode(id)).unwrap(), id);
        }
        assert_eq!(encode(7), "Wzdd");
        for bad in ["", "!!!", "Wzdd=", "WyJhIl0", "WzEsMl0", "e30", "MQ"] {
            assert!(decode(bad).is_err(), "{bad}");
        }
    }
}
