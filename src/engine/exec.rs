//! Executes prepared calls in a storage transaction and maps storage failures to call errors.
//! Item-level failures (a taken unique value, a missing reference, no such id) are outcomes;
//! only a broken database is an `Err`, which aborts the transaction.

use super::prepare::Prepared;
use super::{CallError, Caller, Engine, Op, Outcome, render};
use crate::schema::{Entity, FieldType};
use crate::storage::{Exec, PoolExec, StorageError, Value, entity};

/// Runs one prepared call on `ex`. With `isolate`, the call runs inside a savepoint so that its
/// failure leaves the rest of the transaction usable (needed on PostgreSQL, where a failed
/// statement aborts the transaction).
pub async fn execute(
    engine: &Engine,
    ex: &mut dyn Exec,
    _caller: &Caller,
    p: &Prepared,
    isolate: bool,
) -> Result<Outcome, StorageError> {
    if isolate {
        ex.execute("SAVEPOINT item", &[]).await?;
    }
    let result = run(ex, engine.storage.dialect(), p).await;
    let outcome = match result {
        Ok(Some(row)) => Ok(render::object(&p.entity, &row)),
        Ok(None) => Err(CallError::NotFound {
            entity: p.entity.name.clone(),
            id: p.id.unwrap_or_default(),
        }),
        Err(StorageError::Unique { column }) => Err(CallError::Conflict { field: column }),
        Err(StorageError::ForeignKey) if p.op == Op::Delete => Err(CallError::Referenced {
            by: referrers(engine, &p.entity, p.id).await,
        }),
        Err(StorageError::ForeignKey) => Err(CallError::InvalidReference {
            field: missing_reference(engine, p).await,
        }),
        Err(e @ StorageError::Database(_)) => {
            if isolate {
                let _ = ex.execute("ROLLBACK TO SAVEPOINT item", &[]).await;
            }
            return Err(e);
        }
    };
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

async fn run(
    ex: &mut dyn Exec,
    d: crate::storage::Dialect,
    p: &Prepared,
) -> Result<Option<crate::storage::Row>, StorageError> {
    let e = p.entity.as_ref();
    match (p.op, p.id) {
        (Op::Create, _) => entity::insert(ex, d, e, p.values.clone()).await.map(Some),
        (Op::Update, Some(id)) => entity::update(ex, d, e, id, p.values.clone()).await,
        (Op::Delete, Some(id)) => entity::delete(ex, d, e, id).await,
        _ => Ok(None),
    }
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
            let sql = format!(
                "SELECT 1 FROM {} WHERE {} = {} LIMIT 1",
                d.quote(&other.name),
                d.quote(&f.name),
                d.ph(1)
            );
            let args = [Value::Int(id)];
            let found = engine
                .storage
                .fetch(&sql, &args, &[crate::schema::ColType::Int])
                .await
                .map(|r| !r.is_empty())
                .unwrap_or(false);
            if found && !out.contains(&other.name) {
                out.push(other.name.clone());
            }
        }
    }
    out
}
