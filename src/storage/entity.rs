//! SQL for entity rows, built from the compiled catalog with bound values only.

use super::sql::Dialect;
use super::{Exec, Result, Row, Value};
use crate::schema::Entity;

fn column_list(d: Dialect, e: &Entity) -> String {
    e.columns()
        .map(|c| d.quote(c))
        .collect::<Vec<_>>()
        .join(", ")
}

/// An equality filter on a column (the name is checked against the entity by the caller).
pub struct Filter {
    pub column: String,
    pub value: Value,
}

fn conditions(d: Dialect, filters: &[Filter], args: &mut Vec<Value>) -> Vec<String> {
    filters
        .iter()
        .map(|f| match f.value {
            Value::Int(None) | Value::Float(None) | Value::Bool(None) | Value::Text(None) => {
                format!("{} IS NULL", d.quote(&f.column))
            }
            _ => {
                args.push(f.value.clone());
                format!("{} = {}", d.quote(&f.column), d.ph(args.len()))
            }
        })
        .collect()
}

fn where_clause(parts: &[String]) -> String {
    if parts.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", parts.join(" AND "))
    }
}

/// Where a page starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// After skipping this many rows (costs as much as reading them).
    Offset(i64),
    /// Right after the row with this id (keyset: an index seek, whatever the depth).
    AfterId(i64),
}

/// One page of rows, ordered by id.
pub async fn list(
    ex: &mut dyn Exec,
    d: Dialect,
    e: &Entity,
    filters: &[Filter],
    limit: i64,
    start: Start,
) -> Result<Vec<Row>> {
    let mut args = Vec::new();
    let mut parts = conditions(d, filters, &mut args);
    if let Start::AfterId(id) = start {
        args.push(Value::int(id));
        parts.push(format!("\"id\" > {}", d.ph(args.len())));
    }
    let w = where_clause(&parts);
    args.push(Value::int(limit));
    let mut sql = format!(
        "SELECT {} FROM {}{w} ORDER BY \"id\" LIMIT {}",
        column_list(d, e),
        d.quote(&e.name),
        d.ph(args.len())
    );
    if let Start::Offset(offset) = start {
        args.push(Value::int(offset));
        sql.push_str(&format!(" OFFSET {}", d.ph(args.len())));
    }
    ex.fetch(&sql, &args, &e.col_types()).await
}

/// The number of rows matching `filters`: the kept row count when there are none (see
/// [`super::counts`]), else a `COUNT(*)` that the filtered columns' indexes serve.
pub async fn count(ex: &mut dyn Exec, d: Dialect, e: &Entity, filters: &[Filter]) -> Result<i64> {
    if filters.is_empty()
        && let Some(n) = super::counts::total(ex, d, e).await?
    {
        return Ok(n);
    }
    let mut args = Vec::new();
    let w = where_clause(&conditions(d, filters, &mut args));
    let sql = format!("SELECT COUNT(*) FROM {}{w}", d.quote(&e.name));
    let rows = ex
        .fetch(&sql, &args, &[crate::schema::ColType::Int])
        .await?;
    Ok(rows.first().and_then(|r| r[0].as_i64()).unwrap_or(0))
}

/// SQL of [`get`], for callers that cache it.
pub fn get_sql(d: Dialect, e: &Entity) -> String {
    format!(
        "SELECT {} FROM {} WHERE \"id\" = {}",
        column_list(d, e),
        d.quote(&e.name),
        d.ph(1)
    )
}

pub async fn get(ex: &mut dyn Exec, d: Dialect, e: &Entity, id: i64) -> Result<Option<Row>> {
    let rows = ex
        .fetch(&get_sql(d, e), &[Value::int(id)], &e.col_types())
        .await?;
    Ok(rows.into_iter().next())
}

/// Whether a row with `id` exists in `table` (a catalog entity name).
pub async fn exists(ex: &mut dyn Exec, d: Dialect, table: &str, id: i64) -> Result<bool> {
    let sql = format!(
        "SELECT 1 FROM {} WHERE \"id\" = {}",
        d.quote(table),
        d.ph(1)
    );
    let rows = ex
        .fetch(&sql, &[Value::int(id)], &[crate::schema::ColType::Int])
        .await?;
    Ok(!rows.is_empty())
}

/// Whether any row of `table` (a catalog entity name) has `id` in its column `column`.
pub async fn referenced(
    ex: &mut dyn Exec,
    d: Dialect,
    table: &str,
    column: &str,
    id: Option<i64>,
) -> Result<bool> {
    let sql = format!(
        "SELECT 1 FROM {} WHERE {} = {} LIMIT 1",
        d.quote(table),
        d.quote(column),
        d.ph(1)
    );
    let rows = ex
        .fetch(&sql, &[Value::Int(id)], &[crate::schema::ColType::Int])
        .await?;
    Ok(!rows.is_empty())
}

/// Whether `table` (a catalog entity name) holds any row.
pub async fn has_rows(ex: &mut dyn Exec, d: Dialect, table: &str) -> Result<bool> {
    let sql = format!("SELECT 1 FROM {} LIMIT 1", d.quote(table));
    let rows = ex.fetch(&sql, &[], &[crate::schema::ColType::Int]).await?;
    Ok(!rows.is_empty())
}

/// Inserts one row of `(column, value)` pairs and returns it whole.
pub async fn insert(
    ex: &mut dyn Exec,
    d: Dialect,
    e: &Entity,
    values: Vec<(String, Value)>,
) -> Result<Row> {
    let cols: Vec<String> = values.iter().map(|(c, _)| d.quote(c)).collect();
    let phs: Vec<String> = (1..=values.len()).map(|i| d.ph(i)).collect();
    let args: Vec<Value> = values.into_iter().map(|(_, v)| v).collect();
    let sql = format!(
        "INSERT INTO {} ({}) VALUES ({}) RETURNING {}",
        d.quote(&e.name),
        cols.join(", "),
        phs.join(", "),
        column_list(d, e)
    );
    let mut rows = ex.fetch(&sql, &args, &e.col_types()).await?;
    let row = rows
        .pop()
        .ok_or_else(|| super::StorageError::Database("insert returned no row".into()))?;
    ex.count_rows(d, &e.name, 1).await?;
    Ok(row)
}

/// Inserts rows that all write the same columns (`columns`, then `args` row after row) with
/// one statement, and returns the `returning` columns of each, ordered by id (insertion
/// order). All or none: a broken constraint fails the whole statement.
pub async fn insert_many(
    ex: &mut dyn Exec,
    d: Dialect,
    e: &Entity,
    columns: &[&str],
    args: &[Value],
    full: bool,
) -> Result<Vec<Row>> {
    let width = columns.len();
    let rows = args.len().checked_div(width).unwrap_or(0);
    let cols: Vec<String> = columns.iter().map(|c| d.quote(c)).collect();
    let (returning, types) = if full {
        (column_list(d, e), e.col_types())
    } else {
        (d.quote("id"), vec![crate::schema::ColType::Int])
    };
    let sql = format!(
        "INSERT INTO {} ({}) VALUES {} RETURNING {returning}",
        d.quote(&e.name),
        cols.join(", "),
        d.value_groups(width, rows, 1),
    );
    let mut out = ex.fetch(&sql, args, &types).await?;
    ex.count_rows(d, &e.name, out.len() as i64).await?;
    // Ids grow in insertion order within one statement.
    out.sort_by_key(|r| r[0].as_i64().unwrap_or_default());
    Ok(out)
}

/// Updates the given columns of row `id`; `None` when there is no such row.
pub async fn update(
    ex: &mut dyn Exec,
    d: Dialect,
    e: &Entity,
    id: i64,
    values: Vec<(String, Value)>,
) -> Result<Option<Row>> {
    let sets: Vec<String> = values
        .iter()
        .enumerate()
        .map(|(i, (c, _))| format!("{} = {}", d.quote(c), d.ph(i + 1)))
        .collect();
    let mut args: Vec<Value> = values.into_iter().map(|(_, v)| v).collect();
    args.push(Value::int(id));
    let sql = format!(
        "UPDATE {} SET {} WHERE \"id\" = {} RETURNING {}",
        d.quote(&e.name),
        sets.join(", "),
        d.ph(args.len()),
        column_list(d, e)
    );
    Ok(ex.fetch(&sql, &args, &e.col_types()).await?.pop())
}

/// Deletes row `id` and returns it; `None` when there is no such row.
pub async fn delete(ex: &mut dyn Exec, d: Dialect, e: &Entity, id: i64) -> Result<Option<Row>> {
    let sql = format!(
        "DELETE FROM {} WHERE \"id\" = {} RETURNING {}",
        d.quote(&e.name),
        d.ph(1),
        column_list(d, e)
    );
    let row = ex
        .fetch(&sql, &[Value::int(id)], &e.col_types())
        .await?
        .pop();
    if row.is_some() {
        ex.count_rows(d, &e.name, -1).await?;
    }
    Ok(row)
}
