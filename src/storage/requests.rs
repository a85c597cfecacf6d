//! Statements on background requests that housekeeping needs: expiring old results, dropping
//! old idempotency keys, and finding which upload working copies are still owned.

use super::{Result, Storage, Value};
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
