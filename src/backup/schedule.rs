//! Backups on a schedule (`serve --backup-to DIR --backup-every 6h --backup-keep 7`): one every
//! period, the oldest removed beyond the number kept, and the age of the last good backup in
//! the log after each attempt.

use crate::settings::Settings;
use std::path::PathBuf;
use std::time::Instant;

/// Takes a backup every `settings.backup_every` into `to` until `stop`.
pub fn spawn(
    settings: &Settings,
    to: PathBuf,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let inst = super::Installation {
        data_dir: settings.data_dir.clone(),
        database_url: settings.database_url(),
    };
    let (every, keep) = (settings.backup_every, settings.backup_keep);
    let inst = std::sync::Arc::new(inst);
    tokio::spawn(async move {
        let mut last_good: Option<Instant> = None;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                _ = stop.changed() => return,
            }
            let (inst, to2) = (inst.clone(), to.clone());
            let taken = tokio::task::spawn_blocking(move || {
                let dir = super::backup(&inst, &to2)?;
                let removed = super::prune(&to2, keep)?;
                Ok::<_, anyhow::Error>((dir, removed.len()))
            })
            .await;
            match taken {
                Ok(Ok((dir, removed))) => {
                    last_good = Some(Instant::now());
                    tracing::info!(backup = %dir.display(), removed, "backup taken");
                }
                Ok(Err(e)) => tracing::error!(error = %format!("{e:#}"), "backup failed"),
                Err(e) => tracing::error!(error = %e, "backup failed"),
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
