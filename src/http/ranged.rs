//! Stored files as HTTP answers: `Content-Length`, a strong `ETag`, `Accept-Ranges: bytes`;
//! `If-None-Match` answers 304, and one `Range: bytes=...` (honoured unless an `If-Range`
//! names another version) answers 206 with `Content-Range`, or 416 when it lies past the end.
//! A video can be seeked, and a client can resume a download, whichever server answers.

use super::error::ApiError;
use crate::files::{FileError, Files, Meta};
use poem::http::{HeaderMap, StatusCode, header};
use poem::{Body, Response};

/// A byte range as `Range` asks for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wanted {
    /// `a-b` or `a-`.
    From(u64, Option<u64>),
    /// `-n`: the last n bytes.
    Last(u64),
}

/// The one range of a `Range` header; None for anything else (several ranges, other units,
/// bad syntax), which is answered with the whole file as RFC 9110 allows.
fn parse_range(value: &str) -> Option<Wanted> {
    let spec = value.trim().strip_prefix("bytes=")?.trim();
    if spec.contains(',') {
        return None;
    }
    let (a, b) = spec.split_once('-')?;
    let (a, b) = (a.trim(), b.trim());
    let num = |s: &str| {
        (!s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()))
            .then(|| s.parse::<u64>().ok())
            .flatten()
    };
    match (a.is_empty(), b.is_empty()) {
        (true, false) => Some(Wanted::Last(num(b)?)),
        (false, true) => Some(Wanted::From(num(a)?, None)),
        (false, false) => {
            let (a, b) = (num(a)?, num(b)?);
            (a <= b).then_some(Wanted::From(a, Some(b)))
        }
        (true, true) => None,
    }
}

/// The bytes `wanted` selects of a file of `size` bytes; None when none of them exist.
fn resolve(wanted: Wanted, size: u64) -> Option<std::ops::Range<u64>> {
    match wanted {
        Wanted::From(a, _) if a >= size => None,
        Wanted::From(a, b) => Some(a..b.map_or(size, |b| (b + 1).min(size))),
        Wanted::Last(0) => None,
        Wanted::Last(n) => Some(size.saturating_sub(n)..size),
    }
}

/// Whether an `If-None-Match` value names `etag` (or is `*`).
fn matches(list: &str, etag: &str) -> bool {
    let bare = |t: &str| t.trim().trim_start_matches("W/").to_string();
    list.split(',')
        .any(|t| t.trim() == "*" || bare(t) == bare(etag))
}

fn io(e: FileError) -> ApiError {
    ApiError::from(crate::uploader::UploadError::Io(e.to_string()))
}

/// The answer for the file `key` of `files` to a request with `headers`; None when there is
/// no such file.
pub async fn answer(
    files: &Files,
    key: &str,
    headers: &HeaderMap,
) -> Result<Option<Response>, ApiError> {
    let Some(meta) = files.head(key).await.map_err(io)? else {
        return Ok(None);
    };
    let header = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    let base = |status: StatusCode, meta: &Meta| {
        Response::builder()
            .status(status)
            .header(header::ETAG, meta.etag.as_str())
            .header(header::ACCEPT_RANGES, "bytes")
    };
    if header(header::IF_NONE_MATCH).is_some_and(|v| matches(v, &meta.etag)) {
        return Ok(Some(base(StatusCode::NOT_MODIFIED, &meta).finish()));
    }
    let same_version = header(header::IF_RANGE).is_none_or(|v| v.trim() == meta.etag);
    let wanted = header(header::RANGE)
        .filter(|_| same_version)
        .and_then(parse_range);
    let Some(wanted) = wanted else {
        let body = files.read(key, 0..meta.size).await.map_err(io)?;
        return Ok(Some(
            base(StatusCode::OK, &meta)
                .header(header::CONTENT_LENGTH, meta.size)
                .body(Body::from_bytes_stream(body)),
        ));
    };
    let Some(range) = resolve(wanted, meta.size) else {
        return Ok(Some(
            base(StatusCode::RANGE_NOT_SATISFIABLE, &meta)
                .header(header::CONTENT_RANGE, format!("bytes */{}", meta.size))
                .finish(),
        ));
    };
    let content_range = format!("bytes {}-{}/{}", range.start, range.end - 1, meta.size);
    let len = range.end - range.start;
    let body = files.read(key, range).await.map_err(io)?;
    Ok(Some(
        base(StatusCode::PARTIAL_CONTENT, &meta)
            .header(header::CONTENT_RANGE, content_range)
            .header(header::CONTENT_LENGTH, len)
            .body(Body::from_bytes_stream(body)),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert_eq!(parse_range("bytes=0-9"), Some(Wanted::From(0, Some(9))));
        assert_eq!(parse_range("bytes=5-"), Some(Wanted::From(5, None)));
        assert_eq!(parse_range("bytes=-3"), Some(Wanted::Last(3)));
        for ignored in [
            "bytes=0-1,4-5",
            "items=0-1",
            "bytes=9-2",
            "bytes=-",
            "bytes=a-b",
            "",
        ] {
            assert_eq!(parse_range(ignored), None, "{ignored}");
        }
        assert_eq!(resolve(Wanted::From(0, Some(9)), 5), Some(0..5));
        assert_eq!(resolve(Wanted::From(2, Some(3)), 5), Some(2..4));
        assert_eq!(resolve(Wanted::From(5, None), 5), None);
        assert_eq!(resolve(Wanted::Last(3), 5), Some(2..5));
        assert_eq!(resolve(Wanted::Last(9), 5), Some(0..5));
        assert_eq!(resolve(Wanted::Last(0), 5), None);
        assert!(matches("\"a\", \"b\"", "\"b\""));
        assert!(matches("W/\"b\"", "\"b\""));
        assert!(matches("*", "\"b\""));
        assert!(!matches("\"a\"", "\"b\""));
    }
}
