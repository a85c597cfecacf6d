//! Row counts per entity, kept by the database itself so that an unfiltered `X-Total-Count`
//! reads one row instead of scanning the table.
//!
//! The count changes inside the very transaction that inserts or deletes, so a rolled-back
//! write cannot drift it.
//!
//! - On SQLite (one writer at a time) the storage's own insert and delete statements
//!   ([`super::entity`], the only ones that write entity rows) tell the transaction how many
//!   rows they added or removed ([`super::Exec::count_rows`]), and the transaction adds that to
//!   `entity_counts` once per entity just before it commits ([`adjust_sql`]). A row trigger
//!   would cost as much again as the insert itself in a bulk upload. Every start and reload
//!   counts each table afresh ([`track`]), so rows written by another program are counted
//!   from then on.
//! - On PostgreSQL a shared counter row would serialise every writer of an entity, so the
//!   statement triggers ([`super::pg_triggers`]) append a delta row instead
//!   (`entity_count_deltas`, which nobody updates), and the storage folds the deltas into
//!   `entity_counts` every second in one statement; a count is the total plus the few pending
//!   deltas, read in one snapshot. The triggers see every writer, inside its savepoints.

use super::sql::Dialect;
use super::{Exec, Result, Value};
use crate::schema::{ColType, Entity};

/// Statements that create the count tables; idempotent. (PostgreSQL's trigger functions come
/// with the fixed tables, see [`super::pg_triggers`].)
pub fn setup(d: Dialect) -> Vec<String> {
    let mut out = vec![
        "CREATE TABLE IF NOT EXISTS \"entity_counts\" (\"entity\" TEXT PRIMARY KEY, \"n\" BIGINT NOT NULL)"
            .to_string(),
    ];
    if d == Dialect::Postgres {
        out.push(
            "CREATE TABLE IF NOT EXISTS \"entity_count_deltas\" (\"entity\" TEXT NOT NULL, \"n\" BIGINT NOT NULL)"
                .into(),
        );
        out.push(
            "CREATE INDEX IF NOT EXISTS \"entity_count_deltas_entity_idx\" ON \"entity_count_deltas\" (\"entity\")"
                .into(),
        );
    }
    out
}

/// Statements that make the table of `e` keep its count. They run in the same transaction,
/// after the table exists.
///
/// - SQLite: the count is taken afresh (and the row triggers of earlier versions dropped).
/// - PostgreSQL: the count, taken once when the entity has none yet (a table older than its
///   triggers, [`super::pg_triggers`], which the same transaction made just before).
pub fn track(d: Dialect, e: &Entity) -> Vec<String> {
    let table = d.quote(&e.name);
    // The entity name is a catalog identifier (`[a-z][a-z0-9_]*`): safe as a literal.
    let lit = format!("'{}'", e.name);
    match d {
        Dialect::Sqlite => {
            let mut out: Vec<String> = ["ins", "del"]
                .iter()
                .map(|name| {
                    let trigger = d.quote(&format!("entiserve_count_{name}_{}", e.name));
                    format!("DROP TRIGGER IF EXISTS {trigger}")
                })
                .collect();
            out.push(format!(
                "INSERT INTO \"entity_counts\" (\"entity\", \"n\") \
                 SELECT {lit}, (SELECT COUNT(*) FROM {table}) WHERE TRUE \
                 ON CONFLICT (\"entity\") DO UPDATE SET \"n\" = excluded.\"n\""
            ));
            out
        }
        Dialect::Postgres => vec![format!(
            "INSERT INTO \"entity_counts\" (\"entity\", \"n\") \
             SELECT {lit}, (SELECT COUNT(*) FROM {table}) \
             WHERE NOT EXISTS (SELECT 1 FROM \"entity_counts\" WHERE \"entity\" = {lit})"
        )],
    }
}

/// SQLite: the statement that adds `?1` rows to the count of entity `?2`, run by a
/// transaction before it commits.
pub const fn adjust_sql() -> &'static str {
    "UPDATE \"entity_counts\" SET \"n\" = \"n\" + ?1 WHERE \"entity\" = ?2"
}

/// PostgreSQL: folds every pending delta into its entity's total, in one statement.
pub const fn compact_sql() -> &'static str {
    "WITH d AS (DELETE FROM \"entity_count_deltas\" RETURNING \"entity\", \"n\"), \
     s AS (SELECT \"entity\", SUM(\"n\")::BIGINT AS \"n\" FROM d GROUP BY \"entity\") \
     INSERT INTO \"entity_counts\" (\"entity\", \"n\") SELECT \"entity\", \"n\" FROM s \
     ON CONFLICT (\"entity\") DO UPDATE SET \"n\" = \"entity_counts\".\"n\" + EXCLUDED.\"n\""
}

/// The number of rows of `e`, from its kept count; `None` when it has none (the table is not
/// tracked yet), and the caller counts the rows instead.
pub async fn total(ex: &mut dyn Exec, d: Dialect, e: &Entity) -> Result<Option<i64>> {
    let sql = match d {
        Dialect::Sqlite => "SELECT \"n\" FROM \"entity_counts\" WHERE \"entity\" = ?1",
        Dialect::Postgres => {
            "SELECT c.\"n\" + COALESCE((SELECT SUM(x.\"n\") FROM \"entity_count_deltas\" x \
             WHERE x.\"entity\" = $1), 0)::BIGINT \
             FROM \"entity_counts\" c WHERE c.\"entity\" = $1"
        }
    };
    let rows = ex
        .fetch(sql, &[Value::text(e.name.clone())], &[ColType::Int])
        .await?;
    Ok(rows.first().and_then(|r| r[0].as_i64()))
}
