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
//! oldest snapshot still held. It also ends old snapshots every [`SWEEP`] while nothing is
//! committed, so that a thread gone idle holds none back from another process's checkpoint
//! (Litestream's).

use rusqlite::Connection;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TryRecvError, sync_channel};
use std::time::Duration;

/// Pages in the log past which the writer checkpoints by itself (SQLite's default is 1,000).
pub const WRITER_THRESHOLD: u32 = 8000;

/// How long the thread waits after a commit for the ones that follow, so that a run of
/// commits is checkpointed once.
const GATHER: Duration = Duration::from_millis(20);

/// How often the thread ends old read snapshots while nothing is committed.
const SWEEP: Duration = Duration::from_millis(100);

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
    loop {
        match commits.recv_timeout(SWEEP) {
            Ok(()) => {}
            Err(RecvTimeoutError::Timeout) => {
                release();
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => return,
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn snapshots_are_released_while_nothing_is_committed() {
        let dir = tempfile::tempdir().unwrap();
        let conn = Connection::open(dir.path().join("t.db")).unwrap();
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        let checkpoints = Checkpointer::start(
            conn,
            Box::new(move || {
                counted.fetch_add(1, Ordering::Relaxed);
            }),
        )
        .unwrap();
        std::thread::sleep(SWEEP * 4);
        assert!(calls.load(Ordering::Relaxed) >= 1);
        drop(checkpoints);
    }
}
