//! What a hook's `ctx` reaches outside JavaScript: `ctx.get`, `ctx.list`, `ctx.create`,
//! `ctx.update` and `ctx.delete` become a [`HostCall`] served by the [`Host`] the caller of
//! the hook installed on its thread ([`with_host`]). Hooks run synchronously on that thread,
//! so the host in force is the innermost one installed there; a write through `ctx` that runs
//! hooks of its own installs another, which nests.
//!
//! The methods live on a prototype made once per context ([`prototype`]); the time a host
//! takes (reading and writing the database, other entities' hooks) does not count against the
//! calling hook's time limit.

use super::sandbox::Watch;
use super::values;
use rquickjs::function::Rest;
use rquickjs::{Ctx, Exception, Function, Object, Value};
use serde_json::{Map, Value as Json};
use std::cell::RefCell;
use std::rc::Rc;

/// One request of a hook through `ctx`.
#[derive(Debug, Clone, PartialEq)]
pub enum HostCall {
    /// `ctx.get(entity, id)`: the object, or `null`.
    Get { entity: String, id: i64 },
    /// `ctx.list(entity, {field: value, ...})`: the objects whose fields have those values.
    List {
        entity: String,
        filter: Map<String, Json>,
    },
    /// `ctx.create(entity, object)`: the stored object.
    Create {
        entity: String,
        object: Map<String, Json>,
    },
    /// `ctx.update(entity, id, changes)`: the stored object.
    Update {
        entity: String,
        id: i64,
        changes: Map<String, Json>,
    },
    /// `ctx.delete(entity, id)`: the deleted object.
    Delete { entity: String, id: i64 },
}

impl HostCall {
    /// The method's name, as hooks call it: `ctx.get`, ...
    pub fn method(&self) -> &'static str {
        match self {
            HostCall::Get { .. } => "ctx.get",
            HostCall::List { .. } => "ctx.list",
            HostCall::Create { .. } => "ctx.create",
            HostCall::Update { .. } => "ctx.update",
            HostCall::Delete { .. } => "ctx.delete",
        }
    }

    /// Whether the call changes data (create, update, delete).
    pub fn writes(&self) -> bool {
        !matches!(self, HostCall::Get { .. } | HostCall::List { .. })
    }
}

/// What serves the `ctx` calls of the hooks run while it is installed. An `Err` is the
/// message of the exception the hook sees.
pub trait Host {
    fn serve(&mut self, call: HostCall) -> Result<Json, String>;
}

thread_local! {
    /// The hosts installed on this thread, the innermost last. The pointers are valid while
    /// they are listed (see [`with_host`]).
    static HOSTS: RefCell<Vec<*mut (dyn Host + 'static)>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with `host` serving the `ctx` calls of the hooks `f` runs on this thread.
pub fn with_host<R>(host: &mut dyn Host, f: impl FnOnce() -> R) -> R {
    /// Takes the host off the list when `f` returns or unwinds.
    struct Installed;
    impl Drop for Installed {
        fn drop(&mut self) {
            HOSTS.with(|h| h.borrow_mut().pop());
        }
    }
    let short: *mut (dyn Host + '_) = host;
    // SAFETY: only the lifetime bound of the trait object changes. The pointer is listed
    // until `Installed` drops, before `with_host` returns, so it is never used after `host`'s
    // borrow ends; it is used only on this thread, by `serve`, while `f` runs, during which
    // `host` is borrowed by this call alone.
    let long: *mut (dyn Host + 'static) =
        unsafe { std::mem::transmute::<*mut (dyn Host + '_), *mut (dyn Host + 'static)>(short) };
    HOSTS.with(|h| h.borrow_mut().push(long));
    let _installed = Installed;
    f()
}

/// How many hosts are installed on this thread: the depth of the hook being run.
pub fn depth() -> usize {
    HOSTS.with(|h| h.borrow().len())
}

/// Serves `call` by the innermost host of this thread.
fn serve(call: HostCall) -> Result<Json, String> {
    let Some(host) = HOSTS.with(|h| h.borrow().last().copied()) else {
        return Err(format!("{} is not available here", call.method()));
    };
    // SAFETY: the pointer is listed, so its host is alive and borrowed for `with_host`'s
    // call, which is running `f` further up this thread's stack (see `with_host`). The list
    // is not borrowed while the host serves, so that hooks it runs can install their own.
    unsafe { (*host).serve(call) }
}

/// The prototype of every `ctx` of a context: the five methods, each turning its arguments
/// into a [`HostCall`] for the innermost host. The time they take is not the hook's.
pub(crate) fn prototype<'js>(ctx: &Ctx<'js>, watch: &Rc<Watch>) -> rquickjs::Result<Object<'js>> {
    let proto = Object::new(ctx.clone())?;
    for name in ["get", "list", "create", "update", "delete"] {
        let watch = watch.clone();
        let method = Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>, args: Rest<Value<'js>>| -> rquickjs::Result<Value<'js>> {
                let call = read_call(&ctx, name, &args.0)?;
                let left = watch.pause();
                let served = serve(call);
                watch.resume(left);
                match served {
                    Ok(value) => values::to_js(&ctx, &value),
                    Err(message) => Err(Exception::throw_message(&ctx, &message)),
                }
            },
        )?
        .with_name(name)?;
        proto.set(name, method)?;
    }
    // Made before the file runs, so `Object.freeze` is still the built-in one.
    let object: Object = ctx.globals().get("Object")?;
    let freeze: Function = object.get("freeze")?;
    freeze.call::<_, Value>((proto.clone(),))?;
    Ok(proto)
}

/// The [`HostCall`] of `ctx.<name>(args...)`; a `TypeError` naming the method when an
/// argument is missing or of the wrong kind.
fn read_call<'js>(ctx: &Ctx<'js>, name: &str, args: &[Value<'js>]) -> rquickjs::Result<HostCall> {
    let wrong = |what: &str| Exception::throw_type(ctx, &format!("ctx.{name}: {what}"));
    let entity = match args.first().and_then(|v| v.as_string()) {
        Some(s) => s.to_string()?,
        None => return Err(wrong("the first argument must be an entity's name")),
    };
    let id = || match args.get(1).and_then(Value::as_number) {
        Some(n) if n.fract() == 0.0 && n.abs() < 9.0e15 => Ok(n as i64),
        _ => Err(wrong("the second argument must be an object's id")),
    };
    let object = |at: usize, what: &str| match args.get(at) {
        Some(v) if v.is_object() && !v.is_array() && !v.is_function() => match values::from_js(v) {
            Ok(Some(Json::Object(map))) => Ok(map),
            Ok(_) | Err(values::BackError::TooDeep) => Err(wrong(what)),
            Err(values::BackError::Js(e)) => Err(e),
        },
        None if name == "list" => Ok(Map::new()),
        _ => Err(wrong(what)),
    };
    Ok(match name {
        "get" => HostCall::Get { entity, id: id()? },
        "list" => HostCall::List {
            entity,
            filter: object(1, "the second argument must be an object of field values")?,
        },
        "create" => HostCall::Create {
            entity,
            object: object(1, "the second argument must be the object to create")?,
        },
        "update" => HostCall::Update {
            entity,
            id: id()?,
            changes: object(2, "the third argument must be an object of changes")?,
        },
        _ => HostCall::Delete { entity, id: id()? },
    })
}
