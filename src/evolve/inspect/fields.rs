//! The checks of one kept field against its stored rows: a type, enum values or a reference
//! that the rows must fit (refused with the first rows that do not), and the conversions a
//! changed type needs.

use super::{Inspect, field_indexes, rows_named, shown};
use crate::evolve::record::RecordedField;
use crate::evolve::{Action, FIRST_ROWS, Step, convert, plural};
use crate::schema::{ColType, Entity, Field, FieldType};
use crate::storage::evolve::{self as sql, Unfit};
use crate::storage::{StorageError, Value};

impl Inspect<'_> {
    /// Checks a kept field against its stored rows.
    pub(super) async fn field(
        &mut self,
        e: &Entity,
        f: &Field,
        table: &str,
        column: &str,
        old: &RecordedField,
    ) -> Result<(), StorageError> {
        let name = &e.name;
        let old_ty = old.field_type();
        if old_ty != f.ty {
            return self.convert(e, f, table, column, old).await;
        }
        let shorter = match (old.max_length, f.max_length) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(a), Some(b)) => b < a,
        };
        if shorter || (f.required && !old.required) {
            self.lock(table).await?;
        }
        if let (true, Some(n)) = (shorter, f.max_length) {
            let (count, first) = sql::unfit(
                self.ex,
                self.d,
                table,
                column,
                ColType::Text,
                Unfit::Longer(n),
                FIRST_ROWS,
            )
            .await?;
            if count > 0 {
                self.refuse(
                    &e.source,
                    f.line,
                    format!(
                        "field `{name}.{}`: `max_length: {n}` does not fit {count} stored value{} ({}); shorten them first, or keep the longer limit",
                        f.name,
                        plural(count),
                        rows_named(&first)
                    ),
                );
            } else {
                let rows = self.count(table).await?;
                self.out.steps.push(Step::Check {
                    entity: name.clone(),
                    field: f.name.clone(),
                    what: format!("max_length {n}"),
                    rows,
                });
            }
        }
        if f.required && !old.required {
            let (count, first) = sql::unfit(
                self.ex,
                self.d,
                table,
                column,
                f.ty.col_type(),
                Unfit::Empty,
                FIRST_ROWS,
            )
            .await?;
            if count > 0 {
                let ids: Vec<String> = first.iter().map(|(id, _)| format!("id {id}")).collect();
                self.refuse(
                    &e.source,
                    f.line,
                    format!(
                        "field `{name}.{}`: `required: true` does not fit {count} row{} without a value ({}); give them a value first",
                        f.name,
                        plural(count),
                        ids.join(", ")
                    ),
                );
            } else {
                let rows = self.count(table).await?;
                self.out.steps.push(Step::Check {
                    entity: name.clone(),
                    field: f.name.clone(),
                    what: "required".into(),
                    rows,
                });
            }
        }
        Ok(())
    }

    /// A decimal column of an earlier version (binary floating point) becomes exact: each
    /// stored float is read as its shortest form, the digits it was written and shown with,
    /// and the column gets the exact type. A float no decimal holds refuses the start.
    pub(super) async fn exact(
        &mut self,
        e: &Entity,
        f: &Field,
        table: &str,
        column: &str,
        old: &RecordedField,
    ) -> Result<(), StorageError> {
        self.lock(table).await?;
        let mut converted = Vec::new();
        let mut failed: Vec<(i64, Value, String)> = Vec::new();
        let mut failures = 0i64;
        let mut after = 0i64;
        loop {
            // Nulls too: the column comes back with its default, which must not fill them.
            let page = sql::rows_after(
                self.ex,
                self.d,
                table,
                column,
                ColType::Float,
                after,
                10_000,
            )
            .await?;
            let Some((last, _)) = page.last() else { break };
            after = *last;
            for (id, v) in page {
                let Value::Float(Some(x)) = v else {
                    converted.push((id, Value::Decimal(None)));
                    continue;
                };
                match crate::decimal::from_f64(x) {
                    Ok(d) => converted.push((id, Value::Decimal(Some(d)))),
                    Err(why) => {
                        failures += 1;
                        if failed.len() < FIRST_ROWS as usize {
                            failed.push((id, v, why.to_string()));
                        }
                    }
                }
            }
        }
        if failures > 0 {
            let named: Vec<String> = failed
                .iter()
                .map(|(id, v, why)| format!("id {id}: {} ({why})", shown(v)))
                .collect();
            self.refuse(
                &e.source,
                f.line,
                format!(
                    "field `{}.{}` holds {failures} floating-point value{} that no exact decimal holds ({}); change or empty them first, with the version that wrote them",
                    e.name,
                    f.name,
                    plural(failures),
                    named.join("; ")
                ),
            );
            return Ok(());
        }
        // Renames of the table and the column come first in the change: write to the new names.
        let old_indexes = field_indexes(&e.name, column, Some(old));
        self.push_sql(sql::retype(self.d, &e.name, f, &old_indexes));
        let n = converted.len();
        self.actions.push(Action::Values {
            table: e.name.clone(),
            column: f.name.clone(),
            values: converted,
        });
        self.out.steps.push(Step::Convert {
            entity: e.name.clone(),
            field: f.name.clone(),
            from: "decimal stored as binary floating point".into(),
            to: "exact decimal".into(),
            rows: n,
        });
        Ok(())
    }

    /// A type change: every stored value must convert; then the column is rewritten.
    async fn convert(
        &mut self,
        e: &Entity,
        f: &Field,
        table: &str,
        column: &str,
        old: &RecordedField,
    ) -> Result<(), StorageError> {
        let old_ty = old.field_type();
        self.lock(table).await?;
        let mut converted = Vec::new();
        let mut changed = Vec::new();
        let mut failed: Vec<(i64, Value, String)> = Vec::new();
        let mut failures = 0i64;
        let mut after = 0i64;
        loop {
            let page = sql::values_after(
                self.ex,
                self.d,
                table,
                column,
                old_ty.col_type(),
                after,
                10_000,
            )
            .await?;
            let Some((last, _)) = page.last() else { break };
            after = *last;
            for (id, v) in page {
                match convert::value(&v.to_json(), f) {
                    Ok(new) => {
                        let nv = Value::from_json_owned(f.ty.col_type(), new);
                        if nv != v {
                            changed.push((id, nv.clone()));
                        }
                        converted.push((id, nv));
                    }
                    Err(why) => {
                        failures += 1;
                        if failed.len() < FIRST_ROWS as usize {
                            failed.push((id, v, why));
                        }
                    }
                }
            }
        }
        let (from, to) = (describe(&old_ty), describe(&f.ty));
        if failures > 0 {
            let named: Vec<String> = failed
                .iter()
                .map(|(id, v, why)| format!("id {id}: {} ({why})", shown(v)))
                .collect();
            self.refuse(
                &e.source,
                f.line,
                format!(
                    "field `{}.{}` cannot change from {from} to {to}: {failures} stored value{} do{} not fit ({}); change or empty them first, or keep the type",
                    e.name,
                    f.name,
                    plural(failures),
                    if failures == 1 { "es" } else { "" },
                    named.join("; ")
                ),
            );
            return Ok(());
        }
        let rows = converted.len();
        if old_ty.col_type() != f.ty.col_type() {
            let old_indexes = field_indexes(&e.name, column, Some(old));
            let field = Field {
                name: f.name.clone(),
                ..f.clone()
            };
            self.push_sql(sql::retype(self.d, &e.name, &field, &old_indexes));
            self.actions.push(Action::Values {
                table: e.name.clone(),
                column: f.name.clone(),
                values: converted,
            });
        } else if !changed.is_empty() {
            self.actions.push(Action::Values {
                table: e.name.clone(),
                column: f.name.clone(),
                values: changed,
            });
        }
        self.out.steps.push(Step::Convert {
            entity: e.name.clone(),
            field: f.name.clone(),
            from,
            to,
            rows,
        });
        Ok(())
    }
}

/// `integer`, `enum (a, b)`, `reference to users`.
fn describe(ty: &FieldType) -> String {
    match ty {
        FieldType::Enum(v) => format!("enum ({})", v.join(", ")),
        FieldType::Reference(t) => format!("reference to {t}"),
        t => t.name().to_string(),
    }
}
