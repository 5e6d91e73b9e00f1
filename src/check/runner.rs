//! Runs one scenario as a live session, turn by turn: the same set-up (`engine::launch`), the
//! same engine and the same `App` as a headless session, with the check in the user's seat. A
//! typed turn is sent as typed; a spoken one is streamed as the mic in real time, followed by
//! a second of silence. What each turn showed (its calls, its reply, whether it completed) is
//! gathered from the messages the app applies; its latencies are the cockpit's
//! (`app::turn_timing`), fed the frames both ways.

use std::time::Duration;

use tokio::time::Instant;

use super::compare::Observed;
use super::scenario::{Call, Input, SPOKEN_RATE, Scenario};
use crate::app::turn_timing::{Stamp, TurnClock};
use crate::app::{App, ConnectionState, Msg, WireBody};
use crate::config::Settings;
use crate::driver::{LEAVE_GRACE, Source as _, apply};
use crate::engine::{Engine, launch};
use livetalk_live::reading::Grounding;
use livetalk_live::{CloseInfo, ServerEvent};

/// Silence sent after a spoken turn's audio, so the service's voice detection ends it.
pub const SPOKEN_TAIL: Duration = Duration::from_secs(1);

/// One mic frame: 20 ms.
const FRAME: Duration = Duration::from_millis(20);

/// How long a run waits for the first connection beyond the connect timeout (the engine's own
/// deadline says it first; this only keeps a run from waiting for ever).
const CONNECT_SLACK: Duration = Duration::from_secs(10);

/// What a turn showed.
#[derive(Debug, Clone, Default)]
pub struct TurnResult {
    pub observed: Observed,
    pub first_audio_ms: Option<f64>,
    /// Why the turn did not complete; `None` when it did.
    pub incomplete: Option<String>,
    /// It was not sent: an earlier turn did not complete.
    pub not_run: bool,
}

/// How a run went.
#[derive(Debug)]
pub enum RunEnd {
    /// The session ran; one result per turn (turns after one that did not complete were not
    /// run, and say so).
    Ran(Vec<TurnResult>),
    /// The model could not be reached at all.
    Unreachable(String),
}

/// Runs `scenario` once with `settings` (its route, model, tools, recording).
pub async fn run(scenario: &Scenario, settings: &Settings) -> anyhow::Result<RunEnd> {
    let decider = crate::tools::Decider::headless(settings.approve);
    let (mut app, mut engine) = launch(settings, None, decider).await?;
    let mut session = Drive {
        app: &mut app,
        engine: &mut engine,
        turn: None,
        clock: TurnClock::new(scenario.turns.len() + 1),
        origin: std::time::Instant::now(),
    };
    if let Err(reason) = session
        .connected(settings.connect_timeout + CONNECT_SLACK)
        .await
    {
        return Ok(RunEnd::Unreachable(reason));
    }
    let mut results = Vec::new();
    for turn in &scenario.turns {
        if results
            .last()
            .is_some_and(|r: &TurnResult| r.incomplete.is_some())
        {
            results.push(TurnResult {
                incomplete: Some("not run: an earlier turn did not complete".into()),
                not_run: true,
                ..TurnResult::default()
            });
            continue;
        }
        if let Some(picture) = &turn.picture
            && let Err(why) = session.show_all(picture, settings.turn_timeout).await
        {
            results.push(TurnResult {
                incomplete: Some(why),
                ..TurnResult::default()
            });
            continue;
        }
        results.push(session.turn(&turn.input, settings.turn_timeout).await);
    }
    session.close().await;
    Ok(RunEnd::Ran(results))
}

/// What a run drives: the app and its engine, and the turn under way.
struct Drive<'a> {
    app: &'a mut App,
    engine: &'a mut Engine,
    turn: Option<TurnWatch>,
    /// The turns' latencies, from the frames both ways, as the cockpit measures them.
    clock: TurnClock,
    /// Where the clock's stamps count from.
    origin: std::time::Instant,
}

/// What one turn has shown so far. Its latencies are the session's [`TurnClock`]'s.
#[derive(Default)]
struct TurnWatch {
    /// When the turn was sent (or its audio began), on the session's clock: the clock's
    /// turns that end from here on are this one's.
    began: Stamp,
    /// The model has begun to answer.
    answered: bool,
    calls: Vec<Vec<Call>>,
    text: String,
    transcription: String,
    /// Its searches and sources, read as the app reads them.
    grounding: Grounding,
    complete: bool,
    last_heard: Option<Instant>,
}

impl TurnWatch {
    /// Takes in what the server said, before the app applies it.
    fn observe(&mut self, event: &ServerEvent) {
        self.last_heard = Some(Instant::now());
        match event {
            ServerEvent::ModelText(text) => self.text += text,
            ServerEvent::OutputTranscription { text, .. } => self.transcription += text,
            ServerEvent::ToolCall(calls) => self.calls.push(Call::all_of(calls)),
            ServerEvent::Grounding(metadata) => self.grounding.absorb(Grounding::of(metadata)),
            ServerEvent::TurnComplete { .. } => self.complete = true,
            _ => {}
        }
        self.answered |= matches!(
            event,
            ServerEvent::ModelText(_)
                | ServerEvent::ModelAudio { .. }
                | ServerEvent::OutputTranscription { .. }
                | ServerEvent::ToolCall(_)
                | ServerEvent::TurnComplete { .. }
        );
    }

    /// The turn's result, with its figures from `clock` (none when the user's turn never
    /// ended as the clock counts ends: a spoken turn the server said nothing of).
    fn result(self, clock: &TurnClock, incomplete: Option<String>) -> TurnResult {
        let timing = clock
            .turns()
            .rev()
            .find(|t| t.ended_at >= self.began)
            .copied();
        let ms = |d: Option<Duration>| d.map(|d| d.as_secs_f64() * 1000.0);
        let reply = match (self.text.trim(), self.transcription.trim()) {
            (text, "") => text.to_owned(),
            ("", said) => said.to_owned(),
            (text, said) => format!("{text} {said}"),
        };
        TurnResult {
            observed: Observed {
                calls: self.calls,
                reply,
                first_response_ms: ms(timing.and_then(|t| t.first_message)),
                grounding: self.grounding,
            },
            first_audio_ms: ms(timing.and_then(|t| t.first_audio)),
            incomplete,
            not_run: false,
        }
    }
}

/// A spoken turn on its way: its samples and silence after them, sent at the pace they were
/// spoken.
struct MicFeed {
    samples: Vec<i16>,
    started: Instant,
    sent: usize,
}

impl MicFeed {
    fn new(speech: &[i16]) -> Self {
        let tail = (SPOKEN_TAIL.as_secs_f64() * f64::from(SPOKEN_RATE)) as usize;
        let mut samples = speech.to_vec();
        samples.resize(speech.len() + tail, 0);
        MicFeed {
            samples,
            started: Instant::now(),
            sent: 0,
        }
    }

    /// The frames due by now, as PCM16 LE chunks.
    fn due(&mut self) -> Vec<Vec<u8>> {
        let elapsed = self.started.elapsed().as_secs_f64();
        let due = ((elapsed * f64::from(SPOKEN_RATE)) as usize).min(self.samples.len());
        let frame = (FRAME.as_secs_f64() * f64::from(SPOKEN_RATE)) as usize;
        let mut chunks = Vec::new();
        while self.sent + frame <= due || (due == self.samples.len() && self.sent < due) {
            let end = (self.sent + frame).min(due);
            chunks.push(
                self.samples[self.sent..end]
                    .iter()
                    .flat_map(|s| s.to_le_bytes())
                    .collect(),
            );
            self.sent = end;
        }
        chunks
    }

    fn done(&self) -> bool {
        self.sent >= self.samples.len()
    }
}

impl Drive<'_> {
    /// A moment on the clock's scale.
    fn stamp(&self, at: std::time::Instant) -> Stamp {
        at.saturating_duration_since(self.origin)
    }

    /// Applies what the engine has, watching it for the turn under way. `false` once the
    /// engine has nothing more to give.
    async fn step(&mut self) -> bool {
        let Some(mut msg) = self.engine.next().await else {
            return false;
        };
        loop {
            match &msg {
                Msg::Server(event) => {
                    if let Some(turn) = &mut self.turn {
                        turn.observe(event);
                    }
                }
                Msg::Wire(frame) => {
                    let at = self.stamp(frame.at);
                    match &frame.body {
                        WireBody::Received { .. } => {
                            if let Some(reading) = frame.reading() {
                                self.clock.received(reading, at);
                            }
                        }
                        WireBody::Sent(message) => self.clock.sent(message, at),
                        WireBody::Unreadable(_) => {}
                    }
                }
                _ => {}
            }
            apply(self.app, self.engine, msg).await;
            match self.engine.ready() {
                Some(next) => msg = next,
                None => return true,
            }
        }
    }

    /// Waits for the session to start; the reason when it never does.
    async fn connected(&mut self, limit: Duration) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        loop {
            match self.app.connection() {
                ConnectionState::Connected => return Ok(()),
                ConnectionState::Disconnected { reason } => return Err(reason.clone()),
                _ => {}
            }
            tokio::select! {
                open = self.step() => if !open {
                    return Err("the session ended before it started".into());
                },
                () = tokio::time::sleep_until(deadline) => {
                    return Err(format!("no session after {:.0} s", limit.as_secs_f64()));
                }
            }
        }
    }

    /// Shows the model a picture, or each picture of a folder (its PNG and JPEG files in name
    /// order, as `--video` takes them) one after another: the model sees the last.
    async fn show_all(&mut self, path: &std::path::Path, limit: Duration) -> Result<(), String> {
        let pictures = if path.is_dir() {
            crate::engine::folder_frames(path)?
        } else {
            vec![path.to_path_buf()]
        };
        for picture in &pictures {
            self.show(picture, limit).await?;
        }
        Ok(())
    }

    /// Shows the model a picture as `/image` does, and waits until it is sent (and, where the
    /// model answers pictures at once, answered): what the turn after it says is then about it.
    async fn show(&mut self, picture: &std::path::Path, limit: Duration) -> Result<(), String> {
        let sent_before = self.sent_pictures();
        let notices_before = self.app.notices().len();
        apply(
            self.app,
            self.engine,
            Msg::UserText(format!("/image {}", picture.display())),
        )
        .await;
        let deadline = Instant::now()
            + if limit.is_zero() {
                Duration::from_secs(60)
            } else {
                limit
            };
        loop {
            if !self.app.image_pending() {
                if self.sent_pictures() > sent_before && self.app.ready_for_user() {
                    return Ok(());
                }
                // Not sent, and a notice says why.
                if self.sent_pictures() == sent_before
                    && let Some(notice) = self
                        .app
                        .notices()
                        .get(notices_before..)
                        .and_then(<[_]>::last)
                {
                    return Err(notice.text.clone());
                }
            }
            tokio::select! {
                open = self.step() => if !open {
                    return Err("the session ended before the picture was shown".into());
                },
                () = sleep_until(Some(deadline)) => {
                    return Err(format!("the picture {} was not shown in time", picture.display()));
                }
            }
        }
    }

    /// Pictures shown so far (the transcript's picture entries).
    fn sent_pictures(&self) -> usize {
        self.app
            .transcript()
            .iter()
            .filter(|e| matches!(e, crate::app::Entry::Image { .. }))
            .count()
    }

    /// Sends one turn and follows it until the model is done with it, the deadline passes
    /// (`limit` without a word from the server; zero is no limit) or the session loses it.
    async fn turn(&mut self, input: &Input, limit: Duration) -> TurnResult {
        let limit = (!limit.is_zero()).then_some(limit);
        let lost_before = self.app.turns_lost();
        // The model may still be finishing what came before (playing out, a late call).
        let ready_by = limit.map(|l| Instant::now() + l);
        while !self.app.ready_for_user() {
            if let Some(why) = self.gone(lost_before) {
                return TurnResult {
                    incomplete: Some(why),
                    ..TurnResult::default()
                };
            }
            tokio::select! {
                open = self.step() => if !open { break },
                () = sleep_until(ready_by) => {
                    return TurnResult {
                        incomplete: Some("the model was still busy with the turn before".into()),
                        ..TurnResult::default()
                    };
                }
            }
        }
        self.turn = Some(TurnWatch {
            began: self.stamp(std::time::Instant::now()),
            ..TurnWatch::default()
        });
        let mut mic = None;
        match input {
            Input::Say(text) => {
                // The text goes to the model as it is: one that starts with a slash is typed
                // as `//text`, as a user sends it, not run as a command.
                let text = text.trim();
                let typed = if text.starts_with('/') {
                    format!("/{text}")
                } else {
                    text.to_owned()
                };
                apply(self.app, self.engine, Msg::UserText(typed)).await;
            }
            Input::Audio { samples, .. } => mic = Some(MicFeed::new(samples)),
        }
        let mut ticker = tokio::time::interval(FRAME);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut quiet_since = Instant::now();
        let incomplete = loop {
            if let Some(why) = self.gone(lost_before) {
                break Some(why);
            }
            let watch = self.turn.as_ref();
            if watch.is_some_and(|t| t.complete)
                && mic.as_ref().is_none_or(MicFeed::done)
                && self.app.ready_for_user()
            {
                break None;
            }
            if let Some(heard) = watch.and_then(|t| t.last_heard) {
                quiet_since = quiet_since.max(heard);
            }
            let deadline = match (&mic, limit) {
                (None, Some(limit)) => Some(quiet_since + limit),
                _ => None,
            };
            tokio::select! {
                open = self.step() => if !open {
                    break Some("the session ended before the turn did".into());
                },
                _ = ticker.tick(), if mic.is_some() => {
                    if let Some(feed) = &mut mic {
                        for chunk in feed.due() {
                            self.engine.send_audio(chunk).await;
                        }
                        if feed.done() {
                            mic = None;
                            quiet_since = Instant::now();
                        }
                    }
                }
                () = sleep_until(deadline) => {
                    let secs = limit.map_or(0.0, |l| l.as_secs_f64());
                    let started = self.turn.as_ref().is_some_and(|t| t.answered);
                    break Some(if started {
                        format!("the turn never completed: nothing more from the model for {secs:.0} s")
                    } else {
                        format!("the turn never completed: no reply from the model within {secs:.0} s")
                    });
                }
            }
        };
        self.turn
            .take()
            .unwrap_or_default()
            .result(&self.clock, incomplete)
    }

    /// Why the turn under way can no longer complete: its connection was lost and the turn
    /// with it, or the session is over.
    fn gone(&self, lost_before: u32) -> Option<String> {
        if self.app.turns_lost() > lost_before {
            return Some("the connection was lost, and this turn with it".into());
        }
        match self.app.connection() {
            ConnectionState::Disconnected { reason } => {
                Some(format!("the session ended before the turn did: {reason}"))
            }
            _ => None,
        }
    }

    /// Ends the session as the end of input does, waiting a moment for the server to close.
    async fn close(&mut self) {
        if self.app.is_finished() {
            return;
        }
        apply(self.app, self.engine, Msg::EndSession).await;
        let deadline = Instant::now() + LEAVE_GRACE;
        while !self.app.is_finished() {
            tokio::select! {
                open = self.step() => if !open { break },
                () = tokio::time::sleep_until(deadline) => {
                    let ended = Msg::Server(ServerEvent::Closed(CloseInfo::ended_by_client()));
                    apply(self.app, self.engine, ended).await;
                    break;
                }
            }
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
