//! The stages a 10 ms mic frame goes through (high-pass filter, AEC3, noise suppression), and
//! AEC3 resting while the far end is silent: it has no echo to remove then, and it is most of
//! the voice path's cost (about 75 of the 90 µs a frame costs with the speaker playing).

use aec3::api::config::EchoCanceller3Config;
use aec3::graph::{
    GraphBuilder, GraphResult, Packet, PacketMeta, QueueConfig, Runtime, Sink, Source,
};
use aec3::nodes::audio::{AudioChunk, AudioFormat};
use aec3::nodes::{hpf, ns};
use aec3::pipelines::linear::{self, LinearPipeline};

use std::collections::VecDeque;

use super::FRAME;
use crate::audio::pcm::{INPUT_RATE, energy_dbfs};

/// A far-end frame louder than this gives AEC3 something to remove: it wakes it, or keeps it
/// awake. Well under the level at which the far end counts as heard (−45 dBFS) and the echo
/// floor closes, so AEC3 is always awake wherever the floor is.
const REST_BELOW_DBFS: f32 = -60.0;

/// Mic frames after the last louder far-end frame before AEC3 rests: 1 s, long after the
/// echo's reverberation has died away.
const REST_AFTER: u32 = 100;

/// The samples AEC3 holds back: each frame it lets out ends this many samples before the end
/// of the frame it was given, 64 for its block framer (which starts with a block of silence)
/// and 64 for its suppressor's overlap-add. Resting, the chain holds back as many itself, so
/// the mic keeps its timing across each switch, no sample lost or repeated.
const HELD: usize = 128;

/// AEC3's linear output is behind its filter only, by the framer's 64 samples: it is held back
/// by the rest, so that the echo floor, which sends it in place of AEC3's output while someone
/// talks over the model, neither skips nor repeats 4 ms of them each time it does.
const LINEAR_LAGS_BY: usize = HELD - 64;

/// The newest mic frames kept while AEC3 rests, to prime it with when it wakes.
const PRIMES: usize = 3;

/// The most frames of either stream AEC3 is primed with as it wakes (0.5 s): the far end
/// would have to come that much later than the mic, or earlier, for it to miss more of one
/// than of the other. Beyond (a mic that stalled while the far end went on), its own delay
/// estimator finds the echo again, as it would have awake, and the wake stays as quick.
const MOST_PRIMES: usize = 50;

/// The mic's processing.
pub(super) enum Chain {
    /// High-pass, AEC3, then (optionally) noise suppression.
    Cancel(Box<Canceller>),
    /// High-pass and noise suppression without a canceller (no speaker, `gate` or `off`).
    Clean(Stage),
    /// Nothing: the microphone as it is.
    Raw,
}

/// A graph of the crate's stages on the mic stream alone, run a 10 ms frame at a time.
pub(super) struct Stage {
    runtime: Box<Runtime>,
    input: Source<AudioChunk>,
    output: Sink<AudioChunk>,
}

fn format() -> AudioFormat {
    AudioFormat::ten_ms(INPUT_RATE, 1)
}

impl Stage {
    /// The high-pass filter, then noise suppression: the whole chain without a canceller.
    pub(super) fn clean() -> GraphResult<Stage> {
        Stage::build(true, true)
    }

    fn build(high_pass: bool, noise_suppression: bool) -> GraphResult<Stage> {
        let mut graph = GraphBuilder::new();
        let input = graph.source::<AudioChunk>("capture");
        let output = graph.sink::<AudioChunk>("output", QueueConfig::audio_default());
        let mut end = None;
        if high_pass {
            let filter = hpf::builder(format()).add_to(&mut graph)?;
            graph.connect(input, filter.audio_in)?;
            end = Some(filter.audio_out);
        }
        if noise_suppression {
            let suppressor = ns::builder(format()).add_to(&mut graph)?;
            match end {
                Some(port) => graph.connect(port, suppressor.audio_in)?,
                None => graph.connect(input, suppressor.audio_in)?,
            }
            end = Some(suppressor.audio_out);
        }
        if let Some(port) = end {
            graph.connect(port, output)?;
        }
        Ok(Stage {
            runtime: Box::new(Runtime::new(graph.build()?)?),
            input,
            output,
        })
    }

    /// Runs one frame through, appending what comes out to `out`.
    pub(super) fn run(&mut self, frame: &[f32], out: &mut Vec<f32>) -> GraphResult<()> {
        let packet = Packet {
            meta: PacketMeta::default(),
            payload: AudioChunk::from_interleaved(format(), frame),
        };
        self.runtime.push(self.input, packet)?;
        self.runtime.run_until_stalled()?;
        while let Some(packet) = self.runtime.try_pull(self.output)? {
            out.extend_from_slice(packet.payload().samples());
        }
        Ok(())
    }
}

/// The high-pass filter, AEC3 and noise suppression, each a stage of its own so that AEC3 can
/// rest between them: the filter and the suppressor see one unbroken stream either way.
pub(super) struct Canceller {
    high_pass: Stage,
    aec3: LinearPipeline,
    suppressor: Option<Stage>,
    /// Mic frames since the far end was last louder than [`REST_BELOW_DBFS`].
    since_heard: u32,
    /// AEC3 rests (off only where the tests compare).
    pub(super) may_rest: bool,
    resting: bool,
    /// While resting: the far-end frames and the mic frames AEC3 has not been given, and the
    /// newest mic frames (high-passed).
    render_skipped: u64,
    capture_skipped: u64,
    recent: VecDeque<[f32; FRAME]>,
    /// Mic frames that went by while AEC3 rested, in all.
    pub(super) rested: u64,
    /// The newest [`HELD`] high-passed mic samples: what AEC3 holds back now.
    held: [f32; HELD],
    /// The newest [`LINEAR_LAGS_BY`] samples of AEC3's linear output.
    linear_held: [f32; LINEAR_LAGS_BY],
    /// The delay AEC3 found (ms), from its metrics.
    delay_ms: Option<u32>,
    /// Scratch: the high-passed frame, AEC3's output for it, and one frame of output.
    filtered: Vec<f32>,
    cancelled: Vec<f32>,
    out_frame: Vec<f32>,
}

impl Canceller {
    pub(super) fn new(
        config: EchoCanceller3Config,
        noise_suppression: bool,
    ) -> GraphResult<Canceller> {
        let aec3 = linear::builder(format(), format())
            .aec3_config(config)
            .enable_high_pass_filter(false)
            .enable_noise_suppression(false)
            // The service levels speech itself; a gain stage here would also make the
            // "is it echo?" comparisons meaningless.
            .enable_gain_controller2(false)
            .enable_post_filter(false)
            .export_metrics(true)
            .export_linear_output(true)
            .build()?;
        Ok(Canceller {
            high_pass: Stage::build(true, false)?,
            aec3,
            suppressor: noise_suppression
                .then(|| Stage::build(false, true))
                .transpose()?,
            since_heard: 0,
            may_rest: true,
            resting: false,
            render_skipped: 0,
            capture_skipped: 0,
            recent: VecDeque::with_capacity(PRIMES),
            rested: 0,
            held: [0.0; HELD],
            linear_held: [0.0; LINEAR_LAGS_BY],
            delay_ms: None,
            filtered: Vec::with_capacity(FRAME * 2),
            cancelled: Vec::with_capacity(FRAME * 2),
            out_frame: vec![0.0; FRAME],
        })
    }

    /// The delay AEC3 found (ms), once it has found one.
    pub(super) fn delay_ms(&self) -> Option<u32> {
        self.delay_ms
    }

    /// Whether AEC3 rests now.
    #[cfg(test)]
    pub(super) fn resting(&self) -> bool {
        self.resting
    }

    /// Hands AEC3 one far-end frame (mean-square `energy`). A quiet one is not handed while it
    /// rests; a louder one wakes it first.
    pub(super) fn render(&mut self, frame: &[f32; FRAME], energy: f32) -> GraphResult<()> {
        let heard = energy_dbfs(energy) >= REST_BELOW_DBFS;
        if heard {
            self.since_heard = 0;
        }
        if self.resting {
            if !heard {
                self.render_skipped += 1;
                return Ok(());
            }
            self.wake()?;
        }
        self.aec3.handle_render_frame(frame)
    }

    /// AEC3 takes up where it left off. It still holds back the samples it was last given, and
    /// it has missed the far-end and mic frames that went by meanwhile, not always as many of
    /// each (the far end comes in bursts). It is handed the mic frames it missed beyond the
    /// far-end ones, or one (silence, then the newest mic frames: their output is already
    /// out, only what they leave in AEC3 counts), and far-end silence for the far-end frames
    /// it missed beyond those: the two streams stand where they would had it never rested, so
    /// its filter, and the delay it found, fit the echo at once, and its next frame follows
    /// the last one sent.
    fn wake(&mut self) -> GraphResult<()> {
        self.resting = false;
        let (silence, primes) = priming(self.render_skipped, self.capture_skipped);
        for _ in 0..silence {
            self.aec3.handle_render_frame(&[0.0; FRAME])?;
        }
        let newest = self.recent.len().min(primes);
        let mut unused = Vec::new();
        for i in 0..primes {
            let frame = match (i + newest).checked_sub(primes) {
                Some(n) => self.recent[self.recent.len() - newest + n],
                None => [0.0; FRAME],
            };
            unused.clear();
            self.cancel_frame(&frame, &mut unused, &mut Vec::new())?;
        }
        self.recent.clear();
        tracing::debug!(
            rested_ms = self.capture_skipped * 10,
            primes,
            "the far end is heard again: the echo canceller wakes"
        );
        Ok(())
    }

    /// Runs one mic frame through: into `out` what is sent, into `linear` what AEC3's filter
    /// left of it (before its suppressor; while resting, the frame as it is), frame for frame
    /// and both [`HELD`] samples late.
    pub(super) fn process(
        &mut self,
        frame: &[f32],
        out: &mut Vec<f32>,
        linear: &mut Vec<f32>,
    ) -> GraphResult<()> {
        if !self.resting && self.may_rest && self.since_heard >= REST_AFTER {
            self.resting = true;
            self.render_skipped = 0;
            self.capture_skipped = 0;
            tracing::debug!("the far end is silent: the echo canceller rests");
        }
        self.since_heard = self.since_heard.saturating_add(1);
        let mut filtered = std::mem::take(&mut self.filtered);
        let mut cancelled = std::mem::take(&mut self.cancelled);
        filtered.clear();
        cancelled.clear();
        linear.clear();
        let done = self.high_pass.run(frame, &mut filtered).and_then(|()| {
            for frame in filtered.chunks_exact(FRAME) {
                if self.resting {
                    // What AEC3 would let out of it, less the cancelling.
                    cancelled.extend_from_slice(&self.held);
                    cancelled.extend_from_slice(&frame[..FRAME - HELD]);
                    linear.extend_from_slice(&cancelled[cancelled.len() - FRAME..]);
                    if self.recent.len() == PRIMES {
                        self.recent.pop_front();
                    }
                    let mut copy = [0.0; FRAME];
                    copy.copy_from_slice(frame);
                    self.recent.push_back(copy);
                    self.capture_skipped += 1;
                    self.rested += 1;
                } else {
                    self.cancel_frame(frame, &mut cancelled, linear)?;
                }
                self.held.copy_from_slice(&frame[FRAME - HELD..]);
            }
            match &mut self.suppressor {
                Some(suppressor) => {
                    for frame in cancelled.chunks_exact(FRAME) {
                        suppressor.run(frame, out)?;
                    }
                }
                None => out.extend_from_slice(&cancelled),
            }
            Ok(())
        });
        self.filtered = filtered;
        self.cancelled = cancelled;
        done
    }

    /// Runs one high-passed frame through AEC3: every frame it lets out now into `out` (usually
    /// one, none while it fills up, then the ones it held back), its linear output into
    /// `linear`.
    fn cancel_frame(
        &mut self,
        frame: &[f32],
        out: &mut Vec<f32>,
        linear: &mut Vec<f32>,
    ) -> GraphResult<()> {
        if self
            .aec3
            .process_capture_frame(frame, &mut self.out_frame)?
        {
            out.extend_from_slice(&self.out_frame);
        }
        while let Some(packet) = self.aec3.try_pull_output()? {
            out.extend_from_slice(packet.payload().samples());
        }
        while let Some(packet) = self.aec3.try_pull_linear_output()? {
            let samples = packet.payload().samples();
            let Some(split) = samples.len().checked_sub(LINEAR_LAGS_BY) else {
                linear.extend_from_slice(samples);
                continue;
            };
            linear.extend_from_slice(&self.linear_held);
            linear.extend_from_slice(&samples[..split]);
            self.linear_held.copy_from_slice(&samples[split..]);
        }
        while let Some(metrics) = self.aec3.try_pull_metrics()? {
            let found = metrics.payload().delay_ms;
            self.delay_ms = (found > 0).then_some(found as u32);
        }
        Ok(())
    }
}

/// What AEC3 is primed with as it wakes, having missed `render` far-end frames and `capture`
/// mic frames: frames of far-end silence and mic frames, each at most [`MOST_PRIMES`].
fn priming(render: u64, capture: u64) -> (usize, usize) {
    if capture == 0 {
        return (render.min(MOST_PRIMES as u64) as usize, 0);
    }
    let primes = capture.saturating_sub(render).clamp(1, MOST_PRIMES as u64);
    // `primes` is at most `capture`: the mic frames it leaves missed, less the far-end ones.
    let silence = render
        .saturating_sub(capture - primes)
        .min(MOST_PRIMES as u64);
    (silence as usize, primes as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second of broadband noise whose level wanders (no period for a correlation to slip
    /// into), at about −20 dBFS.
    fn wandering_noise(len: usize) -> Vec<f32> {
        let mut seed = 0x2545_f491_u32;
        (0..len)
            .map(|i| {
                seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                let white = (seed >> 8) as f32 / (1u32 << 24) as f32 - 0.5;
                white * 0.3 * (1.2 + (i as f32 / 2_000.0).sin())
            })
            .collect()
    }

    /// The lag (samples, up to 300) at which `out` best follows `mic` over `window`, and how
    /// well.
    fn lag_in(mic: &[f32], out: &[f32], window: std::ops::Range<usize>) -> (usize, f64) {
        (0..300)
            .map(|lag| {
                let (mut xy, mut xx, mut yy) = (0.0f64, 0.0f64, 0.0f64);
                for i in window.clone() {
                    let (x, y) = (f64::from(mic[i]), f64::from(out[i + lag]));
                    xy += x * y;
                    xx += x * x;
                    yy += y * y;
                }
                (lag, xy / (xx * yy).sqrt().max(1e-12))
            })
            .fold(
                (0, f64::MIN),
                |best, now| if now.1 > best.1 { now } else { best },
            )
    }

    /// Primed, AEC3 has been handed as many frames of each stream as it would have awake, less
    /// the same number of each; however long it rested and however lopsided the streams, it
    /// is primed with at most half a second of either.
    #[test]
    fn a_wake_evens_the_streams_out_within_a_bound() {
        for (render, capture, primed) in [
            (100, 100, (1, 1)),
            (96, 100, (0, 4)),
            (100, 104, (0, 4)),
            (101, 100, (2, 1)),
            (0, 0, (0, 0)),
            (3, 0, (3, 0)),
            (1_000_000, 0, (50, 0)),
            (1_000_000, 10, (50, 1)),
            (0, 1_000_000, (0, 50)),
            (u64::MAX, u64::MAX - 1, (2, 1)),
        ] {
            assert_eq!(
                priming(render, capture),
                primed,
                "{render} and {capture} missed"
            );
            let (silence, primes) = primed;
            if silence < 50 && primes < 50 {
                assert_eq!(render - silence as u64, capture - primes as u64);
            }
        }
    }

    /// Seven seconds of a mic with the far end silent but for two faint 50 ms sounds, at 2 and
    /// 4.5 s: AEC3 rests after a second, wakes for each sound and rests again a second after
    /// it. Across every switch the mic keeps its timing (AEC3's own 128 samples late), in what
    /// is sent and in the linear output alike, and its frames: no window anywhere follows the
    /// mic at another lag, none of it goes missing.
    #[test]
    fn resting_and_waking_keep_the_mics_timing_sample_for_sample() {
        let mic = wandering_noise(7 * 16_000);
        let faint = 10f32.powf(-50.0 / 20.0);
        let mut canceller = Canceller::new(EchoCanceller3Config::default(), false).unwrap();
        let (mut out, mut linear, mut linear_all) = (Vec::new(), Vec::new(), Vec::new());
        let mut switches = Vec::new();
        for (i, near) in mic.chunks(FRAME).enumerate() {
            let sounding = (200..205).contains(&i) || (450..455).contains(&i);
            let far = [if sounding { faint } else { 0.0 }; FRAME];
            let was = canceller.resting();
            canceller.render(&far, far[0] * far[0]).unwrap();
            canceller.process(near, &mut out, &mut linear).unwrap();
            linear_all.extend_from_slice(&linear);
            if canceller.resting() != was {
                switches.push((i, canceller.resting()));
            }
        }
        let expected = vec![
            (100, true),
            (200, false),
            (304, true),
            (450, false),
            (554, true),
        ];
        assert_eq!(switches, expected, "(frame, resting after it)");
        assert_eq!(canceller.rested, 100 + 146 + 146);
        assert_eq!(out.len(), mic.len());
        assert_eq!(linear_all.len(), mic.len());
        for start in (800..mic.len() - 2 * HELD - 320).step_by(160) {
            let window = start..start + 320;
            let (lag, r) = lag_in(&mic, &out, window.clone());
            assert!(
                lag == 128 && r > 0.9,
                "{window:?}: the output follows the mic {lag} samples late ({r:.2})"
            );
            let (lag, r) = lag_in(&mic, &linear_all, window.clone());
            assert!(
                lag == 128 && r > 0.9,
                "{window:?}: the linear output follows the mic {lag} samples late ({r:.2})"
            );
        }
    }
}
