//! The smart-home panel: each device's live state (lamp colour as a swatch), with a brief
//! highlight when a tool changes it — the payoff of a tool-call demo.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};

use super::Theme;
use super::wrap::truncate;
use crate::app::{App, Focus};
use crate::tools::{Device, DeviceKind};
use unicode_width::UnicodeWidthStr;

/// The state of one device as spans: `● on  ██ blue  80%`, `idle  20.0 °C`, `locked`.
fn state_spans(device: &Device, theme: Theme) -> Vec<Span<'static>> {
    let mut spans = Vec::new();
    match device.kind {
        DeviceKind::Light => {
            let on = device.status == "on";
            let (symbol, style) = if on {
                ("●", theme.ok().add_modifier(Modifier::BOLD))
            } else {
                ("○", theme.dim())
            };
            spans.push(Span::styled(
                format!("{symbol} {}", device.status.to_uppercase()),
                style,
            ));
            if let Some(color) = &device.color {
                spans.push(Span::raw("  "));
                let swatch_style = match theme.swatch(color) {
                    Some(c) => Style::new().fg(c),
                    None => Style::new(),
                };
                // A dim swatch when off: the lamp keeps its colour but isn't lit.
                let swatch_style = if on {
                    swatch_style
                } else {
                    swatch_style.add_modifier(Modifier::DIM)
                };
                spans.push(Span::styled("██", swatch_style));
                spans.push(Span::raw(format!(" {color}")));
            }
            if let Some(brightness) = device.brightness {
                spans.push(Span::raw(format!("  {brightness}%")));
            }
        }
        DeviceKind::Thermostat => {
            spans.push(Span::styled(device.status.clone(), theme.bold()));
            if let Some(t) = device.temperature_celsius {
                spans.push(Span::raw(format!("  {t:.1} °C")));
            }
        }
        DeviceKind::Lock => {
            let symbol = if device.status == "locked" {
                "▣"
            } else {
                "□"
            };
            spans.push(Span::styled(
                format!("{symbol} {}", device.status),
                theme.bold(),
            ));
        }
    }
    spans
}

/// The fewest letters of a device's name the one-line form keeps.
const MIN_NAME: usize = 8;

/// The state without the colour's name (the swatch shows it).
fn state_spans_short(device: &Device, theme: Theme) -> Vec<Span<'static>> {
    let mut spans = state_spans(device, theme);
    if let Some(color) = &device.color {
        let named = format!(" {color}");
        spans.retain(|s| s.content != named);
    }
    spans
}

pub fn draw(frame: &mut Frame, area: Rect, app: &App, theme: Theme) -> Rect {
    let focused = app.view().focus == Focus::Devices;
    let block = Block::bordered()
        .title(" Devices ")
        .border_style(theme.border(focused));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let width = usize::from(inner.width);
    // Two lines per device when there is room, else one.
    let roomy = usize::from(inner.height) >= app.devices().len() * 2;
    let name_width = app
        .devices()
        .iter()
        .map(|d| d.name.chars().count())
        .max()
        .unwrap_or(0)
        .min(width / 2);
    // On one line, the state is what the panel is for: the names give it room, down to a few
    // letters, and then a colour's name goes (its swatch stays). Names share one width.
    let spans_width = |state: &[Span]| state.iter().map(|s| s.content.width()).sum::<usize>();
    let room = |state: &[Span]| width.saturating_sub(2 + 1 + spans_width(state));
    let states: Vec<Vec<Span<'static>>> = app
        .devices()
        .iter()
        .map(|device| {
            let state = state_spans(device, theme);
            if !roomy && room(&state) < MIN_NAME && device.color.is_some() {
                state_spans_short(device, theme)
            } else {
                state
            }
        })
        .collect();
    let name_width = states
        .iter()
        .map(|state| room(state))
        .min()
        .unwrap_or(width)
        .min(name_width)
        .max(MIN_NAME.min(width));
    let mut lines = Vec::new();
    for (i, (device, state)) in app.devices().iter().zip(states).enumerate() {
        let changed = app.view().is_highlighted(i);
        let marker = if changed { "✦ " } else { "  " };
        let name_style = if changed {
            theme.highlight()
        } else {
            theme.bold()
        };
        if roomy {
            lines.push(Line::from(vec![
                Span::styled(marker, theme.warning()),
                Span::styled(truncate(&device.name, width.saturating_sub(2)), name_style),
            ]));
            let mut detail = vec![Span::raw("    ")];
            detail.extend(state);
            lines.push(Line::from(detail));
        } else {
            let name = truncate(&device.name, name_width);
            let pad = name_width.saturating_sub(name.width());
            let mut line = vec![
                Span::styled(marker, theme.warning()),
                Span::styled(name, name_style),
                Span::raw(" ".repeat(pad + 1)),
            ];
            line.extend(state);
            lines.push(Line::from(line));
        }
    }
    frame.render_widget(Paragraph::new(lines), inner);
    inner
}
