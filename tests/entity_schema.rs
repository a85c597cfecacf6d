//! `entiserve entity-schema`: the JSON Schema editors check entity files with. Every entity
//! file of the repository fits it, the copy next to the shipped entities is current, and the
//! usual mistakes are caught by it as they are by `check`.

use serde_json::{Value as Json, json};
use std::path::Path;
use std::process::Command;

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

/// The entity files under `dir` (relative to the repository).
fn entity_files(dir: &str) -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "entity files in {}", dir.display());
    files
}

#[test]
fn every_entity_file_of_the_repository_fits_the_schema() {
    let schema = schema();
    let v = jsonschema::validator_for(&schema).expect("a valid JSON Schema");
    for dir in [
        "entities",
        "examples/entities",
        "clients/lint/entities",
        "tests/fixtures/parity",
    ] {
        for f in entity_files(dir) {
            let doc = yaml_as_json(&std::fs::read_to_string(&f).unwrap());
            let errors: Vec<String> = v.iter_errors(&doc).map(|e| e.to_string()).collect();
            assert!(errors.is_empty(), "{}: {errors:?}", f.display());
        }
    }
    // The custom-plugin example fits the schema of a build that registers its plugin.
    let mut with_slug = schema.clone();
    let plugin_enum = with_slug
        .pointer_mut("/properties/plugins/items/oneOf/0/enum")
        .and_then(Json::as_array_mut)
        .expect("plugin names");
    plugin_enum.push(json!("slug"));
    let plugin_names = plugin_enum.clone();
    *with_slug
        .pointer_mut("/properties/plugins/items/oneOf/1/propertyNames/enum")
        .unwrap() = Json::Array(plugin_names);
    let v = jsonschema::validator_for(&with_slug).unwrap();
    for f in entity_files("examples/custom_plugin/entities") {
        let doc = yaml_as_json(&std::fs::read_to_string(&f).unwrap());
        assert!(v.is_valid(&doc), "{}", f.display());
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
            "access: { read: root }\nfields: {}\n",
            "must be `user` or `admin`",
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
