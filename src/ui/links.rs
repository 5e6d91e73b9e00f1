//! Links written as links: OSC 8 hyperlinks over cells already drawn, on terminals that show
//! them (`Theme::links`). ratatui drops control characters from text, so no sequence can come
//! in with a peer's words; a hyperlink is put on the drawn cells afterwards, and only for a
//! link that can do no harm inside the sequence.

use ratatui::buffer::{Buffer, CellDiffOption};
use unicode_width::UnicodeWidthStr;

use livetalk_live::excerpt::plain_web_link;

/// Where a link lies in a pane's rows: the row, the first column and how many columns, and
/// where it leads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkArea {
    pub row: usize,
    pub col: u16,
    pub width: u16,
    pub uri: String,
}

/// The OSC 8 sequence that shows `text` as a link to `uri` (which must be a
/// [`plain_web_link`]).
pub fn osc8(uri: &str, text: &str) -> String {
    format!("\x1b]8;;{uri}\x1b\\{text}\x1b]8;;\x1b\\")
}

/// Makes the `width` cells from `(x, y)` one hyperlink to `uri`, when it is a
/// [`plain_web_link`] (anything else stays text): the
/// first cell holds the opening sequence, the text of all of them and the closing one, its
/// width forced to theirs; the others are skipped when the screen is written (and written
/// again once they hold something else, so no link outlives its text).
pub fn hyperlink(buffer: &mut Buffer, x: u16, y: u16, width: u16, uri: &str) {
    if !plain_web_link(uri) || width == 0 {
        return;
    }
    let area = buffer.area;
    if y < area.top() || y >= area.bottom() || x < area.left() {
        return;
    }
    let width = width.min(area.right().saturating_sub(x));
    let mut text = String::new();
    let mut column = 0;
    while column < width {
        let symbol = buffer[(x + column, y)].symbol();
        text.push_str(symbol);
        // A wide character's trailing cell holds nothing of its own.
        column += u16::try_from(symbol.width().max(1)).unwrap_or(1);
    }
    let Some(forced) = std::num::NonZeroU16::new(column.min(width)) else {
        return;
    };
    let first = &mut buffer[(x, y)];
    first.set_symbol(&osc8(uri, &text));
    first.set_diff_option(CellDiffOption::ForcedWidth(forced));
    for rest in 1..forced.get() {
        buffer[(x + rest, y)].set_diff_option(CellDiffOption::Skip);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::backend::CrosstermBackend;
    use ratatui::layout::Rect;
    use ratatui::{Terminal, TerminalOptions, Viewport};

    /// What the terminal is sent for a frame with "see site" where "site" links to `uri`.
    fn written(uri: &str) -> String {
        let mut screen = Vec::<u8>::new();
        let backend = CrosstermBackend::new(&mut screen);
        let area = Rect::new(0, 0, 12, 1);
        let mut terminal = Terminal::with_options(
            backend,
            TerminalOptions {
                viewport: Viewport::Fixed(area),
            },
        )
        .unwrap();
        terminal
            .draw(|frame| {
                frame
                    .buffer_mut()
                    .set_string(0, 0, "see site", ratatui::style::Style::new());
                hyperlink(frame.buffer_mut(), 4, 0, 4, uri);
            })
            .unwrap();
        drop(terminal);
        String::from_utf8(screen).unwrap()
    }

    #[test]
    fn a_link_is_written_as_one_osc_8_sequence_around_its_text() {
        let out = written("https://g.co/r/AbC1");
        assert!(
            out.contains("\x1b]8;;https://g.co/r/AbC1\x1b\\site\x1b]8;;\x1b\\"),
            "{out:?}"
        );
        // The text is written once: inside the link, not again cell by cell after it.
        assert_eq!(out.matches("site").count(), 1, "{out:?}");
        assert!(out.contains("see"), "{out:?}");
    }

    #[test]
    fn a_link_that_could_break_out_is_written_as_text() {
        let out = written("https://a.example/\x1b]2;pwned\x07");
        assert!(!out.contains("\x1b]8"), "{out:?}");
        assert!(!out.contains("pwned"), "{out:?}");
        assert!(out.contains("site"), "{out:?}");
    }
}
