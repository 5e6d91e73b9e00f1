//! The tool-call log: one row per call with time, name, arguments, state, duration and a
//! result summary; the selected row opens the detail popup. The server chose the names and
//! arguments, so every summary here is bounded ([`livetalk_live::excerpt`]).

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Cell, Paragraph, Row, Table};
use serde_json::Value;

use super::Theme;
use super::wrap::{cut_at_word, truncate};
use crate::app::{App, Focus, ToolCallRecord, ToolState};
use crate::tools::ProgressReport;
use livetalk_live::excerpt::{SUMMARY, bounded, into_bounded};
use unicode_width::UnicodeWidthStr;

const SPINNER: &[&str] = &["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/// `key: value, …` with strings unquoted and nested objects flattened to their leaf keys:
/// what a person reads at a glance.
pub fn args_summary(args: &Value) -> String {
    let mut fields = Vec::new();
    flatten(args, None, &mut fields);
    join(&fields)
}

/// The arguments as the transcript shows them: top-level values alone (`living room lamp`),
/// nested settings with their names (`color: blue`).
pub fn args_values(args: &Value) -> String {
    let mut fields = Vec::new();
    flatten(args, None, &mut fields);
    let top_level: Vec<&String> = match args {
        Value::Object(map) => map.keys().collect(),
        _ => Vec::new(),
    };
    for (key, _) in &mut fields {
        if key.as_ref().is_some_and(|k| top_level.contains(&k)) {
            *key = None;
        }
    }
    join(&fields)
}

/// The response's fields, one line a person reads at a glance: an error first, then what the
/// call changed (a `settings_updated` object, as the smart home reports it), then `status`,
/// then the rest; each field once, and none that only echoes an argument (the device name).
pub fn result_summary(response: &Value, args: &Value) -> String {
    let mut echoed = Vec::new();
    flatten(args, None, &mut echoed);
    let mut changed = Vec::new();
    if let Some(updated) = response.get(CHANGED) {
        flatten(updated, None, &mut changed);
    }
    let mut rest = Vec::new();
    match response {
        Value::Object(map) => {
            for (k, v) in map.iter().filter(|(k, _)| *k != CHANGED) {
                flatten(v, Some(k), &mut rest);
            }
        }
        other => flatten(other, None, &mut rest),
    }
    rest.retain(|field| !echoed.contains(field));
    rest.sort_by_key(|(key, _)| match key.as_deref() {
        Some("error") => 0,
        Some("status") => 2,
        _ => 3,
    });
    let error = rest
        .iter()
        .position(|(key, _)| key.as_deref() == Some("error"))
        .map(|at| rest.remove(at));
    let mut fields: Vec<(Option<String>, String)> = Vec::new();
    for field in error.into_iter().chain(changed).chain(rest) {
        if field.0.is_some() && fields.iter().any(|(key, _)| *key == field.0) {
            continue;
        }
        fields.push(field);
    }
    join(&fields)
}

/// The field in which a tool reports what it changed.
const CHANGED: &str = "settings_updated";

fn flatten(value: &Value, key: Option<&str>, out: &mut Vec<(Option<String>, String)>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                flatten(v, Some(k), out);
            }
        }
        Value::Null if key.is_none() => {}
        Value::String(s) => out.push((bounded_key(key), bounded(s, FIELD).into_owned())),
        other => out.push((bounded_key(key), into_bounded(other.to_string(), FIELD))),
    }
}

/// One field of a summary: a summary holds several, and each should say its own size.
const FIELD: usize = SUMMARY / 4;

fn bounded_key(key: Option<&str>) -> Option<String> {
    key.map(|k| bounded(k, FIELD).into_owned())
}

fn join(fields: &[(Option<String>, String)]) -> String {
    let joined = fields
        .iter()
        .map(|(k, v)| match k {
            Some(k) => format!("{k}: {v}"),
            None => v.clone(),
        })
        .collect::<Vec<_>>()
        .join(", ");
    into_bounded(joined, SUMMARY)
}

/// Duration and what came back: the error message, or the response's fields.
pub fn outcome_summary(call: &ToolCallRecord) -> String {
    let took = call
        .duration
        .map(|d| format!(" {}", format_duration(d)))
        .unwrap_or_default();
    let result = match &call.state {
        ToolState::Running => call
            .progress
            .as_ref()
            .map(|p| format!(" {}", progress_summary(p)))
            .unwrap_or_default(),
        ToolState::Waiting => String::new(),
        ToolState::Error(message) | ToolState::Refused(message) => {
            format!(": {}", bounded(message, SUMMARY))
        }
        ToolState::TimedOut => ": no answer in time; the model was told".to_owned(),
        ToolState::Cancelled => ": cancelled by the server, not answered".to_owned(),
        ToolState::Ok | ToolState::ByHand => match call.response.as_ref().map(|r| &r.response) {
            Some(response) => format!(": {}", result_summary(response, &call.args)),
            None => String::new(),
        },
    };
    let unasked = call
        .unasked
        .map(|why| format!(" (ran without asking: {})", why.reason()))
        .unwrap_or_default();
    format!("{took}{unasked}{result}")
}

/// How far a running call has come: `2/5` (or `2` without a total) and the tool's message.
pub fn progress_summary(report: &ProgressReport) -> String {
    let number = |n: f64| {
        if n.fract() == 0.0 && n.abs() < 1e15 {
            format!("{}", n as i64)
        } else {
            format!("{n:.1}")
        }
    };
    let done = match report.total {
        Some(total) => format!("{}/{}", number(report.progress), number(total)),
        None => number(report.progress),
    };
    match &report.message {
        Some(message) => format!("{done}: {}", bounded(message, FIELD)),
        None => done,
    }
}

pub fn format_duration(d: std::time::Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms < 10.0 {
        format!("{ms:.1} ms")
    } else if ms < 10_000.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

pub fn state_style(theme: Theme, state: &ToolState) -> Style {
    match state {
        ToolState::Running => theme.running(),
        ToolState::Ok => theme.ok(),
        ToolState::Error(_) | ToolState::TimedOut => theme.error(),
        ToolState::Cancelled | ToolState::Waiting | ToolState::Refused(_) | ToolState::ByHand => {
            theme.warning()
        }
    }
}

fn state_cell(app: &App, theme: Theme, state: &ToolState) -> Span<'static> {
    let symbol = match state {
        ToolState::Running => SPINNER[(app.view().ticks as usize) % SPINNER.len()],
        ToolState::Waiting => "?",
        ToolState::Ok => "✔",
        ToolState::Error(_) | ToolState::TimedOut => "✖",
        ToolState::Cancelled | ToolState::Refused(_) => "⊘",
        ToolState::ByHand => "✎",
    };
    Span::styled(
        format!("{symbol} {}", state.label()),
        state_style(theme, state),
    )
}

/// The state cell, flagged when the dispatcher saw the call run long.
fn call_state_cell(app: &App, theme: Theme, call: &ToolCallRecord) -> Span<'static> {
    if call.slow && call.state == ToolState::Running {
        return Span::styled("⚠ slow", theme.warning());
    }
    state_cell(app, theme, &call.state)
}

/// What the result column says about a call.
fn result_text(call: &ToolCallRecord) -> String {
    match &call.state {
        ToolState::Ok | ToolState::ByHand => call
            .response
            .as_ref()
            .map(|r| result_summary(&r.response, &call.args))
            .unwrap_or_default(),
        ToolState::Error(message) | ToolState::Refused(message) => {
            bounded(message, SUMMARY).into_owned()
        }
        ToolState::TimedOut => "no answer in time".to_owned(),
        ToolState::Cancelled => "cancelled by the server".to_owned(),
        ToolState::Waiting => "a approve · d deny · e edit · r answer".to_owned(),
        ToolState::Running => call
            .progress
            .as_ref()
            .map(progress_summary)
            .unwrap_or_default(),
    }
}

/// Columns the "unasked (…)" flag takes before a result.
fn unasked_width(call: &ToolCallRecord) -> usize {
    call.unasked
        .map(|why| format!("unasked ({}) ", why.tag()).width())
        .unwrap_or(0)
}

/// Splits `free` columns between two that want `a` and `b`: each gets what it wants when both
/// fit; a column that wants no more than half gets it all; otherwise the space goes by what
/// each holds, and neither gets less than a quarter of it.
fn share(free: usize, a: usize, b: usize) -> (usize, usize) {
    // The result column takes what is left: it is the last one.
    if a + b <= free || a <= free / 2 {
        return (a.min(free), free - a.min(free));
    }
    if b <= free / 2 {
        return (free - b, b);
    }
    let floor = free / 4;
    let a_share = (free * a / (a + b).max(1)).clamp(a.min(floor), free - b.min(floor));
    (a_share, free - a_share)
}

/// Which of the log's columns show, and the widths the arguments and the result share.
#[derive(Clone, Copy)]
struct Columns {
    wide: bool,
    show_time: bool,
    args_width: usize,
    result_width: usize,
}

/// One call's row of the log, its state already put in words.
fn call_row(
    theme: Theme,
    call: &ToolCallRecord,
    columns: Columns,
    state: Span<'static>,
) -> Row<'static> {
    let Columns {
        wide,
        show_time,
        args_width,
        result_width,
    } = columns;
    let time = call.started_at.strftime("%H:%M:%S").to_string();
    let took = call.duration.map(format_duration).unwrap_or_default();
    let result = cut_at_word(
        &result_text(call),
        result_width.saturating_sub(unasked_width(call)),
    );
    let mut cells = Vec::new();
    if show_time {
        cells.push(Cell::from(Span::styled(time, theme.dim())));
    }
    cells.push(Cell::from(Span::styled(
        truncate(&bounded(&call.name, SUMMARY), 17),
        theme.tool(),
    )));
    if wide {
        cells.push(Cell::from(cut_at_word(
            &args_summary(&call.args),
            args_width,
        )));
    }
    cells.push(Cell::from(state));
    if wide {
        cells.push(Cell::from(took));
    }
    cells.push(Cell::from(match call.unasked {
        Some(why) => Line::from(vec![
            Span::styled(format!("unasked ({}) ", why.tag()), theme.warning()),
            Span::raw(result),
        ]),
        None => Line::from(result),
    }));
    Row::new(cells)
}

/// Draws the log; returns the inner area of its rows (for mouse hit-testing).
pub fn draw(frame: &mut Frame, area: Rect, app: &App, theme: Theme) -> Rect {
    let focused = app.view().focus == Focus::ToolLog;
    let title = format!(" Tool calls ({}) ", app.tool_calls().len());
    let hint = match (focused, app.first_waiting_call()) {
        (true, Some(_)) => " a approve · d deny · e edit · r answer · Enter details ",
        (true, None) => " ↑/↓ select · Enter details ",
        (false, Some(_)) => " a call waits for you: F7 ",
        (false, None) => "",
    };
    let block = Block::bordered()
        .title(title)
        .title_bottom(Line::from(hint).right_aligned())
        .border_style(theme.border(focused));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if inner.height < 2 {
        return Rect::default();
    }
    // Columns give way as the pane narrows: arguments and duration first, then the time.
    let wide = inner.width >= 70;
    let show_time = inner.width >= 60;
    let header_cells: Vec<&str> = match (wide, show_time) {
        (true, _) => vec!["time", "tool", "arguments", "state", "took", "result"],
        (false, true) => vec!["time", "tool", "state", "result"],
        (false, false) => vec!["tool", "state", "result"],
    };
    let header = Row::new(header_cells.into_iter().map(Cell::from)).style(theme.bold());
    let rows_area = Rect {
        y: inner.y + 1,
        height: inner.height - 1,
        ..inner
    };
    // Wide enough for the longest state shown ("? waiting for you"), never narrower than before.
    let state_width = app
        .tool_calls()
        .iter()
        .map(|c| c.state.label().chars().count() + 2)
        .max()
        .unwrap_or(0)
        .clamp(11, 20) as u16;
    let spacing = 1u16;
    let fixed_widths: Vec<u16> = match (wide, show_time) {
        (true, _) => vec![8, 18, state_width, 8],
        (false, true) => vec![8, 17, state_width],
        (false, false) => vec![17, state_width],
    };
    let columns = fixed_widths.len() as u16 + if wide { 2 } else { 1 };
    let free = usize::from(
        inner
            .width
            .saturating_sub(fixed_widths.iter().sum::<u16>() + spacing * (columns - 1)),
    );
    // Arguments and results share what is left by what they hold: neither is cut while the
    // other has room to spare.
    let first = app.tool_log_first_row();
    let visible = usize::from(inner.height.saturating_sub(1));
    let shown = || app.tool_calls().iter().skip(first).take(visible);
    let (args_width, result_width) = if wide {
        let args = shown()
            .map(|c| args_summary(&c.args).width())
            .max()
            .unwrap_or(0)
            .max("arguments".len());
        let results = shown()
            .map(|c| result_text(c).width() + unasked_width(c))
            .max()
            .unwrap_or(0)
            .max("result".len());
        share(free, args, results)
    } else {
        (0, free)
    };
    let widths: Vec<Constraint> = if wide {
        vec![
            Constraint::Length(8),
            Constraint::Length(18),
            Constraint::Length(args_width as u16),
            Constraint::Length(state_width),
            Constraint::Length(8),
            Constraint::Length(result_width as u16),
        ]
    } else {
        let mut widths = vec![
            Constraint::Length(17),
            Constraint::Length(state_width),
            Constraint::Length(result_width as u16),
        ];
        if show_time {
            widths.insert(0, Constraint::Length(8));
        }
        widths
    };
    if app.tool_calls().is_empty() {
        frame.render_widget(Table::new([header], widths), inner);
        frame.render_widget(
            Paragraph::new(Line::styled("No tool calls yet.", theme.dim())),
            rows_area,
        );
        return rows_area;
    }
    let columns = Columns {
        wide,
        show_time,
        args_width,
        result_width,
    };
    let rows = app
        .tool_calls()
        .iter()
        .enumerate()
        .skip(first)
        .take(visible)
        .map(|(index, call)| {
            let row = call_row(theme, call, columns, call_state_cell(app, theme, call));
            if app.view().tool_selected == Some(index) {
                row.style(theme.selected())
            } else {
                row
            }
        });
    let table = Table::new(
        std::iter::once(header).chain(rows).collect::<Vec<_>>(),
        widths,
    )
    .column_spacing(spacing);
    frame.render_widget(table, inner);
    rows_area
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn argument_summaries_are_readable() {
        let args = json!({"device_name": "living room lamp", "status": "on", "brightness": 80});
        assert_eq!(
            args_summary(&args),
            "brightness: 80, device_name: living room lamp, status: on"
        );
        assert_eq!(args_summary(&json!(null)), "");
        assert_eq!(
            args_summary(&json!({"device_name": "lamp", "setting": {"color": "blue"}})),
            "device_name: lamp, color: blue"
        );
    }

    #[test]
    fn result_summaries_leave_out_echoed_arguments() {
        let args = json!({"device_name": "living room lamp"});
        let response = json!({"device_name": "living room lamp", "status": "off"});
        assert_eq!(result_summary(&response, &args), "status: off");
        let response = json!({"brightness": 0, "device_name": "living room lamp", "status": "off"});
        assert_eq!(
            result_summary(&response, &args),
            "status: off, brightness: 0"
        );
    }

    /// The smart home's answers to a change, as the demo model's requests make them.
    #[test]
    fn result_summaries_say_what_changed_first_and_each_field_once() {
        let on_and_blue = json!({"device_name": "living room lamp", "new_status": "on", "setting": {"color": "blue"}});
        let response = json!({
            "device_name": "living room lamp", "type": "light", "status": "on",
            "brightness": 100, "color": "blue",
            "settings_updated": {"color": "blue", "brightness": 100},
        });
        assert_eq!(
            result_summary(&response, &on_and_blue),
            "brightness: 100, color: blue, status: on, type: light"
        );
        let dim = json!({"device_name": "living room lamp", "new_status": "on", "setting": {"brightness": 30}});
        let response = json!({
            "device_name": "living room lamp", "type": "light", "status": "on",
            "brightness": 30, "color": "white", "settings_updated": {"brightness": 30},
        });
        assert_eq!(
            result_summary(&response, &dim),
            "brightness: 30, status: on, color: white, type: light"
        );
        let warmer = json!({"device_name": "kitchen thermostat", "new_status": "heating", "setting": {"temperature_celsius": 22}});
        let response = json!({
            "device_name": "kitchen thermostat", "type": "thermostat", "status": "heating",
            "temperature_celsius": 22.0, "settings_updated": {"temperature_celsius": 22.0},
        });
        assert_eq!(
            result_summary(&response, &warmer),
            "temperature_celsius: 22.0, status: heating, type: thermostat"
        );
        let failed = json!({"error": "no such device", "settings_updated": {}});
        assert_eq!(result_summary(&failed, &dim), "error: no such device");
    }

    #[test]
    fn columns_share_the_width_by_what_they_hold() {
        assert_eq!(share(100, 30, 20), (30, 70));
        // A column that wants no more than half gets it.
        assert_eq!(share(100, 150, 50), (50, 50));
        assert_eq!(share(100, 500, 5), (95, 5));
        assert_eq!(share(100, 10, 500), (10, 90));
        // Too much for both: by what each holds, neither below a quarter.
        assert_eq!(share(100, 300, 100), (75, 25));
        assert_eq!(share(100, 2000, 60), (75, 25));
    }

    #[test]
    fn transcript_arguments_show_values_and_named_settings() {
        let args = json!({"device_name": "living room lamp", "new_status": "on", "setting": {"color": "blue"}});
        assert_eq!(args_values(&args), "living room lamp, on, color: blue");
    }

    #[test]
    fn huge_arguments_and_results_are_summarised() {
        let huge = "x".repeat(10_000_000);
        let args = json!({"device_name": huge, "extra": [huge]});
        for summary in [
            args_summary(&args),
            args_values(&args),
            result_summary(&json!({"error": huge}), &json!({})),
        ] {
            assert!(
                summary.len() < 2 * livetalk_live::excerpt::SUMMARY,
                "{}",
                summary.len()
            );
            assert!(summary.contains("(9.5 MiB, shown 1.0 KiB)"), "{summary}");
        }
    }

    #[test]
    fn durations_read_naturally() {
        use std::time::Duration;
        assert_eq!(format_duration(Duration::from_micros(420)), "0.4 ms");
        assert_eq!(format_duration(Duration::from_millis(250)), "250 ms");
        assert_eq!(format_duration(Duration::from_secs(12)), "12.0 s");
    }
}
