//! Background request routes: the record, its details, its result, a Server-Sent-Events
//! stream of its progress, the caller's list, and the stored result file path.

use super::batch::push_item;
use super::body;
use super::error::{ApiError, Result};
use super::{AppState, Authed, json_response};
use crate::engine::Caller;
use crate::jobs::Jobs;
use crate::jobs::record::{Request as BgRequest, detail_json};
use futures::StreamExt;
use poem::http::StatusCode;
use poem::web::sse::{Event, SSE};
use poem::web::{Data, Path};
use poem::{Body, Request, Response, handler};
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
    if r.kind.starts_with("upload") {
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
    if r.kind == "call" {
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

/// Server-Sent Events: `progress` (the record) whenever it changes, `detail` per new details
/// entry, and a last `finished` event.
#[handler]
pub async fn events(
    Path(rid): Path<String>,
    Authed(caller): Authed,
    Data(state): Data<&Arc<AppState>>,
) -> Result<SSE> {
    visible(state, &caller, &rid).await?;
    let jobs = state.jobs.clone();
    struct S {
        jobs: Jobs,
        rid: String,
        since: i64,
        last: Option<String>,
        done: bool,
        first: bool,
    }
    let start = S {
        jobs,
        rid,
        since: 0,
        last: None,
        done: false,
        first: true,
    };
    let stream = futures::stream::unfold(start, |mut s| async move {
        if s.done {
            return None;
        }
        if !s.first {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        s.first = false;
        let mut events = Vec::new();
        // The record first, so that a finished request's last details are read below.
        let current = s.jobs.load(&s.rid).await;
        const PAGE: i64 = 10_000;
        let mut more = false;
        if let Ok(rows) = s.jobs.details(&s.rid, s.since, PAGE).await {
            for row in &rows {
                let d = detail_json(row);
                s.since = row[0].as_i64().unwrap_or(s.since);
                events.push(
                    Event::message(d.to_string())
                        .event_type("detail")
                        .id(s.since.to_string()),
                );
            }
            // A full page: send it and read on at once; `finished` waits for the last page.
            more = rows.len() as i64 == PAGE;
        }
        if more {
            s.first = true;
            return Some((futures::stream::iter(events), s));
        }
        match current {
            Ok(Some(r)) => {
                let rec = r.to_json();
                let key = format!("{}/{}", rec["progress"], rec["status_id"]);
                if s.last.as_deref() != Some(key.as_str()) {
                    events.push(Event::message(rec.to_string()).event_type("progress"));
                    s.last = Some(key);
                }
                if !r.is_open() {
                    events.push(Event::message(rec.to_string()).event_type("finished"));
                    s.done = true;
                }
            }
            _ => s.done = true,
        }
        Some((futures::stream::iter(events), s))
    })
    .flatten();
    Ok(SSE::new(stream).keep_alive(Duration::from_secs(15)))
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
