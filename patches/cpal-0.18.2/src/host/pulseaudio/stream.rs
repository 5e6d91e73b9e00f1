use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Condvar, Mutex,
    },
    time::{Duration, Instant},
};

#[cfg(not(target_has_atomic = "64"))]
use portable_atomic::AtomicU64;
#[cfg(target_has_atomic = "64")]
use std::sync::atomic::AtomicU64;

use futures::executor::block_on;
use futures::FutureExt as _;
use pulseaudio::{protocol, AsPlaybackSource};

use crate::{
    host::{emit_error, latch::Latch, ErrorCallbackArc},
    traits::StreamTrait,
    Data, Error, ErrorKind, FrameCount, InputCallbackInfo, InputStreamTimestamp,
    OutputCallbackInfo, OutputStreamTimestamp, SampleFormat, StreamInstant,
};

/// The first timing query after a stream starts (or is played or paused) comes this soon after
/// the one before; each later one twice as late, up to [`LATENCY_MAX_INTERVAL`]. Between
/// queries the latency is interpolated from the bytes the callbacks moved and the time that
/// passed, as libpulse does, so the callbacks never wait for the server.
const LATENCY_MIN_INTERVAL: Duration = Duration::from_millis(10);
const LATENCY_MAX_INTERVAL: Duration = Duration::from_millis(1000);

/// What the last timing query said, packed in one atomic so that a callback never reads half of
/// one query and half of the next: the device's own latency (µs, high 32 bits) and where the
/// server's index stood at time zero (the index as µs of audio minus the µs since the stream
/// was created when it was measured; low 32 bits, signed, in units of 100 µs). The index runs
/// at the sample rate, so at time `t` it stands at `origin + t`.
struct Anchor(AtomicU64);

impl Anchor {
    const NONE: u64 = u64::MAX;
    const ORIGIN_UNIT_USEC: i64 = 100;

    fn new() -> Self {
        Anchor(AtomicU64::new(Self::NONE))
    }

    fn store(&self, device_usec: u64, origin_usec: i64) {
        let device = device_usec.min(u32::MAX as u64 - 1);
        let origin = (origin_usec / Self::ORIGIN_UNIT_USEC)
            .clamp(i32::MIN as i64, i32::MAX as i64) as i32;
        self.0
            .store(device << 32 | u64::from(origin as u32), Ordering::Relaxed);
    }

    /// `(device_usec, origin_usec)`, or `None` before the first query.
    fn load(&self) -> Option<(u64, i64)> {
        let packed = self.0.load(Ordering::Relaxed);
        if packed == Self::NONE {
            return None;
        }
        let origin = i64::from(packed as u32 as i32) * Self::ORIGIN_UNIT_USEC;
        Some((packed >> 32, origin))
    }
}

/// `bytes` of this stream's audio as microseconds.
fn bytes_usec(sample_spec: protocol::SampleSpec, bytes: u64) -> i64 {
    let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
    i64::try_from(sample_spec.bytes_to_duration(bytes).as_micros()).unwrap_or(i64::MAX)
}

/// Asks the server where a stream stands, every [`LATENCY_MIN_INTERVAL`] doubling up to
/// [`LATENCY_MAX_INTERVAL`] (from the start again when `handle` is notified), and stores it in
/// `anchor`. `query` returns the device latency and the index the anchor follows, in bytes.
fn poll_timing<Q>(
    cancel: &AtomicBool,
    update: &(Mutex<bool>, Condvar),
    start: Instant,
    sample_spec: protocol::SampleSpec,
    anchor: &Anchor,
    mut query: Q,
) -> Result<(), Error>
where
    Q: FnMut() -> Result<(u64, i64), Error>,
{
    let mut interval = LATENCY_MIN_INTERVAL;
    loop {
        if cancel.load(Ordering::Relaxed) {
            break;
        }
        let asked = Instant::now().saturating_duration_since(start);
        let (device_usec, index) = query()?;
        let answered = Instant::now().saturating_duration_since(start);
        // The server measured somewhere between the question and the answer.
        let at_usec = ((asked + answered) / 2).as_micros() as i64;
        anchor.store(
            device_usec,
            bytes_usec(sample_spec, index.max(0) as u64) - at_usec,
        );

        // Wait until woken by play/pause/drop or until the interval is up.
        let (lock, cvar) = update;
        let Ok(guard) = lock.lock() else { break };
        let (mut guard, _) = cvar
            .wait_timeout_while(guard, interval, |notified| !*notified)
            .unwrap_or_else(|e| e.into_inner());
        interval = if *guard {
            LATENCY_MIN_INTERVAL
        } else {
            (interval * 2).min(LATENCY_MAX_INTERVAL)
        };
        *guard = false;
    }
    Ok(())
}

// Coordinates the latency polling thread
struct LatencyHandle {
    // Cancellation on drop
    cancel: Arc<AtomicBool>,
    // Event-driven early wakeup from play/pause
    update: Arc<(Mutex<bool>, Condvar)>,
}

impl LatencyHandle {
    fn new() -> Self {
        Self {
            cancel: Arc::new(AtomicBool::new(false)),
            update: Arc::new((Mutex::new(false), Condvar::new())),
        }
    }

    // Trigger an early poll
    fn notify(&self) {
        let (lock, cvar) = &*self.update;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cvar.notify_one();
    }

    // Signal cancellation and wake the thread immediately
    fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
        self.notify();
    }
}

enum StreamInner {
    Playback(pulseaudio::PlaybackStream, Instant, LatencyHandle),
    Record(pulseaudio::RecordStream, Instant, LatencyHandle),
}

pub struct Stream {
    inner: StreamInner,
    workers: Vec<std::thread::JoinHandle<()>>,
    latch: Latch,
}

impl Drop for Stream {
    fn drop(&mut self) {
        match &mut self.inner {
            StreamInner::Playback(stream, _, handle) => {
                handle.cancel();
                // Help the play_all driver thread terminate by
                // queueing a delete, which causes the reactor to drop
                // the source's eof_tx. We need to do this because
                // poll_read always reports a non-empty buffer.
                let _ = stream.clone().delete().now_or_never();
            }
            StreamInner::Record(_, _, handle) => {
                handle.cancel();
            }
        }

        // Unpark the threads in case they're sleeping.
        self.signal_ready();

        for handle in self.workers.drain(..) {
            // Prevent self-join: a worker thread may surface an error
            // through the user's error_callback, and that callback may
            // drop the Stream — in which case we'd be joining ourselves.
            if handle.thread().id() != std::thread::current().id() {
                let _ = handle.join();
            }
        }
    }
}

impl StreamTrait for Stream {
    fn play(&self) -> Result<(), Error> {
        match &self.inner {
            StreamInner::Playback(stream, _, handle) => {
                block_on(stream.uncork()).map_err(Error::from)?;
                handle.notify();
            }
            StreamInner::Record(stream, _, handle) => {
                // Not waiting for the first fragment (`started()`): a source that renders in
                // long blocks, such as an idle null sink's monitor, may take seconds to send
                // it, and the callback comes when it does.
                block_on(stream.uncork()).map_err(Error::from)?;
                handle.notify();
            }
        }
        Ok(())
    }

    fn pause(&self) -> Result<(), Error> {
        let res = match &self.inner {
            StreamInner::Playback(stream, _, _) => block_on(stream.cork()),
            StreamInner::Record(stream, _, _) => block_on(stream.cork()),
        };
        res.map_err(Error::from)?;
        match &self.inner {
            StreamInner::Playback(_, _, handle) | StreamInner::Record(_, _, handle) => {
                handle.notify()
            }
        }
        Ok(())
    }

    fn now(&self) -> StreamInstant {
        let start = match &self.inner {
            StreamInner::Playback(_, start, _) | StreamInner::Record(_, start, _) => *start,
        };
        let elapsed = start.elapsed();
        StreamInstant::new(elapsed.as_secs(), elapsed.subsec_nanos())
    }

    fn buffer_size(&self) -> Result<FrameCount, Error> {
        let (spec, bytes) = match &self.inner {
            StreamInner::Playback(s, _, _) => (
                s.sample_spec(),
                s.buffer_attr().minimum_request_length as usize,
            ),
            StreamInner::Record(s, _, _) => {
                (s.sample_spec(), s.buffer_attr().fragment_size as usize)
            }
        };
        let frame_size = spec.channels as usize * spec.format.bytes_per_sample();
        Ok((bytes / frame_size) as _)
    }
}

impl Stream {
    pub fn new_playback<D, E>(
        client: pulseaudio::Client,
        params: protocol::PlaybackStreamParams,
        mut data_callback: D,
        error_callback: E,
    ) -> Result<Self, Error>
    where
        D: FnMut(&mut Data, &OutputCallbackInfo) + Send + 'static,
        E: FnMut(Error) + Send + 'static,
    {
        let start = Instant::now();

        // Where the server's read (playback) or write (record) index stood, for the callbacks.
        let anchor = Arc::new(Anchor::new());
        let callback_anchor = anchor.clone();
        let sample_spec = params.sample_spec;
        let pa_format = sample_spec.format;

        let format: SampleFormat = pa_format.try_into().map_err(|_| {
            Error::with_message(
                ErrorKind::UnsupportedConfig,
                "Sample format is not supported",
            )
        })?;

        // Silence for unsigned formats is the midpoint, not zero. Among
        // PulseAudio's supported formats, only U8 is unsigned and has a
        // single-byte repeatable silence representation (0x80). Multi-byte
        // unsigned formats (U16, U32, ...) are not currently supported.
        let silence_byte = if format == SampleFormat::U8 {
            0x80u8
        } else {
            0u8
        };

        let handle = LatencyHandle::new();

        // Bytes the callback has handed to the server so far.
        let mut written: u64 = 0;
        // Wrap the write callback to match the pulseaudio signature.
        let callback = move |buf: &mut [u8]| {
            let elapsed = Instant::now().saturating_duration_since(start);
            let elapsed_usec = elapsed.as_micros() as i64;
            // The first frame of `buf` plays once the device has played what is queued
            // before it: everything written so far, less what the server's read index has
            // passed (it runs at the sample rate), plus the device's own latency.
            let latency = match callback_anchor.load() {
                Some((device_usec, origin_usec)) => {
                    let read_usec = origin_usec + elapsed_usec;
                    device_usec + (bytes_usec(sample_spec, written) - read_usec).max(0) as u64
                }
                None => 0,
            };

            let playback_time = elapsed + Duration::from_micros(latency);

            let timestamp = OutputStreamTimestamp {
                callback: StreamInstant::new(elapsed.as_secs(), elapsed.subsec_nanos()),
                playback: StreamInstant::new(playback_time.as_secs(), playback_time.subsec_nanos()),
            };

            // Preemptively fill the buffer with silence in case the user
            // callback doesn't fill it completely (cpal's API doesn't allow
            // short writes).
            buf.fill(silence_byte);

            let bps = sample_spec.format.bytes_per_sample();
            let n_samples = buf.len() / bps;

            // SAFETY: we calculated the number of samples based on
            // `sample_spec.format`, and `format` is directly derived from (and
            // equivalent to) `sample_spec.format`.
            let mut data = unsafe { Data::from_parts(buf.as_mut_ptr().cast(), n_samples, format) };

            data_callback(&mut data, &OutputCallbackInfo { timestamp });

            written += buf.len() as u64;

            // We always consider the full buffer filled, because cpal's
            // user-facing API doesn't allow short writes.
            buf.len()
        };

        let stream = block_on(client.create_playback_stream(params, callback.as_playback_source()))
            .map_err(Error::from)?;

        // Share the error callback between the worker and latency threads so
        // both can surface errors to the user.
        let error_callback: ErrorCallbackArc = Arc::new(Mutex::new(error_callback));

        // Spawn a thread to drive the stream future. It will exit automatically
        // when the stream is stopped by the user.
        let stream_clone = stream.clone();
        let error_callback_clone = error_callback.clone();
        let cancel_driver = handle.cancel.clone();

        // The latch is released just before the `Stream` is returned so the driver and latency
        // threads cannot fire any callbacks before the caller has the handle.
        let mut latch = Latch::new();
        let waiter_driver = latch.waiter();

        let driver_handle = std::thread::spawn(move || {
            waiter_driver.wait();
            if let Err(e) = block_on(stream_clone.play_all()) {
                // A server playback error is expected when the client
                // closes their stream. No need to report it back to
                // the client.
                if !cancel_driver.load(Ordering::Relaxed) {
                    emit_error(&error_callback_clone, Error::from(e));
                }
            }
        });

        let cancel_thread = handle.cancel.clone();
        let update_thread = handle.update.clone();
        let stream_clone = stream.clone();

        let waiter_latency = latch.waiter();
        let latency_handle = std::thread::spawn(move || {
            waiter_latency.wait();
            let polled = poll_timing(
                &cancel_thread,
                &update_thread,
                start,
                sample_spec,
                &anchor,
                || {
                    let timing = block_on(stream_clone.timing_info()).map_err(Error::from)?;
                    Ok((timing.sink_usec, timing.read_offset))
                },
            );
            if let Err(e) = polled {
                emit_error(&error_callback, e);
            }
        });

        latch.add_thread(driver_handle.thread().clone());
        latch.add_thread(latency_handle.thread().clone());
        Ok(Self {
            inner: StreamInner::Playback(stream, start, handle),
            workers: vec![driver_handle, latency_handle],
            latch,
        })
    }

    pub fn new_record<D, E>(
        client: pulseaudio::Client,
        params: protocol::RecordStreamParams,
        mut data_callback: D,
        mut error_callback: E,
    ) -> Result<Self, Error>
    where
        D: FnMut(&Data, &InputCallbackInfo) + Send + 'static,
        E: FnMut(Error) + Send + 'static,
    {
        let start = Instant::now();

        // Where the server's read (playback) or write (record) index stood, for the callbacks.
        let anchor = Arc::new(Anchor::new());
        let callback_anchor = anchor.clone();
        let sample_spec = params.sample_spec;
        let pa_format = sample_spec.format;

        let format: SampleFormat = pa_format.try_into().map_err(|_| {
            Error::with_message(
                ErrorKind::UnsupportedConfig,
                "Sample format is not supported",
            )
        })?;

        let handle = LatencyHandle::new();

        // Bytes the callback has been given so far.
        let mut read: u64 = 0;
        let callback = move |buf: &[u8]| {
            let elapsed = Instant::now().saturating_duration_since(start);
            let elapsed_usec = elapsed.as_micros() as i64;
            // The first frame of `buf` was captured when the server's write index passed it
            // (it runs at the sample rate), less the device's own latency: it is as old as what
            // the server has written beyond it, plus that.
            let latency = match callback_anchor.load() {
                Some((device_usec, origin_usec)) => {
                    let write_usec = origin_usec + elapsed_usec;
                    device_usec + (write_usec - bytes_usec(sample_spec, read)).max(0) as u64
                }
                None => 0,
            };

            let capture_time = elapsed
                .checked_sub(Duration::from_micros(latency))
                .unwrap_or_default();

            let timestamp = InputStreamTimestamp {
                callback: StreamInstant::new(elapsed.as_secs(), elapsed.subsec_nanos()),
                capture: StreamInstant::new(capture_time.as_secs(), capture_time.subsec_nanos()),
            };

            let bps = sample_spec.format.bytes_per_sample();
            let n_samples = buf.len() / bps;

            // SAFETY: we calculated the number of samples based on
            // `sample_spec.format`, and `format` is directly derived from (and
            // equivalent to) `sample_spec.format`. The pointer is cast from
            // *const to *mut, but cpal's Data type for input streams only
            // exposes shared references (&[T]), so no mutation occurs.
            let data = unsafe { Data::from_parts(buf.as_ptr() as *mut _, n_samples, format) };

            data_callback(&data, &InputCallbackInfo { timestamp });

            read += buf.len() as u64;
        };

        let stream =
            block_on(client.create_record_stream(params, callback)).map_err(Error::from)?;

        // Spawn a thread to monitor the stream's latency in a loop.
        let cancel_thread = handle.cancel.clone();
        let update_thread = handle.update.clone();
        let stream_clone = stream.clone();

        // The latch is released just before the `Stream` is returned so the latency thread cannot
        // fire any callbacks before the caller has the handle.
        let mut latch = Latch::new();
        let waiter_latency = latch.waiter();

        let latency_handle = std::thread::spawn(move || {
            waiter_latency.wait();
            let polled = poll_timing(
                &cancel_thread,
                &update_thread,
                start,
                sample_spec,
                &anchor,
                || {
                    let timing = block_on(stream_clone.timing_info()).map_err(Error::from)?;
                    Ok((timing.source_usec, timing.write_offset))
                },
            );
            if let Err(e) = polled {
                error_callback(e);
            }
        });

        latch.add_thread(latency_handle.thread().clone());
        Ok(Self {
            inner: StreamInner::Record(stream, start, handle),
            workers: vec![latency_handle],
            latch,
        })
    }

    /// Releases the latch so the worker thread can begin processing audio callbacks.
    pub(crate) fn signal_ready(&self) {
        self.latch.release();
    }
}

