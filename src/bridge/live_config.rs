//! The `LiveConfig` of `CONNECT_GEMINI` and `UPDATE_CONFIG` (docs/bridge-protocol.md), and how
//! it maps onto the Live API's `setup` and back: what an app may ask for, checked and refused
//! with a reason the app can act on.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::payload::{PayloadError, decode_value};
use livetalk_live::models;
use livetalk_live::models::{ModelNameError, VOICES, model_name, voice_name};
use livetalk_live::wire::{
    AudioTranscriptionConfig, Behavior, ContextWindowCompression, FunctionDeclaration,
    GenerationConfig, Modality, RealtimeInputConfig, SafetySetting, Scheduling, Setup, ToolSet,
};

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
        let config: LiveConfig = decode_value(value.clone())?;
        let unknown = Self::check_keys(&value)?;
        Ok((config, unknown))
    }

    /// What the typed form of a LiveConfig cannot tell: the top-level keys it does not know
    /// (returned, to warn about), and tool kinds it does not know (an error, at `tools[i]`).
    /// Run on the JSON the config was decoded from.
    pub fn check_keys(value: &Value) -> Result<Vec<String>, PayloadError> {
        let unknown = match value {
            Value::Object(map) => map
                .keys()
                .filter(|k| !LIVE_CONFIG_KEYS.contains(&k.as_str()))
                .cloned()
                .collect(),
            _ => Vec::new(),
        };
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
        Ok(unknown)
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
