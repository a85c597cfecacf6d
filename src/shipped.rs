//! The shipped entities and an example upload, embedded in the binary: served when there is no
//! entities directory, and written out by `entiserve init`.

use std::path::{Path, PathBuf};

/// The shipped entity files, by file name.
pub const ENTITIES: [(&str, &str); 4] = [
    ("assets.yaml", include_str!("../entities/assets.yaml")),
    ("campaigns.yaml", include_str!("../entities/campaigns.yaml")),
    ("markers.yaml", include_str!("../entities/markers.yaml")),
    ("users.yaml", include_str!("../entities/users.yaml")),
];

/// The JSON Schema of the entity files, next to them: the shipped files name it on their
/// first line, so editors with yaml-language-server check them as they are typed.
pub const SCHEMA_FILE: &str = "entity.schema.json";

/// An upload to start from: a few campaigns to create.
pub const EXAMPLE_UPLOAD: (&str, &str) = (
    "campaigns.csv",
    include_str!("../examples/uploads/campaigns.csv"),
);

/// The shipped entity files as `(path, text)` sources for the compiler; the paths name them
/// as built in.
pub fn sources() -> Vec<(PathBuf, String)> {
    ENTITIES
        .iter()
        .map(|(name, text)| (Path::new("(built in)").join(name), text.to_string()))
        .collect()
}

/// Writes the shipped entities and their JSON Schema into `dir/entities` and the example upload into
/// `dir/uploads`, creating the folders; refuses (before writing anything) when one of the
/// files exists. Returns the files written.
pub fn init(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let entities = dir.join("entities");
    let uploads = dir.join("uploads");
    let schema = format!(
        "{:#}\n",
        crate::plugins::Registry::builtin().entity_schema()
    );
    let files: Vec<(PathBuf, &str)> = ENTITIES
        .iter()
        .map(|(name, text)| (entities.join(name), *text))
        .chain(std::iter::once((
            entities.join(SCHEMA_FILE),
            schema.as_str(),
        )))
        .chain(std::iter::once((
            uploads.join(EXAMPLE_UPLOAD.0),
            EXAMPLE_UPLOAD.1,
        )))
        .collect();
    if let Some((p, _)) = files.iter().find(|(p, _)| p.exists()) {
        return Err(format!("{} exists: nothing written", p.display()));
    }
    for d in [&entities, &uploads] {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    for (p, text) in &files {
        std::fs::write(p, text).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(files.into_iter().map(|(p, _)| p).collect())
}
