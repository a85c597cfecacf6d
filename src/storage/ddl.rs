//! The additive DDL plan: entity tables are created from the catalog, and columns a definition
//! gained are added, with the triggers that keep each table's row count (see
//! [`super::counts`]). Nothing here ever drops or narrows a column.

use super::{Dialect, Storage};
use crate::schema::{Catalog, Entity, Field, FieldType};

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
        cols.push(format!("{} BIGINT", d.quote(super::changes::REV)));
        out.push(format!(
            "CREATE TABLE IF NOT EXISTS {table} ({})",
            cols.join(", ")
        ));
    } else {
        // Tables made before changes were recorded gain the column that tells who last
        // changed a row.
        if !existing.iter().any(|c| c == super::changes::REV) {
            out.push(format!(
                "ALTER TABLE {table} ADD COLUMN {} BIGINT",
                d.quote(super::changes::REV)
            ));
        }
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
        } else if indexed(f) {
            let idx = d.quote(&format!("{}_{}_idx", entity.name, f.name));
            out.push(format!(
                "CREATE INDEX IF NOT EXISTS {idx} ON {table} ({col})"
            ));
        }
    }
    // A field a `list` or `view` rule reads gets an index on (field, id): a rule's page, in id
    // order, is read straight from it. On SQLite an index of the field alone is that index
    // already (its entries are ordered by rowid, the id, within a value).
    for f in entity.access.row_fields() {
        let needed = entity
            .field(&f)
            .is_some_and(|field| !field.unique && (d == Dialect::Postgres || !indexed(field)));
        if needed {
            let idx = d.quote(&rule_index(&entity.name, &f));
            out.push(format!(
                "CREATE INDEX IF NOT EXISTS {idx} ON {table} ({}, \"id\")",
                d.quote(&f)
            ));
        }
    }
    if let Some(idx) = entity.key_index() {
        let cols: Vec<String> = entity.key.iter().map(|c| d.quote(c)).collect();
        out.push(format!(
            "CREATE UNIQUE INDEX IF NOT EXISTS {} ON {table} ({})",
            d.quote(&idx),
            cols.join(", ")
        ));
    }
    // The triggers first: the row count, when first taken, is then kept by them from there.
    out.extend(super::pg_triggers::track(d, &entity.name));
    out.extend(super::counts::track(d, entity));
    out
}

/// The name of the index an access rule gives field `field` of `table`.
pub fn rule_index(table: &str, field: &str) -> String {
    format!("{table}_{field}_rule_idx")
}

/// Whether field `f` gets a plain (not unique) index, `<entity>_<field>_idx`: references
/// always, other fields with `index: true`. A unique field's index serves it already.
pub fn indexed(f: &Field) -> bool {
    !f.unique && (f.index || matches!(f.ty, FieldType::Reference(_)))
}

/// The names of the indexes of `table`, sorted (for `plan`-like reports and tests).
pub async fn index_names(storage: &dyn Storage, table: &str) -> super::Result<Vec<String>> {
    let sql = match storage.dialect() {
        Dialect::Sqlite => {
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?1 ORDER BY name"
        }
        Dialect::Postgres => {
            "SELECT indexname FROM pg_indexes WHERE tablename = $1 AND schemaname = current_schema() ORDER BY indexname"
        }
    };
    let rows = storage
        .fetch(
            sql,
            &[super::Value::text(table)],
            &[crate::schema::ColType::Text],
        )
        .await?;
    Ok(rows
        .into_iter()
        .filter_map(|r| r.into_iter().next().and_then(super::Value::into_string))
        .collect())
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
