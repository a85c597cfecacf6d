//! The file storage: every file a server keeps (uploads being run, result files, bundle files
//! such as one-page PDFs and `res/` folders), in the data directory by default or in an object
//! store named by `--storage-url` (through [`crate::objects`]), so that servers on one database
//! and one store can each serve and resume anything. Keys are `/`-separated relative paths
//! checked by [`valid_key`]; [`Files::child`] scopes a view to a folder.

use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::{ObjectStore, ObjectStoreExt};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncSeekExt};

/// A failure of the file storage.
#[derive(Debug, thiserror::Error)]
#[error("file storage: {message}")]
pub struct FileError {
    pub message: String,
    /// The disk or the store is full.
    pub full: bool,
}

impl FileError {
    fn new(message: impl Into<String>) -> FileError {
        FileError {
            message: message.into(),
            full: false,
        }
    }
}

impl From<FileError> for crate::storage::StorageError {
    fn from(e: FileError) -> Self {
        if e.full {
            crate::storage::StorageError::Full(e.to_string())
        } else {
            crate::storage::StorageError::Database(e.to_string())
        }
    }
}

fn err(e: impl std::fmt::Display) -> FileError {
    crate::telemetry::store_error();
    FileError::new(e.to_string())
}

/// A failure of the local directory: [`FileError::full`] when the disk is full.
fn io_err(e: std::io::Error) -> FileError {
    crate::telemetry::store_error();
    FileError {
        full: crate::storage::is_out_of_space(&e),
        message: e.to_string(),
    }
}

/// What is known of a stored file without reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    pub size: u64,
    /// A strong entity tag, quoted (`"..."`), that changes when the file does.
    pub etag: String,
}

/// Bytes of a stored file, as they come.
pub type ByteStream = BoxStream<'static, std::io::Result<bytes::Bytes>>;

/// The folders of the file storage that hold what a server keeps: bundle files, result files
/// and the working copies of uploads (backups and `migrate-data` copy these).
pub const KEPT: [&str; 3] = [MEDIA_FILES, "media/keep1m", UPLOADS];

/// The folder of the file storage that holds bundle files (`/media/files/...`).
pub const MEDIA_FILES: &str = "media/files";

/// The folder of the file storage that holds uploads being run.
pub const UPLOADS: &str = "uploads";

/// Every file under `dir`, relative to it, skipping `skip` (and what is under it).
pub(crate) fn walk(dir: &Path, skip: &[PathBuf]) -> Vec<PathBuf> {
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

/// `p` with `/` between its parts, as a storage key.
pub(crate) fn slashed(p: &Path) -> String {
    p.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// Where the files are.
#[derive(Clone)]
enum At {
    /// A local directory (the default: the data directory).
    Local(PathBuf),
    /// A place in an object store.
    Store(crate::objects::Place),
}

/// Stored files by key, in a local directory or an object store.
#[derive(Clone)]
pub struct Files {
    at: At,
}

impl std::fmt::Debug for Files {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

/// Whether `key` is a relative path of plain segments (no `..`, `.`, empty segments,
/// backslashes or NUL).
pub fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 1024
        && !key.contains(['\\', '\0'])
        && key
            .split('/')
            .all(|s| !s.is_empty() && s != "." && s != "..")
}

fn checked(key: &str) -> Result<&str, FileError> {
    if valid_key(key) {
        Ok(key)
    } else {
        Err(FileError::new(format!("invalid key `{key}`")))
    }
}

impl Files {
    /// Files in the local directory `root`.
    pub fn local(root: impl Into<PathBuf>) -> Files {
        Files {
            at: At::Local(root.into()),
        }
    }

    /// The file storage of a server: the object store `url` names (`--storage-url`), else
    /// the data directory.
    pub fn open(url: Option<&str>, data_dir: &Path) -> anyhow::Result<Files> {
        Ok(match url.map(str::trim).filter(|u| !u.is_empty()) {
            Some(url) => Files {
                at: At::Store(crate::objects::open(url)?),
            },
            None => Files::local(data_dir),
        })
    }

    /// Whether the files are in an object store that other servers may share (rather than
    /// in this server's own directory).
    pub fn is_shared(&self) -> bool {
        matches!(self.at, At::Store(_))
    }

    /// Where the files are, for messages.
    pub fn describe(&self) -> String {
        match &self.at {
            At::Local(d) => d.display().to_string(),
            At::Store(p) => p.url.clone(),
        }
    }

    /// The view of the folder `name` (a valid key) below this one.
    pub fn child(&self, name: &str) -> Files {
        Files {
            at: match &self.at {
                At::Local(d) => At::Local(d.join(name)),
                At::Store(p) => At::Store(p.child(name)),
            },
        }
    }

    /// The local path of `key` when the files are in a local directory.
    pub fn local_path(&self, key: &str) -> Option<PathBuf> {
        match &self.at {
            At::Local(d) => valid_key(key).then(|| d.join(key)),
            At::Store(_) => None,
        }
    }

    /// Stores the local file `from` under `key`; `from` is moved (or removed once copied).
    /// Into an object store, the file is streamed as a multipart upload.
    pub async fn put(&self, key: &str, from: &Path) -> Result<(), FileError> {
        let key = checked(key)?;
        match &self.at {
            At::Local(d) => {
                let Some(to) = local_target(d, key, from).await? else {
                    return Ok(());
                };
                if tokio::fs::rename(from, &to).await.is_err() {
                    tokio::fs::copy(from, &to).await.map_err(io_err)?;
                    let _ = tokio::fs::remove_file(from).await;
                }
                Ok(())
            }
            At::Store(p) => {
                p.upload(from, key)
                    .await
                    .map_err(|e| err(format!("{e:#}")))?;
                let _ = tokio::fs::remove_file(from).await;
                Ok(())
            }
        }
    }

    /// Stores a copy of the local file `from` under `key`, keeping `from`.
    pub async fn put_copy(&self, key: &str, from: &Path) -> Result<(), FileError> {
        let key = checked(key)?;
        match &self.at {
            At::Local(d) => {
                let Some(to) = local_target(d, key, from).await? else {
                    return Ok(());
                };
                tokio::fs::copy(from, &to).await.map_err(io_err)?;
                Ok(())
            }
            At::Store(p) => p.upload(from, key).await.map_err(|e| err(format!("{e:#}"))),
        }
    }

    /// The size and entity tag of the file under `key`; None when there is none.
    pub async fn head(&self, key: &str) -> Result<Option<Meta>, FileError> {
        if !valid_key(key) {
            return Ok(None);
        }
        match &self.at {
            At::Local(d) => match tokio::fs::metadata(d.join(key)).await {
                Ok(m) if m.is_file() => {
                    let modified = m
                        .modified()
                        .ok()
                        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                        .unwrap_or_default();
                    Ok(Some(Meta {
                        size: m.len(),
                        etag: format!("\"{:x}-{:x}\"", modified.as_nanos(), m.len()),
                    }))
                }
                Ok(_) => Ok(None),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(err(e)),
            },
            At::Store(p) => match p.store.head(&p.key(key)).await {
                Ok(m) => Ok(Some(Meta {
                    size: m.size,
                    etag: quoted(m.e_tag.as_deref().unwrap_or_default(), &m),
                })),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(err(e)),
            },
        }
    }

    /// Streams the bytes `range` of the file under `key` (which must exist and hold them).
    pub async fn read(&self, key: &str, range: Range<u64>) -> Result<ByteStream, FileError> {
        let key = checked(key)?;
        match &self.at {
            At::Local(d) => {
                let mut f = tokio::fs::File::open(d.join(key)).await.map_err(io_err)?;
                f.seek(std::io::SeekFrom::Start(range.start))
                    .await
                    .map_err(err)?;
                let len = range.end.saturating_sub(range.start);
                Ok(read_stream(f.take(len), len))
            }
            At::Store(p) => {
                let options = object_store::GetOptions {
                    range: (range.end > range.start)
                        .then_some(object_store::GetRange::Bounded(range)),
                    ..Default::default()
                };
                let got = p.store.get_opts(&p.key(key), options).await.map_err(err)?;
                Ok(got
                    .into_stream()
                    .map(|r| {
                        r.map_err(|e| {
                            crate::telemetry::store_error();
                            std::io::Error::other(e)
                        })
                    })
                    .boxed())
            }
        }
    }

    /// Copies the file under `key` into the local file `to` (making its folder); false when
    /// there is no such file.
    pub async fn fetch(&self, key: &str, to: &Path) -> Result<bool, FileError> {
        let Some(meta) = self.head(key).await? else {
            return Ok(false);
        };
        if let Some(dir) = to.parent() {
            tokio::fs::create_dir_all(dir).await.map_err(io_err)?;
        }
        let partial = to.with_extension("fetching");
        let mut out = tokio::fs::File::create(&partial).await.map_err(io_err)?;
        let mut bytes = self.read(key, 0..meta.size).await?;
        while let Some(chunk) = bytes.next().await {
            let chunk = chunk.map_err(err)?;
            tokio::io::AsyncWriteExt::write_all(&mut out, &chunk)
                .await
                .map_err(io_err)?;
        }
        out.sync_all().await.map_err(io_err)?;
        tokio::fs::rename(&partial, to).await.map_err(io_err)?;
        Ok(true)
    }

    /// Removes the file under `key`, if there is one.
    pub async fn remove(&self, key: &str) -> Result<(), FileError> {
        let key = checked(key)?;
        match &self.at {
            At::Local(d) => match tokio::fs::remove_file(d.join(key)).await {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(err(e)),
                _ => Ok(()),
            },
            At::Store(p) => match p.store.delete(&p.key(key)).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(err(e)),
            },
        }
    }

    /// Removes every file whose key starts with `prefix/`.
    pub async fn remove_prefix(&self, prefix: &str) -> Result<(), FileError> {
        let prefix = checked(prefix)?;
        match &self.at {
            At::Local(d) => match tokio::fs::remove_dir_all(d.join(prefix)).await {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(err(e)),
                _ => Ok(()),
            },
            At::Store(p) => p
                .child(prefix)
                .remove_all()
                .await
                .map_err(|e| err(format!("{e:#}"))),
        }
    }

    /// The keys of the files directly in this folder of an object store that were last
    /// written longer than `age` ago (none for a local directory, whose scratch files the
    /// uploader sweeps itself).
    pub async fn stored_before(&self, age: Duration) -> Result<Vec<String>, FileError> {
        let At::Store(p) = &self.at else {
            return Ok(Vec::new());
        };
        let limit = chrono::Utc::now() - chrono::Duration::from_std(age).unwrap_or_default();
        let prefix = (!p.prefix.as_ref().is_empty()).then_some(&p.prefix);
        let listed = p.store.list_with_delimiter(prefix).await.map_err(err)?;
        Ok(listed
            .objects
            .into_iter()
            .filter(|m| m.last_modified < limit)
            .filter_map(|m| m.location.filename().map(str::to_string))
            .collect())
    }

    /// Whether a file can be written (and removed) here: the readiness check.
    pub async fn check(&self) -> Result<(), String> {
        match &self.at {
            At::Local(dir) => {
                let dir = dir.clone();
                tokio::task::spawn_blocking(move || {
                    use std::io::Write;
                    let fail = |what: &str, e: std::io::Error| {
                        format!("cannot {what} a file in {}: {e}", dir.display())
                    };
                    std::fs::create_dir_all(&dir).map_err(|e| fail("create", e))?;
                    let mut f = tempfile::Builder::new()
                        .prefix(".readyz-")
                        .tempfile_in(&dir)
                        .map_err(|e| fail("create", e))?;
                    f.write_all(b"ok")
                        .and_then(|_| f.as_file().sync_all())
                        .map_err(|e| fail("write", e))
                })
                .await
                .map_err(|e| e.to_string())?
            }
            At::Store(p) => {
                let key = p.key(&format!(
                    ".readyz-{}",
                    hex::encode(rand::random::<[u8; 8]>())
                ));
                let fail = |e: object_store::Error| {
                    crate::telemetry::store_error();
                    format!("cannot write to {}: {e}", p.url)
                };
                p.store
                    .put(&key, b"ok".to_vec().into())
                    .await
                    .map_err(fail)?;
                p.store.delete(&key).await.map_err(fail)
            }
        }
    }
}

/// Where `key` goes in the local directory `d`, its folder made; None when `from` is already
/// there.
async fn local_target(d: &Path, key: &str, from: &Path) -> Result<Option<PathBuf>, FileError> {
    let to = d.join(key);
    if to == from {
        return Ok(None);
    }
    if let Some(dir) = to.parent() {
        tokio::fs::create_dir_all(dir).await.map_err(io_err)?;
    }
    Ok(Some(to))
}

/// An entity tag as sent in headers: the store's own, quoted, or one made of the file's
/// modification time and size when the store gives none.
fn quoted(tag: &str, m: &object_store::ObjectMeta) -> String {
    let tag = tag.trim_start_matches("W/").trim_matches('"');
    if tag.is_empty() {
        format!(
            "\"{:x}-{:x}\"",
            m.last_modified.timestamp_nanos_opt().unwrap_or_default(),
            m.size
        )
    } else {
        format!("\"{tag}\"")
    }
}

/// How much of a local file one read takes: a 1M-row result file (70 MB) goes out in about
/// 70 reads, each one trip to a blocking thread.
const READ_CHUNK: usize = 1024 * 1024;

/// The `len` bytes of `r` (fewer if it ends first), [`READ_CHUNK`] at a time, each read into
/// a new buffer that is not zeroed first.
fn read_stream<R: tokio::io::AsyncRead + Unpin + Send + 'static>(r: R, len: u64) -> ByteStream {
    futures::stream::unfold(Some((r, len)), |state| async move {
        let (mut r, left) = state?;
        let want = left.min(READ_CHUNK as u64) as usize;
        if want == 0 {
            return None;
        }
        let mut buf = bytes::BytesMut::with_capacity(want);
        match r.read_buf(&mut buf).await {
            Ok(0) => None,
            Ok(n) => Some((Ok(buf.freeze()), Some((r, left - n as u64)))),
            Err(e) => Some((Err(e), None)),
        }
    })
    .boxed()
}

/// The URL path a stored file is served at.
pub fn url_of(key: &str) -> String {
    let mut out = String::from("/media/files");
    for seg in key.split('/') {
        out.push('/');
        for b in seg.bytes() {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                out.push(b as char);
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
    }
    out
}

/// An upload stored more bytes than [`StoreBudget`]'s cap allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the files of this upload would take more than {0} bytes (--max-upload-store-bytes)")]
pub struct OverBudget(pub u64);

/// The bytes one upload may store, counted as its files are made (the
/// `max_upload_store_bytes` setting).
#[derive(Debug, Clone)]
pub struct StoreBudget {
    cap: u64,
    used: u64,
}

impl StoreBudget {
    pub fn new(cap: u64) -> StoreBudget {
        StoreBudget { cap, used: 0 }
    }

    /// The cap.
    pub fn cap(&self) -> u64 {
        self.cap
    }

    /// The bytes still allowed.
    pub fn left(&self) -> u64 {
        self.cap - self.used
    }

    /// Counts `bytes` more, or refuses them (counting nothing) when they pass the cap.
    pub fn take(&mut self, bytes: u64) -> Result<(), OverBudget> {
        if bytes > self.left() {
            return Err(OverBudget(self.cap));
        }
        self.used += bytes;
        Ok(())
    }

    /// The error for this budget's cap.
    pub fn over(&self) -> OverBudget {
        OverBudget(self.cap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_counts_up_to_the_cap() {
        let mut b = StoreBudget::new(10);
        assert!(b.take(4).is_ok());
        assert!(b.take(6).is_ok());
        assert_eq!(b.left(), 0);
        assert_eq!(b.take(1), Err(OverBudget(10)));
        let mut b = StoreBudget::new(10);
        assert_eq!(b.take(11), Err(OverBudget(10)));
        assert_eq!(b.left(), 10);
        assert_eq!(
            OverBudget(1 << 30).to_string(),
            "the files of this upload would take more than 1073741824 bytes (--max-upload-store-bytes)"
        );
    }

    /// The bytes a local read of `range` streams, joined.
    async fn read_all(files: &Files, key: &str, range: Range<u64>) -> Vec<u8> {
        let mut stream = files.read(key, range).await.unwrap();
        let mut out = Vec::new();
        while let Some(part) = stream.next().await {
            let part = part.unwrap();
            assert!(!part.is_empty() && part.len() <= READ_CHUNK);
            out.extend_from_slice(&part);
        }
        out
    }

    #[tokio::test]
    async fn local_reads_give_the_range_across_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..READ_CHUNK * 2 + 12_345)
            .map(|i| (i % 251) as u8)
            .collect();
        let src = dir.path().join("src");
        std::fs::write(&src, &data).unwrap();
        let files = Files::local(dir.path().join("store"));
        files.put("a/big.bin", &src).await.unwrap();
        let n = data.len() as u64;
        assert_eq!(read_all(&files, "a/big.bin", 0..n).await, data);
        let (a, b) = (READ_CHUNK as u64 - 7, 2 * READ_CHUNK as u64 + 9);
        assert_eq!(
            read_all(&files, "a/big.bin", a..b).await,
            &data[a as usize..b as usize]
        );
        assert_eq!(read_all(&files, "a/big.bin", 5..5).await, b"");
        // Past the end: what there is.
        assert_eq!(
            read_all(&files, "a/big.bin", n - 3..n + 100).await,
            &data[n as usize - 3..]
        );
    }

    #[test]
    fn keys_and_urls() {
        assert!(valid_key("assets/ab12/res/img/a b.png"));
        for bad in ["", "../x", "a/../b", "/a", "a//b", "a\\b", "a/./b"] {
            assert!(!valid_key(bad), "{bad}");
        }
        assert_eq!(
            url_of("assets/ab/res/a b+é.png"),
            "/media/files/assets/ab/res/a%20b%2B%C3%A9.png"
        );
    }
}
