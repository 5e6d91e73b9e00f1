//! The conversation pane: user turns, model turns (streaming, complete or interrupted) and
//! the tool calls between them, wrapped to the pane and scrolled by rows.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Scrollbar, ScrollbarOrientation, ScrollbarState};

use super::Theme;
use super::tool_log::{args_values, outcome_summary, state_style};
use super::wrap::{cut_at_word, truncate, wrap};
use crate::app::{
    App, ECHO_INTERRUPTION, ECHO_KEY, Entry, Focus, ModelTurnStatus, UserInput, image_label,
};
use livetalk_live::excerpt::{SUMMARY, bounded};
use unicode_width::UnicodeWidthStr;

/// The transcript as lines at `width` columns.
pub fn lines(app: &App, theme: Theme, width: usize) -> Vec<Line<'static>> {
    let mut out: Vec<Line<'static>> = Vec::new();
    for (i, entry) in app.transcript().iter().enumerate() {
        // A blank line before each user turn separates the exchanges.
        if i > 0 && matches!(entry, Entry::User { .. }) {
            out.push(Line::default());
        }
        match entry {
            Entry::User { text, via } => {
                let label = match via {
                    UserInput::Typed => "You: ",
                    UserInput::Speech => "You (spoken): ",
                };
                let body = [(text.clone(), theme.plain())];
                out.extend(wrap(vec![Span::styled(label, theme.user())], &body, width));
            }
            Entry::Model {
                text_parts,
                transcript,
                status,
                echo_suspected,
            } => {
                let text = Entry::model_text(text_parts, transcript);
                let mut body = Vec::new();
                if text.is_empty() {
                    let placeholder = match status {
                        ModelTurnStatus::Streaming => "…",
                        _ => "(audio without transcription)",
                    };
                    body.push((placeholder.to_owned(), theme.dim()));
                } else {
                    body.push((text, theme.plain()));
                }
                match status {
                    ModelTurnStatus::Streaming => body.push(("▍".to_owned(), theme.model())),
                    ModelTurnStatus::Interrupted if *echo_suspected => {
                        body.push((
                            format!("[interrupted — {ECHO_INTERRUPTION}]"),
                            theme.warning(),
                        ));
                        body.push((
                            format!(
                                "({ECHO_KEY} switches echo handling; now {})",
                                app.audio().echo.name()
                            ),
                            theme.dim(),
                        ));
                    }
                    ModelTurnStatus::Interrupted => {
                        body.push(("[interrupted]".to_owned(), theme.warning()))
                    }
                    ModelTurnStatus::Complete => {}
                }
                out.extend(wrap(
                    vec![Span::styled("Gemini: ", theme.model())],
                    &body,
                    width,
                ));
            }
            Entry::Tool(index) => {
                let Some(call) = app.tool_calls().get(*index) else {
                    continue;
                };
                // One row per call, cut to the pane: the log and the popup hold the rest.
                let call_text = format!(
                    "{}({})",
                    bounded(&call.name, SUMMARY),
                    args_values(&call.args)
                );
                let outcome = outcome_summary(call);
                let state = format!(" → {}", call.state.label());
                let call_text = truncate(&call_text, width.saturating_sub(4 + state.width()));
                let room = width.saturating_sub(4 + call_text.width() + state.width());
                let line = Line::from(vec![
                    Span::styled("  ⚙ ", theme.tool()),
                    Span::styled(call_text, theme.tool()),
                    Span::styled(state, state_style(theme, &call.state)),
                    Span::styled(cut_at_word(&outcome, room), theme.dim()),
                ]);
                out.push(line);
            }
            Entry::Change(text) => {
                let body = [(text.clone(), theme.dim())];
                out.extend(wrap(vec![Span::styled("  ↻ ", theme.dim())], &body, width));
            }
            Entry::Image {
                name,
                file_bytes,
                width: w,
                height: h,
            } => {
                let body = [(image_label(name, *file_bytes, *w, *h), theme.plain())];
                out.extend(wrap(
                    vec![Span::styled("You (image): ", theme.user())],
                    &body,
                    width,
                ));
            }
        }
    }
    out
}

/// The conversation before anything was said: how to start, and with the offline demo model,
/// what it understands.
fn empty_screen(app: &App, theme: Theme, width: usize) -> Vec<Line<'static>> {
    let how = if app.is_replay() {
        "Nothing was said yet in this recording."
    } else if app.audio().mic_wanted && app.audio().push_to_talk {
        "Press F5 and speak, or type a message below and press Enter."
    } else if app.audio().mic_wanted && app.audio().input.is_some() {
        "Say something, or type a message below and press Enter."
    } else {
        "Type a message below and press Enter."
    };
    let mut lines = wrap(Vec::new(), &[(how.to_owned(), theme.dim())], width);
    if app.offline() && !app.is_replay() {
        lines.push(Line::default());
        lines.extend(wrap(
            Vec::new(),
            &[(
                "The offline demo model runs a small smart home. Try:".to_owned(),
                theme.dim(),
            )],
            width,
        ));
        for prompt in livetalk_mock::DEMO_PROMPTS {
            lines.push(Line::from(vec![
                Span::styled("  › ", theme.dim()),
                Span::styled(truncate(prompt, width.saturating_sub(4)), theme.plain()),
            ]));
        }
    }
    lines
}

/// Draws the pane; returns the wrapped row count.
pub fn draw(frame: &mut Frame, area: Rect, app: &App, theme: Theme) -> (Rect, usize) {
    let focused = app.view().focus == Focus::Transcript;
    let title = if app.view().transcript_top.is_some() {
        " Conversation (scrolled · End returns) "
    } else {
        " Conversation "
    };
    let block = Block::bordered()
        .title(title)
        .border_style(theme.border(focused));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    // One column is kept for the scrollbar.
    let text_width = usize::from(inner.width.saturating_sub(1));
    let mut all = lines(app, theme, text_width);
    if all.is_empty() {
        all = empty_screen(app, theme, text_width);
    }
    let rows = all.len();
    let height = usize::from(inner.height);
    let bottom_top = rows.saturating_sub(height);
    let top = app
        .view()
        .transcript_top
        .unwrap_or(bottom_top)
        .min(bottom_top);
    let visible: Vec<Line> = all.into_iter().skip(top).take(height).collect();
    frame.render_widget(Paragraph::new(visible), inner);
    if rows > height {
        let mut state = ScrollbarState::new(bottom_top + 1).position(top);
        frame.render_stateful_widget(
            Scrollbar::new(ScrollbarOrientation::VerticalRight),
            inner,
            &mut state,
        );
    }
    (inner, rows)
}
