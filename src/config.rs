//! Settings: built-in defaults < user config file < environment < command-line flags.
//!
//! The defaults layer is `config.example.toml` itself, so the documented defaults cannot drift
//! from the real ones.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::audio::{AudioHost, AudioOptions, EchoMode};
use crate::paths::{data_dir, default_config_path};
use crate::pricing::{PRICE_MAX, PRICED_MODELS_MAX, PriceBook, PriceOverride};
use crate::tools::mcp::{self, ServerSpec};
use crate::tools::{Approval, ApprovePolicy, BUILTIN_TOOLS, ToolLimits};
use livetalk_live::file;
use livetalk_live::models::{VOICES, model_name, voice_name};
use livetalk_live::{ApiKey, ApiVersion, Endpoint};

/// The documented defaults, compiled in.
pub const DEFAULT_CONFIG: &str = include_str!("../config.example.toml");

/// One config file layer; every key optional so layers can be stacked.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileLayer {
    endpoint: Option<String>,
    vertex: Option<bool>,
    project: Option<String>,
    location: Option<String>,
    api_version: Option<ApiVersion>,
    model: Option<String>,
    voice: Option<String>,
    system_instruction: Option<String>,
    api_key: Option<String>,
    transcription: Option<TranscriptionLayer>,
    tools: Option<ToolsLayer>,
    session: Option<SessionLayer>,
    record: Option<RecordLayer>,
    audio: Option<AudioLayer>,
    mcp_servers: Option<std::collections::BTreeMap<String, McpServerLayer>>,
    pricing: Option<BTreeMap<String, PriceOverride>>,
}

/// `[mcp_servers.NAME]`: a stdio server (`command`…) or a streamable-HTTP one (`url`…).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct McpServerLayer {
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: std::collections::BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    url: Option<String>,
    bearer_token_env_var: Option<String>,
    enabled: Option<bool>,
    enabled_tools: Option<Vec<String>>,
    #[serde(default)]
    disabled_tools: Vec<String>,
    startup_timeout_sec: Option<f64>,
    tool_timeout_sec: Option<f64>,
    approval: Option<Approval>,
    #[serde(default)]
    tools: std::collections::BTreeMap<String, McpToolLayer>,
}

/// `[mcp_servers.NAME.tools.TOOL]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct McpToolLayer {
    approval: Option<Approval>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AudioLayer {
    enabled: Option<bool>,
    host: Option<String>,
    input_device: Option<String>,
    output_device: Option<String>,
    frame_ms: Option<u64>,
    startup_buffer_ms: Option<u64>,
    echo: Option<String>,
    noise_suppression: Option<bool>,
    push_to_talk: Option<bool>,
    output_wav_max_mb: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RecordLayer {
    enabled: Option<bool>,
    dir: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TranscriptionLayer {
    input: Option<bool>,
    output: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolsLayer {
    enabled: Option<Vec<String>>,
    /// Declare Google Search beside the function declarations (`googleSearch`).
    google_search: Option<bool>,
    timeout_secs: Option<f64>,
    max_response_bytes: Option<usize>,
    /// Per built-in tool: `"always"` (each call waits for the user) or `"never"`.
    approval: Option<BTreeMap<String, Approval>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionLayer {
    /// Everything from the host look-up to the setup answer (once `setup_timeout_secs`).
    #[serde(alias = "setup_timeout_secs")]
    connect_timeout_secs: Option<f64>,
    turn_timeout_secs: Option<f64>,
    resumption: Option<bool>,
    context_compression: Option<bool>,
    reconnect_attempts: Option<u32>,
    bridge_transport: Option<String>,
}

/// Overrides from the command line.
#[derive(Debug, Clone, Default)]
pub struct FlagOverrides {
    pub config: Option<PathBuf>,
    pub endpoint: Option<String>,
    /// `--vertex`: Vertex AI with Application Default Credentials.
    pub vertex: bool,
    pub project: Option<String>,
    pub location: Option<String>,
    pub api_version: Option<ApiVersion>,
    pub model: Option<String>,
    pub voice: Option<String>,
    pub offline: bool,
    /// `--bridge URL`: talk through a livetalk bridge.
    pub bridge: Option<String>,
    /// `--bridge-transport`, as given.
    pub bridge_transport: Option<String>,
    pub turn_timeout_secs: Option<f64>,
    /// `--approve`: what a headless run does with calls that would wait for the user (`None`:
    /// not given, read-only applies).
    pub approve: Option<ApprovePolicy>,
    /// `--record [DIR]`: `Some(None)` records into a new timestamped folder.
    pub record: Option<Option<PathBuf>>,
    /// `--no-audio`: no sound devices (WAV files still work).
    pub no_audio: bool,
    pub audio_host: Option<String>,
    pub input_device: Option<String>,
    pub output_device: Option<String>,
    pub input_wav: Option<PathBuf>,
    pub output_wav: Option<PathBuf>,
    pub output_wav_max_mb: Option<u64>,
    pub push_to_talk: bool,
    pub echo: Option<String>,
    /// `--no-noise-suppression`.
    pub no_noise_suppression: bool,
    /// `--mcp 'NAME=COMMAND ARGS…'`, as given.
    pub mcp: Vec<String>,
    /// `--search`: declare Google Search.
    pub search: bool,
}

/// Where a recording goes, as asked for; the recorder finds the folder
/// (`record::Recorder::folder`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordTo {
    /// The folder `--record DIR` names, as given: a bare name is a folder in the sessions
    /// folder, anything with a path in it is that path.
    Folder(PathBuf),
    /// A new `<local timestamp>` folder under this one (`--record`, `record.enabled`).
    NewUnder(PathBuf),
}

/// Vertex AI's project and location (the credentials are found when a session starts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vertex {
    pub project: String,
    pub location: String,
}

impl Vertex {
    /// The resource name Vertex takes as `setup.model`: a model id, `models/ID` or
    /// `publishers/P/models/ID` becomes `projects/…/locations/…/publishers/…/models/ID`;
    /// a full resource name is kept.
    pub fn model_name(&self, model: &str) -> String {
        if model.starts_with("projects/") {
            return model.to_owned();
        }
        let publisher_model = if model.starts_with("publishers/") {
            model.to_owned()
        } else {
            let id = model.rsplit('/').next().unwrap_or(model);
            format!("publishers/google/models/{id}")
        };
        format!(
            "projects/{}/locations/{}/{publisher_model}",
            self.project, self.location
        )
    }
}

/// How the voice travels on the `--bridge` route (`session.bridge_transport`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum BridgeTransport {
    /// `SEND_REALTIME_INPUT` and `AUDIO_CHUNK` on the bridge WebSocket.
    #[default]
    WebSocket,
    /// An Opus track on a WebRTC peer connection beside the WebSocket.
    WebRtc,
}

impl BridgeTransport {
    fn parse(value: &str, source: &str, key: &str) -> Result<Self, ConfigError> {
        match value.trim().to_ascii_lowercase().as_str() {
            "websocket" => Ok(BridgeTransport::WebSocket),
            "webrtc" => Ok(BridgeTransport::WebRtc),
            _ => Err(ConfigError::new(
                source,
                key,
                format!("{value:?} is not one of websocket, webrtc"),
            )),
        }
    }
}

/// Where the session goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Google's service (a key is set, no endpoint given).
    Google(Endpoint),
    /// A user-given endpoint (key optional).
    Custom(Endpoint),
    /// The embedded mock, started in-process.
    OfflineMock,
    /// A livetalk bridge (`livetalk serve`) at this ws:// or wss:// URL; it holds the key.
    Bridge(String),
}

/// The kinds of route, as reports name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteKind {
    /// The embedded offline demo model.
    Demo,
    /// Google's Gemini API.
    Google,
    /// Vertex AI.
    Vertex,
    /// An endpoint the user gave.
    Endpoint,
    /// A livetalk bridge.
    Bridge,
}

impl RouteKind {
    /// Its word in JSON and JUnit: `demo`, `google`, `vertex`, `endpoint`, `bridge`.
    pub fn word(self) -> &'static str {
        match self {
            RouteKind::Demo => "demo",
            RouteKind::Google => "google",
            RouteKind::Vertex => "vertex",
            RouteKind::Endpoint => "endpoint",
            RouteKind::Bridge => "bridge",
        }
    }
}

/// Fully resolved settings.
#[derive(Debug, Clone)]
pub struct Settings {
    pub target: Route,
    pub api_key: Option<ApiKey>,
    /// The key variable, set but blank, that the route would have read a key from: every
    /// command that connects refuses it ([`Settings::key_usable`]).
    pub blank_key_var: Option<&'static str>,
    /// Vertex AI instead of the Gemini API (`--vertex`, `vertex = true`).
    pub vertex: Option<Vertex>,
    pub api_version: ApiVersion,
    pub model: String,
    pub voice: String,
    pub system_instruction: String,
    pub input_transcription: bool,
    pub output_transcription: bool,
    pub tools_enabled: Vec<String>,
    /// Declare Google Search beside the function declarations (`[tools] google_search`,
    /// `--search`): the model may look things up on the web, and its grounded replies name
    /// their sources.
    pub google_search: bool,
    /// Built-in tools whose approval was configured (`[tools.approval]`).
    pub tools_approval: BTreeMap<String, Approval>,
    /// What a headless run does with calls that would wait for the user (`--approve`; `None`:
    /// not given, read-only applies).
    pub approve: Option<ApprovePolicy>,
    pub tool_limits: ToolLimits,
    pub connect_timeout: Duration,
    pub turn_timeout: Duration,
    /// Ask for session resumption handles, so a new connection can continue the conversation.
    pub resumption: bool,
    /// Sliding-window context compression, so a session is not ended by its context filling up.
    pub context_compression: bool,
    /// Reconnect attempts after a lost connection before giving up (0: never reconnect).
    pub reconnect_attempts: u32,
    /// How the voice travels on the `--bridge` route.
    pub bridge_transport: BridgeTransport,
    /// The config file that was read, if any.
    pub config_file: Option<PathBuf>,
    /// Record the session, and where (`--record`, `record.enabled`).
    pub record: Option<RecordTo>,
    /// Where timestamped recordings go and `livetalk sessions` looks (`record.dir`).
    pub sessions_dir: PathBuf,
    /// Microphone, speaker and WAV files.
    pub audio: AudioOptions,
    /// The prices sessions go by: the built-in table on Google's own routes, with
    /// `[pricing."MODEL"]` over it on any route.
    pub pricing: PriceBook,
    /// MCP servers whose tools the model may call, by name.
    pub mcp_servers: Vec<ServerSpec>,
}

/// The key of a [`ConfigError`] whose problem is the whole sentence: a file that could not
/// be read at all, a key variable set but blank.
const FILE_KEY: &str = "(reading)";

/// The environment variables an API key is read from, the first one set winning.
const KEY_VARS: [&str; 2] = ["GEMINI_API_KEY", "GOOGLE_API_KEY"];

/// A bad setting: names where it came from, the key and the problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.sentence())]
pub struct ConfigError {
    pub origin: String,
    pub key: String,
    pub problem: String,
}

impl ConfigError {
    /// A file that cannot be read at all names itself; a bad key names the file and the key.
    fn sentence(&self) -> String {
        if self.key == FILE_KEY {
            self.problem.clone()
        } else {
            format!(
                "bad config in {}: key `{}`: {}",
                self.origin, self.key, self.problem
            )
        }
    }

    fn new(source: &str, key: &str, problem: impl Into<String>) -> Self {
        ConfigError {
            origin: source.to_owned(),
            key: key.to_owned(),
            problem: problem.into(),
        }
    }
}

impl Settings {
    /// Loads settings from the real environment.
    pub fn load(flags: &FlagOverrides) -> Result<Settings, ConfigError> {
        Settings::resolve(flags, &|name| std::env::var(name).ok())
    }

    /// Resolves all layers; `env` reads an environment variable (injected for tests).
    pub fn resolve(
        flags: &FlagOverrides,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Settings, ConfigError> {
        let mut merged = Merged::default();
        merged.apply(
            parse_layer(DEFAULT_CONFIG, "the built-in defaults")?,
            "the built-in defaults",
        )?;

        let explicit = flags.config.clone().or_else(|| {
            env("LIVETALK_CONFIG")
                .filter(|p| !p.is_empty())
                .map(PathBuf::from)
        });
        let unreadable = |path: &std::path::Path, e: file::FileError| {
            ConfigError::new(&path.display().to_string(), FILE_KEY, e.to_string())
        };
        let config_file = match explicit {
            Some(path) => {
                let text = file::read_text(&path, file::FileKind::CONFIG)
                    .map_err(|e| unreadable(&path, e))?;
                Some((path, text))
            }
            // The default file may be missing; one that is there but unreadable is refused as
            // the same file named by --config would be, or its servers, approvals and key
            // would be dropped in silence.
            None => match default_config_path() {
                Some(path) => match file::read_text(&path, file::FileKind::CONFIG) {
                    Ok(text) => Some((path, text)),
                    Err(e) if e.is_missing() => None,
                    Err(e) => return Err(unreadable(&path, e)),
                },
                None => None,
            },
        };
        if let Some((path, text)) = &config_file {
            let source = path.display().to_string();
            merged.apply(parse_layer(text, &source)?, &source)?;
        }

        for (var, key) in [
            ("LIVETALK_ENDPOINT", "endpoint"),
            ("LIVETALK_MODEL", "model"),
            ("LIVETALK_VOICE", "voice"),
            ("LIVETALK_API_VERSION", "api_version"),
        ] {
            if let Some(value) = env(var).filter(|v| !v.trim().is_empty()) {
                merged.set_str(key, value, &format!("environment variable {var}"))?;
            }
        }
        for (var, slot) in [
            ("GOOGLE_CLOUD_PROJECT", &mut merged.project),
            ("GOOGLE_CLOUD_LOCATION", &mut merged.location),
        ] {
            if let Some(value) = env(var).filter(|v| !v.trim().is_empty()) {
                *slot = Some((
                    value.trim().to_owned(),
                    format!("environment variable {var}"),
                ));
            }
        }
        let env_key = env("GEMINI_API_KEY")
            .and_then(ApiKey::new)
            .or_else(|| env("GOOGLE_API_KEY").and_then(ApiKey::new));
        if env_key.is_some() {
            merged.api_key = env_key;
        }
        // The variable a key is read from first, when it is set but blank: a CI secret that a
        // fork does not have arrives as "", and would otherwise send the session, unsaid, to
        // the offline demo model.
        let blank_key_var = KEY_VARS
            .into_iter()
            .find(|var| env(var).is_some())
            .filter(|var| env(var).is_some_and(|v| v.trim().is_empty()));

        if let Some(endpoint) = &flags.endpoint {
            merged.set_str("endpoint", endpoint.clone(), "flag --endpoint")?;
        }
        if let Some(version) = flags.api_version {
            merged.api_version = version;
        }
        if flags.vertex {
            merged.vertex = true;
        }
        for (flag, value, slot) in [
            ("flag --project", &flags.project, &mut merged.project),
            ("flag --location", &flags.location, &mut merged.location),
        ] {
            if let Some(value) = value {
                *slot = Some((value.trim().to_owned(), flag.to_owned()));
            }
        }
        if let Some(model) = &flags.model {
            merged.set_str("model", model.clone(), "flag --model")?;
        }
        if let Some(voice) = &flags.voice {
            merged.set_str("voice", voice.clone(), "flag --voice")?;
        }
        if let Some(secs) = flags.turn_timeout_secs {
            merged.turn_timeout = turn_seconds(secs, "flag --turn-timeout", "turn_timeout_secs")?;
        }
        if let Some(host) = env("LIVETALK_AUDIO_HOST").filter(|v| !v.trim().is_empty()) {
            merged.audio.host = audio_host(&host, "environment variable LIVETALK_AUDIO_HOST")?;
        }
        if let Some(host) = &flags.audio_host {
            merged.audio.host = audio_host(host, "flag --audio-host")?;
        }
        if let Some(transport) = env("LIVETALK_BRIDGE_TRANSPORT").filter(|v| !v.trim().is_empty()) {
            merged.bridge_transport = BridgeTransport::parse(
                &transport,
                "environment variable LIVETALK_BRIDGE_TRANSPORT",
                "session.bridge_transport",
            )?;
        }
        if let Some(transport) = &flags.bridge_transport {
            merged.bridge_transport =
                BridgeTransport::parse(transport, "flag --bridge-transport", "bridge_transport")?;
        }
        if let Some(echo) = &flags.echo {
            merged.audio.echo = echo_mode(echo, "flag --echo")?;
        }
        if flags.no_audio {
            merged.audio.devices = false;
        }
        if flags.no_noise_suppression {
            merged.audio.noise_suppression = false;
        }
        if flags.push_to_talk {
            merged.audio.push_to_talk = true;
        }
        for (flag, value, slot) in [
            (
                "flag --input-device",
                &flags.input_device,
                &mut merged.audio.input_device,
            ),
            (
                "flag --output-device",
                &flags.output_device,
                &mut merged.audio.output_device,
            ),
        ] {
            if let Some(name) = value {
                if name.trim().is_empty() {
                    return Err(ConfigError::new(flag, "device", "must not be empty"));
                }
                *slot = Some(name.trim().to_owned());
            }
        }
        merged.audio.input_wav = flags.input_wav.clone();
        merged.audio.output_wav = flags.output_wav.clone();
        if let Some(mb) = flags.output_wav_max_mb {
            merged.audio.output_wav_max_bytes = wav_megabytes(mb, "flag --output-wav-max-mb")?;
        }

        let bridge = flags
            .bridge
            .as_deref()
            .map(|url| bridge_url(url, "flag --bridge"))
            .transpose()?;
        // A bridge holds its own credentials, and the offline model needs none.
        let vertex = (merged.vertex && bridge.is_none() && !flags.offline)
            .then(|| merged.vertex_settings())
            .transpose()?;
        let parse = |url: &str| match vertex {
            Some(_) => Endpoint::parse_vertex(url, merged.api_version),
            None => Endpoint::parse(url, merged.api_version),
        };
        let target = match (&merged.endpoint, flags.offline, bridge, &vertex) {
            // The flag beats an endpoint from the config file or environment.
            (_, _, Some(url), _) => Route::Bridge(url),
            (Some((_, source)), true, None, _) => {
                return Err(ConfigError::new(
                    source,
                    "endpoint",
                    "--offline uses the embedded demo model; drop one of --offline and the endpoint",
                ));
            }
            (None, true, None, _) => Route::OfflineMock,
            (Some((url, source)), false, None, _) => Route::Custom(
                parse(url).map_err(|e| ConfigError::new(source, "endpoint", e.to_string()))?,
            ),
            (None, false, None, Some(vertex)) => Route::Google(
                Endpoint::vertex(&vertex.location, merged.api_version)
                    .map_err(|e| ConfigError::new("--vertex", "location", e.to_string()))?,
            ),
            (None, false, None, None) if merged.api_key.is_some() => {
                Route::Google(Endpoint::google_ai(merged.api_version))
            }
            (None, false, None, None) => Route::OfflineMock,
        };

        for flag in &flags.mcp {
            let spec = mcp_flag(flag)?;
            merged.mcp_servers.insert(spec.name.clone(), spec);
        }

        // A bridge holds its own key, the offline demo model needs none, Vertex AI signs in
        // with Application Default Credentials: elsewhere a blank key variable is refused.
        let uses_key = matches!(target, Route::Google(_) | Route::Custom(_))
            || (target == Route::OfflineMock && !flags.offline);
        let blank_key_var = blank_key_var.filter(|_| uses_key && vertex.is_none());

        let sessions_dir = merged.sessions_dir();
        let record = match &flags.record {
            Some(Some(dir)) => Some(RecordTo::Folder(dir.clone())),
            Some(None) => Some(RecordTo::NewUnder(sessions_dir.clone())),
            None if merged.record_enabled => Some(RecordTo::NewUnder(sessions_dir.clone())),
            None => None,
        };
        Ok(Settings {
            target,
            api_key: merged.api_key,
            blank_key_var,
            vertex,
            api_version: merged.api_version,
            model: merged.model,
            voice: merged.voice,
            system_instruction: merged.system_instruction,
            input_transcription: merged.input_transcription,
            output_transcription: merged.output_transcription,
            tools_enabled: merged.tools_enabled,
            google_search: merged.google_search || flags.search,
            tools_approval: merged.tools_approval,
            approve: flags.approve,
            tool_limits: merged.tool_limits,
            connect_timeout: merged.connect_timeout,
            turn_timeout: merged.turn_timeout,
            resumption: merged.resumption,
            context_compression: merged.context_compression,
            reconnect_attempts: merged.reconnect_attempts,
            bridge_transport: merged.bridge_transport,
            config_file: config_file.map(|(path, _)| path),
            record,
            sessions_dir,
            audio: merged.audio,
            mcp_servers: merged.mcp_servers.into_values().collect(),
            pricing: PriceBook::default(),
        }
        .priced(merged.pricing))
    }

    /// Loads settings for a command that connects: [`Settings::load`], refusing a key
    /// variable set but blank where the route would use a key ([`Settings::key_usable`]).
    pub fn load_for_session(flags: &FlagOverrides) -> Result<Settings, ConfigError> {
        let settings = Settings::load(flags)?;
        settings.key_usable()?;
        Ok(settings)
    }

    /// An error when the key variable the route would read is set but blank.
    pub fn key_usable(&self) -> Result<(), ConfigError> {
        match self.blank_key_var {
            Some(var) => Err(ConfigError::new(
                &format!("environment variable {var}"),
                FILE_KEY,
                format!(
                    "{var} is set but empty: set it to your API key, or unset it (or pass --offline) to use the offline demo model"
                ),
            )),
            None => Ok(()),
        }
    }

    /// What sessions talk to, for people and reports: its kind, and a description naming
    /// the host. Never a key.
    pub fn route_name(&self) -> (RouteKind, String) {
        match (&self.target, &self.vertex) {
            (Route::OfflineMock, _) => (
                RouteKind::Demo,
                "the embedded offline demo model".to_owned(),
            ),
            (Route::Bridge(url), _) => (
                RouteKind::Bridge,
                format!("a livetalk bridge at {}", bridge_host(url)),
            ),
            (Route::Google(e) | Route::Custom(e), Some(vertex)) => (
                RouteKind::Vertex,
                format!(
                    "Vertex AI at {}, project {}, location {}",
                    e.host(),
                    vertex.project,
                    vertex.location
                ),
            ),
            (Route::Google(e), None) => (
                RouteKind::Google,
                format!("Google's Gemini API at {}", e.host()),
            ),
            (Route::Custom(e), None) => (RouteKind::Endpoint, format!("the endpoint {}", e.host())),
        }
    }

    /// Where sessions go, for people to read: the host, or "offline demo model". Never a key.
    pub fn endpoint_label(&self) -> String {
        match &self.target {
            Route::Google(e) | Route::Custom(e) => e.host().to_owned(),
            Route::OfflineMock => "offline demo model".to_owned(),
            Route::Bridge(url) => bridge_host(url),
        }
    }

    /// True when the embedded mock is used.
    pub fn is_offline(&self) -> bool {
        self.target == Route::OfflineMock
    }

    /// Whether the session's connection uses TLS (and so the certificates it trusts).
    pub fn uses_tls(&self) -> bool {
        match &self.target {
            Route::Google(endpoint) | Route::Custom(endpoint) => endpoint.url().starts_with("wss:"),
            Route::Bridge(url) => url.trim().to_ascii_lowercase().starts_with("wss:"),
            Route::OfflineMock => false,
        }
    }

    /// The settings with the price book of their route: the published prices where Google
    /// bills it, and `overrides` (`[pricing."MODEL"]`) over them on any route that bills
    /// (the embedded demo model never does, whatever its model id is priced at elsewhere).
    fn priced(mut self, overrides: BTreeMap<String, PriceOverride>) -> Self {
        self.pricing = match self.target {
            Route::OfflineMock => PriceBook::default(),
            _ => PriceBook::for_host(&self.endpoint_label(), overrides),
        };
        self
    }

    /// What the session's model costs on its route. `None` for a model nobody priced there
    /// (see [`PriceBook`]).
    pub fn prices(&self) -> Option<crate::pricing::ModelPrices> {
        self.pricing.prices(&self.model)
    }
}

#[derive(Debug, Default)]
struct Merged {
    endpoint: Option<(String, String)>,
    vertex: bool,
    /// Each with where it came from.
    project: Option<(String, String)>,
    location: Option<(String, String)>,
    api_version: ApiVersion,
    model: String,
    voice: String,
    system_instruction: String,
    api_key: Option<ApiKey>,
    input_transcription: bool,
    output_transcription: bool,
    tools_enabled: Vec<String>,
    google_search: bool,
    tools_approval: BTreeMap<String, Approval>,
    tool_limits: ToolLimits,
    connect_timeout: Duration,
    turn_timeout: Duration,
    record_enabled: bool,
    record_dir: Option<PathBuf>,
    resumption: bool,
    context_compression: bool,
    reconnect_attempts: u32,
    bridge_transport: BridgeTransport,
    audio: AudioOptions,
    mcp_servers: std::collections::BTreeMap<String, ServerSpec>,
    pricing: BTreeMap<String, PriceOverride>,
}

impl Merged {
    fn sessions_dir(&self) -> PathBuf {
        self.record_dir
            .clone()
            .unwrap_or_else(|| data_dir().join("sessions"))
    }

    /// Vertex's project and location, checked: both are needed, and both go into a URL.
    fn vertex_settings(&self) -> Result<Vertex, ConfigError> {
        let take = |slot: &Option<(String, String)>, key: &str, flag: &str, var: &str| {
            let Some((value, source)) = slot else {
                return Err(ConfigError::new(
                    "--vertex",
                    key,
                    format!(
                        "Vertex AI needs a {key}: give {flag}, `{key}` in the config, or {var}"
                    ),
                ));
            };
            let fits = !value.is_empty()
                && value
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'));
            if !fits {
                return Err(ConfigError::new(
                    source,
                    key,
                    format!("{value:?} is not a Google Cloud {key} (letters, digits and -)"),
                ));
            }
            Ok(value.clone())
        };
        Ok(Vertex {
            project: take(
                &self.project,
                "project",
                "--project",
                "GOOGLE_CLOUD_PROJECT",
            )?,
            location: take(
                &self.location,
                "location",
                "--location",
                "GOOGLE_CLOUD_LOCATION",
            )?,
        })
    }

    fn apply(&mut self, layer: FileLayer, source: &str) -> Result<(), ConfigError> {
        for (model, prices) in layer.pricing.unwrap_or_default() {
            self.set_prices(&model, prices, source)?;
        }
        if let Some(v) = layer.endpoint {
            self.set_str("endpoint", v, source)?;
        }
        if let Some(v) = layer.vertex {
            self.vertex = v;
        }
        for (value, slot) in [
            (layer.project, &mut self.project),
            (layer.location, &mut self.location),
        ] {
            if let Some(value) = value.filter(|v| !v.trim().is_empty()) {
                *slot = Some((value.trim().to_owned(), source.to_owned()));
            }
        }
        if let Some(v) = layer.api_version {
            self.api_version = v;
        }
        if let Some(v) = layer.model {
            self.set_str("model", v, source)?;
        }
        if let Some(v) = layer.voice {
            self.set_str("voice", v, source)?;
        }
        if let Some(v) = layer.system_instruction {
            self.system_instruction = v;
        }
        if let Some(v) = layer.api_key {
            self.api_key = ApiKey::new(v);
        }
        if let Some(t) = layer.transcription {
            self.input_transcription = t.input.unwrap_or(self.input_transcription);
            self.output_transcription = t.output.unwrap_or(self.output_transcription);
        }
        if let Some(t) = layer.tools {
            let known = |name: &str, key: &str| {
                if BUILTIN_TOOLS.contains(&name) {
                    Ok(())
                } else {
                    Err(ConfigError::new(
                        source,
                        key,
                        format!(
                            "unknown tool {name:?}; known tools: {}",
                            BUILTIN_TOOLS.join(", ")
                        ),
                    ))
                }
            };
            if let Some(enabled) = t.enabled {
                for name in &enabled {
                    known(name, "tools.enabled")?;
                }
                self.tools_enabled = enabled;
            }
            if let Some(search) = t.google_search {
                self.google_search = search;
            }
            for (name, approval) in t.approval.unwrap_or_default() {
                known(&name, &format!("tools.approval.{name}"))?;
                self.tools_approval.insert(name, approval);
            }
            if let Some(secs) = t.timeout_secs {
                self.tool_limits.timeout = seconds(secs, source, "tools.timeout_secs")?;
            }
            if let Some(bytes) = t.max_response_bytes {
                if bytes < 1024 {
                    return Err(ConfigError::new(
                        source,
                        "tools.max_response_bytes",
                        format!("{bytes} is too small; use at least 1024"),
                    ));
                }
                self.tool_limits.max_response_bytes = bytes;
            }
        }
        if let Some(a) = layer.audio {
            let audio = &mut self.audio;
            audio.devices = a.enabled.unwrap_or(audio.devices);
            audio.push_to_talk = a.push_to_talk.unwrap_or(audio.push_to_talk);
            audio.noise_suppression = a.noise_suppression.unwrap_or(audio.noise_suppression);
            if let Some(host) = a.host {
                audio.host = audio_host(&host, source)?;
            }
            if let Some(echo) = a.echo {
                audio.echo = echo_mode(&echo, source)?;
            }
            // An empty name means the default device.
            if let Some(name) = a.input_device {
                audio.input_device = Some(name.trim().to_owned()).filter(|n| !n.is_empty());
            }
            if let Some(name) = a.output_device {
                audio.output_device = Some(name.trim().to_owned()).filter(|n| !n.is_empty());
            }
            if let Some(ms) = a.frame_ms {
                if !(20..=100).contains(&ms) {
                    return Err(ConfigError::new(
                        source,
                        "audio.frame_ms",
                        format!("{ms} is out of range; use 20 to 100"),
                    ));
                }
                audio.frame = Duration::from_millis(ms);
            }
            if let Some(ms) = a.startup_buffer_ms {
                if ms > 1000 {
                    return Err(ConfigError::new(
                        source,
                        "audio.startup_buffer_ms",
                        format!("{ms} is too long; use 0 to 1000"),
                    ));
                }
                audio.startup_buffer = Duration::from_millis(ms);
            }
            if let Some(mb) = a.output_wav_max_mb {
                audio.output_wav_max_bytes = wav_megabytes(mb, source)?;
            }
        }
        if let Some(r) = layer.record {
            self.record_enabled = r.enabled.unwrap_or(self.record_enabled);
            if let Some(dir) = r.dir.filter(|d| !d.as_os_str().is_empty()) {
                self.record_dir = Some(dir);
            }
        }
        for (name, server) in layer.mcp_servers.unwrap_or_default() {
            let spec = mcp_server(&name, server, source)?;
            self.mcp_servers.insert(name, spec);
        }
        if let Some(s) = layer.session {
            if let Some(secs) = s.connect_timeout_secs {
                self.connect_timeout = seconds(secs, source, "session.connect_timeout_secs")?;
            }
            if let Some(secs) = s.turn_timeout_secs {
                self.turn_timeout = turn_seconds(secs, source, "session.turn_timeout_secs")?;
            }
            self.resumption = s.resumption.unwrap_or(self.resumption);
            self.context_compression = s.context_compression.unwrap_or(self.context_compression);
            if let Some(attempts) = s.reconnect_attempts {
                if attempts > 100 {
                    return Err(ConfigError::new(
                        source,
                        "session.reconnect_attempts",
                        format!("{attempts} is too many; use 0 to 100"),
                    ));
                }
                self.reconnect_attempts = attempts;
            }
            if let Some(transport) = s.bridge_transport {
                self.bridge_transport =
                    BridgeTransport::parse(&transport, source, "session.bridge_transport")?;
            }
        }
        Ok(())
    }

    /// One `[pricing."MODEL"]` table, checked: a model id, and each price a number of dollars
    /// per million tokens from 0 to [`PRICE_MAX`].
    fn set_prices(
        &mut self,
        model: &str,
        prices: PriceOverride,
        source: &str,
    ) -> Result<(), ConfigError> {
        let shown = livetalk_live::excerpt::bounded(model, 80);
        let id = crate::pricing::model_id(model);
        if id.is_empty() {
            return Err(ConfigError::new(
                source,
                &format!("pricing.{shown:?}"),
                "names no model; use a model id, e.g. [pricing.\"gemini-3.8-live\"]",
            ));
        }
        for (name, value) in [
            ("text_in", prices.text_in),
            ("audio_in", prices.audio_in),
            ("video_in", prices.video_in),
            ("text_out", prices.text_out),
            ("audio_out", prices.audio_out),
        ] {
            if let Some(value) = value
                && !(0.0..=PRICE_MAX).contains(&value)
            {
                return Err(ConfigError::new(
                    source,
                    &format!("pricing.{shown:?}.{name}"),
                    format!(
                        "{value} is not a price; give US dollars per million tokens, from 0 to {PRICE_MAX}"
                    ),
                ));
            }
        }
        if !self.pricing.contains_key(id) && self.pricing.len() >= PRICED_MODELS_MAX {
            return Err(ConfigError::new(
                source,
                "pricing",
                format!(
                    "prices more than {PRICED_MODELS_MAX} models; at most {PRICED_MODELS_MAX} are taken"
                ),
            ));
        }
        let slot = self.pricing.entry(id.to_owned()).or_default();
        for (value, slot) in [
            (prices.text_in, &mut slot.text_in),
            (prices.audio_in, &mut slot.audio_in),
            (prices.video_in, &mut slot.video_in),
            (prices.text_out, &mut slot.text_out),
            (prices.audio_out, &mut slot.audio_out),
        ] {
            if value.is_some() {
                *slot = value;
            }
        }
        Ok(())
    }

    fn set_str(&mut self, key: &str, value: String, source: &str) -> Result<(), ConfigError> {
        let value = value.trim().to_owned();
        match key {
            "endpoint" => {
                if value.is_empty() {
                    return Err(ConfigError::new(source, key, "must not be empty"));
                }
                self.endpoint = Some((value, source.to_owned()));
            }
            "model" => {
                self.model =
                    model_name(&value).map_err(|e| ConfigError::new(source, key, e.to_string()))?;
            }
            "voice" => {
                let canonical = voice_name(&value).ok_or_else(|| {
                    ConfigError::new(
                        source,
                        key,
                        format!("unknown voice {value:?}; voices: {}", VOICES.join(", ")),
                    )
                })?;
                self.voice = canonical.to_owned();
            }
            "api_version" => {
                self.api_version = match value.to_ascii_lowercase().as_str() {
                    "v1" => ApiVersion::V1,
                    "v1beta" => ApiVersion::V1beta,
                    "v1alpha" => ApiVersion::V1alpha,
                    _ => {
                        return Err(ConfigError::new(
                            source,
                            key,
                            format!("{value:?} is not one of v1, v1beta, v1alpha"),
                        ));
                    }
                };
            }
            _ => unreachable!("set_str is only called with known keys"),
        }
        Ok(())
    }
}

/// One `[mcp_servers.NAME]` table as a server spec.
fn mcp_server(name: &str, layer: McpServerLayer, source: &str) -> Result<ServerSpec, ConfigError> {
    let key = |k: &str| format!("mcp_servers.{name}{k}");
    if mcp::valid_function_name(name).as_deref() != Some(name) {
        return Err(ConfigError::new(
            source,
            &key(""),
            "a server name is letters, digits, `_`, `.` and `-`, starting with a letter or `_`",
        ));
    }
    let transport = match (layer.command, layer.url) {
        (Some(command), None) => {
            if layer.bearer_token_env_var.is_some() {
                return Err(ConfigError::new(
                    source,
                    &key(".bearer_token_env_var"),
                    "only a `url` server takes a bearer token",
                ));
            }
            if command.trim().is_empty() {
                return Err(ConfigError::new(
                    source,
                    &key(".command"),
                    "must not be empty",
                ));
            }
            mcp::Transport::Stdio {
                command,
                args: layer.args,
                env: layer.env,
                cwd: layer.cwd,
            }
        }
        (None, Some(url)) => {
            // Before the URL is quoted anywhere, this error included.
            livetalk_live::redact::remember_url_credentials(&url);
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(ConfigError::new(
                    source,
                    &key(".url"),
                    format!("{url:?} must be an http:// or https:// URL"),
                ));
            }
            if !layer.args.is_empty() || !layer.env.is_empty() || layer.cwd.is_some() {
                return Err(ConfigError::new(
                    source,
                    &key(""),
                    "`args`, `env` and `cwd` are for a `command` server, not a `url` one",
                ));
            }
            mcp::Transport::Http {
                url,
                bearer_token_env_var: layer.bearer_token_env_var,
            }
        }
        (Some(_), Some(_)) => {
            return Err(ConfigError::new(
                source,
                &key(""),
                "give either `command` (a stdio server) or `url` (a streamable-HTTP server), not both",
            ));
        }
        (None, None) => {
            return Err(ConfigError::new(
                source,
                &key(""),
                "give `command` (a stdio server) or `url` (a streamable-HTTP server)",
            ));
        }
    };
    let startup_timeout = layer
        .startup_timeout_sec
        .map(|s| seconds(s, source, &key(".startup_timeout_sec")))
        .transpose()?
        .unwrap_or(mcp::DEFAULT_STARTUP_TIMEOUT);
    let tool_timeout = layer
        .tool_timeout_sec
        .map(|s| seconds(s, source, &key(".tool_timeout_sec")))
        .transpose()?;
    Ok(ServerSpec {
        name: name.to_owned(),
        transport,
        enabled: layer.enabled.unwrap_or(true),
        enabled_tools: layer.enabled_tools,
        disabled_tools: layer.disabled_tools,
        startup_timeout,
        tool_timeout,
        approval: layer.approval,
        tool_approvals: layer
            .tools
            .into_iter()
            .filter_map(|(tool, t)| t.approval.map(|a| (tool, a)))
            .collect(),
    })
}

/// `--mcp 'NAME=COMMAND ARGS…'` as a stdio server spec.
fn mcp_flag(flag: &str) -> Result<ServerSpec, ConfigError> {
    let source = "flag --mcp";
    let Some((name, command)) = flag.split_once('=') else {
        return Err(ConfigError::new(
            source,
            "mcp",
            format!("{flag:?} is not NAME=COMMAND ARGS…"),
        ));
    };
    let name = name.trim();
    if mcp::valid_function_name(name).as_deref() != Some(name) {
        return Err(ConfigError::new(
            source,
            "mcp",
            format!("{name:?} is not a server name (letters, digits, `_`, `.`, `-`)"),
        ));
    }
    let words = shlex::split(command).ok_or_else(|| {
        ConfigError::new(
            source,
            "mcp",
            format!("{command:?} has an unclosed quote or a stray backslash"),
        )
    })?;
    let Some((program, args)) = words.split_first() else {
        return Err(ConfigError::new(
            source,
            "mcp",
            format!("{flag:?} names no command after `=`"),
        ));
    };
    Ok(ServerSpec::stdio(name, program.clone(), args.to_vec()))
}

fn audio_host(value: &str, source: &str) -> Result<AudioHost, ConfigError> {
    AudioHost::parse(value).ok_or_else(|| {
        ConfigError::new(
            source,
            "audio.host",
            format!("{value:?} is not one of alsa, pulseaudio"),
        )
    })
}

/// The `--output-wav` cap in bytes: whole MiB, up to what a WAV file can hold.
fn wav_megabytes(mb: u64, source: &str) -> Result<u64, ConfigError> {
    let max_mb = livetalk_live::wav::WAV_MAX_BYTES >> 20;
    if !(1..=max_mb).contains(&mb) {
        return Err(ConfigError::new(
            source,
            "audio.output_wav_max_mb",
            format!("{mb} is out of range; use 1 to {max_mb} (MiB)"),
        ));
    }
    Ok(mb << 20)
}

fn echo_mode(value: &str, source: &str) -> Result<EchoMode, ConfigError> {
    EchoMode::parse(value).ok_or_else(|| {
        ConfigError::new(
            source,
            "audio.echo",
            format!("{value:?} is not one of aec, gate, off"),
        )
    })
}

/// Host of a bridge URL for messages (never the token in its query).
pub fn bridge_host(url: &str) -> String {
    url.parse::<tokio_tungstenite::tungstenite::http::Uri>()
        .ok()
        .and_then(|u| u.host().map(str::to_owned))
        .unwrap_or_else(|| "the bridge".to_owned())
}

fn bridge_url(url: &str, source: &str) -> Result<String, ConfigError> {
    let url = url.trim();
    let parsed: tokio_tungstenite::tungstenite::http::Uri = url
        .parse()
        .map_err(|_| ConfigError::new(source, "bridge", format!("{url:?} is not a valid URL")))?;
    match (parsed.scheme_str(), parsed.host()) {
        (Some("ws") | Some("wss"), Some(host)) if !host.is_empty() => Ok(url.to_owned()),
        _ => Err(ConfigError::new(
            source,
            "bridge",
            format!("{url:?} must be a ws:// or wss:// URL, e.g. ws://127.0.0.1:3001"),
        )),
    }
}

fn seconds(value: f64, source: &str, key: &str) -> Result<Duration, ConfigError> {
    if !(value.is_finite() && value > 0.0 && value <= 3600.0) {
        return Err(ConfigError::new(
            source,
            key,
            format!("{value} is not a number of seconds above 0 and at most 3600"),
        ));
    }
    Ok(Duration::from_secs_f64(value))
}

/// A turn timeout: as [`seconds`], but 0 means no limit (`Duration::ZERO`).
fn turn_seconds(value: f64, source: &str, key: &str) -> Result<Duration, ConfigError> {
    if value == 0.0 {
        return Ok(Duration::ZERO);
    }
    seconds(value, source, key).map_err(|mut e| {
        e.problem = format!("{value} is not a number of seconds from 0 (no limit) to 3600");
        e
    })
}

fn parse_layer(text: &str, source: &str) -> Result<FileLayer, ConfigError> {
    let deserializer = toml::Deserializer::parse(text).map_err(|e| {
        ConfigError::new(
            source,
            "(syntax)",
            e.message().to_owned() + &line_of(text, e.span()),
        )
    })?;
    serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let key = e.path().to_string();
        let inner = e.into_inner();
        let problem = inner.message().to_owned() + &line_of(text, inner.span());
        ConfigError::new(source, if key == "." { "(file)" } else { &key }, problem)
    })
}

fn line_of(text: &str, span: Option<std::ops::Range<usize>>) -> String {
    span.map(|s| {
        let line = text[..s.start.min(text.len())].matches('\n').count() + 1;
        format!(" (line {line})")
    })
    .unwrap_or_default()
}

#[cfg(test)]
mod tests;
