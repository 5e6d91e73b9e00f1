//! Hostile servers on loopback. A scripted fake server: malformed and unknown frames are
//! skipped with a warning and the conversation goes on; close codes become clear messages; the
//! API key goes only into the `x-goog-api-key` header and never into output, URLs or logs.
//! And a table of every mock fault plus binary garbage, invalid UTF-8, deeply nested JSON, a
//! 20 MB frame, 1,000 function calls and wrong-type arguments: each is skipped with a clear
//! warning or recovered from, or ends the session with one clear message; never a panic.

// Test output is the test runner's, not livetalk's: it may print directly.
#![allow(clippy::disallowed_macros)]
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::{Arc, Mutex};

use common::harness::Harness;
use common::*;
use futures_util::{SinkExt, StreamExt};
use livetalk::app::{App, ConnectionState, ModelTurnStatus, NoticeLevel, ToolState};
use livetalk::driver::Source as _;
use livetalk_mock::{Fault, FaultAction, Moment};
use serde_json::json;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

const SECRET: &str = "fake-test-key-hostile-0123456789";

#[derive(Default, Debug)]
struct SeenRequest {
    uri: String,
    api_key_header: Option<String>,
}

enum Script {
    /// After the first user turn: garbage, an unknown message, truncated JSON, then a reply.
    HostileFramesThenReply,
    /// Close 1008 instead of setupComplete.
    RejectModel,
    /// Read the setup and never answer it.
    NeverSetUp,
    /// Accept the TCP connection and never answer the upgrade request.
    NeverUpgrade,
    /// After setup and the first user turn: frames and a close reason that quote the key.
    QuoteTheKey,
}

async fn serve_once(script: Script) -> (String, Arc<Mutex<SeenRequest>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(SeenRequest::default()));
    let seen_by_server = seen.clone();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        if let Script::NeverUpgrade = script {
            // Read the request and sit on it until the client hangs up.
            let mut sink = tokio::io::sink();
            let _ = tokio::io::copy(&mut stream, &mut sink).await;
            return;
        }
        #[allow(clippy::result_large_err)] // the callback type is fixed by tungstenite
        let record = |request: &Request, response: Response| {
            let mut seen = seen_by_server.lock().unwrap();
            seen.uri = request.uri().to_string();
            seen.api_key_header = request
                .headers()
                .get("x-goog-api-key")
                .map(|v| v.to_str().unwrap().to_owned());
            Ok(response)
        };
        let mut ws = tokio_tungstenite::accept_hdr_async(stream, record)
            .await
            .unwrap();
        let setup = ws.next().await.unwrap().unwrap();
        assert!(setup.to_text().unwrap().starts_with("{\"setup\":"));
        match script {
            Script::NeverSetUp => while let Some(Ok(_)) = ws.next().await {},
            Script::NeverUpgrade => unreachable!("answered above"),
            Script::QuoteTheKey => {
                ws.send(Message::text(r#"{"setupComplete": {}}"#))
                    .await
                    .unwrap();
                let _turn = ws.next().await;
                for frame in [
                    format!(r#"{{"{SECRET}": {{"x": 1}}}}"#),
                    format!(r#"{{"serverContent": {{"modelTurn": "{SECRET}"}}}}"#),
                    format!(
                        r#"{{"serverContent": {{"modelTurn": {{"parts": [{{"text": "Your key is {SECRET}."}}]}}}}}}"#
                    ),
                ] {
                    ws.send(Message::text(frame)).await.unwrap();
                }
                let frame = CloseFrame {
                    code: CloseCode::Policy,
                    reason: format!("API key {SECRET} not valid. Please pass a valid API key.")
                        .into(),
                };
                let _ = ws.send(Message::Close(Some(frame))).await;
                while let Some(Ok(_)) = ws.next().await {}
            }
            Script::RejectModel => {
                let frame = CloseFrame {
                    code: CloseCode::Policy,
                    reason: "models/gemini-nope is not found for API version v1, or is not supported for bidiGenerateContent. Call ListModels".into(),
                };
                ws.send(Message::Close(Some(frame))).await.unwrap();
                while let Some(Ok(_)) = ws.next().await {}
            }
            Script::HostileFramesThenReply => {
                ws.send(Message::binary(b"{\n  \"setupComplete\": {}\n}\n".to_vec()))
                    .await
                    .unwrap();
                let turn = ws.next().await.unwrap().unwrap();
                assert!(turn.to_text().unwrap().contains("\"clientContent\""));
                for frame in [
                    Message::binary(vec![0xff, 0xfe, 0x00, 0x01]),
                    Message::text("{\"brandNewMessage\": {\"x\": 1}}"),
                    Message::text("{\"serverContent\": {\"modelTurn\": "),
                    Message::text(
                        "{\"serverContent\": {\"modelTurn\": {\"parts\": [{\"text\": \"Still here.\"}]}}}",
                    ),
                    Message::binary(b"{\"serverContent\": {\"turnComplete\": true}}".to_vec()),
                ] {
                    ws.send(frame).await.unwrap();
                }
                // Wait for the client's close, then answer it.
                while let Some(Ok(message)) = ws.next().await {
                    if message.is_close() {
                        break;
                    }
                }
            }
        }
    });
    (url, seen)
}

fn run_headless(
    scratch: &std::path::Path,
    url: &str,
    input: &'static str,
) -> (Option<i32>, String, String) {
    let run = run_livetalk(
        scratch,
        &["--headless", "--endpoint", url],
        &[("GEMINI_API_KEY", SECRET)],
        &[input],
    );
    (run.code, run.stdout, run.stderr)
}

fn assert_no_secret_anywhere(scratch: &std::path::Path, texts: &[&str]) {
    for text in texts {
        assert!(!text.contains(SECRET), "the key leaked: {text}");
    }
    let log = scratch.join("data/livetalk/livetalk.log");
    let log =
        std::fs::read_to_string(&log).unwrap_or_else(|e| panic!("log at {}: {e}", log.display()));
    assert!(!log.is_empty(), "the session was logged");
    assert!(!log.contains(SECRET), "the key leaked into the log");
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_and_unknown_frames_are_skipped_and_the_conversation_continues() {
    let scratch = tempfile::tempdir().unwrap();
    let (url, seen) = serve_once(Script::HostileFramesThenReply).await;
    let path = scratch.path().to_path_buf();
    let (code, stdout, stderr) =
        tokio::task::spawn_blocking(move || run_headless(&path, &url, "hello"))
            .await
            .unwrap();

    assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stdout.contains("You: hello\nGemini: Still here.\n"),
        "{stdout}"
    );
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("livetalk: warning: skipped"))
        .collect();
    assert_eq!(warnings.len(), 3, "{stderr}");
    assert!(warnings[0].contains("not UTF-8"), "{}", warnings[0]);
    assert!(
        warnings[1].contains("unknown server message (brandNewMessage)"),
        "{}",
        warnings[1]
    );
    assert!(warnings[2].contains("not valid JSON"), "{}", warnings[2]);

    let seen = seen.lock().unwrap();
    assert_eq!(
        seen.api_key_header.as_deref(),
        Some(SECRET),
        "the key travels in the header"
    );
    assert!(
        !seen.uri.contains(SECRET) && !seen.uri.contains("key="),
        "never in the URL: {}",
        seen.uri
    );
    assert!(
        seen.uri
            .ends_with("/ws/google.ai.generativelanguage.v1.GenerativeService.BidiGenerateContent")
    );
    assert_no_secret_anywhere(scratch.path(), &[&stdout, &stderr]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rejected_model_is_one_clear_message() {
    let scratch = tempfile::tempdir().unwrap();
    let (url, _seen) = serve_once(Script::RejectModel).await;
    let path = scratch.path().to_path_buf();
    let (code, stdout, stderr) =
        tokio::task::spawn_blocking(move || run_headless(&path, &url, "hello"))
            .await
            .unwrap();
    assert_eq!(code, Some(1));
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains(
            "livetalk: error: The model is not available (1008): models/gemini-nope is not found"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("Check `model` and `api_version`"),
        "{stderr}"
    );
    assert_no_secret_anywhere(scratch.path(), &[&stdout, &stderr]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_stalls_at_any_stage_times_out_clearly_naming_host_port_and_stage() {
    let scratch = tempfile::tempdir().unwrap();
    std::fs::write(
        scratch.path().join("config.toml"),
        "[session]\nconnect_timeout_secs = 1\n[audio]\nenabled = false\n",
    )
    .unwrap();
    for (script, route, stage) in [
        (
            Script::NeverSetUp,
            "--endpoint",
            "waiting for the session to be set up",
        ),
        (
            Script::NeverUpgrade,
            "--endpoint",
            "waiting for the WebSocket upgrade",
        ),
        (
            Script::NeverUpgrade,
            "--bridge",
            "waiting for the WebSocket upgrade",
        ),
    ] {
        let (url, _seen) = serve_once(script).await;
        let port = url.rsplit(':').next().unwrap().to_owned();
        let path = scratch.path().to_path_buf();
        let started = std::time::Instant::now();
        let (code, stdout, stderr) = tokio::task::spawn_blocking(move || {
            let run = run_livetalk(
                &path,
                &["--headless", route, &url],
                &[("GEMINI_API_KEY", SECRET)],
                &["hello"],
            );
            (run.code, run.stdout, run.stderr)
        })
        .await
        .unwrap();
        let took = started.elapsed();
        eprintln!("{route} {stage}: the error after {took:?}");
        assert_eq!(code, Some(1), "{stderr}");
        assert!(stdout.is_empty(), "{stdout}");
        let expected =
            format!("livetalk: error: No answer from 127.0.0.1:{port} within 1 s ({stage}).");
        assert!(
            stderr.contains(&expected),
            "{route}: {expected} not in {stderr}"
        );
        assert_eq!(stderr.matches("error").count(), 1, "one message: {stderr}");
        assert!(took < Duration::from_secs(5), "{route} {stage}: {took:?}");
    }
    assert_no_secret_anywhere(scratch.path(), &[]);
}

/// What a hostile input must lead to.
enum Expect {
    /// The conversation goes on: the next turn is answered. Warnings must contain these.
    Continues { warnings: &'static [&'static str] },
    /// The session ends with exactly one error notice containing this.
    Ends { error: &'static str },
}

struct Case {
    name: &'static str,
    faults: Vec<Fault>,
    expect: Expect,
    /// Extra checks on the app after the case ran.
    check: fn(&App),
}

fn at_user_turn(action: FaultAction) -> Vec<Fault> {
    vec![Fault::once(Moment::UserTurn, 1, action)]
}

fn no_check(_: &App) {}

fn cases() -> Vec<Case> {
    use Expect::*;
    vec![
        Case {
            name: "goAway with timeLeft, then 1008",
            faults: vec![Fault::once(
                Moment::MidReply,
                1,
                FaultAction::GoAway {
                    time_left: Duration::from_millis(800),
                    code: 1008,
                    reason: "The operation was aborted.".into(),
                },
            )],
            expect: Continues {
                warnings: &["goAway"],
            },
            // Announced by goAway: a hand-over, not a lost connection.
            check: |app| assert_eq!((app.reconnects(), app.handovers()), (0, 1)),
        },
        Case {
            name: "goAway, then at once a normal close (1000)",
            faults: vec![
                Fault::once(
                    Moment::UserTurn,
                    1,
                    FaultAction::Raw {
                        text: r#"{"goAway": {"timeLeft": "30s"}}"#.into(),
                    },
                ),
                Fault::once(
                    Moment::UserTurn,
                    1,
                    FaultAction::Close {
                        code: 1000,
                        reason: String::new(),
                    },
                ),
            ],
            expect: Continues { warnings: &[] },
            check: |app| assert_eq!((app.reconnects(), app.handovers()), (0, 1)),
        },
        Case {
            name: "abrupt TCP drop",
            faults: at_user_turn(FaultAction::Drop),
            expect: Continues {
                warnings: &["Connection lost"],
            },
            check: |app| assert_eq!(app.reconnects(), 1),
        },
        Case {
            name: "close 1011 internal error",
            faults: at_user_turn(FaultAction::Close {
                code: 1011,
                reason: "Internal error encountered.".into(),
            }),
            expect: Continues {
                warnings: &["Connection lost: The Live API had an internal error (1011)"],
            },
            check: no_check,
        },
        Case {
            name: "close with an unknown code",
            faults: at_user_turn(FaultAction::Close {
                code: 4000,
                reason: "custom reason".into(),
            }),
            expect: Ends {
                error: "The server closed the connection (4000): custom reason.",
            },
            check: no_check,
        },
        Case {
            name: "malformed JSON",
            faults: at_user_turn(FaultAction::MalformedJson),
            expect: Continues {
                warnings: &["skipped a malformed server frame", "not valid JSON"],
            },
            check: no_check,
        },
        Case {
            name: "unknown top-level message",
            faults: at_user_turn(FaultAction::UnknownMessage),
            expect: Continues {
                warnings: &["skipped an unknown server message (mockSurprise)"],
            },
            check: no_check,
        },
        Case {
            name: "a 20 MB frame",
            faults: at_user_turn(FaultAction::HugeMessage { bytes: 20 << 20 }),
            // Past the process's input budget: skipped in words, the session goes on.
            expect: Continues {
                warnings: &["more than the 32.0 MiB livetalk holds for input at once"],
            },
            // Its 15 MB of audio never reached the app (the reply that follows did).
            check: |app| {
                assert!(
                    app.model_audio_bytes() < 1 << 20,
                    "{}",
                    app.model_audio_bytes()
                )
            },
        },
        Case {
            name: "a 40 MB frame, over the limit",
            faults: at_user_turn(FaultAction::HugeMessage { bytes: 40 << 20 }),
            expect: Ends {
                error: "over the 32.0 MiB livetalk accepts (1009)",
            },
            // Said as it is, and not retried: the server would send it again.
            check: |app| assert_eq!(app.reconnects(), 0),
        },
        Case {
            name: "binary garbage (invalid UTF-8)",
            faults: at_user_turn(FaultAction::Garbage { bytes: 4096 }),
            expect: Continues {
                warnings: &["not UTF-8"],
            },
            check: no_check,
        },
        Case {
            name: "control characters, not JSON",
            faults: at_user_turn(FaultAction::Raw {
                text: "\u{0}\u{1}\u{7f}not json at all".into(),
            }),
            expect: Continues {
                warnings: &["not valid JSON"],
            },
            check: no_check,
        },
        Case {
            // In a field nobody reads, the nesting is skipped without recursion.
            name: "JSON nested 100,000 deep in an unknown field",
            faults: at_user_turn(FaultAction::DeepJson { depth: 100_000 }),
            expect: Continues { warnings: &[] },
            check: no_check,
        },
        Case {
            // In function-call arguments (free JSON), serde_json's depth limit stops it.
            name: "JSON nested 100,000 deep in function-call arguments",
            faults: at_user_turn(FaultAction::Raw {
                text: format!(
                    r#"{{"toolCall": {{"functionCalls": [{{"id": "deep-1", "name": "get_current_time", "args": {{"a": {}{}}}}}]}}}}"#,
                    "[".repeat(100_000),
                    "]".repeat(100_000)
                ),
            }),
            expect: Continues {
                warnings: &[
                    "skipped a malformed server frame",
                    "recursion limit exceeded",
                ],
            },
            check: no_check,
        },
        Case {
            name: "a known message with fields of the wrong type",
            faults: at_user_turn(FaultAction::Raw {
                text: r#"{"toolCall": {"functionCalls": "not a list"}}"#.into(),
            }),
            expect: Continues {
                warnings: &["invalid value at `toolCall.functionCalls`"],
            },
            check: no_check,
        },
        Case {
            name: "stalled server",
            faults: vec![Fault::once(
                Moment::MidReply,
                1,
                FaultAction::Stall {
                    duration: Duration::from_millis(1500),
                },
            )],
            expect: Continues { warnings: &[] },
            check: no_check,
        },
        Case {
            name: "slow server",
            faults: vec![Fault::once(
                Moment::MidReply,
                1,
                FaultAction::Slow { factor: 4.0 },
            )],
            expect: Continues { warnings: &[] },
            check: no_check,
        },
        Case {
            name: "interrupted mid-turn",
            faults: vec![Fault::once(Moment::MidReply, 1, FaultAction::Interrupt)],
            expect: Continues { warnings: &[] },
            check: |app| {
                // Cut after its first audio chunk: the thermostat reply never got to words,
                // and nothing is left streaming.
                for entry in app.transcript() {
                    if let livetalk::app::Entry::Model {
                        text_parts,
                        transcript,
                        status,
                        ..
                    } = entry
                    {
                        let text = livetalk::app::Entry::model_text(text_parts, transcript);
                        assert!(!text.contains("thermostat"), "{text}");
                        assert_ne!(*status, ModelTurnStatus::Streaming);
                    }
                }
            },
        },
        Case {
            name: "toolCallCancellation",
            faults: vec![Fault::once(
                Moment::ToolCall,
                1,
                FaultAction::CancelToolCalls,
            )],
            expect: Continues { warnings: &[] },
            check: |app| {
                assert!(
                    app.tool_calls()
                        .iter()
                        .all(|c| c.state != ToolState::Running)
                )
            },
        },
        Case {
            name: "sessionResumptionUpdate with a handle the server never issued",
            faults: vec![
                Fault::once(
                    Moment::TurnComplete,
                    1,
                    FaultAction::ResumptionUpdate {
                        handle: Some("stale-handle-0".into()),
                        resumable: true,
                    },
                ),
                Fault::once(Moment::TurnComplete, 1, FaultAction::Drop),
            ],
            expect: Continues {
                warnings: &["session not found", "Starting a fresh session"],
            },
            check: no_check,
        },
        Case {
            name: "a resumption that fails",
            faults: vec![
                Fault::once(Moment::TurnComplete, 1, FaultAction::FailResumption),
                Fault::once(Moment::TurnComplete, 1, FaultAction::Drop),
            ],
            expect: Continues {
                warnings: &["Starting a fresh session"],
            },
            check: no_check,
        },
        Case {
            name: "a tool call with 1,000 function calls",
            faults: at_user_turn(FaultAction::ToolCalls {
                name: "get_current_time".into(),
                args: json!({}),
                count: 1000,
            }),
            expect: Continues { warnings: &[] },
            check: |app| {
                assert!(app.tool_calls().len() >= 1000);
                assert!(app.tool_calls().iter().all(|c| c.state == ToolState::Ok));
                assert!(app.transcript().iter().any(|e| matches!(e,
                    livetalk::app::Entry::Model { transcript, .. }
                        if transcript.contains("1000 tool calls and got 1000 answers, 0 of them errors"))));
            },
        },
        Case {
            name: "arguments of the wrong type",
            faults: at_user_turn(FaultAction::ToolCalls {
                name: "set_device_status".into(),
                args: json!({"device_name": 42, "new_status": ["on"]}),
                count: 1,
            }),
            expect: Continues { warnings: &[] },
            check: |app| {
                assert!(
                    matches!(&app.tool_calls()[0].state, ToolState::Error(m) if m.contains("invalid type")),
                    "{:?}",
                    app.tool_calls()[0]
                );
            },
        },
        Case {
            name: "a call of a tool that does not exist",
            faults: at_user_turn(FaultAction::ToolCalls {
                name: "launch_rockets".into(),
                args: json!({}),
                count: 1,
            }),
            expect: Continues { warnings: &[] },
            check: |app| {
                assert!(
                    matches!(&app.tool_calls()[0].state, ToolState::Error(m) if m.contains("unknown tool")),
                    "{:?}",
                    app.tool_calls()[0]
                );
            },
        },
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn every_hostile_input_is_skipped_recovered_or_ends_with_one_clear_message() {
    for case in cases() {
        eprintln!("case: {}", case.name);
        let mut h = Harness::start(case.faults).await;
        h.apply(livetalk::app::Msg::UserText(
            "What's the kitchen thermostat set to?".into(),
        ))
        .await;
        let what = format!("the end of the first turn ({})", case.name);
        h.until(&what, |app| app.ready_for_user() || app.is_finished())
            .await;
        match case.expect {
            Expect::Continues { warnings } => {
                // The client kept running: the next turn is answered on a working link.
                h.say("Is the front door locked?").await;
                let reply = h.last_reply();
                assert!(
                    reply.contains("front door"),
                    "{}: {reply}\ntranscript: {:#?}\nnotices: {:#?}",
                    case.name,
                    h.app.transcript(),
                    h.app.notices()
                );
                assert_eq!(
                    *h.app.connection(),
                    ConnectionState::Connected,
                    "{}",
                    case.name
                );
                let shown = h.notices(NoticeLevel::Warning).join("\n");
                for expected in warnings {
                    assert!(
                        shown.contains(expected),
                        "{}: {expected:?} not in\n{shown}",
                        case.name
                    );
                }
                assert!(
                    h.notices(NoticeLevel::Error).is_empty(),
                    "{}: {:?}",
                    case.name,
                    h.app.notices()
                );
            }
            Expect::Ends { error } => {
                h.until("the end", App::is_finished).await;
                let errors = h.notices(NoticeLevel::Error);
                assert_eq!(errors.len(), 1, "{}: {errors:?}", case.name);
                assert!(errors[0].contains(error), "{}: {errors:?}", case.name);
                let after = h.engine.next().await;
                assert!(
                    after.is_none(),
                    "{}: the engine stopped: {after:?}",
                    case.name
                );
            }
        }
        (case.check)(&h.app);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_says_go_away_to_every_connection_gets_no_storm() {
    let scratch = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    let connections = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let counted = connections.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tokio::spawn(async move {
                let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
                    return;
                };
                if ws.next().await.is_none() {
                    return;
                }
                let _ = ws.send(Message::text(r#"{"setupComplete": {}}"#)).await;
                let _ = ws
                    .send(Message::text(r#"{"goAway": {"timeLeft": "0.1s"}}"#))
                    .await;
                // Never answers a turn; goes when the client goes.
                while let Some(Ok(_)) = ws.next().await {}
            });
        }
    });
    let path = scratch.path().to_path_buf();
    let started = std::time::Instant::now();
    let run = tokio::task::spawn_blocking(move || {
        run_livetalk(
            &path,
            &["--headless", "--endpoint", &url],
            &[("GEMINI_API_KEY", SECRET)],
            &["hello"],
        )
    })
    .await
    .unwrap();
    let took = started.elapsed();
    let made = connections.load(std::sync::atomic::Ordering::SeqCst);
    eprintln!("{made} connections, given up after {took:?}");
    assert!(took < Duration::from_secs(20), "{took:?}");
    assert!(made <= 12, "{made} connections in {took:?}");
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    let errors: Vec<&str> = run.stderr.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(errors.len(), 1, "{}", run.stderr);
    assert!(errors[0].contains("go away (goAway)"), "{}", run.stderr);
}

/// Every file under `dir`, read as text where it is text.
fn files_under(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_under(&path));
        } else {
            found.push((path.clone(), std::fs::read(&path).unwrap()));
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread")]
async fn a_key_quoted_by_the_server_after_setup_reaches_no_output() {
    for format in [None, Some("--json")] {
        let scratch = tempfile::tempdir().unwrap();
        let (url, _seen) = serve_once(Script::QuoteTheKey).await;
        let path = scratch.path().to_path_buf();
        let run = tokio::task::spawn_blocking(move || {
            let mut args = vec!["--headless", "--record", "--endpoint", &url];
            args.extend(format);
            run_livetalk(&path, &args, &[("GEMINI_API_KEY", SECRET)], &["hello"])
        })
        .await
        .unwrap();
        assert_eq!(run.code, Some(1), "{format:?}: {}", run.stderr);
        // The close was told, without the key.
        assert!(
            run.stderr.contains("API key [redacted] not valid"),
            "{format:?}: {}",
            run.stderr
        );
        assert!(!run.stdout.contains(SECRET), "{format:?}: {}", run.stdout);
        assert!(!run.stderr.contains(SECRET), "{format:?}: {}", run.stderr);
        let files = files_under(scratch.path());
        assert!(
            files.iter().any(|(p, _)| p.ends_with("session.jsonl")),
            "a recording was written"
        );
        let mut occurrences = 0;
        for (file, bytes) in &files {
            let found = String::from_utf8_lossy(bytes).matches(SECRET).count();
            assert_eq!(found, 0, "{format:?}: the key is in {}", file.display());
            occurrences += found;
        }
        eprintln!(
            "{format:?}: the key in stdout, stderr and {} files: {occurrences}",
            files.len()
        );
        assert_no_secret_anywhere(scratch.path(), &[&run.stdout, &run.stderr]);
    }
}
