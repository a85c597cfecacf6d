//! The definitions as the database records them: per entity its source file and, per field,
//! what the stored values depend on (type, enum values, referenced entity, max length,
//! required, unique), with a digest.

use crate::schema::{Catalog, Entity, Field, FieldType};
use crate::storage::definitions::{self, DefinitionRow};
use crate::storage::{Exec, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// One entity as last applied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedEntity {
    /// The file it was defined in.
    pub source: String,
    pub fields: Vec<RecordedField>,
    /// The natural key's fields (empty: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub key: Vec<String>,
}

/// One field as last applied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedField {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_length: Option<u64>,
    #[serde(default)]
    pub required: bool,
    #[serde(default)]
    pub unique: bool,
    /// Left out when false, so records from before `index` keep their digest.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub index: bool,
}

impl RecordedField {
    pub fn of(f: &Field) -> RecordedField {
        RecordedField {
            name: f.name.clone(),
            ty: f.ty.name().to_string(),
            values: match &f.ty {
                FieldType::Enum(v) => v.clone(),
                _ => Vec::new(),
            },
            entity: match &f.ty {
                FieldType::Reference(t) => Some(t.clone()),
                _ => None,
            },
            max_length: f.max_length,
            required: f.required,
            unique: f.unique,
            index: f.index,
        }
    }

    /// The field type it records.
    pub fn field_type(&self) -> FieldType {
        match self.ty.as_str() {
            "text" => FieldType::Text,
            "integer" => FieldType::Integer,
            "decimal" => FieldType::Decimal,
            "boolean" => FieldType::Boolean,
            "date" => FieldType::Date,
            "datetime" => FieldType::Datetime,
            "enum" => FieldType::Enum(self.values.clone()),
            "reference" => FieldType::Reference(self.entity.clone().unwrap_or_default()),
            _ => FieldType::String,
        }
    }
}

/// The record of one entity, with its digest.
pub fn entity_row(e: &Entity) -> DefinitionRow {
    let rec = RecordedEntity {
        source: e.source.display().to_string(),
        fields: e.fields.iter().map(RecordedField::of).collect(),
        key: e.key.clone(),
    };
    row(&e.name, &rec)
}

fn row(name: &str, rec: &RecordedEntity) -> DefinitionRow {
    let definition = serde_json::to_string(rec).unwrap_or_default();
    // The digest covers what the tables depend on, not where the file lives.
    let mut fields = serde_json::to_string(&rec.fields).unwrap_or_default();
    if !rec.key.is_empty() {
        // Only a key changes the text, so entities without one keep their digests.
        fields.push_str(&format!("\nkey {}", rec.key.join(",")));
    }
    DefinitionRow {
        name: name.to_string(),
        digest: hex::encode(Sha256::digest(format!("{name}\n{fields}").as_bytes())),
        definition,
    }
}

/// The record of every entity of `catalog`.
pub fn rows(catalog: &Catalog) -> Vec<DefinitionRow> {
    let mut rows: Vec<DefinitionRow> = catalog.entities.values().map(|e| entity_row(e)).collect();
    rows.sort_by(|a, b| a.name.cmp(&b.name));
    rows
}

/// The rows of a loaded record.
pub fn rows_of(recorded: &BTreeMap<String, RecordedEntity>) -> Vec<DefinitionRow> {
    recorded.iter().map(|(n, r)| row(n, r)).collect()
}

/// One digest of a whole record.
pub fn digest(rows: &[DefinitionRow]) -> String {
    let mut h = Sha256::new();
    for r in rows {
        h.update(r.name.as_bytes());
        h.update(b"\n");
        h.update(r.digest.as_bytes());
        h.update(b"\n");
    }
    hex::encode(h.finalize())
}

/// The record as the database holds it (empty before any was kept).
pub async fn load(ex: &mut dyn Exec) -> Result<BTreeMap<String, RecordedEntity>> {
    Ok(definitions::load(ex)
        .await?
        .into_iter()
        .filter_map(|r| Some((r.name, serde_json::from_str(&r.definition).ok()?)))
        .collect())
}
