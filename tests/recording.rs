//! Recording, replay and inspection, end to end with the binary: record against the mock,
//! then replay, inspect, list; crash safety (SIGKILL) and corrupted lines.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;

const FAKE_KEY: &str = "fake-test-key-recording-0123456789";

fn lines(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("session.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Sum of the sample counts the log refers to in `file`.
fn referenced_samples(dir: &Path, file: &str) -> u64 {
    fn walk(value: &serde_json::Value, file: &str, sum: &mut u64) {
        match value {
            serde_json::Value::Object(map) => {
                if map.get("file").and_then(|f| f.as_str()) == Some(file) {
                    *sum += map["sample_count"].as_u64().unwrap();
                }
                map.values().for_each(|v| walk(v, file, sum));
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| walk(v, file, sum)),
            _ => {}
        }
    }
    let mut sum = 0;
    for line in lines(dir) {
        walk(&line, file, &mut sum);
    }
    sum
}

fn tool_lines(stdout: &str) -> Vec<String> {
    // Name and arguments only: durations and results may differ between runs.
    stdout
        .lines()
        .filter(|l| l.starts_with("Tool: "))
        .map(|l| l.split(" -> ").next().unwrap().to_owned())
        .collect()
}

#[test]
fn recorded_session_replays_inspects_and_reruns_against_the_mock() {
    let scratch = tempfile::tempdir().unwrap();
    let mock = MockProcess::start(scratch.path(), &["--speed", "20"]);
    let dir = scratch.path().join("rec");
    let dir_arg = dir.to_str().unwrap();
    let original = run_livetalk(
        scratch.path(),
        &["--headless", "--endpoint", &mock.url, "--record", dir_arg],
        &[("GEMINI_API_KEY", FAKE_KEY)],
        &SEED_LINES,
    );
    assert_eq!(
        original.code,
        Some(0),
        "{}\n{}",
        original.stdout,
        original.stderr
    );
    assert_eq!(tool_lines(&original.stdout).len(), 3, "{}", original.stdout);

    // Replay reproduces the original output exactly, with no network (the mock is gone).
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
    assert_eq!(replayed.code, Some(0));
    assert!(!replayed.stderr.contains("warning"), "{}", replayed.stderr);

    // Inspect counts what happened.
    let inspect = run_livetalk(scratch.path(), &["inspect", dir_arg], &[], &[]);
    assert_eq!(inspect.code, Some(0), "{}", inspect.stderr);
    for expected in [
        "User turns: 3\n",
        "Model turns: 3\n",
        "Tool calls: 3 (0 cancelled)\n",
        "Connections: 1 (reconnects: 0)\n",
        "Interruptions: 0\n",
        "Closes: 1\n",
        "code none, by livetalk: Session ended.",
        "mic.wav: none",
    ] {
        assert!(
            inspect.stdout.contains(expected),
            "{expected:?} in:\n{}",
            inspect.stdout
        );
    }
    assert_eq!(
        inspect
            .stdout
            .matches("end of input → first model audio: ")
            .count(),
        3,
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

    // The Markdown transcript has the tool calls with arguments and results.
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
    assert!(
        markdown.stdout.contains("\"temperature_celsius\": 20"),
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
        samples > 3 * 24_000,
        "three spoken replies last over 3 s: {samples}"
    );
    assert!(!dir.join("mic.wav").exists());

    // Every frame both ways is there, audio by reference only.
    let log = lines(&dir);
    assert_eq!(log[0]["type"], "meta");
    assert_eq!(log[0]["endpoint_host"], "127.0.0.1");
    let sent = log.iter().filter(|l| l["type"] == "send").count();
    assert_eq!(sent, 1 + 3 + 3, "setup, three turns, three tool responses");
    assert!(log.iter().any(|l| l["message"]["toolCall"].is_object()));

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
}

#[test]
fn sigkilled_recording_still_replays_and_inspects() {
    let scratch = tempfile::tempdir().unwrap();
    // Slow speech, so the reply is still streaming when the process is killed.
    let mock = MockProcess::start(scratch.path(), &["--speed", "0.5"]);
    let dir = scratch.path().join("killed");
    let dir_arg = dir.to_str().unwrap();
    let mut child = livetalk(scratch.path())
        .args(["--headless", "--endpoint", &mock.url, "--record", dir_arg])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    write_lines(&mut stdin, &SEED_LINES[..1]);
    let mut stdout = LineWatcher::new(child.stdout.take().unwrap());
    stdout.wait_for(Duration::from_secs(30), |l| {
        l.starts_with("Tool: get_device_status")
    });
    // Wait (polling with a deadline) until some model audio has been recorded.
    let deadline = Instant::now() + Duration::from_secs(30);
    while referenced_samples(&dir, "model.wav") < 2400 {
        assert!(Instant::now() < deadline, "no model audio recorded");
        std::thread::sleep(Duration::from_millis(20));
    }
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
        &SEED_LINES[..2],
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
