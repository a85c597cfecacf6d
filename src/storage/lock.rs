//! Row locks taken in one order. Two transactions that change the same rows in different
//! orders deadlock on PostgreSQL; when each first locks all the rows it will change in id
//! order, the second simply waits for the first. SQLite has one writer at a time, so there is
//! nothing to order there.

use super::sql::Dialect;
use super::{Exec, Result, Value, contention};
use crate::schema::{ColType, Entity};

/// How strongly rows are locked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// For updates that keep the key: the lock an `UPDATE` takes itself, which lets other
    /// transactions check references to the rows meanwhile.
    Update,
    /// For deletes: the lock a `DELETE` takes.
    Delete,
}

/// Locks the rows of `e` with `ids` (sorted, without repeats) in id order, waiting for
/// transactions that hold them. Ids without a row are ignored. Long waits are logged and
/// counted.
pub async fn rows_in_order(
    ex: &mut dyn Exec,
    d: Dialect,
    e: &Entity,
    ids: &[i64],
    mode: Mode,
) -> Result<()> {
    if d != Dialect::Postgres || ids.is_empty() {
        return Ok(());
    }
    debug_assert!(ids.windows(2).all(|w| w[0] < w[1]));
    let strength = match mode {
        Mode::Update => "FOR NO KEY UPDATE",
        Mode::Delete => "FOR UPDATE",
    };
    // One array parameter, written as PostgreSQL's array literal of integers.
    let list: Vec<String> = ids.iter().map(i64::to_string).collect();
    let sql = format!(
        "SELECT \"id\" FROM {} WHERE \"id\" = ANY({}::text::bigint[]) ORDER BY \"id\" {strength}",
        d.quote(&e.name),
        d.ph(1)
    );
    let started = std::time::Instant::now();
    ex.fetch(
        &sql,
        &[Value::text(format!("{{{}}}", list.join(",")))],
        &[ColType::Int],
    )
    .await?;
    let waited = started.elapsed();
    if waited >= contention::SLOW_LOCK_WAIT {
        contention::count_lock_wait(waited);
        tracing::info!(
            entity = %e.name,
            rows = ids.len(),
            waited_ms = waited.as_millis() as u64,
            "waited for row locks held by other writers"
        );
    }
    Ok(())
}
