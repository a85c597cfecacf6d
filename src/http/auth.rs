//! `POST /auth/token` (sign in), `DELETE /auth/token` (sign out) and `GET /users/me`.

use super::body::{self, Payload};
use super::error::{ApiError, Result};
use super::{AppState, Authed, json_response};
use poem::http::StatusCode;
use poem::web::Data;
use poem::{Body, Request, Response, handler};
use serde_json::{Value as Json, json};
use std::sync::Arc;
use std::time::Duration;

const MAX_TTL: u64 = 7 * 24 * 3600;
const DEFAULT_TTL: u64 = 24 * 3600;

#[handler]
pub async fn token(
    req: &Request,
    body: Body,
    Data(state): Data<&Arc<AppState>>,
) -> Result<Response> {
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
    Ok(json_response(
        StatusCode::OK,
        &json!({"token": t.token, "expires_dt": t.expires_dt}),
    ))
}

/// Signs out the bearer token the request presents.
#[handler]
pub async fn sign_out(
    req: &Request,
    Authed(_caller): Authed,
    Data(state): Data<&Arc<AppState>>,
) -> Result<Response> {
    let Some(presented) = super::bearer_token(req)? else {
        return Err(ApiError::BadRequest(
            "sign out with the token itself: `Authorization: Bearer <token>` or `_token=`".into(),
        ));
    };
    state.auth.revoke(&presented).await?;
    Ok(Response::builder().status(StatusCode::NO_CONTENT).finish())
}

#[handler]
pub async fn me(Authed(caller): Authed, Data(state): Data<&Arc<AppState>>) -> Result<Response> {
    let system = crate::engine::Caller {
        role: crate::schema::Role::Admin,
        ..caller.clone()
    };
    let user = state.engine.get(&system, "users", caller.id).await?;
    Ok(json_response(StatusCode::OK, &user))
}
