//! What `livetalk check` says: each turn as it finishes (✔ or ✖, its calls, its latencies,
//! and for a failure the expected beside the actual), a summary per file and overall with
//! latency percentiles, pass rates over repeated runs, one JSON event per line (`--json`),
//! and JUnit XML (`--junit`) for CI. Every line goes out through `output`, scrubbed.

use serde_json::json;

use super::compare::{call_text, calls_text};
use super::runner::TurnResult;
use crate::config::RouteKind;
use crate::output;

/// What a check runs against, said before anything runs and again in the JSON summary and
/// the JUnit properties: a check that passed against the offline demo model says so.
#[derive(Debug, Clone)]
pub struct Target {
    pub kind: RouteKind,
    /// For people: "the embedded offline demo model", "Google's Gemini API at …".
    pub route: String,
    /// Why the route is the demo model, when it is and no flag asked for it.
    pub why: Option<&'static str>,
    /// The models the files run with, each once, in the order of the files.
    pub models: Vec<String>,
}

impl Target {
    fn models_text(&self) -> String {
        match self.models.as_slice() {
            [one] => format!("model {one}"),
            many => format!("models {}", many.join(", ")),
        }
    }
}

/// How the report is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

/// One turn of one run, judged.
#[derive(Debug, Clone)]
pub struct TurnReport {
    pub problems: Vec<String>,
    pub result: TurnResult,
}

impl TurnReport {
    pub fn passed(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Every run of one file.
#[derive(Debug, Clone)]
pub struct FileReport {
    /// As the user named it.
    pub file: String,
    pub name: String,
    /// The model its runs used.
    pub model: String,
    /// Each turn's title ("Is the living room lamp on?", "(spoken, 1.3 s)").
    pub titles: Vec<String>,
    /// Each run's turns.
    pub runs: Vec<Vec<TurnReport>>,
}

impl FileReport {
    /// Runs in which every turn passed, over all runs.
    pub fn pass_rate(&self) -> f64 {
        let passed = self
            .runs
            .iter()
            .filter(|run| run.iter().all(TurnReport::passed))
            .count();
        rate(passed, self.runs.len())
    }

    /// Turn `index`'s passes and runs.
    pub fn turn_passes(&self, index: usize) -> (usize, usize) {
        let passed = self
            .runs
            .iter()
            .filter(|run| run.get(index).is_some_and(TurnReport::passed))
            .count();
        (passed, self.runs.len())
    }

    /// "lamp.toml / turn 2: Okay, please turn it on…"
    pub fn case_name(&self, index: usize) -> String {
        format!(
            "{} / turn {}: {}",
            self.name,
            index + 1,
            self.titles.get(index).map(String::as_str).unwrap_or("")
        )
    }
}

fn rate(passed: usize, of: usize) -> f64 {
    if of == 0 {
        0.0
    } else {
        passed as f64 / of as f64
    }
}

fn percent(rate: f64) -> String {
    format!("{:.0}%", rate * 100.0)
}

/// Milliseconds to a tenth: finer is noise.
fn tenth(ms: f64) -> f64 {
    (ms * 10.0).round() / 10.0
}

fn millis(ms: Option<f64>) -> String {
    ms.map_or("–".to_owned(), |ms| format!("{ms:.0} ms"))
}

/// Prints what the check runs against, first: the route and the models.
pub fn checking(format: Format, target: &Target, files: usize) {
    match format {
        Format::Text => {
            let why = target.why.map(|w| format!(" ({w})")).unwrap_or_default();
            let _ = output::out(&format!(
                "Checking {files} file(s) against {}{why}, {}",
                target.route,
                target.models_text()
            ));
        }
        Format::Json => {
            let _ = output::out(
                &json!({
                    "type": "check",
                    "files": files,
                    "route": target.route,
                    "route_kind": target.kind.word(),
                    "models": target.models,
                })
                .to_string(),
            );
        }
    }
}

/// Prints how a run of a file starts.
pub fn run_started(format: Format, file: &FileReport, run: usize, runs: usize) {
    if format == Format::Text {
        let of = if runs > 1 {
            format!(" (run {run} of {runs})")
        } else {
            String::new()
        };
        let _ = output::out(&format!("{}{of}", file.name));
    }
}

/// Prints one turn as it finished.
pub fn turn(format: Format, file: &FileReport, run: usize, index: usize, report: &TurnReport) {
    let calls: Vec<_> = report.result.observed.calls.iter().flatten().collect();
    match format {
        Format::Text => {
            let mark = if report.passed() { "✔" } else { "✖" };
            let title = file.titles.get(index).map(String::as_str).unwrap_or("");
            let grounding = &report.result.observed.grounding;
            let searched = if grounding.is_empty() {
                String::new()
            } else {
                let sources = grounding.sources.len() + grounding.more_sources;
                format!(
                    "  searched{} ({sources} source{})",
                    if grounding.queries.is_empty() {
                        String::new()
                    } else {
                        format!(" {}", grounding.queries_line())
                    },
                    if sources == 1 { "" } else { "s" }
                )
            };
            let _ = output::out(&format!(
                "  {mark} turn {}: {title}  [{}]{searched}  first response {}, first audio {}",
                index + 1,
                calls_text(&calls),
                millis(report.result.observed.first_response_ms),
                millis(report.result.first_audio_ms),
            ));
            for problem in &report.problems {
                let _ = output::out(&format!("      {problem}"));
            }
        }
        Format::Json => {
            let tools: Vec<_> = calls
                .iter()
                .map(|c| json!({"name": c.name, "args": c.args}))
                .collect();
            let mut event = json!({
                    "type": "turn",
                    "file": file.file,
                    "name": file.name,
                    "run": run,
                    "turn": index + 1,
                    "title": file.titles.get(index),
                    "passed": report.passed(),
                    "tools": tools,
                    "reply": livetalk_live::excerpt::bounded(&report.result.observed.reply, 2000),
                    "first_response_ms": report.result.observed.first_response_ms.map(tenth),
                    "first_audio_ms": report.result.first_audio_ms.map(tenth),
                    "problems": report.problems,
            });
            let grounding = &report.result.observed.grounding;
            if !grounding.is_empty() {
                crate::record::inspect::grounding_json(grounding, &mut event);
            }
            let _ = output::out_json(&event.to_string());
        }
    }
}

/// Prints a file's summary once its runs are over.
pub fn file_done(format: Format, file: &FileReport, min_pass_rate: f64) {
    let runs = file.runs.len();
    let pass_rate = file.pass_rate();
    let turns: Vec<_> = (0..file.titles.len())
        .map(|i| {
            let (passed, of) = file.turn_passes(i);
            (i, passed, of)
        })
        .collect();
    match format {
        Format::Text => {
            let verdict = if pass_rate >= min_pass_rate {
                "passed"
            } else {
                "FAILED"
            };
            let line = if runs == 1 {
                let passed = turns.iter().filter(|(_, p, _)| *p == 1).count();
                format!(
                    "{}: {verdict}: {passed} of {} turns passed",
                    file.name,
                    turns.len()
                )
            } else {
                let passed = (pass_rate * runs as f64).round() as usize;
                let mut line = format!(
                    "{}: {verdict}: {passed} of {runs} runs passed ({})",
                    file.name,
                    percent(pass_rate)
                );
                for (i, passed, of) in &turns {
                    let flaky = if *passed > 0 && passed < of {
                        " flaky"
                    } else {
                        ""
                    };
                    line += &format!(
                        "; turn {} {} ({passed} of {of}){flaky}",
                        i + 1,
                        percent(rate(*passed, *of))
                    );
                }
                line
            };
            let _ = output::out(&line);
        }
        Format::Json => {
            let turns: Vec<_> = turns
                .iter()
                .map(|(i, passed, of)| {
                    json!({
                        "turn": i + 1,
                        "title": file.titles.get(*i),
                        "passed": passed,
                        "runs": of,
                        "pass_rate": rate(*passed, *of),
                        "flaky": *passed > 0 && passed < of,
                    })
                })
                .collect();
            let _ = output::out_json(
                &json!({
                    "type": "file",
                    "file": file.file,
                    "name": file.name,
                    "model": file.model,
                    "runs": runs,
                    "pass_rate": pass_rate,
                    "passed": pass_rate >= min_pass_rate,
                    "turns": turns,
                })
                .to_string(),
            );
        }
    }
}

/// The value below which `p` of the sorted values lie (nearest rank).
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

fn latencies(files: &[FileReport], pick: impl Fn(&TurnReport) -> Option<f64>) -> Vec<f64> {
    let mut all: Vec<f64> = files
        .iter()
        .flat_map(|f| f.runs.iter().flatten())
        .filter_map(pick)
        .collect();
    all.sort_by(f64::total_cmp);
    all
}

/// Prints the overall summary.
pub fn summary(
    format: Format,
    target: &Target,
    files: &[FileReport],
    min_pass_rate: f64,
    exit: u8,
) {
    let passed = files
        .iter()
        .filter(|f| f.pass_rate() >= min_pass_rate)
        .count();
    let turns: usize = files.iter().map(|f| f.runs.iter().flatten().count()).sum();
    let turns_passed: usize = files
        .iter()
        .map(|f| f.runs.iter().flatten().filter(|t| t.passed()).count())
        .sum();
    let first = latencies(files, |t| t.result.observed.first_response_ms);
    let audio = latencies(files, |t| t.result.first_audio_ms);
    match format {
        Format::Text => {
            let _ = output::out(&format!(
                "Checked {} file(s): {passed} passed, {} failed; {turns_passed} of {turns} turns passed; first response p50 {}, p90 {}; first audio p50 {}, p90 {}",
                files.len(),
                files.len() - passed,
                millis(percentile(&first, 0.5)),
                millis(percentile(&first, 0.9)),
                millis(percentile(&audio, 0.5)),
                millis(percentile(&audio, 0.9)),
            ));
        }
        Format::Json => {
            let _ = output::out_json(
                &json!({
                    "type": "summary",
                    "route": target.route,
                    "route_kind": target.kind.word(),
                    "models": target.models,
                    "files": files.len(),
                    "passed": passed,
                    "failed": files.len() - passed,
                    "turns": turns,
                    "turns_passed": turns_passed,
                    "min_pass_rate": min_pass_rate,
                    "first_response_ms": {"p50": percentile(&first, 0.5).map(tenth), "p90": percentile(&first, 0.9).map(tenth)},
                    "first_audio_ms": {"p50": percentile(&audio, 0.5).map(tenth), "p90": percentile(&audio, 0.9).map(tenth)},
                    "exit": exit,
                })
                .to_string(),
            );
        }
    }
}

/// JUnit XML: a test suite per file, a test case per turn, failed when the turn's pass rate is
/// under the minimum, with each failing run's problems.
pub fn junit(target: &Target, files: &[FileReport], min_pass_rate: f64) -> String {
    let mut suites = String::new();
    let mut total = 0;
    let mut total_failures = 0;
    for file in files {
        let mut cases = String::new();
        let mut failures = 0;
        for index in 0..file.titles.len() {
            let (passed, of) = file.turn_passes(index);
            cases += &format!(
                "    <testcase classname=\"{}\" name=\"{}\"",
                xml_escape(&file.name),
                xml_escape(&file.case_name(index))
            );
            if rate(passed, of) >= min_pass_rate {
                cases += "/>\n";
                continue;
            }
            failures += 1;
            let mut details = String::new();
            for (run, turns) in file.runs.iter().enumerate() {
                if let Some(t) = turns.get(index).filter(|t| !t.passed()) {
                    for problem in &t.problems {
                        details += &format!("run {}: {problem}\n", run + 1);
                    }
                    let calls: Vec<_> = t.result.observed.calls.iter().flatten().collect();
                    if !calls.is_empty() {
                        let made: Vec<String> = calls.iter().map(|c| call_text(c)).collect();
                        details += &format!("run {}: calls made: {}\n", run + 1, made.join(", "));
                    }
                }
            }
            let message = format!("passed {passed} of {of} runs");
            cases += &format!(
                ">\n      <failure message=\"{}\" type=\"check\">{}</failure>\n    </testcase>\n",
                xml_escape(&message),
                xml_escape(&details)
            );
        }
        total += file.titles.len();
        total_failures += failures;
        let properties: String = [
            ("model", file.model.as_str()),
            ("route", target.route.as_str()),
            ("route_kind", target.kind.word()),
        ]
        .iter()
        .map(|(name, value)| {
            format!(
                "      <property name=\"{name}\" value=\"{}\"/>\n",
                xml_escape(value)
            )
        })
        .collect();
        suites += &format!(
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\">\n    <properties>\n{properties}    </properties>\n{cases}  </testsuite>\n",
            xml_escape(&file.name),
            file.titles.len()
        );
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"livetalk check\" tests=\"{total}\" failures=\"{total_failures}\" errors=\"0\">\n{suites}</testsuites>\n"
    )
}

/// Text for XML content and attributes: the five special characters escaped, and characters
/// XML 1.0 cannot hold at all (most control characters) replaced.
pub fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out += "&amp;",
            '<' => out += "&lt;",
            '>' => out += "&gt;",
            '"' => out += "&quot;",
            '\'' => out += "&apos;",
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let values = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0];
        assert_eq!(percentile(&values, 0.5), Some(50.0));
        assert_eq!(percentile(&values, 0.9), Some(90.0));
        assert_eq!(percentile(&[7.0], 0.9), Some(7.0));
        assert_eq!(percentile(&[], 0.5), None);
    }

    #[test]
    fn xml_text_is_escaped_and_kept_valid() {
        assert_eq!(
            xml_escape("a<b & \"c\" 'd'>\u{1}"),
            "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;\u{FFFD}"
        );
    }
}
