//! Backups of an installation, taken while its server runs: a consistent snapshot of the
//! SQLite database ([`crate::storage::snapshot`]), then every file of the data directory (result
//! files, stored PDFs and `res/` files, the working copies of running uploads), then a manifest
//! with each file's size and SHA-256. The manifest is written last, so a backup cut off half-way
//! is never listed or restored. A restore checks every checksum before it writes anything.
//!
//! On PostgreSQL the backup holds the files and says where the database is; the database is
//! backed up with its own tools (see the README).

pub mod schedule;

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

/// Every file under `dir`, relative to it, skipping `skip` (and what is under it).
fn walk(dir: &Path, skip: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if skip.iter().any(|s| p.starts_with(s)) {
                continue;
            }
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(p),
                Ok(t) if t.is_file() => {
                    if let Ok(rel) = p.strip_prefix(dir) {
                        out.push(rel.to_path_buf());
                    }
                }
                _ => {}
            }
        }
    }
    out.sort();
    out
}

fn slashed(p: &Path) -> String {
    p.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// Takes a backup of `inst` into a new folder of `to`; returns that folder.
pub fn backup(inst: &Installation, to: &Path) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(to).with_context(|| format!("cannot create {}", to.display()))?;
    let taken_dt = crate::time::now();
    let name = format!(
        "{}-{}",
        taken_dt.replace([' ', ':'], "").replace('-', ""),
        hex::encode(rand::random::<[u8; 3]>())
    );
    let dir = to.join(&name);
    std::fs::create_dir(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let (database, postgres, db_file) = match inst.sqlite_file() {
        Some(db) => {
            let out = dir.join(DATABASE);
            crate::storage::snapshot::sqlite_into(&db, &out)
                .with_context(|| format!("cannot snapshot {}", db.display()))?;
            let (size, sha256) = hash_file(&out)?;
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
        files,
    };
    let tmp = dir.join(format!("{MANIFEST}.partial"));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(&serde_json::to_vec_pretty(&manifest)?)?;
    f.sync_all()?;
    std::fs::rename(&tmp, dir.join(MANIFEST))?;
    Ok(dir)
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

/// Removes all but the newest `keep` complete backups of `to` (and any cut-off ones older than
/// the oldest kept).
pub fn prune(to: &Path, keep: usize) -> anyhow::Result<Vec<PathBuf>> {
    let complete = list(to);
    let cut = complete.len().saturating_sub(keep);
    let mut removed = Vec::new();
    for p in &complete[..cut] {
        std::fs::remove_dir_all(p)?;
        removed.push(p.clone());
    }
    Ok(removed)
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
        let p = from.join(&e.path);
        let (size, sha) = hash_file(&p).with_context(|| format!("{}: missing", e.path))?;
        if size != e.size || sha != e.sha256 {
            bail!(
                "{}: does not match the manifest (size {size}, expected {}; checksum differs: {})",
                e.path,
                e.size,
                sha != e.sha256
            );
        }
    }
    Ok(m)
}

/// Restores the backup in `from` into the empty (or absent) `data_dir`, after checking every
/// checksum.
pub fn restore(from: &Path, data_dir: &Path) -> anyhow::Result<Manifest> {
    if let Ok(mut entries) = std::fs::read_dir(data_dir)
        && entries.next().is_some()
    {
        bail!(
            "{} is not empty: a restore goes into an empty directory",
            data_dir.display()
        );
    }
    let m = verify(from)?;
    std::fs::create_dir_all(data_dir)?;
    if let Some(db) = &m.database {
        let out = data_dir.join(DATABASE);
        copy_hashed(&from.join(&db.path), &out)?;
        crate::storage::snapshot::sqlite_check(&out)?;
    }
    for e in &m.files {
        let rel = e.path.strip_prefix("files/").unwrap_or(&e.path);
        let inside = Path::new(rel)
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
        anyhow::ensure!(inside, "{}: a path outside the data directory", e.path);
        let (_, sha) = copy_hashed(&from.join(&e.path), &data_dir.join(rel))?;
        anyhow::ensure!(sha == e.sha256, "{}: changed while it was restored", e.path);
    }
    Ok(m)
}
