//! The batch and single-call kinds: a request whose stored items are calls. Each chunk of
//! items runs in one transaction with its results, progress and a details line, under the
//! lease; a chunk that meets contention is rolled back and runs again whole, so it still
//! applies exactly once.

use super::kinds::{JobKind, KindId};
use super::queue::add_detail;
use super::record::Request;
use super::{Advance, ChunkEnd, Jobs};
use crate::engine::batch::{Applied, Guard, Objects, item_call};
use crate::engine::prepare::Prepared;
use crate::engine::retry::Retry;
use crate::engine::whole::{Mode, settle};
use crate::engine::{Call, CallError, Caller, Op, Outcome, outcome_text};
use crate::schema::Role;
use crate::storage::StorageError;
use crate::storage::request_log::{self, ResultRow};
use serde_json::Value as Json;
use tokio::sync::watch;

/// Requests whose items are calls: a batch, or one backgrounded call.
pub struct Items {
    id: KindId,
}

impl Items {
    /// The batch kind: each item is an object for the request's operation.
    pub fn batch() -> Items {
        Items { id: KindId::Batch }
    }

    /// The single-call kind: the one item is the call itself.
    pub fn call() -> Items {
        Items { id: KindId::Call }
    }

    /// How a stored item becomes a call.
    fn item_to_call(&self, req: &Request, item: Json) -> Result<Call, CallError> {
        match self.id {
            KindId::Call => serde_json::from_value(item).map_err(|_| CallError::Internal),
            _ => {
                let op: Op = serde_json::from_value(req.params["op"].clone()).unwrap_or(Op::Create);
                let mut call = item_call(&req.entity, op, item)?;
                call.prehashed = req.params["prehashed"].as_bool() == Some(true);
                Ok(call)
            }
        }
    }
}

impl Items {
    /// The calls of stored items; each is refused when the request's user no longer exists.
    fn calls_of(
        &self,
        req: &Request,
        rows: &[request_log::ItemRow],
        user_exists: bool,
    ) -> Vec<Result<Call, CallError>> {
        rows.iter()
            .map(|row| {
                if !user_exists {
                    return Err(CallError::Forbidden(
                        "the user who started this request no longer exists".into(),
                    ));
                }
                let item: Json = serde_json::from_str(&row.item).unwrap_or(Json::Null);
                self.item_to_call(req, item)
            })
            .collect()
    }
}

/// Items per transaction. (On PostgreSQL 500 took 5 to 15% longer for a batch of 100,000 with
/// the same peak memory; 2,000 was 5 to 8% faster again but brought the peak near 64 MB.)
const CHUNK_ITEMS: i64 = 1000;

#[async_trait::async_trait]
impl JobKind for Items {
    fn ids(&self) -> &'static [KindId] {
        match self.id {
            KindId::Call => &[KindId::Call],
            _ => &[KindId::Batch],
        }
    }

    async fn run(
        &self,
        jobs: &Jobs,
        req: Request,
        stop: &watch::Receiver<bool>,
    ) -> Result<(), StorageError> {
        let rid = req.rid.as_str();
        let caller = jobs.caller_of(req.user_id).await?;
        jobs.log(rid, &format!("started (worker {})", jobs.worker_id))
            .await?;
        let mut done = req.done;
        let mode = Mode::of(&req.params);
        // A whole request commits its results with its effects, all at once: once any is
        // recorded, it only remains to finish it.
        if mode.whole() && done == 0 {
            let system = Caller {
                id: req.user_id,
                login: String::new(),
                role: Role::user(),
            };
            match self
                .run_whole(jobs, &req, caller.as_ref(), &system, mode, stop)
                .await?
            {
                WholeEnd::Recorded => {}
                WholeEnd::Stopped => return Ok(()),
                WholeEnd::Cancelled => return jobs.cancel_items(&req, 0).await,
            }
        }
        let system = Caller {
            id: req.user_id,
            login: String::new(),
            role: Role::user(),
        };
        let who = caller.clone().unwrap_or_else(|| system.clone());
        let mut ahead = (!mode.whole()).then(|| {
            let reading = Reading {
                jobs: jobs.clone(),
                kind: Items { id: self.id },
                req: req.clone(),
                user_exists: caller.is_some(),
                who: who.clone(),
            };
            ReadAhead::spawn(reading, done, CHUNK_ITEMS)
        });
        while let Some(ahead) = ahead.as_mut() {
            if *stop.borrow() {
                return Ok(());
            }
            // Storage calls may complete without suspending; let other tasks run.
            tokio::task::yield_now().await;
            let Some(next) = ahead.next().await else {
                break;
            };
            let (first, n, prepared) = next?;
            debug_assert_eq!(first, done, "chunks come in order");
            let who = &who;
            let mut retry = Retry::new("background chunk");
            // No savepoints unless an item of this chunk fails (see `Engine::begin_chunk`).
            let mut guard = Guard::Optimistic;
            let end = loop {
                match try_chunk(jobs, &req, who, &prepared, first, &mut guard).await {
                    Ok(end) => break end,
                    Err(e) if retry.again(&e).await => continue,
                    Err(e) => return Err(e),
                }
            };
            let applied = match end {
                ChunkEnd::Committed(applied) => applied,
                ChunkEnd::LeaseLost => {
                    tracing::warn!(
                        rid,
                        "lost the lease of a background request; another worker has it"
                    );
                    return Ok(());
                }
                ChunkEnd::Cancelled => return jobs.cancel_items(&req, done).await,
            };
            jobs.engine.announce(applied);
            done = first + n;
        }
        drop(ahead);
        let (status, ctype, path) = if self.id == KindId::Call {
            let status = jobs.results(rid, 0, 1).await?.first().map_or(500, |r| r.1);
            (
                status,
                "application/json",
                format!("media/keep1m/bgrs.{rid}.result.json"),
            )
        } else {
            (
                200,
                "application/json",
                format!("media/keep1m/bgrs.{rid}.result.json"),
            )
        };
        jobs.finish(&req, status, ctype, &path).await
    }
}

/// How a whole request's run ended.
enum WholeEnd {
    /// Its results are recorded (applied, or rolled back and said so).
    Recorded,
    /// Stopped, or its lease went to another worker: nothing is recorded.
    Stopped,
    /// A cancel was asked for before it ended: nothing applied.
    Cancelled,
}

impl Items {
    /// Runs every item of a dry run or an all-or-nothing request in one transaction, chunk
    /// after chunk; then commits its effects with the results (all succeeded, not a dry run),
    /// or rolls them back and records the results alone. A crash before the end leaves
    /// nothing, and the request runs again from its first item.
    async fn run_whole(
        &self,
        jobs: &Jobs,
        req: &Request,
        caller: Option<&Caller>,
        system: &Caller,
        mode: Mode,
        stop: &watch::Receiver<bool>,
    ) -> Result<WholeEnd, StorageError> {
        let rid = req.rid.as_str();
        let rows =
            request_log::next_items(jobs.storage.as_ref(), rid, 0, i64::from(i32::MAX)).await?;
        let calls = self.calls_of(req, &rows, caller.is_some());
        let ops: Vec<Option<Op>> = calls
            .iter()
            .map(|c| c.as_ref().ok().map(|c| c.op))
            .collect();
        let who = caller.unwrap_or(system);
        let prepared = jobs.engine.prepare_chunk(who, calls).await;
        let _lease = jobs.keep_lease(req);
        let mut retry = Retry::new("whole background request");
        let whole = Whole {
            jobs,
            req,
            who,
            mode,
            prepared: &prepared,
            ops: &ops,
        };
        loop {
            match whole.attempt(stop).await {
                Ok(end) => return Ok(end),
                Err(e) if retry.again(&e).await => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

/// A dry run or an all-or-nothing request, its calls prepared (see [`Items::run_whole`]).
struct Whole<'a> {
    jobs: &'a Jobs,
    req: &'a Request,
    who: &'a Caller,
    mode: Mode,
    prepared: &'a [Result<Prepared, CallError>],
    /// The operation of each call, where it was read.
    ops: &'a [Option<Op>],
}

impl Whole<'_> {
    /// One attempt: every chunk in one transaction, then the effects kept or rolled back, and
    /// the results, the progress and a details line recorded.
    async fn attempt(&self, stop: &watch::Receiver<bool>) -> Result<WholeEnd, StorageError> {
        let (jobs, req, mode) = (self.jobs, self.req, self.mode);
        let d = jobs.storage.dialect();
        let rid = req.rid.as_str();
        let mut tx = jobs.storage.begin().await?;
        let mut outcomes = Vec::with_capacity(self.prepared.len());
        for part in self.prepared.chunks(CHUNK_ITEMS as usize) {
            if *stop.borrow() {
                tx.rollback().await?;
                return Ok(WholeEnd::Stopped);
            }
            if jobs.cancel_requested_in(tx.as_mut(), rid).await? {
                tx.rollback().await?;
                return Ok(WholeEnd::Cancelled);
            }
            match jobs
                .engine
                .execute_chunk(tx.as_mut(), self.who, part, true, Some(&req.recorder()))
                .await
            {
                Ok(o) => outcomes.extend(o),
                Err(e) => {
                    let _ = tx.rollback().await;
                    return Err(e);
                }
            }
        }
        let applies = mode.applies(outcomes.iter().any(|o| o.is_err()));
        if !applies {
            tx.rollback().await?;
            tx = jobs.storage.begin().await?;
        }
        let raw = applies.then(|| outcomes.clone());
        let (summary, results) = self.results(&mut outcomes).await;
        let recorded = async {
            request_log::insert_results(tx.as_mut(), d, rid, results).await?;
            if !jobs
                .advance(tx.as_mut(), req, outcomes.len() as i64, None)
                .await?
            {
                return Ok(false);
            }
            add_detail(tx.as_mut(), d, rid, &summary).await?;
            Ok(true)
        }
        .await;
        match recorded {
            Ok(true) => {
                tx.commit().await?;
                if let Some(raw) = raw {
                    jobs.engine.after_chunk(self.prepared, &raw);
                }
                Ok(WholeEnd::Recorded)
            }
            Ok(false) => {
                let _ = tx.rollback().await;
                tracing::warn!(
                    rid,
                    "lost the lease of a background request; another worker has it"
                );
                Ok(WholeEnd::Stopped)
            }
            Err(e) => {
                let _ = tx.rollback().await;
                Err(e)
            }
        }
    }

    /// The outcomes settled as the mode shows them (a dry run's saves told as creates where
    /// they would create), with the details line that sums them up and the result rows.
    async fn results(&self, outcomes: &mut [Outcome]) -> (String, Vec<ResultRow>) {
        let mode = self.mode;
        let first = settle(mode, self.ops, outcomes, "item");
        if mode.dry_run {
            for (p, o) in self.prepared.iter().zip(outcomes.iter_mut()) {
                if let Ok(p) = p
                    && p.op == Op::Save
                {
                    self.jobs.engine.unborn_in_dry_run(p, o).await;
                }
            }
        }
        let summary = match (mode.dry_run, first) {
            (true, _) => "dry run: nothing was applied".to_string(),
            (false, Some(n)) => {
                format!("all or nothing: item {n} failed, so nothing was applied")
            }
            (false, None) => "all or nothing: every item was applied".to_string(),
        };
        let results = outcomes
            .iter()
            .enumerate()
            .map(|(i, o)| {
                let (status, body) = outcome_text(o);
                ResultRow {
                    seq: i as i64,
                    status: i64::from(status),
                    body,
                }
            })
            .collect();
        (summary, results)
    }
}

/// One attempt at a chunk of a batch: its calls, their results, the progress and a
/// details line commit together under the lease, so the chunk applies exactly once.
/// Rolled back when the lease is gone, when a cancel was asked for (read by the progress
/// update, in the same transaction), or with an `Err` when the database failed. Once
/// committed: what the chunk applied, to announce.
async fn try_chunk(
    jobs: &Jobs,
    req: &Request,
    who: &Caller,
    prepared: &[Result<Prepared, CallError>],
    first: i64,
    guard: &mut Guard,
) -> Result<ChunkEnd<Applied>, StorageError> {
    let d = jobs.storage.dialect();
    let rid = req.rid.as_str();
    // Created objects are written as text straight from their rows.
    let (mut tx, ran) = jobs
        .engine
        .begin_chunk(
            who,
            prepared,
            Objects::WholeLater,
            Some(&req.recorder()),
            None,
            guard,
            false,
        )
        .await?;
    let results = ran
        .results()
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let (status, body) = r.text();
            ResultRow {
                seq: first + i as i64,
                status: i64::from(status),
                body,
            }
        })
        .collect();
    let done = first + prepared.len() as i64;
    let recorded = async {
        request_log::insert_results(tx.as_mut(), d, rid, results).await?;
        let advance = jobs
            .advance_unless_cancelled(tx.as_mut(), req, done, None)
            .await?;
        if advance == Advance::Recorded && req.kind == KindId::Batch {
            add_detail(
                tx.as_mut(),
                d,
                rid,
                &format!("items {}-{} done", first + 1, done),
            )
            .await?;
        }
        Ok(advance)
    }
    .await;
    match recorded {
        Ok(Advance::Recorded) => {
            tx.commit().await?;
            Ok(ChunkEnd::Committed(ran.applied(prepared)))
        }
        Ok(Advance::Cancelled) => {
            tx.rollback().await?;
            Ok(ChunkEnd::Cancelled)
        }
        Ok(Advance::LeaseLost) => {
            let _ = tx.rollback().await;
            Ok(ChunkEnd::LeaseLost)
        }
        Err(e) => {
            let _ = tx.rollback().await;
            Err(e)
        }
    }
}

/// What the read-ahead of a background request needs to turn its items into calls.
struct Reading {
    jobs: Jobs,
    kind: Items,
    req: Request,
    /// Whether the request's user still exists (else no item runs).
    user_exists: bool,
    /// Whom the calls are prepared for.
    who: Caller,
}

/// A chunk of items read ahead: the seq of its first item, how many, and its calls prepared.
type AheadChunk = Result<(i64, i64, Vec<Result<Prepared, CallError>>), StorageError>;

/// Reads and prepares the next chunk of a background request's items on a thread of its own
/// while the worker writes the current one. Items never change once stored, so reading ahead
/// reads what the worker would; a chunk that runs again after contention reuses its calls.
struct ReadAhead {
    rx: tokio::sync::mpsc::Receiver<AheadChunk>,
}

impl ReadAhead {
    fn spawn(r: Reading, from: i64, size: i64) -> ReadAhead {
        let (tx, rx) = tokio::sync::mpsc::channel::<AheadChunk>(1);
        let handle = tokio::runtime::Handle::current();
        let span = tracing::Span::current();
        // A thread of its own: on the runtime's workers it would wait behind the worker,
        // whose storage calls may not suspend.
        tokio::task::spawn_blocking(move || {
            let _entered = span.enter();
            let mut seq = from;
            loop {
                let chunk = handle.block_on(r.chunk(seq, size));
                let end = match &chunk {
                    Ok((_, 0, _)) => return,
                    Ok((_, n, _)) => {
                        seq += n;
                        false
                    }
                    Err(_) => true,
                };
                if tx.blocking_send(chunk).is_err() || end {
                    return;
                }
            }
        });
        ReadAhead { rx }
    }

    /// The next chunk, None after the last item.
    async fn next(&mut self) -> Option<AheadChunk> {
        self.rx.recv().await
    }
}

impl Reading {
    /// The items from `seq` on (up to `size`), as prepared calls.
    async fn chunk(&self, seq: i64, size: i64) -> AheadChunk {
        let rows =
            request_log::read_items(self.jobs.storage.as_ref(), &self.req.rid, seq, size).await?;
        let calls = self.kind.calls_of(&self.req, &rows, self.user_exists);
        let n = calls.len() as i64;
        let prepared = self.jobs.engine.prepare_chunk(&self.who, calls).await;
        Ok((seq, n, prepared))
    }
}
