//! Request parameters: the query string, and a body that is JSON (object or array), a
//! URL-encoded form or a multipart form.

use super::error::{ApiError, Result};
use crate::item_texts::ItemTexts;
use poem::{Body, Request};
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
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
    /// The items of a JSON array, each as its compact JSON text.
    Array(ItemTexts),
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
    super::header(req, poem::http::header::CONTENT_TYPE)
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
            // A batch's declared size is taken at once: growing the buffer by doubling would
            // hold the old and the new copy together on the way.
            if let Some(n) = declared
                && *b == b'['
            {
                buf.reserve_exact((n as usize).saturating_sub(buf.len()));
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
            parse_json(bytes, limits)
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
/// limit, before the rest is parsed). An array is checked as `serde_json::Value` would parse
/// it, item by item without building the values, and its items are then kept as their texts
/// within the body itself: no tree of values and no second copy of the batch.
fn parse_json(bytes: Vec<u8>, limits: &Limits) -> Result<Payload> {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace()).copied();
    if first == Some(b'[') && limits.batch_bytes > 0 {
        let over = std::cell::Cell::new(false);
        let mut scratch = Vec::new();
        let mut count = 0;
        let mut de = serde_json::Deserializer::from_slice(&bytes);
        let checked = Items {
            max: limits.batch_items,
            over: &over,
            scratch: &mut scratch,
            count: &mut count,
        }
        .deserialize(&mut de)
        .and_then(|()| de.end());
        return match checked {
            Ok(()) => {
                let spans = item_spans(&bytes);
                debug_assert_eq!(spans.len(), count);
                String::from_utf8(bytes)
                    .map(|text| Payload::Array(ItemTexts::in_text(text, spans)))
                    .map_err(|_| {
                        ApiError::BadRequest("malformed JSON: the body is not UTF-8".into())
                    })
            }
            Err(_) if over.get() => Err(ApiError::TooLarge(format!(
                "a batch holds at most {} items",
                limits.batch_items
            ))),
            Err(e) => Err(ApiError::BadRequest(format!("malformed JSON: {e}"))),
        };
    }
    match serde_json::from_slice::<Json>(&bytes) {
        Ok(Json::Object(m)) => Ok(Payload::Object(m)),
        // Where batches are not taken, an array is only as large as a small body.
        Ok(Json::Array(a)) => Ok(Payload::Array(ItemTexts::of_values(&a))),
        Ok(_) => Err(ApiError::BadRequest(
            "the JSON body must be an object or an array".into(),
        )),
        Err(e) => Err(ApiError::BadRequest(format!("malformed JSON: {e}"))),
    }
}

/// Where each item of a JSON array starts and ends in `bytes`, which hold that array, checked
/// already: after the `[`, an item ends at a `,` or at the `]` outside strings and nested
/// values, without the white space around it.
fn item_spans(bytes: &[u8]) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let Some(open) = bytes.iter().position(|b| *b == b'[') else {
        return spans;
    };
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    let mut start: Option<usize> = None;
    let close = |spans: &mut Vec<(usize, usize)>, start: usize, end: usize| {
        let text = &bytes[start..end];
        let trailing = text
            .iter()
            .rev()
            .take_while(|b| b.is_ascii_whitespace())
            .count();
        spans.push((start, end - trailing));
    };
    for (i, &b) in bytes.iter().enumerate().skip(open + 1) {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b' ' | b'\t' | b'\n' | b'\r' => {}
            b',' if depth == 0 => {
                if let Some(s) = start.take() {
                    close(&mut spans, s, i);
                }
            }
            b']' if depth == 0 => {
                if let Some(s) = start.take() {
                    close(&mut spans, s, i);
                }
                break;
            }
            _ => {
                start.get_or_insert(i);
                match b {
                    b'"' => in_string = true,
                    b'[' | b'{' => depth += 1,
                    b']' | b'}' => depth -= 1,
                    _ => {}
                }
            }
        }
    }
    spans
}

/// The items of a JSON array, counted and checked as they are parsed.
struct Items<'a> {
    max: usize,
    over: &'a std::cell::Cell<bool>,
    /// Where an item is written while it is checked.
    scratch: &'a mut Vec<u8>,
    count: &'a mut usize,
}

impl<'de> DeserializeSeed<'de> for Items<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Items<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON array")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(()) = seq.next_element_seed(Transcode(&mut *self.scratch))? {
            self.scratch.clear();
            if *self.count == self.max {
                self.over.set(true);
                return Err(serde::de::Error::custom("too many items"));
            }
            *self.count += 1;
        }
        Ok(())
    }
}

/// serde_json's name for a number kept as its text (`arbitrary_precision`): a number reaches a
/// visitor as a map with this one key.
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// Writes the JSON value being parsed to the buffer as compact JSON: the text
/// `serde_json::Value`'s `to_string` gives for it, and refused where parsing a `Value` is
/// (the same calls of the parser, so the same errors at the same places, nesting limit
/// included), but without building the value.
struct Transcode<'a>(&'a mut Vec<u8>);

impl Transcode<'_> {
    fn string<E: serde::de::Error>(&mut self, s: &str) -> Result<(), E> {
        serde_json::to_writer(&mut *self.0, s).map_err(E::custom)
    }
}

impl<'de> DeserializeSeed<'de> for Transcode<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Transcode<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any valid JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<(), E> {
        self.0.extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }
    fn visit_i64<E>(self, v: i64) -> Result<(), E> {
        self.0.extend_from_slice(v.to_string().as_bytes());
        Ok(())
    }
    fn visit_u64<E>(self, v: u64) -> Result<(), E> {
        self.0.extend_from_slice(v.to_string().as_bytes());
        Ok(())
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<(), E> {
        let n = serde_json::Number::from_f64(v).map_or(Json::Null, Json::Number);
        self.0.extend_from_slice(n.to_string().as_bytes());
        Ok(())
    }
    fn visit_str<E: serde::de::Error>(mut self, v: &str) -> Result<(), E> {
        self.string(v)
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        self.0.extend_from_slice(b"null");
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        self.0.extend_from_slice(b"null");
        Ok(())
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.0.push(b'[');
        let mut first = true;
        loop {
            let at = self.0.len();
            if !first {
                self.0.push(b',');
            }
            if seq.next_element_seed(Transcode(&mut *self.0))?.is_none() {
                self.0.truncate(at);
                break;
            }
            first = false;
        }
        self.0.push(b']');
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let at = self.0.len();
        self.0.push(b'{');
        let mut first = true;
        loop {
            let key_at = self.0.len();
            if !first {
                self.0.push(b',');
            }
            let Some(number) = map.next_key_seed(Key {
                out: &mut *self.0,
                first,
            })?
            else {
                self.0.truncate(key_at);
                break;
            };
            if number {
                // A number: its text, checked as `Value` checks it.
                self.0.truncate(at);
                let text: String = map.next_value()?;
                let n: serde_json::Number = text.parse().map_err(serde::de::Error::custom)?;
                self.0.extend_from_slice(n.to_string().as_bytes());
                return Ok(());
            }
            self.0.push(b':');
            map.next_value_seed(Transcode(&mut *self.0))?;
            first = false;
        }
        self.0.push(b'}');
        Ok(())
    }
}

/// An object's key, written as a JSON string; `true` for the first key when it marks a number.
struct Key<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
}

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = bool;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a string key")
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<bool, E> {
        if self.first && v == NUMBER_TOKEN {
            return Ok(true);
        }
        serde_json::to_writer(&mut *self.out, v).map_err(E::custom)?;
        Ok(false)
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
        super::header(req, poem::http::header::CONTENT_TYPE).unwrap_or(""),
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
