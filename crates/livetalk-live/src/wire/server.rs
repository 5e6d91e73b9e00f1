//! What a server sends: `setupComplete`, `serverContent`, `toolCall`, `toolCallCancellation`,
//! `goAway`, `sessionResumptionUpdate`, voice activity, and `usageMetadata` beside any of them.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Content, Text};
use crate::lenient;

/// One server message. The envelope is a oneof, except that `usageMetadata` may ride beside
/// any of them, so this is a struct of options rather than an enum.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerMessage {
    /// The answer to `setup`: the session is ready.
    #[serde(
        default,
        alias = "setup_complete",
        skip_serializing_if = "Option::is_none"
    )]
    pub setup_complete: Option<SetupComplete>,
    /// The model's output and turn signals.
    #[serde(
        default,
        alias = "server_content",
        skip_serializing_if = "Option::is_none"
    )]
    pub server_content: Option<ServerContent>,
    /// Function calls to run and answer.
    #[serde(default, alias = "tool_call", skip_serializing_if = "Option::is_none")]
    pub tool_call: Option<ToolCall>,
    /// Calls that must no longer be answered.
    #[serde(
        default,
        alias = "tool_call_cancellation",
        skip_serializing_if = "Option::is_none"
    )]
    pub tool_call_cancellation: Option<ToolCallCancellation>,
    /// The server will close this connection soon.
    #[serde(default, alias = "go_away", skip_serializing_if = "Option::is_none")]
    pub go_away: Option<GoAway>,
    /// A new resumption handle, or that none is valid right now.
    #[serde(
        default,
        alias = "session_resumption_update",
        skip_serializing_if = "Option::is_none"
    )]
    pub session_resumption_update: Option<SessionResumptionUpdate>,
    /// Token counts, beside any of the others.
    #[serde(
        default,
        alias = "usage_metadata",
        skip_serializing_if = "Option::is_none"
    )]
    pub usage_metadata: Option<UsageMetadata>,
    /// What the server's voice activity detection heard.
    #[serde(
        default,
        alias = "voice_activity",
        skip_serializing_if = "Option::is_none"
    )]
    pub voice_activity: Option<VoiceActivity>,
    /// The same, as Vertex AI sends it when asked (`explicitVadSignal`).
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

/// `setupComplete`: the answer to `setup`; nothing but `setup` may be sent before it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetupComplete {
    /// The session's id (Vertex AI sends one, the Gemini API does not).
    #[serde(default, alias = "session_id", skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// `BidiGenerateContentServerContent`; one message may carry several of these at once.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerContent {
    /// Part of the model's reply: text, or audio in `inlineData`.
    #[serde(default, alias = "model_turn", skip_serializing_if = "Option::is_none")]
    pub model_turn: Option<Content>,
    /// The model has finished generating; playback may still be running.
    #[serde(
        default,
        alias = "generation_complete",
        with = "lenient::opt_bool",
        skip_serializing_if = "Option::is_none"
    )]
    pub generation_complete: Option<bool>,
    /// The model's turn is over.
    #[serde(
        default,
        alias = "turn_complete",
        with = "lenient::opt_bool",
        skip_serializing_if = "Option::is_none"
    )]
    pub turn_complete: Option<bool>,
    /// The user's input cut the model off: stop playback and drop queued audio.
    #[serde(
        default,
        with = "lenient::opt_bool",
        skip_serializing_if = "Option::is_none"
    )]
    pub interrupted: Option<bool>,
    /// A fragment of the transcription of the user's speech.
    #[serde(
        default,
        alias = "input_transcription",
        skip_serializing_if = "Option::is_none"
    )]
    pub input_transcription: Option<Transcription>,
    /// A fragment of the transcription of the model's speech.
    #[serde(
        default,
        alias = "output_transcription",
        skip_serializing_if = "Option::is_none"
    )]
    pub output_transcription: Option<Transcription>,
    /// A provisional transcription of the user's speech, sent while they speak.
    #[serde(
        default,
        alias = "interim_input_transcription",
        skip_serializing_if = "Option::is_none"
    )]
    pub interim_input_transcription: Option<Transcription>,
    /// Google Search results the reply is grounded in, passed through as given.
    #[serde(
        default,
        alias = "grounding_metadata",
        skip_serializing_if = "Option::is_none"
    )]
    pub grounding_metadata: Option<Value>,
    /// What the URL-context tool fetched, passed through as given.
    #[serde(
        default,
        alias = "url_context_metadata",
        skip_serializing_if = "Option::is_none"
    )]
    pub url_context_metadata: Option<Value>,
    /// Why the turn ended, when it is not simply done (`NEED_MORE_INPUT`, a safety reason, …).
    #[serde(
        default,
        alias = "turn_complete_reason",
        skip_serializing_if = "Option::is_none"
    )]
    pub turn_complete_reason: Option<String>,
    /// The model is silent because it expects the user to go on.
    #[serde(
        default,
        alias = "waiting_for_input",
        with = "lenient::opt_bool",
        skip_serializing_if = "Option::is_none"
    )]
    pub waiting_for_input: Option<bool>,
    /// `IN_PROGRESS` or `IDLE`, beside `turnComplete` on models whose turns go on after it.
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
    /// The text of this fragment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<Text>,
    /// The last fragment of the utterance.
    #[serde(
        default,
        with = "lenient::opt_bool",
        skip_serializing_if = "Option::is_none"
    )]
    pub finished: Option<bool>,
    /// The language heard.
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
    /// The calls, each to be answered once.
    #[serde(default, alias = "function_calls")]
    pub function_calls: Vec<FunctionCall>,
}

/// One call of a declared function, to be answered with a
/// [`FunctionResponse`](super::FunctionResponse) carrying its `id` and `name`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionCall {
    /// The id its answer must carry (absent on some older models).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The function called.
    #[serde(default)]
    pub name: String,
    /// The arguments as the model wrote them; user data, so never re-cased.
    #[serde(default = "empty_object")]
    pub args: Value,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// `toolCallCancellation`: calls the server abandoned (the user interrupted the turn); they
/// must not be answered, and their side effects may be undone.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolCallCancellation {
    /// The ids of the cancelled calls.
    #[serde(default)]
    pub ids: Vec<String>,
}

/// `goAway`: the server will close this connection after `timeLeft`; a new connection can
/// resume the session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GoAway {
    /// How long the connection has left.
    #[serde(
        default,
        alias = "time_left",
        with = "lenient::opt_duration",
        skip_serializing_if = "Option::is_none"
    )]
    pub time_left: Option<Duration>,
}

/// `sessionResumptionUpdate`: the newest handle a new connection can resume this session with.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionResumptionUpdate {
    /// The handle that resumes the session as it is now; empty while none is valid.
    #[serde(default, alias = "new_handle", skip_serializing_if = "Option::is_none")]
    pub new_handle: Option<String>,
    /// Whether the session can be resumed at this point (not while the model generates or calls run).
    #[serde(
        default,
        with = "lenient::opt_bool",
        skip_serializing_if = "Option::is_none"
    )]
    pub resumable: Option<bool>,
    /// With `transparent` resumption: the index of the last client message the server consumed.
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
    /// Tokens of the prompt (the whole context).
    #[serde(
        default,
        alias = "prompt_token_count",
        with = "lenient::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    pub prompt_token_count: Option<i64>,
    /// Tokens of the reply.
    #[serde(
        default,
        alias = "response_token_count",
        alias = "candidatesTokenCount",
        alias = "candidates_token_count",
        with = "lenient::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    pub response_token_count: Option<i64>,
    /// Prompt and reply together.
    #[serde(
        default,
        alias = "total_token_count",
        with = "lenient::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    pub total_token_count: Option<i64>,
    /// Prompt tokens served from the cache.
    #[serde(
        default,
        alias = "cached_content_token_count",
        with = "lenient::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    pub cached_content_token_count: Option<i64>,
    /// Tokens of tool results in the prompt.
    #[serde(
        default,
        alias = "tool_use_prompt_token_count",
        with = "lenient::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    pub tool_use_prompt_token_count: Option<i64>,
    /// Tokens the model spent thinking.
    #[serde(
        default,
        alias = "thoughts_token_count",
        with = "lenient::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    pub thoughts_token_count: Option<i64>,
    /// Prompt tokens by modality.
    #[serde(
        default,
        alias = "prompt_tokens_details",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub prompt_tokens_details: Vec<ModalityTokenCount>,
    /// Reply tokens by modality.
    #[serde(
        default,
        alias = "response_tokens_details",
        alias = "candidatesTokensDetails",
        alias = "candidates_tokens_details",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub response_tokens_details: Vec<ModalityTokenCount>,
}

/// Tokens of one modality.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModalityTokenCount {
    /// `TEXT`, `AUDIO`, `IMAGE`, `VIDEO` or `DOCUMENT`.
    #[serde(default)]
    pub modality: String,
    /// Its tokens.
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
    /// `ACTIVITY_START` or `ACTIVITY_END`.
    #[serde(
        default,
        rename = "type",
        alias = "voiceActivityType",
        alias = "voice_activity_type",
        skip_serializing_if = "Option::is_none"
    )]
    pub activity_type: Option<String>,
    /// Where in the input audio it happened.
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
    /// `VAD_SIGNAL_TYPE_SOS` (start of speech) or `VAD_SIGNAL_TYPE_EOS` (end).
    #[serde(
        default,
        alias = "vad_signal_type",
        skip_serializing_if = "Option::is_none"
    )]
    pub vad_signal_type: Option<String>,
}
