//! Workers: claim a request, run its items in chunks under the lease, then finish it. A chunk
//! that meets contention is rolled back and runs again whole (effects, results and progress
//! together), so it still applies exactly once.

use super::queue::{add_detail, insert_rows};
use super::record::Request;
use super::{ChunkEnd, FINISHED, IN_PROGRESS, Jobs, unix_now};
use crate::engine::batch::item_call;
use crate::engine::prepare::Prepared;
use crate::engine::retry::Retry;
use crate::engine::{Call, CallError, Caller, Op, Outcome, outcome_parts};
use crate::schema::{ColType, Role};
use crate::storage::{Dialect, StorageError, Value, requests};
use serde_json::Value as Json;
use std::time::Duration;
use tokio::sync::watch;

/// How a stored item becomes a call.
fn item_to_call(req: &Request, item: &Json) -> Result<Call, CallError> {
    match req.kind.as_str() {
        "call" => serde_json::from_value(item.clone()).map_err(|_| CallError::Internal),
        _ => {
            let op: Op = serde_json::from_value(req.params["op"].clone()).unwrap_or(Op::Create);
            let mut call = item_call(&req.entity, op, item)?;
            call.prehashed = req.params["prehashed"].as_bool() == Some(true);
            Ok(call)
        }
    }
}

impl Jobs {
    /// Items per transaction.
    fn chunk_size(&self) -> i64 {
        match self.storage.dialect() {
            Dialect::Sqlite => 1000,
            Dialect::Postgres => 500,
        }
    }

    /// Starts `n` workers; they stop claiming when `stop` turns true.
    pub fn spawn_workers(
        &self,
        n: usize,
        stop: watch::Receiver<bool>,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        (0..n)
            .map(|_| {
                let jobs = self.clone();
                let stop = stop.clone();
                tokio::spawn(async move { jobs.work(stop).await })
            })
            .collect()
    }

    async fn work(&self, mut stop: watch::Receiver<bool>) {
        loop {
            if *stop.borrow() {
                return;
            }
            match self.claim().await {
                Ok(Some(rid)) => {
                    if let Err(e) = self.run(&rid, &stop).await {
                        tracing::error!(rid, error = %e, "background request failed; it will be retried");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                    continue;
                }
                Ok(None) => {}
                Err(e) => tracing::error!(error = %e, "cannot claim background requests"),
            }
            tokio::select! {
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                _ = stop.changed() => {}
            }
        }
    }

    pub(crate) async fn caller_of(&self, user_id: i64) -> Result<Option<Caller>, StorageError> {
        let d = self.storage.dialect();
        let sql = format!(
            "SELECT \"id\", \"login\", \"role\" FROM \"users\" WHERE \"id\" = {}",
            d.ph(1)
        );
        let rows = self
            .storage
            .fetch(
                &sql,
                &[Value::int(user_id)],
                &[ColType::Int, ColType::Text, ColType::Text],
            )
            .await?;
        Ok(rows.into_iter().next().map(|r| Caller {
            id: r[0].as_i64().unwrap_or_default(),
            login: r[1].as_str().unwrap_or_default().to_string(),
            role: r[2].as_str().and_then(Role::parse).unwrap_or(Role::User),
        }))
    }

    /// Runs a claimed request from where it stopped until it is finished, the lease is lost,
    /// or the server stops.
    async fn run(&self, rid: &str, stop: &watch::Receiver<bool>) -> Result<(), StorageError> {
        let Some(req) = self.load(rid).await? else {
            return Ok(());
        };
        if req.kind == "upload" {
            return crate::uploader::run::background(self, req, stop).await;
        }
        let d = self.storage.dialect();
        let caller = self.caller_of(req.user_id).await?;
        {
            let mut tx = self.storage.begin().await?;
            add_detail(
                tx.as_mut(),
                d,
                rid,
                &format!("started (worker {})", self.worker_id),
            )
            .await?;
            tx.commit().await?;
        }
        let mut done = req.done;
        loop {
            if *stop.borrow() {
                return Ok(());
            }
            // Storage calls may complete without suspending; let other tasks run.
            tokio::task::yield_now().await;
            let rows =
                requests::next_items(self.storage.as_ref(), rid, done, self.chunk_size()).await?;
            if rows.is_empty() {
                break;
            }
            let calls: Vec<Result<Call, CallError>> = rows
                .iter()
                .map(|(_, text)| {
                    let item: Json = serde_json::from_str(text).unwrap_or(Json::Null);
                    match &caller {
                        Some(_) => item_to_call(&req, &item),
                        None => Err(CallError::Forbidden(
                            "the user who started this request no longer exists".into(),
                        )),
                    }
                })
                .collect();
            let first = done;
            let n = calls.len() as i64;
            let system = Caller {
                id: req.user_id,
                login: String::new(),
                role: Role::User,
            };
            let who = caller.as_ref().unwrap_or(&system);
            // Prepared once, outside the transaction; a retry runs the same prepared calls.
            let prepared = self.engine.prepare_chunk(who, calls).await;
            let mut retry = Retry::new("background chunk");
            let outcomes = loop {
                match self.try_chunk(&req, who, &prepared, first).await {
                    Ok(o) => break o,
                    Err(e) if retry.again(&e).await => continue,
                    Err(e) => return Err(e),
                }
            };
            let outcomes = match outcomes {
                ChunkEnd::Committed(outcomes) => outcomes,
                ChunkEnd::LeaseLost => {
                    tracing::warn!(
                        rid,
                        "lost the lease of a background request; another worker has it"
                    );
                    return Ok(());
                }
                ChunkEnd::Cancelled => return self.cancel_items(&req, done).await,
            };
            self.engine.after_chunk(&prepared, &outcomes);
            done = first + n;
        }
        let (status, ctype, path) = if req.kind == "call" {
            let status = self.results(rid, 0, 1).await?.first().map_or(500, |r| r.1);
            (
                status,
                "application/json",
                format!("media/keep1m/bgrs.{rid}.result.json"),
            )
        } else {
            (
                200,
                "application/json",
                format!("media/keep1m/bgrs.{rid}.result.json"),
            )
        };
        self.finish(&req, status, ctype, &path).await
    }

    /// One attempt at a chunk of a batch: its calls, their results, the progress and a
    /// details line commit together under the lease, so the chunk applies exactly once.
    /// Rolled back when the lease is gone, when a cancel was asked for (read in the same
    /// transaction, so no trip to a reader thread per chunk), or with an `Err` when the
    /// database failed.
    async fn try_chunk(
        &self,
        req: &Request,
        who: &Caller,
        prepared: &[Result<Prepared, CallError>],
        first: i64,
    ) -> Result<ChunkEnd<Vec<Outcome>>, StorageError> {
        let d = self.storage.dialect();
        let rid = req.rid.as_str();
        let mut tx = self.storage.begin().await?;
        if self.cancel_requested_in(tx.as_mut(), rid).await? {
            tx.rollback().await?;
            return Ok(ChunkEnd::Cancelled);
        }
        let outcomes = match self
            .engine
            .execute_chunk(tx.as_mut(), who, prepared, true)
            .await
        {
            Ok(x) => x,
            Err(e) => {
                let _ = tx.rollback().await;
                return Err(e);
            }
        };
        let results = outcomes
            .iter()
            .enumerate()
            .map(|(i, o)| {
                let (status, body) = outcome_parts(o);
                vec![
                    Value::text(rid),
                    Value::int(first + i as i64),
                    Value::int(i64::from(status)),
                    Value::text(body.to_string()),
                ]
            })
            .collect();
        let done = first + outcomes.len() as i64;
        let recorded = async {
            insert_rows(
                tx.as_mut(),
                d,
                "bg_results",
                &["rid", "seq", "status", "body"],
                results,
            )
            .await?;
            if !self.advance(tx.as_mut(), req, done, None).await? {
                return Ok(false);
            }
            if req.kind == "batch" {
                add_detail(
                    tx.as_mut(),
                    d,
                    rid,
                    &format!("items {}-{} done", first + 1, done),
                )
                .await?;
            }
            Ok(true)
        }
        .await;
        match recorded {
            Ok(true) => {
                tx.commit().await?;
                Ok(ChunkEnd::Committed(outcomes))
            }
            Ok(false) => {
                let _ = tx.rollback().await;
                Ok(ChunkEnd::LeaseLost)
            }
            Err(e) => {
                let _ = tx.rollback().await;
                Err(e)
            }
        }
    }

    /// Records progress (and, for uploads, the committed length of the result file) under
    /// the lease; false when the lease is gone.
    pub(crate) async fn advance(
        &self,
        tx: &mut dyn crate::storage::Tx,
        req: &Request,
        done: i64,
        cursor: Option<i64>,
    ) -> Result<bool, StorageError> {
        let d = self.storage.dialect();
        let progress = if req.total > 0 {
            (done as f64 * 100.0 / req.total as f64).min(100.0)
        } else {
            100.0
        };
        let sql = format!(
            "UPDATE \"bg_requests\" SET \"done\" = {}, \"progress\" = {}, \"heartbeat_at\" = {}, \
             \"cursor\" = COALESCE({}, \"cursor\") \
             WHERE \"rid\" = {} AND \"locked_by\" = {} AND \"status_id\" = {}",
            d.ph(1),
            d.ph(2),
            d.ph(3),
            d.ph(4),
            d.ph(5),
            d.ph(6),
            d.ph(7)
        );
        let args = [
            Value::int(done),
            Value::Float(Some(progress)),
            Value::int(unix_now()),
            Value::Int(cursor),
            Value::text(&req.rid),
            Value::text(&self.worker_id),
            Value::int(IN_PROGRESS),
        ];
        Ok(tx.execute(&sql, &args).await? == 1)
    }

    /// Marks a request finished with the whole call's status and its result path.
    pub(crate) async fn finish(
        &self,
        req: &Request,
        status: i64,
        content_type: &str,
        path: &str,
    ) -> Result<(), StorageError> {
        self.close(req, FINISHED, status, content_type, path, "done")
            .await
    }

    /// Ends a request (finished or cancelled) under the lease, with its last details entry.
    /// A finished request shows 100 % progress; a cancelled one keeps what it reached.
    pub(crate) async fn close(
        &self,
        req: &Request,
        status_id: i64,
        status: i64,
        content_type: &str,
        path: &str,
        last_detail: &str,
    ) -> Result<(), StorageError> {
        let d = self.storage.dialect();
        let mut tx = self.storage.begin().await?;
        let progress = if status_id == FINISHED {
            "100"
        } else {
            "\"progress\""
        };
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
            Value::int(status_id),
            Value::text(crate::time::now()),
            Value::int(status),
            Value::text(content_type),
            Value::text(path),
            Value::text(&req.rid),
            Value::text(&self.worker_id),
            Value::int(IN_PROGRESS),
        ];
        if tx.execute(&sql, &args).await? == 1 {
            add_detail(tx.as_mut(), d, &req.rid, last_detail).await?;
            // The items are no longer needed once every result is recorded.
            let del = format!("DELETE FROM \"bg_items\" WHERE \"rid\" = {}", d.ph(1));
            tx.execute(&del, &[Value::text(&req.rid)]).await?;
            tx.commit().await?;
        } else {
            tx.rollback().await?;
        }
        Ok(())
    }
}
