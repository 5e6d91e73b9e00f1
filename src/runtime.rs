//! The engine loop's plumbing, shared by every presenter: builds the `setup`, starts the
//! session, turns session/tool/device output into [`Msg`]s and carries out [`Effect`]s.

use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use tracing::warn;

use crate::app::{Effect, Msg};
use anyhow::Context as _;

use crate::config::{Settings, Target};
use crate::live::wire::{
    AudioTranscriptionConfig, Content, ContextWindowCompression, GenerationConfig, Modality,
    SessionResumptionConfig, Setup, SlidingWindow, SpeechConfig, Tool,
};
use crate::live::{self, Endpoint, SessionEvent, SessionHandle, SessionOptions};
use crate::mock::{MockOptions, MockServer};
use crate::tools::{Device, Registry, SmartHome, ToolDispatcher, ToolEvent};

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

/// Owns the session, the tool dispatcher and the device watch for one app.
pub struct Engine {
    handle: Option<SessionHandle>,
    session_events: Option<mpsc::Receiver<SessionEvent>>,
    dispatcher: ToolDispatcher,
    tool_events: mpsc::UnboundedReceiver<ToolEvent>,
    devices: watch::Receiver<Vec<Device>>,
}

impl Engine {
    pub fn new(registry: Arc<Registry>, home: &SmartHome) -> Self {
        let (dispatcher, tool_events) = ToolDispatcher::new(registry);
        Engine {
            handle: None,
            session_events: None,
            dispatcher,
            tool_events,
            devices: home.subscribe(),
        }
    }

    /// Connects; on failure returns the message to show.
    pub async fn connect(&mut self, options: SessionOptions) -> Result<(), String> {
        match live::connect(options).await {
            Ok(session) => {
                self.handle = Some(session.handle);
                self.session_events = Some(session.events);
                Ok(())
            }
            Err(e) => Err(e.to_string()),
        }
    }

    /// The next message from the session, the tools or the devices; `None` once the session
    /// stream has ended and nothing else can arrive.
    pub async fn next(&mut self) -> Option<Msg> {
        loop {
            let session_open = self.session_events.is_some();
            tokio::select! {
                event = async { self.session_events.as_mut()?.recv().await }, if session_open => {
                    match event {
                        Some(event) => return Some(Msg::Session(event)),
                        None => self.session_events = None,
                    }
                }
                Some(event) = self.tool_events.recv() => return Some(Msg::Tool(event)),
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
            Effect::RunTools(calls) => self.dispatcher.dispatch(calls),
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
        }
    }
}
