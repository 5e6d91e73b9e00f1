//! The session facts panel beside the devices on wide screens: where the session goes, with
//! which model and voice, and how much has happened.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};

use super::Theme;
use super::wrap::truncate;
use crate::app::{App, Entry};
use livetalk_live::wire::OUTPUT_SAMPLE_RATE;

pub fn draw(frame: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let block = Block::bordered()
        .title(" Session ")
        .border_style(theme.border(false));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let turns = app
        .transcript()
        .iter()
        .filter(|e| matches!(e, Entry::User { .. }))
        .count();
    let speech_secs = app.model_audio_bytes() as f64 / 2.0 / f64::from(OUTPUT_SAMPLE_RATE);
    let mut rows = vec![
        (
            "Model",
            app.model().trim_start_matches("models/").to_owned(),
        ),
        ("Endpoint", app.endpoint_label().to_owned()),
        ("Voice", app.voice().to_owned()),
        ("Turns", turns.to_string()),
        ("Tool calls", app.tool_calls().len().to_string()),
        ("Model audio", format!("{speech_secs:.1} s")),
    ];
    if app.total_tokens() > 0 {
        rows.push(("Tokens", app.total_tokens().to_string()));
    }
    for (label, info) in [
        ("Mic", &app.audio().input),
        ("Speaker", &app.audio().output),
    ] {
        if let Some(info) = info {
            rows.push((label, format!("{} · {}", info.path, info.name)));
        }
    }
    let value_width = usize::from(inner.width).saturating_sub(13);
    let lines: Vec<Line> = rows
        .into_iter()
        .filter(|(_, value)| !value.is_empty())
        .map(|(label, value)| {
            Line::from(vec![
                Span::styled(format!(" {label:<11} "), theme.dim()),
                Span::raw(truncate(&value, value_width)),
            ])
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), inner);
}
