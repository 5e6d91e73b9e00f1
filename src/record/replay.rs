//! Replay: rebuilds, from a recording, the exact sequence of messages the app applied, and
//! drives the app with it: headless (printing what the original run printed), or by re-sending
//! the recorded user turns to an endpoint (`--against`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;
use tokio::sync::mpsc;

use super::{AudioRef, MIC_WAV, MODEL_WAV, Record, Recording, read_wav};
use crate::app::{App, Msg};
use crate::config::{FlagOverrides, Settings};
use crate::headless::{self, OutputFormat, Printer};
use crate::live::codec::{DecodedServerFrame, decode_server};
use crate::live::events::events_from;
use crate::live::reconnect::LinkEvent;
use crate::live::{CloseInfo, SessionEvent};
use crate::tools::{SlowCall, ToolEvent, ToolOutcome, ToolStatus};

/// How fast a replay runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pacing {
    /// As fast as possible.
    Instant,
    /// Recorded pace divided by this factor.
    Speed(f64),
}

/// One thing to do to the app, at a recorded time.
#[derive(Debug, Clone)]
pub struct Step {
    /// Seconds since the recording started.
    pub t: f64,
    pub action: Action,
}

#[derive(Debug, Clone)]
pub enum Action {
    /// Apply a message.
    Msg(Msg),
    /// The original run stopped with this error (printed as it was).
    Error(String),
}

/// Samples of the recording's WAV files, read once.
struct Audio {
    dir: PathBuf,
    model: Option<Vec<i16>>,
    mic: Option<Vec<i16>>,
    short: bool,
}

impl Audio {
    fn samples(&mut self, reference: &AudioRef) -> Vec<u8> {
        let (slot, name) = match reference.file.as_str() {
            MIC_WAV => (&mut self.mic, MIC_WAV),
            _ => (&mut self.model, MODEL_WAV),
        };
        let dir = &self.dir;
        let all = slot.get_or_insert_with(|| {
            read_wav(&dir.join(name))
                .map(|(_, s)| s)
                .unwrap_or_default()
        });
        let start = usize::try_from(reference.sample_offset).unwrap_or(usize::MAX);
        let count = usize::try_from(reference.sample_count).unwrap_or(usize::MAX);
        let end = start.saturating_add(count).min(all.len());
        if end < start.saturating_add(count) {
            self.short = true;
        }
        all.get(start.min(end)..end)
            .unwrap_or_default()
            .iter()
            .flat_map(|s| s.to_le_bytes())
            .collect()
    }
}

/// Puts the audio back into a recorded server message (each `inlineData.data` that is an
/// [`AudioRef`] becomes base64 again), so it decodes like the original frame.
fn inline_audio(message: &mut Value, audio: &mut Audio) {
    let Some(parts) = message
        .pointer_mut("/serverContent/modelTurn/parts")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for part in parts {
        let Some(blob) = part.get_mut("inlineData").and_then(Value::as_object_mut) else {
            continue;
        };
        let Some(reference) = blob
            .get("data")
            .and_then(|d| serde_json::from_value::<AudioRef>(d.clone()).ok())
        else {
            continue;
        };
        let pcm = audio.samples(&reference);
        blob.insert(
            "data".to_owned(),
            Value::String(base64::engine::general_purpose::STANDARD.encode(pcm)),
        );
    }
}

/// The session events one `recv` line produced in the original run.
fn recv_events(
    setup: bool,
    message: Option<&Value>,
    skipped: Option<&str>,
    audio: &mut Audio,
) -> Vec<SessionEvent> {
    let decoded = message.and_then(|value| {
        let mut value = value.clone();
        inline_audio(&mut value, audio);
        let bytes = serde_json::to_vec(&value).ok()?;
        match decode_server(&bytes) {
            Ok(DecodedServerFrame::Message(message)) => Some(message),
            _ => None,
        }
    });
    if setup {
        // Before setupComplete the session only looks for setupComplete; the rest is dropped.
        return match decoded.and_then(|m| m.setup_complete) {
            Some(setup) => vec![SessionEvent::SetupComplete {
                session_id: setup.session_id,
            }],
            None => Vec::new(),
        };
    }
    match (decoded, skipped) {
        (Some(message), _) => events_from(message),
        (None, Some(reason)) => vec![SessionEvent::FrameSkipped {
            reason: reason.to_owned(),
        }],
        (None, None) => Vec::new(),
    }
}

fn duration(ns: u64) -> Duration {
    Duration::from_nanos(ns)
}

fn tool_event(record: &Record) -> Option<ToolEvent> {
    match record {
        Record::ToolResult {
            id,
            name,
            args,
            outcome,
            error,
            duration_ns,
            response,
            truncated,
            ..
        } => {
            let message = error.clone().unwrap_or_default();
            let status = match outcome.as_str() {
                "ok" => ToolStatus::Ok,
                "timed_out" => ToolStatus::TimedOut,
                "panicked" => ToolStatus::Panicked(message),
                _ => ToolStatus::Error(message),
            };
            Some(ToolEvent::Finished(ToolOutcome {
                id: id.clone(),
                name: name.clone(),
                args: args.clone(),
                status,
                response: response.clone(),
                duration: duration(*duration_ns),
                truncated: *truncated,
            }))
        }
        Record::ToolCancelled {
            id,
            name,
            duration_ns,
            ..
        } => Some(ToolEvent::Cancelled {
            id: id.clone(),
            name: name.clone(),
            duration: duration(*duration_ns),
        }),
        _ => None,
    }
}

fn link_event(record: &Record) -> Option<LinkEvent> {
    match record {
        Record::Reconnecting {
            planned,
            attempt,
            reason,
            retry_in_ns,
            ..
        } => Some(LinkEvent::Reconnecting {
            planned: *planned,
            attempt: *attempt,
            reason: reason.clone(),
            retry_in: duration(*retry_in_ns),
        }),
        Record::Reconnected {
            resumed,
            user_turn_pending,
            ..
        } => Some(LinkEvent::Reconnected {
            resumed: *resumed,
            user_turn_pending: *user_turn_pending,
        }),
        Record::ResumeRejected { message, .. } => Some(LinkEvent::ResumeRejected {
            message: message.clone(),
        }),
        Record::AnswerDropped { id, name, .. } => Some(LinkEvent::AnswerDropped {
            id: id.clone(),
            name: name.clone(),
        }),
        _ => None,
    }
}

/// A session event as a connection's reader produced it.
struct Arrival {
    t: f64,
    event: SessionEvent,
    /// The `setupComplete` a connection opens with: after a reconnect, the first event of
    /// the new connection the app gets.
    opens_connection: bool,
}

/// The step of an app-level line, and what it says about the frames after it.
enum Placed {
    /// A message or an error of its own.
    Step(Action),
    /// The link left its connection: frames the old one read after this never reached the app.
    Reconnecting(LinkEvent),
    /// The end of the session, itself a session event the app applied.
    Ended(SessionEvent),
}

/// Hands out the arrivals the app applied, in order, skipping the frames a replaced
/// connection read after the link had left it.
struct Arrivals {
    queue: std::vec::IntoIter<Arrival>,
    applied: u64,
    between_connections: bool,
}

impl Arrivals {
    fn next_applied(&mut self) -> Option<Arrival> {
        loop {
            let arrival = self.queue.next()?;
            if self.between_connections && !arrival.opens_connection {
                continue;
            }
            self.between_connections = false;
            return Some(arrival);
        }
    }
}

/// The local time of day at `t` seconds into a recording that started at `start`.
fn local_time(start: Option<&jiff::Zoned>, t: f64) -> Option<jiff::civil::Time> {
    let offset = jiff::SignedDuration::try_from_secs_f64(t).ok()?;
    Some(start?.checked_add(offset).ok()?.time())
}

/// The messages the app applied, in the order it applied them. Frames are logged by the
/// session's reader when they arrive; app-level lines carry how many session events had been
/// applied (`at`), which puts them back in exactly the right place among the frames. A
/// reconnect line also says the old connection is gone: frames it read after that never
/// reached the app, and the next events come from the new connection's `setupComplete`.
/// Session events carry the local time they arrived (from the metadata's start time), so the
/// tool log shows when calls came in then, not now.
/// Returns the steps and warnings (e.g. audio missing from a WAV file cut short).
pub fn steps(recording: &Recording) -> (Vec<Step>, Vec<String>) {
    let mut audio = Audio {
        dir: recording.dir.clone(),
        model: None,
        mic: None,
        short: false,
    };
    let start = recording.meta.started_at.parse::<jiff::Zoned>().ok();
    // Since format 2 the app's end of the session has a line of its own.
    let closes_end_session = recording.meta.format < 2;
    let mut session: Vec<Arrival> = Vec::new();
    let mut app_level: Vec<(f64, u64, Placed)> = Vec::new();
    for line in &recording.lines {
        let t = line.t;
        let mut app_line = |at: u64, action: Action| app_level.push((t, at, Placed::Step(action)));
        match &line.record {
            Record::Recv {
                setup,
                message,
                skipped,
            } => {
                for event in recv_events(*setup, message.as_ref(), skipped.as_deref(), &mut audio) {
                    session.push(Arrival {
                        t,
                        opens_connection: *setup
                            && matches!(event, SessionEvent::SetupComplete { .. }),
                        event,
                    });
                }
            }
            Record::Close {
                code,
                reason,
                message,
                initiated_by_client,
            } if closes_end_session => session.push(Arrival {
                t,
                event: SessionEvent::Closed(CloseInfo {
                    code: *code,
                    reason: reason.clone(),
                    message: message.clone(),
                    initiated_by_client: *initiated_by_client,
                }),
                opens_connection: false,
            }),
            Record::SessionEnded {
                code,
                reason,
                message,
                initiated_by_client,
                at,
            } => app_level.push((
                t,
                *at,
                Placed::Ended(SessionEvent::Closed(CloseInfo {
                    code: *code,
                    reason: reason.clone(),
                    message: message.clone(),
                    initiated_by_client: *initiated_by_client,
                })),
            )),
            Record::ConnectFailed { message } => {
                app_line(0, Action::Msg(Msg::ConnectFailed(message.clone())))
            }
            Record::UserText { text, at } => {
                app_line(*at, Action::Msg(Msg::UserText(text.clone())))
            }
            Record::EndSession { at } => app_line(*at, Action::Msg(Msg::EndSession)),
            Record::Retry { at } => app_line(*at, Action::Msg(Msg::Retry)),
            Record::Devices { devices, at } => {
                app_line(*at, Action::Msg(Msg::DevicesChanged(devices.clone())))
            }
            Record::Error { message, at } => app_line(*at, Action::Error(message.clone())),
            Record::ToolSlow {
                id,
                name,
                elapsed_ns,
                at,
                ..
            } => app_line(
                *at,
                Action::Msg(Msg::ToolCallSlow(SlowCall {
                    id: id.clone(),
                    name: name.clone(),
                    elapsed: duration(*elapsed_ns),
                })),
            ),
            record @ (Record::ToolResult { at, .. } | Record::ToolCancelled { at, .. }) => {
                if let Some(event) = tool_event(record) {
                    app_line(*at, Action::Msg(Msg::Tool(event)));
                }
            }
            record @ (Record::Reconnecting { at, .. }
            | Record::Reconnected { at, .. }
            | Record::ResumeRejected { at, .. }
            | Record::AnswerDropped { at, .. }) => {
                if let Some(event) = link_event(record) {
                    let placed = if matches!(record, Record::Reconnecting { .. }) {
                        Placed::Reconnecting(event)
                    } else {
                        Placed::Step(Action::Msg(Msg::Link(event)))
                    };
                    app_level.push((t, *at, placed));
                }
            }
            Record::Close { .. }
            | Record::Meta(_)
            | Record::Connect { .. }
            | Record::Send { .. } => {}
        }
    }

    let event_step = |t: f64, event: SessionEvent| Step {
        t,
        action: Action::Msg(match local_time(start.as_ref(), t) {
            Some(arrived_at) => Msg::Replayed { event, arrived_at },
            None => Msg::Session(event),
        }),
    };
    let mut steps = Vec::with_capacity(session.len() + app_level.len());
    let mut arrivals = Arrivals {
        queue: session.into_iter(),
        applied: 0,
        between_connections: false,
    };
    for (t, at, placed) in app_level {
        while arrivals.applied < at {
            let Some(arrival) = arrivals.next_applied() else {
                break;
            };
            steps.push(event_step(arrival.t, arrival.event));
            arrivals.applied += 1;
        }
        match placed {
            Placed::Step(action) => steps.push(Step { t, action }),
            Placed::Reconnecting(event) => {
                steps.push(Step {
                    t,
                    action: Action::Msg(Msg::Link(event)),
                });
                arrivals.between_connections = true;
            }
            Placed::Ended(event) => {
                steps.push(event_step(t, event));
                arrivals.applied += 1;
            }
        }
    }
    while let Some(arrival) = arrivals.next_applied() {
        steps.push(event_step(arrival.t, arrival.event));
    }
    let mut warnings = Vec::new();
    if audio.short {
        warnings.push(format!(
            "{}: some audio the log refers to is missing from the WAV files (cut short?)",
            recording.dir.display()
        ));
    }
    (steps, warnings)
}

/// The app as it was when the recorded session started.
pub fn initial_app(recording: &Recording) -> App {
    let meta = &recording.meta;
    let mut app = App::new(meta.model.clone(), meta.offline, meta.devices.clone());
    app.voice = meta.voice.clone();
    app.endpoint_label = meta.endpoint_host.clone();
    app.update(Msg::Connecting);
    app
}

/// Waits until a step's time comes, at the given pace; can be paused.
pub struct Clock {
    start: tokio::time::Instant,
    pacing: Pacing,
    /// Recorded times are per source and may step back a little; never go back in time.
    last: f64,
    paused_at: Option<tokio::time::Instant>,
}

impl Clock {
    pub fn new(pacing: Pacing) -> Self {
        Clock {
            start: tokio::time::Instant::now(),
            pacing,
            last: 0.0,
            paused_at: None,
        }
    }

    pub fn is_paused(&self) -> bool {
        self.paused_at.is_some()
    }

    /// Stops or restarts the recorded time; paused time does not count.
    pub fn toggle_pause(&mut self) {
        match self.paused_at.take() {
            Some(at) => self.start += at.elapsed(),
            None => self.paused_at = Some(tokio::time::Instant::now()),
        }
    }

    /// Makes a step taken by hand while paused count as having happened now.
    pub fn stepped_to(&mut self, t: f64) {
        self.last = self.last.max(t);
        if let (Some(paused_at), Pacing::Speed(speed)) = (self.paused_at, self.pacing)
            && speed.is_finite()
            && speed > 0.0
        {
            let due = self.start + Duration::from_secs_f64(self.last / speed);
            if due > paused_at {
                self.start -= due - paused_at;
            }
        }
    }

    /// When the step at recorded time `t` is due.
    pub fn due(&mut self, t: f64) -> Option<tokio::time::Instant> {
        self.last = self.last.max(t);
        match self.pacing {
            Pacing::Instant => None,
            Pacing::Speed(speed) => {
                let speed = if speed.is_finite() && speed > 0.0 {
                    speed
                } else {
                    1.0
                };
                Some(self.start + Duration::from_secs_f64(self.last / speed))
            }
        }
    }

    /// Sleeps until the step at recorded time `t` is due.
    pub async fn wait(&mut self, t: f64) {
        if let Some(due) = self.due(t) {
            tokio::time::sleep_until(due).await;
        }
    }
}

fn warn_all(warnings: &[String]) {
    for warning in warnings {
        eprintln!("livetalk: warning: {warning}");
    }
}

/// Replays a recording headless: prints what headless mode printed in the original run, and
/// exits as it did (0 for a clean end, 1 otherwise).
pub async fn headless(dir: &Path, format: OutputFormat, pacing: Pacing) -> anyhow::Result<u8> {
    let recording = Recording::load(dir)?;
    warn_all(&recording.warnings);
    let (steps, warnings) = steps(&recording);
    warn_all(&warnings);

    let mut printer = Printer::new(format);
    let meta = &recording.meta;
    if meta.offline {
        printer.info(
            "No API key is set: talking to the embedded offline demo model (set GEMINI_API_KEY to talk to Gemini).",
        );
    }
    printer.session_start(&meta.model, &meta.endpoint_host, meta.offline);
    let mut app = initial_app(&recording);
    let mut clock = Clock::new(pacing);
    for step in steps {
        clock.wait(step.t).await;
        match step.action {
            Action::Msg(msg) => {
                let failed_to_connect = matches!(msg, Msg::ConnectFailed(_));
                // Effects (sends, tool runs) are what the original run did; here they are
                // already in the recording, so they are not carried out again.
                let _ = app.update(msg);
                printer.render(&app);
                if failed_to_connect {
                    return Ok(1);
                }
            }
            Action::Error(message) => {
                printer.render(&app);
                printer.error(&message);
                return Ok(1);
            }
        }
        if app.is_finished() {
            break;
        }
    }
    printer.render(&app);
    if !app.is_finished() {
        eprintln!(
            "livetalk: warning: the recording ends before the session did (was livetalk killed?)"
        );
        return Ok(1);
    }
    printer.session_end(&app);
    Ok(if app.ended_cleanly() { 0 } else { 1 })
}

/// Re-sends the recorded typed turns to `endpoint` with the recorded model and voice, running
/// tools locally, and prints the new conversation headless.
pub async fn against(
    dir: &Path,
    endpoint: &str,
    flags: FlagOverrides,
    format: OutputFormat,
) -> anyhow::Result<u8> {
    let recording = Recording::load(dir)?;
    warn_all(&recording.warnings);
    let mut settings = Settings::load(&FlagOverrides {
        endpoint: Some(endpoint.to_owned()),
        model: Some(recording.meta.model.clone()),
        voice: Some(recording.meta.voice.clone()),
        ..flags
    })?;
    // The recorded mic audio is streamed again as the microphone, in real time; no device is
    // opened, so the run is the recording's input and nothing else.
    let mic = dir.join(MIC_WAV);
    let mic_secs = hound::WavReader::open(&mic)
        .map(|r| f64::from(r.duration()) / f64::from(r.spec().sample_rate.max(1)))
        .unwrap_or(0.0);
    settings.audio.devices = false;
    settings.audio.output_wav = None;
    settings.audio.input_wav = (mic_secs > 0.0).then_some(mic);
    let turns: Vec<String> = recording
        .lines
        .iter()
        .filter_map(|line| match &line.record {
            Record::UserText { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect();
    let audio = if mic_secs > 0.0 {
        format!(" and {mic_secs:.1} s of mic audio")
    } else {
        String::new()
    };
    let banner = format!(
        "Replaying {} recorded turn(s){audio} from {} against {}.",
        turns.len(),
        dir.display(),
        settings.endpoint_label()
    );
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        for turn in turns {
            if tx.send(turn).await.is_err() {
                break;
            }
        }
    });
    headless::run_with_input(settings, format, Some(&banner), rx).await
}
