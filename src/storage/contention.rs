//! Contention: the database failures that only mean "another writer was in the way" (a
//! PostgreSQL deadlock or serialization failure, a busy or locked SQLite database). They are
//! classified here from each backend's error codes, and counted process-wide (retries, calls
//! that gave up, slow row-lock waits) for logs and a metrics endpoint to read. Whoever runs
//! the work retries it (see [`crate::engine::retry`]).

use std::sync::atomic::{AtomicU64, Ordering};

/// Why a statement lost to another writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// PostgreSQL `40P01`: the server broke a lock cycle by failing this transaction.
    Deadlock,
    /// PostgreSQL `40001`: a concurrent change made this transaction's view invalid.
    Serialization,
    /// SQLite `SQLITE_BUSY` / `SQLITE_LOCKED`: another connection holds the lock.
    Busy,
}

impl Class {
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Deadlock => "deadlock",
            Class::Serialization => "serialization_failure",
            Class::Busy => "busy",
        }
    }
}

impl std::fmt::Display for Class {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The contention class of a PostgreSQL SQLSTATE, if it is one.
pub fn pg_class(sqlstate: &str) -> Option<Class> {
    match sqlstate {
        "40P01" => Some(Class::Deadlock),
        "40001" => Some(Class::Serialization),
        _ => None,
    }
}

/// The contention class of a SQLite error, if it is one.
pub fn sqlite_class(e: &rusqlite::Error) -> Option<Class> {
    match e {
        rusqlite::Error::SqliteFailure(f, _)
            if matches!(
                f.code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            ) =>
        {
            Some(Class::Busy)
        }
        _ => None,
    }
}

static DEADLOCK: AtomicU64 = AtomicU64::new(0);
static SERIALIZATION: AtomicU64 = AtomicU64::new(0);
static BUSY: AtomicU64 = AtomicU64::new(0);
static GAVE_UP: AtomicU64 = AtomicU64::new(0);
static LOCK_WAITS: AtomicU64 = AtomicU64::new(0);
static LOCK_WAIT_MICROS: AtomicU64 = AtomicU64::new(0);

/// Counts one retry caused by `class`.
pub fn count_retry(class: Class) {
    let c = match class {
        Class::Deadlock => &DEADLOCK,
        Class::Serialization => &SERIALIZATION,
        Class::Busy => &BUSY,
    };
    c.fetch_add(1, Ordering::Relaxed);
}

/// Counts work that still met contention after its last attempt.
pub fn count_gave_up() {
    GAVE_UP.fetch_add(1, Ordering::Relaxed);
}

/// Counts a row-lock wait long enough to be worth reporting.
pub fn count_lock_wait(waited: std::time::Duration) {
    LOCK_WAITS.fetch_add(1, Ordering::Relaxed);
    LOCK_WAIT_MICROS.fetch_add(waited.as_micros() as u64, Ordering::Relaxed);
}

/// The process-wide counters since start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Retries after a deadlock.
    pub deadlock_retries: u64,
    /// Retries after a serialization failure.
    pub serialization_retries: u64,
    /// Retries after a busy database.
    pub busy_retries: u64,
    /// Work that met contention on every attempt and failed.
    pub gave_up: u64,
    /// Row-lock waits of at least [`SLOW_LOCK_WAIT`].
    pub slow_lock_waits: u64,
    /// Their total time, microseconds.
    pub slow_lock_wait_micros: u64,
}

impl Counts {
    /// Every retry, whatever its class.
    pub fn retries(&self) -> u64 {
        self.deadlock_retries + self.serialization_retries + self.busy_retries
    }
}

/// A row-lock wait at least this long is logged and counted.
pub const SLOW_LOCK_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

/// A snapshot of the counters.
pub fn counts() -> Counts {
    Counts {
        deadlock_retries: DEADLOCK.load(Ordering::Relaxed),
        serialization_retries: SERIALIZATION.load(Ordering::Relaxed),
        busy_retries: BUSY.load(Ordering::Relaxed),
        gave_up: GAVE_UP.load(Ordering::Relaxed),
        slow_lock_waits: LOCK_WAITS.load(Ordering::Relaxed),
        slow_lock_wait_micros: LOCK_WAIT_MICROS.load(Ordering::Relaxed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_codes() {
        assert_eq!(pg_class("40P01"), Some(Class::Deadlock));
        assert_eq!(pg_class("40001"), Some(Class::Serialization));
        assert_eq!(pg_class("23505"), None);
    }

    #[test]
    fn sqlite_busy_is_contention() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let a = rusqlite::Connection::open(&path).unwrap();
        a.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (x INTEGER);")
            .unwrap();
        let b = rusqlite::Connection::open(&path).unwrap();
        b.busy_timeout(std::time::Duration::ZERO).unwrap();
        a.execute_batch("BEGIN IMMEDIATE").unwrap();
        let e = b.execute_batch("BEGIN IMMEDIATE").unwrap_err();
        assert_eq!(sqlite_class(&e), Some(Class::Busy));
        let other = b.execute_batch("SELECT * FROM missing").unwrap_err();
        assert_eq!(sqlite_class(&other), None);
    }

    #[test]
    fn counters_add_up() {
        let before = counts();
        count_retry(Class::Deadlock);
        count_retry(Class::Busy);
        count_gave_up();
        let after = counts();
        assert!(after.deadlock_retries > before.deadlock_retries);
        assert!(after.busy_retries > before.busy_retries);
        assert!(after.retries() >= before.retries() + 2);
        assert!(after.gave_up > before.gave_up);
    }
}
