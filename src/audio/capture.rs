//! The capture pipeline, off the real-time thread: takes mono samples from the microphone's
//! ring (or a WAV file at real-time pace), resamples them to 16 kHz, runs a device mic through
//! its voice processing (echo canceller, noise suppression), cuts them into frames, applies
//! the mute / push-to-talk / echo gates and hands PCM16 frames to the session through a
//! drop-oldest queue.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use tokio::sync::broadcast;

use super::aec::EchoPath;
use super::pcm::INPUT_RATE;
use super::pcm::extend_pcm16_le_from_f32;
use super::resample::StreamResampler;
use super::shared::{CaptureShared, Clock, PlaybackShared};
use super::wav::MonoClip;

/// Silence streamed after a WAV clip before its end is reported: long enough for the
/// server's voice detection to end the utterance and start replying.
pub const CLIP_TAIL: std::time::Duration = std::time::Duration::from_secs(2);

/// One frame of mic audio for `realtimeInput.audio`.
#[derive(Debug, Clone)]
pub struct MicFrame {
    /// 16 kHz mono PCM16 LE.
    pub pcm: Vec<u8>,
    /// When its newest sample was captured (on the audio [`Clock`]).
    pub captured_at: u64,
}

/// Where the samples come from.
pub enum MicInput {
    Device {
        consumer: rtrb::Consumer<f32>,
        shared: Arc<CaptureShared>,
        /// Kept open as long as the source lives.
        _stream: cpal::Stream,
    },
    /// A WAV clip streamed in real time, then silence.
    Wav {
        clip: MonoClip,
        started: Instant,
        /// Samples taken so far (past the clip's end they are silence).
        taken: u64,
    },
}

/// Mic audio from a source to 16 kHz frames.
pub struct Capture {
    pub source: MicInput,
    resampler: StreamResampler,
    framer: super::pcm::Framer,
    frames: broadcast::Sender<MicFrame>,
    clock: Clock,
    /// Frames go out only while open (not muted; talking in push-to-talk).
    pub open: bool,
    /// Echo gate: send silence while the model is audible (device mics only).
    pub gate: Option<Arc<PlaybackShared>>,
    /// Voice processing (device mics only; a WAV file is sent as it is).
    pub echo: Option<EchoPath>,
    input: Vec<f32>,
    resampled: Vec<f32>,
    processed: Vec<f32>,
    /// 16 kHz samples the resampler has made since the source opened.
    resampled_total: u64,
    /// Frames made and frames replaced by silence by the echo gate.
    pub frames_made: u64,
    pub frames_gated: u64,
    /// The WAV clip's end was reached.
    pub clip_done: bool,
}

impl Capture {
    pub fn new(
        source: MicInput,
        rate: u32,
        frame_samples: usize,
        frames: broadcast::Sender<MicFrame>,
        clock: Clock,
    ) -> anyhow::Result<Capture> {
        Ok(Capture {
            source,
            resampler: StreamResampler::new(rate, INPUT_RATE)?,
            framer: super::pcm::Framer::new(frame_samples),
            frames,
            clock,
            open: true,
            gate: None,
            echo: None,
            input: Vec::with_capacity(rate as usize / 10),
            resampled: Vec::with_capacity(INPUT_RATE as usize / 10),
            processed: Vec::with_capacity(INPUT_RATE as usize / 10),
            resampled_total: 0,
            frames_made: 0,
            frames_gated: 0,
            clip_done: false,
        })
    }

    /// "48 kHz → 16 kHz", for the status panel.
    pub fn path(&self) -> String {
        super::pcm::rate_path(self.resampler.rate_in(), INPUT_RATE)
    }

    /// Moves whatever the source has into frames. Returns true when the WAV clip and the
    /// silence after it ([`CLIP_TAIL`]) have just been streamed.
    pub fn pump(&mut self) -> bool {
        self.input.clear();
        let mut captured_at = self.clock.now();
        let mut stamp = None;
        let mut delivered_at = None;
        let mut clip_ended_now = false;
        match &mut self.source {
            MicInput::Device {
                consumer, shared, ..
            } => {
                let n = consumer.slots();
                if let Ok(chunk) = consumer.read_chunk(n) {
                    let (a, b) = chunk.as_slices();
                    self.input.extend_from_slice(a);
                    self.input.extend_from_slice(b);
                    chunk.commit_all();
                }
                let at = shared.last_callback_at.load(Ordering::Acquire);
                if at != 0 {
                    captured_at = at;
                    delivered_at = Some(at);
                }
                stamp = shared.stamp.load();
            }
            MicInput::Wav {
                clip,
                started,
                taken,
            } => {
                let due = (started.elapsed().as_secs_f64() * f64::from(clip.rate)) as u64;
                let len = clip.samples.len() as u64
                    + (CLIP_TAIL.as_secs_f64() * f64::from(clip.rate)) as u64;
                for i in *taken..due {
                    self.input
                        .push(clip.samples.get(i as usize).copied().unwrap_or(0.0));
                }
                if *taken < len && due >= len {
                    clip_ended_now = true;
                    self.clip_done = true;
                }
                *taken = due.max(*taken);
            }
        }
        if self.input.is_empty() {
            return clip_ended_now;
        }
        self.resampled.clear();
        self.resampler.push(&self.input, &mut self.resampled);
        let first = self.resampled_total;
        self.resampled_total += self.resampled.len() as u64;
        if let Some(echo) = &mut self.echo {
            // When the first of these 16 kHz samples was captured, from the device's stamp
            // (16 kHz sample p is device frame p·rate/16 000: the resampler keeps them aligned).
            let rate = f64::from(self.resampler.rate_in());
            let first_at = stamp.map(|(frame, at)| {
                (at as f64 + (first as f64 / f64::from(INPUT_RATE) - frame as f64 / rate) * 1e9)
                    .max(0.0) as u64
            });
            self.processed.clear();
            let filled = echo.gap_samples();
            echo.process(&self.resampled, first_at, delivered_at, &mut self.processed);
            if let MicInput::Device { shared, .. } = &self.source {
                let filled = echo.gap_samples() - filled;
                shared.gap_samples.fetch_add(filled, Ordering::Relaxed);
            }
            std::mem::swap(&mut self.processed, &mut self.resampled);
        }
        let gated = self
            .gate
            .as_ref()
            .is_some_and(|p| p.audible.load(Ordering::Acquire));
        let open = self.open;
        let frames = &self.frames;
        let mut made = 0;
        let mut gated_frames = 0;
        self.framer.push(&self.resampled, |frame| {
            made += 1;
            if !open {
                return;
            }
            let mut pcm = Vec::with_capacity(frame.len() * 2);
            if gated {
                gated_frames += 1;
                pcm.resize(frame.len() * 2, 0);
            } else {
                extend_pcm16_le_from_f32(frame, &mut pcm);
            }
            // No receiver means no session yet: the frame is simply not needed.
            let _ = frames.send(MicFrame { pcm, captured_at });
        });
        self.frames_made += made;
        self.frames_gated += gated_frames;
        clip_ended_now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wav_capture(
        clip: MonoClip,
        frame_samples: usize,
    ) -> (Capture, broadcast::Receiver<MicFrame>) {
        let (tx, rx) = broadcast::channel(1024);
        let rate = clip.rate;
        let source = MicInput::Wav {
            clip,
            // Pretend it started long ago, so the whole clip is due at once.
            started: Instant::now() - std::time::Duration::from_secs(10),
            taken: 0,
        };
        (
            Capture::new(source, rate, frame_samples, tx, Clock::new()).unwrap(),
            rx,
        )
    }

    #[test]
    fn a_wav_clip_becomes_20ms_frames_of_16khz_pcm16() {
        let clip = MonoClip {
            samples: vec![0.25; 48_000],
            rate: 48_000,
        };
        let (mut capture, mut rx) = wav_capture(clip, 320);
        assert!(capture.pump(), "the clip's end is reported");
        let mut frames = 0;
        while let Ok(frame) = rx.try_recv() {
            assert_eq!(frame.pcm.len(), 640, "20 ms at 16 kHz, 2 bytes a sample");
            frames += 1;
        }
        // 1 s of clip then 9 s of silence are due: 500 frames, give or take the filter edge.
        assert!((498..=500).contains(&frames), "{frames} frames");
    }

    #[test]
    fn a_closed_mic_sends_nothing() {
        let clip = MonoClip {
            samples: vec![0.25; 16_000],
            rate: 16_000,
        };
        let (mut capture, mut rx) = wav_capture(clip, 320);
        capture.open = false;
        capture.pump();
        assert!(rx.try_recv().is_err());
        assert!(capture.frames_made > 0);
    }

    #[test]
    fn the_echo_gate_sends_silence_while_the_model_is_audible() {
        let clip = MonoClip {
            samples: vec![0.5; 16_000],
            rate: 16_000,
        };
        let (mut capture, mut rx) = wav_capture(clip, 320);
        let playback = Arc::new(PlaybackShared::default());
        playback.audible.store(true, Ordering::Relaxed);
        capture.gate = Some(playback);
        capture.pump();
        let frame = rx.try_recv().unwrap();
        assert!(frame.pcm.iter().all(|&b| b == 0));
        assert!(capture.frames_gated > 0);
    }

    #[test]
    fn a_slow_consumer_loses_the_oldest_frames_and_learns_how_many() {
        let (tx, mut rx) = broadcast::channel(4);
        for i in 0..10u8 {
            tx.send(MicFrame {
                pcm: vec![i],
                captured_at: 1,
            })
            .unwrap();
        }
        match rx.try_recv() {
            Err(broadcast::error::TryRecvError::Lagged(n)) => assert_eq!(n, 6),
            other => panic!("expected a lag, got {other:?}"),
        }
        assert_eq!(
            rx.try_recv().unwrap().pcm,
            vec![6],
            "the newest four are kept"
        );
    }
}
