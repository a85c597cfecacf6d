//! The runtimes of each thread, created on a thread's first hook call and reused: [`call`]
//! takes an idle one (a hook that writes through `ctx` runs the hooks it meets on another,
//! since its own is busy), and puts it back after. The bounds of new runtimes are set once
//! for the process ([`set_limits`]: `--hook-timeout`, `--hook-memory`).

use super::{CallerInfo, Hook, HookError, HookFile, HookOutcome, Limits, Runtime};
use serde_json::{Map, Value as Json};
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// Idle runtimes kept per thread: one per level of hooks nested through `ctx`.
const KEPT: usize = 5;

/// The time limit of each call, in microseconds (0: the default).
static TIMEOUT_US: AtomicU64 = AtomicU64::new(0);
/// The memory limit of each runtime, in bytes (0: the default).
static MEMORY: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static IDLE: RefCell<Vec<Runtime>> = const { RefCell::new(Vec::new()) };
}

/// Sets the bounds of the runtimes made from now on; runtimes of other bounds are dropped
/// when next taken.
pub fn set_limits(limits: Limits) {
    let us = u64::try_from(limits.timeout.as_micros()).unwrap_or(u64::MAX);
    TIMEOUT_US.store(us.max(1), Ordering::Relaxed);
    MEMORY.store(limits.memory.max(1), Ordering::Relaxed);
}

/// The bounds set by [`set_limits`], else the defaults.
pub fn limits() -> Limits {
    let default = Limits::default();
    let us = TIMEOUT_US.load(Ordering::Relaxed);
    let memory = MEMORY.load(Ordering::Relaxed);
    Limits {
        timeout: if us == 0 {
            default.timeout
        } else {
            Duration::from_micros(us)
        },
        memory: if memory == 0 { default.memory } else { memory },
    }
}

/// Takes an idle runtime of this thread (a new one when there is none of the bounds in
/// force), runs `f` on it and puts it back.
fn with_runtime<T>(f: impl FnOnce(&mut Runtime) -> T) -> Result<T, HookError> {
    let limits = limits();
    let idle = IDLE.with(|i| i.borrow_mut().pop());
    let mut runtime = match idle {
        Some(r) if r.limits() == limits => r,
        _ => Runtime::new(limits)?,
    };
    let out = f(&mut runtime);
    IDLE.with(|i| {
        let mut idle = i.borrow_mut();
        if idle.len() < KEPT {
            idle.push(runtime);
        }
    });
    Ok(out)
}

/// Calls `hook` of `file` on each of `records` as [`Runtime::call_many`] does, on an idle
/// runtime of this thread.
pub fn call_many(
    file: &HookFile,
    hook: Hook,
    records: Vec<Map<String, Json>>,
    caller: &CallerInfo,
) -> Vec<Result<HookOutcome, HookError>> {
    let n = records.len();
    with_runtime(|rt| rt.call_many(file, hook, records, caller)).unwrap_or_else(|e| vec![Err(e); n])
}

/// Calls `hook` of `file` as [`Runtime::call`] does, on an idle runtime of this thread.
pub fn call(
    file: &HookFile,
    hook: Hook,
    record: Map<String, Json>,
    old: Option<Map<String, Json>>,
    caller: &CallerInfo,
) -> Result<HookOutcome, HookError> {
    with_runtime(|rt| rt.call(file, hook, record, old, caller))?
}
