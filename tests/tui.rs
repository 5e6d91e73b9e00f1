//! The full-screen UI end to end: `livetalk` in a real pseudo-terminal (tmux) against the
//! embedded offline model, driven by keystrokes and read back from the screen; and `livetalk
//! replay` of a recording made against the mock, paused, stepped and played to its end.

// Test output is the test runner's, not livetalk's: it may print directly.
#![allow(clippy::disallowed_macros)]
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::pane::Pane;
use common::{SMART_HOME_LINES, graphics, send_signal};

const TURN: Duration = Duration::from_secs(30);

/// The terminal modes `stty -a` printed after livetalk exited: cooked again, echoing.
fn assert_terminal_restored(pane: &Pane, screen: &str) {
    let modes: Vec<&str> = screen.split_whitespace().collect();
    assert!(
        modes.contains(&"icanon"),
        "canonical mode restored:\n{screen}"
    );
    assert!(modes.contains(&"echo"), "echo restored:\n{screen}");
    assert_eq!(
        pane.format("#{alternate_on}"),
        "0",
        "left the alternate screen"
    );
}

#[test]
fn typed_conversation_shows_tool_calls_and_devices_then_quits_cleanly() {
    let scratch = tempfile::tempdir().unwrap();
    let pane = Pane::start(scratch.path(), 120, 40);
    let screen = pane.wait_for("the session to be ready", TURN, |s| {
        s.contains("Gemini is listening…")
    });
    assert!(screen.contains("offline demo model"), "{screen}");
    assert!(screen.contains("○ OFF"), "the lamp starts off:\n{screen}");

    pane.type_line(SMART_HOME_LINES[0]);
    let screen = pane.wait_for("the first reply", TURN, |s| {
        s.contains("currently off.") && s.contains("Gemini is listening…")
    });
    assert!(
        screen.contains("You: Is the living room lamp on?"),
        "{screen}"
    );
    assert!(
        screen.contains("⚙ get_device_status(living room lamp) → ok"),
        "the call is in the transcript:\n{screen}"
    );
    assert!(
        screen.contains("get_device_status  device_name: living room lamp"),
        "and in the tool log:\n{screen}"
    );

    pane.type_line(SMART_HOME_LINES[1]);
    let screen = pane.wait_for("the lamp to turn blue", TURN, |s| {
        s.contains("● ON  ██ blue  100%")
    });
    assert!(screen.contains("set_device_status"), "{screen}");
    let screen = pane.wait_for("the second reply", TURN, |s| {
        s.contains("color to") && s.contains("Gemini is listening…")
    });
    assert!(screen.contains("Tool calls (2)"), "{screen}");

    pane.keys("C-c");
    let screen = pane.wait_exit(TURN);
    assert!(screen.contains("LIVETALK_EXIT=0"), "{screen}");
    assert_terminal_restored(&pane, &screen);
}

/// The session panel's ages count seconds with nothing happening: no key pressed, no frame
/// from the demo model, the connection's age moves on screen.
#[test]
fn the_connections_age_moves_every_second_while_nothing_happens() {
    let scratch = tempfile::tempdir().unwrap();
    let pane = Pane::start(scratch.path(), 120, 40);
    let screen = pane.wait_for("the session panel", TURN, |s| {
        s.contains("Gemini is listening…") && s.contains("Connection  up ")
    });
    let age = |screen: &str| -> Option<u64> {
        let rest = screen.split("Connection  up ").nth(1)?;
        let mut words = rest.split_whitespace();
        let n: u64 = words.next()?.parse().ok()?;
        (words.next()? == "s").then_some(n)
    };
    let first = age(&screen).unwrap_or_else(|| panic!("an age in seconds:\n{screen}"));
    pane.wait_for(
        "the age to move on by itself",
        Duration::from_secs(10),
        |s| age(s).is_some_and(|now| now >= first + 2),
    );
    pane.keys("C-c");
    let screen = pane.wait_exit(TURN);
    assert!(screen.contains("LIVETALK_EXIT=0"), "{screen}");
}

/// The event inspector in a real terminal: F12 opens it on every frame of the turn, `f`
/// filters, Enter shows a frame's JSON, `y` copies it through the terminal (OSC 52, which
/// tmux turns into its paste buffer), Esc closes it; `y` in the tool log copies a call with its
/// response.
#[test]
fn the_event_inspector_opens_filters_expands_copies_and_closes() {
    let scratch = tempfile::tempdir().unwrap();
    let pane = Pane::start_with(scratch.path(), 120, 40, &["--no-audio"], |_| {});
    pane.wait_for("the session to be ready", TURN, |s| {
        s.contains("Gemini is listening…")
    });
    pane.type_line(SMART_HOME_LINES[0]);
    pane.wait_for("the first reply", TURN, |s| {
        s.contains("currently off.") && s.contains("Gemini is listening…")
    });
    pane.keys("F12");
    let screen = pane.wait_for("the inspector on every frame", TURN, |s| {
        s.contains("Events · all") && s.contains("serverContent turnComplete")
    });
    for kind in [
        "→ setup",
        "← setupComplete (setup)",
        "→ clientContent turnComplete",
        "← toolCall",
        "→ toolResponse",
    ] {
        assert!(screen.contains(kind), "{kind} in:\n{screen}");
    }
    pane.keys("f");
    pane.wait_for("the conversation filter", TURN, |s| {
        s.contains("Events · conversation") && !s.contains("← toolCall")
    });
    pane.keys("f");
    let screen = pane.wait_for("the tools filter", TURN, |s| {
        s.contains("Events · tools") && s.contains("→ toolResponse")
    });
    assert!(!screen.contains("setupComplete"), "{screen}");
    // From the newest (the answer) up to the call, and its JSON.
    pane.keys("Up");
    pane.keys("Enter");
    pane.wait_for("the call's JSON", TURN, |s| {
        s.contains("\"functionCalls\": [") && s.contains("End follows")
    });
    pane.keys("y");
    let copied = common::poll(TURN, Duration::from_millis(50), || {
        let copied = pane.clipboard();
        copied.contains("\"toolCall\"").then_some(copied)
    })
    .unwrap_or_else(|| panic!("the copy reached tmux; the screen:\n{}", pane.screen()));
    let json: serde_json::Value = serde_json::from_str(&copied).unwrap();
    assert_eq!(
        json["toolCall"]["functionCalls"][0]["name"],
        "get_device_status"
    );
    pane.wait_for("the copy's notice", TURN, |s| {
        s.contains("Copied the toolCall frame's JSON")
    });
    pane.keys("Escape");
    pane.wait_for("the inspector to close", TURN, |s| !s.contains("Events ·"));
    // The tool log: Tab twice from the input line, then y.
    pane.keys("Tab");
    pane.keys("Tab");
    pane.keys("y");
    let copied = common::poll(TURN, Duration::from_millis(50), || {
        let copied = pane.clipboard();
        copied.contains("functionResponse").then_some(copied)
    })
    .unwrap_or_else(|| {
        panic!(
            "the call's copy reached tmux; the screen:\n{}",
            pane.screen()
        )
    });
    let json: serde_json::Value = serde_json::from_str(&copied).unwrap();
    assert_eq!(json["functionCall"]["name"], "get_device_status");
    assert_eq!(json["functionResponse"]["name"], "get_device_status");
    pane.keys("C-c");
    let screen = pane.wait_exit(TURN);
    assert!(screen.contains("LIVETALK_EXIT=0"), "{screen}");
    assert_terminal_restored(&pane, &screen);
}

#[test]
fn sigterm_restores_the_terminal() {
    let scratch = tempfile::tempdir().unwrap();
    let pane = Pane::start(scratch.path(), 80, 24);
    pane.wait_for("the session to be ready", TURN, |s| {
        s.contains("Gemini is listening…")
    });
    send_signal(pane.livetalk_pid(), "TERM");
    let screen = pane.wait_exit(TURN);
    assert!(screen.contains("LIVETALK_EXIT=0"), "{screen}");
    assert_terminal_restored(&pane, &screen);
}

#[test]
fn help_popup_opens_and_esc_closes_it() {
    let scratch = tempfile::tempdir().unwrap();
    let pane = Pane::start(scratch.path(), 100, 30);
    pane.wait_for("the session to be ready", TURN, |s| {
        s.contains("Gemini is listening…")
    });
    pane.keys("F1");
    // The popup is drawn in one frame, but a capture can land mid-write: wait for all of it.
    // Its bottom edge is drawn last.
    let screen = pane.wait_for("the help popup with the log path", TURN, |s| {
        s.contains("┌ Help ") && s.contains("livetalk.log") && s.contains("Esc closes ┘")
    });
    // Audio is off here: the help has no mute key, but barge-in still cuts a reply short.
    assert!(
        !screen.contains("F3 ") && screen.contains("Ctrl-B"),
        "{screen}"
    );
    pane.keys("Escape");
    pane.wait_for("the popup to close", TURN, |s| !s.contains("┌ Help "));
    // tmux and crossterm deliver the echo key (audio is off here, so it says why it does
    // nothing); Esc dismisses the notice.
    pane.keys("F9");
    pane.wait_for("the echo key's notice", TURN, |s| {
        s.contains("Audio is off")
    });
    pane.keys("Escape");
    pane.wait_for("the notice to go", TURN, |s| !s.contains("Audio is off"));
    // Esc with an empty input line first says that a second one quits, then quits.
    pane.keys("Escape");
    pane.wait_for("the offer to quit", TURN, |s| s.contains("Esc again quits"));
    assert_eq!(pane.format("#{pane_dead}"), "0", "still running");
    pane.keys("Escape");
    let screen = pane.wait_exit(TURN);
    assert!(screen.contains("LIVETALK_EXIT=0"), "{screen}");
}

#[test]
fn esc_twice_with_a_notice_does_not_quit_and_f_keys_stay_in_livetalk() {
    let scratch = tempfile::tempdir().unwrap();
    let pane = Pane::start_with(scratch.path(), 80, 24, &["--no-audio"], |_| {});
    pane.wait_for("the session to be ready", TURN, |s| {
        s.contains("Gemini is listening…")
    });
    pane.keys("F9");
    pane.wait_for("a notice", TURN, |s| s.contains("Audio is off"));
    // Two presses to clear a notice: the second only offers to quit. Each press is read
    // before the next is sent: a terminal that delivers ESC ESC in one read is one Esc key
    // to crossterm (as it is to any terminal program), which is not what a person's two
    // presses make.
    pane.keys("Escape");
    pane.wait_for("the notice to go", TURN, |s| !s.contains("Audio is off"));
    pane.keys("Escape");
    pane.wait_for("the offer to quit", TURN, |s| s.contains("Esc again quits"));
    // F8 opens the tool list in livetalk; nothing of it reaches the shell.
    pane.keys("F8");
    pane.wait_for("the tool list", TURN, |s| s.contains("set_device_status"));
    pane.keys("Escape");
    pane.wait_for("the tool list to close", TURN, |s| {
        !s.contains("┌ Tools") && s.contains("Gemini is listening…")
    });
    assert_eq!(pane.format("#{pane_dead}"), "0", "still running");
    pane.keys("C-c");
    let screen = pane.wait_exit(TURN);
    assert!(screen.contains("LIVETALK_EXIT=0"), "{screen}");
    assert!(!screen.contains("[19~"), "{screen}");
    assert_terminal_restored(&pane, &screen);
}

#[test]
fn goodbye_leaves_the_reply_on_screen_until_a_key_then_says_where_it_was_recorded() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("rec");
    let dir_arg = dir.to_str().unwrap();
    let pane = Pane::start_with(scratch.path(), 160, 30, &["--record", dir_arg], |_| {});
    pane.wait_for("the session to be ready", TURN, |s| {
        s.contains("Gemini is listening…")
    });
    pane.type_line("Thanks, goodbye!");
    // The model calls end_session and says goodbye; the screen stays with all of it.
    let screen = pane.wait_for("the end of the session", TURN, |s| {
        s.contains("Press any key to leave")
    });
    assert!(screen.contains("Session ended"), "{screen}");
    let said = screen
        .lines()
        .find(|l| l.contains("Gemini: "))
        .unwrap_or_else(|| panic!("the goodbye on the screen:\n{screen}"));
    assert!(
        !said.contains('▍'),
        "the whole reply, not a streaming one: {said}"
    );
    assert_eq!(pane.format("#{pane_dead}"), "0", "waits for a key");
    pane.keys("x");
    let output = pane.wait_exit(TURN);
    assert!(output.contains("LIVETALK_EXIT=0"), "{output}");
    assert!(
        output.contains(&format!(
            "Recorded to {dir_arg} · livetalk replay {dir_arg} · livetalk inspect {dir_arg}"
        )),
        "{output}"
    );
    assert_terminal_restored(&pane, &output);
}

#[test]
fn the_badge_never_says_listening_while_a_killed_mock_is_reconnected_to() {
    let scratch = tempfile::tempdir().unwrap();
    let mut mock = common::MockProcess::start(scratch.path(), &[]);
    let url = mock.url.clone();
    let pane = Pane::start_with(scratch.path(), 120, 30, &["--endpoint", &url], |_| {});
    pane.wait_for("the session to be ready", TURN, |s| {
        s.contains("Gemini is listening…")
    });
    mock.child.kill().unwrap();
    mock.child.wait().unwrap();
    // Every screen from the loss on: the link is down, and the badge says so.
    let mut seen_reconnecting = false;
    let screen = pane.wait_for("the reconnects to be tried", TURN, |s| {
        let down = s.contains("Reconnect") || s.contains("Connection lost");
        assert!(
            !(down && s.contains("listening")),
            "listening while the link is down:\n{s}"
        );
        s.contains("Reconnect attempt 2") || s.contains("✖ Disconnected")
    });
    seen_reconnecting |= screen.contains("Reconnect");
    assert!(seen_reconnecting, "{screen}");
    pane.keys("C-c");
    let output = pane.wait_exit(TURN);
    assert_terminal_restored(&pane, &output);
}

/// `REPLAY applied/total` from the status line.
fn progress(screen: &str) -> Option<(usize, usize)> {
    let rest = &screen[screen.find("REPLAY ")? + "REPLAY ".len()..];
    let (applied, rest) = rest.split_once('/')?;
    let total = rest.split_whitespace().next()?;
    Some((applied.parse().ok()?, total.parse().ok()?))
}

#[test]
fn replay_pauses_steps_and_reaches_the_recorded_end_then_quits_cleanly() {
    let scratch = tempfile::tempdir().unwrap();
    // A recording with tool calls, an interrupted reply and a reconnect.
    let (original, dir, mock) = common::record_interrupted_session(scratch.path(), &[]);
    let dir_arg = dir.to_str().unwrap();
    assert_eq!(original.code, Some(0), "{}", original.stderr);
    drop(mock);
    let reply = |start: &str| {
        original
            .stdout
            .lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no {start:?} in {}", original.stdout))
            .to_owned()
    };
    let cut_off = reply("Gemini: ");
    assert!(cut_off.ends_with("[interrupted]"), "{cut_off}");
    let thermostat = reply("Gemini: The kitchen thermostat");

    // The recording says it started at 08:09:10, so the tool log's times can only come from
    // it: each call shows that start plus the time its toolCall arrived.
    let log = dir.join("session.jsonl");
    let text = std::fs::read_to_string(&log).unwrap();
    let (first, rest) = text.split_once('\n').unwrap();
    let mut meta: serde_json::Value = serde_json::from_str(first).unwrap();
    let start = "2021-06-07T08:09:10+00:00[+00:00]";
    meta["started_at"] = serde_json::json!(start);
    std::fs::write(&log, format!("{meta}\n{rest}")).unwrap();
    let start: jiff::Zoned = start.parse().unwrap();
    let call_times: Vec<String> = rest
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|l| l["message"]["toolCall"].is_object())
        .map(|l| {
            let t = jiff::SignedDuration::try_from_secs_f64(l["t"].as_f64().unwrap()).unwrap();
            start
                .checked_add(t)
                .unwrap()
                .strftime("%H:%M:%S")
                .to_string()
        })
        .collect();
    assert_eq!(call_times.len(), 3);

    // Slowed down, so it can be paused before it ends.
    let pane = Pane::start_with(
        scratch.path(),
        150,
        45,
        &["replay", dir_arg, "--speed", "0.2"],
        |_| {},
    );
    pane.wait_for("the replay to start", TURN, |s| progress(s).is_some());
    pane.keys("Space");
    let screen = pane.wait_for("the pause", TURN, |s| {
        s.contains("(paused: Space resumes, n steps)")
    });
    let (applied, total) = progress(&screen).unwrap();
    assert!(
        applied + 2 < total,
        "paused before the end ({applied}/{total}):\n{screen}"
    );
    // While paused, `n` is the only way forward: one step per press.
    for step in 1..=2 {
        pane.keys("n");
        let screen = pane.wait_for("one step", TURN, |s| {
            progress(s).is_some_and(|(now, _)| now >= applied + step)
        });
        assert_eq!(progress(&screen), Some((applied + step, total)), "{screen}");
        assert!(screen.contains("(paused: "), "{screen}");
    }
    pane.keys("Space");
    let end = format!("REPLAY {total}/{total} (finished)");
    let screen = pane.wait_for("the end of the recording", Duration::from_secs(90), |s| {
        s.contains(&end)
    });
    // The transcript as the original run left it: the cut-off reply, the last answer.
    for line in [
        "You: Is the living room lamp on?",
        cut_off.as_str(),
        "You: What's the kitchen thermostat set to?",
        thermostat.as_str(),
    ] {
        assert!(screen.contains(line), "{line:?} on the screen:\n{screen}");
    }
    // The tool log, with the times the calls arrived in the recording.
    assert!(screen.contains("Tool calls (3)"), "{screen}");
    for time in &call_times {
        assert!(
            screen
                .lines()
                .any(|l| l.contains(&format!("│{time} ")) && l.contains("✔ ok")),
            "a call at {time} in the tool log:\n{screen}"
        );
    }
    // The devices as the tool calls left them.
    assert!(screen.contains("● ON  ██ blue  100%"), "{screen}");
    // The reconnect notice is back, and the session ended as it did.
    assert!(
        screen.contains("Reconnected; the conversation continues. (+1 more)"),
        "{screen}"
    );
    assert!(screen.contains("■ Session ended"), "{screen}");

    pane.keys("q");
    let output = pane.wait_exit(TURN);
    assert!(output.contains("LIVETALK_EXIT=0"), "{output}");
    assert_terminal_restored(&pane, &output);

    // q leaves a replay from every pane: Tab goes transcript → tool log → devices → the
    // replay's controls; nothing is typed anywhere.
    for tabs in 0..4 {
        let pane = Pane::start_with(
            scratch.path(),
            150,
            45,
            &["replay", dir_arg, "--instant"],
            |_| {},
        );
        pane.wait_for("the replay's end", TURN, |s| s.contains("(finished)"));
        for _ in 0..tabs {
            pane.keys("Tab");
        }
        let screen = pane.screen();
        assert!(
            !screen.contains("Type to interrupt") && !screen.contains("Enter send"),
            "{screen}"
        );
        pane.keys("q");
        let output = pane.wait_exit(TURN);
        assert!(
            output.contains("LIVETALK_EXIT=0"),
            "after {tabs} tabs: {output}"
        );
    }
}

#[test]
fn a_call_that_needs_approval_waits_then_runs_with_edited_arguments_or_is_denied() {
    let scratch = tempfile::tempdir().unwrap();
    std::fs::write(
        scratch.path().join("config.toml"),
        "[audio]\nenabled = false\n[tools.approval]\nset_device_status = \"always\"\n",
    )
    .unwrap();
    let pane = Pane::start(scratch.path(), 120, 40);
    pane.wait_for("the session to be ready", TURN, |s| {
        s.contains("Gemini is listening…")
    });

    pane.type_line("set the lamp to 40%");
    let screen = pane.wait_for("the call to wait", TURN, |s| s.contains("waiting for you"));
    assert!(screen.contains("○ OFF"), "nothing ran yet:\n{screen}");
    pane.keys("F7");
    pane.keys("e");
    pane.wait_for("the argument editor", TURN, |s| {
        s.contains("Edit the arguments of set_device_status")
    });
    pane.keys("C-u");
    pane.type_line(
        r#"{"device_name": "living room lamp", "new_status": "on", "setting": {"brightness": 70}}"#,
    );
    let screen = pane.wait_for("the edited call to run and the reply", TURN, |s| {
        s.contains("70%") && s.contains("Gemini is listening…") && !s.contains("waiting for you")
    });
    assert!(screen.contains("● ON"), "the lamp is on:\n{screen}");

    pane.type_line("turn off the lamp");
    pane.wait_for("the second call to wait", TURN, |s| {
        s.contains("waiting for you")
    });
    pane.keys("F7");
    pane.keys("d");
    let screen = pane.wait_for("the refusal to be phrased", TURN, |s| {
        s.contains("declined") && s.contains("Gemini is listening…")
    });
    assert!(screen.contains("⊘ refused"), "{screen}");
    assert!(screen.contains("● ON"), "the lamp stayed on:\n{screen}");

    pane.keys("C-c");
    let screen = pane.wait_exit(TURN);
    assert!(screen.contains("LIVETALK_EXIT=0"), "{screen}");
    assert_terminal_restored(&pane, &screen);
}

/// `/image` in a real terminal: a PNG the test made is read, scaled and sent as a JPEG video
/// frame (`realtimeInput.video`, `image/jpeg`), the transcript shows its name and size, and the
/// demo model names its colour; Tab completes the command and the path on the way.
#[test]
fn an_image_reaches_the_demo_model_which_names_its_colour() {
    let scratch = tempfile::tempdir().unwrap();
    let pictures = scratch.path().join("pictures");
    std::fs::create_dir(&pictures).unwrap();
    common::png_file(&pictures.join("sunset-red.png"), 2048, 1536, [210, 30, 25]);
    let rec = scratch.path().join("rec");
    // Wide enough for the answer on one line beside the picture's preview.
    let pane = Pane::start_with(
        scratch.path(),
        160,
        40,
        &["--record", rec.to_str().unwrap()],
        |tmux| {
            tmux.current_dir(scratch.path());
        },
    );
    pane.wait_for("the session to be ready", TURN, |s| {
        s.contains("Gemini is listening…")
    });
    pane.keys("/im");
    pane.keys("Tab");
    pane.wait_for("the command completed", TURN, |s| s.contains("/image "));
    pane.keys("pictures/sun");
    pane.keys("Tab");
    pane.wait_for("the path completed", TURN, |s| {
        s.contains("/image pictures/sunset-red.png")
    });
    pane.keys("Enter");
    let screen = pane.wait_for("the model's answer", TURN, |s| {
        s.contains("mostly red.") && s.contains("Gemini is listening…")
    });
    assert!(
        screen.contains("You (image): sunset-red.png (") && screen.contains("1024×768 JPEG"),
        "{screen}"
    );
    assert!(
        screen.contains("I see a 1024 by 768 picture, mostly red."),
        "{screen}"
    );
    pane.keys("C-c");
    let screen = pane.wait_exit(TURN);
    assert!(screen.contains("LIVETALK_EXIT=0"), "{screen}");
    let frames: Vec<serde_json::Value> = common::sent_messages(&rec)
        .into_iter()
        .filter_map(|m| m["realtimeInput"].get("video").cloned())
        .collect();
    assert_eq!(frames.len(), 1, "{frames:?}");
    assert_eq!(frames[0]["mimeType"], "image/jpeg");
    // The picture is kept beside the recording, a JPEG, its line referring to it.
    assert_eq!(frames[0]["data"]["file"], "frames/0001.jpg", "{frames:?}");
    let jpeg = std::fs::read(rec.join("frames/0001.jpg")).unwrap();
    assert!(jpeg.starts_with(&[0xff, 0xd8]), "a JPEG");
    assert_eq!(frames[0]["data"]["bytes"], jpeg.len());
}

/// `/voice` in a real terminal: the session moves to a new connection whose `setup` carries
/// the voice and the resumption handle, and the conversation is kept: "turn it on" after it
/// acts on the lamp asked about before.
#[test]
fn a_new_voice_is_handed_over_and_the_conversation_is_kept() {
    let scratch = tempfile::tempdir().unwrap();
    let rec = scratch.path().join("rec");
    let pane = Pane::start_with(
        scratch.path(),
        120,
        40,
        &["--record", rec.to_str().unwrap(), "--voice", "Puck"],
        |_| {},
    );
    pane.wait_for("the session to be ready", TURN, |s| {
        s.contains("Gemini is listening…")
    });
    pane.type_line(SMART_HOME_LINES[0]);
    pane.wait_for("the first reply", TURN, |s| {
        s.contains("currently off.") && s.contains("Gemini is listening…")
    });
    pane.keys("/voice ko");
    pane.keys("Tab");
    pane.wait_for("the voice completed", TURN, |s| s.contains("/voice Kore"));
    pane.keys("Enter");
    pane.wait_for("the change said, and handed over", TURN, |s| {
        s.contains("Voice is now Kore") && s.contains("the conversation continues")
    });
    pane.type_line("turn it on");
    pane.wait_for("the lamp on", TURN, |s| {
        s.contains("● ON") && s.contains("Gemini is listening…")
    });
    pane.keys("C-c");
    let screen = pane.wait_exit(TURN);
    assert!(screen.contains("LIVETALK_EXIT=0"), "{screen}");
    let setups: Vec<serde_json::Value> = common::sent_messages(&rec)
        .into_iter()
        .filter_map(|m| m.get("setup").cloned())
        .collect();
    assert_eq!(setups.len(), 2, "{setups:#?}");
    let voice = |setup: &serde_json::Value| {
        setup["generationConfig"]["speechConfig"]["voiceConfig"]["prebuiltVoiceConfig"]["voiceName"]
            .clone()
    };
    assert_eq!(voice(&setups[0]), "Puck");
    assert_eq!(voice(&setups[1]), "Kore");
    assert!(
        setups[1]["sessionResumption"]["handle"]
            .as_str()
            .is_some_and(|h| !h.is_empty()),
        "resumed with the handle: {:#?}",
        setups[1]
    );
}

/// Pastes are taken in time linear in their length: 500 KB goes into the input line at once
/// (it took 110 s when each character was inserted on its own), and 5 MB, past the input
/// line's 1 MiB, is refused whole with a notice, as quickly.
#[test]
fn a_large_paste_is_taken_at_once_and_one_past_the_cap_is_refused_with_a_notice() {
    let scratch = tempfile::tempdir().unwrap();
    let pane = Pane::start(scratch.path(), 120, 40);
    pane.wait_for("the session to be ready", TURN, |s| {
        s.contains("Gemini is listening…")
    });
    let paste = format!("{}END-OF-PASTE", "word ".repeat(100_000));
    let started = std::time::Instant::now();
    pane.paste(&paste);
    pane.wait_for("the paste's end in the input line", TURN, |s| {
        s.contains("word END-OF-PASTE")
    });
    let took = started.elapsed();
    eprintln!("a paste of {} bytes was taken in {took:?}", paste.len());
    assert!(
        took < Duration::from_secs(5),
        "500 KB took {took:?} to be taken"
    );

    pane.keys("C-u");
    pane.wait_for("an empty input line", TURN, |s| !s.contains("END-OF-PASTE"));
    let huge = "word ".repeat(1_000_000);
    let started = std::time::Instant::now();
    pane.paste(&huge);
    let screen = pane.wait_for("the notice", TURN, |s| s.contains("was not taken"));
    let took = started.elapsed();
    eprintln!("a paste of {} bytes was refused in {took:?}", huge.len());
    assert!(
        screen
            .contains("The paste of 4.8 MiB was not taken: the input line holds at most 1.0 MiB."),
        "{screen}"
    );
    assert!(
        !screen.contains("word word"),
        "nothing of it was taken:\n{screen}"
    );
    assert!(
        took < Duration::from_secs(5),
        "5 MB took {took:?} to be refused"
    );
}

/// `/screen NAME` in a real terminal under Xvfb: Tab completes the window's name from the
/// display, the status line says "sharing screen", the transcript says what is shared, and
/// the demo model names the window's colour; `/stop` ends it and the status line says so no
/// more. The Live server in the test received the window once, as it never changed.
#[test]
fn a_window_is_shared_from_the_terminal_ui() {
    let scratch = tempfile::tempdir().unwrap();
    let mock = common::InProcessMock::start();
    let xvfb = common::display::Xvfb::start(1280, 720);
    let _window =
        common::display::SolidWindow::open(&xvfb.display, 640, 360, [40, 190, 60], "Green Room");
    let display = xvfb.display.clone();
    // Wide enough for the transcript's lines beside the window's preview.
    let pane = Pane::start_with(
        scratch.path(),
        160,
        40,
        &["--endpoint", &mock.url],
        |tmux| {
            tmux.env("DISPLAY", &display);
        },
    );
    pane.wait_for("the session to be ready", TURN, |s| {
        s.contains("Gemini is listening…")
    });
    pane.keys("/screen Gre");
    pane.keys("Tab");
    pane.wait_for("the window's name completed", TURN, |s| {
        s.contains("/screen Green Room")
    });
    pane.keys("Enter");
    let screen = pane.wait_for("the model's answer", TURN, |s| {
        s.contains("mostly green.") && s.contains("sharing screen")
    });
    assert!(
        screen.contains("Sharing window \"Green Room\" with the model"),
        "{screen}"
    );
    assert!(
        screen.contains("I see a 640 by 360 picture, mostly green."),
        "{screen}"
    );
    pane.type_line("/stop");
    let screen = pane.wait_for("the share to stop", TURN, |s| {
        s.contains("Stopped sharing the screen: 1 frame sent")
    });
    assert!(
        !screen
            .lines()
            .next()
            .unwrap_or_default()
            .contains("sharing screen"),
        "{screen}"
    );
    pane.keys("C-c");
    let screen = pane.wait_exit(TURN);
    assert!(screen.contains("LIVETALK_EXIT=0"), "{screen}");
    // What the Live server received: the window, once, as it never changed.
    let pictures = mock.pictures();
    assert_eq!(pictures.len(), 1, "{pictures:#?}");
    assert_eq!(
        (pictures[0].size, pictures[0].colour.as_str()),
        (Some((640, 360)), "green")
    );
}

/// The cells of a pane whose background is within JPEG's tolerance of `rgb`.
fn cells_coloured(captured: &str, rgb: [u8; 3]) -> usize {
    graphics::cell_backgrounds(captured)
        .iter()
        .filter(|(_, bg)| bg.is_some_and(|bg| graphics::near(bg, rgb, 12)))
        .count()
}

/// The pane's cells show a picture of colour `shown` (a hundred cells at least: a preview, not
/// a stray cell) and none of colour `gone`.
fn assert_previewed(pane: &Pane, shown: [u8; 3], gone: [u8; 3]) {
    let coloured = pane.screen_with_colours();
    let cells = cells_coloured(&coloured, shown);
    assert!(cells >= 100, "{cells} cells of {shown:?}:\n{coloured:?}");
    assert_eq!(cells_coloured(&coloured, gone), 0, "{gone:?} is gone");
}

/// The preview in tmux, in half-blocks (tmux passes no graphics on): a `--video` folder's second
/// frame fills the pane's cells in its colour (its first no more), under a caption with the
/// share's rates; `/preview` hides it and `/image` shows its picture the same way, by name.
#[test]
fn the_preview_shows_the_last_frame_sent_in_half_blocks_with_its_rates_and_an_image() {
    const FIRST: [u8; 3] = [200, 40, 40];
    const SECOND: [u8; 3] = [40, 90, 210];
    const PICTURE: [u8; 3] = [40, 180, 60];
    let scratch = tempfile::tempdir().unwrap();
    let frames = scratch.path().join("frames");
    std::fs::create_dir(&frames).unwrap();
    common::png_file(&frames.join("0001.png"), 320, 180, FIRST);
    common::png_file(&frames.join("0002.png"), 320, 180, SECOND);
    common::png_file(&scratch.path().join("leaf.png"), 300, 300, PICTURE);
    let pane = Pane::start_with(
        scratch.path(),
        160,
        40,
        &["--video", frames.to_str().unwrap()],
        |tmux| {
            tmux.current_dir(scratch.path());
        },
    );
    let screen = pane.wait_for("the second frame's rates", TURN, |s| {
        s.contains("sharing video · 1.0 frames/s")
    });
    assert!(screen.contains(" Preview "), "{screen}");
    // The caption is drawn with the picture: the second frame is in the cells by now.
    assert_previewed(&pane, SECOND, FIRST);

    pane.type_line("/preview");
    pane.wait_for("the preview to hide", TURN, |s| !s.contains(" Preview "));
    assert_eq!(cells_coloured(&pane.screen_with_colours(), SECOND), 0);

    pane.type_line("/image leaf.png");
    pane.wait_for("the picture's preview", TURN, |s| {
        s.contains(" Preview ") && s.contains("leaf.png · 300×300")
    });
    assert_previewed(&pane, PICTURE, SECOND);
    pane.keys("C-c");
    let screen = pane.wait_exit(TURN);
    assert!(screen.contains("LIVETALK_EXIT=0"), "{screen}");
    assert_terminal_restored(&pane, &screen);
}

/// The mean colour of a decoded picture's pixels.
fn mean(pixels: impl Iterator<Item = [u8; 3]>) -> [u8; 3] {
    let (mut sum, mut n) = ([0u64; 3], 0u64);
    for p in pixels {
        for c in 0..3 {
            sum[c] += u64::from(p[c]);
        }
        n += 1;
    }
    assert!(n > 0, "a picture with pixels");
    sum.map(|s| u8::try_from(s / n).unwrap())
}

/// Kitty graphics, forced, in a raw terminal: the frame a `--video` folder shares is transmitted
/// as a kitty image whose pixels, decoded, are the frame's colour; leaving deletes the image.
#[test]
fn the_preview_in_kitty_graphics_decodes_to_the_frames_colour() {
    const COLOUR: [u8; 3] = [230, 120, 20];
    let scratch = tempfile::tempdir().unwrap();
    let frames = scratch.path().join("frames");
    std::fs::create_dir(&frames).unwrap();
    common::png_file(&frames.join("only.png"), 640, 360, COLOUR);
    let mut terminal = graphics::RawTerminal::start(
        scratch.path(),
        120,
        40,
        &["--graphics", "kitty", "--video", frames.to_str().unwrap()],
    );
    terminal.wait_for("a kitty picture", TURN, |out| {
        !graphics::kitty_pictures(out).is_empty()
    });
    terminal.keys("\x03");
    let output = terminal.wait_exit(TURN);
    let pictures = graphics::kitty_pictures(&output);
    let picture = &pictures[0];
    // 16:9 at the pane's size in cells (10×20 pixels each where the terminal says none).
    let (w, h) = picture.pixels.dimensions();
    assert!(w >= 100 && h >= 40 && w > h, "{w}×{h}");
    let colour = mean(picture.pixels.pixels().map(|p| [p[0], p[1], p[2]]));
    assert!(
        graphics::near(colour, COLOUR, 12),
        "decoded {colour:?}, sent {COLOUR:?}"
    );
    let delete = format!("\x1b_Ga=d,d=I,i={},q=2\x1b\\", picture.id);
    assert!(
        graphics::contains(&output, delete.as_bytes()),
        "the image is deleted on the way out"
    );
}

/// Sixel graphics, forced, in a raw terminal: `/image` shows its picture as a sixel image whose
/// pixels, decoded, are the picture's colour.
#[test]
fn the_preview_in_sixel_graphics_decodes_to_the_pictures_colour() {
    const COLOUR: [u8; 3] = [60, 200, 190];
    let scratch = tempfile::tempdir().unwrap();
    common::png_file(&scratch.path().join("teal.png"), 400, 300, COLOUR);
    let mut terminal =
        graphics::RawTerminal::start(scratch.path(), 120, 40, &["--graphics", "sixel"]);
    terminal.wait_for("the session to be ready", TURN, |out| {
        graphics::contains(out, "listening".as_bytes())
    });
    terminal.keys("/image teal.png\r");
    terminal.wait_for("a sixel picture", TURN, |out| {
        !graphics::sixel_pictures(out).is_empty()
    });
    terminal.keys("\x03");
    let output = terminal.wait_exit(TURN);
    let pictures = graphics::sixel_pictures(&output);
    let painted = &pictures[0];
    assert!(
        painted.len() >= 100 * 60,
        "{} pixels painted",
        painted.len()
    );
    let colour = mean(painted.iter().copied());
    assert!(
        graphics::near(colour, COLOUR, 12),
        "decoded {colour:?}, sent {COLOUR:?}"
    );
}
