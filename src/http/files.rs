//! `GET /media/files/<entity>/<bundle>/...`: files stored from uploaded bundles (PDF pages,
//! `res/` folders), served to users whose role may read the entity they belong to.

use super::AppState;
use super::api::{Body as Media, E404, Replies, Reply, SIGNED, Signed, Streamed, Tag};
use super::error::ApiError;
use poem::Response;
use poem::web::Data;
use poem_openapi::OpenApi;
use poem_openapi::param::Path;
use std::sync::Arc;

/// A stored file.
pub struct FileReplies;
impl Replies for FileReplies {
    const REPLIES: &'static [super::api::Documented] = &[
        (
            200,
            "the file",
            &[("application/octet-stream", Media::Binary)],
        ),
        (
            206,
            "the bytes a `Range` header asked for",
            &[("application/octet-stream", Media::Binary)],
        ),
        (
            304,
            "not modified since the version `If-None-Match` names",
            &[],
        ),
        (416, "the `Range` lies past the end of the file", &[]),
    ];
}

pub struct FilesApi;

#[OpenApi]
impl FilesApi {
    /// A file stored from an uploaded bundle
    ///
    /// A marker's one-page PDF or a `res/` file of a ZIP bundle, for users who may read its
    /// entity. The key's slashes may be sent as they are or escaped (`%2F`).
    #[oai(
        path = "/media/files/:key",
        method = "get",
        operation_id = "getStoredFile",
        tag = "Tag::Uploader"
    )]
    async fn file(
        &self,
        /// the rest of the path: <entity>/<bundle>/...
        key: Path<String>,
        Signed(caller): Signed,
        Data(state): Data<&Arc<AppState>>,
        req: &poem::Request,
    ) -> Reply<Streamed<FileReplies>, { SIGNED | E404 }> {
        Ok(Streamed::new(
            file(state, &caller, &key, req.headers()).await?,
        ))
    }
}

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

async fn file(
    state: &AppState,
    caller: &crate::engine::Caller,
    key: &str,
    headers: &poem::http::HeaderMap,
) -> Result<Response, ApiError> {
    let missing = || ApiError::NotFound("no stored file at this path".into());
    let entity = key.split('/').next().unwrap_or_default();
    let url = crate::files::url_of(key);
    let visible = state.engine.file_visible(caller, entity, &url).await;
    if !visible.unwrap_or(false) {
        return Err(missing());
    }
    let mut resp = super::ranged::answer(&state.files, key, headers)
        .await?
        .ok_or_else(missing)?;
    let h = resp.headers_mut();
    h.insert(
        poem::http::header::CONTENT_TYPE,
        poem::http::HeaderValue::from_static(content_type(key)),
    );
    h.insert(
        "x-content-type-options",
        poem::http::HeaderValue::from_static("nosniff"),
    );
    h.insert(
        "content-security-policy",
        poem::http::HeaderValue::from_static("sandbox"),
    );
    Ok(resp)
}
