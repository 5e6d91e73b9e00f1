//! What the TUI is looking at: focus, scroll positions, popups (the event inspector's filter
//! and selection among them), the input line, device highlights and the last drawn layout. Part of `App` state, so it changes only in `update`.

use crate::tools::Device;

/// The pane that receives keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    Input,
    Transcript,
    ToolLog,
    Devices,
}

/// A popup over the panes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Popup {
    Help {
        scroll: u16,
    },
    /// Index into `App::tool_calls`.
    ToolDetail {
        index: usize,
        scroll: u16,
    },
    /// Devices, resampling paths, counters and latencies.
    Audio {
        scroll: u16,
    },
    /// Every tool and MCP server; `selected` indexes `App::tool_rows`.
    Tools {
        selected: usize,
    },
    /// The event inspector: every frame both ways.
    Inspector(Inspector),
}

/// Which frames the inspector lists (`f` steps through them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WireFilter {
    #[default]
    All,
    /// What was said: text, audio, transcriptions, turn signals.
    Conversation,
    /// Tool calls, their cancellations and the answers.
    Tools,
    /// The session's own business: setup, resumption, goAway, usage, instructions.
    Session,
}

impl WireFilter {
    /// The next filter in the order `f` steps through.
    pub fn next(self) -> WireFilter {
        match self {
            WireFilter::All => WireFilter::Conversation,
            WireFilter::Conversation => WireFilter::Tools,
            WireFilter::Tools => WireFilter::Session,
            WireFilter::Session => WireFilter::All,
        }
    }

    /// As the inspector's title names it.
    pub fn label(self) -> &'static str {
        match self {
            WireFilter::All => "all",
            WireFilter::Conversation => "conversation",
            WireFilter::Tools => "tools",
            WireFilter::Session => "session",
        }
    }
}

/// What the inspector looks at; part of the view, so it changes only in `update`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Inspector {
    pub filter: WireFilter,
    /// The selected row, by the number its first frame was taken in as (see
    /// [`WireLog::number`](super::WireLog::number)); `None` follows the newest.
    pub selected: Option<u64>,
    /// The selected frame's JSON is shown.
    pub expanded: bool,
    /// How far the expanded JSON is scrolled.
    pub scroll: u16,
}

/// A screen rectangle; the UI reports where it drew each pane so the mouse can find them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Area {
    pub x: u16,
    pub y: u16,
    pub width: u16,
    pub height: u16,
}

impl Area {
    pub fn contains(&self, column: u16, row: u16) -> bool {
        column >= self.x
            && column < self.x.saturating_add(self.width)
            && row >= self.y
            && row < self.y.saturating_add(self.height)
    }
}

/// Where the last frame put things, and how tall the wrapped transcript was.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScreenLayout {
    pub width: u16,
    pub height: u16,
    /// Inner area of the transcript (without borders).
    pub transcript: Area,
    /// Rows of the wrapped transcript at the transcript's width.
    pub transcript_rows: usize,
    /// Inner area of the tool log's rows (without borders and header).
    pub tool_log: Area,
    pub devices: Option<Area>,
    /// The session panel, where its figures are drawn (its ages count seconds).
    pub session: Option<Area>,
    pub popup: Option<Area>,
}

/// How many ticks a changed device stays highlighted (ticks are 250 ms apart while any
/// animation runs).
pub const DEVICE_HIGHLIGHT_TICKS: u8 = 8;

/// The view part of the app state.
#[derive(Debug, Clone)]
pub struct View {
    pub focus: Focus,
    pub input: InputLine,
    /// First transcript row shown, or `None` to stick to the bottom.
    pub transcript_top: Option<usize>,
    /// Selected tool-log row, or `None` to follow the newest call.
    pub tool_selected: Option<usize>,
    pub popup: Option<Popup>,
    /// The editor for a tool call's arguments or result, over everything else while open.
    pub editor: Option<Editor>,
    /// The user's choice to show the device panel (F2 toggles it).
    pub show_devices: bool,
    /// Remaining highlight ticks per device, parallel to `App::devices`.
    pub device_highlight: Vec<u8>,
    /// Notices before this index have been dismissed.
    pub notices_dismissed: usize,
    pub layout: ScreenLayout,
    /// Tick counter for spinners.
    pub ticks: u64,
    /// Honour `NO_COLOR`: symbols and emphasis only.
    pub no_color: bool,
    /// The terminal shows OSC 8 hyperlinks: links are written as links.
    pub hyperlinks: bool,
    /// Where the log file is, for the help popup.
    pub log_path: Option<String>,
    /// The user asked to leave.
    pub quit: bool,
    /// The notice (by index) that said Esc again quits; while it shows, Esc on an empty line
    /// quits.
    pub esc_quits: Option<usize>,
    /// `/model ID` waits for the user's yes or no: the model asked for, and the notice that
    /// asks.
    pub confirm_model: Option<(String, usize)>,
}

impl Default for View {
    fn default() -> Self {
        View {
            focus: Focus::Input,
            input: InputLine::default(),
            transcript_top: None,
            tool_selected: None,
            popup: None,
            editor: None,
            show_devices: true,
            device_highlight: Vec::new(),
            notices_dismissed: 0,
            layout: ScreenLayout::default(),
            ticks: 0,
            no_color: false,
            hyperlinks: false,
            log_path: None,
            quit: false,
            esc_quits: None,
            confirm_model: None,
        }
    }
}

impl View {
    /// Marks the devices whose state differs between `old` and `new`.
    pub fn highlight_changes(&mut self, old: &[Device], new: &[Device]) {
        self.device_highlight.resize(new.len(), 0);
        for (i, device) in new.iter().enumerate() {
            let before = old.iter().find(|d| d.name == device.name);
            if before != Some(device) {
                self.device_highlight[i] = DEVICE_HIGHLIGHT_TICKS;
            }
        }
    }

    pub fn is_highlighted(&self, device_index: usize) -> bool {
        self.device_highlight
            .get(device_index)
            .is_some_and(|&t| t > 0)
    }

    /// Scrolls the transcript up (negative) or down (positive) by `rows`.
    pub fn scroll_transcript(&mut self, rows: isize) {
        let height = usize::from(self.layout.transcript.height).max(1);
        let bottom_top = self.layout.transcript_rows.saturating_sub(height);
        let top = self.transcript_top.unwrap_or(bottom_top);
        let new_top = top.saturating_add_signed(rows).min(bottom_top);
        // Reaching the bottom sticks to it again, so new lines keep coming into view.
        self.transcript_top = (new_top < bottom_top).then_some(new_top);
    }

    /// Rows a page-scroll moves: a little less than the visible height.
    pub fn transcript_page(&self) -> isize {
        let rows = self.layout.transcript.height as isize;
        (rows - 2).max(1)
    }
}

/// What the editor is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EditorPurpose {
    /// New arguments for a call waiting for the user (a JSON object).
    Arguments,
    /// The result of a call, typed by hand.
    Result,
}

/// The editor open over the screen: one call's arguments or result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Editor {
    /// The call, by its place in the tool log.
    pub call: usize,
    pub purpose: EditorPurpose,
    pub line: InputLine,
    /// Why the last Enter was not accepted; the editor stays open to fix it.
    pub problem: Option<String>,
}

/// The most text the input line (and the editor's line) holds: a paste that would take it
/// past this is refused whole, with a notice, rather than cut somewhere the user cannot see.
/// Pastes up to it are taken in one pass, in time linear in their length.
pub const INPUT_MAX_BYTES: usize = 1 << 20;

/// Sent lines the history keeps at most, and the bytes they may take in all (the newest line is
/// always kept): a session of long pastes must not grow without bound.
const HISTORY_LINES: usize = 200;
const HISTORY_BYTES: usize = 4 << 20;

/// A one-line editor with history.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InputLine {
    text: String,
    /// Cursor position in chars.
    cursor: usize,
    history: std::collections::VecDeque<String>,
    /// Position while browsing history; `None` when editing the draft.
    browsing: Option<usize>,
    /// The unsent text kept while browsing history.
    draft: String,
}

/// A paste the line did not take: it would have held more than [`INPUT_MAX_BYTES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLong {
    /// The bytes the paste would have added.
    pub pasted: usize,
}

impl std::fmt::Display for TooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "The paste of {} was not taken: the input line holds at most {}.",
            livetalk_live::excerpt::human_size(self.pasted as u64),
            livetalk_live::excerpt::human_size(INPUT_MAX_BYTES as u64),
        )
    }
}

impl InputLine {
    /// A line holding `text`, the cursor at its end.
    pub fn with_text(text: &str) -> Self {
        let mut line = InputLine::default();
        let _ = line.insert_str(text);
        line
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn cursor(&self) -> usize {
        self.cursor
    }

    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    fn byte_at(&self, char_index: usize) -> usize {
        self.text
            .char_indices()
            .nth(char_index)
            .map_or(self.text.len(), |(i, _)| i)
    }

    fn len_chars(&self) -> usize {
        self.text.chars().count()
    }

    /// Types one character (nothing past [`INPUT_MAX_BYTES`]).
    pub fn insert(&mut self, c: char) {
        if self.text.len() + c.len_utf8() > INPUT_MAX_BYTES {
            return;
        }
        let at = self.byte_at(self.cursor);
        self.text.insert(at, c);
        self.cursor += 1;
    }

    /// Inserts pasted text at the cursor in one pass; line breaks and tabs become spaces since
    /// a turn is one line, other control characters are left out. A paste that would take the
    /// line past [`INPUT_MAX_BYTES`] is not taken at all.
    pub fn insert_str(&mut self, s: &str) -> Result<(), TooLong> {
        let mut taken = String::with_capacity(s.len().min(INPUT_MAX_BYTES));
        let mut chars = 0;
        for c in s.chars() {
            let c = match c {
                '\n' | '\t' => ' ',
                c if c.is_control() => continue,
                c => c,
            };
            if self.text.len() + taken.len() + c.len_utf8() > INPUT_MAX_BYTES {
                return Err(TooLong { pasted: s.len() });
            }
            taken.push(c);
            chars += 1;
        }
        let at = self.byte_at(self.cursor);
        self.text.insert_str(at, &taken);
        self.cursor += chars;
        Ok(())
    }

    pub fn backspace(&mut self) {
        if self.cursor == 0 {
            return;
        }
        self.cursor -= 1;
        let at = self.byte_at(self.cursor);
        self.text.remove(at);
    }

    pub fn delete(&mut self) {
        if self.cursor < self.len_chars() {
            let at = self.byte_at(self.cursor);
            self.text.remove(at);
        }
    }

    /// Deletes the word before the cursor (Ctrl-W).
    pub fn delete_word(&mut self) {
        let chars: Vec<char> = self.text.chars().collect();
        let mut start = self.cursor;
        while start > 0 && chars[start - 1].is_whitespace() {
            start -= 1;
        }
        while start > 0 && !chars[start - 1].is_whitespace() {
            start -= 1;
        }
        let (from, to) = (self.byte_at(start), self.byte_at(self.cursor));
        self.text.replace_range(from..to, "");
        self.cursor = start;
    }

    /// Deletes everything before the cursor (Ctrl-U).
    pub fn delete_to_start(&mut self) {
        let to = self.byte_at(self.cursor);
        self.text.replace_range(..to, "");
        self.cursor = 0;
    }

    pub fn left(&mut self) {
        self.cursor = self.cursor.saturating_sub(1);
    }

    pub fn right(&mut self) {
        self.cursor = (self.cursor + 1).min(self.len_chars());
    }

    pub fn home(&mut self) {
        self.cursor = 0;
    }

    pub fn end(&mut self) {
        self.cursor = self.len_chars();
    }

    /// Puts `text` in the line (Tab's completion), the cursor at its end.
    pub fn replace(&mut self, text: &str) {
        self.text.clear();
        self.cursor = 0;
        self.browsing = None;
        let _ = self.insert_str(text);
    }

    /// Takes the line for sending and remembers it in the history.
    pub fn take(&mut self) -> String {
        let text = std::mem::take(&mut self.text);
        self.cursor = 0;
        self.browsing = None;
        self.draft.clear();
        if !text.trim().is_empty() && self.history.back() != Some(&text) {
            self.history.push_back(text.clone());
            let mut bytes: usize = self.history.iter().map(String::len).sum();
            while self.history.len() > 1
                && (self.history.len() > HISTORY_LINES || bytes > HISTORY_BYTES)
            {
                bytes -= self.history.pop_front().map_or(0, |line| line.len());
            }
        }
        text
    }

    /// Up: the previous sent line.
    pub fn history_back(&mut self) {
        let position = match self.browsing {
            None if self.history.is_empty() => return,
            None => {
                self.draft = self.text.clone();
                self.history.len() - 1
            }
            Some(0) => return,
            Some(p) => p - 1,
        };
        self.browsing = Some(position);
        self.text = self.history[position].clone();
        self.end();
    }

    /// Down: the next sent line, then back to the draft.
    pub fn history_forward(&mut self) {
        let Some(position) = self.browsing else {
            return;
        };
        if position + 1 < self.history.len() {
            self.browsing = Some(position + 1);
            self.text = self.history[position + 1].clone();
        } else {
            self.browsing = None;
            self.text = std::mem::take(&mut self.draft);
        }
        self.end();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(s: &str) -> InputLine {
        let mut line = InputLine::default();
        line.insert_str(s).unwrap();
        line
    }

    #[test]
    fn editing_moves_by_characters_not_bytes() {
        let mut line = typed("héllo");
        line.left();
        line.left();
        line.backspace();
        assert_eq!(line.text(), "hélo");
        line.home();
        line.delete();
        assert_eq!(line.text(), "élo");
        line.end();
        line.insert('!');
        assert_eq!((line.text(), line.cursor()), ("élo!", 4));
    }

    #[test]
    fn word_and_line_deletion() {
        let mut line = typed("turn on  the lamp");
        line.delete_word();
        assert_eq!(line.text(), "turn on  the ");
        line.delete_word();
        assert_eq!(line.text(), "turn on  ");
        line.left();
        line.delete_to_start();
        assert_eq!((line.text(), line.cursor()), (" ", 0));
    }

    #[test]
    fn history_browses_back_and_restores_the_draft() {
        let mut line = typed("first");
        line.take();
        line.insert_str("second").unwrap();
        line.take();
        line.insert_str("draft").unwrap();
        line.history_back();
        assert_eq!(line.text(), "second");
        line.history_back();
        assert_eq!(line.text(), "first");
        line.history_back();
        assert_eq!(line.text(), "first");
        line.history_forward();
        assert_eq!(line.text(), "second");
        line.history_forward();
        assert_eq!(line.text(), "draft");
    }

    #[test]
    fn pasted_line_breaks_become_spaces() {
        assert_eq!(typed("a\r\nb\tc\u{7}").text(), "a b c");
    }

    #[test]
    fn a_paste_goes_in_at_the_cursor_and_one_past_the_cap_is_refused_whole() {
        let mut line = typed("héllo");
        line.left();
        line.left();
        line.insert_str("ΑΒ\nΓ").unwrap();
        assert_eq!((line.text(), line.cursor()), ("hélΑΒ Γlo", 7));
        let mut line = typed("x");
        line.insert_str(&"y".repeat(INPUT_MAX_BYTES - 1)).unwrap();
        assert_eq!(line.text().len(), INPUT_MAX_BYTES);
        let refused = line.insert_str("z").unwrap_err();
        assert_eq!(refused, TooLong { pasted: 1 });
        line.insert('z');
        assert_eq!(line.text().len(), INPUT_MAX_BYTES);
        let mut empty = InputLine::default();
        let big = "w".repeat(5 << 20);
        let refused = empty.insert_str(&big).unwrap_err();
        assert!(empty.is_empty());
        assert_eq!(
            refused.to_string(),
            "The paste of 5.0 MiB was not taken: the input line holds at most 1.0 MiB."
        );
    }

    #[test]
    fn the_history_keeps_the_newest_lines_within_its_bounds() {
        let mut line = InputLine::default();
        for i in 0..HISTORY_LINES + 5 {
            line.insert_str(&format!("line {i}")).unwrap();
            line.take();
        }
        assert_eq!(line.history.len(), HISTORY_LINES);
        assert_eq!(line.history.front().map(String::as_str), Some("line 5"));
        let long = "l".repeat(INPUT_MAX_BYTES);
        for _ in 0..6 {
            line.insert_str(&long).unwrap();
            line.take();
            line.insert_str("short").unwrap();
            line.take();
        }
        let bytes: usize = line.history.iter().map(String::len).sum();
        assert!(bytes <= HISTORY_BYTES, "{bytes}");
        assert_eq!(line.history.back().map(String::as_str), Some("short"));
    }

    #[test]
    fn transcript_scroll_sticks_to_the_bottom_at_the_end() {
        let mut view = View::default();
        view.layout.transcript.height = 10;
        view.layout.transcript_rows = 30;
        view.scroll_transcript(-3);
        assert_eq!(view.transcript_top, Some(17));
        view.scroll_transcript(2);
        assert_eq!(view.transcript_top, Some(19));
        view.scroll_transcript(5);
        assert_eq!(view.transcript_top, None);
        view.scroll_transcript(-100);
        assert_eq!(view.transcript_top, Some(0));
    }

    #[test]
    fn short_transcript_never_leaves_the_bottom() {
        let mut view = View::default();
        view.layout.transcript.height = 10;
        view.layout.transcript_rows = 4;
        view.scroll_transcript(-3);
        assert_eq!(view.transcript_top, None);
    }
}
