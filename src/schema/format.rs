//! The entity file format as data: its keys, the field types and what each means. The reader
//! ([`super::raw`]) takes its known names from here, suggests the nearest one for a misspelt
//! name, and `entiserve entity-schema` prints the JSON Schema built from the same tables, so
//! editors check the YAML by the rules the server applies.

use serde_json::{Map, Value as Json, json};

/// One key of a mapping in an entity file.
pub struct Key {
    pub name: &'static str,
    pub about: &'static str,
}

const fn key(name: &'static str, about: &'static str) -> Key {
    Key { name, about }
}

/// The keys of an entity file.
pub const ENTITY_KEYS: &[Key] = &[
    key(
        "name",
        "the entity's name: its route and table; defaults to the file's name",
    ),
    key("description", "what the entity holds, for the API document"),
    key(
        "access",
        "who may read and write: { read: user|admin, write: user|admin, own: [read, update] }",
    ),
    key("fields", "the fields, in order: name -> definition"),
    key(
        "plugins",
        "hooks the entity uses: a name, or `name: { settings }`",
    ),
    key(
        "hooks",
        "a JavaScript file of record hooks (beforeCreate, afterUpdate, ...), relative to this file",
    ),
    key(
        "allow_destructive",
        "true to allow a change that gives stored data up",
    ),
    key(
        "renamed_from",
        "the entity's previous name: its table and rows are kept under the new one",
    ),
    key(
        "key",
        "the natural key: a field, or a list of fields, unique together; objects can be named by it instead of by id (CSV `u`, `d`, `s` rows, PUT batch items, `POST ?upsert=1`)",
    ),
];

/// The keys of `access`.
pub const ACCESS_KEYS: &[Key] = &[
    key(
        "list",
        "which rows a caller sees in lists, counts, exports and live changes: `public`, roles such as [user, editor], or an expression such as `owner_id = @caller.id`",
    ),
    key(
        "view",
        "which rows a caller may read by id (others answer 404): `public`, roles, or an expression",
    ),
    key(
        "create",
        "who may create which rows: `public`, roles, or an expression over the new values (`@new.<field>` or plain field names)",
    ),
    key(
        "update",
        "which rows a caller may change (403 when they may view it but not change it): roles, or an expression; `@new.<field>` is the value after the change",
    ),
    key(
        "delete",
        "which rows a caller may delete: roles, or an expression",
    ),
    key(
        "read",
        "shorthand for `list` and `view`: a role (with admin), a list of roles, or an expression",
    ),
    key("write", "shorthand for `create`, `update` and `delete`"),
    key(
        "own",
        "the user's own record besides what `read` and `update` admit (users): read, update",
    ),
];

/// The keys of a field definition.
pub const FIELD_KEYS: &[Key] = &[
    key("type", "the field's type"),
    key("required", "true when every object must have a value"),
    key("default", "the value a create without one gets"),
    key("unique", "true when no two objects may share a value"),
    key(
        "index",
        "true to index the column, for lists that filter or sort by it",
    ),
    key("max_length", "the most characters (string and text)"),
    key("values", "the allowed values (enum)"),
    key("entity", "the entity referenced (reference)"),
    key(
        "secret",
        "true to store the value hashed and never return it (string)",
    ),
    key(
        "write",
        "the role that may set the field (with admin): a value of users' `role`",
    ),
    key("description", "what the field holds, for the API document"),
    key(
        "renamed_from",
        "the field's previous name: its column and values are kept under the new one",
    ),
];

/// The field types and what their values are.
pub const TYPES: &[(&str, &str)] = &[
    ("string", "text on one line"),
    ("text", "longer text"),
    ("integer", "a whole number"),
    ("decimal", "a number such as 12.50"),
    ("boolean", "true or false"),
    ("date", "a date such as 2026-11-25"),
    ("datetime", "a date and time such as 2026-11-25 14:30:00"),
    ("enum", "one of the listed `values`"),
    ("reference", "the id of an object of `entity`"),
];

/// The known name nearest to `word`, when one is close enough to be a likely misspelling.
pub fn nearest<'a>(word: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let length = word.chars().count();
    let limit = match length {
        0..=2 => 1,
        3..=5 => 2,
        _ => 3,
    };
    // Names whose lengths differ by more than the limit are further apart than it: a client's
    // word of a million characters is compared with none (the distance costs both lengths
    // multiplied).
    known
        .into_iter()
        .filter(|k| *k != word && k.chars().count().abs_diff(length) <= limit)
        .map(|k| (strsim::damerau_levenshtein(word, k), k))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Most characters of a client's word that a message shows.
const SHOWN_CHARS: usize = 40;

/// A client's word as a message shows it: its first [`SHOWN_CHARS`] characters and `...`
/// when it is longer (an id or a column name of a megabyte is not echoed whole).
pub fn shown(word: &str) -> std::borrow::Cow<'_, str> {
    match word.char_indices().nth(SHOWN_CHARS) {
        None => word.into(),
        Some((end, _)) => format!("{}...", &word[..end]).into(),
    }
}

/// `unknown key `x``, with the nearest known key when there is one.
pub fn unknown(what: &str, word: &str, known: &[Key]) -> String {
    with_hint(
        format!("unknown {what} `{word}`"),
        word,
        known.iter().map(|k| k.name),
    )
}

/// `message`, followed by "did you mean `y`?" when a known name is near `word`.
pub fn with_hint<'a>(
    message: String,
    word: &str,
    known: impl IntoIterator<Item = &'a str>,
) -> String {
    match nearest(word, known) {
        Some(k) => format!("{message}: did you mean `{k}`?"),
        None => message,
    }
}

fn described(about: &str, schema: Json) -> Json {
    let mut s = schema;
    s["description"] = json!(about);
    s
}

fn properties(keys: &[Key], schema_of: impl Fn(&str) -> Json) -> Map<String, Json> {
    keys.iter()
        .map(|k| (k.name.to_string(), described(k.about, schema_of(k.name))))
        .collect()
}

/// The pattern of a name in entity files (entities, fields), for JSON Schemas.
pub const IDENTIFIER: &str = "^[a-z][a-z0-9_]{0,62}$";

/// The JSON Schema (2020-12) of an entity file. `plugins` are the plugins this build knows,
/// each with the JSON Schema of its settings.
pub fn json_schema(plugins: &[(&str, Json)]) -> Json {
    let rule = json!({"anyOf": [
        {"type": "string", "minLength": 1},
        {"type": "array", "items": {"type": "string", "pattern": IDENTIFIER}, "uniqueItems": true}
    ]});
    let access = properties(ACCESS_KEYS, |k| match k {
        "own" => {
            json!({"type": "array", "items": {"enum": ["read", "update"]}, "uniqueItems": true})
        }
        _ => rule.clone(),
    });
    let types: Vec<&str> = TYPES.iter().map(|(t, _)| *t).collect();
    let type_about: Vec<String> = TYPES.iter().map(|(t, a)| format!("{t}: {a}")).collect();
    let field = properties(FIELD_KEYS, |k| match k {
        "type" => json!({"enum": types, "markdownDescription": type_about.join("\n\n")}),
        "required" | "unique" | "index" | "secret" => json!({"type": "boolean"}),
        "max_length" => json!({"type": "integer", "minimum": 1}),
        "values" => {
            json!({"type": "array", "minItems": 1, "items": {"type": ["string", "number", "boolean"]}})
        }
        "entity" => json!({"type": "string", "pattern": IDENTIFIER}),
        "write" => json!({"type": "string", "pattern": IDENTIFIER}),
        "description" => json!({"type": "string"}),
        "renamed_from" => json!({"type": "string", "pattern": IDENTIFIER}),
        _ => json!({}),
    });
    let only_for = |key: &str, types: &[&str]| {
        json!({
            "if": {"required": [key]},
            "then": {"properties": {"type": {"enum": types}}}
        })
    };
    let needs = |ty: &str, key: &str| {
        json!({
            "if": {"properties": {"type": {"const": ty}}, "required": ["type"]},
            "then": {"required": [key]}
        })
    };
    let names: Vec<&str> = plugins.iter().map(|(name, _)| *name).collect();
    let plugin = json!({"enum": names});
    let settings: Map<String, Json> = plugins
        .iter()
        .map(|(name, schema)| (name.to_string(), schema.clone()))
        .collect();
    let entity = properties(ENTITY_KEYS, |k| match k {
        "name" => json!({"type": "string", "pattern": IDENTIFIER}),
        "description" => json!({"type": "string"}),
        "access" => json!({"type": "object", "properties": access, "additionalProperties": false}),
        "fields" => json!({
            "type": "object",
            "propertyNames": {"pattern": IDENTIFIER},
            "additionalProperties": {"$ref": "#/$defs/field"}
        }),
        "plugins" => json!({
            "type": "array",
            "items": {"oneOf": [
                plugin.clone(),
                {"type": "object", "minProperties": 1, "maxProperties": 1, "propertyNames": plugin.clone(),
                 "properties": settings}
            ]}
        }),
        "hooks" => json!({"type": "string", "pattern": "\\.js$"}),
        "allow_destructive" => json!({"type": "boolean"}),
        "renamed_from" => json!({"type": "string", "pattern": IDENTIFIER}),
        "key" => json!({"oneOf": [
            {"type": "string", "pattern": IDENTIFIER},
            {"type": "array", "minItems": 1, "uniqueItems": true,
             "items": {"type": "string", "pattern": IDENTIFIER}}
        ]}),
        _ => json!({}),
    });
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "entiserve entity",
        "description": "One entity of entiserve: its fields, who may read and write it, and the plugins it uses.",
        "type": "object",
        "properties": entity,
        "required": ["fields"],
        "additionalProperties": false,
        "$defs": {
            "field": {
                "type": "object",
                "properties": field,
                "required": ["type"],
                "additionalProperties": false,
                "allOf": [
                    needs("enum", "values"),
                    needs("reference", "entity"),
                    only_for("values", &["enum"]),
                    only_for("entity", &["reference"]),
                    only_for("max_length", &["string", "text"]),
                    only_for("secret", &["string"]),
                ]
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn misspellings_find_the_name_meant() {
        let keys = FIELD_KEYS.iter().map(|k| k.name);
        assert_eq!(nearest("maxlength", keys), Some("max_length"));
        assert_eq!(nearest("nme", ["name", "price"]), Some("name"));
        assert_eq!(nearest("strnig", TYPES.iter().map(|t| t.0)), Some("string"));
        assert_eq!(nearest("colour", ["name", "price"]), None);
        // Three letters more or less is still a misspelling; a fourth is not.
        assert_eq!(nearest("descr", ["description"]), None);
        assert_eq!(
            nearest("descriptionxyz", ["description"]),
            Some("description")
        );
        assert_eq!(nearest("descriptionwxyz", ["description"]), None);
        assert_eq!(nearest(&"n".repeat(1_000_000), ["name", "n"]), None);
    }

    #[test]
    fn long_words_are_shown_cut() {
        assert_eq!(shown("name"), "name");
        let forty = "é".repeat(40);
        assert_eq!(shown(&forty), forty);
        assert_eq!(shown(&"é".repeat(41)), format!("{forty}..."));
    }
}
