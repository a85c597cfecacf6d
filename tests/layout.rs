//! The source layout's rules that a compiler does not check: SQL text lives in `src/storage/`
//! only; every other module calls its query functions.

use std::path::{Path, PathBuf};

/// Uppercase SQL that this code base writes in its statements and nowhere else.
const SQL_MARKERS: [&str; 14] = [
    "SELECT ",
    "INSERT INTO",
    "UPDATE ",
    "DELETE FROM",
    "CREATE TABLE",
    "CREATE INDEX",
    "CREATE UNIQUE INDEX",
    "ALTER TABLE",
    "DROP TABLE",
    "DROP INDEX",
    " WHERE ",
    " RETURNING ",
    "ON CONFLICT",
    " LIMIT ",
];

/// A string literal of a source file: the line it starts on and its text.
#[derive(Debug)]
struct Literal {
    line: usize,
    text: String,
}

/// The string literals of Rust source `src`, skipping comments, char literals and lifetimes.
fn literals(src: &str) -> Vec<Literal> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    while i < c.len() {
        match (c[i], at(i + 1)) {
            ('\n', _) => {
                line += 1;
                i += 1;
            }
            ('/', '/') => {
                while i < c.len() && c[i] != '\n' {
                    i += 1;
                }
            }
            ('/', '*') => {
                let mut depth = 0;
                while i < c.len() {
                    match (c[i], at(i + 1)) {
                        ('/', '*') => {
                            depth += 1;
                            i += 2;
                        }
                        ('*', '/') => {
                            depth -= 1;
                            i += 2;
                            if depth == 0 {
                                break;
                            }
                        }
                        ('\n', _) => {
                            line += 1;
                            i += 1;
                        }
                        _ => i += 1,
                    }
                }
            }
            ('r', '"') | ('r', '#') if i == 0 || !is_ident(c[i - 1]) => {
                let mut j = i + 1;
                let mut hashes = 0;
                while at(j) == '#' {
                    hashes += 1;
                    j += 1;
                }
                if at(j) != '"' {
                    i += 1;
                    continue;
                }
                let start = line;
                let mut text = String::new();
                j += 1;
                while j < c.len() {
                    if c[j] == '"' && (1..=hashes).all(|k| at(j + k) == '#') {
                        break;
                    }
                    if c[j] == '\n' {
                        line += 1;
                    }
                    text.push(c[j]);
                    j += 1;
                }
                out.push(Literal { line: start, text });
                i = j + 1 + hashes;
            }
            ('"', _) => {
                let start = line;
                let mut text = String::new();
                i += 1;
                while i < c.len() && c[i] != '"' {
                    if c[i] == '\\' {
                        text.push(c[i]);
                        i += 1;
                    }
                    if at(i) == '\n' {
                        line += 1;
                    }
                    text.push(at(i));
                    i += 1;
                }
                out.push(Literal { line: start, text });
                i += 1;
            }
            ('\'', '\\') => {
                i += 2;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            }
            ('\'', _) if at(i + 2) == '\'' => i += 3,
            (ch, _) if is_ident(ch) => {
                // Whole identifiers, so that the `r` of `for` never opens a raw string.
                while i < c.len() && is_ident(c[i]) {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `line: marker` for each literal of `src` holding SQL.
fn sql_in(src: &str) -> Vec<(usize, &'static str)> {
    literals(src)
        .into_iter()
        .filter_map(|l| {
            SQL_MARKERS
                .iter()
                .find(|m| l.text.contains(*m))
                .map(|m| (l.line, *m))
        })
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn sql_lives_in_storage_only() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let storage = root.join("src").join("storage");
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("plugins"), &mut files);
    let mut found = Vec::new();
    for f in files.iter().filter(|f| !f.starts_with(&storage)) {
        let src = std::fs::read_to_string(f).expect("a readable source file");
        for (line, marker) in sql_in(&src) {
            let rel = f.strip_prefix(root).unwrap_or(f);
            found.push(format!("{}:{line}: SQL text ({marker:?})", rel.display()));
        }
    }
    assert!(
        files.iter().any(|f| f.ends_with("src/lib.rs")),
        "the walk did not reach src/lib.rs"
    );
    assert!(
        found.is_empty(),
        "SQL belongs in src/storage/ query modules:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_check_sees_sql_and_not_prose() {
    let src = r##"
// SELECT * FROM "users" WHERE "id" = 1 is prose here
/// UPDATE "bg_requests" in a doc comment
/* DELETE FROM "bg_items" in a block */
fn f<'a>(x: &'a str) -> char {
    let _ = "the select of a form";
    let _ = 'x';
    let _ = '"';
    let sql = format!(
        "UPDATE \"bg_requests\" SET \"done\" = {} \
         WHERE \"rid\" = {}",
        1, 2
    );
    let raw = r#"INSERT INTO "t" ("a") VALUES (1)"#;
    'y'
}
"##;
    assert_eq!(
        sql_in(src),
        vec![(10, "UPDATE "), (14, "INSERT INTO")],
        "literals: {:?}",
        literals(src)
    );
}
