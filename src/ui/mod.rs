//! Drawing: a pure function of [`App`] state onto a ratatui frame. It reports where it put
//! each pane (for the mouse and scrolling) but changes nothing.

mod audio_panel;
mod devices;
mod session_panel;
mod theme;
mod tool_list;
mod tool_log;
mod transcript;
mod wrap;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Position, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Wrap};
use unicode_width::UnicodeWidthStr;

pub use theme::Theme;

use crate::app::{
    App, Area, ConnectionState, ERROR_PREFIX, Editor, EditorPurpose, Floor, Focus, KEY_MAP,
    NoticeLevel, Popup, ScreenLayout, ToolState, footer_keys,
};
use livetalk_live::excerpt;
use tool_log::format_duration;

/// Panes sit side by side from this width; below it they stack.
pub const WIDE_LAYOUT_MIN_WIDTH: u16 = 110;
/// Below this width the device panel is hidden (F2 still shows it, stacked).
const DEVICES_MIN_WIDTH: u16 = 70;

fn area(rect: Rect) -> Area {
    Area {
        x: rect.x,
        y: rect.y,
        width: rect.width,
        height: rect.height,
    }
}

/// Draws the whole screen and says where things went.
pub fn draw(frame: &mut Frame, app: &App) -> ScreenLayout {
    let theme = Theme::new(app.view().no_color);
    let full = frame.area();
    let notice_rows = notice_height(app, full.width);
    let [status, body, notice, input, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(4),
        Constraint::Length(notice_rows),
        Constraint::Length(3),
        Constraint::Length(1),
    ])
    .areas(full);

    draw_status(frame, status, app, theme);
    let mut layout = ScreenLayout {
        width: full.width,
        height: full.height,
        ..ScreenLayout::default()
    };
    let show_devices = app.view().show_devices && !app.devices().is_empty();
    if full.width >= WIDE_LAYOUT_MIN_WIDTH {
        let log_rows = (app.tool_calls().len() as u16 + 4)
            .clamp(6, 12)
            .min(body.height / 2);
        let [top, log] =
            Layout::vertical([Constraint::Min(4), Constraint::Length(log_rows)]).areas(body);
        let conversation = if show_devices {
            let [conversation, side] =
                Layout::horizontal([Constraint::Min(40), Constraint::Length(44)]).areas(top);
            let device_rows = app.devices().len() as u16 * 2 + 2;
            let [devices, session] =
                Layout::vertical([Constraint::Length(device_rows), Constraint::Min(0)]).areas(side);
            layout.devices = Some(area(devices::draw(frame, devices, app, theme)));
            if session.height >= 3 {
                session_panel::draw(frame, session, app, theme);
            }
            conversation
        } else {
            top
        };
        let (inner, rows) = transcript::draw(frame, conversation, app, theme);
        layout.transcript = area(inner);
        layout.transcript_rows = rows;
        layout.tool_log = area(tool_log::draw(frame, log, app, theme));
    } else {
        let strip_rows = 7.min(body.height / 2);
        let [conversation, strip] =
            Layout::vertical([Constraint::Min(3), Constraint::Length(strip_rows)]).areas(body);
        let (inner, rows) = transcript::draw(frame, conversation, app, theme);
        layout.transcript = area(inner);
        layout.transcript_rows = rows;
        let log = if show_devices && full.width >= DEVICES_MIN_WIDTH {
            let [log, devices] =
                Layout::horizontal([Constraint::Min(30), Constraint::Length(34)]).areas(strip);
            layout.devices = Some(area(devices::draw(frame, devices, app, theme)));
            log
        } else {
            strip
        };
        layout.tool_log = area(tool_log::draw(frame, log, app, theme));
    }
    draw_notice(frame, notice, app, theme);
    draw_input(frame, input, app, theme);
    draw_footer(frame, footer, theme);
    layout.popup = match app.view().popup {
        Some(Popup::Help { scroll }) => Some(draw_help(frame, full, app, theme, scroll)),
        Some(Popup::ToolDetail { index, scroll }) => {
            draw_tool_detail(frame, full, app, theme, index, scroll)
        }
        Some(Popup::Tools { selected }) => Some(tool_list::draw(frame, full, app, theme, selected)),
        Some(Popup::Audio { scroll }) => {
            let lines = audio_panel::detail_lines(app, theme);
            let width = 90.min(full.width.saturating_sub(2));
            let rect = centered(
                full,
                width,
                wrapped_rows(&lines, width.saturating_sub(2)) + 2,
            );
            Some(draw_popup(
                frame,
                rect,
                " Audio ".to_owned(),
                lines,
                scroll,
                theme,
            ))
        }
        None => None,
    };
    if let Some(editor) = &app.view().editor {
        layout.popup = Some(draw_editor(frame, full, app, theme, editor));
    }
    layout
}

const SPINNER: &[&str] = &["◐", "◓", "◑", "◒"];

fn draw_status(frame: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let spinner = SPINNER[(app.view().ticks as usize) % SPINNER.len()];
    let badge = match (&app.connection(), app.floor()) {
        (ConnectionState::Connecting, _) => {
            Span::styled(format!(" {spinner} Connecting… "), theme.pending_badge())
        }
        (ConnectionState::Disconnected { .. }, _) => {
            Span::styled(" ✖ Disconnected ", theme.error_badge())
        }
        (_, Floor::Speaking) => Span::styled(" ▶ Gemini is speaking… ", theme.speaking_badge()),
        // 3.8 Live: the turn is complete, the interaction is not.
        (_, Floor::Listening) if app.model_working() => Span::styled(
            format!(" {spinner} Gemini is working… "),
            theme.pending_badge(),
        ),
        (_, Floor::Listening) => Span::styled(" ● Gemini is listening… ", theme.listening_badge()),
    };
    let connection = match &app.connection() {
        ConnectionState::Connecting => "Connecting…".to_owned(),
        ConnectionState::Connected => "Connected".to_owned(),
        ConnectionState::Reconnecting => format!("{spinner} Reconnecting…"),
        ConnectionState::Disconnected { reason } => format!("Disconnected: {reason}"),
    };
    let mut spans = vec![badge, Span::raw("  ")];
    spans.extend(audio_panel::status_spans(app, theme));
    let connection_style = match app.connection() {
        ConnectionState::Disconnected { .. } => theme.error(),
        ConnectionState::Reconnecting => theme.warning(),
        _ => theme.status_bar(),
    };
    spans.push(Span::styled(connection, connection_style));
    spans.push(Span::styled(" · ", theme.status_bar()));
    spans.push(Span::styled(
        app.model().trim_start_matches("models/").to_owned(),
        theme.status_bar(),
    ));
    if app.offline() {
        spans.push(Span::styled(" · offline demo model", theme.status_bar()));
    }
    if let Some(recording) = &app.recording_label() {
        spans.push(Span::styled(" · ", theme.status_bar()));
        spans.push(Span::styled(format!("● {recording}"), theme.error()));
    }
    if app.total_tokens() > 0 {
        spans.push(Span::styled(
            format!(" · {} tokens", app.total_tokens()),
            theme.status_bar(),
        ));
    }
    frame.render_widget(
        Paragraph::new(Line::from(spans)).style(theme.status_bar()),
        area,
    );
}

fn notice_height(app: &App, width: u16) -> u16 {
    match app.visible_notice() {
        None => 0,
        Some(notice) => {
            let text = notice.text.width() + 30;
            if text > usize::from(width) { 2 } else { 1 }
        }
    }
}

fn draw_notice(frame: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let Some(notice) = app.visible_notice() else {
        return;
    };
    let (symbol, style) = match notice.level {
        NoticeLevel::Error => ("✖ ", theme.error()),
        NoticeLevel::Warning => ("⚠ ", theme.warning()),
        NoticeLevel::Info => ("ℹ ", theme.bold()),
    };
    let more = app.pending_notices().saturating_sub(1);
    let more = if more > 0 {
        format!(" (+{more} more)")
    } else {
        String::new()
    };
    let line = Line::from(vec![
        Span::styled(symbol, style),
        Span::styled(notice.text.clone(), style),
        Span::styled(format!("{more}  Esc dismisses"), theme.dim()),
    ]);
    frame.render_widget(Paragraph::new(line).wrap(Wrap { trim: true }), area);
}

fn draw_input(frame: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let focused = app.view().focus == Focus::Input && app.view().popup.is_none();
    let block = Block::bordered()
        .title(" Message ")
        .border_style(theme.border(focused));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let input = &app.view().input;
    if input.is_empty() {
        let hint = match app.connection() {
            ConnectionState::Connected if app.floor() == Floor::Speaking => {
                "Type to interrupt Gemini, Enter sends"
            }
            ConnectionState::Connected => "Type a message and press Enter",
            ConnectionState::Connecting | ConnectionState::Reconnecting => {
                "Type now; Enter sends once connected"
            }
            ConnectionState::Disconnected { .. } if app.can_retry() => {
                "The session has ended · Ctrl-R reconnects · Ctrl-C quits"
            }
            ConnectionState::Disconnected { .. } => "The session has ended · Ctrl-C quits",
        };
        frame.render_widget(Paragraph::new(Span::styled(hint, theme.dim())), inner);
        if focused {
            frame.set_cursor_position(Position::new(inner.x, inner.y));
        }
        return;
    }
    // Scroll horizontally so the cursor stays in view.
    let chars: Vec<char> = input.text().chars().collect();
    let width = usize::from(inner.width.saturating_sub(1)).max(1);
    let before_cursor: usize = chars[..input.cursor()]
        .iter()
        .map(|c| unicode_width::UnicodeWidthChar::width(*c).unwrap_or(0))
        .sum();
    let mut skip_cols = before_cursor.saturating_sub(width);
    let mut start = 0;
    while skip_cols > 0 && start < chars.len() {
        skip_cols = skip_cols
            .saturating_sub(unicode_width::UnicodeWidthChar::width(chars[start]).unwrap_or(0));
        start += 1;
    }
    let shown: String = chars[start..].iter().collect();
    let shown_before: usize = chars[start..input.cursor()]
        .iter()
        .map(|c| unicode_width::UnicodeWidthChar::width(*c).unwrap_or(0))
        .sum();
    frame.render_widget(Paragraph::new(shown), inner);
    if focused {
        let x = inner.x + (shown_before as u16).min(inner.width.saturating_sub(1));
        frame.set_cursor_position(Position::new(x, inner.y));
    }
}

fn draw_footer(frame: &mut Frame, area: Rect, theme: Theme) {
    let mut spans = Vec::new();
    let mut used = 0;
    for footer in footer_keys() {
        let (key, what) = (footer.key, footer.what);
        let item = format!(" {key} {what} ");
        if used + item.width() > usize::from(area.width) {
            break;
        }
        used += item.width();
        spans.push(Span::styled(format!(" {key}"), theme.bold()));
        spans.push(Span::styled(format!(" {what} "), theme.dim()));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// Rows `lines` take when wrapped at `width` columns.
fn wrapped_rows(lines: &[Line], width: u16) -> u16 {
    let width = usize::from(width.max(1));
    let rows: usize = lines.iter().map(|l| l.width().div_ceil(width).max(1)).sum();
    u16::try_from(rows).unwrap_or(u16::MAX)
}

/// A centred rectangle of at most `width` × `height` inside `area`.
fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let width = width.min(area.width.saturating_sub(2));
    let height = height.min(area.height.saturating_sub(2));
    Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    }
}

fn draw_popup(
    frame: &mut Frame,
    rect: Rect,
    title: String,
    lines: Vec<Line<'static>>,
    scroll: u16,
    theme: Theme,
) -> Area {
    frame.render_widget(Clear, rect);
    let block = Block::bordered()
        .title(title)
        .title_bottom(Line::from(" ↑/↓ scroll · Esc closes ").right_aligned())
        .border_style(theme.border(true));
    let inner = block.inner(rect);
    frame.render_widget(block, rect);
    let max_scroll = (lines.len() as u16).saturating_sub(inner.height);
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .scroll((scroll.min(max_scroll), 0)),
        inner,
    );
    area(rect)
}

/// The editor for a call's arguments or typed result: what it is for, the line with its
/// cursor, and why the last Enter was refused.
fn draw_editor(frame: &mut Frame, full: Rect, app: &App, theme: Theme, editor: &Editor) -> Area {
    let name = app
        .tool_calls()
        .get(editor.call)
        .map(|c| excerpt::bounded(&c.name, excerpt::SUMMARY).into_owned())
        .unwrap_or_default();
    let (title, help) = match editor.purpose {
        EditorPurpose::Arguments => (
            format!(" Edit the arguments of {name} "),
            "A JSON object; Enter runs the call with it.".to_owned(),
        ),
        EditorPurpose::Result => (
            format!(" Answer {name} by hand "),
            format!(
                "{{JSON object}} is sent as it is; {ERROR_PREFIX} why sends {{\"error\": why}}; other text sends {{\"result\": text}}."
            ),
        ),
    };
    let width = 90.min(full.width.saturating_sub(2));
    let inner_width = usize::from(width.saturating_sub(2)).max(1);
    // The line scrolls sideways so the cursor stays in view.
    let text: Vec<char> = editor.line.text().chars().collect();
    let cursor = editor.line.cursor().min(text.len());
    let first = (cursor + 1).saturating_sub(inner_width);
    let shown: String = text[first..].iter().take(inner_width).collect();
    let mut lines = vec![
        Line::styled(help, theme.dim()),
        Line::default(),
        Line::raw(shown),
        Line::default(),
    ];
    match &editor.problem {
        Some(problem) => lines.push(Line::styled(
            excerpt::bounded(problem, excerpt::SUMMARY).into_owned(),
            theme.error(),
        )),
        None => lines.push(Line::default()),
    }
    let height = wrapped_rows(&lines, width.saturating_sub(2)) + 2;
    let rect = centered(full, width, height);
    frame.render_widget(Clear, rect);
    let block = Block::bordered()
        .title(title)
        .title_bottom(Line::from(" Enter sends · Esc cancels ").right_aligned())
        .border_style(theme.border(true));
    let inner = block.inner(rect);
    frame.render_widget(block, rect);
    let help_rows = wrapped_rows(&lines[..1], inner.width);
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), inner);
    let x = inner.x + u16::try_from(cursor - first).unwrap_or(0);
    let y = inner.y + help_rows + 1;
    if x < inner.x + inner.width && y < inner.y + inner.height {
        frame.set_cursor_position((x, y));
    }
    area(rect)
}

fn draw_help(frame: &mut Frame, full: Rect, app: &App, theme: Theme, scroll: u16) -> Area {
    let width = 96.min(full.width.saturating_sub(2));
    let inner_width = usize::from(width.saturating_sub(2));
    // The log file first: on a short screen it stays in view without scrolling.
    let mut lines = vec![Line::default()];
    let log = app
        .view()
        .log_path
        .as_deref()
        .unwrap_or("off (no writable data directory)");
    let prefix = vec![Span::styled(format!("  {:<22}", "Log file"), theme.bold())];
    lines.extend(wrap::wrap(
        prefix,
        &[(log.to_owned(), theme.plain())],
        inner_width,
    ));
    lines.push(Line::default());
    for row in KEY_MAP {
        let prefix = vec![Span::styled(format!("  {:<22}", row.keys), theme.bold())];
        lines.extend(wrap::wrap(
            prefix,
            &[(row.help.to_owned(), theme.plain())],
            inner_width,
        ));
    }
    let rect = centered(
        full,
        width,
        wrapped_rows(&lines, width.saturating_sub(2)) + 2,
    );
    draw_popup(frame, rect, " Help ".to_owned(), lines, scroll, theme)
}

fn draw_tool_detail(
    frame: &mut Frame,
    full: Rect,
    app: &App,
    theme: Theme,
    index: usize,
    scroll: u16,
) -> Option<Area> {
    let call = app.tool_calls().get(index)?;
    // The popup holds more than a row, but not everything a server can send: the recording
    // has that.
    let pretty = |v: &serde_json::Value| {
        let text = serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string());
        excerpt::into_bounded(text, excerpt::TEXT)
    };
    let mut lines = Vec::new();
    let mut summary = vec![
        Span::styled(
            call.state.label().to_owned(),
            tool_log::state_style(theme, &call.state),
        ),
        Span::raw(format!(
            "  started {}",
            call.started_at.strftime("%H:%M:%S")
        )),
    ];
    if let Some(d) = call.duration {
        summary.push(Span::raw(format!("  took {}", format_duration(d))));
    }
    lines.push(Line::from(summary));
    if let Some(id) = &call.id {
        lines.push(Line::from(vec![
            Span::styled("Call id ", theme.dim()),
            Span::raw(excerpt::bounded(id, excerpt::SUMMARY).into_owned()),
        ]));
    }
    if let ToolState::Error(message) | ToolState::Refused(message) = &call.state {
        lines.push(Line::styled(
            excerpt::bounded(message, excerpt::TEXT).into_owned(),
            theme.error(),
        ));
    }
    lines.push(Line::default());
    lines.push(Line::styled("Arguments", theme.bold()));
    lines.extend(pretty(&call.args).lines().map(|l| Line::raw(l.to_owned())));
    if let Some(sent) = &call.edited_from {
        lines.push(Line::styled(
            "Edited by you; the model sent these:",
            theme.warning(),
        ));
        lines.extend(pretty(sent).lines().map(|l| Line::raw(l.to_owned())));
    }
    lines.push(Line::default());
    match (&call.response, &call.state) {
        (Some(response), _) => {
            lines.push(Line::styled(
                "Response sent (the functionResponses entry)",
                theme.bold(),
            ));
            let json = serde_json::to_value(response).unwrap_or_default();
            lines.extend(pretty(&json).lines().map(|l| Line::raw(l.to_owned())));
            if call.truncated {
                lines.push(Line::styled(
                    "The result was truncated to the configured size limit before sending.",
                    theme.warning(),
                ));
            }
        }
        (None, ToolState::Cancelled) => lines.push(Line::styled(
            "The server cancelled this call; no response was sent (none may be).",
            theme.warning(),
        )),
        (None, ToolState::Waiting) => lines.push(Line::styled(
            "Waits for you: a approves, d denies, e edits the arguments, r types the result.",
            theme.warning(),
        )),
        (None, _) => lines.push(Line::styled("Running; no response yet.", theme.running())),
    }
    let width = (full.width * 4 / 5)
        .max(60)
        .min(full.width.saturating_sub(2));
    let height = (wrapped_rows(&lines, width.saturating_sub(2)) + 2)
        .min(full.height * 4 / 5)
        .max(8);
    let rect = centered(full, width, height);
    Some(draw_popup(
        frame,
        rect,
        format!(
            " Tool call · {} ",
            excerpt::bounded(&call.name, excerpt::SUMMARY)
        ),
        lines,
        scroll,
        theme,
    ))
}

#[cfg(test)]
mod tests;
