//! One app's connection to the bridge: its messages translated into its upstream Live session
//! (supervised, so a goAway or a dropped connection resumes instead of ending it) and what the
//! service says translated back, until either side ends.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::SplitSink;
use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, Message};
use tracing::{debug, info};

use super::live_config::MappedConfig;
use super::protocol::{
    AppMessage, BridgeMessage, ImageGenerationResult, LogLevel, RealtimeInputPayload,
    SetupCompleteDetails, SetupErrorDetails, TurnCompleteDetails,
};
use livetalk_live::Outbox;
use livetalk_live::session::{self, ReconnectPolicy, SessionChange, SessionEvent, SessionHandle};
use livetalk_live::wire::{
    ClientContent, ClientMessage, Content, RealtimeInput, Scheduling, ServerMessage,
    SessionResumptionConfig, Setup, ToolCallCancellation, ToolResponse,
};
use livetalk_live::{ApiKey, ConnectError, ConnectOptions, Endpoint, ServerEvent};
use livetalk_mock::ws_server::{self, Ending};

/// Where each client's Live session goes. `Debug` never shows the key.
#[derive(Debug, Clone)]
pub struct Upstream {
    pub endpoint: Endpoint,
    pub api_key: Option<ApiKey>,
    pub connect_timeout: Duration,
}

/// What every app connection of one bridge shares.
pub(super) struct Shared {
    pub(super) upstream: Upstream,
    pub(super) token: Option<String>,
    pub(super) max_message_bytes: usize,
}

type ClientSink = SplitSink<WebSocketStream<TcpStream>, Message>;

/// The upstream Live session of one client, and what the bridge tracks about it. It runs on
/// the reconnect supervisor, so a goAway or a dropped connection resumes the conversation on
/// a new connection instead of ending it.
struct UpstreamSession {
    handle: SessionHandle,
    events: mpsc::Receiver<SessionEvent>,
    status: session::SessionStatus,
    /// The setup it was opened with (before the resumption handle), to compare models.
    setup: Setup,
    /// `defaultScheduling` of NON_BLOCKING functions.
    scheduling: HashMap<String, Scheduling>,
    /// Unanswered calls: id → name (fills in a missing `name` of a response).
    pending_calls: HashMap<String, String>,
    /// Model audio is flowing in the current turn (`ASSISTANT_SPEAKING` was sent).
    speaking: bool,
    /// `SETUP_COMPLETE` was sent; later connections of the same session do not repeat it.
    ready: bool,
}

enum Flow {
    Continue,
    /// Close the client's WebSocket.
    Close,
}

enum Incoming {
    Client(Option<Result<Message, tungstenite::Error>>),
    Upstream(Option<SessionEvent>),
}

pub(super) struct AppConnection {
    shared: Arc<Shared>,
    peer: SocketAddr,
    upstream: Option<UpstreamSession>,
    sink: Option<ClientSink>,
}

impl AppConnection {
    pub(super) fn new(shared: Arc<Shared>, peer: SocketAddr) -> Self {
        AppConnection {
            shared,
            peer,
            upstream: None,
            sink: None,
        }
    }

    pub(super) async fn run(mut self, socket: WebSocketStream<TcpStream>) {
        let (sink, mut stream) = socket.split();
        self.sink = Some(sink);
        let ending = loop {
            // What the service sent and the session's own news come as one stream, in order.
            let incoming = match self.upstream.as_mut() {
                Some(upstream) => {
                    tokio::select! {
                        event = upstream.events.recv() => Incoming::Upstream(event),
                        frame = stream.next() => Incoming::Client(frame),
                    }
                }
                None => Incoming::Client(stream.next().await),
            };
            let flow = match incoming {
                Incoming::Client(Some(Ok(Message::Text(text)))) => {
                    self.on_client_frame(text.as_bytes()).await
                }
                Incoming::Client(Some(Ok(Message::Binary(bytes)))) => {
                    self.on_client_frame(&bytes).await
                }
                Incoming::Client(Some(Ok(Message::Close(_)))) => break Ending::PeerClosed,
                Incoming::Client(None) => break Ending::Gone,
                // Pings are answered by tungstenite as we keep reading.
                Incoming::Client(Some(Ok(_))) => Flow::Continue,
                Incoming::Client(Some(Err(tungstenite::Error::Capacity(e)))) => {
                    let message = format!(
                        "The message was far larger than this bridge accepts ({e}); closing the connection. Messages up to {} bytes are allowed.",
                        self.shared.max_message_bytes
                    );
                    self.send(BridgeMessage::error(message)).await;
                    break Ending::ReadFailed(tungstenite::Error::Capacity(e));
                }
                Incoming::Client(Some(Err(e))) => {
                    debug!(peer = %self.peer, "client read error: {e}");
                    break Ending::ReadFailed(e);
                }
                Incoming::Upstream(Some(event)) => self.on_upstream_event(event).await,
                Incoming::Upstream(None) => {
                    // The reader ended without a Closed event (it always sends one; defensive).
                    self.upstream = None;
                    Flow::Continue
                }
            };
            if matches!(flow, Flow::Close) {
                break Ending::CloseSent;
            }
            if self.sink.is_none() {
                break Ending::Gone;
            }
        };
        if let Some(sink) = self.sink.take() {
            ws_server::end(sink, stream, ending).await;
        }
        if let Some(upstream) = self.upstream.take() {
            upstream.handle.close().await;
        }
    }

    /// Sends one message, secrets scrubbed (any of it may quote upstream text); a client
    /// that is gone ends the session at the next read.
    async fn send(&mut self, message: BridgeMessage) {
        let Some(sink) = &mut self.sink else {
            return;
        };
        let text = message.encode();
        let text = livetalk_live::redact::scrub(&text).into_owned();
        if let Err(e) = sink.send(Message::text(text)).await {
            debug!(peer = %self.peer, "client send failed: {e}");
            self.sink = None;
        }
    }

    async fn error(&mut self, message: impl Into<String>) {
        let message = message.into();
        debug!(peer = %self.peer, "GEMINI_ERROR: {message}");
        self.send(BridgeMessage::error(message)).await;
    }

    async fn close_socket(&mut self, code: CloseCode, reason: &str) {
        if let Some(sink) = &mut self.sink {
            let frame = CloseFrame {
                code,
                reason: reason.to_owned().into(),
            };
            let _ = sink.send(Message::Close(Some(frame))).await;
        }
    }

    async fn on_client_frame(&mut self, frame: &[u8]) -> Flow {
        if frame.len() > self.shared.max_message_bytes {
            self.error(format!(
                "The message of {} bytes is larger than this bridge's limit of {} bytes and was dropped. Send large images as smaller JPEG frames.",
                frame.len(),
                self.shared.max_message_bytes
            ))
            .await;
            return Flow::Continue;
        }
        let message = match AppMessage::decode(frame) {
            Ok(message) => message,
            Err(e) => {
                self.error(e.to_string()).await;
                return Flow::Continue;
            }
        };
        match message {
            AppMessage::GenerateImage => {
                // Apps wait a minute for the result: say at once that none is coming.
                self.send(BridgeMessage::ImageGenerationResult(ImageGenerationResult {
                    success: false,
                    error: Some("This bridge cannot generate images: the Gemini Live API answers with audio or text only. Ask for a description instead, or use an image generation API.".into()),
                    ..ImageGenerationResult::default()
                }))
                .await;
                Flow::Continue
            }
            AppMessage::WebrtcOffer | AppMessage::WebrtcIceCandidate => {
                self.error(
                    "This bridge speaks WebSocket audio only: WebRTC (WEBRTC_OFFER, WEBRTC_ICE_CANDIDATE) is not supported yet. Stream microphone audio with SEND_REALTIME_INPUT and play AUDIO_CHUNK messages instead.",
                )
                .await;
                Flow::Continue
            }
            AppMessage::ConnectGemini {
                config,
                ignored_keys,
            } => {
                if self.upstream.is_some() {
                    self.error("A Gemini session is already open on this connection. Use UPDATE_CONFIG to change its configuration, or DISCONNECT_GEMINI first.").await;
                    return Flow::Continue;
                }
                self.warn_ignored(&ignored_keys).await;
                self.send(BridgeMessage::GeminiConnected {}).await;
                match config.to_setup() {
                    Ok(mapped) => self.open_upstream(mapped, None).await,
                    Err(e) => {
                        self.setup_failed(
                            None,
                            livetalk_live::excerpt::sentence(&format!(
                                "The LiveConfig cannot be used: {e}"
                            )),
                        )
                        .await
                    }
                }
                Flow::Continue
            }
            AppMessage::DisconnectGemini => {
                if let Some(upstream) = self.upstream.take() {
                    upstream.handle.close().await;
                }
                self.send(BridgeMessage::GeminiDisconnected {
                    reason: Some("Disconnected at the client's request.".into()),
                })
                .await;
                self.close_socket(CloseCode::Normal, "").await;
                Flow::Close
            }
            other => {
                if self.upstream.is_none() {
                    let kind = match &other {
                        AppMessage::SendMessage { .. } => "SEND_MESSAGE",
                        AppMessage::SendRealtimeInput(_) => "SEND_REALTIME_INPUT",
                        AppMessage::SendToolResponse(_) => "SEND_TOOL_RESPONSE",
                        AppMessage::ContextUpdate(_) => "CONTEXT_UPDATE",
                        _ => "UPDATE_CONFIG",
                    };
                    self.error(format!(
                        "No Gemini session is open: send CONNECT_GEMINI first ({kind} was ignored)."
                    ))
                    .await;
                    return Flow::Continue;
                }
                match other {
                    AppMessage::SendMessage {
                        parts,
                        turn_complete,
                    } => {
                        let content = ClientContent {
                            turns: if parts.is_empty() {
                                Vec::new()
                            } else {
                                vec![Content {
                                    role: Some("user".into()),
                                    parts,
                                }]
                            },
                            turn_complete: Some(turn_complete),
                        };
                        self.forward(ClientMessage::ClientContent(content)).await;
                    }
                    AppMessage::SendRealtimeInput(payload) => self.realtime_input(payload).await,
                    AppMessage::SendToolResponse(response) => self.tool_response(response).await,
                    AppMessage::ContextUpdate(update) => {
                        self.forward(ClientMessage::ContextUpdate(update)).await
                    }
                    AppMessage::UpdateConfig {
                        config,
                        ignored_keys,
                    } => {
                        // Checked before the open session is touched: a config that cannot
                        // work leaves it as it was.
                        match config.to_setup() {
                            Ok(mapped) => {
                                self.warn_ignored(&ignored_keys).await;
                                self.update_config(mapped).await;
                            }
                            Err(e) => {
                                self.error(livetalk_live::excerpt::sentence(&format!("UPDATE_CONFIG was refused and the session goes on unchanged: the LiveConfig cannot be used: {e}"))).await;
                            }
                        }
                    }
                    _ => {}
                }
                Flow::Continue
            }
        }
    }

    async fn warn_ignored(&mut self, keys: &[String]) {
        if !keys.is_empty() {
            let quoted: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
            self.send(BridgeMessage::log(
                LogLevel::Warn,
                format!(
                    "LiveConfig fields this bridge does not know were ignored: {}",
                    quoted.join(", ")
                ),
            ))
            .await;
        }
    }

    async fn forward(&mut self, message: ClientMessage) {
        if let Some(upstream) = &self.upstream
            && upstream.handle.send(message).await.is_err()
        {
            // The reader reports the close with its reason; nothing to add here.
            debug!(peer = %self.peer, "upstream closed while forwarding");
        }
    }

    async fn realtime_input(&mut self, payload: RealtimeInputPayload) {
        let RealtimeInputPayload { mut input, chunks } = payload;
        let mut deprecated = std::mem::take(&mut input.media_chunks);
        deprecated.extend(chunks);
        if !deprecated.is_empty() {
            let count = deprecated.len();
            let used = deprecated.swap_remove(0);
            let slot = if used.mime_type.starts_with("audio/") {
                &mut input.audio
            } else {
                &mut input.video
            };
            if slot.is_none() {
                *slot = Some(used);
            }
            self.send(BridgeMessage::log(
                LogLevel::Warn,
                format!(
                    "SEND_REALTIME_INPUT `chunks`/`mediaChunks` is deprecated: only the first of {count} chunk(s) was used. Send `audio`, `video` or `text` instead."
                ),
            ))
            .await;
        }
        if let Some(audio) = &input.audio
            && !audio.mime_type.starts_with("audio/")
        {
            self.error(format!(
                "SEND_REALTIME_INPUT `audio` must have an audio MIME type such as \"audio/pcm;rate=16000\", not {:?}; ignored.",
                audio.mime_type
            ))
            .await;
            return;
        }
        // The Live API takes one realtime item per message; keep the activity markers around
        // the media they frame.
        let mut items = Vec::new();
        if input.activity_start.is_some() {
            items.push(RealtimeInput {
                activity_start: input.activity_start,
                ..RealtimeInput::default()
            });
        }
        if let Some(audio) = input.audio {
            items.push(RealtimeInput {
                audio: Some(audio),
                ..RealtimeInput::default()
            });
        }
        if let Some(video) = input.video {
            items.push(RealtimeInput {
                video: Some(video),
                ..RealtimeInput::default()
            });
        }
        if let Some(text) = input.text {
            items.push(RealtimeInput {
                text: Some(text),
                ..RealtimeInput::default()
            });
        }
        if input.activity_end.is_some() {
            items.push(RealtimeInput {
                activity_end: input.activity_end,
                ..RealtimeInput::default()
            });
        }
        if input.audio_stream_end.is_some() {
            items.push(RealtimeInput {
                audio_stream_end: input.audio_stream_end,
                ..RealtimeInput::default()
            });
        }
        if items.is_empty() {
            self.error("SEND_REALTIME_INPUT needs at least one of `text`, `audio` or `video`.")
                .await;
            return;
        }
        for item in items {
            self.forward(ClientMessage::RealtimeInput(item)).await;
        }
    }

    async fn tool_response(&mut self, mut response: ToolResponse) {
        let Some(upstream) = &mut self.upstream else {
            return;
        };
        if response.function_responses.is_empty() {
            self.error("SEND_TOOL_RESPONSE needs toolResponse.functionResponses: [{\"id\", \"name\", \"response\"}] (the nested Content/Part form is deprecated and not accepted).").await;
            return;
        }
        for (index, answer) in response.function_responses.iter_mut().enumerate() {
            let Some(id) = answer.id.clone().filter(|id| !id.is_empty()) else {
                self.error(format!("SEND_TOOL_RESPONSE functionResponses[{index}] needs the `id` of the TOOL_CALL it answers; nothing was sent.")).await;
                return;
            };
            let known_name = upstream.pending_calls.get(&id).cloned();
            if answer.name.trim().is_empty() {
                match known_name.clone() {
                    Some(name) => answer.name = name,
                    None => {
                        self.error(format!("SEND_TOOL_RESPONSE functionResponses[{index}] needs a `name` (no pending call has id {id:?}); nothing was sent.")).await;
                        return;
                    }
                }
            }
            // The Live API needs a JSON object; wrap bare values the way the SDKs document.
            if !answer.response.is_object() {
                answer.response = json!({ "output": answer.response.take() });
            }
            if answer.scheduling.is_none() {
                answer.scheduling = upstream.scheduling.get(&answer.name).copied();
            }
        }
        for answer in &response.function_responses {
            if let Some(id) = &answer.id
                && answer.will_continue != Some(true)
            {
                upstream.pending_calls.remove(id);
            }
        }
        self.forward(ClientMessage::ToolResponse(response)).await;
    }

    /// Opens the upstream session for a checked config, resuming `resume` when given, and puts
    /// it under the reconnect supervisor. Reports the outcome with `SETUP_COMPLETE` (from the
    /// session's first event) or [`Self::setup_failed`].
    async fn open_upstream(&mut self, mapped: MappedConfig, resume: Option<String>) {
        for warning in mapped.warnings {
            self.send(BridgeMessage::log(LogLevel::Warn, warning)).await;
        }
        let mut setup = mapped.setup.clone();
        // Always ask for handles, so a goAway, a drop or a later UPDATE_CONFIG can keep the
        // conversation.
        setup.session_resumption = Some(SessionResumptionConfig {
            handle: resume,
            transparent: None,
        });
        let upstream = &self.shared.upstream;
        let options = ConnectOptions {
            endpoint: upstream.endpoint.clone(),
            auth: upstream.api_key.clone().into(),
            setup,
            connect_timeout: upstream.connect_timeout,
        };
        match livetalk_live::client::connect(options.clone()).await {
            Ok(connection) => {
                info!(peer = %self.peer, model = %mapped.setup.model, "upstream session open");
                let supervised = session::supervise(
                    connection,
                    Some(options.into()),
                    ReconnectPolicy::default(),
                    None,
                );
                self.upstream = Some(UpstreamSession {
                    handle: supervised.handle,
                    events: supervised.events,
                    status: supervised.status,
                    setup: mapped.setup,
                    scheduling: mapped.scheduling,
                    pending_calls: HashMap::new(),
                    speaking: false,
                    ready: false,
                });
            }
            Err(e) => {
                let code = match &e {
                    ConnectError::Closed(info) => info.code,
                    ConnectError::Rejected { status, .. } => Some(*status),
                    _ => None,
                };
                let message = e.to_string();
                info!(peer = %self.peer, "upstream session failed: {message}");
                self.setup_failed(code, message).await;
            }
        }
    }

    /// A session that could not be opened, for whatever reason, is told the same way: the
    /// failed `SETUP_COMPLETE`, the `GEMINI_ERROR` and `GEMINI_DISCONNECTED`, so an app has one
    /// sequence to handle.
    async fn setup_failed(&mut self, code: Option<u16>, message: String) {
        self.send(BridgeMessage::SetupComplete(SetupCompleteDetails {
            success: false,
            error: Some(SetupErrorDetails {
                code,
                message: Some(message.clone()),
                details: None,
            }),
        }))
        .await;
        self.error(message.clone()).await;
        self.send(BridgeMessage::GeminiDisconnected {
            reason: Some(message),
        })
        .await;
    }

    /// `UPDATE_CONFIG` with a checked config: the Live API cannot change an open session's
    /// setup, so reconnect, resuming the conversation when a handle is known and the model is
    /// unchanged.
    async fn update_config(&mut self, mapped: MappedConfig) {
        let Some(old) = self.upstream.take() else {
            return;
        };
        let same_model = mapped.setup.model == old.setup.model;
        let resume = match (&old.status.resume_handle(), same_model) {
            (Some(handle), true) => {
                self.send(BridgeMessage::log(
                    LogLevel::Info,
                    "Applying the new config by reconnecting with session resumption; the conversation continues.",
                ))
                .await;
                Some(handle.clone())
            }
            (Some(_), false) => {
                self.send(BridgeMessage::log(
                    LogLevel::Warn,
                    "The model changed, which a resumed session cannot do: starting a fresh session without the conversation so far.",
                ))
                .await;
                None
            }
            (None, _) => {
                self.send(BridgeMessage::log(
                    LogLevel::Warn,
                    "No session resumption handle has arrived yet: the new session starts without the conversation so far.",
                ))
                .await;
                None
            }
        };
        old.handle.close().await;
        drop(old);
        self.open_upstream(mapped, resume).await;
    }

    /// What the upstream session said: a server frame goes to the app as the service sent it
    /// and its events tell the session's course; then the session's own news.
    async fn on_upstream_event(&mut self, event: SessionEvent) -> Flow {
        let event = match event {
            SessionEvent::Server(frame) => {
                if let Some(message) = frame.message {
                    self.on_server_message(Arc::unwrap_or_clone(message)).await;
                }
                for event in frame.events {
                    self.on_server_event(event).await;
                }
                return Flow::Continue;
            }
            other => other,
        };
        let Some(upstream) = &mut self.upstream else {
            return Flow::Continue;
        };
        let message = match event {
            SessionEvent::Server(_) => return Flow::Continue,
            SessionEvent::Change(SessionChange::Reconnecting {
                planned, reason, ..
            }) => {
                upstream.speaking = false;
                let what = if planned {
                    "Moving the Gemini session to a new connection"
                } else {
                    "The connection to the Live API was lost; reconnecting"
                };
                BridgeMessage::log(
                    if planned {
                        LogLevel::Info
                    } else {
                        LogLevel::Warn
                    },
                    livetalk_live::excerpt::sentence(&format!(
                        "{what} ({})",
                        reason.trim_end_matches('.')
                    )),
                )
            }
            SessionEvent::Change(SessionChange::Reconnected { resumed: true }) => {
                BridgeMessage::log(
                    LogLevel::Info,
                    "Reconnected to the Live API; the conversation continues.",
                )
            }
            SessionEvent::Change(SessionChange::Reconnected { resumed: false }) => {
                BridgeMessage::log(
                    LogLevel::Warn,
                    "Reconnected to the Live API with a fresh session: the model does not know the conversation so far.",
                )
            }
            SessionEvent::Change(SessionChange::TurnLost) => {
                BridgeMessage::log(LogLevel::Warn, livetalk_live::session::TURN_LOST)
            }
            SessionEvent::Change(SessionChange::ResumeRejected { message }) => {
                BridgeMessage::log(LogLevel::Warn, message)
            }
            SessionEvent::Change(SessionChange::AnswerDropped { id, name }) => BridgeMessage::log(
                LogLevel::Warn,
                format!(
                    "The answer to {name} (id {}) was not sent: its call belongs to a connection that has ended, or was answered already.",
                    id.as_deref().unwrap_or("none")
                ),
            ),
            SessionEvent::Abandoned(ids) => {
                // The calls' connection is gone: the app must stop them and not answer.
                for id in &ids {
                    upstream.pending_calls.remove(id);
                }
                BridgeMessage::ToolCallCancellation {
                    tool_call_cancellation: ToolCallCancellation { ids },
                }
            }
        };
        self.send(message).await;
        Flow::Continue
    }

    /// One event of a server frame, where the app hears of it: the session set up, a frame
    /// that could not be used, the end. (What the model said went with the frame's message.)
    async fn on_server_event(&mut self, event: ServerEvent) {
        let Some(upstream) = &mut self.upstream else {
            return;
        };
        let message = match event {
            ServerEvent::SetupComplete { .. } => {
                // A new connection of the same session is news for the log, not for the app.
                if std::mem::replace(&mut upstream.ready, true) {
                    return;
                }
                BridgeMessage::SetupComplete(SetupCompleteDetails {
                    success: true,
                    error: None,
                })
            }
            ServerEvent::FrameSkipped { reason } => BridgeMessage::log(LogLevel::Warn, reason),
            ServerEvent::Closed(close) => {
                self.upstream = None;
                info!(peer = %self.peer, code = ?close.code, "upstream closed: {}", close.message);
                self.send(BridgeMessage::GeminiError {
                    message: close.message.clone(),
                    details: Some(json!({ "code": close.code, "reason": close.reason })),
                })
                .await;
                BridgeMessage::GeminiDisconnected {
                    reason: Some(close.message),
                }
            }
            _ => return,
        };
        self.send(message).await;
    }

    /// One server message, passed on as the service sent it: audio as `AUDIO_CHUNK`, the rest
    /// of `serverContent` (and the usage beside it) as `CONTENT_MESSAGE`, then the dedicated
    /// messages apps look for (`INTERRUPTED`, `TURN_COMPLETE`, `TOOL_CALL`, …).
    async fn on_server_message(&mut self, mut message: ServerMessage) {
        let Some(upstream) = &mut self.upstream else {
            return;
        };
        let mut out: Vec<BridgeMessage> = Vec::new();
        let mut usage = message.usage_metadata.take();
        if let Some(mut content) = message.server_content.take() {
            if let Some(turn) = &mut content.model_turn {
                let mut audio = Vec::new();
                turn.parts.retain_mut(|part| match &mut part.inline_data {
                    Some(blob) if blob.mime_type.starts_with("audio/") => {
                        audio.push(std::mem::take(&mut blob.data));
                        false
                    }
                    _ => true,
                });
                for data in audio {
                    if !std::mem::replace(&mut upstream.speaking, true) {
                        out.push(BridgeMessage::AssistantSpeaking { speaking: true });
                    }
                    out.push(BridgeMessage::AudioChunk { data });
                }
                if turn.parts.is_empty() {
                    content.model_turn = None;
                }
            }
            let interrupted = content.interrupted == Some(true);
            let turn_complete = content.turn_complete == Some(true);
            let details = TurnCompleteDetails {
                reason: content.turn_complete_reason.clone(),
                waiting_for_input: content.waiting_for_input.filter(|w| *w),
                interaction_status: content.interaction_status.clone(),
            };
            let grounding = content.grounding_metadata.clone();
            if content != Default::default() || usage.is_some() {
                out.push(BridgeMessage::content(content, usage.take()));
            }
            if let Some(metadata) = grounding {
                // Apps read it from CONTENT_MESSAGE; the protocol also names a message of its own.
                out.push(BridgeMessage::GroundingMetadata {
                    grounding_metadata: Some(metadata),
                });
            }
            if interrupted {
                upstream.speaking = false;
                out.push(BridgeMessage::Interrupted {});
            }
            if turn_complete {
                upstream.speaking = false;
                out.push(BridgeMessage::TurnComplete(details));
            }
        }
        if usage.is_some() {
            out.push(BridgeMessage::content(Default::default(), usage));
        }
        if let Some(call) = message.tool_call.take() {
            for call in &call.function_calls {
                if let Some(id) = &call.id {
                    upstream.pending_calls.insert(id.clone(), call.name.clone());
                }
            }
            out.push(BridgeMessage::ToolCall { tool_call: call });
        }
        if let Some(cancel) = message.tool_call_cancellation.take() {
            for id in &cancel.ids {
                upstream.pending_calls.remove(id);
            }
            out.push(BridgeMessage::ToolCallCancellation {
                tool_call_cancellation: cancel,
            });
        }
        if message.voice_activity.is_some() || message.voice_activity_detection_signal.is_some() {
            out.push(BridgeMessage::VoiceActivity {
                voice_activity: message.voice_activity.take(),
                voice_activity_detection_signal: message.voice_activity_detection_signal.take(),
            });
        }
        if let Some(go_away) = message.go_away.take() {
            let when = go_away
                .time_left
                .map(|t| format!(" in {:.0} s", t.as_secs_f64()))
                .unwrap_or_default();
            out.push(BridgeMessage::log(
                LogLevel::Info,
                format!(
                    "The Live API will end this connection{when} (goAway); the bridge moves the session to a new one and the conversation continues."
                ),
            ));
        }
        // `sessionResumptionUpdate` is the supervisor's business; `setupComplete` came during
        // setup.
        for message in out {
            self.send(message).await;
        }
    }
}
