//! Checkpoints of SQLite's write-ahead log, on a connection and a thread of their own. A
//! commit only appends to the log; copying the log's pages back into the database file (and
//! the `fsync`s that go with it) would otherwise fall to whichever commit crosses SQLite's
//! automatic threshold, on the writer's thread, while every other write waits. Here the
//! writer only signals that it committed, and the copying runs beside it (a `PASSIVE`
//! checkpoint takes no lock a writer or a reader needs). The writer's own automatic
//! checkpoint stays, at a higher threshold, for when this thread falls behind.
//!
//! Before each checkpoint the thread ends the read snapshots that point readers keep past a
//! write ([`super::near::Readers::release_stale`]): the log can be copied back only up to the
//! oldest snapshot still held.

use rusqlite::Connection;
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};
use std::time::Duration;

/// Pages in the log past which the writer checkpoints by itself (SQLite's default is 1,000).
pub const WRITER_THRESHOLD: u32 = 8000;

/// How long the thread waits after a commit for the ones that follow, so that a run of
/// commits is checkpointed once.
const GATHER: Duration = Duration::from_millis(20);

/// The checkpointing thread; it ends when this is dropped.
pub struct Checkpointer {
    commits: SyncSender<()>,
}

impl Checkpointer {
    /// Starts checkpointing with `conn`, a connection to the database of its own;
    /// `release` runs before each checkpoint.
    pub fn start(conn: Connection, release: Release) -> std::io::Result<Checkpointer> {
        let (commits, rx) = sync_channel(1);
        std::thread::Builder::new()
            .name("sqlite-checkpoint".into())
            .spawn(move || run(conn, rx, release))?;
        Ok(Checkpointer { commits })
    }

    /// Tells the thread that a transaction committed.
    pub fn committed(&self) {
        // A signal already waiting covers this commit too.
        let _ = self.commits.try_send(());
    }
}

/// What ends the snapshots that would hold a checkpoint back.
pub type Release = Box<dyn Fn() + Send>;

fn run(conn: Connection, commits: Receiver<()>, release: Release) {
    while commits.recv().is_ok() {
        std::thread::sleep(GATHER);
        match commits.try_recv() {
            Ok(()) | Err(TryRecvError::Empty) => {}
            Err(TryRecvError::Disconnected) => return,
        }
        release();
        // (busy, pages in the log, pages copied): nothing to do with them, a later
        // checkpoint copies what this one could not.
        if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            tracing::warn!(error = %e, "checkpoint of the write-ahead log failed");
        }
    }
}
