//! The set of enabled tools, type-erased behind one object-safe trait, and their declarations.
//!
//! Built-ins are typed [`Tool`]s; MCP tools arrive at run time with a name, a description and
//! a raw JSON Schema. Both become a [`DynTool`], so the dispatcher treats them alike.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::Value;

use super::approval::{Approval, Gate, Origin, Unasked};
use super::progress::CallProgress;
use super::schema::{SchemaError, parameters_for};
use super::{Tool, ToolError, ToolLimits};
use livetalk_live::wire::{Behavior, FunctionDeclaration, Scheduling};

/// Why a tool could not be added to a registry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegisterError {
    #[error("tool \"{0}\" is registered twice")]
    Duplicate(String),
    #[error("tool \"{name}\" has arguments Gemini cannot describe: {source}")]
    Schema {
        name: String,
        #[source]
        source: SchemaError,
    },
}

/// A handler future that owns everything it needs, so it can run in its own task.
pub(crate) type HandlerFuture = BoxFuture<'static, Result<Value, ToolError>>;

/// The object-safe face of a tool, typed or not.
pub(crate) trait DynTool: Send + Sync {
    fn name(&self) -> &str;
    fn description(&self) -> &str;
    fn behavior(&self) -> Behavior {
        Behavior::Blocking
    }
    fn scheduling(&self) -> Scheduling {
        Scheduling::WhenIdle
    }
    fn parameters(&self) -> Option<&Value>;
    /// Where the tool comes from and whether its calls wait for the user, given the approval
    /// configured for it by name (if any).
    fn gate(&self, configured: Option<Approval>) -> Gate {
        Gate::built_in(configured)
    }
    /// Its own time limit, when it has one (an MCP server's `tool_timeout_sec`).
    fn timeout(&self) -> Option<Duration> {
        None
    }
    /// Checks the arguments and returns the call, or a message naming the bad argument.
    /// `progress` reports how far the call has come, while it runs.
    fn prepare(&self, args: Value, progress: CallProgress) -> Result<HandlerFuture, String>;
}

struct Erased<T: Tool> {
    tool: Arc<T>,
    parameters: Option<Value>,
}

impl<T: Tool> DynTool for Erased<T> {
    fn name(&self) -> &str {
        self.tool.name()
    }

    fn description(&self) -> &str {
        self.tool.description()
    }

    fn behavior(&self) -> Behavior {
        self.tool.behavior()
    }

    fn scheduling(&self) -> Scheduling {
        self.tool.scheduling()
    }

    fn parameters(&self) -> Option<&Value> {
        self.parameters.as_ref()
    }

    fn prepare(&self, args: Value, _progress: CallProgress) -> Result<HandlerFuture, String> {
        // Models send `null` or nothing for zero-argument functions.
        let args = if args.is_null() {
            Value::Object(serde_json::Map::new())
        } else {
            args
        };
        let args: T::Args = serde_path_to_error::deserialize(args).map_err(|error| {
            let path = error.path().to_string();
            let reason = error.into_inner();
            if path == "." {
                format!("invalid arguments for {}: {reason}", self.tool.name())
            } else {
                format!(
                    "invalid arguments for {}: argument `{path}`: {reason}",
                    self.tool.name()
                )
            }
        })?;
        let tool = Arc::clone(&self.tool);
        Ok(Box::pin(async move { tool.call(args).await }))
    }
}

/// One tool as the user sees it in the tool list.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ToolEntry {
    /// The name it is declared (and called) by.
    pub name: String,
    /// `None` for a built-in, else the MCP server it comes from.
    pub server: Option<String>,
    pub description: String,
    /// False when the user turned it off for this session.
    pub enabled: bool,
    /// Why its calls run without asking the person at the TUI; `None` when they ask.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unasked: Option<Unasked>,
}

impl ToolEntry {
    /// True for Google Search: declared like a tool, but run by the service, not here.
    pub fn runs_at_google(&self) -> bool {
        self.server.is_none() && self.name == GOOGLE_SEARCH
    }
}

/// The name Google Search goes by in the tool list (and the config key that turns it on). No
/// MCP tool takes it while Search is declared: such a tool gets its server's prefix.
pub const GOOGLE_SEARCH: &str = "google_search";

/// What the tool list says of Google Search.
const GOOGLE_SEARCH_DESCRIPTION: &str = "Google Search: the model looks things up on the web. Google runs each search (and bills it), and a grounded reply lists the sources it drew on.";

/// The enabled tools, keyed (and therefore declared) by name.
#[derive(Clone)]
pub struct Registry {
    tools: BTreeMap<String, Arc<dyn DynTool>>,
    /// Tools the user turned off for this session: not declared, and refused if called.
    disabled: BTreeSet<String>,
    /// Approval settings configured for tools, by name; a tool without one has its default.
    approvals: BTreeMap<String, Approval>,
    limits: ToolLimits,
    /// Google Search is declared beside the functions (unless the user turned it off).
    google_search: bool,
}

impl Registry {
    pub fn new(limits: ToolLimits) -> Self {
        Registry {
            google_search: false,
            tools: BTreeMap::new(),
            disabled: BTreeSet::new(),
            approvals: BTreeMap::new(),
            limits,
        }
    }

    /// Adds a tool.
    ///
    /// # Panics
    /// If the name is taken or the argument type has no Gemini schema; both are bugs in the
    /// tool's code, not in anything the user or the model did. Use [`Registry::try_register`]
    /// to handle them instead.
    pub fn register<T: Tool>(&mut self, tool: T) {
        if let Err(error) = self.try_register(tool) {
            panic!("{error}");
        }
    }

    /// Adds a tool, or says why it cannot be declared to the model.
    pub fn try_register<T: Tool>(&mut self, tool: T) -> Result<(), RegisterError> {
        let name = tool.name();
        if self.tools.contains_key(name) {
            return Err(RegisterError::Duplicate(name.to_owned()));
        }
        let parameters = parameters_for::<T::Args>().map_err(|source| RegisterError::Schema {
            name: name.to_owned(),
            source,
        })?;
        let erased = Erased {
            tool: Arc::new(tool),
            parameters,
        };
        self.tools.insert(name.to_owned(), Arc::new(erased));
        Ok(())
    }

    /// Adds a tool that is known only at run time (an MCP server's).
    pub(crate) fn insert(&mut self, tool: Arc<dyn DynTool>) -> Result<(), RegisterError> {
        let name = tool.name().to_owned();
        if self.tools.contains_key(&name) {
            return Err(RegisterError::Duplicate(name));
        }
        self.tools.insert(name, tool);
        Ok(())
    }

    /// The `functionDeclarations` for `setup.tools`, sorted by name; tools turned off are left
    /// out.
    pub fn declarations(&self) -> Vec<FunctionDeclaration> {
        self.tools
            .values()
            .filter(|tool| !self.disabled.contains(tool.name()))
            .map(|tool| FunctionDeclaration {
                name: tool.name().to_owned(),
                description: Some(tool.description().to_owned()),
                parameters: tool.parameters().cloned(),
                parameters_json_schema: None,
                behavior: Some(tool.behavior()),
            })
            .collect()
    }

    /// Registered tool names, sorted (those turned off included).
    pub fn names(&self) -> Vec<&str> {
        self.tools.keys().map(String::as_str).collect()
    }

    /// Declares Google Search beside the functions (`googleSearch`), or not. It is listed with
    /// the tools under [`GOOGLE_SEARCH`], and turned off and on by that name.
    pub fn declare_google_search(&mut self, on: bool) {
        self.google_search = on;
    }

    /// True when Google Search is declared and the user has not turned it off.
    pub fn google_search(&self) -> bool {
        self.google_search && !self.disabled.contains(GOOGLE_SEARCH)
    }

    /// The names no other tool may be declared under: the registered ones, and Google
    /// Search's while it is listed.
    pub fn reserved_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.tools.keys().cloned().collect();
        if self.google_search {
            names.push(GOOGLE_SEARCH.to_owned());
        }
        names
    }

    /// Every tool with its origin and whether it is on, sorted by name; Google Search among
    /// them when it is declared.
    pub fn entries(&self) -> Vec<ToolEntry> {
        let search = self.google_search.then(|| ToolEntry {
            name: GOOGLE_SEARCH.to_owned(),
            server: None,
            description: GOOGLE_SEARCH_DESCRIPTION.to_owned(),
            enabled: self.google_search(),
            // Nobody is asked: nothing runs here.
            unasked: Some(Unasked::BuiltIn),
        });
        let mut entries: Vec<ToolEntry> = self
            .tools
            .values()
            .map(|tool| {
                let gate = self.gate(tool.name());
                ToolEntry {
                    name: tool.name().to_owned(),
                    unasked: gate.unasked_in_person(),
                    server: match gate.origin {
                        Origin::BuiltIn => None,
                        Origin::Mcp(server) => Some(server),
                    },
                    description: tool.description().to_owned(),
                    enabled: !self.disabled.contains(tool.name()),
                }
            })
            .chain(search)
            .collect();
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        entries
    }

    /// Turns the tool named `name` on or off for this session (a name not registered now is
    /// remembered, for a server that comes back).
    pub fn set_enabled(&mut self, name: &str, enabled: bool) {
        if enabled {
            self.disabled.remove(name);
        } else {
            self.disabled.insert(name.to_owned());
        }
    }

    /// False when the user turned the tool off.
    pub fn is_enabled(&self, name: &str) -> bool {
        !self.disabled.contains(name)
    }

    /// Sets whether calls of the tool named `name` wait for the user.
    pub fn set_approval(&mut self, name: &str, approval: Approval) {
        self.approvals.insert(name.to_owned(), approval);
    }

    /// The origin and approval of the tool named `name`.
    pub fn gate(&self, name: &str) -> Gate {
        let configured = self.approvals.get(name).copied();
        match self.tools.get(name) {
            Some(tool) => tool.gate(configured),
            None => Gate::built_in(configured),
        }
    }

    pub fn limits(&self) -> ToolLimits {
        self.limits
    }

    pub fn contains(&self, name: &str) -> bool {
        self.tools.contains_key(name)
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    pub(crate) fn get(&self, name: &str) -> Option<Arc<dyn DynTool>> {
        self.tools.get(name).cloned()
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("tools", &self.names())
            .field("disabled", &self.disabled)
            .field("google_search", &self.google_search)
            .field("limits", &self.limits)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use schemars::JsonSchema;
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    #[derive(Deserialize, JsonSchema)]
    struct EchoArgs {
        /// Text to echo.
        text: String,
        /// How often.
        times: Option<u32>,
    }

    struct Echo;

    impl Tool for Echo {
        type Args = EchoArgs;
        fn name(&self) -> &'static str {
            "echo"
        }
        fn description(&self) -> &'static str {
            "Echoes text."
        }
        fn behavior(&self) -> Behavior {
            Behavior::NonBlocking
        }
        async fn call(&self, args: EchoArgs) -> Result<Value, ToolError> {
            Ok(json!(args.text.repeat(args.times.unwrap_or(1) as usize)))
        }
    }

    #[derive(Deserialize, JsonSchema)]
    struct NoArgs {}

    struct Ping;

    impl Tool for Ping {
        type Args = NoArgs;
        fn name(&self) -> &'static str {
            "ping"
        }
        fn description(&self) -> &'static str {
            "Pings."
        }
        async fn call(&self, _args: NoArgs) -> Result<Value, ToolError> {
            Ok(json!("pong"))
        }
    }

    #[test]
    fn declarations_are_sorted_normalised_and_carry_behavior() {
        let mut registry = Registry::new(ToolLimits::default());
        registry.register(Ping);
        registry.register(Echo);
        let declarations = registry.declarations();
        let names: Vec<_> = declarations.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["echo", "ping"]);
        assert_eq!(declarations[0].behavior, Some(Behavior::NonBlocking));
        assert_eq!(declarations[1].behavior, Some(Behavior::Blocking));
        assert_eq!(declarations[0].description.as_deref(), Some("Echoes text."));
        let Some(params) = &declarations[0].parameters else {
            panic!("echo takes arguments");
        };
        assert_eq!(params["required"], json!(["text"]));
        // u32 is "uint32" in schemars, which Gemini refuses.
        assert!(
            params["properties"]["times"].get("format").is_none(),
            "{params}"
        );
        assert!(declarations[1].parameters.is_none());
        assert!(
            declarations
                .iter()
                .all(|d| d.parameters_json_schema.is_none())
        );
    }

    #[test]
    fn duplicate_names_are_refused() {
        let mut registry = Registry::new(ToolLimits::default());
        assert_eq!(registry.try_register(Ping), Ok(()));
        assert_eq!(
            registry.try_register(Ping),
            Err(RegisterError::Duplicate("ping".to_owned()))
        );
        assert_eq!(registry.len(), 1);
    }

    #[tokio::test]
    async fn prepare_deserializes_and_names_bad_arguments() -> Result<(), String> {
        let mut registry = Registry::new(ToolLimits::default());
        registry.register(Echo);
        registry.register(Ping);
        let Some(echo) = registry.get("echo") else {
            return Err("echo missing".into());
        };
        let result = echo
            .prepare(json!({"text": "ab", "times": 2}), CallProgress::none())?
            .await;
        assert_eq!(result, Ok(json!("abab")));

        let Err(message) = echo.prepare(json!({"text": 5}), CallProgress::none()) else {
            return Err("a number is not text".into());
        };
        assert!(message.contains("`text`"), "{message}");
        assert!(message.contains("expected a string"), "{message}");

        let Err(message) = echo.prepare(json!({}), CallProgress::none()) else {
            return Err("text is required".into());
        };
        assert!(message.contains("missing field `text`"), "{message}");

        let Some(ping) = registry.get("ping") else {
            return Err("ping missing".into());
        };
        assert_eq!(
            ping.prepare(Value::Null, CallProgress::none())?.await,
            Ok(json!("pong"))
        );
        Ok(())
    }
}
