//! Workers: claim a request and run it through its kind; and what a kind runs a request
//! with: the caller it runs for, progress under the lease, and the end of the request.

use super::queue::add_detail;
use super::record::Request;
use super::{FINISHED, IN_PROGRESS, Jobs};
use crate::engine::Caller;
use crate::storage::request_log;
use crate::storage::requests::{self, End, Progress};
use crate::storage::{Exec, StorageError};
use crate::time::unix_now;
use std::time::Duration;
use tokio::sync::watch;
use tracing::Instrument;

/// What [`Jobs::advance_unless_cancelled`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advance {
    /// The progress is recorded (committed with the chunk's transaction).
    Recorded,
    /// A cancel was asked for: the chunk's transaction is to be rolled back.
    Cancelled,
    /// Another worker holds the request now.
    LeaseLost,
}

/// The details line of one wait for space.
fn waiting_for_space(why: &str) -> String {
    format!(
        "waiting for space: the disk or the file store is full ({why}); nothing of the failed \
         step was applied, and it is tried again shortly"
    )
}

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
        // Waits for space not yet written to their request's details (the database's own
        // disk may be the full one): written as soon as there is room.
        let mut unsaid: Vec<(String, String)> = Vec::new();
        loop {
            if *stop.borrow() {
                return;
            }
            self.say(&mut unsaid).await;
            match self.claim().await {
                Ok(Some(rid)) => {
                    if let Err(e) = self.run(&rid, &stop).await {
                        tracing::error!(rid, error = %e, "background request failed; it will be retried");
                        if let StorageError::Full(why) = &e {
                            unsaid.push((rid.clone(), waiting_for_space(why)));
                            self.say(&mut unsaid).await;
                        }
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

    /// Writes the lines of `unsaid` to their requests' details, keeping those that find no
    /// room yet.
    async fn say(&self, unsaid: &mut Vec<(String, String)>) {
        let mut kept = Vec::new();
        for (rid, line) in unsaid.drain(..) {
            if let Err(e) = self.log(&rid, &line).await {
                tracing::debug!(rid, error = %e, "the wait for space is not recorded yet");
                kept.push((rid, line));
            }
        }
        *unsaid = kept;
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
        // Its log lines carry the id of the HTTP request that started it.
        let span = tracing::info_span!(
            "background",
            rid = %req.rid,
            request_id = %req.params[super::queue::REQUEST_ID].as_str().unwrap_or("")
        );
        async move {
            tracing::info!(kind = req.kind.name(), "background request runs");
            kind.run(self, req, stop).await
        }
        .instrument(span)
        .await
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
        requests::advance(tx, d, &self.progress(req, done, cursor)).await
    }

    /// [`Jobs::advance`] that also reads, in the same statement, whether a cancel was asked
    /// for. The chunk's transaction holds it until its commit: a cancel committed before then
    /// is seen ([`Advance::Cancelled`]: the chunk is rolled back and did not run), one after waits for the
    /// next chunk.
    pub async fn advance_unless_cancelled(
        &self,
        tx: &mut dyn crate::storage::Tx,
        req: &Request,
        done: i64,
        cursor: Option<i64>,
    ) -> Result<Advance, StorageError> {
        let d = self.storage.dialect();
        let p = self.progress(req, done, cursor);
        Ok(match requests::advance_reading_cancel(tx, d, &p).await? {
            None => Advance::LeaseLost,
            Some(true) => Advance::Cancelled,
            Some(false) => Advance::Recorded,
        })
    }

    /// The progress record of `req` after `done` rows or items.
    fn progress<'a>(&'a self, req: &'a Request, done: i64, cursor: Option<i64>) -> Progress<'a> {
        let progress = if req.total > 0 {
            (done as f64 * 100.0 / req.total as f64).min(100.0)
        } else {
            100.0
        };
        Progress {
            rid: &req.rid,
            worker: &self.worker_id,
            open: IN_PROGRESS,
            done,
            progress,
            heartbeat_at: unix_now(),
            cursor,
        }
    }

    /// Keeps the lease of `req` while one long transaction holds its effects (a dry run or an
    /// all-or-nothing request commits nothing before its end). On PostgreSQL a task renews
    /// the heartbeat in transactions of its own until the guard is dropped; on SQLite the open
    /// transaction holds the only writer, so no other worker can claim the request meanwhile.
    pub fn keep_lease(&self, req: &Request) -> LeaseGuard {
        if self.storage.dialect() != crate::storage::Dialect::Postgres {
            return LeaseGuard(None);
        }
        let (jobs, rid) = (self.clone(), req.rid.clone());
        LeaseGuard(Some(tokio::spawn(async move {
            let every = Duration::from_secs((super::LEASE_SECS / 3).max(1) as u64);
            loop {
                tokio::time::sleep(every).await;
                let d = jobs.storage.dialect();
                let mut ex = crate::storage::AutoCommit(jobs.storage.as_ref());
                match requests::heartbeat(
                    &mut ex,
                    d,
                    &rid,
                    &jobs.worker_id,
                    IN_PROGRESS,
                    unix_now(),
                )
                .await
                {
                    Ok(true) => {}
                    Ok(false) => return,
                    Err(e) => tracing::warn!(rid, error = %e, "cannot renew a lease"),
                }
            }
        })))
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
        let mut tx = self.storage.begin().await?;
        let end = Ending {
            status_id,
            status,
            content_type,
            path,
            last_detail,
        };
        if self.close_in(tx.as_mut(), req, &end).await? {
            tx.commit().await?;
            self.drop_spent(req).await;
        } else {
            tx.rollback().await?;
        }
        Ok(())
    }

    /// Removes what a request that ended no longer needs: its items, and an upload's result
    /// parts (its result file is stored by then). Run after the end commits, so that the end
    /// does not wait for it (deleting 100,000 items took about 70 ms); should the server stop
    /// before, the request's expiry removes them.
    pub async fn drop_spent(&self, req: &Request) {
        let d = self.storage.dialect();
        let dropped = async {
            let mut tx = self.storage.begin().await?;
            request_log::drop_items(tx.as_mut(), d, &req.rid).await?;
            if req.kind.is_upload() {
                request_log::drop_results(tx.as_mut(), d, &req.rid).await?;
            }
            tx.commit().await
        }
        .await;
        if let Err(e) = dropped {
            tracing::warn!(rid = %req.rid, error = %e, "could not remove an ended request's items; its expiry will");
        }
    }

    /// [`Jobs::close`] inside `tx`, to commit with whatever else it holds; false when the
    /// lease is gone (`tx` must then be rolled back). Once `tx` committed, call
    /// [`Jobs::drop_spent`].
    pub async fn close_in(
        &self,
        tx: &mut dyn crate::storage::Tx,
        req: &Request,
        e: &Ending<'_>,
    ) -> Result<bool, StorageError> {
        let d = self.storage.dialect();
        let end = End {
            rid: &req.rid,
            worker: &self.worker_id,
            open: IN_PROGRESS,
            status_id: e.status_id,
            complete: e.status_id == FINISHED,
            finished_dt: crate::time::now(),
            http_status: e.status,
            content_type: e.content_type,
            result: e.path,
        };
        if !requests::end(tx, d, &end).await? {
            return Ok(false);
        }
        add_detail(tx, d, &req.rid, e.last_detail).await?;
        // What it no longer needs goes once this commits (see [`Jobs::drop_spent`]).
        Ok(true)
    }
}

/// How a request ends (see [`Jobs::close`]).
pub struct Ending<'a> {
    pub status_id: i64,
    pub status: i64,
    pub content_type: &'a str,
    pub path: &'a str,
    pub last_detail: &'a str,
}

/// Renews a lease while it lives (see [`Jobs::keep_lease`]).
pub struct LeaseGuard(Option<tokio::task::JoinHandle<()>>);

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        if let Some(h) = self.0.take() {
            h.abort();
        }
    }
}
