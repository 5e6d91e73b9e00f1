//! The engine loop's plumbing, shared by every presenter: builds the `setup`, starts the
//! session (kept alive across connections by [`reconnect`]), turns session/tool/device output
//! into [`Msg`]s and carries out [`Effect`]s.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use tracing::warn;

use crate::app::{Effect, Msg};
use anyhow::Context as _;

use crate::config::{Settings, Target};
use crate::live::reconnect::{
    self, Link, LinkHandle, LinkStatus, ReconnectPolicy, SupervisorEvent,
};
use crate::live::wire::{
    AudioTranscriptionConfig, Blob, ClientMessage, Content, ContextWindowCompression,
    GenerationConfig, INPUT_AUDIO_MIME, Modality, RealtimeInput, SessionResumptionConfig, Setup,
    SlidingWindow, SpeechConfig, Tool,
};
use crate::live::{self, Endpoint, SessionOptions};
use crate::mock::{MockOptions, MockServer};
use crate::tools::{Device, Registry, SlowCall, SmartHome, ToolDispatcher, ToolEvent, Watchdog};

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
    }
}

/// The reconnect policy of these settings.
pub fn reconnect_policy(settings: &Settings) -> ReconnectPolicy {
    ReconnectPolicy {
        max_attempts: settings.reconnect_attempts,
        ..ReconnectPolicy::default()
    }
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
        }
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
        match live::connect(options.clone()).await {
            Ok(session) => {
                self.adopt(reconnect::supervise(session, options.clone(), self.policy));
                self.options = Some(options);
                Ok(())
            }
            Err(e) => Err(e.to_string()),
        }
    }

    /// Streams one chunk of 16 kHz PCM16 mic audio (`realtimeInput.audio`). While the link
    /// reconnects it is queued, and dropped if it waited longer than a second.
    pub async fn send_audio(&self, pcm: Vec<u8>) {
        if let Some(handle) = &self.handle {
            let input = RealtimeInput {
                audio: Some(Blob {
                    mime_type: INPUT_AUDIO_MIME.to_owned(),
                    data: pcm,
                }),
                ..RealtimeInput::default()
            };
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
            tokio::select! {
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

    /// Carries out one effect.
    pub async fn execute(&mut self, effect: Effect) {
        match effect {
            Effect::SendText(text) => {
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
                if let Some(handle) = &self.handle {
                    handle.close().await;
                }
            }
            Effect::Reconnect => {
                // The app asks only once the link gave up; an old supervisor still winding
                // down closes its connection when its handle and events are dropped here.
                if let Some(options) = self.options.clone() {
                    let handle = self.status.resume_handle();
                    self.adopt(reconnect::reconnect(options, self.policy, handle));
                }
            }
        }
    }
}
