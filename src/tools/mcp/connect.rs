//! Connecting to one MCP server with rmcp (a child process over stdio, or streamable HTTP),
//! listing its tools, and what the server tells livetalk unasked (progress, list changes; its
//! log messages, deprecated in MCP, are not read). A child's stderr goes to the log line by line (cut, decoded lossily, within a
//! budget), never to the terminal, and is drained to its end whatever it holds.

use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use rmcp::ServiceExt as _;
use rmcp::handler::client::ClientHandler;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProgressNotificationParam};
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use tokio::io::AsyncReadExt as _;

use super::child::{ChildTransport, MAX_MESSAGE};
use super::flood::{LogBudget, Report};
use super::listing::{self, Listing};
use super::{Server, Transport, words};
use livetalk_live::excerpt::{SUMMARY, bounded};

/// A running client connection.
pub(super) type Service = RunningService<RoleClient, Listener>;

/// A connection that is up, with the tools it listed.
pub(super) struct Connected {
    pub service: Service,
    pub tools: Listing,
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
            let report = Report {
                progress: params.progress,
                total: params.total,
                message: params.message.map(|m| bounded(&m, SUMMARY).into_owned()),
            };
            server.progress(params.progress_token, report);
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(server) = self.server.upgrade() {
            server.list_changed();
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
            process
                .args(args)
                .envs(env)
                .kill_on_drop(true)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            if let Some(cwd) = cwd {
                process.current_dir(cwd);
            }
            let mut child = process
                .spawn()
                .map_err(|e| format!("cannot run `{command}`: {e}"))?;
            *server.child.lock().unwrap_or_else(PoisonError::into_inner) = child.id();
            let child_stderr = child.stderr.take();
            let transport = ChildTransport::new(child, server.oversized.clone())
                .map_err(|e| format!("cannot run `{command}`: {e}"))?;
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
            // The same bound on one message as over stdio (rmcp's default is 16 MiB).
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                .max_json_response_size(MAX_MESSAGE)
                .max_sse_event_size(MAX_MESSAGE);
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
    let tools = listing::list(service.peer(), &server.spec, server.oversized.subscribe())
        .await
        .map_err(|e| with_stderr(format!("listing its tools failed: {e}"), &stderr))?;
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

/// Longest stderr line kept; the rest of a longer line is read and dropped.
pub const STDERR_LINE: usize = 8 << 10;

/// Copies a child's stderr into the log, keeping its last non-empty line. Reads bytes, not
/// text: a line without end is cut at [`STDERR_LINE`], bytes that are not UTF-8 are replaced,
/// and a flood is logged only up to a budget per window (the rest counted). It reads until
/// the stream ends whatever comes, because a closed pipe kills the server at its next write.
async fn log_stderr(
    server: String,
    mut stderr: tokio::process::ChildStderr,
    tail: StderrTail,
    closed: tokio::sync::watch::Sender<bool>,
) {
    let mut reader = LineCutter::default();
    let mut budget = LogBudget::new("stderr lines");
    let mut chunk = vec![0; 16 << 10];
    loop {
        let read = match stderr.read(&mut chunk).await {
            Ok(0) => break,
            Ok(read) => read,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) => {
                tracing::warn!(%server, "reading its stderr failed: {error}");
                break;
            }
        };
        let mut lines = Vec::new();
        reader.feed(&chunk[..read], |line| lines.push(line));
        for line in lines {
            log_line(&server, &line, &tail, &mut budget);
        }
    }
    if let Some(line) = reader.finish() {
        log_line(&server, &line, &tail, &mut budget);
    }
    if let Some(summary) = budget.finish(std::time::Instant::now()) {
        tracing::info!(%server, "stderr: {summary}");
    }
    let _ = closed.send(true);
}

fn log_line(server: &str, line: &str, tail: &StderrTail, budget: &mut LogBudget) {
    let line = line.trim_end();
    let (admitted, summary) = budget.admit(line.len(), std::time::Instant::now());
    if let Some(summary) = summary {
        tracing::info!(%server, "stderr: {summary}");
    }
    if admitted {
        tracing::info!(%server, "stderr: {line}");
    }
    if !line.trim().is_empty() {
        *tail.last.lock().unwrap_or_else(PoisonError::into_inner) =
            Some(bounded(line, SUMMARY).into_owned());
    }
}

/// Splits a byte stream into lines of at most [`STDERR_LINE`] bytes, decoded lossily; a cut
/// line says so.
#[derive(Default)]
struct LineCutter {
    line: Vec<u8>,
    /// Bytes dropped from the current line.
    dropped: usize,
}

impl LineCutter {
    fn feed(&mut self, mut bytes: &[u8], mut line: impl FnMut(String)) {
        while !bytes.is_empty() {
            let (part, ended) = match bytes.iter().position(|b| *b == b'\n') {
                Some(end) => (&bytes[..end], true),
                None => (bytes, false),
            };
            let room = STDERR_LINE - self.line.len();
            let kept = part.len().min(room);
            self.line.extend_from_slice(&part[..kept]);
            self.dropped += part.len() - kept;
            bytes = &bytes[part.len() + usize::from(ended)..];
            if ended {
                line(self.take());
            }
        }
    }

    fn take(&mut self) -> String {
        let mut text = String::from_utf8_lossy(&self.line).into_owned();
        if self.dropped > 0 {
            text.push_str(&format!(
                "… ({} more bytes of this line not kept)",
                self.dropped
            ));
        }
        self.line.clear();
        self.dropped = 0;
        text
    }

    /// The last line, if the stream ended without a newline after it.
    fn finish(&mut self) -> Option<String> {
        (!self.line.is_empty() || self.dropped > 0).then(|| self.take())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_cut_decoded_lossily_and_split() {
        let mut cutter = LineCutter::default();
        let mut lines = Vec::new();
        cutter.feed(b"one\ntw", |l| lines.push(l));
        cutter.feed(b"o \xff\xfe bytes\n", |l| lines.push(l));
        let endless = vec![b'x'; 3 * STDERR_LINE];
        cutter.feed(&endless, |l| lines.push(l));
        cutter.feed(&endless, |l| lines.push(l));
        assert_eq!(lines, ["one", "two \u{fffd}\u{fffd} bytes"]);
        assert_eq!(
            cutter.line.len(),
            STDERR_LINE,
            "a line without end is held cut"
        );
        cutter.feed(b"x\nlast", |l| lines.push(l));
        assert_eq!(lines.len(), 3);
        assert!(
            lines[2].ends_with(&format!(
                "… ({} more bytes of this line not kept)",
                5 * STDERR_LINE + 1
            )),
            "{}",
            &lines[2][STDERR_LINE..]
        );
        assert_eq!(cutter.finish().as_deref(), Some("last"));
        assert_eq!(cutter.finish(), None);
    }
}
