//! The CSV uploader: multipart intake streamed to disk, the whole-file check, and the row
//! runner that turns each CSV row into one engine call and writes the result file as rows
//! finish. Synchronous and background uploads share the runner; a background upload resumes
//! from its last committed row.

pub mod bundle;
pub mod failures;
pub mod intake;
pub mod keep;
pub mod kind;
mod result_file;
pub mod rows;
pub mod run;
pub mod seal;
mod span;
mod stage;
pub mod validate;
mod whole;

use std::path::PathBuf;

pub use crate::plugins::UploadError;

/// Everything a run needs to know about one upload; stored with a background request.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Plan {
    pub entity: String,
    /// WHATWG name of the file's encoding.
    pub encoding: String,
    pub layout: validate::Layout,
    /// The decoded UTF-8 working copy.
    pub utf8_path: PathBuf,
    /// The uploaded file's name.
    pub file_name: String,
    /// For a ZIP bundle: each plugin's state (by plugin name), from its `on_archive` hook
    /// and updated by its `on_start` hook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle: Option<serde_json::Map<String, serde_json::Value>>,
    /// The working copy's secret columns are sealed (hashes, or reasons for refusal).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sealed: bool,
    /// A dry run, or all or nothing (see [`crate::engine::whole`]).
    #[serde(flatten)]
    pub mode: crate::engine::whole::Mode,
    /// For a ZIP bundle: key prefixes of the files its plugins stored, removed when nothing
    /// of the upload is applied (a dry run, or an all-or-nothing upload that failed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stored: Vec<String>,
}

impl Plan {
    pub fn encoding(&self) -> &'static encoding_rs::Encoding {
        encoding_rs::Encoding::for_label(self.encoding.as_bytes()).unwrap_or(encoding_rs::UTF_8)
    }

    /// The working copy in this server's data directory: its name is kept, its folder is the
    /// upload folder of `data_dir`, so a data directory restored elsewhere goes on with it.
    pub fn working_copy(&self, data_dir: &std::path::Path) -> PathBuf {
        match self.utf8_path.file_name() {
            Some(name) => intake::work_dir(data_dir).join(name),
            None => self.utf8_path.clone(),
        }
    }

    /// Name of the result file a client downloads.
    pub fn result_name(&self) -> String {
        format!("{}res.csv", self.file_name)
    }
}

/// The result file of request `rid` under the data directory (its place while it is
/// written), and its key in the file storage, which is also its server-relative path.
pub fn result_location(data_dir: &std::path::Path, rid: &str) -> (PathBuf, String) {
    let rel = format!("media/keep1m/bgrs.{rid}.result.csv");
    (data_dir.join(&rel), rel)
}
