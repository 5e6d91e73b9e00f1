//! Binary-level tests: `livetalk mock` in one process, `livetalk --headless` in another.

// Test output is the test runner's, not livetalk's: it may print directly.
#![allow(clippy::disallowed_macros)]
#![allow(clippy::unwrap_used)]

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::*;

#[test]
fn smart_home_dialogue_through_the_mock_binary() {
    let scratch = tempfile::tempdir().unwrap();
    let mock = MockProcess::start(scratch.path(), &["--speed", "20"]);
    let run = run_livetalk(
        scratch.path(),
        &["--headless", "--endpoint", &mock.url],
        &[],
        &SMART_HOME_LINES,
    );
    let (stdout, stderr) = (&run.stdout, &run.stderr);
    assert_eq!(run.code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");

    assert_smart_home_dialogue(stdout);
}

#[test]
fn json_output_is_one_event_per_line() {
    let scratch = tempfile::tempdir().unwrap();
    let run = run_livetalk(
        scratch.path(),
        &["--headless", "--json", "--offline"],
        &[],
        &[SMART_HOME_LINES[0]],
    );
    let (stdout, stderr) = (&run.stdout, &run.stderr);
    assert_eq!(run.code, Some(0), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("offline demo model"),
        "the offline model is announced: {stderr}"
    );
    let events: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect();
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        ["session", "user", "tool_call", "model", "cost", "closed"],
        "{stdout}"
    );
    // The offline demo model counts tokens by modality and is not priced.
    let cost = &events[4];
    assert_eq!(cost["offline"], true);
    assert!(cost["cost_usd"].is_null(), "{cost}");
    assert_eq!(cost["priced"], false, "{cost}");
    let total = cost["tokens"]["total"].as_u64().unwrap_or(0);
    assert!(total > 0, "{cost}");
    // One count: the `cost` event's total is the `closed` event's (the service's own, its
    // early look at the prompt without a total counted once), and its parts add up to it.
    assert_eq!(events[5]["total_tokens"].as_u64(), Some(total), "{stdout}");
    let parts: u64 = ["text_in", "text_out", "audio_in", "audio_out", "video_in"]
        .iter()
        .map(|part| {
            cost["tokens"][part]
                .as_u64()
                .unwrap_or_else(|| panic!("{part}: {cost}"))
        })
        .sum();
    assert_eq!(parts, total, "{cost}");
    assert_eq!(events[0]["offline"], true);
    let tool = &events[2];
    assert_eq!(tool["name"], "get_device_status");
    assert_eq!(tool["state"], "ok");
    assert_eq!(tool["response"]["name"], "get_device_status");
    assert!(
        tool["response"]["id"]
            .as_str()
            .unwrap()
            .starts_with("function-call-")
    );
    assert_eq!(events[5]["clean"], true);
}

#[test]
fn killing_the_mock_mid_turn_retries_then_gives_up_with_the_reason() {
    let scratch = tempfile::tempdir().unwrap();
    // A small retry budget keeps the test short; the backoff is the real one.
    std::fs::write(
        scratch.path().join("config.toml"),
        "[session]\nreconnect_attempts = 2\n[audio]\nenabled = false\n",
    )
    .unwrap();
    // Slow speech so the reply is still streaming when the server dies.
    let mut mock = MockProcess::start(scratch.path(), &["--speed", "0.25"]);
    let mut client = livetalk(scratch.path())
        .args(["--headless", "--endpoint", &mock.url])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = client.stdin.take().unwrap();
    write_lines(&mut stdin, &[SMART_HOME_LINES[0]]);
    let mut stdout = LineWatcher::new(client.stdout.take().unwrap());
    let stderr = read_all(client.stderr.take().unwrap());
    stdout.wait_for(Duration::from_secs(30), |l| {
        l.starts_with("Tool: get_device_status")
    });
    mock.child.kill().unwrap();
    mock.child.wait().unwrap();
    let status = wait_exit(client, Duration::from_secs(30));
    drop(stdin);
    let stderr = stderr.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(status.code(), Some(1), "stderr: {stderr}");
    assert!(
        stderr.contains("livetalk: warning: Connection lost: The connection was lost"),
        "the loss is explained: {stderr}"
    );
    assert!(
        stderr.contains("livetalk: warning: Reconnect attempt 2"),
        "{stderr}"
    );
    let gave_up: Vec<&str> = stderr
        .lines()
        .filter(|l| {
            l.starts_with("livetalk: error: Gave up reconnecting after 2 attempts. Last error: Could not connect to 127.0.0.1:")
                && l.contains(": connection refused")
        })
        .collect();
    assert_eq!(
        gave_up.len(),
        1,
        "one final message with the reason: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn bad_config_exits_with_a_clear_message() {
    let scratch = tempfile::tempdir().unwrap();
    std::fs::write(
        scratch.path().join("config.toml"),
        "[tools]\nmax_response_bytes = 10\n[audio]\nenabled = false\n",
    )
    .unwrap();
    let output = livetalk(scratch.path())
        .args(["--headless"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr.contains("config.toml")
            && stderr.contains("tools.max_response_bytes")
            && stderr.contains("at least 1024"),
        "{stderr}"
    );
}

#[test]
fn connection_refused_is_a_clear_error() {
    let scratch = tempfile::tempdir().unwrap();
    let port = common::free_port();
    let output = livetalk(scratch.path())
        .args([
            "--headless",
            "--endpoint",
            &format!("ws://127.0.0.1:{port}"),
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr.contains("connection refused"), "{stderr}");
}

#[test]
fn mock_scenario_go_away_and_a_drop_do_not_break_the_smart_home_dialogue() {
    let scratch = tempfile::tempdir().unwrap();
    let scenario = scratch.path().join("faults.toml");
    std::fs::write(
        &scenario,
        r#"
        # After the first answer the server asks the client to move (then closes 1008);
        # the third question is lost with the connection before it is answered.
        [[fault]]
        at = "turn_complete"
        nth = 1
        action = "go_away"
        time_left_secs = 3.0

        [[fault]]
        at = "user_turn"
        nth = 3
        action = "drop"
        "#,
    )
    .unwrap();
    let mock = MockProcess::start(
        scratch.path(),
        &["--speed", "20", "--scenario", scenario.to_str().unwrap()],
    );
    let run = run_livetalk(
        scratch.path(),
        &["--headless", "--endpoint", &mock.url],
        &[],
        &SMART_HOME_LINES,
    );
    let (stdout, stderr) = (&run.stdout, &run.stderr);
    assert_eq!(run.code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let replies: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("Gemini: "))
        .collect();
    assert_eq!(replies.len(), 3, "{stdout}");
    assert!(replies[0].contains("off"), "{}", replies[0]);
    // "turn it on": "it" is the lamp only if the resumed model remembers the first question.
    assert!(
        replies[1].contains("on") && replies[1].contains("blue"),
        "{}",
        replies[1]
    );
    assert!(replies[2].contains("20"), "{}", replies[2]);
    assert!(!stdout.contains("[interrupted]"), "{stdout}");
    assert!(
        stderr.contains("livetalk: warning: The server will end this connection in 3 s (goAway)."),
        "{stderr}"
    );
    assert!(
        stderr.contains("livetalk: warning: Connection lost:"),
        "{stderr}"
    );
    assert_eq!(
        stderr
            .matches("livetalk: info: Reconnected; the conversation continues.")
            .count(),
        2,
        "{stderr}"
    );
    assert!(!stderr.contains("error"), "{stderr}");
}

#[test]
fn a_bad_scenario_file_is_a_clear_error() {
    let scratch = tempfile::tempdir().unwrap();
    let scenario = scratch.path().join("faults.json");
    std::fs::write(
        &scenario,
        r#"{"fault": [{"at": "setup", "action": "close"}]}"#,
    )
    .unwrap();
    let output = livetalk(scratch.path())
        .args(["mock", "--listen", "127.0.0.1:0", "--scenario"])
        .arg(&scenario)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("bad scenario") && stderr.contains("fault 1: `code` is required"),
        "{stderr}"
    );
}

/// `livetalk --headless | head -1`, and the same for `replay --headless`: once nobody reads
/// stdout any more, livetalk ends the session cleanly and quietly (exit 0), never a panic.
#[test]
fn a_closed_stdout_ends_the_session_quietly() {
    use std::io::{BufRead, BufReader, Read};
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("piped");
    let head_one = |args: &[&str], lines: &[&str]| {
        let mut child = livetalk(scratch.path())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        write_lines(&mut stdin, lines);
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        // The reader is gone (dropped above); stdin stays open, so only that can end the run.
        let mut stderr = child.stderr.take().unwrap();
        let status = wait_exit(child, Duration::from_secs(20));
        let mut errors = String::new();
        stderr.read_to_string(&mut errors).unwrap();
        drop(stdin);
        (first, status, errors)
    };
    let dir_arg = dir.to_str().unwrap();
    let (first, status, errors) = head_one(
        &["--headless", "--offline", "--record", dir_arg],
        &SMART_HOME_LINES,
    );
    assert_eq!(first.trim_end(), format!("You: {}", SMART_HOME_LINES[0]));
    assert_eq!(status.code(), Some(0), "{errors}");
    assert!(
        !errors.contains("panicked") && !errors.contains("Broken pipe"),
        "{errors}"
    );

    let (first, status, errors) = head_one(&["replay", dir_arg, "--headless", "--instant"], &[]);
    assert_eq!(first.trim_end(), format!("You: {}", SMART_HOME_LINES[0]));
    assert_eq!(status.code(), Some(0), "{errors}");
    assert!(
        !errors.contains("panicked") && !errors.contains("Broken pipe"),
        "{errors}"
    );
}

/// `livetalk mock --listen 0.0.0.0:PORT` says it is reachable from the network; on loopback
/// it says nothing of the sort.
#[test]
fn the_mock_says_when_it_listens_beyond_loopback() {
    use std::io::{BufRead, BufReader, Read};
    let scratch = tempfile::tempdir().unwrap();
    for (listen, warns) in [("0.0.0.0:0", true), ("127.0.0.1:0", false)] {
        let mut child = livetalk(scratch.path())
            .args(["mock", "--listen", listen])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.contains("livetalk mock listening on"), "{line}");
        child.kill().unwrap();
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        child.wait().unwrap();
        assert_eq!(
            stderr.contains("reachable from the network"),
            warns,
            "{listen}: {stderr}"
        );
    }
}

/// A server that sends 10 MB of tool arguments: the terminal (text and JSON) and the log get
/// summaries of a few KiB that say the whole size; the recording keeps the arguments whole.
#[test]
fn huge_tool_arguments_are_summarised_on_the_terminal_and_in_the_log() {
    let scratch = tempfile::tempdir().unwrap();
    let huge = "x".repeat(10_000_000);
    let scenario = scratch.path().join("huge-args.json");
    let faults = serde_json::json!({"fault": [{
        "at": "user_turn", "every": 1, "action": "tool_calls",
        "name": "get_device_status", "args": {"device_name": huge},
    }]});
    std::fs::write(&scenario, faults.to_string()).unwrap();
    let mock = MockProcess::start(
        scratch.path(),
        &["--speed", "20", "--scenario", scenario.to_str().unwrap()],
    );
    const BOUND: usize = 64 << 10;

    // Text and JSON output, side by side (each with its own data dir, so its own log).
    let runs = std::thread::scope(|threads| {
        let runs: Vec<_> = [false, true]
            .map(|json| {
                let (url, scratch) = (&mock.url, scratch.path());
                threads.spawn(move || {
                    let home = scratch.join(if json { "json" } else { "text" });
                    std::fs::create_dir_all(&home).unwrap();
                    let dir = home.join("rec");
                    let mut args = vec!["--headless", "--endpoint", url, "--record"];
                    args.push(dir.to_str().unwrap());
                    if json {
                        args.push("--json");
                    }
                    (
                        json,
                        home.clone(),
                        run_livetalk(&home, &args, &[], &["Is the lamp on?"]),
                    )
                })
            })
            .into_iter()
            .collect();
        runs.into_iter()
            .map(|run| run.join().unwrap())
            .collect::<Vec<_>>()
    });
    for (json, home, run) in runs {
        let (stdout, stderr) = (&run.stdout, &run.stderr);
        let head = |text: &str| text.chars().take(2_000).collect::<String>();
        assert_eq!(run.code, Some(0), "{}\n{}", head(stdout), head(stderr));
        let log = home.join("data/livetalk/livetalk.log");
        let log_text = std::fs::read_to_string(&log).unwrap();
        for (what, text) in [("stdout", stdout), ("stderr", stderr), ("log", &log_text)] {
            assert!(text.len() < BOUND, "{what}: {} bytes", text.len());
        }

        // The summaries say what was left out.
        let said = "x… (9.5 MiB, shown 4.0 KiB)";
        if json {
            let call: serde_json::Value = stdout
                .lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .find(|e: &serde_json::Value| e["type"] == "tool_call")
                .unwrap_or_else(|| panic!("{stdout}"));
            let args = call["args"].as_str().unwrap_or_else(|| panic!("{call}"));
            assert!(args.starts_with("{\"device_name\":\"xxx"), "{args}");
            assert!(args.ends_with(said), "{args}");
        } else {
            let tool = stdout.lines().find(|l| l.starts_with("Tool: ")).unwrap();
            assert!(
                tool.starts_with("Tool: get_device_status {\"device_name\":\"xxx"),
                "{tool}"
            );
            assert!(tool.contains(said), "{tool}");
        }
        // The tool's error quotes the name it was given: a notice (on stderr, or a JSON
        // event), bounded too.
        let notices = if json { stdout } else { stderr };
        let failed = notices
            .lines()
            .find(|l| l.contains("Tool get_device_status failed: no device called"))
            .unwrap_or_else(|| panic!("{}", head(notices)));
        assert!(failed.contains(said), "{failed}");
        assert!(log_text.contains("tool call failed"), "{log_text}");
        assert!(log_text.contains(said), "{log_text}");
        let reply = if json {
            "\"type\":\"model\""
        } else {
            "Gemini: "
        };
        assert!(stdout.contains(reply), "{stdout}");

        // The recording holds the arguments whole.
        let recording = std::fs::read_to_string(home.join("rec/session.jsonl")).unwrap();
        assert!(recording.contains(&format!("{{\"device_name\":\"{huge}\"}}")));
    }
}

/// A server that floods model audio with `--output-wav` and a 1 MiB cap: the file stops at the
/// cap and is a valid WAV, the user is told once, and the log says so once.
#[test]
fn the_output_wav_stops_at_its_cap_with_one_notice() {
    let scratch = tempfile::tempdir().unwrap();
    // Three 1.1 MB bursts of audio at the first question, then the model's spoken answer.
    let burst = "[[fault]]\nat = \"user_turn\"\naction = \"huge_message\"\nbytes = 1500000\n";
    let scenario = scratch.path().join("flood.toml");
    std::fs::write(&scenario, burst.repeat(3)).unwrap();
    let mock = MockProcess::start(
        scratch.path(),
        &["--speed", "50", "--scenario", scenario.to_str().unwrap()],
    );
    let wav = scratch.path().join("answer.wav");
    let run = run_livetalk(
        scratch.path(),
        &[
            "--headless",
            "--endpoint",
            &mock.url,
            "--output-wav",
            wav.to_str().unwrap(),
            "--output-wav-max-mb",
            "1",
        ],
        &[],
        &SMART_HOME_LINES[..1],
    );
    let (stdout, stderr) = (&run.stdout, &run.stderr);
    assert_eq!(run.code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("Gemini: "), "{stdout}");

    let size = std::fs::metadata(&wav).unwrap().len();
    assert_eq!(size, 1 << 20, "the file stops at the cap");
    let reader = hound::WavReader::open(&wav).unwrap();
    assert_eq!(reader.spec().sample_rate, 24_000);
    assert_eq!(reader.spec().channels, 1);
    assert_eq!(
        u64::from(reader.duration()) * 2 + 44,
        size,
        "the header says what the file holds"
    );

    let notice = "answer.wav reached its size cap of 1.0 MiB";
    assert_eq!(stderr.matches(notice).count(), 1, "{stderr}");
    assert!(
        stderr.contains(&format!("livetalk: warning: {}", wav.display())),
        "{stderr}"
    );
    let log = std::fs::read_to_string(scratch.path().join("data/livetalk/livetalk.log")).unwrap();
    assert_eq!(
        log.matches("the output WAV reached its size cap").count(),
        1,
        "{log}"
    );
}

/// 3.8 Live extended thinking: every function is declared NON_BLOCKING (and the user is told),
/// so the model answers asynchronously: "One moment", `turnComplete` with `IN_PROGRESS`, then
/// the tool call and the answer, ending `IDLE`. The next line waits for `IDLE`: sent at the
/// first `turnComplete`, it would cut the interaction short and its answer would never come.
#[test]
fn on_3_8_the_next_line_waits_for_idle_not_for_turn_complete() {
    let scratch = tempfile::tempdir().unwrap();
    let run = run_livetalk(
        scratch.path(),
        &[
            "--headless",
            "--offline",
            "--model",
            "gemini-3.8-live-extended-thinking",
        ],
        &[],
        &SMART_HOME_LINES,
    );
    let (stdout, stderr) = (&run.stdout, &run.stderr);
    assert_eq!(run.code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stderr.contains("every function is declared NON_BLOCKING"),
        "the user is told: {stderr}"
    );
    let lines: Vec<&str> = stdout.lines().collect();
    let you: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].starts_with("You: "))
        .collect();
    assert_eq!(you.len(), 3, "{stdout}");
    // Each question's whole interaction (acknowledgement, tool, answer) before the next one.
    let expected = ["off", "blue", "20"];
    for (index, &at) in you.iter().enumerate() {
        let end = you.get(index + 1).copied().unwrap_or(lines.len());
        let interaction = &lines[at..end];
        let replies: Vec<&&str> = interaction
            .iter()
            .filter(|l| l.starts_with("Gemini: "))
            .collect();
        assert!(
            interaction.iter().any(|l| l.starts_with("Tool: ")),
            "{interaction:#?}"
        );
        assert_eq!(replies.len(), 2, "{interaction:#?}");
        assert!(replies[0].contains("One moment"), "{interaction:#?}");
        assert!(replies[1].contains(expected[index]), "{interaction:#?}");
    }
}

/// A config asking approval for every `set_device_status` call, audio off.
fn approval_config(scratch: &std::path::Path) {
    std::fs::write(
        scratch.join("config.toml"),
        "[audio]\nenabled = false\n[tools.approval]\nset_device_status = \"always\"\n",
    )
    .unwrap();
}

#[test]
fn headless_approve_policies_decide_for_calls_that_would_wait_for_a_person() {
    let scratch = tempfile::tempdir().unwrap();
    approval_config(scratch.path());
    // Nobody can approve headless, and what the user set wins: a tool set to "always" runs
    // only under --approve all (and says why it ran unasked); every other policy refuses it at
    // once, so the call is answered rather than left waiting forever.
    for policy in [None, Some("all"), Some("read-only"), Some("none")] {
        let mut args = vec!["--headless", "--offline"];
        if let Some(policy) = policy {
            args.extend(["--approve", policy]);
        }
        let run = run_livetalk(scratch.path(), &args, &[], &["turn on the lamp"]);
        let (stdout, stderr) = (&run.stdout, &run.stderr);
        assert_eq!(run.code, Some(0), "{policy:?}\n{stdout}\n{stderr}");
        let tool = stdout
            .lines()
            .find(|l| l.starts_with("Tool: set_device_status"))
            .unwrap_or_else(|| panic!("{policy:?}: {stdout}"));
        if policy == Some("all") {
            assert!(
                tool.contains(" -> ok (ran without asking: --approve all)"),
                "{tool}"
            );
            assert!(
                stdout.contains("Gemini: Alright, I've turned on the living room lamp."),
                "{stdout}"
            );
        } else {
            // The flag is named as given; without one, the refusal says the default applies.
            let how = match policy {
                Some(policy) => format!("livetalk was started with --approve {policy}"),
                None => "no --approve was given, so --approve read-only applies".to_owned(),
            };
            assert!(
                tool.contains(" -> refused") && tool.contains(&how),
                "{policy:?}: {tool}"
            );
            assert_eq!(tool.contains("started with"), policy.is_some(), "{tool}");
            assert!(
                stdout.contains("Gemini: Sorry, I couldn't turn on the living room lamp"),
                "{policy:?}: {stdout}"
            );
        }
    }
    let run = run_livetalk(
        scratch.path(),
        &["--headless", "--offline", "--approve", "sometimes"],
        &[],
        &[],
    );
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(
        run.stderr.contains("read-only") && run.stderr.contains("--approve"),
        "the valid policies are named: {}",
        run.stderr
    );
}

#[test]
fn the_demo_model_passes_what_it_hears_to_the_tool_and_phrases_the_error() {
    let scratch = tempfile::tempdir().unwrap();
    let run = run_livetalk(
        scratch.path(),
        &["--headless", "--offline"],
        &[],
        &["set the lamp to 250%", "turn on the garage light"],
    );
    let (stdout, stderr) = (&run.stdout, &run.stderr);
    assert_eq!(run.code, Some(0), "{stdout}\n{stderr}");
    let tools: Vec<&str> = stdout.lines().filter(|l| l.starts_with("Tool: ")).collect();
    assert_eq!(tools.len(), 2, "{stdout}");
    assert!(
        tools[0].contains("\"brightness\":250") && tools[0].contains(" -> error"),
        "250 reaches the tool as heard: {stdout}"
    );
    assert!(
        tools[1].contains("garage light") && tools[1].contains(" -> error"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "Gemini: Sorry, I couldn't set the living room lamp's brightness to 250%: brightness 250 is out of range; use 0–100."
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "Gemini: Sorry, I couldn't change the garage light: no device called \"garage light\""
        ),
        "{stdout}"
    );
}

#[test]
fn the_demo_model_calls_a_declared_tool_by_name_with_arguments_from_the_words() {
    let scratch = tempfile::tempdir().unwrap();
    let run = run_livetalk(
        scratch.path(),
        &["--headless", "--json", "--offline"],
        &[],
        &[
            "call get_device_status with device_name front door lock",
            "use the weather tool with city Paris",
        ],
    );
    let (stdout, stderr) = (&run.stdout, &run.stderr);
    assert_eq!(run.code, Some(0), "{stdout}\n{stderr}");
    let events: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let tool = events
        .iter()
        .find(|e| e["type"] == "tool_call")
        .unwrap_or_else(|| panic!("no call: {stdout}"));
    assert_eq!(tool["name"], "get_device_status");
    assert_eq!(
        tool["args"],
        serde_json::json!({"device_name": "front door lock"})
    );
    assert_eq!(tool["state"], "ok");
    let said: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "model")
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(said.len(), 2, "{stdout}");
    assert!(
        said[0].starts_with("The get_device_status tool answered: "),
        "{stdout}"
    );
    assert!(said[0].contains("locked"), "{stdout}");
    assert!(
        said[1].starts_with("This session has no tool called weather.")
            && said[1].contains("get_device_status"),
        "{stdout}"
    );
}

#[test]
fn a_full_log_is_moved_aside_and_begun_again() {
    let scratch = tempfile::tempdir().unwrap();
    let data = scratch.path().join("data/livetalk");
    std::fs::create_dir_all(&data).unwrap();
    // What earlier runs left: the log at its cap, and an older one that goes.
    let full = std::fs::File::create(data.join("livetalk.log")).unwrap();
    full.set_len(livetalk::logging::LOG_FILE_CAP).unwrap();
    std::fs::write(data.join("livetalk.log.1"), "the oldest log\n").unwrap();
    let run = run_livetalk(scratch.path(), &["--headless"], &[], &["hello"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let before = std::fs::metadata(data.join("livetalk.log.1")).unwrap();
    assert_eq!(before.len(), livetalk::logging::LOG_FILE_CAP);
    let log = std::fs::read_to_string(data.join("livetalk.log")).unwrap();
    assert!(
        log.contains("Live API session set up") && log.len() < 64 << 10,
        "{log}"
    );
}

/// What a hostile path can be: `/dev/zero` (endless), a FIFO nobody writes to (a read that
/// never ends), a folder, and a file past every size cap (sparse, so nothing is written).
/// Each is made at `dir/name` (`/dev/zero` by a symbolic link) and said as the words the
/// message must hold.
fn hostile_paths(dir: &std::path::Path, name: &str) -> Vec<(std::path::PathBuf, &'static str)> {
    std::fs::create_dir_all(dir).unwrap();
    let zero = dir.join(format!("zero-{name}"));
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    let fifo = dir.join(format!("fifo-{name}"));
    mkfifo(&fifo);
    let folder = dir.join(format!("folder-{name}"));
    std::fs::create_dir(&folder).unwrap();
    let huge = dir.join(format!("huge-{name}"));
    sparse_file(&huge, 1 << 30);
    vec![
        (zero, "is a character device, not a file"),
        (fifo, "is a FIFO (named pipe), not a file"),
        (folder, "is a folder, not a file"),
        (huge, "is larger than the"),
    ]
}

/// Runs a measured livetalk and checks it refused at once, in one line naming the path, with
/// `code`, in little memory and without growing its log.
fn assert_refused(
    scratch: &std::path::Path,
    configure: impl FnOnce(&mut std::process::Command),
    code: i32,
    says: &str,
) {
    let peak = scratch.join("peak");
    let log_before = log_bytes(scratch);
    let mut command = livetalk_measured(scratch, &peak);
    configure(&mut command);
    let started = std::time::Instant::now();
    let run = run_command(command, &[], Duration::from_secs(30));
    let took = started.elapsed();
    assert_eq!(
        run.code,
        Some(code),
        "{says}\n{}\n{}",
        run.stdout,
        run.stderr
    );
    assert!(
        run.stderr.contains(says),
        "wanted {says:?} in:\n{}",
        run.stderr
    );
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    assert!(took < Duration::from_secs(4), "{says}: took {took:?}");
    let peak_mib = peak_mib(&peak);
    assert!(peak_mib < 150.0, "{says}: peak {peak_mib:.0} MiB");
    let grown = log_bytes(scratch) - log_before;
    assert!(grown < 1 << 20, "{says}: the log grew by {grown} bytes");
    println!("{says}: exit {code} in {took:?}, peak {peak_mib:.1} MiB, log +{grown} B");
}

/// Every file named from outside is read with bounds: the config (named, or the default
/// one), Google credentials, a recording's `session.jsonl`, `--input-wav`, the mock's TLS
/// certificate and its scenario, each at
/// `/dev/zero`, a FIFO, a folder or a 1 GiB file, is one clear message at once, not an
/// exhausted memory or a hang.
#[test]
fn files_named_from_outside_are_refused_by_what_they_are_at_once() {
    let scratch = tempfile::tempdir().unwrap();
    let scratch = scratch.path();
    let hostile = scratch.join("hostile");

    for (path, is) in hostile_paths(&hostile, "config.toml") {
        let says = format!("livetalk: config file {} {is}", path.display());
        assert_refused(
            scratch,
            |c| {
                c.arg("sessions").env("LIVETALK_CONFIG", &path);
            },
            2,
            &says,
        );
    }

    // The default config file is refused the same way (it used to be passed over in
    // silence, its servers, approvals and key with it); a missing one is fine.
    let default = scratch.join("config").join("livetalk").join("config.toml");
    std::fs::create_dir_all(default.parent().unwrap()).unwrap();
    let without_named = |c: &mut std::process::Command| {
        c.arg("sessions").env_remove("LIVETALK_CONFIG");
    };
    let no_config = livetalk(scratch)
        .arg("sessions")
        .env_remove("LIVETALK_CONFIG")
        .output()
        .unwrap();
    assert_eq!(no_config.status.code(), Some(0), "{no_config:?}");
    std::fs::write(&default, b"model = \"caf\xe9\"\n").unwrap();
    let says = format!(
        "livetalk: config file {} is not UTF-8 text",
        default.display()
    );
    assert_refused(scratch, without_named, 2, &says);
    std::fs::remove_file(&default).unwrap();
    std::fs::create_dir(&default).unwrap();
    let says = format!(
        "livetalk: config file {} is a folder, not a file",
        default.display()
    );
    assert_refused(scratch, without_named, 2, &says);
    std::fs::remove_dir(&default).unwrap();
    mkfifo(&default);
    let says = format!(
        "livetalk: config file {} is a FIFO (named pipe), not a file",
        default.display()
    );
    assert_refused(scratch, without_named, 2, &says);

    for (path, is) in hostile_paths(&hostile, "credentials.json") {
        let says = format!(
            "The credentials file {} (GOOGLE_APPLICATION_CREDENTIALS) {is}",
            path.display()
        );
        assert_refused(
            scratch,
            |c| {
                c.args([
                    "--headless",
                    "--vertex",
                    "--project",
                    "p",
                    "--location",
                    "us-central1",
                ])
                .env("GOOGLE_APPLICATION_CREDENTIALS", &path);
            },
            1,
            &says,
        );
    }

    for (index, (path, is)) in hostile_paths(&hostile, "session.jsonl")
        .into_iter()
        .enumerate()
    {
        let recording = scratch.join(format!("recording-{index}"));
        std::fs::create_dir(&recording).unwrap();
        let log = recording.join("session.jsonl");
        std::fs::rename(&path, &log).unwrap();
        let says = format!("recording {} {is}", log.display());
        for command in [&["replay", "--headless"][..], &["inspect"]] {
            assert_refused(
                scratch,
                |c| {
                    c.args(command).arg(&recording);
                },
                1,
                &says,
            );
        }
    }

    for (path, is) in hostile_paths(&hostile, "input.wav") {
        let says = format!("WAV file {} {is}", path.display());
        assert_refused(
            scratch,
            |c| {
                c.args(["--headless", "--offline", "--input-wav"])
                    .arg(&path);
            },
            1,
            &says,
        );
    }

    for (path, is) in hostile_paths(&hostile, "cert.pem") {
        let says = format!(
            "cannot read certificate {}: I/O error: {is}",
            path.display()
        );
        assert_refused(
            scratch,
            |c| {
                c.args(["mock", "--listen", "127.0.0.1:0", "--tls-cert"])
                    .arg(&path)
                    .arg("--tls-key")
                    .arg(&path);
            },
            1,
            &says,
        );
    }

    for (path, is) in hostile_paths(&hostile, "faults.toml") {
        let says = format!("scenario file {} {is}", path.display());
        assert_refused(
            scratch,
            |c| {
                c.args(["mock", "--listen", "127.0.0.1:0", "--scenario"])
                    .arg(&path);
            },
            1,
            &says,
        );
    }
}

/// `--bridge-transport` is refused with exit 2 without `--bridge` (it would do nothing), and
/// a value that is not a transport is refused naming the flag and the values.
#[test]
fn the_bridge_transport_flag_needs_a_bridge_and_a_known_value() {
    let scratch = tempfile::tempdir().unwrap();
    let run = run_livetalk(
        scratch.path(),
        &["--headless", "--bridge-transport", "webrtc"],
        &[],
        &["Hello"],
    );
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("--bridge <URL>"), "{}", run.stderr);
    let run = run_livetalk(
        scratch.path(),
        &[
            "--headless",
            "--bridge",
            "ws://127.0.0.1:9",
            "--bridge-transport",
            "carrier-pigeon",
        ],
        &[],
        &["Hello"],
    );
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(
        run.stderr.contains("--bridge-transport") && run.stderr.contains("websocket, webrtc"),
        "{}",
        run.stderr
    );
}

/// Numbers on the command line that cannot be meant are refused, naming the flag and the
/// value, with exit 2: never taken silently as another number, never a panic.
#[test]
fn bad_numbers_on_the_command_line_are_refused_by_name() {
    let scratch = tempfile::tempdir().unwrap();
    let speed = "must be a positive finite number from 0.01 to 1000";
    for value in ["0", "nan", "inf", "-1", "1e-300", "1e300", "fast"] {
        for command in [
            vec!["replay", "somewhere", "--speed", value],
            vec!["mock", "--speed", value],
            vec!["serve", "--speed", value],
        ] {
            let run = run_livetalk(scratch.path(), &command, &[], &[]);
            assert_eq!(run.code, Some(2), "{command:?}: {}", run.stderr);
            assert_eq!(
                run.stderr.trim(),
                format!("livetalk: --speed {speed} (got {value})"),
                "{command:?}"
            );
        }
    }
    for value in ["0", "1023", "-5", "1073741825", "lots"] {
        let run = run_livetalk(
            scratch.path(),
            &["serve", "--max-message-bytes", value],
            &[],
            &[],
        );
        assert_eq!(run.code, Some(2), "{value}: {}", run.stderr);
        assert_eq!(
            run.stderr.trim(),
            format!(
                "livetalk: --max-message-bytes must be a number of bytes from 1024 to 1073741824 (got {value})"
            )
        );
    }
    // A proxy port past 65535 is refused, not taken as curl's default 1080.
    let run = run_livetalk(
        scratch.path(),
        &["--headless", "--endpoint", "wss://live.example.invalid"],
        &[("HTTPS_PROXY", "http://proxy.example.invalid:99999")],
        &["Hello"],
    );
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "HTTPS_PROXY is not a usable proxy URL: its port 99999 is not a port (1 to 65535)"
        ),
        "{}",
        run.stderr
    );
}

/// Ctrl-C while an MCP server is still starting (before anything can catch it) ends the run as
/// the user asked: one line, exit 0, the server stopped.
#[test]
fn ctrl_c_while_mcp_servers_start_is_one_line_and_exit_0() {
    let scratch = tempfile::tempdir().unwrap();
    let started = scratch.path().join("started");
    let slow = scratch.path().join("slow-server.sh");
    std::fs::write(
        &slow,
        format!(
            "#!/bin/sh\necho $$ > '{}'\nexec sleep 60\n",
            started.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&slow, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mcp = format!("slow={}", slow.display());
    let mut child = livetalk(scratch.path())
        .args(["--headless", "--offline", "--mcp", &mcp])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let seen = poll(Duration::from_secs(20), Duration::from_millis(20), || {
        let pid = std::fs::read_to_string(&started).unwrap_or_default();
        pid.ends_with('\n').then_some(())
    });
    assert!(seen.is_some(), "the MCP server never started");
    send_signal(child.id(), "INT");
    let stderr = read_all(child.stderr.take().unwrap());
    let status = wait_exit(child, Duration::from_secs(10));
    let stderr = stderr.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(status.code(), Some(0), "{stderr}");
    let said: Vec<&str> = stderr.lines().filter(|l| l.contains("Ctrl-C")).collect();
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(
        said[0].starts_with("livetalk: stopped (Ctrl-C)"),
        "{stderr}"
    );
    // The server it was starting is not left behind.
    let pid = std::fs::read_to_string(&started).unwrap();
    let proc = std::path::PathBuf::from(format!("/proc/{}", pid.trim()));
    let gone = poll(Duration::from_secs(5), Duration::from_millis(20), || {
        (!proc.exists()).then_some(())
    });
    assert!(gone.is_some(), "the MCP server {} still runs", pid.trim());
}

// ---- The first hour: the README's first steps, help texts, completions, man, doctor ----

/// The repository's root (the README and the guide live there).
fn repository() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The lines of the README section headed `heading`, up to the next `## ` heading.
fn readme_section(heading: &str) -> Vec<String> {
    let readme = std::fs::read_to_string(repository().join("README.md")).unwrap();
    readme
        .lines()
        .skip_while(|line| *line != heading)
        .skip(1)
        .take_while(|line| !line.starts_with("## "))
        .map(str::to_owned)
        .collect()
}

/// A PATH with the built livetalk first, as `cargo install` would leave it.
fn path_with_livetalk() -> String {
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_livetalk"))
        .parent()
        .unwrap()
        .to_owned();
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// `sh -c LINE` with livetalk on the PATH, isolated like [`livetalk`], stdin closed.
fn shell_line(scratch: &std::path::Path, line: &str) -> Run {
    let mut command = std::process::Command::new("sh");
    command.arg("-c").arg(line);
    isolate(&mut command, scratch);
    command.env("PATH", path_with_livetalk());
    run_command(command, &[], Duration::from_secs(60))
}

#[test]
fn every_command_of_the_readme_first_steps_runs_as_written() {
    let section = readme_section("## First steps");
    let commands: Vec<String> = section
        .iter()
        .skip_while(|line| !line.starts_with("```sh"))
        .skip(1)
        .take_while(|line| !line.starts_with("```"))
        .filter(|line| !line.trim().is_empty())
        .cloned()
        .collect();
    assert!(commands.len() >= 5, "the first steps: {commands:?}");
    let scratch = tempfile::tempdir().unwrap();
    let mut ran = 0;
    for line in &commands {
        assert!(
            line.starts_with("livetalk ") || line.contains("| livetalk "),
            "{line}"
        );
        // The full-screen app needs a terminal; the line after it is its line-console twin.
        if line.contains("# interactive") {
            continue;
        }
        let run = shell_line(scratch.path(), line);
        assert_eq!(
            run.code,
            Some(0),
            "`{line}` failed:\nstdout:\n{}\nstderr:\n{}",
            run.stdout,
            run.stderr
        );
        assert!(!run.stdout.trim().is_empty(), "`{line}` printed nothing");
        if line.starts_with("livetalk doctor") {
            assert!(
                run.stdout.contains("✔ connection: setup answered"),
                "{}",
                run.stdout
            );
        }
        if line.contains("lamp") && !line.contains("--json") {
            assert!(run.stdout.contains("Gemini: "), "`{line}`:\n{}", run.stdout);
        }
        if line.starts_with("livetalk sessions") {
            assert!(run.stdout.contains("first-steps"), "{}", run.stdout);
        }
        ran += 1;
    }
    assert!(ran >= 5, "{ran} commands ran");
}

/// The user guide: the README and every page of docs/ but the contributors' three.
fn user_guide() -> String {
    let mut text = std::fs::read_to_string(repository().join("README.md")).unwrap();
    for entry in std::fs::read_dir(repository().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if ["architecture.md", "testing.md", "performance.md"].contains(&name.as_str()) {
            continue;
        }
        text.push_str(&std::fs::read_to_string(&path).unwrap());
    }
    text
}

/// The `--long-flags` a help text names.
fn long_flags(help: &str) -> Vec<String> {
    let mut flags = Vec::new();
    let bytes = help.as_bytes();
    for (at, _) in help.match_indices("--") {
        if at > 0 && !(bytes[at - 1] == b' ' || bytes[at - 1] == b'(' || bytes[at - 1] == b'[') {
            continue;
        }
        let flag: String = help[at + 2..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')
            .collect();
        if !flag.is_empty() && !flags.contains(&format!("--{flag}")) {
            flags.push(format!("--{flag}"));
        }
    }
    flags
}

/// Whether `text` names `flag` as a whole flag (`--record` is not found in `--recording`).
fn names_flag(text: &str, flag: &str) -> bool {
    text.match_indices(flag).any(|(at, _)| {
        !text[at + flag.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
    })
}

#[test]
fn every_help_speaks_the_users_words_and_every_flag_is_in_the_guide() {
    use clap::CommandFactory as _;
    let scratch = tempfile::tempdir().unwrap();
    let guide = user_guide();
    let mut commands = vec![Vec::new()];
    for sub in livetalk::cli::Cli::command().get_subcommands() {
        commands.push(vec![sub.get_name().to_owned()]);
    }
    let mut missing = Vec::new();
    for words in commands {
        let run = run_livetalk(
            scratch.path(),
            &[
                words.iter().map(String::as_str).collect::<Vec<_>>(),
                vec!["--help"],
            ]
            .concat(),
            &[],
            &[],
        );
        assert_eq!(run.code, Some(0), "{words:?} --help: {}", run.stderr);
        assert!(
            !run.stdout.contains("::"),
            "livetalk {words:?} --help names a code path:\n{}",
            run.stdout
        );
        for flag in long_flags(&run.stdout) {
            if !names_flag(&guide, &flag) {
                missing.push(format!("livetalk {} {flag}", words.join(" ")));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "flags the user guide never names: {missing:#?}"
    );
}

#[test]
fn the_readme_command_table_is_the_apps_table_of_commands() {
    let rows: Vec<(String, String)> = readme_section("## Slash commands")
        .iter()
        .filter(|line| line.starts_with("| `"))
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split(" | ").collect();
            (
                cells[0].trim().trim_matches('`').to_owned(),
                cells[1].trim().to_owned(),
            )
        })
        .collect();
    let table: Vec<(String, String)> = livetalk::app::slash_help()
        .map(|(usage, help)| (usage, help.to_owned()))
        .collect();
    assert_eq!(rows, table, "the README's commands, row for row");
}

#[test]
fn the_readme_key_table_is_the_key_map() {
    let rows: Vec<(String, String)> = readme_section("## Keys")
        .iter()
        .filter(|line| line.starts_with("| `"))
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split(" | ").collect();
            assert_eq!(cells.len(), 2, "a key row: {line}");
            (
                cells[0].trim().trim_matches('`').to_owned(),
                cells[1].trim().to_owned(),
            )
        })
        .collect();
    let map: Vec<(String, String)> = livetalk::app::KEY_MAP
        .iter()
        .map(|row| (row.keys.to_owned(), row.help.to_owned()))
        .collect();
    assert_eq!(
        rows, map,
        "the README's key table must be the key map, row for row"
    );
}

/// What bash offers for `line` (the cursor at its end) with the script `livetalk completions
/// bash` printed, loaded as bash-completion loads it, in `scratch`'s environment.
fn bash_offers(scratch: &std::path::Path, line: &str) -> Vec<String> {
    let run = run_livetalk(scratch, &["completions", "bash"], &[], &[]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let script = scratch.join("livetalk.bash");
    std::fs::write(&script, &run.stdout).unwrap();
    // As bash calls a completion function: the words so far, the one being completed.
    let program = format!(
        "source {}\nCOMP_LINE='{line}'\nCOMP_POINT=${{#COMP_LINE}}\nCOMP_TYPE=9\nread -ra COMP_WORDS <<< \"$COMP_LINE\"\n[[ $COMP_LINE == *' ' ]] && COMP_WORDS+=('')\nCOMP_CWORD=$((${{#COMP_WORDS[@]}} - 1))\nfunction=$(complete -p livetalk | sed -n 's/.*-F \\([^ ]*\\) livetalk$/\\1/p')\n\"$function\" livetalk \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        script.display()
    );
    let mut bash = std::process::Command::new("bash");
    bash.arg("--norc")
        .arg("-c")
        .arg(program)
        .current_dir(scratch);
    common::isolate(&mut bash, scratch);
    let run = run_command(bash, &[], Duration::from_secs(20));
    assert_eq!(run.code, Some(0), "{line}: {}\n{}", run.stdout, run.stderr);
    run.stdout
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn bash_completion_offers_what_each_word_takes() {
    let scratch = tempfile::tempdir().unwrap();
    assert_eq!(bash_offers(scratch.path(), "livetalk doc"), ["doctor"]);
    assert!(
        bash_offers(scratch.path(), "livetalk doctor --j").contains(&"--json".to_owned()),
        "--json"
    );
    // Each shell the guide installs, and no other.
    let mut shells = bash_offers(scratch.path(), "livetalk completions ");
    shells.retain(|word| !word.starts_with('-'));
    shells.sort();
    assert_eq!(shells, ["bash", "fish", "powershell", "zsh"]);
    // A voice is one of the prebuilt voices, never a file of the folder.
    std::fs::write(scratch.path().join("Pancakes.txt"), "").unwrap();
    let voices = bash_offers(scratch.path(), "livetalk --voice P");
    let expected: Vec<&str> = livetalk_live::models::VOICES
        .iter()
        .copied()
        .filter(|v| v.starts_with('P'))
        .collect();
    assert_eq!(voices, expected, "{voices:?}");
    assert!(
        bash_offers(scratch.path(), "livetalk --model gemini-3.8")
            .contains(&"gemini-3.8-live".to_owned())
    );
    // A recording is offered by the name `livetalk sessions` lists.
    let recorded = run_livetalk(
        scratch.path(),
        &["--headless", "--offline", "--record", "lamp-check"],
        &[],
        &["goodbye"],
    );
    assert_eq!(recorded.code, Some(0), "{}", recorded.stderr);
    for command in ["replay", "inspect"] {
        let offered = bash_offers(scratch.path(), &format!("livetalk {command} lamp"));
        assert_eq!(offered, ["lamp-check"], "{command}");
    }
}

#[test]
fn every_shell_gets_a_script_that_asks_livetalk() {
    let scratch = tempfile::tempdir().unwrap();
    for (shell, mark) in [
        ("bash", "complete -o nospace -o bashdefault"),
        ("zsh", "#compdef livetalk"),
        (
            "fish",
            "complete --keep-order --exclusive --command livetalk",
        ),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let run = run_livetalk(scratch.path(), &["completions", shell], &[], &[]);
        assert_eq!(run.code, Some(0), "{shell}: {}", run.stderr);
        assert!(run.stdout.contains(mark), "{shell}:\n{}", run.stdout);
        assert!(
            run.stdout.contains("LIVETALK_COMPLETE"),
            "{shell}:\n{}",
            run.stdout
        );
    }
    let run = run_livetalk(scratch.path(), &["completions", "elvish"], &[], &[]);
    assert_eq!(run.code, Some(2), "{}", run.stdout);
}

#[test]
fn the_man_page_renders_with_every_command() {
    let scratch = tempfile::tempdir().unwrap();
    let run = run_livetalk(scratch.path(), &["man"], &[], &[]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let page = scratch.path().join("livetalk.1");
    std::fs::write(&page, &run.stdout).unwrap();
    let mut man = std::process::Command::new("man");
    man.arg("-l")
        .arg("-")
        .stdin(std::fs::File::open(&page).unwrap())
        .env("MANPAGER", "cat")
        .env("PAGER", "cat")
        .env("MANWIDTH", "100")
        .env("LANG", "C.UTF-8");
    let output = man
        .output()
        .expect("man-db's man (scripts/test.sh installs it)");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for expected in [
        "livetalk",
        "--input-wav",
        "LIVETALK DOCTOR",
        "LIVETALK MOCK",
        "--scenario",
        "LIVETALK COMPLETIONS",
        "--json",
        "livetalk mock (see LIVETALK MOCK below)",
    ] {
        assert!(text.contains(expected), "`{expected}` in:\n{text}");
    }
    assert!(!text.contains("::"), "{text}");
    // It names no page but its own: each command is a section of it, not a page of its own
    // that was never installed (`livetalk-mock(1)`).
    for (at, _) in text.match_indices("(1)") {
        let name: String = text[..at]
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        assert!(
            name.is_empty() || name.eq_ignore_ascii_case("livetalk"),
            "the manual page names {name}(1), a page that does not exist:\n{text}"
        );
    }
}

/// `livetalk doctor ARGS` in `scratch` (its config as the test wrote it), with `envs`.
fn doctor(scratch: &std::path::Path, args: &[&str], envs: &[(&str, &str)]) -> Run {
    run_livetalk(scratch, &[&["doctor"], args].concat(), envs, &[])
}

/// What a check's line says it found (the part before what to do).
fn found(line: &str) -> &str {
    line.split(" → ").next().unwrap_or(line)
}

/// The line of a check, e.g. `connection`.
fn check_line<'a>(run: &'a Run, check: &str) -> &'a str {
    run.stdout
        .lines()
        .find(|line| {
            line.get(4..)
                .is_some_and(|rest| rest.starts_with(&format!("{check}:")))
        })
        .unwrap_or_else(|| panic!("no `{check}` line:\n{}\n{}", run.stdout, run.stderr))
}

#[test]
fn doctor_with_no_config_and_no_audio_devices_says_what_to_do_and_exits_0() {
    let scratch = tempfile::tempdir().unwrap();
    let empty_alsa = scratch.path().join("empty-alsa.conf");
    std::fs::write(&empty_alsa, "").unwrap();
    // No config file at all: not the test one, not the default one.
    let mut command = livetalk(scratch.path());
    std::fs::remove_file(scratch.path().join("config.toml")).unwrap();
    command
        .env_remove("LIVETALK_CONFIG")
        .env("ALSA_CONFIG_PATH", &empty_alsa)
        .env("PULSE_SERVER", "unix:/nonexistent/pulse")
        .args(["doctor", "--offline"]);
    let run = run_command(command, &[], Duration::from_secs(60));
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    let config = check_line(&run, "config");
    assert!(
        config.starts_with("✔") && config.contains("no config file"),
        "{config}"
    );
    assert!(check_line(&run, "API key").starts_with("✔"));
    assert!(check_line(&run, "route").contains("offline demo model"));
    let connection = check_line(&run, "connection");
    assert!(
        connection
            .starts_with("✔ connection: setup answered by the embedded offline demo model in"),
        "{connection}"
    );
    let audio: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.contains(" audio"))
        .collect();
    assert!(!audio.is_empty(), "{}", run.stdout);
    for line in &audio {
        assert!(line.starts_with("⚠"), "no device is a warning: {line}");
        for hint in ["--no-audio", "livetalk devices", "F6", "docs/audio.md"] {
            assert!(line.contains(hint), "`{hint}` in {line}");
        }
    }
    assert!(check_line(&run, "data folder").starts_with("✔"));
    assert!(check_line(&run, "MCP servers").contains("none configured"));

    // The other audio system, with no server to reach (audio on: an empty config).
    std::fs::write(scratch.path().join("config.toml"), "").unwrap();
    let run = doctor(
        scratch.path(),
        &["--offline"],
        &[
            ("LIVETALK_AUDIO_HOST", "pulseaudio"),
            ("PULSE_SERVER", "unix:/nonexistent/pulse"),
        ],
    );
    let audio = check_line(&run, "audio");
    assert!(audio.starts_with("⚠ audio: pulseaudio"), "{audio}");
    assert!(audio.contains("--no-audio"), "{audio}");
}

/// With no audio device, a headless run says what to do in words a line console can use: no
/// F6, which only the full-screen app has; its replay says the same.
#[test]
fn without_audio_devices_a_headless_run_and_its_replay_name_no_key() {
    let scratch = tempfile::tempdir().unwrap();
    let empty_alsa = scratch.path().join("empty-alsa.conf");
    std::fs::write(&empty_alsa, "").unwrap();
    // Audio on (the test default is off), and nothing to open.
    std::fs::write(scratch.path().join("config.toml"), "").unwrap();
    let alsa = empty_alsa.to_str().unwrap();
    let envs = [
        ("ALSA_CONFIG_PATH", alsa),
        ("PULSE_SERVER", "unix:/nonexistent/pulse"),
    ];
    let run = run_livetalk(
        scratch.path(),
        &["--headless", "--offline", "--record", "no-devices"],
        &envs,
        &["goodbye"],
    );
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    let warned = |stderr: &str| {
        stderr
            .lines()
            .find(|l| l.contains("No audio device"))
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("no warning about the devices:\n{stderr}"))
    };
    let live = warned(&run.stderr);
    assert!(!live.contains("F6"), "{live}");
    assert!(
        live.contains("--no-audio") && live.contains("livetalk devices"),
        "{live}"
    );
    let replayed = run_livetalk(
        scratch.path(),
        &["replay", "no-devices", "--headless", "--instant"],
        &envs,
        &[],
    );
    assert_eq!(replayed.code, Some(0), "{}", replayed.stderr);
    assert!(
        !warned(&replayed.stderr).contains("F6"),
        "{}",
        replayed.stderr
    );
}

#[test]
fn doctor_names_a_broken_config_and_exits_1() {
    let scratch = tempfile::tempdir().unwrap();
    std::fs::write(
        scratch.path().join("config.toml"),
        "[session]\nconnect_timeout_secs = \"soon\"\n",
    )
    .unwrap();
    let run = doctor(scratch.path(), &[], &[]);
    assert_eq!(run.code, Some(1), "{}\n{}", run.stdout, run.stderr);
    let config = check_line(&run, "config");
    assert!(config.starts_with("✖ config: bad config in"), "{config}");
    assert!(config.contains("session.connect_timeout_secs"), "{config}");
    assert!(config.contains("→"), "says what to do: {config}");
    assert!(
        run.stdout.contains("would stop a session"),
        "{}",
        run.stdout
    );
}

/// A key variable set but empty is a failed check naming it, exit 1; with `--offline`,
/// which uses no key, it is not.
#[test]
fn doctor_names_a_key_variable_set_but_empty() {
    let scratch = tempfile::tempdir().unwrap();
    let run = doctor(scratch.path(), &[], &[("GEMINI_API_KEY", "")]);
    assert_eq!(run.code, Some(1), "{}\n{}", run.stdout, run.stderr);
    let line = check_line(&run, "API key");
    assert!(
        line.starts_with("✖ API key: GEMINI_API_KEY is set but empty"),
        "{line}"
    );
    let run = doctor(scratch.path(), &["--offline"], &[("GEMINI_API_KEY", "")]);
    assert!(
        check_line(&run, "API key").starts_with("✔"),
        "{}",
        run.stdout
    );
}

#[test]
fn doctor_connects_to_a_live_server_and_reports_json_without_the_key() {
    let scratch = tempfile::tempdir().unwrap();
    let mock = MockProcess::start(scratch.path(), &[]);
    std::fs::write(
        scratch.path().join("config.toml"),
        format!("endpoint = \"{}\"\n[audio]\nenabled = false\n", mock.url),
    )
    .unwrap();
    let key = "AIzaDoctorSecretKey0123456789";
    let run = doctor(scratch.path(), &[], &[("GEMINI_API_KEY", key)]);
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    assert!(check_line(&run, "API key").contains("from GEMINI_API_KEY"));
    assert!(check_line(&run, "route").contains("the endpoint 127.0.0.1"));
    let connection = check_line(&run, "connection");
    assert!(
        connection.starts_with("✔ connection: setup answered by 127.0.0.1 in"),
        "{connection}"
    );
    assert!(check_line(&run, "audio").starts_with("✔ audio: off"));
    let run = doctor(scratch.path(), &["--json"], &[("GEMINI_API_KEY", key)]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let report: serde_json::Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(report["ok"], true);
    let checks = report["checks"].as_array().unwrap();
    assert!(
        checks
            .iter()
            .any(|c| c["check"] == "connection" && c["status"] == "ok")
    );
    for text in [&run.stdout, &run.stderr] {
        assert!(!text.contains(key), "the key leaked: {text}");
    }
}

#[test]
fn doctor_gives_up_on_a_silent_server_at_the_connect_deadline() {
    let scratch = tempfile::tempdir().unwrap();
    // Accepts and never says a word: not even the WebSocket upgrade's answer.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            held.push(stream);
        }
    });
    std::fs::write(
        scratch.path().join("config.toml"),
        format!(
            "endpoint = \"ws://127.0.0.1:{port}\"\n[session]\nconnect_timeout_secs = 2\n[audio]\nenabled = false\n"
        ),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let run = doctor(scratch.path(), &[], &[]);
    let took = started.elapsed();
    assert_eq!(run.code, Some(1), "{}\n{}", run.stdout, run.stderr);
    let connection = check_line(&run, "connection");
    assert!(connection.starts_with("✖ connection:"), "{connection}");
    assert!(
        connection.contains(&format!("127.0.0.1:{port}")),
        "{connection}"
    );
    assert!(connection.contains("connect_timeout_secs"), "{connection}");
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(15),
        "the deadline, not a hang: {took:?}"
    );
}

#[test]
fn doctor_names_an_unreachable_proxy_without_its_password() {
    let scratch = tempfile::tempdir().unwrap();
    let port = common::free_port();
    std::fs::write(
        scratch.path().join("config.toml"),
        "endpoint = \"wss://live.example.com\"\n[audio]\nenabled = false\n",
    )
    .unwrap();
    let password = "doctorProxyPassword42";
    let proxy = format!("http://me:{password}@127.0.0.1:{port}");
    let run = doctor(scratch.path(), &[], &[("HTTPS_PROXY", proxy.as_str())]);
    assert_eq!(run.code, Some(1), "{}\n{}", run.stdout, run.stderr);
    let line = check_line(&run, "proxy");
    assert!(
        line.starts_with(&format!("✔ proxy: 127.0.0.1:{port} (HTTPS_PROXY)")),
        "{line}"
    );
    let connection = check_line(&run, "connection");
    assert!(connection.starts_with("✖ connection:"), "{connection}");
    assert!(found(connection).contains("proxy"), "{connection}");
    for text in [&run.stdout, &run.stderr] {
        assert!(!text.contains(password), "the password leaked: {text}");
    }
}

#[test]
fn doctor_says_which_mcp_server_failed_to_start() {
    let scratch = tempfile::tempdir().unwrap();
    std::fs::write(
        scratch.path().join("config.toml"),
        "[audio]\nenabled = false\n[mcp_servers.broken]\ncommand = \"/nonexistent/livetalk-test-mcp-server\"\n",
    )
    .unwrap();
    let run = doctor(scratch.path(), &["--offline"], &[]);
    assert_eq!(run.code, Some(1), "{}\n{}", run.stdout, run.stderr);
    let line = check_line(&run, "MCP server broken");
    assert!(line.starts_with("✖ MCP server broken:"), "{line}");
    assert!(line.contains("[mcp_servers.broken]"), "{line}");
    assert!(check_line(&run, "connection").starts_with("✔"));
}

/// A price that is not one stops livetalk before anything starts, naming the key.
#[test]
fn a_bad_price_in_the_config_exits_2_naming_its_key() {
    let scratch = tempfile::tempdir().unwrap();
    std::fs::write(
        scratch.path().join("config.toml"),
        "[audio]\nenabled = false\n[pricing.\"gemini-3.8-live\"]\naudio_out = -12\n",
    )
    .unwrap();
    let run = run_livetalk(scratch.path(), &["--headless"], &[], &[]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("key `pricing.\"gemini-3.8-live\".audio_out`: -12 is not a price"),
        "{}",
        run.stderr
    );
}

/// Slash commands in headless lines: `/image` with a PNG the test made reaches the demo model,
/// which names its colour; `/voice` is said and handed over with the conversation kept ("turn
/// it on" after it acts on the lamp asked about before). Files that cannot be pictures — a
/// missing one, `/dev/zero`, a FIFO nobody writes to, a folder, one over the size cap, text
/// named `.png`, a PNG header claiming 100,000 × 100,000 pixels — are one warning each with
/// nothing sent, without blocking, in little memory.
#[test]
fn image_and_voice_lines_work_headless_and_bad_pictures_are_refused() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("pictures");
    let mut bad = hostile_paths(&dir, "pic.png");
    let notes = dir.join("notes.png");
    std::fs::write(&notes, "these are notes, not a picture\n").unwrap();
    let bomb = dir.join("bomb.png");
    png_claiming(&bomb, 100_000, 100_000);
    bad.extend([
        (dir.join("missing.png"), "does not exist"),
        (notes, "is not a PNG, JPEG or WebP file"),
        (bomb, "is larger than livetalk decodes"),
    ]);
    let green = dir.join("green.png");
    png_file(&green, 640, 480, [40, 190, 60]);
    let rec = scratch.path().join("rec");

    let mut lines = vec![
        format!("/image {}", green.display()),
        SMART_HOME_LINES[0].to_owned(),
        "/voice Kore".to_owned(),
        "turn it on".to_owned(),
    ];
    lines.extend(
        bad.iter()
            .map(|(path, _)| format!("/image {}", path.display())),
    );
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let peak = scratch.path().join("peak");
    let mut command = livetalk_measured(scratch.path(), &peak);
    command.args(["--headless", "--offline", "--record", rec.to_str().unwrap()]);
    let started = std::time::Instant::now();
    let run = run_command(command, &lines, Duration::from_secs(60));
    let took = started.elapsed();
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);

    assert!(
        run.stdout.contains("You (image): green.png (")
            && run.stdout.contains("), sent as a 640×480 JPEG"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("Gemini: I see a 640 by 480 picture, mostly green."),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("Changed: Voice is now Kore"),
        "{}",
        run.stdout
    );
    let after_voice = &run.stdout[run.stdout.find("Voice is now Kore").unwrap()..];
    assert!(
        after_voice.contains("set_device_status") && after_voice.contains("living room lamp"),
        "\"it\" is still the lamp after the hand-over:\n{}",
        run.stdout
    );
    for (path, is) in &bad {
        let says = format!("livetalk: warning: picture {} {is}", path.display());
        assert!(run.stderr.contains(&says), "{says} in:\n{}", run.stderr);
        assert!(
            run.stderr.lines().any(
                |l| l.contains(&path.display().to_string()) && l.ends_with("nothing was sent.")
            ),
            "{}",
            run.stderr
        );
    }
    let peak = peak_mib(&peak);
    eprintln!("seven refused pictures and one sent: {took:.1?}, peak {peak:.0} MiB");
    assert!(peak < 150.0, "peak memory {peak:.0} MiB");

    let sent = sent_messages(&rec);
    let frames: Vec<&serde_json::Value> = sent
        .iter()
        .filter_map(|m| m["realtimeInput"].get("video"))
        .collect();
    assert_eq!(frames.len(), 1, "only the good picture was sent");
    assert_eq!(frames[0]["mimeType"], "image/jpeg");
    let setups: Vec<&serde_json::Value> = sent.iter().filter_map(|m| m.get("setup")).collect();
    assert_eq!(setups.len(), 2, "one hand-over");
    assert_eq!(
        setups[1]["generationConfig"]["speechConfig"]["voiceConfig"]["prebuiltVoiceConfig"]["voiceName"],
        "Kore"
    );
    assert!(setups[1]["sessionResumption"]["handle"].is_string());
}

/// `/model ID` in a headless line is taken as confirmed: the session moves at once to a fresh
/// connection whose `setup` names the new model and carries no resumption handle, and the
/// transcript says so; the demo model no longer knows the lamp asked about before.
#[test]
fn a_model_line_headless_starts_a_fresh_session_with_the_new_model() {
    let scratch = tempfile::tempdir().unwrap();
    let rec = scratch.path().join("rec");
    let run = run_livetalk(
        scratch.path(),
        &["--headless", "--offline", "--record", rec.to_str().unwrap()],
        &[],
        &[
            SMART_HOME_LINES[0],
            "/model gemini-3.1-flash-live-preview",
            "turn it on",
        ],
    );
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains(
            "Changed: Model is now gemini-3.1-flash-live-preview: a fresh session (the model does not know the conversation so far)"
        ),
        "{}",
        run.stdout
    );
    let after = &run.stdout[run.stdout.find("Model is now").unwrap()..];
    assert!(
        !after.contains("set_device_status"),
        "a fresh session has no \"it\" to turn on:\n{}",
        run.stdout
    );
    let setups: Vec<serde_json::Value> = sent_messages(&rec)
        .into_iter()
        .filter_map(|m| m.get("setup").cloned())
        .collect();
    assert_eq!(setups.len(), 2, "{setups:#?}");
    assert_eq!(setups[1]["model"], "models/gemini-3.1-flash-live-preview");
    assert!(
        setups[1]["sessionResumption"].get("handle").is_none(),
        "no handle: {:#?}",
        setups[1]
    );
}

/// How long a turn of the screen-sharing tests may take.
const TURN: Duration = Duration::from_secs(20);

/// The least time between two frames the server receives: the sender hands them on a whole
/// second apart; what the loopback socket and the server's scheduling add or take is far less
/// than this margin.
const FRAME_GAP_MIN: Duration = Duration::from_millis(950);

/// `livetalk --headless --endpoint URL --record REC` with its stdin open, its lines watched as
/// they come.
struct Headless {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: LineWatcher,
    stderr: std::sync::mpsc::Receiver<String>,
}

impl Headless {
    fn start(mut command: std::process::Command, url: &str, rec: &std::path::Path) -> Headless {
        let mut child = command
            .args(["--headless", "--endpoint", url])
            .args(["--record", rec.to_str().unwrap()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Headless {
            stdin: child.stdin.take().unwrap(),
            stdout: LineWatcher::new(child.stdout.take().unwrap()),
            stderr: read_all(child.stderr.take().unwrap()),
            child,
        }
    }

    /// Ends the input and waits for a clean exit; every line it printed.
    fn finish(self) -> Vec<String> {
        drop(self.stdin);
        let status = wait_exit(self.child, TURN);
        let stderr = self.stderr.recv_timeout(TURN).unwrap();
        assert!(status.success(), "{stderr}");
        self.stdout.rest()
    }
}

/// Waits until the server has received `count` pictures; they all.
fn received(mock: &InProcessMock, count: usize) -> Vec<livetalk_mock::PictureReceived> {
    poll(TURN, Duration::from_millis(20), || {
        let pictures = mock.pictures();
        (pictures.len() >= count).then_some(pictures)
    })
    .unwrap_or_else(|| panic!("the server never received {count} pictures"))
}

/// Asserts the server receives no more than `count` pictures from now until `until`: what a
/// share still running would send (a frame within a second of a change) does not come.
fn none_received_until(mock: &InProcessMock, count: usize, until: std::time::Instant) {
    while let Some(left) = until.checked_duration_since(std::time::Instant::now()) {
        let pictures = mock.pictures();
        assert_eq!(pictures.len(), count, "received: {pictures:#?}");
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
    assert_eq!(mock.pictures().len(), count);
}

/// What the server received, checked whole: each frame a JPEG of at most 1,024 pixels a side,
/// at most one a second.
fn assert_frames_well_formed(pictures: &[livetalk_mock::PictureReceived]) {
    for picture in pictures {
        let (width, height) = picture.size.expect("a JPEG the server could read");
        assert!(width.max(height) <= 1024, "{picture:?}");
    }
    for pair in pictures.windows(2) {
        let apart = pair[1].at.duration_since(pair[0].at);
        assert!(apart >= FRAME_GAP_MIN, "two frames {apart:?} apart");
    }
}

/// `/screen` headless under Xvfb, checked at a Live server in the test: a 2048×1152 display
/// covered by a red window arrives at once as a 1024×576 JPEG, and the demo model names it
/// red; nothing more arrives while nothing changes; painted blue, a new frame arrives within
/// two seconds and the model names blue; after `/stop`, painted green, nothing arrives.
#[test]
fn the_screen_is_shared_headless_a_frame_a_second_while_it_changes() {
    let scratch = tempfile::tempdir().unwrap();
    let mock = InProcessMock::start();
    let xvfb = display::Xvfb::start(2048, 1152);
    let window = display::SolidWindow::open(&xvfb.display, 2048, 1152, RED, "livetalk red");
    let rec = scratch.path().join("rec");
    let mut command = livetalk(scratch.path());
    command.env("DISPLAY", &xvfb.display);
    let mut run = Headless::start(command, &mock.url, &rec);
    let (stdin, stdout) = (&mut run.stdin, &mut run.stdout);

    write_lines(stdin, &["/screen"]);
    stdout.wait_for(TURN, |l| l.starts_with("Changed: Sharing the screen :"));
    stdout.wait_for(TURN, |l| {
        l.starts_with("Screen: frame 1 sent, 1024×576 JPEG (")
    });
    stdout.wait_for(TURN, |l| {
        l == "Gemini: I see a 1024 by 576 picture, mostly red."
    });
    write_lines(stdin, &["What do you see?"]);
    stdout.wait_for(TURN, |l| l.contains("mostly red"));
    let first = received(&mock, 1)[0].clone();
    assert_eq!(
        (first.size, first.colour.as_str()),
        (Some((1024, 576)), "red")
    );
    // Nothing changes: for two and a half seconds after the first frame (two more frames'
    // time), nothing more arrives.
    none_received_until(&mock, 1, first.at + Duration::from_millis(2500));

    window.paint(BLUE);
    let painted = std::time::Instant::now();
    let second = received(&mock, 2)[1].clone();
    let took = second.at.saturating_duration_since(painted);
    assert!(
        took <= Duration::from_secs(2),
        "a change arrived {took:?} after it"
    );
    assert_eq!(
        (second.size, second.colour.as_str()),
        (Some((1024, 576)), "blue")
    );
    write_lines(stdin, &["what's on my screen?"]);
    stdout.wait_for(TURN, |l| {
        l == "Gemini: I see a 1024 by 576 picture, mostly blue."
    });

    write_lines(stdin, &["/stop"]);
    stdout.wait_for(TURN, |l| {
        l.starts_with("Changed: Stopped sharing the screen: 2 frames sent in ")
    });
    window.paint([40, 190, 60]);
    // What must not come: a frame of the green window, which a share still running would
    // send within a second.
    none_received_until(
        &mock,
        2,
        std::time::Instant::now() + Duration::from_millis(2500),
    );
    write_lines(stdin, &["What do you see?"]);
    stdout.wait_for(TURN, |l| l.contains("mostly blue"));
    let lines = run.finish();
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("Screen:")).count(),
        2,
        "{lines:#?}"
    );
    let pictures = mock.pictures();
    assert_eq!(pictures.len(), 2, "one frame for each colour shown");
    assert_frames_well_formed(&pictures);
}

/// Without a display, `/screen` says so in one sentence on stderr and the session goes on:
/// the next turn is answered.
#[test]
fn without_a_display_screen_says_so_and_the_session_goes_on() {
    let scratch = tempfile::tempdir().unwrap();
    let mut command = livetalk(scratch.path());
    command
        .args(["--headless", "--offline"])
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY");
    let run = run_command(
        command,
        &["/screen", SMART_HOME_LINES[0]],
        Duration::from_secs(60),
    );
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    let said: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("no screen to share"))
        .collect();
    assert_eq!(
        said,
        [
            "livetalk: warning: There is no screen to share: DISPLAY is not set. /screen shares an X11 display (on Wayland, the X11 windows XWayland shows); the session goes on without it."
        ],
        "{}",
        run.stderr
    );
    assert!(run.stdout.contains("living room lamp"), "{}", run.stdout);
    assert!(!run.stdout.contains("Screen:"), "{}", run.stdout);
}

/// `--video PATH`, checked at a Live server in the test: a folder's pictures arrive in name
/// order from the session's start, a second apart, each scaled to at most 1,024 pixels and
/// only when it changed (a repeated picture is not sent), the last one held and not sent
/// again; nothing after `/stop`; the demo model names the last colour; `inspect` counts them.
#[test]
fn a_folder_of_frames_is_shared_with_video() {
    let scratch = tempfile::tempdir().unwrap();
    let mock = InProcessMock::start();
    let frames_dir = scratch.path().join("frames");
    std::fs::create_dir_all(&frames_dir).unwrap();
    png_file(&frames_dir.join("01.png"), 1600, 1200, RED);
    png_file(&frames_dir.join("02.png"), 1600, 1200, RED);
    png_file(&frames_dir.join("03.png"), 640, 480, BLUE);
    let rec = scratch.path().join("rec");
    let mut command = livetalk(scratch.path());
    command.arg("--video").arg(&frames_dir);
    let mut run = Headless::start(command, &mock.url, &rec);
    let (stdin, stdout) = (&mut run.stdin, &mut run.stdout);
    stdout.wait_for(TURN, |l| {
        l.starts_with("Changed: Sharing the 3 pictures in ")
    });
    let pictures = received(&mock, 2);
    assert_eq!(
        (pictures[0].size, pictures[0].colour.as_str()),
        (Some((1024, 768)), "red")
    );
    assert_eq!(
        (pictures[1].size, pictures[1].colour.as_str()),
        (Some((640, 480)), "blue")
    );
    let apart = pictures[1].at.duration_since(pictures[0].at);
    assert!(
        apart <= Duration::from_millis(3500),
        "the third picture came {apart:?} after the first"
    );
    // The last picture is held, not sent again.
    none_received_until(&mock, 2, pictures[1].at + Duration::from_millis(1500));
    write_lines(stdin, &["What do you see?", "/stop"]);
    stdout.wait_for(TURN, |l| {
        l == "Gemini: I see a 640 by 480 picture, mostly blue."
    });
    stdout.wait_for(TURN, |l| {
        l.starts_with("Changed: Stopped sharing the video: 2 frames")
    });
    run.finish();
    let pictures = mock.pictures();
    assert_eq!(pictures.len(), 2, "{pictures:#?}");
    assert_frames_well_formed(&pictures);
    // `inspect` counts them.
    let inspected = run_livetalk(
        scratch.path(),
        &["inspect", rec.to_str().unwrap()],
        &[],
        &[],
    );
    assert_eq!(inspected.code, Some(0), "{}", inspected.stderr);
    assert!(
        inspected
            .stdout
            .contains("Pictures shown: 2 (a shared screen's frames and /image)"),
        "{}",
        inspected.stdout
    );
    let json = run_livetalk(
        scratch.path(),
        &["inspect", "--json", rec.to_str().unwrap()],
        &[],
        &[],
    );
    let summary: serde_json::Value = serde_json::from_str(json.stdout.trim()).unwrap();
    assert_eq!(summary["pictures_sent"], 2);
}

const RED: [u8; 3] = [220, 30, 30];
const BLUE: [u8; 3] = [30, 60, 220];

/// A graphics setting livetalk cannot draw with is one sentence naming the values, exit 2, from
/// the flag before a session and from the config file before a replay (headless or not).
#[test]
fn a_bad_graphics_setting_is_refused_by_a_session_and_a_replay() {
    let scratch = tempfile::tempdir().unwrap();
    let values = "is not one of auto, kitty, sixel, iterm2, halfblocks, off";
    let run = run_livetalk(
        scratch.path(),
        &["--headless", "--graphics", "png"],
        &[],
        &["hello"],
    );
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!("\"png\" {values}")) && run.stderr.contains("--graphics"),
        "{}",
        run.stderr
    );
    assert!(run.stdout.is_empty(), "no session: {}", run.stdout);
    let config = scratch.path().join("config.toml");
    std::fs::write(
        &config,
        "[audio]\nenabled = false\n[terminal]\ngraphics = \"blocks\"\n",
    )
    .unwrap();
    let recording =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/recordings/format-4");
    let run = run_livetalk(
        scratch.path(),
        &[
            "replay",
            recording.to_str().unwrap(),
            "--headless",
            "--instant",
        ],
        &[],
        &[],
    );
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!("\"blocks\" {values}"))
            && run.stderr.contains("terminal.graphics"),
        "{}",
        run.stderr
    );
}
