//! The bridge protocol (docs/bridge-protocol.md) over real loopback sockets: a plain WebSocket
//! client (no livetalk client code) against the in-process bridge in front of the embedded mock
//! or a scripted fake Live server, plus binary-level runs of `livetalk serve` and
//! `livetalk --bridge`.

// Test output is the test runner's, not livetalk's: it may print directly.
#![allow(clippy::disallowed_macros)]
#![allow(clippy::unwrap_used)]

mod common;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine as _;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
use tokio_tungstenite::tungstenite::http::HeaderMap;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, Message};

use common::harness::bridge_options;
use common::ws::{JsonSocket, WAIT, function_responses, words};
use common::*;
use livetalk::bridge::{BridgeOptions, BridgeServer};
use livetalk_live::Outbox;
use livetalk_live::{ApiKey, ApiVersion, Endpoint};
use livetalk_mock::{MockOptions, MockServer};

// ---------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------

struct Bridge {
    server: BridgeServer,
    _mock: Option<MockServer>,
}

/// The bridge in front of a fast embedded mock.
async fn bridge_with(adjust: impl FnOnce(&mut BridgeOptions)) -> Bridge {
    let mock = MockServer::start(MockOptions {
        speed: 20.0,
        ..MockOptions::loopback()
    })
    .await
    .unwrap();
    let mut options = bridge_options(mock.endpoint(ApiVersion::V1));
    adjust(&mut options);
    Bridge {
        server: BridgeServer::start(options).await.unwrap(),
        _mock: Some(mock),
    }
}

async fn bridge() -> Bridge {
    bridge_with(|_| {}).await
}

/// A plain WebSocket client speaking the bridge protocol as JSON values.
struct App {
    socket: JsonSocket,
}

/// The app is its connection (`send`, `next`, everything `seen`), with the bridge protocol's
/// steps on top.
impl std::ops::Deref for App {
    type Target = JsonSocket;

    fn deref(&self) -> &JsonSocket {
        &self.socket
    }
}

impl std::ops::DerefMut for App {
    fn deref_mut(&mut self) -> &mut JsonSocket {
        &mut self.socket
    }
}

impl App {
    /// Connects to `request` (a URL, or a request with headers); the bridge sends text only.
    async fn connect(request: impl IntoClientRequest + Unpin) -> App {
        App {
            socket: JsonSocket::connect(request).await.text_only(),
        }
    }

    /// The next message, a `SESSION_HANDLE` aside: the bridge tells one whenever the
    /// service gives a new one (after setup, after each turn), between whatever else it says.
    /// It stays in `seen`, and `until` and `wait_for` find it.
    async fn next(&mut self) -> Option<Value> {
        loop {
            let message = self.socket.next().await?;
            if message["type"] != "SESSION_HANDLE" {
                return Some(message);
            }
        }
    }

    async fn send_raw(&mut self, message: Message) {
        self.ws.send(message).await.unwrap();
    }

    /// Reads until a message of `kind`; returns it and everything before it.
    async fn until(&mut self, kind: &str) -> (Value, Vec<Value>) {
        let Ok(mut before) = self.socket.until(|m| m["type"] == kind).await else {
            panic!("socket closed before {kind}; seen: {:#?}", self.seen);
        };
        let message = before.pop().expect("the message of that kind");
        (message, before)
    }

    /// Reads to the end of a model turn: everything up to TURN_COMPLETE. The Live API sends
    /// the turn's usage in the same message as `turnComplete`, which the bridge forwards as it
    /// is, right before TURN_COMPLETE.
    async fn finish_turn(&mut self) -> Vec<Value> {
        let (done, mut turn) = self.until("TURN_COMPLETE").await;
        let last = turn.last().expect("the turn's content before its end");
        let content = &last["payload"]["serverContent"];
        assert_eq!(content["turnComplete"], true, "{last}");
        assert!(
            content["usageMetadata"]["totalTokenCount"].is_number(),
            "{last}"
        );
        turn.push(done);
        turn
    }

    /// The next message must be a GEMINI_ERROR; returns its text.
    async fn expect_error(&mut self) -> String {
        let message = self.next().await.expect("an answer");
        assert_eq!(message["type"], "GEMINI_ERROR", "{message}");
        message["payload"]["message"].as_str().unwrap().to_owned()
    }

    /// CONNECT_GEMINI with `config`, then GEMINI_CONNECTED and a successful SETUP_COMPLETE.
    async fn start(&mut self, config: Value) {
        self.send(json!({"type": "CONNECT_GEMINI", "payload": {"initialConfig": config}}))
            .await;
        let (connected, _) = self.until("GEMINI_CONNECTED").await;
        assert_eq!(connected["payload"], json!({}), "{connected}");
        let (setup, _) = self.until("SETUP_COMPLETE").await;
        assert_eq!(setup["payload"]["success"], true, "{setup}");
        assert_eq!(
            setup["payload"]["setupComplete"]["success"], true,
            "{setup}"
        );
    }

    async fn say(&mut self, text: &str) {
        self.send(json!({"type": "SEND_MESSAGE", "payload": {"parts": [{"text": text}], "turnComplete": true}}))
            .await;
    }

    /// Answers the next TOOL_CALL with `response` for every call; returns the calls.
    async fn answer_tool_call(&mut self, response: Value) -> Vec<Value> {
        let (call, _) = self.until("TOOL_CALL").await;
        let calls = &call["payload"]["toolCall"]["functionCalls"];
        let answers = function_responses(calls, &response);
        self.send(json!({"type": "SEND_TOOL_RESPONSE", "payload": {"toolResponse": {"functionResponses": answers}}}))
            .await;
        calls.as_array().unwrap().clone()
    }
}

/// A LiveConfig declaring the smart-home tools the mock model knows how to call.
fn live_config(modality: &str) -> Value {
    json!({
        "model": "models/gemini-3.8-live",
        "systemInstruction": {"parts": [{"text": "You control a smart home."}]},
        "generationConfig": {
            "responseModalities": [modality],
            "speechConfig": {"voiceConfig": {"prebuiltVoiceConfig": {"voiceName": "Aoede"}}}
        },
        "tools": [{"functionDeclarations": [
            {"name": "get_device_status", "description": "Gets a device's status.",
             "parameters": {"type": "OBJECT", "properties": {"device_name": {"type": "STRING"}}, "required": ["device_name"]}},
            {"name": "set_device_status", "description": "Sets a device's status.",
             "parameters": {"type": "OBJECT", "properties": {"device_name": {"type": "STRING"}, "new_status": {"type": "STRING"}}}}
        ]}],
        "outputAudioTranscription": {}
    })
}

fn of_type<'a>(messages: &'a [Value], kind: &str) -> Vec<&'a Value> {
    messages.iter().filter(|m| m["type"] == kind).collect()
}

/// Concatenated output transcription or model text of CONTENT_MESSAGEs.
fn reply_text(messages: &[Value]) -> String {
    of_type(messages, "CONTENT_MESSAGE")
        .into_iter()
        .map(|m| words(&m["payload"]["serverContent"]))
        .collect()
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn audio_message(pcm: &[u8]) -> Value {
    json!({"type": "SEND_REALTIME_INPUT", "payload": {"audio": {"mimeType": "audio/pcm;rate=16000", "data": b64(pcm)}}})
}

/// A scripted fake Live server: every upgrade is handed to the test with its headers and
/// `setup`, so a test can answer (or misbehave) exactly as it needs.
struct FakeLive {
    url: String,
    connections: mpsc::UnboundedReceiver<(HeaderMap, Value, WebSocketStream<TcpStream>)>,
}

impl FakeLive {
    async fn start() -> FakeLive {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}", listener.local_addr().unwrap());
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                // As the service's sockets are: a reply written right after another is not
                // held back for the first one's acknowledgement.
                let _ = stream.set_nodelay(true);
                let tx = tx.clone();
                tokio::spawn(async move {
                    let mut headers = HeaderMap::new();
                    #[allow(clippy::result_large_err)] // the type is fixed by tungstenite
                    let callback = |request: &Request, response: Response| {
                        headers = request.headers().clone();
                        Ok(response)
                    };
                    let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(stream, callback).await
                    else {
                        return;
                    };
                    let Some(Ok(first)) = ws.next().await else {
                        return;
                    };
                    let setup: Value = serde_json::from_slice(&first.into_data()).unwrap();
                    let _ = tx.send((headers, setup["setup"].clone(), ws));
                });
            }
        });
        FakeLive {
            url,
            connections: rx,
        }
    }

    fn endpoint(&self) -> Endpoint {
        Endpoint::parse(&self.url, ApiVersion::V1).unwrap()
    }

    async fn accept(&mut self) -> (HeaderMap, Value, WebSocketStream<TcpStream>) {
        tokio::time::timeout(WAIT, self.connections.recv())
            .await
            .expect("the bridge dials upstream")
            .unwrap()
    }
}

async fn send_json(ws: &mut WebSocketStream<TcpStream>, value: Value) {
    ws.send(Message::binary(value.to_string().into_bytes()))
        .await
        .unwrap();
}

async fn close_with(ws: &mut WebSocketStream<TcpStream>, code: u16, reason: &str) {
    let frame = CloseFrame {
        code: CloseCode::from(code),
        reason: reason.to_owned().into(),
    };
    let _ = ws.send(Message::Close(Some(frame))).await;
}

// ---------------------------------------------------------------------------------------------
// Protocol over the mock
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn text_turn_with_a_tool_call_streams_audio_and_completes() {
    let bridge = bridge().await;
    let mut app = App::connect(&bridge.server.url()).await;
    app.start(live_config("audio")).await;

    app.say(SMART_HOME_LINES[0]).await;
    let calls = app.answer_tool_call(json!({"status": "off"})).await;
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["name"], "get_device_status");
    assert_eq!(calls[0]["args"], json!({"device_name": "living room lamp"}));
    assert!(
        calls[0]["id"]
            .as_str()
            .unwrap()
            .starts_with("function-call-")
    );

    let turn = app.finish_turn().await;
    let done = of_type(&turn, "TURN_COMPLETE")[0];
    assert_eq!(
        done["payload"],
        json!({"interactionStatus": "IDLE"}),
        "{done}"
    );
    // ASSISTANT_SPEAKING once, before the first audio chunk.
    let kinds: Vec<&str> = turn.iter().map(|m| m["type"].as_str().unwrap()).collect();
    let speaking = kinds
        .iter()
        .position(|k| *k == "ASSISTANT_SPEAKING")
        .unwrap();
    let first_audio = kinds.iter().position(|k| *k == "AUDIO_CHUNK").unwrap();
    assert!(speaking < first_audio, "{kinds:?}");
    assert_eq!(of_type(&turn, "ASSISTANT_SPEAKING").len(), 1, "{kinds:?}");
    assert_eq!(turn[speaking]["payload"], json!({"speaking": true}));
    // Audio is base64 PCM16, and only in AUDIO_CHUNK (not repeated in CONTENT_MESSAGE).
    let mut audio_bytes = 0;
    for chunk in of_type(&turn, "AUDIO_CHUNK") {
        let data = chunk["payload"]["data"].as_str().unwrap();
        let pcm = base64::engine::general_purpose::STANDARD
            .decode(data)
            .unwrap();
        assert_eq!(pcm.len() % 2, 0);
        audio_bytes += pcm.len();
    }
    assert!(
        audio_bytes > 24_000,
        "about a second of 24 kHz speech: {audio_bytes}"
    );
    assert!(
        !turn.iter().any(|m| m.to_string().contains("inlineData")),
        "audio is not duplicated into CONTENT_MESSAGE"
    );
    // The words arrive as transcription, and the reply uses the tool's answer.
    let text = reply_text(&turn);
    assert!(text.contains("off"), "{text}");
    // The turn's end is said as the service said it, then as TURN_COMPLETE.
    assert_eq!(
        turn.iter()
            .filter(|m| m["payload"]["serverContent"]["turnComplete"] == true)
            .count(),
        1
    );
    assert!(
        turn.iter()
            .any(|m| m["payload"]["serverContent"]["usageMetadata"]["totalTokenCount"].is_number())
    );
    assert!(
        turn.iter()
            .any(|m| m["payload"]["serverContent"]["generationComplete"] == true)
    );

    // A second turn on the same connection: speaking is announced again.
    app.say("Turn it on please.").await;
    app.answer_tool_call(json!({"result": "ok"})).await;
    let turn = app.finish_turn().await;
    assert_eq!(of_type(&turn, "ASSISTANT_SPEAKING").len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn realtime_audio_input_is_heard_and_answered() {
    let bridge = bridge().await;
    let mut app = App::connect(&bridge.server.url()).await;
    app.start(live_config("audio")).await;
    // 1 s of "speech" then silence, in 100 ms chunks like a microphone.
    let pcm = speech_pcm(1000, 900);
    for chunk in pcm.chunks(3200) {
        app.send(audio_message(chunk)).await;
    }
    let turn = app.finish_turn().await;
    let text = reply_text(&turn);
    assert!(
        text.contains("I heard about 1.0 seconds of speech"),
        "{text}"
    );
    assert!(!of_type(&turn, "AUDIO_CHUNK").is_empty());
    assert!(of_type(&turn, "GEMINI_ERROR").is_empty(), "{turn:#?}");

    // Realtime text (the canvas example) is a user turn too.
    app.send(
        json!({"type": "SEND_REALTIME_INPUT", "payload": {"text": "Is the front door locked?"}}),
    )
    .await;
    let calls = app.answer_tool_call(json!({"status": "locked"})).await;
    assert_eq!(calls[0]["args"]["device_name"], "front door lock");
    let turn = app.finish_turn().await;
    assert!(
        reply_text(&turn).contains("locked"),
        "{}",
        reply_text(&turn)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn deprecated_chunks_use_only_the_first_chunk_with_a_warning() {
    let bridge = bridge().await;
    let mut app = App::connect(&bridge.server.url()).await;
    app.start(live_config("audio")).await;
    // First chunk: 1 s of tone. Second chunk: 3 s more, which must be ignored.
    let first = speech_pcm(1000, 0);
    let ignored = speech_pcm(3000, 0);
    app.send(
        json!({"type": "SEND_REALTIME_INPUT", "payload": {"chunks": [
            {"mimeType": "audio/pcm;rate=16000", "data": b64(&first)},
            {"mimeType": "audio/pcm;rate=16000", "data": b64(&ignored)}
        ]}}),
    )
    .await;
    let warning = app.next().await.unwrap();
    assert_eq!(warning["type"], "LOG_MESSAGE", "{warning}");
    assert_eq!(warning["payload"]["type"], "warn");
    let text = warning["payload"]["message"].as_str().unwrap();
    assert!(
        text.contains("deprecated") && text.contains("first of 2"),
        "{text}"
    );
    // Silence in the new field ends the utterance.
    for chunk in speech_pcm(0, 900).chunks(3200) {
        app.send(audio_message(chunk)).await;
    }
    let turn = app.finish_turn().await;
    let reply = reply_text(&turn);
    assert!(
        reply.contains("about 1.0 seconds"),
        "only the first chunk counted: {reply}"
    );

    // The camelCase `mediaChunks` spelling is handled the same way.
    app.send(
        json!({"type": "SEND_REALTIME_INPUT", "payload": {"mediaChunks": [
        {"mimeType": "audio/pcm;rate=16000", "data": b64(&speech_pcm(20, 0))}]}}),
    )
    .await;
    let warning = app.next().await.unwrap();
    assert_eq!(warning["type"], "LOG_MESSAGE", "{warning}");
}

#[tokio::test(flavor = "multi_thread")]
async fn update_config_reconnects_and_applies_the_new_config() {
    let bridge = bridge().await;
    let mut app = App::connect(&bridge.server.url()).await;
    app.start(live_config("audio")).await;
    app.say(SMART_HOME_LINES[0]).await;
    app.answer_tool_call(json!({"status": "off"})).await;
    let turn = app.finish_turn().await;
    assert!(!of_type(&turn, "AUDIO_CHUNK").is_empty());

    // Switch to text replies.
    app.send(json!({"type": "UPDATE_CONFIG", "payload": live_config("text")}))
        .await;
    let (setup, before) = app.until("SETUP_COMPLETE").await;
    assert_eq!(setup["payload"]["success"], true);
    // The mock gives no resumption handle, and the bridge says what that means.
    let logs = of_type(&before, "LOG_MESSAGE");
    assert!(
        logs.iter().any(|l| l["payload"]["message"]
            .as_str()
            .unwrap()
            .contains("resumption")),
        "{before:#?}"
    );
    assert!(of_type(&before, "GEMINI_ERROR").is_empty(), "{before:#?}");
    assert!(
        of_type(&before, "GEMINI_DISCONNECTED").is_empty(),
        "{before:#?}"
    );

    app.say("What's the kitchen thermostat set to?").await;
    app.answer_tool_call(json!({"status": "idle", "temperature_celsius": 20}))
        .await;
    let turn = app.finish_turn().await;
    assert!(
        of_type(&turn, "AUDIO_CHUNK").is_empty(),
        "text modality now: {turn:#?}"
    );
    assert!(of_type(&turn, "ASSISTANT_SPEAKING").is_empty());
    assert!(reply_text(&turn).contains("20"), "{}", reply_text(&turn));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unusable_update_config_is_refused_and_the_session_goes_on() {
    let bridge = bridge().await;
    let mock = bridge._mock.as_ref().unwrap();
    let mut app = App::connect(&bridge.server.url()).await;
    app.start(live_config("text")).await;
    app.say(SMART_HOME_LINES[2]).await;
    app.answer_tool_call(json!({"status": "idle", "temperature_celsius": 20}))
        .await;
    let turn = app.finish_turn().await;
    assert!(reply_text(&turn).contains("20"), "{}", reply_text(&turn));

    // Each is answered with one GEMINI_ERROR saying what is wrong, and nothing else: no
    // reconnection, no "model changed", no SETUP_COMPLETE, no disconnect.
    let changed = |edit: fn(&mut Value)| {
        let mut config = live_config("audio");
        edit(&mut config);
        config
    };
    let refused = [
        (changed(|c| c["model"] = json!("models/")), "no model id"),
        (
            changed(|c| c["generationConfig"]["responseModalities"] = json!(["video"])),
            "\"video\"",
        ),
        (
            changed(|c| {
                c["generationConfig"]["speechConfig"]["voiceConfig"]["prebuiltVoiceConfig"]["voiceName"] =
                    json!("Robo")
            }),
            "\"Robo\"",
        ),
        (
            changed(|c| c["tools"][0]["urlContext"] = json!({})),
            "`urlContext`",
        ),
        (changed(|c| c["model"] = json!(5)), "`model`"),
    ];
    for (config, says) in refused {
        app.send(json!({"type": "UPDATE_CONFIG", "payload": config}))
            .await;
        let error = app.expect_error().await;
        assert!(error.contains(says), "{says}: {error}");
    }
    let after_refusals = app.seen.len();

    // The old session answers, on the connection it had.
    app.say(SMART_HOME_LINES[0]).await;
    app.answer_tool_call(json!({"status": "off"})).await;
    let turn = app.finish_turn().await;
    assert!(reply_text(&turn).contains("off"), "{}", reply_text(&turn));
    assert!(
        of_type(&turn, "AUDIO_CHUNK").is_empty(),
        "still text: {turn:#?}"
    );
    let since = &app.seen[after_refusals..];
    for kind in [
        "GEMINI_ERROR",
        "LOG_MESSAGE",
        "SETUP_COMPLETE",
        "GEMINI_DISCONNECTED",
    ] {
        assert!(of_type(since, kind).is_empty(), "{kind}: {since:#?}");
    }
    assert_eq!(
        mock.connections(),
        1,
        "the upstream session was never closed"
    );

    // A usable one still applies, and the conversation goes on: the model remembers the
    // 20 °C it read, so it sets 22 °C without reading the thermostat again.
    let mut config = live_config("audio");
    config["generationConfig"]["speechConfig"]["voiceConfig"]["prebuiltVoiceConfig"]["voiceName"] =
        json!("puck");
    app.send(json!({"type": "UPDATE_CONFIG", "payload": config}))
        .await;
    let (setup, before) = app.until("SETUP_COMPLETE").await;
    assert_eq!(setup["payload"]["success"], true, "{setup}");
    assert!(
        of_type(&before, "LOG_MESSAGE")
            .iter()
            .any(|l| l["payload"]["message"]
                .as_str()
                .unwrap()
                .contains("conversation continues")),
        "{before:#?}"
    );
    assert!(
        !app.seen
            .iter()
            .any(|m| m.to_string().contains("model changed")),
        "{:#?}",
        app.seen
    );
    app.say("Make the kitchen thermostat warmer.").await;
    let calls = app
        .answer_tool_call(json!({"status": "heating", "temperature_celsius": 22}))
        .await;
    assert_eq!(calls[0]["name"], "set_device_status", "{calls:?}");
    let turn = app.finish_turn().await;
    assert!(!of_type(&turn, "AUDIO_CHUNK").is_empty(), "audio now");
    assert_eq!((mock.connections(), mock.resumptions()), (2, 1));
}

/// What aiortc offers: one Opus audio track and a data channel, its candidate a port nobody
/// answers on.
const WEBRTC_OFFER: &str = "v=0\r\no=- 3970000000 3970000000 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\na=group:BUNDLE 0 1\r\na=msid-semantic:WMS *\r\nm=audio 9 UDP/TLS/RTP/SAVPF 96 0 8\r\nc=IN IP4 0.0.0.0\r\na=sendrecv\r\na=extmap:1 urn:ietf:params:rtp-hdrext:sdes:mid\r\na=mid:0\r\na=msid:a b\r\na=rtcp:9 IN IP4 0.0.0.0\r\na=rtcp-mux\r\na=ssrc:1 cname:x\r\na=rtpmap:96 opus/48000/2\r\na=rtpmap:0 PCMU/8000\r\na=rtpmap:8 PCMA/8000\r\na=candidate:1 1 udp 2130706431 127.0.0.1 9 typ host\r\na=end-of-candidates\r\na=ice-ufrag:abcd\r\na=ice-pwd:abcdefghijklmnopqrstuv\r\na=fingerprint:sha-256 6B:8B:F0:65:5F:78:E2:51:3B:AC:6F:F3:3F:46:1B:35:DC:B8:5F:64:1A:24:C2:43:F0:A1:58:D0:A1:2C:19:08\r\na=setup:actpass\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\nc=IN IP4 0.0.0.0\r\na=mid:1\r\na=sctp-port:5000\r\na=max-message-size:65536\r\na=ice-ufrag:abcd\r\na=ice-pwd:abcdefghijklmnopqrstuv\r\na=fingerprint:sha-256 6B:8B:F0:65:5F:78:E2:51:3B:AC:6F:F3:3F:46:1B:35:DC:B8:5F:64:1A:24:C2:43:F0:A1:58:D0:A1:2C:19:08\r\na=setup:actpass\r\n";

#[tokio::test(flavor = "multi_thread")]
async fn webrtc_offers_are_answered_bounded_and_given_up_in_words() {
    let bridge = bridge_with(|options| {
        options.webrtc.max_peers = 1;
        options.webrtc.connect_timeout = Duration::from_millis(500);
    })
    .await;
    let offer = json!({"type": "WEBRTC_OFFER", "payload": {"type": "offer", "sdp": WEBRTC_OFFER}});
    let mut first = App::connect(&bridge.server.url()).await;
    first.start(live_config("text")).await;
    first.send(offer.clone()).await;
    let (answer, _) = first.until("WEBRTC_ANSWER").await;
    let sdp = answer["payload"]["sdp"].as_str().unwrap();
    // A host candidate on the bridge's address and its one WebRTC port.
    let port = bridge.server.webrtc_port();
    assert!(
        sdp.contains(&format!("127.0.0.1 {port} typ host")) && sdp.contains("m=audio"),
        "{sdp}"
    );
    // The bridge's one peer connection is taken: a second app is told so, and its session
    // goes on.
    let mut second = App::connect(&bridge.server.url()).await;
    second.start(live_config("text")).await;
    second.send(offer.clone()).await;
    let error = second.expect_error().await;
    assert!(error.contains("limit"), "{error}");
    // Nobody answers the first one's ICE checks: given up in words, and the WebSocket
    // session carries on.
    let error = first.expect_error().await;
    assert!(
        error.contains("not established within 0.5 s") && error.contains("WebSocket"),
        "{error}"
    );
    first.say("Hello").await;
    first.finish_turn().await;
    // Its peer connection is gone, so the second app's offer is answered now.
    second.send(offer).await;
    second.until("WEBRTC_ANSWER").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn disconnect_ends_the_session_and_closes_the_socket() {
    let bridge = bridge().await;
    let mut app = App::connect(&bridge.server.url()).await;
    app.start(live_config("text")).await;
    app.send(json!({"type": "DISCONNECT_GEMINI"})).await;
    let (bye, _) = app.until("GEMINI_DISCONNECTED").await;
    assert!(
        bye["payload"]["reason"]
            .as_str()
            .unwrap()
            .contains("client")
    );
    assert_eq!(app.next().await, None, "the bridge closes the WebSocket");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_is_answered_and_the_connection_stays_usable() {
    let bridge = bridge_with(|o| o.max_message_bytes = 64 * 1024).await;
    let mut app = App::connect(&bridge.server.url()).await;

    // Before CONNECT_GEMINI.
    app.say("hello").await;
    let error = app.expect_error().await;
    assert!(error.contains("send CONNECT_GEMINI first"), "{error}");
    app.send_raw(Message::text("{\"type\": \"SEND_MESSAGE\", "))
        .await;
    assert!(app.expect_error().await.contains("not valid JSON"));
    app.send_raw(Message::binary(vec![0xff, 0x00, 0xfe])).await;
    assert!(app.expect_error().await.contains("UTF-8"));
    app.send(json!({"payload": {}})).await;
    assert!(app.expect_error().await.contains("string `type`"));
    app.send(json!({"type": "SEND_AUDIO"})).await;
    let error = app.expect_error().await;
    assert!(
        error.contains("Unknown message type `SEND_AUDIO`"),
        "{error}"
    );
    app.send(json!({"type": "CONNECT_GEMINI", "payload": {"initialConfig": {"model": 5}}}))
        .await;
    let error = app.expect_error().await;
    assert!(error.contains("initialConfig.model"), "{error}");
    // A config that parses but cannot work: SETUP_COMPLETE says so.
    app.send(json!({"type": "CONNECT_GEMINI", "payload": {"initialConfig": {}}}))
        .await;
    let (_, _) = app.until("GEMINI_CONNECTED").await;
    let (failed, _) = app.until("SETUP_COMPLETE").await;
    assert_eq!(failed["payload"]["success"], false);
    assert!(
        failed["payload"]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`model`")
    );
    assert!(app.expect_error().await.contains("`model`"));
    // The same ending as any failed opening, so an app handles one sequence.
    let bye = app.next().await.unwrap();
    assert_eq!(bye["type"], "GEMINI_DISCONNECTED", "{bye}");
    assert!(
        bye["payload"]["reason"]
            .as_str()
            .unwrap()
            .contains("cannot be used"),
        "{bye}"
    );

    // Hostile WebRTC signalling is refused in words once the session is up (an offer before
    // it is held until then), and the session goes on.
    app.send(json!({"type": "WEBRTC_OFFER", "payload": {"sdp": "v=0"}}))
        .await;
    app.start(live_config("text")).await;
    let error = app.expect_error().await;
    assert!(error.contains("no audio track"), "{error}");
    app.send(json!({"type": "WEBRTC_ICE_CANDIDATE", "payload": {"candidate": "candidate:1", "sdpMid": "0", "sdpMLineIndex": 0}}))
        .await;
    assert!(
        app.expect_error()
            .await
            .contains("ICE candidate could not be read")
    );
    app.send(json!({"type": "WEBRTC_OFFER", "payload": {"sdp": "m=audio ".repeat(20_000)}}))
        .await;
    assert!(app.expect_error().await.contains("larger than"));
    app.send(json!({"type": "CONNECT_GEMINI", "payload": {"initialConfig": live_config("text")}}))
        .await;
    assert!(app.expect_error().await.contains("already open"));
    app.send(
        json!({"type": "SEND_MESSAGE", "payload": {"parts": [{"txt": 1}], "turnComplete": "yes"}}),
    )
    .await;
    let error = app.expect_error().await;
    assert!(
        error.starts_with("SEND_MESSAGE payload is invalid"),
        "{error}"
    );
    app.send(json!({"type": "SEND_REALTIME_INPUT", "payload": {}}))
        .await;
    assert!(app.expect_error().await.contains("at least one of"));
    app.send(json!({"type": "SEND_REALTIME_INPUT", "payload": {"audio": {"mimeType": "audio/pcm", "data": "not base64!"}}}))
        .await;
    assert!(app.expect_error().await.contains("base64"));
    app.send(json!({"type": "SEND_TOOL_RESPONSE", "payload": {"toolResponse": {"functionResponses": [{"name": "f", "response": {}}]}}}))
        .await;
    assert!(app.expect_error().await.contains("`id`"));
    app.send(json!({"type": "SEND_TOOL_RESPONSE", "payload": {"toolResponse": {"parts": []}}}))
        .await;
    assert!(app.expect_error().await.contains("functionResponses"));

    // Oversized: refused, not fatal.
    let big = "x".repeat(100 * 1024);
    app.say(&big).await;
    let error = app.expect_error().await;
    assert!(
        error.contains("larger than this bridge's limit of 65536 bytes"),
        "{error}"
    );

    // After all that, a normal turn works on the same connection and session.
    app.say(SMART_HOME_LINES[0]).await;
    app.answer_tool_call(json!({"status": "off"})).await;
    let turn = app.finish_turn().await;
    assert!(reply_text(&turn).contains("off"));
    assert!(of_type(&turn, "GEMINI_ERROR").is_empty(), "{turn:#?}");

    // Far beyond the limit the bridge must stop reading: it says why and closes (1009).
    let huge = "y".repeat(300 * 1024);
    app.say(&huge).await;
    let error = app.expect_error().await;
    assert!(error.contains("closing the connection"), "{error}");
    assert_eq!(app.next().await, None);
}

// ---------------------------------------------------------------------------------------------
// Upstream behaviour, with a scripted fake Live server
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn upstream_close_becomes_error_and_disconnected_with_the_human_reason() {
    let mut fake = FakeLive::start().await;
    let server = BridgeServer::start(bridge_options(fake.endpoint()))
        .await
        .unwrap();
    let mut app = App::connect(&server.url()).await;

    // A setup the service rejects.
    app.send(
        json!({"type": "CONNECT_GEMINI", "payload": {"initialConfig": {"model": "models/nope"}}}),
    )
    .await;
    let (_, setup, mut upstream) = fake.accept().await;
    assert_eq!(setup["model"], "models/nope");
    close_with(
        &mut upstream,
        1008,
        "models/nope is not found for API version v1, or is not supported for bidiGenerateContent.",
    )
    .await;
    let (failed, _) = app.until("SETUP_COMPLETE").await;
    assert_eq!(failed["payload"]["success"], false);
    assert_eq!(failed["payload"]["error"]["code"], 1008);
    let error = app.expect_error().await;
    assert!(
        error.contains("The model is not available (1008)"),
        "{error}"
    );
    let (bye, _) = app.until("GEMINI_DISCONNECTED").await;
    assert!(
        bye["payload"]["reason"]
            .as_str()
            .unwrap()
            .contains("not available")
    );

    // The connection is still usable: a good setup, then the service fails mid-session.
    app.send(
        json!({"type": "CONNECT_GEMINI", "payload": {"initialConfig": {"model": "models/ok"}}}),
    )
    .await;
    let (_, _, mut upstream) = fake.accept().await;
    send_json(&mut upstream, json!({"setupComplete": {}})).await;
    let (ok, _) = app.until("SETUP_COMPLETE").await;
    assert_eq!(ok["payload"]["success"], true);
    // (A close that retrying cannot fix: others are retried, see the goAway test.)
    close_with(&mut upstream, 1007, "Request contains an invalid argument.").await;
    let error = app.until("GEMINI_ERROR").await.0;
    let message = error["payload"]["message"].as_str().unwrap();
    assert!(message.contains("invalid (1007)"), "{message}");
    assert_eq!(error["payload"]["details"]["code"], 1007);
    let (bye, _) = app.until("GEMINI_DISCONNECTED").await;
    assert_eq!(bye["payload"]["reason"], message);
    // Messages now say there is no session, rather than vanishing.
    app.say("hello?").await;
    assert!(app.expect_error().await.contains("CONNECT_GEMINI first"));
}

#[tokio::test(flavor = "multi_thread")]
async fn update_config_resumes_with_the_latest_handle_and_fills_tool_responses() {
    let mut fake = FakeLive::start().await;
    let server = BridgeServer::start(bridge_options(fake.endpoint()))
        .await
        .unwrap();
    let mut app = App::connect(&server.url()).await;
    let config = json!({"model": "models/m", "tools": [{"functionDeclarations": [
        {"name": "getCurrentTime", "defaultBehavior": "NON_BLOCKING", "defaultScheduling": "INTERRUPT"}]}]});
    app.send(json!({"type": "CONNECT_GEMINI", "payload": {"initialConfig": config}}))
        .await;
    let (_, setup, mut upstream) = fake.accept().await;
    // The bridge always asks for resumption handles, so UPDATE_CONFIG can keep the conversation.
    assert_eq!(setup["sessionResumption"], json!({}));
    assert_eq!(
        setup["tools"][0]["functionDeclarations"][0]["behavior"],
        "NON_BLOCKING"
    );
    send_json(&mut upstream, json!({"setupComplete": {}})).await;
    app.until("SETUP_COMPLETE").await;

    // A tool call; the app answers with a bare value and no name.
    send_json(&mut upstream, json!({"toolCall": {"functionCalls": [{"id": "call-1", "name": "getCurrentTime", "args": {}}]}})).await;
    app.until("TOOL_CALL").await;
    app.send(json!({"type": "SEND_TOOL_RESPONSE", "payload": {"toolResponse": {"functionResponses": [{"id": "call-1", "response": "12:00"}]}}}))
        .await;
    let forwarded = upstream.next().await.unwrap().unwrap();
    let forwarded: Value = serde_json::from_slice(&forwarded.into_data()).unwrap();
    assert_eq!(
        forwarded,
        json!({"toolResponse": {"functionResponses": [{"id": "call-1", "name": "getCurrentTime",
            "response": {"output": "12:00"}, "scheduling": "INTERRUPT"}]}})
    );

    send_json(
        &mut upstream,
        json!({"sessionResumptionUpdate": {"newHandle": "h-1", "resumable": true}}),
    )
    .await;
    send_json(
        &mut upstream,
        json!({"sessionResumptionUpdate": {"newHandle": "h-2", "resumable": true}}),
    )
    .await;
    // Grounding reaches the app both ways the protocol names.
    send_json(&mut upstream, json!({"serverContent": {"groundingMetadata": {"searchEntryPoint": {"renderedContent": "<b>chip</b>"}}}})).await;
    let (content, _) = app.until("CONTENT_MESSAGE").await;
    assert_eq!(
        content["payload"]["serverContent"]["groundingMetadata"]["searchEntryPoint"]["renderedContent"],
        "<b>chip</b>"
    );
    let (chip, _) = app.until("groundingMetadata").await;
    assert!(chip["payload"]["groundingMetadata"]["searchEntryPoint"].is_object());

    app.send(json!({"type": "UPDATE_CONFIG", "payload": {"model": "models/m", "systemInstruction": {"parts": [{"text": "Be terse."}]}}}))
        .await;
    let (_, setup, mut upstream2) = fake.accept().await;
    assert_eq!(setup["sessionResumption"], json!({"handle": "h-2"}));
    assert_eq!(setup["systemInstruction"]["parts"][0]["text"], "Be terse.");
    // The old upstream connection was closed by the bridge.
    let old = tokio::time::timeout(WAIT, async {
        loop {
            match upstream.next().await {
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => {}
            }
        }
    })
    .await;
    assert!(old.is_ok());
    send_json(&mut upstream2, json!({"setupComplete": {}})).await;
    let (again, before) = app.until("SETUP_COMPLETE").await;
    assert_eq!(again["payload"]["success"], true);
    assert!(of_type(&before, "LOG_MESSAGE").iter().any(|l| {
        l["payload"]["message"]
            .as_str()
            .unwrap()
            .contains("conversation continues")
    }));
    // The old session's end is not reported as a disconnect.
    assert!(
        of_type(&before, "GEMINI_DISCONNECTED").is_empty(),
        "{before:#?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_api_key_goes_upstream_but_never_to_the_client() {
    const KEY: &str = "fake-test-key-bridge-0123456789";
    let mut fake = FakeLive::start().await;
    let mut options = bridge_options(fake.endpoint());
    options.upstream.api_key = ApiKey::new(KEY);
    let server = BridgeServer::start(options).await.unwrap();
    let mut app = App::connect(&server.url()).await;

    app.send(
        json!({"type": "CONNECT_GEMINI", "payload": {"initialConfig": {"model": "models/m"}}}),
    )
    .await;
    let (headers, _, mut upstream) = fake.accept().await;
    assert_eq!(
        headers["x-goog-api-key"], KEY,
        "the key authenticates upstream"
    );
    // A hostile or careless upstream quotes the key in its close reason.
    close_with(&mut upstream, 1008, &format!("API key {KEY} denied")).await;
    app.until("GEMINI_DISCONNECTED").await;

    app.send(
        json!({"type": "CONNECT_GEMINI", "payload": {"initialConfig": {"model": "models/m"}}}),
    )
    .await;
    let (_, _, mut upstream) = fake.accept().await;
    send_json(&mut upstream, json!({"setupComplete": {}})).await;
    app.until("SETUP_COMPLETE").await;
    close_with(&mut upstream, 1011, &format!("quota for {KEY} exhausted")).await;
    app.until("GEMINI_DISCONNECTED").await;

    let everything = serde_json::to_string(&app.seen).unwrap();
    assert!(everything.contains("[redacted]"), "{everything}");
    assert!(!everything.contains(KEY), "{everything}");
    assert!(!everything.contains("0123456789"), "{everything}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_bridge_client_turns_refusals_and_upstream_failures_into_clear_session_errors() {
    use livetalk::bridge::client;
    use livetalk_live::wire::Setup;
    use livetalk_live::{ConnectError, ServerEvent};

    let mut fake = FakeLive::start().await;
    let mut options = bridge_options(fake.endpoint());
    options.token = Some("sesame".into());
    let server = BridgeServer::start(options).await.unwrap();
    let setup = Setup {
        model: "models/m".into(),
        ..Setup::default()
    };
    let timeout = Duration::from_secs(10);

    match client::connect(&server.url(), &setup, timeout).await {
        Err(ConnectError::Rejected { status, message }) => {
            assert_eq!(status, 401);
            assert!(message.contains("?token="), "{message}");
        }
        other => panic!("expected a 401, got {:?}", other.map(|_| ())),
    }
    // A wrong token is not a missing one.
    let wrong = format!("{}/?token=open-barley", server.url());
    match client::connect(&wrong, &setup, timeout).await {
        Err(ConnectError::Rejected { status, message }) => {
            assert_eq!(status, 401);
            assert!(
                message.contains("did not accept the token") && !message.contains("add ?token="),
                "{message}"
            );
            assert!(!message.contains("open-barley"), "{message}");
        }
        other => panic!("expected a 401, got {:?}", other.map(|_| ())),
    }

    let url = format!("{}/?token=sesame", server.url());
    let connecting = tokio::spawn(async move { client::connect(&url, &setup, timeout).await });
    let (_, sent, mut upstream) = fake.accept().await;
    assert_eq!(sent["model"], "models/m");
    send_json(&mut upstream, json!({"setupComplete": {}})).await;
    let mut session = connecting.await.unwrap().unwrap();
    assert_eq!(
        session.inbound.recv().await.map(|frame| frame.events),
        Some(vec![ServerEvent::SetupComplete { session_id: None }])
    );
    // A user turn goes up as SEND_MESSAGE and arrives upstream as clientContent.
    session.handle.send_user_text("hello").await.unwrap();
    let forwarded = upstream.next().await.unwrap().unwrap();
    let forwarded: Value = serde_json::from_slice(&forwarded.into_data()).unwrap();
    assert_eq!(
        forwarded,
        json!({"clientContent": {"turns": [{"role": "user", "parts": [{"text": "hello"}]}], "turnComplete": true}})
    );
    // (The bridge retries a close that retrying can fix; this one it cannot.)
    close_with(&mut upstream, 1007, "Request contains an invalid argument.").await;
    let mut events = Vec::new();
    while let Some(frame) = tokio::time::timeout(WAIT, session.inbound.recv())
        .await
        .unwrap()
    {
        events.extend(frame);
    }
    let Some(ServerEvent::Closed(close)) = events.last() else {
        panic!("{events:?}");
    };
    assert!(!close.initiated_by_client);
    assert_eq!(close.code, Some(1007));
    assert!(close.message.contains("invalid (1007)"), "{close:?}");
}

// ---------------------------------------------------------------------------------------------
// Security of the listener
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn a_token_is_required_before_the_upgrade() {
    let bridge = bridge_with(|o| o.token = Some("t0k-en".into())).await;
    let url = bridge.server.url();
    let status = |result: Result<_, tungstenite::Error>| match result {
        Err(tungstenite::Error::Http(response)) => response.status().as_u16(),
        Err(other) => panic!("expected an HTTP refusal, got {other}"),
        Ok(_) => 101,
    };
    assert_eq!(status(tokio_tungstenite::connect_async(&url).await), 401);
    assert_eq!(
        status(tokio_tungstenite::connect_async(format!("{url}/?token=wrong")).await),
        401
    );
    let mut request = url.as_str().into_client_request().unwrap();
    request
        .headers_mut()
        .insert("authorization", "Bearer nope".parse().unwrap());
    assert_eq!(status(tokio_tungstenite::connect_async(request).await), 401);

    let mut app = App::connect(&format!("{url}/?token=t0k-en")).await;
    app.start(live_config("text")).await;
    let mut request = url.as_str().into_client_request().unwrap();
    request
        .headers_mut()
        .insert("authorization", "Bearer t0k-en".parse().unwrap());
    let mut app = App::connect(request).await;
    app.start(live_config("text")).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_token_foreign_web_pages_are_refused() {
    let bridge = bridge().await;
    let mut request = bridge.server.url().into_client_request().unwrap();
    request
        .headers_mut()
        .insert("origin", "https://evil.example".parse().unwrap());
    match tokio_tungstenite::connect_async(request).await {
        Err(tungstenite::Error::Http(response)) => assert_eq!(response.status().as_u16(), 403),
        other => panic!("expected 403, got {:?}", other.map(|_| ())),
    }
    let mut request = bridge.server.url().into_client_request().unwrap();
    request
        .headers_mut()
        .insert("origin", "http://localhost:5173".parse().unwrap());
    assert!(tokio_tungstenite::connect_async(request).await.is_ok());
}

// ---------------------------------------------------------------------------------------------
// Past one instance: session handles, drains, health and metrics
// ---------------------------------------------------------------------------------------------

/// The first turn of the memory dialogue: it names the lamp, so "it" means the lamp after.
const ASK_LAMP: &str = "Is the living room lamp on?";
/// The second: only a session that remembers the first knows what "it" is.
const TURN_IT_ON: &str = "Turn it on.";

/// One mock and two bridge instances in front of it, as behind a load balancer.
async fn two_instances(
    speed: f64,
    adjust: impl Fn(&mut BridgeOptions),
) -> (MockServer, BridgeServer, BridgeServer) {
    let mock = MockServer::start(MockOptions {
        speed,
        ..MockOptions::loopback()
    })
    .await
    .unwrap();
    let mut options = bridge_options(mock.endpoint(ApiVersion::V1));
    adjust(&mut options);
    let a = BridgeServer::start(options.clone()).await.unwrap();
    let b = BridgeServer::start(options).await.unwrap();
    (mock, a, b)
}

impl App {
    /// Reads to the end of the connection: the Close the bridge ended it with.
    async fn closed(&mut self) -> common::ws::Closed {
        match self.socket.until(|_| false).await {
            Err(closed) => closed,
            Ok(read) => unreachable!("{read:?}"),
        }
    }

    /// CONNECT_GEMINI resuming `handle`; returns the SETUP_COMPLETE.
    async fn resume(&mut self, handle: &str) -> Value {
        self.send(json!({"type": "CONNECT_GEMINI", "payload": {
            "initialConfig": live_config("audio"), "handle": handle}}))
            .await;
        self.until("SETUP_COMPLETE").await.0
    }

    /// "Turn it on.", and the call it makes must be about the lamp: the conversation before
    /// it was kept.
    async fn turn_it_on_remembering_the_lamp(&mut self) {
        self.say(TURN_IT_ON).await;
        let calls = self.answer_tool_call(json!({"result": "ok"})).await;
        assert_eq!(calls[0]["name"], "set_device_status", "{calls:?}");
        assert_eq!(calls[0]["args"]["device_name"], "living room lamp");
        self.finish_turn().await;
    }
}

fn address(server: &BridgeServer) -> String {
    server.local_addr().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_handle_resumes_the_conversation_on_another_instance() {
    let (mock, a, b) = two_instances(20.0, |_| {}).await;
    let mut app = App::connect(&a.url()).await;
    app.start(live_config("audio")).await;
    app.say(ASK_LAMP).await;
    app.answer_tool_call(json!({"status": "off"})).await;
    app.finish_turn().await;
    // The handle of the conversation as it is now, after the turn.
    let told = app.wait_for(|m| m["type"] == "SESSION_HANDLE").await;
    let handle = told["payload"]["handle"].as_str().unwrap().to_owned();
    assert!(!handle.is_empty(), "{told}");
    drop(app);

    let mut again = App::connect(&b.url()).await;
    let setup = again.resume(&handle).await;
    assert_eq!(setup["payload"]["success"], true, "{setup}");
    again.turn_it_on_remembering_the_lamp().await;
    assert_eq!(mock.resumptions(), 1);

    // Without the handle the same words name no device: the memory above was the handle's.
    let mut fresh = App::connect(&b.url()).await;
    fresh.start(live_config("audio")).await;
    fresh.say(TURN_IT_ON).await;
    let turn = fresh.finish_turn().await;
    assert!(of_type(&turn, "TOOL_CALL").is_empty(), "{turn:#?}");
    assert!(
        reply_text(&turn).contains("Which device"),
        "{}",
        reply_text(&turn)
    );

    // A handle nobody issued is refused as the service refuses it, code and all.
    let mut stranger = App::connect(&b.url()).await;
    let setup = stranger
        .resume("mock-session-00000000000000000000000000000000")
        .await;
    assert_eq!(setup["payload"]["success"], false, "{setup}");
    assert_eq!(setup["payload"]["error"]["code"], 1008, "{setup}");
    let text = setup["payload"]["error"]["message"].as_str().unwrap();
    assert!(text.contains("session not found"), "{text}");

    let metrics = b.metrics_text();
    assert_eq!(
        metric(
            &metrics,
            r#"livetalk_bridge_sessions_total{resumed="true"}"#
        ),
        1.0
    );
    assert_eq!(
        metric(
            &metrics,
            r#"livetalk_bridge_sessions_total{resumed="false"}"#
        ),
        1.0
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_app_of_the_original_bridge_is_told_no_handle() {
    let bridge = bridge().await;
    let mut app = App::connect(&bridge.server.url()).await;
    app.send(json!({"type": "CONNECT_GEMINI", "payload": {
        "initialConfig": live_config("audio"), "sessionHandles": false}}))
        .await;
    app.until("SETUP_COMPLETE").await;
    app.say(ASK_LAMP).await;
    app.answer_tool_call(json!({"status": "off"})).await;
    app.finish_turn().await;
    // A second turn, so the first's handle has come and gone upstream.
    app.say(TURN_IT_ON).await;
    app.answer_tool_call(json!({"result": "ok"})).await;
    app.finish_turn().await;
    app.send(json!({"type": "DISCONNECT_GEMINI"})).await;
    let (_, rest) = app.until("GEMINI_DISCONNECTED").await;
    assert!(of_type(&app.seen, "SESSION_HANDLE").is_empty(), "{rest:#?}");
}

/// A bridge in front of a scripted upstream, and an app set up through it with `CONNECT_GEMINI`
/// and this `payload`: the upstream's socket and the setup it read.
async fn scripted_session(
    payload: Value,
) -> (
    FakeLive,
    BridgeServer,
    App,
    WebSocketStream<TcpStream>,
    Value,
) {
    let mut fake = FakeLive::start().await;
    let server = BridgeServer::start(bridge_options(fake.endpoint()))
        .await
        .unwrap();
    let mut app = App::connect(&server.url()).await;
    app.send(json!({"type": "CONNECT_GEMINI", "payload": payload}))
        .await;
    let (_, setup, mut upstream) = fake.accept().await;
    send_json(&mut upstream, json!({"setupComplete": {}})).await;
    app.until("SETUP_COMPLETE").await;
    (fake, server, app, upstream, setup)
}

/// A session resumed with the app's handle and drained before the service gave a new one:
/// the app is handed back the handle it came with (which still holds the conversation), not
/// told to forget it; the resumed setup carried that handle upstream.
#[tokio::test(flavor = "multi_thread")]
async fn a_drain_before_the_first_new_handle_hands_back_the_one_the_app_came_with() {
    let (_fake, server, mut app, _upstream, setup) = scripted_session(
        json!({"initialConfig": {"model": "models/m"}, "handle": "h-from-elsewhere"}),
    )
    .await;
    assert_eq!(
        setup["sessionResumption"],
        json!({"handle": "h-from-elsewhere"})
    );
    server.drain();
    let closed = app.closed().await;
    assert_eq!(closed.code, 1012);
    let told = of_type(&app.seen, "SESSION_HANDLE");
    assert_eq!(told.len(), 1, "{:#?}", app.seen);
    assert_eq!(told[0]["payload"], json!({"handle": "h-from-elsewhere"}));
}

/// A session resumed with the app's handle whose upstream connection drops before the service
/// gave a new one: the reconnect resumes with the app's handle (it still holds the
/// conversation), not as a fresh session that would lose it.
#[tokio::test(flavor = "multi_thread")]
async fn a_drop_before_the_first_new_handle_reconnects_with_the_one_the_app_came_with() {
    let (mut fake, _server, mut app, mut upstream, _) = scripted_session(
        json!({"initialConfig": {"model": "models/m"}, "handle": "h-from-elsewhere"}),
    )
    .await;
    close_with(&mut upstream, 1011, "internal error").await;
    let (_, setup, mut again) = fake.accept().await;
    assert_eq!(
        setup["sessionResumption"],
        json!({"handle": "h-from-elsewhere"})
    );
    send_json(&mut again, json!({"setupComplete": {}})).await;
    send_json(
        &mut again,
        json!({"sessionResumptionUpdate": {"newHandle": "h-next", "resumable": true}}),
    )
    .await;
    let told = app.wait_for(|m| m["type"] == "SESSION_HANDLE").await;
    assert_eq!(
        told["payload"],
        json!({"handle": "h-next"}),
        "{:#?}",
        app.seen
    );
    // Nothing told the app to forget the conversation, nor its own handle back.
    assert_eq!(
        of_type(&app.seen, "SESSION_HANDLE").len(),
        1,
        "{:#?}",
        app.seen
    );
}

/// The app is told a handle where the service gave it, after everything that came before it:
/// a handle given at a turn's end reaches the app after that turn's `TURN_COMPLETE`, however
/// far the session has read ahead of what the app has been sent.
#[tokio::test(flavor = "multi_thread")]
async fn a_handle_reaches_the_app_after_what_came_before_it() {
    let (_fake, _server, mut app, mut upstream, _) =
        scripted_session(json!({"initialConfig": {"model": "models/m"}})).await;
    // A reply of many parts, its end, and the handle that holds it, sent at once.
    for i in 0..100 {
        send_json(
            &mut upstream,
            json!({"serverContent": {"modelTurn": {"parts": [{"text": format!("{i} ")}]}}}),
        )
        .await;
    }
    send_json(
        &mut upstream,
        json!({"serverContent": {"turnComplete": true}}),
    )
    .await;
    send_json(
        &mut upstream,
        json!({"sessionResumptionUpdate": {"newHandle": "h-after-the-turn", "resumable": true}}),
    )
    .await;
    let told = app.wait_for(|m| m["type"] == "SESSION_HANDLE").await;
    assert_eq!(told["payload"], json!({"handle": "h-after-the-turn"}));
    let kinds: Vec<&str> = app.seen.iter().filter_map(|m| m["type"].as_str()).collect();
    let (handle, complete) = (
        kinds.iter().position(|k| *k == "SESSION_HANDLE").unwrap(),
        kinds.iter().position(|k| *k == "TURN_COMPLETE"),
    );
    assert_eq!(complete, Some(handle - 1), "{kinds:?}");
    let parts = of_type(&app.seen, "CONTENT_MESSAGE")
        .iter()
        .filter(|m| m["payload"]["serverContent"]["modelTurn"].is_object())
        .count();
    assert_eq!(parts, 100, "{kinds:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_answer_no_call_awaits_is_refused_and_never_reaches_the_model() {
    let (mock, a, _b) = two_instances(20.0, |_| {}).await;
    let mut app = App::connect(&a.url()).await;
    app.start(live_config("audio")).await;
    app.say(ASK_LAMP).await;
    let calls = app.answer_tool_call(json!({"status": "off"})).await;
    app.finish_turn().await;
    // The same answer again, and one for a call never made.
    for id in [calls[0]["id"].clone(), json!("function-call-999")] {
        app.send(json!({"type": "SEND_TOOL_RESPONSE", "payload": {"toolResponse": {
            "functionResponses": [{"id": id, "name": "get_device_status", "response": {"status": "off"}}]}}}))
            .await;
        let error = app.wait_for(|m| m["type"] == "GEMINI_ERROR").await;
        let text = error["payload"]["message"].as_str().unwrap();
        assert!(text.contains("answers no pending call"), "{text}");
    }
    // The session goes on, and the model never saw a stray answer.
    app.turn_it_on_remembering_the_lamp().await;
    assert_eq!(mock.stray_tool_responses(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_drain_finishes_the_turn_then_hands_each_app_its_handle_and_closes_1012() {
    // Slow speech, so the turn outlasts the drain's start by far.
    let (mock, a, b) = two_instances(2.0, |_| {}).await;
    let mut idle = App::connect(&a.url()).await;
    idle.start(live_config("audio")).await;
    idle.say(ASK_LAMP).await;
    idle.answer_tool_call(json!({"status": "off"})).await;
    idle.finish_turn().await;
    let idle_handle =
        idle.wait_for(|m| m["type"] == "SESSION_HANDLE").await["payload"]["handle"].clone();

    let mut busy = App::connect(&a.url()).await;
    busy.start(live_config("audio")).await;
    busy.say(ASK_LAMP).await;
    let (call, _) = busy.until("TOOL_CALL").await;
    // Mid-turn: the model waits for the tool's answer.
    assert!(a.drain());
    let (status, body) = http(&address(&a), "GET", "/readyz", &[]).await;
    assert_eq!(
        (status, body.trim_end()),
        (
            503,
            "draining: this instance is shutting down and takes no new apps"
        )
    );
    match tokio_tungstenite::connect_async(a.url()).await {
        Err(tungstenite::Error::Http(response)) => assert_eq!(response.status().as_u16(), 503),
        other => panic!(
            "a draining instance takes no new app: {:?}",
            other.map(|_| ())
        ),
    }
    assert_eq!(http(&address(&a), "GET", "/healthz", &[]).await.0, 200);

    // The idle app leaves at once with the handle it had.
    let closed = idle.closed().await;
    assert_eq!(closed.code, 1012);
    let told: Vec<&Value> = idle.seen.iter().rev().take(2).collect();
    assert_eq!(told[1]["type"], "SESSION_HANDLE", "{told:?}");
    assert_eq!(told[1]["payload"]["handle"], idle_handle);
    assert_eq!(told[0]["type"], "GEMINI_DISCONNECTED");
    assert_eq!(told[0]["payload"]["code"], 1012);

    // The busy one is told, answers its call, hears the turn to its end, then leaves.
    let calls = &call["payload"]["toolCall"]["functionCalls"];
    busy.send(
        json!({"type": "SEND_TOOL_RESPONSE", "payload": {"toolResponse": {
        "functionResponses": function_responses(calls, &json!({"status": "off"}))}}}),
    )
    .await;
    // What would start a new turn is not sent now: the app sends it again after.
    busy.say(TURN_IT_ON).await;
    let closed = busy.closed().await;
    assert_eq!(closed.code, 1012);
    let kinds: Vec<&str> = busy
        .seen
        .iter()
        .map(|m| m["type"].as_str().unwrap())
        .collect();
    let at = |kind: &str| {
        kinds
            .iter()
            .rposition(|k| *k == kind)
            .unwrap_or_else(|| panic!("no {kind}: {kinds:?}"))
    };
    let notice = busy
        .seen
        .iter()
        .position(|m| {
            m["type"] == "LOG_MESSAGE"
                && m["payload"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("draining")
        })
        .expect("the drain is told");
    assert!(
        notice < at("TURN_COMPLETE")
            && at("TURN_COMPLETE") < at("SESSION_HANDLE")
            && at("SESSION_HANDLE") < at("GEMINI_DISCONNECTED"),
        "{kinds:?}"
    );
    assert!(
        reply_text(&busy.seen).contains("off"),
        "the turn came whole: {}",
        reply_text(&busy.seen)
    );
    let refused = of_type(&busy.seen, "GEMINI_ERROR");
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(
        refused[0]["payload"]["message"]
            .as_str()
            .unwrap()
            .starts_with("SEND_MESSAGE was not sent")
    );
    let handle = busy.seen[at("SESSION_HANDLE")]["payload"]["handle"]
        .as_str()
        .unwrap()
        .to_owned();
    tokio::time::timeout(WAIT, a.emptied())
        .await
        .expect("the instance empties");

    // Both resume on the other instance, where the conversation goes on.
    let mut moved = App::connect(&b.url()).await;
    assert_eq!(moved.resume(&handle).await["payload"]["success"], true);
    moved.turn_it_on_remembering_the_lamp().await;
    let mut moved = App::connect(&b.url()).await;
    assert_eq!(
        moved.resume(idle_handle.as_str().unwrap()).await["payload"]["success"],
        true
    );
    moved.turn_it_on_remembering_the_lamp().await;
    assert_eq!(mock.stray_tool_responses(), 0);

    let metrics = a.metrics_text();
    assert_eq!(metric(&metrics, "livetalk_bridge_drains_total"), 1.0);
    assert_eq!(
        metric(
            &metrics,
            r#"livetalk_bridge_drained_connections_total{at="turn_end"}"#
        ),
        2.0
    );
    assert_eq!(metric(&metrics, "livetalk_bridge_connections_open"), 0.0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_drain_that_times_out_cancels_the_calls_left_open_before_the_close() {
    let (mock, a, _b) = two_instances(20.0, |o| o.drain_timeout = Duration::from_secs(1)).await;
    let mut app = App::connect(&a.url()).await;
    app.start(live_config("audio")).await;
    app.say(ASK_LAMP).await;
    let (call, _) = app.until("TOOL_CALL").await;
    let id = call["payload"]["toolCall"]["functionCalls"][0]["id"].clone();
    a.drain();
    // The app never answers: a second later the drain closes it anyway.
    let closed = app.closed().await;
    assert_eq!(closed.code, 1012);
    let last: Vec<&str> = app
        .seen
        .iter()
        .rev()
        .take(3)
        .map(|m| m["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        last,
        [
            "GEMINI_DISCONNECTED",
            "SESSION_HANDLE",
            "TOOL_CALL_CANCELLATION"
        ]
    );
    let cancelled = of_type(&app.seen, "TOOL_CALL_CANCELLATION");
    assert_eq!(
        cancelled[0]["payload"]["toolCallCancellation"]["ids"],
        json!([id])
    );
    tokio::time::timeout(WAIT, a.emptied()).await.unwrap();
    assert_eq!(mock.stray_tool_responses(), 0);
    assert_eq!(
        metric(
            &a.metrics_text(),
            r#"livetalk_bridge_drained_connections_total{at="timeout"}"#
        ),
        1.0
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn health_metrics_and_drain_answer_plain_http_the_token_guarding_all_but_health() {
    let bridge = bridge_with(|o| o.token = Some("t0k".into())).await;
    let addr = address(&bridge.server);
    let bearer = [("Authorization", "Bearer t0k")];
    assert_eq!(
        http(&addr, "GET", "/healthz", &[]).await,
        (200, "ok\n".into())
    );
    assert_eq!(
        http(&addr, "GET", "/readyz", &[]).await,
        (200, "ready\n".into())
    );
    assert_eq!(http(&addr, "GET", "/metrics", &[]).await.0, 401);
    assert_eq!(http(&addr, "POST", "/drain", &[]).await.0, 401);
    assert_eq!(http(&addr, "GET", "/drain", &bearer).await.0, 405);
    assert_eq!(http(&addr, "GET", "/", &[]).await.0, 426);

    let mut app = App::connect(&format!("{}/?token=t0k", bridge.server.url())).await;
    app.start(live_config("audio")).await;
    app.say(ASK_LAMP).await;
    app.answer_tool_call(json!({"status": "off"})).await;
    app.finish_turn().await;
    app.send(json!({"type": "DISCONNECT_GEMINI"})).await;
    app.until("GEMINI_DISCONNECTED").await;
    let (status, metrics) = http(&addr, "GET", "/metrics?token=t0k", &[]).await;
    assert_eq!(status, 200);
    assert!(metrics.ends_with("# EOF\n"), "{metrics}");
    for (sample, value) in [
        ("livetalk_bridge_connections_total", 1.0),
        (r#"livetalk_bridge_sessions_total{resumed="false"}"#, 1.0),
        ("livetalk_bridge_sessions_open", 0.0),
        ("livetalk_bridge_turns_total", 1.0),
        ("livetalk_bridge_tool_calls_total", 1.0),
        ("livetalk_bridge_tool_answer_seconds_count", 1.0),
        ("livetalk_bridge_first_response_seconds_count", 1.0),
        ("livetalk_bridge_first_audio_seconds_count", 1.0),
    ] {
        assert_eq!(metric(&metrics, sample), value, "{sample}\n{metrics}");
    }
    for sample in [
        r#"livetalk_bridge_app_bytes_total{direction="received"}"#,
        r#"livetalk_bridge_app_bytes_total{direction="sent"}"#,
        r#"livetalk_bridge_upstream_bytes_total{direction="received"}"#,
        r#"livetalk_bridge_upstream_bytes_total{direction="sent"}"#,
    ] {
        assert!(metric(&metrics, sample) > 0.0, "{sample}\n{metrics}");
    }
    assert!(!metrics.contains("t0k"));

    assert_eq!(http(&addr, "POST", "/drain", &bearer).await.0, 202);
    assert_eq!(http(&addr, "GET", "/readyz", &[]).await.0, 503);
    tokio::time::timeout(WAIT, bridge.server.emptied())
        .await
        .unwrap();
}

/// Every frame an app sends is paid for from the process's input budget before the bridge
/// reads it, through the HTTP server and the upgrade: with the budget held elsewhere, an app's
/// megabyte message is not read at all, and once the budget's deadline has passed the app is
/// told so and the connection closes 1013 (a frame read first and weighed after would be
/// "dropped" and the connection kept). Plain HTTP needs no budget and answers meanwhile.
#[tokio::test(flavor = "multi_thread")]
async fn an_apps_frames_are_paid_for_from_the_budget_before_the_bridge_reads_them() {
    use livetalk_live::budget::{BYTE_COST, InputBudget, Shape};
    let bridge = bridge().await;
    let addr = address(&bridge.server);
    let mut app = App::connect(&bridge.server.url()).await;
    app.start(live_config("text")).await;
    let budget = InputBudget::process();
    let everything = Shape {
        bytes: budget.bytes() / BYTE_COST,
        ..Shape::default()
    };
    let elsewhere = budget
        .hold_shape(everything, Duration::ZERO)
        .await
        .expect("the budget is free before the message");
    assert_eq!(budget.available(), 0);
    app.say(&"x".repeat(1 << 20)).await;
    // The frame waits, unread, for what it costs; the plain routes do not.
    assert_eq!(
        http(&addr, "GET", "/healthz", &[]).await,
        (200, "ok\n".into())
    );
    assert_eq!(http(&addr, "GET", "/metrics", &[]).await.0, 200);
    let (error, _) = app.until("GEMINI_ERROR").await;
    let error = error["payload"]["message"].as_str().unwrap().to_owned();
    assert!(
        error.starts_with("The message was not read: ") && error.contains("closing the connection"),
        "{error}"
    );
    let closed = app.closed().await;
    assert_eq!(closed.code, 1013, "{}", closed.reason);
    drop(elsewhere);
    // Nothing of it is left held.
    assert_eq!(budget.available(), budget.bytes());
}

// ---------------------------------------------------------------------------------------------
// Load
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn fifty_concurrent_clients_each_complete_a_turn_with_a_tool_call() {
    let bridge = bridge().await;
    let url = bridge.server.url();
    let mut clients = Vec::new();
    for i in 0..50 {
        let url = url.clone();
        clients.push(tokio::spawn(async move {
            let mut app = App::connect(&url).await;
            app.start(live_config("audio")).await;
            // Each client asks about a different device so answers can't cross sessions.
            let (question, device, status) = match i % 3 {
                0 => ("Is the living room lamp on?", "living room lamp", "off"),
                1 => ("Is the front door locked?", "front door lock", "locked"),
                _ => (
                    "What's the kitchen thermostat set to?",
                    "kitchen thermostat",
                    "idle",
                ),
            };
            app.say(question).await;
            let calls = app
                .answer_tool_call(json!({"status": status, "temperature_celsius": 20 + i}))
                .await;
            assert_eq!(calls[0]["args"]["device_name"], device);
            let turn = app.finish_turn().await;
            assert!(!of_type(&turn, "AUDIO_CHUNK").is_empty(), "client {i}");
            let reply = reply_text(&turn);
            if i % 3 == 2 {
                assert!(reply.contains(&(20 + i).to_string()), "client {i}: {reply}");
            } else {
                assert!(reply.contains(status), "client {i}: {reply}");
            }
            app
        }));
    }
    // While all fifty are open, a newcomer is still served promptly.
    let started = std::time::Instant::now();
    let mut newcomer = App::connect(&url).await;
    newcomer.start(live_config("text")).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "setup took {:?} under load",
        started.elapsed()
    );
    let mut finished = Vec::new();
    for client in clients {
        finished.push(
            tokio::time::timeout(Duration::from_secs(60), client)
                .await
                .unwrap()
                .unwrap(),
        );
    }
    assert_eq!(finished.len(), 50);
}

// ---------------------------------------------------------------------------------------------
// Binary level
// ---------------------------------------------------------------------------------------------

/// A running `livetalk serve` and the URL it printed.
struct ServeProcess {
    child: Child,
    url: String,
    stderr: Option<std::sync::mpsc::Receiver<String>>,
}

impl ServeProcess {
    fn start(scratch: &std::path::Path, args: &[&str], envs: &[(&str, &str)]) -> ServeProcess {
        let mut child = livetalk(scratch)
            .arg("serve")
            .args(args)
            .envs(envs.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = read_all(child.stderr.take().unwrap());
        let url = LineWatcher::new(child.stdout.take().unwrap()).wait_for_url(WAIT);
        ServeProcess {
            child,
            url,
            stderr: Some(stderr),
        }
    }

    /// Stops the server as a deploy does (SIGTERM: it drains, exits 0 and writes out what its
    /// log still held; a kill could lose the last lines) and returns what it logged.
    fn stop(self) -> String {
        let (status, log) = self.signalled("TERM", WAIT);
        assert_eq!(status.code(), Some(0), "{log}");
        log
    }
}

impl ServeProcess {
    /// `signal` (TERM, INT), then how the server ended: its exit status (after at most
    /// `within`) and what it logged.
    fn signalled(mut self, signal: &str, within: Duration) -> (std::process::ExitStatus, String) {
        send_signal(self.child.id(), signal);
        let status = poll(within, Duration::from_millis(20), || {
            self.child.try_wait().unwrap()
        })
        .unwrap_or_else(|| panic!("livetalk serve did not exit within {within:?} of SIG{signal}"));
        let log = self
            .stderr
            .take()
            .unwrap()
            .recv_timeout(Duration::from_secs(5))
            .unwrap();
        (status, log)
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `serve --record DIR --record-keep 2 --log-format json` with an API key: three app
/// sessions, of which the newest two are kept; each reads as recording format 4 with
/// `inspect`, `replay` and `check`, and none holds the key. Every log line is one JSON object,
/// each line of a session with its id; SIGTERM with no app left ends the bridge at once with
/// status 0.
#[test]
fn serve_records_each_session_in_format_4_and_logs_json_lines() {
    const KEY: &str = "fake-key-recorded-never-4242";
    let scratch = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mock = runtime
        .block_on(MockServer::start(MockOptions {
            speed: 20.0,
            ..MockOptions::loopback()
        }))
        .unwrap();
    let recordings = scratch.path().join("recordings");
    let serve = ServeProcess::start(
        scratch.path(),
        &[
            "--endpoint",
            &mock.base_url(),
            "--listen",
            "127.0.0.1:0",
            "--record",
            recordings.to_str().unwrap(),
            "--record-keep",
            "2",
            "--log-format",
            "json",
        ],
        &[("GEMINI_API_KEY", KEY), ("LIVETALK_LOG", "debug")],
    );
    for lines in [
        &SMART_HOME_LINES[..1],
        &SMART_HOME_LINES[..1],
        &SMART_HOME_LINES,
    ] {
        let run = run_livetalk(
            scratch.path(),
            &["--headless", "--bridge", &serve.url],
            &[],
            lines,
        );
        assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    }
    let (status, log) = serve.signalled("TERM", Duration::from_secs(10));
    assert!(status.success(), "{status:?}\n{log}");

    // One JSON object a line, no key twice; a session's lines name it.
    let lines: Vec<Value> = log
        .lines()
        .map(|line| {
            let value: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
            // The formatter's own `target` once (a field of that name would repeat it).
            assert_eq!(line.matches("\"target\":").count(), 1, "{line}");
            value
        })
        .collect();
    let sessions: std::collections::BTreeSet<String> = lines
        .iter()
        .filter_map(|line| {
            line["spans"]
                .as_array()?
                .iter()
                .find(|span| span["name"] == "session")?["id"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(sessions.len(), 3, "{sessions:?}\n{log}");
    assert!(
        lines
            .iter()
            .any(|l| l["message"] == "upstream session open" && l["spans"][0]["name"] == "session"),
        "{log}"
    );
    assert!(!log.contains(KEY));

    // The newest two, each named as its log lines name the session.
    let mut kept: Vec<String> = std::fs::read_dir(&recordings)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    kept.sort();
    let newest: Vec<&String> = sessions.iter().skip(1).collect();
    assert_eq!(kept.iter().collect::<Vec<_>>(), newest, "{kept:?}");
    for name in &kept {
        let dir = recordings.join(name);
        for file in std::fs::read_dir(&dir).unwrap() {
            let bytes = std::fs::read(file.unwrap().path()).unwrap();
            assert!(
                !String::from_utf8_lossy(&bytes).contains(KEY),
                "the key is in {name}"
            );
        }
    }
    let last = recordings.join(&kept[1]);
    let meta: Value = serde_json::from_str(
        std::fs::read_to_string(last.join("session.jsonl"))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(meta["format"], 4, "{meta}");
    assert_eq!(meta["config"]["session"], kept[1].as_str(), "{meta}");
    assert_eq!(meta["config"]["recorded_by"], "livetalk serve", "{meta}");

    let path = last.to_str().unwrap();
    let replayed = run_livetalk(
        scratch.path(),
        &["replay", path, "--headless", "--instant"],
        &[],
        &[],
    );
    assert_eq!(
        replayed.code,
        Some(0),
        "{}\n{}",
        replayed.stdout,
        replayed.stderr
    );
    assert_smart_home_dialogue(&replayed.stdout);
    let inspected = run_livetalk(scratch.path(), &["inspect", path], &[], &[]);
    assert_eq!(inspected.code, Some(0), "{}", inspected.stderr);
    assert!(
        inspected.stdout.contains("User turns: 3"),
        "{}",
        inspected.stdout
    );
    assert!(
        inspected.stdout.contains("Tool calls: 3"),
        "{}",
        inspected.stdout
    );
    // Run again against the same model, turn by turn, the calls compared.
    let checked = run_livetalk(
        scratch.path(),
        &["check", path, "--endpoint", &mock.base_url()],
        &[],
        &[],
    );
    assert_eq!(
        checked.code,
        Some(0),
        "{}\n{}",
        checked.stdout,
        checked.stderr
    );
    assert!(
        checked.stdout.contains("3 of 3 turns passed"),
        "{}",
        checked.stdout
    );
}

#[test]
fn headless_app_completes_the_smart_home_dialogue_through_the_bridge_binary() {
    let scratch = tempfile::tempdir().unwrap();
    let serve = ServeProcess::start(
        scratch.path(),
        &["--offline", "--listen", "127.0.0.1:0", "--speed", "20"],
        &[],
    );
    let run = run_livetalk(
        scratch.path(),
        &["--headless", "--bridge", &serve.url],
        &[],
        &SMART_HOME_LINES,
    );
    let (stdout, stderr) = (&run.stdout, &run.stderr);
    assert_eq!(run.code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(!stderr.contains("offline demo model"), "{stderr}");

    // The tools ran locally in the app and their answers went back over the bridge.
    assert_smart_home_dialogue(stdout);
    let log = serve.stop();
    assert!(!log.contains("panicked"), "{log}");
}

/// The form the README gives, `--bridge ws://HOST:PORT?token=T` (no path), with a `+` in the
/// token, as typed.
#[test]
fn a_bridge_url_without_a_path_and_a_token_with_a_plus_work_as_typed() {
    let scratch = tempfile::tempdir().unwrap();
    let serve = ServeProcess::start(
        scratch.path(),
        &[
            "--offline",
            "--listen",
            "127.0.0.1:0",
            "--speed",
            "20",
            "--token",
            "s3+cret",
        ],
        &[],
    );
    let url = format!("{}?token=s3+cret", serve.url);
    let run = run_livetalk(
        scratch.path(),
        &["--headless", "--bridge", &url],
        &[],
        &SMART_HOME_LINES[..1],
    );
    let (stdout, stderr) = (&run.stdout, &run.stderr);
    assert_eq!(run.code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stdout.contains("Gemini: No, the living room lamp is currently off."),
        "{stdout}"
    );
    assert!(!stderr.contains("s3+cret"), "{stderr}");
    let log = serve.stop();
    assert!(!log.contains("panicked"), "{log}");
}

/// An upstream that quotes the key in its refusal: the key is used upstream, and is in
/// neither what the app hears, nor the bridge's log, nor the session's `--record` recording.
#[test]
fn bridge_binary_keeps_the_key_out_of_its_log_and_refuses_open_binds_without_a_token() {
    const KEY: &str = "fake-test-key-binary-987654";
    let scratch = tempfile::tempdir().unwrap();
    // An upstream that quotes the key it was given in its refusal.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut fake = runtime.block_on(FakeLive::start());
    let url = fake.url.clone();
    let upstream = runtime.spawn(async move {
        let (headers, _, mut ws) = fake.accept().await;
        close_with(&mut ws, 1008, &format!("API key {KEY} not valid")).await;
        headers
    });
    let recordings = scratch.path().join("recordings");
    let serve = ServeProcess::start(
        scratch.path(),
        &[
            "--listen",
            "127.0.0.1:0",
            "--endpoint",
            &url,
            "--record",
            recordings.to_str().unwrap(),
        ],
        &[("GEMINI_API_KEY", KEY), ("LIVETALK_LOG", "debug")],
    );
    let run = run_livetalk(
        scratch.path(),
        &["--headless", "--bridge", &serve.url],
        &[],
        &[],
    );
    let headers = runtime.block_on(upstream).unwrap();
    assert_eq!(headers["x-goog-api-key"], KEY, "the key was used upstream");
    assert_eq!(run.code, Some(1));
    assert!(
        run.stderr.contains("(1008): API key [redacted] not valid"),
        "the client hears why: {}",
        run.stderr
    );
    assert!(!run.stdout.contains(KEY) && !run.stderr.contains(KEY));
    let log = serve.stop();
    assert!(log.contains("upstream session failed"), "{log}");
    assert!(!log.contains(KEY) && !log.contains("987654"), "{log}");
    // The session's recording holds the refusal, and not the key it quoted.
    let sessions: Vec<_> = std::fs::read_dir(&recordings)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let recorded = std::fs::read_to_string(sessions[0].join("session.jsonl")).unwrap();
    assert!(recorded.contains("not valid"), "{recorded}");
    for file in std::fs::read_dir(&sessions[0]).unwrap() {
        let bytes = std::fs::read(file.unwrap().path()).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains(KEY) && !text.contains("987654"), "{text}");
    }

    let output = livetalk(scratch.path())
        .args(["serve", "--listen", "0.0.0.0:0"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("without --token"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upstream_that_never_answers_the_upgrade_is_an_error_within_the_deadline() {
    // Accepts TCP and never answers: the bridge's own upstream connect must not hang.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    let endpoint = Endpoint::parse(&format!("ws://{address}"), ApiVersion::V1).unwrap();
    let mut options = bridge_options(endpoint);
    options.upstream.connect_timeout = Duration::from_secs(1);
    let server = BridgeServer::start(options).await.unwrap();
    let mut app = App::connect(&server.url()).await;
    let started = std::time::Instant::now();
    app.send(json!({"type": "CONNECT_GEMINI", "payload": {"initialConfig": live_config("text")}}))
        .await;
    // The app gives up on its own side meanwhile; that is answered too.
    app.send(json!({"type": "DISCONNECT_GEMINI"})).await;
    let (failed, _) = app.until("SETUP_COMPLETE").await;
    assert_eq!(failed["payload"]["success"], false);
    let error = app.expect_error().await;
    assert!(
        error.contains(&format!(
            "No answer from {address} within 1 s (waiting for the WebSocket upgrade)"
        )),
        "{error}"
    );
    app.until("GEMINI_DISCONNECTED").await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // The DISCONNECT_GEMINI sent while connecting gets its answer, and the socket closes.
    app.until("GEMINI_DISCONNECTED").await;
    assert_eq!(app.next().await, None, "the bridge closes the WebSocket");
}

// ---------------------------------------------------------------------------------------------
// The original bridge's Android app, a goAway, and what the service sent
// ---------------------------------------------------------------------------------------------

/// Asserts what the Android app needs of every message: a payload object (it drops messages
/// without one), a `date` on LOG_MESSAGE, and no error.
fn android_readable(messages: &[Value]) {
    for message in messages {
        assert!(message["payload"].is_object(), "no payload: {message}");
        assert_ne!(message["type"], "GEMINI_ERROR", "{message}");
        if message["type"] == "LOG_MESSAGE" {
            let date = message["payload"]["date"].as_str().unwrap_or_default();
            assert!(
                date.contains('T'),
                "a LOG_MESSAGE without a date: {message}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_android_apps_own_messages_hold_a_conversation_with_a_tool_call() {
    let bridge = bridge().await;
    let mut app = App::connect(&bridge.server.url()).await;
    // CONNECT_GEMINI as the app writes it: every absent field an explicit null, lower-case
    // modality, and its default model, which the Live API has retired.
    app.send(
        json!({"type": "CONNECT_GEMINI", "payload": {"initialConfig": {
            "model": "models/gemini-live-2.5-flash-preview",
            "systemInstruction": {"role": null, "parts": [{"text": "You are a helpful assistant.",
                "inlineData": null, "functionCall": null, "functionResponse": null}]},
            "generationConfig": {"responseModalities": ["audio"], "temperature": null, "topP": null,
                "topK": null, "maxOutputTokens": null, "stopSequences": null,
                "speechConfig": {"voiceConfig": {"prebuiltVoiceConfig": {"voiceName": "Puck"}},
                    "languageCode": null}},
            "tools": [{"functionDeclarations": [{"name": "get_device_status",
                "description": "Gets a device's status.",
                "parameters": {"type": "OBJECT", "properties": {"device_name": {"type": "STRING",
                    "description": null}}, "required": ["device_name"]},
                "behavior": null, "defaultBehavior": null, "defaultScheduling": null}],
                "googleSearch": null, "codeExecution": null}],
            "safetySettings": null
        }}}),
    )
    .await;
    let (connected, before) = app.until("GEMINI_CONNECTED").await;
    assert!(before.is_empty(), "{before:?}");
    let (setup, opening) = app.until("SETUP_COMPLETE").await;
    // One shape for both kinds of app: wrapped, as the app reads it, and flat.
    assert_eq!(
        setup["payload"],
        json!({"setupComplete": {"success": true}, "success": true})
    );
    let retired = of_type(&opening, "LOG_MESSAGE");
    assert_eq!(retired.len(), 1, "{opening:?}");
    let said = retired[0]["payload"]["message"].as_str().unwrap();
    assert!(
        said.contains("gemini-live-2.5-flash-preview has been retired")
            && said.contains("models/gemini-3.8-live"),
        "{said}"
    );
    android_readable(&[connected, setup]);
    android_readable(&opening);

    // On SETUP_COMPLETE the app asks for a greeting, as realtime text with nulls around it.
    let realtime = |text: &str| {
        json!({"type": "SEND_REALTIME_INPUT", "payload": {"text": text, "audio": null,
            "video": null, "chunks": null, "mediaChunks": null, "activityStart": null,
            "activityEnd": null, "audioStreamEnd": null}})
    };
    app.send(realtime("greet the user")).await;
    let (done, greeting) = app.until("TURN_COMPLETE").await;
    android_readable(&greeting);
    android_readable(std::slice::from_ref(&done));
    assert!(
        !of_type(&greeting, "AUDIO_CHUNK").is_empty(),
        "{greeting:?}"
    );
    assert_eq!(
        of_type(&greeting, "ASSISTANT_SPEAKING")[0]["payload"],
        json!({"speaking": true})
    );

    // A question that needs the app's tool; the app answers with every value a string and
    // its nulls.
    app.send(realtime(SMART_HOME_LINES[0])).await;
    let (call, before) = app.until("TOOL_CALL").await;
    android_readable(&before);
    let calls = call["payload"]["toolCall"]["functionCalls"]
        .as_array()
        .unwrap();
    assert_eq!(calls[0]["name"], "get_device_status");
    assert!(calls[0]["args"].is_object());
    app.send(
        json!({"type": "SEND_TOOL_RESPONSE", "payload": {"toolResponse": {"functionResponses": [
        {"id": calls[0]["id"], "name": "get_device_status",
         "response": {"device_name": "living room lamp", "status": "off", "brightness": "0"},
         "willContinue": null, "scheduling": null}]}}}),
    )
    .await;
    let (done, reply) = app.until("TURN_COMPLETE").await;
    android_readable(&reply);
    android_readable(std::slice::from_ref(&done));
    assert!(!of_type(&reply, "AUDIO_CHUNK").is_empty(), "{reply:?}");

    // Push-to-talk markers as the app sends them.
    for marker in ["activityStart", "activityEnd"] {
        app.send(
            json!({"type": "SEND_REALTIME_INPUT", "payload": {marker: {"dummy": ""},
            "text": null, "audio": null, "chunks": null}}),
        )
        .await;
    }
    let (_, heard) = app.until("TURN_COMPLETE").await;
    android_readable(&heard);

    // An image request is refused at once, not left to the app's minute of waiting.
    app.send(json!({"type": "GENERATE_IMAGE", "payload": {"text": "a lamp", "imageData": null}}))
        .await;
    let (result, before) = app.until("IMAGE_GENERATION_RESULT").await;
    android_readable(&before);
    assert_eq!(result["payload"]["success"], false);
    let reason = result["payload"]["error"].as_str().unwrap();
    assert!(reason.contains("cannot generate images"), "{reason}");

    app.send(json!({"type": "DISCONNECT_GEMINI", "payload": null}))
        .await;
    let (bye, _) = app.until("GEMINI_DISCONNECTED").await;
    android_readable(&[bye]);
}

/// A fast mock whose service tells the connection to go away after the first turn.
async fn go_away_after_the_first_turn() -> MockServer {
    use livetalk_mock::{Fault, FaultAction, Moment, Scenario};
    MockServer::start(MockOptions {
        speed: 20.0,
        scenario: Scenario::new(vec![Fault::once(
            Moment::TurnComplete,
            1,
            FaultAction::GoAway {
                time_left: Duration::from_secs(3),
                code: 1008,
                reason: "The operation was aborted.".into(),
            },
        )]),
        ..MockOptions::loopback()
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_goaway_moves_the_upstream_and_the_apps_next_turn_keeps_the_conversation() {
    let mock = go_away_after_the_first_turn().await;
    let server = BridgeServer::start(bridge_options(mock.endpoint(ApiVersion::V1)))
        .await
        .unwrap();
    let mut app = App::connect(&server.url()).await;
    app.start(live_config("audio")).await;

    app.say(SMART_HOME_LINES[0]).await;
    app.answer_tool_call(json!({"device_name": "living room lamp", "status": "off"}))
        .await;
    app.until("TURN_COMPLETE").await;
    // The goAway and the move are news for the log, nothing more (beside the session's new
    // handles).
    let mut between = Vec::new();
    let moved = loop {
        let (log, before) = app.until("LOG_MESSAGE").await;
        between.extend(before.into_iter().filter(|m| m["type"] != "SESSION_HANDLE"));
        between.push(log.clone());
        if log["payload"]["message"]
            .as_str()
            .unwrap()
            .contains("Reconnected")
        {
            break log;
        }
    };
    assert!(
        moved["payload"]["message"]
            .as_str()
            .unwrap()
            .contains("the conversation continues"),
        "{moved}"
    );
    // The goAway, the move, the outcome.
    assert_eq!(of_type(&between, "LOG_MESSAGE").len(), 3, "{between:#?}");
    assert!(
        between[0]["payload"]["message"]
            .as_str()
            .unwrap()
            .contains("goAway"),
        "{between:#?}"
    );
    assert_eq!(
        of_type(&app.seen, "SETUP_COMPLETE").len(),
        1,
        "the app is not asked to set up again"
    );

    // "it" is the lamp of the first turn: the resumed session still knows it.
    app.say(SMART_HOME_LINES[1]).await;
    let calls = app.answer_tool_call(json!({"result": "ok"})).await;
    assert_eq!(calls[0]["name"], "set_device_status", "{calls:?}");
    assert_eq!(calls[0]["args"]["device_name"], "living room lamp");
    let (_, reply) = app.until("TURN_COMPLETE").await;
    assert!(!of_type(&reply, "AUDIO_CHUNK").is_empty());
    assert!(
        !app.seen
            .iter()
            .any(|m| m["type"] == "GEMINI_ERROR" || m["type"] == "GEMINI_DISCONNECTED"),
        "{:#?}",
        app.seen
    );
    assert_eq!(mock.connections(), 2);
    assert_eq!(mock.resumptions(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn every_field_the_service_sent_reaches_the_app() {
    let mut fake = FakeLive::start().await;
    let server = BridgeServer::start(bridge_options(fake.endpoint()))
        .await
        .unwrap();
    let mut app = App::connect(&server.url()).await;
    app.send(
        json!({"type": "CONNECT_GEMINI", "payload": {"initialConfig": {
        "model": "models/gemini-3.8-live", "inputAudioTranscription": {}}}}),
    )
    .await;
    let (_, _, mut upstream) = fake.accept().await;
    send_json(&mut upstream, json!({"setupComplete": {}})).await;
    app.until("SETUP_COMPLETE").await;

    let interim = json!({"interimInputTranscription": {"text": "is the la"}});
    let heard = json!({"inputTranscription": {"text": "Is the lamp on?", "finished": true,
        "languageCode": "en-US"}});
    let reply = json!({
        "modelTurn": {"parts": [
            {"text": "Checking the lamp", "thought": true},
            {"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": "AQACAA=="}},
            {"text": "It is off."}
        ]},
        "outputTranscription": {"text": "It is off."},
        "groundingMetadata": {"webSearchQueries": ["lamp"]},
        "urlContextMetadata": {"urlMetadata": []}
    });
    let end = json!({"generationComplete": true, "turnComplete": true,
        "turnCompleteReason": "NEED_MORE_INPUT", "waitingForInput": true,
        "interactionStatus": "IDLE"});
    let usage = json!({"promptTokenCount": 12, "responseTokenCount": 4, "totalTokenCount": 16,
        "thoughtsTokenCount": 3,
        "responseTokensDetails": [{"modality": "AUDIO", "tokenCount": 4}]});
    send_json(
        &mut upstream,
        json!({"voiceActivity": {"type": "ACTIVITY_START"}}),
    )
    .await;
    send_json(&mut upstream, json!({"serverContent": interim})).await;
    send_json(&mut upstream, json!({"serverContent": heard})).await;
    send_json(&mut upstream, json!({"serverContent": reply})).await;
    send_json(
        &mut upstream,
        json!({"serverContent": end, "usageMetadata": usage}),
    )
    .await;
    let (done, before) = app.until("TURN_COMPLETE").await;

    let voice = of_type(&before, "VOICE_ACTIVITY");
    assert_eq!(
        voice[0]["payload"],
        json!({"voiceActivity": {"type": "ACTIVITY_START"}})
    );
    let contents: Vec<&Value> = of_type(&before, "CONTENT_MESSAGE")
        .into_iter()
        .map(|m| &m["payload"]["serverContent"])
        .collect();
    assert_eq!(contents[0], &interim);
    assert_eq!(contents[1], &heard);
    // The reply as sent, its audio moved to AUDIO_CHUNK.
    let mut without_audio = reply.clone();
    without_audio["modelTurn"]["parts"]
        .as_array_mut()
        .unwrap()
        .remove(1);
    assert_eq!(contents[2], &without_audio);
    assert_eq!(
        of_type(&before, "AUDIO_CHUNK")[0]["payload"],
        json!({"data": "AQACAA=="})
    );
    let mut last = end.clone();
    last["usageMetadata"] = usage;
    assert_eq!(contents[3], &last);
    assert_eq!(contents.len(), 4, "{before:#?}");
    assert_eq!(
        done["payload"],
        json!({"reason": "NEED_MORE_INPUT", "waitingForInput": true, "interactionStatus": "IDLE"})
    );
    assert_eq!(
        of_type(&before, "groundingMetadata")[0]["payload"],
        json!({"groundingMetadata": {"webSearchQueries": ["lamp"]}})
    );
}

/// How one upstream connection of the thousand-call run ends.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Ending {
    /// A goAway after a completed turn: the bridge moves at that turn boundary.
    GoAway,
    /// The socket drops right after a `toolCall`, before its answers can arrive.
    DropWithCallsOpen,
    /// The socket drops between turns.
    DropBetweenTurns,
}

/// What the fake service saw of one connection's calls.
#[derive(Debug, Default)]
struct Ledger {
    issued: usize,
    answered: usize,
    /// Issued on this connection, never answered on it (it ended first).
    unanswered: Vec<String>,
    /// Answers that named a call this connection never made, or one already answered.
    violations: Vec<String>,
}

/// Reads the bridge's messages on one upstream connection until every id in `open` is answered
/// (or the connection ends), writing the answers into `ledger`.
async fn take_answers(
    ws: &mut WebSocketStream<TcpStream>,
    issued: &std::collections::HashSet<String>,
    open: &mut std::collections::HashSet<String>,
    ledger: &mut Ledger,
) {
    let mut answered_here = std::collections::HashSet::new();
    while !open.is_empty() {
        let Ok(Some(Ok(frame))) = tokio::time::timeout(WAIT, ws.next()).await else {
            panic!("the answers to {open:?} never came");
        };
        let Ok(message) = serde_json::from_slice::<Value>(&frame.into_data()) else {
            continue;
        };
        for answer in message["toolResponse"]["functionResponses"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let id = answer["id"].as_str().unwrap_or_default().to_owned();
            if !issued.contains(&id) {
                ledger
                    .violations
                    .push(format!("{id}: not a call of this connection"));
            } else if !open.remove(&id) || !answered_here.insert(id.clone()) {
                ledger.violations.push(format!("{id}: answered twice"));
            } else {
                ledger.answered += 1;
            }
        }
    }
}

/// The fake service of the thousand-call run: `total` calls in batches of one to three, spread
/// over connections that each end as `endings` says in turn.
async fn thousand_calls_service(
    mut fake: FakeLive,
    total: usize,
    per_connection: usize,
) -> Vec<(Ending, Ledger)> {
    let endings = [
        Ending::GoAway,
        Ending::DropWithCallsOpen,
        Ending::DropBetweenTurns,
    ];
    let mut ledgers = Vec::new();
    let mut made = 0;
    let mut connection = 0;
    while made < total {
        let (_, _, mut ws) = fake.accept().await;
        let ending = endings[connection % endings.len()];
        send_json(&mut ws, json!({"setupComplete": {}})).await;
        send_json(
            &mut ws,
            json!({"sessionResumptionUpdate": {"newHandle": format!("h{connection}"), "resumable": true}}),
        )
        .await;
        let mut ledger = Ledger::default();
        let mut issued = std::collections::HashSet::new();
        let mut batch = 0;
        let last = (made + per_connection).min(total);
        while made < last {
            let n = (1 + batch % 3).min(last - made);
            let calls: Vec<Value> = (0..n)
                .map(|i| {
                    json!({"id": format!("c{connection}-b{batch}-{i}"), "name": "get_device_status",
                           "args": {"device_name": "living room lamp"}})
                })
                .collect();
            let mut open: std::collections::HashSet<String> = calls
                .iter()
                .map(|c| c["id"].as_str().unwrap().to_owned())
                .collect();
            issued.extend(open.iter().cloned());
            send_json(&mut ws, json!({"toolCall": {"functionCalls": calls}})).await;
            made += n;
            ledger.issued += n;
            batch += 1;
            if ending == Ending::DropWithCallsOpen && made == last {
                ledger.unanswered.extend(open.drain());
                break;
            }
            take_answers(&mut ws, &issued, &mut open, &mut ledger).await;
            send_json(
                &mut ws,
                json!({"serverContent": {"modelTurn": {"parts": [{"text": "Done."}]}, "turnComplete": true}}),
            )
            .await;
        }
        match ending {
            Ending::GoAway if made < total => {
                send_json(&mut ws, json!({"goAway": {"timeLeft": "10s"}})).await;
                // The bridge moves at once (no call is open) and closes this connection; any
                // answer arriving meanwhile would be a violation.
                let mut none_open = std::collections::HashSet::new();
                loop {
                    match tokio::time::timeout(WAIT, ws.next()).await {
                        Ok(Some(Ok(Message::Close(_)))) | Ok(None) | Ok(Some(Err(_))) => break,
                        Ok(Some(Ok(frame))) => {
                            let Ok(message) = serde_json::from_slice::<Value>(&frame.into_data())
                            else {
                                continue;
                            };
                            if message.get("toolResponse").is_some() {
                                take_answers(&mut ws, &issued, &mut none_open, &mut ledger).await;
                                ledger
                                    .violations
                                    .push(format!("an answer after the goAway: {message}"));
                            }
                        }
                        Err(_) => panic!("the bridge did not move after the goAway"),
                    }
                }
            }
            _ => {}
        }
        // A drop: the socket goes without a close (and with it any answer still on its way).
        drop(ws);
        ledgers.push((ending, ledger));
        connection += 1;
    }
    ledgers
}

/// An app that answers every tool call the moment its TOOL_CALL arrives, through a session
/// whose upstream moves after goAways and drops with calls open, 1,000 calls in all: every
/// call is answered exactly once on the connection that made it, or not at all when that
/// connection ended first; never twice, never on another connection. Calls whose connection
/// dropped are cancelled for the app.
#[tokio::test(flavor = "multi_thread")]
async fn a_thousand_calls_answered_at_once_each_reach_their_own_connection_once() {
    const TOTAL: usize = 1000;
    let fake = FakeLive::start().await;
    let server = BridgeServer::start(bridge_options(fake.endpoint()))
        .await
        .unwrap();
    let service = tokio::spawn(thousand_calls_service(fake, TOTAL, 125));

    let mut app = App::connect(&server.url()).await;
    app.start(live_config("audio")).await;
    let mut calls_seen = 0;
    let mut cancelled = std::collections::HashSet::new();
    while !service.is_finished() || calls_seen < TOTAL {
        let message = tokio::select! {
            message = app.next() => message.expect("the bridge stays connected"),
            () = tokio::time::sleep(Duration::from_millis(50)), if service.is_finished() => break,
        };
        match message["type"].as_str() {
            Some("TOOL_CALL") => {
                let calls = &message["payload"]["toolCall"]["functionCalls"];
                calls_seen += calls.as_array().unwrap().len();
                let answers = function_responses(calls, &json!({"status": "off"}));
                app.send(json!({"type": "SEND_TOOL_RESPONSE", "payload": {"toolResponse": {"functionResponses": answers}}}))
                    .await;
            }
            Some("TOOL_CALL_CANCELLATION") => {
                for id in message["payload"]["toolCallCancellation"]["ids"]
                    .as_array()
                    .unwrap()
                {
                    cancelled.insert(id.as_str().unwrap().to_owned());
                }
            }
            Some("GEMINI_ERROR" | "GEMINI_DISCONNECTED") => panic!("the session ended: {message}"),
            _ => {}
        }
    }
    let ledgers = service.await.unwrap();

    let issued: usize = ledgers.iter().map(|(_, l)| l.issued).sum();
    let answered: usize = ledgers.iter().map(|(_, l)| l.answered).sum();
    let unanswered: Vec<&String> = ledgers.iter().flat_map(|(_, l)| &l.unanswered).collect();
    let violations: Vec<&String> = ledgers.iter().flat_map(|(_, l)| &l.violations).collect();
    eprintln!(
        "{} connections: {issued} calls, {answered} answered on their own connection, {} \
         unanswered as their connection dropped first ({} of them cancelled for the app)",
        ledgers.len(),
        unanswered.len(),
        cancelled.len()
    );
    assert_eq!(issued, TOTAL);
    assert!(violations.is_empty(), "{violations:#?}");
    assert_eq!(answered + unanswered.len(), TOTAL);
    assert!(ledgers.len() >= 8, "{} connections", ledgers.len());
    for (ending, ledger) in &ledgers {
        if *ending != Ending::DropWithCallsOpen {
            assert!(ledger.unanswered.is_empty(), "{ending:?}: {ledger:?}");
        }
    }
    // What the app was told to stop is exactly what dropped with its connection (an answer
    // that was already on its way when the socket went is neither).
    for id in &cancelled {
        assert!(unanswered.contains(&id), "{id} cancelled but not lost");
    }
    assert_eq!(calls_seen, TOTAL, "every call reached the app once");
}

/// `livetalk --bridge … --record DIR`: the bridge's upstream is told to go away (goAway) after
/// the first turn and moves; then the bridge itself goes away mid-session (killed) and comes
/// back on the same address; the session reconnects to it and each next turn is answered. The
/// recording then reads as a direct session's: `inspect` shows its wire view and tool calls,
/// `replay` the whole conversation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridged_session_survives_a_goaway_upstream_and_a_dropped_bridge_and_is_recorded_like_a_direct_one()
 {
    let scratch = tempfile::tempdir().unwrap();
    let mock = go_away_after_the_first_turn().await;
    let upstream = mock.endpoint(ApiVersion::V1).url().to_owned();
    let serve_args = |listen: &str| {
        vec![
            "--endpoint".to_owned(),
            upstream.clone(),
            "--listen".to_owned(),
            listen.to_owned(),
        ]
    };
    let args = serve_args("127.0.0.1:0");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let serve = ServeProcess::start(scratch.path(), &args, &[]);
    let address = serve
        .url
        .trim_start_matches("ws://")
        .split(['/', '?'])
        .next()
        .unwrap()
        .to_owned();
    let folder = scratch.path().join("bridged");
    let mut client = livetalk(scratch.path())
        .args(["--headless", "--bridge", &serve.url, "--record"])
        .arg(&folder)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = client.stdin.take().unwrap();
    let mut stdout = LineWatcher::new(client.stdout.take().unwrap());
    let stderr = read_all(client.stderr.take().unwrap());
    use std::io::Write as _;
    writeln!(stdin, "{}", SMART_HOME_LINES[0]).unwrap();
    stdout.wait_for(WAIT, |l| l.starts_with("Gemini: ") && l.contains("lamp"));
    // The goAway after that turn moves the bridge's upstream; "it" is still the lamp.
    writeln!(stdin, "{}", SMART_HOME_LINES[1]).unwrap();
    stdout.wait_for(WAIT, |l| l.starts_with("Gemini: ") && l.contains("blue"));
    assert!(
        mock.connections() >= 2,
        "the upstream moved: {} connections",
        mock.connections()
    );

    // The bridge goes away; another takes its address.
    drop(serve);
    let args = serve_args(&address);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let serve = ServeProcess::start(scratch.path(), &args, &[]);
    writeln!(stdin, "{}", SMART_HOME_LINES[2]).unwrap();
    stdout.wait_for(WAIT, |l| {
        l.starts_with("Gemini: ") && l.contains("thermostat")
    });
    drop(stdin);
    let status = wait_exit(client, WAIT);
    let stderr = stderr.recv_timeout(WAIT).unwrap();
    assert!(status.success(), "{status}\n{:#?}\n{stderr}", stdout.seen);
    drop(serve);

    // inspect: the wire view of the Live messages the bridge stood for, and both tool calls.
    let inspected = livetalk(scratch.path())
        .arg("inspect")
        .arg(&folder)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&inspected.stdout);
    assert!(
        inspected.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&inspected.stderr)
    );
    assert!(text.contains("get_device_status"), "{text}");
    assert!(
        text.contains("Reconnect") || text.contains("reconnect"),
        "{text}"
    );
    // replay: the conversation as it was.
    let replayed = livetalk(scratch.path())
        .args(["replay", "--headless", "--instant"])
        .arg(&folder)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&replayed.stdout);
    assert!(replayed.status.success(), "{text}");
    let replies: Vec<&str> = text.lines().filter(|l| l.starts_with("Gemini: ")).collect();
    assert_eq!(replies.len(), 3, "{text}");
    assert!(replies[1].contains("blue"), "{text}");
    assert!(replies[2].contains("thermostat"), "{text}");
    // Nobody published what the bridge's tokens cost: counted, never priced, live or later.
    let spent = |stderr: &str| {
        stderr
            .lines()
            .find(|l| l.starts_with("livetalk: tokens: "))
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("no tokens line:\n{stderr}"))
    };
    let live = spent(&stderr);
    assert!(
        live.ends_with(", not priced") && !live.contains('$'),
        "{live}"
    );
    assert_eq!(spent(&String::from_utf8_lossy(&replayed.stderr)), live);
    // The guide says a bridged session records.
    let guide = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/recording.md"))
        .unwrap()
        .replace('\n', " ");
    assert!(
        guide.contains("A `--bridge` session records like a direct one"),
        "docs/recording.md"
    );
}

/// `livetalk --bridge`: a session that lost its bridge and gave up (no reconnect attempts) is
/// opened again by the user's retry (Ctrl-R), to the same bridge, as a direct session is. The
/// bridge here is a fake that hangs up on the first connection right after its setup.
#[tokio::test(flavor = "multi_thread")]
async fn a_bridged_session_that_gave_up_is_opened_again_by_the_users_retry() {
    use common::harness::{default_settings, run_until, test_policy};
    use livetalk::app::{App, AppInit, Msg};
    use livetalk::engine::{ConnectTo, Engine, build_setup};
    use livetalk::tools::{SmartHome, builtin_registry};
    use std::sync::Arc;

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    let (opened_tx, mut opened) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        for nth in 0.. {
            let (stream, _) = listener.accept().await.unwrap();
            let mut socket = tokio_tungstenite::accept_async(stream).await.unwrap();
            let hello = socket.next().await.unwrap().unwrap();
            let hello: Value = serde_json::from_str(hello.to_text().unwrap()).unwrap();
            assert_eq!(hello["type"], "CONNECT_GEMINI", "{hello}");
            // Counted before the answer goes: once it has, the app may be up and the test
            // looking before this task runs again.
            opened_tx.send(nth).unwrap();
            let ready = json!({"type": "SETUP_COMPLETE", "payload": {"success": true}});
            socket.send(Message::text(ready.to_string())).await.unwrap();
            if nth == 0 {
                // Gone without a word.
                drop(socket);
            } else {
                tokio::spawn(async move { while socket.next().await.is_some() {} });
            }
        }
    });

    let settings = default_settings();
    let home = SmartHome::new();
    let registry = Arc::new(
        builtin_registry(&settings.tools_enabled, settings.tool_limits, home.clone()).unwrap(),
    );
    let mut engine = Engine::new(registry.clone(), &home, livetalk::tools::Decider::Person);
    engine.set_reconnect_policy(test_policy(0));
    engine.start(ConnectTo::Bridge {
        url,
        setup: build_setup(&settings, &registry),
        connect_timeout: WAIT,
        transport: livetalk::config::BridgeTransport::WebSocket,
    });
    let mut app = App::new(AppInit::new(settings.model.clone(), true, home.snapshot()));
    run_until(
        &mut app,
        &mut engine,
        WAIT,
        "the session gives up",
        App::can_retry,
    )
    .await;
    assert_eq!(opened.try_recv(), Ok(0));

    livetalk::driver::apply(&mut app, &mut engine, Msg::Retry).await;
    run_until(
        &mut app,
        &mut engine,
        WAIT,
        "the retried session is up",
        |app| app.ready_for_user(),
    )
    .await;
    assert_eq!(opened.try_recv(), Ok(1), "the retry went to the bridge");
}

/// `livetalk --bridge … --bridge-transport webrtc` against `livetalk serve --offline`: a
/// spoken phrase (a WAV as the mic) goes to the bridge on the WebRTC track and the reply comes
/// back on it. The mock heard the phrase's length of speech; the client's log says the
/// microphone and the reply went over the track (the reply's AUDIO_CHUNKs ignored, not heard
/// twice) and the track delivered the reply whole; what was played and recorded is that reply,
/// once.
#[test]
fn a_spoken_turn_goes_to_the_bridge_and_back_on_the_webrtc_track() {
    let scratch = tempfile::tempdir().unwrap();
    let phrase = rig::spoken_phrase(scratch.path(), "Is the living room lamp on?");
    let serve = ServeProcess::start(
        scratch.path(),
        &["--offline", "--listen", "127.0.0.1:0", "--speed", "20"],
        &[],
    );
    let played = scratch.path().join("played.wav");
    let recording = scratch.path().join("rec");
    let run = run_livetalk(
        scratch.path(),
        &[
            "--headless",
            "--bridge",
            &serve.url,
            "--bridge-transport",
            "webrtc",
            "--input-wav",
            phrase.to_str().unwrap(),
            "--output-wav",
            played.to_str().unwrap(),
            "--record",
            recording.to_str().unwrap(),
        ],
        &[],
        &[],
    );
    let (stdout, stderr) = (&run.stdout, &run.stderr);
    assert_eq!(run.code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    // The phrase is 1.3 s long (the direct session's figure); the track's codec and
    // resampling may blur its edges by a frame or two.
    let heard: f64 = stdout
        .split("Gemini: I heard about ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|seconds| seconds.parse().ok())
        .unwrap_or_else(|| panic!("{stdout}\n{stderr}"));
    assert!((1.2..=1.5).contains(&heard), "{stdout}");
    assert!(
        !stdout.contains("WebRTC") && !stderr.contains("WebRTC"),
        "no fallback:\n{stdout}\n{stderr}"
    );

    let log = std::fs::read_to_string(scratch.path().join("data/livetalk/livetalk.log")).unwrap();
    assert!(log.contains("WebRTC connected"), "{log}");
    let reply = log
        .lines()
        .find(|l| l.contains("WebRTC reply heard on the track"))
        .unwrap_or_else(|| panic!("{log}"));
    let figure = |name: &str| -> u64 {
        let at = reply.find(&format!("{name}=")).unwrap() + name.len() + 1;
        reply[at..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let (track_ms, announced_ms, mic_ms) =
        (figure("track_ms"), figure("announced_ms"), figure("mic_ms"));
    eprintln!("track {track_ms} ms, announced {announced_ms} ms, mic {mic_ms} ms");
    assert!(announced_ms > 1000, "{reply}");
    assert!(
        track_ms + 60 >= announced_ms && track_ms <= announced_ms + 60,
        "the track delivered the whole reply: {reply}"
    );
    assert!(mic_ms >= 1300, "the phrase went on the track: {reply}");

    // Played once: the output WAV holds the reply, not the reply twice.
    let played = hound::WavReader::open(&played).unwrap();
    let played_ms = u64::from(played.duration()) * 1000 / u64::from(played.spec().sample_rate);
    assert!(
        played_ms + 100 >= track_ms && played_ms < announced_ms * 3 / 2,
        "played {played_ms} ms of a {announced_ms} ms reply"
    );
    // Recorded as a direct session's: the model's audio in model.wav, the mic's sent.
    let model = hound::WavReader::open(recording.join("model.wav")).unwrap();
    let model_ms = u64::from(model.duration()) * 1000 / u64::from(model.spec().sample_rate);
    assert!(
        model_ms + 60 >= track_ms && model_ms <= track_ms + 60,
        "model.wav {model_ms} ms"
    );
    let mic = hound::WavReader::open(recording.join("mic.wav")).unwrap();
    assert!(
        mic.duration() > 16_000,
        "mic.wav {} samples",
        mic.duration()
    );
    let log = serve.stop();
    assert!(!log.contains("panicked"), "{log}");
}

/// A bridge that cannot carry WebRTC: one that answers the offer with a GEMINI_ERROR, and one
/// that never answers (the peer's connect deadline runs out). Either way the session carries
/// on over the WebSocket after one warning: the microphone goes as SEND_REALTIME_INPUT and
/// the reply's AUDIO_CHUNKs are heard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_that_refuses_or_ignores_the_webrtc_offer_gets_the_voice_over_the_websocket() {
    use livetalk::config::BridgeTransport;
    use livetalk_live::ServerEvent;
    use livetalk_live::wire::{ClientMessage, RealtimeInput, Setup};

    for refuse in [true, false] {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}", listener.local_addr().unwrap());
        let (offers_tx, mut offers) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let mut socket = tokio_tungstenite::accept_async(stream).await.unwrap();
            while let Some(Ok(frame)) = socket.next().await {
                let Ok(text) = frame.to_text() else { break };
                let message: Value = serde_json::from_str(text).unwrap();
                let reply = match message["type"].as_str().unwrap() {
                    "CONNECT_GEMINI" => {
                        vec![json!({"type": "SETUP_COMPLETE", "payload": {"success": true}})]
                    }
                    "WEBRTC_OFFER" => {
                        offers_tx.send(message["payload"]["sdp"].clone()).unwrap();
                        if refuse {
                            vec![
                                json!({"type": "GEMINI_ERROR", "payload": {"message": "This bridge has no WebRTC transport (its UDP port could not be opened)."}}),
                            ]
                        } else {
                            Vec::new()
                        }
                    }
                    "SEND_REALTIME_INPUT" => {
                        let audio = base64::engine::general_purpose::STANDARD.encode([0u8; 4800]);
                        vec![
                            json!({"type": "AUDIO_CHUNK", "payload": {"data": audio}}),
                            json!({"type": "TURN_COMPLETE", "payload": {}}),
                        ]
                    }
                    _ => Vec::new(),
                };
                for reply in reply {
                    socket.send(Message::text(reply.to_string())).await.unwrap();
                }
            }
        });
        let connect_timeout = Duration::from_millis(1500);
        let mut connection = livetalk::bridge::client::connect_over(
            &url,
            &Setup::default(),
            connect_timeout,
            None,
            BridgeTransport::WebRtc,
        )
        .await
        .unwrap();
        let offer = tokio::time::timeout(WAIT, offers.recv())
            .await
            .unwrap()
            .unwrap();
        let offer = offer.as_str().unwrap();
        assert!(
            offer.contains("m=audio") && offer.contains("opus/48000"),
            "{offer}"
        );
        assert!(offer.contains("a=sendrecv"), "{offer}");
        assert!(
            offer.contains("127.0.0.1"),
            "a loopback host candidate: {offer}"
        );

        let mut warnings = Vec::new();
        async fn next(
            connection: &mut livetalk_live::Connection,
        ) -> livetalk_live::events::Inbound {
            tokio::time::timeout(WAIT, connection.inbound.recv())
                .await
                .expect("the session goes on")
                .expect("the connection is open")
        }
        // The warning, once the bridge refused or the deadline ran out.
        let started = std::time::Instant::now();
        loop {
            let inbound = next(&mut connection).await;
            if let Some(ServerEvent::FrameSkipped { reason }) = inbound.events.first() {
                warnings.push(reason.clone());
                break;
            }
        }
        assert!(warnings[0].contains("WebSocket"), "{warnings:?}");
        if refuse {
            assert!(warnings[0].contains("no WebRTC transport"), "{warnings:?}");
        } else {
            assert!(started.elapsed() >= connect_timeout / 2, "{warnings:?}");
        }
        // The voice goes over the WebSocket: the mic is sent, the reply heard.
        connection
            .handle
            .send(ClientMessage::RealtimeInput(RealtimeInput::mic_audio(
                vec![0; 640],
            )))
            .await
            .unwrap();
        let mut heard = 0;
        loop {
            let inbound = next(&mut connection).await;
            for event in &inbound.events {
                match event {
                    ServerEvent::ModelAudio { .. } => heard += 1,
                    ServerEvent::FrameSkipped { reason } => warnings.push(reason.clone()),
                    _ => {}
                }
            }
            if inbound
                .events
                .iter()
                .any(|e| matches!(e, ServerEvent::TurnComplete { .. }))
            {
                break;
            }
        }
        assert_eq!(heard, 1, "the AUDIO_CHUNK was heard once");
        assert_eq!(warnings.len(), 1, "one warning: {warnings:?}");
    }
}

/// The client's WebRTC transport against a scripted bridge that answers with livetalk's own
/// peer (`MediaHub::open`) and plays what the test says on the track, the WebSocket carrying
/// the same as `livetalk serve` does: a reply's `AUDIO_CHUNK`s all at once and its
/// `TURN_COMPLETE` right after. The client hears the reply once, from the track, whole, and
/// the turn ends only when it has (the bridge paces the track in real time); after
/// `INTERRUPTED` the cut-off reply's frames still on their way are not heard; the next reply
/// is heard whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webrtc_client_hears_each_reply_once_and_whole_and_drops_a_cut_off_one() {
    use livetalk::bridge::webrtc::{MediaHub, PeerEvent, WebRtcOptions};
    use livetalk::config::BridgeTransport;
    use livetalk_live::ServerEvent;
    use livetalk_live::wire::{ClientMessage, RealtimeInput, Setup};

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    let (ready_tx, ready) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let mut socket = tokio_tungstenite::accept_async(stream).await.unwrap();
        let hub = MediaHub::bind("127.0.0.1".parse().unwrap(), WebRtcOptions::default())
            .await
            .unwrap();
        loop {
            let frame = socket.next().await.unwrap().unwrap();
            let message: Value = serde_json::from_str(frame.to_text().unwrap()).unwrap();
            match message["type"].as_str().unwrap() {
                "CONNECT_GEMINI" => {
                    let ready = json!({"type": "SETUP_COMPLETE", "payload": {"success": true}});
                    socket.send(Message::text(ready.to_string())).await.unwrap();
                }
                "WEBRTC_OFFER" => {
                    let (answer, peer) = hub
                        .open(message["payload"]["sdp"].as_str().unwrap())
                        .unwrap();
                    let answer = json!({"type": "WEBRTC_ANSWER", "payload": {"sdp": answer}});
                    socket
                        .send(Message::text(answer.to_string()))
                        .await
                        .unwrap();
                    let _ = ready_tx.send((socket, peer, hub));
                    return;
                }
                _ => {}
            }
        }
    });
    let mut connection = livetalk::bridge::client::connect_over(
        &url,
        &Setup::default(),
        WAIT,
        None,
        BridgeTransport::WebRtc,
    )
    .await
    .unwrap();
    // The microphone: 20 ms of quiet every 20 ms, as the audio worker sends it.
    let mic = connection.handle.clone();
    let microphone = tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(20));
        loop {
            tick.tick().await;
            let frame = RealtimeInput::mic_audio(vec![1; 640]);
            if mic.send(ClientMessage::RealtimeInput(frame)).await.is_err() {
                return;
            }
        }
    });
    let (socket, mut peer, _hub) = tokio::time::timeout(WAIT, ready).await.unwrap().unwrap();
    let (mut to_app, mut from_app) = socket.split();
    // The microphone comes on the track once the client's side is connected.
    let (heard_tx, mut heard) = mpsc::unbounded_channel();
    enum Track {
        Play(Vec<u8>),
        TurnEnd,
        Flush,
    }
    let (play_tx, mut play) = mpsc::unbounded_channel::<Track>();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                event = peer.next() => match event {
                    Some(PeerEvent::Heard(pcm)) => { let _ = heard_tx.send(pcm.len()); }
                    Some(_) => {}
                    None => return,
                },
                order = play.recv() => match order {
                    Some(Track::Play(pcm)) => peer.play(pcm),
                    Some(Track::TurnEnd) => peer.turn_end(),
                    Some(Track::Flush) => peer.flush(),
                    None => return,
                },
            }
        }
    });
    tokio::spawn(async move { while from_app.next().await.is_some() {} });
    tokio::time::timeout(WAIT, heard.recv())
        .await
        .unwrap()
        .unwrap();

    let tone = |ms: usize| -> Vec<u8> {
        (0..ms * 24)
            .flat_map(|i| {
                let s = (i as f32 * 440.0 * std::f32::consts::TAU / 24_000.0).sin() * 8_000.0;
                (s as i16).to_le_bytes()
            })
            .collect()
    };
    let chunk = |pcm: &[u8]| {
        let data = base64::engine::general_purpose::STANDARD.encode(pcm);
        Message::text(json!({"type": "AUDIO_CHUNK", "payload": {"data": data}}).to_string())
    };
    let turn_complete = Message::text(json!({"type": "TURN_COMPLETE", "payload": {}}).to_string());
    // Model audio the client heard (ms) until `until` is true of an event.
    async fn until(
        connection: &mut livetalk_live::Connection,
        mut stop: impl FnMut(&ServerEvent, usize) -> bool,
    ) -> usize {
        let mut bytes = 0;
        loop {
            let inbound = tokio::time::timeout(WAIT, connection.inbound.recv())
                .await
                .expect("the reply goes on")
                .expect("the connection is open");
            for event in &inbound.events {
                if let ServerEvent::ModelAudio { pcm, sample_rate } = event {
                    assert_eq!(*sample_rate, 24_000);
                    bytes += pcm.len();
                }
                if stop(event, bytes / 48) {
                    return bytes / 48;
                }
            }
        }
    }
    let is_turn_complete =
        |e: &ServerEvent, _: usize| matches!(e, ServerEvent::TurnComplete { .. });

    // A 2 s reply: all its chunks at once, the turn's end right after.
    let started = std::time::Instant::now();
    let reply = tone(2000);
    for part in reply.chunks(4800) {
        to_app.send(chunk(part)).await.unwrap();
        play_tx.send(Track::Play(part.to_vec())).unwrap();
    }
    to_app.send(turn_complete.clone()).await.unwrap();
    play_tx.send(Track::TurnEnd).unwrap();
    let heard_ms = until(&mut connection, is_turn_complete).await;
    let took = started.elapsed();
    assert!(
        (1940..=2060).contains(&heard_ms),
        "heard {heard_ms} ms of a 2000 ms reply before its turn ended"
    );
    assert!(
        took >= Duration::from_millis(1900),
        "the turn ended after {took:?}"
    );

    // A 3 s reply cut off after half a second of it was heard.
    let reply = tone(3000);
    for part in reply.chunks(4800) {
        to_app.send(chunk(part)).await.unwrap();
        play_tx.send(Track::Play(part.to_vec())).unwrap();
    }
    let before = until(&mut connection, |_, ms| ms >= 500).await;
    play_tx.send(Track::Flush).unwrap();
    let interrupted = Message::text(json!({"type": "INTERRUPTED", "payload": {}}).to_string());
    to_app.send(interrupted).await.unwrap();
    let cut = until(&mut connection, |e, _| {
        matches!(e, ServerEvent::Interrupted)
    })
    .await;
    assert!(
        before + cut < 1000,
        "heard {} ms before the cut",
        before + cut
    );
    // Nothing more of it is heard.
    let after = tokio::time::timeout(Duration::from_millis(300), async {
        until(&mut connection, |e, ms| {
            ms > 0 || matches!(e, ServerEvent::TurnComplete { .. })
        })
        .await
    })
    .await;
    assert!(
        after.is_err(),
        "{after:?} ms of the cut-off reply was heard"
    );

    // The next reply is heard whole.
    let reply = tone(500);
    for part in reply.chunks(4800) {
        to_app.send(chunk(part)).await.unwrap();
        play_tx.send(Track::Play(part.to_vec())).unwrap();
    }
    to_app.send(turn_complete).await.unwrap();
    play_tx.send(Track::TurnEnd).unwrap();
    let heard_ms = until(&mut connection, is_turn_complete).await;
    assert!(
        (440..=560).contains(&heard_ms),
        "heard {heard_ms} ms of a 500 ms reply"
    );
    microphone.abort();
}

/// A bridge that answers the WebRTC offer with something no peer can use (garbage, or a
/// 30 MB answer) and never closes its socket: a `livetalk --bridge-transport webrtc` session
/// whose input has ended still exits, within 5 s of the end of its input, whatever the bridge
/// does.
#[test]
fn a_webrtc_session_whose_input_ended_exits_in_time_whatever_the_bridge_answers() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for answer in ["v=0\r\ngarbage".to_owned(), "v".repeat(30_000_000)] {
        let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let url = format!("ws://{}", listener.local_addr().unwrap());
        let sent = answer.clone();
        runtime.spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let mut socket = tokio_tungstenite::accept_async(stream).await.unwrap();
            while let Some(Ok(frame)) = socket.next().await {
                let Ok(text) = frame.to_text() else { continue };
                let Ok(message) = serde_json::from_str::<Value>(text) else {
                    continue;
                };
                let reply = match message["type"].as_str() {
                    Some("CONNECT_GEMINI") => {
                        json!({"type": "SETUP_COMPLETE", "payload": {"success": true}})
                    }
                    Some("WEBRTC_OFFER") => {
                        json!({"type": "WEBRTC_ANSWER", "payload": {"sdp": sent.as_str()}})
                    }
                    // Never closes: a Close is read and not answered.
                    _ => continue,
                };
                if socket.send(Message::text(reply.to_string())).await.is_err() {
                    break;
                }
            }
            // Holds the socket open after the client's Close, for ever.
            std::future::pending::<()>().await;
        });
        let scratch = tempfile::tempdir().unwrap();
        let mut command = livetalk(scratch.path());
        command.args([
            "--headless",
            "--bridge",
            &url,
            "--bridge-transport",
            "webrtc",
        ]);
        let started = std::time::Instant::now();
        // No input at all: it ends at once.
        let run = run_command(command, &[], Duration::from_secs(60));
        let took = started.elapsed();
        eprintln!(
            "answer of {} bytes: exit {:?} in {took:?}\n{}",
            answer.len().min(1 << 20),
            run.code,
            run.stderr
        );
        assert!(
            took < Duration::from_secs(5),
            "the session's input ended at once; it took {took:?} to exit:\n{}",
            run.stderr
        );
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    }
}

// ---------------------------------------------------------------------------------------------
// A fleet behind HAProxy, scraped by Prometheus (docs/bridge.md, "Past one machine")
// ---------------------------------------------------------------------------------------------

/// A child process killed when the test is done with it.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Child processes killed when the test is done with them.
struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The first block of code fenced as `language` in docs/bridge.md.
fn documented(language: &str) -> String {
    let page =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/bridge.md")).unwrap();
    let start = page
        .find(&format!("```{language}\n"))
        .unwrap_or_else(|| panic!("docs/bridge.md has a {language} block"));
    let block = &page[start + language.len() + 4..];
    block[..block.find("```").unwrap()].to_owned()
}

/// A program a test needs from the system (`scripts/test.sh` installs it).
fn system_program(name: &str) -> std::path::PathBuf {
    ["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"]
        .iter()
        .map(|dir| std::path::Path::new(dir).join(name))
        .find(|path| path.exists())
        .unwrap_or_else(|| {
            panic!(
                "{name} is not installed: scripts/test.sh installs it (Debian's `{name}` package)"
            )
        })
}

/// One server's line of HAProxy's statistics (CSV): its status, last check's status and code.
async fn haproxy_server(stats: &str, server: &str) -> Option<(String, String, String)> {
    let (status, csv) = http_if_up(stats, "GET", "/stats;csv", &[]).await?;
    if status != 200 {
        return None;
    }
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next()?.trim_start_matches("# ").split(',').collect();
    let column = |name: &str| header.iter().position(|h| *h == name);
    let (sv, st, check, code) = (
        column("svname")?,
        column("status")?,
        column("check_status")?,
        column("check_code")?,
    );
    lines
        .map(|l| l.split(',').collect::<Vec<_>>())
        .find_map(|row| {
            (row.get(sv) == Some(&server)).then(|| {
                (
                    row[st].to_owned(),
                    row[check].to_owned(),
                    row[code].to_owned(),
                )
            })
        })
}

fn haproxy_stats_text(stats: &str) -> Option<(u16, String)> {
    let stats = stats.to_owned();
    std::thread::spawn(move || {
        tokio::runtime::Runtime::new().unwrap().block_on(http_if_up(
            &stats,
            "GET",
            "/stats;csv",
            &[],
        ))
    })
    .join()
    .unwrap()
}

/// One Prometheus query's value for one instance; `None` until it has one.
async fn scraped(prometheus: &str, metric: &str, instance: &str) -> Option<f64> {
    let query = format!("{metric}{{instance=\"{instance}\"}}");
    let encoded: String = query
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let (status, body) = http(
        prometheus,
        "GET",
        &format!("/api/v1/query?query={encoded}"),
        &[],
    )
    .await;
    if status != 200 {
        return None;
    }
    let answer: Value = serde_json::from_str(&body).ok()?;
    answer["data"]["result"][0]["value"][1]
        .as_str()?
        .parse()
        .ok()
}

/// An app of the fleet test: a WebSocket through the load balancer, the turns it completed
/// on each instance, and whether its instance drained it.
struct FleetApp {
    app: App,
    url: String,
    handle: Option<String>,
    drained: bool,
}

/// How long a fleet app waits for each message: the fleet test runs four servers beside the
/// rest of the suite on a small machine.
const FLEET_WAIT: Duration = Duration::from_secs(60);

impl FleetApp {
    async fn connect(url: &str) -> FleetApp {
        let app = App::connect(url).await;
        let mut app = App {
            socket: app.socket.waiting(FLEET_WAIT),
        };
        app.start(live_config("audio")).await;
        FleetApp {
            app,
            url: url.to_owned(),
            handle: None,
            drained: false,
        }
    }

    /// One turn: `text`, its one call answered, the reply to its end; returns the call.
    async fn turn(&mut self, text: &str) -> Value {
        self.app.say(text).await;
        let calls = self
            .app
            .answer_tool_call(json!({"status": "off", "result": "ok"}))
            .await;
        self.app.finish_turn().await;
        self.keep_handle().await;
        calls[0].clone()
    }

    /// Reads on to the SESSION_HANDLE the turn's end brings.
    async fn keep_handle(&mut self) {
        let told = self.app.wait_for(|m| m["type"] == "SESSION_HANDLE").await;
        self.handle = told["payload"]["handle"].as_str().map(str::to_owned);
    }

    /// Reads to the drain's close, then connects again through the load balancer with the
    /// handle the drain gave.
    async fn follow_the_drain(&mut self) {
        let closed = self.app.closed().await;
        assert_eq!(closed.code, 1012, "{:#?}", self.app.seen);
        let mut last = self.app.seen.iter().rev();
        let disconnected = last.next().unwrap();
        assert_eq!(disconnected["type"], "GEMINI_DISCONNECTED");
        assert_eq!(disconnected["payload"]["code"], 1012);
        let told = last.next().unwrap();
        assert_eq!(told["type"], "SESSION_HANDLE", "{told}");
        self.handle = told["payload"]["handle"].as_str().map(str::to_owned);
        let handle = self.handle.clone().expect("a drained session's handle");
        self.app = App {
            socket: App::connect(&self.url).await.socket.waiting(FLEET_WAIT),
        };
        let setup = self.app.resume(&handle).await;
        assert_eq!(setup["payload"]["success"], true, "{setup}");
        self.drained = true;
    }
}

/// Which instance holds each app: the one whose open connections grew.
async fn connections_open(instance: &str) -> f64 {
    let (status, body) = http(instance, "GET", "/metrics?token=fleet-t0ken", &[]).await;
    assert_eq!(status, 200, "{body}");
    metric(&body, "livetalk_bridge_connections_open")
}

/// Done means, item 1 and part of 3: HAProxy (the configuration docs/bridge.md gives) in front of
/// two `livetalk serve` instances sharing one upstream mock; apps in conversation, the
/// `livetalk --headless --bridge` client among them; one instance drained in the middle of an
/// app's tool-call turn. HAProxy's check takes it out of the rotation from the drain's start
/// (its `/readyz` says 503) and a new app goes to the other; every app of the drained instance
/// resumes on the other with its conversation (a later "it" still means the lamp); every turn
/// is answered, no call twice; Prometheus scrapes both instances, and what it scraped is what
/// the apps did.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fleet_behind_haproxy_drains_an_instance_without_losing_a_turn() {
    const TOKEN: &str = "fleet-t0ken";
    let scratch = tempfile::tempdir().unwrap();
    let (haproxy_bin, prometheus_bin) = (system_program("haproxy"), system_program("prometheus"));
    // Slow enough that a turn outlasts the drain's start by far.
    let mock = MockServer::start(MockOptions {
        speed: 4.0,
        ..MockOptions::loopback()
    })
    .await
    .unwrap();
    let instance = |name: &str| {
        livetalk(scratch.path())
            .args([
                "serve",
                "--endpoint",
                &mock.base_url(),
                "--listen",
                "127.0.0.1:0",
            ])
            .args(["--token", TOKEN, "--drain-timeout", "60"])
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(scratch.path().join(format!("{name}.log"))).unwrap())
            .spawn()
            .unwrap()
    };
    let mut instances = Children(vec![instance("first"), instance("second")]);
    let mut addresses = Vec::new();
    for child in &mut instances.0 {
        let stdout = child.stdout.take().unwrap();
        let url = tokio::task::spawn_blocking(move || LineWatcher::new(stdout).wait_for_url(WAIT))
            .await
            .unwrap();
        addresses.push(url.trim_start_matches("ws://").to_owned());
    }

    // HAProxy as the user guide configures it, with a statistics page for the test to read.
    let (front, stats) = (free_port(), free_port());
    let config = documented("haproxy")
        .replace("bind :3001", &format!("bind 127.0.0.1:{front}"))
        .replace("10.0.0.11:3001", &addresses[0])
        .replace("10.0.0.12:3001", &addresses[1])
        + &format!(
            "\nlisten stats\n    bind 127.0.0.1:{stats}\n    stats enable\n    stats uri /stats\n"
        );
    let config_path = scratch.path().join("haproxy.cfg");
    std::fs::write(&config_path, config).unwrap();
    let _haproxy = Killed(
        Command::new(&haproxy_bin)
            .args(["-db", "-f"])
            .arg(&config_path)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(scratch.path().join("haproxy.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    let stats = format!("127.0.0.1:{stats}");
    for server in ["bridge-1", "bridge-2"] {
        poll_async(WAIT, Duration::from_millis(100), async || {
            let up = haproxy_server(&stats, server).await?;
            (up.0 == "UP").then_some(())
        })
        .await
        .unwrap_or_else(|| {
            panic!(
                "HAProxy never saw {server} ready: {:?}\n{}",
                haproxy_stats_text(&stats),
                std::fs::read_to_string(scratch.path().join("haproxy.log")).unwrap_or_default()
            )
        });
    }

    // Prometheus scraping both, with the token.
    let token_file = scratch.path().join("token");
    std::fs::write(&token_file, TOKEN).unwrap();
    let prometheus_port = free_port();
    let scrape = documented("yaml")
        .replace("15s", "1s")
        .replace(
            "/etc/prometheus/livetalk-token",
            token_file.to_str().unwrap(),
        )
        .replace("10.0.0.11:3001", &addresses[0])
        .replace("10.0.0.12:3001", &addresses[1]);
    let prometheus_config = scratch.path().join("prometheus.yml");
    std::fs::write(&prometheus_config, scrape).unwrap();
    let _prometheus = Killed(
        Command::new(&prometheus_bin)
            .arg(format!("--config.file={}", prometheus_config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                scratch.path().join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{prometheus_port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(scratch.path().join("prometheus.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    let prometheus = format!("127.0.0.1:{prometheus_port}");

    let url = format!("ws://127.0.0.1:{front}/?token={TOKEN}");
    // The terminal app, headless, through the load balancer: its first turn.
    let mut headless = livetalk(scratch.path())
        .args(["--headless", "--bridge", &url])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(scratch.path().join("headless.log")).unwrap())
        .spawn()
        .unwrap();
    let mut typing = headless.stdin.take().unwrap();
    let mut said = LineWatcher::new(headless.stdout.take().unwrap());
    write_lines(&mut typing, &[ASK_LAMP]);
    said = tokio::task::spawn_blocking(move || {
        said.wait_for(WAIT, |l| l.starts_with("Gemini: "));
        said
    })
    .await
    .unwrap();
    // The instance it is on is the one drained: `drained` and `kept` name them.
    let (drained, kept) = if connections_open(&addresses[0]).await == 1.0 {
        (0, 1)
    } else {
        (1, 0)
    };
    assert_eq!(connections_open(&addresses[kept]).await, 0.0);
    let (drained_at, kept_at) = (addresses[drained].clone(), addresses[kept].clone());
    // Turns completed on each instance: the headless app's first is on the drained one.
    let mut turns = [0.0, 0.0];
    turns[drained] += 1.0;

    // Three apps, each placed where HAProxy put it (the fewest connections first), each a turn.
    let mut apps = Vec::new();
    let mut on_drained = Vec::new();
    for i in 0..3 {
        let before = connections_open(&drained_at).await;
        let mut app = FleetApp::connect(&url).await;
        let here = if connections_open(&drained_at).await > before {
            on_drained.push(i);
            drained
        } else {
            kept
        };
        let call = app.turn(ASK_LAMP).await;
        assert_eq!(call["args"]["device_name"], "living room lamp");
        turns[here] += 1.0;
        apps.push(app);
    }
    assert!(
        !on_drained.is_empty(),
        "HAProxy put every app on one instance"
    );
    let busy = on_drained[0];
    // What Prometheus has of each instance is what the apps did there.
    for (index, address) in addresses.iter().enumerate() {
        let want = turns[index];
        poll_async(
            Duration::from_secs(30),
            Duration::from_millis(200),
            async || {
                (scraped(&prometheus, "livetalk_bridge_turns_total", address).await == Some(want))
                    .then_some(())
            },
        )
        .await
        .unwrap_or_else(|| panic!("Prometheus never scraped {want} turns of {address}"));
    }

    // The busy app's second turn reaches its tool call; then the instance is told to drain.
    apps[busy].app.say(TURN_IT_ON).await;
    let (call, _) = apps[busy].app.until("TOOL_CALL").await;
    send_signal(instances.0[drained].id(), "TERM");
    poll_async(WAIT, Duration::from_millis(20), async || {
        (http(&drained_at, "GET", "/readyz", &[]).await.0 == 503).then_some(())
    })
    .await
    .expect("/readyz says 503 once the drain starts");
    // HAProxy's check takes the instance out while its turn is still going on.
    let server = if drained == 0 { "bridge-1" } else { "bridge-2" };
    let checked = poll_async(WAIT, Duration::from_millis(100), async || {
        let state = haproxy_server(&stats, server).await?;
        (state.0 != "UP").then_some(state)
    })
    .await
    .expect("HAProxy takes the draining instance out");
    assert_eq!(checked.0, "DOWN", "{checked:?}");
    assert_eq!(
        checked.2, "503",
        "its readiness check said why: {checked:?}"
    );
    // A new app goes to the other instance.
    let before = connections_open(&kept_at).await;
    let mut newcomer = FleetApp::connect(&url).await;
    assert_eq!(connections_open(&kept_at).await, before + 1.0);
    newcomer.turn(ASK_LAMP).await;
    turns[kept] += 1.0;

    // The busy app answers its call, hears the turn to its end and follows the drain.
    let calls = &call["payload"]["toolCall"]["functionCalls"];
    apps[busy]
        .app
        .send(
            json!({"type": "SEND_TOOL_RESPONSE", "payload": {"toolResponse": {
        "functionResponses": function_responses(calls, &json!({"result": "ok"}))}}}),
        )
        .await;
    apps[busy].app.finish_turn().await;
    for &i in &on_drained {
        apps[i].follow_the_drain().await;
    }
    // The headless app follows it by itself; its next turn still knows the lamp.
    write_lines(&mut typing, &[TURN_IT_ON, SMART_HOME_LINES[2]]);
    drop(typing);
    let status = tokio::task::spawn_blocking(move || wait_exit(headless, Duration::from_secs(60)))
        .await
        .unwrap();
    let transcript = said.rest().join("\n");
    assert!(status.success(), "{transcript}");
    let tools: Vec<&str> = transcript
        .lines()
        .filter(|l| l.starts_with("Tool: "))
        .collect();
    assert_eq!(tools.len(), 3, "{transcript}");
    assert!(
        tools[1].starts_with("Tool: set_device_status ")
            && tools[1].contains(r#""device_name":"living room lamp""#),
        "{transcript}"
    );
    assert!(tools[2].contains("kitchen thermostat"), "{transcript}");
    assert_eq!(
        transcript
            .lines()
            .filter(|l| l.starts_with("Gemini: "))
            .count(),
        3,
        "every turn answered: {transcript}"
    );
    turns[kept] += 2.0;
    // The drained instance is gone, its every app elsewhere.
    let child = &mut instances.0[drained];
    let exit = poll_async(
        Duration::from_secs(30),
        Duration::from_millis(50),
        async || child.try_wait().unwrap(),
    )
    .await
    .expect("the drained instance exits once its apps have gone");
    assert!(exit.success(), "{exit:?}");

    // Every app's conversation goes on where it is now: "it" is still the lamp.
    for app in apps.iter_mut() {
        let call = app.turn(TURN_IT_ON).await;
        assert_eq!(call["args"]["device_name"], "living room lamp", "{call}");
        turns[kept] += 1.0;
    }
    // The busy app's second turn ended on the drained instance.
    turns[drained] += 1.0;
    for app in &apps {
        assert!(
            of_type(&app.app.seen, "GEMINI_ERROR").is_empty(),
            "{:#?}",
            app.app.seen
        );
    }
    assert_eq!(mock.stray_tool_responses(), 0, "no call answered twice");

    // Prometheus' view of the instance left: its turns, and the sessions that came to it with a
    // handle (each app of the drained instance, the headless one included).
    let moved = on_drained.len() as f64 + 1.0;
    for (metric_name, want) in [
        ("livetalk_bridge_turns_total", turns[kept]),
        ("livetalk_bridge_tool_calls_total", turns[kept]),
    ] {
        poll_async(
            Duration::from_secs(30),
            Duration::from_millis(200),
            async || {
                (scraped(&prometheus, metric_name, &kept_at).await == Some(want)).then_some(())
            },
        )
        .await
        .unwrap_or_else(|| panic!("Prometheus never scraped {metric_name} = {want} of {kept_at}"));
    }
    let resumed = poll_async(
        Duration::from_secs(30),
        Duration::from_millis(200),
        async || {
            let query =
                format!(r#"livetalk_bridge_sessions_total{{resumed="true",instance="{kept_at}"}}"#);
            let encoded: String = query.bytes().map(|b| format!("%{b:02X}")).collect();
            let (_, body) = http(
                &prometheus,
                "GET",
                &format!("/api/v1/query?query={encoded}"),
                &[],
            )
            .await;
            let value: f64 =
                serde_json::from_str::<Value>(&body).ok()?["data"]["result"][0]["value"][1]
                    .as_str()?
                    .parse()
                    .ok()?;
            (value == moved).then_some(value)
        },
    )
    .await;
    assert_eq!(resumed, Some(moved), "sessions resumed on {kept_at}");
    eprintln!(
        "drained {drained_at} with {} apps and the headless one; {} turns on {kept_at}",
        on_drained.len(),
        turns[kept]
    );
}
