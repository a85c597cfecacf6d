//! The id of the HTTP request being served (`X-Request-Id`), for the work it hands on: a
//! background request stores it and its worker logs under it.

tokio::task_local! {
    static CURRENT: String;
}

/// Runs `f` as the work of the HTTP request `id`.
pub async fn serving<F: std::future::Future>(id: String, f: F) -> F::Output {
    CURRENT.scope(id, f).await
}

/// The id of the HTTP request this task serves, if it serves one.
pub fn current() -> Option<String> {
    CURRENT.try_with(Clone::clone).ok()
}
