//! Background request routes: the record, its details, its result, a Server-Sent-Events
//! stream of its progress, the caller's list, and the stored result file path.

use super::api::{Body as Media, E400, E404, E409, E410, Replies, Reply, SIGNED};
use super::api::{Signed, Streamed, Tag};
use super::batch::push_item;
use super::error::{ApiError, Result};
use super::{AppState, json_response};
use crate::engine::Caller;
use crate::jobs::Jobs;
use crate::jobs::record::{Request as BgRequest, detail_json};
use crate::jobs::watch::{PAGE, Snapshot, StreamSlot};
use futures::StreamExt;
use poem::http::StatusCode;
use poem::web::Data;
use poem::web::sse::{Event, SSE};
use poem::{Body, IntoResponse, Response};
use poem_openapi::param::{Path, Query};
use poem_openapi::payload::Json as JsonBody;
use poem_openapi::{ApiResponse, Object, OpenApi};
use std::sync::Arc;
use std::time::Duration;

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

/// The stored result of a finished request, streamed from the database.
async fn result_of(
    state: &AppState,
    caller: &Caller,
    rid: &str,
    headers: &poem::http::HeaderMap,
) -> Result<Response> {
    let r = visible(state, caller, rid).await?;
    if r.expired {
        return Err(ApiError::Gone(format!(
            "the result of `{rid}` was kept for its keep time and is gone"
        )));
    }
    if r.is_open() {
        return Err(ApiError::NotFound(format!(
            "background request `{rid}` has not finished"
        )));
    }
    let ctype = r
        .content_type
        .clone()
        .unwrap_or_else(|| "application/json".into());
    if r.kind.is_upload() {
        let plan = crate::uploader::run::plan_of(&r)?;
        let (_, key) = crate::uploader::result_location(&state.settings.data_dir, &r.rid);
        let mut resp = super::ranged::answer(&state.jobs.files, &key, headers)
            .await?
            .ok_or_else(|| {
                ApiError::NotFound(format!(
                    "the result file of `{rid}` is missing from {}",
                    state.jobs.files.describe()
                ))
            })?;
        super::uploader::csv_headers(&mut resp, &plan.result_name(), &plan);
        return Ok(resp);
    }
    if r.kind == crate::jobs::kinds::KindId::Call {
        let res = state.jobs.results(rid, 0, 1).await?;
        let body = res
            .into_iter()
            .next()
            .map(|(_, _, b)| b)
            .unwrap_or_else(|| "null".into());
        return Ok(Response::builder().content_type(ctype).body(body));
    }
    Ok(Response::builder()
        .content_type(ctype)
        .body(Body::from_bytes_stream(result_stream(
            state.jobs.clone(),
            r.rid,
        ))))
}

/// The JSON array of batch result items, page by page.
fn result_stream(
    jobs: Jobs,
    rid: String,
) -> impl futures::Stream<Item = std::io::Result<bytes::Bytes>> + Send + 'static {
    const PAGE: i64 = 5000;
    futures::stream::unfold(Some(0i64), move |next| {
        let jobs = jobs.clone();
        let rid = rid.clone();
        async move {
            let from = next?;
            let rows = match jobs.results(&rid, from, PAGE).await {
                Ok(r) => r,
                Err(e) => return Some((Err(std::io::Error::other(e.to_string())), None)),
            };
            let mut out = String::with_capacity(rows.len() * 160 + 2);
            if from == 0 {
                out.push('[');
            }
            for (seq, status, body) in &rows {
                if *seq > 0 {
                    out.push(',');
                }
                push_item(&mut out, *status, body);
            }
            let more = rows.len() as i64 == PAGE;
            if !more {
                out.push(']');
            }
            let last = rows.last().map_or(from, |r| r.0 + 1);
            Some((Ok(bytes::Bytes::from(out)), more.then_some(last)))
        }
    })
}

/// `GET /media/keep1m/bgrs.<rid>.result.<ext>`: the same result by its path.
async fn media(
    state: &AppState,
    caller: &Caller,
    file: &str,
    headers: &poem::http::HeaderMap,
) -> Result<Response> {
    let rid = file
        .strip_prefix("bgrs.")
        .and_then(|f| f.split('.').next())
        .filter(|r| r.len() == 32 && r.chars().all(|c| c.is_ascii_hexdigit()))
        .ok_or_else(|| ApiError::NotFound(format!("no stored file `{file}`")))?;
    let r = visible(state, caller, rid).await?;
    if r.result.as_deref() != Some(&format!("media/keep1m/{file}")) && !r.is_open() {
        return Err(ApiError::NotFound(format!("no stored file `{file}`")));
    }
    result_of(state, caller, rid, headers).await
}

/// Server-Sent Events: every `detail` entry in order, `progress` (the record) whenever it
/// changes, and a last `finished` event. The streams of one request share one watcher
/// ([`crate::jobs::watch`]); a user holds at most `max_streams_per_user` streams at once
/// (429 with `Retry-After` beyond).
async fn events(state: &AppState, caller: Caller, rid: String) -> Result<Response> {
    visible(state, &caller, &rid).await?;
    let Some(slot) = state.jobs.stream_slot(caller.id) else {
        let mut resp = json_response(
            StatusCode::TOO_MANY_REQUESTS,
            &serde_json::json!({
                "error": "too_many_streams",
                "description": format!(
                    "at most {} event streams may be open at once; close one and try again",
                    state.settings.max_streams_per_user
                ),
            }),
        );
        resp.headers_mut()
            .insert("retry-after", poem::http::HeaderValue::from_static("5"));
        return Ok(resp);
    };
    let start = Follow {
        rx: state.jobs.watch(&rid),
        jobs: state.jobs.clone(),
        rid,
        since: 0,
        last: None,
        done: false,
        _slot: slot,
    };
    let stream = futures::stream::unfold(start, |mut s| async move {
        loop {
            if s.done {
                return None;
            }
            let snap = s.rx.borrow_and_update().clone();
            let out = s.next_events(&snap).await;
            if !out.is_empty() {
                return Some((futures::stream::iter(out), s));
            }
            if s.done || s.rx.changed().await.is_err() {
                return None;
            }
        }
    })
    .flatten();
    Ok(SSE::new(stream)
        .keep_alive(Duration::from_secs(15))
        .into_response())
}

/// One stream's place in its request's snapshots.
struct Follow {
    rx: tokio::sync::watch::Receiver<Arc<Snapshot>>,
    jobs: Jobs,
    rid: String,
    /// The last entry sent.
    since: i64,
    /// Progress and status of the last `progress` event.
    last: Option<String>,
    done: bool,
    _slot: StreamSlot,
}

impl Follow {
    fn detail(&mut self, id: i64, json: &str) -> Event {
        self.since = id;
        Event::message(json).event_type("detail").id(id.to_string())
    }

    /// The events `snap` holds for this stream: entries not sent yet (older ones read from the
    /// database a page at a time), then the record when it changed, then `finished`.
    async fn next_events(&mut self, snap: &Snapshot) -> Vec<Event> {
        let mut out = Vec::new();
        if !snap.loaded {
            return out;
        }
        if snap.after(self.since).is_none() {
            // Behind the entries the watcher keeps: a page from the database; a full page
            // is sent at once and the rest read on the next turn.
            let Ok(rows) = self.jobs.details(&self.rid, self.since, PAGE).await else {
                self.done = true;
                return out;
            };
            for row in &rows {
                let id = row.id;
                out.push(self.detail(id, &detail_json(row).to_string()));
            }
            if rows.len() as i64 == PAGE {
                return out;
            }
            // Everything up to the kept entries has been read.
            self.since = self.since.max(snap.tail_from);
        }
        if let Some(kept) = snap.after(self.since) {
            let kept: Vec<(i64, Arc<str>)> = kept.map(|e| (e.id, e.json.clone())).collect();
            for (id, json) in kept {
                out.push(self.detail(id, &json));
            }
        }
        match &snap.record {
            Some(rec) => {
                let key = format!("{}/{}", rec["progress"], rec["status_id"]);
                if self.last.as_deref() != Some(key.as_str()) {
                    out.push(Event::message(rec.to_string()).event_type("progress"));
                    self.last = Some(key);
                }
                if snap.over {
                    out.push(Event::message(rec.to_string()).event_type("finished"));
                    self.done = true;
                }
            }
            None => self.done = true,
        }
        out
    }
}

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
