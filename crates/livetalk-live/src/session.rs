//! Keeps one conversation alive across connections: session resumption, goAway hand-overs,
//! reconnects after a loss, and one answer per tool call.
//!
//! A supervisor task owns the current [`Connection`] and stands between it and the engine:
//! - it keeps the newest resumable handle from `sessionResumptionUpdate`;
//! - after a `goAway` it moves to a new connection at the next turn boundary, or shortly
//!   before `timeLeft` runs out, whichever comes first, resuming with that handle;
//! - after an unexpected close or a network drop it reconnects with capped exponential
//!   backoff and jitter, resuming when it has a handle; a stale handle (1008 "session not
//!   found") falls back to a fresh session with a notice; closes that retrying cannot fix
//!   (bad key, unknown model, invalid argument) end the stream with their human message;
//! - what the engine sends while no connection is up is queued and sent after
//!   `setupComplete` (mic audio queued for more than a second is dropped, not replayed);
//! - a tool answer only goes to the connection whose `toolCall` asked for it, and only once;
//!   the calls of a connection that ended are reported as abandoned so they can be stopped.

mod supervisor;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::warn;

use self::supervisor::start;
use super::client::{Auth, ConnectOptions};
use super::endpoint::Endpoint;
use futures_util::future::BoxFuture;

use super::connection::{ConnectError, Connection, Outbox, WireTap};
use super::events::Inbound;
use super::wire::{ClientMessage, GenerationConfig, Setup, SpeechConfig, ToolSet};

/// How hard to try to get a connection back.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReconnectPolicy {
    /// Attempts after a loss before giving up; 0 never reconnects.
    pub max_attempts: u32,
    /// Delay before the first attempt; it doubles per attempt.
    pub initial_delay: Duration,
    /// Cap of the delay.
    pub max_delay: Duration,
    /// A connection that lasted this long, or completed a turn, resets the attempt count, so a
    /// server that accepts and then drops every connection still exhausts the budget.
    pub stable_after: Duration,
}

impl Default for ReconnectPolicy {
    fn default() -> Self {
        ReconnectPolicy {
            max_attempts: 6,
            initial_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
            stable_after: Duration::from_secs(10),
        }
    }
}

impl ReconnectPolicy {
    /// The wait before attempt `attempt` (1-based): exponential, capped, and scaled by
    /// `jitter` in 0..1 into the upper half, so clients that lost the same server spread out.
    pub fn delay(&self, attempt: u32, jitter: f64) -> Duration {
        if attempt == 0 {
            return Duration::ZERO;
        }
        let doublings = attempt.saturating_sub(1).min(30);
        let exponential = self
            .initial_delay
            .saturating_mul(1u32 << doublings)
            .min(self.max_delay);
        exponential.mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0))
    }
}

/// What a session reports about itself, beside what its server said.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionChange {
    /// The connection is being replaced. `planned` after a goAway (the status line says
    /// "Reconnecting…"), otherwise it was lost; `attempt` counts failed tries (0 for a planned
    /// hand-over) and the next try starts after `retry_in`.
    Reconnecting {
        /// A hand-over the server asked for (goAway), not a loss.
        planned: bool,
        /// Failed tries so far (0 for a planned hand-over).
        attempt: u32,
        /// Why, as one human sentence.
        reason: String,
        /// When the next try starts.
        retry_in: Duration,
    },
    /// A new connection is up. `resumed` when it continued the session by handle. A user
    /// turn the lost connection never answered goes out on it again (see [`crate::reply`]).
    Reconnected {
        /// The new connection continued the session by handle (it knows the conversation).
        resumed: bool,
    },
    /// The saved session could not be resumed; a fresh session follows, which does not know
    /// the conversation so far.
    ResumeRejected {
        /// The server's refusal, as one human sentence.
        message: String,
    },
    /// The connection was lost after the model had called tools for the latest user turn,
    /// and the new connection is a fresh session: the turn cannot be taken again without
    /// running its tools twice for a model that no longer knows why. Nothing more of its reply
    /// comes; the user must ask again.
    TurnLost,
    /// A tool answer was not sent: the connection whose `toolCall` asked for it has ended (or
    /// the call was already answered).
    AnswerDropped {
        /// The `id` of the answer withheld.
        id: Option<String>,
        /// The function it answered.
        name: String,
    },
}

/// What [`SessionChange::TurnLost`] means, in the user's words.
pub const TURN_LOST: &str = "The last turn was lost with the connection: the model had called \
     tools for it, and the new session does not know the conversation, so it was not sent again. \
     Ask again.";

/// Everything a session reports, in order.
#[derive(Debug, Clone)]
pub enum SessionEvent {
    /// What the server of the current connection said, one frame at a time. `Closed` only
    /// comes once, when the conversation is over for good.
    Server(Inbound),
    /// The session moved to a new connection, lost one, or withheld an answer.
    Change(SessionChange),
    /// Calls of a connection that ended: stop them; they must not be answered.
    Abandoned(Vec<String>),
}

/// Figures about a session, for status displays and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionFigures {
    /// Connections made, the first included.
    pub connections: u64,
    /// Connections that resumed the session by handle.
    pub resumed: u64,
    /// Fresh sessions after a rejected handle.
    pub fresh_fallbacks: u64,
    /// Client messages handed to a connection.
    pub sent: u64,
    /// Messages waiting for a connection right now.
    pub queued: u64,
    /// Mic audio chunks dropped because they waited for a connection for over a second.
    pub stale_audio_dropped: u64,
    /// Tool answers withheld by the one-answer-per-call guard.
    pub answers_dropped: u64,
}

#[derive(Debug, Default)]
struct Shared {
    connections: AtomicU64,
    resumed: AtomicU64,
    fresh_fallbacks: AtomicU64,
    sent: AtomicU64,
    queued: AtomicU64,
    stale_audio_dropped: AtomicU64,
    answers_dropped: AtomicU64,
    handle: Mutex<Option<String>>,
}

/// Read-only view of a session, current while it runs. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct SessionStatus {
    shared: Arc<Shared>,
}

impl SessionStatus {
    /// The figures as they are now.
    pub fn figures(&self) -> SessionFigures {
        let s = &self.shared;
        SessionFigures {
            connections: s.connections.load(Ordering::Relaxed),
            resumed: s.resumed.load(Ordering::Relaxed),
            fresh_fallbacks: s.fresh_fallbacks.load(Ordering::Relaxed),
            sent: s.sent.load(Ordering::Relaxed),
            queued: s.queued.load(Ordering::Relaxed),
            stale_audio_dropped: s.stale_audio_dropped.load(Ordering::Relaxed),
            answers_dropped: s.answers_dropped.load(Ordering::Relaxed),
        }
    }

    /// The newest resumable handle, if the server gave one.
    pub fn resume_handle(&self) -> Option<String> {
        self.shared
            .handle
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

enum Command {
    Send(Box<ClientMessage>, Instant),
    Close,
    /// Declare these tools from the next connection on; with `hand_over`, move to a new
    /// connection at the next turn boundary (resuming, so the conversation is kept).
    SetTools {
        tools: Vec<ToolSet>,
        hand_over: bool,
    },
    /// Set up the next connections so: see [`SetupChange`].
    Reconfigure(SetupChange),
}

/// A change to how a session's connections are set up, made mid-session by the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetupChange {
    /// Speak with this prebuilt voice: applied by a hand-over at the next turn boundary that
    /// resumes the session, so the conversation is kept.
    Voice(String),
    /// Use this model (as `setup.model` takes it). A model cannot change within a resumed
    /// session: the session moves to a new connection at once and starts afresh, without its
    /// resumption handle.
    Model(String),
}

impl SetupChange {
    /// Writes the change into `setup`.
    pub fn apply(&self, setup: &mut Setup) {
        match self {
            SetupChange::Voice(voice) => {
                setup
                    .generation_config
                    .get_or_insert_with(GenerationConfig::default)
                    .speech_config = Some(SpeechConfig::voice(voice));
            }
            SetupChange::Model(model) => {
                setup.model = model.clone();
                // Declared the way the new model takes functions.
                super::models::fit_declarations(setup);
            }
        }
    }
}

/// Sends on whichever connection is current; cheap to clone. Sends never fail while the
/// conversation lasts: without a connection they are queued.
#[derive(Clone)]
pub struct SessionHandle {
    commands: mpsc::Sender<Command>,
}

/// The conversation has ended; nothing more can be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the conversation has ended")]
pub struct SessionClosed;

impl Outbox for SessionHandle {
    type Closed = SessionClosed;

    async fn send(&self, message: ClientMessage) -> Result<(), SessionClosed> {
        self.commands
            .send(Command::Send(Box::new(message), Instant::now()))
            .await
            .map_err(|_| SessionClosed)
    }

    /// Ends the conversation; the event stream ends with `Closed`.
    async fn close(&self) {
        let _ = self.commands.send(Command::Close).await;
    }
}

impl SessionHandle {
    /// Sends without waiting, for real-time audio that is worthless late: `Ok(false)` when
    /// the queue is full and the message was not taken.
    pub fn try_send(&self, message: ClientMessage) -> Result<bool, SessionClosed> {
        match self
            .commands
            .try_send(Command::Send(Box::new(message), Instant::now()))
        {
            Ok(()) => Ok(true),
            Err(mpsc::error::TrySendError::Full(_)) => Ok(false),
            Err(mpsc::error::TrySendError::Closed(_)) => Err(SessionClosed),
        }
    }

    /// Declares `tools` from the next connection on. With `hand_over` that connection comes
    /// at the next turn boundary (a planned hand-over that resumes the session); without, at
    /// whatever reconnect comes next.
    pub async fn set_tools(
        &self,
        tools: Vec<ToolSet>,
        hand_over: bool,
    ) -> Result<(), SessionClosed> {
        self.commands
            .send(Command::SetTools { tools, hand_over })
            .await
            .map_err(|_| SessionClosed)
    }

    /// Sets the next connections up with `change` (see [`SetupChange`] for when it takes
    /// effect).
    pub async fn reconfigure(&self, change: SetupChange) -> Result<(), SessionClosed> {
        self.commands
            .send(Command::Reconfigure(change))
            .await
            .map_err(|_| SessionClosed)
    }
}

/// A supervised conversation: the handle to send with, the events to read, and its figures.
/// Dropping the handle and the events ends it (its connection is closed).
pub struct Session {
    /// Sends on whichever connection is current.
    pub handle: SessionHandle,
    /// What the session's servers said and what the session did, in order; the last event is
    /// [`ServerEvent::Closed`](crate::events::ServerEvent::Closed), once the conversation is over for good.
    pub events: mpsc::Receiver<SessionEvent>,
    /// Its figures and newest resumption handle.
    pub status: SessionStatus,
}

/// Opens a session's connections: the Live API's own way ([`ConnectOptions`]' endpoint and
/// credentials), or another (a bridge in front of the service, a test's fake).
pub trait Dialer: Send + Sync + 'static {
    /// Opens a connection set up as `setup`, every stage within `connect_timeout`; `tap` sees
    /// it.
    fn dial(
        &self,
        setup: Setup,
        connect_timeout: Duration,
        tap: Option<Arc<dyn WireTap>>,
    ) -> BoxFuture<'static, Result<Connection, ConnectError>>;
}

/// The Live API at an endpoint, with credentials: what [`Redial::from`] a
/// [`ConnectOptions`] dials, and what a dialer of its own (one that also watches the
/// outcomes) can dial through.
#[derive(Debug, Clone)]
pub struct LiveApi {
    /// Where the connections go.
    pub endpoint: Endpoint,
    /// The credentials they carry.
    pub auth: Auth,
}

impl Dialer for LiveApi {
    fn dial(
        &self,
        setup: Setup,
        connect_timeout: Duration,
        tap: Option<Arc<dyn WireTap>>,
    ) -> BoxFuture<'static, Result<Connection, ConnectError>> {
        let options = ConnectOptions {
            endpoint: self.endpoint.clone(),
            auth: self.auth.clone(),
            setup,
            connect_timeout,
        };
        Box::pin(crate::client::connect_tapped(options, tap))
    }
}

/// Where a session's next connection goes and how it is set up. The session keeps the setup
/// current (tools, system instruction, resumption handle).
#[derive(Clone)]
pub struct Redial {
    /// The first message of every new connection.
    pub setup: Setup,
    /// One deadline for every stage of opening a connection.
    pub connect_timeout: Duration,
    dialer: Arc<dyn Dialer>,
}

impl Redial {
    /// New connections opened by `dialer`.
    pub fn new(setup: Setup, connect_timeout: Duration, dialer: Arc<dyn Dialer>) -> Redial {
        Redial {
            setup,
            connect_timeout,
            dialer,
        }
    }

    /// Opens a connection with the setup as it is now.
    fn dial(
        &self,
        setup: Setup,
        tap: Option<Arc<dyn WireTap>>,
    ) -> BoxFuture<'static, Result<Connection, ConnectError>> {
        self.dialer.dial(setup, self.connect_timeout, tap)
    }
}

impl From<ConnectOptions> for Redial {
    /// New connections to the Live API, as `options` say.
    fn from(options: ConnectOptions) -> Self {
        Redial {
            setup: options.setup,
            connect_timeout: options.connect_timeout,
            dialer: Arc::new(LiveApi {
                endpoint: options.endpoint,
                auth: options.auth,
            }),
        }
    }
}

impl std::fmt::Debug for Redial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redial")
            .field("setup", &self.setup)
            .field("connect_timeout", &self.connect_timeout)
            .finish_non_exhaustive()
    }
}

/// Supervises a session from its first, open connection on: the caller connects (so it sees
/// why a first connection fails), the session keeps the conversation going from there.
/// With `redial` (the options `connection` was opened with, and how to open another) lost
/// connections are replaced as `policy` says, resuming when the setup asks for resumption;
/// without, nothing is retried and the connection's end is the session's end. `tap` sees
/// every connection. A connection opened resuming a handle (the setup's) keeps resuming it
/// until the server gives a newer one: a connection lost before then resumes the same
/// conversation, not a fresh one.
pub fn supervise(
    connection: Connection,
    redial: Option<Redial>,
    policy: ReconnectPolicy,
    tap: Option<Arc<dyn WireTap>>,
) -> Session {
    let resumed = redial
        .as_ref()
        .and_then(|r| r.setup.session_resumption.as_ref()?.handle.clone());
    start(Start::Open(connection), redial, policy, resumed, tap)
}

/// Starts a session by connecting as a reconnect does, resuming with `handle` when there is
/// one: for a retry after a session gave up, with its newest handle. Why a connection fails
/// comes as [`SessionChange::Reconnecting`] events, and the end of the attempts as the
/// closing event.
pub fn reconnect(
    redial: Redial,
    policy: ReconnectPolicy,
    handle: Option<String>,
    tap: Option<Arc<dyn WireTap>>,
) -> Session {
    start(Start::Reconnect, Some(redial), policy, handle, tap)
}

enum Start {
    Open(Connection),
    Reconnect,
}

/// An app's place for its session: the current one, what it takes to start another when the
/// user retries after it gave up, and its figures.
pub struct SessionSlot {
    handle: Option<SessionHandle>,
    events: Option<mpsc::Receiver<SessionEvent>>,
    status: SessionStatus,
    /// Where a retry connects to; `None` before the first route is known.
    redial: Option<Redial>,
    policy: ReconnectPolicy,
    tap: Option<Arc<dyn WireTap>>,
}

impl SessionSlot {
    /// An empty slot: nothing to send to yet.
    pub fn new(policy: ReconnectPolicy, tap: Option<Arc<dyn WireTap>>) -> Self {
        SessionSlot {
            handle: None,
            events: None,
            status: SessionStatus::default(),
            redial: None,
            policy,
            tap,
        }
    }

    /// How lost connections are retried.
    pub fn policy(&self) -> ReconnectPolicy {
        self.policy
    }

    /// Sets how lost connections are retried (before connecting).
    pub fn set_policy(&mut self, policy: ReconnectPolicy) {
        self.policy = policy;
    }

    /// The wire tap every connection of this slot reports to.
    pub fn tap(&self) -> Option<Arc<dyn WireTap>> {
        self.tap.clone()
    }

    /// Remembers where a retry goes, even when the first connection failed.
    pub fn retry_with(&mut self, redial: Redial) {
        self.redial = Some(redial);
    }

    /// Declares `tools` from the next connection on (see [`SessionHandle::set_tools`]), and in
    /// a retry after the session gave up.
    pub async fn set_tools(&mut self, tools: Vec<ToolSet>, hand_over: bool) {
        if let Some(redial) = &mut self.redial {
            redial.setup.tools = tools.clone();
            super::models::fit_declarations(&mut redial.setup);
        }
        if let Some(handle) = &self.handle
            && handle.set_tools(tools, hand_over).await.is_err()
        {
            warn!("the tool change reaches no connection: the conversation has ended");
        }
    }

    /// Sets the next connections up with `change` (see [`SessionHandle::reconfigure`]), and a
    /// retry after the session gave up.
    pub async fn reconfigure(&mut self, change: SetupChange) {
        if let Some(redial) = &mut self.redial {
            change.apply(&mut redial.setup);
        }
        if let Some(handle) = &self.handle
            && handle.reconfigure(change).await.is_err()
        {
            warn!("the setup change reaches no connection: the conversation has ended");
        }
    }

    /// Uses `session` from now on; an old supervisor still winding down closes its connection
    /// when its handle and events are dropped here.
    pub fn adopt(&mut self, session: Session) {
        self.handle = Some(session.handle);
        self.events = Some(session.events);
        self.status = session.status;
    }

    /// Starts the session again by reconnecting with the newest resumption handle; false when there
    /// is nowhere to reconnect to.
    pub fn retry(&mut self) -> bool {
        let Some(redial) = self.redial.clone() else {
            return false;
        };
        let handle = self.status.resume_handle();
        let session = reconnect(redial, self.policy, handle, self.tap.clone());
        self.adopt(session);
        true
    }

    /// The setup the next connection (or a retry) is made with; `None` before the first route
    /// is known.
    pub fn setup(&self) -> Option<&Setup> {
        self.redial.as_ref().map(|redial| &redial.setup)
    }

    /// The current session's handle; `None` before the first session.
    pub fn handle(&self) -> Option<&SessionHandle> {
        self.handle.as_ref()
    }

    /// True while events can still come.
    pub fn is_open(&self) -> bool {
        self.events.is_some()
    }

    /// Figures and the resumption handle of the session.
    pub fn status(&self) -> &SessionStatus {
        &self.status
    }

    /// The next event; `None` when the session has ended (and from then on until a retry).
    /// Cancel-safe.
    pub async fn recv(&mut self) -> Option<SessionEvent> {
        let events = self.events.as_mut()?;
        let event = events.recv().await;
        if event.is_none() {
            self.events = None;
        }
        event
    }
}
