//! The recording format: `session.jsonl`'s lines in types of their own, one module per format
//! version that changed their shape (format 3, `v3`, reads the line kinds of formats 1 and 2
//! too), and the conversions between the app's messages and those types (`convert`). The
//! file is a public contract (people read it with `jq`; docs/recording-format.md describes
//! it): the app's types can change without changing it, and a change of its shape is a new
//! format version with its own module and golden files (`tests/data/recordings/`).

pub mod convert;
pub mod recv;
pub mod v3;
pub mod v4;

/// Bumped when a line changes meaning or shape. 3: what the app applied is recorded as
/// `applied` messages, user intents included, and replay reads only those. 2: app-level side
/// lines (user text, tool results, link notices, `session_ended`) beside the wire frames, from
/// which replay rebuilt the messages. 1: as 2, but every `close` line ended the session.
pub const FORMAT_VERSION: u32 = 3;

/// The format of a recording of the wire alone (`livetalk serve --record`): 4, format 3's wire
/// tap with the session's own news (`link`, `ended`) and warnings, and no `applied` lines;
/// each WAV file at one rate. Read by [`v4`].
pub const WIRE_FORMAT_VERSION: u32 = 4;

/// One line as the recorder writes it: JSON with every remembered secret scrubbed, and the
/// newline. `None` when it cannot be encoded (never for the types above).
pub fn encode(line: &v3::Line) -> Option<String> {
    let text = serde_json::to_string(line).ok()?;
    let mut text = livetalk_live::redact::scrub(&text).into_owned();
    text.push('\n');
    Some(text)
}
