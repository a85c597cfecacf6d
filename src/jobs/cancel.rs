//! Cancelling a request: its owner (or an admin) asks; the worker running it sees the flag
//! in the transaction of its next chunk (which then applies nothing), records every item that
//! did not run as not run, and ends the request as `cancelled`. What already ran stays
//! applied and recorded.

use super::queue::add_detail;
use super::record::Request;
use super::{CANCELLED, IN_PROGRESS, Jobs};
use crate::storage::{Exec, StorageError, request_log, requests};

/// The text a cancelled item or row carries instead of its result.
pub const NOT_RUN: &str = "not run: the request was cancelled";

impl Jobs {
    /// Asks `rid` to stop. False when it is no longer in progress.
    pub async fn request_cancel(&self, rid: &str, by: &str) -> Result<bool, StorageError> {
        let d = self.storage.dialect();
        let mut tx = self.storage.begin().await?;
        let hit = requests::flag_cancel(tx.as_mut(), d, rid, IN_PROGRESS).await?;
        if hit {
            add_detail(tx.as_mut(), d, rid, &format!("cancel requested by {by}")).await?;
            tx.commit().await?;
            self.notify();
        } else {
            tx.rollback().await?;
        }
        Ok(hit)
    }

    /// Whether a cancel of `rid` was asked for, read on `ex`: a chunk reads it inside its own
    /// write transaction, which costs no trip to a reader thread, and a cancel committed
    /// before the chunk began is seen.
    pub async fn cancel_requested_in(
        &self,
        ex: &mut dyn Exec,
        rid: &str,
    ) -> Result<bool, StorageError> {
        requests::cancel_flagged(ex, self.storage.dialect(), rid).await
    }

    /// Ends a batch or backgrounded call whose first `done` items ran: every later item gets
    /// a 409 `not_run` result, and the request ends as cancelled.
    pub(crate) async fn cancel_items(&self, req: &Request, done: i64) -> Result<(), StorageError> {
        let d = self.storage.dialect();
        let body = serde_json::json!({"error": "not_run", "description": NOT_RUN}).to_string();
        let mut tx = self.storage.begin().await?;
        request_log::result_range(tx.as_mut(), d, &req.rid, done..req.total, 409, &body).await?;
        tx.commit().await?;
        let path = format!("media/keep1m/bgrs.{}.result.json", req.rid);
        let last = format!(
            "cancelled: {} of {} items ran, the rest did not run",
            done, req.total
        );
        self.close(req, CANCELLED, 200, "application/json", &path, &last)
            .await
    }
}
