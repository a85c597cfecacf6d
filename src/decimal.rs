//! Exact decimal values: the text of a number (a JSON number as sent, a CSV cell, a query
//! string) read digit by digit into a [`Decimal`], never through a binary float, and written
//! back as the same digits. A value that does not fit is refused, never rounded.
//!
//! A decimal holds an integer mantissa below 2^96 (79228162514264337593543950335, 28 or 29
//! significant digits) and at most 28 digits after the point. Values are kept normalized:
//! trailing zeros after the point are dropped (`12.50` is `12.5`, `-0` is `0`), so equal
//! numbers have one form, one text and one JSON number.

pub use rust_decimal::Decimal;

/// The largest mantissa a decimal holds (2^96 - 1).
const MAX_MANTISSA: i128 = (1 << 96) - 1;
/// The most digits after the point.
pub const MAX_SCALE: u32 = 28;

/// Why a text is not a decimal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecimalError {
    #[error("`{0}` is not a decimal number")]
    NotANumber(String),
    #[error(
        "`{0}` does not fit a decimal exactly: at most 28 digits after the point and values up to ±79228162514264337593543950335"
    )]
    OutOfPrecision(String),
}

/// Parses `text`: an optional sign, digits with an optional point, an optional exponent
/// (`1.5e3`). The result is exact and normalized, or an error.
pub fn parse(text: &str) -> Result<Decimal, DecimalError> {
    let not_a_number = || DecimalError::NotANumber(text.to_string());
    let out_of_precision = || DecimalError::OutOfPrecision(text.to_string());
    let (negative, rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let (number, exponent) = match rest.find(['e', 'E']) {
        Some(i) => {
            let e = &rest[i + 1..];
            let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(not_a_number());
            }
            // Any exponent this long moves every digit out of range, or makes it zero.
            let e: i64 = if digits.len() > 6 {
                if e.starts_with('-') {
                    -1_000_000
                } else {
                    1_000_000
                }
            } else {
                e.parse().map_err(|_| not_a_number())?
            };
            (&rest[..i], e)
        }
        None => (rest, 0),
    };
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    if (int.is_empty() && frac.is_empty())
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(not_a_number());
    }
    // The significant digits, and the power of ten of the last one.
    let digits = format!("{int}{frac}");
    let digits = digits.trim_start_matches('0');
    let kept = digits.trim_end_matches('0');
    let mut power = exponent - frac.len() as i64 + (digits.len() - kept.len()) as i64;
    if kept.is_empty() {
        return Ok(Decimal::ZERO);
    }
    if kept.len() > 29 {
        return Err(out_of_precision());
    }
    let mut mantissa: i128 = kept.parse().map_err(|_| not_a_number())?;
    // A positive power becomes trailing zeros of an integer.
    while power > 0 {
        mantissa = mantissa
            .checked_mul(10)
            .filter(|m| *m <= MAX_MANTISSA)
            .ok_or_else(out_of_precision)?;
        power -= 1;
    }
    if mantissa > MAX_MANTISSA || -power > i64::from(MAX_SCALE) {
        return Err(out_of_precision());
    }
    let d =
        Decimal::from_i128_with_scale(if negative { -mantissa } else { mantissa }, (-power) as u32);
    Ok(d)
}

/// A decimal as a JSON number with exactly its digits (no exponent).
pub fn to_json_number(d: &Decimal) -> serde_json::Number {
    d.normalize()
        .to_string()
        .parse()
        .expect("a decimal's digits are a JSON number")
}

/// The decimal of a JSON number, from the text it was sent as.
pub fn from_json_number(n: &serde_json::Number) -> Result<Decimal, DecimalError> {
    parse(n.as_str())
}

/// A binary float, as stored by earlier versions, as the decimal of its shortest form (the
/// digits it was written and shown with).
pub fn from_f64(f: f64) -> Result<Decimal, DecimalError> {
    if !f.is_finite() {
        return Err(DecimalError::NotANumber(f.to_string()));
    }
    let plain = f.to_string();
    parse(&plain).map_err(|_| {
        // Named briefly: 1e300 written out has 301 digits.
        DecimalError::OutOfPrecision(if plain.len() > 40 {
            format!("{f:e}")
        } else {
            plain
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(s: &str) -> String {
        parse(s).unwrap().to_string()
    }

    #[test]
    fn keeps_every_digit() {
        assert_eq!(shown("0.1"), "0.1");
        assert_eq!(shown("0.3"), "0.3");
        assert_eq!(shown("12345678901234567.89"), "12345678901234567.89");
        assert_eq!(shown("0.1000000000000000055"), "0.1000000000000000055");
        assert_eq!(
            shown("79228162514264337593543950335"),
            "79228162514264337593543950335"
        );
        assert_eq!(
            shown("-0.0000000000000000000000000001"),
            "-0.0000000000000000000000000001"
        );
    }

    #[test]
    fn normalizes() {
        assert_eq!(shown("12.50"), "12.5");
        assert_eq!(shown("-0"), "0");
        assert_eq!(shown("-0.000"), "0");
        assert_eq!(shown("+007"), "7");
        assert_eq!(shown("1e3"), "1000");
        assert_eq!(shown("1.5E-2"), "0.015");
        assert_eq!(shown(".5"), "0.5");
        assert_eq!(shown("5."), "5");
        assert_eq!(shown("0e999999999"), "0");
        assert_eq!(shown("1.000000000000000000000000000000000"), "1");
    }

    #[test]
    fn refuses_what_does_not_fit() {
        for s in [
            "79228162514264337593543950336",
            "0.00000000000000000000000000001",
            "1.0000000000000000000000000000001",
            "1e29",
            "1e-29",
            "1e9999999999",
        ] {
            assert_eq!(parse(s), Err(DecimalError::OutOfPrecision(s.into())), "{s}");
        }
        for s in [
            "", "-", ".", "abc", "1.2.3", "NaN", "inf", "1e", "1e+", "0x10", " 1",
        ] {
            assert_eq!(parse(s), Err(DecimalError::NotANumber(s.into())), "{s}");
        }
    }

    #[test]
    fn json_numbers_keep_their_digits() {
        let n: serde_json::Number = "0.1000000000000000055".parse().unwrap();
        let d = from_json_number(&n).unwrap();
        assert_eq!(to_json_number(&d).as_str(), "0.1000000000000000055");
        assert_eq!(
            serde_json::to_string(&serde_json::Value::Number(to_json_number(&d))).unwrap(),
            "0.1000000000000000055"
        );
    }

    #[test]
    fn floats_read_as_their_shortest_form() {
        assert_eq!(from_f64(0.1).unwrap().to_string(), "0.1");
        assert_eq!(
            from_f64(0.1 + 0.2).unwrap().to_string(),
            "0.30000000000000004"
        );
        assert_eq!(from_f64(1e20).unwrap().to_string(), "100000000000000000000");
        assert_eq!(
            from_f64(1e300),
            Err(DecimalError::OutOfPrecision("1e300".into()))
        );
        assert_eq!(
            from_f64(1e-30),
            Err(DecimalError::OutOfPrecision(
                "0.000000000000000000000000000001".into()
            ))
        );
        assert!(from_f64(f64::NAN).is_err());
    }
}
