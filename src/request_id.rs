//! The id of the HTTP request being served (`X-Request-Id`), for the work it hands on: a
//! background request stores it and its worker logs under it.

use poem::http::HeaderValue;

tokio::task_local! {
    static CURRENT: HeaderValue;
}

/// Runs `f` as the work of the HTTP request `id` (as its `X-Request-Id` header answers it).
pub fn serving<F: std::future::Future>(id: HeaderValue, f: F) -> impl Future<Output = F::Output> {
    CURRENT.scope(id, f)
}

/// The id of the HTTP request this task serves, if it serves one.
pub fn current() -> Option<String> {
    CURRENT
        .try_with(|id| id.to_str().ok().map(str::to_string))
        .ok()
        .flatten()
}
