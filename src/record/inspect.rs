//! Reading recordings for people: the `inspect` summary (what the app applied, plus figures
//! from the wire tap; each turn's timing with the live session's `TurnClock`, interruptions
//! and cost from the applied messages fed into an `App`), its JSON, the Markdown transcript (the applied messages fed into an `App`, so it
//! shows exactly what the app showed) and the `sessions` list.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::format::convert::wire_frame;
use super::replay::initial_app;
use super::{LOG_FILE, MIC_WAV, MODEL_WAV, Record, Recording, wav_contents};
use crate::app::turn_timing::{Stamp, TurnClock, TurnTiming, millis};
use crate::app::{
    ECHO_INTERRUPTION, Entry, ModelTurnStatus, Msg, ToolState, UserInput, WireBody, WireFrame,
};
use crate::audio::AudioEvent;
use crate::pricing::{PRICES_READ_ON, TokenTally, cost_words, tokens_words};
use crate::tools::{ToolEvent, ToolStatus};
use livetalk_live::ServerEvent;
use livetalk_live::excerpt;
use livetalk_live::reading::{Grounding, Source};
use livetalk_live::session::SessionChange;

/// What `inspect` reports, computed from the log alone.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    pub duration_secs: f64,
    pub user_turns: usize,
    pub model_turns: usize,
    /// Each turn's figures, as a live session measures them (`app::turn_timing`).
    pub turns: Vec<TurnTiming>,
    /// (name, outcome, duration ms, seconds from the call to its response being sent).
    pub tool_calls: Vec<ToolLine>,
    pub tools_cancelled: usize,
    /// The server's `interrupted`, and the user's own barge-ins (Ctrl-B).
    pub interruptions: usize,
    /// Interruptions the user made: Ctrl-B, typing over Gemini, speaking over it.
    pub barge_ins: u32,
    /// Interruptions the self-interruption detector blamed on Gemini's own voice.
    pub echo_interruptions: u32,
    /// Connection attempts, failed ones included.
    pub connections: usize,
    /// Times the conversation moved to a new connection.
    pub reconnects: usize,
    /// Calls flagged as running long.
    pub slow_calls: usize,
    pub closes: Vec<String>,
    pub skipped_frames: usize,
    pub errors: Vec<String>,
    /// What the recording's owner warned of (format 4's `warning` lines).
    pub warnings: Vec<String>,
    /// The session's tokens: the service's total in parts by modality, as the live session
    /// counted them.
    pub tally: TokenTally,
    /// What they cost, as the live session priced them (`None`: not priced).
    pub cost: Option<f64>,
    pub offline: bool,
    pub frames_sent: usize,
    pub frames_received: usize,
    /// Pictures the model was shown (a shared screen's frames, `/image`): the video frames
    /// among the frames sent.
    pub pictures_sent: usize,
    /// Each grounded reply's searches and sources (Google Search), in order.
    pub grounded: Vec<Grounding>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolLine {
    pub name: String,
    pub args: Value,
    pub outcome: String,
    pub duration_ms: f64,
    pub call_to_response_secs: Option<f64>,
}

/// A recording's time (seconds from its start) as a stamp; one that is not a time is 0.
fn stamp(t: f64) -> Stamp {
    Duration::try_from_secs_f64(t).unwrap_or_default()
}

/// Each turn's figures, from the frames a recording's wire lines hold and the speaker's news
/// the app applied (`figures`: the underrun totals applied, in time order), fed to the
/// `TurnClock` a live session feeds. One line is looked at by `line` as the lines go by.
struct TurnTimings {
    clock: TurnClock,
    figures: std::iter::Peekable<std::vec::IntoIter<(f64, u64)>>,
}

impl TurnTimings {
    /// One line at `t`, with the frame the converter read from it (the clock fed as a live
    /// session feeds it).
    fn line(&mut self, t: f64, frame: Option<&WireFrame>) {
        while let Some((_, total)) = self.figures.next_if(|(at, _)| *at <= t) {
            self.clock.underruns(total);
        }
        let Some(frame) = frame else {
            return;
        };
        match &frame.body {
            WireBody::Sent(message) => self.clock.sent(message, stamp(t)),
            WireBody::Received { .. } => {
                if let Some(reading) = frame.reading() {
                    self.clock.received(reading, stamp(t));
                }
            }
            WireBody::Unreadable(_) => {}
        }
    }

    fn turns(mut self) -> Vec<TurnTiming> {
        for (_, total) in self.figures {
            self.clock.underruns(total);
        }
        self.clock.turns().copied().collect()
    }
}

impl Summary {
    pub fn of(recording: &Recording) -> Summary {
        let mut s = Summary {
            duration_secs: recording.duration_secs(),
            ..Summary::default()
        };
        // One pass over what the app applied, fed into an app as replay shows it, and one over
        // the lines: nothing of the recording is held but what the summary says.
        let steps = recording.steps();
        let mut app = initial_app(recording, None, steps.total());
        let mut clock = TurnClock::new(usize::MAX);
        // Underruns are a running count: fed in time order with the frames.
        let mut figures: Vec<(f64, u64)> = Vec::new();
        let mut tool_ids = Vec::new();
        for applied in steps {
            match &applied.msg {
                Msg::Audio(AudioEvent::Audible(true)) => clock.audible(stamp(applied.t)),
                Msg::Audio(AudioEvent::Figures(f)) => figures.push((applied.t, f.underruns)),
                _ => {}
            }
            let _ = app.update(applied.msg.clone());
            // What the app applied: turns, tools, interruptions, reconnects, the run's errors.
            match applied.msg {
                Msg::UserText(_) => s.user_turns += 1,
                Msg::BargeIn => s.interruptions += 1,
                Msg::Server(ServerEvent::Interrupted) => s.interruptions += 1,
                Msg::ConnectFailed(message) => s.errors.push(format!("connect failed: {message}")),
                Msg::GaveUp(message) => s.errors.push(message),
                Msg::SessionChange(SessionChange::Reconnected { .. }) => s.reconnects += 1,
                Msg::Tool(ToolEvent::Slow(_)) => s.slow_calls += 1,
                Msg::Tool(ToolEvent::Cancelled { .. }) => s.tools_cancelled += 1,
                Msg::Tool(ToolEvent::Finished(outcome)) => {
                    let outcome_label = match &outcome.status {
                        ToolStatus::Ok => "ok",
                        ToolStatus::Error(_) => "error",
                        ToolStatus::TimedOut => "timed_out",
                        ToolStatus::Panicked(_) => "panicked",
                        ToolStatus::Refused(_) => "refused",
                        ToolStatus::ByHand => "by_hand",
                    };
                    tool_ids.push(outcome.id.clone());
                    s.tool_calls.push(ToolLine {
                        name: outcome.name,
                        args: outcome.args,
                        outcome: outcome_label.to_owned(),
                        duration_ms: outcome.duration.as_secs_f64() * 1000.0,
                        call_to_response_secs: None,
                    });
                }
                _ => {}
            }
        }
        s.barge_ins = app.user_barge_ins();
        s.echo_interruptions = app.echo_interruptions();
        s.tally = *app.tokens();
        s.grounded = app
            .transcript()
            .iter()
            .filter_map(|entry| match entry {
                Entry::Model { grounding, .. } if !grounding.is_empty() => Some(grounding.clone()),
                _ => None,
            })
            .collect();
        s.offline = app.offline();
        s.cost = app.cost();
        drop(app);
        let mut timings = TurnTimings {
            clock,
            figures: figures.into_iter().peekable(),
        };
        let base = std::time::Instant::now();
        let mut calls_at: HashMap<String, f64> = HashMap::new();
        let mut answered_at: HashMap<String, f64> = HashMap::new();
        for line in recording.lines() {
            // The frame as the converter reads it for replay.
            let frame = wire_frame(&line, base);
            timings.line(line.t, frame.as_ref());
            match &line.record {
                Record::Connect { .. } => s.connections += 1,
                Record::Send { message } => {
                    s.frames_sent += 1;
                    if message.pointer("/realtimeInput/video").is_some() {
                        s.pictures_sent += 1;
                    }
                    for response in message
                        .pointer("/toolResponse/functionResponses")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        if let Some(id) = response.get("id").and_then(Value::as_str) {
                            answered_at.entry(id.to_owned()).or_insert(line.t);
                        }
                    }
                }
                Record::Recv { skipped, .. } => {
                    s.frames_received += 1;
                    if skipped.is_some() {
                        s.skipped_frames += 1;
                    }
                    // What the frame means, as the converter read it above.
                    let Some(reading) = frame.as_ref().and_then(WireFrame::reading) else {
                        continue;
                    };
                    if reading.turn().turn_complete {
                        s.model_turns += 1;
                    }
                    for call in reading.calls() {
                        if let Some(id) = &call.id {
                            calls_at.entry(id.clone()).or_insert(line.t);
                        }
                    }
                }
                Record::Close {
                    code,
                    message,
                    initiated_by_client,
                    ..
                } => {
                    let code = code.map_or("none".to_owned(), |c| c.to_string());
                    let by = if *initiated_by_client {
                        "by livetalk"
                    } else {
                        "by the server or network"
                    };
                    s.closes.push(format!("code {code}, {by}: {message}"));
                }
                Record::Warning { message } => s.warnings.push(message.clone()),
                // App-level lines are read through `applied` above.
                _ => {}
            }
        }
        s.turns = timings.turns();
        // Format 1 has no link lines: every connection after the first was a reconnect (a
        // failed attempt counts too, which is why later formats record them).
        if recording.meta.format < 2 {
            s.reconnects = s.connections.saturating_sub(1);
        }
        // A response is sent after the call's result is applied, so pair them up at the end.
        for (tool, id) in s.tool_calls.iter_mut().zip(&tool_ids) {
            if let Some(id) = id
                && let (Some(sent), Some(called)) = (answered_at.get(id), calls_at.get(id))
            {
                tool.call_to_response_secs = Some(sent - called);
            }
        }
        s
    }
}

fn wav_line(dir: &Path, name: &str) -> String {
    match wav_contents(&dir.join(name)) {
        Ok(Some((rate, samples))) => format!(
            "{name}: {:.2} s ({} samples at {} Hz)",
            samples.len() as f64 / f64::from(rate.max(1)),
            samples.len(),
            rate
        ),
        Ok(None) => format!("{name}: none"),
        Err(why) => format!("{name}: damaged: {why}"),
    }
}

/// A recorded start time as a person reads it (`2026-11-25 16:48:27 UTC`); a time that does
/// not parse is shown as it was recorded.
fn readable_time(recorded: &str) -> String {
    match recorded.parse::<jiff::Zoned>() {
        Ok(time) => time.strftime("%Y-%m-%d %H:%M:%S %Z").to_string(),
        Err(_) => recorded.to_owned(),
    }
}

/// A recorded start time as `inspect --json` gives it: RFC 3339 to the second with the UTC
/// offset (`2026-11-25T16:48:27+00:00`), what `date -Iseconds` prints and every JSON reader
/// takes; the recording keeps the nanoseconds and the zone's name. A time that does not
/// parse is given as it was recorded.
fn json_time(recorded: &str) -> String {
    match recorded.parse::<jiff::Zoned>() {
        Ok(time) => time.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string(),
        Err(_) => recorded.to_owned(),
    }
}

/// The `inspect` report.
pub fn report(recording: &Recording) -> String {
    let s = Summary::of(recording);
    let meta = &recording.meta;
    let mut out = String::new();
    let _ = writeln!(out, "Recording: {}", recording.dir.display());
    let _ = writeln!(out, "Started: {}", readable_time(&meta.started_at));
    let _ = writeln!(out, "Duration: {:.1} s", s.duration_secs);
    let _ = writeln!(out, "Model: {} (voice {})", meta.model, meta.voice);
    let _ = writeln!(out, "Endpoint: {}", meta.endpoint_host);
    let _ = writeln!(out, "livetalk: {}", meta.livetalk_version);
    let _ = writeln!(
        out,
        "Connections: {} (reconnects: {})",
        s.connections, s.reconnects
    );
    let _ = writeln!(
        out,
        "Frames: {} sent, {} received ({} skipped)",
        s.frames_sent, s.frames_received, s.skipped_frames
    );
    if s.pictures_sent > 0 {
        let _ = writeln!(
            out,
            "Pictures shown: {} (a shared screen's frames and /image)",
            s.pictures_sent
        );
    }
    let _ = writeln!(out, "User turns: {}", s.user_turns);
    let _ = writeln!(out, "Model turns: {}", s.model_turns);
    for (i, turn) in s.turns.iter().enumerate() {
        let _ = writeln!(out, "  turn {}: {}", i + 1, turn_line(turn));
    }
    let slow = if s.slow_calls > 0 {
        format!(", {} flagged slow", s.slow_calls)
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "Tool calls: {} ({} cancelled{slow})",
        s.tool_calls.len(),
        s.tools_cancelled
    );
    for tool in &s.tool_calls {
        let response = tool
            .call_to_response_secs
            .map(|r| format!(", call → response {:.0} ms", r * 1e3))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  {} {} -> {} in {:.1} ms{response}",
            tool.name, tool.args, tool.outcome, tool.duration_ms
        );
    }
    if !s.grounded.is_empty() {
        let searches: usize = s.grounded.iter().map(|g| g.queries.len()).sum();
        let sources: usize = s
            .grounded
            .iter()
            .map(|g| g.sources.len() + g.more_sources)
            .sum();
        let _ = writeln!(
            out,
            "Google Search: {} grounded {}, {searches} {}, {sources} {}",
            s.grounded.len(),
            plural(s.grounded.len(), "reply", "replies"),
            plural(searches, "search", "searches"),
            plural(sources, "source", "sources"),
        );
        for grounding in &s.grounded {
            if !grounding.queries.is_empty() {
                let _ = writeln!(out, "  searched {}", grounding.queries_line());
            }
            for source in &grounding.sources {
                let _ = writeln!(out, "    {}", source.as_line());
            }
            if let Some(more) = grounding.more_line() {
                let _ = writeln!(out, "    {more}");
            }
        }
    }
    let _ = writeln!(
        out,
        "Interruptions: {} ({} by the user, {} blamed on the echo)",
        s.interruptions, s.barge_ins, s.echo_interruptions
    );
    let _ = writeln!(out, "Closes: {}", s.closes.len());
    for close in &s.closes {
        let _ = writeln!(out, "  {close}");
    }
    if !s.errors.is_empty() {
        let _ = writeln!(out, "Errors: {}", s.errors.len());
        for error in &s.errors {
            let _ = writeln!(out, "  {error}");
        }
    }
    if !s.warnings.is_empty() {
        let _ = writeln!(out, "Warnings: {}", s.warnings.len());
        for warning in &s.warnings {
            let _ = writeln!(out, "  {warning}");
        }
    }
    let _ = writeln!(
        out,
        "Tokens: {} ({})",
        tokens_words(s.tally.total()),
        s.tally.parts_words()
    );
    let _ = writeln!(out, "Cost: {}", cost_words(s.cost));
    for name in [MODEL_WAV, MIC_WAV] {
        let _ = writeln!(out, "{}", wav_line(&recording.dir, name));
    }
    out
}

/// One turn's figures in a line: how it ended, then each figure from that end.
fn turn_line(turn: &TurnTiming) -> String {
    let ms = |d: Option<Duration>| millis(d).map_or("—".to_owned(), |ms| format!("{ms} ms"));
    format!(
        "{} → first reply {}, first audio {}, first audible {}, {} underruns",
        match turn.ended_by {
            crate::app::turn_timing::TurnEnd::Typed => "typed",
            crate::app::turn_timing::TurnEnd::ActivityEnd => "activityEnd",
            crate::app::turn_timing::TurnEnd::VoiceEnd => "voice end",
        },
        ms(turn.first_message),
        ms(turn.first_audio),
        ms(turn.first_audible),
        turn.underruns
    )
}

/// Tokens by modality as JSON, for `inspect --json` and the headless `cost` line.
pub fn tally_json(tally: &TokenTally) -> Value {
    json!({
        "text_in": tally.text_in,
        "audio_in": tally.audio_in,
        "video_in": tally.video_in,
        "text_out": tally.text_out,
        "audio_out": tally.audio_out,
        "total": tally.total(),
    })
}

/// A grounded reply's searches and sources as fields of a JSON object (the headless `model`
/// event, `inspect --json`'s replies): `searches`, and `sources` with each title and link as
/// sent (a title in one line), the site where the service named it; `more_sources` counts
/// those past the ones kept.
pub fn grounding_json(grounding: &Grounding, object: &mut Value) {
    let sources: Vec<Value> = grounding
        .sources
        .iter()
        .map(|source| {
            let mut entry = json!({"title": source.title, "uri": source.uri});
            if let Some(domain) = &source.domain {
                entry["domain"] = json!(domain);
            }
            entry
        })
        .collect();
    object["searches"] = json!(grounding.queries);
    object["sources"] = Value::Array(sources);
    if grounding.more_sources > 0 {
        object["more_sources"] = json!(grounding.more_sources);
    }
}

/// `inspect --json`: the report's figures as one object.
pub fn json(recording: &Recording) -> Value {
    let s = Summary::of(recording);
    let meta = &recording.meta;
    let turns: Vec<Value> = s
        .turns
        .iter()
        .map(|turn| {
            json!({
                "ended_by": turn.ended_by.word(),
                "ended_at_ms": millis(Some(turn.ended_at)),
                "first_message_ms": millis(turn.first_message),
                "first_audio_ms": millis(turn.first_audio),
                "first_audible_ms": millis(turn.first_audible),
                "underruns": turn.underruns,
            })
        })
        .collect();
    json!({
        "recording": recording.dir.display().to_string(),
        "started_at": json_time(&meta.started_at),
        "duration_secs": s.duration_secs,
        "model": meta.model,
        "voice": meta.voice,
        "endpoint_host": meta.endpoint_host,
        "connections": s.connections,
        "reconnects": s.reconnects,
        "frames_sent": s.frames_sent,
        "frames_received": s.frames_received,
        "pictures_sent": s.pictures_sent,
        "skipped_frames": s.skipped_frames,
        "user_turns": s.user_turns,
        "model_turns": s.model_turns,
        "turns": turns,
        "tool_calls": s.tool_calls.len(),
        "tools_cancelled": s.tools_cancelled,
        "interruptions": {
            "total": s.interruptions,
            "by_user": s.barge_ins,
            "echo": s.echo_interruptions,
        },
        "grounded_replies": s
            .grounded
            .iter()
            .map(|grounding| {
                let mut reply = json!({});
                grounding_json(grounding, &mut reply);
                reply
            })
            .collect::<Vec<_>>(),
        "tokens": tally_json(&s.tally),
        "cost_usd": s.cost,
        "offline": s.offline,
        "prices_read_on": PRICES_READ_ON,
        "errors": s.errors,
        "warnings": s.warnings,
    })
}

/// A readable Markdown transcript, tool calls with arguments and results included (they are
/// part of the history). Built by feeding the applied messages to the app.
pub fn markdown(recording: &Recording) -> String {
    let steps = recording.steps();
    let mut app = initial_app(recording, None, steps.total());
    let mut errors = Vec::new();
    for applied in steps {
        if let Msg::GaveUp(message) = &applied.msg {
            errors.push(message.clone());
        }
        let _ = app.update(applied.msg);
    }
    let meta = &recording.meta;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# livetalk session {}\n",
        readable_time(&meta.started_at)
    );
    let _ = writeln!(
        out,
        "- Model: `{}` (voice {})\n- Endpoint: {}\n- Duration: {:.1} s\n",
        meta.model,
        meta.voice,
        meta.endpoint_host,
        recording.duration_secs()
    );
    for entry in app.transcript() {
        match entry {
            Entry::User { text, via } => {
                let how = if *via == UserInput::Speech {
                    " (spoken)"
                } else {
                    ""
                };
                let _ = writeln!(out, "**You{how}:** {text}\n");
            }
            Entry::Model {
                text_parts,
                transcript,
                status,
                echo_suspected,
                grounding,
            } => {
                let text = Entry::model_text(text_parts, transcript);
                let shown = if text.is_empty() {
                    "_(audio without transcription)_".to_owned()
                } else {
                    text
                };
                let mark = match status {
                    ModelTurnStatus::Complete => String::new(),
                    ModelTurnStatus::Interrupted if *echo_suspected => {
                        format!(" _[interrupted — {ECHO_INTERRUPTION}]_")
                    }
                    ModelTurnStatus::Interrupted => " _[interrupted]_".to_owned(),
                    ModelTurnStatus::Streaming => {
                        " _[cut off: the recording ends here]_".to_owned()
                    }
                };
                let _ = writeln!(out, "**Gemini:** {shown}{mark}\n");
                if !grounding.queries.is_empty() {
                    let _ = writeln!(out, "Searched: {}\n", grounding.queries_line());
                }
                if !grounding.sources.is_empty() {
                    let _ = writeln!(out, "Sources:\n");
                    for source in &grounding.sources {
                        let _ = writeln!(out, "- {}", markdown_source(source));
                    }
                    if let Some(more) = grounding.more_line() {
                        let _ = writeln!(out, "- {more}");
                    }
                    out.push('\n');
                }
            }
            Entry::Change(text) => {
                let _ = writeln!(out, "_{text}._\n");
            }
            Entry::Image {
                name,
                file_bytes,
                width,
                height,
            } => {
                let shown = crate::app::image_label(name, *file_bytes, *width, *height);
                let _ = writeln!(out, "**You (image):** {shown}\n");
            }
            Entry::Tool(index) => {
                let Some(call) = app.tool_calls().get(*index) else {
                    continue;
                };
                let duration = call
                    .duration
                    .map(|d| format!(" in {:.1} ms", d.as_secs_f64() * 1e3))
                    .unwrap_or_default();
                let state = match &call.state {
                    ToolState::Error(message) => format!("error: {message}"),
                    other => other.label().to_owned(),
                };
                let _ = writeln!(out, "**Tool call** `{}` → {state}{duration}\n", call.name);
                let args = serde_json::to_string_pretty(&call.args).unwrap_or_default();
                let _ = writeln!(out, "Arguments:\n\n```json\n{args}\n```\n");
                if let Some(response) = &call.response {
                    let result =
                        serde_json::to_string_pretty(&response.response).unwrap_or_default();
                    let _ = writeln!(out, "Result:\n\n```json\n{result}\n```\n");
                }
            }
        }
    }
    for notice in app.notices() {
        let _ = writeln!(out, "> {}\n", notice.text);
    }
    for error in errors {
        let _ = writeln!(out, "> error: {error}\n");
    }
    out
}

/// A source as a Markdown list item: `[title](<link>)`, the title's brackets escaped; a link
/// that is not a plain web link is shown as code, not made a link.
fn markdown_source(source: &Source) -> String {
    let name = source.name().replace('[', "\\[").replace(']', "\\]");
    match (source.link(), source.uri.as_deref()) {
        (Some(link), _) => format!("[{name}](<{link}>)"),
        (None, Some(uri)) => format!(
            "{name} `{}`",
            excerpt::one_line(uri, excerpt::LINK).replace('`', "'")
        ),
        (None, None) => name,
    }
}

/// One row of `livetalk sessions`.
#[derive(Debug, Clone)]
pub struct SessionRow {
    pub started_at: String,
    pub dir: std::path::PathBuf,
    pub duration_secs: f64,
    pub turns: usize,
    pub size_bytes: u64,
}

/// Recordings directly under `root`, newest first. Folders that are not recordings are left
/// out; unreadable lines are tolerated as everywhere else.
pub fn sessions(root: &Path) -> Vec<SessionRow> {
    let mut rows: Vec<SessionRow> = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join(LOG_FILE).is_file())
        .filter_map(|dir| Recording::load(&dir).ok())
        .map(|r| SessionRow {
            started_at: r.meta.started_at.clone(),
            duration_secs: r.duration_secs(),
            turns: r.user_turns(),
            size_bytes: r.size_bytes,
            dir: r.dir,
        })
        .collect();
    // RFC 3339 stamps with offsets compare correctly once parsed; fall back to text order.
    rows.sort_by(|a, b| {
        let key = |r: &SessionRow| {
            r.started_at
                .parse::<jiff::Zoned>()
                .ok()
                .map(|z| z.timestamp())
        };
        key(b)
            .cmp(&key(a))
            .then_with(|| b.started_at.cmp(&a.started_at))
    });
    rows
}

/// The `sessions` table.
pub fn sessions_table(root: &Path) -> String {
    let rows = sessions(root);
    if rows.is_empty() {
        return format!(
            "No recorded sessions in {} (record one with --record).\n",
            root.display()
        );
    }
    let mut out = format!(
        "{:<25} {:>9} {:>6} {:>10}  FOLDER\n",
        "DATE", "DURATION", "TURNS", "SIZE"
    );
    for row in rows {
        let date = row
            .started_at
            .parse::<jiff::Zoned>()
            .map(|z| z.strftime("%Y-%m-%d %H:%M:%S").to_string())
            .unwrap_or(row.started_at);
        let _ = writeln!(
            out,
            "{:<25} {:>8.1}s {:>6} {:>10}  {}",
            date,
            row.duration_secs,
            row.turns,
            livetalk_live::excerpt::human_size(row.size_bytes),
            row.dir.display()
        );
    }
    out
}

fn plural<'w>(count: usize, one: &'w str, many: &'w str) -> &'w str {
    if count == 1 { one } else { many }
}

#[cfg(test)]
mod wav_tests {
    use super::*;

    #[test]
    fn a_damaged_wav_is_called_damaged_not_missing() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(wav_line(dir.path(), MODEL_WAV), "model.wav: none");
        std::fs::write(dir.path().join(MODEL_WAV), b"RIFF\x10\0\0\0WAVEjunk").unwrap();
        let line = wav_line(dir.path(), MODEL_WAV);
        assert!(line.starts_with("model.wav: damaged: "), "{line}");
        std::fs::create_dir(dir.path().join(MIC_WAV)).unwrap();
        let line = wav_line(dir.path(), MIC_WAV);
        assert!(line.starts_with("mic.wav: damaged: "), "{line}");
    }
}

#[cfg(test)]
mod time_tests {
    use super::readable_time;

    #[test]
    fn the_start_reads_as_a_date_and_a_time() {
        assert_eq!(
            readable_time("2026-11-25T16:48:27.032496545+00:00[Etc/UTC]"),
            "2026-11-25 16:48:27 UTC"
        );
        assert_eq!(readable_time("yesterday"), "yesterday");
    }

    #[test]
    fn json_gives_the_start_to_the_second_with_its_offset() {
        assert_eq!(
            super::json_time("2026-11-25T16:48:27.032496545+00:00[Etc/UTC]"),
            "2026-11-25T16:48:27+00:00"
        );
        assert_eq!(
            super::json_time("2026-11-26T01:02:03.456+01:00[Europe/Paris]"),
            "2026-11-26T01:02:03+01:00"
        );
        assert_eq!(super::json_time("yesterday"), "yesterday");
    }
}
