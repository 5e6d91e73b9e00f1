//! The playback feeder, off the real-time thread: model audio (24 kHz PCM16) is decoded,
//! written to `--output-wav`, resampled to the device rate and queued into the output ring,
//! with the overflow held here so faster-than-real-time bursts are never dropped. Turn ends
//! flush the resampler's tail; barge-in bumps the flush epoch and forgets everything queued.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use cpal::traits::StreamTrait as _;

use super::pcm::extend_f32_from_pcm16_le;
use super::resample::StreamResampler;
use super::shared::{PlaybackShared, span};
use livetalk_live::wav::{WavFull, WavSink};

/// The Live API's output rate.
pub const OUTPUT_RATE: u32 = 24_000;

/// How long the speaker stream runs on with nothing to play before it is paused (where the
/// device allows it). A running stream plays silence: the client and the sound server wake
/// every period for it, which was most of what a connected, silent session cost.
/// Long enough that the device's buffer has played out the reply's last samples (a pause
/// keeps what the buffer holds for the next start), short beside the pauses between turns.
pub const STOP_AFTER: Duration = Duration::from_millis(750);

/// The speaker side of the feeder.
pub struct OutputDevice {
    pub producer: rtrb::Producer<f32>,
    /// What the callback played, for the echo canceller.
    pub reference: rtrb::Consumer<f32>,
    /// Frames taken from `reference` so far (the index of the next one in the stream).
    pub reference_read: u64,
    pub shared: Arc<PlaybackShared>,
    pub rate: u32,
    /// Kept open as long as the output lives; paused while there is nothing to play.
    stream: cpal::Stream,
    /// The stream is paused (nothing to play for [`STOP_AFTER`]): its callback does not run.
    stopped: bool,
    /// The device could not pause or restart the stream: it runs from now on.
    always_on: bool,
    /// Since when there has been nothing to play, while the stream runs.
    quiet_since: Option<Instant>,
}

impl OutputDevice {
    /// The stream is paused while there is nothing to play, on both hosts (ALSA's through
    /// `patches/cpal-alsa-pause.patch`); one that refuses runs on.
    pub fn new(
        producer: rtrb::Producer<f32>,
        reference: rtrb::Consumer<f32>,
        shared: Arc<PlaybackShared>,
        rate: u32,
        stream: cpal::Stream,
    ) -> OutputDevice {
        OutputDevice {
            producer,
            reference,
            reference_read: 0,
            shared,
            rate,
            stream,
            stopped: false,
            always_on: false,
            quiet_since: None,
        }
    }

    /// The stream is paused: nothing plays, and the far end is silence.
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// Starts a paused stream again (audio to play, or the device to be watched).
    pub fn wake(&mut self) {
        self.quiet_since = None;
        if !self.stopped {
            return;
        }
        self.stopped = false;
        if let Err(e) = self.stream.play() {
            // The stream's own error callback says whether the device is gone.
            tracing::warn!("the speaker stream did not start again: {e}");
            self.always_on = true;
        }
    }

    /// Pauses the stream once nothing has been played or queued for [`STOP_AFTER`].
    fn stop_when_quiet(&mut self, quiet: bool) {
        if self.stopped || self.always_on {
            return;
        }
        if !quiet {
            self.quiet_since = None;
            return;
        }
        let since = *self.quiet_since.get_or_insert_with(Instant::now);
        if since.elapsed() < STOP_AFTER {
            return;
        }
        match self.stream.pause() {
            Ok(()) => {
                self.stopped = true;
                tracing::debug!("nothing to play: the speaker stream is paused");
            }
            Err(e) => {
                // Some devices cannot pause; they play silence as before.
                tracing::debug!("the speaker stream cannot be paused: {e}");
                self.always_on = true;
            }
        }
    }
}

/// What changed during a pump, for the worker to report.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct PlaybackChange {
    /// Audible playback started (`Some(true)`) or ended (`Some(false)`).
    pub audible: Option<bool>,
    /// First audio of a turn received → first sample out of the callback.
    pub socket_to_speaker: Option<Duration>,
    /// Flush asked → the callback went silent.
    pub interrupt_to_silence: Option<Duration>,
}

pub struct Playback {
    pub output: Option<OutputDevice>,
    resampler: Option<StreamResampler>,
    pub wav: Option<WavSink>,
    /// Resampled samples waiting for room in the ring.
    pending: VecDeque<f32>,
    decoded: Vec<f32>,
    resampled: Vec<f32>,
    /// Audio of the current turn has arrived and its end has not.
    turn_open: bool,
    /// The turn ended: once `pending` is in the ring, let the callback drain it.
    drain_after_pending: bool,
    /// When the current turn's first audio arrived, until it is heard.
    first_received_at: u64,
    /// Our last flush epoch; until the callback acknowledges it, nothing new enters the ring
    /// (it would be flushed along with the old audio).
    epoch: u64,
    was_audible: bool,
}

impl Playback {
    /// A feeder for the output (if any) and the WAV sink (if any). An output whose rate
    /// cannot be converted to is left out, with the reason.
    pub fn new(output: Option<OutputDevice>, wav: Option<WavSink>) -> (Self, Option<String>) {
        let mut problem = None;
        let (output, resampler) = match output {
            Some(out) => match StreamResampler::new(OUTPUT_RATE, out.rate) {
                Ok(resampler) => (Some(out), Some(resampler)),
                Err(e) => {
                    problem = Some(format!("{e:#}"));
                    (None, None)
                }
            },
            None => (None, None),
        };
        let epoch = output
            .as_ref()
            .map_or(0, |o| o.shared.epoch.load(Ordering::Acquire));
        let playback = Playback {
            output,
            resampler,
            wav,
            pending: VecDeque::new(),
            decoded: Vec::new(),
            resampled: Vec::new(),
            turn_open: false,
            drain_after_pending: false,
            first_received_at: 0,
            epoch,
            was_audible: false,
        };
        (playback, problem)
    }

    /// "24 kHz → 48 kHz", for the status panel.
    pub fn path(&self) -> Option<String> {
        self.output
            .as_ref()
            .map(|o| super::pcm::rate_path(OUTPUT_RATE, o.rate))
    }

    /// Samples (at the device rate) queued here and in the ring.
    pub fn queued(&self) -> usize {
        self.pending.len()
            + self
                .output
                .as_ref()
                .map_or(0, |o| o.producer.buffer().capacity() - o.producer.slots())
    }

    /// Queues model audio received at `received_at`. Returns `Some` when this audio filled
    /// the `--output-wav` file to its cap (once).
    pub fn play(&mut self, pcm: &[u8], received_at: u64) -> Option<WavFull> {
        let full = match self.wav.as_mut().map(|wav| wav.write_pcm16_le(pcm)) {
            Some(Ok(full)) => full,
            Some(Err(e)) => {
                tracing::warn!("{e:#}");
                self.wav = None;
                None
            }
            None => None,
        };
        self.queue(pcm, received_at);
        full
    }

    fn queue(&mut self, pcm: &[u8], received_at: u64) {
        let (Some(output), Some(resampler)) = (&mut self.output, &mut self.resampler) else {
            return;
        };
        output.wake();
        if !self.turn_open {
            self.turn_open = true;
            self.drain_after_pending = false;
            output.shared.draining.store(false, Ordering::Release);
            if !self.was_audible {
                self.first_received_at = received_at;
            }
        }
        self.decoded.clear();
        extend_f32_from_pcm16_le(pcm, &mut self.decoded);
        self.resampled.clear();
        resampler.push(&self.decoded, &mut self.resampled);
        self.pending.extend(self.resampled.iter().copied());
        self.fill_ring();
    }

    /// The model's turn is over: play out its tail to the last sample.
    pub fn end_turn(&mut self) {
        if let Some(wav) = &mut self.wav {
            let _ = wav.sync();
        }
        if !self.turn_open {
            return;
        }
        self.turn_open = false;
        if let Some(resampler) = &mut self.resampler {
            self.resampled.clear();
            resampler.flush(&mut self.resampled);
            self.pending.extend(self.resampled.iter().copied());
        }
        self.drain_after_pending = true;
        self.fill_ring();
    }

    /// Barge-in: silence now, forget everything queued, start the next turn fresh.
    pub fn flush(&mut self, requested_at: u64) {
        self.pending.clear();
        self.turn_open = false;
        self.drain_after_pending = false;
        self.first_received_at = 0;
        if let Some(resampler) = &mut self.resampler {
            resampler.reset();
        }
        if let Some(output) = &self.output {
            output.shared.draining.store(false, Ordering::Release);
            if output.stopped {
                // Nothing is queued or heard, and a paused callback would not see the epoch
                // until it runs again: there is nothing to silence.
                return;
            }
            output
                .shared
                .flush_requested_at
                .store(requested_at, Ordering::Release);
            self.epoch = output.shared.epoch.fetch_add(1, Ordering::AcqRel) + 1;
        }
    }

    /// A flush the output callback has not acted on yet.
    pub fn flush_pending(&self) -> bool {
        self.output
            .as_ref()
            .is_some_and(|o| o.shared.epoch_seen.load(Ordering::Acquire) != self.epoch)
    }

    /// Nothing is queued, playing or being flushed: the speaker only plays silence (or its
    /// stream is paused).
    pub fn idle(&self) -> bool {
        self.pending.is_empty()
            && !self.turn_open
            && !self.drain_after_pending
            && !self.flush_pending()
            && self.output.as_ref().is_none_or(|o| {
                o.stopped
                    || (o.producer.slots() == o.producer.buffer().capacity()
                        && !o.shared.audible.load(Ordering::Acquire))
            })
    }

    /// Tops up the ring and reports what the callback did since the last pump; pauses the
    /// speaker stream once it has had nothing to play for [`STOP_AFTER`], if `may_stop`.
    pub fn pump(&mut self, may_stop: bool) -> PlaybackChange {
        self.fill_ring();
        let mut change = PlaybackChange::default();
        let quiet = may_stop && self.idle();
        let Some(output) = &mut self.output else {
            return change;
        };
        output.stop_when_quiet(quiet);
        let shared = &output.shared;
        let audible = shared.audible.load(Ordering::Acquire);
        if audible != self.was_audible {
            self.was_audible = audible;
            change.audible = Some(audible);
            if audible && self.first_received_at != 0 {
                let since = shared.audible_since.load(Ordering::Acquire);
                change.socket_to_speaker = span(self.first_received_at, since);
                self.first_received_at = 0;
            }
        }
        let silence = shared.flush_to_silence_ns.swap(0, Ordering::AcqRel);
        if silence != 0 {
            change.interrupt_to_silence = Some(Duration::from_nanos(silence));
        }
        change
    }

    fn fill_ring(&mut self) {
        let Some(output) = &mut self.output else {
            return;
        };
        if output.shared.epoch_seen.load(Ordering::Acquire) != self.epoch {
            return;
        }
        let room = output.producer.slots().min(self.pending.len());
        if room > 0
            && let Ok(chunk) = output.producer.write_chunk_uninit(room)
        {
            chunk.fill_from_iter(self.pending.drain(..room));
        }
        if self.drain_after_pending && self.pending.is_empty() {
            self.drain_after_pending = false;
            output.shared.draining.store(true, Ordering::Release);
        }
    }
}
