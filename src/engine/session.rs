//! The engine's session part: the Live session (or the bridge's) from its first connection to
//! its end, how it dials again, and the wire tap that shows the app every frame. Its inputs are
//! the session's events, the connecting task and the tap's frames; it carries out the
//! [`SessionEffect`]s: what is sent, how the session is set up, its end.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::warn;

use super::wiretap::{self, EngineTap};
use crate::app::{Msg, SessionEffect, WireFrame};
use crate::audio::MicFrame;
use crate::record::Recorder;
use crate::tools::ToolEvent;
use livetalk_live::session::{
    self, ReconnectPolicy, Session, SessionEvent, SessionSlot, SessionStatus, SetupChange,
};
use livetalk_live::wire::{
    Blob, ClientMessage, Content, ContextUpdate, Empty, RealtimeInput, Scheduling, Setup, ToolSet,
};
use livetalk_live::{CloseInfo, ConnectOptions, Outbox, ServerEvent};
use livetalk_mock::MockServer;

/// How long the engine waits for the audio devices before connecting anyway.
const AUDIO_OPEN_WAIT: Duration = Duration::from_secs(5);

/// Signals held for the first connection at most: they come from the app's own effects, a
/// handful at a time; more means something loops, and is dropped with a warning.
const HELD_MAX: usize = 64;

/// Where a session connects.
#[derive(Debug, Clone)]
pub enum ConnectTo {
    /// A Live API endpoint (Google, a custom URL or the embedded mock).
    Live(ConnectOptions),
    /// A livetalk bridge (`livetalk serve`), which holds the key and the Live session and
    /// reconnects on its own side.
    Bridge {
        url: String,
        setup: Setup,
        connect_timeout: Duration,
        /// How the voice travels (`--bridge-transport`).
        transport: crate::config::BridgeTransport,
    },
}

/// Where the part is in starting its session.
enum Start {
    /// Devices open first, so the first reply is heard and the mic is live from the start.
    AwaitingAudio {
        route: Box<ConnectTo>,
        until: Instant,
    },
    Connecting(JoinHandle<Result<Session, String>>),
    /// Connected, failed to, or never asked to connect (tests connect by hand).
    Done,
}

/// What the part took in that concerns another part (what is for the app waits in the
/// engine's queue).
pub(super) enum SessionNews {
    /// Calls whose connection is gone: the tools stop them; the app sees them cancelled.
    Abandoned(Vec<String>),
    /// Nothing for another part.
    Quiet,
}

/// See the module doc.
pub(super) struct SessionPart {
    slot: SessionSlot,
    start: Start,
    /// Signals sent while the first connection was still being made (a push-to-talk clip's
    /// `activityStart`, say), delivered in order once it is. Mic audio is not held: late audio
    /// is worse than none.
    held: Vec<ClientMessage>,
    /// Kept alive while the session runs on it.
    mock: Option<MockServer>,
    /// The session is on Vertex AI, which ignores `SILENT` scheduling.
    vertex: bool,
    /// Frames sent, and read in the handshake, as the tap passes them on (the session's own
    /// frames come with what it reads).
    frames: mpsc::Receiver<WireFrame>,
    frames_tx: mpsc::Sender<WireFrame>,
    /// The event inspector is open: frames sent are taken in as they go, so the mic's show
    /// while the server is silent. Closed, they wait for the next frame read, and sending
    /// wakes nothing.
    wire_watched: bool,
}

impl SessionPart {
    /// A part with nothing connected yet.
    pub(super) fn new() -> Self {
        let (frames_tx, frames) = mpsc::channel(wiretap::FRAMES_WAITING);
        SessionPart {
            slot: SessionSlot::new(
                ReconnectPolicy::default(),
                Some(EngineTap::shared(None, frames_tx.clone())),
            ),
            start: Start::Done,
            held: Vec::new(),
            mock: None,
            vertex: false,
            frames,
            frames_tx,
            wire_watched: false,
        }
    }

    /// Records the session from now on (before connecting, to have every frame).
    pub(super) fn record_into(&mut self, recorder: Recorder) {
        self.slot = SessionSlot::new(
            self.slot.policy(),
            Some(EngineTap::shared(Some(recorder), self.frames_tx.clone())),
        );
    }

    /// Sets how lost connections are retried (before connecting).
    pub(super) fn set_reconnect_policy(&mut self, policy: ReconnectPolicy) {
        self.slot.set_policy(policy);
    }

    /// Keeps the embedded mock alive as long as the session.
    pub(super) fn keep_mock(&mut self, mock: MockServer) {
        self.mock = Some(mock);
    }

    /// Figures and the resumption handle of the session.
    pub(super) fn status(&self) -> &SessionStatus {
        self.slot.status()
    }

    /// Connects along `route` once the devices are ready ([`SessionPart::devices_ready`]), or
    /// after five seconds, or at once when there are none.
    pub(super) fn start(&mut self, route: ConnectTo, devices: bool) {
        if let ConnectTo::Live(options) = &route {
            self.vertex = options.endpoint.is_vertex();
        }
        // Kept even when the first attempt fails, so the user's retry has somewhere to go.
        self.slot.retry_with(route.redial());
        self.start = Start::AwaitingAudio {
            route: Box::new(route),
            until: Instant::now() + AUDIO_OPEN_WAIT,
        };
        if !devices {
            self.devices_ready();
        }
    }

    /// Connects at once and waits for the session (tests drive the engine by hand).
    pub(super) async fn connect(&mut self, options: ConnectOptions) -> Result<(), String> {
        self.vertex = options.endpoint.is_vertex();
        self.slot.retry_with(options.clone().into());
        let session = open(
            ConnectTo::Live(options),
            self.slot.policy(),
            self.slot.tap(),
        )
        .await?;
        self.slot.adopt(session);
        Ok(())
    }

    /// The audio devices are open (or known missing): connect now.
    pub(super) fn devices_ready(&mut self) {
        let Start::AwaitingAudio { route, .. } = std::mem::replace(&mut self.start, Start::Done)
        else {
            return;
        };
        let policy = self.slot.policy();
        let tap = self.slot.tap();
        self.start = Start::Connecting(tokio::spawn(open(*route, policy, tap)));
    }

    /// True while the session can take mic frames.
    pub(super) fn takes_frames(&self) -> bool {
        self.slot.handle().is_some()
    }

    /// Hands one mic frame to the session: `Some(true)` when it took it, `Some(false)` when
    /// it could not take it now (late audio is worse than none, so it is dropped), `None`
    /// when there is no session.
    pub(super) fn send_mic_frame(&self, frame: MicFrame) -> Option<bool> {
        let handle = self.slot.handle()?;
        let input = RealtimeInput::mic_audio(frame.pcm);
        handle.try_send(ClientMessage::RealtimeInput(input)).ok()
    }

    /// Streams one chunk of 16 kHz PCM16 mic audio without an audio worker (tests stand in
    /// for the mic this way). While the session reconnects it is queued, and dropped if it
    /// waited longer than a second.
    pub(super) async fn send_audio(&mut self, pcm: Vec<u8>) {
        self.send(
            ClientMessage::RealtimeInput(RealtimeInput::mic_audio(pcm)),
            "mic audio",
        )
        .await;
    }

    /// Declares this set of tools from the next connection on (at the next turn boundary
    /// with `hand_over`).
    pub(super) async fn set_tools(&mut self, tools: Vec<ToolSet>, hand_over: bool) {
        self.slot.set_tools(tools, hand_over).await;
    }

    /// A finished call as this session's service will take its answer (see
    /// [`silent_as_when_idle`]).
    pub(super) fn as_service_takes(&self, event: ToolEvent) -> ToolEvent {
        if self.vertex {
            silent_as_when_idle(event)
        } else {
            event
        }
    }

    /// True once nothing more can come from it: it has ended, and is not starting.
    pub(super) fn is_over(&self) -> bool {
        matches!(self.start, Start::Done) && !self.slot.is_open()
    }

    /// The next thing the session, its start or the tap has: its frames and their events go
    /// into `pending`, in order. Cancel-safe.
    pub(super) async fn next(&mut self, pending: &mut VecDeque<Msg>) -> Option<SessionNews> {
        let session_open = self.slot.is_open();
        let awaiting_until = match &self.start {
            Start::AwaitingAudio { until, .. } => Some(*until),
            _ => None,
        };
        let connecting = matches!(self.start, Start::Connecting(_));
        let wire_watched = self.wire_watched;
        tokio::select! {
            joined = async {
                match &mut self.start {
                    Start::Connecting(task) => task.await,
                    _ => std::future::pending().await,
                }
            }, if connecting => {
                self.start = Start::Done;
                match joined {
                    Ok(Ok(session)) => {
                        self.slot.adopt(session);
                        for message in std::mem::take(&mut self.held) {
                            self.send(message, "a signal held for the connection").await;
                        }
                        Some(SessionNews::Quiet)
                    }
                    Ok(Err(message)) => {
                        pending.push_back(Msg::ConnectFailed(message));
                        Some(SessionNews::Quiet)
                    }
                    Err(e) => {
                        pending.push_back(Msg::ConnectFailed(format!("Connecting failed: {e}")));
                        Some(SessionNews::Quiet)
                    }
                }
            }
            () = tokio::time::sleep_until(awaiting_until.unwrap_or_else(Instant::now)), if awaiting_until.is_some() => {
                warn!("the audio devices did not open within 5 s; connecting without waiting");
                self.devices_ready();
                Some(SessionNews::Quiet)
            }
            event = self.slot.recv(), if session_open => Some(match event {
                // The frame, then its events in order, before anything that comes after it.
                Some(SessionEvent::Server(inbound)) => {
                    // What was sent (and read in a handshake) before it is taken in with what
                    // the server says: waking the engine for each would put a trip round the
                    // loop after every answer and mic frame. After the frame's events (the log
                    // keeps frames in time order), so an answer is not held up; before the
                    // session's last word, so nothing follows it.
                    let last = inbound.closed().is_some();
                    if last {
                        self.take_in_sent_frames(pending);
                    }
                    pending.extend(WireFrame::received(&inbound).map(Msg::Wire));
                    pending.extend(inbound.events.into_iter().map(Msg::Server));
                    if !last {
                        self.take_in_sent_frames(pending);
                    }
                    SessionNews::Quiet
                }
                Some(SessionEvent::Change(change)) => {
                    pending.push_back(Msg::SessionChange(change));
                    SessionNews::Quiet
                }
                Some(SessionEvent::Abandoned(ids)) => SessionNews::Abandoned(ids),
                None => SessionNews::Quiet,
            }),
            Some(sent) = self.frames.recv(), if wire_watched => {
                pending.push_back(Msg::Wire(sent));
                self.take_in_sent_frames(pending);
                Some(SessionNews::Quiet)
            }
            else => None,
        }
    }

    /// Carries out one of the app's session effects; a message it answers with goes into
    /// `pending`.
    pub(super) async fn carry_out(&mut self, effect: SessionEffect, pending: &mut VecDeque<Msg>) {
        match effect {
            SessionEffect::SendText(text) => {
                if let Some(handle) = self.slot.handle()
                    && handle.send_user_text(&text).await.is_err()
                {
                    warn!("dropped a user turn: the session is closed");
                }
            }
            SessionEffect::SendInstruction(text) => {
                let update = ContextUpdate {
                    system_instruction: Some(Content::text("user", text)),
                    tools: None,
                };
                if let Some(handle) = self.slot.handle()
                    && handle
                        .send(ClientMessage::ContextUpdate(update))
                        .await
                        .is_err()
                {
                    warn!("dropped a system instruction: the session is closed");
                }
            }
            SessionEffect::SetVoice(voice) => {
                self.slot.reconfigure(SetupChange::Voice(voice)).await;
            }
            SessionEffect::SwitchModel(model) => {
                let model = self.model_on_route(&model);
                self.slot.reconfigure(SetupChange::Model(model)).await;
            }
            SessionEffect::SendImage(jpeg) => {
                let frame = RealtimeInput {
                    video: Some(Blob {
                        mime_type: "image/jpeg".to_owned(),
                        data: jpeg,
                    }),
                    ..RealtimeInput::default()
                };
                self.send(ClientMessage::RealtimeInput(frame), "a picture")
                    .await;
            }
            SessionEffect::SendToolResponse(response) => {
                if let Some(handle) = self.slot.handle()
                    && handle.send_tool_responses(vec![response]).await.is_err()
                {
                    warn!("dropped a tool response: the session is closed");
                }
            }
            SessionEffect::SendActivityStart => {
                let input = RealtimeInput {
                    activity_start: Some(Empty {}),
                    ..RealtimeInput::default()
                };
                self.send(ClientMessage::RealtimeInput(input), "a mic signal")
                    .await;
            }
            SessionEffect::SendActivityEnd => {
                let input = RealtimeInput {
                    activity_end: Some(Empty {}),
                    ..RealtimeInput::default()
                };
                self.send(ClientMessage::RealtimeInput(input), "a mic signal")
                    .await;
            }
            SessionEffect::SendAudioStreamEnd => {
                let input = RealtimeInput {
                    audio_stream_end: Some(true),
                    ..RealtimeInput::default()
                };
                self.send(ClientMessage::RealtimeInput(input), "a mic signal")
                    .await;
            }
            SessionEffect::CloseSession => match &mut self.start {
                Start::Done => {
                    if let Some(handle) = self.slot.handle() {
                        handle.close().await;
                    }
                }
                // Closed before it was up: stop connecting; the session ends here.
                start => {
                    if let Start::Connecting(task) = start {
                        task.abort();
                    }
                    self.start = Start::Done;
                    pending.push_back(Msg::Server(ServerEvent::Closed(
                        CloseInfo::ended_by_client(),
                    )));
                }
            },
            // The app asks only once the session gave up.
            SessionEffect::Reconnect => {
                if !self.slot.retry() {
                    warn!("nowhere to reconnect to");
                }
            }
            SessionEffect::WatchWire(open) => {
                self.wire_watched = open;
                // What waited for the next frame read shows at once.
                if open {
                    self.take_in_sent_frames(pending);
                }
            }
        }
    }

    /// `model` as this route's `setup.model` takes it: Vertex AI names a model by its whole
    /// resource name, which the current setup has.
    fn model_on_route(&self, model: &str) -> String {
        let id = model.rsplit('/').next().unwrap_or(model);
        match self.slot.setup().map(|setup| setup.model.as_str()) {
            Some(current) if current.starts_with("projects/") => match current.rfind("/models/") {
                Some(at) => format!("{}/models/{id}", &current[..at]),
                None => model.to_owned(),
            },
            _ => model.to_owned(),
        }
    }

    async fn send(&mut self, message: ClientMessage, what: &str) {
        match self.slot.handle() {
            Some(handle) => {
                if handle.send(message).await.is_err() {
                    warn!("dropped {what}: the session is closed");
                }
            }
            None if !matches!(self.start, Start::Done) && self.held.len() < HELD_MAX => {
                self.held.push(message);
            }
            None => warn!("dropped {what}: there is no session to send it on"),
        }
    }

    /// Queues the frames the wire tap has passed on since the last time.
    fn take_in_sent_frames(&mut self, pending: &mut VecDeque<Msg>) {
        while let Ok(sent) = self.frames.try_recv() {
            pending.push_back(Msg::Wire(sent));
        }
    }
}

/// Vertex AI drops `SILENT` scheduling and answers such a result like any other, so on Vertex
/// it is sent (and its answer awaited) as `WHEN_IDLE`, what Vertex applies anyway.
fn silent_as_when_idle(mut event: ToolEvent) -> ToolEvent {
    if let ToolEvent::Finished(outcome) = &mut event
        && outcome.response.scheduling == Some(Scheduling::Silent)
    {
        outcome.response.scheduling = Some(Scheduling::WhenIdle);
    }
    event
}

/// Connects along `route` and supervises the session, which reconnects by the policy (to the
/// service, or to the bridge).
async fn open(
    route: ConnectTo,
    policy: ReconnectPolicy,
    tap: Option<Arc<dyn livetalk_live::connection::WireTap>>,
) -> Result<Session, String> {
    match route {
        ConnectTo::Live(options) => {
            let connection = livetalk_live::client::connect_tapped(options.clone(), tap.clone())
                .await
                .map_err(|e| e.to_string())?;
            Ok(session::supervise(
                connection,
                Some(options.into()),
                policy,
                tap,
            ))
        }
        ConnectTo::Bridge {
            ref url,
            ref setup,
            connect_timeout,
            transport,
        } => {
            let connection = crate::bridge::client::connect_over(
                url,
                setup,
                connect_timeout,
                tap.clone(),
                transport,
            )
            .await
            .map_err(|e| e.to_string())?;
            Ok(session::supervise(
                connection,
                Some(route.redial()),
                policy,
                tap,
            ))
        }
    }
}

impl ConnectTo {
    /// How the session opens its later connections along this route (reconnects, hand-overs,
    /// the user's retry).
    fn redial(&self) -> session::Redial {
        match self {
            ConnectTo::Live(options) => options.clone().into(),
            ConnectTo::Bridge {
                url,
                setup,
                connect_timeout,
                transport,
            } => session::Redial::new(
                setup.clone(),
                *connect_timeout,
                Arc::new(crate::bridge::client::BridgeDialer {
                    url: url.clone(),
                    transport: *transport,
                }),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{ToolOutcome, ToolStatus};
    use livetalk_live::wire::FunctionResponse;

    fn finished(scheduling: Option<Scheduling>) -> ToolEvent {
        ToolEvent::Finished(ToolOutcome {
            key: None,
            id: None,
            name: "note".into(),
            args: serde_json::json!({}),
            status: ToolStatus::Ok,
            response: FunctionResponse {
                name: "note".into(),
                scheduling,
                ..FunctionResponse::default()
            },
            duration: Duration::ZERO,
            truncated: false,
            unasked: None,
        })
    }

    fn scheduling(event: ToolEvent) -> Option<Scheduling> {
        match event {
            ToolEvent::Finished(outcome) => outcome.response.scheduling,
            _ => None,
        }
    }

    #[test]
    fn only_silent_results_become_when_idle() {
        assert_eq!(
            scheduling(silent_as_when_idle(finished(Some(Scheduling::Silent)))),
            Some(Scheduling::WhenIdle)
        );
        for kept in [
            None,
            Some(Scheduling::Interrupt),
            Some(Scheduling::WhenIdle),
        ] {
            assert_eq!(scheduling(silent_as_when_idle(finished(kept))), kept);
        }
    }
}
