//! Servers that share a database agree on the definitions: each watches the record of the
//! definitions last applied, and an entity another server has changed since this one applied
//! its own answers 503 here until this server's files match again (a reload). A server never
//! writes through definitions the tables no longer follow.

use crate::engine::Engine;
use std::collections::BTreeSet;
use std::time::Duration;

/// How often the record is read.
pub const EVERY: Duration = Duration::from_millis(500);

/// The entities of the catalog in force whose recorded definition differs from this server's.
async fn changed_elsewhere(engine: &Engine) -> Option<BTreeSet<String>> {
    let recorded = super::digests(&super::recorded(engine.storage.as_ref()).await.ok()?);
    let catalog = engine.catalog.load();
    Some(
        catalog
            .entities
            .values()
            .filter(|e| recorded.get(&e.name) != Some(&super::entity_digest(e)))
            .map(|e| e.name.clone())
            .collect(),
    )
}

/// Marks the entities changed elsewhere in the catalog in force, every [`EVERY`], until `stop`.
pub fn spawn(
    engine: Engine,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(EVERY) => {}
                _ = stop.changed() => return,
            }
            let current = engine.catalog.load();
            let Some(changed) = changed_elsewhere(&engine).await else {
                continue;
            };
            if changed == current.changed_elsewhere {
                continue;
            }
            let mut next = (*current).clone();
            next.changed_elsewhere = changed.clone();
            // A reload that swapped the catalog meanwhile wins; the next turn looks again.
            if engine.catalog.replace_if(&current, next) {
                for name in &changed {
                    tracing::warn!(entity = %name, "another server changed this entity's definition: answering 503 for it until a reload");
                }
            }
        }
    })
}
