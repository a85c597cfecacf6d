//! SQL of `bg_changes`, what background requests changed (see [`crate::engine::changes`]),
//! and of the entity rows an undo reads and writes. Every entity table has a system column
//! [`REV`]: null for a row no one changed since it was created, else the `bg_requests` id of
//! the background request that last updated it (0 for a call outside any).

use super::sql::Dialect;
use super::{Exec, Result, Row, Value};
use crate::schema::{ColType, Entity};

/// The system column naming the last background request that changed a row.
pub const REV: &str = "_rev";

/// What a change did to its objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeOp {
    Create,
    Update,
    Delete,
}

impl ChangeOp {
    pub fn name(self) -> &'static str {
        match self {
            ChangeOp::Create => "create",
            ChangeOp::Update => "update",
            ChangeOp::Delete => "delete",
        }
    }

    pub fn parse(s: &str) -> Option<ChangeOp> {
        [ChangeOp::Create, ChangeOp::Update, ChangeOp::Delete]
            .into_iter()
            .find(|o| o.name() == s)
    }
}

/// One recorded change: the objects `lo..=hi` of `entity` created together, or the object `lo`
/// (= `hi`) updated or deleted, with its stored row before the change (JSON, column to value).
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub entity: String,
    pub op: ChangeOp,
    pub lo: i64,
    pub hi: i64,
    pub before: Option<String>,
}

/// Rows per INSERT (6 values each, well inside either database's parameter limit).
const ROWS_PER_INSERT: usize = 1000;

/// Records `changes` of request `rid`, in their order.
pub async fn record(ex: &mut dyn Exec, d: Dialect, rid: &str, changes: &[Change]) -> Result<()> {
    for part in changes.chunks(ROWS_PER_INSERT) {
        let sql = format!(
            "INSERT INTO \"bg_changes\" (\"rid\", \"entity\", \"op\", \"lo\", \"hi\", \"before\") VALUES {}",
            d.value_groups(6, part.len(), 1)
        );
        let mut args = Vec::with_capacity(part.len() * 6);
        for c in part {
            args.extend([
                Value::text(rid),
                Value::text(c.entity.as_str()),
                Value::text(c.op.name()),
                Value::int(c.lo),
                Value::int(c.hi),
                Value::Text(c.before.clone()),
            ]);
        }
        ex.execute(&sql, &args).await?;
    }
    Ok(())
}

/// Up to `limit` changes of `rid`, newest first, older than the change numbered `before`
/// (all when `before` is 0), each with its number.
pub async fn newest_first(
    ex: &mut dyn Exec,
    d: Dialect,
    rid: &str,
    before: i64,
    limit: i64,
) -> Result<Vec<(i64, Change)>> {
    let sql = d.bind(
        "SELECT \"seq\", \"entity\", \"op\", \"lo\", \"hi\", \"before\" FROM \"bg_changes\" \
         WHERE \"rid\" = ? AND (? = 0 OR \"seq\" < ?) ORDER BY \"seq\" DESC LIMIT ?",
    );
    let rows = ex
        .fetch(
            &sql,
            &[
                Value::text(rid),
                Value::int(before),
                Value::int(before),
                Value::int(limit),
            ],
            &[
                ColType::Int,
                ColType::Text,
                ColType::Text,
                ColType::Int,
                ColType::Int,
                ColType::Text,
            ],
        )
        .await?;
    Ok(rows
        .into_iter()
        .filter_map(|mut r| {
            let before = r.pop()?.into_string();
            let hi = r.pop()?.as_i64()?;
            let lo = r.pop()?.as_i64()?;
            let op = ChangeOp::parse(r.pop()?.as_str()?)?;
            let entity = r.pop()?.into_string()?;
            let seq = r.pop()?.as_i64()?;
            Some((
                seq,
                Change {
                    entity,
                    op,
                    lo,
                    hi,
                    before,
                },
            ))
        })
        .collect())
}

/// How many changes `rid` recorded.
pub async fn count(ex: &mut dyn Exec, d: Dialect, rid: &str) -> Result<i64> {
    let sql = d.bind("SELECT COUNT(*) FROM \"bg_changes\" WHERE \"rid\" = ?");
    let rows = ex.fetch(&sql, &[Value::text(rid)], &[ColType::Int]).await?;
    Ok(rows.first().and_then(|r| r[0].as_i64()).unwrap_or(0))
}

/// Per entity, how many objects `rid` created, updated or deleted (an object changed twice
/// counts once).
pub async fn objects(ex: &mut dyn Exec, d: Dialect, rid: &str) -> Result<Vec<(String, i64)>> {
    let sql = d.bind(
        "SELECT \"entity\", CAST(SUM(\"n\") AS BIGINT) FROM ( \
           SELECT \"entity\", SUM(\"hi\" - \"lo\" + 1) AS \"n\" FROM \"bg_changes\" \
             WHERE \"rid\" = ? AND \"op\" = 'create' GROUP BY \"entity\" \
           UNION ALL \
           SELECT c.\"entity\", COUNT(DISTINCT c.\"lo\") AS \"n\" FROM \"bg_changes\" c \
             WHERE c.\"rid\" = ? AND c.\"op\" <> 'create' AND NOT EXISTS ( \
               SELECT 1 FROM \"bg_changes\" k WHERE k.\"rid\" = c.\"rid\" \
                 AND k.\"entity\" = c.\"entity\" AND k.\"op\" = 'create' \
                 AND c.\"lo\" BETWEEN k.\"lo\" AND k.\"hi\") \
             GROUP BY c.\"entity\" \
         ) AS \"parts\" GROUP BY \"entity\" ORDER BY \"entity\"",
    );
    let rows = ex
        .fetch(
            &sql,
            &[Value::text(rid), Value::text(rid)],
            &[ColType::Text, ColType::Int],
        )
        .await?;
    Ok(rows
        .into_iter()
        .filter_map(|mut r| {
            let n = r.pop()?.as_i64()?;
            Some((r.pop()?.into_string()?, n))
        })
        .collect())
}

/// The condition "the row's id is among the objects `rid` created or changed" on `table`, its
/// arguments appended to `args`. Two index seeks per row: an update record of its id, or the
/// create range starting nearest below it (a request's create ranges never overlap).
pub fn changed_by(d: Dialect, table: &str, rid: &str, args: &mut Vec<Value>) -> String {
    let id = format!("{}.\"id\"", d.quote(table));
    let mut ph = |v: &str| {
        args.push(Value::text(v));
        d.ph(args.len())
    };
    let (rid1, table1, rid2, table2) = (ph(rid), ph(table), ph(rid), ph(table));
    format!(
        "(EXISTS (SELECT 1 FROM \"bg_changes\" c WHERE c.\"rid\" = {rid1} AND c.\"entity\" = {table1} \
           AND c.\"op\" = 'update' AND c.\"lo\" = {id}) \
         OR EXISTS (SELECT 1 FROM (SELECT c.\"hi\" FROM \"bg_changes\" c WHERE c.\"rid\" = {rid2} \
           AND c.\"entity\" = {table2} AND c.\"op\" = 'create' AND c.\"lo\" <= {id} \
           ORDER BY c.\"lo\" DESC LIMIT 1) AS \"r\" WHERE \"r\".\"hi\" >= {id}))"
    )
}

fn columns_with_rev(d: Dialect, e: &Entity) -> (String, Vec<ColType>) {
    let cols: Vec<String> = e
        .columns()
        .chain(std::iter::once(REV))
        .map(|c| d.quote(c))
        .collect();
    let mut types = e.col_types();
    types.push(ColType::Int);
    (cols.join(", "), types)
}

/// The stored rows of `e` with these ids (in no particular order), each ending with [`REV`].
pub async fn rows_by_ids(
    ex: &mut dyn Exec,
    d: Dialect,
    e: &Entity,
    ids: &[i64],
) -> Result<Vec<Row>> {
    let (cols, types) = columns_with_rev(d, e);
    let mut out = Vec::with_capacity(ids.len());
    for part in ids.chunks(ROWS_PER_INSERT) {
        let phs: Vec<String> = (1..=part.len()).map(|i| d.ph(i)).collect();
        let sql = format!(
            "SELECT {cols} FROM {} WHERE \"id\" IN ({})",
            d.quote(&e.name),
            phs.join(", ")
        );
        let args: Vec<Value> = part.iter().map(|i| Value::int(*i)).collect();
        out.extend(ex.fetch(&sql, &args, &types).await?);
    }
    Ok(out)
}

/// The stored row of `e` whose columns hold these values (a natural key), ending with [`REV`].
pub async fn row_by_key(
    ex: &mut dyn Exec,
    d: Dialect,
    e: &Entity,
    key: &[(String, Value)],
) -> Result<Option<Row>> {
    let (cols, types) = columns_with_rev(d, e);
    let mut args = Vec::new();
    let cond: Vec<String> = key
        .iter()
        .map(|(c, v)| {
            args.push(v.clone());
            format!("{} = {}", d.quote(c), d.ph(args.len()))
        })
        .collect();
    let sql = format!(
        "SELECT {cols} FROM {} WHERE {}",
        d.quote(&e.name),
        cond.join(" AND ")
    );
    Ok(ex.fetch(&sql, &args, &types).await?.pop())
}

/// The condition "no one but these requests changed the row since it was created".
fn unchanged_since(d: Dialect, revs: &[i64], args: &mut Vec<Value>) -> String {
    let phs: Vec<String> = revs
        .iter()
        .map(|r| {
            args.push(Value::int(*r));
            d.ph(args.len())
        })
        .collect();
    format!(
        "({} IS NULL OR {} IN ({}))",
        d.quote(REV),
        d.quote(REV),
        phs.join(", ")
    )
}

/// Deletes the objects `lo..=hi` of `e` that no one but the requests `revs` changed since
/// they were created; returns the deleted rows (ending with [`REV`]).
pub async fn delete_unchanged(
    ex: &mut dyn Exec,
    d: Dialect,
    e: &Entity,
    lo: i64,
    hi: i64,
    revs: &[i64],
) -> Result<Vec<Row>> {
    let (cols, types) = columns_with_rev(d, e);
    let mut args = vec![Value::int(lo), Value::int(hi)];
    let cond = unchanged_since(d, revs, &mut args);
    let sql = format!(
        "DELETE FROM {} WHERE \"id\" BETWEEN {} AND {} AND {cond} RETURNING {cols}",
        d.quote(&e.name),
        d.ph(1),
        d.ph(2)
    );
    let rows = ex.fetch(&sql, &args, &types).await?;
    if !rows.is_empty() {
        ex.count_rows(d, &e.name, -(rows.len() as i64)).await?;
    }
    for r in &rows {
        super::live::log_changed(ex, d, e, ChangeOp::Delete, r).await?;
    }
    Ok(rows)
}

/// The ids of the objects `lo..=hi` of `e` that still exist.
pub async fn ids_between(
    ex: &mut dyn Exec,
    d: Dialect,
    e: &Entity,
    lo: i64,
    hi: i64,
) -> Result<Vec<i64>> {
    let sql = format!(
        "SELECT \"id\" FROM {} WHERE \"id\" BETWEEN {} AND {} ORDER BY \"id\"",
        d.quote(&e.name),
        d.ph(1),
        d.ph(2)
    );
    let rows = ex
        .fetch(&sql, &[Value::int(lo), Value::int(hi)], &[ColType::Int])
        .await?;
    Ok(rows.iter().filter_map(|r| r[0].as_i64()).collect())
}

/// Writes `values` (column, value) into the object `id` of `e`, marking it changed by `rev`,
/// if no one but the requests `revs` changed it since it was created; whether it did.
pub async fn overwrite(
    ex: &mut dyn Exec,
    d: Dialect,
    e: &Entity,
    id: i64,
    values: Vec<(String, Value)>,
    rev: i64,
    revs: &[i64],
) -> Result<bool> {
    let mut args = Vec::with_capacity(values.len() + 2);
    let mut sets = Vec::with_capacity(values.len() + 1);
    for (c, v) in values {
        args.push(v);
        sets.push(format!("{} = {}", d.quote(&c), d.ph(args.len())));
    }
    args.push(Value::int(rev));
    sets.push(format!("{} = {}", d.quote(REV), d.ph(args.len())));
    args.push(Value::int(id));
    let id_ph = d.ph(args.len());
    let unchanged = unchanged_since(d, revs, &mut args);
    let sql = format!(
        "UPDATE {} SET {} WHERE \"id\" = {id_ph} AND {unchanged}",
        d.quote(&e.name),
        sets.join(", "),
    );
    // SQLite logs the row as it was (PostgreSQL's trigger sees it).
    let before = match d {
        Dialect::Sqlite => rows_by_ids(ex, d, e, &[id]).await?.pop(),
        Dialect::Postgres => None,
    };
    let done = ex.execute(&sql, &args).await? == 1;
    if let (true, Some(before)) = (done, &before) {
        super::live::log_changed(ex, d, e, ChangeOp::Update, before).await?;
    }
    Ok(done)
}

/// Inserts an object of `e` with its own id (in `values`), marked changed by `rev`.
pub async fn reinsert(
    ex: &mut dyn Exec,
    d: Dialect,
    e: &Entity,
    values: Vec<(String, Value)>,
    rev: i64,
) -> Result<()> {
    let id = values
        .iter()
        .find(|(c, _)| c == "id")
        .and_then(|(_, v)| v.as_i64());
    let mut cols: Vec<String> = values.iter().map(|(c, _)| d.quote(c)).collect();
    cols.push(d.quote(REV));
    let mut args: Vec<Value> = values.into_iter().map(|(_, v)| v).collect();
    args.push(Value::int(rev));
    let phs: Vec<String> = (1..=args.len()).map(|i| d.ph(i)).collect();
    let sql = format!(
        "INSERT INTO {} ({}) VALUES ({})",
        d.quote(&e.name),
        cols.join(", "),
        phs.join(", ")
    );
    ex.execute(&sql, &args).await?;
    ex.count_rows(d, &e.name, 1).await?;
    match id {
        Some(id) => super::live::log_created(ex, d, e, &[id]).await,
        None => Ok(()),
    }
}
