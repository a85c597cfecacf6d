//! The comparison of one catalog with the database: for each entity, the steps its tables
//! need (renames, conversions, checks, the additive statements) and the refusals, with every
//! check read from the stored rows inside the change's transaction. A kept field's checks and
//! conversions are in [`fields`].

use super::record::{RecordedEntity, RecordedField};
use super::{Action, FIRST_ROWS, Outcome, Refusal, Step, plural};
use crate::schema::{Catalog, ColType, Entity, Field, FieldType};
use crate::storage::evolve::{self as sql, Unfit};
use crate::storage::{Dialect, Exec, StorageError, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

mod fields;

pub(super) struct Inspect<'a> {
    pub d: Dialect,
    pub ex: &'a mut dyn Exec,
    pub columns: &'a BTreeMap<String, Vec<String>>,
    pub recorded: &'a BTreeMap<String, RecordedEntity>,
    pub out: &'a mut Outcome,
    pub actions: &'a mut Vec<Action>,
}

const SYSTEM_COLUMNS: [&str; 4] = [
    "id",
    "created_dt",
    "updated_dt",
    crate::storage::changes::REV,
];

impl Inspect<'_> {
    fn refuse(&mut self, file: &std::path::Path, line: usize, message: String) {
        self.out.refusals.push(Refusal {
            file: file.to_path_buf(),
            line,
            message,
        });
    }

    fn cols(&self, table: &str) -> &[String] {
        self.columns.get(table).map(Vec::as_slice).unwrap_or(&[])
    }

    pub async fn all(&mut self, catalog: &Catalog) -> Result<(), StorageError> {
        let mut sources = BTreeSet::new();
        for e in catalog.entities.values() {
            let source = self.entity(e).await?;
            sources.insert(source);
        }
        // Entities recorded that are gone from the definitions.
        for (name, rec) in self.recorded {
            if catalog.get(name).is_some() || sources.contains(name) {
                continue;
            }
            if self.cols(name).is_empty() {
                continue;
            }
            let rows = self.count(name).await?;
            if rows > 0 {
                let file = PathBuf::from(&rec.source);
                self.refuse(
                    &file,
                    1,
                    format!(
                        "entity `{name}` was removed but its table holds {rows} row{}; put the file back, rename the entity that replaces it with `renamed_from: {name}`, or delete the rows first (data is never dropped)",
                        plural(rows)
                    ),
                );
            }
        }
        Ok(())
    }

    /// Keeps every other writer (and reader) of `table` out until the change commits, so the
    /// rows checked are the rows changed.
    async fn lock(&mut self, table: &str) -> Result<(), StorageError> {
        if let Some(stmt) = sql::lock(self.d, table) {
            self.ex.execute(&stmt, &[]).await?;
        }
        Ok(())
    }

    async fn count(&mut self, table: &str) -> Result<i64, StorageError> {
        sql::count(self.ex, self.d, table).await
    }

    /// The table an entity's rows come from: its own, or the one it says it was renamed
    /// from (renamed now). `None` when both exist (refused).
    fn source_table(&mut self, e: &Entity) -> Option<String> {
        let name = e.name.as_str();
        let exists = !self.cols(name).is_empty();
        let Some(old) = &e.renamed_from else {
            return Some(name.to_string());
        };
        let old_exists = !self.cols(old).is_empty();
        if old_exists && exists {
            self.refuse(
                &e.source,
                e.line,
                format!(
                    "entity `{name}` says `renamed_from: {old}`, but tables `{old}` and `{name}` both exist; remove one (or the `renamed_from`)"
                ),
            );
            return None;
        }
        if !old_exists {
            return Some(name.to_string());
        }
        let old_indexes = self.index_names(old, self.recorded.get(old), e);
        self.push_sql(sql::rename_table(self.d, old, name, &old_indexes));
        self.out.steps.push(Step::RenameTable {
            from: old.clone(),
            to: name.to_string(),
        });
        Some(old.clone())
    }

    /// Inspects one entity: its table, its fields' columns, the columns no field serves any
    /// more, its key; returns the table its rows come from.
    async fn entity(&mut self, e: &Entity) -> Result<String, StorageError> {
        let name = e.name.as_str();
        let Some(source) = self.source_table(e) else {
            return Ok(name.to_string());
        };
        let cols: Vec<String> = self.cols(&source).to_vec();
        if cols.is_empty() {
            self.out.steps.push(Step::Create {
                entity: name.to_string(),
            });
            self.additive(e, &[]);
            return Ok(source);
        }
        let rec = self.recorded.get(&source);
        let rows = self.count(&source).await?;
        let mut existing: Vec<String> = cols.clone();
        let mut used: BTreeSet<String> = SYSTEM_COLUMNS.iter().map(|s| s.to_string()).collect();
        for f in &e.fields {
            let mut column = f.name.clone();
            if let Some(old) = &f.renamed_from
                && cols.contains(old)
            {
                if cols.contains(&f.name) {
                    self.refuse(
                        &e.source,
                        f.line,
                        format!(
                            "field `{name}.{}` says `renamed_from: {old}`, but columns `{old}` and `{}` both exist; remove one (or the `renamed_from`)",
                            f.name, f.name
                        ),
                    );
                    continue;
                }
                column = old.clone();
                let old_indexes = field_indexes(name, old, before(rec, old, f).as_ref());
                self.push_sql(sql::rename_column(self.d, name, old, &f.name, &old_indexes));
                self.out.steps.push(Step::RenameColumn {
                    entity: name.to_string(),
                    from: old.clone(),
                    to: f.name.clone(),
                });
                existing.retain(|c| c != old);
                existing.push(f.name.clone());
            }
            if !cols.contains(&column) {
                self.out.steps.push(Step::Add {
                    entity: name.to_string(),
                    field: f.name.clone(),
                });
                continue;
            }
            used.insert(column.clone());
            let Some(old) = before(rec, &column, f) else {
                continue;
            };
            if rec.is_some() {
                self.index_change(name, f, &old);
            }
            if f.ty == FieldType::Decimal
                && old.field_type() == FieldType::Decimal
                && sql::holds_floats(self.ex, self.d, &source, &column).await?
            {
                self.exact(e, f, &source, &column, &old).await?;
            }
            if rows > 0 {
                self.field(e, f, &source, &column, &old).await?;
            }
        }
        self.removed_columns(e, rec, &source, &cols, &used, rows)
            .await?;
        self.key(e, rec, &source, &cols, rows).await?;
        self.additive(e, &existing);
        Ok(source)
    }

    /// Columns no field serves any more: their values are given up (`allow_destructive`) or
    /// the change is refused while rows hold one.
    async fn removed_columns(
        &mut self,
        e: &Entity,
        rec: Option<&RecordedEntity>,
        source: &str,
        cols: &[String],
        used: &BTreeSet<String>,
        rows: i64,
    ) -> Result<(), StorageError> {
        let name = e.name.as_str();
        for c in cols.iter().filter(|c| !used.contains(*c)) {
            let known = match rec {
                None => true,
                Some(r) => r.fields.iter().any(|f| &f.name == c),
            };
            if !known || rows == 0 {
                continue;
            }
            let ty = rec
                .and_then(|r| r.fields.iter().find(|f| &f.name == c))
                .map_or(ColType::Text, |f| f.field_type().col_type());
            let (n, first) =
                sql::unfit(self.ex, self.d, source, c, ty, Unfit::Holding, FIRST_ROWS).await?;
            if n == 0 {
                continue;
            }
            if e.allow_destructive {
                self.out.steps.push(Step::GiveUp {
                    entity: name.to_string(),
                    field: c.clone(),
                    rows: n,
                });
                continue;
            }
            self.refuse(
                &e.source,
                e.line,
                format!(
                    "field `{name}.{c}` was removed but {n} row{} hold{} a value ({}); add it back, rename the field that replaces it with `renamed_from: {c}`, or set `allow_destructive: true` to give the values up",
                    plural(n),
                    if n == 1 { "s" } else { "" },
                    rows_named(&first)
                ),
            );
        }
        Ok(())
    }

    /// A key added or changed: the stored rows must not share one (rows with an empty key
    /// field never do); a key dropped or changed loses its old index.
    async fn key(
        &mut self,
        e: &Entity,
        rec: Option<&RecordedEntity>,
        table: &str,
        cols: &[String],
        rows: i64,
    ) -> Result<(), StorageError> {
        let before: &[String] = rec.map(|r| r.key.as_slice()).unwrap_or(&[]);
        if before == e.key.as_slice() && rec.is_some() {
            return Ok(());
        }
        if let Some(old) = crate::schema::key_index(table, before) {
            let still_unique = matches!(before, [one] if e.field(one).is_some_and(|f| f.unique));
            if !still_unique && crate::schema::key_index(&e.name, &e.key) != Some(old.clone()) {
                self.push_sql(sql::drop_indexes(self.d, &[old]));
            }
        }
        if e.key.is_empty() || rows == 0 {
            return Ok(());
        }
        // The stored columns the key is made of; a column the change adds holds its default
        // (the same in every row) or nothing (never a duplicate).
        let mut columns = Vec::new();
        for k in &e.key {
            let f = e.field(k).expect("a key names fields");
            let column = match &f.renamed_from {
                Some(old) if !cols.contains(&f.name) && cols.contains(old) => old.clone(),
                _ => f.name.clone(),
            };
            if cols.contains(&column) {
                columns.push((column, f.ty.col_type()));
            } else if f.default.is_none() {
                return Ok(());
            }
        }
        self.lock(table).await?;
        let (groups, first) = if columns.is_empty() {
            // Every row would hold the same defaults.
            if rows > 1 {
                let ids = sql::first_ids(self.ex, self.d, table, FIRST_ROWS).await?;
                (1, vec![(Vec::new(), ids)])
            } else {
                (0, Vec::new())
            }
        } else {
            let typed: Vec<(&str, ColType)> =
                columns.iter().map(|(c, t)| (c.as_str(), *t)).collect();
            sql::duplicates(self.ex, self.d, table, &typed, FIRST_ROWS).await?
        };
        if groups == 0 {
            self.out.steps.push(Step::Key {
                entity: e.name.clone(),
                key: e.key_shown(),
                rows,
            });
            return Ok(());
        }
        let named: Vec<String> = first
            .iter()
            .map(|(values, ids)| {
                let ids: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
                let shared: Vec<String> = columns
                    .iter()
                    .zip(values)
                    .map(|((c, _), v)| format!("{c} {}", shown(v)))
                    .collect();
                if shared.is_empty() {
                    format!("ids {}", ids.join(", "))
                } else {
                    format!("ids {} share {}", ids.join(", "), shared.join(", "))
                }
            })
            .collect();
        self.refuse(
            &e.source,
            e.key_line,
            format!(
                "entity `{}`: `key: {}` does not fit the stored rows: {groups} group{} of rows share a key ({}); make their keys differ or delete the extra rows first, or keep the old key",
                e.name,
                e.key_shown().trim_matches('`'),
                plural(groups),
                named.join("; ")
            ),
        );
        Ok(())
    }

    /// The additive statements (columns, indexes, row count) once renames are done.
    fn additive(&mut self, e: &Entity, existing: &[String]) {
        self.push_sql(crate::storage::ddl::plan(self.d, e, existing));
    }

    fn push_sql(&mut self, stmts: Vec<String>) {
        self.actions.extend(stmts.into_iter().map(Action::Sql));
    }

    /// Index names of entity `table` as it was (its recorded fields, else today's).
    fn index_names(&self, table: &str, rec: Option<&RecordedEntity>, e: &Entity) -> Vec<String> {
        let (mut names, key): (Vec<String>, &[String]) = match rec {
            Some(r) => (
                r.fields
                    .iter()
                    .flat_map(|f| field_indexes(table, &f.name, Some(f)))
                    .collect(),
                &r.key,
            ),
            None => (
                e.fields
                    .iter()
                    .flat_map(|f| field_indexes(table, &f.name, Some(&RecordedField::of(f))))
                    .collect(),
                &e.key,
            ),
        };
        // The key's index, unless it is a `unique` field's own.
        if let Some(k) = crate::schema::key_index(table, key)
            && !names.contains(&k)
        {
            names.push(k);
        }
        names
    }

    /// The step when a recorded field gains or loses its plain index (`index: true`); a lost
    /// one is dropped here, a gained one is created by the additive plan.
    fn index_change(&mut self, table: &str, f: &Field, old: &RecordedField) {
        let was = !old.unique && (old.index || old.ty == "reference");
        let is = crate::storage::ddl::indexed(f);
        if was == is {
            return;
        }
        if !is {
            self.push_sql(sql::drop_indexes(
                self.d,
                &[format!("{table}_{}_idx", f.name)],
            ));
        }
        self.out.steps.push(Step::Index {
            entity: table.to_string(),
            field: f.name.clone(),
            create: is,
        });
    }
}

/// The recorded definition of `column`, or (no record) today's field `f` when it names it.
fn before(rec: Option<&RecordedEntity>, column: &str, f: &Field) -> Option<RecordedField> {
    match rec {
        Some(r) => r.fields.iter().find(|g| g.name == column).cloned(),
        None => Some(RecordedField::of(f)),
    }
}

/// The index names the additive plan gives field `field` of `table`.
fn field_indexes(table: &str, field: &str, def: Option<&RecordedField>) -> Vec<String> {
    let Some(def) = def else { return Vec::new() };
    let mut out = Vec::new();
    if def.unique {
        out.push(format!("{table}_{field}_key"));
    }
    if def.ty == "reference" || def.index {
        out.push(format!("{table}_{field}_idx"));
    }
    out
}

/// A stored value as a refusal shows it.
fn shown(v: &Value) -> String {
    let j = v.to_json();
    let s = match &j {
        serde_json::Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    };
    if s.chars().count() > 60 {
        format!("{}...", s.chars().take(60).collect::<String>())
    } else {
        s
    }
}

/// `id 3: "a rather long title", id 7: "..."`.
fn rows_named(rows: &[(i64, Value)]) -> String {
    let parts: Vec<String> = rows
        .iter()
        .map(|(id, v)| format!("id {id}: {}", shown(v)))
        .collect();
    parts.join(", ")
}
