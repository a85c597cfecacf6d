//! Multipart intake: the file part is streamed to a file under the data directory (never held
//! in memory, refused past the size limit), the other parts are small text fields.

use super::UploadError;
use super::validate::{Check, Layout};
use encoding_rs::Encoding;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use tokio::io::AsyncWriteExt;

/// A received upload.
pub struct Received {
    pub fields: HashMap<String, String>,
    /// The stored file part and its original name.
    pub file: Option<(PathBuf, String)>,
    /// The whole-file check of the file part, run as it arrived.
    pub early: Option<Early>,
}

/// The whole-file check of a file part run as the part arrives, on a thread of its own, in
/// the encoding known when the part began (from the query string or an earlier field). Its
/// working copy is removed unless it is finished well.
pub struct Early {
    /// The encoding the file was read in.
    pub encoding: &'static Encoding,
    /// Where the working copy goes.
    pub utf8: PathBuf,
    tx: Option<tokio::sync::mpsc::Sender<bytes::Bytes>>,
    check: tokio::task::JoinHandle<Check>,
}

impl Early {
    fn start(encoding: &'static Encoding, dir: &Path, max_record: usize) -> Early {
        let utf8 = working_copy_path(dir);
        let mut check = Check::new(encoding, &utf8, max_record);
        // A few pieces in hand keep the check busy without holding much of the file.
        let (tx, mut rx) = tokio::sync::mpsc::channel::<bytes::Bytes>(4);
        let check = tokio::task::spawn_blocking(move || {
            while let Some(bytes) = rx.blocking_recv() {
                check.feed(&bytes);
            }
            check
        });
        Early {
            encoding,
            utf8,
            tx: Some(tx),
            check,
        }
    }

    async fn feed(&mut self, bytes: bytes::Bytes) {
        if let Some(tx) = &self.tx
            && tx.send(bytes).await.is_err()
        {
            self.tx = None;
        }
    }

    /// The layout of the file, now whole at `src`; its working copy is then at `utf8`.
    pub async fn finish(mut self, src: &Path) -> Result<Layout, UploadError> {
        let stopped = || UploadError::Io("the check of the file stopped".into());
        self.tx = None;
        let check = self.check.await.map_err(|_| stopped())?;
        let src = src.to_path_buf();
        tokio::task::spawn_blocking(move || check.finish(&src))
            .await
            .map_err(|_| stopped())?
    }
}

/// A new file name for an upload's UTF-8 working copy, in `dir`.
pub fn working_copy_path(dir: &Path) -> PathBuf {
    dir.join(format!(
        "{}.utf8.csv",
        hex::encode(rand::random::<[u8; 12]>())
    ))
}

/// Removes entries of `dir` (files and folders) that are not in `owned` and were last
/// modified more than `grace` ago. Returns how many went.
pub fn remove_orphans(
    dir: &Path,
    owned: &std::collections::HashSet<PathBuf>,
    grace: std::time::Duration,
) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let now = std::time::SystemTime::now();
    let mut removed = 0;
    for entry in entries.flatten() {
        let path = entry.path();
        if owned.contains(&path) {
            continue;
        }
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        let age = meta
            .modified()
            .ok()
            .and_then(|m| now.duration_since(m).ok())
            .unwrap_or_default();
        if age < grace {
            continue;
        }
        let gone = if meta.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        if gone.is_ok() {
            removed += 1;
        }
    }
    removed
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

/// A multipart parser over `body` that holds at most one chunk of it at a time, refuses the
/// body past `whole` bytes and each field past what `fields` allows.
pub fn multipart(
    content_type: &str,
    body: poem::Body,
    whole: u64,
    fields: multer::SizeLimit,
) -> Result<multer::Multipart<'static>, UploadError> {
    let boundary = multer::parse_boundary(content_type)
        .map_err(|_| UploadError::BadRequest("the body must be multipart/form-data".into()))?;
    let stream = Paced {
        inner: Box::pin(body.into_bytes_stream()),
        handed: false,
    };
    let constraints = multer::Constraints::new().size_limit(fields.whole_stream(whole));
    Ok(multer::Multipart::with_constraints(
        stream,
        boundary,
        constraints,
    ))
}

/// Limits of an upload's form.
#[derive(Debug, Clone, Copy)]
pub struct FormLimits {
    /// The file part.
    pub file: u64,
    /// Each other (text) field.
    pub field: u64,
    /// A data record of the file, once decoded: one call's body ([`Check::new`]).
    pub record: usize,
}

/// What went wrong in a multipart body.
fn form_error(e: multer::Error, limits: &FormLimits, file_field: &str) -> UploadError {
    match e {
        multer::Error::FieldSizeExceeded { field_name, .. } => {
            let name = field_name.unwrap_or_default();
            if name == file_field {
                UploadError::TooLarge(format!(
                    "the file is larger than the limit of {} bytes",
                    limits.file
                ))
            } else {
                UploadError::TooLarge(format!(
                    "the field `{name}` is larger than the limit of {} bytes",
                    limits.field
                ))
            }
        }
        multer::Error::StreamSizeExceeded { .. } => {
            UploadError::TooLarge("the upload is larger than its limits allow".into())
        }
        multer::Error::StreamReadFailed(_) | multer::Error::IncompleteFieldData { .. } => {
            UploadError::BadRequest("the upload was cut off".into())
        }
        _ => UploadError::BadRequest("the multipart body is malformed".into()),
    }
}

/// Removes a received file unless the upload is handed on.
struct Scratch(Option<PathBuf>);

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Reads every part of a `multipart/form-data` body; the part named `file_field` goes to a
/// new file in `dir`, checked as it arrives in the encoding `early` names from the fields
/// before it (none: checked later). On any error (a malformed body, a part over its limit, a
/// second file part) nothing is left in `dir`.
pub async fn receive(
    content_type: &str,
    body: poem::Body,
    dir: &Path,
    file_field: &str,
    limits: FormLimits,
    early: impl Fn(&HashMap<String, String>) -> Option<&'static Encoding>,
) -> Result<Received, UploadError> {
    // The whole body: the file, plus room for the other fields and the multipart framing.
    let whole = limits
        .file
        .saturating_add(limits.field.saturating_mul(16))
        .saturating_add(64 * 1024);
    let per_field = multer::SizeLimit::new()
        .per_field(limits.field)
        .for_field(file_field.to_string(), limits.file);
    let mut mp = multipart(content_type, body, whole, per_field)?;
    tokio::fs::create_dir_all(dir)
        .await
        .map_err(UploadError::from)?;
    let mut fields = HashMap::new();
    let mut file = Scratch(None);
    let mut checked = None;
    let mut original = String::new();
    while let Some(mut field) = mp
        .next_field()
        .await
        .map_err(|e| form_error(e, &limits, file_field))?
    {
        let name = field.name().unwrap_or("").to_string();
        if name == file_field {
            if file.0.is_some() {
                return Err(UploadError::BadRequest(format!(
                    "the form holds more than one `{file_field}` part; send one file per upload"
                )));
            }
            original = field
                .file_name()
                .map(|n| n.rsplit(['/', '\\']).next().unwrap_or(n).to_string())
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| "upload.csv".to_string());
            let path = dir.join(format!(
                "{}.upload",
                hex::encode(rand::random::<[u8; 12]>())
            ));
            file.0 = Some(path.clone());
            let mut check = early(&fields).map(|e| Early::start(e, dir, limits.record));
            let n = copy_limited(&mut field, &path, &limits, file_field, &mut check).await?;
            checked = check;
            crate::telemetry::upload_bytes(n);
        } else {
            if fields.contains_key(&name) {
                return Err(UploadError::BadRequest(format!(
                    "the form holds the field `{name}` more than once"
                )));
            }
            let text = field
                .text()
                .await
                .map_err(|e| form_error(e, &limits, file_field))?;
            fields.insert(name, text);
        }
    }
    let file = file.0.take().map(|p| (p, original));
    Ok(Received {
        fields,
        file,
        early: checked,
    })
}

/// Writes the file part to `path`, and hands each piece to `check` too, until the part is
/// seen to be a ZIP bundle (whose CSV is checked once taken out).
async fn copy_limited(
    field: &mut multer::Field<'_>,
    path: &Path,
    limits: &FormLimits,
    file_field: &str,
    check: &mut Option<Early>,
) -> Result<u64, UploadError> {
    let io = UploadError::from;
    let mut out = tokio::io::BufWriter::with_capacity(
        256 * 1024,
        tokio::fs::File::create(path).await.map_err(io)?,
    );
    let mut total = 0u64;
    let mut failed = None;
    while let Some(chunk) = field
        .chunk()
        .await
        .map_err(|e| form_error(e, limits, file_field))?
    {
        if total == 0 && super::bundle::is_zip_start(&chunk) {
            *check = None;
        }
        total += chunk.len() as u64;
        if failed.is_none()
            && let Err(e) = out.write_all(&chunk).await
        {
            failed = Some(io(e));
        }
        if failed.is_none()
            && let Some(c) = check.as_mut()
        {
            c.feed(chunk).await;
        }
        // After a failed write (a full disk) the rest of the file is read and dropped, so
        // that the client, still sending, gets the answer instead of a broken connection.
    }
    if let Some(e) = failed {
        return Err(e);
    }
    out.flush().await.map_err(io)?;
    Ok(total)
}
