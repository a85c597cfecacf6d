//! Batches (a JSON array on a collection route) and single calls turned into background
//! requests with `bgrs=1`.

use super::error::{ApiError, Result};
use super::{AppState, json_response};
use crate::engine::batch::{Ran, Shown, item_call};
use crate::engine::render::RowObject;
use crate::engine::whole::Mode;
use crate::engine::{Call, CallError, Caller, Op, Outcome};
use crate::item_texts::ItemTexts;
use crate::jobs::queue::{NewRequest, Reply};
use poem::http::StatusCode;
use poem::{Request, Response};
use serde_json::{Value as Json, json};

/// Items per transaction of a synchronous batch.
const SYNC_CHUNK: usize = 2000;

/// The `bgrs` query parameter: `Some(true)` for 1/yes/true, `Some(false)` for 0/no/false.
pub fn bgrs_flag(pairs: &[(String, String)]) -> Result<Option<bool>> {
    match super::body::query_param(pairs, "bgrs") {
        None => Ok(None),
        Some(v) => crate::input::flag(&v)
            .map(Some)
            .ok_or_else(|| ApiError::BadRequest(crate::input::flag_error("bgrs"))),
    }
}

/// A yes/no query parameter; absent is no.
fn query_flag(pairs: &[(String, String)], name: &str) -> Result<bool> {
    match super::body::query_param(pairs, name) {
        None => Ok(false),
        Some(v) => crate::input::flag(&v)
            .ok_or_else(|| ApiError::BadRequest(crate::input::flag_error(name))),
    }
}

/// The `dry_run` and `atomic` query parameters. A single call is all or nothing by itself:
/// `atomic` changes nothing for it (`batch` false) and is not kept.
pub fn mode(pairs: &[(String, String)], batch: bool) -> Result<Mode> {
    let atomic = query_flag(pairs, "atomic")?;
    Ok(Mode {
        dry_run: query_flag(pairs, "dry_run")?,
        atomic: atomic && batch,
    })
}

/// The key a dry run's reply is remembered under: apart from the real run's, so that a dry
/// run with a key never stands in for the real run with the same key.
pub fn dry_run_key(key: Option<String>, mode: Mode) -> Option<String> {
    match key {
        Some(k) if mode.dry_run => Some(format!("dry_run {k}")),
        k => k,
    }
}

/// The request's `Idempotency-Key`.
pub fn idempotency_key(req: &Request) -> Result<Option<String>> {
    crate::input::idempotency_key(super::header(
        req,
        poem::http::HeaderName::from_static("idempotency-key"),
    ))
    .map_err(ApiError::BadRequest)
}

fn reply_response(r: Reply) -> Response {
    Response::builder()
        .status(StatusCode::from_u16(r.status).unwrap_or(StatusCode::OK))
        .content_type(r.content_type)
        .body(r.body)
}

fn accepted(rid: &str) -> Response {
    json_response(StatusCode::ACCEPTED, &json!({"request": rid}))
}

/// The result items of `outcomes`, comma-separated: a part of the results' JSON array.
fn result_items(outcomes: &[Outcome]) -> Vec<u8> {
    items_text(outcomes.iter().map(Shown::Outcome).collect())
}

/// The result items of a chunk that ran, comma-separated; created objects are written
/// straight from their rows.
fn ran_items(ran: &Ran) -> Vec<u8> {
    items_text(ran.results())
}

/// The result items of `results`, comma-separated.
fn items_text(results: Vec<Shown<'_>>) -> Vec<u8> {
    // About the length of an item holding a small object, escaped.
    let mut out = Vec::with_capacity(results.len() * 256);
    for (i, r) in results.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        match r {
            Shown::Outcome(Ok(obj)) => push_value_item(&mut out, 200, obj),
            Shown::Outcome(Err(e)) => push_value_item(&mut out, e.status(), &e.body()),
            Shown::Created(e, row) => push_value_item(&mut out, 200, &RowObject(e, row)),
        }
    }
    out
}

/// The JSON array of the result items in `parts`, in order.
fn joined(parts: Vec<Vec<u8>>) -> String {
    String::from_utf8(pieces(parts).concat()).expect("JSON text is UTF-8")
}

/// The JSON array of the result items in `parts`, as pieces that follow each other: the parts
/// themselves with the brackets and commas between them, so that the array is sent as it is
/// without copying it into one buffer first.
fn pieces(parts: Vec<Vec<u8>>) -> Vec<bytes::Bytes> {
    let mut out = Vec::with_capacity(parts.len() * 2 + 1);
    out.push(bytes::Bytes::from_static(b"["));
    for p in parts.into_iter().filter(|p| !p.is_empty()) {
        if out.len() > 1 {
            out.push(bytes::Bytes::from_static(b","));
        }
        out.push(bytes::Bytes::from(p));
    }
    out.push(bytes::Bytes::from_static(b"]"));
    out
}

/// Appends one `{"status": s, "body": "<json text>"}` item.
pub fn push_item(out: &mut String, status: i64, body_text: &str) {
    out.push_str("{\"status\":");
    out.push_str(&status.to_string());
    out.push_str(",\"body\":");
    out.push_str(&serde_json::to_string(body_text).unwrap_or_else(|_| "\"\"".into()));
    out.push('}');
}

/// [`push_item`] of the text of `body`, written as the escaped string at once.
fn push_value_item(out: &mut Vec<u8>, status: u16, body: &impl serde::Serialize) {
    use std::io::Write;
    let _ = write!(out, "{{\"status\":{status},\"body\":\"");
    let _ = body.serialize(&mut serde_json::Serializer::with_formatter(
        &mut *out, Escaped,
    ));
    out.extend_from_slice(b"\"}");
}

/// Writes JSON text as the inside of a JSON string, as it is produced: the quotes around
/// strings and the backslashes of their escapes are the only characters of JSON text that a
/// JSON string must escape (its strings escape every control character), so every other
/// part (numbers, punctuation, the plain runs of strings) is written as it is, unscanned.
struct Escaped;

impl serde_json::ser::Formatter for Escaped {
    fn begin_string<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b"\\\"")
    }

    fn end_string<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b"\\\"")
    }

    fn write_char_escape<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        escape: serde_json::ser::CharEscape,
    ) -> std::io::Result<()> {
        // The escape as JSON text has it, its backslash (and quote) escaped once more.
        let mut plain = Vec::with_capacity(6);
        serde_json::ser::CompactFormatter.write_char_escape(&mut plain, escape)?;
        for b in plain {
            if matches!(b, b'"' | b'\\') {
                w.write_all(b"\\")?;
            }
            w.write_all(&[b])?;
        }
        Ok(())
    }
}

/// The value of an item's text (which the body's parse has already checked).
fn parse_item(text: &str) -> Json {
    serde_json::from_str(text).unwrap_or(Json::Null)
}

/// Runs a batch of `items` on `entity`: in the background unless `bgrs` is false.
pub async fn run(
    state: &AppState,
    req: &Request,
    caller: &Caller,
    entity: &str,
    op: Op,
    items: ItemTexts,
) -> Result<Response> {
    let Some(e) = state.engine.catalog.load().get(entity).cloned() else {
        return Err(CallError::UnknownEntity(entity.to_string()).into());
    };
    let mut items = items;
    let max = state.settings.max_batch_items;
    if items.len() > max {
        return Err(ApiError::TooLarge(format!(
            "a batch holds at most {max} items; this one has {}",
            items.len()
        )));
    }
    let pairs = super::body::query_pairs(req)?;
    let background = bgrs_flag(&pairs)?.unwrap_or(true);
    let mode = mode(&pairs, true)?;
    let key = dry_run_key(idempotency_key(req)?, mode);
    let jobs = &state.jobs;
    if background {
        // Stored items never hold a secret in clear.
        let prehashed = op != Op::Delete && crate::engine::secrets::has_secrets(&e);
        if prehashed {
            items = crate::engine::secrets::seal_items(&e, &items).await;
        }
        let mut params = serde_json::Map::new();
        params.insert("op".into(), json!(op));
        params.insert("prehashed".into(), json!(prehashed));
        mode.store_in(&mut params);
        let new = NewRequest {
            user_id: caller.id,
            name: "batch".into(),
            kind: crate::jobs::kinds::KindId::Batch,
            entity: entity.to_string(),
            params: Json::Object(params),
            items,
            total: None,
            content_type: "application/json".into(),
            run_here: false,
            details: Vec::new(),
        };
        return Ok(match jobs.enqueue(new, key.as_deref()).await? {
            Ok(rid) => accepted(&rid),
            Err(reply) => reply_response(reply),
        });
    }
    if let Some(k) = &key
        && let Some(reply) = jobs.idempotent_reply_on_pool(caller.id, k).await?
    {
        return Ok(reply_response(reply));
    }
    let parts = if mode.whole() {
        let calls: Vec<Result<Call, CallError>> = (0..items.len())
            .map(|i| item_call(entity, op, parse_item(items.get(i))))
            .collect();
        drop(items);
        let outcomes = state
            .engine
            .run_whole(caller, calls, SYNC_CHUNK, mode)
            .await;
        vec![result_items(&outcomes)]
    } else {
        // The items are parsed into calls one chunk ahead of the writer, on its own thread,
        // and each chunk's results are written out while the next chunk runs.
        let entity = entity.to_string();
        let calls = (0..items.len()).map(move |i| item_call(&entity, op, parse_item(items.get(i))));
        state
            .engine
            .run_batch(caller, calls, SYNC_CHUNK, |ran: Ran| ran_items(&ran))
            .await
    };
    if let Some(k) = &key {
        let body = joined(parts);
        jobs.remember_reply_on_pool(caller.id, k, 200, &body, "application/json")
            .await?;
        return Ok(Response::builder()
            .header(poem::http::header::CONTENT_TYPE, super::JSON_TYPE)
            .body(body));
    }
    Ok(Response::builder()
        .header(poem::http::header::CONTENT_TYPE, super::JSON_TYPE)
        .body(Pieces::body(pieces(parts))))
}

/// A body sent as the pieces it is made of, its length known from the start.
struct Pieces {
    rest: std::collections::VecDeque<bytes::Bytes>,
    left: u64,
}

impl Pieces {
    fn new(pieces: Vec<bytes::Bytes>) -> Pieces {
        let left = pieces.iter().map(|p| p.len() as u64).sum();
        Pieces {
            rest: pieces.into(),
            left,
        }
    }

    fn body(pieces: Vec<bytes::Bytes>) -> poem::Body {
        poem::Body::from(http_body_util::combinators::BoxBody::new(Pieces::new(
            pieces,
        )))
    }
}

impl http_body::Body for Pieces {
    type Data = bytes::Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<std::io::Result<http_body::Frame<bytes::Bytes>>>> {
        let next = self.rest.pop_front();
        if let Some(p) = &next {
            self.left -= p.len() as u64;
        }
        std::task::Poll::Ready(next.map(|p| Ok(http_body::Frame::data(p))))
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_empty()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.left)
    }
}

/// Queues one call as a background request named after its method and path.
pub async fn background_call(
    state: &AppState,
    req: &Request,
    caller: &Caller,
    call: Call,
    mode: Mode,
) -> Result<Response> {
    let catalog = state.engine.catalog.load();
    let mut call = call;
    // The stored call never holds a secret in clear.
    if let Some(e) = catalog.get(&call.entity)
        && crate::engine::secrets::has_secrets(e)
    {
        crate::engine::secrets::seal(e, &mut call.params).await;
        call.prehashed = true;
    }
    // What can be known now is said now: a call that cannot run is refused before it is queued.
    crate::engine::prepare::prepare(&state.engine, &catalog, caller, &call).await?;
    let key = dry_run_key(idempotency_key(req)?, mode);
    let mut params = serde_json::Map::new();
    mode.store_in(&mut params);
    let new = NewRequest {
        user_id: caller.id,
        name: format!("{} {}", req.method(), super::full_path(req)),
        kind: crate::jobs::kinds::KindId::Call,
        entity: call.entity.clone(),
        params: if params.is_empty() {
            Json::Null
        } else {
            Json::Object(params)
        },
        items: ItemTexts::of_values(&[
            serde_json::to_value(&call).map_err(|_| ApiError::Call(CallError::Internal))?
        ]),
        total: None,
        content_type: "application/json".into(),
        run_here: false,
        details: Vec::new(),
    };
    Ok(match state.jobs.enqueue(new, key.as_deref()).await? {
        Ok(rid) => accepted(&rid),
        Err(reply) => reply_response(reply),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The JSON text of batch result items.
    fn results_json(outcomes: &[Outcome]) -> String {
        joined(vec![result_items(outcomes)])
    }

    #[test]
    fn parts_of_results_join_into_one_array() {
        let part = |t: &str| t.as_bytes().to_vec();
        assert_eq!(joined(vec![]), "[]");
        assert_eq!(joined(vec![part(""), part("")]), "[]");
        assert_eq!(joined(vec![part("1,2"), part(""), part("3")]), "[1,2,3]");
        let outcomes: Vec<Outcome> = (0..5).map(|i| Ok(json!({"id": i}))).collect();
        let parts = outcomes.chunks(2).map(result_items).collect();
        assert_eq!(joined(parts), results_json(&outcomes));
    }

    #[tokio::test]
    async fn a_results_body_is_its_pieces_with_their_length_told_first() {
        use http_body_util::BodyExt;
        let parts = || vec![b"1,2".to_vec(), Vec::new(), b"3".to_vec()];
        let body = Pieces::new(pieces(parts()));
        assert_eq!(http_body::Body::size_hint(&body).exact(), Some(7));
        let sent = body.collect().await.unwrap().to_bytes();
        assert_eq!(sent, joined(parts()).as_bytes());
        assert_eq!(sent, "[1,2,3]".as_bytes());
        let empty = Pieces::new(pieces(Vec::new()));
        assert_eq!(http_body::Body::size_hint(&empty).exact(), Some(2));
        assert_eq!(empty.collect().await.unwrap().to_bytes(), "[]".as_bytes());
    }

    #[test]
    fn result_items_are_the_escaped_text_of_their_bodies() {
        let obj = json!({"id": 7, "name": "a \"quoted\" \\ name\n\t\u{1}é😀", "n": 1.5, "x": null});
        let outcomes: Vec<Outcome> = vec![
            Ok(obj.clone()),
            Err(CallError::invalid_field("name", "is \"bad\"")),
        ];
        let text = results_json(&outcomes);
        let parsed: Json = serde_json::from_str(&text).unwrap();
        let items = parsed.as_array().unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(items[0]["status"], 200);
        let body: Json = serde_json::from_str(items[0]["body"].as_str().unwrap()).unwrap();
        assert_eq!(body, obj);
        assert_eq!(items[0]["body"].as_str().unwrap(), obj.to_string());
        assert_eq!(items[1]["status"], 400);
        let err = CallError::invalid_field("name", "is \"bad\"").body();
        assert_eq!(items[1]["body"].as_str().unwrap(), err.to_string());
        let mut old = String::new();
        push_item(&mut old, 200, &obj.to_string());
        assert!(text.starts_with(&format!("[{old},")));
    }
}
