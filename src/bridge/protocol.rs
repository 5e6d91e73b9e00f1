//! The app-facing bridge protocol (docs/bridge-protocol.md): `{type, payload}` envelopes in both
//! directions. The `LiveConfig` they carry, and how it maps onto the Live API `setup`, is
//! [`super::live_config`]'s.
//!
//! Everything Live-API shaped inside a payload (parts, blobs, tool calls and responses, server
//! content, speech config) is a `live::wire` type; this file only adds the envelope and the
//! few shapes that exist in the bridge protocol alone.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::live_config::LiveConfig;
use super::payload::{PayloadError, decode_value};
use livetalk_live::wire::{
    Blob, ContextUpdate, Part, RealtimeInput, ServerContent, ToolCall, ToolCallCancellation,
    ToolResponse, UsageMetadata, VoiceActivity, VoiceActivityDetectionSignal,
};

/// Client → bridge message types, as spelled on the wire.
pub const APP_MESSAGE_TYPES: [&str; 10] = [
    "CONNECT_GEMINI",
    "SEND_MESSAGE",
    "SEND_REALTIME_INPUT",
    "SEND_TOOL_RESPONSE",
    "UPDATE_CONFIG",
    "DISCONNECT_GEMINI",
    "WEBRTC_OFFER",
    "WEBRTC_ICE_CANDIDATE",
    "GENERATE_IMAGE",
    "CONTEXT_UPDATE",
];

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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConnectPayload {
    initial_config: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SendMessagePayload {
    parts: Vec<Part>,
    /// The SDKs default to a complete turn.
    #[serde(default = "yes", alias = "turn_complete")]
    turn_complete: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ToolResponsePayload {
    #[serde(alias = "tool_response")]
    tool_response: ToolResponse,
}

/// One client message.
#[derive(Debug, Clone, PartialEq)]
pub enum AppMessage {
    /// The LiveConfig, and top-level keys of it that were not understood.
    ConnectGemini {
        config: LiveConfig,
        ignored_keys: Vec<String>,
    },
    SendMessage {
        parts: Vec<Part>,
        turn_complete: bool,
    },
    SendRealtimeInput(RealtimeInputPayload),
    SendToolResponse(ToolResponse),
    UpdateConfig {
        config: LiveConfig,
        ignored_keys: Vec<String>,
    },
    DisconnectGemini,
    /// Kept only to answer it: this bridge has no WebRTC.
    WebrtcOffer,
    WebrtcIceCandidate,
    /// Kept only to refuse it: the Live API generates no images.
    GenerateImage,
    /// A new system instruction (or tools) for the open session, as the Live API's
    /// `contextUpdate` (livetalk extension).
    ContextUpdate(ContextUpdate),
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
    #[error("Unknown message type `{0}`. Known types: {known}.", known = APP_MESSAGE_TYPES.join(", "))]
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
}

#[derive(Deserialize)]
struct Envelope {
    #[serde(rename = "type")]
    kind: Value,
    #[serde(default)]
    payload: Option<Value>,
}

fn envelope(payload: &[u8]) -> Result<(String, Option<Value>), ProtocolError> {
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
    /// Decodes one client frame.
    pub fn decode(frame: &[u8]) -> Result<AppMessage, ProtocolError> {
        let (kind, payload) = envelope(frame)?;
        let kind: &'static str = APP_MESSAGE_TYPES
            .iter()
            .find(|k| **k == kind)
            .ok_or(ProtocolError::UnknownType(kind))?;
        let mut payload = payload.map(|mut p| {
            strip_nulls(&mut p);
            p
        });
        let mut need = |expected: &'static str| {
            payload
                .take()
                .ok_or(ProtocolError::MissingPayload { kind, expected })
        };
        let bad = |error: PayloadError| ProtocolError::Payload { kind, error };
        Ok(match kind {
            "CONNECT_GEMINI" => {
                let payload: ConnectPayload =
                    decode_value(need("{\"initialConfig\": LiveConfig}")?).map_err(bad)?;
                let (config, ignored_keys) =
                    LiveConfig::from_value(payload.initial_config).map_err(|e| {
                        let path = match e.path.as_str() {
                            "payload" => "initialConfig".to_owned(),
                            inner => format!("initialConfig.{inner}"),
                        };
                        bad(PayloadError { path, ..e })
                    })?;
                AppMessage::ConnectGemini {
                    config,
                    ignored_keys,
                }
            }
            "SEND_MESSAGE" => {
                let payload: SendMessagePayload =
                    decode_value(need("{\"parts\": Part[], \"turnComplete\": boolean}")?)
                        .map_err(bad)?;
                AppMessage::SendMessage {
                    parts: payload.parts,
                    turn_complete: payload.turn_complete,
                }
            }
            "SEND_REALTIME_INPUT" => AppMessage::SendRealtimeInput(
                decode_value(need(
                    "{\"text\"?: string, \"audio\"?: {mimeType, data}, \"video\"?: {mimeType, data}}",
                )?)
                .map_err(bad)?,
            ),
            "SEND_TOOL_RESPONSE" => {
                let payload: ToolResponsePayload = decode_value(need(
                    "{\"toolResponse\": {\"functionResponses\": [{id, name, response}]}}",
                )?)
                .map_err(bad)?;
                AppMessage::SendToolResponse(payload.tool_response)
            }
            "UPDATE_CONFIG" => {
                let (config, ignored_keys) =
                    LiveConfig::from_value(need("a LiveConfig")?).map_err(bad)?;
                AppMessage::UpdateConfig {
                    config,
                    ignored_keys,
                }
            }
            "DISCONNECT_GEMINI" => AppMessage::DisconnectGemini,
            "WEBRTC_OFFER" => AppMessage::WebrtcOffer,
            "GENERATE_IMAGE" => AppMessage::GenerateImage,
            "CONTEXT_UPDATE" => AppMessage::ContextUpdate(
                decode_value(need("{\"systemInstruction\": Content}")?).map_err(bad)?,
            ),
            _ => AppMessage::WebrtcIceCandidate,
        })
    }

    /// Encodes for the wire (what the bridge client sends).
    pub fn encode(&self) -> String {
        let (kind, payload) = match self {
            AppMessage::ConnectGemini { config, .. } => (
                "CONNECT_GEMINI",
                Some(json!({ "initialConfig": to_value(config) })),
            ),
            AppMessage::SendMessage {
                parts,
                turn_complete,
            } => (
                "SEND_MESSAGE",
                Some(json!({ "parts": to_value(parts), "turnComplete": turn_complete })),
            ),
            AppMessage::SendRealtimeInput(input) => ("SEND_REALTIME_INPUT", Some(to_value(input))),
            AppMessage::SendToolResponse(response) => (
                "SEND_TOOL_RESPONSE",
                Some(json!({ "toolResponse": to_value(response) })),
            ),
            AppMessage::UpdateConfig { config, .. } => ("UPDATE_CONFIG", Some(to_value(config))),
            AppMessage::DisconnectGemini => ("DISCONNECT_GEMINI", None),
            AppMessage::WebrtcOffer => ("WEBRTC_OFFER", Some(json!({ "sdp": "" }))),
            AppMessage::WebrtcIceCandidate => (
                "WEBRTC_ICE_CANDIDATE",
                Some(json!({ "candidate": null, "sdpMid": null, "sdpMLineIndex": null })),
            ),
            AppMessage::GenerateImage => ("GENERATE_IMAGE", Some(json!({ "text": "" }))),
            AppMessage::ContextUpdate(update) => ("CONTEXT_UPDATE", Some(to_value(update))),
        };
        encode_envelope(kind, payload)
    }
}

fn to_value<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).expect("protocol types always serialize")
}

fn encode_envelope(kind: &str, payload: Option<Value>) -> String {
    let mut object = Map::new();
    object.insert("type".into(), Value::String(kind.to_owned()));
    if let Some(payload) = payload {
        object.insert("payload".into(), payload);
    }
    Value::Object(object).to_string()
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

/// Bridge → app message types, as spelled on the wire.
pub const BRIDGE_MESSAGE_TYPES: [&str; 15] = [
    "GEMINI_CONNECTED",
    "GEMINI_DISCONNECTED",
    "GEMINI_ERROR",
    "CONTENT_MESSAGE",
    "TOOL_CALL",
    "TOOL_CALL_CANCELLATION",
    "SETUP_COMPLETE",
    "INTERRUPTED",
    "TURN_COMPLETE",
    "AUDIO_CHUNK",
    "LOG_MESSAGE",
    "ASSISTANT_SPEAKING",
    "groundingMetadata",
    "IMAGE_GENERATION_RESULT",
    "VOICE_ACTIVITY",
];

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
    /// A type this client does not use (`WEBRTC_ANSWER`, later additions).
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

    /// The wire name of this message's type.
    pub fn kind(&self) -> &str {
        match self {
            BridgeMessage::Other(kind) => kind,
            other => {
                let index = match other {
                    BridgeMessage::GeminiConnected {} => 0,
                    BridgeMessage::GeminiDisconnected { .. } => 1,
                    BridgeMessage::GeminiError { .. } => 2,
                    BridgeMessage::ContentMessage { .. } => 3,
                    BridgeMessage::ToolCall { .. } => 4,
                    BridgeMessage::ToolCallCancellation { .. } => 5,
                    BridgeMessage::SetupComplete(_) => 6,
                    BridgeMessage::Interrupted {} => 7,
                    BridgeMessage::TurnComplete(_) => 8,
                    BridgeMessage::AudioChunk { .. } => 9,
                    BridgeMessage::LogMessage { .. } => 10,
                    BridgeMessage::AssistantSpeaking { .. } => 11,
                    BridgeMessage::GroundingMetadata { .. } => 12,
                    BridgeMessage::ImageGenerationResult(_) => 13,
                    BridgeMessage::VoiceActivity { .. } | BridgeMessage::Other(_) => 14,
                };
                BRIDGE_MESSAGE_TYPES[index]
            }
        }
    }

    pub fn encode(&self) -> String {
        match self {
            BridgeMessage::Other(kind) => encode_envelope(kind, Some(json!({}))),
            message => serde_json::to_string(message).expect("protocol types always serialize"),
        }
    }

    /// Decodes one bridge frame (what the bridge client receives). A missing or `null`
    /// payload reads as `{}`, as other bridges send some types without one.
    pub fn decode(frame: &[u8]) -> Result<BridgeMessage, ProtocolError> {
        let (kind, payload) = envelope(frame)?;
        let Some(name) = BRIDGE_MESSAGE_TYPES.iter().find(|k| **k == kind) else {
            return Ok(BridgeMessage::Other(kind));
        };
        let payload = payload.unwrap_or_else(|| json!({}));
        decode_value(json!({ "type": name, "payload": payload })).map_err(|mut error| {
            error.path = error
                .path
                .strip_prefix("payload.")
                .map(str::to_owned)
                .unwrap_or(error.path);
            ProtocolError::Payload { kind: name, error }
        })
    }
}

#[cfg(test)]
mod tests;
