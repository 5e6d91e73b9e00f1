//! Application state and its only mutator, [`App::update`]: messages in, effects out. No
//! drawing, no sockets; the TUI and the headless presenter both read this state.

use std::collections::HashSet;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::audio::EchoMode;
use crate::tools::mcp::{Catalog, McpEvent, ServerEntry, ServerState};
use crate::tools::{
    CallKey, Device, KeyedCall, ProgressReport, SlowCall, ToolEntry, ToolEvent, ToolStatus,
    Verdict, WaitingCall,
};
use livetalk_live::ServerEvent;
use livetalk_live::excerpt::{self, bounded};
use livetalk_live::models;
use livetalk_live::reply::ReplyWatch;
use livetalk_live::session::SessionChange;
use livetalk_live::wire::{FunctionResponse, Scheduling, UsageMetadata};

mod audio;
mod editor;
mod keys;
pub mod view;

pub use audio::{AudioAsked, AudioState, MicState, echo_meaning};

pub use editor::{ERROR_PREFIX, typed_arguments, typed_result};
pub use keys::{Action, ECHO_KEY, Footer, KEY_MAP, KeyRow, footer_keys};
pub use view::{Area, Editor, EditorPurpose, Focus, InputLine, Popup, ScreenLayout, View};

/// Whether the session has a connection, as the status line shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectionState {
    Connecting,
    Connected,
    Reconnecting,
    Disconnected { reason: String },
}

/// Who has the floor. There is no idle state: once connected, Gemini is either listening or
/// speaking, and the status badge says which.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Floor {
    Listening,
    Speaking,
}

/// Where a user turn came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserInput {
    Typed,
    Speech,
}

/// How a model turn ended (or that it is still streaming).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelTurnStatus {
    Streaming,
    Complete,
    Interrupted,
}

/// One entry of the conversation history. Tool calls are part of the history, in the order they
/// happened, as the model saw them.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    User {
        text: String,
        via: UserInput,
    },
    Model {
        /// Text parts, when the model sends text.
        text_parts: String,
        /// Output transcription, when the model speaks.
        transcript: String,
        status: ModelTurnStatus,
        /// The service interrupted this turn while Gemini was loud on the speaker and what the
        /// mic sent followed it: Gemini may have heard itself (see [`ECHO_INTERRUPTION`]).
        echo_suspected: bool,
    },
    /// Index into [`App::tool_calls`].
    Tool(usize),
}

impl Entry {
    /// The readable text of a model entry: text parts if any, else the transcription, with
    /// fragments joined and whitespace folded.
    pub fn model_text(text_parts: &str, transcript: &str) -> String {
        let raw = if text_parts.trim().is_empty() {
            transcript
        } else {
            text_parts
        };
        fold_whitespace(raw)
    }
}

/// How the transcript explains an entry's `echo_suspected`.
pub const ECHO_INTERRUPTION: &str = "echo may have interrupted Gemini";

/// Joins streamed fragments into readable text: single spaces, no leading or trailing ones.
fn fold_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Lifecycle of one tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolState {
    /// Waits for the user to approve, deny, edit or answer it.
    Waiting,
    Running,
    Ok,
    Error(String),
    TimedOut,
    Cancelled,
    /// Not run: the user declined it, or the headless policy does not allow it.
    Refused(String),
    /// The user typed its result.
    ByHand,
}

impl ToolState {
    pub fn label(&self) -> &'static str {
        match self {
            ToolState::Waiting => "waiting for you",
            ToolState::Running => "running",
            ToolState::Ok => "ok",
            ToolState::Error(_) => "error",
            ToolState::TimedOut => "timed out",
            ToolState::Cancelled => "cancelled",
            ToolState::Refused(_) => "refused",
            ToolState::ByHand => "answered by hand",
        }
    }

    /// True until the call is answered or cancelled.
    pub fn is_open(&self) -> bool {
        matches!(self, ToolState::Waiting | ToolState::Running)
    }
}

/// One row of the tool list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolRow<'a> {
    Server(&'a ServerEntry),
    Tool(&'a ToolEntry),
}

/// A tool call as the log shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallRecord {
    pub id: Option<String>,
    pub name: String,
    pub args: Value,
    pub state: ToolState,
    pub duration: Option<Duration>,
    /// The exact `functionResponses` entry sent (none when cancelled).
    pub response: Option<FunctionResponse>,
    pub truncated: bool,
    /// Local wall-clock time the call arrived.
    pub started_at: jiff::civil::Time,
    /// It ran past a third of its time limit.
    pub slow: bool,
    /// The latest progress its tool reported while it ran.
    pub progress: Option<ProgressReport>,
    /// The arguments the model sent, when the user edited them (`args` are the edited ones).
    pub edited_from: Option<Value>,
}

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

/// Everything that can change the app. What comes from the session, the tools, the devices,
/// the audio system and the session, and what the user means (a turn sent, a barge-in, the end),
/// is recorded as it is applied and replayed as it was; raw input (keys, mouse, paste), the
/// layout and the tick only move the view and are never recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Msg {
    /// The connection attempt failed before the session started.
    ConnectFailed(String),
    /// What the server said, as the session passed it on. (Recordings name it `session`.)
    #[serde(rename = "session")]
    Server(ServerEvent),
    /// A server event from a recording, with the local time of day it arrived in the
    /// original run: applied like `Server`, but the tool log shows that time, not the clock.
    #[serde(skip)]
    Replayed {
        event: ServerEvent,
        arrived_at: jiff::civil::Time,
    },
    /// The session moved to a new connection, lost one, or withheld an answer. (Recordings
    /// name it `link`.)
    #[serde(rename = "link")]
    SessionChange(SessionChange),
    /// A tool call finished, was cancelled, is running long, waits for the user, or reported
    /// progress.
    Tool(ToolEvent),
    /// The user approves, denies, edits or answers the tool call `key` (its place in the
    /// tool log).
    ToolVerdict { key: CallKey, verdict: Verdict },
    /// An MCP server came up, went down, or changed its tools.
    Mcp(McpEvent),
    /// Every tool and MCP server as they are now (after any change).
    ToolCatalog(Catalog),
    /// The user turns a tool on or off for the rest of the session.
    SetToolEnabled { name: String, enabled: bool },
    /// The user restarts an MCP server.
    RestartMcpServer(String),
    /// The smart-home devices changed.
    DevicesChanged(Vec<Device>),
    /// The audio system opened devices, failed, or reports playback, levels or figures.
    Audio(crate::audio::AudioEvent),
    /// The user sent a text turn.
    UserText(String),
    /// The user silences Gemini (Ctrl-B).
    BargeIn,
    /// The user mutes or unmutes the microphone.
    ToggleMute,
    /// Push-to-talk: the user starts or stops speaking.
    ToggleTalk,
    /// The user asks to open the audio devices again.
    ReopenAudio,
    /// The user switches how Gemini's voice is kept out of the mic.
    SetEcho(EchoMode),
    /// The user asks to try connecting again after the session gave up.
    Retry,
    /// The user (or the end of input) ends the session.
    EndSession,
    /// The run gives up on the session (a headless turn that never got an answer): shown as
    /// an error, and the session ends unclean.
    GaveUp(String),
    /// Where a replay stands (the status line shows it).
    ReplayProgress(ReplayProgress),
    /// Leave the app (a signal): ends the session like the quit key.
    #[serde(skip)]
    Quit,
    /// A key press in the TUI.
    #[serde(skip)]
    Key(crossterm::event::KeyEvent),
    /// A mouse event in the TUI.
    #[serde(skip)]
    Mouse(crossterm::event::MouseEvent),
    /// Text pasted into the TUI.
    #[serde(skip)]
    Paste(String),
    /// Where the TUI drew things in its last frame.
    #[serde(skip)]
    Layout(ScreenLayout),
    /// Animation tick (only while something animates).
    #[serde(skip)]
    Tick,
}

impl Msg {
    /// True for what a recording keeps: everything but raw input, layout and ticks. (Replay
    /// progress and replayed events come from a recording in the first place.)
    pub fn is_recorded(&self) -> bool {
        !matches!(
            self,
            Msg::Replayed { .. }
                | Msg::ReplayProgress(_)
                | Msg::Quit
                | Msg::Key(_)
                | Msg::Mouse(_)
                | Msg::Paste(_)
                | Msg::Layout(_)
                | Msg::Tick
        )
    }

    /// The model audio this message carries, for a recorder that keeps audio in a WAV file.
    pub fn model_audio_mut(&mut self) -> Option<&mut Vec<u8>> {
        match self {
            Msg::Server(ServerEvent::ModelAudio { pcm, .. }) => Some(pcm),
            _ => None,
        }
    }
}

/// How far a replay has come.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ReplayProgress {
    pub applied: usize,
    pub total: usize,
    pub paused: bool,
}

/// Work for the loop to do on the app's behalf.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// What a key meant (send, barge in, end…): the loop applies it as a message of its own,
    /// so it is recorded like every other message.
    Intent(Msg),
    SendText(String),
    /// Change the session's system instruction in place (`contextUpdate`).
    SendInstruction(String),
    /// Run these calls, each under its place in the tool log.
    RunTools(Vec<KeyedCall>),
    CancelTools(Vec<String>),
    /// Hand the user's verdict on a call to the dispatcher.
    ToolVerdict {
        key: CallKey,
        verdict: Verdict,
    },
    SendToolResponse(FunctionResponse),
    CloseSession,
    /// Start connecting again (after the session gave up).
    Reconnect,
    /// Play model audio (24 kHz PCM16 LE).
    PlayAudio(Vec<u8>),
    /// The model's turn ended: play out the rest of its audio.
    EndPlaybackTurn,
    /// Barge-in: silence the speaker now and drop queued audio.
    StopPlayback,
    /// Let mic frames through to the session, or hold them back.
    SetMicOpen(bool),
    /// Push-to-talk: the user starts speaking (`activityStart`).
    SendActivityStart,
    /// Push-to-talk: the user stopped speaking (`activityEnd`).
    SendActivityEnd,
    /// The mic stopped (muted): the server may flush what it cached (`audioStreamEnd`).
    SendAudioStreamEnd,
    /// Close and re-open the audio devices.
    ReopenAudio,
    /// Switch how Gemini's voice is kept out of the mic, now.
    SetEcho(EchoMode),
    /// Replay: pause or resume.
    PauseReplay,
    /// Replay: apply the next message while paused.
    StepReplay,
    /// Turn a tool on or off; the model is told at the next turn boundary.
    SetToolEnabled {
        name: String,
        enabled: bool,
    },
    /// Stop an MCP server (if it runs) and start it again.
    RestartMcpServer(String),
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
    /// The log file, for the help popup.
    pub log_path: Option<String>,
    /// Local time of day, for the tool log; tests pin it.
    pub clock: fn() -> jiff::civil::Time,
    /// Every tool and MCP server at the start.
    pub catalog: Catalog,
    /// What setting up decided that the user should know (shown as notices at the start).
    pub notices: Vec<String>,
}

impl AppInit {
    /// A live session's start: no audio, no recording, colours on.
    pub fn new(model: impl Into<String>, offline: bool, devices: Vec<Device>) -> Self {
        AppInit {
            model: model.into(),
            voice: String::new(),
            endpoint_label: String::new(),
            offline,
            devices,
            audio: None,
            recording: None,
            replay: None,
            no_color: false,
            log_path: None,
            clock: local_time_now,
            catalog: Catalog::default(),
            notices: Vec::new(),
        }
    }
}

/// The application state. Read it through its accessors; only [`App::update`] changes it.
#[derive(Debug, Clone)]
pub struct App {
    model: String,
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
    /// Sum of `totalTokenCount` over the session.
    total_tokens: i64,
    /// Bytes of model audio received.
    model_audio_bytes: u64,
    /// Times the conversation moved to a new connection.
    reconnects: u32,
    /// How far the reply to the latest user turn (or tool response) has come.
    reply: ReplyWatch,
    /// `end_session` succeeded: close once the goodbye turn completes.
    end_after_turn: bool,
    /// We asked the session to close.
    closing: bool,
    /// The run gave up on the session; a close that follows changes nothing.
    gave_up: bool,
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
    /// The notice asking the user to answer a waiting call, by its index.
    waiting_notice: Option<usize>,
}

/// The instruction of a `/system TEXT` line.
fn instruction_command(text: &str) -> Option<&str> {
    let rest = text.strip_prefix("/system")?;
    let instruction = rest.trim();
    (rest.starts_with(char::is_whitespace) && !instruction.is_empty()).then_some(instruction)
}

fn local_time_now() -> jiff::civil::Time {
    jiff::Zoned::now().time()
}

impl App {
    pub fn new(init: AppInit) -> Self {
        let mut view = View {
            no_color: init.no_color,
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
            .collect();
        App {
            model: init.model,
            voice: init.voice,
            endpoint_label: init.endpoint_label,
            offline: init.offline,
            connection: ConnectionState::Connecting,
            floor: Floor::Listening,
            transcript: Vec::new(),
            echo_check: None,
            tool_calls: Vec::new(),
            devices: init.devices,
            notices,
            last_usage: None,
            total_tokens: 0,
            model_audio_bytes: 0,
            reconnects: 0,
            reply: ReplyWatch::default(),
            end_after_turn: false,
            closing: false,
            gave_up: false,
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
            waiting_notice: None,
        }
    }

    /// Every tool and MCP server, as the tool list shows them.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// The tool list's rows: the built-ins, then each MCP server followed by its tools.
    pub fn tool_rows(&self) -> Vec<ToolRow<'_>> {
        let tools = &self.catalog.tools;
        let mut rows: Vec<ToolRow<'_>> = tools
            .iter()
            .filter(|t| t.server.is_none())
            .map(ToolRow::Tool)
            .collect();
        for server in &self.catalog.servers {
            rows.push(ToolRow::Server(server));
            rows.extend(
                tools
                    .iter()
                    .filter(|t| t.server.as_deref() == Some(server.name.as_str()))
                    .map(ToolRow::Tool),
            );
        }
        rows
    }

    /// True while a change to the tool set waits for the next turn boundary.
    pub fn tools_pending(&self) -> bool {
        self.tools_pending
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

    pub fn connection(&self) -> &ConnectionState {
        &self.connection
    }

    pub fn floor(&self) -> Floor {
        self.floor
    }

    pub fn transcript(&self) -> &[Entry] {
        &self.transcript
    }

    /// Whether the transcript entry at `index` waits for the echo verdict on its interruption
    /// (a presenter that prints each entry once holds it back until then).
    pub fn echo_check_pending(&self, index: usize) -> bool {
        // Only a live device mic has the audio worker judge. A replay waits for nothing (a
        // recorded verdict still flags the reply when it comes), nor does a WAV file as the mic.
        self.echo_check == Some(index)
            && self.replay.is_none()
            && self.audio.input.is_some()
            && !self.audio.input_is_clip
    }

    pub fn tool_calls(&self) -> &[ToolCallRecord] {
        &self.tool_calls
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

    pub fn total_tokens(&self) -> i64 {
        self.total_tokens
    }

    pub fn model_audio_bytes(&self) -> u64 {
        self.model_audio_bytes
    }

    pub fn reconnects(&self) -> u32 {
        self.reconnects
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
                let source = source.as_deref().unwrap_or_default();
                Some(format!(
                    "REPLAY {}/{} ({state}) {source}",
                    progress.applied, progress.total
                ))
            }
            (None, Some(recording)) => Some(recording.clone()),
            (None, None) => None,
        }
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
            || self.view.device_highlight.iter().any(|&t| t > 0)
    }

    /// True when the model has finished with the last input and no tool call is running.
    pub fn ready_for_user(&self) -> bool {
        self.connection == ConnectionState::Connected
            && !self.reply.awaited()
            && self.running_tools() == 0
            && !self.audio.playing_out
            && !self.model_turn_streaming()
    }

    /// A model turn is on its way (e.g. the reply to speech, which no typed turn awaits).
    fn model_turn_streaming(&self) -> bool {
        matches!(
            self.transcript.last(),
            Some(Entry::Model {
                status: ModelTurnStatus::Streaming,
                ..
            })
        )
    }

    /// Tool calls not answered yet (running, or waiting for the user).
    pub fn running_tools(&self) -> usize {
        self.tool_calls.iter().filter(|c| c.state.is_open()).count()
    }

    /// The oldest call waiting for the user, by its place in the tool log.
    pub fn first_waiting_call(&self) -> Option<usize> {
        self.tool_calls
            .iter()
            .position(|c| c.state == ToolState::Waiting)
    }

    /// True once the session is over (closed by us or lost).
    pub fn is_finished(&self) -> bool {
        matches!(self.connection, ConnectionState::Disconnected { .. })
    }

    /// True when the session ended because we closed it (end of input or `end_session`).
    pub fn ended_cleanly(&self) -> bool {
        self.closing && self.is_finished()
    }

    /// True when the connection was lost for good and the user may ask to retry.
    pub fn can_retry(&self) -> bool {
        self.is_finished() && !self.closing
    }

    /// The model said `IN_PROGRESS` after its `turnComplete` and has not said `IDLE` yet: it
    /// is still working on the interaction (3.8 Live), though nothing streams right now.
    pub fn model_working(&self) -> bool {
        self.reply.model_busy() && self.connection == ConnectionState::Connected
    }

    /// After `end_session`, the session closes once the goodbye turn is over: its
    /// `turnComplete`, or on models with asynchronous turns its `IDLE`.
    fn end_if_asked(&mut self) -> Vec<Effect> {
        if self.end_after_turn
            && !self.closing
            && self.running_tools() == 0
            && !self.reply.model_busy()
        {
            self.closing = true;
            return vec![Effect::CloseSession];
        }
        Vec::new()
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
                vec![Effect::Reconnect]
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
                vec![Effect::SetToolEnabled { name, enabled }]
            }
            Msg::RestartMcpServer(name) => {
                if let Some(server) = self.catalog.servers.iter_mut().find(|s| s.name == name) {
                    server.state = ServerState::Starting;
                }
                vec![Effect::RestartMcpServer(name)]
            }
            Msg::DevicesChanged(devices) => {
                self.view.highlight_changes(&self.devices, &devices);
                self.devices = devices;
                Vec::new()
            }
            Msg::Key(key) => self.on_key(key),
            Msg::Mouse(mouse) => {
                self.on_mouse(mouse);
                Vec::new()
            }
            Msg::Paste(text) => {
                if let Some(editor) = &mut self.view.editor {
                    editor.line.insert_str(&text);
                } else if self.view.popup.is_none() {
                    self.view.focus = Focus::Input;
                    self.view.input.insert_str(&text);
                }
                Vec::new()
            }
            Msg::Layout(layout) => {
                self.view.layout = layout;
                Vec::new()
            }
            Msg::Tick => {
                self.view.ticks = self.view.ticks.wrapping_add(1);
                for ticks in &mut self.view.device_highlight {
                    *ticks = ticks.saturating_sub(1);
                }
                Vec::new()
            }
            Msg::Quit => self.quit(),
            Msg::Audio(event) => self.on_audio(event),
            Msg::BargeIn => self.barge_in(),
            Msg::ToggleMute => self.toggle_mute(),
            Msg::ToggleTalk => self.toggle_talk(),
            Msg::ReopenAudio => self.reopen_audio(),
            Msg::SetEcho(mode) => self.set_echo(mode),
            Msg::GaveUp(message) => {
                if self.is_finished() {
                    return Vec::new();
                }
                self.notice(NoticeLevel::Error, message.clone());
                self.finish_model_entry(ModelTurnStatus::Interrupted);
                self.floor = Floor::Listening;
                self.disconnect(message);
                self.reply.forget();
                self.gave_up = true;
                vec![Effect::CloseSession]
            }
            Msg::ReplayProgress(progress) => {
                if self.replay.is_some() {
                    self.replay = Some(progress);
                }
                Vec::new()
            }
            Msg::UserText(text) => {
                let text = text.trim().to_owned();
                // While reconnecting the turn is queued and sent after setupComplete.
                let open = matches!(
                    self.connection,
                    ConnectionState::Connected | ConnectionState::Reconnecting
                );
                if text.is_empty() || !open || self.closing {
                    return Vec::new();
                }
                // `/system TEXT`: the model follows a new system instruction from the next
                // turn on; the session stays, and so does the conversation.
                if let Some(instruction) = instruction_command(&text) {
                    self.notice(
                        NoticeLevel::Info,
                        format!("System instruction changed for the next turns: {instruction}"),
                    );
                    return vec![Effect::SendInstruction(instruction.to_owned())];
                }
                // Sending while the model speaks interrupts it (clientContent semantics); the
                // server confirms with `interrupted`, but the speaker goes quiet right away.
                let mut effects = self.barge_in();
                self.fold_user_speech();
                self.transcript.push(Entry::User {
                    text: text.clone(),
                    via: UserInput::Typed,
                });
                self.reply.sent();
                effects.push(Effect::SendText(text));
                effects
            }
            Msg::EndSession => {
                if self.closing || self.is_finished() {
                    return Vec::new();
                }
                // A reply still streaming is cut off by the end where the user sees it now,
                // and silenced: nothing more of it is shown or played.
                let mut effects = self.barge_in();
                self.closing = true;
                effects.push(Effect::CloseSession);
                effects
            }
        }
    }

    /// `arrived_at`: when a replayed event arrived in the original run (else it is now).
    fn on_session(
        &mut self,
        event: ServerEvent,
        arrived_at: Option<jiff::civil::Time>,
    ) -> Vec<Effect> {
        self.reply.observe(&event);
        match event {
            ServerEvent::SetupComplete { .. } => {
                self.connection = ConnectionState::Connected;
                self.floor = Floor::Listening;
                Vec::new()
            }
            // Normal replies come in parts of a few words; a part past `excerpt::TEXT` is not
            // a reply, and is cut so no screen or line has to hold it.
            ServerEvent::ModelText(text) => {
                if !self.audio.discard_turn && !self.closing {
                    self.wire_speaking();
                    self.open_model_entry()
                        .0
                        .push_str(&bounded(&text, excerpt::TEXT));
                }
                Vec::new()
            }
            ServerEvent::OutputTranscription { text, .. } => {
                if !self.audio.discard_turn && !self.closing {
                    self.wire_speaking();
                    self.open_model_entry()
                        .1
                        .push_str(&bounded(&text, excerpt::TEXT));
                }
                Vec::new()
            }
            ServerEvent::ModelAudio { pcm, .. } => self.on_model_audio(pcm),
            ServerEvent::InputTranscription { text, .. } => {
                self.append_user_speech(&bounded(&text, excerpt::TEXT));
                Vec::new()
            }
            ServerEvent::GenerationComplete => Vec::new(),
            ServerEvent::Interrupted => {
                // Only the service's interruption can be Gemini hearing itself: a local
                // barge-in has already finished the entry (and silenced the speaker). The
                // verdict comes from the audio worker once it has silenced the speaker: by
                // then it has seen every mic frame that could have made the service interrupt.
                let heard = self.audio.audible;
                let echo = self.audio.echo_suspected();
                let index = self.streaming_model_entry();
                if let Some(Entry::Model { echo_suspected, .. }) =
                    self.finish_model_entry(ModelTurnStatus::Interrupted)
                {
                    *echo_suspected = echo;
                }
                self.echo_check = index.filter(|_| heard && !echo);
                self.floor = Floor::Listening;
                self.end_model_audio(true)
            }
            ServerEvent::TurnComplete { .. } => {
                self.finish_model_entry(ModelTurnStatus::Complete);
                // With a speaker, Gemini speaks until the last sample has been heard.
                if !(self.audio.playback_drives_speaking() && self.audio.audible) {
                    self.floor = Floor::Listening;
                }
                let mut effects = self.end_model_audio(false);
                effects.extend(self.end_if_asked());
                effects
            }
            // The reply watch has it; a goodbye turn may have been waiting for it.
            ServerEvent::Interaction { .. } => self.end_if_asked(),
            ServerEvent::ToolCall(calls) => {
                self.fold_user_speech();
                let started_at = arrived_at.unwrap_or_else(self.clock);
                let mut keyed = Vec::with_capacity(calls.len());
                for call in calls {
                    let index = self.tool_calls.len();
                    self.tool_calls.push(ToolCallRecord {
                        id: call.id.clone(),
                        name: call.name.clone(),
                        args: call.args.clone(),
                        state: ToolState::Running,
                        duration: None,
                        response: None,
                        truncated: false,
                        started_at,
                        slow: false,
                        progress: None,
                        edited_from: None,
                    });
                    self.transcript.push(Entry::Tool(index));
                    keyed.push(KeyedCall {
                        key: CallKey(index as u64),
                        call,
                    });
                }
                vec![Effect::RunTools(keyed)]
            }
            ServerEvent::ToolCallCancelled(ids) => {
                // Remembered because the call may finish before the cancel reaches it.
                self.withdrawn_calls.extend(ids.iter().cloned());
                vec![Effect::CancelTools(ids)]
            }
            ServerEvent::GoAway { time_left } => {
                let when = time_left
                    .map(|t| format!(" in {:.0} s", t.as_secs_f64()))
                    .unwrap_or_default();
                self.notice(
                    NoticeLevel::Warning,
                    format!("The server will end this connection{when} (goAway)."),
                );
                Vec::new()
            }
            ServerEvent::ResumptionUpdate { .. } => Vec::new(),
            ServerEvent::Usage(usage) => {
                self.total_tokens += usage.total_token_count.unwrap_or(0);
                self.last_usage = Some(usage);
                Vec::new()
            }
            ServerEvent::VoiceActivity { .. } | ServerEvent::Grounding(_) => Vec::new(),
            ServerEvent::FrameSkipped { reason } => {
                self.notice(NoticeLevel::Warning, reason);
                Vec::new()
            }
            ServerEvent::Closed(_) if self.gave_up => Vec::new(),
            ServerEvent::Closed(close) => {
                self.finish_model_entry(ModelTurnStatus::Interrupted);
                self.floor = Floor::Listening;
                // Audio of a reply cut off by the close is still heard to its end, like text
                // already printed; only a barge-in silences it.
                if !close.initiated_by_client {
                    self.notice(NoticeLevel::Error, close.message.clone());
                }
                self.disconnect(close.message);
                self.reply.forget();
                Vec::new()
            }
        }
    }

    fn on_session_change(&mut self, event: SessionChange) -> Vec<Effect> {
        match event {
            SessionChange::Reconnecting {
                planned,
                attempt,
                reason,
                retry_in,
            } => {
                if self.connection != ConnectionState::Reconnecting {
                    self.reconnects += 1;
                    self.calls_before_reconnect = self.tool_calls.len();
                    self.reply.connection_replaced();
                    // A reply cut off by the loss stays in the history as interrupted.
                    self.finish_model_entry(ModelTurnStatus::Interrupted);
                    self.floor = Floor::Listening;
                }
                self.connection = ConnectionState::Reconnecting;
                // A planned hand-over only shows in the status line; losses are explained.
                if !planned {
                    let when = if retry_in.is_zero() {
                        String::new()
                    } else {
                        format!(" in {:.1} s", retry_in.as_secs_f64())
                    };
                    let text = if attempt <= 1 {
                        format!("Connection lost: {reason} Reconnecting{when}…")
                    } else {
                        format!("Reconnect attempt {attempt}{when} ({reason})")
                    };
                    self.notice(NoticeLevel::Warning, text);
                }
                Vec::new()
            }
            SessionChange::Reconnected { resumed } => {
                // The new connection declared the tools as they are now.
                self.tools_pending = false;
                let text = if resumed {
                    "Reconnected; the conversation continues."
                } else {
                    "Reconnected with a new session."
                };
                self.notice(NoticeLevel::Info, text.to_owned());
                Vec::new()
            }
            SessionChange::ResumeRejected { message } => {
                self.notice(
                    NoticeLevel::Warning,
                    format!(
                        "{message} Starting a fresh session: the model no longer knows the conversation so far."
                    ),
                );
                Vec::new()
            }
            SessionChange::AnswerDropped { id, name } => {
                let id = id.map(|id| format!(" ({id})")).unwrap_or_default();
                self.notice(
                    NoticeLevel::Warning,
                    format!(
                        "The result of {name}{id} was not sent: the connection that asked for it has ended or the call was withdrawn."
                    ),
                );
                Vec::new()
            }
        }
    }

    fn on_tool(&mut self, event: ToolEvent) -> Vec<Effect> {
        let effects = self.apply_tool_event(event);
        self.retire_waiting_notice();
        effects
    }

    fn apply_tool_event(&mut self, event: ToolEvent) -> Vec<Effect> {
        match event {
            ToolEvent::Finished(outcome) => {
                // The dispatcher guarantees one answer per call; the record is only for show,
                // so a call we never listed is still answered.
                let index = self.find_open_call(outcome.key, outcome.id.as_deref(), &outcome.name);
                // Finished before the server's cancel could stop it: withdrawn, not answered.
                if let Some(id) = &outcome.id
                    && self.withdrawn_calls.remove(id)
                {
                    if let Some(index) = index {
                        self.tool_calls[index].state = ToolState::Cancelled;
                        self.tool_calls[index].duration = Some(outcome.duration);
                    }
                    return Vec::new();
                }
                if let Some(index) = index {
                    let record = &mut self.tool_calls[index];
                    record.state = match &outcome.status {
                        ToolStatus::Ok => ToolState::Ok,
                        ToolStatus::Error(message) | ToolStatus::Panicked(message) => {
                            ToolState::Error(message.clone())
                        }
                        ToolStatus::TimedOut => ToolState::TimedOut,
                        ToolStatus::Refused(message) => ToolState::Refused(message.clone()),
                        ToolStatus::ByHand => ToolState::ByHand,
                    };
                    // A failed call is answered to the model as an error; the user should
                    // see it too, not only in the log.
                    let failure = match &record.state {
                        ToolState::Error(message) => Some(message.clone()),
                        ToolState::TimedOut => Some("it did not finish in time".to_owned()),
                        _ => None,
                    };
                    record.duration = Some(outcome.duration);
                    record.truncated = outcome.truncated;
                    record.response = Some(outcome.response.clone());
                    let refusal = match &record.state {
                        ToolState::Refused(message) => Some(message.clone()),
                        _ => None,
                    };
                    if let Some(why) = failure {
                        self.notice(
                            NoticeLevel::Warning,
                            format!("Tool {} failed: {why}", outcome.name),
                        );
                    }
                    if let Some(why) = refusal {
                        self.notice(
                            NoticeLevel::Info,
                            format!("Tool {} was not run: {why}", outcome.name),
                        );
                    }
                }
                if outcome.ends_session() {
                    self.end_after_turn = true;
                }
                if self.closing || self.is_finished() {
                    return Vec::new();
                }
                // A SILENT result starts no generation, so nothing is awaited for it; nor is
                // anything for a call of a lost connection (the session withholds its answer).
                let orphaned = index.is_some_and(|i| i < self.calls_before_reconnect);
                if outcome.response.scheduling != Some(Scheduling::Silent) && !orphaned {
                    self.reply.continued();
                }
                vec![Effect::SendToolResponse(outcome.response)]
            }
            ToolEvent::Slow(slow) => {
                self.flag_slow(slow);
                Vec::new()
            }
            ToolEvent::Progress(report) => {
                if let Some(index) =
                    self.find_open_call(Some(report.key), report.id.as_deref(), &report.name)
                {
                    self.tool_calls[index].progress = Some(report);
                }
                Vec::new()
            }
            ToolEvent::Waiting(waiting) => {
                self.await_user(waiting);
                Vec::new()
            }
            ToolEvent::Cancelled {
                key,
                id,
                name,
                duration,
            } => {
                self.withdrawn_calls.remove(&id);
                if let Some(index) = self.find_open_call(key, Some(&id), &name) {
                    let record = &mut self.tool_calls[index];
                    record.state = ToolState::Cancelled;
                    record.duration = Some(duration);
                }
                Vec::new()
            }
        }
    }

    fn on_mcp(&mut self, event: McpEvent) {
        match event {
            McpEvent::Up { server, tools } => self.notice(
                NoticeLevel::Info,
                format!(
                    "MCP server {server} is up with {tools} tool{}.",
                    if tools == 1 { "" } else { "s" }
                ),
            ),
            McpEvent::Down { server, message } => self.notice(
                NoticeLevel::Warning,
                format!(
                    "MCP server {server} {message}. Its tools answer with errors until it is restarted (F8, then r)."
                ),
            ),
            McpEvent::ToolsChanged { server, tools } => self.notice(
                NoticeLevel::Info,
                format!(
                    "MCP server {server} changed its tools (now {tools}); the model sees the new list from the next connection."
                ),
            ),
        }
    }

    /// A call waits for the user: the log shows it and a notice says how to answer it.
    fn await_user(&mut self, waiting: WaitingCall) {
        let Some(index) =
            self.find_open_call(Some(waiting.key), waiting.id.as_deref(), &waiting.name)
        else {
            return;
        };
        self.tool_calls[index].state = ToolState::Waiting;
        self.waiting_notice = Some(self.notices.len());
        self.notice(
            NoticeLevel::Warning,
            format!(
                "{} waits for you: {} goes to it; then a approves, d denies, e edits the arguments, r types the result.",
                waiting.name,
                keys::GO_TO_WAITING
            ),
        );
    }

    /// The user's verdict on a call: applied where it still can be (a call answered or
    /// cancelled meanwhile keeps its end), and handed to the dispatcher.
    fn on_verdict(&mut self, key: CallKey, verdict: Verdict) -> Vec<Effect> {
        let Some(record) = usize::try_from(key.0)
            .ok()
            .and_then(|index| self.tool_calls.get_mut(index))
        else {
            return Vec::new();
        };
        let applies = match verdict {
            Verdict::Answer(_) => record.state.is_open(),
            Verdict::Approve | Verdict::Edit(_) | Verdict::Deny => {
                record.state == ToolState::Waiting
            }
        };
        if !applies {
            return Vec::new();
        }
        match &verdict {
            Verdict::Approve => record.state = ToolState::Running,
            Verdict::Edit(args) => {
                record.edited_from = Some(std::mem::replace(&mut record.args, args.clone()));
                record.state = ToolState::Running;
            }
            // Answered when the dispatcher reports it, like every other end.
            Verdict::Deny | Verdict::Answer(_) => {}
        }
        self.retire_waiting_notice();
        vec![Effect::ToolVerdict { key, verdict }]
    }

    /// Once no call waits, the notice that asked for an answer has done its job: it goes,
    /// unless something newer is shown.
    fn retire_waiting_notice(&mut self) {
        if self.first_waiting_call().is_none()
            && let Some(index) = self.waiting_notice.take()
            && index + 1 == self.notices.len()
        {
            self.view.notices_dismissed = self.view.notices_dismissed.max(self.notices.len());
        }
    }

    fn flag_slow(&mut self, slow: SlowCall) {
        if let Some(index) = self.find_open_call(slow.key, slow.id.as_deref(), &slow.name) {
            self.tool_calls[index].slow = true;
            self.notice(
                NoticeLevel::Warning,
                format!(
                    "{} has been running for {:.1} s; it is answered with an error if it does not finish in time.",
                    slow.name,
                    slow.elapsed.as_secs_f64()
                ),
            );
        }
    }

    /// The unanswered call an event is about: by its key, or (in recordings made before calls
    /// were numbered) the first open call with its id, or with its name when it has none.
    fn find_open_call(&self, key: Option<CallKey>, id: Option<&str>, name: &str) -> Option<usize> {
        if let Some(key) = key {
            let index = usize::try_from(key.0).ok()?;
            return self
                .tool_calls
                .get(index)
                .filter(|c| c.state.is_open())
                .map(|_| index);
        }
        self.tool_calls.iter().position(|c| {
            c.state.is_open()
                && match id {
                    Some(id) => c.id.as_deref() == Some(id),
                    None => c.id.is_none() && c.name == name,
                }
        })
    }

    /// Without a speaker, model output on the wire is what says Gemini is speaking.
    fn wire_speaking(&mut self) {
        if !self.audio.playback_drives_speaking() {
            self.floor = Floor::Speaking;
        }
    }

    /// The session is over, for this reason (which may quote the server, so it is bounded).
    fn disconnect(&mut self, reason: String) {
        self.connection = ConnectionState::Disconnected {
            reason: excerpt::into_bounded(reason, excerpt::SUMMARY),
        };
    }

    /// Every notice goes through here; many quote the server (a close reason, a skipped
    /// frame, a tool's error), so each is bounded once, for every presenter.
    fn notice(&mut self, level: NoticeLevel, text: String) {
        self.notices.push(Notice {
            level,
            text: excerpt::into_bounded(text, excerpt::SUMMARY),
        });
    }

    /// The streaming model entry's (text_parts, transcript), opening one if needed.
    fn open_model_entry(&mut self) -> (&mut String, &mut String) {
        let open = matches!(
            self.transcript.last(),
            Some(Entry::Model {
                status: ModelTurnStatus::Streaming,
                ..
            })
        );
        if !open {
            self.fold_user_speech();
            self.transcript.push(Entry::Model {
                text_parts: String::new(),
                transcript: String::new(),
                status: ModelTurnStatus::Streaming,
                echo_suspected: false,
            });
        }
        match self.transcript.last_mut() {
            Some(Entry::Model {
                text_parts,
                transcript,
                ..
            }) => (text_parts, transcript),
            _ => unreachable!("a streaming model entry was just ensured"),
        }
    }

    /// Ends the streaming model entry this way; returns it (none was streaming: `None`).
    /// The index of the model entry still streaming, if any.
    fn streaming_model_entry(&self) -> Option<usize> {
        self.transcript.iter().rposition(|entry| {
            matches!(
                entry,
                Entry::Model {
                    status: ModelTurnStatus::Streaming,
                    ..
                }
            )
        })
    }

    /// The audio worker's verdict on the interruption waiting for one.
    pub(super) fn echo_verdict(&mut self, echo_heard: bool) {
        let Some(index) = self.echo_check.take() else {
            return;
        };
        if let Some(Entry::Model { echo_suspected, .. }) = self.transcript.get_mut(index) {
            *echo_suspected = echo_heard;
        }
    }

    fn finish_model_entry(&mut self, how: ModelTurnStatus) -> Option<&mut Entry> {
        let entry = self.transcript.iter_mut().rev().find(|entry| {
            matches!(
                entry,
                Entry::Model {
                    status: ModelTurnStatus::Streaming,
                    ..
                }
            )
        })?;
        if let Entry::Model { status, .. } = entry {
            *status = how;
        }
        Some(entry)
    }

    fn append_user_speech(&mut self, fragment: &str) {
        if let Some(Entry::User {
            text,
            via: UserInput::Speech,
        }) = self.transcript.last_mut()
        {
            text.push_str(fragment);
            return;
        }
        self.transcript.push(Entry::User {
            text: fragment.to_owned(),
            via: UserInput::Speech,
        });
    }

    /// Speech fragments are appended raw while they stream; once something else enters the
    /// history the entry is final, so its text is folded into readable form.
    fn fold_user_speech(&mut self) {
        if let Some(Entry::User {
            text,
            via: UserInput::Speech,
        }) = self.transcript.last_mut()
        {
            *text = fold_whitespace(text);
        }
    }
}

#[cfg(test)]
mod tests;
