//! Headless presenter: user turns from stdin (one per line), the conversation on stdout as
//! text lines or JSON events. It drives the same `App` through the same loop as the TUI and
//! prints what it would show; a recording replays through it too (`replay --headless`), and
//! `replay --against` re-sends a recording's turns to an endpoint as a new live session.

use std::collections::VecDeque;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

use serde_json::json;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::app::{
    App, ECHO_INTERRUPTION, Entry, ModelTurnStatus, Msg, NoticeLevel, UserInput, image_label,
};
use crate::config::FlagOverrides;
use crate::config::Settings;
use crate::driver::{Presenter, Source, drive};
use crate::engine::launch;
use crate::record::inspect::grounding_json;
use crate::record::replay::{Pacing, Replay, initial_app};
use crate::record::{MIC_WAV, Meta, Recording};
use livetalk_live::excerpt::{SUMMARY, bounded, bounded_json};

/// How the conversation is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    Text,
    Json,
}

const OFFLINE_NOTICE: &str = "No API key is set: talking to the embedded offline demo model (set GEMINI_API_KEY to talk to Gemini).";

/// Runs one conversation from stdin to stdout. Returns the process exit code: 0 when the
/// session ended cleanly (end of input, `end_session`, or Ctrl-C), 1 otherwise.
pub async fn run(
    settings: Settings,
    format: OutputFormat,
    banner: Option<&str>,
) -> anyhow::Result<u8> {
    let (lines_tx, lines_rx) = mpsc::channel::<String>(64);
    // A thread of its own reads stdin (as tokio's stdin would): each line at most as long as
    // the input line holds, a longer one read past without being held and skipped, saying so.
    std::thread::Builder::new()
        .name("livetalk-stdin".into())
        .spawn(move || {
            use livetalk_live::file::{LineRead, read_line_bounded};
            let max = crate::app::INPUT_MAX_BYTES;
            let mut stdin = std::io::stdin().lock();
            let mut line = Vec::new();
            loop {
                match read_line_bounded(&mut stdin, &mut line, max) {
                    Ok(LineRead::End) | Err(_) => break,
                    Ok(LineRead::TooLong(length)) => crate::output::err(&format!(
                        "livetalk: warning: a line of {} on stdin was skipped: a turn holds at most {}",
                        livetalk_live::excerpt::human_size(length),
                        livetalk_live::excerpt::human_size(max as u64)
                    )),
                    Ok(LineRead::Line) => {
                        if line.last() == Some(&b'\r') {
                            line.pop();
                        }
                        let turn = String::from_utf8_lossy(&line).into_owned();
                        if lines_tx.blocking_send(turn).is_err() {
                            break;
                        }
                    }
                }
            }
        })?;
    run_with_input(settings, format, banner, lines_rx).await
}

/// [`run`] with the user turns coming from `lines` (stdin, or a recording for `replay
/// --against`); the input ends when the channel closes.
pub async fn run_with_input(
    settings: Settings,
    format: OutputFormat,
    banner: Option<&str>,
    lines: mpsc::Receiver<String>,
) -> anyhow::Result<u8> {
    let printer = Printer::new(format);
    let decider = crate::tools::Decider::headless(settings.approve);
    let (mut app, mut engine) = launch(&settings, None, decider).await?;
    if settings.is_offline() {
        printer.info(OFFLINE_NOTICE);
    }
    if let Some(banner) = banner {
        printer.info(banner);
    }
    if let Some(dir) = engine.recording_dir() {
        printer.info(&format!("Recording to {}", dir.display()));
    }
    printer.session_start(
        &settings.model,
        &settings.endpoint_label(),
        settings.is_offline(),
    );
    let mut presenter = LinePresenter {
        printer,
        input: Some(LineInput::new(lines, settings.turn_timeout)?),
    };
    drive(&mut app, &mut engine, &mut presenter).await?;
    Ok(presenter.finish(&app))
}

/// Replays a recording the way headless mode printed it.
async fn print_replay<S: Source>(
    app: &mut App,
    source: &mut S,
    format: OutputFormat,
    meta: &Meta,
) -> anyhow::Result<u8> {
    let printer = Printer::new(format);
    if meta.offline {
        printer.info("Replaying a session with the embedded offline demo model.");
    }
    printer.session_start(&meta.model, &meta.endpoint_host, meta.offline);
    let mut presenter = LinePresenter {
        printer,
        input: None,
    };
    drive(app, source, &mut presenter).await?;
    if presenter.printer.stdout_closed() {
        return Ok(0);
    }
    if !app.is_finished() {
        crate::output::err(
            "livetalk: warning: the recording ends before the session did (was livetalk killed?)",
        );
        return Ok(1);
    }
    Ok(presenter.finish(app))
}

/// Prints the app as lines; offers stdin's lines as user turns, one whenever the model is
/// ready for the next.
struct LinePresenter {
    printer: Printer,
    /// `None` in a replay: nothing is typed there.
    input: Option<LineInput>,
}

/// The user's side of a headless session: lines waiting to be sent, the end of input, the
/// turn timeout and Ctrl-C.
struct LineInput {
    lines: mpsc::Receiver<String>,
    queued: VecDeque<String>,
    closed: bool,
    /// The end of input was said: once, however often the app is ready again while it closes.
    ended: bool,
    turn_timeout: Duration,
    last_activity: Instant,
    /// Copied from the app before each wait.
    ready: bool,
    waiting_for_model: bool,
    clip_streaming: bool,
    interrupt: Signal,
    terminate: Signal,
}

impl LineInput {
    fn new(lines: mpsc::Receiver<String>, turn_timeout: Duration) -> anyhow::Result<Self> {
        use anyhow::Context as _;
        Ok(LineInput {
            lines,
            queued: VecDeque::new(),
            closed: false,
            ended: false,
            turn_timeout,
            last_activity: Instant::now(),
            ready: false,
            waiting_for_model: false,
            clip_streaming: false,
            interrupt: signal(SignalKind::interrupt()).context("watching SIGINT")?,
            terminate: signal(SignalKind::terminate()).context("watching SIGTERM")?,
        })
    }

    async fn next(&mut self) -> Option<Msg> {
        if self.ready {
            if let Some(line) = self.queued.pop_front() {
                self.last_activity = Instant::now();
                self.ready = false;
                return Some(Msg::UserText(line));
            }
            // The input ends with stdin and, with --input-wav, the clip.
            if self.closed && !self.clip_streaming && !self.ended {
                self.ready = false;
                self.ended = true;
                return Some(Msg::EndSession);
            }
        }
        let deadline = self.last_activity + self.turn_timeout;
        tokio::select! {
            line = self.lines.recv(), if !self.closed => match line {
                Some(line) if !line.trim().is_empty() => self.queued.push_back(line),
                Some(_) => {}
                None => self.closed = true,
            },
            // A turn timeout of zero means no limit.
            () = tokio::time::sleep_until(deadline), if self.waiting_for_model && !self.turn_timeout.is_zero() => {
                self.waiting_for_model = false;
                return Some(Msg::GaveUp(format!(
                    "No reply from the model for {:.0} s; giving up on this turn.",
                    self.turn_timeout.as_secs_f64()
                )));
            }
            // Ctrl-C (or a kill) ends the session as the user asked: closed cleanly.
            _ = self.interrupt.recv() => return Some(Msg::Quit),
            _ = self.terminate.recv() => return Some(Msg::Quit),
        }
        None
    }
}

impl Presenter for LinePresenter {
    fn show(&mut self, app: &App) -> anyhow::Result<Option<Msg>> {
        self.printer.render(app);
        // Nobody reads any more (`| head`): end the session quietly, as the user would.
        if self.printer.stdout_closed() && !app.wants_to_quit() {
            return Ok(Some(Msg::Quit));
        }
        Ok(None)
    }

    fn observe(&mut self, app: &App) {
        if let Some(input) = &mut self.input {
            input.ready = app.ready_for_user();
            input.waiting_for_model = !app.ready_for_user() && !app.is_finished();
            input.clip_streaming = app.audio().clip_streaming;
        }
    }

    fn heard_from_source(&mut self) {
        if let Some(input) = &mut self.input {
            input.last_activity = Instant::now();
        }
    }

    async fn next_input(&mut self) -> Option<Msg> {
        match &mut self.input {
            Some(input) => input.next().await,
            None => std::future::pending().await,
        }
    }

    fn finished(&self, app: &App, source_open: bool) -> bool {
        // A live session is over when its connection is. A replay follows the recording to
        // its end: a session it shows failing to connect may be retried further on (Ctrl-R),
        // as the user did; only one the user ended is over for good.
        let over = match self.input {
            Some(_) => app.is_finished(),
            None => app.ended_cleanly(),
        };
        over || !source_open
    }
}

impl LinePresenter {
    /// The end of the run: the audio summary, the closing event, and the exit code.
    fn finish(&mut self, app: &App) -> u8 {
        self.printer.render(app);
        self.printer.audio_summary(app);
        self.printer.cost_summary(app);
        self.printer.session_end(app);
        // A turn lost with a connection was never answered: the run did not do its job.
        if app.ended_cleanly() && app.turns_lost() == 0 {
            0
        } else {
            1
        }
    }
}

/// Prints finished history entries in order, and notices as they appear.
pub struct Printer {
    format: OutputFormat,
    printed_entries: usize,
    printed_notices: usize,
    /// Frames of a shared screen or video already said.
    printed_frames: u64,
    /// Stdout's reader went away (`| head`).
    stdout_closed: std::cell::Cell<bool>,
}

impl Printer {
    pub fn new(format: OutputFormat) -> Self {
        Printer {
            format,
            printed_entries: 0,
            printed_notices: 0,
            printed_frames: 0,
            stdout_closed: std::cell::Cell::new(false),
        }
    }

    /// Prints what became final since the last call. An entry still streaming (or a tool
    /// call still running) holds back the ones after it, so the order is the history's order.
    pub fn render(&mut self, app: &App) {
        for notice in &app.notices()[self.printed_notices..] {
            let level = match notice.level {
                NoticeLevel::Info => "info",
                NoticeLevel::Warning => "warning",
                NoticeLevel::Error => "error",
            };
            match self.format {
                OutputFormat::Text => {
                    crate::output::err(&format!("livetalk: {level}: {}", notice.text))
                }
                OutputFormat::Json => {
                    self.json(json!({"type": "notice", "level": level, "text": notice.text}));
                    if notice.level == NoticeLevel::Error {
                        crate::output::err(&format!("livetalk: error: {}", notice.text));
                    }
                }
            }
        }
        self.printed_notices = app.notices().len();

        while let Some(entry) = app.transcript().get(self.printed_entries) {
            // An interrupted reply waits for the echo verdict on it (moments, from the audio
            // worker), so the line printed once is the right one.
            if app.echo_check_pending(self.printed_entries) && !app.is_finished() {
                break;
            }
            if !self.print_entry(app, entry) {
                break;
            }
            self.printed_entries += 1;
        }
        self.print_frame(app);
        if let Err(e) = std::io::stdout().flush() {
            self.lost_stdout(&e);
        }
    }

    /// The newest frame of a shared screen or video, once each: what the model was shown.
    fn print_frame(&mut self, app: &App) {
        let sent = app.frames_sent();
        if sent == self.printed_frames {
            return;
        }
        self.printed_frames = sent;
        let Some(frame) = app.sharing().and_then(|s| s.last_frame()) else {
            return;
        };
        match self.format {
            OutputFormat::Text => self.line(&format!(
                "Screen: frame {sent} sent, {}×{} JPEG ({})",
                frame.width,
                frame.height,
                livetalk_live::excerpt::human_size(frame.jpeg.len() as u64)
            )),
            OutputFormat::Json => self.json(json!({
                "type": "frame",
                "number": sent,
                "width": frame.width,
                "height": frame.height,
                "bytes": frame.jpeg.len(),
            })),
        }
    }

    /// A grounded reply's searches and sources, a line each, under the reply.
    fn print_grounding(&self, grounding: &livetalk_live::reading::Grounding) {
        if !grounding.queries.is_empty() {
            self.line(&format!("  Searched: {}", grounding.queries_line()));
        }
        for source in &grounding.sources {
            self.line(&format!("  Source: {}", source.as_line()));
        }
        if let Some(more) = grounding.more_line() {
            self.line(&format!("  {more}"));
        }
    }

    /// Prints one entry if it is final; returns false to wait.
    fn print_entry(&self, app: &App, entry: &Entry) -> bool {
        match entry {
            Entry::User { text, via } => {
                // Speech is transcribed in fragments: it is final once something follows it.
                let streaming = *via == UserInput::Speech
                    && app
                        .transcript()
                        .last()
                        .is_some_and(|l| std::ptr::eq(l, entry));
                if streaming && !app.is_finished() {
                    return false;
                }
                let via_label = match via {
                    UserInput::Typed => "typed",
                    UserInput::Speech => "speech",
                };
                match self.format {
                    OutputFormat::Text if *via == UserInput::Speech => {
                        self.line(&format!("You (spoken): {text}"))
                    }
                    OutputFormat::Text => self.line(&format!("You: {text}")),
                    OutputFormat::Json => {
                        self.json(json!({"type": "user", "via": via_label, "text": text}))
                    }
                }
                true
            }
            Entry::Model {
                text_parts,
                transcript,
                status,
                echo_suspected,
                grounding,
            } => {
                if *status == ModelTurnStatus::Streaming && !app.is_finished() {
                    return false;
                }
                let text = Entry::model_text(text_parts, transcript);
                let interrupted = *status != ModelTurnStatus::Complete;
                match self.format {
                    OutputFormat::Text => {
                        let shown = if text.is_empty() {
                            "(audio without transcription)"
                        } else {
                            &text
                        };
                        let mark = match (interrupted, echo_suspected) {
                            (true, true) => format!(" [interrupted — {ECHO_INTERRUPTION}]"),
                            (true, false) => " [interrupted]".to_owned(),
                            (false, _) => String::new(),
                        };
                        self.line(&format!("Gemini: {shown}{mark}"));
                        self.print_grounding(grounding);
                    }
                    OutputFormat::Json => {
                        let mut event = json!({
                            "type": "model",
                            "text": text,
                            "status": if interrupted { "interrupted" } else { "complete" },
                            "echo_suspected": echo_suspected,
                        });
                        if !grounding.is_empty() {
                            grounding_json(grounding, &mut event);
                        }
                        self.json(event);
                    }
                }
                true
            }
            Entry::Change(text) => {
                match self.format {
                    OutputFormat::Text => self.line(&format!("Changed: {text}")),
                    OutputFormat::Json => self.json(json!({"type": "change", "text": text})),
                }
                true
            }
            Entry::Image {
                name,
                file_bytes,
                width,
                height,
            } => {
                match self.format {
                    OutputFormat::Text => self.line(&format!(
                        "You (image): {}",
                        image_label(name, *file_bytes, *width, *height)
                    )),
                    OutputFormat::Json => self.json(json!({
                        "type": "image",
                        "name": bounded(name, SUMMARY),
                        "file_bytes": file_bytes,
                        "width": width,
                        "height": height,
                    })),
                }
                true
            }
            Entry::Tool(index) => {
                let Some(call) = app.tool_calls().get(*index) else {
                    return true;
                };
                if call.state.is_open() && !app.is_finished() {
                    return false;
                }
                let millis = call.duration.map(millis_for_people);
                // The server chose the name, the id and the arguments, and the response may
                // echo them: each is a bounded summary here (the recording has them whole).
                let name = bounded(&call.name, SUMMARY);
                match self.format {
                    OutputFormat::Text => {
                        let time = millis
                            .map(|ms| format!(" in {ms:.1} ms"))
                            .unwrap_or_default();
                        let result = call
                            .response
                            .as_ref()
                            .map(|r| format!(": {}", bounded(&r.response.to_string(), SUMMARY)))
                            .unwrap_or_default();
                        let unasked = call
                            .unasked
                            .map(|why| format!(" (ran without asking: {})", why.reason()))
                            .unwrap_or_default();
                        self.line(&format!(
                            "Tool: {name} {} -> {}{unasked}{time}{result}",
                            bounded(&call.args.to_string(), SUMMARY),
                            call.state.label()
                        ));
                    }
                    OutputFormat::Json => self.json(json!({
                        "type": "tool_call",
                        "id": call.id.as_deref().map(|id| bounded(id, SUMMARY)),
                        "name": name,
                        "args": bounded_json(&call.args, SUMMARY),
                        "state": call.state.label(),
                        "duration_ms": millis,
                        "response": call.response.as_ref().map(|r| bounded_json(&json!(r), SUMMARY)),
                        "truncated": call.truncated,
                        "unasked": call.unasked.map(|why| why.reason()),
                    })),
                }
                true
            }
        }
    }

    pub(crate) fn session_start(&self, model: &str, host: &str, offline: bool) {
        if self.format == OutputFormat::Json {
            self.json(json!({"type": "session", "model": model, "endpoint_host": host, "offline": offline}));
        }
    }

    pub(crate) fn session_end(&self, app: &App) {
        if self.format == OutputFormat::Json {
            let reason = match &app.connection() {
                crate::app::ConnectionState::Disconnected { reason } => reason.clone(),
                _ => String::new(),
            };
            self.json(json!({"type": "closed", "clean": app.ended_cleanly(), "reason": reason, "total_tokens": app.tokens().total()}));
        }
    }

    /// What the session's tokens came to, by modality, and what they cost: the figures the
    /// terminal UI and `inspect` show (the JSON lines have a `cost` event).
    pub(crate) fn cost_summary(&self, app: &App) {
        let tokens = app.tokens();
        if tokens.total() == 0 {
            return;
        }
        let cost = app.cost();
        match self.format {
            OutputFormat::Text => self.info(&format!(
                "tokens: {} ({}), {}",
                crate::pricing::tokens_words(tokens.total()),
                tokens.parts_words(),
                crate::pricing::cost_words(cost),
            )),
            OutputFormat::Json => self.json(json!({
                "type": "cost",
                "tokens": crate::record::inspect::tally_json(tokens),
                "cost_usd": cost,
                "priced": cost.is_some(),
                "offline": app.offline(),
            })),
        }
    }

    /// What audio did, for people debugging a voice session: counters, latencies and the
    /// mic's voice processing as it last stood.
    pub(crate) fn audio_summary(&self, app: &App) {
        let f = &app.audio().figures;
        // Figures of the mode before a live switch say nothing about this one.
        let echo = app
            .audio()
            .echo_figures
            .filter(|e| e.mode == app.audio().echo);
        let used = app.audio().input.is_some()
            || app.audio().output.is_some()
            || f.frames_sent > 0
            || !f.played.is_zero();
        if !app.audio().enabled || !used {
            return;
        }
        let ms = |l: &crate::audio::Latency| {
            l.measured().then_some((
                l.last.as_secs_f64() * 1000.0,
                l.worst.as_secs_f64() * 1000.0,
            ))
        };
        match self.format {
            OutputFormat::Text => {
                let latency = |name: &str, l: &crate::audio::Latency| {
                    ms(l)
                        .map(|(last, worst)| format!(", {name} {last:.1} ms (worst {worst:.1})"))
                        .unwrap_or_default()
                };
                self.info(&format!(
                    "audio: {} mic frames sent, {} dropped; {:.1} s of model audio heard, {} underruns{}{}{}{}",
                    f.frames_sent,
                    f.frames_dropped,
                    f.played.as_secs_f64(),
                    f.underruns,
                    latency("mic → socket", &f.mic_to_socket),
                    latency("socket → speaker", &f.socket_to_speaker),
                    latency("interrupt → silence", &f.interrupt_to_silence),
                    echo.map(echo_text).unwrap_or_default(),
                ));
            }
            OutputFormat::Json => {
                let latency = |l: &crate::audio::Latency| {
                    ms(l).map(|(last, worst)| json!({"last_ms": last, "worst_ms": worst, "count": l.count}))
                };
                self.json(json!({
                    "type": "audio",
                    "input": app.audio().input.as_ref().map(|i| json!({"name": i.name, "path": i.path})),
                    "output": app.audio().output.as_ref().map(|o| json!({"name": o.name, "path": o.path})),
                    "frames_sent": f.frames_sent,
                    "frames_dropped": f.frames_dropped,
                    "frames_gated": f.frames_gated,
                    "mic_overflow_samples": f.mic_overflow,
                    "mic_gaps_ms": f.mic_gaps.as_millis(),
                    "underruns": f.underruns,
                    "played_secs": f.played.as_secs_f64(),
                    "mic_to_socket": latency(&f.mic_to_socket),
                    "socket_to_speaker": latency(&f.socket_to_speaker),
                    "interrupt_to_silence": latency(&f.interrupt_to_silence),
                    "echo": echo.map(|e| json!({
                        "mode": e.mode.name(),
                        "cancelling": e.cancelling,
                        "noise_suppression": e.noise_suppression,
                        "converged": e.converged,
                        "erle_db": e.erle_db.map(tenths),
                        "erl_db": e.erl_db.map(tenths),
                        "delay_ms": e.delay_ms,
                        "device_delay_ms": e.device_delay_ms,
                    })),
                }));
            }
        }
    }

    pub(crate) fn info(&self, text: &str) {
        crate::output::err(&format!("livetalk: {text}"));
    }

    fn json(&self, value: serde_json::Value) {
        if self.stdout_closed.get() {
            return;
        }
        if let Err(e) = crate::output::out_json(&value.to_string()) {
            self.lost_stdout(&e);
        }
    }

    /// Writes one line to stdout. A reader that went away (`| head`) is not an error: the
    /// line is dropped, and [`Printer::stdout_closed`] says so, so the run can end quietly.
    fn line(&self, text: &str) {
        if self.stdout_closed.get() {
            return;
        }
        if let Err(e) = crate::output::out(text) {
            self.lost_stdout(&e);
        }
    }

    fn lost_stdout(&self, error: &std::io::Error) {
        if !self.stdout_closed.replace(true) {
            tracing::info!("stdout closed ({error}); nothing more is printed");
        }
    }

    /// True once stdout's reader has gone away.
    pub fn stdout_closed(&self) -> bool {
        self.stdout_closed.get()
    }
}

/// A figure to a tenth: more digits than that say nothing.
/// A duration in milliseconds to the microsecond: finer is noise (and float noise at that,
/// `0.014681999999999999`).
fn millis_for_people(d: std::time::Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1000.0
}

fn tenths(value: f32) -> f64 {
    (f64::from(value) * 10.0).round() / 10.0
}

/// The mic's voice processing for the text summary: the echo mode and, when the canceller
/// runs, how it stood at the end.
fn echo_text(e: crate::audio::EchoFigures) -> String {
    let mut text = format!("; echo {}", e.mode.name());
    if e.cancelling {
        text += if e.converged {
            ", converged"
        } else {
            ", converging"
        };
        if let Some(erle) = e.erle_db {
            text += &format!(", {erle:.0} dB of echo removed");
        }
        if let Some(delay) = e.delay_ms {
            text += &format!(", echo delay {delay} ms");
        }
    }
    if !e.noise_suppression {
        text += ", no noise suppression";
    }
    text
}

fn warn_all(warnings: &[String]) {
    for warning in warnings {
        crate::output::err(&format!("livetalk: warning: {warning}"));
    }
}

/// Replays a recording headless: prints what headless mode printed in the original run, and
/// exits as it did (0 for a clean end, 1 otherwise; 1 with a warning for a recording cut off
/// before its session ended).
pub async fn replay_recording(
    dir: &Path,
    format: OutputFormat,
    pacing: Pacing,
) -> anyhow::Result<u8> {
    let recording = Recording::load(dir)?;
    let (mut replay, warnings) = Replay::new(&recording, pacing);
    warn_all(&warnings);
    let mut app = initial_app(&recording, None, replay.total());
    let meta = &recording.meta;
    print_replay(&mut app, &mut replay, format, meta).await
}

/// `replay --against`: re-sends the recorded typed turns to `endpoint`, a new live session, with the recorded model and voice, running
/// tools locally, and prints the new conversation headless.
pub async fn replay_against(
    dir: &Path,
    endpoint: &str,
    flags: FlagOverrides,
    format: OutputFormat,
) -> anyhow::Result<u8> {
    let recording = Recording::load(dir)?;
    warn_all(&recording.warnings);
    let mut settings = Settings::load_for_session(&FlagOverrides {
        endpoint: Some(endpoint.to_owned()),
        model: Some(recording.meta.model.clone()),
        voice: Some(recording.meta.voice.clone()),
        ..flags
    })?;
    // The recorded mic audio is streamed again as the microphone, in real time; no device is
    // opened, so the run is the recording's input and nothing else.
    let mic = dir.join(MIC_WAV);
    let mic_secs = hound::WavReader::open(&mic)
        .map(|r| f64::from(r.duration()) / f64::from(r.spec().sample_rate.max(1)))
        .unwrap_or(0.0);
    settings.audio.devices = false;
    settings.audio.output_wav = None;
    settings.audio.input_wav = (mic_secs > 0.0).then_some(mic);
    let turns: Vec<String> = recording
        .steps()
        .filter_map(|applied| match applied.msg {
            Msg::UserText(text) => Some(text),
            _ => None,
        })
        .collect();
    let audio = if mic_secs > 0.0 {
        format!(" and {mic_secs:.1} s of mic audio")
    } else {
        String::new()
    };
    let banner = format!(
        "Replaying {} recorded turn(s){audio} from {} against {}.",
        turns.len(),
        dir.display(),
        settings.endpoint_label()
    );
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        for turn in turns {
            if tx.send(turn).await.is_err() {
                break;
            }
        }
    });
    run_with_input(settings, format, Some(&banner), rx).await
}

#[cfg(test)]
mod tests {
    use super::{echo_text, millis_for_people};
    use std::time::Duration;

    #[test]
    fn json_durations_are_rounded_to_the_microsecond() {
        assert_eq!(millis_for_people(Duration::from_nanos(14_682)), 0.015);
        assert_eq!(millis_for_people(Duration::from_millis(250)), 250.0);
        assert_eq!(
            serde_json::json!(millis_for_people(Duration::from_nanos(1_234_567))).to_string(),
            "1.235"
        );
    }
    use crate::audio::{EchoFigures, EchoMode};

    #[test]
    fn the_text_summary_says_how_the_canceller_stood() {
        let running = EchoFigures {
            mode: EchoMode::Aec,
            cancelling: true,
            noise_suppression: true,
            converged: true,
            erle_db: Some(31.6),
            delay_ms: Some(48),
            ..EchoFigures::default()
        };
        assert_eq!(
            echo_text(running),
            "; echo aec, converged, 32 dB of echo removed, echo delay 48 ms"
        );
        let starting = EchoFigures {
            converged: false,
            erle_db: None,
            delay_ms: None,
            ..running
        };
        assert_eq!(echo_text(starting), "; echo aec, converging");
        let gate = EchoFigures {
            mode: EchoMode::Gate,
            noise_suppression: false,
            ..EchoFigures::default()
        };
        assert_eq!(echo_text(gate), "; echo gate, no noise suppression");
    }
}
