//! Removes results past their keep time (the request record stays, answering 410; each kind
//! removes what it kept outside the database), idempotency keys older than a day, and, through
//! the kinds, scratch files that no request owns (left by a crash or a refused upload) once
//! they are older than [`SCRATCH_GRACE`].

use super::Jobs;
use crate::storage::{idempotency, requests};
use crate::time::unix_now;
use std::time::Duration;
use tokio::sync::watch;

/// Age after which a scratch file that no request owns is removed (an upload being received
/// or checked owns its files without a request for a moment).
pub const SCRATCH_GRACE: Duration = Duration::from_secs(3600);

impl Jobs {
    /// Starts the sweeper.
    pub fn spawn_sweeper(&self, mut stop: watch::Receiver<bool>) -> tokio::task::JoinHandle<()> {
        let jobs = self.clone();
        let keep = self.settings.result_keep;
        let every = (keep / 4).clamp(Duration::from_millis(200), Duration::from_secs(60));
        tokio::spawn(async move {
            loop {
                if let Err(e) = jobs.sweep().await {
                    tracing::error!(error = %e, "sweeping expired results failed");
                }
                if let Err(e) = jobs.sweep_scratch(SCRATCH_GRACE).await {
                    tracing::error!(error = %e, "sweeping upload scratch files failed");
                }
                tokio::select! {
                    _ = tokio::time::sleep(every) => {}
                    _ = stop.changed() => return,
                }
            }
        })
    }

    /// One sweep.
    pub async fn sweep(&self) -> crate::storage::Result<()> {
        let cutoff = chrono::Utc::now()
            - chrono::Duration::from_std(self.settings.result_keep).unwrap_or_default();
        let store = self.storage.as_ref();
        for rid in requests::expired(store, &crate::time::format(cutoff)).await? {
            requests::expire(store, &rid).await?;
            for kind in self.kinds.all() {
                kind.expired(self, &rid).await;
            }
            tracing::info!(rid, "removed an expired result");
        }
        idempotency::forget_before(store, unix_now() - 24 * 3600).await?;
        Ok(())
    }

    /// Lets every kind remove its scratch files that no unfinished request owns and that are
    /// older than `grace`. Returns how many went.
    pub async fn sweep_scratch(&self, grace: Duration) -> crate::storage::Result<usize> {
        let mut removed = 0;
        for kind in self.kinds.all() {
            removed += kind.sweep(self, grace).await?;
        }
        Ok(removed)
    }
}
