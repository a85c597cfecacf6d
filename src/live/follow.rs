//! One subscriber's stream: `ready` (or `reset`), then its events in order, each once. It reads
//! the log itself until it reaches the hub ([`super::Live::join`]), then takes the hub's
//! frames, skipping any it has already read. Let go by the hub (pages it had not taken were
//! pushed out of its group's queue), it reads the log again from where it stopped.
//!
//! Once it has caught up with the hub, a stream more than the lag limit behind gets `reset`
//! and ends: when it takes a page after which more events than the limit were handed on to
//! its group, when it is let go, and at each page it reads on its own after that.

use super::frames::{Frames, control};
use super::watch::Watch;
use super::{Live, PAGE, Place, frames, read};
use crate::storage::PoolExec;
use crate::storage::live::bounds;
use bytes::Bytes;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// Where a stream starts.
#[derive(Debug, Clone, Copy)]
pub enum Start {
    /// With the next change.
    Now,
    /// After the change with this number (`Last-Event-ID`).
    After(i64),
}

enum Mode {
    /// Reading the log up to the hub.
    Reading,
    /// Joined the hub: its place in the group; numbers up to its `until` are still the
    /// stream's own to read.
    Joined(Place),
    Over,
}

/// One subscriber's place.
pub struct Follow {
    live: Live,
    watch: Arc<Watch>,
    /// The newest number sent or passed over.
    done: i64,
    mode: Mode,
    /// Whether the stream has caught up with the hub once (the lag limit applies from then).
    caught_up: bool,
}

impl Drop for Follow {
    fn drop(&mut self) {
        if let Mode::Joined(place) = std::mem::replace(&mut self.mode, Mode::Over) {
            drop(place);
            self.live.leave(self.watch.key());
        }
    }
}

/// Opens a stream of `watch` from `start`: the first thing it sends (`ready`, or `reset`),
/// and the stream that follows (`None` after a `reset`).
pub async fn open(
    live: &Live,
    watch: Arc<Watch>,
    start: Start,
) -> crate::storage::Result<(Bytes, Option<Follow>)> {
    let (newest, kept_from) = bounds(&mut PoolExec(live.engine().storage.as_ref())).await?;
    let from = match start {
        Start::Now => newest,
        Start::After(n) if n <= newest && n + 1 >= kept_from => n,
        Start::After(_) => return Ok((control("reset", newest), None)),
    };
    let follow = Follow {
        live: live.clone(),
        watch,
        done: from,
        mode: Mode::Reading,
        caught_up: false,
    };
    Ok((control("ready", from), Some(follow)))
}

impl Follow {
    /// The next text to send, waiting for it; `None` when the stream is over.
    pub async fn next(&mut self) -> crate::storage::Result<Option<Bytes>> {
        loop {
            let mode = std::mem::replace(&mut self.mode, Mode::Over);
            match mode {
                Mode::Over => return Ok(None),
                Mode::Reading => {
                    let hub = self.live.last();
                    // Let go once, then slower than the changes: the lag limit holds here too.
                    if self.caught_up && hub - self.done > self.live.lag_max() {
                        return Ok(Some(self.reset(hub)));
                    }
                    if self.done < hub {
                        self.mode = Mode::Reading;
                        // Boxed, as below: an idle stream then holds only its wait for the
                        // channel, not the state of a read of the log.
                        let out = Box::pin(self.read_to(hub)).await?;
                        if out.is_some() {
                            return Ok(out);
                        }
                        continue;
                    }
                    self.mode = Mode::Joined(self.live.join(&self.watch));
                    self.caught_up = true;
                }
                Mode::Joined(place) if self.done < place.until => {
                    let until = place.until;
                    self.mode = Mode::Joined(place);
                    let out = Box::pin(self.read_to(until)).await?;
                    if out.is_some() {
                        return Ok(out);
                    }
                }
                Mode::Joined(mut place) => match place.rx.recv().await {
                    Ok(page) => {
                        // More than the limit handed on after this page: too far behind.
                        let after = place.handed.load(Ordering::Relaxed);
                        if after.saturating_sub(page.handed) > self.live.lag_max().unsigned_abs() {
                            drop(place);
                            self.live.leave(self.watch.key());
                            return Ok(Some(self.reset(self.live.last())));
                        }
                        // A page a write: its text is shared, never copied.
                        let out = self.take(&page.frames);
                        self.mode = Mode::Joined(place);
                        if out.is_some() {
                            return Ok(out);
                        }
                    }
                    // Pages this stream had not taken were pushed out of the queue.
                    Err(_) => {
                        drop(place);
                        let out = Box::pin(self.let_go()).await?;
                        if out.is_some() {
                            return Ok(out);
                        }
                    }
                },
            }
        }
    }

    /// The text of the frames of `f` numbered above the stream's place, which moves past them.
    fn take(&mut self, f: &Frames) -> Option<Bytes> {
        let text = f.after(self.done)?;
        self.done = f.last().unwrap_or(self.done).max(self.done);
        Some(text)
    }

    /// The hub let this stream go: it reads the log again (nothing to send yet), or, too far
    /// behind, is reset.
    async fn let_go(&mut self) -> crate::storage::Result<Option<Bytes>> {
        self.live.leave(self.watch.key());
        let (newest, _) = bounds(&mut PoolExec(self.live.engine().storage.as_ref())).await?;
        if self.caught_up && newest - self.done > self.live.lag_max() {
            return Ok(Some(self.reset(newest)));
        }
        self.mode = Mode::Reading;
        Ok(None)
    }

    /// Ends the stream, too far behind: its `reset` with the newest number.
    fn reset(&mut self, newest: i64) -> Bytes {
        self.mode = Mode::Over;
        control("reset", newest)
    }

    /// Reads a page of the log after the stream's place, up to `until` at most.
    async fn read_to(&mut self, until: i64) -> crate::storage::Result<Option<Bytes>> {
        let storage = self.live.engine().storage.clone();
        let catalog = self.live.engine().catalog.load();
        let wanted = [self.watch.entity.name.clone()];
        let page = read::page(storage.as_ref(), &catalog, self.done, PAGE, &wanted).await?;
        // Nothing logged up to `until` is left to read (pruned meanwhile): passed over.
        let upto = if page.changes.is_empty() && page.upto <= self.done {
            until
        } else {
            page.upto.min(until)
        };
        let changes: Vec<read::Change> =
            page.changes.into_iter().filter(|c| c.seq <= upto).collect();
        let out = frames(storage.as_ref(), &self.watch, &changes).await?;
        let text = out.after(self.done);
        self.done = upto.max(self.done);
        Ok(text)
    }
}
