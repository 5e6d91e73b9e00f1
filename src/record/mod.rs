//! Session recordings: the folder layout, the `session.jsonl` line types, and reading a
//! recording back (tolerating corrupted lines and WAV files cut short by a crash).

pub mod inspect;
pub mod recorder;
pub mod replay;

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::live::CloseInfo;
use crate::live::reconnect::LinkEvent;
use crate::live::wire::FunctionResponse;
use crate::tools::{Device, SlowCall, ToolEvent, ToolStatus};

pub use recorder::Recorder;

/// The log, one JSON object per line.
pub const LOG_FILE: &str = "session.jsonl";
/// Model audio as received: 24 kHz mono PCM16.
pub const MODEL_WAV: &str = "model.wav";
/// Microphone audio as sent: 16 kHz mono PCM16 (only when some was sent).
pub const MIC_WAV: &str = "mic.wav";
/// Bumped when a line changes meaning. 2: the end of the session as the app saw it is a
/// `session_ended` line, and `close` lines are the wire's only (a reconnect keeps most closes
/// from the app; in format 1 every `close` line ended the session in replay).
pub const FORMAT_VERSION: u32 = 2;

/// One line: a monotonic timestamp (seconds since the recording started) and what happened.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Line {
    pub t: f64,
    #[serde(flatten)]
    pub record: Record,
}

/// What a line records. `at` on app-level lines is the number of session events the app had
/// applied when it happened, so replay interleaves them with the frames exactly as they ran.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    /// The first line.
    Meta(Box<Meta>),
    /// A connection attempt to this host.
    Connect { host: String },
    /// The attempt failed before the session started.
    ConnectFailed { message: String },
    /// A client message as sent (audio replaced by an [`AudioRef`]).
    Send { message: Value },
    /// A server frame as received (audio replaced by an [`AudioRef`]), or why it was skipped.
    /// `setup` marks frames read while waiting for `setupComplete`.
    Recv {
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        setup: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        skipped: Option<String>,
    },
    /// The connection ended.
    Close {
        code: Option<u16>,
        reason: String,
        message: String,
        initiated_by_client: bool,
    },
    /// A typed user turn.
    UserText { text: String, at: u64 },
    /// The user (or the end of input, or `end_session`) closed the session.
    EndSession { at: u64 },
    /// A tool call finished; `response` is exactly what was sent.
    ToolResult {
        id: Option<String>,
        name: String,
        args: Value,
        /// ok, error, timed_out or panicked.
        outcome: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        duration_ms: f64,
        /// Exact, so replay prints the same durations.
        duration_ns: u64,
        response: FunctionResponse,
        truncated: bool,
        at: u64,
    },
    /// The server cancelled a running call; it was not answered.
    ToolCancelled {
        id: String,
        name: String,
        duration_ms: f64,
        duration_ns: u64,
        at: u64,
    },
    /// The smart-home devices changed.
    Devices { devices: Vec<Device>, at: u64 },
    /// An error of the run itself (e.g. a headless turn timeout).
    Error { message: String, at: u64 },
    /// The link is being replaced: `planned` after a goAway, otherwise the connection was
    /// lost; `attempt` counts failed tries and the next one starts after `retry_in`.
    Reconnecting {
        planned: bool,
        attempt: u32,
        reason: String,
        retry_in_ms: f64,
        /// Exact, so replay shows the same wait.
        retry_in_ns: u64,
        at: u64,
    },
    /// A new connection is up (`resumed` by handle; `user_turn_pending` when a reply is coming).
    Reconnected {
        resumed: bool,
        user_turn_pending: bool,
        at: u64,
    },
    /// The saved session could not be resumed; a fresh one follows.
    ResumeRejected { message: String, at: u64 },
    /// A tool answer was not sent: the connection that asked for it had ended.
    AnswerDropped {
        id: Option<String>,
        name: String,
        at: u64,
    },
    /// The watchdog saw a call run longer than expected.
    ToolSlow {
        id: Option<String>,
        name: String,
        elapsed_ms: f64,
        elapsed_ns: u64,
        at: u64,
    },
    /// The user asked to connect again after the link gave up.
    Retry { at: u64 },
    /// The session ended, as the app was told: the last connection's close, or why the link
    /// gave up reconnecting (which no `close` line says).
    SessionEnded {
        code: Option<u16>,
        reason: String,
        message: String,
        initiated_by_client: bool,
        at: u64,
    },
}

/// Metadata on the first line. Never holds the API key.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Meta {
    pub format: u32,
    pub livetalk_version: String,
    /// Local wall-clock start, RFC 3339.
    pub started_at: String,
    pub model: String,
    pub voice: String,
    /// Host name or "offline demo model".
    pub endpoint_host: String,
    pub offline: bool,
    /// Devices when the session started (later changes are `devices` lines).
    pub devices: Vec<Device>,
    /// A summary of the settings, for people.
    pub config: Value,
}

/// Where an audio payload went: samples `[sample_offset, sample_offset + sample_count)` of
/// `file`, in the recording folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AudioRef {
    pub file: String,
    pub sample_offset: u64,
    pub sample_count: u64,
}

/// A recording read back.
#[derive(Debug, Clone)]
pub struct Recording {
    pub dir: PathBuf,
    pub meta: Meta,
    /// Every readable line after the metadata, in file order.
    pub lines: Vec<Line>,
    /// Lines that could not be read, one message each.
    pub warnings: Vec<String>,
    /// Size of the folder's files in bytes.
    pub size_bytes: u64,
}

impl Recording {
    /// Reads `dir/session.jsonl`. Unreadable lines are skipped with a warning; only a missing
    /// file or a missing metadata line is an error.
    pub fn load(dir: &Path) -> anyhow::Result<Recording> {
        let path = dir.join(LOG_FILE);
        let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        // A crash can cut a line (or a UTF-8 sequence) short; read what is valid.
        let text = String::from_utf8_lossy(&bytes);
        let mut meta = None;
        let mut lines = Vec::new();
        let mut warnings = Vec::new();
        for (index, raw) in text.lines().enumerate() {
            if raw.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Line>(raw) {
                Ok(Line {
                    record: Record::Meta(m),
                    ..
                }) if meta.is_none() => meta = Some(*m),
                Ok(line) => lines.push(line),
                Err(e) => warnings.push(format!(
                    "{}: line {}: skipped an unreadable line ({e})",
                    path.display(),
                    index + 1
                )),
            }
        }
        let meta = meta.with_context(|| {
            format!(
                "{} has no metadata line; is it a livetalk recording?",
                path.display()
            )
        })?;
        Ok(Recording {
            dir: dir.to_path_buf(),
            meta,
            lines,
            warnings,
            size_bytes: folder_size(dir),
        })
    }

    /// Seconds from the start to the last line.
    pub fn duration_secs(&self) -> f64 {
        self.lines.iter().map(|l| l.t).fold(0.0, f64::max)
    }

    /// Typed user turns.
    pub fn user_turns(&self) -> usize {
        self.lines
            .iter()
            .filter(|l| matches!(l.record, Record::UserText { .. }))
            .count()
    }
}

fn folder_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// The samples of a recorded WAV file. A file whose header was not updated after the last
/// write (a crash) is repaired on read: the samples are what the file holds.
pub fn read_wav(path: &Path) -> Option<(u32, Vec<i16>)> {
    let reader = hound::WavReader::open(path).ok()?;
    let rate = reader.spec().sample_rate;
    let samples: Vec<i16> = reader.into_samples::<i16>().map_while(Result::ok).collect();
    Some((rate, samples))
}

/// The line for a tool event, `at` session events into the session.
pub fn tool_record(event: &ToolEvent, at: u64) -> Record {
    match event {
        ToolEvent::Finished(outcome) => {
            let (label, error) = match &outcome.status {
                ToolStatus::Ok => ("ok", None),
                ToolStatus::Error(message) => ("error", Some(message.clone())),
                ToolStatus::TimedOut => ("timed_out", None),
                ToolStatus::Panicked(message) => ("panicked", Some(message.clone())),
            };
            Record::ToolResult {
                id: outcome.id.clone(),
                name: outcome.name.clone(),
                args: outcome.args.clone(),
                outcome: label.to_owned(),
                error,
                duration_ms: outcome.duration.as_secs_f64() * 1000.0,
                duration_ns: nanos(outcome.duration),
                response: outcome.response.clone(),
                truncated: outcome.truncated,
                at,
            }
        }
        ToolEvent::Cancelled { id, name, duration } => Record::ToolCancelled {
            id: id.clone(),
            name: name.clone(),
            duration_ms: duration.as_secs_f64() * 1000.0,
            duration_ns: nanos(*duration),
            at,
        },
    }
}

fn nanos(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// The line for what the link told the app, `at` session events into the session.
pub fn link_record(event: &LinkEvent, at: u64) -> Record {
    match event {
        LinkEvent::Reconnecting {
            planned,
            attempt,
            reason,
            retry_in,
        } => Record::Reconnecting {
            planned: *planned,
            attempt: *attempt,
            reason: reason.clone(),
            retry_in_ms: retry_in.as_secs_f64() * 1000.0,
            retry_in_ns: nanos(*retry_in),
            at,
        },
        LinkEvent::Reconnected {
            resumed,
            user_turn_pending,
        } => Record::Reconnected {
            resumed: *resumed,
            user_turn_pending: *user_turn_pending,
            at,
        },
        LinkEvent::ResumeRejected { message } => Record::ResumeRejected {
            message: message.clone(),
            at,
        },
        LinkEvent::AnswerDropped { id, name } => Record::AnswerDropped {
            id: id.clone(),
            name: name.clone(),
            at,
        },
    }
}

/// The line for a call the watchdog flagged, `at` session events into the session.
pub fn slow_record(slow: &SlowCall, at: u64) -> Record {
    Record::ToolSlow {
        id: slow.id.clone(),
        name: slow.name.clone(),
        elapsed_ms: slow.elapsed.as_secs_f64() * 1000.0,
        elapsed_ns: nanos(slow.elapsed),
        at,
    }
}

/// The line for the end of the session as the app was told, `at` session events into it.
pub fn ended_record(close: &CloseInfo, at: u64) -> Record {
    Record::SessionEnded {
        code: close.code,
        reason: close.reason.clone(),
        message: close.message.clone(),
        initiated_by_client: close.initiated_by_client,
        at,
    }
}

#[cfg(test)]
mod tests;
