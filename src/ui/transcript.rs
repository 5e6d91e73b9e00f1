//! The conversation pane: user turns, model turns (streaming, complete or interrupted, a
//! grounded one with its searches and sources) and the tool calls between them, wrapped to
//! the pane and scrolled by rows; a source's links are hyperlinks where the terminal shows them.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Scrollbar, ScrollbarOrientation, ScrollbarState};

use super::Theme;
use super::links::{LinkArea, hyperlink};
use super::tool_log::{args_values, outcome_summary, state_style};
use super::wrap::{cut_at_word, truncate, wrap};
use crate::app::{
    App, ECHO_INTERRUPTION, ECHO_KEY, Entry, Focus, ModelTurnStatus, UserInput, image_label,
};
use livetalk_live::excerpt::{self, SUMMARY, bounded};
use livetalk_live::reading::Grounding;
use unicode_width::UnicodeWidthStr;

/// The transcript as lines at `width` columns, with where its links lie.
pub fn lines(app: &App, theme: Theme, width: usize) -> (Vec<Line<'static>>, Vec<LinkArea>) {
    let mut out: Vec<Line<'static>> = Vec::new();
    let mut links = Vec::new();
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
                grounding,
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
                if !grounding.is_empty() {
                    grounding_lines(grounding, theme, width, &mut out, &mut links);
                }
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
    (out, links)
}

/// Indent of a source's title and link under the reply.
const SOURCE_INDENT: &str = "  ↗ ";

/// A grounded reply's searches and sources, under it: what it searched, then each source's
/// title and, on the rows after it, its whole link (both links where the terminal shows them).
fn grounding_lines(
    grounding: &Grounding,
    theme: Theme,
    width: usize,
    out: &mut Vec<Line<'static>>,
    links: &mut Vec<LinkArea>,
) {
    if !grounding.queries.is_empty() {
        out.extend(wrap(
            vec![Span::styled("  Searched: ", theme.dim())],
            &[(grounding.queries_line(), theme.dim())],
            width,
        ));
    }
    let indent = SOURCE_INDENT.width();
    let room = width.max(indent + 8) - indent;
    for source in &grounding.sources {
        let uri = source.link();
        let first = out.len();
        out.extend(wrap(
            vec![Span::styled(SOURCE_INDENT, theme.tool())],
            &[(source.name().to_owned(), theme.plain())],
            width,
        ));
        if let Some(uri) = uri {
            for (row, line) in out.iter().enumerate().skip(first) {
                links.push(LinkArea {
                    row,
                    col: indent as u16,
                    width: line.width().saturating_sub(indent) as u16,
                    uri: uri.to_owned(),
                });
            }
        }
        match (uri, &source.uri) {
            // Printable ASCII: a column per byte, cut at the pane's edge.
            (Some(uri), _) => {
                for chunk in uri.as_bytes().chunks(room) {
                    let chunk = String::from_utf8_lossy(chunk).into_owned();
                    links.push(LinkArea {
                        row: out.len(),
                        col: indent as u16,
                        width: chunk.len() as u16,
                        uri: uri.to_owned(),
                    });
                    out.push(Line::from(vec![
                        Span::raw(" ".repeat(indent)),
                        Span::styled(chunk, theme.link()),
                    ]));
                }
            }
            // Not a link to follow: shown as text, in one line's words.
            (None, Some(text)) => out.extend(wrap(
                vec![Span::raw(" ".repeat(indent))],
                &[(excerpt::one_line(text, excerpt::LINK), theme.dim())],
                width,
            )),
            (None, None) => {}
        }
    }
    if let Some(more) = grounding.more_line() {
        out.push(Line::styled(format!("  {more}"), theme.dim()));
    }
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
        // With Search on, a search too.
        let search = app.searches().then_some(livetalk_mock::SEARCH_PROMPT);
        for prompt in livetalk_mock::DEMO_PROMPTS.iter().chain(search.as_ref()) {
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
    let (mut all, links) = lines(app, theme, text_width);
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
    if theme.links {
        for link in links
            .iter()
            .filter(|link| (top..top + height).contains(&link.row))
        {
            let y = inner.y + (link.row - top) as u16;
            let x = inner.x + link.col;
            let width = link.width.min(inner.width.saturating_sub(link.col));
            hyperlink(frame.buffer_mut(), x, y, width, &link.uri);
        }
    }
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
