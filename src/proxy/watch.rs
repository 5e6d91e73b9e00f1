//! What the proxy reads in one app connection's frames, and the problems it sees on them: the
//! tool calls the service made and how the app answered them, the model's turns and their
//! silences, the goAway, the setup's fate, the mic's pace and rate, and the fields the model in
//! use does not take (the mock's per-model rules). Fed each frame once, and the clock; it does
//! no I/O and says what it saw as [`Note`]s, each flag when it is due.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use livetalk_live::excerpt;
use livetalk_live::wire::{Blob, ClientMessage};
use livetalk_live::{Inbound, ServerEvent};

use super::events::{EventKind, WarningKind};

/// How long a model turn may send nothing before its `turnComplete` by default.
pub const DEFAULT_STALL: Duration = Duration::from_secs(5);

/// Mic audio this far ahead of the clock is sent faster than real time.
const AHEAD_LIMIT: Duration = Duration::from_secs(1);
/// Mic audio streamed this long shows the rate it is really sent at (before a stream 1.5×
/// too fast is a second ahead: such a stream is more likely mislabelled than hurried).
const RATE_WINDOW: Duration = Duration::from_millis(1500);
/// Rates mic audio is recorded at; a stream measured within 4 % of one of these that is not
/// the declared one is that rate mislabelled.
const COMMON_RATES: [u32; 5] = [8_000, 16_000, 24_000, 44_100, 48_000];
/// Answered ids kept to tell a second answer from one with an id never issued.
const ANSWERED_KEPT: usize = 4096;
/// Text of one turn kept for its line.
const TURN_TEXT: usize = 4096;

/// The limits a watch judges by.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WatchOptions {
    /// A call unanswered this long is flagged (`--tool-timeout`).
    pub tool_timeout: Duration,
    /// A model turn silent this long before its `turnComplete` is flagged (`--stall-secs`).
    pub stall: Duration,
}

/// What a frame or the clock brought: an event for the presenter (and the recording, for a
/// warning).
pub type Note = EventKind;

struct Call {
    name: String,
    at: Instant,
    warned: bool,
}

/// The model turn under way, or owed.
#[derive(Default)]
struct Turn {
    /// The model owes output or is producing it; `since` is when it last sent any (or was
    /// last asked).
    open: bool,
    since: Option<Instant>,
    stalled: bool,
    generated: bool,
    interrupted: bool,
    text: String,
    heard: String,
    tool_calls: usize,
    audio_out: Duration,
}

/// The mic's pace: audio sent against the clock.
#[derive(Default)]
struct MicClock {
    first: Option<Instant>,
    /// Samples sent since `first`, and at what declared rate.
    samples: u64,
    rate: u32,
    audio_in: Duration,
    too_fast_warned: bool,
    rate_warned: bool,
    undeclared_warned: bool,
}

/// One app connection's watch.
pub struct Watch {
    options: WatchOptions,
    api_version: String,
    model: Option<String>,
    set_up: bool,
    calls: HashMap<String, Call>,
    answered: HashSet<String>,
    turn: Turn,
    mic: MicClock,
    /// The app connections opened before the goAway came (see [`Watch::ended`]).
    go_away: Option<u64>,
}

impl Watch {
    pub fn new(options: WatchOptions, api_version: &str) -> Watch {
        Watch {
            options,
            api_version: api_version.to_owned(),
            model: None,
            set_up: false,
            calls: HashMap::new(),
            answered: HashSet::new(),
            turn: Turn::default(),
            mic: MicClock::default(),
            go_away: None,
        }
    }

    /// The model the app set up, once it has.
    pub fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }

    pub fn is_set_up(&self) -> bool {
        self.set_up
    }

    /// The next moment a flag may fall due (a call's timeout, a turn's stall).
    pub fn next_due(&self) -> Option<Instant> {
        let calls = self
            .calls
            .values()
            .filter(|c| !c.warned)
            .map(|c| c.at + self.options.tool_timeout);
        let stall = self.stall_due();
        calls.chain(stall).min()
    }

    fn stall_due(&self) -> Option<Instant> {
        let turn = &self.turn;
        (turn.open && !turn.stalled && self.calls.is_empty())
            .then_some(turn.since)
            .flatten()
            .map(|since| since + self.options.stall)
    }

    /// Flags that fell due by `now`.
    pub fn tick(&mut self, now: Instant) -> Vec<Note> {
        let mut notes = Vec::new();
        let timeout = self.options.tool_timeout;
        let mut due: Vec<(&String, &mut Call)> = self
            .calls
            .iter_mut()
            .filter(|(_, c)| !c.warned && c.at + timeout <= now)
            .collect();
        due.sort_by_key(|(_, c)| c.at);
        for (id, call) in due {
            call.warned = true;
            notes.push(warning(
                WarningKind::ToolNotAnswered,
                format!(
                    "The app has not answered the tool call {} (id {id}) within {} s.",
                    call.name,
                    secs(timeout)
                ),
            ));
        }
        if self.stall_due().is_some_and(|due| due <= now) {
            self.turn.stalled = true;
            notes.push(warning(
                WarningKind::TurnStalled,
                format!(
                    "The model's turn has sent nothing for {} s and has not completed.",
                    secs(self.options.stall)
                ),
            ));
        }
        notes
    }

    /// A frame the app sent, as read.
    pub fn client(&mut self, message: &ClientMessage, now: Instant) -> Vec<Note> {
        let mut notes = Vec::new();
        if let Some(model) = &self.model
            && let Some(reason) = livetalk_mock::rules::message_refusal(model, message)
        {
            notes.push(warning(
                WarningKind::FieldNotAccepted,
                format!(
                    "{} does not accept this message; the service closes with 1007: {reason}",
                    bare(model)
                ),
            ));
        }
        match message {
            ClientMessage::Setup(setup) => {
                self.model = Some(setup.model.clone());
                if let Some((code, reason)) =
                    livetalk_mock::rules::refusal(setup, &self.api_version)
                {
                    notes.push(warning(
                        WarningKind::FieldNotAccepted,
                        format!(
                            "The setup asks {} for what it does not accept; the service closes with {code}: {reason}",
                            bare(&setup.model)
                        ),
                    ));
                }
            }
            ClientMessage::ClientContent(content) => {
                let text: Vec<&str> = content.texts().collect();
                if !text.is_empty() {
                    notes.push(EventKind::UserText(excerpt::one_line(
                        &text.join("\n"),
                        TURN_TEXT,
                    )));
                }
                if content.turn_complete != Some(false) && !content.turns.is_empty() {
                    self.owe_reply(now);
                }
            }
            ClientMessage::RealtimeInput(input) => {
                if let Some(text) = &input.text {
                    notes.push(EventKind::UserText(excerpt::one_line(text, TURN_TEXT)));
                    self.owe_reply(now);
                }
                if input.activity_end.is_some() {
                    self.owe_reply(now);
                }
                let audio = input
                    .audio
                    .iter()
                    .chain(input.media_chunks.iter())
                    .filter(|b| b.mime_type.starts_with("audio/"));
                for blob in audio {
                    notes.extend(self.mic_audio(blob, now));
                }
            }
            ClientMessage::ToolResponse(response) => {
                for answer in &response.function_responses {
                    let Some(id) = &answer.id else { continue };
                    if let Some(call) = self.calls.remove(id) {
                        notes.push(EventKind::ToolAnswered {
                            id: id.clone(),
                            name: call.name,
                            after: now.saturating_duration_since(call.at),
                        });
                        if self.answered.len() >= ANSWERED_KEPT {
                            self.answered.clear();
                        }
                        self.answered.insert(id.clone());
                    } else if self.answered.contains(id) {
                        notes.push(warning(
                            WarningKind::ToolAnsweredTwice,
                            format!(
                                "The app answered the tool call {} (id {id}) a second time.",
                                answer.name
                            ),
                        ));
                    } else {
                        notes.push(warning(
                            WarningKind::ToolUnknownId,
                            format!(
                                "The app answered {} with the id {id}, which the service never issued (or had cancelled).",
                                answer.name
                            ),
                        ));
                    }
                }
                if self.calls.is_empty() {
                    self.owe_reply(now);
                }
            }
            ClientMessage::ContextUpdate(_) => {}
        }
        notes
    }

    /// The model owes a reply from `now`: the stall clock starts.
    fn owe_reply(&mut self, now: Instant) {
        self.turn.open = true;
        self.turn.since = Some(now);
        self.turn.stalled = false;
    }

    /// A chunk of mic audio: is it sent at the pace its rate says?
    fn mic_audio(&mut self, blob: &Blob, now: Instant) -> Vec<Note> {
        let mut notes = Vec::new();
        let declared = blob.declared_rate();
        if declared.is_none() && !self.mic.undeclared_warned {
            self.mic.undeclared_warned = true;
            notes.push(warning(
                WarningKind::AudioRate,
                format!(
                    "Mic audio is sent as `{}`, which declares no rate (the service takes audio/pcm;rate=16000).",
                    excerpt::one_line(&blob.mime_type, 80)
                ),
            ));
        }
        let rate = declared.unwrap_or(16_000).max(1);
        let samples = (blob.data.len() / 2) as u64;
        let mic = &mut self.mic;
        mic.audio_in += Duration::from_secs_f64(samples as f64 / rate as f64);
        let restart = match mic.first {
            None => true,
            Some(first) => {
                let sent = Duration::from_secs_f64(mic.samples as f64 / mic.rate as f64);
                let elapsed = now.saturating_duration_since(first);
                // A pause in the stream (push-to-talk, a mic turned off) starts a new one.
                mic.rate != rate || elapsed > sent + AHEAD_LIMIT
            }
        };
        if restart {
            mic.first = Some(now);
            mic.samples = 0;
            mic.rate = rate;
        }
        // What was sent before this chunk, against the time since the stream began: the
        // chunk itself is sent at its start.
        let first = mic.first.unwrap_or(now);
        let elapsed = now.saturating_duration_since(first);
        let sent_before = mic.samples;
        mic.samples += samples;
        if elapsed >= RATE_WINDOW && !mic.rate_warned && !mic.too_fast_warned {
            let measured = sent_before as f64 / elapsed.as_secs_f64();
            let near = COMMON_RATES
                .iter()
                .copied()
                .find(|r| (measured / *r as f64 - 1.0).abs() < 0.04);
            if let Some(actual) = near.filter(|r| *r != rate) {
                mic.rate_warned = true;
                notes.push(warning(
                    WarningKind::AudioRate,
                    format!(
                        "Mic audio declared as {rate} Hz arrives at {actual} samples a second: it is {actual} Hz audio labelled {rate} Hz (or sent {:.2}× faster than real time).",
                        actual as f64 / rate as f64
                    ),
                ));
            }
        }
        let ahead =
            Duration::from_secs_f64(sent_before as f64 / rate as f64).saturating_sub(elapsed);
        if ahead > AHEAD_LIMIT && !mic.too_fast_warned && !mic.rate_warned {
            mic.too_fast_warned = true;
            notes.push(warning(
                WarningKind::AudioTooFast,
                format!(
                    "Mic audio is sent faster than real time: {:.1} s of audio in {:.1} s. The service hears it as it comes; send it at the pace it was recorded.",
                    sent_before as f64 / rate as f64,
                    elapsed.as_secs_f64()
                ),
            ));
        }
        notes
    }

    /// A frame the service sent, read once.
    pub fn server(&mut self, inbound: &Inbound, now: Instant) -> Vec<Note> {
        let mut notes = Vec::new();
        for event in &inbound.events {
            match event {
                ServerEvent::SetupComplete { .. } => {
                    self.set_up = true;
                    notes.push(EventKind::SetUp {
                        model: self.model.clone().unwrap_or_default(),
                    });
                }
                ServerEvent::ToolCall(calls) => {
                    self.turn.generated = true;
                    self.turn.tool_calls += calls.len();
                    for call in calls {
                        let id = call.id.clone().unwrap_or_default();
                        notes.push(EventKind::ToolCall {
                            id: id.clone(),
                            name: call.name.clone(),
                            args: excerpt::one_line(&call.args.to_string(), 400),
                        });
                        if !id.is_empty() {
                            self.calls.insert(
                                id,
                                Call {
                                    name: call.name.clone(),
                                    at: now,
                                    warned: false,
                                },
                            );
                        }
                    }
                }
                ServerEvent::ToolCallCancelled(ids) => {
                    for id in ids {
                        self.calls.remove(id);
                    }
                }
                ServerEvent::GoAway { .. } => {
                    // Filled in by the relay, which knows how many connections were opened.
                }
                ServerEvent::ModelText(text) => {
                    self.turn.generated = true;
                    push_bounded(&mut self.turn.text, text);
                }
                ServerEvent::OutputTranscription { text, .. } => {
                    self.turn.generated = true;
                    push_bounded(&mut self.turn.text, text);
                }
                ServerEvent::InputTranscription { text, .. } => {
                    push_bounded(&mut self.turn.heard, text);
                }
                ServerEvent::ModelAudio { pcm, sample_rate } => {
                    self.turn.generated = true;
                    self.turn.audio_out += Duration::from_secs_f64(
                        pcm.len() as f64 / 2.0 / (*sample_rate).max(1) as f64,
                    );
                }
                ServerEvent::Interrupted => self.turn.interrupted = true,
                _ => {}
            }
        }
        let Some(reading) = inbound.reading() else {
            return notes;
        };
        let marks = reading.turn();
        let content = reading.part_count() > 0
            || reading.said().is_some()
            || !reading.calls().is_empty()
            || marks.generation_complete;
        if content {
            self.turn.open = true;
            self.turn.since = Some(now);
        }
        if marks.turn_complete {
            let turn = std::mem::take(&mut self.turn);
            if !turn.generated && !turn.interrupted {
                notes.push(warning(
                    WarningKind::EmptyTurn,
                    "The model completed a turn with nothing generated (no text, audio or tool call).".into(),
                ));
            }
            notes.push(EventKind::Turn {
                model: turn.text,
                heard: turn.heard,
                tool_calls: turn.tool_calls,
                audio_out: turn.audio_out,
                audio_in: std::mem::take(&mut self.mic.audio_in),
                interrupted: turn.interrupted,
            });
        }
        notes
    }

    /// The service said goAway; `opened` app connections had been opened by then.
    pub fn go_away(&mut self, opened: u64) {
        self.go_away.get_or_insert(opened);
    }

    /// The connection is over: `opened` app connections have been opened by now, and the app
    /// closed it itself (`by_app`) or not. Flags what was left hanging.
    pub fn ended(&mut self, opened: u64, by_app: bool) -> Vec<Note> {
        let mut notes = Vec::new();
        if let Some(before) = self.go_away
            && !by_app
            && opened <= before
        {
            notes.push(warning(
                WarningKind::GoAwayIgnored,
                "The service said goAway and the connection ended before the app had opened a new one (resume with the newest session handle before the time left runs out).".into(),
            ));
        }
        notes
    }

    /// The service closed the connection before the setup was answered, or refused the upgrade.
    pub fn refused(&self, code: Option<u16>, reason: &str) -> Option<Note> {
        if self.set_up {
            return None;
        }
        let code = code.map_or("no code".to_owned(), |c| c.to_string());
        Some(warning(
            WarningKind::SetupRefused,
            format!(
                "The service refused the setup ({code}): {}",
                excerpt::one_line(reason, 400)
            ),
        ))
    }
}

fn push_bounded(text: &mut String, more: &str) {
    if text.len() < TURN_TEXT {
        text.push_str(&excerpt::bounded(more, TURN_TEXT - text.len()));
    }
}

fn bare(model: &str) -> &str {
    model.rsplit('/').next().unwrap_or(model)
}

fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0}")
    } else {
        format!("{s:.1}")
    }
}

pub fn warning(kind: WarningKind, message: String) -> Note {
    EventKind::Warning { kind, message }
}
