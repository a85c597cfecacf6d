//! A call's parameters as [`super::coerce`] takes them: each value with its name, looked for by
//! the position of its field among the entity's fields, in the fields' order, and the values
//! refused before any is converted.

use crate::engine::CallError;
use crate::schema::{ColType, Entity};
use serde_json::{Map, Value as Json};

/// The parameters, each given value taken once by its field's position, in increasing order.
pub(super) enum Given<'a> {
    /// The parameters come in the fields' order (a CSV file's columns, most bodies): each is
    /// taken as it comes, without a table by field.
    InOrder(std::iter::Peekable<std::iter::Zip<serde_json::map::IntoIter, Positions<'a>>>),
    /// In another order: placed by field first.
    ByField(Vec<Option<(String, Json)>>),
}

type Positions<'a> = std::iter::Copied<std::slice::Iter<'a, usize>>;

impl<'a> Given<'a> {
    /// The parameters of an entity of `fields` fields; `at` holds the position of each
    /// parameter's field, in the parameters' order.
    pub fn new(fields: usize, params: Map<String, Json>, at: &'a [usize]) -> Given<'a> {
        debug_assert_eq!(params.len(), at.len());
        if at.windows(2).all(|w| w[0] < w[1]) {
            return Given::InOrder(params.into_iter().zip(at.iter().copied()).peekable());
        }
        let mut by_field = vec![None; fields];
        for ((k, v), &i) in params.into_iter().zip(at) {
            by_field[i] = Some((k, v));
        }
        Given::ByField(by_field)
    }

    /// The name and value given for field `i`, if any; fields are asked for in increasing
    /// order.
    pub fn take(&mut self, i: usize) -> Option<(String, Json)> {
        match self {
            Given::InOrder(it) => it.next_if(|(_, j)| *j == i).map(|(kv, _)| kv),
            Given::ByField(by_field) => by_field[i].take(),
        }
    }
}

/// The refusal of the first field, in the entity's order, whose given value no conversion
/// could store: a number of an integer field beyond 64 bits, or text with a NUL character
/// (which PostgreSQL cannot store). `at` as for [`Given::new`].
pub(super) fn refused(e: &Entity, params: &Map<String, Json>, at: &[usize]) -> Option<CallError> {
    let mut first: Option<(usize, CallError)> = None;
    for (v, &i) in params.values().zip(at) {
        if first.as_ref().is_some_and(|(j, _)| *j < i) {
            continue;
        }
        let f = &e.fields[i];
        let why = match v {
            Json::Number(n) if f.ty.col_type() == ColType::Int && n.as_i64().is_none() => {
                format!("{n} is not a 64-bit integer")
            }
            Json::String(s) if s.contains('\0') => "text may not contain NUL characters".into(),
            _ => continue,
        };
        first = Some((i, CallError::invalid_field(&f.name, why)));
    }
    first.map(|(_, err)| err)
}
