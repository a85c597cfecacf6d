//! Workers: claim a request, run its items in chunks under the lease, then finish it. A chunk
//! that meets contention is rolled back and runs again whole (effects, results and progress
//! together), so it still applies exactly once.

use super::queue::add_detail;
use super::record::Request;
use super::{ChunkEnd, FINISHED, IN_PROGRESS, Jobs, unix_now};
use crate::engine::batch::item_call;
use crate::engine::prepare::Prepared;
use crate::engine::retry::Retry;
use crate::engine::{Call, CallError, Caller, Op, Outcome, outcome_parts};
use crate::schema::Role;
use crate::storage::request_log::{self, ResultRow};
use crate::storage::requests::{self, End, Progress};
use crate::storage::{Dialect, StorageError};
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
        let user = crate::storage::auth::user_by_id(self.storage.as_ref(), user_id).await?;
        Ok(user.as_ref().map(crate::auth::caller_of))
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
            let rows = request_log::next_items(self.storage.as_ref(), rid, done, self.chunk_size())
                .await?;
            if rows.is_empty() {
                break;
            }
            let calls: Vec<Result<Call, CallError>> = rows
                .iter()
                .map(|row| {
                    let item: Json = serde_json::from_str(&row.item).unwrap_or(Json::Null);
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
                ResultRow {
                    seq: first + i as i64,
                    status: i64::from(status),
                    body: body.to_string(),
                }
            })
            .collect();
        let done = first + outcomes.len() as i64;
        let recorded = async {
            request_log::insert_results(tx.as_mut(), d, rid, results).await?;
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
        let p = Progress {
            rid: &req.rid,
            worker: &self.worker_id,
            open: IN_PROGRESS,
            done,
            progress,
            heartbeat_at: unix_now(),
            cursor,
        };
        requests::advance(tx, d, &p).await
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
        let end = End {
            rid: &req.rid,
            worker: &self.worker_id,
            open: IN_PROGRESS,
            status_id,
            complete: status_id == FINISHED,
            finished_dt: crate::time::now(),
            http_status: status,
            content_type,
            result: path,
        };
        if requests::end(tx.as_mut(), d, &end).await? {
            add_detail(tx.as_mut(), d, &req.rid, last_detail).await?;
            // The items are no longer needed once every result is recorded.
            request_log::drop_items(tx.as_mut(), d, &req.rid).await?;
            tx.commit().await?;
        } else {
            tx.rollback().await?;
        }
        Ok(())
    }
}
