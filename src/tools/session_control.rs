//! `end_session`: lets the model close the conversation once its goodbye has been spoken.
//!
//! The tool itself only acknowledges; the app watches for a successful outcome named
//! [`END_SESSION`](super::END_SESSION) and closes the session after the model's current turn
//! completes, so the goodbye is never cut off.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Tool, ToolError};

/// Arguments of `end_session`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct EndSessionArgs {
    /// Why the conversation is ending, e.g. 'user said goodbye' or 'task completed'.
    #[serde(default)]
    pub reason: Option<String>,
}

/// `end_session`: BLOCKING, so the model hears the acknowledgement before it finishes its turn.
pub struct EndSession;

impl Tool for EndSession {
    type Args = EndSessionArgs;

    fn name(&self) -> &'static str {
        "end_session"
    }

    fn description(&self) -> &'static str {
        "Ends the conversation. Call this when the user says goodbye, asks to stop, or the task \
         is complete; say your goodbye in the same turn. The session closes after that turn \
         has finished."
    }

    async fn call(&self, args: EndSessionArgs) -> Result<Value, ToolError> {
        let reason = args.reason.as_deref().map(str::trim).unwrap_or_default();
        let reason = livetalk_live::excerpt::bounded(reason, livetalk_live::excerpt::SUMMARY);
        tracing::info!(?reason, "model asked to end the session");
        Ok(json!({
            "success": true,
            "message": "The session will end when your current turn is complete.",
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use livetalk_live::wire::Behavior;

    #[tokio::test]
    async fn acknowledges_with_or_without_reason() -> Result<(), ToolError> {
        for args in [
            EndSessionArgs::default(),
            EndSessionArgs {
                reason: Some("user said goodbye".into()),
            },
        ] {
            let response = EndSession.call(args).await?;
            assert_eq!(response["success"], true);
            assert!(response["message"].is_string());
        }
        assert_eq!(EndSession.behavior(), Behavior::Blocking);
        Ok(())
    }
}
