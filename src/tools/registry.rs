//! The set of enabled tools, type-erased behind one object-safe trait, and their declarations.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::Value;

use super::approval::{Approval, Gate};
use super::schema::{SchemaError, parameters_for};
use super::{Tool, ToolError, ToolLimits};
use crate::live::wire::{Behavior, FunctionDeclaration, Scheduling};

/// Why a tool could not be added to a registry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegisterError {
    #[error("tool \"{0}\" is registered twice")]
    Duplicate(&'static str),
    #[error("tool \"{name}\" has arguments Gemini cannot describe: {source}")]
    Schema {
        name: &'static str,
        #[source]
        source: SchemaError,
    },
}

/// A handler future that owns everything it needs, so it can run in its own task.
pub(crate) type HandlerFuture = BoxFuture<'static, Result<Value, ToolError>>;

/// The object-safe face of a [`Tool`].
pub(crate) trait DynTool: Send + Sync {
    fn name(&self) -> &'static str;
    fn description(&self) -> &'static str;
    fn behavior(&self) -> Behavior;
    fn scheduling(&self) -> Scheduling;
    fn parameters(&self) -> Option<&Value>;
    /// Deserializes the arguments and returns the call, or a message naming the bad argument.
    fn prepare(&self, args: Value) -> Result<HandlerFuture, String>;
}

struct Erased<T: Tool> {
    tool: Arc<T>,
    parameters: Option<Value>,
}

impl<T: Tool> DynTool for Erased<T> {
    fn name(&self) -> &'static str {
        self.tool.name()
    }

    fn description(&self) -> &'static str {
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

    fn prepare(&self, args: Value) -> Result<HandlerFuture, String> {
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

/// The enabled tools, keyed (and therefore declared) by name.
pub struct Registry {
    tools: BTreeMap<&'static str, Arc<dyn DynTool>>,
    /// Approval settings configured for tools, by name; a tool without one has its default.
    approvals: BTreeMap<String, Approval>,
    limits: ToolLimits,
}

impl Registry {
    pub fn new(limits: ToolLimits) -> Self {
        Registry {
            tools: BTreeMap::new(),
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
            return Err(RegisterError::Duplicate(name));
        }
        let parameters =
            parameters_for::<T::Args>().map_err(|source| RegisterError::Schema { name, source })?;
        let erased = Erased {
            tool: Arc::new(tool),
            parameters,
        };
        self.tools.insert(name, Arc::new(erased));
        Ok(())
    }

    /// The `functionDeclarations` for `setup.tools`, sorted by name.
    pub fn declarations(&self) -> Vec<FunctionDeclaration> {
        self.tools
            .values()
            .map(|tool| FunctionDeclaration {
                name: tool.name().to_owned(),
                description: Some(tool.description().to_owned()),
                parameters: tool.parameters().cloned(),
                parameters_json_schema: None,
                behavior: Some(tool.behavior()),
            })
            .collect()
    }

    /// Registered tool names, sorted.
    pub fn names(&self) -> Vec<&'static str> {
        self.tools.keys().copied().collect()
    }

    /// Sets whether calls of the tool named `name` wait for the user.
    pub fn set_approval(&mut self, name: &str, approval: Approval) {
        self.approvals.insert(name.to_owned(), approval);
    }

    /// The origin and approval of the tool named `name`.
    pub fn gate(&self, name: &str) -> Gate {
        Gate::built_in(self.approvals.get(name).copied())
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
            Err(RegisterError::Duplicate("ping"))
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
        let result = echo.prepare(json!({"text": "ab", "times": 2}))?.await;
        assert_eq!(result, Ok(json!("abab")));

        let Err(message) = echo.prepare(json!({"text": 5})) else {
            return Err("a number is not text".into());
        };
        assert!(message.contains("`text`"), "{message}");
        assert!(message.contains("expected a string"), "{message}");

        let Err(message) = echo.prepare(json!({})) else {
            return Err("text is required".into());
        };
        assert!(message.contains("missing field `text`"), "{message}");

        let Some(ping) = registry.get("ping") else {
            return Err("ping missing".into());
        };
        assert_eq!(ping.prepare(Value::Null)?.await, Ok(json!("pong")));
        Ok(())
    }
}
