//! Deciding a rule that reads the caller alone, without rows, with the meaning its SQL form
//! has.

use super::{Cmp, Expr, Lit, Operand, Root};

impl Expr {
    /// Whether the expression reads nothing but the caller (and literals): then it holds or
    /// fails for every row alike, and is decided once per call without touching storage.
    pub fn caller_only(&self) -> bool {
        let caller = |o: &Operand| match o {
            Operand::Path { root, .. } => *root == Root::Caller,
            Operand::Lit(_) => true,
        };
        match self {
            Expr::Or(a, b) | Expr::And(a, b) => a.caller_only() && b.caller_only(),
            Expr::Not(a) => a.caller_only(),
            Expr::Compare { left, right, .. } => caller(left) && caller(right),
            Expr::In { left, list } => caller(left) && list.iter().all(caller),
        }
    }

    /// Decides a [`Expr::caller_only`] expression for a caller whose values are `value`
    /// (`@caller.<path>` joined with dots, to a JSON value; `None` when empty), with the
    /// meaning the SQL form has: a comparison with an empty side is false, but `= null` and
    /// `!= null` test for an empty value, and `!=` holds between an empty and a given value.
    pub fn holds_for(&self, value: &dyn Fn(&str) -> Option<serde_json::Value>) -> bool {
        match self {
            Expr::Or(a, b) => a.holds_for(value) || b.holds_for(value),
            Expr::And(a, b) => a.holds_for(value) && b.holds_for(value),
            Expr::Not(a) => !a.holds_for(value),
            Expr::Compare { op, left, right } => {
                let (l, r) = (operand_value(left, value), operand_value(right, value));
                let null = |o: &Operand| matches!(o, Operand::Lit(Lit::Null));
                // `= null` and `!= null` test for an empty value.
                match (op, null(left) || null(right)) {
                    (Cmp::Eq, true) => l.is_none() && r.is_none(),
                    (Cmp::Ne, true) => l.is_some() || r.is_some(),
                    _ => compare_values(*op, &l, &r),
                }
            }
            Expr::In { left, list } => {
                let l = operand_value(left, value);
                list.iter()
                    .any(|o| compare_values(Cmp::Eq, &l, &operand_value(o, value)))
            }
        }
    }
}

fn operand_value(
    o: &Operand,
    value: &dyn Fn(&str) -> Option<serde_json::Value>,
) -> Option<serde_json::Value> {
    use serde_json::Value as J;
    match o {
        Operand::Lit(Lit::Null) => None,
        Operand::Lit(Lit::Str(s)) => Some(J::String(s.clone())),
        Operand::Lit(Lit::Bool(b)) => Some(J::Bool(*b)),
        Operand::Lit(Lit::Num(n)) => serde_json::from_str(n).ok(),
        Operand::Path { names, .. } => value(&names.join(".")).filter(|v| !v.is_null()),
    }
}

/// Two values compared as the SQL form compares them.
fn compare_values(op: Cmp, l: &Option<serde_json::Value>, r: &Option<serde_json::Value>) -> bool {
    use std::cmp::Ordering;
    let (l, r) = match (op, l, r) {
        (Cmp::Eq, None, None) | (Cmp::Ne, None, None) => return false,
        (Cmp::Eq, None, _) | (Cmp::Eq, _, None) => return false,
        (Cmp::Ne, None, _) | (Cmp::Ne, _, None) => return true,
        (_, None, _) | (_, _, None) => return false,
        (_, Some(l), Some(r)) => (l, r),
    };
    let order = match (l, r) {
        (serde_json::Value::Number(a), serde_json::Value::Number(b)) => {
            match (
                crate::decimal::parse(&a.to_string()),
                crate::decimal::parse(&b.to_string()),
            ) {
                (Ok(a), Ok(b)) => a.partial_cmp(&b),
                _ => None,
            }
        }
        (serde_json::Value::String(a), serde_json::Value::String(b)) => Some(a.cmp(b)),
        (serde_json::Value::Bool(a), serde_json::Value::Bool(b)) => Some(a.cmp(b)),
        _ => None,
    };
    match op {
        Cmp::Eq => order == Some(Ordering::Equal),
        Cmp::Ne => order != Some(Ordering::Equal),
        Cmp::Lt => order == Some(Ordering::Less),
        Cmp::Le => matches!(order, Some(Ordering::Less | Ordering::Equal)),
        Cmp::Gt => order == Some(Ordering::Greater),
        Cmp::Ge => matches!(order, Some(Ordering::Greater | Ordering::Equal)),
        Cmp::Contains => match (l, r) {
            (serde_json::Value::String(a), serde_json::Value::String(b)) => {
                a.to_lowercase().contains(&b.to_lowercase())
            }
            _ => false,
        },
    }
}
