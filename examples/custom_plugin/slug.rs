//! A plugin written outside the server: `slug` fills a field with a URL-friendly form of
//! another field on every create and update that does not set it itself.
//!
//! Entity YAML:
//! ```yaml
//! plugins:
//!   - slug: { from: title, to: slug }
//! ```

use entiserve::engine::{Call, CallError, Caller, Op};
use entiserve::plugins::Plugin;
use serde_json::{Value as Json, json};

pub struct Slug;

/// `"Hello, World!"` -> `"hello-world"`.
pub fn slugify(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars().flat_map(char::to_lowercase) {
        if c.is_alphanumeric() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_string()
}

impl Plugin for Slug {
    fn name(&self) -> &'static str {
        "slug"
    }

    /// Editors check an entity's `slug` settings against this (see `entity-schema` in
    /// main.rs).
    fn settings_schema(&self) -> Json {
        let field = |about: &str, default: &str| {
            json!({
                "type": "string",
                "pattern": entiserve::schema::format::IDENTIFIER,
                "default": default,
                "description": about
            })
        };
        json!({
            "type": "object",
            "properties": {
                "from": field("the field the slug is made from", "title"),
                "to": field("the field the slug is written to", "slug")
            },
            "additionalProperties": false
        })
    }

    fn before_call(
        &self,
        settings: &Json,
        _caller: &Caller,
        call: &mut Call,
    ) -> Result<(), CallError> {
        if call.op == Op::Delete {
            return Ok(());
        }
        let from = settings
            .get("from")
            .and_then(Json::as_str)
            .unwrap_or("title");
        let to = settings.get("to").and_then(Json::as_str).unwrap_or("slug");
        if call.params.contains_key(to) {
            return Ok(());
        }
        if let Some(Json::String(source)) = call.params.get(from) {
            let slug = slugify(source);
            call.params.insert(to.to_string(), Json::String(slug));
        }
        Ok(())
    }
}
