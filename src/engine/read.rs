//! Reads: one object by id, or a filtered page of a collection with its total count and, while
//! more rows follow, the cursor that continues after its last row. Point reads run on the
//! storage's point-read lane, pages and counts on its list lane. List pages are CPU work
//! (query, decode, render) that cannot run faster than the cores allow, so at most one page per
//! core is in progress; more wait their turn without using the CPU, which leaves it to point
//! reads (an object by id, a sign-in), which are never queued.

use super::cursor;
use super::prepare::{coerce_strings, may_read};
use super::{CallError, Caller, Engine, internal, render};
use crate::schema::Entity;
use crate::storage::{ListExec, PoolExec, Value, entity};
use serde_json::Value as Json;
use std::sync::Arc;

/// Default and largest page size of a list.
pub const DEFAULT_LIMIT: i64 = 1000;
pub const MAX_LIMIT: i64 = 10_000;

/// How many list pages may be in progress at once: one per core.
pub fn list_admission() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().max(2))
}

/// Where a requested page starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageStart {
    /// After skipping this many objects.
    Offset(i64),
    /// Right after the last object of the page that handed out this cursor.
    Cursor(String),
}

/// A page of objects and the number of objects matching the filters.
pub struct Page {
    pub entity: Arc<Entity>,
    pub items: Vec<Json>,
    pub total: i64,
    /// The cursor of the next page; `None` on the last page (and with `limit=0`).
    pub next: Option<String>,
}

impl Engine {
    fn entity(&self, name: &str) -> Result<Arc<Entity>, CallError> {
        self.catalog.load().entity(name)
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
        start: PageStart,
    ) -> Result<Page, CallError> {
        let start = match start {
            PageStart::Offset(n) => entity::Start::Offset(n),
            PageStart::Cursor(c) => entity::Start::AfterId(cursor::decode(&c)?),
        };
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
                "id" => match crate::input::id(&v) {
                    Some(i) => conds.push(entity::Filter {
                        column: k,
                        value: Value::int(i),
                    }),
                    None => {
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
                    Some(f) if f.secret => return Err(CallError::UnknownFields(vec![(k, None)])),
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
                    None => return Err(CallError::unknown_fields(&e, vec![k])),
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
        let _turn = self
            .lists
            .acquire()
            .await
            .map_err(|_| CallError::Internal)?;
        let d = self.storage.dialect();
        let mut lists = ListExec(self.storage.as_ref());
        // One row more than asked tells whether another page follows.
        let mut rows = entity::list(&mut lists, d, &e, &conds, limit + 1, start)
            .await
            .map_err(internal)?;
        let more = rows.len() as i64 > limit;
        rows.truncate(limit as usize);
        let total = if start == entity::Start::Offset(0) && !more {
            rows.len() as i64
        } else {
            entity::count(&mut lists, d, &e, &conds)
                .await
                .map_err(internal)?
        };
        let next = match rows.last() {
            Some(last) if more => last[0].as_i64().map(cursor::encode),
            _ => None,
        };
        let items = rows.iter().map(|r| render::object(&e, r)).collect();
        Ok(Page {
            entity: e,
            items,
            total,
            next,
        })
    }
}
