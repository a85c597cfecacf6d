//! Statements on what a background request holds besides its record: its items
//! (`bg_items`), each item's result (`bg_results`) and its details log (`bg_details`).

use super::{Dialect, Exec, Result, Storage, Value};
use crate::schema::ColType;

/// Rows per multi-row INSERT.
const INSERT_ROWS: usize = 500;

/// One stored item: its place in the request and its JSON text.
#[derive(Debug, Clone)]
pub struct ItemRow {
    pub seq: i64,
    pub item: String,
}

/// One item's result: its place, HTTP status and JSON body.
#[derive(Debug, Clone)]
pub struct ResultRow {
    pub seq: i64,
    pub status: i64,
    pub body: String,
}

/// One details entry.
#[derive(Debug, Clone)]
pub struct DetailRow {
    pub id: i64,
    pub rid: String,
    pub dt: String,
    pub details: String,
}

/// Inserts rows of `cols.len()` values each into `table (cols)`, many rows per statement.
async fn insert_rows(
    ex: &mut dyn Exec,
    d: Dialect,
    table: &str,
    cols: &[&str],
    rows: Vec<Vec<Value>>,
) -> Result<()> {
    let width = cols.len();
    let col_list = cols
        .iter()
        .map(|c| d.quote(c))
        .collect::<Vec<_>>()
        .join(", ");
    let mut rows = rows.into_iter().peekable();
    while rows.peek().is_some() {
        let part: Vec<Vec<Value>> = rows.by_ref().take(INSERT_ROWS).collect();
        let n = part.len();
        let args: Vec<Value> = part.into_iter().flatten().collect();
        let sql = format!(
            "INSERT INTO {} ({col_list}) VALUES {}",
            d.quote(table),
            d.value_groups(width, n, 1)
        );
        ex.execute(&sql, &args).await?;
    }
    Ok(())
}

/// Stores the items of `rid` inside `ex`, numbered from 0. The rows of one statement at a
/// time are made from the texts.
pub async fn insert_items(
    ex: &mut dyn Exec,
    d: Dialect,
    rid: &str,
    items: &crate::jobs::queue::ItemTexts,
) -> Result<()> {
    for start in (0..items.len()).step_by(INSERT_ROWS) {
        let rows = (start..items.len().min(start + INSERT_ROWS))
            .map(|i| {
                vec![
                    Value::text(rid),
                    Value::int(i as i64),
                    Value::text(items.get(i)),
                ]
            })
            .collect();
        insert_rows(ex, d, "bg_items", &["rid", "seq", "item"], rows).await?;
    }
    Ok(())
}

/// Up to `limit` items of `rid` from `seq` on, in order. Read on the writer's connection, as
/// part of the worker's own work: no trip to a reader thread.
pub async fn next_items(s: &dyn Storage, rid: &str, seq: i64, limit: i64) -> Result<Vec<ItemRow>> {
    items(s, rid, seq, limit, true).await
}

/// The same items read on a reader's connection (a worker reading ahead while its writes go
/// on).
pub async fn read_items(s: &dyn Storage, rid: &str, seq: i64, limit: i64) -> Result<Vec<ItemRow>> {
    items(s, rid, seq, limit, false).await
}

async fn items(
    s: &dyn Storage,
    rid: &str,
    seq: i64,
    limit: i64,
    on_writer: bool,
) -> Result<Vec<ItemRow>> {
    let sql = s.dialect().bind("SELECT \"seq\", \"item\" FROM \"bg_items\" WHERE \"rid\" = ? AND \"seq\" >= ? ORDER BY \"seq\" LIMIT ?");
    let args = [Value::text(rid), Value::int(seq), Value::int(limit)];
    let types = [ColType::Int, ColType::Text];
    let rows = if on_writer {
        s.fetch_write(&sql, &args, &types).await?
    } else {
        s.fetch(&sql, &args, &types).await?
    };
    Ok(rows.into_iter().map(item_row).collect())
}

/// An item as read: its seq and its JSON text.
fn item_row(r: Vec<Value>) -> ItemRow {
    let mut it = r.into_iter();
    ItemRow {
        seq: it.next().and_then(|v| v.as_i64()).unwrap_or_default(),
        item: it.next().and_then(|v| v.into_string()).unwrap_or_default(),
    }
}

/// Removes the items of `rid` inside `ex`.
pub async fn drop_items(ex: &mut dyn Exec, d: Dialect, rid: &str) -> Result<()> {
    let sql = format!("DELETE FROM \"bg_items\" WHERE \"rid\" = {}", d.ph(1));
    ex.execute(&sql, &[Value::text(rid)]).await?;
    Ok(())
}

/// Removes the results of `rid` inside `ex` (an upload's result parts once its result file is
/// stored).
pub async fn drop_results(ex: &mut dyn Exec, d: Dialect, rid: &str) -> Result<()> {
    let sql = d.bind("DELETE FROM \"bg_results\" WHERE \"rid\" = ?");
    ex.execute(&sql, &[Value::text(rid)]).await?;
    Ok(())
}

/// Stores one part of an upload's result file inside `ex`: the bytes (base64) that start at
/// byte `at` of the file.
pub async fn add_result_part(
    ex: &mut dyn Exec,
    d: Dialect,
    rid: &str,
    at: i64,
    base64: String,
) -> Result<()> {
    let sql = d.bind(
        "INSERT INTO \"bg_results\" (\"rid\", \"seq\", \"status\", \"body\") VALUES (?, ?, 0, ?)",
    );
    ex.execute(
        &sql,
        &[Value::text(rid), Value::int(at), Value::text(base64)],
    )
    .await?;
    Ok(())
}

/// Stores results of `rid` inside `ex`.
pub async fn insert_results(
    ex: &mut dyn Exec,
    d: Dialect,
    rid: &str,
    results: Vec<ResultRow>,
) -> Result<()> {
    let rows = results
        .into_iter()
        .map(|r| {
            vec![
                Value::text(rid),
                Value::int(r.seq),
                Value::int(r.status),
                Value::text(r.body),
            ]
        })
        .collect();
    insert_rows(ex, d, "bg_results", &["rid", "seq", "status", "body"], rows).await
}

/// Gives every item of `rid` from `seq` on that has no result yet the result `status` with
/// `body`.
pub async fn result_rest(
    ex: &mut dyn Exec,
    d: Dialect,
    rid: &str,
    seq: i64,
    status: i64,
    body: &str,
) -> Result<()> {
    let sql = format!(
        "INSERT INTO \"bg_results\" (\"rid\", \"seq\", \"status\", \"body\") \
         SELECT \"rid\", \"seq\", {}, {} FROM \"bg_items\" WHERE \"rid\" = {} AND \"seq\" >= {} \
         ON CONFLICT DO NOTHING",
        d.ph(1),
        d.ph(2),
        d.ph(3),
        d.ph(4)
    );
    ex.execute(
        &sql,
        &[
            Value::int(status),
            Value::text(body),
            Value::text(rid),
            Value::int(seq),
        ],
    )
    .await?;
    Ok(())
}

/// How many results `rid` has.
pub async fn count_results(ex: &mut dyn Exec, d: Dialect, rid: &str) -> Result<i64> {
    let sql = d.bind("SELECT COUNT(*) FROM \"bg_results\" WHERE \"rid\" = ?");
    let rows = ex.fetch(&sql, &[Value::text(rid)], &[ColType::Int]).await?;
    Ok(rows.first().and_then(|r| r[0].as_i64()).unwrap_or(0))
}

/// Results of `rid` with `seq >= from`, in order, at most `limit`.
pub async fn results(s: &dyn Storage, rid: &str, from: i64, limit: i64) -> Result<Vec<ResultRow>> {
    let d = s.dialect();
    let sql = d.bind("SELECT \"seq\", \"status\", \"body\" FROM \"bg_results\" WHERE \"rid\" = ? AND \"seq\" >= ? ORDER BY \"seq\" LIMIT ?");
    let rows = s
        .fetch(
            &sql,
            &[Value::text(rid), Value::int(from), Value::int(limit)],
            &[ColType::Int, ColType::Int, ColType::Text],
        )
        .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let mut it = r.into_iter();
            ResultRow {
                seq: it.next().and_then(|v| v.as_i64()).unwrap_or_default(),
                status: it.next().and_then(|v| v.as_i64()).unwrap_or_default(),
                body: it.next().and_then(|v| v.into_string()).unwrap_or_default(),
            }
        })
        .collect())
}

/// Appends details entries of `rid`, all dated `dt`, inside `ex`.
pub async fn add_details(
    ex: &mut dyn Exec,
    d: Dialect,
    rid: &str,
    dt: &str,
    lines: &[String],
) -> Result<()> {
    let rows = lines
        .iter()
        .map(|l| vec![Value::text(rid), Value::text(dt), Value::text(l.as_str())])
        .collect();
    insert_rows(ex, d, "bg_details", &["rid", "dt", "details"], rows).await
}

/// Details entries of `rid` after entry `since`, in order, at most `limit`.
pub async fn details(s: &dyn Storage, rid: &str, since: i64, limit: i64) -> Result<Vec<DetailRow>> {
    let d = s.dialect();
    let sql = d.bind("SELECT \"id\", \"rid\", \"dt\", \"details\" FROM \"bg_details\" WHERE \"rid\" = ? AND \"id\" > ? ORDER BY \"id\" LIMIT ?");
    let types = [ColType::Int, ColType::Text, ColType::Text, ColType::Text];
    let rows = s
        .fetch(
            &sql,
            &[Value::text(rid), Value::int(since), Value::int(limit)],
            &types,
        )
        .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let mut it = r.into_iter();
            let id = it.next().and_then(|v| v.as_i64()).unwrap_or_default();
            let mut text = || it.next().and_then(|v| v.into_string()).unwrap_or_default();
            DetailRow {
                id,
                rid: text(),
                dt: text(),
                details: text(),
            }
        })
        .collect())
}
