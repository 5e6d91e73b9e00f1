//! The command line and the environment over the files: what each flag and variable sets.

use std::path::PathBuf;

use super::audio::{audio_host, echo_mode, wav_megabytes};
use super::route::KEY_VARS;
use super::session::BridgeTransport;
use super::{ConfigError, Merged, turn_seconds};
use crate::tools::ApprovePolicy;
use crate::tools::mcp::{self, ServerSpec};
use livetalk_live::{ApiKey, ApiVersion};

/// Reads an environment variable (injected for tests).
pub(super) type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

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
    /// `--video PATH`: a folder of frames shared from the session's start.
    pub video: Option<PathBuf>,
    /// `--graphics MODE`, as given.
    pub graphics: Option<String>,
}

/// The environment and then the flags over what the files said, in the order they were always
/// taken (so of two bad values, the same one is named). The key variable set but blank, if
/// any, comes back for the route to judge.
pub(super) fn apply(
    merged: &mut Merged,
    flags: &FlagOverrides,
    env: Env,
) -> Result<Option<&'static str>, ConfigError> {
    let blank_key_var = environment(merged, env)?;
    route_and_session(merged, flags)?;
    audio_and_transport(merged, flags, env)?;
    Ok(blank_key_var)
}

/// The route's and the session's variables, and the API key's.
fn environment(merged: &mut Merged, env: Env) -> Result<Option<&'static str>, ConfigError> {
    let set = |var: &str| env(var).filter(|v| !v.trim().is_empty());
    let source = |var: &str| format!("environment variable {var}");
    if let Some(value) = set("LIVETALK_ENDPOINT") {
        merged
            .route
            .set_endpoint(value, &source("LIVETALK_ENDPOINT"))?;
    }
    if let Some(value) = set("LIVETALK_MODEL") {
        merged
            .session
            .set_model(&value, &source("LIVETALK_MODEL"))?;
    }
    if let Some(value) = set("LIVETALK_VOICE") {
        merged
            .session
            .set_voice(&value, &source("LIVETALK_VOICE"))?;
    }
    if let Some(value) = set("LIVETALK_API_VERSION") {
        merged
            .route
            .set_api_version(&value, &source("LIVETALK_API_VERSION"))?;
    }
    for (var, slot) in [
        ("GOOGLE_CLOUD_PROJECT", &mut merged.route.project),
        ("GOOGLE_CLOUD_LOCATION", &mut merged.route.location),
    ] {
        if let Some(value) = set(var) {
            *slot = Some((value.trim().to_owned(), source(var)));
        }
    }
    let env_key = env("GEMINI_API_KEY")
        .and_then(ApiKey::new)
        .or_else(|| env("GOOGLE_API_KEY").and_then(ApiKey::new));
    if env_key.is_some() {
        merged.route.api_key = env_key;
    }
    // The variable a key is read from first, when it is set but blank: a CI secret that a
    // fork does not have arrives as "", and would otherwise send the session, unsaid, to
    // the offline demo model.
    Ok(KEY_VARS
        .into_iter()
        .find(|var| env(var).is_some())
        .filter(|var| env(var).is_some_and(|v| v.trim().is_empty())))
}

/// The route's and the session's flags.
fn route_and_session(merged: &mut Merged, flags: &FlagOverrides) -> Result<(), ConfigError> {
    if let Some(endpoint) = &flags.endpoint {
        merged
            .route
            .set_endpoint(endpoint.clone(), "flag --endpoint")?;
    }
    if let Some(version) = flags.api_version {
        merged.route.api_version = version;
    }
    if flags.vertex {
        merged.route.vertex = true;
    }
    for (flag, value, slot) in [
        ("flag --project", &flags.project, &mut merged.route.project),
        (
            "flag --location",
            &flags.location,
            &mut merged.route.location,
        ),
    ] {
        if let Some(value) = value {
            *slot = Some((value.trim().to_owned(), flag.to_owned()));
        }
    }
    if let Some(model) = &flags.model {
        merged.session.set_model(model, "flag --model")?;
    }
    if let Some(voice) = &flags.voice {
        merged.session.set_voice(voice, "flag --voice")?;
    }
    if let Some(secs) = flags.turn_timeout_secs {
        merged.session.turn_timeout =
            turn_seconds(secs, "flag --turn-timeout", "turn_timeout_secs")?;
    }
    Ok(())
}

/// The audio flags (and the audio system's variable), and how the voice travels to a bridge.
fn audio_and_transport(
    merged: &mut Merged,
    flags: &FlagOverrides,
    env: Env,
) -> Result<(), ConfigError> {
    let audio = &mut merged.audio;
    if let Some(host) = env("LIVETALK_AUDIO_HOST").filter(|v| !v.trim().is_empty()) {
        audio.host = audio_host(&host, "environment variable LIVETALK_AUDIO_HOST")?;
    }
    if let Some(host) = &flags.audio_host {
        audio.host = audio_host(host, "flag --audio-host")?;
    }
    if let Some(transport) = env("LIVETALK_BRIDGE_TRANSPORT").filter(|v| !v.trim().is_empty()) {
        merged.session.bridge_transport = BridgeTransport::parse(
            &transport,
            "environment variable LIVETALK_BRIDGE_TRANSPORT",
            "session.bridge_transport",
        )?;
    }
    if let Some(transport) = &flags.bridge_transport {
        merged.session.bridge_transport =
            BridgeTransport::parse(transport, "flag --bridge-transport", "bridge_transport")?;
    }
    if let Some(echo) = &flags.echo {
        audio.echo = echo_mode(echo, "flag --echo")?;
    }
    if let Some(graphics) = &flags.graphics {
        merged.graphics = super::terminal::graphics(graphics, "flag --graphics")?;
    }
    if flags.no_audio {
        audio.devices = false;
    }
    if flags.no_noise_suppression {
        audio.noise_suppression = false;
    }
    if flags.push_to_talk {
        audio.push_to_talk = true;
    }
    for (flag, value, slot) in [
        (
            "flag --input-device",
            &flags.input_device,
            &mut audio.input_device,
        ),
        (
            "flag --output-device",
            &flags.output_device,
            &mut audio.output_device,
        ),
    ] {
        if let Some(name) = value {
            if name.trim().is_empty() {
                return Err(ConfigError::new(flag, "device", "must not be empty"));
            }
            *slot = Some(name.trim().to_owned());
        }
    }
    audio.input_wav = flags.input_wav.clone();
    audio.output_wav = flags.output_wav.clone();
    if let Some(mb) = flags.output_wav_max_mb {
        audio.output_wav_max_bytes = wav_megabytes(mb, "flag --output-wav-max-mb")?;
    }
    Ok(())
}

/// `--mcp 'NAME=COMMAND ARGS…'` as a stdio server spec.
pub(super) fn mcp_flag(flag: &str) -> Result<ServerSpec, ConfigError> {
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
