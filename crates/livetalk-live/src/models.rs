//! What differs between Live models, in one table: the current default, the ids the service has
//! retired, and the per-model behaviours that client, mock and bridge each have to follow.

use super::wire::{Behavior, Setup};

/// The model apps get when theirs has been retired.
pub const CURRENT_MODEL: &str = "models/gemini-3.8-live";

/// Ids the Live API has shut down; a setup naming one is refused.
const RETIRED: [&str; 2] = ["gemini-live-2.5-flash-preview", "gemini-2.0-flash-live-001"];

/// The behaviours of one model that a client or a faithful mock must know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ModelTraits {
    /// Answers with audio only: a TEXT modality is refused (1007).
    pub native_audio: bool,
    /// `turnComplete` does not mean idle: `serverContent.interactionStatus` says when the
    /// interaction is over (3.8 Live).
    pub async_turns: bool,
    /// Accepts only `NON_BLOCKING` functions (3.8 Live extended thinking).
    pub non_blocking_only: bool,
    /// Refuses the deprecated `realtimeInput.mediaChunks` with 1007 (3.1 and later).
    pub refuses_media_chunks: bool,
    /// Sends an empty `serverContent` carrying only `usageMetadata` before the first model
    /// turn (3.1 and later).
    pub usage_before_first_turn: bool,
}

/// The bare id of a model name (`models/gemini-3.8-live` → `gemini-3.8-live`).
pub(crate) fn model_id(model: &str) -> &str {
    model.trim().rsplit('/').next().unwrap_or_default()
}

/// The traits of `model` (a bare id or a `models/…` name), judged by its family.
pub fn traits(model: &str) -> ModelTraits {
    let id = model_id(model).to_ascii_lowercase();
    let generation_3_8 = id.starts_with("gemini-3.8");
    let newer = generation_3_8 || id.starts_with("gemini-3.1") || id.starts_with("gemini-3.5");
    ModelTraits {
        native_audio: id.contains("native-audio"),
        async_turns: generation_3_8,
        non_blocking_only: generation_3_8 && id.contains("extended-thinking"),
        refuses_media_chunks: newer,
        usage_before_first_turn: newer,
    }
}

/// The model to use instead when `model` has been retired.
pub fn replacement(model: &str) -> Option<&'static str> {
    let id = model_id(model);
    RETIRED
        .iter()
        .any(|retired| retired.eq_ignore_ascii_case(id))
        .then_some(CURRENT_MODEL)
}

/// Declares the setup's functions the way its model takes them: on a model that accepts only
/// `NON_BLOCKING` functions, every function is declared so. Returns the sentence that tells
/// the user, when there are functions to declare.
pub fn fit_declarations(setup: &mut Setup) -> Option<String> {
    if !traits(&setup.model).non_blocking_only {
        return None;
    }
    let declarations = setup
        .tools
        .iter_mut()
        .flat_map(|t| &mut t.function_declarations);
    let mut count = 0;
    for declaration in declarations {
        declaration.behavior = Some(Behavior::NonBlocking);
        count += 1;
    }
    (count > 0).then(|| non_blocking_notice(&setup.model))
}

/// What the user is told about functions on a model that takes only `NON_BLOCKING` ones.
pub fn non_blocking_notice(model: &str) -> String {
    format!(
        "{} accepts only NON_BLOCKING functions, so every function is declared NON_BLOCKING: the model goes on talking while a tool runs and uses its result when it arrives.",
        model_id(model)
    )
}

/// The service's refusal of a model it does not serve (close 1008).
pub fn not_found_reason(model: &str, api_version: &str) -> String {
    format!(
        "models/{} is not found for API version {api_version}, or is not supported for bidiGenerateContent. Call ListModels to see the list of available models and their supported methods.",
        model_id(model)
    )
}

/// A hint for a refusal that names a retired model: the id to use now.
pub(crate) fn retired_hint(reason: &str) -> Option<String> {
    let named = reason
        .split(|c: char| c.is_whitespace() || c == '"' || c == '`' || c == '\'')
        .find_map(|word| replacement(word).map(|current| (model_id(word).to_owned(), current)));
    named.map(|(id, current)| {
        format!(
            "{id} has been retired; use {} (model = \"{current}\" in the config, or --model {}).",
            model_id(current),
            model_id(current)
        )
    })
}

/// The 30 prebuilt voices of the native-audio models.
pub const VOICES: &[&str] = &[
    "Zephyr",
    "Puck",
    "Charon",
    "Kore",
    "Fenrir",
    "Leda",
    "Orus",
    "Aoede",
    "Callirrhoe",
    "Autonoe",
    "Enceladus",
    "Iapetus",
    "Umbriel",
    "Algieba",
    "Despina",
    "Erinome",
    "Algenib",
    "Rasalgethi",
    "Laomedeia",
    "Achernar",
    "Alnilam",
    "Schedar",
    "Gacrux",
    "Pulcherrima",
    "Achird",
    "Zubenelgenubi",
    "Vindemiatrix",
    "Sadachbia",
    "Sadaltager",
    "Sulafat",
];

/// A model name that cannot be sent to the service.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelNameError {
    /// Blank, or with white space in it.
    #[error("{0:?} is not a model name")]
    NotAName(String),
    /// A prefix with no id after it (`models/`).
    #[error("{0:?} has no model id, e.g. models/gemini-3.8-live")]
    NoId(String),
}

/// The model name the service takes: trimmed, `models/` added to a bare id (as the SDKs do).
/// Read the same way wherever a model is named (a config, a command line, an app's request).
pub fn model_name(value: &str) -> Result<String, ModelNameError> {
    let value = value.trim();
    if value.is_empty() || value.contains(char::is_whitespace) {
        return Err(ModelNameError::NotAName(value.to_owned()));
    }
    // `models/` (or `x/`) names no model: the id after the last `/` is empty.
    if value.rsplit('/').next().is_none_or(str::is_empty) {
        return Err(ModelNameError::NoId(value.to_owned()));
    }
    Ok(if value.contains('/') {
        value.to_owned()
    } else {
        format!("models/{value}")
    })
}

/// The prebuilt voice `value` names, in the service's spelling; any casing is accepted.
pub fn voice_name(value: &str) -> Option<&'static str> {
    let value = value.trim();
    VOICES
        .iter()
        .find(|v| v.eq_ignore_ascii_case(value))
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traits_follow_the_model_family() {
        let live = traits("models/gemini-3.8-live");
        assert!(live.async_turns && !live.non_blocking_only && !live.native_audio);
        assert!(live.refuses_media_chunks && live.usage_before_first_turn);
        assert!(traits("gemini-3.8-live-extended-thinking").non_blocking_only);
        assert!(traits("models/gemini-2.5-flash-native-audio-preview-09-2025").native_audio);
        let old = traits("gemini-2.0-flash-live-001");
        assert_eq!(old, ModelTraits::default());
    }

    #[test]
    fn on_the_extended_thinking_model_every_function_is_non_blocking() {
        use crate::wire::{FunctionDeclaration, ToolSet};
        let declared = |model: &str| {
            let mut setup = Setup {
                model: model.into(),
                tools: vec![ToolSet {
                    function_declarations: vec![
                        FunctionDeclaration {
                            name: "get_device_status".into(),
                            ..FunctionDeclaration::default()
                        },
                        FunctionDeclaration {
                            name: "set_device_status".into(),
                            behavior: Some(Behavior::Blocking),
                            ..FunctionDeclaration::default()
                        },
                    ],
                    ..ToolSet::default()
                }],
                ..Setup::default()
            };
            let notice = fit_declarations(&mut setup);
            let behaviors: Vec<_> = setup.tools[0]
                .function_declarations
                .iter()
                .map(|d| d.behavior)
                .collect();
            (notice, behaviors)
        };
        let (notice, behaviors) = declared("models/gemini-3.8-live-extended-thinking");
        assert_eq!(behaviors, [Some(Behavior::NonBlocking); 2]);
        assert!(notice.unwrap().contains("NON_BLOCKING"));
        let (notice, behaviors) = declared("models/gemini-3.8-live");
        assert_eq!(behaviors, [None, Some(Behavior::Blocking)]);
        assert!(notice.is_none());
    }

    #[test]
    fn retired_ids_name_the_current_model() {
        assert_eq!(
            replacement("models/gemini-live-2.5-flash-preview"),
            Some(CURRENT_MODEL)
        );
        assert_eq!(
            replacement("gemini-2.0-flash-live-001"),
            Some(CURRENT_MODEL)
        );
        assert_eq!(replacement("models/gemini-3.8-live"), None);
        let reason = not_found_reason("models/gemini-live-2.5-flash-preview", "v1beta");
        let hint = retired_hint(&reason).unwrap();
        assert!(
            hint.contains("gemini-live-2.5-flash-preview has been retired"),
            "{hint}"
        );
        assert!(hint.contains("gemini-3.8-live"), "{hint}");
        assert_eq!(retired_hint("models/nope is not found"), None);
    }
}
