//! The whole-file check that runs before any row: decoding from the declared encoding into a
//! UTF-8 working copy, and a strict RFC 4180 reading of every record (separator from the
//! header, quoting, field counts) that names the line of the first problem.

use super::UploadError;
use encoding_rs::{CoderResult, DecoderResult, Encoding};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

mod records;
use records::{Checker, err};

/// What the check learned about a file.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Layout {
    /// The header's column names, trimmed.
    pub header: Vec<String>,
    /// One of [`crate::input::SEPARATORS`].
    pub separator: u8,
    /// Number of data records.
    pub rows: u64,
    /// Whether the file began with its encoding's byte-order mark (the result file then
    /// does too).
    pub bom: bool,
}

/// Checks the file at `src` whole and leaves its UTF-8 working copy at `out` (see [`Check`]);
/// a data record may have at most `max_record` bytes.
pub fn check(
    src: &Path,
    out: &Path,
    encoding: &'static Encoding,
    max_record: usize,
) -> Result<Layout, UploadError> {
    let mut input = std::fs::File::open(src).map_err(UploadError::from)?;
    let mut check = Check::new(encoding, out, max_record);
    let mut inbuf = vec![0u8; 256 * 1024];
    loop {
        let n = input.read(&mut inbuf).map_err(UploadError::from)?;
        if n == 0 {
            break;
        }
        check.feed(&inbuf[..n]);
    }
    check.finish(src)
}

/// The whole-file check, fed a file's bytes piece by piece as it is read back ([`check`]) or
/// as it arrives ([`crate::uploader::intake`]), then finished once the whole file is at its
/// path. It decodes into a UTF-8 working copy; a UTF-8 file without a byte-order mark is its
/// own working copy: it is checked as it is read and then linked at `out` (copied where the
/// file system cannot link), instead of being written out a second time. After the first
/// problem the rest is not looked at. The working copy is removed unless the check finished
/// well.
pub struct Check {
    encoding: &'static Encoding,
    decoder: encoding_rs::Decoder,
    checker: Checker,
    outbuf: Vec<u8>,
    out: PathBuf,
    /// The first bytes, held until there are enough to see whether a mark begins the file.
    head: Vec<u8>,
    /// Once the first bytes were seen: the working copy being written, or None when the file
    /// is its own.
    copy: Option<Option<std::io::BufWriter<std::fs::File>>>,
    bom: bool,
    /// UTF-8 bytes decoded so far.
    decoded: u64,
    /// Set when bytes did not decode: the check stopped before them.
    malformed: bool,
    failed: Option<UploadError>,
    /// Whether the working copy stays (the check finished well).
    kept: bool,
}

impl Check {
    /// A check of a file in `encoding` whose working copy goes to `out`, refusing a data
    /// record longer than `max_record` bytes (in UTF-8).
    pub fn new(encoding: &'static Encoding, out: &Path, max_record: usize) -> Check {
        Check {
            encoding,
            decoder: encoding.new_decoder_with_bom_removal(),
            checker: Checker::new(max_record),
            outbuf: vec![0u8; 1024 * 1024],
            out: out.to_path_buf(),
            head: Vec::new(),
            copy: None,
            bom: false,
            decoded: 0,
            malformed: false,
            failed: None,
            kept: false,
        }
    }

    /// The next bytes of the file.
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.failed.is_some() || self.malformed {
            return;
        }
        if self.copy.is_some() {
            self.decode(bytes, false);
            return;
        }
        self.head.extend_from_slice(bytes);
        if self.head.len() >= 3 {
            self.begin();
        }
    }

    /// Decides from the first bytes whether the file is its own working copy, and checks them.
    fn begin(&mut self) {
        let head = std::mem::take(&mut self.head);
        let mark = bom_of(self.encoding);
        self.bom = !mark.is_empty() && head.starts_with(mark);
        // UTF-8 without a mark decodes to itself.
        let own = self.encoding == encoding_rs::UTF_8 && head.len() >= 3 && !self.bom;
        self.copy = Some(if own {
            None
        } else {
            match std::fs::File::create(&self.out) {
                Ok(f) => Some(std::io::BufWriter::new(f)),
                Err(e) => {
                    self.failed = Some(e.into());
                    return;
                }
            }
        });
        self.decode(&head, false);
    }

    fn decode(&mut self, mut chunk: &[u8], last: bool) {
        loop {
            let (res, read, written) =
                self.decoder
                    .decode_to_utf8_without_replacement(chunk, &mut self.outbuf, last);
            let text = &self.outbuf[..written];
            if let Err(e) = self.checker.feed(text) {
                self.failed = Some(e);
                return;
            }
            if let Some(Some(w)) = self.copy.as_mut()
                && let Err(e) = w.write_all(text)
            {
                self.failed = Some(e.into());
                return;
            }
            self.decoded += written as u64;
            chunk = &chunk[read..];
            match res {
                DecoderResult::InputEmpty => return,
                DecoderResult::OutputFull => continue,
                DecoderResult::Malformed(_, _) => {
                    self.malformed = true;
                    return;
                }
            }
        }
    }

    /// The file's layout, once every byte of it was fed and it is whole at `src`; its working
    /// copy is then at `out`.
    pub fn finish(mut self, src: &Path) -> Result<Layout, UploadError> {
        if self.copy.is_none() && self.failed.is_none() {
            self.begin();
        }
        if self.failed.is_none() && !self.malformed {
            self.decode(&[], true);
        }
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        let copy = self.copy.take().flatten();
        if self.malformed {
            // What was decoded so far is in the copy, or is the file itself.
            let text = match copy {
                Some(w) => {
                    w.into_inner()
                        .map_err(|e| UploadError::from(e.into_error()))?;
                    self.out.as_path()
                }
                None => src,
            };
            return Err(not_valid_in(text, self.decoded, self.encoding));
        }
        self.checker.finish()?;
        match copy {
            Some(w) => {
                w.into_inner()
                    .map_err(|e| UploadError::from(e.into_error()))?;
            }
            None => link_or_copy(src, &self.out).map_err(UploadError::from)?,
        }
        let separator = self.checker.sep.unwrap_or(b',');
        let header = read_header(&self.out, separator)?;
        self.kept = true;
        Ok(Layout {
            header,
            separator,
            rows: self.checker.record.saturating_sub(1),
            bom: self.bom,
        })
    }
}

impl Drop for Check {
    fn drop(&mut self) {
        if !self.kept {
            self.copy = None;
            let _ = std::fs::remove_file(&self.out);
        }
    }
}

/// `src` linked at `out`, or copied there when the file system cannot link it.
fn link_or_copy(src: &Path, out: &Path) -> std::io::Result<()> {
    match std::fs::hard_link(src, out) {
        Ok(()) => Ok(()),
        Err(_) => std::fs::copy(src, out).map(|_| ()),
    }
}

/// The refusal of a file with bytes that are not valid in `encoding`, naming the line as an
/// editor counts it (the header is the first): one more than the line feeds in the first
/// `decoded` bytes of `text`, the UTF-8 text decoded before the bad bytes.
fn not_valid_in(text: &Path, decoded: u64, encoding: &'static Encoding) -> UploadError {
    let mut before = Vec::new();
    let _ = std::fs::File::open(text).and_then(|f| f.take(decoded).read_to_end(&mut before));
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let hint = if encoding == encoding_rs::UTF_8 {
        "if the file was saved in another encoding, name it in the `encoding` option \
         (for example windows-1252, ISO-8859-1 or UTF-16LE)"
    } else {
        "name the file's real encoding in the `encoding` option"
    };
    UploadError::BadFile(format!(
        "line {line} of the file: bytes that are not valid {}; {hint}",
        encoding.name()
    ))
}

fn read_header(utf8: &Path, separator: u8) -> Result<Vec<String>, UploadError> {
    let mut r = csv::ReaderBuilder::new()
        .delimiter(separator)
        .has_headers(false)
        .from_path(utf8)
        .map_err(UploadError::from)?;
    let mut rec = csv::StringRecord::new();
    match r.read_record(&mut rec) {
        Ok(true) => Ok(rec.iter().map(|h| h.trim().to_string()).collect()),
        Ok(false) => Err(err(0, "the file is empty")),
        Err(e) => Err(err(0, e.to_string())),
    }
}

/// The byte-order mark a file in `encoding` may start with: none for encodings other than
/// UTF-8 and UTF-16.
pub fn bom_of(encoding: &'static Encoding) -> &'static [u8] {
    if encoding == encoding_rs::UTF_8 {
        &[0xEF, 0xBB, 0xBF]
    } else if encoding == encoding_rs::UTF_16LE {
        &[0xFF, 0xFE]
    } else if encoding == encoding_rs::UTF_16BE {
        &[0xFE, 0xFF]
    } else {
        &[]
    }
}

/// Encodes UTF-8 text into `encoding` (unmappable characters become numeric references).
pub fn encode(text: &str, encoding: &'static Encoding, out: &mut Vec<u8>) {
    if encoding == encoding_rs::UTF_8 {
        out.extend_from_slice(text.as_bytes());
        return;
    }
    // The Encoding Standard has no UTF-16 encoders (encoding_rs writes UTF-8 for both labels),
    // so UTF-16 is written here.
    if encoding == encoding_rs::UTF_16LE || encoding == encoding_rs::UTF_16BE {
        let little = encoding == encoding_rs::UTF_16LE;
        out.reserve(text.len() * 2);
        for unit in text.encode_utf16() {
            out.extend_from_slice(&if little {
                unit.to_le_bytes()
            } else {
                unit.to_be_bytes()
            });
        }
        return;
    }
    let mut enc = encoding.new_encoder();
    let mut buf = vec![0u8; text.len() + 16];
    let mut rest = text;
    loop {
        let (res, read, written, _) = enc.encode_from_utf8(rest, &mut buf, false);
        out.extend_from_slice(&buf[..written]);
        rest = &rest[read..];
        match res {
            CoderResult::InputEmpty => break,
            CoderResult::OutputFull => buf.resize(buf.len() * 2, 0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(text: &[u8]) -> Result<Layout, String> {
        let dir = tempfile::tempdir().unwrap();
        let (src, out) = (dir.path().join("in"), dir.path().join("out"));
        std::fs::write(&src, text).unwrap();
        check(&src, &out, encoding_rs::UTF_8, usize::MAX).map_err(|e| e.to_string())
    }

    #[test]
    fn accepts_rfc4180() {
        let l = run(
            b"\xEF\xBB\xBFop;name;description\r\nc;\"a;b\";\"line\nbreak \"\"q\"\"\"\r\n\nc;x;\n",
        )
        .unwrap();
        assert_eq!(l.header, ["op", "name", "description"]);
        assert_eq!((l.separator, l.rows, l.bom), (b';', 2, true));
        assert_eq!(run(b"op,name\nc,x").unwrap().rows, 1);
    }

    /// A file checked as it arrives, in pieces of any size, comes to what it comes to read
    /// back whole: the same layout and working copy, or the same refusal, with no working
    /// copy left after one.
    #[test]
    fn a_file_fed_as_it_arrives_is_checked_as_read_whole() {
        let files: [(&[u8], &'static Encoding); 6] = [
            (
                b"\xEF\xBB\xBFop;name\r\nc;\"a;b\"\r\nc;x\n",
                encoding_rs::UTF_8,
            ),
            (b"op,name\nc,x", encoding_rs::UTF_8),
            (b"op;name\nc;Caf\xe9\n", encoding_rs::WINDOWS_1252),
            (b"op;name\nc;Caf\xe9\n", encoding_rs::UTF_8),
            (b"op,name\nc,\"open\n", encoding_rs::UTF_8),
            (b"op", encoding_rs::UTF_8),
        ];
        for (text, encoding) in files {
            let dir = tempfile::tempdir().unwrap();
            let src = dir.path().join("in");
            std::fs::write(&src, text).unwrap();
            let whole = check(&src, &dir.path().join("whole"), encoding, usize::MAX);
            let copy = std::fs::read(dir.path().join("whole")).ok();
            for piece in [1, 2, 5, text.len()] {
                let out = dir.path().join(format!("fed{piece}"));
                let mut c = Check::new(encoding, &out, usize::MAX);
                for part in text.chunks(piece) {
                    c.feed(part);
                }
                let got = c.finish(&src);
                match (&whole, &got) {
                    (Ok(w), Ok(g)) => {
                        assert_eq!(
                            (&w.header, w.separator, w.rows, w.bom),
                            (&g.header, g.separator, g.rows, g.bom)
                        );
                    }
                    (Err(w), Err(g)) => assert_eq!(w.to_string(), g.to_string()),
                    _ => panic!("{text:?} in {piece}: {whole:?} against {got:?}"),
                }
                assert_eq!(std::fs::read(&out).ok(), copy, "{text:?} in {piece}");
            }
        }
    }

    /// The working copy `check` leaves of `text` in `encoding`, or the problem.
    fn copy_of(text: &[u8], encoding: &'static Encoding) -> Result<Vec<u8>, String> {
        let dir = tempfile::tempdir().unwrap();
        let (src, out) = (dir.path().join("in"), dir.path().join("out"));
        std::fs::write(&src, text).unwrap();
        check(&src, &out, encoding, usize::MAX).map_err(|e| e.to_string())?;
        Ok(std::fs::read(&out).unwrap())
    }

    #[test]
    fn the_working_copy_is_the_text_in_utf8_linked_or_written() {
        // UTF-8 without a byte-order mark: the file itself.
        let plain = b"op,name\nc,caf\xC3\xA9\n";
        assert_eq!(copy_of(plain, encoding_rs::UTF_8).unwrap(), plain);
        // With one: written without it.
        let marked = b"\xEF\xBB\xBFop,name\nc,x\n";
        assert_eq!(
            copy_of(marked, encoding_rs::UTF_8).unwrap(),
            b"op,name\nc,x\n"
        );
        // Another encoding: decoded.
        let latin = b"op,name\nc,caf\xE9\n";
        assert_eq!(
            copy_of(latin, encoding_rs::WINDOWS_1252).unwrap(),
            "op,name\nc,caf\u{e9}\n".as_bytes()
        );
        // Shorter than a byte-order mark.
        assert_eq!(copy_of(b"a\n", encoding_rs::UTF_8).unwrap(), b"a\n");
        // Bad bytes past the first read name their line, with and without a mark.
        let mut long = b"op,name\n".to_vec();
        for i in 0..40_000 {
            long.extend_from_slice(format!("c,row {i}\n").as_bytes());
        }
        assert!(long.len() > 256 * 1024);
        long.extend_from_slice(b"c,\xff\n");
        let bad = copy_of(&long, encoding_rs::UTF_8).unwrap_err();
        assert!(bad.contains(": line 40002 of the file: "), "{bad}");
        let marked: Vec<u8> = [&b"\xEF\xBB\xBF"[..], &long].concat();
        let bad = copy_of(&marked, encoding_rs::UTF_8).unwrap_err();
        assert!(bad.contains(": line 40002 of the file: "), "{bad}");
    }

    #[test]
    fn names_the_line_of_a_problem() {
        assert!(
            run(b"op,name\nc,x\nc,\"open\n")
                .unwrap_err()
                .contains("line 2")
        );
        assert!(
            run(b"op,name\nc,x\nc,x,y\n")
                .unwrap_err()
                .contains("line 2: 3 fields")
        );
        assert!(run(b"op,name\nc,a\"b\n").unwrap_err().contains("line 1"));
        assert!(run(b"op,name\nc,\"a\"b\n").unwrap_err().contains("line 1"));
        let bad = run(b"op,name\nc,ok\nc,\xff\n").unwrap_err();
        assert!(bad.contains(": line 3 of the file: "), "{bad}");
        assert!(bad.contains("`encoding`"), "{bad}");
        let bad = run(b"op,name\nc,\"two\nlines\"\nc,\xff\n").unwrap_err();
        assert!(bad.contains(": line 4 of the file: "), "{bad}");
        assert!(run(b"").unwrap_err().contains("header"));
    }

    #[test]
    fn utf16_is_written_as_utf16_and_its_mark_is_kept() {
        let text = "res;op;name\r\nOK;c;Grüße 𝄞\r\n";
        for (encoding, mark) in [
            (encoding_rs::UTF_16LE, [0xFF, 0xFE]),
            (encoding_rs::UTF_16BE, [0xFE, 0xFF]),
        ] {
            let mut bytes = Vec::new();
            encode(text, encoding, &mut bytes);
            let (back, bad) = encoding.decode_without_bom_handling(&bytes);
            assert!(!bad, "{encoding:?}");
            assert_eq!(back, text);
            assert_eq!(bytes.len(), text.encode_utf16().count() * 2);
            assert_eq!(bom_of(encoding), mark);
            let dir = tempfile::tempdir().unwrap();
            let (src, out) = (dir.path().join("in"), dir.path().join("out"));
            std::fs::write(&src, [&mark[..], &bytes].concat()).unwrap();
            let l = check(&src, &out, encoding, usize::MAX).unwrap();
            assert!(l.bom, "{encoding:?}");
            assert_eq!(std::fs::read_to_string(&out).unwrap(), text);
            std::fs::write(&src, &bytes).unwrap();
            assert!(
                !check(&src, &out, encoding, usize::MAX).unwrap().bom,
                "{encoding:?}"
            );
        }
    }
}
