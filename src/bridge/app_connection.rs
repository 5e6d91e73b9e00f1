//! One app's connection to the bridge, over any [`Transport`]: the session loop. It reads the
//! app's messages, has the [`Translator`] say what they come to, opens and feeds the app's
//! upstream Live session (supervised, so a goAway or a dropped connection resumes instead of
//! ending it), and sends back what the translator makes of the session's news, until either
//! side ends. An app that offers WebRTC gets a peer connection beside its transport: the
//! track's audio goes upstream as the microphone's would, and the model's audio goes out on
//! the track as well as in `AUDIO_CHUNK`.
//!
//! Beside that it keeps the app told of its session's newest resumption handle
//! (`SESSION_HANDLE`), counts what the fleet's metrics show, records the session when the
//! bridge records (format 4), and leaves when the instance drains: it lets the model's turn
//! in progress end (starting none), then hands the app its handle and closes (1012).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use tokio::sync::{mpsc, watch};
use tracing::{debug, info};

use super::fleet::{Drain, Fleet};
use super::live_config::MappedConfig;
use super::metrics::{Drained, DrainedAt, Opened, Way, seconds};
use super::protocol::{AppMessage, BridgeMessage, LogLevel, WebrtcSdp};
use super::recordings::{Recordings, SessionRecording};
use super::translator::{DRAIN_CLOSE_CODE, DRAINING, MediaStep, SessionStep, Translator};
use super::transport::{Received, Transport};
use super::turn_watch::TurnWatch;
use super::upstream::{SessionTap, Upstream, UpstreamDialer};
use super::webrtc::{MediaHub, MediaPeer, PeerEvent, signal};
use crate::app::turn_timing::TurnClock;
use crate::record::{WireMeta, WireRecorder};
use livetalk_live::Outbox;
use livetalk_live::connection::WireTap;
use livetalk_live::session::{
    self, Dialer, LiveApi, ReconnectPolicy, Redial, SessionChange, SessionEvent, SessionHandle,
};
use livetalk_live::wire::{ClientMessage, Setup};
use livetalk_live::{CloseInfo, ConnectError, ServerEvent};

/// What every app connection of one bridge shares.
pub(super) struct Shared {
    pub(super) upstream: Upstream,
    pub(super) token: Option<String>,
    pub(super) max_message_bytes: usize,
    /// The WebRTC transport, when the bridge could bind its UDP port.
    pub(super) media: Option<MediaHub>,
    /// The instance's standing: drain, readiness, metrics.
    pub(super) fleet: Arc<Fleet>,
    /// Where sessions are recorded (`--record`).
    pub(super) recordings: Option<Arc<Recordings>>,
    /// Sessions started, to number them.
    pub(super) sessions: AtomicU64,
}

impl Shared {
    /// A new session's id: when it started and its number on this instance (its recording's
    /// folder name, and the `session` of its log lines).
    pub(super) fn new_session_id(&self) -> String {
        let n = self.sessions.fetch_add(1, Ordering::Relaxed) + 1;
        let stamp = jiff::Zoned::now().strftime("%Y-%m-%d_%H-%M-%S");
        format!("{stamp}-{n}")
    }
}

/// The upstream Live session of one app, on the reconnect supervisor.
struct Live {
    handle: SessionHandle,
    events: mpsc::Receiver<SessionEvent>,
}

enum Incoming {
    App(Received),
    Live(Option<SessionEvent>),
    Media(Option<PeerEvent>),
    /// The instance started draining.
    Drain,
    /// The drain's time is up.
    DrainTimedOut,
}

/// Runs one app's connection to its end; `id` names it in logs and recordings.
pub(super) async fn run<T: Transport>(
    shared: Arc<Shared>,
    peer: SocketAddr,
    id: String,
    transport: T,
) {
    let drain_signal = shared.fleet.drain_signal();
    SessionLoop {
        id,
        peer,
        transport,
        translator: Translator::new(),
        live: None,
        app_gone: false,
        media: None,
        held: Vec::new(),
        drain_signal,
        draining: None,
        turn: TurnWatch::default(),
        started: Instant::now(),
        clock: TurnClock::new(4),
        timed: (0, false, false),
        calls_told: HashMap::new(),
        hand_over_planned: false,
        recording: None,
        session_counted: false,
        last_close: None,
        handle: None,
        close: (1000, ""),
        shared,
    }
    .run()
    .await
}

struct SessionLoop<T> {
    shared: Arc<Shared>,
    id: String,
    peer: SocketAddr,
    transport: T,
    translator: Translator,
    /// Open exactly when the translator says a session is.
    live: Option<Live>,
    /// A send failed: the loop ends after this step.
    app_gone: bool,
    /// The app's WebRTC peer connection, once it has offered one.
    media: Option<MediaPeer>,
    /// WebRTC signalling that came before the session was set up (bounded: a later offer
    /// replaces all of it).
    held: Vec<MediaStep>,
    drain_signal: watch::Receiver<Option<Drain>>,
    /// The drain under way: the connection closes at the end of the turn, or by its deadline.
    draining: Option<Drain>,
    turn: TurnWatch,
    /// The session's start, the origin of its turn timing.
    started: Instant,
    clock: TurnClock,
    /// Turns measured so far, and whether the latest one's first message and first audio are
    /// in the metrics yet.
    timed: (u64, bool, bool),
    /// When each call the app was told of came, for its answer time.
    calls_told: HashMap<String, Instant>,
    /// The upstream connection is being replaced as planned (a goAway), not after a loss.
    hand_over_planned: bool,
    recording: Option<SessionRecording>,
    /// The open session counts in the open-sessions gauge.
    session_counted: bool,
    /// How the service ended the session, once it has.
    last_close: Option<CloseInfo>,
    /// The handle that holds the conversation as far as the app has heard it: the one the
    /// open session was resumed with, then each newer one the service gave, taken in the order
    /// the app is told what came before it (the supervisor's newest may be ahead of the app:
    /// told then, it would reach the app before the end of the turn it holds). None once the
    /// service refuses it.
    handle: Option<String>,
    /// The close the connection ends with when the bridge ends it.
    close: (u16, &'static str),
}

impl<T: Transport> SessionLoop<T> {
    async fn run(mut self) {
        loop {
            // What the service sent and the session's own news come as one stream, in order.
            let (has_live, has_media) = (self.live.is_some(), self.media.is_some());
            let deadline = self.draining.map(|d| d.deadline);
            let (live, media) = (&mut self.live, &mut self.media);
            let drain_signal = &mut self.drain_signal;
            let incoming = tokio::select! {
                event = async { live.as_mut()?.events.recv().await }, if has_live => {
                    Incoming::Live(event)
                }
                event = async { media.as_mut()?.next().await }, if has_media => {
                    Incoming::Media(event)
                }
                received = self.transport.receive() => Incoming::App(received),
                changed = drain_signal.wait_for(Option::is_some), if deadline.is_none() => {
                    match changed {
                        Ok(_) => Incoming::Drain,
                        // The server is gone; nothing will drain this session.
                        Err(_) => Incoming::App(Received::Ended { last_words: None }),
                    }
                }
                _ = tokio::time::sleep_until(deadline.unwrap_or_else(tokio::time::Instant::now)), if deadline.is_some() => {
                    Incoming::DrainTimedOut
                }
            };
            let end = match incoming {
                Incoming::App(Received::Message(message)) => self.on_app_message(*message).await,
                Incoming::App(Received::Refused(sentence)) => {
                    self.send(BridgeMessage::error(sentence)).await;
                    false
                }
                Incoming::App(Received::Ended { last_words }) => {
                    if let Some(sentence) = last_words {
                        self.send(BridgeMessage::error(sentence)).await;
                    }
                    true
                }
                Incoming::Live(Some(event)) => self.on_live_event(event).await,
                Incoming::Media(event) => {
                    self.on_media_event(event).await;
                    false
                }
                Incoming::Live(None) => {
                    // The reader ended without a Closed event (it always sends one; defensive).
                    self.live = None;
                    self.session_ended(None);
                    self.translator.session_lost();
                    self.end_media();
                    false
                }
                Incoming::Drain => self.on_drain().await,
                Incoming::DrainTimedOut => {
                    info!(peer = %self.peer, "drain timed out: closing mid-turn");
                    self.leave(DrainedAt::timeout).await
                }
            };
            if end || self.app_gone {
                break;
            }
        }
        self.end_media();
        if let Some(live) = self.live.take() {
            live.handle.close().await;
        }
        self.session_ended(None);
        let (code, reason) = self.close;
        self.transport.close(code, reason).await;
    }

    /// One event of the upstream session; `true` when the connection ends (a drain that was
    /// waiting for the turn's end).
    async fn on_live_event(&mut self, event: SessionEvent) -> bool {
        self.observe(&event);
        let out = self.translator.session_event(event);
        self.to_track(&out);
        self.send_all(out).await;
        if !self.translator.is_open() {
            // It closed for good (its last words were among `out`).
            self.live = None;
            self.session_ended(None);
            self.end_media();
        } else {
            if let Some(told) = self.translator.handle_changed(self.handle.clone()) {
                self.send(told).await;
            }
            if self.translator.is_ready() && !self.held.is_empty() {
                for step in std::mem::take(&mut self.held) {
                    self.media_step(step).await;
                }
            }
        }
        if self.draining.is_none() {
            return false;
        }
        if self.may_leave() {
            return self.leave(DrainedAt::turn_end).await;
        }
        debug!(turn = ?self.turn, calls = self.translator.calls_pending(), "draining: the turn goes on");
        false
    }

    /// Takes in what the session said, before the app hears it: the turn's course, the
    /// metrics, the recording.
    fn observe(&mut self, event: &SessionEvent) {
        let shared = self.shared.clone();
        let metrics = &shared.fleet.metrics;
        let recording = self.recording.take();
        let recorder = recording.as_ref().map(|r| &r.recorder);
        match event {
            SessionEvent::Server(inbound) => {
                metrics.upstream_frame(Way::received, inbound.bytes);
                match inbound.closed() {
                    Some(close) => self.last_close = Some(close.clone()),
                    None => {
                        if let Some(recorder) = recorder {
                            recorder.received(inbound);
                        }
                    }
                }
                if let Some(reading) = inbound.reading() {
                    self.clock.received(reading, self.started.elapsed());
                    self.time_turn();
                }
                for event in &inbound.events {
                    self.turn.observe(event);
                    match event {
                        ServerEvent::TurnComplete { .. } => {
                            metrics.turns.inc();
                        }
                        ServerEvent::ToolCall(calls) => {
                            metrics.tool_calls.inc_by(calls.len() as u64);
                            let now = Instant::now();
                            for id in calls.iter().filter_map(|c| c.id.clone()) {
                                self.calls_told.insert(id, now);
                            }
                        }
                        ServerEvent::ToolCallCancelled(ids) => {
                            for id in ids {
                                self.calls_told.remove(id);
                            }
                        }
                        // "Not resumable right now" keeps the one before, which still
                        // restores the session as it was before this turn.
                        ServerEvent::ResumptionUpdate {
                            handle: Some(handle),
                            resumable: true,
                        } if !handle.is_empty() => self.handle = Some(handle.clone()),
                        _ => {}
                    }
                }
            }
            SessionEvent::Change(change) => {
                if let Some(recorder) = recorder {
                    recorder.link(change);
                }
                match change {
                    SessionChange::Reconnecting { planned, .. } => {
                        self.hand_over_planned = *planned
                    }
                    SessionChange::ResumeRejected { .. } => self.handle = None,
                    SessionChange::Reconnected { .. } => {
                        self.turn.connection_replaced();
                        if self.hand_over_planned {
                            metrics.upstream_hand_overs.inc();
                        } else {
                            metrics.upstream_reconnects.inc();
                        }
                    }
                    _ => {}
                }
            }
            SessionEvent::Abandoned(ids) => {
                for id in ids {
                    self.calls_told.remove(id);
                }
            }
        }
        self.recording = recording;
    }

    /// Puts the latest turn's first-response and first-audio times into the metrics once
    /// each is known.
    fn time_turn(&mut self) {
        let measured = self.clock.measured();
        if measured != self.timed.0 {
            self.timed = (measured, false, false);
        }
        let Some(turn) = self.clock.last() else {
            return;
        };
        let metrics = &self.shared.fleet.metrics;
        if let (false, Some(wait)) = (self.timed.1, turn.first_message) {
            metrics.first_response.observe(seconds(wait));
            self.timed.1 = true;
        }
        if let (false, Some(wait)) = (self.timed.2, turn.first_audio) {
            metrics.first_audio.observe(seconds(wait));
            self.timed.2 = true;
        }
    }

    /// The upstream session is over: out of the open-sessions gauge, and what was kept of its
    /// turns forgotten.
    /// `close` says how it ended when the service did not (the app ended it, or a drain).
    fn session_ended(&mut self, close: Option<CloseInfo>) {
        let close = self.last_close.take().or(close);
        if std::mem::take(&mut self.session_counted) {
            self.shared.fleet.metrics.sessions_open.dec();
            if let Some(recording) = &self.recording {
                recording
                    .recorder
                    .ended(&close.unwrap_or_else(CloseInfo::ended_by_client));
            }
        }
        self.turn = TurnWatch::default();
        self.calls_told.clear();
    }

    /// The model's audio, its interruptions and turn ends, for the WebRTC track when there is
    /// one (what goes to the app over the transport is unchanged).
    fn to_track(&self, out: &[BridgeMessage]) {
        let Some(peer) = &self.media else {
            return;
        };
        for message in out {
            match message {
                BridgeMessage::AudioChunk { data } => peer.play(data.clone()),
                BridgeMessage::Interrupted {} => peer.flush(),
                BridgeMessage::TurnComplete(_) => peer.turn_end(),
                _ => {}
            }
        }
    }

    /// Ends the peer connection (with the session, or when it failed).
    fn end_media(&mut self) {
        if self.media.take().is_some() {
            self.translator.set_media_track(false);
            self.shared.fleet.metrics.webrtc_peers_open.dec();
        }
        self.held.clear();
    }
}

impl<T: Transport> SessionLoop<T> {
    /// One WebRTC signalling step: held until the session is set up, then carried out.
    async fn media_step(&mut self, step: MediaStep) {
        if !self.translator.is_ready() {
            match step {
                MediaStep::Offer(_) => {
                    // A new offer makes what came before it moot.
                    self.held.clear();
                    self.held.push(step);
                }
                MediaStep::Candidate(_) if self.held.len() <= signal::MAX_CANDIDATES => {
                    self.held.push(step)
                }
                MediaStep::Candidate(_) => {}
            }
            return;
        }
        match step {
            MediaStep::Offer(sdp) => {
                // A second offer replaces the peer connection.
                self.end_media();
                let Some(hub) = &self.shared.media else {
                    self.send(BridgeMessage::error("This bridge has no WebRTC transport (its UDP port could not be opened); stream audio with SEND_REALTIME_INPUT and play AUDIO_CHUNK instead.")).await;
                    return;
                };
                match hub.open(&sdp) {
                    Ok((answer, peer)) => {
                        info!(peer = %self.peer, "WebRTC offer answered");
                        self.media = Some(peer);
                        self.translator.set_media_track(true);
                        let metrics = &self.shared.fleet.metrics;
                        metrics.webrtc_peers.inc();
                        metrics.webrtc_peers_open.inc();
                        self.send(BridgeMessage::WebrtcAnswer(WebrtcSdp { sdp: answer }))
                            .await;
                    }
                    Err(sentence) => self.send(BridgeMessage::error(sentence)).await,
                }
            }
            MediaStep::Candidate(candidate) => match signal::candidate(&candidate) {
                Ok(Some(candidate)) => match &self.media {
                    Some(peer) => peer.add_candidate(candidate),
                    None => {
                        self.send(BridgeMessage::error("WEBRTC_ICE_CANDIDATE came before WEBRTC_OFFER (or after its connection ended); it was ignored.")).await
                    }
                },
                Ok(None) => {}
                Err(sentence) => self.send(BridgeMessage::error(sentence)).await,
            },
        }
    }

    async fn on_media_event(&mut self, event: Option<PeerEvent>) {
        match event {
            Some(PeerEvent::Heard(pcm)) => {
                // A drain starts no new turn: between turns the app's voice waits for the
                // next instance.
                if self.draining.is_some() && !self.turn.under_way() {
                    return;
                }
                if let Some(message) = self.translator.track_audio(pcm) {
                    self.forward(message).await;
                }
            }
            Some(PeerEvent::Speaking(speaking)) => {
                self.send(BridgeMessage::AssistantSpeaking { speaking })
                    .await
            }
            Some(PeerEvent::Connected) => {
                debug!(peer = %self.peer, "WebRTC peer connected");
            }
            Some(PeerEvent::Failed(sentence)) => {
                self.end_media();
                self.send(BridgeMessage::error(sentence)).await;
            }
            None => self.end_media(),
        }
    }

    async fn send(&mut self, message: BridgeMessage) {
        if self.app_gone {
            return;
        }
        let warned = match &message {
            BridgeMessage::GeminiError { message: text, .. } => {
                debug!(peer = %self.peer, "GEMINI_ERROR: {text}");
                Some(text.as_str())
            }
            BridgeMessage::LogMessage {
                level: LogLevel::Warn | LogLevel::Error,
                message: text,
                ..
            } => Some(text.as_str()),
            _ => None,
        };
        if let (Some(text), Some(recording)) = (warned, &self.recording) {
            recording.recorder.warning(text);
        }
        if !self.transport.send(&message).await {
            self.app_gone = true;
        }
    }

    async fn send_all(&mut self, messages: impl IntoIterator<Item = BridgeMessage>) {
        for message in messages {
            self.send(message).await;
        }
    }

    async fn forward(&mut self, message: ClientMessage) {
        self.turn.sent(&message);
        self.clock.sent(&message, self.started.elapsed());
        if let ClientMessage::ToolResponse(response) = &message {
            let now = Instant::now();
            for id in response
                .function_responses
                .iter()
                .filter_map(|r| r.id.as_ref())
            {
                if let Some(told) = self.calls_told.remove(id) {
                    self.shared
                        .fleet
                        .metrics
                        .tool_answer
                        .observe(seconds(now.saturating_duration_since(told)));
                }
            }
        }
        if let Some(live) = &self.live
            && live.handle.send(message).await.is_err()
        {
            // The reader reports the close with its reason; nothing to add here.
            debug!(peer = %self.peer, "upstream closed while forwarding");
        }
    }

    /// While draining, what would start a new turn is not sent: the app sends it again on the
    /// instance it reconnects to. Returns the refusal for what must be told.
    fn held_back_while_draining(&self, message: &AppMessage) -> Option<Option<String>> {
        self.draining?;
        let kind = message.kind();
        match message {
            AppMessage::SendMessage { .. }
            | AppMessage::UpdateConfig { .. }
            | AppMessage::ConnectGemini { .. } => Some(Some(format!(
                "{kind} was not sent: this bridge instance is draining (shutting down). Send it again once you have reconnected with your session handle."
            ))),
            // The voice of a turn under way goes on, so the turn can end (the service hears
            // the user stop); between turns it would start one. Told once, when the drain
            // began.
            AppMessage::SendRealtimeInput(_) if !self.turn.under_way() => Some(None),
            _ => None,
        }
    }

    /// One app message, as the translator says; `true` when the connection ends.
    async fn on_app_message(&mut self, message: AppMessage) -> bool {
        if let Some(refusal) = self.held_back_while_draining(&message) {
            if let Some(sentence) = refusal {
                self.send(BridgeMessage::error(sentence)).await;
            }
            return false;
        }
        let reply = self.translator.app(message);
        self.send_all(reply.to_app).await;
        for message in reply.to_live {
            self.forward(message).await;
        }
        if let Some(step) = reply.media {
            self.media_step(step).await;
        }
        let ended = match reply.session {
            None => false,
            Some(SessionStep::Open { config, resume }) => {
                self.open(config, resume).await;
                false
            }
            Some(SessionStep::Reopen(mapped)) => {
                // The peer connection stays: it belongs to the app's connection, and the new
                // session's audio goes out on it as the old one's did. The old session's calls
                // can no longer be answered.
                if let Some(cancelled) = self.translator.cancel_pending() {
                    self.send(cancelled).await;
                }
                let (note, resume) = self.translator.reopening(&mapped, self.handle.clone());
                self.send(note).await;
                if let Some(old) = self.live.take() {
                    old.handle.close().await;
                }
                self.session_ended(None);
                self.open(mapped, resume).await;
                false
            }
            Some(SessionStep::Disconnect { farewell }) => {
                self.end_media();
                if let Some(live) = self.live.take() {
                    live.handle.close().await;
                }
                self.session_ended(None);
                self.send(farewell).await;
                true
            }
        };
        // A drain waits for no session that is not there (one the app just ended, one that
        // could not be opened).
        ended
            || (self.draining.is_some()
                && self.may_leave()
                && self.leave(DrainedAt::turn_end).await)
    }

    /// The recording of this session, started with its first setup.
    fn record(&mut self, setup: &Setup) -> Option<WireRecorder> {
        if self.recording.is_none()
            && let Some(recordings) = &self.shared.recordings
        {
            let upstream = &self.shared.upstream;
            let voice = setup.voice_name().unwrap_or_default().to_owned();
            let meta = WireMeta {
                model: setup.model.clone(),
                voice,
                endpoint_host: if upstream.offline {
                    "offline demo model".to_owned()
                } else {
                    upstream.endpoint.host().to_owned()
                },
                offline: upstream.offline,
                recorded_by: "livetalk serve",
                details: serde_json::json!({
                    "session": self.id,
                    "app": self.peer.ip().to_string(),
                }),
            };
            self.recording = recordings.start(&self.id, meta);
        }
        self.recording.as_ref().map(|r| r.recorder.clone())
    }

    /// Opens the upstream session for a checked config, resuming `resume` when given, and puts
    /// it under the reconnect supervisor. The outcome reaches the app as `SETUP_COMPLETE`
    /// (from the session's first event) or the translator's failed setup.
    async fn open(&mut self, mapped: MappedConfig, resume: Option<String>) {
        let resuming = resume.is_some();
        self.handle.clone_from(&resume);
        let (warnings, setup) = self.translator.opening(mapped, resume);
        self.send_all(warnings).await;
        let model = setup.model.clone();
        let upstream = &self.shared.upstream;
        let dialer = Arc::new(UpstreamDialer {
            service: LiveApi {
                endpoint: upstream.endpoint.clone(),
                auth: upstream.api_key.clone().into(),
            },
            fleet: self.shared.fleet.clone(),
        });
        let connect_timeout = upstream.connect_timeout;
        let recorder = self.record(&setup);
        let tap: Arc<dyn WireTap> = Arc::new(SessionTap {
            fleet: self.shared.fleet.clone(),
            recorder: recorder.clone(),
        });
        let redial = Redial::new(setup.clone(), connect_timeout, dialer.clone());
        match dialer.dial(setup, connect_timeout, Some(tap.clone())).await {
            Ok(connection) => {
                info!(peer = %self.peer, %model, resumed = resuming, "upstream session open");
                let supervised = session::supervise(
                    connection,
                    Some(redial),
                    ReconnectPolicy::default(),
                    Some(tap),
                );
                self.live = Some(Live {
                    handle: supervised.handle,
                    events: supervised.events,
                });
                self.translator.opened();
                let metrics = &self.shared.fleet.metrics;
                metrics
                    .sessions
                    .get_or_create(&Opened { resumed: resuming })
                    .inc();
                metrics.sessions_open.inc();
                self.session_counted = true;
            }
            Err(e) => {
                let code = match &e {
                    ConnectError::Closed(info) => info.code,
                    ConnectError::Rejected { status, .. } => Some(*status),
                    _ => None,
                };
                let message = e.to_string();
                info!(peer = %self.peer, "upstream session failed: {message}");
                if let Some(recorder) = &recorder {
                    recorder.ended(&CloseInfo::failed(code, message.clone()));
                }
                let out = self.translator.setup_failed(code, message);
                self.send_all(out).await;
            }
        }
    }

    /// The instance started draining: a session between turns leaves at once; one in a turn
    /// is told, and leaves at the turn's end (or the drain's deadline).
    async fn on_drain(&mut self) -> bool {
        self.draining = *self.drain_signal.borrow();
        if self.may_leave() {
            return self.leave(DrainedAt::turn_end).await;
        }
        info!(peer = %self.peer, "draining: waiting for the model's turn to end");
        self.send(BridgeMessage::log(
            LogLevel::Warn,
            "This bridge instance is draining (shutting down): the model's turn goes on to its end, then the connection closes (1012) and you reconnect with your session handle. Until then, new turns and audio are not sent.",
        ))
        .await;
        false
    }

    /// A draining session may leave: no session is open, or it is between turns with its
    /// newest handle.
    fn may_leave(&self) -> bool {
        !self.translator.is_open() || self.turn.between_turns(self.translator.calls_pending())
    }

    /// Leaves for the drain: the calls left open cancelled, the newest handle and
    /// `GEMINI_DISCONNECTED` told, the upstream session closed (the service keeps the
    /// conversation for the handle), then the connection closed with 1012. Always `true`.
    async fn leave(&mut self, at: DrainedAt) -> bool {
        self.shared
            .fleet
            .metrics
            .drained
            .get_or_create(&Drained { at })
            .inc();
        if self.translator.is_open() {
            // Before the service gives this session a handle of its own, the one it was
            // resumed with still holds the conversation.
            let handle = self.handle.clone();
            info!(peer = %self.peer, resumable = handle.is_some(), ?at, "drained: the app reconnects elsewhere");
            let out = self.translator.leaving(handle);
            self.send_all(out).await;
        }
        self.end_media();
        if let Some(live) = self.live.take() {
            live.handle.close().await;
        }
        self.session_ended(Some(CloseInfo {
            code: Some(DRAIN_CLOSE_CODE),
            reason: String::new(),
            message: DRAINING.to_owned(),
            initiated_by_client: true,
        }));
        self.close = (DRAIN_CLOSE_CODE, "bridge draining: reconnect");
        true
    }
}
