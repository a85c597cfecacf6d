//! A finished background request's result: the uploader's result CSV (ranges and versions
//! answered), a single call's body, or a batch's items streamed page by page from the
//! database; also by its stored path under `/media`.

use super::visible;
use crate::engine::Caller;
use crate::http::AppState;
use crate::http::batch::push_item;
use crate::http::error::{ApiError, Result};
use crate::jobs::Jobs;
use poem::{Body, Response};

/// The stored result of a finished request, streamed from the database.
pub(super) async fn result_of(
    state: &AppState,
    caller: &Caller,
    rid: &str,
    headers: &poem::http::HeaderMap,
) -> Result<Response> {
    let r = visible(state, caller, rid).await?;
    if r.expired {
        return Err(ApiError::Gone(format!(
            "the result of `{rid}` was kept for its keep time and is gone"
        )));
    }
    if r.is_open() {
        return Err(ApiError::NotFound(format!(
            "background request `{rid}` has not finished"
        )));
    }
    let ctype = r
        .content_type
        .clone()
        .unwrap_or_else(|| "application/json".into());
    if r.kind.is_upload() {
        let plan = crate::uploader::run::plan_of(&r)?;
        let (_, key) = crate::uploader::result_location(&state.settings.data_dir, &r.rid);
        let mut resp = crate::http::ranged::answer(&state.jobs.files, &key, headers)
            .await?
            .ok_or_else(|| {
                ApiError::NotFound(format!(
                    "the result file of `{rid}` is missing from {}",
                    state.jobs.files.describe()
                ))
            })?;
        crate::http::uploader::csv_headers(&mut resp, &plan.result_name(), &plan);
        return Ok(resp);
    }
    if r.kind == crate::jobs::kinds::KindId::Call {
        let res = state.jobs.results(rid, 0, 1).await?;
        let body = res
            .into_iter()
            .next()
            .map(|(_, _, b)| b)
            .unwrap_or_else(|| "null".into());
        return Ok(Response::builder().content_type(ctype).body(body));
    }
    Ok(Response::builder()
        .content_type(ctype)
        .body(Body::from_bytes_stream(result_stream(
            state.jobs.clone(),
            r.rid,
        ))))
}

/// The JSON array of batch result items, page by page.
fn result_stream(
    jobs: Jobs,
    rid: String,
) -> impl futures::Stream<Item = std::io::Result<bytes::Bytes>> + Send + 'static {
    const PAGE: i64 = 5000;
    futures::stream::unfold(Some(0i64), move |next| {
        let jobs = jobs.clone();
        let rid = rid.clone();
        async move {
            let from = next?;
            let rows = match jobs.results(&rid, from, PAGE).await {
                Ok(r) => r,
                Err(e) => return Some((Err(std::io::Error::other(e.to_string())), None)),
            };
            let mut out = String::with_capacity(rows.len() * 160 + 2);
            if from == 0 {
                out.push('[');
            }
            for (seq, status, body) in &rows {
                if *seq > 0 {
                    out.push(',');
                }
                push_item(&mut out, *status, body);
            }
            let more = rows.len() as i64 == PAGE;
            if !more {
                out.push(']');
            }
            let last = rows.last().map_or(from, |r| r.0 + 1);
            Some((Ok(bytes::Bytes::from(out)), more.then_some(last)))
        }
    })
}

/// `GET /media/keep1m/bgrs.<rid>.result.<ext>`: the same result by its path.
pub(super) async fn media(
    state: &AppState,
    caller: &Caller,
    file: &str,
    headers: &poem::http::HeaderMap,
) -> Result<Response> {
    let rid = file
        .strip_prefix("bgrs.")
        .and_then(|f| f.split('.').next())
        .filter(|r| r.len() == 32 && r.chars().all(|c| c.is_ascii_hexdigit()))
        .ok_or_else(|| ApiError::NotFound(format!("no stored file `{file}`")))?;
    let r = visible(state, caller, rid).await?;
    if r.result.as_deref() != Some(&format!("media/keep1m/{file}")) && !r.is_open() {
        return Err(ApiError::NotFound(format!("no stored file `{file}`")));
    }
    result_of(state, caller, rid, headers).await
}
