//! Backups on a schedule (`serve --backup-to DIR --backup-every 6h --backup-keep 7`): one every
//! period, the oldest removed beyond the number kept, and the age of the last good backup in
//! the log after each attempt.

use super::Target;
use crate::settings::Settings;
use std::time::Instant;

/// Takes a backup every `settings.backup_every` into `to` until `stop`.
pub fn spawn(
    settings: &Settings,
    to: Target,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let inst = super::Installation {
        data_dir: settings.data_dir.clone(),
        database_url: settings.database_url(),
    };
    let (every, keep) = (settings.backup_every, settings.backup_keep);
    let store = settings.storage_url.clone();
    let inst = std::sync::Arc::new(inst);
    tokio::spawn(async move {
        let mut last_good: Option<Instant> = None;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                _ = stop.changed() => return,
            }
            match super::target::take_from(&inst, store.as_deref(), &to).await {
                Ok(at) => {
                    last_good = Some(Instant::now());
                    crate::telemetry::backup_taken();
                    tracing::info!(backup = %at, "backup taken");
                    // A failed pruning does not make the backup any less good.
                    match super::target::prune(&to, keep).await {
                        Ok(removed) => tracing::info!(removed, "old backups pruned"),
                        Err(e) => {
                            tracing::error!(error = %format!("{e:#}"), "pruning backups failed")
                        }
                    }
                }
                Err(e) => tracing::error!(error = %format!("{e:#}"), "backup failed"),
            }
            match last_good {
                Some(t) => tracing::info!(
                    age_secs = t.elapsed().as_secs(),
                    "age of the last good backup"
                ),
                None => tracing::warn!("no good backup yet since this server started"),
            }
        }
    })
}
