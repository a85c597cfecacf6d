//! The `ctx` of a hook on the engine's side: [`Served`] answers `ctx.get` and `ctx.list`
//! under the caller's rules through the hook's own transaction (or, for a `beforeCreate` run
//! while a call is prepared, the committed state), and in `after*` hooks runs `ctx.create`,
//! `ctx.update` and `ctx.delete` through the call path, hooks included. A failure there is
//! kept and fails the item whose hook made the call, whatever the hook does with the
//! exception it gets.

use super::super::access::{self, ListRule, ViewCheck};
use super::super::prepare::{self, Prepared};
use super::super::{Call, CallError, Caller, Engine, Op, internal, query, render};
use crate::script::host::{self as js, Host, HostCall};
use crate::script::{CallerInfo, Hook, HookError, HookFile, HookOutcome, pool};
use crate::storage::entity::{self, Filter};
use crate::storage::{Exec, StorageError};
use serde_json::{Map, Value as Json};

/// The deepest level of hooks: a write through `ctx` of a hook at this level is refused.
pub const MAX_DEPTH: usize = 4;

/// The most objects `ctx.list` gives.
const LIST_MAX: i64 = 10_000;

/// Why a hook did not let its item go on.
#[derive(Debug)]
pub enum Failure {
    /// The item fails with this error.
    Call(CallError),
    /// The database failed: the transaction is rolled back (and may run again).
    Storage(StorageError),
}

impl From<CallError> for Failure {
    fn from(e: CallError) -> Self {
        Failure::Call(e)
    }
}

impl Failure {
    /// The item's outcome, or the database failure.
    pub fn outcome(self) -> Result<super::Outcome, StorageError> {
        match self {
            Failure::Call(e) => Ok(Err(e)),
            Failure::Storage(e) => Err(e),
        }
    }

    /// As a call error (a database failure hidden as [`CallError::Internal`]).
    pub fn into_call_error(self) -> CallError {
        match self {
            Failure::Call(e) => e,
            Failure::Storage(e) => internal(e),
        }
    }
}

/// One call of a hook: its file, which hook, and what it is given.
pub struct HookCall<'a> {
    pub file: &'a HookFile,
    pub hook: Hook,
    pub record: Map<String, Json>,
    pub old: Option<Map<String, Json>>,
}

/// Runs one hook with `ctx` served through `ex` (writes too, marked with `stamp`, when there
/// is one): what the hook gave, or the failure of the hook or of a write it made.
fn run(
    engine: &Engine,
    ex: &mut dyn Exec,
    caller: &Caller,
    stamp: Option<i64>,
    call: HookCall<'_>,
) -> Result<HookOutcome, Failure> {
    let HookCall {
        file,
        hook,
        record,
        old,
    } = call;
    let mut served = Served {
        engine,
        ex,
        caller,
        stamp,
        failed: None,
    };
    let outcome = js::with_host(&mut served, || {
        pool::call(file, hook, record, old, &info(caller))
    });
    if let Some(f) = served.failed {
        return Err(f);
    }
    outcome.map_err(|e| Failure::Call(hook_error(e)))
}

/// Runs a `before*` hook; the record it gives (for `beforeDelete`, the object it was given).
pub fn before(
    engine: &Engine,
    ex: &mut dyn Exec,
    caller: &Caller,
    call: HookCall<'_>,
) -> Result<Map<String, Json>, Failure> {
    let kept = (!call.hook.changes_record()).then(|| call.record.clone());
    match run(engine, ex, caller, None, call)? {
        HookOutcome::Record(r) => Ok(r),
        HookOutcome::Proceed => Ok(kept.unwrap_or_default()),
    }
}

/// Runs `beforeCreate` of `file` on each of `records` (a chunk's creates) in one entry into
/// JavaScript, reading through the committed state: the record each gives, or its error.
pub fn before_creates(
    engine: &Engine,
    caller: &Caller,
    file: &HookFile,
    records: Vec<Map<String, Json>>,
) -> Vec<Result<Map<String, Json>, CallError>> {
    let mut pool = crate::storage::PoolExec(engine.storage.as_ref());
    let mut served = Served {
        engine,
        ex: &mut pool,
        caller,
        stamp: None,
        failed: None,
    };
    let outcomes = js::with_host(&mut served, || {
        pool::call_many(file, Hook::BeforeCreate, records, &info(caller))
    });
    // Before hooks only read, and a failed read is only the exception the hook got.
    outcomes
        .into_iter()
        .map(|o| match o {
            Ok(HookOutcome::Record(r)) => Ok(r),
            Ok(HookOutcome::Proceed) => Ok(Map::new()),
            Err(e) => Err(hook_error(e)),
        })
        .collect()
}

/// Runs an `after*` hook, whose `ctx` may write; `stamp` marks the rows it changes as the
/// item's.
pub fn after(
    engine: &Engine,
    ex: &mut dyn Exec,
    caller: &Caller,
    stamp: i64,
    call: HookCall<'_>,
) -> Result<(), Failure> {
    run(engine, ex, caller, Some(stamp), call).map(|_| ())
}

/// A hook's failure as the item's error.
fn hook_error(e: HookError) -> CallError {
    match e {
        HookError::Refused { message, status } => CallError::Refused { message, status },
        HookError::Failed(message) => CallError::HookFailed(message),
    }
}

/// `ctx.caller` of `caller`.
fn info(caller: &Caller) -> CallerInfo {
    CallerInfo {
        id: caller.id,
        login: caller.login.clone(),
        role: caller.role.as_str().to_string(),
    }
}

/// Serves one hook's `ctx`.
struct Served<'a> {
    engine: &'a Engine,
    ex: &'a mut dyn Exec,
    caller: &'a Caller,
    /// Writes are served (in `after*` hooks), marking rows with this stamp.
    stamp: Option<i64>,
    /// The first failure of a call the hook made.
    failed: Option<Failure>,
}

impl Host for Served<'_> {
    fn serve(&mut self, call: HostCall) -> Result<Json, String> {
        if self.failed.is_some() {
            return Err("an earlier ctx call failed: the change is not applied".into());
        }
        if call.writes() && self.stamp.is_none() {
            return Err(format!(
                "{} is for after* hooks: before* hooks may only read",
                call.method()
            ));
        }
        if call.writes() && js::depth() > MAX_DEPTH - 1 {
            return Err(format!(
                "{}: hooks nest at most {MAX_DEPTH} levels deep",
                call.method()
            ));
        }
        let method = call.method();
        let call_writes = call.writes();
        let answer = block(async { self.answer(call).await })?;
        let writes = call_writes;
        answer.map_err(|f| {
            let message = match &f {
                Failure::Call(e) => format!("{method}: {}", e.description()),
                Failure::Storage(_) => format!("{method}: the database failed"),
            };
            // A failed write fails the item whatever the hook does with the exception; a
            // failed read changed nothing, so the exception is all it is.
            if writes {
                self.failed = Some(f);
            }
            message
        })
    }
}

impl Served<'_> {
    async fn answer(&mut self, call: HostCall) -> Result<Json, Failure> {
        let (engine, caller) = (self.engine, self.caller);
        match call {
            HostCall::Get { entity, id } => get(engine, self.ex, caller, &entity, id).await,
            HostCall::List { entity, filter } => {
                list(engine, self.ex, caller, &entity, filter).await
            }
            HostCall::Create { entity, object } => {
                self.write(new_call(entity, Op::Create, None, object)).await
            }
            HostCall::Update {
                entity,
                id,
                changes,
            } => {
                self.write(new_call(entity, Op::Update, Some(id), changes))
                    .await
            }
            HostCall::Delete { entity, id } => {
                self.write(new_call(entity, Op::Delete, Some(id), Map::new()))
                    .await
            }
        }
    }

    /// Runs `call` as the caller through the call path, in this transaction.
    async fn write(&mut self, call: Call) -> Result<Json, Failure> {
        let (engine, caller) = (self.engine, self.caller);
        let stamp = self.stamp.unwrap_or(super::super::changes::NO_REQUEST);
        let catalog = engine.catalog.load();
        let e = catalog.entity(&call.entity)?;
        let mut call = call;
        engine.hooks.before_call(&e, caller, &mut call)?;
        if call.op == Op::Create
            && let Some(file) = super::hook_of(&e, Hook::BeforeCreate)
        {
            let record = std::mem::take(&mut call.params);
            let hook = HookCall {
                file,
                hook: Hook::BeforeCreate,
                record,
                old: None,
            };
            call.params = before(engine, self.ex, caller, hook)?;
        }
        let now = crate::time::now();
        let p: Prepared =
            prepare::prepare_with(engine, &catalog, caller, call, &now, false).await?;
        let outcome = if super::in_transaction(&p) {
            Box::pin(super::execute(engine, self.ex, caller, &p, stamp)).await
        } else {
            super::super::exec::execute(engine, self.ex, caller, &p, true, stamp).await
        };
        match outcome {
            Ok(Ok(obj)) => Ok(obj),
            Ok(Err(e)) => Err(Failure::Call(e)),
            Err(e) => Err(Failure::Storage(e)),
        }
    }
}

/// A call a hook makes through `ctx`.
fn new_call(entity: String, op: Op, id: Option<i64>, params: Map<String, Json>) -> Call {
    Call {
        entity,
        op,
        id,
        params,
        prehashed: false,
    }
}

/// `ctx.get`: the object `id` of `name` if the caller may view it, else `null`.
async fn get(
    engine: &Engine,
    ex: &mut dyn Exec,
    caller: &Caller,
    name: &str,
    id: i64,
) -> Result<Json, Failure> {
    let e = engine.catalog.load().entity(name)?;
    let d = engine.storage.dialect();
    let check = access::view_check(&e, caller)?;
    let row = match check {
        ViewCheck::Hidden => None,
        ViewCheck::InSql(x) => {
            let who = access::values_of(caller);
            crate::storage::rules::get_where(ex, d, &e, id, x, &who)
                .await
                .map_err(Failure::Storage)?
        }
        ViewCheck::None | ViewCheck::OnRow(_) => {
            entity::get(ex, d, &e, id).await.map_err(Failure::Storage)?
        }
    };
    let row = row.filter(|row| match check {
        ViewCheck::OnRow(x) => access::row_passes(&e, x, caller, row),
        _ => true,
    });
    Ok(row.map_or(Json::Null, |row| render::object(&e, &row)))
}

/// `ctx.list`: the objects of `name` the caller may list whose fields equal `filter`'s
/// values, in id order, at most [`LIST_MAX`].
async fn list(
    engine: &Engine,
    ex: &mut dyn Exec,
    caller: &Caller,
    name: &str,
    filter: Map<String, Json>,
) -> Result<Json, Failure> {
    let e = engine.catalog.load().entity(name)?;
    let pairs = filter
        .into_iter()
        .map(|(k, v)| {
            let text = match v {
                Json::String(s) => s,
                other => other.to_string(),
            };
            (k, text)
        })
        .collect();
    let mut conds = query::filters(&e, pairs)?;
    match access::list_filter(&e, crate::schema::Action::List, caller)? {
        None => {}
        Some(ListRule::Nothing) => return Ok(Json::Array(Vec::new())),
        Some(ListRule::Where(f)) => conds.push(Filter {
            column: "id".into(),
            cond: entity::Cond::Rule(Box::new(f)),
        }),
    }
    let d = engine.storage.dialect();
    let start = entity::Start::Offset(0);
    let rows = entity::list(ex, d, &e, &conds, &[], LIST_MAX, &start)
        .await
        .map_err(Failure::Storage)?;
    Ok(Json::Array(
        rows.iter().map(|r| render::object(&e, r)).collect(),
    ))
}

/// Runs `f` to its end on this thread, from the synchronous call of a hook: the thread leaves
/// the runtime's workers meanwhile. Needs the multi-threaded runtime the server runs on.
fn block<F: std::future::Future>(f: F) -> Result<F::Output, String> {
    let handle = tokio::runtime::Handle::try_current()
        .map_err(|_| "ctx is not available outside the server".to_string())?;
    if handle.runtime_flavor() != tokio::runtime::RuntimeFlavor::MultiThread {
        return Err("ctx needs the server's multi-threaded runtime".into());
    }
    Ok(tokio::task::block_in_place(|| handle.block_on(f)))
}
