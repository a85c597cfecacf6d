//! Deciding a rule without SQL, with the meaning its SQL form has: a rule that reads the
//! caller alone once per call, and a rule that reads one row's own fields against the values
//! of that row.

use super::{Cmp, Expr, Lit, Operand, Root};

/// The caller's values known without reading their user row.
pub const CALLER_KNOWN: [&str; 3] = ["id", "role", "login"];

/// A value of a path (its root and names) for [`Expr::holds_for`]; `None` when empty.
pub type Lookup<'a> = &'a dyn Fn(Root, &[String]) -> Option<serde_json::Value>;

impl Expr {
    /// Every operand.
    fn operands<'a>(&'a self, out: &mut Vec<&'a Operand>) {
        match self {
            Expr::Or(a, b) | Expr::And(a, b) => {
                a.operands(out);
                b.operands(out);
            }
            Expr::Not(a) => a.operands(out),
            Expr::Compare { left, right, .. } => out.extend([left, right]),
            Expr::In { left, list } => {
                out.push(left);
                out.extend(list);
            }
        }
    }

    fn all_operands(&self, test: impl Fn(&Operand) -> bool) -> bool {
        let mut ops = Vec::new();
        self.operands(&mut ops);
        ops.into_iter().all(test)
    }

    /// Whether the expression reads nothing but the caller's id, role and login (and
    /// literals): then it holds or fails for every row alike, and is decided once per call
    /// without touching storage.
    pub fn caller_only(&self) -> bool {
        self.all_operands(|o| match o {
            Operand::Path { root, names, .. } => *root == Root::Caller && caller_known(names),
            Operand::Lit(_) => true,
        })
    }

    /// Whether the expression reads only fields of its own row (or the new values) and the
    /// caller's id, role and login: then it is decided on a row's values without SQL.
    pub fn local(&self) -> bool {
        self.all_operands(|o| match o {
            Operand::Path { root, names, .. } => match root {
                Root::Caller => caller_known(names),
                Root::Row | Root::New => names.len() == 1,
            },
            Operand::Lit(_) => true,
        })
    }

    /// The fields of its own row the expression reads first (a path's first step), for the
    /// indexes rules need.
    pub fn row_fields(&self, out: &mut Vec<String>) {
        let mut ops = Vec::new();
        self.operands(&mut ops);
        for o in ops {
            if let Operand::Path {
                root: Root::Row,
                names,
                ..
            } = o
                && let Some(first) = names.first()
            {
                out.push(first.clone());
            }
        }
    }

    /// Decides a [`Expr::local`] expression with the values `value` gives, with the meaning
    /// the SQL form has: a comparison with an empty side is false, but `= null` and
    /// `!= null` test for an empty value, and `!=` holds between an empty and a given value.
    pub fn holds_for(&self, value: Lookup<'_>) -> bool {
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

fn caller_known(names: &[String]) -> bool {
    names.len() == 1 && CALLER_KNOWN.contains(&names[0].as_str())
}

fn operand_value(o: &Operand, value: Lookup<'_>) -> Option<serde_json::Value> {
    use serde_json::Value as J;
    match o {
        Operand::Lit(Lit::Null) => None,
        Operand::Lit(Lit::Str(s)) => Some(J::String(s.clone())),
        Operand::Lit(Lit::Bool(b)) => Some(J::Bool(*b)),
        Operand::Lit(Lit::Num(n)) => serde_json::from_str(n).ok(),
        Operand::Path { root, names, .. } => value(*root, names).filter(|v| !v.is_null()),
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
