//! [`Runtime`]: one QuickJS runtime per worker thread, created once and reused. It keeps a
//! context per hook file, evaluated on the file's first call (and again when the file was
//! compiled anew), and bounds every call in time and all its contexts together in memory.

use super::crossing::Crossing;
use super::memory::{Budget, Counted};
use super::sandbox::{self, Loaded, Thrown, Watch};
use super::values::{self, BackError};
use super::{CallerInfo, Hook, HookError, HookFile, HookOutcome, Limits, ScriptError};
use rquickjs::{Ctx, Object, Value};
use serde_json::{Map, Value as Json};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// The most native stack JavaScript may use: deep recursion fails as a `RangeError` well
/// before a 2 MiB worker thread's stack runs out.
const STACK: usize = 512 << 10;

/// What was running when something went wrong, for the message.
#[derive(Debug, Clone, Copy)]
enum Stage {
    TopLevel,
    Hook,
}

/// A JavaScript runtime for hook calls, for one thread (it cannot move between threads).
pub struct Runtime {
    /// Each file's context by its name, with the [`HookFile::id`] it was evaluated from.
    /// Declared before `rt` so that the contexts go first.
    files: HashMap<Arc<str>, (u64, Loaded)>,
    watch: Rc<Watch>,
    limits: Limits,
    rt: rquickjs::Runtime,
}

impl Runtime {
    /// A runtime bounded by `limits`: its allocator holds it to `limits.memory`, and its
    /// interrupt handler stops any call at `limits.timeout`.
    pub fn new(limits: Limits) -> Result<Runtime, HookError> {
        let budget = Budget::new(limits.memory);
        let counted = Counted {
            budget: budget.clone(),
        };
        let rt = rquickjs::Runtime::new_with_alloc(counted)
            .map_err(|e| HookError::Failed(format!("cannot start a JavaScript runtime: {e}")))?;
        rt.set_max_stack_size(STACK);
        let watch = Rc::new(Watch::new(budget));
        let handler = watch.clone();
        rt.set_interrupt_handler(Some(Box::new(move || handler.interrupt())));
        Ok(Runtime {
            files: HashMap::new(),
            watch,
            limits,
            rt,
        })
    }

    /// The bounds of this runtime.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Calls `hook` of `file` on `record` (for the delete hooks, the stored object being
    /// deleted, which the hook receives as `old`), with `old` (for the update hooks, the
    /// stored object before the change; `null` when absent) and `ctx.caller`.
    ///
    /// `beforeCreate` and `beforeUpdate` give the record to store: the object the hook
    /// returned, else `record` as the hook left it; the other hooks give
    /// [`HookOutcome::Proceed`]; what a hook does to `old` is not kept. A hook the file does
    /// not define changes nothing. After a timeout or a memory overrun the file's context is
    /// dropped, and the next call evaluates the file again.
    pub fn call(
        &mut self,
        file: &HookFile,
        hook: Hook,
        record: Map<String, Json>,
        old: Option<Map<String, Json>>,
        caller: &CallerInfo,
    ) -> Result<HookOutcome, HookError> {
        if !file.defines(hook) {
            return Ok(unchanged(hook, record));
        }
        let result = self
            .load(file)
            .map_err(|t| (Stage::TopLevel, t))
            .and_then(|()| {
                self.run(file, hook, record, old.as_ref(), caller)
                    .map_err(|t| (Stage::Hook, t))
            });
        self.watch.stop();
        match result {
            Ok(outcome) => Ok(outcome),
            Err((stage, thrown)) => {
                if matches!(thrown, Thrown::Timeout | Thrown::Memory) {
                    self.files.remove(file.name());
                    self.rt.run_gc();
                }
                Err(self.failure(file.name(), stage, thrown))
            }
        }
    }

    /// Evaluates `file` in a new context unless this compilation of it already has one.
    fn load(&mut self, file: &HookFile) -> Result<(), Thrown> {
        if matches!(self.files.get(file.name()), Some((id, _)) if *id == file.id) {
            return Ok(());
        }
        self.files.remove(file.name());
        self.watch.start(self.limits.timeout);
        let loaded = sandbox::open(&self.rt, &self.watch, file.name(), &file.source)?;
        self.files.insert(file.name.clone(), (file.id, loaded));
        Ok(())
    }

    /// Runs `hook` in the loaded context of `file`.
    fn run(
        &self,
        file: &HookFile,
        hook: Hook,
        record: Map<String, Json>,
        old: Option<&Map<String, Json>>,
        caller: &CallerInfo,
    ) -> Result<HookOutcome, Thrown> {
        let (_, loaded) = &self.files[file.name()];
        self.watch.start(self.limits.timeout);
        loaded.context.with(|ctx| {
            let (function, context) = self.entry(&ctx, loaded, file, hook, caller)?;
            let mut crossing = Crossing::new(&ctx);
            let call = Entry {
                function: &function,
                context: &context,
                file,
                hook,
            };
            self.one(&call, &mut crossing, record, old)
        })
    }

    /// Calls `hook` of `file` as [`Runtime::call`] does on each of `records` (the new
    /// records of a chunk of creates, given to `beforeCreate`), in order, entering the file's
    /// context once for all of them; each call has its own time limit.
    pub fn call_many(
        &mut self,
        file: &HookFile,
        hook: Hook,
        records: Vec<Map<String, Json>>,
        caller: &CallerInfo,
    ) -> Vec<Result<HookOutcome, HookError>> {
        let mut out = Vec::with_capacity(records.len());
        let mut rest = records.into_iter().peekable();
        while rest.peek().is_some() {
            if !file.defines(hook) {
                out.extend(rest.by_ref().map(|r| Ok(unchanged(hook, r))));
                break;
            }
            if let Err(thrown) = self.load(file) {
                self.watch.stop();
                let e = self.failure(file.name(), Stage::TopLevel, thrown);
                out.extend(rest.by_ref().map(|_| Err(e.clone())));
                break;
            }
            let stopped = self.run_many(file, hook, &mut rest, &mut out, caller);
            self.watch.stop();
            if let Some(thrown) = stopped {
                // The context is dropped; the records after this one run in a new one.
                self.files.remove(file.name());
                self.rt.run_gc();
                out.push(Err(self.failure(file.name(), Stage::Hook, thrown)));
            }
        }
        out
    }

    /// Runs `hook` on the records of `rest` until they end, or until one runs out of time or
    /// memory, which is returned (the records after it stay in `rest`).
    fn run_many(
        &self,
        file: &HookFile,
        hook: Hook,
        rest: &mut impl Iterator<Item = Map<String, Json>>,
        out: &mut Vec<Result<HookOutcome, HookError>>,
        caller: &CallerInfo,
    ) -> Option<Thrown> {
        let (_, loaded) = &self.files[file.name()];
        loaded.context.with(|ctx| {
            let (function, context) = match self.entry(&ctx, loaded, file, hook, caller) {
                Ok(found) => found,
                Err(thrown) => return Some(thrown),
            };
            let mut crossing = Crossing::new(&ctx);
            let call = Entry {
                function: &function,
                context: &context,
                file,
                hook,
            };
            for record in rest.by_ref() {
                self.watch.start(self.limits.timeout);
                match self.one(&call, &mut crossing, record, None) {
                    Err(t @ (Thrown::Timeout | Thrown::Memory)) => return Some(t),
                    Err(t) => out.push(Err(self.failure(file.name(), Stage::Hook, t))),
                    Ok(outcome) => out.push(Ok(outcome)),
                }
            }
            None
        })
    }

    /// The function of `hook` in `loaded`, and the `ctx` its calls get.
    fn entry<'js>(
        &self,
        ctx: &Ctx<'js>,
        loaded: &Loaded,
        file: &HookFile,
        hook: Hook,
        caller: &CallerInfo,
    ) -> Result<(rquickjs::Function<'js>, Object<'js>), Thrown> {
        let fail = |e| sandbox::thrown(ctx, e, file.name(), &self.watch);
        let function = loaded
            .hook(ctx, hook)
            .ok_or_else(|| Thrown::message(format!("{} is not defined", hook.name())))?;
        let proto = loaded.ctx_proto(ctx).map_err(fail)?;
        let context = context_object(ctx, &proto, caller).map_err(fail)?;
        Ok((function, context))
    }

    /// One call of the hook of `call` on `record` (and `old`), crossing over through
    /// `crossing`; for the hooks that change the record, the record to store.
    fn one<'js>(
        &self,
        call: &Entry<'_, 'js>,
        crossing: &mut Crossing<'js>,
        record: Map<String, Json>,
        old: Option<&Map<String, Json>>,
    ) -> Result<HookOutcome, Thrown> {
        let Entry {
            function,
            context,
            file,
            hook,
        } = *call;
        let ctx = function.ctx();
        let fail = |e| sandbox::thrown(ctx, e, file.name(), &self.watch);
        let given = crossing.give(&record).map_err(fail)?;
        let returned: Value = match hook {
            Hook::BeforeUpdate | Hook::AfterUpdate => {
                let old = match old {
                    Some(old) => values::object_to_js(ctx, old).map_err(fail)?.into_value(),
                    None => Value::new_null(ctx.clone()),
                };
                function.call((given.clone(), old, context.clone()))
            }
            _ => function.call((given.clone(), context.clone())),
        }
        .map_err(fail)?;
        sandbox::settle(ctx, &self.watch)?;
        if !hook.changes_record() {
            return Ok(HookOutcome::Proceed);
        }
        let chosen = chosen(hook, returned, given)?;
        match crossing.back(&chosen, record) {
            Ok(Some(map)) => Ok(HookOutcome::Record(map)),
            Ok(None) => Err(Thrown::message(format!(
                "{} returned a value that is not an object",
                hook.name()
            ))),
            Err(BackError::Js(e)) => Err(fail(e)),
            Err(BackError::TooDeep) => Err(Thrown::message(format!(
                "the record {} returned is nested more than {} levels deep",
                hook.name(),
                values::MAX_DEPTH
            ))),
        }
    }

    /// `thrown` in `file` as the hook error callers see.
    fn failure(&self, file: &str, stage: Stage, thrown: Thrown) -> HookError {
        if let (Stage::Hook, Thrown::Refused { message, status }) = (stage, &thrown) {
            return HookError::Refused {
                message: message.clone(),
                status: *status,
            };
        }
        let (line, message) = explain(self.limits, stage, thrown);
        let error = ScriptError {
            file: file.to_string(),
            line,
            message,
        };
        HookError::Failed(error.to_string())
    }
}

/// What `thrown` says, without the file: its line when known, and its message.
fn explain(limits: Limits, stage: Stage, thrown: Thrown) -> (Option<u32>, String) {
    let what = match stage {
        Stage::TopLevel => "the file's top level",
        Stage::Hook => "the hook",
    };
    match thrown {
        Thrown::Refused { message, .. } => (None, format!("{what} threw Refuse: {message}")),
        Thrown::Error { line, message } => (line, message),
        Thrown::Timeout => (
            None,
            format!("{what} ran longer than {}", duration(limits.timeout)),
        ),
        Thrown::Memory => (
            None,
            format!(
                "{what} used more than {}",
                crate::input::size_text(limits.memory)
            ),
        ),
    }
}

/// Evaluates `source` as the file `name` in a runtime of its own bounded by `limits`; the
/// hooks it defines, in [`Hook::ALL`]'s order.
pub(crate) fn check(name: &str, source: &str, limits: Limits) -> Result<[bool; 6], ScriptError> {
    let error = |line, message| ScriptError {
        file: name.to_string(),
        line,
        message,
    };
    let runtime = Runtime::new(limits).map_err(|e| error(None, e.to_string()))?;
    runtime.watch.start(limits.timeout);
    let opened = sandbox::open(&runtime.rt, &runtime.watch, name, source);
    runtime.watch.stop();
    match opened {
        Ok(loaded) => Ok(loaded.defined()),
        Err(thrown) => {
            let (line, message) = explain(limits, Stage::TopLevel, thrown);
            Err(error(line, message))
        }
    }
}

/// A hook's function in its context, with the `ctx` its calls get.
struct Entry<'a, 'js> {
    function: &'a rquickjs::Function<'js>,
    context: &'a Object<'js>,
    file: &'a HookFile,
    hook: Hook,
}

/// The outcome of a hook that changed nothing.
fn unchanged(hook: Hook, record: Map<String, Json>) -> HookOutcome {
    if hook.changes_record() {
        HookOutcome::Record(record)
    } else {
        HookOutcome::Proceed
    }
}

/// The record a `before*` hook gives: the object it returned, or `given` as it left it when
/// it returned nothing.
fn chosen<'js>(
    hook: Hook,
    returned: Value<'js>,
    given: Object<'js>,
) -> Result<Object<'js>, Thrown> {
    if returned.is_undefined() {
        return Ok(given);
    }
    if returned.is_promise() {
        return Err(Thrown::message(format!(
            "{} returned a promise: hooks run to the end before the change goes on, so a hook \
             cannot be an async function",
            hook.name()
        )));
    }
    if !returned.is_array()
        && !returned.is_function()
        && let Some(object) = returned.as_object()
    {
        return Ok(object.clone());
    }
    Err(Thrown::message(format!(
        "{} returned {}: return the record, or nothing to keep the record it was given",
        hook.name(),
        sandbox::kind(&returned)
    )))
}

/// The `ctx` argument of a hook: `{caller: {id, login, role}}`, whose prototype holds the
/// methods of [`super::host`].
fn context_object<'js>(
    ctx: &Ctx<'js>,
    proto: &Object<'js>,
    caller: &CallerInfo,
) -> rquickjs::Result<Object<'js>> {
    let who = Object::new(ctx.clone())?;
    who.set("id", values::to_js(ctx, &Json::from(caller.id))?)?;
    who.set("login", caller.login.as_str())?;
    who.set("role", caller.role.as_str())?;
    let context = Object::new(ctx.clone())?;
    context.set_prototype(Some(proto))?;
    context.set("caller", who)?;
    Ok(context)
}

/// `d` for people: `100 ms`, or as Rust writes it below a millisecond.
fn duration(d: Duration) -> String {
    if d.as_millis() > 0 && d.subsec_nanos().is_multiple_of(1_000_000) {
        format!("{} ms", d.as_millis())
    } else {
        format!("{d:?}")
    }
}
