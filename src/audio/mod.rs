//! Audio I/O: the microphone at 16 kHz mono PCM16 for the Live API, model audio (24 kHz) out
//! through the speaker, barge-in, echo cancellation (or the echo gate), noise suppression,
//! push-to-talk, and WAV files standing in for either device. One worker thread owns the
//! devices and the non-real-time processing (this file: [`Audio`] is its command side); the
//! cpal callbacks only move samples through lock-free rings (see [`callbacks`]). What it is
//! asked for is `options`, what it reports `report`.

pub mod aec;
pub mod callbacks;
pub mod capture;
pub mod device;
pub mod echo_watch;
mod options;
pub mod pcm;
pub mod playback;
mod report;
pub mod resample;
pub mod shared;
pub mod wav;
pub mod worker;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc as std_mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use tokio::sync::{broadcast, mpsc};

pub use aec::EchoFigures;
pub use capture::MicFrame;
pub use device::{AudioHost, DeviceListing, Direction};
pub use options::{AudioOptions, EchoMode};
pub use pcm::{INPUT_RATE, rate_path};
pub use playback::OUTPUT_RATE;
pub use report::{AudioEvent, AudioFigures, AudioSetup, Latency, StreamInfo};
pub use worker::{AudioOutput, AudioWorker};

use capture::{Capture, MicInput};
use device::{DeviceError, ErrorSink, OutputParts, Severity, StreamFault};
use livetalk_live::wav::WavSink;
use playback::{OutputDevice, Playback};
use shared::{CaptureShared, Clock, PlaybackShared};
use wav::MonoClip;

enum Command {
    Play {
        pcm: Vec<u8>,
        received_at: u64,
    },
    EndTurn,
    Flush {
        requested_at: u64,
    },
    MicOpen(bool),
    SetEcho(EchoMode),
    Reopen,
    /// Send the figures now, changed or not.
    ReportFigures,
}

/// The engine's handle on the audio worker: commands in.
pub struct Audio {
    commands: Option<std_mpsc::Sender<Command>>,
    clock: Clock,
    thread: Option<JoinHandle<()>>,
    /// Says the worker has finished (or, disconnected, that it died).
    done: std_mpsc::Receiver<()>,
}

/// How long closing waits for the audio worker to close its devices.
const CLOSE_DEADLINE: Duration = Duration::from_secs(2);

/// What the audio worker sends out: events for the app, mic frames for the session.
pub struct AudioFeeds {
    pub events: mpsc::UnboundedReceiver<AudioEvent>,
    /// Drop-oldest: a receiver that falls behind learns how many frames it lost.
    pub frames: broadcast::Receiver<MicFrame>,
}

/// Mic frames the session may fall behind by before the oldest are dropped (2 s at 20 ms).
const FRAME_QUEUE: usize = 100;
/// How often the worker moves samples when a stream is open.
const PUMP_EVERY: Duration = Duration::from_millis(5);
/// With nothing to play only the mic needs the worker, once per callback: it waits for the
/// next one (and this much more, for the callback's own lateness), up to [`QUIET_WAIT_MAX`].
const QUIET_MARGIN: Duration = Duration::from_millis(1);
const QUIET_WAIT_MAX: Duration = Duration::from_millis(40);
const LEVELS_EVERY: Duration = Duration::from_millis(80);
const FIGURES_EVERY: Duration = Duration::from_millis(500);
const ECHO_EVERY: Duration = Duration::from_millis(250);
/// How long after silencing the speaker the self-interruption verdict is given: longer than
/// the echo paths of rooms and devices, so the echo of the last audio played is in.
const ECHO_VERDICT_AFTER: Duration = Duration::from_millis(300);
/// Stream errors queued for the worker at most. ALSA's PulseAudio plugin fails hundreds of
/// calls while its stream connects, hundreds of thousands on a starved machine, while the
/// worker may still be opening the other device: an unbounded queue held 81 MB of them.
const DEVICE_ERRORS_QUEUED: usize = 64;
/// Seconds of device-rate audio the output ring holds: twice the longest startup buffer. The
/// feeder holds what the model bursts beyond it and tops the ring up on every worker pass; a
/// longer ring only kept more memory resident (a whole reply's worth of pages, written once).
const OUTPUT_RING_SECONDS: usize = 2;

impl Audio {
    /// Starts the audio worker. Files named in the options are opened here, so a bad path is
    /// an error now; missing devices are not errors, they are reported in `Opened`.
    pub fn start(options: AudioOptions) -> anyhow::Result<(Audio, AudioFeeds)> {
        let clip = match &options.input_wav {
            Some(path) => Some(wav::read_mono(path)?),
            None => None,
        };
        let sink = match &options.output_wav {
            Some(path) => Some(
                WavSink::create(path, OUTPUT_RATE)?.with_max_bytes(options.output_wav_max_bytes),
            ),
            None => None,
        };
        let (commands, commands_rx) = std_mpsc::channel();
        let (events_tx, events) = mpsc::unbounded_channel();
        let (frames_tx, frames) = broadcast::channel(FRAME_QUEUE);
        let clock = Clock::new();
        let (done_tx, done) = std_mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("livetalk-audio".into())
            .spawn(move || {
                WorkerThread::new(options, clock, frames_tx, events_tx, clip, sink)
                    .run(commands_rx);
                let _ = done_tx.send(());
            })
            .context("starting the audio thread")?;
        Ok((
            Audio {
                commands: Some(commands),
                clock,
                thread: Some(thread),
                done,
            },
            AudioFeeds { events, frames },
        ))
    }

    pub fn clock(&self) -> Clock {
        self.clock
    }

    fn send(&self, command: Command) {
        if let Some(commands) = &self.commands {
            let _ = commands.send(command);
        }
    }

    /// Plays model audio (24 kHz PCM16 LE) received at `received_at`.
    pub fn play(&self, pcm: Vec<u8>, received_at: Instant) {
        self.send(Command::Play {
            pcm,
            received_at: self.clock.at(received_at),
        });
    }

    /// The model's turn ended: play out the tail.
    pub fn end_turn(&self) {
        self.send(Command::EndTurn);
    }

    /// Barge-in: silence the output now.
    pub fn flush(&self, requested_at: Instant) {
        self.send(Command::Flush {
            requested_at: self.clock.at(requested_at),
        });
    }

    /// Lets mic frames through (or not: muted, or not talking in push-to-talk).
    pub fn set_mic_open(&self, open: bool) {
        self.send(Command::MicOpen(open));
    }

    /// Switches how the model's voice is kept out of the mic, now.
    pub fn set_echo(&self, mode: EchoMode) {
        self.send(Command::SetEcho(mode));
    }

    /// Closes and re-opens the devices (after a failure, or to pick up a new default).
    pub fn reopen(&self) {
        self.send(Command::Reopen);
    }

    /// Asks for an `AudioEvent::Figures` now (for an end-of-session summary).
    pub fn request_figures(&self) {
        self.send(Command::ReportFigures);
    }
}

impl Drop for Audio {
    fn drop(&mut self) {
        // Dropping the sender ends the worker's loop; it finishes the WAV, then closes the
        // streams. A device that hangs while closing (ALSA's PulseAudio plugin has, after its
        // speaker failed) must not hang livetalk: past the deadline the worker is left behind.
        self.commands = None;
        if let Some(thread) = self.thread.take() {
            match self.done.recv_timeout(CLOSE_DEADLINE) {
                Err(std_mpsc::RecvTimeoutError::Timeout) => tracing::warn!(
                    "the audio devices did not close within {} s: left behind",
                    CLOSE_DEADLINE.as_secs()
                ),
                _ => {
                    let _ = thread.join();
                }
            }
        }
    }
}

struct WorkerThread {
    options: AudioOptions,
    clock: Clock,
    frames: broadcast::Sender<MicFrame>,
    events: mpsc::UnboundedSender<AudioEvent>,
    /// The input clip, kept for re-opening (it plays once).
    clip: Option<MonoClip>,
    capture: Option<Capture>,
    playback: Playback,
    capture_shared: Arc<CaptureShared>,
    playback_shared: Arc<PlaybackShared>,
    device_errors: std_mpsc::Receiver<(Direction, StreamFault)>,
    device_errors_tx: std_mpsc::SyncSender<(Direction, StreamFault)>,
    /// Doubtful errors each open stream (input, output) has reported and not yet outlived.
    doubts: [Option<Doubt>; 2],
    /// Scratch for the speaker reference on its way to the echo canceller.
    played: Vec<f32>,
    reported_echo: Option<EchoFigures>,
    /// When the self-interruption verdict on the last flush is due.
    verdict_due: Option<Instant>,
    mic_open: bool,
    figures: AudioFigures,
    reported_figures: AudioFigures,
    levels: (u8, u8),
    /// The mic callback last seen (on the audio clock) and the time between its callbacks,
    /// as short as they come (followed down at once, up slowly): when the next is due.
    mic_seen: u64,
    mic_every: Option<u64>,
}

/// How long a stream that reported a doubtful error has to run again before its device is
/// taken for failed. ALSA's PulseAudio plugin can take two seconds after its start-up errors.
const DOUBT_GRACE: Duration = Duration::from_secs(3);

/// Doubtful errors from one stream since it last ran.
struct Doubt {
    /// The first and the latest (on the audio clock).
    since: u64,
    last: u64,
    errors: u64,
    message: String,
}

/// A level as one of a meter's steps (−60 dBFS to 0 in 6 dB steps), to report only changes.
fn meter_step(level: f32) -> u8 {
    ((pcm::dbfs(level) + 60.0) / 6.0).clamp(0.0, 10.0) as u8
}

impl WorkerThread {
    fn new(
        options: AudioOptions,
        clock: Clock,
        frames: broadcast::Sender<MicFrame>,
        events: mpsc::UnboundedSender<AudioEvent>,
        clip: Option<MonoClip>,
        sink: Option<WavSink>,
    ) -> WorkerThread {
        let (device_errors_tx, device_errors) = std_mpsc::sync_channel(DEVICE_ERRORS_QUEUED);
        let (playback, _) = Playback::new(None, sink);
        WorkerThread {
            mic_open: !options.push_to_talk,
            options,
            clock,
            frames,
            events,
            clip,
            capture: None,
            playback,
            capture_shared: Arc::new(CaptureShared::default()),
            playback_shared: Arc::new(PlaybackShared::default()),
            device_errors,
            device_errors_tx,
            doubts: [None, None],
            played: Vec::new(),
            reported_echo: None,
            verdict_due: None,
            figures: AudioFigures::default(),
            reported_figures: AudioFigures::default(),
            levels: (0, 0),
            mic_seen: 0,
            mic_every: None,
        }
    }

    fn run(mut self, commands: std_mpsc::Receiver<Command>) {
        // alsa-lib prints its complaints (no card, unknown PCM) straight to stderr, which
        // would garble the TUI and clutter headless output: route them to the log instead.
        let alsa_errors = (self.options.devices && self.options.host == AudioHost::Alsa)
            .then(|| alsa::Output::local_error_handler().ok())
            .flatten();
        self.open();
        self.log_alsa(alsa_errors.as_ref());
        let mut next_levels = Instant::now();
        let mut next_figures = Instant::now();
        let mut next_echo = Instant::now();
        loop {
            let active = self.capture.is_some() || self.playback.output.is_some();
            let first = if active {
                match commands.recv_timeout(self.pump_wait()) {
                    Ok(command) => Some(command),
                    Err(std_mpsc::RecvTimeoutError::Timeout) => None,
                    Err(std_mpsc::RecvTimeoutError::Disconnected) => break,
                }
            } else {
                match commands.recv() {
                    Ok(command) => Some(command),
                    Err(_) => break,
                }
            };
            if let Some(command) = first {
                self.handle(command);
                while let Ok(command) = commands.try_recv() {
                    self.handle(command);
                }
                self.log_alsa(alsa_errors.as_ref());
            }
            self.pump();
            let now = Instant::now();
            if now >= next_levels && active {
                next_levels = now + LEVELS_EVERY;
                self.report_levels();
            }
            if now >= next_figures {
                next_figures = now + FIGURES_EVERY;
                self.report_figures();
            }
            if now >= next_echo {
                next_echo = now + ECHO_EVERY;
                self.report_echo();
            }
            if self.verdict_due.is_some_and(|due| now >= due) {
                self.verdict_due = None;
                let echo_heard = self
                    .capture
                    .as_mut()
                    .and_then(|c| c.echo.as_mut())
                    .is_some_and(|e| e.echo_heard_now());
                self.emit(AudioEvent::Silenced { echo_heard });
            }
        }
        // The recording first: closing a device can hang.
        if let Some(wav) = &mut self.playback.wav
            && let Err(e) = wav.finish()
        {
            tracing::warn!("{e:#}");
        }
        self.capture = None;
        self.playback.output = None;
    }

    /// How long to wait for a command before moving samples again. While the speaker plays,
    /// [`PUMP_EVERY`]: it takes the ring. With nothing to play (new audio comes as a command,
    /// which ends the wait), only the mic's callbacks bring work, every 20–40 ms, and the
    /// speaker's far end is handed over before each mic frame all the same: waking every 5 ms
    /// regardless was four to eight wake-ups for one callback's samples. The wait ends [`QUIET_MARGIN`] after the
    /// next is due: a frame goes to the socket as soon as before, or sooner. Never shorter
    /// than `PUMP_EVERY` (a late callback is looked for as often as before), never longer
    /// than [`QUIET_WAIT_MAX`].
    fn pump_wait(&mut self) -> Duration {
        let quiet = self.playback.idle();
        let last = self.capture_shared.last_callback_at.load(Ordering::Acquire);
        if last > self.mic_seen {
            if self.mic_seen != 0 {
                let every = last - self.mic_seen;
                self.mic_every = Some(match self.mic_every {
                    Some(old) if every > old => old + (every - old) / 8,
                    _ => every,
                });
            }
            self.mic_seen = last;
        }
        let Some(every) = self
            .mic_every
            .filter(|_| quiet && self.verdict_due.is_none() && self.capture.is_some())
        else {
            return PUMP_EVERY;
        };
        let due = last + every + QUIET_MARGIN.as_nanos() as u64;
        Duration::from_nanos(due.saturating_sub(self.clock.now())).clamp(PUMP_EVERY, QUIET_WAIT_MAX)
    }

    fn log_alsa(&self, errors: Option<&std::rc::Rc<std::cell::RefCell<alsa::Output>>>) {
        if let Some(errors) = errors {
            let text = errors.borrow().to_string();
            if !text.trim().is_empty() {
                tracing::debug!(target: "alsa", "{}", text.trim());
                // Empty the buffer for the next time.
                let _ = alsa::Output::local_error_handler();
            }
        }
    }

    fn emit(&self, event: AudioEvent) {
        let _ = self.events.send(event);
    }

    fn handle(&mut self, command: Command) {
        match command {
            Command::Play { pcm, received_at } => {
                if let Some(full) = self.playback.play(&pcm, received_at) {
                    self.emit(AudioEvent::OutputWavFull {
                        path: full.path.display().to_string(),
                        max_bytes: full.max_bytes,
                    });
                }
            }
            Command::EndTurn => self.playback.end_turn(),
            Command::Flush { requested_at } => {
                self.playback.flush(requested_at);
                // The verdict waits for the echo of what was played up to now to reach the
                // mic: the service can cut in within a quarter second of the echo starting,
                // on less of it than tells echo from speech.
                // Only a device mic has an echo path to judge; without one no verdict comes.
                if self.capture.as_ref().is_some_and(|c| c.echo.is_some()) {
                    self.verdict_due
                        .get_or_insert(Instant::now() + ECHO_VERDICT_AFTER);
                }
            }
            Command::MicOpen(open) => {
                self.mic_open = open;
                if let Some(capture) = &mut self.capture {
                    capture.open = open;
                }
            }
            Command::SetEcho(mode) => {
                self.options.echo = mode;
                if let Some(capture) = &mut self.capture
                    && capture.echo.is_some()
                {
                    self.arm_echo(mode);
                }
                self.report_echo();
            }
            Command::Reopen => {
                self.capture = None;
                self.playback.output = None;
                self.open();
            }
            Command::ReportFigures => {
                // A barge-in just asked for is measured when the callback acts on it, within
                // a device period: wait that long so the report includes it.
                let deadline = Instant::now() + Duration::from_millis(200);
                while self.playback.flush_pending() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(1));
                }
                self.pump();
                self.reported_figures = self.figures;
                self.emit(AudioEvent::Figures(self.figures));
            }
        }
    }

    fn error_sink(&self, direction: Direction) -> ErrorSink {
        let tx = self.device_errors_tx.clone();
        Arc::new(move |fault| {
            // Full: the worker has yet to read the first ones, which say what went wrong.
            let _ = tx.try_send((direction, fault));
        })
    }

    /// Opens the devices and files asked for; reports what opened and what did not.
    fn open(&mut self) {
        // Errors of the streams this replaces are no longer anyone's.
        while self.device_errors.try_recv().is_ok() {}
        self.doubts = [None, None];
        let mut setup = AudioSetup::default();
        let host = if self.options.devices {
            match self.options.host.open() {
                Ok(host) => Some(host),
                Err(e) => {
                    setup.problems.push(e.to_string());
                    None
                }
            }
        } else {
            None
        };
        // Fresh shared state: a new stream must not inherit the old one's epoch or flags.
        self.capture_shared = Arc::new(CaptureShared::default());
        self.playback_shared = Arc::new(PlaybackShared::default());

        let output = host.as_ref().and_then(|host| match self.open_output(host) {
            Ok(output) => Some(output),
            Err(e) => {
                setup.problems.push(format!("speaker: {e}"));
                None
            }
        });
        let output_name = output.as_ref().map(|(_, name)| name.clone());
        let wav = self.playback.wav.take();
        let (playback, problem) = Playback::new(output.map(|(o, _)| o), wav);
        self.playback = playback;
        if let Some(problem) = problem {
            setup.problems.push(format!("speaker: {problem}"));
        }
        setup.output = output_name.map(|name| StreamInfo {
            name,
            path: self.playback.path().unwrap_or_default(),
        });

        let frame_samples = (INPUT_RATE as f64 * self.options.frame.as_secs_f64()).round() as usize;
        let source = if let Some(clip) = self.clip.take() {
            let name = self
                .options
                .input_wav
                .as_ref()
                .and_then(|p| p.file_name())
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "input WAV".to_owned());
            Some((
                MicInput::Wav {
                    started: Instant::now(),
                    taken: 0,
                    clip: clip.clone(),
                },
                clip.rate,
                name,
            ))
        } else if let Some(host) = host.as_ref().filter(|_| self.options.microphone) {
            match self.open_input(host) {
                Ok(source) => Some(source),
                Err(e) => {
                    setup.problems.push(format!("microphone: {e}"));
                    None
                }
            }
        } else {
            None
        };
        let opened = source.and_then(|(source, rate, name)| {
            let is_device = matches!(source, MicInput::Device { .. });
            match Capture::new(source, rate, frame_samples, self.frames.clone(), self.clock) {
                Ok(mut capture) => {
                    capture.open = self.mic_open;
                    setup.input = Some(StreamInfo {
                        name,
                        path: capture.path(),
                    });
                    Some((capture, is_device))
                }
                Err(e) => {
                    setup.problems.push(format!("microphone: {e:#}"));
                    None
                }
            }
        });
        if let Some((capture, is_device)) = opened {
            self.capture = Some(capture);
            if is_device {
                self.arm_echo(self.options.echo);
            }
        }
        self.emit(AudioEvent::Opened(setup));
        self.reported_echo = None;
        self.report_echo();
    }

    /// Sets up the device mic's voice processing for `mode`: the canceller (with a speaker
    /// open) or the gate, and noise suppression. A canceller that cannot start leaves the gate
    /// in its place, with a warning: the model must not hear itself.
    fn arm_echo(&mut self, mode: EchoMode) {
        let Some(capture) = &mut self.capture else {
            return;
        };
        let speaker_rate = self.playback.output.as_ref().map(|o| o.rate);
        let ns = self.options.noise_suppression;
        let mut mode = mode;
        let path = aec::EchoPath::new(mode, ns, speaker_rate).or_else(|e| {
            tracing::warn!("{e:#}; the echo gate stands in");
            mode = EchoMode::Gate;
            aec::EchoPath::new(mode, ns, speaker_rate)
        });
        let path = match path {
            Ok(path) => Some(path),
            Err(e) => {
                tracing::warn!("{e:#}; the mic goes unprocessed");
                None
            }
        };
        capture.echo = path;
        capture.gate = (mode == EchoMode::Gate && speaker_rate.is_some())
            .then(|| self.playback_shared.clone());
        // Only what is played from now on is the canceller's far end.
        if let Some(output) = &mut self.playback.output {
            let queued = output.reference.slots();
            if let Ok(chunk) = output.reference.read_chunk(queued) {
                chunk.commit_all();
                output.reference_read += queued as u64;
            }
        }
    }

    fn open_input(&self, host: &cpal::Host) -> Result<(MicInput, u32, String), DeviceError> {
        let device = device::find(
            host,
            self.options.host,
            Direction::Input,
            self.options.input_device.as_deref(),
        )?;
        let (stream, consumer) = device::open_input(
            &device,
            self.options.host,
            self.capture_shared.clone(),
            self.clock,
            self.error_sink(Direction::Input),
        )?;
        let (rate, name) = (stream.rate, stream.name.clone());
        Ok((
            MicInput::Device {
                consumer,
                shared: self.capture_shared.clone(),
                _stream: stream.stream,
            },
            rate,
            name,
        ))
    }

    fn open_output(&self, host: &cpal::Host) -> Result<(OutputDevice, String), DeviceError> {
        let device = device::find(
            host,
            self.options.host,
            Direction::Output,
            self.options.output_device.as_deref(),
        )?;
        let (rate, _) = device::output_format(&device)?;
        let (producer, consumer) = rtrb::RingBuffer::new(rate as usize * OUTPUT_RING_SECONDS);
        // The worker drains the reference every few milliseconds; a second is plenty.
        let (reference, reference_out) = rtrb::RingBuffer::new(rate as usize);
        let startup_frames =
            (f64::from(rate) * self.options.startup_buffer.as_secs_f64()).round() as usize;
        let stream = device::open_output(
            &device,
            OutputParts {
                consumer,
                reference,
                startup_frames,
                shared: self.playback_shared.clone(),
                clock: self.clock,
            },
            self.error_sink(Direction::Output),
        )?;
        Ok((
            OutputDevice::new(
                producer,
                reference_out,
                self.playback_shared.clone(),
                stream.rate,
                stream.stream,
            ),
            stream.name,
        ))
    }

    fn pump(&mut self) {
        self.watch_devices();
        self.feed_reference();
        if let Some(capture) = &mut self.capture {
            if capture.pump() {
                let _ = self.events.send(AudioEvent::InputClipEnded);
            }
            self.figures.frames_gated = capture.frames_gated;
        }
        // A stream whose errors are in doubt must run to show it lives.
        let change = self
            .playback
            .pump(self.doubts[Direction::Output as usize].is_none());
        if let Some(audible) = change.audible {
            self.emit(AudioEvent::Audible(audible));
        }
        if let Some(latency) = change.socket_to_speaker {
            self.figures.socket_to_speaker.record(latency);
        }
        if let Some(latency) = change.interrupt_to_silence {
            self.figures.interrupt_to_silence.record(latency);
        }
        if let Some(output) = &self.playback.output {
            self.figures.underruns = output.shared.underruns.load(Ordering::Relaxed);
            self.figures.played = Duration::from_secs_f64(
                output.shared.frames_played.load(Ordering::Relaxed) as f64
                    / f64::from(output.rate.max(1)),
            );
        }
        self.figures.mic_overflow = self.capture_shared.overflow_samples.load(Ordering::Relaxed);
        self.figures.mic_gaps = Duration::from_secs_f64(
            self.capture_shared.gap_samples.load(Ordering::Relaxed) as f64 / f64::from(INPUT_RATE),
        );
    }

    /// Takes the streams' errors: a passing one is logged, a fatal one closes its device, and
    /// a doubtful one does if its stream has not run again within [`DOUBT_GRACE`].
    fn watch_devices(&mut self) {
        let now = self.clock.now();
        while let Ok((direction, fault)) = self.device_errors.try_recv() {
            if !self.is_open(direction) {
                // Already closed: one report is enough.
                continue;
            }
            match fault.severity {
                Severity::Passing => {
                    tracing::debug!(?direction, "{}", fault.message);
                }
                Severity::Fatal => self.device_failed(direction, fault.message),
                Severity::Doubtful => {
                    if direction == Direction::Output
                        && let Some(output) = &mut self.playback.output
                    {
                        output.wake();
                    }
                    let doubt = self.doubts[direction as usize].get_or_insert(Doubt {
                        since: now,
                        last: now,
                        errors: 0,
                        message: fault.message,
                    });
                    doubt.last = now;
                    doubt.errors += 1;
                }
            }
        }
        for direction in [Direction::Input, Direction::Output] {
            if !self.is_open(direction) {
                self.doubts[direction as usize] = None;
            }
            let Some(doubt) = &self.doubts[direction as usize] else {
                continue;
            };
            let ran_at = match direction {
                Direction::Input => &self.capture_shared.last_callback_at,
                Direction::Output => &self.playback_shared.last_callback_at,
            }
            .load(Ordering::Acquire);
            if ran_at > doubt.last {
                tracing::warn!(
                    ?direction,
                    errors = doubt.errors,
                    "the device reported errors and plays on: {}",
                    doubt.message
                );
                self.doubts[direction as usize] = None;
            } else if now.saturating_sub(doubt.since) > DOUBT_GRACE.as_nanos() as u64 {
                let message = doubt.message.clone();
                self.device_failed(direction, message);
            }
        }
    }

    fn is_open(&self, direction: Direction) -> bool {
        match direction {
            Direction::Input => self.capture.is_some(),
            Direction::Output => self.playback.output.is_some(),
        }
    }

    /// Closes a device whose stream is gone, and says so.
    fn device_failed(&mut self, direction: Direction, message: String) {
        match direction {
            Direction::Input => self.capture = None,
            Direction::Output => self.playback.output = None,
        }
        self.doubts[direction as usize] = None;
        self.emit(AudioEvent::DeviceFailed { direction, message });
    }

    /// Hands what the speaker played since the last pump to the mic's echo path (before the
    /// mic's own samples, so the canceller always has the far end first), with the delay the
    /// device clocks report. Without an echo path it is dropped.
    fn feed_reference(&mut self) {
        let Some(output) = &mut self.playback.output else {
            return;
        };
        self.played.clear();
        let first = output.reference_read;
        let queued = output.reference.slots();
        if let Ok(chunk) = output.reference.read_chunk(queued) {
            let (a, b) = chunk.as_slices();
            self.played.extend_from_slice(a);
            self.played.extend_from_slice(b);
            chunk.commit_all();
        }
        output.reference_read += self.played.len() as u64;
        if let Some(echo) = self.capture.as_mut().and_then(|c| c.echo.as_mut()) {
            echo.played(&self.played, first, output.shared.stamp.load());
            let output_latency = output.shared.latency_ns.load(Ordering::Relaxed);
            if output.stopped() {
                // A paused speaker plays nothing: the far end goes on as silence, heard as
                // soon as a running stream's would be.
                echo.far_end_silent(self.clock.now() + output_latency);
            }
            let latency = self.capture_shared.latency_ns.load(Ordering::Relaxed) + output_latency;
            if latency > 0 {
                echo.set_device_delay((latency / 1_000_000) as u32);
            }
        }
    }

    /// Sends the echo canceller's figures when they changed enough to show.
    fn report_echo(&mut self) {
        let Some(figures) = self
            .capture
            .as_ref()
            .and_then(|c| c.echo.as_ref())
            .map(|e| e.figures())
        else {
            return;
        };
        let shown = |f: &EchoFigures| {
            (
                f.mode,
                f.cancelling,
                f.noise_suppression,
                f.delay_ms,
                f.device_delay_ms,
                f.erle_db.map(|v| v.round() as i32),
                f.erl_db.map(|v| v.round() as i32),
                f.converged,
                f.echo_heard,
            )
        };
        if self.reported_echo.as_ref().map(shown) != Some(shown(&figures)) {
            self.reported_echo = Some(figures);
            self.emit(AudioEvent::Echo(figures));
        }
    }

    fn report_levels(&mut self) {
        let mic = self.capture_shared.level.take();
        let output = self.playback_shared.level.take();
        let steps = (meter_step(mic), meter_step(output));
        if steps != self.levels {
            self.levels = steps;
            self.emit(AudioEvent::Levels { mic, output });
        }
    }

    fn report_figures(&mut self) {
        if self.figures != self.reported_figures {
            self.reported_figures = self.figures;
            self.emit(AudioEvent::Figures(self.figures));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_storm_of_stream_errors_queues_a_bounded_few_for_the_worker() {
        let (frames, _) = broadcast::channel(FRAME_QUEUE);
        let (events, _events) = mpsc::unbounded_channel();
        let worker = WorkerThread::new(
            AudioOptions::default(),
            Clock::new(),
            frames,
            events,
            None,
            None,
        );
        let sink = worker.error_sink(Direction::Output);
        for _ in 0..100_000 {
            sink(StreamFault {
                message: "ALSA function 'snd_pcm_poll_descriptors_revents' failed".into(),
                severity: Severity::Doubtful,
            });
        }
        let queued: Vec<_> = worker.device_errors.try_iter().collect();
        assert_eq!(queued.len(), DEVICE_ERRORS_QUEUED);
        assert!(
            queued
                .iter()
                .all(|(direction, fault)| *direction == Direction::Output
                    && fault.severity == Severity::Doubtful)
        );
    }
}
