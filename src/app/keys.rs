//! The TUI's key map, as one table: each row is a key (or keys), the actions it stands for in
//! each part of the screen, and its help text. Key handling, the help popup and the footer are
//! all read from [`KEY_MAP`], so they cannot disagree. Mouse and paste input live here too.
//!
//! Keys only change the view; what the user *means* (send, barge in, mute, end the session…)
//! leaves as [`Effect::Intent`], which the loop applies as a message of its own, so a recording
//! holds the intent and never the raw keys (which could spell a secret).

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseEvent, MouseEventKind};

use super::slash::{model_command, screen_command};
use super::view::{Focus, Popup};
use super::{App, ConnectionState, Effect, Msg, NoticeLevel, ReplayEffect, ToolRow};

/// Where a binding applies. Earlier scopes in [`Scope::PRIORITY`] win.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Always, popups and the editor included.
    Anywhere,
    /// While the editor (a tool call's arguments or result) is open.
    Editor,
    /// While a popup is open.
    Popup,
    /// While the help popup is open.
    HelpPopup,
    /// While the tool list is open.
    ToolsPopup,
    /// While the event inspector is open.
    InspectorPopup,
    /// While replaying a recording, with no popup open.
    Replay,
    /// With no popup open, whatever has the focus.
    Panes,
    /// With no popup open and the focus anywhere but the tool log.
    NotToolLog,
    Input,
    /// The input line, while it is empty.
    EmptyInput,
    /// The input line, while it holds a slash command.
    SlashInput,
    /// While a notice asks the user yes or no (`/model`).
    Confirming,
    Transcript,
    ToolLog,
    /// Any pane but the input line.
    NotInput,
}

impl Scope {
    const PRIORITY: [Scope; 16] = [
        Scope::Anywhere,
        Scope::Editor,
        Scope::Confirming,
        Scope::HelpPopup,
        Scope::ToolsPopup,
        Scope::InspectorPopup,
        Scope::Popup,
        Scope::Replay,
        Scope::SlashInput,
        Scope::Panes,
        Scope::NotToolLog,
        Scope::EmptyInput,
        Scope::Input,
        Scope::Transcript,
        Scope::ToolLog,
        Scope::NotInput,
    ];
}

/// What a key does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    // What the user means: these become intents.
    Send,
    BargeIn,
    ToggleMute,
    PushToTalk,
    ReopenAudio,
    /// Step echo handling to the next mode (aec → gate → off).
    SwitchEcho,
    Retry,
    Quit,
    /// Turn the selected tool of the tool list on or off.
    ToggleTool,
    /// Restart the MCP server of the selected row of the tool list.
    RestartServer,
    /// Yes to the question a notice asks (`/model`).
    Confirm,
    /// No to it.
    Decline,
    /// Tab in a slash command: complete it.
    Complete,
    // The view.
    Help,
    ToolList,
    SelectToolRow(i8),
    AudioDetails,
    ToggleDevices,
    FocusNext,
    FocusPrevious,
    Escape,
    CursorLeft,
    CursorRight,
    CursorHome,
    CursorEnd,
    DeleteBack,
    DeleteForward,
    DeleteWord,
    DeleteToStart,
    HistoryBack,
    HistoryForward,
    ScrollTranscript(i8),
    TranscriptPage(i8),
    TranscriptTop,
    TranscriptBottom,
    SelectTool(i8),
    FirstTool,
    LastTool,
    OpenToolCall,
    /// Copy the selected call and its response to the clipboard.
    CopyToolCall,
    // The event inspector.
    Inspector,
    SelectFrame(i8),
    FramePage(i8),
    FirstFrame,
    FollowFrames,
    ExpandFrame,
    NextWireFilter,
    CopyFrame,
    // The person's side of tool calls.
    GoToWaiting,
    ApproveCall,
    DenyCall,
    EditCall,
    AnswerCall,
    SubmitEditor,
    CloseEditor,
    ClosePopup,
    ScrollPopup(i8),
    PopupPage(i8),
    PopupTop,
    // A replay's own controls.
    PauseReplay,
    StepReplay,
    /// Twice as fast (1) or half as fast (-1).
    ReplaySpeed(i8),
}

/// A key with the Ctrl modifier or without.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chord {
    pub code: KeyCode,
    pub ctrl: bool,
}

const fn key(code: KeyCode) -> Chord {
    Chord { code, ctrl: false }
}

const fn ctrl(c: char) -> Chord {
    Chord {
        code: KeyCode::Char(c),
        ctrl: true,
    }
}

const fn ch(c: char) -> Chord {
    key(KeyCode::Char(c))
}

/// One row of the key map: the keys as the help shows them, what they do there, when the help
/// lists them, and how the footer shows them (rows without a footer entry stay out of it).
pub struct KeyRow {
    pub keys: &'static str,
    pub help: &'static str,
    /// When the row means something: a replay has its own keys, and audio keys need audio.
    pub when: When,
    pub footer: Option<Footer>,
    pub bindings: &'static [(Scope, Chord, Action)],
}

/// When a key means something to the person looking at the screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    Always,
    /// In a live session (a replay sends nothing).
    Live,
    /// While replaying a recording.
    Replay,
    /// In a live session with audio.
    Audio,
    /// In a live session with a microphone (asked for, or open).
    Mic,
    /// In a live session whose microphone is open now.
    MicOpen,
    /// In a live session whose speaker is open now.
    SpeakerOpen,
    /// In a live session in push-to-talk mode.
    PushToTalk,
}

/// A key in the footer: its place (the footer is cut at the screen's width, so the most useful
/// come first), when it is offered, the key and a word or two.
pub struct Footer {
    pub rank: u8,
    pub when: When,
    pub key: &'static str,
    pub what: &'static str,
}

const fn footer(rank: u8, when: When, key: &'static str, what: &'static str) -> Option<Footer> {
    Some(Footer {
        rank,
        when,
        key,
        what,
    })
}

/// The footer's keys for this app, in order.
pub fn footer_keys(app: &App) -> Vec<&'static Footer> {
    let mut keys: Vec<&Footer> = KEY_MAP
        .iter()
        .filter(|row| app.key_applies(row.when))
        .filter_map(|row| row.footer.as_ref())
        .filter(|footer| app.key_applies(footer.when))
        .collect();
    keys.sort_by_key(|f| f.rank);
    keys
}

/// The rows the help lists for this app.
pub fn help_rows(app: &App) -> impl Iterator<Item = &'static KeyRow> {
    KEY_MAP.iter().filter(|row| app.key_applies(row.when))
}

use Action as A;
use Scope as S;
use When as W;

/// What the first Esc on an empty line says: the second one quits.
pub const ESC_AGAIN_QUITS: &str = "Esc again quits (so do Ctrl-C, and q outside the input line).";

/// The key that switches echo handling (the transcript's echo hint names it).
pub const ECHO_KEY: &str = "F9";

/// Every key binding, in the order the help lists them.
pub const KEY_MAP: &[KeyRow] = &[
    KeyRow {
        keys: "Enter",
        when: W::Live,
        help: "send the typed message (interrupts Gemini if it is speaking)",
        footer: footer(0, W::Live, "Enter", "send"),
        bindings: &[(S::Input, key(KeyCode::Enter), A::Send)],
    },
    KeyRow {
        keys: "←/→  Home/End",
        when: W::Live,
        help: "move in the input line or the editor (also Ctrl-A / Ctrl-E)",
        footer: None,
        bindings: &[
            (S::Editor, key(KeyCode::Left), A::CursorLeft),
            (S::Editor, key(KeyCode::Right), A::CursorRight),
            (S::Editor, key(KeyCode::Home), A::CursorHome),
            (S::Editor, key(KeyCode::End), A::CursorEnd),
            (S::Editor, ctrl('a'), A::CursorHome),
            (S::Editor, ctrl('e'), A::CursorEnd),
            (S::Input, key(KeyCode::Left), A::CursorLeft),
            (S::Input, key(KeyCode::Right), A::CursorRight),
            (S::Input, key(KeyCode::Home), A::CursorHome),
            (S::Input, key(KeyCode::End), A::CursorEnd),
            (S::Input, ctrl('a'), A::CursorHome),
            (S::Input, ctrl('e'), A::CursorEnd),
        ],
    },
    KeyRow {
        keys: "Backspace/Del",
        when: W::Live,
        help: "delete a character; Ctrl-W a word, Ctrl-U to the start",
        footer: None,
        bindings: &[
            (S::Editor, key(KeyCode::Backspace), A::DeleteBack),
            (S::Editor, key(KeyCode::Delete), A::DeleteForward),
            (S::Editor, ctrl('w'), A::DeleteWord),
            (S::Editor, ctrl('u'), A::DeleteToStart),
            (S::Input, key(KeyCode::Backspace), A::DeleteBack),
            (S::Input, key(KeyCode::Delete), A::DeleteForward),
            (S::Input, ctrl('w'), A::DeleteWord),
            (S::Input, ctrl('u'), A::DeleteToStart),
        ],
    },
    KeyRow {
        keys: "↑/↓",
        when: W::Always,
        help: "input: earlier messages · transcript: scroll · tool log: select",
        footer: None,
        bindings: &[
            (S::Input, key(KeyCode::Up), A::HistoryBack),
            (S::Input, key(KeyCode::Down), A::HistoryForward),
            (S::Transcript, key(KeyCode::Up), A::ScrollTranscript(-1)),
            (S::Transcript, key(KeyCode::Down), A::ScrollTranscript(1)),
            (S::Transcript, key(KeyCode::Home), A::TranscriptTop),
            (S::Transcript, key(KeyCode::End), A::TranscriptBottom),
            // Focus starts in the input line: with nothing typed, End has nothing to move.
            (S::EmptyInput, key(KeyCode::End), A::TranscriptBottom),
            (S::ToolLog, key(KeyCode::Up), A::SelectTool(-1)),
            (S::ToolLog, key(KeyCode::Down), A::SelectTool(1)),
            (S::ToolLog, key(KeyCode::Home), A::FirstTool),
            (S::ToolLog, key(KeyCode::End), A::LastTool),
            (S::Popup, key(KeyCode::Up), A::ScrollPopup(-1)),
            (S::Popup, key(KeyCode::Down), A::ScrollPopup(1)),
            (S::Popup, key(KeyCode::Home), A::PopupTop),
        ],
    },
    KeyRow {
        keys: "PgUp/PgDn",
        when: W::Always,
        help: "scroll the transcript (the tool log or popup when focused)",
        footer: footer(6, W::Always, "PgUp/PgDn", "scroll"),
        bindings: &[
            (S::NotToolLog, key(KeyCode::PageUp), A::TranscriptPage(-1)),
            (S::NotToolLog, key(KeyCode::PageDown), A::TranscriptPage(1)),
            (S::ToolLog, key(KeyCode::PageUp), A::SelectTool(-5)),
            (S::ToolLog, key(KeyCode::PageDown), A::SelectTool(5)),
            (S::Popup, key(KeyCode::PageUp), A::PopupPage(-1)),
            (S::Popup, key(KeyCode::PageDown), A::PopupPage(1)),
        ],
    },
    KeyRow {
        keys: "Mouse wheel",
        when: W::Always,
        help: "scroll the pane under the pointer; click a tool call to select it",
        footer: None,
        bindings: &[],
    },
    KeyRow {
        keys: "Tab / Shift-Tab",
        when: W::Always,
        help: "move focus: input → transcript → tool log → devices",
        footer: footer(5, W::Live, "Tab", "focus"),
        bindings: &[
            (S::Panes, key(KeyCode::Tab), A::FocusNext),
            (S::Panes, key(KeyCode::BackTab), A::FocusPrevious),
        ],
    },
    KeyRow {
        keys: "Tab after /",
        when: W::Live,
        help: "complete a command, a voice, a model id or a file's path",
        footer: None,
        bindings: &[(S::SlashInput, key(KeyCode::Tab), A::Complete)],
    },
    KeyRow {
        keys: "y / n",
        when: W::Live,
        help: "answer a notice's question (/model asks before it starts a fresh session)",
        footer: None,
        bindings: &[
            (S::Confirming, ch('y'), A::Confirm),
            (S::Confirming, ch('n'), A::Decline),
            (S::Confirming, key(KeyCode::Esc), A::Decline),
        ],
    },
    KeyRow {
        keys: "Enter on a tool call",
        when: W::Always,
        help: "show its full arguments and the response sent",
        footer: None,
        bindings: &[(S::ToolLog, key(KeyCode::Enter), A::OpenToolCall)],
    },
    KeyRow {
        keys: "y on a tool call",
        when: W::Always,
        help: "copy the call and its response as JSON (OSC 52: works over SSH and in tmux)",
        footer: None,
        bindings: &[(S::ToolLog, ch('y'), A::CopyToolCall)],
    },
    KeyRow {
        keys: "F12 or /events",
        when: W::Always,
        help: "event inspector: every frame both ways; ↑/↓ select, Enter JSON, f filter, y copy, End newest",
        footer: None,
        bindings: &[
            (S::Anywhere, key(KeyCode::F(12)), A::Inspector),
            (S::InspectorPopup, key(KeyCode::Up), A::SelectFrame(-1)),
            (S::InspectorPopup, key(KeyCode::Down), A::SelectFrame(1)),
            (S::InspectorPopup, key(KeyCode::PageUp), A::FramePage(-1)),
            (S::InspectorPopup, key(KeyCode::PageDown), A::FramePage(1)),
            (S::InspectorPopup, key(KeyCode::Home), A::FirstFrame),
            (S::InspectorPopup, key(KeyCode::End), A::FollowFrames),
            (S::InspectorPopup, key(KeyCode::Enter), A::ExpandFrame),
            (S::InspectorPopup, ch('f'), A::NextWireFilter),
            (S::InspectorPopup, ch('y'), A::CopyFrame),
        ],
    },
    KeyRow {
        keys: "F7; a d e r",
        when: W::Live,
        help: "go to a waiting call; approve · deny · edit args · answer by hand",
        footer: None,
        bindings: &[
            (S::Anywhere, key(KeyCode::F(7)), A::GoToWaiting),
            (S::ToolLog, ch('a'), A::ApproveCall),
            (S::ToolLog, ch('d'), A::DenyCall),
            (S::ToolLog, ch('e'), A::EditCall),
            (S::ToolLog, ch('r'), A::AnswerCall),
            (S::Editor, key(KeyCode::Enter), A::SubmitEditor),
            (S::Editor, key(KeyCode::Esc), A::CloseEditor),
        ],
    },
    KeyRow {
        keys: "F2",
        when: W::Always,
        help: "show or hide the device panel",
        footer: None,
        bindings: &[(S::Anywhere, key(KeyCode::F(2)), A::ToggleDevices)],
    },
    KeyRow {
        keys: "F3",
        when: W::Mic,
        help: "mute or unmute the microphone",
        // Offered where there is a microphone to mute, not merely one asked for.
        footer: footer(3, W::MicOpen, "F3", "mute"),
        bindings: &[(S::Anywhere, key(KeyCode::F(3)), A::ToggleMute)],
    },
    KeyRow {
        keys: "F4",
        when: W::Always,
        help: "audio details: devices, echo canceller, drops, underruns, latencies",
        footer: None,
        bindings: &[(S::Anywhere, key(KeyCode::F(4)), A::AudioDetails)],
    },
    KeyRow {
        keys: "F5",
        when: W::PushToTalk,
        help: "push-to-talk (--push-to-talk): start speaking, press again when done",
        footer: footer(3, W::PushToTalk, "F5", "talk"),
        bindings: &[(S::Anywhere, key(KeyCode::F(5)), A::PushToTalk)],
    },
    KeyRow {
        keys: "F6",
        when: W::Audio,
        help: "open the audio devices again (after one failed or was plugged in)",
        footer: None,
        bindings: &[(S::Anywhere, key(KeyCode::F(6)), A::ReopenAudio)],
    },
    KeyRow {
        keys: ECHO_KEY,
        when: W::Mic,
        help: "echo handling: aec → gate → off (when Gemini interrupts itself)",
        footer: None,
        bindings: &[(S::Anywhere, key(KeyCode::F(9)), A::SwitchEcho)],
    },
    KeyRow {
        keys: "F8; Space r",
        when: W::Live,
        help: "the tools and MCP servers: Space turns one on or off, r restarts a server",
        footer: None,
        bindings: &[
            (S::Anywhere, key(KeyCode::F(8)), A::ToolList),
            (S::ToolsPopup, key(KeyCode::Up), A::SelectToolRow(-1)),
            (S::ToolsPopup, key(KeyCode::Down), A::SelectToolRow(1)),
            (S::ToolsPopup, ch(' '), A::ToggleTool),
            (S::ToolsPopup, ch('r'), A::RestartServer),
        ],
    },
    KeyRow {
        keys: "Ctrl-B",
        when: W::Live,
        help: "barge in: silence Gemini now (speak or type after it)",
        // Typing over Gemini interrupts it too: the footer offers Ctrl-B where it is heard.
        footer: footer(4, W::SpeakerOpen, "Ctrl-B", "barge in"),
        bindings: &[(S::Anywhere, ctrl('b'), A::BargeIn)],
    },
    KeyRow {
        keys: "Esc",
        when: W::Always,
        help: "close a popup or notice; back to the input; on an empty line twice, quit",
        footer: None,
        bindings: &[
            (S::Popup, key(KeyCode::Esc), A::ClosePopup),
            (S::Popup, key(KeyCode::Enter), A::ClosePopup),
            (S::Popup, ch('q'), A::ClosePopup),
            (S::Panes, key(KeyCode::Esc), A::Escape),
        ],
    },
    KeyRow {
        keys: "q",
        when: W::Always,
        help: "quit (outside the input line; anywhere in a replay)",
        footer: footer(2, W::Replay, "q", "quit"),
        bindings: &[
            (S::Replay, ch('q'), A::Quit),
            (S::NotInput, ch('q'), A::Quit),
        ],
    },
    KeyRow {
        keys: "? or F1",
        when: W::Always,
        help: "this help (? when the input line is empty)",
        footer: footer(1, W::Always, "F1", "help"),
        bindings: &[
            (S::Anywhere, key(KeyCode::F(1)), A::Help),
            (S::HelpPopup, ch('?'), A::ClosePopup),
            (S::EmptyInput, ch('?'), A::Help),
            (S::NotInput, ch('?'), A::Help),
        ],
    },
    KeyRow {
        keys: "Space",
        when: W::Replay,
        help: "pause or resume the replay",
        footer: footer(0, W::Replay, "Space", "pause"),
        bindings: &[(S::Replay, ch(' '), A::PauseReplay)],
    },
    KeyRow {
        keys: "n",
        when: W::Replay,
        help: "step one recorded event while paused",
        footer: footer(1, W::Replay, "n", "step"),
        bindings: &[(S::Replay, ch('n'), A::StepReplay)],
    },
    KeyRow {
        keys: "+ / -",
        when: W::Replay,
        help: "replay twice as fast, or half as fast",
        footer: footer(3, W::Replay, "+/-", "speed"),
        bindings: &[
            (S::Replay, ch('+'), A::ReplaySpeed(1)),
            (S::Replay, ch('='), A::ReplaySpeed(1)),
            (S::Replay, ch('-'), A::ReplaySpeed(-1)),
        ],
    },
    KeyRow {
        keys: "Ctrl-R",
        when: W::Live,
        help: "reconnect after the connection was lost for good",
        footer: None,
        bindings: &[(S::Anywhere, ctrl('r'), A::Retry)],
    },
    KeyRow {
        keys: "Ctrl-C",
        when: W::Always,
        help: "quit",
        footer: footer(2, W::Live, "Ctrl-C", "quit"),
        bindings: &[(S::Anywhere, ctrl('c'), A::Quit)],
    },
];

/// The action `chord` stands for in `scope`, if any.
fn lookup(scope: Scope, chord: Chord) -> Option<Action> {
    KEY_MAP
        .iter()
        .flat_map(|row| row.bindings)
        .find(|(s, c, _)| *s == scope && *c == chord)
        .map(|(_, _, action)| *action)
}

impl App {
    /// True when keys offered `when` mean something in this app.
    pub fn key_applies(&self, when: When) -> bool {
        let live = self.replay.is_none();
        match when {
            When::Always => true,
            When::Live => live,
            When::Replay => !live,
            When::Audio => live && self.audio.enabled,
            When::Mic => live && (self.audio.mic_wanted || self.audio.input.is_some()),
            When::MicOpen => live && self.audio.input.is_some(),
            When::SpeakerOpen => live && self.audio.output.is_some(),
            When::PushToTalk => live && self.audio.push_to_talk,
        }
    }

    /// True when bindings of `scope` apply in the app's current state.
    fn scope_applies(&self, scope: Scope) -> bool {
        let editing = self.view.editor.is_some();
        // The editor is over everything: while it is open, no other scope but Anywhere applies.
        let popup = self.view.popup.is_some() || editing;
        let focus = self.view.focus;
        match scope {
            Scope::Anywhere => true,
            Scope::Editor => editing,
            Scope::Popup => popup && !editing,
            Scope::HelpPopup => !editing && matches!(self.view.popup, Some(Popup::Help { .. })),
            Scope::ToolsPopup => !editing && matches!(self.view.popup, Some(Popup::Tools { .. })),
            Scope::InspectorPopup => {
                !editing && matches!(self.view.popup, Some(Popup::Inspector(_)))
            }
            Scope::Replay => !popup && self.replay.is_some(),
            Scope::Panes => !popup,
            Scope::NotToolLog => !popup && focus != Focus::ToolLog,
            Scope::Input => !popup && focus == Focus::Input,
            Scope::EmptyInput => !popup && focus == Focus::Input && self.view.input.is_empty(),
            Scope::SlashInput => {
                !popup && focus == Focus::Input && self.view.input.text().starts_with('/')
            }
            Scope::Confirming => !popup && self.view.confirm_model.is_some(),
            Scope::Transcript => !popup && focus == Focus::Transcript,
            Scope::ToolLog => !popup && focus == Focus::ToolLog,
            Scope::NotInput => !popup && focus != Focus::Input,
        }
    }

    /// The action a key stands for here and now.
    pub fn key_action(&self, key: KeyEvent) -> Option<Action> {
        let chord = Chord {
            code: key.code,
            ctrl: key.modifiers.contains(KeyModifiers::CONTROL),
        };
        Scope::PRIORITY
            .iter()
            .filter(|scope| self.scope_applies(**scope))
            .find_map(|scope| lookup(*scope, chord))
    }

    pub(super) fn on_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        // Terminals that report releases and repeats send them too; act on presses.
        if key.kind == KeyEventKind::Release {
            return Vec::new();
        }
        // The session was ended on purpose: the last screen stays to be read until a key.
        if self.ended_cleanly() && self.replay.is_none() {
            self.view.quit = true;
            return Vec::new();
        }
        if let Some(action) = self.key_action(key) {
            return self.perform(action);
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        // Any other printable key types: in the editor, in the input line, or (from a pane)
        // moving there.
        if let KeyCode::Char(c) = key.code
            && !ctrl
            && let Some(editor) = &mut self.view.editor
        {
            editor.line.insert(c);
            return Vec::new();
        }
        // A replay only plays: there is no line to type into.
        if let KeyCode::Char(c) = key.code
            && !ctrl
            && self.view.popup.is_none()
            && self.replay.is_none()
        {
            self.view.focus = Focus::Input;
            self.view.input.insert(c);
        }
        Vec::new()
    }

    /// Leaves the app. In a live session that ends the session first (an intent, so it is
    /// recorded); a replay just stops.
    pub(super) fn quit(&mut self) -> Vec<Effect> {
        self.view.quit = true;
        self.intent(Msg::EndSession)
    }

    /// What the user means, for the loop to apply as a message; a replay only plays, so
    /// there it means nothing.
    pub(super) fn intent(&self, msg: Msg) -> Vec<Effect> {
        if self.replay.is_some() {
            Vec::new()
        } else {
            vec![Effect::Intent(msg)]
        }
    }

    fn perform(&mut self, action: Action) -> Vec<Effect> {
        // Line editing keys edit the editor while it is open.
        let input = match &mut self.view.editor {
            Some(editor) => &mut editor.line,
            None => &mut self.view.input,
        };
        match action {
            // The commands that only move the view are the screen's own: never sent, never
            // recorded, and taken before the session is up.
            Action::Send if screen_command(input.text()).is_some() => {
                match screen_command(&input.take()) {
                    Some("events") => self.toggle_inspector(),
                    Some("tools") => self.view.popup = Some(Popup::Tools { selected: 0 }),
                    Some("preview") => self.toggle_preview(),
                    _ => self.toggle_help(),
                }
            }
            // A new model starts a fresh session: asked first.
            Action::Send
                if self.connection == ConnectionState::Connected
                    && self.replay.is_none()
                    && model_command(input.text()).is_some() =>
            {
                if let Some(model) = model_command(&input.take()) {
                    self.ask_model(model);
                }
            }
            // Until the session is ready the line stays in the box rather than being lost.
            Action::Send
                if self.connection == ConnectionState::Connected && self.replay.is_none() =>
            {
                let text = input.take();
                if text.trim().is_empty() {
                    return Vec::new();
                }
                // What is sent, and its reply, are what the user wants to see.
                self.view.transcript_top = None;
                return self.intent(Msg::UserText(text));
            }
            Action::Send => {}
            Action::BargeIn => return self.intent(Msg::BargeIn),
            Action::ToggleMute => return self.intent(Msg::ToggleMute),
            Action::PushToTalk => return self.intent(Msg::ToggleTalk),
            Action::ReopenAudio => return self.intent(Msg::ReopenAudio),
            Action::SwitchEcho => return self.switch_echo(),
            Action::Retry => return self.intent(Msg::Retry),
            Action::Quit => return self.quit(),
            Action::Help => self.toggle_help(),
            Action::Confirm => return self.confirm_model(),
            Action::Decline => self.decline_model(),
            Action::Complete => return self.complete_input(),
            Action::ToolList => {
                self.view.popup = match self.view.popup {
                    Some(Popup::Tools { .. }) => None,
                    _ => Some(Popup::Tools { selected: 0 }),
                };
            }
            Action::SelectToolRow(by) => {
                let rows = self.tool_rows().len();
                if let Some(Popup::Tools { selected }) = &mut self.view.popup {
                    *selected = selected
                        .saturating_add_signed(isize::from(by))
                        .min(rows.saturating_sub(1));
                }
            }
            Action::ToggleTool => {
                if let Some(ToolRow::Tool(tool)) = self.selected_tool_row() {
                    let msg = Msg::SetToolEnabled {
                        name: tool.name.clone(),
                        enabled: !tool.enabled,
                    };
                    return self.intent(msg);
                }
            }
            Action::RestartServer => {
                let server = match self.selected_tool_row() {
                    Some(ToolRow::Server(server)) => Some(server.name.clone()),
                    Some(ToolRow::Tool(tool)) => tool.server.clone(),
                    None => None,
                };
                if let Some(server) = server {
                    return self.intent(Msg::RestartMcpServer(server));
                }
            }
            Action::AudioDetails => {
                self.view.popup = match self.view.popup {
                    Some(Popup::Audio { .. }) => None,
                    _ => Some(Popup::Audio { scroll: 0 }),
                };
            }
            Action::ToggleDevices => {
                self.view.show_devices = !self.view.show_devices;
                if !self.view.show_devices && self.view.focus == Focus::Devices {
                    self.view.focus = Focus::Input;
                }
            }
            Action::FocusNext => self.cycle_focus(true),
            Action::FocusPrevious => self.cycle_focus(false),
            Action::Escape => return self.escape(),
            Action::CursorLeft => input.left(),
            Action::CursorRight => input.right(),
            Action::CursorHome => input.home(),
            Action::CursorEnd => input.end(),
            Action::DeleteBack => input.backspace(),
            Action::DeleteForward => input.delete(),
            Action::DeleteWord => input.delete_word(),
            Action::DeleteToStart => input.delete_to_start(),
            Action::HistoryBack => input.history_back(),
            Action::HistoryForward => input.history_forward(),
            Action::ScrollTranscript(by) => self.view.scroll_transcript(isize::from(by)),
            Action::TranscriptPage(by) => {
                let page = self.view.transcript_page();
                self.view.scroll_transcript(page * isize::from(by));
            }
            Action::TranscriptTop => self.view.transcript_top = Some(0),
            Action::TranscriptBottom => self.view.transcript_top = None,
            Action::SelectTool(by) => self.select_tool(isize::from(by)),
            Action::FirstTool if !self.tool_calls.is_empty() => self.view.tool_selected = Some(0),
            Action::FirstTool => {}
            Action::LastTool => self.view.tool_selected = None,
            Action::OpenToolCall => self.open_selected_tool(),
            Action::CopyToolCall => return self.copy_selected_call(),
            Action::Inspector => self.toggle_inspector(),
            Action::SelectFrame(by) => self.select_frame(isize::from(by)),
            Action::FramePage(by) => self.scroll_frame_json(10 * i32::from(by)),
            Action::FirstFrame => self.first_frame(),
            Action::FollowFrames => self.follow_frames(),
            Action::ExpandFrame => self.toggle_frame_json(),
            Action::NextWireFilter => self.next_wire_filter(),
            Action::CopyFrame => return self.copy_frame(),
            Action::GoToWaiting => self.go_to_waiting(),
            Action::ApproveCall => return self.approve_selected(),
            Action::DenyCall => return self.deny_selected(),
            Action::EditCall => return self.edit_selected(),
            Action::AnswerCall => return self.answer_selected(),
            Action::SubmitEditor => return self.submit_editor(),
            Action::CloseEditor => self.view.editor = None,
            Action::ClosePopup => self.view.popup = None,
            Action::ScrollPopup(by) => self.scroll_popup(i32::from(by)),
            Action::PopupPage(by) => self.scroll_popup(10 * i32::from(by)),
            Action::PopupTop => self.scroll_popup(-i32::from(u16::MAX)),
            Action::PauseReplay => return vec![Effect::Replay(ReplayEffect::Pause)],
            Action::StepReplay => return vec![Effect::Replay(ReplayEffect::Step)],
            Action::ReplaySpeed(by) => {
                let factor = if by > 0 { 2.0 } else { 0.5 };
                return vec![Effect::Replay(ReplayEffect::Speed(factor))];
            }
        }
        Vec::new()
    }

    fn scroll_popup(&mut self, by: i32) {
        if self.inspecting() {
            return self.select_frame(by as isize);
        }
        let scroll = |s: u16| (i32::from(s) + by).clamp(0, i32::from(u16::MAX)) as u16;
        self.view.popup = self.view.popup.map(|popup| match popup {
            Popup::Help { scroll: s } => Popup::Help { scroll: scroll(s) },
            Popup::ToolDetail { index, scroll: s } => Popup::ToolDetail {
                index,
                scroll: scroll(s),
            },
            Popup::Audio { scroll: s } => Popup::Audio { scroll: scroll(s) },
            other @ (Popup::Tools { .. } | Popup::Inspector(_)) => other,
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
                if self.view.popup.is_some() {
                    if layout.popup.is_some_and(|a| a.contains(column, row)) {
                        self.scroll_popup(step as i32);
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

    /// True while the notice on screen is the offer to quit: Esc now quits (on an empty input
    /// line) rather than dismiss it, and the notice says only that.
    pub fn quit_offered(&self) -> bool {
        self.pending_notices() > 0
            && self
                .view
                .esc_quits
                .is_some_and(|at| at + 1 == self.notices.len())
    }

    /// Esc steps back: a notice, then the focus, and on an empty line it quits only once it
    /// has said so, since Esc is also what clears notices and a second press is easy to make.
    fn escape(&mut self) -> Vec<Effect> {
        let at_empty_line = self.view.focus == Focus::Input && self.view.input.is_empty();
        if self.quit_offered() && at_empty_line {
            return self.quit();
        }
        if self.visible_notice().is_some() {
            self.view.notices_dismissed = self.notices.len();
            self.view.esc_quits = None;
        } else if self.view.focus != Focus::Input {
            self.view.focus = Focus::Input;
        } else if at_empty_line {
            self.notice(NoticeLevel::Info, ESC_AGAIN_QUITS.to_owned());
            self.view.esc_quits = Some(self.notices.len() - 1);
        }
        Vec::new()
    }

    /// The row of the tool list the user selected, while it is open.
    fn selected_tool_row(&self) -> Option<ToolRow<'_>> {
        let Some(Popup::Tools { selected }) = self.view.popup else {
            return None;
        };
        self.tool_rows().into_iter().nth(selected)
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
