//! Statements on background requests: cancelling one, the next items of a batch, and what
//! housekeeping needs (expiring old results, dropping old idempotency keys, finding which
//! upload working copies are still owned).

use super::{Exec, Result, Storage, Value};
use crate::schema::ColType;

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

/// Removes a request's results, items and details and marks it expired, in one transaction.
pub async fn expire(s: &dyn Storage, rid: &str) -> Result<()> {
    let d = s.dialect();
    let mut tx = s.begin().await?;
    for table in ["bg_results", "bg_items", "bg_details"] {
        let sql = format!("DELETE FROM \"{table}\" WHERE \"rid\" = {}", d.ph(1));
        tx.execute(&sql, &[Value::text(rid)]).await?;
    }
    let sql = format!(
        "UPDATE \"bg_requests\" SET \"expired\" = 1 WHERE \"rid\" = {}",
        d.ph(1)
    );
    tx.execute(&sql, &[Value::text(rid)]).await?;
    tx.commit().await
}

/// Drops idempotency keys created before `unix` seconds.
pub async fn forget_keys_before(s: &dyn Storage, unix: i64) -> Result<u64> {
    let sql = format!(
        "DELETE FROM \"idempotency_keys\" WHERE \"created_at\" < {}",
        s.dialect().ph(1)
    );
    s.execute(&sql, &[Value::int(unix)]).await
}

/// The stored parameters (plans) of unfinished uploads.
pub async fn unfinished_upload_params(s: &dyn Storage) -> Result<Vec<String>> {
    let rows = s
        .fetch(
            "SELECT \"params\" FROM \"bg_requests\" WHERE \"finished_dt\" IS NULL AND \"kind\" IN ('upload', 'upload_sync')",
            &[],
            &[ColType::Text],
        )
        .await?;
    Ok(rows
        .into_iter()
        .filter_map(|r| r.into_iter().next().and_then(|v| v.into_string()))
        .collect())
}

/// Flags `rid` for cancelling when it is in state `in_progress`; whether it was.
pub async fn flag_cancel(
    ex: &mut dyn Exec,
    d: super::Dialect,
    rid: &str,
    in_progress: i64,
) -> Result<bool> {
    let sql = format!(
        "UPDATE \"bg_requests\" SET \"cancel_requested\" = 1 WHERE \"rid\" = {} AND \"status_id\" = {}",
        d.ph(1),
        d.ph(2)
    );
    Ok(ex
        .execute(&sql, &[Value::text(rid), Value::int(in_progress)])
        .await?
        == 1)
}

/// Whether a cancel of `rid` was asked for, read on `ex`.
pub async fn cancel_flagged(ex: &mut dyn Exec, d: super::Dialect, rid: &str) -> Result<bool> {
    let sql = format!(
        "SELECT \"cancel_requested\" FROM \"bg_requests\" WHERE \"rid\" = {}",
        d.ph(1)
    );
    let rows = ex.fetch(&sql, &[Value::text(rid)], &[ColType::Int]).await?;
    Ok(rows
        .first()
        .and_then(|r| r[0].as_i64())
        .is_some_and(|f| f != 0))
}

/// Gives every item of `rid` from `seq` on that has no result yet the result `status` with
/// `body`.
pub async fn result_rest(
    ex: &mut dyn Exec,
    d: super::Dialect,
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

/// Up to `limit` items of `rid` from `seq` on, in order: `(seq, item JSON text)`. Read on the
/// writer's connection, as part of the worker's own work: no trip to a reader thread.
pub async fn next_items(
    s: &dyn Storage,
    rid: &str,
    seq: i64,
    limit: i64,
) -> Result<Vec<(i64, String)>> {
    let d = s.dialect();
    let sql = format!(
        "SELECT \"seq\", \"item\" FROM \"bg_items\" WHERE \"rid\" = {} AND \"seq\" >= {} ORDER BY \"seq\" LIMIT {}",
        d.ph(1),
        d.ph(2),
        d.ph(3)
    );
    let rows = s
        .fetch_write(
            &sql,
            &[Value::text(rid), Value::int(seq), Value::int(limit)],
            &[ColType::Int, ColType::Text],
        )
        .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let seq = r[0].as_i64().unwrap_or_default();
            let item = r
                .into_iter()
                .nth(1)
                .and_then(|v| v.into_string())
                .unwrap_or_default();
            (seq, item)
        })
        .collect())
}
