//! The set-up step: from the settings, everything a session needs — the tools, the `setup`
//! message, where to connect (starting the embedded mock for the offline demo model), the
//! recorder and the audio worker — handed over at once as an [`App`] and its [`Engine`].

use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;

use super::{ConnectTo, Engine};
use crate::app::{App, AppInit, AudioAsked};
use crate::audio::{Audio, AudioWorker};
use crate::config::{Route, Settings};
use crate::record::Recorder;
use crate::tools::mcp::McpHub;
use crate::tools::{Decider, Registry, SmartHome, builtin_registry};
use livetalk_live::adc::{Credentials, TokenSource};
use livetalk_live::session::ReconnectPolicy;
use livetalk_live::wire::{
    AudioTranscriptionConfig, AutomaticActivityDetection, Content, ContextWindowCompression,
    GenerationConfig, Modality, RealtimeInputConfig, SessionResumptionConfig, Setup, SlidingWindow,
    SpeechConfig, ToolSet,
};
use livetalk_live::{Auth, ConnectOptions, Endpoint};
use livetalk_mock::{MockOptions, MockServer};

/// The `setup.tools` declaring the registry's tools: Google Search when it is on, then the
/// functions (none when nothing is on).
pub fn tool_sets(registry: &Registry) -> Vec<ToolSet> {
    let mut sets = Vec::new();
    if registry.google_search() {
        sets.push(ToolSet {
            google_search: Some(serde_json::json!({})),
            ..ToolSet::default()
        });
    }
    let declarations = registry.declarations();
    if !declarations.is_empty() {
        sets.push(ToolSet {
            function_declarations: declarations,
            ..ToolSet::default()
        });
    }
    sets
}

/// The `setup` message for these settings and tools.
pub fn build_setup(settings: &Settings, registry: &Registry) -> Setup {
    let mut setup = Setup {
        model: match &settings.vertex {
            Some(vertex) => vertex.model_name(&settings.model),
            None => settings.model.clone(),
        },
        generation_config: Some(GenerationConfig {
            response_modalities: vec![Modality::Audio],
            speech_config: Some(SpeechConfig::voice(&settings.voice)),
            ..GenerationConfig::default()
        }),
        system_instruction: (!settings.system_instruction.trim().is_empty())
            .then(|| Content::text("user", settings.system_instruction.clone())),
        tools: tool_sets(registry),
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
    };
    // Some models take functions only one way (the app tells the user so).
    livetalk_live::models::fit_declarations(&mut setup);
    setup
}

/// Where the service compresses the context when the setup leaves it to the server (as ours
/// does): 80% of the 131,072-token context of the Live models.
const COMPRESSION_TRIGGER_DEFAULT: u64 = 104_857;

/// Where the session connects. For the offline demo model this starts the embedded mock on a
/// loopback port; the returned server must be kept alive as long as the session runs.
pub async fn resolve_endpoint(
    settings: &Settings,
) -> anyhow::Result<(Endpoint, Option<MockServer>)> {
    match &settings.target {
        Route::Google(endpoint) | Route::Custom(endpoint) => Ok((endpoint.clone(), None)),
        Route::OfflineMock => {
            let mock = MockServer::start(MockOptions::loopback())
                .await
                .context("starting the embedded offline demo model")?;
            Ok((mock.endpoint(settings.api_version), Some(mock)))
        }
        Route::Bridge(url) => anyhow::bail!(
            "{} is a bridge, not a Live endpoint",
            crate::config::bridge_host(url)
        ),
    }
}

/// How the session's connections prove who they are. For Vertex AI that is an access token
/// from Application Default Credentials, whose file is found and read here, before anything
/// starts, so missing credentials are one message at once; an API key is then not used.
/// With Vertex AI and an API key set, also the notice that the key is not used.
pub fn auth(settings: &Settings) -> anyhow::Result<(Auth, Option<String>)> {
    let Some(vertex) = &settings.vertex else {
        return Ok((settings.api_key.clone().into(), None));
    };
    let key_unused = settings.api_key.is_some().then(|| {
        "An API key is set, but --vertex uses Application Default Credentials; the key is not used."
            .to_owned()
    });
    let credentials =
        Credentials::find(&|name| std::env::var(name).ok()).map_err(anyhow::Error::msg)?;
    tracing::info!(
        project = %vertex.project,
        location = %vertex.location,
        "Vertex AI with the {}",
        credentials.describe()
    );
    Ok((
        Auth::Bearer(Arc::new(TokenSource::new(credentials))),
        key_unused,
    ))
}

/// The reconnect policy of these settings.
pub fn reconnect_policy(settings: &Settings) -> ReconnectPolicy {
    ReconnectPolicy {
        max_attempts: settings.reconnect_attempts,
        ..ReconnectPolicy::default()
    }
}

/// Builds the app and its engine for these settings: the tools, the recorder, the audio
/// worker, and the route to connect along (starting the embedded mock when the offline demo
/// model is the target). The engine connects once the drive loop asks it for messages.
/// `log_path` is what the help shows; `decider` settles calls of tools that ask for approval
/// (the person at the TUI, or the headless `--approve` policy).
pub async fn launch(
    settings: &Settings,
    log_path: Option<&Path>,
    decider: Decider,
) -> anyhow::Result<(App, Engine)> {
    // Nothing catches Ctrl-C before the drive loop runs: starting MCP servers or getting a
    // token can take seconds, and the user may change their mind meanwhile.
    tokio::select! {
        launched = launch_now(settings, log_path, decider) => launched,
        _ = tokio::signal::ctrl_c() => Err(Interrupted.into()),
    }
}

/// Ctrl-C while the session was being set up: what the user asked for, not a failure.
#[derive(Debug, thiserror::Error)]
#[error("stopped (Ctrl-C) before the session started; nothing was sent")]
pub struct Interrupted;

async fn launch_now(
    settings: &Settings,
    log_path: Option<&Path>,
    decider: Decider,
) -> anyhow::Result<(App, Engine)> {
    let (auth, auth_notice) = auth(settings)?;
    let home = SmartHome::new();
    let mut registry =
        builtin_registry(&settings.tools_enabled, settings.tool_limits, home.clone())
            .context("building the tool registry")?;
    for (name, approval) in &settings.tools_approval {
        registry.set_approval(name, *approval);
    }
    registry.declare_google_search(settings.google_search);
    let mut engine = Engine::new(Arc::new(registry), &home, decider);
    if !settings.mcp_servers.is_empty() {
        // Started before `setup` is built, so their tools are declared from the start.
        let (hub, events) = McpHub::start(settings.mcp_servers.clone()).await;
        engine.attach_mcp(hub, events);
    }
    let setup = build_setup(settings, &engine.registry());
    engine.set_reconnect_policy(reconnect_policy(settings));
    if let Some(to) = &settings.record {
        engine.record_into(Recorder::create(
            &Recorder::folder(to, &settings.sessions_dir),
            settings,
            home.snapshot(),
        )?);
    }
    let route = match &settings.target {
        Route::Bridge(url) => ConnectTo::Bridge {
            url: url.clone(),
            setup,
            connect_timeout: settings.connect_timeout,
            transport: settings.bridge_transport,
        },
        _ => {
            let (endpoint, mock) = resolve_endpoint(settings).await?;
            if let Some(mock) = mock {
                engine.keep_mock(mock);
            }
            ConnectTo::Live(ConnectOptions {
                endpoint,
                auth,
                setup,
                connect_timeout: settings.connect_timeout,
            })
        }
    };
    let audio = (!settings.audio.is_off()).then(|| settings.audio.clone());
    if let Some(options) = &audio {
        let (worker, feeds) = Audio::start(options.clone())?;
        engine.attach_audio(AudioWorker::new(worker, feeds));
    }
    let app = App::new(AppInit {
        voice: settings.voice.clone(),
        endpoint_label: settings.endpoint_label(),
        audio: audio.as_ref().map(AudioAsked::from),
        recording: engine
            .recording_dir()
            .map(|dir| format!("REC {}", dir.display())),
        no_color: crate::output::no_color(),
        hyperlinks: crate::output::hyperlinks(),
        log_path: log_path.map(|p| p.display().to_string()),
        catalog: engine.catalog(),
        notices: auth_notice.into_iter().collect(),
        warnings: trust_warning(settings).into_iter().collect(),
        price_book: settings.pricing.clone(),
        compression_trigger: settings
            .context_compression
            .then_some(COMPRESSION_TRIGGER_DEFAULT),
        interactive: decider == Decider::Person,
        video: settings.video.clone(),
        ..AppInit::new(
            settings.model.clone(),
            settings.is_offline(),
            home.snapshot(),
        )
    });
    engine.start(route);
    Ok((app, engine))
}

/// What to do about certificates that could not be read.
pub const TRUST_FIX: &str =
    "point SSL_CERT_FILE at a PEM bundle (or SSL_CERT_DIR at a folder) livetalk can read";

/// The certificates a connection trusts, and why some could not be read.
pub fn trust_problems(report: &livetalk_live::network::NetworkReport) -> String {
    format!(
        "trusting the bundled web roots and {}, but: {}",
        report.trust,
        report.trust_problems.join("; ")
    )
}

/// What a session says at its start when its route uses TLS and some of the certificates the
/// user named (`SSL_CERT_FILE`, `SSL_CERT_DIR`) or the system's could not be read: what
/// `doctor` reports, in the same words. Read as the connection reads them; `None` when all
/// were read, or the route has no TLS (the demo model, a `ws://` endpoint).
pub fn trust_warning(settings: &Settings) -> Option<String> {
    if !settings.uses_tls() {
        return None;
    }
    // An unusable proxy variable is the connection's own error, said when it fails.
    let report = livetalk_live::network::report().ok()?;
    (!report.trust_problems.is_empty()).then(|| {
        format!(
            "Certificates: {}. Connections may fail where a company proxy inspects TLS; {TRUST_FIX} (`livetalk doctor` checks).",
            trust_problems(&report)
        )
    })
}
