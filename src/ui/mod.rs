//! Drawing: a pure function of [`App`] state onto a ratatui frame. It reports where it put
//! each pane (for the mouse and scrolling) but changes nothing.

mod audio_panel;
mod devices;
mod inspector;
mod links;
mod preview;
mod session_panel;
mod theme;
mod tool_list;
mod tool_log;
mod transcript;
pub(crate) mod wrap;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Position, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Wrap};
use unicode_width::UnicodeWidthStr;

pub use preview::{HALF_BLOCK_CELL, Pictures};
pub use theme::Theme;

use crate::app::{
    App, Area, Badge, ConnectionState, ERROR_PREFIX, Editor, EditorPurpose, Floor, Focus,
    NoticeLevel, Popup, ScreenLayout, ToolState, footer_keys, help_rows,
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

/// Below this size the screen says it is too small rather than drawing panes with no room.
pub const MIN_WIDTH: u16 = 30;
pub const MIN_HEIGHT: u16 = 8;
/// Below this many rows for the panes, the tool log gives its room to the conversation.
const TOOL_LOG_MIN_BODY: u16 = 12;
/// A notice takes at most this many rows; the rest of a longer one is cut at a word, with "…".
const NOTICE_MAX_ROWS: u16 = 4;

/// Draws the whole screen and says where things went, with no preview pane.
pub fn draw(frame: &mut Frame, app: &App) -> ScreenLayout {
    draw_with(frame, app, &mut Pictures::off())
}

/// Draws the whole screen, the preview pane's picture in the graphics of `pictures` (which
/// keeps it encoded between frames), and says where things went.
pub fn draw_with(frame: &mut Frame, app: &App, pictures: &mut Pictures) -> ScreenLayout {
    let theme = Theme::new(app.view().no_color).with_links(app.view().hyperlinks);
    let full = frame.area();
    let mut layout = ScreenLayout {
        width: full.width,
        height: full.height,
        ..ScreenLayout::default()
    };
    if full.width < MIN_WIDTH || full.height < MIN_HEIGHT {
        pictures.hide();
        draw_too_small(frame, full, theme);
        return layout;
    }
    // What must stay: the status line, the input and three rows of conversation. Then, in
    // order, a notice's first row, the footer, the rest of the notice.
    let mut spare = full.height - 1 - 3 - 3;
    let notice_lines = notice_lines(app, theme, full.width);
    let wanted = u16::try_from(notice_lines.len()).unwrap_or(u16::MAX);
    let mut notice_rows = wanted.min(1).min(spare);
    spare -= notice_rows;
    let footer_rows = 1.min(spare);
    spare -= footer_rows;
    let more = wanted
        .saturating_sub(notice_rows)
        .min(NOTICE_MAX_ROWS - 1)
        .min(spare / 2);
    notice_rows += more;
    let [status, body, notice, input, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(notice_rows),
        Constraint::Length(3),
        Constraint::Length(footer_rows),
    ])
    .areas(full);

    draw_status(frame, status, app, theme);
    let show_devices = app.view().show_devices && !app.devices().is_empty();
    if body.height < TOOL_LOG_MIN_BODY {
        let conversation = preview::beside(frame, body, app, theme, pictures);
        let (inner, rows) = transcript::draw(frame, conversation, app, theme);
        layout.transcript = area(inner);
        layout.transcript_rows = rows;
    } else if full.width >= WIDE_LAYOUT_MIN_WIDTH {
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
                layout.session = Some(area(session));
            }
            conversation
        } else {
            top
        };
        let conversation = preview::beside(frame, conversation, app, theme, pictures);
        let (inner, rows) = transcript::draw(frame, conversation, app, theme);
        layout.transcript = area(inner);
        layout.transcript_rows = rows;
        layout.tool_log = area(tool_log::draw(frame, log, app, theme));
    } else {
        let strip_rows = 7.min(body.height / 2);
        let [conversation, strip] =
            Layout::vertical([Constraint::Min(3), Constraint::Length(strip_rows)]).areas(body);
        let conversation = preview::beside(frame, conversation, app, theme, pictures);
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
    draw_notice(frame, notice, notice_lines);
    draw_input(frame, input, app, theme);
    draw_footer(frame, footer, app, theme);
    layout.popup = match app.view().popup {
        Some(Popup::Help { scroll }) => Some(draw_help(frame, full, app, theme, scroll)),
        Some(Popup::ToolDetail { index, scroll }) => {
            draw_tool_detail(frame, full, app, theme, index, scroll)
        }
        Some(Popup::Tools { selected }) => Some(tool_list::draw(frame, full, app, theme, selected)),
        Some(Popup::Inspector(view)) => Some(inspector::draw(frame, full, app, theme, view)),
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

/// The whole screen, when it is too small for the panes: what it is and what is needed.
fn draw_too_small(frame: &mut Frame, full: Rect, theme: Theme) {
    let text = format!(
        "The terminal is too small ({}×{}): livetalk needs at least {MIN_WIDTH}×{MIN_HEIGHT}. Ctrl-C quits.",
        full.width, full.height
    );
    let lines = wrap::wrap(
        Vec::new(),
        &[(text, theme.warning())],
        usize::from(full.width),
    );
    frame.render_widget(Paragraph::new(lines), full);
}

const SPINNER: &[&str] = &["◐", "◓", "◑", "◒"];

/// A part of the status line: its forms from the fullest to the shortest, and its rank
/// (higher ranks give way first when the line is too narrow).
struct Segment {
    rank: u8,
    forms: Vec<Vec<Span<'static>>>,
}

fn spans_width(spans: &[Span]) -> usize {
    spans.iter().map(|s| s.content.width()).sum()
}

/// The segments that fit `width`: the least important shorten, then go; what is left is cut at
/// a word, never inside one, with "…".
fn fit_segments(mut segments: Vec<Segment>, width: usize) -> Vec<Span<'static>> {
    let mut chosen: Vec<Option<usize>> = vec![Some(0); segments.len()];
    let total = |segments: &[Segment], chosen: &[Option<usize>]| -> usize {
        segments
            .iter()
            .zip(chosen)
            .filter_map(|(s, c)| c.map(|c| spans_width(&s.forms[c])))
            .sum()
    };
    while total(&segments, &chosen) > width {
        // The present segment of the highest rank, the first one never.
        let Some(at) = (1..segments.len())
            .filter(|&i| chosen[i].is_some())
            .max_by_key(|&i| (segments[i].rank, i))
        else {
            break;
        };
        chosen[at] = chosen[at]
            .map(|c| c + 1)
            .filter(|&c| c < segments[at].forms.len());
    }
    // What gave way early may fit again beside what shortened later: the most important
    // first, in their fullest form that fits.
    let mut order: Vec<usize> = (1..segments.len()).collect();
    order.sort_by_key(|&i| segments[i].rank);
    for i in order {
        let best = chosen[i].unwrap_or(segments[i].forms.len());
        for form in 0..best {
            let mut tried = chosen.clone();
            tried[i] = Some(form);
            if total(&segments, &tried) <= width {
                chosen = tried;
                break;
            }
        }
    }
    let mut spans = Vec::new();
    let mut first = true;
    for (segment, choice) in segments.iter_mut().zip(&chosen) {
        if let Some(c) = choice {
            let mut form = std::mem::take(&mut segment.forms[*c]);
            // Right after the badge, a separator separates nothing.
            if spans.len() == 2
                && !first
                && let Some(lead) = form.first_mut()
                && let Some(rest) = lead.content.strip_prefix(" · ")
            {
                lead.content = rest.to_owned().into();
            }
            first = false;
            spans.append(&mut form);
        }
    }
    cut_spans(spans, width)
}

/// Spans cut to `width` columns at a word, ending with "…" when cut.
fn cut_spans(spans: Vec<Span<'static>>, width: usize) -> Vec<Span<'static>> {
    if spans_width(&spans) <= width {
        return spans;
    }
    let mut out = Vec::new();
    let mut used = 0;
    for span in spans {
        let w = span.content.width();
        if used + w < width {
            used += w;
            out.push(span);
            continue;
        }
        let cut = wrap::cut_at_word(&span.content, width.saturating_sub(used));
        out.push(Span::styled(cut, span.style));
        break;
    }
    out
}

fn draw_status(frame: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let spinner = SPINNER[(app.view().ticks as usize) % SPINNER.len()];
    let badge = app.badge();
    let (symbol, style) = match badge {
        Badge::Connecting | Badge::Thinking | Badge::Working | Badge::Reconnecting => {
            (spinner, theme.pending_badge())
        }
        Badge::Disconnected => ("✖", theme.error_badge()),
        Badge::Ended => ("■", theme.pending_badge()),
        Badge::Speaking => ("▶", theme.speaking_badge()),
        Badge::Listening => ("●", theme.listening_badge()),
    };
    let plain = |text: String| Span::styled(text, theme.status_bar());
    let mut segments = vec![Segment {
        rank: 0,
        forms: vec![vec![
            Span::styled(format!(" {symbol} {} ", badge.label()), style),
            plain("  ".to_owned()),
        ]],
    }];
    let audio = audio_panel::status_spans(app, theme);
    if !audio.is_empty() {
        segments.push(Segment {
            rank: 3,
            forms: vec![audio],
        });
    }
    // The badge says connecting, reconnecting and ended; a lost session says why here.
    match app.connection() {
        ConnectionState::Connected => segments.push(Segment {
            rank: 9,
            forms: vec![vec![plain("Connected · ".to_owned())]],
        }),
        ConnectionState::Disconnected { reason } if !app.ended_cleanly() => {
            segments.push(Segment {
                rank: 1,
                forms: vec![vec![
                    Span::styled(format!("Disconnected: {reason}"), theme.error()),
                    plain(" · ".to_owned()),
                ]],
            })
        }
        _ => {}
    }
    segments.push(Segment {
        rank: 5,
        forms: vec![vec![plain(
            app.model().trim_start_matches("models/").to_owned(),
        )]],
    });
    if app.offline() {
        segments.push(Segment {
            rank: 6,
            forms: vec![
                vec![plain(" · offline demo model".to_owned())],
                vec![plain(" · offline".to_owned())],
            ],
        });
    }
    if let Some(recording) = &app.recording_label() {
        // "● REC bug-1234" (the folder's name; the way out prints the whole path), else "● REC";
        // a replay's progress, else its count alone.
        let mut forms = vec![vec![
            plain(" · ".to_owned()),
            Span::styled(format!("● {recording}"), theme.error()),
        ]];
        let short = if app.is_replay() {
            recording.split(" (").next().unwrap_or_default()
        } else {
            "REC"
        };
        if short != recording {
            forms.push(vec![
                plain(" · ".to_owned()),
                Span::styled(format!("● {short}"), theme.error()),
            ]);
        }
        segments.push(Segment { rank: 4, forms });
    }
    // What the model is shown: "sharing screen" (or video), with frames and bytes a second.
    if let Some(sharing) = app.sharing() {
        let head = format!(" · ◉ sharing {}", sharing.kind());
        let mut forms = Vec::new();
        if let Some((frames, bytes)) = sharing.rates() {
            forms.push(vec![Span::styled(
                format!(
                    "{head} ({frames:.1} frames/s, {}/s)",
                    livetalk_live::excerpt::human_size(bytes as u64)
                ),
                theme.bold(),
            )]);
        }
        forms.push(vec![Span::styled(head, theme.bold())]);
        segments.push(Segment { rank: 3, forms });
    }
    // Where the session panel is not drawn, the last turn's wait and the cost are said here.
    let panel_shown =
        area.width >= WIDE_LAYOUT_MIN_WIDTH && app.view().show_devices && !app.devices().is_empty();
    // The latency is what the line is for on a small screen: only the badge and a lost
    // connection's reason come before it; the cost beside it gives way first.
    if !panel_shown && let Some(figures) = session_panel::status_figures(app) {
        let mut forms = vec![vec![plain(format!(" · {figures}"))]];
        if let Some((wait, _cost)) = figures.split_once(" · ") {
            forms.push(vec![plain(format!(" · {wait}"))]);
        }
        segments.push(Segment { rank: 2, forms });
    }
    if app.tokens().total() > 0 {
        segments.push(Segment {
            rank: 7,
            forms: vec![vec![plain(format!(
                " · {} tokens",
                crate::pricing::tokens_words(app.tokens().total())
            ))]],
        });
    }
    let spans = fit_segments(segments, usize::from(area.width));
    frame.render_widget(
        Paragraph::new(Line::from(spans)).style(theme.status_bar()),
        area,
    );
}

/// The visible notice as lines at `width` columns (none without one).
fn notice_lines(app: &App, theme: Theme, width: u16) -> Vec<Line<'static>> {
    let Some(notice) = app.visible_notice() else {
        return Vec::new();
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
    // The offer to quit says what Esc does now itself: Esc does not dismiss it.
    let dismiss = if app.quit_offered() {
        ""
    } else {
        "  Esc dismisses"
    };
    wrap::wrap(
        vec![Span::styled(symbol, style)],
        &[
            (notice.text.clone(), style),
            (format!("{more}{dismiss}"), theme.dim()),
        ],
        usize::from(width),
    )
}

fn draw_notice(frame: &mut Frame, area: Rect, mut lines: Vec<Line<'static>>) {
    let rows = usize::from(area.height);
    if rows == 0 {
        return;
    }
    if lines.len() > rows {
        lines.truncate(rows);
        // The last row shown says there was more.
        if let Some(last) = lines.last_mut() {
            let spans = std::mem::take(&mut last.spans);
            let width = usize::from(area.width);
            let mut cut = cut_spans(spans, width.saturating_sub(1));
            if spans_width(&cut) < width && !cut.last().is_some_and(|s| s.content.ends_with('…'))
            {
                cut.push(Span::raw("…"));
            }
            last.spans = cut;
        }
    }
    frame.render_widget(Paragraph::new(lines), area);
}

fn draw_input(frame: &mut Frame, area: Rect, app: &App, theme: Theme) {
    if app.is_replay() {
        return draw_replay_controls(frame, area, app, theme);
    }
    if app.ended_cleanly() {
        let block = Block::bordered()
            .title(" Session ended ")
            .border_style(theme.border(true));
        let inner = block.inner(area);
        frame.render_widget(block, area);
        let text = cut_spans(
            vec![Span::styled(
                "The session has ended. Press any key to leave.",
                theme.bold(),
            )],
            usize::from(inner.width),
        );
        frame.render_widget(Paragraph::new(Line::from(text)), inner);
        return;
    }
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
        let hint = cut_spans(
            vec![Span::styled(hint, theme.dim())],
            usize::from(inner.width),
        );
        frame.render_widget(Paragraph::new(Line::from(hint)), inner);
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
    // Only what fits is drawn: a pasted megabyte must not be laid out on every frame.
    let mut columns = 0;
    let shown: String = chars[start..]
        .iter()
        .take_while(|c| {
            columns += unicode_width::UnicodeWidthChar::width(**c).unwrap_or(0);
            columns <= width + 1
        })
        .collect();
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

/// A replay has nothing to type into: in the input's place, where it stands and its keys.
fn draw_replay_controls(frame: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let block = Block::bordered()
        .title(" Replay ")
        .border_style(theme.border(false));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let Some(progress) = app.replay_progress() else {
        return;
    };
    let state = if progress.applied >= progress.total {
        "Finished: q quits, PgUp scrolls back"
    } else if progress.paused {
        "Paused: Space resumes, n steps one event, q quits"
    } else {
        "Playing: Space pauses, +/- changes the speed, q quits"
    };
    let speed = match progress.speed_percent {
        Some(percent) => format!("×{}  ", f64::from(percent) / 100.0),
        None => "as fast as it goes  ".to_owned(),
    };
    let spans = cut_spans(
        vec![
            Span::styled(
                format!("{}/{} events  ", progress.applied, progress.total),
                theme.bold(),
            ),
            Span::styled(speed, theme.plain()),
            Span::styled(state, theme.dim()),
        ],
        usize::from(inner.width),
    );
    frame.render_widget(Paragraph::new(Line::from(spans)), inner);
}

fn draw_footer(frame: &mut Frame, area: Rect, app: &App, theme: Theme) {
    // Once the session has ended, any key leaves: no key has anything else to do.
    if app.ended_cleanly() && !app.is_replay() {
        return;
    }
    let mut spans = Vec::new();
    let mut used = 0;
    for footer in footer_keys(app) {
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
    for row in help_rows(app) {
        let prefix = vec![Span::styled(format!("  {:<22}", row.keys), theme.bold())];
        lines.extend(wrap::wrap(
            prefix,
            &[(row.help.to_owned(), theme.plain())],
            inner_width,
        ));
    }
    // A replay has no input line to type them into.
    if !app.is_replay() {
        lines.push(Line::default());
        lines.push(Line::styled("  Typed in the input line", theme.dim()));
        for (command, help) in crate::app::slash_help() {
            let prefix = vec![Span::styled(format!("  {command:<22}"), theme.bold())];
            lines.extend(wrap::wrap(
                prefix,
                &[(help.to_owned(), theme.plain())],
                inner_width,
            ));
        }
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
