//! The upload kind: how the workers run a background upload, what an expired upload leaves to
//! remove (its result file), and which upload scratch files no request owns any more.

use super::Plan;
use super::run::{Bundles, Sink, rows};
use crate::jobs::Jobs;
use crate::jobs::kinds::{JobKind, KindId};
use crate::jobs::record::Request;
use crate::plugins::Registry;
use crate::storage::StorageError;
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// CSV uploads, background or synchronous, run with the plugins of `plugins`.
pub struct Upload {
    pub plugins: Arc<Registry>,
    /// Where bundles' plugins store files.
    pub files: crate::files::Files,
}

#[async_trait::async_trait]
impl JobKind for Upload {
    fn ids(&self) -> &'static [KindId] {
        &[KindId::Upload, KindId::UploadHere]
    }

    async fn run(
        &self,
        jobs: &Jobs,
        req: Request,
        stop: &watch::Receiver<bool>,
    ) -> Result<(), StorageError> {
        let what = if req.done == 0 { "started" } else { "resumed" };
        jobs.log(&req.rid, &format!("{what} (worker {})", jobs.worker_id))
            .await?;
        match jobs.caller_of(req.user_id).await? {
            Some(caller) => {
                let bundles = Bundles {
                    plugins: &self.plugins,
                    files: &self.files,
                };
                rows(jobs, &bundles, &req, &caller, Sink::Details, stop).await
            }
            None => {
                let (_, rel) = super::result_location(&jobs.settings.data_dir, &req.rid);
                jobs.finish(&req, 403, "text/plain", &rel).await
            }
        }
    }

    async fn expired(&self, jobs: &Jobs, rid: &str) {
        let (file, key) = super::result_location(&jobs.settings.data_dir, rid);
        let _ = tokio::fs::remove_file(file).await;
        if let Err(e) = jobs.files.remove(&key).await {
            tracing::warn!(rid, error = %e, "cannot remove an expired result file");
        }
    }

    async fn sweep(&self, jobs: &Jobs, grace: Duration) -> Result<usize, StorageError> {
        let owned: HashSet<PathBuf> = jobs
            .unfinished_params(self.ids())
            .await?
            .into_iter()
            .filter_map(|p| serde_json::from_value::<Plan>(p).ok())
            .map(|p| p.working_copy(&jobs.settings.data_dir))
            .collect();
        let dir = super::intake::work_dir(&jobs.settings.data_dir);
        let kept = owned.clone();
        let removed =
            tokio::task::spawn_blocking(move || super::intake::remove_orphans(&dir, &kept, grace))
                .await
                .unwrap_or(0);
        // Working copies in a shared store: another server may be storing one it has not
        // enqueued yet, so only those older than the grace time (never less than
        // SCRATCH_GRACE, even at start) and owned by no unfinished request go.
        let mut gone = 0;
        if jobs.files.is_shared() {
            let uploads = jobs.files.child(crate::files::UPLOADS);
            let age = grace.max(crate::jobs::sweeper::SCRATCH_GRACE);
            let names: HashSet<String> = owned
                .iter()
                .filter_map(|p| p.file_name()?.to_str().map(str::to_string))
                .collect();
            // A store that does not answer is no reason to stop: /readyz says so, and the
            // next sweep tries again.
            match uploads.stored_before(age).await {
                Ok(found) => {
                    for name in found {
                        if !names.contains(&name) && uploads.remove(&name).await.is_ok() {
                            gone += 1;
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, "cannot list the stored working copies"),
            }
        }
        if removed + gone > 0 {
            tracing::info!(
                removed,
                stored = gone,
                "removed orphaned upload scratch files"
            );
        }
        Ok(removed + gone)
    }
}
