//! PostgreSQL: created rows streamed into their table with one `COPY ... FROM STDIN (FORMAT
//! binary)` that stays open across statements of a transaction. A copy costs the database
//! about a millisecond before its first row, and then less a row than `INSERT`, so a group is
//! copied when it is large ([`COPY_ALONE`]), and the groups of creates a transaction runs one
//! after another (an upload's chunks, [`super::Exec::copy_groups`]) share one copy: each
//! group's rows are handed to a task that sends them while the next group is prepared, and the
//! copy ends before the transaction's next statement or its commit, which then see its rows.
//!
//! A copy returns no rows, so the ids are taken from the table's sequence first, on a
//! connection of their own and ahead of the copies that use them ([`Ahead`]); the rows carry
//! them. Only a table where no row of
//! a copy can break a constraint is copied into ([`copyable`]): no unique index but the id's,
//! no reference. A copy that fails anyway (the connection lost, the disk full) fails the
//! transaction's next statement or its commit with its error.

use super::pg_conns::Conns;
use super::{Result, StorageError, Value};
use crate::schema::{ColType, Entity, FieldType};
use sqlx::{Postgres, Transaction};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The fewest rows of a group worth a copy that goes on across the transaction's groups
/// ([`super::Exec::copy_groups`]): a smaller group goes in with `INSERT`.
pub const COPY_ROWS: usize = 200;
/// The fewest rows of a group worth a copy of its own, ended by the transaction's next
/// statement: below it, the copy's cost before its first row is more than it saves.
pub const COPY_ALONE: usize = 4000;

/// The binary format's header: its signature, no flags, no extension.
const HEADER: &[u8] = b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0";
/// The binary format's trailer: a tuple of -1 fields.
const TRAILER: &[u8] = &[0xff, 0xff];

/// What the copy's task is handed.
enum Piece {
    Rows(Vec<u8>),
    /// Ends the copy with its rows. A copy whose sender goes away without it (the transaction
    /// rolled back or dropped) is aborted, its rows not stored.
    End,
}

/// A copy under way: its statement, and the task that owns the transaction while it runs.
pub struct Stream {
    statement: String,
    rows: mpsc::Sender<Piece>,
    task: JoinHandle<(Transaction<'static, Postgres>, Result<u64>)>,
}

impl Stream {
    /// Starts `statement` on `tx`, which the stream holds until it ends.
    pub fn start(tx: Transaction<'static, Postgres>, statement: String) -> Stream {
        // Two groups in flight: the task sends one while the next is made.
        let (rows, rx) = mpsc::channel(2);
        let task = tokio::spawn(run(tx, statement.clone(), rx));
        Stream {
            statement,
            rows,
            task,
        }
    }

    /// Whether rows for `statement` go into this copy.
    pub fn is(&self, statement: &str) -> bool {
        self.statement == statement
    }

    /// Hands rows (tuples of the binary format) to the copy; false when it has failed, which
    /// [`Stream::end`] then says.
    pub async fn send(&self, tuples: Vec<u8>) -> bool {
        self.rows.send(Piece::Rows(tuples)).await.is_ok()
    }

    /// Ends the copy, its rows kept; the transaction, and how the copy went.
    pub async fn end(self) -> Result<(Transaction<'static, Postgres>, Result<u64>)> {
        let _ = self.rows.send(Piece::End).await;
        drop(self.rows);
        self.task
            .await
            .map_err(|e| StorageError::Database(format!("a copy's task ended: {e}")))
    }

    /// Ends the copy without its rows; the transaction, to be rolled back.
    pub async fn abort(self) -> Result<Transaction<'static, Postgres>> {
        drop(self.rows);
        let (tx, _) = self
            .task
            .await
            .map_err(|e| StorageError::Database(format!("a copy's task ended: {e}")))?;
        Ok(tx)
    }
}

/// The copy's task: sends what it is handed until told to end, or aborts the copy when its
/// sender goes away first.
async fn run(
    mut tx: Transaction<'static, Postgres>,
    statement: String,
    mut rx: mpsc::Receiver<Piece>,
) -> (Transaction<'static, Postgres>, Result<u64>) {
    let done = async {
        let mut copy = tx.copy_in_raw(&statement).await?;
        copy.send(HEADER).await?;
        while let Some(piece) = rx.recv().await {
            match piece {
                Piece::Rows(tuples) => {
                    copy.send(tuples).await?;
                }
                Piece::End => {
                    copy.send(TRAILER).await?;
                    return copy.finish().await;
                }
            }
        }
        copy.abort("the transaction is rolled back").await?;
        Ok(0)
    }
    .await
    .map_err(super::postgres::db);
    (tx, done)
}

/// `COPY` of `columns` (quoted, the id's first) into `table` (quoted).
pub fn statement(table: &str, columns: &[String]) -> String {
    format!(
        "COPY {table} ({}) FROM STDIN (FORMAT binary)",
        columns.join(", ")
    )
}

/// Whether rows of `columns` with the values `args` can be copied into `e`'s table: no unique
/// index but the id's and no reference, so that no row can break a constraint; and every
/// value of the kind its column stores, a text without a NUL (which PostgreSQL refuses).
pub fn copyable(e: &Entity, columns: &[&str], args: &[&Value]) -> bool {
    let constrained = !e.key.is_empty()
        || e.fields
            .iter()
            .any(|f| f.unique || matches!(f.ty, FieldType::Reference(_)));
    if constrained || columns.contains(&"id") {
        return false;
    }
    let Some(types) = columns
        .iter()
        .map(|c| e.col_type(c))
        .collect::<Option<Vec<ColType>>>()
    else {
        return false;
    };
    args.chunks(types.len()).all(|row| {
        row.iter().zip(&types).all(|(v, t)| match (v, t) {
            (Value::Int(_), ColType::Int) | (Value::Bool(_), ColType::Bool) => true,
            (Value::Text(t), ColType::Text) => t.as_ref().is_none_or(|t| !t.contains('\0')),
            _ => false,
        })
    })
}

/// The rows `args` (`width` values each, checked by [`copyable`]), each after its id from
/// `ids`, as tuples of the binary format.
pub fn tuples(ids: &[i64], args: &[&Value], width: usize) -> Vec<u8> {
    let texts: usize = args
        .iter()
        .map(|v| match v {
            Value::Text(Some(t)) => t.len(),
            _ => 8,
        })
        .sum();
    let mut out = Vec::with_capacity(texts + ids.len() * (2 + 12 + width * 4));
    let fields = i16::try_from(width + 1).unwrap_or(i16::MAX);
    for (id, row) in ids.iter().zip(args.chunks(width)) {
        out.extend_from_slice(&fields.to_be_bytes());
        field(&mut out, &id.to_be_bytes());
        for v in row {
            match v {
                Value::Int(Some(i)) => field(&mut out, &i.to_be_bytes()),
                Value::Bool(Some(b)) => field(&mut out, &[u8::from(*b)]),
                Value::Text(Some(t)) => field(&mut out, t.as_bytes()),
                _ => out.extend_from_slice(&(-1i32).to_be_bytes()),
            }
        }
    }
    out
}

/// One field: its length, then its bytes.
fn field(out: &mut Vec<u8>, bytes: &[u8]) {
    let len = i32::try_from(bytes.len()).unwrap_or(i32::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(bytes);
}

/// Ids taken from the tables' sequences ahead of the copies that use them, so that a run of
/// copies (an upload's chunks) does not wait for its ids: while one group is copied, the ids
/// of the next are taken. Ids left over are used by the next copy into the table within
/// [`FRESH`], so the ids of one upload follow each other; older ones are dropped, which leaves
/// a gap of at most [`AHEAD`] ids, as a rolled-back insert does.
pub struct Ahead {
    conns: Arc<Conns>,
    tables: Mutex<HashMap<String, Taken>>,
}

/// The most ids taken ahead for a table: an upload's chunk.
const AHEAD: usize = 1000;
/// How long ids taken ahead are used: a copy that follows another this closely continues it.
const FRESH: Duration = Duration::from_secs(1);

/// A table's ids taken ahead.
#[derive(Default)]
struct Taken {
    /// Unused ids, in order, and when they were taken.
    ids: VecDeque<i64>,
    at: Option<Instant>,
    /// Ids being taken, and since when.
    next: Option<(Instant, JoinHandle<Result<Vec<i64>>>)>,
}

impl Ahead {
    pub fn new(conns: Arc<Conns>) -> Ahead {
        Ahead {
            conns,
            tables: Mutex::new(HashMap::new()),
        }
    }

    fn tables(&self) -> std::sync::MutexGuard<'_, HashMap<String, Taken>> {
        self.tables.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `n` new ids of `table` (quoted), in order: first those taken ahead, then new ones. When
    /// the table had a copy just before this one, the next group's ids are taken meanwhile.
    pub async fn take(&self, table: &str, n: usize) -> Result<Vec<i64>> {
        let (mut out, next, follows) = {
            let mut tables = self.tables();
            let t = tables.entry(table.to_string()).or_default();
            let follows = t.at.is_some_and(|at| at.elapsed() < FRESH);
            if !follows {
                t.ids.clear();
            }
            let k = n.min(t.ids.len());
            let out: Vec<i64> = t.ids.drain(..k).collect();
            let next = if out.len() < n { t.next.take() } else { None };
            (out, next, follows)
        };
        if let Some((since, next)) = next {
            let taken = next
                .await
                .map_err(|e| StorageError::Database(e.to_string()))?;
            if let (true, Ok(mut more)) = (since.elapsed() < FRESH, taken) {
                let rest = more.split_off((n - out.len()).min(more.len()));
                out.extend(more);
                self.keep(table, rest);
            }
        }
        if out.len() < n {
            out.extend(reserve_ids(&self.conns, table, n - out.len()).await?);
        }
        // In order even when another transaction's copy took ids of the table meanwhile.
        out.sort_unstable();
        let mut tables = self.tables();
        let t = tables.entry(table.to_string()).or_default();
        t.at = Some(Instant::now());
        let want = n.min(AHEAD);
        if follows && t.ids.len() < want && t.next.is_none() {
            let (conns, table) = (self.conns.clone(), table.to_string());
            let task = tokio::spawn(async move { reserve_ids(&conns, &table, want).await });
            t.next = Some((Instant::now(), task));
        }
        Ok(out)
    }

    /// Keeps `ids` for the next copy into `table`.
    fn keep(&self, table: &str, ids: Vec<i64>) {
        let mut tables = self.tables();
        let t = tables.entry(table.to_string()).or_default();
        t.ids.extend(ids);
        t.ids.make_contiguous().sort_unstable();
    }
}

/// `n` ids of `table`'s (quoted) sequence, in order, taken on a connection of `conns`. The
/// taking is not waited for on disk: the transaction that stores the rows is, and its commit
/// makes every earlier record of the log durable, the sequence's among them.
async fn reserve_ids(conns: &Conns, table: &str, n: usize) -> Result<Vec<i64>> {
    const SQL: &str = "WITH s AS MATERIALIZED (SELECT pg_get_serial_sequence($1, 'id')::regclass AS r, \
         set_config('synchronous_commit', 'off', true) AS c) \
         SELECT array_agg(nextval(s.r)) FROM s, generate_series(1, $2)";
    let mut held = conns.acquire().await.map_err(super::postgres::db)?;
    let got = sqlx::query_scalar::<_, Option<Vec<i64>>>(SQL)
        .bind(table)
        .bind(i32::try_from(n).unwrap_or(i32::MAX))
        .fetch_one(held.conn())
        .await;
    held.finish(&got);
    drop(held);
    let mut ids = got.map_err(super::postgres::db)?.unwrap_or_default();
    if ids.len() != n {
        return Err(StorageError::Database(format!(
            "asked {table}'s sequence for {n} ids and got {}",
            ids.len()
        )));
    }
    ids.sort_unstable();
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tuple_is_its_field_count_then_each_field_with_its_length() {
        let (name, count, flag, none) = (
            Value::text("ab"),
            Value::int(7),
            Value::Bool(Some(true)),
            Value::Text(None),
        );
        let args = [&name, &count, &flag, &none];
        let bytes = tuples(&[42], &args, 4);
        let mut want = vec![0, 5];
        want.extend_from_slice(&[0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 42]);
        want.extend_from_slice(&[0, 0, 0, 2, b'a', b'b']);
        want.extend_from_slice(&[0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 7]);
        want.extend_from_slice(&[0, 0, 0, 1, 1]);
        want.extend_from_slice(&[0xff, 0xff, 0xff, 0xff]);
        assert_eq!(bytes, want);
    }

    #[test]
    fn the_header_is_the_signature_and_two_zero_words() {
        assert_eq!(HEADER.len(), 11 + 4 + 4);
        assert!(HEADER.starts_with(b"PGCOPY\n\xff\r\n\0"));
    }
}
