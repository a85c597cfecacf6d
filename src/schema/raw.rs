//! Reads one entity YAML document into a [`RawEntity`], collecting every problem it finds
//! (with the key path it was found at) instead of stopping at the first.

use super::access::RawAccess;
use super::format::{self, ENTITY_KEYS, FIELD_KEYS, TYPES};
use super::{Field, FieldType, PluginRef, RESERVED_FIELDS, Role};
use serde_json::Value as Json;
use serde_yaml::{Mapping, Value as Yaml};

/// One entity as written, before cross-entity checks.
pub struct RawEntity {
    pub name: String,
    pub fields: Vec<Field>,
    pub access: RawAccess,
    pub plugins: Vec<PluginRef>,
    pub allow_destructive: bool,
    pub renamed_from: Option<String>,
    /// The hook file (`hooks:`), as written: a path relative to the entity's file.
    pub hooks: Option<String>,
    /// The natural key's fields, as listed.
    pub key: Vec<String>,
}

/// Names taken by built-in routes, and by the tables that keep row counts.
/// Built-in tables an entity's table would collide with; the fixed routes reserve their own
/// names ([`crate::routes::reserved_names`]).
const RESERVED_TABLES: &[&str] = &[
    "files",
    "entity_counts",
    "entity_count_deltas",
    "entity_definitions",
    "entity_changes",
];

/// A problem and the key path it belongs to.
pub struct Problem {
    pub path: Vec<String>,
    pub message: String,
}

/// The default of a reference to users that stores the caller's id.
pub const CALLER_ID: &str = "@caller.id";

#[derive(Default)]
pub(super) struct Sink(Vec<Problem>);

impl Sink {
    pub(super) fn push(&mut self, path: &[&str], message: impl Into<String>) {
        self.0.push(Problem {
            path: path.iter().map(|s| s.to_string()).collect(),
            message: message.into(),
        });
    }
}

/// Whether `s` is a safe SQL identifier and URL segment: lowercase ASCII, digits, `_`.
pub fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some('a'..='z'))
        && chars.all(|c| matches!(c, 'a'..='z' | '0'..='9' | '_'))
        && s.len() <= 63
}

pub fn read(doc: &Yaml, default_name: &str) -> (Option<RawEntity>, Vec<Problem>) {
    let mut sink = Sink::default();
    let Some(map) = doc.as_mapping() else {
        sink.push(&[], "an entity file must be a YAML mapping");
        return (None, sink.0);
    };
    for key in map.keys() {
        let k = key.as_str().unwrap_or("");
        if !ENTITY_KEYS.iter().any(|known| known.name == k) {
            sink.push(&[k], format::unknown("key", k, ENTITY_KEYS));
        }
    }
    let name = match map.get("name") {
        None => default_name.to_string(),
        Some(Yaml::String(s)) => s.clone(),
        Some(_) => {
            sink.push(&["name"], "`name` must be a string");
            default_name.to_string()
        }
    };
    if !is_identifier(&name) {
        sink.push(
            &["name"],
            format!("entity name `{name}` must be lowercase letters, digits and `_`, starting with a letter"),
        );
    }
    if RESERVED_TABLES.contains(&name.as_str())
        || crate::routes::reserved_names().any(|r| r == name)
    {
        sink.push(
            &["name"],
            format!("entity name `{name}` is reserved for a built-in route or table"),
        );
    }
    let access = super::access::read(map.get("access"), &mut sink);
    let allow_destructive = match map.get("allow_destructive") {
        None => false,
        Some(Yaml::Bool(b)) => *b,
        Some(_) => {
            sink.push(
                &["allow_destructive"],
                "`allow_destructive` must be true or false",
            );
            false
        }
    };
    let plugins = read_plugins(map.get("plugins"), &mut sink);
    let renamed_from = read_renamed_from(map.get("renamed_from"), &["renamed_from"], &mut sink);
    let hooks = read_hooks(map.get("hooks"), &mut sink);
    let mut fields = Vec::new();
    match map.get("fields") {
        Some(Yaml::Mapping(fm)) => {
            for (k, v) in fm {
                let Some(fname) = k.as_str() else {
                    sink.push(&["fields"], "field names must be strings");
                    continue;
                };
                if let Some(f) = read_field(fname, v, &mut sink) {
                    fields.push(f);
                }
            }
        }
        None => sink.push(&[], "missing `fields`"),
        Some(_) => sink.push(
            &["fields"],
            "`fields` must be a mapping of field name to definition",
        ),
    }
    let key = read_key(map.get("key"), &fields, &mut sink);
    let entity = RawEntity {
        name,
        fields,
        access,
        plugins,
        allow_destructive,
        renamed_from,
        hooks,
        key,
    };
    (Some(entity), sink.0)
}

fn read_plugins(v: Option<&Yaml>, sink: &mut Sink) -> Vec<PluginRef> {
    let mut out = Vec::new();
    match v {
        None => {}
        Some(Yaml::Sequence(items)) => {
            for item in items {
                match item {
                    Yaml::String(name) => out.push(PluginRef {
                        name: name.clone(),
                        settings: Json::Null,
                    }),
                    Yaml::Mapping(m) if m.len() == 1 => {
                        let (k, v) = m.iter().next().expect("one entry");
                        let settings = serde_json::to_value(v).unwrap_or(Json::Null);
                        out.push(PluginRef {
                            name: k.as_str().unwrap_or("").to_string(),
                            settings,
                        });
                    }
                    _ => sink.push(
                        &["plugins"],
                        "each plugin is a name, or `name: { settings }`",
                    ),
                }
            }
        }
        Some(_) => sink.push(&["plugins"], "`plugins` must be a list"),
    }
    out
}

/// One field's mapping, read one key family at a time: its name and shape, the flags, the
/// type (with `values` and `entity`), `max_length`, `write`, `default`, `renamed_from` and
/// `description`.
fn read_field(name: &str, v: &Yaml, sink: &mut Sink) -> Option<Field> {
    check_field_name(name, sink);
    let empty = Mapping::new();
    let m: &Mapping = match v {
        Yaml::Mapping(m) => m,
        Yaml::String(_) => {
            push_field(
                sink,
                name,
                "",
                format!("field `{name}` must be a mapping such as {{ type: string }}"),
            );
            &empty
        }
        _ => {
            push_field(
                sink,
                name,
                "",
                format!("field `{name}` must be a mapping such as {{ type: string }}"),
            );
            return None;
        }
    };
    for key in m.keys() {
        let k = key.as_str().unwrap_or("");
        if !FIELD_KEYS.iter().any(|known| known.name == k) {
            let msg = format!("field `{name}`: {}", format::unknown("key", k, FIELD_KEYS));
            sink.push(&["fields", name, k], msg);
        }
    }
    let required = field_flag(name, m, "required", sink);
    let unique = field_flag(name, m, "unique", sink);
    let index = field_flag(name, m, "index", sink);
    let secret = field_flag(name, m, "secret", sink);
    let ty = read_field_type(name, m, sink)?;
    let max_length = read_max_length(name, m, &ty, sink);
    let write_role = read_write_role(name, m, sink);
    if secret && !matches!(ty, FieldType::String) {
        push_field(
            sink,
            name,
            "secret",
            format!("field `{name}`: only string fields can be secret"),
        );
    }
    let default_caller = m.get("default").and_then(Yaml::as_str) == Some(CALLER_ID);
    if default_caller && !matches!(&ty, FieldType::Reference(t) if t == "users") {
        push_field(
            sink,
            name,
            "default",
            format!("field `{name}`: `default: \"{CALLER_ID}\"` needs a reference to users"),
        );
    }
    let default = if default_caller {
        None
    } else {
        read_default(name, m, &ty, sink)
    };
    let renamed_from = read_renamed_from(
        m.get("renamed_from"),
        &["fields", name, "renamed_from"],
        sink,
    );
    let description = m
        .get("description")
        .and_then(Yaml::as_str)
        .map(str::to_string);
    Some(Field {
        name: name.to_string(),
        ty,
        required,
        default,
        unique,
        index,
        max_length,
        secret,
        write_role,
        default_caller,
        description,
        renamed_from,
        line: 0,
    })
}

/// A problem of field `name`'s key `key` (`""`: of the field itself).
fn push_field(sink: &mut Sink, name: &str, key: &str, msg: String) {
    sink.push(&["fields", name, key], msg)
}

/// A field's name: an identifier, and not one the server keeps for itself.
fn check_field_name(name: &str, sink: &mut Sink) {
    if !is_identifier(name) {
        push_field(
            sink,
            name,
            "",
            format!(
                "field name `{name}` must be lowercase letters, digits and `_`, starting with a letter"
            ),
        );
    }
    if RESERVED_FIELDS.contains(&name) {
        push_field(sink, name, "", format!("field name `{name}` is reserved"));
    }
}

/// A true-or-false key of a field (`required`, `unique`, `index`, `secret`); false when absent.
fn field_flag(name: &str, m: &Mapping, key: &'static str, sink: &mut Sink) -> bool {
    match m.get(key) {
        None => false,
        Some(Yaml::Bool(b)) => *b,
        Some(_) => {
            push_field(
                sink,
                name,
                key,
                format!("field `{name}`: `{key}` must be true or false"),
            );
            false
        }
    }
}

/// `type`, with the `values` of an enum and the `entity` of a reference; `None` when the
/// field has no type to compile.
fn read_field_type(name: &str, m: &Mapping, sink: &mut Sink) -> Option<FieldType> {
    let ty = match m.get("type").and_then(Yaml::as_str) {
        None => {
            push_field(
                sink,
                name,
                "type",
                format!("field `{name}`: missing `type`"),
            );
            return None;
        }
        Some("string") => FieldType::String,
        Some("text") => FieldType::Text,
        Some("integer") => FieldType::Integer,
        Some("decimal") => FieldType::Decimal,
        Some("boolean") => FieldType::Boolean,
        Some("date") => FieldType::Date,
        Some("datetime") => FieldType::Datetime,
        Some("enum") => {
            let values: Vec<String> = m
                .get("values")
                .and_then(Yaml::as_sequence)
                .map(|s| s.iter().filter_map(yaml_scalar_string).collect())
                .unwrap_or_default();
            if values.is_empty() {
                push_field(
                    sink,
                    name,
                    "values",
                    format!("field `{name}`: an enum needs a non-empty list `values`"),
                );
            }
            FieldType::Enum(values)
        }
        Some("reference") => match m.get("entity").and_then(Yaml::as_str) {
            Some(e) => FieldType::Reference(e.to_string()),
            None => {
                push_field(
                    sink,
                    name,
                    "entity",
                    format!("field `{name}`: a reference needs `entity: <entity name>`"),
                );
                FieldType::Reference(String::new())
            }
        },
        Some(other) => {
            let types: Vec<&str> = TYPES.iter().map(|(t, _)| *t).collect();
            let message = format!("field `{name}`: unknown type `{other}`");
            let message = match format::nearest(other, types.iter().copied()) {
                Some(t) => format!("{message}: did you mean `{t}`?"),
                None => format!("{message} ({})", types.join(", ")),
            };
            push_field(sink, name, "type", message);
            return None;
        }
    };
    if m.contains_key("values") && !matches!(ty, FieldType::Enum(_)) {
        push_field(
            sink,
            name,
            "values",
            format!("field `{name}`: `values` only applies to enums"),
        );
    }
    if m.contains_key("entity") && !matches!(ty, FieldType::Reference(_)) {
        push_field(
            sink,
            name,
            "entity",
            format!("field `{name}`: `entity` only applies to references"),
        );
    }
    Some(ty)
}

/// `max_length`: a positive integer, of a string or text field only.
fn read_max_length(name: &str, m: &Mapping, ty: &FieldType, sink: &mut Sink) -> Option<u64> {
    let v = m.get("max_length")?;
    let textual = matches!(ty, FieldType::String | FieldType::Text);
    match v.as_u64() {
        Some(n) if n > 0 && textual => Some(n),
        Some(_) if !textual => {
            push_field(
                sink,
                name,
                "max_length",
                format!("field `{name}`: `max_length` only applies to string and text"),
            );
            None
        }
        _ => {
            push_field(
                sink,
                name,
                "max_length",
                format!("field `{name}`: `max_length` must be a positive integer"),
            );
            None
        }
    }
}

/// `write`: the role a caller needs to set the field.
fn read_write_role(name: &str, m: &Mapping, sink: &mut Sink) -> Option<Role> {
    let v = m.get("write")?;
    let role = v.as_str().filter(|s| is_identifier(s)).map(Role::new);
    if role.is_none() {
        push_field(
            sink,
            name,
            "write",
            format!("field `{name}`: `write` must be a role, such as `admin`"),
        );
    }
    role
}

/// `default`: a value of the field's type (`null` is none).
fn read_default(name: &str, m: &Mapping, ty: &FieldType, sink: &mut Sink) -> Option<Json> {
    match m.get("default") {
        None | Some(Yaml::Null) => None,
        Some(v) => match super::compile::default_value(ty, v) {
            Ok(j) => Some(j),
            Err(msg) => {
                push_field(
                    sink,
                    name,
                    "default",
                    format!("field `{name}`: default {msg}"),
                );
                None
            }
        },
    }
}

/// `key: <field>` or `key: [<field>, ...]`: fields of this entity, each once, none secret.
fn read_key(v: Option<&Yaml>, fields: &[Field], sink: &mut Sink) -> Vec<String> {
    let names: Vec<&str> = match v {
        None => return Vec::new(),
        Some(Yaml::String(s)) => vec![s.as_str()],
        Some(Yaml::Sequence(items)) if !items.is_empty() => {
            let names: Vec<&str> = items.iter().filter_map(Yaml::as_str).collect();
            if names.len() != items.len() {
                sink.push(&["key"], "`key` lists field names");
                return Vec::new();
            }
            names
        }
        Some(_) => {
            sink.push(
                &["key"],
                "`key` must be a field name or a non-empty list of field names, such as `key: login` or `key: [campaign_id, name]`",
            );
            return Vec::new();
        }
    };
    let mut key = Vec::new();
    for (i, n) in names.iter().enumerate() {
        if names[..i].contains(n) {
            sink.push(&["key"], format!("`key` names `{n}` twice"));
            continue;
        }
        match fields.iter().find(|f| f.name == *n) {
            None if RESERVED_FIELDS.contains(n) => sink.push(
                &["key"],
                format!("`key` names `{n}`, which is not a field: a key is made of the entity's own fields"),
            ),
            None => sink.push(
                &["key"],
                format::with_hint(
                    format!("`key` names unknown field `{n}`"),
                    n,
                    fields.iter().map(|f| f.name.as_str()),
                ),
            ),
            Some(f) if f.secret => sink.push(
                &["key"],
                format!("`key` names secret field `{n}`: a secret is never read back, so it cannot name an object"),
            ),
            Some(_) => key.push(n.to_string()),
        }
    }
    key
}

/// A `renamed_from: <old name>`: an identifier.
fn read_renamed_from(v: Option<&Yaml>, at: &[&str], sink: &mut Sink) -> Option<String> {
    match v? {
        Yaml::String(s) if is_identifier(s) => Some(s.clone()),
        _ => {
            sink.push(
                at,
                "`renamed_from` must be the old name: lowercase letters, digits and `_`",
            );
            None
        }
    }
}

fn read_hooks(v: Option<&Yaml>, sink: &mut Sink) -> Option<String> {
    match v? {
        Yaml::String(s) if s.ends_with(".js") && !s.trim().is_empty() => Some(s.clone()),
        _ => {
            sink.push(
                &["hooks"],
                "`hooks` must name a JavaScript file (`<name>.js`) next to the entity's file",
            );
            None
        }
    }
}

fn yaml_scalar_string(v: &Yaml) -> Option<String> {
    match v {
        Yaml::String(s) => Some(s.clone()),
        Yaml::Number(n) => Some(n.to_string()),
        Yaml::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}
