//! The preparing stage of the row pipeline. Three stages run side by side, each on its own
//! thread: the reader parses the working copy into chunks of records and renders what their
//! result lines echo of the upload ([`Tails`]), this stage turns each chunk into checked
//! engine calls (the bundle's `on_row` hooks, coercion, validation), and the runner writes
//! the chunk it holds while the next one is prepared. Preparing needs no transaction, and a
//! chunk that runs again after contention reuses what was prepared.

use super::result_file::Tails;
use super::rows::Columns;
use super::run::{CHUNK, Hooks, Read, RowCalls, calls_of};
use crate::engine::batch::PreparedChunk;
use crate::engine::{Caller, Engine};
use crate::schema::Entity;
use crate::storage::StorageError;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::mpsc;

/// One chunk of records, and what they run as unless the runner stopped wanting that.
pub(super) struct Ready {
    pub records: Vec<csv::StringRecord>,
    pub work: Option<Result<Work, StorageError>>,
}

/// A chunk's prepared calls, with what the result file needs to know of its rows.
pub(super) struct Work {
    /// See [`RowCalls::kinds`].
    pub kinds: Vec<Option<bool>>,
    /// See [`RowCalls::changed_cells`].
    pub changed_cells: Vec<Vec<(usize, String)>>,
    pub prepared: PreparedChunk,
    /// The records' result cells after `res` and `id`, when the target renders them ahead.
    pub tails: Option<Tails>,
}

/// What a chunk left once it ran, given back to be freed on the thread that allocated most
/// of it (freeing across threads costs the allocator more); its records go back to the
/// reader, which reads the next chunk into them.
pub(super) struct Spent {
    pub records: Vec<csv::StringRecord>,
    #[expect(dead_code, reason = "held only to be freed")]
    pub prepared: PreparedChunk,
    #[expect(dead_code, reason = "held only to be freed")]
    pub outcomes: Vec<crate::engine::Outcome>,
}

/// The preparing stage of one run: chunks come out in the order the reader sent them.
pub(super) struct Stage {
    rx: mpsc::Receiver<Ready>,
    spent: mpsc::UnboundedSender<Spent>,
    /// Set when no later row runs (a cancel, a refused bundle): chunks then pass through
    /// without being prepared.
    skip: Arc<AtomicBool>,
    target: Arc<Target>,
}

/// What a chunk's calls are made with.
pub(super) struct Target {
    pub engine: Engine,
    pub caller: Caller,
    pub cols: Columns,
    pub entity: Arc<Entity>,
    pub hooks: Hooks,
    /// The separator of the result file, when the tails of its lines are rendered ahead
    /// (see [`Tails::possible`]).
    pub tails: Option<u8>,
}

impl Stage {
    /// Starts preparing the chunks `rows` receives, one chunk ahead of the runner. The stage
    /// ends when the reader does, or when the runner drops the stage.
    /// The records of a chunk that ran go back to the reader through `spare`, to be read
    /// into again.
    pub fn spawn(
        target: Target,
        mut rows: mpsc::Receiver<Read>,
        spare: std::sync::mpsc::Sender<Vec<csv::StringRecord>>,
    ) -> Stage {
        let (tx, rx) = mpsc::channel::<Ready>(1);
        let (spent, mut freed) = mpsc::unbounded_channel::<Spent>();
        let skip = Arc::new(AtomicBool::new(false));
        let skipping = skip.clone();
        let target = Arc::new(target);
        let ours = target.clone();
        let span = tracing::Span::current();
        let handle = tokio::runtime::Handle::current();
        // A thread of its own: on the runtime's workers this task would wait behind the
        // runner, whose storage calls may not suspend.
        tokio::task::spawn_blocking(move || {
            let _entered = span.enter();
            while let Some(Read { records, tails }) = rows.blocking_recv() {
                while let Ok(chunk) = freed.try_recv() {
                    // Once the reader has ended, the records are freed here.
                    let _ = spare.send(chunk.records);
                }
                let work = if skipping.load(Ordering::Relaxed) {
                    None
                } else {
                    Some(handle.block_on(prepare(&target, &records, tails)))
                };
                if tx.blocking_send(Ready { records, work }).is_err() {
                    return;
                }
            }
        });
        Stage {
            rx,
            spent,
            skip,
            target: ours,
        }
    }

    /// The next chunk, None after the last.
    pub async fn next(&mut self) -> Option<Ready> {
        self.rx.recv().await
    }

    /// The prepared calls of a chunk, prepared now if the stage had skipped it.
    pub async fn work(
        &self,
        work: Option<Result<Work, StorageError>>,
        records: &[csv::StringRecord],
    ) -> Result<Work, StorageError> {
        match work {
            Some(w) => w,
            None => prepare(&self.target, records, None).await,
        }
    }

    /// Hands a chunk that ran back to be freed by the stage.
    pub fn recycle(&self, chunk: Spent) {
        // Once the stage has ended, the chunk is freed here.
        let _ = self.spent.send(chunk);
    }

    /// Later chunks need not be prepared: none of their rows will run.
    pub fn skip_rest(&self) {
        self.skip.store(true, Ordering::Relaxed);
    }
}

/// The work of a chunk: its calls prepared, and the tails of its result lines, rendered here
/// unless the reader rendered them (`tails`).
async fn prepare(
    t: &Target,
    records: &[csv::StringRecord],
    tails: Option<Result<Tails, StorageError>>,
) -> Result<Work, StorageError> {
    debug_assert!(records.len() <= CHUNK);
    let RowCalls {
        kinds,
        calls,
        changed_cells,
    } = calls_of(&t.cols, &t.entity, records, &t.hooks);
    let prepared = t.engine.prepare_chunk(&t.caller, calls).await;
    let tails = match (tails, t.tails) {
        (Some(rendered), _) => Some(rendered?),
        (None, Some(separator)) => Some(Tails::render(&t.cols, records, separator)?),
        (None, None) => None,
    };
    Ok(Work {
        kinds,
        changed_cells,
        prepared,
        tails,
    })
}
