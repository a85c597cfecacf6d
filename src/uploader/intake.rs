//! Multipart intake: the file part is streamed to a file under the data directory (never held
//! in memory, refused past the size limit), the other parts are small text fields.

use super::UploadError;
use poem::web::Multipart;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use tokio::io::AsyncReadExt as _;
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

/// Reads every part; the part named `file_field` goes to a new file in `dir`.
pub async fn receive(
    mut mp: Multipart,
    dir: &Path,
    file_field: &str,
    limit: u64,
) -> Result<Received, UploadError> {
    let bad = |_| UploadError::BadRequest("the multipart body is malformed".into());
    tokio::fs::create_dir_all(dir)
        .await
        .map_err(|e| UploadError::Io(e.to_string()))?;
    let mut fields = HashMap::new();
    let mut file = None;
    while let Some(field) = mp.next_field().await.map_err(bad)? {
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
            let written = copy_limited(field.into_async_read(), &path, limit).await;
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
    src: impl tokio::io::AsyncRead + Send,
    path: &Path,
    limit: u64,
) -> Result<u64, UploadError> {
    let io = |e: std::io::Error| UploadError::Io(e.to_string());
    let mut out = tokio::io::BufWriter::new(tokio::fs::File::create(path).await.map_err(io)?);
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0u64;
    let mut src = std::pin::pin!(src);
    loop {
        let n = src
            .read(&mut buf)
            .await
            .map_err(|_| UploadError::BadRequest("the upload was cut off".into()))?;
        if n == 0 {
            break;
        }
        total += n as u64;
        if total > limit {
            return Err(UploadError::TooLarge(format!(
                "the file is larger than the limit of {limit} bytes"
            )));
        }
        out.write_all(&buf[..n]).await.map_err(io)?;
    }
    out.flush().await.map_err(io)?;
    Ok(total)
}
