//! Where a YAML syntax error is, in words a writer of entity files acts on: the line of the
//! mistake rather than the line the parser noticed it on.

/// A message without the parser's ` at line N, column M`.
fn strip_location(msg: &str) -> String {
    match msg.find(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

/// A key written without its `:` (`sku string`) runs on into the next line as one text, and
/// the parser stops at that line's `:`. When the line before the one noticed holds a plain
/// text without `:`, that line is named.
fn without_colon(source: &str, noticed: usize, text: &str) -> Option<(usize, String)> {
    if !text.starts_with("mapping values are not allowed") {
        return None;
    }
    let (line, before) = source
        .lines()
        .enumerate()
        .take(noticed.saturating_sub(1))
        .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .last()?;
    let t = before.trim();
    let plain = !t.contains(':') && !t.starts_with(['-', '{', '[', '"', '\'', '|', '>']);
    plain.then(|| {
        (
            line + 1,
            format!("`{t}` has no `:` between its key and its value"),
        )
    })
}

/// The line of a YAML syntax error and its message. The parser notices a mistake where the
/// text stops making sense, often a line or more after it (an unclosed `{` or quote, a key
/// without its `:`); when it says what it was reading ("while scanning a quoted scalar at
/// line 3"), that construct's line is where the mistake is.
pub(super) fn yaml_problem(e: &serde_yaml::Error, source: &str) -> (usize, String) {
    let text = e.to_string();
    let noticed = e.location().map(|l| l.line()).unwrap_or(1);
    let Some((problem, context)) = text.split_once(", while ") else {
        return without_colon(source, noticed, &text)
            .unwrap_or_else(|| (noticed, strip_location(&text)));
    };
    let started = context
        .split_once(" at line ")
        .and_then(|(_, at)| at.split(' ').next()?.parse::<usize>().ok())
        .filter(|l| *l >= 1 && *l <= noticed);
    let what = strip_location(context);
    match started {
        Some(line) if line < noticed => (
            line,
            format!(
                "{} (noticed at line {noticed}), while {what} that starts on this line",
                strip_location(problem)
            ),
        ),
        _ => (
            noticed,
            format!("{}, while {what}", strip_location(problem)),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_yaml::Value as Yaml;

    #[test]
    fn yaml_syntax_errors_name_the_line_of_the_mistake() {
        let line = |text: &str| {
            let e = serde_yaml::from_str::<Yaml>(text).unwrap_err();
            yaml_problem(&e, text)
        };
        // An unclosed flow mapping on line 3, noticed on line 4.
        let (l, m) = line("name: a\nfields:\n  sku: {type: string\n  name: string\n");
        assert_eq!(l, 3, "{m}");
        assert!(m.contains("noticed at line 4"), "{m}");
        // An unclosed quote on line 3, noticed at the end.
        assert_eq!(
            line("name: a\nfields:\n  sku: \"string\n  name: string\n").0,
            3
        );
        // A key without its colon on line 3.
        let (l, m) = line("name: a\nfields:\n  sku string\n\n  name: string\n");
        assert_eq!(
            (l, m.as_str()),
            (3, "`sku string` has no `:` between its key and its value")
        );
        // A line indented too far is noticed where it is.
        assert_eq!(
            line("name: a\nfields:\n  sku: string\n   name: string\n").0,
            4
        );
    }
}
