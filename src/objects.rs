//! Object stores named by URL, through the `object_store` crate: `s3://bucket/prefix` (with the
//! standard `AWS_*` variables, `AWS_ENDPOINT_URL` and `AWS_ALLOW_HTTP` included, for
//! S3-compatible servers), `gs://bucket/prefix` (`GOOGLE_*`), `az://container/prefix`
//! (`AZURE_*`) and `file:///path`. Files go up as streamed multipart uploads and come down as
//! streams, so their size never has to fit in memory.

use anyhow::{Context, bail};
use futures::StreamExt;
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt, ObjectStoreScheme};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A place in an object store: the store and the prefix under which its objects are named.
#[derive(Clone)]
pub struct Place {
    /// The URL it was opened from, without a trailing `/`.
    pub url: String,
    pub store: Arc<dyn ObjectStore>,
    pub prefix: Key,
}

impl std::fmt::Debug for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.url)
    }
}

/// Whether `s` names an object store (rather than a plain directory).
pub fn is_url(s: &str) -> bool {
    [
        "s3://", "s3a://", "gs://", "az://", "abfs://", "abfss://", "azure://", "file://",
    ]
    .iter()
    .any(|p| s.starts_with(p))
}

/// Opens the store a URL names; the credentials come from the environment.
pub fn open(url: &str) -> anyhow::Result<Place> {
    let trimmed = url.trim_end_matches('/');
    let parsed = url::Url::parse(trimmed).with_context(|| format!("`{url}` is not a URL"))?;
    let (scheme, prefix) = ObjectStoreScheme::parse(&parsed)
        .with_context(|| format!("`{url}` names no object store this server knows"))?;
    let store: Arc<dyn ObjectStore> = match scheme {
        ObjectStoreScheme::AmazonS3 => Arc::new(
            object_store::aws::AmazonS3Builder::from_env()
                .with_url(trimmed)
                .build()?,
        ),
        ObjectStoreScheme::GoogleCloudStorage => Arc::new(
            object_store::gcp::GoogleCloudStorageBuilder::from_env()
                .with_url(trimmed)
                .build()?,
        ),
        ObjectStoreScheme::MicrosoftAzure => Arc::new(
            object_store::azure::MicrosoftAzureBuilder::from_env()
                .with_url(trimmed)
                .build()?,
        ),
        ObjectStoreScheme::Local => {
            let dir = parsed
                .to_file_path()
                .map_err(|_| anyhow::anyhow!("`{url}` is not a file path"))?;
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            return Ok(Place {
                url: trimmed.to_string(),
                store: Arc::new(object_store::local::LocalFileSystem::new_with_prefix(dir)?),
                prefix: Key::default(),
            });
        }
        other => bail!("`{url}`: {other:?} stores are not supported"),
    };
    Ok(Place {
        url: trimmed.to_string(),
        store,
        prefix,
    })
}

impl Place {
    /// The key of `rel` (a `/`-separated relative path) under this place.
    pub fn key(&self, rel: &str) -> Key {
        self.prefix
            .parts()
            .chain(Key::from(rel).parts())
            .collect::<Key>()
    }

    /// The place `name` below this one.
    pub fn child(&self, name: &str) -> Place {
        Place {
            url: format!("{}/{name}", self.url),
            store: self.store.clone(),
            prefix: self.key(name),
        }
    }

    /// Streams the local file `from` to `rel`, as a multipart upload when it is large.
    pub async fn upload(&self, from: &Path, rel: &str) -> anyhow::Result<()> {
        let mut src = tokio::fs::File::open(from)
            .await
            .with_context(|| format!("cannot open {}", from.display()))?;
        // Parts of 5 MiB (S3's smallest), two in flight: the memory an upload holds stays near
        // 15 MiB however large the file (the crate's default, 10 MiB parts eight at a time,
        // held some 90 MiB).
        let mut out = object_store::buffered::BufWriter::with_capacity(
            self.store.clone(),
            self.key(rel),
            5 << 20,
        )
        .with_max_concurrency(2);
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = src.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            if let Err(e) = out.write_all(&buf[..n]).await {
                let _ = out.abort().await;
                return Err(e).with_context(|| format!("cannot store {rel} in {}", self.url));
            }
        }
        out.shutdown()
            .await
            .with_context(|| format!("cannot store {rel} in {}", self.url))?;
        Ok(())
    }

    /// Streams `rel` into the local file `to` (creating its folder); returns its size and
    /// SHA-256.
    pub async fn download(&self, rel: &str, to: &Path) -> anyhow::Result<(u64, String)> {
        self.download_key(&self.key(rel), to).await
    }

    /// [`Place::download`] of the object named `key` (as listed).
    pub async fn download_key(&self, key: &Key, to: &Path) -> anyhow::Result<(u64, String)> {
        let rel = key.as_ref();
        if let Some(d) = to.parent() {
            tokio::fs::create_dir_all(d).await?;
        }
        let got = self
            .store
            .get(key)
            .await
            .with_context(|| format!("{rel}: missing from {}", self.url))?;
        let mut stream = got.into_stream();
        let mut dst = tokio::fs::File::create(to).await?;
        let mut h = Sha256::new();
        let mut size = 0u64;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.with_context(|| format!("cannot read {rel} from {}", self.url))?;
            h.update(&chunk);
            size += chunk.len() as u64;
            dst.write_all(&chunk).await?;
        }
        dst.sync_all().await?;
        Ok((size, hex::encode(h.finalize())))
    }

    /// The whole object `rel`, or `None` when there is none.
    pub async fn read(&self, rel: &str) -> anyhow::Result<Option<bytes::Bytes>> {
        match self.store.get(&self.key(rel)).await {
            Ok(got) => Ok(Some(got.bytes().await?)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e).with_context(|| format!("cannot read {rel} from {}", self.url)),
        }
    }

    /// Stores `bytes` as `rel` in one request.
    pub async fn write(&self, rel: &str, bytes: Vec<u8>) -> anyhow::Result<()> {
        self.store
            .put(&self.key(rel), bytes.into())
            .await
            .with_context(|| format!("cannot store {rel} in {}", self.url))?;
        Ok(())
    }

    /// Every object under this place: its path relative to the place (as it was named when
    /// stored) and its key.
    pub async fn list_all(&self) -> anyhow::Result<Vec<(String, Key)>> {
        let depth = self.prefix.parts().count();
        let mut listed = self.store.list(Some(&self.prefix));
        let mut out = Vec::new();
        while let Some(meta) = listed.next().await {
            let meta = meta.with_context(|| format!("cannot list {}", self.url))?;
            let rel = meta
                .location
                .parts()
                .skip(depth)
                .map(|p| percent_decoded(p.as_ref()))
                .collect::<Vec<_>>()
                .join("/");
            out.push((rel, meta.location));
        }
        out.sort();
        Ok(out)
    }

    /// The names of the folders directly under this place.
    pub async fn folders(&self) -> anyhow::Result<Vec<String>> {
        let prefix = (!self.prefix.as_ref().is_empty()).then_some(&self.prefix);
        let listed = self
            .store
            .list_with_delimiter(prefix)
            .await
            .with_context(|| format!("cannot list {}", self.url))?;
        Ok(listed
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename().map(str::to_string))
            .collect())
    }

    /// Removes every object under this place.
    pub async fn remove_all(&self) -> anyhow::Result<()> {
        let keys = self
            .store
            .list(Some(&self.prefix))
            .map(|m| m.map(|m| m.location))
            .boxed();
        let mut gone = self.store.delete_stream(keys);
        while let Some(r) = gone.next().await {
            match r {
                Ok(_) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(e).with_context(|| format!("cannot remove {}", self.url)),
            }
        }
        Ok(())
    }
}

/// A key segment as it was given: object_store escapes some characters as `%XX`.
fn percent_decoded(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    #[test]
    fn escaped_segments_read_back() {
        let key = object_store::path::Path::from("res/a%b [1].png");
        let parts: Vec<String> = key
            .parts()
            .map(|p| super::percent_decoded(p.as_ref()))
            .collect();
        assert_eq!(parts, ["res", "a%b [1].png"]);
        assert_eq!(super::percent_decoded("50%"), "50%");
    }
}
