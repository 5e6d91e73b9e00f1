//! The session panel beside the devices on wide screens: how long replies take (the last
//! turn, and a sparkline of the last 20), interruptions, the session's health and what it
//! costs so far; the model and voice last, as room allows. Below 110 columns the status line
//! carries the last turn and the cost instead ([`status_figures`]).

use std::time::Duration;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Sparkline};

use super::Theme;
use super::wrap::truncate;
use crate::app::turn_timing::{TurnTiming, millis};
use crate::app::{App, ConnectionState, TURNS_KEPT};
use crate::pricing::{cost_words, tokens_words};

/// Columns of the labels, their padding included.
const LABEL: usize = 13;

pub fn draw(frame: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let block = Block::bordered()
        .title(" Session ")
        .border_style(theme.border(false));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let value_width = usize::from(inner.width).saturating_sub(LABEL);
    let rows = rows(app);
    let spark_row = rows.iter().position(|(label, _)| *label == "Last 20");
    let lines: Vec<Line> = rows
        .into_iter()
        .map(|(label, value)| {
            Line::from(vec![
                Span::styled(format!(" {label:<11} "), theme.dim()),
                Span::raw(truncate(&value, value_width)),
            ])
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), inner);
    if let Some(row) = spark_row.and_then(|r| u16::try_from(r).ok())
        && row < inner.height
        && value_width > 0
    {
        let waits: Vec<u64> = app
            .figures()
            .turns()
            .turns()
            .map(|turn| millis(turn.wait()).unwrap_or(0))
            .collect();
        let width = u16::try_from(value_width.min(TURNS_KEPT)).unwrap_or(0);
        let spark = Rect::new(inner.x + LABEL as u16, inner.y + row, width, 1);
        frame.render_widget(Sparkline::default().data(&waits).style(theme.ok()), spark);
    }
}

/// The panel's rows, most wanted first: what does not fit is cut off at the bottom.
fn rows(app: &App) -> Vec<(&'static str, String)> {
    let figures = app.figures();
    let mut rows = Vec::new();
    match figures.turns().last() {
        Some(turn) => {
            rows.push((
                "Last turn",
                format!("first reply {}", figure(turn.first_message)),
            ));
            rows.push(("", format!("first audio {}", figure(turn.first_audio))));
            rows.push(("Heard after", heard(turn)));
        }
        None => rows.push(("Last turn", "no turn yet".to_owned())),
    }
    if figures.turns().turns().len() > 1 {
        // Drawn over by the sparkline.
        rows.push(("Last 20", String::new()));
    }
    rows.push((
        "Barge-ins",
        format!(
            "{} by you · {} echo",
            app.user_barge_ins(),
            app.echo_interruptions()
        ),
    ));
    rows.push(("Connection", connection(app)));
    if let Some(age) = figures.handle_age() {
        rows.push(("Handle", format!("{} old", age_words(age))));
    }
    if let Some(context) = context(app) {
        rows.push(("Context", context));
    }
    rows.push(("Tokens", tokens(app)));
    let parts = app.tokens().by_modality_words();
    if !parts.is_empty() {
        // The parts of the total just above.
        rows.push(("", parts));
    }
    rows.push(("Cost", cost(app)));
    rows.push((
        "Model",
        app.model().trim_start_matches("models/").to_owned(),
    ));
    if !app.voice().is_empty() {
        rows.push(("Voice", app.voice().to_owned()));
    }
    rows
}

/// A figure as it is read: "480 ms", "12.4 s", or "—" where none was reached.
pub fn figure(value: Option<Duration>) -> String {
    match value {
        None => "—".to_owned(),
        Some(d) if d < Duration::from_secs(10) => format!("{} ms", d.as_millis()),
        Some(d) => format!("{:.1} s", d.as_secs_f64()),
    }
}

fn heard(turn: &TurnTiming) -> String {
    let underruns = match turn.underruns {
        0 => "no underrun".to_owned(),
        1 => "1 underrun".to_owned(),
        n => format!("{n} underruns"),
    };
    format!("{} · {underruns}", figure(turn.first_audible))
}

/// A span as the panel says it: "42 s", "3 min 5 s", "1 h 2 min".
pub fn age_words(age: Duration) -> String {
    let secs = age.as_secs();
    match secs {
        0..60 => format!("{secs} s"),
        60..3600 => format!("{} min {} s", secs / 60, secs % 60),
        _ => format!("{} h {} min", secs / 3600, secs / 60 % 60),
    }
}

fn connection(app: &App) -> String {
    let figures = app.figures();
    let mut words = match (app.connection(), figures.connection_age()) {
        (ConnectionState::Connected, Some(age)) => format!("up {}", age_words(age)),
        (ConnectionState::Connected, None) => "up".to_owned(),
        (ConnectionState::Connecting, _) => "connecting".to_owned(),
        (ConnectionState::Reconnecting, _) => "reconnecting".to_owned(),
        (ConnectionState::Disconnected { .. }, _) if app.ended_cleanly() => "ended".to_owned(),
        (ConnectionState::Disconnected { .. }, _) => "lost".to_owned(),
    };
    match figures.go_away_left() {
        Some(Some(left)) => words.push_str(&format!(" · goAway {}", age_words(left))),
        Some(None) => words.push_str(" · goAway"),
        None => {}
    }
    match app.reconnects() {
        0 => {}
        1 => words.push_str(" · 1 reconnect"),
        n => words.push_str(&format!(" · {n} reconnects")),
    }
    match app.handovers() {
        0 => {}
        1 => words.push_str(" · 1 hand-over"),
        n => words.push_str(&format!(" · {n} hand-overs")),
    }
    words
}

/// A count of tokens in a few characters: "950", "12.3k", "1.2M".
pub fn count_words(n: u64) -> String {
    match n {
        0..1000 => n.to_string(),
        1000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

fn context(app: &App) -> Option<String> {
    let held = match app.figures().context() {
        (Some(held), Some(trigger)) => {
            format!("{} / {} tokens", count_words(held), count_words(trigger))
        }
        (Some(held), None) => format!("{} tokens", count_words(held)),
        (None, _) => return None,
    };
    // What the screen and pictures take of it, from the service's per-modality counts.
    Some(match app.figures().video_share() {
        Some(share) => format!("{held}, {share:.0}% video"),
        None => held,
    })
}

/// The session's total, the one the status line, `inspect` and the headless summary give.
fn tokens(app: &App) -> String {
    tokens_words(app.tokens().total())
}

/// "≈ $0.012 so far", or "not priced".
pub fn cost(app: &App) -> String {
    match app.cost() {
        Some(cost) => format!("{} so far", cost_words(Some(cost))),
        None => cost_words(None),
    }
}

/// The status line's share below 110 columns: the last turn's wait, and the cost where there
/// is one.
pub fn status_figures(app: &App) -> Option<String> {
    let wait = app.figures().turns().last().map(|turn| turn.wait());
    let cost = app.cost().map(|cost| cost_words(Some(cost)));
    match (wait, cost) {
        (None, None) => None,
        (Some(wait), None) => Some(format!("⏱ {}", figure(wait))),
        (None, Some(cost)) => Some(cost),
        (Some(wait), Some(cost)) => Some(format!("⏱ {} · {cost}", figure(wait))),
    }
}
