//! The engine loop's plumbing, shared by every presenter: builds the `setup`, starts the
//! session (kept alive across connections by [`reconnect`]), turns session/tool/device output
//! into [`Msg`]s and carries out [`Effect`]s.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use tracing::warn;

use crate::app::{App, Effect, Msg};
use crate::audio::{Audio, AudioEvent, AudioFeeds, Latency, MicFrame};
use anyhow::Context as _;
use tokio::sync::broadcast;

use crate::config::{Settings, Target};
use crate::live::reconnect::{
    self, Link, LinkHandle, LinkStatus, ReconnectPolicy, SupervisorEvent,
};
use crate::live::session::WireTap;
use crate::live::wire::{
    AudioTranscriptionConfig, AutomaticActivityDetection, ClientMessage, Content,
    ContextWindowCompression, Empty, GenerationConfig, Modality, RealtimeInput,
    RealtimeInputConfig, SessionResumptionConfig, Setup, SlidingWindow, SpeechConfig, Tool,
};
use crate::live::{self, Endpoint, SessionEvent, SessionOptions};
use crate::mock::{MockOptions, MockServer};
use crate::record::{self, Record, Recorder};
use crate::tools::{
    Device, Registry, SlowCall, SmartHome, ToolDispatcher, ToolEvent, Watchdog, builtin_registry,
};

/// The `setup` message for these settings and tools.
pub fn build_setup(settings: &Settings, registry: &Registry) -> Setup {
    let declarations = registry.declarations();
    Setup {
        model: settings.model.clone(),
        generation_config: Some(GenerationConfig {
            response_modalities: vec![Modality::Audio],
            speech_config: Some(SpeechConfig::voice(&settings.voice)),
            ..GenerationConfig::default()
        }),
        system_instruction: (!settings.system_instruction.trim().is_empty())
            .then(|| Content::text("user", settings.system_instruction.clone())),
        tools: if declarations.is_empty() {
            Vec::new()
        } else {
            vec![Tool {
                function_declarations: declarations,
                ..Tool::default()
            }]
        },
        input_audio_transcription: settings
            .input_transcription
            .then(AudioTranscriptionConfig::default),
        output_audio_transcription: settings
            .output_transcription
            .then(AudioTranscriptionConfig::default),
        // `{}` asks for handles; the handle to resume is filled in per connection.
        session_resumption: settings.resumption.then(SessionResumptionConfig::default),
        // Push-to-talk: the user's key, not the server's voice detection, says when they speak.
        realtime_input_config: settings.audio.push_to_talk.then(|| RealtimeInputConfig {
            automatic_activity_detection: Some(AutomaticActivityDetection {
                disabled: Some(true),
                ..AutomaticActivityDetection::default()
            }),
            ..RealtimeInputConfig::default()
        }),
        // Server defaults: trigger at 80% of the context, slide down to half of that.
        context_window_compression: settings.context_compression.then(|| {
            ContextWindowCompression {
                trigger_tokens: None,
                sliding_window: Some(SlidingWindow::default()),
            }
        }),
        ..Setup::default()
    }
}

/// Where the session connects. For the offline demo model this starts the embedded mock on a
/// loopback port; the returned server must be kept alive as long as the session runs.
pub async fn resolve_endpoint(
    settings: &Settings,
) -> anyhow::Result<(Endpoint, Option<MockServer>)> {
    match &settings.target {
        Target::Google(endpoint) | Target::Custom(endpoint) => Ok((endpoint.clone(), None)),
        Target::OfflineMock => {
            let mock = MockServer::start(MockOptions::loopback())
                .await
                .context("starting the embedded offline demo model")?;
            Ok((mock.endpoint(settings.api_version), Some(mock)))
        }
        Target::Bridge(url) => anyhow::bail!(
            "{} is a bridge, not a Live endpoint: connect with bridge::client::connect",
            crate::bridge::client::bridge_host(url)
        ),
    }
}

/// The reconnect policy of these settings.
pub fn reconnect_policy(settings: &Settings) -> ReconnectPolicy {
    ReconnectPolicy {
        max_attempts: settings.reconnect_attempts,
        ..ReconnectPolicy::default()
    }
}

/// Where a conversation's session comes from.
pub enum Upstream {
    /// A Live API endpoint (Google, a custom URL or the embedded mock).
    Live(SessionOptions),
    /// A livetalk bridge (`livetalk serve`), which holds the key and the Live session.
    Bridge {
        url: String,
        setup: Setup,
        setup_timeout: std::time::Duration,
    },
}

/// Everything a presenter needs to run one conversation: the app state, the engine, where to
/// connect, and the embedded mock when it is in use (keep it alive).
pub struct Conversation {
    pub app: App,
    pub engine: Engine,
    pub upstream: Upstream,
    pub mock: Option<MockServer>,
}

/// Builds the tools, the app and the engine for these settings, starting the embedded mock
/// when the offline demo model is the target. Does not connect yet.
pub async fn prepare(settings: &Settings) -> anyhow::Result<Conversation> {
    let home = SmartHome::new();
    let registry = Arc::new(
        builtin_registry(&settings.tools_enabled, settings.tool_limits, home.clone())
            .context("building the tool registry")?,
    );
    let setup = build_setup(settings, &registry);
    let recorder = match &settings.record {
        Some(_) if matches!(settings.target, Target::Bridge(_)) => anyhow::bail!(
            "--record does not record a bridged session yet; record on the bridge's side or connect directly"
        ),
        Some(to) => Some(Recorder::create(
            &Recorder::folder(to),
            settings,
            home.snapshot(),
        )?),
        None => None,
    };
    let (upstream, mock) = match &settings.target {
        Target::Bridge(url) => (
            Upstream::Bridge {
                url: url.clone(),
                setup,
                setup_timeout: settings.setup_timeout,
            },
            None,
        ),
        _ => {
            let (endpoint, mock) = resolve_endpoint(settings).await?;
            let options = SessionOptions {
                endpoint,
                api_key: settings.api_key.clone(),
                setup,
                setup_timeout: settings.setup_timeout,
            };
            (Upstream::Live(options), mock)
        }
    };
    let mut app = App::new(
        settings.model.clone(),
        settings.is_offline(),
        home.snapshot(),
    );
    app.voice = settings.voice.clone();
    app.endpoint_label = settings.endpoint_label();
    let mut engine = Engine::new(registry, &home);
    if let Some(recorder) = recorder {
        engine.record_into(recorder);
    }
    let audio = &settings.audio;
    if !audio.is_off() {
        let (handle, feeds) = Audio::start(audio.clone())?;
        engine.attach_audio(handle, feeds);
        app.audio.enabled = true;
        app.audio.mic_wanted = audio.microphone && (audio.devices || audio.input_wav.is_some());
        app.audio.push_to_talk = audio.push_to_talk;
        app.audio.echo = audio.echo;
        app.audio.input_is_clip = audio.input_wav.is_some();
        app.audio.clip_streaming = audio.input_wav.is_some();
        app.audio.output_wav = audio.output_wav.is_some();
    }
    engine.set_reconnect_policy(reconnect_policy(settings));
    Ok(Conversation {
        app,
        engine,
        upstream,
        mock,
    })
}

/// Owns the supervised session, the tool dispatcher, the tool watchdog and the device watch
/// for one app.
pub struct Engine {
    handle: Option<LinkHandle>,
    session_events: Option<mpsc::Receiver<SupervisorEvent>>,
    status: LinkStatus,
    options: Option<SessionOptions>,
    policy: ReconnectPolicy,
    dispatcher: ToolDispatcher,
    tool_events: mpsc::UnboundedReceiver<ToolEvent>,
    watchdog: Watchdog,
    slow_calls: VecDeque<SlowCall>,
    devices: watch::Receiver<Vec<Device>>,
    /// Records the session when `--record` is on.
    recorder: Option<Recorder>,
    /// Session events applied so far: where app-level lines sit among the frames.
    applied_events: u64,
    /// Microphone and speaker (or WAV files), when audio is on.
    audio: Option<Audio>,
    audio_events: Option<tokio::sync::mpsc::UnboundedReceiver<AudioEvent>>,
    mic_frames: Option<broadcast::Receiver<MicFrame>>,
    mic: MicFigures,
}

/// The engine's share of the audio figures: what happened to mic frames on their way out.
#[derive(Debug, Default, Clone, Copy)]
struct MicFigures {
    sent: u64,
    dropped: u64,
    to_socket: Latency,
}

impl MicFigures {
    /// The worker's figures completed with these.
    fn complete(&self, event: AudioEvent) -> AudioEvent {
        match event {
            AudioEvent::Figures(mut figures) => {
                figures.frames_sent = self.sent;
                figures.frames_dropped += self.dropped;
                figures.mic_to_socket = self.to_socket;
                AudioEvent::Figures(figures)
            }
            other => other,
        }
    }
}

impl Engine {
    pub fn new(registry: Arc<Registry>, home: &SmartHome) -> Self {
        let watchdog = Watchdog::for_timeout(registry.limits().timeout);
        let (dispatcher, tool_events) = ToolDispatcher::new(registry);
        Engine {
            handle: None,
            session_events: None,
            status: LinkStatus::default(),
            options: None,
            policy: ReconnectPolicy::default(),
            dispatcher,
            tool_events,
            watchdog,
            slow_calls: VecDeque::new(),
            devices: home.subscribe(),
            recorder: None,
            applied_events: 0,
            audio: None,
            audio_events: None,
            mic_frames: None,
            mic: MicFigures::default(),
        }
    }

    /// Uses this audio system for the conversation's mic and model audio.
    pub fn attach_audio(&mut self, audio: Audio, feeds: AudioFeeds) {
        self.audio = Some(audio);
        self.audio_events = Some(feeds.events);
        self.mic_frames = Some(feeds.frames);
    }

    /// Hands one mic frame to the session, or drops it when the link cannot take it now
    /// (late audio is worse than none).
    fn send_mic_frame(&mut self, frame: MicFrame) {
        let Some(handle) = &self.handle else {
            return;
        };
        let input = RealtimeInput::mic_audio(frame.pcm);
        match handle.try_send(ClientMessage::RealtimeInput(input)) {
            Ok(true) => {
                self.mic.sent += 1;
                if let Some(audio) = &self.audio
                    && let Some(latency) =
                        crate::audio::shared::span(frame.captured_at, audio.clock().now())
                {
                    self.mic.to_socket.record(latency);
                }
            }
            Ok(false) => self.mic.dropped += 1,
            Err(_) => {}
        }
    }

    /// Waits (up to 5 s) until the audio devices are open or known to be missing, so the
    /// first reply is heard and the mic is live from the first moment of the session.
    pub async fn await_audio(&mut self, app: &mut App) {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
        while !app.audio.opened {
            let Some(events) = &mut self.audio_events else {
                return;
            };
            match tokio::time::timeout_at(deadline, events.recv()).await {
                Ok(Some(event)) => {
                    let msg = Msg::Audio(self.mic.complete(event));
                    self.apply(app, msg).await;
                }
                Ok(None) => self.audio_events = None,
                Err(_) => {
                    warn!("the audio devices did not open within 5 s; going on without waiting");
                    return;
                }
            }
        }
    }

    /// Brings the app's audio figures up to date (end of session), applying any audio events
    /// still queued; gives up after half a second.
    pub async fn settle_audio_figures(&mut self, app: &mut App) {
        let (Some(audio), Some(events)) = (&self.audio, &mut self.audio_events) else {
            return;
        };
        audio.request_figures();
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_millis(500);
        while let Ok(Some(event)) = tokio::time::timeout_at(deadline, events.recv()).await {
            let last = matches!(event, AudioEvent::Figures(_));
            app.update(Msg::Audio(self.mic.complete(event)));
            if last {
                break;
            }
        }
    }

    /// Records the session from now on (before `connect`, to have every frame).
    pub fn record_into(&mut self, recorder: Recorder) {
        self.recorder = Some(recorder);
    }

    /// The folder this session is recorded into, if it is.
    pub fn recording_dir(&self) -> Option<&std::path::Path> {
        self.recorder.as_ref().map(|r| r.dir())
    }

    /// Records an error of the run itself (headless turn timeout, say).
    pub fn record_error(&self, message: &str) {
        self.record(|at| Record::Error {
            message: message.to_owned(),
            at,
        });
    }

    fn record(&self, line: impl FnOnce(u64) -> Record) {
        if let Some(recorder) = &self.recorder {
            recorder.write(line(self.applied_events));
        }
    }

    /// The recorder as the wire tap of every connection, reconnects included.
    fn tap(&self) -> Option<Arc<dyn WireTap>> {
        self.recorder
            .clone()
            .map(|r| Arc::new(r) as Arc<dyn WireTap>)
    }

    /// Sets how lost connections are retried (before `connect`).
    pub fn set_reconnect_policy(&mut self, policy: ReconnectPolicy) {
        self.policy = policy;
    }

    /// Figures and the resumption handle of the current link.
    pub fn link_status(&self) -> &LinkStatus {
        &self.status
    }

    /// Connects; on failure returns the message to show. A first connection that fails is not
    /// retried (the message says why); once up, the link is kept alive by the supervisor.
    pub async fn connect(&mut self, options: SessionOptions) -> Result<(), String> {
        let tap = self.tap();
        // Kept even when this first attempt fails, so the user's retry has somewhere to go.
        self.options = Some(options.clone());
        match live::session::connect_tapped(options.clone(), tap.clone()).await {
            Ok(session) => {
                let link = reconnect::supervise(session, Some(options), self.policy, tap);
                self.adopt(link);
                Ok(())
            }
            Err(e) => {
                let message = e.to_string();
                self.record(|_| Record::ConnectFailed {
                    message: message.clone(),
                });
                Err(message)
            }
        }
    }

    /// Connects to the upstream; on failure returns the message to show.
    pub async fn open(&mut self, upstream: Upstream) -> Result<(), String> {
        match upstream {
            Upstream::Live(options) => self.connect(options).await,
            Upstream::Bridge {
                url,
                setup,
                setup_timeout,
            } => self.connect_bridge(&url, &setup, setup_timeout).await,
        }
    }

    /// Connects through a bridge (`--bridge`). The bridge holds the Live session and its
    /// reconnects, so a lost bridge connection is final here.
    pub async fn connect_bridge(
        &mut self,
        url: &str,
        setup: &Setup,
        setup_timeout: std::time::Duration,
    ) -> Result<(), String> {
        let session = crate::bridge::client::connect(url, setup, setup_timeout)
            .await
            .map_err(|e| e.to_string())?;
        let policy = ReconnectPolicy {
            max_attempts: 0,
            ..self.policy
        };
        self.adopt(reconnect::supervise(session, None, policy, None));
        Ok(())
    }

    /// Streams one chunk of 16 kHz PCM16 mic audio (`realtimeInput.audio`). While the link
    /// reconnects it is queued, and dropped if it waited longer than a second.
    pub async fn send_audio(&self, pcm: Vec<u8>) {
        if let Some(handle) = &self.handle {
            let input = RealtimeInput::mic_audio(pcm);
            if handle
                .send(ClientMessage::RealtimeInput(input))
                .await
                .is_err()
            {
                warn!("dropped mic audio: the session is closed");
            }
        }
    }

    fn adopt(&mut self, link: Link) {
        self.handle = Some(link.handle);
        self.session_events = Some(link.events);
        self.status = link.status;
    }

    /// The next message from the session, the tools or the devices; `None` once the session
    /// stream has ended and nothing else can arrive.
    pub async fn next(&mut self) -> Option<Msg> {
        loop {
            if self.slow_calls.is_empty() {
                self.slow_calls
                    .extend(self.watchdog.due(tokio::time::Instant::now()));
            }
            if let Some(slow) = self.slow_calls.pop_front() {
                return Some(Msg::ToolCallSlow(slow));
            }
            let session_open = self.session_events.is_some();
            let slow_at = self.watchdog.next_due();
            let audio_events_open = self.audio_events.is_some();
            let mic_open = self.mic_frames.is_some();
            tokio::select! {
                event = async { self.audio_events.as_mut()?.recv().await }, if audio_events_open => {
                    match event {
                        Some(event) => return Some(Msg::Audio(self.mic.complete(event))),
                        None => self.audio_events = None,
                    }
                }
                frame = async {
                    match self.mic_frames.as_mut() {
                        Some(frames) => frames.recv().await,
                        None => std::future::pending().await,
                    }
                }, if mic_open => {
                    match frame {
                        Ok(frame) => self.send_mic_frame(frame),
                        // The session fell behind the mic: the oldest frames were dropped.
                        Err(broadcast::error::RecvError::Lagged(n)) => self.mic.dropped += n,
                        Err(broadcast::error::RecvError::Closed) => self.mic_frames = None,
                    }
                    continue;
                }
                event = async { self.session_events.as_mut()?.recv().await }, if session_open => {
                    match event {
                        Some(SupervisorEvent::Session(event)) => return Some(Msg::Session(event)),
                        Some(SupervisorEvent::Link(event)) => return Some(Msg::Link(event)),
                        // Their connection is gone: stop them; the app sees them cancelled.
                        Some(SupervisorEvent::Abandoned(ids)) => {
                            self.dispatcher.cancel(&ids);
                        }
                        None => self.session_events = None,
                    }
                }
                Some(event) = self.tool_events.recv() => {
                    match &event {
                        ToolEvent::Finished(outcome) => {
                            self.watchdog.ended(outcome.id.as_deref(), &outcome.name);
                        }
                        ToolEvent::Cancelled { id, name, .. } => self.watchdog.ended(Some(id), name),
                    }
                    return Some(Msg::Tool(event));
                }
                _ = tokio::time::sleep_until(slow_at.unwrap_or_else(tokio::time::Instant::now)), if slow_at.is_some() => {}
                Ok(()) = self.devices.changed() => {
                    return Some(Msg::DevicesChanged(self.devices.borrow_and_update().clone()));
                }
                else => return None,
            }
            if self.session_events.is_none() && self.dispatcher.in_flight() == 0 {
                return None;
            }
        }
    }

    /// Applies a message to the app and carries out the effects it asks for.
    pub async fn apply(&mut self, app: &mut App, msg: Msg) {
        match &msg {
            Msg::Session(event) => {
                // The end the app is told of may be no close on the wire (the link gave up).
                if let SessionEvent::Closed(close) = event {
                    self.record(|at| record::ended_record(close, at));
                }
                self.applied_events += 1;
            }
            Msg::Link(event) => self.record(|at| record::link_record(event, at)),
            Msg::ToolCallSlow(slow) => self.record(|at| record::slow_record(slow, at)),
            Msg::Tool(event) => self.record(|at| record::tool_record(event, at)),
            Msg::DevicesChanged(devices) => self.record(|at| Record::Devices {
                devices: devices.clone(),
                at,
            }),
            _ => {}
        }
        for effect in app.update(msg) {
            self.execute(effect).await;
        }
    }

    /// Carries out one effect.
    pub async fn execute(&mut self, effect: Effect) {
        match effect {
            Effect::SendText(text) => {
                self.record(|at| Record::UserText {
                    text: text.clone(),
                    at,
                });
                if let Some(handle) = &self.handle
                    && handle.send_user_text(&text).await.is_err()
                {
                    warn!("dropped a user turn: the session is closed");
                }
            }
            Effect::RunTools(calls) => {
                self.watchdog.started(&calls);
                self.dispatcher.dispatch(calls);
            }
            Effect::CancelTools(ids) => {
                self.dispatcher.cancel(&ids);
            }
            Effect::SendToolResponse(response) => {
                if let Some(handle) = &self.handle
                    && handle.send_tool_responses(vec![response]).await.is_err()
                {
                    warn!("dropped a tool response: the session is closed");
                }
            }
            Effect::CloseSession => {
                self.record(|at| Record::EndSession { at });
                if let Some(handle) = &self.handle {
                    handle.close().await;
                }
            }
            Effect::PlayAudio(pcm) => {
                if let Some(audio) = &self.audio {
                    audio.play(pcm, std::time::Instant::now());
                }
            }
            Effect::EndPlaybackTurn => {
                if let Some(audio) = &self.audio {
                    audio.end_turn();
                }
            }
            Effect::StopPlayback => {
                if let Some(audio) = &self.audio {
                    audio.flush(std::time::Instant::now());
                }
            }
            Effect::SetMicOpen(open) => {
                if let Some(audio) = &self.audio {
                    audio.set_mic_open(open);
                }
            }
            Effect::ReopenAudio => {
                if let Some(audio) = &self.audio {
                    audio.reopen();
                }
            }
            Effect::SendActivityStart | Effect::SendActivityEnd | Effect::SendAudioStreamEnd => {
                let input = match effect {
                    Effect::SendActivityStart => RealtimeInput {
                        activity_start: Some(Empty {}),
                        ..RealtimeInput::default()
                    },
                    Effect::SendActivityEnd => RealtimeInput {
                        activity_end: Some(Empty {}),
                        ..RealtimeInput::default()
                    },
                    _ => RealtimeInput {
                        audio_stream_end: Some(true),
                        ..RealtimeInput::default()
                    },
                };
                if let Some(handle) = &self.handle
                    && handle
                        .send(ClientMessage::RealtimeInput(input))
                        .await
                        .is_err()
                {
                    warn!("dropped a mic signal: the session is closed");
                }
            }
            Effect::Reconnect => {
                self.record(|at| Record::Retry { at });
                // The app asks only once the link gave up; an old supervisor still winding
                // down closes its connection when its handle and events are dropped here.
                if let Some(options) = self.options.clone() {
                    let handle = self.status.resume_handle();
                    let link = reconnect::reconnect(options, self.policy, handle, self.tap());
                    self.adopt(link);
                }
            }
        }
    }
}
