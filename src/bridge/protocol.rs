//! The app-facing bridge protocol (docs/bridge-protocol.md): `{type, payload}` envelopes in both
//! directions, the `LiveConfig`, and how a `LiveConfig` maps onto the Live API `setup` (and back).
//!
//! Everything Live-API shaped inside a payload (parts, blobs, tool calls and responses, server
//! content, speech config) is a `live::wire` type; this file only adds the envelope and the
//! few shapes that exist in the bridge protocol alone.

use std::collections::HashMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use livetalk_live::models;
use livetalk_live::models::{ModelNameError, VOICES, model_name, voice_name};
use livetalk_live::wire::{
    AudioTranscriptionConfig, Behavior, Blob, ContextUpdate, ContextWindowCompression,
    FunctionDeclaration, GenerationConfig, Modality, Part, RealtimeInput, RealtimeInputConfig,
    SafetySetting, Scheduling, ServerContent, Setup, ToolCall, ToolCallCancellation, ToolResponse,
    ToolSet, UsageMetadata, VoiceActivity, VoiceActivityDetectionSignal,
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
// LiveConfig
// ---------------------------------------------------------------------------------------------

/// The session configuration of `CONNECT_GEMINI` and `UPDATE_CONFIG`.
///
/// The protocol's own fields come first. The ones after them are livetalk extensions that map
/// 1:1 onto the `setup` fields of the same name (a voice app needs transcription, for one);
/// clients that do not know them simply leave them out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LiveConfig {
    #[serde(default)]
    pub model: String,
    #[serde(
        default,
        alias = "system_instruction",
        skip_serializing_if = "Option::is_none"
    )]
    pub system_instruction: Option<livetalk_live::wire::Content>,
    #[serde(
        default,
        alias = "generation_config",
        skip_serializing_if = "Option::is_none"
    )]
    pub generation_config: Option<LiveGenerationConfig>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<LiveTool>,
    #[serde(
        default,
        alias = "safety_settings",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub safety_settings: Vec<SafetySetting>,
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
        alias = "realtime_input_config",
        skip_serializing_if = "Option::is_none"
    )]
    pub realtime_input_config: Option<RealtimeInputConfig>,
    #[serde(
        default,
        alias = "context_window_compression",
        skip_serializing_if = "Option::is_none"
    )]
    pub context_window_compression: Option<ContextWindowCompression>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proactivity: Option<Value>,
}

/// Keys a `LiveConfig` understands; anything else is reported back as ignored.
const LIVE_CONFIG_KEYS: [&str; 17] = [
    "model",
    "systemInstruction",
    "system_instruction",
    "generationConfig",
    "generation_config",
    "tools",
    "safetySettings",
    "safety_settings",
    "inputAudioTranscription",
    "input_audio_transcription",
    "outputAudioTranscription",
    "output_audio_transcription",
    "realtimeInputConfig",
    "realtime_input_config",
    "contextWindowCompression",
    "context_window_compression",
    "proactivity",
];

/// Tool kinds a `LiveConfig` tool entry may hold, in both spellings.
const TOOL_KINDS: [&str; 6] = [
    "functionDeclarations",
    "function_declarations",
    "googleSearch",
    "google_search",
    "codeExecution",
    "code_execution",
];

/// `generationConfig` of a LiveConfig: lower-case modality strings (the protocol's spelling) and
/// `stopSequences` beside the Live API's own generation fields.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LiveGenerationConfig {
    /// `"text"` or `"audio"`, any casing; `"image"` (in the protocol, but not in the Live API)
    /// is dropped with a warning.
    #[serde(
        default,
        alias = "response_modalities",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub response_modalities: Vec<String>,
    /// Part of the protocol's LiveConfig, but the Live API rejects it; dropped with a warning.
    #[serde(
        default,
        alias = "stop_sequences",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub stop_sequences: Vec<String>,
    /// temperature, topK, topP, maxOutputTokens, speechConfig and the other Live fields.
    #[serde(flatten)]
    pub live: GenerationConfig,
}

impl LiveGenerationConfig {
    /// `generationConfig` in the Live API's terms: upper-case modalities, the voice in the
    /// service's spelling, and warnings for what the Live API does not take.
    fn to_live(&self, warnings: &mut Vec<String>) -> Result<GenerationConfig, ConfigError> {
        let mut live = self.live.clone();
        live.response_modalities.clear();
        for name in &self.response_modalities {
            let modality = match name.trim().to_ascii_lowercase().as_str() {
                "audio" => Modality::Audio,
                "text" => Modality::Text,
                // The protocol lists it; the Live API has no image replies.
                "image" => {
                    warnings.push(format!(
                        "responseModalities {name:?} is not supported by the Live API (it answers with \"audio\" or \"text\"); ignored"
                    ));
                    continue;
                }
                _ => return Err(ConfigError::BadModality(name.clone())),
            };
            if !live.response_modalities.contains(&modality) {
                live.response_modalities.push(modality);
            }
        }
        if live.response_modalities.len() > 1 {
            return Err(ConfigError::MixedModalities);
        }
        if !self.stop_sequences.is_empty() {
            warnings.push(
                "generationConfig.stopSequences is not supported by the Live API; ignored"
                    .to_owned(),
            );
        }
        let voice = live
            .speech_config
            .as_mut()
            .and_then(|s| s.voice_config.as_mut())
            .and_then(|v| v.prebuilt_voice_config.as_mut());
        if let Some(voice) = voice {
            voice.voice_name = voice_name(&voice.voice_name)
                .ok_or_else(|| ConfigError::UnknownVoice(voice.voice_name.clone()))?
                .to_owned();
        }
        Ok(live)
    }
}

/// One entry of `LiveConfig.tools`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LiveTool {
    #[serde(
        default,
        alias = "function_declarations",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub function_declarations: Vec<LiveFunctionDeclaration>,
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

/// A function declaration with the protocol's `defaultBehavior` / `defaultScheduling`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LiveFunctionDeclaration {
    #[serde(flatten)]
    pub declaration: FunctionDeclaration,
    /// `blocking` or `NON_BLOCKING` (any casing); becomes the declaration's `behavior`.
    #[serde(
        default,
        alias = "default_behavior",
        skip_serializing_if = "Option::is_none"
    )]
    pub default_behavior: Option<String>,
    /// `WHEN_IDLE`, `INTERRUPT` or `SILENT`. The Live API has scheduling on each function
    /// response, not on the declaration, so the bridge fills it into responses that lack one.
    #[serde(
        default,
        alias = "default_scheduling",
        skip_serializing_if = "Option::is_none"
    )]
    pub default_scheduling: Option<String>,
}

/// A LiveConfig that cannot become a `setup`: everything the bridge can find wrong without
/// asking the Live API.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("LiveConfig needs a `model`, e.g. \"models/gemini-3.8-live\"")]
    MissingModel,
    #[error("LiveConfig `model` {0}")]
    BadModel(ModelNameError),
    #[error(
        "generationConfig.responseModalities {0:?} is not a reply this bridge can carry: use \"audio\" or \"text\""
    )]
    BadModality(String),
    #[error(
        "generationConfig.responseModalities asks for both \"audio\" and \"text\": a Live session answers with one of them"
    )]
    MixedModalities,
    #[error("speechConfig voiceName {0:?} is not a prebuilt voice; voices: {voices}", voices = VOICES.join(", "))]
    UnknownVoice(String),
    #[error(
        "tools[{index}] declares no tool: give it functionDeclarations, googleSearch or codeExecution"
    )]
    EmptyTool { index: usize },
    #[error("function declaration #{index} has no `name`")]
    UnnamedFunction { index: usize },
    #[error(
        "function name {0:?} may only hold letters, digits, `_`, `.`, `:` and `-`, at most {MAX_FUNCTION_NAME} characters"
    )]
    BadFunctionName(String),
    #[error("function `{0}` is declared twice")]
    DuplicateFunction(String),
    #[error("function `{function}`: {field} {value:?} is not one of {expected}")]
    BadEnum {
        function: String,
        field: &'static str,
        value: String,
        expected: &'static str,
    },
}

/// The longest function name any Live API version takes.
const MAX_FUNCTION_NAME: usize = 128;

/// A LiveConfig turned into a `setup`, with what the bridge must remember and tell the client.
#[derive(Debug, Clone, PartialEq)]
pub struct MappedConfig {
    pub setup: Setup,
    /// `defaultScheduling` per NON_BLOCKING function name, for responses that carry none.
    pub scheduling: HashMap<String, Scheduling>,
    /// Fields that were dropped, one sentence each (sent as `LOG_MESSAGE` warnings).
    pub warnings: Vec<String>,
}

impl LiveConfig {
    /// Decodes a LiveConfig, listing top-level keys it does not know (ignored, not fatal:
    /// apps written against other bridges send extra fields).
    ///
    /// A tool kind it does not know is an error, though: the app counts on that tool, and the
    /// model would go without it.
    pub fn from_value(value: Value) -> Result<(LiveConfig, Vec<String>), PayloadError> {
        let unknown = match &value {
            Value::Object(map) => map
                .keys()
                .filter(|k| !LIVE_CONFIG_KEYS.contains(&k.as_str()))
                .cloned()
                .collect(),
            _ => Vec::new(),
        };
        let config: LiveConfig = decode_value(value.clone())?;
        let tools = value.get("tools").and_then(Value::as_array);
        for (index, tool) in tools.into_iter().flatten().enumerate() {
            let kinds: Vec<String> = tool
                .as_object()
                .into_iter()
                .flat_map(|entry| entry.keys())
                .filter(|k| !TOOL_KINDS.contains(&k.as_str()))
                .map(|k| format!("`{k}`"))
                .collect();
            if !kinds.is_empty() {
                return Err(PayloadError {
                    path: format!("tools[{index}]"),
                    message: format!(
                        "unknown tool kind {}; this bridge passes on functionDeclarations, googleSearch and codeExecution",
                        kinds.join(", ")
                    ),
                });
            }
        }
        Ok((config, unknown))
    }

    /// Maps onto the Live API `setup`.
    pub fn to_setup(&self) -> Result<MappedConfig, ConfigError> {
        let mut warnings = Vec::new();
        if self.model.trim().is_empty() {
            return Err(ConfigError::MissingModel);
        }
        let mut model = model_name(&self.model).map_err(ConfigError::BadModel)?;
        // Apps cannot be changed as fast as the service retires models.
        if let Some(current) = models::replacement(&model) {
            warnings.push(format!(
                "The model {model} has been retired by the Live API; this session uses {current} instead. Update the app's model id."
            ));
            model = current.to_owned();
        }

        let generation_config = match &self.generation_config {
            Some(g) => Some(g.to_live(&mut warnings)?),
            None => None,
        };
        let mut scheduling = HashMap::new();
        let mut tools = Vec::new();
        let mut names = std::collections::HashSet::new();
        let mut index = 0;
        for (tool_index, tool) in self.tools.iter().enumerate() {
            if tool.function_declarations.is_empty()
                && tool.google_search.is_none()
                && tool.code_execution.is_none()
            {
                return Err(ConfigError::EmptyTool { index: tool_index });
            }
            let mut declarations = Vec::new();
            for live in &tool.function_declarations {
                index += 1;
                let mut declaration = live.declaration.clone();
                let name = declaration.name.trim().to_owned();
                if name.is_empty() {
                    return Err(ConfigError::UnnamedFunction { index });
                }
                let allowed = |c: char| c.is_ascii_alphanumeric() || "_.:-".contains(c);
                let given = &declaration.name;
                if given.len() > MAX_FUNCTION_NAME || !given.chars().all(allowed) {
                    return Err(ConfigError::BadFunctionName(given.clone()));
                }
                if !names.insert(name.clone()) {
                    return Err(ConfigError::DuplicateFunction(name));
                }
                if let Some(value) = &live.default_behavior {
                    declaration.behavior =
                        Some(parse_behavior(value).ok_or_else(|| ConfigError::BadEnum {
                            function: name.clone(),
                            field: "defaultBehavior",
                            value: value.clone(),
                            expected: "BLOCKING, NON_BLOCKING",
                        })?);
                }
                if let Some(value) = &live.default_scheduling {
                    let parsed = parse_scheduling(value).ok_or_else(|| ConfigError::BadEnum {
                        function: name.clone(),
                        field: "defaultScheduling",
                        value: value.clone(),
                        expected: "WHEN_IDLE, INTERRUPT, SILENT",
                    })?;
                    if declaration.behavior == Some(Behavior::NonBlocking) {
                        scheduling.insert(name.clone(), parsed);
                    } else {
                        warnings.push(format!(
                            "function `{name}`: defaultScheduling only applies to NON_BLOCKING functions; ignored"
                        ));
                    }
                }
                declarations.push(declaration);
            }
            tools.push(ToolSet {
                function_declarations: declarations,
                google_search: tool.google_search.clone(),
                code_execution: tool.code_execution.clone(),
            });
        }

        let mut setup = Setup {
            model,
            generation_config,
            system_instruction: self.system_instruction.clone(),
            tools,
            realtime_input_config: self.realtime_input_config.clone(),
            context_window_compression: self.context_window_compression.clone(),
            input_audio_transcription: self.input_audio_transcription.clone(),
            output_audio_transcription: self.output_audio_transcription.clone(),
            safety_settings: self.safety_settings.clone(),
            proactivity: self.proactivity.clone(),
            ..Setup::default()
        };
        warnings.extend(models::fit_declarations(&mut setup));
        Ok(MappedConfig {
            setup,
            scheduling,
            warnings,
        })
    }

    /// The LiveConfig a bridge client sends for a `setup` it would otherwise send directly.
    /// Session resumption is left to the bridge.
    pub fn from_setup(setup: &Setup) -> LiveConfig {
        let generation_config = setup.generation_config.as_ref().map(|g| {
            let mut live = g.clone();
            let modalities = std::mem::take(&mut live.response_modalities);
            LiveGenerationConfig {
                response_modalities: modalities
                    .iter()
                    .map(|m| match m {
                        Modality::Audio => "audio".to_owned(),
                        Modality::Text => "text".to_owned(),
                        Modality::Video => "video".to_owned(),
                    })
                    .collect(),
                stop_sequences: Vec::new(),
                live,
            }
        });
        LiveConfig {
            model: setup.model.clone(),
            system_instruction: setup.system_instruction.clone(),
            generation_config,
            tools: setup
                .tools
                .iter()
                .map(|t| LiveTool {
                    function_declarations: t
                        .function_declarations
                        .iter()
                        .map(|d| LiveFunctionDeclaration {
                            declaration: d.clone(),
                            default_behavior: None,
                            default_scheduling: None,
                        })
                        .collect(),
                    google_search: t.google_search.clone(),
                    code_execution: t.code_execution.clone(),
                })
                .collect(),
            safety_settings: setup.safety_settings.clone(),
            input_audio_transcription: setup.input_audio_transcription.clone(),
            output_audio_transcription: setup.output_audio_transcription.clone(),
            realtime_input_config: setup.realtime_input_config.clone(),
            context_window_compression: setup.context_window_compression.clone(),
            proactivity: setup.proactivity.clone(),
        }
    }
}

/// Enum spellings vary between clients (`blocking`, `NON_BLOCKING`, `non-blocking`).
fn normalize_enum(value: &str) -> String {
    value.trim().to_ascii_uppercase().replace(['-', ' '], "_")
}

fn parse_behavior(value: &str) -> Option<Behavior> {
    match normalize_enum(value).as_str() {
        "BLOCKING" => Some(Behavior::Blocking),
        "NON_BLOCKING" | "NONBLOCKING" => Some(Behavior::NonBlocking),
        _ => None,
    }
}

fn parse_scheduling(value: &str) -> Option<Scheduling> {
    match normalize_enum(value).as_str() {
        "WHEN_IDLE" => Some(Scheduling::WhenIdle),
        "INTERRUPT" => Some(Scheduling::Interrupt),
        "SILENT" => Some(Scheduling::Silent),
        _ => None,
    }
}

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

/// A payload that does not have the expected shape, with where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at `{path}`: {message}")]
pub struct PayloadError {
    pub path: String,
    pub message: String,
}

fn decode_value<T: DeserializeOwned>(value: Value) -> Result<T, PayloadError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        PayloadError {
            path: if path == "." { "payload".into() } else { path },
            message: e.into_inner().to_string(),
        }
    })
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
