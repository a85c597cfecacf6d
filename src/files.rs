//! The file storage: where bundle files (PDF pages, `res/` folders) are kept and served from.
//! A small trait, so an object store can take the local directory's place; keys are
//! `/`-separated relative paths checked by [`valid_key`].

use std::path::{Path, PathBuf};

/// A failure of the file storage.
#[derive(Debug, thiserror::Error)]
#[error("file storage: {0}")]
pub struct FileError(pub String);

fn err(e: impl std::fmt::Display) -> FileError {
    crate::telemetry::store_error();
    FileError(e.to_string())
}

/// Stored files by key.
#[async_trait::async_trait]
pub trait FileStore: Send + Sync {
    /// Stores the local file `from` under `key`; the file may be moved.
    async fn put(&self, key: &str, from: &Path) -> Result<(), FileError>;
    /// The file under `key`, opened for reading, with its length; None when absent.
    async fn open(&self, key: &str) -> Result<Option<(tokio::fs::File, u64)>, FileError>;
    /// Removes every file whose key starts with `prefix/`.
    async fn remove_prefix(&self, prefix: &str) -> Result<(), FileError>;
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

/// Files in a local directory (the default: `<data dir>/media/files`).
pub struct LocalDir {
    root: PathBuf,
}

impl LocalDir {
    pub fn new(root: impl Into<PathBuf>) -> LocalDir {
        LocalDir { root: root.into() }
    }

    fn path(&self, key: &str) -> Result<PathBuf, FileError> {
        if !valid_key(key) {
            return Err(FileError(format!("invalid key `{key}`")));
        }
        Ok(self.root.join(key))
    }
}

#[async_trait::async_trait]
impl FileStore for LocalDir {
    async fn put(&self, key: &str, from: &Path) -> Result<(), FileError> {
        let to = self.path(key)?;
        if let Some(dir) = to.parent() {
            tokio::fs::create_dir_all(dir).await.map_err(err)?;
        }
        if tokio::fs::rename(from, &to).await.is_err() {
            tokio::fs::copy(from, &to).await.map_err(err)?;
        }
        Ok(())
    }

    async fn open(&self, key: &str) -> Result<Option<(tokio::fs::File, u64)>, FileError> {
        let Ok(path) = self.path(key) else {
            return Ok(None);
        };
        match tokio::fs::File::open(&path).await {
            Ok(f) => {
                let meta = f.metadata().await.map_err(err)?;
                Ok(meta.is_file().then_some((f, meta.len())))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(err(e)),
        }
    }

    async fn remove_prefix(&self, prefix: &str) -> Result<(), FileError> {
        let dir = self.path(prefix)?;
        match tokio::fs::remove_dir_all(&dir).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(err(e)),
            _ => Ok(()),
        }
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
