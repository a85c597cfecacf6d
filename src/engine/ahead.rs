//! Preparing a batch one chunk ahead of its writer: while chunk N runs in its transaction,
//! the calls of chunk N+1 are made and checked (parsing, validation, secrets hashed) on a
//! thread of their own, so the two halves of the work use both cores.

use super::batch::PreparedChunk;
use super::{Call, CallError, Caller, Engine};
use tokio::sync::mpsc;

/// Chunks of prepared calls, in the order of the calls.
pub struct Ahead {
    rx: mpsc::Receiver<PreparedChunk>,
    spent: mpsc::UnboundedSender<PreparedChunk>,
}

impl Ahead {
    /// Starts preparing `calls` in chunks of `chunk`. The calls are made on the preparing
    /// thread, so an iterator that parses its items does that work there too. The thread ends
    /// after the last chunk, or when the `Ahead` is dropped.
    pub fn spawn<I>(engine: Engine, caller: Caller, calls: I, chunk: usize) -> Ahead
    where
        I: Iterator<Item = Result<Call, CallError>> + Send + 'static,
    {
        let (tx, rx) = mpsc::channel::<PreparedChunk>(1);
        let (spent, mut freed) = mpsc::unbounded_channel::<PreparedChunk>();
        let handle = tokio::runtime::Handle::current();
        let span = tracing::Span::current();
        let mut calls = calls.peekable();
        // A thread of its own: on the runtime's workers it would wait behind the writer,
        // whose storage calls may not suspend.
        tokio::task::spawn_blocking(move || {
            let _entered = span.enter();
            while calls.peek().is_some() {
                while let Ok(done) = freed.try_recv() {
                    drop(done);
                }
                let part: Vec<_> = calls.by_ref().take(chunk.max(1)).collect();
                let prepared = handle.block_on(engine.prepare_chunk(&caller, part));
                if tx.blocking_send(prepared).is_err() {
                    return;
                }
            }
        });
        Ahead { rx, spent }
    }

    /// The next chunk, None after the last.
    pub async fn next(&mut self) -> Option<PreparedChunk> {
        self.rx.recv().await
    }

    /// Hands a chunk that ran back to be freed by the thread that made it (freeing across
    /// threads costs the allocator more).
    pub fn recycle(&self, chunk: PreparedChunk) {
        let _ = self.spent.send(chunk);
    }
}
