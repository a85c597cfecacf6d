//! The strict RFC 4180 reading of a file's UTF-8 text, fed in pieces: the separator chosen
//! from the header line, quoting, and every record's number of fields, naming the line of the
//! first problem.

use super::UploadError;

#[derive(Clone, Copy, PartialEq)]
enum State {
    FieldStart,
    Unquoted,
    Quoted,
    QuoteInQuoted,
}

/// A streaming strict CSV checker over UTF-8 text.
pub(super) struct Checker {
    state: State,
    pub(super) sep: Option<u8>,
    header_line: Vec<u8>,
    header_fields: Option<usize>,
    fields: usize,
    record_has_content: bool,
    /// Data records seen (the header is record 0).
    pub(super) record: u64,
    quote_started_record: u64,
    pending_cr: bool,
    /// Where the byte being read is, and where the record being read began, counted in bytes
    /// from the start of the text.
    at: u64,
    record_start: u64,
    /// The bytes of the text fed before the current piece.
    base: u64,
    /// The most bytes a data record may have, its line end included: a record is one call,
    /// bounded as the body of one call is, and the rows that run read each record whole.
    max_record: usize,
}

/// The longest header line taken, in bytes. A header names an entity's columns, each a field
/// name of at most 63 characters, so a longer first line is not a header (a file without one,
/// or not a CSV file); it is refused as soon as it is seen, before it is held any longer.
pub(super) const MAX_HEADER_LINE: usize = 1 << 20;

pub(super) fn err(line: u64, msg: impl Into<String>) -> UploadError {
    UploadError::BadFile(if line == 0 {
        format!("header: {}", msg.into())
    } else {
        format!("line {line}: {}", msg.into())
    })
}

impl Checker {
    /// A checker that refuses a data record longer than `max_record` bytes.
    pub(super) fn new(max_record: usize) -> Checker {
        Checker {
            state: State::FieldStart,
            sep: None,
            header_line: Vec::new(),
            header_fields: None,
            fields: 0,
            record_has_content: false,
            record: 0,
            quote_started_record: 0,
            pending_cr: false,
            at: 0,
            record_start: 0,
            base: 0,
            max_record,
        }
    }

    pub(super) fn feed(&mut self, text: &[u8]) -> Result<(), UploadError> {
        self.read(text)?;
        self.base += text.len() as u64;
        // A record that has not ended yet is refused as soon as it is too long.
        self.at = self.base;
        self.bounded()
    }

    fn read(&mut self, text: &[u8]) -> Result<(), UploadError> {
        let mut i = 0;
        while i < text.len() {
            self.at = self.base + i as u64;
            if self.sep.is_none() {
                // Collect the header line to choose the separator.
                let b = text[i];
                if b == b'\n' {
                    self.choose_separator();
                    let line = std::mem::take(&mut self.header_line);
                    for &c in &line {
                        self.byte(c)?;
                    }
                    self.byte(b'\n')?;
                } else if self.header_line.len() < MAX_HEADER_LINE {
                    self.header_line.push(b);
                } else {
                    return Err(err(
                        0,
                        format!(
                            "the first line is longer than {} KiB: a header of column names \
                             is never that long",
                            MAX_HEADER_LINE / 1024
                        ),
                    ));
                }
                i += 1;
                continue;
            }
            let rest = &text[i..];
            if let Some(taken) = self.whole_line(rest)? {
                i += taken;
                continue;
            }
            // Runs of bytes that change nothing are skipped at once: inside a quoted field
            // every byte but a quote, inside an unquoted one every byte but the separator, a
            // quote and a line end.
            let plain = match self.state {
                _ if self.pending_cr => Some(0),
                State::Quoted => memchr::memchr(b'"', rest),
                State::Unquoted => {
                    let sep = self.sep.unwrap_or(b',');
                    rest.iter()
                        .position(|&b| b == sep || matches!(b, b'"' | b'\r' | b'\n'))
                }
                _ => Some(0),
            }
            .unwrap_or(rest.len());
            if plain > 0 {
                i += plain;
                continue;
            }
            self.byte(text[i])?;
            i += 1;
        }
        Ok(())
    }

    /// At the start of a record, a whole line of `text` without a quote or a carriage return
    /// is the record, checked at once: its fields are its separators and one. The bytes taken
    /// (the line and its end), or None when the byte-by-byte reading must go on.
    fn whole_line(&mut self, text: &[u8]) -> Result<Option<usize>, UploadError> {
        let at_start = self.state == State::FieldStart
            && self.fields == 0
            && !self.record_has_content
            && !self.pending_cr;
        if !at_start {
            return Ok(None);
        }
        let Some(end) = memchr::memchr(b'\n', text) else {
            return Ok(None);
        };
        let line = &text[..end];
        if memchr::memchr2(b'"', b'\r', line).is_some() {
            return Ok(None);
        }
        if !line.is_empty() {
            let sep = self.sep.unwrap_or(b',');
            self.fields = line.iter().filter(|&&b| b == sep).count();
            self.record_has_content = true;
        }
        self.at += end as u64;
        self.end_record()?;
        Ok(Some(end + 1))
    }

    fn choose_separator(&mut self) {
        self.sep = Some(crate::input::separator(&self.header_line));
    }

    /// Refuses the data record being read once it is longer than a record may be, up to the
    /// byte at [`Checker::at`] (the header has a limit of its own, [`MAX_HEADER_LINE`]).
    fn bounded(&self) -> Result<(), UploadError> {
        if self.header_fields.is_none() || self.at - self.record_start <= self.max_record as u64 {
            return Ok(());
        }
        Err(UploadError::TooLarge(format!(
            "the file cannot be used: line {}: the row is longer than {}, the most one call \
             takes (`--max-body-bytes`, `ENTISERVE_MAX_BODY_BYTES`); nothing was applied",
            self.record,
            crate::input::size_text(self.max_record)
        )))
    }

    fn byte(&mut self, c: u8) -> Result<(), UploadError> {
        let sep = self.sep.unwrap_or(b',');
        if self.pending_cr {
            self.pending_cr = false;
            if c != b'\n' {
                return Err(err(
                    self.record,
                    "a carriage return not followed by a line feed",
                ));
            }
        }
        match (self.state, c) {
            (State::Quoted, b'"') => self.state = State::QuoteInQuoted,
            (State::Quoted, _) => {}
            (State::QuoteInQuoted, b'"') => self.state = State::Quoted,
            (State::FieldStart, b'"') => {
                self.state = State::Quoted;
                self.record_has_content = true;
                self.quote_started_record = self.record;
            }
            (_, b'\r') => self.pending_cr = true,
            (_, b'\n') => self.end_record()?,
            (_, c) if c == sep => {
                self.fields += 1;
                self.record_has_content = true;
                self.state = State::FieldStart;
            }
            (State::QuoteInQuoted, _) => {
                return Err(err(
                    self.record,
                    "text after a closing quote (quotes inside a field are doubled: \"\")",
                ));
            }
            (State::Unquoted, b'"') => {
                return Err(err(
                    self.record,
                    "a quote inside an unquoted field (quote the whole field and double the quote)",
                ));
            }
            (_, _) => {
                self.state = State::Unquoted;
                self.record_has_content = true;
            }
        }
        Ok(())
    }

    /// Ends the record whose line end (or the text's end) is at [`Checker::at`].
    fn end_record(&mut self) -> Result<(), UploadError> {
        // The record ends with its line end.
        self.at += 1;
        self.bounded()?;
        self.record_start = self.at;
        let fields = self.fields + 1;
        let had_content = self.record_has_content;
        self.fields = 0;
        self.record_has_content = false;
        self.state = State::FieldStart;
        if !had_content {
            return Ok(()); // blank lines are skipped
        }
        match self.header_fields {
            None => self.header_fields = Some(fields),
            Some(n) if fields != n => {
                return Err(err(
                    self.record,
                    format!("{fields} fields, but the header has {n}"),
                ));
            }
            Some(_) => {}
        }
        self.record += 1;
        Ok(())
    }

    pub(super) fn finish(&mut self) -> Result<(), UploadError> {
        // The last record, if it has no line end, ends with the text (one byte short of where
        // a line end would have been counted).
        self.at = self.base.saturating_sub(1);
        if self.sep.is_none() {
            self.choose_separator();
            let line = std::mem::take(&mut self.header_line);
            for &c in &line {
                self.byte(c)?;
            }
        }
        if matches!(self.state, State::Quoted) {
            return Err(err(
                self.quote_started_record,
                "a quoted field is never closed",
            ));
        }
        self.pending_cr = false;
        self.end_record()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What checking `text` fed in pieces of `piece` bytes comes to: the records seen, or
    /// the problem.
    fn fed(text: &[u8], piece: usize) -> Result<u64, String> {
        fed_limited(text, piece, usize::MAX)
    }

    /// [`fed`] with data records of at most `max_record` bytes.
    fn fed_limited(text: &[u8], piece: usize, max_record: usize) -> Result<u64, String> {
        let mut c = Checker::new(max_record);
        for part in text.chunks(piece) {
            c.feed(part).map_err(|e| e.to_string())?;
        }
        c.finish().map_err(|e| e.to_string())?;
        Ok(c.record)
    }

    #[test]
    fn runs_skipped_at_once_check_as_byte_by_byte() {
        let texts: [&[u8]; 14] = [
            b"op;name;description\r\nc;\"a;b\";\"line\nbreak \"\"q\"\"\"\r\n\nc;x;\n",
            b"op,name\nc,a long unquoted value with spaces\nc,\"quoted, with a comma\"\n",
            b"op,name\nc,x\nc,\"open\n",
            b"op,name\nc,x\nc,x,y\n",
            b"op,name\nc,a\"b\n",
            b"op,name\nc,\"a\"b\n",
            b"op,name\nc,a\rb\n",
            b"op,name\r\nc,\"a\r\nb\"\r\nc,last",
            b"op,name\nc,\"\"\"\"\nc,\"\"\n",
            b"op,name\nc,x\n\n,\n\nc,y\nc,\"q\"\nc,z\n",
            b"op,name\nc,x\n,,\nc,y\n",
            b"op,name\nc,x\nc,y\r\nc,z\n",
            b"op;name\nc;x,y\nc;\"a\nb\"\nc;z;w\n",
            b"op,name\nc,x\n\"c\",y\nc",
        ];
        for text in texts {
            let whole = fed(text, text.len().max(1));
            for piece in [1, 2, 3, 7] {
                assert_eq!(fed(text, piece), whole, "{}", String::from_utf8_lossy(text));
            }
        }
        assert_eq!(fed(texts[1], 1000), Ok(3));
        assert!(fed(texts[6], 1000).unwrap_err().contains("carriage return"));
    }

    /// A first line of up to [`MAX_HEADER_LINE`] bytes is a header like any other; one byte
    /// more is refused, whatever the pieces it comes in, and without a line end too.
    #[test]
    fn a_first_line_longer_than_any_header_is_refused() {
        let with_name = |len: usize, end: &[u8]| {
            let mut t = b"op,".to_vec();
            t.resize(len, b'n');
            t.extend_from_slice(end);
            t
        };
        for piece in [7, 4096, MAX_HEADER_LINE + 10] {
            assert_eq!(fed(&with_name(MAX_HEADER_LINE, b"\nc,x\n"), piece), Ok(2));
            for end in [&b"\nc,x\n"[..], b""] {
                let e = fed(&with_name(MAX_HEADER_LINE + 1, end), piece).unwrap_err();
                assert!(
                    e.contains("header: the first line is longer than 1024 KiB"),
                    "{e}"
                );
            }
        }
    }

    /// A data record of up to the limit, its line end included, is taken and one byte more
    /// is refused, whatever the pieces it comes in: unquoted, quoted over several lines, with
    /// CRLF line ends, and as the last line without an end. The header is bounded by its own
    /// limit, not this one.
    #[test]
    fn a_record_longer_than_the_limit_is_refused() {
        let limit = 40;
        let files = |len: usize| -> [Vec<u8>; 4] {
            let v = |n: usize| "v".repeat(n);
            let quoted = format!("\"{}\n{}\"\"\"", "q".repeat(len - 9), "w");
            [
                format!("op,name\nc,x\nc,{}\nc,y\n", v(len - 3)),
                format!("op,name\nc,x\nc,{quoted}\nc,y\n"),
                format!("op,name\r\nc,x\r\nc,{}\r\nc,y\r\n", v(len - 4)),
                format!("op,name\nc,x\nc,{}", v(len - 2)),
            ]
            .map(String::into_bytes)
        };
        for piece in [1, 3, 7, 4096] {
            for (i, text) in files(limit).iter().enumerate() {
                // The header and the data records.
                let rows = if i == 3 { 3 } else { 4 };
                assert_eq!(fed_limited(text, piece, limit), Ok(rows), "file {i}");
            }
            for (i, text) in files(limit + 1).iter().enumerate() {
                let e = fed_limited(text, piece, limit).unwrap_err();
                assert!(
                    e.contains("line 2: the row is longer than 40 bytes"),
                    "file {i}, pieces of {piece}: {e}"
                );
            }
            let header = format!("op,{}\nc,x\n", "n".repeat(100));
            assert_eq!(fed_limited(header.as_bytes(), piece, limit), Ok(2));
        }
    }
}
