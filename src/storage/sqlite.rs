//! The embedded SQLite backend (rusqlite): a WAL database file, one writer connection, a read
//! connection per thread that reads for point reads (by id, sign-ins, job records; see
//! [`super::near`]), and a read lane on threads of its own for list pages and counts (see
//! [`super::lanes`]), which may visit many rows and so never run on the async workers. Writes and
//! point reads run inline on the calling task, writes under the writer's lock.

use super::lanes::Lane;
use super::near::{Near, Readers};
use super::{Exec, PointRow, Result, Row, Storage, StorageError, Tx, Value, entity, sql::Dialect};
use crate::decimal;
use crate::schema::ColType;
use async_trait::async_trait;
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, OpenFlags, ToSql, ffi};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Page cache of each thread's point-read connection.
const POINT_CACHE_KIB: i64 = 2048;
/// How long a point-read connection keeps its snapshot while this process writes nothing:
/// a write by another process is seen within this time.
const POINT_SNAPSHOT_AGE: Duration = Duration::from_millis(10);
/// Threads (and connections) of the list lane, which runs at a lower priority.
const LIST_READERS: usize = 2;
const LIST_NICE: i32 = 10;

pub struct SqliteStorage {
    points: Near,
    lists: Lane,
    /// Bumped after DDL so the lanes drop their cached statements.
    schema: Arc<AtomicU64>,
    writer: Writer,
    checkpoints: Arc<super::checkpoint::Checkpointer>,
    /// Bumped after each commit that logged changes (see [`super::live`]).
    live_signal: Arc<tokio::sync::watch::Sender<u64>>,
}

/// Opens one connection with `cache_kib` of page cache, and `lookaside` slots when given.
fn open(
    path: &PathBuf,
    cache_kib: i64,
    lookaside: Option<(i32, i32)>,
) -> rusqlite::Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    let c = Connection::open_with_flags(path, flags)?;
    if let Some(slots) = lookaside {
        widen_lookaside(&c, slots)?;
    }
    c.busy_timeout(Duration::from_secs(30))?;
    c.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;
         PRAGMA temp_store = MEMORY;",
    )?;
    c.execute_batch(&format!("PRAGMA cache_size = -{cache_kib};"))?;
    c.set_prepared_statement_cache_capacity(256);
    add_functions(&c)?;
    Ok(c)
}

/// Slots of the writer's lookaside memory (SQLite's own allocator for a connection's small
/// objects) and their size. A text bound to a statement is copied into memory of its own; a
/// multi-row insert binds thousands at once, and past the default lookaside (1200 bytes times
/// 40 slots) each copy took a `malloc` and a `free` of the C library: about 8% of the
/// instructions of a 1M-row upload. 8192 slots of 128 bytes (1 MB) hold a chunk's texts.
const WRITER_LOOKASIDE: (i32, i32) = (128, 8192);

/// Gives a connection `slots` of lookaside memory of `size` bytes each; only while none of its
/// lookaside is in use, so before its first statement.
fn widen_lookaside(c: &Connection, (size, slots): (i32, i32)) -> rusqlite::Result<()> {
    // SAFETY: `c.handle()` is the open connection, used on this thread only during the call;
    // a null buffer lets SQLite allocate the slots itself, and the two sizes are C ints as
    // SQLITE_DBCONFIG_LOOKASIDE takes them.
    let rc = unsafe {
        ffi::sqlite3_db_config(
            c.handle(),
            ffi::SQLITE_DBCONFIG_LOOKASIDE,
            std::ptr::null_mut::<std::ffi::c_void>(),
            size as std::ffi::c_int,
            slots as std::ffi::c_int,
        )
    };
    if rc == ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(rusqlite::Error::SqliteFailure(ffi::Error::new(rc), None))
    }
}

/// `fold(text)`: the text in lower case, every letter (SQLite's own `lower` and `LIKE` fold
/// only ASCII), so `[contains]` ignores case as PostgreSQL's `ILIKE` does. And the collation
/// `decimal`, which orders the text of decimal columns by the numbers it holds.
fn add_functions(c: &Connection) -> rusqlite::Result<()> {
    use rusqlite::functions::FunctionFlags;
    c.create_collation(entity::DECIMAL_COLLATION, decimal_order)?;
    c.create_scalar_function(
        "fold",
        1,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx| {
            Ok(match ctx.get_raw(0) {
                ValueRef::Text(t) => Some(String::from_utf8_lossy(t).to_lowercase()),
                ValueRef::Null => None,
                other => Some(match other {
                    ValueRef::Integer(i) => i.to_string(),
                    ValueRef::Real(f) => f.to_string(),
                    _ => String::new(),
                }),
            })
        },
    )
}

/// The order of two decimal texts by value; a text that is not a decimal (none is written)
/// sorts after every number, by its bytes.
fn decimal_order(a: &str, b: &str) -> std::cmp::Ordering {
    match (decimal::parse(a), decimal::parse(b)) {
        (Ok(x), Ok(y)) => x.cmp(&y),
        (Ok(_), Err(_)) => std::cmp::Ordering::Less,
        (Err(_), Ok(_)) => std::cmp::Ordering::Greater,
        (Err(_), Err(_)) => a.cmp(b),
    }
}

impl SqliteStorage {
    /// Opens `sqlite://PATH` (or `sqlite:PATH`), creating the file if needed.
    pub async fn connect(url: &str) -> anyhow::Result<SqliteStorage> {
        let path = super::sqlite_path(url).unwrap_or_else(|| PathBuf::from(url));
        if let Some(dir) = path.parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir)?;
        }
        // The writer's cache holds what writes touch: the paths from each b-tree's root to
        // the pages written. 2 MB holds those of tables of millions of rows; a larger cache
        // only fills up during a bulk write (8 MB took 4 to 7 MB more of a 1M-row upload's
        // peak, at the same speed), and reads have caches of their own.
        let writer = open(&path, 2048, Some(WRITER_LOOKASIDE))?;
        writer.pragma_update(
            None,
            "wal_autocheckpoint",
            super::checkpoint::WRITER_THRESHOLD,
        )?;
        let schema = Arc::new(AtomicU64::new(0));
        let point_path = path.clone();
        let points = Near::new(
            Box::new(move || open(&point_path, POINT_CACHE_KIB, None)),
            schema.clone(),
            POINT_SNAPSHOT_AGE,
        );
        let readers = points.readers();
        let checkpoints = super::checkpoint::Checkpointer::start(
            open(&path, 512, None)?,
            Box::new(move || readers.release_stale()),
        )?;
        let readers = |n: usize, cache_kib: i64| {
            (0..n)
                .map(|_| open(&path, cache_kib, None))
                .collect::<rusqlite::Result<Vec<_>>>()
        };
        Ok(SqliteStorage {
            writer: Writer {
                conn: Arc::new(tokio::sync::Mutex::new(writer)),
                readers: points.readers(),
            },
            points,
            lists: Lane::start(
                "list",
                readers(LIST_READERS, 8192)?,
                schema.clone(),
                LIST_NICE,
            )?,
            schema,
            checkpoints: Arc::new(checkpoints),
            live_signal: Arc::new(tokio::sync::watch::Sender::new(0)),
        })
    }
}

struct Arg<'a>(&'a Value);

impl ToSql for Arg<'_> {
    #[inline]
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self.0 {
            Value::Int(Some(i)) => ToSqlOutput::Borrowed(ValueRef::Integer(*i)),
            Value::Float(Some(f)) => ToSqlOutput::Borrowed(ValueRef::Real(*f)),
            Value::Decimal(Some(d)) => {
                ToSqlOutput::Owned(rusqlite::types::Value::Text(d.normalize().to_string()))
            }
            Value::Bool(Some(b)) => ToSqlOutput::Borrowed(ValueRef::Integer(i64::from(*b))),
            Value::Text(Some(s)) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
            _ => ToSqlOutput::Borrowed(ValueRef::Null),
        })
    }
}

fn decode(v: ValueRef<'_>, t: ColType) -> Value {
    match (t, v) {
        (ColType::Int, ValueRef::Integer(i)) => Value::Int(Some(i)),
        (ColType::Int, ValueRef::Real(f)) => Value::Int(Some(f as i64)),
        (ColType::Float, ValueRef::Real(f)) => Value::Float(Some(f)),
        (ColType::Float, ValueRef::Integer(i)) => Value::Float(Some(i as f64)),
        (ColType::Float, ValueRef::Text(s)) => {
            Value::Float(std::str::from_utf8(s).ok().and_then(|s| s.parse().ok()))
        }
        (ColType::Decimal, ValueRef::Text(s)) => Value::Decimal(
            std::str::from_utf8(s)
                .ok()
                .and_then(|s| decimal::parse(s).ok()),
        ),
        (ColType::Decimal, ValueRef::Integer(i)) => Value::Decimal(Some(decimal::Decimal::from(i))),
        (ColType::Decimal, ValueRef::Real(f)) => Value::Decimal(decimal::from_f64(f).ok()),
        (ColType::Bool, ValueRef::Integer(i)) => Value::Bool(Some(i != 0)),
        // Checked as UTF-8 and copied once; only text that is not valid UTF-8 (written by
        // another program) takes the replacing path.
        (ColType::Text, ValueRef::Text(s)) => Value::Text(Some(match std::str::from_utf8(s) {
            Ok(t) => t.to_owned(),
            Err(_) => String::from_utf8_lossy(s).into_owned(),
        })),
        (ColType::Text, ValueRef::Integer(i)) => Value::Text(Some(i.to_string())),
        (ColType::Text, ValueRef::Real(f)) => Value::Text(Some(f.to_string())),
        (t, _) => Value::null(t),
    }
}

fn db(e: rusqlite::Error) -> StorageError {
    if let rusqlite::Error::SqliteFailure(f, msg) = &e {
        match f.extended_code {
            ffi::SQLITE_CONSTRAINT_UNIQUE | ffi::SQLITE_CONSTRAINT_PRIMARYKEY => {
                // "UNIQUE constraint failed: table.a, table.b": the columns joined with `_`,
                // as PostgreSQL's index names have them.
                let column = msg
                    .as_deref()
                    .and_then(|m| m.rsplit(": ").next())
                    .map(|cols| {
                        cols.split(", ")
                            .filter_map(|c| c.split('.').nth(1))
                            .collect::<Vec<_>>()
                            .join("_")
                    })
                    .filter(|c| !c.is_empty());
                return StorageError::Unique { column };
            }
            ffi::SQLITE_CONSTRAINT_FOREIGNKEY => return StorageError::ForeignKey,
            _ if f.code == rusqlite::ErrorCode::DiskFull => {
                return StorageError::Full(e.to_string());
            }
            ffi::SQLITE_CONSTRAINT_NOTNULL => {
                // "NOT NULL constraint failed: table.column"
                let column = msg
                    .as_deref()
                    .and_then(|m| m.rsplit('.').next())
                    .map(str::to_string);
                return StorageError::NotNull { column };
            }
            _ => {}
        }
    }
    if let Some(class) = super::contention::sqlite_class(&e) {
        return StorageError::Contention {
            class,
            message: e.to_string(),
        };
    }
    StorageError::Database(e.to_string())
}

fn exec_on(c: &Connection, sql: &str, args: &[Value]) -> Result<u64> {
    let mut st = c.prepare_cached(sql).map_err(db)?;
    let n = st
        .execute(rusqlite::params_from_iter(args.iter().map(Arg)))
        .map_err(db)?;
    Ok(n as u64)
}

fn fetch_on(c: &Connection, sql: &str, args: &[Value], types: &[ColType]) -> Result<Vec<Row>> {
    let mut st = c.prepare_cached(sql).map_err(db)?;
    let mut rows = st
        .query(rusqlite::params_from_iter(args.iter().map(Arg)))
        .map_err(db)?;
    let mut out = Vec::new();
    while let Some(r) = rows.next().map_err(db)? {
        let mut row = Vec::with_capacity(types.len());
        for (i, t) in types.iter().enumerate() {
            row.push(decode(r.get_ref(i).map_err(db)?, *t));
        }
        out.push(row);
    }
    Ok(out)
}

/// The writer connection. Each release of it counts as a write for the point readers
/// ([`Readers::wrote`]), so that a read that starts after it sees what it wrote.
struct Writer {
    conn: Arc<tokio::sync::Mutex<Connection>>,
    readers: Arc<Readers>,
}

/// The writer, held; counted as a write when let go.
struct Writing<G: std::ops::Deref<Target = Connection>> {
    guard: G,
    readers: Arc<Readers>,
}

impl Writer {
    async fn lock(&self) -> Writing<tokio::sync::MutexGuard<'_, Connection>> {
        Writing {
            guard: self.conn.lock().await,
            readers: self.readers.clone(),
        }
    }

    async fn lock_owned(&self) -> Writing<tokio::sync::OwnedMutexGuard<Connection>> {
        Writing {
            guard: self.conn.clone().lock_owned().await,
            readers: self.readers.clone(),
        }
    }
}

impl<G: std::ops::Deref<Target = Connection>> std::ops::Deref for Writing<G> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        &self.guard
    }
}

impl<G: std::ops::Deref<Target = Connection>> Drop for Writing<G> {
    fn drop(&mut self) {
        self.readers.wrote();
    }
}

/// A write transaction holding the writer connection until it ends.
struct SqliteTx {
    conn: Option<Writing<tokio::sync::OwnedMutexGuard<Connection>>>,
    /// Rows added (or removed) per entity and not yet in `entity_counts`; written before the
    /// transaction commits and before any savepoint statement (so a savepoint's rollback
    /// undoes the counts of its rows with them).
    counts: Vec<(String, i64)>,
    /// Changes not yet in `live_changes`, in the order made; written (numbered) when the
    /// counts are.
    live: Vec<super::live::Logged>,
    /// Told of the commit of a transaction that logged changes.
    live_signal: Option<Arc<tokio::sync::watch::Sender<u64>>>,
    /// Whether this transaction wrote changes to `live_changes`.
    logged: bool,
    /// Told of the commit of a transaction that may have written.
    checkpoints: Option<Arc<super::checkpoint::Checkpointer>>,
}

impl SqliteTx {
    fn conn(&self) -> &Connection {
        self.conn.as_ref().expect("transaction is open")
    }

    /// Writes the row counts and the logged changes gathered so far.
    fn flush(&mut self) -> Result<()> {
        self.flush_counts()?;
        if self.live.is_empty() {
            return Ok(());
        }
        let live = std::mem::take(&mut self.live);
        let total = super::live::numbers_needed(&live);
        let rows = fetch_on(
            self.conn(),
            super::live::TAKE_NUMBERS,
            &[Value::int(total)],
            &[ColType::Int],
        )?;
        let first = rows.first().and_then(|r| r[0].as_i64()).unwrap_or(1);
        for (sql, args) in super::live::inserts(&live, first, crate::time::unix_now()) {
            exec_on(self.conn(), &sql, &args)?;
        }
        self.logged = true;
        Ok(())
    }

    fn flush_counts(&mut self) -> Result<()> {
        for (entity, delta) in std::mem::take(&mut self.counts) {
            if delta != 0 {
                exec_on(
                    self.conn(),
                    super::counts::adjust_sql(),
                    &[Value::int(delta), Value::text(entity)],
                )?;
            }
        }
        Ok(())
    }
}

impl Drop for SqliteTx {
    fn drop(&mut self) {
        if let Some(c) = self.conn.take() {
            let _ = c.execute_batch("ROLLBACK");
        }
    }
}

/// Whether `sql` opens, releases or rolls back to a savepoint.
fn is_savepoint_statement(sql: &str) -> bool {
    let head = sql.trim_start().as_bytes();
    ["SAVEPOINT", "RELEASE", "ROLLBACK"]
        .iter()
        .any(|k| head.len() >= k.len() && head[..k.len()].eq_ignore_ascii_case(k.as_bytes()))
}

#[async_trait]
impl Exec for SqliteTx {
    async fn execute(&mut self, sql: &str, args: &[Value]) -> Result<u64> {
        if !(self.counts.is_empty() && self.live.is_empty()) && is_savepoint_statement(sql) {
            self.flush()?;
        }
        exec_on(self.conn(), sql, args)
    }
    async fn fetch(&mut self, sql: &str, args: &[Value], types: &[ColType]) -> Result<Vec<Row>> {
        fetch_on(self.conn(), sql, args, types)
    }
    fn numbers_inserts(&self) -> bool {
        true
    }
    async fn insert_numbered(&mut self, sql: &str, args: &[&Value]) -> Result<Vec<i64>> {
        let c = self.conn();
        let mut st = c.prepare_cached(sql).map_err(db)?;
        let n = st
            .execute(rusqlite::params_from_iter(args.iter().map(|v| Arg(v))))
            .map_err(db)? as i64;
        // Each row takes one more than the largest id so far: one statement's rows (no trigger
        // inserts into an entity's table) are numbered one after another.
        let last = c.last_insert_rowid();
        Ok((last - n + 1..=last).collect())
    }
    async fn count_rows(&mut self, _d: Dialect, entity: &str, delta: i64) -> Result<()> {
        match self.counts.iter_mut().find(|(e, _)| e == entity) {
            Some((_, n)) => *n += delta,
            None => self.counts.push((entity.to_string(), delta)),
        }
        Ok(())
    }
    async fn log_live(&mut self, change: super::live::Logged) -> Result<()> {
        self.live.push(change);
        Ok(())
    }
}

#[async_trait]
impl Tx for SqliteTx {
    async fn commit(mut self: Box<Self>) -> Result<()> {
        // On failure the transaction is still open: dropping `self` rolls it back.
        self.flush()?;
        self.conn().execute_batch("COMMIT").map_err(db)?;
        self.conn = None;
        if self.logged
            && let Some(s) = &self.live_signal
        {
            s.send_modify(|n| *n += 1);
        }
        if let Some(c) = &self.checkpoints {
            c.committed();
        }
        Ok(())
    }
    async fn rollback(mut self: Box<Self>) -> Result<()> {
        self.counts.clear();
        self.live.clear();
        let conn = self.conn.take().expect("transaction is open");
        conn.execute_batch("ROLLBACK").map_err(db)
    }
}

#[async_trait]
impl Storage for SqliteStorage {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    async fn begin(&self) -> Result<Box<dyn Tx>> {
        let guard = self.writer.lock_owned().await;
        guard.execute_batch("BEGIN IMMEDIATE").map_err(db)?;
        Ok(Box::new(SqliteTx {
            conn: Some(guard),
            counts: Vec::new(),
            live: Vec::new(),
            live_signal: Some(self.live_signal.clone()),
            logged: false,
            checkpoints: Some(self.checkpoints.clone()),
        }))
    }

    async fn begin_snapshot(&self) -> Result<Box<dyn Tx>> {
        // A deferred transaction: its first read starts one read transaction, which sees the
        // database as of then until it ends. This process writes nothing meanwhile.
        let guard = self.writer.lock_owned().await;
        guard.execute_batch("BEGIN DEFERRED").map_err(db)?;
        Ok(Box::new(SqliteTx {
            conn: Some(guard),
            counts: Vec::new(),
            live: Vec::new(),
            live_signal: None,
            logged: false,
            checkpoints: None,
        }))
    }

    async fn fetch(&self, sql: &str, args: &[Value], types: &[ColType]) -> Result<Vec<Row>> {
        self.points
            .run(|c| fetch_on(c, sql, args, types))
            .map_err(db)?
            .unwrap_or_else(|| Err(StorageError::Database("a read failed".into())))
    }

    async fn fetch_point(
        &self,
        sql: &str,
        types: &[ColType],
        id: i64,
    ) -> Result<Option<Arc<PointRow>>> {
        let read = |c: &Connection| fetch_on(c, sql, &[Value::int(id)], types);
        self.points
            .run_by_id(sql, types, id, read)
            .map_err(db)?
            .unwrap_or_else(|| Err(StorageError::Database("a read failed".into())))
    }

    async fn fetch_list(&self, sql: &str, args: &[Value], types: &[ColType]) -> Result<Vec<Row>> {
        let (sql, args, types) = (sql.to_string(), args.to_vec(), types.to_vec());
        self.lists
            .run(move |c| fetch_on(c, &sql, &args, &types))
            .await
            .unwrap_or_else(|| Err(StorageError::Database("a read thread failed".into())))
    }

    async fn execute(&self, sql: &str, args: &[Value]) -> Result<u64> {
        let c = self.writer.lock().await;
        exec_on(&c, sql, args)
    }

    async fn fetch_write(&self, sql: &str, args: &[Value], types: &[ColType]) -> Result<Vec<Row>> {
        let c = self.writer.lock().await;
        fetch_on(&c, sql, args, types)
    }

    async fn table_columns(&self, table: &str) -> Result<Vec<String>> {
        let c = self.writer.lock().await;
        let rows = fetch_on(
            &c,
            "SELECT name FROM pragma_table_info(?1)",
            &[Value::text(table)],
            &[ColType::Text],
        )?;
        Ok(rows
            .into_iter()
            .filter_map(|mut r| r.pop()?.into_string())
            .collect())
    }

    async fn batch_ddl(&self, statements: &[String]) -> Result<()> {
        let c = self.writer.lock().await;
        c.execute_batch("BEGIN IMMEDIATE").map_err(db)?;
        for s in statements {
            if let Err(e) = c.execute_batch(s) {
                let _ = c.execute_batch("ROLLBACK");
                return Err(db(e));
            }
        }
        c.execute_batch("COMMIT").map_err(db)?;
        // Readers cache statements; make them prepare again.
        self.schema.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    fn live_signal(&self) -> tokio::sync::watch::Receiver<u64> {
        self.live_signal.subscribe()
    }

    fn schema_changed(&self) {
        self.schema.fetch_add(1, Ordering::AcqRel);
    }

    async fn close(&self) {
        let c = self.writer.lock().await;
        let _ = c.execute_batch("PRAGMA optimize; PRAGMA wal_checkpoint(PASSIVE);");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Text is read as it was written; bytes that are not UTF-8 (written by another program)
    /// read with the replacement character.
    #[test]
    fn text_reads_as_written_and_bad_bytes_as_replacements() {
        let c = Connection::open_in_memory().unwrap();
        let types = [ColType::Text, ColType::Text, ColType::Text];
        let rows = fetch_on(
            &c,
            "SELECT 'héllo ✓', CAST(x'66ff6f' AS TEXT), ''",
            &[],
            &types,
        )
        .unwrap();
        let texts: Vec<Option<&str>> = rows[0]
            .iter()
            .map(|v| match v {
                Value::Text(t) => t.as_deref(),
                _ => None,
            })
            .collect();
        assert_eq!(texts, [Some("héllo ✓"), Some("f\u{FFFD}o"), Some("")]);
    }
}
