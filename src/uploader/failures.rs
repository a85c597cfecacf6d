//! The rows of a finished upload that failed, read back from its result file: every failed row
//! counted, the first few kept with their cells. A row failed when its `res` is neither `OK`
//! nor a "not run" of a cancelled upload and its `op` was not empty (an empty `op` is skipped).

use std::io::Read;

/// What [`read`] found.
#[derive(Debug, Default, PartialEq)]
pub struct Failures {
    /// The result file's header.
    pub columns: Vec<String>,
    /// Data rows that ran (failed or not; skipped and not-run rows are not counted).
    pub ran: i64,
    /// Failed rows, all counted.
    pub failed: i64,
    /// The first failed rows: line (data rows counted from 1), `res`, cells.
    pub rows: Vec<(i64, String, Vec<String>)>,
}

/// Reads a result CSV (in `encoding`, separated by `separator`), keeping the first `keep`
/// failed rows. Memory stays bounded whatever the file's size.
pub fn read(
    input: impl Read,
    separator: u8,
    encoding: &'static encoding_rs::Encoding,
    keep: usize,
) -> Result<Failures, csv::Error> {
    // The CSV reader splits bytes: UTF-16, whose separators are two bytes, is read as UTF-8.
    if !encoding.is_ascii_compatible() {
        let utf8 = encoding_rs_io::DecodeReaderBytesBuilder::new()
            .encoding(Some(encoding))
            .build(input);
        return read_in(utf8, separator, encoding_rs::UTF_8, keep);
    }
    read_in(input, separator, encoding, keep)
}

/// [`read`] of a file in an encoding that is ASCII-compatible.
fn read_in(
    input: impl Read,
    separator: u8,
    encoding: &'static encoding_rs::Encoding,
    keep: usize,
) -> Result<Failures, csv::Error> {
    let mut r = csv::ReaderBuilder::new()
        .delimiter(separator)
        .has_headers(false)
        .flexible(true)
        .from_reader(input);
    let text = |b: &[u8]| encoding.decode_without_bom_handling(b).0.into_owned();
    let mut out = Failures::default();
    let mut rec = csv::ByteRecord::new();
    let (mut res_at, mut op_at) = (0, None);
    let mut line = 0i64;
    while r.read_byte_record(&mut rec)? {
        if line == 0 {
            out.columns = rec.iter().map(text).collect();
            if let Some(first) = out.columns.first_mut() {
                *first = first.trim_start_matches('\u{feff}').to_string();
            }
            res_at = out.columns.iter().position(|c| c == "res").unwrap_or(0);
            op_at = out.columns.iter().position(|c| c == "op");
            line = 1;
            continue;
        }
        let at = line;
        line += 1;
        if rec.len() == 1 && rec[0].is_empty() {
            continue;
        }
        if op_at.is_some_and(|i| rec.get(i).is_none_or(|op| op.trim_ascii().is_empty())) {
            continue;
        }
        let res = text(rec.get(res_at).unwrap_or_default());
        if res.starts_with("not run") {
            continue;
        }
        out.ran += 1;
        if res == "OK" {
            continue;
        }
        out.failed += 1;
        if out.rows.len() < keep {
            out.rows.push((at, res, rec.iter().map(text).collect()));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_failed_rows_and_keeps_the_first() {
        let csv = "\u{feff}res;id;op;name\r\nOK;1;c;a\r\nname is required;;c;\r\n;;;skipped\r\n\
                   OK;2;c;b\r\nname too long;;c;xxxx\r\n";
        let f = read(csv.as_bytes(), b';', encoding_rs::UTF_8, 1).unwrap();
        assert_eq!(f.columns, ["res", "id", "op", "name"]);
        assert_eq!(f.ran, 4);
        assert_eq!(f.failed, 2);
        assert_eq!(
            f.rows,
            vec![(
                2,
                "name is required".to_string(),
                vec![
                    "name is required".to_string(),
                    String::new(),
                    "c".into(),
                    String::new()
                ]
            )]
        );
    }

    #[test]
    fn decodes_the_uploads_encoding_and_skips_rows_not_run() {
        let (bytes, _, _) = encoding_rs::WINDOWS_1252
            .encode("res,op,name\nbad café,c,x\nnot run (cancelled),c,y\n");
        let f = read(&bytes[..], b',', encoding_rs::WINDOWS_1252, 100).unwrap();
        assert_eq!(f.failed, 1);
        assert_eq!(f.ran, 1);
        assert_eq!(f.rows[0].1, "bad café");
    }

    #[test]
    fn reads_utf16_with_or_without_its_mark() {
        let text = "res;op;name\r\nOK;c;a\r\nzu lang: Grüße;c;Grüße\r\n";
        for (encoding, mark) in [
            (encoding_rs::UTF_16LE, &[0xFF, 0xFE][..]),
            (encoding_rs::UTF_16BE, &[0xFE, 0xFF][..]),
            (encoding_rs::UTF_16LE, &[][..]),
        ] {
            let mut bytes = mark.to_vec();
            crate::uploader::validate::encode(text, encoding, &mut bytes);
            let f = read(&bytes[..], b';', encoding, 10).unwrap();
            assert_eq!(f.columns, ["res", "op", "name"], "{encoding:?} {mark:?}");
            assert_eq!((f.ran, f.failed), (2, 1));
            assert_eq!(f.rows[0].0, 2);
            assert_eq!(f.rows[0].2, ["zu lang: Grüße", "c", "Grüße"]);
        }
    }
}
