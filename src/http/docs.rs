//! `GET /openapi.json` (the document for the catalog in force) and `GET /docs`, a page that
//! renders it. Neither needs credentials.

use super::{AppState, json_response};
use poem::http::StatusCode;
use poem::web::Data;
use poem::{Response, handler};
use std::sync::Arc;

const PAGE: &str = include_str!("docs.html");

#[handler]
pub fn openapi(Data(state): Data<&Arc<AppState>>) -> Response {
    let doc = crate::openapi::document(&state.engine.catalog.load());
    json_response(StatusCode::OK, &doc)
}

#[handler]
pub fn page() -> Response {
    Response::builder()
        .content_type("text/html; charset=utf-8")
        .body(PAGE)
}
