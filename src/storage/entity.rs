//! SQL for entity rows, built from the compiled catalog with bound values only.

use super::sql::Dialect;
use super::{Column, Exec, Result, Returned, Row, StorageError, Value};
use crate::schema::{ColType, Entity};

fn column_list(d: Dialect, e: &Entity) -> String {
    e.columns()
        .map(|c| d.quote(c))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a filter asks of a column.
#[derive(Debug, Clone, PartialEq)]
pub enum Cond {
    /// Equal (a null value: the column is null).
    Eq(Value),
    /// Not equal; rows where the column is null are included (a null value: the column is not
    /// null).
    Ne(Value),
    Gt(Value),
    Gte(Value),
    Lt(Value),
    Lte(Value),
    /// Equal to one of the values.
    In(Vec<Value>),
    /// Holds this text, ignoring case; `%`, `_` and `\` in it are matched as themselves.
    Contains(String),
    /// The row is among the objects the background request with this id created or changed
    /// (the column is `id`).
    ChangedBy(String),
    /// The row passes the caller's rule (the column is `id`).
    Rule(Box<super::rules::RuleFilter>),
}

/// A condition on a column (the name is checked against the entity by the caller).
#[derive(Debug, Clone, PartialEq)]
pub struct Filter {
    pub column: String,
    pub cond: Cond,
}

impl Filter {
    pub fn eq(column: impl Into<String>, value: Value) -> Filter {
        Filter {
            column: column.into(),
            cond: Cond::Eq(value),
        }
    }
}

/// One key a list is ordered by: ascending with nulls first, or descending with nulls last.
/// Rows equal on every key are ordered by id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortKey {
    pub column: String,
    pub desc: bool,
}

/// `text` as a LIKE pattern that finds it anywhere, its wildcards escaped with `\`.
fn contains_pattern(text: &str) -> String {
    let mut p = String::with_capacity(text.len() + 2);
    p.push('%');
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            p.push('\\');
        }
        p.push(c);
    }
    p.push('%');
    p
}

fn bind(args: &mut Vec<Value>, d: Dialect, v: &Value) -> String {
    args.push(v.clone());
    d.ph(args.len())
}

/// The name of SQLite's collation that orders decimal text by value (see the SQLite storage).
pub const DECIMAL_COLLATION: &str = "decimal";

/// Column `c` (quoted) as an operand that orders by value: on SQLite a decimal column holds
/// text, which its collation orders as numbers. Equality needs none: decimals are stored in
/// one normalized form, so equal numbers are equal text (and an index on the column serves).
fn ordered(d: Dialect, c: &str, decimal: bool) -> String {
    if decimal && d == Dialect::Sqlite {
        format!("{c} COLLATE {DECIMAL_COLLATION}")
    } else {
        c.to_string()
    }
}

fn is_decimal(v: &Value) -> bool {
    matches!(v, Value::Decimal(_))
}

fn condition(d: Dialect, table: &str, f: &Filter, args: &mut Vec<Value>) -> String {
    let c = d.quote(&f.column);
    let cmp = |op: &str, v: &Value, args: &mut Vec<Value>| format!("{c} {op} {}", bind(args, d, v));
    let order = |op: &str, v: &Value, args: &mut Vec<Value>| {
        format!(
            "{} {op} {}",
            ordered(d, &c, is_decimal(v)),
            bind(args, d, v)
        )
    };
    match &f.cond {
        Cond::Eq(v) if v.is_null() => format!("{c} IS NULL"),
        Cond::Eq(v) => cmp("=", v, args),
        Cond::Ne(v) if v.is_null() => format!("{c} IS NOT NULL"),
        Cond::Ne(v) => format!("({} OR {c} IS NULL)", cmp("<>", v, args)),
        Cond::Gt(v) => order(">", v, args),
        Cond::Gte(v) => order(">=", v, args),
        Cond::Lt(v) => order("<", v, args),
        Cond::Lte(v) => order("<=", v, args),
        Cond::In(vs) if vs.is_empty() => "1 = 0".into(),
        Cond::In(vs) => {
            let phs: Vec<String> = vs.iter().map(|v| bind(args, d, v)).collect();
            format!("{c} IN ({})", phs.join(", "))
        }
        Cond::ChangedBy(rid) => super::changes::changed_by(d, table, rid, args),
        Cond::Rule(rule) => rule.sql(d, args),
        Cond::Contains(text) => match d {
            // `fold` lowers every letter (see the SQLite storage); LIKE alone folds only ASCII.
            Dialect::Sqlite => {
                let p = bind(
                    args,
                    d,
                    &Value::text(contains_pattern(&text.to_lowercase())),
                );
                format!("fold({c}) LIKE {p} ESCAPE '\\'")
            }
            Dialect::Postgres => {
                let p = bind(args, d, &Value::text(contains_pattern(text)));
                format!("{c} ILIKE {p} ESCAPE '\\'")
            }
        },
    }
}

fn conditions(d: Dialect, table: &str, filters: &[Filter], args: &mut Vec<Value>) -> Vec<String> {
    filters
        .iter()
        .map(|f| condition(d, table, f, args))
        .collect()
}

/// The keyset condition of rows after the row whose sort values (then id) are `after`, in the
/// order of `keys` then id: for some key, every earlier key is equal and this one is later.
fn after_clause(d: Dialect, keys: &[SortKey], after: &[Value], args: &mut Vec<Value>) -> String {
    let id_key = SortKey {
        column: "id".into(),
        desc: false,
    };
    let all: Vec<&SortKey> = keys.iter().chain(std::iter::once(&id_key)).collect();
    let mut alternatives = Vec::new();
    for (i, (k, v)) in all.iter().zip(after).enumerate() {
        let c = d.quote(&k.column);
        let o = ordered(d, &c, is_decimal(v));
        let later = match (k.desc, v.is_null()) {
            // Nulls come first going up, last going down.
            (false, true) => Some(format!("{c} IS NOT NULL")),
            (false, false) => Some(format!("{o} > {}", bind(args, d, v))),
            (true, true) => None,
            (true, false) => Some(format!("({o} < {} OR {c} IS NULL)", bind(args, d, v))),
        };
        let Some(later) = later else { continue };
        let mut parts: Vec<String> = all[..i]
            .iter()
            .zip(after)
            .map(|(k, v)| {
                let c = d.quote(&k.column);
                if v.is_null() {
                    format!("{c} IS NULL")
                } else {
                    format!("{c} = {}", bind(args, d, v))
                }
            })
            .collect();
        parts.push(later);
        alternatives.push(format!("({})", parts.join(" AND ")));
    }
    if alternatives.is_empty() {
        "1 = 0".into()
    } else {
        format!("({})", alternatives.join(" OR "))
    }
}

fn order_by(d: Dialect, e: &Entity, keys: &[SortKey]) -> String {
    keys.iter()
        .map(|k| {
            let dir = if k.desc {
                "DESC NULLS LAST"
            } else {
                "ASC NULLS FIRST"
            };
            let decimal = e.col_type(&k.column) == Some(ColType::Decimal);
            format!("{} {dir}, ", ordered(d, &d.quote(&k.column), decimal))
        })
        .collect::<String>()
        + "\"id\" ASC"
}

fn where_clause(parts: &[String]) -> String {
    if parts.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", parts.join(" AND "))
    }
}

/// Where a page starts.
#[derive(Debug, Clone, PartialEq)]
pub enum Start {
    /// After skipping this many rows (costs as much as reading them).
    Offset(i64),
    /// Right after the row whose sort values, then id, are these (keyset: no rows skipped).
    After(Vec<Value>),
}

/// One page of rows, ordered by `sort`, then id.
pub async fn list(
    ex: &mut dyn Exec,
    d: Dialect,
    e: &Entity,
    filters: &[Filter],
    sort: &[SortKey],
    limit: i64,
    start: &Start,
) -> Result<Vec<Row>> {
    let mut args = Vec::new();
    let mut parts = conditions(d, &e.name, filters, &mut args);
    if let Start::After(after) = start {
        parts.push(after_clause(d, sort, after, &mut args));
    }
    let w = where_clause(&parts);
    args.push(Value::int(limit));
    let mut sql = format!(
        "SELECT {} FROM {}{w} ORDER BY {} LIMIT {}",
        column_list(d, e),
        d.quote(&e.name),
        order_by(d, e, sort),
        d.ph(args.len())
    );
    if let Start::Offset(offset) = start {
        args.push(Value::int(*offset));
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
    let w = where_clause(&conditions(d, &e.name, filters, &mut args));
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

/// A row by id; the statement is written once per entity and dialect.
pub async fn get(ex: &mut dyn Exec, d: Dialect, e: &Entity, id: i64) -> Result<Option<Row>> {
    let slot = match d {
        Dialect::Sqlite => 0,
        Dialect::Postgres => 1,
    };
    let sql = e.memo.text(slot, || get_sql(d, e));
    let types = e.col_types_once();
    let rows = ex.fetch(sql, &[Value::int(id)], types).await?;
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
    let mut out = if arrays {
        let (insert, params) = unnest_insert(d, e, &cols, args, width);
        fetch_unnested(ex, d, e, &insert, &params, whole_rows, &returning, &types).await?
    } else if ex.numbers_inserts() {
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
    out.sort_by_key(|r| r[0].as_i64().unwrap_or_default());
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
    let width = cols.len();
    let rows = args.len().checked_div(width).unwrap_or(0);
    let sql = format!(
        "INSERT INTO {} ({}) VALUES {}",
        d.quote(&e.name),
        cols.join(", "),
        d.value_groups(width, rows, 1),
    );
    let ids = ex.insert_numbered(&sql, args).await?;
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
        let sql = format!("{} {passing}", values_insert(d, e, &cols, width, rows));
        let args: Vec<Value> = args.iter().map(|v| (*v).clone()).collect();
        ex.fetch(&sql, &args, &e.col_types()).await?
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

/// The row a write addresses: by id, or by the values of some columns (a natural key, with
/// `id` among them when the caller may only write one row).
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    Id(i64),
    Key(&'a [(String, Value)]),
}

impl Target<'_> {
    /// `WHERE ...` with its arguments appended to `args`.
    pub(super) fn condition(&self, d: Dialect, args: &mut Vec<Value>) -> String {
        match self {
            Target::Id(id) => {
                args.push(Value::int(*id));
                format!("\"id\" = {}", d.ph(args.len()))
            }
            Target::Key(pairs) => {
                let parts: Vec<String> = pairs
                    .iter()
                    .map(|(c, v)| {
                        args.push(v.clone());
                        format!("{} = {}", d.quote(c), d.ph(args.len()))
                    })
                    .collect();
                parts.join(" AND ")
            }
        }
    }
}

/// The id of the row `target` names, if there is one.
pub async fn find_id(
    ex: &mut dyn Exec,
    d: Dialect,
    e: &Entity,
    target: Target<'_>,
) -> Result<Option<i64>> {
    let mut args = Vec::new();
    let cond = target.condition(d, &mut args);
    let sql = format!("SELECT \"id\" FROM {} WHERE {cond}", d.quote(&e.name));
    let rows = ex
        .fetch(&sql, &args, &[crate::schema::ColType::Int])
        .await?;
    Ok(rows.first().and_then(|r| r[0].as_i64()))
}

/// Updates the given columns of the row `target` names; `None` when there is no such row.
pub async fn update(
    ex: &mut dyn Exec,
    d: Dialect,
    e: &Entity,
    target: Target<'_>,
    values: Vec<(String, Value)>,
) -> Result<Option<Row>> {
    let sets: Vec<String> = values
        .iter()
        .enumerate()
        .map(|(i, (c, _))| format!("{} = {}", d.quote(c), d.ph(i + 1)))
        .collect();
    let mut args: Vec<Value> = values.into_iter().map(|(_, v)| v).collect();
    let cond = target.condition(d, &mut args);
    // SQLite logs the row as it was (PostgreSQL's trigger sees it): read first, by the
    // writer, which nothing else changes meanwhile.
    let before = match d {
        Dialect::Sqlite => {
            let mut key = Vec::new();
            let cond = target.condition(d, &mut key);
            let sql = format!(
                "SELECT {} FROM {} WHERE {cond}",
                column_list(d, e),
                d.quote(&e.name)
            );
            ex.fetch(&sql, &key, &e.col_types()).await?.pop()
        }
        Dialect::Postgres => None,
    };
    let sql = format!(
        "UPDATE {} SET {} WHERE {cond} RETURNING {}",
        d.quote(&e.name),
        sets.join(", "),
        column_list(d, e)
    );
    let row = ex.fetch(&sql, &args, &e.col_types()).await?.pop();
    if let (Some(_), Some(before)) = (&row, &before) {
        super::live::log_changed(ex, d, e, super::changes::ChangeOp::Update, before).await?;
    }
    Ok(row)
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

/// Deletes the row `target` names and returns it; `None` when there is no such row.
pub async fn delete(
    ex: &mut dyn Exec,
    d: Dialect,
    e: &Entity,
    target: Target<'_>,
) -> Result<Option<Row>> {
    let mut args = Vec::new();
    let cond = target.condition(d, &mut args);
    let sql = format!(
        "DELETE FROM {} WHERE {cond} RETURNING {}",
        d.quote(&e.name),
        column_list(d, e)
    );
    let row = ex.fetch(&sql, &args, &e.col_types()).await?.pop();
    if let Some(r) = &row {
        ex.count_rows(d, &e.name, -1).await?;
        super::live::log_changed(ex, d, e, super::changes::ChangeOp::Delete, r).await?;
    }
    Ok(row)
}
