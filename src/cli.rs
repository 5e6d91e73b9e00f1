//! Command-line interface: commands and flags (clap). The API key is deliberately not a flag.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::config::FlagOverrides;
use crate::live::ApiVersion;

/// A terminal voice console for the Gemini Live API.
///
/// With no API key and no endpoint, livetalk talks to its embedded offline demo model.
/// The API key comes from GEMINI_API_KEY (or GOOGLE_API_KEY) or the config file, never from a flag.
#[derive(Debug, Parser)]
#[command(name = "livetalk", version, about, long_about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub session: SessionFlags,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the embedded mock Live API (wire-compatible with the service and official SDKs).
    Mock(MockArgs),
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
    /// API version in the endpoint path.
    #[arg(long, value_enum, value_name = "VERSION")]
    pub api_version: Option<ApiVersionArg>,
    /// Model id, e.g. models/gemini-3.8-live.
    #[arg(long)]
    pub model: Option<String>,
    /// Prebuilt voice name, e.g. Puck or Kore.
    #[arg(long)]
    pub voice: Option<String>,
    /// Read user turns from stdin, one per line, and print the conversation to stdout.
    #[arg(long)]
    pub headless: bool,
    /// With --headless: print one JSON event per line.
    #[arg(long, requires = "headless")]
    pub json: bool,
    /// With --headless: seconds without a reply from the model before giving up a turn.
    #[arg(long, value_name = "SECS")]
    pub turn_timeout: Option<f64>,
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
            api_version: self.api_version.map(Into::into),
            model: self.model.clone(),
            voice: self.voice.clone(),
            offline: self.offline,
            turn_timeout_secs: self.turn_timeout,
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct MockArgs {
    /// Address to listen on; port 0 picks a free port (the URL is printed on stdout).
    #[arg(long, default_value = "127.0.0.1:9000")]
    pub listen: SocketAddr,
    /// PEM certificate chain: serve wss:// (the official Python SDK only dials wss).
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key for --tls-cert.
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// How much faster than real time model audio is streamed (the service bursts too).
    #[arg(long, default_value_t = 4.0)]
    pub speed: f64,
    /// Fault scenario (TOML, or JSON for a .json file): goAways, drops, closes, bad frames,
    /// stalls at chosen moments. See `livetalk::mock::scenario` for the format.
    #[arg(long, value_name = "FILE")]
    pub scenario: Option<PathBuf>,
}
