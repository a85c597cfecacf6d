//! One chunk's run inside its transaction: its calls in groups of the same shape, each group
//! one insert where it can, split or run call by call when a row fails (see
//! [`crate::engine::Engine::execute_chunk`]).

use super::{GROUP_ROWS, Objects};
use crate::engine::changes::ChunkLog;
use crate::engine::exec::{self, Grouped, Passed};
use crate::engine::prepare::Prepared;
use crate::engine::{CallError, Caller, Engine, Outcome};
use crate::schema::Entity;
use crate::storage::{Dialect, Row, StorageError, Tx};
use serde_json::Value as Json;
use std::sync::Arc;

/// Rows a group insert returned whose objects are made later: those of the calls `members`.
pub(super) struct Later {
    pub(super) entity: Arc<Entity>,
    pub(super) members: Vec<usize>,
    pub(super) rows: Vec<Row>,
}

/// One chunk's run under way (see [`Engine::run_chunk`]): what it runs, how, and the outcomes
/// so far.
pub(super) struct ChunkRun<'a, 'l> {
    pub(super) engine: &'a Engine,
    pub(super) caller: &'a Caller,
    pub(super) prepared: &'a [Result<Prepared, CallError>],
    pub(super) objects: Objects,
    pub(super) d: Dialect,
    /// Each statement in a savepoint (PostgreSQL, after a row broke a constraint).
    pub(super) isolate: bool,
    /// No savepoint, and a broken constraint aborts the whole chunk (PostgreSQL).
    pub(super) optimistic: bool,
    pub(super) stamp: i64,
    pub(super) outcomes: Vec<Option<Outcome>>,
    pub(super) later: Vec<Later>,
    pub(super) log: Option<ChunkLog<'l>>,
}

impl<'a> ChunkRun<'a, '_> {
    /// The group of call `i` (which is `p`): this call and the following creates of the same
    /// shape, passing over calls refused before the database (they have their outcome and
    /// change nothing); and where the next group starts.
    pub(super) fn group_at(
        &mut self,
        i: usize,
        p: &Prepared,
        binds_arrays: bool,
    ) -> (Vec<usize>, usize) {
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
    pub(super) async fn run_group(
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
