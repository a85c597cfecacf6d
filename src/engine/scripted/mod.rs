//! Record hooks in JavaScript on the call path (an entity's `hooks:`; the runtime is
//! [`crate::script`]).
//!
//! - `beforeCreate` runs while a create is prepared ([`before_create`]), before its values are
//!   checked, so that what it stores is validated like any value.
//! - The hooks of updates, deletes and saves by key, and every `after*` hook, run in the
//!   write's transaction ([`execute`]), in a savepoint of their own: the stored object is read,
//!   `before*` may change the record or refuse, the result is checked again and written, and
//!   `after*` runs with a `ctx` that reads and writes through the same transaction.

mod host;

use super::prepare::{self, Prepared};
use super::{Call, CallError, Caller, Engine, Op, Outcome, render};
use crate::schema::Entity;
use crate::script::{Hook, HookFile};
use crate::storage::entity::{self, Target};
use crate::storage::{Exec, PoolExec, StorageError};
use serde_json::{Map, Value as Json};

use host::HookCall;
pub use host::MAX_DEPTH;

/// The hook `hook` of `e`, when its file defines it.
fn hook_of(e: &Entity, hook: Hook) -> Option<&HookFile> {
    e.hooks.as_ref().filter(|f| f.defines(hook))
}

/// Whether `p` runs through [`execute`]: its entity has hooks for its operation that run in
/// the write's transaction.
pub fn in_transaction(p: &Prepared) -> bool {
    let Some(file) = &p.entity.hooks else {
        return false;
    };
    let hooks: &[Hook] = match p.op {
        Op::Create => &[Hook::AfterCreate],
        Op::Update => &[Hook::BeforeUpdate, Hook::AfterUpdate],
        Op::Delete => &[Hook::BeforeDelete, Hook::AfterDelete],
        Op::Save => &[
            Hook::BeforeCreate,
            Hook::AfterCreate,
            Hook::BeforeUpdate,
            Hook::AfterUpdate,
        ],
    };
    hooks.iter().any(|h| file.defines(*h))
}

/// Runs `beforeCreate` of `e` on a create's parameters, reading through the database's
/// committed state; the record it gives becomes the call's parameters.
pub fn before_create(
    engine: &Engine,
    caller: &Caller,
    e: &Entity,
    call: &mut Call,
) -> Result<(), CallError> {
    let Some(file) = hook_of(e, Hook::BeforeCreate) else {
        return Ok(());
    };
    let mut pool = PoolExec(engine.storage.as_ref());
    let record = std::mem::take(&mut call.params);
    let hook = HookCall {
        file,
        hook: Hook::BeforeCreate,
        record,
        old: None,
    };
    let run = host::before(engine, &mut pool, caller, hook);
    call.params = run.map_err(host::Failure::into_call_error)?;
    Ok(())
}

/// Runs `beforeCreate` on the creates of a chunk whose entity has one, entity by entity, each
/// entity's records in one entry into JavaScript; each such call takes the record its hook
/// gave, or becomes the hook's error. Which calls ran it: those are prepared without running
/// it again, the plugins' `before_call` having run first as it does in [`prepare`]. Calls the
/// caller's role may not make are left to [`before_create`], which refuses them first.
pub fn before_creates(
    engine: &Engine,
    caller: &Caller,
    calls: &mut [Result<Call, CallError>],
) -> Vec<bool> {
    let mut ran = vec![false; calls.len()];
    let catalog = engine.catalog.load();
    let mut by_entity: Vec<(std::sync::Arc<Entity>, Vec<usize>)> = Vec::new();
    // The entity of the call before, and whether its creates run the hook here: a chunk's
    // calls are mostly of one entity, and the caller's role decides the same for each.
    let mut last: Option<(std::sync::Arc<Entity>, bool)> = None;
    for (i, call) in calls.iter().enumerate() {
        let Ok(call) = call else { continue };
        let (e, hooked) = match last.take() {
            Some((e, hooked)) if e.name == call.entity => (e, hooked),
            _ => match catalog.entity(&call.entity) {
                Ok(e) => {
                    let hooked = hook_of(&e, Hook::BeforeCreate).is_some()
                        && super::access::guard(&e, caller, Op::Create).is_ok();
                    (e, hooked)
                }
                Err(_) => continue,
            },
        };
        if call.op == Op::Create && hooked {
            match by_entity.iter_mut().rev().find(|(x, _)| x.name == e.name) {
                Some((_, at)) => at.push(i),
                None => by_entity.push((e.clone(), vec![i])),
            }
        }
        last = Some((e, hooked));
    }
    for (e, mut at) in by_entity {
        let Some(file) = hook_of(&e, Hook::BeforeCreate) else {
            continue;
        };
        for &i in &at {
            ran[i] = true;
            if let Ok(c) = &mut calls[i]
                && let Err(why) = engine.hooks.before_call(&e, caller, c)
            {
                calls[i] = Err(why);
            }
        }
        at.retain(|&i| calls[i].is_ok());
        let records = at
            .iter()
            .map(|&i| match &mut calls[i] {
                Ok(c) => std::mem::take(&mut c.params),
                Err(_) => Map::new(),
            })
            .collect();
        for (&i, out) in at
            .iter()
            .zip(host::before_creates(engine, caller, file, records))
        {
            match out {
                Ok(record) => {
                    if let Ok(c) = &mut calls[i] {
                        c.params = record;
                    }
                }
                Err(e) => calls[i] = Err(e),
            }
        }
    }
    ran
}

/// Runs `p` with its hooks in a savepoint of `ex`'s transaction: released when the call
/// succeeded, rolled back otherwise, whatever its hooks wrote through `ctx` included.
pub async fn execute(
    engine: &Engine,
    ex: &mut dyn Exec,
    caller: &Caller,
    p: &Prepared,
    stamp: i64,
) -> Result<Outcome, StorageError> {
    ex.execute("SAVEPOINT hooked", &[]).await?;
    let result = steps(engine, ex, caller, p, stamp).await;
    match &result {
        Ok(Ok(_)) => {
            ex.execute("RELEASE SAVEPOINT hooked", &[]).await?;
        }
        // Rolled back and released, so that an enclosing hooked call's savepoint of the same
        // name is the one it rolls back to.
        Ok(Err(_)) => {
            ex.execute("ROLLBACK TO SAVEPOINT hooked", &[]).await?;
            ex.execute("RELEASE SAVEPOINT hooked", &[]).await?;
        }
        Err(_) => {
            let _ = ex.execute("ROLLBACK TO SAVEPOINT hooked", &[]).await;
            let _ = ex.execute("RELEASE SAVEPOINT hooked", &[]).await;
        }
    }
    result
}

/// What a hooked write comes to once its stored object is known.
struct Resolved {
    /// The operation that runs: a save by key is an update of the object found, or a create.
    op: Op,
    id: Option<i64>,
    /// The stored object, for an update or a delete.
    old: Option<Map<String, Json>>,
}

/// The steps of [`execute`]: the stored object, `before*`, the checked write, `after*`.
async fn steps(
    engine: &Engine,
    ex: &mut dyn Exec,
    caller: &Caller,
    p: &Prepared,
    stamp: i64,
) -> Result<Outcome, StorageError> {
    let resolved = match resolve(engine, ex, p).await? {
        Ok(r) => r,
        Err(e) => return Ok(Err(e)),
    };
    let written = match written(engine, ex, caller, p, &resolved).await {
        Ok(q) => q,
        Err(f) => return f.outcome(),
    };
    let q = written.as_ref().unwrap_or(p);
    let result = super::exec::run(ex, engine.storage.dialect(), q, stamp).await;
    let outcome = super::exec::outcome_of(engine, q, result).await?;
    let Ok(obj) = outcome else {
        return Ok(outcome);
    };
    let (hook, record, old) = match resolved.op {
        Op::Create => (Hook::AfterCreate, object_map(&obj), None),
        Op::Update => (Hook::AfterUpdate, object_map(&obj), resolved.old),
        _ => (Hook::AfterDelete, object_map(&obj), None),
    };
    if let Some(file) = hook_of(&p.entity, hook) {
        let call = HookCall {
            file,
            hook,
            record,
            old,
        };
        let run = host::after(engine, ex, caller, stamp, call);
        if let Err(f) = run {
            return f.outcome();
        }
    }
    Ok(Ok(obj))
}

/// The stored object of an update, delete or save by key, as its caller may see it; a save
/// that finds none creates.
async fn resolve(
    engine: &Engine,
    ex: &mut dyn Exec,
    p: &Prepared,
) -> Result<Result<Resolved, CallError>, StorageError> {
    if p.op == Op::Create {
        return Ok(Ok(Resolved {
            op: Op::Create,
            id: None,
            old: None,
        }));
    }
    let d = engine.storage.dialect();
    let e = p.entity.as_ref();
    let target = match p.id {
        Some(id) => Target::Id(id),
        None => Target::Key(&p.key),
    };
    let mut found = None;
    if let Some(g) = &p.guard {
        match super::exec::guarded(ex, d, p, g, target).await? {
            super::exec::Guarded::Refused(why) => return Ok(Err(why)),
            super::exec::Guarded::NoRow => {}
            super::exec::Guarded::Go => found = entity::find_id(ex, d, e, target).await?,
        }
    } else {
        found = entity::find_id(ex, d, e, target).await?;
    }
    let row = match found {
        Some(id) => entity::get(ex, d, e, id).await?.map(|row| (id, row)),
        None => None,
    };
    Ok(match row {
        Some((id, row)) => Ok(Resolved {
            op: if p.op == Op::Save { Op::Update } else { p.op },
            id: Some(id),
            old: Some(object_map(&render::object(e, &row))),
        }),
        None if p.op == Op::Save => Ok(Resolved {
            op: Op::Create,
            id: None,
            old: None,
        }),
        None => Err(super::exec::missing(p)),
    })
}

/// The write that runs after `before*`, checked again from the record the hook gave;
/// `None` when `p` runs as it is (a create, prepared after its `beforeCreate`).
async fn written(
    engine: &Engine,
    ex: &mut dyn Exec,
    caller: &Caller,
    p: &Prepared,
    r: &Resolved,
) -> Result<Option<Prepared>, host::Failure> {
    let before = match r.op {
        Op::Update => Hook::BeforeUpdate,
        Op::Delete => Hook::BeforeDelete,
        _ => Hook::BeforeCreate,
    };
    if p.op == Op::Create || (p.op != Op::Save && hook_of(&p.entity, before).is_none()) {
        return Ok(None);
    }
    let Some(call) = p.call.as_deref() else {
        return Err(host::Failure::Call(CallError::Internal));
    };
    let e = p.entity.as_ref();
    let mut next = Call {
        entity: call.entity.clone(),
        op: r.op,
        id: r.id,
        params: Map::new(),
        prehashed: call.prehashed,
    };
    match (r.op, &r.old) {
        (Op::Update, Some(old)) => {
            let mut record = old.clone();
            record.extend(call.params.clone());
            let record = match hook_of(e, Hook::BeforeUpdate) {
                Some(file) => {
                    let hook = HookCall {
                        file,
                        hook: Hook::BeforeUpdate,
                        record,
                        old: Some(old.clone()),
                    };
                    host::before(engine, ex, caller, hook)?
                }
                None => record,
            };
            next.params = changes(record, old, &call.params);
        }
        (Op::Delete, Some(old)) => {
            if let Some(file) = hook_of(e, Hook::BeforeDelete) {
                let hook = HookCall {
                    file,
                    hook: Hook::BeforeDelete,
                    record: old.clone(),
                    old: None,
                };
                host::before(engine, ex, caller, hook)?;
            }
        }
        _ => {
            let mut params = call.params.clone();
            if let Some(file) = hook_of(e, Hook::BeforeCreate) {
                let hook = HookCall {
                    file,
                    hook: Hook::BeforeCreate,
                    record: params,
                    old: None,
                };
                params = host::before(engine, ex, caller, hook)?;
            }
            next.params = params;
        }
    }
    let catalog = engine.catalog.load();
    let now = crate::time::now();
    let q = prepare::prepare_with(engine, &catalog, caller, next, &now, false).await?;
    Ok(Some(q))
}

/// What an update writes after `beforeUpdate`: the fields the call named, and every field the
/// hook gave a value other than the stored one.
fn changes(
    record: Map<String, Json>,
    old: &Map<String, Json>,
    asked: &Map<String, Json>,
) -> Map<String, Json> {
    record
        .into_iter()
        .filter(|(k, v)| asked.contains_key(k) || old.get(k) != Some(v))
        .collect()
}

/// The fields of a rendered object.
fn object_map(obj: &Json) -> Map<String, Json> {
    match obj {
        Json::Object(map) => map.clone(),
        _ => Map::new(),
    }
}
