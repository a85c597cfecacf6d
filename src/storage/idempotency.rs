//! Statements on idempotency keys: the reply stored for a key, storing one, and forgetting old
//! ones.

use super::{Dialect, Exec, Result, Storage, Value};
use crate::schema::ColType;

/// The reply stored for a key.
#[derive(Debug, Clone)]
pub struct ReplyRow {
    pub status: i64,
    pub body: String,
    pub content_type: String,
}

/// The reply stored for `key` of `user_id` after `created_after` (Unix seconds), read on `ex`.
pub async fn reply(
    ex: &mut dyn Exec,
    d: Dialect,
    user_id: i64,
    key: &str,
    created_after: i64,
) -> Result<Option<ReplyRow>> {
    let sql = d.bind("SELECT \"status\", \"body\", \"content_type\" FROM \"idempotency_keys\" WHERE \"user_id\" = ? AND \"key\" = ? AND \"created_at\" > ?");
    let args = [
        Value::int(user_id),
        Value::text(key),
        Value::int(created_after),
    ];
    let rows = ex
        .fetch(&sql, &args, &[ColType::Int, ColType::Text, ColType::Text])
        .await?;
    Ok(rows.into_iter().next().map(|r| {
        let mut it = r.into_iter();
        ReplyRow {
            status: it.next().and_then(|v| v.as_i64()).unwrap_or(200),
            body: it.next().and_then(|v| v.into_string()).unwrap_or_default(),
            content_type: it.next().and_then(|v| v.into_string()).unwrap_or_default(),
        }
    }))
}

/// Stores `reply` for `key` of `user_id`, created at `created_at` (Unix seconds), replacing
/// any earlier one, inside `ex`.
pub async fn remember(
    ex: &mut dyn Exec,
    d: Dialect,
    user_id: i64,
    key: &str,
    reply: &ReplyRow,
    created_at: i64,
) -> Result<()> {
    let del = d.bind("DELETE FROM \"idempotency_keys\" WHERE \"user_id\" = ? AND \"key\" = ?");
    ex.execute(&del, &[Value::int(user_id), Value::text(key)])
        .await?;
    let sql = d.bind("INSERT INTO \"idempotency_keys\" (\"user_id\", \"key\", \"status\", \"body\", \"content_type\", \"created_at\") VALUES (?, ?, ?, ?, ?, ?)");
    let args = [
        Value::int(user_id),
        Value::text(key),
        Value::int(reply.status),
        Value::text(reply.body.as_str()),
        Value::text(reply.content_type.as_str()),
        Value::int(created_at),
    ];
    ex.execute(&sql, &args).await?;
    Ok(())
}

/// Drops idempotency keys created before `unix` seconds.
pub async fn forget_before(s: &dyn Storage, unix: i64) -> Result<u64> {
    let sql = format!(
        "DELETE FROM \"idempotency_keys\" WHERE \"created_at\" < {}",
        s.dialect().ph(1)
    );
    s.execute(&sql, &[Value::int(unix)]).await
}
