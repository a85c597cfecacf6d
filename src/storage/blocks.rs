//! The text of a block: several consecutive entries of a request's items or results in one
//! row (see `migrations/*/0007_blocks.sql`). Each entry is its byte length and its text, a
//! result's status before them: `<length>:<text>` for an item, `<status>:<length>:<text>` for
//! a result, one after the other with nothing between. Lengths make any text safe to hold,
//! newlines and colons included, and let a reader split a block without scanning its texts.

use super::{Result, StorageError};
use std::fmt::Write;

/// The most entries one row holds: readers look this far back for the row that holds an
/// entry.
pub const BLOCK: usize = 1000;

/// Appends one entry to a block's text.
pub fn push(block: &mut String, status: Option<i64>, text: &str) {
    if let Some(s) = status {
        let _ = write!(block, "{s}:");
    }
    let _ = write!(block, "{}:", text.len());
    block.push_str(text);
}

/// The `n` entries of a block's text, with their statuses when `statuses`.
pub fn split(text: &str, n: usize, statuses: bool) -> Result<Vec<(i64, String)>> {
    let mut out = Vec::with_capacity(n);
    let mut rest = text;
    while !rest.is_empty() {
        let status = if statuses {
            let (s, r) = number(rest)?;
            rest = r;
            s
        } else {
            0
        };
        let (len, r) = number(rest)?;
        let len = usize::try_from(len).map_err(|_| broken("a negative length"))?;
        let entry = r
            .get(..len)
            .ok_or_else(|| broken("an entry past its end"))?;
        out.push((status, entry.to_string()));
        rest = &r[len..];
    }
    if out.len() != n {
        return Err(broken(&format!(
            "{} entries where {n} were written",
            out.len()
        )));
    }
    Ok(out)
}

/// The number before the next `:`, and the text after it.
fn number(text: &str) -> Result<(i64, &str)> {
    let (digits, rest) = text
        .split_once(':')
        .ok_or_else(|| broken("an entry without its length"))?;
    let n = digits
        .parse()
        .map_err(|_| broken("an entry with a length that is no number"))?;
    Ok((n, rest))
}

fn broken(what: &str) -> StorageError {
    StorageError::Database(format!("a stored block of a request holds {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_come_back_as_written_whatever_their_text() {
        let texts = ["{\"a\":1}", "", "x:y\n12:3", "é ü 漢字", "7"];
        let mut items = String::new();
        let mut results = String::new();
        for (i, t) in texts.iter().enumerate() {
            push(&mut items, None, t);
            push(&mut results, Some(200 + i as i64), t);
        }
        let got = split(&items, texts.len(), false).unwrap();
        assert_eq!(
            got.iter().map(|e| e.1.as_str()).collect::<Vec<_>>(),
            texts.to_vec()
        );
        let got = split(&results, texts.len(), true).unwrap();
        for (i, (status, text)) in got.iter().enumerate() {
            assert_eq!(*status, 200 + i as i64);
            assert_eq!(text, texts[i]);
        }
    }

    #[test]
    fn a_damaged_block_is_an_error_not_a_panic() {
        let mut b = String::new();
        push(&mut b, None, "hello");
        push(&mut b, None, "world");
        assert!(split(&b, 3, false).is_err(), "fewer entries than written");
        assert!(split(&b[..b.len() - 1], 2, false).is_err(), "cut short");
        assert!(split("x:abc", 1, false).is_err(), "no length");
        assert!(split("5:é", 1, false).is_err(), "past its end");
        assert!(split("2:é", 1, false).is_ok());
        assert!(split("1:é", 1, false).is_err(), "inside a character");
    }
}
