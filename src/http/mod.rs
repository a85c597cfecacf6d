//! HTTP: the router built from the route table ([`crate::routes`]), the shared state, the
//! authenticated caller extractor, and the mapping of every error to the contract's JSON. The
//! fixed routes' handlers are one poem-openapi service ([`api`]), which also writes their part
//! of the document; the entities' routes are poem handlers over the catalog in force.

pub mod api;
mod auth;
pub mod batch;
mod bgrs;
pub mod body;
pub mod conn;
mod crud;
mod docs;
pub mod error;
mod failed;
mod files;
mod forms;
mod front;
mod live;
pub mod origin;
mod pages;
mod ranged;
mod reference;
pub mod serve;
pub mod uploader;

use crate::auth::Auth;
use crate::engine::{Caller, Engine};
use crate::routes::{self, Owner};
use crate::settings::Settings;
use error::ApiError;
pub use front::{App, app};
use poem::http::StatusCode;
use poem::{FromRequest, Request, RequestBody, Response, Route, get};
use serde_json::Value as Json;
use std::sync::Arc;

/// What every handler can reach.
pub struct AppState {
    pub engine: Engine,
    /// Live changes: the hub of this server's event streams.
    pub live: crate::live::Live,
    pub auth: Arc<Auth>,
    pub settings: Arc<Settings>,
    pub jobs: crate::jobs::Jobs,
    /// The plugins uploads run with (the engine runs their call hooks itself).
    pub plugins: Arc<crate::plugins::Registry>,
    /// Stored bundle files.
    /// Bundle files (`/media/files/...`).
    pub files: crate::files::Files,
    /// The fixed routes' part of the document ([`api::spec`]), written once.
    pub fixed_document: Json,
}

/// The signed-in caller of a request (HTTP Basic, bearer token or `_token=`).
pub struct Authed(pub Caller);

impl<'a> FromRequest<'a> for Authed {
    async fn from_request(req: &'a Request, _body: &mut RequestBody) -> poem::Result<Self> {
        Ok(Authed(check(req, presented(req)?).await?))
    }
}

/// The caller the credential `presented` by `req` signs in.
async fn check(req: &Request, presented: Presented<'_>) -> Result<Caller, ApiError> {
    let state = req
        .data::<Arc<AppState>>()
        .expect("the state is attached to every route");
    let auth = &state.auth;
    let caller = match presented {
        Presented::Basic(encoded) => auth.basic_header(encoded, client_ip(req)).await,
        Presented::Token(t) => auth.token(&t).await,
        Presented::Nothing => Err(crate::auth::AuthError::Missing),
    };
    Ok(caller?)
}

/// The caller of a route that an entity's `public` rule may open to anyone: `None` when the
/// request presents no credentials (wrong ones still answer 401).
pub struct MaybeAuthed(pub Option<Caller>);

impl<'a> FromRequest<'a> for MaybeAuthed {
    async fn from_request(req: &'a Request, _body: &mut RequestBody) -> poem::Result<Self> {
        Ok(MaybeAuthed::of(req).await?)
    }
}

impl MaybeAuthed {
    /// The caller `req`'s credentials sign in, if it presents any.
    pub async fn of(req: &Request) -> Result<Self, ApiError> {
        Ok(MaybeAuthed(match presented(req)? {
            Presented::Nothing => None,
            p => Some(check(req, p).await?),
        }))
    }

    /// The caller, or the anonymous caller when `entity`'s rule of `action` is `public`;
    /// otherwise the 401 of missing credentials.
    pub fn for_rule(
        self,
        state: &AppState,
        entity: &str,
        action: crate::schema::Action,
    ) -> Result<Caller, ApiError> {
        if let Some(c) = self.0 {
            return Ok(c);
        }
        let catalog = state.engine.catalog.load();
        let public = catalog
            .get(entity)
            .is_some_and(|e| matches!(e.access.rule(action), crate::schema::rules::Rule::Public));
        if public {
            Ok(Caller::anonymous())
        } else {
            Err(ApiError::from(crate::auth::AuthError::Missing))
        }
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
    if let Some(h) = header(req, poem::http::header::AUTHORIZATION) {
        let (scheme, rest) = h.split_once(' ').unwrap_or((h, ""));
        return Ok(if scheme.eq_ignore_ascii_case("basic") {
            Presented::Basic(rest)
        } else if scheme.eq_ignore_ascii_case("bearer") {
            Presented::Token(rest.trim().to_string())
        } else {
            Presented::Nothing
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

/// The `Content-Type` of a JSON body, checked once rather than parsed on every response.
pub const JSON_TYPE: poem::http::HeaderValue =
    poem::http::HeaderValue::from_static("application/json");

/// A JSON response.
pub fn json_response(status: StatusCode, body: &Json) -> Response {
    Response::builder()
        .status(status)
        .header(poem::http::header::CONTENT_TYPE, JSON_TYPE)
        .body(serde_json::to_vec(body).unwrap_or_default())
}

/// The routes answered under `prefix` (`""` or [`routes::PREFIX`]), from the route table.
fn router(prefix: &str, fixed: &Arc<poem::endpoint::BoxEndpoint<'static>>) -> Route {
    let mut r = Route::new();
    for route in routes::under(prefix) {
        r = match route.owner {
            Owner::Entity if route.path == "/:entity" => r.at(
                route.path,
                get(crud::list)
                    .post(crud::post_collection)
                    .put(crud::put_collection)
                    .delete(crud::delete_collection),
            ),
            Owner::Entity if route.path == "/:entity/events" => r.at(route.path, get(live::events)),
            Owner::Entity if route.path == "/:entity/changes" => {
                r.at(route.path, get(live::changes))
            }
            Owner::Entity => r.at(
                route.path,
                get(crud::get_one).put(crud::update).delete(crud::delete),
            ),
            Owner::Fixed | Owner::FixedUnderEntity => r.at(route.path, fixed.clone()),
        };
    }
    r
}

/// The request's URI with its prefix, as the client sent it (doubled slashes collapsed), kept
/// for a request under the prefix, which the nested router takes off the URI; a copy of a URI
/// shares its text.
#[derive(Clone)]
pub struct FullPath(pub poem::http::Uri);

/// The text of `req`'s header `name`, when it is visible ASCII. By the name as a constant:
/// poem's `Request::header` takes the name as text and parses it on every lookup.
pub fn header(req: &Request, name: poem::http::HeaderName) -> Option<&str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

/// The path of `req` with its prefix.
pub fn full_path(req: &Request) -> &str {
    req.extensions()
        .get::<FullPath>()
        .map_or_else(|| req.uri().path(), |p| p.0.path())
}

/// Serves `GET /metrics` without credentials on `addr` (`--metrics-bind`), until `stop`.
pub async fn metrics_server(
    addr: std::net::SocketAddr,
    state: Arc<AppState>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    use poem::listener::{Acceptor, Listener};
    let acceptor = poem::listener::TcpListener::bind(addr)
        .into_acceptor()
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen for metrics on {addr}: {e}"))?;
    if let Some(a) = acceptor
        .local_addr()
        .first()
        .and_then(|a| a.as_socket_addr().copied())
    {
        eprintln!("entiserve metrics on http://{a}/metrics");
    }
    let scrape = poem::endpoint::make(move |_req| {
        let state = state.clone();
        async move {
            docs::scrape(&state)
                .await
                .unwrap_or_else(|e| error::to_json_response(e.into()))
        }
    });
    let app = Route::new().at("/metrics", poem::get(scrape));
    Ok(tokio::spawn(async move {
        let stopped = async move {
            let _ = stop.changed().await;
        };
        if let Err(e) = serve::run(acceptor, app, stopped, None).await {
            tracing::error!(error = %e, "the metrics listener stopped");
        }
    }))
}
