//! Background request routes: the record, its details, its result, a Server-Sent-Events
//! stream of its progress, the caller's list, and the stored result file path.

use super::batch::push_item;
use super::body;
use super::error::{ApiError, Result};
use super::{AppState, Authed, json_response};
use crate::engine::Caller;
use crate::jobs::Jobs;
use crate::jobs::record::{Request as BgRequest, detail_json};
use crate::jobs::watch::{PAGE, Snapshot, StreamSlot};
use futures::StreamExt;
use poem::http::StatusCode;
use poem::web::sse::{Event, SSE};
use poem::web::{Data, Path};
use poem::{Body, IntoResponse, Request, Response, handler};
use serde_json::Value as Json;
use std::sync::Arc;
use std::time::Duration;

async fn visible(state: &AppState, caller: &Caller, rid: &str) -> Result<BgRequest> {
    state
        .jobs
        .find(caller, rid)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("background request `{rid}` does not exist")))
}

#[handler]
pub async fn record(
    Path(rid): Path<String>,
    Authed(caller): Authed,
    Data(state): Data<&Arc<AppState>>,
) -> Result<Response> {
    let r = visible(state, &caller, &rid).await?;
    Ok(json_response(
        StatusCode::OK,
        &Json::Array(vec![r.to_json()]),
    ))
}

#[handler]
pub async fn list(
    req: &Request,
    Authed(caller): Authed,
    Data(state): Data<&Arc<AppState>>,
) -> Result<Response> {
    let pairs = body::query_pairs(req)?;
    let int = |name: &str, default: i64, max: i64| -> Result<i64> {
        match body::query_param(&pairs, name) {
            None => Ok(default),
            Some(v) => v
                .trim()
                .parse::<i64>()
                .ok()
                .filter(|n| (0..=max).contains(n))
                .ok_or_else(|| {
                    ApiError::BadRequest(format!("`{name}` must be an integer from 0 to {max}"))
                }),
        }
    };
    let status_id = match body::query_param(&pairs, "status_id") {
        None => None,
        Some(_) => Some(int("status_id", 0, 100)?),
    };
    let limit = int("limit", 100, 1000)?;
    let offset = int("offset", 0, i64::MAX)?;
    let name = body::query_param(&pairs, "name");
    let rows = state
        .jobs
        .list(&caller, status_id, name, limit, offset)
        .await?;
    Ok(json_response(
        StatusCode::OK,
        &Json::Array(rows.iter().map(BgRequest::to_json).collect()),
    ))
}

/// Most details entries in one reply of `GET /bgrs/<rid>/details`.
pub const DETAILS_PAGE: i64 = 1000;

/// `GET /bgrs/<rid>/details`: entries oldest first, at most `limit` (1 to
/// [`DETAILS_PAGE`], default the most); `since=<entry id>` goes on after that entry.
#[handler]
pub async fn details(
    req: &Request,
    Path(rid): Path<String>,
    Authed(caller): Authed,
    Data(state): Data<&Arc<AppState>>,
) -> Result<Response> {
    visible(state, &caller, &rid).await?;
    let pairs = body::query_pairs(req)?;
    let since = match body::query_param(&pairs, "since") {
        None => 0,
        Some(s) => s
            .trim()
            .parse::<i64>()
            .map_err(|_| ApiError::BadRequest("`since` must be an entry id".into()))?,
    };
    let limit = match body::query_param(&pairs, "limit") {
        None => DETAILS_PAGE,
        Some(s) => s
            .trim()
            .parse::<i64>()
            .ok()
            .filter(|n| (1..=DETAILS_PAGE).contains(n))
            .ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "`limit` must be an integer from 1 to {DETAILS_PAGE}"
                ))
            })?,
    };
    let rows = state.jobs.details(&rid, since, limit).await?;
    Ok(json_response(
        StatusCode::OK,
        &Json::Array(rows.iter().map(detail_json).collect()),
    ))
}

/// The stored result of a finished request, streamed from the database.
async fn result_of(state: &AppState, caller: &Caller, rid: &str) -> Result<Response> {
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
        let (path, _) = crate::uploader::result_location(&state.settings.data_dir, &r.rid);
        let file = tokio::fs::File::open(&path).await.map_err(|_| {
            ApiError::NotFound(format!(
                "the result of `{rid}` is not stored on this server"
            ))
        })?;
        return Ok(super::uploader::csv_attachment(
            Body::from_async_read(file),
            &plan.result_name(),
            &plan,
        ));
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

#[handler]
pub async fn result(
    Path(rid): Path<String>,
    Authed(caller): Authed,
    Data(state): Data<&Arc<AppState>>,
) -> Result<Response> {
    result_of(state, &caller, &rid).await
}

/// `GET /media/keep1m/bgrs.<rid>.result.<ext>`: the same result by its path.
#[handler]
pub async fn media(
    Path(file): Path<String>,
    Authed(caller): Authed,
    Data(state): Data<&Arc<AppState>>,
) -> Result<Response> {
    let rid = file
        .strip_prefix("bgrs.")
        .and_then(|f| f.split('.').next())
        .filter(|r| r.len() == 32 && r.chars().all(|c| c.is_ascii_hexdigit()))
        .ok_or_else(|| ApiError::NotFound(format!("no stored file `{file}`")))?;
    let r = visible(state, &caller, rid).await?;
    if r.result.as_deref() != Some(&format!("media/keep1m/{file}")) && !r.is_open() {
        return Err(ApiError::NotFound(format!("no stored file `{file}`")));
    }
    result_of(state, &caller, rid).await
}

/// Server-Sent Events: every `detail` entry in order, `progress` (the record) whenever it
/// changes, and a last `finished` event. The streams of one request share one watcher
/// ([`crate::jobs::watch`]); a user holds at most `max_streams_per_user` streams at once
/// (429 with `Retry-After` beyond).
#[handler]
pub async fn events(
    Path(rid): Path<String>,
    Authed(caller): Authed,
    Data(state): Data<&Arc<AppState>>,
) -> Result<Response> {
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

/// `DELETE /bgrs/<rid>`: cancels an unfinished request. The worker stops before its next
/// chunk; the reply waits briefly for that and is 200 with the cancelled record, or 202 with
/// the record as it stands when the worker has not stopped yet.
#[handler]
pub async fn cancel(
    Path(rid): Path<String>,
    Authed(caller): Authed,
    Data(state): Data<&Arc<AppState>>,
) -> Result<Response> {
    let r = visible(state, &caller, &rid).await?;
    if !r.is_open() || !state.jobs.request_cancel(&rid, &caller.login).await? {
        return Err(ApiError::AlreadyFinished(format!(
            "background request `{rid}` has already ended"
        )));
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let r = visible(state, &caller, &rid).await?;
        if !r.is_open() {
            return Ok(json_response(
                StatusCode::OK,
                &Json::Array(vec![r.to_json()]),
            ));
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(json_response(
                StatusCode::ACCEPTED,
                &Json::Array(vec![r.to_json()]),
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
