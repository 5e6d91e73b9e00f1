//! The supervisor task behind a [`Session`]: it owns the current connection, relays its
//! events, delivers what the handle sends (one answer per tool call), hands over after a
//! `goAway` and reconnects after a loss, as the [module](super) describes.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::{Instrument as _, info, warn};

use super::{
    Command, ReconnectPolicy, Session, SessionChange, SessionEvent, SessionHandle, SessionStatus,
    Shared, Start,
};
use super::{Redial, SetupChange};
use crate::close::is_retryable;
use crate::connection::{ConnectError, Connection, ConnectionHandle, Outbox, WireTap};
use crate::events::{CloseInfo, Inbound, ServerEvent};
use crate::excerpt::{SUMMARY, bounded};
use crate::reply::ReplyWatch;
use crate::wire::{
    ClientMessage, FunctionResponse, Scheduling, SessionResumptionConfig, ToolResponse, ToolSet,
};

/// Queued mic audio older than this is dropped rather than sent late after a reconnect.
const STALE_AUDIO: Duration = Duration::from_secs(1);
/// Sends the supervisor has not taken yet before `send` waits.
const COMMAND_CAPACITY: usize = 256;
/// Events the app has not read yet before the supervisor waits for it to read.
const EVENT_CAPACITY: usize = 512;

pub(super) fn start(
    first: Start,
    redial: Option<Redial>,
    policy: ReconnectPolicy,
    handle: Option<String>,
    tap: Option<Arc<dyn WireTap>>,
) -> Session {
    let (commands_tx, commands) = mpsc::channel(COMMAND_CAPACITY);
    let (out, events) = mpsc::channel(EVENT_CAPACITY);
    let status = SessionStatus::default();
    *status
        .shared
        .handle
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = handle.clone();
    let supervisor = Supervisor {
        resumption: redial
            .as_ref()
            .is_some_and(|r| r.setup.session_resumption.is_some()),
        redial,
        tap,
        policy,
        commands,
        commands_open: true,
        out,
        shared: status.shared.clone(),
        handle,
        queue: VecDeque::new(),
        resend: None,
        failures: 0,
        quick_hand_overs: 0,
        jitter: Jitter::new(),
        current: None,
        hand_over_for: None,
        by_hand: false,
    };
    // It logs in the span of whoever started the session (a bridge's session).
    tokio::spawn(supervisor.run(first).in_current_span());
    Session {
        handle: SessionHandle {
            commands: commands_tx,
        },
        events,
        status,
    }
}

/// What the supervisor does next.
enum Next {
    Serve,
    Reconnect { planned: bool, reason: String },
    Finished,
}

/// The current connection.
struct OpenConnection {
    handle: ConnectionHandle,
    inbound: mpsc::Receiver<Inbound>,
    opened: Instant,
    resumed: bool,
    /// After a goAway: move to a new connection by then at the latest.
    go_away_deadline: Option<Instant>,
    /// We asked this connection to close.
    closing: bool,
    open: OpenWork,
}

impl OpenConnection {
    fn new(connection: Connection, resumed: bool) -> OpenConnection {
        OpenConnection {
            handle: connection.handle,
            inbound: connection.inbound,
            opened: Instant::now(),
            resumed,
            go_away_deadline: None,
            closing: false,
            open: OpenWork::default(),
        }
    }

    /// It proved of use: it completed a turn, or lasted long enough.
    fn stable(&self, policy: &ReconnectPolicy) -> bool {
        self.open.completed_turn || self.opened.elapsed() >= policy.stable_after
    }
}

/// A user turn whose reply the lost connection took with it.
#[derive(Debug)]
struct Resend {
    turn: ClientMessage,
    /// The model had done tool work for it: only a resumed session (which knows the turn and
    /// the work) can take it again; a fresh one gets told it was lost.
    needs_resume: bool,
}

/// What is open on one connection: the turn, the calls, an unanswered user turn.
#[derive(Debug, Default)]
struct OpenWork {
    /// A turn ended on this connection (so it was a working one).
    completed_turn: bool,
    /// The model or the user is in the middle of a turn.
    turn_open: bool,
    /// Unanswered calls of this connection by id (a count, so a repeated id is answered as
    /// often as it was asked), and id-less ones by name.
    calls: HashMap<String, usize>,
    idless_calls: HashMap<String, usize>,
    /// The last user text turn, and how far its reply has come.
    user_turn: Option<ClientMessage>,
    reply: ReplyWatch,
}

impl OpenWork {
    fn at_turn_boundary(&self) -> bool {
        !self.turn_open && self.calls.is_empty() && self.idless_calls.is_empty()
    }

    /// Takes the call an answer is for; false when this connection has no such open call.
    fn take_call(&mut self, response: &FunctionResponse) -> bool {
        let (map, key) = match &response.id {
            Some(id) => (&mut self.calls, id),
            None => (&mut self.idless_calls, &response.name),
        };
        match map.get_mut(key) {
            Some(count) => {
                *count -= 1;
                if *count == 0 {
                    map.remove(key);
                }
                true
            }
            None => false,
        }
    }

    /// Updates what is open from one event of this connection.
    fn observe(&mut self, event: &ServerEvent) {
        self.reply.observe(event);
        match event {
            ServerEvent::ToolCall(calls) => {
                self.turn_open = true;
                for call in calls {
                    match &call.id {
                        Some(id) => *self.calls.entry(id.clone()).or_insert(0) += 1,
                        None => *self.idless_calls.entry(call.name.clone()).or_insert(0) += 1,
                    }
                }
            }
            ServerEvent::ToolCallCancelled(ids) => {
                for id in ids {
                    self.calls.remove(id);
                }
            }
            ServerEvent::ModelText(_)
            | ServerEvent::ModelAudio { .. }
            | ServerEvent::OutputTranscription { .. }
            | ServerEvent::GenerationComplete
            | ServerEvent::Interrupted => self.turn_open = true,
            ServerEvent::InputTranscription { .. }
            | ServerEvent::VoiceActivity { speaking: true } => self.turn_open = true,
            // On models with asynchronous turns the interaction may go on after it. (An IDLE
            // comes before the turnComplete beside it, so it must not end the turn itself: a
            // hand-over there would lose that turnComplete. An IDLE on its own leaves the
            // hand-over to the goAway's deadline.)
            ServerEvent::TurnComplete { .. } => {
                self.turn_open = self.reply.model_busy();
                self.completed_turn = true;
            }
            _ => {}
        }
    }

    fn abandoned_calls(&self) -> Vec<String> {
        self.calls.keys().cloned().collect()
    }
}

/// Why a session moves to a new connection for a tool change.
const NEW_TOOLS: &str = "Applying the changed tool set (the conversation is kept).";
/// Why it moves for a new voice.
const NEW_VOICE: &str = "Applying the new voice (the conversation is kept).";
/// Why it moves for a new model.
const FRESH_MODEL: &str = "Starting a fresh session with the new model.";

struct Supervisor {
    /// How to connect again; `None` when this session never reconnects.
    redial: Option<Redial>,
    /// The session started as the user's retry and has not connected yet.
    by_hand: bool,
    tap: Option<Arc<dyn WireTap>>,
    policy: ReconnectPolicy,
    resumption: bool,
    commands: mpsc::Receiver<Command>,
    commands_open: bool,
    out: mpsc::Sender<SessionEvent>,
    shared: Arc<Shared>,
    /// The newest resumable handle.
    handle: Option<String>,
    /// Messages waiting for a connection, with when they were sent.
    queue: VecDeque<(ClientMessage, Instant)>,
    /// A user turn the lost connection never answered, to send again.
    resend: Option<Resend>,
    /// Failed attempts since the last stable connection.
    failures: u32,
    /// Hand-overs in a row asked for by connections that never became stable: a server that
    /// says goAway to every new connection must not get a storm of them.
    quick_hand_overs: u32,
    jitter: Jitter,
    current: Option<OpenConnection>,
    /// The setup changed (the tools, the voice) and the user wants the model to see it: hand
    /// over at the next turn boundary, for this reason.
    hand_over_for: Option<&'static str>,
}

impl Supervisor {
    async fn run(mut self, first: Start) {
        let mut next = match first {
            Start::Open(connection) => {
                self.shared.connections.fetch_add(1, Ordering::Relaxed);
                self.current = Some(OpenConnection::new(connection, false));
                Next::Serve
            }
            Start::Reconnect => {
                self.by_hand = true;
                Next::Reconnect {
                    planned: false,
                    reason: "Retrying the connection.".to_owned(),
                }
            }
        };
        loop {
            next = match next {
                Next::Serve => self.serve().await,
                Next::Reconnect { planned, reason } => self.reconnect(planned, reason).await,
                Next::Finished => return,
            };
        }
    }

    /// Relays one connection until it ends or must be replaced.
    async fn serve(&mut self) -> Next {
        loop {
            let Some(current) = self.current.as_mut() else {
                return Next::Finished;
            };
            let deadline = current.go_away_deadline;
            tokio::select! {
                inbound = current.inbound.recv() => {
                    if let Some(next) = self.on_inbound(inbound).await {
                        return next;
                    }
                }
                command = self.commands.recv(), if self.commands_open => match command {
                    Some(Command::Send(message, at)) => self.deliver(*message, at).await,
                    Some(Command::SetTools { tools, hand_over }) => {
                        self.set_tools(tools, hand_over);
                        if let Some(next) = self.planned_hand_over().await {
                            return next;
                        }
                    }
                    Some(Command::Reconfigure(change)) => {
                        if self.reconfigure(change) {
                            let next = self.hand_over(FRESH_MODEL).await;
                            // The turn the old model never answered is not the new one's.
                            self.resend = None;
                            return next;
                        }
                        if let Some(next) = self.planned_hand_over().await {
                            return next;
                        }
                    }
                    Some(Command::Close) | None => {
                        self.commands_open &= command.is_some();
                        current.closing = true;
                        current.handle.close().await;
                    }
                },
                _ = tokio::time::sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {
                    return self.hand_over("The server's time limit for this connection is up.").await;
                }
            }
        }
    }

    /// One frame of the current connection (`None`: it ended without a close), taken in and
    /// passed on whole; returns what to do next when the connection must be replaced.
    async fn on_inbound(&mut self, inbound: Option<Inbound>) -> Option<Next> {
        let inbound = inbound.unwrap_or_else(|| {
            Inbound::news(ServerEvent::Closed(CloseInfo::failed(
                None,
                "The connection ended without a close.".to_owned(),
            )))
        });
        if let Some(close) = inbound.closed() {
            let close = close.clone();
            return Some(self.on_closed(close).await);
        }
        for event in &inbound.events {
            self.on_event(event);
        }
        let _ = self.out.send(SessionEvent::Server(inbound)).await;
        let current = self.current.as_ref()?;
        let handle_ready = self.handle.is_some() || !self.resumption;
        if current.go_away_deadline.is_some() && current.open.at_turn_boundary() && handle_ready {
            return Some(
                self.hand_over("The server asked to move to a new connection (goAway).")
                    .await,
            );
        }
        self.planned_hand_over().await
    }

    /// Takes in one event of the current connection: the calls it opened, the resumption
    /// handle, a goAway's deadline.
    fn on_event(&mut self, event: &ServerEvent) {
        let Some(current) = self.current.as_mut() else {
            return;
        };
        current.open.observe(event);
        match event {
            ServerEvent::ResumptionUpdate { handle, resumable } => {
                // Keep the newest usable handle; "not resumable right now" keeps the old one,
                // which still restores the session as it was before this turn.
                if let (Some(handle), true) = (handle, resumable) {
                    self.handle = Some(handle.clone());
                    *self
                        .shared
                        .handle
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(handle.clone());
                }
            }
            ServerEvent::GoAway { time_left } => {
                if current.go_away_deadline.is_none() {
                    self.quick_hand_overs = if current.stable(&self.policy) {
                        0
                    } else {
                        self.quick_hand_overs + 1
                    };
                }
                // No timeLeft: hand over soon. A huge one: connections never last an hour, and
                // `Instant + Duration` must not overflow.
                let left = time_left
                    .unwrap_or(Duration::from_secs(2))
                    .min(Duration::from_secs(3600));
                // Leave a margin for the new connection's setup before the server cuts us off.
                let margin = (left / 4).min(Duration::from_secs(2));
                current.go_away_deadline = Some(Instant::now() + left.saturating_sub(margin));
                info!(
                    ?time_left,
                    "goAway: moving to a new connection at the next turn boundary"
                );
            }
            _ => {}
        }
    }

    fn set_tools(&mut self, tools: Vec<ToolSet>, hand_over: bool) {
        if let Some(Redial { setup, .. }) = &mut self.redial {
            setup.tools = tools;
            // Declared the way the model takes functions, as the first setup was.
            crate::models::fit_declarations(setup);
            if hand_over {
                self.hand_over_for.get_or_insert(NEW_TOOLS);
            }
        }
    }

    /// Sets the next connections up with `change`; true when the session must move to a new
    /// connection at once and start afresh (a new model).
    fn reconfigure(&mut self, change: SetupChange) -> bool {
        let Some(Redial { setup, .. }) = &mut self.redial else {
            return false;
        };
        change.apply(setup);
        match change {
            SetupChange::Voice(_) => {
                // A tool change waiting too is applied by the same hand-over.
                self.hand_over_for.get_or_insert(NEW_VOICE);
                false
            }
            SetupChange::Model(_) => {
                // The old conversation cannot be resumed under another model, nor its
                // unanswered turn sent again into the new one.
                self.handle = None;
                *self
                    .shared
                    .handle
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
                self.resend = None;
                self.hand_over_for = None;
                // Now, rather than at a turn boundary: the user confirmed, and the old
                // conversation has nothing more to finish.
                self.current.is_some()
            }
        }
    }

    /// Moves to a new connection for a changed setup once the turn is over and the session
    /// can be resumed (without a handle it would start afresh and forget the conversation).
    async fn planned_hand_over(&mut self) -> Option<Next> {
        let current = self.current.as_ref()?;
        let reason = self.hand_over_for?;
        if !current.open.at_turn_boundary() || self.handle.is_none() {
            return None;
        }
        self.hand_over_for = None;
        Some(self.hand_over(reason).await)
    }

    /// A planned move to a new connection: close this one ourselves, then reconnect.
    async fn hand_over(&mut self, reason: &str) -> Next {
        if let Some(current) = &self.current {
            let handle = current.handle.clone();
            // The old connection's close must not hold up the new one.
            tokio::spawn(async move { handle.close().await });
        }
        // From here on nothing goes to the old connection: sends queue for the new one.
        self.end_connection().await;
        Next::Reconnect {
            planned: true,
            reason: reason.to_owned(),
        }
    }

    async fn on_closed(&mut self, close: CloseInfo) -> Next {
        let Some(current) = self.current.as_ref() else {
            return Next::Finished;
        };
        if current.closing || close.initiated_by_client || !self.commands_open {
            self.end_connection().await;
            return self.finish(close).await;
        }
        let planned = current.go_away_deadline.is_some();
        let stable = current.stable(&self.policy);
        let stale_handle = current.resumed && is_session_not_found(close.code, &close.reason);
        self.end_connection().await;
        if stable {
            self.failures = 0;
        }
        if stale_handle {
            self.reject_handle(&close.message).await;
            return Next::Reconnect {
                planned: false,
                reason: close.message,
            };
        }
        // After a goAway, a normal close is the move the server announced, not an ending.
        let announced = planned && matches!(close.code, Some(1000) | Some(1005));
        if self.policy.max_attempts > 0 && (announced || is_retryable(close.code, &close.reason)) {
            return Next::Reconnect {
                planned,
                reason: close.message,
            };
        }
        self.finish(close).await
    }

    /// Forgets the current connection; its open calls are abandoned and an unanswered user
    /// turn is kept to send again.
    async fn end_connection(&mut self) {
        let Some(current) = self.current.take() else {
            return;
        };
        let abandoned = current.open.abandoned_calls();
        if !abandoned.is_empty() {
            warn!(
                calls = abandoned.len(),
                "the connection ended with tool calls open; they will not be answered"
            );
            let _ = self.out.send(SessionEvent::Abandoned(abandoned)).await;
        }
        let reply = current.open.reply;
        if reply.unanswered() || reply.only_tool_work() {
            self.resend = current.open.user_turn.map(|turn| Resend {
                turn,
                needs_resume: reply.only_tool_work(),
            });
        }
    }

    async fn reject_handle(&mut self, message: &str) {
        self.handle = None;
        *self
            .shared
            .handle
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
        self.shared.fresh_fallbacks.fetch_add(1, Ordering::Relaxed);
        let _ = self
            .out
            .send(SessionEvent::Change(SessionChange::ResumeRejected {
                message: message.to_owned(),
            }))
            .await;
    }

    async fn finish(&mut self, close: CloseInfo) -> Next {
        let _ = self
            .out
            .send(SessionEvent::Server(Inbound::news(ServerEvent::Closed(
                close,
            ))))
            .await;
        Next::Finished
    }

    /// Gets a new connection: at once for a planned hand-over, else after a backoff; gives up
    /// when the budget is spent or the failure cannot be fixed by retrying.
    async fn reconnect(&mut self, planned: bool, mut reason: String) -> Next {
        let mut attempt = if planned { 0 } else { self.failures + 1 };
        let mut last_code = None;
        // The first hand-over of a run goes at once; each further one from a connection that
        // was told to go before it became stable waits longer, and a run too long ends it.
        let quick = if planned { self.quick_hand_overs } else { 0 };
        let budget = self.policy.max_attempts.max(1);
        if quick > budget {
            let message = format!(
                "Gave up: the server asked {quick} new connections in a row to go away (goAway) before they were of use. Not reconnecting again, so as not to burn quota."
            );
            return self.finish(CloseInfo::failed(None, message)).await;
        }
        let mut hand_over_wait = self
            .policy
            .delay(quick.saturating_sub(1), self.jitter.next());
        // A retry the user asked for tries at least once, even under a policy that never
        // reconnects on its own.
        let max_attempts = if self.by_hand {
            self.policy.max_attempts.max(1)
        } else {
            self.policy.max_attempts
        };
        loop {
            if attempt > max_attempts {
                let message = format!(
                    "Gave up reconnecting after {max_attempts} attempts. Last error: {reason}"
                );
                return self.finish(CloseInfo::failed(last_code, message)).await;
            }
            let retry_in = if attempt == 0 {
                std::mem::take(&mut hand_over_wait)
            } else {
                self.policy.delay(attempt, self.jitter.next())
            };
            let _ = self
                .out
                .send(SessionEvent::Change(SessionChange::Reconnecting {
                    planned,
                    attempt,
                    reason: reason.clone(),
                    retry_in,
                }))
                .await;
            if !self.wait_queueing(Instant::now() + retry_in).await {
                return self.finish(CloseInfo::ended_by_client()).await;
            }
            let resuming = self.handle.is_some();
            let Some(redial) = &self.redial else {
                return self.finish(CloseInfo::failed(last_code, reason)).await;
            };
            let mut setup = redial.setup.clone();
            if self.resumption {
                setup.session_resumption = Some(SessionResumptionConfig {
                    handle: self.handle.clone(),
                    ..SessionResumptionConfig::default()
                });
            }
            let connecting = redial.dial(setup, self.tap.clone());
            let Some(result) = self.queueing(connecting).await else {
                return self.finish(CloseInfo::ended_by_client()).await;
            };
            match result {
                Ok(connection) => {
                    self.failures = attempt;
                    self.by_hand = false;
                    self.shared.connections.fetch_add(1, Ordering::Relaxed);
                    if resuming {
                        self.shared.resumed.fetch_add(1, Ordering::Relaxed);
                    }
                    self.current = Some(OpenConnection::new(connection, resuming));
                    info!(resumed = resuming, attempt, "reconnected");
                    self.flush().await;
                    return Next::Serve;
                }
                Err(ConnectError::Closed(close))
                    if resuming && is_session_not_found(close.code, &close.reason) =>
                {
                    // Not a failure of the session: try again at once, without the handle.
                    self.reject_handle(&close.message).await;
                    reason = close.message;
                }
                Err(error) if is_retryable_connect(&error) => {
                    warn!(
                        attempt,
                        "reconnect failed: {}",
                        bounded(&error.to_string(), SUMMARY)
                    );
                    if let ConnectError::Closed(close) = &error {
                        last_code = close.code;
                    }
                    reason = error.to_string();
                    attempt += 1;
                }
                Err(error) => {
                    let close = match error {
                        ConnectError::Closed(close) => close,
                        other => CloseInfo::failed(None, other.to_string()),
                    };
                    return self.finish(close).await;
                }
            }
        }
    }

    /// Waits until `until`, queueing what is sent meanwhile; false when the engine closed.
    async fn wait_queueing(&mut self, until: Instant) -> bool {
        self.queueing(tokio::time::sleep_until(until))
            .await
            .is_some()
    }

    /// Runs `work` while queueing sends; `None` when the engine asked to close instead.
    async fn queueing<F: std::future::Future>(&mut self, work: F) -> Option<F::Output> {
        tokio::pin!(work);
        loop {
            tokio::select! {
                output = &mut work => return Some(output),
                command = self.commands.recv(), if self.commands_open => match command {
                    Some(Command::Send(message, at)) => self.enqueue(*message, at),
                    // Taken by the connection being made now, or the next one.
                    Some(Command::SetTools { tools, hand_over }) => self.set_tools(tools, hand_over),
                    // The connection being made has the old setup; the voice comes with the
                    // next hand-over, the model with the next connection.
                    Some(Command::Reconfigure(change)) => {
                        self.reconfigure(change);
                    }
                    Some(Command::Close) | None => {
                        self.commands_open = false;
                        return None;
                    }
                },
            }
        }
    }

    fn enqueue(&mut self, message: ClientMessage, at: Instant) {
        self.queue.push_back((message, at));
        // Mic audio is only useful live; keep the queue from growing during a long outage.
        let dropped = drop_stale_audio(&mut self.queue, Instant::now());
        self.shared
            .stale_audio_dropped
            .fetch_add(dropped, Ordering::Relaxed);
        self.shared
            .queued
            .store(self.queue.len() as u64, Ordering::Relaxed);
    }

    /// Sends what waited for the new connection: first the user turn the old one never
    /// answered, then the queue in order (stale audio dropped).
    async fn flush(&mut self) {
        let resent = self.resend.take();
        let resumed = self.current.as_ref().is_some_and(|l| l.resumed);
        let _ = self
            .out
            .send(SessionEvent::Change(SessionChange::Reconnected { resumed }))
            .await;
        match resent {
            Some(Resend {
                needs_resume: true, ..
            }) if !resumed => {
                warn!(
                    "the connection was lost after tool calls of a turn, and the new session cannot resume it"
                );
                let _ = self
                    .out
                    .send(SessionEvent::Change(SessionChange::TurnLost))
                    .await;
            }
            Some(Resend { turn, .. }) => self.deliver(turn, Instant::now()).await,
            None => {}
        }
        let dropped = drop_stale_audio(&mut self.queue, Instant::now());
        self.shared
            .stale_audio_dropped
            .fetch_add(dropped, Ordering::Relaxed);
        while let Some((message, at)) = self.queue.pop_front() {
            self.deliver(message, at).await;
        }
        self.shared.queued.store(0, Ordering::Relaxed);
    }

    /// Sends on the current connection (or queues without one), enforcing one answer per call.
    async fn deliver(&mut self, message: ClientMessage, at: Instant) {
        // A session that has to start afresh must begin with the preamble as it is now.
        if let (ClientMessage::ContextUpdate(update), Some(setup)) =
            (&message, self.redial.as_mut().map(|r| &mut r.setup))
        {
            if let Some(instruction) = &update.system_instruction {
                setup.system_instruction = Some(instruction.clone());
            }
            if let Some(tools) = &update.tools {
                setup.tools = tools.tools.clone();
            }
        }
        let Some(current) = self.current.as_mut() else {
            self.enqueue(message, at);
            return;
        };
        let message = match message {
            ClientMessage::ToolResponse(response) => {
                let mut kept = Vec::with_capacity(response.function_responses.len());
                let mut opens_turn = false;
                for answer in response.function_responses {
                    if current.open.take_call(&answer) {
                        opens_turn |= answer.scheduling != Some(Scheduling::Silent);
                        kept.push(answer);
                    } else {
                        warn!(id = ?answer.id.as_deref().map(|id| bounded(id, SUMMARY)), name = %bounded(&answer.name, SUMMARY), "tool answer withheld: no open call on this connection");
                        self.shared.answers_dropped.fetch_add(1, Ordering::Relaxed);
                        let _ = self
                            .out
                            .send(SessionEvent::Change(SessionChange::AnswerDropped {
                                id: answer.id,
                                name: answer.name,
                            }))
                            .await;
                    }
                }
                if kept.is_empty() {
                    return;
                }
                current.open.turn_open |= opens_turn;
                ClientMessage::ToolResponse(ToolResponse {
                    function_responses: kept,
                })
            }
            ClientMessage::ClientContent(content) => {
                if content.turn_complete != Some(false) {
                    current.open.reply.sent();
                    current.open.turn_open = true;
                    current.open.user_turn = Some(ClientMessage::ClientContent(content.clone()));
                }
                ClientMessage::ClientContent(content)
            }
            other => other,
        };
        if current.handle.send(message).await.is_ok() {
            self.shared.sent.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Removes mic audio queued more than [`STALE_AUDIO`] before `now`; returns how many chunks.
fn drop_stale_audio(queue: &mut VecDeque<(ClientMessage, Instant)>, now: Instant) -> u64 {
    let before = queue.len();
    queue.retain(|(message, at)| {
        !(is_audio(message) && now.saturating_duration_since(*at) > STALE_AUDIO)
    });
    (before - queue.len()) as u64
}

fn is_audio(message: &ClientMessage) -> bool {
    matches!(message, ClientMessage::RealtimeInput(input) if input.audio.is_some() || !input.media_chunks.is_empty())
}

fn is_session_not_found(code: Option<u16>, reason: &str) -> bool {
    code == Some(1008) && reason.to_ascii_lowercase().contains("session not found")
}

/// Whether a failed connection attempt is worth repeating.
fn is_retryable_connect(error: &ConnectError) -> bool {
    match error {
        ConnectError::Connect(_) | ConnectError::TimedOut(_) => true,
        ConnectError::Rejected { status, .. } => *status == 429 || *status >= 500,
        ConnectError::Closed(close) => is_retryable(close.code, &close.reason),
    }
}

/// A small xorshift generator for backoff jitter (no need for a random crate).
struct Jitter(u64);

impl Jitter {
    fn new() -> Jitter {
        let seed = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        Jitter(seed | 1)
    }

    /// A number in 0..1.
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ClientContent;

    #[test]
    fn backoff_doubles_up_to_the_cap_and_jitters_in_the_upper_half() {
        let policy = ReconnectPolicy::default();
        assert_eq!(
            policy.delay(0, 0.7),
            Duration::ZERO,
            "a hand-over waits for nothing"
        );
        assert_eq!(policy.delay(1, 1.0), Duration::from_millis(500));
        assert_eq!(policy.delay(1, 0.0), Duration::from_millis(250));
        assert_eq!(policy.delay(3, 1.0), Duration::from_secs(2));
        assert_eq!(policy.delay(5, 1.0), Duration::from_secs(8));
        assert_eq!(policy.delay(40, 1.0), Duration::from_secs(8), "capped");
        assert_eq!(policy.delay(40, 0.0), Duration::from_secs(4));
        let mut jitter = Jitter::new();
        let samples: Vec<f64> = (0..1000).map(|_| jitter.next()).collect();
        assert!(samples.iter().all(|j| (0.0..1.0).contains(j)));
        let mean = samples.iter().sum::<f64>() / samples.len() as f64;
        assert!((0.4..0.6).contains(&mean), "spread out: mean {mean}");
    }

    #[test]
    fn connect_failures_are_retried_only_when_retrying_can_help() {
        assert!(is_retryable_connect(&ConnectError::Connect(
            "refused".into()
        )));
        assert!(is_retryable_connect(&ConnectError::Rejected {
            status: 503,
            message: String::new()
        }));
        assert!(!is_retryable_connect(&ConnectError::Rejected {
            status: 401,
            message: String::new()
        }));
        let closed = |code, reason: &str| {
            ConnectError::Closed(CloseInfo {
                code: Some(code),
                reason: reason.into(),
                message: String::new(),
                initiated_by_client: false,
            })
        };
        assert!(!is_retryable_connect(&closed(
            1007,
            "API key not valid. Please pass a valid API key."
        )));
        assert!(!is_retryable_connect(&closed(
            1008,
            "models/x is not found"
        )));
        assert!(is_retryable_connect(&closed(
            1011,
            "Internal error encountered."
        )));
        assert!(is_session_not_found(
            Some(1008),
            "BidiGenerateContent session not found"
        ));
        assert!(!is_session_not_found(Some(1011), "session not found"));
    }

    fn answer(id: Option<&str>, name: &str) -> FunctionResponse {
        FunctionResponse {
            id: id.map(Into::into),
            name: name.into(),
            ..FunctionResponse::default()
        }
    }

    #[test]
    fn each_call_takes_exactly_one_answer_on_its_own_connection() {
        let mut current = OpenWork::default();
        current.observe(&ServerEvent::ToolCall(vec![
            crate::wire::FunctionCall {
                id: Some("a".into()),
                name: "get_current_time".into(),
                args: serde_json::json!({}),
            },
            crate::wire::FunctionCall {
                id: None,
                name: "get_device_status".into(),
                args: serde_json::json!({}),
            },
            crate::wire::FunctionCall {
                id: Some("b".into()),
                name: "get_current_time".into(),
                args: serde_json::json!({}),
            },
        ]));
        assert!(!current.at_turn_boundary());
        current.observe(&ServerEvent::ToolCallCancelled(vec!["b".into()]));
        assert!(
            !current.take_call(&answer(Some("b"), "get_current_time")),
            "cancelled"
        );
        assert!(current.take_call(&answer(Some("a"), "get_current_time")));
        assert!(
            !current.take_call(&answer(Some("a"), "get_current_time")),
            "answered twice"
        );
        assert!(
            !current.take_call(&answer(Some("zzz"), "get_current_time")),
            "never asked"
        );
        assert!(current.take_call(&answer(None, "get_device_status")));
        assert!(!current.take_call(&answer(None, "get_device_status")));
        current.observe(&ServerEvent::TurnComplete {
            reason: None,
            waiting_for_input: false,
        });
        assert!(current.at_turn_boundary());
    }

    #[test]
    fn queued_mic_audio_older_than_a_second_is_dropped_and_everything_else_kept() {
        use crate::wire::{Blob, RealtimeInput};
        let audio = || {
            ClientMessage::RealtimeInput(RealtimeInput {
                audio: Some(Blob {
                    mime_type: "audio/pcm;rate=16000".into(),
                    data: vec![0; 640],
                }),
                ..RealtimeInput::default()
            })
        };
        let text = || ClientMessage::ClientContent(ClientContent::user_text("hi"));
        assert!(is_audio(&audio()) && !is_audio(&text()));
        let start = Instant::now();
        let mut queue: VecDeque<(ClientMessage, Instant)> = VecDeque::from([
            (audio(), start),
            (text(), start),
            (audio(), start + Duration::from_millis(800)),
            (audio(), start + Duration::from_millis(1200)),
        ]);
        let now = start + Duration::from_millis(1700);
        assert_eq!(drop_stale_audio(&mut queue, now), 1);
        assert_eq!(queue.len(), 3);
        assert!(!is_audio(&queue[0].0), "an old typed turn is still sent");
        assert_eq!(queue[1].1, start + Duration::from_millis(800));
    }
}
