//! Format 3 of `session.jsonl`, in types of its own: every line kind (the `applied` messages,
//! the wire tap, and the app-level kinds formats 1 and 2 wrote, which format 3 still reads),
//! and what an `applied` line's `msg` holds. These spell the file, not the app: the app's
//! messages are converted to and from them in `convert.rs`, so a change in the app cannot
//! change the file. A change of shape here is format 4, in a module of its own.
//!
//! What the Live API defines (a function call, a function response, token usage) is kept in
//! the API's own JSON, as in the `send` and `recv` lines; durations are `{"secs", "nanos"}`.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use livetalk_live::wire::{FunctionCall, FunctionResponse, Text, UsageMetadata};

/// One line: a monotonic timestamp (seconds since the recording started) and what happened.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Line {
    pub t: f64,
    #[serde(flatten)]
    pub record: Record,
}

/// What a line records. Format 3 writes `meta`, `applied` and the wire tap (`connect`,
/// `send`, `recv`, `close`); format 4 the wire tap with `link`, `ended` and `warning`; the
/// other kinds are read from earlier formats only, where `at` is the number of session events
/// the app had applied when the line was written.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    /// The first line.
    Meta(Box<Meta>),
    /// A message the app applied; a model audio chunk's samples are at `audio`.
    Applied {
        msg: Msg,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        audio: Option<AudioRef>,
    },
    /// A connection attempt to this host.
    Connect { host: String },
    /// The attempt failed before the session started.
    ConnectFailed { message: String },
    /// A client message as sent (audio replaced by an [`AudioRef`]).
    Send { message: Value },
    /// A server frame as received (audio replaced by an [`AudioRef`]), or why it was skipped.
    /// `setup` marks frames read while waiting for `setupComplete`.
    Recv {
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        setup: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        skipped: Option<String>,
    },
    /// The connection ended.
    Close {
        code: Option<u16>,
        reason: String,
        message: String,
        initiated_by_client: bool,
    },
    /// A typed user turn.
    UserText { text: String, at: u64 },
    /// The user (or the end of input, or `end_session`) closed the session.
    EndSession { at: u64 },
    /// A tool call finished; `response` is exactly what was sent.
    ToolResult {
        id: Option<String>,
        name: String,
        args: Value,
        /// ok, error, timed_out or panicked.
        outcome: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        duration_ms: f64,
        /// Exact, so replay prints the same durations.
        duration_ns: u64,
        response: FunctionResponse,
        truncated: bool,
        at: u64,
    },
    /// The server cancelled a running call; it was not answered.
    ToolCancelled {
        id: String,
        name: String,
        duration_ms: f64,
        duration_ns: u64,
        at: u64,
    },
    /// The smart-home devices changed.
    Devices { devices: Vec<Device>, at: u64 },
    /// An error of the run itself (e.g. a headless turn timeout).
    Error { message: String, at: u64 },
    /// The connection is being replaced: `planned` after a goAway, otherwise the connection was
    /// lost; `attempt` counts failed tries and the next one starts after `retry_in`.
    Reconnecting {
        planned: bool,
        attempt: u32,
        reason: String,
        retry_in_ms: f64,
        /// Exact, so replay shows the same wait.
        retry_in_ns: u64,
        at: u64,
    },
    /// A new connection is up (`resumed` by handle).
    Reconnected { resumed: bool, at: u64 },
    /// The saved session could not be resumed; a fresh one follows.
    ResumeRejected { message: String, at: u64 },
    /// A tool answer was not sent: the connection that asked for it had ended.
    AnswerDropped {
        id: Option<String>,
        name: String,
        at: u64,
    },
    /// The dispatcher saw a call run longer than expected.
    ToolSlow {
        id: Option<String>,
        name: String,
        elapsed_ms: f64,
        elapsed_ns: u64,
        at: u64,
    },
    /// The user asked to connect again after the session gave up.
    Retry { at: u64 },
    /// The session ended, as the app was told: the last connection's close, or why the session
    /// gave up reconnecting (which no `close` line says).
    SessionEnded {
        code: Option<u16>,
        reason: String,
        message: String,
        initiated_by_client: bool,
        at: u64,
    },
    /// Format 4 ([`super::v4`]): what the session did on its own (a reconnect, a hand-over, a
    /// refused handle), where format 3 has an `applied` `link` message.
    Link { change: SessionChange },
    /// Format 4: the session is over for good, as its owner was told.
    Ended {
        code: Option<u16>,
        reason: String,
        message: String,
        initiated_by_client: bool,
    },
    /// Format 4: something the recording's owner said about the session (a message it
    /// refused, a frame it could not use, a drain).
    Warning { message: String },
}

/// Metadata on the first line. Never holds the API key.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Meta {
    pub format: u32,
    pub livetalk_version: String,
    /// Local wall-clock start, RFC 3339.
    pub started_at: String,
    pub model: String,
    pub voice: String,
    /// Host name or "offline demo model".
    pub endpoint_host: String,
    pub offline: bool,
    /// Devices when the session started (later changes are `devices_changed` messages).
    pub devices: Vec<Device>,
    /// A summary of the settings, for people.
    pub config: Value,
    /// The audio the session asked for (`None`: none, or a recording from before this was
    /// kept), so a replay's app starts as the original's did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio: Option<AudioAsked>,
}

/// Where an audio payload went: samples `[sample_offset, sample_offset + sample_count)` of
/// `file`, in the recording folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AudioRef {
    pub file: String,
    pub sample_offset: u64,
    pub sample_count: u64,
}

/// The audio a session asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct AudioAsked {
    pub microphone: bool,
    pub input_wav: bool,
    pub output_wav: bool,
    pub push_to_talk: bool,
    pub echo: EchoMode,
}

/// How the model's voice was kept out of the microphone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EchoMode {
    #[default]
    Aec,
    Gate,
    Off,
}

/// One smart-home device and its whole state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Device {
    pub name: String,
    pub kind: DeviceKind,
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub brightness: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub color: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature_celsius: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceKind {
    Light,
    Thermostat,
    Lock,
}

/// A message the app applied (`applied` lines' `msg`): one key naming its kind, holding what
/// it carries (`"end_session"` alone for a kind that carries nothing).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Msg {
    /// The connection attempt failed before the session started.
    ConnectFailed(String),
    /// What the server said.
    Session(ServerEvent),
    /// The session moved to a new connection, lost one, or withheld an answer.
    Link(SessionChange),
    /// A tool call finished, was cancelled, ran long, waited for the user, or reported
    /// progress.
    Tool(ToolEvent),
    /// The user's verdict on the call at `key` (its place in the tool log).
    ToolVerdict { key: u64, verdict: Verdict },
    /// An MCP server came up, went down, or changed its tools.
    Mcp(McpEvent),
    /// Every tool and MCP server as they were then.
    ToolCatalog(Catalog),
    /// The user turned a tool on or off.
    SetToolEnabled { name: String, enabled: bool },
    /// The user restarted an MCP server.
    RestartMcpServer(String),
    /// The smart-home devices changed.
    DevicesChanged(Vec<Device>),
    /// The audio system opened devices, failed, or reported playback, levels or figures.
    Audio(AudioEvent),
    /// The user sent a text turn.
    UserText(String),
    /// The user silenced the model.
    BargeIn,
    /// The user muted or unmuted the microphone.
    ToggleMute,
    /// Push-to-talk: the user started or stopped speaking.
    ToggleTalk,
    /// The user asked to open the audio devices again.
    ReopenAudio,
    /// The user switched how the model's voice is kept out of the mic.
    SetEcho(EchoMode),
    /// The user asked to connect again after the session gave up.
    Retry,
    /// The user (or the end of input) ended the session.
    EndSession,
    /// The run gave up on the session (a headless turn that never got an answer).
    GaveUp(String),
}

/// What the server said (`msg.session`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerEvent {
    SetupComplete {
        session_id: Option<String>,
    },
    /// The text is the event's, shared (a string on disk).
    ModelText(Text),
    /// A chunk of model audio; its samples are at the line's `audio`.
    ModelAudio {
        sample_rate: u32,
    },
    InputTranscription {
        text: Text,
        finished: bool,
    },
    OutputTranscription {
        text: Text,
        finished: bool,
    },
    GenerationComplete,
    Interaction {
        idle: bool,
    },
    TurnComplete {
        reason: Option<String>,
        waiting_for_input: bool,
    },
    Interrupted,
    ToolCall(Vec<FunctionCall>),
    ToolCallCancelled(Vec<String>),
    GoAway {
        time_left: Option<Duration>,
    },
    ResumptionUpdate {
        handle: Option<String>,
        resumable: bool,
    },
    Usage(UsageMetadata),
    VoiceActivity {
        speaking: bool,
    },
    Grounding(Value),
    FrameSkipped {
        reason: String,
    },
    Closed(CloseInfo),
}

/// How and why a connection (or the session) ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CloseInfo {
    pub code: Option<u16>,
    pub reason: String,
    pub message: String,
    pub initiated_by_client: bool,
}

/// What the session did on its own (`msg.link`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionChange {
    Reconnecting {
        planned: bool,
        attempt: u32,
        reason: String,
        retry_in: Duration,
    },
    Reconnected {
        resumed: bool,
    },
    ResumeRejected {
        message: String,
    },
    TurnLost,
    AnswerDropped {
        id: Option<String>,
        name: String,
    },
}

/// What became of a tool call (`msg.tool`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolEvent {
    Finished(ToolOutcome),
    Cancelled {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        key: Option<u64>,
        id: String,
        name: String,
        duration: Duration,
    },
    Slow(SlowCall),
    Waiting(WaitingCall),
    Progress(ProgressReport),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgressReport {
    pub key: u64,
    pub id: Option<String>,
    pub name: String,
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlowCall {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<u64>,
    pub id: Option<String>,
    pub name: String,
    pub elapsed: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitingCall {
    pub key: u64,
    pub id: Option<String>,
    pub name: String,
}

/// How a call ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    Ok,
    Error(String),
    TimedOut,
    Panicked(String),
    Refused(String),
    ByHand,
}

/// A finished call and the answer sent for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolOutcome {
    /// Absent in recordings made before calls were numbered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<u64>,
    pub id: Option<String>,
    pub name: String,
    pub args: Value,
    pub status: ToolStatus,
    /// The exact `functionResponses` entry.
    pub response: FunctionResponse,
    pub duration: Duration,
    pub truncated: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unasked: Option<Unasked>,
}

/// Why a call ran without anybody being asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unasked {
    BuiltIn,
    SetToNever,
    ServerSaysReadOnly,
    ApproveAll,
}

/// What the person did with a call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Approve,
    Edit(Value),
    Deny,
    Answer(Value),
}

/// What happened to an MCP server (`msg.mcp`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum McpEvent {
    Up { server: String, tools: u64 },
    Down { server: String, message: String },
    ToolsChanged { server: String, tools: u64 },
    Trimmed { server: String, message: String },
}

/// Every tool and MCP server, as the tool list showed them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Catalog {
    pub tools: Vec<ToolEntry>,
    pub servers: Vec<ServerEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolEntry {
    pub name: String,
    pub server: Option<String>,
    pub description: String,
    pub enabled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unasked: Option<Unasked>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerEntry {
    pub name: String,
    pub state: ServerState,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerState {
    Starting,
    Up,
    Down(String),
}

/// What the audio system reported (`msg.audio`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AudioEvent {
    Opened(AudioSetup),
    DeviceFailed {
        direction: Direction,
        message: String,
    },
    Audible(bool),
    Levels {
        mic: f32,
        output: f32,
    },
    Figures(AudioFigures),
    Echo(EchoFigures),
    Silenced {
        echo_heard: bool,
    },
    InputClipEnded,
    OutputWavFull {
        path: String,
        max_bytes: u64,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AudioSetup {
    pub input: Option<StreamInfo>,
    pub output: Option<StreamInfo>,
    pub problems: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamInfo {
    pub name: String,
    pub path: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Input,
    Output,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AudioFigures {
    pub frames_sent: u64,
    pub frames_dropped: u64,
    pub frames_gated: u64,
    pub mic_overflow: u64,
    pub mic_gaps: Duration,
    pub underruns: u64,
    pub played: Duration,
    pub mic_to_socket: Latency,
    pub socket_to_speaker: Latency,
    pub interrupt_to_silence: Latency,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Latency {
    pub last: Duration,
    pub worst: Duration,
    pub count: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EchoFigures {
    pub mode: EchoMode,
    pub cancelling: bool,
    pub noise_suppression: bool,
    pub device_delay_ms: Option<u32>,
    pub delay_ms: Option<u32>,
    pub erle_db: Option<f32>,
    pub erl_db: Option<f32>,
    pub converged: bool,
    pub far_end_secs: f32,
    pub echo_heard: bool,
}
