//! Settings: built-in defaults < user config file < environment < command-line flags.
//!
//! The defaults layer is `config.example.toml` itself, so the documented defaults cannot drift
//! from the real ones. The file's format is [`file`]'s; each of its sections has a small
//! resolver of its own (the route, the session, audio, tools, recording, pricing), and what the
//! flags and environment variables set over the files is [`flags`]'s.

mod audio;
mod file;
mod flags;
mod pricing;
mod recording;
mod route;
mod session;
mod terminal;
mod tools;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::audio::AudioOptions;
use crate::pricing::{PriceBook, PriceOverride};
use crate::tools::Approval;
use crate::tools::ApprovePolicy;
use crate::tools::ToolLimits;
use crate::tools::mcp::ServerSpec;
use file::{FileLayer, parse_layer};
use livetalk_live::{ApiKey, ApiVersion};
use pricing::PriceChoice;
use recording::RecordChoice;
use route::RouteChoice;
use session::SessionChoice;
use tools::ToolChoice;

pub use flags::FlagOverrides;
pub use recording::RecordTo;
pub use route::{Route, RouteKind, Vertex, bridge_host};
pub use session::BridgeTransport;
pub use terminal::Graphics;

// Names the configuration tests (`tests.rs`, `use super::*`) read as they always have.
#[cfg(test)]
use crate::tools::{BUILTIN_TOOLS, mcp};

/// The documented defaults, compiled in.
pub const DEFAULT_CONFIG: &str = include_str!("../config.example.toml");

/// Where the defaults layer's errors say they are.
const DEFAULTS: &str = "the built-in defaults";

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
    /// `--video PATH`: a folder of frames shared with the model from the session's start.
    pub video: Option<PathBuf>,
    /// How the terminal UI draws pictures (`--graphics`, `terminal.graphics`).
    pub graphics: Graphics,
}

/// The key of a [`ConfigError`] whose problem is the whole sentence: a file that could not
/// be read at all, a key variable set but blank.
const FILE_KEY: &str = "(reading)";

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
        merged.apply(parse_layer(DEFAULT_CONFIG, DEFAULTS)?, DEFAULTS)?;
        let config_file = file::user_file(flags.config.clone(), env)?;
        if let Some((path, text)) = &config_file {
            let source = path.display().to_string();
            merged.apply(parse_layer(text, &source)?, &source)?;
        }
        let blank_key_var = flags::apply(&mut merged, flags, env)?;
        let (target, vertex) = merged
            .route
            .resolve(flags.bridge.as_deref(), flags.offline)?;
        for flag in &flags.mcp {
            let spec = flags::mcp_flag(flag)?;
            merged.tools.mcp_servers.insert(spec.name.clone(), spec);
        }
        // A bridge holds its own key, the offline demo model needs none, Vertex AI signs in
        // with Application Default Credentials: elsewhere a blank key variable is refused.
        let uses_key = matches!(target, Route::Google(_) | Route::Custom(_))
            || (target == Route::OfflineMock && !flags.offline);
        let blank_key_var = blank_key_var.filter(|_| uses_key && vertex.is_none());
        let sessions_dir = merged.record.sessions_dir();
        let record = merged.record.record_to(&flags.record, &sessions_dir);
        let Merged {
            route,
            session,
            audio,
            tools,
            pricing,
            graphics,
            ..
        } = merged;
        Ok(Settings {
            target,
            api_key: route.api_key,
            blank_key_var,
            vertex,
            api_version: route.api_version,
            model: session.model,
            voice: session.voice,
            system_instruction: session.system_instruction,
            input_transcription: session.input_transcription,
            output_transcription: session.output_transcription,
            tools_enabled: tools.enabled,
            google_search: tools.google_search || flags.search,
            tools_approval: tools.approval,
            approve: flags.approve,
            tool_limits: tools.limits,
            connect_timeout: session.connect_timeout,
            turn_timeout: session.turn_timeout,
            resumption: session.resumption,
            context_compression: session.context_compression,
            reconnect_attempts: session.reconnect_attempts,
            bridge_transport: session.bridge_transport,
            config_file: config_file.map(|(path, _)| path),
            record,
            sessions_dir,
            audio,
            mcp_servers: tools.mcp_servers.into_values().collect(),
            pricing: PriceBook::default(),
            video: flags.video.clone(),
            graphics,
        }
        .priced(pricing.0))
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

/// The layers stacked so far, section by section.
#[derive(Debug, Default)]
struct Merged {
    route: RouteChoice,
    session: SessionChoice,
    audio: AudioOptions,
    tools: ToolChoice,
    record: RecordChoice,
    pricing: PriceChoice,
    graphics: Graphics,
}

impl Merged {
    /// One file layer over the ones before it, each section by its own resolver.
    fn apply(&mut self, mut layer: FileLayer, source: &str) -> Result<(), ConfigError> {
        self.pricing
            .apply(layer.pricing.take().unwrap_or_default(), source)?;
        self.route.apply(&mut layer, source)?;
        if let Some(v) = layer.model {
            self.session.set_model(&v, source)?;
        }
        if let Some(v) = layer.voice {
            self.session.set_voice(&v, source)?;
        }
        if let Some(v) = layer.system_instruction {
            self.session.system_instruction = v;
        }
        if let Some(v) = layer.api_key {
            self.route.api_key = ApiKey::new(v);
        }
        self.session.set_transcription(layer.transcription);
        if let Some(t) = layer.tools {
            self.tools.apply(t, source)?;
        }
        if let Some(a) = layer.audio {
            audio::apply(&mut self.audio, a, source)?;
        }
        if let Some(graphics) = layer.terminal.and_then(|t| t.graphics) {
            self.graphics = terminal::graphics(&graphics, source)?;
        }
        if let Some(r) = layer.record {
            self.record.apply(r);
        }
        self.tools
            .apply_servers(layer.mcp_servers.unwrap_or_default(), source)?;
        if let Some(s) = layer.session {
            self.session.apply(s, source)?;
        }
        Ok(())
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

#[cfg(test)]
mod tests;
