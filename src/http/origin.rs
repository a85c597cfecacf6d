//! Cross-site requests. A browser on another site must not use a signed-in user's credentials
//! to change anything: a state-changing request whose `Origin` is not this server's own (or
//! that says `Sec-Fetch-Site: cross-site`) is refused with 403, unless its origin is listed in
//! `--allowed-origins`. Listed origins also get CORS answers (preflights and response headers).
//! Clients that send no `Origin` (curl, the command-line client, scripts) are unaffected.

use super::error::ApiError;
use poem::http::{HeaderValue, Method, StatusCode, header};
use poem::{Request, Response};

/// What to do with a request, decided before it runs.
pub enum Verdict {
    /// Run it; with `Some(origin)`, add CORS headers for that listed origin.
    Run(Option<HeaderValue>),
    /// Answer at once (a preflight, or a refusal).
    Answer(Response),
}

fn state_changing(m: &Method) -> bool {
    !matches!(
        *m,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE
    )
}

/// The `host[:port]` of an origin (`scheme://host[:port]`), lowercased.
fn authority(origin: &str) -> Option<String> {
    let rest = origin.split_once("://")?.1;
    (!rest.is_empty() && !rest.contains('/')).then(|| rest.to_ascii_lowercase())
}

/// Whether `origin` is this server as the request addressed it (its `Host`).
fn same_origin(req: &Request, origin: &str) -> bool {
    let host = super::header(req, header::HOST)
        .map(str::to_string)
        .or_else(|| req.uri().authority().map(|a| a.to_string()));
    match (authority(origin), host) {
        (Some(a), Some(h)) => a == h.to_ascii_lowercase(),
        _ => false,
    }
}

fn refuse(why: String) -> Verdict {
    Verdict::Answer(super::error::to_json_response(
        ApiError::Forbidden(why).into(),
    ))
}

/// Decides about `req` given the listed origins (lowercased, without a trailing slash).
pub fn check(req: &Request, allowed: &[String]) -> Verdict {
    let origin = super::header(req, header::ORIGIN).map(str::to_string);
    let listed = origin
        .as_deref()
        .map(|o| o.trim_end_matches('/').to_ascii_lowercase())
        .filter(|o| allowed.iter().any(|a| a == o));
    let listed_value = listed
        .as_ref()
        .and(req.headers().get(header::ORIGIN).cloned());
    if req.method() == Method::OPTIONS
        && req
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
    {
        return match listed_value {
            Some(o) => Verdict::Answer(preflight(req, o)),
            None => refuse(format!(
                "origin `{}` is not allowed (see --allowed-origins)",
                origin.unwrap_or_default()
            )),
        };
    }
    if state_changing(req.method()) && listed.is_none() {
        if let Some(o) = &origin
            && !same_origin(req, o)
        {
            return refuse(format!(
                "a state-changing request from another site (origin `{o}`) is refused; list the origin with --allowed-origins to allow it"
            ));
        }
        let cross = super::header(req, header::HeaderName::from_static("sec-fetch-site"))
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("cross-site"));
        if cross {
            return refuse(
                "a state-changing request from another site (Sec-Fetch-Site: cross-site) is refused"
                    .into(),
            );
        }
    }
    Verdict::Run(listed_value)
}

fn preflight(req: &Request, origin: HeaderValue) -> Response {
    let mut r = Response::builder()
        .status(StatusCode::NO_CONTENT)
        .header(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            "GET, POST, PUT, DELETE",
        )
        .header(header::ACCESS_CONTROL_MAX_AGE, "600")
        .finish();
    if let Some(h) = req.headers().get(header::ACCESS_CONTROL_REQUEST_HEADERS) {
        r.headers_mut()
            .insert(header::ACCESS_CONTROL_ALLOW_HEADERS, h.clone());
    }
    decorate(&mut r, origin);
    r
}

/// Adds the CORS headers of a listed origin to a response.
pub fn decorate(resp: &mut Response, origin: HeaderValue) {
    let h = resp.headers_mut();
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    h.insert(
        header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
        HeaderValue::from_static("true"),
    );
    h.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static("X-Total-Count, Link, Retry-After, Content-Disposition"),
    );
    h.append(header::VARY, HeaderValue::from_static("Origin"));
}

#[cfg(test)]
mod tests {
    use super::authority;

    #[test]
    fn authorities_of_origins() {
        assert_eq!(
            authority("http://127.0.0.1:8080").as_deref(),
            Some("127.0.0.1:8080")
        );
        assert_eq!(
            authority("HTTPS://Example.com").as_deref(),
            Some("example.com")
        );
        assert_eq!(authority("null"), None);
        assert_eq!(authority("http://a/b"), None);
    }
}
