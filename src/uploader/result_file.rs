//! The result file of an upload: created with its header (or cut back to the committed length
//! when a run resumes), then a chunk's result rows appended as the chunk commits.

use super::Plan;
use super::rows::{self, Columns};
use super::run::io_err;
use crate::engine::CallError;
use crate::storage::StorageError;
use std::io::{Seek, Write};

/// The rows of one chunk, to be written to the result file once their calls ran.
pub(super) struct Lines<'a> {
    /// Line number of the first record.
    pub first_line: i64,
    pub records: &'a [csv::StringRecord],
    /// Per record: None for a skipped row, else whether its result gets the object's id.
    pub kinds: &'a [Option<bool>],
    /// Per record: the cells the bundle's hooks changed.
    pub changed_cells: &'a [Vec<(usize, String)>],
    /// Whether to make the per-line progress messages.
    pub want_lines: bool,
    /// The records' cells after `res` and `id`, rendered ahead where that is possible.
    pub tails: Option<&'a Tails>,
}

/// The result cells of each record of a chunk that follow `res` and `id`, rendered by the
/// reader (or, for a chunk read again, the preparing stage) while the chunk before runs: when
/// the upload has neither column (the result puts both first), is UTF-8 and no hook changes
/// cells, all that is left to write once a row ran is its `res` and `id`.
pub(super) struct Tails {
    /// For each record: a separator, its echoed cells, and the line's end.
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Tails {
    /// Whether an upload of `cols` in `encoding`, with `hooks`, can have its tails rendered
    /// ahead.
    pub fn possible(
        cols: &Columns,
        encoding: &'static encoding_rs::Encoding,
        hooks: &super::run::Hooks,
    ) -> bool {
        cols.res.is_none()
            && cols.id.is_none()
            && encoding == encoding_rs::UTF_8
            && hooks.is_empty()
    }

    /// The tails of `records`, separated by `separator`.
    pub fn render(
        cols: &Columns,
        records: &[csv::StringRecord],
        separator: u8,
    ) -> Result<Tails, StorageError> {
        let mut bytes = Vec::with_capacity(records.len() * 64);
        let mut ends = Vec::with_capacity(records.len());
        // The records whose cells are not all echoed as they are go through a CSV writer;
        // `copied` is how much of what it wrote is in `bytes` already.
        let mut w = csv::WriterBuilder::new()
            .delimiter(separator)
            .terminator(csv::Terminator::CRLF)
            .from_writer(Vec::new());
        let mut copied = 0;
        for rec in records {
            if !rows::push_tail_as_is(&mut bytes, cols, rec, separator) {
                // The empty first field stands for what comes before: the record starts with
                // its separator.
                let cells = rows::result_cells(cols, rec, Some(""), None);
                w.write_record(cells[1..].iter().map(|c| c.as_bytes()))
                    .map_err(io_err)?;
                w.flush().map_err(io_err)?;
                bytes.extend_from_slice(&w.get_ref()[copied..]);
                copied = w.get_ref().len();
            }
            ends.push(bytes.len());
        }
        Ok(Tails { bytes, ends })
    }

    fn get(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }
}

impl Lines<'_> {
    /// The chunk's encoded result rows and its progress messages, from the outcomes of the
    /// rows that ran (in order).
    pub fn render(
        &self,
        plan: &Plan,
        cols: &Columns,
        encoding: &'static encoding_rs::Encoding,
        outcomes: &[crate::engine::Outcome],
    ) -> Result<(Vec<u8>, Vec<String>), StorageError> {
        if let Some(tails) = self.tails {
            return self.render_with(tails, plan, outcomes);
        }
        let mut outcomes = outcomes.iter();
        let mut text = Vec::with_capacity(self.records.len() * 64);
        let mut lines = Vec::new();
        {
            let mut w = csv::WriterBuilder::new()
                .delimiter(plan.layout.separator)
                .terminator(csv::Terminator::CRLF)
                .from_writer(&mut text);
            let internal = Err(CallError::Internal);
            for (i, (rec, kind)) in self.records.iter().zip(self.kinds).enumerate() {
                let line = self.first_line + i as i64;
                match kind {
                    None => w.write_record(
                        rows::result_cells(cols, rec, None, None)
                            .iter()
                            .map(|c| c.as_bytes()),
                    ),
                    Some(fills_id) => {
                        let o = outcomes.next().unwrap_or(&internal);
                        let (res, new_id) = self.ran(line, o, *fills_id, &mut lines);
                        let mut cells = rows::result_cells(cols, rec, Some(&*res), new_id);
                        if o.is_ok()
                            && let Some(changes) = self.changed_cells.get(i)
                        {
                            for (at, value) in changes {
                                cells[*at] = value.as_str().into();
                            }
                        }
                        w.write_record(cells.iter().map(|c| c.as_bytes()))
                    }
                }
                .map_err(io_err)?;
            }
            w.flush().map_err(io_err)?;
        }
        let text = String::from_utf8(text).map_err(io_err)?;
        let mut bytes = Vec::with_capacity(text.len());
        super::validate::encode(&text, encoding, &mut bytes);
        Ok((bytes, lines))
    }
}

impl Lines<'_> {
    /// The `res` text and the new id of line `line`, whose row ran with outcome `o`, and its
    /// progress message when those are wanted.
    fn ran(
        &self,
        line: i64,
        o: &crate::engine::Outcome,
        fills_id: bool,
        lines: &mut Vec<String>,
    ) -> (std::borrow::Cow<'static, str>, Option<i64>) {
        let (status, res) = rows::res_of(o);
        let new_id = match o {
            Ok(obj) if fills_id => crate::engine::outcome_id(obj),
            _ => None,
        };
        if self.want_lines {
            lines.push(format!("Line: {line} done. Result: {status}. {res}"));
        }
        (res, new_id)
    }

    /// [`Lines::render`] with the tails rendered ahead: each line is its `res` and `id`, then
    /// its tail.
    fn render_with(
        &self,
        tails: &Tails,
        plan: &Plan,
        outcomes: &[crate::engine::Outcome],
    ) -> Result<(Vec<u8>, Vec<String>), StorageError> {
        let mut outcomes = outcomes.iter();
        let mut text = Vec::with_capacity(tails.bytes.len() + self.records.len() * 16);
        let mut lines = Vec::new();
        let internal = Err(CallError::Internal);
        for (i, kind) in self.kinds.iter().enumerate() {
            let line = self.first_line + i as i64;
            match kind {
                None => text.push(plan.layout.separator),
                Some(fills_id) => {
                    let o = outcomes.next().unwrap_or(&internal);
                    let (res, new_id) = self.ran(line, o, *fills_id, &mut lines);
                    push_cell(&mut text, &res, plan.layout.separator)?;
                    text.push(plan.layout.separator);
                    // Digits: never quoted.
                    if let Some(n) = new_id {
                        text.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
                    }
                }
            }
            text.extend_from_slice(tails.get(i));
        }
        Ok((text, lines))
    }
}

/// Appends one cell as the CSV writer writes it: as it is, or quoted when it holds the
/// separator, a quote or a line break.
fn push_cell(text: &mut Vec<u8>, cell: &str, separator: u8) -> Result<(), StorageError> {
    if !rows::needs_quotes(cell, separator) {
        text.extend_from_slice(cell.as_bytes());
        return Ok(());
    }
    let mut w = csv::WriterBuilder::new()
        .delimiter(separator)
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(Vec::with_capacity(cell.len() + 8));
    // With an empty second cell, so that an empty cell is not written as `""`.
    w.write_record([cell.as_bytes(), b""]).map_err(io_err)?;
    let quoted = w.into_inner().map_err(io_err)?;
    text.extend_from_slice(&quoted[..quoted.len() - 2]);
    Ok(())
}

/// The result lines of rows that did not run because the request was cancelled.
pub(super) fn not_run(
    plan: &Plan,
    cols: &Columns,
    records: &[csv::StringRecord],
    encoding: &'static encoding_rs::Encoding,
    res_text: &str,
) -> Result<Vec<u8>, StorageError> {
    let mut text = Vec::with_capacity(records.len() * 64);
    {
        let mut w = csv::WriterBuilder::new()
            .delimiter(plan.layout.separator)
            .terminator(csv::Terminator::CRLF)
            .from_writer(&mut text);
        for rec in records {
            let res = (!rows::is_skipped(cols, rec)).then_some(res_text);
            w.write_record(
                rows::result_cells(cols, rec, res, None)
                    .iter()
                    .map(|c| c.as_bytes()),
            )
            .map_err(io_err)?;
        }
        w.flush().map_err(io_err)?;
    }
    let mut bytes = Vec::with_capacity(text.len());
    super::validate::encode(&String::from_utf8_lossy(&text), encoding, &mut bytes);
    Ok(bytes)
}

/// Opens the result file: new with its header, or cut back to the committed length.
pub(super) fn open_result(
    plan: &Plan,
    path: &std::path::Path,
    cols: &Columns,
    cursor: u64,
) -> Result<std::fs::File, StorageError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io_err)?;
    }
    if cursor > 0 {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(io_err)?;
        f.set_len(cursor).map_err(io_err)?;
        f.seek(std::io::SeekFrom::End(0)).map_err(io_err)?;
        return Ok(f);
    }
    let mut f = std::fs::File::create(path).map_err(io_err)?;
    let mut text = Vec::new();
    {
        let mut w = csv::WriterBuilder::new()
            .delimiter(plan.layout.separator)
            .terminator(csv::Terminator::CRLF)
            .from_writer(&mut text);
        w.write_record(cols.result_header()).map_err(io_err)?;
        w.flush().map_err(io_err)?;
    }
    let mut bytes = Vec::new();
    if plan.layout.bom {
        bytes.extend_from_slice(super::validate::bom_of(plan.encoding()));
    }
    super::validate::encode(&String::from_utf8_lossy(&text), plan.encoding(), &mut bytes);
    f.write_all(&bytes).map_err(io_err)?;
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rows::Kind;
    use serde_json::json;

    #[test]
    fn lines_rendered_ahead_are_the_lines_rendered_whole() {
        for separator in [b',', b';'] {
            let plan: Plan = serde_json::from_value(json!({
                "entity": "campaigns", "encoding": "UTF-8",
                "layout": {"header": ["op", "name", "note", "n"], "separator": separator, "rows": 8, "bom": false},
                "utf8_path": "/nonexistent", "file_name": "x.csv",
            }))
            .unwrap();
            let cols = Columns::new(
                plan.layout.header.clone(),
                0,
                None,
                None,
                vec![Kind::Plain, Kind::Text, Kind::Text, Kind::Plain],
                &[],
            );
            let records: Vec<csv::StringRecord> = [
                vec!["c", "plain", "x", "1"],
                vec!["", "skipped, with a comma", "", ""],
                vec!["c", "a \"quote\"", "line\nbreak", "2"],
                vec!["u", "=formula", "semi;colon", ""],
                vec!["c", "", "", "x"],
                vec!["c", "after the others", "-", "-5"],
                vec!["c", "as it is", "'", "4"],
                vec!["c", "as it is", "again", "5"],
            ]
            .into_iter()
            .map(csv::StringRecord::from)
            .collect();
            let kinds = [
                Some(true),
                None,
                Some(true),
                Some(false),
                Some(true),
                Some(true),
                Some(true),
                Some(true),
            ];
            let outcomes: Vec<crate::engine::Outcome> = vec![
                Ok(json!({"id": 41})),
                Err(CallError::invalid_field(
                    "name",
                    "is \"taken\", try; another\none",
                )),
                // A row of a group of creates: its id alone.
                Ok(json!(7)),
                Err(CallError::invalid_field("n", "must be a number")),
                Ok(json!(8)),
                Ok(json!(9)),
                Ok(json!(10)),
            ];
            let tails = Tails::render(&cols, &records, separator).unwrap();
            let lines = |tails| Lines {
                first_line: 10,
                records: &records,
                kinds: &kinds,
                changed_cells: &[],
                want_lines: true,
                tails,
            };
            let whole = lines(None)
                .render(&plan, &cols, encoding_rs::UTF_8, &outcomes)
                .unwrap();
            let ahead = lines(Some(&tails))
                .render(&plan, &cols, encoding_rs::UTF_8, &outcomes)
                .unwrap();
            assert_eq!(
                String::from_utf8_lossy(&ahead.0),
                String::from_utf8_lossy(&whole.0)
            );
            assert_eq!(ahead.1, whole.1);
            assert_eq!(whole.0.iter().filter(|b| **b == b'\n').count(), 9);
        }
    }
}
