//! `GET /healthz`, `GET /openapi.json` (the document for the catalog in force) and `GET /docs`,
//! a page that renders it. None needs credentials.

use super::AppState;
use super::api::Tag;
use poem::web::Data;
use poem_openapi::payload::{Html, Json};
use poem_openapi::{Object, OpenApi};
use std::sync::Arc;

const PAGE: &str = include_str!("docs.html");

pub struct SystemApi;

/// The server's readiness.
#[derive(Object)]
struct Health {
    /// `ok`
    status: String,
}

#[OpenApi]
impl SystemApi {
    /// Readiness
    ///
    /// 200 while the server accepts requests. Needs no credentials.
    #[oai(
        path = "/healthz",
        method = "get",
        operation_id = "getHealth",
        tag = "Tag::System"
    )]
    async fn health(&self) -> Json<Health> {
        Json(Health {
            status: "ok".into(),
        })
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

    /// A page that renders this document
    ///
    /// The routes, their parameters and schemas, readable in a browser. Needs no credentials.
    #[oai(
        path = "/docs",
        method = "get",
        operation_id = "getDocsPage",
        tag = "Tag::System"
    )]
    async fn page(&self) -> Html<&'static str> {
        Html(PAGE)
    }
}
