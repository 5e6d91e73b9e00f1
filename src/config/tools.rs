//! The `[tools]` table (which built-in tools, their approval and limits) and the
//! `[mcp_servers.NAME]` tables.

use std::collections::BTreeMap;

use super::file::{McpServerLayer, ToolsLayer};
use super::{ConfigError, seconds};
use crate::tools::mcp::{self, ServerSpec};
use crate::tools::{Approval, BUILTIN_TOOLS, ToolLimits};

/// What the layers said of the tools so far.
#[derive(Debug, Default)]
pub(super) struct ToolChoice {
    pub(super) enabled: Vec<String>,
    /// `[tools] google_search`.
    pub(super) google_search: bool,
    pub(super) approval: BTreeMap<String, Approval>,
    pub(super) limits: ToolLimits,
    /// By name: a later layer's server replaces an earlier one's.
    pub(super) mcp_servers: BTreeMap<String, ServerSpec>,
}

impl ToolChoice {
    /// One layer's `[tools]` table.
    pub(super) fn apply(&mut self, t: ToolsLayer, source: &str) -> Result<(), ConfigError> {
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
            self.enabled = enabled;
        }
        if let Some(search) = t.google_search {
            self.google_search = search;
        }
        for (name, approval) in t.approval.unwrap_or_default() {
            known(&name, &format!("tools.approval.{name}"))?;
            self.approval.insert(name, approval);
        }
        if let Some(secs) = t.timeout_secs {
            self.limits.timeout = seconds(secs, source, "tools.timeout_secs")?;
        }
        if let Some(bytes) = t.max_response_bytes {
            if bytes < 1024 {
                return Err(ConfigError::new(
                    source,
                    "tools.max_response_bytes",
                    format!("{bytes} is too small; use at least 1024"),
                ));
            }
            self.limits.max_response_bytes = bytes;
        }
        Ok(())
    }

    /// One layer's `[mcp_servers.NAME]` tables.
    pub(super) fn apply_servers(
        &mut self,
        servers: BTreeMap<String, McpServerLayer>,
        source: &str,
    ) -> Result<(), ConfigError> {
        for (name, server) in servers {
            let spec = mcp_server(&name, server, source)?;
            self.mcp_servers.insert(name, spec);
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
