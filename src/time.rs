//! Timestamps in the one format the API speaks: `YYYY-MM-DD HH:MM:SS`, UTC.

use chrono::{DateTime, NaiveDateTime, Utc};

pub const FORMAT: &str = "%Y-%m-%d %H:%M:%S";

/// Seconds since the Unix epoch.
pub fn unix_now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// The current time, formatted.
pub fn now() -> String {
    format(Utc::now())
}

pub fn format(t: DateTime<Utc>) -> String {
    t.format(FORMAT).to_string()
}

/// Parses a timestamp written by [`format`].
pub fn parse(s: &str) -> Option<DateTime<Utc>> {
    NaiveDateTime::parse_from_str(s, FORMAT)
        .ok()
        .map(|n| n.and_utc())
}
