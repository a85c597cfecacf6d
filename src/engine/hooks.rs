//! What the engine asks of the code that hooks calls (the plugins): the names entity files may
//! use, and the hook every call meets before it is checked. The engine is built with one
//! [`CallHooks`] and knows the plugins only through it.

use super::{Call, CallError, Caller};
use crate::schema::Entity;

/// The hooks on calls an engine runs.
pub trait CallHooks: Send + Sync {
    /// The plugin names entity files may use.
    fn names(&self) -> Vec<&'static str>;

    /// Runs before any call of `e` is checked; may change the call or refuse it.
    fn before_call(&self, e: &Entity, caller: &Caller, call: &mut Call) -> Result<(), CallError>;
}
