//! HTTP: poem routes per area, the shared state, the authenticated caller extractor, and the
//! mapping of every error to the contract's JSON. Every route exists unprefixed and under
//! `/v2.5`.

mod auth;
pub mod batch;
mod bgrs;
pub mod body;
pub mod conn;
mod crud;
mod docs;
pub mod error;
mod files;
pub mod origin;
mod pages;
pub mod uploader;

use crate::auth::Auth;
use crate::engine::{Caller, Engine};
use crate::settings::Settings;
use error::ApiError;
use poem::http::StatusCode;
use poem::middleware::CatchPanic;
use poem::{
    Endpoint, EndpointExt, FromRequest, IntoEndpoint, Request, RequestBody, Response, Route, get,
    handler, post,
};
use serde_json::Value as Json;
use std::sync::Arc;

/// What every handler can reach.
pub struct AppState {
    pub engine: Engine,
    pub auth: Arc<Auth>,
    pub settings: Arc<Settings>,
    pub jobs: crate::jobs::Jobs,
    /// The plugins uploads run with (the engine runs their call hooks itself).
    pub plugins: Arc<crate::plugins::Registry>,
    /// Stored bundle files.
    pub files: Arc<dyn crate::files::FileStore>,
    /// The open connections (for their timeouts).
    pub conns: Arc<conn::Connections>,
}

/// The signed-in caller of a request (HTTP Basic, bearer token or `_token=`).
pub struct Authed(pub Caller);

impl<'a> FromRequest<'a> for Authed {
    async fn from_request(req: &'a Request, _body: &mut RequestBody) -> poem::Result<Self> {
        let state = req
            .data::<Arc<AppState>>()
            .expect("the state is attached to every route");
        let auth = &state.auth;
        let caller = match presented(req)? {
            Presented::Basic(encoded) => auth.basic_header(encoded, client_ip(req)).await,
            Presented::Token(t) => auth.token(&t).await,
            Presented::Nothing => Err(crate::auth::AuthError::Missing),
        };
        Ok(Authed(caller.map_err(ApiError::from)?))
    }
}

/// The address of the client (the TCP peer).
pub fn client_ip(req: &Request) -> Option<std::net::IpAddr> {
    req.remote_addr().as_socket_addr().map(|a| a.ip())
}

/// The credential a request presents.
enum Presented<'a> {
    /// `Authorization: Basic <encoded>`.
    Basic(&'a str),
    /// `Authorization: Bearer <token>` or `_token=<token>`.
    Token(String),
    /// None, or an `Authorization` scheme this server does not take.
    Nothing,
}

fn presented(req: &Request) -> Result<Presented<'_>, ApiError> {
    if let Some(h) = req.header("authorization") {
        let (scheme, rest) = h.split_once(' ').unwrap_or((h, ""));
        return Ok(match scheme.to_ascii_lowercase().as_str() {
            "basic" => Presented::Basic(rest),
            "bearer" => Presented::Token(rest.trim().to_string()),
            _ => Presented::Nothing,
        });
    }
    Ok(
        match body::query_param(&body::query_pairs(req)?, "_token") {
            Some(t) => Presented::Token(t),
            None => Presented::Nothing,
        },
    )
}

/// The bearer token a request presents (`Authorization: Bearer` or `_token=`).
pub fn bearer_token(req: &Request) -> Result<Option<String>, ApiError> {
    Ok(match presented(req)? {
        Presented::Token(t) => Some(t),
        _ => None,
    })
}

/// A JSON response.
pub fn json_response(status: StatusCode, body: &Json) -> Response {
    Response::builder()
        .status(status)
        .content_type("application/json")
        .body(serde_json::to_vec(body).unwrap_or_default())
}

#[handler]
fn healthz() -> Response {
    json_response(StatusCode::OK, &serde_json::json!({"status": "ok"}))
}

/// Every route, under one prefix (`""` or `"/v2.5"`).
fn routes(mut r: Route, p: &str) -> Route {
    r = r
        .at(format!("{p}/openapi.json"), get(docs::openapi))
        .at(format!("{p}/docs"), get(docs::page))
        .at(
            format!("{p}/auth/token"),
            post(auth::token).delete(auth::sign_out),
        )
        .at(format!("{p}/users/me"), get(auth::me))
        .at(format!("{p}/bgrs"), get(bgrs::list))
        .at(
            format!("{p}/bgrs/:rid"),
            get(bgrs::record).delete(bgrs::cancel),
        )
        .at(format!("{p}/bgrs/:rid/details"), get(bgrs::details))
        .at(format!("{p}/bgrs/:rid/result"), get(bgrs::result))
        .at(format!("{p}/bgrs/:rid/events"), get(bgrs::events))
        .at(format!("{p}/media/keep1m/:file"), get(bgrs::media))
        .at(format!("{p}/media/files/*key"), get(files::file))
        .at(format!("{p}/tools/uploader.ex.php"), post(uploader::upload))
        .at(format!("{p}/tools/uploader"), get(pages::uploader))
        .at(format!("{p}/tools/requests"), get(pages::requests))
        .at(format!("{p}/tools/assets/:name"), get(pages::asset))
        .at(
            format!("{p}/:entity"),
            get(crud::list)
                .post(crud::post_collection)
                .put(crud::put_collection)
                .delete(crud::delete_collection),
        )
        .at(
            format!("{p}/:entity/:id"),
            get(crud::get_one).put(crud::update).delete(crud::delete),
        );
    r
}

/// The methods a path answers, for the `Allow` header of a 405.
fn allowed_methods(path: &str) -> &'static str {
    let path = path.strip_prefix("/v2.5").unwrap_or(path);
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    match segments.as_slice() {
        ["auth", "token"] => "POST, DELETE",
        ["tools", "uploader.ex.php"] => "POST",
        ["bgrs", _] => "GET, DELETE",
        ["bgrs", ..]
        | ["media", ..]
        | ["users", "me"]
        | ["tools", "uploader" | "requests"]
        | ["tools", "assets", _]
        | ["healthz"]
        | ["docs"]
        | ["openapi.json"] => "GET",
        [_] => "GET, POST, PUT, DELETE",
        [_, _] => "GET, PUT, DELETE",
        _ => "GET",
    }
}

/// `//media/x` and `/bgrs//id` route like `/media/x` and `/bgrs/id` (clients joining a base URL
/// and a server-relative path often double the slash).
fn collapse_slashes(req: &mut Request) {
    let path = req.uri().path();
    if !path.contains("//") {
        return;
    }
    let mut clean = String::with_capacity(path.len());
    for c in path.chars() {
        if !(c == '/' && clean.ends_with('/')) {
            clean.push(c);
        }
    }
    if let Some(q) = req.uri().query() {
        clean.push('?');
        clean.push_str(q);
    }
    let mut parts = req.uri().clone().into_parts();
    if let Ok(pq) = clean.parse() {
        parts.path_and_query = Some(pq);
        if let Ok(uri) = poem::http::Uri::from_parts(parts) {
            *req.uri_mut() = uri;
        }
    }
}

fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    error::to_json_response(poem::Error::from_status(StatusCode::INTERNAL_SERVER_ERROR))
}

/// The whole application endpoint.
pub fn app(state: Arc<AppState>) -> impl Endpoint {
    let mut r = Route::new().at("/healthz", get(healthz));
    r = routes(r, "/v2.5");
    r = routes(r, "");
    let allowed = Arc::new(state.settings.allowed_origins.clone());
    let conns = state.conns.clone();
    r.data(state)
        .with(CatchPanic::new().with_handler(panic_response))
        .around(move |ep, mut req| {
            let allowed = allowed.clone();
            let busy = conns.busy(req.local_addr(), req.remote_addr());
            async move {
                let _busy = busy;
                collapse_slashes(&mut req);
                let cors = match origin::check(&req, &allowed) {
                    origin::Verdict::Answer(r) => return Ok(r),
                    origin::Verdict::Run(cors) => cors,
                };
                let allow = allowed_methods(req.uri().path());
                let mut resp = match ep.call(req).await {
                    Ok(r) => r,
                    Err(e) => error::to_json_response(e),
                };
                if resp.status() == StatusCode::METHOD_NOT_ALLOWED {
                    resp.headers_mut()
                        .insert("allow", poem::http::HeaderValue::from_static(allow));
                }
                if let Some(o) = cors {
                    origin::decorate(&mut resp, o);
                }
                Ok(resp)
            }
        })
        .into_endpoint()
}
