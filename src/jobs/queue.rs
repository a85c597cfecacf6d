//! Enqueueing, claiming and leasing background requests, the details log, and idempotency keys.

use super::kinds::KindId;
use super::{IN_PROGRESS, Jobs, LEASE_SECS};
use crate::item_texts::ItemTexts;
use crate::storage::idempotency::{self, ReplyRow};
use crate::storage::request_log;
use crate::storage::requests::{self, Claim, NewRequestRow};
use crate::storage::{Dialect, Exec, PoolExec, Result};
use crate::time::unix_now;
use serde_json::Value as Json;

/// What a new background request is.
pub struct NewRequest {
    pub user_id: i64,
    /// `batch`, `uploader`, or the method and path of a single call.
    pub name: String,
    /// The kind that runs it.
    pub kind: KindId,
    pub entity: String,
    /// Request-level parameters (for a batch: the operation).
    pub params: Json,
    /// The JSON text of each item, in order.
    pub items: ItemTexts,
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
    add_details(ex, d, rid, &[text.to_string()]).await
}

/// Appends details entries, dated now, inside `ex`.
pub async fn add_details(ex: &mut dyn Exec, d: Dialect, rid: &str, lines: &[String]) -> Result<()> {
    request_log::add_details(ex, d, rid, &crate::time::now(), lines).await
}

/// Where a request's stored parameters keep the id of the HTTP request that started it.
pub const REQUEST_ID: &str = "request_id";

impl Jobs {
    /// Stores a new request with its items (and the idempotency key's reply) in one
    /// transaction and wakes a worker. Returns the request id, or the earlier reply when the
    /// key was used already.
    pub async fn enqueue(
        &self,
        mut req: NewRequest,
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
        // The HTTP request that started it, for the worker's log lines.
        let mut params = match &req.params {
            Json::Null => Json::Object(Default::default()),
            p => p.clone(),
        };
        if let (Some(id), Some(m)) = (crate::request_id::current(), params.as_object_mut()) {
            m.insert(REQUEST_ID.into(), id.into());
        }
        let row = NewRequestRow {
            rid: &rid,
            user_id: req.user_id,
            name: &req.name,
            kind: req.kind.name(),
            entity: &req.entity,
            params: params.to_string(),
            total,
            content_type: &req.content_type,
            created_dt: crate::time::now(),
            status_id: IN_PROGRESS,
            locked_by: req.run_here.then_some(self.worker_id.as_str()),
            heartbeat_at: req.run_here.then(unix_now),
        };
        requests::insert(tx.as_mut(), d, &row).await?;
        request_log::insert_items(tx.as_mut(), d, &rid, &req.items).await?;
        // Stored: the texts (the size of the request's body) go before a worker starts on them.
        drop(std::mem::take(&mut req.items));
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

    /// [`Jobs::idempotent_reply`] read on the pool, outside any transaction.
    pub async fn idempotent_reply_on_pool(&self, user_id: i64, key: &str) -> Result<Option<Reply>> {
        let mut pool = PoolExec(self.storage.as_ref());
        self.idempotent_reply(&mut pool, user_id, key).await
    }

    /// [`Jobs::remember_reply`] written on the pool, outside any transaction.
    pub async fn remember_reply_on_pool(
        &self,
        user_id: i64,
        key: &str,
        status: u16,
        body: &str,
        content_type: &str,
    ) -> Result<()> {
        let mut pool = PoolExec(self.storage.as_ref());
        self.remember_reply(&mut pool, user_id, key, status, body, content_type)
            .await
    }

    /// The reply stored for `key` of `user_id` within the last 24 hours.
    pub async fn idempotent_reply(
        &self,
        ex: &mut dyn Exec,
        user_id: i64,
        key: &str,
    ) -> Result<Option<Reply>> {
        let since = unix_now() - 24 * 3600;
        let row = idempotency::reply(ex, self.storage.dialect(), user_id, key, since).await?;
        Ok(row.map(|r| Reply {
            status: r.status as u16,
            body: r.body,
            content_type: r.content_type,
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
        let reply = ReplyRow {
            status: i64::from(status),
            body: body.to_string(),
            content_type: content_type.to_string(),
        };
        idempotency::remember(ex, self.storage.dialect(), user_id, key, &reply, unix_now()).await
    }

    /// Claims the oldest open request that no live worker holds.
    pub async fn claim(&self) -> Result<Option<String>> {
        let now = unix_now();
        let claim = Claim {
            worker: &self.worker_id,
            now,
            stale_before: now - LEASE_SECS,
            open: IN_PROGRESS,
            skip_kind: KindId::UploadHere.name(),
        };
        let claimed = requests::claim(self.storage.as_ref(), &claim).await?;
        Ok(claimed.map(|(rid, attempts)| {
            if attempts > 1 {
                crate::telemetry::lease_taken_over();
            }
            rid
        }))
    }

    /// Releases every lease this worker holds (graceful shutdown).
    pub async fn release_all(&self) -> Result<()> {
        requests::release_worker(self.storage.as_ref(), &self.worker_id).await
    }

    /// On a single-machine database, leases of earlier runs of this server are void.
    pub async fn release_stale_local(&self) -> Result<()> {
        if self.storage.dialect() == Dialect::Sqlite {
            requests::release_all(self.storage.as_ref()).await?;
        }
        Ok(())
    }
}
