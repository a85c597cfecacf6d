//! The engine: one path for every change. A REST call, a batch item and an uploader row all
//! become a [`Call`], which is checked against the entity's compiled schema and access rules
//! ([`prepare`]), then executed in a storage transaction ([`exec`]). The engine knows no HTTP.

pub mod access;
mod ahead;
pub mod batch;
pub mod bulk;
pub mod changes;
pub mod creates;
pub mod cursor;
mod error;
pub mod exec;
mod gather;
mod group;
pub mod hooks;
pub mod password;
pub mod points;
pub mod prepare;
pub mod query;
pub mod read;
pub mod render;
pub mod retry;
pub mod scripted;
pub mod secrets;
pub mod whole;

/// The failure the storage calls of the engine and of jobs return; [`internal`] hides it from
/// callers.
pub use crate::storage::StorageError;
pub use error::CallError;

use crate::catalog::CatalogHandle;
use crate::schema::Role;
use crate::storage::Storage;
use serde_json::{Map, Value as Json};
use std::sync::Arc;

/// Who is making a call.
#[derive(Debug, Clone, PartialEq)]
pub struct Caller {
    pub id: i64,
    pub login: String,
    pub role: Role,
}

impl Caller {
    pub fn is_admin(&self) -> bool {
        self.role.is_admin()
    }

    /// A request without credentials, on a route an entity's `public` rule opens: no user
    /// (id 0) and no role, so that no rule but `public` admits it.
    pub fn anonymous() -> Caller {
        Caller {
            id: 0,
            login: String::new(),
            role: Role::new(""),
        }
    }
}

/// A change operation.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Create,
    Update,
    Delete,
    /// Update the object named by `id`, else by the entity's key, creating it when none has
    /// that key (CSV `s`, `POST ?upsert=1`).
    Save,
}

impl Op {
    /// Its name, as in the stored calls: `create`, `update`, `save`, `delete`.
    pub fn name(self) -> &'static str {
        match self {
            Op::Create => "create",
            Op::Update => "update",
            Op::Save => "save",
            Op::Delete => "delete",
        }
    }
}

/// One change to one object.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Call {
    pub entity: String,
    pub op: Op,
    /// The object's id: absent for create; for update, delete and save absent when the object
    /// is named by the entity's key (taken from `params`).
    pub id: Option<i64>,
    /// Field values, already of the fields' JSON types (see [`prepare::coerce_strings`]).
    pub params: Map<String, Json>,
    /// Secret values in `params` were sealed by the server ([`secrets::seal`]) before the call
    /// was stored: hashes to store as they are, or the reasons they were refused.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prehashed: bool,
}

/// The result of a call: the object (created, updated or deleted) or the error.
pub type Outcome = Result<Json, CallError>;

/// The id of the object of a call that succeeded. A group of creates run without wanting
/// their objects (an upload's, whose result holds only the id) gives each row its id alone,
/// a JSON number, rather than an object per row; every other call gives the object.
pub fn outcome_id(obj: &Json) -> Option<i64> {
    match obj {
        Json::Number(n) => n.as_i64(),
        obj => obj.get("id").and_then(Json::as_i64),
    }
}

/// HTTP-style status and the text of the body of an outcome, as a stored result holds it.
pub fn outcome_text(o: &Outcome) -> (u16, String) {
    match o {
        Ok(obj) => (200, obj.to_string()),
        Err(e) => (e.status(), e.body().to_string()),
    }
}

/// Hook called with a user id after that user's record changed or was deleted, so that cached
/// credentials are dropped.
pub type UserChanged = Arc<dyn Fn(i64) + Send + Sync>;

/// The engine: catalog, storage and what must hear of user changes.
#[derive(Clone)]
pub struct Engine {
    pub catalog: CatalogHandle,
    pub storage: Arc<dyn Storage>,
    pub user_changed: UserChanged,
    /// The hooks every call meets (the plugins).
    pub hooks: Arc<dyn hooks::CallHooks>,
    /// The group-commit writer, on single-writer backends.
    writer: Option<gather::Queue>,
    /// The writers of single creates that share statements (PostgreSQL).
    creates: Option<gather::Queue>,
    /// The readers of objects by id that share statements (PostgreSQL).
    points: Option<points::Queue>,
    /// Admission of list pages (see [`read`]): point reads never wait for it.
    lists: Arc<tokio::sync::Semaphore>,
    /// How this server names itself in the history of entity changes.
    pub server: Arc<str>,
    /// The bulk writes (uploads) running on this server.
    pub bulk: bulk::Bulk,
}

impl Engine {
    /// Whether the database answers a trivial query.
    pub async fn ping(&self) -> Result<(), StorageError> {
        crate::storage::ping(self.storage.as_ref()).await
    }

    /// An engine; on SQLite it starts the group-commit writer (needs a tokio runtime).
    pub fn new(
        catalog: CatalogHandle,
        storage: Arc<dyn Storage>,
        user_changed: UserChanged,
        hooks: Arc<dyn hooks::CallHooks>,
    ) -> Engine {
        let mut e = Engine {
            catalog,
            storage,
            user_changed,
            hooks,
            writer: None,
            creates: None,
            points: None,
            lists: Arc::new(tokio::sync::Semaphore::new(read::list_admission())),
            server: Arc::from("this server"),
            bulk: bulk::Bulk::default(),
        };
        if e.storage.dialect() == crate::storage::Dialect::Sqlite {
            e.writer = Some(group::spawn(e.clone()));
        } else if tokio::runtime::Handle::try_current().is_ok() {
            e.creates = Some(creates::spawn(e.clone()));
            e.points = Some(points::spawn(e.storage.clone()));
        }
        e
    }

    /// The engine, naming its server `server` in the history of entity changes.
    pub fn named(mut self, server: String) -> Engine {
        self.server = Arc::from(server);
        self
    }

    /// Runs one call: in a shared group-commit transaction on SQLite; on PostgreSQL a create in
    /// a statement it may share with other creates ([`creates`]), anything else on its own.
    pub async fn call(&self, caller: &Caller, call: &Call) -> Outcome {
        let catalog = self.catalog.load();
        let prepared = prepare::prepare(self, &catalog, caller, call).await?;
        if let Some(w) = &self.writer {
            return gather::submit(w, caller, prepared).await;
        }
        if let Some(c) = &self.creates
            && prepared.op == Op::Create
            && prepared.guard.is_none()
            && !scripted::in_transaction(&prepared)
        {
            return gather::submit(c, caller, prepared).await;
        }
        self.call_alone(caller, &prepared).await
    }

    /// Runs one prepared call in its own transaction (on PostgreSQL: its own statement),
    /// again while it meets other writers.
    async fn call_alone(&self, caller: &Caller, prepared: &prepare::Prepared) -> Outcome {
        let mut retry = retry::Retry::new("call");
        loop {
            match self.try_call(caller, prepared).await {
                Ok(outcome) => {
                    if let Ok(obj) = &outcome {
                        self.after(prepared, obj);
                    }
                    return outcome;
                }
                Err(e) if retry.again(&e).await => continue,
                Err(e) => return Err(internal(e)),
            }
        }
    }

    /// One attempt at a prepared call in its own transaction: committed when it succeeds,
    /// rolled back otherwise.
    async fn try_call(
        &self,
        caller: &Caller,
        prepared: &prepare::Prepared,
    ) -> Result<Outcome, crate::storage::StorageError> {
        // A write whose rules are decided on rows reads its row and writes it in one
        // transaction.
        if self.storage.dialect() == crate::storage::Dialect::Postgres
            && prepared.guard.is_none()
            && !scripted::in_transaction(prepared)
        {
            // A call is one statement (a save by key: statements that each stand alone) (insert, update or delete ... RETURNING), atomic on its
            // own, and PostgreSQL's triggers count its rows inside it: no BEGIN and COMMIT
            // round trips around it.
            let mut ex = crate::storage::AutoCommit(self.storage.as_ref());
            return exec::execute(self, &mut ex, caller, prepared, false, changes::NO_REQUEST)
                .await;
        }
        let mut tx = self.storage.begin().await?;
        match exec::execute(
            self,
            tx.as_mut(),
            caller,
            prepared,
            false,
            changes::NO_REQUEST,
        )
        .await
        {
            Ok(outcome) => {
                if outcome.is_ok() {
                    tx.commit().await?;
                } else {
                    tx.rollback().await?;
                }
                Ok(outcome)
            }
            Err(e) => {
                let _ = tx.rollback().await;
                Err(e)
            }
        }
    }

    /// Tells listeners about committed changes to users (`obj` is the object the call
    /// returned, which names its id when the call named it by key).
    pub fn after(&self, p: &prepare::Prepared, obj: &Json) {
        crate::telemetry::applied(&p.entity.name, p.op.name(), 1);
        if let Some(id) = changed_user(p, obj) {
            (self.user_changed)(id);
        }
    }
}

/// The user an applied call changed, if it changed one.
fn changed_user(p: &prepare::Prepared, obj: &Json) -> Option<i64> {
    if p.entity.name == "users" && p.op != Op::Create {
        p.id.or_else(|| outcome_id(obj))
    } else {
        None
    }
}

/// Logs a storage failure and hides it behind [`CallError::Internal`], or, when the disk or
/// the store is full, [`CallError::InsufficientStorage`].
pub fn internal(e: StorageError) -> CallError {
    if let StorageError::Full(m) = &e {
        tracing::error!(error = %m, "out of space");
        return CallError::InsufficientStorage;
    }
    tracing::error!(error = %e, "storage failure");
    CallError::Internal
}
