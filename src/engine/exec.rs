//! Executes prepared calls in a storage transaction and maps storage failures to call errors.
//! Item-level failures (a taken unique value, a missing reference, no such id) are outcomes;
//! only a broken database is an `Err`, which aborts the transaction.

use super::access::{Guard, Need};
use super::prepare::Prepared;
use super::{CallError, Caller, Engine, Op, Outcome, render};
use crate::schema::Action;
use crate::schema::rules::Rule;
use crate::schema::{Entity, FieldType};
use crate::storage::entity::{self, Target};
use crate::storage::inserts;
use crate::storage::rules::{self, Bindings, Test};
use crate::storage::{Exec, PoolExec, Row, StorageError, Value};

/// Runs one prepared call on `ex`. With `isolate`, the call runs inside a savepoint so that its
/// failure leaves the rest of the transaction usable (needed on PostgreSQL, where a failed
/// statement aborts the transaction).
pub async fn execute(
    engine: &Engine,
    ex: &mut dyn Exec,
    caller: &Caller,
    p: &Prepared,
    isolate: bool,
    stamp: i64,
) -> Result<Outcome, StorageError> {
    if super::scripted::in_transaction(p) {
        return super::scripted::execute(engine, ex, caller, p, stamp).await;
    }
    if isolate {
        ex.execute("SAVEPOINT item", &[]).await?;
    }
    let result = run(ex, engine.storage.dialect(), p, stamp).await;
    if isolate
        && matches!(
            result,
            Err(StorageError::Database(_)
                | StorageError::Contention { .. }
                | StorageError::Full(_))
        )
    {
        let _ = ex.execute("ROLLBACK TO SAVEPOINT item", &[]).await;
    }
    let outcome = outcome_of(engine, p, result).await?;
    if isolate {
        let sql = if outcome.is_ok() {
            "RELEASE SAVEPOINT item"
        } else {
            "ROLLBACK TO SAVEPOINT item"
        };
        ex.execute(sql, &[]).await?;
    }
    Ok(outcome)
}

/// Runs one prepared call on `ex` with no savepoint. `None` when its statement broke a
/// constraint (a taken unique value, a missing reference, a missing value): on PostgreSQL that
/// aborted the transaction, and the caller runs the call again where a savepoint guards it
/// ([`execute`] with `isolate`), which tells its outcome.
pub async fn execute_unguarded(
    engine: &Engine,
    ex: &mut dyn Exec,
    caller: &Caller,
    p: &Prepared,
    stamp: i64,
) -> Result<Option<Outcome>, StorageError> {
    if super::scripted::in_transaction(p) {
        // Hooked calls keep a savepoint of their own: a failure leaves nothing behind.
        return super::scripted::execute(engine, ex, caller, p, stamp)
            .await
            .map(Some);
    }
    match run(ex, engine.storage.dialect(), p, stamp).await {
        Err(
            StorageError::Unique { .. } | StorageError::ForeignKey | StorageError::NotNull { .. },
        ) => Ok(None),
        result => outcome_of(engine, p, result).await.map(Some),
    }
}

/// The outcome of a call that ran: its object, or why it failed. An `Err` when the database
/// failed (the transaction is then rolled back).
pub(super) async fn outcome_of(
    engine: &Engine,
    p: &Prepared,
    result: Result<Done, StorageError>,
) -> Result<Outcome, StorageError> {
    Ok(match result {
        Ok(Done::Row(row)) => Ok(render::object(&p.entity, &row)),
        Ok(Done::Refused(e)) => Err(e),
        Ok(Done::Missing) => Err(missing(p)),
        Err(StorageError::Unique { column }) => Err(conflict(&p.entity, column)),
        Err(StorageError::NotNull { column }) => Err(CallError::invalid_field(
            column.as_deref().unwrap_or("value"),
            "may not be null",
        )),
        Err(StorageError::ForeignKey) if p.op == Op::Delete => {
            let id = match p.id {
                Some(id) => Some(id),
                None => {
                    let mut pool = PoolExec(engine.storage.as_ref());
                    let d = engine.storage.dialect();
                    entity::find_id(&mut pool, d, &p.entity, Target::Key(&p.key))
                        .await
                        .unwrap_or(None)
                }
            };
            Err(CallError::Referenced {
                by: referrers(engine, &p.entity, id).await,
            })
        }
        Err(StorageError::ForeignKey) => Err(CallError::InvalidReference {
            field: missing_reference(engine, p).await,
        }),
        Err(
            e @ (StorageError::Database(_)
            | StorageError::Contention { .. }
            | StorageError::Full(_)),
        ) => {
            return Err(e);
        }
    })
}

/// The error of a call whose object does not exist (for its caller).
pub(super) fn missing(p: &Prepared) -> CallError {
    if p.by_key() {
        CallError::NoKeyMatch {
            entity: p.entity.name.clone(),
            key: p
                .key
                .iter()
                .map(|(k, v)| (k.clone(), v.to_json()))
                .collect(),
        }
    } else {
        CallError::NotFound {
            entity: p.entity.name.clone(),
            id: p.id.unwrap_or_default(),
        }
    }
}

/// The error of a taken unique value. Storage names a unique index by its columns joined
/// with `_`, so a key of several fields is recognised by that name.
fn conflict(e: &Entity, column: Option<String>) -> CallError {
    match column {
        Some(c) if e.key.len() > 1 && c == e.key.join("_") => {
            CallError::KeyTaken { key: e.key.clone() }
        }
        column => CallError::Conflict { field: column },
    }
}

/// What running a prepared call came to.
pub(super) enum Done {
    /// The object created, updated or deleted.
    Row(crate::storage::Row),
    /// No object has that id or key.
    Missing,
    /// A save found no object to update and cannot create one.
    Refused(CallError),
}

/// Attempts at a save by key: each update that finds nothing is followed by an insert that
/// yields to a row another writer inserted meanwhile, which the next update then finds.
const SAVE_ATTEMPTS: usize = 3;

/// The values an update writes: the call's, and the stamp of who changed the row
/// ([`crate::storage::changes::REV`]).
fn stamped(p: &Prepared, stamp: i64) -> Vec<(String, Value)> {
    let mut values = Vec::with_capacity(p.values.len() + 1);
    values.extend(p.values.iter().cloned());
    values.push((crate::storage::changes::REV.to_string(), Value::int(stamp)));
    values
}

/// Writes a prepared call, deciding first what its rules leave to its transaction.
pub(super) async fn run(
    ex: &mut dyn Exec,
    d: crate::storage::Dialect,
    p: &Prepared,
    stamp: i64,
) -> Result<Done, StorageError> {
    let e = p.entity.as_ref();
    let found = |row: Option<crate::storage::Row>| row.map_or(Done::Missing, Done::Row);
    let target = match p.id {
        Some(id) => Target::Id(id),
        None => Target::Key(&p.key),
    };
    if let Some(g) = &p.guard {
        match guarded(ex, d, p, g, target).await? {
            Guarded::Go => {}
            Guarded::NoRow if p.op == Op::Save => {}
            Guarded::NoRow => return Ok(Done::Missing),
            Guarded::Refused(why) => return Ok(Done::Refused(why)),
        }
    }
    match p.op {
        Op::Create => inserts::insert(ex, d, e, p.values.clone())
            .await
            .map(Done::Row),
        Op::Update => Ok(found(
            entity::update(ex, d, e, target, stamped(p, stamp)).await?,
        )),
        Op::Delete => Ok(found(entity::delete(ex, d, e, target).await?)),
        Op::Save => {
            for _ in 0..SAVE_ATTEMPTS {
                if let Some(row) = entity::update(ex, d, e, target, stamped(p, stamp)).await? {
                    return Ok(Done::Row(row));
                }
                let values = match &p.create {
                    Some(Ok(v)) => v.clone(),
                    Some(Err(why)) => return Ok(Done::Refused(why.clone())),
                    None => return Ok(Done::Missing),
                };
                if let Some(g) = &p.guard
                    && !may_create(ex, d, e, g, &values).await?
                {
                    return Ok(Done::Refused(super::access::refused(e, Action::Create)));
                }
                if let Some(row) =
                    inserts::insert_unless_key_taken(ex, d, e, values, &e.key).await?
                {
                    return Ok(Done::Row(row));
                }
            }
            // The key kept appearing and vanishing under other writers: run it again.
            Err(StorageError::Contention {
                class: crate::storage::contention::Class::Serialization,
                message: "a save by key kept meeting other writers of the same key".into(),
            })
        }
    }
}

/// Whether a save that found no row may create one with `values`, by the `create` rule.
async fn may_create(
    ex: &mut dyn Exec,
    d: crate::storage::Dialect,
    e: &crate::schema::Entity,
    g: &Guard,
    values: &[(String, crate::storage::Value)],
) -> Result<bool, StorageError> {
    match (g.create, e.access.rule(Action::Create)) {
        (Need::Sql, Rule::Expr(x)) => {
            let bind = Bindings {
                caller: &g.caller,
                new: Some(values),
            };
            rules::check_new(ex, d, x, &bind).await
        }
        (need, _) => Ok(need != Need::Fail),
    }
}

/// What the rules a write's guard leaves to its transaction decide.
pub(super) enum Guarded {
    Go,
    /// No row has that id or key (or the caller may not see it).
    NoRow,
    Refused(CallError),
}

/// Decides a write's remaining rules: a create's on its values, an update's or delete's (and
/// `view`) on the stored row, which PostgreSQL keeps locked until the write.
pub(super) async fn guarded(
    ex: &mut dyn Exec,
    d: crate::storage::Dialect,
    p: &Prepared,
    g: &Guard,
    target: Target<'_>,
) -> Result<Guarded, StorageError> {
    let e = p.entity.as_ref();
    let new = (p.op != Op::Delete).then_some(p.values.as_slice());
    let bind = Bindings {
        caller: &g.caller,
        new,
    };
    let action = super::access::op_action(p.op);
    let test = |need: Need, action| need.test(e, action);
    if p.op == Op::Create {
        let passes = match test(g.op, action) {
            Test::Known(b) => b,
            Test::Expr(x) => rules::check_new(ex, d, x, &bind).await?,
        };
        return Ok(if passes {
            Guarded::Go
        } else {
            Guarded::Refused(super::access::refused(e, action))
        });
    }
    let tests = [test(g.view, Action::View), test(g.op, action)];
    Ok(
        match rules::check_row(ex, d, e, target, tests, &bind).await? {
            None => Guarded::NoRow,
            Some((false, _)) if p.op == Op::Save => {
                Guarded::Refused(super::access::refused(e, Action::Update))
            }
            Some((false, _)) => Guarded::NoRow,
            Some((true, false)) => Guarded::Refused(super::access::refused(e, action)),
            Some((true, true)) => Guarded::Go,
        },
    )
}

/// Which reference field of a failed write names a missing object (looked up outside the
/// failed transaction).
async fn missing_reference(engine: &Engine, p: &Prepared) -> Option<String> {
    let d = engine.storage.dialect();
    let mut pool = PoolExec(engine.storage.as_ref());
    for (col, v) in &p.values {
        let Some(f) = p.entity.field(col) else {
            continue;
        };
        let (FieldType::Reference(target), Value::Int(Some(id))) = (&f.ty, v) else {
            continue;
        };
        if !entity::exists(&mut pool, d, target, *id)
            .await
            .unwrap_or(true)
        {
            return Some(col.clone());
        }
    }
    None
}

/// Names of the entities whose objects still reference `e`'s object `id`.
async fn referrers(engine: &Engine, e: &Entity, id: Option<i64>) -> Vec<String> {
    let catalog = engine.catalog.load();
    let d = engine.storage.dialect();
    let mut out = Vec::new();
    for other in catalog.entities.values() {
        for f in other.references_to(&e.name) {
            let mut pool = PoolExec(engine.storage.as_ref());
            let found = entity::referenced(&mut pool, d, &other.name, &f.name, id)
                .await
                .unwrap_or(false);
            if found && !out.contains(&other.name) {
                out.push(other.name.clone());
            }
        }
    }
    out
}

/// Whether two prepared creates write the same columns of the same entity.
pub fn same_shape(a: &Prepared, b: &Prepared) -> bool {
    a.op == Op::Create
        && a.guard.is_none()
        && !super::scripted::in_transaction(a)
        && b.guard.is_none()
        && b.op == Op::Create
        && std::sync::Arc::ptr_eq(&a.entity, &b.entity)
        && a.shape.same(b.shape).unwrap_or_else(|| {
            a.values.len() == b.values.len()
                && a.values.iter().zip(&b.values).all(|(x, y)| x.0 == y.0)
        })
}

/// The outcome object of a row that a group insert returned: the whole object with `full`,
/// else its id alone (see [`super::outcome_id`]).
pub fn group_object(e: &Entity, row: &Row, full: bool) -> serde_json::Value {
    if full {
        render::object(e, row)
    } else {
        row.first().map_or(serde_json::Value::Null, Value::to_json)
    }
}

/// How a group insert ended (see [`insert_group`]).
pub enum Grouped {
    /// The rows created, in insertion order: whole with `full`, else their ids alone (see
    /// [`group_object`]).
    Inserted(Vec<Row>),
    /// A row would break a unique index: the statement changed nothing.
    Conflict,
    /// A row breaks another constraint (a reference, a required value): the statement changed
    /// nothing.
    Broken,
}

/// Inserts a group of same-shape creates with one multi-row statement; the rows come back
/// whole with `full`, else as their ids alone. When a row broke a constraint the statement
/// changed nothing, and the caller runs the rows in smaller groups, or one by one, to tell
/// which (with `isolate` the statement runs in a savepoint, for PostgreSQL, where a failed
/// statement aborts the transaction).
pub async fn insert_group(
    engine: &Engine,
    ex: &mut dyn Exec,
    group: &[&Prepared],
    isolate: bool,
    full: bool,
) -> Result<Grouped, StorageError> {
    let d = engine.storage.dialect();
    let (e, columns, args) = group_rows(group);
    savepoint(ex, isolate).await?;
    let result = inserts::insert_many(ex, d, e, &columns, &args, full).await;
    let inserted = settle(ex, isolate, result).await?;
    Ok(match inserted {
        Ok(rows) => Grouped::Inserted(rows),
        Err(StorageError::Unique { .. }) => Grouped::Conflict,
        Err(_) => Grouped::Broken,
    })
}

/// How an insert passing over conflicts ended (see [`insert_group_passing_conflicts`]).
pub enum Passed {
    /// For each call inserted, where it is in the group and its whole row, in insertion
    /// order. The calls passed over break a unique index when they run alone.
    Placed(Vec<(usize, Row)>),
    /// Nothing ran: the rows could not be told apart by their values.
    Unmatched,
    /// A row breaks another constraint (a reference, a required value): the statement changed
    /// nothing.
    Broken,
}

/// Inserts the creates of a group, passing over the rows that would break a unique index
/// (see [`inserts::insert_many_passing_conflicts`]).
pub async fn insert_group_passing_conflicts(
    engine: &Engine,
    ex: &mut dyn Exec,
    group: &[&Prepared],
    isolate: bool,
) -> Result<Passed, StorageError> {
    let d = engine.storage.dialect();
    let (e, columns, args) = group_rows(group);
    let Some(at) = inserts::told_apart(e, &columns, &args) else {
        return Ok(Passed::Unmatched);
    };
    savepoint(ex, isolate).await?;
    let result = inserts::insert_many_passing_conflicts(ex, d, e, &columns, &args, &at).await;
    Ok(match settle(ex, isolate, result).await? {
        Ok(placed) => Passed::Placed(placed),
        Err(_) => Passed::Broken,
    })
}

/// A group's entity, the columns its calls write, and their values, row after row.
fn group_rows<'a>(group: &[&'a Prepared]) -> (&'a Entity, Vec<&'a str>, Vec<&'a Value>) {
    let first = group[0];
    let columns: Vec<&str> = first.values.iter().map(|(c, _)| c.as_str()).collect();
    let mut args: Vec<&Value> = Vec::with_capacity(group.len() * columns.len());
    for p in group {
        args.extend(p.values.iter().map(|(_, v)| v));
    }
    (first.entity.as_ref(), columns, args)
}

/// Before a group's statement: a savepoint with `isolate`.
async fn savepoint(ex: &mut dyn Exec, isolate: bool) -> Result<(), StorageError> {
    if isolate {
        ex.execute("SAVEPOINT grp", &[]).await?;
    }
    Ok(())
}

/// After a group's statement: its work kept, or, when it broke a constraint (`Ok(Err(..))`),
/// undone back to the savepoint, and the transaction goes on. Any other failure is the outer
/// `Err`.
async fn settle<T>(
    ex: &mut dyn Exec,
    isolate: bool,
    result: Result<T, StorageError>,
) -> Result<Result<T, StorageError>, StorageError> {
    match result {
        Ok(v) => {
            if isolate {
                ex.execute("RELEASE SAVEPOINT grp", &[]).await?;
            }
            Ok(Ok(v))
        }
        Err(
            e @ (StorageError::Unique { .. }
            | StorageError::ForeignKey
            | StorageError::NotNull { .. }),
        ) => {
            if isolate {
                ex.execute("ROLLBACK TO SAVEPOINT grp", &[]).await?;
            }
            Ok(Err(e))
        }
        Err(e) => Err(e),
    }
}
