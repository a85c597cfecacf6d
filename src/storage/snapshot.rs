//! A consistent copy of a live SQLite database: SQLite's online backup API copies every page in
//! one step, inside one read transaction (which in WAL mode never blocks the writer), so the
//! copy is the database as it was at one instant.

use std::path::Path;

/// Writes the database at `db` as it is at one instant into `out` (which must not exist).
pub fn sqlite_into(db: &Path, out: &Path) -> anyhow::Result<()> {
    let src = rusqlite::Connection::open_with_flags(
        db,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    src.busy_timeout(std::time::Duration::from_secs(30))?;
    let mut dst = rusqlite::Connection::open(out)?;
    let backup = rusqlite::backup::Backup::new(&src, &mut dst)?;
    // All pages in one step: one read transaction, one consistent state.
    match backup.step(-1)? {
        rusqlite::backup::StepResult::Done => {}
        other => anyhow::bail!("the snapshot did not complete: {other:?}"),
    }
    Ok(())
}

/// `PRAGMA integrity_check` of the database at `db`: `Ok` when it says ok.
pub fn sqlite_check(db: &Path) -> anyhow::Result<()> {
    let c = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let said: String = c.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
    anyhow::ensure!(said == "ok", "integrity check: {said}");
    Ok(())
}
