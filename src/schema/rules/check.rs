//! Checking a parsed rule against the entities: every path resolved field by field through
//! references, every comparison between values of one kind.

use super::{Cmp, Expr, Kind, Lit, Operand, Root, RuleError, Step, fail};
use crate::schema::{Field, FieldType, format};
use std::collections::BTreeMap;

/// What [`check`] needs of the catalog: the fields of an entity by name.
pub trait Fields {
    fn fields_of(&self, entity: &str) -> Option<&[Field]>;
}

impl Fields for BTreeMap<String, Vec<Field>> {
    fn fields_of(&self, entity: &str) -> Option<&[Field]> {
        self.get(entity).map(Vec::as_slice)
    }
}

/// The kind a field's values compare as.
pub fn kind_of(ty: &FieldType) -> Kind {
    match ty {
        FieldType::Integer | FieldType::Decimal | FieldType::Reference(_) => Kind::Number,
        FieldType::Boolean => Kind::Bool,
        _ => Kind::Text,
    }
}

/// The columns every row has besides its fields, and the kind they compare as.
const SYSTEM: [(&str, Kind); 3] = [
    ("id", Kind::Number),
    ("created_dt", Kind::Text),
    ("updated_dt", Kind::Text),
];

/// Checks an expression of a rule of `entity` (`new_allowed`: in `create` and `update`),
/// resolving every path through `catalog` (the users entity is `users`).
pub fn check(
    e: Expr,
    entity: &str,
    new_allowed: bool,
    catalog: &dyn Fields,
) -> Result<Expr, RuleError> {
    let ck = |o: Operand| resolve(o, entity, new_allowed, catalog);
    Ok(match e {
        Expr::Or(a, b) => Expr::Or(
            Box::new(check(*a, entity, new_allowed, catalog)?),
            Box::new(check(*b, entity, new_allowed, catalog)?),
        ),
        Expr::And(a, b) => Expr::And(
            Box::new(check(*a, entity, new_allowed, catalog)?),
            Box::new(check(*b, entity, new_allowed, catalog)?),
        ),
        Expr::Not(a) => Expr::Not(Box::new(check(*a, entity, new_allowed, catalog)?)),
        Expr::Compare { op, left, right } => {
            let at = position(&left).or(position(&right)).unwrap_or(0);
            let (left, right) = (ck(left)?, ck(right)?);
            compatible(op, kind(&left), kind(&right), at)?;
            Expr::Compare { op, left, right }
        }
        Expr::In { left, list } => {
            let at = position(&left).unwrap_or(0);
            let left = ck(left)?;
            let list = list.into_iter().map(ck).collect::<Result<Vec<_>, _>>()?;
            for item in &list {
                compatible(Cmp::Eq, kind(&left), kind(item), at)?;
            }
            Expr::In { left, list }
        }
    })
}

fn position(o: &Operand) -> Option<usize> {
    match o {
        Operand::Path { at, .. } => Some(*at),
        Operand::Lit(_) => None,
    }
}

fn kind(o: &Operand) -> Kind {
    match o {
        Operand::Path { kind, .. } => *kind,
        Operand::Lit(Lit::Str(_)) => Kind::Text,
        Operand::Lit(Lit::Num(_)) => Kind::Number,
        Operand::Lit(Lit::Bool(_)) => Kind::Bool,
        Operand::Lit(Lit::Null) => Kind::Null,
    }
}

fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Text => "a text",
        Kind::Number => "a number",
        Kind::Bool => "true or false",
        Kind::Null => "null",
    }
}

fn compatible(op: Cmp, a: Kind, b: Kind, at: usize) -> Result<(), RuleError> {
    let null = a == Kind::Null || b == Kind::Null;
    if null && !matches!(op, Cmp::Eq | Cmp::Ne) {
        return fail(at, "`null` compares only with `=` and `!=`");
    }
    if !null && a != b {
        return fail(
            at,
            format!("compares {} with {}", kind_name(a), kind_name(b)),
        );
    }
    if op == Cmp::Contains && (a != Kind::Text || b != Kind::Text) {
        return fail(at, "`~` (contains) compares texts");
    }
    if matches!(op, Cmp::Lt | Cmp::Le | Cmp::Gt | Cmp::Ge) && a == Kind::Bool {
        return fail(at, "true and false have no order");
    }
    Ok(())
}

/// Resolves a path operand: each name a field of the entity reached so far, every name but the
/// last a reference.
fn resolve(
    o: Operand,
    entity: &str,
    new_allowed: bool,
    catalog: &dyn Fields,
) -> Result<Operand, RuleError> {
    let Operand::Path {
        root, names, at, ..
    } = o
    else {
        return Ok(o);
    };
    if root == Root::New && !new_allowed {
        return fail(at, "`@new.` is only known in `create` and `update` rules");
    }
    let mut current = match root {
        Root::Caller => "users".to_string(),
        _ => entity.to_string(),
    };
    let mut steps = Vec::new();
    let mut kind = Kind::Null;
    for (i, name) in names.iter().enumerate() {
        let fields = catalog.fields_of(&current).unwrap_or(&[]);
        let last = i + 1 == names.len();
        let system = SYSTEM.iter().find(|(n, _)| n == name);
        let field = fields.iter().find(|f| &f.name == name);
        let next = match (field, system) {
            (Some(f), _) if f.secret => {
                return fail(at, format!("`{name}` is secret and cannot be compared"));
            }
            (Some(f), _) => {
                kind = kind_of(&f.ty);
                match &f.ty {
                    FieldType::Reference(t) => Some(t.clone()),
                    _ => None,
                }
            }
            (None, Some((_, k))) => {
                kind = *k;
                None
            }
            (None, None) => {
                let known = fields
                    .iter()
                    .filter(|f| !f.secret)
                    .map(|f| f.name.as_str())
                    .chain(SYSTEM.iter().map(|(n, _)| *n));
                return fail(
                    at,
                    format::with_hint(format!("`{name}` is not a field of {current}"), name, known),
                );
            }
        };
        steps.push(Step {
            entity: current.clone(),
            field: name.clone(),
            target: next.clone(),
        });
        match (next, last) {
            (Some(t), false) => current = t,
            (None, false) => {
                return fail(
                    at,
                    format!("`{name}` is not a reference: nothing follows it after `.`"),
                );
            }
            (_, true) => {}
        }
    }
    Ok(Operand::Path {
        root,
        names,
        at,
        steps,
        kind,
    })
}
