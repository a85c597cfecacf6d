//! `res_links`: a bundle's `res/` folder is stored as it is in the file storage, under a
//! prefix of its own; in objects the upload creates, every `res/<path>` in a text value,
//! whole or inside text, becomes the stored file's URL. A link to a file the archive lacks
//! fails that row. The files count against the upload's store budget before any is stored.
//!
//! Settings: `fields` (list of fields to rewrite; default every string value).

use super::UploadError;
use super::{Archive, Plugin};
use crate::engine::{Call, CallError, Op};
use serde_json::{Value as Json, json};

pub struct ResLinks;

#[async_trait::async_trait]
impl Plugin for ResLinks {
    fn name(&self) -> &'static str {
        "res_links"
    }

    fn settings_schema(&self) -> Json {
        json!({
            "type": "object",
            "properties": {
                "fields": {
                    "type": "array",
                    "items": {"type": "string", "pattern": crate::schema::format::IDENTIFIER},
                    "uniqueItems": true,
                    "description": "the fields whose `res/<path>` links are rewritten; default: every text value"
                }
            },
            "additionalProperties": false
        })
    }

    async fn on_archive(&self, _settings: &Json, a: &mut Archive<'_>) -> Result<(), UploadError> {
        let Some(res) = a.res.take() else {
            return Ok(());
        };
        for (_, file) in &res {
            let len = std::fs::metadata(file)
                .map_err(|e| UploadError::Io(e.to_string()))?
                .len();
            a.budget.take(len)?;
        }
        let prefix = format!("{}/{}/res", a.entity, a.bundle_id);
        a.stored.push(format!("{}/{}", a.entity, a.bundle_id));
        // Path below res/ -> the stored file's URL, looked up by every row.
        let mut urls = serde_json::Map::with_capacity(res.len());
        for (rel, file) in &res {
            let key = format!("{prefix}/{rel}");
            if !crate::files::valid_key(&key) {
                return Err(UploadError::BadRequest(format!(
                    "the ZIP archive cannot be used: `res/{rel}` is not a usable file name"
                )));
            }
            a.files
                .put(&key, file)
                .await
                .map_err(|e| UploadError::Io(e.to_string()))?;
            urls.insert(rel.clone(), Json::String(crate::files::url_of(&key)));
        }
        a.notes.push(format!("res/: {} files stored", urls.len()));
        a.state.insert(self.name().into(), json!({ "urls": urls }));
        Ok(())
    }

    fn on_row(&self, settings: &Json, state: &Json, call: &mut Call) -> Result<(), CallError> {
        if !matches!(call.op, Op::Create | Op::Save) || state.is_null() {
            return Ok(());
        }
        let urls = &state["urls"];
        let only = settings.get("fields").and_then(Json::as_array);
        for (field, value) in call.params.iter_mut() {
            if only.is_some_and(|o| !o.iter().any(|f| f.as_str() == Some(field.as_str()))) {
                continue;
            }
            let Json::String(text) = value else { continue };
            if !text.contains("res/") {
                continue;
            }
            let new = rewrite(text, |path| {
                urls.get(path).and_then(Json::as_str).map(str::to_string)
            })
            .map_err(|missing| {
                CallError::invalid_field(
                    field,
                    format!("`res/{missing}` is not in the archive's res/ folder"),
                )
            })?;
            *text = new;
        }
        Ok(())
    }
}

/// Characters that end a `res/` path inside text.
fn ends_path(c: char) -> bool {
    c.is_whitespace() || "\"'<>()[]{},;|`".contains(c)
}

/// Replaces every `res/<path>` of `text` with `url(path)`; Err(path) for a path `url` does
/// not know. A path may end in punctuation (`.`, `:`, `!`, `?`) that belongs to the text.
pub fn rewrite(text: &str, url: impl Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("res/") {
        let starts_word = rest[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || "_-./%".contains(c)));
        out.push_str(&rest[..at]);
        let after = &rest[at + 4..];
        let len = after.find(ends_path).unwrap_or(after.len());
        let path = &after[..len];
        if !starts_word || path.is_empty() {
            out.push_str("res/");
            rest = after;
            continue;
        }
        // Trailing punctuation belongs to the sentence unless the file has it.
        let mut cut = path;
        let found = loop {
            if let Some(u) = url(cut) {
                break Some(u);
            }
            match cut.strip_suffix(['.', ':', '!', '?']) {
                Some(shorter) if !shorter.is_empty() => cut = shorter,
                _ => break None,
            }
        };
        match found {
            Some(u) => {
                out.push_str(&u);
                rest = &after[cut.len()..];
            }
            None => return Err(path.to_string()),
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::rewrite;

    fn known(p: &str) -> Option<String> {
        ["a.png", "img/b c.jpg", "v.mp4"]
            .contains(&p)
            .then(|| format!("/u/{p}"))
    }

    #[test]
    fn rewrites_whole_values_and_links_inside_text() {
        assert_eq!(rewrite("res/a.png", known).unwrap(), "/u/a.png");
        assert_eq!(
            rewrite("see res/v.mp4. And (res/a.png)", known).unwrap(),
            "see /u/v.mp4. And (/u/a.png)"
        );
        assert_eq!(
            rewrite("<img src=\"res/a.png\">", known).unwrap(),
            "<img src=\"/u/a.png\">"
        );
        assert_eq!(
            rewrite("no links, pres/a.png", known).unwrap(),
            "no links, pres/a.png"
        );
        assert_eq!(rewrite("res/missing.png", known), Err("missing.png".into()));
    }
}
