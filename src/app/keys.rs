//! Keyboard, mouse and paste input of the TUI, turned into state changes and effects. The key
//! map is listed once, in [`KEY_HELP`], which the help popup and footer draw.

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseEvent, MouseEventKind};

use super::view::{Focus, Popup};
use super::{App, Effect, Msg};

/// Every key binding, as the help popup lists it: (keys, what they do).
pub const KEY_HELP: &[(&str, &str)] = &[
    (
        "Enter",
        "send the typed message (interrupts Gemini if it is speaking)",
    ),
    (
        "←/→  Home/End",
        "move in the input line (also Ctrl-A / Ctrl-E)",
    ),
    (
        "Backspace/Del",
        "delete a character; Ctrl-W a word, Ctrl-U to the start",
    ),
    (
        "↑/↓",
        "input: earlier messages · transcript: scroll · tool log: select",
    ),
    (
        "PgUp/PgDn",
        "scroll the transcript (the tool log or popup when focused)",
    ),
    (
        "Mouse wheel",
        "scroll the pane under the pointer; click a tool call to select it",
    ),
    (
        "Tab / Shift-Tab",
        "move focus: input → transcript → tool log → devices",
    ),
    (
        "Enter on a tool call",
        "show its full arguments and the response sent",
    ),
    ("F2", "show or hide the device panel"),
    ("F3", "mute or unmute the microphone"),
    (
        "F4",
        "audio details: devices, resampling, drops, underruns, latencies",
    ),
    (
        "F5",
        "push-to-talk (--push-to-talk): start speaking, press again when done",
    ),
    (
        "F6",
        "open the audio devices again (after one failed or was plugged in)",
    ),
    (
        "Ctrl-B",
        "barge in: silence Gemini now (speak or type after it)",
    ),
    (
        "Esc",
        "close a popup or notice; back to the input; quit when the input is empty",
    ),
    ("q", "quit (outside the input line)"),
    ("? or F1", "this help (? when the input line is empty)"),
    ("Ctrl-R", "reconnect after the connection was lost for good"),
    ("Ctrl-C", "quit"),
];

/// The footer's short list.
pub const FOOTER_KEYS: &[(&str, &str)] = &[
    ("Enter", "send"),
    ("F1", "help"),
    ("Ctrl-C", "quit"),
    ("F3", "mute"),
    ("Ctrl-B", "barge in"),
    ("Tab", "focus"),
    ("PgUp/PgDn", "scroll"),
];

impl App {
    /// Leaves the app: closes the session first when it is still open.
    pub(super) fn quit(&mut self) -> Vec<Effect> {
        self.view.quit = true;
        self.update(Msg::EndSession)
    }

    pub(super) fn on_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        // Terminals that report releases and repeats send them too; act on presses.
        if key.kind == KeyEventKind::Release {
            return Vec::new();
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl && matches!(key.code, KeyCode::Char('c')) {
            return self.quit();
        }
        if ctrl && matches!(key.code, KeyCode::Char('r')) {
            return self.update(Msg::Retry);
        }
        if ctrl && matches!(key.code, KeyCode::Char('b')) {
            return self.barge_in();
        }
        match key.code {
            KeyCode::F(3) => return self.toggle_mute(),
            KeyCode::F(4) => {
                self.view.popup = match self.view.popup {
                    Some(Popup::Audio { .. }) => None,
                    _ => Some(Popup::Audio { scroll: 0 }),
                };
                return Vec::new();
            }
            KeyCode::F(5) => return self.toggle_talk(),
            KeyCode::F(6) => {
                if !self.audio.enabled {
                    self.notice(
                        super::NoticeLevel::Info,
                        "Audio is off (--no-audio or audio.enabled = false).".to_owned(),
                    );
                    return Vec::new();
                }
                return vec![Effect::ReopenAudio];
            }
            _ => {}
        }
        if key.code == KeyCode::F(1) {
            self.toggle_help();
            return Vec::new();
        }
        if key.code == KeyCode::F(2) {
            self.view.show_devices = !self.view.show_devices;
            if !self.view.show_devices && self.view.focus == Focus::Devices {
                self.view.focus = Focus::Input;
            }
            return Vec::new();
        }
        if let Some(popup) = self.view.popup {
            self.on_popup_key(popup, key);
            return Vec::new();
        }
        match key.code {
            KeyCode::Tab => {
                self.cycle_focus(true);
                return Vec::new();
            }
            KeyCode::BackTab => {
                self.cycle_focus(false);
                return Vec::new();
            }
            KeyCode::Esc => return self.escape(),
            KeyCode::PageUp if self.view.focus != Focus::ToolLog => {
                self.view.scroll_transcript(-self.view.transcript_page());
                return Vec::new();
            }
            KeyCode::PageDown if self.view.focus != Focus::ToolLog => {
                self.view.scroll_transcript(self.view.transcript_page());
                return Vec::new();
            }
            _ => {}
        }
        match self.view.focus {
            Focus::Input => self.on_input_key(key),
            Focus::Transcript => {
                match key.code {
                    KeyCode::Up => self.view.scroll_transcript(-1),
                    KeyCode::Down => self.view.scroll_transcript(1),
                    KeyCode::Home => self.view.transcript_top = Some(0),
                    KeyCode::End => self.view.transcript_top = None,
                    _ => return self.on_pane_char(key),
                }
                Vec::new()
            }
            Focus::ToolLog => {
                match key.code {
                    KeyCode::Up => self.select_tool(-1),
                    KeyCode::Down => self.select_tool(1),
                    KeyCode::PageUp => self.select_tool(-5),
                    KeyCode::PageDown => self.select_tool(5),
                    KeyCode::Home if !self.tool_calls.is_empty() => {
                        self.view.tool_selected = Some(0)
                    }
                    KeyCode::End => self.view.tool_selected = None,
                    KeyCode::Enter => self.open_selected_tool(),
                    _ => return self.on_pane_char(key),
                }
                Vec::new()
            }
            Focus::Devices => self.on_pane_char(key),
        }
    }

    fn on_input_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let input = &mut self.view.input;
        match key.code {
            // Until the session is ready the line stays in the box rather than being lost.
            KeyCode::Enter if self.connection == super::Connection::Connected => {
                let text = input.take();
                return self.update(Msg::UserText(text));
            }
            KeyCode::Char('?') if input.is_empty() => self.toggle_help(),
            KeyCode::Char('a') if ctrl => input.home(),
            KeyCode::Char('e') if ctrl => input.end(),
            KeyCode::Char('w') if ctrl => input.delete_word(),
            KeyCode::Char('u') if ctrl => input.delete_to_start(),
            KeyCode::Char(_) if ctrl => {}
            KeyCode::Char(c) => input.insert(c),
            KeyCode::Backspace => input.backspace(),
            KeyCode::Delete => input.delete(),
            KeyCode::Left => input.left(),
            KeyCode::Right => input.right(),
            KeyCode::Home => input.home(),
            KeyCode::End => input.end(),
            KeyCode::Up => input.history_back(),
            KeyCode::Down => input.history_forward(),
            _ => {}
        }
        Vec::new()
    }

    /// A printable key in a pane other than the input: `q` quits, `?` helps, anything else
    /// starts typing a message.
    fn on_pane_char(&mut self, key: KeyEvent) -> Vec<Effect> {
        if key.modifiers.contains(KeyModifiers::CONTROL) {
            return Vec::new();
        }
        match key.code {
            KeyCode::Char('q') => self.quit(),
            KeyCode::Char('?') => {
                self.toggle_help();
                Vec::new()
            }
            KeyCode::Char(c) => {
                self.view.focus = Focus::Input;
                self.view.input.insert(c);
                Vec::new()
            }
            _ => Vec::new(),
        }
    }

    fn on_popup_key(&mut self, popup: Popup, key: KeyEvent) {
        let scroll = |s: u16, by: i32| (i32::from(s) + by).clamp(0, i32::from(u16::MAX)) as u16;
        let moved = match key.code {
            KeyCode::Esc | KeyCode::Enter | KeyCode::Char('q') => {
                self.view.popup = None;
                return;
            }
            KeyCode::Char('?') if matches!(popup, Popup::Help { .. }) => {
                self.view.popup = None;
                return;
            }
            KeyCode::Up => -1,
            KeyCode::Down => 1,
            KeyCode::PageUp => -10,
            KeyCode::PageDown => 10,
            KeyCode::Home => -i32::from(u16::MAX),
            _ => return,
        };
        self.view.popup = Some(match popup {
            Popup::Help { scroll: s } => Popup::Help {
                scroll: scroll(s, moved),
            },
            Popup::ToolDetail { index, scroll: s } => Popup::ToolDetail {
                index,
                scroll: scroll(s, moved),
            },
            Popup::Audio { scroll: s } => Popup::Audio {
                scroll: scroll(s, moved),
            },
        });
    }

    pub(super) fn on_mouse(&mut self, mouse: MouseEvent) {
        let layout = self.view.layout;
        let (column, row) = (mouse.column, mouse.row);
        match mouse.kind {
            MouseEventKind::ScrollUp | MouseEventKind::ScrollDown => {
                let step: isize = if mouse.kind == MouseEventKind::ScrollUp {
                    -3
                } else {
                    3
                };
                if let Some(popup) = self.view.popup {
                    if layout.popup.is_some_and(|a| a.contains(column, row)) {
                        let key = if step < 0 { KeyCode::Up } else { KeyCode::Down };
                        for _ in 0..3 {
                            self.on_popup_key(popup, KeyEvent::from(key));
                        }
                    }
                } else if layout.tool_log.contains(column, row) {
                    self.select_tool(step.signum());
                } else {
                    self.view.scroll_transcript(step);
                }
            }
            MouseEventKind::Down(_) if self.view.popup.is_none() => {
                if layout.tool_log.contains(column, row) {
                    self.view.focus = Focus::ToolLog;
                    let first = self.tool_log_first_row();
                    let index = first + usize::from(row - layout.tool_log.y);
                    if index < self.tool_calls.len() {
                        if self.view.tool_selected == Some(index) {
                            self.open_selected_tool();
                        } else {
                            self.view.tool_selected = Some(index);
                        }
                    }
                } else if layout.transcript.contains(column, row) {
                    self.view.focus = Focus::Transcript;
                } else if layout.devices.is_some_and(|a| a.contains(column, row)) {
                    self.view.focus = Focus::Devices;
                } else {
                    self.view.focus = Focus::Input;
                }
            }
            _ => {}
        }
    }

    /// The first tool-log row on screen: the UI keeps the selection (or the newest call)
    /// in view the same way.
    pub fn tool_log_first_row(&self) -> usize {
        let rows = usize::from(self.view.layout.tool_log.height).max(1);
        let last = self
            .view
            .tool_selected
            .unwrap_or(self.tool_calls.len().saturating_sub(1));
        (last + 1).saturating_sub(rows)
    }

    fn escape(&mut self) -> Vec<Effect> {
        if self.visible_notice().is_some() {
            self.view.notices_dismissed = self.notices.len();
        } else if self.view.focus != Focus::Input {
            self.view.focus = Focus::Input;
        } else if self.view.input.is_empty() {
            return self.quit();
        }
        Vec::new()
    }

    fn toggle_help(&mut self) {
        self.view.popup = match self.view.popup {
            Some(Popup::Help { .. }) => None,
            _ => Some(Popup::Help { scroll: 0 }),
        };
    }

    fn cycle_focus(&mut self, forward: bool) {
        let mut order = vec![Focus::Input, Focus::Transcript, Focus::ToolLog];
        if self.view.show_devices && self.view.layout.devices.is_some() {
            order.push(Focus::Devices);
        }
        let at = order
            .iter()
            .position(|f| *f == self.view.focus)
            .unwrap_or(0);
        let next = if forward {
            (at + 1) % order.len()
        } else {
            (at + order.len() - 1) % order.len()
        };
        self.view.focus = order[next];
    }

    fn select_tool(&mut self, by: isize) {
        let count = self.tool_calls.len();
        if count == 0 {
            return;
        }
        let current = self.view.tool_selected.unwrap_or(count - 1);
        let next = current.saturating_add_signed(by).min(count - 1);
        self.view.tool_selected = Some(next);
    }

    fn open_selected_tool(&mut self) {
        let index = self
            .view
            .tool_selected
            .unwrap_or(self.tool_calls.len().saturating_sub(1));
        if index < self.tool_calls.len() {
            self.view.tool_selected = Some(index);
            self.view.popup = Some(Popup::ToolDetail { index, scroll: 0 });
        }
    }
}
