//! The app-facing bridge protocol (docs/bridge-protocol.md): `{type, payload}` envelopes in both
//! directions. The `LiveConfig` they carry, and how it maps onto the Live API `setup`, is
//! [`super::live_config`]'s.
//!
//! Everything Live-API shaped inside a payload (parts, blobs, tool calls and responses, server
//! content, speech config) is a `live::wire` type; this file only adds the envelope and the
//! few shapes that exist in the bridge protocol alone.

use serde::de::IgnoredAny;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Value, json};

use super::live_config::LiveConfig;
use super::payload::{PayloadError, decode_tagged, tags};
use livetalk_live::wire::{
    Blob, ContextUpdate, Part, RealtimeInput, ServerContent, ToolCall, ToolCallCancellation,
    ToolResponse, UsageMetadata, VoiceActivity, VoiceActivityDetectionSignal,
};

// ---------------------------------------------------------------------------------------------
// Client → bridge
// ---------------------------------------------------------------------------------------------

/// `SEND_REALTIME_INPUT` payload: the Live API's `realtimeInput`, plus the deprecated `chunks`
/// spelling of `mediaChunks`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RealtimeInputPayload {
    #[serde(flatten)]
    pub input: RealtimeInput,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chunks: Vec<Blob>,
}

fn yes() -> bool {
    true
}

fn is_true(value: &bool) -> bool {
    *value
}

/// What `CONNECT_GEMINI` says about resuming, beside its config: the handle of a conversation
/// to go on with (from a `SESSION_HANDLE` of this bridge or of another instance in front of
/// the same service), and whether the app wants `SESSION_HANDLE` messages at all (`false`
/// keeps the original bridge's dialect byte for byte).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resume {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handle: Option<String>,
    #[serde(
        default = "yes",
        alias = "session_handles",
        skip_serializing_if = "is_true"
    )]
    pub session_handles: bool,
}

impl Default for Resume {
    fn default() -> Self {
        Resume {
            handle: None,
            session_handles: true,
        }
    }
}

/// The payload of `WEBRTC_OFFER` and `WEBRTC_ANSWER`: a session description (its `type`, when
/// an app sends one, is implied by the message and ignored).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebrtcSdp {
    pub sdp: String,
}

/// `WEBRTC_ICE_CANDIDATE`: a browser's `RTCIceCandidateInit`. Read flat,
/// `{"candidate": "candidate:…", "sdpMid", "sdpMLineIndex"}`, or nested as the original
/// bridge's Android app sends it, `{"candidate": {"candidate", "sdpMid", "sdpMLineIndex"}}`;
/// written flat. An empty `candidate` is the end of the app's candidates.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "IceCandidateWire", rename_all = "camelCase")]
pub struct IceCandidate {
    pub candidate: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sdp_mid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sdp_m_line_index: Option<u32>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct IceCandidateWire {
    candidate: CandidateField,
    #[serde(default, alias = "sdp_mid")]
    sdp_mid: Option<String>,
    #[serde(default, alias = "sdp_m_line_index")]
    sdp_m_line_index: Option<u32>,
}

#[derive(Deserialize)]
#[serde(
    untagged,
    expecting = "`candidate` must be the candidate line, a string (\"candidate:1 1 udp …\", or \"\" for the end of candidates), or an object holding one as `candidate`"
)]
enum CandidateField {
    Line(String),
    Nested {
        candidate: String,
        #[serde(default, alias = "sdp_mid", rename = "sdpMid")]
        sdp_mid: Option<String>,
        #[serde(default, alias = "sdp_m_line_index", rename = "sdpMLineIndex")]
        sdp_m_line_index: Option<u32>,
    },
}

impl From<IceCandidateWire> for IceCandidate {
    fn from(wire: IceCandidateWire) -> Self {
        match wire.candidate {
            CandidateField::Line(candidate) => IceCandidate {
                candidate,
                sdp_mid: wire.sdp_mid,
                sdp_m_line_index: wire.sdp_m_line_index,
            },
            CandidateField::Nested {
                candidate,
                sdp_mid,
                sdp_m_line_index,
            } => IceCandidate {
                candidate,
                sdp_mid: sdp_mid.or(wire.sdp_mid),
                sdp_m_line_index: sdp_m_line_index.or(wire.sdp_m_line_index),
            },
        }
    }
}

/// One client message. The wire form is derived from these types, tagged like
/// [`BridgeMessage`]: `{"type", "payload"}`, the payload left out when there is none. Decode
/// with [`AppMessage::decode`], which strips `null`s first and words the errors for the app.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    content = "payload",
    rename_all = "SCREAMING_SNAKE_CASE",
    rename_all_fields = "camelCase"
)]
pub enum AppMessage {
    /// `{"initialConfig": LiveConfig, "handle"?: string, "sessionHandles"?: boolean}`.
    ConnectGemini {
        #[serde(rename = "initialConfig")]
        config: LiveConfig,
        /// Top-level keys of the config that were not understood: found while decoding, never
        /// sent.
        #[serde(skip)]
        ignored_keys: Vec<String>,
        /// The conversation to resume, and whether the app is told its handles.
        #[serde(flatten)]
        resume: Resume,
    },
    SendMessage {
        parts: Vec<Part>,
        /// The SDKs default to a complete turn.
        #[serde(default = "yes", alias = "turn_complete")]
        turn_complete: bool,
    },
    SendRealtimeInput(RealtimeInputPayload),
    /// `{"toolResponse": ToolResponse}`.
    #[serde(with = "tool_response_payload")]
    SendToolResponse(ToolResponse),
    /// The LiveConfig is the payload itself.
    #[serde(with = "config_payload")]
    UpdateConfig {
        config: LiveConfig,
        ignored_keys: Vec<String>,
    },
    #[serde(deserialize_with = "any_payload")]
    DisconnectGemini,
    /// `{"sdp": "v=0…"}`: the app's WebRTC offer (audio track, data channel), answered with
    /// `WEBRTC_ANSWER`.
    WebrtcOffer(WebrtcSdp),
    /// One trickled ICE candidate, flat or nested (see [`IceCandidate`]).
    WebrtcIceCandidate(IceCandidate),
    /// Kept only to refuse it: the Live API generates no images.
    #[serde(deserialize_with = "any_payload")]
    GenerateImage,
    /// A new system instruction (or tools) for the open session, as the Live API's
    /// `contextUpdate` (livetalk extension).
    ContextUpdate(ContextUpdate),
}

/// A message that needs nothing of its payload takes whatever it is given.
fn any_payload<'de, D: Deserializer<'de>>(payload: D) -> Result<(), D::Error> {
    IgnoredAny::deserialize(payload).map(|_| ())
}

/// `SEND_TOOL_RESPONSE`'s payload wraps the response (`tool_response` read too).
mod tool_response_payload {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use livetalk_live::wire::ToolResponse;

    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Wire<T> {
        #[serde(alias = "tool_response")]
        tool_response: T,
    }

    pub fn serialize<S: Serializer>(response: &ToolResponse, s: S) -> Result<S::Ok, S::Error> {
        Wire {
            tool_response: response,
        }
        .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ToolResponse, D::Error> {
        Wire::<ToolResponse>::deserialize(d).map(|wire| wire.tool_response)
    }
}

/// `UPDATE_CONFIG`'s payload is the config; its unknown keys are found by [`AppMessage::decode`].
mod config_payload {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::bridge::live_config::LiveConfig;

    pub fn serialize<S: Serializer>(
        config: &LiveConfig,
        _ignored_keys: &[String],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        config.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<(LiveConfig, Vec<String>), D::Error> {
        LiveConfig::deserialize(d).map(|config| (config, Vec::new()))
    }
}

/// Why a client message could not be used. `Display` is the sentence sent in `GEMINI_ERROR`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    #[error("The message is not valid JSON: {0}")]
    Json(String),
    #[error("The message is not valid UTF-8 text.")]
    NotUtf8,
    #[error(
        "The message must be a JSON object with a string `type`, like {{\"type\": \"SEND_MESSAGE\", \"payload\": {{...}}}}."
    )]
    NoType,
    #[error("Unknown message type `{0}`. Known types: {known}.", known = AppMessage::types().join(", "))]
    UnknownType(String),
    #[error("{kind} needs a payload: {expected}.")]
    MissingPayload {
        kind: &'static str,
        expected: &'static str,
    },
    #[error("{kind} payload is invalid: {error}")]
    Payload {
        kind: &'static str,
        error: PayloadError,
    },
    /// Counted before anything was decoded: more than the process's input budget.
    #[error("The message was dropped: {}.", .0)]
    TooCostly(String),
}

#[derive(Deserialize)]
struct Envelope {
    #[serde(rename = "type")]
    kind: Value,
    #[serde(default)]
    payload: Option<Value>,
}

fn envelope(payload: &[u8]) -> Result<(String, Option<Value>), ProtocolError> {
    // Its values are counted first: a million empty parts are a few MB of text and hundreds
    // of MB decoded.
    livetalk_live::budget::InputBudget::process()
        .weigh(payload)
        .map_err(|refused| ProtocolError::TooCostly(refused.to_string()))?;
    let text = std::str::from_utf8(payload).map_err(|_| ProtocolError::NotUtf8)?;
    let value: Value =
        serde_json::from_str(text).map_err(|e| ProtocolError::Json(e.to_string()))?;
    let envelope: Envelope = serde_json::from_value(value).map_err(|_| ProtocolError::NoType)?;
    let Value::String(kind) = envelope.kind else {
        return Err(ProtocolError::NoType);
    };
    // `"payload": null` is the same as no payload.
    Ok((kind, envelope.payload.filter(|p| !p.is_null())))
}

/// Fields whose value is the app's own data, where `null` is a value: never stripped.
const OPAQUE_FIELDS: [&str; 4] = [
    "response",
    "args",
    "parametersJsonSchema",
    "parameters_json_schema",
];

/// Removes every `"field": null` (in lists too), except inside the app's own data. Apps that
/// serialize every optional field (the original bridge's Android app does) send absent fields
/// as `null`; the protocol reads `null` as absent everywhere.
fn strip_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            for (key, v) in map.iter_mut() {
                if !OPAQUE_FIELDS.contains(&key.as_str()) {
                    strip_nulls(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

impl AppMessage {
    /// The `type`s an app may send, as serde reads them.
    pub fn types() -> &'static [&'static str] {
        tags::<AppMessage>()
    }

    /// The wire name of this message's type (checked against serde's in the tests).
    pub const fn kind(&self) -> &'static str {
        match self {
            AppMessage::ConnectGemini { .. } => "CONNECT_GEMINI",
            AppMessage::SendMessage { .. } => "SEND_MESSAGE",
            AppMessage::SendRealtimeInput(_) => "SEND_REALTIME_INPUT",
            AppMessage::SendToolResponse(_) => "SEND_TOOL_RESPONSE",
            AppMessage::UpdateConfig { .. } => "UPDATE_CONFIG",
            AppMessage::DisconnectGemini => "DISCONNECT_GEMINI",
            AppMessage::WebrtcOffer(_) => "WEBRTC_OFFER",
            AppMessage::WebrtcIceCandidate(_) => "WEBRTC_ICE_CANDIDATE",
            AppMessage::GenerateImage => "GENERATE_IMAGE",
            AppMessage::ContextUpdate(_) => "CONTEXT_UPDATE",
        }
    }

    /// Decodes one client frame: `null`s stripped, then the derived decoding; its failures
    /// become sentences for the app.
    pub fn decode(frame: &[u8]) -> Result<AppMessage, ProtocolError> {
        let (kind, mut payload) = envelope(frame)?;
        if let Some(payload) = &mut payload {
            strip_nulls(payload);
        }
        let mut message: AppMessage = decode_tagged(&kind, payload.as_ref()).map_err(|error| {
            let Some(kind) = Self::types().iter().copied().find(|k| *k == kind) else {
                return ProtocolError::UnknownType(kind.clone());
            };
            match payload {
                None => ProtocolError::MissingPayload {
                    kind,
                    expected: expected_payload(kind),
                },
                Some(_) => ProtocolError::Payload { kind, error },
            }
        })?;
        // What the typed config cannot tell is read from the JSON it came from.
        let kind = message.kind();
        let raw = |value: Option<&Value>| LiveConfig::check_keys(value.unwrap_or(&Value::Null));
        let bad = |error: PayloadError| ProtocolError::Payload { kind, error };
        match &mut message {
            AppMessage::ConnectGemini { ignored_keys, .. } => {
                let config = payload.as_ref().and_then(|p| p.get("initialConfig"));
                *ignored_keys = raw(config).map_err(|e| {
                    bad(PayloadError {
                        path: format!("initialConfig.{}", e.path),
                        ..e
                    })
                })?;
            }
            AppMessage::UpdateConfig { ignored_keys, .. } => {
                *ignored_keys = raw(payload.as_ref()).map_err(bad)?;
            }
            _ => {}
        }
        Ok(message)
    }

    /// Encodes for the wire (what the bridge client sends).
    pub fn encode(&self) -> String {
        serde_json::to_string(self).expect("protocol types always serialize")
    }
}

/// What a type that came without a payload needed, for the app.
fn expected_payload(kind: &str) -> &'static str {
    match kind {
        "CONNECT_GEMINI" => "{\"initialConfig\": LiveConfig}",
        "SEND_MESSAGE" => "{\"parts\": Part[], \"turnComplete\": boolean}",
        "SEND_REALTIME_INPUT" => {
            "{\"text\"?: string, \"audio\"?: {mimeType, data}, \"video\"?: {mimeType, data}}"
        }
        "SEND_TOOL_RESPONSE" => {
            "{\"toolResponse\": {\"functionResponses\": [{id, name, response}]}}"
        }
        "UPDATE_CONFIG" => "a LiveConfig",
        "CONTEXT_UPDATE" => "{\"systemInstruction\": Content}",
        "WEBRTC_OFFER" => "{\"sdp\": string}",
        "WEBRTC_ICE_CANDIDATE" => {
            "{\"candidate\": string, \"sdpMid\"?: string, \"sdpMLineIndex\"?: number}"
        }
        _ => "see docs/bridge-protocol.md",
    }
}

// ---------------------------------------------------------------------------------------------
// Bridge → client
// ---------------------------------------------------------------------------------------------

/// `serverContent` of `CONTENT_MESSAGE`: the Live API's server content as the service sent it
/// (audio parts aside, which travel as `AUDIO_CHUNK`), with the usage that rode beside it (the
/// bridge protocol puts `usageMetadata` inside).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BridgeServerContent {
    #[serde(flatten)]
    pub content: ServerContent,
    #[serde(
        default,
        alias = "usage_metadata",
        skip_serializing_if = "Option::is_none"
    )]
    pub usage_metadata: Option<UsageMetadata>,
}

/// `SETUP_COMPLETE` payload. On the wire it is said twice, flat and wrapped in `setupComplete`
/// (`{"setupComplete": {"success": true}, "success": true}`): the documented clients read the
/// flat form, the original bridge's apps the wrapped one, and one shape serves both.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(into = "SetupCompleteWire", from = "SetupCompleteWire")]
pub struct SetupCompleteDetails {
    pub success: bool,
    pub error: Option<SetupErrorDetails>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SetupCompleteFlat {
    #[serde(default)]
    success: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<SetupErrorDetails>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SetupCompleteWire {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    setup_complete: Option<SetupCompleteFlat>,
    #[serde(flatten)]
    flat: SetupCompleteFlat,
}

impl From<SetupCompleteDetails> for SetupCompleteWire {
    fn from(details: SetupCompleteDetails) -> Self {
        let flat = SetupCompleteFlat {
            success: Some(details.success),
            error: details.error,
        };
        SetupCompleteWire {
            setup_complete: Some(flat.clone()),
            flat,
        }
    }
}

impl From<SetupCompleteWire> for SetupCompleteDetails {
    fn from(wire: SetupCompleteWire) -> Self {
        let wrapped = wire.setup_complete.unwrap_or_default();
        SetupCompleteDetails {
            success: wire.flat.success.or(wrapped.success).unwrap_or(false),
            error: wire.flat.error.or(wrapped.error),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SetupErrorDetails {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

/// `TURN_COMPLETE` details: the Live API's reason, waiting flag and (on models with
/// asynchronous turns) where the interaction stands.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnCompleteDetails {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for_input: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interaction_status: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Info,
    #[serde(alias = "warning")]
    Warn,
    Error,
}

/// `IMAGE_GENERATION_RESULT` payload, the answer to `GENERATE_IMAGE`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageGenerationResult {
    pub success: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_data: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One bridge message. The wire form is derived from these types: `{"type", "payload"}`, and
/// every message has a payload (`{}` when it says nothing more), because apps written for the
/// original bridge drop messages without one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    content = "payload",
    rename_all = "SCREAMING_SNAKE_CASE",
    rename_all_fields = "camelCase"
)]
pub enum BridgeMessage {
    GeminiConnected {},
    GeminiDisconnected {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// The close code of the WebSocket close that follows at once, when the bridge ends
        /// the connection itself: 1012 when this instance is draining (reconnect, with the
        /// newest `SESSION_HANDLE`, to go on). Only to apps that take session handles.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<u16>,
    },
    GeminiError {
        #[serde(default = "unexplained")]
        message: String,
        /// Upstream close `code` (`null` when there was none) and `reason`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        details: Option<Value>,
    },
    ContentMessage {
        server_content: Box<BridgeServerContent>,
    },
    ToolCall {
        tool_call: ToolCall,
    },
    ToolCallCancellation {
        tool_call_cancellation: ToolCallCancellation,
    },
    SetupComplete(SetupCompleteDetails),
    Interrupted {},
    TurnComplete(TurnCompleteDetails),
    /// PCM16 24 kHz mono (base64 on the wire).
    AudioChunk {
        #[serde(with = "livetalk_live::lenient::base64_bytes")]
        data: Vec<u8>,
    },
    LogMessage {
        #[serde(rename = "type", default = "info")]
        level: LogLevel,
        #[serde(default)]
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        details: Option<Value>,
        /// When it was said (RFC 3339); the original bridge's apps require it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        date: Option<String>,
    },
    AssistantSpeaking {
        #[serde(default = "yes")]
        speaking: bool,
    },
    #[serde(rename = "groundingMetadata")]
    GroundingMetadata {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        grounding_metadata: Option<Value>,
    },
    ImageGenerationResult(ImageGenerationResult),
    /// The service's voice-activity signals, as it sent them.
    VoiceActivity {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        voice_activity: Option<VoiceActivity>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        voice_activity_detection_signal: Option<VoiceActivityDetectionSignal>,
    },
    /// The answer to the app's `WEBRTC_OFFER`.
    WebrtcAnswer(WebrtcSdp),
    /// The session's newest resumption handle, whenever it changes (absent: the session can
    /// no longer be resumed, forget the last one). `CONNECT_GEMINI` takes it back, on this
    /// instance or another in front of the same service.
    SessionHandle {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        handle: Option<String>,
    },
    /// A type this client does not use (later additions).
    #[serde(skip)]
    Other(String),
}

fn unexplained() -> String {
    "The bridge reported an error.".into()
}

fn info() -> LogLevel {
    LogLevel::Info
}

impl BridgeMessage {
    pub fn error(message: impl Into<String>) -> Self {
        BridgeMessage::GeminiError {
            message: message.into(),
            details: None,
        }
    }

    /// A `LOG_MESSAGE` dated now.
    pub fn log(level: LogLevel, message: impl Into<String>) -> Self {
        BridgeMessage::LogMessage {
            level,
            message: message.into(),
            details: None,
            date: Some(jiff::Timestamp::now().to_string()),
        }
    }

    /// `CONTENT_MESSAGE` of one server content and the usage beside it.
    pub fn content(content: ServerContent, usage_metadata: Option<UsageMetadata>) -> Self {
        BridgeMessage::ContentMessage {
            server_content: Box::new(BridgeServerContent {
                content,
                usage_metadata,
            }),
        }
    }

    /// The `type`s the bridge sends, as serde reads them.
    pub fn types() -> &'static [&'static str] {
        tags::<BridgeMessage>()
    }

    /// The wire name of this message's type (checked against serde's in the tests).
    pub fn kind(&self) -> &str {
        match self {
            BridgeMessage::GeminiConnected {} => "GEMINI_CONNECTED",
            BridgeMessage::GeminiDisconnected { .. } => "GEMINI_DISCONNECTED",
            BridgeMessage::GeminiError { .. } => "GEMINI_ERROR",
            BridgeMessage::ContentMessage { .. } => "CONTENT_MESSAGE",
            BridgeMessage::ToolCall { .. } => "TOOL_CALL",
            BridgeMessage::ToolCallCancellation { .. } => "TOOL_CALL_CANCELLATION",
            BridgeMessage::SetupComplete(_) => "SETUP_COMPLETE",
            BridgeMessage::Interrupted {} => "INTERRUPTED",
            BridgeMessage::TurnComplete(_) => "TURN_COMPLETE",
            BridgeMessage::AudioChunk { .. } => "AUDIO_CHUNK",
            BridgeMessage::LogMessage { .. } => "LOG_MESSAGE",
            BridgeMessage::AssistantSpeaking { .. } => "ASSISTANT_SPEAKING",
            BridgeMessage::GroundingMetadata { .. } => "groundingMetadata",
            BridgeMessage::ImageGenerationResult(_) => "IMAGE_GENERATION_RESULT",
            BridgeMessage::VoiceActivity { .. } => "VOICE_ACTIVITY",
            BridgeMessage::WebrtcAnswer(_) => "WEBRTC_ANSWER",
            BridgeMessage::SessionHandle { .. } => "SESSION_HANDLE",
            BridgeMessage::Other(kind) => kind,
        }
    }

    pub fn encode(&self) -> String {
        match self {
            BridgeMessage::Other(kind) => json!({ "type": kind, "payload": {} }).to_string(),
            message => serde_json::to_string(message).expect("protocol types always serialize"),
        }
    }

    /// Decodes one bridge frame (what the bridge client receives). A missing or `null`
    /// payload reads as `{}`, as other bridges send some types without one.
    pub fn decode(frame: &[u8]) -> Result<BridgeMessage, ProtocolError> {
        let (kind, payload) = envelope(frame)?;
        let payload = payload.unwrap_or_else(|| json!({}));
        decode_tagged(&kind, Some(&payload)).or_else(|error| {
            match Self::types().iter().copied().find(|k| *k == kind) {
                Some(kind) => Err(ProtocolError::Payload { kind, error }),
                None => Ok(BridgeMessage::Other(kind)),
            }
        })
    }
}

#[cfg(test)]
mod tests;
