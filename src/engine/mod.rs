//! The live engine: the [`Source`] of a live session, composed of parts that each own their
//! inputs and carry out their own effects: the session (`session.rs`: the Live session, its
//! dialer, the wire tap), media (`media.rs`: the audio worker), tools (`tools.rs`: the
//! dispatcher, MCP servers, approval, the devices), files (`files.rs`: work on files off the
//! loop), the screen (`screen.rs`: what `/screen` and `--video` share, a frame a second; its
//! X11 capture in `capture.rs`) and the recorder (`record`). The engine only routes: one select over the parts'
//! inputs, what one part's news means for another, and each effect to its part.
//! [`launch`] builds it from the settings.

mod capture;
mod files;
pub mod launch;
mod media;
pub mod picture;
mod screen;
pub(crate) use screen::folder_frames;
mod session;
mod tools;
mod wiretap;

use std::collections::VecDeque;
use std::sync::Arc;

use crate::app::{Effect, Msg};
use crate::audio::AudioWorker;
use crate::driver::Source;
use crate::record::Recorder;
use crate::tools::mcp::{Catalog, McpEvent, McpHub};
use crate::tools::{Decider, Registry, SmartHome};
use livetalk_live::ConnectOptions;
use livetalk_live::session::{ReconnectPolicy, SessionStatus};
use livetalk_mock::MockServer;

use files::Files;
use media::{Media, MediaNews};
use screen::Screen;
use session::{SessionNews, SessionPart};
use tools::{ToolNews, Tools};

pub use launch::{auth, build_setup, launch, reconnect_policy, tool_sets};
pub use session::ConnectTo;

/// A live session's engine. See the module doc.
pub struct Engine {
    session: SessionPart,
    media: Media,
    tools: Tools,
    files: Files,
    screen: Screen,
    recorder: Option<Recorder>,
    /// Messages to hand out before anything else: the rest of what a part took in (a frame's
    /// events, the sent frames with it, a list after a change).
    pending: VecDeque<Msg>,
}

impl Engine {
    /// An engine for these tools and devices, with nothing connected yet; `decider` settles
    /// calls of tools that ask for approval.
    pub fn new(registry: Arc<Registry>, home: &SmartHome, decider: Decider) -> Self {
        Engine {
            session: SessionPart::new(),
            media: Media::default(),
            tools: Tools::new(registry, home, decider),
            files: Files::new(),
            screen: Screen::new(),
            recorder: None,
            pending: VecDeque::new(),
        }
    }

    /// Adds the tools of these MCP servers (before the `setup` is built from
    /// [`Engine::registry`]).
    pub fn attach_mcp(
        &mut self,
        hub: McpHub,
        events: tokio::sync::mpsc::UnboundedReceiver<McpEvent>,
    ) {
        self.tools.attach_mcp(hub, events);
    }

    /// The tools calls run against now.
    pub fn registry(&self) -> Arc<Registry> {
        self.tools.registry()
    }

    /// Every tool and MCP server, for the tool list.
    pub fn catalog(&self) -> Catalog {
        self.tools.catalog()
    }

    /// Records the session from now on (before connecting, to have every frame).
    pub fn record_into(&mut self, recorder: Recorder) {
        self.session.record_into(recorder.clone());
        self.recorder = Some(recorder);
    }

    /// The folder this session is recorded into, if it is.
    pub fn recording_dir(&self) -> Option<&std::path::Path> {
        self.recorder.as_ref().map(|r| r.dir())
    }

    /// Sets how lost connections are retried (before connecting).
    pub fn set_reconnect_policy(&mut self, policy: ReconnectPolicy) {
        self.session.set_reconnect_policy(policy);
    }

    /// Uses this audio worker for the session's mic and model audio.
    pub fn attach_audio(&mut self, audio: AudioWorker) {
        self.media.attach(audio);
    }

    /// Keeps the embedded mock alive as long as the engine.
    pub fn keep_mock(&mut self, mock: MockServer) {
        self.session.keep_mock(mock);
    }

    /// Connects along `route` once the audio devices are open (or known missing, or after
    /// five seconds), from within [`Source::next`], so the presenter stays responsive.
    pub fn start(&mut self, route: ConnectTo) {
        self.session.start(route, self.media.has_devices());
    }

    /// Connects at once and waits for the session (tests drive the engine by hand).
    pub async fn connect(&mut self, options: ConnectOptions) -> Result<(), String> {
        self.session.connect(options).await
    }

    /// Streams one chunk of 16 kHz PCM16 mic audio (`realtimeInput.audio`) without an audio
    /// worker (tests stand in for the mic this way). While the session reconnects it is queued,
    /// and dropped if it waited longer than a second.
    pub async fn send_audio(&mut self, pcm: Vec<u8>) {
        self.session.send_audio(pcm).await;
    }

    /// Figures and the resumption handle of the session.
    pub fn session_status(&self) -> &SessionStatus {
        self.session.status()
    }

    /// True once nothing more can come: the session has ended and no tool is running.
    fn exhausted(&self) -> bool {
        self.pending.is_empty() && self.session.is_over() && self.tools.in_flight() == 0
    }

    /// What the tools part's news means: a call's answer goes as this session's service takes
    /// it, a new set of tools is declared to the session.
    async fn route_tools(&mut self, news: ToolNews) {
        match news {
            ToolNews::Call(event) => {
                let event = self.session.as_service_takes(event);
                self.pending.push_back(Msg::Tool(event));
            }
            ToolNews::Msg(msg) => self.pending.push_back(msg),
            ToolNews::Declare {
                tools,
                hand_over,
                then,
            } => {
                self.session.set_tools(tools, hand_over).await;
                self.pending.push_back(then);
            }
        }
    }
}

impl Source for Engine {
    async fn next(&mut self) -> Option<Msg> {
        loop {
            if let Some(msg) = self.pending.pop_front() {
                return Some(msg);
            }
            if self.exhausted() {
                return None;
            }
            let frames_wanted = self.session.takes_frames();
            tokio::select! {
                Some(news) = self.session.next(&mut self.pending) => match news {
                    SessionNews::Abandoned(ids) => self.tools.cancel(&ids),
                    SessionNews::Quiet => {}
                },
                Some(news) = self.media.next(frames_wanted) => match news {
                    MediaNews::Msg { msg, opened } => {
                        if opened {
                            self.session.devices_ready();
                        }
                        return Some(msg);
                    }
                    MediaNews::Timed(msg) => {
                        self.pending.push_back(msg);
                        return Some(Msg::Tick(std::time::Instant::now()));
                    }
                    MediaNews::Frame(frame) => {
                        let captured_at = frame.captured_at;
                        let taken = self.session.send_mic_frame(frame);
                        self.media.frame_taken(captured_at, taken);
                    }
                    MediaNews::Gone => self.session.devices_ready(),
                },
                Some(news) = self.tools.next() => {
                    for news in news {
                        self.route_tools(news).await;
                    }
                }
                Some(answer) = self.files.next() => return Some(answer),
                Some(news) = self.screen.next() => return Some(news),
                else => return None,
            }
        }
    }

    async fn carry_out(&mut self, effect: Effect) {
        match effect {
            Effect::Session(effect) => self.session.carry_out(effect, &mut self.pending).await,
            Effect::Media(effect) => self.media.carry_out(effect),
            Effect::Tools(effect) => {
                if let Some(news) = self.tools.carry_out(effect) {
                    self.route_tools(news).await;
                }
            }
            Effect::Files(effect) => self.files.carry_out(effect),
            Effect::Screen(effect) => self.screen.carry_out(effect),
            // The loop applies intents, the presenter copies; a live session has no replay
            // controls.
            Effect::Intent(_) | Effect::Copy(_) | Effect::Replay(_) => {}
        }
    }

    fn ready(&mut self) -> Option<Msg> {
        self.pending.pop_front()
    }

    fn applied(&mut self, msg: &Msg) {
        if let Some(recorder) = &self.recorder {
            recorder.applied(msg);
        }
    }

    async fn settle(&mut self) -> Vec<Msg> {
        self.media.settle().await
    }
}
