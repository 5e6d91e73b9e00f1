//! Golden files of the recording format (`tests/data/recordings/`): a format-3 recording
//! holding one line of every kind the recorder writes, and every kind of message the app
//! applies, each variant of what they carry included; a format-4 recording (the wire alone,
//! as `livetalk serve --record` writes it) with one line of every kind of its own; and
//! format-2 and format-1 logs with one line of every kind those formats had. Formats 3 and 4
//! are written and read back by the same helpers: each recorder must write its format byte
//! for byte as the golden files have it, and each golden file must read back as the same
//! messages: a change of shape is a new format version, never an edit of these files.
//!
//! `LIVETALK_BLESS_RECORDINGS=1` writes the files instead of comparing (for a new format
//! version's files only).

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};

use super::format::{convert, v3};
use super::*;
use crate::app::{AudioAsked, Msg, WireFrame};
use crate::audio::{
    AudioEvent, AudioFigures, AudioSetup, Direction, EchoFigures, EchoMode, Latency, StreamInfo,
};
use crate::tools::mcp::{Catalog, McpEvent, ServerEntry, ServerState};
use crate::tools::{
    CallKey, DeviceKind, ProgressReport, SlowCall, ToolEntry, ToolEvent, ToolOutcome, ToolStatus,
    Unasked, Verdict, WaitingCall,
};
use livetalk_live::connection::{TappedFrame, WireTap};
use livetalk_live::session::SessionChange;
use livetalk_live::wire::{
    ClientMessage, FunctionCall, FunctionResponse, ModalityTokenCount, Scheduling, ServerMessage,
    UsageMetadata,
};
use livetalk_live::{CloseInfo, Inbound, ServerEvent};

/// 03:04:05 at a fixed offset, so no time zone database is needed.
const STARTED_AT: &str = "2020-01-02T03:04:05+02:00[+02:00]";

fn golden(format: u32) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/recordings")
        .join(format!("format-{format}"))
}

fn blessing() -> bool {
    std::env::var_os("LIVETALK_BLESS_RECORDINGS").is_some()
}

/// Writes `bytes` as the golden file `name` of `dir` when blessing, else asserts they are
/// byte for byte what it holds.
fn compare(dir: &Path, name: &str, bytes: &[u8]) {
    let path = dir.join(name);
    if blessing() {
        std::fs::create_dir_all(path.parent().unwrap_or(dir)).unwrap();
        std::fs::write(&path, bytes).unwrap();
        return;
    }
    let want = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (LIVETALK_BLESS_RECORDINGS=1 writes it)",
            path.display()
        )
    });
    if want != bytes {
        let (want, got) = (
            String::from_utf8_lossy(&want),
            String::from_utf8_lossy(bytes),
        );
        for (i, (w, g)) in want.lines().zip(got.lines()).enumerate() {
            assert_eq!(
                g,
                w,
                "{} line {} differs from the golden file",
                path.display(),
                i + 1
            );
        }
        panic!(
            "{}: {} bytes written, the golden file has {}",
            path.display(),
            got.len(),
            want.len()
        );
    }
}

/// A line's time: the golden files count in quarter seconds, exact in binary.
fn time_of(index: usize) -> f64 {
    index as f64 * 0.25
}

/// The line as the recorder encodes it, with its time replaced by `t`.
fn with_time(line: &str, t: f64) -> String {
    let rest = line
        .strip_prefix("{\"t\":")
        .and_then(|rest| rest.split_once(','))
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("a line starts with its time: {line}"));
    format!("{{\"t\":{},{rest}", serde_json::to_string(&t).unwrap())
}

fn devices() -> Vec<crate::tools::Device> {
    use crate::tools::Device;
    vec![
        Device {
            name: "living room lamp".into(),
            kind: DeviceKind::Light,
            status: "on".into(),
            brightness: Some(80),
            color: Some("warm white".into()),
            temperature_celsius: None,
        },
        Device {
            name: "thermostat".into(),
            kind: DeviceKind::Thermostat,
            status: "heating".into(),
            brightness: None,
            color: None,
            temperature_celsius: Some(21.5),
        },
        Device {
            name: "front door".into(),
            kind: DeviceKind::Lock,
            status: "locked".into(),
            brightness: None,
            color: None,
            temperature_celsius: None,
        },
    ]
}

/// The metadata line of the golden recordings (the recorder's own has the clock's time and
/// this build's version and settings).
fn meta(format: u32) -> Meta {
    Meta {
        format,
        livetalk_version: "0.0.0-golden".into(),
        started_at: STARTED_AT.into(),
        model: "models/gemini-live-test".into(),
        voice: "Puck".into(),
        endpoint_host: "127.0.0.1".into(),
        offline: false,
        devices: convert::devices_to(&devices()),
        config: json!({
            "api_version": "v1beta",
            "tools_enabled": true,
            "tool_timeout_secs": 30.0,
            "tool_max_response_bytes": 65536,
            "input_transcription": true,
            "output_transcription": true,
            "connect_timeout_secs": 10.0,
            "turn_timeout_secs": 60.0,
            "system_instruction_chars": 42,
            "api_key_set": true,
        }),
        audio: (format >= 3).then_some(
            AudioAsked {
                microphone: true,
                input_wav: false,
                output_wav: true,
                push_to_talk: true,
                echo: EchoMode::Gate,
            }
            .into(),
        ),
    }
}

/// The line as the recorder encodes it.
fn encode(t: f64, record: Record) -> String {
    format::encode(&Line { t, record }).unwrap()
}

/// PCM16 LE bytes of these samples.
fn pcm(samples: &[i16]) -> Vec<u8> {
    samples.iter().flat_map(|s| s.to_le_bytes()).collect()
}

fn base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn response(id: &str, name: &str, result: Value) -> FunctionResponse {
    FunctionResponse {
        id: Some(id.into()),
        name: name.into(),
        response: result,
        ..FunctionResponse::default()
    }
}

fn outcome(key: Option<u64>, status: ToolStatus, unasked: Option<Unasked>) -> ToolOutcome {
    ToolOutcome {
        key: key.map(CallKey),
        id: Some(format!("call-{}", key.unwrap_or(99))),
        name: "set_device_status".into(),
        args: json!({"device_name": "living room lamp", "new_status": "off"}),
        status,
        response: response(
            &format!("call-{}", key.unwrap_or(99)),
            "set_device_status",
            json!({"result": "ok"}),
        ),
        duration: Duration::new(1, 250_000_000),
        truncated: false,
        unasked,
    }
}

/// Every kind of message a recording keeps, each variant of what it carries included, in an
/// order a session could have applied them. Model audio is left out: it goes in with the
/// wire frames that carried it.
fn every_message() -> Vec<Msg> {
    let stream = |name: &str, path: &str| StreamInfo {
        name: name.into(),
        path: path.into(),
    };
    let latency = |ms: u64| Latency {
        last: Duration::from_millis(ms),
        worst: Duration::from_millis(ms * 2),
        count: 3,
    };
    let mut msgs = vec![
        Msg::Server(ServerEvent::SetupComplete {
            session_id: Some("session-7".into()),
        }),
        Msg::Server(ServerEvent::SetupComplete { session_id: None }),
        Msg::UserText("Is the living room lamp on?".into()),
        Msg::Server(ServerEvent::InputTranscription {
            text: "Is the lamp".into(),
            finished: false,
        }),
        Msg::Server(ServerEvent::VoiceActivity { speaking: true }),
        Msg::Server(ServerEvent::VoiceActivity { speaking: false }),
        Msg::Server(ServerEvent::ModelText("Let me check.".into())),
        Msg::Server(ServerEvent::OutputTranscription {
            text: "Let me check.".into(),
            finished: true,
        }),
        Msg::Server(ServerEvent::ToolCall(vec![
            FunctionCall {
                id: Some("call-0".into()),
                name: "get_device_status".into(),
                args: json!({"device_name": "living room lamp"}),
            },
            FunctionCall {
                id: None,
                name: "get_time".into(),
                args: json!({}),
            },
        ])),
        Msg::Tool(ToolEvent::Waiting(WaitingCall {
            key: CallKey(0),
            id: Some("call-0".into()),
            name: "set_device_status".into(),
        })),
        Msg::ToolVerdict {
            key: CallKey(0),
            verdict: Verdict::Approve,
        },
        Msg::ToolVerdict {
            key: CallKey(1),
            verdict: Verdict::Edit(json!({"device_name": "lamp", "new_status": "on"})),
        },
        Msg::ToolVerdict {
            key: CallKey(2),
            verdict: Verdict::Deny,
        },
        Msg::ToolVerdict {
            key: CallKey(3),
            verdict: Verdict::Answer(json!({"status": "off"})),
        },
        Msg::Tool(ToolEvent::Progress(ProgressReport {
            key: CallKey(0),
            id: Some("call-0".into()),
            name: "set_device_status".into(),
            progress: 0.5,
            total: Some(2.0),
            message: Some("halfway".into()),
        })),
        Msg::Tool(ToolEvent::Progress(ProgressReport {
            key: CallKey(0),
            id: None,
            name: "set_device_status".into(),
            progress: 3.0,
            total: None,
            message: None,
        })),
        Msg::Tool(ToolEvent::Slow(SlowCall {
            key: Some(CallKey(0)),
            id: Some("call-0".into()),
            name: "set_device_status".into(),
            elapsed: Duration::from_millis(1500),
        })),
        Msg::Tool(ToolEvent::Slow(SlowCall {
            key: None,
            id: None,
            name: "hang".into(),
            elapsed: Duration::from_millis(2000),
        })),
        Msg::Tool(ToolEvent::Finished(outcome(
            Some(0),
            ToolStatus::Ok,
            Some(Unasked::BuiltIn),
        ))),
        Msg::Tool(ToolEvent::Finished(outcome(
            Some(1),
            ToolStatus::Error("no such device".into()),
            Some(Unasked::SetToNever),
        ))),
        Msg::Tool(ToolEvent::Finished(outcome(
            Some(2),
            ToolStatus::TimedOut,
            Some(Unasked::ServerSaysReadOnly),
        ))),
        Msg::Tool(ToolEvent::Finished(outcome(
            Some(3),
            ToolStatus::Panicked("index out of bounds".into()),
            Some(Unasked::ApproveAll),
        ))),
        Msg::Tool(ToolEvent::Finished(outcome(
            Some(4),
            ToolStatus::Refused("the user declined".into()),
            None,
        ))),
        Msg::Tool(ToolEvent::Finished(outcome(
            Some(5),
            ToolStatus::ByHand,
            None,
        ))),
        Msg::Tool(ToolEvent::Finished(ToolOutcome {
            truncated: true,
            response: FunctionResponse {
                will_continue: Some(true),
                scheduling: Some(Scheduling::WhenIdle),
                ..response("call-99", "set_device_status", json!({"preview": "…"}))
            },
            ..outcome(None, ToolStatus::Ok, None)
        })),
        Msg::Server(ServerEvent::ToolCallCancelled(vec![
            "call-6".into(),
            "call-7".into(),
        ])),
        Msg::Tool(ToolEvent::Cancelled {
            key: Some(CallKey(6)),
            id: "call-6".into(),
            name: "get_device_status".into(),
            duration: Duration::from_millis(20),
        }),
        Msg::Tool(ToolEvent::Cancelled {
            key: None,
            id: "call-7".into(),
            name: "get_device_status".into(),
            duration: Duration::from_nanos(1),
        }),
        Msg::DevicesChanged(devices()),
        Msg::Mcp(McpEvent::Up {
            server: "files".into(),
            tools: 3,
        }),
        Msg::Mcp(McpEvent::Down {
            server: "files".into(),
            message: "It exited (status 1).".into(),
        }),
        Msg::Mcp(McpEvent::ToolsChanged {
            server: "files".into(),
            tools: 4,
        }),
        Msg::Mcp(McpEvent::Trimmed {
            server: "files".into(),
            message: "2 tools left out: over 128 tools.".into(),
        }),
        Msg::ToolCatalog(Catalog {
            tools: vec![
                ToolEntry {
                    name: "get_time".into(),
                    server: None,
                    description: "The local time.".into(),
                    enabled: true,
                    unasked: Some(Unasked::BuiltIn),
                },
                ToolEntry {
                    name: "files__read".into(),
                    server: Some("files".into()),
                    description: "Reads a file.".into(),
                    enabled: false,
                    unasked: None,
                },
            ],
            servers: vec![
                ServerEntry {
                    name: "files".into(),
                    state: ServerState::Up,
                },
                ServerEntry {
                    name: "web".into(),
                    state: ServerState::Starting,
                },
                ServerEntry {
                    name: "db".into(),
                    state: ServerState::Down("It exited.".into()),
                },
            ],
        }),
        Msg::SetToolEnabled {
            name: "files__read".into(),
            enabled: false,
        },
        Msg::RestartMcpServer("files".into()),
        Msg::Audio(AudioEvent::Opened(AudioSetup {
            input: Some(stream("Built-in mic", "48 kHz → 16 kHz")),
            output: Some(stream("Speakers", "24 kHz → 48 kHz")),
            problems: Vec::new(),
        })),
        Msg::Audio(AudioEvent::Opened(AudioSetup {
            input: None,
            output: None,
            problems: vec!["No microphone found.".into()],
        })),
        Msg::Audio(AudioEvent::DeviceFailed {
            direction: Direction::Input,
            message: "The microphone was unplugged.".into(),
        }),
        Msg::Audio(AudioEvent::DeviceFailed {
            direction: Direction::Output,
            message: "The speaker stopped.".into(),
        }),
        Msg::Audio(AudioEvent::Audible(true)),
        Msg::Audio(AudioEvent::Levels {
            mic: 0.5,
            output: 0.25,
        }),
        Msg::Audio(AudioEvent::Figures(AudioFigures {
            frames_sent: 500,
            frames_dropped: 1,
            frames_gated: 20,
            mic_overflow: 0,
            mic_gaps: Duration::from_millis(40),
            underruns: 2,
            played: Duration::from_millis(3250),
            mic_to_socket: latency(5),
            socket_to_speaker: latency(80),
            interrupt_to_silence: Latency::default(),
        })),
        Msg::Audio(AudioEvent::Echo(EchoFigures {
            mode: EchoMode::Aec,
            cancelling: true,
            noise_suppression: true,
            device_delay_ms: Some(40),
            delay_ms: Some(48),
            erle_db: Some(31.5),
            erl_db: Some(-2.25),
            converged: true,
            far_end_secs: 12.5,
            echo_heard: true,
        })),
        Msg::Audio(AudioEvent::Echo(EchoFigures::default())),
        Msg::Audio(AudioEvent::Silenced { echo_heard: true }),
        Msg::Audio(AudioEvent::InputClipEnded),
        Msg::Audio(AudioEvent::OutputWavFull {
            path: "/tmp/out.wav".into(),
            max_bytes: 1 << 30,
        }),
        Msg::Audio(AudioEvent::Audible(false)),
        Msg::BargeIn,
        Msg::Server(ServerEvent::Interrupted),
        Msg::ToggleMute,
        Msg::ToggleTalk,
        Msg::ReopenAudio,
        Msg::SetEcho(EchoMode::Aec),
        Msg::SetEcho(EchoMode::Gate),
        Msg::SetEcho(EchoMode::Off),
        Msg::Server(ServerEvent::Grounding(
            json!({"webSearchQueries": ["lamp"], "groundingChunks": []}),
        )),
        Msg::Server(ServerEvent::GenerationComplete),
        Msg::Server(ServerEvent::Interaction { idle: false }),
        Msg::Server(ServerEvent::Interaction { idle: true }),
        Msg::Server(ServerEvent::TurnComplete {
            reason: None,
            waiting_for_input: false,
        }),
        Msg::Server(ServerEvent::TurnComplete {
            reason: Some("NEED_MORE_INPUT".into()),
            waiting_for_input: true,
        }),
        Msg::Server(ServerEvent::Usage(UsageMetadata {
            prompt_token_count: Some(120),
            response_token_count: Some(30),
            total_token_count: Some(150),
            cached_content_token_count: Some(10),
            tool_use_prompt_token_count: Some(5),
            thoughts_token_count: Some(7),
            prompt_tokens_details: vec![ModalityTokenCount {
                modality: "TEXT".into(),
                token_count: Some(120),
            }],
            response_tokens_details: vec![ModalityTokenCount {
                modality: "AUDIO".into(),
                token_count: None,
            }],
        })),
        Msg::Server(ServerEvent::Usage(UsageMetadata::default())),
        Msg::Server(ServerEvent::ResumptionUpdate {
            handle: Some("handle-1".into()),
            resumable: true,
        }),
        Msg::Server(ServerEvent::ResumptionUpdate {
            handle: None,
            resumable: false,
        }),
        Msg::Server(ServerEvent::GoAway {
            time_left: Some(Duration::from_secs(50)),
        }),
        Msg::Server(ServerEvent::GoAway { time_left: None }),
        Msg::Server(ServerEvent::FrameSkipped {
            reason: "not JSON: expected value at line 1 column 1".into(),
        }),
        Msg::SessionChange(SessionChange::Reconnecting {
            planned: true,
            attempt: 0,
            reason: "The server asked for a new connection (goAway).".into(),
            retry_in: Duration::ZERO,
        }),
        Msg::SessionChange(SessionChange::Reconnecting {
            planned: false,
            attempt: 2,
            reason: "The connection dropped.".into(),
            retry_in: Duration::from_millis(480),
        }),
        Msg::SessionChange(SessionChange::Reconnected { resumed: true }),
        Msg::SessionChange(SessionChange::ResumeRejected {
            message: "Session not found.".into(),
        }),
        Msg::SessionChange(SessionChange::TurnLost),
        Msg::SessionChange(SessionChange::AnswerDropped {
            id: Some("call-0".into()),
            name: "get_device_status".into(),
        }),
        Msg::SessionChange(SessionChange::AnswerDropped {
            id: None,
            name: "get_time".into(),
        }),
        Msg::EndSession,
        Msg::Server(ServerEvent::Closed(CloseInfo::ended_by_client())),
        Msg::Server(ServerEvent::Closed(CloseInfo {
            code: Some(1011),
            reason: "internal error".into(),
            message: "The server closed the connection (1011: internal error).".into(),
            initiated_by_client: false,
        })),
        // Last: a headless replay ends at the first of these, as the run did.
        Msg::GaveUp("No answer within 60 s.".into()),
        Msg::ConnectFailed("Could not reach 127.0.0.1:9 (connection refused).".into()),
        Msg::Retry,
    ];
    // Messages a recording never keeps are filtered here, so a list that grows one is caught.
    msgs.retain(Msg::is_recorded);
    msgs
}

fn client(value: Value) -> std::sync::Arc<ClientMessage> {
    std::sync::Arc::new(serde_json::from_value(value).unwrap())
}

fn server(value: Value) -> ServerMessage {
    serde_json::from_value(value).unwrap()
}

/// How both golden sessions begin, through a recorder's wire tap: the connection and its
/// setup (a frame it could not use among the handshake's), a typed turn, and `mic` as the
/// microphone's audio.
fn the_sessions_start(tap: &dyn WireTap, mic: &[u8]) {
    tap.connecting("127.0.0.1");
    tap.sent(
        &client(json!({"setup": {"model": "models/gemini-live-test"}})),
        0,
    );
    tap.handshake(
        TappedFrame::Message(&server(
            json!({"setupComplete": {"sessionId": "session-7"}}),
        )),
        0,
    );
    tap.handshake(TappedFrame::Skipped("an unknown frame during setup"), 0);
    tap.sent(
        &client(json!({"clientContent": {
            "turns": [{"role": "user", "parts": [{"text": "Is the living room lamp on?"}]}],
            "turnComplete": true
        }})),
        0,
    );
    tap.sent(
        &client(json!({"realtimeInput": {
            "audio": {"mimeType": "audio/pcm;rate=16000", "data": base64(mic)}
        }})),
        0,
    );
}

/// Records a session holding every line kind into `dir` through the recorder (its wire tap
/// and the messages the app applied), and returns the messages applied, model audio
/// included.
fn record_every_kind(dir: &Path) -> Vec<Msg> {
    let scratch = tempfile::tempdir().unwrap();
    let config = scratch.path().join("config.toml");
    std::fs::write(&config, "").unwrap();
    let flags = crate::config::FlagOverrides {
        config: Some(config),
        ..Default::default()
    };
    let settings = crate::config::Settings::resolve(&flags, &|_| None).unwrap();
    let recorder = Recorder::create(dir, &settings, devices()).unwrap();
    let mut applied = Vec::new();
    let mut apply = |msg: Msg| {
        recorder.applied(&msg);
        applied.push(msg);
    };
    let said = pcm(&[0, 1000, -1000, 32767, -32768, 7]);
    let again = pcm(&[5, -5, 5, -5]);
    let unsent = pcm(&[42, -42]);
    let mic = pcm(&[1, 2, 3, 4, 5, 6, 7, 8]);

    the_sessions_start(&recorder, &mic);
    recorder.sent(
        &client(json!({"realtimeInput": {
            "mediaChunks": [
                {"mimeType": "audio/pcm;rate=16000", "data": base64(&mic[..4])},
                {"mimeType": "image/jpeg", "data": base64(&tiny_jpeg())}
            ]
        }})),
        0,
    );
    recorder.sent(&client(json!({"realtimeInput": {"activityStart": {}}})), 0);
    recorder.sent(&client(json!({"realtimeInput": {"activityEnd": {}}})), 0);
    recorder.sent(
        &client(json!({"realtimeInput": {"audioStreamEnd": true}})),
        0,
    );
    // A frame the session read is recorded when the app takes it in, before its events.
    let receive = |inbound: Inbound| {
        recorder.applied(&Msg::Wire(WireFrame::received(&inbound).unwrap()));
    };
    receive(Inbound::message(server(
        json!({"serverContent": {"modelTurn": {"parts": [
            {"text": "Let me"},
            {"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": base64(&said)}},
            {"inlineData": {"mimeType": "audio/pcm", "data": base64(&again)}}
        ]}}}),
    )));
    // The app applies what the frame carried: its audio refers to the samples above.
    apply(Msg::Server(ServerEvent::ModelText("Let me".into())));
    apply(Msg::Server(ServerEvent::ModelAudio {
        pcm: said,
        sample_rate: 24_000,
    }));
    apply(Msg::Server(ServerEvent::ModelAudio {
        pcm: again,
        sample_rate: 24_000,
    }));
    // Audio no frame carried (as a bridge's would be) is written when applied.
    apply(Msg::Server(ServerEvent::ModelAudio {
        pcm: unsent,
        sample_rate: 16_000,
    }));
    receive(Inbound::news(ServerEvent::FrameSkipped {
        reason: "not JSON".into(),
    }));
    receive(Inbound::message(server(
        json!({"toolCall": {"functionCalls": [
            {"id": "call-0", "name": "get_device_status", "args": {"device_name": "lamp"}}
        ]}}),
    )));
    recorder.sent(
        &client(json!({"toolResponse": {"functionResponses": [
            {"id": "call-0", "name": "get_device_status", "response": {"status": "on"}}
        ]}})),
        0,
    );
    receive(Inbound::message(server(json!({
        "serverContent": {"turnComplete": true},
        "usageMetadata": {"promptTokenCount": 12, "responseTokenCount": 3, "totalTokenCount": 15}
    }))));
    for msg in every_message() {
        apply(msg);
    }
    recorder.closed(&CloseInfo {
        code: Some(1000),
        reason: "bye".into(),
        message: "Session ended.".into(),
        initiated_by_client: true,
    });
    recorder.closed(&CloseInfo {
        code: None,
        reason: String::new(),
        message: "The connection was lost without a close message (1006)".into(),
        initiated_by_client: false,
    });
    drop(recorder);
    applied
}

/// A 2×2 red JPEG: the picture the golden session sends (the encoder writes the same bytes
/// each time).
fn tiny_jpeg() -> Vec<u8> {
    let picture = image::RgbImage::from_pixel(2, 2, image::Rgb([220, 30, 30]));
    let mut jpeg = Vec::new();
    image::codecs::jpeg::JpegEncoder::new(&mut jpeg)
        .encode_image(&picture)
        .unwrap();
    jpeg
}

/// A recorder's log with `meta` as its metadata line and the golden times.
fn golden_log(dir: &Path, meta: Meta) -> String {
    let written = std::fs::read_to_string(dir.join(LOG_FILE)).unwrap();
    let mut lines = written.lines();
    let first = lines.next().unwrap();
    let value: Value = serde_json::from_str(first).unwrap();
    assert_eq!(value["type"], "meta", "{first}");
    assert_eq!(value["format"], meta.format, "{first}");
    let mut log = encode(0.0, Record::Meta(Box::new(meta)));
    for (i, line) in lines.enumerate() {
        log += &with_time(line, time_of(i + 1));
        log.push('\n');
    }
    log
}

/// What `record` writes into a folder is byte for byte the golden files of its format (its
/// metadata line and times made the golden ones).
fn written_as_the_golden_files(meta: Meta, record: impl FnOnce(&Path) -> Vec<Msg>) {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("rec");
    record(&dir);
    let golden = golden(meta.format);
    compare(&golden, LOG_FILE, golden_log(&dir, meta).as_bytes());
    for wav in [MODEL_WAV, MIC_WAV] {
        compare(&golden, wav, &std::fs::read(dir.join(wav)).unwrap());
    }
    // The pictures sent, each its own file.
    let frames = dir.join(crate::record::pictures::FRAMES_DIR);
    let mut pictures: Vec<_> = std::fs::read_dir(&frames)
        .into_iter()
        .flatten()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    pictures.sort();
    for name in pictures {
        let file = format!("{}/{name}", crate::record::pictures::FRAMES_DIR);
        compare(&golden, &file, &std::fs::read(frames.join(&name)).unwrap());
    }
}

/// Every line of the golden log of `format` reads back to what writes it again, byte for
/// byte, at its golden time.
fn golden_lines_read_back(format: u32) {
    let text = std::fs::read_to_string(golden(format).join(LOG_FILE)).unwrap();
    for (i, raw) in text.lines().enumerate() {
        let line: Line = serde_json::from_str(raw).unwrap();
        assert_eq!(line.t, time_of(i));
        assert_eq!(serde_json::to_string(&line).unwrap(), raw);
    }
}

#[test]
fn format_3_is_written_byte_for_byte_as_the_golden_files() {
    written_as_the_golden_files(meta(FORMAT_VERSION), record_every_kind);
}

/// The golden files of `meta`'s format read back as `meta` and the messages `record` stands
/// for (recorded into a scratch folder), without a warning; and every line of their log as
/// [`golden_lines_read_back`] says.
fn golden_files_read_back(meta: Meta, record: impl FnOnce(&Path) -> Vec<Msg>) {
    let scratch = tempfile::tempdir().unwrap();
    let expected = record(&scratch.path().join("rec"));
    let recording = Recording::load(&golden(meta.format)).unwrap();
    assert!(recording.warnings.is_empty(), "{:?}", recording.warnings);
    assert_eq!(
        serde_json::to_string(&recording.meta).unwrap(),
        serde_json::to_string(&meta).unwrap()
    );
    let (applied, warnings) = recording.applied();
    assert!(warnings.is_empty(), "{warnings:?}");
    let (pictures, msgs): (Vec<Msg>, Vec<Msg>) = applied
        .iter()
        .map(|a| a.msg.clone())
        .partition(|msg| matches!(msg, Msg::Image(_)));
    assert_eq!(msgs, expected);
    // The pictures sent come back from `frames/` where they were sent, as the app showed
    // them.
    let pictures: Vec<String> = pictures
        .into_iter()
        .filter_map(|msg| match msg {
            Msg::Image(Ok(image)) => Some(image.name),
            Msg::Image(Err(why)) => Some(why),
            _ => None,
        })
        .collect();
    let sent: &[&str] = if meta.format == FORMAT_VERSION {
        &["frames/0001.jpg"]
    } else {
        &[]
    };
    assert_eq!(pictures, sent);
    golden_lines_read_back(meta.format);
}

#[test]
fn the_format_3_golden_files_read_back_as_the_messages_recorded() {
    golden_files_read_back(meta(FORMAT_VERSION), record_every_kind);
}

/// The metadata line of the golden format-4 recording: the session's as format 3's, with
/// nothing of an app (its devices, audio and settings), and who recorded it.
fn meta_4() -> Meta {
    Meta {
        format: WIRE_FORMAT_VERSION,
        devices: Vec::new(),
        config: json!({"recorded_by": "livetalk serve", "session": "2020-01-02_03-04-05-1", "app": "127.0.0.1"}),
        audio: None,
        ..meta(FORMAT_VERSION)
    }
}

/// Records a session of every format-4 line kind through the wire recorder, and returns the
/// messages the recording stands for.
fn record_every_wire_kind(dir: &Path) -> Vec<Msg> {
    let recorder = WireRecorder::create(
        dir,
        WireMeta {
            model: "models/gemini-live-test".into(),
            voice: "Puck".into(),
            endpoint_host: "127.0.0.1".into(),
            offline: false,
            recorded_by: "livetalk serve",
            details: json!({"session": "2020-01-02_03-04-05-1", "app": "127.0.0.1"}),
        },
    )
    .unwrap();
    let said = pcm(&[0, 1000, -1000, 32767, -32768, 7]);
    let mic = pcm(&[1, 2, 3, 4, 5, 6, 7, 8]);
    let mut expected = Vec::new();

    the_sessions_start(&recorder, &mic);
    expected.push(Msg::Server(ServerEvent::SetupComplete {
        session_id: Some("session-7".into()),
    }));
    expected.push(Msg::UserText("Is the living room lamp on?".into()));
    recorder.sent(&client(json!({"realtimeInput": {"activityEnd": {}}})), 0);
    recorder.received(&Inbound::message(server(
        json!({"serverContent": {"modelTurn": {"parts": [
            {"text": "Let me"},
            {"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": base64(&said)}}
        ]}}}),
    )));
    expected.push(Msg::Server(ServerEvent::ModelText("Let me".into())));
    expected.push(Msg::Server(ServerEvent::ModelAudio {
        pcm: said,
        sample_rate: 24_000,
    }));
    recorder.received(&Inbound::news(ServerEvent::FrameSkipped {
        reason: "not JSON".into(),
    }));
    expected.push(Msg::Server(ServerEvent::FrameSkipped {
        reason: "not JSON".into(),
    }));
    let call = FunctionCall {
        id: Some("call-0".into()),
        name: "get_device_status".into(),
        args: json!({"device_name": "lamp"}),
    };
    recorder.received(&Inbound::message(server(
        json!({"toolCall": {"functionCalls": [call]}}),
    )));
    expected.push(Msg::Server(ServerEvent::ToolCall(vec![call.clone()])));
    for answer in [
        json!({"status": "on"}),
        json!({"error": "the lamp is unplugged"}),
    ] {
        recorder.sent(
            &client(json!({"toolResponse": {"functionResponses": [
                {"id": "call-0", "name": "get_device_status", "response": answer}
            ]}})),
            0,
        );
    }
    expected.push(Msg::Tool(ToolEvent::Finished(ToolOutcome {
        key: None,
        id: Some("call-0".into()),
        name: "get_device_status".into(),
        args: call.args.clone(),
        status: ToolStatus::Ok,
        response: response("call-0", "get_device_status", json!({"status": "on"})),
        // From the call's line to the answer's, a quarter second apart in the golden file.
        duration: Duration::from_millis(250),
        truncated: false,
        unasked: None,
    })));
    // A second answer for the call (an app's mistake the bridge would have refused) has no
    // call left to take its arguments from.
    expected.push(Msg::Tool(ToolEvent::Finished(ToolOutcome {
        key: None,
        id: Some("call-0".into()),
        name: "get_device_status".into(),
        args: Value::Null,
        status: ToolStatus::Error("the lamp is unplugged".into()),
        response: response(
            "call-0",
            "get_device_status",
            json!({"error": "the lamp is unplugged"}),
        ),
        duration: Duration::ZERO,
        truncated: false,
        unasked: None,
    })));
    recorder.received(&Inbound::message(server(json!({
        "serverContent": {"turnComplete": true},
        "usageMetadata": {"promptTokenCount": 12, "responseTokenCount": 3, "totalTokenCount": 15}
    }))));
    expected.push(Msg::Server(ServerEvent::TurnComplete {
        reason: None,
        waiting_for_input: false,
    }));
    expected.push(Msg::Server(ServerEvent::Usage(
        serde_json::from_value::<UsageMetadata>(
            json!({"promptTokenCount": 12, "responseTokenCount": 3, "totalTokenCount": 15}),
        )
        .unwrap(),
    )));
    for change in [
        SessionChange::Reconnecting {
            planned: true,
            attempt: 0,
            reason: "The server asked to move to a new connection (goAway).".into(),
            retry_in: Duration::ZERO,
        },
        SessionChange::Reconnected { resumed: true },
        SessionChange::ResumeRejected {
            message: "The session to resume no longer exists (1008).".into(),
        },
        SessionChange::TurnLost,
        SessionChange::AnswerDropped {
            id: Some("call-9".into()),
            name: "get_device_status".into(),
        },
    ] {
        recorder.link(&change);
        expected.push(Msg::SessionChange(change));
    }
    recorder.warning("SEND_MESSAGE was not sent: this bridge instance is draining.");
    expected.push(Msg::Server(ServerEvent::FrameSkipped {
        reason: "SEND_MESSAGE was not sent: this bridge instance is draining.".into(),
    }));
    recorder.closed(&CloseInfo {
        code: Some(1000),
        reason: "bye".into(),
        message: "Session ended.".into(),
        initiated_by_client: true,
    });
    let ended = CloseInfo::ended_by_client();
    recorder.ended(&ended);
    expected.push(Msg::EndSession);
    expected.push(Msg::Server(ServerEvent::Closed(ended)));
    expected
}

#[test]
fn format_4_is_written_byte_for_byte_as_the_golden_files() {
    written_as_the_golden_files(meta_4(), record_every_wire_kind);
}

#[test]
fn the_format_4_golden_files_read_back_as_the_messages_they_stand_for() {
    golden_files_read_back(meta_4(), record_every_wire_kind);
}

/// Format 4 writes each WAV file at its track's one rate: a 48 kHz microphone and a 16 kHz
/// model voice are resampled to 16 and 24 kHz, their pitch kept.
#[test]
fn format_4_resamples_each_track_to_its_one_rate() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("rec");
    let recorder = WireRecorder::create(
        &dir,
        WireMeta {
            model: "m".into(),
            voice: String::new(),
            endpoint_host: "h".into(),
            offline: true,
            recorded_by: "a test",
            details: json!({}),
        },
    )
    .unwrap();
    let tone = |rate: u32, hz: f64, secs: f64| -> Vec<u8> {
        let n = (f64::from(rate) * secs) as usize;
        pcm(&(0..n)
            .map(|i| {
                ((i as f64 * hz * std::f64::consts::TAU / f64::from(rate)).sin() * 12_000.0) as i16
            })
            .collect::<Vec<_>>())
    };
    // Half a second of 440 Hz at 48 kHz, in 20 ms chunks as an app sends them.
    for chunk in tone(48_000, 440.0, 0.5).chunks(1920) {
        recorder.sent(
            &client(json!({"realtimeInput": {"audio": {"mimeType": "audio/pcm;rate=48000", "data": base64(chunk)}}})),
            0,
        );
    }
    let voice = tone(16_000, 300.0, 0.5);
    recorder.received(&Inbound::message(server(
        json!({"serverContent": {"modelTurn": {"parts": [
        {"inlineData": {"mimeType": "audio/pcm;rate=16000", "data": base64(&voice)}}]}}}),
    )));
    drop(recorder);
    let crossings = |samples: &[i16]| {
        samples
            .windows(2)
            .filter(|w| (w[0] < 0) != (w[1] < 0))
            .count()
    };
    let (rate, mic) = read_wav(&dir.join(MIC_WAV)).unwrap();
    assert_eq!(rate, 16_000);
    // The resampler holds back less than its 10 ms chunk.
    assert!((7_840..=8_000).contains(&mic.len()), "{}", mic.len());
    let hz = crossings(&mic) as f64 / 2.0 / (mic.len() as f64 / 16_000.0);
    assert!((hz - 440.0).abs() < 10.0, "{hz} Hz");
    let (rate, model) = read_wav(&dir.join(MODEL_WAV)).unwrap();
    assert_eq!(rate, 24_000);
    assert!((11_700..=12_000).contains(&model.len()), "{}", model.len());
    let hz = crossings(&model) as f64 / 2.0 / (model.len() as f64 / 24_000.0);
    assert!((hz - 300.0).abs() < 10.0, "{hz} Hz");
    // The lines refer to the samples written, in order and without gaps.
    let recording = Recording::load(&dir).unwrap();
    let mut next = 0;
    for line in recording.lines() {
        if let Record::Send { message } = &line.record {
            let at: AudioRef =
                serde_json::from_value(message["realtimeInput"]["audio"]["data"].clone()).unwrap();
            assert_eq!(at.sample_offset, next);
            next += at.sample_count;
        }
    }
    assert_eq!(next, mic.len() as u64);
}

/// A format-2 log: the wire tap plus one app-level line of every kind that format had.
fn format_2_lines() -> Vec<Record> {
    let recv = |message: Value| Record::Recv {
        setup: false,
        message: Some(message),
        skipped: None,
    };
    let at = 1;
    vec![
        Record::Connect {
            host: "127.0.0.1".into(),
        },
        Record::ConnectFailed {
            message: "Could not reach 127.0.0.1:9 (connection refused).".into(),
        },
        Record::Retry { at: 0 },
        Record::Connect {
            host: "127.0.0.1".into(),
        },
        Record::Send {
            message: json!({"setup": {"model": "models/gemini-live-test"}}),
        },
        Record::Recv {
            setup: true,
            message: Some(json!({"setupComplete": {}})),
            skipped: None,
        },
        Record::UserText {
            text: "Turn the lamp off.".into(),
            at,
        },
        Record::Send {
            message: json!({"clientContent": {"turns": [{"role": "user", "parts": [{"text": "Turn the lamp off."}]}], "turnComplete": true}}),
        },
        recv(json!({"toolCall": {"functionCalls": [
            {"id": "c1", "name": "set_device_status", "args": {"device_name": "lamp", "new_status": "off"}},
            {"id": "c2", "name": "hang", "args": {}}
        ]}})),
        Record::ToolSlow {
            id: Some("c1".into()),
            name: "set_device_status".into(),
            elapsed_ms: 1500.0,
            elapsed_ns: 1_500_000_000,
            at: 2,
        },
        Record::ToolResult {
            id: Some("c1".into()),
            name: "set_device_status".into(),
            args: json!({"device_name": "lamp", "new_status": "off"}),
            outcome: "ok".into(),
            error: None,
            duration_ms: 1600.25,
            duration_ns: 1_600_250_000,
            response: FunctionResponse {
                id: Some("c1".into()),
                name: "set_device_status".into(),
                response: json!({"result": "ok"}),
                ..FunctionResponse::default()
            },
            truncated: false,
            at: 2,
        },
        Record::Devices {
            devices: convert::devices_to(&devices()),
            at: 2,
        },
        recv(json!({"toolCallCancellation": {"ids": ["c2"]}})),
        Record::ToolCancelled {
            id: "c2".into(),
            name: "hang".into(),
            duration_ms: 20.0,
            duration_ns: 20_000_000,
            at: 3,
        },
        Record::ToolResult {
            id: None,
            name: "get_time".into(),
            args: json!({}),
            outcome: "timed_out".into(),
            error: Some("timed out after 30 s".into()),
            duration_ms: 30000.0,
            duration_ns: 30_000_000_000,
            response: FunctionResponse {
                name: "get_time".into(),
                response: json!({"error": "timed out after 30 s"}),
                ..FunctionResponse::default()
            },
            truncated: true,
            at: 3,
        },
        recv(json!({"serverContent": {"outputTranscription": {"text": "Done."}}})),
        Record::Recv {
            setup: false,
            message: None,
            skipped: Some("not JSON".into()),
        },
        Record::Close {
            code: None,
            reason: String::new(),
            message: "The connection dropped.".into(),
            initiated_by_client: false,
        },
        Record::Reconnecting {
            planned: false,
            attempt: 1,
            reason: "The connection dropped.".into(),
            retry_in_ms: 480.0,
            retry_in_ns: 480_000_000,
            at: 5,
        },
        Record::Connect {
            host: "127.0.0.1".into(),
        },
        Record::ResumeRejected {
            message: "Session not found.".into(),
            at: 5,
        },
        Record::Recv {
            setup: true,
            message: Some(json!({"setupComplete": {}})),
            skipped: None,
        },
        Record::Reconnected {
            resumed: false,
            at: 5,
        },
        Record::AnswerDropped {
            id: Some("c3".into()),
            name: "get_device_status".into(),
            at: 6,
        },
        Record::Error {
            message: "No answer within 60 s.".into(),
            at: 6,
        },
        recv(json!({"serverContent": {"turnComplete": true}})),
        Record::EndSession { at: 7 },
        Record::Close {
            code: Some(1000),
            reason: String::new(),
            message: "Session ended.".into(),
            initiated_by_client: true,
        },
        Record::SessionEnded {
            code: Some(1000),
            reason: String::new(),
            message: "Session ended.".into(),
            initiated_by_client: true,
            at: 7,
        },
    ]
}

/// A format-1 log: as format 2, but its `close` lines end the session.
fn format_1_lines() -> Vec<Record> {
    vec![
        Record::Connect {
            host: "127.0.0.1".into(),
        },
        Record::Recv {
            setup: true,
            message: Some(json!({"setupComplete": {}})),
            skipped: None,
        },
        Record::UserText {
            text: "Hi".into(),
            at: 1,
        },
        Record::Recv {
            setup: false,
            message: Some(json!({"serverContent": {"outputTranscription": {"text": "Hello"}}})),
            skipped: None,
        },
        Record::Recv {
            setup: false,
            message: Some(json!({"serverContent": {"turnComplete": true}})),
            skipped: None,
        },
        Record::EndSession { at: 3 },
        Record::Close {
            code: None,
            reason: String::new(),
            message: "Session ended.".into(),
            initiated_by_client: true,
        },
    ]
}

fn legacy_log(format: u32, records: Vec<Record>) -> String {
    std::iter::once(Record::Meta(Box::new(meta(format))))
        .chain(records)
        .enumerate()
        .map(|(i, record)| encode(time_of(i), record))
        .collect()
}

#[test]
fn formats_1_and_2_are_read_as_the_golden_files_have_them() {
    for (format, records) in [(1, format_1_lines()), (2, format_2_lines())] {
        let log = legacy_log(format, records);
        compare(&golden(format), LOG_FILE, log.as_bytes());
        let recording = Recording::load(&golden(format)).unwrap();
        assert!(recording.warnings.is_empty(), "{:?}", recording.warnings);
        assert_eq!(recording.meta.format, format);
        for (raw, line) in log.lines().skip(1).zip(recording.lines()) {
            assert_eq!(serde_json::to_string(&line).unwrap(), raw);
        }
    }
}

/// What the golden format-2 log replays as: each app-level line among the frames where its
/// `at` puts it, and nothing the old connection read after the session left it. The messages
/// are kept as format 3 records them (`applied.jsonl`), so the file holds what a replay
/// applies, in the recording format's words.
#[test]
fn the_format_2_golden_file_replays_as_the_app_applied_it() {
    let recording = Recording::load(&golden(2)).unwrap();
    let (applied, warnings) = recording.applied();
    assert!(warnings.is_empty(), "{warnings:?}");
    let shown: String = applied
        .iter()
        .map(|a| {
            encode(
                a.t,
                Record::applied(&a.msg, None).expect("a recorded message"),
            )
        })
        .collect();
    compare(&golden(2), "applied.jsonl", shown.as_bytes());
}

#[test]
fn the_format_1_golden_file_ends_at_its_close_line() {
    let recording = Recording::load(&golden(1)).unwrap();
    let (applied, _) = recording.applied();
    let msgs: Vec<Msg> = applied.into_iter().map(|a| a.msg).collect();
    assert_eq!(
        msgs,
        [
            Msg::Server(ServerEvent::SetupComplete { session_id: None }),
            Msg::UserText("Hi".into()),
            Msg::Server(ServerEvent::OutputTranscription {
                text: "Hello".into(),
                finished: false,
            }),
            Msg::Server(ServerEvent::TurnComplete {
                reason: None,
                waiting_for_input: false,
            }),
            Msg::EndSession,
            Msg::Server(ServerEvent::Closed(CloseInfo::ended_by_client())),
        ]
    );
}

/// What the recorder keeps is what the app says a recording keeps: every message above, and
/// none of raw input, layout, ticks or what came from a recording.
#[test]
fn the_recorded_kinds_are_the_ones_the_app_records() {
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseEvent, MouseEventKind};
    for msg in every_message() {
        assert!(v3::Msg::recorded(&msg).is_some(), "{msg:?}");
    }
    let never = [
        Msg::Replayed {
            event: ServerEvent::Interrupted,
            arrived_at: jiff::civil::time(3, 4, 5, 0),
        },
        Msg::ReplayProgress(crate::app::ReplayProgress::default()),
        Msg::Quit,
        Msg::Key(KeyEvent::from(KeyCode::Char('a'))),
        Msg::Mouse(MouseEvent {
            kind: MouseEventKind::Moved,
            column: 1,
            row: 2,
            modifiers: KeyModifiers::NONE,
        }),
        Msg::Paste("a secret pasted".into()),
        Msg::Layout(crate::app::ScreenLayout::default()),
        Msg::Tick(std::time::Instant::now()),
    ];
    for msg in never {
        assert!(!msg.is_recorded(), "{msg:?}");
        assert_eq!(v3::Msg::recorded(&msg), None, "{msg:?}");
    }
}
