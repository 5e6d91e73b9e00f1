//! The bridge's translation, apart from any transport: what an app's message asks of its Live
//! session, and what the session's news and the service's messages are for the app. It keeps
//! what one app's conversation needs remembered (the session's setup, unanswered calls, whether
//! the model is speaking) and does no I/O, so the session loop can run it over any transport.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::json;
use tracing::info;

use super::live_config::MappedConfig;
use super::protocol::{
    AppMessage, BridgeMessage, IceCandidate, ImageGenerationResult, LogLevel, RealtimeInputPayload,
    SetupCompleteDetails, SetupErrorDetails, TurnCompleteDetails,
};
use livetalk_live::events::Inbound;
use livetalk_live::reading::{AudioPart, Reading};
use livetalk_live::session::{SessionChange, SessionEvent};
use livetalk_live::wire::{
    ClientContent, ClientMessage, Content, RealtimeInput, Scheduling, ServerMessage,
    SessionResumptionConfig, Setup, ToolCallCancellation, ToolResponse,
};
use livetalk_live::{ServerEvent, excerpt};

/// What the translator remembers of the open Live session.
#[derive(Debug, Default)]
struct UpstreamState {
    /// The setup it was opened with (before the resumption handle), to compare models.
    setup: Setup,
    /// `defaultScheduling` of NON_BLOCKING functions.
    scheduling: HashMap<String, Scheduling>,
    /// Unanswered calls: id → name (fills in a missing `name` of a response).
    pending_calls: HashMap<String, String>,
    /// Calls withdrawn lately (cancelled, or lost with their connection), newest last: an
    /// answer already on its way when the app was told is dropped with a warning, not an
    /// error.
    withdrawn: std::collections::VecDeque<String>,
    /// Model audio is flowing in the current turn (`ASSISTANT_SPEAKING` was sent).
    speaking: bool,
    /// `SETUP_COMPLETE` was sent; later connections of the same session do not repeat it.
    ready: bool,
}

/// What one app message comes to. The loop sends `to_app` first, then `to_live` to the open
/// session, then takes the `session` step, then the `media` step.
#[derive(Debug, Default, PartialEq)]
pub struct Reply {
    pub to_app: Vec<BridgeMessage>,
    pub to_live: Vec<ClientMessage>,
    pub session: Option<SessionStep>,
    pub media: Option<MediaStep>,
}

/// The app's WebRTC signalling: the loop's to carry out, as it takes sockets. The loop holds
/// it until the session is set up (an app may offer before `SETUP_COMPLETE`).
#[derive(Debug, PartialEq)]
pub enum MediaStep {
    /// `WEBRTC_OFFER`: answer it with a new peer connection (replacing any other).
    Offer(String),
    /// `WEBRTC_ICE_CANDIDATE`: one more of the app's candidates for the peer connection.
    Candidate(IceCandidate),
}

/// A change of Live session the app asked for: the loop's to make, as it takes I/O.
#[derive(Debug, PartialEq)]
pub enum SessionStep {
    /// `CONNECT_GEMINI` with a usable config: open a session ([`Translator::opening`]),
    /// resuming the conversation of the handle the app gave, if any.
    Open {
        config: MappedConfig,
        resume: Option<String>,
    },
    /// `UPDATE_CONFIG` with a usable config: the Live API cannot change an open session's
    /// setup, so the session is replaced ([`Translator::reopening`], then as `Open`).
    Reopen(MappedConfig),
    /// `DISCONNECT_GEMINI`: close the session, tell the app `farewell`, close the connection.
    Disconnect { farewell: BridgeMessage },
}

/// One app connection's translation state.
#[derive(Debug, Default)]
pub struct Translator {
    session: Option<UpstreamState>,
    /// The session being opened, until [`Translator::opened`] or [`Translator::setup_failed`].
    opening: Option<UpstreamState>,
    /// The model's audio also goes out on a WebRTC track, whose pacing says when the model is
    /// heard: `ASSISTANT_SPEAKING` is then the track's to send, not the translator's.
    media_track: bool,
    /// The app takes `SESSION_HANDLE`s (its `CONNECT_GEMINI` did not say `sessionHandles:
    /// false`), and the handle it was told last.
    session_handles: bool,
    handle_told: Option<String>,
}

impl Translator {
    pub fn new() -> Self {
        Self::default()
    }

    /// A Live session is open (the loop holds one exactly when this says so).
    pub fn is_open(&self) -> bool {
        self.session.is_some()
    }

    /// The open session is set up (`SETUP_COMPLETE` was sent): WebRTC signalling held until
    /// now may go ahead.
    pub fn is_ready(&self) -> bool {
        self.session.as_ref().is_some_and(|s| s.ready)
    }

    /// Whether a WebRTC track plays the model's audio (see [`Translator`]'s `media_track`).
    pub fn set_media_track(&mut self, on: bool) {
        self.media_track = on;
    }

    /// Microphone audio from the app's WebRTC track (16 kHz PCM16 mono), for the open session;
    /// `None` when none is open.
    pub fn track_audio(&self, pcm: Vec<u8>) -> Option<ClientMessage> {
        self.session.as_ref()?;
        Some(ClientMessage::RealtimeInput(RealtimeInput::mic_audio(pcm)))
    }

    // -----------------------------------------------------------------------------------------
    // App → Live
    // -----------------------------------------------------------------------------------------

    /// One message from the app.
    pub fn app(&mut self, message: AppMessage) -> Reply {
        let mut reply = Reply::default();
        match message {
            AppMessage::GenerateImage => {
                // Apps wait a minute for the result: say at once that none is coming.
                reply.to_app.push(BridgeMessage::ImageGenerationResult(ImageGenerationResult {
                    success: false,
                    error: Some("This bridge cannot generate images: the Gemini Live API answers with audio or text only. Ask for a description instead, or use an image generation API.".into()),
                    ..ImageGenerationResult::default()
                }));
            }
            AppMessage::WebrtcOffer(offer) => reply.media = Some(MediaStep::Offer(offer.sdp)),
            AppMessage::WebrtcIceCandidate(candidate) => {
                reply.media = Some(MediaStep::Candidate(candidate))
            }
            AppMessage::ConnectGemini {
                config,
                ignored_keys,
                resume,
            } => {
                if self.session.is_some() {
                    reply.to_app.push(BridgeMessage::error("A Gemini session is already open on this connection. Use UPDATE_CONFIG to change its configuration, or DISCONNECT_GEMINI first."));
                    return reply;
                }
                self.session_handles = resume.session_handles;
                reply.to_app.extend(ignored(&ignored_keys));
                reply.to_app.push(BridgeMessage::GeminiConnected {});
                match config.to_setup() {
                    Ok(mapped) => {
                        reply.session = Some(SessionStep::Open {
                            config: mapped,
                            resume: resume.handle,
                        })
                    }
                    Err(e) => reply.to_app.extend(self.setup_failed(
                        None,
                        excerpt::sentence(&format!("The LiveConfig cannot be used: {e}")),
                    )),
                }
            }
            AppMessage::DisconnectGemini => {
                self.session = None;
                reply.session = Some(SessionStep::Disconnect {
                    farewell: BridgeMessage::GeminiDisconnected {
                        reason: Some("Disconnected at the client's request.".into()),
                        code: None,
                    },
                });
            }
            other => {
                let Some(session) = &mut self.session else {
                    reply.to_app.push(BridgeMessage::error(format!(
                        "No Gemini session is open: send CONNECT_GEMINI first ({} was ignored).",
                        other.kind()
                    )));
                    return reply;
                };
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
                        reply.to_live.push(ClientMessage::ClientContent(content));
                    }
                    AppMessage::SendRealtimeInput(payload) => realtime_input(payload, &mut reply),
                    AppMessage::SendToolResponse(response) => {
                        session.tool_response(response, &mut reply)
                    }
                    AppMessage::ContextUpdate(update) => {
                        reply.to_live.push(ClientMessage::ContextUpdate(update))
                    }
                    AppMessage::UpdateConfig {
                        config,
                        ignored_keys,
                    } => {
                        // Checked before the open session is touched: a config that cannot
                        // work leaves it as it was.
                        match config.to_setup() {
                            Ok(mapped) => {
                                reply.to_app.extend(ignored(&ignored_keys));
                                reply.session = Some(SessionStep::Reopen(mapped));
                            }
                            Err(e) => reply.to_app.push(BridgeMessage::error(excerpt::sentence(
                                &format!("UPDATE_CONFIG was refused and the session goes on unchanged: the LiveConfig cannot be used: {e}"),
                            ))),
                        }
                    }
                    AppMessage::ConnectGemini { .. }
                    | AppMessage::DisconnectGemini
                    | AppMessage::WebrtcOffer(_)
                    | AppMessage::WebrtcIceCandidate(_)
                    | AppMessage::GenerateImage => {}
                }
            }
        }
        reply
    }

    /// The session to open for a checked config, resuming `resume` when given: the app is
    /// told the config's warnings, and the loop connects with the setup (which always asks for
    /// resumption handles, so a goAway, a drop or a later `UPDATE_CONFIG` can keep the
    /// conversation). Then [`Self::opened`] or [`Self::setup_failed`].
    pub fn opening(
        &mut self,
        mapped: MappedConfig,
        resume: Option<String>,
    ) -> (Vec<BridgeMessage>, Setup) {
        let warnings = mapped
            .warnings
            .into_iter()
            .map(|warning| BridgeMessage::log(LogLevel::Warn, warning))
            .collect();
        let mut setup = mapped.setup.clone();
        if resume.is_some() {
            // The app holds it already (it gave it, or was told it): no need to tell it back.
            self.handle_told.clone_from(&resume);
        }
        setup.session_resumption = Some(SessionResumptionConfig {
            handle: resume,
            transparent: None,
        });
        self.opening = Some(UpstreamState {
            setup: mapped.setup,
            scheduling: mapped.scheduling,
            ..UpstreamState::default()
        });
        (warnings, setup)
    }

    /// The session being opened is connected (`SETUP_COMPLETE` follows from its first event).
    pub fn opened(&mut self) {
        self.session = self.opening.take();
    }

    /// A session that could not be opened, for whatever reason, is told the same way: the
    /// failed `SETUP_COMPLETE`, the `GEMINI_ERROR` and `GEMINI_DISCONNECTED`, so an app has one
    /// sequence to handle.
    pub fn setup_failed(&mut self, code: Option<u16>, message: String) -> Vec<BridgeMessage> {
        self.opening = None;
        vec![
            BridgeMessage::SetupComplete(SetupCompleteDetails {
                success: false,
                error: Some(SetupErrorDetails {
                    code,
                    message: Some(message.clone()),
                    details: None,
                }),
            }),
            BridgeMessage::error(message.clone()),
            BridgeMessage::GeminiDisconnected {
                reason: Some(message),
                code: None,
            },
        ]
    }

    /// `UPDATE_CONFIG`'s replacement of the open session: whether the new one resumes the
    /// conversation (with `handle`, the open session's latest, when the model is unchanged),
    /// and what the app is told about it. The open session is forgotten; the loop closes it
    /// and goes on as for [`SessionStep::Open`].
    pub fn reopening(
        &mut self,
        mapped: &MappedConfig,
        handle: Option<String>,
    ) -> (BridgeMessage, Option<String>) {
        let same_model = self
            .session
            .take()
            .is_some_and(|old| old.setup.model == mapped.setup.model);
        match (handle, same_model) {
            (Some(handle), true) => (
                BridgeMessage::log(
                    LogLevel::Info,
                    "Applying the new config by reconnecting with session resumption; the conversation continues.",
                ),
                Some(handle),
            ),
            (Some(_), false) => (
                BridgeMessage::log(
                    LogLevel::Warn,
                    "The model changed, which a resumed session cannot do: starting a fresh session without the conversation so far.",
                ),
                None,
            ),
            (None, _) => (
                BridgeMessage::log(
                    LogLevel::Warn,
                    "No session resumption handle has arrived yet: the new session starts without the conversation so far.",
                ),
                None,
            ),
        }
    }

    /// The session's events ended without its close (defensive: the reader always sends one).
    pub fn session_lost(&mut self) {
        self.session = None;
    }

    // -----------------------------------------------------------------------------------------
    // Live → app
    // -----------------------------------------------------------------------------------------

    /// What the upstream session said: a server frame goes to the app as the service sent it
    /// and its events tell the session's course; then the session's own news.
    pub fn session_event(&mut self, event: SessionEvent) -> Vec<BridgeMessage> {
        let event = match event {
            SessionEvent::Server(inbound) => return self.inbound(inbound),
            other => other,
        };
        let Some(session) = &mut self.session else {
            return Vec::new();
        };
        let message = match event {
            SessionEvent::Server(_) => return Vec::new(),
            SessionEvent::Change(SessionChange::Reconnecting {
                planned, reason, ..
            }) => {
                session.speaking = false;
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
                    excerpt::sentence(&format!("{what} ({})", reason.trim_end_matches('.'))),
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
                    session.withdraw(id);
                }
                BridgeMessage::ToolCallCancellation {
                    tool_call_cancellation: ToolCallCancellation { ids },
                }
            }
        };
        vec![message]
    }

    /// One frame of the service's: its message as the service sent it, then where its events
    /// concern the app (the session set up, a frame that could not be used, the end).
    pub fn inbound(&mut self, inbound: Inbound) -> Vec<BridgeMessage> {
        let mut out = Vec::new();
        let Inbound {
            message,
            audio,
            mut events,
            ..
        } = inbound;
        if let Some(message) = message {
            // The samples are the events' (held once); they leave as `AUDIO_CHUNK`s.
            let samples = events
                .iter_mut()
                .filter_map(|event| match event {
                    ServerEvent::ModelAudio { pcm, .. } => Some(std::mem::take(pcm)),
                    _ => None,
                })
                .collect();
            self.server_message(Arc::unwrap_or_clone(message), &audio, samples, &mut out);
        }
        for event in events {
            self.server_event(event, &mut out);
        }
        out
    }

    fn server_event(&mut self, event: ServerEvent, out: &mut Vec<BridgeMessage>) {
        let Some(session) = &mut self.session else {
            return;
        };
        match event {
            // A new connection of the same session is news for the log, not for the app.
            ServerEvent::SetupComplete { .. } if !session.ready => {
                session.ready = true;
                out.push(BridgeMessage::SetupComplete(SetupCompleteDetails {
                    success: true,
                    error: None,
                }));
            }
            ServerEvent::FrameSkipped { reason } => {
                out.push(BridgeMessage::log(LogLevel::Warn, reason))
            }
            ServerEvent::Closed(close) => {
                // Its calls can no longer be answered: the app stops them first.
                out.extend(self.cancel_pending());
                self.session = None;
                info!(code = ?close.code, "upstream closed: {}", close.message);
                out.push(BridgeMessage::GeminiError {
                    message: close.message.clone(),
                    details: Some(json!({ "code": close.code, "reason": close.reason })),
                });
                out.push(BridgeMessage::GeminiDisconnected {
                    reason: Some(close.message),
                    code: None,
                });
            }
            _ => {}
        }
    }

    /// One server message, passed on as the service sent it: audio as `AUDIO_CHUNK` (its
    /// bytes moved, encoded once on the way out), the rest of `serverContent` (and the usage
    /// beside it) as `CONTENT_MESSAGE`, then the dedicated messages apps look for
    /// (`INTERRUPTED`, `TURN_COMPLETE`, `TOOL_CALL`, …). What it means is read from its
    /// [`Reading`]; what is forwarded is moved out of it as sent.
    fn server_message(
        &mut self,
        message: ServerMessage,
        audio: &[AudioPart],
        samples: Vec<Vec<u8>>,
        out: &mut Vec<BridgeMessage>,
    ) {
        let Some(session) = &mut self.session else {
            return;
        };
        let reading = Reading::of(&message, audio);
        let turn = reading.turn();
        let details = TurnCompleteDetails {
            reason: reading.turn_complete_reason().map(str::to_owned),
            waiting_for_input: turn.waiting_for_input.then_some(true),
            interaction_status: reading.interaction().map(|i| i.status().to_owned()),
        };
        let go_away = reading.go_away();
        let voice = reading.voice_activity().is_some() || reading.voice_signal().is_some();
        for call in reading.calls() {
            if let Some(id) = &call.id {
                session.pending_calls.insert(id.clone(), call.name.clone());
            }
        }
        for id in reading.cancelled() {
            session.withdraw(id);
        }
        let audio_parts: Vec<usize> = audio.iter().map(|part| part.part).collect();
        let ServerMessage {
            server_content,
            usage_metadata: mut usage,
            tool_call,
            tool_call_cancellation,
            voice_activity,
            voice_activity_detection_signal,
            ..
        } = message;
        if let Some(mut content) = server_content {
            for data in samples {
                if !std::mem::replace(&mut session.speaking, true) && !self.media_track {
                    out.push(BridgeMessage::AssistantSpeaking { speaking: true });
                }
                out.push(BridgeMessage::AudioChunk { data });
            }
            if let Some(turn) = &mut content.model_turn {
                let mut index = 0;
                turn.parts.retain(|_| {
                    index += 1;
                    !audio_parts.contains(&(index - 1))
                });
                if turn.parts.is_empty() {
                    content.model_turn = None;
                }
            }
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
            if turn.interrupted {
                session.speaking = false;
                out.push(BridgeMessage::Interrupted {});
            }
            if turn.turn_complete {
                session.speaking = false;
                out.push(BridgeMessage::TurnComplete(details));
            }
        }
        if usage.is_some() {
            out.push(BridgeMessage::content(Default::default(), usage));
        }
        if let Some(call) = tool_call {
            out.push(BridgeMessage::ToolCall { tool_call: call });
        }
        if let Some(cancel) = tool_call_cancellation {
            out.push(BridgeMessage::ToolCallCancellation {
                tool_call_cancellation: cancel,
            });
        }
        if voice {
            out.push(BridgeMessage::VoiceActivity {
                voice_activity,
                voice_activity_detection_signal,
            });
        }
        if let Some(time_left) = go_away {
            let when = time_left
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
    }
}

impl UpstreamState {
    fn tool_response(&mut self, mut response: ToolResponse, reply: &mut Reply) {
        if response.function_responses.is_empty() {
            reply.to_app.push(BridgeMessage::error("SEND_TOOL_RESPONSE needs toolResponse.functionResponses: [{\"id\", \"name\", \"response\"}] (the nested Content/Part form is deprecated and not accepted)."));
            return;
        }
        let mut late = Vec::new();
        for (index, answer) in response.function_responses.iter_mut().enumerate() {
            let Some(id) = answer.id.clone().filter(|id| !id.is_empty()) else {
                reply.to_app.push(BridgeMessage::error(format!("SEND_TOOL_RESPONSE functionResponses[{index}] needs the `id` of the TOOL_CALL it answers; nothing was sent.")));
                return;
            };
            let Some(name) = self.pending_calls.get(&id) else {
                if self.withdrawn.contains(&id) {
                    late.push(id);
                    continue;
                }
                // Never asked, or answered already: the model must not get it.
                reply.to_app.push(BridgeMessage::error(excerpt::sentence(&format!("SEND_TOOL_RESPONSE functionResponses[{index}] answers no pending call (id {:?}): it was never asked on this session, or was answered already; nothing was sent.", excerpt::bounded(&id, excerpt::SUMMARY)))));
                return;
            };
            if answer.name.trim().is_empty() {
                answer.name = name.clone();
            }
            // The Live API needs a JSON object; wrap bare values the way the SDKs document.
            if !answer.response.is_object() {
                answer.response = json!({ "output": answer.response.take() });
            }
            if answer.scheduling.is_none() {
                answer.scheduling = self.scheduling.get(&answer.name).copied();
            }
        }
        if !late.is_empty() {
            // The app was told to stop these as its answers were on their way.
            response
                .function_responses
                .retain(|answer| answer.id.as_ref().is_none_or(|id| !late.contains(id)));
            reply.to_app.push(BridgeMessage::log(
                LogLevel::Warn,
                excerpt::sentence(&format!(
                    "The answer to {} cancelled call(s) ({}) came after TOOL_CALL_CANCELLATION and was not sent.",
                    late.len(),
                    excerpt::bounded(&late.join(", "), excerpt::SUMMARY)
                )),
            ));
        }
        for answer in &response.function_responses {
            if let Some(id) = &answer.id
                && answer.will_continue != Some(true)
            {
                self.pending_calls.remove(id);
            }
        }
        if !response.function_responses.is_empty() {
            reply.to_live.push(ClientMessage::ToolResponse(response));
        }
    }

    /// A call the app must stop and not answer (cancelled, or lost with its connection).
    fn withdraw(&mut self, id: &str) {
        /// Withdrawn calls remembered, for answers already under way.
        const WITHDRAWN_KEPT: usize = 1024;
        if self.pending_calls.remove(id).is_some() {
            if self.withdrawn.len() >= WITHDRAWN_KEPT {
                self.withdrawn.pop_front();
            }
            self.withdrawn.push_back(id.to_owned());
        }
    }
}

/// `SEND_REALTIME_INPUT`: the Live API takes one realtime item per message, so the payload
/// goes as one message per item, the activity markers around the media they frame.
fn realtime_input(payload: RealtimeInputPayload, reply: &mut Reply) {
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
        reply.to_app.push(BridgeMessage::log(
            LogLevel::Warn,
            format!(
                "SEND_REALTIME_INPUT `chunks`/`mediaChunks` is deprecated: only the first of {count} chunk(s) was used. Send `audio`, `video` or `text` instead."
            ),
        ));
    }
    if let Some(audio) = &input.audio
        && !audio.mime_type.starts_with("audio/")
    {
        reply.to_app.push(BridgeMessage::error(format!(
            "SEND_REALTIME_INPUT `audio` must have an audio MIME type such as \"audio/pcm;rate=16000\", not {:?}; ignored.",
            audio.mime_type
        )));
        return;
    }
    let items = [
        RealtimeInput {
            activity_start: input.activity_start,
            ..RealtimeInput::default()
        },
        RealtimeInput {
            audio: input.audio,
            ..RealtimeInput::default()
        },
        RealtimeInput {
            video: input.video,
            ..RealtimeInput::default()
        },
        RealtimeInput {
            text: input.text,
            ..RealtimeInput::default()
        },
        RealtimeInput {
            activity_end: input.activity_end,
            ..RealtimeInput::default()
        },
        RealtimeInput {
            audio_stream_end: input.audio_stream_end,
            ..RealtimeInput::default()
        },
    ];
    let before = reply.to_live.len();
    reply.to_live.extend(
        items
            .into_iter()
            .filter(|item| *item != RealtimeInput::default())
            .map(ClientMessage::RealtimeInput),
    );
    if reply.to_live.len() == before {
        reply.to_app.push(BridgeMessage::error(
            "SEND_REALTIME_INPUT needs at least one of `text`, `audio` or `video`.",
        ));
    }
}

/// The `LOG_MESSAGE` about LiveConfig keys the bridge does not know, when there are any.
fn ignored(keys: &[String]) -> Option<BridgeMessage> {
    (!keys.is_empty()).then(|| {
        let quoted: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
        BridgeMessage::log(
            LogLevel::Warn,
            format!(
                "LiveConfig fields this bridge does not know were ignored: {}",
                quoted.join(", ")
            ),
        )
    })
}

// ---------------------------------------------------------------------------------------------
// Sessions that end on one connection and go on on another (docs/bridge-protocol.md,
// "SESSION_HANDLE" and "Draining")
// ---------------------------------------------------------------------------------------------

/// What the app is told when this instance is draining and closes its connection: reconnect
/// (through the load balancer) with the session handle.
pub const DRAINING: &str = "This bridge instance is shutting down (draining): reconnect to go on with the conversation, with the newest SESSION_HANDLE.";

/// The WebSocket close code of a drain: the service restarts, come back (RFC 6455's 1012).
pub const DRAIN_CLOSE_CODE: u16 = 1012;

impl Translator {
    /// `SESSION_HANDLE` when the session's newest resumption handle is not the one the app was
    /// told last (and the app takes them).
    pub fn handle_changed(&mut self, handle: Option<String>) -> Option<BridgeMessage> {
        if !self.session_handles || self.session.is_none() || handle == self.handle_told {
            return None;
        }
        self.handle_told.clone_from(&handle);
        Some(BridgeMessage::SessionHandle { handle })
    }

    /// `TOOL_CALL_CANCELLATION` for every call of the open session the app has not answered:
    /// the session they belong to is ending, so they must be stopped and never answered.
    pub fn cancel_pending(&mut self) -> Option<BridgeMessage> {
        let session = self.session.as_mut()?;
        if session.pending_calls.is_empty() {
            return None;
        }
        let mut ids: Vec<String> = session.pending_calls.keys().cloned().collect();
        ids.sort();
        for id in &ids {
            session.withdraw(id);
        }
        Some(BridgeMessage::ToolCallCancellation {
            tool_call_cancellation: ToolCallCancellation { ids },
        })
    }

    /// Calls of the open session still waiting for the app's answer.
    pub fn calls_pending(&self) -> bool {
        self.session
            .as_ref()
            .is_some_and(|s| !s.pending_calls.is_empty())
    }

    /// The last words of a connection this instance closes because it is draining: the calls
    /// left open cancelled, the newest handle (`handle`, told again even if unchanged, so the
    /// app holds it whatever it missed), then `GEMINI_DISCONNECTED` with the reason and the
    /// close code that follows. The session is forgotten.
    pub fn leaving(&mut self, handle: Option<String>) -> Vec<BridgeMessage> {
        let mut out: Vec<BridgeMessage> = self.cancel_pending().into_iter().collect();
        let session_handles = self.session_handles && self.session.is_some();
        if session_handles {
            self.handle_told.clone_from(&handle);
            out.push(BridgeMessage::SessionHandle { handle });
        }
        self.session = None;
        out.push(BridgeMessage::GeminiDisconnected {
            reason: Some(DRAINING.to_owned()),
            code: session_handles.then_some(DRAIN_CLOSE_CODE),
        });
        out
    }
}

#[cfg(test)]
mod tests;
