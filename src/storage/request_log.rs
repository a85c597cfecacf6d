//! Statements on what a background request holds besides its record: its items
//! (`bg_items`), each item's result (`bg_results`) and its details log (`bg_details`).
//! Items and results are written a chunk at a time, up to [`BLOCK`] consecutive entries to a
//! row (see [`blocks`]); a row of one entry holds it as it is, as earlier versions stored every
//! entry, and readers take both alike. An upload's result parts are rows of their own.

use super::blocks::{self, BLOCK};
use super::{Dialect, Exec, Result, Storage, Value};
use crate::schema::ColType;

/// Rows per multi-row INSERT of details.
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

/// Inserts rows of `cols.len()` values each into `table (cols)`, up to `per` rows per
/// statement.
async fn insert_rows(
    ex: &mut dyn Exec,
    d: Dialect,
    table: &str,
    cols: &[&str],
    rows: Vec<Vec<Value>>,
    per: usize,
) -> Result<()> {
    let width = cols.len();
    let col_list = cols
        .iter()
        .map(|c| d.quote(c))
        .collect::<Vec<_>>()
        .join(", ");
    let mut rows = rows.into_iter().peekable();
    while rows.peek().is_some() {
        let part: Vec<Vec<Value>> = rows.by_ref().take(per).collect();
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

/// Blocks per INSERT: one, so that a connection's buffers, which keep the size of the largest
/// statement they carried, stay near a block's (eight took the PostgreSQL batch's peak from 57
/// to 61-65 MB, for no time saved).
const BLOCKS_PER_INSERT: usize = 1;

/// The stored text of consecutive entries: one entry as it is, several as a block.
fn stored_text(entries: &[(Option<i64>, &str)]) -> String {
    match entries {
        [(_, text)] => (*text).to_string(),
        _ => {
            let len = entries.iter().map(|e| e.1.len() + 12).sum();
            let mut block = String::with_capacity(len);
            for (status, text) in entries {
                blocks::push(&mut block, *status, text);
            }
            block
        }
    }
}

/// Stores the items of `rid` inside `ex`, numbered from 0, [`BLOCK`] items to a row. Each
/// row is made from the texts as its statement is sent.
pub async fn insert_items(
    ex: &mut dyn Exec,
    d: Dialect,
    rid: &str,
    items: &crate::item_texts::ItemTexts,
) -> Result<()> {
    let cols = ["rid", "seq", "n", "item"];
    let starts: Vec<usize> = (0..items.len()).step_by(BLOCK).collect();
    for some in starts.chunks(BLOCKS_PER_INSERT) {
        let rows = some
            .iter()
            .map(|&start| {
                let entries: Vec<(Option<i64>, &str)> = (start..items.len().min(start + BLOCK))
                    .map(|i| (None, items.get(i)))
                    .collect();
                vec![
                    Value::text(rid),
                    Value::int(start as i64),
                    Value::int(entries.len() as i64),
                    Value::text(stored_text(&entries)),
                ]
            })
            .collect();
        insert_rows(ex, d, "bg_items", &cols, rows, BLOCKS_PER_INSERT).await?;
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
    let sql = s.dialect().bind(
        "SELECT \"seq\", \"n\", CAST(0 AS BIGINT), \"item\" FROM \"bg_items\" \
         WHERE \"rid\" = ? AND \"seq\" > ? AND \"seq\" < ? ORDER BY \"seq\"",
    );
    let args = window(rid, seq, limit);
    let rows = if on_writer {
        s.fetch_write(&sql, &args, &ENTRY_TYPES).await?
    } else {
        s.fetch(&sql, &args, &ENTRY_TYPES).await?
    };
    Ok(entries(rows, seq, limit, false)?
        .into_iter()
        .map(|(seq, _, item)| ItemRow { seq, item })
        .collect())
}

/// The columns of a stored entry or block: its first seq, how many entries, a status (of a
/// result stored alone) and the text.
const ENTRY_TYPES: [ColType; 4] = [ColType::Int, ColType::Int, ColType::Int, ColType::Text];

/// The arguments that find the rows holding entries `seq` to `seq + limit` of `rid`: a row
/// holds at most [`BLOCK`] entries, so the first one starts less than that before `seq`.
fn window(rid: &str, seq: i64, limit: i64) -> [Value; 3] {
    [
        Value::text(rid),
        Value::int(seq - BLOCK as i64),
        Value::int(seq.saturating_add(limit)),
    ]
}

/// The entries `(seq, status, text)` from `seq` on, at most `limit`, of rows read with
/// [`ENTRY_TYPES`].
fn entries(
    rows: Vec<Vec<Value>>,
    seq: i64,
    limit: i64,
    statuses: bool,
) -> Result<Vec<(i64, i64, String)>> {
    let end = seq.saturating_add(limit);
    let mut out = Vec::new();
    for r in rows {
        let mut it = r.into_iter();
        let mut int = || it.next().and_then(|v| v.as_i64()).unwrap_or_default();
        let (first, n, status) = (int(), int(), int());
        let text = it.next().and_then(|v| v.into_string()).unwrap_or_default();
        if n == 1 {
            out.push((first, status, text));
            continue;
        }
        let n = usize::try_from(n).unwrap_or_default();
        for (i, (status, text)) in blocks::split(&text, n, statuses)?.into_iter().enumerate() {
            out.push((first + i as i64, status, text));
        }
    }
    out.retain(|e| e.0 >= seq && e.0 < end);
    Ok(out)
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

/// The parts of an upload's result file of `rid` that start at byte `from` or later, in
/// order, at most `limit`: `(at, base64)`.
pub async fn result_parts(
    s: &dyn Storage,
    rid: &str,
    from: i64,
    limit: i64,
) -> Result<Vec<(i64, String)>> {
    let sql = s.dialect().bind(
        "SELECT \"seq\", \"body\" FROM \"bg_results\" WHERE \"rid\" = ? AND \"seq\" >= ? \
         ORDER BY \"seq\" LIMIT ?",
    );
    let args = [Value::text(rid), Value::int(from), Value::int(limit)];
    let rows = s.fetch(&sql, &args, &[ColType::Int, ColType::Text]).await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let mut it = r.into_iter();
            let at = it.next().and_then(|v| v.as_i64()).unwrap_or_default();
            (
                at,
                it.next().and_then(|v| v.into_string()).unwrap_or_default(),
            )
        })
        .collect())
}

/// Stores results of `rid` inside `ex`: each run of consecutive seqs in rows of up to
/// [`BLOCK`] results.
pub async fn insert_results(
    ex: &mut dyn Exec,
    d: Dialect,
    rid: &str,
    results: Vec<ResultRow>,
) -> Result<()> {
    let mut rows = Vec::new();
    let mut start = 0;
    while start < results.len() {
        let mut end = start + 1;
        while end < results.len()
            && end - start < BLOCK
            && results[end].seq == results[end - 1].seq + 1
        {
            end += 1;
        }
        let part = &results[start..end];
        let entries: Vec<(Option<i64>, &str)> = part
            .iter()
            .map(|r| (Some(r.status), r.body.as_str()))
            .collect();
        let status = if part.len() == 1 { part[0].status } else { 0 };
        rows.push(vec![
            Value::text(rid),
            Value::int(part[0].seq),
            Value::int(part.len() as i64),
            Value::int(status),
            Value::text(stored_text(&entries)),
        ]);
        start = end;
    }
    let cols = ["rid", "seq", "n", "status", "body"];
    insert_rows(ex, d, "bg_results", &cols, rows, BLOCKS_PER_INSERT).await
}

/// Gives items `from` to `to` (excluded) of `rid`, which have no result yet, the result
/// `status` with `body`.
pub async fn result_range(
    ex: &mut dyn Exec,
    d: Dialect,
    rid: &str,
    range: std::ops::Range<i64>,
    status: i64,
    body: &str,
) -> Result<()> {
    for first in range.clone().step_by(BLOCK) {
        let last = range.end.min(first + BLOCK as i64);
        let results = (first..last)
            .map(|seq| ResultRow {
                seq,
                status,
                body: body.to_string(),
            })
            .collect();
        insert_results(ex, d, rid, results).await?;
    }
    Ok(())
}

/// How many results `rid` has.
pub async fn count_results(ex: &mut dyn Exec, d: Dialect, rid: &str) -> Result<i64> {
    let sql = d.bind(
        "SELECT CAST(COALESCE(SUM(\"n\"), 0) AS BIGINT) FROM \"bg_results\" WHERE \"rid\" = ?",
    );
    let rows = ex.fetch(&sql, &[Value::text(rid)], &[ColType::Int]).await?;
    Ok(rows.first().and_then(|r| r[0].as_i64()).unwrap_or(0))
}

/// Results of `rid` with `seq >= from`, in order, at most `limit`.
pub async fn results(s: &dyn Storage, rid: &str, from: i64, limit: i64) -> Result<Vec<ResultRow>> {
    let sql = s.dialect().bind(
        "SELECT \"seq\", \"n\", \"status\", \"body\" FROM \"bg_results\" \
         WHERE \"rid\" = ? AND \"seq\" > ? AND \"seq\" < ? ORDER BY \"seq\"",
    );
    let rows = s
        .fetch(&sql, &window(rid, from, limit), &ENTRY_TYPES)
        .await?;
    Ok(entries(rows, from, limit, true)?
        .into_iter()
        .map(|(seq, status, body)| ResultRow { seq, status, body })
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
    insert_rows(
        ex,
        d,
        "bg_details",
        &["rid", "dt", "details"],
        rows,
        INSERT_ROWS,
    )
    .await
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item_texts::ItemTexts;

    fn text(rid: &str, seq: i64) -> String {
        format!("{{\"name\":\"{rid} {seq}\",\"note\":\"a\\nb: {seq}\"}}")
    }

    #[tokio::test]
    async fn entries_read_alike_from_blocks_and_from_rows_stored_one_by_one() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("t.db").display());
        let s = crate::storage::connect(&url).await.unwrap();
        let d = s.dialect();
        let mut items = ItemTexts::default();
        for seq in 0..2345 {
            items.push(&text("a", seq));
        }
        let mut tx = s.begin().await.unwrap();
        insert_items(tx.as_mut(), d, "a", &items).await.unwrap();
        // Rows as earlier versions stored them, one item each.
        for seq in 0..30 {
            let sql =
                d.bind("INSERT INTO \"bg_items\" (\"rid\", \"seq\", \"item\") VALUES (?, ?, ?)");
            let args = [
                Value::text("b"),
                Value::int(seq),
                Value::text(text("b", seq)),
            ];
            tx.execute(&sql, &args).await.unwrap();
        }
        tx.commit().await.unwrap();
        for (rid, seq, limit, want) in [
            ("a", 0, 1000, 0..1000),
            ("a", 1500, 1000, 1500..2345),
            ("a", 999, 2, 999..1001),
            ("a", 0, i64::from(i32::MAX), 0..2345),
            ("a", 2345, 10, 2345..2345),
            ("b", 7, 10, 7..17),
            ("b", 25, 1000, 25..30),
        ] {
            let got = read_items(s.as_ref(), rid, seq, limit).await.unwrap();
            let seqs: Vec<i64> = got.iter().map(|r| r.seq).collect();
            assert_eq!(
                seqs,
                want.clone().collect::<Vec<_>>(),
                "{rid} {seq} {limit}"
            );
            for r in &got {
                assert_eq!(r.item, text(rid, r.seq));
            }
        }

        let mut tx = s.begin().await.unwrap();
        let rows = |seqs: std::ops::Range<i64>| -> Vec<ResultRow> {
            seqs.map(|seq| ResultRow {
                seq,
                status: 200 + seq % 7,
                body: text("r", seq),
            })
            .collect()
        };
        // A run longer than a block, a run after it, and a result alone past a gap.
        insert_results(tx.as_mut(), d, "a", rows(0..1500))
            .await
            .unwrap();
        insert_results(tx.as_mut(), d, "a", rows(1500..2000))
            .await
            .unwrap();
        insert_results(tx.as_mut(), d, "a", rows(2100..2101))
            .await
            .unwrap();
        result_range(tx.as_mut(), d, "a", 2101..2345, 409, "{}")
            .await
            .unwrap();
        assert_eq!(count_results(tx.as_mut(), d, "a").await.unwrap(), 2245);
        tx.commit().await.unwrap();
        let got = results(s.as_ref(), "a", 990, 20).await.unwrap();
        assert_eq!(got.first().map(|r| r.seq), Some(990));
        assert_eq!(got.len(), 20);
        for r in &got {
            assert_eq!(
                (r.status, r.body.as_str()),
                (200 + r.seq % 7, text("r", r.seq).as_str())
            );
        }
        let got = results(s.as_ref(), "a", 1990, 1000).await.unwrap();
        let seqs: Vec<i64> = got.iter().map(|r| r.seq).collect();
        let want: Vec<i64> = (1990..2000).chain(2100..2345).collect();
        assert_eq!(seqs, want);
        assert_eq!(
            (got[10].status, got[11].status),
            (200, 409),
            "2100 % 7 is 0"
        );
    }
}
