//! One mock connection: `setup` → `setupComplete`, then turns that behave like the service on
//! the wire (tool calls, streamed 24 kHz audio with transcription, generationComplete →
//! turnComplete + usage, interruption with cancellation).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tracing::{debug, warn};

use super::model::{ModelStep, PlannedCall, ScriptedModel};
use super::random::{self, XorShift};
use super::resumption::Snapshot;
use super::scenario::{FaultAction, Moment};
use super::server::MockState;
use super::vad::{EnergyVad, VadEvent};
use super::voice;
use crate::ws_server::{self, Ending, truncate_reason};
use livetalk_live::ApiKey;
use livetalk_live::codec::{DecodeError, decode_client, encode_server};
use livetalk_live::events::{pcm16_from_le_bytes, pcm16_to_le_bytes};
use livetalk_live::models::{self, ModelTraits};
use livetalk_live::wire::*;

/// Which service the client dialled; Vertex differs in small ways on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    GoogleAi,
    Vertex,
}

/// Samples per streamed audio chunk: 40 ms at 24 kHz.
const CHUNK_SAMPLES: usize = 960;
/// Billing rate of audio, per the Live API docs.
const AUDIO_TOKENS_PER_SECOND: f64 = 25.0;

struct PendingCall {
    id: String,
    call: PlannedCall,
    response: Option<Value>,
    /// Made by a `tool_calls` fault, not planned by the model.
    injected: bool,
}

/// Reply messages waiting to be streamed at the pace of speech.
struct Speech {
    queue: VecDeque<ServerMessage>,
    interval: Duration,
    next_at: Instant,
    sent: usize,
    /// Words of the reply (a transcription fragment or a text part) have been sent.
    worded: bool,
    /// An acknowledgement of an asynchronous turn: these calls go out when it has been said,
    /// and the interaction goes on.
    then_calls: Option<Vec<FunctionCall>>,
}

enum Outcome {
    Continue,
    Close(u16, String),
    /// Abrupt end: the socket goes away without a close frame.
    Drop,
}

/// A frame to send: a server message, or raw bytes a fault wants on the wire.
enum Outgoing {
    Message(Box<ServerMessage>),
    Frame(Message),
}

/// The server side of one connection: the scripted model it speaks for, the reply being
/// streamed, the calls waiting for answers and the faults in force.
pub struct MockConnection {
    flavor: Flavor,
    speed: f64,
    model: ScriptedModel,
    audio_out: bool,
    transcribe_output: bool,
    transcribe_input: bool,
    /// `thinkingConfig.includeThoughts`: a thought summary precedes each reply.
    include_thoughts: bool,
    /// The behaviours of the model the client asked for.
    traits: ModelTraits,
    /// NON_BLOCKING functions, by name: on a model with asynchronous turns, calling one ends
    /// the turn with `IN_PROGRESS` and the interaction goes on.
    non_blocking: Vec<String>,
    /// The first model turn has begun (the usage-only message comes before it).
    answered: bool,
    manual_activity: bool,
    pending: Vec<PendingCall>,
    speech: Option<Speech>,
    /// The model has an open turn: calls pending or a reply streaming.
    turn_active: bool,
    vad: Option<(u32, EnergyVad)>,
    activity_samples: Option<(u32, usize)>,
    text_buffer: String,
    prompt_tokens: f64,
    call_counter: u64,
    call_base: u64,
    outbox: Vec<Outgoing>,
    state: Arc<MockState>,
    /// The client asked for resumption handles.
    resumption: bool,
    /// The API key the client connected with: its handles resume only under it.
    key: Option<ApiKey>,
    /// A goAway was sent: close like this at that time.
    close_at: Option<(Instant, u16, String)>,
    /// A stall fault: send nothing until then.
    stalled_until: Option<Instant>,
    /// A fault ends the connection after this step.
    forced: Option<Outcome>,
    /// The mic audio received, saved when the server was started with `--save-input`.
    saved_input: Option<livetalk_live::wav::WavSink>,
}

impl MockConnection {
    pub fn new(flavor: Flavor, speed: f64, state: Arc<MockState>, key: Option<ApiKey>) -> Self {
        let saved_input = state.save_input.as_ref().and_then(|dir| {
            let n = state.accepted.fetch_add(1, Ordering::Relaxed) + 1;
            livetalk_live::wav::WavSink::create(
                &dir.join(format!("input-{n}.wav")),
                INPUT_SAMPLE_RATE,
            )
            .map_err(|e| tracing::warn!("{e:#}"))
            .ok()
        });
        MockConnection {
            flavor,
            speed,
            model: ScriptedModel::new(Vec::<String>::new()),
            audio_out: true,
            transcribe_output: false,
            transcribe_input: false,
            include_thoughts: false,
            traits: ModelTraits::default(),
            non_blocking: Vec::new(),
            answered: false,
            manual_activity: false,
            pending: Vec::new(),
            speech: None,
            turn_active: false,
            vad: None,
            activity_samples: None,
            text_buffer: String::new(),
            prompt_tokens: 0.0,
            call_counter: 0,
            // Ids look like the service's: function-call-<up to 19 digits>.
            call_base: random::per_run() % 9_000_000_000_000_000_000 + 1_000_000_000_000_000_000,
            outbox: Vec::new(),
            state,
            resumption: false,
            key,
            close_at: None,
            stalled_until: None,
            forced: None,
            saved_input,
        }
    }

    /// Serves one connection to its end.
    pub async fn run<S>(mut self, socket: WebSocketStream<S>)
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
                frame = stream.next() => match frame {
                    Some(Ok(Message::Text(text))) => self.on_frame(text.as_bytes(), &mut set_up).await,
                    Some(Ok(Message::Binary(bytes))) => self.on_frame(&bytes, &mut set_up).await,
                    Some(Ok(Message::Close(_))) => break Ending::PeerClosed,
                    None => break Ending::Gone,
                    Some(Ok(_)) => Outcome::Continue,
                    Some(Err(e)) => {
                        debug!("mock connection ended: {e}");
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

    async fn on_frame(&mut self, payload: &[u8], set_up: &mut bool) -> Outcome {
        let message = match decode_client(payload) {
            Ok(message) => message,
            Err(DecodeError::UnknownClientMessage(name)) => {
                return Outcome::Close(
                    1007,
                    format!(
                        "Invalid JSON payload received. Unknown name \"{name}\": Cannot find field."
                    ),
                );
            }
            Err(e) => return Outcome::Close(1007, format!("Invalid JSON payload received. {e}")),
        };
        match (message, *set_up) {
            (ClientMessage::Setup(setup), false) => {
                *set_up = true;
                self.on_setup(*setup)
            }
            (ClientMessage::Setup(_), true) | (_, false) => {
                Outcome::Close(1007, "Request contains an invalid argument.".into())
            }
            (ClientMessage::ClientContent(content), true) => {
                self.on_client_content(content).await;
                Outcome::Continue
            }
            (ClientMessage::RealtimeInput(input), true) => {
                if !input.media_chunks.is_empty() && self.traits.refuses_media_chunks {
                    return Outcome::Close(
                        1007,
                        "realtime_input.media_chunks is deprecated. Use audio, video, or text instead.".into(),
                    );
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
        if setup.model.trim().is_empty() {
            return Outcome::Close(1007, "Request contains an invalid argument.".into());
        }
        if models::replacement(&setup.model).is_some() {
            return Outcome::Close(1008, models::not_found_reason(&setup.model, "v1beta"));
        }
        self.traits = models::traits(&setup.model);
        let modalities = setup
            .generation_config
            .as_ref()
            .map(|g| g.response_modalities.clone())
            .unwrap_or_default();
        if self.traits.native_audio && modalities.contains(&Modality::Text) {
            return Outcome::Close(
                1007,
                "Cannot extract voices from a non-audio request.".into(),
            );
        }
        let declarations = || setup.tools.iter().flat_map(|t| &t.function_declarations);
        if self.traits.non_blocking_only
            && declarations().any(|d| d.behavior != Some(Behavior::NonBlocking))
        {
            return Outcome::Close(
                1007,
                "Request contains an invalid argument. This model supports only NON_BLOCKING functions.".into(),
            );
        }
        self.non_blocking = declarations()
            .filter(|d| d.behavior == Some(Behavior::NonBlocking))
            .map(|d| d.name.clone())
            .collect();
        self.state
            .declared
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(declarations().map(|d| d.name.clone()).collect());
        self.resumption = setup.session_resumption.is_some();
        let handle = setup
            .session_resumption
            .as_ref()
            .and_then(|r| r.handle.as_deref())
            .filter(|h| !h.is_empty());
        self.model = ScriptedModel::default();
        if let Some(handle) = handle {
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
        self.model.redeclare(declarations().cloned());
        if let Some(instruction) = &setup.system_instruction {
            self.model
                .follow_instruction(&instruction_text(instruction));
        }
        self.audio_out = !modalities.contains(&Modality::Text);
        self.transcribe_output = setup.output_audio_transcription.is_some();
        self.transcribe_input = setup.input_audio_transcription.is_some();
        self.include_thoughts = setup
            .generation_config
            .as_ref()
            .is_some_and(GenerationConfig::includes_thoughts);
        self.manual_activity = setup
            .realtime_input_config
            .as_ref()
            .and_then(|c| c.automatic_activity_detection.as_ref())
            .and_then(|a| a.disabled)
            .unwrap_or(false);
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
            self.non_blocking = declarations()
                .filter(|d| d.behavior == Some(Behavior::NonBlocking))
                .map(|d| d.name.clone())
                .collect();
            self.model.redeclare(declarations().cloned());
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
        if self.user_turn_faults() {
            return;
        }
        let step = self.model.user_turn(text);
        self.take_step(step).await;
    }

    /// A user turn of `speech` length ended.
    async fn user_speech(&mut self, speech: Duration) {
        if self.transcribe_input {
            // This model hears no words; what it transcribes says what it heard, in the
            // fragments the service sends.
            let heard = format!("(about {:.1} seconds ", speech.as_secs_f64());
            for (text, finished) in [(heard, None), ("of speech)".to_owned(), Some(true))] {
                self.emit(server_content(ServerContent {
                    input_transcription: Some(Transcription {
                        text: Some(text),
                        finished,
                        ..Transcription::default()
                    }),
                    ..ServerContent::default()
                }));
            }
        }
        if self.user_turn_faults() {
            return;
        }
        let step = self.model.audio_turn(speech);
        self.take_step(step).await;
    }

    /// Runs the faults of a user turn; true when one of them replaced the model's answer.
    fn user_turn_faults(&mut self) -> bool {
        let actions = self.state.clock.tick(Moment::UserTurn);
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
            self.activity_samples = Some((INPUT_SAMPLE_RATE, 0));
        }
        let blob = input
            .audio
            .or_else(|| input.media_chunks.into_iter().next())
            .filter(|b| b.mime_type.starts_with("audio/"));
        if let Some(blob) = blob {
            let rate = blob.declared_rate().unwrap_or(INPUT_SAMPLE_RATE);
            if let Some(sink) = &mut self.saved_input
                && rate == INPUT_SAMPLE_RATE
            {
                // Header kept current, so the file is complete whenever it is read.
                let saved = sink
                    .write_pcm16_le(&blob.data)
                    .and_then(|_full| sink.sync());
                if let Err(e) = saved {
                    tracing::warn!("{e:#}");
                    self.saved_input = None;
                }
            }
            let samples = pcm16_from_le_bytes(&blob.data);
            self.prompt_tokens += samples.len() as f64 / f64::from(rate) * AUDIO_TOKENS_PER_SECOND;
            if self.manual_activity {
                if let Some((_, count)) = &mut self.activity_samples {
                    *count += samples.len();
                }
            } else {
                self.feed_vad(rate, &samples).await;
            }
        }
        if input.activity_end.is_some()
            && let Some((rate, count)) = self.activity_samples.take()
        {
            let speech = Duration::from_secs_f64(count as f64 / f64::from(rate));
            self.user_speech(speech).await;
        }
        if input.audio_stream_end == Some(true) {
            // The mic stopped: an utterance still open ends here.
            let ended = self.vad.as_mut().and_then(|(_, vad)| vad.end_of_stream());
            if let Some(VadEvent::SpeechEnded { speech }) = ended {
                self.user_speech(speech).await;
            }
        }
    }

    async fn feed_vad(&mut self, rate: u32, samples: &[i16]) {
        if self.vad.as_ref().map(|(r, _)| *r) != Some(rate) {
            self.vad = Some((rate, EnergyVad::new(rate)));
        }
        let events = match &mut self.vad {
            Some((_, vad)) => vad.push(samples),
            None => Vec::new(),
        };
        for event in events {
            let kind = match &event {
                VadEvent::SpeechStarted => "ACTIVITY_START",
                VadEvent::SpeechEnded { .. } => "ACTIVITY_END",
            };
            // Newer models say what their voice activity detection heard.
            if self.traits.usage_before_first_turn {
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
                VadEvent::SpeechEnded { speech } => {
                    self.user_speech(speech).await;
                }
            }
        }
    }

    async fn on_tool_response(&mut self, response: ToolResponse) {
        for answer in response.function_responses {
            let slot = self.pending.iter_mut().find(|p| {
                p.response.is_none()
                    && match &answer.id {
                        Some(id) => &p.id == id,
                        None => p.call.name == answer.name,
                    }
            });
            match slot {
                Some(slot) => {
                    self.prompt_tokens += answer.response.to_string().len() as f64 / 4.0;
                    slot.response = Some(answer.response);
                }
                None => {
                    self.state
                        .stray_tool_responses
                        .fetch_add(1, Ordering::Relaxed);
                    warn!(id = ?answer.id, name = %answer.name, "tool response for no pending call; ignored")
                }
            }
        }
        if !self.pending.is_empty() && self.pending.iter().all(|p| p.response.is_some()) {
            let (injected, planned): (Vec<PendingCall>, Vec<PendingCall>) =
                self.pending.drain(..).partition(|p| p.injected);
            if !injected.is_empty() {
                let errors = injected
                    .iter()
                    .filter(|p| {
                        p.response
                            .as_ref()
                            .is_some_and(|r| r.get("error").is_some())
                    })
                    .count();
                let step = ModelStep::Reply(format!(
                    "I made {} tool calls and got {} answers, {errors} of them errors.",
                    injected.len(),
                    injected.len()
                ));
                self.take_step(step).await;
                return;
            }
            let results: Vec<(PlannedCall, Value)> = planned
                .into_iter()
                .map(|p| (p.call, p.response.unwrap_or(Value::Null)))
                .collect();
            let step = self.model.tool_results(&results);
            self.take_step(step).await;
        }
    }

    async fn take_step(&mut self, step: ModelStep) {
        if !std::mem::replace(&mut self.answered, true) && self.traits.usage_before_first_turn {
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
                let asynchronous = self.traits.async_turns
                    && calls.iter().all(|c| self.non_blocking.contains(&c.name));
                let function_calls = calls
                    .into_iter()
                    .map(|call| self.open_call(call, false))
                    .collect();
                if asynchronous {
                    // Async function calling: the model says it is on it, ends the turn with
                    // the interaction still in progress, and calls once that is said.
                    self.speak("One moment, I'll check.", Some(function_calls))
                        .await;
                } else {
                    self.send_tool_call(function_calls);
                }
            }
            ModelStep::CallTools(_) => {}
            ModelStep::Reply(text) => {
                self.turn_active = true;
                self.speak(&text, None).await;
            }
        }
    }

    /// Streams `text` as the model's reply; with `then_calls`, as the acknowledgement of an
    /// asynchronous turn, after which those calls go out.
    async fn speak(&mut self, text: &str, then_calls: Option<Vec<FunctionCall>>) {
        let text_for_voice = text.to_owned();
        let pcm = if self.audio_out {
            tokio::task::spawn_blocking(move || voice::synthesize(&text_for_voice))
                .await
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        self.start_speech(text, &pcm, then_calls);
    }

    /// Queues the reply: audio chunks with transcription fragments (or text parts), then
    /// `generationComplete`, then `turnComplete` with usage.
    fn start_speech(&mut self, text: &str, pcm: &[i16], then_calls: Option<Vec<FunctionCall>>) {
        let mut queue = VecDeque::new();
        if self.include_thoughts {
            queue.push_back(server_content(ServerContent {
                model_turn: Some(Content {
                    role: (self.flavor == Flavor::Vertex).then(|| "model".to_owned()),
                    parts: vec![Part {
                        text: Some(format!(
                            "**Answering the user**\n\nI'll say: {}",
                            text.split_whitespace()
                                .take(6)
                                .collect::<Vec<_>>()
                                .join(" ")
                        )),
                        thought: Some(true),
                        ..Part::default()
                    }],
                }),
                ..ServerContent::default()
            }));
        }
        let mime = match self.flavor {
            Flavor::GoogleAi => OUTPUT_AUDIO_MIME,
            Flavor::Vertex => "audio/pcm",
        };
        let role = (self.flavor == Flavor::Vertex).then(|| "model".to_owned());
        let chunks = if self.audio_out {
            pcm.len().div_ceil(CHUNK_SAMPLES).max(1)
        } else {
            text.split_whitespace().count().max(1)
        };
        let fragments = split_fragments(text, chunks);
        for (index, fragment) in fragments.into_iter().enumerate() {
            if self.audio_out {
                let start = index * CHUNK_SAMPLES;
                let samples = &pcm[start.min(pcm.len())..(start + CHUNK_SAMPLES).min(pcm.len())];
                queue.push_back(server_content(ServerContent {
                    model_turn: Some(Content {
                        role: role.clone(),
                        parts: vec![Part {
                            inline_data: Some(Blob {
                                mime_type: mime.to_owned(),
                                data: pcm16_to_le_bytes(samples),
                            }),
                            ..Part::default()
                        }],
                    }),
                    ..ServerContent::default()
                }));
                if self.transcribe_output && !fragment.is_empty() {
                    queue.push_back(server_content(ServerContent {
                        output_transcription: Some(Transcription {
                            text: Some(fragment),
                            ..Transcription::default()
                        }),
                        ..ServerContent::default()
                    }));
                }
            } else if !fragment.is_empty() {
                queue.push_back(server_content(ServerContent {
                    model_turn: Some(Content {
                        role: role.clone(),
                        parts: vec![Part {
                            text: Some(fragment),
                            ..Part::default()
                        }],
                    }),
                    ..ServerContent::default()
                }));
            }
        }
        queue.push_back(server_content(ServerContent {
            generation_complete: Some(true),
            ..ServerContent::default()
        }));
        let spoken_seconds = if self.audio_out {
            pcm.len() as f64 / f64::from(OUTPUT_SAMPLE_RATE)
        } else {
            voice::speaking_time(text).as_secs_f64()
        };
        let response_tokens = if self.audio_out {
            (spoken_seconds * AUDIO_TOKENS_PER_SECOND).round() as i64
        } else {
            (text.len() as f64 / 4.0).ceil() as i64
        };
        let prompt_tokens = self.prompt_tokens.ceil() as i64;
        let modality = if self.audio_out { "AUDIO" } else { "TEXT" };
        let question = text.trim_end().ends_with('?');
        let mut last = server_content(ServerContent {
            turn_complete: Some(true),
            // Models with asynchronous turns say where the interaction stands, and that they
            // wait for the user's answer to a question.
            interaction_status: self.traits.async_turns.then(|| {
                if then_calls.is_some() {
                    "IN_PROGRESS"
                } else {
                    "IDLE"
                }
                .to_owned()
            }),
            waiting_for_input: (self.traits.async_turns && question).then_some(true),
            turn_complete_reason: (self.traits.async_turns && question)
                .then(|| "NEED_MORE_INPUT".to_owned()),
            ..ServerContent::default()
        });
        last.usage_metadata = Some(UsageMetadata {
            prompt_token_count: Some(prompt_tokens),
            response_token_count: Some(response_tokens),
            total_token_count: Some(prompt_tokens + response_tokens),
            prompt_tokens_details: vec![ModalityTokenCount {
                modality: "TEXT".into(),
                token_count: Some(prompt_tokens),
            }],
            response_tokens_details: vec![ModalityTokenCount {
                modality: modality.into(),
                token_count: Some(response_tokens),
            }],
            ..UsageMetadata::default()
        });
        queue.push_back(last);
        let per_message = spoken_seconds / queue.len() as f64 / self.speed;
        self.speech = Some(Speech {
            queue,
            interval: Duration::from_secs_f64(per_message),
            next_at: Instant::now(),
            sent: 0,
            worded: false,
            then_calls,
        });
    }

    fn stream_next_chunk(&mut self) {
        let Some(speech) = &mut self.speech else {
            return;
        };
        let message = speech.queue.pop_front();
        speech.sent += 1;
        let first = speech.sent == 1;
        let first_words = !speech.worded && message.as_ref().is_some_and(has_words);
        speech.worded |= first_words;
        let finished = speech.queue.is_empty();
        let mut then_calls = None;
        if finished {
            then_calls = speech.then_calls.take();
            self.speech = None;
            self.turn_active = then_calls.is_some();
        } else {
            speech.next_at += speech.interval;
        }
        if let Some(message) = message {
            self.emit(message);
        }
        if let Some(calls) = then_calls {
            self.send_tool_call(calls);
            return;
        }
        if finished {
            self.turn_ended();
            return;
        }
        if first {
            self.run_faults(Moment::MidReply);
        }
        // Only while the reply goes on: a mid_reply fault may have ended it already.
        if first_words && self.speech.is_some() {
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
        if !self.resumption || self.turn_active || !self.pending.is_empty() {
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
        if self.resumption {
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
            FaultAction::MalformedJson => self.outbox.push(Outgoing::Frame(Message::text(
                "{\"serverContent\": {\"modelTurn\": {\"parts\": [",
            ))),
            FaultAction::UnknownMessage => self.outbox.push(Outgoing::Frame(Message::text(
                "{\"mockSurprise\": {\"note\": \"a message type no client knows\"}}",
            ))),
            FaultAction::HugeMessage { bytes } => {
                // Base64 grows the audio by 4/3, so this much silence makes a frame that big.
                let silence = vec![0u8; bytes / 4 * 3 / 2 * 2];
                self.emit(server_content(ServerContent {
                    model_turn: Some(Content {
                        role: None,
                        parts: vec![Part {
                            inline_data: Some(Blob {
                                mime_type: OUTPUT_AUDIO_MIME.to_owned(),
                                data: silence,
                            }),
                            ..Part::default()
                        }],
                    }),
                    ..ServerContent::default()
                }));
            }
            FaultAction::Garbage { bytes } => {
                let mut rng = XorShift::new(self.call_base);
                let garbage: Vec<u8> = std::iter::once(0xff)
                    .chain((1..bytes.max(1)).map(|_| (rng.next_u64() >> 24) as u8))
                    .collect();
                self.outbox.push(Outgoing::Frame(Message::binary(garbage)));
            }
            FaultAction::Raw { text } => self.outbox.push(Outgoing::Frame(Message::text(text))),
            FaultAction::DeepJson { depth } => {
                let text = format!(
                    "{{\"serverContent\": {{\"modelTurn\": {{\"parts\": [{{\"text\": \"deep\", \"x\": {}{}}}]}}}}}}",
                    "[".repeat(depth),
                    "]".repeat(depth)
                );
                self.outbox.push(Outgoing::Frame(Message::text(text)));
            }
            FaultAction::Stall { duration } => {
                self.stalled_until = Some(Instant::now() + duration);
            }
            FaultAction::Slow { factor } => {
                self.speed /= factor;
                if let Some(speech) = &mut self.speech {
                    speech.interval = speech.interval.mul_f64(factor);
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
                        self.open_call(call, true)
                    })
                    .collect();
                self.send_tool_call(function_calls);
            }
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
            interaction_status: self.traits.async_turns.then(|| "IDLE".to_owned()),
            ..ServerContent::default()
        }));
        self.issue_handle();
    }

    /// `toolCallCancellation` for every call still waiting for its answer; answered ones of an
    /// unfinished set are dropped with them.
    fn cancel_unanswered_calls(&mut self) {
        let ids: Vec<String> = self
            .pending
            .drain(..)
            .filter(|p| p.response.is_none())
            .map(|p| p.id)
            .collect();
        if !ids.is_empty() {
            self.emit(ServerMessage {
                tool_call_cancellation: Some(ToolCallCancellation { ids }),
                ..ServerMessage::default()
            });
        }
    }

    /// Gives a call a service-like id and waits for its answer; returns the call as sent.
    fn open_call(&mut self, call: PlannedCall, injected: bool) -> FunctionCall {
        self.call_counter += 1;
        let id = format!(
            "function-call-{}",
            self.call_base.wrapping_add(self.call_counter)
        );
        let function_call = FunctionCall {
            id: Some(id.clone()),
            name: call.name.clone(),
            args: call.args.clone(),
        };
        self.pending.push(PendingCall {
            id,
            call,
            response: None,
            injected,
        });
        function_call
    }
}

/// True when a reply message carries words the client shows: a transcription fragment or a
/// text part (audio alone does not).
fn has_words(message: &ServerMessage) -> bool {
    let Some(content) = &message.server_content else {
        return false;
    };
    let transcribed = content
        .output_transcription
        .as_ref()
        .and_then(|t| t.text.as_deref())
        .is_some_and(|t| !t.trim().is_empty());
    let texted = content.model_turn.as_ref().is_some_and(|turn| {
        turn.parts
            .iter()
            .filter(|p| p.thought != Some(true))
            .any(|p| p.text.as_deref().is_some_and(|t| !t.trim().is_empty()))
    });
    transcribed || texted
}

/// The text of a system instruction's parts.
fn instruction_text(content: &Content) -> String {
    content
        .parts
        .iter()
        .filter_map(|p| p.text.as_deref())
        .collect::<Vec<_>>()
        .join(" ")
}

fn server_content(content: ServerContent) -> ServerMessage {
    ServerMessage {
        server_content: Some(content),
        ..ServerMessage::default()
    }
}

fn resumption_update(new_handle: Option<String>, resumable: bool) -> ServerMessage {
    ServerMessage {
        session_resumption_update: Some(SessionResumptionUpdate {
            new_handle,
            resumable: Some(resumable),
            ..SessionResumptionUpdate::default()
        }),
        ..ServerMessage::default()
    }
}

/// Splits text into `parts` consecutive fragments whose concatenation is the text; words are
/// spread evenly so transcription keeps pace with the audio.
fn split_fragments(text: &str, parts: usize) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    let mut current = String::new();
    for c in text.chars() {
        if c.is_whitespace() && !current.trim().is_empty() {
            current.push(c);
            words.push(std::mem::take(&mut current));
        } else {
            current.push(c);
        }
    }
    if !current.is_empty() {
        words.push(current);
    }
    let parts = parts.max(1);
    (0..parts)
        .map(|i| {
            let from = i * words.len() / parts;
            let to = (i + 1) * words.len() / parts;
            words[from..to].concat()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragments_rejoin_to_the_text() {
        let text = "No, the living room lamp is currently off.";
        for parts in [1, 3, 8, 50] {
            let fragments = split_fragments(text, parts);
            assert_eq!(fragments.len(), parts);
            assert_eq!(fragments.concat(), text);
        }
    }
}
