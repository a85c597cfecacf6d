//! Everything about a call that needs no database: the entity, access rules, unknown fields,
//! string coercion (`strings`), JSON Schema validation (`problems`), normalisation,
//! defaults, and hashing of secrets.

use super::{Call, CallError, Caller, Engine, Op};
use crate::schema::{Catalog, Entity, value};
use crate::storage::Value;
use serde_json::{Map, Value as Json};
use std::collections::BTreeMap;
use std::sync::Arc;

mod given;
mod problems;
mod strings;

use problems::validate;
pub use strings::{coerce_into, coerce_strings};

/// A call ready to execute: columns and values to write.
#[derive(Debug)]
pub struct Prepared {
    pub entity: Arc<Entity>,
    /// `Save` only when the object is named by its key (a save by id is an update, one without
    /// a key a create).
    pub op: Op,
    pub id: Option<i64>,
    pub values: Vec<(String, Value)>,
    /// When `id` is `None` and the op is not a create: the key's columns and the values that
    /// name the object.
    pub key: Vec<(String, Value)>,
    /// A save: the values a create writes (`values` with defaults and `created_dt`), or why it
    /// cannot create.
    pub create: Option<Result<Vec<(String, Value)>, CallError>>,
    /// What the caller's access rules leave to decide on rows, in the write's transaction.
    pub guard: Option<super::access::Guard>,
    /// An update, delete or save of an entity with hooks: the call as it was asked, from
    /// which [`super::scripted`] prepares the write again once `before*` ran.
    pub call: Option<Box<Call>>,
    /// A create's columns, as a [`Shape`]: creates of one entity with the same shape write the
    /// same columns in the same order, and are inserted together.
    pub shape: Shape,
}

/// Which of an entity's fields a create writes: bit `i` for its field `i`, and the top bit
/// set (its values are those fields in the entity's order, then `created_dt` and
/// `updated_dt`, so that two equal shapes of one entity name the same columns). `0` when
/// unknown (not a create, or an entity of more than 63 fields): its columns are compared by
/// name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Shape(pub u64);

impl Shape {
    const KNOWN: u64 = 1 << 63;

    /// Whether two creates of one entity write the same columns, when both shapes tell.
    pub fn same(self, other: Shape) -> Option<bool> {
        (self.0 & other.0 & Shape::KNOWN != 0).then_some(self == other)
    }
}

impl Prepared {
    /// A prepared call that names its object by id (or creates one).
    fn plain(entity: Arc<Entity>, op: Op, id: Option<i64>, values: Vec<(String, Value)>) -> Self {
        Prepared {
            entity,
            op,
            id,
            values,
            key: Vec::new(),
            create: None,
            guard: None,
            call: None,
            shape: Shape::default(),
        }
    }

    /// Whether the object is named by its key.
    pub fn by_key(&self) -> bool {
        self.id.is_none() && self.op != Op::Create
    }
}

/// The error of parameters that failed their checks, each field with its problem.
fn invalid(fields: BTreeMap<String, String>) -> CallError {
    let description = fields
        .iter()
        .map(|(k, v)| format!("`{k}`: {v}"))
        .collect::<Vec<_>>()
        .join("; ");
    CallError::Invalid {
        description: format!("invalid values: {description}"),
        fields,
    }
}

/// The values of `e`'s key that name an object, from the call's values; every key field must
/// be given.
fn key_values(e: &Entity, values: &[(String, Value)]) -> Result<Vec<(String, Value)>, CallError> {
    let mut out = Vec::with_capacity(e.key.len());
    let mut missing = BTreeMap::new();
    for k in &e.key {
        match values.iter().find(|(c, v)| c == k && !v.is_null()) {
            Some((c, v)) => out.push((c.clone(), v.clone())),
            None => {
                missing.insert(
                    k.clone(),
                    format!(
                        "is needed to find the object by its key {} (or give `id`)",
                        e.key_shown()
                    ),
                );
            }
        }
    }
    if missing.is_empty() {
        Ok(out)
    } else {
        Err(invalid(missing))
    }
}

/// Checks a call and turns it into the values to write.
pub async fn prepare(
    engine: &Engine,
    catalog: &Catalog,
    caller: &Caller,
    call: &Call,
) -> Result<Prepared, CallError> {
    prepare_at(engine, catalog, caller, call.clone(), &crate::time::now()).await
}

/// [`prepare`] taking the call by value, with the time to stamp it with. The steps: the
/// plugins' hooks, the operation and the caller's access, a create's `beforeCreate` hook,
/// the parameters' names and secrets, validation against the entity's schema, coercion into
/// stored values, the key.
pub async fn prepare_at(
    engine: &Engine,
    catalog: &Catalog,
    caller: &Caller,
    call: Call,
    now: &str,
) -> Result<Prepared, CallError> {
    prepare_with(engine, catalog, caller, call, now, true).await
}

/// [`prepare_at`]; without `before`, the steps before the checks are taken to have run on
/// `call`: the plugins' `before_call` and, for a create, its `beforeCreate` hook.
pub async fn prepare_with(
    engine: &Engine,
    catalog: &Catalog,
    caller: &Caller,
    call: Call,
    now: &str,
    before: bool,
) -> Result<Prepared, CallError> {
    let entity = catalog.entity(&call.entity)?;
    prepare_entity(engine, entity, caller, call, now, before).await
}

/// [`prepare_with`] of a call whose entity is already looked up: `entity` is the one
/// `call.entity` names in the catalog.
pub async fn prepare_entity(
    engine: &Engine,
    entity: Arc<Entity>,
    caller: &Caller,
    call: Call,
    now: &str,
    before: bool,
) -> Result<Prepared, CallError> {
    let e = entity.as_ref();
    let mut call = call;
    if before {
        engine.hooks.before_call(e, caller, &mut call)?;
    }
    resolve_op(e, &mut call)?;
    let mut guard = super::access::guard(e, caller, call.op)?;
    let asked = (e.hooks.is_some() && call.op != Op::Create).then(|| Box::new(call.clone()));
    if before && call.op == Op::Create {
        super::scripted::before_create(engine, caller, e, &mut call)?;
    }
    if call.op == Op::Delete {
        if call.id.is_some() {
            let mut p = Prepared::plain(entity, call.op, call.id, Vec::new());
            p.guard = guard;
            p.call = asked;
            return Ok(p);
        }
        // Named by its key: the key's values are checked like any value of those fields;
        // other parameters are ignored, as for a delete by id.
        call.params.retain(|k, _| e.key.contains(k));
    }
    let prehashed = call.prehashed;
    let mut params = std::mem::take(&mut call.params);
    check_secrets(e, prehashed, &params)?;
    let at = check_params(e, caller, &call, &mut params)?;
    let params = validate(e, call.op, params, &at)?;
    let (mut values, shape) = coerce(e, caller, call.op, prehashed, params, &at).await?;
    if call.op == Op::Create {
        if let Some(g) = &mut guard {
            super::access::decide_create_locally(e, caller, &values, g)?;
            if [g.view, g.op]
                .iter()
                .all(|n| *n == super::access::Need::Pass)
            {
                guard = None;
            }
        }
        values.push(("created_dt".into(), Value::text(now)));
    }
    let shape = if call.op == Op::Create {
        shape
    } else {
        Shape::default()
    };
    let key = if call.id.is_none() && call.op != Op::Create {
        key_values(e, &values)?
    } else {
        Vec::new()
    };
    if call.op == Op::Delete {
        let mut p = Prepared::plain(entity, call.op, None, Vec::new());
        p.key = key;
        p.guard = guard;
        p.call = asked;
        return Ok(p);
    }
    let create = (call.op == Op::Save).then(|| create_values(e, caller, &values, now));
    values.push(("updated_dt".into(), Value::text(now)));
    let mut p = Prepared::plain(entity, call.op, call.id, values);
    p.key = key;
    p.create = create;
    p.guard = guard;
    p.call = asked;
    p.shape = shape;
    Ok(p)
}

/// The operation a call really is (a save by id is an update; one without an id creates
/// unless a key can name the object), refused when it names no object or the caller's role
/// may not run it.
fn resolve_op(e: &Entity, call: &mut Call) -> Result<(), CallError> {
    match (call.op, call.id) {
        (Op::Save, Some(_)) => call.op = Op::Update,
        (Op::Save, None) if !e.has_key() => call.op = Op::Create,
        _ => {}
    }
    if matches!(call.op, Op::Update | Op::Delete) && call.id.is_none() && !e.has_key() {
        return Err(CallError::invalid_field(
            "id",
            format!(
                "required for update and delete (`{}` has no key to name an object by)",
                e.name
            ),
        ));
    }
    Ok(())
}

/// Refuses a secret that is not sealed as it claims (`prehashed`), or a new one that breaks
/// the field's rules; checked before validation could quote it in a message.
fn check_secrets(e: &Entity, prehashed: bool, params: &Map<String, Json>) -> Result<(), CallError> {
    for f in e.fields.iter().filter(|f| f.secret) {
        let Some(Json::String(v)) = params.get(&f.name) else {
            continue;
        };
        let why = if prehashed {
            super::secrets::unseal(v).err()
        } else {
            super::secrets::problem(e, &f.name, v)
        };
        if let Some(why) = why {
            return Err(CallError::invalid_field(&f.name, why));
        }
    }
    Ok(())
}

/// Takes out an `id` parameter (allowed only as the updated object's own), and refuses
/// unknown fields and fields the caller's role may not set.
fn check_params(
    e: &Entity,
    caller: &Caller,
    call: &Call,
    params: &mut Map<String, Json>,
) -> Result<Located, CallError> {
    // A look along the few keys, before a lookup that hashes.
    if params.keys().any(|k| k == "id")
        && let Some(id) = params.remove("id")
    {
        let same = call.op == Op::Update
            && (id.as_i64() == call.id || id.as_str().and_then(|s| s.parse().ok()) == call.id);
        if !same {
            return Err(CallError::invalid_field(
                "id",
                "is assigned by the server and cannot be set",
            ));
        }
    }
    // One pass: unknown fields are named before a field the role may not set.
    let mut at = Located::new();
    let mut unknown = Vec::new();
    let mut forbidden = None;
    for (k, i) in params
        .keys()
        .zip(crate::schema::positions(&e.fields, params.keys()))
    {
        let Some(i) = i else {
            unknown.push(k.clone());
            continue;
        };
        at.push(i);
        if forbidden.is_none()
            && call.op != Op::Delete
            && let Some(role) = &e.fields[i].write_role
            && !role.admits(&caller.role)
        {
            forbidden = Some(CallError::Forbidden(format!(
                "only the role `{}` (or an admin) may set `{k}`",
                role.as_str()
            )));
        }
    }
    if !unknown.is_empty() {
        return Err(CallError::unknown_fields(e, unknown));
    }
    forbidden.map_or(Ok(at), Err)
}

/// The position among the entity's fields of each parameter's field, in the parameters'
/// order: looked up once, when the names are checked ([`check_params`]), for validation and
/// coercion.
type Located = smallvec::SmallVec<[usize; 8]>;

/// The stored values of valid `params` in field order: numbers and text checked for what the
/// databases hold, dates, enums and decimals normalized, defaults of a create filled in,
/// secrets hashed (or kept, when `prehashed`).
async fn coerce(
    e: &Entity,
    caller: &Caller,
    op: Op,
    prehashed: bool,
    params: Map<String, Json>,
    at: &[usize],
) -> Result<(Vec<(String, Value)>, Shape), CallError> {
    if let Some(err) = given::refused(e, &params, at) {
        return Err(err);
    }
    // The given values in field order, each with its name as the parameters own it.
    let mut given = given::Given::new(e.fields.len(), params, at);
    let mut values = Vec::with_capacity(e.fields.len() + 2);
    let mut shape = if e.fields.len() < 64 { Shape::KNOWN } else { 0 };
    for (i, f) in e.fields.iter().enumerate() {
        let (name, v) = given.take(i).unzip();
        let v = match v {
            Some(v)
                if matches!(
                    f.ty,
                    crate::schema::FieldType::Date
                        | crate::schema::FieldType::Datetime
                        | crate::schema::FieldType::Enum(_)
                        | crate::schema::FieldType::Decimal
                ) =>
            {
                // Worded as a string converted by `coerce_strings` (CSV, form) would be; a
                // decimal is refused when it does not fit exactly, never rounded.
                value::normalize(&f.ty, &v)
                    .map_err(|m| invalid(BTreeMap::from([(f.name.clone(), m)])))?
            }
            Some(v) => v,
            None => match (&f.default, op) {
                (Some(d), Op::Create) => d.clone(),
                (None, Op::Create) if f.default_caller => Json::from(caller.id),
                _ => continue,
            },
        };
        let stored = if f.secret {
            match v.as_str() {
                Some(sealed) if prehashed => Value::text(sealed),
                Some(plain) => Value::text(super::password::hash_async(plain.to_string()).await?),
                None => Value::Text(None),
            }
        } else {
            Value::from_json_owned(f.ty.col_type(), v)
        };
        values.push((name.unwrap_or_else(|| f.name.clone()), stored));
        if shape != 0 {
            shape |= 1 << i;
        }
    }
    Ok((values, Shape(shape)))
}

/// What a save writes when it creates: the given `values`, the defaults of the fields not
/// given, and the times; or, when a required field is missing, the error a create gives.
fn create_values(
    e: &Entity,
    caller: &Caller,
    values: &[(String, Value)],
    now: &str,
) -> Result<Vec<(String, Value)>, CallError> {
    let mut out = Vec::with_capacity(e.fields.len() + 2);
    let mut missing = BTreeMap::new();
    for f in &e.fields {
        match values.iter().find(|(c, _)| *c == f.name) {
            Some(given) => out.push(given.clone()),
            None => match &f.default {
                Some(d) => out.push((f.name.clone(), Value::from_json(f.ty.col_type(), d))),
                None if f.default_caller => out.push((f.name.clone(), Value::int(caller.id))),
                None if f.required => {
                    missing.insert(f.name.clone(), "is required".to_string());
                }
                None => {}
            },
        }
    }
    if !missing.is_empty() {
        return Err(invalid(missing));
    }
    out.push(("created_dt".into(), Value::text(now)));
    out.push(("updated_dt".into(), Value::text(now)));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::test_catalog;

    /// Parameters in any order give the same stored values, in the entity's order, as the
    /// same parameters in the fields' order; of two values no conversion could store, the
    /// refusal names the first field in the entity's order, whichever came first.
    #[tokio::test]
    async fn the_order_of_the_parameters_changes_nothing() {
        let text = "fields:\n  a: { type: integer, default: 1 }\n  b: { type: string }\n  \
                    c: { type: text }\n  d: { type: date }\n  n: { type: integer }\n";
        let catalog = test_catalog(&[("things.yaml", text)]);
        let e = catalog.get("things").unwrap();
        let caller = Caller::anonymous();
        let given = [
            ("a", Json::from(7)),
            ("b", Json::from("x")),
            ("d", Json::from("2026-12-02")),
            ("n", Json::from(3)),
        ];
        let made = |order: &[usize]| {
            let params: Map<String, Json> = order
                .iter()
                .map(|&k| (given[k].0.to_string(), given[k].1.clone()))
                .collect();
            let at: Vec<usize> = crate::schema::positions(&e.fields, params.keys())
                .map(Option::unwrap)
                .collect();
            (params, at)
        };
        let (params, at) = made(&[0, 1, 2, 3]);
        let want = coerce(e, &caller, Op::Create, true, params, &at)
            .await
            .unwrap();
        for order in [[3, 2, 1, 0], [1, 0, 3, 2], [2, 3, 0, 1]] {
            let (params, at) = made(&order);
            let got = coerce(e, &caller, Op::Create, true, params, &at)
                .await
                .unwrap();
            assert_eq!(format!("{got:?}"), format!("{want:?}"), "{order:?}");
        }
        let big = serde_json::from_str::<Json>("123456789012345678901234567890").unwrap();
        for first in [true, false] {
            let mut params = Map::new();
            let pairs = [("n", big.clone()), ("b", Json::from("x\0y"))];
            let pairs = if first {
                pairs
            } else {
                [pairs[1].clone(), pairs[0].clone()]
            };
            for (k, v) in pairs {
                params.insert(k.to_string(), v);
            }
            let at: Vec<usize> = crate::schema::positions(&e.fields, params.keys())
                .map(Option::unwrap)
                .collect();
            let err = coerce(e, &caller, Op::Create, true, params, &at)
                .await
                .unwrap_err();
            assert!(err.description().contains("`b`"), "{}", err.description());
        }
    }

    /// Two creates' shapes are equal exactly when they write the same columns in the same
    /// order, for every choice of given fields (one with a default, one secret, one not
    /// given at all); an entity of 64 fields or more has no shape, and its creates are
    /// compared by name.
    #[tokio::test]
    async fn equal_shapes_are_equal_columns() {
        let text = "fields:\n  a: { type: integer, default: 1 }\n  b: { type: string }\n  \
                    pw: { type: string, secret: true }\n  c: { type: text }\n  d: { type: date }\n";
        let catalog = test_catalog(&[("things.yaml", text)]);
        let e = catalog.get("things").unwrap();
        let caller = Caller::anonymous();
        let given = ["a", "b", "pw", "c", "d"];
        let mut made = Vec::new();
        for mask in 0..(1u32 << given.len()) {
            let mut params = Map::new();
            let mut at = Vec::new();
            for (i, name) in given.iter().enumerate() {
                if mask & (1 << i) != 0 {
                    let v = if *name == "d" { "2026-12-01" } else { "7" };
                    let v = if *name == "a" {
                        Json::from(7)
                    } else {
                        Json::from(v)
                    };
                    params.insert(name.to_string(), v);
                    at.push(i);
                }
            }
            let (values, shape) = coerce(e, &caller, Op::Create, true, params, &at)
                .await
                .unwrap();
            assert_ne!(shape, Shape::default());
            let names: Vec<String> = values.into_iter().map(|(n, _)| n).collect();
            made.push((names, shape));
        }
        for (x, sx) in &made {
            for (y, sy) in &made {
                assert_eq!(sx.same(*sy), Some(x == y), "{x:?} and {y:?}");
            }
        }
        let wide: String = (0..64)
            .map(|i| format!("  f{i}: {{ type: integer }}\n"))
            .collect();
        let catalog = test_catalog(&[("wide.yaml", &format!("fields:\n{wide}"))]);
        let e = catalog.get("wide").unwrap();
        let (_, shape) = coerce(e, &caller, Op::Create, true, Map::new(), &[])
            .await
            .unwrap();
        assert_eq!(shape.same(shape), None);
    }
}
