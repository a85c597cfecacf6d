//! A Server-Sent-Events reader for tests: the events of a streamed response, one at a time.

use futures::StreamExt;
use serde_json::Value as Json;
use std::time::Duration;

/// One event: its name, id and data (JSON).
#[derive(Debug, Clone, PartialEq)]
pub struct Sse {
    pub event: String,
    pub id: Option<i64>,
    pub data: Json,
}

/// The events of one response, read as they come.
pub struct Stream {
    body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buf: String,
}

impl Stream {
    /// Reads `r` (a `text/event-stream` response) event by event.
    pub fn new(r: reqwest::Response) -> Stream {
        assert_eq!(r.status(), 200, "an event stream answers 200");
        let ct = r
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        assert!(ct.starts_with("text/event-stream"), "content-type {ct}");
        Stream {
            body: r.bytes_stream().boxed(),
            buf: String::new(),
        }
    }

    /// The next event within `limit`: `None` when the stream ended or nothing came.
    pub async fn next_within(&mut self, limit: Duration) -> Option<Sse> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if let Some(ev) = self.parse_one() {
                return Some(ev);
            }
            let chunk = tokio::time::timeout_at(deadline, self.body.next()).await;
            match chunk {
                Ok(Some(Ok(bytes))) => self.buf.push_str(&String::from_utf8_lossy(&bytes)),
                _ => return None,
            }
        }
    }

    /// The next event, which must come within 10 seconds.
    pub async fn next(&mut self) -> Sse {
        self.next_within(Duration::from_secs(10))
            .await
            .expect("an event within 10 s")
    }

    /// The next `n` events, each within 30 seconds.
    pub async fn take(&mut self, n: usize) -> Vec<Sse> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            match self.next_within(Duration::from_secs(30)).await {
                Some(ev) => out.push(ev),
                None => panic!("{} events of {n} came", out.len()),
            }
        }
        out
    }

    /// Takes one whole event (up to a blank line) off the buffer; comments are skipped.
    fn parse_one(&mut self) -> Option<Sse> {
        loop {
            let end = self.buf.find("\n\n")?;
            let block: String = self.buf.drain(..end + 2).collect();
            let mut ev = Sse {
                event: "message".into(),
                id: None,
                data: Json::Null,
            };
            let mut data = String::new();
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event:") {
                    ev.event = v.trim().to_string();
                } else if let Some(v) = line.strip_prefix("id:") {
                    ev.id = v.trim().parse().ok();
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push_str(v.strip_prefix(' ').unwrap_or(v));
                }
            }
            if data.is_empty() && ev.id.is_none() {
                continue;
            }
            ev.data = serde_json::from_str(&data).unwrap_or(Json::String(data));
            return Some(ev);
        }
    }
}
