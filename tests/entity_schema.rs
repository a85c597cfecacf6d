//! `entiserve entity-schema`: the JSON Schema editors check entity files with. Every entity
//! file of the repository fits it (those under `examples/` included; the custom-plugin example
//! fits the schema of the build that registers its plugin), every plugin's settings are
//! checked against the schema the plugin declares, the copy next to the shipped entities is
//! current, and the usual mistakes are caught by it as they are by `check`.

#[path = "../examples/custom_plugin/slug.rs"]
mod slug;

use entiserve::plugins::Registry;
use serde_json::Value as Json;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

fn schema() -> Json {
    let out = Command::new(env!("CARGO_BIN_EXE_entiserve"))
        .arg("entity-schema")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

fn yaml_as_json(text: &str) -> Json {
    let y: serde_yaml::Value = serde_yaml::from_str(text).unwrap();
    serde_json::to_value(y).unwrap()
}

/// The entity files under `dir` (relative to the repository), in its subfolders too.
fn entity_files(dir: &str) -> Vec<std::path::PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                out.push(path);
            }
        }
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut files = Vec::new();
    walk(&dir, &mut files);
    files.sort();
    assert!(!files.is_empty(), "entity files in {}", dir.display());
    files
}

/// The schema of the custom-plugin example's build (`cargo run --example custom_plugin --
/// entity-schema`): the built-in plugins and `slug`.
fn schema_with_slug() -> Json {
    Registry::builtin()
        .with(Arc::new(slug::Slug))
        .entity_schema()
}

/// The errors of `file` against `validator`.
fn errors_of(validator: &jsonschema::Validator, file: &Path) -> Vec<String> {
    let doc = yaml_as_json(&std::fs::read_to_string(file).unwrap());
    validator.iter_errors(&doc).map(|e| e.to_string()).collect()
}

#[test]
fn every_entity_file_of_the_repository_fits_the_schema() {
    let builtin = jsonschema::validator_for(&schema()).expect("a valid JSON Schema");
    let with_slug = jsonschema::validator_for(&schema_with_slug()).expect("a valid JSON Schema");
    let custom = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/custom_plugin");
    for dir in [
        "entities",
        "examples",
        "clients/lint/entities",
        "tests/fixtures/parity",
    ] {
        for f in entity_files(dir) {
            // The custom-plugin example fits the schema of the build that registers its plugin.
            let v = if f.starts_with(&custom) {
                &with_slug
            } else {
                &builtin
            };
            let errors = errors_of(v, &f);
            assert!(errors.is_empty(), "{}: {errors:?}", f.display());
        }
    }
    assert!(
        entity_files("examples").contains(&custom.join("entities/articles.yaml")),
        "the examples' entity files include the custom plugin's"
    );
}

#[test]
fn the_schema_holds_every_plugins_settings() {
    // `entity-schema` prints the schema of the built-in plugins, their settings included.
    let printed = schema();
    assert_eq!(printed, Registry::builtin().entity_schema());
    let settings = "/properties/plugins/items/oneOf/1/properties";
    let builtin = printed.pointer(settings).expect("the plugins' settings");
    for name in ["pdf_markers", "res_links"] {
        assert_eq!(builtin[name]["type"], "object", "{name}: {builtin}");
    }
    assert!(builtin.get("slug").is_none());
    // A registry with a custom plugin adds its settings' schema.
    let with_slug = schema_with_slug();
    assert_eq!(
        with_slug.pointer(&format!("{settings}/slug")),
        Some(&entiserve::plugins::Plugin::settings_schema(&slug::Slug))
    );
    let articles =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/custom_plugin/entities/articles.yaml");
    let v = jsonschema::validator_for(&with_slug).unwrap();
    assert_eq!(errors_of(&v, &articles), Vec::<String>::new());
    let builtin = jsonschema::validator_for(&printed).unwrap();
    assert!(
        !errors_of(&builtin, &articles).is_empty(),
        "without the plugin, `slug` is unknown"
    );
    // Settings are checked against the plugin's schema: a misspelt or mistyped setting is an
    // error, naming a plugin alone is not.
    let fields = "fields:\n  title: { type: string }\n";
    for (plugins, valid) in [
        ("  - slug: { from: title, to: slug }\n", true),
        ("  - slug\n", true),
        ("  - slug: { form: title }\n", false),
        ("  - slug: { from: 3 }\n", false),
        (
            "  - pdf_markers: { markers: markers, page_field: marker_id }\n",
            true,
        ),
        ("  - pdf_markers: { page_feild: marker_id }\n", false),
        ("  - res_links: { fields: [title] }\n", true),
        ("  - res_links: { fields: title }\n", false),
    ] {
        let doc = yaml_as_json(&format!("{fields}plugins:\n{plugins}"));
        assert_eq!(v.is_valid(&doc), valid, "{plugins}");
    }
}

#[test]
fn the_schema_next_to_the_shipped_entities_is_current() {
    let kept: Json = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("entities/entity.schema.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        kept,
        schema(),
        "entities/entity.schema.json is `entiserve entity-schema`'s output"
    );
    for f in entity_files("entities") {
        let first = std::fs::read_to_string(&f).unwrap();
        assert!(
            first.starts_with("# yaml-language-server: $schema=entity.schema.json\n"),
            "{} names the schema on its first line",
            f.display()
        );
    }
}

#[test]
fn known_mistakes_are_rejected_by_the_schema_and_by_check() {
    let v = jsonschema::validator_for(&schema()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let good = "fields:\n  name: { type: string, max_length: 5 }\n";
    assert!(v.is_valid(&yaml_as_json(good)));
    for (mistake, check_says) in [
        (
            "fields:\n  name: { type: string, maxlength: 5 }\n",
            "did you mean `max_length`?",
        ),
        (
            "fields:\n  name: { type: strnig }\n",
            "did you mean `string`?",
        ),
        (
            "fields:\n  size: { type: enum }\n",
            "non-empty list `values`",
        ),
        ("fields:\n  owner: { type: reference }\n", "needs `entity:"),
        (
            "fields:\n  n: { type: integer, max_length: 5 }\n",
            "only applies to string",
        ),
        (
            "fields:\n  n: { type: integer, secret: true }\n",
            "only string fields",
        ),
        (
            "fields:\n  n: { type: string, required: yes please }\n",
            "must be true or false",
        ),
        (
            "acess: { read: admin }\nfields: {}\n",
            "did you mean `access`?",
        ),
        (
            "access: { read: 5 }\nfields: {}\n",
            "must be `public`, a role, a list of roles or an expression",
        ),
        (
            "plugins: [pdf_marker]\nfields: {}\n",
            "did you mean `pdf_markers`?",
        ),
        ("name: Bad-Name\nfields: {}\n", "lowercase letters"),
        ("fields:\n  Name: { type: string }\n", "lowercase letters"),
    ] {
        assert!(
            !v.is_valid(&yaml_as_json(mistake)),
            "the schema rejects {mistake:?}"
        );
        let entities = dir.path().join("entities");
        let _ = std::fs::remove_dir_all(&entities);
        std::fs::create_dir_all(&entities).unwrap();
        std::fs::write(entities.join("things.yaml"), mistake).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_entiserve"))
            .arg("check")
            .arg("--entities")
            .arg(&entities)
            .output()
            .unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(1), "check refuses {mistake:?}");
        assert!(
            said.contains(check_says),
            "check on {mistake:?} says {check_says:?}: {said}"
        );
    }
}
