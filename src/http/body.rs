//! Request parameters: the query string, and a body that is JSON (object or array), a
//! URL-encoded form or a multipart form.

use super::error::{ApiError, Result};
use poem::{Body, Request};
use serde_json::{Map, Value as Json};

/// Query parameters the HTTP layer reads itself; they are never entity fields.
pub const RESERVED_QUERY: &[&str] = &["_token", "bgrs", "t", "limit", "offset", "cursor"];

/// What a request body held.
pub enum Payload {
    None,
    Object(Map<String, Json>),
    Array(Vec<Json>),
    /// Form fields: string values, to be coerced to field types.
    Strings(Vec<(String, String)>),
}

/// All query parameters in order.
pub fn query_pairs(req: &Request) -> Result<Vec<(String, String)>> {
    serde_urlencoded::from_str(req.uri().query().unwrap_or(""))
        .map_err(|_| ApiError::BadRequest("the query string is malformed".into()))
}

/// One query parameter.
pub fn query_param(pairs: &[(String, String)], name: &str) -> Option<String> {
    pairs
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
}

/// Query parameters that are not reserved: field values and filters.
pub fn field_pairs(pairs: Vec<(String, String)>) -> Vec<(String, String)> {
    pairs
        .into_iter()
        .filter(|(k, _)| !RESERVED_QUERY.contains(&k.as_str()))
        .collect()
}

fn content_type(req: &Request) -> String {
    req.header("content-type")
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// Reads the body of a POST or PUT.
pub async fn read(req: &Request, body: Body, limit: usize) -> Result<Payload> {
    let ct = content_type(req);
    if ct == "multipart/form-data" {
        return read_multipart(req, body).await;
    }
    let bytes = body.into_bytes_limit(limit).await.map_err(|e| match e {
        poem::error::ReadBodyError::PayloadTooLarge => {
            ApiError::TooLarge(format!("the request body is larger than {limit} bytes"))
        }
        _ => ApiError::BadRequest("the request body could not be read".into()),
    })?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Payload::None);
    }
    match ct.as_str() {
        "application/json" | "" if ct == "application/json" || looks_like_json(&bytes) => {
            match serde_json::from_slice::<Json>(&bytes) {
                Ok(Json::Object(m)) => Ok(Payload::Object(m)),
                Ok(Json::Array(a)) => Ok(Payload::Array(a)),
                Ok(_) => Err(ApiError::BadRequest(
                    "the JSON body must be an object or an array".into(),
                )),
                Err(e) => Err(ApiError::BadRequest(format!("malformed JSON: {e}"))),
            }
        }
        "application/x-www-form-urlencoded" => serde_urlencoded::from_bytes(&bytes)
            .map(Payload::Strings)
            .map_err(|_| ApiError::BadRequest("malformed form body".into())),
        other => Err(ApiError::UnsupportedMediaType(format!(
            "content type `{other}` is not accepted; send application/json, application/x-www-form-urlencoded or multipart/form-data"
        ))),
    }
}

fn looks_like_json(bytes: &[u8]) -> bool {
    matches!(
        bytes.iter().find(|b| !b.is_ascii_whitespace()),
        Some(b'{' | b'[')
    )
}

async fn read_multipart(req: &Request, body: Body) -> Result<Payload> {
    use poem::FromRequest;
    let mut body = poem::RequestBody::new(body);
    let mut mp = poem::web::Multipart::from_request(req, &mut body)
        .await
        .map_err(|_| ApiError::BadRequest("malformed multipart body".into()))?;
    let mut out = Vec::new();
    while let Some(field) = mp
        .next_field()
        .await
        .map_err(|_| ApiError::BadRequest("malformed multipart body".into()))?
    {
        let name = field.name().unwrap_or("").to_string();
        let text = field
            .text()
            .await
            .map_err(|_| ApiError::BadRequest(format!("multipart field `{name}` is not text")))?;
        out.push((name, text));
    }
    Ok(Payload::Strings(out))
}
