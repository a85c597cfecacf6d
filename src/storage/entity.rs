//! SQL for entity rows, built from the compiled catalog with bound values only.

use super::sql::Dialect;
use super::{Exec, Result, Row, Value};
use crate::schema::{ColType, Entity};
use std::sync::Arc;

pub(super) fn column_list(d: Dialect, e: &Entity) -> String {
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
    let rows = ex
        .fetch(get_sql_once(d, e), &[Value::int(id)], e.col_types_once())
        .await?;
    Ok(rows.into_iter().next())
}

/// A row by id on the point-read lane, shared ([`Storage::fetch_point`]).
pub async fn get_point(
    st: &dyn super::Storage,
    e: &Entity,
    id: i64,
) -> Result<Option<Arc<super::PointRow>>> {
    let d = st.dialect();
    st.fetch_point(get_sql_once(d, e), e.col_types_once(), id)
        .await
}

/// [`get_sql`], written once per entity and dialect.
fn get_sql_once(d: Dialect, e: &Entity) -> &str {
    let slot = match d {
        Dialect::Sqlite => 0,
        Dialect::Postgres => 1,
    };
    e.memo.text(slot, || get_sql(d, e))
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
