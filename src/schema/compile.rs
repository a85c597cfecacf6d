//! `compile()`: every entity YAML file of a directory becomes one validated [`Catalog`], or the
//! full list of problems, each as `file:line: message`.

use super::locate::Locator;
use super::raw::{self, RawEntity};
use super::yaml_error::yaml_problem;
use super::{Catalog, Entity, Field, FieldType, json_schema, value};
use serde_json::Value as Json;
use serde_yaml::Value as Yaml;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The users entity used when the directory does not define one: authentication needs it.
const BUILTIN_USERS: &str = include_str!("../../entities/users.yaml");

/// One problem found in an entity file.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    pub file: PathBuf,
    pub line: usize,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file.display(), self.line, self.message)
    }
}

/// Compiles every `*.yaml`/`*.yml` file of `dir`.
pub fn compile_dir(dir: &Path, known_plugins: &[&str]) -> Result<Catalog, Vec<Diagnostic>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            return Err(vec![Diagnostic {
                file: dir.to_path_buf(),
                line: 0,
                message: format!("cannot read the entities directory: {e}"),
            }]);
        }
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file() && matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml"))
        })
        .collect();
    paths.sort();
    let mut sources = Vec::new();
    let mut diags = Vec::new();
    for p in paths {
        match std::fs::read_to_string(&p) {
            Ok(text) => sources.push((p, text)),
            Err(e) => diags.push(Diagnostic {
                file: p,
                line: 0,
                message: format!("cannot read: {e}"),
            }),
        }
    }
    match compile_sources(&sources, known_plugins) {
        Ok(c) if diags.is_empty() => Ok(c),
        Ok(_) => Err(diags),
        Err(mut more) => {
            diags.append(&mut more);
            Err(diags)
        }
    }
}

/// Compiles entity definitions given as `(path, text)` pairs.
pub fn compile_sources(
    sources: &[(PathBuf, String)],
    known_plugins: &[&str],
) -> Result<Catalog, Vec<Diagnostic>> {
    let mut diags = Vec::new();
    let mut parsed: Vec<(RawEntity, PathBuf, Locator)> = Vec::new();
    for (path, text) in sources {
        read_one(path, text, &mut parsed, &mut diags);
    }
    if !parsed.iter().any(|(e, _, _)| e.name == "users") {
        read_one(
            Path::new("<built-in users.yaml>"),
            BUILTIN_USERS,
            &mut parsed,
            &mut diags,
        );
    }
    let names: Vec<String> = parsed.iter().map(|(e, _, _)| e.name.clone()).collect();
    for (i, (e, path, loc)) in parsed.iter().enumerate() {
        let mut here = |keys: &[&str], message: String| {
            diags.push(Diagnostic {
                file: path.clone(),
                line: loc.line(keys),
                message,
            })
        };
        if names[..i].contains(&e.name) {
            here(&["name"], format!("entity `{}` is defined twice", e.name));
        }
        for f in &e.fields {
            if let FieldType::Reference(target) = &f.ty
                && !target.is_empty()
                && !names.contains(target)
            {
                here(
                    &["fields", &f.name, "entity"],
                    super::format::with_hint(
                        format!("field `{}` references unknown entity `{target}`", f.name),
                        target,
                        names.iter().map(String::as_str),
                    ),
                );
            }
        }
        for p in &e.plugins {
            if !known_plugins.contains(&p.name.as_str()) {
                here(
                    &["plugins"],
                    super::format::with_hint(
                        format!("unknown plugin `{}`", p.name),
                        &p.name,
                        known_plugins.iter().copied(),
                    ),
                );
            }
        }
        if e.name == "users" {
            check_users(e, &mut here);
        }
    }
    let access = compile_access(&parsed, &mut diags);
    if !diags.is_empty() {
        return Err(diags);
    }
    let order = match dependency_order(&parsed) {
        Ok(o) => o,
        Err(d) => return Err(vec![d]),
    };
    let entities = build_all(&parsed, order, access, sources, &mut diags);
    if diags.is_empty() {
        Ok(Catalog {
            entities,
            changed_elsewhere: Default::default(),
        })
    } else {
        Err(diags)
    }
}

/// Builds the entities of `parsed` in `order` (those whose access compiled), with their hook
/// files; problems go to `diags`.
fn build_all(
    parsed: &[(RawEntity, PathBuf, Locator)],
    order: Vec<usize>,
    access: Vec<Option<super::Access>>,
    sources: &[(PathBuf, String)],
    diags: &mut Vec<Diagnostic>,
) -> super::Entities {
    let mut entities = super::Entities::default();
    for i in order {
        let (raw, path, loc) = &parsed[i];
        let Some(access) = access[i].clone() else {
            continue;
        };
        let hooks = match hook_file(raw, path, loc, sources) {
            Ok(h) => h,
            Err(d) => {
                diags.push(d);
                continue;
            }
        };
        match build(raw, path, loc, access) {
            Ok(mut e) => {
                e.hooks = hooks;
                entities.insert(e.name.clone(), Arc::new(e));
            }
            Err(msg) => diags.push(Diagnostic {
                file: path.clone(),
                line: 1,
                message: msg,
            }),
        }
    }
    entities
}

fn read_one(
    path: &Path,
    text: &str,
    parsed: &mut Vec<(RawEntity, PathBuf, Locator)>,
    diags: &mut Vec<Diagnostic>,
) {
    let doc: Yaml = match serde_yaml::from_str(text) {
        Ok(d) => d,
        Err(e) => {
            let (line, message) = yaml_problem(&e, text);
            diags.push(Diagnostic {
                file: path.to_path_buf(),
                line,
                message: format!("invalid YAML: {message}"),
            });
            return;
        }
    };
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    let loc = Locator::new(text);
    let (entity, problems) = raw::read(&doc, stem);
    for p in problems {
        let keys: Vec<&str> = p.path.iter().map(String::as_str).collect();
        diags.push(Diagnostic {
            file: path.to_path_buf(),
            line: loc.line(&keys),
            message: p.message,
        });
    }
    // Kept even with problems, so that cross-entity checks report theirs too; nothing is
    // built while any diagnostic stands.
    if let Some(e) = entity {
        parsed.push((e, path.to_path_buf(), loc));
    }
}

/// The roles: the values of the users entity's `role` field.
fn roles_of(parsed: &[(RawEntity, PathBuf, Locator)]) -> Vec<String> {
    let users = parsed.iter().find(|(e, _, _)| e.name == "users");
    let role = users.and_then(|(e, _, _)| e.fields.iter().find(|f| f.name == "role"));
    match role.map(|f| &f.ty) {
        Some(FieldType::Enum(values)) => values.clone(),
        _ => vec!["admin".into(), "user".into()],
    }
}

/// Every entity's rules checked against the fields of all and the roles, by position in
/// `parsed` (`None` where a rule has a problem, which is in `diags`). A field's `write` role
/// is checked here too.
fn compile_access(
    parsed: &[(RawEntity, PathBuf, Locator)],
    diags: &mut Vec<Diagnostic>,
) -> Vec<Option<super::Access>> {
    let fields: std::collections::BTreeMap<String, Vec<Field>> = parsed
        .iter()
        .map(|(e, _, _)| (e.name.clone(), e.fields.clone()))
        .collect();
    let roles = roles_of(parsed);
    let mut out = Vec::with_capacity(parsed.len());
    for (e, path, loc) in parsed {
        for f in &e.fields {
            if let Some(r) = &f.write_role
                && !roles.iter().any(|x| x == r.as_str())
            {
                diags.push(Diagnostic {
                    file: path.clone(),
                    line: loc.line(&["fields", &f.name, "write"]),
                    message: super::format::with_hint(
                        format!("field `{}`: `{}` is not a role", f.name, r.as_str()),
                        r.as_str(),
                        roles.iter().map(String::as_str),
                    ),
                });
            }
        }
        match super::access::compile(&e.access, &e.name, &fields, &roles) {
            Ok(a) => out.push(Some(a)),
            Err(problems) => {
                out.push(None);
                for p in problems {
                    let keys: &[&str] = if p.key == "access" {
                        &["access"]
                    } else {
                        &["access", p.key]
                    };
                    diags.push(Diagnostic {
                        file: path.clone(),
                        line: loc.line(keys),
                        message: p.message,
                    });
                }
            }
        }
    }
    out
}

fn check_users(e: &RawEntity, here: &mut impl FnMut(&[&str], String)) {
    let field = |n: &str| e.fields.iter().find(|f| f.name == n);
    match field("login") {
        Some(f) if f.ty == FieldType::String && f.unique && f.required => {}
        _ => here(
            &["fields"],
            "users needs `login: { type: string, required: true, unique: true }`".into(),
        ),
    }
    match field("password") {
        Some(f) if f.secret => {}
        _ => here(
            &["fields"],
            "users needs `password: { type: string, secret: true }`".into(),
        ),
    }
    match field("role") {
        Some(f) if matches!(&f.ty, FieldType::Enum(v) if v.iter().any(|x| x == "admin") && v.iter().any(|x| x == "user")) =>
            {}
        _ => here(
            &["fields"],
            "users needs `role: { type: enum, values: [admin, user] }`".into(),
        ),
    }
}

/// Orders entities so that every referenced entity comes before its referrers.
fn dependency_order(parsed: &[(RawEntity, PathBuf, Locator)]) -> Result<Vec<usize>, Diagnostic> {
    let index = |n: &str| parsed.iter().position(|(e, _, _)| e.name == n);
    let mut order = Vec::new();
    let mut state = vec![0u8; parsed.len()]; // 0 new, 1 visiting, 2 done
    fn visit(
        i: usize,
        parsed: &[(RawEntity, PathBuf, Locator)],
        index: &dyn Fn(&str) -> Option<usize>,
        state: &mut [u8],
        order: &mut Vec<usize>,
    ) -> Result<(), Diagnostic> {
        match state[i] {
            2 => return Ok(()),
            1 => {
                let (e, path, _) = &parsed[i];
                return Err(Diagnostic {
                    file: path.clone(),
                    line: 1,
                    message: format!("entity `{}` is part of a reference cycle", e.name),
                });
            }
            _ => {}
        }
        state[i] = 1;
        for f in &parsed[i].0.fields {
            if let FieldType::Reference(t) = &f.ty
                && let Some(j) = index(t)
                && j != i
            {
                visit(j, parsed, index, state, order)?;
            }
        }
        state[i] = 2;
        order.push(i);
        Ok(())
    }
    for i in 0..parsed.len() {
        visit(i, parsed, &index, &mut state, &mut order)?;
    }
    Ok(order)
}

/// The compiled hook file an entity names (`hooks:`), read from `sources` when they hold its
/// path and from the disk otherwise; a file that cannot be read or does not compile is a
/// problem at its own `file:line`.
fn hook_file(
    raw: &RawEntity,
    path: &Path,
    loc: &Locator,
    sources: &[(PathBuf, String)],
) -> Result<Option<crate::script::HookFile>, Diagnostic> {
    let Some(name) = &raw.hooks else {
        return Ok(None);
    };
    let file = path.parent().unwrap_or(Path::new("")).join(name);
    let text = match sources.iter().find(|(p, _)| *p == file) {
        Some((_, text)) => text.clone(),
        None => std::fs::read_to_string(&file).map_err(|e| Diagnostic {
            file: path.to_path_buf(),
            line: loc.line(&["hooks"]),
            message: format!("cannot read the hook file {}: {e}", file.display()),
        })?,
    };
    // Named as the entity file names it: errors that reach API callers show no server paths.
    crate::script::HookFile::compile(Path::new(name), &text)
        .map(Some)
        .map_err(|e| Diagnostic {
            file,
            line: e.line.map_or(1, |l| l as usize),
            message: e.message,
        })
}

fn build(
    raw: &RawEntity,
    path: &Path,
    loc: &Locator,
    access: super::Access,
) -> Result<Entity, String> {
    let create_schema = json_schema::payload_schema(&raw.name, &raw.fields, true);
    let update_schema = json_schema::payload_schema(&raw.name, &raw.fields, false);
    let compile = |s: &Json| {
        jsonschema::options()
            .should_validate_formats(true)
            .build(s)
            .map_err(|e| format!("internal schema error: {e}"))
    };
    Ok(Entity {
        name: raw.name.clone(),
        fields: raw
            .fields
            .iter()
            .map(|f| Field {
                line: loc.line(&["fields", &f.name]),
                ..f.clone()
            })
            .collect(),
        access,
        plugins: raw.plugins.clone(),
        allow_destructive: raw.allow_destructive,
        renamed_from: raw.renamed_from.clone(),
        hooks: None,
        key: raw.key.clone(),
        key_line: if raw.key.is_empty() {
            loc.line(&["name"])
        } else {
            loc.line(&["key"])
        },
        source: path.to_path_buf(),
        line: loc.line(&["name"]),
        create_validator: compile(&create_schema)?,
        update_validator: compile(&update_schema)?,
        memo: Default::default(),
        create_schema,
        update_schema,
    })
}

/// Converts a YAML default to the field's JSON value.
pub(super) fn default_value(ty: &FieldType, v: &Yaml) -> Result<Json, String> {
    let j: Json = match v {
        Yaml::String(s) => return value::coerce_str(ty, s),
        other => serde_json::to_value(other).map_err(|e| e.to_string())?,
    };
    let j = match (ty, &j) {
        (
            FieldType::String | FieldType::Text | FieldType::Enum(_),
            Json::Number(_) | Json::Bool(_),
        ) => {
            return value::coerce_str(ty, &j.to_string());
        }
        _ => j,
    };
    if value::json_matches(ty, &j) {
        value::normalize(ty, &j)
    } else {
        Err(format!("`{j}` is not a valid {}", ty.name()))
    }
}

/// The catalog of the given entity files (each a file name and its YAML text), with no
/// plugins; for unit tests, which fail on a file that does not compile.
#[cfg(test)]
pub fn test_catalog(files: &[(&str, &str)]) -> Catalog {
    let sources: Vec<(std::path::PathBuf, String)> = files
        .iter()
        .map(|(name, text)| (std::path::PathBuf::from(name), text.to_string()))
        .collect();
    compile_sources(&sources, &[]).expect("the test's entity files compile")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(name: &str, text: &str) -> (PathBuf, String) {
        (PathBuf::from(name), text.to_string())
    }

    #[test]
    fn decimal_defaults_are_exact() {
        let d = |y: &str| default_value(&FieldType::Decimal, &serde_yaml::from_str(y).unwrap());
        assert_eq!(d("0.25").unwrap().to_string(), "0.25");
        assert_eq!(d("12.50").unwrap().to_string(), "12.5");
        assert_eq!(d("3").unwrap().to_string(), "3");
        assert_eq!(
            d("\"0.1000000000000000055\"").unwrap().to_string(),
            "0.1000000000000000055"
        );
        assert!(d("\"1e40\"").unwrap_err().contains("does not fit"));
        assert!(d("1e40").unwrap_err().contains("does not fit"));
    }

    #[test]
    fn reports_every_error_with_lines() {
        let text = "fields:\n  a: { type: strin }\n  b:\n    type: reference\n    entity: nope\n  c: { type: integer, default: x }\n";
        let errs = compile_sources(&[src("broken.yaml", text)], &[]).unwrap_err();
        let shown: Vec<String> = errs.iter().map(|d| d.to_string()).collect();
        assert!(
            shown
                .iter()
                .any(|s| s.starts_with("broken.yaml:2: ") && s.contains("unknown type")),
            "{shown:?}"
        );
        assert!(
            shown
                .iter()
                .any(|s| s.starts_with("broken.yaml:6: ") && s.contains("default")),
            "{shown:?}"
        );
    }

    #[test]
    fn keys_name_fields_of_the_entity_once_and_no_secret() {
        let ok =
            "key: [code, size]\nfields:\n  code: { type: string }\n  size: { type: integer }\n";
        let c = compile_sources(&[src("items.yaml", ok)], &[]).unwrap();
        let e = c.get("items").unwrap();
        assert_eq!(e.key, ["code", "size"]);
        assert_eq!(e.key_index().as_deref(), Some("items_code_size_key"));
        let single = "fields:\n  code: { type: string }\nkey: code\n";
        let c = compile_sources(&[src("items.yaml", single)], &[]).unwrap();
        assert_eq!(c.get("items").unwrap().key, ["code"]);
        assert_eq!(c.get("items").unwrap().key_line, 3);
        for (key, problem) in [
            (
                "[code, cdoe]",
                "`key` names unknown field `cdoe`: did you mean `code`?",
            ),
            ("[code, code]", "`key` names `code` twice"),
            ("pin", "`key` names secret field `pin`"),
            ("id", "`key` names `id`, which is not a field"),
            ("[]", "`key` must be a field name or a non-empty list"),
            ("{ a: 1 }", "`key` must be a field name or a non-empty list"),
        ] {
            let text = format!(
                "fields:\n  code: {{ type: string }}\n  pin: {{ type: string, secret: true }}\nkey: {key}\n"
            );
            let errs = compile_sources(&[src("items.yaml", &text)], &[]).unwrap_err();
            let shown: Vec<String> = errs.iter().map(|d| d.to_string()).collect();
            assert!(
                shown
                    .iter()
                    .any(|s| s.starts_with("items.yaml:4: ") && s.contains(problem)),
                "{key}: {shown:?}"
            );
        }
    }

    #[test]
    fn yaml_syntax_error_has_line() {
        let errs = compile_sources(&[src("bad.yaml", "fields:\n  a: [\n")], &[]).unwrap_err();
        assert_eq!(errs[0].file, PathBuf::from("bad.yaml"));
        assert!(errs[0].line >= 2);
    }

    #[test]
    fn orders_references_first() {
        let a = "fields:\n  b_id: { type: reference, entity: b }\n";
        let b = "fields:\n  name: { type: string }\n";
        let c = compile_sources(&[src("a.yaml", a), src("b.yaml", b)], &[]).unwrap();
        let names: Vec<&String> = c.entities.keys().collect();
        let pa = names.iter().position(|n| *n == "a").unwrap();
        let pb = names.iter().position(|n| *n == "b").unwrap();
        assert!(pb < pa);
        assert!(c.get("users").is_some());
    }
}
