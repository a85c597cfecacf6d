//! Access rules per record, as calls meet them. Each of an entity's five rules is first
//! decided for the caller alone ([`gate`]): admins, `public`, a role list and a rule of the
//! caller's own values need no row. What remains is an expression over rows: a list carries it
//! as a condition ([`list_filter`]), a read by id decides it on the row read (in SQL when it
//! follows references), and a write decides it in its own transaction, on the stored row for
//! an update or a delete and on the new values for a create ([`Guard`]).

use super::{CallError, Caller, Op};
use crate::schema::rules::{Expr, Root, Rule};
use crate::schema::{Action, Entity};
use crate::storage::rules::{CallerValues, RuleFilter};
use crate::storage::{Row, Value};
use serde_json::Value as Json;
use std::sync::Arc;

/// What a rule decides before any row is read.
#[derive(Debug, Clone, Copy)]
pub enum Gate<'a> {
    /// Every row passes.
    Open,
    /// The caller's role is not among the rule's roles: the operation is refused (403).
    Closed,
    /// A rule of the caller's own values fails: no row passes.
    Empty,
    /// Rows pass where the expression holds.
    Rows(&'a Expr),
}

/// The gate of `e`'s rule of `action` for `caller`.
pub fn gate<'a>(e: &'a Entity, action: Action, caller: &Caller) -> Gate<'a> {
    if caller.is_admin() {
        return Gate::Open;
    }
    match e.access.rule(action) {
        Rule::Public => Gate::Open,
        Rule::Roles(roles) if roles.iter().any(|r| r == caller.role.as_str()) => Gate::Open,
        Rule::Roles(_) => Gate::Closed,
        Rule::Expr(x) if x.caller_only() => {
            if x.holds_for(&|root, names| caller_value(caller, root, names)) {
                Gate::Open
            } else {
                Gate::Empty
            }
        }
        Rule::Expr(x) => Gate::Rows(x),
    }
}

/// `@caller.id`, `@caller.role` and `@caller.login`.
fn caller_value(caller: &Caller, root: Root, names: &[String]) -> Option<Json> {
    if root != Root::Caller {
        return None;
    }
    match names.first().map(String::as_str) {
        Some("id") => Some(Json::from(caller.id)),
        Some("role") => Some(Json::from(caller.role.as_str())),
        Some("login") => Some(Json::from(caller.login.as_str())),
        _ => None,
    }
}

/// The caller as the storage's rule conditions bind it.
pub fn values_of(caller: &Caller) -> CallerValues {
    CallerValues {
        id: caller.id,
        role: caller.role.as_str().to_string(),
        login: caller.login.clone(),
    }
}

/// Whether a [`Expr::local`] expression holds for a row whose values are `value` (by field
/// name), for `caller`.
fn holds_on(x: &Expr, caller: &Caller, value: &dyn Fn(&str) -> Option<Json>) -> bool {
    x.holds_for(&|root, names| match root {
        Root::Caller => caller_value(caller, root, names),
        Root::Row | Root::New => names.first().and_then(|n| value(n)),
    })
}

/// The words of a refusal by `e`'s rule of `action`.
pub fn refused(e: &Entity, action: Action) -> CallError {
    let verb = match action {
        Action::List => "list",
        Action::View => "read",
        Action::Create => "create",
        Action::Update => "update",
        Action::Delete => "delete",
    };
    match e.access.rule(action) {
        Rule::Roles(_) => CallError::Forbidden(format!("your role may not {verb} {}", e.name)),
        _ => CallError::Forbidden(format!(
            "you may not {verb} this {} object (rule `{}`: {})",
            e.name,
            action.key(),
            e.access.written(action)
        )),
    }
}

/// The condition a list adds for `caller`: `Err` when its role may not list at all, `None`
/// when every row passes.
pub fn list_filter(
    e: &Arc<Entity>,
    action: Action,
    caller: &Caller,
) -> Result<Option<ListRule>, CallError> {
    match gate(e, action, caller) {
        Gate::Open => Ok(None),
        Gate::Closed => Err(refused(e, action)),
        Gate::Empty => Ok(Some(ListRule::Nothing)),
        Gate::Rows(_) => Ok(Some(ListRule::Where(RuleFilter {
            entity: e.clone(),
            action,
            caller: values_of(caller),
        }))),
    }
}

/// The rows a list may show besides its filters.
pub enum ListRule {
    /// None.
    Nothing,
    /// Those passing this condition.
    Where(RuleFilter),
}

/// What a read by id must still decide on the row it reads.
pub enum ViewCheck<'a> {
    /// Nothing: the rule admits every row.
    None,
    /// The rule admits no row.
    Hidden,
    /// An expression of the row's own values, decided on the row read.
    OnRow(&'a Expr),
    /// An expression that follows references: the read itself carries it.
    InSql(&'a Expr),
}

/// What a read by id of `e` must decide for `caller` (`Err`: its role may not read `e`).
pub fn view_check<'a>(e: &'a Entity, caller: &Caller) -> Result<ViewCheck<'a>, CallError> {
    Ok(match gate(e, Action::View, caller) {
        Gate::Open => ViewCheck::None,
        Gate::Closed => return Err(refused(e, Action::View)),
        Gate::Empty => ViewCheck::Hidden,
        Gate::Rows(x) if x.local() => ViewCheck::OnRow(x),
        Gate::Rows(x) => ViewCheck::InSql(x),
    })
}

/// Whether `row` (read with all of `e`'s columns) passes a [`ViewCheck::OnRow`] expression.
pub fn row_passes(e: &Entity, x: &Expr, caller: &Caller, row: &Row) -> bool {
    holds_on(x, caller, &|name| {
        e.columns()
            .position(|c| c == name)
            .and_then(|i| row.get(i))
            .map(Value::to_json)
    })
}

/// What a write must still decide inside its transaction.
#[derive(Debug, Clone)]
pub struct Guard {
    pub caller: CallerValues,
    /// The `view` rule on the stored row (updates, deletes and saves).
    pub view: Need,
    /// The operation's own rule: `update` or `delete` on the stored row (with the new values),
    /// `create` on the new values.
    pub op: Need,
    /// A save that finds no row creates one: the `create` rule on its values.
    pub create: Need,
}

/// One rule's part in a [`Guard`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    Pass,
    Fail,
    /// The rule's expression, decided in SQL.
    Sql,
}

impl Need {
    /// What this part of a guard asks of a row, with `e`'s rule of `action` when it is left
    /// to SQL.
    pub fn test(self, e: &Entity, action: Action) -> crate::storage::rules::Test<'_> {
        use crate::storage::rules::Test;
        match (self, e.access.rule(action)) {
            (Need::Sql, Rule::Expr(x)) => Test::Expr(x),
            (need, _) => Test::Known(need != Need::Fail),
        }
    }

    fn of(g: Gate<'_>) -> Need {
        match g {
            Gate::Open => Need::Pass,
            Gate::Closed | Gate::Empty => Need::Fail,
            Gate::Rows(_) => Need::Sql,
        }
    }
}

/// Refuses what the caller's roles refuse outright, and says what a write of `op` on `e` must
/// still decide in its transaction (`None`: nothing).
pub fn guard(e: &Entity, caller: &Caller, op: Op) -> Result<Option<Guard>, CallError> {
    let create = gate(e, Action::Create, caller);
    let (view, own) = match op {
        Op::Create => (Gate::Open, create),
        Op::Update | Op::Save => (
            gate(e, Action::View, caller),
            gate(e, Action::Update, caller),
        ),
        Op::Delete => (
            gate(e, Action::View, caller),
            gate(e, Action::Delete, caller),
        ),
    };
    let action = op_action(op);
    // A row the caller may not view does not exist for them: where `view` is decided on
    // rows, even an operation their role may not run answers 404 for it, 403 for the others.
    let view_decides = matches!(view, Gate::Rows(_) | Gate::Empty);
    if (matches!(own, Gate::Closed) && !view_decides)
        || (op == Op::Create && matches!(own, Gate::Empty))
    {
        return Err(refused(e, action));
    }
    if matches!(view, Gate::Closed) {
        return Err(refused(e, Action::View));
    }
    let (view, own) = (Need::of(view), Need::of(own));
    let create = if op == Op::Save {
        Need::of(create)
    } else {
        Need::Pass
    };
    if [view, own, create].iter().all(|n| *n == Need::Pass) {
        return Ok(None);
    }
    Ok(Some(Guard {
        caller: values_of(caller),
        view,
        op: own,
        create,
    }))
}

/// The rule an operation answers to.
pub fn op_action(op: Op) -> Action {
    match op {
        Op::Create => Action::Create,
        Op::Update | Op::Save => Action::Update,
        Op::Delete => Action::Delete,
    }
}

/// Decides a create's rule on its values without SQL when it reads only them and the caller:
/// the guard then has nothing left to decide for it (`Err` when the rule refuses).
pub fn decide_create_locally(
    e: &Entity,
    caller: &Caller,
    values: &[(String, Value)],
    g: &mut Guard,
) -> Result<(), CallError> {
    if g.op != Need::Sql {
        return Ok(());
    }
    let Rule::Expr(x) = e.access.rule(Action::Create) else {
        return Ok(());
    };
    if !x.local() {
        return Ok(());
    }
    let value = |name: &str| {
        values
            .iter()
            .find(|(c, _)| c == name)
            .map(|(_, v)| v.to_json())
    };
    if holds_on(x, caller, &value) {
        g.op = Need::Pass;
        Ok(())
    } else {
        Err(refused(e, Action::Create))
    }
}
