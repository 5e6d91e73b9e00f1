//! Command-line interface: commands and flags (clap). The API key is deliberately not a flag.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use clap_complete::engine::{ArgValueCandidates, ArgValueCompleter};

use crate::config::FlagOverrides;
use livetalk_live::ApiVersion;

/// A terminal voice console for the Gemini Live API.
///
/// With no API key and no endpoint, livetalk talks to its embedded offline demo model.
/// The API key comes from GEMINI_API_KEY (or GOOGLE_API_KEY) or the config file, never from a flag.
#[derive(Debug, Parser)]
#[command(
    name = "livetalk",
    version,
    about,
    long_about,
    after_long_help = slash_commands_help()
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub session: SessionFlags,
}

impl Cli {
    /// The command line, or clap's error for it. Beyond what clap checks: `--bridge-transport`
    /// needs `--bridge`, even beside `--offline` or `--endpoint` (clap waives a requirement
    /// that conflicts with a flag given, and `--bridge` conflicts with both).
    pub fn parse_args() -> Result<Cli, clap::Error> {
        Cli::check(Cli::try_parse()?)
    }

    fn check(cli: Cli) -> Result<Cli, clap::Error> {
        use clap::CommandFactory as _;
        if cli.session.bridge_transport.is_some() && cli.session.bridge.is_none() {
            return Err(Cli::command().error(
                clap::error::ErrorKind::MissingRequiredArgument,
                "--bridge-transport chooses how the voice travels to a bridge: it needs --bridge URL",
            ));
        }
        Ok(cli)
    }
}

/// The input line's commands, for `--help` and the man page (from the app's one table).
fn slash_commands_help() -> String {
    let mut help = String::from(
        "Commands, typed in the input line (Tab completes them) or as lines of their own with --headless:\n",
    );
    for (usage, what) in crate::app::slash_help() {
        help.push_str(&format!("  {usage:<14} {what}\n"));
    }
    help
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the embedded mock Live API server (wire-compatible with Google's service and its
    /// official software development kits, the SDKs).
    Mock(MockArgs),
    /// Serve the app-facing bridge: apps speak a simple JSON protocol over WebSocket
    /// (docs/bridge-protocol.md), the server holds the API key and one Live session per app
    /// connection.
    Serve(ServeArgs),
    /// See, flag and record any Live API app's session: a transparent proxy between an app
    /// (the official SDKs, or any WebSocket client) and the Live API. Point the app's base URL
    /// at it; each app connection is a session on screen (docs/proxy.md).
    Proxy(ProxyArgs),
    /// Replay a recorded session (`--record`): in the full-screen app, headless, or against an
    /// endpoint.
    Replay(ReplayArgs),
    /// Summarize a recorded session, or print it as a Markdown transcript.
    Inspect(InspectArgs),
    /// Check a voice agent: run recordings and scenario files (.toml) against the model, turn
    /// by turn, and report what changed (tool calls, replies, latencies). Exits 0 when all
    /// pass, 1 when some failed, 2 when a file could not be read, 3 when the model could not
    /// be reached.
    Check(crate::check::CheckArgs),
    /// List recorded sessions, newest first.
    Sessions,
    /// List audio input and output devices with their default format; * marks the defaults.
    Devices(DevicesArgs),
    /// Check what a session needs (config, key, route, network, a real connection, audio,
    /// the demo model's voice, terminal, MCP servers, data folder) and say what to do about
    /// each problem. Exits 1 when something would stop a session.
    Doctor(DoctorArgs),
    /// Print a shell completion script (bash, zsh, fish or powershell) to standard output.
    Completions(CompletionsArgs),
    /// Print livetalk's manual page (every command and flag) to standard output, for `man -l -`.
    Man,
}

#[derive(Debug, Clone, Args)]
pub struct DoctorArgs {
    /// Print the checks as one JSON object (for bug reports; secrets are never included).
    #[arg(long)]
    pub json: bool,
    /// Test the connection with the embedded offline demo model instead of the configured
    /// route.
    #[arg(long)]
    pub offline: bool,
}

#[derive(Debug, Clone, Args)]
pub struct CompletionsArgs {
    /// The shell to complete in.
    #[arg(value_enum)]
    pub shell: crate::completion::Shell,
}

#[derive(Debug, Clone, Args)]
pub struct DevicesArgs {
    /// Audio system to list (default: audio.host from the config, else alsa).
    #[arg(long, value_name = "HOST", value_parser = ["alsa", "pulseaudio"])]
    pub audio_host: Option<String>,
}

/// Flags of a conversation.
#[derive(Debug, Clone, Args)]
pub struct SessionFlags {
    /// Config file (default: ~/.config/livetalk/config.toml, or $LIVETALK_CONFIG).
    #[arg(long, value_name = "FILE", global = true)]
    pub config: Option<PathBuf>,
    /// Live API server: ws:// or wss:// base URL or full URL.
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// Use the embedded offline demo model even when an API key is set.
    #[arg(long, conflicts_with = "endpoint")]
    pub offline: bool,
    /// Talk to Vertex AI with Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS
    /// or gcloud's file); needs --project and --location (or GOOGLE_CLOUD_PROJECT and
    /// GOOGLE_CLOUD_LOCATION). An API key is then not used.
    #[arg(long, conflicts_with_all = ["offline", "bridge"])]
    pub vertex: bool,
    /// Google Cloud project for Vertex AI.
    #[arg(long, value_name = "PROJECT")]
    pub project: Option<String>,
    /// Google Cloud location for Vertex AI, e.g. us-central1 or global.
    #[arg(long, value_name = "LOCATION")]
    pub location: Option<String>,
    /// Talk through a livetalk bridge (`livetalk serve`) instead of a direct Live connection,
    /// e.g. ws://127.0.0.1:3001 (add ?token=... when the bridge has one).
    #[arg(long, value_name = "URL", conflicts_with_all = ["endpoint", "offline"])]
    pub bridge: Option<String>,
    /// How the voice travels to the bridge: `websocket` (the default) or `webrtc` (an Opus
    /// track beside the WebSocket; falls back to the WebSocket if it cannot connect). Config:
    /// session.bridge_transport; env: LIVETALK_BRIDGE_TRANSPORT.
    #[arg(long, value_name = "TRANSPORT", requires = "bridge")]
    pub bridge_transport: Option<String>,
    /// API version in the endpoint path.
    #[arg(long, value_enum, value_name = "VERSION")]
    pub api_version: Option<ApiVersionArg>,
    /// Model id, e.g. models/gemini-3.8-live.
    #[arg(long, add = ArgValueCandidates::new(crate::completion::models))]
    pub model: Option<String>,
    /// Prebuilt voice name, e.g. Puck or Kore.
    #[arg(long, add = ArgValueCandidates::new(crate::completion::voices))]
    pub voice: Option<String>,
    /// Read user turns from stdin, one per line, and print the conversation to stdout. A line
    /// that starts with / is a command (/help lists them).
    #[arg(long)]
    pub headless: bool,
    /// With --headless: print one JSON event per line.
    #[arg(long, requires = "headless")]
    pub json: bool,
    /// With --headless: seconds without a reply from the model before giving up a turn
    /// (0: no limit).
    #[arg(long, value_name = "SECS")]
    pub turn_timeout: Option<f64>,
    /// With --headless (nobody there to approve calls), for tools with no `approval` set:
    /// all runs every call; read-only runs built-ins and MCP tools their server calls
    /// read-only and refuses the rest; none refuses every MCP call. A tool set to "never"
    /// always runs; one set to "always" runs only under all. Without the flag, read-only.
    #[arg(long, value_enum, value_name = "POLICY")]
    pub approve: Option<crate::tools::ApprovePolicy>,
    /// Record the session (frames, tool calls, audio) into DIR, or into a new timestamped
    /// folder under the sessions dir when DIR is left out. A bare name (`--record bug-1234`)
    /// is a folder in the sessions dir, so `livetalk sessions` lists it and `replay` and
    /// `inspect` take the name; `./bug-1234` records here.
    #[arg(long, value_name = "DIR", num_args = 0..=1)]
    pub record: Option<Option<PathBuf>>,
    /// No microphone or speaker: text only (--input-wav / --output-wav still work).
    #[arg(long)]
    pub no_audio: bool,
    /// Audio system: alsa (default) or pulseaudio (honours PULSE_SERVER).
    #[arg(long, value_name = "HOST", value_parser = ["alsa", "pulseaudio"])]
    pub audio_host: Option<String>,
    /// Microphone by name (see `livetalk devices`); default: the system's.
    #[arg(long, value_name = "NAME")]
    pub input_device: Option<String>,
    /// Speaker by name (see `livetalk devices`); default: the system's.
    #[arg(long, value_name = "NAME")]
    pub output_device: Option<String>,
    /// Stream this WAV file as the microphone (any rate and channels; 8- to 32-bit integer
    /// or 32-bit float samples), in real time, then silence.
    #[arg(long, value_name = "FILE")]
    pub input_wav: Option<PathBuf>,
    /// Also write the model's audio to this WAV file (24 kHz mono).
    #[arg(long, value_name = "FILE")]
    pub output_wav: Option<PathBuf>,
    /// The --output-wav file stops growing at this many MiB (mebibytes, 1 to 4095; default 512, or
    /// audio.output_wav_max_mb); the rest of the audio is not written, and you are told.
    #[arg(long, value_name = "MB", requires = "output_wav")]
    pub output_wav_max_mb: Option<u64>,
    /// Push-to-talk: server voice detection off; F5 starts and ends what you say (with
    /// --input-wav, the whole clip is one utterance).
    #[arg(long)]
    pub push_to_talk: bool,
    /// How Gemini's voice is kept out of the mic: aec (acoustic echo cancellation: remove the
    /// speaker's echo from the mic, so you can talk over Gemini; default), gate (send silence
    /// while Gemini is heard) or off (headphones). F9 switches it while the session runs.
    #[arg(long, value_name = "MODE", value_parser = ["aec", "gate", "off"])]
    pub echo: Option<String>,
    /// Leave the mic's noise unsuppressed (suppression is on by default, or
    /// audio.noise_suppression).
    #[arg(long)]
    pub no_noise_suppression: bool,
    /// Add an MCP (Model Context Protocol) server, whose tools the model may call, for this
    /// run: 'NAME=COMMAND ARGS…', split like a shell (repeatable; replaces a configured server
    /// of the same name).
    #[arg(long, value_name = "NAME=COMMAND ARGS…")]
    pub mcp: Vec<String>,
    /// Turn on Google Search: the model may look things up on the web (Google bills each
    /// search), and its grounded replies list their sources. Config: [tools] google_search.
    #[arg(long)]
    pub search: bool,
    /// Share a folder of PNG or JPEG frames with the model as video: sent in name order from
    /// the session's start, one a second (each only if it changed), the last one held; /stop
    /// stops it. /screen shares the screen instead.
    #[arg(long, value_name = "PATH")]
    pub video: Option<PathBuf>,
    /// How the terminal UI draws the picture the model was shown (the preview pane): auto
    /// (ask the terminal: kitty, sixel or iTerm2 graphics, else half-blocks; default, or
    /// terminal.graphics), kitty, sixel, iterm2, halfblocks, or off (no preview).
    #[arg(long, value_name = "MODE")]
    pub graphics: Option<String>,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ApiVersionArg {
    V1,
    V1beta,
    V1alpha,
}

impl From<ApiVersionArg> for ApiVersion {
    fn from(v: ApiVersionArg) -> Self {
        match v {
            ApiVersionArg::V1 => ApiVersion::V1,
            ApiVersionArg::V1beta => ApiVersion::V1beta,
            ApiVersionArg::V1alpha => ApiVersion::V1alpha,
        }
    }
}

impl SessionFlags {
    pub fn overrides(&self) -> FlagOverrides {
        FlagOverrides {
            config: self.config.clone(),
            endpoint: self.endpoint.clone(),
            vertex: self.vertex,
            project: self.project.clone(),
            location: self.location.clone(),
            api_version: self.api_version.map(Into::into),
            model: self.model.clone(),
            voice: self.voice.clone(),
            offline: self.offline,
            bridge: self.bridge.clone(),
            bridge_transport: self.bridge_transport.clone(),
            turn_timeout_secs: self.turn_timeout,
            approve: self.approve,
            record: self.record.clone(),
            no_audio: self.no_audio,
            audio_host: self.audio_host.clone(),
            input_device: self.input_device.clone(),
            output_device: self.output_device.clone(),
            input_wav: self.input_wav.clone(),
            output_wav: self.output_wav.clone(),
            output_wav_max_mb: self.output_wav_max_mb,
            push_to_talk: self.push_to_talk,
            echo: self.echo.clone(),
            no_noise_suppression: self.no_noise_suppression,
            mcp: self.mcp.clone(),
            search: self.search,
            video: self.video.clone(),
            graphics: self.graphics.clone(),
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct MockArgs {
    /// Address to listen on; port 0 picks a free port (the URL is printed on stdout).
    #[arg(long, default_value = "127.0.0.1:9000")]
    pub listen: SocketAddr,
    /// Certificate chain (a PEM file): serve wss://, WebSocket over TLS (the official Python
    /// SDK only dials wss).
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key for --tls-cert.
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// How much faster than real time model audio is streamed (the service bursts too),
    /// from 0.01 to 1000 [default: 4]; with --replay, how much faster than recorded the
    /// recording is played [default: 1].
    #[arg(long, value_parser = speed_factor, allow_negative_numbers = true)]
    pub speed: Option<f64>,
    /// Fault scenario (TOML, or JSON for a .json file): go-away notices, drops, closes, bad frames,
    /// stalls at chosen moments. docs/mock.md describes the format.
    #[arg(long, value_name = "FILE", conflicts_with = "replay")]
    pub scenario: Option<PathBuf>,
    /// Serve a recorded session instead of the demo model: every app that connects gets the
    /// recording (a folder, its session.jsonl, or a name `livetalk sessions` lists) from its
    /// start, each of its turns answered as the recorded turn was, at the recorded pace.
    /// What an app sends that the recording does not hold is printed, one line a difference.
    #[arg(long, value_name = "RECORDING")]
    pub replay: Option<PathBuf>,
    /// With --replay: close the connection at the first difference, with 1008 and the
    /// difference as the reason, instead of going on.
    #[arg(long, requires = "replay")]
    pub strict: bool,
    /// Save the mic audio each connection sends as DIR/input-<n>.wav (16 kHz mono), to hear
    /// exactly what a client sent.
    #[arg(long, value_name = "DIR")]
    pub save_input: Option<PathBuf>,
    /// Open connections held at once; past this, new clients get HTTP 503 with the reason.
    #[arg(long, value_name = "N", default_value_t = livetalk_mock::ws_server::DEFAULT_MAX_CONNECTIONS as u32, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on. Anything but loopback requires --token.
    #[arg(long, default_value = "127.0.0.1:3001")]
    pub listen: SocketAddr,
    /// Clients must send this token (`?token=` or `Authorization: Bearer`). Also read from
    /// LIVETALK_BRIDGE_TOKEN, which keeps it out of the process list.
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Give every client the embedded offline demo model, even when an API key is set.
    #[arg(long, conflicts_with = "endpoint")]
    pub offline: bool,
    /// Live API server for the upstream sessions: ws:// or wss:// base URL or full URL.
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// API version in the upstream endpoint path.
    #[arg(long, value_enum, value_name = "VERSION")]
    pub api_version: Option<ApiVersionArg>,
    /// Largest client message in bytes (1024 to 1 GiB); larger ones are refused with
    /// GEMINI_ERROR.
    #[arg(long, value_name = "BYTES", default_value_t = crate::bridge::DEFAULT_MAX_MESSAGE_BYTES, value_parser = message_bytes, allow_negative_numbers = true)]
    pub max_message_bytes: usize,
    /// With the offline model: how much faster than real time reply audio is streamed, from
    /// 0.01 to 1000.
    #[arg(long, default_value_t = 4.0, value_parser = speed_factor, allow_negative_numbers = true)]
    pub speed: f64,
    /// Open connections held at once; past this, new clients get HTTP 503 with the reason.
    #[arg(long, value_name = "N", default_value_t = livetalk_mock::ws_server::DEFAULT_MAX_CONNECTIONS as u32, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
    /// Address announced to WebRTC apps for their audio (behind NAT or in a container),
    /// instead of the --listen address (each interface's when listening on 0.0.0.0).
    #[arg(long, value_name = "ADDR")]
    pub webrtc_ip: Option<std::net::IpAddr>,
    /// UDP port every WebRTC peer connection shares (0: a free one, chosen at start).
    #[arg(long, value_name = "PORT", default_value_t = 0)]
    pub webrtc_port: u16,
    /// On SIGTERM or POST /drain: the most seconds each session gets to finish the model's
    /// turn before it is closed anyway (1 to 3600).
    #[arg(long, value_name = "SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub drain_timeout: u64,
    /// Record every app session (recording format 4) into a folder of its own under DIR.
    #[arg(long, value_name = "DIR")]
    pub record: Option<PathBuf>,
    /// With --record: keep only the newest N recordings in DIR.
    #[arg(long, value_name = "N", requires = "record", value_parser = clap::value_parser!(u32).range(1..))]
    pub record_keep: Option<u32>,
    /// How the log on stderr is written: text, or json (one object per line, each line of a
    /// session with its id).
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

#[derive(Debug, Clone, Args)]
pub struct ProxyArgs {
    /// Address to listen on, for ws:// and wss:// alike (port 0 picks a free one). Anything
    /// but loopback requires --token.
    #[arg(long, default_value = "127.0.0.1:9100")]
    pub listen: SocketAddr,
    /// Certificate chain (a PEM file) apps are served over wss://. Without it the proxy makes
    /// a self-signed certificate for its listen address, kept in the data folder and reused,
    /// and prints its path.
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key for --tls-cert.
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Give every app the embedded offline demo model instead of Google's Live API.
    #[arg(long, conflicts_with = "endpoint")]
    pub offline: bool,
    /// The Live server apps are relayed to: ws:// or wss:// (its host and port; the app's own
    /// path goes after it). Default: Google's Live API.
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// Record each app connection (recording format 4) into a folder of its own under DIR
    /// (DIR/<time>-<n>/).
    #[arg(long, value_name = "DIR")]
    pub record: Option<PathBuf>,
    /// Flag a tool call the app has not answered after this many seconds (default: the
    /// config's [tools] timeout_secs).
    #[arg(long, value_name = "SECS", value_parser = positive_secs)]
    pub tool_timeout: Option<f64>,
    /// Flag a model turn that sent nothing for this many seconds before its turnComplete.
    #[arg(long, value_name = "SECS", default_value_t = 5.0, value_parser = positive_secs)]
    pub stall_secs: f64,
    /// Apps must send this token (`?token=` or `Authorization: Bearer`); it never goes
    /// upstream. Also read from LIVETALK_PROXY_TOKEN, which keeps it out of the process list.
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Open app connections held at once; past this, new apps get HTTP 503 with the reason.
    #[arg(long, value_name = "N", default_value_t = livetalk_mock::ws_server::DEFAULT_MAX_CONNECTIONS as u32, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
    /// No terminal UI: print each connection's conversation lines (prefixed [N]) to stdout.
    #[arg(long)]
    pub headless: bool,
    /// With --headless: one JSON object per line: per frame, per turn, per tool call, per
    /// warning, and each connection's open and close.
    #[arg(long, requires = "headless")]
    pub json: bool,
}

/// Seconds for a proxy limit: a positive finite number up to a day.
pub fn positive_secs(text: &str) -> Result<f64, String> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|secs| secs.is_finite() && *secs > 0.0 && *secs <= 86_400.0)
        .ok_or_else(|| "must be a number of seconds above 0 and at most 86400".to_owned())
}

/// How a server writes its log on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Args)]
pub struct ReplayArgs {
    /// The recording: its folder, its session.jsonl, or its name as `livetalk sessions`
    /// lists it.
    #[arg(add = ArgValueCompleter::new(crate::completion::recordings))]
    pub dir: PathBuf,
    /// Play back this many times faster than recorded, from 0.01 to 1000 (a pause longer
    /// than a minute is shown as one minute).
    #[arg(long, default_value_t = 1.0, conflicts_with = "instant", value_parser = speed_factor, allow_negative_numbers = true)]
    pub speed: f64,
    /// No pauses: apply the whole recording at once.
    #[arg(long)]
    pub instant: bool,
    /// Print what headless mode printed in the original run instead of drawing the full-screen
    /// app.
    #[arg(long)]
    pub headless: bool,
    /// With --headless or --against: print one JSON event per line.
    #[arg(long)]
    pub json: bool,
    /// Re-send the recorded typed turns to this Live endpoint (or mock), running tools
    /// locally, and print the new conversation headless.
    #[arg(long, value_name = "URL")]
    pub against: Option<String>,
    /// Don't play the recorded model audio (it is only played at the recorded pace, --speed 1).
    #[arg(long)]
    pub mute: bool,
    /// Audio system to play the model audio on: alsa or pulseaudio.
    #[arg(long, value_name = "HOST", value_parser = ["alsa", "pulseaudio"])]
    pub audio_host: Option<String>,
    /// Speaker by name (see `livetalk devices`).
    #[arg(long, value_name = "NAME")]
    pub output_device: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct InspectArgs {
    /// The recording: its folder, its session.jsonl, or its name as `livetalk sessions`
    /// lists it.
    #[arg(add = ArgValueCompleter::new(crate::completion::recordings))]
    pub dir: PathBuf,
    /// Print a Markdown transcript (tool calls with arguments and results) instead.
    #[arg(long, conflicts_with = "json")]
    pub markdown: bool,
    /// Print the report as one JSON object (each turn's figures, interruptions, tokens, cost).
    #[arg(long)]
    pub json: bool,
}

/// A `--speed`: a positive finite number from [`livetalk_mock::MIN_SPEED`] to
/// [`livetalk_mock::MAX_SPEED`]. The error is what the flag must be; `main` names the flag and
/// the value given.
pub fn speed_factor(text: &str) -> Result<f64, String> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|speed| {
            speed.is_finite()
                && (livetalk_mock::MIN_SPEED..=livetalk_mock::MAX_SPEED).contains(speed)
        })
        .ok_or_else(|| {
            format!(
                "must be a positive finite number from {} to {}",
                livetalk_mock::MIN_SPEED,
                livetalk_mock::MAX_SPEED
            )
        })
}

/// The bridge's `--max-message-bytes`: 1 KiB to 1 GiB (a smaller limit refuses every audio
/// chunk, a larger one lets one client hold gigabytes).
pub fn message_bytes(text: &str) -> Result<usize, String> {
    const MIN: usize = 1 << 10;
    const MAX: usize = 1 << 30;
    text.trim()
        .parse::<usize>()
        .ok()
        .filter(|bytes| (MIN..=MAX).contains(bytes))
        .ok_or_else(|| format!("must be a number of bytes from {MIN} to {MAX}"))
}

/// A clap error in the product's words when a flag's value was refused by one of the parsers
/// above: `--speed must be a positive finite number from 0.01 to 1000 (got 0)`. `None` for
/// every other clap error, which clap prints itself.
pub fn refused_value(error: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if error.kind() != ErrorKind::ValueValidation {
        return None;
    }
    let text = |kind| match error.get(kind) {
        Some(ContextValue::String(text)) => Some(text.clone()),
        _ => None,
    };
    let flag = text(ContextKind::InvalidArg)?;
    let flag = flag.split_whitespace().next()?.to_owned();
    let value = text(ContextKind::InvalidValue)?;
    let why = std::error::Error::source(error)?.to_string();
    Some(format!("{flag} {why} (got {value})"))
}

/// `livetalk man`: one manual page (roff) with the top level's flags and, below them, a
/// section for each command with its own synopsis, description and flags.
pub fn man_page() -> std::io::Result<Vec<u8>> {
    use clap::CommandFactory as _;
    let mut command = Cli::command();
    command.build();
    let mut top = Vec::new();
    clap_mangen::Man::new(command.clone()).render(&mut top)?;
    // clap_mangen names each command's page (`livetalk-mock(1)`), a page of its own that is
    // not installed: this one page holds them, each in a section below.
    let mut top = String::from_utf8_lossy(&top).into_owned();
    for sub in command.get_subcommands() {
        let name = sub.get_name();
        let here = if name == "help" {
            format!("livetalk {name}")
        } else {
            format!(
                "livetalk {name} (see LIVETALK {} below)",
                name.to_uppercase()
            )
        };
        top = top.replace(&format!("livetalk\\-{name}(1)"), &here);
    }
    let mut page = top.into_bytes();
    for sub in command.get_subcommands() {
        if sub.get_name() == "help" {
            continue;
        }
        let man = clap_mangen::Man::new(sub.clone());
        let mut part = Vec::new();
        man.render_synopsis_section(&mut part)?;
        man.render_description_section(&mut part)?;
        man.render_options_section(&mut part)?;
        // The command's parts become subsections of a section of its own.
        let part = String::from_utf8_lossy(&part).replace("\n.SH ", "\n.SS ");
        let part = part
            .strip_prefix(".SH ")
            .map_or(part.clone(), |rest| format!(".SS {rest}"));
        page.extend_from_slice(
            format!(".SH \"LIVETALK {}\"\n", sub.get_name().to_uppercase()).as_bytes(),
        );
        page.extend_from_slice(part.as_bytes());
    }
    Ok(page)
}
