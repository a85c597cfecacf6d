//! What one subscription sees: an entity's changes that pass its filters and its caller's
//! `list` rule, as the events the contract gives (`create`, `update`, `delete`), with `fields`
//! applied. An update that takes an object out of what the subscription sees is a `delete` of
//! the object as it was; one that brings it in, a `create`.
//!
//! Subscriptions that would see the same events share a [`Watch::key`], and the hub decides
//! each change once for all of them.

use super::read::Change;
use crate::engine::{CallError, Caller, access, query, render};
use crate::schema::rules::Expr;
use crate::schema::{Action, Entity};
use crate::storage::changes::ChangeOp;
use crate::storage::entity::{Cond, Filter};
use crate::storage::rules::{Bindings, check_new};
use crate::storage::{PoolExec, Result, Row, Storage, Value};
use std::cmp::Ordering;
use std::sync::Arc;

/// One event of a subscription.
#[derive(Debug, Clone)]
pub struct Event {
    pub seq: i64,
    /// `create`, `update` or `delete`.
    pub op: &'static str,
    pub id: i64,
    /// The stored row its object is written from ([`Watch::object`]).
    pub row: Arc<Row>,
}

/// An event's object as GET returns it, `fields` applied, written straight from its row.
pub enum Object<'a> {
    Whole(render::RowObject<'a>),
    Fields(render::RowFields<'a>),
}

impl serde::Serialize for Object<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Object::Whole(o) => o.serialize(s),
            Object::Fields(o) => o.serialize(s),
        }
    }
}

/// A subscription's view of one entity.
pub struct Watch {
    pub entity: Arc<Entity>,
    caller: Caller,
    filters: Vec<Filter>,
    columns: Option<Vec<String>>,
    key: String,
}

impl Watch {
    /// The view of `entity` for `caller` with the list filters `pairs` and `fields`: `Err`
    /// when a filter or field is unknown, or the caller may not list the entity at all.
    pub fn new(
        entity: Arc<Entity>,
        caller: Caller,
        mut pairs: Vec<(String, String)>,
        fields: Option<&str>,
    ) -> Result<Watch, CallError> {
        access::list_filter(&entity, Action::List, &caller)?;
        pairs.sort();
        let filters = query::filters(&entity, pairs.clone())?;
        let columns = fields.map(|f| query::fields(&entity, f)).transpose()?;
        let who = match access::gate(&entity, Action::List, &caller) {
            access::Gate::Open => "*".to_string(),
            _ => format!("{}:{}", caller.id, caller.role.as_str()),
        };
        let key = format!("{}\n{who}\n{pairs:?}\n{columns:?}", entity.name);
        Ok(Watch {
            entity,
            caller,
            filters,
            columns,
            key,
        })
    }

    /// Subscriptions with the same key see the same events.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The event this subscription gets of `c`, if any.
    pub async fn event(&self, storage: &dyn Storage, c: &Change) -> Result<Option<Event>> {
        if c.entity.name != self.entity.name {
            return Ok(None);
        }
        let before = match &c.before {
            Some(row) if c.op != ChangeOp::Create => self.sees(storage, row).await?,
            _ => false,
        };
        let after = match &c.after {
            Some(row) if c.op != ChangeOp::Delete => self.sees(storage, row).await?,
            _ => false,
        };
        let (op, row) = match (before, after) {
            (true, true) => ("update", &c.after),
            (false, true) => ("create", &c.after),
            (true, false) => ("delete", &c.before),
            (false, false) => return Ok(None),
        };
        let Some(row) = row else {
            return Ok(None);
        };
        Ok(Some(Event {
            seq: c.seq,
            op,
            id: c.id,
            row: row.clone(),
        }))
    }

    /// The object of an event's row this subscription shows.
    pub fn object<'a>(&'a self, row: &'a Row) -> Object<'a> {
        match &self.columns {
            Some(cols) => Object::Fields(render::RowFields(&self.entity, row, cols)),
            None => Object::Whole(render::RowObject(&self.entity, row)),
        }
    }

    /// Whether the stored row `row` passes the filters and the caller's `list` rule.
    async fn sees(&self, storage: &dyn Storage, row: &Row) -> Result<bool> {
        if !self.filters.iter().all(|f| matches(&self.entity, f, row)) {
            return Ok(false);
        }
        match access::gate(&self.entity, Action::List, &self.caller) {
            access::Gate::Open => Ok(true),
            access::Gate::Closed | access::Gate::Empty => Ok(false),
            access::Gate::Rows(x) if x.local() => {
                Ok(access::row_passes(&self.entity, x, &self.caller, row))
            }
            access::Gate::Rows(x) => self.passes_in_sql(storage, x, row).await,
        }
    }

    /// A rule that follows references, decided by the database on the row's values.
    async fn passes_in_sql(&self, storage: &dyn Storage, x: &Expr, row: &Row) -> Result<bool> {
        let values: Vec<(String, Value)> = self
            .entity
            .columns()
            .zip(row.iter())
            .map(|(c, v)| (c.to_string(), v.clone()))
            .collect();
        let caller = access::values_of(&self.caller);
        let bind = Bindings {
            caller: &caller,
            new: Some(&values),
        };
        check_new(&mut PoolExec(storage), storage.dialect(), x, &bind).await
    }
}

/// Whether `row` of `e` passes `f`, as the list's SQL condition decides it.
fn matches(e: &Entity, f: &Filter, row: &Row) -> bool {
    let Some(v) = e
        .columns()
        .position(|c| c == f.column)
        .and_then(|i| row.get(i))
    else {
        return false;
    };
    match &f.cond {
        Cond::Eq(x) if x.is_null() => v.is_null(),
        Cond::Eq(x) => order(v, x) == Some(Ordering::Equal),
        Cond::Ne(x) if x.is_null() => !v.is_null(),
        Cond::Ne(x) => v.is_null() || order(v, x).is_some_and(|o| o != Ordering::Equal),
        Cond::Gt(x) => order(v, x) == Some(Ordering::Greater),
        Cond::Gte(x) => order(v, x).is_some_and(|o| o != Ordering::Less),
        Cond::Lt(x) => order(v, x) == Some(Ordering::Less),
        Cond::Lte(x) => order(v, x).is_some_and(|o| o != Ordering::Greater),
        Cond::In(xs) => xs.iter().any(|x| order(v, x) == Some(Ordering::Equal)),
        Cond::Contains(text) => v
            .as_str()
            .is_some_and(|s| s.to_lowercase().contains(&text.to_lowercase())),
        Cond::ChangedBy(_) | Cond::Rule(_) => false,
    }
}

/// How two stored values compare; `None` when either is null or they are not comparable.
fn order(a: &Value, b: &Value) -> Option<Ordering> {
    use rust_decimal::prelude::ToPrimitive;
    let num = |v: &Value| match v {
        Value::Int(Some(i)) => Some(*i as f64),
        Value::Float(Some(f)) => Some(*f),
        Value::Decimal(Some(d)) => d.to_f64(),
        _ => None,
    };
    match (a, b) {
        (Value::Int(Some(x)), Value::Int(Some(y))) => Some(x.cmp(y)),
        (Value::Decimal(Some(x)), Value::Decimal(Some(y))) => Some(x.cmp(y)),
        (Value::Bool(Some(x)), Value::Bool(Some(y))) => Some(x.cmp(y)),
        (Value::Text(Some(x)), Value::Text(Some(y))) => Some(x.cmp(y)),
        _ => num(a)?.partial_cmp(&num(b)?),
    }
}
