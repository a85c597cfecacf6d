//! An entity's `access`: five rules (`list`, `view`, `create`, `update`, `delete`), each
//! `public`, a list of roles or an expression ([`super::rules`]), with the shorthands `read`
//! (list and view) and `write` (create, update and delete). A rule left out admits admins
//! only; an entity without `access` is read and written by every signed-in user.

use super::format::{self, ACCESS_KEYS};
use super::raw::{Sink, is_identifier};
use super::rules::{self, Fields, Rule};
use serde_yaml::Value as Yaml;

/// What a rule decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    List,
    View,
    Create,
    Update,
    Delete,
}

impl Action {
    pub const ALL: [Action; 5] = [
        Action::List,
        Action::View,
        Action::Create,
        Action::Update,
        Action::Delete,
    ];

    /// Its key in `access`.
    pub fn key(self) -> &'static str {
        match self {
            Action::List => "list",
            Action::View => "view",
            Action::Create => "create",
            Action::Update => "update",
            Action::Delete => "delete",
        }
    }

    fn at(self) -> usize {
        self as usize
    }

    /// Whether its expressions may read the values after the change (`@new.`).
    fn sees_new(self) -> bool {
        matches!(self, Action::Create | Action::Update)
    }
}

/// Who may do what with an entity's rows.
#[derive(Debug, Clone)]
pub struct Access {
    rules: [Rule; 5],
    /// Each rule as written (`[admin]` when left out).
    written: [String; 5],
}

impl Access {
    /// The rule of `a`.
    pub fn rule(&self, a: Action) -> &Rule {
        &self.rules[a.at()]
    }

    /// The rule of `a` as the entity file writes it.
    pub fn written(&self, a: Action) -> &str {
        &self.written[a.at()]
    }

    /// Every field of the entity's own rows that a `list` or `view` expression reads: those
    /// columns are indexed, so that no rule turns a list into a scan.
    pub fn row_fields(&self) -> Vec<String> {
        let mut out = Vec::new();
        for a in [Action::List, Action::View] {
            if let Rule::Expr(e) = self.rule(a) {
                e.row_fields(&mut out);
            }
        }
        out.sort();
        out.dedup();
        out
    }
}

/// One rule as written, before it is checked.
#[derive(Debug, Clone)]
enum RawRule {
    Public,
    Roles(Vec<String>),
    Expr(String),
}

/// `access` as written: each rule with the key it came from (its own, or a shorthand's).
#[derive(Debug, Clone, Default)]
pub struct RawAccess {
    rules: [Option<(RawRule, &'static str)>; 5],
}

/// Reads `access`; problems go to `sink` with their key path.
pub fn read(v: Option<&Yaml>, sink: &mut Sink) -> RawAccess {
    let Some(v) = v else {
        let user = || Some((RawRule::Roles(vec!["user".into()]), "access"));
        return RawAccess {
            rules: [user(), user(), user(), user(), user()],
        };
    };
    let mut raw = RawAccess::default();
    let Some(m) = v.as_mapping() else {
        sink.push(
            &["access"],
            "`access` must be a mapping like { read: user, write: admin }",
        );
        return raw;
    };
    let mut own: Vec<String> = Vec::new();
    // Shorthands first, so that a rule of its own overrides them whatever the order.
    for key in ["read", "write", "own"] {
        let Some(v) = m.get(key) else { continue };
        if key == "own" {
            own = read_own(v, sink);
            continue;
        }
        let Some(rule) = read_rule(key, v, sink) else {
            continue;
        };
        let (actions, key): (&[Action], &'static str) = if key == "read" {
            (&[Action::List, Action::View], "read")
        } else {
            (&[Action::Create, Action::Update, Action::Delete], "write")
        };
        for a in actions {
            raw.rules[a.at()] = Some((rule.clone(), key));
        }
    }
    for (k, v) in m {
        let key = k.as_str().unwrap_or("");
        match Action::ALL.iter().find(|a| a.key() == key) {
            Some(a) => {
                if let Some(rule) = read_rule(key, v, sink) {
                    raw.rules[a.at()] = Some((rule, a.key()));
                }
            }
            None if matches!(key, "read" | "write" | "own") => {}
            None => sink.push(
                &["access", key],
                format::with_hint(
                    format!("unknown key `access.{key}`"),
                    key,
                    ACCESS_KEYS.iter().map(|k| k.name),
                ),
            ),
        }
    }
    for op in own {
        let actions: &[Action] = if op == "read" {
            &[Action::List, Action::View]
        } else {
            &[Action::Update]
        };
        for a in actions {
            let slot = &mut raw.rules[a.at()];
            *slot = Some(with_own(slot.take()));
        }
    }
    raw
}

/// `own: [read, update]`: the user's own record (in `users`) besides what the rule admits.
fn read_own(v: &Yaml, sink: &mut Sink) -> Vec<String> {
    let Some(ops) = v.as_sequence() else {
        sink.push(
            &["access", "own"],
            "`access.own` must be a list such as [read, update]",
        );
        return Vec::new();
    };
    let mut out = Vec::new();
    for op in ops {
        match op.as_str() {
            Some(s @ ("read" | "update")) => out.push(s.to_string()),
            _ => sink.push(
                &["access", "own"],
                "`access.own` lists `read` and/or `update`",
            ),
        }
    }
    out
}

/// A rule that also admits the caller's own record.
fn with_own(rule: Option<(RawRule, &'static str)>) -> (RawRule, &'static str) {
    let own = "id = @caller.id";
    match rule {
        None => (RawRule::Expr(own.into()), "own"),
        Some((RawRule::Public, k)) => (RawRule::Public, k),
        Some((RawRule::Roles(roles), k)) => {
            let quoted: Vec<String> = roles.iter().map(|r| format!("'{r}'")).collect();
            let text = format!("@caller.role in ({}) || {own}", quoted.join(", "));
            (RawRule::Expr(text), k)
        }
        Some((RawRule::Expr(e), k)) => (RawRule::Expr(format!("({e}) || {own}")), k),
    }
}

/// One rule's value: `public`, a role, a list of roles, or an expression.
fn read_rule(key: &str, v: &Yaml, sink: &mut Sink) -> Option<RawRule> {
    match v {
        Yaml::String(s) if s.trim() == "public" => Some(RawRule::Public),
        Yaml::String(s) if is_identifier(s.trim()) => Some(RawRule::Roles(vec![s.trim().into()])),
        Yaml::String(s) => Some(RawRule::Expr(s.clone())),
        Yaml::Sequence(items) => {
            let roles: Vec<String> = items
                .iter()
                .filter_map(Yaml::as_str)
                .filter(|s| is_identifier(s))
                .map(str::to_string)
                .collect();
            if roles.len() == items.len() {
                Some(RawRule::Roles(roles))
            } else {
                sink.push(
                    &["access", key],
                    format!("`access.{key}` lists roles, such as [user, editor]"),
                );
                None
            }
        }
        _ => {
            sink.push(
                &["access", key],
                format!(
                    "`access.{key}` must be `public`, a role, a list of roles or an expression \
                     such as `owner_id = @caller.id`"
                ),
            );
            None
        }
    }
}

/// A problem with a rule: the `access` key it was written under, and the message.
pub struct RuleProblem {
    pub key: &'static str,
    pub message: String,
}

/// Checks every rule of `entity` against the catalog's fields (`catalog`) and the roles the
/// users entity knows (`roles`).
pub fn compile(
    raw: &RawAccess,
    entity: &str,
    catalog: &dyn Fields,
    roles: &[String],
) -> Result<Access, Vec<RuleProblem>> {
    let mut problems = Vec::new();
    let mut rules: [Rule; 5] = std::array::from_fn(|_| Rule::Roles(Vec::new()));
    let mut written: [String; 5] = std::array::from_fn(|_| "[admin]".to_string());
    for a in Action::ALL {
        let Some((rule, key)) = &raw.rules[a.at()] else {
            continue;
        };
        let mut fail = |message: String| {
            problems.push(RuleProblem {
                key,
                message: format!("`access.{}`: {message}", a.key()),
            })
        };
        rules[a.at()] = match rule {
            RawRule::Public => Rule::Public,
            RawRule::Roles(names) => {
                for r in names.iter().filter(|r| !roles.contains(r)) {
                    fail(format::with_hint(
                        format!(
                            "`{r}` is not a role (the roles are the values of users' `role`: {})",
                            roles.join(", ")
                        ),
                        r,
                        roles.iter().map(String::as_str),
                    ));
                }
                Rule::Roles(names.clone())
            }
            RawRule::Expr(text) => {
                let checked =
                    rules::parse(text).and_then(|e| rules::check(e, entity, a.sees_new(), catalog));
                match checked {
                    Ok(e) => Rule::Expr(e),
                    Err(e) => {
                        fail(format!("{} (at `{}`)", e.message, excerpt(text, e.at)));
                        continue;
                    }
                }
            }
        };
        written[a.at()] = match rule {
            RawRule::Public => "public".to_string(),
            RawRule::Roles(names) => format!("[{}]", names.join(", ")),
            RawRule::Expr(text) => text.trim().to_string(),
        };
    }
    if problems.is_empty() {
        Ok(Access { rules, written })
    } else {
        Err(problems)
    }
}

/// The rule's text from byte `at`, a few words of it.
fn excerpt(text: &str, at: usize) -> String {
    let rest = text.get(at..).unwrap_or(text).trim();
    let mut out: String = rest.chars().take(30).collect();
    if rest.chars().count() > 30 {
        out.push_str("...");
    }
    out
}
