//! The full-screen terminal front-end: owns the terminal (raw mode, alternate screen, mouse),
//! restores it on every way out, and runs the event loop that feeds keys, session and tool
//! events into `App::update` and redraws from `App` state.

use std::io::{self, Stdout, Write as _};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::{Mutex, OnceLock};
use std::thread::ThreadId;
use std::time::Duration;

use anyhow::Context as _;
use crossterm::event::{
    DisableBracketedPaste, DisableMouseCapture, EnableBracketedPaste, EnableMouseCapture, Event,
    EventStream, KeyCode, KeyEventKind,
};
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use futures_util::StreamExt as _;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::time::{Instant, MissedTickBehavior};
use tracing::error;

use crate::app::{App, Connection, Effect, Focus, Msg};
use crate::audio::{Audio, AudioOptions};
use crate::config::Settings;
use crate::record::Recording;
use crate::record::replay::{self, Action, Clock, Pacing, Step};
use crate::runtime::{Conversation, prepare};
use crate::ui;

/// Frames are drawn at most this often; bursts of events are coalesced into one frame.
const FRAME_INTERVAL: Duration = Duration::from_millis(16);
/// Spinners and highlights advance at this pace, and only while something animates.
const TICK_INTERVAL: Duration = Duration::from_millis(250);

type Backend = CrosstermBackend<Stdout>;

/// The stderr the process started with, while the UI has pointed fd 2 at the log file.
static SAVED_STDERR: Mutex<Option<OwnedFd>> = Mutex::new(None);
/// The thread that owns the terminal; a panic there restores it before printing.
static UI_THREAD: OnceLock<ThreadId> = OnceLock::new();

/// True when both stdin and stdout are terminals, so the full-screen UI can run.
pub fn terminal_available() -> bool {
    use std::io::IsTerminal as _;
    io::stdin().is_terminal() && io::stdout().is_terminal()
}

/// Runs the TUI until the user quits or the session ends by `end_session`. Returns the exit
/// code: 0 unless the session failed or was lost.
pub async fn run(settings: Settings, log_path: Option<&Path>) -> anyhow::Result<u8> {
    let Conversation {
        mut app,
        mut engine,
        upstream,
        mock: _mock,
    } = prepare(&settings).await?;
    set_up_view(&mut app, log_path);
    app.recording = engine
        .recording_dir()
        .map(|dir| format!("REC {}", dir.display()));

    // Devices first, so the first reply is heard (alsa-lib's stderr noise is kept off the
    // screen by the audio thread's own error handler).
    engine.await_audio(&mut app).await;
    let mut terminal = TerminalGuard::enter(log_path)?;
    let mut inputs = TerminalInputs::new()?;

    app.update(Msg::Connecting);
    terminal.draw(&mut app)?;

    // Connect while staying responsive: keys, resizes and signals still work.
    let connected = {
        let connecting = engine.open(upstream);
        tokio::pin!(connecting);
        loop {
            tokio::select! {
                result = &mut connecting => break Some(result),
                event = inputs.events.next() => {
                    if let Some(msg) = event_msg(event) {
                        app.update(msg);
                    }
                }
                _ = inputs.tick.tick() => { app.update(Msg::Tick); }
                () = inputs.quit.recv() => { app.update(Msg::Quit); }
            }
            if app.view.quit {
                break None;
            }
            terminal.draw(&mut app)?;
        }
    };
    match connected {
        None => return Ok(0),
        Some(Err(message)) => {
            app.update(Msg::ConnectFailed(message));
        }
        Some(Ok(())) => {}
    }

    let mut engine_open = !app.is_finished();
    let mut dirty = true;
    let mut next_frame = Instant::now();
    loop {
        if dirty && Instant::now() >= next_frame {
            terminal.draw(&mut app)?;
            dirty = false;
            next_frame = Instant::now() + FRAME_INTERVAL;
        }
        tokio::select! {
            msg = engine.next(), if engine_open => match msg {
                Some(msg) => engine.apply(&mut app, msg).await,
                None => engine_open = false,
            },
            event = inputs.events.next() => match event_msg(event) {
                Some(msg) => engine.apply(&mut app, msg).await,
                None => continue,
            },
            _ = inputs.tick.tick(), if app.animating() => engine.apply(&mut app, Msg::Tick).await,
            _ = tokio::time::sleep_until(next_frame), if dirty => {}
            () = inputs.quit.recv() => engine.apply(&mut app, Msg::Quit).await,
        }
        dirty = true;
        // A retry (Ctrl-R) gives the engine a new link to listen to.
        engine_open |= !app.is_finished();
        if app.view.quit || (app.ended_cleanly() && !engine_open) {
            break;
        }
    }
    terminal.draw(&mut app)?;
    drop(terminal);
    let lost = matches!(app.connection, Connection::Disconnected { .. }) && !app.ended_cleanly();
    if lost && let Connection::Disconnected { reason } = &app.connection {
        eprintln!("livetalk: {reason}");
    }
    Ok(if lost { 1 } else { 0 })
}

/// Replays a recording in the TUI at the recorded pace: no network, nothing sent, tools not
/// run again; the recorded results are applied. Space pauses, `n` steps while paused.
pub async fn replay(
    dir: &Path,
    pacing: Pacing,
    log_path: Option<&Path>,
    audio: Option<AudioOptions>,
) -> anyhow::Result<u8> {
    let recording = Recording::load(dir)?;
    let (steps, step_warnings) = replay::steps(&recording);
    let warnings: Vec<String> = recording
        .warnings
        .iter()
        .chain(&step_warnings)
        .cloned()
        .collect();
    let mut app = replay::initial_app(&recording);
    set_up_view(&mut app, log_path);
    // The recorded model audio is played on the speaker as it was heard.
    let mut player = match audio {
        Some(options) => {
            let (audio, feeds) = Audio::start(options)?;
            app.audio.enabled = true;
            Some((audio, feeds.events))
        }
        None => None,
    };
    if let Some((_, events)) = &mut player {
        let deadline = Instant::now() + std::time::Duration::from_secs(5);
        while !app.audio.opened {
            match tokio::time::timeout_at(deadline, events.recv()).await {
                Ok(Some(event)) => {
                    let _ = app.update(Msg::Audio(event));
                }
                _ => break,
            }
        }
    }
    // Typed input goes nowhere in a replay; start in the transcript.
    app.view.focus = Focus::Transcript;
    let total = steps.len();
    let mut steps = steps.into_iter().peekable();
    let mut errors = Vec::new();

    let mut terminal = TerminalGuard::enter(log_path)?;
    let mut inputs = TerminalInputs::new()?;
    let mut clock = Clock::new(pacing);
    let mut applied = 0usize;
    let apply =
        |app: &mut App, step: Step, errors: &mut Vec<String>, player: &Option<(Audio, _)>| {
            match step.action {
                Action::Msg(msg) => {
                    // Effects were carried out in the original run and are in the recording;
                    // only the model audio is played again.
                    let effects = app.update(msg);
                    if let Some((audio, _)) = player {
                        play_effects(audio, effects);
                    }
                }
                Action::Error(message) => errors.push(message),
            }
        };
    loop {
        // Everything already due is applied before the next frame.
        while !clock.is_paused()
            && let Some(step) = steps.peek()
            && clock.due(step.t).is_none_or(|due| due <= Instant::now())
            && let Some(step) = steps.next()
        {
            apply(&mut app, step, &mut errors, &player);
            applied += 1;
        }
        let state = match (clock.is_paused(), steps.peek().is_none()) {
            (_, true) => "finished".to_owned(),
            (true, false) => "paused: Space resumes, n steps".to_owned(),
            (false, false) => "Space pauses".to_owned(),
        };
        app.recording = Some(format!(
            "REPLAY {applied}/{total} ({state}) {}",
            recording.dir.display()
        ));
        terminal.draw(&mut app)?;
        let next_due = match steps.peek() {
            Some(step) if !clock.is_paused() => clock.due(step.t),
            _ => None,
        };
        tokio::select! {
            _ = async { if let Some(due) = next_due { tokio::time::sleep_until(due).await } },
                if next_due.is_some() => {}
            event = inputs.events.next() => match event_msg(event) {
                Some(Msg::Key(key)) if key.code == KeyCode::Char(' ') => {
                    clock.toggle_pause();
                    // Paused means quiet; the rest of that reply is not resumed.
                    if clock.is_paused() && let Some((audio, _)) = &player {
                        audio.flush(std::time::Instant::now());
                    }
                }
                Some(Msg::Key(key)) if key.code == KeyCode::Char('n') && clock.is_paused() => {
                    if let Some(step) = steps.next() {
                        clock.stepped_to(step.t);
                        apply(&mut app, step, &mut errors, &None);
                        applied += 1;
                    }
                }
                // Nothing typed is sent in a replay.
                Some(Msg::Key(key)) if app.view.focus == Focus::Input && key.code == KeyCode::Enter => {}
                Some(msg) => { let _ = app.update(msg); }
                None => {}
            },
            event = async { player.as_mut()?.1.recv().await }, if player.is_some() => match event {
                Some(event) => { let _ = app.update(Msg::Audio(event)); }
                None => player = None,
            },
            _ = inputs.tick.tick(), if app.animating() => { let _ = app.update(Msg::Tick); }
            () = inputs.quit.recv() => { let _ = app.update(Msg::Quit); }
        }
        if app.view.quit {
            break;
        }
    }
    drop(terminal);
    for warning in &warnings {
        eprintln!("livetalk: warning: {warning}");
    }
    for error in &errors {
        eprintln!("livetalk: the original run stopped with: {error}");
    }
    Ok(0)
}

/// Carries out the audio effects of a replayed message (the rest happened in the original).
fn play_effects(audio: &Audio, effects: Vec<Effect>) {
    for effect in effects {
        match effect {
            Effect::PlayAudio(pcm) => audio.play(pcm, std::time::Instant::now()),
            Effect::EndPlaybackTurn => audio.end_turn(),
            Effect::StopPlayback => audio.flush(std::time::Instant::now()),
            _ => {}
        }
    }
}

/// View settings from the environment: `NO_COLOR`, and the log path the help shows.
fn set_up_view(app: &mut App, log_path: Option<&Path>) {
    app.view.no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    app.view.log_path = log_path.map(|p| p.display().to_string());
}

/// What the UI loop waits on besides the engine: terminal events, the animation tick and the
/// signals that mean "leave".
struct TerminalInputs {
    events: EventStream,
    tick: tokio::time::Interval,
    quit: QuitSignals,
}

/// SIGTERM, SIGHUP and SIGINT: each means "leave, restoring the terminal".
struct QuitSignals {
    term: Signal,
    hup: Signal,
    int: Signal,
}

impl TerminalInputs {
    fn new() -> anyhow::Result<Self> {
        let mut tick = tokio::time::interval(TICK_INTERVAL);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Ok(TerminalInputs {
            events: EventStream::new(),
            tick,
            quit: QuitSignals {
                term: signal(SignalKind::terminate()).context("watching SIGTERM")?,
                hup: signal(SignalKind::hangup()).context("watching SIGHUP")?,
                int: signal(SignalKind::interrupt()).context("watching SIGINT")?,
            },
        })
    }
}

impl QuitSignals {
    /// Resolves when any of them arrives.
    async fn recv(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.hup.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}

/// Turns a terminal event into a message; `None` for what the app ignores.
fn event_msg(event: Option<io::Result<Event>>) -> Option<Msg> {
    match event? {
        Ok(Event::Key(key)) if key.kind != KeyEventKind::Release => Some(Msg::Key(key)),
        Ok(Event::Mouse(mouse)) => Some(Msg::Mouse(mouse)),
        Ok(Event::Paste(text)) => Some(Msg::Paste(text)),
        // A resize just needs a redraw, which every handled event gets.
        Ok(Event::Resize(..)) => Some(Msg::Tick),
        Ok(_) => None,
        Err(e) => {
            error!("reading terminal events failed: {e}");
            None
        }
    }
}

/// The terminal in UI mode; dropping it (or a panic on the UI thread) restores it.
struct TerminalGuard {
    terminal: Terminal<Backend>,
}

impl TerminalGuard {
    fn enter(log_path: Option<&Path>) -> anyhow::Result<Self> {
        let _ = UI_THREAD.set(std::thread::current().id());
        install_panic_hook();
        redirect_stderr(log_path);
        enable_raw_mode().context("switching the terminal to raw mode")?;
        let mut stdout = io::stdout();
        if let Err(e) = crossterm::execute!(
            stdout,
            EnterAlternateScreen,
            EnableMouseCapture,
            EnableBracketedPaste
        ) {
            restore_terminal();
            return Err(e).context("entering the alternate screen");
        }
        match Terminal::new(CrosstermBackend::new(stdout)) {
            Ok(terminal) => Ok(TerminalGuard { terminal }),
            Err(e) => {
                restore_terminal();
                Err(e).context("starting the terminal UI")
            }
        }
    }

    /// Draws a frame and tells the app where things went.
    fn draw(&mut self, app: &mut App) -> anyhow::Result<()> {
        let mut layout = None;
        self.terminal
            .draw(|frame| layout = Some(ui::draw(frame, app)))
            .context("drawing the terminal UI")?;
        if let Some(layout) = layout
            && layout != app.view.layout
        {
            app.update(Msg::Layout(layout));
        }
        Ok(())
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore_terminal();
    }
}

/// Puts the terminal and stderr back as they were. Safe to call more than once.
fn restore_terminal() {
    let _ = disable_raw_mode();
    let mut stdout = io::stdout();
    let _ = crossterm::execute!(
        stdout,
        DisableBracketedPaste,
        DisableMouseCapture,
        LeaveAlternateScreen,
        crossterm::cursor::Show
    );
    let _ = stdout.flush();
    restore_stderr();
}

/// Points fd 2 at the log file (or /dev/null) so C libraries writing to stderr can't garble
/// the screen; the original is kept to restore.
fn redirect_stderr(log_path: Option<&Path>) {
    let target = log_path
        .and_then(|p| std::fs::OpenOptions::new().append(true).open(p).ok())
        .or_else(|| {
            std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/null")
                .ok()
        });
    let Some(target) = target else {
        return;
    };
    let Ok(saved) = rustix::io::dup(io::stderr()) else {
        return;
    };
    if rustix::stdio::dup2_stderr(&target).is_ok()
        && let Ok(mut slot) = SAVED_STDERR.lock()
    {
        *slot = Some(saved);
    }
}

fn restore_stderr() {
    let saved = SAVED_STDERR.lock().ok().and_then(|mut slot| slot.take());
    if let Some(saved) = saved {
        let _ = rustix::stdio::dup2_stderr(&saved);
    }
}

/// A panic on the UI thread restores the terminal first, then prints as usual. Panics on
/// other threads (a tool handler, caught and answered as an error by the dispatcher) must not
/// tear the UI down: they go to the log.
fn install_panic_hook() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    if INSTALLED.set(()).is_err() {
        return;
    }
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if UI_THREAD.get() == Some(&std::thread::current().id()) {
            restore_terminal();
            previous(info);
        } else {
            error!("panic on a worker thread: {info}");
        }
    }));
}
