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
    pub files: Arc<dyn crate::files::FileStore>,
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
                    files: self.files.as_ref(),
                };
                rows(jobs, &bundles, &req, &caller, Sink::Details, stop).await
            }
            None => {
                let (_, rel) = super::result_location(&jobs.settings.data_dir, &req.rid);
                jobs.finish(&req, 403, "text/plain", &rel).await
            }
        }
    }

    fn expired(&self, jobs: &Jobs, rid: &str) {
        let (file, _) = super::result_location(&jobs.settings.data_dir, rid);
        let _ = std::fs::remove_file(file);
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
        let removed =
            tokio::task::spawn_blocking(move || super::intake::remove_orphans(&dir, &owned, grace))
                .await
                .unwrap_or(0);
        if removed > 0 {
            tracing::info!(removed, "removed orphaned upload scratch files");
        }
        Ok(removed)
    }
}
