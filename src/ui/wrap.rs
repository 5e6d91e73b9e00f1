//! Word wrapping of styled text with a hanging indent, done here (not by the `Paragraph`
//! widget) so the transcript knows its height in rows and can scroll by rows.

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// Lays out `prefix` then the words of `body` in lines at most `width` columns wide; lines
/// after the first are indented by the prefix's width.
pub fn wrap<'a>(prefix: Vec<Span<'a>>, body: &[(String, Style)], width: usize) -> Vec<Line<'a>> {
    let width = width.max(8);
    let indent = prefix.iter().map(|s| s.content.width()).sum::<usize>();
    // A prefix wider than half the pane would leave no room: indent less then.
    let indent = if indent * 2 > width { 2 } else { indent };
    let mut lines = Vec::new();
    let mut current: Vec<Span<'a>> = prefix;
    let mut used = current.iter().map(|s| s.content.width()).sum::<usize>();
    let mut line_has_words = false;
    let words = body.iter().flat_map(|(text, style)| {
        text.split_whitespace()
            .map(move |word| (word.to_owned(), *style))
    });
    for (word, style) in words {
        let word_width = word.width();
        let space = usize::from(line_has_words);
        if used + space + word_width > width && line_has_words {
            lines.push(Line::from(std::mem::take(&mut current)));
            current.push(Span::raw(" ".repeat(indent)));
            used = indent;
            line_has_words = false;
        }
        if line_has_words {
            current.push(Span::styled(" ", style));
            used += 1;
        }
        if used + word_width <= width {
            current.push(Span::styled(word, style));
            used += word_width;
        } else {
            // A word longer than a line is split at the edge.
            let mut piece = String::new();
            for c in word.chars() {
                let w = c.width().unwrap_or(0);
                if used + w > width {
                    current.push(Span::styled(std::mem::take(&mut piece), style));
                    lines.push(Line::from(std::mem::take(&mut current)));
                    current.push(Span::raw(" ".repeat(indent)));
                    used = indent;
                }
                piece.push(c);
                used += w;
            }
            current.push(Span::styled(piece, style));
        }
        line_has_words = true;
    }
    lines.push(Line::from(current));
    lines
}

/// Cuts `text` to at most `width` columns, ending with `…` when cut.
pub fn truncate(text: &str, width: usize) -> String {
    if text.width() <= width {
        return text.to_owned();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = c.width().unwrap_or(0);
        if used + w + 1 > width {
            break;
        }
        out.push(c);
        used += w;
    }
    out.push('…');
    out
}

/// Cuts `text` to at most `width` columns at the end of a word, ending with `…` when cut; a
/// first word wider than that is cut where it must be.
pub fn cut_at_word(text: &str, width: usize) -> String {
    if text.width() <= width {
        return text.to_owned();
    }
    let cut = truncate(text, width);
    let kept = cut.trim_end_matches('…');
    // The cut fell inside a word: go back to the space before it.
    let next = text[kept.len()..].chars().next();
    if next.is_some_and(|c| !c.is_whitespace())
        && !kept.ends_with(char::is_whitespace)
        && let Some(space) = kept.rfind(char::is_whitespace)
    {
        let words = kept[..space].trim_end_matches([' ', ',', ';', ':', '·']);
        if !words.is_empty() {
            return format!("{words}…");
        }
    }
    format!(
        "{}…",
        kept.trim_end().trim_end_matches([',', ';', ':', '·'])
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(lines: &[Line]) -> Vec<String> {
        lines.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn wraps_words_with_a_hanging_indent() {
        let body = [("the quick brown fox jumps over".to_owned(), Style::new())];
        let lines = wrap(vec![Span::raw("You: ")], &body, 16);
        assert_eq!(
            text(&lines),
            ["You: the quick", "     brown fox", "     jumps over"]
        );
        assert!(lines.iter().all(|l| l.width() <= 16));
    }

    #[test]
    fn splits_words_longer_than_the_line() {
        let body = [("abcdefghijklmnopqrstuvwxyz".to_owned(), Style::new())];
        let lines = wrap(vec![Span::raw("> ")], &body, 10);
        assert_eq!(
            text(&lines),
            ["> abcdefgh", "  ijklmnop", "  qrstuvwx", "  yz"]
        );
    }

    #[test]
    fn wide_characters_count_as_two_columns() {
        let body = [("日本語のテキスト".to_owned(), Style::new())];
        let lines = wrap(Vec::new(), &body, 8);
        assert!(lines.iter().all(|l| l.width() <= 8), "{:?}", text(&lines));
        assert_eq!(lines.len(), 2);
    }

    #[test]
    fn cuts_fall_between_words() {
        assert_eq!(cut_at_word("offline demo model", 14), "offline demo…");
        assert_eq!(cut_at_word("offline demo model", 18), "offline demo model");
        assert_eq!(cut_at_word("Call ListModels to see", 12), "Call…");
        assert_eq!(cut_at_word("abcdefghij", 5), "abcd…");
    }

    #[test]
    fn truncate_marks_the_cut() {
        assert_eq!(truncate("living room lamp", 8), "living …");
        assert_eq!(truncate("lamp", 8), "lamp");
    }
}
