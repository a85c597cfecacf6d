//! Background request routes: the record, its details, its result, a Server-Sent-Events
//! stream of its progress, the caller's list, and the stored result file path.

use super::AppState;
use super::api::{Body as Media, E400, E404, E409, E410, Replies, Reply, SIGNED};
use super::api::{Signed, Streamed, Tag};
use super::error::{ApiError, Result};
use crate::engine::Caller;
use crate::jobs::record::{Request as BgRequest, detail_json};
use poem::web::Data;
use poem_openapi::param::{Path, Query};
use poem_openapi::payload::Json as JsonBody;
use poem_openapi::{ApiResponse, Object, OpenApi};
use std::sync::Arc;
use std::time::Duration;

mod events;
mod result;

use events::events;
use result::{media, result_of};

/// A background request's record.
#[derive(Object, serde::Deserialize)]
#[oai(rename = "BgRequest")]
pub struct Record {
    id: String,
    rid: String,
    user_id: String,
    name: String,
    created_dt: String,
    status_id: String,
    status_name: String,
    progress: String,
    finished_dt: String,
    result: String,
    status: String,
    content_type: String,
    /// "1" for a dry run: it ran, and nothing of it was applied
    dry_run: String,
    /// "1" for an all-or-nothing request
    atomic: String,
    /// what runs it: `upload`, `upload_sync`, `batch`, `call` or `undo`
    kind: String,
    /// the entity it changes
    entity: String,
    /// what it does, in words: "upload of `spring.csv` into campaigns", "batch of 2,000
    /// updates of markers"
    title: String,
}

impl Record {
    fn of(r: &BgRequest) -> Result<Record> {
        serde_json::from_value(r.to_json())
            .map_err(|_| ApiError::Call(crate::engine::CallError::Internal))
    }
}

/// One entry of a background request's log.
#[derive(Object, serde::Deserialize)]
#[oai(rename = "Detail")]
pub struct Detail {
    id: String,
    rid: String,
    dt: String,
    details: String,
}

/// Records, in an array.
type Records = JsonBody<Vec<Record>>;

#[derive(ApiResponse)]
enum Listed {
    /// requests
    #[oai(status = 200)]
    Ok(Records),
}

#[derive(ApiResponse)]
enum One {
    /// one record in an array
    #[oai(status = 200)]
    Ok(Records),
}

#[derive(ApiResponse)]
enum Logged {
    /// at most `limit` entries in order
    #[oai(status = 200)]
    Ok(JsonBody<Vec<Detail>>),
}

#[derive(ApiResponse)]
enum Undoing {
    /// the undo runs in the background: follow it at `/bgrs/{request}`
    #[oai(status = 202)]
    Accepted(JsonBody<super::api::Accepted>),
}

/// What an undo of a request would change.
#[derive(Object)]
#[oai(rename = "UndoPreview")]
pub struct UndoPreview {
    /// the request an undo would revert
    request: String,
    /// objects it created, updated or deleted, each counted once
    objects: i64,
    /// the same, per entity
    entities: std::collections::BTreeMap<String, i64>,
}

#[derive(ApiResponse)]
enum Previewed {
    /// what an undo would change
    #[oai(status = 200)]
    Ok(JsonBody<UndoPreview>),
}

#[derive(ApiResponse)]
enum Cancelled {
    /// the cancelled record in an array
    #[oai(status = 200)]
    Done(Records),
    /// cancel asked for; the worker has not stopped yet
    #[oai(status = 202)]
    Asked(Records),
}

/// The stored result of a finished request.
pub struct ResultReplies;
impl Replies for ResultReplies {
    const REPLIES: &'static [super::api::Documented] = &[
        (
            200,
            "batch items, a single call's body, or the uploader's result CSV",
            &[("application/json", Media::Json), ("text/csv", Media::Text)],
        ),
        (
            206,
            "the bytes of the result CSV a `Range` header asked for",
            &[("text/csv", Media::Text)],
        ),
        (
            304,
            "the result CSV is the version `If-None-Match` names",
            &[],
        ),
        (416, "the `Range` lies past the end of the result CSV", &[]),
    ];
}

/// A Server-Sent Events stream.
pub struct EventReplies;
impl Replies for EventReplies {
    const REPLIES: &'static [super::api::Documented] = &[(
        200,
        "an event stream: `detail` events carry a Detail, `progress` and `finished` events a BgRequest, as JSON",
        &[("text/event-stream", Media::Json)],
    )];
}

fn records(rs: &[BgRequest]) -> Result<Records> {
    Ok(JsonBody(rs.iter().map(Record::of).collect::<Result<_>>()?))
}

fn default_limit() -> i64 {
    100
}

fn default_page() -> i64 {
    DETAILS_PAGE
}

pub struct BgrsApi;

#[OpenApi(tag = "Tag::Bgrs")]
impl BgrsApi {
    /// The caller's background requests, newest first (admins: everyone's)
    ///
    /// Filtered by status and name; at most `limit` records (default 100) from `offset`.
    #[oai(
        path = "/bgrs",
        method = "get",
        operation_id = "listBackgroundRequests"
    )]
    async fn list(
        &self,
        /// only requests in this state (2 running, 4 finished, 5 cancelled)
        #[oai(validator(minimum(value = "0"), maximum(value = "100")))]
        status_id: Query<Option<i64>>,
        /// only requests with this name (e.g. `POST /campaigns`)
        name: Query<Option<String>>,
        /// most records in the reply
        #[oai(
            default = "default_limit",
            validator(minimum(value = "0"), maximum(value = "1000"))
        )]
        limit: Query<i64>,
        /// records to skip
        #[oai(default, validator(minimum(value = "0")))]
        offset: Query<i64>,
        Signed(caller): Signed,
        Data(state): Data<&Arc<AppState>>,
    ) -> Reply<Listed, { E400 | SIGNED }> {
        let rows = state
            .jobs
            .list(&caller, status_id.0, name.0, limit.0, offset.0)
            .await?;
        Ok(Listed::Ok(records(&rows)?))
    }

    /// A background request
    ///
    /// Its record, with progress and, once finished, the status and location of its result.
    /// Owner or admin only.
    #[oai(
        path = "/bgrs/:rid",
        method = "get",
        operation_id = "getBackgroundRequest"
    )]
    async fn record(
        &self,
        /// the id of the background request
        rid: Path<String>,
        Signed(caller): Signed,
        Data(state): Data<&Arc<AppState>>,
    ) -> Reply<One, { SIGNED | E404 }> {
        let r = visible(state, &caller, &rid).await?;
        Ok(One::Ok(records(&[r])?))
    }

    /// Cancel an unfinished request
    ///
    /// It stops before its next chunk, keeps what ran, ends as status_id 5 `cancelled`, and
    /// its result marks the rest as not run. 409 when it has already finished. The reply
    /// waits briefly for the worker: 200 with the cancelled record, or 202 with the record as
    /// it stands when the worker has not stopped yet.
    #[oai(
        path = "/bgrs/:rid",
        method = "delete",
        operation_id = "cancelBackgroundRequest"
    )]
    async fn cancel(
        &self,
        /// the id of the background request
        rid: Path<String>,
        Signed(caller): Signed,
        Data(state): Data<&Arc<AppState>>,
    ) -> Reply<Cancelled, { SIGNED | E404 | E409 }> {
        Ok(cancel(state, &caller, &rid).await?)
    }

    /// The log of a background request, a page at a time
    ///
    /// Entries oldest first, at most `limit` (at most 1000) per reply; `since` (the id of the
    /// last entry received) goes on after that entry.
    #[oai(
        path = "/bgrs/:rid/details",
        method = "get",
        operation_id = "listBackgroundRequestDetails"
    )]
    async fn details(
        &self,
        /// the id of the background request
        rid: Path<String>,
        /// only entries after the entry with this id
        #[oai(default)]
        since: Query<i64>,
        /// most entries in the reply
        #[oai(
            default = "default_page",
            validator(minimum(value = "1"), maximum(value = "1000"))
        )]
        limit: Query<i64>,
        Signed(caller): Signed,
        Data(state): Data<&Arc<AppState>>,
    ) -> Reply<Logged, { E400 | SIGNED | E404 }> {
        visible(state, &caller, &rid).await?;
        let rows = state.jobs.details(&rid, since.0, limit.0).await?;
        let entries = rows
            .iter()
            .map(|r| serde_json::from_value(detail_json(r)))
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| ApiError::Call(crate::engine::CallError::Internal))?;
        Ok(Logged::Ok(JsonBody(entries)))
    }

    /// The stored result of a finished request
    ///
    /// A batch's result items, a single call's body, or the uploader's result CSV, with the
    /// content type they were stored with. Kept for a month: 410 after.
    #[oai(
        path = "/bgrs/:rid/result",
        method = "get",
        operation_id = "getBackgroundRequestResult"
    )]
    async fn result(
        &self,
        /// the id of the background request
        rid: Path<String>,
        Signed(caller): Signed,
        Data(state): Data<&Arc<AppState>>,
        req: &poem::Request,
    ) -> Reply<Streamed<ResultReplies>, { SIGNED | E404 | E410 }> {
        Ok(Streamed::new(
            result_of(state, &caller, &rid, req.headers()).await?,
        ))
    }

    /// Server-Sent Events of progress and log entries until the request finishes
    ///
    /// A user may hold a limited number of streams open at once (`--max-streams-per-user`,
    /// default 16); beyond it, 429 with `Retry-After`.
    #[oai(
        path = "/bgrs/:rid/events",
        method = "get",
        operation_id = "streamBackgroundRequestEvents"
    )]
    async fn events(
        &self,
        /// the id of the background request
        rid: Path<String>,
        Signed(caller): Signed,
        Data(state): Data<&Arc<AppState>>,
    ) -> Reply<Streamed<EventReplies>, { SIGNED | E404 }> {
        Ok(Streamed::new(events(state, caller, rid.0).await?))
    }

    /// Undo what a finished request applied
    ///
    /// Answers 202 with a new background request that reverts, newest change first, what
    /// `rid` applied: objects it created are deleted, objects it updated get their previous
    /// values back, objects it deleted come back with their id and values. An object changed
    /// by anyone since is left as it is and named in the undo's result as a conflict (409
    /// items). An undo can be undone. Owner or admin only; 409 while `rid` runs, 410 once its
    /// result expired.
    #[oai(
        path = "/bgrs/:rid/undo",
        method = "post",
        operation_id = "undoBackgroundRequest"
    )]
    async fn undo(
        &self,
        /// the id of the background request to undo
        rid: Path<String>,
        Signed(caller): Signed,
        Data(state): Data<&Arc<AppState>>,
    ) -> Reply<Undoing, { SIGNED | E404 | E409 | E410 }> {
        let r = undoable(state, &caller, &rid).await?;
        if let Some(undo) = crate::jobs::undo::undone_by(&state.jobs, &r.rid).await? {
            return Err(ApiError::AlreadyUndone(format!(
                "background request `{}` was already undone by `{undo}`; to put its changes \
                 back, undo `{undo}`",
                r.rid
            ))
            .into());
        }
        let total = crate::jobs::undo::recorded(&state.jobs, &r.rid).await?;
        let req = crate::jobs::queue::NewRequest {
            user_id: caller.id,
            name: crate::jobs::undo::request_name(&r.rid),
            kind: crate::jobs::kinds::KindId::Undo,
            entity: r.entity.clone(),
            params: crate::jobs::undo::params_of(&r),
            items: Default::default(),
            total: Some(total),
            content_type: "application/json".into(),
            run_here: false,
            details: vec![format!("undo of {}: {total} recorded changes", r.rid)],
        };
        let request = match state.jobs.enqueue(req, None).await? {
            Ok(rid) => rid,
            Err(_) => return Err(ApiError::Call(crate::engine::CallError::Internal).into()),
        };
        Ok(Undoing::Accepted(JsonBody(super::api::Accepted {
            request,
        })))
    }

    /// What an undo of a finished request would change
    ///
    /// The objects it created, updated or deleted, per entity, each counted once: what an
    /// undo would touch if no one changed them since. Owner or admin only.
    #[oai(path = "/bgrs/:rid/undo", method = "get", operation_id = "previewUndo")]
    async fn undo_preview(
        &self,
        /// the id of the background request
        rid: Path<String>,
        Signed(caller): Signed,
        Data(state): Data<&Arc<AppState>>,
    ) -> Reply<Previewed, { SIGNED | E404 | E409 | E410 }> {
        let r = undoable(state, &caller, &rid).await?;
        let entities: std::collections::BTreeMap<String, i64> =
            crate::jobs::undo::preview(&state.jobs, &r.rid)
                .await?
                .into_iter()
                .collect();
        Ok(Previewed::Ok(JsonBody(UndoPreview {
            request: r.rid,
            objects: entities.values().sum(),
            entities,
        })))
    }

    /// A stored result file
    ///
    /// The file a finished request's `result` names. Kept for a month: 410 after.
    #[oai(
        path = "/media/keep1m/:file",
        method = "get",
        operation_id = "getResultFile"
    )]
    async fn media(
        &self,
        /// the file name from the request's `result`
        file: Path<String>,
        Signed(caller): Signed,
        Data(state): Data<&Arc<AppState>>,
        req: &poem::Request,
    ) -> Reply<Streamed<ResultReplies>, { SIGNED | E404 | E410 }> {
        Ok(Streamed::new(
            media(state, &caller, &file, req.headers()).await?,
        ))
    }
}

async fn visible(state: &AppState, caller: &Caller, rid: &str) -> Result<BgRequest> {
    state
        .jobs
        .find(caller, rid)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("background request `{rid}` does not exist")))
}

/// A request the caller may undo: visible to them, finished, its result still kept.
async fn undoable(state: &AppState, caller: &Caller, rid: &str) -> Result<BgRequest> {
    let r = visible(state, caller, rid).await?;
    if r.is_open() {
        return Err(ApiError::NotFinished(format!(
            "background request `{rid}` has not finished; cancel it or wait for it before undoing it"
        )));
    }
    if r.expired {
        return Err(ApiError::Gone(format!(
            "the result of `{rid}` was kept for its keep time and is gone, and what it changed with it"
        )));
    }
    Ok(r)
}

/// Most details entries in one reply of `GET /bgrs/<rid>/details`.
pub const DETAILS_PAGE: i64 = 1000;

/// `DELETE /bgrs/<rid>`: asks the worker to stop and waits briefly for it.
async fn cancel(state: &AppState, caller: &Caller, rid: &str) -> Result<Cancelled> {
    let r = visible(state, caller, rid).await?;
    if !r.is_open() || !state.jobs.request_cancel(rid, &caller.login).await? {
        return Err(ApiError::AlreadyFinished(format!(
            "background request `{rid}` has already ended"
        )));
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let r = visible(state, caller, rid).await?;
        if !r.is_open() {
            return Ok(Cancelled::Done(records(&[r])?));
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(Cancelled::Asked(records(&[r])?));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
