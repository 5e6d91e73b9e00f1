//! The live engine: the [`Source`] of a live session. It owns the parts a session runs on, each
//! kept by the module that knows it: the session and its reconnects (`livetalk_live::session`), the tool
//! dispatcher (`tools`), the audio worker (`audio`), the device watch, the recorder (`record`)
//! and, for the offline demo model, the embedded mock. [`launch`] builds it from the settings.

pub mod launch;
pub mod picture;
mod wiretap;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::warn;

use crate::app::{Effect, Msg, WireFrame};
use crate::audio::{AudioEvent, AudioOutput, AudioWorker, MicFrame};
use crate::driver::Source;
use crate::record::Recorder;
use crate::tools::mcp::{Catalog, McpEvent, McpHub};
use crate::tools::{Decider, Device, Registry, SmartHome, ToolDispatcher, ToolEvent};
use livetalk_live::session::{
    self, ReconnectPolicy, Session, SessionEvent, SessionSlot, SessionStatus, SetupChange,
};
use livetalk_live::wire::{
    Blob, ClientMessage, Content, ContextUpdate, Empty, RealtimeInput, Scheduling, Setup,
};
use livetalk_live::{CloseInfo, ConnectOptions, ServerEvent};
use livetalk_mock::MockServer;

pub use launch::{auth, build_setup, launch, reconnect_policy, tool_sets};
use livetalk_live::Outbox;
use wiretap::Wiretap;

/// How long the engine waits for the audio devices before connecting anyway.
const AUDIO_OPEN_WAIT: Duration = Duration::from_secs(5);

/// Signals held for the first connection at most: they come from the app's own effects, a
/// handful at a time; more means something loops, and is dropped with a warning.
const HELD_MAX: usize = 64;

/// Answers of work done off the loop (a picture made ready, a folder listed) waiting to be
/// taken: the user asks for them one at a time.
const CHORES_WAITING: usize = 16;

/// Where a session connects.
#[derive(Debug, Clone)]
pub enum ConnectTo {
    /// A Live API endpoint (Google, a custom URL or the embedded mock).
    Live(ConnectOptions),
    /// A livetalk bridge (`livetalk serve`), which holds the key and the Live session and
    /// reconnects on its own side.
    Bridge {
        url: String,
        setup: Setup,
        connect_timeout: Duration,
        /// How the voice travels (`--bridge-transport`).
        transport: crate::config::BridgeTransport,
    },
}

/// Where the engine is in starting its session.
enum Start {
    /// Devices open first, so the first reply is heard and the mic is live from the start.
    AwaitingAudio {
        route: Box<ConnectTo>,
        until: Instant,
    },
    Connecting(JoinHandle<Result<Session, String>>),
    /// Connected, failed to, or never asked to connect (tests connect by hand).
    Done,
}

/// A live session's engine. See the module doc.
pub struct Engine {
    session: SessionSlot,
    dispatcher: ToolDispatcher,
    tool_events: mpsc::UnboundedReceiver<ToolEvent>,
    /// The built-in tools, which the MCP servers' tools are added to.
    builtins: Registry,
    mcp: McpHub,
    mcp_events: mpsc::UnboundedReceiver<McpEvent>,
    /// Tools the user turned off for this session.
    disabled: std::collections::BTreeSet<String>,
    devices: watch::Receiver<Vec<Device>>,
    audio: Option<AudioWorker>,
    recorder: Option<Recorder>,
    start: Start,
    /// Messages to hand out before anything else (the end of a session closed while it was
    /// still connecting).
    pending: VecDeque<Msg>,
    /// Signals sent while the first connection was still being made (a push-to-talk clip's
    /// `activityStart`, say), delivered in order once it is. Mic audio is not held: late audio
    /// is worse than none.
    held: Vec<ClientMessage>,
    /// Kept alive while the session runs on it.
    _mock: Option<MockServer>,
    /// The session is on Vertex AI, which ignores `SILENT` scheduling.
    vertex: bool,
    /// Frames sent, and read in the handshake, as the tap passes them on (the session's own
    /// frames come with what it reads).
    frames: mpsc::Receiver<WireFrame>,
    frames_tx: mpsc::Sender<WireFrame>,
    /// The event inspector is open: frames sent are taken in as they go, so the mic's show
    /// while the server is silent. Closed, they wait for the next frame read, and sending
    /// wakes nothing.
    wire_watched: bool,
    /// What work done off the loop (`/image`, Tab in a path) answered.
    chores: mpsc::Receiver<Msg>,
    chores_tx: mpsc::Sender<Msg>,
}

impl Engine {
    /// An engine for these tools and devices, with nothing connected yet; `decider` settles
    /// calls of tools that ask for approval.
    pub fn new(registry: Arc<Registry>, home: &SmartHome, decider: Decider) -> Self {
        let builtins = (*registry).clone();
        let (dispatcher, tool_events) = ToolDispatcher::new(registry, decider);
        let (mcp, mcp_events) = McpHub::empty();
        let (frames_tx, frames) = mpsc::channel(wiretap::FRAMES_WAITING);
        let (chores_tx, chores) = mpsc::channel(CHORES_WAITING);
        Engine {
            session: SessionSlot::new(
                ReconnectPolicy::default(),
                Some(Wiretap::shared(None, frames_tx.clone())),
            ),
            dispatcher,
            tool_events,
            builtins,
            mcp,
            mcp_events,
            disabled: std::collections::BTreeSet::new(),
            devices: home.subscribe(),
            audio: None,
            recorder: None,
            start: Start::Done,
            pending: VecDeque::new(),
            held: Vec::new(),
            _mock: None,
            vertex: false,
            frames,
            frames_tx,
            wire_watched: false,
            chores,
            chores_tx,
        }
    }

    /// Does `work` on a thread of its own (it reads files, decodes pictures) and hands its
    /// answer to the app as a message, so the screen never waits for it.
    fn chore(&self, work: impl FnOnce() -> Msg + Send + 'static) {
        let answers = self.chores_tx.clone();
        tokio::task::spawn_blocking(move || {
            if answers.try_send(work()).is_err() {
                warn!("an answer of work done for the user was dropped: too many waiting");
            }
        });
    }

    /// `model` as this route's `setup.model` takes it: Vertex AI names a model by its whole
    /// resource name, which the current setup has.
    fn model_on_route(&self, model: &str) -> String {
        let id = model.rsplit('/').next().unwrap_or(model);
        match self.session.setup().map(|setup| setup.model.as_str()) {
            Some(current) if current.starts_with("projects/") => match current.rfind("/models/") {
                Some(at) => format!("{}/models/{id}", &current[..at]),
                None => model.to_owned(),
            },
            _ => model.to_owned(),
        }
    }

    /// Adds the tools of these MCP servers (before the `setup` is built from
    /// [`Engine::registry`]).
    pub fn attach_mcp(&mut self, hub: McpHub, events: mpsc::UnboundedReceiver<McpEvent>) {
        self.mcp = hub;
        self.mcp_events = events;
        self.dispatcher.replace_registry(Arc::new(self.compose()));
    }

    /// The tools calls run against now.
    pub fn registry(&self) -> Arc<Registry> {
        self.dispatcher.registry()
    }

    /// Every tool and MCP server, for the tool list.
    pub fn catalog(&self) -> Catalog {
        Catalog {
            tools: self.registry().entries(),
            servers: self.mcp.servers(),
        }
    }

    /// The built-ins, the MCP servers' tools and the user's choices, as one registry.
    fn compose(&self) -> Registry {
        let mut registry = self.builtins.clone();
        self.mcp.add_tools_to(&mut registry);
        for name in &self.disabled {
            registry.set_enabled(name, false);
        }
        registry
    }

    /// Runs calls against the tools as they are now; when that changes what the model is
    /// told, declares the new set from the next connection on (at the next turn boundary
    /// with `hand_over`). Then the tool list is shown again.
    async fn retool(&mut self, hand_over: bool) {
        let registry = self.compose();
        let changed = registry.declarations() != self.registry().declarations();
        let tools = launch::tool_sets(&registry);
        self.dispatcher.replace_registry(Arc::new(registry));
        if changed {
            self.session.set_tools(tools, hand_over).await;
        }
        self.pending.push_back(Msg::ToolCatalog(self.catalog()));
    }

    /// Records the session from now on (before connecting, to have every frame).
    pub fn record_into(&mut self, recorder: Recorder) {
        self.session = SessionSlot::new(
            self.session.policy(),
            Some(Wiretap::shared(
                Some(recorder.clone()),
                self.frames_tx.clone(),
            )),
        );
        self.recorder = Some(recorder);
    }

    /// The folder this session is recorded into, if it is.
    pub fn recording_dir(&self) -> Option<&std::path::Path> {
        self.recorder.as_ref().map(|r| r.dir())
    }

    /// Sets how lost connections are retried (before connecting).
    pub fn set_reconnect_policy(&mut self, policy: ReconnectPolicy) {
        self.session.set_policy(policy);
    }

    /// Uses this audio worker for the session's mic and model audio.
    pub fn attach_audio(&mut self, audio: AudioWorker) {
        self.audio = Some(audio);
    }

    /// Keeps the embedded mock alive as long as the engine.
    pub fn keep_mock(&mut self, mock: MockServer) {
        self._mock = Some(mock);
    }

    /// Connects along `route` once the audio devices are open (or known missing, or after
    /// five seconds), from within [`Source::next`], so the presenter stays responsive.
    pub fn start(&mut self, route: ConnectTo) {
        if let ConnectTo::Live(options) = &route {
            self.vertex = options.endpoint.is_vertex();
        }
        // Kept even when the first attempt fails, so the user's retry has somewhere to go.
        self.session.retry_with(route.redial());
        self.start = Start::AwaitingAudio {
            route: Box::new(route),
            until: Instant::now() + AUDIO_OPEN_WAIT,
        };
        if self.audio.is_none() {
            self.begin_connecting();
        }
    }

    /// Connects at once and waits for the session (tests drive the engine by hand).
    pub async fn connect(&mut self, options: ConnectOptions) -> Result<(), String> {
        self.vertex = options.endpoint.is_vertex();
        self.session.retry_with(options.clone().into());
        let session = open(
            ConnectTo::Live(options),
            self.session.policy(),
            self.session.tap(),
        )
        .await?;
        self.session.adopt(session);
        Ok(())
    }

    /// Streams one chunk of 16 kHz PCM16 mic audio (`realtimeInput.audio`) without an audio
    /// worker (tests stand in for the mic this way). While the session reconnects it is queued,
    /// and dropped if it waited longer than a second.
    pub async fn send_audio(&mut self, pcm: Vec<u8>) {
        self.send(
            ClientMessage::RealtimeInput(RealtimeInput::mic_audio(pcm)),
            "mic audio",
        )
        .await;
    }

    /// Figures and the resumption handle of the session.
    pub fn session_status(&self) -> &SessionStatus {
        self.session.status()
    }

    fn begin_connecting(&mut self) {
        let Start::AwaitingAudio { route, .. } = std::mem::replace(&mut self.start, Start::Done)
        else {
            return;
        };
        let policy = self.session.policy();
        let tap = self.session.tap();
        self.start = Start::Connecting(tokio::spawn(open(*route, policy, tap)));
    }

    /// Hands one mic frame to the session, or drops it when the session cannot take it now
    /// (late audio is worse than none).
    fn send_mic_frame(&mut self, frame: MicFrame) {
        let (Some(handle), Some(audio)) = (self.session.handle(), &mut self.audio) else {
            return;
        };
        let captured_at = frame.captured_at;
        let input = RealtimeInput::mic_audio(frame.pcm);
        match handle.try_send(ClientMessage::RealtimeInput(input)) {
            Ok(true) => audio.frame_sent(captured_at),
            Ok(false) => audio.frame_dropped(),
            Err(_) => {}
        }
    }

    async fn send(&mut self, message: ClientMessage, what: &str) {
        match self.session.handle() {
            Some(handle) => {
                if handle.send(message).await.is_err() {
                    warn!("dropped {what}: the session is closed");
                }
            }
            None if !matches!(self.start, Start::Done) && self.held.len() < HELD_MAX => {
                self.held.push(message);
            }
            None => warn!("dropped {what}: there is no session to send it on"),
        }
    }

    /// A finished call as this session's service will take its answer (see
    /// [`silent_as_when_idle`]).
    fn on_this_service(&self, event: ToolEvent) -> ToolEvent {
        if self.vertex {
            silent_as_when_idle(event)
        } else {
            event
        }
    }

    /// Queues the frames the wire tap has passed on since the last time.
    fn take_in_sent_frames(&mut self) {
        while let Ok(sent) = self.frames.try_recv() {
            self.pending.push_back(Msg::Wire(sent));
        }
    }

    /// True once nothing more can come: the session has ended and no tool is running.
    fn exhausted(&self) -> bool {
        matches!(self.start, Start::Done)
            && self.pending.is_empty()
            && !self.session.is_open()
            && self.dispatcher.in_flight() == 0
    }
}

/// Vertex AI drops `SILENT` scheduling and answers such a result like any other, so on Vertex
/// it is sent (and its answer awaited) as `WHEN_IDLE`, what Vertex applies anyway.
fn silent_as_when_idle(mut event: ToolEvent) -> ToolEvent {
    if let ToolEvent::Finished(outcome) = &mut event
        && outcome.response.scheduling == Some(Scheduling::Silent)
    {
        outcome.response.scheduling = Some(Scheduling::WhenIdle);
    }
    event
}

/// Connects along `route` and supervises the session, which reconnects by the policy (to the
/// service, or to the bridge).
async fn open(
    route: ConnectTo,
    policy: ReconnectPolicy,
    tap: Option<Arc<dyn livetalk_live::connection::WireTap>>,
) -> Result<Session, String> {
    match route {
        ConnectTo::Live(options) => {
            let connection = livetalk_live::client::connect_tapped(options.clone(), tap.clone())
                .await
                .map_err(|e| e.to_string())?;
            Ok(session::supervise(
                connection,
                Some(options.into()),
                policy,
                tap,
            ))
        }
        ConnectTo::Bridge {
            ref url,
            ref setup,
            connect_timeout,
            transport,
        } => {
            let connection = crate::bridge::client::connect_over(
                url,
                setup,
                connect_timeout,
                tap.clone(),
                transport,
            )
            .await
            .map_err(|e| e.to_string())?;
            Ok(session::supervise(
                connection,
                Some(route.redial()),
                policy,
                tap,
            ))
        }
    }
}

impl ConnectTo {
    /// How the session opens its later connections along this route (reconnects, hand-overs,
    /// the user's retry).
    fn redial(&self) -> session::Redial {
        match self {
            ConnectTo::Live(options) => options.clone().into(),
            ConnectTo::Bridge {
                url,
                setup,
                connect_timeout,
                transport,
            } => session::Redial::new(
                setup.clone(),
                *connect_timeout,
                Arc::new(crate::bridge::client::BridgeDialer {
                    url: url.clone(),
                    transport: *transport,
                }),
            ),
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
            let audio_open = self.audio.is_some();
            let session_open = self.session.is_open();
            let frames_wanted = self.session.handle().is_some();
            let awaiting_until = match &self.start {
                Start::AwaitingAudio { until, .. } => Some(*until),
                _ => None,
            };
            let connecting = matches!(self.start, Start::Connecting(_));
            let wire_watched = self.wire_watched;
            tokio::select! {
                joined = async {
                    match &mut self.start {
                        Start::Connecting(task) => task.await,
                        _ => std::future::pending().await,
                    }
                }, if connecting => {
                    self.start = Start::Done;
                    match joined {
                        Ok(Ok(session)) => {
                            self.session.adopt(session);
                            for message in std::mem::take(&mut self.held) {
                                self.send(message, "a signal held for the connection").await;
                            }
                        }
                        Ok(Err(message)) => return Some(Msg::ConnectFailed(message)),
                        Err(e) => return Some(Msg::ConnectFailed(format!("Connecting failed: {e}"))),
                    }
                }
                () = tokio::time::sleep_until(awaiting_until.unwrap_or_else(Instant::now)), if awaiting_until.is_some() => {
                    warn!("the audio devices did not open within 5 s; connecting without waiting");
                    self.begin_connecting();
                }
                output = async { self.audio.as_mut()?.next(frames_wanted).await }, if audio_open => match output {
                    Some(AudioOutput::Event(event)) => {
                        if matches!(event, AudioEvent::Opened(_)) {
                            self.begin_connecting();
                        }
                        // The app reads no clock: it is told when the speaker started, for
                        // the turn's time to the first audible sample.
                        if matches!(event, AudioEvent::Audible(true)) {
                            self.pending.push_back(Msg::Audio(event));
                            return Some(Msg::Tick(std::time::Instant::now()));
                        }
                        return Some(Msg::Audio(event));
                    }
                    Some(AudioOutput::Frame(frame)) => self.send_mic_frame(frame),
                    None => {
                        // The worker is gone; the session goes on without it.
                        self.audio = None;
                        self.begin_connecting();
                    }
                },
                event = self.session.recv(), if session_open => match event {
                    // The frame, then its events in order, before anything that comes after it.
                    Some(SessionEvent::Server(frame)) => {
                        // What was sent (and read in a handshake) before it is taken in with
                        // what the server says: waking the engine for each would put a trip
                        // round the loop after every answer and mic frame. After the frame's
                        // events (the log keeps frames in time order), so an answer is not held
                        // up; before the session's last word, so nothing follows it.
                        let last = frame.closed().is_some();
                        if last {
                            self.take_in_sent_frames();
                        }
                        let wire = WireFrame::received(&frame).map(Msg::Wire);
                        self.pending.extend(wire);
                        self.pending.extend(frame.events.into_iter().map(Msg::Server));
                        if !last {
                            self.take_in_sent_frames();
                        }
                    }
                    Some(SessionEvent::Change(event)) => return Some(Msg::SessionChange(event)),
                    // Their connection is gone: stop them; the app sees them cancelled.
                    Some(SessionEvent::Abandoned(ids)) => {
                        self.dispatcher.cancel(&ids);
                    }
                    None => {}
                },
                Some(sent) = self.frames.recv(), if wire_watched => {
                    self.pending.push_back(Msg::Wire(sent));
                    self.take_in_sent_frames();
                }
                Some(event) = self.tool_events.recv() => return Some(Msg::Tool(self.on_this_service(event))),
                Some(answer) = self.chores.recv() => return Some(answer),
                Some(event) = self.mcp_events.recv() => {
                    match &event {
                        // A server that came (back) up: its tools at the next turn boundary.
                        McpEvent::Up { .. } => self.retool(true).await,
                        // As the service asks: the new list with the next connection.
                        McpEvent::ToolsChanged { .. } => self.retool(false).await,
                        // Its tools stay declared and answer with errors meanwhile.
                        McpEvent::Down { .. } => {
                            self.pending.push_back(Msg::ToolCatalog(self.catalog()));
                        }
                        // Said before the listing's own event, which retools.
                        McpEvent::Trimmed { .. } => {}
                    }
                    return Some(Msg::Mcp(event));
                }
                Ok(()) = self.devices.changed() => {
                    return Some(Msg::DevicesChanged(self.devices.borrow_and_update().clone()));
                }
                else => return None,
            }
        }
    }

    async fn carry_out(&mut self, effect: Effect) {
        let audio = self.audio.as_ref().map(AudioWorker::audio);
        match effect {
            Effect::SendText(text) => {
                if let Some(handle) = self.session.handle()
                    && handle.send_user_text(&text).await.is_err()
                {
                    warn!("dropped a user turn: the session is closed");
                }
            }
            Effect::SendInstruction(text) => {
                let update = ContextUpdate {
                    system_instruction: Some(Content::text("user", text)),
                    tools: None,
                };
                if let Some(handle) = self.session.handle()
                    && handle
                        .send(ClientMessage::ContextUpdate(update))
                        .await
                        .is_err()
                {
                    warn!("dropped a system instruction: the session is closed");
                }
            }
            Effect::SetVoice(voice) => {
                self.session.reconfigure(SetupChange::Voice(voice)).await;
            }
            Effect::SwitchModel(model) => {
                let model = self.model_on_route(&model);
                self.session.reconfigure(SetupChange::Model(model)).await;
            }
            Effect::PrepareImage(path) => self.chore(move || Msg::Image(picture::prepare(&path))),
            Effect::SendImage(jpeg) => {
                let frame = RealtimeInput {
                    video: Some(Blob {
                        mime_type: "image/jpeg".to_owned(),
                        data: jpeg,
                    }),
                    ..RealtimeInput::default()
                };
                self.send(ClientMessage::RealtimeInput(frame), "a picture")
                    .await;
            }
            Effect::ListPaths(typed) => self.chore(move || Msg::PathChoices {
                entries: picture::folder_entries(&typed),
                typed,
            }),
            Effect::RunTools(calls) => self.dispatcher.dispatch(calls),
            Effect::CancelTools(ids) => {
                self.dispatcher.cancel(&ids);
            }
            Effect::ToolVerdict { key, verdict } => {
                if !self.dispatcher.decide(key, verdict) {
                    tracing::debug!(
                        ?key,
                        "a verdict came after its call was answered or cancelled"
                    );
                }
            }
            Effect::SendToolResponse(response) => {
                if let Some(handle) = self.session.handle()
                    && handle.send_tool_responses(vec![response]).await.is_err()
                {
                    warn!("dropped a tool response: the session is closed");
                }
            }
            Effect::CloseSession => match &mut self.start {
                Start::Done => {
                    if let Some(handle) = self.session.handle() {
                        handle.close().await;
                    }
                }
                // Closed before it was up: stop connecting; the session ends here.
                start => {
                    if let Start::Connecting(task) = start {
                        task.abort();
                    }
                    self.start = Start::Done;
                    self.pending.push_back(Msg::Server(ServerEvent::Closed(
                        CloseInfo::ended_by_client(),
                    )));
                }
            },
            Effect::PlayAudio(pcm) => {
                if let Some(audio) = audio {
                    audio.play(pcm, std::time::Instant::now());
                }
            }
            Effect::EndPlaybackTurn => {
                if let Some(audio) = audio {
                    audio.end_turn();
                }
            }
            Effect::StopPlayback => {
                if let Some(audio) = audio {
                    audio.flush(std::time::Instant::now());
                }
            }
            Effect::SetMicOpen(open) => {
                if let Some(audio) = audio {
                    audio.set_mic_open(open);
                }
            }
            Effect::ReopenAudio => {
                if let Some(audio) = audio {
                    audio.reopen();
                }
            }
            Effect::SetEcho(mode) => {
                if let Some(audio) = audio {
                    audio.set_echo(mode);
                }
            }
            Effect::SendActivityStart | Effect::SendActivityEnd | Effect::SendAudioStreamEnd => {
                let mut input = RealtimeInput::default();
                match effect {
                    Effect::SendActivityStart => input.activity_start = Some(Empty {}),
                    Effect::SendActivityEnd => input.activity_end = Some(Empty {}),
                    _ => input.audio_stream_end = Some(true),
                }
                self.send(ClientMessage::RealtimeInput(input), "a mic signal")
                    .await;
            }
            Effect::SetToolEnabled { name, enabled } => {
                if enabled {
                    self.disabled.remove(&name);
                } else {
                    self.disabled.insert(name);
                }
                self.retool(true).await;
            }
            Effect::RestartMcpServer(name) => {
                if self.mcp.restart(&name) {
                    self.pending.push_back(Msg::ToolCatalog(self.catalog()));
                } else {
                    warn!("no MCP server named {name} to restart");
                }
            }
            Effect::WatchWire(open) => {
                self.wire_watched = open;
                // What waited for the next frame read shows at once.
                if open {
                    self.take_in_sent_frames();
                }
            }
            // The app asks only once the session gave up.
            Effect::Reconnect => {
                if !self.session.retry() {
                    warn!("nowhere to reconnect to");
                }
            }
            // The loop applies intents, the presenter copies; a live session has no replay
            // controls.
            Effect::Intent(_)
            | Effect::Copy(_)
            | Effect::PauseReplay
            | Effect::StepReplay
            | Effect::ReplaySpeed(_) => {}
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
        match &mut self.audio {
            Some(audio) => audio.settle().await.into_iter().map(Msg::Audio).collect(),
            None => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{ToolOutcome, ToolStatus};
    use livetalk_live::wire::FunctionResponse;

    fn finished(scheduling: Option<Scheduling>) -> ToolEvent {
        ToolEvent::Finished(ToolOutcome {
            key: None,
            id: None,
            name: "note".into(),
            args: serde_json::json!({}),
            status: ToolStatus::Ok,
            response: FunctionResponse {
                name: "note".into(),
                scheduling,
                ..FunctionResponse::default()
            },
            duration: Duration::ZERO,
            truncated: false,
            unasked: None,
        })
    }

    fn scheduling(event: ToolEvent) -> Option<Scheduling> {
        match event {
            ToolEvent::Finished(outcome) => outcome.response.scheduling,
            _ => None,
        }
    }

    #[test]
    fn only_silent_results_become_when_idle() {
        assert_eq!(
            scheduling(silent_as_when_idle(finished(Some(Scheduling::Silent)))),
            Some(Scheduling::WhenIdle)
        );
        for kept in [
            None,
            Some(Scheduling::Interrupt),
            Some(Scheduling::WhenIdle),
        ] {
            assert_eq!(scheduling(silent_as_when_idle(finished(kept))), kept);
        }
    }
}
