//! A consistent copy of a live SQLite database: SQLite's online backup API copies every page in
//! one step, inside one read transaction (which in WAL mode never blocks the writer), so the
//! copy is the database as it was at one instant. On PostgreSQL, the position of its write-ahead
//! log, which a point-in-time recovery can stop at.

use std::path::Path;

/// Writes the database at `db` as it is at one instant into `out` (which must not exist),
/// without syncing it to the disk.
pub fn sqlite_into(db: &Path, out: &Path) -> anyhow::Result<()> {
    let src = rusqlite::Connection::open_with_flags(
        db,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    src.busy_timeout(std::time::Duration::from_secs(30))?;
    // Pages are read through a memory map rather than copied out by read().
    src.pragma_update(None, "mmap_size", 1i64 << 40)?;
    let mut dst = rusqlite::Connection::open(out)?;
    // A new file that nothing reads until the backup's manifest names it: no journal, no sync
    // of its own (the caller syncs it once, after its checksum).
    dst.execute_batch("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;")?;
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

/// The current write-ahead log position of the PostgreSQL database at `url`
/// (`pg_current_wal_lsn()`, for example `0/3000148`).
pub async fn postgres_position(url: &str) -> anyhow::Result<String> {
    use sqlx::Connection;
    let mut c = sqlx::PgConnection::connect(url).await?;
    let (lsn,): (String,) = sqlx::query_as("SELECT pg_current_wal_lsn()::text")
        .fetch_one(&mut c)
        .await?;
    c.close().await?;
    Ok(lsn)
}
