//! Reads: one object by id, or a filtered page of a collection with its total count.

use super::prepare::{coerce_strings, may_read};
use super::{CallError, Caller, Engine, internal, render};
use crate::schema::Entity;
use crate::storage::{PoolExec, Value, entity};
use serde_json::Value as Json;
use std::sync::Arc;

/// Default and largest page size of a list.
pub const DEFAULT_LIMIT: i64 = 1000;
pub const MAX_LIMIT: i64 = 10_000;

/// A page of objects and the number of objects matching the filters.
pub struct Page {
    pub entity: Arc<Entity>,
    pub items: Vec<Json>,
    pub total: i64,
}

impl Engine {
    fn entity(&self, name: &str) -> Result<Arc<Entity>, CallError> {
        self.catalog
            .load()
            .get(name)
            .cloned()
            .ok_or_else(|| CallError::UnknownEntity(name.to_string()))
    }

    /// One object.
    pub async fn get(&self, caller: &Caller, name: &str, id: i64) -> Result<Json, CallError> {
        let e = self.entity(name)?;
        if !may_read(&e, caller, Some(id)) {
            return Err(CallError::Forbidden(format!(
                "your role may not read this {name} object"
            )));
        }
        let mut pool = PoolExec(self.storage.as_ref());
        match entity::get(&mut pool, self.storage.dialect(), &e, id)
            .await
            .map_err(internal)?
        {
            Some(row) => Ok(render::object(&e, &row)),
            None => Err(CallError::NotFound {
                entity: name.to_string(),
                id,
            }),
        }
    }

    /// A page of a collection, filtered by equality on fields (string values, coerced).
    pub async fn list(
        &self,
        caller: &Caller,
        name: &str,
        filters: Vec<(String, String)>,
        limit: i64,
        offset: i64,
    ) -> Result<Page, CallError> {
        let e = self.entity(name)?;
        if !may_read(&e, caller, None) {
            return Err(CallError::Forbidden(format!(
                "your role may not read {name}"
            )));
        }
        let mut conds = Vec::new();
        let mut typed_filters = Vec::new();
        for (k, v) in filters {
            match k.as_str() {
                "id" => match v.trim().parse::<i64>() {
                    Ok(i) => conds.push(entity::Filter {
                        column: k,
                        value: Value::int(i),
                    }),
                    Err(_) => {
                        return Err(CallError::invalid_field(
                            "id",
                            format!("`{v}` is not an integer"),
                        ));
                    }
                },
                "created_dt" | "updated_dt" => conds.push(entity::Filter {
                    column: k,
                    value: Value::text(v),
                }),
                _ => match e.field(&k) {
                    Some(f) if f.secret => return Err(CallError::UnknownFields(vec![k])),
                    Some(f)
                        if v.trim().is_empty()
                            && !matches!(
                                f.ty,
                                crate::schema::FieldType::String | crate::schema::FieldType::Text
                            ) =>
                    {
                        return Err(CallError::invalid_field(
                            &k,
                            "an empty filter value matches nothing; leave the filter out",
                        ));
                    }
                    Some(_) => typed_filters.push((k, v)),
                    None => return Err(CallError::UnknownFields(vec![k])),
                },
            }
        }
        for (k, j) in coerce_strings(&e, typed_filters)? {
            let t = e.col_type(&k).expect("a field");
            conds.push(entity::Filter {
                column: k,
                value: Value::from_json(t, &j),
            });
        }
        if !e.access.read.admits(caller.role) {
            // Only one's own record is visible.
            conds.push(entity::Filter {
                column: "id".into(),
                value: Value::int(caller.id),
            });
        }
        let d = self.storage.dialect();
        let mut pool = PoolExec(self.storage.as_ref());
        let rows = entity::list(&mut pool, d, &e, &conds, limit, offset)
            .await
            .map_err(internal)?;
        let total = if offset == 0 && (rows.len() as i64) < limit {
            rows.len() as i64
        } else {
            entity::count(&mut pool, d, &e, &conds)
                .await
                .map_err(internal)?
        };
        let items = rows.iter().map(|r| render::object(&e, r)).collect();
        Ok(Page {
            entity: e,
            items,
            total,
        })
    }
}
