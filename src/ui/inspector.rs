//! The event inspector popup (F12): the session's frames as rows (time, direction, the Live
//! API message kind, size, a summary), the selected one marked, and under them, when asked,
//! its JSON.

use std::time::Instant;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};
use unicode_width::UnicodeWidthStr;

use super::{Theme, area, cut_spans};
use crate::app::{App, Area, Direction, Inspector, NoticeLevel, WireRow, frame_json};
use livetalk_live::excerpt;

/// Columns the message kind takes in a row at most (a third of a narrower row); a longer
/// one is cut.
const KIND_WIDTH: usize = 34;

/// Draws the inspector over the panes, between the status line and the footer (which stay
/// in sight); returns where it went.
pub fn draw(frame: &mut Frame, full: Rect, app: &App, theme: Theme, inspector: Inspector) -> Area {
    let rect = Rect {
        y: full.y + 1,
        height: full.height.saturating_sub(2),
        ..full
    };
    frame.render_widget(Clear, rect);
    let rows = app.inspector_rows();
    let selected = app.inspector_selected(&rows);
    let log = app.wire();
    let mut title = format!(
        " Events · {} · {} frames",
        inspector.filter.label(),
        log.frames().len()
    );
    if log.dropped() > 0 {
        title.push_str(&format!(" · {} dropped", log.dropped()));
    }
    title.push_str(if inspector.selected.is_none() {
        " · following "
    } else {
        " · End follows "
    });
    let block = Block::bordered()
        .title(title)
        .title_bottom(
            Line::from(" ↑/↓ select · Enter JSON · f filter · y copy · End newest · Esc closes ")
                .right_aligned(),
        )
        .border_style(theme.border(true));
    let mut inner = block.inner(rect);
    frame.render_widget(block, rect);
    // The inspector covers the notice line: the newest notice (a copy's, say) shows in its
    // last row instead.
    if let Some(notice) = app.visible_notice()
        && inner.height >= 4
    {
        inner.height -= 1;
        let row = Rect {
            y: inner.y + inner.height,
            height: 1,
            ..inner
        };
        let (symbol, style) = match notice.level {
            NoticeLevel::Error => ("✖ ", theme.error()),
            NoticeLevel::Warning => ("⚠ ", theme.warning()),
            NoticeLevel::Info => ("ℹ ", theme.bold()),
        };
        let spans = vec![Span::styled(format!("{symbol}{}", notice.text), style)];
        frame.render_widget(
            Paragraph::new(Line::from(cut_spans(spans, usize::from(row.width)))),
            row,
        );
    }
    let (list, json) = if inspector.expanded && inner.height >= 6 {
        let [list, json] =
            Layout::vertical([Constraint::Percentage(40), Constraint::Min(3)]).areas(inner);
        (list, Some(json))
    } else {
        (inner, None)
    };
    draw_rows(frame, list, app, theme, &rows, selected);
    if let Some(json) = json
        && let Some(row) = selected.and_then(|at| rows.get(at))
    {
        draw_json(frame, json, app, theme, row, inspector.scroll);
    }
    area(rect)
}

fn draw_rows(
    frame: &mut Frame,
    list: Rect,
    app: &App,
    theme: Theme,
    rows: &[WireRow],
    selected: Option<usize>,
) {
    let width = usize::from(list.width);
    if rows.is_empty() {
        let text = if app.wire().frames().is_empty() {
            "No frames yet."
        } else {
            "No frames of this kind yet: f shows another kind."
        };
        frame.render_widget(Paragraph::new(Line::styled(text, theme.dim())), list);
        return;
    }
    let height = usize::from(list.height).max(1);
    // The selection (or the newest) stays in view, at the bottom once the list is longer.
    let last = selected.unwrap_or(rows.len() - 1);
    let first = (last + 1).saturating_sub(height);
    let origin = app.wire().origin();
    let lines: Vec<Line> = rows[first..]
        .iter()
        .take(height)
        .enumerate()
        .map(|(i, row)| {
            // Marked in words too: without colour, reversed text is all there is.
            if Some(first + i) == selected {
                row_line("▶ ", row, origin, theme, width).style(theme.selected())
            } else {
                row_line("  ", row, origin, theme, width)
            }
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), list);
}

/// One row: `▶ mm:ss.mmm → kind  size  summary`, cut to `width`.
fn row_line(
    marker: &'static str,
    row: &WireRow,
    origin: Option<Instant>,
    theme: Theme,
    width: usize,
) -> Line<'static> {
    let since = origin.map(|o| row.at.saturating_duration_since(o));
    let millis = since.map_or(0, |d| d.as_millis());
    let time = format!(
        "{:02}:{:02}.{:03}",
        millis / 60_000,
        millis / 1000 % 60,
        millis % 1000
    );
    let (arrow, style) = match row.direction {
        Direction::Sent => ("→", theme.user()),
        Direction::Received => ("←", theme.model()),
    };
    let mut kind = row.kind.clone();
    if row.handshake {
        kind.push_str(" (setup)");
    }
    let kind_width = KIND_WIDTH.min(width / 3).max(8);
    let kind = if kind.width() > kind_width {
        let end = excerpt::floor_char_boundary(&kind, kind_width - 1);
        format!("{}…", &kind[..end])
    } else {
        format!("{kind:<kind_width$}")
    };
    let size = excerpt::human_size(row.bytes as u64);
    let spans = vec![
        Span::raw(marker),
        Span::styled(format!("{time} "), theme.dim()),
        Span::styled(format!("{arrow} "), style),
        Span::styled(kind, theme.bold()),
        Span::styled(format!(" {size:>9}  "), theme.dim()),
        Span::styled(row.summary.clone(), theme.plain()),
    ];
    Line::from(cut_spans(spans, width))
}

/// The selected frame's JSON under a rule that says what it is.
fn draw_json(frame: &mut Frame, rect: Rect, app: &App, theme: Theme, row: &WireRow, scroll: u16) {
    let Some(json) = app.wire().frames().get(row.first).map(frame_json) else {
        return;
    };
    let mut title = format!(" {} ", row.kind);
    if row.frames > 1 {
        title = format!(" {} · the first of {} frames ", row.kind, row.frames);
    }
    let block = Block::new()
        .borders(Borders::TOP)
        .title(title)
        .border_style(theme.border(false));
    let inner = block.inner(rect);
    frame.render_widget(block, rect);
    // A server can send megabytes in a frame: the screen shows a bounded part.
    let json = excerpt::into_bounded(json, excerpt::TEXT);
    let lines: Vec<Line> = json.lines().map(|l| Line::raw(l.to_owned())).collect();
    let max_scroll = u16::try_from(lines.len())
        .unwrap_or(u16::MAX)
        .saturating_sub(inner.height);
    frame.render_widget(
        Paragraph::new(lines).scroll((scroll.min(max_scroll), 0)),
        inner,
    );
}
