//! One mock connection: `setup` → `setupComplete`, then turns that behave like the service on
//! the wire (tool calls, streamed 24 kHz audio with transcription, generationComplete →
//! turnComplete + usage, interruption with cancellation). This file owns the connection's
//! state and its turns; what a setup means, how a reply streams, the open calls, what the
//! user's audio is heard as and the frames of faults are the modules below.

mod calls;
mod faults;
pub(crate) mod hearing;
mod messages;
mod reply;
mod setup;

pub(crate) use setup::{INVALID_ARGUMENT, manual_activity};
pub use setup::{message_refusal, refusal};

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tracing::{debug, warn};

use crate::flavor::Flavor;
use crate::model::{ModelStep, PlannedCall, ScriptedModel};
use crate::random;
use crate::resumption::Snapshot;
use crate::scenario::{FaultAction, Moment};
use crate::state::{Declared, MockState};
use crate::vad::VadEvent;
use crate::voice;
use crate::ws_server::{self, Ending, truncate_reason};
use calls::OpenCalls;
use faults::fault_frame;
use hearing::Hearing;
use livetalk_live::ApiKey;
use livetalk_live::budget::{Gate, Held, InputBudget, Refused};
use livetalk_live::codec::{DecodeError, decode_client, encode_server};
use livetalk_live::wire::*;
use messages::{Outgoing, resumption_update, server_content};
use reply::{AUDIO_TOKENS_PER_SECOND, Speech};
use setup::{Settings, declares_search, instruction_text, non_blocking_names};

/// What a step of the connection leaves it at.
enum Outcome {
    Continue,
    Close(u16, String),
    /// Abrupt end: the socket goes away without a close frame.
    Drop,
}

/// The server side of one connection: the scripted model it speaks for, the reply being
/// streamed, the calls waiting for answers and the faults in force.
pub(crate) struct MockConnection {
    flavor: Flavor,
    /// The API version the client's path named: the service's refusals name it.
    version: &'static str,
    speed: f64,
    model: ScriptedModel,
    /// What the client's `setup` asked for.
    settings: Settings,
    /// NON_BLOCKING functions, by name: on a model with asynchronous turns, calling one ends
    /// the turn with `IN_PROGRESS` and the interaction goes on.
    non_blocking: Vec<String>,
    /// The first model turn has begun (the usage-only message comes before it).
    answered: bool,
    calls: OpenCalls,
    speech: Option<Speech>,
    /// The model has an open turn: calls pending or a reply streaming.
    turn_active: bool,
    hearing: Hearing,
    text_buffer: String,
    prompt_tokens: f64,
    /// A number of this connection's own: its call ids count up from it, it is the Vertex
    /// session id and it seeds garbage frames.
    call_base: u64,
    outbox: Vec<Outgoing>,
    state: Arc<MockState>,
    /// The API key the client connected with: its handles resume only under it.
    key: Option<ApiKey>,
    /// A goAway was sent: close like this at that time.
    close_at: Option<(Instant, u16, String)>,
    /// A stall fault: send nothing until then.
    stalled_until: Option<Instant>,
    /// A fault ends the connection after this step.
    forced: Option<Outcome>,
    /// When the client last showed a picture.
    last_picture: Option<Instant>,
}

use crate::PICTURE_STREAM_GAP as STREAM_GAP;

impl MockConnection {
    /// A connection to a client that dialled `flavor`'s API `version` with `key`, streaming
    /// replies `speed` times faster than real time.
    pub(crate) fn new(
        flavor: Flavor,
        version: &'static str,
        speed: f64,
        state: Arc<MockState>,
        key: Option<ApiKey>,
    ) -> Self {
        // Ids look like the service's: function-call-<up to 19 digits>.
        let call_base = random::per_run() % 9_000_000_000_000_000_000 + 1_000_000_000_000_000_000;
        MockConnection {
            flavor,
            version,
            speed,
            model: ScriptedModel::new(Vec::<String>::new()),
            settings: Settings::default(),
            non_blocking: Vec::new(),
            answered: false,
            calls: OpenCalls::new(call_base),
            speech: None,
            turn_active: false,
            hearing: Hearing::new(&state),
            text_buffer: String::new(),
            prompt_tokens: 0.0,
            call_base,
            outbox: Vec::new(),
            state,
            key,
            close_at: None,
            stalled_until: None,
            forced: None,
            last_picture: None,
        }
    }

    /// Serves one connection to its end; `gate` has what its socket held of the input budget
    /// for the message read last.
    pub(crate) async fn run<S>(mut self, socket: WebSocketStream<S>, gate: Gate)
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let (mut sink, mut stream) = socket.split();
        let mut set_up = false;
        let ending = loop {
            let stalled_until = self.stalled_until;
            let next_at = match stalled_until {
                Some(_) => None,
                None => self.speech.as_ref().map(|s| s.next_at),
            };
            let close_at = self.close_at.as_ref().map(|(at, _, _)| *at);
            let outcome = tokio::select! {
                // A message takes what its bytes held while they were read (a ping between
                // its frames takes nothing).
                frame = stream.next() => match frame {
                    Some(Ok(Message::Text(text))) => self.on_frame(text.as_bytes(), gate.take(), &mut set_up).await,
                    Some(Ok(Message::Binary(bytes))) => self.on_frame(&bytes, gate.take(), &mut set_up).await,
                    Some(Ok(Message::Close(_))) => break Ending::PeerClosed,
                    None => break Ending::Gone,
                    Some(Ok(_)) => Outcome::Continue,
                    Some(Err(e)) => {
                        debug!("mock connection ended: {e}");
                        drop(gate.take());
                        break Ending::ReadFailed(e);
                    }
                },
                _ = tokio::time::sleep_until(next_at.unwrap_or_else(Instant::now)), if next_at.is_some() => {
                    self.stream_next_chunk();
                    Outcome::Continue
                }
                _ = tokio::time::sleep_until(close_at.unwrap_or_else(Instant::now)), if close_at.is_some() => {
                    match self.close_at.take() {
                        Some((_, code, reason)) => Outcome::Close(code, reason),
                        None => Outcome::Continue,
                    }
                }
                _ = tokio::time::sleep_until(stalled_until.unwrap_or_else(Instant::now)), if stalled_until.is_some() => {
                    self.stalled_until = None;
                    // Replies resume from now, not in a burst of everything that was due.
                    if let Some(speech) = &mut self.speech {
                        speech.next_at = Instant::now();
                    }
                    Outcome::Continue
                }
            };
            let outcome = self.forced.take().unwrap_or(outcome);
            if self.stalled_until.is_none() {
                for outgoing in self.outbox.drain(..) {
                    let frame = match outgoing {
                        Outgoing::Message(message) => Message::binary(encode_server(&message)),
                        Outgoing::Frame(frame) => frame,
                    };
                    if sink.send(frame).await.is_err() {
                        return;
                    }
                }
            }
            if let Outcome::Drop = outcome {
                debug!("mock fault: dropping the connection without a close frame");
                return;
            }
            if let Outcome::Close(code, reason) = outcome {
                break Ending::Close(CloseFrame {
                    code: CloseCode::from(code),
                    reason: truncate_reason(&reason).into(),
                });
            }
        };
        ws_server::end(sink, stream, ending).await;
    }

    /// Handles one message from the client; `read` is what its bytes held of the input
    /// budget while they were read.
    async fn on_frame(&mut self, payload: &[u8], read: Option<Held>, set_up: &mut bool) -> Outcome {
        let (_held, message) = match read_client_message(payload, read).await {
            Ok(read) => read,
            Err((code, reason)) => return Outcome::Close(code, reason),
        };
        match (message, *set_up) {
            (ClientMessage::Setup(setup), false) => {
                *set_up = true;
                self.on_setup(*setup)
            }
            (ClientMessage::Setup(_), true) | (_, false) => {
                Outcome::Close(1007, INVALID_ARGUMENT.into())
            }
            (ClientMessage::ClientContent(content), true) => {
                self.on_client_content(content).await;
                Outcome::Continue
            }
            (ClientMessage::RealtimeInput(input), true) => {
                if !input.media_chunks.is_empty() && self.settings.traits.refuses_media_chunks {
                    return Outcome::Close(1007, setup::MEDIA_CHUNKS_REFUSED.into());
                }
                self.on_realtime_input(input).await;
                Outcome::Continue
            }
            (ClientMessage::ContextUpdate(update), true) => {
                self.on_context_update(update);
                Outcome::Continue
            }
            (ClientMessage::ToolResponse(response), true) => {
                self.on_tool_response(response).await;
                Outcome::Continue
            }
        }
    }

    fn on_setup(&mut self, setup: Setup) -> Outcome {
        self.state.connections.fetch_add(1, Ordering::Relaxed);
        self.run_faults(Moment::Setup);
        if let Some(outcome) = self.forced.take() {
            return outcome;
        }
        let accepted = match setup::accept(setup, self.version) {
            Ok(accepted) => accepted,
            Err(refusal) => return Outcome::Close(refusal.code, refusal.reason),
        };
        self.settings = accepted.settings;
        self.non_blocking = non_blocking_names(&accepted.declarations);
        self.state.record_declared(Declared {
            functions: accepted
                .declarations
                .iter()
                .map(|d| d.name.clone())
                .collect(),
            google_search: accepted.google_search,
        });
        self.model = ScriptedModel::default();
        if let Some(handle) = &accepted.handle {
            self.run_faults(Moment::Resume);
            if let Some(outcome) = self.forced.take() {
                return outcome;
            }
            match self.state.sessions.restore(handle, self.key.as_ref()) {
                Some(snapshot) => {
                    self.model = snapshot.model;
                    self.prompt_tokens = snapshot.prompt_tokens;
                    self.state.resumptions.fetch_add(1, Ordering::Relaxed);
                }
                // Unknown, expired, or another key's: the service tells them apart no better.
                None => {
                    return Outcome::Close(1008, "BidiGenerateContent session not found".into());
                }
            }
        }
        // A resumed conversation keeps what was said, but its tools and instruction are this
        // setup's: the client may have turned a tool off for the hand-over.
        self.model
            .redeclare(accepted.declarations, accepted.google_search);
        if let Some(instruction) = &accepted.instruction {
            self.model.follow_instruction(instruction);
        }
        let session_id =
            (self.flavor == Flavor::Vertex).then(|| format!("{:016x}", self.call_base));
        self.emit(ServerMessage {
            setup_complete: Some(SetupComplete { session_id }),
            ..ServerMessage::default()
        });
        self.issue_handle();
        Outcome::Continue
    }

    /// A new system instruction (and tools) for the next turns; the service answers nothing.
    fn on_context_update(&mut self, update: ContextUpdate) {
        if let Some(instruction) = &update.system_instruction {
            self.model
                .follow_instruction(&instruction_text(instruction));
        }
        if let Some(tools) = update.tools {
            let declarations = || tools.tools.iter().flat_map(|t| &t.function_declarations);
            self.non_blocking = non_blocking_names(declarations());
            self.model
                .redeclare(declarations().cloned(), declares_search(&tools.tools));
        }
    }

    async fn on_client_content(&mut self, content: ClientContent) {
        for turn in &content.turns {
            if turn.role.as_deref().unwrap_or("user") != "user" {
                continue;
            }
            for part in &turn.parts {
                if let Some(text) = &part.text {
                    if !self.text_buffer.is_empty() {
                        self.text_buffer.push(' ');
                    }
                    self.text_buffer.push_str(text);
                }
            }
        }
        if content.turn_complete == Some(false) || self.text_buffer.trim().is_empty() {
            return;
        }
        let text = std::mem::take(&mut self.text_buffer);
        self.user_text(&text).await;
    }

    async fn user_text(&mut self, text: &str) {
        // New client content interrupts any current generation, as the Live API documents it.
        self.interrupt_if_active();
        self.prompt_tokens += text.len() as f64 / 4.0;
        if self.faults_taking_over(Moment::UserTurn) {
            return;
        }
        let step = self.model.user_turn(text);
        self.take_step(step).await;
    }

    /// A user turn of `speech` length ended.
    async fn user_speech(&mut self, speech: Duration) {
        if self.settings.transcribe_input {
            // This model hears no words; what it transcribes says what it heard, in the
            // fragments the service sends.
            let heard = format!("(about {:.1} seconds ", speech.as_secs_f64());
            for (text, finished) in [(heard, None), ("of speech)".to_owned(), Some(true))] {
                self.emit(server_content(ServerContent {
                    input_transcription: Some(Transcription {
                        text: Some(text.into()),
                        finished,
                        ..Transcription::default()
                    }),
                    ..ServerContent::default()
                }));
            }
        }
        if self.faults_taking_over(Moment::UserTurn) {
            return;
        }
        let step = self.model.audio_turn(speech);
        self.take_step(step).await;
    }

    /// The client showed a picture (a camera frame, `/image`, a shared screen's frame): the
    /// demo model keeps what it can tell of it, and answers a lone picture at once. (The
    /// service takes frames in as what the model sees and speaks of them at the next turn; a
    /// demo is better served by an answer.) A frame that comes within [`STREAM_GAP`] of the one
    /// before is part of a stream (a screen shared at a frame a second): taken in silently,
    /// and "what do you see?" is answered from the newest.
    async fn user_picture(&mut self, jpeg: &[u8]) {
        // The service counts an image as 258 tokens.
        self.prompt_tokens += 258.0;
        let seen = self.model.see(jpeg).clone();
        self.state.record_picture(seen);
        let now = Instant::now();
        let streaming = self
            .last_picture
            .replace(now)
            .is_some_and(|before| now.duration_since(before) < STREAM_GAP);
        if streaming {
            return;
        }
        self.interrupt_if_active();
        let step = self.model.picture_turn();
        self.take_step(step).await;
    }

    /// Runs the faults of a moment; true when one of them replaced the model's next step.
    fn faults_taking_over(&mut self, moment: Moment) -> bool {
        let actions = self.state.clock.tick(moment);
        let took_over = actions.iter().any(FaultAction::takes_over_turn);
        for action in actions {
            self.apply(action);
        }
        took_over
    }

    async fn on_realtime_input(&mut self, input: RealtimeInput) {
        if let Some(text) = input.text.filter(|t| !t.trim().is_empty()) {
            self.user_text(&text).await;
        }
        if input.activity_start.is_some() {
            self.interrupt_if_active();
            self.hearing.activity_start();
        }
        // The legacy `mediaChunks` carry audio or a picture; only the first chunk is used.
        let (chunk_audio, chunk_picture) = match input.media_chunks.into_iter().next() {
            Some(chunk) if chunk.mime_type.starts_with("image/") => (None, Some(chunk)),
            chunk => (chunk, None),
        };
        let picture = input
            .video
            .filter(|b| b.mime_type.starts_with("image/"))
            .or(chunk_picture);
        if let Some(picture) = picture {
            self.user_picture(&picture.data).await;
        }
        let blob = input
            .audio
            .or(chunk_audio)
            .filter(|b| b.mime_type.starts_with("audio/"));
        if let Some(blob) = blob {
            let heard = self.hearing.audio(&blob, self.settings.manual_activity);
            self.prompt_tokens += heard.seconds * AUDIO_TOKENS_PER_SECOND;
            for event in heard.events {
                self.on_voice_activity(event).await;
            }
        }
        if input.activity_end.is_some()
            && let Some(speech) = self.hearing.activity_end()
        {
            self.user_speech(speech).await;
        }
        if input.audio_stream_end == Some(true)
            && let Some(speech) = self.hearing.stream_end()
        {
            self.user_speech(speech).await;
        }
    }

    /// The detector found the user's speech starting or ending.
    async fn on_voice_activity(&mut self, event: VadEvent) {
        // Newer models say what their voice activity detection heard.
        if self.settings.traits.usage_before_first_turn {
            let kind = match &event {
                VadEvent::SpeechStarted => "ACTIVITY_START",
                VadEvent::SpeechEnded { .. } => "ACTIVITY_END",
            };
            self.emit(ServerMessage {
                voice_activity: Some(VoiceActivity {
                    activity_type: Some(kind.to_owned()),
                    ..VoiceActivity::default()
                }),
                ..ServerMessage::default()
            });
        }
        match event {
            VadEvent::SpeechStarted => self.interrupt_if_active(),
            VadEvent::SpeechEnded { speech } => self.user_speech(speech).await,
        }
    }

    async fn on_tool_response(&mut self, response: ToolResponse) {
        // Answers for no pending call are logged once per message, however many there are.
        let mut stray = 0u64;
        let mut first_stray = None;
        for answer in response.function_responses {
            let tokens = answer.response.to_string().len() as f64 / 4.0;
            if self
                .calls
                .answer(answer.id.as_deref(), &answer.name, answer.response)
            {
                self.prompt_tokens += tokens;
            } else {
                stray += 1;
                first_stray.get_or_insert((answer.id, answer.name));
            }
        }
        if let Some((id, name)) = first_stray {
            self.state
                .stray_tool_responses
                .fetch_add(u32::try_from(stray).unwrap_or(u32::MAX), Ordering::Relaxed);
            let name = livetalk_live::excerpt::bounded(&name, livetalk_live::excerpt::SUMMARY);
            let id = id.map(|id| livetalk_live::excerpt::into_bounded(id, 256));
            if stray == 1 {
                warn!(?id, %name, "tool response for no pending call; ignored");
            } else {
                warn!(
                    first_id = ?id,
                    first_name = %name,
                    "{stray} tool responses for no pending call; ignored"
                );
            }
        }
        let Some(answered) = self.calls.take_answered() else {
            return;
        };
        if self.faults_taking_over(Moment::ToolResponse) {
            return;
        }
        let step = match answered.injected_summary() {
            Some(summary) => ModelStep::Reply(summary),
            None => self.model.tool_results(&answered.planned),
        };
        self.take_step(step).await;
    }

    async fn take_step(&mut self, step: ModelStep) {
        if !std::mem::replace(&mut self.answered, true)
            && self.settings.traits.usage_before_first_turn
        {
            // Newer models open with an empty serverContent that carries only the usage.
            let prompt = self.prompt_tokens.ceil() as i64;
            let mut opening = server_content(ServerContent::default());
            // (No total: the turn's own usage counts these tokens again.)
            opening.usage_metadata = Some(UsageMetadata {
                prompt_token_count: Some(prompt),
                ..UsageMetadata::default()
            });
            self.emit(opening);
        }
        match step {
            ModelStep::CallTools(calls) if !calls.is_empty() => {
                self.turn_active = true;
                let asynchronous = self.settings.traits.async_turns
                    && calls.iter().all(|c| self.non_blocking.contains(&c.name));
                let function_calls = calls
                    .into_iter()
                    .map(|call| self.calls.open(call, false))
                    .collect();
                if asynchronous {
                    // Async function calling: the model says it is on it, ends the turn with
                    // the interaction still in progress, and calls once that is said.
                    self.speak("One moment, I'll check.", Some(function_calls), None)
                        .await;
                } else {
                    self.send_tool_call(function_calls);
                }
            }
            ModelStep::CallTools(_) => {}
            ModelStep::Reply(text) => {
                self.turn_active = true;
                self.speak(&text, None, None).await;
            }
            ModelStep::Grounded { text, grounding } => {
                self.turn_active = true;
                self.speak(&text, None, Some(grounding)).await;
            }
        }
    }

    /// Streams `text` as the model's reply; with `then_calls`, as the acknowledgement of an
    /// asynchronous turn, after which those calls go out; with `grounding`, as a reply grounded
    /// in a Google Search (its `groundingMetadata` follows the words).
    async fn speak(
        &mut self,
        text: &str,
        then_calls: Option<Vec<FunctionCall>>,
        grounding: Option<serde_json::Value>,
    ) {
        let text_for_voice = text.to_owned();
        let pcm = if self.settings.audio_out {
            tokio::task::spawn_blocking(move || voice::synthesize(&text_for_voice))
                .await
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        self.speech = Some(Speech::new(
            text,
            &pcm,
            then_calls,
            grounding,
            &self.settings,
            self.flavor,
            self.prompt_tokens,
            self.speed,
        ));
    }

    fn stream_next_chunk(&mut self) {
        let Some(speech) = &mut self.speech else {
            return;
        };
        let said = speech.next();
        let mut then_calls = None;
        if said.finished {
            then_calls = speech.then_calls.take();
            self.speech = None;
            self.turn_active = then_calls.is_some();
        }
        if let Some(message) = said.message {
            self.emit(message);
        }
        if let Some(calls) = then_calls {
            self.send_tool_call(calls);
            return;
        }
        if said.finished {
            self.turn_ended();
            return;
        }
        if said.first {
            self.run_faults(Moment::MidReply);
        }
        // Only while the reply goes on: a mid_reply fault may have ended it already.
        if said.first_words && self.speech.is_some() {
            self.run_faults(Moment::ReplyText);
        }
    }

    /// A turn is over: hand out a resumption handle, then run the turn's faults.
    fn turn_ended(&mut self) {
        self.issue_handle();
        self.run_faults(Moment::TurnComplete);
    }

    /// Saves the conversation and tells the client its handle; the service only offers one
    /// while no generation or tool call is open.
    fn issue_handle(&mut self) {
        if !self.settings.resumption || self.turn_active || !self.calls.is_empty() {
            return;
        }
        let snapshot = Snapshot {
            model: self.model.clone(),
            prompt_tokens: self.prompt_tokens,
        };
        match self.state.sessions.save(snapshot, self.key.clone()) {
            Some(handle) => self.emit(resumption_update(Some(handle), true)),
            None => warn!("no randomness for a resumption handle; none was issued"),
        }
    }

    fn send_tool_call(&mut self, function_calls: Vec<FunctionCall>) {
        self.emit(ServerMessage {
            tool_call: Some(ToolCall { function_calls }),
            ..ServerMessage::default()
        });
        if self.settings.resumption {
            // Not resumable while calls are open, as on the service.
            self.emit(resumption_update(Some(String::new()), false));
        }
        self.run_faults(Moment::ToolCall);
    }

    fn emit(&mut self, message: ServerMessage) {
        self.outbox.push(Outgoing::Message(Box::new(message)));
    }

    /// Runs the faults due at `moment`; one that ends the connection leaves that in `forced`.
    fn run_faults(&mut self, moment: Moment) {
        for action in self.state.clock.tick(moment) {
            self.apply(action);
        }
    }

    fn apply(&mut self, action: FaultAction) {
        debug!(?action, "mock fault");
        if let Some(frame) = fault_frame(&action, self.call_base) {
            self.outbox.push(frame);
            return;
        }
        match action {
            FaultAction::GoAway {
                time_left,
                code,
                reason,
            } => {
                self.emit(ServerMessage {
                    go_away: Some(GoAway {
                        time_left: Some(time_left),
                    }),
                    ..ServerMessage::default()
                });
                self.close_at = Some((Instant::now() + time_left, code, reason));
            }
            FaultAction::Drop => self.forced = Some(Outcome::Drop),
            FaultAction::Close { code, reason } => self.forced = Some(Outcome::Close(code, reason)),
            FaultAction::Stall { duration } => {
                self.stalled_until = Some(Instant::now() + duration);
            }
            FaultAction::Slow { factor } => {
                self.speed /= factor;
                if let Some(speech) = &mut self.speech {
                    speech.slow_down(factor);
                }
            }
            FaultAction::Interrupt => self.interrupt_if_active(),
            FaultAction::CancelToolCalls => {
                self.cancel_unanswered_calls();
                if self.turn_active {
                    self.cut_turn_short(false);
                }
            }
            FaultAction::ResumptionUpdate { handle, resumable } => {
                self.emit(resumption_update(handle, resumable))
            }
            FaultAction::FailResumption => self.state.sessions.clear(),
            FaultAction::ToolCalls { name, args, count } => {
                self.turn_active = true;
                let function_calls = (0..count)
                    .map(|_| {
                        let call = PlannedCall {
                            name: name.clone(),
                            args: args.clone(),
                        };
                        self.calls.open(call, true)
                    })
                    .collect();
                self.send_tool_call(function_calls);
            }
            // The frames of the rest went out above.
            FaultAction::MalformedJson
            | FaultAction::UnknownMessage
            | FaultAction::HugeMessage { .. }
            | FaultAction::Garbage { .. }
            | FaultAction::Raw { .. }
            | FaultAction::DeepJson { .. } => {}
        }
    }

    /// Barge-in: `interrupted`, cancellation of unanswered calls, then `turnComplete`.
    fn interrupt_if_active(&mut self) {
        if self.turn_active {
            self.cut_turn_short(true);
        }
    }

    /// Ends the open turn before its reply is done: `interrupted` if asked, cancellation of
    /// unanswered calls, then `turnComplete` and a fresh resumption handle.
    fn cut_turn_short(&mut self, interrupted: bool) {
        self.speech = None;
        self.turn_active = false;
        if interrupted {
            self.emit(server_content(ServerContent {
                interrupted: Some(true),
                ..ServerContent::default()
            }));
        }
        self.cancel_unanswered_calls();
        self.emit(server_content(ServerContent {
            turn_complete: Some(true),
            interaction_status: self.settings.traits.async_turns.then(|| "IDLE".to_owned()),
            ..ServerContent::default()
        }));
        self.issue_handle();
    }

    /// `toolCallCancellation` for every call still waiting for its answer; answered ones of an
    /// unfinished set are dropped with them.
    fn cancel_unanswered_calls(&mut self) {
        let ids = self.calls.cancel_unanswered();
        if !ids.is_empty() {
            self.emit(ServerMessage {
                tool_call_cancellation: Some(ToolCallCancellation { ids }),
                ..ServerMessage::default()
            });
        }
    }
}

/// One client message, held from the process's input budget while it is decoded and handled
/// (`read` is what its bytes held while they were read), decoded leniently; or the close the
/// service answers it with: 1009 or 1013 when the budget refuses it, 1007 when it is not a
/// message the Live API knows. Every connection of the mock reads its client through this.
pub(crate) async fn read_client_message(
    payload: &[u8],
    read: Option<Held>,
) -> Result<(Held, ClientMessage), (u16, String)> {
    let held = match InputBudget::process()
        .hold_after(payload, &mut { read })
        .await
    {
        Ok(held) => held,
        Err(refused) => {
            warn!("closing a connection: {refused}");
            let code = match refused {
                Refused::TooCostly { .. } => 1009,
                Refused::Busy { .. } => 1013,
            };
            return Err((code, refused.sentence()));
        }
    };
    match decode_client(payload) {
        Ok(message) => Ok((held, message)),
        Err(DecodeError::UnknownClientMessage(name)) => Err((
            1007,
            format!("Invalid JSON payload received. Unknown name \"{name}\": Cannot find field."),
        )),
        Err(e) => Err((1007, format!("Invalid JSON payload received. {e}"))),
    }
}
