//! Where backups go: a directory (one folder per backup) or an object store named by URL as for
//! `--storage-url` (one prefix per backup). A backup for a store is first taken into a scratch
//! folder (`TMPDIR`), then streamed up file by file, the manifest last; a restore from a store
//! downloads the backup into a scratch folder beside the new data directory and checks it there
//! before anything is written into the data directory.

use super::{Installation, MANIFEST, Manifest};
use crate::objects::{self, Place};
use anyhow::Context;
use object_store::ObjectStoreExt;
use std::path::{Path, PathBuf};

/// Where backups are written, listed and read.
#[derive(Debug, Clone)]
pub enum Target {
    Dir(PathBuf),
    Store(Place),
}

impl Target {
    /// A directory path, `file:///path`, or an object-store URL.
    pub fn parse(s: &str) -> anyhow::Result<Target> {
        if let Some(path) = s.strip_prefix("file://") {
            return Ok(Target::Dir(PathBuf::from(path)));
        }
        if objects::is_url(s) {
            return Ok(Target::Store(objects::open(s)?));
        }
        Ok(Target::Dir(PathBuf::from(s)))
    }

    /// How the backup folder or prefix `name` is printed.
    fn location(&self, name: &str) -> String {
        match self {
            Target::Dir(d) => d.join(name).display().to_string(),
            Target::Store(p) => p.child(name).url,
        }
    }
}

/// Takes a backup of `inst` into `to`; returns its location.
pub async fn take(inst: &Installation, to: &Target) -> anyhow::Result<String> {
    take_from(inst, None, to).await
}

/// Takes a backup of `inst`, whose files are in the object store `storage_url` when one is
/// given (`--storage-url`), into `to`; returns its location. The store's files are copied
/// after the database's snapshot: every file a row of the snapshot names was stored before it.
pub async fn take_from(
    inst: &Installation,
    storage_url: Option<&str>,
    to: &Target,
) -> anyhow::Result<String> {
    let inst = Installation {
        data_dir: inst.data_dir.clone(),
        database_url: inst.database_url.clone(),
    };
    // Read before the files are copied: a recovery to it holds every row the files belong to.
    let lsn = match inst.is_postgres() {
        true => Some(
            crate::storage::snapshot::postgres_position(&inst.database_url)
                .await
                .context("cannot read the PostgreSQL database's position")?,
        ),
        false => None,
    };
    let store = storage_url.map(objects::open).transpose()?;
    let whole = |into: PathBuf| async move {
        let (dir, mut manifest) =
            tokio::task::spawn_blocking(move || super::collect(&inst, &into, lsn)).await??;
        if let Some(store) = &store {
            manifest.files.extend(store_files(store, &dir).await?);
        }
        let sealed = dir.clone();
        tokio::task::spawn_blocking(move || super::seal(&sealed, &manifest)).await??;
        anyhow::Ok(dir)
    };
    match to {
        Target::Dir(d) => {
            let dir = whole(d.clone()).await?;
            Ok(dir.display().to_string())
        }
        Target::Store(place) => {
            let scratch = tempfile::Builder::new()
                .prefix("entiserve-backup-")
                .tempdir()
                .context("cannot create a scratch folder for the backup")?;
            let dir = whole(scratch.path().to_path_buf()).await?;
            let name = dir
                .file_name()
                .and_then(|n| n.to_str())
                .context("a backup folder name")?
                .to_string();
            let m = super::read_manifest(&dir)?;
            let at = place.child(&name);
            for e in m.database.iter().chain(&m.files) {
                at.upload(&dir.join(&e.path), &e.path).await?;
            }
            // Last: only now is the backup complete.
            at.upload(&dir.join(MANIFEST), MANIFEST).await?;
            Ok(at.url)
        }
    }
}

/// Copies every file a server keeps in the object store `store` (bundle files, result files,
/// working copies of uploads) into `dir/files/`, as the data directory's files are copied;
/// returns their manifest entries.
async fn store_files(store: &Place, dir: &Path) -> anyhow::Result<Vec<super::Entry>> {
    let mut entries = Vec::new();
    for folder in crate::files::KEPT {
        for (rel, at) in store.child(folder).list_all().await? {
            let path = format!("files/{folder}/{rel}");
            super::ensure_inside(&path)?;
            let (size, sha256) = store.download_key(&at, &dir.join(&path)).await?;
            entries.push(super::Entry { path, size, sha256 });
        }
    }
    Ok(entries)
}

/// The complete backups in `to`, oldest first, by location.
pub async fn list(to: &Target) -> anyhow::Result<Vec<String>> {
    Ok(complete(to).await?.iter().map(|n| to.location(n)).collect())
}

/// The names of the complete backups in `to`, oldest first.
async fn complete(to: &Target) -> anyhow::Result<Vec<String>> {
    match to {
        Target::Dir(d) => Ok(super::list(d)
            .iter()
            .filter_map(|p| p.file_name().and_then(|n| n.to_str()).map(str::to_string))
            .collect()),
        Target::Store(place) => {
            let mut names = Vec::new();
            for name in place.folders().await? {
                let Some(bytes) = place.child(&name).read(MANIFEST).await? else {
                    continue;
                };
                if serde_json::from_slice::<Manifest>(&bytes).is_ok() {
                    names.push(name);
                }
            }
            names.sort();
            Ok(names)
        }
    }
}

/// Removes all but the newest `keep` complete backups of `to`, and those cut off (see
/// [`super::cut_off`]); returns how many it removed.
pub async fn prune(to: &Target, keep: usize) -> anyhow::Result<usize> {
    match to {
        Target::Dir(d) => {
            let d = d.clone();
            Ok(tokio::task::spawn_blocking(move || super::prune(&d, keep))
                .await??
                .len())
        }
        Target::Store(place) => {
            let names = complete(to).await?;
            let cut = names.len().saturating_sub(keep);
            let mut gone = names[..cut].to_vec();
            if let Some(oldest_kept) = names.get(cut) {
                for name in place.folders().await? {
                    if !names.contains(&name) && super::cut_off(&name, oldest_kept) {
                        gone.push(name);
                    }
                }
            }
            for name in &gone {
                // The manifest first: a backup half removed is never listed as complete.
                let at = place.child(name);
                match at.store.delete(&at.key(MANIFEST)).await {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => return Err(e).with_context(|| format!("cannot remove {}", at.url)),
                }
                at.remove_all().await?;
            }
            Ok(gone.len())
        }
    }
}

/// Restores the backup at `from` into the empty or absent `data_dir` as [`restore`] does, then,
/// when `storage_url` names an object store (`--storage-url`), moves the files a server keeps
/// into it, leaving the data directory the database (on SQLite) and scratch space. A store
/// that already holds such files is refused before anything is written.
pub async fn restore_into(
    from: &str,
    data_dir: &Path,
    storage_url: Option<&str>,
) -> anyhow::Result<Manifest> {
    let Some(url) = storage_url else {
        return restore(from, data_dir).await;
    };
    let place = objects::open(url)?;
    for folder in crate::files::KEPT {
        if let Some((rel, _)) = place.child(folder).list_all().await?.first() {
            anyhow::bail!(
                "the target is not empty: nothing was restored ({url} already holds files: \
                 {folder}/{rel}; restore into an empty store or prefix)"
            );
        }
    }
    let manifest = restore(from, data_dir).await?;
    let files = crate::files::Files::open(Some(url), data_dir)?;
    crate::migrate_data::copy_files(data_dir, &files).await?;
    for folder in crate::files::KEPT {
        match std::fs::remove_dir_all(data_dir.join(folder)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e)
                    .with_context(|| format!("cannot remove {folder} from the data directory"));
            }
            _ => {}
        }
    }
    Ok(manifest)
}

/// Restores the backup at `from` (a folder, or a backup's URL in a store) into the empty or
/// absent `data_dir`, after checking every checksum.
pub async fn restore(from: &str, data_dir: &Path) -> anyhow::Result<Manifest> {
    super::refuse_non_empty(data_dir)?;
    let from = match Target::parse(from)? {
        Target::Dir(d) => {
            let data_dir = data_dir.to_path_buf();
            return tokio::task::spawn_blocking(move || super::restore(&d, &data_dir)).await?;
        }
        Target::Store(place) => place,
    };
    let bytes = from
        .read(MANIFEST)
        .await?
        .with_context(|| format!("{} is not a complete backup (no {MANIFEST})", from.url))?;
    let m: Manifest = serde_json::from_slice(&bytes)
        .with_context(|| format!("{}: unreadable {MANIFEST}", from.url))?;
    // The scratch folder sits beside the data directory when it can (the same disk), else in
    // TMPDIR; never inside the data directory, which must stay empty until the checks pass.
    let absolute = std::path::absolute(data_dir)?;
    let beside = absolute.parent().map(Path::to_path_buf);
    let scratch = beside
        .and_then(|parent| {
            std::fs::create_dir_all(&parent).ok()?;
            tempfile::Builder::new()
                .prefix(".entiserve-restore-")
                .tempdir_in(parent)
                .ok()
        })
        .map_or_else(
            || {
                tempfile::Builder::new()
                    .prefix("entiserve-restore-")
                    .tempdir()
                    .context("cannot create a scratch folder for the restore")
            },
            Ok,
        )?;
    for e in m.database.iter().chain(&m.files) {
        super::ensure_inside(&e.path)?;
        from.download(&e.path, &scratch.path().join(&e.path))
            .await?;
    }
    std::fs::write(scratch.path().join(MANIFEST), &bytes)?;
    let (local, data_dir) = (scratch.path().to_path_buf(), data_dir.to_path_buf());
    tokio::task::spawn_blocking(move || super::restore(&local, &data_dir)).await?
}
