//! Request parameters: the query string, and a body that is JSON (object or array), a
//! URL-encoded form or a multipart form.

use super::error::{ApiError, Result};
use poem::{Body, Request};
use serde_json::{Map, Value as Json};

/// Query parameters the HTTP layer reads itself; they are never entity fields.
pub const RESERVED_QUERY: &[&str] = &[
    "_token",
    "bgrs",
    "dry_run",
    "atomic",
    "t",
    "limit",
    "offset",
    "cursor",
    "upsert",
    "sort",
    "fields",
    "changed_by",
];

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

/// How much of a body a route reads before it refuses the request with 413.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// A JSON object or form (single calls, `/auth/token`), and a whole multipart form.
    pub small: usize,
    /// One non-file multipart field.
    pub field: usize,
    /// A JSON array (a batch); 0 where arrays are not accepted at all.
    pub batch_bytes: usize,
    /// Items in a JSON array.
    pub batch_items: usize,
}

impl Limits {
    /// The limits of the routes that take a single call or a batch.
    pub fn of(s: &crate::settings::Settings) -> Limits {
        Limits {
            small: s.max_body_bytes,
            field: s.max_field_bytes,
            batch_bytes: s.max_batch_bytes,
            batch_items: s.max_batch_items,
        }
    }

    /// Small bodies only (no batches), e.g. `/auth/token` before anyone is signed in.
    pub fn small(small: usize, field: usize) -> Limits {
        Limits {
            small,
            field,
            batch_bytes: 0,
            batch_items: 0,
        }
    }
}

fn too_large(limit: usize, what: &str) -> ApiError {
    ApiError::TooLarge(format!("{what} is larger than the limit of {limit} bytes"))
}

/// Reads the body of a request, counting bytes as they arrive: a JSON array (a batch) may take
/// `batch_bytes`, anything else `small`. A declared `Content-Length` over the limit is refused
/// before a byte is read.
async fn collect(req: &Request, body: Body, limits: &Limits) -> Result<Vec<u8>> {
    use futures::StreamExt;
    let most = limits.small.max(limits.batch_bytes);
    let declared = req
        .header("content-length")
        .and_then(|v| v.trim().parse::<u64>().ok());
    if let Some(n) = declared
        && n > most as u64
    {
        return Err(too_large(most, "the request body"));
    }
    let mut stream = body.into_bytes_stream();
    let mut buf: Vec<u8> = Vec::with_capacity(declared.unwrap_or(0).min(64 * 1024) as usize);
    let mut limit = most;
    let mut decided = false;
    while let Some(chunk) = stream.next().await {
        let chunk =
            chunk.map_err(|_| ApiError::BadRequest("the request body could not be read".into()))?;
        if !decided && let Some(b) = chunk.iter().find(|b| !b.is_ascii_whitespace()) {
            decided = true;
            limit = if *b == b'[' && limits.batch_bytes > 0 {
                limits.batch_bytes
            } else {
                limits.small
            };
            if let Some(n) = declared
                && n > limit as u64
            {
                return Err(too_large(limit, body_name(*b)));
            }
        }
        if buf.len() + chunk.len() > limit {
            let first = buf
                .iter()
                .chain(chunk.iter())
                .find(|b| !b.is_ascii_whitespace());
            return Err(too_large(limit, body_name(first.copied().unwrap_or(b'{'))));
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf)
}

fn body_name(first: u8) -> &'static str {
    if first == b'[' {
        "the batch"
    } else {
        "the request body"
    }
}

/// Reads the body of a POST or PUT within `limits`.
pub async fn read(req: &Request, body: Body, limits: &Limits) -> Result<Payload> {
    let ct = content_type(req);
    if ct == "multipart/form-data" {
        return read_multipart(req, body, limits).await;
    }
    let bytes = collect(req, body, limits).await?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Payload::None);
    }
    match ct.as_str() {
        "application/json" | "" if ct == "application/json" || looks_like_json(&bytes) => {
            parse_json(&bytes, limits)
        }
        "application/x-www-form-urlencoded" => serde_urlencoded::from_bytes(&bytes)
            .map(Payload::Strings)
            .map_err(|_| ApiError::BadRequest("malformed form body".into())),
        other => Err(unsupported(other)),
    }
}

fn unsupported(ct: &str) -> ApiError {
    ApiError::UnsupportedMediaType(format!(
        "content type `{ct}` is not accepted; send application/json, application/x-www-form-urlencoded or multipart/form-data"
    ))
}

/// An object, or an array of at most `batch_items` items (refused at the first item past the
/// limit, before the rest is parsed).
fn parse_json(bytes: &[u8], limits: &Limits) -> Result<Payload> {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace()).copied();
    if first == Some(b'[') && limits.batch_bytes > 0 {
        let over = std::cell::Cell::new(false);
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let items = serde::de::DeserializeSeed::deserialize(
            Items {
                max: limits.batch_items,
                over: &over,
            },
            &mut de,
        )
        .and_then(|items| de.end().map(|()| items));
        return match items {
            Ok(items) => Ok(Payload::Array(items)),
            Err(_) if over.get() => Err(ApiError::TooLarge(format!(
                "a batch holds at most {} items",
                limits.batch_items
            ))),
            Err(e) => Err(ApiError::BadRequest(format!("malformed JSON: {e}"))),
        };
    }
    match serde_json::from_slice::<Json>(bytes) {
        Ok(Json::Object(m)) => Ok(Payload::Object(m)),
        // Where batches are not taken, an array is only as large as a small body.
        Ok(Json::Array(a)) => Ok(Payload::Array(a)),
        Ok(_) => Err(ApiError::BadRequest(
            "the JSON body must be an object or an array".into(),
        )),
        Err(e) => Err(ApiError::BadRequest(format!("malformed JSON: {e}"))),
    }
}

/// The items of a JSON array, counted as they are parsed.
struct Items<'a> {
    max: usize,
    over: &'a std::cell::Cell<bool>,
}

impl<'de> serde::de::DeserializeSeed<'de> for Items<'_> {
    type Value = Vec<Json>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Items<'_> {
    type Value = Vec<Json>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON array")
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(self.max));
        while let Some(item) = seq.next_element::<Json>()? {
            if out.len() == self.max {
                self.over.set(true);
                return Err(serde::de::Error::custom("too many items"));
            }
            out.push(item);
        }
        Ok(out)
    }
}

fn looks_like_json(bytes: &[u8]) -> bool {
    matches!(
        bytes.iter().find(|b| !b.is_ascii_whitespace()),
        Some(b'{' | b'[')
    )
}

/// A multipart form of text fields: each field at most `limits.field` bytes and the whole form
/// at most `limits.small`, counted while streaming. A file part is refused: only the uploader
/// takes files.
async fn read_multipart(req: &Request, body: Body, limits: &Limits) -> Result<Payload> {
    let mut mp = crate::uploader::intake::multipart(
        req.header("content-type").unwrap_or(""),
        body,
        limits.small as u64,
        multer::SizeLimit::new().per_field(limits.field as u64),
    )
    .map_err(|_| ApiError::BadRequest("malformed multipart body".into()))?;
    let mut out = Vec::new();
    loop {
        let field = match mp.next_field().await {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => return Err(multipart_error(e, limits)),
        };
        let name = field.name().unwrap_or("").to_string();
        if field.file_name().is_some() {
            return Err(ApiError::BadRequest(format!(
                "multipart field `{name}` is a file; files are taken only by the uploader"
            )));
        }
        let text = field.text().await.map_err(|e| match e {
            multer::Error::DecodeContentType(_) | multer::Error::IncompleteFieldData { .. } => {
                ApiError::BadRequest(format!("multipart field `{name}` is not text"))
            }
            e => multipart_error(e, limits),
        })?;
        out.push((name, text));
    }
    Ok(Payload::Strings(out))
}

fn multipart_error(e: multer::Error, limits: &Limits) -> ApiError {
    match e {
        multer::Error::FieldSizeExceeded { field_name, .. } => ApiError::TooLarge(format!(
            "multipart field `{}` is larger than the limit of {} bytes",
            field_name.unwrap_or_default(),
            limits.field
        )),
        multer::Error::StreamSizeExceeded { .. } => too_large(limits.small, "the form"),
        _ => ApiError::BadRequest("malformed multipart body".into()),
    }
}
