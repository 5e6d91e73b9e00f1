//! State shared between the real-time callbacks and the audio worker: only atomics, so the
//! callbacks never lock or allocate to read or write it.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A monotonic clock as nanoseconds since the audio system started, storable in an atomic.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    base: Instant,
}

impl Clock {
    pub fn new() -> Self {
        Clock {
            base: Instant::now(),
        }
    }

    /// Nanoseconds since the clock was made (never 0, so 0 can mean "not yet").
    #[inline]
    pub fn now(&self) -> u64 {
        self.at(Instant::now())
    }

    /// `instant` on this clock.
    #[inline]
    pub fn at(&self, instant: Instant) -> u64 {
        instant
            .saturating_duration_since(self.base)
            .as_nanos()
            .min(u128::from(u64::MAX - 1)) as u64
            + 1
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

/// The span between two clock readings, if both were taken and in order.
pub fn span(from: u64, to: u64) -> Option<Duration> {
    (from != 0 && to >= from).then(|| Duration::from_nanos(to - from))
}

/// A peak meter: callbacks raise it, the reader takes and resets it.
#[derive(Debug, Default)]
pub struct PeakMeter(AtomicU32);

impl PeakMeter {
    /// Raises the meter to `level` (≥ 0) if higher. Non-negative floats order like their bits.
    #[inline]
    pub fn raise(&self, level: f32) {
        self.0
            .fetch_max(level.max(0.0).to_bits(), Ordering::Relaxed);
    }

    /// The peak since the last take.
    pub fn take(&self) -> f32 {
        f32::from_bits(self.0.swap(0, Ordering::Relaxed))
    }
}

/// Where a stream's timeline stands: device frame `frame` (counted from the stream's start)
/// is heard, or was captured, at `at` on the audio [`Clock`]. Written by one callback and read
/// by the worker without locks (a sequence lock: the reader retries while a write is under
/// way, and gives up after a few tries rather than spin).
#[derive(Debug, Default)]
pub struct Stamp {
    seq: AtomicU64,
    frame: AtomicU64,
    at: AtomicU64,
}

impl Stamp {
    /// Called by the stream's one callback only.
    #[inline]
    pub fn store(&self, frame: u64, at: u64) {
        let seq = self.seq.load(Ordering::Relaxed);
        self.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        std::sync::atomic::fence(Ordering::Release);
        self.frame.store(frame, Ordering::Relaxed);
        self.at.store(at, Ordering::Relaxed);
        self.seq.store(seq.wrapping_add(2), Ordering::Release);
    }

    /// (frame, at), once a callback has stored one.
    pub fn load(&self) -> Option<(u64, u64)> {
        for _ in 0..8 {
            let before = self.seq.load(Ordering::Acquire);
            if before % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let frame = self.frame.load(Ordering::Relaxed);
            let at = self.at.load(Ordering::Relaxed);
            std::sync::atomic::fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) == before {
                return (at != 0).then_some((frame, at));
            }
        }
        None
    }
}

/// What the capture callback reports.
#[derive(Debug, Default)]
pub struct CaptureShared {
    pub level: PeakMeter,
    /// Samples lost because the capture ring was full (the worker fell behind).
    pub overflow_samples: AtomicU64,
    /// 16 kHz samples of silence the worker put in place of mic audio lost before it reached
    /// the callback (see `EchoPath`); not touched by the callback.
    pub gap_samples: AtomicU64,
    /// When the newest samples entered the ring.
    pub last_callback_at: AtomicU64,
    /// The device's capture latency as cpal's timestamps tell it (callback − capture), in ns:
    /// half of the device delay the audio popup shows.
    pub latency_ns: AtomicU64,
    /// When the ring's frames were captured: the echo canceller lines the speaker's reference
    /// up with the mic by it.
    pub stamp: Stamp,
}

/// What the output callback and the playback feeder share.
#[derive(Debug, Default)]
pub struct PlaybackShared {
    pub level: PeakMeter,
    /// Bumped by the feeder to silence the output: the callback drops the ring when it sees a
    /// new value, then acknowledges it in `epoch_seen`.
    pub epoch: AtomicU64,
    pub epoch_seen: AtomicU64,
    /// When the flush was asked for, and how long until the callback went silent.
    pub flush_requested_at: AtomicU64,
    pub flush_to_silence_ns: AtomicU64,
    /// Model audio is being heard: samples are leaving the ring.
    pub audible: AtomicBool,
    /// The turn's audio is all in the ring: play it out without waiting for the start-up
    /// buffer, and an empty ring is the end, not an underrun.
    pub draining: AtomicBool,
    /// When the current stretch of audible playback began.
    pub audible_since: AtomicU64,
    /// Callbacks that found the ring empty in the middle of a turn.
    pub underruns: AtomicU64,
    /// Device frames taken from the ring and played.
    pub frames_played: AtomicU64,
    /// The device's playback latency as cpal's timestamps tell it (playback − callback), in ns.
    pub latency_ns: AtomicU64,
    /// When the callback last ran.
    pub last_callback_at: AtomicU64,
    /// When the reference ring's frames are heard.
    pub stamp: Stamp,
    /// Samples of the echo reference lost because its ring was full (the worker fell behind).
    pub reference_overflow: AtomicU64,
}
