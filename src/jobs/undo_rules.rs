//! The access rules an undo meets: it reverts a change only where its caller (the user who
//! asks for the undo, with their rules as they are when it runs) may still change that object.
//! Undoing a create or an update needs the `update` rule on the stored object; undoing a
//! delete needs the `create` rule on the values that come back. An object the caller may no
//! longer change is left as it is and named as a conflict.

use crate::engine::access::{self, Guard, Need};
use crate::engine::{Caller, Op};
use crate::schema::Entity;
use crate::storage::changes::ChangeOp;
use crate::storage::entity::Target;
use crate::storage::rules::{self, Bindings, Test};
use crate::storage::{Dialect, StorageError, Tx, Value};

/// Why an object is left alone when the rules refuse its revert.
pub const REFUSED: &str = "you may no longer change it (the entity's access rules)";

/// What the caller's rules leave to decide for reverts of `op` on `e`'s objects: `Err` when
/// they refuse every one, `None` when they admit every one.
pub fn guard_of(e: &Entity, who: &Caller, op: ChangeOp) -> Result<Option<Guard>, ()> {
    let as_op = match op {
        ChangeOp::Create | ChangeOp::Update => Op::Update,
        ChangeOp::Delete => Op::Create,
    };
    access::guard(e, who, as_op).map_err(|_| ())
}

/// Whether the caller may revert the change of object `id` (`values`: what a revert of a
/// delete stores). An object that is not there passes: the revert itself tells what became of
/// it.
pub async fn admits(
    tx: &mut dyn Tx,
    d: Dialect,
    e: &Entity,
    g: &Guard,
    id: i64,
    values: Option<&[(String, Value)]>,
) -> Result<bool, StorageError> {
    let test = |need: Need, action| need.test(e, action);
    let bind = Bindings {
        caller: &g.caller,
        new: values,
    };
    if values.is_some() {
        return match test(g.op, crate::schema::Action::Create) {
            Test::Known(b) => Ok(b),
            Test::Expr(x) => rules::check_new(tx, d, x, &bind).await,
        };
    }
    let tests = [
        test(g.view, crate::schema::Action::View),
        test(g.op, crate::schema::Action::Update),
    ];
    let found = rules::check_row(tx, d, e, Target::Id(id), tests, &bind).await?;
    Ok(found.is_none_or(|(view, change)| view && change))
}
