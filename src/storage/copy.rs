//! Statements that copy a whole database into another, empty one (`entiserve migrate-data`):
//! which tables there are and in what order, their columns as each database has them, pages of
//! rows read in key order, multi-row inserts, identity sequences moved past the copied ids, and
//! the kept row counts taken afresh. The command itself ([`crate::migrate_data`]) decides
//! what to copy and shows progress.

use super::{Dialect, Exec, Result, Row, Storage, Value};
use crate::schema::{Catalog, ColType, Entity, FieldType};

/// One table to copy: its name, the columns that order its rows and page through them (its
/// primary key), and the column an identity sequence fills, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    pub name: String,
    pub key: Vec<&'static str>,
    pub serial: Option<&'static str>,
    /// Whether some column references the table itself (rows may name rows copied later).
    pub self_referencing: bool,
}

/// The fixed tables (the migrations' own, beside entity tables), in an order where a table
/// comes after the tables it references. `users` is also an entity table when the catalog
/// defines it. Not here: `schema_versions` (the target's migrations write it), the row counts
/// (`entity_counts`, `entity_count_deltas`; taken afresh by [`recount`]).
const FIXED: &[(&str, &[&str], Option<&str>)] = &[
    ("users", &["id"], Some("id")),
    ("auth_tokens", &["token_hash"], None),
    ("bg_requests", &["id"], Some("id")),
    ("bg_items", &["rid", "seq"], None),
    ("bg_results", &["rid", "seq"], None),
    ("bg_details", &["id"], Some("id")),
    ("bg_changes", &["seq"], Some("seq")),
    ("idempotency_keys", &["user_id", "key"], None),
    ("entity_definitions", &["name"], None),
    ("entity_changes", &["id"], Some("id")),
];

/// Every table of a database brought to `catalog`, in copy order: the entity tables,
/// references first (the catalog's order), then the fixed tables.
pub fn tables(catalog: &Catalog) -> Vec<Table> {
    let entity = |e: &Entity| Table {
        name: e.name.clone(),
        key: vec!["id"],
        serial: Some("id"),
        self_referencing: e
            .fields
            .iter()
            .any(|f| matches!(&f.ty, FieldType::Reference(t) if *t == e.name)),
    };
    let mut out: Vec<Table> = Vec::new();
    if !catalog.entities.contains_key("users") {
        out.push(fixed(FIXED[0]));
    }
    out.extend(catalog.entities.values().map(|e| entity(e)));
    out.extend(
        FIXED
            .iter()
            .filter(|(name, _, _)| !catalog.entities.contains_key(*name))
            .map(|t| fixed(*t)),
    );
    out
}

fn fixed((name, key, serial): (&str, &'static [&'static str], Option<&'static str>)) -> Table {
    Table {
        name: name.to_string(),
        key: key.to_vec(),
        serial,
        self_referencing: false,
    }
}

/// The columns of `table` with their storage types, in the table's order; empty when there is
/// no such table.
pub async fn columns(ex: &mut dyn Exec, d: Dialect, table: &str) -> Result<Vec<(String, ColType)>> {
    let sql = match d {
        Dialect::Sqlite => "SELECT \"name\", \"type\" FROM pragma_table_info(?1) ORDER BY \"cid\"",
        Dialect::Postgres => {
            "SELECT column_name::text, data_type::text FROM information_schema.columns \
             WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position"
        }
    };
    let rows = ex
        .fetch(sql, &[Value::text(table)], &[ColType::Text, ColType::Text])
        .await?;
    Ok(rows
        .into_iter()
        .filter_map(|r| {
            let mut it = r.into_iter().map(Value::into_string);
            let name = it.next()??;
            let ty = it.next().flatten().unwrap_or_default();
            Some((name, storage_type(&ty)))
        })
        .collect())
}

/// The storage type of a declared SQL type (SQLite's affinity rules, PostgreSQL's type names).
fn storage_type(declared: &str) -> ColType {
    let t = declared.to_ascii_uppercase();
    if t.contains("BOOL") {
        ColType::Bool
    } else if t.contains("INT") {
        ColType::Int
    } else if t == "NUMERIC" {
        // PostgreSQL's exact decimals (SQLite keeps them as canonical text).
        ColType::Decimal
    } else if t.contains("REAL") || t.contains("FLOA") || t.contains("DOUB") {
        ColType::Float
    } else {
        ColType::Text
    }
}

/// Whether `table` holds at least one row.
pub async fn has_rows(ex: &mut dyn Exec, d: Dialect, table: &str) -> Result<bool> {
    let sql = format!("SELECT CAST(1 AS BIGINT) FROM {} LIMIT 1", d.quote(table));
    Ok(!ex.fetch(&sql, &[], &[ColType::Int]).await?.is_empty())
}

/// The number of rows of `table`.
pub async fn count(ex: &mut dyn Exec, d: Dialect, table: &str) -> Result<i64> {
    let sql = format!("SELECT COUNT(*) FROM {}", d.quote(table));
    let rows = ex.fetch(&sql, &[], &[ColType::Int]).await?;
    Ok(rows.first().and_then(|r| r[0].as_i64()).unwrap_or(0))
}

/// The version of the fixed tables of a database: 0 when it has none.
pub async fn schema_version(ex: &mut dyn Exec, d: Dialect) -> Result<i64> {
    if columns(ex, d, "schema_versions").await?.is_empty() {
        return Ok(0);
    }
    super::migrate::applied(ex).await
}

/// The version the fixed tables of this build reach.
pub fn latest_schema_version() -> i64 {
    super::migrate::latest()
}

/// Brings an empty database to what a server on `catalog` would make of it: the fixed tables,
/// the entity tables with their indexes, and the row-count bookkeeping.
pub async fn prepare(storage: &dyn Storage, catalog: &Catalog) -> anyhow::Result<()> {
    super::migrate::run(storage).await?;
    super::ddl::apply(storage, catalog).await?;
    Ok(())
}

/// Reads the rows of one table page by page, in key order, through one transaction.
pub struct Pages {
    select: String,
    after: String,
    types: Vec<ColType>,
    key_at: Vec<usize>,
    limit: usize,
    last: Option<Vec<Value>>,
}

impl Pages {
    /// Pages of `limit` rows of `columns` (which hold the key's columns) of `table`.
    pub fn new(d: Dialect, table: &Table, columns: &[(String, ColType)], limit: usize) -> Pages {
        let cols: Vec<String> = columns.iter().map(|(c, _)| d.quote(c)).collect();
        let key: Vec<String> = table.key.iter().map(|k| d.quote(k)).collect();
        let key_at = table
            .key
            .iter()
            .filter_map(|k| columns.iter().position(|(c, _)| c == k))
            .collect();
        let head = format!("SELECT {} FROM {}", cols.join(", "), d.quote(&table.name));
        let order = format!("ORDER BY {} LIMIT {limit}", key.join(", "));
        let marks: Vec<String> = (1..=key.len()).map(|i| d.ph(i)).collect();
        Pages {
            select: format!("{head} {order}"),
            after: format!(
                "{head} WHERE ({}) > ({}) {order}",
                key.join(", "),
                marks.join(", ")
            ),
            types: columns.iter().map(|(_, t)| *t).collect(),
            key_at,
            limit,
            last: None,
        }
    }

    /// The next page; empty at the end.
    pub async fn next(&mut self, ex: &mut dyn Exec) -> Result<Vec<Row>> {
        if self.last.as_ref().is_some_and(Vec::is_empty) {
            return Ok(Vec::new());
        }
        let rows = match &self.last {
            None => ex.fetch(&self.select, &[], &self.types).await?,
            Some(key) => ex.fetch(&self.after, key, &self.types).await?,
        };
        self.last = Some(match rows.last() {
            Some(r) if rows.len() == self.limit => {
                self.key_at.iter().map(|&i| r[i].clone()).collect()
            }
            // A short page is the last one.
            _ => Vec::new(),
        });
        Ok(rows)
    }
}

/// Inserts `rows` (values of `columns`, in order) into `table` in one statement.
pub async fn insert(
    ex: &mut dyn Exec,
    d: Dialect,
    table: &str,
    columns: &[(String, ColType)],
    rows: Vec<Row>,
) -> Result<u64> {
    if rows.is_empty() {
        return Ok(0);
    }
    let cols: Vec<String> = columns.iter().map(|(c, _)| d.quote(c)).collect();
    let sql = format!(
        "INSERT INTO {} ({}) VALUES {}",
        d.quote(table),
        cols.join(", "),
        d.value_groups(cols.len(), rows.len(), 1)
    );
    let args: Vec<Value> = rows.into_iter().flatten().collect();
    ex.execute(&sql, &args).await
}

/// The most rows of `width` columns one insert binds: both backends' limits on bound values
/// (SQLite 32766, PostgreSQL 65535) with room to spare, and at most 500.
pub fn rows_per_insert(width: usize) -> usize {
    (20_000 / width.max(1)).clamp(1, 500)
}

/// The highest value the identity column `col` of `table` has handed out: the largest stored,
/// or more when the sequence went past it (rows deleted since, or inserts rolled back).
pub async fn high_water(ex: &mut dyn Exec, d: Dialect, table: &str, col: &str) -> Result<i64> {
    let (t, c) = (d.quote(table), d.quote(col));
    let (sql, args) = match d {
        Dialect::Sqlite => (
            format!(
                "SELECT MAX(x) FROM (SELECT MAX({c}) AS x FROM {t} \
                 UNION ALL SELECT \"seq\" FROM sqlite_sequence WHERE \"name\" = ?1)"
            ),
            vec![Value::text(table)],
        ),
        Dialect::Postgres => (
            format!(
                "SELECT GREATEST((SELECT MAX({c}) FROM {t}), \
                 (SELECT s.last_value FROM pg_sequences s \
                  WHERE s.schemaname || '.' || s.sequencename = pg_get_serial_sequence($1, $2)))::BIGINT"
            ),
            vec![Value::text(t.clone()), Value::text(col)],
        ),
    };
    let rows = ex.fetch(&sql, &args, &[ColType::Int]).await?;
    Ok(rows.first().and_then(|r| r[0].as_i64()).unwrap_or(0))
}

/// Makes the identity column `col` of `table` hand out values above `to` from now on.
pub async fn advance(ex: &mut dyn Exec, d: Dialect, table: &str, col: &str, to: i64) -> Result<()> {
    if to < 1 {
        return Ok(());
    }
    match d {
        Dialect::Sqlite => {
            // AUTOINCREMENT keeps its high-water mark in sqlite_sequence, one row per table.
            let n = ex
                .execute(
                    "UPDATE sqlite_sequence SET \"seq\" = ?1 WHERE \"name\" = ?2 AND \"seq\" < ?1",
                    &[Value::int(to), Value::text(table)],
                )
                .await?;
            if n == 0 {
                ex.execute(
                    "INSERT INTO sqlite_sequence (\"name\", \"seq\") SELECT ?2, ?1 \
                     WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE \"name\" = ?2)",
                    &[Value::int(to), Value::text(table)],
                )
                .await?;
            }
        }
        Dialect::Postgres => {
            ex.fetch(
                "SELECT setval(pg_get_serial_sequence($1, $2), $3)",
                &[
                    Value::text(d.quote(table)),
                    Value::text(col),
                    Value::int(to),
                ],
                &[ColType::Int],
            )
            .await?;
        }
    }
    Ok(())
}

/// A reference of a table to itself, taken off while its rows are copied (a row may name a
/// row with a higher id) and put back after, which checks every row.
#[derive(Debug, Clone)]
pub struct SelfReference {
    name: String,
    definition: String,
}

/// Lets the rest of the transaction `ex` insert rows of `table` that name rows of the same
/// table inserted later: SQLite defers the checks of every reference to the commit;
/// PostgreSQL's references are not deferrable, so those of `table` to itself are dropped and
/// returned, for [`restore_references`] before the commit.
pub async fn defer_references(
    ex: &mut dyn Exec,
    d: Dialect,
    table: &str,
) -> Result<Vec<SelfReference>> {
    match d {
        Dialect::Sqlite => {
            ex.execute("PRAGMA defer_foreign_keys = ON", &[]).await?;
            Ok(Vec::new())
        }
        Dialect::Postgres => {
            let rows = ex
                .fetch(
                    "SELECT conname::text, pg_get_constraintdef(oid) FROM pg_constraint \
                     WHERE contype = 'f' AND conrelid = $1::regclass AND confrelid = $1::regclass \
                     ORDER BY conname",
                    &[Value::text(d.quote(table))],
                    &[ColType::Text, ColType::Text],
                )
                .await?;
            let refs: Vec<SelfReference> = rows
                .into_iter()
                .filter_map(|r| {
                    let mut it = r.into_iter().map(Value::into_string);
                    Some(SelfReference {
                        name: it.next()??,
                        definition: it.next()??,
                    })
                })
                .collect();
            for r in &refs {
                let sql = format!(
                    "ALTER TABLE {} DROP CONSTRAINT {}",
                    d.quote(table),
                    quote_any(&r.name)
                );
                ex.execute(&sql, &[]).await?;
            }
            Ok(refs)
        }
    }
}

/// Puts back the references [`defer_references`] took off.
pub async fn restore_references(
    ex: &mut dyn Exec,
    d: Dialect,
    table: &str,
    refs: &[SelfReference],
) -> Result<()> {
    for r in refs {
        let sql = format!(
            "ALTER TABLE {} ADD CONSTRAINT {} {}",
            d.quote(table),
            quote_any(&r.name),
            r.definition
        );
        ex.execute(&sql, &[]).await?;
    }
    Ok(())
}

/// A quoted identifier that may hold any character (a constraint name the database chose).
fn quote_any(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

/// Sets the kept row count of `entity` to the rows its table holds, dropping PostgreSQL's
/// pending deltas for it first (so that a concurrent fold cannot add them again). (`WHERE TRUE`
/// lets SQLite read `ON CONFLICT` as the upsert's, not as part of the `SELECT`.)
pub async fn recount(ex: &mut dyn Exec, d: Dialect, entity: &str) -> Result<()> {
    if d == Dialect::Postgres {
        ex.execute(
            "DELETE FROM \"entity_count_deltas\" WHERE \"entity\" = $1",
            &[Value::text(entity)],
        )
        .await?;
    }
    let sql = format!(
        "INSERT INTO \"entity_counts\" (\"entity\", \"n\") SELECT {}, COUNT(*) FROM {} \
         WHERE TRUE ON CONFLICT (\"entity\") DO UPDATE SET \"n\" = excluded.\"n\"",
        d.ph(1),
        d.quote(entity)
    );
    ex.execute(&sql, &[Value::text(entity)]).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_types_map_to_storage_types() {
        for (declared, want) in [
            ("INTEGER", ColType::Int),
            ("BIGINT", ColType::Int),
            ("bigint", ColType::Int),
            ("REAL", ColType::Float),
            ("double precision", ColType::Float),
            ("boolean", ColType::Bool),
            ("TEXT", ColType::Text),
            ("text", ColType::Text),
            ("numeric", ColType::Decimal),
        ] {
            assert_eq!(storage_type(declared), want, "{declared}");
        }
    }

    #[test]
    fn inserts_stay_within_the_bound_value_limits() {
        for width in [1, 7, 40, 300, 30_000] {
            let n = rows_per_insert(width);
            assert!((1..=500).contains(&n), "{width}: {n}");
            assert!(n * width <= 20_000 || n == 1, "{width}: {n}");
        }
    }

    #[test]
    fn pages_go_on_after_the_last_key() {
        let t = Table {
            name: "bg_items".into(),
            key: vec!["rid", "seq"],
            serial: None,
            self_referencing: false,
        };
        let cols = vec![
            ("rid".to_string(), ColType::Text),
            ("seq".to_string(), ColType::Int),
            ("item".to_string(), ColType::Text),
        ];
        let p = Pages::new(Dialect::Postgres, &t, &cols, 100);
        assert_eq!(
            p.after,
            "SELECT \"rid\", \"seq\", \"item\" FROM \"bg_items\" WHERE (\"rid\", \"seq\") > ($1, $2) ORDER BY \"rid\", \"seq\" LIMIT 100"
        );
        assert_eq!(p.key_at, vec![0, 1]);
    }
}
