//! Multipart intake: the file part is streamed to a file under the data directory (never held
//! in memory, refused past the size limit), the other parts are small text fields.

use super::UploadError;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use tokio::io::AsyncWriteExt;

/// A received upload.
pub struct Received {
    pub fields: HashMap<String, String>,
    /// The stored file part and its original name.
    pub file: Option<(PathBuf, String)>,
}

/// The directory of files being processed.
pub fn work_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("uploads")
}

/// A body stream that hands over one chunk per poll, so that the multipart parser (which
/// buffers everything a stream has ready) holds at most one chunk at a time.
struct Paced<S> {
    inner: S,
    handed: bool,
}

impl<S: futures::Stream + Unpin> futures::Stream for Paced<S> {
    type Item = S::Item;
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<S::Item>> {
        if self.handed {
            self.handed = false;
            cx.waker().wake_by_ref();
            return std::task::Poll::Pending;
        }
        let next = std::pin::Pin::new(&mut self.inner).poll_next(cx);
        if let std::task::Poll::Ready(Some(_)) = &next {
            self.handed = true;
        }
        next
    }
}

/// Reads every part of a `multipart/form-data` body; the part named `file_field` goes to a
/// new file in `dir`.
pub async fn receive(
    content_type: &str,
    body: poem::Body,
    dir: &Path,
    file_field: &str,
    limit: u64,
) -> Result<Received, UploadError> {
    let boundary = multer::parse_boundary(content_type)
        .map_err(|_| UploadError::BadRequest("the body must be multipart/form-data".into()))?;
    let stream = Paced {
        inner: Box::pin(body.into_bytes_stream()),
        handed: false,
    };
    let mut mp = multer::Multipart::new(stream, boundary);
    let bad = |_| UploadError::BadRequest("the multipart body is malformed".into());
    tokio::fs::create_dir_all(dir)
        .await
        .map_err(|e| UploadError::Io(e.to_string()))?;
    let mut fields = HashMap::new();
    let mut file = None;
    while let Some(mut field) = mp.next_field().await.map_err(bad)? {
        let name = field.name().unwrap_or("").to_string();
        if name == file_field {
            let original = field
                .file_name()
                .map(|n| n.rsplit(['/', '\\']).next().unwrap_or(n).to_string())
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| "upload.csv".to_string());
            let path = dir.join(format!(
                "{}.upload",
                hex::encode(rand::random::<[u8; 12]>())
            ));
            let written = copy_limited(&mut field, &path, limit).await;
            match written {
                Ok(_) => file = Some((path, original)),
                Err(e) => {
                    let _ = tokio::fs::remove_file(&path).await;
                    return Err(e);
                }
            }
        } else {
            let text = field.text().await.map_err(bad)?;
            if text.len() > 4096 {
                return Err(UploadError::BadRequest(format!(
                    "the field `{name}` is too long"
                )));
            }
            fields.insert(name, text);
        }
    }
    Ok(Received { fields, file })
}

async fn copy_limited(
    field: &mut multer::Field<'_>,
    path: &Path,
    limit: u64,
) -> Result<u64, UploadError> {
    let io = |e: std::io::Error| UploadError::Io(e.to_string());
    let mut out = tokio::io::BufWriter::with_capacity(
        256 * 1024,
        tokio::fs::File::create(path).await.map_err(io)?,
    );
    let mut total = 0u64;
    while let Some(chunk) = field
        .chunk()
        .await
        .map_err(|_| UploadError::BadRequest("the upload was cut off".into()))?
    {
        total += chunk.len() as u64;
        if total > limit {
            return Err(UploadError::TooLarge(format!(
                "the file is larger than the limit of {limit} bytes"
            )));
        }
        out.write_all(&chunk).await.map_err(io)?;
    }
    out.flush().await.map_err(io)?;
    Ok(total)
}
