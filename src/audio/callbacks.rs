//! The two real-time callbacks' work, independent of cpal so it can be tested and benched:
//! capture downmixes into the capture ring; output plays the playback ring with a start-up
//! buffer, silence on underrun and an immediate flush when the epoch changes, and copies
//! exactly what it wrote to the device into the echo reference ring. Neither allocates,
//! locks, logs nor touches tokio.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use cpal::{FromSample, Sample};

use super::shared::{CaptureShared, Clock, PlaybackShared};

/// The input callback: interleaved device samples in, mono samples into the ring.
pub struct CaptureCallback {
    pub producer: rtrb::Producer<f32>,
    pub channels: usize,
    pub shared: Arc<CaptureShared>,
    pub clock: Clock,
    /// Frames written to the ring since the stream started.
    pub written: u64,
}

impl CaptureCallback {
    /// Takes one device buffer; `latency` is how long ago its first sample was captured,
    /// when the host says.
    pub fn process<T>(&mut self, interleaved: &[T], latency: Option<std::time::Duration>)
    where
        T: Sample,
        f32: FromSample<T>,
    {
        if let Some(latency) = latency {
            let latency = latency.as_nanos() as u64;
            self.shared.latency_ns.store(latency, Ordering::Relaxed);
            let captured = self.clock.now().saturating_sub(latency).max(1);
            self.shared.stamp.store(self.written, captured);
        }
        let channels = self.channels.max(1);
        let frames = interleaved.len() / channels;
        let room = self.producer.slots();
        let take = frames.min(room);
        if take < frames {
            self.shared
                .overflow_samples
                .fetch_add((frames - take) as u64, Ordering::Relaxed);
        }
        let mut peak = 0.0f32;
        if let Ok(chunk) = self.producer.write_chunk_uninit(take) {
            chunk.fill_from_iter(interleaved.chunks_exact(channels).map(|frame| {
                let sum: f32 = frame.iter().map(|&s| s.to_sample::<f32>()).sum();
                let mono = sum / channels as f32;
                peak = peak.max(mono.abs());
                mono
            }));
            self.written += take as u64;
        }
        self.shared.level.raise(peak);
        self.shared
            .last_callback_at
            .store(self.clock.now(), Ordering::Release);
    }
}

/// Whether the output is waiting for its start-up buffer or playing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OutputState {
    Priming,
    Playing,
}

/// The output callback: mono samples from the ring to every device channel.
pub struct OutputCallback {
    pub consumer: rtrb::Consumer<f32>,
    /// What was written to the device, mono, silence included: the echo canceller's far end.
    /// Taken here, where samples leave for the speaker, so it holds exactly what was played
    /// (a barge-in's flushed audio never enters it).
    reference: rtrb::Producer<f32>,
    /// Frames written to the reference ring since the stream started.
    reference_written: u64,
    pub channels: usize,
    /// Frames the ring must hold before playback starts (or restarts after an underrun).
    pub startup_frames: usize,
    pub shared: Arc<PlaybackShared>,
    pub clock: Clock,
    epoch: u64,
    state: OutputState,
}

impl OutputCallback {
    pub fn new(
        consumer: rtrb::Consumer<f32>,
        reference: rtrb::Producer<f32>,
        channels: usize,
        startup_frames: usize,
        shared: Arc<PlaybackShared>,
        clock: Clock,
    ) -> Self {
        OutputCallback {
            consumer,
            reference,
            reference_written: 0,
            channels: channels.max(1),
            startup_frames,
            epoch: shared.epoch.load(Ordering::Acquire),
            shared,
            clock,
            state: OutputState::Priming,
        }
    }

    /// Fills one device buffer (interleaved); `latency` is how long until its first sample
    /// is heard, when the host says.
    pub fn process<T>(&mut self, out: &mut [T], latency: Option<std::time::Duration>)
    where
        T: Sample + FromSample<f32>,
        f32: FromSample<T>,
    {
        let frames = out.len() / self.channels;
        let played = self.fill(out);
        if let Some(latency) = latency {
            let latency = latency.as_nanos() as u64;
            self.shared.latency_ns.store(latency, Ordering::Relaxed);
            let heard = self.clock.now() + latency;
            self.shared.stamp.store(self.reference_written, heard);
        }
        self.write_reference(out, played, frames);
        self.shared
            .last_callback_at
            .store(self.clock.now(), Ordering::Release);
    }

    /// Copies the buffer just written (its first `played` frames carry ring audio, the rest
    /// is silence) into the reference ring; what does not fit is counted, never waited for.
    fn write_reference<T>(&mut self, out: &[T], played: usize, frames: usize)
    where
        T: Sample,
        f32: FromSample<T>,
    {
        let room = self.reference.slots();
        let take = frames.min(room);
        if take < frames {
            self.shared
                .reference_overflow
                .fetch_add((frames - take) as u64, Ordering::Relaxed);
        }
        if let Ok(chunk) = self.reference.write_chunk_uninit(take) {
            self.reference_written += take as u64;
            let channels = self.channels;
            chunk.fill_from_iter(out.chunks_exact(channels).enumerate().map(|(i, frame)| {
                if i < played {
                    frame[0].to_sample::<f32>()
                } else {
                    0.0
                }
            }));
        }
    }

    /// Writes the device buffer; returns how many frames came from the ring.
    fn fill<T>(&mut self, out: &mut [T]) -> usize
    where
        T: Sample + FromSample<f32>,
    {
        let silence = T::EQUILIBRIUM;
        let epoch = self.shared.epoch.load(Ordering::Acquire);
        if epoch != self.epoch {
            // Barge-in: whatever is queued must never be heard.
            let queued = self.consumer.slots();
            if let Ok(chunk) = self.consumer.read_chunk(queued) {
                chunk.commit_all();
            }
            self.epoch = epoch;
            self.state = OutputState::Priming;
            out.fill(silence);
            if self.shared.audible.swap(false, Ordering::AcqRel) {
                let asked = self.shared.flush_requested_at.load(Ordering::Acquire);
                let now = self.clock.now();
                if asked != 0 && now >= asked {
                    self.shared
                        .flush_to_silence_ns
                        .store(now - asked, Ordering::Release);
                }
            }
            self.shared.epoch_seen.store(epoch, Ordering::Release);
            return 0;
        }

        let frames = out.len() / self.channels;
        let available = self.consumer.slots();
        let draining = self.shared.draining.load(Ordering::Acquire);
        if self.state == OutputState::Priming {
            if available >= self.startup_frames.max(1) || (draining && available > 0) {
                self.state = OutputState::Playing;
            } else {
                out.fill(silence);
                return 0;
            }
        }

        let take = frames.min(available);
        let mut peak = 0.0f32;
        if let Ok(chunk) = self.consumer.read_chunk(take) {
            let (first, second) = chunk.as_slices();
            for (frame, &sample) in out
                .chunks_exact_mut(self.channels)
                .zip(first.iter().chain(second.iter()))
            {
                frame.fill(T::from_sample(sample));
                peak = peak.max(sample.abs());
            }
            chunk.commit_all();
        }
        out[take * self.channels..].fill(silence);
        self.shared.level.raise(peak);
        if take > 0 {
            self.shared
                .frames_played
                .fetch_add(take as u64, Ordering::Relaxed);
            if !self.shared.audible.swap(true, Ordering::AcqRel) {
                self.shared
                    .audible_since
                    .store(self.clock.now(), Ordering::Release);
            }
        }
        if take < frames {
            self.state = OutputState::Priming;
            if draining {
                // The turn played out to its last sample.
                self.shared.audible.store(false, Ordering::Release);
            } else if self.shared.audible.load(Ordering::Acquire) {
                // More is coming but did not arrive in time.
                self.shared.underruns.fetch_add(1, Ordering::Relaxed);
            }
        }
        take
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(startup: usize, capacity: usize) -> (rtrb::Producer<f32>, OutputCallback) {
        let (producer, consumer) = rtrb::RingBuffer::new(capacity);
        let (reference, _) = rtrb::RingBuffer::new(capacity);
        let shared = Arc::new(PlaybackShared::default());
        (
            producer,
            OutputCallback::new(consumer, reference, 2, startup, shared, Clock::new()),
        )
    }

    fn push(producer: &mut rtrb::Producer<f32>, value: f32, n: usize) {
        for _ in 0..n {
            producer.push(value).unwrap();
        }
    }

    #[test]
    fn capture_downmixes_into_the_ring_and_counts_overflow() {
        let (producer, mut consumer) = rtrb::RingBuffer::new(4);
        let shared = Arc::new(CaptureShared::default());
        let mut callback = CaptureCallback {
            producer,
            channels: 2,
            shared: shared.clone(),
            clock: Clock::new(),
            written: 0,
        };
        callback.process(&[0.2, 0.4, -0.2, -0.4, 1.0, 0.0], None);
        assert_eq!(consumer.pop().unwrap(), 0.3f32);
        assert!((consumer.pop().unwrap() + 0.3).abs() < 1e-6);
        assert_eq!(consumer.pop().unwrap(), 0.5);
        callback.process(&[0.1; 12], None);
        assert_eq!(consumer.slots(), 4);
        assert_eq!(shared.overflow_samples.load(Ordering::Relaxed), 2);
        assert!((shared.level.take() - 0.5).abs() < 1e-6);
        assert_ne!(shared.last_callback_at.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn output_waits_for_the_startup_buffer_then_plays_to_every_channel() {
        let (mut producer, mut callback) = output(4, 64);
        push(&mut producer, 0.5, 3);
        let mut out = [1.0f32; 8];
        callback.process(&mut out, None);
        assert_eq!(out, [0.0; 8], "3 of 4 start-up frames: still silent");
        push(&mut producer, 0.5, 1);
        callback.process(&mut out, None);
        assert_eq!(out, [0.5; 8]);
        assert!(callback.shared.audible.load(Ordering::Relaxed));
        assert_eq!(callback.shared.frames_played.load(Ordering::Relaxed), 4);
    }

    #[test]
    fn underrun_mid_turn_writes_silence_and_is_counted() {
        let (mut producer, mut callback) = output(2, 64);
        push(&mut producer, 0.25, 3);
        let mut out = [1.0f32; 8];
        callback.process(&mut out, None);
        assert_eq!(out, [0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.0, 0.0]);
        assert_eq!(callback.shared.underruns.load(Ordering::Relaxed), 1);
        assert!(
            callback.shared.audible.load(Ordering::Relaxed),
            "an underrun is not the end of the turn"
        );
    }

    #[test]
    fn draining_plays_the_tail_below_the_startup_buffer_and_ends_audibly() {
        let (mut producer, mut callback) = output(100, 64);
        push(&mut producer, 0.5, 3);
        callback.shared.draining.store(true, Ordering::Relaxed);
        let mut out = [1.0f32; 8];
        callback.process(&mut out, None);
        assert_eq!(&out[..6], &[0.5; 6]);
        assert_eq!(callback.shared.underruns.load(Ordering::Relaxed), 0);
        assert!(!callback.shared.audible.load(Ordering::Relaxed));
    }

    #[test]
    fn a_new_epoch_flushes_the_ring_within_one_callback() {
        let (mut producer, mut callback) = output(1, 64);
        push(&mut producer, 0.5, 40);
        let mut out = [0.0f32; 8];
        callback.process(&mut out, None);
        assert_eq!(out, [0.5; 8]);
        callback
            .shared
            .flush_requested_at
            .store(callback.clock.now(), Ordering::Relaxed);
        callback.shared.epoch.fetch_add(1, Ordering::Release);
        callback.process(&mut out, None);
        assert_eq!(
            out, [0.0; 8],
            "silent in the first callback after the flush"
        );
        assert_eq!(producer.slots(), 64, "the ring was emptied");
        assert!(!callback.shared.audible.load(Ordering::Relaxed));
        assert_eq!(callback.shared.epoch_seen.load(Ordering::Relaxed), 1);
        assert!(callback.shared.flush_to_silence_ns.load(Ordering::Relaxed) > 0);
    }

    #[test]
    fn the_reference_holds_exactly_what_the_device_played_silence_and_flushes_included() {
        let (mut producer, consumer) = rtrb::RingBuffer::new(64);
        let (reference, mut played) = rtrb::RingBuffer::new(12);
        let shared = Arc::new(PlaybackShared::default());
        let mut callback = OutputCallback::new(consumer, reference, 2, 2, shared, Clock::new());
        let mut out = [0.0f32; 8];
        // Priming: silence out, silence in the reference.
        producer.push(0.5).unwrap();
        callback.process(&mut out, Some(std::time::Duration::from_millis(30)));
        // Playing 3 frames then an underrun's silence.
        producer.push(0.25).unwrap();
        producer.push(-0.25).unwrap();
        callback.process(&mut out, None);
        // Queued audio flushed by a barge-in never reaches the reference.
        for _ in 0..10 {
            producer.push(0.9).unwrap();
        }
        callback.shared.epoch.fetch_add(1, Ordering::Release);
        callback.process(&mut out, None);
        // The ring is full now: the next buffer is counted as lost, and nothing blocks.
        callback.process(&mut out, None);
        assert_eq!(
            callback.shared.reference_overflow.load(Ordering::Relaxed),
            4
        );
        let got: Vec<f32> = std::iter::from_fn(|| played.pop().ok()).collect();
        assert_eq!(
            got,
            [
                0.0, 0.0, 0.0, 0.0, 0.5, 0.25, -0.25, 0.0, 0.0, 0.0, 0.0, 0.0
            ]
        );
        assert_eq!(
            callback.shared.latency_ns.load(Ordering::Relaxed),
            30_000_000
        );
    }
}
