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
        let mut outcomes = outcomes.iter();
        let mut text = Vec::with_capacity(self.records.len() * 64);
        let mut lines = Vec::new();
        {
            let mut w = csv::WriterBuilder::new()
                .delimiter(plan.layout.separator)
                .terminator(csv::Terminator::CRLF)
                .from_writer(&mut text);
            for (i, (rec, kind)) in self.records.iter().zip(self.kinds).enumerate() {
                let line = self.first_line + i as i64;
                match kind {
                    None => w.write_record(
                        rows::result_cells(cols, rec, None, None)
                            .iter()
                            .map(|c| c.as_bytes()),
                    ),
                    Some(fills_id) => {
                        let internal = Err(CallError::Internal);
                        let o = outcomes.next().unwrap_or(&internal);
                        let (status, res) = rows::res_of(o);
                        let new_id = match o {
                            Ok(obj) if *fills_id => obj["id"].as_i64(),
                            _ => None,
                        };
                        if self.want_lines {
                            lines.push(format!("Line: {line} done. Result: {status}. {res}"));
                        }
                        let mut cells = rows::result_cells(cols, rec, Some(&res), new_id);
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
    if plan.layout.bom && plan.encoding() == encoding_rs::UTF_8 {
        bytes.extend_from_slice(&[0xEF, 0xBB, 0xBF]);
    }
    super::validate::encode(&String::from_utf8_lossy(&text), plan.encoding(), &mut bytes);
    f.write_all(&bytes).map_err(io_err)?;
    Ok(f)
}
