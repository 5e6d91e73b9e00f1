//! Audio on screen: the status line's mic state and level meters, and the audio details popup
//! (devices, resampling paths, the echo canceller's state, counters and latencies).

use std::time::Duration;

use ratatui::text::{Line, Span};

use super::Theme;
use crate::app::{App, AudioState, ECHO_KEY, MicState, echo_meaning};
use crate::audio::{EchoMode, Latency};

/// Cells of a level meter.
const METER_CELLS: usize = 5;

/// A level (0..1 peak) as a meter of filled and empty cells over −60..0 dBFS.
pub fn meter(level: f32) -> String {
    let db = crate::audio::pcm::dbfs(level);
    let filled = (((db + 60.0) / 60.0) * METER_CELLS as f32)
        .ceil()
        .clamp(0.0, METER_CELLS as f32) as usize;
    let filled = if level > 0.0 { filled.max(1) } else { 0 };
    format!("{}{}", "▮".repeat(filled), "▯".repeat(METER_CELLS - filled))
}

/// The status line's audio part: "mic live ▮▮▯▯▯  out ▮▮▮▯▯".
pub fn status_spans(app: &App, theme: Theme) -> Vec<Span<'static>> {
    if !app.audio().enabled {
        return Vec::new();
    }
    let state = app.audio().mic_state();
    let style = match state {
        MicState::Off | MicState::Muted => theme.warning(),
        MicState::Gated | MicState::PushToTalk => theme.dim(),
        MicState::Live | MicState::Talking => theme.status_bar(),
    };
    let mut spans = Vec::new();
    if app.audio().mic_wanted {
        spans.push(Span::styled("mic ", theme.status_bar()));
        spans.push(Span::styled(state.label().to_owned(), style));
    }
    if app.audio().input.is_some() {
        spans.push(Span::styled(
            format!(" {}", meter(app.audio().mic_level)),
            theme.status_bar(),
        ));
    }
    if app.audio().output.is_some() {
        let gap = if spans.is_empty() { "" } else { "  " };
        spans.push(Span::styled(
            format!("{gap}out {}", meter(app.audio().output_level)),
            theme.status_bar(),
        ));
    } else if app.audio().opened {
        spans.push(Span::styled("  no speaker", theme.warning()));
    }
    spans.push(Span::styled("  ", theme.status_bar()));
    spans
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn latency(value: &Latency) -> String {
    if value.measured() {
        format!(
            "{} (worst {}, {} measured)",
            ms(value.last),
            ms(value.worst),
            value.count
        )
    } else {
        "not measured yet".to_owned()
    }
}

fn db(value: Option<f32>) -> String {
    match value {
        Some(value) => format!("{value:.0} dB"),
        None => "not measured yet".to_owned(),
    }
}

/// The echo canceller's state, as rows (each value short enough for an 80-column screen).
fn echo_rows(audio: &AudioState) -> Vec<(&'static str, String)> {
    // Figures of the mode before a switch say nothing about this one.
    let figures = audio.echo_figures.filter(|f| f.mode == audio.echo);
    let mut rows = Vec::new();
    let canceller = match (audio.echo, figures) {
        (EchoMode::Aec, Some(f)) if f.cancelling => {
            let heard = if f.far_end_secs <= 0.0 {
                "waiting for the speaker: Gemini not heard yet".to_owned()
            } else {
                let state = if f.converged {
                    "converged"
                } else {
                    "converging"
                };
                format!("{state} ({:.1} s of Gemini heard)", f.far_end_secs)
            };
            let estimated = match f.delay_ms {
                Some(ms) => format!("{ms} ms estimated"),
                None => "not found yet".to_owned(),
            };
            let device = match f.device_delay_ms {
                Some(ms) => format!("{ms} ms"),
                None => "unknown".to_owned(),
            };
            rows.push((
                "Echo delay",
                format!("{estimated} · device clocks {device}"),
            ));
            rows.push(("Echo removed (ERLE)", db(f.erle_db)));
            rows.push(("Echo path loss (ERL)", db(f.erl_db)));
            heard
        }
        (EchoMode::Aec, _) if audio.input.is_none() || audio.output.is_none() => {
            "not running: needs a microphone and a speaker".to_owned()
        }
        (EchoMode::Aec, Some(_)) => "not running: needs a device microphone".to_owned(),
        (EchoMode::Aec, None) => "starting: no echo heard yet".to_owned(),
        (mode, _) => format!("not running (echo handling is {})", mode.name()),
    };
    rows.insert(0, ("Echo canceller", canceller));
    if let Some(f) = figures {
        let suppression = if f.noise_suppression { "on" } else { "off" };
        rows.push(("Noise suppression", suppression.to_owned()));
    }
    rows
}

/// The audio details popup's lines.
pub fn detail_lines(app: &App, theme: Theme) -> Vec<Line<'static>> {
    let audio = &app.audio();
    let row = |label: &str, value: String| {
        Line::from(vec![
            Span::styled(format!("  {label:<22}"), theme.bold()),
            Span::raw(value),
        ])
    };
    let mut lines = vec![Line::default()];
    if !audio.enabled {
        lines.push(Line::raw(
            "  Audio is off (--no-audio or audio.enabled = false): text only.",
        ));
        return lines;
    }
    let endpoint = |info: &Option<crate::audio::StreamInfo>| match info {
        Some(info) => format!("{}  ({})", info.name, info.path),
        None => "none".to_owned(),
    };
    lines.push(row("Microphone", endpoint(&audio.input)));
    lines.push(row("Speaker", endpoint(&audio.output)));
    if audio.output_wav {
        lines.push(row("Model audio file", "written (--output-wav)".to_owned()));
    }
    lines.push(row("Mic state", audio.mic_state().label().to_owned()));
    lines.push(row(
        &format!("Echo handling ({ECHO_KEY})"),
        format!("{}: {}", audio.echo.name(), echo_meaning(audio.echo)),
    ));
    for (label, value) in echo_rows(audio) {
        lines.push(row(label, value));
    }
    lines.push(row(
        "Turn-taking",
        if audio.push_to_talk {
            "push-to-talk (F5)".to_owned()
        } else {
            "server voice detection".to_owned()
        },
    ));
    for problem in &audio.problems {
        lines.push(Line::styled(format!("  ⚠ {problem}"), theme.warning()));
    }
    let f = &audio.figures;
    lines.push(Line::default());
    lines.push(row("Mic frames sent", f.frames_sent.to_string()));
    lines.push(row(
        "Mic frames dropped",
        format!("{} (network slower than the mic)", f.frames_dropped),
    ));
    lines.push(row("Mic frames gated", f.frames_gated.to_string()));
    lines.push(row(
        "Mic samples lost",
        format!("{} (capture fell behind the device)", f.mic_overflow),
    ));
    lines.push(row(
        "Mic gaps filled",
        format!(
            "{} ms (lost before livetalk, sent as silence)",
            f.mic_gaps.as_millis()
        ),
    ));
    lines.push(row("Output underruns", f.underruns.to_string()));
    lines.push(row(
        "Model audio heard",
        format!("{:.1} s", f.played.as_secs_f64()),
    ));
    lines.push(Line::default());
    lines.push(row("Mic → socket", latency(&f.mic_to_socket)));
    lines.push(row("Socket → speaker", latency(&f.socket_to_speaker)));
    lines.push(row("Interrupt → silence", latency(&f.interrupt_to_silence)));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meters_fill_with_level() {
        assert_eq!(meter(0.0), "▯▯▯▯▯");
        assert_eq!(meter(1.0), "▮▮▮▮▮");
        assert_eq!(meter(0.001), "▮▯▯▯▯", "-60 dBFS still shows a sign of life");
        assert_eq!(meter(0.1), "▮▮▮▮▯");
    }
}
