//! The pieces the fixed routes' handlers share on poem-openapi: their tags, the signed-in
//! caller as a security requirement, the error replies a handler declares in its type, replies
//! whose body the handler streams itself, and the service that routes to the handlers and
//! writes their part of the document.

use super::error::ApiError;
use super::{AppState, Authed};
use crate::engine::Caller;
use poem::{FromRequest, IntoResponse, Request, RequestBody, Response};
use poem_openapi::registry::{
    MetaHeader, MetaMediaType, MetaResponse, MetaResponses, MetaSchema, MetaSchemaRef,
    MetaSecurityScheme, Registry,
};
use poem_openapi::{ApiExtractor, ApiExtractorType, ApiResponse, ExtractParamOptions, Object};
use poem_openapi::{OpenApiService, Tags};
use std::marker::PhantomData;
use std::sync::Arc;

/// The fixed routes' tags; every entity adds its own.
#[derive(Tags)]
pub enum Tag {
    /// Signing in and out, and the signed-in user.
    #[oai(rename = "auth")]
    Auth,
    /// Background requests: their records, logs, live events, results and cancelling.
    #[oai(rename = "bgrs")]
    Bgrs,
    /// CSV and ZIP uploads that create, update and delete objects row by row, and the files
    /// they store.
    #[oai(rename = "uploader")]
    Uploader,
    /// The browser pages: uploading a file and following background requests.
    #[oai(rename = "pages")]
    Pages,
    /// Health and this document.
    #[oai(rename = "system")]
    System,
}

/// An error reply: a snake_case code, a description, and per field what is wrong with it.
#[derive(Object)]
#[oai(rename = "Error")]
pub struct ErrorBody {
    /// snake_case error code
    error: String,
    description: String,
    fields: Option<std::collections::BTreeMap<String, String>>,
}

/// A request accepted to run in the background.
#[derive(Object)]
pub struct Accepted {
    /// the background request's id: follow it at `/bgrs/{request}`
    #[oai(validator(pattern = "^[0-9a-f]{32}$"))]
    pub request: String,
}

/// The signed-in caller of a fixed route: HTTP Basic, a bearer token or `_token=`.
pub struct Signed(pub Caller);

/// The security schemes a [`Signed`] route takes.
const SCHEMES: [(&str, MetaSecurityScheme); 3] = [
    (
        "basic",
        MetaSecurityScheme {
            ty: "http",
            description: Some("login and password on every request"),
            name: None,
            key_in: None,
            scheme: Some("basic"),
            bearer_format: None,
            flows: None,
            openid_connect_url: None,
        },
    ),
    (
        "bearer",
        MetaSecurityScheme {
            ty: "http",
            description: Some("a token from POST /auth/token"),
            name: None,
            key_in: None,
            scheme: Some("bearer"),
            bearer_format: None,
            flows: None,
            openid_connect_url: None,
        },
    ),
    (
        "token",
        MetaSecurityScheme {
            ty: "apiKey",
            description: Some("a token from POST /auth/token, in the query"),
            name: Some("_token"),
            key_in: Some("query"),
            scheme: None,
            bearer_format: None,
            flows: None,
            openid_connect_url: None,
        },
    ),
];

impl<'a> ApiExtractor<'a> for Signed {
    const TYPES: &'static [ApiExtractorType] = &[ApiExtractorType::SecurityScheme];
    type ParamType = ();
    type ParamRawType = ();

    fn register(registry: &mut Registry) {
        for (name, scheme) in SCHEMES {
            registry.create_security_scheme(name, scheme);
        }
    }

    fn security_schemes() -> Vec<&'static str> {
        SCHEMES.iter().map(|(n, _)| *n).collect()
    }

    async fn from_request(
        req: &'a Request,
        body: &mut RequestBody,
        _: ExtractParamOptions<()>,
    ) -> poem::Result<Self> {
        let Authed(caller) = <Authed as FromRequest>::from_request(req, body).await?;
        Ok(Signed(caller))
    }
}

/// The error statuses a handler may answer, as bits of [`Fails`].
pub const E400: u16 = 1;
pub const E403: u16 = 1 << 2;
pub const E404: u16 = 1 << 3;
pub const E409: u16 = 1 << 4;
pub const E410: u16 = 1 << 5;
pub const E413: u16 = 1 << 6;
pub const E415: u16 = 1 << 7;
pub const E429: u16 = 1 << 8;
/// Wrong or missing credentials (401), too many failed sign-ins (429), or the user store
/// unreachable (503): what every signed-in route may answer.
pub const SIGNED: u16 = 1 << 1 | E429 | 1 << 9;

const ERRORS: [(u16, u16, &str); 10] = [
    (
        E400,
        400,
        "bad input: validation, unknown field, malformed body",
    ),
    (1 << 1, 401, "no or wrong credentials"),
    (E403, 403, "not allowed for this role"),
    (E404, 404, "no such resource, route or id"),
    (E409, 409, "conflict: the request's state does not allow it"),
    (
        E410,
        410,
        "the result was kept for its keep time and is gone",
    ),
    (E413, 413, "over a size limit"),
    (E415, 415, "wrong content type"),
    (
        E429,
        429,
        "too many at once, or too many failed sign-ins: wait `Retry-After` seconds",
    ),
    (1 << 9, 503, "the service is unavailable; try again"),
];

/// The error replies `M` (bits such as [`E400`] | [`SIGNED`]) of a handler: documented from
/// the type, answered as the contract's JSON error.
pub struct Fails<const M: u16>(pub ApiError);

impl<const M: u16> ApiResponse for Fails<M> {
    fn meta() -> MetaResponses {
        let responses = ERRORS
            .iter()
            .filter(|(bit, _, _)| M & bit != 0)
            .map(|(_, status, description)| MetaResponse {
                description,
                status: Some(*status),
                status_range: None,
                content: vec![MetaMediaType {
                    content_type: "application/json",
                    schema: MetaSchemaRef::Reference("Error".into()),
                }],
                headers: (*status == 429)
                    .then(|| MetaHeader {
                        name: "Retry-After".into(),
                        description: Some("seconds to wait".into()),
                        required: true,
                        deprecated: false,
                        schema: MetaSchemaRef::Inline(Box::new(MetaSchema::new("integer"))),
                    })
                    .into_iter()
                    .collect(),
            })
            .collect();
        MetaResponses { responses }
    }

    fn register(registry: &mut Registry) {
        <ErrorBody as poem_openapi::types::Type>::register(registry);
    }
}

impl<const M: u16> IntoResponse for Fails<M> {
    fn into_response(self) -> Response {
        poem::error::ResponseError::as_response(&self.0)
    }
}

impl<const M: u16> From<Fails<M>> for poem::Error {
    fn from(f: Fails<M>) -> Self {
        poem::Error::from(f.0)
    }
}

macro_rules! fails_from {
    ($($t:ty),*) => {$(
        impl<const M: u16> From<$t> for Fails<M> {
            fn from(e: $t) -> Self {
                Fails(ApiError::from(e))
            }
        }
    )*};
}
fails_from!(
    ApiError,
    crate::auth::AuthError,
    crate::engine::CallError,
    crate::engine::StorageError,
    crate::uploader::UploadError
);

/// The result of a fixed route's handler.
pub type Reply<T, const M: u16> = Result<T, Fails<M>>;

/// The schema of a streamed body's media type.
pub enum Body {
    /// Any value (JSON, or events of a stream).
    Json,
    /// A type's schema, and how it registers its components.
    Typed(fn() -> MetaSchemaRef, fn(&mut Registry)),
    /// Text.
    Text,
    /// Bytes.
    Binary,
}

/// One documented reply of a [`Streamed`] route: status, description and media types.
pub type Documented = (u16, &'static str, &'static [(&'static str, Body)]);

/// What a route whose body the handler builds itself (streams, files, pages) answers.
pub trait Replies: Send {
    const REPLIES: &'static [Documented];
}

/// A reply built by the handler, documented by `D`.
pub struct Streamed<D>(pub Response, PhantomData<D>);

impl<D> Streamed<D> {
    pub fn new(r: Response) -> Self {
        Streamed(r, PhantomData)
    }
}

impl<D: Replies> ApiResponse for Streamed<D> {
    fn meta() -> MetaResponses {
        let schema = |b: &Body| match b {
            Body::Json => MetaSchemaRef::Inline(Box::new(MetaSchema::ANY)),
            Body::Typed(schema, _) => schema(),
            Body::Text => MetaSchemaRef::Inline(Box::new(MetaSchema::new("string"))),
            Body::Binary => {
                MetaSchemaRef::Inline(Box::new(MetaSchema::new_with_format("string", "binary")))
            }
        };
        MetaResponses {
            responses: D::REPLIES
                .iter()
                .map(|(status, description, media)| MetaResponse {
                    description,
                    status: Some(*status),
                    status_range: None,
                    content: media
                        .iter()
                        .map(|(content_type, b)| MetaMediaType {
                            content_type,
                            schema: schema(b),
                        })
                        .collect(),
                    headers: vec![],
                })
                .collect(),
        }
    }

    fn register(registry: &mut Registry) {
        for (_, _, media) in D::REPLIES {
            for (_, b) in media.iter() {
                if let Body::Typed(_, register) = b {
                    register(registry);
                }
            }
        }
    }
}

impl<D: Replies> IntoResponse for Streamed<D> {
    fn into_response(self) -> Response {
        self.0
    }
}

/// The state every handler reaches, from the request.
pub fn state(req: &Request) -> &Arc<AppState> {
    req.data::<Arc<AppState>>()
        .expect("the state is attached to every route")
}

/// The fixed routes' handlers, as one service.
pub type Apis = (
    super::docs::SystemApi,
    super::auth::AuthApi,
    super::bgrs::BgrsApi,
    super::failed::FailedApi,
    super::uploader::UploaderApi,
    super::files::FilesApi,
    super::pages::PagesApi,
);

/// The service of the fixed routes.
pub fn service() -> OpenApiService<Apis, ()> {
    OpenApiService::new(
        (
            super::docs::SystemApi,
            super::auth::AuthApi,
            super::bgrs::BgrsApi,
            super::failed::FailedApi,
            super::uploader::UploaderApi,
            super::files::FilesApi,
            super::pages::PagesApi,
        ),
        "entiserve",
        env!("CARGO_PKG_VERSION"),
    )
}

/// The fixed routes' part of the document, as poem-openapi writes it (OpenAPI 3.0).
pub fn spec() -> serde_json::Value {
    serde_json::from_str(&service().spec()).expect("poem-openapi writes JSON")
}
