//! Reloading the entity definitions while serving: compile the directory again, refuse changes
//! that would lose data, apply the additive table changes, then swap the catalog (routes,
//! validation, uploader mapping and the OpenAPI document change together; requests in flight
//! finish on the catalog they started with). Triggered by file changes with `--dev` and by
//! SIGHUP.

use crate::engine::Engine;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Compiles `dir` and makes it the catalog in force, or says why not (every message): the
/// same comparison with the database as at start ([`crate::evolve`]), applied in one
/// transaction before the swap.
pub async fn reload(engine: &Engine, dir: &Path) -> Result<(), Vec<String>> {
    let new = crate::schema::compile_dir(dir, &engine.hooks.names())
        .map_err(|d| d.iter().map(|d| d.to_string()).collect::<Vec<_>>())?;
    let outcome = crate::evolve::run(
        engine.storage.as_ref(),
        &new,
        crate::evolve::Mode::Apply,
        &engine.server,
    )
    .await
    .map_err(|e| vec![e.to_string()])?;
    if !outcome.refusals.is_empty() {
        return Err(outcome.refusals.iter().map(|r| r.to_string()).collect());
    }
    for step in &outcome.steps {
        tracing::info!(%step, "entity tables changed");
    }
    engine.catalog.store(new);
    Ok(())
}

async fn reload_and_log(engine: &Engine, dir: &Path, why: &str) {
    match reload(engine, dir).await {
        Ok(()) => {
            let names: Vec<String> = engine.catalog.load().entities.keys().cloned().collect();
            tracing::info!(trigger = why, entities = %names.join(", "), "entity definitions reloaded");
        }
        Err(problems) => {
            for p in &problems {
                tracing::error!("{p}");
            }
            tracing::error!(
                trigger = why,
                "entity definitions not reloaded; the previous ones keep serving"
            );
        }
    }
}

/// Reloads on every SIGHUP until `stop` turns true.
pub fn spawn_sighup(
    engine: Engine,
    dir: PathBuf,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        else {
            return;
        };
        loop {
            tokio::select! {
                _ = hup.recv() => reload_and_log(&engine, &dir, "SIGHUP").await,
                _ = stop.changed() => return,
            }
        }
    })
}

/// Watches `dir` and reloads after each burst of changes (debounced) until `stop` turns true.
pub fn spawn_watcher(
    engine: Engine,
    dir: PathBuf,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    use notify::Watcher;
    tokio::spawn(async move {
        let (tx, mut events) = tokio::sync::mpsc::unbounded_channel();
        let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            if let Ok(ev) = res
                && !matches!(ev.kind, notify::EventKind::Access(_))
            {
                let _ = tx.send(());
            }
        });
        let mut watcher = match watcher {
            Ok(w) => w,
            Err(e) => {
                tracing::error!(error = %e, "cannot watch the entities directory");
                return;
            }
        };
        if let Err(e) = watcher.watch(&dir, notify::RecursiveMode::NonRecursive) {
            tracing::error!(error = %e, dir = %dir.display(), "cannot watch the entities directory");
            return;
        }
        tracing::info!(dir = %dir.display(), "watching entity definitions");
        // Changes made between start-up and the watch taking hold.
        if reload(&engine, &dir).await.is_ok() {
            tracing::debug!("entity definitions checked after the watch started");
        }
        loop {
            tokio::select! {
                got = events.recv() => {
                    if got.is_none() { return; }
                    // Let a burst of events (an editor's save, a copy) settle.
                    loop {
                        tokio::select! {
                            more = events.recv() => if more.is_none() { return; },
                            _ = tokio::time::sleep(Duration::from_millis(250)) => break,
                        }
                    }
                    reload_and_log(&engine, &dir, "file change").await;
                }
                _ = stop.changed() => return,
            }
        }
    })
}
