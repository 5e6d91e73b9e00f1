//! Echoing what a peer controls (tool arguments and results, model text, close reasons,
//! skipped frames) to the terminal and the log: bounded summaries that say how big the whole
//! was, and the one place that makes text safe for a terminal ([`terminal_safe`]). A server
//! can send megabytes where a line is expected, or an escape sequence that rewrites the
//! screen or the clipboard; the recording keeps it all as it was.

use std::borrow::Cow;

use serde_json::Value;

/// One value in a summary line, on the terminal or in the log: tool arguments, a result, an
/// error message, a skipped frame's reason.
pub const SUMMARY: usize = 4 << 10;

/// One block of readable text: a part of the model's reply (a real one is far shorter), a
/// tool call's arguments in the detail popup.
pub const TEXT: usize = 64 << 10;

/// One line of the log file, whatever wrote it: the backstop behind the bounds above.
pub const LOG_LINE: usize = 16 << 10;

/// `text` if it is at most `max` bytes; else its first `max` bytes (cut on a character
/// boundary) and a note of the whole size and what is shown: `xxxx… (9.5 MiB, shown 4.0 KiB)`.
pub fn bounded(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    let cut = floor_char_boundary(text, max);
    Cow::Owned(format!(
        "{}… ({}, shown {})",
        &text[..cut],
        human_size(text.len() as u64),
        human_size(cut as u64)
    ))
}

/// [`bounded`] for an owned string: the same string when it fits.
pub fn into_bounded(text: String, max: usize) -> String {
    match bounded(&text, max) {
        Cow::Borrowed(_) => text,
        Cow::Owned(summary) => summary,
    }
}

/// A JSON value for a summary: the value itself when its text fits in `max` bytes, else
/// its text, [`bounded`], as a string.
pub fn bounded_json(value: &Value, max: usize) -> Value {
    let text = value.to_string();
    match bounded(&text, max) {
        Cow::Borrowed(_) => value.clone(),
        Cow::Owned(summary) => Value::String(summary),
    }
}

/// The longest link shown as one, in bytes: the service's links run to a few hundred.
pub const LINK: usize = 2 << 10;

/// `text` in one line for a terminal: control characters and runs of whitespace become one
/// space, and past `max` characters it is cut with "…".
pub fn one_line(text: &str, max: usize) -> String {
    let words: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|word| !word.is_empty())
        .collect();
    let joined = words.join(" ");
    if joined.chars().count() <= max {
        return joined;
    }
    let mut cut: String = joined.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// True for a link that may be made a link (an OSC 8 hyperlink, a Markdown link): `http` or
/// `https`, printable ASCII only (no escape, no control character, no space: nothing that
/// could end the sequence it goes in or start another), at most [`LINK`] bytes. Anything
/// else is shown as text, never as a link.
pub fn plain_web_link(uri: &str) -> bool {
    uri.len() <= LINK
        && (uri.starts_with("https://") || uri.starts_with("http://"))
        && uri.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

/// The largest index at most `index` that starts a character of `text` (0 at the least).
pub fn floor_char_boundary(text: &str, index: usize) -> usize {
    let mut index = index.min(text.len());
    while index > 0 && !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

/// A byte count for people: `512 B`, `4.0 KiB`, `9.5 MiB`.
pub fn human_size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / f64::from(1u32 << 20)),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

/// `text` ending in exactly one full stop: text from elsewhere (an error, a server's reason)
/// often brings its own, and a sentence around it must not double it.
pub fn sentence(text: &str) -> String {
    let text = text.trim_end();
    if text.ends_with(['!', '?']) {
        return text.to_owned();
    }
    format!("{}.", text.trim_end_matches('.'))
}

/// Whether a terminal would act on `c` rather than show it: the C0 controls but tab and
/// newline (ESC among them), DEL and the C1 controls (U+0080 to U+009F, which some terminals
/// read as ESC sequences: U+009B is CSI).
fn acts_on_terminal(c: char) -> bool {
    matches!(c, '\0'..='\x08' | '\x0b'..='\x1f' | '\x7f'..='\u{9f}')
}

/// `text` as a terminal shows it without acting on it: every control character but tab and
/// newline (C0, DEL and C1, so ESC and CSI) written as `\x1b`, `\x9b`, never sent raw. The
/// one place text from others is made safe for a terminal (headless output, replay, inspect,
/// check, doctor and the servers' log lines all go through it), whether the output is a
/// terminal or a file: a file is read on a terminal later. The same text comes back borrowed.
pub fn terminal_safe(text: &str) -> Cow<'_, str> {
    escaping(text, acts_on_terminal, "\\x", 2)
}

/// A line of JSON as a terminal may show it: serde_json escapes C0 controls already, and this
/// escapes DEL and the C1 controls as `\u007f`, `\u009b`, so the line stays the same JSON
/// (outside strings JSON has none of them) and holds nothing a terminal would act on.
pub fn json_terminal_safe(json: &str) -> Cow<'_, str> {
    escaping(
        json,
        |c| acts_on_terminal(c) && c != '\n' && c != '\t',
        "\\u",
        4,
    )
}

/// `text` with each character `escape` picks written as `prefix` and its code in `digits` hex
/// digits; borrowed when there is none.
fn escaping<'a>(
    text: &'a str,
    escape: impl Fn(char) -> bool,
    prefix: &str,
    digits: usize,
) -> Cow<'a, str> {
    let Some(first) = text.find(&escape) else {
        return Cow::Borrowed(text);
    };
    let mut safe = String::with_capacity(text.len() + 8);
    safe.push_str(&text[..first]);
    for c in text[first..].chars() {
        if escape(c) {
            let _ = std::fmt::Write::write_fmt(
                &mut safe,
                format_args!("{prefix}{:0digits$x}", u32::from(c)),
            );
        } else {
            safe.push(c);
        }
    }
    Cow::Owned(safe)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_plain_web_links_become_links() {
        assert!(plain_web_link("https://g.co/r/AbC1?x=1&y=%20"));
        assert!(plain_web_link("http://example.org/"));
        for bad in [
            "javascript:alert(1)",
            "file:///etc/passwd",
            "https://a.example/\x1b]8;;https://evil.example\x1b\\",
            "https://a.example/\x07",
            "https://a.example/with space",
            "https://a.example/é",
            "",
        ] {
            assert!(!plain_web_link(bad), "{bad:?}");
        }
        let long = format!("https://a.example/{}", "a".repeat(LINK));
        assert!(!plain_web_link(&long));
    }

    #[test]
    fn one_line_drops_control_characters_and_cuts_long_text() {
        assert_eq!(one_line("a\u{1b}]2;x\u{7}b\n\t c", 80), "a ]2;x b c");
        assert_eq!(one_line("abcdef", 4), "abc…");
        assert_eq!(one_line("  ", 4), "");
    }

    #[test]
    fn controls_are_shown_escaped_and_tab_and_newline_kept() {
        let hostile = "a\x1b]52;c;aGk=\x07b\tc\nd\r\x7f\u{9b}2J\u{85}é";
        assert_eq!(
            terminal_safe(hostile),
            "a\\x1b]52;c;aGk=\\x07b\tc\nd\\x0d\\x7f\\x9b2J\\x85é"
        );
        assert!(matches!(terminal_safe("plain é\tline\n"), Cow::Borrowed(_)));
        for c in (0..=0xa0u32).filter_map(char::from_u32) {
            let shown = terminal_safe(&c.to_string()).into_owned();
            let passes = c == '\t' || c == '\n' || (' '..='~').contains(&c) || c == '\u{a0}';
            assert_eq!(shown.chars().count() == 1, passes, "{c:?} became {shown:?}");
        }
    }

    #[test]
    fn json_keeps_its_meaning_with_c1_and_del_escaped() {
        let value = json!({"text": "x\u{1b}[2J\u{9b}1m\u{7f}\u{85}y"});
        let line = value.to_string();
        let safe = json_terminal_safe(&line);
        assert!(!safe.chars().any(acts_on_terminal), "{safe}");
        assert_eq!(serde_json::from_str::<Value>(&safe).unwrap(), value);
        assert!(
            safe.contains("\\u009b") && safe.contains("\\u001b"),
            "{safe}"
        );
    }

    #[test]
    fn a_sentence_ends_in_one_full_stop() {
        assert_eq!(sentence("Disconnected."), "Disconnected.");
        assert_eq!(sentence("Disconnected"), "Disconnected.");
        assert_eq!(sentence("bad: it failed.. "), "bad: it failed.");
        assert_eq!(sentence("Really?"), "Really?");
    }

    #[test]
    fn short_text_is_shown_whole_and_long_text_says_its_size() {
        assert!(matches!(bounded("lamp", 4), Cow::Borrowed("lamp")));
        let huge = format!("{{\"a\": \"{}\"}}", "x".repeat(10_000_000));
        let shown = bounded(&huge, SUMMARY);
        assert!(shown.starts_with("{\"a\": \"xxxx"), "{}", &shown[..20]);
        assert!(shown.ends_with("x… (9.5 MiB, shown 4.0 KiB)"), "{shown}");
        assert!(shown.len() < SUMMARY + 40);
    }

    #[test]
    fn the_cut_falls_on_a_character_boundary() {
        // "é" is two bytes: a cut at 3 would split the second one.
        let text = "éééé";
        assert_eq!(bounded(text, 3), "é… (8 B, shown 2 B)");
        assert_eq!(bounded("日本語", 1), "… (9 B, shown 0 B)");
        assert_eq!(floor_char_boundary("日本語", 100), 9);
    }

    #[test]
    fn json_is_itself_until_it_is_too_big() {
        let small = json!({"device_name": "lamp"});
        assert_eq!(bounded_json(&small, SUMMARY), small);
        let big = json!({"device_name": "x".repeat(SUMMARY)});
        let Value::String(summary) = bounded_json(&big, SUMMARY) else {
            panic!("a big value becomes its bounded text");
        };
        assert!(summary.starts_with("{\"device_name\":\"xxx"), "{summary}");
        assert!(summary.ends_with("(4.0 KiB, shown 4.0 KiB)"), "{summary}");
    }

    #[test]
    fn sizes_read_naturally() {
        assert_eq!(human_size(512), "512 B");
        assert_eq!(human_size(4096), "4.0 KiB");
        assert_eq!(human_size(10_000_000), "9.5 MiB");
    }
}
