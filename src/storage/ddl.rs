//! The additive DDL plan: entity tables are created from the catalog, and columns a definition
//! gained are added, with the triggers that keep each table's row count (see
//! [`super::counts`]). Nothing here ever drops or narrows a column.

use super::{Dialect, Storage};
use crate::schema::{Catalog, Entity, FieldType};

/// Statements that bring the table of `entity` up to its definition, given the columns the
/// table has now (empty when it does not exist).
pub fn plan(d: Dialect, entity: &Entity, existing: &[String]) -> Vec<String> {
    let table = d.quote(&entity.name);
    let mut out = Vec::new();
    if existing.is_empty() {
        let mut cols = vec![d.id_column().to_string()];
        cols.extend(entity.fields.iter().map(|f| d.column_def(f)));
        cols.push("\"created_dt\" TEXT NOT NULL".into());
        cols.push("\"updated_dt\" TEXT NOT NULL".into());
        out.push(format!(
            "CREATE TABLE IF NOT EXISTS {table} ({})",
            cols.join(", ")
        ));
    } else {
        for f in &entity.fields {
            if !existing.iter().any(|c| c == &f.name) {
                let ine = if d == Dialect::Postgres {
                    "IF NOT EXISTS "
                } else {
                    ""
                };
                out.push(format!(
                    "ALTER TABLE {table} ADD COLUMN {ine}{}",
                    d.column_def(f)
                ));
            }
        }
    }
    for f in &entity.fields {
        let col = d.quote(&f.name);
        if f.unique {
            let idx = d.quote(&format!("{}_{}_key", entity.name, f.name));
            out.push(format!(
                "CREATE UNIQUE INDEX IF NOT EXISTS {idx} ON {table} ({col})"
            ));
        } else if matches!(f.ty, FieldType::Reference(_)) {
            let idx = d.quote(&format!("{}_{}_idx", entity.name, f.name));
            out.push(format!(
                "CREATE INDEX IF NOT EXISTS {idx} ON {table} ({col})"
            ));
        }
    }
    out.extend(super::counts::track(d, entity));
    out
}

/// Creates or extends the table of every entity of the catalog, references first.
pub async fn apply(storage: &dyn Storage, catalog: &Catalog) -> super::Result<()> {
    storage
        .batch_ddl(&super::counts::setup(storage.dialect()))
        .await?;
    for entity in catalog.entities.values() {
        let existing = storage.table_columns(&entity.name).await?;
        let stmts = plan(storage.dialect(), entity, &existing);
        if !stmts.is_empty() {
            storage.batch_ddl(&stmts).await?;
        }
    }
    Ok(())
}
