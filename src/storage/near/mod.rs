//! Point reads for SQLite on the calling thread: each thread that reads holds its own read
//! connection to the database, opened on its first read, so a read by id runs where its request
//! runs, without handing it to another thread and waiting to be woken with the answer. That
//! hand-off cost more than the read itself (a row by its key is a few microseconds, the two
//! thread switches several times that). The writer already runs inline in the same way; list
//! pages and counts, which may visit many rows, keep their own lane.
//!
//! A connection keeps its read transaction (its snapshot of the database) from one read to the
//! next while nothing was written: starting one takes the write-ahead log's shared-memory
//! locks, a large part of a read by id. This process is the database's only writer, and each
//! release of its writer counts one more write ([`Readers::wrote`]); a read after a write runs
//! on a read transaction of its own, so it sees the write, and keeps no snapshot (under a
//! stream of writes, held snapshots kept the log from being copied back and reset: it grew to
//! three times its size, and creates slowed by a sixth). A snapshot is renewed once it is as
//! old as [`Near::new`] was told, so a read that starts that long after a write by another
//! process (the `sqlite3` shell) sees it. The checkpointing thread ends the snapshots that
//! writes left behind and those that old on idle threads ([`Readers::release_stale`]): a held
//! snapshot keeps the log from being copied back, by this process or by another (Litestream).
//!
//! Within a kept snapshot the database does not change, so a connection remembers the rows it
//! read by id ([`Near::run_by_id`]) until the snapshot ends, and answers the same read again
//! from memory: what it answers is what SQLite would read on that snapshot. A hot object read
//! by many requests costs one read a snapshot on each thread, not one a request, and its JSON
//! is written once with it ([`super::PointRow`]).

mod memo;

use super::{PointRow, Row};
use memo::Memo;
use rusqlite::Connection;
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

/// Opens one more read connection to the database.
type Open = Box<dyn Fn() -> rusqlite::Result<Connection> + Send + Sync>;

/// One database's point reads: how to open a connection for a thread, the schema version whose
/// change makes every thread drop its cached statements, and the read connections.
pub struct Near {
    /// Its identity among the databases a thread reads, alive as long as this value.
    id: Arc<()>,
    open: Open,
    schema: Arc<AtomicU64>,
    readers: Arc<Readers>,
}

/// The read connections of one database, for the thread that ends their snapshots.
pub struct Readers {
    all: Mutex<Vec<Weak<Mutex<Reader>>>>,
    /// Writes so far: bumped by the writer after each release ([`Readers::wrote`]).
    written: AtomicU64,
    /// The longest a snapshot is kept.
    max_age: Duration,
}

/// A read connection and the snapshot it holds.
struct Reader {
    conn: Connection,
    snapshot: Option<Snapshot>,
    /// The writes counted at this connection's previous read.
    last_read: u64,
    /// The rows read by id on the snapshot held, emptied when it ends.
    memo: Memo,
}

/// A read transaction kept open: the writes counted when it began, and when.
struct Snapshot {
    written: u64,
    since: Instant,
}

/// A thread's connection to one database.
struct Held {
    owner: Weak<()>,
    reader: Arc<Mutex<Reader>>,
    seen: u64,
}

thread_local! {
    static HELD: RefCell<Vec<Held>> = const { RefCell::new(Vec::new()) };
}

fn lock(reader: &Mutex<Reader>) -> MutexGuard<'_, Reader> {
    reader.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Readers {
    /// Counts a write: every read that starts after this sees it.
    pub fn wrote(&self) {
        self.written.fetch_add(1, Ordering::AcqRel);
    }

    /// Ends each snapshot that began before the latest write or is older than the longest a
    /// snapshot is kept, except those being read (they end at their thread's next read).
    /// Connections of threads that ended are forgotten.
    pub fn release_stale(&self) {
        let now = self.written.load(Ordering::Acquire);
        let mut all = self.all.lock().unwrap_or_else(PoisonError::into_inner);
        all.retain(|w| {
            let Some(reader) = w.upgrade() else {
                return false;
            };
            if let Ok(mut r) = reader.try_lock()
                && r.snapshot
                    .as_ref()
                    .is_some_and(|s| s.written != now || s.since.elapsed() >= self.max_age)
            {
                r.end();
            }
            true
        });
    }
}

impl Reader {
    /// Makes the connection ready for a read. A snapshot is kept while no write was counted
    /// since it began and it is younger than `max_age`. A read after a write runs on its own
    /// (in autocommit), so that under writes no snapshot outlives its read and holds the log
    /// back; the next read with no write before it begins a snapshot again (it takes its view
    /// of the database at that read).
    fn fresh(&mut self, written: u64, max_age: Duration) -> rusqlite::Result<()> {
        let quiet = written == self.last_read;
        self.last_read = written;
        if let Some(s) = &self.snapshot {
            // Kept through quiet reads only, so it began at the current count of writes.
            if quiet && s.since.elapsed() < max_age && !self.conn.is_autocommit() {
                return Ok(());
            }
            self.end();
        }
        if quiet {
            self.conn.prepare_cached("BEGIN")?.execute([])?;
            self.snapshot = Some(Snapshot {
                written,
                since: Instant::now(),
            });
        }
        Ok(())
    }

    /// Runs `f` on the connection; `None` when it panicked, and the snapshot ended then.
    fn guarded<T>(&mut self, f: impl FnOnce(&Connection) -> T) -> Option<T> {
        let conn = &self.conn;
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(conn))).ok();
        if out.is_none() {
            self.end();
        }
        out
    }

    /// Ends the snapshot, if one is held, and forgets the rows read on it.
    fn end(&mut self) {
        self.memo.clear();
        if self.snapshot.take().is_none() || self.conn.is_autocommit() {
            return;
        }
        let ended = self
            .conn
            .prepare_cached("COMMIT")
            .and_then(|mut st| st.execute([]));
        if ended.is_err() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }
}

impl Near {
    /// Point reads on connections `open` makes; a snapshot is kept at most `max_age`.
    pub fn new(open: Open, schema: Arc<AtomicU64>, max_age: Duration) -> Near {
        Near {
            id: Arc::new(()),
            open,
            schema,
            readers: Arc::new(Readers {
                all: Mutex::new(Vec::new()),
                written: AtomicU64::new(0),
                max_age,
            }),
        }
    }

    /// The read connections, for the writer to count its writes and the checkpointing
    /// thread to end snapshots.
    pub fn readers(&self) -> Arc<Readers> {
        self.readers.clone()
    }

    /// Runs `f` on this thread's connection to the database, opening it first if needed;
    /// `Ok(None)` when `f` panicked. Connections of databases closed since are closed here.
    pub fn run<T>(&self, f: impl FnOnce(&Connection) -> T) -> rusqlite::Result<Option<T>> {
        self.on_reader(|reader| reader.guarded(f))
    }

    /// Runs `read`, the read of `id` by `sql` decoded as `types`, as [`Near::run`] does, and
    /// answers its row; on a kept snapshot, answers it from memory when the connection read it
    /// on that snapshot already, and remembers what it found otherwise.
    pub fn run_by_id(
        &self,
        sql: &str,
        types: &[crate::schema::ColType],
        id: i64,
        read: impl FnOnce(&Connection) -> super::Result<Vec<Row>>,
    ) -> rusqlite::Result<Option<super::Result<Option<Arc<PointRow>>>>> {
        self.on_reader(|reader| {
            if let Some(row) = reader.memo.get(sql, types, id) {
                return Some(Ok(row));
            }
            let out = reader.guarded(read)?.map(|rows| {
                let row = rows.into_iter().next().map(|r| Arc::new(PointRow::new(r)));
                if reader.snapshot.is_some() {
                    reader.memo.put(sql, types, id, &row);
                }
                row
            });
            Some(out)
        })
    }

    /// Runs `f` on this thread's reader, opening it first if needed, made ready for a read.
    fn on_reader<T>(&self, f: impl FnOnce(&mut Reader) -> T) -> rusqlite::Result<T> {
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            held.retain(|h| h.owner.strong_count() > 0);
            let i = match held
                .iter()
                .position(|h| std::ptr::eq(h.owner.as_ptr(), Arc::as_ptr(&self.id)))
            {
                Some(i) => i,
                None => {
                    held.push(self.hold()?);
                    held.len() - 1
                }
            };
            let h = &mut held[i];
            let mut reader = lock(&h.reader);
            let now = self.schema.load(Ordering::Acquire);
            if h.seen != now {
                reader.end();
                reader.conn.flush_prepared_statement_cache();
                h.seen = now;
            }
            let written = self.readers.written.load(Ordering::Acquire);
            reader.fresh(written, self.readers.max_age)?;
            Ok(f(&mut reader))
        })
    }

    /// A new connection for this thread, known to the checkpointing thread.
    fn hold(&self) -> rusqlite::Result<Held> {
        let reader = Arc::new(Mutex::new(Reader {
            conn: (self.open)()?,
            snapshot: None,
            last_read: self.readers.written.load(Ordering::Acquire),
            memo: Memo::default(),
        }));
        self.readers
            .all
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::downgrade(&reader));
        Ok(Held {
            owner: Arc::downgrade(&self.id),
            reader,
            seen: self.schema.load(Ordering::Acquire),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn near(dir: &std::path::Path, schema: &Arc<AtomicU64>) -> Near {
        near_aged(dir, schema, Duration::from_secs(3600))
    }

    fn near_aged(dir: &std::path::Path, schema: &Arc<AtomicU64>, max_age: Duration) -> Near {
        let path = dir.join("t.db");
        let c = Connection::open(&path).unwrap();
        c.execute_batch(
            "PRAGMA journal_mode = WAL; CREATE TABLE t (v INTEGER); INSERT INTO t VALUES (1);",
        )
        .unwrap();
        Near::new(
            Box::new(move || Connection::open(&path)),
            schema.clone(),
            max_age,
        )
    }

    /// Adds `v` to the table through a connection of its own, as the writer does.
    fn write(dir: &std::path::Path, v: i64) {
        let writer = Connection::open(dir.join("t.db")).unwrap();
        writer.execute("INSERT INTO t VALUES (?1)", [v]).unwrap();
    }

    /// A passive checkpoint by a connection of its own: (pages in the log, pages copied back).
    fn checkpoint(dir: &std::path::Path) -> (i64, i64) {
        let c = Connection::open(dir.join("t.db")).unwrap();
        c.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
            Ok((r.get(1)?, r.get(2)?))
        })
        .unwrap()
    }

    fn held() -> usize {
        HELD.with(|h| h.borrow().len())
    }

    fn sum(c: &Connection) -> i64 {
        c.prepare_cached("SELECT sum(v) FROM t")
            .unwrap()
            .query_row([], |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn a_read_after_a_write_sees_it_and_a_thread_keeps_one_connection() {
        let dir = tempfile::tempdir().unwrap();
        let schema = Arc::new(AtomicU64::new(0));
        let n = near(dir.path(), &schema);
        assert_eq!(n.run(sum).unwrap(), Some(1));
        write(dir.path(), 41);
        n.readers().wrote();
        assert_eq!(n.run(sum).unwrap(), Some(42));
        assert_eq!(held(), 1);
        // Another thread opens a connection of its own.
        std::thread::scope(|s| {
            s.spawn(|| {
                assert_eq!(n.run(sum).unwrap(), Some(42));
                assert_eq!(held(), 1);
            });
        });
        assert_eq!(held(), 1);
    }

    #[test]
    fn a_panic_is_none_and_a_closed_database_lets_its_connection_go() {
        let dir = tempfile::tempdir().unwrap();
        let schema = Arc::new(AtomicU64::new(0));
        let first = near(&subdir(dir.path(), "a"), &schema);
        let second = near(&subdir(dir.path(), "b"), &schema);
        assert_eq!(
            first.run(|_| -> i64 { panic!("a read failed") }).unwrap(),
            None
        );
        assert_eq!(first.run(sum).unwrap(), Some(1));
        assert_eq!(second.run(sum).unwrap(), Some(1));
        assert_eq!(held(), 2);
        drop(first);
        schema.fetch_add(1, Ordering::AcqRel);
        assert_eq!(second.run(sum).unwrap(), Some(1));
        assert_eq!(held(), 1);
    }

    fn subdir(root: &std::path::Path, name: &str) -> std::path::PathBuf {
        let d = root.join(name);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_snapshot_is_kept_until_a_write_is_counted_or_it_is_too_old() {
        let dir = tempfile::tempdir().unwrap();
        let schema = Arc::new(AtomicU64::new(0));
        let n = near(dir.path(), &schema);
        assert_eq!(n.run(sum).unwrap(), Some(1));
        // Written by another process: not seen by the snapshot held since the last read.
        write(dir.path(), 1);
        assert_eq!(n.run(sum).unwrap(), Some(1));
        n.readers().wrote();
        assert_eq!(n.run(sum).unwrap(), Some(2));

        let aged = near_aged(&subdir(dir.path(), "aged"), &schema, Duration::ZERO);
        assert_eq!(aged.run(sum).unwrap(), Some(1));
        write(&dir.path().join("aged"), 1);
        assert_eq!(
            aged.run(sum).unwrap(),
            Some(2),
            "a snapshot of age 0 is renewed"
        );
    }

    #[test]
    fn the_checkpointing_thread_ends_snapshots_a_write_left_behind() {
        let dir = tempfile::tempdir().unwrap();
        let schema = Arc::new(AtomicU64::new(0));
        let n = near(dir.path(), &schema);
        assert_eq!(n.run(sum).unwrap(), Some(1));
        write(dir.path(), 1);
        // The held snapshot predates the write: the log cannot all be copied back.
        let (logged, copied) = checkpoint(dir.path());
        assert!(copied < logged, "{copied} of {logged} pages copied");
        let readers = n.readers();
        readers.release_stale();
        let (logged, copied) = checkpoint(dir.path());
        assert!(copied < logged, "no write counted: the snapshot stays");
        std::thread::spawn(move || {
            readers.wrote();
            readers.release_stale();
        })
        .join()
        .unwrap();
        let (logged, copied) = checkpoint(dir.path());
        assert_eq!(copied, logged, "the snapshot ended");
        assert_eq!(n.run(sum).unwrap(), Some(2));
    }

    #[test]
    fn a_panic_ends_the_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let schema = Arc::new(AtomicU64::new(0));
        let n = near(dir.path(), &schema);
        let read_then_panic = |c: &Connection| -> i64 {
            if sum(c) > 0 {
                panic!("a read failed");
            }
            0
        };
        assert_eq!(n.run(read_then_panic).unwrap(), None);
        write(dir.path(), 1);
        assert_eq!(n.run(sum).unwrap(), Some(2));
    }

    #[test]
    fn a_read_after_a_write_keeps_no_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let schema = Arc::new(AtomicU64::new(0));
        let n = near(dir.path(), &schema);
        assert_eq!(n.run(sum).unwrap(), Some(1));
        write(dir.path(), 1);
        n.readers().wrote();
        assert_eq!(n.run(sum).unwrap(), Some(2));
        write(dir.path(), 1);
        let (logged, copied) = checkpoint(dir.path());
        assert_eq!(copied, logged, "no snapshot holds the log back");
        // With no write counted since, the next read keeps its snapshot again.
        assert_eq!(n.run(sum).unwrap(), Some(3));
        write(dir.path(), 1);
        assert_eq!(n.run(sum).unwrap(), Some(3));
    }

    #[test]
    fn an_old_snapshot_is_ended_on_an_idle_thread() {
        let dir = tempfile::tempdir().unwrap();
        let schema = Arc::new(AtomicU64::new(0));
        let n = near_aged(dir.path(), &schema, Duration::from_secs(1));
        assert_eq!(n.run(sum).unwrap(), Some(1));
        write(dir.path(), 1);
        n.readers().release_stale();
        let (logged, copied) = checkpoint(dir.path());
        assert!(copied < logged, "a young snapshot stays");
        std::thread::sleep(Duration::from_millis(1100));
        n.readers().release_stale();
        let (logged, copied) = checkpoint(dir.path());
        assert_eq!(copied, logged, "an old one ends");
    }

    /// The value of the row of `t` whose `v` is `id`, by `run_by_id`, counting the reads that
    /// reach SQLite.
    fn by_id(n: &Near, id: i64, reads: &std::cell::Cell<u32>) -> Option<i64> {
        let sql = "SELECT v FROM t WHERE v = ?1";
        let row = n
            .run_by_id(sql, &[ColType::Int], id, |c| {
                reads.set(reads.get() + 1);
                let mut st = c.prepare_cached(sql).unwrap();
                let rows = st
                    .query_map([id], |r| Ok(vec![super::super::Value::int(r.get(0)?)]))
                    .unwrap();
                Ok(rows.map(Result::unwrap).collect())
            })
            .unwrap()
            .unwrap()
            .unwrap();
        row.map(|r| match r.row[..] {
            [super::super::Value::Int(Some(v))] => v,
            _ => panic!("not one integer"),
        })
    }

    use crate::schema::ColType;

    #[test]
    fn a_read_by_id_is_remembered_for_the_snapshot_it_ran_on() {
        let dir = tempfile::tempdir().unwrap();
        let schema = Arc::new(AtomicU64::new(0));
        let n = near(dir.path(), &schema);
        let reads = std::cell::Cell::new(0);
        assert_eq!(by_id(&n, 1, &reads), Some(1));
        assert_eq!(by_id(&n, 1, &reads), Some(1));
        assert_eq!(reads.get(), 1, "the second read came from memory");
        assert_eq!(by_id(&n, 2, &reads), None);
        assert_eq!(by_id(&n, 2, &reads), None);
        assert_eq!(reads.get(), 2, "a row not found is remembered too");
        // Another statement, or the same with other column types, is read on its own.
        let other = n
            .run_by_id("SELECT v FROM t WHERE v = ?1", &[ColType::Text], 1, |_| {
                Ok(Vec::new())
            })
            .unwrap()
            .unwrap()
            .unwrap();
        assert!(other.is_none(), "read again, not answered as integers");
        // A write counted ends the snapshot and what was read on it.
        write(dir.path(), 2);
        n.readers().wrote();
        assert_eq!(by_id(&n, 2, &reads), Some(2));
        assert_eq!(reads.get(), 3);
        // That read ran after a write, on no snapshot: nothing of it is remembered.
        assert_eq!(by_id(&n, 2, &reads), Some(2));
        assert_eq!(reads.get(), 4);
        assert_eq!(by_id(&n, 2, &reads), Some(2));
        assert_eq!(reads.get(), 4, "on the new snapshot it is remembered again");
        // A schema change ends it too.
        schema.fetch_add(1, Ordering::AcqRel);
        assert_eq!(by_id(&n, 2, &reads), Some(2));
        assert_eq!(reads.get(), 5);
    }

    #[test]
    fn a_renewed_snapshot_reads_again_and_sees_another_process() {
        let dir = tempfile::tempdir().unwrap();
        let schema = Arc::new(AtomicU64::new(0));
        let n = near_aged(dir.path(), &schema, Duration::from_millis(50));
        let reads = std::cell::Cell::new(0);
        assert_eq!(by_id(&n, 7, &reads), None);
        write(dir.path(), 7);
        assert_eq!(by_id(&n, 7, &reads), None, "the snapshot is kept");
        assert_eq!(reads.get(), 1);
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(
            by_id(&n, 7, &reads),
            Some(7),
            "a renewed snapshot sees the write"
        );
        assert_eq!(reads.get(), 2);
    }
}
