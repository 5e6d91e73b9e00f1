//! The names MCP tools are declared under: each under its own name where that is unique, every
//! clashing one as `SERVER__TOOL`, and all made valid for the Live API (letters, digits, `_`,
//! `.`, `-`; starting with a letter or `_`; at most 64 characters).

use std::collections::{BTreeMap, BTreeSet};

/// Longest function name the Live API takes.
const MAX_NAME: usize = 64;

/// `name` as a valid function name: other characters become `_`, a leading digit, dot or
/// dash gets a `_` before it, and it is cut to 64 characters. `None` when nothing is left.
pub fn valid_function_name(name: &str) -> Option<String> {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() {
        return None;
    }
    if !out.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        out.insert(0, '_');
    }
    out.truncate(MAX_NAME);
    Some(out)
}

/// The declared name of each `(server, tool)` pair, in order, given the built-ins' names
/// (which keep theirs). `None` for a tool that ends up with no unique valid name.
pub fn declared_names(builtins: &[String], tools: &[(&str, &str)]) -> Vec<Option<String>> {
    let own: Vec<Option<String>> = tools.iter().map(|(_, t)| valid_function_name(t)).collect();
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for name in own.iter().flatten() {
        *count.entry(name).or_default() += 1;
    }
    let mut taken: BTreeSet<String> = builtins.iter().cloned().collect();
    let mut names = Vec::with_capacity(tools.len());
    for ((server, tool), own) in tools.iter().zip(&own) {
        let clashes = own
            .as_deref()
            .is_none_or(|n| count.get(n).copied().unwrap_or(0) > 1 || taken.contains(n));
        let name = if clashes {
            valid_function_name(&format!("{server}__{tool}"))
        } else {
            own.clone()
        };
        names.push(name.filter(|n| taken.insert(n.clone())));
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_made_valid() {
        assert_eq!(valid_function_name("get-sum").as_deref(), Some("get-sum"));
        assert_eq!(
            valid_function_name("files/read file").as_deref(),
            Some("files_read_file")
        );
        assert_eq!(valid_function_name("9lives").as_deref(), Some("_9lives"));
        assert_eq!(valid_function_name("émoji✓").as_deref(), Some("_moji_"));
        assert_eq!(valid_function_name(""), None);
        let long = "a".repeat(100);
        assert_eq!(valid_function_name(&long).map(|n| n.len()), Some(64));
    }

    #[test]
    fn every_clashing_tool_gets_its_server_prefix() {
        let builtins = vec!["get_current_time".to_owned()];
        let names = declared_names(
            &builtins,
            &[
                ("everything", "echo"),
                ("files", "echo"),
                ("everything", "get-sum"),
                ("clock", "get_current_time"),
            ],
        );
        assert_eq!(
            names,
            [
                Some("everything__echo".to_owned()),
                Some("files__echo".to_owned()),
                Some("get-sum".to_owned()),
                Some("clock__get_current_time".to_owned()),
            ]
        );
    }

    #[test]
    fn a_name_that_stays_taken_is_left_out() {
        let names = declared_names(&[], &[("s", "t"), ("s", "t")]);
        assert_eq!(names, [Some("s__t".to_owned()), None]);
    }
}
