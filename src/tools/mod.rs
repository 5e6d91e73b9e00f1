//! Local tools the model may call: the `Tool` trait, its limits and errors, and the built-in set.
//!
//! A tool is a typed handler (`Tool::Args` is deserialized from the model's JSON and also
//! describes itself to the model through schemars), or one an MCP server offers ([`mcp`]).
//! The [`Registry`] erases the types and owns
//! the declarations; the [`ToolDispatcher`] owns the answering rules (timeouts, panics,
//! cancellation, truncation, exactly one answer per call), so a tool only has to do its job.

mod approval;
mod clock;
mod dispatch;
pub mod mcp;
mod progress;
mod registry;
mod schema;
mod session_control;
mod smart_home;

use std::future::Future;
use std::time::Duration;

use livetalk_live::wire::{Behavior, Scheduling};

pub use approval::{Approval, ApprovePolicy, Decider, Decision, Gate, Hints, Origin, Unasked};
pub use clock::{GetCurrentTime, NoArgs, time_report};
pub use dispatch::{
    CallKey, KeyedCall, ProgressReport, SlowCall, ToolDispatcher, ToolEvent, ToolOutcome,
    ToolStatus, Verdict, WaitingCall, in_tool_handler, slow_after,
};
pub use progress::CallProgress;
pub use registry::{GOOGLE_SEARCH, RegisterError, Registry, ToolEntry};
pub use schema::{SchemaError, normalize_foreign, normalize_schema, parameters_for};
pub use session_control::{EndSession, EndSessionArgs};
pub use smart_home::{
    COLOR_NAMES, Device, DeviceKind, GetDeviceStatus, GetDeviceStatusArgs, SetDeviceStatus,
    SetDeviceStatusArgs, SetReport, Setting, SmartHome, TEMPERATURE_RANGE_CELSIUS,
};

/// A function the model can call, with typed arguments.
pub trait Tool: Send + Sync + 'static {
    /// The arguments; their JSON Schema (doc comments included) is what the model sees.
    type Args: serde::de::DeserializeOwned + schemars::JsonSchema + Send + 'static;

    /// The function name the model calls; unique within a registry.
    fn name(&self) -> &'static str;

    /// Tells the model what the tool does and when to call it.
    fn description(&self) -> &'static str;

    /// Whether the model waits for the result (BLOCKING) or carries on talking.
    fn behavior(&self) -> Behavior {
        Behavior::Blocking
    }

    /// Scheduling put on responses of NON_BLOCKING tools (ignored for BLOCKING ones).
    fn scheduling(&self) -> Scheduling {
        Scheduling::WhenIdle
    }

    /// Runs the tool. A non-object result is wrapped as `{"result": value}` by the dispatcher.
    fn call(
        &self,
        args: Self::Args,
    ) -> impl Future<Output = Result<serde_json::Value, ToolError>> + Send;
}

/// Why a tool call failed; the `Display` text is what the model is told.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// The arguments were well-formed but not acceptable (unknown device, value out of range…).
    #[error("{0}")]
    InvalidInput(String),
    /// The tool could not do its job.
    #[error("{0}")]
    Failed(String),
}

impl ToolError {
    /// An error about the caller's input.
    pub fn invalid(message: impl Into<String>) -> Self {
        ToolError::InvalidInput(message.into())
    }

    /// An error about the tool itself.
    pub fn failed(message: impl Into<String>) -> Self {
        ToolError::Failed(message.into())
    }

    /// The human message.
    pub fn message(&self) -> &str {
        match self {
            ToolError::InvalidInput(m) | ToolError::Failed(m) => m,
        }
    }
}

/// Limits the dispatcher enforces on every call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolLimits {
    /// How long a handler may run before it is stopped and answered with an error.
    pub timeout: Duration,
    /// Largest serialized JSON `response` sent back; bigger ones are replaced by a preview.
    pub max_response_bytes: usize,
}

impl Default for ToolLimits {
    fn default() -> Self {
        ToolLimits {
            timeout: Duration::from_secs(10),
            max_response_bytes: 16 * 1024,
        }
    }
}

/// All built-in tool names, in a stable order.
pub const BUILTIN_TOOLS: &[&str] = &[
    "get_device_status",
    "set_device_status",
    "get_current_time",
    "end_session",
];

/// Name of the tool whose successful outcome tells the app to close the session.
pub const END_SESSION: &str = "end_session";

/// Registry with the named built-ins enabled; an unknown name is an error naming it and listing
/// the valid ones. Names repeated in `enabled` are registered once.
pub fn builtin_registry(
    enabled: &[String],
    limits: ToolLimits,
    home: SmartHome,
) -> Result<Registry, anyhow::Error> {
    let mut registry = Registry::new(limits);
    for name in enabled {
        let name = name.trim();
        if registry.contains(name) {
            continue;
        }
        let registered = match name {
            "get_device_status" => registry.try_register(GetDeviceStatus::new(home.clone())),
            "set_device_status" => registry.try_register(SetDeviceStatus::new(home.clone())),
            "get_current_time" => registry.try_register(GetCurrentTime),
            END_SESSION => registry.try_register(EndSession),
            unknown => anyhow::bail!(
                "unknown tool \"{unknown}\"; valid tools are: {}",
                BUILTIN_TOOLS.join(", ")
            ),
        };
        registered?;
    }
    Ok(registry)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> Vec<String> {
        BUILTIN_TOOLS.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn builtin_declarations_snapshot() -> anyhow::Result<()> {
        let registry = builtin_registry(&all(), ToolLimits::default(), SmartHome::new())?;
        insta::assert_json_snapshot!("builtin_declarations", registry.declarations());
        Ok(())
    }

    #[test]
    fn builtin_names_match_the_constant() -> anyhow::Result<()> {
        let registry = builtin_registry(&all(), ToolLimits::default(), SmartHome::new())?;
        let mut expected: Vec<&str> = BUILTIN_TOOLS.to_vec();
        expected.sort_unstable();
        assert_eq!(registry.names(), expected);
        assert!(BUILTIN_TOOLS.contains(&END_SESSION));
        Ok(())
    }

    #[test]
    fn unknown_builtin_is_named_and_valid_ones_listed() {
        let enabled = vec!["get_current_time".to_owned(), "make_coffee".to_owned()];
        let Err(error) = builtin_registry(&enabled, ToolLimits::default(), SmartHome::new()) else {
            panic!("an unknown tool name must be rejected");
        };
        let message = error.to_string();
        assert!(message.contains("\"make_coffee\""), "{message}");
        for name in BUILTIN_TOOLS {
            assert!(message.contains(name), "{message} should list {name}");
        }
    }

    #[test]
    fn subset_and_duplicates_register_once() -> anyhow::Result<()> {
        let enabled = vec![
            "end_session".to_owned(),
            "get_current_time".to_owned(),
            "end_session".to_owned(),
        ];
        let registry = builtin_registry(&enabled, ToolLimits::default(), SmartHome::new())?;
        assert_eq!(registry.names(), vec!["end_session", "get_current_time"]);
        Ok(())
    }

    #[test]
    fn empty_selection_gives_empty_registry() -> anyhow::Result<()> {
        let registry = builtin_registry(&[], ToolLimits::default(), SmartHome::new())?;
        assert!(registry.names().is_empty());
        assert!(registry.declarations().is_empty());
        Ok(())
    }

    #[test]
    fn default_limits() {
        let limits = ToolLimits::default();
        assert_eq!(limits.timeout, Duration::from_secs(10));
        assert_eq!(limits.max_response_bytes, 16384);
    }

    #[test]
    fn tool_error_displays_its_message() {
        assert_eq!(
            ToolError::invalid("no such lamp").to_string(),
            "no such lamp"
        );
        assert_eq!(ToolError::failed("broken").message(), "broken");
    }
}
