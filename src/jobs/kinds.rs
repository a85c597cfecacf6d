//! Job kinds: what a background request is ([`KindId`], the one place its stored name is
//! spelt), the [`JobKind`] trait a kind implements, and the [`Registry`] of kinds a server is
//! built with. `jobs` runs a request through the kind registered for it and knows kinds only
//! through the trait; claiming, leases, progress, details, cancelling and results stay `jobs`'
//! own, offered to kinds as methods of [`Jobs`].

use super::Jobs;
use super::record::Request;
use crate::storage::StorageError;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The kinds of background request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KindId {
    /// A batch: stored items, each a call with the request's operation.
    Batch,
    /// One REST call run in the background: one stored item, the call itself.
    Call,
    /// A CSV upload run by the workers.
    Upload,
    /// A CSV upload run by the request that made it (synchronous): never claimed by workers.
    UploadHere,
    /// Reverts what another request applied.
    Undo,
}

impl KindId {
    /// The name stored with a request.
    pub fn name(self) -> &'static str {
        match self {
            KindId::Batch => "batch",
            KindId::Call => "call",
            KindId::Upload => "upload",
            KindId::UploadHere => "upload_sync",
            KindId::Undo => "undo",
        }
    }

    /// The kind a stored name means; a name this server does not know runs as a batch.
    pub fn from_name(name: &str) -> KindId {
        [
            KindId::Call,
            KindId::Upload,
            KindId::UploadHere,
            KindId::Undo,
        ]
        .into_iter()
        .find(|k| k.name() == name)
        .unwrap_or(KindId::Batch)
    }

    /// Whether a request of this kind is a CSV upload (its result is a CSV file).
    pub fn is_upload(self) -> bool {
        matches!(self, KindId::Upload | KindId::UploadHere)
    }
}

/// A kind of background request: how a claimed request of it runs.
#[async_trait::async_trait]
pub trait JobKind: Send + Sync {
    /// The kinds this implementation runs.
    fn ids(&self) -> &'static [KindId];

    /// Runs a claimed request from where it stopped, chunk after chunk, until it is over, its
    /// lease is lost, or `stop` turns true.
    async fn run(
        &self,
        jobs: &Jobs,
        req: Request,
        stop: &watch::Receiver<bool>,
    ) -> Result<(), StorageError>;

    /// Removes what a request of this kind keeps outside the database once its results
    /// expired.
    async fn expired(&self, _jobs: &Jobs, _rid: &str) {}

    /// Removes scratch files older than `grace` that no unfinished request of this kind owns;
    /// how many went.
    async fn sweep(&self, _jobs: &Jobs, _grace: Duration) -> Result<usize, StorageError> {
        Ok(0)
    }
}

/// The job kinds of one server, built at start and handed to [`Jobs`].
#[derive(Default, Clone)]
pub struct Registry {
    kinds: Vec<Arc<dyn JobKind>>,
}

impl Registry {
    /// Adds `kind`.
    pub fn with(mut self, kind: Arc<dyn JobKind>) -> Registry {
        self.kinds.push(kind);
        self
    }

    /// The kind that runs requests of `id`.
    pub fn get(&self, id: KindId) -> Option<&Arc<dyn JobKind>> {
        self.kinds.iter().find(|k| k.ids().contains(&id))
    }

    /// Every kind, once.
    pub fn all(&self) -> impl Iterator<Item = &Arc<dyn JobKind>> {
        self.kinds.iter()
    }
}
