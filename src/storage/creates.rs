//! SQL of single creates that share one statement (see [`crate::engine::creates`]): rows of
//! one entity that write the same columns, inserted by one `INSERT ... VALUES (...), (...)`.

use super::sql::Dialect;
use super::{Exec, Result, Row, Value};
use crate::schema::Entity;

/// Most bound values in one statement (PostgreSQL allows 65,535).
pub const MAX_VALUES: usize = 30_000;

/// Inserts `rows` (each the values of `columns`, in that order) into the table of `e` with one
/// statement and returns each created row, all columns, in the order of `rows`. All or none: a
/// broken constraint fails the whole statement and changes nothing.
pub async fn insert_rows(
    ex: &mut dyn Exec,
    d: Dialect,
    e: &Entity,
    columns: &[&str],
    rows: Vec<Vec<Value>>,
) -> Result<Vec<Row>> {
    let width = columns.len();
    let n = rows.len();
    let cols: Vec<String> = columns.iter().map(|c| d.quote(c)).collect();
    let mut values = String::with_capacity(n * (width * 5 + 4));
    for r in 0..n {
        if r > 0 {
            values.push_str(", ");
        }
        values.push('(');
        for c in 0..width {
            if c > 0 {
                values.push_str(", ");
            }
            values.push_str(&d.ph(r * width + c + 1));
        }
        values.push(')');
    }
    let returning: Vec<String> = e.columns().map(|c| d.quote(c)).collect();
    let sql = format!(
        "INSERT INTO {} ({}) VALUES {} RETURNING {}",
        d.quote(&e.name),
        cols.join(", "),
        values,
        returning.join(", ")
    );
    let args: Vec<Value> = rows.into_iter().flatten().collect();
    let mut out = ex.fetch(&sql, &args, &e.col_types()).await?;
    if out.len() != n {
        return Err(super::StorageError::Database(format!(
            "insert of {n} rows returned {}",
            out.len()
        )));
    }
    // Ids are taken in the order of the rows (the first column is the id).
    out.sort_by_key(|r| r.first().and_then(Value::as_i64));
    ex.count_rows(d, &e.name, n as i64).await?;
    Ok(out)
}
