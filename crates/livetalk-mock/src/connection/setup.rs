//! What a `setup` asks of one connection, checked against the model it names
//! (`livetalk_live::models`): the refusals the service closes with, and the settings the
//! connection's turns then follow.

use livetalk_live::models::{self, ModelTraits};
use livetalk_live::wire::{
    Behavior, Content, FunctionDeclaration, GenerationConfig, Modality, Setup, ToolSet,
};

/// The service's close reason for a request it cannot take (with code 1007).
pub(crate) const INVALID_ARGUMENT: &str = "Request contains an invalid argument.";

/// How a connection's turns go; set by its `setup`.
#[derive(Debug, Clone)]
pub(super) struct Settings {
    /// The behaviours of the model the client asked for.
    pub(super) traits: ModelTraits,
    /// Replies are audio (the default), not text.
    pub(super) audio_out: bool,
    pub(super) transcribe_output: bool,
    pub(super) transcribe_input: bool,
    /// `thinkingConfig.includeThoughts`: a thought summary precedes each reply.
    pub(super) include_thoughts: bool,
    /// Automatic activity detection is off: the client says when the user speaks.
    pub(super) manual_activity: bool,
    /// The client asked for resumption handles.
    pub(super) resumption: bool,
}

impl Default for Settings {
    /// Before any `setup`: audio replies, nothing else asked for.
    fn default() -> Self {
        Settings {
            traits: ModelTraits::default(),
            audio_out: true,
            transcribe_output: false,
            transcribe_input: false,
            include_thoughts: false,
            manual_activity: false,
            resumption: false,
        }
    }
}

/// A setup the model takes.
pub(super) struct Accepted {
    pub(super) settings: Settings,
    /// The client's function declarations.
    pub(super) declarations: Vec<FunctionDeclaration>,
    /// It turned on Google Search (`googleSearch`).
    pub(super) google_search: bool,
    /// The resumption handle the client resumes with, if it gave one.
    pub(super) handle: Option<String>,
    /// The system instruction's text, if it gave one.
    pub(super) instruction: Option<String>,
}

/// How the service closes on a setup it refuses.
pub(super) struct Refusal {
    pub(super) code: u16,
    pub(super) reason: String,
}

impl Refusal {
    fn new(code: u16, reason: impl Into<String>) -> Self {
        Refusal {
            code,
            reason: reason.into(),
        }
    }
}

/// How the service would close on `setup` at API `version` (its code and reason), or `None`
/// when the model it names takes it: the per-model rules the mock follows, for whoever watches
/// another server's sessions (`livetalk proxy`).
pub fn refusal(setup: &Setup, version: &str) -> Option<(u16, String)> {
    accept(setup.clone(), version)
        .err()
        .map(|refused| (refused.code, refused.reason))
}

/// What the service refuses (code 1007) in a client message on a session set up for `model`,
/// besides the setup's own rules: the deprecated `realtimeInput.mediaChunks` on newer models.
pub fn message_refusal(
    model: &str,
    message: &livetalk_live::wire::ClientMessage,
) -> Option<String> {
    match message {
        livetalk_live::wire::ClientMessage::RealtimeInput(input)
            if !input.media_chunks.is_empty() && models::traits(model).refuses_media_chunks =>
        {
            Some(MEDIA_CHUNKS_REFUSED.to_owned())
        }
        _ => None,
    }
}

/// The service's close reason for `realtimeInput.mediaChunks` on a model that no longer takes it.
pub(super) const MEDIA_CHUNKS_REFUSED: &str =
    "realtime_input.media_chunks is deprecated. Use audio, video, or text instead.";

/// Checks a setup against the model it names, as the service at API `version` does, and reads
/// what it asks for.
pub(super) fn accept(setup: Setup, version: &str) -> Result<Accepted, Refusal> {
    if setup.model.trim().is_empty() {
        return Err(Refusal::new(1007, INVALID_ARGUMENT));
    }
    if models::replacement(&setup.model).is_some() {
        return Err(Refusal::new(
            1008,
            models::not_found_reason(&setup.model, version),
        ));
    }
    let traits = models::traits(&setup.model);
    let modalities = setup
        .generation_config
        .as_ref()
        .map(|g| g.response_modalities.clone())
        .unwrap_or_default();
    if traits.native_audio && modalities.contains(&Modality::Text) {
        return Err(Refusal::new(
            1007,
            "Cannot extract voices from a non-audio request.",
        ));
    }
    let declarations: Vec<FunctionDeclaration> = setup
        .tools
        .iter()
        .flat_map(|t| &t.function_declarations)
        .cloned()
        .collect();
    if traits.non_blocking_only
        && declarations
            .iter()
            .any(|d| d.behavior != Some(Behavior::NonBlocking))
    {
        return Err(Refusal::new(
            1007,
            "Request contains an invalid argument. This model supports only NON_BLOCKING functions.",
        ));
    }
    let settings = Settings {
        traits,
        audio_out: !modalities.contains(&Modality::Text),
        transcribe_output: setup.output_audio_transcription.is_some(),
        transcribe_input: setup.input_audio_transcription.is_some(),
        include_thoughts: setup
            .generation_config
            .as_ref()
            .is_some_and(GenerationConfig::includes_thoughts),
        manual_activity: manual_activity(&setup),
        resumption: setup.session_resumption.is_some(),
    };
    let handle = setup
        .session_resumption
        .and_then(|r| r.handle)
        .filter(|h| !h.is_empty());
    Ok(Accepted {
        settings,
        declarations,
        google_search: declares_search(&setup.tools),
        handle,
        instruction: setup.system_instruction.as_ref().map(instruction_text),
    })
}

/// Whether the setup turns automatic activity detection off: the client says when the user
/// speaks (`activityStart`, `activityEnd`).
pub(crate) fn manual_activity(setup: &Setup) -> bool {
    setup
        .realtime_input_config
        .as_ref()
        .and_then(|c| c.automatic_activity_detection.as_ref())
        .and_then(|a| a.disabled)
        .unwrap_or(false)
}

/// Whether these tools turn on Google Search (`googleSearch`, in any entry).
pub(super) fn declares_search(tools: &[ToolSet]) -> bool {
    tools.iter().any(|tool| tool.google_search.is_some())
}

/// The names of the `NON_BLOCKING` functions among `declarations`: on a model with
/// asynchronous turns, calling one ends the turn with `IN_PROGRESS` and the interaction goes on.
pub(super) fn non_blocking_names<'d>(
    declarations: impl IntoIterator<Item = &'d FunctionDeclaration>,
) -> Vec<String> {
    declarations
        .into_iter()
        .filter(|d| d.behavior == Some(Behavior::NonBlocking))
        .map(|d| d.name.clone())
        .collect()
}

/// The text of a system instruction's parts.
pub(super) fn instruction_text(content: &Content) -> String {
    content
        .parts
        .iter()
        .filter_map(|p| p.text.as_deref())
        .collect::<Vec<_>>()
        .join(" ")
}
