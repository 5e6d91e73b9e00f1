//! What one server message means, read in one place: its kinds, the turn it ends, the calls it
//! carries, its usage, its audio, its interaction status, its grounding. Every reader of a
//! server frame (the session and the events it hands out, an app's state, an inspector, turn
//! timing, a bridge, a recorder) takes that meaning from a [`Reading`], never from the raw
//! message: a new field of the service is read here once, and shown where it matters.
//!
//! A reading borrows the message; it costs a few pointer reads to make and nothing to keep.
//! The message's model audio is not in it: an `Inbound` moves the samples into
//! the frame's `ModelAudio` events (so a chunk is held once, from the socket to
//! a speaker), and keeps where each chunk was and how long it is as [`AudioPart`]s.

use std::time::Duration;

use crate::excerpt;
use crate::wire::{
    FunctionCall, OUTPUT_SAMPLE_RATE, ServerContent, ServerMessage, Text, Transcription,
    UsageMetadata,
};

/// One top-level field of a server message, in the order the protocol lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `setupComplete`
    SetupComplete,
    /// `serverContent`
    ServerContent,
    /// `toolCall`
    ToolCall,
    /// `toolCallCancellation`
    ToolCallCancellation,
    /// `goAway`
    GoAway,
    /// `sessionResumptionUpdate`
    SessionResumptionUpdate,
    /// `usageMetadata`
    UsageMetadata,
    /// `voiceActivity`
    VoiceActivity,
    /// `voiceActivityDetectionSignal`
    VoiceActivityDetectionSignal,
}

impl Kind {
    /// Every kind, in the protocol's order.
    pub const ALL: [Kind; 9] = [
        Kind::SetupComplete,
        Kind::ServerContent,
        Kind::ToolCall,
        Kind::ToolCallCancellation,
        Kind::GoAway,
        Kind::SessionResumptionUpdate,
        Kind::UsageMetadata,
        Kind::VoiceActivity,
        Kind::VoiceActivityDetectionSignal,
    ];

    /// The field's name as the wire spells it.
    pub fn name(self) -> &'static str {
        match self {
            Kind::SetupComplete => "setupComplete",
            Kind::ServerContent => "serverContent",
            Kind::ToolCall => "toolCall",
            Kind::ToolCallCancellation => "toolCallCancellation",
            Kind::GoAway => "goAway",
            Kind::SessionResumptionUpdate => "sessionResumptionUpdate",
            Kind::UsageMetadata => "usageMetadata",
            Kind::VoiceActivity => "voiceActivity",
            Kind::VoiceActivityDetectionSignal => "voiceActivityDetectionSignal",
        }
    }

    fn bit(self) -> u16 {
        1 << (self as u16)
    }
}

/// The kinds one message carries (a set; [`Kinds::iter`] gives them in the protocol's order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Kinds(u16);

impl Kinds {
    /// True when the message carries this kind.
    pub fn has(self, kind: Kind) -> bool {
        self.0 & kind.bit() != 0
    }

    /// How many kinds it carries.
    pub fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// True for a message with no known field (empty, or all unknown).
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The kinds, in the protocol's order.
    pub fn iter(self) -> impl Iterator<Item = Kind> {
        Kind::ALL.into_iter().filter(move |kind| self.has(*kind))
    }

    fn with(mut self, kind: Kind, present: bool) -> Kinds {
        if present {
            self.0 |= kind.bit();
        }
        self
    }
}

/// One chunk of model audio a message carried: which part of the model turn it was, its rate,
/// and its size. The samples themselves travel in the frame's
/// [`ServerEvent::ModelAudio`](crate::ServerEvent::ModelAudio) events, one per part, in the same
/// order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AudioPart {
    /// Its index among the model turn's parts.
    pub part: usize,
    /// Its rate as the MIME type declares it (24 kHz when it declares none).
    pub sample_rate: u32,
    /// Its PCM16 bytes.
    pub bytes: usize,
}

impl AudioPart {
    /// How long it plays.
    pub fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.bytes as f64 / 2.0 / f64::from(self.sample_rate.max(1)))
    }
}

/// The turn signals of a message's `serverContent` (all false without one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TurnMarks {
    /// `generationComplete`: the model has generated all of this turn.
    pub generation_complete: bool,
    /// `turnComplete`: the model's turn is over.
    pub turn_complete: bool,
    /// `interrupted`: the user cut the model off.
    pub interrupted: bool,
    /// `waitingForInput`: the model is silent because it expects the user to go on.
    pub waiting_for_input: bool,
}

/// Where the interaction stands on models whose turns go on after `turnComplete`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interaction<'m> {
    /// `IDLE`: the model has nothing more to do.
    Idle,
    /// `IN_PROGRESS` or `REQUIRES_ACTION`: tool calls or speech may follow.
    Working(&'m str),
    /// A status this client does not know (or `INTERACTION_STATUS_UNSPECIFIED`).
    Other(&'m str),
}

impl<'m> Interaction<'m> {
    /// The status as the wire spells it.
    pub fn status(self) -> &'m str {
        match self {
            Interaction::Idle => "IDLE",
            Interaction::Working(status) | Interaction::Other(status) => status,
        }
    }
}

/// A fragment of a transcription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transcript<'m> {
    /// The fragment; fragments join without separators.
    pub text: &'m Text,
    /// The last fragment of the utterance.
    pub finished: bool,
}

/// A new resumption handle, or that none is usable now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resumption<'m> {
    /// The handle that resumes the session as it is now (`None` for an empty one).
    pub handle: Option<&'m str>,
    /// Whether the session can be resumed at this point.
    pub resumable: bool,
}

/// What the server's voice activity detection heard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Voice<'m> {
    /// `true` at the start of speech, `false` at its end, `None` for a type not known here.
    pub speaking: Option<bool>,
    /// The type as the wire spells it (`ACTIVITY_END`, `VAD_SIGNAL_TYPE_EOS`, …).
    pub signal: &'m str,
}

/// Google Search grounding of a reply: what the model looked up and the web pages it drew on,
/// as the service named them. The one reading of a `groundingMetadata` object
/// ([`Grounding::of`]), for a message ([`Reading::grounding`]) and for the
/// [`ServerEvent::Grounding`](crate::ServerEvent::Grounding) made from one; a turn's grounding
/// may come in several messages, gathered by [`Grounding::absorb`].
///
/// Owned, so a reply keeps it, and bounded, since a peer can send anything where the service
/// sends a handful: each search and page once, in the order sent, at most
/// [`Grounding::MAX_QUERIES`] searches and [`Grounding::MAX_SOURCES`] pages (the rest
/// counted); a search, title or site in one line (see [`excerpt::one_line`]) of at most
/// [`Grounding::MAX_WORDS`] characters; a link as sent, up to [`excerpt::LINK`] bytes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Grounding {
    /// The searches it ran (`webSearchQueries`).
    pub queries: Vec<String>,
    /// The web pages it used (`groundingChunks[].web`), in the order sent.
    pub sources: Vec<Source>,
    /// Pages past the ones kept, counted.
    pub more_sources: usize,
}

impl Grounding {
    /// The most searches kept; a reply names a handful.
    pub const MAX_QUERIES: usize = 16;
    /// The most pages kept; more are counted, not kept.
    pub const MAX_SOURCES: usize = 32;
    /// The longest search, title or site kept, in characters; a longer one is cut with "…".
    pub const MAX_WORDS: usize = 300;

    /// What a `groundingMetadata` object says. Keys in either casing (the Python SDK's
    /// `web_search_queries` too); what is not a string, and a chunk that is not `web`, is
    /// left out.
    pub fn of(metadata: &serde_json::Value) -> Grounding {
        let field = |camel: &str, snake: &str| metadata.get(camel).or_else(|| metadata.get(snake));
        let mut grounding = Grounding::default();
        for query in field("webSearchQueries", "web_search_queries")
            .and_then(serde_json::Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(serde_json::Value::as_str)
        {
            grounding.add_query(query);
        }
        for web in field("groundingChunks", "grounding_chunks")
            .and_then(serde_json::Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|chunk| chunk.get("web"))
        {
            let text = |key: &str| web.get(key).and_then(serde_json::Value::as_str);
            grounding.add_source(text("title"), text("uri"), text("domain"));
        }
        grounding
    }

    /// Takes in what a later message said of the same reply's grounding: the searches and
    /// pages not already here, within the bounds.
    pub fn absorb(&mut self, found: Grounding) {
        for query in &found.queries {
            self.add_query(query);
        }
        for source in &found.sources {
            self.add_source(
                source.title.as_deref(),
                source.uri.as_deref(),
                source.domain.as_deref(),
            );
        }
        self.more_sources = self.more_sources.saturating_add(found.more_sources);
    }

    /// True when it names no search and no web page (a search chip alone, say).
    pub fn is_empty(&self) -> bool {
        self.queries.is_empty() && self.sources.is_empty() && self.more_sources == 0
    }

    fn add_query(&mut self, query: &str) {
        if self.queries.len() >= Grounding::MAX_QUERIES {
            return;
        }
        let query = excerpt::one_line(query, Grounding::MAX_WORDS);
        if !query.is_empty() && !self.queries.contains(&query) {
            self.queries.push(query);
        }
    }

    fn add_source(&mut self, title: Option<&str>, uri: Option<&str>, domain: Option<&str>) {
        let words = |text: Option<&str>| {
            text.map(|t| excerpt::one_line(t, Grounding::MAX_WORDS))
                .filter(|t| !t.is_empty())
        };
        let title = words(title);
        let uri = uri.filter(|u| !u.trim().is_empty()).map(|u| {
            let kept = excerpt::floor_char_boundary(u, excerpt::LINK);
            if kept < u.len() {
                format!("{}…", &u[..kept])
            } else {
                u.to_owned()
            }
        });
        if title.is_none() && uri.is_none() {
            return;
        }
        let seen = self.sources.iter().any(|kept| match (&uri, &kept.uri) {
            (Some(uri), Some(kept)) => uri == kept,
            (None, None) => title == kept.title,
            _ => false,
        });
        if seen {
            return;
        }
        if self.sources.len() >= Grounding::MAX_SOURCES {
            self.more_sources = self.more_sources.saturating_add(1);
            return;
        }
        self.sources.push(Source {
            title,
            uri,
            domain: words(domain),
        });
    }

    /// The searches as a line of text says them: each quoted, joined by commas.
    pub fn queries_line(&self) -> String {
        let quoted: Vec<String> = self.queries.iter().map(|q| format!("\"{q}\"")).collect();
        quoted.join(", ")
    }

    /// "… and 3 more sources", when more came than are kept.
    pub fn more_line(&self) -> Option<String> {
        match self.more_sources {
            0 => None,
            1 => Some("… and 1 more source".to_owned()),
            n => Some(format!("… and {n} more sources")),
        }
    }
}

/// One web page a grounded reply drew on, as the service named it (see [`Grounding`] for
/// the bounds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// The page's title (often its site's name), in one line.
    pub title: Option<String>,
    /// The link, whole, as sent (the service's links redirect through Google).
    pub uri: Option<String>,
    /// The site it is on, where the service says, in one line.
    pub domain: Option<String>,
}

impl Source {
    /// How a line of text names it: its title, else its site, else "(untitled)".
    pub fn name(&self) -> &str {
        self.title
            .as_deref()
            .or(self.domain.as_deref())
            .unwrap_or("(untitled)")
    }

    /// Its link when it is one to follow (see [`excerpt::plain_web_link`]).
    pub fn link(&self) -> Option<&str> {
        self.uri
            .as_deref()
            .filter(|uri| excerpt::plain_web_link(uri))
    }

    /// The page in one line of text: its name and its whole link, `title <link>`.
    pub fn as_line(&self) -> String {
        match &self.uri {
            Some(uri) => format!(
                "{} <{}>",
                self.name(),
                excerpt::one_line(uri, excerpt::LINK)
            ),
            None => self.name().to_owned(),
        }
    }
}

/// What one server message means. See the module doc.
#[derive(Debug, Clone, Copy)]
pub struct Reading<'m> {
    message: &'m ServerMessage,
    audio: &'m [AudioPart],
}

impl<'m> Reading<'m> {
    /// The reading of `message`, whose model audio `audio` describes (see [`AudioPart`]).
    pub fn of(message: &'m ServerMessage, audio: &'m [AudioPart]) -> Reading<'m> {
        Reading { message, audio }
    }

    /// The kinds it carries.
    pub fn kinds(&self) -> Kinds {
        let m = self.message;
        Kinds::default()
            .with(Kind::SetupComplete, m.setup_complete.is_some())
            .with(Kind::ServerContent, m.server_content.is_some())
            .with(Kind::ToolCall, m.tool_call.is_some())
            .with(
                Kind::ToolCallCancellation,
                m.tool_call_cancellation.is_some(),
            )
            .with(Kind::GoAway, m.go_away.is_some())
            .with(
                Kind::SessionResumptionUpdate,
                m.session_resumption_update.is_some(),
            )
            .with(Kind::UsageMetadata, m.usage_metadata.is_some())
            .with(Kind::VoiceActivity, m.voice_activity.is_some())
            .with(
                Kind::VoiceActivityDetectionSignal,
                m.voice_activity_detection_signal.is_some(),
            )
    }

    /// `setupComplete`, with the session's id where the server gives one (Vertex AI does).
    pub fn set_up(&self) -> Option<Option<&'m str>> {
        let setup = self.message.setup_complete.as_ref()?;
        Some(setup.session_id.as_deref())
    }

    pub(crate) fn content(&self) -> Option<&'m ServerContent> {
        self.message.server_content.as_ref()
    }

    /// Its turn signals.
    pub fn turn(&self) -> TurnMarks {
        let Some(content) = self.content() else {
            return TurnMarks::default();
        };
        TurnMarks {
            generation_complete: content.generation_complete == Some(true),
            turn_complete: content.turn_complete == Some(true),
            interrupted: content.interrupted == Some(true),
            waiting_for_input: content.waiting_for_input == Some(true),
        }
    }

    /// Why the turn ended, when it is not simply done (`NEED_MORE_INPUT`, a safety reason, …).
    pub fn turn_complete_reason(&self) -> Option<&'m str> {
        self.content()?.turn_complete_reason.as_deref()
    }

    /// Where the interaction stands, when the message says.
    pub fn interaction(&self) -> Option<Interaction<'m>> {
        let status = self.content()?.interaction_status.as_deref()?;
        Some(match status {
            "IDLE" => Interaction::Idle,
            "IN_PROGRESS" | "REQUIRES_ACTION" => Interaction::Working(status),
            other => Interaction::Other(other),
        })
    }

    /// The model turn's text, part by part, as the user is shown it (thoughts left out).
    pub fn text(&self) -> impl Iterator<Item = &'m str> + 'm {
        self.parts()
            .filter(|part| part.thought != Some(true))
            .filter_map(|part| part.text.as_deref())
            .filter(|text| !text.is_empty())
    }

    /// The model's thoughts, part by part (models that think aloud send them as parts marked
    /// `thought`).
    pub fn thoughts(&self) -> impl Iterator<Item = &'m str> + 'm {
        self.parts()
            .filter(|part| part.thought == Some(true))
            .filter_map(|part| part.text.as_deref())
    }

    pub(crate) fn parts(&self) -> std::slice::Iter<'m, crate::wire::Part> {
        self.content()
            .and_then(|content| content.model_turn.as_ref())
            .map(|turn| turn.parts.as_slice())
            .unwrap_or_default()
            .iter()
    }

    /// How many parts the model turn has.
    pub fn part_count(&self) -> usize {
        self.parts().len()
    }

    /// The model audio it carried, chunk by chunk.
    pub fn audio(&self) -> &'m [AudioPart] {
        self.audio
    }

    /// How long its model audio plays.
    pub fn audio_duration(&self) -> Duration {
        self.audio.iter().map(AudioPart::duration).sum()
    }

    /// True when it carries model audio.
    pub fn has_audio(&self) -> bool {
        !self.audio.is_empty()
    }

    /// True when the message is model audio and nothing else: one kind, no turn signal, and
    /// every part of the model turn audio.
    pub fn only_audio(&self) -> bool {
        let Some(content) = self.content() else {
            return false;
        };
        self.kinds().len() == 1
            && self.has_audio()
            && self.audio.len() == self.part_count()
            && *content
                == ServerContent {
                    model_turn: content.model_turn.clone(),
                    ..ServerContent::default()
                }
    }

    /// A fragment of the transcription of the user's speech.
    pub fn heard(&self) -> Option<Transcript<'m>> {
        transcript(self.content()?.input_transcription.as_ref())
    }

    /// A fragment of the transcription of the model's speech.
    pub fn said(&self) -> Option<Transcript<'m>> {
        transcript(self.content()?.output_transcription.as_ref())
    }

    /// A provisional transcription of the user's speech, sent while they speak.
    pub fn hearing(&self) -> Option<Transcript<'m>> {
        transcript(self.content()?.interim_input_transcription.as_ref())
    }

    /// True when the message is the model's words and nothing else: only `serverContent`,
    /// holding only an output transcription (what belongs with the model's audio).
    pub fn only_said(&self) -> bool {
        let Some(content) = self.content() else {
            return false;
        };
        self.kinds().len() == 1
            && content.output_transcription.is_some()
            && *content
                == ServerContent {
                    output_transcription: content.output_transcription.clone(),
                    ..ServerContent::default()
                }
    }

    /// The Google Search grounding of the reply, when the message carries one: its queries and
    /// each web source's title and link (chunks of another kind are left out). Unlike the rest
    /// of a reading it is a copy, bounded (see [`Grounding`]): the reply it grounds keeps it.
    pub fn grounding(&self) -> Option<Grounding> {
        let metadata = self.content()?.grounding_metadata.as_ref()?;
        Some(Grounding::of(metadata))
    }

    /// The function calls it asks for.
    pub fn calls(&self) -> &'m [FunctionCall] {
        self.message
            .tool_call
            .as_ref()
            .map(|call| call.function_calls.as_slice())
            .unwrap_or_default()
    }

    /// The ids of calls the server abandoned.
    pub fn cancelled(&self) -> &'m [String] {
        self.message
            .tool_call_cancellation
            .as_ref()
            .map(|cancel| cancel.ids.as_slice())
            .unwrap_or_default()
    }

    /// `goAway`, with how long the connection has left when the server says.
    pub fn go_away(&self) -> Option<Option<Duration>> {
        Some(self.message.go_away.as_ref()?.time_left)
    }

    /// A new resumption handle, or that none is usable now.
    pub fn resumption(&self) -> Option<Resumption<'m>> {
        let update = self.message.session_resumption_update.as_ref()?;
        Some(Resumption {
            handle: update.new_handle.as_deref().filter(|h| !h.is_empty()),
            resumable: update.resumable == Some(true),
        })
    }

    /// The token accounting beside the message.
    pub fn usage(&self) -> Option<&'m UsageMetadata> {
        self.message.usage_metadata.as_ref()
    }

    /// What the server's voice activity detection heard: `voiceActivity`, or Vertex AI's
    /// `voiceActivityDetectionSignal` when that is all there is.
    pub fn voice(&self) -> Option<Voice<'m>> {
        let activity = self.voice_activity();
        let signal = self.voice_signal();
        match (activity, signal) {
            (Some(activity), Some(signal)) if activity.speaking.is_none() => Some(signal),
            (Some(activity), _) => Some(activity),
            (None, signal) => signal,
        }
    }

    /// `voiceActivity` as sent.
    pub fn voice_activity(&self) -> Option<Voice<'m>> {
        let activity = self.message.voice_activity.as_ref()?;
        let signal = activity.activity_type.as_deref().unwrap_or_default();
        let speaking = match signal {
            "ACTIVITY_START" => Some(true),
            "ACTIVITY_END" => Some(false),
            _ => None,
        };
        Some(Voice { speaking, signal })
    }

    /// `voiceActivityDetectionSignal` as sent.
    pub fn voice_signal(&self) -> Option<Voice<'m>> {
        let detected = self.message.voice_activity_detection_signal.as_ref()?;
        let signal = detected.vad_signal_type.as_deref().unwrap_or_default();
        let speaking = match signal {
            "VAD_SIGNAL_TYPE_SOS" => Some(true),
            "VAD_SIGNAL_TYPE_EOS" => Some(false),
            _ => None,
        };
        Some(Voice { speaking, signal })
    }

    /// True when the server heard the user stop speaking.
    pub fn voice_ended(&self) -> bool {
        [self.voice_activity(), self.voice_signal()]
            .into_iter()
            .flatten()
            .any(|voice| voice.speaking == Some(false))
    }
}

fn transcript(transcription: Option<&Transcription>) -> Option<Transcript<'_>> {
    let transcription = transcription?;
    Some(Transcript {
        text: transcription.text.as_ref()?,
        finished: transcription.finished == Some(true),
    })
}

/// Moves the model audio out of `message`: each audio part keeps its MIME type and an empty
/// `data`; the samples come back in order, with where each was.
pub fn take_audio(message: &mut ServerMessage) -> (Vec<AudioPart>, Vec<Vec<u8>>) {
    let Some(turn) = message
        .server_content
        .as_mut()
        .and_then(|content| content.model_turn.as_mut())
    else {
        return (Vec::new(), Vec::new());
    };
    let mut parts = Vec::new();
    let mut samples = Vec::new();
    for (index, part) in turn.parts.iter_mut().enumerate() {
        // Thoughts are not the model's voice (and never carry it).
        if part.thought == Some(true) {
            continue;
        }
        let Some(blob) = part.inline_data.as_mut() else {
            continue;
        };
        if !blob.mime_type.starts_with("audio/") {
            continue;
        }
        let pcm = std::mem::take(&mut blob.data);
        parts.push(AudioPart {
            part: index,
            sample_rate: blob.declared_rate().unwrap_or(OUTPUT_SAMPLE_RATE),
            bytes: pcm.len(),
        });
        samples.push(pcm);
    }
    (parts, samples)
}
