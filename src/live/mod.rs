//! Live changes (CONTRACT section 11): every committed change of an entity's rows, numbered in
//! commit order by the storage ([`crate::storage::live`]), streamed to subscribers
//! (`GET /<res>/events`) and paged (`GET /<res>/changes`).
//!
//! One hub per server reads each newly numbered page of the log once, as the storage signals
//! it, and decides each change once per group of subscriptions that see the same events
//! ([`watch::Watch::key`]), written once as the text every stream of the group sends
//! ([`frames`]). A group's streams take its pages from one bounded broadcast queue. A stream
//! that falls more than the queue behind is let go and reads the log itself from where it
//! stopped ([`follow`]), so a slow client costs no memory of its own, never an unbounded
//! queue; one more than `--events-lag-max` changes behind gets `reset` and is closed. Resuming
//! is the same catch-up from the number the client gives. While an upload runs on this server
//! the hub gives way to it ([`BULK_GAP`]) and catches up once it ends.

pub mod follow;
pub mod frames;
pub mod pages;
pub mod read;
pub mod watch;

use crate::engine::Engine;
use frames::Frames;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::broadcast;
use watch::Watch;

/// Log rows one page reads.
pub const PAGE: i64 = 1000;
/// Pages of events a group's queue holds (a page is at most 2,000 events, whose text every
/// stream of the group shares).
const QUEUE: usize = 8;
/// How long the hub waits, a page at most, for the slowest stream of a group whose queue is
/// full before it lets that stream go: streams a little slower than the changes are paced
/// instead of reading the log each on its own.
const PACE: Duration = Duration::from_millis(200);
/// How often the hub looks again at a full queue while it paces.
const PACE_STEP: Duration = Duration::from_millis(1);
/// While a bulk write (an upload) runs on this server, the hub waits this long after each page
/// it hands on: its subscribers then get about 20 pages a second (up to 40,000 changes) and
/// catch up at full speed once the write ends, and the write keeps the CPU their streams would
/// take (the book's performance page: 1.12x to 1.17x the upload alone, 2.13x without).
const BULK_GAP: Duration = Duration::from_millis(50);
/// How often changes older than `--changes-keep` are dropped.
const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// The server's live changes: its hub.
#[derive(Clone)]
pub struct Live(Arc<Hub>);

struct Hub {
    engine: Engine,
    lag_max: i64,
    keep: Duration,
    state: Mutex<State>,
    /// Cancelled when the server begins to shut down: every stream ends then.
    closing: tokio_util::sync::CancellationToken,
}

#[derive(Default)]
struct State {
    /// The newest number the hub has handed on.
    last: i64,
    groups: HashMap<String, Group>,
}

/// The pages of one group's events, as its streams take them.
type Queue = broadcast::Sender<Arc<Page>>;

/// One page of a group's events as its queue carries it.
pub struct Page {
    pub frames: Frames,
    /// The events handed on to the group up to and with this page.
    pub handed: u64,
}

struct Group {
    watch: Arc<Watch>,
    queue: Queue,
    /// The events handed on to the group so far: a stream that takes a page is as many
    /// behind as were handed on after it.
    handed: Arc<AtomicU64>,
}

/// A stream's place in its group.
pub struct Place {
    pub rx: broadcast::Receiver<Arc<Page>>,
    /// The newest number the hub had handed on when the stream joined: events after it come
    /// through the queue, earlier ones are the stream's own to read.
    pub until: i64,
    /// The group's count of events handed on.
    pub handed: Arc<AtomicU64>,
}

impl Live {
    /// The hub of `engine`'s storage, starting at the newest change numbered so far.
    pub async fn new(engine: Engine, lag_max: u64, keep: Duration) -> crate::storage::Result<Live> {
        let mut ex = crate::storage::PoolExec(engine.storage.as_ref());
        let (newest, _) = crate::storage::live::bounds(&mut ex).await?;
        Ok(Live(Arc::new(Hub {
            engine,
            lag_max: i64::try_from(lag_max).unwrap_or(i64::MAX),
            keep,
            state: Mutex::new(State {
                last: newest,
                ..State::default()
            }),
            closing: tokio_util::sync::CancellationToken::new(),
        })))
    }

    pub fn engine(&self) -> &Engine {
        &self.0.engine
    }

    /// Ends every stream (the server is shutting down): clients resume elsewhere, or here
    /// after the restart, from their last event's number.
    pub fn close(&self) {
        self.0.closing.cancel();
    }

    /// Completes once the streams are to end.
    pub fn closed(&self) -> tokio_util::sync::WaitForCancellationFutureOwned {
        self.0.closing.clone().cancelled_owned()
    }

    /// Most changes a subscriber may fall behind once it has caught up.
    pub fn lag_max(&self) -> i64 {
        self.0.lag_max
    }

    /// Adds a stream of `watch` to its group.
    fn join(&self, watch: &Arc<Watch>) -> Place {
        let mut st = self.0.state.lock().expect("hub state");
        let until = st.last;
        let group = st
            .groups
            .entry(watch.key().to_string())
            .or_insert_with(|| Group {
                watch: watch.clone(),
                queue: broadcast::channel(QUEUE).0,
                handed: Arc::default(),
            });
        Place {
            rx: group.queue.subscribe(),
            until,
            handed: group.handed.clone(),
        }
    }

    /// The newest number the hub has handed on.
    fn last(&self) -> i64 {
        self.0.state.lock().expect("hub state").last
    }

    /// Forgets the group of `key` once none of its streams is left (gone, or let go).
    fn leave(&self, key: &str) {
        let mut st = self.0.state.lock().expect("hub state");
        if st
            .groups
            .get(key)
            .is_some_and(|g| g.queue.receiver_count() == 0)
        {
            st.groups.remove(key);
        }
    }

    /// Starts the hub's reader and the pruner of old changes; both end when `stop` turns true.
    pub fn spawn(
        &self,
        stop: tokio::sync::watch::Receiver<bool>,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        vec![
            tokio::spawn(fan_out(self.clone(), stop.clone())),
            tokio::spawn(prune(self.clone(), stop)),
        ]
    }

    /// Reads and hands on the next page of changes numbered after the hub's last; whether
    /// there may be more to read.
    async fn hand_on(&self) -> crate::storage::Result<bool> {
        let storage = self.0.engine.storage.clone();
        let (after, wanted) = {
            let st = self.0.state.lock().expect("hub state");
            let wanted: Vec<String> = st
                .groups
                .values()
                .map(|g| g.watch.entity.name.clone())
                .collect();
            (st.last, wanted)
        };
        if wanted.is_empty() {
            // Nobody follows: the hub only keeps up, unless someone joined meanwhile.
            let mut ex = crate::storage::PoolExec(storage.as_ref());
            let (newest, _) = crate::storage::live::bounds(&mut ex).await?;
            let mut st = self.0.state.lock().expect("hub state");
            if st.groups.is_empty() && st.last == after {
                st.last = newest.max(after);
            }
            return Ok(false);
        }
        let catalog = self.0.engine.catalog.load();
        let page = read::page(storage.as_ref(), &catalog, after, PAGE, &wanted).await?;
        if page.upto <= after {
            return Ok(false);
        }
        let groups: Vec<(Arc<Watch>, Queue, Arc<AtomicU64>)> = {
            let mut st = self.0.state.lock().expect("hub state");
            if st.last != after
                || st
                    .groups
                    .values()
                    .any(|g| !wanted.contains(&g.watch.entity.name))
            {
                // A subscriber of another entity joined while the page was read: read it
                // again for everyone.
                return Ok(true);
            }
            st.last = page.upto;
            st.groups.retain(|_, g| g.queue.receiver_count() > 0);
            st.groups
                .values()
                .map(|g| (g.watch.clone(), g.queue.clone(), g.handed.clone()))
                .collect()
        };
        let deadline = tokio::time::Instant::now() + PACE;
        for (watch, queue, handed) in groups {
            let frames = frames(storage.as_ref(), &watch, &page.changes).await?;
            if frames.is_empty() {
                continue;
            }
            pace(&queue, deadline).await;
            let n = frames.len() as u64;
            let handed = handed.fetch_add(n, Ordering::Relaxed) + n;
            // None left to take it: nothing lost, as a stream that comes reads the log.
            let _ = queue.send(Arc::new(Page { frames, handed }));
        }
        Ok(true)
    }
}

/// Waits until `deadline` at most while `queue` is full: its slowest stream has not taken
/// the oldest page yet. Past that, the next page pushes the oldest out and that stream is let
/// go.
async fn pace(queue: &Queue, deadline: tokio::time::Instant) {
    while queue.len() >= QUEUE && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(PACE_STEP).await;
    }
}

/// The frames `watch` gets of `changes`.
pub async fn frames(
    storage: &dyn crate::storage::Storage,
    watch: &Watch,
    changes: &[read::Change],
) -> crate::storage::Result<Frames> {
    let mut events = Vec::new();
    for c in changes {
        if let Some(ev) = watch.event(storage, c).await? {
            events.push(ev);
        }
    }
    Ok(Frames::of(events.iter().map(|ev| frames::Item {
        seq: ev.seq,
        op: ev.op,
        id: ev.id,
        object: watch.object(&ev.row),
    })))
}

/// The hub's reader: wakes when the storage signals new numbers (and every second), then
/// hands on pages until it has caught up.
async fn fan_out(live: Live, mut stop: tokio::sync::watch::Receiver<bool>) {
    let mut signal = live.0.engine.storage.live_signal();
    loop {
        tokio::select! {
            r = signal.changed() => if r.is_err() { return },
            _ = stop.changed() => return,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
        if *stop.borrow() {
            return;
        }
        loop {
            match live.hand_on().await {
                Ok(true) => give_way(&live).await,
                Ok(false) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "live changes: reading the log failed; trying again");
                    break;
                }
            }
        }
    }
}

/// Waits [`BULK_GAP`] while a bulk write runs on this server.
async fn give_way(live: &Live) {
    if live.0.engine.bulk.running() {
        tokio::time::sleep(BULK_GAP).await;
    }
}

/// Drops changes older than `--changes-keep`, at start and every minute.
async fn prune(live: Live, mut stop: tokio::sync::watch::Receiver<bool>) {
    let keep = i64::try_from(live.0.keep.as_secs()).unwrap_or(i64::MAX);
    let storage = live.0.engine.storage.clone();
    loop {
        let d = storage.dialect();
        match crate::storage::live::prune(&mut crate::storage::PoolExec(storage.as_ref()), d, keep)
            .await
        {
            Ok(n) if n > 0 => tracing::info!(rows = n, "live changes: dropped old changes"),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "live changes: pruning failed; it runs again"),
        }
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(PRUNE_EVERY) => {}
        }
    }
}
