//! Durable background requests. A request, its items, each item's result and its details log
//! are rows in the database; workers claim requests atomically, run their items in chunks
//! (each chunk's effects, results and progress commit in one transaction, under the worker's
//! lease), heartbeat, and take over requests whose worker died. Nothing here needs an HTTP
//! request in hand.

mod cancel;
pub use cancel::NOT_RUN;
mod items;
pub use items::Items;
pub mod kinds;
pub mod queue;
pub mod record;
mod runner;
pub use runner::{Advance, Ending, LeaseGuard};
pub mod sweeper;
pub mod undo;
mod undo_rules;
pub mod watch;

use crate::engine::Engine;
use crate::settings::Settings;
use crate::storage::Storage;
use std::sync::Arc;
use tokio::sync::Notify;

/// `status_id` values.
pub const IN_PROGRESS: i64 = 2;
pub const FINISHED: i64 = 4;
pub const CANCELLED: i64 = 5;

/// The name of a status.
pub fn status_name(id: i64) -> &'static str {
    match id {
        IN_PROGRESS => "in progress",
        FINISHED => "finished",
        CANCELLED => "cancelled",
        _ => "unknown",
    }
}

/// Seconds without a heartbeat after which another worker takes a request over.
pub const LEASE_SECS: i64 = 15;

/// How one chunk's transaction ended.
pub enum ChunkEnd<T> {
    /// Applied and committed with the progress.
    Committed(T),
    /// Another worker holds the request now: nothing applied, and this worker stops.
    LeaseLost,
    /// A cancel was asked for before the chunk committed (read inside its transaction):
    /// nothing applied.
    Cancelled,
}

/// The background-request service of one server.
#[derive(Clone)]
pub struct Jobs {
    pub engine: Engine,
    pub storage: Arc<dyn Storage>,
    pub settings: Arc<Settings>,
    /// This server's worker identity (unique per start).
    pub worker_id: String,
    wake: Arc<Notify>,
    /// Shared watchers of requests for event streams, and open streams per user.
    watchers: Arc<watch::Watchers>,
    /// The kinds requests run as.
    kinds: Arc<kinds::Registry>,
    /// Where the files of requests (uploads, result files) are kept.
    pub files: crate::files::Files,
}

impl Jobs {
    /// The service over `engine`, running requests with the kinds of `kinds`.
    pub fn new(
        engine: Engine,
        settings: Arc<Settings>,
        files: crate::files::Files,
        kinds: kinds::Registry,
    ) -> Jobs {
        let worker_id = format!(
            "{}-{}",
            std::process::id(),
            hex::encode(rand::random::<[u8; 4]>())
        );
        Jobs {
            storage: engine.storage.clone(),
            engine,
            settings,
            worker_id,
            wake: Arc::new(Notify::new()),
            watchers: Arc::default(),
            kinds: Arc::new(kinds),
            files,
        }
    }

    /// Wakes an idle worker (after an enqueue).
    pub fn notify(&self) {
        self.wake.notify_one();
    }

    /// The queue read now: requests not expired, counted per kind and status name.
    pub async fn depth(&self) -> Result<Vec<(String, String, i64)>, crate::storage::StorageError> {
        let depth = crate::storage::requests::depth(self.storage.as_ref()).await?;
        Ok(depth
            .into_iter()
            .map(|(kind, status, n)| (kind, status_name(status).to_string(), n))
            .collect())
    }
}
