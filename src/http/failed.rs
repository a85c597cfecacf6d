//! `GET /bgrs/<rid>/failed`: what failed in a finished background request, counted whole, with
//! the first rows of it: an upload's failed rows (with their cells and `res`), a batch's or an
//! undo's failed items (with their status and the error's description). The upload and
//! requests pages show it.

use super::AppState;
use super::api::{E400, E404, E410, Reply, SIGNED, Signed, Tag};
use super::error::{ApiError, Result};
use crate::engine::{CallError, Caller};
use crate::jobs::record::Request as BgRequest;
use poem::web::Data;
use poem_openapi::param::{Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Object, OpenApi};
use std::sync::Arc;

/// What failed in a finished request.
#[derive(Object, Debug)]
#[oai(rename = "FailedRows")]
pub struct Failed {
    /// rows (uploads) or items (batches, undos) that ran, failed or not
    ran: i64,
    /// how many of them failed
    failed: i64,
    /// an upload's result columns, in order (empty for other requests)
    columns: Vec<String>,
    /// the first failures, in order
    rows: Vec<FailedRow>,
}

/// One failed row or item.
#[derive(Object, Debug)]
#[oai(rename = "FailedRow")]
pub struct FailedRow {
    /// the upload's data line (the header not counted) or the item's place, from 1
    line: i64,
    /// why it failed: the row's `res`, or the item's error description
    res: String,
    /// the item's HTTP status (400 for an upload's failed row)
    status: i64,
    /// the row's cells in the order of `columns` (uploads only)
    cells: Vec<String>,
}

#[derive(ApiResponse)]
enum Found {
    /// the failures counted, and the first of them
    #[oai(status = 200)]
    Ok(Json<Failed>),
}

fn default_limit() -> i64 {
    100
}

pub struct FailedApi;

#[OpenApi(tag = "Tag::Bgrs")]
impl FailedApi {
    /// What failed in a finished request
    ///
    /// An upload's failed rows with their cells and `res`, or a batch's (or undo's) failed
    /// items with their status and description: all counted, the first `limit` (at most 100)
    /// listed. Skipped rows (empty `op`) and rows a cancel left unrun are not failures. 404
    /// while the request runs, 410 once its result expired. Owner or admin only.
    #[oai(
        path = "/bgrs/:rid/failed",
        method = "get",
        operation_id = "listBackgroundRequestFailures"
    )]
    async fn failed(
        &self,
        /// the id of the background request
        rid: Path<String>,
        /// most failures listed
        #[oai(
            default = "default_limit",
            validator(minimum(value = "0"), maximum(value = "100"))
        )]
        limit: Query<i64>,
        Signed(caller): Signed,
        Data(state): Data<&Arc<AppState>>,
    ) -> Reply<Found, { E400 | SIGNED | E404 | E410 }> {
        let r = finished(state, &caller, &rid).await?;
        let keep = usize::try_from(limit.0).unwrap_or(0);
        let found = if r.kind.is_upload() {
            upload(state, &r, keep).await?
        } else {
            items(state, &r, keep).await?
        };
        Ok(Found::Ok(Json(found)))
    }
}

async fn finished(state: &AppState, caller: &Caller, rid: &str) -> Result<BgRequest> {
    let r =
        state.jobs.find(caller, rid).await?.ok_or_else(|| {
            ApiError::NotFound(format!("background request `{rid}` does not exist"))
        })?;
    if r.is_open() {
        return Err(ApiError::NotFound(format!(
            "background request `{rid}` has not finished"
        )));
    }
    if r.expired {
        return Err(ApiError::Gone(format!(
            "the result of `{rid}` was kept for its keep time and is gone"
        )));
    }
    Ok(r)
}

/// An upload's failed rows, read from its result file off the async workers.
async fn upload(state: &AppState, r: &BgRequest, keep: usize) -> Result<Failed> {
    let plan = crate::uploader::run::plan_of(r)?;
    let (_, key) = crate::uploader::result_location(&state.settings.data_dir, &r.rid);
    let files = &state.jobs.files;
    let missing = || {
        ApiError::NotFound(format!(
            "the result file of `{}` is missing from {}",
            r.rid,
            files.describe()
        ))
    };
    let internal = |e: &dyn std::fmt::Display| {
        tracing::error!(rid = %r.rid, error = %e, "cannot read an upload's result file");
        ApiError::Call(CallError::Internal)
    };
    // A shared store's file is copied here first; a local one is read where it is.
    let mut scratch = None;
    let path = match files.local_path(&key) {
        Some(p) if p.exists() => p,
        _ => {
            let dir = tempfile::tempdir_in(&state.settings.data_dir).map_err(|e| internal(&e))?;
            let to = dir.path().join("result.csv");
            scratch = Some(dir);
            if !files.fetch(&key, &to).await.map_err(|e| internal(&e))? {
                return Err(missing());
            }
            to
        }
    };
    let (separator, encoding) = (plan.layout.separator, plan.encoding());
    let read = tokio::task::spawn_blocking(move || {
        let file = std::fs::File::open(&path)?;
        crate::uploader::failures::read(std::io::BufReader::new(file), separator, encoding, keep)
            .map_err(std::io::Error::other)
    })
    .await
    .map_err(|e| internal(&e))?
    .map_err(|e| internal(&e))?;
    drop(scratch);
    Ok(Failed {
        ran: read.ran,
        failed: read.failed,
        columns: read.columns,
        rows: read
            .rows
            .into_iter()
            .map(|(line, res, cells)| FailedRow {
                line,
                res,
                status: 400,
                cells,
            })
            .collect(),
    })
}

/// A batch's, a call's or an undo's failed items, read a page at a time.
async fn items(state: &AppState, r: &BgRequest, keep: usize) -> Result<Failed> {
    const PAGE: i64 = 5000;
    let mut out = Failed {
        ran: 0,
        failed: 0,
        columns: Vec::new(),
        rows: Vec::new(),
    };
    let mut from = 0;
    loop {
        let page = state.jobs.results(&r.rid, from, PAGE).await?;
        for (seq, status, body) in &page {
            out.ran += 1;
            if *status < 400 {
                continue;
            }
            out.failed += 1;
            if out.rows.len() < keep {
                out.rows.push(FailedRow {
                    line: seq + 1,
                    res: description(body),
                    status: *status,
                    cells: Vec::new(),
                });
            }
        }
        match page.last() {
            Some(last) if page.len() as i64 == PAGE => from = last.0 + 1,
            _ => return Ok(out),
        }
    }
}

/// The `description` of an error body, or the body itself.
fn description(body: &str) -> String {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["description"].as_str().map(str::to_string))
        .unwrap_or_else(|| body.to_string())
}
