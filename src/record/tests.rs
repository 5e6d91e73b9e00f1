//! Replay from hand-written logs of the earlier formats (1 and 2, read by `legacy`): link and
//! slow-call lines come back as the messages the app got, at the right place among the frames;
//! a reconnect hides the old connection's last frames and closes, as it did live; format 1 logs
//! replay as before; tool calls keep the time they arrived. Format 3 (applied messages) is
//! tested end to end in tests/recording.rs.

use std::time::Duration;

use serde_json::{Value, json};

use super::replay::{Pacing, Replay, initial_app};
use super::*;
use crate::app::{App, AppInit, ConnectionState, Entry, ModelTurnStatus, Msg, NoticeLevel};
use crate::driver::Source as _;
use crate::tools::{SlowCall, ToolEvent, ToolOutcome, ToolStatus};
use livetalk_live::session::SessionChange;
use livetalk_live::wire::FunctionResponse;
use livetalk_live::{CloseInfo, ServerEvent};

/// The format these hand-written logs are in.
const FORMAT_2: u32 = 2;

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// A format-2 tool line, `at` session events into the session.
fn tool_record(event: &ToolEvent, at: u64) -> Record {
    match event {
        ToolEvent::Finished(outcome) => Record::ToolResult {
            id: outcome.id.clone(),
            name: outcome.name.clone(),
            args: outcome.args.clone(),
            outcome: "ok".to_owned(),
            error: None,
            duration_ms: outcome.duration.as_secs_f64() * 1000.0,
            duration_ns: nanos(outcome.duration),
            response: outcome.response.clone(),
            truncated: outcome.truncated,
            at,
        },
        other => panic!("not written by these tests: {other:?}"),
    }
}

/// A format-2 link line.
fn link_record(event: &SessionChange, at: u64) -> Record {
    match event {
        SessionChange::Reconnecting {
            planned,
            attempt,
            reason,
            retry_in,
        } => Record::Reconnecting {
            planned: *planned,
            attempt: *attempt,
            reason: reason.clone(),
            retry_in_ms: retry_in.as_secs_f64() * 1000.0,
            retry_in_ns: nanos(*retry_in),
            at,
        },
        SessionChange::Reconnected { resumed } => Record::Reconnected {
            resumed: *resumed,
            at,
        },
        SessionChange::ResumeRejected { message } => Record::ResumeRejected {
            message: message.clone(),
            at,
        },
        SessionChange::AnswerDropped { id, name } => Record::AnswerDropped {
            id: id.clone(),
            name: name.clone(),
            at,
        },
        SessionChange::TurnLost => panic!("format 2 had no lost turns"),
    }
}

/// A format-2 slow-call line.
fn slow_record(slow: &SlowCall, at: u64) -> Record {
    Record::ToolSlow {
        id: slow.id.clone(),
        name: slow.name.clone(),
        elapsed_ms: slow.elapsed.as_secs_f64() * 1000.0,
        elapsed_ns: nanos(slow.elapsed),
        at,
    }
}

/// A format-2 end-of-session line.
fn ended_record(close: &CloseInfo, at: u64) -> Record {
    Record::SessionEnded {
        code: close.code,
        reason: close.reason.clone(),
        message: close.message.clone(),
        initiated_by_client: close.initiated_by_client,
        at,
    }
}

/// 03:04:05 at a fixed offset, so no time zone database is needed.
const STARTED_AT: &str = "2020-01-02T03:04:05+02:00[+02:00]";

fn meta(format: u32, started_at: &str) -> Record {
    Record::Meta(Box::new(Meta {
        format,
        livetalk_version: "test".into(),
        started_at: started_at.into(),
        model: "models/test".into(),
        voice: "Puck".into(),
        endpoint_host: "127.0.0.1".into(),
        offline: false,
        devices: Vec::new(),
        config: json!({}),
        audio: None,
    }))
}

/// Writes the lines as a recording folder would hold them and reads it back.
fn load(meta: Record, lines: Vec<(f64, Record)>) -> (tempfile::TempDir, Recording) {
    let dir = tempfile::tempdir().unwrap();
    let text: String = std::iter::once((0.0, meta))
        .chain(lines)
        .map(|(t, record)| serde_json::to_string(&Line { t, record }).unwrap() + "\n")
        .collect();
    std::fs::write(dir.path().join(LOG_FILE), text).unwrap();
    let recording = Recording::load(dir.path()).unwrap();
    assert!(recording.warnings.is_empty(), "{:?}", recording.warnings);
    (dir, recording)
}

fn setup_complete() -> Record {
    Record::Recv {
        setup: true,
        message: Some(json!({"setupComplete": {}})),
        skipped: None,
    }
}

fn recv(message: Value) -> Record {
    Record::Recv {
        setup: false,
        message: Some(message),
        skipped: None,
    }
}

fn words(text: &str) -> Record {
    recv(json!({"serverContent": {"outputTranscription": {"text": text}}}))
}

fn turn_complete() -> Record {
    recv(json!({"serverContent": {"turnComplete": true}}))
}

fn wire_close(code: Option<u16>, message: &str, by_client: bool) -> Record {
    Record::Close {
        code,
        reason: String::new(),
        message: message.into(),
        initiated_by_client: by_client,
    }
}

fn ended(message: &str, by_client: bool, at: u64) -> Record {
    ended_record(
        &CloseInfo {
            code: None,
            reason: String::new(),
            message: message.into(),
            initiated_by_client: by_client,
        },
        at,
    )
}

fn lost(attempt: u32, at: u64) -> Record {
    link_record(
        &SessionChange::Reconnecting {
            planned: false,
            attempt,
            reason: "The connection dropped.".into(),
            retry_in: Duration::from_millis(480),
        },
        at,
    )
}

fn back(at: u64) -> Record {
    link_record(&SessionChange::Reconnected { resumed: true }, at)
}

/// The messages a replay hands the app, as fast as it can (its progress reports left out).
async fn messages(recording: &Recording) -> Vec<Msg> {
    let (mut playback, warnings) = Replay::new(recording, Pacing::Instant);
    assert!(warnings.is_empty(), "{warnings:?}");
    let mut msgs = Vec::new();
    while let Some(msg) = playback.next().await {
        if !matches!(msg, Msg::ReplayProgress(_)) {
            msgs.push(msg);
        }
    }
    msgs
}

/// The session event of a replayed message, or `None` for other messages.
fn event(msg: &Msg) -> Option<&ServerEvent> {
    match msg {
        Msg::Replayed { event, .. } | Msg::Server(event) => Some(event),
        _ => None,
    }
}

async fn replayed(recording: &Recording) -> App {
    let mut app = initial_app(recording, None, 0);
    for msg in messages(recording).await {
        let _ = app.update(msg);
    }
    app
}

fn notices(app: &App, level: NoticeLevel) -> Vec<&str> {
    app.notices()
        .iter()
        .filter(|n| n.level == level)
        .map(|n| n.text.as_str())
        .collect()
}

#[test]
fn new_lines_are_written_with_their_own_type_and_read_back() {
    let slow = slow_record(
        &SlowCall {
            key: None,
            id: Some("c1".into()),
            name: "hang".into(),
            elapsed: Duration::from_millis(1500),
        },
        4,
    );
    let cases = [
        (lost(2, 7), "reconnecting"),
        (back(7), "reconnected"),
        (
            link_record(
                &SessionChange::ResumeRejected {
                    message: "Session not found.".into(),
                },
                7,
            ),
            "resume_rejected",
        ),
        (
            link_record(
                &SessionChange::AnswerDropped {
                    id: None,
                    name: "hang".into(),
                },
                7,
            ),
            "answer_dropped",
        ),
        (slow, "tool_slow"),
        (Record::Retry { at: 9 }, "retry"),
        (ended("Session ended.", true, 9), "session_ended"),
    ];
    for (record, kind) in cases {
        let text = serde_json::to_string(&Line { t: 1.5, record }).unwrap();
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["type"], kind, "{text}");
        assert!(value["at"].is_u64(), "positioned among the frames: {text}");
        let back: Line = serde_json::from_str(&text).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), text);
    }
}

#[tokio::test]
async fn a_reconnect_replays_as_the_app_saw_it() {
    let call = json!({"toolCall": {"functionCalls": [
        {"id": "c1", "name": "get_device_status", "args": {"device_name": "lamp"}}
    ]}});
    let finished = tool_record(
        &ToolEvent::Finished(ToolOutcome {
            key: None,
            id: Some("c1".into()),
            name: "get_device_status".into(),
            args: json!({"device_name": "lamp"}),
            status: ToolStatus::Ok,
            response: FunctionResponse {
                id: Some("c1".into()),
                name: "get_device_status".into(),
                response: json!({"status": "off"}),
                ..FunctionResponse::default()
            },
            duration: Duration::from_millis(2100),
            truncated: false,
            unasked: None,
        }),
        2,
    );
    let slow = slow_record(
        &SlowCall {
            key: None,
            id: Some("c1".into()),
            name: "get_device_status".into(),
            elapsed: Duration::from_millis(2000),
        },
        2,
    );
    let (_dir, recording) = load(
        meta(FORMAT_2, STARTED_AT),
        vec![
            (0.0, Record::Connect { host: "h".into() }),
            (0.1, setup_complete()),
            (
                0.2,
                Record::UserText {
                    text: "Is the lamp on?".into(),
                    at: 1,
                },
            ),
            (61.5, recv(call)),
            (63.5, slow),
            (63.6, finished),
            (63.7, words("It is off")),
            (63.8, wire_close(None, "The connection dropped.", false)),
            // Read by the old connection after the session had left it: the app never saw it.
            (63.9, words(" and always was")),
            (64.0, lost(1, 3)),
            (64.5, Record::Connect { host: "h".into() }),
            (64.6, setup_complete()),
            // Written once the app got it, after the new connection's setupComplete arrived.
            (64.7, back(3)),
            (64.8, turn_complete()),
            (65.0, Record::EndSession { at: 5 }),
            (65.1, wire_close(None, "Session ended.", true)),
            (65.2, ended("Session ended.", true, 5)),
        ],
    );
    let msgs = messages(&recording).await;
    let kinds: Vec<String> = msgs
        .iter()
        .map(|msg| match (msg, event(msg)) {
            (_, Some(ServerEvent::SetupComplete { .. })) => "setup".to_owned(),
            (_, Some(ServerEvent::ToolCall(_))) => "call".to_owned(),
            (_, Some(ServerEvent::OutputTranscription { text, .. })) => format!("words {text}"),
            (_, Some(ServerEvent::TurnComplete { .. })) => "turn complete".to_owned(),
            (_, Some(ServerEvent::Closed(close))) => format!("closed {}", close.message),
            (Msg::UserText(_), _) => "user".to_owned(),
            (Msg::Tool(ToolEvent::Slow(_)), _) => "slow".to_owned(),
            (Msg::Tool(_), _) => "result".to_owned(),
            (Msg::SessionChange(SessionChange::Reconnecting { .. }), _) => {
                "reconnecting".to_owned()
            }
            (Msg::SessionChange(SessionChange::Reconnected { .. }), _) => "reconnected".to_owned(),
            (Msg::EndSession, _) => "end".to_owned(),
            (other, _) => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "setup",
            "user",
            "call",
            "slow",
            "result",
            "words It is off",
            "reconnecting",
            "reconnected",
            "setup",
            "turn complete",
            "end",
            "closed Session ended.",
        ]
    );

    let app = replayed(&recording).await;
    assert_eq!(app.reconnects(), 1);
    assert!(app.ended_cleanly(), "{:?}", app.connection());
    assert_eq!(
        notices(&app, NoticeLevel::Warning),
        [
            "get_device_status has been running for 2.0 s; it is answered with an error if it does not finish in time.",
            "Connection lost: The connection dropped. Reconnecting in 0.5 s…",
        ]
    );
    assert_eq!(
        notices(&app, NoticeLevel::Info),
        ["Reconnected; the conversation continues."]
    );
    assert!(notices(&app, NoticeLevel::Error).is_empty());
    assert!(app.tool_calls()[0].slow);
    // The call arrived 61.5 s after 03:04:05 in the original run.
    assert_eq!(
        app.tool_calls()[0].started_at,
        jiff::civil::time(3, 5, 6, 500_000_000)
    );
    assert_eq!(
        app.transcript().last(),
        Some(&Entry::Model {
            text_parts: String::new(),
            transcript: "It is off".into(),
            status: ModelTurnStatus::Interrupted,
            echo_suspected: false,
            grounding: Default::default(),
        })
    );
}

#[tokio::test]
async fn a_link_that_gave_up_ends_with_its_own_message_and_a_retry_comes_back() {
    let gave_up = "Gave up reconnecting after 2 attempts. Last error: refused";
    let (_dir, recording) = load(
        meta(FORMAT_2, STARTED_AT),
        vec![
            (0.1, setup_complete()),
            (0.2, words("Hello")),
            (0.3, wire_close(Some(1011), "Internal error.", false)),
            (0.4, lost(1, 2)),
            (0.5, Record::Connect { host: "h".into() }),
            (0.6, lost(2, 2)),
            (0.7, Record::Connect { host: "h".into() }),
            (0.8, ended(gave_up, false, 2)),
            (5.0, Record::Retry { at: 3 }),
            (5.1, lost(1, 3)),
            (5.2, Record::Connect { host: "h".into() }),
            (5.3, setup_complete()),
            (5.4, back(3)),
        ],
    );
    let app = replayed(&recording).await;
    assert_eq!(*app.connection(), ConnectionState::Connected);
    assert_eq!(app.reconnects(), 2);
    assert_eq!(notices(&app, NoticeLevel::Error), [gave_up]);
    assert_eq!(
        notices(&app, NoticeLevel::Warning),
        [
            "Connection lost: The connection dropped. Reconnecting in 0.5 s…",
            "Reconnect attempt 2 in 0.5 s (The connection dropped.)",
            "Connection lost: The connection dropped. Reconnecting in 0.5 s…",
        ]
    );

    // Up to the end of the first session: it had ended with its own message.
    let mut app = initial_app(&recording, None, 0);
    for msg in messages(&recording)
        .await
        .into_iter()
        .take_while(|m| *m != Msg::Retry)
    {
        let _ = app.update(msg);
    }
    assert_eq!(
        *app.connection(),
        ConnectionState::Disconnected {
            reason: gave_up.into()
        }
    );
    assert!(app.can_retry());
}

#[tokio::test]
async fn format_1_recordings_still_end_at_their_close_line() {
    let (_dir, recording) = load(
        meta(1, STARTED_AT),
        vec![
            (0.1, setup_complete()),
            (
                0.2,
                Record::UserText {
                    text: "Hi".into(),
                    at: 1,
                },
            ),
            (0.3, words("Hello")),
            (0.4, turn_complete()),
            (0.5, Record::EndSession { at: 3 }),
            (0.6, wire_close(None, "Session ended.", true)),
        ],
    );
    let last = messages(&recording).await.pop().unwrap();
    assert!(
        matches!(event(&last), Some(ServerEvent::Closed(c)) if c.initiated_by_client),
        "{last:?}"
    );
    let app = replayed(&recording).await;
    assert!(app.ended_cleanly());
    assert_eq!(app.reconnects(), 0);
}

#[tokio::test]
async fn without_a_readable_start_time_events_replay_at_the_clocks_time() {
    let call = json!({"toolCall": {"functionCalls": [{"id": "c1", "name": "x", "args": {}}]}});
    let (_dir, recording) = load(
        meta(FORMAT_2, "sometime"),
        vec![(0.1, setup_complete()), (0.2, recv(call))],
    );
    let msgs = messages(&recording).await;
    assert!(msgs.iter().all(|m| matches!(m, Msg::Server(_))), "{msgs:?}");
    let mut app = App::new(AppInit {
        clock: || jiff::civil::time(12, 0, 0, 0),
        ..AppInit::new("models/test", false, Vec::new())
    });
    for msg in msgs {
        let _ = app.update(msg);
    }
    assert_eq!(
        app.tool_calls()[0].started_at,
        jiff::civil::time(12, 0, 0, 0)
    );
}

#[tokio::test]
async fn the_users_verdicts_replay_as_the_screen_showed_them() {
    use crate::app::ToolState;
    use crate::tools::{CallKey, Verdict, WaitingCall};
    use livetalk_live::wire::FunctionCall;
    let applied = |msg: Msg| Record::applied(&msg, None).unwrap();
    let edited = json!({"device_name": "living room lamp", "new_status": "off"});
    let lines = vec![
        (
            0.1,
            applied(Msg::Server(ServerEvent::SetupComplete { session_id: None })),
        ),
        (0.2, applied(Msg::UserText("turn on the lamp".into()))),
        (
            0.3,
            applied(Msg::Server(ServerEvent::ToolCall(vec![FunctionCall {
                id: Some("c1".into()),
                name: "set_device_status".into(),
                args: json!({"device_name": "living room lamp", "new_status": "on"}),
            }]))),
        ),
        (
            0.4,
            applied(Msg::Tool(ToolEvent::Waiting(WaitingCall {
                key: CallKey(0),
                id: Some("c1".into()),
                name: "set_device_status".into(),
            }))),
        ),
        (
            2.0,
            applied(Msg::ToolVerdict {
                key: CallKey(0),
                verdict: Verdict::Edit(edited.clone()),
            }),
        ),
    ];
    let (_dir, recording) = load(meta(FORMAT_VERSION, STARTED_AT), lines);
    let msgs = messages(&recording).await;
    assert!(
        msgs.iter().any(|m| matches!(
            m,
            Msg::ToolVerdict {
                verdict: Verdict::Edit(_),
                ..
            }
        )),
        "the verdict is read back as the intent it was: {msgs:?}"
    );
    let app = replayed(&recording).await;
    let call = &app.tool_calls()[0];
    assert_eq!(
        call.state,
        ToolState::Running,
        "approved with edits, not yet answered"
    );
    assert_eq!(call.args, edited);
    assert_eq!(
        call.edited_from,
        Some(json!({"device_name": "living room lamp", "new_status": "on"}))
    );
}

#[tokio::test]
async fn an_interruption_flagged_as_echo_replays_flagged() {
    use crate::audio::{AudioEvent, AudioSetup, EchoFigures, EchoMode, StreamInfo};
    let applied = |msg: Msg| Record::applied(&msg, None).unwrap();
    let device = |name: &str| StreamInfo {
        name: name.into(),
        path: "48 kHz".into(),
    };
    let echo = |heard: bool| {
        applied(Msg::Audio(AudioEvent::Echo(EchoFigures {
            mode: EchoMode::Aec,
            cancelling: true,
            echo_heard: heard,
            ..EchoFigures::default()
        })))
    };
    let lines = vec![
        (
            0.1,
            applied(Msg::Server(ServerEvent::SetupComplete { session_id: None })),
        ),
        (
            0.2,
            applied(Msg::Audio(AudioEvent::Opened(AudioSetup {
                input: Some(device("mic")),
                output: Some(device("speaker")),
                problems: Vec::new(),
            }))),
        ),
        (0.3, applied(Msg::UserText("tell me a story".into()))),
        (
            0.5,
            applied(Msg::Server(ServerEvent::OutputTranscription {
                text: "Once upon a time".into(),
                finished: false,
            })),
        ),
        (0.6, applied(Msg::Audio(AudioEvent::Audible(true)))),
        (1.0, echo(true)),
        (1.1, applied(Msg::Server(ServerEvent::Interrupted))),
        (1.2, echo(false)),
        (1.3, applied(Msg::SetEcho(EchoMode::Gate))),
    ];
    let (_dir, recording) = load(meta(FORMAT_VERSION, STARTED_AT), lines);
    let app = replayed(&recording).await;
    assert!(
        matches!(
            app.transcript().last(),
            Some(Entry::Model {
                status: ModelTurnStatus::Interrupted,
                echo_suspected: true,
                ..
            })
        ),
        "{:?}",
        app.transcript()
    );
    assert_eq!(
        app.audio().echo,
        EchoMode::Gate,
        "the user's switch replays"
    );
}

/// A session with a push-to-talk mic: its replay starts with the same audio asked for, so
/// the recorded reopen and push-to-talk keys show what they showed then (not "audio is off"),
/// and the mic's state follows as it did.
#[tokio::test]
async fn a_replay_answers_recorded_audio_keys_as_the_original_did() {
    use crate::app::{AudioAsked, MicState};
    use crate::audio::{AudioEvent, AudioSetup, EchoMode, StreamInfo};
    let asked = AudioAsked {
        microphone: true,
        push_to_talk: true,
        echo: EchoMode::Gate,
        ..AudioAsked::default()
    };
    let applied = |msg: Msg| Record::applied(&msg, None).unwrap();
    let stream = |name: &str| {
        Some(StreamInfo {
            name: name.into(),
            path: "48 kHz".into(),
        })
    };
    let msgs = vec![
        Msg::Server(ServerEvent::SetupComplete { session_id: None }),
        Msg::Audio(AudioEvent::Opened(AudioSetup {
            input: stream("mic"),
            output: stream("spk"),
            problems: Vec::new(),
        })),
        Msg::ReopenAudio,
        Msg::ToggleTalk,
    ];
    let mut original = App::new(AppInit {
        audio: Some(asked),
        ..AppInit::new("models/test", false, Vec::new())
    });
    for msg in msgs.clone() {
        let _ = original.update(msg);
    }
    assert_eq!(original.audio().mic_state(), MicState::Talking);

    let Record::Meta(mut meta) = meta(FORMAT_VERSION, STARTED_AT) else {
        unreachable!()
    };
    meta.audio = Some(asked.into());
    let lines = msgs
        .into_iter()
        .enumerate()
        .map(|(i, msg)| (0.1 * (i + 1) as f64, applied(msg)))
        .collect();
    let (_dir, recording) = load(Record::Meta(meta), lines);
    assert_eq!(
        recording.meta.audio.map(AudioAsked::from),
        Some(asked),
        "kept in the metadata line"
    );
    let replay = replayed(&recording).await;
    assert_eq!(replay.audio().mic_state(), MicState::Talking);
    assert_eq!(replay.audio().echo, EchoMode::Gate);
    let texts = |app: &App| {
        app.notices()
            .iter()
            .map(|n| n.text.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(texts(&replay), texts(&original));
}

/// The recorder keeps the audio asked for in the metadata line (and nothing when there was
/// none), for the replay above.
#[test]
fn the_metadata_line_keeps_the_audio_asked_for() {
    use crate::app::AudioAsked;
    use crate::audio::EchoMode;
    let scratch = tempfile::tempdir().unwrap();
    let config = scratch.path().join("config.toml");
    std::fs::write(&config, "").unwrap();
    let flags = crate::config::FlagOverrides {
        config: Some(config),
        ..Default::default()
    };
    let mut settings = crate::config::Settings::resolve(&flags, &|_| None).unwrap();
    settings.audio.devices = true;
    settings.audio.push_to_talk = true;
    settings.audio.echo = EchoMode::Off;
    let read_back = |settings: &crate::config::Settings, name: &str| {
        let dir = scratch.path().join(name);
        drop(super::Recorder::create(&dir, settings, Vec::new()).unwrap());
        Recording::load(&dir)
            .unwrap()
            .meta
            .audio
            .map(AudioAsked::from)
    };
    assert_eq!(
        read_back(&settings, "with"),
        Some(AudioAsked {
            microphone: true,
            push_to_talk: true,
            echo: EchoMode::Off,
            ..AudioAsked::default()
        })
    );
    settings.audio.devices = false;
    assert_eq!(read_back(&settings, "without"), None);
}

/// A line whose time no session reaches (1.7e308 s, which panicked, or 1e12 s, which hung a
/// paced replay) is taken as the previous line's time with a warning; a long but possible
/// pause (eleven days) is waited out for one minute at most, whatever the speed.
#[test]
fn absurd_times_are_clamped_and_no_pause_outlasts_a_minute() {
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        (0.0, meta(FORMAT_2, STARTED_AT)),
        (0.1, setup_complete()),
        (1e6, words("Eleven days later.")),
        (1.7e308, words("Never.")),
        (1e12, words("Nor this.")),
        (0.2, turn_complete()),
    ];
    let text: String = lines
        .into_iter()
        .map(|(t, record)| serde_json::to_string(&Line { t, record }).unwrap() + "\n")
        .collect();
    std::fs::write(dir.path().join(LOG_FILE), text).unwrap();
    let recording = Recording::load(dir.path()).unwrap();
    assert_eq!(recording.warnings.len(), 2, "{:?}", recording.warnings);
    for (warning, line) in recording.warnings.iter().zip([4, 5]) {
        assert!(
            warning.contains(&format!("line {line}: its time"))
                && warning.contains("is not one a session reaches; taken as 1000000 s"),
            "{warning}"
        );
    }
    assert_eq!(recording.duration_secs(), 1e6);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let _time = runtime.enter();
    for speed in [1.0, 0.01, 1000.0] {
        let before = tokio::time::Instant::now();
        let mut pace = super::replay::Pace::new(Pacing::Speed(speed));
        let mut previous = before;
        for line in recording.lines() {
            let due = pace.due(line.t).unwrap();
            assert!(
                due.duration_since(previous) <= super::replay::MAX_WAIT + Duration::from_millis(50),
                "at {speed}x, t = {}: {:?}",
                line.t,
                due.duration_since(previous)
            );
            previous = previous.max(due);
            pace.advance(line.t);
        }
        let whole = previous.duration_since(before);
        assert!(
            whole
                <= super::replay::MAX_WAIT
                    + Duration::from_secs_f64(0.1 / speed)
                    + Duration::from_millis(50),
            "at {speed}x: {whole:?}"
        );
    }
}

/// A replay in the TUI hands the app the recording's wire lines as frames, at their places
/// among the applied messages, for the event inspector: every `send` and `recv` line once,
/// audio left out but counted from its WAV reference, and none of them counted as one of the
/// replay's events.
#[tokio::test]
async fn a_replay_shows_the_recordings_wire_lines_in_the_inspector() {
    use crate::app::{WireBody, WireFilter, wire_rows};
    use livetalk_live::wire::ClientMessage;

    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/recordings/format-3");
    let recording = Recording::load(&dir).unwrap();
    let wire_lines = recording
        .lines()
        .filter(|l| matches!(l.record, Record::Send { .. } | Record::Recv { .. }))
        .count();
    let (playback, _) = Replay::new(&recording, Pacing::Instant);
    let total = playback.total();
    let mut playback = playback.with_frames(&recording);
    let mut app = initial_app(&recording, None, total);
    let mut progress = None;
    while let Some(msg) = playback.next().await {
        if let Msg::ReplayProgress(p) = &msg {
            progress = Some(*p);
        }
        let _ = app.update(msg);
    }
    assert_eq!(progress.map(|p| (p.applied, p.total)), Some((total, total)));
    let frames = app.wire().frames();
    assert_eq!(frames.len(), wire_lines);
    assert_eq!(app.wire().dropped(), 0);
    assert!(
        frames
            .iter()
            .zip(frames.iter().skip(1))
            .all(|(a, b)| a.at <= b.at)
    );
    // The first two: the setup sent, its answer read in the handshake.
    assert!(
        matches!(&frames[0].body, WireBody::Sent(m) if matches!(m.as_ref(), ClientMessage::Setup(_)))
    );
    assert!(frames[1].handshake && frames[1].bytes > 0);
    // The mic frame's eight samples are left out and counted, as a live log counts them.
    let mic = frames
        .iter()
        .find(|f| matches!(&f.body, WireBody::Sent(m) if matches!(m.as_ref(), ClientMessage::RealtimeInput(i) if i.audio.is_some())))
        .unwrap();
    assert_eq!(mic.elided, 16);
    let kinds: Vec<String> = wire_rows(app.wire(), WireFilter::Tools)
        .into_iter()
        .map(|r| r.kind)
        .collect();
    assert_eq!(kinds, ["toolCall", "toolResponse"]);
}
