//! Workers: claim a request and run it through its kind; and what a kind runs a request
//! with: the caller it runs for, progress under the lease, and the end of the request.

use super::queue::add_detail;
use super::record::Request;
use super::{FINISHED, IN_PROGRESS, Jobs, unix_now};
use crate::engine::Caller;
use crate::storage::request_log;
use crate::storage::requests::{self, End, Progress};
use crate::storage::{Exec, StorageError};
use std::time::Duration;
use tokio::sync::watch;

impl Jobs {
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

    /// The caller a request of `user_id` runs as; None when that user is gone.
    pub async fn caller_of(&self, user_id: i64) -> Result<Option<Caller>, StorageError> {
        let user = crate::storage::auth::user_by_id(self.storage.as_ref(), user_id).await?;
        Ok(user.as_ref().map(crate::auth::caller_of))
    }

    /// Appends a details entry to `rid` in its own transaction.
    pub async fn log(&self, rid: &str, text: &str) -> Result<(), StorageError> {
        let mut tx = self.storage.begin().await?;
        add_detail(tx.as_mut(), self.storage.dialect(), rid, text).await?;
        tx.commit().await
    }

    /// Replaces the stored parameters of `req` inside `ex`.
    pub async fn store_params(
        &self,
        ex: &mut dyn Exec,
        req: &Request,
        params: &serde_json::Value,
    ) -> Result<(), StorageError> {
        let d = self.storage.dialect();
        requests::set_params(ex, d, &req.rid, &params.to_string()).await
    }

    /// The stored parameters of unfinished requests of `kinds`.
    pub async fn unfinished_params(
        &self,
        kinds: &[super::kinds::KindId],
    ) -> Result<Vec<serde_json::Value>, StorageError> {
        let names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
        let rows = requests::unfinished_params(self.storage.as_ref(), &names).await?;
        Ok(rows
            .iter()
            .filter_map(|p| serde_json::from_str(p).ok())
            .collect())
    }

    /// Runs a claimed request through its kind.
    async fn run(&self, rid: &str, stop: &watch::Receiver<bool>) -> Result<(), StorageError> {
        let Some(req) = self.load(rid).await? else {
            return Ok(());
        };
        let Some(kind) = self.kinds.get(req.kind).cloned() else {
            return Err(StorageError::Database(format!(
                "no job kind `{}` is registered",
                req.kind.name()
            )));
        };
        kind.run(self, req, stop).await
    }

    /// Records progress (and, for uploads, the committed length of the result file) under
    /// the lease; false when the lease is gone.
    pub async fn advance(
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
    pub async fn finish(
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
    pub async fn close(
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
