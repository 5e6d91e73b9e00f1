//! Listing an MCP server's tools within bounds: at most [`MAX_PAGES`] pages, [`MAX_TOOLS`]
//! tools, and schemas that fit the model's declarations ([`MAX_SERVER_SCHEMA_NODES`] in all),
//! each tool's schema simplified once here rather than at every use. What the bounds left out
//! is said in one message per listing.

use std::sync::Arc;

use rmcp::model::PaginatedRequestParams;
use rmcp::service::{Peer, RoleClient, ServiceError};
use rmcp::transport::streamable_http_client::StreamableHttpError;
use serde_json::Value;
use tokio::sync::watch;

use super::ServerSpec;
use super::child::MAX_MESSAGE;
use crate::tools::schema::normalize_foreign;
use livetalk_live::excerpt::{SUMMARY, bounded};

/// Tools declared from one server at most: past this the first are kept. The model's
/// declarations go out in every setup message, and a server is not one to fill them.
pub const MAX_TOOLS: usize = 512;

/// Pages of `tools/list` asked for in one listing at most: a server whose every page has a
/// `nextCursor` would otherwise be listed for ever.
pub const MAX_PAGES: usize = 100;

/// Schema nodes one server's tools may take in all once simplified (each tool alone may take
/// up to [`crate::tools::schema::MAX_SCHEMA_NODES`]); past this, further tools are left out.
pub const MAX_SERVER_SCHEMA_NODES: usize = 100_000;

/// Text kept of a tool's description (and title): it goes to the model with every setup.
const MAX_DESCRIPTION: usize = 16 << 10;

/// Longer tool names cannot be declared (the Live API takes 64 characters); they are not kept.
const MAX_NAME: usize = 1024;

/// Schema notes logged per listing; the rest are counted.
const MAX_LOGGED_NOTES: usize = 100;

/// Tools named in the message about those left out; the rest are counted.
const NAMED_IN_MESSAGE: usize = 3;

/// One of a server's tools, ready to declare.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Listed {
    /// The tool as the server described it, without its schemas (they can be large and are
    /// not needed once simplified) and with its description bounded.
    pub tool: rmcp::model::Tool,
    /// Its parameters as declared to the model.
    pub parameters: Option<Value>,
}

/// What one listing found.
#[derive(Debug, Default)]
pub(super) struct Listing {
    pub tools: Vec<Listed>,
    /// What the bounds left out, for a notice; `None` when nothing was.
    pub trimmed: Option<String>,
}

/// Lists the tools of the server behind `peer` that `spec` lets through, page by page, within
/// the bounds. A page the transport dropped for its size (`oversized` counts them) ends the
/// listing with an error saying so.
pub(super) async fn list(
    peer: &Peer<RoleClient>,
    spec: &ServerSpec,
    mut oversized: watch::Receiver<u64>,
) -> Result<Listing, String> {
    let mut found = Found::default();
    let mut cursor = None;
    let mut pages = 0;
    oversized.borrow_and_update();
    loop {
        pages += 1;
        let params = PaginatedRequestParams::default().with_cursor(cursor);
        let dropped = async {
            if oversized.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        let page = tokio::select! {
            page = peer.list_tools(Some(params)) => page.map_err(page_error)?,
            () = dropped => return Err(too_large()),
        };
        for tool in page.tools {
            if spec.offers(&tool.name) {
                found.add(tool, &spec.name);
            }
        }
        cursor = page.next_cursor;
        if cursor.is_none() {
            break;
        }
        if found.tools.len() >= MAX_TOOLS {
            // Whatever the next pages hold would be left out anyway.
            found.more_than_max = true;
            break;
        }
        if pages >= MAX_PAGES {
            found.endless = true;
            break;
        }
    }
    found.log_notes(&spec.name);
    Ok(found.into_listing())
}

fn too_large() -> String {
    format!(
        "its answer to tools/list was larger than {} MiB, the most livetalk reads in one message",
        MAX_MESSAGE >> 20
    )
}

/// What went wrong with a page, in livetalk's words (an HTTP server's answer over
/// [`MAX_MESSAGE`] is one of livetalk's bounds, said as such).
fn page_error(error: ServiceError) -> String {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&error);
    while let Some(error) = cause {
        if let Some(StreamableHttpError::<reqwest::Error>::ResponseBodyTooLarge { .. }) =
            error.downcast_ref()
        {
            return too_large();
        }
        cause = error.source();
    }
    super::words::service_error(&error)
}

/// A listing under way.
#[derive(Default)]
struct Found {
    tools: Vec<Listed>,
    nodes: usize,
    /// Tools left out for their own sake: name and why.
    left_out: Vec<(String, String)>,
    left_out_count: usize,
    more_than_max: bool,
    endless: bool,
    notes: Vec<(String, String)>,
    more_notes: usize,
}

impl Found {
    fn add(&mut self, mut tool: rmcp::model::Tool, server: &str) {
        if self.tools.len() >= MAX_TOOLS {
            self.more_than_max = true;
            return;
        }
        if tool.name.len() > MAX_NAME {
            self.leave_out(&tool.name, "its name is too long to declare".to_owned());
            return;
        }
        // Taken, not copied: a schema can be megabytes.
        let schema = std::mem::take(&mut tool.input_schema);
        let schema =
            Value::Object(Arc::try_unwrap(schema).unwrap_or_else(|shared| (*shared).clone()));
        let foreign = match normalize_foreign(&schema) {
            Ok(foreign) => foreign,
            Err(too_large) => {
                tracing::warn!(%server, tool = %bounded(&tool.name, SUMMARY), "tool left out: {too_large}");
                self.leave_out(&tool.name, too_large.to_string());
                return;
            }
        };
        drop(schema);
        if self.nodes + foreign.nodes > MAX_SERVER_SCHEMA_NODES {
            self.leave_out(
                &tool.name,
                format!(
                    "the server's tools would take more than {MAX_SERVER_SCHEMA_NODES} schema parts in all"
                ),
            );
            return;
        }
        self.nodes += foreign.nodes;
        for note in foreign.notes {
            if self.notes.len() < MAX_LOGGED_NOTES {
                self.notes.push((tool.name.to_string(), note));
            } else {
                self.more_notes += 1;
            }
        }
        // Only what declaring and approving the tool need is kept.
        tool.output_schema = None;
        tool.icons = None;
        tool.meta = None;
        tool.description = tool
            .description
            .map(|d| bounded(&d, MAX_DESCRIPTION).into_owned().into());
        tool.title = tool
            .title
            .map(|t| bounded(&t, MAX_DESCRIPTION).into_owned());
        self.tools.push(Listed {
            tool,
            parameters: foreign.parameters,
        });
    }

    fn leave_out(&mut self, name: &str, why: String) {
        self.left_out_count += 1;
        if self.left_out.len() < NAMED_IN_MESSAGE {
            self.left_out.push((bounded(name, 200).into_owned(), why));
        }
    }

    fn log_notes(&self, server: &str) {
        for (tool, note) in &self.notes {
            tracing::info!(%server, tool = %bounded(tool, SUMMARY), "schema simplified: {note}");
        }
        if self.more_notes > 0 {
            tracing::info!(%server, "and {} more schema simplifications", self.more_notes);
        }
    }

    fn into_listing(self) -> Listing {
        let mut said = Vec::new();
        if self.more_than_max {
            said.push(format!(
                "it offers more than {MAX_TOOLS} tools; the first {MAX_TOOLS} are declared"
            ));
        }
        if self.endless {
            said.push(format!(
                "its tool list went on past {MAX_PAGES} pages; the tools of the first {MAX_PAGES} are declared"
            ));
        }
        if self.left_out_count > 0 {
            let named: Vec<String> = self
                .left_out
                .iter()
                .map(|(name, why)| format!("{name} ({why})"))
                .collect();
            let rest = self.left_out_count - self.left_out.len();
            let mut text = format!(
                "{} tool{} left out: {}",
                self.left_out_count,
                if self.left_out_count == 1 { "" } else { "s" },
                named.join("; ")
            );
            if rest > 0 {
                text.push_str(&format!("; and {rest} more"));
            }
            said.push(text);
        }
        Listing {
            tools: self.tools,
            trimmed: (!said.is_empty()).then(|| said.join(". ")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::schema::MAX_SCHEMA_NODES;

    fn tool(name: &str, schema: Value) -> rmcp::model::Tool {
        let Value::Object(schema) = schema else {
            panic!("a schema is an object")
        };
        rmcp::model::Tool::new(name.to_owned(), "A tool.", Arc::new(schema))
    }

    #[test]
    fn tools_past_the_cap_are_counted_once() {
        let mut found = Found::default();
        for i in 0..MAX_TOOLS + 10 {
            found.add(
                tool(&format!("t{i}"), serde_json::json!({"type": "object"})),
                "s",
            );
        }
        let listing = found.into_listing();
        assert_eq!(listing.tools.len(), MAX_TOOLS);
        assert_eq!(
            listing.trimmed.as_deref(),
            Some("it offers more than 512 tools; the first 512 are declared")
        );
    }

    #[test]
    fn a_tool_too_large_is_named_and_the_rest_counted() {
        let mut properties = serde_json::Map::new();
        for i in 0..MAX_SCHEMA_NODES {
            properties.insert(format!("p{i}"), serde_json::json!({"type": "string"}));
        }
        let big = serde_json::json!({"type": "object", "properties": properties});
        let mut found = Found::default();
        found.add(tool("fine", serde_json::json!({"type": "object"})), "s");
        for i in 0..5 {
            found.add(tool(&format!("big{i}"), big.clone()), "s");
        }
        let listing = found.into_listing();
        assert_eq!(listing.tools.len(), 1);
        let trimmed = listing.trimmed.unwrap();
        assert!(
            trimmed.starts_with(
                "5 tools left out: big0 (its argument schema would take more than 10000 parts"
            ),
            "{trimmed}"
        );
        assert!(trimmed.ends_with("; and 2 more"), "{trimmed}");
        // What is kept holds no schema.
        assert!(listing.tools[0].tool.input_schema.is_empty());
    }
}
