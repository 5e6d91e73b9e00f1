//! Connecting to one MCP server with rmcp (a child process over stdio, or streamable HTTP),
//! listing its tools, and what the server tells livetalk unasked (progress, list changes).
//! A child's stderr goes to the log line by line, never to the terminal.

use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use rmcp::ServiceExt as _;
use rmcp::handler::client::ClientHandler;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProgressNotificationParam};
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use tokio::io::{AsyncBufReadExt as _, BufReader};

use super::{Server, Transport, words};
use livetalk_live::excerpt::{SUMMARY, bounded};

/// A running client connection.
pub(super) type Service = RunningService<RoleClient, Listener>;

/// A connection that is up, with the tools it listed.
pub(super) struct Connected {
    pub service: Service,
    pub tools: Vec<rmcp::model::Tool>,
    pub stderr: StderrTail,
}

/// The last line a child wrote to its stderr, for the notice when it stops.
#[derive(Clone)]
pub(super) struct StderrTail {
    last: Arc<Mutex<Option<String>>>,
    /// True once the stream ended (at once for a server without one).
    closed: tokio::sync::watch::Receiver<bool>,
}

impl StderrTail {
    fn new() -> (StderrTail, tokio::sync::watch::Sender<bool>) {
        let (closed_tx, closed) = tokio::sync::watch::channel(false);
        (
            StderrTail {
                last: Arc::default(),
                closed,
            },
            closed_tx,
        )
    }

    pub fn last_line(&self) -> Option<String> {
        self.last
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The last line once the stream has ended (a process that died wrote its last words
    /// before its stdout closed), or after a second at most.
    pub async fn final_line(&self) -> Option<String> {
        let mut closed = self.closed.clone();
        let _ = tokio::time::timeout(
            std::time::Duration::from_secs(1),
            closed.wait_for(|closed| *closed),
        )
        .await;
        self.last_line()
    }
}

/// Receives what the server sends on its own.
pub(super) struct Listener {
    server: Weak<Server>,
}

impl ClientHandler for Listener {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if let Some(server) = self.server.upgrade() {
            server.progress(
                &params.progress_token,
                params.progress,
                params.total,
                params.message,
            );
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(server) = self.server.upgrade() {
            // Not here: listing is a request, and this runs on the connection's own task.
            tokio::spawn(server.relist());
        }
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("livetalk", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// Starts the server's connection and lists its tools (every page).
pub(super) async fn connect(server: Arc<Server>) -> Result<Connected, String> {
    let listener = Listener {
        server: Arc::downgrade(&server),
    };
    let (stderr, stderr_closed) = StderrTail::new();
    let service = match &server.spec.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let mut process = tokio::process::Command::new(command);
            process.args(args).envs(env).kill_on_drop(true);
            if let Some(cwd) = cwd {
                process.current_dir(cwd);
            }
            let (transport, child_stderr) = TokioChildProcess::builder(process)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("cannot run `{command}`: {e}"))?;
            *server.child.lock().unwrap_or_else(PoisonError::into_inner) = transport.id();
            match child_stderr {
                Some(child_stderr) => {
                    tokio::spawn(log_stderr(
                        server.spec.name.clone(),
                        child_stderr,
                        stderr.clone(),
                        stderr_closed,
                    ));
                }
                None => {
                    let _ = stderr_closed.send(true);
                }
            }
            listener
                .serve(transport)
                .await
                .map_err(|e| with_stderr(words::start_error(&e), &stderr))?
        }
        Transport::Http {
            url,
            bearer_token_env_var,
        } => {
            let _ = stderr_closed.send(true);
            // reqwest is built without a provider of its own: the process uses ring.
            let _ = rustls::crypto::ring::default_provider().install_default();
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            if let Some(var) = bearer_token_env_var {
                let token = std::env::var(var)
                    .ok()
                    .filter(|t| !t.trim().is_empty())
                    .ok_or_else(|| {
                        format!("the environment variable {var} (bearer_token_env_var) is not set")
                    })?;
                livetalk_live::redact::remember(&token);
                config = config.auth_header(token.trim().to_owned());
            }
            let transport = StreamableHttpClientTransport::from_config(config);
            listener
                .serve(transport)
                .await
                .map_err(|e| format!("{url}: {}", words::start_error(&e)))?
        }
    };
    let tools = service.list_all_tools().await.map_err(|e| {
        with_stderr(
            format!("listing its tools failed: {}", words::service_error(&e)),
            &stderr,
        )
    })?;
    Ok(Connected {
        service,
        tools,
        stderr,
    })
}

fn with_stderr(message: String, stderr: &StderrTail) -> String {
    match stderr.last_line() {
        Some(line) => format!("{message} (its last words: {line})"),
        None => message,
    }
}

/// Copies a child's stderr into the log, keeping its last non-empty line.
async fn log_stderr(
    server: String,
    stderr: tokio::process::ChildStderr,
    tail: StderrTail,
    closed: tokio::sync::watch::Sender<bool>,
) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let line = bounded(line.trim_end(), SUMMARY).to_string();
        tracing::info!(%server, "stderr: {line}");
        if !line.trim().is_empty() {
            *tail.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(line);
        }
    }
    let _ = closed.send(true);
}
