//! `livetalk proxy` over real loopback sockets: raw WebSocket apps and scripted Live servers
//! (no SDK: the SDKs' tests are Python's and Node's, tests/proxy_sdk*), the proxy in-process
//! for the relay, its flags and bounds, and the built binary once for its command line,
//! output and recording. Every flag is asserted within a second of the moment it is due.

#![allow(clippy::disallowed_macros)]
#![allow(clippy::unwrap_used)]
// tungstenite fixes the upgrade callback's error type.
#![allow(clippy::result_large_err)]

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{SinkExt as _, StreamExt as _};
use livetalk::proxy::{
    CertFiles, EventKind, ProxyEvent, ProxyOptions, ProxyServer, WarningKind, WatchOptions,
};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{Bytes, Message};

const PATH: &str = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent";
const PROXY_KEY: &str = "AIzaProxyOwnKey0123456789";
const APP_KEY: &str = "AIzaAppsOwnKey9876543210";

type ServerSocket = WebSocketStream<TcpStream>;

/// What a scripted Live server saw of the upgrade.
#[derive(Debug, Clone, Default)]
struct Upgrade {
    uri: String,
    api_key_header: Option<String>,
}

/// A Live server on loopback that runs `script` on each connection it accepts.
async fn fake_server<F, Fut>(script: F) -> (SocketAddr, Arc<Mutex<Vec<Upgrade>>>)
where
    F: Fn(ServerSocket) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen: Arc<Mutex<Vec<Upgrade>>> = Arc::default();
    let script = Arc::new(script);
    let upgrades = seen.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let script = script.clone();
            let upgrades = upgrades.clone();
            tokio::spawn(async move {
                let callback = |request: &Request, response: Response| {
                    upgrades.lock().unwrap().push(Upgrade {
                        uri: request.uri().to_string(),
                        api_key_header: request
                            .headers()
                            .get("x-goog-api-key")
                            .map(|v| v.to_str().unwrap().to_owned()),
                    });
                    Ok(response)
                };
                if let Ok(socket) = tokio_tungstenite::accept_hdr_async(stream, callback).await {
                    script(socket).await;
                }
            });
        }
    });
    (addr, seen)
}

fn options(upstream: SocketAddr, dir: &Path) -> ProxyOptions {
    let (tls, _) = livetalk::proxy::self_signed(dir, "127.0.0.1".parse().unwrap()).unwrap();
    ProxyOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        tls,
        upstream: format!("ws://{upstream}"),
        api_key: Some(PROXY_KEY.into()),
        offline: false,
        connect_timeout: Duration::from_secs(5),
        token: None,
        max_connections: 16,
        record: None,
        watch: WatchOptions {
            tool_timeout: Duration::from_millis(600),
            stall: Duration::from_millis(600),
        },
        write_stall: Duration::from_millis(500),
    }
}

/// The events of a proxy, as they come, with when they came.
struct Events {
    rx: mpsc::Receiver<ProxyEvent>,
    seen: Vec<(Instant, ProxyEvent)>,
}

impl Events {
    fn new(rx: mpsc::Receiver<ProxyEvent>) -> Events {
        Events {
            rx,
            seen: Vec::new(),
        }
    }

    /// Waits (up to 10 s) for an event that satisfies `pred`; when it came.
    async fn wait(
        &mut self,
        what: &str,
        pred: impl Fn(&EventKind) -> bool,
    ) -> (Instant, EventKind) {
        if let Some((at, event)) = self.seen.iter().find(|(_, e)| pred(&e.kind)) {
            return (*at, event.kind.clone());
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let event = tokio::time::timeout_at(deadline, self.rx.recv())
                .await
                .unwrap_or_else(|_| panic!("no {what} within 10 s; seen: {:#?}", self.seen))
                .expect("the proxy is running");
            let at = Instant::now();
            let found = pred(&event.kind);
            self.seen.push((at, event.clone()));
            if found {
                return (at, event.kind);
            }
        }
    }

    async fn warning(&mut self, kind: WarningKind) -> (Instant, String) {
        let (at, event) = self
            .wait(
                kind.name(),
                |e| matches!(e, EventKind::Warning { kind: k, .. } if *k == kind),
            )
            .await;
        match event {
            EventKind::Warning { message, .. } => (at, message),
            _ => unreachable!(),
        }
    }
}

async fn start(options: ProxyOptions) -> (ProxyServer, Events) {
    let (server, rx) = ProxyServer::start(options).await.unwrap();
    (server, Events::new(rx))
}

async fn app(
    proxy: &ProxyServer,
    query: &str,
) -> WebSocketStream<tokio_tungstenite::MaybeTlsStream<TcpStream>> {
    let url = format!("ws://{}{PATH}{query}", proxy.local_addr());
    tokio_tungstenite::connect_async(url).await.unwrap().0
}

fn text(value: Value) -> Message {
    Message::text(value.to_string())
}

/// The next data or close frame.
async fn next_frame<S>(socket: &mut S) -> Message
where
    S: futures_util::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(10), socket.next())
            .await
            .expect("a frame within 10 s")
            .expect("the socket is open")
            .expect("a frame");
        if !matches!(frame, Message::Ping(_) | Message::Pong(_)) {
            return frame;
        }
    }
}

fn setup() -> Value {
    json!({"setup": {"model": "models/gemini-3.8-live", "generationConfig": {"responseModalities": ["TEXT"]}}})
}

/// Every frame goes through as it came, both ways: its type, bytes and order, a frame no
/// one can parse, and the close's code and reason; the app's key goes up as it sent it.
#[tokio::test]
async fn frames_go_through_unchanged_both_ways_with_the_close() {
    let dir = tempfile::tempdir().unwrap();
    let from_app: Arc<Mutex<Vec<Message>>> = Arc::default();
    let kept = from_app.clone();
    let (upstream, upgrades) = fake_server(move |mut ws| {
        let kept = kept.clone();
        async move {
            for _ in 0..3 {
                let frame = next_frame(&mut ws).await;
                kept.lock().unwrap().push(frame);
            }
            ws.send(Message::binary(br#"{"setupComplete":{}}"#.to_vec())).await.unwrap();
            ws.send(Message::text("{\"serverContent\": {\"modelTurn\": {\"parts\": [{\"text\": \"h\u{e9}llo\"}]}, \"turnComplete\": true}}")).await.unwrap();
            ws.send(Message::binary(vec![0u8, 159, 146, 150, 255])).await.unwrap();
            ws.send(Message::Close(Some(CloseFrame {
                code: CloseCode::from(4321),
                reason: "the server's own reason".into(),
            })))
            .await
            .unwrap();
            while ws.next().await.is_some() {}
        }
    })
    .await;
    let (proxy, mut events) = start(options(upstream, dir.path())).await;
    let mut app = app(&proxy, &format!("?key={APP_KEY}&alt=x")).await;
    let sent = vec![
        text(setup()),
        Message::binary(vec![1u8, 2, 3, 0, 254]),
        Message::text("not json at all"),
    ];
    for frame in &sent {
        app.send(frame.clone()).await.unwrap();
    }
    let mut received = Vec::new();
    loop {
        let frame = next_frame(&mut app).await;
        let close = matches!(frame, Message::Close(_));
        received.push(frame);
        if close {
            break;
        }
    }
    // The app answers the close as it goes on reading.
    while app.next().await.is_some() {}
    assert_eq!(*from_app.lock().unwrap(), sent);
    assert_eq!(
        received[0],
        Message::binary(br#"{"setupComplete":{}}"#.to_vec())
    );
    assert_eq!(
        received[1],
        Message::text(
            "{\"serverContent\": {\"modelTurn\": {\"parts\": [{\"text\": \"h\u{e9}llo\"}]}, \"turnComplete\": true}}"
        )
    );
    assert_eq!(received[2], Message::binary(vec![0u8, 159, 146, 150, 255]));
    match &received[3] {
        Message::Close(Some(frame)) => {
            assert_eq!(u16::from(frame.code), 4321);
            assert_eq!(frame.reason.as_str(), "the server's own reason");
        }
        other => panic!("{other:?}"),
    }
    // The app's key and path went up as sent, and the proxy's own key did not.
    let upgrade = upgrades.lock().unwrap()[0].clone();
    assert_eq!(upgrade.uri, format!("{PATH}?key={APP_KEY}&alt=x"));
    assert_eq!(upgrade.api_key_header, None);
    // Unreadable frames are flagged, not dropped; the close is the server's.
    let (_, message) = events.warning(WarningKind::UnparsedFrame).await;
    assert!(message.contains("went on unchanged"), "{message}");
    let (_, closed) = events
        .wait("close", |e| matches!(e, EventKind::Closed { .. }))
        .await;
    let EventKind::Closed {
        code,
        reason,
        by,
        send,
        recv,
    } = closed
    else {
        unreachable!()
    };
    assert_eq!(
        (code, reason.as_str(), by),
        (Some(4321), "the server's own reason", "upstream")
    );
    assert_eq!((send.frames, recv.frames), (3, 3));
    // The key is in no event the presenter is handed.
    for (_, event) in &events.seen {
        let shown = livetalk_live::redact::scrub(&event.json().to_string()).into_owned();
        assert!(!shown.contains(APP_KEY), "{shown}");
    }
    let (_, opened) = events
        .wait("open", |e| matches!(e, EventKind::Opened { .. }))
        .await;
    let EventKind::Opened { path, .. } = opened else {
        unreachable!()
    };
    assert_eq!(path, format!("{PATH}?key=[redacted]&alt=x"));
}

/// An app with no key of its own gets the proxy's, in a header; the proxy's token stays home;
/// a page from another origin and an app without the token are refused before anything goes
/// upstream; a refused upgrade reaches the app with the service's status.
#[tokio::test]
async fn keys_tokens_origins_and_refusals() {
    let dir = tempfile::tempdir().unwrap();
    let (upstream, upgrades) = fake_server(|mut ws| async move {
        ws.send(text(json!({"setupComplete": {}}))).await.unwrap();
        while ws.next().await.is_some() {}
    })
    .await;
    let mut with_token = options(upstream, dir.path());
    with_token.token = Some("proxy-token-123".into());
    let (proxy, _events) = start(with_token).await;
    let addr = proxy.local_addr().to_string();
    let (status, body) = common::http(
        &addr,
        "GET",
        PATH,
        &[
            ("Upgrade", "websocket"),
            ("Connection", "Upgrade"),
            ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
            ("Sec-WebSocket-Version", "13"),
        ],
    )
    .await;
    assert_eq!(status, 401, "{body}");
    let mut app = app(&proxy, "?token=proxy-token-123").await;
    assert!(matches!(next_frame(&mut app).await, Message::Text(_)));
    let upgrade = upgrades.lock().unwrap()[0].clone();
    assert_eq!(upgrade.uri, PATH, "the proxy's token never goes upstream");
    assert_eq!(upgrade.api_key_header.as_deref(), Some(PROXY_KEY));

    let (open, _events) = start(options(upstream, dir.path())).await;
    let addr = open.local_addr().to_string();
    let upgrade_headers = [
        ("Upgrade", "websocket"),
        ("Connection", "Upgrade"),
        ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ("Sec-WebSocket-Version", "13"),
    ];
    let mut foreign = upgrade_headers.to_vec();
    foreign.push(("Origin", "https://evil.example"));
    let (status, _) = common::http(&addr, "GET", PATH, &foreign).await;
    assert_eq!(status, 403);
    assert_eq!(upgrades.lock().unwrap().len(), 1, "nothing went upstream");

    // A listen address beyond loopback needs a token.
    let mut wide = options(upstream, dir.path());
    wide.listen = "0.0.0.0:0".parse().unwrap();
    let refused = ProxyServer::start(wide).await.err().expect("refused");
    assert!(refused.to_string().contains("--token"), "{refused}");

    // A server that refuses the upgrade: the app gets its status.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let refusing = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf).await;
            let _ = stream
                .write_all(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
                .await;
        }
    });
    let (proxy, mut events) = start(options(refusing, dir.path())).await;
    let url = format!("ws://{}{PATH}?key={APP_KEY}", proxy.local_addr());
    match tokio_tungstenite::connect_async(url).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 403);
            let body = String::from_utf8_lossy(response.body().as_deref().unwrap_or_default())
                .into_owned();
            assert!(
                body.contains("HTTP 403") && !body.contains(APP_KEY),
                "{body}"
            );
        }
        other => panic!("{other:?}"),
    }
    let (_, message) = events.warning(WarningKind::SetupRefused).await;
    assert!(message.contains("403"), "{message}");
}

/// wss:// on the same port, with the self-signed certificate trusted as the guide says.
#[tokio::test]
async fn wss_on_the_same_port_with_the_self_signed_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let (upstream, _) = fake_server(|mut ws| async move {
        let frame = next_frame(&mut ws).await;
        ws.send(frame).await.unwrap();
        while ws.next().await.is_some() {}
    })
    .await;
    let options = options(upstream, dir.path());
    let cert = options.tls.cert.clone();
    let (proxy, _events) = start(options).await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut roots = rustls::RootCertStore::empty();
    use rustls::pki_types::pem::PemObject as _;
    for der in rustls::pki_types::CertificateDer::pem_file_iter(&cert).unwrap() {
        roots.add(der.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    for host in ["127.0.0.1", "localhost"] {
        let url = format!("wss://{host}:{}{PATH}", proxy.local_addr().port());
        let (mut app, _) = tokio_tungstenite::connect_async_tls_with_config(
            url.into_client_request().unwrap(),
            None,
            false,
            Some(tokio_tungstenite::Connector::Rustls(Arc::new(
                config.clone(),
            ))),
        )
        .await
        .unwrap();
        app.send(Message::binary(vec![7u8; 3])).await.unwrap();
        assert_eq!(next_frame(&mut app).await, Message::binary(vec![7u8; 3]));
    }
    // Made once, then reused.
    let (again, made) =
        livetalk::proxy::self_signed(dir.path(), "127.0.0.1".parse().unwrap()).unwrap();
    assert!(!made);
    assert_eq!(
        again,
        CertFiles {
            cert: cert.clone(),
            key: cert.with_file_name("key.pem")
        }
    );
}

/// The tool-call flags: answered twice, with an id never issued, not answered in time (and
/// never a call the service cancelled); each within a second of when it is due.
#[tokio::test]
async fn tool_call_flags_when_due() {
    let dir = tempfile::tempdir().unwrap();
    let (upstream, _) = fake_server(|mut ws| async move {
        next_frame(&mut ws).await; // setup
        ws.send(text(json!({"setupComplete": {}}))).await.unwrap();
        ws.send(text(json!({"toolCall": {"functionCalls": [
            {"id": "c1", "name": "get_device_status", "args": {"device_name": "lamp"}},
            {"id": "c2", "name": "set_light", "args": {}},
            {"id": "c3", "name": "slow_one", "args": {}}]}})))
            .await
            .unwrap();
        ws.send(text(json!({"toolCallCancellation": {"ids": ["c3"]}})))
            .await
            .unwrap();
        while ws.next().await.is_some() {}
    })
    .await;
    let (proxy, mut events) = start(options(upstream, dir.path())).await;
    let mut app = app(&proxy, "").await;
    app.send(text(setup())).await.unwrap();
    next_frame(&mut app).await;
    let call_at = Instant::now();
    next_frame(&mut app).await;
    // snake_case, as the Python SDK sends it.
    let answer = |id: &str| {
        text(
            json!({"tool_response": {"function_responses": [{"id": id, "name": "get_device_status", "response": {"ok": true}}]}}),
        )
    };
    app.send(answer("c1")).await.unwrap();
    let (_, answered) = events
        .wait("answer", |e| matches!(e, EventKind::ToolAnswered { .. }))
        .await;
    assert!(matches!(answered, EventKind::ToolAnswered { ref id, .. } if id == "c1"));
    app.send(answer("c1")).await.unwrap();
    let (_, twice) = events.warning(WarningKind::ToolAnsweredTwice).await;
    assert!(twice.contains("c1"), "{twice}");
    app.send(answer("nope")).await.unwrap();
    let (_, unknown) = events.warning(WarningKind::ToolUnknownId).await;
    assert!(unknown.contains("nope"), "{unknown}");
    let (at, late) = events.warning(WarningKind::ToolNotAnswered).await;
    assert!(late.contains("set_light") && late.contains("c2"), "{late}");
    let due = call_at + Duration::from_millis(600);
    assert!(
        at + Duration::from_millis(50) >= due && at < due + Duration::from_secs(1),
        "flagged {:?} after the call",
        at - call_at
    );
    // c3 was cancelled: never flagged.
    tokio::time::sleep(Duration::from_millis(300)).await;
    while let Ok(event) = events.rx.try_recv() {
        events.seen.push((Instant::now(), event));
    }
    let late: Vec<_> = events
        .seen
        .iter()
        .filter(|(_, e)| {
            matches!(
                &e.kind,
                EventKind::Warning {
                    kind: WarningKind::ToolNotAnswered,
                    ..
                }
            )
        })
        .collect();
    assert_eq!(late.len(), 1, "{late:#?}");
}

/// The turn flags: a turn silent past the stall limit, a turn completed with nothing, a setup
/// the model does not take, a setup the service refused; and goAway left unanswered.
#[tokio::test]
async fn turn_setup_and_go_away_flags_when_due() {
    let dir = tempfile::tempdir().unwrap();
    let (upstream, _) = fake_server(|mut ws| async move {
        let setup = next_frame(&mut ws).await;
        if setup.to_text().unwrap().contains("retired") {
            ws.send(Message::Close(Some(CloseFrame {
                code: CloseCode::from(1008),
                reason: "models/retired is not found".into(),
            })))
            .await
            .unwrap();
            while ws.next().await.is_some() {}
            return;
        }
        ws.send(text(json!({"setupComplete": {}}))).await.unwrap();
        next_frame(&mut ws).await; // the user's turn
        ws.send(text(
            json!({"serverContent": {"modelTurn": {"parts": [{"text": "Let me"}]}}}),
        ))
        .await
        .unwrap();
        // Silent past the stall limit, then an empty turn, then goAway and the end.
        next_frame(&mut ws).await; // the app's nudge, after the stall flag
        ws.send(text(json!({"serverContent": {"turnComplete": true}})))
            .await
            .unwrap();
        ws.send(text(json!({"serverContent": {"turnComplete": true}})))
            .await
            .unwrap();
        ws.send(text(json!({"goAway": {"timeLeft": "0.2s"}})))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        ws.send(Message::Close(Some(CloseFrame {
            code: CloseCode::from(1000),
            reason: "".into(),
        })))
        .await
        .unwrap();
        while ws.next().await.is_some() {}
    })
    .await;
    let (proxy, mut events) = start(options(upstream, dir.path())).await;
    let mut app = app(&proxy, "").await;
    app.send(text(
        json!({"setup": {"model": "models/gemini-2.0-flash-live-001"}}),
    ))
    .await
    .unwrap();
    let (_, retired) = events.warning(WarningKind::FieldNotAccepted).await;
    assert!(retired.contains("1008"), "{retired}");
    next_frame(&mut app).await;
    app.send(text(json!({"clientContent": {"turns": [{"role": "user", "parts": [{"text": "hi"}]}], "turnComplete": true}}))).await.unwrap();
    next_frame(&mut app).await;
    let spoke = Instant::now();
    let (at, stalled) = events.warning(WarningKind::TurnStalled).await;
    assert!(stalled.contains("sent nothing"), "{stalled}");
    let due = spoke + Duration::from_millis(600);
    assert!(
        at + Duration::from_millis(50) >= due && at < due + Duration::from_secs(1),
        "{:?}",
        at - spoke
    );
    app.send(text(json!({"realtimeInput": {"text": "hello?"}})))
        .await
        .unwrap();
    let (_, empty) = events.warning(WarningKind::EmptyTurn).await;
    assert!(empty.contains("nothing generated"), "{empty}");
    let read_on = tokio::spawn(async move { while app.next().await.is_some() {} });
    let (_, ignored) = events.warning(WarningKind::GoAwayIgnored).await;
    assert!(ignored.contains("goAway"), "{ignored}");
    let (closed_at, _) = events
        .wait("close", |e| matches!(e, EventKind::Closed { .. }))
        .await;
    assert!(closed_at.elapsed() < Duration::from_secs(1));
    let empties = events
        .seen
        .iter()
        .filter(|(_, e)| {
            matches!(
                &e.kind,
                EventKind::Warning {
                    kind: WarningKind::EmptyTurn,
                    ..
                }
            )
        })
        .count();
    assert_eq!(empties, 1, "the first turn had text");
    read_on.await.unwrap();

    // A setup refused: the service's close, with its reason.
    let mut refused_app = app_for(&proxy).await;
    refused_app
        .send(text(json!({"setup": {"model": "models/retired"}})))
        .await
        .unwrap();
    let (_, refused) = events.warning(WarningKind::SetupRefused).await;
    assert!(
        refused.contains("1008") && refused.contains("not found"),
        "{refused}"
    );
}

async fn app_for(
    proxy: &ProxyServer,
) -> WebSocketStream<tokio_tungstenite::MaybeTlsStream<TcpStream>> {
    app(proxy, "").await
}

/// PCM16 of `secs` seconds at `rate`.
fn pcm(rate: u32, secs: f64) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(vec![0u8; (rate as f64 * secs) as usize * 2])
}

/// Mic audio sent faster than real time, and audio at a rate its MIME type does not declare;
/// mediaChunks on a model that no longer takes them.
#[tokio::test]
async fn mic_audio_flags_when_due() {
    let dir = tempfile::tempdir().unwrap();
    let (upstream, _) = fake_server(|mut ws| async move {
        ws.send(text(json!({"setupComplete": {}}))).await.unwrap();
        while ws.next().await.is_some() {}
    })
    .await;
    let (proxy, mut events) = start(options(upstream, dir.path())).await;
    let mut fast = app(&proxy, "").await;
    fast.send(text(setup())).await.unwrap();
    let started = Instant::now();
    for _ in 0..30 {
        fast.send(text(json!({"realtimeInput": {"audio": {"mimeType": "audio/pcm;rate=16000", "data": pcm(16000, 0.1)}}}))).await.unwrap();
    }
    let (at, message) = events.warning(WarningKind::AudioTooFast).await;
    assert!(message.contains("faster than real time"), "{message}");
    assert!(at - started < Duration::from_secs(1), "{:?}", at - started);
    fast.send(text(json!({"realtimeInput": {"mediaChunks": [{"mimeType": "audio/pcm;rate=16000", "data": pcm(16000, 0.02)}]}}))).await.unwrap();
    let (_, chunks) = events.warning(WarningKind::FieldNotAccepted).await;
    assert!(chunks.contains("media_chunks"), "{chunks}");

    // 24 kHz audio labelled 16 kHz, sent in real time: 100 ms of it every 100 ms.
    let mut mislabelled = app(&proxy, "").await;
    mislabelled.send(text(setup())).await.unwrap();
    let started = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let rate = loop {
        tick.tick().await;
        mislabelled.send(text(json!({"realtimeInput": {"audio": {"mimeType": "audio/pcm;rate=16000", "data": pcm(24000, 0.1)}}}))).await.unwrap();
        let mut found = None;
        while let Ok(event) = events.rx.try_recv() {
            let at = Instant::now();
            events.seen.push((at, event.clone()));
            if let EventKind::Warning {
                kind: WarningKind::AudioRate,
                message,
            } = event.kind
            {
                found = Some((at, message));
            }
        }
        if let Some(found) = found {
            break found;
        }
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "no audio_rate flag: {:#?}",
            events.seen
        );
    };
    assert!(
        rate.1.contains("24000 Hz audio labelled 16000 Hz"),
        "{}",
        rate.1
    );
    // Due once a second and a half has streamed.
    let after = rate.0 - started;
    assert!(
        after >= Duration::from_millis(1500) && after < Duration::from_millis(2500),
        "{after:?}"
    );
    let too_fast = events
        .seen
        .iter()
        .filter(|(_, e)| {
            e.conn == 2
                && matches!(
                    &e.kind,
                    EventKind::Warning {
                        kind: WarningKind::AudioTooFast,
                        ..
                    }
                )
        })
        .count();
    assert_eq!(too_fast, 0, "a mislabelled rate is said once, as such");
}

/// A side that stops reading is closed, both ways with a reason, once a write has waited its
/// bound; the proxy never holds more than the frame it is writing.
#[tokio::test]
async fn a_reader_that_stops_is_closed_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let closes: Arc<Mutex<Vec<(u16, String)>>> = Arc::default();
    let told = closes.clone();
    let (upstream, _) = fake_server(move |ws| {
        let told = told.clone();
        async move {
            let (mut sink, mut stream) = ws.split();
            // Floods the app, which never reads, and reads the proxy's close.
            let flood = async {
                let chunk = Bytes::from(vec![b'x'; 256 << 10]);
                while sink.send(Message::binary(chunk.clone())).await.is_ok() {}
            };
            let read = async {
                while let Some(Ok(frame)) = stream.next().await {
                    if let Message::Close(Some(frame)) = frame {
                        told.lock()
                            .unwrap()
                            .push((u16::from(frame.code), frame.reason.to_string()));
                    }
                }
            };
            tokio::select! { _ = flood => {}, _ = read => {} }
        }
    })
    .await;
    let (proxy, mut events) = start(options(upstream, dir.path())).await;
    let _app = app(&proxy, "").await; // never read
    let (_, message) = events.warning(WarningKind::StalledReader).await;
    assert!(message.contains("the app stopped reading"), "{message}");
    common::poll_async(
        Duration::from_secs(5),
        Duration::from_millis(20),
        async || closes.lock().unwrap().first().cloned(),
    )
    .await
    .expect("the close upstream");
    let (code, reason) = closes.lock().unwrap()[0].clone();
    assert_eq!(code, 1011);
    assert!(reason.contains("stopped reading"), "{reason}");
}

/// Frames past the bound the mock sets are refused from their header (1009), and the service
/// is told the app is gone; past --max-connections an app gets 503.
#[tokio::test]
async fn frames_and_connections_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let closes: Arc<Mutex<Vec<u16>>> = Arc::default();
    let told = closes.clone();
    let (upstream, _) = fake_server(move |mut ws| {
        let told = told.clone();
        async move {
            while let Some(Ok(frame)) = ws.next().await {
                if let Message::Close(Some(frame)) = frame {
                    told.lock().unwrap().push(u16::from(frame.code));
                }
            }
        }
    })
    .await;
    let mut bounded = options(upstream, dir.path());
    bounded.max_connections = 1;
    let (proxy, _events) = start(bounded).await;
    let mut app = app(&proxy, "").await;
    let upgrade_headers = [
        ("Upgrade", "websocket"),
        ("Connection", "Upgrade"),
        ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ("Sec-WebSocket-Version", "13"),
    ];
    let (status, body) = common::http(
        &proxy.local_addr().to_string(),
        "GET",
        PATH,
        &upgrade_headers,
    )
    .await;
    assert_eq!(status, 503, "{body}");
    let _ = app
        .send(Message::binary(vec![
            0u8;
            livetalk_live::budget::LARGEST_MESSAGE
                + 1
        ]))
        .await;
    match next_frame(&mut app).await {
        Message::Close(Some(frame)) => assert_eq!(u16::from(frame.code), 1009),
        other => panic!("{other:?}"),
    }
    common::poll_async(
        Duration::from_secs(5),
        Duration::from_millis(20),
        async || closes.lock().unwrap().first().copied(),
    )
    .await
    .expect("the close upstream");
    assert_eq!(closes.lock().unwrap()[0], 1001);
}

/// The binary: `livetalk proxy --offline --headless --json --record DIR` in front of the demo
/// model, a raw app with a key of its own: the listening line, one event per frame and per
/// turn, a recording per connection that `inspect` reads with its turn and tool call, and the
/// key nowhere.
#[test]
fn the_command_prints_json_events_and_records_each_connection() {
    let scratch = tempfile::tempdir().unwrap();
    let record = scratch.path().join("rec");
    let mut command = common::livetalk(scratch.path());
    command
        .args([
            "proxy",
            "--offline",
            "--listen",
            "127.0.0.1:0",
            "--headless",
            "--json",
            "--record",
        ])
        .arg(&record)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = command.spawn().unwrap();
    let mut lines = common::LineWatcher::new(child.stdout.take().unwrap());
    let stderr = common::read_all(child.stderr.take().unwrap());
    let first: Value =
        serde_json::from_str(&lines.wait_for(Duration::from_secs(20), |l| l.contains("listening")))
            .unwrap();
    assert_eq!(first["event"], "listening");
    let cert = first["certificate"].as_str().unwrap().to_owned();
    assert!(
        cert.starts_with(scratch.path().join("data").to_str().unwrap()),
        "{cert}"
    );
    let ws_url = first["ws"].as_str().unwrap().to_owned();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let url = format!("{ws_url}{PATH}?key={APP_KEY}");
        let mut app = common::ws::JsonSocket::connect(url).await;
        app.send(json!({"setup": {"model": "models/gemini-3.8-live",
            "generation_config": {"response_modalities": ["TEXT"]},
            "tools": [{"function_declarations": [{"name": "get_device_status", "description": "A device's state.",
                "parameters": {"type": "OBJECT", "properties": {"device_name": {"type": "STRING"}}}}]}]}})).await;
        app.wait_for(|m| m.get("setupComplete").is_some()).await;
        app.send(json!({"client_content": {"turns": [{"role": "user", "parts": [{"text": "Is the living room lamp on?"}]}], "turn_complete": true}})).await;
        let call = app.wait_for(|m| m.get("toolCall").is_some()).await;
        let answers = common::ws::function_responses(&call["toolCall"]["functionCalls"], &json!({"status": "off"}));
        app.send(json!({"toolResponse": {"functionResponses": answers}})).await;
        app.wait_for(|m| m["serverContent"]["turnComplete"] == true).await;
        app.ws.close(None).await.unwrap();
    });
    let closed = lines.wait_for(Duration::from_secs(10), |l| {
        l.contains("\"event\":\"close\"")
    });
    let closed: Value = serde_json::from_str(&closed).unwrap();
    assert_eq!(closed["by"], "app");
    assert!(
        closed["delay"]["recv"]["frames"].as_u64().unwrap() >= 3,
        "{closed}"
    );
    common::send_signal(child.id(), "TERM");
    let status = common::wait_exit(child, Duration::from_secs(10));
    assert!(status.success(), "{status}");
    let stdout: Vec<String> = lines.rest();
    let events: Vec<Value> = stdout
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let named = |name: &str| events.iter().filter(|e| e["event"] == name).count();
    assert!(named("frame") >= 6, "{stdout:#?}");
    assert_eq!(named("tool_call"), 1);
    assert_eq!(named("tool_answered"), 1);
    assert!(named("turn") >= 1);
    assert_eq!(named("warning"), 0, "{stdout:#?}");
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "user_text" && e["text"] == "Is the living room lamp on?")
    );
    // One recording, that inspect reads with its turn and tool call.
    let folders: Vec<_> = std::fs::read_dir(&record)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(folders.len(), 1, "{folders:?}");
    let report = common::run_livetalk(
        scratch.path(),
        &["inspect", "--json", folders[0].to_str().unwrap()],
        &[],
        &[],
    );
    let report: Value =
        serde_json::from_str(&report.stdout).unwrap_or_else(|e| panic!("{e}: {}", report.stdout));
    let meta = &common::recording_lines(&folders[0])[0];
    assert_eq!(
        (
            meta["format"].as_u64(),
            meta["config"]["recorded_by"].as_str()
        ),
        (Some(4), Some("livetalk proxy"))
    );
    assert_eq!(report["user_turns"], 1, "{report}");
    assert_eq!(report["tool_calls"], 1, "{report}");
    // replay and check read it as any recording.
    let folder = folders[0].to_str().unwrap();
    let replayed = common::run_livetalk(
        scratch.path(),
        &["replay", "--headless", "--instant", folder],
        &[],
        &[],
    );
    assert!(
        replayed.stdout.contains("Tool: get_device_status"),
        "{}",
        replayed.stdout
    );
    let scenario = common::run_livetalk(
        scratch.path(),
        &["check", "--write-scenario", folder],
        &[],
        &[],
    );
    assert!(
        scenario
            .stdout
            .contains("say = \"Is the living room lamp on?\"")
            && scenario.stdout.contains("name = \"get_device_status\""),
        "{}",
        scenario.stdout
    );
    // The app's key: on no line, in no file.
    let stderr = stderr
        .recv_timeout(Duration::from_secs(5))
        .expect("stderr closes");
    let run = common::Run {
        code: status.code(),
        stdout: stdout.join("\n"),
        stderr,
    };
    common::assert_no_secrets(&run, scratch.path(), &[APP_KEY], &[]);
}
