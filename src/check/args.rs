//! The flags of `livetalk check` and how they go over the session's.

use std::path::PathBuf;

use clap::Args;

use super::compare::MatchMode;
use crate::config::FlagOverrides;

#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// Recordings (a folder, its session.jsonl, or a name as `livetalk sessions` lists it)
    /// and scenario files (.toml); a folder without a session.jsonl runs every *.toml in it.
    #[arg(value_name = "PATH", required_unless_present = "write_scenario")]
    pub paths: Vec<PathBuf>,
    /// Run each file this many times (1 to 1000) and report pass rates; models are not
    /// deterministic.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: u32,
    /// The share of runs of each file that must pass, from 0 to 1.
    #[arg(long, value_name = "RATE", default_value_t = 1.0, value_parser = pass_rate, allow_negative_numbers = true)]
    pub min_pass_rate: f64,
    /// How a recording's tool calls are compared: by name and arguments, or by name only.
    #[arg(
        long = "match",
        value_enum,
        value_name = "WHAT",
        default_value = "args"
    )]
    pub r#match: MatchMode,
    /// Print one JSON event per line (turns, files, the summary).
    #[arg(long)]
    pub json: bool,
    /// Also write the results as JUnit XML to FILE, for CI.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Record every run into DIR/<file>-<n>, to replay and inspect a failure.
    #[arg(long, value_name = "DIR")]
    pub record: Option<PathBuf>,
    /// Seconds without a word from the model before a turn counts as never completed
    /// (0: no limit; default: session.turn_timeout_secs).
    #[arg(long, value_name = "SECS")]
    pub turn_timeout: Option<f64>,
    /// Print a scenario made from this recording (its typed turns, its tool calls as
    /// expectations) instead of checking anything.
    #[arg(long, value_name = "RECORDING", conflicts_with_all = ["repeat", "junit", "json", "record"])]
    pub write_scenario: Option<PathBuf>,
    /// With --write-scenario: write it to FILE.toml, and its spoken turns beside it as
    /// FILE-turnN.wav.
    #[arg(long, value_name = "FILE", requires = "write_scenario")]
    pub out: Option<PathBuf>,
    /// Live API server: ws:// or wss:// base URL or full URL.
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// Use the embedded offline demo model even when an API key is set.
    #[arg(long, conflicts_with = "endpoint")]
    pub offline: bool,
    /// Talk to Vertex AI with Application Default Credentials (see the top-level --vertex).
    #[arg(long, conflicts_with = "offline")]
    pub vertex: bool,
    /// Google Cloud project for Vertex AI.
    #[arg(long, value_name = "PROJECT")]
    pub project: Option<String>,
    /// Google Cloud location for Vertex AI.
    #[arg(long, value_name = "LOCATION")]
    pub location: Option<String>,
    /// Model id (default: a recording's own model, else the configured one).
    #[arg(long)]
    pub model: Option<String>,
    /// Add an MCP server for the runs: 'NAME=COMMAND ARGS…' (repeatable).
    #[arg(long, value_name = "NAME=COMMAND ARGS…")]
    pub mcp: Vec<String>,
    /// Turn on Google Search for the runs (see the top-level --search).
    #[arg(long)]
    pub search: bool,
}

impl CheckArgs {
    /// The session flags with this command's own on top.
    pub fn overrides(&self, mut flags: FlagOverrides) -> FlagOverrides {
        if self.endpoint.is_some() {
            flags.endpoint = self.endpoint.clone();
        }
        flags.offline |= self.offline;
        flags.vertex |= self.vertex;
        flags.project = self.project.clone().or(flags.project);
        flags.location = self.location.clone().or(flags.location);
        flags.model = self.model.clone().or(flags.model);
        flags.mcp.extend(self.mcp.iter().cloned());
        flags.search |= self.search;
        flags.turn_timeout_secs = self.turn_timeout.or(flags.turn_timeout_secs);
        // A check records only where --record says, per run.
        flags.record = None;
        flags
    }
}

/// `--min-pass-rate`: a share from 0 to 1.
pub fn pass_rate(text: &str) -> Result<f64, String> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|rate| (0.0..=1.0).contains(rate))
        .ok_or_else(|| "must be a number from 0 to 1".to_owned())
}
