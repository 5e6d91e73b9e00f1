//! Runs the model's function calls concurrently and answers each exactly once.
//!
//! Every dispatched call ends in exactly one [`ToolEvent`]: `Finished` with the response to
//! send, or `Cancelled` when the server withdrew the call before it was answered (and then
//! nothing is sent). Before it runs, each call passes its tool's [`Gate`](super::Gate): it
//! runs, is refused at once, or waits for the person ([`ToolEvent::Waiting`]) until they
//! give their [`Verdict`]; its time limit starts only when it runs. Completion, cancellation
//! and a hand-typed answer race for the call's entry in the in-flight map; whoever removes it
//! first reports, the others stay silent. A running call that passes a third of its time limit
//! is reported `Slow` once, by the same per-call task that enforces the limit: nothing else
//! keeps track of running calls.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinError, JoinHandle};
use tokio::time::Instant;

use super::approval::{Decider, Decision, Unasked};
use super::progress::CallProgress;
use super::registry::{DynTool, Registry};
use super::{END_SESSION, ToolError};
use livetalk_live::excerpt::{SUMMARY, bounded, floor_char_boundary};
use livetalk_live::wire::{Behavior, FunctionCall, FunctionResponse, Scheduling};

/// The app's number for one call (its place in the tool log). Events and the person's
/// verdicts name calls by it, because the service's ids may be missing or repeated.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct CallKey(pub u64);

/// A call as the app hands it over: the model's call and the app's number for it.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyedCall {
    pub key: CallKey,
    pub call: FunctionCall,
}

/// What the person does with a call. `Approve`, `Edit` and `Deny` apply to a call waiting for
/// them; `Answer` to any call not answered yet (a running one is stopped).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Run it as the model asked.
    Approve,
    /// Run it with these arguments instead.
    Edit(Value),
    /// Do not run it: the model is told the user declined.
    Deny,
    /// Do not run it (or stop it): answer the model with this response, as typed.
    Answer(Value),
}

/// What became of one dispatched call.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolEvent {
    /// The call ended; `outcome.response` must be sent in a `toolResponse`.
    Finished(ToolOutcome),
    /// The server cancelled the call before it was answered; it must not be answered.
    Cancelled {
        /// Absent in recordings made before calls were numbered.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        key: Option<CallKey>,
        id: String,
        name: String,
        duration: Duration,
    },
    /// The call is still running after a third of its time limit: shown to the user long
    /// before the timeout answers it with an error. At most once per call, and never after
    /// the call ended.
    Slow(SlowCall),
    /// The call waits for the person's [`Verdict`]; its time limit has not started.
    Waiting(WaitingCall),
    /// The tool reported how far a running call has come (an MCP progress notification);
    /// never after the call ended.
    Progress(ProgressReport),
}

/// How far a running call has come, as its tool reported it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProgressReport {
    pub key: CallKey,
    pub id: Option<String>,
    pub name: String,
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// A call that has run past its slow mark.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SlowCall {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<CallKey>,
    pub id: Option<String>,
    pub name: String,
    pub elapsed: Duration,
}

/// A call that waits for the person.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WaitingCall {
    pub key: CallKey,
    pub id: Option<String>,
    pub name: String,
}

/// When a running call counts as slow: early enough to show, late enough that normal calls
/// never are.
pub fn slow_after(timeout: Duration) -> Duration {
    timeout / 3
}

/// How a call ended, in human terms (the model gets the same text in the response).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    Ok,
    Error(String),
    TimedOut,
    Panicked(String),
    /// Not run: the person declined it, or the headless policy does not allow it.
    Refused(String),
    /// The person answered it by hand; the response is what they typed.
    ByHand,
}

/// A finished call and the answer to send for it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToolOutcome {
    /// Absent in recordings made before calls were numbered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<CallKey>,
    pub id: Option<String>,
    pub name: String,
    /// The arguments it ran with (the person's, when they edited them).
    pub args: Value,
    pub status: ToolStatus,
    /// The exact `functionResponses` entry: the call's id (when it had one) and name.
    pub response: FunctionResponse,
    /// How long it ran (or waited, when it never ran).
    pub duration: Duration,
    /// The handler's response was over the size limit and replaced by a preview.
    pub truncated: bool,
    /// Why it ran without anybody asked (absent when the person approved it, or it never ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unasked: Option<Unasked>,
}

impl ToolOutcome {
    /// True when this is a successful `end_session`, the app's cue to close after the turn.
    pub fn ends_session(&self) -> bool {
        self.name == END_SESSION && self.status == ToolStatus::Ok
    }
}

/// Runs function calls against a registry; cheap to clone, all clones share the in-flight set.
#[derive(Clone)]
pub struct ToolDispatcher {
    shared: Arc<Shared>,
}

struct Shared {
    /// Replaced as a whole when the tool set changes; calls already admitted keep their tool.
    registry: Mutex<Arc<Registry>>,
    decider: Decider,
    events: mpsc::UnboundedSender<ToolEvent>,
    calls: Mutex<InFlight>,
}

/// Calls not answered yet, by key, so that id-less calls (which cannot be cancelled) and a
/// repeated id still get exactly one answer each.
#[derive(Default)]
struct InFlight {
    by_key: HashMap<CallKey, Unanswered>,
    by_id: HashMap<String, CallKey>,
    /// Calls in their first poll, on the dispatching thread: not in the map yet, but not
    /// ended either, so their progress counts.
    starting: std::collections::HashSet<CallKey>,
}

/// A call between its arrival and its answer.
struct Unanswered {
    info: CallInfo,
    stage: Stage,
}

enum Stage {
    /// Waiting for the person, with the tool to run once they approve.
    Waiting(Arc<dyn DynTool>),
    Running {
        handler: AbortHandle,
        supervisor: AbortHandle,
    },
}

/// What is known about a call besides its result.
#[derive(Clone)]
struct CallInfo {
    key: CallKey,
    id: Option<String>,
    name: String,
    args: Value,
    /// When it arrived, or started running once approved.
    started: Instant,
    scheduling: Option<Scheduling>,
    /// Its time limit: the tool's own, else the registry's.
    limit: Duration,
    /// Why it runs without anybody asked; `None` until it is admitted that way.
    unasked: Option<Unasked>,
}

impl ToolDispatcher {
    /// A dispatcher for the tools of `registry`; `decider` settles calls whose tool asks for
    /// approval (the person at the TUI, or the headless policy).
    pub fn new(
        registry: Arc<Registry>,
        decider: Decider,
    ) -> (Self, mpsc::UnboundedReceiver<ToolEvent>) {
        let (events, receiver) = mpsc::unbounded_channel();
        let shared = Shared {
            registry: Mutex::new(registry),
            decider,
            events,
            calls: Mutex::new(InFlight::default()),
        };
        (
            ToolDispatcher {
                shared: Arc::new(shared),
            },
            receiver,
        )
    }

    /// Starts every call of one toolCall concurrently on the current tokio runtime; returns at
    /// once.
    pub fn dispatch(&self, calls: Vec<KeyedCall>) {
        for call in calls {
            self.start(call);
        }
    }

    /// Stops calls named by a toolCallCancellation, running or waiting; returns the ids
    /// actually stopped. No response is ever produced for them.
    pub fn cancel(&self, ids: &[String]) -> Vec<String> {
        let mut stopped = Vec::new();
        {
            let mut calls = self.shared.lock();
            for id in ids {
                if let Some(key) = calls.by_id.remove(id)
                    && let Some(call) = calls.by_key.remove(&key)
                {
                    stopped.push(call);
                }
            }
        }
        let mut ids_stopped = Vec::with_capacity(stopped.len());
        for Unanswered { info, stage } in stopped {
            stage.stop();
            let id = info.id.unwrap_or_default();
            let duration = info.started.elapsed();
            tracing::info!(tool = %bounded(&info.name, SUMMARY), id = %bounded(&id, SUMMARY), ?duration, "tool call cancelled by the server");
            ids_stopped.push(id.clone());
            self.shared.emit(ToolEvent::Cancelled {
                key: Some(info.key),
                id,
                name: info.name,
                duration,
            });
        }
        ids_stopped
    }

    /// Applies the person's verdict on the call `key`. False when it does not apply: the call
    /// was answered or cancelled meanwhile, or (for all but `Answer`) is not waiting.
    pub fn decide(&self, key: CallKey, verdict: Verdict) -> bool {
        let taken = {
            let mut calls = self.shared.lock();
            let applies = calls.by_key.get(&key).is_some_and(|call| {
                matches!(verdict, Verdict::Answer(_)) || matches!(call.stage, Stage::Waiting(_))
            });
            if !applies {
                return false;
            }
            calls.take(key)
        };
        let Some(Unanswered { mut info, stage }) = taken else {
            return false;
        };
        stage.stop();
        let tool = match stage {
            Stage::Waiting(tool) => Some(tool),
            Stage::Running { .. } => None,
        };
        let tool_name = bounded(&info.name, SUMMARY);
        match (verdict, tool) {
            (Verdict::Approve, Some(tool)) => {
                tracing::info!(tool = %tool_name, "the user approved a tool call");
                self.run(info, tool);
            }
            (Verdict::Edit(args), Some(tool)) => {
                tracing::info!(tool = %tool_name, "the user approved a tool call with edited arguments");
                info.args = args;
                self.run(info, tool);
            }
            (Verdict::Deny, _) => {
                tracing::info!(tool = %tool_name, "the user declined a tool call");
                let text = format!(
                    "The user declined to run {}, so it was not called.",
                    info.name
                );
                self.shared.report_result(info, Err(Failure::Refused(text)));
            }
            (Verdict::Answer(response), _) => {
                tracing::info!(tool = %tool_name, "the user answered a tool call by hand");
                self.shared
                    .report_result(info, Ok(Answer::ByHand(response)));
            }
            // Only a waiting call can be approved; `applies` let nothing else through.
            (Verdict::Approve | Verdict::Edit(_), None) => {}
        }
        true
    }

    /// Calls started or waiting and not yet reported.
    pub fn in_flight(&self) -> usize {
        self.shared.lock().by_key.len()
    }

    /// The tools calls run against now.
    pub fn registry(&self) -> Arc<Registry> {
        self.shared.registry()
    }

    /// Runs calls against `registry` from now on; calls already admitted finish as they are.
    pub fn replace_registry(&self, registry: Arc<Registry>) {
        *self
            .shared
            .registry
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = registry;
    }

    fn start(&self, keyed: KeyedCall) {
        let KeyedCall {
            key,
            call: FunctionCall { id, name, args },
        } = keyed;
        let registry = self.shared.registry();
        let tool = registry.get(&name);
        let info = CallInfo {
            key,
            id,
            name,
            args,
            started: Instant::now(),
            scheduling: tool.as_ref().and_then(|t| scheduling_of(t.as_ref())),
            limit: tool
                .as_ref()
                .and_then(|t| t.timeout())
                .unwrap_or(registry.limits().timeout),
            unasked: None,
        };
        let Some(tool) = tool else {
            let message = unknown_tool_message(&info.name, &registry.names());
            self.shared.report(info, Err(message));
            return;
        };
        if !registry.is_enabled(&info.name) {
            let message = format!(
                "{} is turned off for this session by the user; do not call it",
                info.name
            );
            self.shared.report(info, Err(message));
            return;
        }
        let gate = registry.gate(&info.name);
        match gate.decide(&info.name, self.shared.decider) {
            Decision::Run(why) => {
                if why.worth_showing() {
                    tracing::info!(tool = %bounded(&info.name, SUMMARY), "tool call runs without asking: {}", why.reason());
                }
                self.run(
                    CallInfo {
                        unasked: Some(why),
                        ..info
                    },
                    tool,
                )
            }
            Decision::Refuse(text) => {
                tracing::info!(tool = %bounded(&info.name, SUMMARY), "tool call refused by the approval policy");
                self.shared.report_result(info, Err(Failure::Refused(text)));
            }
            Decision::Ask => {
                let event = ToolEvent::Waiting(WaitingCall {
                    key,
                    id: info.id.clone(),
                    name: info.name.clone(),
                });
                tracing::info!(tool = %bounded(&info.name, SUMMARY), "tool call waits for the user");
                let mut calls = self.shared.lock();
                calls.insert(info, Stage::Waiting(tool));
                // Under the lock, so a verdict or cancel can only be reported after it.
                self.shared.emit(event);
            }
        }
    }

    /// Runs an admitted call; its time limit starts now.
    fn run(&self, mut info: CallInfo, tool: Arc<dyn DynTool>) {
        info.started = Instant::now();
        let progress = {
            let shared = Arc::clone(&self.shared);
            let (key, id, name) = (info.key, info.id.clone(), info.name.clone());
            CallProgress::to(move |progress, total, message| {
                // Under the lock, like the slow mark: a call that has ended reports nothing more.
                let calls = shared.lock();
                if calls.by_key.contains_key(&key) || calls.starting.contains(&key) {
                    shared.emit(ToolEvent::Progress(ProgressReport {
                        key,
                        id: id.clone(),
                        name: name.clone(),
                        progress,
                        total,
                        message,
                    }));
                }
            })
        };
        let mut handler = match tool.prepare(info.args.clone(), progress) {
            Ok(handler) => handler,
            Err(message) => {
                self.shared.report(info, Err(message));
                return;
            }
        };
        // Most tools answer at once: poll once here, so such a call is answered without a
        // task of its own (two wake-ups fewer on the tool round trip). Only a call that has
        // to wait gets the supervised task below, which polls it again with a real waker.
        let mut first_poll = Context::from_waker(Waker::noop());
        self.shared.lock().starting.insert(info.key);
        IN_TOOL_HANDLER.set(true);
        let polled =
            std::panic::catch_unwind(AssertUnwindSafe(|| handler.as_mut().poll(&mut first_poll)));
        IN_TOOL_HANDLER.set(false);
        if !matches!(polled, Ok(Poll::Pending)) {
            self.shared.lock().starting.remove(&info.key);
        }
        match polled {
            Ok(Poll::Ready(result)) => {
                let result = result
                    .map(Answer::Tool)
                    .map_err(|error| Failure::Error(error.to_string()));
                self.shared.report_result(info, result);
                return;
            }
            Err(payload) => {
                self.shared
                    .report_result(info, Err(Failure::Panicked(panic_text(payload))));
                return;
            }
            Ok(Poll::Pending) => {}
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.shared.lock().starting.remove(&info.key);
            let message = format!("{} could not run: livetalk has no async runtime", info.name);
            self.shared.report(info, Err(message));
            return;
        };
        let mut calls = self.shared.lock();
        calls.starting.remove(&info.key);
        // Both tasks are spawned under the lock so neither can finish (and look for its entry)
        // before the entry exists.
        let handler = runtime.spawn(handler);
        let handler_abort = handler.abort_handle();
        let supervisor = runtime.spawn(supervise(Arc::clone(&self.shared), info.clone(), handler));
        calls.insert(
            info,
            Stage::Running {
                handler: handler_abort,
                supervisor: supervisor.abort_handle(),
            },
        );
    }
}

impl InFlight {
    fn insert(&mut self, info: CallInfo, stage: Stage) {
        let key = info.key;
        if let Some(id) = &info.id {
            if self.by_id.contains_key(id) {
                tracing::warn!(tool = %bounded(&info.name, SUMMARY), id = %bounded(id, SUMMARY), "a call with this id is already unanswered; this one cannot be cancelled");
            } else {
                self.by_id.insert(id.clone(), key);
            }
        }
        self.by_key.insert(key, Unanswered { info, stage });
    }

    /// Removes the call `key`, if it is still unanswered: the one who does reports it.
    fn take(&mut self, key: CallKey) -> Option<Unanswered> {
        let call = self.by_key.remove(&key)?;
        if let Some(id) = &call.info.id
            && self.by_id.get(id) == Some(&key)
        {
            self.by_id.remove(id);
        }
        Some(call)
    }
}

impl Stage {
    /// Stops whatever runs for the call (a waiting call has nothing running).
    fn stop(&self) {
        if let Stage::Running {
            handler,
            supervisor,
        } = self
        {
            handler.abort();
            supervisor.abort();
        }
    }
}

/// Waits for the handler under the time limit and reports, unless a cancel or the person got
/// there first.
async fn supervise(
    shared: Arc<Shared>,
    info: CallInfo,
    mut handler: JoinHandle<Result<Value, ToolError>>,
) {
    let limit = info.limit;
    let slow_mark = slow_after(limit);
    if let Ok(finished) = tokio::time::timeout(slow_mark, &mut handler).await {
        return settle(shared, info, Ok(finished));
    }
    // Only a call still in the map is reported, under the lock, so a cancel reports after it.
    {
        let calls = shared.lock();
        if calls.by_key.contains_key(&info.key) {
            shared.emit(ToolEvent::Slow(SlowCall {
                key: Some(info.key),
                id: info.id.clone(),
                name: info.name.clone(),
                elapsed: info.started.elapsed(),
            }));
        }
    }
    let waited = tokio::time::timeout(limit.saturating_sub(slow_mark), &mut handler).await;
    if waited.is_err() {
        handler.abort();
    }
    settle(shared, info, waited.map_err(|_| limit));
}

/// Reports how the handler ended (or that it ran out of `limit`), unless a cancel or the
/// person got there first.
fn settle(
    shared: Arc<Shared>,
    info: CallInfo,
    joined: Result<Result<Result<Value, ToolError>, JoinError>, Duration>,
) {
    let result = match joined {
        Ok(Ok(Ok(value))) => Ok(Answer::Tool(value)),
        Ok(Ok(Err(error))) => Err(Failure::Error(error.to_string())),
        Ok(Err(join_error)) => Err(joined_failure(join_error)),
        Err(limit) => Err(Failure::TimedOut(limit)),
    };
    if shared.lock().take(info.key).is_none() {
        // Cancelled or answered by hand: that already reported this call.
        return;
    }
    shared.report_result(info, result);
}

/// A call's answer other than a failure.
enum Answer {
    /// What the tool returned.
    Tool(Value),
    /// What the person typed.
    ByHand(Value),
}

enum Failure {
    Error(String),
    TimedOut(Duration),
    Panicked(String),
    Refused(String),
}

thread_local! {
    /// Set while a tool handler runs on the caller's thread (its first poll).
    static IN_TOOL_HANDLER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// True while a tool handler runs on this thread: a panic now is the tool's, caught and
/// answered as an error, so a panic hook must not treat it as the app's (and, say, tear
/// the terminal down).
pub fn in_tool_handler() -> bool {
    IN_TOOL_HANDLER.get()
}

/// What a panic said, when it said it with a string.
fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned())
}

fn joined_failure(error: JoinError) -> Failure {
    if error.is_panic() {
        Failure::Panicked(panic_text(error.into_panic()))
    } else {
        // Only a cancel or the person aborts a handler, and they then own the report.
        Failure::Error("the tool call was stopped".to_owned())
    }
}

impl Shared {
    fn registry(&self) -> Arc<Registry> {
        Arc::clone(&self.registry.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn lock(&self) -> MutexGuard<'_, InFlight> {
        // The map stays consistent even if a holder panicked: every critical section is a few
        // map operations with no panicking calls between them.
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn emit(&self, event: ToolEvent) {
        if self.events.send(event).is_err() {
            tracing::debug!("tool event dropped: nobody is listening any more");
        }
    }

    /// Reports a call that failed before it could start.
    fn report(&self, info: CallInfo, result: Result<Value, String>) {
        self.report_result(info, result.map(Answer::Tool).map_err(Failure::Error));
    }

    fn report_result(&self, info: CallInfo, result: Result<Answer, Failure>) {
        let (status, body) = match result {
            Ok(Answer::Tool(value)) => (ToolStatus::Ok, wrap_success(value)),
            Ok(Answer::ByHand(value)) => (ToolStatus::ByHand, wrap_success(value)),
            Err(Failure::Error(message)) => {
                let body = error_body(&message);
                (ToolStatus::Error(message), body)
            }
            Err(Failure::Refused(message)) => {
                let body = error_body(&message);
                (ToolStatus::Refused(message), body)
            }
            Err(Failure::TimedOut(limit)) => {
                let message = format!(
                    "{} did not finish within {} and was stopped",
                    info.name,
                    human_duration(limit)
                );
                (ToolStatus::TimedOut, error_body(&message))
            }
            Err(Failure::Panicked(panic)) => {
                let message = format!("{} failed with an internal error: {panic}", info.name);
                (ToolStatus::Panicked(panic), error_body(&message))
            }
        };
        let limit = self.registry().limits().max_response_bytes;
        let (body, truncated) = fit_response(body, limit);
        // The name and the message may quote whatever the server sent: the log gets a summary.
        let tool = bounded(&info.name, SUMMARY);
        if truncated {
            tracing::warn!(%tool, limit_bytes = limit, "tool response over the size limit; sent a truncated preview");
        }
        let duration = info.started.elapsed();
        match &status {
            ToolStatus::Ok | ToolStatus::ByHand => {
                tracing::debug!(%tool, ?duration, "tool call finished")
            }
            ToolStatus::Error(message) | ToolStatus::Refused(message) => {
                let message = bounded(message, SUMMARY);
                tracing::info!(%tool, ?duration, %message, "tool call failed");
            }
            ToolStatus::TimedOut => {
                tracing::warn!(%tool, ?duration, "tool call timed out")
            }
            ToolStatus::Panicked(message) => {
                let message = bounded(message, SUMMARY);
                tracing::warn!(%tool, ?duration, %message, "tool handler panicked");
            }
        }
        let response = FunctionResponse {
            id: info.id.clone(),
            name: info.name.clone(),
            response: body,
            will_continue: None,
            scheduling: info.scheduling,
        };
        self.emit(ToolEvent::Finished(ToolOutcome {
            key: Some(info.key),
            id: info.id,
            name: info.name,
            args: info.args,
            status,
            response,
            duration,
            truncated,
            unasked: info.unasked,
        }));
    }
}

fn scheduling_of(tool: &dyn DynTool) -> Option<Scheduling> {
    (tool.behavior() == Behavior::NonBlocking).then(|| tool.scheduling())
}

fn unknown_tool_message(name: &str, available: &[&str]) -> String {
    if available.is_empty() {
        format!("unknown tool \"{name}\": no tools are enabled")
    } else {
        format!(
            "unknown tool \"{name}\"; available tools: {}",
            available.join(", ")
        )
    }
}

/// `response` must be a JSON object (a protobuf Struct), so other values are wrapped.
fn wrap_success(value: Value) -> Value {
    match value {
        Value::Object(_) => value,
        other => json!({ "result": other }),
    }
}

fn error_body(message: &str) -> Value {
    json!({ "success": false, "error": message })
}

fn human_duration(duration: Duration) -> String {
    if duration.subsec_millis() == 0 {
        format!("{} s", duration.as_secs())
    } else {
        format!("{} ms", duration.as_millis())
    }
}

const TRUNCATION_NOTE: &str = "response truncated by livetalk: over the size limit";

/// Keeps `body` when its JSON fits in `limit` bytes; otherwise replaces it by an object telling
/// the model what happened, with as much of the original JSON as still fits.
fn fit_response(body: Value, limit: usize) -> (Value, bool) {
    let text = body.to_string();
    if text.len() <= limit {
        return (body, false);
    }
    let summary = |preview: Option<&str>| {
        let mut object = json!({
            "truncated": true,
            "original_bytes": text.len(),
            "limit_bytes": limit,
            "note": TRUNCATION_NOTE,
        });
        if let (Some(preview), Some(map)) = (preview, object.as_object_mut()) {
            map.insert("preview".into(), Value::String(preview.to_owned()));
        }
        object
    };
    // Escaping makes the preview's encoded size unknowable up front, so shrink until it fits;
    // each round removes at least the overshoot, so this ends quickly.
    let mut cut = floor_char_boundary(&text, limit.min(text.len()));
    loop {
        let candidate = summary(Some(&text[..cut]));
        let size = candidate.to_string().len();
        if size <= limit {
            return (candidate, true);
        }
        if cut == 0 {
            // A limit too small for even the empty summary: send the smallest honest answer.
            return (summary(None), true);
        }
        cut = floor_char_boundary(&text, cut.saturating_sub((size - limit).max(1)));
    }
}

#[cfg(test)]
mod tests {
    use schemars::JsonSchema;
    use serde::Deserialize;
    use tokio::sync::Barrier;

    use super::*;
    use crate::tools::{ApprovePolicy, Tool, ToolLimits};

    const WAIT: Duration = Duration::from_secs(30);

    #[derive(Deserialize, JsonSchema)]
    struct SleepArgs {
        /// Milliseconds to sleep.
        ms: u64,
    }

    /// Sleeps, then reports; tells `dropped` when its future goes away (finished or aborted).
    struct Sleepy {
        dropped: mpsc::UnboundedSender<u64>,
    }

    /// Reports the call's `ms` when the handler future is dropped.
    struct DropSignal(mpsc::UnboundedSender<u64>, u64);

    impl Drop for DropSignal {
        fn drop(&mut self) {
            let _ = self.0.send(self.1);
        }
    }

    impl Tool for Sleepy {
        type Args = SleepArgs;
        fn name(&self) -> &'static str {
            "sleepy"
        }
        fn description(&self) -> &'static str {
            "Sleeps."
        }
        async fn call(&self, args: SleepArgs) -> Result<Value, ToolError> {
            let _signal = DropSignal(self.dropped.clone(), args.ms);
            tokio::time::sleep(Duration::from_millis(args.ms)).await;
            Ok(json!({ "slept_ms": args.ms }))
        }
    }

    #[derive(Deserialize, JsonSchema)]
    struct NoArgs {}

    struct Meet(Arc<Barrier>);

    impl Tool for Meet {
        type Args = NoArgs;
        fn name(&self) -> &'static str {
            "meet"
        }
        fn description(&self) -> &'static str {
            "Waits until three calls are running at once."
        }
        async fn call(&self, _: NoArgs) -> Result<Value, ToolError> {
            self.0.wait().await;
            Ok(json!({ "met": true }))
        }
    }

    struct Fails;

    impl Tool for Fails {
        type Args = NoArgs;
        fn name(&self) -> &'static str {
            "fails"
        }
        fn description(&self) -> &'static str {
            "Always fails."
        }
        async fn call(&self, _: NoArgs) -> Result<Value, ToolError> {
            Err(ToolError::failed("the lamp is on fire"))
        }
    }

    struct Panics;

    impl Tool for Panics {
        type Args = NoArgs;
        fn name(&self) -> &'static str {
            "panics"
        }
        fn description(&self) -> &'static str {
            "Always panics."
        }
        async fn call(&self, _: NoArgs) -> Result<Value, ToolError> {
            panic!("boom at the bottom")
        }
    }

    #[derive(Deserialize, JsonSchema)]
    struct BigArgs {
        /// Bytes of text to return.
        bytes: usize,
    }

    struct Big;

    impl Tool for Big {
        type Args = BigArgs;
        fn name(&self) -> &'static str {
            "big"
        }
        fn description(&self) -> &'static str {
            "Returns a lot of quoted text."
        }
        async fn call(&self, args: BigArgs) -> Result<Value, ToolError> {
            // Quotes and non-ASCII make the escaped size differ from the raw size.
            let text: String = "\"é".chars().cycle().take(args.bytes).collect();
            Ok(json!({ "text": text }))
        }
    }

    struct Answer;

    impl Tool for Answer {
        type Args = NoArgs;
        fn name(&self) -> &'static str {
            "answer"
        }
        fn description(&self) -> &'static str {
            "Returns a bare number."
        }
        async fn call(&self, _: NoArgs) -> Result<Value, ToolError> {
            Ok(json!(42))
        }
    }

    struct Background(Scheduling);

    impl Tool for Background {
        type Args = NoArgs;
        fn name(&self) -> &'static str {
            "background"
        }
        fn description(&self) -> &'static str {
            "Non-blocking."
        }
        fn behavior(&self) -> Behavior {
            Behavior::NonBlocking
        }
        fn scheduling(&self) -> Scheduling {
            self.0
        }
        async fn call(&self, _: NoArgs) -> Result<Value, ToolError> {
            Ok(json!({ "done": true }))
        }
    }

    struct BackgroundFails;

    impl Tool for BackgroundFails {
        type Args = NoArgs;
        fn name(&self) -> &'static str {
            "background_fails"
        }
        fn description(&self) -> &'static str {
            "Non-blocking and failing."
        }
        fn behavior(&self) -> Behavior {
            Behavior::NonBlocking
        }
        fn scheduling(&self) -> Scheduling {
            Scheduling::Interrupt
        }
        async fn call(&self, _: NoArgs) -> Result<Value, ToolError> {
            Err(ToolError::invalid("nope"))
        }
    }

    struct Fixture {
        dispatcher: ToolDispatcher,
        events: mpsc::UnboundedReceiver<ToolEvent>,
        dropped: mpsc::UnboundedReceiver<u64>,
    }

    fn fixture(limits: ToolLimits, barrier: usize) -> Fixture {
        fixture_asking(limits, barrier, &[], Decider::Person)
    }

    /// A fixture where the tools named in `asking` need approval, decided by `decider`.
    fn fixture_asking(
        limits: ToolLimits,
        barrier: usize,
        asking: &[&str],
        decider: Decider,
    ) -> Fixture {
        let (dropped_tx, dropped) = mpsc::unbounded_channel();
        let mut registry = Registry::new(limits);
        registry.register(Sleepy {
            dropped: dropped_tx,
        });
        registry.register(Meet(Arc::new(Barrier::new(barrier))));
        registry.register(Fails);
        registry.register(Panics);
        registry.register(Big);
        registry.register(Answer);
        registry.register(Background(Scheduling::Silent));
        registry.register(BackgroundFails);
        for name in asking {
            registry.set_approval(name, crate::tools::Approval::Always);
        }
        let (dispatcher, events) = ToolDispatcher::new(Arc::new(registry), decider);
        Fixture {
            dispatcher,
            events,
            dropped,
        }
    }

    /// A call under a key no other call of the test run has.
    fn call(id: &str, name: &str, args: Value) -> KeyedCall {
        keyed(FunctionCall {
            id: Some(id.to_owned()),
            name: name.to_owned(),
            args,
        })
    }

    fn keyed(call: FunctionCall) -> KeyedCall {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        KeyedCall {
            key: CallKey(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)),
            call,
        }
    }

    async fn next_event(events: &mut mpsc::UnboundedReceiver<ToolEvent>) -> ToolEvent {
        match tokio::time::timeout(WAIT, events.recv()).await {
            Ok(Some(event)) => event,
            Ok(None) => panic!("event channel closed"),
            Err(_) => panic!("no tool event within {WAIT:?}"),
        }
    }

    async fn next_outcome(events: &mut mpsc::UnboundedReceiver<ToolEvent>) -> ToolOutcome {
        match next_event(events).await {
            ToolEvent::Finished(outcome) => outcome,
            other => panic!("expected Finished, got {other:?}"),
        }
    }

    /// Waits until the handler of the sleepy call with this `ms` has been dropped.
    async fn wait_dropped(dropped: &mut mpsc::UnboundedReceiver<u64>, ms: u64) {
        loop {
            match tokio::time::timeout(WAIT, dropped.recv()).await {
                Ok(Some(seen)) if seen == ms => return,
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => panic!("the {ms} ms handler was never dropped"),
            }
        }
    }

    /// Drops the dispatcher and collects every remaining event; the channel closes only once
    /// every supervisor task is gone, so nothing can arrive later.
    async fn drain(fixture: Fixture) -> Vec<ToolEvent> {
        let Fixture {
            dispatcher,
            mut events,
            ..
        } = fixture;
        drop(dispatcher);
        let mut rest = Vec::new();
        loop {
            match tokio::time::timeout(WAIT, events.recv()).await {
                Ok(Some(event)) => rest.push(event),
                Ok(None) => return rest,
                Err(_) => panic!("tool tasks still alive after {WAIT:?}"),
            }
        }
    }

    #[tokio::test]
    async fn calls_run_concurrently() {
        // Each call waits at a barrier for the other two, so they only finish if all three run
        // at the same time; run one after another, the first would hit the time limit instead.
        let limits = ToolLimits {
            timeout: Duration::from_secs(5),
            ..ToolLimits::default()
        };
        let mut f = fixture(limits, 3);
        f.dispatcher.dispatch(vec![
            call("1", "meet", json!({})),
            call("2", "meet", json!({})),
            call("3", "meet", json!({})),
        ]);
        // The first two wait at the barrier in tasks of their own; the third meets them in its
        // first poll and is answered at once.
        assert_eq!(f.dispatcher.in_flight(), 2);
        let mut ids = Vec::new();
        for _ in 0..3 {
            let outcome = next_outcome(&mut f.events).await;
            assert_eq!(outcome.status, ToolStatus::Ok);
            assert_eq!(outcome.response.response, json!({"met": true}));
            ids.extend(outcome.id);
        }
        ids.sort();
        assert_eq!(ids, ["1", "2", "3"]);
        assert_eq!(f.dispatcher.in_flight(), 0);
    }

    #[tokio::test]
    async fn three_slow_calls_take_the_time_of_one() {
        let mut f = fixture(ToolLimits::default(), 1);
        f.dispatcher.dispatch(vec![
            call("a", "sleepy", json!({"ms": 200})),
            call("b", "sleepy", json!({"ms": 200})),
            call("c", "sleepy", json!({"ms": 200})),
        ]);
        let mut last_started_to_end = Duration::ZERO;
        for _ in 0..3 {
            let outcome = next_outcome(&mut f.events).await;
            assert_eq!(outcome.status, ToolStatus::Ok);
            assert!(outcome.duration >= Duration::from_millis(200));
            last_started_to_end = last_started_to_end.max(outcome.duration);
        }
        // Each call's own clock starts at dispatch; serial execution would give the last one
        // at least 600 ms.
        assert!(
            last_started_to_end < Duration::from_millis(600),
            "{last_started_to_end:?}"
        );
    }

    #[tokio::test]
    async fn successful_response_carries_id_name_and_result() {
        let mut f = fixture(ToolLimits::default(), 1);
        f.dispatcher
            .dispatch(vec![call("x1", "sleepy", json!({"ms": 1}))]);
        let outcome = next_outcome(&mut f.events).await;
        assert_eq!(outcome.id.as_deref(), Some("x1"));
        assert_eq!(outcome.name, "sleepy");
        assert_eq!(outcome.args, json!({"ms": 1}));
        assert!(!outcome.truncated);
        assert_eq!(
            outcome.response,
            FunctionResponse {
                id: Some("x1".into()),
                name: "sleepy".into(),
                response: json!({"slept_ms": 1}),
                will_continue: None,
                scheduling: None,
            }
        );
    }

    #[tokio::test]
    async fn non_object_results_are_wrapped() {
        let mut f = fixture(ToolLimits::default(), 1);
        f.dispatcher
            .dispatch(vec![call("n", "answer", Value::Null)]);
        let outcome = next_outcome(&mut f.events).await;
        assert_eq!(outcome.response.response, json!({"result": 42}));
    }

    #[tokio::test]
    async fn unknown_tool_is_answered_with_an_error() {
        let mut f = fixture(ToolLimits::default(), 1);
        f.dispatcher
            .dispatch(vec![call("u", "make_coffee", json!({}))]);
        let outcome = next_outcome(&mut f.events).await;
        let ToolStatus::Error(message) = &outcome.status else {
            panic!("unexpected {:?}", outcome.status);
        };
        assert!(message.contains("\"make_coffee\""), "{message}");
        assert!(message.contains("sleepy"), "{message}");
        assert_eq!(outcome.response.id.as_deref(), Some("u"));
        assert_eq!(outcome.response.name, "make_coffee");
        assert_eq!(outcome.response.response["success"], false);
        assert_eq!(outcome.response.response["error"], json!(message));
        assert_eq!(f.dispatcher.in_flight(), 0);
    }

    #[tokio::test]
    async fn bad_arguments_say_which_and_why() {
        let mut f = fixture(ToolLimits::default(), 1);
        f.dispatcher.dispatch(vec![
            call("wrong", "sleepy", json!({"ms": "soon"})),
            call("missing", "sleepy", json!({})),
        ]);
        let wrong = next_outcome(&mut f.events).await;
        let missing = next_outcome(&mut f.events).await;
        let error_of = |o: &ToolOutcome| match &o.status {
            ToolStatus::Error(m) => m.clone(),
            other => panic!("unexpected {other:?}"),
        };
        let message = error_of(&wrong);
        assert!(message.contains("`ms`"), "{message}");
        assert!(
            message.contains("invalid type: string \"soon\""),
            "{message}"
        );
        assert_eq!(wrong.response.response["error"], json!(message));
        let message = error_of(&missing);
        assert!(message.contains("missing field `ms`"), "{message}");
        assert_eq!(missing.response.response["success"], false);
    }

    #[tokio::test]
    async fn handler_errors_become_error_responses() {
        let mut f = fixture(ToolLimits::default(), 1);
        f.dispatcher.dispatch(vec![call("e", "fails", json!({}))]);
        let outcome = next_outcome(&mut f.events).await;
        assert_eq!(
            outcome.status,
            ToolStatus::Error("the lamp is on fire".into())
        );
        assert_eq!(
            outcome.response.response,
            json!({"success": false, "error": "the lamp is on fire"})
        );
    }

    #[tokio::test]
    async fn a_panic_is_contained_and_answered() {
        let mut f = fixture(ToolLimits::default(), 1);
        f.dispatcher.dispatch(vec![call("p", "panics", json!({}))]);
        let outcome = next_outcome(&mut f.events).await;
        assert_eq!(
            outcome.status,
            ToolStatus::Panicked("boom at the bottom".into())
        );
        assert_eq!(outcome.response.response["success"], false);
        let error = outcome.response.response["error"].as_str().unwrap_or("");
        assert!(
            error.contains("panics") && error.contains("boom"),
            "{error}"
        );
        // The dispatcher keeps working.
        f.dispatcher
            .dispatch(vec![call("after", "answer", json!({}))]);
        let outcome = next_outcome(&mut f.events).await;
        assert_eq!(outcome.status, ToolStatus::Ok);
    }

    #[tokio::test]
    async fn slow_calls_time_out_and_are_stopped() {
        let limits = ToolLimits {
            timeout: Duration::from_millis(50),
            ..ToolLimits::default()
        };
        let mut f = fixture(limits, 1);
        f.dispatcher
            .dispatch(vec![call("t", "sleepy", json!({"ms": 3_600_000}))]);
        // Flagged slow once, a third of the way to the limit, by the call's own task.
        match next_event(&mut f.events).await {
            ToolEvent::Slow(slow) => {
                assert_eq!(
                    (slow.id.as_deref(), slow.name.as_str()),
                    (Some("t"), "sleepy")
                );
                assert!(slow.elapsed >= slow_after(limits.timeout), "{slow:?}");
                assert!(slow.elapsed < limits.timeout, "{slow:?}");
            }
            other => panic!("expected Slow, got {other:?}"),
        }
        let outcome = next_outcome(&mut f.events).await;
        assert_eq!(outcome.status, ToolStatus::TimedOut);
        assert!(outcome.duration >= Duration::from_millis(50));
        let error = outcome.response.response["error"].as_str().unwrap_or("");
        assert!(
            error.contains("sleepy") && error.contains("50 ms"),
            "{error}"
        );
        // The handler future was dropped, not left running.
        wait_dropped(&mut f.dropped, 3_600_000).await;
    }

    #[tokio::test]
    async fn cancelled_calls_are_stopped_and_never_answered() {
        let mut f = fixture(ToolLimits::default(), 1);
        f.dispatcher.dispatch(vec![
            call("slow", "sleepy", json!({"ms": 3_600_000})),
            call("other", "sleepy", json!({"ms": 10})),
        ]);
        tokio::task::yield_now().await;
        let stopped = f
            .dispatcher
            .cancel(&["slow".to_owned(), "never-seen".to_owned()]);
        assert_eq!(stopped, ["slow"]);
        match next_event(&mut f.events).await {
            ToolEvent::Cancelled { id, name, .. } => {
                assert_eq!((id.as_str(), name.as_str()), ("slow", "sleepy"));
            }
            other => panic!("expected Cancelled, got {other:?}"),
        }
        wait_dropped(&mut f.dropped, 3_600_000).await;
        let other = next_outcome(&mut f.events).await;
        assert_eq!(other.id.as_deref(), Some("other"));
        // Cancelling again, or after the finish, stops nothing.
        assert!(f.dispatcher.cancel(&["slow".to_owned()]).is_empty());
        assert!(f.dispatcher.cancel(&["other".to_owned()]).is_empty());
        // The channel closes only when every task is gone, so this sees any late answer.
        let rest = drain(f).await;
        assert!(rest.is_empty(), "late events: {rest:?}");
    }

    #[tokio::test]
    async fn a_call_that_answers_at_once_needs_no_task_and_one_that_waits_gets_one() {
        let mut f = fixture(ToolLimits::default(), 1);
        f.dispatcher
            .dispatch(vec![call("now", "answer", json!({}))]);
        // Answered within `dispatch`: the event is already queued, nothing is in flight.
        assert_eq!(f.dispatcher.in_flight(), 0);
        match f.events.try_recv() {
            Ok(ToolEvent::Finished(outcome)) => assert_eq!(outcome.id.as_deref(), Some("now")),
            other => panic!("expected the answer at once, got {other:?}"),
        }
        f.dispatcher
            .dispatch(vec![call("later", "sleepy", json!({"ms": 5}))]);
        assert_eq!(f.dispatcher.in_flight(), 1);
        assert_eq!(
            next_outcome(&mut f.events).await.id.as_deref(),
            Some("later")
        );
        // A panic in the first poll is the tool's: answered as an error, the caller unharmed.
        f.dispatcher
            .dispatch(vec![call("boom", "panics", json!({}))]);
        let outcome = next_outcome(&mut f.events).await;
        assert!(
            matches!(outcome.status, ToolStatus::Panicked(_)),
            "{outcome:?}"
        );
        assert!(!in_tool_handler());
    }

    #[tokio::test]
    async fn a_call_is_flagged_slow_once_and_a_quick_or_cancelled_one_never() {
        let limits = ToolLimits {
            timeout: Duration::from_millis(600),
            ..ToolLimits::default()
        };
        let mut f = fixture(limits, 1);
        f.dispatcher.dispatch(vec![
            call("quick", "sleepy", json!({"ms": 1})),
            call("long", "sleepy", json!({"ms": 400})),
            call("gone", "sleepy", json!({"ms": 3_600_000})),
        ]);
        assert_eq!(
            next_outcome(&mut f.events).await.id.as_deref(),
            Some("quick")
        );
        // Both still-running calls pass the 200 ms mark; each is flagged once.
        let mut flagged = Vec::new();
        for _ in 0..2 {
            match next_event(&mut f.events).await {
                ToolEvent::Slow(slow) => flagged.extend(slow.id),
                other => panic!("expected Slow, got {other:?}"),
            }
        }
        flagged.sort();
        assert_eq!(flagged, ["gone", "long"]);
        assert_eq!(f.dispatcher.cancel(&["gone".to_owned()]), ["gone"]);
        assert!(matches!(
            next_event(&mut f.events).await,
            ToolEvent::Cancelled { .. }
        ));
        let long = next_outcome(&mut f.events).await;
        assert_eq!(
            (long.id.as_deref(), &long.status),
            (Some("long"), &ToolStatus::Ok)
        );
        let rest = drain(f).await;
        assert!(
            rest.is_empty(),
            "no second flag, nothing after the end: {rest:?}"
        );
    }

    #[tokio::test]
    async fn a_repeated_id_still_gets_one_answer_per_call() {
        let mut f = fixture(ToolLimits::default(), 1);
        f.dispatcher.dispatch(vec![
            call("dup", "sleepy", json!({"ms": 3_600_000})),
            call("dup", "sleepy", json!({"ms": 1})),
        ]);
        // The cancel reaches the first call with that id; the second runs to completion.
        assert_eq!(f.dispatcher.cancel(&["dup".to_owned()]), ["dup"]);
        let mut kinds = Vec::new();
        for _ in 0..2 {
            kinds.push(match next_event(&mut f.events).await {
                ToolEvent::Cancelled { .. } => "cancelled",
                ToolEvent::Finished(o) => {
                    assert_eq!(o.args, json!({"ms": 1}));
                    "finished"
                }
                other => panic!("nothing here runs long or waits: {other:?}"),
            });
        }
        kinds.sort_unstable();
        assert_eq!(kinds, ["cancelled", "finished"]);
        assert!(drain(f).await.is_empty());
    }

    #[tokio::test]
    async fn calls_without_id_are_answered_but_not_cancellable() {
        let mut f = fixture(ToolLimits::default(), 1);
        f.dispatcher.dispatch(vec![keyed(FunctionCall {
            id: None,
            name: "sleepy".into(),
            args: json!({"ms": 20}),
        })]);
        assert!(f.dispatcher.cancel(&[String::new()]).is_empty());
        let outcome = next_outcome(&mut f.events).await;
        assert_eq!(outcome.id, None);
        assert_eq!(outcome.response.id, None);
        assert_eq!(outcome.response.name, "sleepy");
    }

    #[tokio::test]
    async fn oversized_responses_are_truncated_under_the_limit() {
        let limits = ToolLimits {
            max_response_bytes: 300,
            ..ToolLimits::default()
        };
        let mut f = fixture(limits, 1);
        f.dispatcher
            .dispatch(vec![call("big", "big", json!({"bytes": 10_000}))]);
        let outcome = next_outcome(&mut f.events).await;
        assert!(outcome.truncated);
        assert_eq!(outcome.status, ToolStatus::Ok);
        let body = &outcome.response.response;
        assert!(body.to_string().len() <= 300, "{body}");
        assert_eq!(body["truncated"], true);
        assert_eq!(body["limit_bytes"], 300);
        let original =
            json!({"text": "\"é".chars().cycle().take(10_000).collect::<String>()}).to_string();
        assert_eq!(body["original_bytes"], original.len());
        let preview = body["preview"].as_str().unwrap_or("");
        assert!(!preview.is_empty());
        assert!(original.starts_with(preview));
        assert!(body["note"].as_str().unwrap_or("").contains("truncated"));

        // Small responses pass untouched.
        f.dispatcher
            .dispatch(vec![call("small", "big", json!({"bytes": 10}))]);
        let outcome = next_outcome(&mut f.events).await;
        assert!(!outcome.truncated);
        assert!(outcome.response.response["text"].is_string());
    }

    #[test]
    fn truncation_copes_with_tiny_limits() {
        let body = json!({"text": "x".repeat(1000)});
        for limit in [0, 1, 50, 120, 150, 200] {
            let (fitted, truncated) = fit_response(body.clone(), limit);
            assert!(truncated);
            assert_eq!(fitted["truncated"], true);
            if fitted.get("preview").is_some() {
                assert!(fitted.to_string().len() <= limit, "{limit}: {fitted}");
            }
        }
        let (fitted, _) = fit_response(body, 200);
        assert!(fitted.get("preview").is_some(), "{fitted}");
    }

    #[tokio::test]
    async fn scheduling_only_on_non_blocking_tools() {
        let mut f = fixture(ToolLimits::default(), 1);
        f.dispatcher
            .dispatch(vec![call("bg", "background", json!({}))]);
        let outcome = next_outcome(&mut f.events).await;
        assert_eq!(outcome.response.scheduling, Some(Scheduling::Silent));

        f.dispatcher
            .dispatch(vec![call("bgf", "background_fails", json!({}))]);
        let outcome = next_outcome(&mut f.events).await;
        assert_eq!(outcome.response.scheduling, Some(Scheduling::Interrupt));
        assert_eq!(outcome.response.response["error"], "nope");

        f.dispatcher.dispatch(vec![call("fg", "answer", json!({}))]);
        let outcome = next_outcome(&mut f.events).await;
        assert_eq!(outcome.response.scheduling, None);

        f.dispatcher
            .dispatch(vec![call("nx", "nothing", json!({}))]);
        let outcome = next_outcome(&mut f.events).await;
        assert_eq!(outcome.response.scheduling, None);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn exactly_one_event_per_call_under_cancel_races() {
        const ROUNDS: usize = 300;
        let mut f = fixture(ToolLimits::default(), 1);
        let mut cancelled_ids = Vec::new();
        for round in 0..ROUNDS {
            let id = format!("r{round}");
            // Vary how close to completion the cancel lands, including "already done".
            let ms = (round % 3) as u64;
            f.dispatcher
                .dispatch(vec![call(&id, "sleepy", json!({ "ms": ms }))]);
            if round % 2 == 0 {
                tokio::task::yield_now().await;
            } else {
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            cancelled_ids.extend(f.dispatcher.cancel(std::slice::from_ref(&id)));
        }
        let mut finished: HashMap<String, usize> = HashMap::new();
        let mut cancelled: HashMap<String, usize> = HashMap::new();
        let mut seen = 0;
        while seen < ROUNDS {
            seen += 1;
            match next_event(&mut f.events).await {
                ToolEvent::Finished(o) => {
                    *finished.entry(o.id.unwrap_or_default()).or_default() += 1;
                }
                ToolEvent::Cancelled { id, .. } => *cancelled.entry(id).or_default() += 1,
                other => panic!("nothing here runs long or waits: {other:?}"),
            }
        }
        let late = drain(f).await;
        assert!(late.is_empty(), "{} extra events", late.len());
        for round in 0..ROUNDS {
            let id = format!("r{round}");
            let f_count = finished.get(&id).copied().unwrap_or(0);
            let c_count = cancelled.get(&id).copied().unwrap_or(0);
            assert_eq!(
                f_count + c_count,
                1,
                "{id}: {f_count} finished, {c_count} cancelled"
            );
            assert_eq!(c_count == 1, cancelled_ids.contains(&id), "{id}");
        }
    }

    #[test]
    fn end_session_outcome_is_recognised() {
        let outcome = |name: &str, status| ToolOutcome {
            key: None,
            id: None,
            name: name.into(),
            args: json!({}),
            status,
            response: FunctionResponse::default(),
            duration: Duration::ZERO,
            truncated: false,
            unasked: None,
        };
        assert!(outcome(END_SESSION, ToolStatus::Ok).ends_session());
        assert!(!outcome(END_SESSION, ToolStatus::TimedOut).ends_session());
        assert!(!outcome("get_current_time", ToolStatus::Ok).ends_session());
    }

    fn waiting_key(event: ToolEvent) -> CallKey {
        match event {
            ToolEvent::Waiting(waiting) => waiting.key,
            other => panic!("expected Waiting, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_call_that_asks_waits_untimed_and_runs_once_approved() {
        let limits = ToolLimits {
            timeout: Duration::from_millis(300),
            ..ToolLimits::default()
        };
        let mut f = fixture_asking(limits, 1, &["sleepy"], Decider::Person);
        let asked = call("w", "sleepy", json!({"ms": 20}));
        let key = asked.key;
        f.dispatcher.dispatch(vec![asked]);
        assert_eq!(waiting_key(next_event(&mut f.events).await), key);
        assert_eq!(f.dispatcher.in_flight(), 1);
        // Three time limits pass while the person decides: no slow mark, no timeout.
        let quiet = tokio::time::timeout(Duration::from_millis(900), f.events.recv()).await;
        assert!(quiet.is_err(), "nothing happens while it waits: {quiet:?}");
        assert!(f.dispatcher.decide(key, Verdict::Approve));
        // Its own 300 ms start now: 20 ms of work fits, under the slow mark too.
        let outcome = next_outcome(&mut f.events).await;
        assert_eq!((outcome.key, &outcome.status), (Some(key), &ToolStatus::Ok));
        assert_eq!(outcome.response.response, json!({"slept_ms": 20}));
        assert!(outcome.duration < Duration::from_millis(300), "{outcome:?}");
        assert!(!f.dispatcher.decide(key, Verdict::Approve), "answered once");
        assert!(drain(f).await.is_empty());
    }

    #[tokio::test]
    async fn deny_edit_and_answer_settle_a_waiting_call_once() {
        let mut f = fixture_asking(
            ToolLimits::default(),
            1,
            &["sleepy", "answer"],
            Decider::Person,
        );
        let denied = call("d", "answer", json!({}));
        let edited = call("e", "sleepy", json!({"ms": "soon"}));
        let answered = call("a", "answer", json!({}));
        let keys = [denied.key, edited.key, answered.key];
        f.dispatcher.dispatch(vec![denied, edited, answered]);
        for key in keys {
            assert_eq!(waiting_key(next_event(&mut f.events).await), key);
        }
        // Only an answer applies to a call that is not waiting; nothing applies to one unknown.
        assert!(!f.dispatcher.decide(CallKey(u64::MAX), Verdict::Approve));

        assert!(f.dispatcher.decide(keys[0], Verdict::Deny));
        let outcome = next_outcome(&mut f.events).await;
        let ToolStatus::Refused(why) = &outcome.status else {
            panic!("denied: {outcome:?}");
        };
        assert!(why.contains("declined") && why.contains("answer"), "{why}");
        assert_eq!(
            outcome.response.response,
            json!({"success": false, "error": why})
        );

        // The model's arguments were bad; the person's are good.
        assert!(
            f.dispatcher
                .decide(keys[1], Verdict::Edit(json!({"ms": 1})))
        );
        let outcome = next_outcome(&mut f.events).await;
        assert_eq!(outcome.status, ToolStatus::Ok);
        assert_eq!(outcome.args, json!({"ms": 1}));

        let typed = json!({"error": "garage on fire"});
        assert!(f.dispatcher.decide(keys[2], Verdict::Answer(typed.clone())));
        let outcome = next_outcome(&mut f.events).await;
        assert_eq!(outcome.status, ToolStatus::ByHand);
        assert_eq!(outcome.response.response, typed, "sent as typed");
        for key in keys {
            assert!(!f.dispatcher.decide(key, Verdict::Deny));
        }
        assert_eq!(f.dispatcher.in_flight(), 0);
        assert!(drain(f).await.is_empty());
    }

    #[tokio::test]
    async fn a_running_call_answered_by_hand_is_stopped_and_answered_once() {
        let mut f = fixture(ToolLimits::default(), 1);
        let running = call("r", "sleepy", json!({"ms": 3_600_000}));
        let key = running.key;
        f.dispatcher.dispatch(vec![running]);
        assert_eq!(f.dispatcher.in_flight(), 1);
        assert!(
            !f.dispatcher.decide(key, Verdict::Approve),
            "it is not waiting"
        );
        assert!(
            !f.dispatcher.decide(key, Verdict::Deny),
            "it is not waiting"
        );
        assert!(
            f.dispatcher
                .decide(key, Verdict::Answer(json!({"result": "done"})))
        );
        let outcome = next_outcome(&mut f.events).await;
        assert_eq!(outcome.status, ToolStatus::ByHand);
        assert_eq!(outcome.response.response, json!({"result": "done"}));
        wait_dropped(&mut f.dropped, 3_600_000).await;
        assert!(f.dispatcher.cancel(&["r".to_owned()]).is_empty());
        assert!(drain(f).await.is_empty(), "no second answer");
    }

    #[tokio::test]
    async fn a_cancel_while_waiting_ends_the_wait_unanswered() {
        let mut f = fixture_asking(ToolLimits::default(), 1, &["sleepy"], Decider::Person);
        let asked = call("c", "sleepy", json!({"ms": 1}));
        let key = asked.key;
        f.dispatcher.dispatch(vec![asked]);
        waiting_key(next_event(&mut f.events).await);
        assert_eq!(f.dispatcher.cancel(&["c".to_owned()]), ["c"]);
        match next_event(&mut f.events).await {
            ToolEvent::Cancelled {
                key: Some(k), id, ..
            } => {
                assert_eq!((k, id.as_str()), (key, "c"));
            }
            other => panic!("expected Cancelled, got {other:?}"),
        }
        assert!(!f.dispatcher.decide(key, Verdict::Approve));
        assert!(drain(f).await.is_empty());
    }

    #[tokio::test]
    async fn a_policy_never_asks() {
        // A built-in the user set to ask is never run unasked: headless, only `--approve all`
        // runs it, and any other policy answers it with a refusal at once.
        for policy in [
            ApprovePolicy::All,
            ApprovePolicy::ReadOnly,
            ApprovePolicy::None,
        ] {
            let mut f = fixture_asking(
                ToolLimits::default(),
                1,
                &["answer"],
                Decider::Policy(policy),
            );
            f.dispatcher.dispatch(vec![call("p", "answer", json!({}))]);
            let outcome = next_outcome(&mut f.events).await;
            if policy == ApprovePolicy::All {
                assert_eq!(outcome.status, ToolStatus::Ok, "{policy:?}");
                assert_eq!(outcome.unasked, Some(Unasked::ApproveAll));
            } else {
                assert!(
                    matches!(&outcome.status, ToolStatus::Refused(why) if why.contains("approve every call")),
                    "{policy:?}: {outcome:?}"
                );
                assert_eq!(outcome.unasked, None);
            }
        }
    }

    /// A run-time tool that reports progress, then waits to be told to finish, keeping its
    /// progress handle for after the call has ended; with a time limit of its own.
    struct Reporter {
        finish: Mutex<Option<tokio::sync::oneshot::Receiver<()>>>,
        kept: Arc<Mutex<Option<CallProgress>>>,
    }

    impl DynTool for Reporter {
        fn name(&self) -> &str {
            "reporter"
        }
        fn description(&self) -> &str {
            "Reports progress."
        }
        fn parameters(&self) -> Option<&Value> {
            None
        }
        fn timeout(&self) -> Option<Duration> {
            Some(Duration::from_millis(300))
        }
        fn prepare(
            &self,
            _args: Value,
            progress: CallProgress,
        ) -> Result<super::super::registry::HandlerFuture, String> {
            let finish = self
                .finish
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            *self.kept.lock().unwrap_or_else(PoisonError::into_inner) = Some(progress.clone());
            Ok(Box::pin(async move {
                progress.report(1.0, Some(2.0), Some("halfway".into()));
                match finish {
                    Some(finish) => {
                        let _ = finish.await;
                        Ok(json!({"done": true}))
                    }
                    None => std::future::pending().await,
                }
            }))
        }
    }

    fn reporter(
        finish: Option<tokio::sync::oneshot::Receiver<()>>,
    ) -> (
        ToolDispatcher,
        mpsc::UnboundedReceiver<ToolEvent>,
        Arc<Mutex<Option<CallProgress>>>,
    ) {
        let kept = Arc::new(Mutex::new(None));
        let mut registry = Registry::new(ToolLimits::default());
        let inserted = registry.insert(Arc::new(Reporter {
            finish: Mutex::new(finish),
            kept: Arc::clone(&kept),
        }));
        assert_eq!(inserted, Ok(()));
        let (dispatcher, events) = ToolDispatcher::new(Arc::new(registry), Decider::Person);
        (dispatcher, events, kept)
    }

    #[tokio::test]
    async fn progress_is_reported_while_a_call_runs_and_never_after() {
        let (finish_tx, finish) = tokio::sync::oneshot::channel();
        let (dispatcher, mut events, kept) = reporter(Some(finish));
        dispatcher.dispatch(vec![call("p1", "reporter", json!({}))]);
        let ToolEvent::Progress(report) = next_event(&mut events).await else {
            panic!("progress first");
        };
        assert_eq!(report.id.as_deref(), Some("p1"));
        assert_eq!((report.progress, report.total), (1.0, Some(2.0)));
        assert_eq!(report.message.as_deref(), Some("halfway"));
        let _ = finish_tx.send(());
        let outcome = next_outcome(&mut events).await;
        assert_eq!(outcome.status, ToolStatus::Ok);
        let progress = kept.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let Some(progress) = progress else {
            panic!("the handle was kept");
        };
        // A report is emitted (or not) before `report` returns: nothing can be on its way.
        progress.report(2.0, Some(2.0), None);
        let mut rest = Vec::new();
        while let Ok(event) = events.try_recv() {
            rest.push(event);
        }
        assert!(rest.is_empty(), "nothing after the end: {rest:?}");
    }

    #[tokio::test]
    async fn a_tools_own_time_limit_wins_over_the_registrys() {
        let (dispatcher, mut events, _kept) = reporter(None);
        dispatcher.dispatch(vec![call("t1", "reporter", json!({}))]);
        let mut saw_slow = false;
        let outcome = loop {
            match next_event(&mut events).await {
                ToolEvent::Progress(_) => {}
                ToolEvent::Slow(_) => saw_slow = true,
                ToolEvent::Finished(outcome) => break outcome,
                other => panic!("nothing else happens to it: {other:?}"),
            }
        };
        assert!(saw_slow);
        assert_eq!(outcome.status, ToolStatus::TimedOut);
        assert!(
            outcome.response.response["error"]
                .as_str()
                .is_some_and(|e| e.contains("300 ms")),
            "{:?}",
            outcome.response
        );
    }
}
