//! MCP servers as tools: their configuration, the hub that starts, watches and restarts them,
//! and the tools they offer, declared beside the built-ins under names the Live API accepts.
//!
//! The hub keeps one slot per configured server. A slot is `Starting`, `Up` (a live rmcp
//! client and the tools it listed) or `Down` (why). The tools are [`McpTool`]s that look up
//! their server's slot at every call, so a server that crashed answers its calls with a clear
//! error and one that was restarted serves them again, with no new registry needed. What
//! happens to a server is reported as [`McpEvent`]s; the engine turns them into app messages.

mod child;
mod connect;
mod flood;
mod listing;
mod names;
mod tool;
mod words;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rmcp::model::ProgressToken;
use rmcp::service::{Peer, RoleClient};
use tokio::sync::{mpsc, oneshot};

use super::approval::Approval;
use super::registry::Registry;
use super::{CallProgress, RegisterError};
use livetalk_live::excerpt::{SUMMARY, bounded};

pub use child::MAX_MESSAGE;
pub use flood::{PROGRESS_INTERVAL, RELIST_INTERVAL};
pub use listing::{MAX_PAGES, MAX_SERVER_SCHEMA_NODES, MAX_TOOLS};
pub use names::{declared_names, valid_function_name};
pub use tool::readable_result;

/// How livetalk reaches one MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A child process speaking MCP over its stdin and stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        /// Added to livetalk's own environment.
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
    },
    /// A streamable-HTTP server.
    Http {
        url: String,
        /// The environment variable holding a bearer token, sent as `Authorization`.
        bearer_token_env_var: Option<String>,
    },
}

/// One configured MCP server (`[mcp_servers.NAME]`, or `--mcp NAME=…`).
#[derive(Debug, Clone, PartialEq)]
pub struct ServerSpec {
    pub name: String,
    pub transport: Transport,
    pub enabled: bool,
    /// Only these of its tools (by the server's names), when given.
    pub enabled_tools: Option<Vec<String>>,
    /// Never these.
    pub disabled_tools: Vec<String>,
    pub startup_timeout: Duration,
    /// Each call's time limit; the `[tools]` limit when not given.
    pub tool_timeout: Option<Duration>,
    /// The server's default approval for its tools.
    pub approval: Option<Approval>,
    /// Per-tool approvals, by the server's tool names.
    pub tool_approvals: BTreeMap<String, Approval>,
}

impl ServerSpec {
    /// A stdio server with the defaults of an `[mcp_servers.NAME]` table.
    pub fn stdio(name: impl Into<String>, command: impl Into<String>, args: Vec<String>) -> Self {
        ServerSpec {
            name: name.into(),
            transport: Transport::Stdio {
                command: command.into(),
                args,
                env: BTreeMap::new(),
                cwd: None,
            },
            enabled: true,
            enabled_tools: None,
            disabled_tools: Vec::new(),
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            tool_timeout: None,
            approval: None,
            tool_approvals: BTreeMap::new(),
        }
    }

    /// True when the user lets livetalk declare the server's tool called `tool`.
    fn offers(&self, tool: &str) -> bool {
        self.enabled_tools
            .as_ref()
            .is_none_or(|only| only.iter().any(|t| t == tool))
            && !self.disabled_tools.iter().any(|t| t == tool)
    }
}

/// How long a server may take to start and list its tools, unless configured.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(10);

/// What happened to an MCP server, for the user.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum McpEvent {
    /// The server started and listed `tools` tools (of those the config lets through).
    Up { server: String, tools: usize },
    /// The server could not be started, or stopped: its tools answer with errors until it is
    /// restarted.
    Down { server: String, message: String },
    /// The server's tool list changed; the model sees the new one from the next connection.
    ToolsChanged { server: String, tools: usize },
    /// A bound left some of the server's tools out (too many, too large, a listing without
    /// end): what and why, said once per listing that differs.
    Trimmed { server: String, message: String },
}

/// A server's state as the tool list shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerState {
    Starting,
    Up,
    Down(String),
}

/// One server as the tool list shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ServerEntry {
    pub name: String,
    pub state: ServerState,
}

/// The MCP servers of a session.
pub struct McpHub {
    servers: Vec<Arc<Server>>,
    /// Keeps the event channel open while no server is left to hold it.
    _events: mpsc::UnboundedSender<McpEvent>,
}

/// One server's slot.
struct Server {
    spec: ServerSpec,
    slot: Mutex<Slot>,
    /// Calls waiting for progress notifications, by the token rmcp put on their request.
    progress: Mutex<HashMap<ProgressToken, CallProgress>>,
    /// Bumped by every start, so the watcher of a replaced connection stays silent.
    generation: AtomicU64,
    events: mpsc::UnboundedSender<McpEvent>,
    /// Tool-list changes waiting for their listing.
    relist: Mutex<Relist>,
    /// Progress reports on their way, at most ten a second.
    progress_gate: Mutex<flood::ProgressGate>,
    /// What the bounds left out at the last listing, so an unchanged trim is said once.
    trimmed: Mutex<Option<String>>,
    /// Counts the messages dropped for their size (stdio servers), so a listing waiting for
    /// one of them ends at once, saying why.
    oversized: tokio::sync::watch::Sender<u64>,
    /// The process of a stdio server's latest start. rmcp stops it from a task it spawns,
    /// which never runs when the runtime goes first (Ctrl-C while servers start); dropping the
    /// server stops it here too.
    child: Mutex<Option<u32>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let running = !matches!(
            *self.slot.get_mut().unwrap_or_else(PoisonError::into_inner),
            Slot::Down(_)
        );
        let child = self
            .child
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        // A server known to have stopped may have been reaped, and its number given to
        // another process: only a running one is signalled.
        if running
            && let Some(pid) = child.and_then(|pid| rustix::process::Pid::from_raw(pid as i32))
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
    }
}

/// Tool-list changes: one listing runs at a time, at most once every [`RELIST_INTERVAL`];
/// the changes announced meanwhile wait for the next one.
#[derive(Default)]
struct Relist {
    running: bool,
    wanted: bool,
    /// Changes announced since the last listing began.
    announced: u64,
    last: Option<Instant>,
}

enum Slot {
    Starting,
    Up {
        peer: Peer<RoleClient>,
        tools: Vec<listing::Listed>,
        /// Dropping (or sending on) it stops the connection.
        _stop: oneshot::Sender<()>,
    },
    Down(String),
}

impl McpHub {
    /// Starts every enabled server at once and waits until each is up or has failed (each
    /// within its `startup_timeout`). What became of them is in the events.
    pub async fn start(specs: Vec<ServerSpec>) -> (McpHub, mpsc::UnboundedReceiver<McpEvent>) {
        let (events, receiver) = mpsc::unbounded_channel();
        let servers: Vec<Arc<Server>> = specs
            .into_iter()
            .filter(|spec| spec.enabled)
            .map(|spec| {
                Arc::new(Server {
                    spec,
                    slot: Mutex::new(Slot::Starting),
                    progress: Mutex::new(HashMap::new()),
                    generation: AtomicU64::new(0),
                    events: events.clone(),
                    relist: Mutex::default(),
                    progress_gate: Mutex::default(),
                    trimmed: Mutex::default(),
                    oversized: tokio::sync::watch::Sender::new(0),
                    child: Mutex::new(None),
                })
            })
            .collect();
        futures_util::future::join_all(servers.iter().map(|s| Arc::clone(s).run())).await;
        (
            McpHub {
                servers,
                _events: events,
            },
            receiver,
        )
    }

    /// No servers.
    pub fn empty() -> (McpHub, mpsc::UnboundedReceiver<McpEvent>) {
        let (events, receiver) = mpsc::unbounded_channel();
        (
            McpHub {
                servers: Vec::new(),
                _events: events,
            },
            receiver,
        )
    }

    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// Stops the server named `name` (if it runs) and starts it again, in the background;
    /// false when there is no such server.
    pub fn restart(&self, name: &str) -> bool {
        let Some(server) = self.servers.iter().find(|s| s.spec.name == name) else {
            return false;
        };
        server.set_slot(Slot::Starting);
        tokio::spawn(Arc::clone(server).run());
        true
    }

    /// The servers and their states, in configured order.
    pub fn servers(&self) -> Vec<ServerEntry> {
        self.servers
            .iter()
            .map(|s| ServerEntry {
                name: s.spec.name.clone(),
                state: match &*s.lock() {
                    Slot::Starting => ServerState::Starting,
                    Slot::Up { .. } => ServerState::Up,
                    Slot::Down(why) => ServerState::Down(why.clone()),
                },
            })
            .collect()
    }

    /// Adds the tools of every server that is up to `registry` (which holds the built-ins),
    /// under the names [`declared_names`] gives them. Their schemas were simplified when they
    /// were listed (and a tool the bounds left out said so then).
    pub fn add_tools_to(&self, registry: &mut Registry) {
        let builtins = registry.reserved_names();
        let offered: Vec<(Arc<Server>, listing::Listed)> = self
            .servers
            .iter()
            .flat_map(|server| {
                let tools = match &*server.lock() {
                    Slot::Up { tools, .. } => tools.clone(),
                    _ => Vec::new(),
                };
                tools
                    .into_iter()
                    .map(|t| (Arc::clone(server), t))
                    .collect::<Vec<_>>()
            })
            .collect();
        let pairs: Vec<(&str, &str)> = offered
            .iter()
            .map(|(s, t)| (s.spec.name.as_str(), t.tool.name.as_ref()))
            .collect();
        let names = declared_names(&builtins, &pairs);
        for ((server, tool), name) in offered.iter().zip(names) {
            let Some(name) = name else {
                tracing::warn!(server = %server.spec.name, tool = %bounded(&tool.tool.name, SUMMARY), "tool left out: no valid, unique name for it");
                continue;
            };
            let built = tool::McpTool::new(Arc::clone(server), tool, name);
            match registry.insert(Arc::new(built)) {
                Ok(()) => {}
                Err(RegisterError::Duplicate(name)) => {
                    tracing::warn!(%name, "tool left out: the name is taken");
                }
                Err(error) => tracing::warn!("tool left out: {error}"),
            }
        }
    }
}

impl Drop for McpHub {
    fn drop(&mut self) {
        // Dropping the slots' stop senders ends every connection in the background: quitting
        // never waits for a server's graceful shutdown.
        for server in &self.servers {
            server.generation.fetch_add(1, Ordering::SeqCst);
            server.set_slot(Slot::Down("livetalk is closing".to_owned()));
        }
    }
}

impl Server {
    fn lock(&self) -> std::sync::MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn set_slot(&self, slot: Slot) {
        *self.lock() = slot;
    }

    fn emit(&self, event: McpEvent) {
        let _ = self.events.send(event);
    }

    /// The server's connection, or why there is none, for a call of its tool `tool`.
    fn peer(&self, tool: &str) -> Result<Peer<RoleClient>, String> {
        match &*self.lock() {
            Slot::Up { peer, .. } => Ok(peer.clone()),
            Slot::Starting => Err(format!(
                "{tool} is not available right now: its MCP server \"{}\" is starting",
                self.spec.name
            )),
            Slot::Down(why) => Err(format!(
                "{tool} is not available: its MCP server \"{}\" is not running: {why}",
                self.spec.name
            )),
        }
    }

    /// Starts (or restarts) the connection and reports how it went; then watches it in the
    /// background until it ends.
    async fn run(self: Arc<Self>) {
        let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        let name = self.spec.name.clone();
        let started = tokio::time::timeout(
            self.spec.startup_timeout,
            connect::connect(Arc::clone(&self)),
        )
        .await;
        let connected = match started {
            Ok(Ok(connected)) => connected,
            Ok(Err(why)) => return self.fail(generation, why),
            Err(_) => {
                return self.fail(
                    generation,
                    format!(
                        "it did not start within {} s",
                        self.spec.startup_timeout.as_secs_f64()
                    ),
                );
            }
        };
        if self.generation.load(Ordering::SeqCst) != generation {
            return;
        }
        let offered = connected.tools.tools.len();
        let (stop, stopped) = oneshot::channel();
        self.set_slot(Slot::Up {
            peer: connected.service.peer().clone(),
            tools: connected.tools.tools,
            _stop: stop,
        });
        tracing::info!(server = %name, tools = offered, "MCP server is up");
        self.emit(McpEvent::Up {
            server: name,
            tools: offered,
        });
        self.say_trimmed(connected.tools.trimmed);
        let mut relist = self.relist.lock().unwrap_or_else(PoisonError::into_inner);
        if relist.wanted && !relist.running {
            relist.running = true;
            tokio::spawn(Arc::clone(&self).relister());
        }
        drop(relist);
        tokio::spawn(self.watch(generation, connected.service, connected.stderr, stopped));
    }

    fn fail(&self, generation: u64, why: String) {
        if self.generation.load(Ordering::SeqCst) != generation {
            return;
        }
        let why = bounded(&why, SUMMARY).to_string();
        tracing::warn!(server = %self.spec.name, "MCP server failed to start: {why}");
        self.set_slot(Slot::Down(why.clone()));
        self.emit(McpEvent::Down {
            server: self.spec.name.clone(),
            message: format!("could not be started: {why}"),
        });
    }

    /// Waits until the connection ends by itself (a crash, or the server quit) or is stopped.
    async fn watch(
        self: Arc<Self>,
        generation: u64,
        service: connect::Service,
        stderr: connect::StderrTail,
        stopped: oneshot::Receiver<()>,
    ) {
        let token = service.cancellation_token();
        tokio::select! {
            _ = service.waiting() => {}
            _ = stopped => {
                token.cancel();
                return;
            }
        }
        if self.generation.load(Ordering::SeqCst) != generation {
            return;
        }
        let why = match stderr.final_line().await {
            Some(line) => format!("stopped (its last words: {line})"),
            None => "stopped".to_owned(),
        };
        tracing::warn!(server = %self.spec.name, "MCP server stopped: {why}");
        self.set_slot(Slot::Down(why.clone()));
        self.emit(McpEvent::Down {
            server: self.spec.name.clone(),
            message: why,
        });
    }

    /// Says what the bounds left out of a listing, unless the last listing said the same.
    fn say_trimmed(&self, trimmed: Option<String>) {
        let mut last = self.trimmed.lock().unwrap_or_else(PoisonError::into_inner);
        if *last == trimmed {
            return;
        }
        last.clone_from(&trimmed);
        drop(last);
        if let Some(message) = trimmed {
            tracing::warn!(server = %self.spec.name, "{message}");
            self.emit(McpEvent::Trimmed {
                server: self.spec.name.clone(),
                message,
            });
        }
    }

    /// The server says its tool list changed: list it again, at most once every
    /// [`RELIST_INTERVAL`]; the changes announced meanwhile are served by the next listing.
    fn list_changed(self: Arc<Self>) {
        let mut relist = self.relist.lock().unwrap_or_else(PoisonError::into_inner);
        relist.announced += 1;
        relist.wanted = true;
        if relist.running {
            return;
        }
        relist.running = true;
        drop(relist);
        // Not on the connection's own task: listing is a request it has to answer.
        tokio::spawn(self.relister());
    }

    /// Lists again while changes are announced, paced by [`RELIST_INTERVAL`].
    async fn relister(self: Arc<Self>) {
        loop {
            let wait = {
                let relist = self.relist.lock().unwrap_or_else(PoisonError::into_inner);
                relist
                    .last
                    .map(|last| (last + RELIST_INTERVAL).saturating_duration_since(Instant::now()))
            };
            if let Some(wait) = wait {
                tokio::time::sleep(wait).await;
            }
            let announced = {
                let mut relist = self.relist.lock().unwrap_or_else(PoisonError::into_inner);
                // A change announced while the server starts is listed once it is up (`run`
                // looks at `wanted` after it set the slot, under this lock).
                if !relist.wanted || !matches!(&*self.lock(), Slot::Up { .. }) {
                    relist.running = false;
                    return;
                }
                relist.wanted = false;
                relist.last = Some(Instant::now());
                std::mem::take(&mut relist.announced)
            };
            if announced > 1 {
                tracing::info!(server = %self.spec.name, "{announced} tool-list changes announced; listing once");
            }
            Arc::clone(&self).relist().await;
        }
    }

    /// Lists the tools again (under the same deadline and bounds as the first listing), and
    /// says so when what livetalk declares from them differs.
    async fn relist(self: Arc<Self>) {
        let (peer, old) = match &*self.lock() {
            Slot::Up { peer, tools, .. } => (peer.clone(), tools.clone()),
            _ => return,
        };
        let listed = tokio::time::timeout(
            self.spec.startup_timeout,
            listing::list(&peer, &self.spec, self.oversized.subscribe()),
        )
        .await;
        let listing = match listed {
            Ok(Ok(listing)) => listing,
            Ok(Err(error)) => {
                tracing::warn!(server = %self.spec.name, "listing the changed tools failed: {}", bounded(&error, SUMMARY));
                return;
            }
            Err(_) => {
                tracing::warn!(server = %self.spec.name, "listing the changed tools took longer than {} s; the tools listed before stay", self.spec.startup_timeout.as_secs_f64());
                return;
            }
        };
        self.say_trimmed(listing.trimmed);
        if listing.tools == old {
            return;
        }
        let offered = listing.tools.len();
        if let Slot::Up { tools: kept, .. } = &mut *self.lock() {
            *kept = listing.tools;
        }
        tracing::info!(server = %self.spec.name, tools = offered, "MCP server's tools changed");
        self.emit(McpEvent::ToolsChanged {
            server: self.spec.name.clone(),
            tools: offered,
        });
    }

    /// A progress notification: passed on to its call at most every [`PROGRESS_INTERVAL`]
    /// per server, the latest of each call winning, so a flood reaches neither the screen nor
    /// the recording.
    fn progress(self: Arc<Self>, token: ProgressToken, report: flood::Report) {
        // Servers keep sending progress for calls already cancelled: those tokens are gone,
        // and cost nothing.
        let known = self
            .progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(&token);
        let now = Instant::now();
        let mut gate = self
            .progress_gate
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let offer = if known {
            Some(gate.offer(token.clone(), report.clone(), now))
        } else {
            None
        };
        let (summary, close_in) = gate.tally.count(offer == Some(flood::Offer::Now), now);
        drop(gate);
        if let Some(summary) = summary {
            tracing::info!(server = %self.spec.name, "{summary}");
        }
        if let Some(close_in) = close_in {
            // Said when the window ends, even if the flood has stopped by then.
            let server = Arc::clone(&self);
            tokio::spawn(async move {
                tokio::time::sleep(close_in).await;
                let summary = server
                    .progress_gate
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .tally
                    .close(Instant::now());
                if let Some(summary) = summary {
                    tracing::info!(server = %server.spec.name, "{summary}");
                }
            });
        }
        match offer {
            Some(flood::Offer::Now) => self.report_progress(&token, report),
            Some(flood::Offer::HeldFlushIn(wait)) => {
                tokio::spawn(async move {
                    tokio::time::sleep(wait).await;
                    let held = self
                        .progress_gate
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .flush(Instant::now());
                    for (token, report) in held {
                        self.report_progress(&token, report);
                    }
                });
            }
            Some(flood::Offer::Held) | None => {}
        }
    }

    fn report_progress(&self, token: &ProgressToken, report: flood::Report) {
        let sink = self
            .progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(token)
            .cloned();
        if let Some(sink) = sink {
            sink.report(report.progress, report.total, report.message);
        }
    }
}

/// Every tool and every MCP server, as the tool list shows them.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Catalog {
    pub tools: Vec<super::ToolEntry>,
    pub servers: Vec<ServerEntry>,
}
