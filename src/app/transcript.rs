//! The conversation as the app keeps it: who has the floor, the history of user and model
//! turns with tool calls in their places, and how streamed fragments become entries.

use super::App;
use livetalk_live::reading::Grounding;

/// Who has the floor. There is no idle state: once connected, Gemini is either listening or
/// speaking, and the status badge says which.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Floor {
    Listening,
    Speaking,
}

/// Where a user turn came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserInput {
    Typed,
    Speech,
}

/// How a model turn ended (or that it is still streaming).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelTurnStatus {
    Streaming,
    Complete,
    Interrupted,
}

/// One entry of the conversation history. Tool calls are part of the history, in the order they
/// happened, as the model saw them.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    User {
        text: String,
        via: UserInput,
    },
    Model {
        /// Text parts, when the model sends text.
        text_parts: String,
        /// Output transcription, when the model speaks.
        transcript: String,
        status: ModelTurnStatus,
        /// The service interrupted this turn while Gemini was loud on the speaker and what the
        /// mic sent followed it: Gemini may have heard itself (see [`ECHO_INTERRUPTION`]).
        echo_suspected: bool,
        /// What the reply looked up with Google Search and the pages it drew on (empty for a
        /// reply that searched nothing).
        grounding: Grounding,
    },
    /// Index into [`App::tool_calls`].
    Tool(usize),
    /// Something about the session changed at the user's word ("Voice is now Kore").
    Change(String),
    /// A picture shown to the model (`/image`).
    Image {
        name: String,
        file_bytes: u64,
        width: u32,
        height: u32,
    },
}

impl Entry {
    /// The readable text of a model entry: text parts if any, else the transcription, with
    /// fragments joined and whitespace folded.
    pub fn model_text(text_parts: &str, transcript: &str) -> String {
        let raw = if text_parts.trim().is_empty() {
            transcript
        } else {
            text_parts
        };
        fold_whitespace(raw)
    }
}

/// How the transcript shows a picture sent with `/image`: its file's name and size, and the
/// size it was sent at.
pub fn image_label(name: &str, file_bytes: u64, width: u32, height: u32) -> String {
    let size = if file_bytes >= 1 << 20 {
        format!("{:.1} MB", file_bytes as f64 / f64::from(1 << 20))
    } else if file_bytes >= 1 << 10 {
        format!("{:.0} KB", file_bytes as f64 / f64::from(1 << 10))
    } else {
        format!("{file_bytes} bytes")
    };
    format!(
        "{} ({size}), sent as a {width}×{height} JPEG",
        livetalk_live::excerpt::bounded(name, 80)
    )
}

/// The most text one transcript entry keeps (a model's reply, a user's speech): a server can
/// stream text for ever, and the entry must not grow with it. The recording keeps all of it.
pub const ENTRY_TEXT_MAX: usize = 1 << 20;

/// What ends an entry's text once it reached [`ENTRY_TEXT_MAX`].
pub const ENTRY_TEXT_CUT: &str = " … (more than 1 MiB: the rest is not kept here)";

/// Appends `text` to an entry's, up to [`ENTRY_TEXT_MAX`]; past it, [`ENTRY_TEXT_CUT`] once.
pub(super) fn append_bounded(entry: &mut String, text: &str) {
    if entry.ends_with(ENTRY_TEXT_CUT) {
        return;
    }
    if entry.len() + text.len() <= ENTRY_TEXT_MAX {
        entry.push_str(text);
        return;
    }
    let room = ENTRY_TEXT_MAX.saturating_sub(entry.len());
    entry.push_str(&text[..livetalk_live::excerpt::floor_char_boundary(text, room)]);
    entry.push_str(ENTRY_TEXT_CUT);
}

/// How the transcript explains an entry's `echo_suspected`.
pub const ECHO_INTERRUPTION: &str = "echo may have interrupted Gemini";

/// Joins streamed fragments into readable text: single spaces, no leading or trailing ones.
fn fold_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl App {
    /// A model turn is on its way (e.g. the reply to speech, which no typed turn awaits).
    pub(super) fn model_turn_streaming(&self) -> bool {
        matches!(
            self.transcript.last(),
            Some(Entry::Model {
                status: ModelTurnStatus::Streaming,
                ..
            })
        )
    }

    /// Without a speaker, model output on the wire is what says Gemini is speaking.
    pub(super) fn wire_speaking(&mut self) {
        if !self.audio.playback_drives_speaking() {
            self.floor = Floor::Speaking;
        }
    }

    /// The streaming model entry's (text_parts, transcript), opening one if needed.
    pub(super) fn open_model_entry(&mut self) -> (&mut String, &mut String) {
        let open = matches!(
            self.transcript.last(),
            Some(Entry::Model {
                status: ModelTurnStatus::Streaming,
                ..
            })
        );
        if !open {
            self.fold_user_speech();
            self.transcript.push(Entry::Model {
                text_parts: String::new(),
                transcript: String::new(),
                status: ModelTurnStatus::Streaming,
                echo_suspected: false,
                grounding: Grounding::default(),
            });
        }
        match self.transcript.last_mut() {
            Some(Entry::Model {
                text_parts,
                transcript,
                ..
            }) => (text_parts, transcript),
            _ => unreachable!("a streaming model entry was just ensured"),
        }
    }

    /// The streaming model entry's grounding, opening the entry if needed: a reply's search
    /// may be said before its first words.
    pub(super) fn open_grounding(&mut self) -> &mut Grounding {
        self.open_model_entry();
        match self.transcript.last_mut() {
            Some(Entry::Model { grounding, .. }) => grounding,
            _ => unreachable!("a streaming model entry was just ensured"),
        }
    }

    /// Ends the streaming model entry this way; returns it (none was streaming: `None`).
    /// The index of the model entry still streaming, if any.
    pub(super) fn streaming_model_entry(&self) -> Option<usize> {
        self.transcript.iter().rposition(|entry| {
            matches!(
                entry,
                Entry::Model {
                    status: ModelTurnStatus::Streaming,
                    ..
                }
            )
        })
    }

    /// The audio worker's verdict on the interruption waiting for one.
    pub(super) fn echo_verdict(&mut self, echo_heard: bool) {
        let Some(index) = self.echo_check.take() else {
            return;
        };
        if let Some(Entry::Model { echo_suspected, .. }) = self.transcript.get_mut(index) {
            *echo_suspected = echo_heard;
        }
    }

    pub(super) fn finish_model_entry(&mut self, how: ModelTurnStatus) -> Option<&mut Entry> {
        let entry = self.transcript.iter_mut().rev().find(|entry| {
            matches!(
                entry,
                Entry::Model {
                    status: ModelTurnStatus::Streaming,
                    ..
                }
            )
        })?;
        if let Entry::Model { status, .. } = entry {
            *status = how;
        }
        Some(entry)
    }

    pub(super) fn append_user_speech(&mut self, fragment: &str) {
        if let Some(Entry::User {
            text,
            via: UserInput::Speech,
        }) = self.transcript.last_mut()
        {
            append_bounded(text, fragment);
            return;
        }
        self.transcript.push(Entry::User {
            text: fragment.to_owned(),
            via: UserInput::Speech,
        });
    }

    /// Speech fragments are appended raw while they stream; once something else enters the
    /// history the entry is final, so its text is folded into readable form.
    pub(super) fn fold_user_speech(&mut self) {
        if let Some(Entry::User {
            text,
            via: UserInput::Speech,
        }) = self.transcript.last_mut()
        {
            *text = fold_whitespace(text);
        }
    }

    pub fn transcript(&self) -> &[Entry] {
        &self.transcript
    }

    /// Whether the transcript entry at `index` waits for the echo verdict on its interruption
    /// (a presenter that prints each entry once holds it back until then).
    pub fn echo_check_pending(&self, index: usize) -> bool {
        // Only a live device mic has the audio worker judge. A replay waits for nothing (a
        // recorded verdict still flags the reply when it comes), nor does a WAV file as the mic.
        self.echo_check == Some(index)
            && self.replay.is_none()
            && self.audio.input.is_some()
            && !self.audio.input_is_clip
    }

    pub fn floor(&self) -> Floor {
        self.floor
    }
}
