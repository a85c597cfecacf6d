//! Reads numbered changes back from the log ([`crate::storage::live`]) as one [`Change`] per
//! object, each with the object's row before and after it. The log keeps only the row before
//! an update or a delete; the row after a change is the row before the object's next change,
//! or, when there is none, the row as it is now. The rows are read before the later changes,
//! so a change committed in between is among those found, and the row before it is used.

use crate::schema::Catalog;
use crate::schema::Entity;
use crate::storage::changes::ChangeOp;
use crate::storage::live::{self, Entry};
use crate::storage::{Dialect, Exec, PoolExec, Result, Row, Storage, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// One committed change of one object.
#[derive(Debug, Clone)]
pub struct Change {
    pub seq: i64,
    pub entity: Arc<Entity>,
    pub op: ChangeOp,
    pub id: i64,
    /// The stored row before an update or a delete.
    pub before: Option<Arc<Row>>,
    /// The stored row after a create or an update.
    pub after: Option<Arc<Row>>,
}

/// A page of changes: those numbered above `after`, from at most `entries` log rows; and the
/// newest number the page covers (`after` itself when there was nothing).
pub struct Page {
    pub changes: Vec<Change>,
    pub upto: i64,
}

/// Most changes one page holds: a range of creates is cut to fit.
const MAX_CHANGES: i64 = 2000;

/// The log rows `log` (numbered above `after` at their end) cut to the changes above `after`,
/// at most [`MAX_CHANGES`] of them: a range of creates loses its ids numbered up to `after`
/// and, past the limit, its last ids.
fn clip(log: Vec<Entry>, after: i64) -> Vec<Entry> {
    let mut out = Vec::with_capacity(log.len());
    let mut left = MAX_CHANGES;
    for mut e in log {
        if left <= 0 {
            break;
        }
        if e.seq <= after {
            let skip = after - e.seq + 1;
            e.lo += skip;
            e.seq += skip;
        }
        if e.hi - e.lo + 1 > left {
            e.hi = e.lo + left - 1;
        }
        left -= e.hi - e.lo + 1;
        out.push(e);
    }
    out
}

/// Reads the changes numbered above `after`, from at most `entries` log rows and at most
/// [`MAX_CHANGES`] changes, of the entities `wanted`. Changes of entities the catalog no longer
/// has are skipped.
pub async fn page(
    storage: &dyn Storage,
    catalog: &Catalog,
    after: i64,
    entries: i64,
    wanted: &[String],
) -> Result<Page> {
    let d = storage.dialect();
    let mut ex = PoolExec(storage);
    let log = clip(live::page(&mut ex, d, after, entries).await?, after);
    let upto = log.last().map_or(after, Entry::last);
    let mut changes = Vec::new();
    let mut by_entity: HashMap<&str, Vec<&Entry>> = HashMap::new();
    for entry in &log {
        by_entity
            .entry(entry.entity.as_str())
            .or_default()
            .push(entry);
    }
    for (name, entries) in by_entity {
        let Some(e) = catalog
            .get(name)
            .filter(|_| wanted.iter().any(|w| w == name))
        else {
            continue;
        };
        changes.extend(of_entity(&mut ex, d, e, &entries, after).await?);
    }
    changes.sort_by_key(|c| c.seq);
    Ok(Page { changes, upto })
}

/// The changes of one entity's log rows `entries` (in order), numbered above `after`.
async fn of_entity(
    ex: &mut dyn Exec,
    d: Dialect,
    e: &Arc<Entity>,
    entries: &[&Entry],
    after: i64,
) -> Result<Vec<Change>> {
    let lo = entries.iter().map(|x| x.lo).min().unwrap_or(0);
    let hi = entries.iter().map(|x| x.hi).max().unwrap_or(0);
    let ids: Vec<i64> = entries
        .iter()
        .filter(|x| x.op != ChangeOp::Delete)
        .flat_map(|x| x.lo..=x.hi)
        .collect();
    let now = current_rows(ex, d, e, &ids).await?;
    let first = entries.first().map_or(after, |x| x.seq);
    let mut later: HashMap<i64, Vec<(i64, String)>> = HashMap::new();
    for (id, seq, before) in live::later_rows(ex, d, &e.name, lo, hi, first).await? {
        later.entry(id).or_default().push((seq, before));
    }
    let after_of = |id: i64, seq: i64| -> Option<Arc<Row>> {
        let next = later
            .get(&id)
            .and_then(|l| l.iter().find(|(s, _)| *s > seq));
        match next {
            Some((_, json)) => live::json_row(e, json).map(Arc::new),
            None => now.get(&id).cloned(),
        }
    };
    let mut out = Vec::new();
    for x in entries {
        let before = x
            .before
            .as_deref()
            .and_then(|j| live::json_row(e, j))
            .map(Arc::new);
        for id in x.lo..=x.hi {
            let seq = x.seq_of(id);
            if seq <= after {
                continue;
            }
            out.push(Change {
                seq,
                entity: e.clone(),
                op: x.op,
                id,
                before: before.clone(),
                after: (x.op != ChangeOp::Delete)
                    .then(|| after_of(id, seq))
                    .flatten(),
            });
        }
    }
    Ok(out)
}

/// The stored rows of `e` with these ids, by id: read as one range when they are close
/// together (a range of creates), else by id.
async fn current_rows(
    ex: &mut dyn Exec,
    d: Dialect,
    e: &Entity,
    ids: &[i64],
) -> Result<HashMap<i64, Arc<Row>>> {
    let (Some(&lo), Some(&hi)) = (ids.iter().min(), ids.iter().max()) else {
        return Ok(HashMap::new());
    };
    let rows = if hi - lo < 4 * ids.len() as i64 + 64 {
        live::rows_between(ex, d, e, lo, hi).await?
    } else {
        crate::storage::changes::rows_by_ids(ex, d, e, ids).await?
    };
    Ok(rows
        .into_iter()
        .filter_map(|r| Some((r.first().and_then(Value::as_i64)?, Arc::new(r))))
        .collect())
}
