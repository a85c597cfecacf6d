//! SQL of point reads that share one statement (see [`crate::engine::points`]): several
//! objects of one entity read by their ids at once.

use super::sql::Dialect;
use super::{Exec, Result, Row, Value};
use crate::schema::Entity;

/// PostgreSQL: the rows of `e` with the given ids (those that exist, in no particular order),
/// with one statement whatever their number (the ids travel as one text value).
pub async fn get_many(ex: &mut dyn Exec, d: Dialect, e: &Entity, ids: &[i64]) -> Result<Vec<Row>> {
    let columns: Vec<String> = e.columns().map(|c| d.quote(c)).collect();
    let list = ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
    let sql = format!(
        "SELECT {} FROM {} WHERE \"id\" = ANY(string_to_array($1, ',')::BIGINT[])",
        columns.join(", "),
        d.quote(&e.name)
    );
    ex.fetch(&sql, &[Value::text(list)], &e.col_types()).await
}
