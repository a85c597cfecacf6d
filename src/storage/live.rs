//! SQL of `live_changes`, every committed change of an entity's rows in commit order, which
//! live changes ([`crate::live`]) stream and page through. A row of it is the objects
//! `lo..=hi` of an entity created together, numbered `seq ..= seq + hi - lo`, or one object
//! updated or deleted, numbered `seq`, with its stored row before the change.
//!
//! - On SQLite the one writer logs its own changes: the storage's insert, update and delete
//!   functions ([`super::entity`], [`super::changes`]) tell the transaction what they changed
//!   ([`super::Exec::log_live`]), and it numbers and writes them before each savepoint
//!   statement and before it commits ([`append`]), so a savepoint's rollback takes its changes
//!   with it and numbers follow commit order.
//! - On PostgreSQL the statement triggers ([`super::pg_triggers`]) write the changes of every
//!   writer unnumbered, in the writing transaction. A sequencer pass ([`number`]), one at a
//!   time across the fleet, numbers what has committed and tells every server
//!   (`entiserve_live`). A row is numbered only once committed, and passes never overlap, so a
//!   reader that has seen number n never meets a new row numbered n or less.
//!
//! What an object looked like after a change is not stored: it is the row before the object's
//! next change, or, when there is none, the row as it is now ([`later_rows`]).

use super::changes::ChangeOp;
use super::sql::Dialect;
use super::{Exec, Result, Row, Value};
use crate::schema::{ColType, Entity};

/// PostgreSQL channel a sequencer pass notifies, with the newest number, when it numbered some.
pub const NUMBERED_CHANNEL: &str = "entiserve_live";

/// Most rows one sequencer pass numbers.
const PASS: i64 = 5000;
/// Rows per `INSERT` of [`append`] (7 values each, inside SQLite's parameter limit).
const ROWS_PER_INSERT: usize = 1000;

/// One change as the writer logs it (SQLite).
#[derive(Debug, Clone, PartialEq)]
pub struct Logged {
    pub entity: String,
    pub op: ChangeOp,
    pub lo: i64,
    pub hi: i64,
    /// The stored row before an update or a delete, as JSON (see [`row_json`]).
    pub before: Option<String>,
}

/// One numbered change, as read back.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub seq: i64,
    pub entity: String,
    pub op: ChangeOp,
    pub lo: i64,
    pub hi: i64,
    pub before: Option<String>,
}

impl Entry {
    /// The number of the change of object `id` (within a range of creates).
    pub fn seq_of(&self, id: i64) -> i64 {
        self.seq + (id - self.lo)
    }

    /// The last number this entry holds.
    pub fn last(&self) -> i64 {
        self.seq + (self.hi - self.lo)
    }
}

/// A stored row of `e` (its columns in order) as the JSON `live_changes` keeps.
pub fn row_json(e: &Entity, row: &Row) -> String {
    let mut m = serde_json::Map::new();
    for (c, v) in e.columns().zip(row) {
        m.insert(c.to_string(), v.to_json());
    }
    serde_json::Value::Object(m).to_string()
}

/// The row of `e` (its columns in order) that [`row_json`] wrote, or PostgreSQL's `to_jsonb`
/// of a stored row; `None` when it is not a JSON object.
pub fn json_row(e: &Entity, json: &str) -> Option<Row> {
    let serde_json::Value::Object(mut m) = serde_json::from_str(json).ok()? else {
        return None;
    };
    Some(
        e.columns()
            .zip(e.col_types_once())
            .map(|(c, t)| match m.remove(c) {
                Some(j) => Value::from_json_owned(*t, j),
                None => Value::null(*t),
            })
            .collect(),
    )
}

/// Logs (SQLite) that the statement just run created the objects `ids` of `e`, in runs of
/// consecutive ids. PostgreSQL's triggers log by themselves.
pub async fn log_created(ex: &mut dyn Exec, d: Dialect, e: &Entity, ids: &[i64]) -> Result<()> {
    if d != Dialect::Sqlite {
        return Ok(());
    }
    for (lo, hi) in runs(ids) {
        ex.log_live(created(e, lo, hi)).await?;
    }
    Ok(())
}

/// [`log_created`] of the rows a statement returned (the id first in each).
pub async fn log_created_rows(
    ex: &mut dyn Exec,
    d: Dialect,
    e: &Entity,
    rows: &[Row],
) -> Result<()> {
    if d != Dialect::Sqlite {
        return Ok(());
    }
    let ids: Vec<i64> = rows.iter().filter_map(|r| r.first()?.as_i64()).collect();
    log_created(ex, d, e, &ids).await
}

/// The runs of consecutive numbers in `ids`, as (first, last).
fn runs(ids: &[i64]) -> Vec<(i64, i64)> {
    let mut out: Vec<(i64, i64)> = Vec::new();
    for &id in ids {
        match out.last_mut() {
            Some((_, hi)) if id == *hi + 1 => *hi = id,
            _ => out.push((id, id)),
        }
    }
    out
}

fn created(e: &Entity, lo: i64, hi: i64) -> Logged {
    Logged {
        entity: e.name.clone(),
        op: ChangeOp::Create,
        lo,
        hi,
        before: None,
    }
}

/// Logs (SQLite) that the statement just run updated or deleted the object whose stored row
/// was `before` (its first column the id).
pub async fn log_changed(
    ex: &mut dyn Exec,
    d: Dialect,
    e: &Entity,
    op: ChangeOp,
    before: &Row,
) -> Result<()> {
    if d != Dialect::Sqlite {
        return Ok(());
    }
    let Some(id) = before.first().and_then(Value::as_i64) else {
        return Ok(());
    };
    ex.log_live(Logged {
        entity: e.name.clone(),
        op,
        lo: id,
        hi: id,
        before: Some(row_json(e, before)),
    })
    .await
}

/// SQLite: the statement that takes `?1` numbers from `live_seq`, returning the first.
pub const TAKE_NUMBERS: &str =
    "UPDATE \"live_seq\" SET \"next\" = \"next\" + ?1 RETURNING \"next\" - ?1";

/// How many numbers `changes` take.
pub fn numbers_needed(changes: &[Logged]) -> i64 {
    changes.iter().map(|c| c.hi - c.lo + 1).sum()
}

/// SQLite: the statements (and their arguments) that write `changes`, numbered from `first`
/// on, committed `at` (seconds since the epoch).
pub fn inserts(changes: &[Logged], first: i64, at: i64) -> Vec<(String, Vec<Value>)> {
    let mut seq = first;
    changes
        .chunks(ROWS_PER_INSERT)
        .map(|part| {
            let sql = format!(
                "INSERT INTO \"live_changes\" (\"seq\", \"entity\", \"op\", \"lo\", \"hi\", \"before\", \"at\") VALUES {}",
                Dialect::Sqlite.value_groups(7, part.len(), 1)
            );
            let mut args = Vec::with_capacity(part.len() * 7);
            for c in part {
                args.extend([
                    Value::int(seq),
                    Value::text(c.entity.clone()),
                    Value::text(c.op.name()),
                    Value::int(c.lo),
                    Value::int(c.hi),
                    Value::Text(c.before.clone()),
                    Value::int(at),
                ]);
                seq += c.hi - c.lo + 1;
            }
            (sql, args)
        })
        .collect()
}

/// SQLite: numbers `changes` and writes them through `ex`, committed `at`.
pub async fn append<E: Exec + ?Sized>(ex: &mut E, changes: &[Logged], at: i64) -> Result<()> {
    let total = numbers_needed(changes);
    if total == 0 {
        return Ok(());
    }
    let rows = ex
        .fetch(TAKE_NUMBERS, &[Value::int(total)], &[ColType::Int])
        .await?;
    let first = rows.first().and_then(|r| r[0].as_i64()).unwrap_or(1);
    for (sql, args) in inserts(changes, first, at) {
        ex.execute(&sql, &args).await?;
    }
    Ok(())
}

/// PostgreSQL: the statement that begins a sequencer pass's transaction (one round trip):
/// passes of every server wait for each other on the advisory lock, taken before [`number`]'s
/// statement reads anything, and the pass fixes its plan: the unnumbered rows by a plain index
/// scan, then each of them by its key.
///
/// - Numbering a row leaves its entry in the index of unnumbered rows until `VACUUM` takes it:
///   under a steady stream of writes there are soon a hundred thousand such entries. A bitmap
///   scan of that index reads them all, and their rows, on every pass (16 ms a pass, with the
///   sequencer busy all the time); a plain index scan marks each one dead the first time it
///   meets it, so that later passes skip them.
/// - When statistics taken during a burst of writes expect many unnumbered rows, the planner
///   picks a merge join that walks the log's whole primary key on every pass; a pass numbers
///   at most [`PASS`] rows, so looking each up by its key is never worse.
/// - Such an estimate also puts the statement's cost over `jit_above_cost`, and compiling it
///   takes a quarter of a second, on every pass.
pub const PASS_BEGIN: &str = "BEGIN; SELECT pg_advisory_xact_lock(7286917412); \
     SET LOCAL enable_bitmapscan = off; SET LOCAL enable_mergejoin = off; \
     SET LOCAL enable_hashjoin = off; SET LOCAL jit = off";

/// PostgreSQL: one sequencer pass, in the transaction `ex` that [`PASS_BEGIN`] began: numbers
/// up to [`PASS`] committed rows in the order they were logged and notifies
/// [`NUMBERED_CHANNEL`], in one statement; the newest number and whether the pass was full, or
/// `None` when there was nothing to number.
pub async fn number(ex: &mut dyn Exec) -> Result<Option<(i64, bool)>> {
    let sql = format!(
        "WITH todo AS (SELECT \"lid\", \"hi\" - \"lo\" + 1 AS \"n\", \
           SUM(\"hi\" - \"lo\" + 1) OVER (ORDER BY \"lid\") AS \"upto\" \
           FROM \"live_changes\" WHERE \"seq\" IS NULL ORDER BY \"lid\" LIMIT {PASS}), \
         total AS (SELECT COALESCE(MAX(\"upto\"), 0)::BIGINT AS \"t\", COUNT(*) AS \"c\" FROM todo), \
         bump AS (UPDATE \"live_seq\" SET \"next\" = \"next\" + (SELECT \"t\" FROM total) \
           WHERE (SELECT \"t\" FROM total) > 0 RETURNING \"next\" - (SELECT \"t\" FROM total) AS \"base\"), \
         done AS (UPDATE \"live_changes\" l SET \"seq\" = bump.\"base\" + todo.\"upto\" - todo.\"n\" \
           FROM todo, bump WHERE l.\"lid\" = todo.\"lid\" RETURNING 1) \
         SELECT r.\"newest\", r.\"c\", CASE WHEN r.\"newest\" IS NOT NULL THEN \
           (SELECT 1::BIGINT FROM pg_notify('{NUMBERED_CHANNEL}', r.\"newest\"::text)) END \
         FROM (SELECT (SELECT \"base\" FROM bump) + (SELECT \"t\" FROM total) - 1 AS \"newest\", \
           (SELECT COUNT(*) FROM done) AS \"c\") r"
    );
    let rows = ex
        .fetch(&sql, &[], &[ColType::Int, ColType::Int, ColType::Int])
        .await?;
    let Some(newest) = rows.first().and_then(|r| r[0].as_i64()) else {
        return Ok(None);
    };
    let full = rows.first().and_then(|r| r[1].as_i64()) == Some(PASS);
    Ok(Some((newest, full)))
}

/// The newest number given so far (0 before the first change) and the first one still kept.
pub async fn bounds(ex: &mut dyn Exec) -> Result<(i64, i64)> {
    let rows = ex
        .fetch(
            "SELECT \"next\" - 1, \"kept_from\" FROM \"live_seq\"",
            &[],
            &[ColType::Int, ColType::Int],
        )
        .await?;
    let r = rows.first();
    Ok((
        r.and_then(|r| r[0].as_i64()).unwrap_or(0),
        r.and_then(|r| r[1].as_i64()).unwrap_or(1),
    ))
}

const ENTRY_TYPES: [ColType; 6] = [
    ColType::Int,
    ColType::Text,
    ColType::Text,
    ColType::Int,
    ColType::Int,
    ColType::Text,
];

/// Up to `limit` numbered entries holding a number above `after`, in order (the first may
/// begin at or before `after`, inside a range of creates).
pub async fn page(ex: &mut dyn Exec, d: Dialect, after: i64, limit: i64) -> Result<Vec<Entry>> {
    let sql = d.bind(
        "SELECT \"seq\", \"entity\", \"op\", \"lo\", \"hi\", \"before\" FROM \"live_changes\" \
         WHERE \"seq\" >= COALESCE((SELECT MAX(\"seq\") FROM \"live_changes\" WHERE \"seq\" <= ?), 0) \
         AND \"seq\" IS NOT NULL ORDER BY \"seq\" LIMIT ?",
    );
    let rows = ex
        .fetch(&sql, &[Value::int(after), Value::int(limit)], &ENTRY_TYPES)
        .await?;
    Ok(rows
        .into_iter()
        .filter_map(|r| {
            let mut r = r.into_iter();
            let mut next = || r.next().unwrap_or(Value::Int(None));
            let entry = Entry {
                seq: next().as_i64()?,
                entity: next().into_string()?,
                op: ChangeOp::parse(&next().into_string()?)?,
                lo: next().as_i64()?,
                hi: next().as_i64()?,
                before: next().into_string(),
            };
            (entry.last() > after).then_some(entry)
        })
        .collect())
}

/// The updates and deletes of `entity`'s objects `lo..=hi` logged after number `after`
/// (including, on PostgreSQL, those committed but not numbered yet), in order: the object id,
/// the change's number (`i64::MAX` while it has none) and the stored row before it.
pub async fn later_rows(
    ex: &mut dyn Exec,
    d: Dialect,
    entity: &str,
    lo: i64,
    hi: i64,
    after: i64,
) -> Result<Vec<(i64, i64, String)>> {
    let (seq, order) = match d {
        Dialect::Sqlite => ("\"seq\"", "\"seq\""),
        Dialect::Postgres => (
            "COALESCE(\"seq\", 9223372036854775807)",
            "\"seq\" NULLS LAST, \"lid\"",
        ),
    };
    let sql = d.bind(&format!(
        "SELECT \"lo\", {seq}, \"before\" FROM \"live_changes\" \
         WHERE \"entity\" = ? AND \"lo\" BETWEEN ? AND ? AND \"op\" <> 'create' \
         AND (\"seq\" > ? OR \"seq\" IS NULL) ORDER BY {order}"
    ));
    let args = [
        Value::text(entity),
        Value::int(lo),
        Value::int(hi),
        Value::int(after),
    ];
    let rows = ex
        .fetch(&sql, &args, &[ColType::Int, ColType::Int, ColType::Text])
        .await?;
    Ok(rows
        .into_iter()
        .filter_map(|r| {
            let mut r = r.into_iter();
            let id = r.next()?.as_i64()?;
            let seq = r.next()?.as_i64()?;
            Some((id, seq, r.next()?.into_string()?))
        })
        .collect())
}

/// Drops the numbered changes committed more than `keep_secs` seconds ago and records the first
/// number still kept; how many rows went.
pub async fn prune(ex: &mut dyn Exec, d: Dialect, keep_secs: i64) -> Result<u64> {
    let old = match d {
        Dialect::Sqlite => {
            "DELETE FROM \"live_changes\" WHERE \"at\" < CAST(strftime('%s', 'now') AS INTEGER) - ?1"
        }
        Dialect::Postgres => {
            "DELETE FROM \"live_changes\" WHERE \"seq\" IS NOT NULL \
             AND \"at\" < now() - make_interval(secs => $1::float8)"
        }
    };
    let gone = ex.execute(old, &[Value::int(keep_secs)]).await?;
    if gone > 0 {
        ex.execute(
            "UPDATE \"live_seq\" SET \"kept_from\" = COALESCE((SELECT MIN(\"seq\") FROM \"live_changes\" \
             WHERE \"seq\" IS NOT NULL), \"next\")",
            &[],
        )
        .await?;
    }
    Ok(gone)
}

/// The stored rows of `e` whose ids are `lo..=hi`, in id order.
pub async fn rows_between(
    ex: &mut dyn Exec,
    d: Dialect,
    e: &Entity,
    lo: i64,
    hi: i64,
) -> Result<Vec<Row>> {
    let cols: Vec<String> = e.columns().map(|c| d.quote(c)).collect();
    let sql = d.bind(&format!(
        "SELECT {} FROM {} WHERE \"id\" BETWEEN ? AND ? ORDER BY \"id\"",
        cols.join(", "),
        d.quote(&e.name)
    ));
    ex.fetch(&sql, &[Value::int(lo), Value::int(hi)], e.col_types_once())
        .await
}
