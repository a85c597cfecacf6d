//! Where an upload's files live while it runs and after: its working copy and its result file
//! in the server's file storage ([`crate::files::Files`]). With the data directory as the
//! storage (the default) both are written in place and nothing here copies anything. With an
//! object store, shared by every server of a fleet:
//! - the working copy is stored before the upload is accepted, and fetched by whichever
//!   server runs the upload when its own disk lacks it;
//! - each chunk's result bytes commit with the chunk, as a part kept with the request in the
//!   database, so a server that takes the upload over rebuilds the result file as far as the
//!   committed rows reach;
//! - the finished result file is stored before the request ends (which drops the parts).

use super::Plan;
use super::run::io_err;
use crate::jobs::Jobs;
use crate::storage::{Dialect, Exec, StorageError, request_log};
use base64::Engine as _;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::files::UPLOADS;

/// The storage key of the working copy of `plan`.
pub fn working_key(plan: &Plan) -> Option<String> {
    let name = plan.utf8_path.file_name()?.to_str()?;
    Some(format!("{UPLOADS}/{name}"))
}

/// Stores the working copy of an accepted upload where every server finds it (before the
/// 202). Nothing to do when the storage is this server's data directory.
pub async fn publish_working_copy(jobs: &Jobs, plan: &Plan) -> Result<(), StorageError> {
    if !jobs.files.is_shared() {
        return Ok(());
    }
    let key = working_key(plan).ok_or_else(|| io_err("the working copy has no name"))?;
    jobs.files
        .put_copy(&key, &plan.working_copy(&jobs.settings.data_dir))
        .await
        .map_err(StorageError::from)
}

/// The working copy of `plan` on this server's disk, fetched from the storage when another
/// server received the upload.
pub async fn working_copy(jobs: &Jobs, plan: &Plan) -> Result<PathBuf, StorageError> {
    let path = plan.working_copy(&jobs.settings.data_dir);
    if jobs.files.is_shared() && !tokio::fs::try_exists(&path).await.unwrap_or(false) {
        let key = working_key(plan).ok_or_else(|| io_err("the working copy has no name"))?;
        if !jobs.files.fetch(&key, &path).await.map_err(io_err)? {
            return Err(io_err(format!("the working copy `{key}` is missing")));
        }
    }
    Ok(path)
}

/// Removes the working copy of a finished upload, here and in the storage.
pub async fn drop_working_copy(jobs: &Jobs, plan: &Plan) {
    let _ = tokio::fs::remove_file(plan.working_copy(&jobs.settings.data_dir)).await;
    if jobs.files.is_shared()
        && let Some(key) = working_key(plan)
        && let Err(e) = jobs.files.remove(&key).await
    {
        tracing::warn!(key, error = %e, "cannot remove an upload's working copy from the store");
    }
}

/// Whether result parts are kept in the database: for a background upload when the storage is
/// shared (a synchronous upload is never taken over by another server).
pub fn keeps_parts(jobs: &Jobs, req: &crate::jobs::record::Request) -> bool {
    jobs.files.is_shared() && req.kind == crate::jobs::kinds::KindId::Upload
}

/// Records `bytes`, which start at byte `at` of the result file of `rid`, inside the chunk's
/// transaction `ex`.
pub async fn add_part(
    ex: &mut dyn Exec,
    d: Dialect,
    rid: &str,
    at: i64,
    bytes: &[u8],
) -> Result<(), StorageError> {
    let text = base64::engine::general_purpose::STANDARD.encode(bytes);
    request_log::add_result_part(ex, d, rid, at, text).await
}

/// Writes the local result file of `rid` anew from its parts, up to the committed `cursor`
/// (the run then goes on from there). Local bytes are not trusted: another server may have
/// committed the chunks this server last wrote.
pub async fn rebuild_result(
    jobs: &Jobs,
    rid: &str,
    path: &Path,
    cursor: i64,
) -> Result<(), StorageError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io_err)?;
    }
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).map_err(io_err)?);
    let mut len = 0i64;
    const PAGE: i64 = 200;
    'pages: loop {
        let parts = request_log::result_parts(jobs.storage.as_ref(), rid, len, PAGE).await?;
        if parts.is_empty() {
            break;
        }
        for (at, text) in &parts {
            if *at != len {
                return Err(io_err(format!(
                    "the result parts of `{rid}` skip from byte {len} to {at}"
                )));
            }
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(text)
                .map_err(io_err)?;
            out.write_all(&bytes).map_err(io_err)?;
            len += bytes.len() as i64;
            if len >= cursor {
                break 'pages;
            }
        }
    }
    out.flush().map_err(io_err)?;
    if len < cursor {
        return Err(io_err(format!(
            "the result parts of `{rid}` hold {len} bytes of the {cursor} committed"
        )));
    }
    Ok(())
}

/// Stores the finished result file at `path` under `key`, before the request ends: a copy
/// into a shared store (the local file stays until the request has ended), nothing when the
/// file is already in place in the data directory.
pub async fn publish_result(jobs: &Jobs, key: &str, path: &Path) -> Result<(), StorageError> {
    jobs.files
        .put_copy(key, path)
        .await
        .map_err(StorageError::from)
}

/// Removes the local copy of a result file stored in a shared store.
pub async fn drop_local_result(jobs: &Jobs, path: &Path) {
    if jobs.files.is_shared() {
        let _ = tokio::fs::remove_file(path).await;
    }
}
