//! The microphone's voice processing between the 16 kHz resampler and the framer: WebRTC's
//! echo canceller (AEC3), high-pass filter and noise suppressor from the `aec3` crate, fed
//! with what the speaker really played; and the canceller's figures (the delay it found,
//! echo return loss enhancement, whether it has converged) for the audio popup.

use aec3::api::config::EchoCanceller3Config;

use std::collections::VecDeque;

mod chain;

use chain::{Canceller, Chain, Stage};

use super::echo_watch::EchoWatch;
use super::options::EchoMode;
use super::pcm::Framer;
use super::pcm::{INPUT_RATE, energy_dbfs};
use super::resample::StreamResampler;

/// One 10 ms frame at 16 kHz: the unit every processing stage works in.
pub const FRAME: usize = (INPUT_RATE / 100) as usize;

/// Nanoseconds per 16 kHz sample.
const NS_PER_SAMPLE: f64 = 1e9 / INPUT_RATE as f64;
/// How far ahead of the mic the far end is handed to the canceller: it must see the far end
/// before its echo, whatever the few milliseconds by which a host's stamps are off (with
/// 10 ms, rig runs at 44.1 kHz now and then lost the echo for a second), and a room adds only
/// a little to this.
const LEAD_NS: f64 = 20e6;
/// The least gap in the mic's samples that is filled in (ns): more than the few milliseconds
/// a host's stamps wobble by, less than the 10 ms fragment a server drops.
const GAP_MIN_NS: f64 = 8e6;
/// 16 kHz mic samples taken before gaps are looked for: until then the timelines are still
/// being drawn from a few callbacks.
const GAP_AFTER: u64 = INPUT_RATE as u64 / 2;
/// How closely the stamps and the arrival must agree on a gap (ns): the arrival adds the
/// callback's own lateness, a few milliseconds.
const GAP_AGREE_NS: f64 = 5e6;
/// Calls in a row that must show a gap before it is filled, when only the arrival shows it.
const GAP_CONFIRM: u32 = 3;
/// The longest gap filled (ns). After a longer stall (a suspended laptop, a device that came
/// back) the timelines start afresh instead: seconds of silence sent at once would be a burst
/// the service does not expect; the far end heard meanwhile is dropped (see below).
const GAP_MAX_NS: f64 = 200e6;
/// After a stall, how much of the far end heard before the mic's next frame still goes to
/// the canceller (ns): one frame, so it goes on getting one far-end frame per mic frame.
/// Handed what was heard during the stall at once, even 100 ms of it, AEC3 lost the echo
/// (3 dB removed after a 2 s stall in the unit test, 44 dB with one frame).
const STALL_KEEP_NS: f64 = 10e6;
/// Far-end frames held at most: past this the oldest go in unaligned.
const RENDER_QUEUE_MAX: usize = 300;
/// AEC3 looks for the echo up to about this far behind the far end (10 ms frames). A speaker
/// whose timestamps understate its buffering by more leaves the echo out of its reach: the
/// coarse search below finds it and holds the far end back by the difference.
const CANCELLER_REACH: usize = 30;
/// The coarse search: loudness envelopes of the far end and the raw mic over 3 s, lags up
/// to 1.5 s, every second.
const COARSE_HISTORY: usize = 300;
const COARSE_MAX_LAG: usize = 150;
const COARSE_EVERY: u64 = 100;
/// Envelope correlation that counts as having found the echo.
const COARSE_FOUND: f32 = 0.6;

/// Far-end frames quieter than this (dBFS) teach the canceller nothing and are left out of
/// the ERLE figure.
const FAR_END_ACTIVE_DBFS: f32 = -45.0;
/// Render frames (10 ms each) whose loudest counts as "the far end now": longer than the
/// echo paths of laptops and rooms.
const FAR_END_WINDOW: usize = 30;
/// Time constant of the ERLE and ERL figures, in far-end-active frames (about a second).
const FIGURE_FRAMES: f32 = 100.0;
/// ERLE at and above which a canceller that has locked on to a delay counts as converged.
const CONVERGED_ERLE_DB: f32 = 10.0;

// The echo floor: while the model is heard and the near-end detector hears nobody talking
// over it, what the mic sends is digital silence, and while someone does, AEC3's linear output
// (the mic with the echo its filter found taken out, without the suppressor, which takes some
// 80 ms to open for them and pares their words after that). AEC3 alone stops short of silence
// by design (it leaves residual echo it deems inaudible and fills in comfort noise), and while
// its filter is still converging, in the first second or two of the first reply, its residual
// reached only 22–45 dB below the echo on the echo rig: loud enough for the service to hear
// the model and interrupt it. A sound server's canceller sends silence there too.

/// Frames from which the canceller removed at least this much (dB) are taken as echo alone,
/// and teach the near-end detector how loud the echo comes back.
const ECHO_ALONE_DB: f32 = 20.0;
/// The near-end detector: a person talks when the raw mic is this much (dB) louder than the
/// echo could be — the far end at the echo's lag, at the echo's usual return. It needs no
/// converged filter, so it opens the floor at a person's first loud syllable, where AEC3's
/// suppressor takes some 80 ms to open.
const NEAR_MARGIN_DB: f32 = 3.0;
/// The margin until the echo's return has been learnt against the far end at the echo's lag.
/// Before the lag is found the far end is the loudest of the last 300 ms, and a return learnt
/// against that sits a few dB under the one at the lag: at 3 dB a loud frame of a first
/// reply's echo counted as someone talking (before the lag: the model took the 0.3 s of
/// unconverged echo that went out for speech, one echo-rig run in three), and so did frames
/// just after the lag was found (echo left 13–20 dB down for a second, two runs in five).
/// An 8 dB margin throughout cost a person's phrase its first syllables (correlation 0.69).
const NEAR_MARGIN_UNALIGNED_DB: f32 = 8.0;
/// Echo-alone frames learnt at the echo's lag before the near-end margin narrows.
const RETURN_LEARNT_AT_LAG: u32 = 50;
/// A mic frame quieter than this (dBFS) is nobody talking.
const NEAR_MIN_DBFS: f32 = -55.0;
/// Frames the floor stays open after the near end was last heard: over the pauses between
/// words.
const NEAR_HOLD_FRAMES: u32 = 30;
/// Frames either side of the echo's lag whose loudest stands for the far end in the echo now:
/// the lag is found to a frame once a second, a frame of echo straddles two of the far end,
/// and a sound server moves its loopback by some milliseconds when another player joins.
const LAG_SLACK: usize = 4;
/// Whether the room gives the speaker back at all: the raw mic's loudness over the last 2 s
/// against the far end's, at lags up to a second, every 100 ms once the far end has sounded
/// for 200 ms of it (only once every lag could be searched is "no echo" concluded). With
/// headphones the mic does not follow the far end (below [`NO_ECHO`]): the floor stays off and
/// AEC3's linear output goes out while the model is heard (AEC3's suppressor, never finding an
/// echo path, goes on assuming one as loud as the far end). Until the first judgement the
/// floor presumes an echo: the first reply's first echo is what AEC3 misses most.
const EVIDENCE_FRAMES: usize = 200;
const EVIDENCE_MAX_LAG: usize = COARSE_HISTORY - EVIDENCE_FRAMES;
const EVIDENCE_EVERY: u64 = 10;
const EVIDENCE_LOUD: usize = 20;
const NO_ECHO: f32 = 0.3;
/// The echo's return the detector starts from (dB, the 90th percentile of mic over far end in
/// echo-alone frames): as loud as the speaker played it, the loudest a room gives back. It
/// learns the room's from there.
const ECHO_RETURN_START_DB: f32 = 0.0;

/// The echo canceller's state, as the audio popup shows it.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct EchoFigures {
    /// The mode in effect.
    pub mode: EchoMode,
    /// Whether the canceller runs: `aec` with a speaker and a device microphone open.
    pub cancelling: bool,
    /// Noise suppression on the microphone.
    pub noise_suppression: bool,
    /// Capture plus playback latency as the devices' clocks report it (ms).
    pub device_delay_ms: Option<u32>,
    /// The echo path delay the canceller locked on to (ms).
    pub delay_ms: Option<u32>,
    /// Echo return loss enhancement: how much quieter the echo leaves than it came in (dB),
    /// over the last second or so of far-end audio.
    pub erle_db: Option<f32>,
    /// Echo return loss: how much quieter the echo reaches the mic than the speaker played
    /// it (dB). Large with headphones: there is no echo to cancel.
    pub erl_db: Option<f32>,
    /// The canceller has found the echo path and removes at least 10 dB of it.
    pub converged: bool,
    /// Seconds of far-end audio the canceller has heard since it started.
    pub far_end_secs: f32,
    /// The self-interruption detector: the speaker was loud and what the microphone sends
    /// followed it, within the last second.
    pub echo_heard: bool,
}

/// A running mean that forgets with a time constant of [`FIGURE_FRAMES`].
#[derive(Debug, Default, Clone, Copy)]
struct Decaying(f32);

impl Decaying {
    fn add(&mut self, value: f32) {
        self.0 += (value - self.0) / FIGURE_FRAMES;
    }
}

/// Per-frame ratios in dB are capped here: a frame cancelled to digital silence would
/// otherwise swamp the mean.
const RATIO_CAP_DB: f32 = 60.0;

fn ratio_db(numerator: f32, denominator: f32) -> f32 {
    (energy_dbfs(numerator) - energy_dbfs(denominator)).clamp(0.0, RATIO_CAP_DB)
}

/// The microphone's processing and the speaker reference feeding it.
pub struct EchoPath {
    mode: EchoMode,
    noise_suppression: bool,
    chain: Chain,
    /// The speaker's rate → 16 kHz, for the canceller and the watch.
    reference: Option<StreamResampler>,
    reference_16k: Vec<f32>,
    render_framer: Framer,
    /// Far-end frames waiting for the mic to reach the moment they are heard, with that
    /// moment (ns on the audio clock; `None` when the host gives no timestamps).
    render_queue: VecDeque<(Option<f64>, [f32; FRAME])>,
    /// The speaker-stream frame this path's far end starts at.
    render_first_frame: Option<u64>,
    /// 16 kHz far-end samples framed so far.
    render_made: u64,
    /// When this path's first 16 kHz far-end sample is heard (ns), from the stamps.
    render_base: Option<f64>,
    /// When this path's first 16 kHz mic sample was captured (ns), from the stamps.
    capture_base: Option<f64>,
    /// When it had arrived at the latest (ns): the earliest arrival seen, as a timeline.
    delivery_base: Option<f64>,
    /// The stamps have claimed more latency than the samples' arrival allows (logged once).
    capture_stamps_doubted: bool,
    capture_framer: Framer,
    /// 16 kHz mic samples taken so far.
    capture_in: u64,
    /// Loudness envelopes (RMS per 10 ms frame) of the far end as handed to the canceller and
    /// of the raw mic, for the coarse delay search.
    far_history: VecDeque<f32>,
    mic_history: VecDeque<f32>,
    /// How much longer the far end is held for an echo beyond the canceller's reach (ns), and
    /// the lag last found (frames), which must be found twice before it is acted on.
    extra_hold_ns: f64,
    coarse_seen: Option<usize>,
    /// The echo's lag behind the far end as handed to the canceller (frames), from the echo's
    /// evidence and the coarse search: where the near-end detector looks for the far end in
    /// the echo now.
    echo_lag: Option<usize>,
    /// The near-end detector's echo return (dB), its 90th percentile, and the frames the
    /// echo floor stays open for a person talking.
    echo_return_db: f32,
    /// Echo-alone frames the return has learnt from at the echo's lag (up to
    /// [`RETURN_LEARNT_AT_LAG`]).
    return_learnt_at_lag: u32,
    near_hold: u32,
    /// Whether the mic carries the speaker's echo, once judged.
    echo_found: Option<bool>,
    /// The echo floor is on (off only where the tests and the rig's replica compare).
    floor: bool,
    /// The far end's energies over the last [`FAR_END_WINDOW`] frames (newest last), so the
    /// ERLE figure counts only frames with echo to remove.
    far_end_recent: VecDeque<f32>,
    watch: EchoWatch,
    /// Mean per-frame ERLE and ERL (dB) over far-end-active frames.
    erle: Decaying,
    erl: Decaying,
    far_end_frames: u64,
    device_delay_ms: Option<u32>,
    /// Scratch for the canceller's linear output (the mic with the echo its filter found
    /// taken out, before the suppressor) of the frames it lets out now.
    linear: Vec<f32>,
    /// Pipeline errors seen (logged once): the frame goes through unprocessed.
    errors: u64,
    /// Calls in a row whose samples both timelines say came after a gap, the least gap they
    /// showed (ns), and the 16 kHz samples filled in for gaps so far.
    gap_calls: u32,
    gap_least: f64,
    gap_samples: u64,
    /// The mic's timelines started afresh after a stall: the far end heard during it is
    /// dropped rather than handed to the canceller in one burst.
    stalled: bool,
    /// While the speaker stream is paused: when the next frame of its silence is heard (ns).
    silent_at: Option<f64>,
}

fn energy(frame: &[f32]) -> f32 {
    frame.iter().map(|s| s * s).sum::<f32>() / frame.len().max(1) as f32
}

impl EchoPath {
    /// The processing for `mode`; `speaker_rate` is the output device's rate when one is open
    /// (without it there is nothing to cancel, and `aec` runs as noise suppression alone).
    pub fn new(
        mode: EchoMode,
        noise_suppression: bool,
        speaker_rate: Option<u32>,
    ) -> anyhow::Result<EchoPath> {
        let chain = if mode == EchoMode::Aec && speaker_rate.is_some() {
            let mut config = EchoCanceller3Config::default();
            // Pre-echo detection realigns the canceller to a weak peak before the strongest
            // one. The far end already reaches it lined up by the device clocks, with the
            // lead as room, so it only moved the alignment: replayed on 24 recorded rig runs,
            // without it two removed more echo (25.6 → 42.9 dB, 47.6 → 49.5) and none less
            // (and the delay search skips its slower accumulated-error core).
            config.delay.detect_pre_echo = false;
            // A person talking over the model: once AEC3's suppressor has found the near end
            // dominant, let it through. The default near-end masks (echo-to-near-end ratio
            // 1.09/1.1 low, 0.1/0.3 high) still cut the person's voice wherever the residual
            // echo estimate came near it, and the echo tail it assumes (0.83) lingers over
            // the pauses between their words. Replayed on six recorded echo-rig runs (raw mic
            // and far end, 44.1 and 48 kHz, noise suppression on), the phrase correlated
            // 0.66–0.79 instead of 0.61–0.74 and lost 3.6–3.9 dB instead of 4.3–5.5, and the
            // echo removed before the person spoke was the same in every run (26–45 dB): these
            // masks apply only in the near-end state. After the person stopped, four runs kept
            // 65–73 dB; the two in which the rig's delay moved while they spoke kept 13–14 dB
            // instead of 22–28 until the filter had caught up.
            let nearend = &mut config.suppressor.nearend_tuning;
            nearend.mask_lf.enr_transparent = 5.0;
            nearend.mask_lf.enr_suppress = 10.0;
            nearend.mask_hf.enr_transparent = 2.0;
            nearend.mask_hf.enr_suppress = 5.0;
            config.ep_strength.nearend_len = 0.3;
            let canceller = Canceller::new(config, noise_suppression)
                .map_err(|e| anyhow::anyhow!("cannot start the echo canceller: {e}"))?;
            Chain::Cancel(Box::new(canceller))
        } else if noise_suppression {
            let stage = Stage::clean()
                .map_err(|e| anyhow::anyhow!("cannot start noise suppression: {e}"))?;
            Chain::Clean(stage)
        } else {
            Chain::Raw
        };
        let reference = match speaker_rate {
            Some(rate) => Some(StreamResampler::new(rate, INPUT_RATE)?),
            None => None,
        };
        Ok(EchoPath {
            mode,
            noise_suppression,
            chain,
            reference,
            reference_16k: Vec::with_capacity(FRAME * 10),
            render_framer: Framer::new(FRAME),
            render_queue: VecDeque::with_capacity(RENDER_QUEUE_MAX + 1),
            render_first_frame: None,
            render_made: 0,
            render_base: None,
            capture_base: None,
            delivery_base: None,
            capture_stamps_doubted: false,
            capture_framer: Framer::new(FRAME),
            capture_in: 0,
            far_history: VecDeque::with_capacity(COARSE_HISTORY + 1),
            mic_history: VecDeque::with_capacity(COARSE_HISTORY + 1),
            extra_hold_ns: 0.0,
            coarse_seen: None,
            echo_lag: None,
            echo_return_db: ECHO_RETURN_START_DB,
            return_learnt_at_lag: 0,
            near_hold: 0,
            echo_found: None,
            floor: true,
            far_end_recent: VecDeque::with_capacity(FAR_END_WINDOW),
            watch: EchoWatch::new(),
            erle: Decaying::default(),
            erl: Decaying::default(),
            far_end_frames: 0,
            device_delay_ms: None,
            linear: Vec::with_capacity(FRAME * 4),
            errors: 0,
            gap_calls: 0,
            gap_least: f64::INFINITY,
            gap_samples: 0,
            stalled: false,
            silent_at: None,
        })
    }

    /// 16 kHz samples of silence put in place of mic samples lost on the way, so far.
    pub fn gap_samples(&self) -> u64 {
        self.gap_samples
    }

    /// Whether the canceller runs.
    pub fn cancelling(&self) -> bool {
        matches!(self.chain, Chain::Cancel(_))
    }

    /// Takes what the speaker played (mono, at the speaker's rate): the canceller's far end.
    /// `first_frame` is the index of the first of `samples` in the speaker's stream and
    /// `heard` the stream's latest stamp (frame, when it is heard), when the host gives one.
    pub fn played(&mut self, samples: &[f32], first_frame: u64, heard: Option<(u64, u64)>) {
        let Some(resampler) = &mut self.reference else {
            return;
        };
        if !samples.is_empty() {
            self.silent_at = None;
        }
        let rate = f64::from(resampler.rate_in());
        let start = *self.render_first_frame.get_or_insert(first_frame);
        // When this path's first 16 kHz far-end sample is heard (ns on the audio clock).
        let base = heard.map(|(frame, at)| at as f64 + (start as f64 - frame as f64) / rate * 1e9);
        self.render_base = steady(self.render_base, base);
        self.reference_16k.clear();
        resampler.push(samples, &mut self.reference_16k);
        let Self {
            render_framer,
            render_queue,
            render_made,
            render_base,
            reference_16k,
            ..
        } = self;
        render_framer.push(reference_16k, |frame| {
            let heard_at = render_base.map(|base| base + *render_made as f64 * NS_PER_SAMPLE);
            *render_made += FRAME as u64;
            let mut copy = [0.0; FRAME];
            copy.copy_from_slice(frame);
            render_queue.push_back((heard_at, copy));
        });
        // Timestamps gone wrong (or a mic that stopped) must not hold the far end for ever.
        while self.render_queue.len() > RENDER_QUEUE_MAX {
            self.release_render(f64::INFINITY, 1);
        }
    }

    /// The speaker stream is paused: its far end is silence, heard up to `until` (ns on the
    /// audio clock). Frames of zeros keep coming as a running stream's silence would, one per
    /// 10 ms on from the last frame it played, so the canceller and the self-interruption
    /// watch go on getting a far-end frame per mic frame, and the stream's timeline, taken at
    /// once when it starts again (a jump), lines its next audio up as before.
    pub fn far_end_silent(&mut self, until: u64) {
        if self.reference.is_none() {
            return;
        }
        let until = until as f64;
        let frame_ns = FRAME as f64 * NS_PER_SAMPLE;
        let next = self
            .render_base
            .map(|base| base + self.render_made as f64 * NS_PER_SAMPLE);
        let mut at = self.silent_at.or(next).unwrap_or(until);
        while at + frame_ns <= until {
            self.render_queue.push_back((Some(at), [0.0; FRAME]));
            at += frame_ns;
        }
        self.silent_at = Some(at);
        while self.render_queue.len() > RENDER_QUEUE_MAX {
            self.release_render(f64::INFINITY, 1);
        }
    }

    /// Hands the canceller (and the watch) the far-end frames heard up to `until` (ns on the
    /// audio clock; infinity for all), at most `most` of them.
    fn release_render(&mut self, until: f64, most: usize) {
        let Self {
            chain,
            render_queue,
            far_end_recent,
            far_history,
            watch,
            errors,
            ..
        } = self;
        for _ in 0..most {
            match render_queue.front() {
                Some((heard_at, _)) if heard_at.is_none_or(|at| at <= until) => {}
                _ => break,
            }
            let Some((_, frame)) = render_queue.pop_front() else {
                break;
            };
            let far = energy(&frame);
            watch.reference(far);
            if far_history.len() >= COARSE_HISTORY {
                far_history.pop_front();
            }
            far_history.push_back(far.sqrt());
            if far_end_recent.len() >= FAR_END_WINDOW {
                far_end_recent.pop_front();
            }
            far_end_recent.push_back(far);
            if let Chain::Cancel(canceller) = chain
                && let Err(e) = canceller.render(&frame, far)
            {
                note_error(errors, &e);
            }
        }
    }

    /// Drops the far-end frames heard before `until` (ns on the audio clock) unseen.
    fn drop_render(&mut self, until: f64) {
        while self
            .render_queue
            .front()
            .is_some_and(|(heard_at, _)| heard_at.is_some_and(|at| at < until))
        {
            self.render_queue.pop_front();
        }
    }

    /// Notes the delay the device clocks report, for the audio popup. The canceller is not
    /// told: the far end already reaches it lined up by the same clocks (see [`EchoPath::process`]).
    pub fn set_device_delay(&mut self, delay_ms: u32) {
        if self
            .device_delay_ms
            .is_some_and(|d| d.abs_diff(delay_ms) < 10)
        {
            return;
        }
        self.device_delay_ms = Some(delay_ms);
        tracing::debug!(delay_ms, "capture + playback delay from the device clocks");
    }

    /// Processes 16 kHz microphone samples into `out` (10 ms frames; the remainder waits
    /// for the next call). `captured_at` is when the first of them was captured and
    /// `delivered_at` when the last of them had reached the app (ns on the audio clock), when
    /// known: before each mic frame the canceller is handed the far end heard up to that
    /// frame's end and [`LEAD_NS`] more, so what it sees is the room's own delay, steady however
    /// the device buffers fill and drain. Without timestamps it gets the far end as it arrives
    /// and finds the whole delay itself.
    pub fn process(
        &mut self,
        captured: &[f32],
        captured_at: Option<u64>,
        delivered_at: Option<u64>,
        out: &mut Vec<f32>,
    ) {
        if !captured.is_empty() && self.capture_in >= GAP_AFTER {
            self.fill_gap(captured.len(), captured_at, delivered_at, out);
        }
        if let Some(at) = delivered_at {
            // The earliest the mic's samples have arrived, as a timeline: late callbacks
            // only make it later, so the least is the truest.
            let base = at as f64 - (self.capture_in + captured.len() as u64) as f64 * NS_PER_SAMPLE;
            self.delivery_base = Some(self.delivery_base.map_or(base, |old: f64| old.min(base)));
        }
        let base = captured_at.map(|at| self.stamped_base(at));
        self.capture_base = steady(self.capture_base, base);
        self.take(captured, out);
    }

    /// When this path's first 16 kHz mic sample was captured, from a stamp `at` of the sample
    /// now due: as the stamps say, but no earlier than [`LEAD_NS`] before the samples arrived.
    /// A capture time earlier than the truth by more than the lead holds the far end back
    /// past its echo, where no canceller reaches it (ALSA's PulseAudio plugin claims over half
    /// a second of latency for its first second); a later one only adds to the delay the
    /// canceller finds. (PulseAudio's own stamps drift, and can jump 10 ms past the arrival:
    /// held to the arrival as well, the rig's 48 kHz runs lost the echo more often, so they
    /// are left as they are.)
    fn stamped_base(&mut self, at: u64) -> f64 {
        let stamped = at as f64 - self.capture_in as f64 * NS_PER_SAMPLE;
        let Some(delivered) = self.delivery_base else {
            return stamped;
        };
        let claimed = delivered - stamped;
        if claimed > LEAD_NS && !self.capture_stamps_doubted {
            self.capture_stamps_doubted = true;
            tracing::debug!(
                claimed_ms = claimed / 1e6,
                "the mic's timestamps claim more latency than its samples' arrival allows: \
                 held to that"
            );
        }
        stamped.max(delivered - LEAD_NS)
    }

    /// Mic samples lost before they reached the app (a server that dropped a fragment the
    /// client did not take in time, an overrun) would shift every later mic frame against
    /// the far end, and the canceller would lose the echo until it found the new delay (a
    /// second or more: 20 ms lost on the rig let the echo through at full strength). The gap
    /// is filled with silence, so the canceller's two streams stay in step, and what is sent
    /// keeps time with the room (a phrase spoken across the gap stays whole on either side of
    /// it). A gap moves both timelines at once and alike: the stamps and the arrival both say
    /// the samples now due were captured later than their count allows. A late callback moves
    /// the arrival alone (or, where a host derives its stamps from the callback's time, the
    /// stamps by another amount); a host's lying stamps move the stamps alone. Without stamps
    /// the arrival must show the gap [`GAP_CONFIRM`] calls in a row.
    fn fill_gap(
        &mut self,
        len: usize,
        captured_at: Option<u64>,
        delivered_at: Option<u64>,
        out: &mut Vec<f32>,
    ) {
        let count = self.capture_in as f64 * NS_PER_SAMPLE;
        // The arrival is of the last of this call's samples, the stamp of the first.
        let arrival = delivered_at
            .zip(self.delivery_base)
            .map(|(at, base)| at as f64 - count - len as f64 * NS_PER_SAMPLE - base);
        let stamps = captured_at
            .zip(self.capture_base)
            .map(|(at, base)| at as f64 - count - base);
        let (gap, calls) = match (arrival, stamps) {
            (Some(arrival), Some(stamps)) if (arrival - stamps).abs() <= GAP_AGREE_NS => {
                (Some(arrival.min(stamps)), 1)
            }
            (Some(arrival), None) => (Some(arrival), GAP_CONFIRM),
            _ => (None, 1),
        };
        match gap {
            Some(gap) if gap >= GAP_MIN_NS => {
                self.gap_calls += 1;
                self.gap_least = self.gap_least.min(gap);
            }
            _ => {
                self.gap_calls = 0;
                self.gap_least = f64::INFINITY;
            }
        }
        if self.gap_calls < calls {
            return;
        }
        let gap = self.gap_least;
        self.gap_calls = 0;
        self.gap_least = f64::INFINITY;
        if gap > GAP_MAX_NS {
            tracing::debug!(
                gap_ms = gap / 1e6,
                "the mic stalled: its timelines start afresh"
            );
            self.delivery_base = None;
            self.capture_base = None;
            self.stalled = true;
            return;
        }
        let samples = (gap / NS_PER_SAMPLE).round() as usize;
        self.gap_samples += samples as u64;
        tracing::debug!(
            gap_ms = samples as f64 / 16.0,
            "mic samples were lost before they arrived: silence takes their place"
        );
        self.take(&vec![0.0; samples], out);
    }

    /// Runs 16 kHz mic samples through the chain 10 ms at a time, each frame after the far
    /// end heard up to its end (and [`LEAD_NS`] more) has gone to the canceller.
    fn take(&mut self, captured: &[f32], out: &mut Vec<f32>) {
        let capture_base = self.capture_base;
        let mut frame_start = self.capture_in - self.capture_framer.pending() as u64;
        self.capture_in += captured.len() as u64;
        let mut frames = Vec::new();
        self.capture_framer.push(captured, |frame| {
            let mut copy = [0.0; FRAME];
            copy.copy_from_slice(frame);
            frames.push((frame_start, copy));
            frame_start += FRAME as u64;
        });
        for (start, frame) in frames {
            let until = capture_base.map_or(f64::INFINITY, |base| {
                base + (start + FRAME as u64) as f64 * NS_PER_SAMPLE + LEAD_NS
            }) - self.extra_hold_ns;
            if std::mem::take(&mut self.stalled) && until.is_finite() {
                self.drop_render(until - STALL_KEEP_NS);
            }
            self.release_render(until, usize::MAX);
            if self.mic_history.len() >= COARSE_HISTORY {
                self.mic_history.pop_front();
            }
            self.mic_history.push_back(energy(&frame).sqrt());
            if self.cancelling() && (start / FRAME as u64).is_multiple_of(COARSE_EVERY) {
                self.coarse_search();
            }
            if self.cancelling() && (start / FRAME as u64).is_multiple_of(EVIDENCE_EVERY) {
                self.weigh_echo();
            }
            self.process_frame(&frame, out);
        }
    }

    /// Looks for the echo beyond the canceller's reach: the lag at which the raw mic's loudness
    /// follows the far end's. Found at the same lag twice in a row, the far end is held back
    /// by that much (less a margin), once; the canceller finds the rest.
    fn coarse_search(&mut self) {
        let n = COARSE_HISTORY - COARSE_MAX_LAG;
        if self.far_history.len() < COARSE_HISTORY || self.mic_history.len() < COARSE_HISTORY {
            return;
        }
        let loud = self
            .far_history
            .iter()
            .filter(|rms| energy_dbfs(**rms * **rms) > FAR_END_ACTIVE_DBFS)
            .count();
        if loud < COARSE_HISTORY / 5 {
            return;
        }
        let (lag, best) = best_lag(
            &mut self.mic_history,
            &mut self.far_history,
            n,
            COARSE_MAX_LAG,
        );
        if best >= COARSE_FOUND {
            self.echo_lag = Some(lag);
        }
        if self.extra_hold_ns > 0.0 {
            return;
        }
        let found = (best >= COARSE_FOUND && lag > CANCELLER_REACH).then_some(lag);
        if found.is_some() && found == self.coarse_seen {
            let hold = lag - CANCELLER_REACH / 2;
            self.extra_hold_ns = hold as f64 * 10e6;
            // The far end now reaches the search that much later: its lag is found afresh.
            self.echo_lag = None;
            tracing::debug!(
                lag_ms = lag * 10,
                hold_ms = hold * 10,
                "the echo lies beyond the canceller's reach: the far end is held back"
            );
        }
        self.coarse_seen = found;
    }

    /// Judges whether the mic carries the speaker's echo (see [`EVIDENCE_FRAMES`]); found, its
    /// lag is taken as well, sooner and more often than the coarse search's.
    fn weigh_echo(&mut self) {
        let loud = self
            .far_history
            .iter()
            .rev()
            .take(EVIDENCE_FRAMES)
            .filter(|rms| energy_dbfs(**rms * **rms) > FAR_END_ACTIVE_DBFS)
            .count();
        if loud < EVIDENCE_LOUD
            || self.mic_history.len() < EVIDENCE_FRAMES
            || self.far_history.len() < EVIDENCE_FRAMES
        {
            return;
        }
        let (lag, best) = best_lag(
            &mut self.mic_history,
            &mut self.far_history,
            EVIDENCE_FRAMES,
            EVIDENCE_MAX_LAG,
        );
        if best >= COARSE_FOUND {
            self.echo_found = Some(true);
            self.echo_lag = Some(lag);
        } else if best < NO_ECHO && self.far_history.len() >= EVIDENCE_FRAMES + EVIDENCE_MAX_LAG {
            self.echo_found = Some(false);
        }
    }

    /// The far end's loudest energy where the echo in the mic frame now comes from: around the
    /// echo's lag once it is found, over the last 300 ms until then.
    fn echo_source(&self, far_window: f32) -> f32 {
        let newest = self.far_history.len().wrapping_sub(1);
        match self.echo_lag {
            Some(lag) if lag <= newest => {
                let centre = newest - lag;
                (centre.saturating_sub(LAG_SLACK)..=(centre + LAG_SLACK).min(newest))
                    .map(|i| self.far_history[i] * self.far_history[i])
                    .fold(0.0, f32::max)
            }
            _ => far_window,
        }
    }

    /// The near-end detector, one mic frame on (`echo_over_far_db`: its raw energy over the
    /// far end's at the echo's lag): whether someone is talking, now or within the hold.
    fn near_end(&mut self, heard: f32, echo_over_far_db: f32) -> bool {
        let margin = if self.return_learnt_at_lag >= RETURN_LEARNT_AT_LAG {
            NEAR_MARGIN_DB
        } else {
            NEAR_MARGIN_UNALIGNED_DB
        };
        let talking =
            energy_dbfs(heard) > NEAR_MIN_DBFS && echo_over_far_db > self.echo_return_db + margin;
        self.near_hold = if talking {
            NEAR_HOLD_FRAMES
        } else {
            self.near_hold.saturating_sub(1)
        };
        self.near_hold > 0
    }

    fn process_frame(&mut self, frame: &[f32], out: &mut Vec<f32>) {
        let heard = energy(frame);
        // The far end heard over the last 300 ms: enough to cover the echo path.
        let far = self.far_end_recent.iter().copied().fold(0.0f32, f32::max);
        let far_active = energy_dbfs(far) > FAR_END_ACTIVE_DBFS;
        let over_far_db = energy_dbfs(heard) - energy_dbfs(self.echo_source(far));
        let talking = self.near_end(heard, over_far_db);
        let Self {
            chain,
            watch,
            erle,
            erl,
            far_end_frames,
            linear,
            errors,
            echo_return_db,
            return_learnt_at_lag,
            echo_lag,
            echo_found,
            floor,
            ..
        } = self;
        {
            // Every frame the chain lets out now: usually one, none while a stage fills up or
            // waits for the far end, then the ones it held back. Taking them all keeps what is
            // sent as long as what was captured, with no gap patched in and no delay growing.
            let before = out.len();
            let drained = match chain {
                Chain::Cancel(canceller) => canceller.process(frame, out, linear),
                Chain::Clean(stage) => stage.run(frame, out),
                Chain::Raw => {
                    out.extend_from_slice(frame);
                    Ok(())
                }
            };
            if let Err(e) = drained {
                note_error(errors, &e);
                linear.clear();
                out.truncate(before);
                out.extend_from_slice(frame);
            }
            let cancelling = matches!(chain, Chain::Cancel(_));
            for (n, sent) in out[before..].chunks_mut(FRAME).enumerate() {
                let mut sent_energy = energy(sent);
                if far_active {
                    *far_end_frames += 1;
                    // The canceller's own figures, before the floor.
                    erle.add(ratio_db(heard, sent_energy));
                    erl.add(ratio_db(far, heard));
                    let removed = energy_dbfs(heard) - energy_dbfs(sent_energy);
                    if cancelling
                        && !talking
                        && removed >= ECHO_ALONE_DB
                        && energy_dbfs(heard) > NEAR_MIN_DBFS
                    {
                        // The 90th percentile, tracked: up nine steps for one down.
                        *echo_return_db += if over_far_db > *echo_return_db {
                            0.9
                        } else {
                            -0.1
                        };
                        *echo_return_db = echo_return_db.clamp(-60.0, 10.0);
                        if echo_lag.is_some() {
                            *return_learnt_at_lag =
                                (*return_learnt_at_lag + 1).min(RETURN_LEARNT_AT_LAG);
                        }
                    }
                    if cancelling && *floor {
                        // Someone talks over the model, or the room gives no echo back
                        // (headphones): what AEC3's filter left, without its suppressor, which
                        // would cut their first syllables, or all of them where it goes on
                        // assuming an echo path it never found. Otherwise only the echo is
                        // there: silence.
                        if talking || *echo_found == Some(false) {
                            if let Some(linear) = linear.get(n * FRAME..(n + 1) * FRAME) {
                                sent.copy_from_slice(linear);
                            }
                        } else {
                            sent.fill(0.0);
                        }
                        sent_energy = energy(sent);
                    }
                }
                watch.microphone(sent_energy);
            }
        }
    }

    /// Whether the mic has been carrying the speaker's echo, judged on everything up to now.
    pub fn echo_heard_now(&mut self) -> bool {
        let heard = self.watch.echo_heard_now();
        let (loud, sound) = self.watch.shares();
        tracing::debug!(
            heard,
            tracking = self.watch.tracking(),
            loud,
            sound,
            "self-interruption check"
        );
        heard
    }

    /// The delay the canceller found (ms), once it has found one.
    fn delay_ms(&self) -> Option<u32> {
        match &self.chain {
            Chain::Cancel(canceller) => canceller.delay_ms(),
            _ => None,
        }
    }

    /// The figures now.
    pub fn figures(&self) -> EchoFigures {
        let heard = self.far_end_frames > 0;
        let erle_db = (heard && self.cancelling()).then_some(self.erle.0);
        EchoFigures {
            mode: self.mode,
            cancelling: self.cancelling(),
            noise_suppression: self.noise_suppression,
            device_delay_ms: self.device_delay_ms,
            delay_ms: self.delay_ms(),
            erle_db,
            erl_db: heard.then_some(self.erl.0),
            converged: self.delay_ms().is_some()
                && erle_db.is_some_and(|erle| erle >= CONVERGED_ERLE_DB),
            far_end_secs: self.far_end_frames as f32 / 100.0,
            echo_heard: self.watch.echo_heard(),
        }
    }
}

/// The lag (frames, up to `max_lag`) at which the raw mic's loudness envelope over its
/// newest `n` frames best follows the far end's, and that correlation. The two histories end
/// at the same moment.
fn best_lag(
    mic: &mut VecDeque<f32>,
    far: &mut VecDeque<f32>,
    n: usize,
    max_lag: usize,
) -> (usize, f32) {
    let (mic, far) = (mic.make_contiguous(), far.make_contiguous());
    let recent = &mic[mic.len() - n..];
    (0..=max_lag)
        .take_while(|lag| far.len() >= n + lag)
        .map(|lag| {
            let end = far.len() - lag;
            (
                lag,
                super::echo_watch::correlation(recent, &far[end - n..end]),
            )
        })
        .fold((0, f32::MIN), |a, b| if b.1 > a.1 { b } else { a })
}

/// A stream's timeline from its latest stamp, steadied: hosts interpolate their latency between
/// polls, so each stamp wobbles by a few milliseconds, and a canceller fed by a wobbling clock
/// sees its echo path move. Small differences are followed slowly; a jump of more than 20 ms
/// (an underrun, a device that changed its buffering) is taken at once.
fn steady(old: Option<f64>, new: Option<f64>) -> Option<f64> {
    match (old, new) {
        (Some(old), Some(new)) if (new - old).abs() <= 20e6 => Some(old + (new - old) * 0.02),
        (_, new) => new,
    }
}

fn note_error(errors: &mut u64, error: &aec3::graph::GraphError) {
    if *errors == 0 {
        tracing::warn!("voice processing failed, the microphone goes through unprocessed: {error}");
    }
    *errors += 1;
}

#[cfg(test)]
mod rig_replica;

#[cfg(test)]
mod tests {
    use super::*;
    use livetalk_mock::voice::{espeak_available, synthesize};

    /// espeak-ng speech for `text`, as f32 at 16 kHz. Real speech, not the mock's synthetic
    /// fallback voice: that is a steady buzz, and no echo canceller can tell one period of it
    /// from the next.
    fn voice(text: &str) -> Vec<f32> {
        assert!(
            espeak_available(),
            "espeak-ng is needed (scripts/test.sh installs it)"
        );
        let pcm: Vec<f32> = synthesize(text)
            .iter()
            .map(|&s| f32::from(s) / 32_768.0)
            .collect();
        StreamResampler::whole(&pcm, 24_000, INPUT_RATE).unwrap()
    }

    fn mean_square(x: &[f32]) -> f64 {
        x.iter().map(|v| f64::from(*v) * f64::from(*v)).sum::<f64>() / x.len().max(1) as f64
    }

    /// The best normalised cross-correlation of `reference` in `signal` near `at`.
    fn ncc(signal: &[f32], reference: &[f32], at: usize) -> f64 {
        crate::audio::pcm::best_correlation(signal, reference, at, 400)
    }

    /// The model's sentence in the tests where its echo has to be found.
    fn model_sentence() -> Vec<f32> {
        voice(
            "The living room lamp is on, the kitchen lights are off, and the thermostat is \
             set to twenty one degrees. Would you like me to change anything else?",
        )
    }

    /// What a mic hears of `model`: `delay` samples later, 6 dB down, nothing else.
    fn echo_of(model: &[f32], delay: usize) -> Vec<f32> {
        (0..model.len())
            .map(|i| i.checked_sub(delay).map_or(0.0, |j| model[j] * 0.5))
            .collect()
    }

    /// Up to 6 s of the model talking (its sentence twice) and what a mic hears of it in a
    /// 20 ms room.
    fn model_in_a_small_room() -> (Vec<f32>, Vec<f32>) {
        let sentence = model_sentence();
        let mut model: Vec<f32> = sentence.iter().chain(&sentence).copied().collect();
        model.truncate(6 * 16_000);
        let heard = echo_of(&model, 320);
        (model, heard)
    }

    /// Plays `model` into `path` 10 ms at a time up to sample `until`, from `*given` on, with
    /// true stamps: sample `n` is heard at `start` + n samples.
    fn play_until(path: &mut EchoPath, model: &[f32], given: &mut usize, until: usize, start: u64) {
        while *given < model.len() && *given < until {
            let chunk = &model[*given..(*given + FRAME).min(model.len())];
            path.played(
                chunk,
                *given as u64,
                Some((*given as u64, ns(*given) + start)),
            );
            *given += chunk.len();
        }
    }

    /// Runs the model in a small room through a path whose mic loses `lost` samples 2.5 s in
    /// (long after the canceller has converged), with true stamps and arrivals, and every 37th
    /// callback 25 ms late. Returns the path, what the room heard, what reached the app and
    /// what the path sent.
    fn lose_mic_samples(lost: usize) -> (EchoPath, Vec<f32>, Vec<f32>, Vec<f32>) {
        const LOST_AT: usize = 40_000;
        const START: u64 = 1_000_000_000;
        let (model, heard) = model_in_a_small_room();
        let mic: Vec<f32> = heard[..LOST_AT]
            .iter()
            .chain(&heard[LOST_AT + lost..])
            .copied()
            .collect();
        // When in the room each of the app's samples was heard.
        let room = |sample: usize| {
            if sample < LOST_AT {
                sample
            } else {
                sample + lost
            }
        };
        let mut path = EchoPath::new(EchoMode::Aec, false, Some(INPUT_RATE)).unwrap();
        let mut out = Vec::new();
        let mut given = 0;
        for (i, near) in mic.chunks(FRAME).enumerate() {
            let first = i * FRAME;
            let last = room(first + near.len() - 1);
            play_until(&mut path, &model, &mut given, last + 1 + 320, START);
            let captured = ns(room(first)) + START;
            let late = if i % 37 == 5 { 25_000_000 } else { 0 };
            let delivered = ns(last + 1) + START + 10_000_000 + late;
            path.process(near, Some(captured), Some(delivered), &mut out);
        }
        (path, heard, mic, out)
    }

    /// 20 ms of mic samples lost on the way (a server that dropped a fragment): the stamps and
    /// the arrivals of the samples after the gap say so, silence takes their place, and the
    /// canceller keeps the echo down across it. Late callbacks, which the arrivals alone
    /// show, are not taken for gaps.
    #[test]
    fn mic_samples_lost_on_the_way_do_not_cost_the_canceller_the_echo() {
        let (path, heard, mic, out) = lose_mic_samples(320);
        assert!(
            (300..=340).contains(&path.gap_samples),
            "{} samples filled in for the 320 lost",
            path.gap_samples
        );
        assert_eq!(out.len(), mic.len() + path.gap_samples as usize);
        // What is sent keeps time with the room again.
        let after = 40_000 + 320;
        let len = heard.len();
        assert_echo_down(
            &heard,
            &out,
            &[(after, after + 16_000), (after + 16_000, len)],
        );
    }

    /// A mic that stalls for two seconds is not sent two seconds of silence at once: its
    /// timelines start afresh, from which the far end is lined up with it again.
    #[test]
    fn a_mic_that_stalls_for_seconds_is_not_padded_with_them() {
        let (path, _, mic, out) = lose_mic_samples(32_000);
        assert_eq!(path.gap_samples, 0);
        assert_eq!(out.len(), mic.len());
        // Half a second after the stall, to the end.
        assert_echo_down(&mic, &out, &[(48_000, mic.len())]);
    }

    /// The speaker stream pauses between replies (nothing to play) and starts again: while it
    /// is paused the canceller gets its silence, one far-end frame per mic frame, and the
    /// stream's own stamps, which jump by the pause when it plays again, line the next reply
    /// up with its echo at once.
    #[test]
    fn a_speaker_paused_between_replies_keeps_the_canceller_in_step() {
        const START: u64 = 1_000_000_000;
        const PAUSED_AT: usize = 2 * 16_000;
        const PAUSE: usize = 24_000;
        let (model, _) = model_in_a_small_room();
        // When in the room the stream's sample `n` is heard.
        let room = |n: usize| if n < PAUSED_AT { n } else { n + PAUSE };
        let len = model.len() + PAUSE;
        let mut out_of_speaker = vec![0.0; len];
        for (n, &s) in model.iter().enumerate() {
            out_of_speaker[room(n)] = s;
        }
        let heard = echo_of(&out_of_speaker, 320);
        let mut path = EchoPath::new(EchoMode::Aec, false, Some(INPUT_RATE)).unwrap();
        let mut out = Vec::new();
        let mut given = 0;
        let mut most_queued = 0;
        for (i, near) in heard.chunks(FRAME).enumerate() {
            let first = i * FRAME;
            // What a worker hands over before this mic frame: what played up to its end and
            // the room's delay, or the paused stream's silence up to then.
            let horizon = first + near.len() + 320;
            while given < model.len() && room(given) < horizon {
                let chunk = &model[given..(given + FRAME).min(model.len())];
                path.played(
                    chunk,
                    given as u64,
                    Some((given as u64, ns(room(given)) + START)),
                );
                given += chunk.len();
            }
            if (PAUSED_AT..PAUSED_AT + PAUSE).contains(&horizon) {
                path.far_end_silent(ns(horizon) + START);
            }
            let captured = ns(first) + START;
            let delivered = ns(first + near.len()) + START + 10_000_000;
            path.process(near, Some(captured), Some(delivered), &mut out);
            most_queued = most_queued.max(path.render_queue.len());
        }
        assert!(
            most_queued <= 8,
            "{most_queued} far-end frames waited at once"
        );
        // The first reply, and the second from a quarter second after the stream started again.
        let resumed = PAUSED_AT + PAUSE + 320;
        assert_echo_down(
            &heard,
            &out,
            &[
                (8_000, PAUSED_AT),
                (resumed + 4_000, resumed + 20_000),
                (resumed + 20_000, len),
            ],
        );
    }

    /// Between two replies the far end is silent for two seconds and AEC3 rests. The far end
    /// comes in bursts of four frames, before the mic frames they go with or after them, and
    /// the speaker may change from one to the other while it rests: AEC3 has missed more
    /// far-end frames than mic frames when the second reply wakes it, or fewer. Woken, it
    /// keeps the two streams where they would be: its filter fits the echo from the reply's
    /// first frame, as well as if it had never rested.
    #[test]
    fn a_reply_after_a_rest_is_cancelled_from_its_first_frame() {
        const SILENT: usize = 2 * 16_000;
        let (model, _) = model_in_a_small_room();
        let half = 3 * 16_000;
        let speaker: Vec<f32> = model[..half]
            .iter()
            .chain(&vec![0.0; SILENT])
            .chain(&model[half..])
            .copied()
            .collect();
        let mic = echo_of(&speaker, 1280);
        let second = half + SILENT + 1280;
        // Whether the far end comes before the mic, before the rest and after it.
        for (before, after) in [(false, false), (true, true), (false, true), (true, false)] {
            let mut erle = Vec::new();
            for may_rest in [true, false] {
                let mut path = EchoPath::new(EchoMode::Aec, false, Some(INPUT_RATE)).unwrap();
                path.floor = false;
                let Chain::Cancel(canceller) = &mut path.chain else {
                    panic!("no canceller");
                };
                canceller.may_rest = may_rest;
                let mut out = Vec::new();
                let burst = |i: usize| &speaker[i * FRAME..((i + 4) * FRAME).min(speaker.len())];
                for (i, near) in mic.chunks(FRAME).enumerate() {
                    // The switch falls on a burst's first frame, while AEC3 rests.
                    let early = if i < (half + SILENT * 3 / 4) / FRAME / 4 * 4 {
                        before
                    } else {
                        after
                    };
                    if early && i % 4 == 0 {
                        path.played(burst(i), 0, None);
                    }
                    path.process(near, None, None, &mut out);
                    if !early && i % 4 == 3 {
                        path.played(burst(i - 3), 0, None);
                    }
                }
                let Chain::Cancel(canceller) = &path.chain else {
                    unreachable!()
                };
                assert_eq!(canceller.rested > 0, may_rest, "{}", canceller.rested);
                let window = second..second + 8_000;
                let mic = mean_square(&mic[window.clone()]);
                erle.push(10.0 * (mic / mean_square(&out[window])).log10());
            }
            let (rested, awake) = (erle[0], erle[1]);
            assert!(
                rested >= 25.0 && rested >= awake - 1.0,
                "far end early {before} then {after}: the reply's first half second is {rested:.1} dB down \
                 after a rest, {awake:.1} awake"
            );
        }
    }

    /// Asserts the echo in `mic` is at least 25 dB down in `out` over each window (samples).
    fn assert_echo_down(mic: &[f32], out: &[f32], windows: &[(usize, usize)]) {
        for &(from, to) in windows {
            let erle = 10.0 * (mean_square(&mic[from..to]) / mean_square(&out[from..to])).log10();
            assert!(
                erle >= 25.0,
                "{from}..{to}: echo suppressed by only {erle:.1} dB"
            );
        }
    }

    /// A 16 kHz sample index as a time on the audio clock (never 0: that means "not stamped").
    fn ns(sample: usize) -> u64 {
        (sample as f64 * NS_PER_SAMPLE) as u64 + 1
    }

    /// Runs `mic` through a path that plays `speaker`, 10 ms at a time, render first; also
    /// returns the times (s) at which the self-interruption detector said "echo".
    fn run(path: &mut EchoPath, speaker: &[f32], mic: &[f32]) -> (Vec<f32>, Vec<f32>) {
        let mut out = Vec::with_capacity(mic.len());
        let mut echo_at = Vec::new();
        for (i, (far, near)) in speaker.chunks(FRAME).zip(mic.chunks(FRAME)).enumerate() {
            path.played(far, 0, None);
            path.process(near, None, None, &mut out);
            if path.figures().echo_heard {
                echo_at.push(i as f32 / 100.0);
            }
        }
        (out, echo_at)
    }

    /// Up to 7 s of the model talking, what the mic hears of it (80 ms later and 6 dB down
    /// with `echo`, nothing without: headphones) and, from 4 s, a person talking over it, 3 dB
    /// louder than that echo. Returns the model, the mic, the person as heard and when they
    /// start (samples).
    fn person_over_the_model(echo: bool) -> (Vec<f32>, Vec<f32>, Vec<f32>, usize) {
        let model = voice(
            "The living room lamp is on, the kitchen lights are off, and the thermostat is \
             set to twenty one degrees. Would you like me to change anything else in the house?",
        );
        let person = voice("Stop, turn the lamp off please.");
        let len = model.len().min(7 * 16_000);
        let room: Vec<f32> = echo_of(&model[..len], 1280);
        let start = 4 * 16_000;
        let gain = ((mean_square(&room[..start]) / mean_square(&person)) * 2.0).sqrt() as f32;
        let near: Vec<f32> = person.iter().map(|s| s * gain).collect();
        let mut mic = if echo { room } else { vec![0.0; len] };
        for (i, s) in near.iter().enumerate() {
            if let Some(m) = mic.get_mut(start + i) {
                *m += s;
            }
        }
        (model[..len].to_vec(), mic, near, start)
    }

    /// The speaker plays the model; the mic hears it 80 ms later, 6 dB down, and from 4 s
    /// a person talks over it, 3 dB louder than the echo.
    #[test]
    fn the_canceller_removes_the_echo_from_the_start_and_keeps_a_person_talking_over_it() {
        let (model, mic, near, start) = person_over_the_model(true);
        let (len, delay) = (model.len(), 1280);
        let mut path = EchoPath::new(EchoMode::Aec, false, Some(INPUT_RATE)).unwrap();
        let (out, echo_at) = run(&mut path, &model, &mic);

        // Model-only playback from the first sample: the echo suppressed ≥ 25 dB.
        let window = delay..start;
        let erle = 10.0 * (mean_square(&mic[window.clone()]) / mean_square(&out[window])).log10();
        assert!(erle >= 25.0, "echo suppressed by only {erle:.1} dB");
        // The person comes through: NCC ≥ 0.65, level no more than 8 dB down.
        let heard = ncc(&out, &near, start);
        let span = start..(start + near.len()).min(len);
        let level = 10.0 * (mean_square(&out[span.clone()]) / mean_square(&mic[span])).log10();
        assert!(heard >= 0.65, "the person correlates {heard:.2}");
        assert!(level >= -8.0, "the person is {level:.1} dB down");

        // The person is not taken for echo at any moment; the uncancelled echo alone is.
        assert!(echo_at.is_empty(), "echo detected at {echo_at:?}");
        let mut off = EchoPath::new(EchoMode::Off, false, Some(INPUT_RATE)).unwrap();
        let (_, off_echo_at) = run(&mut off, &model[..start], &mic[..start]);
        assert!(
            off_echo_at.first().is_some_and(|&t| t < 2.0),
            "the echo alone was not detected: {off_echo_at:?}"
        );

        let figures = path.figures();
        assert!(figures.cancelling);
        assert!(figures.converged, "{figures:?}");
        assert!(figures.far_end_secs > 3.0, "{figures:?}");
        assert!(
            figures.delay_ms.is_some_and(|d| d.abs_diff(80) <= 16),
            "{figures:?}"
        );
    }

    /// The first 100 ms of `near` in `out` against the same in `mic`, in dB.
    fn onset_db(out: &[f32], mic: &[f32], start: usize) -> f64 {
        let onset = start..start + 1600;
        10.0 * (mean_square(&out[onset.clone()]) / mean_square(&mic[onset])).log10()
    }

    /// While only the model is heard, once its echo reaches the mic, what is sent is digital
    /// silence (the echo floor), where AEC3 alone leaves a residual and comfort noise; and a
    /// person talking over the model opens it at once: they come through as well as through
    /// AEC3 alone, their first 100 ms too.
    #[test]
    fn only_the_models_echo_is_sent_as_silence_and_a_person_talking_over_it_opens_the_floor() {
        let (model, mic, near, start) = person_over_the_model(true);
        let mut path = EchoPath::new(EchoMode::Aec, true, Some(INPUT_RATE)).unwrap();
        let (out, _) = run(&mut path, &model, &mic);
        let mut bare = EchoPath::new(EchoMode::Aec, true, Some(INPUT_RATE)).unwrap();
        bare.floor = false;
        let (bare_out, _) = run(&mut bare, &model, &mic);

        // From the echo's first sample until the person: nothing a 16-bit wire would carry.
        let echo = 1280..start;
        let left = |out: &[f32]| out[echo.clone()].iter().fold(0.0f32, |m, s| m.max(s.abs()));
        assert!(
            left(&out) * 32_768.0 < 0.5,
            "the echo left peaks at {:.1} steps of 16 bits",
            left(&out) * 32_768.0
        );
        assert!(
            left(&bare_out) * 32_768.0 >= 1.0,
            "AEC3 alone left nothing: the floor is not what is measured"
        );
        let (heard, bare_heard) = (ncc(&out, &near, start), ncc(&bare_out, &near, start));
        assert!(
            heard >= bare_heard - 0.02,
            "the person correlates {heard:.3}, through AEC3 alone {bare_heard:.3}"
        );
        let (onset, bare_onset) = (
            onset_db(&out, &mic, start),
            onset_db(&bare_out, &mic, start),
        );
        assert!(
            onset >= bare_onset - 3.0,
            "the person's first 100 ms {onset:.1} dB, through AEC3 alone {bare_onset:.1} dB"
        );
    }

    /// With headphones the mic never hears the model: the floor finds no echo and stays off,
    /// and a person talking over the model, with the room's own noise around them, is sent
    /// whole. AEC3 alone, which never finds an echo path here, goes on assuming one as loud as
    /// the far end and crushes them; the near-end detector hands on its linear output instead,
    /// which is the mic itself where there is no echo to remove.
    #[test]
    fn with_headphones_a_person_talking_over_the_model_is_sent_whole() {
        let (model, mut mic, near, start) = person_over_the_model(false);
        // A quiet room's noise, about -60 dBFS.
        let mut seed = 0x2545_f491_u32;
        for s in &mut mic {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            *s += (seed as f32 / u32::MAX as f32 - 0.5) * 0.0035;
        }
        let mut path = EchoPath::new(EchoMode::Aec, true, Some(INPUT_RATE)).unwrap();
        let (out, _) = run(&mut path, &model, &mic);
        let mut bare = EchoPath::new(EchoMode::Aec, true, Some(INPUT_RATE)).unwrap();
        bare.floor = false;
        let (bare_out, _) = run(&mut bare, &model, &mic);
        assert_eq!(path.echo_found, Some(false));
        let (heard, bare_heard) = (ncc(&out, &near, start), ncc(&bare_out, &near, start));
        assert!(heard >= 0.9, "the person correlates {heard:.3}");
        assert!(
            bare_heard < 0.6,
            "AEC3 alone let the person through: {bare_heard:.3}"
        );
        let onset = onset_db(&out, &mic, start);
        assert!(
            onset >= -3.0,
            "the person's first 100 ms are {onset:.1} dB down"
        );
    }

    /// The far end can arrive in bursts after the mic frames it goes with (a speaker whose
    /// callback asks for 40 ms at a time): whatever the chain holds back meanwhile comes out
    /// later, nothing is patched with silence and the delay does not grow.
    #[test]
    fn a_late_bursty_far_end_neither_drops_nor_delays_the_mic() {
        let person = voice("Is the living room lamp on?");
        let silence = vec![0.0; person.len()];
        for noise_suppression in [false, true] {
            let mut path =
                EchoPath::new(EchoMode::Aec, noise_suppression, Some(INPUT_RATE)).unwrap();
            let mut out = Vec::new();
            for (i, near) in person.chunks(FRAME).enumerate() {
                path.process(near, None, None, &mut out);
                if i % 4 == 3 {
                    path.played(&silence[(i - 3) * FRAME..(i + 1) * FRAME], 0, None);
                }
            }
            assert!(
                out.len() + 6 * FRAME >= person.len() && out.len() <= person.len(),
                "{} samples out of {}",
                out.len(),
                person.len()
            );
            // AEC3 keeps a lone voice at about 0.8–0.97 per half second, noise suppression
            // reshapes it a little more: a gap or a frame out of place would fall far below.
            let heard = ncc(&out, &person[..person.len() - 8 * FRAME], 0);
            assert!(
                heard > 0.8,
                "noise suppression {noise_suppression}: the mic alone correlates {heard:.2}"
            );
        }
    }

    /// With the devices' timestamps the far end reaches the canceller lined up with the mic:
    /// the speaker's buffer going from 20 to 120 ms deep and back (its callback running that
    /// much ahead of what is heard) does not throw it: the echo stays down throughout. (Fed
    /// the far end as it arrives, it let the echo through at 14.7 dB while the buffer was deep.)
    #[test]
    fn timestamps_line_the_far_end_up_whatever_the_speakers_buffering() {
        let model = model_sentence();
        let len = model.len().min(6 * 16_000);
        let mic = echo_of(&model[..len], 320); // the room: 20 ms
        // The speaker's callback runs this many samples ahead of what is heard.
        let ahead = |sample: usize| {
            if (2 * 16_000..4 * 16_000).contains(&sample) {
                1920
            } else {
                320
            }
        };
        let mut path = EchoPath::new(EchoMode::Aec, false, Some(INPUT_RATE)).unwrap();
        let mut out = Vec::new();
        let mut given = 0;
        for (i, near) in mic.chunks(FRAME).enumerate() {
            let now = (i + 1) * FRAME;
            while given < len && given < now + ahead(given) {
                let chunk = &model[given..(given + FRAME).min(len)];
                path.played(chunk, given as u64, Some((given as u64, ns(given))));
                given += chunk.len();
            }
            path.process(near, Some(ns(i * FRAME)), None, &mut out);
        }
        assert_echo_down(
            &mic,
            &out,
            &[(16_000, 32_000), (40_000, 64_000), (72_000, len)],
        );
    }

    /// A mic whose timestamps overstate its latency (ALSA's PulseAudio plugin claims 560 ms
    /// for its first 1.3 s, then sweeps down to the truth, 10 ms): taken at their word they
    /// would hold the far end back past its echo. Bounded by when the samples arrived, the
    /// canceller keeps the echo down through the lie, the sweep and after.
    #[test]
    fn mic_timestamps_that_overstate_the_latency_do_not_hold_the_far_end_past_its_echo() {
        let (model, mic) = model_in_a_small_room();
        let len = model.len();
        let claimed_ms = |sample: usize| match sample as f64 / 16_000.0 {
            t if t < 1.3 => 560.0,
            t if t < 1.8 => 560.0 - (t - 1.3) / 0.5 * 550.0,
            _ => 10.0,
        };
        // The audio clock's reading at the first sample: the lie reaches back before it.
        const START: u64 = 1_000_000_000;
        let mut path = EchoPath::new(EchoMode::Aec, false, Some(INPUT_RATE)).unwrap();
        let mut out = Vec::new();
        let mut given = 0;
        for (i, near) in mic.chunks(FRAME).enumerate() {
            let at = i * FRAME;
            // The speaker's callback runs 20 ms ahead of what is heard, and its stamps are true.
            play_until(&mut path, &model, &mut given, at + FRAME + 320, START);
            let captured = ns(at) + START - (claimed_ms(at) * 1e6) as u64;
            // They arrive 10 ms after capture, some callbacks a few milliseconds later still.
            let delivered = ns(at + FRAME) + START + 10_000_000 + (i % 7) as u64 * 700_000;
            path.process(near, Some(captured), Some(delivered), &mut out);
        }
        assert_eq!(path.gap_samples, 0, "lying stamps taken for lost samples");
        // The lie, the sweep, and after.
        let windows = [
            (4_800, 20_800),
            (20_800, 28_800),
            (28_800, 48_000),
            (48_000, len),
        ];
        assert_echo_down(&mic, &out, &windows);
    }

    /// A device whose timestamps understate its buffering by far: the echo comes 700 ms after
    /// the moment the speaker's stamps say, beyond AEC3's reach.
    /// The coarse search finds it and holds the far end back; the echo is then removed.
    #[test]
    fn an_echo_beyond_the_cancellers_reach_is_found_and_removed() {
        let sentence = model_sentence();
        let model: Vec<f32> = sentence.iter().chain(&sentence).copied().collect();
        let len = model.len().min(12 * 16_000);
        let mic = echo_of(&model[..len], 11_200); // 700 ms
        let mut path = EchoPath::new(EchoMode::Aec, false, Some(INPUT_RATE)).unwrap();
        let mut out = Vec::new();
        for (i, (far, near)) in model[..len]
            .chunks(FRAME)
            .zip(mic.chunks(FRAME))
            .enumerate()
        {
            let at = i * FRAME;
            path.played(far, at as u64, Some((at as u64, ns(at))));
            path.process(near, Some(ns(at)), None, &mut out);
        }
        assert!(path.extra_hold_ns > 0.0, "the echo was not found");
        let last = len - 2 * 16_000..len - FRAME * 4;
        let erle = 10.0 * (mean_square(&mic[last.clone()]) / mean_square(&out[last])).log10();
        assert!(
            erle >= 25.0,
            "echo suppressed by only {erle:.1} dB in the last 2 s"
        );
    }

    #[test]
    fn without_echo_the_mic_passes_through_and_nothing_converges() {
        let person = voice("Is the living room lamp on?");
        let silence = vec![0.0; person.len()];
        let mut path = EchoPath::new(EchoMode::Aec, false, Some(INPUT_RATE)).unwrap();
        let (out, _) = run(&mut path, &silence, &person);
        // The last few milliseconds wait in the framer and the canceller.
        let heard = ncc(&out, &person[..person.len() - 800], 0);
        assert!(heard > 0.9, "the mic alone correlates {heard:.2}");
        let figures = path.figures();
        assert!(
            !figures.converged && figures.erle_db.is_none(),
            "{figures:?}"
        );
    }

    #[test]
    fn off_and_gate_cancel_nothing_and_noise_suppression_is_optional() {
        for mode in [EchoMode::Off, EchoMode::Gate] {
            let path = EchoPath::new(mode, true, Some(48_000)).unwrap();
            assert!(!path.cancelling());
            assert_eq!(path.figures().mode, mode);
        }
        let raw = EchoPath::new(EchoMode::Off, false, None).unwrap();
        assert!(matches!(raw.chain, Chain::Raw));
        let no_speaker = EchoPath::new(EchoMode::Aec, true, None).unwrap();
        assert!(
            !no_speaker.cancelling(),
            "nothing to cancel without a speaker"
        );
    }
}
