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

mod check;
mod eval;
mod parse;

pub use check::{Fields, check, kind_of};
pub use eval::{CALLER_KNOWN, Lookup};
pub use parse::parse;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Field, FieldType};
    use std::collections::BTreeMap;

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
            move |_: Root, path: &[String]| match path.join(".").as_str() {
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
