//! `GET /bgrs/<rid>/events`: a background request's progress as Server-Sent Events.

use super::visible;
use crate::engine::Caller;
use crate::http::error::Result;
use crate::http::{AppState, json_response};
use crate::jobs::Jobs;
use crate::jobs::record::detail_json;
use crate::jobs::watch::{PAGE, Snapshot, StreamSlot};
use futures::StreamExt;
use poem::http::StatusCode;
use poem::web::sse::{Event, SSE};
use poem::{IntoResponse, Response};
use std::sync::Arc;
use std::time::Duration;

/// Server-Sent Events: every `detail` entry in order, `progress` (the record) whenever it
/// changes, and a last `finished` event. The streams of one request share one watcher
/// ([`crate::jobs::watch`]); a user holds at most `max_streams_per_user` streams at once
/// (429 with `Retry-After` beyond).
pub(super) async fn events(state: &AppState, caller: Caller, rid: String) -> Result<Response> {
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
