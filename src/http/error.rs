//! The HTTP error type: every failure becomes the contract's JSON error with its status, and no
//! internals ever reach the body.

use crate::auth::AuthError;
use crate::engine::CallError;
use poem::http::StatusCode;
use poem::{Response, error::ResponseError};
use serde_json::{Value as Json, json};

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{}", .0.description())]
    Call(CallError),
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    MethodNotAllowed(String),
    #[error("{0}")]
    Gone(String),
    /// The request's state does not allow it (e.g. cancelling a finished request).
    #[error("{0}")]
    AlreadyFinished(String),
    /// The request was undone already (a second undo would change nothing).
    #[error("{0}")]
    AlreadyUndone(String),
    /// The request has not finished yet (e.g. undoing one that still runs).
    #[error("{0}")]
    NotFinished(String),
    #[error("{0}")]
    TooLarge(String),
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("the service is unavailable")]
    Unavailable,
    /// Refused by policy (e.g. a cross-site request).
    #[error("{0}")]
    Forbidden(String),
    /// Too many attempts; the client may retry after the given number of seconds.
    #[error("{description}")]
    TooManyRequests {
        description: String,
        retry_after: u64,
    },
}

pub type Result<T, E = ApiError> = std::result::Result<T, E>;

impl From<CallError> for ApiError {
    fn from(e: CallError) -> Self {
        ApiError::Call(e)
    }
}

/// A storage failure is logged and shown only as an internal error.
impl From<crate::engine::StorageError> for ApiError {
    fn from(e: crate::engine::StorageError) -> Self {
        ApiError::Call(crate::engine::internal(e))
    }
}

impl From<AuthError> for ApiError {
    fn from(e: AuthError) -> Self {
        match e {
            AuthError::Unavailable => ApiError::Unavailable,
            AuthError::Throttled(secs) => ApiError::TooManyRequests {
                description: format!("too many failed sign-ins; try again in {secs} seconds"),
                retry_after: secs,
            },
            e => ApiError::Unauthorized(e.to_string()),
        }
    }
}

impl ApiError {
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::Call(e) => e.code(),
            ApiError::Unauthorized(_) => "unauthorized",
            ApiError::BadRequest(_) => "bad_request",
            ApiError::NotFound(_) => "not_found",
            ApiError::MethodNotAllowed(_) => "method_not_allowed",
            ApiError::Gone(_) => "gone",
            ApiError::AlreadyFinished(_) => "already_finished",
            ApiError::AlreadyUndone(_) => "already_undone",
            ApiError::NotFinished(_) => "not_finished",
            ApiError::TooLarge(_) => "payload_too_large",
            ApiError::UnsupportedMediaType(_) => "unsupported_media_type",
            ApiError::Unavailable => "unavailable",
            ApiError::Forbidden(_) => "forbidden",
            ApiError::TooManyRequests { .. } => "too_many_requests",
        }
    }

    pub fn body(&self) -> Json {
        match self {
            ApiError::Call(e) => e.body(),
            e => json!({"error": e.code(), "description": e.to_string()}),
        }
    }
}

impl ResponseError for ApiError {
    fn status(&self) -> StatusCode {
        match self {
            ApiError::Call(e) => {
                StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
            }
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Gone(_) => StatusCode::GONE,
            ApiError::AlreadyFinished(_)
            | ApiError::AlreadyUndone(_)
            | ApiError::NotFinished(_) => StatusCode::CONFLICT,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
        }
    }

    fn as_response(&self) -> Response {
        let mut r = super::json_response(self.status(), &self.body());
        if let ApiError::TooManyRequests { retry_after, .. } = self {
            r.headers_mut()
                .insert("retry-after", poem::http::HeaderValue::from(*retry_after));
        }
        if matches!(self, ApiError::Unauthorized(_)) {
            r.headers_mut().insert(
                "www-authenticate",
                poem::http::HeaderValue::from_static(
                    "Basic realm=\"entiserve\", charset=\"UTF-8\"",
                ),
            );
        }
        r
    }
}

/// Converts any error that escaped a handler (router misses, extractor failures, panics) to
/// the contract's JSON form, keeping the status but never showing internals of a 500.
pub fn to_json_response(err: poem::Error) -> Response {
    if err.is::<ApiError>() {
        return err.into_response();
    }
    let status = err.status();
    let (code, description) = match status {
        StatusCode::NOT_FOUND => ("not_found", "no such route".to_string()),
        StatusCode::METHOD_NOT_ALLOWED => (
            "method_not_allowed",
            "this method is not allowed here".to_string(),
        ),
        StatusCode::PAYLOAD_TOO_LARGE => (
            "payload_too_large",
            "the request body is too large".to_string(),
        ),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => ("unsupported_media_type", err.to_string()),
        s if s.is_client_error() => ("bad_request", err.to_string()),
        _ => {
            tracing::error!(error = %err, "request failed");
            (
                "internal_error",
                "the server failed to handle this request".to_string(),
            )
        }
    };
    super::json_response(status, &json!({"error": code, "description": description}))
}

/// A reply of an error status without a body of ours (a route or parameter the poem-openapi
/// service refused before any handler ran) becomes the contract's JSON error, its text kept as
/// the description.
pub async fn ensure_json(mut resp: Response) -> Response {
    let status = resp.status();
    if !(status.is_client_error() || status.is_server_error())
        || resp
            .headers()
            .contains_key(poem::http::header::CONTENT_TYPE)
    {
        return resp;
    }
    let text = resp.take_body().into_string().await.unwrap_or_default();
    let err = if text.trim().is_empty() {
        poem::Error::from_status(status)
    } else {
        poem::Error::from_string(text, status)
    };
    let mut json = to_json_response(err);
    for (k, v) in resp.headers() {
        json.headers_mut().entry(k).or_insert_with(|| v.clone());
    }
    json
}
