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

fn where_clause(d: Dialect, filters: &[Filter], args: &mut Vec<Value>) -> String {
    if filters.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = filters
        .iter()
        .map(|f| {
            args.push(f.value.clone());
            match f.value {
                Value::Int(None) | Value::Float(None) | Value::Bool(None) | Value::Text(None) => {
                    args.pop();
                    format!("{} IS NULL", d.quote(&f.column))
                }
                _ => format!("{} = {}", d.quote(&f.column), d.ph(args.len())),
            }
        })
        .collect();
    format!(" WHERE {}", parts.join(" AND "))
}

/// One page of rows, ordered by id.
pub async fn list(
    ex: &mut dyn Exec,
    d: Dialect,
    e: &Entity,
    filters: &[Filter],
    limit: i64,
    offset: i64,
) -> Result<Vec<Row>> {
    let mut args = Vec::new();
    let w = where_clause(d, filters, &mut args);
    args.push(Value::int(limit));
    args.push(Value::int(offset));
    let sql = format!(
        "SELECT {} FROM {}{w} ORDER BY \"id\" LIMIT {} OFFSET {}",
        column_list(d, e),
        d.quote(&e.name),
        d.ph(args.len() - 1),
        d.ph(args.len())
    );
    ex.fetch(&sql, &args, &e.col_types()).await
}

/// The number of rows matching `filters`.
pub async fn count(ex: &mut dyn Exec, d: Dialect, e: &Entity, filters: &[Filter]) -> Result<i64> {
    let mut args = Vec::new();
    let w = where_clause(d, filters, &mut args);
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
    rows.pop()
        .ok_or_else(|| super::StorageError::Database("insert returned no row".into()))
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
    Ok(ex
        .fetch(&sql, &[Value::int(id)], &e.col_types())
        .await?
        .pop())
}
