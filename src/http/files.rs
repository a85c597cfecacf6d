//! `GET /media/files/<entity>/<bundle>/...`: files stored from uploaded bundles (PDF pages,
//! `res/` folders), served to users whose role may read the entity they belong to.

use super::error::{ApiError, Result};
use super::{AppState, Authed};
use poem::web::{Data, Path};
use poem::{Body, Response, handler};
use std::sync::Arc;

/// A content type from a file name's extension.
fn content_type(key: &str) -> &'static str {
    let ext = key.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    match ext.as_deref() {
        Some("pdf") => "application/pdf",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("webp") => "image/webp",
        Some("svg") => "image/svg+xml",
        Some("mp4") => "video/mp4",
        Some("webm") => "video/webm",
        Some("mp3") => "audio/mpeg",
        Some("txt") => "text/plain; charset=utf-8",
        Some("json") => "application/json",
        Some("csv") => "text/csv",
        _ => "application/octet-stream",
    }
}

#[handler]
pub async fn file(
    Path(key): Path<String>,
    Authed(caller): Authed,
    Data(state): Data<&Arc<AppState>>,
) -> Result<Response> {
    let missing = || ApiError::NotFound("no stored file at this path".into());
    let entity = key.split('/').next().unwrap_or_default();
    let catalog = state.engine.catalog.load();
    let e = catalog.get(entity).ok_or_else(missing)?;
    if !e.access.read.admits(caller.role) {
        return Err(missing());
    }
    let (f, len) = state
        .files
        .open(&key)
        .await
        .map_err(|e| ApiError::from(crate::uploader::UploadError::Io(e.to_string())))?
        .ok_or_else(missing)?;
    Ok(Response::builder()
        .content_type(content_type(&key))
        .header("content-length", len)
        .header("x-content-type-options", "nosniff")
        .header("content-security-policy", "sandbox")
        .body(Body::from_async_read(f)))
}
