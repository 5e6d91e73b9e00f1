//! `livetalk proxy`'s terminal UI: each app connection a session, listed on the left to pick
//! from (↑/↓), the picked one on the right: its path and model, the added delay, what was
//! said, each tool call with how long the app took to answer it, its warnings beside the
//! frames they came with, and (`f`) every frame both ways with its size and delay. No input
//! line: the apps drive. State changes only in [`View::apply`]; [`draw`] only reads it.

use std::collections::VecDeque;
use std::io;
use std::time::Duration;

use crossterm::event::{Event, EventStream, KeyCode, KeyEventKind, KeyModifiers};
use futures_util::StreamExt as _;
use livetalk_live::excerpt;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, List, ListItem, ListState, Paragraph, Wrap};
use tokio::sync::mpsc;

use super::events::{DelayLog, Direction, EventKind, ProxyEvent};

/// Lines kept per session (the oldest go first).
const LINES_KEPT: usize = 2000;
/// Sessions kept on the list (the oldest closed ones go first).
const SESSIONS_KEPT: usize = 200;

/// One line of a session's log.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub t: f64,
    pub kind: EntryKind,
    pub text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    Info,
    User,
    Model,
    Tool,
    Warning,
    Frame,
}

/// One app connection as the screen keeps it.
#[derive(Debug, Clone)]
pub struct Session {
    pub conn: u64,
    pub peer: String,
    pub path: String,
    pub upstream: String,
    pub model: String,
    pub open: bool,
    pub warnings: usize,
    pub frames_sent: u64,
    pub frames_received: u64,
    pub entries: VecDeque<Entry>,
    /// The newest audio levels each way (the app's mic, the model's voice), 0 to 1.
    pub mic_level: f32,
    pub model_level: f32,
    /// The newest turn's latency, and the connection's tokens and cost so far.
    pub first_reply: Option<Duration>,
    pub tokens: u64,
    pub cost: Option<f64>,
    send_delay: DelayLog,
    recv_delay: DelayLog,
}

/// What the screen shows.
#[derive(Debug, Default)]
pub struct View {
    pub header: Vec<String>,
    pub sessions: Vec<Session>,
    pub picked: usize,
    /// Frames shown among the lines (`f`).
    pub frames: bool,
    /// The proxy's own notes (a refused upstream, events not shown).
    pub notes: VecDeque<String>,
    pub quit: bool,
}

impl View {
    pub fn new(header: Vec<String>) -> View {
        View {
            header,
            ..View::default()
        }
    }

    fn session(&mut self, conn: u64) -> Option<&mut Session> {
        self.sessions.iter_mut().find(|s| s.conn == conn)
    }

    /// Takes in one event.
    pub fn apply(&mut self, event: ProxyEvent) {
        let t = event.t;
        if let EventKind::Opened {
            peer,
            path,
            upstream,
            ..
        } = &event.kind
        {
            if self.sessions.len() >= SESSIONS_KEPT
                && let Some(oldest) = self.sessions.iter().position(|s| !s.open)
            {
                self.sessions.remove(oldest);
                self.picked = self.picked.min(self.sessions.len().saturating_sub(1));
            }
            self.sessions.push(Session {
                conn: event.conn,
                peer: peer.to_string(),
                path: path.clone(),
                upstream: upstream.clone(),
                model: String::new(),
                open: true,
                warnings: 0,
                frames_sent: 0,
                frames_received: 0,
                entries: VecDeque::new(),
                mic_level: 0.0,
                model_level: 0.0,
                first_reply: None,
                tokens: 0,
                cost: None,
                send_delay: DelayLog::default(),
                recv_delay: DelayLog::default(),
            });
            if self.sessions.iter().filter(|s| s.open).count() == 1 {
                self.picked = self.sessions.len() - 1;
            }
            return;
        }
        let line = event.line();
        let Some(session) = self.session(event.conn) else {
            if let Some(line) = line {
                push_bounded(&mut self.notes, line, 20);
            }
            return;
        };
        let kind = match &event.kind {
            EventKind::Frame {
                dir,
                binary,
                bytes,
                kinds,
                delay_us,
                level,
            } => {
                let delay = Duration::from_micros(*delay_us);
                let arrow = match dir {
                    Direction::Send => {
                        session.frames_sent += 1;
                        session.send_delay.add(delay);
                        if let Some(level) = level {
                            session.mic_level = *level;
                        }
                        "app → server"
                    }
                    Direction::Recv => {
                        session.frames_received += 1;
                        session.recv_delay.add(delay);
                        if let Some(level) = level {
                            session.model_level = *level;
                        }
                        "server → app"
                    }
                };
                let text = format!(
                    "{arrow} {} {} B {} (+{} µs)",
                    if *binary { "binary" } else { "text" },
                    bytes,
                    if kinds.is_empty() {
                        "(unreadable)".to_owned()
                    } else {
                        kinds.join(", ")
                    },
                    delay_us
                );
                push_bounded(
                    &mut session.entries,
                    Entry {
                        t,
                        kind: EntryKind::Frame,
                        text,
                    },
                    LINES_KEPT,
                );
                return;
            }
            EventKind::SetUp { model } => {
                session.model = model.clone();
                EntryKind::Info
            }
            EventKind::UserText(_) => EntryKind::User,
            EventKind::Turn {
                first_reply,
                tokens,
                cost,
                ..
            } => {
                if first_reply.is_some() {
                    session.first_reply = *first_reply;
                }
                session.tokens = *tokens;
                session.cost = *cost;
                session.model_level = 0.0;
                EntryKind::Model
            }
            EventKind::ToolCall { .. } | EventKind::ToolAnswered { .. } => EntryKind::Tool,
            EventKind::Warning { .. } => {
                session.warnings += 1;
                EntryKind::Warning
            }
            EventKind::Closed { .. } => {
                session.open = false;
                EntryKind::Info
            }
            EventKind::Opened { .. }
            | EventKind::GoAway { .. }
            | EventKind::Notice(_)
            | EventKind::Dropped(_) => EntryKind::Info,
        };
        if let Some(line) = line {
            // "[N] " is the list's to say here.
            let prefix = format!("[{}] ", event.conn);
            for text in line.lines() {
                push_bounded(
                    &mut session.entries,
                    Entry {
                        t,
                        kind,
                        text: text.strip_prefix(&prefix).unwrap_or(text).to_owned(),
                    },
                    LINES_KEPT,
                );
            }
        }
    }

    /// A key: ↑/↓ (or k/j) pick a session, `f` shows the frames, q or Ctrl-C leaves.
    pub fn key(&mut self, code: KeyCode, modifiers: KeyModifiers) {
        match code {
            KeyCode::Up | KeyCode::Char('k') => self.picked = self.picked.saturating_sub(1),
            KeyCode::Down | KeyCode::Char('j') => {
                self.picked = (self.picked + 1).min(self.sessions.len().saturating_sub(1))
            }
            KeyCode::Char('f') => self.frames = !self.frames,
            KeyCode::Char('q') | KeyCode::Esc => self.quit = true,
            KeyCode::Char('c') if modifiers.contains(KeyModifiers::CONTROL) => self.quit = true,
            _ => {}
        }
    }
}

fn push_bounded<T>(list: &mut VecDeque<T>, item: T, max: usize) {
    if list.len() >= max {
        list.pop_front();
    }
    list.push_back(item);
}

/// Draws the view.
pub fn draw(frame: &mut Frame<'_>, view: &View) {
    // The header is wrapped here, not cut: its lines name the address and the certificate's
    // path, which a user copies, and the newest note must not fall below the box.
    let inner = usize::from(frame.area().width.saturating_sub(2));
    let head: Vec<Line> = view
        .header
        .iter()
        .chain(view.notes.iter().rev().take(1))
        .flat_map(|l| {
            let text = excerpt::one_line(l, 400);
            crate::ui::wrap::wrap(Vec::new(), &[(text, Style::default())], inner)
        })
        .collect();
    let rows = (head.len() as u16).min(frame.area().height / 2) + 2;
    let [header, body, footer] = Layout::vertical([
        Constraint::Length(rows),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    frame.render_widget(
        Paragraph::new(head).block(
            Block::default()
                .borders(Borders::ALL)
                .title(" livetalk proxy "),
        ),
        header,
    );
    let [list, detail] =
        Layout::horizontal([Constraint::Length(30), Constraint::Min(20)]).areas(body);
    draw_list(frame, view, list);
    draw_session(frame, view, detail);
    frame.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(" ↑/↓ ", Style::default().add_modifier(Modifier::REVERSED)),
            Span::raw(" pick a session  "),
            Span::styled(" f ", Style::default().add_modifier(Modifier::REVERSED)),
            Span::raw(if view.frames {
                " hide frames  "
            } else {
                " show frames  "
            }),
            Span::styled(" q ", Style::default().add_modifier(Modifier::REVERSED)),
            Span::raw(" quit (apps are cut off)"),
        ])),
        footer,
    );
}

fn draw_list(frame: &mut Frame<'_>, view: &View, area: Rect) {
    let items: Vec<ListItem> = view
        .sessions
        .iter()
        .map(|s| {
            let state = if s.open { "●" } else { "○" };
            let warn = if s.warnings > 0 {
                format!(" ⚠{}", s.warnings)
            } else {
                String::new()
            };
            let style = if s.warnings > 0 {
                Style::default().fg(Color::Yellow)
            } else {
                Style::default()
            };
            ListItem::new(Line::styled(
                format!(
                    "{state} [{}] {}{warn}",
                    s.conn,
                    excerpt::one_line(&s.peer, 22)
                ),
                style,
            ))
        })
        .collect();
    let mut state = ListState::default();
    if !view.sessions.is_empty() {
        state.select(Some(view.picked));
    }
    let list = List::new(items)
        .block(Block::default().borders(Borders::ALL).title(" sessions "))
        .highlight_style(Style::default().add_modifier(Modifier::REVERSED));
    frame.render_stateful_widget(list, area, &mut state);
}

fn draw_session(frame: &mut Frame<'_>, view: &View, area: Rect) {
    let Some(session) = view.sessions.get(view.picked) else {
        frame.render_widget(
            Paragraph::new("No app has connected yet. Point an app's base URL (or its WebSocket URL) at the address above.")
                .wrap(Wrap { trim: true })
                .block(Block::default().borders(Borders::ALL)),
            area,
        );
        return;
    };
    let send = session.send_delay.figures();
    let recv = session.recv_delay.figures();
    let mut lines = vec![
        Line::raw(excerpt::one_line(&session.path, 300)),
        Line::raw(format!(
            "model {}  upstream {}  {}",
            if session.model.is_empty() {
                "(not set up)"
            } else {
                &session.model
            },
            session.upstream,
            if session.open { "open" } else { "closed" }
        )),
        Line::raw(format!(
            "frames {} sent, {} received; added delay p50 {:.3} / p99 {:.3} ms (app → server), {:.3} / {:.3} ms (server → app)",
            session.frames_sent,
            session.frames_received,
            send.p50_us as f64 / 1e3,
            send.p99_us as f64 / 1e3,
            recv.p50_us as f64 / 1e3,
            recv.p99_us as f64 / 1e3,
        )),
        Line::raw(format!(
            "mic {} {:>3.0}%   model {} {:>3.0}%   first reply {}   {} tokens, {}",
            bar(session.mic_level),
            session.mic_level * 100.0,
            bar(session.model_level),
            session.model_level * 100.0,
            session
                .first_reply
                .map_or("—".to_owned(), |d| format!("{} ms", d.as_millis())),
            crate::pricing::tokens_words(session.tokens),
            crate::pricing::cost_words(session.cost),
        )),
        Line::raw(""),
    ];
    let shown: Vec<&Entry> = session
        .entries
        .iter()
        .filter(|e| view.frames || e.kind != EntryKind::Frame)
        .collect();
    let room = area.height.saturating_sub(2) as usize;
    let skip = shown.len().saturating_sub(room.saturating_sub(lines.len()));
    for entry in shown.into_iter().skip(skip) {
        let style = match entry.kind {
            EntryKind::Warning => Style::default()
                .fg(Color::Yellow)
                .add_modifier(Modifier::BOLD),
            EntryKind::User => Style::default().fg(Color::Cyan),
            EntryKind::Model => Style::default(),
            EntryKind::Tool => Style::default().fg(Color::Magenta),
            EntryKind::Frame => Style::default().fg(Color::DarkGray),
            EntryKind::Info => Style::default().fg(Color::Green),
        };
        lines.push(Line::styled(
            format!("{:>8.3}  {}", entry.t, excerpt::one_line(&entry.text, 2000)),
            style,
        ));
    }
    frame.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: false }).block(
            Block::default()
                .borders(Borders::ALL)
                .title(format!(" session [{}] ", session.conn)),
        ),
        area,
    );
}

/// A level meter, ten cells wide.
fn bar(level: f32) -> String {
    let filled = ((level.clamp(0.0, 1.0) * 10.0).round()) as usize;
    format!("{}{}", "█".repeat(filled), "·".repeat(10 - filled))
}

/// Runs the screen until the user leaves or a signal comes.
pub async fn run(
    mut events: mpsc::Receiver<ProxyEvent>,
    header: Vec<String>,
) -> anyhow::Result<u8> {
    if !crate::tui::terminal_available() {
        anyhow::bail!(
            "livetalk proxy's screen needs a terminal; run it with --headless (or --headless --json) to print the sessions instead"
        );
    }
    let guard = crate::tui::TerminalGuard::enter(None)?;
    let mut terminal = guard.terminal()?;
    let mut keys = EventStream::new();
    let mut view = View::new(header);
    let signal = super::stop_signal();
    tokio::pin!(signal);
    let mut redraw = tokio::time::interval(Duration::from_millis(50));
    let mut dirty = true;
    while !view.quit {
        tokio::select! {
            event = events.recv() => match event {
                Some(event) => {
                    view.apply(event);
                    dirty = true;
                }
                None => break,
            },
            key = keys.next() => match key {
                Some(Ok(Event::Key(key))) if key.kind != KeyEventKind::Release => {
                    view.key(key.code, key.modifiers);
                    dirty = true;
                }
                Some(Ok(_)) => dirty = true,
                Some(Err(_)) | None => break,
            },
            _ = redraw.tick() => {
                if dirty {
                    terminal.draw(|frame| draw(frame, &view)).map_err(io::Error::other)?;
                    dirty = false;
                }
            }
            _ = &mut signal => break,
        }
    }
    drop(terminal);
    drop(guard);
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::events::WarningKind;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    fn event(conn: u64, t: f64, kind: EventKind) -> ProxyEvent {
        ProxyEvent { conn, t, kind }
    }

    fn screen(view: &View) -> String {
        let mut terminal = Terminal::new(TestBackend::new(120, 30)).unwrap();
        terminal.draw(|frame| draw(frame, view)).unwrap();
        let buffer = terminal.backend().buffer();
        let mut text = String::new();
        for y in 0..buffer.area.height {
            for x in 0..buffer.area.width {
                text.push_str(buffer[(x, y)].symbol());
            }
            text.push('\n');
        }
        text
    }

    #[test]
    fn the_header_wraps_a_long_certificate_path_and_keeps_the_newest_note_in_view() {
        let path = format!(
            "/root/.local/share/livetalk/proxy-tls/127.0.0.1/{}cert.pem",
            "x/".repeat(40)
        );
        let mut view = View::new(vec![
            "livetalk proxy listening on 127.0.0.1:9100".into(),
            format!("livetalk proxy: made a self-signed certificate for 127.0.0.1: {path}"),
        ]);
        view.notes.push_back("the newest note".into());
        let shown: String = screen(&view).lines().collect();
        // The path's tail and the note both stand somewhere on the screen (wrapped, not cut).
        assert!(shown.contains("cert.pem"), "{shown}");
        assert!(shown.contains("the newest note"), "{shown}");
    }

    #[test]
    fn each_connection_is_a_session_to_pick_with_its_warnings_and_tool_answers() {
        let mut view = View::new(vec!["livetalk proxy listening on 127.0.0.1:9100".into()]);
        for conn in [1, 2] {
            view.apply(event(
                conn,
                0.1,
                EventKind::Opened {
                    peer: format!("127.0.0.1:5000{conn}").parse().unwrap(),
                    path: "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent?key=[redacted]".into(),
                    upstream: "the offline demo model".into(),
                    proxy_key: false,
                },
            ));
        }
        view.apply(event(
            2,
            1.0,
            EventKind::ToolAnswered {
                id: "c1".into(),
                name: "get_device_status".into(),
                after: Duration::from_millis(42),
            },
        ));
        view.apply(event(
            2,
            6.0,
            EventKind::Warning {
                kind: WarningKind::TurnStalled,
                message: "The model's turn has sent nothing for 5 s and has not completed.".into(),
            },
        ));
        view.apply(event(
            2,
            6.1,
            EventKind::Frame {
                dir: Direction::Recv,
                binary: true,
                bytes: 120,
                kinds: vec!["serverContent".into()],
                delay_us: 80,
                level: Some(0.5),
            },
        ));
        // The first session opened is picked; ↓ picks the second.
        assert!(screen(&view).contains("session [1]"));
        view.key(KeyCode::Down, KeyModifiers::NONE);
        let shown = screen(&view);
        assert!(shown.contains("session [2]"), "{shown}");
        assert!(shown.contains("get_device_status after 42 ms"), "{shown}");
        assert!(shown.contains("turn_stalled"), "{shown}");
        assert!(shown.contains("⚠1"), "{shown}");
        assert!(!shown.contains("binary 120 B"), "frames hidden by default");
        view.key(KeyCode::Char('f'), KeyModifiers::NONE);
        let shown = screen(&view);
        assert!(
            shown.contains("server → app binary 120 B serverContent"),
            "{shown}"
        );
        assert!(shown.contains("model █████·····  50%"), "{shown}");
        view.key(KeyCode::Char('q'), KeyModifiers::NONE);
        assert!(view.quit);
    }
}
