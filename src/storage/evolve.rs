//! Statements of a change to entity tables beyond adding: renaming a table or a column, finding
//! the rows a narrowing or a conversion would not fit, rewriting a column's values and type.
//! They run inside the one transaction of a change ([`crate::evolve`]).

use super::{Dialect, Exec, Result, Value};
use crate::schema::{ColType, Field};

/// The statements that rename table `from` to `to`. Indexes named after the old name are
/// dropped (the additive plan creates them under the new one) and the kept row count moves.
pub fn rename_table(d: Dialect, from: &str, to: &str, old_indexes: &[String]) -> Vec<String> {
    let mut out = vec![format!(
        "ALTER TABLE {} RENAME TO {}",
        d.quote(from),
        d.quote(to)
    )];
    out.extend(drop_indexes(d, old_indexes));
    // Names are catalog identifiers (`[a-z][a-z0-9_]*`): safe as literals.
    out.push(format!(
        "DELETE FROM \"entity_counts\" WHERE \"entity\" = '{from}'"
    ));
    out
}

/// The statements that rename column `from` of `table` to `to`, dropping indexes named after
/// the old column.
pub fn rename_column(
    d: Dialect,
    table: &str,
    from: &str,
    to: &str,
    old_indexes: &[String],
) -> Vec<String> {
    let mut out = drop_indexes(d, old_indexes);
    out.push(format!(
        "ALTER TABLE {} RENAME COLUMN {} TO {}",
        d.quote(table),
        d.quote(from),
        d.quote(to)
    ));
    out
}

/// `DROP INDEX IF EXISTS` for each name.
pub fn drop_indexes(d: Dialect, names: &[String]) -> Vec<String> {
    names
        .iter()
        .map(|n| format!("DROP INDEX IF EXISTS {}", d.quote(n)))
        .collect()
}

/// The statements that give `field`'s column a new type: the column (its values already read
/// and converted) is dropped with its indexes and added again with the new definition; the
/// converted values are then written with [`set_values`].
pub fn retype(d: Dialect, table: &str, field: &Field, old_indexes: &[String]) -> Vec<String> {
    let mut out = drop_indexes(d, old_indexes);
    out.push(format!(
        "ALTER TABLE {} DROP COLUMN {}",
        d.quote(table),
        d.quote(&field.name)
    ));
    out.push(format!(
        "ALTER TABLE {} ADD COLUMN {}",
        d.quote(table),
        d.column_def(field)
    ));
    out
}

/// Whether `column` of `table` is a binary floating-point column: how versions before exact
/// decimals stored a decimal field (REAL on SQLite, DOUBLE PRECISION on PostgreSQL).
pub async fn holds_floats(
    ex: &mut dyn Exec,
    d: Dialect,
    table: &str,
    column: &str,
) -> Result<bool> {
    let sql = match d {
        Dialect::Sqlite => "SELECT type FROM pragma_table_info(?1) WHERE name = ?2",
        Dialect::Postgres => {
            "SELECT data_type FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 AND column_name = $2"
        }
    };
    let rows = ex
        .fetch(
            sql,
            &[Value::text(table), Value::text(column)],
            &[ColType::Text],
        )
        .await?;
    Ok(rows
        .into_iter()
        .filter_map(|r| r.into_iter().next()?.into_string())
        .any(|t| {
            let t = t.to_ascii_uppercase();
            t == "REAL" || t == "DOUBLE PRECISION" || t == "DOUBLE" || t == "FLOAT"
        }))
}

/// Locks `table` against every other access until the transaction ends (PostgreSQL; SQLite's
/// write transaction already excludes other writers).
pub fn lock(d: Dialect, table: &str) -> Option<String> {
    (d == Dialect::Postgres)
        .then(|| format!("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE", d.quote(table)))
}

/// One change to the tables at a time across every server on the database (PostgreSQL; on
/// SQLite the write transaction is already alone).
pub async fn lock_changes(ex: &mut dyn Exec, d: Dialect) -> Result<()> {
    if d == Dialect::Postgres {
        ex.execute("SELECT pg_advisory_xact_lock(7262018)", &[])
            .await?;
    }
    Ok(())
}

/// The rows of `table`.
pub async fn count(ex: &mut dyn Exec, d: Dialect, table: &str) -> Result<i64> {
    Ok(ex
        .fetch(
            &format!("SELECT COUNT(*) FROM {}", d.quote(table)),
            &[],
            &[ColType::Int],
        )
        .await?
        .first()
        .and_then(|r| r[0].as_i64())
        .unwrap_or(0))
}

/// What a row's value must not be for a change to apply.
pub enum Unfit<'a> {
    /// Longer than this many characters.
    Longer(u64),
    /// Not one of these values.
    NotIn(&'a [String]),
    /// Empty (NULL).
    Empty,
    /// Holding a value.
    Holding,
}

/// The rows of `table` whose `column` is [`Unfit`]: how many, and the first few as
/// `(id, value)`.
pub async fn unfit(
    ex: &mut dyn Exec,
    d: Dialect,
    table: &str,
    column: &str,
    ty: ColType,
    how: Unfit<'_>,
    first: i64,
) -> Result<(i64, Vec<(i64, Value)>)> {
    let c = d.quote(column);
    let mut args = Vec::new();
    let cond = match how {
        Unfit::Longer(n) => {
            let len = match d {
                Dialect::Sqlite => "length",
                Dialect::Postgres => "char_length",
            };
            format!("{len}({c}) > {n}")
        }
        Unfit::NotIn(values) => {
            let list: Vec<String> = values
                .iter()
                .map(|v| {
                    args.push(Value::text(v));
                    d.ph(args.len())
                })
                .collect();
            format!("{c} IS NOT NULL AND {c} NOT IN ({})", list.join(", "))
        }
        Unfit::Empty => format!("{c} IS NULL"),
        Unfit::Holding => format!("{c} IS NOT NULL"),
    };
    let t = d.quote(table);
    let count = ex
        .fetch(
            &format!("SELECT COUNT(*) FROM {t} WHERE {cond}"),
            &args,
            &[ColType::Int],
        )
        .await?
        .first()
        .and_then(|r| r[0].as_i64())
        .unwrap_or(0);
    if count == 0 {
        return Ok((0, Vec::new()));
    }
    let rows = ex
        .fetch(
            &format!("SELECT \"id\", {c} FROM {t} WHERE {cond} ORDER BY \"id\" LIMIT {first}"),
            &args,
            &[ColType::Int, ty],
        )
        .await?;
    Ok((count, pairs(rows)))
}

/// The first `first` ids of `table`.
pub async fn first_ids(ex: &mut dyn Exec, d: Dialect, table: &str, first: i64) -> Result<Vec<i64>> {
    Ok(ex
        .fetch(
            &format!(
                "SELECT \"id\" FROM {} ORDER BY \"id\" LIMIT {first}",
                d.quote(table)
            ),
            &[],
            &[ColType::Int],
        )
        .await?
        .into_iter()
        .filter_map(|r| r[0].as_i64())
        .collect())
}

/// Groups of rows of `table` that share their values in `columns` (none of them NULL): how
/// many groups, and the first `first` as (the shared values, the first few ids).
pub async fn duplicates(
    ex: &mut dyn Exec,
    d: Dialect,
    table: &str,
    columns: &[(&str, ColType)],
    first: i64,
) -> Result<(i64, Vec<(Vec<Value>, Vec<i64>)>)> {
    let t = d.quote(table);
    let cols: Vec<String> = columns.iter().map(|(c, _)| d.quote(c)).collect();
    let list = cols.join(", ");
    let not_null: Vec<String> = cols.iter().map(|c| format!("{c} IS NOT NULL")).collect();
    let grouped = format!(
        "SELECT {list} FROM {t} WHERE {} GROUP BY {list} HAVING COUNT(*) > 1",
        not_null.join(" AND ")
    );
    let count = ex
        .fetch(
            &format!("SELECT COUNT(*) FROM ({grouped}) AS \"g\""),
            &[],
            &[ColType::Int],
        )
        .await?
        .first()
        .and_then(|r| r[0].as_i64())
        .unwrap_or(0);
    if count == 0 {
        return Ok((0, Vec::new()));
    }
    let types: Vec<ColType> = columns.iter().map(|(_, t)| *t).collect();
    let groups = ex
        .fetch(
            &format!("{grouped} ORDER BY MIN(\"id\") LIMIT {first}"),
            &[],
            &types,
        )
        .await?;
    let mut out = Vec::with_capacity(groups.len());
    for values in groups {
        let conds: Vec<String> = cols
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c} = {}", d.ph(i + 1)))
            .collect();
        let ids = ex
            .fetch(
                &format!(
                    "SELECT \"id\" FROM {t} WHERE {} ORDER BY \"id\" LIMIT {first}",
                    conds.join(" AND ")
                ),
                &values,
                &[ColType::Int],
            )
            .await?
            .into_iter()
            .filter_map(|r| r[0].as_i64())
            .collect();
        out.push((values, ids));
    }
    Ok((count, out))
}

/// The values of `column` that are not NULL, by id, after id `after`: at most `limit`.
pub async fn values_after(
    ex: &mut dyn Exec,
    d: Dialect,
    table: &str,
    column: &str,
    ty: ColType,
    after: i64,
    limit: i64,
) -> Result<Vec<(i64, Value)>> {
    let c = d.quote(column);
    let rows = ex
        .fetch(
            &format!(
                "SELECT \"id\", {c} FROM {} WHERE {c} IS NOT NULL AND \"id\" > {} ORDER BY \"id\" LIMIT {limit}",
                d.quote(table),
                d.ph(1)
            ),
            &[Value::int(after)],
            &[ColType::Int, ty],
        )
        .await?;
    Ok(pairs(rows))
}

/// The values of `column`, nulls included, by id, after id `after`: at most `limit`.
pub async fn rows_after(
    ex: &mut dyn Exec,
    d: Dialect,
    table: &str,
    column: &str,
    ty: ColType,
    after: i64,
    limit: i64,
) -> Result<Vec<(i64, Value)>> {
    let c = d.quote(column);
    let rows = ex
        .fetch(
            &format!(
                "SELECT \"id\", {c} FROM {} WHERE \"id\" > {} ORDER BY \"id\" LIMIT {limit}",
                d.quote(table),
                d.ph(1)
            ),
            &[Value::int(after)],
            &[ColType::Int, ty],
        )
        .await?;
    Ok(pairs(rows))
}

fn pairs(rows: Vec<super::Row>) -> Vec<(i64, Value)> {
    rows.into_iter()
        .filter_map(|r| {
            let mut it = r.into_iter();
            let id = it.next()?.as_i64()?;
            Some((id, it.next()?))
        })
        .collect()
}

/// Writes `values` (id, value) into `column`, a few hundred rows a statement.
pub async fn set_values(
    ex: &mut dyn Exec,
    d: Dialect,
    table: &str,
    column: &str,
    values: &[(i64, Value)],
) -> Result<()> {
    for chunk in values.chunks(400) {
        let mut args = Vec::with_capacity(chunk.len() * 2);
        let mut cases = String::new();
        let mut ids = Vec::with_capacity(chunk.len());
        for (id, v) in chunk {
            args.push(Value::int(*id));
            let id_ph = d.ph(args.len());
            args.push(v.clone());
            cases.push_str(&format!(" WHEN {id_ph} THEN {}", d.ph(args.len())));
            ids.push(id_ph);
        }
        let sql = format!(
            "UPDATE {} SET {} = CASE \"id\"{cases} END WHERE \"id\" IN ({})",
            d.quote(table),
            d.quote(column),
            ids.join(", ")
        );
        ex.execute(&sql, &args).await?;
    }
    Ok(())
}
