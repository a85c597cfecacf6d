//! Reloading the entity definitions while serving: compile the directory again, refuse changes
//! that would lose data, apply the additive table changes, then swap the catalog (routes,
//! validation, uploader mapping and the OpenAPI document change together; requests in flight
//! finish on the catalog they started with). Triggered by file changes with `--dev` and by
//! SIGHUP.

use crate::engine::Engine;
use crate::schema::{Catalog, ColType, Entity, FieldType};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Compiles `dir` and makes it the catalog in force, or says why not (every message).
pub async fn reload(engine: &Engine, dir: &Path) -> Result<(), Vec<String>> {
    let new = crate::schema::compile_dir(dir, &engine.hooks.names())
        .map_err(|d| d.iter().map(|d| d.to_string()).collect::<Vec<_>>())?;
    let old = engine.catalog.load();
    let problems = destructive(engine, &old, &new).await;
    if !problems.is_empty() {
        return Err(problems);
    }
    crate::storage::ddl::apply(engine.storage.as_ref(), &new)
        .await
        .map_err(|e| vec![format!("cannot change the tables: {e}")])?;
    engine.catalog.store(new);
    Ok(())
}

/// Changes from `old` to `new` that would lose data.
async fn destructive(engine: &Engine, old: &Catalog, new: &Catalog) -> Vec<String> {
    let mut out = Vec::new();
    for (name, before) in &old.entities {
        match new.get(name) {
            None => {
                if has_rows(engine, name).await {
                    out.push(format!(
                        "{}: entity `{name}` was removed but its table has rows; delete them first (data is never dropped)",
                        before.source.display()
                    ));
                }
            }
            Some(after) => out.extend(field_changes(before, after)),
        }
    }
    out
}

fn field_changes(before: &Entity, after: &Entity) -> Vec<String> {
    let file = after.source.display();
    let mut out = Vec::new();
    for f in &before.fields {
        let Some(g) = after.field(&f.name) else {
            if !after.allow_destructive {
                out.push(format!(
                    "{file}: field `{}.{}` was removed; add `allow_destructive: true` to stop serving it (its column and data stay)",
                    after.name, f.name
                ));
            }
            continue;
        };
        if f.ty.col_type() != g.ty.col_type() {
            out.push(format!(
                "{file}: field `{}.{}` changed from {} to {}, which its stored values cannot follow; add a new field instead",
                after.name, f.name, f.ty.name(), g.ty.name()
            ));
            continue;
        }
        let narrowed = !widens(&f.ty, &g.ty)
            || matches!((f.max_length, g.max_length), (None, Some(_)))
            || matches!((f.max_length, g.max_length), (Some(x), Some(y)) if y < x);
        if narrowed && !after.allow_destructive {
            out.push(format!(
                "{file}: field `{}.{}` was narrowed (type {} to {}, or a shorter max_length, or fewer enum values); add `allow_destructive: true` if existing values may no longer fit",
                after.name, f.name, f.ty.name(), g.ty.name()
            ));
        }
    }
    out
}

/// Whether every value of type `a` is also a valid value of type `b`.
fn widens(a: &FieldType, b: &FieldType) -> bool {
    match (a, b) {
        (FieldType::Enum(x), FieldType::Enum(y)) => x.iter().all(|v| y.contains(v)),
        (FieldType::Reference(x), FieldType::Reference(y)) => x == y,
        (FieldType::Reference(_), FieldType::Integer) => true,
        (a, FieldType::String | FieldType::Text) => a.col_type() == ColType::Text,
        (a, b) => a == b,
    }
}

async fn has_rows(engine: &Engine, table: &str) -> bool {
    let mut pool = crate::storage::PoolExec(engine.storage.as_ref());
    crate::storage::entity::has_rows(&mut pool, engine.storage.dialect(), table)
        .await
        .unwrap_or(true)
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
