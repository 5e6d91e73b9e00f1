//! Recording, replay and inspection, end to end with the binary: record against the mock
//! (with an interruption and a reconnect), then replay, inspect, list; crash safety (SIGKILL)
//! and corrupted lines. In process: a slow tool call and a lost connection, recorded through
//! the engine and replayed into an app that ends up showing what the original showed.

// Test output is the test runner's, not livetalk's: it may print directly.
#![allow(clippy::disallowed_macros)]
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use common::harness::{
    Hang, REACH, connect, default_settings, fast_mock, run_until, test_policy, tool_calls_at,
};
use common::ws::WAIT;
use common::*;
use livetalk::app::{App, AppInit, ConnectionState, Msg, ToolState};
use livetalk::driver::{Source as _, apply};
use livetalk::engine::Engine;
use livetalk::record::replay::{self, Pacing, Replay};
use livetalk::record::{Recorder, Recording};
use livetalk::tools::SmartHome;
use livetalk_mock::{Fault, FaultAction, Moment};
use serde_json::{Value, json};

const FAKE_KEY: &str = "fake-test-key-recording-0123456789";

fn lines(dir: &Path) -> Vec<serde_json::Value> {
    recording_lines(dir)
}

/// Sum of the sample counts the log refers to in `file`.
/// Samples of `file` the log refers to; a chunk the wire tap wrote and the app applied is
/// referred to twice but held once.
fn referenced_samples(dir: &Path, file: &str) -> u64 {
    type Chunks = std::collections::BTreeSet<(u64, u64)>;
    fn walk(value: &serde_json::Value, file: &str, chunks: &mut Chunks) {
        match value {
            serde_json::Value::Object(map) => {
                if map.get("file").and_then(|f| f.as_str()) == Some(file) {
                    let offset = map["sample_offset"].as_u64().unwrap();
                    chunks.insert((offset, map["sample_count"].as_u64().unwrap()));
                }
                map.values().for_each(|v| walk(v, file, chunks));
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| walk(v, file, chunks)),
            _ => {}
        }
    }
    let mut chunks = Chunks::new();
    for line in lines(dir) {
        walk(&line, file, &mut chunks);
    }
    // Chunks never overlap: each starts where the one before it ended.
    let mut end = 0;
    for (offset, count) in &chunks {
        assert_eq!(*offset, end, "{file}: a gap or overlap at sample {offset}");
        end = offset + count;
    }
    end
}

fn tool_lines(stdout: &str) -> Vec<String> {
    // Name and arguments only: durations and results may differ between runs.
    stdout
        .lines()
        .filter(|l| l.starts_with("Tool: "))
        .map(|l| l.split(" -> ").next().unwrap().to_owned())
        .collect()
}

/// The notices of a headless text run: on stderr, one line each.
fn notice_lines(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| {
            ["info", "warning", "error"]
                .iter()
                .any(|level| l.starts_with(&format!("livetalk: {level}: ")))
        })
        .collect()
}

#[test]
fn recorded_session_replays_inspects_and_reruns_against_the_mock() {
    let scratch = tempfile::tempdir().unwrap();
    let (original, dir, mock) =
        record_interrupted_session(scratch.path(), &[("GEMINI_API_KEY", FAKE_KEY)]);
    let dir_arg = dir.to_str().unwrap();
    assert_eq!(
        original.code,
        Some(0),
        "{}\n{}",
        original.stdout,
        original.stderr
    );
    assert_eq!(tool_lines(&original.stdout).len(), 3, "{}", original.stdout);
    // The end of input is one intent, so one line, however long the session takes to close.
    let ends = lines(&dir)
        .iter()
        .filter(|l| l["type"] == "applied" && l["msg"] == "end_session")
        .count();
    assert_eq!(ends, 1, "one intent, one line");
    let replies: Vec<&str> = original
        .stdout
        .lines()
        .filter(|l| l.starts_with("Gemini: "))
        .collect();
    assert_eq!(replies.len(), 3, "{}", original.stdout);
    assert!(
        replies[0].ends_with(" [interrupted]") && replies[0].len() > "Gemini:  [interrupted]".len(),
        "the first reply was cut off after its first words: {}",
        replies[0]
    );
    assert!(!replies[1].contains("[interrupted]"), "{}", replies[1]);
    let notices = notice_lines(&original.stderr);
    assert_eq!(notices.len(), 2, "{}", original.stderr);
    assert!(
        notices[0].starts_with("livetalk: warning: Connection lost: ")
            && notices[0].ends_with(" s…"),
        "{}",
        notices[0]
    );
    assert_eq!(
        notices[1],
        "livetalk: info: Reconnected; the conversation continues."
    );

    // Replay reproduces the original output exactly, reconnect notices included, with no
    // network (the mock is gone).
    drop(mock);
    let replayed = run_livetalk(
        scratch.path(),
        &["replay", dir_arg, "--headless", "--instant"],
        &[],
        &[],
    );
    assert_eq!(
        replayed.stdout, original.stdout,
        "stderr: {}",
        replayed.stderr
    );
    // Its stderr is the notices and what the tokens came to, as the session said it, and
    // nothing else (no warning about the recording).
    let tokens = |stderr: &str| {
        stderr
            .lines()
            .filter(|l| l.starts_with("livetalk: tokens: "))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let spent = tokens(&original.stderr);
    assert_eq!(spent.len(), 1, "{}", original.stderr);
    // `livetalk mock` is not Google: its tokens are counted, not priced.
    assert!(spent[0].ends_with(", not priced"), "{}", spent[0]);
    let mut expected: Vec<String> = notices.iter().map(|l| (*l).to_owned()).collect();
    expected.extend(spent.iter().cloned());
    assert_eq!(replayed.stderr.lines().collect::<Vec<_>>(), expected);
    assert_eq!(replayed.code, Some(0));

    // Inspect counts what happened.
    let inspect = run_livetalk(scratch.path(), &["inspect", dir_arg], &[], &[]);
    assert_eq!(inspect.code, Some(0), "{}", inspect.stderr);
    for expected in [
        "User turns: 3\n",
        // The interrupted reply ends with a turnComplete too.
        "Model turns: 3\n",
        "Tool calls: 3 (0 cancelled)\n",
        "Connections: 2 (reconnects: 1)\n",
        "Interruptions: 1 (1 by the user, 0 blamed on the echo)\n",
        "Closes: 2\n",
        "code none, by the server or network: The connection was lost without a close message (1006)",
        // The mock answers the client's Close, so its code is recorded.
        "code 1000, by livetalk: Session ended.",
        // The second question went out twice: on the dropped connection, then again.
        "Cost: not priced\n",
        "mic.wav: none",
    ] {
        assert!(
            inspect.stdout.contains(expected),
            "{expected:?} in:\n{}",
            inspect.stdout
        );
    }
    assert_eq!(
        inspect.stdout.matches("  turn ").count(),
        4,
        "{}",
        inspect.stdout
    );
    // The second question went out twice: on the dropped connection (no audio came back on
    // it), then again; headless has no speaker, so nothing was heard.
    let turns: Vec<&str> = inspect
        .stdout
        .lines()
        .filter(|l| l.starts_with("  turn "))
        .collect();
    assert!(
        turns.iter().all(|t| t.contains(": typed → first reply ")),
        "{turns:?}"
    );
    assert!(
        turns[1].contains("first audio —, first audible —"),
        "{turns:?}"
    );
    for turn in [turns[0], turns[2], turns[3]] {
        assert!(turn.contains(" ms, first audible —, 0 underruns"), "{turn}");
    }
    // The same figures as JSON, computed by the same code.
    let json = run_livetalk(scratch.path(), &["inspect", dir_arg, "--json"], &[], &[]);
    assert_eq!(json.code, Some(0), "{}", json.stderr);
    let report: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let json_turns = report["turns"].as_array().unwrap();
    assert_eq!(json_turns.len(), 4, "{report}");
    for (line, turn) in turns.iter().zip(json_turns) {
        assert_eq!(turn["ended_by"], "typed");
        let shown = |key: &str| match turn[key].as_u64() {
            Some(ms) => format!("{ms} ms"),
            None => "—".to_owned(),
        };
        let expected = format!(
            "first reply {}, first audio {}, first audible {}",
            shown("first_message_ms"),
            shown("first_audio_ms"),
            shown("first_audible_ms")
        );
        assert!(line.contains(&expected), "{line} / {turn}");
    }
    assert_eq!(report["interruptions"]["by_user"], 1, "{report}");
    assert_eq!(report["interruptions"]["echo"], 0);
    assert_eq!(report["offline"], false);
    assert!(report["cost_usd"].is_null(), "{report}");
    // The start to the second with its offset, as JSON readers take it.
    let started = report["started_at"].as_str().unwrap();
    assert!(
        started.len() == "2026-11-25T16:48:27+00:00".len()
            && !started.contains('.')
            && !started.contains('['),
        "{started}"
    );
    // One count everywhere: the service's totals as the wire carried them, the headless
    // summary's, and inspect's in words and in JSON.
    let reported: u64 = lines(&dir)
        .iter()
        .filter(|l| l["type"] == "recv")
        .filter_map(|l| l["message"]["usageMetadata"]["totalTokenCount"].as_u64())
        .sum();
    assert!(reported > 0, "the mock reports usage");
    assert_eq!(
        report["tokens"]["total"].as_u64(),
        Some(reported),
        "{report}"
    );
    let words = |n: u64| {
        let digits = n.to_string();
        let mut grouped = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                grouped.push(',');
            }
            grouped.push(c);
        }
        grouped
    };
    assert!(
        spent[0].starts_with(&format!("livetalk: tokens: {} (", words(reported))),
        "{}",
        spent[0]
    );
    assert!(
        inspect
            .stdout
            .contains(&format!("Tokens: {} (", words(reported))),
        "{}",
        inspect.stdout
    );
    assert!(
        inspect
            .stdout
            .contains("get_device_status {\"device_name\":\"living room lamp\"} -> ok"),
        "{}",
        inspect.stdout
    );

    // The Markdown transcript has the tool calls with arguments and results, the cut-off
    // reply and the reconnect.
    let markdown = run_livetalk(
        scratch.path(),
        &["inspect", dir_arg, "--markdown"],
        &[],
        &[],
    );
    assert!(
        markdown
            .stdout
            .contains("**You:** Is the living room lamp on?")
    );
    assert_eq!(markdown.stdout.matches("**Tool call** `").count(), 3);
    assert_eq!(markdown.stdout.matches(" _[interrupted]_").count(), 1);
    assert!(
        markdown.stdout.contains("\"temperature_celsius\": 20"),
        "{}",
        markdown.stdout
    );
    assert!(
        markdown
            .stdout
            .contains("> Reconnected; the conversation continues."),
        "{}",
        markdown.stdout
    );

    // model.wav holds exactly the audio the log refers to, at 24 kHz mono; no mic audio was sent.
    let reader = hound::WavReader::open(dir.join("model.wav")).unwrap();
    let spec = reader.spec();
    assert_eq!(
        (spec.sample_rate, spec.channels, spec.bits_per_sample),
        (24_000, 1, 16)
    );
    let samples = u64::from(reader.duration());
    assert_eq!(samples, referenced_samples(&dir, "model.wav"));
    assert!(
        samples > 2 * 24_000,
        "two whole spoken replies last over 2 s: {samples}"
    );
    assert!(!dir.join("mic.wav").exists());

    // Every frame both ways is there, audio by reference only, and what the link told the app.
    let log = lines(&dir);
    assert_eq!(log[0]["type"], "meta");
    assert_eq!(log[0]["format"], 3);
    assert_eq!(log[0]["endpoint_host"], "127.0.0.1");
    let count = |kind: &str| log.iter().filter(|l| l["type"] == kind).count();
    assert_eq!(
        count("send"),
        2 + 4 + 3,
        "two setups, three turns and one sent again, three tool responses"
    );
    assert!(log.iter().any(|l| l["message"]["toolCall"].is_object()));
    // What the app applied: the link's notices and the session's one end among them.
    let applied = |pointer: &str| {
        log.iter()
            .filter(|l| l["type"] == "applied" && l["msg"].pointer(pointer).is_some())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        (
            applied("/link/reconnecting").len(),
            applied("/link/reconnected").len(),
            count("close")
        ),
        (1, 1, 2)
    );
    assert_eq!(applied("/user_text").len(), 3);
    let ended = applied("/session/closed");
    assert_eq!(ended.len(), 1);
    assert_eq!(
        ended[0]["msg"]["session"]["closed"]["initiated_by_client"],
        true
    );
    // Raw keys and ticks are never recorded.
    assert!(applied("/key").is_empty() && applied("/tick").is_empty());

    // The key is nowhere in the folder.
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        assert!(
            !bytes
                .windows(FAKE_KEY.len())
                .any(|w| w == FAKE_KEY.as_bytes()),
            "the key is in {}",
            path.display()
        );
    }

    // --against re-sends the typed turns and reaches the same tool calls.
    let mock2 = MockProcess::start(scratch.path(), &["--speed", "20"]);
    let again = run_livetalk(
        scratch.path(),
        &["replay", dir_arg, "--against", &mock2.url],
        &[],
        &[],
    );
    assert_eq!(again.code, Some(0), "{}\n{}", again.stdout, again.stderr);
    assert_eq!(tool_lines(&again.stdout), tool_lines(&original.stdout));
    drop(mock2);

    // `mock --replay` serves the session back to livetalk: the same transcript, the
    // connection lost where the recorded one was, and the resumption by the recorded handle
    // served the recorded connection that resumed with it.
    let mut replaying = MockProcess::start(scratch.path(), &["--replay", dir_arg, "--speed", "20"]);
    let served = run_livetalk(
        scratch.path(),
        &["--headless", "--endpoint", &replaying.url],
        &[("GEMINI_API_KEY", FAKE_KEY)],
        &SMART_HOME_LINES,
    );
    assert_eq!(served.code, Some(0), "{}\n{}", served.stdout, served.stderr);
    assert_eq!(transcript(&served.stdout), transcript(&original.stdout));
    let served_notices = notice_lines(&served.stderr);
    assert_eq!(served_notices.len(), 2, "{}", served.stderr);
    assert!(
        served_notices[0].starts_with("livetalk: warning: Connection lost: "),
        "{}",
        served.stderr
    );
    assert_eq!(served_notices[1], notices[1]);
    assert_eq!(
        replaying.stdout.arrived(),
        Vec::<String>::new(),
        "no difference"
    );
}

/// Starts a headless session recorded into `dir` against `mock` (slow speech), sends the
/// first line and returns once its tool call is printed and some of the reply has been
/// recorded (polling with a deadline), so the reply is still streaming.
fn record_until_mid_reply(
    scratch: &Path,
    mock: &MockProcess,
    dir: &Path,
) -> (std::process::Child, std::process::ChildStdin, LineWatcher) {
    let mut child = livetalk(scratch)
        .args(["--headless", "--endpoint", &mock.url, "--record"])
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    write_lines(&mut stdin, &SMART_HOME_LINES[..1]);
    let mut stdout = LineWatcher::new(child.stdout.take().unwrap());
    stdout.wait_for(Duration::from_secs(30), |l| {
        l.starts_with("Tool: get_device_status")
    });
    let recorded = poll(Duration::from_secs(30), Duration::from_millis(20), || {
        (referenced_samples(dir, "model.wav") >= 2400).then_some(())
    });
    assert!(recorded.is_some(), "no model audio recorded");
    (child, stdin, stdout)
}

/// Ctrl-C in the middle of a reply is the user ending the session: the half-finished reply
/// is printed, marked interrupted, the session closes cleanly (exit 0), and the recording
/// replays to exactly the same output and exit code, with no "killed" warning.
#[test]
fn ctrl_c_mid_reply_ends_cleanly_and_replays_as_shown() {
    let scratch = tempfile::tempdir().unwrap();
    // Slow speech, so the reply is still streaming at Ctrl-C.
    let mock = MockProcess::start(scratch.path(), &["--speed", "0.5"]);
    let dir = scratch.path().join("interrupted");
    let dir_arg = dir.to_str().unwrap();
    let (child, stdin, mut stdout) = record_until_mid_reply(scratch.path(), &mock, &dir);
    send_signal(child.id(), "INT");
    let reply = stdout.wait_for(Duration::from_secs(10), |l| l.starts_with("Gemini: "));
    assert!(
        reply.ends_with(" [interrupted]") && !reply.contains("currently off."),
        "{reply}"
    );
    let status = wait_exit(child, Duration::from_secs(10));
    drop(stdin);
    assert_eq!(
        status.code(),
        Some(0),
        "the user ended it: {:?}",
        stdout.seen
    );

    let replayed = run_livetalk(
        scratch.path(),
        &["replay", dir_arg, "--headless", "--instant"],
        &[],
        &[],
    );
    assert_eq!(replayed.code, Some(0), "{}", replayed.stderr);
    assert_eq!(
        replayed.stdout.lines().collect::<Vec<_>>(),
        stdout.seen,
        "replay prints what was shown"
    );
    assert!(!replayed.stderr.contains("killed"), "{}", replayed.stderr);
    let inspect = run_livetalk(scratch.path(), &["inspect", dir_arg], &[], &[]);
    assert!(
        inspect.stdout.contains("User turns: 1\n")
            && inspect
                .stdout
                .contains("Interruptions: 0 (0 by the user, 0 blamed on the echo)\n"),
        "{}",
        inspect.stdout
    );
}

#[test]
fn sigkilled_recording_still_replays_and_inspects() {
    let scratch = tempfile::tempdir().unwrap();
    // Slow speech, so the reply is still streaming when the process is killed.
    let mock = MockProcess::start(scratch.path(), &["--speed", "0.5"]);
    let dir = scratch.path().join("killed");
    let dir_arg = dir.to_str().unwrap();
    let (mut child, stdin, stdout) = record_until_mid_reply(scratch.path(), &mock, &dir);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    drop(stdin);

    let replayed = run_livetalk(
        scratch.path(),
        &["replay", dir_arg, "--headless", "--instant"],
        &[],
        &[],
    );
    assert!(
        replayed.stdout.starts_with(&stdout.seen.join("\n")),
        "replay:\n{}\noriginal:\n{:?}",
        replayed.stdout,
        stdout.seen
    );
    assert!(
        replayed
            .stderr
            .contains("the recording ends before the session did"),
        "{}",
        replayed.stderr
    );
    assert!(!replayed.stderr.contains("panicked"), "{}", replayed.stderr);

    let inspect = run_livetalk(scratch.path(), &["inspect", dir_arg], &[], &[]);
    assert_eq!(inspect.code, Some(0), "{}", inspect.stderr);
    assert!(
        inspect.stdout.contains("User turns: 1\n"),
        "{}",
        inspect.stdout
    );
    assert!(
        inspect.stdout.contains("Tool calls: 1 (0 cancelled)\n"),
        "{}",
        inspect.stdout
    );
    assert!(inspect.stdout.contains("Closes: 0\n"), "{}", inspect.stdout);
    // The WAV header was valid when the process died: it covers every referenced sample.
    let reader = hound::WavReader::open(dir.join("model.wav")).unwrap();
    assert!(u64::from(reader.duration()) >= referenced_samples(&dir, "model.wav"));
}

#[test]
fn corrupted_lines_are_skipped_with_a_warning_and_sessions_lists_recordings() {
    let scratch = tempfile::tempdir().unwrap();
    // `--record` without a folder: a timestamped folder under <data dir>/sessions.
    let original = run_livetalk(
        scratch.path(),
        &["--headless", "--offline", "--record"],
        &[],
        &SMART_HOME_LINES[..2],
    );
    assert_eq!(original.code, Some(0), "{}", original.stderr);
    let root = scratch.path().join("data/livetalk/sessions");
    let dirs: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let dir = &dirs[0];

    let listed = run_livetalk(scratch.path(), &["sessions"], &[], &[]);
    assert_eq!(listed.code, Some(0));
    let rows: Vec<&str> = listed.stdout.lines().collect();
    assert_eq!(rows.len(), 2, "header and one session: {}", listed.stdout);
    assert!(
        rows[1].contains(dir.to_str().unwrap()) && rows[1].split_whitespace().any(|w| w == "2"),
        "{}",
        rows[1]
    );

    // Garbage in the middle and a line cut short at the end (as a crash leaves it).
    let log = dir.join("session.jsonl");
    let text = std::fs::read_to_string(&log).unwrap();
    let mut out: Vec<String> = text.lines().map(str::to_owned).collect();
    out.insert(3, "{\"t\": 0.5, \"type\": \"recv\", \"mess".to_owned());
    out.push("{\"t\": 99.0, \"type\": \"devi".to_owned());
    std::fs::write(&log, out.join("\n")).unwrap();

    let replayed = run_livetalk(
        scratch.path(),
        &["replay", dir.to_str().unwrap(), "--headless", "--instant"],
        &[],
        &[],
    );
    assert_eq!(replayed.stdout, original.stdout, "{}", replayed.stderr);
    assert_eq!(
        replayed
            .stderr
            .matches("skipped an unreadable line")
            .count(),
        2,
        "{}",
        replayed.stderr
    );
    assert!(replayed.stderr.contains("line 4"), "{}", replayed.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_call_and_a_lost_connection_replay_as_they_were_shown() {
    let scratch = tempfile::tempdir().unwrap();
    let settings = default_settings();
    // The model calls `hang`, which the watchdog flags and the timeout answers; the
    // connection drops when that turn is over.
    let mock = fast_mock(vec![
        tool_calls_at(1, "hang", json!({})),
        Fault::once(Moment::TurnComplete, 1, FaultAction::Drop),
    ])
    .await;
    let registry = Arc::new(Hang::registry(Duration::from_millis(900)));
    let home = SmartHome::new();
    let dir = scratch.path().join("rec");
    let mut engine = Engine::new(registry.clone(), &home, livetalk::tools::Decider::Person);
    engine.set_reconnect_policy(test_policy(3));
    engine.record_into(Recorder::create(&dir, &settings, home.snapshot()).unwrap());
    let mut app = App::new(AppInit::new(
        settings.model.clone(),
        settings.is_offline(),
        home.snapshot(),
    ));
    let connect_timeout = Duration::from_secs(5);
    connect(&mut engine, &mock, &settings, &registry, connect_timeout).await;
    run_until(&mut app, &mut engine, REACH, "ready", App::ready_for_user).await;
    apply(
        &mut app,
        &mut engine,
        Msg::UserText("Please do the slow thing.".into()),
    )
    .await;
    run_until(
        &mut app,
        &mut engine,
        REACH,
        "the call flagged and timed out, then the link back",
        |app| {
            app.tool_calls()
                .first()
                .is_some_and(|c| c.slow && c.state == ToolState::TimedOut)
                && app.reconnects() == 1
                && *app.connection() == ConnectionState::Connected
                && app.ready_for_user()
        },
    )
    .await;
    apply(&mut app, &mut engine, Msg::EndSession).await;
    run_until(&mut app, &mut engine, REACH, "the end", App::is_finished).await;
    assert!(app.ended_cleanly(), "{:?}", app.connection());
    let shown: Vec<&str> = app.notices().iter().map(|n| n.text.as_str()).collect();
    assert!(
        shown[0].starts_with("hang has been running for 0.")
            && shown.iter().any(|n| n.starts_with("Connection lost: "))
            && shown.contains(&"Reconnected; the conversation continues."),
        "{shown:#?}"
    );

    // Replay later: an hour after the original run, as far as the recording's clock goes.
    let log = dir.join("session.jsonl");
    let text = std::fs::read_to_string(&log).unwrap();
    let (first, rest) = text.split_once('\n').unwrap();
    let mut meta: Value = serde_json::from_str(first).unwrap();
    let started: jiff::Zoned = meta["started_at"].as_str().unwrap().parse().unwrap();
    let an_hour = jiff::SignedDuration::from_hours(1);
    meta["started_at"] = json!(started.checked_add(an_hour).unwrap().to_string());
    std::fs::write(&log, format!("{meta}\n{rest}")).unwrap();

    let recording = Recording::load(&dir).unwrap();
    assert!(recording.warnings.is_empty(), "{:?}", recording.warnings);
    let report = livetalk::record::inspect::report(&recording);
    for expected in [
        "Tool calls: 1 (0 cancelled, 1 flagged slow)\n",
        "  hang {} -> timed_out",
        "Connections: 2 (reconnects: 1)\n",
    ] {
        assert!(report.contains(expected), "{expected:?} in:\n{report}");
    }
    let (mut playback, warnings) = Replay::new(&recording, Pacing::Instant);
    assert!(warnings.is_empty(), "{warnings:?}");
    let mut replayed = replay::initial_app(&recording, None, 0);
    while let Some(msg) = playback.next().await {
        let _ = replayed.update(msg);
    }
    assert_eq!(replayed.notices(), app.notices());
    assert_eq!(replayed.transcript(), app.transcript());
    assert_eq!(replayed.devices(), app.devices());
    assert_eq!(replayed.reconnects(), app.reconnects());
    assert_eq!(replayed.handovers(), app.handovers());
    assert_eq!(replayed.connection(), app.connection());
    assert!(replayed.ended_cleanly());
    assert_eq!(replayed.tool_calls().len(), 1);
    let (then, now) = (&replayed.tool_calls()[0], &app.tool_calls()[0]);
    assert_eq!(
        then.clone(),
        livetalk::app::ToolCallRecord {
            started_at: then.started_at,
            ..now.clone()
        }
    );
    // The call arrived at the (shifted) recorded time, give or take the app's own delay; a
    // time of day wraps at midnight.
    let mut late = then
        .started_at
        .duration_since(now.started_at)
        .checked_sub(an_hour)
        .unwrap();
    if late < jiff::SignedDuration::from_hours(-12) {
        late = late
            .checked_add(jiff::SignedDuration::from_hours(24))
            .unwrap();
    }
    assert!(
        late.abs() < jiff::SignedDuration::from_millis(500),
        "{late:?}"
    );
}

/// A spoken session (a WAV as the mic) records what was sent in `mic.wav` and shows the
/// input transcription's fragments as one line; `--against` streams it to the mock again,
/// which hears the same speech.
#[test]
fn against_resends_the_recorded_mic_audio_in_real_time() {
    let scratch = tempfile::tempdir().unwrap();
    let phrase = rig::spoken_phrase(scratch.path(), "Is the living room lamp on?");
    let dir = scratch.path().join("spoken");
    let original = run_livetalk(
        scratch.path(),
        &[
            "--headless",
            "--offline",
            "--input-wav",
            phrase.to_str().unwrap(),
            "--record",
            dir.to_str().unwrap(),
        ],
        &[],
        &[],
    );
    assert_eq!(original.code, Some(0), "{}", original.stderr);
    let heard = "Gemini: I heard about 1.3 seconds of speech";
    assert!(original.stdout.contains(heard), "{}", original.stdout);
    // The input transcription comes in two fragments; the line shows both, joined.
    let you = "You (spoken): (about 1.3 seconds of speech)\n";
    assert!(original.stdout.starts_with(you), "{}", original.stdout);
    let mic = hound::WavReader::open(dir.join("mic.wav")).unwrap();
    assert_eq!(mic.spec().sample_rate, 16_000);
    assert!(
        mic.duration() > 16_000,
        "mic.wav holds {} samples",
        mic.duration()
    );

    // With push-to-talk the clip is one utterance, bracketed by activityStart and activityEnd
    // (the first sent while the connection was still being made), and its reply is awaited.
    let ptt_dir = scratch.path().join("ptt");
    let ptt = run_livetalk(
        scratch.path(),
        &[
            "--headless",
            "--offline",
            "--push-to-talk",
            "--input-wav",
            phrase.to_str().unwrap(),
            "--record",
            ptt_dir.to_str().unwrap(),
        ],
        &[],
        &[],
    );
    assert_eq!(ptt.code, Some(0), "{}", ptt.stderr);
    // The whole clip is the utterance, its trailing silence included.
    assert!(
        ptt.stdout.contains("Gemini: I heard about"),
        "{}",
        ptt.stdout
    );
    let sent: Vec<String> = lines(&ptt_dir)
        .iter()
        .filter(|l| l["type"] == "send")
        .filter_map(|l| l["message"]["realtimeInput"].as_object().cloned())
        .flat_map(|input| input.keys().cloned().collect::<Vec<_>>())
        .filter(|key| key.starts_with("activity"))
        .collect();
    assert_eq!(sent, ["activityStart", "activityEnd"], "{}", ptt.stdout);

    let mock = MockProcess::start(scratch.path(), &["--speed", "20"]);
    let again = run_livetalk(
        scratch.path(),
        &["replay", dir.to_str().unwrap(), "--against", &mock.url],
        &[("LIVETALK_LOG", "debug")],
        &[],
    );
    let log = std::fs::read_to_string(scratch.path().join("data/livetalk/livetalk.log"))
        .unwrap_or_default();
    assert_eq!(
        again.code,
        Some(0),
        "{}\n{}\nLOG:\n{}",
        again.stderr,
        again.stdout,
        log
    );
    assert!(again.stderr.contains("s of mic audio"), "{}", again.stderr);
    assert!(again.stdout.contains(heard), "{}", again.stdout);
    assert!(again.stdout.starts_with(you), "{}", again.stdout);
}

/// 3.8 Live turns go on after `turnComplete` (`IN_PROGRESS`) and end at `IDLE`: a replay
/// prints what the live run printed, each next line only after the `IDLE`, and the replayed
/// app shows the model working from the acknowledgement's `turnComplete` until that `IDLE`.
#[tokio::test(flavor = "multi_thread")]
async fn an_asynchronous_3_8_turn_replays_ending_at_idle() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("async");
    let dir_arg = dir.to_str().unwrap();
    let model = "gemini-3.8-live-extended-thinking";
    let original = run_livetalk(
        scratch.path(),
        &[
            "--headless",
            "--offline",
            "--model",
            model,
            "--record",
            dir_arg,
        ],
        &[],
        &SMART_HOME_LINES,
    );
    assert_eq!(original.code, Some(0), "{}", original.stderr);
    let replayed = run_livetalk(
        scratch.path(),
        &["replay", dir_arg, "--headless", "--instant"],
        &[],
        &[],
    );
    assert_eq!(replayed.code, Some(0), "{}", replayed.stderr);
    assert_eq!(replayed.stdout, original.stdout, "{}", replayed.stderr);
    // Each line's whole interaction (acknowledgement, tool, answer) comes before the next.
    let shown: Vec<&str> = replayed.stdout.lines().collect();
    let kinds: String = shown
        .iter()
        .filter_map(|l| {
            [("You: ", 'U'), ("Gemini: ", 'G'), ("Tool: ", 'T')]
                .iter()
                .find(|(prefix, _)| l.starts_with(prefix))
                .map(|&(_, kind)| kind)
        })
        .collect();
    assert_eq!(kinds, "UGTG".repeat(3), "{shown:#?}");

    // In process: the replayed app is working exactly between each acknowledgement and the
    // IDLE that ends its interaction, and no line is sent while it is.
    let recording = Recording::load(&dir).unwrap();
    let (mut playback, warnings) = Replay::new(&recording, Pacing::Instant);
    assert!(warnings.is_empty(), "{warnings:?}");
    let mut app = replay::initial_app(&recording, None, 0);
    let mut trace = String::new();
    let mut working = false;
    while let Some(msg) = playback.next().await {
        if matches!(msg, Msg::UserText(_)) {
            assert!(!app.model_working(), "a line sent while the model works");
        }
        let _ = app.update(msg);
        if app.model_working() != working {
            working = app.model_working();
            let last = app.transcript().last().unwrap();
            let said = match last {
                livetalk::app::Entry::Model {
                    text_parts,
                    transcript,
                    ..
                } => livetalk::app::Entry::model_text(text_parts, transcript),
                other => format!("{other:?}"),
            };
            trace.push_str(&format!("{working} after {said}\n"));
        }
    }
    let spans: Vec<&str> = trace.lines().collect();
    assert_eq!(spans.len(), 6, "{trace}");
    for pair in spans.chunks(2) {
        assert!(pair[0].starts_with("true after One moment"), "{trace}");
        assert!(
            pair[1].starts_with("false after ") && !pair[1].contains("One moment"),
            "{trace}"
        );
    }
    assert!(app.ended_cleanly());
}

/// A recording of a reply the service interrupted while Gemini's own voice came back through
/// the mic (the canceller's self-interruption detector heard it), then one the user's speech
/// interrupted: replay prints the first flagged and the second not, as the run showed them.
#[test]
fn a_self_interruption_replays_flagged_in_text_json_and_markdown() {
    use livetalk::audio::{AudioEvent, AudioSetup, EchoFigures, EchoMode, StreamInfo};
    use livetalk::record::{FORMAT_VERSION, LOG_FILE, Line, Meta, Record};
    use livetalk_live::ServerEvent;
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("echo");
    std::fs::create_dir_all(&dir).unwrap();
    let device = |name: &str| StreamInfo {
        name: name.into(),
        path: "48 kHz".into(),
    };
    let echo = |heard: bool| {
        Msg::Audio(AudioEvent::Echo(EchoFigures {
            mode: EchoMode::Aec,
            cancelling: true,
            echo_heard: heard,
            ..EchoFigures::default()
        }))
    };
    let reply = |text: &str| {
        Msg::Server(ServerEvent::OutputTranscription {
            text: text.into(),
            finished: false,
        })
    };
    let audible = |on: bool| Msg::Audio(AudioEvent::Audible(on));
    let msgs = [
        Msg::Server(ServerEvent::SetupComplete { session_id: None }),
        Msg::Audio(AudioEvent::Opened(AudioSetup {
            input: Some(device("mic")),
            output: Some(device("speaker")),
            problems: Vec::new(),
        })),
        reply("Once upon a time"),
        audible(true),
        echo(true),
        Msg::Server(ServerEvent::Interrupted),
        echo(false),
        reply("As I was saying"),
        audible(true),
        Msg::Server(ServerEvent::Interrupted),
        Msg::EndSession,
    ];
    let meta = Record::Meta(Box::new(Meta {
        format: FORMAT_VERSION,
        livetalk_version: "test".into(),
        started_at: "2020-01-02T03:04:05+02:00[+02:00]".into(),
        model: "models/test".into(),
        voice: "Puck".into(),
        endpoint_host: "127.0.0.1".into(),
        offline: false,
        devices: Vec::new(),
        config: json!({}),
        audio: None,
    }));
    let records = std::iter::once(meta).chain(
        msgs.into_iter()
            .map(|msg| Record::applied(&msg, None).unwrap()),
    );
    let log: String = records
        .enumerate()
        .map(|(i, record)| {
            serde_json::to_string(&Line {
                t: i as f64 * 0.1,
                record,
            })
            .unwrap()
                + "\n"
        })
        .collect();
    std::fs::write(dir.join(LOG_FILE), log).unwrap();
    let dir_arg = dir.to_str().unwrap();

    let text = run_livetalk(
        scratch.path(),
        &["replay", dir_arg, "--headless", "--instant"],
        &[],
        &[],
    );
    let replies: Vec<&str> = text
        .stdout
        .lines()
        .filter(|l| l.starts_with("Gemini: "))
        .collect();
    assert_eq!(
        replies,
        [
            "Gemini: Once upon a time [interrupted — echo may have interrupted Gemini]",
            "Gemini: As I was saying [interrupted]",
        ],
        "{}",
        text.stderr
    );

    let json_run = run_livetalk(
        scratch.path(),
        &["replay", dir_arg, "--headless", "--instant", "--json"],
        &[],
        &[],
    );
    let models: Vec<Value> = json_run
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "model")
        .collect();
    assert_eq!(models.len(), 2, "{}", json_run.stdout);
    assert_eq!(models[0]["status"], "interrupted");
    assert_eq!(models[0]["echo_suspected"], true);
    assert_eq!(models[1]["status"], "interrupted");
    assert_eq!(models[1]["echo_suspected"], false);

    let markdown = run_livetalk(
        scratch.path(),
        &["inspect", dir_arg, "--markdown"],
        &[],
        &[],
    );
    assert!(
        markdown
            .stdout
            .contains("Once upon a time _[interrupted — echo may have interrupted Gemini]_"),
        "{}",
        markdown.stdout
    );
    assert_eq!(markdown.stdout.matches(" _[interrupted]_").count(), 1);
}

/// `--record bug-1234` (the README's example) records into the sessions folder, so
/// `sessions` lists it, and `replay` and `inspect` find it by that name, by its folder, or by
/// its `session.jsonl`.
#[test]
fn a_recording_named_bare_is_listed_and_found_by_name_folder_or_file() {
    let scratch = tempfile::tempdir().unwrap();
    // Run from an empty folder of its own: a bare name must not land there.
    let here = scratch.path().join("here");
    std::fs::create_dir(&here).unwrap();
    let mut command = livetalk(scratch.path());
    command
        .current_dir(&here)
        .args(["--headless", "--offline", "--record", "bug-1234"]);
    let original = run_command(command, &SMART_HOME_LINES[..1], Duration::from_secs(60));
    assert_eq!(original.code, Some(0), "{}", original.stderr);
    assert!(
        !here.join("bug-1234").exists(),
        "recorded into the current folder"
    );
    let dir = scratch.path().join("data/livetalk/sessions/bug-1234");
    assert!(dir.join("session.jsonl").is_file(), "{}", original.stderr);
    let listed = run_livetalk(scratch.path(), &["sessions"], &[], &[]);
    assert!(
        listed.stdout.contains(dir.to_str().unwrap()),
        "{}",
        listed.stdout
    );
    let file = dir.join("session.jsonl");
    for given in ["bug-1234", dir.to_str().unwrap(), file.to_str().unwrap()] {
        let inspected = run_livetalk(scratch.path(), &["inspect", given], &[], &[]);
        assert_eq!(inspected.code, Some(0), "{given}: {}", inspected.stderr);
        let replayed = run_livetalk(
            scratch.path(),
            &["replay", given, "--headless", "--instant"],
            &[],
            &[],
        );
        assert_eq!(
            replayed.stdout, original.stdout,
            "{given}: {}",
            replayed.stderr
        );
    }
    let missing = run_livetalk(scratch.path(), &["inspect", "bug-9999"], &[], &[]);
    assert_eq!(missing.code, Some(1));
    assert!(
        missing.stderr.contains("No recording named bug-9999")
            && missing.stderr.contains("livetalk sessions"),
        "{}",
        missing.stderr
    );
}

/// A recording line whose time is absurd (1.7e308 s panicked a replay; 1e12 s hung a paced
/// one): replay, paced and instant, and inspect take it as the previous line's time with a
/// warning, and show the same conversation.
#[test]
fn absurd_line_times_replay_with_a_warning_not_a_panic_or_a_hang() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("absurd");
    let original = run_livetalk(
        scratch.path(),
        &["--headless", "--offline", "--record", dir.to_str().unwrap()],
        &[],
        &SMART_HOME_LINES[..1],
    );
    assert_eq!(original.code, Some(0), "{}", original.stderr);
    let log = dir.join("session.jsonl");
    let text = std::fs::read_to_string(&log).unwrap();
    let count = text.lines().count();
    assert!(count > 6, "{text}");
    let changed: Vec<String> = text
        .lines()
        .enumerate()
        .map(|(index, line)| {
            let mut value: serde_json::Value = serde_json::from_str(line).unwrap();
            if index == count / 3 {
                value["t"] = serde_json::json!(1.7e308);
            } else if index == 2 * count / 3 {
                value["t"] = serde_json::json!(1e12);
            }
            value.to_string()
        })
        .collect();
    std::fs::write(&log, changed.join("\n") + "\n").unwrap();

    for pace in [&["--speed", "10"][..], &["--instant"]] {
        let started = std::time::Instant::now();
        let mut command = livetalk(scratch.path());
        command
            .args(["replay", dir.to_str().unwrap(), "--headless"])
            .args(pace);
        let replayed = run_command(command, &[], Duration::from_secs(60));
        let took = started.elapsed();
        assert_eq!(replayed.code, Some(0), "{pace:?}: {}", replayed.stderr);
        assert_eq!(
            replayed.stdout, original.stdout,
            "{pace:?}: {}",
            replayed.stderr
        );
        assert_eq!(
            replayed
                .stderr
                .matches("is not one a session reaches")
                .count(),
            2,
            "{pace:?}: {}",
            replayed.stderr
        );
        assert!(!replayed.stderr.contains("panicked"), "{}", replayed.stderr);
        assert!(took < Duration::from_secs(20), "{pace:?}: took {took:?}");
    }
    let inspected = run_livetalk(
        scratch.path(),
        &["inspect", dir.to_str().unwrap()],
        &[],
        &[],
    );
    assert_eq!(inspected.code, Some(0), "{}", inspected.stderr);
    assert!(
        !inspected.stdout.contains("e308") && !inspected.stdout.contains("1000000000000"),
        "{}",
        inspected.stdout
    );
}

/// The recordings of formats 1 to 4 kept in the repository (`tests/data/recordings/`)
/// replay, headless as text and as JSON, and inspect, as a summary and as Markdown, exactly
/// as they did when the format was still the shape of the app's messages: what each command
/// printed then is kept beside them (`expected/`, the folder shown as `<recording>`).
/// `LIVETALK_BLESS_RECORDINGS=1` writes those files instead (for a new format version only).
#[test]
fn the_recordings_of_every_format_replay_and_inspect_as_before() {
    let scratch = tempfile::tempdir().unwrap();
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/recordings");
    let bless = std::env::var_os("LIVETALK_BLESS_RECORDINGS").is_some();
    for format in 1..=4 {
        let golden = data.join(format!("format-{format}"));
        // A copy of its own: the folder's name is printed, and a replay must not need to
        // write beside it.
        let dir = scratch.path().join(format!("format-{format}"));
        std::fs::create_dir(&dir).unwrap();
        for file in ["session.jsonl", "model.wav", "mic.wav", "frames/0001.jpg"] {
            if golden.join(file).exists() {
                std::fs::create_dir_all(dir.join(file).parent().unwrap()).unwrap();
                std::fs::copy(golden.join(file), dir.join(file)).unwrap();
            }
        }
        let dir_arg = dir.to_str().unwrap();
        let commands: [(&str, &[&str]); 4] = [
            (
                "replay.txt",
                &["replay", dir_arg, "--headless", "--instant"],
            ),
            (
                "replay.json",
                &["replay", dir_arg, "--headless", "--instant", "--json"],
            ),
            ("inspect.txt", &["inspect", dir_arg]),
            ("inspect.md", &["inspect", dir_arg, "--markdown"]),
        ];
        for (name, args) in commands {
            let run = run_livetalk(scratch.path(), args, &[], &[]);
            let shown = format!(
                "exit {:?}\n--- stdout\n{}--- stderr\n{}",
                run.code, run.stdout, run.stderr
            )
            .replace(dir_arg, "<recording>");
            let expected = golden.join("expected").join(name);
            if bless {
                std::fs::create_dir_all(expected.parent().unwrap()).unwrap();
                std::fs::write(&expected, &shown).unwrap();
                continue;
            }
            let want = std::fs::read_to_string(&expected)
                .unwrap_or_else(|e| panic!("{}: {e}", expected.display()));
            assert_eq!(shown, want, "format {format}: livetalk {}", args.join(" "));
        }
    }
}

// ---- livetalk check ----

/// `livetalk ARGS` in `scratch` (no stdin), waited for.
fn check(scratch: &Path, args: &[&str]) -> Run {
    run_livetalk(scratch, args, &[], &[])
}

/// A JUnit XML file's counts as a real XML parser reads them: (tests, failures) of the root,
/// and each test case's name with whether it failed.
fn junit_counts(path: &Path) -> (u64, u64, Vec<(String, bool)>) {
    const READ: &str = "import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
print(root.get('tests'), root.get('failures'))
for case in root.iter('testcase'):
    print(int(case.find('failure') is not None), case.get('name'))";
    let out = std::process::Command::new("python3")
        .args(["-c", READ])
        .arg(path)
        .output()
        .expect("python3 (scripts/test.sh installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    let counts: Vec<u64> = lines
        .next()
        .unwrap()
        .split(' ')
        .map(|n| n.parse().unwrap())
        .collect();
    let cases = lines
        .map(|l| (l[2..].to_owned(), l.starts_with('1')))
        .collect();
    (counts[0], counts[1], cases)
}

/// The smart-home dialogue recorded against the offline demo model into `<scratch>/rec`.
fn record_dialogue(scratch: &Path) -> std::path::PathBuf {
    let dir = scratch.join("rec");
    let run = run_livetalk(
        scratch,
        &["--headless", "--offline", "--record", dir.to_str().unwrap()],
        &[],
        &SMART_HOME_LINES,
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    dir
}

/// A recording made by `--record` checks clean against the same model, turn by turn, in text
/// and in JSON; the scenario `--write-scenario` makes of it passes three times over, and its
/// JUnit report reads as three passing cases.
#[test]
fn check_passes_a_recording_and_the_scenario_written_from_it() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = record_dialogue(scratch.path());
    let rec = dir.to_str().unwrap();

    let run = check(scratch.path(), &["check", rec]);
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    let turns: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.contains(" turn "))
        .collect();
    assert_eq!(turns.len(), 3, "{}", run.stdout);
    assert!(
        turns.iter().all(|t| t.trim_start().starts_with('✔')),
        "{}",
        run.stdout
    );
    assert!(
        turns[0].contains("get_device_status {device_name: living room lamp}"),
        "{}",
        turns[0]
    );
    assert!(
        run.stdout.contains("rec: passed: 3 of 3 turns passed"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("first response p50 "), "{}", run.stdout);

    let json = check(scratch.path(), &["check", rec, "--json"]);
    assert_eq!(json.code, Some(0), "{}", json.stderr);
    let events: Vec<Value> = json
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let turn_events: Vec<&Value> = events.iter().filter(|e| e["type"] == "turn").collect();
    assert_eq!(turn_events.len(), 3, "{}", json.stdout);
    for turn in &turn_events {
        assert_eq!(turn["passed"], true, "{turn}");
        let first = turn["first_response_ms"]
            .as_f64()
            .expect("a first response");
        let audio = turn["first_audio_ms"].as_f64().expect("a first audio byte");
        assert!(first <= audio && audio < 5000.0, "{turn}");
    }
    assert_eq!(turn_events[1]["tools"][0]["name"], "set_device_status");
    let summary = events.last().unwrap();
    assert_eq!(summary["type"], "summary");
    assert_eq!(summary["exit"], 0);
    assert!(summary["first_response_ms"]["p90"].is_number(), "{summary}");

    // The scenario of the recording, printed and written.
    let printed = check(scratch.path(), &["check", "--write-scenario", rec]);
    assert_eq!(printed.code, Some(0), "{}", printed.stderr);
    assert!(
        printed.stdout.contains("say = \"Is the living room lamp on?\"")
            && printed.stdout.contains(
                "tools = [{ name = \"get_device_status\", args = { device_name = \"living room lamp\" } }]"
            ),
        "{}",
        printed.stdout
    );
    let file = scratch.path().join("lamp.toml");
    let written = check(
        scratch.path(),
        &[
            "check",
            "--write-scenario",
            rec,
            "--out",
            file.to_str().unwrap(),
        ],
    );
    assert_eq!(written.code, Some(0), "{}", written.stderr);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), printed.stdout);

    let junit = scratch.path().join("junit.xml");
    let repeated = check(
        scratch.path(),
        &[
            "check",
            file.to_str().unwrap(),
            "--repeat",
            "3",
            "--junit",
            junit.to_str().unwrap(),
        ],
    );
    assert_eq!(
        repeated.code,
        Some(0),
        "{}\n{}",
        repeated.stdout,
        repeated.stderr
    );
    assert!(
        repeated
            .stdout
            .contains("rec: passed: 3 of 3 runs passed (100%); turn 1 100% (3 of 3)"),
        "{}",
        repeated.stdout
    );
    let (tests, failures, cases) = junit_counts(&junit);
    assert_eq!((tests, failures), (3, 0));
    assert_eq!(
        cases[0],
        (
            "rec / turn 1: Is the living room lamp on?".to_owned(),
            false
        )
    );
}

/// The user turns of a recording as `inspect --json` counts them (each end of a user turn on
/// the wire: a typed turn sent, the service hearing the speech end): what `check` must check
/// as many of.
fn inspected_turns(scratch: &Path, dir: &Path) -> usize {
    let run = run_livetalk(
        scratch,
        &["inspect", dir.to_str().unwrap(), "--json"],
        &[],
        &[],
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let summary: Value = serde_json::from_str(&run.stdout).unwrap();
    summary["turns"].as_array().expect("turns").len()
}

/// The turns `check` reported in its text output (`✔ turn N:` / `✖ turn N:` lines).
fn checked_turns(run: &Run) -> usize {
    run.stdout
        .lines()
        .filter(|l| {
            let l = l.trim_start();
            (l.starts_with("✔ turn ") || l.starts_with("✖ turn ")) && l.contains(':')
        })
        .count()
}

/// `check` says what it checked against before anything else: the route and the model, on
/// its first line, as the first JSON event and in the JSON summary, and as properties of each
/// JUnit suite. A key variable set but empty (a CI secret a fork lacks) is exit 2 with one
/// sentence wherever a key would be used, never a quiet check against the demo model; with
/// `--offline`, which uses none, it is fine, and so is `--write-scenario`.
#[test]
fn check_names_its_model_and_route_and_refuses_an_empty_key() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = record_dialogue(scratch.path());
    let rec = dir.to_str().unwrap();

    let run = check(scratch.path(), &["check", rec]);
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    assert_eq!(
        run.stdout.lines().next(),
        Some(
            "Checking 1 file(s) against the embedded offline demo model (no API key is set: set GEMINI_API_KEY to check against Gemini), model models/gemini-3.8-live"
        ),
        "{}",
        run.stdout
    );
    let offline = check(
        scratch.path(),
        &["check", rec, "--offline", "--model", "x-live"],
    );
    assert_eq!(offline.code, Some(0), "{}", offline.stderr);
    assert_eq!(
        offline.stdout.lines().next(),
        Some(
            "Checking 1 file(s) against the embedded offline demo model (--offline), model models/x-live"
        ),
        "{}",
        offline.stdout
    );
    let mock = MockProcess::start(scratch.path(), &["--speed", "20"]);
    let endpoint = check(scratch.path(), &["check", rec, "--endpoint", &mock.url]);
    assert_eq!(endpoint.code, Some(0), "{}", endpoint.stderr);
    assert_eq!(
        endpoint.stdout.lines().next(),
        Some("Checking 1 file(s) against the endpoint 127.0.0.1, model models/gemini-3.8-live"),
        "{}",
        endpoint.stdout
    );

    let junit = scratch.path().join("junit.xml");
    let json = check(
        scratch.path(),
        &["check", rec, "--json", "--junit", junit.to_str().unwrap()],
    );
    assert_eq!(json.code, Some(0), "{}", json.stderr);
    let events: Vec<Value> = json
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let first = &events[0];
    assert_eq!(first["type"], "check", "{first}");
    assert_eq!(first["route_kind"], "demo", "{first}");
    assert_eq!(
        first["models"],
        json!(["models/gemini-3.8-live"]),
        "{first}"
    );
    let summary = events.last().unwrap();
    assert_eq!(summary["type"], "summary");
    assert_eq!(summary["route_kind"], "demo", "{summary}");
    assert_eq!(
        summary["route"], "the embedded offline demo model",
        "{summary}"
    );
    assert_eq!(
        summary["models"],
        json!(["models/gemini-3.8-live"]),
        "{summary}"
    );
    let file = events.iter().find(|e| e["type"] == "file").unwrap();
    assert_eq!(file["model"], "models/gemini-3.8-live", "{file}");
    const PROPERTIES: &str = "import sys, xml.etree.ElementTree as ET
for suite in ET.parse(sys.argv[1]).getroot().iter('testsuite'):
    for p in suite.find('properties').iter('property'):
        print(p.get('name'), '=', p.get('value'))";
    let out = std::process::Command::new("python3")
        .args(["-c", PROPERTIES])
        .arg(&junit)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "model = models/gemini-3.8-live\nroute = the embedded offline demo model\nroute_kind = demo\n"
    );

    let empty = [("GEMINI_API_KEY", "")];
    for args in [
        &["check", rec][..],
        &["check", rec, "--json"],
        &["check", rec, "--endpoint", &mock.url],
        &["check", rec, "--repeat", "2"],
    ] {
        let run = run_livetalk(scratch.path(), args, &empty, &[]);
        assert_eq!(
            run.code,
            Some(2),
            "{args:?}: {}\n{}",
            run.stdout,
            run.stderr
        );
        assert!(
            run.stderr
                .starts_with("livetalk: GEMINI_API_KEY is set but empty: "),
            "{args:?}: {}",
            run.stderr
        );
        assert_eq!(run.stdout, "", "{args:?}: nothing ran");
    }
    let run = run_livetalk(scratch.path(), &["check", rec, "--offline"], &empty, &[]);
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    let run = run_livetalk(
        scratch.path(),
        &["check", "--write-scenario", rec],
        &empty,
        &[],
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    // The other commands that would use a key refuse it the same way.
    for args in [
        &["--headless"][..],
        &["--headless", "--endpoint", &mock.url],
        &["serve", "--listen", "127.0.0.1:0"],
        &["replay", rec, "--against", &mock.url],
    ] {
        let run = run_livetalk(scratch.path(), args, &empty, &["hello"]);
        assert_eq!(
            run.code,
            Some(2),
            "{args:?}: {}\n{}",
            run.stdout,
            run.stderr
        );
        assert!(
            run.stderr.contains("GEMINI_API_KEY is set but empty"),
            "{args:?}: {}",
            run.stderr
        );
    }
    let run = run_livetalk(
        scratch.path(),
        &["--headless", "--offline"],
        &empty,
        &["hello"],
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
}

/// Every user turn of a recording is checked: a `//` turn (sent as `/text`) with its own
/// calls, as many turns as `inspect` counts; a `//` turn whose recorded call was renamed
/// fails on that turn, not another.
#[test]
fn check_checks_every_recorded_turn_a_slash_turn_included() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("rec");
    let recorded = run_livetalk(
        scratch.path(),
        &["--headless", "--offline", "--record", dir.to_str().unwrap()],
        &[],
        &[
            "Is the living room lamp on?",
            "//Okay, please turn it on and set its color to blue.",
            "What's the kitchen thermostat set to?",
        ],
    );
    assert_eq!(recorded.code, Some(0), "{}", recorded.stderr);
    assert!(
        recorded.stdout.contains("/Okay, please turn it on"),
        "{}",
        recorded.stdout
    );
    let rec = dir.to_str().unwrap();
    let run = check(scratch.path(), &["check", rec]);
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    assert_eq!(checked_turns(&run), 3, "{}", run.stdout);
    assert_eq!(checked_turns(&run), inspected_turns(scratch.path(), &dir));
    assert!(
        run.stdout
            .contains("✔ turn 2: /Okay, please turn it on and set its…  [set_device_status {"),
        "{}",
        run.stdout
    );

    // The `//` turn's recorded call renamed: that turn fails, the others pass.
    let log = dir.join("session.jsonl");
    let text = std::fs::read_to_string(&log).unwrap();
    let renamed: Vec<String> = text
        .lines()
        .map(|line| {
            // The call as it came (the wire line) and as the app applied it.
            if line.contains("\"toolCall\"") || line.contains("\"tool_call\"") {
                line.replace(
                    "\"name\":\"set_device_status\"",
                    "\"name\":\"set_device_mode\"",
                )
            } else {
                line.to_owned()
            }
        })
        .collect();
    assert_ne!(renamed.join("\n") + "\n", text, "the call was in the log");
    std::fs::write(&log, renamed.join("\n") + "\n").unwrap();
    let run = check(scratch.path(), &["check", rec]);
    assert_eq!(run.code, Some(1), "{}\n{}", run.stdout, run.stderr);
    assert_eq!(checked_turns(&run), 3, "{}", run.stdout);
    assert!(run.stdout.contains("✔ turn 1:"), "{}", run.stdout);
    assert!(run.stdout.contains("✖ turn 2: /Okay"), "{}", run.stdout);
    assert!(
        run.stdout.contains("expected set_device_mode"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("✔ turn 3:"), "{}", run.stdout);
}

/// Local servers that misbehave in known ways: each is the right failure, with the expected
/// call beside the one made, and the right exit status. A drop that resumption recovers is not
/// a failure; a turn lost with its connection is; a model nobody answers for is exit 3.
#[test]
fn check_reports_each_misbehaving_server_with_its_diff() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = record_dialogue(scratch.path());
    let rec = dir.to_str().unwrap();
    let against = |name: &str, faults: &str, extra: &[&str]| {
        let scenario = scratch.path().join(format!("{name}.toml"));
        std::fs::write(&scenario, faults).unwrap();
        let mock = MockProcess::start(
            scratch.path(),
            &["--speed", "20", "--scenario", scenario.to_str().unwrap()],
        );
        let mut args = vec!["check", rec, "--endpoint", &mock.url];
        args.extend_from_slice(extra);
        check(scratch.path(), &args)
    };
    let failed_turn = |run: &Run, turn: usize| -> Vec<String> {
        let lines: Vec<&str> = run.stdout.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.trim_start().starts_with(&format!("✖ turn {turn}:")))
            .unwrap_or_else(|| panic!("turn {turn} did not fail:\n{}", run.stdout));
        lines[at + 1..]
            .iter()
            .take_while(|l| l.starts_with("      "))
            .map(|l| l.trim().to_owned())
            .collect()
    };

    // Another tool.
    let other_tool = against(
        "other-tool",
        "[[fault]]\nat = \"user_turn\"\naction = \"tool_calls\"\nname = \"set_device_status\"\nargs = { device_name = \"living room lamp\", new_status = \"on\" }\n",
        &[],
    );
    assert_eq!(other_tool.code, Some(1), "{}", other_tool.stdout);
    assert_eq!(
        failed_turn(&other_tool, 1),
        [
            "expected get_device_status {device_name: living room lamp}, got set_device_status {device_name: living room lamp, new_status: on}"
        ]
    );
    assert!(
        other_tool.stdout.contains("✔ turn 2:"),
        "{}",
        other_tool.stdout
    );

    // The same tool with other arguments (and --match names lets it pass).
    let other_args = "[[fault]]\nat = \"user_turn\"\naction = \"tool_calls\"\nname = \"get_device_status\"\nargs = { device_name = \"front door lock\" }\n";
    let run = against("other-args", other_args, &[]);
    assert_eq!(run.code, Some(1), "{}", run.stdout);
    assert_eq!(
        failed_turn(&run, 1),
        [
            "expected get_device_status {device_name: living room lamp}, got get_device_status {device_name: front door lock}"
        ]
    );
    let names = against("other-args-names", other_args, &["--match", "names"]);
    assert_eq!(names.code, Some(0), "{}", names.stdout);

    // No call: the model answers without one (its tools were taken away).
    let no_tools = scratch.path().join("no-tools.toml");
    std::fs::write(
        &no_tools,
        "[audio]\nenabled = false\n[tools]\nenabled = []\n",
    )
    .unwrap();
    let run = check(
        scratch.path(),
        &[
            "--config",
            no_tools.to_str().unwrap(),
            "check",
            rec,
            "--offline",
        ],
    );
    assert_eq!(run.code, Some(1), "{}", run.stdout);
    assert_eq!(
        failed_turn(&run, 1),
        ["expected get_device_status {device_name: living room lamp}, got no call"]
    );

    // A turn that never completes, with a deadline: the rest are not run.
    let stall = against(
        "stall",
        "[[fault]]\nat = \"user_turn\"\nnth = 2\naction = \"stall\"\nsecs = 60\n",
        &["--turn-timeout", "1"],
    );
    assert_eq!(stall.code, Some(1), "{}", stall.stdout);
    let problems = failed_turn(&stall, 2);
    assert_eq!(
        problems[0],
        "the turn never completed: no reply from the model within 1 s"
    );
    assert!(problems[1].ends_with("got no call"), "{problems:?}");
    assert_eq!(
        failed_turn(&stall, 3),
        ["not run: an earlier turn did not complete"]
    );

    // A dropped connection that resumption recovers: the turn is sent again and passes.
    let recovered = against(
        "drop",
        "[[fault]]\nat = \"user_turn\"\nnth = 2\naction = \"drop\"\n",
        &[],
    );
    assert_eq!(
        recovered.code,
        Some(0),
        "{}\n{}",
        recovered.stdout,
        recovered.stderr
    );

    // A drop that no reconnect recovers: the turn is lost with it.
    let one_try = scratch.path().join("one-try.toml");
    std::fs::write(
        &one_try,
        "[audio]\nenabled = false\n[session]\nreconnect_attempts = 1\n",
    )
    .unwrap();
    let lost = against(
        "lost",
        "[[fault]]\nat = \"user_turn\"\nnth = 2\naction = \"drop\"\n\n[[fault]]\nat = \"setup\"\nnth = 2\nevery = 1\naction = \"close\"\ncode = 1011\nreason = \"down for maintenance\"\n",
        &["--config", one_try.to_str().unwrap()],
    );
    assert_eq!(lost.code, Some(1), "{}", lost.stdout);
    let problems = failed_turn(&lost, 2);
    assert!(
        problems[0].starts_with("the session ended before the turn did: ")
            && problems[0].contains("down for maintenance"),
        "{problems:?}"
    );

    // Nothing listens: the model cannot be reached.
    let port = free_port().to_string();
    let nobody = check(
        scratch.path(),
        &[
            "check",
            rec,
            "--endpoint",
            &format!("ws://127.0.0.1:{port}"),
        ],
    );
    assert_eq!(nobody.code, Some(3), "{}\n{}", nobody.stdout, nobody.stderr);
    assert!(
        nobody
            .stderr
            .contains("cannot reach the model at 127.0.0.1"),
        "{}",
        nobody.stderr
    );
}

/// `--repeat 3` against a server that misbehaves on the second run only: the file passes two
/// runs of three, its first turn is marked flaky; the minimum pass rate decides the exit
/// status, and the JUnit report (read by a real XML parser) fails that turn with its diff.
#[test]
fn check_repeats_report_pass_rates_and_flaky_turns() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = record_dialogue(scratch.path());
    let rec = dir.to_str().unwrap();
    // The fault clock counts across connections: user turn 4 is the second run's first.
    let faults = scratch.path().join("second-run.toml");
    std::fs::write(
        &faults,
        "[[fault]]\nat = \"user_turn\"\nnth = 4\naction = \"tool_calls\"\nname = \"get_current_time\"\nargs = {}\n",
    )
    .unwrap();
    let mock = MockProcess::start(
        scratch.path(),
        &["--speed", "20", "--scenario", faults.to_str().unwrap()],
    );
    let junit = scratch.path().join("junit.xml");
    let strict = check(
        scratch.path(),
        &[
            "check",
            rec,
            "--endpoint",
            &mock.url,
            "--repeat",
            "3",
            "--junit",
            junit.to_str().unwrap(),
        ],
    );
    assert_eq!(strict.code, Some(1), "{}", strict.stdout);
    assert!(
        strict.stdout.contains(
            "rec: FAILED: 2 of 3 runs passed (67%); turn 1 67% (2 of 3) flaky; turn 2 100% (3 of 3); turn 3 100% (3 of 3)"
        ),
        "{}",
        strict.stdout
    );
    let (tests, failures, cases) = junit_counts(&junit);
    assert_eq!((tests, failures), (3, 1));
    assert_eq!(
        cases[0],
        ("rec / turn 1: Is the living room lamp on?".to_owned(), true)
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("run 2: expected get_device_status {device_name: living room lamp}, got get_current_time"),
        "{xml}"
    );

    // The same again (turns 10 on: no fault) with a minimum of 0.6: it passes.
    let lenient = check(
        scratch.path(),
        &[
            "check",
            rec,
            "--endpoint",
            &mock.url,
            "--repeat",
            "3",
            "--min-pass-rate",
            "0.6",
        ],
    );
    assert_eq!(lenient.code, Some(0), "{}", lenient.stdout);
}

/// A scenario with a spoken turn (a WAV espeak-ng made) passes against the demo model; the
/// recording `--record` made of the run checks clean too, its spoken turn sent from the
/// recorded mic audio.
#[test]
fn check_sends_a_spoken_turn_in_real_time() {
    let scratch = tempfile::tempdir().unwrap();
    // The scenario names it by its file name, beside the scenario.
    rig::spoken_wav(scratch.path(), "lamp", None, "Is the lamp on?");
    let scenario = scratch.path().join("spoken.toml");
    std::fs::write(
        &scenario,
        "[[turn]]\naudio = \"lamp.wav\"\n[turn.expect]\nno_tools = true\nreply_contains = [\"heard\"]\n\n[[turn]]\nsay = \"Is the living room lamp on?\"\n[turn.expect]\ntools = [{ name = \"get_device_status\" }]\nreply_contains = [\"off\"]\n",
    )
    .unwrap();
    let records = scratch.path().join("runs");
    let run = check(
        scratch.path(),
        &[
            "check",
            scenario.to_str().unwrap(),
            "--record",
            records.to_str().unwrap(),
        ],
    );
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("✔ turn 1: (spoken, "), "{}", run.stdout);
    let recorded = records.join("spoken-1");
    // Checked again into the same folder: said at once, nothing run over the recording.
    let twice = check(
        scratch.path(),
        &[
            "check",
            scenario.to_str().unwrap(),
            "--record",
            records.to_str().unwrap(),
        ],
    );
    assert_eq!(twice.code, Some(2), "{}", twice.stderr);
    assert!(
        twice.stderr.contains("spoken-1 already holds a recording"),
        "{}",
        twice.stderr
    );
    let again = check(scratch.path(), &["check", recorded.to_str().unwrap()]);
    assert_eq!(again.code, Some(0), "{}\n{}", again.stdout, again.stderr);
    assert!(
        again.stdout.contains("✔ turn 1: (spoken, "),
        "{}",
        again.stdout
    );
    assert!(
        again
            .stdout
            .contains("✔ turn 2: Is the living room lamp on?"),
        "{}",
        again.stdout
    );
    assert_eq!(
        checked_turns(&again),
        inspected_turns(scratch.path(), &recorded)
    );

    // A spoken turn whose audio cannot be read is one error naming the file, exit 2, and
    // nothing runs: never a check of the turns that are left.
    let mic = std::fs::read(recorded.join("mic.wav")).unwrap();
    let damaged = scratch.path().join("damaged");
    type Damage<'a> = &'a dyn Fn(&Path);
    let cases: [(&str, Damage); 6] = [
        ("missing", &|_| {}),
        ("a FIFO", &|path| mkfifo(path)),
        ("linked to /dev/zero", &|path| {
            std::os::unix::fs::symlink("/dev/zero", path).unwrap()
        }),
        ("garbage", &|path| {
            std::fs::write(path, [0x5a; 4096]).unwrap()
        }),
        ("cut short", &|path| {
            std::fs::write(path, &mic[..mic.len() / 2]).unwrap()
        }),
        ("another rate", &|path| {
            let mut other = mic.clone();
            other[24..28].copy_from_slice(&48_000u32.to_le_bytes());
            std::fs::write(path, other).unwrap()
        }),
    ];
    for (what, make) in cases {
        let _ = std::fs::remove_dir_all(&damaged);
        std::fs::create_dir(&damaged).unwrap();
        std::fs::copy(
            recorded.join("session.jsonl"),
            damaged.join("session.jsonl"),
        )
        .unwrap();
        let path = damaged.join("mic.wav");
        make(&path);
        let run = check(scratch.path(), &["check", damaged.to_str().unwrap()]);
        assert_eq!(run.code, Some(2), "{what}: {}\n{}", run.stdout, run.stderr);
        assert!(
            run.stderr.contains(&format!("{}: ", path.display())),
            "{what}: {}",
            run.stderr
        );
        assert!(
            run.stderr.contains("turn") && !run.stdout.contains("turn 1"),
            "{what}: {}\n{}",
            run.stdout,
            run.stderr
        );
    }
}

/// What cannot be read is exit 2 with one message naming the file, the line and the key (or
/// the flag); nothing runs.
#[test]
fn check_refuses_bad_files_and_flags_with_exit_2() {
    let scratch = tempfile::tempdir().unwrap();
    let bad = scratch.path().join("bad.toml");
    std::fs::write(
        &bad,
        "name = \"x\"\n\n[[turn]]\nsay = \"hi\"\n[turn.expect]\nno_tool = true\n",
    )
    .unwrap();
    let run = check(scratch.path(), &["check", bad.to_str().unwrap()]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("bad.toml: line 6: key `turn[0].expect.no_tool`: unknown field"),
        "{}",
        run.stderr
    );
    std::fs::write(&bad, "[[turn]]\n[turn.expect]\nno_tools = true\n").unwrap();
    let run = check(scratch.path(), &["check", bad.to_str().unwrap()]);
    assert_eq!(run.code, Some(2));
    assert!(
        run.stderr
            .contains("bad.toml: line 1: key `turn[0].say`: the turn says nothing"),
        "{}",
        run.stderr
    );
    std::fs::write(&bad, "[[turn]]\naudio = \"missing.wav\"\n").unwrap();
    let run = check(scratch.path(), &["check", bad.to_str().unwrap()]);
    assert_eq!(run.code, Some(2));
    assert!(
        run.stderr.contains("line 1: key `turn[0].audio`: ") && run.stderr.contains("missing.wav"),
        "{}",
        run.stderr
    );
    let fifo = scratch.path().join("fifo.toml");
    mkfifo(&fifo);
    let run = check(scratch.path(), &["check", fifo.to_str().unwrap()]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    let run = check(scratch.path(), &["check", "no-such-recording"]);
    assert_eq!(run.code, Some(2));
    assert!(
        run.stderr.contains("No recording named no-such-recording"),
        "{}",
        run.stderr
    );
    for (flag, value) in [("--min-pass-rate", "2"), ("--repeat", "0")] {
        let run = check(scratch.path(), &["check", "x.toml", flag, value]);
        assert_eq!(run.code, Some(2), "{flag}: {}", run.stderr);
        assert!(run.stderr.contains(flag), "{}", run.stderr);
    }
}

/// What a headless run showed of the conversation: the user's lines, each tool call (name and
/// arguments) and the model's replies, in order.
fn transcript(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter(|l| l.starts_with("You: ") || l.starts_with("Gemini: ") || l.starts_with("Tool: "))
        .map(|l| l.split(" -> ").next().unwrap().to_owned())
        .collect()
}

/// Plays a recording's app side to a `mock --replay` over a raw socket: each message the app
/// sent after its setup, passed through `change` (the turn's number, from 1, and the
/// message), then what answers it: up to the next tool call when the next recorded message
/// answers one, else up to the model's turnComplete. `Err` is the server's close.
async fn play_app_side(
    url: &str,
    sent: &[Value],
    change: impl Fn(usize, &Value) -> Value,
) -> Result<common::ws::JsonSocket, common::ws::Closed> {
    let endpoint = format!(
        "{url}/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
    );
    let mut socket = common::ws::JsonSocket::connect(endpoint).await;
    socket.send(sent[0].clone()).await;
    // The setup is answered as recorded.
    socket.wait_for(|m| m.get("setupComplete").is_some()).await;
    let turns = &sent[1..];
    for (n, message) in turns.iter().enumerate() {
        socket.send(change(n + 1, message)).await;
        let next_answers_a_call = turns
            .get(n + 1)
            .is_some_and(|next| next.get("toolResponse").is_some());
        socket
            .until(|m| {
                if next_answers_a_call {
                    m.get("toolCall").is_some()
                } else {
                    m["serverContent"]["turnComplete"] == true
                }
            })
            .await?;
    }
    Ok(socket)
}

/// `livetalk mock --replay` of a session `livetalk --record` made serves `livetalk
/// --endpoint` the same session (its transcript equal), to one app after another, each from
/// the start; an app that sends other text, another tool result or a turn too many is told
/// of on the mock's stdout, one line per difference naming the turn, and goes on; with
/// `--strict` its connection is closed with 1008 and that line as the reason.
#[test]
fn mock_replay_serves_the_recorded_session_and_reports_each_difference() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("rec");
    let rec = dir.to_str().unwrap();
    let original = run_livetalk(
        scratch.path(),
        &["--headless", "--offline", "--record", rec],
        &[],
        &SMART_HOME_LINES,
    );
    assert_eq!(original.code, Some(0), "{}", original.stderr);
    assert_smart_home_dialogue(&original.stdout);
    let expected = transcript(&original.stdout);

    let mut mock = MockProcess::start(scratch.path(), &["--replay", rec, "--speed", "50"]);
    for _ in 0..2 {
        let app = run_livetalk(
            scratch.path(),
            &["--headless", "--endpoint", &mock.url],
            &[],
            &SMART_HOME_LINES,
        );
        assert_eq!(app.code, Some(0), "{}", app.stderr);
        assert_eq!(transcript(&app.stdout), expected, "{}", app.stderr);
    }
    assert_eq!(mock.stdout.arrived(), Vec::<String>::new(), "no difference");

    let sent: Vec<Value> = sent_messages(&dir);
    assert!(sent[0].get("setup").is_some(), "{sent:?}");
    let answers: Vec<usize> = (1..sent.len())
        .filter(|n| sent[*n].get("toolResponse").is_some())
        .collect();
    assert_eq!(answers, [2, 4, 6], "{sent:#?}");
    let other_result = |message: &Value| {
        let mut message = message.clone();
        message["toolResponse"]["functionResponses"][0]["response"] = json!({"status": "broken"});
        message
    };
    let result_line = "turn 2: the app answered \"get_device_status\" with {\"status\":\"broken\"}, the recording with {";
    // Quoted text is cut at 40 characters, so a line fits a close reason.
    let text_line = "turn 3: the app sent the text \"Hello there\", the recording has \"Okay, please turn it on and set its col…\"";
    let extra_line = "turn 7: the app began a turn the recording does not have (with the text \"One more thing\"; the recording ends after turn 6)";
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        // Another tool result at turn 2, other text at turn 3: the session goes on, and a
        // turn too many is answered with nothing.
        let mut socket = play_app_side(&mock.url, &sent, |n, message| match n {
            2 => other_result(message),
            3 => json!({"clientContent": {"turns": [{"role": "user", "parts": [{"text": "Hello there"}]}], "turnComplete": true}}),
            _ => message.clone(),
        })
        .await
        .unwrap();
        socket
            .send(json!({"realtimeInput": {"text": "One more thing"}}))
            .await;
        let last = format!("difference: connection 3, {extra_line}");
        mock.stdout.wait_for(WAIT, |l| l == last);
        let printed = &mock.stdout.seen[1..];
        assert_eq!(printed.len(), 3, "one line a difference: {printed:#?}");
        assert!(
            printed[0].starts_with(&format!("difference: connection 3, {result_line}"))
                && printed[0].len() <= "difference: connection 3, ".len() + 123,
            "{printed:#?}"
        );
        assert_eq!(printed[1], format!("difference: connection 3, {text_line}"));
    });
    drop(mock);

    let strict = MockProcess::start(
        scratch.path(),
        &["--replay", rec, "--speed", "50", "--strict"],
    );
    runtime.block_on(async {
        let closed = |result: Result<common::ws::JsonSocket, common::ws::Closed>| match result {
            Ok(_) => panic!("strict: the connection went on"),
            Err(closed) => (closed.code, closed.reason),
        };
        let other_text = play_app_side(&strict.url, &sent[..2], |_, _| {
            json!({"clientContent": {"turns": [{"role": "user", "parts": [{"text": "Hello there"}]}], "turnComplete": true}})
        })
        .await;
        let turn_1 = format!(
            "turn 1: the app sent the text \"Hello there\", the recording has \"{}\"",
            SMART_HOME_LINES[0]
        );
        assert_eq!(closed(other_text), (1008, turn_1));
        let another_result = play_app_side(&strict.url, &sent[..3], |n, message| match n {
            2 => other_result(message),
            _ => message.clone(),
        })
        .await;
        let (code, reason) = closed(another_result);
        assert_eq!(code, 1008);
        assert!(reason.starts_with(result_line), "{reason:?}");
        let mut whole = play_app_side(&strict.url, &sent, |_, message| message.clone())
            .await
            .unwrap();
        whole
            .send(json!({"realtimeInput": {"text": "One more thing"}}))
            .await;
        let Err(extra) = whole.until(|_| false).await else {
            panic!("strict: a turn too many went on");
        };
        assert_eq!(extra.code, 1008);
        assert_eq!(extra.reason, extra_line);
    });
}

/// A `check` scenario can show the model a picture before a turn (`picture`, beside the
/// scenario), or a folder of frames: it is sent as `/image` sends it, and the demo model
/// answers "what do you see?" from it (a folder's last); one that cannot be read fails that
/// turn with the picture's own words.
#[test]
fn check_shows_a_picture_on_a_turn() {
    let scratch = tempfile::tempdir().unwrap();
    png_file(&scratch.path().join("red.png"), 800, 600, [220, 30, 30]);
    png_file(&scratch.path().join("blue.png"), 320, 200, [30, 60, 220]);
    let scenario = scratch.path().join("sight.toml");
    std::fs::write(
        &scenario,
        "[[turn]]\npicture = \"red.png\"\nsay = \"What do you see?\"\n[turn.expect]\nreply_contains = [\"800 by 600\", \"mostly red\"]\n\n[[turn]]\npicture = \"blue.png\"\nsay = \"What do you see now?\"\n[turn.expect]\nreply_contains = [\"mostly blue\"]\n",
    )
    .unwrap();
    let run = check(scratch.path(), &["check", scenario.to_str().unwrap()]);
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("✔ turn 1: What do you see?"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("✔ turn 2: What do you see now?"),
        "{}",
        run.stdout
    );

    // A folder of frames: each shown in name order, the model sees the last.
    let frames = scratch.path().join("frames");
    std::fs::create_dir(&frames).unwrap();
    png_file(&frames.join("01.png"), 320, 200, [220, 30, 30]);
    png_file(&frames.join("02.png"), 640, 400, [30, 200, 60]);
    std::fs::write(
        &scenario,
        "[[turn]]\npicture = \"frames\"\nsay = \"What do you see?\"\n[turn.expect]\nreply_contains = [\"640 by 400\", \"mostly green\"]\n",
    )
    .unwrap();
    let run = check(scratch.path(), &["check", scenario.to_str().unwrap()]);
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);

    std::fs::write(
        &scenario,
        "[[turn]]\npicture = \"missing.png\"\nsay = \"What do you see?\"\n",
    )
    .unwrap();
    let run = check(scratch.path(), &["check", scenario.to_str().unwrap()]);
    assert_eq!(run.code, Some(1), "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("missing.png"), "{}", run.stdout);
}

/// A picture shown to the model is recorded as a file (`frames/0001.jpg`) that the `send` line
/// refers to, never as base64 in `session.jsonl`; `inspect` counts it; a replay shows it where it
/// was sent; `check` of the recording shows it again before the turn that followed it; the
/// scenario written from the recording keeps it beside itself and passes.
#[test]
fn a_recording_keeps_the_pictures_sent_as_files_and_check_shows_them_again() {
    let scratch = tempfile::tempdir().unwrap();
    let red = scratch.path().join("red.png");
    png_file(&red, 800, 600, [220, 30, 30]);
    let rec = scratch.path().join("rec");
    let run = run_livetalk(
        scratch.path(),
        &["--headless", "--offline", "--record", rec.to_str().unwrap()],
        &[],
        &[&format!("/image {}", red.display()), "What do you see?"],
    );
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("800 by 600 picture, mostly red"),
        "{}",
        run.stdout
    );

    // The picture is a file; its line refers to it.
    let frame = std::fs::read(rec.join("frames/0001.jpg")).expect("the picture's file");
    let picture = image::load_from_memory(&frame).unwrap().into_rgb8();
    assert_eq!(picture.dimensions(), (800, 600));
    assert!(!rec.join("frames/0002.jpg").exists());
    let videos: Vec<Value> = sent_messages(&rec)
        .into_iter()
        .filter_map(|m| m["realtimeInput"].get("video").cloned())
        .collect();
    assert_eq!(
        videos,
        [serde_json::json!({
            "mimeType": "image/jpeg",
            "data": {"file": "frames/0001.jpg", "bytes": frame.len()}
        })]
    );
    let log = std::fs::read_to_string(rec.join("session.jsonl")).unwrap();
    let base64 = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(&frame)
    };
    assert!(
        !log.contains(&base64[..64]),
        "the picture is not in the log"
    );

    let inspected = check(
        scratch.path(),
        &["inspect", "--json", rec.to_str().unwrap()],
    );
    assert_eq!(inspected.code, Some(0), "{}", inspected.stderr);
    let summary: Value = serde_json::from_str(inspected.stdout.trim()).unwrap();
    assert_eq!(summary["pictures_sent"], 1);

    // A replay shows the picture where it was sent, read back from its file.
    let replayed = check(
        scratch.path(),
        &["replay", rec.to_str().unwrap(), "--headless", "--instant"],
    );
    assert_eq!(replayed.code, Some(0), "{}", replayed.stderr);
    let shown = replayed
        .stdout
        .find("You (image): frames/0001.jpg (")
        .unwrap_or_else(|| panic!("{}", replayed.stdout));
    assert!(
        replayed.stdout[shown..].contains("sent as a 800×600 JPEG")
            && replayed.stdout[shown..].contains("mostly red"),
        "{}",
        replayed.stdout
    );

    // `check` of the recording shows the picture again before "What do you see?".
    let checked = check(scratch.path(), &["check", rec.to_str().unwrap()]);
    assert_eq!(
        checked.code,
        Some(0),
        "{}\n{}",
        checked.stdout,
        checked.stderr
    );
    assert!(
        checked.stdout.contains("✔ turn 1: What do you see?"),
        "{}",
        checked.stdout
    );
    let out = scratch.path().join("sight.toml");
    let written = check(
        scratch.path(),
        &[
            "check",
            "--write-scenario",
            rec.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(written.code, Some(0), "{}", written.stderr);
    assert!(
        written.stderr.contains("and 1 picture(s) beside it"),
        "{}",
        written.stderr
    );
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(
        text.contains("picture = \"sight-turn1.jpg\"\nsay = \"What do you see?\""),
        "{text}"
    );
    assert_eq!(
        std::fs::read(scratch.path().join("sight-turn1.jpg")).unwrap(),
        frame
    );
    std::fs::write(
        &out,
        format!("{text}reply_contains = [\"800 by 600\", \"mostly red\"]\n"),
    )
    .unwrap();
    let passed = check(scratch.path(), &["check", out.to_str().unwrap()]);
    assert_eq!(passed.code, Some(0), "{}\n{}", passed.stdout, passed.stderr);
}
