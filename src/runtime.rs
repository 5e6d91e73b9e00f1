//! The engine loop's plumbing, shared by every presenter: builds the `setup`, starts the
//! session, turns session/tool/device output into [`Msg`]s and carries out [`Effect`]s.

use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use tracing::warn;

use crate::app::{App, Effect, Msg};
use anyhow::Context as _;

use crate::config::{Settings, Target};
use crate::live::session::WireTap;
use crate::live::wire::{
    AudioTranscriptionConfig, Content, GenerationConfig, Modality, Setup, SpeechConfig, Tool,
};
use crate::live::{self, Endpoint, SessionEvent, SessionHandle, SessionOptions};
use crate::mock::{MockOptions, MockServer};
use crate::record::{self, Record, Recorder};
use crate::tools::{Device, Registry, SmartHome, ToolDispatcher, ToolEvent, builtin_registry};

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
    engine.recorder = recorder;
    Ok(Conversation {
        app,
        engine,
        upstream,
        mock,
    })
}

/// Owns the session, the tool dispatcher and the device watch for one app.
pub struct Engine {
    handle: Option<SessionHandle>,
    session_events: Option<mpsc::Receiver<SessionEvent>>,
    dispatcher: ToolDispatcher,
    tool_events: mpsc::UnboundedReceiver<ToolEvent>,
    devices: watch::Receiver<Vec<Device>>,
    /// Records the session when `--record` is on.
    recorder: Option<Recorder>,
    /// Session events applied so far: where app-level lines sit among the frames.
    applied_events: u64,
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
            recorder: None,
            applied_events: 0,
        }
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

    /// Connects; on failure returns the message to show.
    pub async fn connect(&mut self, options: SessionOptions) -> Result<(), String> {
        let tap = self.recorder.clone().map(|r| {
            r.write(Record::Connect {
                host: options.endpoint.host().to_owned(),
            });
            Arc::new(r) as Arc<dyn WireTap>
        });
        let session = match live::session::connect_tapped(options, tap).await {
            Ok(session) => session,
            Err(e) => {
                let message = e.to_string();
                self.record(|_| Record::ConnectFailed {
                    message: message.clone(),
                });
                return Err(message);
            }
        };
        self.attach(session);
        Ok(())
    }

    /// Connects through a bridge (`--bridge`); on failure returns the message to show.
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

    pub async fn connect_bridge(
        &mut self,
        url: &str,
        setup: &Setup,
        setup_timeout: std::time::Duration,
    ) -> Result<(), String> {
        let session = crate::bridge::client::connect(url, setup, setup_timeout)
            .await
            .map_err(|e| e.to_string())?;
        self.attach(session);
        Ok(())
    }

    /// Runs on an already open session (direct or bridged).
    pub fn attach(&mut self, session: live::Session) {
        self.handle = Some(session.handle);
        self.session_events = Some(session.events);
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

    /// Applies a message to the app and carries out the effects it asks for.
    pub async fn apply(&mut self, app: &mut App, msg: Msg) {
        match &msg {
            Msg::Session(_) => self.applied_events += 1,
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
                self.record(|at| Record::EndSession { at });
                if let Some(handle) = &self.handle {
                    handle.close().await;
                }
            }
        }
    }
}
