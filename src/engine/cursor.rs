//! List cursors: opaque tokens that continue a list right after the last row a page returned.
//! A cursor is the base64url (unpadded) text of a small JSON array: the last row's sort values
//! (one per `sort` key), then its id. A cursor whose shape does not fit the list's `sort` is
//! refused (see [`super::query::after`]).

use super::CallError;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value as Json;

/// The cursor that continues after the row with these sort values, then id.
pub fn encode(keys: &[Json]) -> String {
    URL_SAFE_NO_PAD.encode(Json::Array(keys.to_vec()).to_string())
}

/// The cursor that continues after the row with `id` in a list without `sort`.
pub fn after_id(id: i64) -> String {
    encode(&[Json::from(id)])
}

/// The refusal of a cursor this server did not issue for this list.
pub fn bad() -> CallError {
    CallError::invalid_field(
        "cursor",
        "not a cursor this server issued for this list; follow the `Link` header of a list reply",
    )
}

/// The sort values, then id, a cursor continues after; a validation error (400) for anything
/// that is not a cursor.
pub fn decode(cursor: &str) -> Result<Vec<Json>, CallError> {
    let bytes = URL_SAFE_NO_PAD.decode(cursor.trim()).map_err(|_| bad())?;
    match serde_json::from_slice::<Json>(&bytes).map_err(|_| bad())? {
        Json::Array(keys) if !keys.is_empty() && keys.last().and_then(Json::as_i64).is_some() => {
            Ok(keys)
        }
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_what_it_did_not_issue() {
        for id in [0, 1, 42, i64::MAX] {
            assert_eq!(
                decode(&encode(&[Json::from(id)])).unwrap(),
                [Json::from(id)]
            );
        }
        assert_eq!(encode(&[Json::from(7)]), "Wzdd");
        let keys = [Json::from("b"), Json::Null, Json::from(3)];
        assert_eq!(decode(&encode(&keys)).unwrap(), keys);
        for bad in ["", "!!!", "Wzdd=", "WyJhIl0", "e30", "MQ", "W10"] {
            assert!(decode(bad).is_err(), "{bad}");
        }
    }
}
