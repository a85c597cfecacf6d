//! One hook file's sandboxed context: the `Refuse` class, the file's top level evaluated as a
//! script, and the hook functions it left behind ([`open`]); the time and memory it may use
//! ([`Watch`]); and what an exception thrown in a context means
//! ([`thrown`]).

use super::Hook;
use super::memory::Budget;
use rquickjs::context::EvalOptions;
use rquickjs::{Array, Coerced, Context, Ctx, FromJs, Function, Object, Persistent, Type, Value};
use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// The file name QuickJS gives the code of this module, in stack traces.
const PRELUDE_NAME: &str = "<entiserve>";

/// Defines `Refuse` on the global object, where a file can neither replace nor redefine it.
/// Its constructor refuses a status outside 400-499, so that the mistake is reported at the
/// line that made it.
const PRELUDE: &str = r#"(() => {
  const isInteger = Number.isInteger;
  const show = String;
  class Refuse extends Error {
    constructor(message, status = 400) {
      super(message);
      if (!isInteger(status) || status < 400 || status > 499) {
        throw new RangeError(
          "Refuse: the status must be an integer from 400 to 499, not " + show(status));
      }
      this.status = status;
    }
  }
  Object.defineProperty(Refuse.prototype, "name", { value: "Refuse", writable: true, configurable: true });
  Object.freeze(Refuse.prototype);
  Object.freeze(Refuse);
  Object.defineProperty(globalThis, "Refuse", { value: Refuse });
})();"#;

/// The hooks a file left, in [`Hook::ALL`]'s order; finds `const` and `let` bindings of the
/// global scope as well as functions.
const LOOKUP: &str = "[\
typeof beforeCreate === 'undefined' ? undefined : beforeCreate, \
typeof beforeUpdate === 'undefined' ? undefined : beforeUpdate, \
typeof beforeDelete === 'undefined' ? undefined : beforeDelete, \
typeof afterCreate === 'undefined' ? undefined : afterCreate, \
typeof afterUpdate === 'undefined' ? undefined : afterUpdate, \
typeof afterDelete === 'undefined' ? undefined : afterDelete]";

/// The bounds of the work in progress: its deadline, which the runtime's interrupt handler
/// reads, and the runtime's memory [`Budget`].
#[derive(Debug)]
pub(crate) struct Watch {
    deadline: Cell<Option<Instant>>,
    fired: Cell<bool>,
    pub(crate) budget: Rc<Budget>,
}

impl Watch {
    /// A watch over `budget`, with no deadline.
    pub(crate) fn new(budget: Rc<Budget>) -> Watch {
        Watch {
            deadline: Cell::new(None),
            fired: Cell::new(false),
            budget,
        }
    }

    /// Gives the work from now on `timeout`, and forgets earlier overruns.
    pub(crate) fn start(&self, timeout: Duration) {
        self.deadline.set(Some(Instant::now() + timeout));
        self.fired.set(false);
        self.budget.rearm();
    }

    /// Stops the clock (while a host serves the work, see [`super::host`]); what was left.
    pub(crate) fn pause(&self) -> Option<Duration> {
        let left = self
            .deadline
            .get()
            .map(|d| d.saturating_duration_since(Instant::now()));
        self.deadline.set(None);
        left
    }

    /// Starts the clock again with what [`Watch::pause`] left.
    pub(crate) fn resume(&self, left: Option<Duration>) {
        self.deadline.set(left.map(|l| Instant::now() + l));
    }

    /// No deadline until the next [`Watch::start`].
    pub(crate) fn stop(&self) {
        self.deadline.set(None);
    }

    /// Whether the work has run out of time; QuickJS asks every few thousand steps, and on
    /// `true` throws an exception that no `catch` stops.
    pub(crate) fn interrupt(&self) -> bool {
        let late = self.deadline.get().is_some_and(|d| Instant::now() >= d);
        if late {
            self.fired.set(true);
        }
        late
    }

    /// Whether the work was interrupted since the last [`Watch::start`].
    pub(crate) fn fired(&self) -> bool {
        self.fired.get()
    }
}

/// What went wrong in a context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Thrown {
    /// `throw new Refuse(message, status)`.
    Refused { message: String, status: u16 },
    /// Any other exception, or a value that cannot cross back; the line in the file when the
    /// exception names one.
    Error { line: Option<u32>, message: String },
    /// The time ran out.
    Timeout,
    /// The runtime's memory limit was reached.
    Memory,
}

impl Thrown {
    /// An error at no particular line.
    pub(crate) fn message(message: impl Into<String>) -> Thrown {
        Thrown::Error {
            line: None,
            message: message.into(),
        }
    }
}

/// A file evaluated in its context, and its hooks. The hooks are declared first so that they
/// are released before the context.
pub(crate) struct Loaded {
    hooks: [Option<Persistent<Function<'static>>>; 6],
    /// The prototype of `ctx` (see [`super::host::prototype`]).
    ctx_proto: Persistent<Object<'static>>,
    pub(crate) context: Context,
}

impl Loaded {
    /// Whether the file defines `hook`, in [`Hook::ALL`]'s order.
    pub(crate) fn defined(&self) -> [bool; 6] {
        std::array::from_fn(|i| self.hooks[i].is_some())
    }

    /// The prototype of `ctx` in this context.
    pub(crate) fn ctx_proto<'js>(&self, ctx: &Ctx<'js>) -> rquickjs::Result<Object<'js>> {
        self.ctx_proto.clone().restore(ctx)
    }

    /// The function of `hook` in this context, if the file defines it.
    pub(crate) fn hook<'js>(&self, ctx: &Ctx<'js>, hook: Hook) -> Option<Function<'js>> {
        let saved = self.hooks[hook.index()].clone()?;
        saved.restore(ctx).ok()
    }
}

/// Evaluates `source` as the script `name` in a new context of `rt`, after the prelude, and
/// keeps the hooks it defines. A binding of a hook's name to anything but a function is an
/// error. The caller runs this under `watch`.
pub(crate) fn open(
    rt: &rquickjs::Runtime,
    watch: &Rc<Watch>,
    name: &str,
    source: &str,
) -> Result<Loaded, Thrown> {
    let context = Context::full(rt).map_err(|_| Thrown::Memory)?;
    let (hooks, ctx_proto) = context.with(|ctx| {
        let proto =
            super::host::prototype(&ctx, watch).map_err(|e| thrown(&ctx, e, name, watch))?;
        let ctx_proto = Persistent::save(&ctx, proto);
        let found = eval(&ctx, PRELUDE, PRELUDE_NAME)
            .and_then(|_| eval(&ctx, source, name))
            .and_then(|_| eval(&ctx, LOOKUP, PRELUDE_NAME))
            .and_then(|v| Array::from_js(&ctx, v))
            .map_err(|e| thrown(&ctx, e, name, watch))?;
        let mut hooks: [Option<Persistent<Function<'static>>>; 6] = Default::default();
        for (i, hook) in Hook::ALL.into_iter().enumerate() {
            let value: Value = found.get(i).map_err(|e| thrown(&ctx, e, name, watch))?;
            if value.is_undefined() {
                continue;
            }
            let Some(function) = value.as_function() else {
                return Err(Thrown::message(format!(
                    "{} is {}, not a function",
                    hook.name(),
                    kind(&value)
                )));
            };
            hooks[i] = Some(Persistent::save(&ctx, function.clone()));
        }
        settle(&ctx, watch)?;
        Ok((hooks, ctx_proto))
    })?;
    Ok(Loaded {
        hooks,
        ctx_proto,
        context,
    })
}

/// Evaluates `source` as the global script `name` (not strict unless it says so).
fn eval<'js>(ctx: &Ctx<'js>, source: &str, name: &str) -> rquickjs::Result<Value<'js>> {
    let mut options = EvalOptions::default();
    options.global = true;
    options.strict = false;
    options.backtrace_barrier = true;
    options.filename = Some(name.to_string());
    ctx.eval_with_options(source, options)
}

/// Runs the promise jobs that the work queued (an `async` helper, a `.then`), under the same
/// watch: a hook's result does not wait for them, but they must not pile up in the runtime.
/// Stops at a timeout, which is then the work's failure.
pub(crate) fn settle(ctx: &Ctx<'_>, watch: &Watch) -> Result<(), Thrown> {
    while !watch.fired() && ctx.execute_pending_job() {}
    if watch.fired() {
        return Err(Thrown::Timeout);
    }
    Ok(())
}

/// What `err`, returned by work in `ctx` on the file `name`, means. Takes the pending
/// exception, if any.
pub(crate) fn thrown<'js>(
    ctx: &Ctx<'js>,
    err: rquickjs::Error,
    name: &str,
    watch: &Watch,
) -> Thrown {
    let exception = match err {
        rquickjs::Error::Exception => Some(ctx.catch()),
        _ => None,
    };
    if watch.fired() {
        return Thrown::Timeout;
    }
    if watch.budget.refused() {
        return Thrown::Memory;
    }
    match (err, exception) {
        (_, Some(value)) => caught(ctx, value, name),
        (rquickjs::Error::Allocation, None) => Thrown::Memory,
        (other, None) => Thrown::message(other.to_string()),
    }
}

/// What the thrown `value` means. Reading it may throw again (a getter, a proxy): such an
/// exception is dropped, and what could be read is used.
fn caught<'js>(ctx: &Ctx<'js>, value: Value<'js>, name: &str) -> Thrown {
    let meaning = classify(ctx, value, name);
    if ctx.has_exception() {
        let _ = ctx.catch();
    }
    meaning
}

/// [`caught`], which clears what this leaves pending.
fn classify<'js>(ctx: &Ctx<'js>, value: Value<'js>, name: &str) -> Thrown {
    let Some(error) = value.as_object() else {
        return match Coerced::<String>::from_js(ctx, value) {
            Ok(text) => Thrown::message(text.0),
            Err(_) => Thrown::message("an exception that has no text"),
        };
    };
    let message: String = text(error, "message");
    let kind: String = text(error, "name");
    let line = error
        .get::<_, String>("stack")
        .ok()
        .and_then(|stack| line_in(&stack, name));
    let refuse: Value = ctx
        .globals()
        .get("Refuse")
        .unwrap_or_else(|_| Value::new_undefined(ctx.clone()));
    // `is_instance_of` answers `true` when `instanceof` throws; the pending exception tells.
    if refuse.is_constructor() && error.is_instance_of(&refuse) && !ctx.has_exception() {
        let status: Value = error
            .get("status")
            .unwrap_or_else(|_| Value::new_undefined(ctx.clone()));
        let code = status
            .as_number()
            .filter(|n| n.fract() == 0.0 && (400.0..=499.0).contains(n));
        return match code {
            Some(code) => Thrown::Refused {
                message,
                status: code as u16,
            },
            None => Thrown::Error {
                line,
                message: format!(
                    "Refuse: the status must be an integer from 400 to 499, not {}",
                    Coerced::<String>::from_js(ctx, status)
                        .map(|s| s.0)
                        .unwrap_or_default()
                ),
            },
        };
    }
    let message = match kind.as_str() {
        "" if message.is_empty() => "an exception with no message".to_string(),
        "" | "Error" => message,
        _ if message.is_empty() => kind,
        _ => format!("{kind}: {message}"),
    };
    Thrown::Error { line, message }
}

/// The text of `error`'s property `key`; empty when it has none.
fn text(error: &Object<'_>, key: &str) -> String {
    error
        .get::<_, Option<Coerced<String>>>(key)
        .ok()
        .flatten()
        .map(|t| t.0)
        .unwrap_or_default()
}

/// The line of the first frame of `stack` in the file `name`: QuickJS writes frames as
/// `    at f (name:3:11)` or, for a syntax error, `    at name:3:5`.
pub(crate) fn line_in(stack: &str, name: &str) -> Option<u32> {
    let needle = format!("{name}:");
    stack.lines().find_map(|frame| {
        let mut from = 0;
        while let Some(i) = frame[from..].find(&needle) {
            let at = from + i;
            let before = frame[..at].chars().next_back();
            if matches!(before, Some('(' | ' ')) {
                let rest = &frame[at + needle.len()..];
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                if let Ok(line) = digits.parse() {
                    return Some(line);
                }
            }
            from = at + 1;
        }
        None
    })
}

/// `value`'s kind for people: `a number`, `a string`, `an array`, ...
pub(crate) fn kind(value: &Value<'_>) -> &'static str {
    match value.type_of() {
        Type::Undefined | Type::Uninitialized => "undefined",
        Type::Null => "null",
        Type::Bool => "a boolean",
        Type::Int | Type::Float => "a number",
        Type::String => "a string",
        Type::Symbol => "a symbol",
        Type::BigInt => "a bigint",
        Type::Array => "an array",
        Type::Function | Type::Constructor => "a function",
        Type::Promise => "a promise",
        _ => "an object",
    }
}
