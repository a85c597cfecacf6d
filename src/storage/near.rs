//! Point reads for SQLite on the calling thread: each thread that reads holds its own read
//! connection to the database, opened on its first read, so a read by id runs where its request
//! runs, without handing it to another thread and waiting to be woken with the answer. That
//! hand-off cost more than the read itself (a row by its key is a few microseconds, the two
//! thread switches several times that). The writer already runs inline in the same way; list
//! pages and counts, which may visit many rows, keep their own lane.

use rusqlite::Connection;
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

/// Opens one more read connection to the database.
type Open = Box<dyn Fn() -> rusqlite::Result<Connection> + Send + Sync>;

/// One database's point reads: how to open a connection for a thread, and the schema version
/// whose change makes every thread drop its cached statements.
pub struct Near {
    /// Its identity among the databases a thread reads, alive as long as this value.
    id: Arc<()>,
    open: Open,
    schema: Arc<AtomicU64>,
}

/// A thread's connection to one database.
struct Held {
    owner: Weak<()>,
    conn: Connection,
    seen: u64,
}

thread_local! {
    static HELD: RefCell<Vec<Held>> = const { RefCell::new(Vec::new()) };
}

impl Near {
    pub fn new(open: Open, schema: Arc<AtomicU64>) -> Near {
        Near {
            id: Arc::new(()),
            open,
            schema,
        }
    }

    /// Runs `f` on this thread's connection to the database, opening it first if needed;
    /// `Ok(None)` when `f` panicked. Connections of databases closed since are closed here.
    pub fn run<T>(&self, f: impl FnOnce(&Connection) -> T) -> rusqlite::Result<Option<T>> {
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            held.retain(|h| h.owner.strong_count() > 0);
            let now = self.schema.load(Ordering::Acquire);
            let i = match held
                .iter()
                .position(|h| std::ptr::eq(h.owner.as_ptr(), Arc::as_ptr(&self.id)))
            {
                Some(i) => i,
                None => {
                    held.push(Held {
                        owner: Arc::downgrade(&self.id),
                        conn: (self.open)()?,
                        seen: now,
                    });
                    held.len() - 1
                }
            };
            let h = &mut held[i];
            if h.seen != now {
                h.conn.flush_prepared_statement_cache();
                h.seen = now;
            }
            let conn = &h.conn;
            Ok(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(conn))).ok())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn near(dir: &std::path::Path, schema: &Arc<AtomicU64>) -> Near {
        let path = dir.join("t.db");
        let c = Connection::open(&path).unwrap();
        c.execute_batch(
            "PRAGMA journal_mode = WAL; CREATE TABLE t (v INTEGER); INSERT INTO t VALUES (1);",
        )
        .unwrap();
        Near::new(Box::new(move || Connection::open(&path)), schema.clone())
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
        let writer = Connection::open(dir.path().join("t.db")).unwrap();
        writer.execute("INSERT INTO t VALUES (41)", []).unwrap();
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
}
