//! Enqueueing, claiming and leasing background requests, the details log, and idempotency keys.

use super::{IN_PROGRESS, Jobs, LEASE_SECS, unix_now};
use crate::schema::ColType;
use crate::storage::{Dialect, Exec, Result, Value};
use serde_json::Value as Json;

/// Rows per multi-row INSERT.
const INSERT_ROWS: usize = 500;

/// What a new background request is.
pub struct NewRequest {
    pub user_id: i64,
    /// `batch`, `uploader`, or the method and path of a single call.
    pub name: String,
    /// How the runner treats the items: `batch`, `call` or `upload`.
    pub kind: String,
    pub entity: String,
    /// Request-level parameters (for a batch: the operation).
    pub params: Json,
    /// One JSON value per item, in order.
    pub items: Vec<Json>,
    /// Number of items when they are not stored as rows (uploads count lines).
    pub total: Option<i64>,
    pub content_type: String,
    /// Run by the caller itself (a synchronous upload): leased to this server from the start
    /// and never claimed by workers.
    pub run_here: bool,
    /// Details entries to log after the acceptance (e.g. ZIP extraction).
    pub details: Vec<String>,
}

/// A stored reply for an idempotency key.
pub struct Reply {
    pub status: u16,
    pub body: String,
    pub content_type: String,
}

/// A fresh request id: 32 lowercase hex digits from a CSPRNG.
pub fn new_rid() -> String {
    hex::encode(rand::random::<[u8; 16]>())
}

/// Appends a details entry inside `ex`.
pub async fn add_detail(ex: &mut dyn Exec, d: Dialect, rid: &str, text: &str) -> Result<()> {
    let sql = format!(
        "INSERT INTO \"bg_details\" (\"rid\", \"dt\", \"details\") VALUES ({}, {}, {})",
        d.ph(1),
        d.ph(2),
        d.ph(3)
    );
    ex.execute(
        &sql,
        &[
            Value::text(rid),
            Value::text(crate::time::now()),
            Value::text(text),
        ],
    )
    .await?;
    Ok(())
}

/// Inserts rows of `width` values each into `table (cols)`, many rows per statement.
pub async fn insert_rows(
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

impl Jobs {
    /// Stores a new request with its items (and the idempotency key's reply) in one
    /// transaction and wakes a worker. Returns the request id, or the earlier reply when the
    /// key was used already.
    pub async fn enqueue(
        &self,
        req: NewRequest,
        idempotency_key: Option<&str>,
    ) -> Result<Result<String, Reply>> {
        let d = self.storage.dialect();
        let rid = new_rid();
        let mut tx = self.storage.begin().await?;
        if let Some(key) = idempotency_key {
            if let Some(reply) = self.idempotent_reply(tx.as_mut(), req.user_id, key).await? {
                tx.rollback().await?;
                return Ok(Err(reply));
            }
            let body = serde_json::json!({"request": rid}).to_string();
            self.remember_reply(
                tx.as_mut(),
                req.user_id,
                key,
                202,
                &body,
                "application/json",
            )
            .await?;
        }
        let total = req.total.unwrap_or(req.items.len() as i64);
        let sql = format!(
            "INSERT INTO \"bg_requests\" (\"rid\", \"user_id\", \"name\", \"kind\", \"entity\", \"params\", \"total\", \"content_type\", \"created_dt\", \"status_id\", \"locked_by\", \"heartbeat_at\") VALUES ({})",
            (1..=12).map(|i| d.ph(i)).collect::<Vec<_>>().join(", ")
        );
        let args = [
            Value::text(&rid),
            Value::int(req.user_id),
            Value::text(&req.name),
            Value::text(&req.kind),
            Value::text(&req.entity),
            Value::text(req.params.to_string()),
            Value::int(total),
            Value::text(&req.content_type),
            Value::text(crate::time::now()),
            Value::int(IN_PROGRESS),
            Value::Text(req.run_here.then(|| self.worker_id.clone())),
            Value::Int(req.run_here.then(unix_now)),
        ];
        tx.execute(&sql, &args).await?;
        let rows = req
            .items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                vec![
                    Value::text(&rid),
                    Value::int(i as i64),
                    Value::text(item.to_string()),
                ]
            })
            .collect();
        insert_rows(tx.as_mut(), d, "bg_items", &["rid", "seq", "item"], rows).await?;
        add_detail(
            tx.as_mut(),
            d,
            &rid,
            &format!("request accepted: {} ({total} items)", req.name),
        )
        .await?;
        for line in &req.details {
            add_detail(tx.as_mut(), d, &rid, line).await?;
        }
        tx.commit().await?;
        if !req.run_here {
            self.notify();
        }
        Ok(Ok(rid))
    }

    /// The reply stored for `key` of `user_id` within the last 24 hours.
    pub async fn idempotent_reply(
        &self,
        ex: &mut dyn Exec,
        user_id: i64,
        key: &str,
    ) -> Result<Option<Reply>> {
        let d = self.storage.dialect();
        let sql = format!(
            "SELECT \"status\", \"body\", \"content_type\" FROM \"idempotency_keys\" WHERE \"user_id\" = {} AND \"key\" = {} AND \"created_at\" > {}",
            d.ph(1),
            d.ph(2),
            d.ph(3)
        );
        let args = [
            Value::int(user_id),
            Value::text(key),
            Value::int(unix_now() - 24 * 3600),
        ];
        let rows = ex
            .fetch(&sql, &args, &[ColType::Int, ColType::Text, ColType::Text])
            .await?;
        Ok(rows.into_iter().next().map(|r| {
            let mut it = r.into_iter();
            Reply {
                status: it.next().and_then(|v| v.as_i64()).unwrap_or(200) as u16,
                body: it.next().and_then(|v| v.into_string()).unwrap_or_default(),
                content_type: it.next().and_then(|v| v.into_string()).unwrap_or_default(),
            }
        }))
    }

    /// Stores the reply of `key` (replacing one older than 24 hours).
    pub async fn remember_reply(
        &self,
        ex: &mut dyn Exec,
        user_id: i64,
        key: &str,
        status: u16,
        body: &str,
        content_type: &str,
    ) -> Result<()> {
        let d = self.storage.dialect();
        let del = format!(
            "DELETE FROM \"idempotency_keys\" WHERE \"user_id\" = {} AND \"key\" = {}",
            d.ph(1),
            d.ph(2)
        );
        ex.execute(&del, &[Value::int(user_id), Value::text(key)])
            .await?;
        let sql = format!(
            "INSERT INTO \"idempotency_keys\" (\"user_id\", \"key\", \"status\", \"body\", \"content_type\", \"created_at\") VALUES ({}, {}, {}, {}, {}, {})",
            d.ph(1),
            d.ph(2),
            d.ph(3),
            d.ph(4),
            d.ph(5),
            d.ph(6)
        );
        let args = [
            Value::int(user_id),
            Value::text(key),
            Value::int(i64::from(status)),
            Value::text(body),
            Value::text(content_type),
            Value::int(unix_now()),
        ];
        ex.execute(&sql, &args).await?;
        Ok(())
    }

    /// Claims the oldest open request that no live worker holds.
    pub async fn claim(&self) -> Result<Option<String>> {
        let d = self.storage.dialect();
        let lock = match d {
            Dialect::Postgres => " FOR UPDATE SKIP LOCKED",
            Dialect::Sqlite => "",
        };
        let sql = format!(
            "UPDATE \"bg_requests\" SET \"locked_by\" = {p1}, \"heartbeat_at\" = {p2}, \"attempts\" = \"attempts\" + 1 \
             WHERE \"id\" = (SELECT \"id\" FROM \"bg_requests\" WHERE \"status_id\" = {p4} AND \"kind\" <> 'upload_sync' \
             AND (\"locked_by\" IS NULL OR \"heartbeat_at\" < {p3}) ORDER BY \"id\" LIMIT 1{lock}) RETURNING \"rid\"",
            p1 = d.ph(1),
            p2 = d.ph(2),
            p3 = d.ph(3),
            p4 = d.ph(4)
        );
        let now = unix_now();
        let args = [
            Value::text(&self.worker_id),
            Value::int(now),
            Value::int(now - LEASE_SECS),
            Value::int(IN_PROGRESS),
        ];
        let mut tx = self.storage.begin().await?;
        let rows = tx.fetch(&sql, &args, &[ColType::Text]).await?;
        tx.commit().await?;
        Ok(rows
            .into_iter()
            .next()
            .and_then(|r| r.into_iter().next()?.into_string()))
    }

    /// Releases every lease this worker holds (graceful shutdown).
    pub async fn release_all(&self) -> Result<()> {
        let d = self.storage.dialect();
        let sql = format!(
            "UPDATE \"bg_requests\" SET \"locked_by\" = NULL WHERE \"locked_by\" = {}",
            d.ph(1)
        );
        self.storage
            .execute(&sql, &[Value::text(&self.worker_id)])
            .await?;
        Ok(())
    }

    /// On a single-machine database, leases of earlier runs of this server are void.
    pub async fn release_stale_local(&self) -> Result<()> {
        if self.storage.dialect() == Dialect::Sqlite {
            self.storage
                .execute("UPDATE \"bg_requests\" SET \"locked_by\" = NULL WHERE \"locked_by\" IS NOT NULL", &[])
                .await?;
        }
        Ok(())
    }
}
