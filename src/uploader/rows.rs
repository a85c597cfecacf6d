//! One CSV row: its system columns, the call it stands for, and its cells in the result file.
//! Cells are read with [`csvsafe::unescape`] and echoed with [`csvsafe`]'s escaping, so that
//! a result opened in a spreadsheet runs no formula and can be uploaded again as it is;
//! cells of secret fields are blank in the result.

use crate::csvsafe;
use crate::engine::{Call, CallError, Op, prepare, render};
use crate::schema::{Entity, format};
use serde_json::Value as Json;
use std::borrow::Cow;

/// Where the system columns are, and which columns are fields.
#[derive(Debug, Clone)]
pub struct Columns {
    pub names: Vec<String>,
    pub op: usize,
    pub id: Option<usize>,
    pub res: Option<usize>,
    /// Secret columns hold sealed values ([`crate::engine::secrets`]).
    pub sealed: bool,
    /// What each column holds, by position.
    pub kinds: Vec<Kind>,
    /// The positions of the field columns (all but `op`, `id` and `res`).
    fields: Vec<usize>,
    /// For each field column, the position of its field among the entity's fields (`None`
    /// for a name that is no field), found once for every row.
    located: Vec<Option<usize>>,
    /// The field columns' names in order, each with a null: the parameters of a row whose
    /// every field cell is filled start as a copy of it (see [`prepare::coerce_into`]).
    template: serde_json::Map<String, Json>,
}

/// What a column holds, for echoing its cells into the result file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `res`, `op`, `id`, or a field that is not text (number, boolean, date, reference).
    Plain,
    /// A string, text or enum field.
    Text,
    /// A secret field (a password): never echoed.
    Secret,
}

impl Kind {
    /// The result-file cell of an uploaded cell of this kind.
    fn echo(self, cell: &str) -> Cow<'_, str> {
        match self {
            Kind::Secret => Cow::Borrowed(""),
            Kind::Text => csvsafe::escape(csvsafe::unescape(cell)),
            Kind::Plain => csvsafe::escape_plain(csvsafe::unescape(cell)),
        }
    }
}

impl Columns {
    /// Checks a header against an entity: system columns `res`, `op`, `id`; every other column
    /// must be a field.
    pub fn from_header(header: &[String], e: &Entity) -> Result<Columns, String> {
        let mut op = None;
        let mut id = None;
        let mut res = None;
        for (i, h) in header.iter().enumerate() {
            if header[..i].contains(h) {
                return Err(format!(
                    "header, column {}: `{}` appears twice",
                    i + 1,
                    format::shown(h)
                ));
            }
            match h.as_str() {
                "op" => op = Some(i),
                "id" => id = Some(i),
                "res" => res = Some(i),
                "" => return Err(format!("header, column {}: a column has no name", i + 1)),
                name if e.field(name).is_none() => return Err(not_a_field(i, name, header, e)),
                _ => {}
            }
        }
        let op = op.ok_or("header: the `op` column is missing")?;
        let kinds = header
            .iter()
            .map(|h| match e.field(h) {
                Some(f) if f.secret => Kind::Secret,
                Some(f) if render::is_text(f) => Kind::Text,
                _ => Kind::Plain,
            })
            .collect();
        Ok(Columns::new(header.to_vec(), op, id, res, kinds, &e.fields))
    }

    /// The columns of a checked header: `names` in order, where the system columns are, what
    /// each column holds, and the entity's fields `of`, which the other columns name.
    pub fn new(
        names: Vec<String>,
        op: usize,
        id: Option<usize>,
        res: Option<usize>,
        kinds: Vec<Kind>,
        of: &[crate::schema::Field],
    ) -> Columns {
        let fields: Vec<usize> = (0..names.len())
            .filter(|i| *i != op && Some(*i) != id && Some(*i) != res)
            .collect();
        let located = crate::schema::positions(of, fields.iter().map(|&i| &names[i])).collect();
        let template = fields
            .iter()
            .map(|&i| (names[i].clone(), Json::Null))
            .collect();
        Columns {
            names,
            op,
            id,
            res,
            sealed: false,
            kinds,
            fields,
            located,
            template,
        }
    }

    /// Each field column's name with its cell in `rec`, unescaped.
    fn cells<'a>(
        &'a self,
        rec: &'a csv::StringRecord,
    ) -> impl Iterator<Item = (&'a String, &'a str)> {
        self.fields
            .iter()
            .map(|&i| (&self.names[i], csvsafe::unescape(rec.get(i).unwrap_or(""))))
    }

    /// The parameters of `rec`'s field cells, as [`prepare::coerce_strings`] makes them (an
    /// empty cell gives none). A record with every field cell filled fills a copy of the
    /// template instead, which hashes no name.
    fn params(
        &self,
        e: &Entity,
        rec: &csv::StringRecord,
    ) -> Result<serde_json::Map<String, Json>, CallError> {
        // A cell is empty unescaped only when it is empty as read.
        if self
            .fields
            .iter()
            .all(|&i| !rec.get(i).unwrap_or("").is_empty())
        {
            let mut params = self.template.clone();
            let fields = self.located.iter().map(|at| at.map(|i| &e.fields[i]));
            prepare::coerce_into(&mut params, fields.zip(self.cells(rec).map(|(_, v)| v)))?;
            return Ok(params);
        }
        prepare::coerce_strings(e, self.cells(rec).filter(|(_, v)| !v.is_empty()))
    }

    /// Header of the result file: the input's columns, `res` first when absent, then `id`
    /// when absent (so created ids can be filled in).
    pub fn result_header(&self) -> Vec<String> {
        let mut h = Vec::with_capacity(self.names.len() + 2);
        if self.res.is_none() {
            h.push("res".to_string());
        }
        if self.id.is_none() {
            h.push("id".to_string());
        }
        h.extend(self.names.iter().cloned());
        h
    }
}

/// Checks a file's header against `e` before any row runs ([`Columns::from_header`]), and
/// refuses a file that creates objects (a `c` row) without the column of a field every
/// create needs (required, without a default). The op column of the UTF-8 working copy
/// `utf8` is read only when such a column is missing. A header that does not fit, read from a
/// file in another encoding than UTF-8, says which one: a file in yet another encoding decodes
/// without an error into a header of strange characters.
pub fn check_columns(
    layout: &super::validate::Layout,
    e: &Entity,
    utf8: &std::path::Path,
    encoding: &'static encoding_rs::Encoding,
) -> Result<(), String> {
    let cols = Columns::from_header(&layout.header, e).map_err(|m| {
        if encoding == encoding_rs::UTF_8 {
            return m;
        }
        format!(
            "{m}; the file was read as {}: if it was saved in another encoding, name that one \
             in the `encoding` option",
            encoding.name()
        )
    })?;
    let missing: Vec<&str> = e
        .fields
        .iter()
        .filter(|f| f.needed() && !cols.names.contains(&f.name))
        .map(|f| f.name.as_str())
        .collect();
    if missing.is_empty() || !creates_any(utf8, layout.separator, cols.op)? {
        return Ok(());
    }
    let listed = missing
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let (column, is) = if missing.len() == 1 {
        ("column", "is")
    } else {
        ("columns", "are")
    };
    Err(format!(
        "header: the file has `c` rows, which create {} objects, but no {column} {listed}, \
         which {is} required: add the {column}; nothing was applied",
        e.name
    ))
}

/// Whether any record of the UTF-8 file `utf8` has `c` in column `op`.
fn creates_any(utf8: &std::path::Path, separator: u8, op: usize) -> Result<bool, String> {
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(separator)
        .flexible(true)
        .from_path(utf8)
        .map_err(|e| format!("the file cannot be read again: {e}"))?;
    let mut rec = csv::ByteRecord::new();
    loop {
        match reader.read_byte_record(&mut rec) {
            Ok(false) => return Ok(false),
            Ok(true) => {
                if rec
                    .get(op)
                    .is_some_and(|c| c.trim_ascii().eq_ignore_ascii_case(b"c"))
                {
                    return Ok(true);
                }
            }
            Err(e) => return Err(format!("the file cannot be read again: {e}")),
        }
    }
}

/// The refusal of header column `i`, `name`, which is no field of `e`: with the nearest
/// field or system column, and, when the header was read as one column, the separators a
/// file may use.
fn not_a_field(i: usize, name: &str, header: &[String], e: &Entity) -> String {
    let known = e
        .fields
        .iter()
        .map(|f| f.name.as_str())
        .chain(["op", "id", "res"]);
    let message = format::with_hint(
        format!(
            "header, column {}: `{}` is not a field of {}",
            i + 1,
            format::shown(name),
            e.name
        ),
        name,
        known,
    );
    if header.len() > 1 {
        return message;
    }
    format!("{message} (columns are separated by `,`, `;`, a tab or `|`)")
}

/// What a row asks for.
pub enum Work {
    /// Empty `op`: nothing runs, the row is copied as it is.
    Skip,
    Run(Call),
    Fail(CallError),
}

fn bad(msg: &str) -> CallError {
    CallError::Invalid {
        description: msg.to_string(),
        fields: Default::default(),
    }
}

/// Whether a record is ignored (empty `op`).
pub fn is_skipped(cols: &Columns, rec: &csv::StringRecord) -> bool {
    rec.get(cols.op).unwrap_or("").trim().is_empty()
}

/// The work of one record; `e` is the entity whose fields `cols` were made of.
pub fn work(cols: &Columns, e: &Entity, rec: &csv::StringRecord) -> Work {
    let op = rec.get(cols.op).unwrap_or("").trim();
    let id = cols.id.and_then(|i| rec.get(i)).unwrap_or("").trim();
    let op = match op {
        "" => return Work::Skip,
        "c" | "C" => Op::Create,
        "u" | "U" => Op::Update,
        "d" | "D" => Op::Delete,
        "s" | "S" => Op::Save,
        other => return Work::Fail(bad(&format!("unknown op `{other}`: use c, u, d or s"))),
    };
    let id = match (op, id) {
        (Op::Create, "") => None,
        (Op::Create, _) => return Work::Fail(bad("`id` must be empty for op c")),
        // Named by the entity's key (a save without one creates).
        (_, "") if e.has_key() || op == Op::Save => None,
        (_, "") => {
            return Work::Fail(bad(&format!(
                "`id` is required for ops u and d: {} has no key to find the object by",
                e.name
            )));
        }
        (_, s) => match crate::input::id(s) {
            Some(n) => Some(n),
            None => return Work::Fail(bad(&format!("`id` `{s}` is not an integer"))),
        },
    };
    let params = match (op, id) {
        // A delete takes no values; one named by key takes the key's.
        (Op::Delete, Some(_)) => Ok(serde_json::Map::new()),
        (Op::Delete, None) => prepare::coerce_strings(
            e,
            cols.cells(rec)
                .filter(|(name, v)| !v.is_empty() && e.key.contains(name)),
        ),
        _ => cols.params(e, rec),
    };
    let params = match params {
        Ok(p) => p,
        Err(err) => return Work::Fail(err),
    };
    Work::Run(Call {
        entity: e.name.clone(),
        op,
        id,
        params,
        prehashed: cols.sealed,
    })
}

/// A `res` text safe to open in a spreadsheet: one line, escaped like a text cell.
pub fn safe_text(s: &str) -> String {
    let one_line = s.replace(['\r', '\n'], " ");
    csvsafe::escape(&one_line).into_owned()
}

/// The `res` text and the status of a row's outcome.
pub fn res_of(outcome: &Result<Json, CallError>) -> (u16, Cow<'static, str>) {
    match outcome {
        Ok(_) => (200, Cow::Borrowed("OK")),
        Err(e) => (e.status(), Cow::Owned(safe_text(&e.description()))),
    }
}

/// The result-file positions and new texts of the fields a hook changed in `call` (e.g. a
/// page number mapped to a marker id), so that the result holds what was applied.
pub fn changed_cells(
    cols: &Columns,
    before: &serde_json::Map<String, Json>,
    call: &Call,
) -> Vec<(usize, String)> {
    let shift = usize::from(cols.res.is_none()) + usize::from(cols.id.is_none());
    call.params
        .iter()
        .filter(|(k, v)| before.get(*k) != Some(*v))
        .filter_map(|(k, v)| {
            let i = cols.names.iter().position(|n| n == k)?;
            let text = match v {
                Json::String(s) => s.clone(),
                Json::Bool(b) => if *b { "1" } else { "0" }.to_string(),
                Json::Null => String::new(),
                other => other.to_string(),
            };
            let cell = match cols.kinds[i] {
                Kind::Secret => return None,
                Kind::Text => csvsafe::escape(&text).into_owned(),
                Kind::Plain => csvsafe::escape_plain(&text).into_owned(),
            };
            Some((i + shift, cell))
        })
        .collect()
}

/// Appends the result cells of `rec` that follow an empty `id` (on an upload with neither
/// `res` nor `id`), each after a `separator`, then the line's end, when every one is echoed as
/// it was uploaded: each is [`csvsafe::kept`], and none holds the separator, a quote or a line
/// break, which the CSV writer would quote (a secret cell, written blank, included). False,
/// with nothing appended, otherwise. What [`result_cells`] and the CSV writer make of such a
/// record, without either.
pub fn push_tail_as_is(
    bytes: &mut Vec<u8>,
    cols: &Columns,
    rec: &csv::StringRecord,
    separator: u8,
) -> bool {
    // One look over all the record's cells at once for what the writer quotes.
    if needs_quotes(rec.as_slice(), separator) {
        return false;
    }
    let start = bytes.len();
    for (i, cell) in rec.iter().enumerate() {
        bytes.push(separator);
        if cols.kinds.get(i) == Some(&Kind::Secret) {
            continue;
        }
        if !csvsafe::kept(cell) {
            bytes.truncate(start);
            return false;
        }
        bytes.extend_from_slice(cell.as_bytes());
    }
    bytes.extend_from_slice(b"\r\n");
    true
}

/// Whether the CSV writer quotes `text` (a cell, or cells side by side): it holds the
/// separator, a quote or a line break.
pub fn needs_quotes(text: &str, separator: u8) -> bool {
    let b = text.as_bytes();
    // A short text (a row's `res`, such as `OK`) is looked at byte by byte: the vector search
    // costs more to set up than it saves on a few bytes.
    if b.len() < 16 {
        return b
            .iter()
            .any(|&c| matches!(c, b'"' | b'\r' | b'\n') || c == separator);
    }
    memchr::memchr3(b'"', b'\r', b'\n', b).is_some() || memchr::memchr(separator, b).is_some()
}

/// The result cells of a record: `res` and `id` set, the rest as uploaded (escaped, secrets
/// blank).
pub fn result_cells<'a>(
    cols: &Columns,
    rec: &'a csv::StringRecord,
    res: Option<&'a str>,
    new_id: Option<i64>,
) -> Vec<Cow<'a, str>> {
    let mut out: Vec<Cow<'a, str>> = Vec::with_capacity(cols.names.len() + 2);
    let id_text = |current: &'a str| -> Cow<'a, str> {
        match new_id {
            Some(i) => Cow::Owned(i.to_string()),
            None => Cow::Borrowed(current),
        }
    };
    if cols.res.is_none() {
        out.push(Cow::Borrowed(res.unwrap_or("")));
    }
    if cols.id.is_none() {
        out.push(id_text(""));
    }
    for (i, v) in rec.iter().enumerate() {
        let kind = cols.kinds.get(i).copied().unwrap_or(Kind::Plain);
        if Some(i) == cols.res {
            out.push(res.map_or_else(|| kind.echo(v), Cow::Borrowed));
        } else if Some(i) == cols.id && new_id.is_some() {
            out.push(id_text(v));
        } else {
            out.push(kind.echo(v));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::test_catalog;

    fn params_of(w: Work) -> Result<serde_json::Map<String, Json>, String> {
        match w {
            Work::Run(c) => Ok(c.params),
            Work::Fail(e) => Err(e.description()),
            Work::Skip => Err("skipped".into()),
        }
    }

    /// Whether a cell needs quotes is what the CSV writer decides, for short texts (looked at
    /// byte by byte) and long ones (searched), with each separator a file may use.
    #[test]
    fn a_cell_needs_quotes_when_the_writer_quotes_it() {
        let plain = ["", "OK", "a b", "row number 7 of the benchmark, long"];
        for sep in [b',', b';', b'\t', b'|'] {
            for base in plain {
                for special in ["", "\"", "\r", "\n", ",", ";", "\t", "|"] {
                    for text in [format!("{base}{special}"), format!("{special}{base}")] {
                        let mut w = csv::WriterBuilder::new()
                            .delimiter(sep)
                            .from_writer(Vec::new());
                        w.write_record([text.as_bytes(), b"x"]).unwrap();
                        let quoted = w.into_inner().unwrap().starts_with(b"\"");
                        let short = text.len() < 16;
                        assert_eq!(
                            needs_quotes(&text, sep),
                            quoted,
                            "{text:?} with {:?} ({})",
                            sep as char,
                            if short { "short" } else { "long" }
                        );
                    }
                }
            }
        }
    }

    /// A filled row (the copied template) and a row with empty cells (the map built name by
    /// name) give the same parameters, in the same order, and the same errors.
    #[test]
    fn a_filled_row_copies_the_template_into_what_coercion_makes() {
        let text = "fields:\n  name: { type: string, required: true }\n  n: { type: integer }\n  b: { type: boolean }\n  d: { type: date }\n";
        let catalog = test_catalog(&[("things.yaml", text)]);
        let e = catalog.get("things").unwrap();
        let header: Vec<String> = ["d", "op", "name", "id", "b", "n"].map(String::from).into();
        let cols = Columns::from_header(&header, e).unwrap();
        let rows = [
            ["2026-11-30", "c", "'=x", "", "yes", "42"],
            ["2026-11-30", "c", "a", "", "", "42"],
            ["", "u", "a", "7", "", ""],
            ["2026-02-30", "c", "a", "", "maybe", "4.5"],
            ["2026-11-30", "c", "a", "", "1", "x"],
            ["2026-11-30", "d", "a", "7", "1", "2"],
        ];
        for cells in rows {
            let rec = csv::StringRecord::from(cells.to_vec());
            let got = params_of(work(&cols, e, &rec));
            let pairs = header
                .iter()
                .zip(cells)
                .filter(|(h, _)| !["op", "id", "res"].contains(&h.as_str()))
                .map(|(h, v)| (h.as_str(), csvsafe::unescape(v)))
                .filter(|(_, v)| !v.is_empty() && cells[1] != "d");
            let want = prepare::coerce_strings(e, pairs).map_err(|e| e.description());
            assert_eq!(got, want, "{cells:?}");
            if let Ok(p) = &got {
                let order: Vec<&String> = p.keys().collect();
                let want_order: Vec<&String> = want.as_ref().unwrap().keys().collect();
                assert_eq!(order, want_order, "{cells:?}");
            }
        }
        let filled = csv::StringRecord::from(rows[0].to_vec());
        let p = params_of(work(&cols, e, &filled)).unwrap();
        assert_eq!(p.keys().collect::<Vec<_>>(), ["d", "name", "b", "n"]);
        assert_eq!(p["name"], "=x");
        assert_eq!(p["n"], 42);
        assert_eq!(p["b"], true);
    }
}
