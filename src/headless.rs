//! Headless presenter: user turns from stdin (one per line), the conversation on stdout as
//! text lines or JSON events. It drives the same `App` as the TUI and prints what it would show.

use std::collections::VecDeque;
use std::io::Write;

use serde_json::json;
use tokio::io::AsyncBufReadExt;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::app::{App, Entry, ModelTurnStatus, Msg, NoticeLevel, ToolState, UserInput};
use crate::config::Settings;
use crate::runtime::{Conversation, prepare};

/// How the conversation is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    Text,
    Json,
}

/// Runs one conversation from stdin to stdout. Returns the process exit code: 0 when the
/// session ended cleanly (end of input or `end_session`), 1 otherwise.
pub async fn run(
    settings: Settings,
    format: OutputFormat,
    banner: Option<&str>,
) -> anyhow::Result<u8> {
    let (lines_tx, lines_rx) = mpsc::channel::<String>(64);
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if lines_tx.send(line).await.is_err() {
                break;
            }
        }
    });
    run_with_input(settings, format, banner, lines_rx).await
}

/// [`run`] with the user turns coming from `lines` (stdin, or a recording for `replay
/// --against`); the input ends when the channel closes.
pub async fn run_with_input(
    settings: Settings,
    format: OutputFormat,
    banner: Option<&str>,
    mut lines_rx: mpsc::Receiver<String>,
) -> anyhow::Result<u8> {
    let mut printer = Printer::new(format);

    // Keep the in-process mock (if any) alive for the whole conversation.
    let Conversation {
        mut app,
        mut engine,
        upstream,
        mock: _mock,
    } = prepare(&settings).await?;
    if settings.is_offline() {
        printer.info(
            "No API key is set: talking to the embedded offline demo model (set GEMINI_API_KEY to talk to Gemini).",
        );
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

    // Devices first, so the mic is live and the first reply is heard.
    engine.await_audio(&mut app).await;
    printer.render(&app);
    app.update(Msg::Connecting);
    if let Err(message) = engine.open(upstream).await {
        app.update(Msg::ConnectFailed(message));
        printer.render(&app);
        return Ok(1);
    }

    let mut queued: VecDeque<String> = VecDeque::new();
    let mut input_closed = false;
    let mut last_activity = Instant::now();
    loop {
        if app.ready_for_user() {
            if let Some(line) = queued.pop_front() {
                engine.apply(&mut app, Msg::UserText(line)).await;
                last_activity = Instant::now();
                printer.render(&app);
                continue;
            }
            // The input ends with stdin and, with --input-wav, the clip.
            if input_closed && !app.audio.clip_streaming {
                engine.apply(&mut app, Msg::EndSession).await;
            }
        }
        let waiting_for_model = !app.ready_for_user() && !app.is_finished();
        let deadline = last_activity + settings.turn_timeout;
        tokio::select! {
            msg = engine.next() => match msg {
                Some(msg) => {
                    last_activity = Instant::now();
                    engine.apply(&mut app, msg).await;
                }
                None => break,
            },
            line = lines_rx.recv(), if !input_closed => match line {
                Some(line) if !line.trim().is_empty() => queued.push_back(line),
                Some(_) => {}
                None => input_closed = true,
            },
            _ = tokio::time::sleep_until(deadline), if waiting_for_model => {
                printer.render(&app);
                let message = format!(
                    "No reply from the model for {:.0} s; giving up on this turn.",
                    settings.turn_timeout.as_secs_f64()
                );
                engine.record_error(&message);
                printer.error(&message);
                return Ok(1);
            }
        }
        printer.render(&app);
        if app.is_finished() {
            break;
        }
    }
    engine.settle_audio_figures(&mut app).await;
    printer.render(&app);
    printer.audio_summary(&app);
    printer.session_end(&app);
    Ok(if app.ended_cleanly() { 0 } else { 1 })
}

/// Prints finished history entries in order, and notices as they appear.
pub struct Printer {
    format: OutputFormat,
    printed_entries: usize,
    printed_notices: usize,
}

impl Printer {
    pub fn new(format: OutputFormat) -> Self {
        Printer {
            format,
            printed_entries: 0,
            printed_notices: 0,
        }
    }

    /// Prints what became final since the last call. An entry still streaming (or a tool
    /// call still running) holds back the ones after it, so the order is the history's order.
    pub fn render(&mut self, app: &App) {
        for notice in &app.notices[self.printed_notices..] {
            let level = match notice.level {
                NoticeLevel::Info => "info",
                NoticeLevel::Warning => "warning",
                NoticeLevel::Error => "error",
            };
            match self.format {
                OutputFormat::Text => eprintln!("livetalk: {level}: {}", notice.text),
                OutputFormat::Json => {
                    self.json(json!({"type": "notice", "level": level, "text": notice.text}));
                    if notice.level == NoticeLevel::Error {
                        eprintln!("livetalk: error: {}", notice.text);
                    }
                }
            }
        }
        self.printed_notices = app.notices.len();

        while let Some(entry) = app.transcript.get(self.printed_entries) {
            if !self.print_entry(app, entry) {
                break;
            }
            self.printed_entries += 1;
        }
        let _ = std::io::stdout().flush();
    }

    /// Prints one entry if it is final; returns false to wait.
    fn print_entry(&self, app: &App, entry: &Entry) -> bool {
        match entry {
            Entry::User { text, via } => {
                let via_label = match via {
                    UserInput::Typed => "typed",
                    UserInput::Speech => "speech",
                };
                match self.format {
                    OutputFormat::Text if *via == UserInput::Speech => {
                        println!("You (spoken): {text}")
                    }
                    OutputFormat::Text => println!("You: {text}"),
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
                        let mark = if interrupted { " [interrupted]" } else { "" };
                        println!("Gemini: {shown}{mark}");
                    }
                    OutputFormat::Json => self.json(json!({
                        "type": "model",
                        "text": text,
                        "status": if interrupted { "interrupted" } else { "complete" },
                    })),
                }
                true
            }
            Entry::Tool(index) => {
                let Some(call) = app.tool_calls.get(*index) else {
                    return true;
                };
                if call.state == ToolState::Running && !app.is_finished() {
                    return false;
                }
                let millis = call.duration.map(|d| d.as_secs_f64() * 1000.0);
                let response = call.response.as_ref().map(|r| &r.response);
                match self.format {
                    OutputFormat::Text => {
                        let time = millis
                            .map(|ms| format!(" in {ms:.1} ms"))
                            .unwrap_or_default();
                        let result = response.map(|r| format!(": {r}")).unwrap_or_default();
                        println!(
                            "Tool: {} {} -> {}{time}{result}",
                            call.name,
                            call.args,
                            call.state.label()
                        );
                    }
                    OutputFormat::Json => self.json(json!({
                        "type": "tool_call",
                        "id": call.id,
                        "name": call.name,
                        "args": call.args,
                        "state": call.state.label(),
                        "duration_ms": millis,
                        "response": call.response,
                        "truncated": call.truncated,
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
            let reason = match &app.connection {
                crate::app::Connection::Disconnected { reason } => reason.clone(),
                _ => String::new(),
            };
            self.json(json!({"type": "closed", "clean": app.ended_cleanly(), "reason": reason, "total_tokens": app.total_tokens}));
        }
    }

    /// What audio did, for people debugging a voice session: counters and latencies.
    pub(crate) fn audio_summary(&self, app: &App) {
        let f = &app.audio.figures;
        let used = app.audio.input.is_some()
            || app.audio.output.is_some()
            || f.frames_sent > 0
            || !f.played.is_zero();
        if !app.audio.enabled || !used {
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
                    "audio: {} mic frames sent, {} dropped; {:.1} s of model audio heard, {} underruns{}{}{}",
                    f.frames_sent,
                    f.frames_dropped,
                    f.played.as_secs_f64(),
                    f.underruns,
                    latency("mic → socket", &f.mic_to_socket),
                    latency("socket → speaker", &f.socket_to_speaker),
                    latency("interrupt → silence", &f.interrupt_to_silence),
                ));
            }
            OutputFormat::Json => {
                let latency = |l: &crate::audio::Latency| {
                    ms(l).map(|(last, worst)| json!({"last_ms": last, "worst_ms": worst, "count": l.count}))
                };
                self.json(json!({
                    "type": "audio",
                    "input": app.audio.input.as_ref().map(|i| json!({"name": i.name, "path": i.path})),
                    "output": app.audio.output.as_ref().map(|o| json!({"name": o.name, "path": o.path})),
                    "frames_sent": f.frames_sent,
                    "frames_dropped": f.frames_dropped,
                    "frames_gated": f.frames_gated,
                    "mic_overflow_samples": f.mic_overflow,
                    "underruns": f.underruns,
                    "played_secs": f.played.as_secs_f64(),
                    "mic_to_socket": latency(&f.mic_to_socket),
                    "socket_to_speaker": latency(&f.socket_to_speaker),
                    "interrupt_to_silence": latency(&f.interrupt_to_silence),
                }));
            }
        }
    }

    pub(crate) fn info(&self, text: &str) {
        eprintln!("livetalk: {text}");
    }

    pub(crate) fn error(&self, text: &str) {
        if self.format == OutputFormat::Json {
            self.json(json!({"type": "notice", "level": "error", "text": text}));
        }
        eprintln!("livetalk: error: {text}");
    }

    fn json(&self, value: serde_json::Value) {
        println!("{value}");
    }
}
