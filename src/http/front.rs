//! The layer every request passes before its handler and every response after it: the
//! request id and its log span, doubled
//! slashes and file keys made routable, the origin check and CORS, the route's `Allow` on a
//! 405, the JSON body of every error, a panic answered as a 500, and the request's metrics.
//!
//! The fixed API's routes without the prefix go straight to its service, as the route table
//! ([`routes::find`], which this layer reads anyway for the metrics) says; every other request
//! goes through the router. The outer router would only pass those to the same service, after
//! matching the path once more.

use super::{AppState, FullPath, error, origin, router};
use crate::routes::{self, Owner};
use futures::FutureExt;
use poem::endpoint::BoxEndpoint;
use poem::http::StatusCode;
use poem::{Endpoint, IntoEndpoint, Request, Response, Route};
use rand::{Rng, SeedableRng};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use tracing::Instrument;

/// The whole application endpoint.
pub fn app(state: Arc<AppState>) -> App {
    let fixed: Arc<BoxEndpoint<'static>> = Arc::new(super::api::service().into_endpoint());
    let routed = router("", &fixed).nest(routes::PREFIX, router(routes::PREFIX, &fixed));
    App {
        routed,
        fixed,
        state,
    }
}

/// The application: the layer of this module around the router and the fixed API.
pub struct App {
    routed: Route,
    fixed: Arc<BoxEndpoint<'static>>,
    state: Arc<AppState>,
}

impl Endpoint for App {
    type Output = Response;

    async fn call(&self, mut req: Request) -> poem::Result<Response> {
        let id = request_id(&req);
        let span = tracing::info_span!("request", request_id = %id.to_str().unwrap_or(""));
        let serving = id.clone();
        let started = std::time::Instant::now();
        let method = req.method().clone();
        let work = async move {
            collapse_slashes(&mut req);
            let route = routes::find(req.uri().path());
            // The nested router takes the prefix off the URI; without one the URI is the full
            // path ([`super::full_path`]).
            if routes::prefixed(req.uri().path()) {
                let full = FullPath(req.uri().clone());
                req.extensions_mut().insert(full);
            }
            req.extensions_mut().insert(self.state.clone());
            file_key_as_one_segment(&mut req);
            let (mut resp, cors) = match origin::check(&req, &self.state.settings.allowed_origins) {
                // A preflight, or a cross-site write refused: answered here.
                origin::Verdict::Answer(r) => (r, None),
                origin::Verdict::Run(cors) => (self.handle(req, route).await, cors),
            };
            if resp.status() == StatusCode::METHOD_NOT_ALLOWED
                && let Ok(v) = poem::http::HeaderValue::from_str(&routes::allow_of(route))
            {
                resp.headers_mut().insert("allow", v);
            }
            if let Some(o) = cors {
                origin::decorate(&mut resp, o);
            }
            resp.headers_mut().insert(X_REQUEST_ID, id);
            tracing::debug!(status = resp.status().as_u16(), "request answered");
            crate::telemetry::http(
                &method,
                route.map_or("unknown", |r| r.path),
                resp.status().as_u16(),
                started.elapsed().as_secs_f64(),
            );
            Ok(resp)
        }
        .instrument(span);
        crate::request_id::serving(serving, work).await
    }
}

impl App {
    /// The handler's response to `req`, which `route` answers; errors as their JSON, a panic
    /// as a 500.
    async fn handle(&self, req: Request, route: Option<&routes::Route>) -> Response {
        let fixed =
            route.is_some_and(|r| r.owner != Owner::Entity) && !routes::prefixed(req.uri().path());
        let call = async {
            match direct(&req, route) {
                Some(Direct::Health) => Ok(super::docs::healthy()),
                Some(Direct::Item(entity, id)) => {
                    Ok(super::crud::read_one(&req, &self.state, entity, id).await?)
                }
                None if fixed => self.fixed.call(req).await,
                None => self.routed.call(req).await,
            }
        };
        match AssertUnwindSafe(call).catch_unwind().await {
            Ok(Ok(r)) => error::ensure_json(r).await,
            Ok(Err(e)) => error::to_json_response(e),
            Err(_) => {
                error::to_json_response(poem::Error::from_status(StatusCode::INTERNAL_SERVER_ERROR))
            }
        }
    }
}

/// A request this layer hands to its handler itself: the two most frequent, which the router
/// and the fixed API's service would only match again, route by route, before calling the same
/// handler.
enum Direct<'a> {
    /// `GET /healthz`.
    Health,
    /// `GET /<entity>/<id>` with a plain path ([`routes::plain_item`]).
    Item(&'a str, &'a str),
}

/// What of `req`, which `route` answers, this layer hands to its handler itself.
fn direct<'a>(req: &'a Request, route: Option<&routes::Route>) -> Option<Direct<'a>> {
    let route = route?;
    if req.method() != poem::http::Method::GET {
        return None;
    }
    let path = req.uri().path();
    match route.path {
        routes::HEALTH if path == routes::HEALTH => Some(Direct::Health),
        routes::ITEM => routes::plain_item(path).map(|(e, id)| Direct::Item(e, id)),
        _ => None,
    }
}

/// The id of a request: the client's `X-Request-Id` when it is 1 to 128 visible ASCII
/// characters, else a new random one. It is answered in `X-Request-Id` and is a field of every
/// log line written while the request runs.
fn request_id(req: &Request) -> poem::http::HeaderValue {
    if let Some(v) = req.headers().get(X_REQUEST_ID)
        && (1..=128).contains(&v.len())
        && v.as_bytes().iter().all(u8::is_ascii_graphic)
    {
        return v.clone();
    }
    let mut hex = [0u8; 32];
    let bytes = ID_RNG.with(|r| r.borrow_mut().random::<[u8; 16]>());
    hex::encode_to_slice(bytes, &mut hex).expect("32 digits for 16 bytes");
    poem::http::HeaderValue::from_bytes(&hex).expect("hex digits make a header value")
}

thread_local! {
    /// Where request ids come from: a fast generator seeded once per thread from the
    /// operating system. An id names a request in the logs; it guards nothing, so it needs no
    /// cryptographic generator.
    static ID_RNG: std::cell::RefCell<rand::rngs::SmallRng> =
        std::cell::RefCell::new(rand::rngs::SmallRng::from_os_rng());
}

const X_REQUEST_ID: poem::http::HeaderName = poem::http::HeaderName::from_static("x-request-id");

/// `//media/x` and `/bgrs//id` route like `/media/x` and `/bgrs/id` (clients joining a base URL
/// and a server-relative path often double the slash).
fn collapse_slashes(req: &mut Request) {
    let path = req.uri().path();
    // A byte search: `str::contains` prepares a substring search first, which costs more than
    // the search itself on a path this short.
    if !path.as_bytes().windows(2).any(|w| w == b"//") {
        return;
    }
    let mut clean = String::with_capacity(path.len());
    for c in path.chars() {
        if !(c == '/' && clean.ends_with('/')) {
            clean.push(c);
        }
    }
    set_path(req, clean);
}

/// A stored file's key reaches its route as one segment ([`routes::one_segment_key`]).
fn file_key_as_one_segment(req: &mut Request) {
    if let Some(path) = routes::one_segment_key(req.uri().path()) {
        set_path(req, path);
    }
}

/// Gives `req` the path `path`, keeping its query; a path that does not parse leaves it as it
/// was.
fn set_path(req: &mut Request, mut path: String) {
    if let Some(q) = req.uri().query() {
        path.push('?');
        path.push_str(q);
    }
    let mut parts = req.uri().clone().into_parts();
    if let Ok(pq) = path.parse() {
        parts.path_and_query = Some(pq);
        if let Ok(uri) = poem::http::Uri::from_parts(parts) {
            *req.uri_mut() = uri;
        }
    }
}
