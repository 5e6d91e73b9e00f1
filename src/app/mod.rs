//! Application state and its only mutator, [`App::update`]: messages in, effects out. No
//! drawing, no sockets; the TUI and the headless presenter both read this state.
//!
//! `App` is one type; its parts are kept where they read best, each an `impl App` of its own:
//! [`msg`](Msg) (what changes the app and what it asks for), `session` (what the server said
//! and how the session moved between connections), `transcript` (the conversation),
//! `tool_calls` (the tool log and the tool list), `audio` (microphone, speaker and echo),
//! `keys` and `view` (what the TUI's keys mean and what it shows), `slash` (the input line's
//! commands and their completion), `editor` (a call's
//! arguments or result typed by hand), `wire_log` (the session's frames both ways) and
//! `inspector` (the event inspector's view of them).

use std::collections::HashSet;

use crate::tools::Device;
use crate::tools::mcp::{Catalog, ServerState};
use livetalk_live::excerpt;
use livetalk_live::models;
use livetalk_live::reply::ReplyWatch;
use livetalk_live::wire::UsageMetadata;

mod audio;
mod editor;
mod health;
mod inspector;
mod keys;
mod msg;
mod screen;
mod session;
mod slash;
mod tool_calls;
mod transcript;
pub mod turn_timing;
pub mod view;
mod wire_log;

pub use audio::{AudioAsked, AudioState, MicState, echo_meaning};
pub use msg::{
    Effect, FileEffect, ImageSent, MediaEffect, Msg, ReplayEffect, ReplayProgress, ScreenEffect,
    ScreenNews, SessionEffect, ShareSource, ToolEffect,
};
pub use screen::{Previewed, Sharing, VIDEO_MINUTES_UNCOMPRESSED};
pub use session::{Badge, ConnectionState};
pub use slash::{
    Argument, Completion, ESCAPED_SLASH, MODEL_IDS, SLASH_COMMANDS, SlashCommand, complete,
    complete_path, slash_help, slash_summary,
};
use slash::{SlashLine, slash_line};
pub use tool_calls::{ToolCallRecord, ToolRow, ToolState};
pub use transcript::{ECHO_INTERRUPTION, Entry, Floor, ModelTurnStatus, UserInput, image_label};

pub use editor::{ERROR_PREFIX, typed_arguments, typed_result};
pub use health::{PanelFigures, TURNS_KEPT};
pub use inspector::{COPY_MAX, Direction, WireRow, frame_json, wire_rows};
pub use keys::{
    Action, ECHO_KEY, ESC_AGAIN_QUITS, Footer, KEY_MAP, KeyRow, When, footer_keys, help_rows,
};
pub use view::{
    Area, Editor, EditorPurpose, Focus, INPUT_MAX_BYTES, InputLine, Inspector, Popup, ScreenLayout,
    View, WireFilter,
};
pub use wire_log::{WIRE_LOG_BYTES, WireBody, WireFrame, WireLog};

/// How much a notice matters (its colour, and whether headless prints it as a warning).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoticeLevel {
    Info,
    Warning,
    Error,
}

/// A message for the user that is not part of the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub level: NoticeLevel,
    pub text: String,
}

/// Everything the app starts from, built by the session's set-up (or a recording's
/// metadata) and handed over at once.
#[derive(Debug, Clone)]
pub struct AppInit {
    pub model: String,
    /// Prebuilt voice asked for in `setup`.
    pub voice: String,
    /// Where the session goes: a host name, or "offline demo model". Never a key.
    pub endpoint_label: String,
    /// True when talking to the embedded offline demo model.
    pub offline: bool,
    pub devices: Vec<Device>,
    /// The audio asked for (`None`: no audio at all).
    pub audio: Option<AudioAsked>,
    /// Shown in the status line while recording: where to.
    pub recording: Option<String>,
    /// This app shows a recording of this many messages: nothing the user types is sent.
    pub replay: Option<usize>,
    /// `NO_COLOR` is set.
    pub no_color: bool,
    /// The terminal shows OSC 8 hyperlinks (a grounded reply's sources are clickable).
    pub hyperlinks: bool,
    /// The log file, for the help popup.
    pub log_path: Option<String>,
    /// Local time of day, for the tool log; tests pin it.
    pub clock: fn() -> jiff::civil::Time,
    /// Every tool and MCP server at the start.
    pub catalog: Catalog,
    /// What setting up decided that the user should know (shown as notices at the start).
    pub notices: Vec<String>,
    /// What setting up found wrong but went on without (shown as warnings at the start).
    pub warnings: Vec<String>,
    /// What models' tokens cost on this route (the default prices nothing).
    pub price_book: crate::pricing::PriceBook,
    /// Where the service compresses the context, when the setup asks it to.
    pub compression_trigger: Option<u64>,
    /// Someone at the full-screen app can press its keys: notices may name them (a headless
    /// run's and a replay's do not).
    pub interactive: bool,
    /// `--video PATH`: a folder of frames shared from the session's start.
    pub video: Option<std::path::PathBuf>,
}

impl AppInit {
    /// A live session's start: no audio, no recording, colours on.
    pub fn new(model: impl Into<String>, offline: bool, devices: Vec<Device>) -> Self {
        let model = model.into();
        AppInit {
            price_book: crate::pricing::PriceBook::default(),
            compression_trigger: None,
            interactive: true,
            video: None,
            model,
            voice: String::new(),
            endpoint_label: String::new(),
            offline,
            devices,
            audio: None,
            recording: None,
            replay: None,
            no_color: false,
            hyperlinks: false,
            log_path: None,
            clock: local_time_now,
            catalog: Catalog::default(),
            notices: Vec::new(),
            warnings: Vec::new(),
        }
    }
}

/// The application state. Read it through its accessors; only [`App::update`] changes it.
#[derive(Debug, Clone)]
pub struct App {
    model: String,
    /// What each model's tokens cost, for the model `/model` changes to.
    price_book: crate::pricing::PriceBook,
    /// Notices may name the full-screen app's keys (see [`AppInit::interactive`]).
    interactive: bool,
    voice: String,
    endpoint_label: String,
    offline: bool,
    connection: ConnectionState,
    floor: Floor,
    transcript: Vec<Entry>,
    /// The model entry the service interrupted while Gemini was heard, until the audio worker
    /// says whether its mic had been carrying the speaker's echo (`AudioEvent::Silenced`).
    echo_check: Option<usize>,
    tool_calls: Vec<ToolCallRecord>,
    devices: Vec<Device>,
    notices: Vec<Notice>,
    /// Usage reported with the latest turn.
    last_usage: Option<UsageMetadata>,
    /// Bytes of model audio received.
    model_audio_bytes: u64,
    /// Times a lost connection was replaced.
    reconnects: u32,
    /// Times the conversation moved to a new connection on purpose: the service's `goAway`,
    /// a voice or tool change. Counted apart, so a `/voice` does not read as a fault.
    handovers: u32,
    /// How far the reply to the latest user turn (or tool response) has come.
    reply: ReplyWatch,
    /// `end_session` succeeded: close once the goodbye turn completes.
    end_after_turn: bool,
    /// We asked the session to close.
    closing: bool,
    /// The run gave up on the session; a close that follows changes nothing.
    gave_up: bool,
    /// User turns a lost connection took with it, told to the user (headless exits 1).
    turns_lost: u32,
    /// Shown in the status line while recording: what and where.
    recording: Option<String>,
    /// Where a replay stands, when this app shows one.
    replay: Option<ReplayProgress>,
    /// What the TUI shows and where; headless ignores it.
    view: View,
    /// Microphone, speaker, levels and figures.
    audio: AudioState,
    /// Local time of day, for the tool log.
    clock: fn() -> jiff::civil::Time,
    /// Tool calls listed before the latest reconnect; their answers cannot reach the model.
    calls_before_reconnect: usize,
    /// Ids of calls the server cancelled: they must not be answered.
    withdrawn_calls: HashSet<String>,
    /// Every tool and MCP server, for the tool list.
    catalog: Catalog,
    /// The user changed the tool set; the model learns it at the next hand-over.
    tools_pending: bool,
    /// A picture `/image` named is being made ready to send.
    image_pending: bool,
    /// The notice asking the user to answer a waiting call, by its index.
    waiting_notice: Option<usize>,
    /// The session's frames both ways, for the event inspector.
    wire: WireLog,
    /// Latency, health and cost.
    figures: PanelFigures,
    /// The screen (or folder of frames) being shared, if any.
    sharing: Option<Sharing>,
    /// Shares started in this session (each share's number).
    shares: u32,
    /// Frames sent in this session, every share together.
    frames_sent: u64,
    /// `--video PATH`, shared once the session first connects.
    video: Option<std::path::PathBuf>,
    /// When the last picture or frame was sent: the demo model answers a picture only when
    /// none came shortly before it.
    last_picture_at: Option<std::time::Instant>,
    /// The last picture `/image` sent, while it is the newest picture the model was shown (a
    /// share's next frame takes its place in the preview).
    picture_shown: Option<ImageSent>,
    /// `/preview` hid the preview pane (until the next share or picture).
    preview_hidden: bool,
}

/// A recording's folder as the status line names it: its last part (`bug-1234`), which
/// `livetalk sessions`, `replay` and `inspect` know it by; the whole path is printed when the
/// session ends.
fn folder_name(path: &str) -> String {
    std::path::Path::new(path).file_name().map_or_else(
        || path.to_owned(),
        |name| name.to_string_lossy().into_owned(),
    )
}

fn local_time_now() -> jiff::civil::Time {
    jiff::Zoned::now().time()
}

impl App {
    pub fn new(init: AppInit) -> Self {
        let mut view = View {
            no_color: init.no_color,
            hyperlinks: init.hyperlinks,
            log_path: init.log_path,
            ..View::default()
        };
        // Typed input goes nowhere in a replay: start in the transcript.
        if init.replay.is_some() {
            view.focus = Focus::Transcript;
        }
        // Told at the start: on this model the tools behave differently, and what setting up
        // decided.
        let notices = models::traits(&init.model)
            .non_blocking_only
            .then(|| models::non_blocking_notice(&init.model))
            .into_iter()
            .chain(init.notices)
            .map(|text| Notice {
                level: NoticeLevel::Info,
                text,
            })
            .chain(init.warnings.into_iter().map(|text| Notice {
                level: NoticeLevel::Warning,
                text,
            }))
            .collect();
        App {
            figures: PanelFigures::new(
                init.price_book.prices(&init.model),
                init.compression_trigger,
            ),
            price_book: init.price_book,
            interactive: init.interactive && init.replay.is_none(),
            model: init.model,
            voice: init.voice,
            endpoint_label: init.endpoint_label,
            offline: init.offline,
            connection: ConnectionState::Connecting,
            floor: Floor::Listening,
            transcript: Vec::new(),
            echo_check: None,
            tool_calls: Vec::new(),
            wire: WireLog::default(),
            devices: init.devices,
            notices,
            last_usage: None,
            model_audio_bytes: 0,
            reconnects: 0,
            handovers: 0,
            reply: ReplyWatch::default(),
            end_after_turn: false,
            closing: false,
            gave_up: false,
            turns_lost: 0,
            recording: init.recording,
            replay: init.replay.map(|total| ReplayProgress {
                total,
                ..ReplayProgress::default()
            }),
            view,
            audio: init.audio.map(AudioState::configured).unwrap_or_default(),
            clock: init.clock,
            calls_before_reconnect: 0,
            withdrawn_calls: HashSet::new(),
            catalog: init.catalog,
            tools_pending: false,
            image_pending: false,
            waiting_notice: None,
            sharing: None,
            shares: 0,
            frames_sent: 0,
            video: init.video,
            last_picture_at: None,
            picture_shown: None,
            preview_hidden: false,
        }
    }

    pub fn model(&self) -> &str {
        &self.model
    }

    pub fn voice(&self) -> &str {
        &self.voice
    }

    pub fn endpoint_label(&self) -> &str {
        &self.endpoint_label
    }

    pub fn offline(&self) -> bool {
        self.offline
    }

    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    pub fn notices(&self) -> &[Notice] {
        &self.notices
    }

    pub fn last_usage(&self) -> Option<&UsageMetadata> {
        self.last_usage.as_ref()
    }

    /// The session's tokens: the service's total, in parts by modality (see
    /// [`crate::pricing::TokenTally`]). Every place that shows a count shows this one.
    pub fn tokens(&self) -> &crate::pricing::TokenTally {
        self.figures.tally()
    }

    /// What the session's tokens cost so far; `None`: not priced (see
    /// [`crate::pricing::PriceBook`]).
    pub fn cost(&self) -> Option<f64> {
        self.figures.cost()
    }

    pub fn model_audio_bytes(&self) -> u64 {
        self.model_audio_bytes
    }

    pub fn reconnects(&self) -> u32 {
        self.reconnects
    }

    pub fn handovers(&self) -> u32 {
        self.handovers
    }

    /// What the status line says about recording: "REC folder", or where a replay stands.
    pub fn recording_label(&self) -> Option<String> {
        match (&self.replay, &self.recording) {
            (Some(progress), source) => {
                let state = if progress.applied >= progress.total {
                    "finished"
                } else if progress.paused {
                    "paused: Space resumes, n steps"
                } else {
                    "Space pauses"
                };
                let source = source.as_deref().map(folder_name).unwrap_or_default();
                Some(format!(
                    "REPLAY {}/{} ({state}) {source}",
                    progress.applied, progress.total
                ))
            }
            (None, Some(recording)) => Some(match recording.split_once(' ') {
                Some((head, path)) => format!("{head} {}", folder_name(path)),
                None => recording.clone(),
            }),
            (None, None) => None,
        }
    }

    /// Where the replay stands, when this app shows one.
    pub fn replay_progress(&self) -> Option<ReplayProgress> {
        self.replay
    }

    /// True when this app shows a recording.
    pub fn is_replay(&self) -> bool {
        self.replay.is_some()
    }

    pub fn view(&self) -> &View {
        &self.view
    }

    pub fn audio(&self) -> &AudioState {
        &self.audio
    }

    /// True once the user asked to leave (the TUI then stops).
    pub fn wants_to_quit(&self) -> bool {
        self.view.quit
    }

    /// True when the user (or the end of input, or `end_session`) asked to end the session.
    pub fn is_closing(&self) -> bool {
        self.closing
    }

    /// The newest notice the user has not dismissed.
    pub fn visible_notice(&self) -> Option<&Notice> {
        self.notices[self.view.notices_dismissed.min(self.notices.len())..].last()
    }

    /// Notices not yet dismissed.
    pub fn pending_notices(&self) -> usize {
        self.notices
            .len()
            .saturating_sub(self.view.notices_dismissed)
    }

    /// True while something on screen animates (a spinner or a highlight), so the loop
    /// ticks only then and idles otherwise.
    pub fn animating(&self) -> bool {
        self.connection == ConnectionState::Connecting
            || self.connection == ConnectionState::Reconnecting
            || self.running_tools() > 0
            || self.model_working()
            || self.badge() == Badge::Thinking
            || self.view.device_highlight.iter().any(|&t| t > 0)
            || self.counting_down()
    }

    /// True while the screen shows a figure that counts seconds (the session panel's ages of
    /// the connection and the resumption handle): the presenter ticks once a second then, so
    /// they move between events.
    pub fn counts_seconds(&self) -> bool {
        self.view.layout.session.is_some()
            && self.replay.is_none()
            && self.connection == ConnectionState::Connected
    }

    /// The one place state changes.
    pub fn update(&mut self, msg: Msg) -> Vec<Effect> {
        match msg {
            Msg::ConnectFailed(reason) => {
                self.notice(NoticeLevel::Error, reason.clone());
                self.disconnect(reason);
                self.floor = Floor::Listening;
                Vec::new()
            }
            Msg::Server(event) => self.on_session(event, None),
            Msg::Replayed { event, arrived_at } => self.on_session(event, Some(arrived_at)),
            Msg::SessionChange(event) => self.on_session_change(event),
            Msg::Retry => {
                if !self.can_retry() {
                    return Vec::new();
                }
                self.connection = ConnectionState::Connecting;
                vec![Effect::Session(SessionEffect::Reconnect)]
            }
            Msg::Tool(event) => self.on_tool(event),
            Msg::ToolVerdict { key, verdict } => self.on_verdict(key, verdict),
            Msg::Mcp(event) => {
                self.on_mcp(event);
                Vec::new()
            }
            Msg::ToolCatalog(catalog) => {
                self.catalog = catalog;
                Vec::new()
            }
            Msg::SetToolEnabled { name, enabled } => {
                if let Some(tool) = self.catalog.tools.iter_mut().find(|t| t.name == name) {
                    tool.enabled = enabled;
                }
                self.tools_pending = true;
                vec![Effect::Tools(ToolEffect::SetToolEnabled { name, enabled })]
            }
            Msg::RestartMcpServer(name) => {
                if let Some(server) = self.catalog.servers.iter_mut().find(|s| s.name == name) {
                    server.state = ServerState::Starting;
                }
                vec![Effect::Tools(ToolEffect::RestartMcpServer(name))]
            }
            Msg::DevicesChanged(devices) => {
                self.view.highlight_changes(&self.devices, &devices);
                self.devices = devices;
                Vec::new()
            }
            Msg::Key(key) => {
                let inspecting = self.inspecting();
                let mut effects = self.on_key(key);
                // However the inspector opened or closed, the source learns it.
                if inspecting != self.inspecting() {
                    effects.push(Effect::Session(SessionEffect::WatchWire(!inspecting)));
                }
                effects
            }
            Msg::Mouse(mouse) => {
                self.on_mouse(mouse);
                Vec::new()
            }
            Msg::Paste(text) => {
                let taken = if let Some(editor) = &mut self.view.editor {
                    editor.line.insert_str(&text)
                } else if self.view.popup.is_none() {
                    self.view.focus = Focus::Input;
                    self.view.input.insert_str(&text)
                } else {
                    Ok(())
                };
                if let Err(refused) = taken {
                    self.notice(NoticeLevel::Warning, refused.to_string());
                }
                Vec::new()
            }
            Msg::Layout(layout) => {
                self.view.layout = layout;
                Vec::new()
            }
            Msg::PathChoices { typed, entries } => {
                self.on_path_choices(&typed, &entries);
                Vec::new()
            }
            Msg::Image(prepared) => self.on_image(prepared),
            Msg::Screen(news) => self.on_screen(news),
            Msg::SharedChoices { typed, names } => {
                self.on_shared_choices(&typed, &names);
                Vec::new()
            }
            Msg::Wire(frame) => {
                self.figures.on_frame(&frame);
                self.wire.push(frame);
                Vec::new()
            }
            Msg::Tick(now) => {
                self.figures.tell_time(now);
                self.view.ticks = self.view.ticks.wrapping_add(1);
                for ticks in &mut self.view.device_highlight {
                    *ticks = ticks.saturating_sub(1);
                }
                Vec::new()
            }
            Msg::Quit => self.quit(),
            Msg::Audio(event) => self.on_audio(event),
            Msg::BargeIn => self.user_barge_in(),
            Msg::ToggleMute => self.toggle_mute(),
            Msg::ToggleTalk => self.toggle_talk(),
            Msg::ReopenAudio => self.reopen_audio(),
            Msg::SetEcho(mode) => self.set_echo(mode),
            Msg::GaveUp(message) => self.give_up(message),
            Msg::ReplayProgress(progress) => {
                if self.replay.is_some() {
                    self.replay = Some(progress);
                }
                Vec::new()
            }
            Msg::UserText(text) => self.on_user_text(&text),
            Msg::EndSession => {
                if self.closing || self.is_finished() {
                    return Vec::new();
                }
                // A reply still streaming is cut off by the end where the user sees it now,
                // and silenced: nothing more of it is shown or played.
                let mut effects = self.barge_in();
                if self.sharing.take().is_some() {
                    effects.push(Effect::Screen(ScreenEffect::Stop));
                }
                self.closing = true;
                effects.push(Effect::Session(SessionEffect::CloseSession));
                effects
            }
        }
    }

    /// The session gave up reconnecting: said once, and the session closed.
    fn give_up(&mut self, message: String) -> Vec<Effect> {
        if self.is_finished() {
            return Vec::new();
        }
        self.notice(NoticeLevel::Error, message.clone());
        self.finish_model_entry(ModelTurnStatus::Interrupted);
        self.floor = Floor::Listening;
        self.disconnect(message);
        self.reply.forget();
        self.gave_up = true;
        vec![Effect::Session(SessionEffect::CloseSession)]
    }

    /// A line the user typed: a slash command, or a text turn.
    fn on_user_text(&mut self, text: &str) -> Vec<Effect> {
        let text = text.trim().to_owned();
        // While reconnecting the turn is queued and sent after setupComplete.
        let open = matches!(
            self.connection,
            ConnectionState::Connected | ConnectionState::Reconnecting
        );
        if text.is_empty() || !open || self.closing {
            return Vec::new();
        }
        let text = match slash_line(&text) {
            SlashLine::Text(text) => text.to_owned(),
            command => return self.on_command(command),
        };
        // Sending while the model speaks interrupts it (clientContent semantics); the
        // server confirms with `interrupted`, but the speaker goes quiet right away.
        let mut effects = self.user_barge_in();
        self.fold_user_speech();
        self.transcript.push(Entry::User {
            text: text.clone(),
            via: UserInput::Typed,
        });
        self.reply.sent();
        effects.push(Effect::Session(SessionEffect::SendText(text)));
        effects
    }

    /// Every notice goes through here; many quote the server (a close reason, a skipped
    /// frame, a tool's error), so each is bounded once, for every presenter.
    pub(super) fn notice(&mut self, level: NoticeLevel, text: String) {
        self.notices.push(Notice {
            level,
            text: excerpt::into_bounded(text, excerpt::SUMMARY),
        });
    }
}

#[cfg(test)]
mod tests;
