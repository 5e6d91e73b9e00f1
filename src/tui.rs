//! The full-screen terminal front-end: a [`Presenter`] that draws `App` state with ratatui and
//! turns terminal events into messages. It is generic over ratatui's `Backend` and takes its
//! events as a stream, so the whole app, keys in and frames out, runs in tests on a
//! `TestBackend`. For the real terminal it owns raw mode, the alternate screen and the mouse,
//! and restores them on every way out.

use std::io::{self, Write as _};
use std::path::Path;
use std::sync::{Mutex, OnceLock};
use std::thread::ThreadId;
use std::time::Duration;

use anyhow::Context as _;
use crossterm::event::{
    DisableBracketedPaste, DisableMouseCapture, EnableBracketedPaste, EnableMouseCapture, Event,
    EventStream, KeyEventKind,
};
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use futures_util::{Stream, StreamExt as _};
use ratatui::Terminal;
use ratatui::backend::{Backend, CrosstermBackend, TestBackend};
use ratatui::buffer::Buffer;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior};
use tracing::error;

use crate::app::{App, ConnectionState, Effect, Msg};
use crate::audio::{Audio, AudioOptions, AudioWorker};
use crate::config::{Graphics, Settings};
use crate::driver::{Presenter, Source, drive};
use crate::engine::launch;
use crate::output::StderrRedirect;
use crate::record::Recording;
use crate::record::replay::{Pacing, Replay, initial_app};
use crate::ui::{self, Pictures};

/// Frames are drawn at most this often; bursts of events are coalesced into one frame.
const FRAME_INTERVAL: Duration = Duration::from_millis(16);
/// Spinners and highlights advance at this pace, and only while something animates.
const TICK_INTERVAL: Duration = Duration::from_millis(250);

/// fd 2 pointed at the log file while the UI runs; dropping it restores the stderr the
/// process started with.
static SAVED_STDERR: Mutex<Option<StderrRedirect>> = Mutex::new(None);
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
    let (mut app, mut engine) = launch(&settings, log_path, crate::tools::Decider::Person).await?;
    on_the_terminal(&mut app, &mut engine, log_path, settings.graphics).await?;
    let lost = app.is_finished() && !app.ended_cleanly();
    if lost && let ConnectionState::Disconnected { reason } = app.connection() {
        crate::output::err(&format!("livetalk: {reason}"));
    }
    if let Some(dir) = engine.recording_dir() {
        crate::output::err(&recorded_to(dir));
    }
    Ok(if lost { 1 } else { 0 })
}

/// Where a session was recorded and how to open it, as the way out says it.
pub fn recorded_to(dir: &Path) -> String {
    let dir = shell_word(&dir.display().to_string());
    format!("Recorded to {dir} · livetalk replay {dir} · livetalk inspect {dir}")
}

/// `text` as one word a shell reads back as it is: quoted only when it must be.
fn shell_word(text: &str) -> String {
    let plain = |c: char| c.is_alphanumeric() || "/._-+:=@%,".contains(c);
    if !text.is_empty() && text.chars().all(plain) {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

/// Replays a recording in the TUI at the recorded pace: no network, nothing sent, tools not
/// run again; the app is handed the messages it applied then. Space pauses, `n` steps while
/// paused, `q` leaves. With `audio`, the recorded model audio plays on the speaker.
pub async fn replay(
    dir: &Path,
    pacing: Pacing,
    log_path: Option<&Path>,
    audio: Option<AudioOptions>,
    graphics: Graphics,
) -> anyhow::Result<u8> {
    let recording = Recording::load(dir)?;
    let (replay, warnings) = Replay::new(&recording, pacing);
    let mut replay = replay.with_frames(&recording);
    if let Some(options) = audio {
        let (speaker, feeds) = Audio::start(options)?;
        replay.play_on(AudioWorker::new(speaker, feeds));
    }
    let mut app = initial_app(&recording, log_path, replay.total());
    on_the_terminal(&mut app, &mut replay, log_path, graphics).await?;
    for warning in &warnings {
        crate::output::err(&format!("livetalk: warning: {warning}"));
    }
    Ok(0)
}

/// Runs `app` full-screen on this process's terminal, restoring it however the loop ends.
async fn on_the_terminal<S: Source>(
    app: &mut App,
    source: &mut S,
    log_path: Option<&Path>,
    graphics: Graphics,
) -> anyhow::Result<()> {
    let guard = TerminalGuard::enter(log_path)?;
    // The terminal is asked before anything reads its input, so its answer is not taken for keys.
    let pictures = pictures_for(graphics);
    let mut screen = Screen::new(guard.terminal()?, EventStream::new())
        .with_signals(QuitSignals::new()?)
        .with_pictures(pictures);
    let ran = drive(app, source, &mut screen).await;
    // No picture outlives the screen it was drawn on.
    screen.hide_pictures();
    drop(screen);
    drop(guard);
    ran
}

/// Runs `app` on any ratatui backend with events from `events` (tests drive a `TestBackend`
/// this way); every drawn frame is also sent to `frames` when given.
pub async fn run_on<S, B, E>(
    app: &mut App,
    source: &mut S,
    terminal: Terminal<B>,
    events: E,
    frames: Option<mpsc::UnboundedSender<Buffer>>,
) -> anyhow::Result<()>
where
    S: Source,
    B: Backend + Clipboard + Graphic,
    E: Stream<Item = io::Result<Event>> + Unpin,
{
    let mut screen = Screen::new(terminal, events);
    screen.frames = frames;
    drive(app, source, &mut screen).await
}

/// How long the terminal has to say which graphics it draws before half-blocks are used.
const GRAPHICS_QUERY_DEADLINE: Duration = Duration::from_millis(500);

/// The graphics the preview is drawn with: the one `graphics` names, or for `auto` the one the
/// terminal says it has (asked under [`GRAPHICS_QUERY_DEADLINE`], while in raw mode and before
/// the event stream reads the terminal). Inside tmux, which passes graphics through only when
/// told to, and where the terminal does not answer in time: half-blocks.
fn pictures_for(graphics: Graphics) -> Pictures {
    use ratatui_image::picker::{Picker, ProtocolType, cap_parser::QueryStdioOptions};
    let forced = |protocol| Pictures::new(protocol, cell_pixels());
    match graphics {
        Graphics::Off => Pictures::off(),
        Graphics::Halfblocks => forced(ProtocolType::Halfblocks),
        Graphics::Kitty => forced(ProtocolType::Kitty),
        Graphics::Sixel => forced(ProtocolType::Sixel),
        Graphics::Iterm2 => forced(ProtocolType::Iterm2),
        Graphics::Auto if inside_tmux() => forced(ProtocolType::Halfblocks),
        Graphics::Auto => {
            let options = QueryStdioOptions {
                timeout: GRAPHICS_QUERY_DEADLINE,
                ..QueryStdioOptions::default()
            };
            match Picker::from_query_stdio_with_options(options) {
                Ok(picker) => Pictures::new(picker.protocol_type(), picker.font_size()),
                Err(e) => {
                    tracing::info!(
                        "the terminal did not say which graphics it has ({e}): half-blocks"
                    );
                    forced(ProtocolType::Halfblocks)
                }
            }
        }
    }
}

/// True inside tmux (or screen), by the environment it gives its panes.
fn inside_tmux() -> bool {
    let var = |name| std::env::var(name).unwrap_or_default();
    !var("TMUX").is_empty()
        || var("TERM").starts_with("tmux")
        || var("TERM").starts_with("screen")
        || var("TERM_PROGRAM") == "tmux"
}

/// A character cell in pixels, as the terminal reports its window (zero where it does not).
fn cell_pixels() -> ratatui_image::FontSize {
    match crossterm::terminal::window_size() {
        Ok(size) if size.columns > 0 && size.rows > 0 => {
            ratatui_image::FontSize::new(size.width / size.columns, size.height / size.rows)
        }
        _ => ui::HALF_BLOCK_CELL,
    }
}

/// A terminal pictures are drawn on: what no cell shows any more is deleted from it (kitty
/// keeps an image's pixels until told to let them go).
pub trait Graphic {
    fn delete_images(&mut self, kitty_ids: &[u32]) -> io::Result<()>;
}

impl<W: io::Write> Graphic for CrosstermBackend<W> {
    fn delete_images(&mut self, kitty_ids: &[u32]) -> io::Result<()> {
        for id in kitty_ids {
            // `d=I`: the image and its pixels, by id; `q=2`: no answer.
            write!(self, "\x1b_Ga=d,d=I,i={id},q=2\x1b\\")?;
        }
        io::Write::flush(self)
    }
}

impl Graphic for TestBackend {
    fn delete_images(&mut self, _kitty_ids: &[u32]) -> io::Result<()> {
        Ok(())
    }
}

/// A terminal the clipboard is reached through. The real one takes OSC 52, which the local
/// terminal carries out even over SSH and inside tmux (with `set-clipboard on`); a test
/// backend has no clipboard.
pub trait Clipboard {
    fn copy(&mut self, text: &str) -> io::Result<()>;
}

impl<W: io::Write> Clipboard for CrosstermBackend<W> {
    fn copy(&mut self, text: &str) -> io::Result<()> {
        crossterm::execute!(
            self,
            crossterm::clipboard::CopyToClipboard::to_clipboard_from(text)
        )
    }
}

impl Clipboard for TestBackend {
    fn copy(&mut self, _text: &str) -> io::Result<()> {
        Ok(())
    }
}

/// The terminal as a presenter: draws at most every [`FRAME_INTERVAL`], ticks only while
/// something animates, and turns events and signals into messages.
struct Screen<B: Backend, E> {
    terminal: Terminal<B>,
    events: E,
    /// The terminal's events ended or kept failing: nobody can press a key any more.
    events_ended: bool,
    /// Reads of the terminal that failed in a row.
    event_errors: u32,
    tick: tokio::time::Interval,
    /// Ticks once a second while a figure on screen counts seconds and nothing animates.
    second: tokio::time::Interval,
    quit: Option<QuitSignals>,
    frames: Option<mpsc::UnboundedSender<Buffer>>,
    /// The preview's picture, encoded for this terminal.
    pictures: Pictures,
    animating: bool,
    counting: bool,
    dirty: bool,
    next_frame: Instant,
}

impl<B: Backend, E> Screen<B, E> {
    fn new(terminal: Terminal<B>, events: E) -> Self {
        let mut tick = tokio::time::interval(TICK_INTERVAL);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut second = tokio::time::interval(Duration::from_secs(1));
        second.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Screen {
            terminal,
            events,
            events_ended: false,
            event_errors: 0,
            tick,
            second,
            quit: None,
            frames: None,
            pictures: Pictures::off(),
            animating: false,
            counting: false,
            dirty: true,
            next_frame: Instant::now(),
        }
    }

    fn with_signals(mut self, quit: QuitSignals) -> Self {
        self.quit = Some(quit);
        self
    }

    fn with_pictures(mut self, pictures: Pictures) -> Self {
        self.pictures = pictures;
        self
    }
}

impl<B: Backend + Graphic, E> Screen<B, E> {
    /// Deletes from the terminal the pictures no cell shows any more.
    fn delete_retired_pictures(&mut self) {
        let retired = self.pictures.take_retired();
        if !retired.is_empty()
            && let Err(e) = self.terminal.backend_mut().delete_images(&retired)
        {
            error!("deleting pictures from the terminal failed: {e}");
        }
    }

    /// The screen is left: its picture with it.
    fn hide_pictures(&mut self) {
        self.pictures.hide();
        self.delete_retired_pictures();
    }
}

impl<B, E> Presenter for Screen<B, E>
where
    B: Backend + Clipboard + Graphic,
    E: Stream<Item = io::Result<Event>> + Unpin,
{
    fn show(&mut self, app: &App) -> anyhow::Result<Option<Msg>> {
        let now = Instant::now();
        if now < self.next_frame {
            self.dirty = true;
            return Ok(None);
        }
        self.dirty = false;
        self.next_frame = now + FRAME_INTERVAL;
        let mut layout = None;
        let pictures = &mut self.pictures;
        let frame = self
            .terminal
            .draw(|frame| layout = Some(ui::draw_with(frame, app, pictures)))
            .map_err(|e| anyhow::anyhow!("drawing the terminal UI: {e}"))?;
        if let Some(frames) = &self.frames {
            let _ = frames.send(frame.buffer.clone());
        }
        self.delete_retired_pictures();
        Ok(layout
            .filter(|layout| *layout != app.view().layout)
            .map(Msg::Layout))
    }

    fn observe(&mut self, app: &App) {
        self.animating = app.animating();
        self.counting = app.counts_seconds();
    }

    fn carry_out(&mut self, effect: Effect) {
        if let Effect::Copy(text) = effect
            && let Err(e) = self.terminal.backend_mut().copy(&text)
        {
            error!("copying to the clipboard through the terminal failed: {e}");
        }
    }

    async fn next_input(&mut self) -> Option<Msg> {
        let dirty = self.dirty;
        let animating = self.animating;
        let counting = self.counting && !animating;
        let signals = self.quit.is_some();
        let reading = !self.events_ended;
        tokio::select! {
            event = self.events.next(), if reading => match event_msg(event) {
                Ok(msg) => {
                    self.event_errors = 0;
                    msg
                }
                Err(Unreadable::Once) if self.event_errors < 2 => {
                    self.event_errors += 1;
                    None
                }
                // Leave as a signal would: with no terminal to read, the loop must not wait
                // for a key (or poll an ended stream) forever.
                Err(_) => {
                    error!("the terminal cannot be read any more: leaving");
                    self.events_ended = true;
                    Some(Msg::Quit)
                }
            },
            _ = self.tick.tick(), if animating => Some(Msg::Tick(std::time::Instant::now())),
            _ = self.second.tick(), if counting => Some(Msg::Tick(std::time::Instant::now())),
            () = tokio::time::sleep_until(self.next_frame), if dirty => None,
            () = async { if let Some(quit) = &mut self.quit { quit.recv().await } }, if signals => Some(Msg::Quit),
        }
    }

    fn finished(&self, _app: &App, _source_open: bool) -> bool {
        // The screen stays until the user leaves: a session ended by `end_session` to be read
        // to the end of its goodbye (any key then leaves), a lost one to be read and retried.
        false
    }
}

/// SIGTERM, SIGHUP and SIGINT: each means "leave, restoring the terminal".
pub struct QuitSignals {
    term: Signal,
    hup: Signal,
    int: Signal,
}

impl QuitSignals {
    pub fn new() -> anyhow::Result<Self> {
        Ok(QuitSignals {
            term: signal(SignalKind::terminate()).context("watching SIGTERM")?,
            hup: signal(SignalKind::hangup()).context("watching SIGHUP")?,
            int: signal(SignalKind::interrupt()).context("watching SIGINT")?,
        })
    }

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
/// Why a terminal event could not be read.
enum Unreadable {
    /// Reading failed (three times in a row means the terminal is gone).
    Once,
    /// The events ended.
    Ended,
}

/// The message for a terminal event, or why there is none.
fn event_msg(event: Option<io::Result<Event>>) -> Result<Option<Msg>, Unreadable> {
    match event {
        Some(Ok(Event::Key(key))) if key.kind != KeyEventKind::Release => Ok(Some(Msg::Key(key))),
        Some(Ok(Event::Mouse(mouse))) => Ok(Some(Msg::Mouse(mouse))),
        Some(Ok(Event::Paste(text))) => Ok(Some(Msg::Paste(text))),
        // A resize just needs a redraw, which every handled event gets.
        Some(Ok(Event::Resize(..))) => Ok(Some(Msg::Tick(std::time::Instant::now()))),
        Some(Ok(_)) => Ok(None),
        Some(Err(e)) => {
            error!("reading terminal events failed: {e}");
            Err(Unreadable::Once)
        }
        None => Err(Unreadable::Ended),
    }
}

/// Raw mode and the alternate screen; dropping it (or a panic on the UI thread) restores the
/// terminal. Every full-screen view holds one (the app's, and `livetalk proxy`'s).
pub struct TerminalGuard;

impl TerminalGuard {
    pub fn enter(log_path: Option<&Path>) -> anyhow::Result<Self> {
        let _ = UI_THREAD.set(std::thread::current().id());
        install_panic_hook();
        redirect_stderr(log_path);
        enable_raw_mode().context("switching the terminal to raw mode")?;
        if let Err(e) = crossterm::execute!(
            io::stdout(),
            EnterAlternateScreen,
            EnableMouseCapture,
            EnableBracketedPaste
        ) {
            restore_terminal();
            return Err(e).context("entering the alternate screen");
        }
        Ok(TerminalGuard)
    }

    /// A ratatui terminal on stdout.
    pub fn terminal(
        &self,
    ) -> anyhow::Result<Terminal<CrosstermBackend<crate::output::Screen<io::Stdout>>>> {
        Terminal::new(CrosstermBackend::new(crate::output::Screen::new(
            io::stdout(),
        )))
        .context("starting the terminal UI")
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
    // Already pointed away: a second redirect would keep the log file as "the original".
    if let Ok(mut slot) = SAVED_STDERR.lock()
        && slot.is_none()
    {
        *slot = StderrRedirect::to(&target).ok();
    }
}

fn restore_stderr() {
    drop(SAVED_STDERR.lock().ok().and_then(|mut slot| slot.take()));
}

/// A panic on the UI thread restores the terminal first, then prints as usual. Panics on
/// other threads, and a tool handler's anywhere (caught and answered as an error by the
/// dispatcher), must not tear the UI down: they go to the log.
fn install_panic_hook() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    if INSTALLED.set(()).is_err() {
        return;
    }
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        // A tool handler's panic is caught and answered as an error, even on this thread.
        if UI_THREAD.get() == Some(&std::thread::current().id()) && !crate::tools::in_tool_handler()
        {
            restore_terminal();
            previous(info);
        } else {
            error!("panic on a worker thread: {info}");
        }
    }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::{AppInit, Effect};

    /// A session that goes on and never says anything.
    struct Quiet;

    impl Source for Quiet {
        async fn next(&mut self) -> Option<Msg> {
            std::future::pending().await
        }

        async fn carry_out(&mut self, _effect: Effect) {}
    }

    async fn runs_out(events: Vec<io::Result<Event>>) -> App {
        let mut app = App::new(AppInit::new("m", true, Vec::new()));
        let terminal = Terminal::new(ratatui::backend::TestBackend::new(80, 24)).unwrap();
        let events = futures_util::stream::iter(events);
        tokio::time::timeout(
            Duration::from_secs(10),
            run_on(&mut app, &mut Quiet, terminal, events, None),
        )
        .await
        .expect("the loop ends when the terminal cannot be read")
        .unwrap();
        app
    }

    #[tokio::test]
    async fn a_terminal_whose_events_end_or_keep_failing_ends_the_loop() {
        assert!(runs_out(Vec::new()).await.wants_to_quit());
        let broken = || Err(io::Error::other("the terminal is gone"));
        let app = runs_out(vec![broken(), broken(), broken()]).await;
        assert!(app.wants_to_quit());
    }
}
