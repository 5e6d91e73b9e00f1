//! The tool list popup (F8): every tool with its origin and whether it is on, each MCP server
//! with its state, and the keys that change them.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::{Theme, centered, draw_popup, wrapped_rows};
use crate::app::{App, Area, ToolRow};
use crate::tools::mcp::ServerState;
use livetalk_live::excerpt::{SUMMARY, bounded};

/// Draws the list with the `selected` row marked; returns where the popup went.
pub fn draw(frame: &mut Frame, full: Rect, app: &App, theme: Theme, selected: usize) -> Area {
    let width = 96.min(full.width.saturating_sub(2));
    let rows = app.tool_rows();
    let mut lines = Vec::with_capacity(rows.len() + 3);
    if rows.is_empty() {
        lines.push(Line::styled("  No tools are enabled.", theme.dim()));
    }
    for (index, row) in rows.iter().enumerate() {
        let marker = if index == selected { "▶ " } else { "  " };
        let mut spans = vec![Span::raw(marker)];
        match row {
            ToolRow::Server(server) => {
                spans.push(Span::styled(
                    format!("MCP server {}", server.name),
                    theme.bold(),
                ));
                let (state, style) = match &server.state {
                    ServerState::Starting => ("starting…".to_owned(), theme.running()),
                    ServerState::Up => ("running".to_owned(), theme.ok()),
                    ServerState::Down(why) => {
                        (format!("down: {}", bounded(why, SUMMARY)), theme.error())
                    }
                };
                spans.push(Span::raw("  "));
                spans.push(Span::styled(state, style));
            }
            ToolRow::Tool(tool) => {
                let (check, style) = if tool.enabled {
                    ("[on] ", theme.ok())
                } else {
                    ("[off]", theme.warning())
                };
                let indent = if tool.server.is_some() { "  " } else { "" };
                spans.push(Span::raw(indent));
                spans.push(Span::styled(check, style));
                spans.push(Span::raw(" "));
                spans.push(Span::styled(tool.name.clone(), theme.tool()));
                let origin = match &tool.server {
                    None if tool.runs_at_google() => "runs at Google".to_owned(),
                    None => "built-in".to_owned(),
                    Some(server) => format!("MCP {server}"),
                };
                spans.push(Span::styled(format!("  ({origin})"), theme.dim()));
                match tool.unasked {
                    None => spans.push(Span::styled("  asks first", theme.dim())),
                    Some(why) if why.worth_showing() => spans.push(Span::styled(
                        format!("  unasked ({})", why.tag()),
                        theme.warning(),
                    )),
                    Some(_) => {}
                }
            }
        }
        let line = Line::from(spans);
        lines.push(if index == selected {
            line.style(theme.selected())
        } else {
            line
        });
    }
    lines.push(Line::default());
    let hint = if app.tools_pending() {
        "  Changes reach the model at the next turn boundary (the conversation is kept)."
    } else {
        "  Space: turn the selected tool on or off · r: restart its MCP server · F8/Esc: close"
    };
    lines.push(Line::styled(hint, theme.dim()));
    let rect = centered(
        full,
        width,
        wrapped_rows(&lines, width.saturating_sub(2)) + 2,
    );
    // Keep the selection in view: scroll so it sits on the last inner row at most.
    let inner_rows = rect.height.saturating_sub(2);
    let scroll = u16::try_from(selected + 1)
        .unwrap_or(u16::MAX)
        .saturating_sub(inner_rows);
    draw_popup(frame, rect, " Tools ".to_owned(), lines, scroll, theme)
}
