//! The source layout's rules that a compiler does not check: SQL text lives in `src/storage/`
//! only, every other module calls its query functions; the top-level modules depend on each other
//! one way (no cycle among the `crate::` paths between them); `src/http/` reaches data through the
//! engine or jobs, never `crate::storage`; no function runs over [`MAX_FN_LINES`] lines.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The longest a function may be, from its `fn` line to its closing brace.
const MAX_FN_LINES: usize = 100;

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

/// Rust source `src` read once: its string literals, and its code with every comment, string
/// and char literal blanked to spaces (line breaks kept, so lines still count).
struct Scanned {
    literals: Vec<Literal>,
    code: String,
}

/// The string literals of Rust source `src`, skipping comments, char literals and lifetimes.
fn literals(src: &str) -> Vec<Literal> {
    scan(src).literals
}

/// Reads `src` once into its literals and its blanked code (see [`Scanned`]).
fn scan(src: &str) -> Scanned {
    let c: Vec<char> = src.chars().collect();
    let mut code: Vec<char> = c.clone();
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
                let from = i;
                while i < c.len() && c[i] != '\n' {
                    i += 1;
                }
                blank(&mut code, from, i);
            }
            ('/', '*') => {
                let from = i;
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
                blank(&mut code, from, i);
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
                let from = j;
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
                blank(&mut code, from, j);
                out.push(Literal { line: start, text });
                i = j + 1 + hashes;
            }
            ('"', _) => {
                let start = line;
                let mut text = String::new();
                i += 1;
                let from = i;
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
                blank(&mut code, from, i);
                out.push(Literal { line: start, text });
                i += 1;
            }
            ('\'', '\\') => {
                let from = i;
                i += 2;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
                blank(&mut code, from, i);
            }
            ('\'', _) if at(i + 2) == '\'' => {
                blank(&mut code, i, i + 3);
                i += 3;
            }
            (ch, _) if is_ident(ch) => {
                // Whole identifiers, so that the `r` of `for` never opens a raw string.
                while i < c.len() && is_ident(c[i]) {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    Scanned {
        literals: out,
        code: code.into_iter().collect(),
    }
}

/// Blanks `code[from..to]` to spaces, keeping its line breaks.
fn blank(code: &mut [char], from: usize, to: usize) {
    let to = to.min(code.len());
    for ch in code.iter_mut().take(to).skip(from) {
        if *ch != '\n' {
            *ch = ' ';
        }
    }
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

/// The Rust files of the library: `src/` (the binary's `main.rs` aside, it names the library by
/// its crate name) and `plugins/`, which `src/lib.rs` mounts as the module `plugins`.
fn library_files(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("plugins"), &mut files);
    files.retain(|f| !f.ends_with("src/main.rs"));
    files
}

/// The top-level module a library file belongs to; `None` for the crate root.
fn module_of(root: &Path, file: &Path) -> Option<String> {
    if file.starts_with(root.join("plugins")) {
        return Some("plugins".into());
    }
    let rel = file.strip_prefix(root.join("src")).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    match first.strip_suffix(".rs") {
        Some("lib") => None,
        Some(name) => Some(name.to_string()),
        None => Some(first.to_string()),
    }
}

/// The names that follow each `crate::` in blanked `code`, with their line: `crate::a::b` gives
/// `a`, `crate::{a, b::c}` gives `a` and `b`.
fn crate_paths(code: &str) -> Vec<(usize, String)> {
    let c: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let ident_at = |mut i: usize| {
        let from = i;
        while i < c.len() && is_ident(c[i]) {
            i += 1;
        }
        (c[from..i].iter().collect::<String>(), i)
    };
    let mut i = 0;
    while let Some(found) = code_find(&c, i, "crate::") {
        i = found + "crate::".len();
        if found > 0 && (is_ident(c[found - 1]) || c[found - 1] == '$') {
            continue;
        }
        let line = c[..found].iter().filter(|&&ch| ch == '\n').count() + 1;
        while c.get(i).is_some_and(|ch| ch.is_whitespace()) {
            i += 1;
        }
        if c.get(i) != Some(&'{') {
            let (name, _) = ident_at(i);
            out.push((line, name));
            continue;
        }
        // A group: the first name of each element at its own depth.
        let (mut depth, mut want) = (0, true);
        while i < c.len() {
            match c[i] {
                '{' => {
                    depth += 1;
                    want = depth == 1;
                    i += 1;
                }
                '}' => {
                    depth -= 1;
                    i += 1;
                    if depth == 0 {
                        break;
                    }
                }
                ',' => {
                    want = depth == 1;
                    i += 1;
                }
                ch if is_ident(ch) && want => {
                    let (name, next) = ident_at(i);
                    out.push((line, name));
                    want = false;
                    i = next;
                }
                _ => i += 1,
            }
        }
    }
    out
}

/// Where `needle` next stands in `c` at or after `from`.
fn code_find(c: &[char], from: usize, needle: &str) -> Option<usize> {
    let n: Vec<char> = needle.chars().collect();
    (from..c.len().saturating_sub(n.len() - 1)).find(|&i| c[i..i + n.len()] == n[..])
}

/// The top-level modules `src/lib.rs` declares (`mod name;`); a file of `src/` outside them
/// belongs to the binary.
fn lib_modules(root: &Path) -> BTreeSet<String> {
    let lib = std::fs::read_to_string(root.join("src").join("lib.rs")).expect("src/lib.rs");
    let code = scan(&lib).code;
    let words: Vec<&str> = code
        .split(|c: char| !is_ident(c) && c != ';')
        .filter(|w| !w.is_empty())
        .collect();
    words
        .windows(2)
        .filter(|w| w[0] == "mod" && w[1].ends_with(';'))
        .map(|w| w[1].trim_end_matches(';').to_string())
        .collect()
}

/// The dependency graph of the top-level modules: for each module, the modules its `crate::`
/// paths name, each with the first place that names it.
type Graph = BTreeMap<String, BTreeMap<String, String>>;

fn module_graph(root: &Path) -> Graph {
    let files = library_files(root);
    let modules = lib_modules(root);
    let mut graph: Graph = modules
        .iter()
        .map(|m| (m.clone(), BTreeMap::new()))
        .collect();
    for f in &files {
        let Some(from) = module_of(root, f) else {
            continue;
        };
        let src = std::fs::read_to_string(f).expect("a readable source file");
        let rel = f.strip_prefix(root).unwrap_or(f).display().to_string();
        for (line, to) in crate_paths(&scan(&src).code) {
            if to != from && modules.contains(&to) {
                graph
                    .get_mut(&from)
                    .expect("every module is a node")
                    .entry(to)
                    .or_insert_with(|| format!("{rel}:{line}"));
            }
        }
    }
    graph
}

/// The strongly connected components of `graph` with more than one module (Tarjan).
fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    struct Walk<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'g>(w: &mut Walk<'g>, v: &'g str) {
        let n = w.index.len();
        w.index.insert(v, n);
        w.low.insert(v, n);
        w.stack.push(v);
        for to in w.graph[v].keys() {
            let to = to.as_str();
            if !w.index.contains_key(to) {
                visit(w, to);
                let low = w.low[v].min(w.low[to]);
                w.low.insert(v, low);
            } else if w.stack.contains(&to) {
                let low = w.low[v].min(w.index[to]);
                w.low.insert(v, low);
            }
        }
        if w.low[v] == w.index[v] {
            let mut part = Vec::new();
            while let Some(top) = w.stack.pop() {
                part.push(top.to_string());
                if top == v {
                    break;
                }
            }
            if part.len() > 1 {
                part.sort();
                w.found.push(part);
            }
        }
    }
    let mut w = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !w.index.contains_key(v.as_str()) {
            visit(&mut w, v);
        }
    }
    w.found.sort();
    w.found
}

/// The graph one module a line: `module -> dependency, ...`.
fn show_graph(graph: &Graph) -> String {
    graph
        .iter()
        .map(|(m, deps)| {
            let deps: Vec<&str> = deps.keys().map(String::as_str).collect();
            format!("{m} -> {}", deps.join(", "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn top_level_modules_have_no_cycle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let graph = module_graph(root);
    assert!(
        ["engine", "storage", "schema", "http", "plugins"]
            .iter()
            .all(|m| graph.contains_key(*m)),
        "the walk missed a top-level module:\n{}",
        show_graph(&graph)
    );
    println!(
        "the top-level modules and what they use:\n{}",
        show_graph(&graph)
    );
    let found = cycles(&graph);
    let lines: Vec<String> = found
        .iter()
        .map(|part| {
            let edges: Vec<String> = part
                .iter()
                .flat_map(|from| {
                    graph[from]
                        .iter()
                        .filter(|(to, _)| part.contains(to))
                        .map(move |(to, at)| format!("  {from} -> {to} ({at})"))
                })
                .collect();
            format!("cycle among {}:\n{}", part.join(", "), edges.join("\n"))
        })
        .collect();
    assert!(
        found.is_empty(),
        "the top-level modules must depend on each other one way (http -> uploader, jobs -> \
         engine -> storage -> schema); move the shared item down:\n{}\n\nthe whole graph:\n{}",
        lines.join("\n"),
        show_graph(&graph)
    );
}

#[test]
fn the_graph_reads_paths_and_groups() {
    let src = r#"
use crate::engine::Engine;
use crate::{jobs::Jobs, time::{self, now}, storage};
// crate::http in a comment
fn f() -> String { let _ = crate :: files::open(); "crate::uploader".into() }
macro_rules! m { () => { $crate::auth::x() }; }
"#;
    let names: Vec<(usize, String)> = crate_paths(&scan(src).code);
    let want = [(2, "engine"), (3, "jobs"), (3, "time"), (3, "storage")];
    assert_eq!(
        names,
        want.iter()
            .map(|(l, n)| (*l, n.to_string()))
            .collect::<Vec<_>>()
    );
    let graph: Graph = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec!["a"]),
    ]
    .into_iter()
    .map(|(m, deps)| {
        let deps = deps.into_iter().map(|d| (d.to_string(), String::new()));
        (m.to_string(), deps.collect())
    })
    .collect();
    assert_eq!(cycles(&graph), vec![vec!["a", "b", "c"]]);
}

#[test]
fn http_reaches_data_through_the_engine_or_jobs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src").join("http"), &mut files);
    assert!(!files.is_empty(), "the walk did not reach src/http/");
    let mut found = Vec::new();
    for f in &files {
        let src = std::fs::read_to_string(f).expect("a readable source file");
        for (line, name) in crate_paths(&scan(&src).code) {
            if name == "storage" {
                let rel = f.strip_prefix(root).unwrap_or(f);
                found.push(format!("{}:{line}: crate::storage", rel.display()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "src/http/ reaches data only through the engine or jobs:\n{}",
        found.join("\n")
    );
}

/// Each function of blanked `code` that has a body: its name, its `fn` line and its length in
/// lines from the `fn` line to its closing brace.
fn functions(code: &str) -> Vec<(String, usize, usize)> {
    let c: Vec<char> = code.chars().collect();
    let line_at = |i: usize| c[..i].iter().filter(|&&ch| ch == '\n').count() + 1;
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = code_find(&c, from, "fn") {
        from = at + 2;
        let before = at.checked_sub(1).map(|i| c[i]);
        if before.is_some_and(is_ident) || c.get(at + 2).is_some_and(|&ch| is_ident(ch)) {
            continue;
        }
        let mut i = at + 2;
        while c.get(i).is_some_and(|ch| ch.is_whitespace()) {
            i += 1;
        }
        let name: String = c[i..].iter().take_while(|&&ch| is_ident(ch)).collect();
        if name.is_empty() {
            // A function pointer type such as `fn(u8) -> u8`.
            continue;
        }
        // The body opens at the first `{` outside parentheses and brackets; a `;` first means
        // a declaration without one.
        let mut depth = 0i32;
        let open = loop {
            match c.get(i) {
                None => break None,
                Some('(' | '[') => depth += 1,
                Some(')' | ']') => depth -= 1,
                Some(';') if depth == 0 => break None,
                Some('{') if depth == 0 => break Some(i),
                _ => {}
            }
            i += 1;
        };
        let Some(open) = open else { continue };
        let mut braces = 0;
        let mut j = open;
        while j < c.len() {
            match c[j] {
                '{' => braces += 1,
                '}' => {
                    braces -= 1;
                    if braces == 0 {
                        break;
                    }
                }
                _ => {}
            }
            j += 1;
        }
        out.push((name, line_at(at), line_at(j) - line_at(at) + 1));
    }
    out
}

#[test]
fn functions_fit_on_a_screen() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = library_files(root);
    let mut found = Vec::new();
    for f in &files {
        let src = std::fs::read_to_string(f).expect("a readable source file");
        for (name, line, len) in functions(&scan(&src).code) {
            if len > MAX_FN_LINES {
                let rel = f.strip_prefix(root).unwrap_or(f);
                found.push(format!(
                    "{}:{line}: fn {name} is {len} lines",
                    rel.display()
                ));
            }
        }
    }
    assert!(
        files.iter().any(|f| f.ends_with("plugins/mod.rs")),
        "the walk did not reach plugins/"
    );
    assert!(
        found.is_empty(),
        "split each function over {MAX_FN_LINES} lines along its steps:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_length_check_counts_from_fn_to_brace() {
    let src = r#"
trait T { fn decl(&self) -> u8; }
fn outer(f: fn(u8) -> u8, a: [u8; 2]) -> u8 {
    let s = "}";
    fn inner() {}
    f(a[0])
}
"#;
    let found = functions(&scan(src).code);
    let want = [("decl", 2, 0), ("outer", 3, 5), ("inner", 5, 1)];
    let got: Vec<(&str, usize, usize)> = found
        .iter()
        .map(|(n, l, len)| (n.as_str(), *l, *len))
        .collect();
    assert_eq!(
        got,
        want.iter()
            .filter(|w| w.0 != "decl")
            .copied()
            .collect::<Vec<_>>()
    );
}
