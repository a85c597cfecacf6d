//! Brings the fixed tables (users, tokens, the job queue, ...) up to date from the SQL files in
//! `migrations/<backend>/`, recording each applied version in `schema_versions`.

use super::{Dialect, Storage};
use crate::schema::ColType;

/// `(version, SQLite script, PostgreSQL script)`, in order.
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        include_str!("../../migrations/sqlite/0001_auth.sql"),
        include_str!("../../migrations/postgres/0001_auth.sql"),
    ),
    (
        2,
        include_str!("../../migrations/sqlite/0002_jobs.sql"),
        include_str!("../../migrations/postgres/0002_jobs.sql"),
    ),
    (
        3,
        include_str!("../../migrations/sqlite/0003_cancel.sql"),
        include_str!("../../migrations/postgres/0003_cancel.sql"),
    ),
    (
        4,
        include_str!("../../migrations/sqlite/0004_token_tag.sql"),
        include_str!("../../migrations/postgres/0004_token_tag.sql"),
    ),
    (
        5,
        include_str!("../../migrations/sqlite/0005_entity_definitions.sql"),
        include_str!("../../migrations/postgres/0005_entity_definitions.sql"),
    ),
    (
        6,
        include_str!("../../migrations/sqlite/0006_changes.sql"),
        include_str!("../../migrations/postgres/0006_changes.sql"),
    ),
    (
        7,
        include_str!("../../migrations/sqlite/0007_blocks.sql"),
        include_str!("../../migrations/postgres/0007_blocks.sql"),
    ),
    (
        8,
        include_str!("../../migrations/sqlite/0008_live.sql"),
        include_str!("../../migrations/postgres/0008_live.sql"),
    ),
    (
        9,
        include_str!("../../migrations/sqlite/0009_live_ranges.sql"),
        include_str!("../../migrations/postgres/0009_live_ranges.sql"),
    ),
    (
        10,
        include_str!("../../migrations/sqlite/0010_one_trigger.sql"),
        include_str!("../../migrations/postgres/0010_one_trigger.sql"),
    ),
];

/// The version the fixed tables reach when every migration has run.
pub fn latest() -> i64 {
    MIGRATIONS.last().map_or(0, |m| m.0)
}

/// The version the fixed tables of a database are at, from its `schema_versions` (which must
/// exist).
pub async fn applied(ex: &mut dyn super::Exec) -> super::Result<i64> {
    Ok(ex
        .fetch(
            "SELECT COALESCE(MAX(\"version\"), 0) FROM \"schema_versions\"",
            &[],
            &[ColType::Int],
        )
        .await?
        .first()
        .and_then(|r| r[0].as_i64())
        .unwrap_or(0))
}

pub async fn run(storage: &dyn Storage) -> anyhow::Result<()> {
    let dialect = storage.dialect();
    storage
        .batch_ddl(&[
            "CREATE TABLE IF NOT EXISTS \"schema_versions\" (\"version\" BIGINT PRIMARY KEY, \"applied_dt\" TEXT NOT NULL)".to_string(),
        ])
        .await?;
    let at = applied(&mut super::AutoCommit(storage)).await?;
    if at > latest() {
        // A newer build changed these tables (how items and results are stored, say) in ways
        // this one would misread.
        anyhow::bail!(
            "the database's fixed tables are at version {at}, newer than this build knows ({}): \
             a newer entiserve has run on it; run that version or a later one",
            latest()
        );
    }
    for (version, sqlite, pg) in MIGRATIONS {
        if *version <= at {
            continue;
        }
        let script = match dialect {
            Dialect::Sqlite => sqlite,
            Dialect::Postgres => pg,
        };
        // The version is recorded first, in the script's transaction (which holds the schema
        // lock on PostgreSQL): when several servers start on one new database at once, each
        // reads the same applied version above, but only the first to get the lock runs the
        // script; the others' insert of the version fails before their script runs, and they
        // go on once they see the version recorded.
        let record = format!(
            "INSERT INTO \"schema_versions\" (\"version\", \"applied_dt\") VALUES ({version}, '{}')",
            crate::time::now()
        );
        if let Err(e) = storage.batch_ddl(&[record, script.to_string()]).await {
            if applied(&mut super::AutoCommit(storage)).await? >= *version {
                tracing::info!(version, "migration applied by another server");
                continue;
            }
            return Err(e.into());
        }
        tracing::info!(version, "applied migration");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::Value;

    #[tokio::test]
    async fn a_database_a_newer_build_migrated_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("t.db").display());
        let s = crate::storage::connect(&url).await.unwrap();
        assert!(
            run(s.as_ref()).await.is_ok(),
            "this build's own version is taken"
        );
        let sql = s.dialect().bind(
            "INSERT INTO \"schema_versions\" (\"version\", \"applied_dt\") VALUES (?, 'later')",
        );
        let mut ex = crate::storage::AutoCommit(s.as_ref());
        crate::storage::Exec::execute(&mut ex, &sql, &[Value::int(latest() + 1)])
            .await
            .unwrap();
        drop(s);
        let err = crate::storage::connect(&url).await.err().expect("refused");
        assert!(
            err.to_string().contains("newer than this build knows"),
            "{err}"
        );
    }
}
