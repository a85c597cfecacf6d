//! The undo kind: reverts what another background request applied, newest change first.
//! Objects it created are deleted, objects it updated get their values from before it back,
//! objects it deleted come back with their id and values. An object someone else changed
//! since is left as it is and named in the result as a conflict. Each chunk of changes is
//! reverted in one transaction with its own change records (so an undo can be undone), its
//! conflicts, and its progress (the number of the last change reverted), under the lease:
//! after a crash the undo goes on after the last chunk that committed.

use super::kinds::{JobKind, KindId};
use super::queue::add_detail;
use super::record::Request;
use super::undo_rules;
use super::{CANCELLED, ChunkEnd, Jobs};
use crate::engine::Caller;
use crate::engine::access::Guard;
use crate::engine::changes::{Recorder, row_json};
use crate::engine::retry::Retry;
use crate::schema::Entity;
use crate::storage::changes::{self, Change, ChangeOp};
use crate::storage::request_log::{self, ResultRow};
use crate::storage::{Dialect, PoolExec, Row, StorageError, Tx, Value};
use serde_json::{Value as Json, json};
use tokio::sync::watch;

/// Changes reverted per transaction.
const CHANGES_PER_CHUNK: i64 = 100;

/// Parameter naming the request an undo reverts.
pub const OF: &str = "of";
/// Parameter holding that request's `bg_requests` id (the stamp its updates wrote).
pub const OF_STAMP: &str = "of_stamp";

/// Reverts background requests.
pub struct Undo;

/// What reverting one chunk of changes came to.
#[derive(Default)]
struct Reverted {
    /// The undo's own records, so that it can be undone in turn.
    records: Vec<Change>,
    /// `(entity, id, why)` of each object left alone.
    conflicts: Vec<(String, i64, String)>,
    /// Objects changed.
    objects: i64,
    /// Users changed (their cached credentials must go).
    users: Vec<i64>,
}

impl Reverted {
    fn conflict(&mut self, e: &str, id: i64, why: impl Into<String>) {
        self.conflicts.push((e.to_string(), id, why.into()));
    }

    fn changed(&mut self, e: &Entity, id: i64) {
        self.objects += 1;
        if e.name == "users" {
            self.users.push(id);
        }
    }

    fn created(&mut self, e: &Entity, id: i64) {
        match self.records.last_mut() {
            Some(last)
                if last.op == ChangeOp::Create && last.entity == e.name && last.hi + 1 == id =>
            {
                last.hi = id
            }
            _ => self.records.push(Change {
                entity: e.name.clone(),
                op: ChangeOp::Create,
                lo: id,
                hi: id,
                before: None,
            }),
        }
    }

    fn before(&mut self, e: &Entity, op: ChangeOp, row: &Row) {
        let id = row[0].as_i64().unwrap_or_default();
        self.records.push(Change {
            entity: e.name.clone(),
            op,
            lo: id,
            hi: id,
            before: Some(row_json(e, row)),
        });
    }
}

const SAVEPOINT: &str = "SAVEPOINT undo_step";

/// Ends the savepoint a revert statement ran in: kept when it succeeded, rolled back when
/// the data as it stands now refused it (with why, in words); a broken database stays an
/// `Err`.
async fn settle<T>(
    tx: &mut dyn Tx,
    r: Result<T, StorageError>,
) -> Result<Result<T, String>, StorageError> {
    let why = match r {
        Ok(v) => {
            tx.execute("RELEASE SAVEPOINT undo_step", &[]).await?;
            return Ok(Ok(v));
        }
        Err(StorageError::Unique { column }) => format!(
            "its old value of `{}` is taken by another object now",
            column.unwrap_or_else(|| "a unique field".into())
        ),
        Err(StorageError::ForeignKey) => {
            "it refers to, or is referred to by, objects changed since".to_string()
        }
        Err(StorageError::NotNull { column }) => format!(
            "`{}` may not be empty under the entity's current definition",
            column.unwrap_or_default()
        ),
        Err(e) => {
            let _ = tx.execute("ROLLBACK TO SAVEPOINT undo_step", &[]).await;
            return Err(e);
        }
    };
    tx.execute("ROLLBACK TO SAVEPOINT undo_step", &[]).await?;
    Ok(Err(why))
}

/// The values of a stored row as JSON (see [`row_json`]) for the columns `e` has now; `id`
/// only when `with_id`. `updated_dt` becomes now.
fn values_of(e: &Entity, before: &str, with_id: bool, now: &str) -> Vec<(String, Value)> {
    let Ok(Json::Object(m)) = serde_json::from_str::<Json>(before) else {
        return Vec::new();
    };
    e.columns()
        .zip(e.col_types())
        .filter(|(c, _)| with_id || *c != "id")
        .filter_map(|(c, t)| {
            if c == "updated_dt" {
                return Some((c.to_string(), Value::text(now)));
            }
            m.get(c).map(|v| (c.to_string(), Value::from_json(t, v)))
        })
        .collect()
}

/// Reverts the creation of the objects `c` names: deletes those no one changed since, all
/// at once while the caller's rules admit every one, else one at a time.
async fn revert_create(
    tx: &mut dyn Tx,
    cx: &Ctx<'_>,
    e: &Entity,
    c: &Change,
    out: &mut Reverted,
) -> Result<(), StorageError> {
    let (d, revs) = (cx.d, cx.revs);
    let guard = undo_rules::guard_of(e, cx.who, ChangeOp::Create);
    let gone = match guard {
        Ok(None) => {
            tx.execute(SAVEPOINT, &[]).await?;
            let r = changes::delete_unchanged(tx, d, e, c.lo, c.hi, revs).await;
            match settle(tx, r).await? {
                Ok(rows) => rows,
                // Some object is referred to by one made since: one at a time, to tell which.
                Err(_) => delete_each(tx, d, e, c, revs, None, out).await?,
            }
        }
        Ok(Some(g)) => delete_each(tx, d, e, c, revs, Some(&g), out).await?,
        Err(()) => {
            for id in changes::ids_between(tx, d, e, c.lo, c.hi).await? {
                out.conflict(&e.name, id, undo_rules::REFUSED);
            }
            return Ok(());
        }
    };
    for row in &gone {
        out.before(e, ChangeOp::Delete, row);
        out.changed(e, row[0].as_i64().unwrap_or_default());
    }
    for id in changes::ids_between(tx, d, e, c.lo, c.hi).await? {
        if !out
            .conflicts
            .iter()
            .any(|(n, i, _)| n == &e.name && *i == id)
        {
            out.conflict(&e.name, id, "changed since it was created");
        }
    }
    Ok(())
}

/// Deletes the unchanged objects of `c` one at a time, each where `guard` (the caller's
/// rules) admits it, naming each one left alone.
async fn delete_each(
    tx: &mut dyn Tx,
    d: Dialect,
    e: &Entity,
    c: &Change,
    revs: &[i64],
    guard: Option<&Guard>,
    out: &mut Reverted,
) -> Result<Vec<Row>, StorageError> {
    let mut gone = Vec::new();
    for id in c.lo..=c.hi {
        if let Some(g) = guard
            && !undo_rules::admits(tx, d, e, g, id, None).await?
        {
            out.conflict(&e.name, id, undo_rules::REFUSED);
            continue;
        }
        tx.execute(SAVEPOINT, &[]).await?;
        let r = changes::delete_unchanged(tx, d, e, id, id, revs).await;
        match settle(tx, r).await? {
            Ok(rows) => gone.extend(rows),
            Err(why) => out.conflict(&e.name, id, why),
        }
    }
    Ok(gone)
}

/// Whether the caller's rules admit the revert of `op` on object `id` (`values`: what a
/// revert of a delete stores); the object is named as a conflict when they do not.
async fn rules_admit(
    tx: &mut dyn Tx,
    cx: &Ctx<'_>,
    e: &Entity,
    op: ChangeOp,
    id: i64,
    values: Option<&[(String, Value)]>,
    out: &mut Reverted,
) -> Result<bool, StorageError> {
    let admitted = match undo_rules::guard_of(e, cx.who, op) {
        Ok(None) => true,
        Ok(Some(g)) => undo_rules::admits(tx, cx.d, e, &g, id, values).await?,
        Err(()) => false,
    };
    if !admitted {
        out.conflict(&e.name, id, undo_rules::REFUSED);
    }
    Ok(admitted)
}

/// What every revert of a chunk shares: the dialect, the stamps that do not count as someone
/// else's change, this undo's own stamp, and its caller.
struct Ctx<'a> {
    d: Dialect,
    revs: &'a [i64],
    stamp: i64,
    who: &'a Caller,
}

/// Reverts one change inside `tx`, as `who` may. `revs` are the stamps that do not count as
/// someone else's change: the undone request's and this undo's own.
async fn revert(
    tx: &mut dyn Tx,
    cx: &Ctx<'_>,
    e: &Entity,
    c: &Change,
    out: &mut Reverted,
) -> Result<(), StorageError> {
    let (d, revs, stamp) = (cx.d, cx.revs, cx.stamp);
    let now = crate::time::now();
    let rev_of = |row: &Row| row.last().and_then(Value::as_i64);
    match c.op {
        ChangeOp::Create => revert_create(tx, cx, e, c, out).await?,
        ChangeOp::Update => {
            let id = c.lo;
            let Some(row) = changes::rows_by_ids(tx, d, e, &[id]).await?.pop() else {
                out.conflict(&e.name, id, "deleted since");
                return Ok(());
            };
            if !rev_of(&row).is_some_and(|r| revs.contains(&r)) {
                out.conflict(&e.name, id, "changed since");
                return Ok(());
            }
            if !rules_admit(tx, cx, e, c.op, id, None, out).await? {
                return Ok(());
            }
            let values = values_of(e, c.before.as_deref().unwrap_or("{}"), false, &now);
            tx.execute(SAVEPOINT, &[]).await?;
            // The write checks again that no one changed it since the read.
            let r = changes::overwrite(tx, d, e, id, values, stamp, revs).await;
            match settle(tx, r).await? {
                Ok(true) => {
                    out.before(e, ChangeOp::Update, &row);
                    out.changed(e, id);
                }
                Ok(false) => out.conflict(&e.name, id, "changed since"),
                Err(why) => out.conflict(&e.name, id, why),
            }
        }
        ChangeOp::Delete => {
            let id = c.lo;
            if !changes::ids_between(tx, d, e, id, id).await?.is_empty() {
                out.conflict(&e.name, id, "an object with its id exists again");
                return Ok(());
            }
            let values = values_of(e, c.before.as_deref().unwrap_or("{}"), true, &now);
            if !rules_admit(tx, cx, e, c.op, id, Some(&values), out).await? {
                return Ok(());
            }
            tx.execute(SAVEPOINT, &[]).await?;
            let r = changes::reinsert(tx, d, e, values, stamp).await;
            match settle(tx, r).await? {
                Ok(()) => {
                    out.created(e, id);
                    out.changed(e, id);
                }
                Err(why) => out.conflict(&e.name, id, why),
            }
        }
    }
    Ok(())
}

#[async_trait::async_trait]
impl JobKind for Undo {
    fn ids(&self) -> &'static [KindId] {
        &[KindId::Undo]
    }

    async fn run(
        &self,
        jobs: &Jobs,
        req: Request,
        stop: &watch::Receiver<bool>,
    ) -> Result<(), StorageError> {
        let rid = req.rid.as_str();
        let of = req.params[OF].as_str().unwrap_or_default().to_string();
        let revs = [req.params[OF_STAMP].as_i64().unwrap_or(-1), req.id];
        let rec = req.recorder();
        jobs.log(rid, &format!("started (worker {})", jobs.worker_id))
            .await?;
        let d = jobs.storage.dialect();
        let who = jobs.caller_of(req.user_id).await?.unwrap_or(Caller {
            id: req.user_id,
            login: String::new(),
            role: crate::schema::Role::user(),
        });
        let cx = Ctx {
            d,
            revs: &revs,
            stamp: rec.stamp,
            who: &who,
        };
        let mut done = req.done;
        let mut last = req.cursor;
        let mut pool = PoolExec(jobs.storage.as_ref());
        let mut conflicts = request_log::count_results(&mut pool, d, rid).await?;
        loop {
            if *stop.borrow() {
                return Ok(());
            }
            tokio::task::yield_now().await;
            let mut pool = PoolExec(jobs.storage.as_ref());
            let page = changes::newest_first(&mut pool, d, &of, last, CHANGES_PER_CHUNK).await?;
            let Some(&(next_last, _)) = page.last() else {
                break;
            };
            let mut retry = Retry::new("undo chunk");
            let end = loop {
                let at = Position {
                    done: done + page.len() as i64,
                    last: next_last,
                    conflicts,
                };
                match try_chunk(jobs, &req, &rec, &cx, &page, at).await {
                    Ok(end) => break end,
                    Err(e) if retry.again(&e).await => continue,
                    Err(e) => return Err(e),
                }
            };
            match end {
                ChunkEnd::Committed(r) => {
                    for id in r.users {
                        (jobs.engine.user_changed)(id);
                    }
                    conflicts += r.conflicts.len() as i64;
                }
                ChunkEnd::LeaseLost => {
                    tracing::warn!(rid, "lost the lease of an undo; another worker has it");
                    return Ok(());
                }
                ChunkEnd::Cancelled => {
                    let text = format!(
                        "cancelled: {done} of {} changes were reverted, the rest were not",
                        req.total
                    );
                    return jobs
                        .close(
                            &req,
                            CANCELLED,
                            200,
                            "application/json",
                            &result_path(rid),
                            &text,
                        )
                        .await;
                }
            }
            done += page.len() as i64;
            last = next_last;
        }
        let text = format!("done: {done} changes of {of} reverted, {conflicts} objects left alone");
        let mut tx = jobs.storage.begin().await?;
        add_detail(tx.as_mut(), d, rid, &text).await?;
        tx.commit().await?;
        jobs.finish(&req, 200, "application/json", &result_path(rid))
            .await
    }
}

fn result_path(rid: &str) -> String {
    format!("media/keep1m/bgrs.{rid}.result.json")
}

/// Where a chunk leaves the undo: changes reverted, the number of the last one, and the
/// conflicts recorded before this chunk.
struct Position {
    done: i64,
    last: i64,
    conflicts: i64,
}

/// One attempt at a chunk of changes: reverted, recorded and counted in one transaction.
async fn try_chunk(
    jobs: &Jobs,
    req: &Request,
    rec: &Recorder,
    cx: &Ctx<'_>,
    page: &[(i64, Change)],
    at: Position,
) -> Result<ChunkEnd<Reverted>, StorageError> {
    let d = cx.d;
    let rid = req.rid.as_str();
    let catalog = jobs.engine.catalog.load();
    let mut tx = jobs.storage.begin().await?;
    if jobs.cancel_requested_in(tx.as_mut(), rid).await? {
        tx.rollback().await?;
        return Ok(ChunkEnd::Cancelled);
    }
    let mut out = Reverted::default();
    let work = async {
        for (_, c) in page {
            match catalog.get(&c.entity) {
                Some(e) => revert(tx.as_mut(), cx, e, c, &mut out).await?,
                None => {
                    for id in c.lo..=c.hi {
                        out.conflict(&c.entity, id, "its entity no longer exists");
                    }
                }
            }
        }
        changes::record(tx.as_mut(), d, &rec.rid, &out.records).await?;
        let results = out
            .conflicts
            .iter()
            .enumerate()
            .map(|(i, (entity, id, why))| ResultRow {
                seq: at.conflicts + i as i64,
                status: 409,
                body: json!({
                    "error": "conflict",
                    "entity": entity,
                    "id": id,
                    "description": format!("left as it is: {why}"),
                })
                .to_string(),
            })
            .collect();
        request_log::insert_results(tx.as_mut(), d, rid, results).await?;
        if !jobs
            .advance(tx.as_mut(), req, at.done, Some(at.last))
            .await?
        {
            return Ok(false);
        }
        let line = format!(
            "changes {}-{} reverted: {} objects changed, {} left alone",
            at.done - page.len() as i64 + 1,
            at.done,
            out.objects,
            out.conflicts.len()
        );
        add_detail(tx.as_mut(), d, rid, &line).await?;
        Ok(true)
    }
    .await;
    match work {
        Ok(true) => {
            tx.commit().await?;
            Ok(ChunkEnd::Committed(out))
        }
        Ok(false) => {
            let _ = tx.rollback().await;
            Ok(ChunkEnd::LeaseLost)
        }
        Err(e) => {
            let _ = tx.rollback().await;
            Err(e)
        }
    }
}

/// The objects per entity an undo of `rid` would change (what it changed, counted once).
pub async fn preview(jobs: &Jobs, rid: &str) -> Result<Vec<(String, i64)>, StorageError> {
    let mut pool = PoolExec(jobs.storage.as_ref());
    changes::objects(&mut pool, jobs.storage.dialect(), rid).await
}

/// How many changes `rid` recorded.
pub async fn recorded(jobs: &Jobs, rid: &str) -> Result<i64, StorageError> {
    let mut pool = PoolExec(jobs.storage.as_ref());
    changes::count(&mut pool, jobs.storage.dialect(), rid).await
}

/// What an undo of `r` records as its own stored parameters.
/// The name of the request that undoes `rid`.
pub fn request_name(rid: &str) -> String {
    format!("POST /bgrs/{rid}/undo")
}

/// The undo of `rid` already asked for (queued, running, or done), if any: an undo that was
/// cancelled or failed does not count, so it may be asked for again.
pub async fn undone_by(jobs: &Jobs, rid: &str) -> crate::storage::Result<Option<String>> {
    crate::storage::requests::live_of_name(
        jobs.storage.as_ref(),
        KindId::Undo.name(),
        &request_name(rid),
        CANCELLED,
    )
    .await
}

pub fn params_of(r: &Request) -> Json {
    json!({ OF: r.rid, OF_STAMP: r.id })
}
