//! Entity definitions: the raw YAML model, `compile()` into a validated [`Catalog`], and the
//! JSON Schema derived for each entity. This module is pure data; storage and the engine read it.

mod access;
mod compile;
pub mod format;
mod json_schema;
mod locate;
mod raw;
pub mod rules;
pub mod value;
mod yaml_error;

#[cfg(test)]
pub use compile::test_catalog;
pub use compile::{Diagnostic, compile_dir, compile_sources};
pub use json_schema::{field_schema, positions, read_field_schema, surely_valid, surely_valid_at};

use indexmap::IndexMap;
use serde_json::Value as Json;
use std::path::PathBuf;
use std::sync::Arc;

/// Names no entity field may take: system columns of every table and of the uploader, and
/// query parameters the HTTP layer reserves.
pub const RESERVED_FIELDS: &[&str] = &[
    "id",
    "created_dt",
    "updated_dt",
    "res",
    "op",
    "t",
    "limit",
    "offset",
    "cursor",
    "bgrs",
    "upsert",
    "sort",
    "fields",
    "dry_run",
    "atomic",
    "changed_by",
];

/// A role a signed-in user has: one of the values of the users entity's `role` field. `admin`
/// passes every rule.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Role(Arc<str>);

impl Role {
    pub const ADMIN: &'static str = "admin";
    pub const USER: &'static str = "user";

    pub fn new(name: &str) -> Role {
        Role(Arc::from(name))
    }

    pub fn admin() -> Role {
        Role::new(Role::ADMIN)
    }

    pub fn user() -> Role {
        Role::new(Role::USER)
    }

    pub fn is_admin(&self) -> bool {
        &*self.0 == Role::ADMIN
    }

    /// Whether a user with role `have` satisfies a requirement of this role: that role, or
    /// `admin`.
    pub fn admits(&self, have: &Role) -> bool {
        have.is_admin() || have == self
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The type of one entity field.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldType {
    String,
    Text,
    Integer,
    Decimal,
    Boolean,
    Date,
    Datetime,
    Enum(Vec<String>),
    Reference(String),
}

impl FieldType {
    pub fn name(&self) -> &'static str {
        match self {
            FieldType::String => "string",
            FieldType::Text => "text",
            FieldType::Integer => "integer",
            FieldType::Decimal => "decimal",
            FieldType::Boolean => "boolean",
            FieldType::Date => "date",
            FieldType::Datetime => "datetime",
            FieldType::Enum(_) => "enum",
            FieldType::Reference(_) => "reference",
        }
    }

    /// How values of this type are stored.
    pub fn col_type(&self) -> ColType {
        match self {
            FieldType::Integer | FieldType::Reference(_) => ColType::Int,
            FieldType::Decimal => ColType::Decimal,
            FieldType::Boolean => ColType::Bool,
            _ => ColType::Text,
        }
    }
}

/// The storage class of a column; the backends bind and decode by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColType {
    Int,
    /// A binary float (progress figures; decimal columns of earlier versions).
    Float,
    /// An exact decimal (NUMERIC on PostgreSQL, canonical text on SQLite).
    Decimal,
    Bool,
    Text,
}

/// One compiled field of an entity.
#[derive(Debug, Clone)]
pub struct Field {
    pub name: String,
    pub ty: FieldType,
    pub required: bool,
    /// Default value, already of the field's JSON type.
    pub default: Option<Json>,
    pub unique: bool,
    /// `index: true`: the column gets an index, for filters and sorts on it.
    pub index: bool,
    pub max_length: Option<u64>,
    /// Write-only: hashed with argon2 before storage and never returned.
    pub secret: bool,
    /// Role needed to set this field (beyond the entity's rules): that role or `admin`.
    pub write_role: Option<Role>,
    /// `default: "@caller.id"`: a create that leaves the field out stores the caller's id.
    pub default_caller: bool,
    pub description: Option<String>,
    /// The name the field had before (`renamed_from`): its column and values are kept.
    pub renamed_from: Option<String>,
    /// Where the field is defined in its file.
    pub line: usize,
}

pub use access::{Access, Action};

/// A plugin named by an entity, with its settings.
#[derive(Debug, Clone)]
pub struct PluginRef {
    pub name: String,
    pub settings: Json,
}

/// One compiled entity.
#[derive(Debug)]
pub struct Entity {
    pub name: String,
    pub fields: Vec<Field>,
    pub access: Access,
    pub plugins: Vec<PluginRef>,
    pub allow_destructive: bool,
    /// The name the entity had before (`renamed_from`): its table and rows are kept.
    pub renamed_from: Option<String>,
    /// The record hooks of `hooks:`, compiled.
    pub hooks: Option<crate::script::HookFile>,
    /// The natural key (`key:`): fields unique together, by which an object can be named
    /// instead of by its id. Empty when the entity has none.
    pub key: Vec<String>,
    /// The line of `key` in the file (the entity's line when it has none).
    pub key_line: usize,
    pub source: PathBuf,
    /// The line of the entity's `name` (or its first line).
    pub line: usize,
    /// JSON Schema of a create payload, and its compiled validator.
    pub create_schema: Json,
    pub create_validator: jsonschema::Validator,
    /// JSON Schema of an update payload (nothing required), and its compiled validator.
    pub update_schema: Json,
    pub update_validator: jsonschema::Validator,
    /// What is derived from the entity on first use and kept (an entity does not change once
    /// compiled: a reload compiles new ones).
    pub memo: Memo,
}

/// Values derived from an entity once, on first use: its column types, and texts the storage
/// writes for it (its read by id, one per database dialect, by slot).
#[derive(Debug, Default)]
pub struct Memo {
    texts: [std::sync::OnceLock<String>; 2],
    col_types: std::sync::OnceLock<Vec<ColType>>,
}

impl Memo {
    /// The text of `slot` (0 or 1), written by `write` the first time.
    pub fn text(&self, slot: usize, write: impl FnOnce() -> String) -> &str {
        self.texts[slot].get_or_init(write)
    }
}

impl Field {
    /// Whether the field has a value when a create leaves it out.
    pub fn defaulted(&self) -> bool {
        self.default.is_some() || self.default_caller
    }

    /// Whether the field may be cleared with null: optional, without a default.
    pub fn nullable(&self) -> bool {
        !self.required && !self.defaulted()
    }

    /// Whether a create must give the field.
    pub fn needed(&self) -> bool {
        self.required && !self.defaulted()
    }

    /// A field of type `ty` with no other setting (optional, no default, no index).
    pub fn new(name: &str, ty: FieldType) -> Field {
        Field {
            name: name.to_string(),
            ty,
            required: false,
            default: None,
            unique: false,
            index: false,
            max_length: None,
            secret: false,
            write_role: None,
            default_caller: false,
            description: None,
            renamed_from: None,
            line: 1,
        }
    }
}

impl Entity {
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// Column names in row order: `id`, the fields, `created_dt`, `updated_dt`.
    pub fn columns(&self) -> impl Iterator<Item = &str> {
        std::iter::once("id")
            .chain(self.fields.iter().map(|f| f.name.as_str()))
            .chain(["created_dt", "updated_dt"])
    }

    /// [`Entity::col_types`], computed once.
    pub fn col_types_once(&self) -> &[ColType] {
        self.memo.col_types.get_or_init(|| self.col_types())
    }

    /// Column storage types in row order.
    pub fn col_types(&self) -> Vec<ColType> {
        std::iter::once(ColType::Int)
            .chain(self.fields.iter().map(|f| f.ty.col_type()))
            .chain([ColType::Text, ColType::Text])
            .collect()
    }

    /// Column storage type by name (system columns included).
    pub fn col_type(&self, name: &str) -> Option<ColType> {
        match name {
            "id" => Some(ColType::Int),
            "created_dt" | "updated_dt" => Some(ColType::Text),
            _ => self.field(name).map(|f| f.ty.col_type()),
        }
    }

    /// Whether the entity has a natural key.
    pub fn has_key(&self) -> bool {
        !self.key.is_empty()
    }

    /// The name of the unique index that enforces the key.
    pub fn key_index(&self) -> Option<String> {
        key_index(&self.name, &self.key)
    }

    /// `login` or `[campaign_id, name]`, as the YAML writes the key.
    pub fn key_shown(&self) -> String {
        match self.key.as_slice() {
            [one] => format!("`{one}`"),
            many => format!("[{}]", many.join(", ")),
        }
    }

    /// Fields of this entity that reference `other`.
    pub fn references_to<'a>(&'a self, other: &'a str) -> impl Iterator<Item = &'a Field> {
        self.fields
            .iter()
            .filter(move |f| matches!(&f.ty, FieldType::Reference(t) if t == other))
    }
}

/// The name of the unique index that enforces `key` on `table`: `<table>_<field>..._key`,
/// the name a `unique` field's index has when the key is that one field.
pub fn key_index(table: &str, key: &[String]) -> Option<String> {
    (!key.is_empty()).then(|| format!("{table}_{}_key", key.join("_")))
}

/// The validated set of entities, in a stable order (references before referrers).
#[derive(Debug, Default, Clone)]
pub struct Catalog {
    pub entities: Entities,
    /// Entities whose definition another server sharing the database has changed since this
    /// catalog was applied: their calls answer 503 until this server's own files match.
    pub changed_elsewhere: std::collections::BTreeSet<String>,
}

/// The entities by name, in the order they were defined. Names come from the definitions, and
/// a request's name is only looked up, never inserted: a fast hasher is enough.
pub type Entities = IndexMap<String, Arc<Entity>, foldhash::fast::RandomState>;

impl Catalog {
    pub fn get(&self, name: &str) -> Option<&Arc<Entity>> {
        self.entities.get(name)
    }
}
