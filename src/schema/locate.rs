//! Maps a key path in a YAML document (`["fields", "price", "type"]`) to the line it is on, so
//! that semantic errors found after parsing can still be reported as `file:line: message`.

use std::collections::HashMap;

/// Line numbers (1-based) of every block-style key path in one YAML text.
pub struct Locator {
    lines: HashMap<Vec<String>, usize>,
}

impl Locator {
    pub fn new(text: &str) -> Locator {
        let mut lines = HashMap::new();
        let mut stack: Vec<(usize, String)> = Vec::new();
        for (n, raw) in text.lines().enumerate() {
            let trimmed = raw.trim_start();
            if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with("---") {
                continue;
            }
            let indent = raw.len() - trimmed.len();
            let Some(key) = key_of(trimmed) else { continue };
            while stack.last().is_some_and(|(i, _)| *i >= indent) {
                stack.pop();
            }
            stack.push((indent, key));
            let path: Vec<String> = stack.iter().map(|(_, k)| k.clone()).collect();
            lines.entry(path).or_insert(n + 1);
            // Keys of a flow mapping on the same line (`price: { type: decimal }`).
            if let Some(open) = trimmed.find('{') {
                for part in trimmed[open + 1..].split([',', '}']) {
                    if let Some(k) = key_of(part.trim()) {
                        let mut p: Vec<String> = stack.iter().map(|(_, k)| k.clone()).collect();
                        p.push(k);
                        lines.entry(p).or_insert(n + 1);
                    }
                }
            }
        }
        Locator { lines }
    }

    /// The line of the deepest known prefix of `path`, or 1.
    pub fn line(&self, path: &[&str]) -> usize {
        (1..=path.len())
            .rev()
            .find_map(|len| {
                let key: Vec<String> = path[..len].iter().map(|s| s.to_string()).collect();
                self.lines.get(&key).copied()
            })
            .unwrap_or(1)
    }
}

fn key_of(s: &str) -> Option<String> {
    let s = s.strip_prefix("- ").unwrap_or(s);
    let colon = s.find(':')?;
    let key = s[..colon].trim().trim_matches(|c| c == '"' || c == '\'');
    let ok = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.');
    ok.then(|| key.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_block_and_flow_keys() {
        let text =
            "name: x\nfields:\n  price: { type: decimal, default: 0 }\n  name:\n    type: string\n";
        let l = Locator::new(text);
        assert_eq!(l.line(&["fields", "price", "default"]), 3);
        assert_eq!(l.line(&["fields", "name", "type"]), 5);
        assert_eq!(l.line(&["fields", "missing"]), 2);
        assert_eq!(l.line(&["nothing"]), 1);
    }
}
