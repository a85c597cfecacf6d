//! Reads: one object by id, or a filtered page of a collection with its total count and, while
//! more rows follow, the cursor that continues after its last row. Point reads run as the
//! storage runs them (on SQLite, on the calling thread), pages and counts on its list lane. List
//! pages are CPU work (query, decode, render) that cannot run faster than the cores allow, so at
//! most one page per core is in progress; more wait their turn without using the CPU, which
//! leaves it to point reads (an object by id, a sign-in), which are never queued.

use super::access::{self, ListRule, ViewCheck};
use super::{CallError, Caller, Engine, internal, render};
use super::{cursor, query};
use crate::schema::Entity;
use crate::storage::{ListExec, PointRow, PoolExec, entity};
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

/// What a list asks for: query parameters that are not reserved (filters: `field=value` and
/// `field[op]=value`), `sort`, `fields`, the page size and where the page starts.
#[derive(Debug, Clone)]
pub struct ListQuery {
    pub filters: Vec<(String, String)>,
    pub sort: Option<String>,
    pub fields: Option<String>,
    /// Only the objects this background request created or changed (its visibility to the
    /// caller is checked by the caller of [`Engine::list`]).
    pub changed_by: Option<String>,
    pub limit: i64,
    pub start: PageStart,
}

/// A page of objects and the number of objects matching the filters.
pub struct Page {
    pub entity: Arc<Entity>,
    pub items: Vec<Json>,
    pub total: i64,
    /// The cursor of the next page; `None` on the last page (and with `limit=0`).
    pub next: Option<String>,
    /// The columns asked for with `fields`, in that order; `None` for all.
    pub columns: Option<Vec<String>>,
}

impl Engine {
    fn entity(&self, name: &str) -> Result<Arc<Entity>, CallError> {
        self.catalog.load().entity(name)
    }

    /// One object.
    pub async fn get(&self, caller: &Caller, name: &str, id: i64) -> Result<Json, CallError> {
        let (e, point) = self.get_row(caller, name, id).await?;
        Ok(render::object(&e, &point.row))
    }

    /// One object as its entity and stored row, for a caller that writes the object itself
    /// ([`render::RowObject`]) without building its tree of values; the row keeps its JSON
    /// ([`PointRow::json`]) for the next read that finds it remembered.
    pub async fn get_row(
        &self,
        caller: &Caller,
        name: &str,
        id: i64,
    ) -> Result<(Arc<Entity>, Arc<PointRow>), CallError> {
        let e = self.entity(name)?;
        let missing = || CallError::NotFound {
            entity: name.to_string(),
            id,
        };
        let check = access::view_check(&e, caller)?;
        let row = match check {
            ViewCheck::Hidden => return Err(missing()),
            ViewCheck::InSql(x) => {
                let mut pool = PoolExec(self.storage.as_ref());
                let d = self.storage.dialect();
                let who = access::values_of(caller);
                crate::storage::rules::get_where(&mut pool, d, &e, id, x, &who)
                    .await
                    .map(|row| row.map(|r| Arc::new(PointRow::new(r))))
            }
            ViewCheck::None | ViewCheck::OnRow(_) => self.read_row(&e, id).await?,
        };
        let row = match row.map_err(internal)? {
            Some(row) => match check {
                ViewCheck::OnRow(x) if !access::row_passes(&e, x, caller, &row.row) => None,
                _ => Some(row),
            },
            None => None,
        };
        match row {
            Some(row) => Ok((e, row)),
            None => Err(missing()),
        }
    }

    /// Whether `caller` may read the stored file at `url` of entity `name`: its rule admits
    /// every row, or a row it admits holds the URL.
    pub async fn file_visible(
        &self,
        caller: &Caller,
        name: &str,
        url: &str,
    ) -> Result<bool, CallError> {
        let e = self.entity(name)?;
        Ok(
            match access::list_filter(&e, crate::schema::Action::View, caller) {
                Err(_) | Ok(Some(ListRule::Nothing)) => false,
                Ok(None) => true,
                Ok(Some(ListRule::Where(f))) => {
                    let mut pool = PoolExec(self.storage.as_ref());
                    crate::storage::rules::row_mentions(&mut pool, self.storage.dialect(), &f, url)
                        .await
                        .map_err(internal)?
                }
            },
        )
    }

    /// The row `id` of `e`, through the shared point reads where there are some.
    async fn read_row(
        &self,
        e: &Arc<Entity>,
        id: i64,
    ) -> Result<Result<Option<Arc<PointRow>>, crate::storage::StorageError>, CallError> {
        Ok(match &self.points {
            Some(q) => {
                let (reply, rx) = tokio::sync::oneshot::channel();
                let job = super::points::Job {
                    entity: e.clone(),
                    id,
                    reply,
                };
                if q.send(job).await.is_err() {
                    return Err(CallError::Internal);
                }
                rx.await
                    .map_err(|_| CallError::Internal)?
                    .map(|row| row.map(|r| Arc::new(PointRow::new(r))))
            }
            None => entity::get_point(self.storage.as_ref(), e, id).await,
        })
    }

    /// A page of a collection: filtered, sorted, with the chosen columns (see [`ListQuery`]).
    pub async fn list(&self, caller: &Caller, name: &str, q: ListQuery) -> Result<Page, CallError> {
        let e = self.entity(name)?;
        let rule = access::list_filter(&e, crate::schema::Action::List, caller)?;
        let mut conds = query::filters(&e, q.filters)?;
        if let Some(rid) = q.changed_by {
            conds.push(query::changed_by(rid)?);
        }
        let sort = match &q.sort {
            Some(s) => query::sort(&e, s)?,
            None => Vec::new(),
        };
        let columns = match &q.fields {
            Some(s) => Some(query::fields(&e, s)?),
            None => None,
        };
        let start = match q.start {
            PageStart::Offset(n) => entity::Start::Offset(n),
            PageStart::Cursor(c) => {
                entity::Start::After(query::after(&e, &sort, &cursor::decode(&c)?)?)
            }
        };
        match rule {
            None => {}
            Some(ListRule::Nothing) => {
                return Ok(Page {
                    entity: e,
                    items: Vec::new(),
                    total: 0,
                    next: None,
                    columns,
                });
            }
            Some(ListRule::Where(f)) => conds.push(entity::Filter {
                column: "id".into(),
                cond: entity::Cond::Rule(Box::new(f)),
            }),
        }
        let _turn = self
            .lists
            .acquire()
            .await
            .map_err(|_| CallError::Internal)?;
        let d = self.storage.dialect();
        let mut lists = ListExec(self.storage.as_ref());
        // One row more than asked tells whether another page follows.
        let limit = q.limit;
        let mut rows = entity::list(&mut lists, d, &e, &conds, &sort, limit + 1, &start)
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
            Some(last) if more => Some(cursor::encode(&query::cursor_keys(&e, &sort, last))),
            _ => None,
        };
        let items = rows
            .iter()
            .map(|r| {
                let obj = render::object(&e, r);
                match &columns {
                    Some(cols) => render::project(obj, cols),
                    None => obj,
                }
            })
            .collect();
        Ok(Page {
            entity: e,
            items,
            total,
            next,
            columns,
        })
    }
}
