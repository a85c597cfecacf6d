//! Statements on the background-request record (`bg_requests`): storing one, reading it,
//! claiming and leasing, progress, the end, the cancel flag, and what housekeeping needs
//! (expiring old results, finding which upload working copies are still owned).

use super::{Dialect, Exec, Result, Row, Storage, Value};
use crate::schema::ColType;

/// One stored request, as its columns hold it.
#[derive(Debug, Clone)]
pub struct RequestRow {
    pub id: i64,
    pub rid: String,
    pub user_id: i64,
    pub name: String,
    pub kind: String,
    pub entity: String,
    /// The request-level parameters as JSON text.
    pub params: String,
    pub status_id: i64,
    pub total: i64,
    pub done: i64,
    pub cursor: i64,
    pub progress: f64,
    pub http_status: Option<i64>,
    pub content_type: Option<String>,
    pub result: Option<String>,
    pub created_dt: String,
    pub finished_dt: Option<String>,
    pub expired: bool,
}

const COLUMNS: &str = "\"id\", \"rid\", \"user_id\", \"name\", \"kind\", \"entity\", \"params\", \"status_id\", \"total\", \"done\", \"cursor\", \"progress\", \"http_status\", \"content_type\", \"result\", \"created_dt\", \"finished_dt\", \"expired\"";
const TYPES: [ColType; 18] = [
    ColType::Int,
    ColType::Text,
    ColType::Int,
    ColType::Text,
    ColType::Text,
    ColType::Text,
    ColType::Text,
    ColType::Int,
    ColType::Int,
    ColType::Int,
    ColType::Int,
    ColType::Float,
    ColType::Int,
    ColType::Text,
    ColType::Text,
    ColType::Text,
    ColType::Text,
    ColType::Int,
];

impl RequestRow {
    fn from_row(r: Row) -> RequestRow {
        let mut it = r.into_iter();
        let mut next = || it.next().unwrap_or(Value::Int(None));
        let int = |v: Value| v.as_i64().unwrap_or_default();
        let text = |v: Value| v.into_string().unwrap_or_default();
        RequestRow {
            id: int(next()),
            rid: text(next()),
            user_id: int(next()),
            name: text(next()),
            kind: text(next()),
            entity: text(next()),
            params: text(next()),
            status_id: int(next()),
            total: int(next()),
            done: int(next()),
            cursor: int(next()),
            progress: match next() {
                Value::Float(f) => f.unwrap_or_default(),
                v => v.as_i64().unwrap_or_default() as f64,
            },
            http_status: next().as_i64(),
            content_type: next().into_string(),
            result: next().into_string(),
            created_dt: text(next()),
            finished_dt: next().into_string(),
            expired: int(next()) != 0,
        }
    }
}

/// The values of a new request.
pub struct NewRequestRow<'a> {
    pub rid: &'a str,
    pub user_id: i64,
    pub name: &'a str,
    pub kind: &'a str,
    pub entity: &'a str,
    pub params: String,
    pub total: i64,
    pub content_type: &'a str,
    pub created_dt: String,
    pub status_id: i64,
    /// The worker leasing it from the start, if any, and when it took the lease.
    pub locked_by: Option<&'a str>,
    pub heartbeat_at: Option<i64>,
}

/// Stores a new request inside `ex`.
pub async fn insert(ex: &mut dyn Exec, d: Dialect, r: &NewRequestRow<'_>) -> Result<()> {
    let sql = format!(
        "INSERT INTO \"bg_requests\" (\"rid\", \"user_id\", \"name\", \"kind\", \"entity\", \"params\", \"total\", \"content_type\", \"created_dt\", \"status_id\", \"locked_by\", \"heartbeat_at\") VALUES ({})",
        (1..=12).map(|i| d.ph(i)).collect::<Vec<_>>().join(", ")
    );
    let args = [
        Value::text(r.rid),
        Value::int(r.user_id),
        Value::text(r.name),
        Value::text(r.kind),
        Value::text(r.entity),
        Value::text(r.params.as_str()),
        Value::int(r.total),
        Value::text(r.content_type),
        Value::text(r.created_dt.as_str()),
        Value::int(r.status_id),
        Value::Text(r.locked_by.map(str::to_string)),
        Value::Int(r.heartbeat_at),
    ];
    ex.execute(&sql, &args).await?;
    Ok(())
}

/// The request `rid`.
pub async fn load(s: &dyn Storage, rid: &str) -> Result<Option<RequestRow>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM \"bg_requests\" WHERE \"rid\" = {}",
        s.dialect().ph(1)
    );
    let rows = s.fetch(&sql, &[Value::text(rid)], &TYPES).await?;
    Ok(rows.into_iter().next().map(RequestRow::from_row))
}

/// Which requests a list shows; `None` does not filter.
pub struct ListFilter {
    pub user_id: Option<i64>,
    pub status_id: Option<i64>,
    pub name: Option<String>,
}

/// Requests matching `f`, newest first.
pub async fn list(
    s: &dyn Storage,
    f: ListFilter,
    limit: i64,
    offset: i64,
) -> Result<Vec<RequestRow>> {
    let d = s.dialect();
    let mut conds = Vec::new();
    let mut args = Vec::new();
    if let Some(u) = f.user_id {
        args.push(Value::int(u));
        conds.push(format!("\"user_id\" = {}", d.ph(args.len())));
    }
    if let Some(st) = f.status_id {
        args.push(Value::int(st));
        conds.push(format!("\"status_id\" = {}", d.ph(args.len())));
    }
    if let Some(n) = f.name {
        args.push(Value::text(n));
        conds.push(format!("\"name\" = {}", d.ph(args.len())));
    }
    let w = if conds.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", conds.join(" AND "))
    };
    args.push(Value::int(limit));
    args.push(Value::int(offset));
    let sql = format!(
        "SELECT {COLUMNS} FROM \"bg_requests\"{w} ORDER BY \"id\" DESC LIMIT {} OFFSET {}",
        d.ph(args.len() - 1),
        d.ph(args.len())
    );
    let rows = s.fetch(&sql, &args, &TYPES).await?;
    Ok(rows.into_iter().map(RequestRow::from_row).collect())
}

/// A claim of the oldest open request that no live worker holds.
pub struct Claim<'a> {
    pub worker: &'a str,
    pub now: i64,
    /// Leases whose heartbeat is older than this are void.
    pub stale_before: i64,
    /// The `status_id` of an open request.
    pub open: i64,
    /// Requests of this kind are never claimed (their caller runs them).
    pub skip_kind: &'a str,
}

/// Claims a request for `c.worker` and counts the attempt; its `rid` and how many times it
/// has been claimed, this time included.
pub async fn claim(s: &dyn Storage, c: &Claim<'_>) -> Result<Option<(String, i64)>> {
    let d = s.dialect();
    let lock = match d {
        Dialect::Postgres => " FOR UPDATE SKIP LOCKED",
        Dialect::Sqlite => "",
    };
    let sql = format!(
        "UPDATE \"bg_requests\" SET \"locked_by\" = {p1}, \"heartbeat_at\" = {p2}, \"attempts\" = \"attempts\" + 1 \
         WHERE \"id\" = (SELECT \"id\" FROM \"bg_requests\" WHERE \"status_id\" = {p4} AND \"kind\" <> {p5} \
         AND (\"locked_by\" IS NULL OR \"heartbeat_at\" < {p3}) ORDER BY \"id\" LIMIT 1{lock}) RETURNING \"rid\", \"attempts\"",
        p1 = d.ph(1),
        p2 = d.ph(2),
        p3 = d.ph(3),
        p4 = d.ph(4),
        p5 = d.ph(5)
    );
    let args = [
        Value::text(c.worker),
        Value::int(c.now),
        Value::int(c.stale_before),
        Value::int(c.open),
        Value::text(c.skip_kind),
    ];
    let mut tx = s.begin().await?;
    let rows = tx
        .fetch(&sql, &args, &[ColType::Text, ColType::Int])
        .await?;
    tx.commit().await?;
    Ok(rows.into_iter().next().and_then(|r| {
        let mut r = r.into_iter();
        let rid = r.next()?.into_string()?;
        Some((rid, r.next()?.as_i64().unwrap_or(1)))
    }))
}

/// How many background requests there are of each kind and status: `(kind, status_id, n)`.
pub async fn depth(s: &dyn Storage) -> Result<Vec<(String, i64, i64)>> {
    let rows = s
        .fetch(
            "SELECT \"kind\", \"status_id\", COUNT(*) FROM \"bg_requests\" WHERE \"expired\" = 0 \
             GROUP BY \"kind\", \"status_id\"",
            &[],
            &[ColType::Text, ColType::Int, ColType::Int],
        )
        .await?;
    Ok(rows
        .into_iter()
        .filter_map(|r| {
            let mut r = r.into_iter();
            let kind = r.next()?.into_string()?;
            let status = r.next()?.as_i64()?;
            Some((kind, status, r.next()?.as_i64()?))
        })
        .collect())
}

/// The rid of a request of `kind` named `name` that was not cancelled and has not failed
/// (still open, or finished with a status below 400), if there is one.
pub async fn live_of_name(
    s: &dyn Storage,
    kind: &str,
    name: &str,
    cancelled: i64,
) -> Result<Option<String>> {
    let sql = s.dialect().bind(
        "SELECT \"rid\" FROM \"bg_requests\" WHERE \"kind\" = ? AND \"name\" = ? \
         AND \"status_id\" <> ? AND (\"http_status\" IS NULL OR \"http_status\" < 400) \
         ORDER BY \"id\" LIMIT 1",
    );
    let rows = s
        .fetch(
            &sql,
            &[Value::text(kind), Value::text(name), Value::int(cancelled)],
            &[ColType::Text],
        )
        .await?;
    Ok(rows
        .into_iter()
        .next()
        .and_then(|r| r.into_iter().next())
        .and_then(Value::into_string))
}

/// Releases every lease `worker` holds.
pub async fn release_worker(s: &dyn Storage, worker: &str) -> Result<()> {
    let sql = format!(
        "UPDATE \"bg_requests\" SET \"locked_by\" = NULL WHERE \"locked_by\" = {}",
        s.dialect().ph(1)
    );
    s.execute(&sql, &[Value::text(worker)]).await?;
    Ok(())
}

/// Releases every lease of every worker.
pub async fn release_all(s: &dyn Storage) -> Result<()> {
    s.execute(
        "UPDATE \"bg_requests\" SET \"locked_by\" = NULL WHERE \"locked_by\" IS NOT NULL",
        &[],
    )
    .await?;
    Ok(())
}

/// Progress of a request, recorded under a worker's lease.
pub struct Progress<'a> {
    pub rid: &'a str,
    pub worker: &'a str,
    /// The `status_id` the request must still have.
    pub open: i64,
    pub done: i64,
    pub progress: f64,
    pub heartbeat_at: i64,
    /// The new cursor, or `None` to keep it.
    pub cursor: Option<i64>,
}

/// Records `p`; false when the request is not open under `p.worker`'s lease.
pub async fn advance(ex: &mut dyn Exec, d: Dialect, p: &Progress<'_>) -> Result<bool> {
    let (sql, args) = advance_statement(d, p, "");
    Ok(ex.execute(&sql, &args).await? == 1)
}

/// Records `p` like [`advance`] and reads, in the same statement, whether a cancel of the
/// request was asked for: `None` when the request is not open under `p.worker`'s lease, else
/// the cancel flag. On PostgreSQL the update waits for a cancel being flagged meanwhile and
/// then sees it.
pub async fn advance_reading_cancel(
    ex: &mut dyn Exec,
    d: Dialect,
    p: &Progress<'_>,
) -> Result<Option<bool>> {
    let (sql, args) = advance_statement(d, p, " RETURNING \"cancel_requested\"");
    let rows = ex.fetch(&sql, &args, &[ColType::Int]).await?;
    Ok(rows.first().map(|r| r[0].as_i64().is_some_and(|f| f != 0)))
}

/// The update of [`advance`], ending with `tail`, and its arguments.
fn advance_statement(d: Dialect, p: &Progress<'_>, tail: &str) -> (String, [Value; 7]) {
    let sql = format!(
        "UPDATE \"bg_requests\" SET \"done\" = {}, \"progress\" = {}, \"heartbeat_at\" = {}, \
         \"cursor\" = COALESCE({}, \"cursor\") \
         WHERE \"rid\" = {} AND \"locked_by\" = {} AND \"status_id\" = {}{tail}",
        d.ph(1),
        d.ph(2),
        d.ph(3),
        d.ph(4),
        d.ph(5),
        d.ph(6),
        d.ph(7)
    );
    let args = [
        Value::int(p.done),
        Value::Float(Some(p.progress)),
        Value::int(p.heartbeat_at),
        Value::Int(p.cursor),
        Value::text(p.rid),
        Value::text(p.worker),
        Value::int(p.open),
    ];
    (sql, args)
}

/// Renews the lease of `rid` held by `worker` while it is still `open`, changing nothing else;
/// false when the lease is gone.
pub async fn heartbeat(
    ex: &mut dyn Exec,
    d: Dialect,
    rid: &str,
    worker: &str,
    open: i64,
    now: i64,
) -> Result<bool> {
    let sql = d.bind(
        "UPDATE \"bg_requests\" SET \"heartbeat_at\" = ? WHERE \"rid\" = ? AND \"locked_by\" = ? AND \"status_id\" = ?",
    );
    let args = [
        Value::int(now),
        Value::text(rid),
        Value::text(worker),
        Value::int(open),
    ];
    Ok(ex.execute(&sql, &args).await? == 1)
}

/// The end of a request, recorded under a worker's lease (which it releases).
pub struct End<'a> {
    pub rid: &'a str,
    pub worker: &'a str,
    /// The `status_id` the request must still have.
    pub open: i64,
    pub status_id: i64,
    /// Sets the progress to 100 (else it keeps what it reached).
    pub complete: bool,
    pub finished_dt: String,
    pub http_status: i64,
    pub content_type: &'a str,
    pub result: &'a str,
}

/// Records `e`; false when the request is not open under `e.worker`'s lease.
pub async fn end(ex: &mut dyn Exec, d: Dialect, e: &End<'_>) -> Result<bool> {
    let progress = if e.complete { "100" } else { "\"progress\"" };
    let sql = format!(
        "UPDATE \"bg_requests\" SET \"status_id\" = {}, \"progress\" = {progress}, \"finished_dt\" = {}, \"http_status\" = {}, \
         \"content_type\" = {}, \"result\" = {}, \"locked_by\" = NULL WHERE \"rid\" = {} AND \"locked_by\" = {} AND \"status_id\" = {}",
        d.ph(1),
        d.ph(2),
        d.ph(3),
        d.ph(4),
        d.ph(5),
        d.ph(6),
        d.ph(7),
        d.ph(8)
    );
    let args = [
        Value::int(e.status_id),
        Value::text(e.finished_dt.as_str()),
        Value::int(e.http_status),
        Value::text(e.content_type),
        Value::text(e.result),
        Value::text(e.rid),
        Value::text(e.worker),
        Value::int(e.open),
    ];
    Ok(ex.execute(&sql, &args).await? == 1)
}

/// Replaces the stored parameters of `rid` inside `ex`.
pub async fn set_params(ex: &mut dyn Exec, d: Dialect, rid: &str, params: &str) -> Result<()> {
    let sql = d.bind("UPDATE \"bg_requests\" SET \"params\" = ? WHERE \"rid\" = ?");
    ex.execute(&sql, &[Value::text(params), Value::text(rid)])
        .await?;
    Ok(())
}

/// Ids of up to 1,000 finished requests whose results are older than `cutoff`
/// (`YYYY-MM-DD HH:MM:SS`) and not yet expired.
pub async fn expired(s: &dyn Storage, cutoff: &str) -> Result<Vec<String>> {
    let sql = format!(
        "SELECT \"rid\" FROM \"bg_requests\" WHERE \"expired\" = 0 AND \"finished_dt\" IS NOT NULL AND \"finished_dt\" < {} LIMIT 1000",
        s.dialect().ph(1)
    );
    let rows = s
        .fetch(&sql, &[Value::text(cutoff)], &[ColType::Text])
        .await?;
    Ok(rows
        .into_iter()
        .filter_map(|r| r.into_iter().next().and_then(|v| v.into_string()))
        .collect())
}

/// Removes a request's results, items, details and change records (it can no longer be
/// undone) and marks it expired, in one transaction.
pub async fn expire(s: &dyn Storage, rid: &str) -> Result<()> {
    let d = s.dialect();
    let mut tx = s.begin().await?;
    for table in ["bg_results", "bg_items", "bg_details", "bg_changes"] {
        let sql = format!("DELETE FROM \"{table}\" WHERE \"rid\" = {}", d.ph(1));
        tx.execute(&sql, &[Value::text(rid)]).await?;
    }
    let sql = d.bind("UPDATE \"bg_requests\" SET \"expired\" = 1 WHERE \"rid\" = ?");
    tx.execute(&sql, &[Value::text(rid)]).await?;
    tx.commit().await
}

/// The stored parameters of unfinished requests of the given kinds.
pub async fn unfinished_params(s: &dyn Storage, kinds: &[&str]) -> Result<Vec<String>> {
    let d = s.dialect();
    let list = (1..=kinds.len())
        .map(|i| d.ph(i))
        .collect::<Vec<_>>()
        .join(", ");
    let sql = format!(
        "SELECT \"params\" FROM \"bg_requests\" WHERE \"finished_dt\" IS NULL AND \"kind\" IN ({list})"
    );
    let args: Vec<Value> = kinds.iter().map(|k| Value::text(*k)).collect();
    let rows = s.fetch(&sql, &args, &[ColType::Text]).await?;
    Ok(rows
        .into_iter()
        .filter_map(|r| r.into_iter().next().and_then(|v| v.into_string()))
        .collect())
}

/// Flags `rid` for cancelling when it is in state `in_progress`; whether it was.
pub async fn flag_cancel(
    ex: &mut dyn Exec,
    d: Dialect,
    rid: &str,
    in_progress: i64,
) -> Result<bool> {
    let sql = d.bind("UPDATE \"bg_requests\" SET \"cancel_requested\" = 1 WHERE \"rid\" = ? AND \"status_id\" = ?");
    Ok(ex
        .execute(&sql, &[Value::text(rid), Value::int(in_progress)])
        .await?
        == 1)
}

/// Whether a cancel of `rid` was asked for, read on `ex`.
pub async fn cancel_flagged(ex: &mut dyn Exec, d: Dialect, rid: &str) -> Result<bool> {
    let sql = d.bind("SELECT \"cancel_requested\" FROM \"bg_requests\" WHERE \"rid\" = ?");
    let rows = ex.fetch(&sql, &[Value::text(rid)], &[ColType::Int]).await?;
    Ok(rows
        .first()
        .and_then(|r| r[0].as_i64())
        .is_some_and(|f| f != 0))
}
