//! An offline replica of the echo rig (`tests/echo_rig.rs`), not real-time: the same reply
//! and phrase, the same room, fed to [`EchoPath`] as the audio worker feeds it, so the
//! canceller's echo floor can be measured in seconds instead of minutes of a live rig.
//!
//! What it models: the fake server's reply (espeak-ng, the rig's text, at the rig's speech
//! level) streamed four times faster than real time in 40 ms chunks after the user's turn;
//! the product's playback resampling (24 kHz → the speaker's 48 kHz) and its capture
//! resampling (48 kHz → 16 kHz); a PulseAudio speaker with 10 ms periods playing silence for
//! its first 0.75 s and then paused (corked) until the reply starts it again, with stamps that
//! jump by the pause; a mono mic with 30 ms periods whose callbacks come 0–4 ms late; the
//! worker handing over the far end and then the mic at each mic callback; the rig's room (the
//! speaker heard by the mic 100 ms later at unity gain, digitally: no noise); the user's
//! phrase, in another voice 3 dB over the echo, 3 s after the reply is first heard. Three
//! timings (`converse`'s seed) stand for the spread between rig runs: the room 100, 107 or
//! 113 ms (the loopback's own buffering), the speaker heard 20, 30 or 10 ms after its
//! callback, and its first stamps after the pause right, 15 ms late or 15 ms early, settling
//! over a second. The stamps' error alone changed nothing (the far end is released as it
//! arrives here); the room's and the latency's spread brought out the rig's early dips. What
//! it leaves out: the sound server's own re-timing (its loopback moves by some milliseconds
//! when a player joins), CPU starvation and lost audio.

// Test output is the test runner's: the replica prints its profile.
#![allow(clippy::disallowed_macros)]

use super::*;
use crate::audio::pcm::f32_to_i16;

/// The device rate of both null sinks.
pub(super) const DEVICE_RATE: u32 = 48_000;
/// The room: the speaker reaches the mic this much later (48 kHz samples).
const ROOM: usize = DEVICE_RATE as usize / 10;
/// The speaker's period and how long after its callback a frame is heard (48 kHz samples).
const SPEAKER_PERIOD: usize = 480;
const SPEAKER_LATENCY: usize = 960;
/// The mic's period (48 kHz samples).
const MIC_PERIOD: usize = 1440;
/// When the speaker stream pauses after playing silence, and when the user's turn starts the
/// reply streaming (48 kHz samples from the start).
const SPEAKER_PAUSES_AT: usize = DEVICE_RATE as usize * 3 / 4;
const TURN_AT: usize = DEVICE_RATE as usize * 3 / 2;
/// The rig's constants (tests/echo_rig.rs).
pub(super) const REPLY_DBFS: f64 = -26.0;
const PHRASE_OVER_ECHO_DB: f64 = 3.0;
const PHRASE_AFTER: usize = DEVICE_RATE as usize * 3;
const REPLY_TEXT: &str = "Well, it has been a busy day. In the morning I read about the weather in \
    the mountains, and after lunch I helped a friend plan a long walk along the river to the old \
    bridge.";
const PHRASE_TEXT: &str = "Sorry to cut in, could you tell me the time?";
const PHRASE_VOICE: &str = "en-us+f3";
/// The wire's rate.
const WIRE: usize = INPUT_RATE as usize;

/// espeak-ng's speech for `text` in `voice` (its default without one), mono f32 at its rate.
fn espeak(voice: Option<&str>, text: &str) -> (Vec<f32>, u32) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("speech.wav");
    let mut command = std::process::Command::new("espeak-ng");
    if let Some(voice) = voice {
        command.args(["-v", voice]);
    }
    let status = command.arg("-w").arg(&path).arg("--").arg(text).status();
    assert!(
        status.is_ok_and(|s| s.success()),
        "espeak-ng is needed (scripts/test.sh installs it)"
    );
    let clip = crate::audio::wav::read_mono(&path).unwrap();
    (clip.samples, clip.rate)
}

fn resample(samples: &[f32], from: u32, to: u32) -> Vec<f32> {
    StreamResampler::whole(samples, from, to).unwrap()
}

/// The speech level of `samples`, as the rig measures it.
fn speech_level_dbfs(samples: &[f32], rate: u32) -> f64 {
    crate::audio::pcm::speech_level_dbfs(samples, rate).expect("speech to measure")
}

fn scaled(samples: &[f32], rate: u32, dbfs: f64) -> Vec<f32> {
    let gain = 10f64.powf((dbfs - speech_level_dbfs(samples, rate)) / 20.0) as f32;
    samples.iter().map(|s| s * gain).collect()
}

pub(super) fn mean_square(x: &[f32]) -> f64 {
    x.iter().map(|v| f64::from(*v).powi(2)).sum::<f64>() / x.len().max(1) as f64
}

/// Power in dBFS, no lower than one 16-bit step (the rig's `wire_power_dbfs`).
pub(super) fn wire_power_dbfs(x: &[f32]) -> f64 {
    (10.0 * mean_square(x).log10()).max(20.0 * (1.0f64 / 32_768.0).log10())
}

/// The rig's sounds.
pub(super) struct Sounds {
    /// The reply at 24 kHz, as the fake server streams it.
    reply: Vec<f32>,
    /// The phrase as played into the mic (48 kHz) and at the wire's rate with its silences
    /// cut, and where its sound starts in the played one (wire samples).
    phrase: Vec<f32>,
    pub(super) phrase_reference: Vec<f32>,
    phrase_lead: usize,
}

impl Sounds {
    pub(super) fn new() -> Sounds {
        let (reply, rate) = espeak(None, REPLY_TEXT);
        let reply = scaled(&resample(&reply, rate, 24_000), 24_000, REPLY_DBFS);
        let (phrase, rate) = espeak(Some(PHRASE_VOICE), PHRASE_TEXT);
        let phrase = scaled(&phrase, rate, REPLY_DBFS + PHRASE_OVER_ECHO_DB);
        let wire = resample(&phrase, rate, INPUT_RATE);
        let loud: Vec<bool> = wire
            .chunks(WIRE / 100)
            .map(|w| mean_square(w).sqrt() > 0.01)
            .collect();
        let start = loud.iter().position(|&l| l).unwrap() * WIRE / 100;
        let end = ((loud.iter().rposition(|&l| l).unwrap() + 1) * WIRE / 100).min(wire.len());
        Sounds {
            reply,
            phrase: resample(&phrase, rate, DEVICE_RATE),
            phrase_reference: wire[start..end].to_vec(),
            phrase_lead: start,
        }
    }
}

/// A deterministic jitter source (xorshift).
struct Jitter(u64);

impl Jitter {
    /// Uniform in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// One conversation on the replica: what was sent (16 kHz, through PCM16), where the reply
/// began to stream and the phrase to play (wire samples).
pub(super) struct Replica {
    pub(super) sent: Vec<f32>,
    pub(super) reply_at: usize,
    pub(super) phrase_at: usize,
    pub(super) phrase_onset: usize,
}

/// 48 kHz samples as nanoseconds on the audio clock (never 0: that means "not stamped").
fn device_ns(sample: usize) -> u64 {
    (sample as f64 * 1e9 / f64::from(DEVICE_RATE)) as u64 + 1_000_000_000
}

/// Runs the rig's conversation through `path`; `seed` picks the timing (see the module's
/// doc) and the callbacks' lateness.
pub(super) fn converse(sounds: &Sounds, path: &mut EchoPath, seed: u64) -> Replica {
    let mut jitter = Jitter(seed | 1);
    // Runs differ in the room's exact delay (the loopback's own buffering), the speaker's
    // latency and how wrong its first stamps after a pause are.
    let variant = seed as usize % 3;
    let room = ROOM + [0, 351, 629][variant];
    let speaker_latency = [
        SPEAKER_LATENCY,
        SPEAKER_LATENCY * 3 / 2,
        SPEAKER_LATENCY / 2,
    ][variant];
    let stamp_error_ms = [0.0, 15.0, -15.0][variant];
    let reply_secs = sounds.reply.len() as f64 / 24_000.0;
    let len = TURN_AT + ((reply_secs + 1.5) * f64::from(DEVICE_RATE)) as usize;
    // What the room's speaker plays and the mic hears, by room time (48 kHz samples).
    let mut speaker_room = vec![0.0f32; len + 2 * SPEAKER_LATENCY + SPEAKER_PERIOD];
    let mut mic = vec![0.0f32; len];
    let mut playback = StreamResampler::new(24_000, DEVICE_RATE).unwrap();
    let mut queued: VecDeque<f32> = VecDeque::new();
    let mut streamed = 0;
    let mut playing = true;
    let mut heard_first: Option<usize> = None;
    let mut phrase_at: Option<usize> = None;
    // The speaker stream: frames played, the latest stamp, what waits for the worker.
    let mut speaker_frames = 0u64;
    let mut stamp: Option<(u64, u64)> = None;
    let mut reference: Vec<f32> = Vec::new();
    let mut reference_first = 0u64;
    // The capture side: resampler, 16 kHz samples made, what was sent.
    let mut capture = StreamResampler::new(DEVICE_RATE, INPUT_RATE).unwrap();
    let mut resampled = Vec::new();
    let mut made = 0u64;
    let mut processed = Vec::new();
    let mut sent = Vec::new();
    let mut mic_taken = 0;
    let mut chunk = Vec::new();
    for tick in 0..len / SPEAKER_PERIOD {
        let now = tick * SPEAKER_PERIOD;
        // The fake server streams a 40 ms chunk every 10 ms from the turn on.
        if now >= TURN_AT && streamed < sounds.reply.len() {
            let end = (streamed + 960).min(sounds.reply.len());
            chunk.clear();
            playback.push(&sounds.reply[streamed..end], &mut chunk);
            if end == sounds.reply.len() {
                playback.flush(&mut chunk);
            }
            queued.extend(&chunk);
            streamed = end;
            playing = true;
        }
        if now >= SPEAKER_PAUSES_AT && queued.is_empty() && heard_first.is_none() {
            playing = false;
        }
        if playing {
            let heard = now + speaker_latency;
            // A speaker that starts again reports its latency wrong at first (PulseAudio
            // interpolates it from stale timing), by `stamp_error_ms` settling over a second.
            let settled = heard_first.map_or(1.0, |h| {
                (heard.saturating_sub(h)) as f64 / f64::from(DEVICE_RATE)
            });
            let error = stamp_error_ms * 1e6 * (1.0 - settled).max(0.0);
            stamp = Some((speaker_frames, (device_ns(heard) as f64 + error) as u64));
            if reference.is_empty() {
                reference_first = speaker_frames;
            }
            for i in 0..SPEAKER_PERIOD {
                let s = queued.pop_front().unwrap_or(0.0);
                if s != 0.0 && heard_first.is_none() {
                    heard_first = Some(heard + i);
                }
                speaker_room[heard + i] = s;
                reference.push(s);
            }
            speaker_frames += SPEAKER_PERIOD as u64;
        }
        // The mic's callback for the period that ended by now, a little late.
        if !(now + SPEAKER_PERIOD).is_multiple_of(MIC_PERIOD) {
            continue;
        }
        let end = now + SPEAKER_PERIOD;
        let phrase_from = heard_first.map(|h| h + PHRASE_AFTER);
        for (r, m) in mic.iter_mut().enumerate().take(end).skip(mic_taken) {
            *m = r.checked_sub(room).map_or(0.0, |e| speaker_room[e]);
            if let Some(from) = phrase_from
                && let Some(p) = r.checked_sub(from).and_then(|i| sounds.phrase.get(i))
            {
                *m += p;
            }
        }
        if let Some(from) = phrase_from {
            phrase_at.get_or_insert(from);
        }
        let delivered = device_ns(end) + jitter.below(4_000_000);
        // The worker: the far end first, then the mic.
        path.played(&reference, reference_first, stamp);
        reference.clear();
        if !playing {
            path.far_end_silent(delivered + device_ns(speaker_latency) - device_ns(0));
        }
        resampled.clear();
        capture.push(&mic[mic_taken..end], &mut resampled);
        let first = made;
        made += resampled.len() as u64;
        let rate = f64::from(DEVICE_RATE);
        let (frame, at) = (mic_taken as u64, device_ns(mic_taken));
        let first_at =
            (at as f64 + (first as f64 / f64::from(INPUT_RATE) - frame as f64 / rate) * 1e9) as u64;
        processed.clear();
        path.process(&resampled, Some(first_at), Some(delivered), &mut processed);
        sent.extend(
            processed
                .iter()
                .map(|&s| f32::from(f32_to_i16(s)) / 32_768.0),
        );
        mic_taken = end;
    }
    let to_wire = |sample: usize| sample / 3;
    let phrase_at = to_wire(phrase_at.expect("the phrase was played"));
    Replica {
        sent,
        reply_at: to_wire(TURN_AT),
        phrase_at,
        phrase_onset: phrase_at + sounds.phrase_lead,
    }
}

/// The echo window's power in half-second steps (dBFS).
pub(super) fn echo_profile(run: &Replica) -> Vec<f64> {
    run.sent[run.reply_at..run.phrase_at]
        .chunks(WIRE / 2)
        .map(wire_power_dbfs)
        .collect()
}

/// The phrase's correlation with what was sent near its onset, in quarter-second pieces each
/// within 30 ms of where the whole was found (as the rig measures it), its gain, and where
/// the whole was found (wire samples).
pub(super) fn phrase_found(run: &Replica, reference: &[f32]) -> (f64, f64, usize) {
    let best = |piece: &[f32], from: usize, to: usize| -> (usize, f64) {
        let energy = mean_square(piece) * piece.len() as f64;
        (from..=to)
            .filter(|lag| lag + piece.len() <= run.sent.len())
            .map(|lag| {
                let window = &run.sent[lag..lag + piece.len()];
                let dot: f64 = window
                    .iter()
                    .zip(piece)
                    .map(|(a, b)| f64::from(*a) * f64::from(*b))
                    .sum();
                let norm = (mean_square(window) * window.len() as f64 * energy).sqrt();
                (lag, if norm > 0.0 { dot / norm } else { 0.0 })
            })
            .fold((from, f64::MIN), |a, b| if b.1 > a.1 { b } else { a })
    };
    let (at, _) = best(
        reference,
        run.phrase_onset.saturating_sub(WIRE / 50),
        run.phrase_onset + WIRE / 20,
    );
    let (mut correlation, mut dot, mut weight) = (0.0, 0.0, 0.0);
    for (n, piece) in reference.chunks(WIRE / 4).enumerate() {
        let near = at + n * WIRE / 4;
        let slack = WIRE * 3 / 100;
        let (lag, found) = best(piece, near.saturating_sub(slack), near + slack);
        let energy = mean_square(piece) * piece.len() as f64;
        correlation += found * energy;
        dot += run.sent[lag..lag + piece.len()]
            .iter()
            .zip(piece)
            .map(|(a, b)| f64::from(*a) * f64::from(*b))
            .sum::<f64>();
        weight += energy;
    }
    (correlation / weight, dot / weight, at)
}

fn profile(values: &[f64]) -> String {
    values
        .iter()
        .map(|v| format!("{v:.0}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Prints the replica's figures for `aec` against `off` as the rig prints them: echo
/// suppressed until the phrase (whole and per half-second), the phrase's correlation, its
/// level and its first 100 ms's level against `off`'s.
pub(super) fn figures(sounds: &Sounds, off: &Replica, aec: &Replica, label: &str) {
    let window = |run: &Replica| wire_power_dbfs(&run.sent[run.reply_at..run.phrase_at]);
    let suppression = window(off) - window(aec);
    let per_half_second: Vec<f64> = echo_profile(off)
        .iter()
        .zip(echo_profile(aec))
        .map(|(o, a)| o - a)
        .collect();
    let (correlation, gain, at) = phrase_found(aec, &sounds.phrase_reference);
    let (_, off_gain, off_at) = phrase_found(off, &sounds.phrase_reference);
    // The phrase's first 100 ms against the open mic's.
    let onset = |run: &Replica, at: usize| wire_power_dbfs(&run.sent[at..at + WIRE / 10]);
    let onset_db = onset(aec, at) - onset(off, off_at);
    let phrase_level_db = 20.0 * (gain / off_gain).log10();
    eprintln!(
        "replica {label}: echo suppressed {suppression:.1} dB until the phrase (per 0.5 s: {} \
         dB); phrase correlation {correlation:.3}, level {phrase_level_db:+.1} dB vs off, its \
         first 100 ms {onset_db:+.1} dB",
        profile(&per_half_second)
    );
}

/// The replica's figures for three timings of the devices, for the canceller as configured
/// and without its echo floor (`cargo nextest run -p livetalk --lib --run-ignored
/// only -E 'test(replica_profile)' --no-capture`; a few minutes in a debug build).
#[test]
#[ignore = "a profile to read, minutes in a debug build"]
fn replica_profile() {
    let sounds = Sounds::new();
    let mut off_path = EchoPath::new(EchoMode::Off, true, Some(DEVICE_RATE)).unwrap();
    let off = converse(&sounds, &mut off_path, 1);
    for (name, floor) in [("as configured", true), ("without the echo floor", false)] {
        for seed in [0, 1, 2] {
            let mut path = EchoPath::new(EchoMode::Aec, true, Some(DEVICE_RATE)).unwrap();
            path.floor = floor;
            let aec = converse(&sounds, &mut path, seed);
            figures(&sounds, &off, &aec, &format!("{name}, timing {seed}"));
        }
    }
}

/// The replica is the rig: with the mic open the echo reaches it at the reply's level, and
/// the phrase is found where it was spoken, whole (the rig's own checks of its `off` run).
#[test]
fn the_rig_replica_hears_the_echo_and_the_phrase_as_the_rig_does() {
    let sounds = Sounds::new();
    let mut path = EchoPath::new(EchoMode::Off, false, Some(DEVICE_RATE)).unwrap();
    let off = converse(&sounds, &mut path, 1);
    let echo = speech_level_dbfs(&off.sent[off.reply_at..off.phrase_at], INPUT_RATE);
    assert!(
        (echo - REPLY_DBFS).abs() < 3.0,
        "the echo is at {echo:.1} dBFS, the reply at {REPLY_DBFS}"
    );
    let (correlation, gain, at) = phrase_found(&off, &sounds.phrase_reference);
    assert!(correlation > 0.75, "the phrase correlates {correlation:.3}");
    assert!(gain > 0.8, "the phrase arrives at {gain:.2} of its level");
    assert!(
        at.abs_diff(off.phrase_onset) < WIRE / 50,
        "the phrase found at {at}, spoken at {}",
        off.phrase_onset
    );
}
