//! The shipped entities and an example upload, embedded in the binary: served when there is no
//! entities directory, and written out by `entiserve init` with an example of JavaScript hooks
//! (campaigns.js, and the audit entity it writes to).

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

/// The example hook file `init` writes next to the entities: campaigns' hooks, which trim a
/// campaign's name and keep an audit trail in [`AUDIT_ENTITY`].
pub const EXAMPLE_HOOKS: (&str, &str) = (
    "campaigns.js",
    include_str!("../examples/hooks/campaigns.js"),
);

/// The entity [`EXAMPLE_HOOKS`] writes its audit rows to, which `init` writes too.
pub const AUDIT_ENTITY: (&str, &str) = ("audit.yaml", include_str!("../examples/hooks/audit.yaml"));

/// The line `init` adds to campaigns.yaml, before its fields, to run [`EXAMPLE_HOOKS`].
const HOOKS_LINE: &str =
    "hooks: campaigns.js             # JavaScript: trims the name, keeps an audit trail\n";

/// The entity files `init` writes, by file name: the shipped ones, campaigns naming its hook
/// file ([`EXAMPLE_HOOKS`]), and [`AUDIT_ENTITY`].
pub fn init_entities() -> Vec<(&'static str, String)> {
    ENTITIES
        .iter()
        .map(|(name, text)| match *name {
            "campaigns.yaml" => (*name, with_line_before(text, "fields:", HOOKS_LINE)),
            _ => (*name, text.to_string()),
        })
        .chain(std::iter::once((
            AUDIT_ENTITY.0,
            AUDIT_ENTITY.1.to_string(),
        )))
        .collect()
}

/// `text` with `line` inserted before its first line that starts with `before`, or at its end
/// when none does.
fn with_line_before(text: &str, before: &str, line: &str) -> String {
    let starts = text.match_indices('\n').map(|(i, _)| i + 1);
    let at = std::iter::once(0)
        .chain(starts)
        .find(|i| text[*i..].starts_with(before))
        .unwrap_or(text.len());
    let mut out = String::with_capacity(text.len() + line.len());
    out.push_str(&text[..at]);
    out.push_str(line);
    out.push_str(&text[at..]);
    out
}

/// The TypeScript declarations of the entities `init` writes ([`crate::hook_types`]), for the
/// editor that opens [`EXAMPLE_HOOKS`]. Hook files do not change the types, so the entities
/// are compiled as [`sources`] and [`AUDIT_ENTITY`].
pub fn init_hook_types() -> Result<String, String> {
    let mut sources = sources();
    sources.push((
        Path::new("(built in)").join(AUDIT_ENTITY.0),
        AUDIT_ENTITY.1.to_string(),
    ));
    let names = crate::plugins::Registry::builtin().names();
    let catalog = crate::schema::compile_sources(&sources, &names).map_err(|diags| {
        let lines: Vec<String> = diags.iter().map(|d| d.to_string()).collect();
        lines.join("\n")
    })?;
    Ok(crate::hook_types::declarations(&catalog))
}

/// Writes into `dir/entities` the entities of [`init_entities`], the example hook file, the
/// TypeScript declarations of the entities for it and the JSON Schema of entity files, and the
/// example upload into `dir/uploads`, creating the folders; refuses (before writing anything)
/// when one of the files exists. Returns the files written.
pub fn init(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let entities = dir.join("entities");
    let uploads = dir.join("uploads");
    let schema = format!(
        "{:#}\n",
        crate::plugins::Registry::builtin().entity_schema()
    );
    let mut files: Vec<(PathBuf, String)> = init_entities()
        .into_iter()
        .map(|(name, text)| (entities.join(name), text))
        .collect();
    files.push((entities.join(EXAMPLE_HOOKS.0), EXAMPLE_HOOKS.1.to_string()));
    files.push((
        entities.join(crate::hook_types::FILE_NAME),
        init_hook_types()?,
    ));
    files.push((entities.join(SCHEMA_FILE), schema));
    files.push((uploads.join(EXAMPLE_UPLOAD.0), EXAMPLE_UPLOAD.1.to_string()));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_adds_the_hooks_line_to_campaigns_alone() {
        let written = init_entities();
        let shipped: Vec<&str> = ENTITIES.iter().map(|(name, _)| *name).collect();
        let names: Vec<&str> = written.iter().map(|(name, _)| *name).collect();
        assert_eq!(names[..shipped.len()], shipped[..]);
        assert_eq!(names[shipped.len()..], [AUDIT_ENTITY.0]);
        for ((name, text), (_, original)) in written.iter().zip(ENTITIES) {
            if *name != "campaigns.yaml" {
                assert_eq!(text, original, "{name}");
                continue;
            }
            assert_eq!(text.replace(HOOKS_LINE, ""), original);
            let at = text.find(HOOKS_LINE).expect("the hooks line");
            assert!(
                text[at..].starts_with(&format!("{HOOKS_LINE}fields:\n")),
                "{text}"
            );
        }
        assert_eq!(
            with_line_before("a: 1\n", "fields:", "b: 2\n"),
            "a: 1\nb: 2\n"
        );
    }

    #[test]
    fn the_built_in_sources_have_no_hooks() {
        for (path, text) in sources() {
            let named = text.lines().any(|l| l.starts_with("hooks:"));
            assert!(!named, "{}", path.display());
        }
    }
}
