//! The config file's format: every key optional, so the defaults, the user's file and the
//! built-in example stack as layers; which file is read; and a file's errors, each naming its
//! key and line.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use super::{ConfigError, FILE_KEY};
use crate::paths::default_config_path;
use crate::pricing::PriceOverride;
use crate::tools::Approval;
use livetalk_live::ApiVersion;
use livetalk_live::file;

/// One config file layer; every key optional so layers can be stacked.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileLayer {
    pub(super) endpoint: Option<String>,
    pub(super) vertex: Option<bool>,
    pub(super) project: Option<String>,
    pub(super) location: Option<String>,
    pub(super) api_version: Option<ApiVersion>,
    pub(super) model: Option<String>,
    pub(super) voice: Option<String>,
    pub(super) system_instruction: Option<String>,
    pub(super) api_key: Option<String>,
    pub(super) transcription: Option<TranscriptionLayer>,
    pub(super) tools: Option<ToolsLayer>,
    pub(super) session: Option<SessionLayer>,
    pub(super) record: Option<RecordLayer>,
    pub(super) audio: Option<AudioLayer>,
    pub(super) terminal: Option<TerminalLayer>,
    pub(super) mcp_servers: Option<BTreeMap<String, McpServerLayer>>,
    pub(super) pricing: Option<BTreeMap<String, PriceOverride>>,
}

/// `[mcp_servers.NAME]`: a stdio server (`command`…) or a streamable-HTTP one (`url`…).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct McpServerLayer {
    pub(super) command: Option<String>,
    #[serde(default)]
    pub(super) args: Vec<String>,
    #[serde(default)]
    pub(super) env: BTreeMap<String, String>,
    pub(super) cwd: Option<PathBuf>,
    pub(super) url: Option<String>,
    pub(super) bearer_token_env_var: Option<String>,
    pub(super) enabled: Option<bool>,
    pub(super) enabled_tools: Option<Vec<String>>,
    #[serde(default)]
    pub(super) disabled_tools: Vec<String>,
    pub(super) startup_timeout_sec: Option<f64>,
    pub(super) tool_timeout_sec: Option<f64>,
    pub(super) approval: Option<Approval>,
    #[serde(default)]
    pub(super) tools: BTreeMap<String, McpToolLayer>,
}

/// `[mcp_servers.NAME.tools.TOOL]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct McpToolLayer {
    pub(super) approval: Option<Approval>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AudioLayer {
    pub(super) enabled: Option<bool>,
    pub(super) host: Option<String>,
    pub(super) input_device: Option<String>,
    pub(super) output_device: Option<String>,
    pub(super) frame_ms: Option<u64>,
    pub(super) startup_buffer_ms: Option<u64>,
    pub(super) echo: Option<String>,
    pub(super) noise_suppression: Option<bool>,
    pub(super) push_to_talk: Option<bool>,
    pub(super) output_wav_max_mb: Option<u64>,
}

/// `[terminal]`: how the terminal UI draws.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TerminalLayer {
    pub(super) graphics: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RecordLayer {
    pub(super) enabled: Option<bool>,
    pub(super) dir: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TranscriptionLayer {
    pub(super) input: Option<bool>,
    pub(super) output: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ToolsLayer {
    pub(super) enabled: Option<Vec<String>>,
    /// Declare Google Search beside the function declarations (`googleSearch`).
    pub(super) google_search: Option<bool>,
    pub(super) timeout_secs: Option<f64>,
    pub(super) max_response_bytes: Option<usize>,
    /// Per built-in tool: `"always"` (each call waits for the user) or `"never"`.
    pub(super) approval: Option<BTreeMap<String, Approval>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SessionLayer {
    /// Everything from the host look-up to the setup answer (once `setup_timeout_secs`).
    #[serde(alias = "setup_timeout_secs")]
    pub(super) connect_timeout_secs: Option<f64>,
    pub(super) turn_timeout_secs: Option<f64>,
    pub(super) resumption: Option<bool>,
    pub(super) context_compression: Option<bool>,
    pub(super) reconnect_attempts: Option<u32>,
    pub(super) bridge_transport: Option<String>,
}

/// The user's config file and its text: the one `--config` or `LIVETALK_CONFIG` names, else
/// the default one when it is there.
pub(super) fn user_file(
    explicit: Option<PathBuf>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<(PathBuf, String)>, ConfigError> {
    let explicit = explicit.or_else(|| {
        env("LIVETALK_CONFIG")
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
    });
    let unreadable = |path: &std::path::Path, e: file::FileError| {
        ConfigError::new(&path.display().to_string(), FILE_KEY, e.to_string())
    };
    Ok(match explicit {
        Some(path) => {
            let text =
                file::read_text(&path, file::FileKind::CONFIG).map_err(|e| unreadable(&path, e))?;
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
    })
}

pub(super) fn parse_layer(text: &str, source: &str) -> Result<FileLayer, ConfigError> {
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
