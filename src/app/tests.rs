//! State tests of `App::update`: messages in, state and effects out.

use std::time::Duration;

use serde_json::json;

use super::*;
use crate::tools::{CallKey, KeyedCall, SlowCall, ToolEvent, ToolStatus, Verdict};
use crate::tools::{END_SESSION, ToolOutcome};
use livetalk_live::reading::{Grounding, Source};
use livetalk_live::session::SessionChange;
use livetalk_live::wire::{FunctionCall, FunctionResponse};
use livetalk_live::{CloseInfo, ServerEvent};

fn connected_app() -> App {
    let mut app = App::new(AppInit::new("models/test", true, Vec::new()));
    app.update(Msg::Server(ServerEvent::SetupComplete { session_id: None }));
    app
}

fn call(id: &str, name: &str) -> FunctionCall {
    FunctionCall {
        id: Some(id.into()),
        name: name.into(),
        args: json!({"device_name": "living room lamp"}),
    }
}

/// Calls as the app hands them to the dispatcher: numbered by their place in the tool log.
fn keyed(calls: Vec<FunctionCall>) -> Vec<KeyedCall> {
    calls
        .into_iter()
        .enumerate()
        .map(|(i, call)| KeyedCall {
            key: CallKey(i as u64),
            call,
        })
        .collect()
}

fn finished(id: &str, name: &str, status: ToolStatus) -> Msg {
    let response = FunctionResponse {
        id: Some(id.into()),
        name: name.into(),
        response: json!({"status": "off"}),
        ..FunctionResponse::default()
    };
    Msg::Tool(ToolEvent::Finished(ToolOutcome {
        key: None,
        id: Some(id.into()),
        name: name.into(),
        args: json!({}),
        status,
        response,
        duration: Duration::from_millis(3),
        truncated: false,
        unasked: None,
    }))
}

#[test]
fn connect_then_listen() {
    let mut app = App::new(AppInit::new("models/test", true, Vec::new()));
    assert_eq!(app.connection, ConnectionState::Connecting);
    app.update(Msg::Server(ServerEvent::SetupComplete { session_id: None }));
    assert_eq!(app.connection, ConnectionState::Connected);
    assert_eq!(app.floor, Floor::Listening);
    assert!(app.ready_for_user());
}

#[test]
fn user_turn_is_sent_and_awaits_the_model() {
    let mut app = connected_app();
    assert_eq!(
        app.update(Msg::UserText("  hi  ".into())),
        vec![Effect::Session(SessionEffect::SendText("hi".into()))]
    );
    assert!(!app.ready_for_user());
    assert_eq!(
        app.transcript,
        vec![Entry::User {
            text: "hi".into(),
            via: UserInput::Typed
        }]
    );
    assert!(
        app.update(Msg::UserText("   ".into())).is_empty(),
        "blank input is not sent"
    );
}

#[test]
fn speaking_while_output_streams_listening_after_turn_complete() {
    let mut app = connected_app();
    app.update(Msg::UserText("hello".into()));
    app.update(Msg::Server(ServerEvent::ModelAudio {
        pcm: vec![0; 4],
        sample_rate: 24_000,
    }));
    assert_eq!(app.floor, Floor::Speaking);
    app.update(Msg::Server(ServerEvent::OutputTranscription {
        text: "Hi ".into(),
        finished: false,
    }));
    app.update(Msg::Server(ServerEvent::OutputTranscription {
        text: "there.".into(),
        finished: false,
    }));
    app.update(Msg::Server(ServerEvent::GenerationComplete));
    assert_eq!(app.floor, Floor::Speaking);
    app.update(Msg::Server(ServerEvent::TurnComplete {
        reason: None,
        waiting_for_input: false,
    }));
    assert_eq!(app.floor, Floor::Listening);
    assert!(app.ready_for_user());
    match &app.transcript[1] {
        Entry::Model {
            text_parts,
            transcript,
            status,
            ..
        } => {
            assert_eq!(Entry::model_text(text_parts, transcript), "Hi there.");
            assert_eq!(*status, ModelTurnStatus::Complete);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn interrupted_turn_is_marked_and_returns_to_listening() {
    let mut app = connected_app();
    app.update(Msg::UserText("tell me a story".into()));
    app.update(Msg::Server(ServerEvent::OutputTranscription {
        text: "Once upon".into(),
        finished: false,
    }));
    app.update(Msg::UserText("stop".into()));
    app.update(Msg::Server(ServerEvent::Interrupted));
    assert_eq!(app.floor, Floor::Listening);
    assert!(app.transcript.iter().any(|e| matches!(
        e,
        Entry::Model {
            status: ModelTurnStatus::Interrupted,
            ..
        }
    )));
}

#[test]
fn tool_call_lifecycle_ok_error_and_cancelled() {
    let mut app = connected_app();
    app.update(Msg::UserText("status?".into()));
    let calls = vec![
        call("c1", "get_device_status"),
        call("c2", "set_device_status"),
        call("c3", "get_device_status"),
    ];
    assert_eq!(
        app.update(Msg::Server(ServerEvent::ToolCall(calls.clone()))),
        vec![Effect::Tools(ToolEffect::RunTools(keyed(calls)))]
    );
    assert_eq!(app.running_tools(), 3);
    assert_eq!(
        app.transcript
            .iter()
            .filter(|e| matches!(e, Entry::Tool(_)))
            .count(),
        3,
        "tool calls are part of the history"
    );

    let effects = app.update(finished("c1", "get_device_status", ToolStatus::Ok));
    assert!(
        matches!(&effects[..], [Effect::Session(SessionEffect::SendToolResponse(r))] if r.id.as_deref() == Some("c1"))
    );
    assert_eq!(app.tool_calls[0].state, ToolState::Ok);
    assert_eq!(app.tool_calls[0].duration, Some(Duration::from_millis(3)));

    app.update(finished(
        "c2",
        "set_device_status",
        ToolStatus::Error("bad brightness".into()),
    ));
    assert_eq!(
        app.tool_calls[1].state,
        ToolState::Error("bad brightness".into())
    );

    assert_eq!(
        app.update(Msg::Server(ServerEvent::ToolCallCancelled(vec![
            "c3".into()
        ]))),
        vec![Effect::Tools(ToolEffect::CancelTools(vec!["c3".into()]))]
    );
    let effects = app.update(Msg::Tool(ToolEvent::Cancelled {
        key: None,
        id: "c3".into(),
        name: "get_device_status".into(),
        duration: Duration::from_millis(1),
    }));
    assert!(effects.is_empty(), "cancelled calls are never answered");
    assert_eq!(app.tool_calls[2].state, ToolState::Cancelled);
    assert_eq!(app.running_tools(), 0);
}

#[test]
fn end_session_closes_after_the_goodbye_turn() {
    let mut app = connected_app();
    app.update(Msg::UserText("bye".into()));
    app.update(Msg::Server(ServerEvent::ToolCall(vec![call(
        "e1",
        END_SESSION,
    )])));
    app.update(finished("e1", END_SESSION, ToolStatus::Ok));
    app.update(Msg::Server(ServerEvent::OutputTranscription {
        text: "Goodbye!".into(),
        finished: true,
    }));
    let effects = app.update(Msg::Server(ServerEvent::TurnComplete {
        reason: None,
        waiting_for_input: false,
    }));
    assert_eq!(effects, vec![Effect::Session(SessionEffect::CloseSession)]);
    app.update(Msg::Server(ServerEvent::Closed(CloseInfo {
        code: Some(1000),
        reason: String::new(),
        message: "Session ended.".into(),
        initiated_by_client: true,
    })));
    assert!(app.ended_cleanly());
    assert!(app.notices.is_empty(), "a clean end is not an error");
}

#[test]
fn unexpected_close_shows_the_reason() {
    let mut app = connected_app();
    app.update(Msg::UserText("hi".into()));
    app.update(Msg::Server(ServerEvent::Closed(CloseInfo {
        code: Some(1011),
        reason: "Internal error encountered.".into(),
        message: "The Live API had an internal error (1011): Internal error encountered.".into(),
        initiated_by_client: false,
    })));
    assert!(
        matches!(&app.connection, ConnectionState::Disconnected { reason } if reason.contains("1011"))
    );
    assert!(!app.ended_cleanly());
    assert_eq!(
        app.notices.last().map(|n| n.level),
        Some(NoticeLevel::Error)
    );
    assert!(
        app.update(Msg::UserText("anyone?".into())).is_empty(),
        "nothing is sent on a closed session"
    );
}

#[test]
fn skipped_frames_become_warnings_and_the_session_goes_on() {
    let mut app = connected_app();
    app.update(Msg::Server(ServerEvent::FrameSkipped {
        reason: "skipped a malformed server frame".into(),
    }));
    assert_eq!(app.notices[0].level, NoticeLevel::Warning);
    assert_eq!(app.connection, ConnectionState::Connected);
}

#[test]
fn what_the_server_says_is_shown_bounded_and_a_long_reply_whole() {
    use livetalk_live::excerpt;
    let mut app = connected_app();
    app.update(Msg::UserText("hi".into()));
    // A long reply in normal parts is the conversation: all of it is kept.
    let sentence = "This sentence is part of a long but honest answer. ";
    for _ in 0..2_000 {
        app.update(Msg::Server(ServerEvent::ModelText(sentence.into())));
    }
    // One absurd part is cut, and says how big it was.
    app.update(Msg::Server(ServerEvent::ModelText(
        "y".repeat(10_000_000).into(),
    )));
    let Some(Entry::Model { text_parts, .. }) = app.transcript.last() else {
        panic!("{:?}", app.transcript.last());
    };
    assert_eq!(text_parts.matches(sentence).count(), 2_000);
    assert!(
        text_parts.ends_with("y… (9.5 MiB, shown 64.0 KiB)"),
        "{}",
        &text_parts[text_parts.len() - 40..]
    );
    assert!(text_parts.len() < 2_000 * sentence.len() + excerpt::TEXT + 40);

    // Notices and the close reason quote the server: a summary each.
    app.update(Msg::Server(ServerEvent::FrameSkipped {
        reason: format!("skipped a malformed server frame: {}", "z".repeat(1 << 20)),
    }));
    app.update(Msg::Server(ServerEvent::Closed(CloseInfo {
        code: None,
        reason: String::new(),
        message: format!("The bridge reported an error: {}", "w".repeat(1 << 20)),
        initiated_by_client: false,
    })));
    assert_eq!(app.notices.len(), 2);
    for notice in &app.notices {
        assert!(
            notice.text.len() < excerpt::SUMMARY + 40,
            "{}",
            notice.text.len()
        );
        assert!(
            notice.text.ends_with("(1.0 MiB, shown 4.0 KiB)"),
            "{}",
            notice.text
        );
    }
    let ConnectionState::Disconnected { reason } = &app.connection else {
        panic!("{:?}", app.connection);
    };
    assert_eq!(reason, &app.notices[1].text);
}

/// Presses a key as the drive loop delivers it (intents handed back applied in turn); returns
/// the other effects.
fn press(app: &mut App, code: crossterm::event::KeyCode) -> Vec<Effect> {
    use crossterm::event::{KeyEvent, KeyModifiers};
    crate::driver::apply_collecting(app, Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)))
}

fn type_text(app: &mut App, text: &str) {
    for c in text.chars() {
        press(app, crossterm::event::KeyCode::Char(c));
    }
}

#[test]
fn typed_line_is_sent_on_enter_and_kept_while_connecting() {
    use crossterm::event::KeyCode;
    let mut app = App::new(AppInit::new("models/test", true, Vec::new()));
    type_text(&mut app, "quick question?");
    assert_eq!(
        app.view.input.text(),
        "quick question?",
        "q and ? are text here"
    );
    assert!(press(&mut app, KeyCode::Enter).is_empty());
    assert_eq!(
        app.view.input.text(),
        "quick question?",
        "not lost before connecting"
    );
    app.update(Msg::Server(ServerEvent::SetupComplete { session_id: None }));
    assert_eq!(
        press(&mut app, KeyCode::Enter),
        vec![Effect::Session(SessionEffect::SendText(
            "quick question?".into()
        ))]
    );
    assert!(app.view.input.is_empty());
    press(&mut app, KeyCode::Up);
    assert_eq!(
        app.view.input.text(),
        "quick question?",
        "history recalls it"
    );
}

#[test]
fn typing_while_the_model_speaks_sends_and_the_server_interrupts() {
    use crossterm::event::KeyCode;
    let mut app = connected_app();
    app.update(Msg::UserText("tell me a story".into()));
    app.update(Msg::Server(ServerEvent::OutputTranscription {
        text: "Once upon".into(),
        finished: false,
    }));
    assert_eq!(app.floor, Floor::Speaking);
    type_text(&mut app, "stop");
    assert_eq!(
        press(&mut app, KeyCode::Enter),
        vec![Effect::Session(SessionEffect::SendText("stop".into()))]
    );
    app.update(Msg::Server(ServerEvent::Interrupted));
    assert_eq!(app.floor, Floor::Listening);
    assert!(matches!(
        app.transcript[1],
        Entry::Model {
            status: ModelTurnStatus::Interrupted,
            ..
        }
    ));
}

#[test]
fn esc_quits_only_when_nothing_else_is_open() {
    use crossterm::event::KeyCode;
    let mut app = connected_app();
    press(&mut app, KeyCode::F(1));
    assert!(app.view.popup.is_some());
    assert!(press(&mut app, KeyCode::Esc).is_empty());
    assert!(app.view.popup.is_none() && !app.view.quit);
    type_text(&mut app, "draft");
    assert!(press(&mut app, KeyCode::Esc).is_empty());
    assert!(!app.view.quit, "Esc does not throw away a draft");
    app.view.input.take();
    // The first Esc on an empty line says what the second does.
    assert!(press(&mut app, KeyCode::Esc).is_empty());
    assert!(!app.view.quit);
    assert_eq!(
        app.visible_notice().map(|n| n.text.as_str()),
        Some(ESC_AGAIN_QUITS)
    );
    assert_eq!(
        press(&mut app, KeyCode::Esc),
        vec![Effect::Session(SessionEffect::CloseSession)]
    );
    assert!(app.view.quit);
}

#[test]
fn esc_twice_to_clear_notices_does_not_quit() {
    use crossterm::event::KeyCode;
    let mut app = connected_app();
    app.notice(NoticeLevel::Warning, "first".into());
    app.notice(NoticeLevel::Warning, "second".into());
    // Both notices go with the first Esc; the second only offers to quit.
    press(&mut app, KeyCode::Esc);
    assert!(app.visible_notice().is_none());
    press(&mut app, KeyCode::Esc);
    assert!(!app.view.quit, "two presses to clear notices never quit");
    assert_eq!(
        app.visible_notice().map(|n| n.text.as_str()),
        Some(ESC_AGAIN_QUITS)
    );
    // A notice that arrives in between is what the next Esc clears.
    app.notice(NoticeLevel::Info, "Reconnected.".into());
    press(&mut app, KeyCode::Esc);
    assert!(!app.view.quit);
    // Typing, then Esc from a pane, does not quit either.
    type_text(&mut app, "x");
    press(&mut app, KeyCode::Esc);
    assert!(!app.view.quit);
}

#[test]
fn once_the_session_ended_on_purpose_any_key_leaves() {
    use crossterm::event::KeyCode;
    let mut app = connected_app();
    app.update(Msg::UserText("bye".into()));
    app.update(Msg::Server(ServerEvent::ToolCall(vec![call(
        "e1",
        END_SESSION,
    )])));
    app.update(finished("e1", END_SESSION, ToolStatus::Ok));
    app.update(Msg::Server(ServerEvent::OutputTranscription {
        text: "Goodbye!".into(),
        finished: true,
    }));
    app.update(Msg::Server(ServerEvent::TurnComplete {
        reason: None,
        waiting_for_input: false,
    }));
    app.update(Msg::Server(ServerEvent::Closed(
        CloseInfo::ended_by_client(),
    )));
    assert!(app.ended_cleanly());
    assert_eq!(app.badge(), Badge::Ended);
    assert!(!app.wants_to_quit(), "the goodbye stays to be read");
    assert!(press(&mut app, KeyCode::Char('x')).is_empty());
    assert!(app.wants_to_quit());
    assert!(app.view.input.is_empty(), "the key is not typed");
}

#[test]
fn the_badge_never_says_listening_without_a_connection() {
    let mut app = App::new(AppInit::new("models/test", true, Vec::new()));
    assert_eq!(app.badge(), Badge::Connecting);
    app.update(Msg::Server(ServerEvent::SetupComplete { session_id: None }));
    assert_eq!(app.badge(), Badge::Listening);
    app.update(Msg::UserText("is the lamp on?".into()));
    assert_eq!(app.badge(), Badge::Thinking);
    app.update(Msg::Server(ServerEvent::ToolCall(vec![call(
        "c1",
        "get_device_status",
    )])));
    assert_eq!(app.badge(), Badge::Working);
    app.update(finished("c1", "get_device_status", ToolStatus::Ok));
    assert_eq!(app.badge(), Badge::Thinking, "waiting for the model again");
    app.update(Msg::Server(ServerEvent::ModelText("It is".into())));
    assert_eq!(app.badge(), Badge::Speaking);
    // Lost mid-reply: whatever the floor was, the badge says the link is down.
    for attempt in 1..=3 {
        app.update(reconnecting(false, attempt));
        assert_eq!(app.badge(), Badge::Reconnecting);
    }
    app.update(Msg::Server(ServerEvent::ModelText("late".into())));
    assert_ne!(app.badge(), Badge::Listening);
    app.update(Msg::SessionChange(SessionChange::Reconnected {
        resumed: true,
    }));
    app.update(Msg::Server(ServerEvent::SetupComplete { session_id: None }));
    assert_eq!(app.badge(), Badge::Listening);
    app.update(Msg::GaveUp("The connection was lost for good.".into()));
    assert_eq!(app.badge(), Badge::Disconnected);
    assert_eq!(app.badge().word(), "disconnected");
}

#[test]
fn sending_returns_to_the_bottom_and_end_works_from_an_empty_line() {
    use crossterm::event::KeyCode;
    let mut app = connected_app();
    app.view.layout.transcript.height = 5;
    app.view.layout.transcript_rows = 40;
    press(&mut app, KeyCode::PageUp);
    assert!(app.view.transcript_top.is_some());
    assert_eq!(app.view.focus, Focus::Input);
    press(&mut app, KeyCode::End);
    assert_eq!(
        app.view.transcript_top, None,
        "End from the empty input line"
    );
    press(&mut app, KeyCode::PageUp);
    type_text(&mut app, "hello");
    press(&mut app, KeyCode::Home);
    press(&mut app, KeyCode::End);
    assert!(
        app.view.transcript_top.is_some(),
        "with text, End moves the cursor"
    );
    assert_eq!(app.view.input.cursor(), 5);
    press(&mut app, KeyCode::Enter);
    assert_eq!(app.view.transcript_top, None, "what is sent is in view");
}

fn replaying() -> App {
    App::new(AppInit {
        replay: Some(10),
        ..AppInit::new("models/test", true, Vec::new())
    })
}

#[test]
fn a_replay_quits_with_q_from_every_pane_and_types_nothing() {
    use crossterm::event::KeyCode;
    for presses in 0..4 {
        let mut app = replaying();
        for _ in 0..presses {
            press(&mut app, KeyCode::Tab);
        }
        press(&mut app, KeyCode::Char('h'));
        assert!(app.view.input.is_empty(), "a replay has no line to type in");
        press(&mut app, KeyCode::Char('q'));
        assert!(app.wants_to_quit(), "q quits from {:?}", app.view.focus);
    }
    let app = replaying();
    let footer: Vec<&str> = footer_keys(&app).iter().map(|f| f.key).collect();
    assert_eq!(footer, ["Space", "F1", "n", "q", "+/-", "PgUp/PgDn"]);
    let help: Vec<&str> = help_rows(&app).map(|row| row.keys).collect();
    assert!(help.contains(&"Space") && help.contains(&"n"), "{help:?}");
    assert!(
        !help.contains(&"Enter") && !help.contains(&"Ctrl-B"),
        "{help:?}"
    );
}

#[test]
fn the_footer_offers_only_keys_that_do_something_here() {
    let keys = |app: &App| -> Vec<&str> { footer_keys(app).iter().map(|f| f.key).collect() };
    // No audio: no mute, no barge-in.
    let app = connected_app();
    assert_eq!(keys(&app), ["Enter", "F1", "Ctrl-C", "Tab", "PgUp/PgDn"]);
    assert!(help_rows(&app).all(|row| row.keys != "F3" && row.keys != "F5"));
    // Push-to-talk: its key is offered.
    let app = with_audio(true);
    assert_eq!(
        keys(&app),
        [
            "Enter",
            "F1",
            "Ctrl-C",
            "F3",
            "F5",
            "Ctrl-B",
            "Tab",
            "PgUp/PgDn"
        ]
    );
    let app = with_audio(false);
    assert_eq!(
        keys(&app),
        ["Enter", "F1", "Ctrl-C", "F3", "Ctrl-B", "Tab", "PgUp/PgDn"]
    );
}

#[test]
fn slash_lines_are_commands_or_say_how_to_use_them() {
    let mut app = connected_app();
    for line in ["/system", "/system   ", "/foo bar", "/"] {
        assert_eq!(app.update(Msg::UserText(line.into())), Vec::new(), "{line}");
        let notice = &app.notices().last().unwrap().text;
        assert!(
            notice.contains(&slash_summary()),
            "{line}: the list of commands in {notice:?}"
        );
    }
    assert!(
        app.notices()[0]
            .text
            .starts_with("/system needs the instruction")
    );
    assert!(
        app.notices()[2]
            .text
            .starts_with("There is no command /foo.")
    );
    assert!(app.transcript.is_empty(), "nothing went to the model");
    assert_eq!(
        app.update(Msg::UserText("//system is a word".into())),
        vec![Effect::Session(SessionEffect::SendText(
            "/system is a word".into()
        ))]
    );
}

#[test]
fn q_quits_from_a_pane_and_other_keys_start_typing() {
    use crossterm::event::KeyCode;
    let mut app = connected_app();
    press(&mut app, KeyCode::Tab);
    assert_eq!(app.view.focus, Focus::Transcript);
    press(&mut app, KeyCode::Char('h'));
    assert_eq!(app.view.focus, Focus::Input);
    assert_eq!(app.view.input.text(), "h");
    app.view.input.take();
    press(&mut app, KeyCode::Tab);
    press(&mut app, KeyCode::Tab);
    assert_eq!(app.view.focus, Focus::ToolLog);
    assert_eq!(
        press(&mut app, KeyCode::Char('q')),
        vec![Effect::Session(SessionEffect::CloseSession)]
    );
    assert!(app.view.quit);
}

#[test]
fn tool_failures_become_dismissable_notices() {
    use crossterm::event::KeyCode;
    let mut app = connected_app();
    app.update(Msg::Server(ServerEvent::ToolCall(vec![call(
        "c1",
        "set_device_status",
    )])));
    app.update(finished(
        "c1",
        "set_device_status",
        ToolStatus::Error("no such device".into()),
    ));
    let notice = app.visible_notice().expect("a notice");
    assert_eq!(notice.level, NoticeLevel::Warning);
    assert!(
        notice
            .text
            .contains("set_device_status failed: no such device")
    );
    press(&mut app, KeyCode::Esc);
    assert!(app.visible_notice().is_none());
    assert!(!app.view.quit, "the first Esc only dismissed the notice");
}

#[test]
fn changed_devices_are_highlighted_briefly() {
    let home = crate::tools::SmartHome::new();
    let mut app = App::new(AppInit::new("models/test", true, home.snapshot()));
    let mut devices = home.snapshot();
    devices[0].status = "on".into();
    app.update(Msg::DevicesChanged(devices));
    assert!(app.view.is_highlighted(0));
    assert!(!app.view.is_highlighted(1), "unchanged devices stay plain");
    assert!(app.animating());
    for _ in 0..view::DEVICE_HIGHLIGHT_TICKS {
        app.update(Msg::Tick(std::time::Instant::now()));
    }
    assert!(!app.view.is_highlighted(0));
}

fn reconnecting(planned: bool, attempt: u32) -> Msg {
    Msg::SessionChange(SessionChange::Reconnecting {
        planned,
        attempt,
        reason: "The connection was lost.".into(),
        retry_in: Duration::from_millis(500),
    })
}

#[test]
fn a_lost_connection_interrupts_the_reply_and_typed_input_is_queued_for_the_next() {
    let mut app = connected_app();
    app.update(Msg::UserText("hello".into()));
    app.update(Msg::Server(ServerEvent::ModelText("Hi th".into())));
    assert!(app.update(reconnecting(false, 1)).is_empty());
    assert_eq!(app.connection, ConnectionState::Reconnecting);
    assert_eq!(app.reconnects, 1);
    assert!(matches!(
        app.transcript.last(),
        Some(Entry::Model {
            status: ModelTurnStatus::Interrupted,
            ..
        })
    ));
    assert_eq!(
        app.notices.last().map(|n| (n.level, n.text.as_str())),
        Some((
            NoticeLevel::Warning,
            "Connection lost: The connection was lost. Reconnecting in 0.5 s…"
        ))
    );
    // Further attempts of the same outage are not further reconnects.
    app.update(reconnecting(false, 2));
    assert_eq!(app.reconnects, 1);
    assert!(
        app.notices
            .last()
            .unwrap()
            .text
            .starts_with("Reconnect attempt 2")
    );

    // Typed while reconnecting: shown and handed to the session, which queues it.
    assert_eq!(
        app.update(Msg::UserText("still there?".into())),
        vec![Effect::Session(SessionEffect::SendText(
            "still there?".into()
        ))]
    );
    app.update(Msg::SessionChange(SessionChange::Reconnected {
        resumed: true,
    }));
    app.update(Msg::Server(ServerEvent::SetupComplete { session_id: None }));
    assert_eq!(app.connection, ConnectionState::Connected);
    assert_eq!(
        app.notices.last().map(|n| n.text.as_str()),
        Some("Reconnected; the conversation continues.")
    );
}

#[test]
fn a_planned_hand_over_only_shows_in_the_status_line() {
    let mut app = connected_app();
    let before = app.notices.len();
    app.update(reconnecting(true, 0));
    assert_eq!(app.connection, ConnectionState::Reconnecting);
    assert_eq!(
        app.notices.len(),
        before,
        "no warning for a goAway hand-over"
    );
    // A hand-over is not a fault: the panel counts it apart from reconnects.
    assert_eq!((app.reconnects(), app.handovers()), (0, 1));
    app.update(reconnecting(false, 1));
    assert_eq!(
        (app.reconnects(), app.handovers()),
        (0, 1),
        "a loss during the hand-over is the same move"
    );
}

#[test]
fn a_resent_turn_is_still_awaited_and_a_cut_off_reply_is_not() {
    let mut app = connected_app();
    let reconnected = |app: &mut App| {
        app.update(Msg::SessionChange(SessionChange::Reconnected {
            resumed: true,
        }));
        app.update(Msg::Server(ServerEvent::SetupComplete { session_id: None }));
    };
    app.update(Msg::UserText("hello".into()));
    app.update(reconnecting(false, 1));
    reconnected(&mut app);
    assert!(
        !app.ready_for_user(),
        "the answer to the re-sent turn is coming"
    );

    // The reply starts, then its connection is lost: that reply is over.
    app.update(Msg::Server(ServerEvent::ModelText("Hel".into())));
    app.update(reconnecting(false, 1));
    reconnected(&mut app);
    assert!(app.ready_for_user());
}

#[test]
fn a_turn_typed_just_before_a_hand_over_is_awaited_across_it() {
    // The session may already have moved to the new connection (and reported it) when the turn
    // reaches it; the turn then goes out there, and its reply is still coming.
    let mut app = connected_app();
    app.update(Msg::Server(ServerEvent::ModelText("Done.".into())));
    app.update(Msg::Server(ServerEvent::TurnComplete {
        reason: None,
        waiting_for_input: false,
    }));
    assert!(app.ready_for_user());
    app.update(Msg::UserText("and the door?".into()));
    app.update(reconnecting(true, 0));
    app.update(Msg::SessionChange(SessionChange::Reconnected {
        resumed: true,
    }));
    app.update(Msg::Server(ServerEvent::SetupComplete { session_id: None }));
    assert!(
        !app.ready_for_user(),
        "the reply to the typed turn is coming"
    );
    app.update(Msg::Server(ServerEvent::ModelText("Locked.".into())));
    app.update(Msg::Server(ServerEvent::TurnComplete {
        reason: None,
        waiting_for_input: false,
    }));
    assert!(app.ready_for_user());
}

#[test]
fn the_end_of_a_cut_off_turn_is_not_taken_for_the_reply_to_the_turn_that_cut_it() {
    let mut app = connected_app();
    app.update(Msg::Server(ServerEvent::ModelText("A long story".into())));
    app.update(Msg::UserText("stop, what time is it?".into()));
    // The rest of the old turn, then its interruption and end.
    app.update(Msg::Server(ServerEvent::ModelText(" goes on".into())));
    app.update(Msg::Server(ServerEvent::Interrupted));
    app.update(Msg::Server(ServerEvent::TurnComplete {
        reason: None,
        waiting_for_input: false,
    }));
    assert!(!app.ready_for_user(), "the reply to the new turn is coming");
    app.update(Msg::Server(ServerEvent::ModelText("Noon.".into())));
    app.update(Msg::Server(ServerEvent::TurnComplete {
        reason: None,
        waiting_for_input: false,
    }));
    assert!(app.ready_for_user());
}

#[test]
fn a_call_of_a_lost_connection_is_not_awaited_after_its_answer_is_withheld() {
    let mut app = connected_app();
    app.update(Msg::Server(ServerEvent::ToolCall(vec![call(
        "c1",
        "get_device_status",
    )])));
    app.update(reconnecting(false, 1));
    app.update(Msg::SessionChange(SessionChange::Reconnected {
        resumed: true,
    }));
    app.update(Msg::Server(ServerEvent::SetupComplete { session_id: None }));
    // The answer is still handed to the session (which withholds it), but nothing is awaited.
    let effects = app.update(finished("c1", "get_device_status", ToolStatus::Ok));
    assert!(matches!(
        effects.as_slice(),
        [Effect::Session(SessionEffect::SendToolResponse(_))]
    ));
    app.update(Msg::SessionChange(SessionChange::AnswerDropped {
        id: Some("c1".into()),
        name: "get_device_status".into(),
    }));
    assert!(app.ready_for_user());
    assert!(
        app.notices
            .last()
            .unwrap()
            .text
            .starts_with("The result of get_device_status (c1) was not sent")
    );
}

#[test]
fn a_running_call_is_flagged_once_it_is_slow() {
    let mut app = connected_app();
    app.update(Msg::Server(ServerEvent::ToolCall(vec![call(
        "c1",
        "get_device_status",
    )])));
    let slow = |id: &str| {
        Msg::Tool(ToolEvent::Slow(SlowCall {
            key: None,
            id: Some(id.into()),
            name: "get_device_status".into(),
            elapsed: Duration::from_millis(3400),
        }))
    };
    app.update(slow("c1"));
    assert!(app.tool_calls[0].slow);
    assert_eq!(app.tool_calls[0].state, ToolState::Running);
    assert!(
        app.notices.last().unwrap().text.starts_with(
            "get_device_status has been running for 3.4 s; it is answered with an error"
        )
    );
    app.update(finished("c1", "get_device_status", ToolStatus::TimedOut));
    let notices = app.notices.len();
    app.update(slow("c1"));
    assert_eq!(app.notices.len(), notices, "a finished call is not flagged");
}

#[test]
fn retry_is_offered_only_after_the_link_gave_up() {
    let mut app = connected_app();
    assert!(
        app.update(Msg::Retry).is_empty(),
        "connected: nothing to retry"
    );
    app.update(Msg::Server(ServerEvent::Closed(CloseInfo {
        code: None,
        reason: String::new(),
        message: "Gave up reconnecting after 6 attempts. Last error: refused".into(),
        initiated_by_client: false,
    })));
    assert!(app.can_retry());
    assert_eq!(
        app.update(Msg::Retry),
        vec![Effect::Session(SessionEffect::Reconnect)]
    );
    assert_eq!(app.connection, ConnectionState::Connecting);

    let mut ended = connected_app();
    ended.update(Msg::EndSession);
    ended.update(Msg::Server(ServerEvent::Closed(CloseInfo {
        code: Some(1000),
        reason: String::new(),
        message: "Session ended.".into(),
        initiated_by_client: true,
    })));
    assert!(!ended.can_retry());
    assert!(ended.update(Msg::Retry).is_empty());
}

#[test]
fn a_call_the_server_cancelled_is_not_answered_even_if_it_finished_first() {
    let mut app = connected_app();
    app.update(Msg::Server(ServerEvent::ToolCall(vec![call(
        "c1",
        "get_device_status",
    )])));
    assert_eq!(
        app.update(Msg::Server(ServerEvent::ToolCallCancelled(vec![
            "c1".into()
        ]))),
        vec![Effect::Tools(ToolEffect::CancelTools(vec!["c1".into()]))]
    );
    app.update(Msg::Server(ServerEvent::TurnComplete {
        reason: None,
        waiting_for_input: false,
    }));
    // The dispatcher had already finished it: no answer, nothing awaited.
    assert!(
        app.update(finished("c1", "get_device_status", ToolStatus::Ok))
            .is_empty()
    );
    assert_eq!(app.tool_calls[0].state, ToolState::Cancelled);
    assert!(app.ready_for_user());
}

// ---------------------------------------------------------------------------------------------
// Audio

fn with_audio(push_to_talk: bool) -> App {
    use crate::audio::{AudioEvent, AudioSetup};
    let mut app = connected_app();
    app.audio.enabled = true;
    app.audio.push_to_talk = push_to_talk;
    let effects = app.update(Msg::Audio(
        AudioEvent::Opened(AudioSetup::mic_and_speaker()),
    ));
    assert_eq!(
        effects,
        vec![Effect::Media(MediaEffect::SetMicOpen(!push_to_talk))]
    );
    app
}

fn model_audio(app: &mut App) -> Vec<Effect> {
    app.update(Msg::Server(ServerEvent::ModelAudio {
        pcm: vec![1, 0, 2, 0],
        sample_rate: 24_000,
    }))
}

fn turn_complete(app: &mut App) -> Vec<Effect> {
    app.update(Msg::Server(ServerEvent::TurnComplete {
        reason: None,
        waiting_for_input: false,
    }))
}

#[test]
fn with_a_speaker_gemini_speaks_while_audible_not_while_bytes_arrive() {
    use crate::audio::AudioEvent;
    let mut app = with_audio(false);
    assert_eq!(
        model_audio(&mut app),
        vec![Effect::Media(MediaEffect::PlayAudio(vec![1, 0, 2, 0]))]
    );
    assert_eq!(app.floor, Floor::Listening, "received but not yet heard");
    app.update(Msg::Audio(AudioEvent::Audible(true)));
    assert_eq!(app.floor, Floor::Speaking);
    assert_eq!(
        app.audio.mic_state(),
        MicState::Live,
        "the echo canceller is on by default: the mic stays live to talk over Gemini"
    );
    app.update(Msg::Audio(AudioEvent::Echo(crate::audio::EchoFigures {
        mode: crate::audio::EchoMode::Gate,
        ..Default::default()
    })));
    assert_eq!(app.audio.mic_state(), MicState::Gated, "the echo gate");
    assert_eq!(
        turn_complete(&mut app),
        vec![Effect::Media(MediaEffect::EndPlaybackTurn)]
    );
    assert_eq!(app.floor, Floor::Speaking, "the tail is still playing");
    assert!(
        !app.ready_for_user(),
        "headless must not end before the tail is heard"
    );
    app.update(Msg::Audio(AudioEvent::Audible(false)));
    assert_eq!(app.floor, Floor::Listening);
    assert!(app.ready_for_user());
    assert_eq!(app.audio.mic_state(), MicState::Live);
}

#[test]
fn without_a_speaker_the_wire_drives_speaking_and_no_audio_is_played() {
    let mut app = connected_app();
    assert_eq!(model_audio(&mut app), Vec::new());
    assert_eq!(app.floor, Floor::Speaking);
    turn_complete(&mut app);
    assert_eq!(app.floor, Floor::Listening);
}

#[test]
fn server_interrupt_stops_playback_at_once() {
    use crate::audio::AudioEvent;
    let mut app = with_audio(false);
    model_audio(&mut app);
    app.update(Msg::Audio(AudioEvent::Audible(true)));
    let effects = app.update(Msg::Server(ServerEvent::Interrupted));
    assert_eq!(effects, vec![Effect::Media(MediaEffect::StopPlayback)]);
    assert_eq!(app.floor, Floor::Listening);
    assert!(matches!(
        app.transcript.last(),
        Some(Entry::Model {
            status: ModelTurnStatus::Interrupted,
            ..
        })
    ));
}

/// A speaker open, and Gemini heard in the middle of "Here is a long…".
fn heard_mid_reply() -> App {
    use crate::audio::AudioEvent;
    let mut app = with_audio(false);
    app.update(Msg::Server(ServerEvent::OutputTranscription {
        text: "Here is a long".into(),
        finished: false,
    }));
    model_audio(&mut app);
    app.update(Msg::Audio(AudioEvent::Audible(true)));
    app
}

#[test]
fn barge_in_key_silences_and_drops_the_rest_of_the_turn() {
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    let mut app = heard_mid_reply();
    // The key is an intent, so a recording holds the barge-in, not the key.
    let effects = app.update(Msg::Key(KeyEvent::new(
        KeyCode::Char('b'),
        KeyModifiers::CONTROL,
    )));
    assert_eq!(effects, vec![Effect::Intent(Msg::BargeIn)]);
    let effects = app.update(Msg::BargeIn);
    assert_eq!(effects, vec![Effect::Media(MediaEffect::StopPlayback)]);
    assert_eq!(app.floor, Floor::Listening);
    // The rest of that turn is neither played nor shown.
    assert_eq!(model_audio(&mut app), Vec::new());
    app.update(Msg::Server(ServerEvent::OutputTranscription {
        text: " answer nobody hears".into(),
        finished: false,
    }));
    assert_eq!(
        app.transcript.last(),
        Some(&Entry::Model {
            text_parts: String::new(),
            transcript: "Here is a long".into(),
            status: ModelTurnStatus::Interrupted,
            echo_suspected: false,
            grounding: Default::default(),
        })
    );
    // The next turn is heard again.
    turn_complete(&mut app);
    assert_eq!(
        model_audio(&mut app),
        vec![Effect::Media(MediaEffect::PlayAudio(vec![1, 0, 2, 0]))]
    );
}

#[test]
fn typing_while_gemini_is_heard_barges_in_before_sending() {
    use crate::audio::AudioEvent;
    let mut app = with_audio(false);
    model_audio(&mut app);
    app.update(Msg::Audio(AudioEvent::Audible(true)));
    let effects = app.update(Msg::UserText("stop, please".into()));
    assert_eq!(
        effects,
        vec![
            Effect::Media(MediaEffect::StopPlayback),
            Effect::Session(SessionEffect::SendText("stop, please".into()))
        ]
    );
}

#[test]
fn mute_closes_the_mic_and_tells_the_server_the_stream_ended() {
    use crossterm::event::KeyCode;
    let mut app = with_audio(false);
    assert_eq!(
        press(&mut app, KeyCode::F(3)),
        vec![
            Effect::Media(MediaEffect::SetMicOpen(false)),
            Effect::Session(SessionEffect::SendAudioStreamEnd)
        ]
    );
    assert_eq!(app.audio.mic_state(), MicState::Muted);
    assert_eq!(
        press(&mut app, KeyCode::F(3)),
        vec![Effect::Media(MediaEffect::SetMicOpen(true))]
    );
    assert_eq!(app.audio.mic_state(), MicState::Live);
}

#[test]
fn push_to_talk_brackets_speech_with_activity_signals() {
    use crate::audio::AudioEvent;
    use crossterm::event::KeyCode;
    let mut app = with_audio(true);
    assert_eq!(app.audio.mic_state(), MicState::PushToTalk);
    assert_eq!(
        press(&mut app, KeyCode::F(5)),
        vec![
            Effect::Media(MediaEffect::SetMicOpen(true)),
            Effect::Session(SessionEffect::SendActivityStart)
        ]
    );
    assert_eq!(app.audio.mic_state(), MicState::Talking);
    assert_eq!(
        press(&mut app, KeyCode::F(5)),
        vec![
            Effect::Media(MediaEffect::SetMicOpen(false)),
            Effect::Session(SessionEffect::SendActivityEnd)
        ]
    );
    // Talking over Gemini interrupts it first.
    model_audio(&mut app);
    app.update(Msg::Audio(AudioEvent::Audible(true)));
    assert_eq!(
        press(&mut app, KeyCode::F(5)),
        vec![
            Effect::Media(MediaEffect::StopPlayback),
            Effect::Media(MediaEffect::SetMicOpen(true)),
            Effect::Session(SessionEffect::SendActivityStart)
        ]
    );
}

#[test]
fn no_device_is_said_once_and_a_failing_device_can_be_reopened() {
    use crate::audio::{AudioEvent, AudioSetup, Direction};
    use crossterm::event::KeyCode;
    let mut app = connected_app();
    app.audio.enabled = true;
    app.update(Msg::Audio(AudioEvent::Opened(AudioSetup {
        input: None,
        output: None,
        problems: vec!["microphone: no default microphone".into()],
    })));
    assert_eq!(app.notices.len(), 1);
    assert!(app.notices[0].text.starts_with("No audio device"));
    // A device error's own full stop is not doubled.
    let mut half = connected_app();
    half.audio.enabled = true;
    half.update(Msg::Audio(AudioEvent::Opened(AudioSetup {
        input: Some(crate::audio::StreamInfo {
            name: "mic".into(),
            path: "48 kHz → 16 kHz".into(),
        }),
        output: None,
        problems: vec!["speaker: default: The requested audio device is not available.".into()],
    })));
    assert_eq!(
        half.notices[0].text,
        "Audio: speaker: default: The requested audio device is not available."
    );
    assert_eq!(app.audio.mic_state(), MicState::Off);
    // Text chat still works.
    assert_eq!(
        app.update(Msg::UserText("hello".into())),
        vec![Effect::Session(SessionEffect::SendText("hello".into()))]
    );

    let mut app = with_audio(false);
    app.update(Msg::Audio(AudioEvent::DeviceFailed {
        direction: Direction::Output,
        message: "the device was unplugged".into(),
    }));
    assert!(app.audio.output.is_none());
    let notice = &app.notices.last().unwrap().text;
    assert!(
        notice.contains("speaker") && notice.contains("F6"),
        "{notice}"
    );
    assert_eq!(
        press(&mut app, KeyCode::F(6)),
        vec![Effect::Media(MediaEffect::ReopenAudio)]
    );
}

#[test]
fn a_full_output_wav_is_one_warning() {
    let mut app = with_audio(false);
    app.update(Msg::Audio(crate::audio::AudioEvent::OutputWavFull {
        path: "answer.wav".into(),
        max_bytes: 2 << 20,
    }));
    assert_eq!(
        app.notices,
        vec![Notice {
            level: NoticeLevel::Warning,
            text: "answer.wav reached its size cap of 2.0 MiB; the rest of the model's audio is not written to it (--output-wav-max-mb, audio.output_wav_max_mb).".into(),
        }]
    );
}

/// The self-interruption detector's verdict, as the audio worker reports it.
fn echo_heard(app: &mut App, heard: bool) {
    use crate::audio::{AudioEvent, EchoFigures, EchoMode};
    app.update(Msg::Audio(AudioEvent::Echo(EchoFigures {
        mode: EchoMode::Aec,
        cancelling: true,
        far_end_secs: 2.0,
        echo_heard: heard,
        ..EchoFigures::default()
    })));
}

/// Whether the latest model entry ended interrupted, and flagged as possibly Gemini's echo.
fn last_interruption(app: &App) -> Option<bool> {
    match app.transcript.last() {
        Some(Entry::Model {
            status: ModelTurnStatus::Interrupted,
            echo_suspected,
            ..
        }) => Some(*echo_suspected),
        _ => None,
    }
}

#[test]
fn the_services_interruption_while_gemini_is_loud_and_echoed_is_flagged() {
    let mut app = heard_mid_reply();
    echo_heard(&mut app, true);
    let effects = app.update(Msg::Server(ServerEvent::Interrupted));
    assert_eq!(effects, vec![Effect::Media(MediaEffect::StopPlayback)]);
    assert_eq!(last_interruption(&app), Some(true));
    // The next reply starts unflagged, and a later interruption is judged on its own.
    echo_heard(&mut app, false);
    model_audio(&mut app);
    app.update(Msg::Audio(crate::audio::AudioEvent::Audible(true)));
    app.update(Msg::Server(ServerEvent::Interrupted));
    assert_eq!(last_interruption(&app), Some(false));
    assert_eq!(
        app.transcript
            .iter()
            .filter(|e| matches!(
                e,
                Entry::Model {
                    echo_suspected: true,
                    ..
                }
            ))
            .count(),
        1
    );
}

#[test]
fn an_interruption_after_real_speech_is_not_flagged() {
    // The detector heard no echo: the user spoke over Gemini.
    let mut app = heard_mid_reply();
    echo_heard(&mut app, false);
    app.update(Msg::Server(ServerEvent::Interrupted));
    assert_eq!(last_interruption(&app), Some(false));

    // Echo heard a moment ago, but Gemini was not being heard when the service cut in.
    let mut app = with_audio(false);
    model_audio(&mut app);
    echo_heard(&mut app, true);
    app.update(Msg::Server(ServerEvent::Interrupted));
    assert_eq!(last_interruption(&app), Some(false));
}

#[test]
fn the_audio_workers_verdict_at_the_moment_it_silences_the_speaker_decides() {
    use crate::audio::AudioEvent;
    // The last report said nothing yet (the echo began a moment ago): the worker's verdict,
    // given once it has silenced the speaker, flags the interrupted reply.
    for (verdict, flagged) in [(true, true), (false, false)] {
        let mut app = heard_mid_reply();
        echo_heard(&mut app, false);
        app.update(Msg::Server(ServerEvent::Interrupted));
        let index = app.transcript.len() - 1;
        assert!(
            app.echo_check_pending(index),
            "the reply waits for the verdict"
        );
        app.update(Msg::Audio(AudioEvent::Silenced {
            echo_heard: verdict,
        }));
        assert!(!app.echo_check_pending(index));
        assert_eq!(last_interruption(&app), Some(flagged));
        // A later flush (a barge-in) changes nothing.
        app.update(Msg::Audio(AudioEvent::Silenced { echo_heard: true }));
        assert_eq!(last_interruption(&app), Some(flagged));
    }
    // A speaker that fails before the verdict: the reply is not held back for ever.
    let mut app = heard_mid_reply();
    app.update(Msg::Server(ServerEvent::Interrupted));
    app.update(Msg::Audio(AudioEvent::DeviceFailed {
        direction: crate::audio::Direction::Output,
        message: "unplugged".into(),
    }));
    assert!(!app.echo_check_pending(app.transcript.len() - 1));
    assert_eq!(last_interruption(&app), Some(false));
}

#[test]
fn a_local_barge_in_is_not_flagged_when_the_service_confirms_it() {
    let mut app = heard_mid_reply();
    echo_heard(&mut app, true);
    assert_eq!(
        app.update(Msg::BargeIn),
        vec![Effect::Media(MediaEffect::StopPlayback)]
    );
    assert_eq!(last_interruption(&app), Some(false));
    app.update(Msg::Server(ServerEvent::Interrupted));
    assert_eq!(last_interruption(&app), Some(false));
}

#[test]
fn the_echo_key_steps_through_the_modes_and_switches_the_worker() {
    use crate::audio::{AudioEvent, EchoMode};
    use crossterm::event::KeyCode;
    let mut app = heard_mid_reply();
    assert_eq!(app.audio.echo, EchoMode::Aec);
    assert_eq!(app.audio.mic_state(), MicState::Live);
    // The key is an intent carrying the mode, so a recording holds the switch.
    let key = crossterm::event::KeyEvent::new(KeyCode::F(9), crossterm::event::KeyModifiers::NONE);
    assert_eq!(
        app.update(Msg::Key(key)),
        vec![Effect::Intent(Msg::SetEcho(EchoMode::Gate))]
    );
    assert_eq!(
        app.update(Msg::SetEcho(EchoMode::Gate)),
        vec![Effect::Media(MediaEffect::SetEcho(EchoMode::Gate))]
    );
    assert_eq!(app.audio.echo, EchoMode::Gate);
    assert_eq!(app.audio.mic_state(), MicState::Gated, "shown at once");
    assert_eq!(
        app.notices.last().map(|n| n.text.as_str()),
        Some("Echo handling: gate — the mic sends silence while Gemini is heard")
    );
    assert_eq!(
        press(&mut app, KeyCode::F(9)),
        vec![Effect::Media(MediaEffect::SetEcho(EchoMode::Off))]
    );
    assert_eq!(app.audio.mic_state(), MicState::Live);
    assert_eq!(
        press(&mut app, KeyCode::F(9)),
        vec![Effect::Media(MediaEffect::SetEcho(EchoMode::Aec))]
    );
    // The worker's figures have the last word on the mode.
    app.update(Msg::Audio(AudioEvent::Echo(crate::audio::EchoFigures {
        mode: EchoMode::Gate,
        ..Default::default()
    })));
    assert_eq!(
        press(&mut app, KeyCode::F(9)),
        vec![Effect::Media(MediaEffect::SetEcho(EchoMode::Off))]
    );
    // The help lists the key the binding uses.
    let row = KEY_MAP
        .iter()
        .find(|row| row.keys == ECHO_KEY)
        .expect("the echo key's row");
    assert!(row.bindings.iter().any(|(_, chord, action)| {
        *action == Action::SwitchEcho && chord.code == KeyCode::F(9)
    }));

    // With audio off there is nothing to switch: the key says why.
    let mut app = connected_app();
    assert_eq!(press(&mut app, KeyCode::F(9)), Vec::new());
    assert!(app.notices.last().unwrap().text.starts_with("Audio is off"));
}

#[test]
fn a_replayed_call_shows_the_time_it_arrived_not_the_clock() {
    let mut app = connected_app();
    app.clock = || jiff::civil::time(23, 59, 0, 0);
    let then = jiff::civil::time(3, 4, 5, 0);
    let effects = app.update(Msg::Replayed {
        event: ServerEvent::ToolCall(vec![call("c1", "get_device_status")]),
        arrived_at: then,
    });
    // Applied like a live event otherwise.
    assert_eq!(
        effects,
        vec![Effect::Tools(ToolEffect::RunTools(keyed(vec![call(
            "c1",
            "get_device_status"
        )])))]
    );
    app.update(Msg::Server(ServerEvent::ToolCall(vec![call(
        "c2",
        "get_device_status",
    )])));
    let times: Vec<_> = app.tool_calls.iter().map(|c| c.started_at).collect();
    assert_eq!(times, [then, jiff::civil::time(23, 59, 0, 0)]);
}

#[test]
fn ending_mid_reply_cuts_the_reply_where_it_is_and_silences_it() {
    let mut app = heard_mid_reply();
    let effects = app.update(Msg::EndSession);
    assert_eq!(
        effects,
        vec![
            Effect::Media(MediaEffect::StopPlayback),
            Effect::Session(SessionEffect::CloseSession)
        ]
    );
    // What streams in before the server closes is neither shown nor played.
    assert_eq!(model_audio(&mut app), Vec::new());
    app.update(Msg::Server(ServerEvent::OutputTranscription {
        text: " answer".into(),
        finished: false,
    }));
    app.update(Msg::Server(ServerEvent::Closed(
        CloseInfo::ended_by_client(),
    )));
    let models: Vec<&Entry> = app
        .transcript
        .iter()
        .filter(|e| matches!(e, Entry::Model { .. }))
        .collect();
    assert_eq!(
        models,
        [&Entry::Model {
            text_parts: String::new(),
            transcript: "Here is a long".into(),
            status: ModelTurnStatus::Interrupted,
            echo_suspected: false,
            grounding: Default::default(),
        }]
    );
    assert!(app.ended_cleanly());
}

/// 3.8 Live: a turn marked `IN_PROGRESS` at its `turnComplete` goes on (a tool call and the
/// rest of the reply follow); the app is ready for the user only at `IDLE`.
#[test]
fn on_asynchronous_turns_the_model_is_done_only_at_idle() {
    let mut app = connected_app();
    app.update(Msg::UserText("Is the lamp on?".into()));
    let turn_complete = || {
        Msg::Server(ServerEvent::TurnComplete {
            reason: None,
            waiting_for_input: false,
        })
    };
    app.update(Msg::Server(ServerEvent::ModelText("One moment.".into())));
    app.update(Msg::Server(ServerEvent::Interaction { idle: false }));
    app.update(turn_complete());
    assert!(app.model_working());
    assert!(!app.ready_for_user(), "the interaction is in progress");
    app.update(Msg::Server(ServerEvent::ToolCall(vec![call(
        "c1",
        "get_device_status",
    )])));
    app.update(finished("c1", "get_device_status", ToolStatus::Ok));
    app.update(Msg::Server(ServerEvent::ModelText("It is off.".into())));
    assert!(!app.ready_for_user());
    app.update(Msg::Server(ServerEvent::Interaction { idle: true }));
    app.update(turn_complete());
    assert!(!app.model_working());
    assert!(app.ready_for_user());
}

#[test]
fn a_system_command_changes_the_instruction_in_place() {
    let mut app = connected_app();
    assert_eq!(
        app.update(Msg::UserText("/system  Answer briefly. ".into())),
        vec![Effect::Session(SessionEffect::SendInstruction(
            "Answer briefly.".into()
        ))]
    );
    assert!(app.ready_for_user(), "no reply is awaited");
    assert!(app.transcript.is_empty());
    assert!(app.notices()[0].text.contains("Answer briefly."));
    // Not a command the app knows: said so, not sent.
    assert!(app.update(Msg::UserText("/systematic".into())).is_empty());
    assert!(
        app.notices()
            .last()
            .is_some_and(|n| n.text.starts_with("There is no command /systematic."))
    );
}

/// Two calls of which the first (`c1`, key 0) waits for the user.
fn app_with_a_waiting_call() -> App {
    let mut app = connected_app();
    app.update(Msg::UserText("turn on the lamp and check it".into()));
    app.update(Msg::Server(ServerEvent::ToolCall(vec![
        call("c1", "set_device_status"),
        call("c2", "get_device_status"),
    ])));
    app.update(Msg::Tool(ToolEvent::Waiting(crate::tools::WaitingCall {
        key: CallKey(0),
        id: Some("c1".into()),
        name: "set_device_status".into(),
    })));
    app
}

fn verdict(verdict: Verdict) -> Effect {
    Effect::Tools(ToolEffect::ToolVerdict {
        key: CallKey(0),
        verdict,
    })
}

#[test]
fn a_waiting_call_is_shown_and_keeps_the_turn_open() {
    let app = app_with_a_waiting_call();
    assert_eq!(app.tool_calls[0].state, ToolState::Waiting);
    assert_eq!(app.tool_calls[0].state.label(), "waiting for you");
    assert_eq!(app.tool_calls[1].state, ToolState::Running);
    assert_eq!(app.first_waiting_call(), Some(0));
    assert_eq!(app.running_tools(), 2, "a waiting call is not answered yet");
    assert!(!app.ready_for_user());
    let notice = app.visible_notice().map(|n| n.text.as_str()).unwrap_or("");
    assert!(
        notice.starts_with("set_device_status waits for you: F7"),
        "{notice}"
    );
}

#[test]
fn approve_from_the_tool_log_is_an_intent_the_dispatcher_gets() {
    use crossterm::event::KeyCode;
    let mut app = app_with_a_waiting_call();
    // 'a' in the input line is just a letter.
    assert!(press(&mut app, KeyCode::Char('a')).is_empty());
    assert_eq!(app.view.input.text(), "a");
    press(&mut app, KeyCode::Esc);
    press(&mut app, KeyCode::Backspace);
    press(&mut app, KeyCode::F(7));
    assert_eq!(app.view.focus, Focus::ToolLog);
    assert_eq!(app.view.tool_selected, Some(0));
    let effects = app.update(Msg::Key(crossterm::event::KeyEvent::new(
        KeyCode::Char('a'),
        crossterm::event::KeyModifiers::NONE,
    )));
    assert_eq!(
        effects,
        vec![Effect::Intent(Msg::ToolVerdict {
            key: CallKey(0),
            verdict: Verdict::Approve
        })],
        "the verdict is recorded as an intent, not as keys"
    );
    let Effect::Intent(msg) = effects[0].clone() else {
        unreachable!()
    };
    assert_eq!(app.update(msg), vec![verdict(Verdict::Approve)]);
    assert_eq!(app.tool_calls[0].state, ToolState::Running);
    // Approving twice does nothing: the call is no longer waiting.
    assert!(press(&mut app, KeyCode::Char('a')).is_empty());
    let effects = app.update(finished("c1", "set_device_status", ToolStatus::Ok));
    assert!(matches!(
        &effects[..],
        [Effect::Session(SessionEffect::SendToolResponse(_))]
    ));
    assert_eq!(app.tool_calls[0].state, ToolState::Ok);
}

#[test]
fn deny_refuses_and_the_refusal_is_what_the_model_gets() {
    use crossterm::event::KeyCode;
    let mut app = app_with_a_waiting_call();
    press(&mut app, KeyCode::F(7));
    assert_eq!(
        press(&mut app, KeyCode::Char('d')),
        vec![verdict(Verdict::Deny)]
    );
    assert_eq!(
        app.tool_calls[0].state,
        ToolState::Waiting,
        "answered when the dispatcher reports it"
    );
    let refusal = "The user declined to run set_device_status, so it was not called.";
    let effects = app.update(finished(
        "c1",
        "set_device_status",
        ToolStatus::Refused(refusal.into()),
    ));
    assert!(matches!(
        &effects[..],
        [Effect::Session(SessionEffect::SendToolResponse(_))]
    ));
    assert_eq!(app.tool_calls[0].state, ToolState::Refused(refusal.into()));
    assert_eq!(app.tool_calls[0].state.label(), "refused");
}

#[test]
fn edited_arguments_are_checked_as_json_and_the_editor_stays_open_until_they_are_good() {
    use crossterm::event::KeyCode;
    let mut app = app_with_a_waiting_call();
    press(&mut app, KeyCode::F(7));
    press(&mut app, KeyCode::Char('e'));
    let editor = app.view.editor.clone().expect("the editor is open");
    assert_eq!(editor.purpose, EditorPurpose::Arguments);
    assert_eq!(editor.line.text(), r#"{"device_name":"living room lamp"}"#);
    // Ctrl-U clears the line; q and ? are text in the editor, not quit and help.
    app.update(Msg::Key(crossterm::event::KeyEvent::new(
        KeyCode::Char('u'),
        crossterm::event::KeyModifiers::CONTROL,
    )));
    type_text(&mut app, r#"{"device_name": "q?", "new_status": }"#);
    assert!(!app.wants_to_quit() && app.view.popup.is_none());
    assert!(press(&mut app, KeyCode::Enter).is_empty());
    let editor = app.view.editor.clone().expect("still open");
    let problem = editor.problem.unwrap_or_default();
    assert!(
        problem.starts_with("Not valid JSON") && problem.contains("column"),
        "{problem}"
    );
    // Fix it: remove the closing brace and the space, then finish the value.
    press(&mut app, KeyCode::Backspace);
    press(&mut app, KeyCode::Backspace);
    type_text(&mut app, r#""off"}"#);
    let edited = json!({"device_name": "q?", "new_status": "off"});
    assert_eq!(
        press(&mut app, KeyCode::Enter),
        vec![verdict(Verdict::Edit(edited.clone()))]
    );
    assert!(app.view.editor.is_none());
    assert_eq!(app.tool_calls[0].state, ToolState::Running);
    assert_eq!(app.tool_calls[0].args, edited);
    assert_eq!(
        app.tool_calls[0].edited_from,
        Some(json!({"device_name": "living room lamp"}))
    );
}

#[test]
fn any_open_call_can_be_answered_by_hand_and_an_answered_one_cannot() {
    use crossterm::event::KeyCode;
    let mut app = app_with_a_waiting_call();
    press(&mut app, KeyCode::F(7));
    // The running call (c2) is answered with a one-key error.
    press(&mut app, KeyCode::Down);
    assert_eq!(app.view.tool_selected, Some(1));
    press(&mut app, KeyCode::Char('r'));
    assert_eq!(
        app.view.editor.as_ref().map(|e| e.purpose),
        Some(EditorPurpose::Result)
    );
    type_text(&mut app, "error: garage on fire");
    assert_eq!(
        press(&mut app, KeyCode::Enter),
        vec![Effect::Tools(ToolEffect::ToolVerdict {
            key: CallKey(1),
            verdict: Verdict::Answer(json!({"error": "garage on fire"})),
        })]
    );
    // Esc closes the editor and sends nothing.
    press(&mut app, KeyCode::Up);
    press(&mut app, KeyCode::Char('r'));
    type_text(&mut app, "plain words");
    assert!(press(&mut app, KeyCode::Esc).is_empty());
    assert!(app.view.editor.is_none());
    // The waiting one gets plain text, sent as a result.
    press(&mut app, KeyCode::Char('r'));
    type_text(&mut app, "the lamp is purple now");
    assert_eq!(
        press(&mut app, KeyCode::Enter),
        vec![verdict(Verdict::Answer(
            json!({"result": "the lamp is purple now"})
        ))]
    );
    let effects = app.update(finished("c1", "set_device_status", ToolStatus::ByHand));
    assert!(matches!(
        &effects[..],
        [Effect::Session(SessionEffect::SendToolResponse(_))]
    ));
    assert_eq!(app.tool_calls[0].state, ToolState::ByHand);
    // Answered: exactly once, so no editor and no verdict any more.
    assert!(press(&mut app, KeyCode::Char('r')).is_empty());
    assert!(app.view.editor.is_none());
    assert!(
        app.update(Msg::ToolVerdict {
            key: CallKey(0),
            verdict: Verdict::Answer(json!({"result": "again"})),
        })
        .is_empty()
    );
}

#[test]
fn a_cancel_while_waiting_ends_the_wait_unanswered() {
    let mut app = app_with_a_waiting_call();
    assert_eq!(
        app.update(Msg::Server(ServerEvent::ToolCallCancelled(vec![
            "c1".into()
        ]))),
        vec![Effect::Tools(ToolEffect::CancelTools(vec!["c1".into()]))]
    );
    let effects = app.update(Msg::Tool(ToolEvent::Cancelled {
        key: Some(CallKey(0)),
        id: "c1".into(),
        name: "set_device_status".into(),
        duration: Duration::from_millis(900),
    }));
    assert!(effects.is_empty());
    assert_eq!(app.tool_calls[0].state, ToolState::Cancelled);
    assert!(
        app.update(Msg::ToolVerdict {
            key: CallKey(0),
            verdict: Verdict::Approve,
        })
        .is_empty(),
        "a verdict after the cancel changes nothing"
    );
}

#[test]
fn a_replay_shows_verdicts_but_offers_no_editor() {
    use crossterm::event::KeyCode;
    let mut app = App::new(AppInit {
        replay: Some(10),
        ..AppInit::new("models/test", true, Vec::new())
    });
    app.update(Msg::Server(ServerEvent::SetupComplete { session_id: None }));
    app.update(Msg::Server(ServerEvent::ToolCall(vec![call(
        "c1",
        "set_device_status",
    )])));
    app.update(Msg::Tool(ToolEvent::Waiting(crate::tools::WaitingCall {
        key: CallKey(0),
        id: Some("c1".into()),
        name: "set_device_status".into(),
    })));
    press(&mut app, KeyCode::F(7));
    assert!(press(&mut app, KeyCode::Char('a')).is_empty());
    press(&mut app, KeyCode::Char('e'));
    assert!(app.view.editor.is_none());
    // The recorded verdict is applied as it was.
    app.update(Msg::ToolVerdict {
        key: CallKey(0),
        verdict: Verdict::Edit(json!({"device_name": "front door lock"})),
    });
    assert_eq!(app.tool_calls[0].state, ToolState::Running);
    assert_eq!(
        app.tool_calls[0].args,
        json!({"device_name": "front door lock"})
    );
}

/// A frame `ms` into the session: a client message if `sent`, else a server message.
fn wire(base: std::time::Instant, ms: u64, sent: bool, message: serde_json::Value) -> WireFrame {
    use std::sync::Arc;
    let body = if sent {
        WireBody::Sent(Arc::new(serde_json::from_value(message).unwrap()))
    } else {
        WireBody::received(serde_json::from_value(message).unwrap())
    };
    WireFrame {
        at: base + Duration::from_millis(ms),
        bytes: 100,
        handshake: false,
        elided: 0,
        missed_before: 0,
        body,
    }
}

fn mic_frame(base: std::time::Instant, ms: u64) -> WireFrame {
    let audio = json!({"realtimeInput": {"audio": {"mimeType": "audio/pcm;rate=16000", "data": "AAAAAAAA"}}});
    wire(base, ms, true, audio)
}

fn model_audio_frame(base: std::time::Instant, ms: u64) -> WireFrame {
    let audio = json!({"serverContent": {"modelTurn": {"parts": [{"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": "AAAAAAAAAAAA"}}]}}});
    wire(base, ms, false, audio)
}

#[test]
fn the_inspector_opens_by_f12_or_events_and_the_source_hears_of_it() {
    use crossterm::event::KeyCode;
    let mut app = connected_app();
    assert_eq!(
        press(&mut app, KeyCode::F(12)),
        [Effect::Session(SessionEffect::WatchWire(true))]
    );
    assert!(app.inspecting());
    assert_eq!(
        press(&mut app, KeyCode::Esc),
        [Effect::Session(SessionEffect::WatchWire(false))]
    );
    assert!(!app.inspecting());
    // Typed: nothing is sent, and the line is not kept in the box.
    type_text(&mut app, "/events");
    assert_eq!(
        press(&mut app, KeyCode::Enter),
        [Effect::Session(SessionEffect::WatchWire(true))]
    );
    assert!(app.inspecting() && app.view.input.is_empty());
    assert!(app.transcript.is_empty());
    // Whatever replaces it closes it, and says so.
    assert_eq!(
        press(&mut app, KeyCode::F(1)),
        [Effect::Session(SessionEffect::WatchWire(false))]
    );
    assert!(matches!(app.view.popup, Some(Popup::Help { .. })));
    press(&mut app, KeyCode::Esc);
    assert_eq!(
        press(&mut app, KeyCode::F(12)),
        [Effect::Session(SessionEffect::WatchWire(true))]
    );
    assert_eq!(
        press(&mut app, KeyCode::F(12)),
        [Effect::Session(SessionEffect::WatchWire(false))]
    );
    // `/help` opens the help; headless, which has no screen, is told what the commands are.
    type_text(&mut app, "/help");
    assert!(press(&mut app, KeyCode::Enter).is_empty());
    assert!(matches!(app.view.popup, Some(Popup::Help { .. })));
    assert!(app.update(Msg::UserText("/events".into())).is_empty());
    let notice = &app.notices.last().unwrap().text;
    assert!(notice.contains("F12"), "{notice}");
}

#[test]
fn the_inspector_follows_the_newest_frame_until_the_user_selects_one() {
    use crossterm::event::KeyCode;
    let base = std::time::Instant::now();
    let mut app = connected_app();
    let text = |ms, text: &str| {
        wire(
            base,
            ms,
            true,
            json!({"clientContent": {"turns": [{"role": "user", "parts": [{"text": text}]}], "turnComplete": true}}),
        )
    };
    for (ms, line) in [(0, "one"), (10, "two"), (20, "three")] {
        app.update(Msg::Wire(text(ms, line)));
    }
    press(&mut app, KeyCode::F(12));
    let summary = |app: &App| {
        let rows = app.inspector_rows();
        rows[app.inspector_selected(&rows).unwrap()].summary.clone()
    };
    assert_eq!(summary(&app), "\"three\"");
    app.update(Msg::Wire(text(30, "four")));
    assert_eq!(summary(&app), "\"four\"", "it follows the newest");
    press(&mut app, KeyCode::Up);
    press(&mut app, KeyCode::Up);
    assert_eq!(summary(&app), "\"two\"");
    app.update(Msg::Wire(text(40, "five")));
    assert_eq!(summary(&app), "\"two\"", "the selection stays put");
    press(&mut app, KeyCode::Home);
    assert_eq!(summary(&app), "\"one\"");
    press(&mut app, KeyCode::End);
    app.update(Msg::Wire(text(50, "six")));
    assert_eq!(summary(&app), "\"six\"", "End follows the newest again");
    // Going down to the newest follows too.
    press(&mut app, KeyCode::Up);
    press(&mut app, KeyCode::Down);
    app.update(Msg::Wire(text(60, "seven")));
    assert_eq!(summary(&app), "\"seven\"");
}

#[test]
fn audio_frames_fold_into_runs_one_way_each_until_another_frame() {
    let base = std::time::Instant::now();
    let mut app = connected_app();
    for i in 0..4 {
        app.update(Msg::Wire(mic_frame(base, i * 20)));
        app.update(Msg::Wire(model_audio_frame(base, i * 20 + 5)));
    }
    // The words of the model's speech go with its audio.
    for (ms, word) in [(90, "The"), (95, "lamp")] {
        let said = json!({"serverContent": {"outputTranscription": {"text": word}}});
        app.update(Msg::Wire(wire(base, ms, false, said)));
    }
    let done = json!({"serverContent": {"turnComplete": true}});
    app.update(Msg::Wire(wire(base, 100, false, done)));
    app.update(Msg::Wire(mic_frame(base, 120)));
    let rows = wire_rows(app.wire(), WireFilter::All);
    let shown: Vec<(Direction, usize, String)> = rows
        .iter()
        .map(|r| (r.direction, r.frames, r.summary.clone()))
        .collect();
    assert_eq!(
        shown,
        [
            // Four frames of six bytes (three samples at 16 kHz) each; nine at 24 kHz.
            (Direction::Sent, 4, "audio ×4 · 0 ms".to_owned()),
            (
                Direction::Received,
                6,
                "audio ×6 · 0 ms · said \"The lamp\"".to_owned()
            ),
            (Direction::Received, 1, String::new()),
            (Direction::Sent, 1, "audio 0 ms".to_owned()),
        ]
    );
    assert_eq!(rows[2].kind, "serverContent turnComplete");
    assert_eq!(rows[0].bytes, 400);
    assert_eq!(
        rows[1].audio,
        Some(Duration::from_secs_f64(4.0 * 9.0 / 2.0 / 24_000.0))
    );
    // Only conversation: the runs; only tools: nothing of them.
    assert_eq!(wire_rows(app.wire(), WireFilter::Conversation).len(), 4);
    assert_eq!(rows[1].said, "The lamp");
    assert!(wire_rows(app.wire(), WireFilter::Tools).is_empty());
}

#[test]
fn y_copies_the_selected_frame_or_a_tool_call_with_its_response() {
    use crossterm::event::KeyCode;
    livetalk_live::redact::remember("inspector-copy-secret-5521");
    let base = std::time::Instant::now();
    let mut app = connected_app();
    app.update(Msg::Server(ServerEvent::ToolCall(vec![call(
        "c1",
        "get_device_status",
    )])));
    app.update(finished("c1", "get_device_status", ToolStatus::Ok));
    let answer = json!({"toolResponse": {"functionResponses": [{"id": "c1", "name": "get_device_status", "response": {"token": "inspector-copy-secret-5521"}}]}});
    app.update(Msg::Wire(wire(base, 0, true, answer)));
    app.update(Msg::Wire(mic_frame(base, 20)));
    press(&mut app, KeyCode::F(12));
    press(&mut app, KeyCode::Up);
    let effects = press(&mut app, KeyCode::Char('y'));
    let [Effect::Copy(json)] = effects.as_slice() else {
        panic!("{effects:?}");
    };
    let copied: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(
        copied["toolResponse"]["functionResponses"][0]["response"]["token"],
        "[redacted]"
    );
    assert!(
        app.notices
            .last()
            .unwrap()
            .text
            .starts_with("Copied the toolResponse frame's JSON")
    );
    // The mic frame's audio was never kept: the copy says so where it was.
    press(&mut app, KeyCode::End);
    let effects = press(&mut app, KeyCode::Char('y'));
    let [Effect::Copy(json)] = effects.as_slice() else {
        panic!("{effects:?}");
    };
    assert!(
        json.contains("\"data\": \"(left out: 6 B in this frame)\""),
        "{json}"
    );
    press(&mut app, KeyCode::Esc);

    // In the tool log: the call with the response sent for it.
    app.view.focus = Focus::ToolLog;
    let effects = press(&mut app, KeyCode::Char('y'));
    let [Effect::Copy(json)] = effects.as_slice() else {
        panic!("{effects:?}");
    };
    let copied: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(copied["functionCall"]["name"], "get_device_status");
    assert_eq!(
        copied["functionCall"]["args"]["device_name"],
        "living room lamp"
    );
    assert_eq!(copied["functionResponse"]["response"]["status"], "off");
}

#[test]
fn voice_is_checked_against_the_prebuilt_voices_and_handed_over() {
    let mut app = connected_app();
    app.voice = "Puck".into();
    // Any casing; the service's spelling is what is asked for.
    assert_eq!(
        app.update(Msg::UserText("/voice kore".into())),
        vec![Effect::Session(SessionEffect::SetVoice("Kore".into()))]
    );
    assert_eq!(app.voice(), "Kore");
    assert_eq!(
        app.transcript.last(),
        Some(&Entry::Change("Voice is now Kore".into()))
    );
    assert!(app.ready_for_user(), "the next turn need not wait for it");
    // The same voice again changes nothing.
    assert!(app.update(Msg::UserText("/voice Kore".into())).is_empty());
    assert!(app.notices.last().unwrap().text.contains("already"));
    // An unknown name is a notice naming a few, and nothing is sent.
    let entries = app.transcript.len();
    assert!(app.update(Msg::UserText("/voice Nobody".into())).is_empty());
    let notice = &app.notices.last().unwrap().text;
    assert!(
        notice.contains("There is no voice \"Nobody\"") && notice.contains("Zephyr, Puck"),
        "{notice}"
    );
    assert_eq!(app.transcript.len(), entries);
    assert!(app.update(Msg::UserText("/voice".into())).is_empty());
    assert!(
        app.notices
            .last()
            .unwrap()
            .text
            .starts_with("/voice needs a voice: /voice NAME")
    );
}

#[test]
fn a_model_headless_starts_a_fresh_session_at_once_and_says_so() {
    let mut app = connected_app();
    assert_eq!(
        app.update(Msg::UserText("/model gemini-3.1-flash-live-preview".into())),
        vec![Effect::Session(SessionEffect::SwitchModel(
            "models/gemini-3.1-flash-live-preview".into()
        ))]
    );
    assert_eq!(app.model(), "models/gemini-3.1-flash-live-preview");
    let Some(Entry::Change(said)) = app.transcript.last() else {
        panic!("{:?}", app.transcript);
    };
    assert!(
        said.starts_with("Model is now gemini-3.1-flash-live-preview: a fresh session"),
        "{said}"
    );
    // Read as --model reads it.
    assert!(
        app.update(Msg::UserText("/model models/".into()))
            .is_empty()
    );
    assert!(
        app.notices.last().unwrap().text.contains("has no model id"),
        "{:?}",
        app.notices.last()
    );
    assert!(
        app.update(Msg::UserText("/model gemini-3.1-flash-live-preview".into()))
            .is_empty()
    );
    assert!(app.notices.last().unwrap().text.contains("already"));
}

#[test]
fn a_model_in_the_tui_asks_first_and_no_keeps_the_session() {
    use crossterm::event::KeyCode;
    let mut app = connected_app();
    type_text(&mut app, "/model gemini-3.8-live-extended-thinking");
    assert!(press(&mut app, KeyCode::Enter).is_empty());
    assert!(app.view.input.is_empty());
    let question = app.visible_notice().unwrap().text.clone();
    assert!(
        question.starts_with("Switch to gemini-3.8-live-extended-thinking?")
            && question.contains("y switches, n keeps test"),
        "{question}"
    );
    assert!(press(&mut app, KeyCode::Char('n')).is_empty());
    assert_eq!(app.model(), "models/test");
    assert!(app.visible_notice().is_none(), "the question is gone");
    assert!(app.transcript.is_empty());
    // Asked again, yes: the line goes on as typed.
    type_text(&mut app, "/model gemini-3.8-live-extended-thinking");
    press(&mut app, KeyCode::Enter);
    assert_eq!(
        press(&mut app, KeyCode::Char('y')),
        vec![Effect::Session(SessionEffect::SwitchModel(
            "models/gemini-3.8-live-extended-thinking".into()
        ))]
    );
    assert_eq!(app.model(), "models/gemini-3.8-live-extended-thinking");
    assert!(app.view.confirm_model.is_none());
    // y and n type again once nothing is asked.
    press(&mut app, KeyCode::Char('y'));
    assert_eq!(app.view.input.text(), "y");
}

fn picture(name: &str) -> ImageSent {
    ImageSent {
        name: name.into(),
        file_bytes: 12_345,
        width: 640,
        height: 480,
        jpeg: vec![0xff, 0xd8, 0xff],
        at: std::time::Instant::now(),
    }
}

#[test]
fn an_image_is_prepared_off_the_loop_then_shown_and_sent() {
    let mut app = connected_app();
    assert_eq!(
        app.update(Msg::UserText("/image ~/red square.png".into())),
        vec![Effect::Files(FileEffect::PrepareImage(
            "~/red square.png".into()
        ))]
    );
    assert!(
        app.image_pending() && !app.ready_for_user(),
        "the next line waits"
    );
    assert_eq!(
        app.update(Msg::Image(Ok(picture("red square.png")))),
        vec![Effect::Session(SessionEffect::SendImage(vec![
            0xff, 0xd8, 0xff
        ]))]
    );
    assert_eq!(
        app.transcript.last(),
        Some(&Entry::Image {
            name: "red square.png".into(),
            file_bytes: 12_345,
            width: 640,
            height: 480,
        })
    );
    assert_eq!(
        image_label("red square.png", 12_345, 640, 480),
        "red square.png (12 KB), sent as a 640×480 JPEG"
    );
    // The offline demo model answers it.
    assert!(!app.image_pending() && !app.ready_for_user());
}

#[test]
fn an_image_that_cannot_be_read_is_one_notice_and_nothing_is_sent() {
    let mut app = connected_app();
    app.update(Msg::UserText("/image gone.png".into()));
    let problem = "picture gone.png does not exist".to_owned();
    assert!(app.update(Msg::Image(Err(problem))).is_empty());
    assert_eq!(
        app.notices.last().unwrap().text,
        "picture gone.png does not exist; nothing was sent."
    );
    assert!(app.transcript.is_empty());
    assert!(app.ready_for_user());
    assert!(app.update(Msg::UserText("/image".into())).is_empty());
    assert!(
        app.notices
            .last()
            .unwrap()
            .text
            .starts_with("/image needs a file: /image PATH")
    );
    // A picture ready after the session ended is not sent.
    app.update(Msg::UserText("/image late.png".into()));
    app.update(Msg::EndSession);
    assert!(app.update(Msg::Image(Ok(picture("late.png")))).is_empty());
    assert!(app.transcript.is_empty());
}

#[test]
fn tools_opens_the_tool_list_in_the_tui_and_is_explained_headless() {
    use crossterm::event::KeyCode;
    let mut app = connected_app();
    type_text(&mut app, "/tools");
    assert!(press(&mut app, KeyCode::Enter).is_empty());
    assert_eq!(app.view.popup, Some(Popup::Tools { selected: 0 }));
    assert!(app.view.input.is_empty());
    assert!(app.update(Msg::UserText("/tools".into())).is_empty());
    assert!(app.notices.last().unwrap().text.contains("F8"));
    assert!(app.update(Msg::UserText("/help".into())).is_empty());
    let help = &app.notices.last().unwrap().text;
    for usage in [
        "/voice NAME",
        "/model ID",
        "/image PATH",
        "/tools",
        "//text",
    ] {
        assert!(help.contains(usage), "{usage} in {help}");
    }
}

#[test]
fn tab_completes_commands_voices_model_ids_and_paths() {
    use crossterm::event::KeyCode;
    let mut app = connected_app();
    type_text(&mut app, "/vo");
    assert!(press(&mut app, KeyCode::Tab).is_empty());
    assert_eq!(app.view.input.text(), "/voice ");
    type_text(&mut app, "k");
    press(&mut app, KeyCode::Tab);
    assert_eq!(app.view.input.text(), "/voice Kore");
    assert_eq!(app.view.focus, Focus::Input, "Tab did not move the focus");
    // Several left: as far as they agree, and the rest listed.
    app.view.input.replace("/voice al");
    press(&mut app, KeyCode::Tab);
    assert_eq!(app.view.input.text(), "/voice Al");
    let listed = &app.visible_notice().unwrap().text;
    assert!(
        listed.contains("Algieba") && listed.contains("Alnilam"),
        "{listed}"
    );
    app.view.input.replace("/model gemini-3.8");
    press(&mut app, KeyCode::Tab);
    assert_eq!(app.view.input.text(), "/model gemini-3.8-live");
    // A command that takes nothing gets no space after it.
    app.view.input.replace("/too");
    press(&mut app, KeyCode::Tab);
    assert_eq!(app.view.input.text(), "/tools");
    // A path: the folder is listed off the loop, then completed if the line still asks.
    app.view.input.replace("/image pics/re");
    assert_eq!(
        press(&mut app, KeyCode::Tab),
        vec![Effect::Files(FileEffect::ListPaths("pics/re".into()))]
    );
    let entries = vec![
        ".red-hidden.png".to_owned(),
        "red.png".to_owned(),
        "red.webp".to_owned(),
        "blue.png".to_owned(),
    ];
    app.update(Msg::PathChoices {
        typed: "pics/re".into(),
        entries: entries.clone(),
    });
    assert_eq!(app.view.input.text(), "/image pics/red.");
    app.update(Msg::PathChoices {
        typed: "pics/red.w".into(),
        entries: entries.clone(),
    });
    assert_eq!(
        app.view.input.text(),
        "/image pics/red.",
        "an answer for another line changes nothing"
    );
    app.view.input.replace("/image pics/b");
    app.update(Msg::PathChoices {
        typed: "pics/b".into(),
        entries,
    });
    assert_eq!(app.view.input.text(), "/image pics/blue.png");
    // Text and free arguments complete nothing; Tab outside a command moves the focus.
    app.view.input.replace("/system be br");
    press(&mut app, KeyCode::Tab);
    assert_eq!(app.view.input.text(), "/system be br");
    app.view.input.replace("hello");
    press(&mut app, KeyCode::Tab);
    assert_eq!(app.view.focus, Focus::Transcript);
}

#[test]
fn a_40_ms_model_audio_chunk_is_allocated_once_from_the_frame_to_the_playback_queue() {
    use livetalk_live::codec::{DecodedServerFrame, decode_server};
    // 40 ms at 24 kHz, PCM16: 1,920 bytes, as the service sends a chunk.
    let pcm: Vec<u8> = (0..1920u32).map(|i| (i % 251) as u8).collect();
    let data = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &pcm);
    let frame = json!({"serverContent": {"modelTurn": {"parts": [
        {"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": data}}
    ]}}})
    .to_string();
    let mut app = with_audio(false);
    // What the connection's reader does with the frame: the decoder fills one buffer.
    let Ok(DecodedServerFrame::Message(message)) = decode_server(frame.as_bytes()) else {
        panic!("the frame decodes");
    };
    let decoded = message
        .server_content
        .as_ref()
        .unwrap()
        .model_turn
        .as_ref()
        .unwrap()
        .parts[0]
        .inline_data
        .as_ref()
        .unwrap()
        .data
        .as_ptr();
    // Then the session hands the frame on, and the engine the app its frame and its events.
    let inbound = livetalk_live::Inbound::message(message);
    let mut effects = app.update(Msg::Wire(WireFrame::received(&inbound).unwrap()));
    for event in inbound.events {
        effects.extend(app.update(Msg::Server(event)));
    }
    let played: Vec<&Vec<u8>> = effects
        .iter()
        .filter_map(|effect| match effect {
            Effect::Media(MediaEffect::PlayAudio(pcm)) => Some(pcm),
            _ => None,
        })
        .collect();
    assert_eq!(played, [&pcm], "the chunk reaches the playback queue whole");
    assert_eq!(
        played[0].as_ptr(),
        decoded,
        "what is played is the buffer the decoder filled, not a copy of it"
    );
    // Nor does the frame the inspector's log keeps hold it.
    let kept = app.wire().frames().back().unwrap();
    let WireBody::Received { message, audio } = &kept.body else {
        panic!("{kept:?}")
    };
    let blob = message
        .server_content
        .as_ref()
        .unwrap()
        .model_turn
        .as_ref()
        .unwrap()
        .parts[0]
        .inline_data
        .as_ref()
        .unwrap();
    assert!(blob.data.is_empty());
    assert_eq!(audio[0].bytes, 1920);
}

#[test]
fn a_grounded_replys_sources_reach_the_event_inspector() {
    let mut app = connected_app();
    let base = std::time::Instant::now();
    let grounded = json!({"serverContent": {
        "modelTurn": {"parts": [{"text": "It is sunny in Paris today."}]},
        "groundingMetadata": {
            "webSearchQueries": ["weather Paris today"],
            "groundingChunks": [
                {"web": {"uri": "https://g.co/r/AbC1", "title": "meteofrance.com", "domain": "meteofrance.com"}},
                {"web": {"uri": "https://g.co/r/XyZ2", "title": "Paris weather – BBC"}},
                {"retrievedContext": {"uri": "gs://bucket/doc", "title": "not the web"}}
            ],
            "searchEntryPoint": {"renderedContent": "<div>…</div>"}
        }
    }});
    app.update(Msg::Wire(wire(base, 10, false, grounded)));
    app.update(Msg::Wire(wire(
        base,
        20,
        false,
        json!({"serverContent": {"modelTurn": {"parts": [{"text": "No search here."}]}}}),
    )));
    let rows = crate::app::inspector::wire_rows(app.wire(), crate::app::WireFilter::All);
    let [grounded, plain] = rows.as_slice() else {
        panic!("{rows:#?}")
    };
    assert_eq!(grounded.kind, "serverContent");
    assert_eq!(
        grounded.summary,
        "\"It is sunny in Paris today.\" · searched \"weather Paris today\" · 2 sources: \
         meteofrance.com <https://g.co/r/AbC1>, \
         Paris weather – BBC <https://g.co/r/XyZ2>"
    );
    assert_eq!(
        plain.summary, "\"No search here.\"",
        "no sources where there are none"
    );
}

/// An input clip (`--input-wav`) whose speech the server heard, and whose silence ran out
/// before its reply began (a server slower than the silence): the reply is awaited, so the
/// end of input waits for it instead of closing the session first; once it has come, the
/// user's side is free again. A clip answered before it ended leaves nothing awaited.
#[test]
fn a_clip_heard_and_not_yet_answered_holds_the_end_of_input() {
    use crate::audio::{AudioEvent, EchoMode};
    let clip_app = || {
        let mut init = AppInit::new("models/test", true, Vec::new());
        init.audio = Some(AudioAsked {
            microphone: true,
            input_wav: true,
            output_wav: false,
            push_to_talk: false,
            echo: EchoMode::Off,
        });
        let mut app = App::new(init);
        app.update(Msg::Server(ServerEvent::SetupComplete { session_id: None }));
        app
    };
    let complete = || {
        Msg::Server(ServerEvent::TurnComplete {
            reason: None,
            waiting_for_input: false,
        })
    };

    let mut app = clip_app();
    app.update(Msg::Server(ServerEvent::VoiceActivity { speaking: true }));
    app.update(Msg::Audio(AudioEvent::InputClipEnded));
    assert!(!app.ready_for_user(), "the clip's reply is not awaited");
    app.update(Msg::Server(ServerEvent::ModelText(
        "The lamp is off.".into(),
    )));
    app.update(complete());
    assert!(app.ready_for_user());

    let mut app = clip_app();
    app.update(Msg::Server(ServerEvent::VoiceActivity { speaking: true }));
    app.update(Msg::Server(ServerEvent::ModelText(
        "The lamp is off.".into(),
    )));
    app.update(complete());
    app.update(Msg::Audio(AudioEvent::InputClipEnded));
    assert!(app.ready_for_user(), "an answered clip holds the session");
}

fn grounding(metadata: serde_json::Value) -> Msg {
    Msg::Server(ServerEvent::Grounding(metadata))
}

fn model_grounding(app: &App) -> Vec<&Grounding> {
    app.transcript()
        .iter()
        .filter_map(|entry| match entry {
            Entry::Model { grounding, .. } => Some(grounding),
            _ => None,
        })
        .collect()
}

#[test]
fn a_replys_searches_and_sources_stay_with_it_each_once() {
    let mut app = connected_app();
    app.update(Msg::UserText("what's the weather in Paris?".into()));
    // The search is said before the first words, then again with more beside the words.
    app.update(grounding(json!({"webSearchQueries": ["weather Paris"]})));
    app.update(Msg::Server(ServerEvent::OutputTranscription {
        text: "It is sunny.".into(),
        finished: false,
    }));
    app.update(grounding(json!({
        "webSearchQueries": ["weather Paris", "Paris forecast"],
        "groundingChunks": [
            {"web": {"uri": "https://g.co/r/1", "title": "meteofrance.com", "domain": "meteofrance.com"}},
            {"web": {"uri": "https://g.co/r/1", "title": "meteofrance.com"}},
            {"web": {"uri": "https://g.co/r/2"}},
            {"retrievedContext": {"uri": "gs://not/the/web"}},
            {"web": {}}
        ],
        "searchEntryPoint": {"renderedContent": "<div>…</div>"}
    })));
    app.update(Msg::Server(ServerEvent::TurnComplete {
        reason: None,
        waiting_for_input: false,
    }));
    assert_eq!(
        app.transcript().len(),
        2,
        "one reply: {:?}",
        app.transcript()
    );
    let [found] = model_grounding(&app)[..] else {
        panic!("{:?}", app.transcript())
    };
    assert_eq!(found.queries, ["weather Paris", "Paris forecast"]);
    assert_eq!(
        found.sources,
        [
            Source {
                title: Some("meteofrance.com".into()),
                uri: Some("https://g.co/r/1".into()),
                domain: Some("meteofrance.com".into()),
            },
            Source {
                title: None,
                uri: Some("https://g.co/r/2".into()),
                domain: None,
            },
        ]
    );
    assert_eq!(found.sources[1].as_line(), "(untitled) <https://g.co/r/2>");

    // The next reply searched nothing: it has nothing of the first's.
    app.update(Msg::UserText("thanks".into()));
    app.update(Msg::Server(ServerEvent::ModelText(
        "You're welcome.".into(),
    )));
    app.update(grounding(
        json!({"searchEntryPoint": {"renderedContent": "<div/>"}}),
    ));
    app.update(Msg::Server(ServerEvent::TurnComplete {
        reason: None,
        waiting_for_input: false,
    }));
    let all = model_grounding(&app);
    assert_eq!(all.len(), 2);
    assert!(all[1].is_empty(), "{:?}", all[1]);
}

#[test]
fn a_hostile_grounding_is_bounded_and_made_one_line() {
    let mut app = connected_app();
    app.update(Msg::UserText("search".into()));
    let chunks: Vec<serde_json::Value> = (0..5000)
        .map(|i| json!({"web": {"uri": format!("https://a.example/{i}"), "title": format!("page {i}")}}))
        .collect();
    app.update(grounding(json!({
        "webSearchQueries": ["\u{1b}]2;pwned\u{7}line\nbreak", "x".repeat(100_000)],
        "groundingChunks": chunks,
    })));
    app.update(grounding(json!({"groundingChunks": [
        {"web": {"title": "evil\u{1b}[2Jtitle", "uri": format!("https://a.example/{}", "y".repeat(10_000))}}
    ]})));
    let [found] = model_grounding(&app)[..] else {
        panic!()
    };
    assert_eq!(found.queries[0], "]2;pwned line break");
    assert!(found.queries[1].chars().count() <= 300, "a query is cut");
    assert_eq!(found.sources.len(), 32, "sources are capped");
    assert_eq!(found.more_sources, 5000 - 32 + 1, "the rest are counted");
    assert!(
        found
            .sources
            .iter()
            .chain(std::iter::once(&Source {
                title: None,
                uri: None,
                domain: None
            }))
            .all(|s| !s.as_line().contains(|c: char| c.is_control())),
        "no control character reaches a line of text"
    );
}

#[test]
fn a_grounding_after_a_barge_in_or_the_end_is_dropped_with_the_rest_of_the_turn() {
    let mut app = connected_app();
    app.update(Msg::UserText("tell me the news".into()));
    app.update(Msg::Server(ServerEvent::OutputTranscription {
        text: "Here is".into(),
        finished: false,
    }));
    app.update(Msg::BargeIn);
    app.update(grounding(json!({"webSearchQueries": ["news"]})));
    assert!(model_grounding(&app).iter().all(|g| g.is_empty()));
    assert!(matches!(
        app.transcript().last(),
        Some(Entry::Model {
            status: ModelTurnStatus::Interrupted,
            ..
        })
    ));
}

fn frame_of(share: u32, at: std::time::Instant) -> Msg {
    Msg::Screen(ScreenNews::Frame {
        share,
        frame: ImageSent {
            at,
            ..picture("screen")
        },
    })
}

#[test]
fn a_shared_screen_sends_its_frames_until_it_stops_and_never_after() {
    let mut app = connected_app();
    let start = ScreenEffect::Start {
        share: 1,
        source: ShareSource::Screen(None),
    };
    assert_eq!(
        app.update(Msg::UserText("/screen".into())),
        vec![Effect::Screen(start)]
    );
    app.update(Msg::Screen(ScreenNews::Started {
        share: 1,
        what: "the screen :1 (800×600)".into(),
    }));
    assert_eq!(app.sharing().map(Sharing::kind), Some("screen"));
    let t0 = std::time::Instant::now();
    assert_eq!(
        app.update(frame_of(1, t0)),
        vec![Effect::Session(SessionEffect::SendImage(vec![
            0xff, 0xd8, 0xff
        ]))]
    );
    app.update(frame_of(1, t0 + Duration::from_secs(2)));
    assert_eq!(app.frames_sent(), 2);
    let (frames, bytes) = app.sharing().unwrap().rates().unwrap();
    assert!((frames - 0.5).abs() < 1e-9 && (bytes - 3.0).abs() < 1e-9);
    // `/screen` again stops, and a frame already on its way is not sent.
    assert_eq!(
        app.update(Msg::UserText("/screen".into())),
        vec![Effect::Screen(ScreenEffect::Stop)]
    );
    assert_eq!(
        app.transcript.last(),
        Some(&Entry::Change(
            "Stopped sharing the screen: 2 frames sent in 6 B".into()
        ))
    );
    assert!(
        app.update(frame_of(1, t0 + Duration::from_secs(3)))
            .is_empty()
    );
    assert_eq!(app.frames_sent(), 2);
    // A new share's number tells its news from the old one's.
    app.update(Msg::UserText("/screen DP-1".into()));
    assert!(app.update(frame_of(1, t0)).is_empty());
    assert_eq!(app.update(frame_of(2, t0)).len(), 1);
    // `/stop`, then `/stop` with nothing shared says so.
    assert_eq!(
        app.update(Msg::UserText("/stop".into())),
        vec![Effect::Screen(ScreenEffect::Stop)]
    );
    assert!(app.update(Msg::UserText("/stop".into())).is_empty());
    assert_eq!(
        app.notices().last().map(|n| n.text.as_str()),
        Some("Nothing is being shared (/screen shares the screen).")
    );
}

#[test]
fn a_share_that_cannot_start_is_one_warning_and_the_session_goes_on() {
    let mut app = connected_app();
    app.update(Msg::UserText("/screen".into()));
    assert_eq!(
        app.update(Msg::Screen(ScreenNews::Failed {
            share: 1,
            problem: "There is no screen to share: DISPLAY is not set.".into(),
        })),
        vec![Effect::Screen(ScreenEffect::Stop)]
    );
    assert!(app.sharing().is_none());
    assert_eq!(app.notices().last().unwrap().level, NoticeLevel::Warning);
    assert_eq!(
        app.update(Msg::UserText("hello".into())),
        vec![Effect::Session(SessionEffect::SendText("hello".into()))]
    );
}

#[test]
fn video_starts_with_the_session_and_without_compression_warns_of_two_minutes() {
    let mut app = App::new(AppInit {
        video: Some("frames".into()),
        compression_trigger: None,
        ..AppInit::new("models/test", true, Vec::new())
    });
    assert_eq!(
        app.update(Msg::Server(ServerEvent::SetupComplete { session_id: None })),
        vec![Effect::Screen(ScreenEffect::Start {
            share: 1,
            source: ShareSource::Folder("frames".into()),
        })]
    );
    assert!(
        app.notices()
            .last()
            .unwrap()
            .text
            .contains("the service ends the session after about 2 minutes"),
        "{:?}",
        app.notices()
    );
    assert_eq!(app.sharing().map(Sharing::kind), Some("video"));
    // A reconnect does not start it again.
    assert!(
        app.update(Msg::Server(ServerEvent::SetupComplete { session_id: None }))
            .is_empty()
    );
    // Ending the session stops it.
    assert!(
        app.update(Msg::EndSession)
            .contains(&Effect::Screen(ScreenEffect::Stop))
    );
}

#[test]
fn the_health_panel_counts_video_s_share_of_the_context_from_its_modalities() {
    use livetalk_live::wire::{ModalityTokenCount, UsageMetadata};
    let mut app = connected_app();
    let usage = |text: i64, image: i64| UsageMetadata {
        prompt_token_count: Some(text + image),
        total_token_count: Some(text + image + 10),
        response_token_count: Some(10),
        prompt_tokens_details: vec![
            ModalityTokenCount {
                modality: "TEXT".into(),
                token_count: Some(text),
            },
            ModalityTokenCount {
                modality: "IMAGE".into(),
                token_count: Some(image),
            },
        ],
        ..UsageMetadata::default()
    };
    app.update(Msg::Server(ServerEvent::Usage(usage(1000, 0))));
    assert_eq!(app.figures().video_share(), None);
    app.update(Msg::Server(ServerEvent::Usage(usage(258, 774))));
    let share = app.figures().video_share().unwrap();
    assert!((share - 75.0).abs() < 0.01, "{share}");
}

#[test]
fn the_demo_model_is_awaited_for_a_lone_picture_not_for_a_frame_of_a_stream() {
    let mut app = connected_app();
    let t0 = std::time::Instant::now();
    let shown = |app: &mut App, at| {
        app.update(Msg::UserText("/image red.png".into()));
        app.update(Msg::Image(Ok(ImageSent {
            at,
            ..picture("red.png")
        })));
    };
    shown(&mut app, t0);
    assert!(!app.ready_for_user(), "a lone picture is answered");
    app.update(Msg::Server(ServerEvent::ModelText("I see it.".into())));
    app.update(Msg::Server(ServerEvent::TurnComplete {
        reason: None,
        waiting_for_input: false,
    }));
    assert!(app.ready_for_user());
    shown(&mut app, t0 + Duration::from_secs(3));
    assert!(
        app.ready_for_user(),
        "three seconds after the last: a stream's frame"
    );
    shown(
        &mut app,
        t0 + Duration::from_secs(3) + livetalk_mock::PICTURE_STREAM_GAP,
    );
    assert!(!app.ready_for_user(), "alone again");
}

/// What the preview shows: the newest picture sent, a share's frame replacing an `/image`
/// picture; `/preview` hides it until a new share or picture, not for the next frame.
#[test]
fn the_preview_shows_the_newest_picture_and_preview_hides_it() {
    let shown = |app: &App| {
        app.preview().map(|p| match p {
            crate::app::Previewed::Share(_, frame) => format!("share {}", frame.name),
            crate::app::Previewed::Image(image) => format!("image {}", image.name),
        })
    };
    let preview = |app: &mut App| {
        type_text(app, "/preview");
        press(app, crossterm::event::KeyCode::Enter);
    };
    let mut app = connected_app();
    assert_eq!(shown(&app), None);
    preview(&mut app);
    assert!(
        app.notices
            .last()
            .is_some_and(|n| n.text.starts_with("Nothing to preview"))
    );
    app.update(Msg::UserText("/image leaf.png".into()));
    app.update(Msg::Image(Ok(picture("leaf.png"))));
    assert_eq!(shown(&app).as_deref(), Some("image leaf.png"));
    app.update(Msg::UserText("/screen".into()));
    // Until the share sends a frame, the picture stays.
    assert_eq!(shown(&app).as_deref(), Some("image leaf.png"));
    let t0 = std::time::Instant::now();
    app.update(frame_of(1, t0));
    assert_eq!(shown(&app).as_deref(), Some("share screen"));
    preview(&mut app);
    assert_eq!(shown(&app), None);
    app.update(frame_of(1, t0 + std::time::Duration::from_secs(1)));
    assert_eq!(shown(&app), None, "the next frame does not undo /preview");
    preview(&mut app);
    assert_eq!(shown(&app).as_deref(), Some("share screen"));
    app.update(Msg::UserText("/stop".into()));
    assert_eq!(shown(&app), None, "a stopped share is not previewed");
}
