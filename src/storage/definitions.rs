//! Statements on the record of entity definitions: the definitions last applied to the tables
//! (one row per entity, with a digest), and the history of applied changes.

use super::{Dialect, Exec, Result, Value};
use crate::schema::ColType;

/// One entity's definition as last applied.
#[derive(Debug, Clone)]
pub struct DefinitionRow {
    pub name: String,
    /// The definition as JSON text.
    pub definition: String,
    pub digest: String,
}

/// One applied change.
#[derive(Debug, Clone)]
pub struct ChangeRow {
    pub applied_dt: String,
    pub server: String,
    pub digest: String,
    /// The steps as a JSON array of text.
    pub steps: String,
}

/// Every recorded definition.
pub async fn load(ex: &mut dyn Exec) -> Result<Vec<DefinitionRow>> {
    let rows = ex
        .fetch(
            "SELECT \"name\", \"definition\", \"digest\" FROM \"entity_definitions\" ORDER BY \"name\"",
            &[],
            &[ColType::Text, ColType::Text, ColType::Text],
        )
        .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let mut it = r.into_iter().map(|v| v.into_string().unwrap_or_default());
            DefinitionRow {
                name: it.next().unwrap_or_default(),
                definition: it.next().unwrap_or_default(),
                digest: it.next().unwrap_or_default(),
            }
        })
        .collect())
}

/// Replaces the record with `rows`, applied at `now`.
pub async fn replace(
    ex: &mut dyn Exec,
    d: Dialect,
    rows: &[DefinitionRow],
    now: &str,
) -> Result<()> {
    ex.execute("DELETE FROM \"entity_definitions\"", &[])
        .await?;
    let sql = d.bind("INSERT INTO \"entity_definitions\" (\"name\", \"definition\", \"digest\", \"applied_dt\") VALUES (?, ?, ?, ?)");
    for r in rows {
        ex.execute(
            &sql,
            &[
                Value::text(&r.name),
                Value::text(&r.definition),
                Value::text(&r.digest),
                Value::text(now),
            ],
        )
        .await?;
    }
    Ok(())
}

/// Adds a change to the history.
pub async fn log_change(ex: &mut dyn Exec, d: Dialect, change: &ChangeRow) -> Result<()> {
    let sql = d.bind("INSERT INTO \"entity_changes\" (\"applied_dt\", \"server\", \"digest\", \"steps\") VALUES (?, ?, ?, ?)");
    ex.execute(
        &sql,
        &[
            Value::text(&change.applied_dt),
            Value::text(&change.server),
            Value::text(&change.digest),
            Value::text(&change.steps),
        ],
    )
    .await?;
    Ok(())
}

/// The last applied change.
pub async fn last_change(ex: &mut dyn Exec) -> Result<Option<ChangeRow>> {
    let rows = ex
        .fetch(
            "SELECT \"applied_dt\", \"server\", \"digest\", \"steps\" FROM \"entity_changes\" ORDER BY \"id\" DESC LIMIT 1",
            &[],
            &[ColType::Text, ColType::Text, ColType::Text, ColType::Text],
        )
        .await?;
    Ok(rows.into_iter().next().map(|r| {
        let mut it = r.into_iter().map(|v| v.into_string().unwrap_or_default());
        ChangeRow {
            applied_dt: it.next().unwrap_or_default(),
            server: it.next().unwrap_or_default(),
            digest: it.next().unwrap_or_default(),
            steps: it.next().unwrap_or_default(),
        }
    }))
}
