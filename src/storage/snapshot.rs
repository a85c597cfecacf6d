//! A consistent copy of a live SQLite database: `VACUUM INTO` reads one snapshot (a read
//! transaction, which in WAL mode never blocks the writer) and writes it as a new, compact
//! database file.

use std::path::Path;

/// Writes the database at `db` as it is at one instant into `out` (which must not exist).
pub fn sqlite_into(db: &Path, out: &Path) -> anyhow::Result<()> {
    let c = rusqlite::Connection::open_with_flags(
        db,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    c.busy_timeout(std::time::Duration::from_secs(30))?;
    c.execute("VACUUM INTO ?1", [out.to_string_lossy().as_ref()])?;
    Ok(())
}

/// `PRAGMA integrity_check` of the database at `db`: `Ok` when it says ok.
pub fn sqlite_check(db: &Path) -> anyhow::Result<()> {
    let c = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let said: String = c.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
    anyhow::ensure!(said == "ok", "integrity check: {said}");
    Ok(())
}
