//! Tool calls as the app shows them: the tool log's records and their states, the tool list's
//! rows, and how the dispatcher's events, MCP servers' news and the user's verdicts change them.

use std::time::Duration;

use serde_json::Value;

use super::{App, Effect, NoticeLevel, SessionEffect, ToolEffect};
use crate::tools::mcp::{Catalog, McpEvent, ServerEntry};
use crate::tools::{
    CallKey, ProgressReport, SlowCall, ToolEntry, ToolEvent, ToolStatus, Unasked, Verdict,
    WaitingCall,
};
use livetalk_live::wire::{FunctionResponse, Scheduling};

/// The key that goes to the call waiting for the user, as its notice names it (the key map
/// binds it, `keys`).
pub const GO_TO_WAITING: &str = "F7";

/// Lifecycle of one tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolState {
    /// Waits for the user to approve, deny, edit or answer it.
    Waiting,
    Running,
    Ok,
    Error(String),
    TimedOut,
    Cancelled,
    /// Not run: the user declined it, or the headless policy does not allow it.
    Refused(String),
    /// The user typed its result.
    ByHand,
}

impl ToolState {
    pub fn label(&self) -> &'static str {
        match self {
            ToolState::Waiting => "waiting for you",
            ToolState::Running => "running",
            ToolState::Ok => "ok",
            ToolState::Error(_) => "error",
            ToolState::TimedOut => "timed out",
            ToolState::Cancelled => "cancelled",
            ToolState::Refused(_) => "refused",
            ToolState::ByHand => "answered by hand",
        }
    }

    /// True until the call is answered or cancelled.
    pub fn is_open(&self) -> bool {
        matches!(self, ToolState::Waiting | ToolState::Running)
    }
}

/// One row of the tool list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolRow<'a> {
    Server(&'a ServerEntry),
    Tool(&'a ToolEntry),
}

/// A tool call as the log shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallRecord {
    pub id: Option<String>,
    pub name: String,
    pub args: Value,
    pub state: ToolState,
    pub duration: Option<Duration>,
    /// The exact `functionResponses` entry sent (none when cancelled).
    pub response: Option<FunctionResponse>,
    pub truncated: bool,
    /// Local wall-clock time the call arrived.
    pub started_at: jiff::civil::Time,
    /// It ran past a third of its time limit.
    pub slow: bool,
    /// The latest progress its tool reported while it ran.
    pub progress: Option<ProgressReport>,
    /// The arguments the model sent, when the user edited them (`args` are the edited ones).
    pub edited_from: Option<Value>,
    /// Why it ran without anybody asked, when that is news (not for a plain built-in).
    pub unasked: Option<Unasked>,
}

impl App {
    /// Every tool and MCP server, as the tool list shows them.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// The tool list's rows: the built-ins, then each MCP server followed by its tools.
    pub fn tool_rows(&self) -> Vec<ToolRow<'_>> {
        let tools = &self.catalog.tools;
        let mut rows: Vec<ToolRow<'_>> = tools
            .iter()
            .filter(|t| t.server.is_none())
            .map(ToolRow::Tool)
            .collect();
        for server in &self.catalog.servers {
            rows.push(ToolRow::Server(server));
            rows.extend(
                tools
                    .iter()
                    .filter(|t| t.server.as_deref() == Some(server.name.as_str()))
                    .map(ToolRow::Tool),
            );
        }
        rows
    }

    /// True while Google Search is declared and on.
    pub fn searches(&self) -> bool {
        self.catalog
            .tools
            .iter()
            .any(|tool| tool.runs_at_google() && tool.enabled)
    }

    /// True while a change to the tool set waits for the next turn boundary.
    pub fn tools_pending(&self) -> bool {
        self.tools_pending
    }

    pub fn tool_calls(&self) -> &[ToolCallRecord] {
        &self.tool_calls
    }

    /// Tool calls not answered yet (running, or waiting for the user).
    pub fn running_tools(&self) -> usize {
        self.tool_calls.iter().filter(|c| c.state.is_open()).count()
    }

    /// The oldest call waiting for the user, by its place in the tool log.
    pub fn first_waiting_call(&self) -> Option<usize> {
        self.tool_calls
            .iter()
            .position(|c| c.state == ToolState::Waiting)
    }

    pub(super) fn on_tool(&mut self, event: ToolEvent) -> Vec<Effect> {
        let effects = self.apply_tool_event(event);
        self.retire_waiting_notice();
        effects
    }

    pub(super) fn apply_tool_event(&mut self, event: ToolEvent) -> Vec<Effect> {
        match event {
            ToolEvent::Finished(outcome) => {
                // The dispatcher guarantees one answer per call; the record is only for show,
                // so a call we never listed is still answered.
                let index = self.find_open_call(outcome.key, outcome.id.as_deref(), &outcome.name);
                // Finished before the server's cancel could stop it: withdrawn, not answered.
                if let Some(id) = &outcome.id
                    && self.withdrawn_calls.remove(id)
                {
                    if let Some(index) = index {
                        self.tool_calls[index].state = ToolState::Cancelled;
                        self.tool_calls[index].duration = Some(outcome.duration);
                    }
                    return Vec::new();
                }
                if let Some(index) = index {
                    let record = &mut self.tool_calls[index];
                    record.state = match &outcome.status {
                        ToolStatus::Ok => ToolState::Ok,
                        ToolStatus::Error(message) | ToolStatus::Panicked(message) => {
                            ToolState::Error(message.clone())
                        }
                        ToolStatus::TimedOut => ToolState::TimedOut,
                        ToolStatus::Refused(message) => ToolState::Refused(message.clone()),
                        ToolStatus::ByHand => ToolState::ByHand,
                    };
                    // A failed call is answered to the model as an error; the user should
                    // see it too, not only in the log.
                    let failure = match &record.state {
                        ToolState::Error(message) => Some(message.clone()),
                        ToolState::TimedOut => Some("it did not finish in time".to_owned()),
                        _ => None,
                    };
                    record.duration = Some(outcome.duration);
                    record.truncated = outcome.truncated;
                    record.unasked = outcome.unasked.filter(|why| why.worth_showing());
                    record.response = Some(outcome.response.clone());
                    let refusal = match &record.state {
                        ToolState::Refused(message) => Some(message.clone()),
                        _ => None,
                    };
                    if let Some(why) = failure {
                        self.notice(
                            NoticeLevel::Warning,
                            format!("Tool {} failed: {why}", outcome.name),
                        );
                    }
                    if let Some(why) = refusal {
                        self.notice(
                            NoticeLevel::Info,
                            format!("Tool {} was not run: {why}", outcome.name),
                        );
                    }
                }
                if outcome.ends_session() {
                    self.end_after_turn = true;
                }
                if self.closing || self.is_finished() {
                    return Vec::new();
                }
                // A SILENT result starts no generation, so nothing is awaited for it; nor is
                // anything for a call of a lost connection (the session withholds its answer).
                let orphaned = index.is_some_and(|i| i < self.calls_before_reconnect);
                if outcome.response.scheduling != Some(Scheduling::Silent) && !orphaned {
                    self.reply.continued();
                }
                vec![Effect::Session(SessionEffect::SendToolResponse(
                    outcome.response,
                ))]
            }
            ToolEvent::Slow(slow) => {
                self.flag_slow(slow);
                Vec::new()
            }
            ToolEvent::Progress(report) => {
                if let Some(index) =
                    self.find_open_call(Some(report.key), report.id.as_deref(), &report.name)
                {
                    self.tool_calls[index].progress = Some(report);
                }
                Vec::new()
            }
            ToolEvent::Waiting(waiting) => {
                self.await_user(waiting);
                Vec::new()
            }
            ToolEvent::Cancelled {
                key,
                id,
                name,
                duration,
            } => {
                self.withdrawn_calls.remove(&id);
                if let Some(index) = self.find_open_call(key, Some(&id), &name) {
                    let record = &mut self.tool_calls[index];
                    record.state = ToolState::Cancelled;
                    record.duration = Some(duration);
                }
                Vec::new()
            }
        }
    }

    pub(super) fn on_mcp(&mut self, event: McpEvent) {
        match event {
            McpEvent::Up { server, tools } => self.notice(
                NoticeLevel::Info,
                format!(
                    "MCP server {server} is up with {tools} tool{}.",
                    if tools == 1 { "" } else { "s" }
                ),
            ),
            McpEvent::Down { server, message } => self.notice(
                NoticeLevel::Warning,
                format!(
                    "MCP server {server} {message}. Its tools answer with errors until it is restarted (F8, then r)."
                ),
            ),
            McpEvent::ToolsChanged { server, tools } => self.notice(
                NoticeLevel::Info,
                format!(
                    "MCP server {server} changed its tools (now {tools}); the model sees the new list from the next connection."
                ),
            ),
            McpEvent::Trimmed { server, message } => self.notice(
                NoticeLevel::Warning,
                format!("MCP server {server}: {message}."),
            ),
        }
    }

    /// A call waits for the user: the log shows it and a notice says how to answer it.
    pub(super) fn await_user(&mut self, waiting: WaitingCall) {
        let Some(index) =
            self.find_open_call(Some(waiting.key), waiting.id.as_deref(), &waiting.name)
        else {
            return;
        };
        self.tool_calls[index].state = ToolState::Waiting;
        self.waiting_notice = Some(self.notices.len());
        self.notice(
            NoticeLevel::Warning,
            format!(
                "{} waits for you: {} goes to it; then a approves, d denies, e edits the arguments, r types the result.",
                waiting.name,
                GO_TO_WAITING
            ),
        );
    }

    /// The user's verdict on a call: applied where it still can be (a call answered or
    /// cancelled meanwhile keeps its end), and handed to the dispatcher.
    pub(super) fn on_verdict(&mut self, key: CallKey, verdict: Verdict) -> Vec<Effect> {
        let Some(record) = usize::try_from(key.0)
            .ok()
            .and_then(|index| self.tool_calls.get_mut(index))
        else {
            return Vec::new();
        };
        let applies = match verdict {
            Verdict::Answer(_) => record.state.is_open(),
            Verdict::Approve | Verdict::Edit(_) | Verdict::Deny => {
                record.state == ToolState::Waiting
            }
        };
        if !applies {
            return Vec::new();
        }
        match &verdict {
            Verdict::Approve => record.state = ToolState::Running,
            Verdict::Edit(args) => {
                record.edited_from = Some(std::mem::replace(&mut record.args, args.clone()));
                record.state = ToolState::Running;
            }
            // Answered when the dispatcher reports it, like every other end.
            Verdict::Deny | Verdict::Answer(_) => {}
        }
        self.retire_waiting_notice();
        vec![Effect::Tools(ToolEffect::ToolVerdict { key, verdict })]
    }

    /// Once no call waits, the notice that asked for an answer has done its job: it goes,
    /// unless something newer is shown.
    pub(super) fn retire_waiting_notice(&mut self) {
        if self.first_waiting_call().is_none()
            && let Some(index) = self.waiting_notice.take()
            && index + 1 == self.notices.len()
        {
            self.view.notices_dismissed = self.view.notices_dismissed.max(self.notices.len());
        }
    }

    pub(super) fn flag_slow(&mut self, slow: SlowCall) {
        if let Some(index) = self.find_open_call(slow.key, slow.id.as_deref(), &slow.name) {
            self.tool_calls[index].slow = true;
            self.notice(
                NoticeLevel::Warning,
                format!(
                    "{} has been running for {:.1} s; it is answered with an error if it does not finish in time.",
                    slow.name,
                    slow.elapsed.as_secs_f64()
                ),
            );
        }
    }

    /// The unanswered call an event is about: by its key, or (in recordings made before calls
    /// were numbered) the first open call with its id, or with its name when it has none.
    pub(super) fn find_open_call(
        &self,
        key: Option<CallKey>,
        id: Option<&str>,
        name: &str,
    ) -> Option<usize> {
        if let Some(key) = key {
            let index = usize::try_from(key.0).ok()?;
            return self
                .tool_calls
                .get(index)
                .filter(|c| c.state.is_open())
                .map(|_| index);
        }
        self.tool_calls.iter().position(|c| {
            c.state.is_open()
                && match id {
                    Some(id) => c.id.as_deref() == Some(id),
                    None => c.id.is_none() && c.name == name,
                }
        })
    }
}
