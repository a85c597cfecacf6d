//! One parser for each kind of input the server and its client read: yes/no flags, object
//! ids, idempotency keys and a CSV file's separator. The REST routes, the uploader's form, the
//! CSV rows and the command-line client all call these, so they agree on what they take. Sizes
//! in bytes are written here for people too, as the limits that take them are named.

/// A yes/no flag: `1`, `yes`, `true` or `0`, `no`, `false`, in any case and with spaces around.
pub fn flag(s: &str) -> Option<bool> {
    // Compared without a lowercase copy: a CSV upload reads a flag on every row.
    let s = s.trim();
    let is = |words: [&str; 3]| words.iter().any(|w| s.eq_ignore_ascii_case(w));
    if is(["1", "true", "yes"]) {
        Some(true)
    } else if is(["0", "false", "no"]) {
        Some(false)
    } else {
        None
    }
}

/// What an invalid [`flag`] is told.
pub fn flag_error(name: &str) -> String {
    format!("`{name}` must be 1, yes, true, 0, no or false")
}

/// An object id as a client writes it: an integer, spaces around allowed. Ids are assigned
/// from 1, so a number below names no object.
pub fn id(s: &str) -> Option<i64> {
    s.trim().parse::<i64>().ok()
}

/// The longest `Idempotency-Key`.
pub const MAX_IDEMPOTENCY_KEY: usize = 255;

/// An `Idempotency-Key` header: 1 to [`MAX_IDEMPOTENCY_KEY`] bytes, or absent.
pub fn idempotency_key(header: Option<&str>) -> Result<Option<String>, String> {
    match header {
        None => Ok(None),
        Some(k) if !k.is_empty() && k.len() <= MAX_IDEMPOTENCY_KEY => Ok(Some(k.to_string())),
        Some(_) => Err(format!(
            "`Idempotency-Key` must be 1 to {MAX_IDEMPOTENCY_KEY} characters"
        )),
    }
}

/// The separators a CSV file may use, in the order that wins a tie.
pub const SEPARATORS: [u8; 4] = [b',', b';', b'\t', b'|'];

/// A CSV file's separator from its header line: `,`, `;`, tab or `|`, whichever occurs most
/// often outside quotes (earlier in [`SEPARATORS`] on a tie, `,` when none occurs). Reads up
/// to the first line feed outside quotes.
pub fn separator(header_line: &[u8]) -> u8 {
    let mut counts = [0usize; SEPARATORS.len()];
    let mut quoted = false;
    for &b in header_line {
        match b {
            b'"' => quoted = !quoted,
            b'\n' if !quoted => break,
            _ if !quoted => {
                if let Some(i) = SEPARATORS.iter().position(|&s| s == b) {
                    counts[i] += 1;
                }
            }
            _ => {}
        }
    }
    let mut best = 0;
    for i in 1..SEPARATORS.len() {
        if counts[i] > counts[best] {
            best = i;
        }
    }
    SEPARATORS[best]
}

/// `bytes` for people: `64 MiB`, `512 KiB`, `1000 bytes`.
pub fn size_text(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_take_the_contract_spellings() {
        for (s, v) in [
            ("1", Some(true)),
            (" Yes ", Some(true)),
            ("TRUE", Some(true)),
            ("0", Some(false)),
            ("no", Some(false)),
            ("False", Some(false)),
            ("", None),
            ("2", None),
        ] {
            assert_eq!(flag(s), v, "{s:?}");
        }
    }

    #[test]
    fn ids_are_integers() {
        assert_eq!(id(" 12"), Some(12));
        assert_eq!(id("0"), Some(0));
        assert_eq!(id("1.5"), None);
        assert_eq!(id(""), None);
    }

    #[test]
    fn idempotency_keys_are_bounded() {
        assert_eq!(idempotency_key(None), Ok(None));
        assert_eq!(idempotency_key(Some("k")), Ok(Some("k".into())));
        assert!(idempotency_key(Some("")).is_err());
        assert!(idempotency_key(Some(&"k".repeat(256))).is_err());
    }

    #[test]
    fn separator_follows_the_header() {
        assert_eq!(separator(b"op;name\n1,2,3,4"), b';');
        assert_eq!(separator(b"op,name,\"a;b;c\"\n"), b',');
        assert_eq!(separator(b"op"), b',');
        assert_eq!(separator(b"op\tid\tsku\tname\n"), b'\t');
        assert_eq!(separator(b"op|id|sku|name\n"), b'|');
        assert_eq!(separator(b"op|id|\"a,b,c,d\"\n"), b'|');
        assert_eq!(separator(b"op;name\tx;y\n"), b';');
    }
}
