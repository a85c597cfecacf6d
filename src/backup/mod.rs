//! Backups of an installation, taken while its server runs: a consistent snapshot of the
//! SQLite database ([`crate::storage::snapshot`]), then every file of the data directory (result
//! files, stored PDFs and `res/` files, the working copies of running uploads), then a manifest
//! with each file's size and SHA-256. The manifest is written last, so a backup cut off half-way
//! is never listed or restored. A restore checks every checksum before it writes anything.
//!
//! On PostgreSQL the backup holds the files and says where the database is; the database is
//! backed up with its own tools (see the README).

pub mod schedule;
pub mod target;

pub use target::Target;

use crate::files::{slashed, walk};
use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The file that makes a backup complete.
pub const MANIFEST: &str = "manifest.json";
/// The database file of a backup and of a data directory.
pub const DATABASE: &str = "entiserve.db";

/// What a complete backup holds.
#[derive(Debug, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    /// When the snapshot was taken.
    pub taken_dt: String,
    /// The SQLite snapshot, when the installation runs on SQLite.
    pub database: Option<Entry>,
    /// The PostgreSQL database the files belong to (password removed), when it runs on that.
    pub postgres: Option<String>,
    /// Its write-ahead log position when the files were copied (`pg_current_wal_lsn()`): a
    /// point-in-time recovery of the database to it matches the files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postgres_lsn: Option<String>,
    /// Every file, by its path in the data directory.
    pub files: Vec<Entry>,
}

/// One file of a backup.
#[derive(Debug, Serialize, Deserialize)]
pub struct Entry {
    /// Its path inside the backup, `/`-separated.
    pub path: String,
    pub size: u64,
    pub sha256: String,
}

/// Where an installation lives.
pub struct Installation {
    pub data_dir: PathBuf,
    pub database_url: String,
}

impl Installation {
    /// Whether the database is PostgreSQL.
    pub fn is_postgres(&self) -> bool {
        self.database_url.starts_with("postgres")
    }

    /// The SQLite file, when the database is SQLite.
    fn sqlite_file(&self) -> Option<PathBuf> {
        let u = &self.database_url;
        let path = u
            .strip_prefix("sqlite://")
            .or_else(|| u.strip_prefix("sqlite:"))?;
        Some(PathBuf::from(path.split('?').next().unwrap_or(path)))
    }
}

/// Copies `from` to `to` (creating its folder), returning its size and SHA-256.
fn copy_hashed(from: &Path, to: &Path) -> std::io::Result<(u64, String)> {
    if let Some(d) = to.parent() {
        std::fs::create_dir_all(d)?;
    }
    let mut src = std::fs::File::open(from)?;
    let mut dst = std::fs::File::create(to)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut size = 0u64;
    loop {
        let n = src.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        dst.write_all(&buf[..n])?;
        size += n as u64;
    }
    dst.sync_all()?;
    Ok((size, hex::encode(h.finalize())))
}

/// Size and SHA-256 of a file.
fn hash_file(p: &Path) -> std::io::Result<(u64, String)> {
    let mut f = std::fs::File::open(p)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut size = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        size += n as u64;
    }
    Ok((size, hex::encode(h.finalize())))
}

/// Takes a backup of `inst` into a new folder of `to`; returns that folder.
pub fn backup(inst: &Installation, to: &Path) -> anyhow::Result<PathBuf> {
    backup_at(inst, to, None)
}

/// [`backup`], recording `postgres_lsn` as the PostgreSQL database's position.
pub fn backup_at(
    inst: &Installation,
    to: &Path,
    postgres_lsn: Option<String>,
) -> anyhow::Result<PathBuf> {
    let (dir, manifest) = collect(inst, to, postgres_lsn)?;
    seal(&dir, &manifest)?;
    Ok(dir)
}

/// The first part of a backup: a new folder of `to` with the database's snapshot and the data
/// directory's files, and the manifest that describes them, not yet written.
pub(crate) fn collect(
    inst: &Installation,
    to: &Path,
    postgres_lsn: Option<String>,
) -> anyhow::Result<(PathBuf, Manifest)> {
    std::fs::create_dir_all(to).with_context(|| format!("cannot create {}", to.display()))?;
    let now = chrono::Utc::now();
    let taken_dt = crate::time::format(now);
    let name = name_at(now);
    let dir = to.join(&name);
    std::fs::create_dir(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let (database, postgres, db_file) = match inst.sqlite_file() {
        Some(db) => {
            let out = dir.join(DATABASE);
            crate::storage::snapshot::sqlite_into(&db, &out)
                .with_context(|| format!("cannot snapshot {}", db.display()))?;
            // The checksum (CPU) and the flush to the disk (I/O) at the same time.
            let flush = {
                let out = out.clone();
                std::thread::spawn(move || std::fs::File::open(out)?.sync_all())
            };
            let hashed = hash_file(&out);
            flush
                .join()
                .map_err(|_| anyhow::anyhow!("the flush of the snapshot failed"))??;
            let (size, sha256) = hashed?;
            let entry = Entry {
                path: DATABASE.into(),
                size,
                sha256,
            };
            (Some(entry), None, Some(db))
        }
        None => (None, Some(crate::storage::redact(&inst.database_url)), None),
    };
    // Every file of the data directory but the live database (and this backup, if it is
    // inside).
    let mut skip = vec![dir.clone(), to.to_path_buf()];
    if let Some(db) = &db_file {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            skip.push(PathBuf::from(format!("{}{suffix}", db.display())));
        }
    }
    let mut files = Vec::new();
    for rel in walk(&inst.data_dir, &skip) {
        let path = format!("files/{}", slashed(&rel));
        match copy_hashed(&inst.data_dir.join(&rel), &dir.join(&path)) {
            Ok((size, sha256)) => files.push(Entry { path, size, sha256 }),
            // Removed since the walk (an expired result, a finished upload's working copy).
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("cannot copy {}", rel.display())),
        }
    }
    let manifest = Manifest {
        format: 1,
        taken_dt,
        database,
        postgres,
        postgres_lsn,
        files,
    };
    Ok((dir, manifest))
}

/// The last part of a backup: its manifest, which makes it complete.
pub(crate) fn seal(dir: &Path, manifest: &Manifest) -> anyhow::Result<()> {
    let tmp = dir.join(format!("{MANIFEST}.partial"));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(&serde_json::to_vec_pretty(manifest)?)?;
    f.sync_all()?;
    std::fs::rename(&tmp, dir.join(MANIFEST))?;
    Ok(())
}

/// A backup's name: when it was begun (UTC, to the second) and the microseconds within that
/// second in hexadecimal, so names sort in the order the backups were taken even when several
/// are taken in one second.
fn name_at(t: chrono::DateTime<chrono::Utc>) -> String {
    use chrono::Timelike;
    format!(
        "{}-{:06x}",
        t.format("%Y%m%d%H%M%S"),
        t.nanosecond().min(999_999_999) / 1000
    )
}

/// The complete backups in `to` (those with a manifest), oldest first.
pub fn list(to: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(to) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| read_manifest(p).is_ok())
        .collect();
    out.sort();
    out
}

/// How long a backup without a manifest is taken to be still running (another taker's, say)
/// before pruning may remove it as cut off.
pub const CUT_OFF_AFTER: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// When the backup named `name` was begun, if `name` is a backup's name
/// (`YYYYMMDDHHMMSS-xxxxxx`, UTC).
pub fn begun(name: &str) -> Option<chrono::NaiveDateTime> {
    let (time, tag) = name.split_once('-')?;
    let ok = time.len() == 14
        && tag.len() == 6
        && tag.bytes().all(|b| b.is_ascii_hexdigit())
        && time.bytes().all(|b| b.is_ascii_digit());
    ok.then(|| chrono::NaiveDateTime::parse_from_str(time, "%Y%m%d%H%M%S").ok())?
}

/// Whether the backup named `name`, which has no manifest, was cut off: begun before the
/// oldest backup kept (`oldest_kept`) and longer ago than [`CUT_OFF_AFTER`]. Anything not
/// named like a backup is never one.
pub fn cut_off(name: &str, oldest_kept: &str) -> bool {
    let limit = chrono::Utc::now().naive_utc() - CUT_OFF_AFTER;
    name < oldest_kept && begun(name).is_some_and(|t| t < limit)
}

/// Removes all but the newest `keep` complete backups of `to` (each manifest first, so a
/// backup half removed is never listed), and the backups cut off (see [`cut_off`]).
pub fn prune(to: &Path, keep: usize) -> anyhow::Result<Vec<PathBuf>> {
    let complete = list(to);
    let cut = complete.len().saturating_sub(keep);
    let mut removed = Vec::new();
    for p in &complete[..cut] {
        std::fs::remove_file(p.join(MANIFEST))?;
        std::fs::remove_dir_all(p)?;
        removed.push(p.clone());
    }
    let name_of = |p: &Path| p.file_name().and_then(|n| n.to_str()).map(str::to_string);
    if let Some(oldest_kept) = complete.get(cut).and_then(|p| name_of(p)) {
        let mut gone: Vec<PathBuf> = std::fs::read_dir(to)?
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.is_dir()
                    && !p.join(MANIFEST).exists()
                    && name_of(p).is_some_and(|n| cut_off(&n, &oldest_kept))
            })
            .collect();
        gone.sort();
        for p in gone {
            std::fs::remove_dir_all(&p)?;
            removed.push(p);
        }
    }
    Ok(removed)
}

/// A restore goes into an absent or empty directory only.
fn refuse_non_empty(data_dir: &Path) -> anyhow::Result<()> {
    if let Ok(mut entries) = std::fs::read_dir(data_dir)
        && entries.next().is_some()
    {
        bail!(
            "the target is not empty: nothing was restored ({} holds files; a restore goes \
             into an empty or absent directory)",
            data_dir.display()
        );
    }
    Ok(())
}

/// A manifest's path must stay inside the backup (and the data directory).
fn ensure_inside(path: &str) -> anyhow::Result<()> {
    let inside = Path::new(path)
        .components()
        .all(|c| matches!(c, std::path::Component::Normal(_)));
    anyhow::ensure!(inside, "{path}: a path outside the data directory");
    Ok(())
}

fn read_manifest(dir: &Path) -> anyhow::Result<Manifest> {
    let text = std::fs::read(dir.join(MANIFEST))
        .with_context(|| format!("{} is not a complete backup (no {MANIFEST})", dir.display()))?;
    serde_json::from_slice(&text)
        .with_context(|| format!("{}: unreadable {MANIFEST}", dir.display()))
}

/// Checks every file of the backup in `from` against its manifest; names the first that
/// does not match.
pub fn verify(from: &Path) -> anyhow::Result<Manifest> {
    let m = read_manifest(from)?;
    for e in m.database.iter().chain(&m.files) {
        ensure_inside(&e.path)?;
        let p = from.join(&e.path);
        let (size, sha) = hash_file(&p).with_context(|| format!("{}: missing", e.path))?;
        if size != e.size || sha != e.sha256 {
            bail!(
                "`{}` does not match its checksum: nothing was restored (the backup is damaged: \
                 {size} bytes where the manifest says {}; restore another backup)",
                e.path,
                e.size,
            );
        }
    }
    Ok(m)
}

/// Restores the backup in `from` into the empty (or absent) `data_dir`, after checking every
/// checksum.
pub fn restore(from: &Path, data_dir: &Path) -> anyhow::Result<Manifest> {
    refuse_non_empty(data_dir)?;
    let m = verify(from)?;
    std::fs::create_dir_all(data_dir)?;
    if let Some(db) = &m.database {
        let out = data_dir.join(DATABASE);
        copy_hashed(&from.join(&db.path), &out)?;
        crate::storage::snapshot::sqlite_check(&out)?;
    }
    for e in &m.files {
        ensure_inside(&e.path)?;
        let rel = e.path.strip_prefix("files/").unwrap_or(&e.path);
        let (_, sha) = copy_hashed(&from.join(&e.path), &data_dir.join(rel))?;
        anyhow::ensure!(sha == e.sha256, "{}: changed while it was restored", e.path);
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn names_sort_in_taking_order_within_one_second() {
        let t = chrono::Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap();
        let names: Vec<String> = [0u32, 9_000, 150_000_000, 999_999_999]
            .iter()
            .map(|ns| name_at(t + chrono::Duration::nanoseconds(i64::from(*ns))))
            .collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
        assert_eq!(names[0], "20260102030405-000000");
        assert_eq!(names[2], "20260102030405-0249f0");
        for n in &names {
            assert_eq!(
                begun(n),
                Some(t.naive_utc()),
                "{n} is read back as a backup's name"
            );
        }
    }
}
