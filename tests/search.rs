//! Google Search end to end, against a Live server in the test (the mock, which plays a
//! grounded reply with two made-up sources when Search is declared): turned on by the config,
//! by `--search`, and off and on again from the tool list (F8), declared in `setup` beside the
//! function declarations; a grounded reply's searches, titles and links in the transcript (a
//! snapshot, and OSC 8 links where the terminal shows them), the event inspector, headless,
//! `--json`, replay and inspect; none shown where there are none; and `check` scenarios that
//! expect a search and its sources.

// Test output is the test runner's, not livetalk's: it may print directly.
#![allow(clippy::disallowed_macros)]
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use livetalk::app::{App, Entry, Msg, ToolRow, WireFilter, frame_json, wire_rows};
use livetalk::config::{FlagOverrides, Settings};
use livetalk::engine::{Engine, launch};
use livetalk::tools::Decider;
use livetalk_mock::MockServer;
use serde_json::Value;

use common::harness::{REACH, fast_mock, run_until};
use common::pane::Pane;
use common::{poll, run_livetalk, screen_text};

/// How long a step of a pane or a run may take.
const WAIT: Duration = Duration::from_secs(20);

const QUESTION: &str = "search the web for the weather in Paris";
const ENCYCLOPEDIA: &str = "the weather in Paris - Example Encyclopedia <https://encyclopedia.example/wiki/the-weather-in-paris>";
const NEWS: &str = "News about the weather in Paris - Example News <https://news.example.org/search?q=the-weather-in-paris>";

/// The settings of a run against `mock` with this config file (audio off) and `--search` or
/// not; the folder holding the config goes with them.
fn settings(mock: &MockServer, config: &str, search_flag: bool) -> (tempfile::TempDir, Settings) {
    let scratch = tempfile::tempdir().unwrap();
    let path = scratch.path().join("config.toml");
    std::fs::write(&path, format!("{config}\n[audio]\nenabled = false\n")).unwrap();
    let flags = FlagOverrides {
        config: Some(path),
        endpoint: Some(mock.base_url()),
        search: search_flag,
        ..FlagOverrides::default()
    };
    (scratch, Settings::resolve(&flags, &|_| None).unwrap())
}

/// A session set up as `livetalk` sets one up, connected and ready for the user.
async fn session(settings: &Settings) -> (App, Engine) {
    let (mut app, mut engine) = launch(settings, None, Decider::Person).await.unwrap();
    run_until(&mut app, &mut engine, REACH, "ready", App::ready_for_user).await;
    (app, engine)
}

async fn say(app: &mut App, engine: &mut Engine, line: &str) {
    livetalk::driver::apply(app, engine, Msg::UserText(line.into())).await;
    run_until(app, engine, REACH, "the reply", |app| {
        app.ready_for_user()
            && matches!(app.transcript().last(), Some(Entry::Model { status, .. }) if *status != livetalk::app::ModelTurnStatus::Streaming)
    })
    .await;
}

async fn key(app: &mut App, engine: &mut Engine, code: KeyCode) {
    let msg = Msg::Key(KeyEvent::new(code, KeyModifiers::NONE));
    livetalk::driver::apply(app, engine, msg).await;
}

/// The last reply's text and its sources, each `title <link>`.
fn last_reply(app: &App) -> (String, Vec<String>) {
    app.transcript()
        .iter()
        .rev()
        .find_map(|entry| match entry {
            Entry::Model {
                text_parts,
                transcript,
                grounding,
                ..
            } => Some((
                Entry::model_text(text_parts, transcript),
                grounding.sources.iter().map(|s| s.as_line()).collect(),
            )),
            _ => None,
        })
        .unwrap()
}

/// Turns Google Search on or off from the tool list, as a person would: F8, down to its row,
/// Space, Esc; then waits for the hand-over that declares the change.
async fn toggle_search(app: &mut App, engine: &mut Engine) {
    key(app, engine, KeyCode::F(8)).await;
    let listed = screen(app, 120, 40);
    assert!(
        listed.contains("google_search  (runs at Google)"),
        "the tool list shows Search: {listed}"
    );
    let row = app
        .tool_rows()
        .iter()
        .position(|row| matches!(row, ToolRow::Tool(tool) if tool.runs_at_google()))
        .expect("Search is listed");
    for _ in 0..row {
        key(app, engine, KeyCode::Down).await;
    }
    key(app, engine, KeyCode::Char(' ')).await;
    assert!(app.tools_pending());
    key(app, engine, KeyCode::Esc).await;
    run_until(app, engine, REACH, "handed over", |app| {
        !app.tools_pending() && app.ready_for_user()
    })
    .await;
}

/// The screen drawn at `width`×`height`.
fn screen(app: &App, width: u16, height: u16) -> String {
    let mut terminal =
        ratatui::Terminal::new(ratatui::backend::TestBackend::new(width, height)).unwrap();
    terminal
        .draw(|frame| {
            livetalk::ui::draw(frame, app);
        })
        .unwrap();
    screen_text(terminal.backend().buffer())
}

/// The rows of the screen's conversation box, drawn at `width`×`height`.
fn conversation(app: &App, width: u16, height: u16) -> String {
    let screen = screen(app, width, height);
    let rows: Vec<&str> = screen
        .lines()
        .skip_while(|row| !row.starts_with("┌ Conversation"))
        .collect();
    let end = rows.iter().position(|row| row.starts_with('└')).unwrap();
    rows[..=end].join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_config_declares_search_and_the_tool_list_turns_it_off_and_on() {
    let mock = fast_mock(Vec::new()).await;
    let (_scratch, settings) = settings(&mock, "[tools]\ngoogle_search = true\n", false);
    let (mut app, mut engine) = session(&settings).await;
    assert_eq!(mock.search_declared(), [true]);
    let functions = &mock.declared_tools()[0];
    assert!(
        functions.contains(&"get_device_status".to_owned()),
        "the functions stay beside Search: {functions:?}"
    );

    say(&mut app, &mut engine, QUESTION).await;
    let (reply, sources) = last_reply(&app);
    assert!(reply.starts_with("I searched the web for"), "{reply}");
    assert_eq!(sources, [ENCYCLOPEDIA, NEWS]);
    insta::assert_snapshot!("grounded_reply_80x30", conversation(&app, 80, 30));
    // The event inspector lists the frame with its search and both sources.
    let rows = wire_rows(app.wire(), WireFilter::All);
    let grounded = rows
        .iter()
        .find(|row| row.summary.contains(" · 2 sources: "))
        .expect("the grounding frame");
    assert!(
        grounded
            .summary
            .contains("searched \"the weather in Paris\" · 2 sources: "),
        "{}",
        grounded.summary
    );
    assert!(
        grounded.summary.contains(
            "the weather in Paris - Example Encyclopedia <https://encyclopedia.example/wiki/the-weather-in-paris>"
        ),
        "{}",
        grounded.summary
    );
    // The row is one line, cut; the frame's JSON holds both sources whole.
    let json = frame_json(&app.wire().frames()[grounded.first]);
    for link in [
        "https://encyclopedia.example/wiki/the-weather-in-paris",
        "https://news.example.org/search?q=the-weather-in-paris",
    ] {
        assert!(json.contains(link), "{json}");
    }

    // A reply that searched nothing shows no sources.
    say(&mut app, &mut engine, "Is the living room lamp on?").await;
    let (reply, sources) = last_reply(&app);
    assert!(reply.contains("off"), "{reply}");
    assert!(sources.is_empty(), "{sources:?}");
    let drawn = conversation(&app, 80, 40);
    assert_eq!(
        drawn.matches('↗').count(),
        2,
        "only the first reply's: {drawn}"
    );

    // Off from the tool list: the next setup leaves Search out, keeps the functions and the
    // conversation, and the model says it cannot search.
    toggle_search(&mut app, &mut engine).await;
    assert_eq!(mock.search_declared(), [true, false]);
    assert_eq!(mock.declared_tools()[1], *functions);
    assert_eq!(mock.resumptions(), 1, "the conversation was kept");
    say(&mut app, &mut engine, "search the web for otters").await;
    let (reply, sources) = last_reply(&app);
    assert!(reply.contains("can't search the web"), "{reply}");
    assert!(sources.is_empty());

    // And on again.
    toggle_search(&mut app, &mut engine).await;
    assert_eq!(mock.search_declared(), [true, false, true]);
    say(&mut app, &mut engine, "search the web for otters").await;
    assert_eq!(last_reply(&app).1.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_flag_declares_search_and_without_either_it_is_not() {
    let mock = fast_mock(Vec::new()).await;
    let (_scratch, flagged) = settings(&mock, "", true);
    let (_app, _engine) = session(&flagged).await;
    assert_eq!(mock.search_declared(), [true]);

    let plain_mock = fast_mock(Vec::new()).await;
    let (_scratch, plain) = settings(&plain_mock, "", false);
    let (mut app, mut engine) = session(&plain).await;
    assert_eq!(plain_mock.search_declared(), [false]);
    assert!(
        !app.tool_rows()
            .iter()
            .any(|row| matches!(row, ToolRow::Tool(tool) if tool.runs_at_google())),
        "not listed when not declared"
    );
    say(&mut app, &mut engine, QUESTION).await;
    let (reply, sources) = last_reply(&app);
    assert!(reply.contains("can't search the web"), "{reply}");
    assert!(sources.is_empty());
}

/// The TUI decides from the terminal's environment whether links are written as OSC 8
/// hyperlinks (`FORCE_HYPERLINK` says so outright): what it writes to a real pseudo-terminal
/// holds a source's link as one, or none at all.
#[test]
fn the_tui_writes_links_as_osc_8_where_the_terminal_shows_them() {
    let link = "https://encyclopedia.example/wiki/the-weather-in-paris";
    for (force, linked) in [("1", true), ("0", false)] {
        let scratch = tempfile::tempdir().unwrap();
        let args = ["--offline", "--search", "--no-audio"];
        let pane = Pane::start_with(scratch.path(), 100, 30, &args, |tmux| {
            tmux.env("FORCE_HYPERLINK", force);
        });
        let raw = pane.pipe_output();
        pane.wait_for("the input line", WAIT, |s| s.contains("Type a message"));
        pane.type_line(QUESTION);
        pane.wait_for("the sources", WAIT, |s| {
            s.contains("news.example.org/search?q=the-weather-in-paris")
        });
        // What the terminal was sent, as it reached tmux.
        let written = poll(WAIT, Duration::from_millis(50), || {
            let bytes = std::fs::read(&raw).unwrap_or_default();
            let text = String::from_utf8_lossy(&bytes).into_owned();
            text.contains("q=the-weather-in-paris").then_some(text)
        })
        .expect("the pane's output reaches the file");
        let hyperlink = format!("\x1b]8;;{link}\x1b\\{link}\x1b]8;;\x1b\\");
        assert_eq!(
            written.contains(&hyperlink),
            linked,
            "FORCE_HYPERLINK={force}: {written:?}"
        );
        assert_eq!(
            written.contains("\x1b]8;"),
            linked,
            "FORCE_HYPERLINK={force}"
        );
        pane.keys("C-c");
        pane.wait_exit(WAIT);
    }
}

// ---- the binary: headless, --json, replay, inspect, check ----

fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn model_events(stdout: &str) -> Vec<Value> {
    json_lines(stdout)
        .into_iter()
        .filter(|e| e["type"] == "model")
        .collect()
}

/// The headless text of a grounded reply and a plain one, as a session printed it.
fn assert_grounded_lines(stdout: &str) {
    let lines: Vec<&str> = stdout.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("Gemini: I searched the web for \"the weather in Paris\"."))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert_eq!(
        lines[at + 1..at + 4],
        [
            "  Searched: \"the weather in Paris\"",
            &format!("  Source: {ENCYCLOPEDIA}"),
            &format!("  Source: {NEWS}"),
        ],
        "{stdout}"
    );
    let lamp = lines
        .iter()
        .position(|l| l.starts_with("Gemini: No, the living room lamp"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        lines[lamp + 1..].iter().all(|l| !l.starts_with("  S")),
        "none shown when there are none: {stdout}"
    );
}

fn assert_grounded_json(stdout: &str) {
    let models = model_events(stdout);
    let grounded = &models[0];
    assert_eq!(
        grounded["searches"],
        serde_json::json!(["the weather in Paris"])
    );
    assert_eq!(
        grounded["sources"],
        serde_json::json!([
            {"title": "the weather in Paris - Example Encyclopedia", "uri": "https://encyclopedia.example/wiki/the-weather-in-paris", "domain": "encyclopedia.example"},
            {"title": "News about the weather in Paris - Example News", "uri": "https://news.example.org/search?q=the-weather-in-paris", "domain": "news.example.org"},
        ])
    );
    assert!(
        models[1].get("sources").is_none() && models[1].get("searches").is_none(),
        "none where there are none: {}",
        models[1]
    );
}

const TURNS: [&str; 2] = [QUESTION, "Is the living room lamp on?"];

/// The demo model's grounded reply headless, in lines and in JSON, recorded; the recording
/// replays and inspects with the same searches, titles and links.
#[test]
fn headless_json_replay_and_inspect_show_the_sources() {
    let scratch = tempfile::tempdir().unwrap();
    let rec = scratch.path().join("rec");
    let run = run_livetalk(
        scratch.path(),
        &[
            "--headless",
            "--offline",
            "--search",
            "--record",
            rec.to_str().unwrap(),
        ],
        &[],
        &TURNS,
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_grounded_lines(&run.stdout);

    let json = run_livetalk(
        scratch.path(),
        &["--headless", "--json", "--offline", "--search"],
        &[],
        &TURNS,
    );
    assert_eq!(json.code, Some(0), "{}", json.stderr);
    assert_grounded_json(&json.stdout);

    // Without Search the demo model says it cannot search, and nothing is listed.
    let off = run_livetalk(
        scratch.path(),
        &["--headless", "--offline"],
        &[],
        &[QUESTION],
    );
    assert_eq!(off.code, Some(0), "{}", off.stderr);
    assert!(
        off.stdout.contains("can't search the web"),
        "{}",
        off.stdout
    );
    assert!(!off.stdout.contains("Source:"), "{}", off.stdout);

    let dir = rec.to_str().unwrap();
    let replay = run_livetalk(
        scratch.path(),
        &["replay", dir, "--headless", "--instant"],
        &[],
        &[],
    );
    assert_eq!(replay.code, Some(0), "{}", replay.stderr);
    assert_grounded_lines(&replay.stdout);
    let replay = run_livetalk(
        scratch.path(),
        &["replay", dir, "--headless", "--json", "--instant"],
        &[],
        &[],
    );
    assert_grounded_json(&replay.stdout);

    let inspect = run_livetalk(scratch.path(), &["inspect", dir], &[], &[]);
    assert_eq!(inspect.code, Some(0), "{}", inspect.stderr);
    let report = &inspect.stdout;
    assert!(
        report.contains(
            "Google Search: 1 grounded reply, 1 search, 2 sources\n  searched \"the weather in Paris\"\n"
        ),
        "{report}"
    );
    assert!(
        report.contains(&format!("    {ENCYCLOPEDIA}\n    {NEWS}\n")),
        "{report}"
    );
    let inspect = run_livetalk(scratch.path(), &["inspect", dir, "--json"], &[], &[]);
    let summary: Value = serde_json::from_str(&inspect.stdout).unwrap();
    let replies = summary["grounded_replies"].as_array().unwrap();
    assert_eq!(replies.len(), 1, "{summary}");
    assert_eq!(
        replies[0]["sources"][1]["uri"],
        "https://news.example.org/search?q=the-weather-in-paris"
    );
    let markdown = run_livetalk(scratch.path(), &["inspect", dir, "--markdown"], &[], &[]);
    assert!(
        markdown.stdout.contains(
            "Sources:\n\n- [the weather in Paris - Example Encyclopedia](<https://encyclopedia.example/wiki/the-weather-in-paris>)\n"
        ),
        "{}",
        markdown.stdout
    );

    // A recording without a search says nothing of one.
    let plain = scratch.path().join("plain");
    let run = run_livetalk(
        scratch.path(),
        &[
            "--headless",
            "--offline",
            "--record",
            plain.to_str().unwrap(),
        ],
        &[],
        &["Is the living room lamp on?"],
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let inspect = run_livetalk(
        scratch.path(),
        &["inspect", plain.to_str().unwrap()],
        &[],
        &[],
    );
    assert!(
        !inspect.stdout.contains("Google Search"),
        "{}",
        inspect.stdout
    );
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

/// A scenario expects a search and a source; it turns Search on itself, or `--search` does;
/// without it the check fails with the expected beside the actual.
#[test]
fn check_scenarios_expect_a_search_and_its_sources() {
    let scratch = tempfile::tempdir().unwrap();
    let turns = "[[turn]]\nsay = \"search the web for otters\"\n[turn.expect]\nno_tools = true\nsearched = true\nsource_contains = [\"encyclopedia.example\", \"Example News\"]\n\n[[turn]]\nsay = \"Is the living room lamp on?\"\n[turn.expect]\nsearched = false\n";
    let on = write(
        scratch.path(),
        "on.toml",
        &format!("google_search = true\n\n{turns}"),
    );
    let run = run_livetalk(scratch.path(), &["check", "--offline", &on], &[], &[]);
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains(
            "✔ turn 1: search the web for otters  [no call]  searched \"otters\" (2 sources)"
        ),
        "{}",
        run.stdout
    );

    let plain = write(scratch.path(), "plain.toml", turns);
    let run = run_livetalk(
        scratch.path(),
        &["check", "--offline", "--search", &plain],
        &[],
        &[],
    );
    assert_eq!(
        run.code,
        Some(0),
        "--search turns it on: {}\n{}",
        run.stdout,
        run.stderr
    );

    let run = run_livetalk(
        scratch.path(),
        &["check", "--offline", &plain, "--json"],
        &[],
        &[],
    );
    assert_eq!(run.code, Some(1), "{}\n{}", run.stdout, run.stderr);
    let turn = json_lines(&run.stdout)
        .into_iter()
        .find(|e| e["type"] == "turn" && e["turn"] == 1)
        .unwrap();
    assert_eq!(
        turn["problems"],
        serde_json::json!([
            "expected a Google Search, got none",
            "expected a source containing \"encyclopedia.example\", got no search",
            "expected a source containing \"Example News\", got no search",
        ])
    );

    let bad = write(
        scratch.path(),
        "bad.toml",
        "[[turn]]\nsay = \"hi\"\n[turn.expect]\nsearched = false\nsource_contains = \"x\"\n",
    );
    let run = run_livetalk(scratch.path(), &["check", "--offline", &bad], &[], &[]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(
        run.stderr.contains("key `turn[0].expect.searched`: searched = false and source_contains contradict each other"),
        "{}",
        run.stderr
    );
}
