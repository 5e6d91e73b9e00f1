//! One MCP server's tool as the registry sees it, and a call's result made readable to the
//! model.
//!
//! A call goes out as a cancellable `tools/call`; when the dispatcher drops it (the model
//! cancelled it, or it timed out) a guard sends the server `notifications/cancelled`.

use std::sync::{Arc, PoisonError};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotification, CancelledNotificationParam,
    ClientNotification, ClientRequest, ProgressToken, RequestId, ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient, ServiceError};
use serde_json::{Map, Value, json};

use super::listing::Listed;
use super::{Server, words};
use crate::tools::approval::{Approval, Gate, Hints};
use crate::tools::registry::{DynTool, HandlerFuture};
use crate::tools::{CallProgress, ToolError};
use livetalk_live::excerpt::{SUMMARY, bounded};

pub(super) struct McpTool {
    server: Arc<Server>,
    /// The name the model calls it by.
    name: String,
    /// The name the server knows it by.
    remote: String,
    description: String,
    parameters: Option<Value>,
    /// What its server's annotations claim.
    hints: Hints,
    approval: Option<Approval>,
}

impl McpTool {
    /// The tool `listed` by `server`, declared as `name`.
    pub fn new(server: Arc<Server>, listed: &Listed, name: String) -> McpTool {
        let tool = &listed.tool;
        let remote = tool.name.to_string();
        let parameters = listed.parameters.clone();
        let description = tool
            .description
            .as_deref()
            .or(tool.title.as_deref())
            .unwrap_or("A tool from an MCP server.")
            .to_owned();
        let hints = tool
            .annotations
            .as_ref()
            .map(|a| Hints {
                read_only: a.read_only_hint,
                destructive: a.destructive_hint,
            })
            .unwrap_or_default();
        let approval = server
            .spec
            .tool_approvals
            .get(&remote)
            .copied()
            .or(server.spec.approval);
        McpTool {
            server,
            name,
            remote,
            description,
            parameters,
            hints,
            approval,
        }
    }
}

impl DynTool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Option<&Value> {
        self.parameters.as_ref()
    }

    fn gate(&self, configured: Option<Approval>) -> Gate {
        Gate::mcp(
            self.server.spec.name.clone(),
            configured.or(self.approval),
            self.hints,
        )
    }

    fn timeout(&self) -> Option<Duration> {
        self.server.spec.tool_timeout
    }

    fn prepare(&self, args: Value, progress: CallProgress) -> Result<HandlerFuture, String> {
        let arguments = match args {
            Value::Null => None,
            Value::Object(map) => Some(map),
            other => {
                return Err(format!(
                    "invalid arguments for {}: expected an object, got {other}",
                    self.name
                ));
            }
        };
        let server = Arc::clone(&self.server);
        let name = self.name.clone();
        let remote = self.remote.clone();
        Ok(Box::pin(async move {
            let peer = server.peer(&name).map_err(ToolError::failed)?;
            let mut params = CallToolRequestParams::new(remote);
            if let Some(arguments) = arguments {
                params = params.with_arguments(arguments);
            }
            let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
            let handle = peer
                .send_cancellable_request(request, PeerRequestOptions::no_options())
                .await
                .map_err(|e| ToolError::failed(stopped_message(&server.spec.name, &e)))?;
            let mut guard = InFlight {
                server: Arc::clone(&server),
                peer,
                id: handle.id.clone(),
                token: handle.progress_token.clone(),
                done: false,
            };
            let mut oversized = server.oversized.subscribe();
            oversized.borrow_and_update();
            server
                .progress
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(guard.token.clone(), progress);
            let response = handle.await_response();
            tokio::pin!(response);
            let answer = loop {
                tokio::select! {
                    answer = &mut response => break answer,
                    changed = oversized.changed() => {
                        if changed.is_err() {
                            break (&mut response).await;
                        }
                        // A message too long to read was dropped. With no other call of this
                        // server waiting, it was this call's answer: say so now, not at the
                        // time limit (the guard tells the server the call is over).
                        let alone = server
                            .progress
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .len()
                            == 1;
                        if alone {
                            return Err(ToolError::failed(format!(
                                "the MCP server \"{}\" answered {name} with a message larger than {} MiB, the most livetalk reads in one message; it was not read",
                                server.spec.name,
                                super::child::MAX_MESSAGE >> 20
                            )));
                        }
                    }
                }
            };
            guard.done = true;
            match answer {
                Ok(ServerResult::CallToolResult(result)) => {
                    let result = serde_json::to_value(&result).map_err(|e| {
                        ToolError::failed(format!("the server's result was unreadable: {e}"))
                    })?;
                    readable_result(&result).map_err(ToolError::failed)
                }
                Ok(_) => Err(ToolError::failed(format!(
                    "the MCP server \"{}\" answered {name} with something that is not a tool result",
                    server.spec.name
                ))),
                Err(ServiceError::McpError(error)) => Err(ToolError::failed(format!(
                    "the MCP server \"{}\" refused the call: {}",
                    server.spec.name,
                    bounded(&error.message, SUMMARY)
                ))),
                Err(error) => Err(ToolError::failed(stopped_message(
                    &server.spec.name,
                    &error,
                ))),
            }
        }))
    }
}

fn stopped_message(server: &str, error: &ServiceError) -> String {
    if words::server_is_gone(error) {
        format!("the MCP server \"{server}\" stopped before it answered; the call did not complete")
    } else {
        format!(
            "the call to the MCP server \"{server}\" failed: {}",
            words::service_error(error)
        )
    }
}

/// A call on its way: when dropped before its answer came (cancelled, timed out), tells the
/// server to stop; either way forgets its progress token.
struct InFlight {
    server: Arc<Server>,
    peer: Peer<RoleClient>,
    id: RequestId,
    token: ProgressToken,
    done: bool,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.server
            .progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.token);
        if self.done {
            return;
        }
        let notification = ClientNotification::CancelledNotification(CancelledNotification::new(
            CancelledNotificationParam::new(
                Some(self.id.clone()),
                Some(
                    "livetalk stopped the call (the model withdrew it, or it ran out of time)"
                        .to_owned(),
                ),
            ),
        ));
        let peer = self.peer.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Err(error) = peer.send_notification(notification).await {
                    tracing::debug!("notifications/cancelled not sent: {error}");
                }
            });
        }
    }
}

/// A `CallToolResult` (as JSON) as the model's `response`: text, structured content, images
/// and resources each under a key of their own; an `isError` result is the error it reports.
pub fn readable_result(result: &Value) -> Result<Value, String> {
    let blocks = result
        .get("content")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut texts = Vec::new();
    let mut media = Vec::new();
    let mut resources = Vec::new();
    for block in blocks {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(text) = block.get("text").and_then(Value::as_str) {
                    texts.push(text.to_owned());
                }
            }
            Some(kind @ ("image" | "audio")) => {
                let mime = block.get("mimeType").and_then(Value::as_str).unwrap_or("");
                let bytes = block
                    .get("data")
                    .and_then(Value::as_str)
                    .map_or(0, |d| d.len() / 4 * 3);
                media.push(json!({
                    "type": kind,
                    "mime_type": mime,
                    "approx_bytes": bytes,
                    "note": format!("the tool returned {kind} data, which is not passed on to you"),
                }));
            }
            Some("resource") => {
                let resource = block.get("resource").cloned().unwrap_or(Value::Null);
                let mut entry = Map::new();
                for key in ["uri", "mimeType", "text"] {
                    if let Some(value) = resource.get(key) {
                        entry.insert(key.to_owned(), value.clone());
                    }
                }
                if resource.get("blob").is_some() {
                    entry.insert("note".into(), json!("binary contents not passed on"));
                }
                resources.push(Value::Object(entry));
            }
            Some("resource_link") => {
                let mut entry = Map::new();
                for key in ["uri", "name", "title", "description", "mimeType"] {
                    if let Some(value) = block.get(key) {
                        entry.insert(key.to_owned(), value.clone());
                    }
                }
                resources.push(Value::Object(entry));
            }
            _ => {}
        }
    }
    let structured = result.get("structuredContent").filter(|v| !v.is_null());
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        let message = if !texts.is_empty() {
            texts.join("\n")
        } else if let Some(structured) = structured {
            structured.to_string()
        } else {
            "the tool reported an error without saying what it was".to_owned()
        };
        return Err(message);
    }
    let mut out = Map::new();
    if !texts.is_empty() {
        out.insert("result".into(), Value::String(texts.join("\n")));
    }
    if let Some(structured) = structured {
        out.insert("structured".into(), structured.clone());
    }
    if !media.is_empty() {
        out.insert("media".into(), Value::Array(media));
    }
    if !resources.is_empty() {
        out.insert("resources".into(), Value::Array(resources));
    }
    if out.is_empty() {
        out.insert("result".into(), json!("done (the tool returned nothing)"));
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_structured_media_and_links_are_readable() {
        let result = json!({
            "content": [
                {"type": "text", "text": "The sum of 2 and 3 is 5."},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"},
                {"type": "resource_link", "uri": "test://static/resource/1", "name": "Resource 1"},
                {"type": "resource", "resource": {"uri": "test://x", "text": "inline", "mimeType": "text/plain"}},
            ],
            "structuredContent": {"sum": 5},
        });
        let Ok(readable) = readable_result(&result) else {
            panic!("not an error");
        };
        assert_eq!(readable["result"], "The sum of 2 and 3 is 5.");
        assert_eq!(readable["structured"], json!({"sum": 5}));
        assert_eq!(readable["media"][0]["mime_type"], "image/png");
        assert_eq!(readable["media"][0]["approx_bytes"], 3);
        assert_eq!(readable["resources"][0]["uri"], "test://static/resource/1");
        assert_eq!(readable["resources"][1]["text"], "inline");
    }

    #[test]
    fn is_error_gives_its_text_as_the_error() {
        let result = json!({"content": [{"type": "text", "text": "disk full"}], "isError": true});
        assert_eq!(readable_result(&result), Err("disk full".to_owned()));
        let bare = json!({"content": [], "isError": true});
        assert!(readable_result(&bare).is_err_and(|e| e.contains("without saying")));
    }

    #[test]
    fn an_empty_result_still_says_something() {
        let Ok(readable) = readable_result(&json!({"content": []})) else {
            panic!("not an error");
        };
        assert!(
            readable["result"]
                .as_str()
                .is_some_and(|r| r.contains("nothing"))
        );
    }
}
