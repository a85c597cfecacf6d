//! Removes results past their keep time (the request record stays, answering 410),
//! idempotency keys older than a day, and scratch files of uploads that no request owns (left by
//! a crash or a refused upload) once they are older than [`SCRATCH_GRACE`].

use super::{Jobs, unix_now};
use crate::storage::{idempotency, requests};
use std::time::Duration;
use tokio::sync::watch;

/// Age after which an upload's scratch file that no request owns is removed (an upload being
/// received or checked owns its files without a request for a moment).
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
            let (file, _) = crate::uploader::result_location(&self.settings.data_dir, &rid);
            let _ = std::fs::remove_file(file);
            tracing::info!(rid, "removed an expired result");
        }
        idempotency::forget_before(store, unix_now() - 24 * 3600).await?;
        Ok(())
    }

    /// Removes files in the uploads directory that no unfinished request owns and that are
    /// older than `grace`. Returns how many went.
    pub async fn sweep_scratch(&self, grace: Duration) -> crate::storage::Result<usize> {
        let owned: std::collections::HashSet<std::path::PathBuf> =
            requests::unfinished_params(self.storage.as_ref(), &["upload", "upload_sync"])
                .await?
                .into_iter()
                .filter_map(|p| serde_json::from_str::<crate::uploader::Plan>(&p).ok())
                .map(|p| p.utf8_path)
                .collect();
        let dir = crate::uploader::intake::work_dir(&self.settings.data_dir);
        let removed = tokio::task::spawn_blocking(move || {
            crate::uploader::intake::remove_orphans(&dir, &owned, grace)
        })
        .await
        .unwrap_or(0);
        if removed > 0 {
            tracing::info!(removed, "removed orphaned upload scratch files");
        }
        Ok(removed)
    }
}
