//! In-process loopback: the library's client and the embedded mock over a real socket run the
//! whole three-turn smart-home dialogue; the shared device state ends with the lamp on and blue.

// Test output is the test runner's, not livetalk's: it may print directly.
#![allow(clippy::disallowed_macros)]
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::SMART_HOME_LINES;
use common::harness::{REACH, connect, default_settings, fast_mock, run_until};
use livetalk::app::{App, AppInit, Msg, ToolState};
use livetalk::driver::apply;
use livetalk::engine::{Engine, build_setup};
use livetalk::tools::{SmartHome, builtin_registry};
use livetalk_live::Outbox;
use livetalk_live::{ApiVersion, Auth, ConnectOptions, ServerEvent};

/// How long the engine may take to connect to the embedded mock.
const CONNECT: Duration = Duration::from_secs(10);

/// Feeds the app until the model is ready for the next user line (or the deadline passes).
async fn until_ready(app: &mut App, engine: &mut Engine) {
    let what = "the model finishes its turn";
    run_until(app, engine, REACH, what, App::ready_for_user).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn smart_home_dialogue_over_loopback_changes_the_devices() {
    let settings = default_settings();
    let mock = fast_mock(Vec::new()).await;
    let home = SmartHome::new();
    let registry = Arc::new(
        builtin_registry(&settings.tools_enabled, settings.tool_limits, home.clone()).unwrap(),
    );
    let mut engine = Engine::new(registry.clone(), &home, livetalk::tools::Decider::Person);
    let mut app = App::new(AppInit::new(settings.model.clone(), true, home.snapshot()));
    connect(&mut engine, &mock, &settings, &registry, CONNECT).await;

    for line in common::SMART_HOME_LINES {
        until_ready(&mut app, &mut engine).await;
        apply(&mut app, &mut engine, Msg::UserText(line.into())).await;
    }
    until_ready(&mut app, &mut engine).await;

    let calls: Vec<(&str, &ToolState)> = app
        .tool_calls()
        .iter()
        .map(|c| (c.name.as_str(), &c.state))
        .collect();
    assert_eq!(
        calls,
        [
            ("get_device_status", &ToolState::Ok),
            ("set_device_status", &ToolState::Ok),
            ("get_device_status", &ToolState::Ok)
        ]
    );
    // Each response went back with the call's id and name.
    for call in app.tool_calls() {
        let response = call.response.as_ref().unwrap();
        assert_eq!(response.id, call.id);
        assert_eq!(response.name, call.name);
    }
    let replies: Vec<String> = common::replies(&app)
        .into_iter()
        .map(|(text, _)| text)
        .collect();
    assert_eq!(replies.len(), 3);
    assert!(replies[0].contains("off"), "{replies:?}");
    assert!(replies[1].contains("blue"), "{replies:?}");
    assert!(replies[2].contains("20"), "{replies:?}");
    assert!(
        app.model_audio_bytes() > 3 * 24_000,
        "speech audio arrived: {}",
        app.model_audio_bytes()
    );

    // The device panel's state: the shared devices changed and the app saw it.
    let lamp = home
        .snapshot()
        .into_iter()
        .find(|d| d.name == "living room lamp")
        .unwrap();
    assert_eq!(
        (lamp.status.as_str(), lamp.color.as_deref()),
        ("on", Some("blue"))
    );
    let lamp_on = |app: &App| {
        app.devices()
            .iter()
            .find(|d| d.name == "living room lamp")
            .map(|d| d.status.as_str())
            == Some("on")
    };
    let what = "the app's device list follows the shared state";
    run_until(&mut app, &mut engine, Duration::from_secs(5), what, lamp_on).await;
    assert!(app.tokens().total() > 0, "usage metadata was counted");
}

/// A tool of the user's own, declared beside the built-ins (as an MCP tool would be).
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct EchoArgs {
    /// The text to echo back.
    message: String,
}

struct Echo;

impl livetalk::tools::Tool for Echo {
    type Args = EchoArgs;
    fn name(&self) -> &'static str {
        "echo"
    }
    fn description(&self) -> &'static str {
        "Echoes a message back."
    }
    async fn call(&self, args: EchoArgs) -> Result<serde_json::Value, livetalk::tools::ToolError> {
        Ok(serde_json::json!({ "echo": args.message }))
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_demo_model_calls_a_users_tool_by_name_and_it_waits_for_approval() {
    use livetalk::tools::{Approval, CallKey, Decider, Verdict};
    let settings = default_settings();
    let mock = fast_mock(Vec::new()).await;
    let home = SmartHome::new();
    let mut registry =
        builtin_registry(&settings.tools_enabled, settings.tool_limits, home.clone()).unwrap();
    registry.register(Echo);
    registry.set_approval("echo", Approval::Always);
    let registry = Arc::new(registry);
    let mut engine = Engine::new(registry.clone(), &home, Decider::Person);
    let mut app = App::new(AppInit::new(settings.model.clone(), true, home.snapshot()));
    connect(&mut engine, &mock, &settings, &registry, CONNECT).await;
    until_ready(&mut app, &mut engine).await;
    apply(
        &mut app,
        &mut engine,
        Msg::UserText("use the echo tool with message Hello there".into()),
    )
    .await;
    run_until(
        &mut app,
        &mut engine,
        REACH,
        "the call waits for the user",
        |app| app.first_waiting_call().is_some(),
    )
    .await;
    let call = &app.tool_calls()[0];
    assert_eq!(call.name, "echo");
    assert_eq!(call.args, serde_json::json!({"message": "Hello there"}));
    assert_eq!(call.state, ToolState::Waiting);
    assert!(!app.ready_for_user());

    apply(
        &mut app,
        &mut engine,
        Msg::ToolVerdict {
            key: CallKey(0),
            verdict: Verdict::Approve,
        },
    )
    .await;
    until_ready(&mut app, &mut engine).await;
    let call = &app.tool_calls()[0];
    assert_eq!(call.state, ToolState::Ok);
    assert_eq!(
        call.response.as_ref().unwrap().response,
        serde_json::json!({"echo": "Hello there"})
    );
    let replies = common::replies(&app);
    assert_eq!(
        replies.last().map(|(text, _)| text.as_str()),
        Some(r#"The echo tool answered: {"echo":"Hello there"}."#)
    );
}

/// The supervisor holds each call to one answer on its own connection, and hands out each
/// server frame whole only after it has taken in the frame's calls: an app that answers from
/// the message itself, the moment the frame reaches it and while the frame's events are still
/// to be read (what a bridge's app does), has every answer sent. (When the bridge read frames
/// from a wire tap on the reader task, an answer could overtake its own call; the supervisor
/// then withheld it in four runs of four on one thread.)
#[tokio::test(flavor = "current_thread")]
async fn an_answer_sent_from_the_frame_before_its_events_are_read_still_goes_out() {
    use livetalk_live::client::connect;
    use livetalk_live::session::{ReconnectPolicy, SessionChange, SessionEvent, supervise};
    use livetalk_live::wire::FunctionResponse;
    let settings = default_settings();
    let mock = fast_mock(Vec::new()).await;
    let home = SmartHome::new();
    let registry =
        builtin_registry(&settings.tools_enabled, settings.tool_limits, home.clone()).unwrap();
    let connection = connect(ConnectOptions {
        endpoint: mock.endpoint(ApiVersion::V1),
        auth: Auth::None,
        setup: build_setup(&settings, &registry),
        connect_timeout: Duration::from_secs(10),
    })
    .await
    .unwrap();
    let mut link = supervise(connection, None, ReconnectPolicy::default(), None);
    let lines = [SMART_HOME_LINES[0], SMART_HOME_LINES[2]];
    let mut answered = 0;
    for turn in 0..12 {
        link.handle.send_user_text(lines[turn % 2]).await.unwrap();
        let mut called = false;
        'turn: loop {
            let event = tokio::time::timeout(Duration::from_secs(20), link.events.recv())
                .await
                .unwrap_or_else(|_| panic!("turn {turn} did not end"))
                .expect("the link is open");
            let inbound = match event {
                SessionEvent::Change(SessionChange::AnswerDropped { id, name }) => {
                    panic!("turn {turn}: the answer to {name} ({id:?}) was withheld")
                }
                SessionEvent::Server(inbound) => inbound,
                _ => continue,
            };
            if let Some(calls) = inbound.message.as_ref().and_then(|m| m.tool_call.as_ref()) {
                let answers: Vec<FunctionResponse> = calls
                    .function_calls
                    .iter()
                    .map(|call| FunctionResponse {
                        id: call.id.clone(),
                        name: call.name.clone(),
                        response: serde_json::json!({"status": "off", "temperature_celsius": 20}),
                        ..FunctionResponse::default()
                    })
                    .collect();
                answered += answers.len();
                link.handle.send_tool_responses(answers).await.unwrap();
            }
            for event in inbound {
                match event {
                    ServerEvent::ToolCall(_) => called = true,
                    ServerEvent::TurnComplete { .. } if called => break 'turn,
                    _ => {}
                }
            }
        }
    }
    assert!(answered >= 12, "{answered} answers in 12 turns");
    assert_eq!(link.status.figures().answers_dropped, 0);
}

/// Every frame of a session, both ways, reaches the app once and in the order it crossed the
/// wire (the inspector's source), and a recording of the same session has each once: its wire
/// lines match the app's frames one for one, no applied line stands for a frame, and the model
/// audio is in `model.wav` once, each applied chunk pointing at the samples its frame put there.
#[tokio::test(flavor = "multi_thread")]
async fn every_frame_reaches_the_app_once_in_wire_order_and_is_recorded_once() {
    use livetalk::app::WireBody;
    use livetalk::record::{Record, Recorder, Recording};
    use livetalk_live::wire::ClientMessage;

    let settings = default_settings();
    let mock = fast_mock(Vec::new()).await;
    let home = SmartHome::new();
    let registry = Arc::new(
        builtin_registry(&settings.tools_enabled, settings.tool_limits, home.clone()).unwrap(),
    );
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("rec");
    let mut engine = Engine::new(registry.clone(), &home, livetalk::tools::Decider::Person);
    engine.record_into(Recorder::create(&dir, &settings, home.snapshot()).unwrap());
    let mut app = App::new(AppInit::new(settings.model.clone(), true, home.snapshot()));
    connect(&mut engine, &mock, &settings, &registry, CONNECT).await;
    for line in &SMART_HOME_LINES[..2] {
        until_ready(&mut app, &mut engine).await;
        apply(&mut app, &mut engine, Msg::UserText((*line).into())).await;
    }
    until_ready(&mut app, &mut engine).await;
    drop(engine);

    let frames = app.wire().frames();
    assert_eq!(app.wire().dropped(), 0);
    assert!(
        frames
            .iter()
            .zip(frames.iter().skip(1))
            .all(|(a, b)| a.at <= b.at)
    );
    let kinds: Vec<String> = frames
        .iter()
        .map(|frame| match &frame.body {
            WireBody::Sent(message) => match message.as_ref() {
                ClientMessage::Setup(_) => "sent setup".to_owned(),
                ClientMessage::ClientContent(_) => "sent text".to_owned(),
                ClientMessage::ToolResponse(_) => "sent answer".to_owned(),
                other => format!("sent {other:?}"),
            },
            WireBody::Received { message, .. } if message.setup_complete.is_some() => {
                format!("setup complete, handshake {}", frame.handshake)
            }
            WireBody::Received { message, .. } if message.tool_call.is_some() => "call".to_owned(),
            WireBody::Received { .. } => "received".to_owned(),
            WireBody::Unreadable(why) => format!("unreadable {why}"),
        })
        .collect();
    assert_eq!(kinds[..2], ["sent setup", "setup complete, handshake true"]);
    let sent: Vec<&String> = kinds.iter().filter(|k| k.starts_with("sent")).collect();
    assert_eq!(
        sent,
        [
            "sent setup",
            "sent text",
            "sent answer",
            "sent text",
            "sent answer"
        ],
        "{kinds:#?}"
    );
    // Each answer went after its call, each call after the text that asked for it.
    let at = |kind: &str, nth: usize| {
        kinds
            .iter()
            .enumerate()
            .filter(|(_, k)| *k == kind)
            .nth(nth)
            .unwrap()
            .0
    };
    for turn in 0..2 {
        assert!(at("sent text", turn) < at("call", turn), "{kinds:#?}");
        assert!(at("call", turn) < at("sent answer", turn), "{kinds:#?}");
    }
    assert!(frames.iter().all(|f| f.bytes > 0), "every frame has a size");
    // The log keeps how much audio each frame carried, not the samples.
    let audio_bytes: usize = frames
        .iter()
        .filter(|f| matches!(f.body, WireBody::Received { .. }))
        .map(|f| f.elided)
        .sum();
    assert_eq!(audio_bytes as u64, app.model_audio_bytes());
    let kept: usize = frames
        .iter()
        .filter_map(|f| match &f.body {
            WireBody::Received { message: m, .. } => m.server_content.as_ref()?.model_turn.as_ref(),
            _ => None,
        })
        .flat_map(|turn| &turn.parts)
        .filter_map(|part| part.inline_data.as_ref())
        .map(|blob| blob.data.len())
        .sum();
    assert_eq!(kept, 0);

    let recording = Recording::load(&dir).unwrap();
    let received = recording
        .lines()
        .filter(|l| matches!(l.record, Record::Recv { .. }))
        .count();
    let sent_lines = recording
        .lines()
        .filter(|l| matches!(l.record, Record::Send { .. }))
        .count();
    let received_frames = frames
        .iter()
        .filter(|f| !matches!(f.body, WireBody::Sent(_)))
        .count();
    assert_eq!((received, sent_lines), (received_frames, sent.len()));
    let applied_audio: Vec<_> = recording
        .lines()
        .filter_map(|l| match &l.record {
            Record::Applied { audio, .. } => audio.clone(),
            _ => None,
        })
        .collect();
    // The chunks were applied in the order their frames put them in the file, each once.
    let mut next = 0;
    for at in &applied_audio {
        assert_eq!(at.sample_offset, next, "{applied_audio:?}");
        next += at.sample_count;
    }
    let model = hound::WavReader::open(dir.join("model.wav")).unwrap();
    assert_eq!(u64::from(model.duration()), next);
    assert_eq!(next * 2, app.model_audio_bytes());
}

/// With the event inspector open, what the mic sends reaches it while the server says nothing
/// (the engine takes in sent frames as they go, not with the next frame read), and closing it
/// tells the engine so.
#[tokio::test(flavor = "multi_thread")]
async fn sent_frames_reach_the_open_inspector_while_the_server_is_silent() {
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    use livetalk::app::{ConnectionState, WireBody};
    use livetalk_live::wire::ClientMessage;

    let settings = default_settings();
    let mock = fast_mock(Vec::new()).await;
    let home = SmartHome::new();
    let registry = Arc::new(
        builtin_registry(&settings.tools_enabled, settings.tool_limits, home.clone()).unwrap(),
    );
    let mut engine = Engine::new(registry.clone(), &home, livetalk::tools::Decider::Person);
    let mut app = App::new(AppInit::new(settings.model.clone(), true, home.snapshot()));
    connect(&mut engine, &mock, &settings, &registry, CONNECT).await;
    run_until(
        &mut app,
        &mut engine,
        REACH,
        "the session is set up",
        |app| *app.connection() == ConnectionState::Connected,
    )
    .await;
    // What the mock says after setup (a resumption handle) is in first: a frame read later
    // would bring the sent ones along and prove nothing.
    run_until(
        &mut app,
        &mut engine,
        REACH,
        "the first resumption handle",
        |app| {
            app.wire().frames().iter().any(|f| {
            matches!(&f.body, WireBody::Received { message: m, .. } if m.session_resumption_update.is_some())
        })
        },
    )
    .await;
    let f12 = || Msg::Key(KeyEvent::new(KeyCode::F(12), KeyModifiers::NONE));
    apply(&mut app, &mut engine, f12()).await;
    assert!(app.inspecting());
    let mic_frames = |app: &App| {
        app.wire()
            .frames()
            .iter()
            .filter(|f| {
                matches!(&f.body, WireBody::Sent(m) if matches!(m.as_ref(), ClientMessage::RealtimeInput(_)))
            })
            .count()
    };
    // Silence: the mock's speech detector hears nothing, so nothing comes back.
    for _ in 0..3 {
        engine.send_audio(vec![0; 640]).await;
    }
    run_until(
        &mut app,
        &mut engine,
        REACH,
        "the mic's frames in the inspector",
        |app| mic_frames(app) == 3,
    )
    .await;
    // They came on their own: the server read nothing after the first of them was sent (had
    // they waited for a frame from the server, one would be in the log after them).
    let frames = app.wire().frames();
    let first_mic = frames
        .iter()
        .find(|f| matches!(&f.body, WireBody::Sent(m) if matches!(m.as_ref(), ClientMessage::RealtimeInput(_))))
        .unwrap()
        .at;
    let read_after: Vec<_> = frames
        .iter()
        .filter(|f| !matches!(f.body, WireBody::Sent(_)) && f.at > first_mic)
        .collect();
    assert!(read_after.is_empty(), "{read_after:#?}");
    apply(&mut app, &mut engine, f12()).await;
    assert!(!app.inspecting());
    assert_eq!(app.wire().dropped(), 0);
}
