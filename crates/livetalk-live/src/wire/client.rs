//! What a client sends: `setup` and everything in it, `clientContent`, `realtimeInput`,
//! `toolResponse` and `contextUpdate`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Blob, Content, INPUT_AUDIO_MIME};
use crate::lenient;

/// One client message: exactly one of the four kinds per WebSocket frame.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ClientMessage {
    /// First message of every connection. `config` is accepted as an alias for the one
    /// tutorial that documents it.
    #[serde(alias = "config")]
    Setup(Box<Setup>),
    /// Turns appended to the conversation history (a typed user turn).
    #[serde(alias = "client_content")]
    ClientContent(ClientContent),
    /// One item of a realtime stream: mic audio, a video frame, text, or an activity signal.
    #[serde(alias = "realtime_input")]
    RealtimeInput(RealtimeInput),
    /// The answers to the model's function calls.
    #[serde(alias = "tool_response")]
    ToolResponse(ToolResponse),
    /// Changes the system instruction (or the tools) of the open session; the next turns
    /// follow it. Both official SDKs send it (`sendContextUpdate` / `send_context_update`).
    #[serde(alias = "context_update")]
    ContextUpdate(ContextUpdate),
}

/// `contextUpdate`: what to replace in the session's preamble. The Python SDK gives the
/// instruction's `Content` a `role`, the JavaScript SDK does not.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextUpdate {
    /// The new system instruction.
    #[serde(
        default,
        alias = "system_instruction",
        skip_serializing_if = "Option::is_none"
    )]
    pub system_instruction: Option<Content>,
    /// The new tools; absent leaves the session's as they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<ContextUpdateTools>,
}

/// The tools of a `contextUpdate`: they replace the session's; an empty list clears them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContextUpdateTools {
    /// The tool sets that replace the session's.
    #[serde(default)]
    pub tools: Vec<ToolSet>,
}

/// `BidiGenerateContentSetup`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Setup {
    /// `models/{id}` on the Gemini API; the full resource name on Vertex AI.
    pub model: String,
    /// Modalities, voice and sampling.
    #[serde(
        default,
        alias = "generation_config",
        skip_serializing_if = "Option::is_none"
    )]
    pub generation_config: Option<GenerationConfig>,
    /// The system instruction (text parts only).
    #[serde(
        default,
        alias = "system_instruction",
        skip_serializing_if = "Option::is_none"
    )]
    pub system_instruction: Option<Content>,
    /// The functions and built-in tools the model may call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSet>,
    /// Voice activity detection and barge-in settings.
    #[serde(
        default,
        alias = "realtime_input_config",
        skip_serializing_if = "Option::is_none"
    )]
    pub realtime_input_config: Option<RealtimeInputConfig>,
    /// Present to receive resumption handles; with a handle, resumes that session.
    #[serde(
        default,
        alias = "session_resumption",
        skip_serializing_if = "Option::is_none"
    )]
    pub session_resumption: Option<SessionResumptionConfig>,
    /// Lets a session outgrow the context window by dropping its oldest turns.
    #[serde(
        default,
        alias = "context_window_compression",
        skip_serializing_if = "Option::is_none"
    )]
    pub context_window_compression: Option<ContextWindowCompression>,
    /// Present to receive transcriptions of the user's speech.
    #[serde(
        default,
        alias = "input_audio_transcription",
        skip_serializing_if = "Option::is_none"
    )]
    pub input_audio_transcription: Option<AudioTranscriptionConfig>,
    /// Present to receive transcriptions of the model's speech.
    #[serde(
        default,
        alias = "output_audio_transcription",
        skip_serializing_if = "Option::is_none"
    )]
    pub output_audio_transcription: Option<AudioTranscriptionConfig>,
    /// Safety thresholds by harm category.
    #[serde(
        default,
        alias = "safety_settings",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub safety_settings: Vec<SafetySetting>,
    /// Model-specific knobs we pass through untouched (`{proactiveAudio}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proactivity: Option<Value>,
}

/// The `generationConfig` fields the Live API uses.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GenerationConfig {
    /// `AUDIO` or `TEXT` (one of them); native-audio models refuse `TEXT`.
    #[serde(
        default,
        alias = "response_modalities",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub response_modalities: Vec<Modality>,
    /// The voice, and the language it speaks.
    #[serde(
        default,
        alias = "speech_config",
        skip_serializing_if = "Option::is_none"
    )]
    pub speech_config: Option<SpeechConfig>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Nucleus sampling: the probability mass sampled from.
    #[serde(default, alias = "top_p", skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Top-k sampling: how many of the likeliest tokens are sampled from.
    #[serde(
        default,
        alias = "top_k",
        with = "lenient::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    pub top_k: Option<i64>,
    /// The most tokens one reply may have.
    #[serde(
        default,
        alias = "max_output_tokens",
        with = "lenient::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_output_tokens: Option<i64>,
    /// `MEDIA_RESOLUTION_LOW`, `_MEDIUM` or `_HIGH`, for video input.
    #[serde(
        default,
        alias = "media_resolution",
        skip_serializing_if = "Option::is_none"
    )]
    pub media_resolution: Option<String>,
    /// Thinking budget or level and `includeThoughts`, passed through as given: its shape differs by model generation.
    #[serde(
        default,
        alias = "thinking_config",
        skip_serializing_if = "Option::is_none"
    )]
    pub thinking_config: Option<Value>,
}

impl GenerationConfig {
    /// `thinkingConfig.includeThoughts` is set: thought summaries come as parts marked
    /// `thought`.
    pub fn includes_thoughts(&self) -> bool {
        self.thinking_config
            .as_ref()
            .and_then(|t| {
                t.get("includeThoughts")
                    .or_else(|| t.get("include_thoughts"))
            })
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }
}

/// Response modality. Readers accept any casing (the bridge protocol uses lower case).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Modality {
    /// Spoken replies (24 kHz PCM16).
    #[serde(alias = "audio", alias = "Audio")]
    Audio,
    /// Text replies.
    #[serde(alias = "text", alias = "Text")]
    Text,
    /// Video output (an avatar, on models that have one).
    #[serde(alias = "video", alias = "Video")]
    Video,
}

/// `speechConfig`: how the model speaks.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpeechConfig {
    /// The voice.
    #[serde(
        default,
        alias = "voice_config",
        skip_serializing_if = "Option::is_none"
    )]
    pub voice_config: Option<VoiceConfig>,
    /// The language spoken, as a BCP-47 code such as `en-US`.
    #[serde(
        default,
        alias = "language_code",
        skip_serializing_if = "Option::is_none"
    )]
    pub language_code: Option<String>,
}

impl Setup {
    /// The prebuilt voice the setup asks for, if it names one.
    pub fn voice_name(&self) -> Option<&str> {
        self.generation_config
            .as_ref()?
            .speech_config
            .as_ref()?
            .voice_config
            .as_ref()?
            .prebuilt_voice_config
            .as_ref()
            .map(|p| p.voice_name.as_str())
    }
}

impl SpeechConfig {
    /// A speech config selecting one prebuilt voice.
    pub fn voice(name: &str) -> Self {
        SpeechConfig {
            voice_config: Some(VoiceConfig {
                prebuilt_voice_config: Some(PrebuiltVoiceConfig {
                    voice_name: name.to_owned(),
                }),
            }),
            language_code: None,
        }
    }
}

/// `voiceConfig`: which voice.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VoiceConfig {
    /// One of the service's prebuilt voices.
    #[serde(
        default,
        alias = "prebuilt_voice_config",
        skip_serializing_if = "Option::is_none"
    )]
    pub prebuilt_voice_config: Option<PrebuiltVoiceConfig>,
}

/// `prebuiltVoiceConfig`: a voice the service has built in.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PrebuiltVoiceConfig {
    /// Its name, such as `Puck` or `Kore`.
    #[serde(alias = "voice_name")]
    pub voice_name: String,
}

/// One entry of `setup.tools`: function declarations, or a built-in tool such as Google
/// Search. (Not to be confused with a tool an app runs locally, which is what a function
/// declaration stands for.)
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSet {
    /// Functions the client runs when the model calls them.
    #[serde(
        default,
        alias = "function_declarations",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub function_declarations: Vec<FunctionDeclaration>,
    /// `{}` enables Google Search grounding.
    #[serde(
        default,
        alias = "google_search",
        skip_serializing_if = "Option::is_none"
    )]
    pub google_search: Option<Value>,
    /// `{}` enables the service's code execution.
    #[serde(
        default,
        alias = "code_execution",
        skip_serializing_if = "Option::is_none"
    )]
    pub code_execution: Option<Value>,
}

/// A function the model may call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionDeclaration {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model to decide when to call it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// OpenAPI-subset `Schema` of the arguments (upper-case types).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    /// Plain JSON Schema alternative to `parameters`.
    #[serde(
        default,
        alias = "parameters_json_schema",
        skip_serializing_if = "Option::is_none"
    )]
    pub parameters_json_schema: Option<Value>,
    /// Whether the model waits for the result (default: it does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behavior: Option<Behavior>,
}

/// Whether the conversation waits for a function's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Behavior {
    /// The model waits for the result before it goes on.
    Blocking,
    /// The model goes on talking; the result is used when it arrives.
    NonBlocking,
}

/// How the model treats a NON_BLOCKING function's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Scheduling {
    /// Taken in without a word; the model uses it later.
    Silent,
    /// Announced once the model has finished what it is saying.
    WhenIdle,
    /// Announced at once, cutting the model off.
    Interrupt,
}

/// `realtimeInputConfig`: how the server finds the user's turns in realtime input.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RealtimeInputConfig {
    /// The service's voice activity detection.
    #[serde(
        default,
        alias = "automatic_activity_detection",
        skip_serializing_if = "Option::is_none"
    )]
    pub automatic_activity_detection: Option<AutomaticActivityDetection>,
    /// `START_OF_ACTIVITY_INTERRUPTS` (barge-in, the default) or `NO_INTERRUPTION`.
    #[serde(
        default,
        alias = "activity_handling",
        skip_serializing_if = "Option::is_none"
    )]
    pub activity_handling: Option<String>,
    /// Which input a user turn includes: `TURN_INCLUDES_ONLY_ACTIVITY`, `TURN_INCLUDES_ALL_INPUT`, ….
    #[serde(
        default,
        alias = "turn_coverage",
        skip_serializing_if = "Option::is_none"
    )]
    pub turn_coverage: Option<String>,
}

/// `automaticActivityDetection`: the server's voice activity detection. Sensitivities and
/// durations are the service's own strings and numbers, passed through.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AutomaticActivityDetection {
    /// `true`: the client marks speech itself with `activityStart` / `activityEnd` (push-to-talk).
    #[serde(
        default,
        with = "lenient::opt_bool",
        skip_serializing_if = "Option::is_none"
    )]
    pub disabled: Option<bool>,
    /// `START_SENSITIVITY_HIGH` or `_LOW`.
    #[serde(
        default,
        alias = "start_of_speech_sensitivity",
        skip_serializing_if = "Option::is_none"
    )]
    pub start_of_speech_sensitivity: Option<String>,
    /// `END_SENSITIVITY_HIGH` or `_LOW`.
    #[serde(
        default,
        alias = "end_of_speech_sensitivity",
        skip_serializing_if = "Option::is_none"
    )]
    pub end_of_speech_sensitivity: Option<String>,
    /// Speech needed before a start of speech is committed, in milliseconds.
    #[serde(
        default,
        alias = "prefix_padding_ms",
        with = "lenient::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    pub prefix_padding_ms: Option<i64>,
    /// Silence that ends speech, in milliseconds.
    #[serde(
        default,
        alias = "silence_duration_ms",
        with = "lenient::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    pub silence_duration_ms: Option<i64>,
}

/// `sessionResumption`: ask for resumption handles, or resume a session by one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionResumptionConfig {
    /// The handle of the session to resume; absent for a new session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handle: Option<String>,
    /// Vertex AI only: also report which client messages the server consumed.
    #[serde(
        default,
        with = "lenient::opt_bool",
        skip_serializing_if = "Option::is_none"
    )]
    pub transparent: Option<bool>,
}

/// `contextWindowCompression`: what to do when the context fills up, so a session is not
/// cut off at the model's context limit.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextWindowCompression {
    /// Context size that starts compression (default: 80 % of the model's limit).
    #[serde(
        default,
        alias = "trigger_tokens",
        with = "lenient::opt_int64",
        skip_serializing_if = "Option::is_none"
    )]
    pub trigger_tokens: Option<i64>,
    /// Compress by a sliding window.
    #[serde(
        default,
        alias = "sliding_window",
        skip_serializing_if = "Option::is_none"
    )]
    pub sliding_window: Option<SlidingWindow>,
}

/// `slidingWindow`: drop the oldest turns down to a target size.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SlidingWindow {
    /// Context size to keep after compression (default: half the trigger).
    #[serde(
        default,
        alias = "target_tokens",
        with = "lenient::opt_int64",
        skip_serializing_if = "Option::is_none"
    )]
    pub target_tokens: Option<i64>,
}

/// `{}` enables transcription; newer optional fields are ignored.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AudioTranscriptionConfig {}

/// One `safetySettings` entry: how much of one kind of harm to block.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SafetySetting {
    /// The harm category, such as `HARM_CATEGORY_HARASSMENT`.
    pub category: String,
    /// What is blocked, such as `BLOCK_ONLY_HIGH`.
    pub threshold: String,
}

/// `BidiGenerateContentClientContent`: turns appended to the history, in order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientContent {
    /// The turns, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<Content>,
    /// `true`: the model answers now; `false`: more content follows first.
    #[serde(
        default,
        alias = "turn_complete",
        with = "lenient::opt_bool",
        skip_serializing_if = "Option::is_none"
    )]
    pub turn_complete: Option<bool>,
}

impl ClientContent {
    /// The text parts of its turns, in order.
    pub fn texts(&self) -> impl Iterator<Item = &str> {
        self.turns
            .iter()
            .flat_map(|turn| &turn.parts)
            .filter_map(|part| part.text.as_deref())
    }

    /// A complete user turn of plain text.
    pub fn user_text(text: impl Into<super::Text>) -> Self {
        ClientContent {
            turns: vec![Content::text("user", text)],
            turn_complete: Some(true),
        }
    }
}

/// `BidiGenerateContentRealtimeInput`: one realtime stream item per message.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RealtimeInput {
    /// A chunk of mic audio (16 kHz PCM16 little-endian mono).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio: Option<Blob>,
    /// One video frame (an image).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub video: Option<Blob>,
    /// Text typed into the realtime stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The user started speaking (only with activity detection disabled).
    #[serde(
        default,
        alias = "activity_start",
        skip_serializing_if = "Option::is_none"
    )]
    pub activity_start: Option<Empty>,
    /// The user stopped speaking (only with activity detection disabled).
    #[serde(
        default,
        alias = "activity_end",
        skip_serializing_if = "Option::is_none"
    )]
    pub activity_end: Option<Empty>,
    /// The mic stopped: the server ends any speech still open instead of waiting for silence.
    #[serde(
        default,
        alias = "audio_stream_end",
        with = "lenient::opt_bool",
        skip_serializing_if = "Option::is_none"
    )]
    pub audio_stream_end: Option<bool>,
    /// Deprecated; only the first chunk is used.
    #[serde(default, alias = "media_chunks", skip_serializing_if = "Vec::is_empty")]
    pub media_chunks: Vec<Blob>,
}

impl RealtimeInput {
    /// One chunk of 16 kHz mono PCM16 LE mic audio (`realtimeInput.audio`).
    pub fn mic_audio(pcm: Vec<u8>) -> Self {
        RealtimeInput {
            audio: Some(Blob {
                mime_type: INPUT_AUDIO_MIME.to_owned(),
                data: pcm,
            }),
            ..RealtimeInput::default()
        }
    }
}

/// An empty JSON object (`activityStart: {}`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Empty {}

/// `BidiGenerateContentToolResponse`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResponse {
    /// One answer per call.
    #[serde(default, alias = "function_responses")]
    pub function_responses: Vec<FunctionResponse>,
}

/// The answer to one function call. Always carries the call's `id` and `name`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionResponse {
    /// The `id` of the call answered (required on the Gemini API).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The name of the function called.
    #[serde(default)]
    pub name: String,
    /// The result: a JSON object (`{"error": …}` for a failure).
    #[serde(default)]
    pub response: Value,
    /// More responses to the same call follow (NON_BLOCKING functions).
    #[serde(
        default,
        alias = "will_continue",
        with = "lenient::opt_bool",
        skip_serializing_if = "Option::is_none"
    )]
    pub will_continue: Option<bool>,
    /// How the model takes a NON_BLOCKING function's result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling: Option<Scheduling>,
}
