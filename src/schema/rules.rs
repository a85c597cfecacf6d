//! Access rules per record: the language of an entity's `list`, `view`, `create`, `update` and
//! `delete` rules. A rule is `public`, a list of roles, or an expression over the entity's
//! fields, the caller (`@caller.id`, `@caller.role`, `@caller.<users field>`) and, in `create`
//! and `update`, the values after the change (`@new.<field>`). Reference fields are followed
//! with dots (`campaign_id.owner_id`), at any depth.
//!
//! Parsing keeps each operand's position, so a mistake is reported with the nearest name; the
//! checked form names, for every path, the entities and fields it goes through and the type it
//! ends in. Turning a checked rule into SQL is the storage layer's work
//! ([`crate::storage::rules`]); a rule that reads the caller alone ([`Expr::caller_only`]) is
//! decided without rows ([`Expr::holds_for`]).

use super::{Field, FieldType, format};
use std::collections::BTreeMap;

/// One of the five rules, as an entity states it.
#[derive(Debug, Clone, PartialEq)]
pub enum Rule {
    /// No credentials needed.
    Public,
    /// Callers whose role is one of these (admins always pass).
    Roles(Vec<String>),
    /// Rows (or changes) for which the expression holds (admins always pass).
    Expr(Expr),
}

/// Where a path starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Root {
    /// The row itself (in `create`, the values it will have).
    Row,
    /// The values after the change (`@new.`).
    New,
    /// The signed-in user (`@caller.`).
    Caller,
}

/// A literal value.
#[derive(Debug, Clone, PartialEq)]
pub enum Lit {
    Str(String),
    /// A number as written (integers and decimals alike).
    Num(String),
    Bool(bool),
    Null,
}

/// One step of a checked path: the entity and the field read there, and the entity that
/// field refers to when it is a reference.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub entity: String,
    pub field: String,
    pub target: Option<String>,
}

/// What a value compares as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Text,
    Number,
    Bool,
    /// `null`: compares with anything by `=` and `!=`.
    Null,
}

/// An operand of a comparison.
#[derive(Debug, Clone, PartialEq)]
pub enum Operand {
    /// `root.a.b`: filled in by [`check`] with its steps and kind.
    Path {
        root: Root,
        names: Vec<String>,
        at: usize,
        steps: Vec<Step>,
        kind: Kind,
    },
    Lit(Lit),
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// `~`: contains, case-insensitive.
    Contains,
}

/// A rule expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Or(Box<Expr>, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Compare {
        op: Cmp,
        left: Operand,
        right: Operand,
    },
    In {
        left: Operand,
        list: Vec<Operand>,
    },
}

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

/// A mistake in a rule: the message, and the byte offset it is about.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleError {
    pub at: usize,
    pub message: String,
}

fn fail<T>(at: usize, message: impl Into<String>) -> Result<T, RuleError> {
    Err(RuleError {
        at,
        message: message.into(),
    })
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Name(String),
    At(String),
    Str(String),
    Num(String),
    Op(&'static str),
    LParen,
    RParen,
    Comma,
    Dot,
}

fn lex(text: &str) -> Result<Vec<(Tok, usize)>, RuleError> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        let name_char = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
        let tok = match c {
            _ if c.is_ascii_whitespace() => {
                i += 1;
                continue;
            }
            b'(' => Tok::LParen,
            b')' => Tok::RParen,
            b',' => Tok::Comma,
            b'.' => Tok::Dot,
            b'\'' | b'"' => {
                let end = text[i + 1..].find(c as char).ok_or_else(|| RuleError {
                    at: start,
                    message: "a text is never closed".into(),
                })?;
                i += end + 2;
                out.push((
                    Tok::Str(text[start + 1..start + 1 + end].to_string()),
                    start,
                ));
                continue;
            }
            b'@' => {
                i += 1;
                while i < b.len() && name_char(b[i]) {
                    i += 1;
                }
                out.push((Tok::At(text[start + 1..i].to_string()), start));
                continue;
            }
            _ if c.is_ascii_digit()
                || (c == b'-' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) =>
            {
                i += 1;
                while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
                    i += 1;
                }
                out.push((Tok::Num(text[start..i].to_string()), start));
                continue;
            }
            _ if name_char(c) => {
                while i < b.len() && name_char(b[i]) {
                    i += 1;
                }
                out.push((Tok::Name(text[start..i].to_string()), start));
                continue;
            }
            _ => {
                let op = ["&&", "||", "!=", "<=", ">=", "=", "<", ">", "~", "!"]
                    .into_iter()
                    .find(|op| text[i..].starts_with(op));
                match op {
                    Some(op) => {
                        i += op.len();
                        out.push((Tok::Op(op), start));
                        continue;
                    }
                    None => return fail(start, format!("unexpected `{}`", c as char)),
                }
            }
        };
        i += 1;
        out.push((tok, start));
    }
    Ok(out)
}

struct Parser {
    toks: Vec<(Tok, usize)>,
    pos: usize,
    end: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|(t, _)| t)
    }

    fn at(&self) -> usize {
        self.toks.get(self.pos).map_or(self.end, |(_, a)| *a)
    }

    fn eat(&mut self, t: &Tok) -> bool {
        if self.peek() == Some(t) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn or(&mut self) -> Result<Expr, RuleError> {
        let mut left = self.and()?;
        while self.eat(&Tok::Op("||")) {
            left = Expr::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr, RuleError> {
        let mut left = self.unary()?;
        while self.eat(&Tok::Op("&&")) {
            left = Expr::And(Box::new(left), Box::new(self.unary()?));
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, RuleError> {
        if self.eat(&Tok::Op("!")) {
            return Ok(Expr::Not(Box::new(self.unary()?)));
        }
        if self.eat(&Tok::LParen) {
            let inner = self.or()?;
            if !self.eat(&Tok::RParen) {
                return fail(self.at(), "a `(` is never closed");
            }
            return Ok(inner);
        }
        self.comparison()
    }

    fn comparison(&mut self) -> Result<Expr, RuleError> {
        let left = self.operand()?;
        if matches!(self.peek(), Some(Tok::Name(n)) if n == "in") {
            self.pos += 1;
            return Ok(Expr::In {
                left,
                list: self.list()?,
            });
        }
        let op = match self.peek() {
            Some(Tok::Op("=")) => Cmp::Eq,
            Some(Tok::Op("!=")) => Cmp::Ne,
            Some(Tok::Op("<")) => Cmp::Lt,
            Some(Tok::Op("<=")) => Cmp::Le,
            Some(Tok::Op(">")) => Cmp::Gt,
            Some(Tok::Op(">=")) => Cmp::Ge,
            Some(Tok::Op("~")) => Cmp::Contains,
            _ => {
                return fail(
                    self.at(),
                    "expected a comparison (`=`, `!=`, `<`, `<=`, `>`, `>=`, `~` or `in`)",
                );
            }
        };
        self.pos += 1;
        let right = self.operand()?;
        Ok(Expr::Compare { op, left, right })
    }

    fn list(&mut self) -> Result<Vec<Operand>, RuleError> {
        if !self.eat(&Tok::LParen) {
            return fail(
                self.at(),
                "`in` takes a list in parentheses: `in ('a', 'b')`",
            );
        }
        let mut items = vec![self.operand()?];
        while self.eat(&Tok::Comma) {
            items.push(self.operand()?);
        }
        if !self.eat(&Tok::RParen) {
            return fail(self.at(), "the list of `in` is never closed");
        }
        Ok(items)
    }

    fn operand(&mut self) -> Result<Operand, RuleError> {
        let at = self.at();
        let Some((tok, _)) = self.toks.get(self.pos).cloned() else {
            return fail(at, "the rule ends where a value was expected");
        };
        self.pos += 1;
        let (root, first) = match tok {
            Tok::Str(s) => return Ok(Operand::Lit(Lit::Str(s))),
            Tok::Num(n) => return Ok(Operand::Lit(Lit::Num(n))),
            Tok::Name(n) if n == "true" || n == "false" => {
                return Ok(Operand::Lit(Lit::Bool(n == "true")));
            }
            Tok::Name(n) if n == "null" => return Ok(Operand::Lit(Lit::Null)),
            Tok::Name(n) => (Root::Row, Some(n)),
            Tok::At(a) if a == "caller" => (Root::Caller, None),
            Tok::At(a) if a == "new" => (Root::New, None),
            Tok::At(a) => {
                return fail(
                    at,
                    format::with_hint(
                        format!("unknown `@{a}`: use `@caller` or `@new`"),
                        &a,
                        ["caller", "new"],
                    ),
                );
            }
            _ => return fail(at, "expected a field, `@caller.`, `@new.` or a value"),
        };
        let mut names: Vec<String> = first.into_iter().collect();
        while names.is_empty() || self.peek() == Some(&Tok::Dot) {
            if (!names.is_empty() || root != Root::Row) && !self.eat(&Tok::Dot) {
                return fail(self.at(), "expected `.` and a field name");
            }
            match self.toks.get(self.pos) {
                Some((Tok::Name(n), _)) => {
                    names.push(n.clone());
                    self.pos += 1;
                }
                _ => return fail(self.at(), "expected a field name after `.`"),
            }
        }
        Ok(Operand::Path {
            root,
            names,
            at,
            steps: Vec::new(),
            kind: Kind::Null,
        })
    }
}

/// Parses a rule's value: `public`, a list of roles, or an expression (not yet checked).
pub fn parse(text: &str) -> Result<Expr, RuleError> {
    let toks = lex(text)?;
    if toks.is_empty() {
        return fail(0, "the rule is empty");
    }
    let mut p = Parser {
        toks,
        pos: 0,
        end: text.len(),
    };
    let e = p.or()?;
    if p.pos < p.toks.len() {
        return fail(
            p.at(),
            "unexpected text after the rule (join rules with `&&` or `||`)",
        );
    }
    Ok(e)
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Field;

    fn field(name: &str, ty: FieldType) -> Field {
        Field::new(name, ty)
    }

    fn catalog() -> BTreeMap<String, Vec<Field>> {
        let mut c = BTreeMap::new();
        c.insert(
            "users".to_string(),
            vec![
                field("login", FieldType::String),
                field("role", FieldType::Enum(vec!["admin".into(), "user".into()])),
                {
                    let mut f = field("password", FieldType::String);
                    f.secret = true;
                    f
                },
            ],
        );
        c.insert(
            "campaigns".to_string(),
            vec![
                field("name", FieldType::String),
                field("owner_id", FieldType::Reference("users".into())),
                field("public", FieldType::Boolean),
            ],
        );
        c.insert(
            "markers".to_string(),
            vec![
                field("name", FieldType::String),
                field("campaign_id", FieldType::Reference("campaigns".into())),
                field("page", FieldType::Integer),
            ],
        );
        c
    }

    fn checked(entity: &str, text: &str) -> Result<Expr, RuleError> {
        check(parse(text)?, entity, true, &catalog())
    }

    #[test]
    fn parses_the_contracts_examples() {
        for text in [
            "owner_id = @caller.id || @caller.role = 'editor'",
            "@caller.role != 'guest'",
            "owner_id = @caller.id && @caller.role = \"editor\"",
            "!(public = false) && name ~ 'spring'",
            "@caller.role in ('user', 'editor')",
            "owner_id != null",
            "@new.owner_id = @caller.id",
        ] {
            checked("campaigns", text).unwrap_or_else(|e| panic!("{text}: {e:?}"));
        }
    }

    #[test]
    fn follows_references_at_any_depth() {
        let e = checked("markers", "campaign_id.owner_id.login = @caller.login").unwrap();
        let Expr::Compare { left, .. } = e else {
            panic!("{e:?}")
        };
        let Operand::Path { steps, kind, .. } = left else {
            panic!()
        };
        let shown: Vec<(&str, &str)> = steps
            .iter()
            .map(|s| (s.entity.as_str(), s.field.as_str()))
            .collect();
        assert_eq!(
            shown,
            [
                ("markers", "campaign_id"),
                ("campaigns", "owner_id"),
                ("users", "login")
            ]
        );
        assert_eq!(kind, Kind::Text);
    }

    #[test]
    fn names_the_nearest_field_and_where() {
        let e = checked("campaigns", "ownr_id = @caller.id").unwrap_err();
        assert_eq!(e.at, 0);
        assert!(e.message.contains("did you mean `owner_id`?"), "{e:?}");
        let e = checked("campaigns", "owner_id = @caller.idd").unwrap_err();
        assert_eq!(e.at, 11);
        assert!(e.message.contains("`idd` is not a field of users"), "{e:?}");
        let e = checked("campaigns", "owner_id = @calr.id").unwrap_err();
        assert!(e.message.contains("did you mean `caller`?"), "{e:?}");
    }

    #[test]
    fn a_rule_of_the_caller_alone_is_decided_without_rows() {
        let role = |r: &'static str| {
            move |path: &str| match path {
                "role" => Some(serde_json::json!(r)),
                "id" => Some(serde_json::json!(7)),
                _ => None,
            }
        };
        let e = checked("campaigns", "@caller.role != 'guest'").unwrap();
        assert!(e.caller_only());
        assert!(e.holds_for(&role("user")));
        assert!(!e.holds_for(&role("guest")));
        let e = checked(
            "campaigns",
            "@caller.role in ('editor', 'user') && @caller.id > 5",
        )
        .unwrap();
        assert!(e.holds_for(&role("user")));
        assert!(!e.holds_for(&role("guest")));
        let e = checked("campaigns", "@caller.login = null").unwrap();
        assert!(e.holds_for(&role("user")), "no login: empty");
        assert!(
            !checked("campaigns", "owner_id = @caller.id")
                .unwrap()
                .caller_only()
        );
    }

    #[test]
    fn refuses_mismatched_types_and_misplaced_parts() {
        for (text, says) in [
            ("owner_id = 'bob'", "compares a number with a text"),
            ("public = 1", "compares true or false with a number"),
            ("public < true", "no order"),
            ("name ~ 3", "compares a text with a number"),
            ("name > null", "`null` compares only"),
            ("name.owner_id = 1", "not a reference"),
            ("@caller.password = 'x'", "secret"),
            ("name = 'a' name = 'b'", "unexpected text"),
            ("name = 'open", "never closed"),
            ("(name = 'a'", "never closed"),
            ("name", "expected a comparison"),
            ("", "empty"),
        ] {
            let e = checked("campaigns", text).unwrap_err();
            assert!(e.message.contains(says), "{text}: {e:?}");
        }
        let e = check(
            parse("@new.name = 'a'").unwrap(),
            "campaigns",
            false,
            &catalog(),
        )
        .unwrap_err();
        assert!(
            e.message.contains("only known in `create` and `update`"),
            "{e:?}"
        );
    }
}
