//! Snapshots of the drawn screen in each state, at 80×24, 120×40 and 40×10 (and a narrow 60×20),
//! with a fixed clock so the files are stable.

use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::{Value, json};

use crate::app::{App, AppInit, Msg};
use crate::tools::{SmartHome, ToolEvent, ToolOutcome, ToolStatus};
use livetalk_live::wire::{FunctionCall, FunctionResponse};
use livetalk_live::{CloseInfo, ServerEvent};

fn half_past_ten() -> jiff::civil::Time {
    jiff::civil::time(10, 30, 5, 0)
}

fn init() -> AppInit {
    AppInit {
        voice: "Puck".into(),
        endpoint_label: "offline demo model".into(),
        clock: half_past_ten,
        log_path: Some("/home/dev/.local/share/livetalk/livetalk.log".into()),
        ..AppInit::new("models/gemini-3.8-live", true, SmartHome::new().snapshot())
    }
}

fn new_app() -> App {
    App::new(init())
}

fn session(app: &mut App, event: ServerEvent) {
    app.update(Msg::Server(event));
}

fn connected_from(mut app: App) -> App {
    session(&mut app, ServerEvent::SetupComplete { session_id: None });
    app
}

fn tool_call(app: &mut App, id: &str, name: &str, args: Value) {
    session(
        app,
        ServerEvent::ToolCall(vec![FunctionCall {
            id: Some(id.into()),
            name: name.into(),
            args,
        }]),
    );
}

fn tool_done(app: &mut App, id: &str, name: &str, status: ToolStatus, response: Value) {
    app.update(Msg::Tool(ToolEvent::Finished(ToolOutcome {
        key: None,
        id: Some(id.into()),
        name: name.into(),
        args: json!({}),
        status,
        response: FunctionResponse {
            id: Some(id.into()),
            name: name.into(),
            response,
            ..FunctionResponse::default()
        },
        duration: Duration::from_micros(420),
        truncated: false,
        unasked: None,
    })));
}

fn model_says(app: &mut App, text: &str, complete: bool) {
    session(
        app,
        ServerEvent::OutputTranscription {
            text: text.into(),
            finished: false,
        },
    );
    if complete {
        session(
            app,
            ServerEvent::TurnComplete {
                reason: None,
                waiting_for_input: false,
            },
        );
    }
}

/// After the first turn of the smart-home dialogue: a tool call answered and the reply complete.
fn listening() -> App {
    listening_from(new_app())
}

fn listening_from(app: App) -> App {
    let mut app = connected_from(app);
    app.update(Msg::UserText("Is the living room lamp on?".into()));
    let lamp = json!({"device_name": "living room lamp"});
    tool_call(&mut app, "function-call-1", "get_device_status", lamp);
    let state = SmartHome::new().snapshot()[0].state();
    tool_done(
        &mut app,
        "function-call-1",
        "get_device_status",
        ToolStatus::Ok,
        state,
    );
    model_says(&mut app, "No, the living room lamp is currently off.", true);
    app
}

/// The second turn of the smart-home dialogue, mid-reply: the lamp just turned blue.
fn speaking() -> App {
    speaking_from(new_app())
}

fn speaking_from(app: App) -> App {
    let mut app = listening_from(app);
    app.update(Msg::UserText(
        "Okay, please turn it on and set its color to blue.".into(),
    ));
    let args = json!({"device_name": "living room lamp", "new_status": "on", "setting": {"color": "blue"}});
    tool_call(&mut app, "function-call-2", "set_device_status", args);
    let mut devices = app.devices().to_vec();
    devices[0].status = "on".into();
    devices[0].color = Some("blue".into());
    devices[0].brightness = Some(100);
    let state = devices[0].state();
    app.update(Msg::DevicesChanged(devices));
    tool_done(
        &mut app,
        "function-call-2",
        "set_device_status",
        ToolStatus::Ok,
        state,
    );
    model_says(
        &mut app,
        "Alright, I've turned on the living room lamp",
        false,
    );
    app
}

fn tool_running() -> App {
    let mut app = listening();
    app.update(Msg::UserText(
        "What's the kitchen thermostat set to?".into(),
    ));
    let args = json!({"device_name": "kitchen thermostat"});
    tool_call(&mut app, "function-call-2", "get_device_status", args);
    app
}

fn tool_error() -> App {
    let mut app = listening();
    app.update(Msg::UserText("Set the thermostat to 90 degrees.".into()));
    let args = json!({"device_name": "kitchen thermostat", "new_status": "heating", "setting": {"temperature_celsius": 90}});
    tool_call(&mut app, "function-call-2", "set_device_status", args);
    let message = "temperature_celsius must be between 5 and 35, got 90";
    tool_done(
        &mut app,
        "function-call-2",
        "set_device_status",
        ToolStatus::Error(message.into()),
        json!({"error": message}),
    );
    model_says(
        &mut app,
        "I can't set it that high; the thermostat goes up to 35 degrees.",
        true,
    );
    app
}

fn key(app: &mut App, code: KeyCode) {
    app.update(Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)));
}

/// Draws twice, as the loop does: the first frame reports the layout the second uses.
fn render(app: &mut App, width: u16, height: u16) -> Terminal<TestBackend> {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("test terminal");
    for _ in 0..2 {
        let mut layout = None;
        terminal
            .draw(|frame| layout = Some(super::draw(frame, app)))
            .expect("draw");
        if let Some(layout) = layout {
            app.update(Msg::Layout(layout));
        }
    }
    terminal
}

/// Snapshots of one state at the sizes people use: roomy, the classic terminal, and small.
fn snapshot_sizes(name: &str, make: fn() -> App) {
    for (width, height) in [(80, 24), (120, 40), (40, 10)] {
        let mut app = make();
        let terminal = render(&mut app, width, height);
        insta::assert_snapshot!(format!("{name}_{width}x{height}"), terminal.backend());
    }
}

#[test]
fn connecting() {
    snapshot_sizes("connecting", new_app);
}

#[test]
fn listening_after_a_tool_call() {
    snapshot_sizes("listening", listening);
}

#[test]
fn speaking_with_a_device_just_changed() {
    snapshot_sizes("speaking", speaking);
}

#[test]
fn tool_call_running() {
    snapshot_sizes("tool_running", tool_running);
}

#[test]
fn tool_call_failed() {
    snapshot_sizes("tool_error", tool_error);
}

#[test]
fn help_popup() {
    snapshot_sizes("help_popup", || {
        let mut app = listening();
        key(&mut app, KeyCode::F(1));
        app
    });
}

#[test]
fn tool_detail_popup() {
    snapshot_sizes("tool_detail", || {
        let mut app = speaking();
        // Tab to the tool log, select the lamp call, open it.
        key(&mut app, KeyCode::Tab);
        key(&mut app, KeyCode::Tab);
        key(&mut app, KeyCode::Enter);
        app
    });
}

#[test]
fn disconnected_with_a_reason() {
    snapshot_sizes("disconnected", || {
        let mut app = listening();
        session(
            &mut app,
            ServerEvent::Closed(CloseInfo {
                code: Some(1011),
                reason: "Internal error".into(),
                message: "The server hit an internal error (1011): Internal error. Try again."
                    .into(),
                initiated_by_client: false,
            }),
        );
        app
    });
}

#[test]
fn narrow_terminal_stacks_panes_and_hides_devices() {
    let mut app = speaking();
    let terminal = render(&mut app, 60, 20);
    assert!(app.view().layout.devices.is_none());
    insta::assert_snapshot!("narrow_60x20", terminal.backend());
    // F2 brings the device panel back when there is room for it.
    let mut app = speaking();
    key(&mut app, KeyCode::F(2));
    let _ = render(&mut app, 80, 24);
    assert!(
        app.view().layout.devices.is_none(),
        "F2 hides it at 80 columns"
    );
}

#[test]
fn scrolled_up_transcript_stays_put_while_the_model_streams() {
    // A short terminal, so the conversation is taller than its pane.
    let mut app = speaking();
    let _ = render(&mut app, 80, 12);
    key(&mut app, KeyCode::PageUp);
    let top = app.view().transcript_top;
    assert!(top.is_some(), "PageUp leaves the bottom");
    model_says(&mut app, " and set its color to blue.", true);
    let terminal = render(&mut app, 80, 12);
    assert_eq!(app.view().transcript_top, top);
    let screen = format!("{}", terminal.backend());
    assert!(screen.contains("scrolled"), "the title says so:\n{screen}");
    key(&mut app, KeyCode::End);
    key(&mut app, KeyCode::Tab);
    key(&mut app, KeyCode::End);
    assert_eq!(app.view().transcript_top, None);
}

#[test]
fn no_color_draws_no_colours() {
    use ratatui::style::Color;
    let mut app = speaking_from(App::new(AppInit {
        no_color: true,
        ..init()
    }));
    let terminal = render(&mut app, 120, 40);
    let buffer = terminal.backend().buffer();
    let coloured = buffer
        .content
        .iter()
        .filter(|cell| cell.fg != Color::Reset || cell.bg != Color::Reset)
        .count();
    assert_eq!(coloured, 0);
    // And with colour, the blue lamp swatch is blue.
    let mut app = speaking();
    let terminal = render(&mut app, 120, 40);
    let swatch = terminal
        .backend()
        .buffer()
        .content
        .iter()
        .find(|cell| cell.symbol() == "█" && cell.fg != Color::Reset)
        .map(|cell| cell.fg);
    assert_eq!(swatch, Some(Color::Rgb(30, 90, 255)));
}

/// Speaking through a real speaker: the mic is gated, both meters move, and the session
/// panel names the devices and resampling paths.
fn speaking_with_audio() -> App {
    use crate::audio::{AudioEvent, AudioSetup, StreamInfo};
    // Audio asked for: devices with a microphone.
    let mut app = speaking_from(App::new(AppInit {
        audio: Some(crate::app::AudioAsked::from(
            &crate::audio::AudioOptions::default(),
        )),
        ..init()
    }));
    app.update(Msg::Audio(AudioEvent::Opened(AudioSetup {
        input: Some(StreamInfo {
            name: "alsa_input.usb-headset".into(),
            path: "48 kHz → 16 kHz".into(),
        }),
        output: Some(StreamInfo {
            name: "alsa_output.pci-analog-stereo".into(),
            path: "24 kHz → 48 kHz".into(),
        }),
        problems: Vec::new(),
    })));
    app.update(Msg::Audio(AudioEvent::Audible(true)));
    app.update(Msg::Audio(AudioEvent::Levels {
        mic: 0.02,
        output: 0.5,
    }));
    app
}

#[test]
fn speaking_with_audio_devices() {
    snapshot_sizes("speaking_with_audio", speaking_with_audio);
}

#[test]
fn audio_popup_shows_devices_counters_and_latencies() {
    use crate::audio::{AudioEvent, AudioFigures, Latency};
    let mut app = speaking_with_audio();
    let ms = |v: u64| Duration::from_millis(v);
    app.update(Msg::Audio(AudioEvent::Figures(AudioFigures {
        frames_sent: 512,
        frames_dropped: 3,
        frames_gated: 140,
        mic_overflow: 0,
        mic_gaps: Duration::from_millis(20),
        underruns: 1,
        played: Duration::from_millis(6400),
        mic_to_socket: Latency {
            last: ms(6),
            worst: ms(11),
            count: 512,
        },
        socket_to_speaker: Latency {
            last: ms(52),
            worst: ms(61),
            count: 3,
        },
        interrupt_to_silence: Latency::default(),
    })));
    key(&mut app, KeyCode::F(4));
    let terminal = render(&mut app, 120, 40);
    insta::assert_snapshot!("audio_popup_120x40", terminal.backend());
}

/// The audio popup at 80×24 (where lines must not wrap), with these canceller figures.
fn audio_popup_with_echo(name: &str, figures: crate::audio::EchoFigures) {
    use crate::audio::AudioEvent;
    let mut app = speaking_with_audio();
    app.update(Msg::Audio(AudioEvent::Echo(figures)));
    key(&mut app, KeyCode::F(4));
    let terminal = render(&mut app, 80, 24);
    insta::assert_snapshot!(name, terminal.backend());
}

#[test]
fn audio_popup_shows_a_converged_echo_canceller() {
    audio_popup_with_echo(
        "audio_popup_echo_converged_80x24",
        crate::audio::EchoFigures {
            mode: crate::audio::EchoMode::Aec,
            cancelling: true,
            noise_suppression: true,
            device_delay_ms: Some(72),
            delay_ms: Some(84),
            erle_db: Some(31.6),
            erl_db: Some(12.2),
            converged: true,
            far_end_secs: 12.4,
            echo_heard: false,
        },
    );
}

#[test]
fn audio_popup_shows_a_cold_start_echo_canceller() {
    audio_popup_with_echo(
        "audio_popup_echo_cold_start_80x24",
        crate::audio::EchoFigures {
            mode: crate::audio::EchoMode::Aec,
            cancelling: true,
            noise_suppression: true,
            device_delay_ms: Some(72),
            delay_ms: None,
            erle_db: Some(2.4),
            erl_db: Some(11.0),
            converged: false,
            far_end_secs: 0.4,
            echo_heard: false,
        },
    );
}

#[test]
fn audio_popup_shows_the_echo_gate_without_canceller_figures() {
    use crate::audio::{EchoFigures, EchoMode};
    audio_popup_with_echo(
        "audio_popup_echo_gate_80x24",
        EchoFigures {
            mode: EchoMode::Gate,
            noise_suppression: false,
            device_delay_ms: Some(72),
            ..EchoFigures::default()
        },
    );
}

#[test]
fn the_echo_canceller_says_when_it_has_heard_nothing_yet() {
    use crate::audio::{AudioEvent, EchoFigures, EchoMode};
    let text = |app: &App| {
        super::audio_panel::detail_lines(app, super::Theme::new(true))
            .iter()
            .map(|line| line.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let mut app = speaking_with_audio();
    let shown = text(&app);
    assert!(shown.contains("starting: no echo heard yet"), "{shown}");
    app.update(Msg::Audio(AudioEvent::Echo(EchoFigures {
        mode: EchoMode::Aec,
        cancelling: true,
        noise_suppression: true,
        ..EchoFigures::default()
    })));
    let shown = text(&app);
    assert!(
        shown.contains("waiting for the speaker: Gemini not heard yet"),
        "{shown}"
    );
    assert!(shown.contains("(ERLE)   not measured yet"), "{shown}");
    assert!(
        shown.contains("not found yet · device clocks unknown"),
        "{shown}"
    );
    // Off: nothing to cancel, and no canceller figures.
    app.update(Msg::SetEcho(EchoMode::Off));
    let shown = text(&app);
    assert!(
        shown.contains("not running (echo handling is off)"),
        "{shown}"
    );
    assert!(!shown.contains("ERLE"), "{shown}");
}

/// Gemini cut off by the service while its own voice came back through the mic.
fn interrupted_by_echo() -> App {
    use crate::audio::{AudioEvent, EchoFigures, EchoMode};
    let mut app = speaking_with_audio();
    app.update(Msg::Audio(AudioEvent::Echo(EchoFigures {
        mode: EchoMode::Aec,
        cancelling: true,
        echo_heard: true,
        ..EchoFigures::default()
    })));
    session(&mut app, ServerEvent::Interrupted);
    app
}

#[test]
fn an_interruption_by_echo_is_marked_with_the_key_that_switches_echo_handling() {
    snapshot_sizes("interrupted_by_echo", interrupted_by_echo);
}

fn with_mcp_tools() -> App {
    use crate::tools::ToolEntry;
    use crate::tools::Unasked;
    use crate::tools::mcp::{Catalog, ServerEntry, ServerState};
    let builtin = |name: &str| ToolEntry {
        name: name.into(),
        server: None,
        description: String::new(),
        enabled: true,
        unasked: Some(Unasked::BuiltIn),
    };
    let mcp = |name: &str, server: &str, enabled: bool, unasked| ToolEntry {
        name: name.into(),
        server: Some(server.into()),
        description: String::new(),
        enabled,
        unasked,
    };
    let mut app = App::new(AppInit {
        catalog: Catalog {
            tools: vec![
                builtin("end_session"),
                mcp(
                    "echo",
                    "everything",
                    true,
                    Some(Unasked::ServerSaysReadOnly),
                ),
                builtin("get_current_time"),
                mcp("get-sum", "everything", false, None),
                mcp("notes__search", "notes", true, Some(Unasked::SetToNever)),
            ],
            servers: vec![
                ServerEntry {
                    name: "everything".into(),
                    state: ServerState::Up,
                },
                ServerEntry {
                    name: "notes".into(),
                    state: ServerState::Down("stopped (its last words: out of memory)".into()),
                },
            ],
        },
        ..init()
    });
    session(&mut app, ServerEvent::SetupComplete { session_id: None });
    tool_call(
        &mut app,
        "c1",
        "trigger-long-running-operation",
        json!({"steps": 5}),
    );
    app.update(Msg::Tool(ToolEvent::Progress(
        crate::tools::ProgressReport {
            key: crate::tools::CallKey(0),
            id: Some("c1".into()),
            name: "trigger-long-running-operation".into(),
            progress: 2.0,
            total: Some(5.0),
            message: Some("step 2 of 5".into()),
        },
    )));
    app
}

#[test]
fn tool_list_popup() {
    snapshot_sizes("tool_list", || {
        let mut app = with_mcp_tools();
        key(&mut app, KeyCode::F(8));
        key(&mut app, KeyCode::Down);
        app
    });
}

#[test]
fn progress_of_a_running_call() {
    snapshot_sizes("tool_progress", with_mcp_tools);
}

/// 3.8 Live: between a `turnComplete` marked `IN_PROGRESS` and `IDLE` the badge says the model
/// is still at work.
#[test]
fn the_badge_says_working_until_the_interaction_is_idle() {
    let mut app = App::new(AppInit::new("models/gemini-3.8-live", true, Vec::new()));
    app.update(Msg::Server(ServerEvent::SetupComplete { session_id: None }));
    app.update(Msg::UserText("Is the lamp on?".into()));
    app.update(Msg::Server(ServerEvent::ModelText("One moment.".into())));
    app.update(Msg::Server(ServerEvent::Interaction { idle: false }));
    app.update(Msg::Server(ServerEvent::TurnComplete {
        reason: None,
        waiting_for_input: false,
    }));
    let status = |app: &mut App| {
        let terminal = render(app, 80, 24);
        let buffer = terminal.backend().buffer();
        (0..80)
            .map(|x| buffer[(x, 0)].symbol().to_owned())
            .collect::<String>()
    };
    let working = status(&mut app);
    assert!(working.contains("Gemini is working"), "{working}");
    app.update(Msg::Server(ServerEvent::Interaction { idle: true }));
    let idle = status(&mut app);
    assert!(idle.contains("Gemini is listening"), "{idle}");
}

/// Presses keys as the drive loop delivers them, intents included; only the screen counts
/// here, so the other effects are dropped.
fn keys(app: &mut App, codes: &[KeyCode]) {
    for code in codes {
        crate::driver::apply_collecting(app, Msg::Key(KeyEvent::new(*code, KeyModifiers::NONE)));
    }
}

fn typed(app: &mut App, text: &str) {
    keys(app, &text.chars().map(KeyCode::Char).collect::<Vec<_>>());
}

/// The second turn asks to turn the lamp on; `set_device_status` needs approval, so the call
/// waits for the user.
fn tool_waiting() -> App {
    let mut app = listening();
    app.update(Msg::UserText("Turn on the lamp.".into()));
    let args = json!({"device_name": "living room lamp", "new_status": "on"});
    tool_call(&mut app, "function-call-2", "set_device_status", args);
    app.update(Msg::Tool(ToolEvent::Waiting(crate::tools::WaitingCall {
        key: crate::tools::CallKey(1),
        id: Some("function-call-2".into()),
        name: "set_device_status".into(),
    })));
    app
}

#[test]
fn a_call_waiting_for_the_user() {
    snapshot_sizes("tool_waiting", tool_waiting);
    snapshot_sizes("tool_waiting_selected", || {
        let mut app = tool_waiting();
        keys(&mut app, &[KeyCode::F(7)]);
        app
    });
}

#[test]
fn the_argument_editor_says_why_json_is_refused() {
    snapshot_sizes("tool_edit_bad_json", || {
        let mut app = tool_waiting();
        keys(&mut app, &[KeyCode::F(7), KeyCode::Char('e'), KeyCode::End]);
        // Drop the closing brace and add a key without a value.
        keys(&mut app, &[KeyCode::Backspace]);
        typed(&mut app, ", \"setting\": }");
        keys(&mut app, &[KeyCode::Enter]);
        app
    });
}

#[test]
fn a_result_typed_by_hand() {
    snapshot_sizes("tool_answer_typing", || {
        let mut app = tool_waiting();
        keys(&mut app, &[KeyCode::F(7), KeyCode::Char('r')]);
        typed(&mut app, "error: garage on fire");
        app
    });
    snapshot_sizes("tool_answered_by_hand", || {
        let mut app = tool_waiting();
        keys(&mut app, &[KeyCode::F(7), KeyCode::Char('r')]);
        typed(&mut app, "error: garage on fire");
        keys(&mut app, &[KeyCode::Enter]);
        app.update(Msg::Tool(ToolEvent::Finished(ToolOutcome {
            key: Some(crate::tools::CallKey(1)),
            id: Some("function-call-2".into()),
            name: "set_device_status".into(),
            args: json!({"device_name": "living room lamp", "new_status": "on"}),
            status: ToolStatus::ByHand,
            response: FunctionResponse {
                id: Some("function-call-2".into()),
                name: "set_device_status".into(),
                response: json!({"error": "garage on fire"}),
                ..FunctionResponse::default()
            },
            duration: Duration::from_secs(4),
            truncated: false,
            unasked: None,
        })));
        model_says(&mut app, "Oh no, the garage is on fire!", true);
        app
    });
}

/// A turn sent, nothing of the reply yet.
fn thinking() -> App {
    let mut app = listening();
    app.update(Msg::UserText("Turn it on and make it blue".into()));
    app
}

#[test]
fn the_badge_says_thinking_while_the_reply_is_awaited() {
    snapshot_sizes("badge_thinking", thinking);
}

/// The link dropped mid-reply and is being reconnected to.
fn reconnecting() -> App {
    let mut app = speaking();
    app.update(Msg::SessionChange(
        livetalk_live::session::SessionChange::Reconnecting {
            planned: false,
            attempt: 2,
            reason: "The connection was lost.".into(),
            retry_in: Duration::from_millis(1500),
        },
    ));
    app
}

#[test]
fn the_badge_says_reconnecting_not_listening_while_the_link_is_down() {
    snapshot_sizes("badge_reconnecting", reconnecting);
    for (width, height) in [(80, 24), (120, 40), (40, 10)] {
        let mut app = reconnecting();
        let screen = format!("{}", render(&mut app, width, height).backend());
        assert!(!screen.contains("listening"), "{screen}");
        assert!(screen.contains("Reconnecting…"), "{screen}");
    }
}

/// The goodbye said, the session closed by `end_session`.
fn ended() -> App {
    let mut app = listening();
    app.update(Msg::UserText("Thanks, goodbye!".into()));
    tool_call(&mut app, "function-call-2", "end_session", json!({}));
    tool_done(
        &mut app,
        "function-call-2",
        "end_session",
        ToolStatus::Ok,
        json!({"success": true}),
    );
    model_says(
        &mut app,
        "You're welcome! Goodbye, and have a lovely evening with your blue lamp.",
        true,
    );
    session(&mut app, ServerEvent::Closed(CloseInfo::ended_by_client()));
    app
}

#[test]
fn the_ending_keeps_the_goodbye_and_says_the_session_ended() {
    snapshot_sizes("ended", ended);
    let mut app = ended();
    let screen = format!("{}", render(&mut app, 80, 24).backend());
    assert!(screen.contains("have a lovely evening"), "{screen}");
    assert!(screen.contains("Press any key to leave"), "{screen}");
}

/// What `set_device_status` answers for these arguments.
fn set_device(home: &SmartHome, args: &Value) -> Value {
    let setting: Option<crate::tools::Setting> = args
        .get("setting")
        .map(|s| serde_json::from_value(s.clone()).expect("a setting"));
    let report = home
        .set(
            args["device_name"].as_str().unwrap_or_default(),
            args["new_status"].as_str().unwrap_or_default(),
            setting.as_ref(),
        )
        .expect("a change the smart home takes");
    let mut response = report.device.state();
    response["settings_updated"] = Value::Object(report.settings_updated);
    response
}

/// Each change the demo model makes, answered as the smart home answers it.
fn summaries() -> App {
    let mut app = connected_from(new_app());
    let home = SmartHome::new();
    let changes = [
        (
            "Turn it on and make it blue",
            json!({"device_name": "living room lamp", "new_status": "on", "setting": {"color": "blue"}}),
        ),
        (
            "Dim the lamp to 30%",
            json!({"device_name": "living room lamp", "new_status": "on", "setting": {"brightness": 30}}),
        ),
        (
            "Set the thermostat to 22 degrees",
            json!({"device_name": "kitchen thermostat", "new_status": "heating", "setting": {"temperature_celsius": 22}}),
        ),
        (
            "Unlock the front door",
            json!({"device_name": "front door lock", "new_status": "unlocked"}),
        ),
    ];
    for (i, (said, args)) in changes.into_iter().enumerate() {
        let id = format!("function-call-{i}");
        app.update(Msg::UserText(said.into()));
        tool_call(&mut app, &id, "set_device_status", args.clone());
        let response = set_device(&home, &args);
        app.update(Msg::DevicesChanged(home.snapshot()));
        tool_done(&mut app, &id, "set_device_status", ToolStatus::Ok, response);
        model_says(&mut app, "Done.", true);
    }
    app
}

#[test]
fn summaries_say_what_changed_first_each_field_once() {
    snapshot_sizes("summaries", summaries);
    let mut app = summaries();
    let screen = format!("{}", render(&mut app, 200, 40).backend());
    assert!(
        screen.contains("brightness: 100, color: blue, status: on"),
        "{screen}"
    );
    assert!(screen.contains("brightness: 30, status: on"), "{screen}");
    // At 80 columns the device panel keeps brightness and degrees.
    let screen = format!("{}", render(&mut app, 80, 24).backend());
    assert!(
        screen.contains("30%") && screen.contains("22.0 °C"),
        "{screen}"
    );
}

/// A replay, paused part way.
fn replaying() -> App {
    let mut app = App::new(AppInit {
        replay: Some(40),
        recording: Some("/home/dev/.local/share/livetalk/recordings/2026-11-25T16-48-27".into()),
        ..init()
    });
    app = listening_from(app);
    app.update(Msg::ReplayProgress(crate::app::ReplayProgress {
        applied: 12,
        total: 40,
        paused: true,
        speed_percent: Some(50),
    }));
    app
}

#[test]
fn a_replay_has_its_own_controls_and_help() {
    snapshot_sizes("replay", replaying);
    snapshot_sizes("replay_help", || {
        let mut app = replaying();
        key(&mut app, KeyCode::F(1));
        app
    });
    let mut app = replaying();
    let screen = format!("{}", render(&mut app, 80, 24).backend());
    assert!(
        !screen.contains("Message") && !screen.contains("Enter send"),
        "{screen}"
    );
    assert!(
        screen.contains("Space pause") && screen.contains("q quit"),
        "{screen}"
    );
}

/// Nothing said yet, with the offline demo model and no audio.
fn empty_screen() -> App {
    connected_from(new_app())
}

#[test]
fn the_empty_screen_suggests_what_the_demo_model_understands() {
    snapshot_sizes("empty", empty_screen);
    let mut app = empty_screen();
    let screen = format!("{}", render(&mut app, 120, 40).backend());
    assert!(!screen.contains("Say something"), "no mic:\n{screen}");
    for prompt in livetalk_mock::DEMO_PROMPTS {
        assert!(screen.contains(prompt), "{prompt:?}:\n{screen}");
    }
    assert!(
        !screen.contains(livetalk_mock::SEARCH_PROMPT),
        "no search without Search:\n{screen}"
    );
    // With Search on, a search is suggested too.
    let mut registry = crate::tools::Registry::new(crate::tools::ToolLimits::default());
    registry.declare_google_search(true);
    let mut app = connected_from(App::new(AppInit {
        catalog: crate::tools::mcp::Catalog {
            tools: registry.entries(),
            servers: Vec::new(),
        },
        ..init()
    }));
    let screen = format!("{}", render(&mut app, 120, 40).backend());
    assert!(
        screen.contains(livetalk_mock::SEARCH_PROMPT),
        "{}:\n{screen}",
        livetalk_mock::SEARCH_PROMPT
    );
}

#[test]
fn a_screen_too_small_says_so() {
    let mut app = listening();
    let terminal = render(&mut app, 28, 6);
    insta::assert_snapshot!("too_small_28x6", terminal.backend());
    // At 40×10 with a notice, the input keeps its room and the notice is cut at a word.
    snapshot_sizes("long_notice", || {
        let mut app = listening();
        session(
            &mut app,
            ServerEvent::Closed(CloseInfo {
                code: Some(1008),
                reason: String::new(),
                message: "models/gemini-2.0-flash-live-001 is not found for API version v1, or is not supported for bidiGenerateContent. Call ListModels to see the list of available models and their supported methods.".into(),
                initiated_by_client: false,
            }),
        );
        app
    });
}

#[test]
fn the_status_line_gives_way_by_importance_and_never_cuts_a_word() {
    let mut app = App::new(AppInit {
        recording: Some("REC /home/me/.local/share/livetalk/recordings/2026-11-25T16-48-27".into()),
        ..init()
    });
    app = listening_from(app);
    for width in [40u16, 60, 80, 100, 120] {
        let terminal = render(&mut app, width, 24);
        let status: String = (0..width)
            .map(|x| terminal.backend().buffer()[(x, 0)].symbol().to_owned())
            .collect();
        assert!(status.contains("Gemini is listening…"), "{width}: {status}");
        // The recording shows by its folder's name, never its path (the way out prints it).
        assert!(!status.contains("/home"), "{width}: {status}");
        if width >= 100 {
            assert!(
                status.contains("● REC 2026-11-25T16-48-27"),
                "{width}: {status}"
            );
        }
        assert!(
            !status.contains("· off ") && !status.trim_end().ends_with("· off"),
            "{width}: {status}"
        );
    }
}

#[test]
fn the_empty_screen_says_how_to_speak_in_push_to_talk_mode() {
    let mut app = connected_from(App::new(AppInit {
        audio: Some(crate::app::AudioAsked {
            microphone: true,
            input_wav: false,
            output_wav: false,
            push_to_talk: true,
            echo: crate::audio::EchoMode::Aec,
        }),
        ..init()
    }));
    let screen = format!("{}", render(&mut app, 80, 24).backend());
    assert!(screen.contains("Press F5 and speak"), "{screen}");
    assert!(
        screen.contains("F5 talk"),
        "the footer offers it:\n{screen}"
    );
    assert!(!screen.contains("Say something"), "{screen}");
}

/// A session on Google's service three turns in, as the wire and the speaker told it: the
/// session panel's figures (wide) or the status line's (narrow).
fn session_with_figures() -> App {
    use crate::app::{WireBody, WireFrame};
    use crate::audio::{AudioEvent, AudioSetup};
    use std::time::Instant;
    let mut app = App::new(AppInit {
        endpoint_label: "generativelanguage.googleapis.com".into(),
        price_book: crate::pricing::PriceBook::for_host(
            "generativelanguage.googleapis.com",
            Default::default(),
        ),
        compression_trigger: Some(104_857),
        ..AppInit::new("models/gemini-3.8-live", false, SmartHome::new().snapshot())
    });
    let start = Instant::now();
    let frame = |app: &mut App, ms: u64, body: WireBody| {
        app.update(Msg::Wire(WireFrame {
            at: start + Duration::from_millis(ms),
            bytes: 100,
            handshake: false,
            elided: 0,
            missed_before: 0,
            body,
        }));
    };
    let received = |app: &mut App, ms: u64, json: &str| {
        let inbound = livetalk_live::Inbound::message(serde_json::from_str(json).unwrap());
        let body = WireFrame::received(&inbound).unwrap().body;
        frame(app, ms, body);
        for event in inbound.events {
            app.update(Msg::Server(event));
        }
    };
    received(&mut app, 0, r#"{"setupComplete":{}}"#);
    app.update(Msg::Audio(
        AudioEvent::Opened(AudioSetup::mic_and_speaker()),
    ));
    let audio = r#"{"serverContent":{"modelTurn":{"parts":[{"inlineData":{"mimeType":"audio/pcm;rate=24000","data":"AQACAA=="}}]}}}"#;
    let usage = r#"{"serverContent":{"turnComplete":true},"usageMetadata":{"promptTokenCount":2400,"responseTokenCount":900,"totalTokenCount":3300,
        "promptTokensDetails":[{"modality":"TEXT","tokenCount":400},{"modality":"AUDIO","tokenCount":2000}],
        "responseTokensDetails":[{"modality":"AUDIO","tokenCount":900}]}}"#;
    for (turn, (voice_end, first, audio_at, heard)) in [
        (4_000, 4_090, 4_420, 4_510),
        (12_000, 12_080, 12_900, 13_020),
        (20_000, 20_100, 20_350, 20_470),
    ]
    .into_iter()
    .enumerate()
    {
        received(
            &mut app,
            voice_end,
            r#"{"voiceActivity":{"type":"ACTIVITY_END"}}"#,
        );
        received(
            &mut app,
            first,
            r#"{"serverContent":{"inputTranscription":{"text":"turn on the lamp"}}}"#,
        );
        received(&mut app, audio_at, audio);
        app.update(Msg::Tick(start + Duration::from_millis(heard)));
        app.update(Msg::Audio(AudioEvent::Audible(true)));
        if turn == 1 {
            app.update(Msg::BargeIn);
        } else {
            received(&mut app, heard + 1500, usage);
            app.update(Msg::Audio(AudioEvent::Audible(false)));
        }
    }
    received(
        &mut app,
        30_000,
        r#"{"sessionResumptionUpdate":{"newHandle":"h","resumable":true}}"#,
    );
    received(&mut app, 540_000, r#"{"goAway":{"timeLeft":"50s"}}"#);
    app.update(Msg::Tick(start + Duration::from_millis(552_000)));
    app
}

/// A frame of the first smart-home turn, `ms` after the session's first, as the wire log
/// takes it: a client message if `sent`, else a server message.
fn wire_frame(
    base: std::time::Instant,
    ms: u64,
    sent: bool,
    message: Value,
) -> crate::app::WireFrame {
    use crate::app::{WireBody, WireFrame};
    use std::sync::Arc;
    let bytes = message.to_string().len();
    let body = if sent {
        WireBody::Sent(Arc::new(
            serde_json::from_value(message).expect("a client message"),
        ))
    } else {
        WireBody::received(serde_json::from_value(message).expect("a server message"))
    };
    WireFrame {
        at: base + Duration::from_millis(ms),
        bytes,
        handshake: ms < 100 && !sent,
        elided: 0,
        missed_before: 0,
        body,
    }
}

/// What a tool answered in these frames: a token a careless tool gave away, which the
/// inspector's JSON must not show.
const LEAKED_TOKEN: &str = "ya29.inspector-test-token-8d41c";

/// The first smart-home turn's frames, both ways: setup, the typed turn, the call and its
/// answer, mic audio and model audio side by side, the transcription, the turn's end with
/// usage, a resumption handle and a goAway.
fn with_frames(mut app: App) -> App {
    livetalk_live::redact::remember(LEAKED_TOKEN);
    let base = std::time::Instant::now();
    let mic = || json!({"realtimeInput": {"audio": {"mimeType": "audio/pcm;rate=16000", "data": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}}});
    let model = || json!({"serverContent": {"modelTurn": {"parts": [{"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}}]}}});
    let mut frames = vec![
        wire_frame(
            base,
            0,
            true,
            json!({"setup": {"model": "models/gemini-3.8-live", "tools": [{"functionDeclarations": [{"name": "get_device_status"}, {"name": "set_device_status"}]}], "sessionResumption": {}}}),
        ),
        wire_frame(base, 41, false, json!({"setupComplete": {}})),
        wire_frame(
            base,
            1_020,
            true,
            json!({"clientContent": {"turns": [{"role": "user", "parts": [{"text": "Is the living room lamp on?"}]}], "turnComplete": true}}),
        ),
        wire_frame(
            base,
            1_310,
            false,
            json!({"toolCall": {"functionCalls": [{"id": "function-call-1", "name": "get_device_status", "args": {"device_name": "living room lamp"}}]}}),
        ),
        wire_frame(
            base,
            1_312,
            true,
            json!({"toolResponse": {"functionResponses": [{"id": "function-call-1", "name": "get_device_status", "response": {"status": "off", "session_token": LEAKED_TOKEN}}]}}),
        ),
    ];
    for i in 0..6 {
        frames.push(wire_frame(base, 1_400 + i * 20, true, mic()));
        if i % 2 == 0 {
            frames.push(wire_frame(base, 1_405 + i * 20, false, model()));
        }
    }
    frames.extend([
        wire_frame(base, 1_530, false, json!({"serverContent": {"outputTranscription": {"text": "No, the living room lamp is currently off."}}})),
        wire_frame(base, 1_610, false, json!({"serverContent": {"turnComplete": true}, "usageMetadata": {"totalTokenCount": 412}})),
        wire_frame(base, 1_700, false, json!({"sessionResumptionUpdate": {"newHandle": "CkVzZXNzaW9uLWhhbmRsZS0x", "resumable": true}})),
        wire_frame(base, 61_800, false, json!({"goAway": {"timeLeft": "10s"}})),
    ]);
    for frame in frames {
        app.update(Msg::Wire(frame));
    }
    app
}

fn inspecting() -> App {
    let mut app = with_frames(listening());
    keys(&mut app, &[KeyCode::F(12)]);
    app
}

#[test]
fn the_session_panel_shows_latency_health_and_cost() {
    let mut app = session_with_figures();
    let terminal = render(&mut app, 120, 40);
    insta::assert_snapshot!("session_figures_120x40", terminal.backend());
    let screen = format!("{}", terminal.backend());
    assert!(screen.contains("≈ $0.034 so far"), "{screen}");
    let mut app = session_with_figures();
    let terminal = render(&mut app, 100, 30);
    insta::assert_snapshot!("session_figures_100x30", terminal.backend());
    let screen = format!("{}", terminal.backend());
    assert!(screen.contains("⏱ 470 ms · ≈ $0.034"), "{screen}");
}

#[test]
fn the_event_inspector_lists_every_frame_with_audio_in_runs() {
    snapshot_sizes("inspector", inspecting);
}

#[test]
fn the_event_inspector_filters_conversation_tools_and_session() {
    for (presses, name) in [
        (1, "inspector_conversation"),
        (2, "inspector_tools"),
        (3, "inspector_session"),
    ] {
        let mut app = inspecting();
        for _ in 0..presses {
            keys(&mut app, &[KeyCode::Char('f')]);
        }
        let terminal = render(&mut app, 120, 40);
        insta::assert_snapshot!(name, terminal.backend());
    }
    // A fourth press lists them all again.
    let mut app = inspecting();
    keys(&mut app, &[KeyCode::Char('f'); 4]);
    let all = render(&mut app, 120, 40);
    let first = render(&mut inspecting(), 120, 40);
    assert_eq!(all.backend().buffer(), first.backend().buffer());
}

#[test]
fn the_event_inspector_expands_a_frame_with_its_secrets_scrubbed() {
    let mut app = inspecting();
    // From the newest (the goAway), up to the tool response.
    keys(&mut app, &[KeyCode::Up; 5]);
    keys(&mut app, &[KeyCode::Enter]);
    let terminal = render(&mut app, 120, 40);
    let buffer = terminal.backend().buffer();
    let screen: String = (0..buffer.area.height)
        .map(|y| {
            let row: String = (0..buffer.area.width)
                .map(|x| buffer[(x, y)].symbol().to_owned())
                .collect();
            row + "\n"
        })
        .collect();
    assert!(screen.contains("[redacted]"), "{screen}");
    assert!(!screen.contains(LEAKED_TOKEN), "{screen}");
    insta::assert_snapshot!("inspector_expanded_120x40", terminal.backend());
}

#[test]
fn the_event_inspector_counts_the_frames_it_dropped_or_never_saw() {
    let mut app = inspecting();
    let mut late = wire_frame(
        app.wire().origin().expect("frames were taken in"),
        90_000,
        false,
        json!({"serverContent": {"interrupted": true}}),
    );
    late.missed_before = 12;
    late.handshake = false;
    app.update(Msg::Wire(late));
    let terminal = render(&mut app, 80, 24);
    insta::assert_snapshot!("inspector_dropped_80x24", terminal.backend());
}

/// After `/voice Kore` and `/image`, with the demo model's answer, and `/model` asking first.
fn changed_mid_session() -> App {
    let mut app = listening();
    app.update(Msg::UserText("/voice Kore".into()));
    app.update(Msg::UserText("/image red.png".into()));
    app.update(Msg::Image(Ok(crate::app::ImageSent {
        name: "red.png".into(),
        file_bytes: 2_345,
        width: 640,
        height: 480,
        jpeg: vec![0xff, 0xd8],
        at: std::time::Instant::now(),
    })));
    model_says(&mut app, "I see a 640 by 480 picture, mostly red.", true);
    for c in "/model gemini-3.1-flash-live-preview".chars() {
        key(&mut app, KeyCode::Char(c));
    }
    key(&mut app, KeyCode::Enter);
    app
}

#[test]
fn voice_image_and_a_model_question_in_the_transcript() {
    for (width, height) in [(80, 24), (120, 40)] {
        let mut app = changed_mid_session();
        let terminal = render(&mut app, width, height);
        insta::assert_snapshot!(
            format!("changed_mid_session_{width}x{height}"),
            terminal.backend()
        );
    }
}

/// The text of row `y`.
fn row(terminal: &Terminal<TestBackend>, y: u16) -> String {
    let buffer = terminal.backend().buffer();
    (0..buffer.area.width)
        .map(|x| buffer[(x, y)].symbol().to_owned())
        .collect()
}

#[test]
fn one_token_count_in_the_status_line_and_the_panel_and_latency_kept_at_80_columns() {
    let mut app = session_with_figures();
    let total = app.tokens().total();
    assert_eq!(total, 6600, "the service's totals, summed");
    let wide = render(&mut app, 120, 40);
    let screen = format!("{}", wide.backend());
    assert!(
        row(&wide, 0).contains("· 6,600 tokens"),
        "{}",
        row(&wide, 0)
    );
    assert!(screen.contains("│ Tokens      6,600 "), "{screen}");
    assert!(
        screen.contains("│             audio 5,800 · text 800 "),
        "{screen}"
    );
    assert!(
        screen.contains("│ Last turn   first reply 100 ms "),
        "{screen}"
    );
    assert!(
        screen.contains("│             first audio 350 ms "),
        "{screen}"
    );
    assert!(!screen.contains(" msg "), "{screen}");
    for width in [80u16, 100] {
        let mut app = session_with_figures();
        let terminal = render(&mut app, width, 24);
        let status = row(&terminal, 0);
        assert!(status.contains("⏱ 470 ms"), "{width}: {status}");
    }
}

#[test]
fn the_ages_count_seconds_while_the_panel_shows_them() {
    let mut app = session_with_figures();
    render(&mut app, 120, 40);
    assert!(app.counts_seconds(), "connected, the panel on screen");
    render(&mut app, 100, 30);
    assert!(!app.counts_seconds(), "no panel below 110 columns");
}

#[test]
fn the_offer_to_quit_says_what_esc_does_and_nothing_else() {
    let mut app = listening();
    keys(&mut app, &[KeyCode::Esc]);
    let screen = format!("{}", render(&mut app, 120, 40).backend());
    assert!(screen.contains("Esc again quits"), "{screen}");
    assert!(!screen.contains("Esc dismisses"), "{screen}");
    // Any other notice is dismissed by Esc, and says so.
    let mut app = listening();
    app.update(Msg::UserText("/model gemini-3.8-live".into()));
    let screen = format!("{}", render(&mut app, 120, 40).backend());
    assert!(screen.contains("Esc dismisses"), "{screen}");
}

#[test]
fn the_footer_offers_mute_and_barge_in_only_with_a_device_to_act_on() {
    use crate::audio::{AudioEvent, AudioSetup};
    let asked = crate::app::AudioAsked {
        microphone: true,
        input_wav: false,
        output_wav: false,
        push_to_talk: false,
        echo: crate::audio::EchoMode::Aec,
    };
    let footer = |setup: AudioSetup| {
        let mut app = connected_from(App::new(AppInit {
            audio: Some(asked),
            ..init()
        }));
        app.update(Msg::Audio(AudioEvent::Opened(setup)));
        let terminal = render(&mut app, 120, 40);
        row(&terminal, 39)
    };
    let none = footer(AudioSetup {
        problems: vec!["no input device".into(), "no output device".into()],
        ..AudioSetup::default()
    });
    assert!(!none.contains("F3") && !none.contains("Ctrl-B"), "{none}");
    let both = footer(AudioSetup::mic_and_speaker());
    assert!(
        both.contains("F3 mute") && both.contains("Ctrl-B barge in"),
        "{both}"
    );
}

/// The JSON pane's rows (under its title) on a 120×40 screen.
fn json_rows(app: &mut App) -> Vec<String> {
    let terminal = render(app, 120, 40);
    let rows: Vec<String> = (0..40).map(|y| row(&terminal, y)).collect();
    let Some(title) = rows
        .iter()
        .position(|r| r.starts_with("│ ") && r.contains(" ───"))
    else {
        return Vec::new();
    };
    rows[title + 1..]
        .iter()
        .map(|r| r.trim_matches(|c| c == '│' || c == ' ').to_owned())
        .take_while(|r| !r.starts_with('└'))
        .collect()
}

#[test]
fn changing_the_filter_shows_the_json_from_its_top_and_enter_acts_on_what_shows() {
    // The setup's JSON scrolled down, then a filter that does not list it: the newest frame
    // it lists shows from its first line, and Enter closes what is on screen.
    let mut app = inspecting();
    keys(&mut app, &[KeyCode::Home, KeyCode::Enter]);
    keys(&mut app, &[KeyCode::PageDown; 3]);
    keys(&mut app, &[KeyCode::Char('f')]);
    let json = json_rows(&mut app);
    assert_eq!(json.first().map(String::as_str), Some("{"), "{json:#?}");
    keys(&mut app, &[KeyCode::Enter]);
    assert!(
        json_rows(&mut app).is_empty(),
        "Enter closed the JSON on screen"
    );

    // A filter that lists nothing hides the JSON, and nothing stays open under it: back on
    // a filter with frames, the list shows until Enter asks for the JSON.
    let mut app = connected_from(App::new(init()));
    let base = std::time::Instant::now();
    app.update(Msg::Wire(wire_frame(
        base,
        0,
        true,
        json!({"setup": {"model": "models/gemini-3.8-live"}}),
    )));
    app.update(Msg::Wire(wire_frame(
        base,
        41,
        false,
        json!({"setupComplete": {}}),
    )));
    keys(&mut app, &[KeyCode::F(12), KeyCode::Enter]);
    assert!(!json_rows(&mut app).is_empty(), "the newest frame's JSON");
    keys(&mut app, &[KeyCode::Char('f')]);
    let screen = format!("{}", render(&mut app, 120, 40).backend());
    assert!(screen.contains("No frames of this kind yet"), "{screen}");
    keys(&mut app, &[KeyCode::Enter]);
    keys(&mut app, &[KeyCode::Char('f'); 3]);
    assert!(
        json_rows(&mut app).is_empty(),
        "back on all frames, the list"
    );
    keys(&mut app, &[KeyCode::Enter]);
    assert!(
        !json_rows(&mut app).is_empty(),
        "the first Enter shows the JSON"
    );
}

/// The screen the README and docs/terminal-ui.md show: the smart-home dialogue with the
/// offline demo model through a headset, in the middle of the second reply, the lamp just
/// turned blue; every frame at the time a session took it.
fn the_guides_screen() -> App {
    use crate::app::{WireBody, WireFrame};
    use crate::audio::{AudioEvent, AudioSetup, StreamInfo};
    use std::sync::Arc;
    let mut app = App::new(AppInit {
        audio: Some(crate::app::AudioAsked::from(
            &crate::audio::AudioOptions::default(),
        )),
        ..init()
    });
    let start = std::time::Instant::now();
    let at = |ms: u64| start + Duration::from_millis(ms);
    let sent = |app: &mut App, ms: u64, message: Value| {
        app.update(Msg::Wire(WireFrame {
            at: at(ms),
            bytes: message.to_string().len(),
            handshake: false,
            elided: 0,
            missed_before: 0,
            body: WireBody::Sent(Arc::new(serde_json::from_value(message).unwrap())),
        }));
    };
    let received = |app: &mut App, ms: u64, message: Value| {
        let inbound = livetalk_live::Inbound::message(serde_json::from_value(message).unwrap());
        let frame = WireFrame {
            at: at(ms),
            handshake: ms < 100,
            ..WireFrame::received(&inbound).unwrap()
        };
        app.update(Msg::Wire(frame));
        for event in inbound.events {
            app.update(Msg::Server(event));
        }
    };
    let audio = || json!({"serverContent": {"modelTurn": {"parts": [{"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": "AQACAA=="}}]}}});
    let said = |text: &str| json!({"serverContent": {"outputTranscription": {"text": text}}});
    let typed = |app: &mut App, ms: u64, text: &str| {
        app.update(Msg::UserText(text.into()));
        sent(
            app,
            ms,
            json!({"clientContent": {"turns": [{"role": "user", "parts": [{"text": text}]}], "turnComplete": true}}),
        );
    };
    sent(
        &mut app,
        0,
        json!({"setup": {"model": "models/gemini-3.8-live"}}),
    );
    received(&mut app, 38, json!({"setupComplete": {}}));
    app.update(Msg::Audio(AudioEvent::Opened(AudioSetup {
        input: Some(StreamInfo {
            name: "alsa_input.usb-headset".into(),
            path: "48 kHz → 16 kHz".into(),
        }),
        output: Some(StreamInfo {
            name: "alsa_output.usb-headset".into(),
            path: "24 kHz → 48 kHz".into(),
        }),
        problems: Vec::new(),
    })));

    // A typed turn `ms` into the session: the call it asks for answered at once, and the
    // reply's first words heard `heard` ms after the turn.
    let turn =
        |app: &mut App, ms: u64, heard: u64, text: &str, call: Value, state: Value, reply: &str| {
            let (id, name) = (call["id"].as_str().unwrap(), call["name"].as_str().unwrap());
            typed(app, ms, text);
            received(app, ms + 15, json!({"toolCall": {"functionCalls": [call]}}));
            tool_done(app, id, name, ToolStatus::Ok, state.clone());
            let response = json!({"id": id, "name": name, "response": state});
            sent(
                app,
                ms + 16,
                json!({"toolResponse": {"functionResponses": [response]}}),
            );
            received(app, ms + 290, audio());
            app.update(Msg::Tick(at(ms + heard)));
            app.update(Msg::Audio(AudioEvent::Audible(true)));
            received(app, ms + 300, said(reply));
        };
    // The first: the lamp's state asked for, and the whole answer heard.
    let lamp = SmartHome::new().snapshot()[0].state();
    turn(
        &mut app,
        4_000,
        372,
        "Is the living room lamp on?",
        json!({"id": "function-call-1", "name": "get_device_status", "args": {"device_name": "living room lamp"}}),
        lamp,
        "No, the living room lamp is currently off.",
    );
    received(
        &mut app,
        6_980,
        json!({"serverContent": {"turnComplete": true}, "usageMetadata": {"promptTokenCount": 31, "responseTokenCount": 68, "totalTokenCount": 99, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 31}], "responseTokensDetails": [{"modality": "AUDIO", "tokenCount": 68}]}}),
    );
    app.update(Msg::Audio(AudioEvent::Audible(false)));
    received(
        &mut app,
        6_990,
        json!({"sessionResumptionUpdate": {"newHandle": "handle-1", "resumable": true}}),
    );
    // The second: the lamp turns on and blue, and the reply is being heard.
    let mut devices = app.devices().to_vec();
    devices[0].status = "on".into();
    devices[0].color = Some("blue".into());
    devices[0].brightness = Some(100);
    let lamp = devices[0].state();
    app.update(Msg::DevicesChanged(devices));
    turn(
        &mut app,
        12_000,
        355,
        "Okay, please turn it on and set its color to blue.",
        json!({"id": "function-call-2", "name": "set_device_status", "args": {"device_name": "living room lamp", "new_status": "on", "setting": {"color": "blue"}}}),
        lamp,
        "Alright, I've turned on the living room lamp",
    );
    app.update(Msg::Audio(AudioEvent::Levels {
        mic: 0.02,
        output: 0.5,
    }));
    app.update(Msg::Tick(at(13_100)));
    app
}

/// The first ```text block after `after` in a page of the guide, its lines as written.
fn guide_screen(page: &str, after: &str) -> (String, std::ops::Range<usize>) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(page);
    let text = std::fs::read_to_string(&path).unwrap();
    let from = text
        .find(after)
        .unwrap_or_else(|| panic!("{after:?} in {page}"));
    let open = from + text[from..].find("```text\n").expect("a text block") + "```text\n".len();
    let close = open + text[open..].find("```\n").expect("its end");
    (text, open..close)
}

/// The README's screen and docs/terminal-ui.md's are the app's own at 120×32, drawn from the
/// same state by the same code (`UPDATE_GUIDE_SCREENS=1` writes it into both).
#[test]
fn the_guides_screen_is_the_apps() {
    let mut app = the_guides_screen();
    let terminal = render(&mut app, 120, 32);
    let drawn: String = (0..32)
        .map(|y| row(&terminal, y).trim_end().to_owned() + "\n")
        .collect();
    for (page, after) in [
        ("README.md", "every test runs against it."),
        ("docs/terminal-ui.md", "This is the app at 120×32"),
    ] {
        let (text, block) = guide_screen(page, after);
        if std::env::var_os("UPDATE_GUIDE_SCREENS").is_some() {
            let mut updated = text.clone();
            updated.replace_range(block.clone(), &drawn);
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(page);
            std::fs::write(path, updated).unwrap();
            continue;
        }
        assert_eq!(
            text[block].to_owned(),
            drawn,
            "{page}'s screen is not the app's; the app draws:\n{drawn}"
        );
    }
}

/// A reply grounded in a search for "tides in Brest" with a source whose link may be followed
/// and one whose "link" may not.
fn grounded_from(app: App) -> App {
    let mut app = connected_from(app);
    app.update(Msg::UserText(
        "search the web for the tides in Brest".into(),
    ));
    model_says(&mut app, "High tide in Brest is at noon.", false);
    session(
        &mut app,
        ServerEvent::Grounding(json!({
            "webSearchQueries": ["tides Brest"],
            "groundingChunks": [
                {"web": {"title": "maree.info", "uri": "https://g.co/r/tides-brest"}},
                {"web": {"title": "a\u{1b}[2J title", "uri": "javascript:alert(1)"}}
            ]
        })),
    );
    model_says(&mut app, "", true);
    app
}

#[test]
fn a_grounded_replys_sources_show_under_it_as_links_where_the_terminal_shows_them() {
    let mut app = grounded_from(new_app());
    let terminal = render(&mut app, 60, 20);
    let shown = format!("{}", terminal.backend());
    for row in [
        "│  Searched: \"tides Brest\"",
        "│  ↗ maree.info",
        "│    https://g.co/r/tides-brest",
        "│  ↗ a [2J title",
        "│    javascript:alert(1)",
    ] {
        assert!(shown.contains(row), "{row:?} in\n{shown}");
    }
    assert!(
        !shown.contains('\u{1b}'),
        "no escape without links: {shown:?}"
    );

    // Where the terminal shows links, the web link (and its title) are hyperlinks; the other
    // is text only.
    let linked = grounded_from(App::new(AppInit {
        hyperlinks: true,
        ..init()
    }));
    let mut terminal = Terminal::new(TestBackend::new(60, 20)).expect("test terminal");
    let frame = terminal
        .draw(|frame| {
            super::draw(frame, &linked);
        })
        .expect("draw");
    let symbols: Vec<&str> = frame.buffer.content.iter().map(|c| c.symbol()).collect();
    let links: Vec<&&str> = symbols.iter().filter(|s| s.contains("\x1b]8;")).collect();
    assert_eq!(
        links,
        [
            &"\x1b]8;;https://g.co/r/tides-brest\x1b\\maree.info\x1b]8;;\x1b\\",
            &"\x1b]8;;https://g.co/r/tides-brest\x1b\\https://g.co/r/tides-brest\x1b]8;;\x1b\\",
        ]
    );
}

/// A `width`×`height` JPEG of one colour, as `/image` sends it.
fn jpeg_picture(name: &str, width: u32, height: u32, rgb: [u8; 3]) -> crate::app::ImageSent {
    let mut jpeg = Vec::new();
    image::RgbImage::from_pixel(width, height, image::Rgb(rgb))
        .write_to(
            &mut std::io::Cursor::new(&mut jpeg),
            image::ImageFormat::Jpeg,
        )
        .expect("encode a JPEG");
    crate::app::ImageSent {
        name: name.into(),
        file_bytes: 2_000,
        width,
        height,
        jpeg,
        at: std::time::Instant::now(),
    }
}

/// The preview pane in half-blocks: beside the conversation at the sizes people use, the
/// picture's colour in its cells and its caption under it; at sizes with no room for it, and
/// through resizes down to too small, it is not drawn and nothing panics.
#[test]
fn the_preview_pane_fits_the_picture_and_gives_way_on_small_screens() {
    use ratatui::style::Color;
    let mut app = listening();
    app.update(Msg::UserText("/image leaf.png".into()));
    app.update(Msg::Image(Ok(jpeg_picture(
        "leaf.png",
        320,
        180,
        [40, 180, 60],
    ))));
    let mut pictures = super::Pictures::new(
        ratatui_image::picker::ProtocolType::Halfblocks,
        super::HALF_BLOCK_CELL,
    );
    let green = |c: Color| matches!(c, Color::Rgb(r, g, b) if r < 60 && g > 160 && b < 80);
    for (width, height, shown) in [
        (120, 40, true),
        (80, 24, true),
        (60, 20, false),
        (40, 10, false),
        (10, 4, false),
        (80, 24, true),
    ] {
        let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("test terminal");
        terminal
            .draw(|frame| {
                super::draw_with(frame, &app, &mut pictures);
            })
            .expect("draw");
        let buffer = terminal.backend().buffer();
        let text = (0..height)
            .map(|y| {
                (0..width)
                    .map(|x| buffer[(x, y)].symbol().to_owned())
                    .collect::<String>()
            })
            .collect::<Vec<_>>()
            .join("\n");
        let cells = buffer.content().iter().filter(|c| green(c.bg)).count();
        assert_eq!(
            text.contains(" Preview "),
            shown,
            "{width}×{height}:\n{text}"
        );
        if shown {
            assert!(text.contains("leaf.png · 320×180"), "{text}");
            // 16:9 in cells of one by two pixels: about twice as many columns as rows.
            assert!(
                cells >= 60,
                "{cells} green cells at {width}×{height}:\n{text}"
            );
        } else {
            assert_eq!(cells, 0, "{width}×{height}");
        }
    }
}
