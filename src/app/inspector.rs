//! The event inspector (F12, `/events`): what it shows of the wire log, and its keys moving
//! through it (what it looks at, `view::Inspector`, is part of the view): one row per frame,
//! the Live API message kind and its flags, a one-line summary, audio frames folded into runs,
//! and a frame's JSON with its audio left out and secrets scrubbed. Drawing is
//! `ui::inspector`'s.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::view::{Inspector, Popup, WireFilter};
use super::wire_log::{WireBody, WireFrame, WireLog};
use super::{App, Effect, NoticeLevel};
use livetalk_live::excerpt;
use livetalk_live::reading::{Kind, Reading, Source};
use livetalk_live::redact;
use livetalk_live::wire::{Blob, ClientMessage, RealtimeInput};

/// The most a copy puts on the clipboard: terminals cap what an OSC 52 sequence may carry
/// (tmux and xterm at around 100 KB of base64).
pub const COPY_MAX: usize = 64 << 10;

/// Whether `filter` lists a frame about `topics`.
fn shows(filter: WireFilter, topics: Topics) -> bool {
    match filter {
        WireFilter::All => true,
        WireFilter::Conversation => topics.conversation,
        WireFilter::Tools => topics.tools,
        WireFilter::Session => topics.session,
    }
}

/// Which way a frame went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Sent,
    Received,
}

/// One row of the inspector: a frame, or a run of audio frames one way.
#[derive(Debug, Clone, PartialEq)]
pub struct WireRow {
    /// Where its first frame is in the log.
    pub first: usize,
    /// The number its first frame was taken in as.
    pub number: u64,
    pub at: Instant,
    pub direction: Direction,
    /// The Live API message kind, with its flags (`serverContent turnComplete`).
    pub kind: String,
    /// Bytes on the wire, all of the run's frames together.
    pub bytes: usize,
    pub summary: String,
    /// Frames in it: more than one for a run of audio.
    pub frames: usize,
    /// Audio it carried (frames that are only audio).
    pub audio: Option<Duration>,
    /// What the model's audio in a run said, from the transcription frames folded into it.
    pub said: String,
    /// Read before the session was set up.
    pub handshake: bool,
}

/// Which filters show a frame.
#[derive(Debug, Clone, Copy, Default)]
struct Topics {
    conversation: bool,
    tools: bool,
    session: bool,
}

/// What a frame amounts to, for its row.
struct Described {
    kind: String,
    summary: String,
    topics: Topics,
    /// The frame is audio and nothing else: (its duration) — folded into runs.
    audio_only: Option<Duration>,
    /// The frame is a fragment of the transcription of the model's speech and nothing else:
    /// it goes into the model's audio run, when one is open, as the words of it.
    said: Option<String>,
}

/// Longest summary kept for a row: a row is one line, cut to the screen's width anyway.
const SUMMARY_MAX: usize = 240;

/// The rows the inspector lists for `filter`, oldest first. Audio frames one way are folded
/// into a run until a frame that is not audio is listed; the two directions' runs go on side
/// by side, as the mic and the speaker do.
pub fn wire_rows(log: &WireLog, filter: WireFilter) -> Vec<WireRow> {
    let mut rows: Vec<WireRow> = Vec::new();
    // The run each direction is adding to, by its row.
    let mut open: [Option<usize>; 2] = [None, None];
    for (index, frame) in log.frames().iter().enumerate() {
        let described = describe(frame);
        if !shows(filter, described.topics) {
            continue;
        }
        let direction = direction(frame);
        let side = usize::from(direction == Direction::Received);
        if let (Some(words), Some(row)) =
            (&described.said, open[side].and_then(|at| rows.get_mut(at)))
        {
            row.frames += 1;
            row.bytes += frame.bytes;
            add_words(&mut row.said, words);
            row.summary = run_summary(row);
            continue;
        }
        if let Some(duration) = described.audio_only {
            if let Some(row) = open[side].and_then(|at| rows.get_mut(at)) {
                row.frames += 1;
                row.bytes += frame.bytes;
                row.audio = Some(row.audio.unwrap_or_default() + duration);
                row.summary = run_summary(row);
                continue;
            }
            open[side] = Some(rows.len());
        } else {
            open = [None, None];
        }
        rows.push(WireRow {
            first: index,
            number: log.number(index).unwrap_or_default(),
            at: frame.at,
            direction,
            kind: described.kind,
            bytes: frame.bytes,
            summary: match described.audio_only {
                Some(duration) => audio_run_summary(1, duration),
                None => described.summary,
            },
            frames: 1,
            audio: described.audio_only,
            said: String::new(),
            handshake: frame.handshake,
        });
    }
    rows
}

fn direction(frame: &WireFrame) -> Direction {
    match frame.body {
        WireBody::Sent(_) => Direction::Sent,
        _ => Direction::Received,
    }
}

/// A run's summary: its audio, and what it said.
fn run_summary(row: &WireRow) -> String {
    let audio = audio_run_summary(row.frames, row.audio.unwrap_or_default());
    if row.said.is_empty() {
        audio
    } else {
        format!("{audio} · said {}", quoted(&row.said))
    }
}

/// Adds a transcription fragment to a run's words, bounded; fragments that carry no spaces
/// of their own are words.
fn add_words(said: &mut String, words: &str) {
    if said.len() > SUMMARY_MAX {
        return;
    }
    let joined = said.ends_with(char::is_whitespace) || words.starts_with(char::is_whitespace);
    if !said.is_empty() && !joined {
        said.push(' ');
    }
    said.push_str(&excerpt::bounded(words, SUMMARY_MAX));
}

fn audio_run_summary(frames: usize, audio: Duration) -> String {
    let ms = audio.as_millis();
    let length = if ms >= 1000 {
        format!("{:.2} s", audio.as_secs_f64())
    } else {
        format!("{ms} ms")
    };
    if frames == 1 {
        format!("audio {length}")
    } else {
        format!("audio ×{frames} · {length}")
    }
}

/// How long the audio of `bytes` bytes of PCM16 at the blob's rate plays.
fn audio_length(blob: &Blob, bytes: usize, default_rate: u32) -> Duration {
    let rate = blob.declared_rate().unwrap_or(default_rate).max(1);
    Duration::from_secs_f64(bytes as f64 / 2.0 / f64::from(rate))
}

fn describe(frame: &WireFrame) -> Described {
    match &frame.body {
        WireBody::Sent(message) => describe_sent(message, frame.elided),
        WireBody::Received { message, audio } => describe_received(Reading::of(message, audio)),
        WireBody::Unreadable(reason) => Described {
            kind: "unreadable frame".to_owned(),
            summary: one_line(reason),
            topics: Topics {
                session: true,
                ..Topics::default()
            },
            audio_only: None,
            said: None,
        },
    }
}

/// Text for one row: line breaks as spaces, bounded.
fn one_line(text: &str) -> String {
    let bounded = excerpt::bounded(text, SUMMARY_MAX);
    bounded.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn quoted(text: &str) -> String {
    format!("\"{}\"", one_line(text))
}

fn describe_sent(message: &ClientMessage, elided: usize) -> Described {
    let conversation = Topics {
        conversation: true,
        ..Topics::default()
    };
    let session = Topics {
        session: true,
        ..Topics::default()
    };
    let (kind, summary, topics) = match message {
        ClientMessage::Setup(setup) => {
            let mut summary = setup.model.trim_start_matches("models/").to_owned();
            let declared: usize = setup
                .tools
                .iter()
                .map(|set| set.function_declarations.len())
                .sum();
            if declared > 0 {
                summary.push_str(&format!(" · {declared} functions"));
            }
            if setup.session_resumption.is_some() {
                summary.push_str(" · resumption");
            }
            ("setup".to_owned(), summary, session)
        }
        ClientMessage::ClientContent(content) => {
            let text: Vec<&str> = content
                .turns
                .iter()
                .flat_map(|turn| &turn.parts)
                .filter_map(|part| part.text.as_deref())
                .collect();
            let mut kind = "clientContent".to_owned();
            if content.turn_complete == Some(true) {
                kind.push_str(" turnComplete");
            }
            (kind, quoted(&text.join(" ")), conversation)
        }
        ClientMessage::RealtimeInput(input) => {
            let (kind, summary, audio_only) = describe_realtime(input, elided);
            return Described {
                kind,
                summary,
                topics: conversation,
                audio_only,
                said: None,
            };
        }
        ClientMessage::ToolResponse(response) => {
            let answers: Vec<String> = response
                .function_responses
                .iter()
                .map(|r| {
                    let verdict = if r.response.get("error").is_some() {
                        "error"
                    } else {
                        "ok"
                    };
                    format!("{} → {verdict}", r.name)
                })
                .collect();
            let topics = Topics {
                tools: true,
                ..Topics::default()
            };
            ("toolResponse".to_owned(), answers.join(", "), topics)
        }
        ClientMessage::ContextUpdate(update) => {
            let text: Vec<&str> = update
                .system_instruction
                .iter()
                .flat_map(|content| &content.parts)
                .filter_map(|part| part.text.as_deref())
                .collect();
            let mut summary = if text.is_empty() {
                String::new()
            } else {
                format!("system instruction {}", quoted(&text.join(" ")))
            };
            if update.tools.is_some() {
                summary.push_str(" · tools");
            }
            ("contextUpdate".to_owned(), summary, session)
        }
    };
    Described {
        kind,
        summary: one_line(&summary),
        topics,
        audio_only: None,
        said: None,
    }
}

fn describe_realtime(input: &RealtimeInput, elided: usize) -> (String, String, Option<Duration>) {
    let mut parts = Vec::new();
    let mut kind = "realtimeInput".to_owned();
    let audio_blobs: Vec<&Blob> = input
        .audio
        .iter()
        .chain(
            input
                .media_chunks
                .iter()
                .filter(|b| b.mime_type.starts_with("audio/")),
        )
        .collect();
    let images = input.video.is_some()
        || input
            .media_chunks
            .iter()
            .any(|b| !b.mime_type.starts_with("audio/"));
    let signals = input.activity_start.is_some()
        || input.activity_end.is_some()
        || input.audio_stream_end.is_some();
    let audio = audio_blobs
        .first()
        .map(|blob| audio_length(blob, elided, livetalk_live::wire::INPUT_SAMPLE_RATE));
    if let Some(length) = audio
        && !images
        && !signals
        && input.text.is_none()
    {
        return (kind, String::new(), Some(length));
    }
    for (flag, set) in [
        ("activityStart", input.activity_start.is_some()),
        ("activityEnd", input.activity_end.is_some()),
        ("audioStreamEnd", input.audio_stream_end.is_some()),
    ] {
        if set {
            kind.push(' ');
            kind.push_str(flag);
        }
    }
    if let Some(text) = &input.text {
        parts.push(quoted(text));
    }
    if let Some(length) = audio {
        parts.push(audio_run_summary(1, length));
    }
    if images {
        parts.push(format!("image, {}", excerpt::human_size(elided as u64)));
    }
    (kind, parts.join(" · "), None)
}

fn describe_received(reading: Reading<'_>) -> Described {
    let kinds = reading.kinds();
    let mut summary = Vec::new();
    let mut topics = Topics::default();
    let mut names = Vec::with_capacity(kinds.len());
    for kind in kinds.iter() {
        let mut name = kind.name().to_owned();
        match kind {
            Kind::SetupComplete => topics.session = true,
            Kind::ServerContent => {
                topics.conversation = true;
                let turn = reading.turn();
                for (flag, set) in [
                    ("generationComplete", turn.generation_complete),
                    ("turnComplete", turn.turn_complete),
                    ("interrupted", turn.interrupted),
                    ("waitingForInput", turn.waiting_for_input),
                ] {
                    if set {
                        name.push(' ');
                        name.push_str(flag);
                    }
                }
            }
            Kind::ToolCall | Kind::ToolCallCancellation => topics.tools = true,
            Kind::GoAway | Kind::SessionResumptionUpdate | Kind::UsageMetadata => {
                topics.session = true;
            }
            Kind::VoiceActivity | Kind::VoiceActivityDetectionSignal => {
                topics.conversation = true;
            }
        }
        names.push(name);
    }
    if let Some(Some(id)) = reading.set_up() {
        summary.push(format!("session {}", one_line(id)));
    }
    let text: String = reading.text().collect();
    if !text.is_empty() {
        summary.push(quoted(&text));
    }
    let thoughts: String = reading.thoughts().collect();
    if !thoughts.is_empty() {
        summary.push(format!("thought {}", quoted(&thoughts)));
    }
    for (label, transcript) in [
        ("heard", reading.heard()),
        ("said", reading.said()),
        ("hearing", reading.hearing()),
    ] {
        if let Some(transcript) = transcript {
            summary.push(format!("{label} {}", quoted(transcript.text)));
        }
    }
    if let Some(reason) = reading.turn_complete_reason() {
        summary.push(one_line(reason));
    }
    if let Some(interaction) = reading.interaction() {
        summary.push(format!("interaction {}", one_line(interaction.status())));
    }
    if let Some(grounding) = reading.grounding() {
        // Put in words as the transcript puts a reply's grounding.
        if !grounding.queries.is_empty() {
            summary.push(format!("searched {}", grounding.queries_line()));
        }
        let sources: Vec<String> = grounding.sources.iter().map(Source::as_line).collect();
        let count = match sources.len() + grounding.more_sources {
            1 => "1 source".to_owned(),
            n => format!("{n} sources"),
        };
        summary.push(
            format!("{count}: {}", sources.join(", "))
                .trim_end_matches(": ")
                .to_owned(),
        );
    }
    let audio_only = reading.only_audio().then(|| reading.audio_duration());
    if reading.has_audio() && audio_only.is_none() {
        summary.push(audio_run_summary(1, reading.audio_duration()));
    }
    if !reading.calls().is_empty() {
        let calls: Vec<String> = reading
            .calls()
            .iter()
            .map(|c| {
                let args = excerpt::bounded_json(&c.args, SUMMARY_MAX);
                format!("{}({args})", c.name)
            })
            .collect();
        summary.push(calls.join(", "));
    }
    if kinds.has(Kind::ToolCallCancellation) {
        summary.push(reading.cancelled().join(", "));
    }
    session_business(reading, &mut summary);
    for voice in [reading.voice_activity(), reading.voice_signal()]
        .into_iter()
        .flatten()
    {
        if !voice.signal.is_empty() {
            summary.push(one_line(voice.signal));
        }
    }
    if names.is_empty() {
        names.push("(empty)".to_owned());
        topics.session = true;
    }
    // Only the words of the model's speech: they belong with its audio.
    let said = reading
        .only_said()
        .then(|| reading.said().map(|said| said.text.to_string()))
        .flatten();
    Described {
        kind: names.join(" + "),
        summary: one_line(&summary.join(" · ")),
        topics,
        audio_only,
        said,
    }
}

/// What a received frame says of the session itself: the time a goAway leaves, a resumption
/// handle (a glimpse of it), the tokens used.
fn session_business(reading: Reading<'_>, summary: &mut Vec<String>) {
    if let Some(Some(left)) = reading.go_away() {
        summary.push(format!("{} s left", left.as_secs()));
    }
    if let Some(update) = reading.resumption() {
        let resumable = if update.resumable {
            "resumable"
        } else {
            "not resumable"
        };
        summary.push(match update.handle {
            // A handle resumes the session: a glimpse is enough to tell two apart.
            Some(handle) => {
                let end = excerpt::floor_char_boundary(handle, 8);
                format!("handle {}… {resumable}", &handle[..end])
            }
            None => resumable.to_owned(),
        });
    }
    if let Some(usage) = reading.usage() {
        // Some servers give only the parts.
        let parts = usage.prompt_token_count.unwrap_or(0) + usage.response_token_count.unwrap_or(0);
        match usage.total_token_count {
            Some(total) => summary.push(format!("{total} tokens")),
            None if parts > 0 => summary.push(format!("{parts} tokens")),
            None => {}
        }
    }
}

/// A frame as JSON, pretty, for the expanded view and a copy: the data of its audio and
/// images (which the log never kept) marked as left out, and every secret scrubbed.
pub fn frame_json(frame: &WireFrame) -> String {
    let value = match &frame.body {
        WireBody::Sent(message) => serde_json::to_value(message.as_ref()),
        WireBody::Received { message, .. } => serde_json::to_value(message.as_ref()),
        WireBody::Unreadable(reason) => Ok(serde_json::json!({ "unreadable": reason })),
    };
    let mut value = value.unwrap_or(Value::Null);
    if frame.elided > 0 {
        mark_left_out(&mut value, frame.elided);
    }
    let text = serde_json::to_string_pretty(&value).unwrap_or_default();
    redact::scrub(&text).into_owned()
}

/// Puts a note where each blob's data was.
fn mark_left_out(value: &mut Value, elided: usize) {
    match value {
        Value::Object(object) => {
            let is_blob = object.contains_key("mimeType")
                && object.get("data").is_some_and(|d| d.as_str() == Some(""));
            if is_blob {
                object.insert(
                    "data".to_owned(),
                    Value::String(format!(
                        "(left out: {} in this frame)",
                        excerpt::human_size(elided as u64)
                    )),
                );
            }
            for inner in object.values_mut() {
                mark_left_out(inner, elided);
            }
        }
        Value::Array(items) => {
            for inner in items {
                mark_left_out(inner, elided);
            }
        }
        _ => {}
    }
}

impl App {
    /// True while the event inspector is open.
    pub fn inspecting(&self) -> bool {
        matches!(self.view.popup, Some(Popup::Inspector(_)))
    }

    /// The inspector's rows for its filter (none while it is closed).
    pub fn inspector_rows(&self) -> Vec<WireRow> {
        match self.view.popup {
            Some(Popup::Inspector(inspector)) => wire_rows(&self.wire, inspector.filter),
            _ => Vec::new(),
        }
    }

    /// Which of `rows` is selected: the one holding the selected frame, or the newest.
    pub fn inspector_selected(&self, rows: &[WireRow]) -> Option<usize> {
        let Some(Popup::Inspector(inspector)) = self.view.popup else {
            return None;
        };
        let newest = rows.len().checked_sub(1)?;
        Some(match inspector.selected {
            None => newest,
            // The row whose frames hold it: the last one starting at or before it (a frame
            // dropped from the log falls back to the oldest row).
            Some(number) => rows.iter().rposition(|r| r.number <= number).unwrap_or(0),
        })
    }

    /// Opens the inspector, or closes it when it is open.
    pub(super) fn toggle_inspector(&mut self) {
        self.view.popup = match self.view.popup {
            Some(Popup::Inspector(_)) => None,
            _ => Some(Popup::Inspector(Inspector::default())),
        };
    }

    fn inspector_mut(&mut self) -> Option<&mut Inspector> {
        match &mut self.view.popup {
            Some(Popup::Inspector(inspector)) => Some(inspector),
            _ => None,
        }
    }

    /// Moves the selection by `by` rows; reaching the newest follows it again.
    pub(super) fn select_frame(&mut self, by: isize) {
        let rows = self.inspector_rows();
        let Some(current) = self.inspector_selected(&rows) else {
            return;
        };
        let next = current.saturating_add_signed(by).min(rows.len() - 1);
        let number = (next + 1 < rows.len()).then(|| rows[next].number);
        if let Some(inspector) = self.inspector_mut() {
            inspector.selected = number;
            inspector.scroll = 0;
        }
    }

    pub(super) fn first_frame(&mut self) {
        let rows = self.inspector_rows();
        let first = rows.first().map(|r| r.number);
        let follow = rows.len() <= 1;
        if let Some(inspector) = self.inspector_mut() {
            inspector.selected = if follow { None } else { first };
            inspector.scroll = 0;
        }
    }

    pub(super) fn follow_frames(&mut self) {
        if let Some(inspector) = self.inspector_mut() {
            inspector.selected = None;
            inspector.scroll = 0;
        }
    }

    pub(super) fn next_wire_filter(&mut self) {
        // The selection stays on its frame when the new filter lists it; else the newest.
        let keep = self.inspector_mut().and_then(|i| {
            i.filter = i.filter.next();
            i.selected
        });
        let rows = self.inspector_rows();
        let listed = keep.is_some_and(|n| rows.iter().any(|r| r.number == n));
        if let Some(inspector) = self.inspector_mut() {
            if !listed {
                inspector.selected = None;
                inspector.scroll = 0;
            }
            // The JSON shows only beside a listed frame: with none, nothing is open that the
            // next Enter would close.
            if rows.is_empty() {
                inspector.expanded = false;
            }
        }
    }

    /// Enter: the selected frame's JSON shows, or closes; with no frame listed, nothing.
    pub(super) fn toggle_frame_json(&mut self) {
        let listed = !self.inspector_rows().is_empty();
        if let Some(inspector) = self.inspector_mut() {
            inspector.expanded = listed && !inspector.expanded;
            inspector.scroll = 0;
        }
    }

    pub(super) fn scroll_frame_json(&mut self, by: i32) {
        if let Some(inspector) = self.inspector_mut() {
            if !inspector.expanded {
                return self.select_frame(by as isize);
            }
            let scroll = (i32::from(inspector.scroll) + by).clamp(0, i32::from(u16::MAX));
            inspector.scroll = scroll as u16;
        }
    }

    /// The selected row and its first frame's JSON.
    pub fn selected_frame_json(&self) -> Option<(WireRow, String)> {
        let rows = self.inspector_rows();
        let at = self.inspector_selected(&rows)?;
        let row = rows.into_iter().nth(at)?;
        let frame = self.wire.frames().get(row.first)?;
        let json = frame_json(frame);
        Some((row, json))
    }

    /// `y` in the inspector: the selected frame's JSON to the clipboard.
    pub(super) fn copy_frame(&mut self) -> Vec<Effect> {
        let Some((row, json)) = self.selected_frame_json() else {
            return Vec::new();
        };
        self.copy(json, &format!("the {} frame's JSON", row.kind))
    }

    /// `y` in the tool log: the selected call (or the newest) and the response sent for it,
    /// as the Live API spells them.
    pub(super) fn copy_selected_call(&mut self) -> Vec<Effect> {
        let index = self
            .view
            .tool_selected
            .unwrap_or(self.tool_calls.len().saturating_sub(1));
        let Some(call) = self.tool_calls.get(index) else {
            return Vec::new();
        };
        let mut json = serde_json::json!({
            "functionCall": {"id": call.id, "name": call.name, "args": call.args},
            "functionResponse": call.response,
        });
        if let Some(sent) = &call.edited_from {
            json["modelArgs"] = sent.clone();
        }
        let text = serde_json::to_string_pretty(&json).unwrap_or_default();
        let text = redact::scrub(&text).into_owned();
        let what = format!("the call of {} and its response", call.name);
        self.copy(text, &what)
    }

    /// Hands `text` to the presenter to copy, and says so.
    pub(super) fn copy(&mut self, text: String, what: &str) -> Vec<Effect> {
        let size = excerpt::human_size(text.len() as u64);
        let text = excerpt::into_bounded(text, COPY_MAX);
        let what = one_line(what);
        self.notice(
            NoticeLevel::Info,
            format!("Copied {what} ({size}) to the clipboard."),
        );
        vec![Effect::Copy(text)]
    }
}
