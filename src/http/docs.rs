//! `GET /healthz` (liveness), `GET /readyz` (the database and the file store answer),
//! `GET /openapi.json` (the document for the catalog in force) and `GET /docs`, the interactive
//! reference that renders it ([`super::reference`]), with its assets. None needs credentials.

use super::AppState;
use super::api::{Body as Media, E403, E404, Fails, Replies, Reply, SIGNED, Signed, Streamed, Tag};
use super::error::ApiError;
use super::pages::{AssetReplies, PageReplies};
use poem::web::Data;
use poem_openapi::param::Path;
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Object, OpenApi};
use std::sync::Arc;

pub struct SystemApi;

/// The server's readiness.
#[derive(Object)]
struct Health {
    /// `ok`
    status: String,
}

/// `/healthz`'s body: a [`Health`] saying `ok`.
const HEALTHY: &str = r#"{"status":"ok"}"#;

/// `/healthz`'s answer. The answer never changes: written once, not rendered per request. The
/// front layer answers `GET /healthz` with it directly; the fixed API's operation, which
/// documents the route, answers the rest (`HEAD`).
pub fn healthy() -> poem::Response {
    poem::Response::builder()
        .header(poem::http::header::CONTENT_TYPE, HEALTH_TYPE)
        .body(HEALTHY)
}

/// The media type of `/healthz`'s body, as poem-openapi names it for the other fixed routes'
/// JSON bodies.
const HEALTH_TYPE_NAME: &str = <Json<Health> as poem_openapi::payload::Payload>::CONTENT_TYPE;
const HEALTH_TYPE: poem::http::HeaderValue = poem::http::HeaderValue::from_static(HEALTH_TYPE_NAME);

/// `/healthz` answers a [`Health`].
pub struct HealthReplies;
impl Replies for HealthReplies {
    const REPLIES: &'static [super::api::Documented] = &[(
        200,
        "",
        &[(
            HEALTH_TYPE_NAME,
            Media::Typed(
                <Health as poem_openapi::types::Type>::schema_ref,
                <Health as poem_openapi::types::Type>::register,
            ),
        )],
    )];
}

/// What `/readyz` found.
#[derive(Object)]
struct Readiness {
    /// `ok`, or `unavailable` when a part failed
    status: String,
    /// `ok`, or why the database did not answer
    database: String,
    /// `ok`, or why a file could not be written to the file store
    store: String,
}

#[derive(ApiResponse)]
enum Ready {
    /// the database and the file store answer
    #[oai(status = 200)]
    Ok(Json<Readiness>),
    /// the database or the file store does not answer
    #[oai(status = 503)]
    Unavailable(Json<Readiness>),
}

/// A scrape of the metrics.
pub struct MetricsReplies;
impl Replies for MetricsReplies {
    const REPLIES: &'static [super::api::Documented] = &[(
        200,
        "the metrics in the Prometheus text format",
        &[("text/plain", Media::Text)],
    )];
}

/// The Prometheus text of the metrics, with the queue read now.
pub async fn scrape(state: &AppState) -> Result<poem::Response, ApiError> {
    let named = state.jobs.depth().await.map_err(|e| {
        tracing::error!(error = %e, "cannot read the queue for the metrics");
        ApiError::Unavailable
    })?;
    Ok(poem::Response::builder()
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .header("cache-control", "no-store")
        .body(crate::telemetry::render(&named)))
}

#[OpenApi]
impl SystemApi {
    /// Metrics
    ///
    /// Counters, histograms and gauges in the Prometheus text format: HTTP requests by route
    /// and status with their latency, changes applied by entity and operation, background
    /// requests by kind and status, lease takeovers, upload bytes, file store errors and the
    /// age of the last scheduled backup. Admins only; `--metrics-bind` serves it without
    /// credentials on an address of its own.
    #[oai(
        path = "/metrics",
        method = "get",
        operation_id = "getMetrics",
        tag = "Tag::System"
    )]
    async fn metrics(
        &self,
        Signed(caller): Signed,
        Data(state): Data<&Arc<AppState>>,
    ) -> Reply<Streamed<MetricsReplies>, { SIGNED | E403 }> {
        if !caller.is_admin() {
            return Err(ApiError::Forbidden(
                "only admins read the metrics (or serve them on --metrics-bind)".into(),
            )
            .into());
        }
        Ok(Streamed::new(scrape(state).await?))
    }

    /// Readiness for traffic
    ///
    /// 200 when the database answers a query and a file can be written to the file store;
    /// 503 naming the part that failed. A load balancer sends requests only to servers that
    /// are ready; `/healthz` says only that the process runs. Needs no credentials.
    #[oai(
        path = "/readyz",
        method = "get",
        operation_id = "getReadiness",
        tag = "Tag::System"
    )]
    async fn ready(&self, Data(state): Data<&Arc<AppState>>) -> Ready {
        let limit = std::time::Duration::from_secs(5);
        let database = match tokio::time::timeout(limit, state.engine.ping()).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(format!("the database did not answer: {e}")),
            Err(_) => Err("the database did not answer within 5 s".to_string()),
        };
        let store = match tokio::time::timeout(limit, state.jobs.files.check()).await {
            Ok(r) => r,
            Err(_) => Err("the file store did not answer within 5 s".to_string()),
        };
        let word = |r: &Result<(), String>| r.clone().err().unwrap_or_else(|| "ok".into());
        let body = Readiness {
            status: if database.is_ok() && store.is_ok() {
                "ok"
            } else {
                "unavailable"
            }
            .into(),
            database: word(&database),
            store: word(&store),
        };
        if database.is_ok() && store.is_ok() {
            Ready::Ok(Json(body))
        } else {
            Ready::Unavailable(Json(body))
        }
    }

    /// Liveness
    ///
    /// 200 while the server process accepts requests; it checks nothing else (see
    /// `/readyz`). Needs no credentials.
    #[oai(
        path = "/healthz",
        method = "get",
        operation_id = "getHealth",
        tag = "Tag::System"
    )]
    async fn health(&self) -> Streamed<HealthReplies> {
        Streamed::new(healthy())
    }

    /// This document
    ///
    /// The OpenAPI 3.1 document of every route, with the entities in force. Needs no
    /// credentials.
    #[oai(
        path = "/openapi.json",
        method = "get",
        operation_id = "getOpenApiDocument",
        tag = "Tag::System"
    )]
    async fn document(&self, Data(state): Data<&Arc<AppState>>) -> Json<serde_json::Value> {
        Json(crate::openapi::document(
            &state.engine.catalog.load(),
            &state.fixed_document,
        ))
    }

    /// The interactive reference of this document
    ///
    /// Swagger UI, served from the binary, on this server's `/openapi.json`: every route with
    /// its parameters, each entity's fields, and "Try it out", which sends the request with
    /// the token the console pages signed in with. Needs no credentials.
    #[oai(
        path = "/docs",
        method = "get",
        operation_id = "getDocsPage",
        tag = "Tag::System"
    )]
    async fn page(&self) -> Streamed<PageReplies> {
        Streamed::new(
            poem::Response::builder()
                .content_type("text/html; charset=utf-8")
                .header("cache-control", "no-cache")
                .header("x-content-type-options", "nosniff")
                .header("referrer-policy", "no-referrer")
                .header("content-security-policy", super::reference::CSP)
                .body(super::reference::PAGE),
        )
    }

    /// A script or stylesheet of the reference
    ///
    /// Swagger UI's bundle and the page's own script and style; nothing is loaded from
    /// outside the server.
    #[oai(
        path = "/docs/assets/:name",
        method = "get",
        operation_id = "getDocsAsset",
        tag = "Tag::System"
    )]
    async fn asset(
        &self,
        /// the asset's file name
        name: Path<String>,
    ) -> Reply<Streamed<AssetReplies>, E404> {
        let (ctype, body) = super::reference::asset(&name.0)
            .ok_or_else(|| Fails(ApiError::NotFound(format!("no asset `{}`", name.0))))?;
        Ok(Streamed::new(
            poem::Response::builder()
                .content_type(ctype)
                .header("cache-control", "no-cache")
                .header("x-content-type-options", "nosniff")
                .body(body),
        ))
    }
}
