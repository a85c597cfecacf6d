//! Inserts of entity rows: one row, one row unless its natural key is taken, and many rows
//! with one statement (arrays unnested on PostgreSQL, numbered multi-row inserts on SQLite),
//! passing over conflicts when the rows can be told apart; on PostgreSQL a large group of creates
//! that cannot break a constraint is copied ([`super::pg_stream`]). Each counts the rows it adds
//! and logs them for live changes.

use super::entity::column_list;
use super::sql::Dialect;
use super::{Column, Exec, Result, Returned, Row, StorageError, Value};
use crate::schema::{ColType, Entity};

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
    super::live::log_created_rows(ex, d, e, std::slice::from_ref(&row)).await?;
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
    args: &[&Value],
    full: bool,
) -> Result<Vec<Row>> {
    let width = columns.len();
    let rows = args.len().checked_div(width).unwrap_or(0);
    let cols: Vec<String> = columns.iter().map(|c| d.quote(c)).collect();
    let arrays = ex.binds_arrays() && rows > 0 && one_kind_per_column(args, width);
    // Whole objects are what was bound and their ids: only the ids need to come back when
    // the database stores every other column as it was given.
    let echo = (full && arrays).then(|| echoed(e, columns, args)).flatten();
    let (returning, types) = if full && echo.is_none() {
        (column_list(d, e), e.col_types())
    } else {
        (d.quote("id"), vec![crate::schema::ColType::Int])
    };
    let whole_rows = full && echo.is_none();
    let copied =
        !whole_rows && arrays && ex.copies(rows) && super::pg_stream::copyable(e, columns, args);
    // Rows numbered by the statement come back in id order already.
    let numbered = !copied && !arrays && ex.numbers_inserts();
    let mut out = if copied {
        let ids = ex
            .copy_created(&d.quote(&e.name), &cols, args, width)
            .await?;
        ids.into_iter().map(|id| vec![Value::int(id)]).collect()
    } else if arrays {
        let (insert, params) = unnest_insert(d, e, &cols, args, width);
        fetch_unnested(ex, d, e, &insert, &params, whole_rows, &returning, &types).await?
    } else if numbered {
        insert_numbered(ex, d, e, &cols, args, full, &returning, &types).await?
    } else {
        let sql = format!(
            "{} RETURNING {returning}",
            values_insert(d, e, &cols, width, rows)
        );
        let args: Vec<Value> = args.iter().map(|v| (*v).clone()).collect();
        ex.fetch(&sql, &args, &types).await?
    };
    ex.count_rows(d, &e.name, out.len() as i64).await?;
    // Ids grow in insertion order within one statement.
    if !numbered {
        out.sort_by_key(|r| r[0].as_i64().unwrap_or_default());
    }
    super::live::log_created_rows(ex, d, e, &out).await?;
    if let Some(at) = echo {
        if out.len() != rows {
            return Err(StorageError::Database(format!(
                "inserted {rows} rows into {} but {} ids came back",
                e.name,
                out.len()
            )));
        }
        for (row, given) in out.iter_mut().zip(args.chunks(width)) {
            row.extend(at.iter().map(|&i| given[i].clone()));
        }
    }
    Ok(out)
}

/// Runs an `UNNEST` insert (see [`unnest_insert`]) with `params`, returning `returning` of
/// each row (`whole_rows`: every column; otherwise the id).
#[expect(
    clippy::too_many_arguments,
    reason = "the parts of one insert of insert_many, named"
)]
async fn fetch_unnested(
    ex: &mut dyn Exec,
    d: Dialect,
    e: &Entity,
    insert: &str,
    params: &[Column<'_>],
    whole_rows: bool,
    returning: &str,
    types: &[ColType],
) -> Result<Vec<Row>> {
    let gathered = types.iter().all(|t| *t != crate::schema::ColType::Decimal);
    if !gathered {
        let sql = format!("{insert} RETURNING {returning}");
        return ex.fetch_columns(&sql, params, types, Returned::Rows).await;
    }
    // The rows in one row of arrays: decoding a row per created object cost more than
    // sending the statement.
    let columns_out: Vec<String> = if whole_rows {
        e.columns().map(|c| d.quote(c)).collect()
    } else {
        vec![d.quote("id")]
    };
    let aggs: Vec<String> = columns_out
        .iter()
        .map(|c| format!("array_agg({c})"))
        .collect();
    let sql = format!(
        "WITH ins AS ({insert} RETURNING {returning}) SELECT {} FROM ins",
        aggs.join(", ")
    );
    ex.fetch_columns(&sql, params, types, Returned::Gathered)
        .await
}

/// Inserts on a backend that knows the ids without a RETURNING clause, which on SQLite keeps
/// every returned row in a temporary table first; whole rows (`full`) are read back by their
/// ids.
#[expect(
    clippy::too_many_arguments,
    reason = "the parts of one insert of insert_many, named"
)]
async fn insert_numbered(
    ex: &mut dyn Exec,
    d: Dialect,
    e: &Entity,
    cols: &[String],
    args: &[&Value],
    full: bool,
    returning: &str,
    types: &[ColType],
) -> Result<Vec<Row>> {
    let (sql, bound) = shared_first(&d.quote(&e.name), cols, args);
    let ids = ex.insert_numbered(&sql, &bound).await?;
    let (true, Some(first), Some(last)) = (full, ids.first(), ids.last()) else {
        return Ok(ids.into_iter().map(|id| vec![Value::int(id)]).collect());
    };
    let id = d.quote("id");
    let sql = format!(
        "SELECT {returning} FROM {} WHERE {id} BETWEEN {} AND {} ORDER BY {id}",
        d.quote(&e.name),
        d.ph(1),
        d.ph(2),
    );
    let read = ex
        .fetch(&sql, &[Value::int(*first), Value::int(*last)], types)
        .await?;
    if read.len() != ids.len() {
        return Err(StorageError::Database(format!(
            "inserted {} rows into {} but read back {}",
            ids.len(),
            e.name,
            read.len()
        )));
    }
    Ok(read)
}

/// `INSERT INTO e (columns) SELECT ... FROM UNNEST(...)` for the rows `args` (`width` values
/// each, every column of one kind), with its parameters: one array parameter per column, so
/// that the statement's size does not grow with the rows and the database plans it once. A
/// column whose rows all have the same value (a default, the time of the chunk) is bound once
/// instead, so the database reads it once; the first column stays an array, which gives the
/// rows their number.
fn unnest_insert<'a>(
    d: Dialect,
    e: &Entity,
    cols: &[String],
    args: &[&'a Value],
    width: usize,
) -> (String, Vec<Column<'a>>) {
    let params: Vec<Column> = (0..width)
        .map(|c| {
            let mut column = args.iter().skip(c).step_by(width).copied();
            let first = column.next().expect("rows > 0");
            if c > 0 && column.clone().all(|v| v == first) {
                Column::Same(first)
            } else {
                Column::Each(std::iter::once(first).chain(column).collect())
            }
        })
        .collect();
    // What each column is selected as; the arrays unnested, with their names.
    let (mut unnested, mut names) = (Vec::new(), Vec::new());
    let selected: Vec<String> = params
        .iter()
        .enumerate()
        .map(|(i, p)| match p {
            Column::Same(v) => format!("{}::{}", d.ph(i + 1), array_type(v)),
            Column::Each(c) => {
                unnested.push(format!("{}::{}[]", d.ph(i + 1), array_type(c[0])));
                names.push(format!("c{i}"));
                format!("u.c{i}")
            }
        })
        .collect();
    let insert = format!(
        "INSERT INTO {} ({}) SELECT {} FROM UNNEST({}) AS u({})",
        d.quote(&e.name),
        cols.join(", "),
        selected.join(", "),
        unnested.join(", "),
        names.join(", "),
    );
    (insert, params)
}

/// The multi-row insert of `args` (rows of `cols`) into `table` on SQLite, and what it binds:
/// a column whose value is the same in every row (a chunk's timestamps and stamp, a value a
/// file repeats) is bound once for the statement, as `?1`, `?2`... at the head of each row,
/// instead of once a row. SQLite copies every text it binds, and numbers each anonymous `?`
/// one past the largest number before it, so the shared columns come first in the column list.
fn shared_first<'a>(table: &str, cols: &[String], args: &[&'a Value]) -> (String, Vec<&'a Value>) {
    let width = cols.len();
    let rows = args.len().checked_div(width).unwrap_or(0);
    let shared: Vec<bool> = (0..width)
        .map(|c| rows > 1 && args.chunks(width).all(|row| same(row[c], args[c])))
        .collect();
    let order: Vec<usize> = (0..width)
        .filter(|&c| shared[c])
        .chain((0..width).filter(|&c| !shared[c]))
        .collect();
    let once = shared.iter().filter(|s| **s).count();
    let names: Vec<&str> = order.iter().map(|&c| cols[c].as_str()).collect();
    let cells: Vec<String> = (1..=once)
        .map(|i| format!("?{i}"))
        .chain(std::iter::repeat_n("?".to_string(), width - once))
        .collect();
    let group = format!("({})", cells.join(", "));
    // Written into one text sized once: a chunk's statement has hundreds of groups.
    let head = format!("INSERT INTO {table} ({}) VALUES ", names.join(", "));
    let mut sql = String::with_capacity(head.len() + rows * (group.len() + 2));
    sql.push_str(&head);
    for r in 0..rows {
        if r > 0 {
            sql.push_str(", ");
        }
        sql.push_str(&group);
    }
    let mut bound: Vec<&Value> = Vec::with_capacity(once + rows * (width - once));
    bound.extend(order[..once].iter().map(|&c| args[c]));
    for row in args.chunks(width) {
        bound.extend(order[once..].iter().map(|&c| row[c]));
    }
    (sql, bound)
}

/// Whether two bound values are the same value: a float by its bits, so that `-0.0` and `0.0`
/// are told apart.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Float(Some(x)), Value::Float(Some(y))) => x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

/// `INSERT INTO e (columns) VALUES (...), ...` for `rows` rows of `width` parameters each.
fn values_insert(d: Dialect, e: &Entity, cols: &[String], width: usize, rows: usize) -> String {
    format!(
        "INSERT INTO {} ({}) VALUES {}",
        d.quote(&e.name),
        cols.join(", "),
        d.value_groups(width, rows, 1),
    )
}

/// Where each of the bound `columns` is among the columns of `e`, when the rows `args` could be
/// told apart by their values once stored: every bound value is stored exactly as given (an
/// integer, a boolean or a text in a column of that type), and each column holds values of one
/// kind. `None` otherwise. What [`insert_many_passing_conflicts`] needs.
pub fn told_apart(e: &Entity, columns: &[&str], args: &[&Value]) -> Option<Vec<usize>> {
    let width = columns.len();
    if width == 0 || args.len() < width || !one_kind_per_column(args, width) {
        return None;
    }
    let all: Vec<&str> = e.columns().collect();
    columns
        .iter()
        .zip(args)
        .map(|(c, v)| {
            let exact = matches!(
                (e.col_type(c)?, v),
                (ColType::Int, Value::Int(_))
                    | (ColType::Bool, Value::Bool(_))
                    | (ColType::Text, Value::Text(_))
            );
            exact.then(|| all.iter().position(|a| a == c)).flatten()
        })
        .collect()
}

/// Inserts rows as [`insert_many`] does, passing over every row that would break a unique
/// index (`ON CONFLICT DO NOTHING`), whether another row of the table already holds its key or
/// an earlier row of the same statement does. Returns, for each row inserted, where it is among
/// the rows and the whole row, in insertion order: the rows are told apart by the values of
/// the bound columns, which are the columns `at` of `e` (see [`told_apart`]). Other broken
/// constraints (a reference, a required value) fail the statement.
pub async fn insert_many_passing_conflicts(
    ex: &mut dyn Exec,
    d: Dialect,
    e: &Entity,
    columns: &[&str],
    args: &[&Value],
    at: &[usize],
) -> Result<Vec<(usize, Row)>> {
    let width = columns.len();
    let rows = args.len().checked_div(width).unwrap_or(0);
    let arrays = ex.binds_arrays();
    let cols: Vec<String> = columns.iter().map(|c| d.quote(c)).collect();
    let passing = format!("ON CONFLICT DO NOTHING RETURNING {}", column_list(d, e));
    let mut out = if arrays {
        let (insert, params) = unnest_insert(d, e, &cols, args, width);
        let sql = format!("{insert} {passing}");
        ex.fetch_columns(&sql, &params, &e.col_types(), Returned::Rows)
            .await?
    } else {
        // On SQLite a value shared by every row is bound once (see [`shared_first`]); the
        // rows come back in the table's column order whatever the order of the insert's.
        let (insert, bound) = if d == Dialect::Sqlite {
            shared_first(&d.quote(&e.name), &cols, args)
        } else {
            (values_insert(d, e, &cols, width, rows), args.to_vec())
        };
        let sql = format!("{insert} {passing}");
        let bound: Vec<Value> = bound.into_iter().cloned().collect();
        ex.fetch(&sql, &bound, &e.col_types()).await?
    };
    ex.count_rows(d, &e.name, out.len() as i64).await?;
    // Ids grow in insertion order within one statement, and the rows inserted are some of
    // those given, in their order: each is the next given row with its values.
    out.sort_by_key(|r| r[0].as_i64().unwrap_or_default());
    super::live::log_created_rows(ex, d, e, &out).await?;
    let mut given = args.chunks(width).enumerate();
    let mut placed = Vec::with_capacity(out.len());
    for row in out {
        let same = |values: &[&Value]| at.iter().zip(values).all(|(&k, v)| row.get(k) == Some(*v));
        let Some((k, _)) = given.find(|(_, values)| same(values)) else {
            return Err(StorageError::Database(format!(
                "a row inserted into {} is none of those given",
                e.name
            )));
        };
        placed.push((k, row));
    }
    Ok(placed)
}

/// Where each column of `e` after `id` is among the bound `columns`, when every one is bound
/// with a value that the database stores exactly as given (an integer, a boolean or a text in
/// a column of that type): the inserted rows are then their ids and those values. `None`
/// when some column is left to a default, or holds a number the database may round.
fn echoed(e: &Entity, columns: &[&str], args: &[&Value]) -> Option<Vec<usize>> {
    use crate::schema::ColType;
    let first = &args[..columns.len()];
    e.columns()
        .skip(1)
        .map(|c| {
            let i = columns.iter().position(|b| *b == c)?;
            let exact = matches!(
                (e.col_type(c)?, first[i]),
                (ColType::Int, Value::Int(_))
                    | (ColType::Bool, Value::Bool(_))
                    | (ColType::Text, Value::Text(_))
            );
            exact.then_some(i)
        })
        .collect()
}

/// Whether every row of `args` (`width` values each) has, column by column, values of the
/// same kind as the first row's.
fn one_kind_per_column(args: &[&Value], width: usize) -> bool {
    let first = &args[..width.min(args.len())];
    args.chunks(width).all(|row| {
        row.iter()
            .zip(first)
            .all(|(a, b)| std::mem::discriminant(*a) == std::mem::discriminant(*b))
    })
}

/// PostgreSQL's name of the element type of an array of values like `v`.
fn array_type(v: &Value) -> &'static str {
    match v {
        Value::Int(_) => "bigint",
        Value::Float(_) => "float8",
        Value::Decimal(_) => "numeric",
        Value::Bool(_) => "boolean",
        Value::Text(_) => "text",
    }
}

/// Inserts one row unless another already holds its natural key (`key`, the key's columns):
/// the new row, or `None` when the key is taken. Other unique values still fail.
pub async fn insert_unless_key_taken(
    ex: &mut dyn Exec,
    d: Dialect,
    e: &Entity,
    values: Vec<(String, Value)>,
    key: &[String],
) -> Result<Option<Row>> {
    let cols: Vec<String> = values.iter().map(|(c, _)| d.quote(c)).collect();
    let phs: Vec<String> = (1..=values.len()).map(|i| d.ph(i)).collect();
    let args: Vec<Value> = values.into_iter().map(|(_, v)| v).collect();
    let key: Vec<String> = key.iter().map(|c| d.quote(c)).collect();
    let sql = format!(
        "INSERT INTO {} ({}) VALUES ({}) ON CONFLICT ({}) DO NOTHING RETURNING {}",
        d.quote(&e.name),
        cols.join(", "),
        phs.join(", "),
        key.join(", "),
        column_list(d, e)
    );
    let row = ex.fetch(&sql, &args, &e.col_types()).await?.pop();
    if let Some(r) = &row {
        ex.count_rows(d, &e.name, 1).await?;
        super::live::log_created_rows(ex, d, e, std::slice::from_ref(r)).await?;
    }
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(vals: &[&Value]) -> Vec<String> {
        vals.iter().map(|v| format!("{v:?}")).collect()
    }

    #[test]
    fn columns_the_same_in_every_row_are_bound_once_and_first() {
        let cols: Vec<String> = ["\"name\"", "\"at\"", "\"n\"", "\"on\""]
            .map(String::from)
            .into();
        let at = Value::text("2026-11-29T21:00:00Z");
        let rows = [
            [
                Value::text("a"),
                at.clone(),
                Value::int(1),
                Value::Bool(Some(true)),
            ],
            [
                Value::text("b"),
                at.clone(),
                Value::int(2),
                Value::Bool(Some(true)),
            ],
            [
                Value::text("c"),
                at.clone(),
                Value::int(1),
                Value::Bool(Some(true)),
            ],
        ];
        let args: Vec<&Value> = rows.iter().flatten().collect();
        let (sql, bound) = shared_first("\"t\"", &cols, &args);
        assert_eq!(
            sql,
            "INSERT INTO \"t\" (\"at\", \"on\", \"name\", \"n\") VALUES \
             (?1, ?2, ?, ?), (?1, ?2, ?, ?), (?1, ?2, ?, ?)"
        );
        let want = [
            &at,
            &Value::Bool(Some(true)),
            &Value::text("a"),
            &Value::int(1),
            &Value::text("b"),
            &Value::int(2),
            &Value::text("c"),
            &Value::int(1),
        ];
        assert_eq!(texts(&bound), texts(&want));
    }

    #[test]
    fn floats_are_shared_only_when_their_bits_are() {
        let cols: Vec<String> = ["\"x\""].map(String::from).into();
        let zeros = [Value::Float(Some(0.0)), Value::Float(Some(-0.0))];
        let args: Vec<&Value> = zeros.iter().collect();
        let (sql, bound) = shared_first("\"t\"", &cols, &args);
        assert_eq!(sql, "INSERT INTO \"t\" (\"x\") VALUES (?), (?)");
        assert_eq!(texts(&bound), texts(&args));
        let halves = [Value::Float(Some(0.5)), Value::Float(Some(0.5))];
        let args: Vec<&Value> = halves.iter().collect();
        let (sql, bound) = shared_first("\"t\"", &cols, &args);
        assert_eq!(sql, "INSERT INTO \"t\" (\"x\") VALUES (?1), (?1)");
        assert_eq!(texts(&bound), texts(&args[..1]));
    }

    #[test]
    fn one_row_or_nothing_shared_binds_every_value_in_order() {
        let cols: Vec<String> = ["\"a\"", "\"b\""].map(String::from).into();
        let one = [Value::int(1), Value::int(1)];
        let args: Vec<&Value> = one.iter().collect();
        let (sql, bound) = shared_first("\"t\"", &cols, &args);
        assert_eq!(sql, "INSERT INTO \"t\" (\"a\", \"b\") VALUES (?, ?)");
        assert_eq!(texts(&bound), texts(&args));
        let two = [Value::int(1), Value::int(2), Value::int(3), Value::int(4)];
        let args: Vec<&Value> = two.iter().collect();
        let (sql, bound) = shared_first("\"t\"", &cols, &args);
        assert_eq!(
            sql,
            "INSERT INTO \"t\" (\"a\", \"b\") VALUES (?, ?), (?, ?)"
        );
        assert_eq!(texts(&bound), texts(&args));
    }
}
