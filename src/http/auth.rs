//! `POST /auth/token` (sign in), `DELETE /auth/token` (sign out) and `GET /users/me`.

use super::AppState;
use super::api::{E400, E403, E413, E415, Fails, Reply, SIGNED, Signed, Tag};
use super::body::{self, Payload};
use super::error::ApiError;
use poem::web::Data;
use poem::{Request, RequestBody};
use poem_openapi::payload::Json as JsonBody;
use poem_openapi::registry::{MetaMediaType, MetaRequest, MetaSchemaRef, Registry};
use poem_openapi::types::{Example, Type};
use poem_openapi::{
    ApiExtractor, ApiExtractorType, ApiResponse, ExtractParamOptions, Object, OpenApi,
};
use serde_json::Value as Json;
use std::sync::Arc;
use std::time::Duration;

const MAX_TTL: u64 = 7 * 24 * 3600;
const DEFAULT_TTL: u64 = 24 * 3600;

/// A login and password, and how long the token lives.
#[derive(Object)]
#[oai(example, deny_unknown_fields, skip_serializing_if_is_none)]
struct TokenRequest {
    login: String,
    password: String,
    /// seconds the token is valid (default 86400)
    #[oai(validator(minimum(value = "1"), maximum(value = "604800")))]
    ttl: Option<u64>,
}

impl Example for TokenRequest {
    fn example() -> Self {
        TokenRequest {
            login: "admin".into(),
            password: "a-long-password".into(),
            ttl: Some(3600),
        }
    }
}

/// A bearer token.
#[derive(Object)]
struct Token {
    token: String,
    expires_dt: String,
}

/// The sign-in fields, from an optional JSON or form body and from the query string.
struct SignInFields(Vec<(String, String)>);

impl<'a> ApiExtractor<'a> for SignInFields {
    const TYPES: &'static [ApiExtractorType] = &[ApiExtractorType::RequestObject];
    type ParamType = ();
    type ParamRawType = ();

    fn register(registry: &mut Registry) {
        TokenRequest::register(registry);
    }

    fn request_meta() -> Option<MetaRequest> {
        Some(MetaRequest {
            description: None,
            content: vec![MetaMediaType {
                content_type: "application/json",
                schema: MetaSchemaRef::Reference("TokenRequest".into()),
            }],
            required: false,
        })
    }

    async fn from_request(
        req: &'a Request,
        body: &mut RequestBody,
        _: ExtractParamOptions<()>,
    ) -> poem::Result<Self> {
        Ok(SignInFields(sign_in_fields(req, body.take()?).await?))
    }
}

async fn sign_in_fields(
    req: &Request,
    body: poem::Body,
) -> Result<Vec<(String, String)>, ApiError> {
    let mut params: Vec<(String, String)> = body::query_pairs(req)?;
    match body::read(req, body, &body::Limits::small(64 * 1024, 4 * 1024)).await? {
        Payload::None => {}
        Payload::Strings(s) => {
            if let Some((k, _)) = s
                .iter()
                .find(|(k, _)| !matches!(k.as_str(), "login" | "password" | "ttl"))
            {
                return Err(ApiError::BadRequest(format!("unknown field `{k}`")));
            }
            params.extend(s)
        }
        Payload::Object(m) => {
            for (k, v) in m {
                let s = match (k.as_str(), v) {
                    ("login" | "password", Json::String(s)) => s,
                    ("ttl", Json::Number(n))
                        if n.as_f64().is_some_and(|f| f.fract() == 0.0 && f >= 0.0) =>
                    {
                        (n.as_f64().unwrap_or_default() as u64).to_string()
                    }
                    ("login" | "password", _) => {
                        return Err(ApiError::BadRequest(format!("`{k}` must be a string")));
                    }
                    ("ttl", _) => {
                        return Err(ApiError::BadRequest("`ttl` must be an integer".into()));
                    }
                    _ => return Err(ApiError::BadRequest(format!("unknown field `{k}`"))),
                };
                params.push((k, s));
            }
        }
        Payload::Array(_) => return Err(ApiError::BadRequest("send one object".into())),
    }
    Ok(params)
}

#[derive(ApiResponse)]
enum SignedIn {
    /// the token
    #[oai(status = 200)]
    Ok(JsonBody<Token>),
}

#[derive(ApiResponse)]
enum SignedOut {
    /// signed out
    #[oai(status = 204)]
    Done,
}

#[derive(ApiResponse)]
enum Me {
    /// the user
    #[oai(status = 200)]
    Ok(JsonBody<crate::openapi::Users>),
}

pub struct AuthApi;

#[OpenApi]
impl AuthApi {
    /// A bearer token for a login and password
    ///
    /// Checks the login and password and answers with a token for `Authorization: Bearer` (or
    /// `_token=` in the query), valid for `ttl` seconds (default 86400). The same fields are
    /// also taken from an `application/x-www-form-urlencoded` body or from the query string,
    /// for HTML forms and simple scripts. Failed attempts are throttled per login and client
    /// address: 429 with `Retry-After`.
    #[oai(
        path = "/auth/token",
        method = "post",
        operation_id = "signIn",
        tag = "Tag::Auth"
    )]
    async fn sign_in(
        &self,
        req: &Request,
        SignInFields(params): SignInFields,
        Data(state): Data<&Arc<AppState>>,
    ) -> Reply<SignedIn, { E400 | SIGNED | E403 | E413 | E415 }> {
        Ok(SignedIn::Ok(JsonBody(token(req, params, state).await?)))
    }

    /// Signs out the bearer token the request presents
    ///
    /// The token stops working at once, on every server. A password change, a role change or
    /// deleting the user ends all of the user's tokens as well.
    #[oai(
        path = "/auth/token",
        method = "delete",
        operation_id = "signOut",
        tag = "Tag::Auth"
    )]
    async fn sign_out(
        &self,
        req: &Request,
        _caller: Signed,
        Data(state): Data<&Arc<AppState>>,
    ) -> Reply<SignedOut, { E400 | SIGNED | E403 }> {
        let Some(presented) = super::bearer_token(req)? else {
            return Err(Fails(ApiError::BadRequest(
                "sign out with the token itself: `Authorization: Bearer <token>` or `_token=`"
                    .into(),
            )));
        };
        state.auth.revoke(&presented).await?;
        Ok(SignedOut::Done)
    }

    /// The current user
    ///
    /// The `users` object of the credentials the request presents.
    #[oai(
        path = "/users/me",
        method = "get",
        operation_id = "getCurrentUser",
        tag = "Tag::Auth"
    )]
    async fn me(
        &self,
        Signed(caller): Signed,
        Data(state): Data<&Arc<AppState>>,
    ) -> Reply<Me, SIGNED> {
        let system = crate::engine::Caller {
            role: crate::schema::Role::admin(),
            ..caller.clone()
        };
        let user = state.engine.get(&system, "users", caller.id).await?;
        Ok(Me::Ok(JsonBody(crate::openapi::Users(user))))
    }
}

async fn token(
    req: &Request,
    params: Vec<(String, String)>,
    state: &AppState,
) -> Result<Token, ApiError> {
    let get = |n: &str| {
        params
            .iter()
            .rev()
            .find(|(k, _)| k == n)
            .map(|(_, v)| v.clone())
    };
    let (Some(login), Some(password)) = (get("login"), get("password")) else {
        return Err(ApiError::BadRequest(
            "`login` and `password` are required".into(),
        ));
    };
    let ttl = match get("ttl") {
        None => DEFAULT_TTL,
        Some(t) => match t.trim().parse::<u64>() {
            Ok(n) if (1..=MAX_TTL).contains(&n) => n,
            _ => {
                return Err(ApiError::BadRequest(format!(
                    "`ttl` must be 1 to {MAX_TTL} seconds"
                )));
            }
        },
    };
    let t = state
        .auth
        .issue(
            &login,
            &password,
            Duration::from_secs(ttl),
            super::client_ip(req),
        )
        .await?;
    Ok(Token {
        token: t.token,
        expires_dt: t.expires_dt,
    })
}
