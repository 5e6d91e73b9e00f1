//! Replay: a recording as the [`Source`] of the drive loop. It hands the app the messages it
//! applied in the original run, at the recorded pace (or at once), so what replay shows is
//! what the screen showed; nothing is sent and no tool runs again. It can play the recorded
//! model audio on a speaker, and pause and step under the user's keys.

use std::path::Path;
use std::time::Duration;

use super::format::convert::{devices_from, wire_frame};
use super::{Applied, Recording, Steps};
use crate::app::{App, AppInit, Effect, Msg, ReplayEffect, ReplayProgress, WireFrame};
use crate::audio::AudioWorker;
use crate::driver::Source;
use livetalk_live::ServerEvent;

/// How fast a replay runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pacing {
    /// As fast as possible.
    Instant,
    /// Recorded pace divided by this factor.
    Speed(f64),
}

/// The longest a paced replay waits between two recorded moments, whatever the recording and
/// the speed say: a quiet minute is shown as a minute at most, and a damaged time cannot hang
/// a replay.
pub const MAX_WAIT: Duration = Duration::from_secs(60);

/// When each recorded moment is due, at the given pace; can be paused.
pub struct Pace {
    start: tokio::time::Instant,
    pacing: Pacing,
    /// The recorded time of the latest moment applied; recorded times may step back a little,
    /// and the replay never goes back in time.
    last: f64,
    /// Seconds of replay from `start` to the latest moment applied: the recorded gaps divided
    /// by the speed, each at most [`MAX_WAIT`].
    played: f64,
    paused_at: Option<tokio::time::Instant>,
}

impl Pace {
    pub fn new(pacing: Pacing) -> Self {
        Pace {
            start: tokio::time::Instant::now(),
            pacing,
            last: 0.0,
            played: 0.0,
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

    /// Multiplies the speed by `factor`, within the speeds `--speed` takes; moments already
    /// applied keep the pace they had.
    pub fn change_speed(&mut self, factor: f64) {
        if let Pacing::Speed(speed) = self.pacing {
            let speed = if speed.is_finite() && speed > 0.0 {
                speed
            } else {
                1.0
            };
            self.pacing = Pacing::Speed(
                (speed * factor).clamp(livetalk_mock::MIN_SPEED, livetalk_mock::MAX_SPEED),
            );
        }
    }

    /// The pace in percent of the recorded one (`None`: as fast as possible).
    pub fn speed_percent(&self) -> Option<u32> {
        self.speed().map(|speed| (speed * 100.0).round() as u32)
    }

    /// Makes a step taken by hand while paused count as having happened now.
    pub fn stepped_to(&mut self, t: f64) {
        self.advance(t);
        if let Some(paused_at) = self.paused_at {
            let due = self.at(self.played);
            if due > paused_at {
                self.start -= due - paused_at;
            }
        }
    }

    /// The moment at recorded time `t` was applied.
    pub fn advance(&mut self, t: f64) {
        self.played += self.wait_before(t);
        self.last = self.last.max(t);
    }

    fn speed(&self) -> Option<f64> {
        match self.pacing {
            Pacing::Instant => None,
            Pacing::Speed(speed) if speed.is_finite() && speed > 0.0 => Some(speed),
            Pacing::Speed(_) => Some(1.0),
        }
    }

    /// Seconds of replay between the latest moment applied and the one at `t`.
    fn wait_before(&self, t: f64) -> f64 {
        let Some(speed) = self.speed() else {
            return 0.0;
        };
        let gap = (t - self.last).max(0.0) / speed;
        if gap.is_finite() {
            gap.min(MAX_WAIT.as_secs_f64())
        } else {
            MAX_WAIT.as_secs_f64()
        }
    }

    /// `start` plus `seconds`, saturating rather than overflowing.
    fn at(&self, seconds: f64) -> tokio::time::Instant {
        let offset = Duration::try_from_secs_f64(seconds.max(0.0)).unwrap_or(Duration::MAX);
        self.start
            .checked_add(offset)
            .unwrap_or_else(|| self.start + Duration::from_secs(365 * 24 * 3600))
    }

    /// When the moment at recorded time `t` is due (`None`: now).
    pub fn due(&self, t: f64) -> Option<tokio::time::Instant> {
        self.speed()?;
        Some(self.at(self.played + self.wait_before(t)))
    }
}

/// A recording as a source of messages, read from its file as they are due.
pub struct Replay {
    steps: std::iter::Peekable<Steps>,
    total: usize,
    applied: usize,
    pace: Pace,
    /// When the recording started, for the local time of day each event arrived.
    started_at: Option<jiff::Zoned>,
    /// Plays the recorded model audio, when asked to. Its events describe this machine's
    /// devices, not the recording's, so they are drained and not shown.
    speaker: Option<AudioWorker>,
    /// A step asked for while paused.
    step_once: bool,
    /// The progress changed since the app was last told.
    progress_due: bool,
    /// The recording's wire lines as frames, for the event inspector, each due at its time
    /// (only when asked for: see [`Replay::with_frames`]).
    frames: std::iter::Peekable<Frames>,
}

/// Frames a recording's wire lines may be out of time order by, at most: each is written when
/// the app has it, a little after it crossed the wire.
const FRAMES_REORDERED: usize = 1024;

/// A recording's wire lines as frames in time order, read from the file as they are wanted:
/// a window of the next [`FRAMES_REORDERED`] is held and the earliest of it handed on.
pub struct Frames {
    lines: Option<Box<dyn Iterator<Item = (f64, WireFrame)>>>,
    window: std::collections::BinaryHeap<Due>,
    /// Lines taken in so far: the order among frames of the same time.
    taken: u64,
}

/// One frame in the window, earliest (then first read) on top.
struct Due(f64, u64, WireFrame);

impl PartialEq for Due {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}
impl Eq for Due {}
impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Due {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.0.total_cmp(&self.0).then(other.1.cmp(&self.1))
    }
}

impl Frames {
    fn none() -> Frames {
        Frames {
            lines: None,
            window: std::collections::BinaryHeap::new(),
            taken: 0,
        }
    }
}

impl Iterator for Frames {
    type Item = (f64, WireFrame);

    fn next(&mut self) -> Option<(f64, WireFrame)> {
        while self.window.len() < FRAMES_REORDERED {
            let Some((t, frame)) = self.lines.as_mut().and_then(Iterator::next) else {
                self.lines = None;
                break;
            };
            self.window.push(Due(t, self.taken, frame));
            self.taken += 1;
        }
        self.window.pop().map(|Due(t, _, frame)| (t, frame))
    }
}

impl Replay {
    /// The recording's messages, paced; warnings (a damaged recording) are returned to show.
    pub fn new(recording: &Recording, pacing: Pacing) -> (Replay, Vec<String>) {
        let steps = recording.steps();
        let mut warnings = recording.warnings.clone();
        warnings.extend(steps.warnings());
        warnings.extend(recording.audio_warnings());
        let replay = Replay {
            total: steps.total(),
            steps: steps.peekable(),
            applied: 0,
            pace: Pace::new(pacing),
            started_at: recording.meta.started_at.parse().ok(),
            speaker: None,
            step_once: false,
            progress_due: true,
            frames: Frames::none().peekable(),
        };
        (replay, warnings)
    }

    /// Also hands the app the recording's frames (its `send` and `recv` lines) at their
    /// times, so the event inspector shows them; they are not counted as the replay's events.
    pub fn with_frames(mut self, recording: &Recording) -> Self {
        let base = std::time::Instant::now();
        let lines = recording
            .lines()
            .filter_map(move |line| Some((line.t, wire_frame(&line, base)?)));
        self.frames = Frames {
            lines: Some(Box::new(lines)),
            window: std::collections::BinaryHeap::new(),
            taken: 0,
        }
        .peekable();
        self
    }

    /// How many messages the recording holds.
    pub fn total(&self) -> usize {
        self.total
    }

    /// Plays the recorded model audio on this audio worker's speaker.
    pub fn play_on(&mut self, speaker: AudioWorker) {
        self.speaker = Some(speaker);
    }

    fn progress(&self) -> Msg {
        Msg::ReplayProgress(ReplayProgress {
            applied: self.applied,
            total: self.total,
            paused: self.pace.is_paused(),
            speed_percent: self.pace.speed_percent(),
        })
    }

    /// The recorded message as the app takes it: a session event carries the local time it
    /// arrived, so the tool log shows when calls came in then, not now.
    fn replayed(&self, step: Applied) -> Msg {
        match step.msg {
            Msg::Server(event) => match local_time(self.started_at.as_ref(), step.t) {
                Some(arrived_at) => Msg::Replayed { event, arrived_at },
                None => Msg::Server(event),
            },
            msg => msg,
        }
    }

    /// Plays what the original run played (the audio effects are the app's, but a replay
    /// plays the recorded samples whatever devices it has).
    fn play(&self, msg: &Msg) {
        let Some(speaker) = self.speaker.as_ref().map(AudioWorker::audio) else {
            return;
        };
        match msg {
            Msg::Server(ServerEvent::ModelAudio { pcm, .. }) => {
                speaker.play(pcm.clone(), std::time::Instant::now())
            }
            Msg::Server(ServerEvent::TurnComplete { .. }) => speaker.end_turn(),
            Msg::Server(ServerEvent::Interrupted) | Msg::BargeIn => {
                speaker.flush(std::time::Instant::now())
            }
            _ => {}
        }
    }
}

impl Source for Replay {
    async fn next(&mut self) -> Option<Msg> {
        if self.progress_due {
            self.progress_due = false;
            return Some(self.progress());
        }
        // A frame is handed over before the events applied at its time, as in the live run.
        let frame_t = self.frames.peek().map(|(t, _)| *t);
        let (frame_first, step_t) = match (frame_t, self.steps.peek().map(|s| s.t)) {
            (Some(frame), Some(step)) if frame <= step => (true, frame),
            (_, Some(step)) => (false, step),
            (Some(frame), None) => (true, frame),
            (None, None) => return None,
        };
        let due = if self.step_once {
            // A step by hand brings the frames before its event along.
            if !frame_first {
                self.step_once = false;
            }
            self.pace.stepped_to(step_t);
            None
        } else if self.pace.is_paused() {
            Some(None)
        } else {
            self.pace.due(step_t).map(Some)
        };
        if let Some(due) = due {
            // Waiting: for the step's time (or, paused, for the user), draining the speaker.
            let until = async {
                match due {
                    Some(due) => tokio::time::sleep_until(due).await,
                    None => std::future::pending().await,
                }
            };
            tokio::pin!(until);
            loop {
                tokio::select! {
                    () = &mut until => break,
                    output = async {
                        match &mut self.speaker {
                            Some(speaker) => speaker.next(false).await,
                            None => std::future::pending().await,
                        }
                    } => {
                        if output.is_none() {
                            self.speaker = None;
                        }
                    }
                }
            }
        }
        if frame_first {
            let (t, frame) = self.frames.next()?;
            self.pace.advance(t);
            return Some(Msg::Wire(frame));
        }
        let step = self.steps.next()?;
        self.pace.advance(step.t);
        self.applied += 1;
        self.progress_due = true;
        self.play(&step.msg);
        Some(self.replayed(step))
    }

    async fn carry_out(&mut self, effect: Effect) {
        match effect {
            Effect::Replay(ReplayEffect::Pause) => {
                self.pace.toggle_pause();
                self.progress_due = true;
                // Paused means quiet; the rest of that reply is not resumed.
                if self.pace.is_paused()
                    && let Some(speaker) = &self.speaker
                {
                    speaker.audio().flush(std::time::Instant::now());
                }
            }
            Effect::Replay(ReplayEffect::Step) if self.pace.is_paused() => self.step_once = true,
            Effect::Replay(ReplayEffect::Speed(factor)) => {
                self.pace.change_speed(factor);
                self.progress_due = true;
            }
            // Everything else happened in the original run and is in the recording.
            _ => {}
        }
    }
}

/// The local time of day at `t` seconds into a recording that started at `start`.
fn local_time(start: Option<&jiff::Zoned>, t: f64) -> Option<jiff::civil::Time> {
    let offset = jiff::SignedDuration::try_from_secs_f64(t).ok()?;
    Some(start?.checked_add(offset).ok()?.time())
}

/// The app as it was when the recorded session started, about to be shown `total` messages.
pub fn initial_app(recording: &Recording, log_path: Option<&Path>, total: usize) -> App {
    let meta = &recording.meta;
    App::new(AppInit {
        voice: meta.voice.clone(),
        endpoint_label: meta.endpoint_host.clone(),
        recording: Some(recording.dir.display().to_string()),
        replay: Some(total),
        audio: meta.audio.map(Into::into),
        no_color: crate::output::no_color(),
        hyperlinks: crate::output::hyperlinks(),
        log_path: log_path.map(|p| p.display().to_string()),
        price_book: crate::pricing::PriceBook::recorded(
            meta.config.get("pricing"),
            &meta.endpoint_host,
        ),
        ..AppInit::new(
            meta.model.clone(),
            meta.offline,
            devices_from(meta.devices.clone()),
        )
    })
}
