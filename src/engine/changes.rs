//! What a background request changes, recorded with the changes themselves (same
//! transaction) so that it can be undone ([`crate::jobs::undo`]) and listed (`changed_by`).
//! Creates are recorded as ranges of ids, one record per run of consecutive ids; an update or
//! a delete as one record holding the object's stored row before the chunk changed it.

use super::prepare::Prepared;
use super::{CallError, Op, Outcome};
use crate::schema::Entity;
use crate::storage::changes::{self, Change, ChangeOp};
use crate::storage::{Dialect, Exec, Row, StorageError};
use std::collections::{BTreeMap, HashMap};

/// Who records: the background request `rid`, whose `bg_requests` id is `stamp` (written into
/// every row it updates; see [`changes::REV`]).
#[derive(Debug, Clone)]
pub struct Recorder {
    pub rid: String,
    pub stamp: i64,
}

/// The stamp of calls made outside any background request.
pub const NO_REQUEST: i64 = 0;

/// A stored row (ending with [`changes::REV`]) as the JSON an undo writes back: the same form
/// the live-changes log keeps.
pub use crate::storage::live::row_json;

/// The changes of one chunk, gathered while it runs and written before it commits.
pub struct ChunkLog<'a> {
    rec: &'a Recorder,
    /// Stored rows before the chunk, by entity and id, of the objects it names by id.
    before: HashMap<(String, i64), Row>,
    changes: Vec<Change>,
}

impl<'a> ChunkLog<'a> {
    /// Starts the log of a chunk, reading the stored rows its updates and deletes name by id
    /// (one statement per entity).
    pub async fn start(
        rec: &'a Recorder,
        ex: &mut dyn Exec,
        d: Dialect,
        prepared: &[Result<Prepared, CallError>],
    ) -> Result<ChunkLog<'a>, StorageError> {
        let mut named: BTreeMap<&str, (&Entity, Vec<i64>)> = BTreeMap::new();
        for p in prepared.iter().filter_map(|p| p.as_ref().ok()) {
            if let (Some(id), true) = (p.id, p.op != Op::Create) {
                named
                    .entry(p.entity.name.as_str())
                    .or_insert_with(|| (p.entity.as_ref(), Vec::new()))
                    .1
                    .push(id);
            }
        }
        let mut before = HashMap::new();
        for (name, (e, mut ids)) in named {
            ids.sort_unstable();
            ids.dedup();
            for row in changes::rows_by_ids(ex, d, e, &ids).await? {
                if let Some(id) = row.first().and_then(|v| v.as_i64()) {
                    before.insert((name.to_string(), id), row);
                }
            }
        }
        Ok(ChunkLog {
            rec,
            before,
            changes: Vec::new(),
        })
    }

    /// The stamp the chunk's updates write.
    pub fn stamp(&self) -> i64 {
        self.rec.stamp
    }

    /// Reads the stored row a call naming its object by key is about to change.
    pub async fn read_by_key(
        &self,
        ex: &mut dyn Exec,
        d: Dialect,
        p: &Prepared,
    ) -> Result<Option<Row>, StorageError> {
        changes::row_by_key(ex, d, &p.entity, &p.key).await
    }

    /// Notes objects created together (ids in insertion order): a run of consecutive ids
    /// extends the last create record of `e`, any other id starts a record.
    pub fn created(&mut self, e: &Entity, ids: impl IntoIterator<Item = i64>) {
        let mut ids = ids.into_iter();
        let Some(first) = ids.next() else { return };
        // Whether the last record is a create range of `e`, compared once (not per id).
        let extends = self
            .changes
            .last()
            .is_some_and(|c| c.op == ChangeOp::Create && c.entity == e.name);
        let mut last = match self.changes.last_mut() {
            Some(c) if extends && c.hi + 1 == first => {
                c.hi = first;
                c
            }
            _ => self.start_range(e, first),
        };
        for id in ids {
            if last.hi + 1 == id {
                last.hi = id;
            } else {
                last = self.start_range(e, id);
            }
        }
    }

    /// A new create record of `e` holding `id`.
    fn start_range(&mut self, e: &Entity, id: i64) -> &mut Change {
        self.changes.push(Change {
            entity: e.name.clone(),
            op: ChangeOp::Create,
            lo: id,
            hi: id,
            before: None,
        });
        self.changes.last_mut().expect("just pushed")
    }

    /// Notes an applied call: `outcome` is what it returned, `by_key` the stored row read
    /// before it when it named its object by key.
    pub fn applied(&mut self, p: &Prepared, outcome: &Outcome, by_key: Option<Row>) {
        let Ok(obj) = outcome else { return };
        let Some(id) = p.id.or_else(|| super::outcome_id(obj)) else {
            return;
        };
        let before = by_key.or_else(|| self.before.get(&(p.entity.name.clone(), id)).cloned());
        let op = match (p.op, &before) {
            (Op::Create, _) | (Op::Save, None) => {
                self.created(&p.entity, [id]);
                return;
            }
            // Created earlier in this chunk: its create record covers it.
            (_, None) => return,
            (Op::Delete, Some(_)) => ChangeOp::Delete,
            (Op::Update | Op::Save, Some(_)) => ChangeOp::Update,
        };
        self.changes.push(Change {
            entity: p.entity.name.clone(),
            op,
            lo: id,
            hi: id,
            before: before.map(|row| row_json(&p.entity, &row)),
        });
    }

    /// Writes the chunk's records (inside its transaction), or adds them to `pending` to be
    /// written with a later chunk's.
    pub async fn write(
        self,
        ex: &mut dyn Exec,
        d: Dialect,
        pending: Option<&mut Pending>,
    ) -> Result<(), StorageError> {
        match pending {
            Some(p) => {
                p.absorb(self.changes);
                Ok(())
            }
            None => Pending(self.changes).write(self.rec, ex, d).await,
        }
    }
}

/// The change records of chunks that ran in one transaction, written once, before it commits
/// (one statement for several chunks).
#[derive(Debug, Default)]
pub struct Pending(Vec<Change>);

impl Pending {
    /// Adds a chunk's records; a create range that continues the last one extends it.
    fn absorb(&mut self, changes: Vec<Change>) {
        let mut changes = changes.into_iter();
        if let (Some(last), Some(first)) = (self.0.last_mut(), changes.as_slice().first())
            && last.op == ChangeOp::Create
            && first.op == ChangeOp::Create
            && last.entity == first.entity
            && last.hi + 1 == first.lo
        {
            last.hi = first.hi;
            changes.next();
        }
        self.0.extend(changes);
    }

    /// How many records are pending.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Drops the records after the first `n` (those of a chunk that ran again).
    pub fn truncate(&mut self, n: usize) {
        self.0.truncate(n);
    }

    /// Writes the records as `rec`'s (inside the transaction of their chunks).
    pub async fn write(
        self,
        rec: &Recorder,
        ex: &mut dyn Exec,
        d: Dialect,
    ) -> Result<(), StorageError> {
        if self.0.is_empty() {
            return Ok(());
        }
        changes::record(ex, d, &rec.rid, &self.0).await
    }
}
