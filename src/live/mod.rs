//! Live changes (CONTRACT section 11): every committed change of an entity's rows, numbered in
//! commit order by the storage ([`crate::storage::live`]), streamed to subscribers
//! (`GET /<res>/events`) and paged (`GET /<res>/changes`).
//!
//! One hub per server reads each newly numbered page of the log once, as the storage signals
//! it, and decides each change once per group of subscriptions that see the same events
//! ([`watch::Watch::key`]); each subscriber gets the events through a bounded channel. A
//! subscriber whose channel fills is let go by the hub and reads the log itself from where it
//! stopped ([`follow`]), so a slow client costs a page of memory, never an unbounded queue;
//! one more than `--events-lag-max` changes behind gets `reset` and is closed. Resuming is the
//! same catch-up from the number the client gives.

pub mod follow;
pub mod pages;
pub mod read;
pub mod watch;

use crate::engine::Engine;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use watch::Watch;

/// Log rows one page reads.
pub const PAGE: i64 = 1000;
/// Events a subscriber's channel holds (frames share their text, so a full one is a few
/// hundred kilobytes).
const CHANNEL: usize = 4096;
/// How long the hub waits, a page at most, for subscribers whose channel is full before it
/// lets them go: streams a little slower than the changes are paced instead of reading the
/// log each on its own.
const PACE: Duration = Duration::from_millis(200);
/// How often changes older than `--changes-keep` are dropped.
const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// One event on its way to subscribers of one key: its number, name and data.
#[derive(Debug, Clone)]
pub struct Frame {
    pub seq: i64,
    pub op: &'static str,
    pub data: Arc<str>,
}

/// The server's live changes: its hub.
#[derive(Clone)]
pub struct Live(Arc<Hub>);

struct Hub {
    engine: Engine,
    lag_max: i64,
    keep: Duration,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The newest number the hub has handed on.
    last: i64,
    next_sub: u64,
    groups: HashMap<String, Group>,
}

/// A subscriber's id and channel.
type Sub = (u64, mpsc::Sender<Frame>);

struct Group {
    watch: Arc<Watch>,
    subs: Vec<Sub>,
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
        })))
    }

    pub fn engine(&self) -> &Engine {
        &self.0.engine
    }

    /// Most changes a subscriber may fall behind once it has caught up.
    pub fn lag_max(&self) -> i64 {
        self.0.lag_max
    }

    /// Adds a subscriber of `watch`: its id, its channel, and the newest number the hub had
    /// handed on (events after it come through the channel; earlier ones are the
    /// subscriber's own to read).
    fn join(&self, watch: &Arc<Watch>) -> (u64, mpsc::Receiver<Frame>, i64) {
        let (tx, rx) = mpsc::channel(CHANNEL);
        let mut st = self.0.state.lock().expect("hub state");
        st.next_sub += 1;
        let id = st.next_sub;
        st.groups
            .entry(watch.key().to_string())
            .or_insert_with(|| Group {
                watch: watch.clone(),
                subs: Vec::new(),
            })
            .subs
            .push((id, tx));
        (id, rx, st.last)
    }

    /// Removes subscriber `id` of `key` (gone, or let go).
    fn leave(&self, key: &str, id: u64) {
        let mut st = self.0.state.lock().expect("hub state");
        if let Some(g) = st.groups.get_mut(key) {
            g.subs.retain(|(s, _)| *s != id);
            if g.subs.is_empty() {
                st.groups.remove(key);
            }
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
        let groups: Vec<(Arc<Watch>, Vec<Sub>)> = {
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
            st.groups
                .values()
                .map(|g| (g.watch.clone(), g.subs.clone()))
                .collect()
        };
        let deadline = tokio::time::Instant::now() + PACE;
        for (watch, subs) in groups {
            let frames = frames(storage.as_ref(), &watch, &page.changes).await?;
            for (id, tx) in subs {
                if !deliver(&tx, &frames, deadline).await {
                    self.leave(watch.key(), id);
                }
            }
        }
        Ok(true)
    }
}

/// Sends `frames` to one subscriber, waiting until `deadline` at most while its channel is
/// full; whether all went.
async fn deliver(
    tx: &mpsc::Sender<Frame>,
    frames: &[Frame],
    deadline: tokio::time::Instant,
) -> bool {
    for f in frames {
        match tx.try_send(f.clone()) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(f)) => {
                match tokio::time::timeout_at(deadline, tx.send(f)).await {
                    Ok(Ok(())) => {}
                    _ => return false,
                }
            }
            Err(mpsc::error::TrySendError::Closed(_)) => return false,
        }
    }
    true
}

/// The frames `watch` gets of `changes`.
pub async fn frames(
    storage: &dyn crate::storage::Storage,
    watch: &Watch,
    changes: &[read::Change],
) -> crate::storage::Result<Vec<Frame>> {
    let mut out = Vec::new();
    for c in changes {
        if let Some(ev) = watch.event(storage, c).await? {
            out.push(Frame {
                seq: ev.seq,
                op: ev.op,
                data: ev.data().into(),
            });
        }
    }
    Ok(out)
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
                Ok(true) => continue,
                Ok(false) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "live changes: reading the log failed; trying again");
                    break;
                }
            }
        }
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
