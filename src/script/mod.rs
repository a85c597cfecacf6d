//! Record hooks in JavaScript: a hook file is compiled once ([`HookFile::compile`]) and its
//! hooks are called through a [`Runtime`], one per worker thread, that keeps a sandboxed
//! QuickJS context per file and limits every call in time and the runtime in memory
//! ([`Limits`]).
//!
//! The sandbox holds the ECMAScript built-ins of a plain QuickJS context and the `Refuse`
//! class, nothing else: no module loader (`import` and `require` fail), no file system,
//! network, process, environment or timers. Values cross between serde_json and JavaScript
//! as JavaScript values, without a JSON text in between ([`values`]).

mod crossing;
pub mod host;
mod memory;
pub mod pool;
mod runtime;
mod sandbox;
pub mod values;

#[cfg(test)]
mod tests;

pub use runtime::Runtime;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// One of the six hooks a file may define.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Hook {
    /// `beforeCreate(record, ctx)`: may change the record, or refuse.
    BeforeCreate,
    /// `beforeUpdate(record, old, ctx)`: may change the record, or refuse.
    BeforeUpdate,
    /// `beforeDelete(old, ctx)`: may refuse.
    BeforeDelete,
    /// `afterCreate(record, ctx)`.
    AfterCreate,
    /// `afterUpdate(record, old, ctx)`.
    AfterUpdate,
    /// `afterDelete(old, ctx)`.
    AfterDelete,
}

impl Hook {
    /// Every hook, in the order their names are listed to people.
    pub const ALL: [Hook; 6] = [
        Hook::BeforeCreate,
        Hook::BeforeUpdate,
        Hook::BeforeDelete,
        Hook::AfterCreate,
        Hook::AfterUpdate,
        Hook::AfterDelete,
    ];

    /// The function's name in JavaScript: `beforeCreate`, ...
    pub fn name(self) -> &'static str {
        match self {
            Hook::BeforeCreate => "beforeCreate",
            Hook::BeforeUpdate => "beforeUpdate",
            Hook::BeforeDelete => "beforeDelete",
            Hook::AfterCreate => "afterCreate",
            Hook::AfterUpdate => "afterUpdate",
            Hook::AfterDelete => "afterDelete",
        }
    }

    /// Whether the hook runs before the change and may change the record it is given
    /// (`beforeCreate`, `beforeUpdate`).
    pub fn changes_record(self) -> bool {
        matches!(self, Hook::BeforeCreate | Hook::BeforeUpdate)
    }

    fn index(self) -> usize {
        Hook::ALL
            .iter()
            .position(|h| *h == self)
            .expect("every hook is in ALL")
    }
}

/// The bounds of a [`Runtime`]: each call's time (`--hook-timeout`) and the memory of the
/// runtime with all its contexts (`--hook-memory`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub timeout: Duration,
    pub memory: usize,
}

impl Default for Limits {
    /// 100 ms per call, 64 MiB per runtime.
    fn default() -> Self {
        Limits {
            timeout: Duration::from_millis(100),
            memory: 64 << 20,
        }
    }
}

/// Who makes the change a hook sees as `ctx.caller`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallerInfo {
    pub id: i64,
    pub login: String,
    pub role: String,
}

/// What a hook call decided, when it did not refuse or fail.
#[derive(Debug, Clone, PartialEq)]
pub enum HookOutcome {
    /// `beforeCreate` and `beforeUpdate`: the record to store, as the hook returned it or
    /// left it.
    Record(serde_json::Map<String, serde_json::Value>),
    /// The other hooks: the change goes on.
    Proceed,
}

/// Why a hook call did not let the change go on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookError {
    /// The hook threw `new Refuse(message, status)`: the item fails with `status` (a 4xx,
    /// 400 by default) and the hook's message.
    #[error("{message}")]
    Refused { message: String, status: u16 },
    /// Any other exception, a timeout or a memory overrun: `<file>:<line>: <message>`, or
    /// `<file>: <message>` when no line is known.
    #[error("{0}")]
    Failed(String),
}

/// A hook file that does not compile: `<file>:<line>: <message>`, or `<file>: <message>`
/// when the message concerns no line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptError {
    pub file: String,
    pub line: Option<u32>,
    pub message: String,
}

impl std::fmt::Display for ScriptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.file, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for ScriptError {}

/// A compiled hook file: its name in messages, its source and the hooks it defines. Cheap to
/// clone; a [`Runtime`] evaluates it in a context of its own on its first call.
#[derive(Debug, Clone)]
pub struct HookFile {
    /// Distinguishes two compilations of one path, so that a runtime reloads a changed file.
    id: u64,
    name: Arc<str>,
    source: Arc<str>,
    defined: [bool; 6],
}

/// The next [`HookFile::id`].
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl HookFile {
    /// Evaluates `source` as a script (not a module) in a fresh sandbox, within the default
    /// [`Limits`], and records which hooks it defines. A syntax error, an exception at top
    /// level, a hook name bound to something other than a function, or a file defining none
    /// of the six hooks is an error naming `path`.
    pub fn compile(path: &Path, source: &str) -> Result<HookFile, ScriptError> {
        let name = path.display().to_string();
        let defined = runtime::check(&name, source, Limits::default())?;
        if !defined.contains(&true) {
            let names: Vec<&str> = Hook::ALL.iter().map(|h| h.name()).collect();
            return Err(ScriptError {
                file: name,
                line: None,
                message: format!("defines none of the hooks {}", names.join(", ")),
            });
        }
        Ok(HookFile {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            name: name.into(),
            source: source.into(),
            defined,
        })
    }

    /// The file as messages name it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the file defines `hook`.
    pub fn defines(&self, hook: Hook) -> bool {
        self.defined[hook.index()]
    }

    /// The hooks the file defines.
    pub fn hooks(&self) -> impl Iterator<Item = Hook> + '_ {
        Hook::ALL.into_iter().filter(|h| self.defines(*h))
    }
}
