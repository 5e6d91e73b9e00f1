//! What changes the app and what it asks for: [`Msg`] in, [`Effect`]s out. Messages are
//! recorded as they are applied (converted to the recording format's own types in
//! `record::format`, so their shape here is free to change), effects are carried out by the
//! drive loop.

use serde::{Deserialize, Serialize};

use super::{ScreenLayout, WireFrame};
use crate::audio::EchoMode;
use crate::tools::mcp::{Catalog, McpEvent};
use crate::tools::{CallKey, Device, KeyedCall, ToolEvent, Verdict};
use livetalk_live::ServerEvent;
use livetalk_live::session::SessionChange;
use livetalk_live::wire::FunctionResponse;

/// Everything that can change the app. What comes from the server, the session, the tools, the
/// devices and the audio system, and what the user means (a turn sent, a barge-in, the end),
/// is recorded as it is applied and replayed as it was; raw input (keys, mouse, paste), the
/// layout and the tick only move the view and are never recorded.
#[derive(Debug, Clone, PartialEq)]
pub enum Msg {
    /// The connection attempt failed before the session started.
    ConnectFailed(String),
    /// What the server said, as the session passed it on. (Recordings name it `session`.)
    Server(ServerEvent),
    /// A server event from a recording, with the local time of day it arrived in the
    /// original run: applied like `Server`, but the tool log shows that time, not the clock.
    Replayed {
        event: ServerEvent,
        arrived_at: jiff::civil::Time,
    },
    /// The session moved to a new connection, lost one, or withheld an answer. (Recordings
    /// name it `link`.)
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
    Quit,
    /// A key press in the TUI.
    Key(crossterm::event::KeyEvent),
    /// A mouse event in the TUI.
    Mouse(crossterm::event::MouseEvent),
    /// Text pasted into the TUI.
    Paste(String),
    /// Where the TUI drew things in its last frame.
    Layout(ScreenLayout),
    /// The time is now this: the animation's tick (only while something animates), and the
    /// moment the speaker's news arrived (the engine sends it just before). The app reads no
    /// clock of its own.
    Tick(std::time::Instant),
    /// A frame went over the wire, either way: kept for the event inspector. Not recorded
    /// (the recording's wire lines are written from it and from the tap), and drawn only when
    /// something shows it.
    Wire(WireFrame),
    /// The entries of the folder of a path Tab completes (`typed`: the path so far). Not
    /// recorded: it only changes the input line.
    PathChoices { typed: String, entries: Vec<String> },
    /// The picture `/image` named, read and made ready to send, or why it cannot be. Not
    /// recorded (a recording's line kinds are fixed per format version; see
    /// docs/recording-format.md): a replay shows the `/image` line but not the picture.
    Image(Result<ImageSent, String>),
    /// The monitors and windows that can be shared, for Tab after `/screen` (`typed`: the
    /// name so far). Not recorded: it only changes the input line.
    SharedChoices { typed: String, names: Vec<String> },
    /// What the screen part says of the screen (or the folder of frames) being shared: it
    /// began, a frame that changed is ready to send, or sharing cannot go on. Not recorded,
    /// like [`Msg::Image`].
    Screen(ScreenNews),
}

/// What is shared, a frame a second: the screen (one monitor or window of it, by name), or
/// a folder of pictures (`--video`) in name order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShareSource {
    Screen(Option<String>),
    Folder(std::path::PathBuf),
}

/// News of one share (`share`: its number in the session; news of an earlier share that
/// arrives after it stopped is ignored).
#[derive(Debug, Clone, PartialEq)]
pub enum ScreenNews {
    /// Sharing began: what is shared, as the user reads it ("the screen :99, 2048×1152").
    Started { share: u32, what: String },
    /// A frame that differs from the last one sent, scaled and encoded.
    Frame { share: u32, frame: ImageSent },
    /// Sharing cannot go on (no display, the window closed, the folder unreadable), in one
    /// sentence.
    Failed { share: u32, problem: String },
}

/// A picture made ready for the model: what the transcript says of it, and the JPEG sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageSent {
    /// The file's name (without its folder).
    pub name: String,
    /// The file's size in bytes.
    pub file_bytes: u64,
    /// The picture's size as sent (scaled to at most 1024 pixels on its longest side).
    pub width: u32,
    pub height: u32,
    /// The picture as JPEG.
    pub jpeg: Vec<u8>,
    /// When it was made ready (a screen's frame: when it was taken).
    pub at: std::time::Instant,
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
                | Msg::Tick(_)
                | Msg::Wire(_)
                | Msg::PathChoices { .. }
                | Msg::Image(_)
                | Msg::Screen(_)
                | Msg::SharedChoices { .. }
        )
    }

    /// True when applying it may change what is shown: a frame for the inspector changes
    /// nothing on screen while it is closed, and a voice turn is 75 of them a second.
    pub fn may_show(&self) -> bool {
        !matches!(self, Msg::Wire(_))
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
    /// The pace in percent of the recorded one (`None`: as fast as possible).
    #[serde(default)]
    pub speed_percent: Option<u32>,
}

/// Work for the loop to do on the app's behalf: what a key meant and what only the presenter
/// can do, and otherwise work for one part of the live engine, each part's effects a type of
/// their own (adding one edits that type and the part that carries it out, nothing else).
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// What a key meant (send, barge in, end…): the loop applies it as a message of its own,
    /// so it is recorded like every other message.
    Intent(Msg),
    /// Put this text on the user's clipboard. The presenter carries it out (the TUI writes it
    /// through the terminal as OSC 52, which reaches the local clipboard over SSH and tmux);
    /// the source never sees it.
    Copy(String),
    /// For the Live session.
    Session(SessionEffect),
    /// For the audio devices.
    Media(MediaEffect),
    /// For the tools.
    Tools(ToolEffect),
    /// For work on files, done off the loop.
    Files(FileEffect),
    /// For the screen being shared.
    Screen(ScreenEffect),
    /// For a replay's pace.
    Replay(ReplayEffect),
}

impl Effect {
    /// True for what the presenter carries out rather than the source.
    pub fn is_presenters(&self) -> bool {
        matches!(self, Effect::Copy(_))
    }
}

/// Work for the Live session: what is sent, how it is set up, its end.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionEffect {
    SendText(String),
    /// Change the session's system instruction in place (`contextUpdate`).
    SendInstruction(String),
    /// Speak with this prebuilt voice from the next connection on, moved to at the next turn
    /// boundary with the resumption handle (the conversation is kept).
    SetVoice(String),
    /// Start a fresh session (no resumption handle) with this model: a model cannot change
    /// within a resumed session.
    SwitchModel(String),
    /// Send this JPEG as a video frame (`realtimeInput.video`).
    SendImage(Vec<u8>),
    SendToolResponse(FunctionResponse),
    /// Push-to-talk: the user starts speaking (`activityStart`).
    SendActivityStart,
    /// Push-to-talk: the user stopped speaking (`activityEnd`).
    SendActivityEnd,
    /// The mic stopped (muted): the server may flush what it cached (`audioStreamEnd`).
    SendAudioStreamEnd,
    CloseSession,
    /// Start connecting again (after the session gave up).
    Reconnect,
    /// The event inspector opened (`true`) or closed: while it is open the frames sent are
    /// wanted as they go, not only with the next frame the server sends.
    WatchWire(bool),
}

/// Work for the audio devices: the speaker and the mic.
#[derive(Debug, Clone, PartialEq)]
pub enum MediaEffect {
    /// Play model audio (24 kHz PCM16 LE).
    PlayAudio(Vec<u8>),
    /// The model's turn ended: play out the rest of its audio.
    EndPlaybackTurn,
    /// Barge-in: silence the speaker now and drop queued audio.
    StopPlayback,
    /// Let mic frames through to the session, or hold them back.
    SetMicOpen(bool),
    /// Close and re-open the audio devices.
    ReopenAudio,
    /// Switch how Gemini's voice is kept out of the mic, now.
    SetEcho(EchoMode),
}

/// Work for the tools: calls run and cancelled, verdicts, which tools are on.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolEffect {
    /// Run these calls, each under its place in the tool log.
    RunTools(Vec<KeyedCall>),
    CancelTools(Vec<String>),
    /// Hand the user's verdict on a call to the dispatcher.
    ToolVerdict {
        key: CallKey,
        verdict: Verdict,
    },
    /// Turn a tool on or off; the model is told at the next turn boundary.
    SetToolEnabled {
        name: String,
        enabled: bool,
    },
    /// Stop an MCP server (if it runs) and start it again.
    RestartMcpServer(String),
}

/// Work on files, off the loop; each answer comes back as a message.
#[derive(Debug, Clone, PartialEq)]
pub enum FileEffect {
    /// Read the picture at this path and make it ready to send; the answer comes back as
    /// [`Msg::Image`].
    PrepareImage(std::path::PathBuf),
    /// List the folder of this path being typed, for Tab; the answer comes back as
    /// [`Msg::PathChoices`].
    ListPaths(String),
}

/// Work for the screen part: what is shared, a frame a second.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScreenEffect {
    /// Start sharing this source as share number `share` (stopping any other).
    Start { share: u32, source: ShareSource },
    /// Stop sharing: no frame is taken after this.
    Stop,
    /// List the monitors and windows that can be shared, for Tab after `/screen` (`typed`:
    /// the name so far); the answer comes back as [`Msg::SharedChoices`].
    List(String),
}

/// Work for a replay's pace (a live session has none).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ReplayEffect {
    /// Pause or resume.
    Pause,
    /// Apply the next message while paused.
    Step,
    /// Multiply the speed by this (within the speeds `--speed` takes).
    Speed(f64),
}

macro_rules! into_effect {
    ($($part:ident => $variant:ident),*) => {
        $(impl From<$part> for Effect {
            fn from(effect: $part) -> Effect {
                Effect::$variant(effect)
            }
        })*
    };
}

into_effect!(
    SessionEffect => Session,
    MediaEffect => Media,
    ToolEffect => Tools,
    FileEffect => Files,
    ScreenEffect => Screen,
    ReplayEffect => Replay
);
