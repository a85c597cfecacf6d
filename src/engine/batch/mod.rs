//! Batches: JSON array items become calls, and calls run in chunks, many per transaction.
//! A chunk is prepared (checked, secrets hashed) before its transaction begins, then executed
//! inside it; after contention the same prepared chunk runs again in a new transaction.
//! On PostgreSQL a chunk first runs with no savepoint; when a call fails (which aborts the
//! transaction there) it runs again with each call in a savepoint, so a failing one leaves the
//! others. On SQLite a failing statement undoes only itself, so no savepoint is needed.
//! A group insert that fails is run again without a statement per call: passing over the rows
//! that break a unique index, or else in halves (see [`Engine::execute_chunk`]).

use super::changes::{ChunkLog, NO_REQUEST, Pending, Recorder};
use super::prepare::{self, Prepared};
use super::retry::Retry;
use super::{Call, CallError, Caller, Engine, Op, Outcome};
use crate::schema::Entity;
use crate::storage::lock::{self, Mode};
use crate::storage::{Dialect, Row, StorageError, Tx};
use std::collections::BTreeMap;
use std::sync::Arc;

mod applied;
mod item;
mod run;

pub use applied::Applied;
pub use item::item_call;
use run::{ChunkRun, Later};

/// Most rows in one multi-row INSERT.
const GROUP_ROWS: usize = 500;

/// How a chunk's calls run on PostgreSQL, where a statement that fails aborts the whole
/// transaction. (On SQLite a failing statement undoes only itself: no savepoint is needed, and
/// both run the same.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guard {
    /// Each group insert and each call in a savepoint of its own, so that a failing one leaves
    /// the rest of the chunk: one outcome per call.
    Savepoints,
    /// No savepoint: cheaper when no call fails, but a call that breaks a constraint aborts
    /// the transaction, and the chunk then runs again with [`Guard::Savepoints`].
    Optimistic,
}

/// A chunk's calls, checked and ready to run: what [`Engine::prepare_chunk`] made of them.
pub type PreparedChunk = Vec<Result<Prepared, CallError>>;

/// What the creates of a group insert have for outcomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Objects {
    /// Their ids alone (see [`super::outcome_id`]).
    Ids,
    /// Their whole objects.
    Whole,
    /// Their whole objects, made (or written out as text straight from their rows) once the
    /// transaction is over (see [`Ran`]), so that the transaction does not wait for them.
    WholeLater,
}

impl Objects {
    fn of(full: bool) -> Objects {
        if full { Objects::Whole } else { Objects::Ids }
    }
}

/// The outcomes of a chunk that ran; the objects of its group inserts may still be rows.
pub struct Ran {
    outcomes: Vec<Outcome>,
    later: Vec<Later>,
}

/// A call's result in a [`Ran`].
pub enum Shown<'a> {
    Outcome(&'a Outcome),
    /// A created object, as the row it is made of.
    Created(&'a Entity, &'a Row),
}

impl Shown<'_> {
    /// The status and the JSON text of the body of the result.
    pub fn text(&self) -> (u16, String) {
        match self {
            Shown::Outcome(o) => super::outcome_text(o),
            Shown::Created(e, row) => (
                200,
                serde_json::to_string(&super::render::RowObject(e, row))
                    .expect("an object of stored values is JSON"),
            ),
        }
    }
}

impl Ran {
    /// The outcome of every call, each object made.
    pub fn finish(self) -> Vec<Outcome> {
        let mut outcomes = self.outcomes;
        for l in self.later {
            for (k, row) in l.members.into_iter().zip(&l.rows) {
                outcomes[k] = Ok(super::render::object(&l.entity, row));
            }
        }
        outcomes
    }

    /// Each call's result, in order: the rows of created objects not made yet are given as
    /// they are, to be written out without building the objects (see
    /// [`super::render::RowObject`]).
    pub fn results(&self) -> Vec<Shown<'_>> {
        let mut shown: Vec<Shown<'_>> = self.outcomes.iter().map(Shown::Outcome).collect();
        for l in &self.later {
            for (&k, row) in l.members.iter().zip(&l.rows) {
                shown[k] = Shown::Created(&l.entity, row);
            }
        }
        shown
    }

    /// What the chunk applied, once it committed. The objects not made yet are those of
    /// creates, which it does not need.
    pub fn applied(&self, prepared: &[Result<Prepared, CallError>]) -> Applied {
        Applied::of(prepared, &self.outcomes)
    }

    /// Every call failed with `err`.
    fn failed(err: CallError, n: usize) -> Ran {
        Ran {
            outcomes: std::iter::repeat_n(Err(err), n).collect(),
            later: Vec::new(),
        }
    }
}

impl Engine {
    /// Checks every call of a chunk, hashing secrets, before any transaction begins. The
    /// result can run (and, after contention, run again) with [`Engine::execute_chunk`].
    pub async fn prepare_chunk(
        &self,
        caller: &Caller,
        calls: Vec<Result<Call, CallError>>,
    ) -> PreparedChunk {
        let catalog = self.catalog.load();
        let now = crate::time::now();
        let mut calls = calls;
        let ran = super::scripted::before_creates(self, caller, &mut calls);
        let mut prepared = Vec::with_capacity(calls.len());
        // The calls of a chunk mostly name one entity: it is looked up once for a run of them.
        let mut named: Option<Arc<Entity>> = None;
        for (call, ran) in calls.into_iter().zip(ran) {
            let c = match call {
                Ok(c) => c,
                Err(e) => {
                    prepared.push(Err(e));
                    continue;
                }
            };
            let entity = match &named {
                Some(e) if e.name == c.entity => Ok(e.clone()),
                _ => catalog.entity(&c.entity),
            };
            prepared.push(match entity {
                Ok(e) => {
                    named = Some(e.clone());
                    prepare::prepare_entity(self, e, caller, c, &now, !ran).await
                }
                Err(e) => Err(e),
            });
        }
        prepared
    }

    /// Runs prepared calls in order inside `tx` and returns one outcome per call. The rows the
    /// chunk updates or deletes are locked first, in id order, so that overlapping chunks wait
    /// for each other instead of deadlocking. Consecutive creates of the same shape share one
    /// multi-row INSERT; without `full`, each row of such a group has its id alone for its
    /// outcome (see [`super::outcome_id`]). A group whose insert fails runs again: passing
    /// over the rows that break a unique index (those calls then run alone), or else in
    /// halves, down to single calls. On PostgreSQL each group and each call runs in a
    /// savepoint, so a failing one leaves the rest of the chunk. An `Err` means the database
    /// failed and the transaction must be rolled back (and, for contention, the chunk run
    /// again).
    pub async fn execute_chunk(
        &self,
        tx: &mut dyn Tx,
        caller: &Caller,
        prepared: &[Result<Prepared, CallError>],
        full: bool,
        rec: Option<&Recorder>,
    ) -> Result<Vec<Outcome>, StorageError> {
        let objects = Objects::of(full);
        let run = self
            .run_chunk(tx, caller, prepared, objects, rec, None, Guard::Savepoints)
            .await?;
        Ok(run
            .expect("a chunk run in savepoints has an outcome per call")
            .finish())
    }

    /// Runs a chunk in a transaction of its own, begun here, and returns the transaction
    /// (still open, for the caller's own writes and its commit) with the chunk's results, its
    /// created objects made when `objects` says (see [`Ran`]).
    /// On PostgreSQL the chunk first runs with no savepoint at all; when one of its statements
    /// broke a constraint (which aborts the transaction there) it is rolled back and runs again
    /// in a new transaction with a savepoint around each group and call, as
    /// [`Engine::execute_chunk`] does, which gives every call its outcome. `guard` starts as
    /// [`Guard::Optimistic`] and becomes [`Guard::Savepoints`] once the chunk fell back, so
    /// that running it again after contention goes straight to savepoints. On an `Err` the
    /// transaction was rolled back. With `pending`, the chunk's change records are added to it
    /// instead of written (see [`Pending`]). With `more`, further chunks will run in the
    /// transaction ([`Engine::continue_chunk`]), and their groups of creates share one copy
    /// ([`crate::storage::Exec::copy_groups`]).
    #[expect(
        clippy::too_many_arguments,
        reason = "the parts of one chunk's first run, named"
    )]
    pub async fn begin_chunk(
        &self,
        caller: &Caller,
        prepared: &[Result<Prepared, CallError>],
        objects: Objects,
        rec: Option<&Recorder>,
        mut pending: Option<&mut Pending>,
        guard: &mut Guard,
        more: bool,
    ) -> Result<(Box<dyn Tx>, Ran), StorageError> {
        let mark = pending.as_ref().map_or(0, |p| p.len());
        loop {
            let mut tx = self.storage.begin().await?;
            if more {
                tx.copy_groups();
            }
            match self
                .run_chunk(
                    tx.as_mut(),
                    caller,
                    prepared,
                    objects,
                    rec,
                    pending.as_deref_mut(),
                    *guard,
                )
                .await
            {
                Ok(Some(ran)) => return Ok((tx, ran)),
                Ok(None) => {
                    tx.rollback().await?;
                    if let Some(p) = pending.as_deref_mut() {
                        p.truncate(mark);
                    }
                    *guard = Guard::Savepoints;
                }
                Err(e) => {
                    let _ = tx.rollback().await;
                    return Err(e);
                }
            }
        }
    }

    /// Runs a further chunk in `tx`, a transaction that [`Engine::begin_chunk`] began and that
    /// holds earlier chunks, with no savepoint. `None` when one of its statements broke a
    /// constraint on PostgreSQL: the transaction is then aborted, with the earlier chunks, and
    /// must be rolled back. An `Err` means the database failed; roll back then too. With
    /// `pending`, the chunk's change records are added to it instead of written.
    pub async fn continue_chunk(
        &self,
        tx: &mut dyn Tx,
        caller: &Caller,
        prepared: &[Result<Prepared, CallError>],
        rec: Option<&Recorder>,
        pending: Option<&mut Pending>,
    ) -> Result<Option<Vec<Outcome>>, StorageError> {
        let guard = Guard::Optimistic;
        let ran = self
            .run_chunk(tx, caller, prepared, Objects::Ids, rec, pending, guard)
            .await?;
        Ok(ran.map(Ran::finish))
    }

    /// [`Engine::execute_chunk`] with the choice of `guard` and of when the created objects
    /// are made. `None` only with [`Guard::Optimistic`] on PostgreSQL, when a statement broke
    /// a constraint: the transaction is then aborted and must be rolled back.
    #[expect(
        clippy::too_many_arguments,
        reason = "the parts of one chunk's run, named"
    )]
    async fn run_chunk(
        &self,
        tx: &mut dyn Tx,
        caller: &Caller,
        prepared: &[Result<Prepared, CallError>],
        objects: Objects,
        rec: Option<&Recorder>,
        pending: Option<&mut Pending>,
        guard: Guard,
    ) -> Result<Option<Ran>, StorageError> {
        let d = self.storage.dialect();
        let postgres = d == Dialect::Postgres;
        if postgres {
            lock_targets(self, tx, prepared).await?;
        }
        let log = match rec {
            Some(r) => Some(ChunkLog::start(r, tx, d, prepared).await?),
            None => None,
        };
        let mut run = ChunkRun {
            engine: self,
            caller,
            prepared,
            objects,
            d,
            // Savepoints are needed only where a failed statement aborts the transaction.
            isolate: postgres && guard == Guard::Savepoints,
            optimistic: postgres && guard == Guard::Optimistic,
            stamp: log.as_ref().map_or(NO_REQUEST, ChunkLog::stamp),
            outcomes: vec![None; prepared.len()],
            later: Vec::new(),
            log,
        };
        let n = prepared.len();
        let mut i = 0;
        while i < n {
            let p = match &prepared[i] {
                Err(e) => {
                    run.outcomes[i] = Some(Err(e.clone()));
                    i += 1;
                    continue;
                }
                Ok(p) => p,
            };
            let (members, next) = run.group_at(i, p, tx.binds_arrays());
            if run.run_group(tx, p, &members).await?.is_none() {
                return Ok(None);
            }
            i = next;
        }
        let ChunkRun {
            outcomes,
            later,
            log,
            ..
        } = run;
        if let Some(log) = log {
            log.write(tx, d, pending).await?;
        }
        Ok(Some(Ran {
            outcomes: outcomes
                .into_iter()
                .map(|o| o.unwrap_or_else(|| Err(CallError::Internal)))
                .collect(),
            later,
        }))
    }

    /// After a chunk committed: tells listeners about the users it changed.
    pub fn after_chunk(&self, prepared: &[Result<Prepared, CallError>], outcomes: &[Outcome]) {
        self.announce(Applied::of(prepared, outcomes));
    }

    /// Tells listeners what committed chunks applied: the users they changed, and the counts
    /// of changes per entity and operation.
    pub fn announce(&self, applied: Applied) {
        for id in applied.users {
            (self.user_changed)(id);
        }
        for (entity, op, n) in applied.counts {
            crate::telemetry::applied(&entity, op.name(), n);
        }
    }

    /// Runs prepared calls in a transaction of their own and commits; after contention the
    /// whole chunk runs again in a new transaction (the calls are not prepared again). The
    /// created objects are made after the commit, by [`Ran::finish`].
    async fn commit_chunk(
        &self,
        caller: &Caller,
        prepared: &[Result<Prepared, CallError>],
    ) -> Result<Ran, StorageError> {
        let mut retry = Retry::new("batch chunk");
        let mut guard = Guard::Optimistic;
        loop {
            let result = async {
                let (tx, ran) = self
                    .begin_chunk(
                        caller,
                        prepared,
                        Objects::WholeLater,
                        None,
                        None,
                        &mut guard,
                        false,
                    )
                    .await?;
                tx.commit().await?;
                Ok(ran)
            }
            .await;
            match result {
                Ok(ran) => {
                    self.announce(ran.applied(prepared));
                    return Ok(ran);
                }
                Err(e) if retry.again(&e).await => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Runs a whole batch synchronously, in chunks of `chunk` calls per transaction. The calls
    /// are made and prepared one chunk ahead, on a thread of their own (see [`super::ahead`]),
    /// and each chunk's results are handed to `render` on another as soon as the chunk has
    /// committed, while the next one runs: what `render` made of each chunk, in order.
    pub async fn run_batch<I, R, T>(
        &self,
        caller: &Caller,
        calls: I,
        chunk: usize,
        render: R,
    ) -> Vec<T>
    where
        I: Iterator<Item = Result<Call, CallError>> + Send + 'static,
        R: Fn(Ran) -> T + Clone + Send + 'static,
        T: Send + 'static,
    {
        let mut parts = Vec::new();
        let mut ahead = super::ahead::Ahead::spawn(self.clone(), caller.clone(), calls, chunk);
        while let Some(prepared) = ahead.next().await {
            let ran = match self.commit_chunk(caller, &prepared).await {
                Ok(ran) => ran,
                Err(e) => Ran::failed(super::internal(e), prepared.len()),
            };
            ahead.recycle(prepared);
            let render = render.clone();
            parts.push(tokio::task::spawn_blocking(move || render(ran)));
        }
        let mut out = Vec::with_capacity(parts.len());
        for part in parts {
            match part.await {
                Ok(t) => out.push(t),
                Err(e) => std::panic::resume_unwind(e.into_panic()),
            }
        }
        out
    }
}

/// Locks, per entity and in id order, the rows that the chunk's updates and deletes name.
async fn lock_targets(
    engine: &Engine,
    tx: &mut dyn Tx,
    prepared: &[Result<Prepared, CallError>],
) -> Result<(), StorageError> {
    // Entity name -> (the entity, target ids, whether any is deleted).
    let mut targets: BTreeMap<&str, (&Prepared, Vec<i64>, bool)> = BTreeMap::new();
    for p in prepared.iter().filter_map(|p| p.as_ref().ok()) {
        let Some(id) = p.id.filter(|_| p.op != Op::Create) else {
            continue;
        };
        let t = targets
            .entry(p.entity.name.as_str())
            .or_insert_with(|| (p, Vec::new(), false));
        t.1.push(id);
        t.2 |= p.op == Op::Delete;
    }
    let d = engine.storage.dialect();
    for (first, mut ids, deletes) in targets.into_values() {
        ids.sort_unstable();
        ids.dedup();
        let mode = if deletes { Mode::Delete } else { Mode::Update };
        lock::rows_in_order(tx, d, &first.entity, &ids, mode).await?;
    }
    Ok(())
}
