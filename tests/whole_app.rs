//! The whole app in process, as gitui tests itself: the real engine against the embedded mock
//! over a loopback socket, the real TUI presenter drawing into ratatui's `TestBackend`, keys in
//! and frames out. One recorded conversation has a tool call, a barge-in (Ctrl-B), a dropped
//! connection the link recovers from, and ends with Ctrl-C in the middle of a reply. Frames are
//! snapshotted; the recording then replays, in the same TUI and headless, exactly as shown.

// Test output is the test runner's, not livetalk's: it may print directly.
#![allow(clippy::disallowed_macros)]
#![allow(clippy::unwrap_used)]

mod common;

use std::io;
use std::path::Path;
use std::pin::Pin;
use std::time::Duration;

use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
use futures_util::Stream;
use livetalk::app::{App, ModelTurnStatus, ToolCallRecord};
use livetalk::config::{FlagOverrides, Settings};
use livetalk::engine::launch;
use livetalk::record::Recording;
use livetalk::record::replay::{Pacing, Replay, initial_app};
use livetalk_mock::{Fault, FaultAction, MockOptions, MockServer, Moment, Scenario};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use tokio::sync::mpsc;

use common::{SMART_HOME_LINES, replies, run_livetalk, screen_text};

const WIDTH: u16 = 110;
const HEIGHT: u16 = 34;
const WAIT: Duration = Duration::from_secs(20);

type Events = Pin<Box<dyn Stream<Item = io::Result<Event>>>>;

/// Terminal events from a channel, as crossterm's `EventStream` would deliver them.
fn events(keys: mpsc::UnboundedReceiver<Event>) -> Events {
    Box::pin(futures_util::stream::unfold(keys, |mut keys| async move {
        keys.recv().await.map(|event| (Ok(event), keys))
    }))
}

/// The session panel's rows whose values are measured as the test runs (latencies, ages,
/// the sparkline): a number's width varies, so their values are masked whole. The last
/// turn's second row (its first audio) has no label of its own.
const MEASURED_ROWS: [&str; 6] = [
    "Last turn",
    "            first audio",
    "Heard after",
    "Last 20",
    "Connection",
    "Handle",
];

/// The screen with what changes from run to run masked: digits (times of day, durations,
/// token counts, backoff delays), the session panel's measured figures, the spinner and the
/// fading highlight of a changed device.
fn stable(screen: &str) -> String {
    let measured: Vec<String> = screen
        .split('\n')
        .map(|line| {
            let Some(at) = MEASURED_ROWS
                .iter()
                .find_map(|label| line.find(&format!("│ {label} ")))
            else {
                return line.to_owned();
            };
            let value_at = at + "│ ".len() + 12;
            let (head, rest) = line.split_at(value_at.min(line.len()));
            let width = rest.trim_end_matches('│').chars().count();
            let tail = &rest[rest.trim_end_matches('│').len()..];
            format!("{head}{:<width$}{tail}", "(measured)")
        })
        .collect();
    measured
        .join("\n")
        .chars()
        .map(|c| match c {
            '0'..='9' => '#',
            '⠋' | '⠙' | '⠹' | '⠸' | '⠼' | '⠴' | '⠦' | '⠧' | '⠇' | '⠏' => '*',
            // A changed device's highlight fades with the animation tick.
            '✦' => ' ',
            c => c,
        })
        .collect()
}

/// The user's side: keys to send, frames to watch.
struct User {
    keys: mpsc::UnboundedSender<Event>,
    frames: mpsc::UnboundedReceiver<Buffer>,
    last: String,
}

impl User {
    /// A user at a fresh test terminal, and what the app needs of it: the terminal, the
    /// events the user makes and where the drawn frames go.
    fn at_a_terminal() -> (
        User,
        Terminal<TestBackend>,
        Events,
        mpsc::UnboundedSender<Buffer>,
    ) {
        let terminal = Terminal::new(TestBackend::new(WIDTH, HEIGHT)).unwrap();
        let (keys, key_events) = mpsc::unbounded_channel();
        let (frames_tx, frames) = mpsc::unbounded_channel();
        let user = User {
            keys,
            frames,
            last: String::new(),
        };
        (user, terminal, events(key_events), frames_tx)
    }

    fn press(&self, code: KeyCode, modifiers: KeyModifiers) {
        self.keys
            .send(Event::Key(KeyEvent::new(code, modifiers)))
            .unwrap();
    }

    fn say(&self, line: &str) {
        for c in line.chars() {
            self.press(KeyCode::Char(c), KeyModifiers::NONE);
        }
        self.press(KeyCode::Enter, KeyModifiers::NONE);
    }

    /// Waits for a frame on which `done` holds, and returns it.
    async fn wait_for(&mut self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let found = tokio::time::timeout(WAIT, async {
            while !done(&self.last) {
                match self.frames.recv().await {
                    Some(frame) => self.last = screen_text(&frame),
                    None => return false,
                }
            }
            true
        })
        .await;
        assert!(
            found == Ok(true),
            "never saw {what}; the last frame:\n{}",
            self.last
        );
        self.last.clone()
    }
}

/// The transcript pane's rows, where the conversation shows.
fn conversation(screen: &str) -> String {
    screen
        .lines()
        .skip(1)
        .take(14)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Everything below the status line, which names the (temporary) recording folder.
fn below_status(screen: &str) -> String {
    screen.lines().skip(1).collect::<Vec<_>>().join("\n")
}

fn settings(scratch: &Path, mock: &MockServer, record: &Path) -> Settings {
    let config = scratch.join("config.toml");
    std::fs::write(&config, "").unwrap();
    Settings::resolve(
        &FlagOverrides {
            config: Some(config),
            endpoint: Some(mock.base_url()),
            no_audio: true,
            record: Some(Some(record.to_path_buf())),
            ..FlagOverrides::default()
        },
        &|_| None,
    )
    .unwrap()
}

/// Tool calls as the log shows them, but for the time of day they arrived.
fn calls(app: &App) -> Vec<ToolCallRecord> {
    app.tool_calls()
        .iter()
        .map(|call| ToolCallRecord {
            started_at: jiff::civil::Time::midnight(),
            ..call.clone()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_conversation_with_a_tool_call_a_barge_in_and_a_reconnect_keys_in_frames_out() {
    let scratch = tempfile::tempdir().unwrap();
    // Replies at three times real time, so a reply can be cut off; the second turn loses its
    // connection as it arrives.
    let mock = MockServer::start(MockOptions {
        speed: 3.0,
        scenario: Scenario::new(vec![Fault::once(Moment::UserTurn, 2, FaultAction::Drop)]),
        ..MockOptions::loopback()
    })
    .await
    .unwrap();
    let dir = scratch.path().join("recorded");
    let settings = settings(scratch.path(), &mock, &dir);
    let (mut app, mut engine) = launch(&settings, None, livetalk::tools::Decider::Person)
        .await
        .unwrap();
    let (mut user, terminal, events, frames) = User::at_a_terminal();
    let ui = livetalk::tui::run_on(&mut app, &mut engine, terminal, events, Some(frames));
    let script = async {
        user.wait_for("the session connected", |s| s.contains("listening"))
            .await;

        // A tool call: the transcript, the tool log and the device panel show it.
        user.say(SMART_HOME_LINES[0]);
        let answered = user
            .wait_for("the first reply, complete", |s| {
                s.contains("Gemini: No, the living room lamp is currently off.")
                    && s.contains("Gemini is listening")
                    && !s.contains('▍')
            })
            .await;
        insta::assert_snapshot!("tool_call_answered", stable(&below_status(&answered)));

        // The second turn loses its connection as it arrives; the link reconnects and the
        // turn is answered on the new connection.
        user.say(SMART_HOME_LINES[1]);
        let recovered = user
            .wait_for("the reconnect and the whole answer", |s| {
                s.contains("Reconnected")
                    && s.contains("Gemini: Alright, I've turned on the living room lamp")
                    && s.contains("Gemini is listening")
                    && !s.contains('▍')
            })
            .await;
        insta::assert_snapshot!(
            "answered_after_a_reconnect",
            stable(&conversation(&recovered))
        );

        // Ctrl-B while Gemini speaks: silenced at once, the reply marked interrupted.
        user.say(SMART_HOME_LINES[2]);
        user.wait_for("the third reply streaming", |s| {
            s.contains("Gemini is speaking") && s.contains("Gemini: The kitchen")
        })
        .await;
        user.press(KeyCode::Char('b'), KeyModifiers::CONTROL);
        let barged = user
            .wait_for("the barge-in", |s| {
                s.contains("[interrupted]") && s.contains("Gemini is listening")
            })
            .await;
        let cut = barged
            .lines()
            .find(|l| l.contains("Gemini: The kitchen"))
            .unwrap_or_default();
        assert!(
            cut.contains("[interrupted]") && !cut.contains("Celsius."),
            "the reply was not cut:\n{barged}"
        );

        // Ctrl-C in the middle of a reply ends the session; the rest of the reply is cut.
        user.say("Dim the lamp to 30% and lock the door");
        user.wait_for("the last reply streaming", |s| {
            s.contains("Gemini: Alright, I've set")
        })
        .await;
        user.press(KeyCode::Char('c'), KeyModifiers::CONTROL);
    };
    let (ran, ()) = tokio::time::timeout(WAIT * 3, async { tokio::join!(ui, script) })
        .await
        .expect("the app ran to its end");
    ran.unwrap();
    drop(engine);

    // Live: ended by the user, cleanly, the last reply cut where Ctrl-C cut it.
    assert!(app.ended_cleanly(), "{:?}", app.connection());
    assert_eq!(app.reconnects(), 1);
    let statuses: Vec<ModelTurnStatus> = replies(&app).into_iter().map(|r| r.1).collect();
    assert_eq!(
        statuses,
        [
            ModelTurnStatus::Complete,
            ModelTurnStatus::Complete,
            ModelTurnStatus::Interrupted,
            ModelTurnStatus::Interrupted,
        ],
        "{:#?}",
        app.transcript()
    );

    // Replayed in the same TUI: the same conversation, tool log and notices.
    let recording = Recording::load(&dir).unwrap();
    let (mut playback, warnings) = Replay::new(&recording, Pacing::Instant);
    assert!(warnings.is_empty(), "{warnings:?}");
    let mut replayed = initial_app(&recording, None, playback.total());
    let (mut viewer, terminal, events, frames) = User::at_a_terminal();
    let ui = livetalk::tui::run_on(&mut replayed, &mut playback, terminal, events, Some(frames));
    let watch = async {
        let end = viewer
            .wait_for("the replay's end", |s| s.contains("(finished)"))
            .await;
        viewer.press(KeyCode::Char('q'), KeyModifiers::NONE);
        end
    };
    let (ran, end) = tokio::time::timeout(WAIT, async { tokio::join!(ui, watch) })
        .await
        .expect("the replay ran to its end");
    ran.unwrap();
    assert_eq!(replayed.transcript(), app.transcript());
    assert_eq!(calls(&replayed), calls(&app));
    assert_eq!(replayed.notices(), app.notices());
    assert_eq!(replayed.reconnects(), app.reconnects());
    assert_eq!(replayed.handovers(), app.handovers());
    assert!(replayed.ended_cleanly());
    assert!(end.contains("[interrupted]"), "{end}");

    // Replayed headless and inspected, as a person would from the shell.
    let dir_arg = dir.to_str().unwrap();
    let headless = run_livetalk(
        scratch.path(),
        &["replay", dir_arg, "--headless", "--instant"],
        &[],
        &[],
    );
    assert_eq!(headless.code, Some(0), "{}", headless.stderr);
    let printed: Vec<&str> = headless
        .stdout
        .lines()
        .filter(|l| l.starts_with("Gemini: "))
        .collect();
    let shown: Vec<String> = replies(&app)
        .into_iter()
        .map(|(text, status)| match status {
            ModelTurnStatus::Complete => format!("Gemini: {text}"),
            _ => format!("Gemini: {text} [interrupted]"),
        })
        .collect();
    assert_eq!(printed, shown, "{}", headless.stdout);
    assert!(!headless.stderr.contains("killed"), "{}", headless.stderr);

    let inspect = run_livetalk(scratch.path(), &["inspect", dir_arg], &[], &[]);
    assert_eq!(inspect.code, Some(0), "{}", inspect.stderr);
    // The Ctrl-B barge-in counts, and so does every `interrupted` the server sent (the last
    // turn, typed while the rest of the cut reply still streamed, may have drawn one, as the
    // wire tap shows); Ctrl-C ends the session and is no interruption.
    let server_interrupts = std::fs::read_to_string(dir.join("session.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|l| l["type"] == "recv" && l["message"]["serverContent"]["interrupted"] == true)
        .count();
    let interruptions = format!("Interruptions: {} (", 1 + server_interrupts);
    for expected in ["User turns: 4\n", &interruptions, "(reconnects: 1)"] {
        assert!(
            inspect.stdout.contains(expected),
            "{expected:?} in:\n{}",
            inspect.stdout
        );
    }
}
