//! Batches: JSON array items become calls, and calls run in chunks, many per transaction.
//! A chunk is prepared (checked, secrets hashed) before its transaction begins, then executed
//! inside it; after contention the same prepared chunk runs again in a new transaction.
//! On PostgreSQL a chunk first runs with no savepoint; when a call fails (which aborts the
//! transaction there) it runs again with each call in a savepoint, so a failing one leaves the
//! others. On SQLite a failing statement undoes only itself, so no savepoint is needed.
//! A group insert that fails is run again without a statement per call: passing over the rows
//! that break a unique index, or else in halves (see [`Engine::execute_chunk`]).

use super::changes::{ChunkLog, NO_REQUEST, Pending, Recorder};
use super::exec::{self, Grouped, Passed};
use super::prepare::{self, Prepared};
use super::retry::Retry;
use super::{Call, CallError, Caller, Engine, Op, Outcome};
use crate::schema::Entity;
use crate::storage::lock::{self, Mode};
use crate::storage::{Dialect, Row, StorageError, Tx};
use serde_json::{Map, Value as Json};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Most rows in one multi-row INSERT.
const GROUP_ROWS: usize = 500;

/// The call a batch item stands for, or why it stands for none.
pub fn item_call(entity: &str, op: Op, item: Json) -> Result<Call, CallError> {
    let id_of = |v: &Json| -> Option<i64> {
        v.as_i64()
            .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
    };
    match (op, item) {
        (Op::Create | Op::Save, Json::Object(m)) => Ok(Call {
            entity: entity.to_string(),
            op,
            id: None,
            params: m,
            prehashed: false,
        }),
        (Op::Update, Json::Object(mut params)) => {
            // Without `id` the item names its object by the entity's key (checked when the
            // call is prepared).
            let id = match params.remove("id") {
                None => None,
                Some(v) => Some(id_of(&v).ok_or_else(|| {
                    CallError::invalid_field(
                        "id",
                        "each item of a PUT batch needs an integer `id` (or the entity's key)",
                    )
                })?),
            };
            Ok(Call {
                entity: entity.to_string(),
                op,
                id,
                params,
                prehashed: false,
            })
        }
        (Op::Delete, Json::Object(m)) => {
            let id = m.get("id").and_then(id_of).ok_or_else(|| {
                CallError::invalid_field("id", "each item of a DELETE batch needs an integer `id`")
            })?;
            Ok(Call {
                entity: entity.to_string(),
                op,
                id: Some(id),
                params: Map::new(),
                prehashed: false,
            })
        }
        (Op::Delete, v) => match id_of(&v) {
            Some(id) => Ok(Call {
                entity: entity.to_string(),
                op,
                id: Some(id),
                params: Map::new(),
                prehashed: false,
            }),
            None => Err(CallError::invalid_field(
                "id",
                "a DELETE batch item is an id or an object with `id`",
            )),
        },
        _ => Err(CallError::Invalid {
            description: "a batch item must be a JSON object".into(),
            fields: Default::default(),
        }),
    }
}

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

/// Rows a group insert returned whose objects are made later: those of the calls `members`.
struct Later {
    entity: Arc<Entity>,
    members: Vec<usize>,
    rows: Vec<Row>,
}

/// One chunk's run under way (see [`Engine::run_chunk`]): what it runs, how, and the outcomes
/// so far.
struct ChunkRun<'a, 'l> {
    engine: &'a Engine,
    caller: &'a Caller,
    prepared: &'a [Result<Prepared, CallError>],
    objects: Objects,
    d: Dialect,
    /// Each statement in a savepoint (PostgreSQL, after a row broke a constraint).
    isolate: bool,
    /// No savepoint, and a broken constraint aborts the whole chunk (PostgreSQL).
    optimistic: bool,
    stamp: i64,
    outcomes: Vec<Option<Outcome>>,
    later: Vec<Later>,
    log: Option<ChunkLog<'l>>,
}

impl<'a> ChunkRun<'a, '_> {
    /// The group of call `i` (which is `p`): this call and the following creates of the same
    /// shape, passing over calls refused before the database (they have their outcome and
    /// change nothing); and where the next group starts.
    fn group_at(&mut self, i: usize, p: &Prepared, binds_arrays: bool) -> (Vec<usize>, usize) {
        let n = self.prepared.len();
        // Bound as arrays, a group's size is not limited by the number of parameters.
        let max = if binds_arrays {
            n
        } else {
            (30_000 / p.values.len().max(1)).clamp(1, GROUP_ROWS)
        };
        let mut members = vec![i];
        let mut j = i + 1;
        while j < n && members.len() < max {
            match &self.prepared[j] {
                Err(e) => self.outcomes[j] = Some(Err(e.clone())),
                Ok(q) if exec::same_shape(p, q) => members.push(j),
                Ok(_) => break,
            }
            j += 1;
        }
        (members, j)
    }

    /// Runs a group of calls of `p`'s entity. Its calls are inserted together. When a row
    /// breaks a unique index, the group is inserted once more passing over the rows that
    /// would (at once, when the chunk runs with savepoints because a row broke a constraint),
    /// and those run alone, each to its own conflict. Otherwise a group whose insert fails is
    /// split in two halves, tried in order, down to single calls, which run alone and get
    /// their own outcome: a few failing calls cost a few small inserts each, not a statement
    /// per call. Parts run in call order, so that of two calls with the same key the earlier
    /// is the one created, and ids rise in call order. `None` when a statement aborted the
    /// transaction (optimistic runs only).
    async fn run_group(
        &mut self,
        tx: &mut dyn Tx,
        p: &'a Prepared,
        members: &[usize],
    ) -> Result<Option<()>, StorageError> {
        let (engine, prepared, objects) = (self.engine, self.prepared, self.objects);
        let (isolate, optimistic) = (self.isolate, self.optimistic);
        let full = objects != Objects::Ids;
        // `todo`: the parts still to run, the next one last; with `true`, one that may
        // still be inserted passing over conflicts (only once along a line of halves).
        let mut todo: Vec<(&[usize], bool)> = vec![(members, true)];
        while let Some((part, may_pass)) = todo.pop() {
            if let [k] = *part {
                if self.run_alone(tx, k).await?.is_none() {
                    return Ok(None);
                }
                continue;
            }
            let group: Vec<&Prepared> = part
                .iter()
                .filter_map(|&k| prepared[k].as_ref().ok())
                .collect();
            let mut made = Made {
                entity: &p.entity,
                objects,
                outcomes: &mut self.outcomes,
                later: &mut self.later,
                log: self.log.as_mut(),
            };
            // With savepoints the chunk runs again because a row broke a constraint: the
            // part passes over conflicts at once, which spares an insert that would fail
            // again. Elsewhere the plain insert comes first.
            let mut passed = Passed::Unmatched;
            if isolate && may_pass {
                passed = exec::insert_group_passing_conflicts(engine, tx, &group, isolate).await?;
            }
            // Whether the part's rows cannot be told apart by their values (nor can its
            // halves' then).
            let mut unmatched = isolate && may_pass && matches!(passed, Passed::Unmatched);
            if let Passed::Unmatched = passed {
                passed = match exec::insert_group(engine, tx, &group, isolate, full).await? {
                    Grouped::Inserted(rows) => {
                        made.rows(part.to_vec(), rows);
                        continue;
                    }
                    // A row broke a constraint and, with no savepoint, aborted the
                    // transaction.
                    _ if optimistic => return Ok(None),
                    Grouped::Conflict if may_pass && !isolate => {
                        let passed =
                            exec::insert_group_passing_conflicts(engine, tx, &group, isolate)
                                .await?;
                        unmatched = matches!(passed, Passed::Unmatched);
                        passed
                    }
                    Grouped::Conflict | Grouped::Broken => Passed::Broken,
                };
            }
            if let Passed::Placed(placed) = passed {
                // The calls passed over run alone, in order, each to its own conflict.
                let mut inserted = vec![false; part.len()];
                let (ks, rows): (Vec<usize>, Vec<Row>) = placed
                    .into_iter()
                    .map(|(g, row)| {
                        inserted[g] = true;
                        (part[g], row)
                    })
                    .collect();
                made.rows(ks, rows);
                for g in (0..part.len()).rev().filter(|&g| !inserted[g]) {
                    todo.push((std::slice::from_ref(&part[g]), false));
                }
                continue;
            }
            // Halves; they need not try passing over conflicts where the rows cannot be
            // told apart.
            let (first, second) = part.split_at(part.len() / 2);
            let may_pass = may_pass && !unmatched;
            todo.push((second, may_pass));
            todo.push((first, may_pass));
        }
        Ok(Some(()))
    }

    /// Runs call `k` alone, to its own outcome. `None` when its statement aborted the
    /// transaction (optimistic runs only).
    async fn run_alone(&mut self, tx: &mut dyn Tx, k: usize) -> Result<Option<()>, StorageError> {
        let prepared = self.prepared;
        let Ok(p) = &prepared[k] else {
            return Ok(Some(()));
        };
        let by_key = match &self.log {
            Some(log) if p.by_key() => log.read_by_key(tx, self.d, p).await?,
            _ => None,
        };
        let o = if self.optimistic {
            match exec::execute_unguarded(self.engine, tx, self.caller, p, self.stamp).await? {
                Some(o) => o,
                None => return Ok(None),
            }
        } else {
            exec::execute(self.engine, tx, self.caller, p, self.isolate, self.stamp).await?
        };
        if let Some(log) = &mut self.log {
            log.applied(p, &o, by_key);
        }
        self.outcomes[k] = Some(o);
        Ok(Some(()))
    }
}

/// Where the rows a group insert created go: their calls' outcomes (or the objects made
/// later), and the chunk's change records.
struct Made<'a, 'l> {
    entity: &'a Arc<Entity>,
    objects: Objects,
    outcomes: &'a mut [Option<Outcome>],
    later: &'a mut Vec<Later>,
    log: Option<&'a mut ChunkLog<'l>>,
}

impl Made<'_, '_> {
    /// The calls `members` created `rows`, in the same order.
    fn rows(&mut self, members: Vec<usize>, rows: Vec<Row>) {
        if let Some(log) = self.log.as_deref_mut() {
            log.created(self.entity, rows.iter().filter_map(|r| r.first()?.as_i64()));
        }
        if self.objects == Objects::WholeLater {
            for &k in &members {
                self.outcomes[k] = Some(Ok(Json::Null));
            }
            self.later.push(Later {
                entity: self.entity.clone(),
                members,
                rows,
            });
        } else {
            let full = self.objects == Objects::Whole;
            for (&k, row) in members.iter().zip(&rows) {
                self.outcomes[k] = Some(Ok(exec::group_object(self.entity, row, full)));
            }
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
    /// instead of written (see [`Pending`]).
    pub async fn begin_chunk(
        &self,
        caller: &Caller,
        prepared: &[Result<Prepared, CallError>],
        objects: Objects,
        rec: Option<&Recorder>,
        mut pending: Option<&mut Pending>,
        guard: &mut Guard,
    ) -> Result<(Box<dyn Tx>, Ran), StorageError> {
        let mark = pending.as_ref().map_or(0, |p| p.len());
        loop {
            let mut tx = self.storage.begin().await?;
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
                .map(|o| o.unwrap_or(Err(CallError::Internal)))
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

/// What chunks applied, kept from when they ran until their transaction commits (see
/// [`Engine::announce`]): far smaller than the chunks themselves.
#[derive(Debug, Default)]
pub struct Applied {
    /// The users changed, by id.
    users: Vec<i64>,
    /// Changes applied per entity and operation (a few pairs at most).
    counts: Vec<(String, Op, u64)>,
}

impl Applied {
    /// What the calls of a chunk that ran with `outcomes` applied.
    pub fn of(prepared: &[Result<Prepared, CallError>], outcomes: &[Outcome]) -> Applied {
        let mut applied = Applied::default();
        // Consecutive calls of the same entity and operation (a chunk is mostly one run) are
        // counted once per run.
        let mut run: Option<((&str, Op), u64)> = None;
        for (p, o) in prepared.iter().zip(outcomes) {
            if let (Ok(p), Ok(obj)) = (p, o) {
                if let Some(id) = super::changed_user(p, obj) {
                    applied.users.push(id);
                }
                let key = (p.entity.name.as_str(), p.op);
                match &mut run {
                    Some((k, n)) if *k == key => *n += 1,
                    _ => {
                        if let Some((k, n)) = run.replace((key, 1)) {
                            applied.add(k, n);
                        }
                    }
                }
            }
        }
        if let Some((k, n)) = run {
            applied.add(k, n);
        }
        applied
    }

    fn add(&mut self, (entity, op): (&str, Op), n: u64) {
        match self
            .counts
            .iter_mut()
            .find(|(e, o, _)| e == entity && *o == op)
        {
            Some((_, _, c)) => *c += n,
            None => self.counts.push((entity.to_string(), op, n)),
        }
    }

    /// Adds what another chunk applied.
    pub fn merge(&mut self, other: Applied) {
        self.users.extend(other.users);
        for (entity, op, n) in other.counts {
            self.add((&entity, op), n);
        }
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
