//! Shared watchers of background requests for Server-Sent-Events streams, and the cap on a
//! user's concurrent streams.
//!
//! One task per watched request reads its record and new details entries every
//! [`TICK`] and publishes a [`Snapshot`] (the record and the most recent entries) on a
//! `tokio::sync::watch` channel; every stream of that request follows the channel instead of
//! polling the database. The task ends when its request is over (after publishing the last
//! snapshot) or when its last subscriber has gone. A stream that falls behind the entries the
//! snapshot keeps (it joined late, or its client reads slowly) reads the older ones from the
//! database itself, page by page.

use super::Jobs;
use super::record::detail_json;
use serde_json::Value as Json;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// How often a watcher reads its request.
pub const TICK: Duration = Duration::from_millis(200);
/// Details entries per database read.
pub const PAGE: i64 = 10_000;
/// Most recent details entries a snapshot keeps.
const TAIL: usize = 4096;

/// One details entry: its id and its JSON text.
#[derive(Debug, Clone)]
pub struct Entry {
    pub id: i64,
    pub json: Arc<str>,
}

/// What a watcher last saw of its request.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Whether the request has been read at least once.
    pub loaded: bool,
    /// Every entry with an id above `tail_from` is in `recent`.
    pub tail_from: i64,
    /// The most recent entries, oldest first.
    pub recent: Arc<VecDeque<Entry>>,
    /// The record as the API shows it; None when the request no longer exists.
    pub record: Option<Arc<Json>>,
    /// Whether the request is over (or gone): nothing follows this snapshot.
    pub over: bool,
}

impl Snapshot {
    /// The kept entries after entry `since`, and whether they are all there are (false: older
    /// ones must be read from the database first).
    pub fn after(&self, since: i64) -> Option<impl Iterator<Item = &Entry>> {
        if since < self.tail_from {
            return None;
        }
        let from = self.recent.partition_point(|e| e.id <= since);
        Some(self.recent.range(from..))
    }
}

type Channel = Arc<watch::Sender<Arc<Snapshot>>>;

/// The watchers of one server, and its open streams per user.
#[derive(Default)]
pub struct Watchers {
    by_rid: Mutex<HashMap<String, Channel>>,
    streams: Arc<Mutex<HashMap<i64, usize>>>,
}

/// One open stream of a user; the place is given back when it is dropped.
pub struct StreamSlot {
    streams: Arc<Mutex<HashMap<i64, usize>>>,
    user: i64,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut m = self.streams.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = m.get_mut(&self.user) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.user);
            }
        }
    }
}

impl Jobs {
    /// Follows request `rid`: the receiver sees every new snapshot. All receivers of one
    /// request share one watcher task.
    pub fn watch(&self, rid: &str) -> watch::Receiver<Arc<Snapshot>> {
        let mut map = self
            .watchers
            .by_rid
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(tx) = map.get(rid) {
            return tx.subscribe();
        }
        let (tx, rx) = watch::channel(Arc::new(Snapshot::default()));
        let tx = Arc::new(tx);
        map.insert(rid.to_string(), tx.clone());
        tokio::spawn(run(self.clone(), rid.to_string(), tx));
        rx
    }

    /// A place for one more stream of `user`, or None when the user has
    /// `max_streams_per_user` open.
    pub fn stream_slot(&self, user: i64) -> Option<StreamSlot> {
        let streams = self.watchers.streams.clone();
        let mut m = streams.lock().unwrap_or_else(|e| e.into_inner());
        let n = m.entry(user).or_insert(0);
        if *n >= self.settings.max_streams_per_user {
            if *n == 0 {
                m.remove(&user);
            }
            return None;
        }
        *n += 1;
        drop(m);
        Some(StreamSlot { streams, user })
    }
}

/// The watcher task of `rid`.
async fn run(jobs: Jobs, rid: String, tx: Channel) {
    let mut since = 0i64;
    let mut tail: VecDeque<Entry> = VecDeque::new();
    let mut tail_from = 0i64;
    let mut first = true;
    loop {
        if !first {
            tokio::time::sleep(TICK).await;
        }
        first = false;
        if let Some(record) = read(&jobs, &rid, &mut since, &mut tail, &mut tail_from).await {
            let over = record.as_ref().is_none_or(|r| !r.is_open());
            let record = record.map(|r| Arc::new(r.to_json()));
            let current = tx.borrow().clone();
            let grown = current.recent.back().map(|e| e.id) != tail.back().map(|e| e.id);
            if !current.loaded || grown || over || current.record != record {
                tx.send_replace(Arc::new(Snapshot {
                    loaded: true,
                    tail_from,
                    recent: Arc::new(tail.clone()),
                    record,
                    over,
                }));
            }
        }
        let over = tx.borrow().over;
        let mut map = jobs
            .watchers
            .by_rid
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        // Under the lock, so that no stream subscribes to a watcher that is ending.
        if over || tx.receiver_count() == 0 {
            if map.get(&rid).is_some_and(|t| Arc::ptr_eq(t, &tx)) {
                map.remove(&rid);
            }
            return;
        }
    }
}

/// Reads the record, then the entries after `since` into `tail` (the record first, so that a
/// finished request's last entries are read). None when the database could not be read
/// (tried again next tick).
async fn read(
    jobs: &Jobs,
    rid: &str,
    since: &mut i64,
    tail: &mut VecDeque<Entry>,
    tail_from: &mut i64,
) -> Option<Option<super::record::Request>> {
    let record = match jobs.load(rid).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(rid, error = %e, "watching a request: the record could not be read");
            return None;
        }
    };
    loop {
        let rows = match jobs.details(rid, *since, PAGE).await {
            Ok(rows) => rows,
            Err(e) => {
                tracing::warn!(rid, error = %e, "watching a request: details could not be read");
                return None;
            }
        };
        for row in &rows {
            let j = detail_json(row);
            *since = row.id;
            tail.push_back(Entry {
                id: *since,
                json: j.to_string().into(),
            });
        }
        while tail.len() > TAIL {
            if let Some(e) = tail.pop_front() {
                *tail_from = e.id;
            }
        }
        if (rows.len() as i64) < PAGE {
            return Some(record);
        }
    }
}
