//! The browser tools: `GET /tools/uploader` (upload a CSV or ZIP, follow its progress, get the
//! result file), `GET /tools/requests` (the caller's background requests) and `GET /tools/data`
//! (the objects of an entity, sorted, filtered, created, edited and deleted), with their
//! stylesheet and scripts under `GET /tools/assets/<file>` and the entities their forms are
//! built from under `GET /tools/entities`.
//!
//! The pages are static shells embedded in the binary and served without credentials; the one
//! piece rendered on the server is the uploader's list of entities, taken from the catalog in
//! force. In the browser the pages sign in with `POST /auth/token`, keep the bearer token in
//! `sessionStorage` and call the API with it. Nothing is loaded from outside the server.

use super::AppState;
use super::api::{Body as Media, E404, Fails, Replies, Reply, Streamed, Tag};
use super::error::ApiError;
use poem::Response;
use poem::web::Data;
use poem_openapi::OpenApi;
use poem_openapi::param::Path;
use std::sync::Arc;

/// An HTML page.
pub struct PageReplies;
impl Replies for PageReplies {
    const REPLIES: &'static [super::api::Documented] =
        &[(200, "the page", &[("text/html", Media::Text)])];
}

/// The entry point: a redirect for browsers, an index for other clients.
pub struct IndexReplies;
impl Replies for IndexReplies {
    const REPLIES: &'static [super::api::Documented] = &[
        (
            200,
            "the entry points, for clients that do not ask for HTML",
            &[("application/json", Media::Json)],
        ),
        (
            303,
            "a browser (one that accepts text/html) is sent to the console",
            &[],
        ),
    ];
}

/// Where a browser that opens `/` is sent.
pub const CONSOLE: &str = "/tools/data";

/// The entities as the forms see them.
pub struct EntitiesReplies;
impl Replies for EntitiesReplies {
    const REPLIES: &'static [super::api::Documented] = &[(
        200,
        "each entity's fields and access, by entity name",
        &[("application/json", Media::Json)],
    )];
}

/// A stylesheet or script.
pub struct AssetReplies;
impl Replies for AssetReplies {
    const REPLIES: &'static [super::api::Documented] = &[(
        200,
        "the asset",
        &[("text/css", Media::Text), ("text/javascript", Media::Text)],
    )];
}

pub struct PagesApi;

#[OpenApi(tag = "Tag::Pages")]
impl PagesApi {
    /// The entry point
    ///
    /// A browser (a request that accepts `text/html`) is sent to the console; any other client
    /// gets a JSON index of the entry points. Needs no credentials.
    #[oai(path = "/", method = "get", operation_id = "getIndex")]
    async fn index(&self, req: &poem::Request) -> Streamed<IndexReplies> {
        let wants_html = req
            .headers()
            .get_all(poem::http::header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.contains("text/html"));
        if wants_html {
            return Streamed::new(
                Response::builder()
                    .status(poem::http::StatusCode::SEE_OTHER)
                    .header("location", CONSOLE)
                    .finish(),
            );
        }
        Streamed::new(super::json_response(
            poem::http::StatusCode::OK,
            &entry_points(),
        ))
    }

    /// The upload page
    ///
    /// Upload a CSV or ZIP file to an entity, follow its progress and get the result file.
    /// The page signs in with `POST /auth/token`; serving it needs no credentials.
    #[oai(
        path = "/tools/uploader",
        method = "get",
        operation_id = "getUploaderPage"
    )]
    async fn uploader(&self, Data(state): Data<&Arc<AppState>>) -> Streamed<PageReplies> {
        let catalog = state.engine.catalog.load();
        let names: Vec<&str> = catalog.entities.keys().map(String::as_str).collect();
        Streamed::new(html(
            UPLOADER
                .replace(SIGNIN_SLOT, SIGNIN)
                .replace(ENTITY_OPTIONS, &entity_options(&names)),
        ))
    }

    /// The background requests page
    ///
    /// The caller's background requests, their progress and results. The page signs in with
    /// `POST /auth/token`; serving it needs no credentials.
    #[oai(
        path = "/tools/requests",
        method = "get",
        operation_id = "getRequestsPage"
    )]
    async fn requests(&self) -> Streamed<PageReplies> {
        Streamed::new(html(REQUESTS.replace(SIGNIN_SLOT, SIGNIN)))
    }

    /// The data page
    ///
    /// The objects of any entity the caller may read, with sort, chosen columns and filters.
    /// The page signs in with `POST /auth/token`; serving it needs no credentials.
    #[oai(path = "/tools/data", method = "get", operation_id = "getDataPage")]
    async fn data(&self, Data(state): Data<&Arc<AppState>>) -> Streamed<PageReplies> {
        let catalog = state.engine.catalog.load();
        let names: Vec<&str> = catalog.entities.keys().map(String::as_str).collect();
        Streamed::new(html(
            DATA.replace(SIGNIN_SLOT, SIGNIN)
                .replace(ENTITY_OPTIONS, &entity_options(&names)),
        ))
    }

    /// The entities, as the data page's forms are built from them
    ///
    /// Per entity: its fields (type, required, `max_length`, enum values, the referenced
    /// entity, default, who may set it), each access rule as written with its roles when it is
    /// a list of roles, and the field that names an object in a reference picker (`label`). Needs no credentials: it says what
    /// `/openapi.json` says.
    #[oai(
        path = "/tools/entities",
        method = "get",
        operation_id = "getConsoleEntities"
    )]
    async fn entities(&self, Data(state): Data<&Arc<AppState>>) -> Streamed<EntitiesReplies> {
        let described = super::forms::describe(&state.engine.catalog.load());
        let mut resp = super::json_response(poem::http::StatusCode::OK, &described);
        resp.headers_mut().insert(
            poem::http::header::CACHE_CONTROL,
            poem::http::HeaderValue::from_static("no-cache"),
        );
        Streamed::new(resp)
    }

    /// A stylesheet or script of the pages
    ///
    /// The pages load nothing from outside the server.
    #[oai(
        path = "/tools/assets/:name",
        method = "get",
        operation_id = "getPageAsset"
    )]
    async fn asset(
        &self,
        /// the asset's file name
        name: Path<String>,
    ) -> Reply<Streamed<AssetReplies>, E404> {
        let (_, ctype, body) = ASSETS
            .iter()
            .find(|(n, _, _)| *n == name.0)
            .ok_or_else(|| Fails(ApiError::NotFound(format!("no asset `{}`", name.0))))?;
        Ok(Streamed::new(
            Response::builder()
                .content_type(*ctype)
                .header("cache-control", "no-cache")
                .header("x-content-type-options", "nosniff")
                .body(*body),
        ))
    }
}

/// The JSON index of the entry points.
fn entry_points() -> serde_json::Value {
    serde_json::json!({
        "name": "entiserve",
        "version": env!("CARGO_PKG_VERSION"),
        "console": {
            "data": CONSOLE,
            "requests": "/tools/requests",
            "uploader": "/tools/uploader",
        },
        "api": {
            "document": "/openapi.json",
            "reference": "/docs",
            "token": "/auth/token",
            "me": "/users/me",
            "requests": "/bgrs",
        },
        "health": {"live": "/healthz", "ready": "/readyz", "metrics": "/metrics"},
    })
}

const UPLOADER: &str = include_str!("pages/uploader.html");
const REQUESTS: &str = include_str!("pages/requests.html");
const DATA: &str = include_str!("pages/data.html");
/// The signed-in user's bar and the sign-in form, shared by both pages.
const SIGNIN: &str = include_str!("pages/signin.html");
const SIGNIN_SLOT: &str = "<!--SIGNIN-->";

/// The assets under `/tools/assets/`: name, content type, content.
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "common.css",
        "text/css; charset=utf-8",
        include_str!("pages/common.css"),
    ),
    (
        "common.js",
        "text/javascript; charset=utf-8",
        include_str!("pages/common.js"),
    ),
    (
        "uploader.js",
        "text/javascript; charset=utf-8",
        include_str!("pages/uploader.js"),
    ),
    (
        "requests.js",
        "text/javascript; charset=utf-8",
        include_str!("pages/requests.js"),
    ),
    (
        "forms.js",
        "text/javascript; charset=utf-8",
        include_str!("pages/forms.js"),
    ),
    (
        "editor.js",
        "text/javascript; charset=utf-8",
        include_str!("pages/editor.js"),
    ),
    (
        "data.js",
        "text/javascript; charset=utf-8",
        include_str!("pages/data.js"),
    ),
];

/// Where the uploader page receives its `<option>`s.
const ENTITY_OPTIONS: &str = "<!--ENTITY_OPTIONS-->";

/// Scripts and styles come only from this server; no inline script, no framing.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
                   img-src 'self' data: blob:; connect-src 'self' blob:; object-src 'none'; \
                   base-uri 'none'; frame-ancestors 'none'";

/// Escapes text for HTML element content and double-quoted attribute values.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn html(body: String) -> Response {
    Response::builder()
        .content_type("text/html; charset=utf-8")
        .header("cache-control", "no-cache")
        .header("x-content-type-options", "nosniff")
        .header("referrer-policy", "no-referrer")
        .header("content-security-policy", CSP)
        .body(body)
}

/// The `<option>` list of the catalog's entities, sorted by name.
fn entity_options(names: &[&str]) -> String {
    let mut names = names.to_vec();
    names.sort_unstable();
    let mut out = String::new();
    for n in names {
        let n = escape(n);
        out.push_str(&format!("<option value=\"{n}\">{n}</option>"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entity_names_are_escaped_and_sorted() {
        let o = entity_options(&["users", "a<b>\"&'"]);
        assert_eq!(
            o,
            "<option value=\"a&lt;b&gt;&quot;&amp;&#39;\">a&lt;b&gt;&quot;&amp;&#39;</option>\
             <option value=\"users\">users</option>"
        );
    }

    #[test]
    fn the_uploader_and_data_pages_have_their_placeholder() {
        assert!(UPLOADER.contains(ENTITY_OPTIONS));
        assert!(DATA.contains(ENTITY_OPTIONS));
    }
}
