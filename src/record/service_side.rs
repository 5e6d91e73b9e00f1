//! A recording's service side, for `livetalk mock --replay`: its wire tap (every format has
//! one) read into the connections, turns and frames a `livetalk_mock::RecordedSession` serves
//! to whichever app connects.
//!
//! The lines are taken in the order they went on the wire (by `t`: a `recv` line can be
//! written after a later `send`). A `connect` line or a `setup` sent begins a connection;
//! what the service sent before the app's first turn answers the setup (a frame outside a
//! connection, after its close, is left out); each turn the app
//! began (a typed turn or `realtimeInput.text`, tool answers, `activityEnd`; in formats 1 and
//! 2, their `user_text` and `tool_result` lines for the first two) takes the frames
//! the service sent until the next; speech the service's voice detection ended shows only in
//! its answer, so the first frame of an answer after mic audio, once the previous reply was
//! complete, begins a spoken turn. A `close` (or format 4's `ended`) is how it ended.

use std::path::Path;
use std::time::Duration;

use anyhow::bail;
use livetalk_live::excerpt::human_size;
use livetalk_live::wire::ClientMessage;
use livetalk_mock::recorded::{Connection, Ending, Frame, RecordedSession, Turn, TurnInput};
use serde_json::Value;

use super::format::recv::inline_audio;
use super::{AudioFiles, MODEL_WAV, Record, Recording};

/// The most a served recording holds in frames (and its `model.wav` in bytes): about an hour
/// of the model's speech, base64 in JSON. A recording past it is refused, not half-served.
pub const MAX_SERVED_BYTES: u64 = 256 << 20;

/// What the wire tap said, in the order it went.
enum Wire {
    Send(Value),
    Recv(Value),
    /// A typed turn or tool answers from a format 1 or 2 app-level line.
    AppTurn(TurnInput),
    Connect,
    Closed {
        code: Option<u16>,
        reason: String,
        by_app: bool,
    },
}

/// `recording`'s service side, ready to serve; warnings say what could not be used.
pub fn service_side(recording: &Recording) -> anyhow::Result<(RecordedSession, Vec<String>)> {
    let model_wav = recording.dir.join(MODEL_WAV);
    if let Ok(meta) = std::fs::metadata(&model_wav)
        && meta.len() > MAX_SERVED_BYTES
    {
        bail!(
            "{} holds {} of the model's audio, more than the {} a replay serves",
            model_wav.display(),
            human_size(meta.len()),
            human_size(MAX_SERVED_BYTES)
        );
    }
    // Formats 1 and 2 said the app's typed turns and tool answers in lines of their own (and
    // did not always record the messages they were sent as); later formats in what was sent.
    let app_lines = recording.meta.format < 3;
    let mut wire = Vec::new();
    for (seq, line) in recording.lines().enumerate() {
        let item = match line.record {
            Record::Send { message } => Wire::Send(message),
            Record::Recv {
                message: Some(message),
                ..
            } => Wire::Recv(message),
            Record::Connect { .. } => Wire::Connect,
            Record::Close {
                code,
                reason,
                initiated_by_client,
                ..
            }
            | Record::Ended {
                code,
                reason,
                initiated_by_client,
                ..
            } => Wire::Closed {
                code,
                reason,
                by_app: initiated_by_client,
            },
            Record::UserText { text, .. } => Wire::AppTurn(TurnInput::Text(text)),
            Record::ToolResult { response, .. } => {
                Wire::AppTurn(TurnInput::ToolResponse(vec![response]))
            }
            _ => continue,
        };
        wire.push((line.t, seq, item));
    }
    // The order on the wire; lines of one time keep the file's order.
    wire.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut building = Building::new(&recording.dir);
    for (t, _, item) in wire {
        building.take(t, item, app_lines)?;
    }
    let session = building.finish();
    if session.connections.is_empty() {
        bail!(
            "{} holds no connection to replay: no frame the service sent was recorded",
            recording.dir.display()
        );
    }
    let mut warnings = recording.warnings.clone();
    warnings.extend(building.audio.warnings(&recording.dir));
    Ok((session, warnings))
}

/// The turn a recorded client message began, if it began one (audio is in `mic.wav`, so a
/// line of it does not decode as a client message and begins none).
fn client_turn(message: &Value) -> Option<TurnInput> {
    let message = serde_json::from_value::<ClientMessage>(message.clone()).ok()?;
    TurnInput::of(&message)
}

/// Whether a recorded client message carried mic audio.
fn sends_audio(message: &Value) -> bool {
    let input = message.get("realtimeInput");
    input.and_then(|i| i.get("audio")).is_some()
        || input
            .and_then(|i| i.get("mediaChunks"))
            .and_then(Value::as_array)
            .is_some_and(|chunks| !chunks.is_empty())
}

/// Whether a server message is part of an answer (what begins a spoken turn), not the
/// session's bookkeeping (a handle, a goAway, usage alone).
fn answers(message: &Value) -> bool {
    message
        .get("serverContent")
        .and_then(Value::as_object)
        .is_some_and(|content| !content.is_empty())
        || message.get("toolCall").is_some()
        || message.get("voiceActivity").is_some()
}

/// Whether a server message completes the model's turn.
fn completes_turn(message: &Value) -> bool {
    message.pointer("/serverContent/turnComplete") == Some(&Value::Bool(true))
}

/// The session as it is read, one wire item at a time.
struct Building {
    audio: AudioFiles,
    done: Vec<Connection>,
    current: Option<Current>,
    bytes: u64,
}

/// The connection being read.
struct Current {
    connection: Connection,
    /// A setup was sent on it.
    set_up: bool,
    /// When its last turn (or its setup) began.
    since: f64,
    /// When it was last heard of.
    last: f64,
    /// Mic audio was sent since the last turn began.
    speech: bool,
    /// The model's reply to the last turn is not complete.
    replying: bool,
    /// Frames were recorded on it.
    heard: bool,
}

impl Current {
    fn new(t: f64) -> Self {
        Current {
            connection: Connection::default(),
            set_up: false,
            since: t,
            last: t,
            speech: false,
            replying: false,
            heard: false,
        }
    }

    fn begin_turn(&mut self, t: f64, input: TurnInput) {
        self.connection.turns.push(Turn {
            input,
            frames: Vec::new(),
        });
        self.since = t;
        self.speech = false;
        self.replying = true;
    }
}

fn span(from: f64, to: f64) -> Duration {
    Duration::try_from_secs_f64(to - from).unwrap_or_default()
}

impl Building {
    fn new(dir: &Path) -> Self {
        Building {
            audio: AudioFiles::new(dir),
            done: Vec::new(),
            current: None,
            bytes: 0,
        }
    }

    fn take(&mut self, t: f64, item: Wire, app_lines: bool) -> anyhow::Result<()> {
        match item {
            Wire::Connect => {
                self.end_current(None);
                self.current = Some(Current::new(t));
            }
            Wire::Send(message) => {
                if let Some(setup) = message.get("setup") {
                    if self.current.as_ref().is_some_and(|c| c.set_up || c.heard) {
                        self.end_current(None);
                    }
                    let current = self.current.get_or_insert_with(|| Current::new(t));
                    current.set_up = true;
                    current.since = t;
                    current.connection.resumed_with = setup
                        .pointer("/sessionResumption/handle")
                        .and_then(Value::as_str)
                        .filter(|h| !h.is_empty())
                        .map(str::to_owned);
                    return Ok(());
                }
                let Some(current) = &mut self.current else {
                    return Ok(());
                };
                current.last = t;
                if sends_audio(&message) {
                    current.speech = true;
                } else if let Some(input) = client_turn(&message)
                    && (!app_lines || input == TurnInput::Spoken)
                {
                    current.begin_turn(t, input);
                }
            }
            Wire::AppTurn(input) => {
                let Some(current) = &mut self.current else {
                    return Ok(());
                };
                if !app_lines {
                    return Ok(());
                }
                current.last = t;
                // Answers to one tool call, one line each, went out together.
                if let (TurnInput::ToolResponse(more), Some(last)) =
                    (&input, current.connection.turns.last_mut())
                    && let TurnInput::ToolResponse(answers) = &mut last.input
                    && last.frames.is_empty()
                {
                    answers.extend(more.iter().cloned());
                    return Ok(());
                }
                current.begin_turn(t, input);
            }
            Wire::Recv(mut message) => {
                // A frame after its connection's close is no part of a connection.
                let Some(current) = &mut self.current else {
                    return Ok(());
                };
                current.last = t;
                current.heard = true;
                if current.speech && !current.replying && answers(&message) {
                    current.begin_turn(t, TurnInput::Spoken);
                }
                if completes_turn(&message) {
                    current.replying = false;
                }
                inline_audio(&mut message, &mut self.audio);
                let frame = Frame::new(span(current.since, t), &message);
                self.bytes += frame.payload.len() as u64;
                if self.bytes > MAX_SERVED_BYTES {
                    bail!(
                        "the recording's frames come to more than the {} a replay serves",
                        human_size(MAX_SERVED_BYTES)
                    );
                }
                match current.connection.turns.last_mut() {
                    Some(turn) => turn.frames.push(frame),
                    None => current.connection.opening.push(frame),
                }
            }
            Wire::Closed {
                code,
                reason,
                by_app,
            } => {
                let ending = match (by_app, code) {
                    (true, _) => Ending::ByApp,
                    (false, Some(code)) => Ending::Closed { code, reason },
                    (false, None) => Ending::Dropped,
                };
                if let Some(current) = &mut self.current {
                    current.last = t;
                }
                self.end_current(Some(ending));
            }
        }
        Ok(())
    }

    /// The connection being read ends (how, when known); one on which the service sent
    /// nothing (a failed attempt) is left out.
    fn end_current(&mut self, ending: Option<Ending>) {
        let Some(mut current) = self.current.take() else {
            return;
        };
        if !current.heard {
            return;
        }
        current.connection.ending = ending.unwrap_or_default();
        current.connection.ended_after = span(current.since, current.last);
        self.done.push(current.connection);
    }

    fn finish(&mut self) -> RecordedSession {
        self.end_current(None);
        RecordedSession {
            connections: std::mem::take(&mut self.done),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(format: u32) -> RecordedSession {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/recordings")
            .join(format!("format-{format}"));
        let recording = Recording::load(&dir).unwrap();
        service_side(&recording).unwrap().0
    }

    fn inputs(connection: &Connection) -> Vec<TurnInput> {
        connection.turns.iter().map(|t| t.input.clone()).collect()
    }

    fn answer(id: Option<&str>, name: &str) -> TurnInput {
        TurnInput::ToolResponse(vec![livetalk_live::wire::FunctionResponse {
            id: id.map(str::to_owned),
            name: name.to_owned(),
            ..Default::default()
        }])
    }

    fn names(input: &TurnInput) -> Vec<(Option<String>, String)> {
        match input {
            TurnInput::ToolResponse(answers) => answers
                .iter()
                .map(|a| (a.id.clone(), a.name.clone()))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Every format's golden recording read into what the mock serves: its connections (a
    /// failed attempt left out), each turn the app began, the frames that answered it, and
    /// how each connection ended.
    #[test]
    fn every_format_is_read_into_connections_turns_and_endings() {
        let one = served(1);
        assert_eq!(one.connections.len(), 1);
        let c = &one.connections[0];
        assert_eq!(inputs(c), [TurnInput::Text("Hi".into())]);
        assert_eq!((c.opening.len(), c.turns[0].frames.len()), (1, 2));
        assert_eq!(c.ending, Ending::ByApp);

        let two = served(2);
        assert_eq!(two.connections.len(), 2, "the failed attempt is left out");
        let c = &two.connections[0];
        assert_eq!(c.turns.len(), 3);
        assert_eq!(
            c.turns[0].input,
            TurnInput::Text("Turn the lamp off.".into())
        );
        assert_eq!(
            names(&c.turns[1].input),
            names(&answer(Some("c1"), "set_device_status"))
        );
        assert_eq!(names(&c.turns[2].input), names(&answer(None, "get_time")));
        assert_eq!(c.ending, Ending::Dropped);
        let again = &two.connections[1];
        assert_eq!((again.turns.len(), again.opening.len()), (0, 2));
        assert_eq!(again.ending, Ending::ByApp);

        let three = served(3);
        assert_eq!(
            three.connections.len(),
            1,
            "a close after the end is no connection"
        );
        let c = &three.connections[0];
        assert_eq!(c.turns.len(), 3);
        assert_eq!(
            c.turns[0].input,
            TurnInput::Text("Is the living room lamp on?".into())
        );
        assert_eq!(c.turns[1].input, TurnInput::Spoken);
        assert_eq!(
            names(&c.turns[2].input),
            names(&answer(Some("call-0"), "get_device_status"))
        );
        // The model's audio is put back in the frames, base64 as the service sent it.
        let reply: Value = serde_json::from_slice(&c.turns[1].frames[0].payload).unwrap();
        let data = &reply["serverContent"]["modelTurn"]["parts"][1]["inlineData"]["data"];
        assert!(data.is_string(), "{reply}");
        assert_eq!(c.turns[1].frames.len(), 2, "the reply and the tool call");
        // Timed from the turn's start: the activityEnd at 2.25 s, the reply at 2.75 s.
        assert_eq!(c.turns[1].frames[0].after, Duration::from_millis(500));

        let four = served(4);
        let c = &four.connections[0];
        assert_eq!(c.opening.len(), 1);
        assert_eq!(c.turns.len(), 4, "{:?}", inputs(c));
        assert_eq!(c.turns[1].input, TurnInput::Spoken);
        assert_eq!(c.ending, Ending::ByApp);
    }

    /// A recording the mock cannot serve is one clear error: no frame of the service, or more
    /// model audio than a replay holds.
    #[test]
    fn a_recording_with_nothing_to_serve_or_too_much_is_refused_in_one_sentence() {
        let scratch = tempfile::tempdir().unwrap();
        let meta = r#"{"t":0.0,"type":"meta","format":3,"livetalk_version":"0","started_at":"x","model":"m","voice":"v","endpoint_host":"h","offline":false,"devices":[],"config":{}}"#;
        std::fs::write(
            scratch.path().join("session.jsonl"),
            format!("{meta}\n{{\"t\":1.0,\"type\":\"connect\",\"host\":\"h\"}}\nnot json\n"),
        )
        .unwrap();
        let recording = Recording::load(scratch.path()).unwrap();
        let error = service_side(&recording).unwrap_err().to_string();
        assert!(
            error
                .ends_with("holds no connection to replay: no frame the service sent was recorded"),
            "{error}"
        );
        let wav = std::fs::File::create(scratch.path().join(MODEL_WAV)).unwrap();
        wav.set_len(MAX_SERVED_BYTES + 1).unwrap();
        let error = service_side(&recording).unwrap_err().to_string();
        assert!(
            error.contains("more than the 256.0 MiB a replay serves"),
            "{error}"
        );
    }
}
