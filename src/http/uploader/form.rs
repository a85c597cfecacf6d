//! The uploader's multipart form as the API document describes it (`Upload`, its file field)
//! and as a handler receives it: the form streamed into the upload's scratch files.

use crate::http::api::state as app_state;
use crate::http::error::ApiError;
use crate::uploader::intake::{self, Received};
use poem::{Request, RequestBody};
use poem_openapi::registry::{MetaMediaType, MetaRequest, MetaSchema, MetaSchemaRef, Registry};
use poem_openapi::types::{Example, ParseError, ParseFromJSON, ParseResult, ToJSON, Type};
use poem_openapi::{ApiExtractor, ApiExtractorType, ExtractParamOptions, Object};

/// The uploader's form. `entity` names one of the entities in force.
#[derive(Object)]
#[oai(rename = "Upload", example, skip_serializing_if_is_none)]
struct UploadForm {
    /// the entity the rows apply to
    entity: String,
    /// the CSV file, or a ZIP bundle of a CSV with `pages.pdf` or a `res/` folder
    csvfile: FileField,
    /// 1/yes/true to run in the background and answer 202 at once; 0/no/false (the default)
    /// not to
    #[oai(validator(
        pattern = r"^\s*([01]|[Yy][Ee][Ss]|[Nn][Oo]|[Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee])?\s*$"
    ))]
    bgrs: Option<String>,
    /// the file's character encoding (a WHATWG label such as utf-8, windows-1252,
    /// iso-8859-1); default utf-8
    encoding: Option<String>,
    /// 1/yes/true to stream one line per row as it runs instead of the result file;
    /// 0/no/false (the default) not to
    #[oai(validator(
        pattern = r"^\s*([01]|[Yy][Ee][Ss]|[Nn][Oo]|[Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee])?\s*$"
    ))]
    show_progress: Option<String>,
    /// 1/yes/true to answer with the result file's content; 0/no/false (the default) not to
    #[oai(validator(
        pattern = r"^\s*([01]|[Yy][Ee][Ss]|[Nn][Oo]|[Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee])?\s*$"
    ))]
    get_content: Option<String>,
    /// the campaign a ZIP bundle's pages belong to; empty or absent: a new campaign
    #[oai(validator(pattern = r"^\s*([+-]?[0-9]+)?\s*$"))]
    campaign_id: Option<String>,
    /// 1/yes/true for a dry run: every row is checked and executed as for real inside a
    /// transaction that is then rolled back; the result says what would happen (no ids for
    /// rows that would create) and nothing is kept. 0/no/false (the default) to apply
    #[oai(validator(
        pattern = r"^\s*([01]|[Yy][Ee][Ss]|[Nn][Oo]|[Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee])?\s*$"
    ))]
    dry_run: Option<String>,
    /// 1/yes/true to apply the whole file in one transaction or nothing of it: when a row
    /// fails, no row is applied, and every other row's res says so. 0/no/false (the default):
    /// each row applies on its own
    #[oai(validator(
        pattern = r"^\s*([01]|[Yy][Ee][Ss]|[Nn][Oo]|[Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee])?\s*$"
    ))]
    atomic: Option<String>,
}

impl Example for UploadForm {
    fn example() -> Self {
        UploadForm {
            entity: "campaigns".into(),
            csvfile: FileField("op,name\nc,spring catalogue\n".into()),
            bgrs: Some("1".into()),
            encoding: None,
            show_progress: None,
            get_content: None,
            campaign_id: None,
            dry_run: None,
            atomic: None,
        }
    }
}

/// A file field of a form: bytes.
struct FileField(String);

impl Type for FileField {
    const IS_REQUIRED: bool = true;
    type RawValueType = Self;
    type RawElementValueType = Self;

    fn name() -> std::borrow::Cow<'static, str> {
        "string_binary".into()
    }

    fn schema_ref() -> MetaSchemaRef {
        MetaSchemaRef::Inline(Box::new(MetaSchema::new_with_format("string", "binary")))
    }

    fn as_raw_value(&self) -> Option<&Self> {
        Some(self)
    }

    fn raw_element_iter<'a>(&'a self) -> Box<dyn Iterator<Item = &'a Self> + 'a> {
        Box::new(std::iter::once(self))
    }
}

impl ParseFromJSON for FileField {
    fn parse_from_json(value: Option<serde_json::Value>) -> ParseResult<Self> {
        match value {
            Some(serde_json::Value::String(s)) => Ok(FileField(s)),
            v => Err(ParseError::expected_type(v.unwrap_or_default())),
        }
    }
}

impl ToJSON for FileField {
    fn to_json(&self) -> Option<serde_json::Value> {
        Some(serde_json::Value::String(self.0.clone()))
    }
}

/// The uploader's form as received: its fields, and the file streamed to a scratch file
/// within the size limits.
pub(super) struct Form(pub(super) Received);

impl<'a> ApiExtractor<'a> for Form {
    const TYPES: &'static [ApiExtractorType] = &[ApiExtractorType::RequestObject];
    type ParamType = ();
    type ParamRawType = ();

    fn register(registry: &mut Registry) {
        UploadForm::register(registry);
    }

    fn request_meta() -> Option<MetaRequest> {
        Some(MetaRequest {
            description: None,
            content: vec![MetaMediaType {
                content_type: "multipart/form-data",
                schema: MetaSchemaRef::Reference("Upload".into()),
            }],
            required: true,
        })
    }

    async fn from_request(
        req: &'a Request,
        body: &mut RequestBody,
        _: ExtractParamOptions<()>,
    ) -> poem::Result<Self> {
        let state = app_state(req);
        let ctype = crate::http::header(req, poem::http::header::CONTENT_TYPE).unwrap_or("");
        if !ctype
            .to_ascii_lowercase()
            .starts_with("multipart/form-data")
        {
            return Err(ApiError::UnsupportedMediaType(
                "the uploader takes multipart/form-data".into(),
            )
            .into());
        }
        // Read before the body, so that a malformed query string stores nothing.
        let query = crate::http::body::query_pairs(req)?;
        let queried = query
            .iter()
            .find(|(k, _)| k == "encoding")
            .map(|(_, v)| v.clone());
        // The file is checked as it arrives in the encoding named so far; the form's own
        // field wins over the query string's.
        let early = move |fields: &std::collections::HashMap<String, String>| {
            let named = fields.get("encoding").or(queried.as_ref());
            super::encoding_of(named.map(String::as_str)).ok()
        };
        let mut received = intake::receive(
            ctype,
            body.take()?,
            &intake::work_dir(&state.settings.data_dir),
            "csvfile",
            intake::FormLimits {
                file: state.settings.max_upload_bytes,
                field: state.settings.max_field_bytes as u64,
                record: state.settings.max_body_bytes,
            },
            early,
        )
        .await
        .map_err(ApiError::from)?;
        with_query(&mut received, query)?;
        Ok(Form(received))
    }
}

/// The form's text fields that may come in the query string instead (`?bgrs=1`, as on every
/// other POST).
const QUERY_FIELDS: [&str; 8] = [
    "entity",
    "bgrs",
    "encoding",
    "show_progress",
    "get_content",
    "campaign_id",
    "dry_run",
    "atomic",
];

/// Adds to `received` the form's text fields that `query` gives and the form does not: the
/// form's own value wins, as a body's does over the query string elsewhere. A field named
/// twice in the query is refused, as one named twice in the form is; other query parameters
/// are not the uploader's and are left alone.
fn with_query(received: &mut Received, query: Vec<(String, String)>) -> poem::Result<()> {
    let mut seen = Vec::new();
    for (name, value) in query {
        if !QUERY_FIELDS.contains(&name.as_str()) {
            continue;
        }
        if seen.contains(&name) {
            return Err(ApiError::BadRequest(format!(
                "the query string holds `{name}` more than once"
            ))
            .into());
        }
        seen.push(name.clone());
        received.fields.entry(name).or_insert(value);
    }
    Ok(())
}
