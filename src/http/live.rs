//! Live changes of an entity: `GET /<res>/events` (Server-Sent Events) and
//! `GET /<res>/changes?after=&limit=` (the same changes as JSON pages). Both take the list
//! filters and `fields=`, under the caller's `list` rule.

use super::body;
use super::error::{ApiError, Result};
use super::{AppState, MaybeAuthed, json_response};
use crate::live::follow::{self, Start};
use crate::live::frames::HEARTBEAT;
use crate::live::pages;
use crate::live::watch::Watch;
use crate::schema::Action;
use bytes::Bytes;
use futures::{Stream, StreamExt};
use poem::http::StatusCode;
use poem::web::{Data, Path};
use poem::{Body, Request, Response, handler};
use serde_json::{Value as Json, json};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

/// How often a stream sends a heartbeat comment.
const HEARTBEAT_EVERY: Duration = Duration::from_secs(15);

/// Query parameters of these routes that are not filters.
const OWN_PARAMS: &[&str] = &["after", "last_event_id"];

/// Most changes one page of `/changes` returns, and the default.
const MAX_CHANGES: i64 = 1000;
const DEFAULT_CHANGES: i64 = 100;

/// The subscription a request asks for.
fn watch_of(state: &AppState, req: &Request, entity: &str, who: MaybeAuthed) -> Result<Watch> {
    let caller = who.for_rule(state, entity, Action::List)?;
    let e = state
        .engine
        .catalog
        .load()
        .entity(entity)
        .map_err(ApiError::from)?;
    let pairs = body::query_pairs(req)?;
    let fields = body::query_param(&pairs, "fields");
    for reserved in ["sort", "cursor", "offset", "changed_by", "t"] {
        if body::query_param(&pairs, reserved).is_some() {
            return Err(ApiError::BadRequest(format!(
                "`{reserved}` does not apply to changes; filters and `fields` do"
            )));
        }
    }
    let filters = body::field_pairs(pairs)
        .into_iter()
        .filter(|(k, _)| !OWN_PARAMS.contains(&k.as_str()))
        .collect();
    Watch::new(e, caller, filters, fields.as_deref()).map_err(ApiError::from)
}

/// Refuses the other live route's own parameter `name`: passed over, `after` on a stream would
/// start it now and skip the changes the client meant to resume from.
fn refuse_other(req: &Request, name: &str, instead: &str) -> Result<()> {
    match body::query_param(&body::query_pairs(req)?, name) {
        Some(_) => Err(ApiError::BadRequest(format!("`{name}` {instead}"))),
        None => Ok(()),
    }
}

/// A number given as `name`: a non-negative integer.
fn seq_param(name: &str, v: &str) -> Result<i64> {
    v.trim()
        .parse::<i64>()
        .ok()
        .filter(|n| *n >= 0)
        .ok_or_else(|| {
            ApiError::BadRequest(format!(
                "`{name}` must be the number of a change (a non-negative integer)"
            ))
        })
}

/// Where a stream starts: `Last-Event-ID`, else `last_event_id=`, else now.
fn start_of(req: &Request) -> Result<Start> {
    if let Some(v) = super::header(req, poem::http::HeaderName::from_static("last-event-id")) {
        return Ok(Start::After(seq_param("Last-Event-ID", v)?));
    }
    let pairs = body::query_pairs(req)?;
    match body::query_param(&pairs, "last_event_id") {
        Some(v) => Ok(Start::After(seq_param("last_event_id", &v)?)),
        None => Ok(Start::Now),
    }
}

/// `GET /<res>/events`.
#[handler]
pub async fn events(
    req: &Request,
    Path(entity): Path<String>,
    who: MaybeAuthed,
    Data(state): Data<&Arc<AppState>>,
) -> Result<Response> {
    refuse_other(
        req,
        "after",
        "pages `GET /<res>/changes`; a stream resumes after the number in the `Last-Event-ID` header or `last_event_id`",
    )?;
    let watch = Arc::new(watch_of(state, req, &entity, who)?);
    let start = start_of(req)?;
    let (first, follow) = follow::open(&state.live, watch, start)
        .await
        .map_err(|e| ApiError::from(crate::engine::internal(e)))?;
    let rest = futures::stream::unfold(follow, |f| async move {
        let mut f = f?;
        match f.next().await {
            Ok(Some(text)) => Some((text, Some(f))),
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(error = %e, "live changes: a stream failed");
                None
            }
        }
    });
    let closed = state.live.closed();
    Ok(event_stream(
        futures::stream::iter([first]).chain(rest),
        closed,
    ))
}

/// A `text/event-stream` response writing each text of `stream` as it comes, and a heartbeat
/// comment every [`HEARTBEAT_EVERY`], until `stream` ends or `closed` completes.
fn event_stream(
    stream: impl Stream<Item = Bytes> + Send + 'static,
    closed: impl Future<Output = ()> + Send + 'static,
) -> Response {
    let mut stream = Box::pin(stream);
    let mut closed = Box::pin(closed);
    let start = tokio::time::Instant::now() + HEARTBEAT_EVERY;
    let mut beat = tokio::time::interval_at(start, HEARTBEAT_EVERY);
    beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let body = futures::stream::poll_fn(move |cx| {
        if closed.as_mut().poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        if let Poll::Ready(next) = stream.poll_next_unpin(cx) {
            return Poll::Ready(next.map(Ok::<_, std::io::Error>));
        }
        beat.poll_tick(cx)
            .map(|_| Some(Ok(Bytes::from_static(HEARTBEAT))))
    });
    Response::builder()
        .content_type("text/event-stream")
        .header("X-Accel-Buffering", "no")
        .header("Cache-Control", "no-cache")
        .body(Body::from_bytes_stream(body))
}

/// `GET /<res>/changes?after=&limit=`.
#[handler]
pub async fn changes(
    req: &Request,
    Path(entity): Path<String>,
    who: MaybeAuthed,
    Data(state): Data<&Arc<AppState>>,
) -> Result<Response> {
    refuse_other(
        req,
        "last_event_id",
        "resumes a stream of `GET /<res>/events`; a page of changes starts `after` a number",
    )?;
    let watch = watch_of(state, req, &entity, who)?;
    let pairs = body::query_pairs(req)?;
    let after = match body::query_param(&pairs, "after") {
        Some(v) => seq_param("after", &v)?,
        None => 0,
    };
    let limit = match body::query_param(&pairs, "limit") {
        Some(v) => v
            .trim()
            .parse::<i64>()
            .ok()
            .filter(|n| (1..=MAX_CHANGES).contains(n))
            .ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "`limit` must be an integer from 1 to {MAX_CHANGES}"
                ))
            })?,
        None => DEFAULT_CHANGES,
    };
    let (items, next) = page_of(state, &watch, after, limit).await?;
    Ok(json_response(
        StatusCode::OK,
        &json!({"changes": items, "next": next}),
    ))
}

/// Up to `limit` changes `watch` sees after `after`, and the number to ask after next.
async fn page_of(
    state: &AppState,
    watch: &Watch,
    after: i64,
    limit: i64,
) -> Result<(Vec<Json>, i64)> {
    match pages::after(&state.live, watch, after, limit).await {
        Ok(p) => Ok((p.items, p.next)),
        Err(pages::PageError::Gone { newest }) => Err(ApiError::Gone(format!(
            "the changes after {after} are no longer kept: reload, then ask for changes after {newest}"
        ))),
        Err(pages::PageError::Storage(e)) => Err(ApiError::from(crate::engine::internal(e))),
    }
}
