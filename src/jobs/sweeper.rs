//! Removes results past their keep time (the request record stays, answering 410) and
//! idempotency keys older than a day.

use super::{Jobs, unix_now};
use crate::storage::Value;
use std::time::Duration;
use tokio::sync::watch;

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
                tokio::select! {
                    _ = tokio::time::sleep(every) => {}
                    _ = stop.changed() => return,
                }
            }
        })
    }

    /// One sweep.
    pub async fn sweep(&self) -> crate::storage::Result<()> {
        let d = self.storage.dialect();
        let cutoff = chrono::Utc::now()
            - chrono::Duration::from_std(self.settings.result_keep).unwrap_or_default();
        let cutoff = crate::time::format(cutoff);
        let sql = format!(
            "SELECT \"rid\" FROM \"bg_requests\" WHERE \"expired\" = 0 AND \"finished_dt\" IS NOT NULL AND \"finished_dt\" < {} LIMIT 1000",
            d.ph(1)
        );
        let rows = self
            .storage
            .fetch(
                &sql,
                &[Value::text(cutoff)],
                &[crate::schema::ColType::Text],
            )
            .await?;
        for r in rows {
            let Some(rid) = r.into_iter().next().and_then(|v| v.into_string()) else {
                continue;
            };
            let mut tx = self.storage.begin().await?;
            for table in ["bg_results", "bg_items", "bg_details"] {
                let sql = format!("DELETE FROM \"{table}\" WHERE \"rid\" = {}", d.ph(1));
                tx.execute(&sql, &[Value::text(&rid)]).await?;
            }
            let sql = format!(
                "UPDATE \"bg_requests\" SET \"expired\" = 1 WHERE \"rid\" = {}",
                d.ph(1)
            );
            tx.execute(&sql, &[Value::text(&rid)]).await?;
            tx.commit().await?;
            let _ = std::fs::remove_file(
                self.settings
                    .data_dir
                    .join(format!("media/keep1m/bgrs.{rid}.result.csv")),
            );
            tracing::info!(rid, "removed an expired result");
        }
        let sql = format!(
            "DELETE FROM \"idempotency_keys\" WHERE \"created_at\" < {}",
            d.ph(1)
        );
        self.storage
            .execute(&sql, &[Value::int(unix_now() - 24 * 3600)])
            .await?;
        Ok(())
    }
}
