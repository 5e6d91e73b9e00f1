//! The Live API (BidiGenerateContent) wire types, once, for client, mock, recorder and bridge.
//!
//! We always write canonical proto3-JSON (camelCase, int64 as strings, standard base64) and read
//! leniently: every multi-word field also accepts its snake_case spelling (the Python SDK sends a
//! mix), numbers may be strings, base64 may be URL-safe, unknown fields are ignored.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::lenient;

/// MIME type of the 16 kHz PCM16 audio we stream up.
pub const INPUT_AUDIO_MIME: &str = "audio/pcm;rate=16000";
/// MIME type of the 24 kHz PCM16 audio the model streams down.
pub const OUTPUT_AUDIO_MIME: &str = "audio/pcm;rate=24000";
/// Sample rate of microphone audio sent to the Live API.
pub const INPUT_SAMPLE_RATE: u32 = 16_000;
/// Sample rate of model audio received from the Live API.
pub const OUTPUT_SAMPLE_RATE: u32 = 24_000;

// ---------------------------------------------------------------------------------------------
// Client → server
// ---------------------------------------------------------------------------------------------

/// One client message: exactly one of the four kinds per WebSocket frame.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ClientMessage {
    /// First message of every connection. `config` is accepted as an alias for the one
    /// tutorial that documents it.
    #[serde(alias = "config")]
    Setup(Box<Setup>),
    #[serde(alias = "client_content")]
    ClientContent(ClientContent),
    #[serde(alias = "realtime_input")]
    RealtimeInput(RealtimeInput),
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
    #[serde(
        default,
        alias = "system_instruction",
        skip_serializing_if = "Option::is_none"
    )]
    pub system_instruction: Option<Content>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<ContextUpdateTools>,
}

/// The tools of a `contextUpdate`: they replace the session's; an empty list clears them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContextUpdateTools {
    #[serde(default)]
    pub tools: Vec<ToolSet>,
}

/// `BidiGenerateContentSetup`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Setup {
    pub model: String,
    #[serde(
        default,
        alias = "generation_config",
        skip_serializing_if = "Option::is_none"
    )]
    pub generation_config: Option<GenerationConfig>,
    #[serde(
        default,
        alias = "system_instruction",
        skip_serializing_if = "Option::is_none"
    )]
    pub system_instruction: Option<Content>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSet>,
    #[serde(
        default,
        alias = "realtime_input_config",
        skip_serializing_if = "Option::is_none"
    )]
    pub realtime_input_config: Option<RealtimeInputConfig>,
    #[serde(
        default,
        alias = "session_resumption",
        skip_serializing_if = "Option::is_none"
    )]
    pub session_resumption: Option<SessionResumptionConfig>,
    #[serde(
        default,
        alias = "context_window_compression",
        skip_serializing_if = "Option::is_none"
    )]
    pub context_window_compression: Option<ContextWindowCompression>,
    #[serde(
        default,
        alias = "input_audio_transcription",
        skip_serializing_if = "Option::is_none"
    )]
    pub input_audio_transcription: Option<AudioTranscriptionConfig>,
    #[serde(
        default,
        alias = "output_audio_transcription",
        skip_serializing_if = "Option::is_none"
    )]
    pub output_audio_transcription: Option<AudioTranscriptionConfig>,
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
    #[serde(
        default,
        alias = "response_modalities",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub response_modalities: Vec<Modality>,
    #[serde(
        default,
        alias = "speech_config",
        skip_serializing_if = "Option::is_none"
    )]
    pub speech_config: Option<SpeechConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, alias = "top_p", skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(
        default,
        alias = "top_k",
        with = "lenient::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    pub top_k: Option<i64>,
    #[serde(
        default,
        alias = "max_output_tokens",
        with = "lenient::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_output_tokens: Option<i64>,
    #[serde(
        default,
        alias = "media_resolution",
        skip_serializing_if = "Option::is_none"
    )]
    pub media_resolution: Option<String>,
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
    #[serde(alias = "audio", alias = "Audio")]
    Audio,
    #[serde(alias = "text", alias = "Text")]
    Text,
    #[serde(alias = "video", alias = "Video")]
    Video,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpeechConfig {
    #[serde(
        default,
        alias = "voice_config",
        skip_serializing_if = "Option::is_none"
    )]
    pub voice_config: Option<VoiceConfig>,
    #[serde(
        default,
        alias = "language_code",
        skip_serializing_if = "Option::is_none"
    )]
    pub language_code: Option<String>,
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

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VoiceConfig {
    #[serde(
        default,
        alias = "prebuilt_voice_config",
        skip_serializing_if = "Option::is_none"
    )]
    pub prebuilt_voice_config: Option<PrebuiltVoiceConfig>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PrebuiltVoiceConfig {
    #[serde(alias = "voice_name")]
    pub voice_name: String,
}

/// A `Content`: a role and its parts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Content {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(default)]
    pub parts: Vec<Part>,
}

impl Content {
    /// A content holding one text part.
    pub fn text(role: &str, text: impl Into<String>) -> Self {
        Content {
            role: Some(role.to_owned()),
            parts: vec![Part {
                text: Some(text.into()),
                ..Part::default()
            }],
        }
    }
}

/// One `Part` of a content; exactly one data field is normally set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Part {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(
        default,
        alias = "inline_data",
        skip_serializing_if = "Option::is_none"
    )]
    pub inline_data: Option<Blob>,
    #[serde(
        default,
        alias = "function_call",
        skip_serializing_if = "Option::is_none"
    )]
    pub function_call: Option<FunctionCall>,
    #[serde(
        default,
        alias = "function_response",
        skip_serializing_if = "Option::is_none"
    )]
    pub function_response: Option<FunctionResponse>,
    #[serde(
        default,
        alias = "executable_code",
        skip_serializing_if = "Option::is_none"
    )]
    pub executable_code: Option<Value>,
    #[serde(
        default,
        alias = "code_execution_result",
        skip_serializing_if = "Option::is_none"
    )]
    pub code_execution_result: Option<Value>,
    /// `true` on thought summaries, which are not part of the spoken reply.
    #[serde(
        default,
        with = "lenient::opt_bool",
        skip_serializing_if = "Option::is_none"
    )]
    pub thought: Option<bool>,
    #[serde(
        default,
        alias = "thought_signature",
        skip_serializing_if = "Option::is_none"
    )]
    pub thought_signature: Option<String>,
}

/// Inline bytes with a MIME type (audio, video frames).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Blob {
    #[serde(default, alias = "mime_type")]
    pub mime_type: String,
    #[serde(default, with = "lenient::base64_bytes")]
    pub data: Vec<u8>,
}

impl Blob {
    /// Sample rate declared in an `audio/pcm;rate=N` MIME type, if any.
    pub fn declared_rate(&self) -> Option<u32> {
        // The service's own spelling, on every audio frame, needs no parsing.
        match self.mime_type.as_str() {
            OUTPUT_AUDIO_MIME => return Some(OUTPUT_SAMPLE_RATE),
            INPUT_AUDIO_MIME => return Some(INPUT_SAMPLE_RATE),
            _ => {}
        }
        self.mime_type
            .split(';')
            .filter_map(|p| p.trim().strip_prefix("rate="))
            .find_map(|r| r.trim().parse().ok())
    }
}

/// One entry of `setup.tools`: function declarations, or a built-in tool such as Google
/// Search. (Not to be confused with [`crate::tools::Tool`], a tool livetalk runs locally.)
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSet {
    #[serde(
        default,
        alias = "function_declarations",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub function_declarations: Vec<FunctionDeclaration>,
    #[serde(
        default,
        alias = "google_search",
        skip_serializing_if = "Option::is_none"
    )]
    pub google_search: Option<Value>,
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
    pub name: String,
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behavior: Option<Behavior>,
}

/// Whether the conversation waits for a function's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Behavior {
    Blocking,
    NonBlocking,
}

/// How the model treats a NON_BLOCKING function's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Scheduling {
    Silent,
    WhenIdle,
    Interrupt,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RealtimeInputConfig {
    #[serde(
        default,
        alias = "automatic_activity_detection",
        skip_serializing_if = "Option::is_none"
    )]
    pub automatic_activity_detection: Option<AutomaticActivityDetection>,
    #[serde(
        default,
        alias = "activity_handling",
        skip_serializing_if = "Option::is_none"
    )]
    pub activity_handling: Option<String>,
    #[serde(
        default,
        alias = "turn_coverage",
        skip_serializing_if = "Option::is_none"
    )]
    pub turn_coverage: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AutomaticActivityDetection {
    #[serde(
        default,
        with = "lenient::opt_bool",
        skip_serializing_if = "Option::is_none"
    )]
    pub disabled: Option<bool>,
    #[serde(
        default,
        alias = "start_of_speech_sensitivity",
        skip_serializing_if = "Option::is_none"
    )]
    pub start_of_speech_sensitivity: Option<String>,
    #[serde(
        default,
        alias = "end_of_speech_sensitivity",
        skip_serializing_if = "Option::is_none"
    )]
    pub end_of_speech_sensitivity: Option<String>,
    #[serde(
        default,
        alias = "prefix_padding_ms",
        with = "lenient::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    pub prefix_padding_ms: Option<i64>,
    #[serde(
        default,
        alias = "silence_duration_ms",
        with = "lenient::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    pub silence_duration_ms: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionResumptionConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handle: Option<String>,
    #[serde(
        default,
        with = "lenient::opt_bool",
        skip_serializing_if = "Option::is_none"
    )]
    pub transparent: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextWindowCompression {
    #[serde(
        default,
        alias = "trigger_tokens",
        with = "lenient::opt_int64",
        skip_serializing_if = "Option::is_none"
    )]
    pub trigger_tokens: Option<i64>,
    #[serde(
        default,
        alias = "sliding_window",
        skip_serializing_if = "Option::is_none"
    )]
    pub sliding_window: Option<SlidingWindow>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SlidingWindow {
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

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SafetySetting {
    pub category: String,
    pub threshold: String,
}

/// `BidiGenerateContentClientContent`: turns appended to the history, in order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientContent {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<Content>,
    #[serde(
        default,
        alias = "turn_complete",
        with = "lenient::opt_bool",
        skip_serializing_if = "Option::is_none"
    )]
    pub turn_complete: Option<bool>,
}

impl ClientContent {
    /// A complete user turn of plain text.
    pub fn user_text(text: impl Into<String>) -> Self {
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio: Option<Blob>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub video: Option<Blob>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(
        default,
        alias = "activity_start",
        skip_serializing_if = "Option::is_none"
    )]
    pub activity_start: Option<Empty>,
    #[serde(
        default,
        alias = "activity_end",
        skip_serializing_if = "Option::is_none"
    )]
    pub activity_end: Option<Empty>,
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
    #[serde(default, alias = "function_responses")]
    pub function_responses: Vec<FunctionResponse>,
}

/// The answer to one function call. Always carries the call's `id` and `name`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionResponse {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub response: Value,
    #[serde(
        default,
        alias = "will_continue",
        with = "lenient::opt_bool",
        skip_serializing_if = "Option::is_none"
    )]
    pub will_continue: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling: Option<Scheduling>,
}

// ---------------------------------------------------------------------------------------------
// Server → client
// ---------------------------------------------------------------------------------------------

/// One server message. The envelope is a oneof, except that `usageMetadata` may ride beside
/// any of them, so this is a struct of options rather than an enum.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerMessage {
    #[serde(
        default,
        alias = "setup_complete",
        skip_serializing_if = "Option::is_none"
    )]
    pub setup_complete: Option<SetupComplete>,
    #[serde(
        default,
        alias = "server_content",
        skip_serializing_if = "Option::is_none"
    )]
    pub server_content: Option<ServerContent>,
    #[serde(default, alias = "tool_call", skip_serializing_if = "Option::is_none")]
    pub tool_call: Option<ToolCall>,
    #[serde(
        default,
        alias = "tool_call_cancellation",
        skip_serializing_if = "Option::is_none"
    )]
    pub tool_call_cancellation: Option<ToolCallCancellation>,
    #[serde(default, alias = "go_away", skip_serializing_if = "Option::is_none")]
    pub go_away: Option<GoAway>,
    #[serde(
        default,
        alias = "session_resumption_update",
        skip_serializing_if = "Option::is_none"
    )]
    pub session_resumption_update: Option<SessionResumptionUpdate>,
    #[serde(
        default,
        alias = "usage_metadata",
        skip_serializing_if = "Option::is_none"
    )]
    pub usage_metadata: Option<UsageMetadata>,
    #[serde(
        default,
        alias = "voice_activity",
        skip_serializing_if = "Option::is_none"
    )]
    pub voice_activity: Option<VoiceActivity>,
    #[serde(
        default,
        alias = "voice_activity_detection_signal",
        skip_serializing_if = "Option::is_none"
    )]
    pub voice_activity_detection_signal: Option<VoiceActivityDetectionSignal>,
}

impl ServerMessage {
    /// True when no known field is set (an empty or unknown top-level message).
    pub fn is_empty(&self) -> bool {
        *self == ServerMessage::default()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetupComplete {
    #[serde(default, alias = "session_id", skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// `BidiGenerateContentServerContent`; one message may carry several of these at once.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerContent {
    #[serde(default, alias = "model_turn", skip_serializing_if = "Option::is_none")]
    pub model_turn: Option<Content>,
    #[serde(
        default,
        alias = "generation_complete",
        with = "lenient::opt_bool",
        skip_serializing_if = "Option::is_none"
    )]
    pub generation_complete: Option<bool>,
    #[serde(
        default,
        alias = "turn_complete",
        with = "lenient::opt_bool",
        skip_serializing_if = "Option::is_none"
    )]
    pub turn_complete: Option<bool>,
    #[serde(
        default,
        with = "lenient::opt_bool",
        skip_serializing_if = "Option::is_none"
    )]
    pub interrupted: Option<bool>,
    #[serde(
        default,
        alias = "input_transcription",
        skip_serializing_if = "Option::is_none"
    )]
    pub input_transcription: Option<Transcription>,
    #[serde(
        default,
        alias = "output_transcription",
        skip_serializing_if = "Option::is_none"
    )]
    pub output_transcription: Option<Transcription>,
    #[serde(
        default,
        alias = "interim_input_transcription",
        skip_serializing_if = "Option::is_none"
    )]
    pub interim_input_transcription: Option<Transcription>,
    #[serde(
        default,
        alias = "grounding_metadata",
        skip_serializing_if = "Option::is_none"
    )]
    pub grounding_metadata: Option<Value>,
    #[serde(
        default,
        alias = "url_context_metadata",
        skip_serializing_if = "Option::is_none"
    )]
    pub url_context_metadata: Option<Value>,
    #[serde(
        default,
        alias = "turn_complete_reason",
        skip_serializing_if = "Option::is_none"
    )]
    pub turn_complete_reason: Option<String>,
    #[serde(
        default,
        alias = "waiting_for_input",
        with = "lenient::opt_bool",
        skip_serializing_if = "Option::is_none"
    )]
    pub waiting_for_input: Option<bool>,
    #[serde(
        default,
        alias = "interaction_status",
        skip_serializing_if = "Option::is_none"
    )]
    pub interaction_status: Option<String>,
}

/// A transcription fragment (input or output).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Transcription {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(
        default,
        with = "lenient::opt_bool",
        skip_serializing_if = "Option::is_none"
    )]
    pub finished: Option<bool>,
    #[serde(
        default,
        alias = "language_code",
        skip_serializing_if = "Option::is_none"
    )]
    pub language_code: Option<String>,
}

/// `toolCall`: one or more function calls the client must answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    #[serde(default, alias = "function_calls")]
    pub function_calls: Vec<FunctionCall>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionCall {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default)]
    pub name: String,
    /// The arguments as the model wrote them; user data, so never re-cased.
    #[serde(default = "empty_object")]
    pub args: Value,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolCallCancellation {
    #[serde(default)]
    pub ids: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GoAway {
    #[serde(
        default,
        alias = "time_left",
        with = "lenient::opt_duration",
        skip_serializing_if = "Option::is_none"
    )]
    pub time_left: Option<Duration>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionResumptionUpdate {
    #[serde(default, alias = "new_handle", skip_serializing_if = "Option::is_none")]
    pub new_handle: Option<String>,
    #[serde(
        default,
        with = "lenient::opt_bool",
        skip_serializing_if = "Option::is_none"
    )]
    pub resumable: Option<bool>,
    #[serde(
        default,
        alias = "last_consumed_client_message_index",
        with = "lenient::opt_int64",
        skip_serializing_if = "Option::is_none"
    )]
    pub last_consumed_client_message_index: Option<i64>,
}

/// Token accounting. Vertex's `candidates*` names map onto `response*`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageMetadata {
    #[serde(
        default,
        alias = "prompt_token_count",
        with = "lenient::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    pub prompt_token_count: Option<i64>,
    #[serde(
        default,
        alias = "response_token_count",
        alias = "candidatesTokenCount",
        alias = "candidates_token_count",
        with = "lenient::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    pub response_token_count: Option<i64>,
    #[serde(
        default,
        alias = "total_token_count",
        with = "lenient::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    pub total_token_count: Option<i64>,
    #[serde(
        default,
        alias = "cached_content_token_count",
        with = "lenient::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    pub cached_content_token_count: Option<i64>,
    #[serde(
        default,
        alias = "tool_use_prompt_token_count",
        with = "lenient::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    pub tool_use_prompt_token_count: Option<i64>,
    #[serde(
        default,
        alias = "thoughts_token_count",
        with = "lenient::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    pub thoughts_token_count: Option<i64>,
    #[serde(
        default,
        alias = "prompt_tokens_details",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub prompt_tokens_details: Vec<ModalityTokenCount>,
    #[serde(
        default,
        alias = "response_tokens_details",
        alias = "candidatesTokensDetails",
        alias = "candidates_tokens_details",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub response_tokens_details: Vec<ModalityTokenCount>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModalityTokenCount {
    #[serde(default)]
    pub modality: String,
    #[serde(
        default,
        alias = "token_count",
        with = "lenient::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    pub token_count: Option<i64>,
}

/// `voiceActivity`: server-side VAD start/end of user speech.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VoiceActivity {
    #[serde(
        default,
        rename = "type",
        alias = "voiceActivityType",
        alias = "voice_activity_type",
        skip_serializing_if = "Option::is_none"
    )]
    pub activity_type: Option<String>,
    #[serde(
        default,
        alias = "audio_offset",
        with = "lenient::opt_duration",
        skip_serializing_if = "Option::is_none"
    )]
    pub audio_offset: Option<Duration>,
}

/// Vertex-only explicit VAD signal.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VoiceActivityDetectionSignal {
    #[serde(
        default,
        alias = "vad_signal_type",
        skip_serializing_if = "Option::is_none"
    )]
    pub vad_signal_type: Option<String>,
}
