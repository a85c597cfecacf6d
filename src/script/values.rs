//! Values crossing between serde_json and JavaScript, built as JavaScript values directly
//! (no JSON text in between).
//!
//! Into JavaScript: objects, arrays, strings, booleans and null as themselves; an integer that
//! fits 32 bits as an integer, any other number as a double (an integer beyond 2^53 loses its
//! last digits there, as in any JavaScript). Strings stay strings, so decimals sent as text
//! (`"12.50"`) keep every digit.
//!
//! Back to JSON, as `JSON.stringify` would: a property that is `undefined`, a function or a
//! symbol is left out (in an array it becomes `null`); `NaN` and the infinities become
//! `null`; an object with a `toJSON` method (a `Date`) is replaced by what it returns; a
//! double that holds an integer (below 2^63) becomes that integer; a bigint becomes the integer
//! it holds. Unlike `JSON.stringify`, nesting deeper than [`MAX_DEPTH`] (a cycle, usually)
//! is refused. [`keep_unchanged`] then restores the exact digits of every number the hook
//! left as it was.

use rquickjs::atom::PredefinedAtom;
use rquickjs::function::This;
use rquickjs::object::Property;
use rquickjs::{Array, Coerced, Ctx, FromJs, Object, Type, Value};
use serde_json::{Map, Number, Value as Json};

/// The deepest nesting a value may come back from JavaScript with.
pub const MAX_DEPTH: usize = 64;

/// 2^63: the doubles below it in magnitude that hold an integer fit an `i64` exactly.
const I64_BOUND: f64 = 9_223_372_036_854_775_808.0;

/// Why a JavaScript value could not come back as JSON.
#[derive(Debug)]
pub enum BackError {
    /// A getter or a `toJSON` method threw, or QuickJS failed.
    Js(rquickjs::Error),
    /// Nested deeper than [`MAX_DEPTH`].
    TooDeep,
}

impl From<rquickjs::Error> for BackError {
    fn from(e: rquickjs::Error) -> Self {
        BackError::Js(e)
    }
}

/// `value` as a JavaScript value of `ctx`.
pub fn to_js<'js>(ctx: &Ctx<'js>, value: &Json) -> rquickjs::Result<Value<'js>> {
    Ok(match value {
        Json::Null => Value::new_null(ctx.clone()),
        Json::Bool(b) => Value::new_bool(ctx.clone(), *b),
        Json::Number(n) => number_to_js(ctx, n),
        Json::String(s) => rquickjs::String::from_str(ctx.clone(), s)?.into_value(),
        Json::Array(items) => {
            let array = Array::new(ctx.clone())?;
            for (i, item) in items.iter().enumerate() {
                array.set(i, to_js(ctx, item)?)?;
            }
            array.into_value()
        }
        Json::Object(map) => object_to_js(ctx, map)?.into_value(),
    })
}

/// `map` as a JavaScript object of `ctx`, its properties in the map's order. Each is defined
/// as an own property, as `JSON.parse` does, so that a key `__proto__` is a field like any
/// other rather than the object's prototype.
pub fn object_to_js<'js>(ctx: &Ctx<'js>, map: &Map<String, Json>) -> rquickjs::Result<Object<'js>> {
    let object = Object::new(ctx.clone())?;
    for (key, value) in map {
        let field = Property::from(to_js(ctx, value)?)
            .writable()
            .enumerable()
            .configurable();
        object.prop(key.as_str(), field)?;
    }
    Ok(object)
}

/// A JSON number as a JavaScript number: an integer when it fits 32 bits, else a double.
fn number_to_js<'js>(ctx: &Ctx<'js>, n: &Number) -> Value<'js> {
    if let Some(i) = n.as_i64().and_then(|i| i32::try_from(i).ok()) {
        return Value::new_int(ctx.clone(), i);
    }
    let f = n
        .as_f64()
        .or_else(|| n.to_string().parse().ok())
        .unwrap_or(f64::NAN);
    Value::new_float(ctx.clone(), f)
}

/// `value` back as JSON; `None` for what JSON leaves out (`undefined`, a function, a symbol).
pub fn from_js<'js>(value: &Value<'js>) -> Result<Option<Json>, BackError> {
    back(value, 0, true)
}

/// [`from_js`] of a value nested `depth` levels deep (a record's field is at 1).
pub(super) fn back_at<'js>(value: &Value<'js>, depth: usize) -> Result<Option<Json>, BackError> {
    back(value, depth, true)
}

/// [`from_js`] at `depth`; `to_json` says whether an object's `toJSON` method applies.
fn back<'js>(value: &Value<'js>, depth: usize, to_json: bool) -> Result<Option<Json>, BackError> {
    if depth > MAX_DEPTH {
        return Err(BackError::TooDeep);
    }
    Ok(Some(match value.type_of() {
        Type::Null => Json::Null,
        Type::Bool => Json::Bool(value.as_bool().unwrap_or_default()),
        Type::Int => Json::from(value.as_int().unwrap_or_default()),
        Type::Float => float_to_json(value.as_float().unwrap_or(f64::NAN)),
        Type::String => Json::String(Coerced::<String>::from_js(value.ctx(), value.clone())?.0),
        Type::BigInt => bigint_to_json(value)?,
        Type::Array => {
            let array = value.as_array().expect("an array value is an array");
            let mut items = Vec::with_capacity(array.len());
            for item in array.iter::<Value>() {
                items.push(back(&item?, depth + 1, true)?.unwrap_or(Json::Null));
            }
            Json::Array(items)
        }
        Type::Object | Type::Exception | Type::Promise | Type::Proxy => {
            let object = value.as_object().expect("an object value is an object");
            if to_json {
                let method: Value = object.get(PredefinedAtom::ToJSON)?;
                if let Some(method) = method.as_function() {
                    let replaced: Value = method.call((This(object.clone()), ""))?;
                    return back(&replaced, depth, false);
                }
            }
            Json::Object(object_back(object, depth)?)
        }
        _ => return Ok(None),
    }))
}

/// The own enumerable string-keyed properties of `object`, in JavaScript's order.
fn object_back<'js>(object: &Object<'js>, depth: usize) -> Result<Map<String, Json>, BackError> {
    // Sized for a record's fields: growing the map rehashes its keys.
    let mut map = Map::with_capacity(8);
    // Each value read by the key's atom, as the keys are listed: no second lookup by name.
    for prop in object.props::<String, Value>() {
        let (key, value) = prop?;
        if let Some(json) = back(&value, depth + 1, true)? {
            map.insert(key, json);
        }
    }
    Ok(map)
}

/// A double as JSON: an integer when it holds one that fits 64 bits, `null` when it is not
/// finite.
fn float_to_json(f: f64) -> Json {
    if !f.is_finite() {
        return Json::Null;
    }
    if f.fract() == 0.0 && f.abs() < I64_BOUND {
        return Json::from(f as i64);
    }
    Number::from_f64(f).map_or(Json::Null, Json::Number)
}

/// A bigint as the JSON integer it holds, every digit kept.
fn bigint_to_json<'js>(value: &Value<'js>) -> Result<Json, BackError> {
    let digits = Coerced::<String>::from_js(value.ctx(), value.clone())?.0;
    Ok(serde_json::from_str::<Number>(&digits).map_or(Json::Null, Json::Number))
}

/// Puts back in `new` the numbers of `old` that the hook did not change: where both hold a
/// number at the same place and the two are the same double, `old`'s exact digits are kept
/// (a decimal with more digits than a double holds, an integer beyond 2^53).
pub fn keep_unchanged(new: &mut Json, old: &Json) {
    match (new, old) {
        (Json::Number(n), Json::Number(o))
            if n != o && n.as_f64().is_some() && n.as_f64() == o.as_f64() =>
        {
            *n = o.clone();
        }
        (Json::Object(n), Json::Object(o)) => {
            for (key, value) in n.iter_mut() {
                if let Some(before) = o.get(key) {
                    keep_unchanged(value, before);
                }
            }
        }
        (Json::Array(n), Json::Array(o)) => {
            for (value, before) in n.iter_mut().zip(o) {
                keep_unchanged(value, before);
            }
        }
        _ => {}
    }
}
