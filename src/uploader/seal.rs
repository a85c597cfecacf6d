//! Secret columns of an upload (e.g. `password` in a users CSV) are sealed in the UTF-8
//! working copy before the upload is accepted: each value becomes its argon2 hash, or the reason
//! it is refused (see [`crate::engine::secrets`]). The working copy is what a background
//! request keeps until it has run, so it never holds a secret in clear; the uploaded file itself
//! is removed when the request is accepted or refused.

use super::UploadError;
use super::validate::Layout;
use crate::engine::secrets;
use crate::schema::Entity;
use serde_json::{Map, Value as Json};
use std::path::Path;

/// Seals the secret columns of the working copy at `path` in place. Returns whether the file
/// had any (and so whether its rows' calls are `prehashed`).
pub fn seal_file(path: &Path, layout: &Layout, e: &Entity) -> Result<bool, UploadError> {
    let secret_cols: Vec<(usize, &str)> = layout
        .header
        .iter()
        .enumerate()
        .filter(|(_, h)| e.field(h).is_some_and(|f| f.secret))
        .map(|(i, h)| (i, h.as_str()))
        .collect();
    if secret_cols.is_empty() {
        return Ok(false);
    }
    let sealed_path = path.with_extension("sealing");
    let result = (|| {
        let mut r = csv::ReaderBuilder::new()
            .delimiter(layout.separator)
            .has_headers(false)
            .flexible(false)
            .from_path(path)
            .map_err(UploadError::from)?;
        let mut w = csv::WriterBuilder::new()
            .delimiter(layout.separator)
            .from_path(&sealed_path)
            .map_err(UploadError::from)?;
        let mut rec = csv::StringRecord::new();
        let mut first = true;
        while r.read_record(&mut rec).map_err(UploadError::from)? {
            if first {
                first = false;
                w.write_record(&rec).map_err(UploadError::from)?;
                continue;
            }
            let mut cells: Vec<String> = rec.iter().map(str::to_string).collect();
            for (i, name) in &secret_cols {
                let Some(cell) = cells.get_mut(*i) else {
                    continue;
                };
                if cell.is_empty() {
                    continue;
                }
                // The row reads the cell unescaped; the secret is what it reads.
                let plain = crate::csvsafe::unescape(cell).to_string();
                let mut one = Map::new();
                one.insert((*name).to_string(), Json::String(plain));
                secrets::seal_blocking(e, &mut one);
                if let Some(Json::String(s)) = one.remove(*name) {
                    // Sealed values never begin with a formula character: no escaping needed.
                    *cell = s;
                }
            }
            w.write_record(&cells).map_err(UploadError::from)?;
        }
        w.flush().map_err(UploadError::from)?;
        std::fs::rename(&sealed_path, path).map_err(UploadError::from)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&sealed_path);
    }
    result.map(|()| true)
}
