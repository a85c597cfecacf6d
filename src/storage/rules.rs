//! Access rules as SQL: a checked rule expression ([`crate::schema::rules`]) becomes one
//! condition on a row of its entity, usable in any statement over that entity's table (a list,
//! a count, or the check of one row inside the transaction of a write). A path through references becomes a scalar
//! subquery per step, so an empty reference compares as null. Comparisons are two-valued: a
//! comparison with a null side is false, but `= null` and `!= null` test for an empty value and
//! `!=` holds between an empty value and a given one.

use super::entity::Target;
use super::{Dialect, Exec, Result, Row, Value};
use crate::schema::rules::{Cmp, Expr, Kind, Lit, Operand, Root, Rule, Step};
use crate::schema::{Action, ColType, Entity};
use std::sync::Arc;

/// The caller as rules read them: `@caller.id`, `@caller.role` and `@caller.login` are bound
/// as values; any other `@caller.<field>` is read from the caller's user row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallerValues {
    pub id: i64,
    pub role: String,
    pub login: String,
}

/// What a rule may read besides the row: the caller, and the values after a change.
pub struct Bindings<'a> {
    pub caller: &'a CallerValues,
    /// `@new.<field>` (and, in a create, plain field names): the values given; a field not
    /// given reads the stored row.
    pub new: Option<&'a [(String, Value)]>,
}

/// A list's condition of the caller's rule of `action` (an expression) on the entity's rows.
#[derive(Debug, Clone)]
pub struct RuleFilter {
    pub entity: Arc<Entity>,
    pub action: Action,
    pub caller: CallerValues,
}

impl PartialEq for RuleFilter {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.entity, &other.entity)
            && self.action == other.action
            && self.caller == other.caller
    }
}

impl RuleFilter {
    /// The condition on the rows of the entity's table, by its own name.
    pub fn sql(&self, d: Dialect, args: &mut Vec<Value>) -> String {
        let Rule::Expr(e) = self.entity.access.rule(self.action) else {
            return "1 = 1".into();
        };
        let bind = Bindings {
            caller: &self.caller,
            new: None,
        };
        let row = d.quote(&self.entity.name);
        Condition::new(d, &row, &bind, args).sql(e)
    }
}

/// What one rule says of a row: decided already, or an expression to evaluate on it.
#[derive(Debug, Clone, Copy)]
pub enum Test<'a> {
    Known(bool),
    Expr(&'a Expr),
}

impl Test<'_> {
    fn sql(&self, c: &mut Condition<'_>) -> String {
        match self {
            Test::Known(true) => "CAST(1 AS BIGINT)".into(),
            Test::Known(false) => "CAST(0 AS BIGINT)".into(),
            Test::Expr(e) => format!("CAST(CASE WHEN {} THEN 1 ELSE 0 END AS BIGINT)", c.sql(e)),
        }
    }
}

/// Reads the stored row `target` names and decides `view` and the operation's rule on it, in
/// the transaction of the write that follows (on PostgreSQL the row is locked until then):
/// `None` when there is no such row.
pub async fn check_row(
    ex: &mut dyn Exec,
    d: Dialect,
    e: &Entity,
    target: Target<'_>,
    tests: [Test<'_>; 2],
    bind: &Bindings<'_>,
) -> Result<Option<(bool, bool)>> {
    let mut args = Vec::new();
    let row = d.quote(&e.name);
    let (view, op) = {
        let mut c = Condition::new(d, &row, bind, &mut args);
        (tests[0].sql(&mut c), tests[1].sql(&mut c))
    };
    let cond = target.condition(d, &mut args);
    let lock = if d == Dialect::Postgres {
        " FOR UPDATE"
    } else {
        ""
    };
    let sql = format!("SELECT {view}, {op} FROM {row} WHERE {cond}{lock}");
    let rows = ex.fetch(&sql, &args, &[ColType::Int, ColType::Int]).await?;
    Ok(rows
        .first()
        .map(|r| (r[0].as_i64() == Some(1), r[1].as_i64() == Some(1))))
}

/// Decides a rule on values that are not stored yet (a create's), references followed.
pub async fn check_new(
    ex: &mut dyn Exec,
    d: Dialect,
    rule: &Expr,
    bind: &Bindings<'_>,
) -> Result<bool> {
    let mut args = Vec::new();
    let test = Test::Expr(rule).sql(&mut Condition::new(d, "", bind, &mut args));
    let rows = ex
        .fetch(&format!("SELECT {test}"), &args, &[ColType::Int])
        .await?;
    Ok(rows.first().and_then(|r| r[0].as_i64()) == Some(1))
}

/// Whether some row of `rule`'s entity that passes it holds `text` in one of its text fields
/// (a stored file's URL: the file belongs to that row).
pub async fn row_mentions(
    ex: &mut dyn Exec,
    d: Dialect,
    rule: &RuleFilter,
    text: &str,
) -> Result<bool> {
    let e = rule.entity.as_ref();
    let mut args = vec![Value::text(text)];
    let find = match d {
        Dialect::Sqlite => "instr",
        Dialect::Postgres => "strpos",
    };
    let fields: Vec<String> = e
        .fields
        .iter()
        .filter(|f| {
            matches!(
                f.ty,
                crate::schema::FieldType::String | crate::schema::FieldType::Text
            )
        })
        .filter(|f| !f.secret)
        .map(|f| format!("COALESCE({find}({}, {}), 0) > 0", d.quote(&f.name), d.ph(1)))
        .collect();
    if fields.is_empty() {
        return Ok(false);
    }
    let cond = rule.sql(d, &mut args);
    let sql = format!(
        "SELECT CAST(1 AS BIGINT) FROM {} WHERE ({}) AND {cond} LIMIT 1",
        d.quote(&e.name),
        fields.join(" OR ")
    );
    Ok(!ex.fetch(&sql, &args, &[ColType::Int]).await?.is_empty())
}

/// The row `id` of `e` when the caller's rule `rule` admits it.
pub async fn get_where(
    ex: &mut dyn Exec,
    d: Dialect,
    e: &Entity,
    id: i64,
    rule: &Expr,
    caller: &CallerValues,
) -> Result<Option<Row>> {
    let mut args = vec![Value::int(id)];
    let bind = Bindings { caller, new: None };
    let row = d.quote(&e.name);
    let cond = Condition::new(d, &row, &bind, &mut args).sql(rule);
    let sql = format!("{} AND {cond}", super::entity::get_sql(d, e));
    Ok(ex.fetch(&sql, &args, &e.col_types()).await?.pop())
}

/// Builds one condition: placeholders are numbered after those already in `args`.
pub struct Condition<'a> {
    d: Dialect,
    /// The alias of the row the rule is about.
    row: &'a str,
    bind: &'a Bindings<'a>,
    args: &'a mut Vec<Value>,
    subqueries: usize,
    /// Whether the part being written is under an odd number of `NOT`s. Elsewhere a null
    /// comparison counts as false (as `WHERE` and `CASE` take it), so comparisons are written
    /// plainly, which lets the database use an index for them.
    negated: bool,
}

impl<'a> Condition<'a> {
    pub fn new(d: Dialect, row: &'a str, bind: &'a Bindings<'a>, args: &'a mut Vec<Value>) -> Self {
        Condition {
            d,
            row,
            bind,
            args,
            subqueries: 0,
            negated: false,
        }
    }

    /// The SQL of `e`, true or false for every row (never null).
    pub fn sql(&mut self, e: &Expr) -> String {
        match e {
            Expr::Or(a, b) => format!("({} OR {})", self.sql(a), self.sql(b)),
            Expr::And(a, b) => format!("({} AND {})", self.sql(a), self.sql(b)),
            Expr::Not(a) => {
                self.negated = !self.negated;
                let inner = self.sql(a);
                self.negated = !self.negated;
                format!("(NOT {inner})")
            }
            Expr::Compare { op, left, right } => self.compare(*op, left, right),
            Expr::In { left, list } => {
                let l = self.value(left);
                let items: Vec<String> = list.iter().map(|o| self.value(o)).collect();
                if self.negated {
                    format!("COALESCE({l} IN ({}), FALSE)", items.join(", "))
                } else {
                    format!("({l} IN ({}))", items.join(", "))
                }
            }
        }
    }

    fn compare(&mut self, op: Cmp, left: &Operand, right: &Operand) -> String {
        let null = |o: &Operand| matches!(o, Operand::Lit(Lit::Null));
        match (op, null(left), null(right)) {
            (Cmp::Eq, _, true) => return format!("({} IS NULL)", self.value(left)),
            (Cmp::Eq, true, _) => return format!("({} IS NULL)", self.value(right)),
            (Cmp::Ne, _, true) => return format!("({} IS NOT NULL)", self.value(left)),
            (Cmp::Ne, true, _) => return format!("({} IS NOT NULL)", self.value(right)),
            _ => {}
        }
        let (l, r) = (self.value(left), self.value(right));
        if !self.negated
            && let Some(sql) = plain(op, &l, &r)
        {
            return sql;
        }
        let same = match self.d {
            Dialect::Sqlite => "IS",
            Dialect::Postgres => "IS NOT DISTINCT FROM",
        };
        match op {
            // Both sides given: equal; one empty: not equal.
            Cmp::Eq => format!("({l} {same} {r} AND {l} IS NOT NULL)"),
            // One side empty and the other given: not equal.
            Cmp::Ne => format!("(NOT ({l} {same} {r}))"),
            Cmp::Lt => format!("COALESCE({l} < {r}, FALSE)"),
            Cmp::Le => format!("COALESCE({l} <= {r}, FALSE)"),
            Cmp::Gt => format!("COALESCE({l} > {r}, FALSE)"),
            Cmp::Ge => format!("COALESCE({l} >= {r}, FALSE)"),
            Cmp::Contains => match self.d {
                Dialect::Sqlite => format!("COALESCE(instr(lower({l}), lower({r})) > 0, FALSE)"),
                Dialect::Postgres => {
                    format!("COALESCE(strpos(lower({l}), lower({r})) > 0, FALSE)")
                }
            },
        }
    }

    fn arg(&mut self, v: Value) -> String {
        self.args.push(v);
        self.d.ph(self.args.len())
    }

    /// The SQL of one operand's value.
    fn value(&mut self, o: &Operand) -> String {
        match o {
            Operand::Lit(Lit::Null) => "NULL".into(),
            Operand::Lit(Lit::Str(s)) => self.arg(Value::text(s.clone())),
            Operand::Lit(Lit::Bool(b)) => self.arg(Value::Bool(Some(*b))),
            Operand::Lit(Lit::Num(n)) => {
                let v = match n.parse::<i64>() {
                    Ok(i) => Value::Int(Some(i)),
                    Err(_) => Value::Decimal(crate::decimal::parse(n).ok()),
                };
                self.arg(v)
            }
            Operand::Path {
                root, steps, kind, ..
            } => self.path(*root, steps, *kind),
        }
    }

    /// A path: its first step read from the row, the caller or the new values, each further
    /// step a subquery on the entity the reference names.
    fn path(&mut self, root: Root, steps: &[Step], kind: Kind) -> String {
        let Some((first, rest)) = steps.split_first() else {
            return "NULL".into();
        };
        let mut at = match root {
            Root::Caller => self.caller_value(&first.field, kind),
            Root::New => self.new_value(&first.field),
            Root::Row if self.bind.new.is_some() && !self.row_exists() => {
                self.new_value(&first.field)
            }
            Root::Row => format!("{}.{}", self.row, self.d.quote(&first.field)),
        };
        let mut entity = target_of(first);
        for step in rest {
            self.subqueries += 1;
            let alias = format!("rule{}", self.subqueries);
            at = format!(
                "(SELECT {alias}.{f} FROM {t} {alias} WHERE {alias}.\"id\" = {at})",
                f = self.d.quote(&step.field),
                t = self.d.quote(&entity),
            );
            entity = target_of(step);
        }
        at
    }

    /// Whether the rule is about a stored row (false for a create, whose row is its values).
    fn row_exists(&self) -> bool {
        !self.row.is_empty()
    }

    fn caller_value(&mut self, field: &str, _kind: Kind) -> String {
        let c = self.bind.caller;
        match field {
            "id" => self.arg(Value::Int(Some(c.id))),
            "role" => self.arg(Value::text(c.role.clone())),
            "login" => self.arg(Value::text(c.login.clone())),
            other => {
                self.subqueries += 1;
                let alias = format!("rule{}", self.subqueries);
                let id = self.arg(Value::Int(Some(c.id)));
                format!(
                    "(SELECT {alias}.{f} FROM \"users\" {alias} WHERE {alias}.\"id\" = {id})",
                    f = self.d.quote(other)
                )
            }
        }
    }

    fn new_value(&mut self, field: &str) -> String {
        let given = self
            .bind
            .new
            .and_then(|n| n.iter().find(|(f, _)| f == field))
            .map(|(_, v)| v.clone());
        match given {
            Some(v) => self.arg(v),
            None if self.row_exists() => format!("{}.{}", self.row, self.d.quote(field)),
            None => "NULL".into(),
        }
    }
}

/// A comparison as plain SQL, where a null result may count as false: equality and order
/// (which an index serves), but not `!=` (which holds between an empty and a given value) or
/// `~`.
fn plain(op: Cmp, l: &str, r: &str) -> Option<String> {
    let sym = match op {
        Cmp::Eq => "=",
        Cmp::Lt => "<",
        Cmp::Le => "<=",
        Cmp::Gt => ">",
        Cmp::Ge => ">=",
        Cmp::Ne | Cmp::Contains => return None,
    };
    Some(format!("({l} {sym} {r})"))
}

/// The entity a reference step leads to (a checked path has one on every step but the last).
fn target_of(step: &Step) -> String {
    step.target.clone().unwrap_or_else(|| step.entity.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::rules::{Fields, check, parse};
    use crate::schema::{Field, FieldType};
    use std::collections::BTreeMap;

    fn field(name: &str, ty: FieldType) -> Field {
        Field::new(name, ty)
    }

    fn catalog() -> BTreeMap<String, Vec<Field>> {
        BTreeMap::from([
            (
                "users".to_string(),
                vec![
                    field("login", FieldType::String),
                    field("role", FieldType::String),
                ],
            ),
            (
                "campaigns".to_string(),
                vec![
                    field("name", FieldType::String),
                    field("owner_id", FieldType::Reference("users".into())),
                ],
            ),
            (
                "markers".to_string(),
                vec![
                    field("name", FieldType::String),
                    field("campaign_id", FieldType::Reference("campaigns".into())),
                ],
            ),
        ])
    }

    fn db() -> rusqlite::Connection {
        let c = rusqlite::Connection::open_in_memory().unwrap();
        c.execute_batch(
            "CREATE TABLE users (id INTEGER PRIMARY KEY, login TEXT, role TEXT);
             CREATE TABLE campaigns (id INTEGER PRIMARY KEY, name TEXT, owner_id INTEGER);
             CREATE TABLE markers (id INTEGER PRIMARY KEY, name TEXT, campaign_id INTEGER);
             INSERT INTO users VALUES (1, 'ann', 'editor'), (2, 'bob', 'user');
             INSERT INTO campaigns VALUES (10, 'Spring sale', 1), (11, 'bob''s', 2), (12, 'nobody', NULL);
             INSERT INTO markers VALUES (100, 'a', 10), (101, 'b', 11), (102, 'c', 12), (103, 'd', NULL);",
        )
        .unwrap();
        c
    }

    /// The ids of `entity`'s rows for which `rule` holds for caller `caller_id` (`role`).
    fn rows(entity: &str, rule: &str, caller_id: i64, role: &str) -> Vec<i64> {
        let e = check(
            parse(rule).unwrap(),
            entity,
            false,
            &catalog() as &dyn Fields,
        )
        .unwrap();
        let caller = CallerValues {
            id: caller_id,
            role: role.to_string(),
            login: String::new(),
        };
        let bind = Bindings {
            caller: &caller,
            new: None,
        };
        let mut args = Vec::new();
        let cond = Condition::new(Dialect::Sqlite, "r0", &bind, &mut args).sql(&e);
        let sql = format!("SELECT r0.id FROM {entity} r0 WHERE {cond} ORDER BY r0.id");
        let c = db();
        let mut st = c.prepare(&sql).unwrap();
        let params: Vec<Box<dyn rusqlite::ToSql>> = args
            .into_iter()
            .map(|v| -> Box<dyn rusqlite::ToSql> {
                match v {
                    Value::Int(i) => Box::new(i),
                    Value::Text(t) => Box::new(t),
                    Value::Bool(b) => Box::new(b),
                    Value::Float(f) => Box::new(f),
                    Value::Decimal(d) => Box::new(d.map(|d| d.to_string())),
                }
            })
            .collect();
        let refs: Vec<&dyn rusqlite::ToSql> = params.iter().map(|b| b.as_ref()).collect();
        st.query_map(refs.as_slice(), |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    #[test]
    fn a_rule_selects_the_rows_it_admits() {
        assert_eq!(rows("campaigns", "owner_id = @caller.id", 1, "user"), [10]);
        assert_eq!(
            rows(
                "campaigns",
                "owner_id = @caller.id || @caller.role = 'editor'",
                2,
                "editor"
            ),
            [10, 11, 12]
        );
        assert_eq!(rows("campaigns", "owner_id = null", 1, "user"), [12]);
        assert_eq!(
            rows("campaigns", "owner_id != @caller.id", 1, "user"),
            [11, 12]
        );
        assert_eq!(rows("campaigns", "name ~ 'SPRING'", 1, "user"), [10]);
        assert_eq!(
            rows("campaigns", "name in ('nobody', 'x')", 1, "user"),
            [12]
        );
        assert_eq!(
            rows("campaigns", "!(owner_id = @caller.id)", 1, "user"),
            [11, 12]
        );
    }

    #[test]
    fn references_are_followed_and_an_empty_one_compares_as_null() {
        assert_eq!(
            rows("markers", "campaign_id.owner_id = @caller.id", 2, "user"),
            [101]
        );
        assert_eq!(
            rows("markers", "campaign_id.owner_id.login = 'ann'", 2, "user"),
            [100]
        );
        assert_eq!(
            rows("markers", "campaign_id.owner_id = null", 2, "user"),
            [102, 103]
        );
    }
}
