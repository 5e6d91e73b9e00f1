//! Both servers (`livetalk mock`, `livetalk serve`) against hostile clients and a hostile
//! environment, over real loopback sockets: running out of file descriptors, half-finished
//! upgrades and too many connections, a stderr nobody reads, and protocol violations, each
//! answered the way a well-behaved WebSocket server answers them.

// Test output is the test runner's, not livetalk's: it may print directly.
#![allow(clippy::disallowed_macros)]
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{CloseCode, Control, Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::{Frame, FrameHeader};
use tokio_tungstenite::tungstenite::{self, Message};

use common::harness::bridge_options;
use common::ws::{JsonSocket, Socket, WAIT};
use common::*;
use livetalk::bridge::{BridgeOptions, BridgeServer};
use livetalk_live::ApiVersion;
use livetalk_mock::ws_server::ConnectionLimits;
use livetalk_mock::{MockOptions, MockServer};

const LIVE_PATH: &str =
    "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Mock,
    Bridge,
}

// ---------------------------------------------------------------------------------------------
// Clients: a Live client for the mock, a bridge-protocol app for `serve`
// ---------------------------------------------------------------------------------------------

/// The WebSocket URL a client of `kind` dials at the server's base URL.
fn client_url(kind: Kind, base: &str) -> String {
    match kind {
        Kind::Mock => format!("{base}{LIVE_PATH}"),
        Kind::Bridge => base.to_owned(),
    }
}

/// A connected client whose session is set up (mock: `setupComplete`; bridge:
/// `SETUP_COMPLETE` from its upstream).
async fn open_session(kind: Kind, base: &str) -> JsonSocket {
    let mut ws = JsonSocket::connect(client_url(kind, base)).await;
    match kind {
        Kind::Mock => {
            let setup = json!({"setup": {"model": "models/m", "generationConfig": {"responseModalities": ["TEXT"]}}});
            ws.send(setup).await;
            ws.wait_for(|m| m.get("setupComplete").is_some()).await;
        }
        Kind::Bridge => {
            let connect = json!({"type": "CONNECT_GEMINI", "payload": {"initialConfig": {"model": "models/m", "generationConfig": {"responseModalities": ["TEXT"]}}}});
            ws.send(connect).await;
            let setup = ws.wait_for(|m| m["type"] == "SETUP_COMPLETE").await;
            assert_eq!(setup["payload"]["success"], true, "{setup}");
        }
    }
    ws
}

/// One user turn on an open session, to its end.
async fn take_turn(kind: Kind, ws: &mut JsonSocket) {
    match kind {
        Kind::Mock => {
            let turn = json!({"clientContent": {"turns": [{"role": "user", "parts": [{"text": "Is the lamp on?"}]}], "turnComplete": true}});
            ws.send(turn).await;
            ws.wait_for(|m| m["serverContent"]["turnComplete"] == true)
                .await;
        }
        Kind::Bridge => {
            let turn = json!({"type": "SEND_MESSAGE", "payload": {"parts": [{"text": "Is the lamp on?"}], "turnComplete": true}});
            ws.send(turn).await;
            ws.wait_for(|m| m["type"] == "TURN_COMPLETE").await;
        }
    }
}

/// Closes from the client side with 1000 and returns what the server answered: its Close
/// frame, and whether the connection then ended cleanly (no reset, no missing handshake).
async fn client_close(mut ws: Socket) -> (Option<CloseFrame>, bool) {
    ws.send(Message::Close(Some(CloseFrame {
        code: CloseCode::Normal,
        reason: "bye".into(),
    })))
    .await
    .unwrap();
    let mut echoed = None;
    loop {
        match tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("the close within the wait")
        {
            Some(Ok(Message::Close(frame))) => echoed = frame,
            Some(Ok(_)) => continue,
            None => return (echoed, true),
            Some(Err(e)) => {
                eprintln!("client close ended with {e}");
                return (echoed, false);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Servers: in-process, or the binary
// ---------------------------------------------------------------------------------------------

/// An in-process server of `kind` (the bridge in front of an embedded mock), returned with its
/// base URL; keep the guard alive while testing.
async fn in_process(
    kind: Kind,
    limits: ConnectionLimits,
    adjust: impl FnOnce(&mut BridgeOptions),
) -> (String, Box<dyn std::any::Any + Send>) {
    let mock = MockServer::start(MockOptions {
        speed: 20.0,
        limits: match kind {
            Kind::Mock => limits,
            Kind::Bridge => ConnectionLimits::default(),
        },
        ..MockOptions::loopback()
    })
    .await
    .unwrap();
    match kind {
        Kind::Mock => (mock.base_url(), Box::new(mock)),
        Kind::Bridge => {
            let mut options = BridgeOptions {
                limits,
                ..bridge_options(mock.endpoint(ApiVersion::V1beta))
            };
            adjust(&mut options);
            let bridge = BridgeServer::start(options).await.unwrap();
            (bridge.url(), Box::new((bridge, mock)))
        }
    }
}

/// `livetalk mock` or `livetalk serve --offline` on a free loopback port, optionally under a
/// file-descriptor limit, with `stderr` as given; returns it with the URL it printed.
fn spawn_binary(
    kind: Kind,
    scratch: &Path,
    fd_limit: Option<u32>,
    envs: &[(&str, &str)],
) -> (Child, String) {
    let server_args: &[&str] = match kind {
        Kind::Mock => &["mock", "--listen", "127.0.0.1:0"],
        Kind::Bridge => &["serve", "--listen", "127.0.0.1:0", "--offline"],
    };
    let mut command = match fd_limit {
        Some(limit) => livetalk_with_fd_limit(scratch, limit),
        None => livetalk(scratch),
    };
    let mut child = command
        .args(server_args)
        .envs(envs.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let url = LineWatcher::new(child.stdout.take().unwrap()).wait_for_url(WAIT);
    (child, url)
}

/// Counts a child's stderr bytes and passes on (a bounded number of) its lines.
struct StderrTap {
    bytes: Arc<AtomicU64>,
    lines: LineWatcher,
}

impl StderrTap {
    fn new(stream: impl std::io::Read + Send + 'static) -> StderrTap {
        let bytes = Arc::new(AtomicU64::new(0));
        let counted = bytes.clone();
        let (tx, lines) = mpsc::sync_channel(10_000);
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stream);
            let mut line = Vec::new();
            loop {
                line.clear();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        counted.fetch_add(n as u64, Ordering::Relaxed);
                        // A flood is counted, not kept.
                        let line = String::from_utf8_lossy(&line).into_owned();
                        let _ = tx.try_send((Instant::now(), line));
                    }
                }
            }
        });
        StderrTap {
            bytes,
            lines: LineWatcher::from_channel(lines),
        }
    }

    fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    fn wait_for(&mut self, what: &str, timeout: Duration) -> String {
        self.lines.wait_for(timeout, |line| line.contains(what))
    }
}

/// CPU time (user + system) a process has used so far, from /proc/PID/stat.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the name.
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks as f64 / clock_ticks_per_second()
}

// ---------------------------------------------------------------------------------------------
// Running out of file descriptors (item 10)
// ---------------------------------------------------------------------------------------------

/// Under `ulimit -n 64`, clients open connections until accepts fail. The server backs off
/// instead of spinning, logs the episode once instead of flooding, keeps serving the session
/// already open, and accepts again by itself once descriptors are free.
async fn survives_fd_exhaustion(kind: Kind) {
    let scratch = tempfile::tempdir().unwrap();
    let (mut child, url) = spawn_binary(kind, scratch.path(), Some(64), &[]);
    let mut stderr = StderrTap::new(child.stderr.take().unwrap());
    let mut session = open_session(kind, &url).await;

    let addr = url.trim_start_matches("ws://").to_owned();
    let mut extra = Vec::new();
    for _ in 0..100 {
        extra.push(TcpStream::connect(&addr).await.unwrap());
    }
    stderr.wait_for("Too many open files", WAIT);

    let (cpu_before, log_before) = (cpu_seconds(child.id()), stderr.bytes());
    let window = Instant::now();
    // A measuring window, not a wait for an event: what the server burns while starved.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let cpu = cpu_seconds(child.id()) - cpu_before;
    let logged = stderr.bytes() - log_before;
    let seconds = window.elapsed().as_secs_f64();
    println!(
        "{kind:?} with its descriptors exhausted: {cpu:.2} s CPU and {logged} bytes of log in {seconds:.1} s"
    );
    assert!(
        cpu < 0.3,
        "{kind:?} used {cpu:.2} s CPU in {seconds:.1} s while starved"
    );
    assert!(
        logged < 10 * 1024,
        "{kind:?} logged {logged} bytes in {seconds:.1} s while starved"
    );

    // The session that was open goes on.
    tokio::time::timeout(WAIT, take_turn(kind, &mut session))
        .await
        .expect("the open session still answers");

    // Free the descriptors: the server recovers by itself and says so once.
    drop(extra);
    let fresh = tokio::time::timeout(WAIT, open_session(kind, &url))
        .await
        .expect("a new client is served once descriptors are free");
    let recovered = stderr.wait_for("accepting connections again", WAIT);
    assert!(recovered.contains("accepts failed"), "{recovered}");
    drop(fresh);
    drop(session);
    send_signal(child.id(), "TERM");
    assert!(wait_exit(child, WAIT).success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mock_survives_running_out_of_file_descriptors() {
    survives_fd_exhaustion(Kind::Mock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridge_survives_running_out_of_file_descriptors() {
    survives_fd_exhaustion(Kind::Bridge).await;
}

// ---------------------------------------------------------------------------------------------
// Upgrade deadline and connection cap (item 11)
// ---------------------------------------------------------------------------------------------

/// Bytes read until the server hangs up; panics if it does not within `timeout`.
async fn read_until_closed(stream: &mut TcpStream, timeout: Duration) -> Vec<u8> {
    let mut seen = Vec::new();
    tokio::time::timeout(timeout, async {
        let mut buffer = [0u8; 1024];
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => seen.extend_from_slice(&buffer[..n]),
            }
        }
    })
    .await
    .expect("the server hangs up");
    seen
}

async fn upgrade_deadline_drops_slow_clients(kind: Kind) {
    let deadline = Duration::from_secs(1);
    let limits = ConnectionLimits {
        upgrade_timeout: deadline,
        ..ConnectionLimits::default()
    };
    let (base, _server) = in_process(kind, limits, |options| {
        options.token = Some("s3cret".into());
    })
    .await;
    let addr = base.trim_start_matches("ws://").to_owned();
    let path = match kind {
        Kind::Mock => LIVE_PATH,
        Kind::Bridge => "/?token=s3cret",
    };
    // Half a request (no blank line ends it) and a socket that says nothing at all.
    let mut half = TcpStream::connect(&addr).await.unwrap();
    half.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut idle = TcpStream::connect(&addr).await.unwrap();
    let started = Instant::now();
    let answer = read_until_closed(&mut half, Duration::from_secs(8)).await;
    read_until_closed(&mut idle, Duration::from_secs(8)).await;
    let held = started.elapsed();
    assert!(answer.is_empty(), "{:?}", String::from_utf8_lossy(&answer));
    assert!(
        held >= deadline.mul_f64(0.8) && held < deadline * 5,
        "{kind:?} dropped the slow clients after {held:?} (deadline {deadline:?})"
    );
    // Clients that do finish in time are served as before.
    let url = match kind {
        Kind::Mock => base.clone(),
        Kind::Bridge => format!("{base}/?token=s3cret"),
    };
    let session = open_session(kind, &url).await;
    let (echo, clean) = client_close(session.ws).await;
    assert_eq!(echo.map(|f| f.code), Some(CloseCode::Normal));
    assert!(clean);
}

#[tokio::test]
async fn mock_drops_clients_that_do_not_finish_the_upgrade() {
    upgrade_deadline_drops_slow_clients(Kind::Mock).await;
}

#[tokio::test]
async fn bridge_drops_clients_that_do_not_finish_the_upgrade_and_token() {
    upgrade_deadline_drops_slow_clients(Kind::Bridge).await;
}

async fn over_the_cap_gets_503(kind: Kind) {
    let limits = ConnectionLimits {
        max_connections: 2,
        ..ConnectionLimits::default()
    };
    let (base, _server) = in_process(kind, limits, |_| {}).await;
    let first = open_session(kind, &base).await;
    let _second = open_session(kind, &base).await;
    let refused = tokio_tungstenite::connect_async(client_url(kind, &base)).await;
    match refused {
        Err(tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 503);
            let body = String::from_utf8_lossy(response.body().as_deref().unwrap_or_default())
                .into_owned();
            assert!(body.contains("limit of 2"), "{body}");
        }
        other => panic!("{kind:?} over its cap answered {other:?}"),
    }
    // A place comes free when a session ends.
    let (echo, _) = client_close(first.ws).await;
    assert!(echo.is_some());
    let connect = async || {
        let url = client_url(kind, &base);
        match tokio_tungstenite::connect_async(url).await {
            Ok(_) => Some(()),
            Err(tungstenite::Error::Http(response)) if response.status() == 503 => None,
            Err(e) => panic!("{e}"),
        }
    };
    let served = poll_async(WAIT, Duration::from_millis(20), connect).await;
    assert!(served.is_some(), "the freed place was never given out");
}

#[tokio::test]
async fn mock_refuses_connections_over_its_cap_with_503() {
    over_the_cap_gets_503(Kind::Mock).await;
}

#[tokio::test]
async fn bridge_refuses_connections_over_its_cap_with_503() {
    over_the_cap_gets_503(Kind::Bridge).await;
}

// ---------------------------------------------------------------------------------------------
// A stderr nobody reads (item 12)
// ---------------------------------------------------------------------------------------------

/// With debug logging into a pipe that is never read (it fills at 64 KiB), the server keeps
/// serving many sessions and still ends on SIGTERM.
async fn serves_with_an_unread_stderr(kind: Kind, sessions: usize) {
    let scratch = tempfile::tempdir().unwrap();
    let (child, url) = spawn_binary(kind, scratch.path(), None, &[("LIVETALK_LOG", "debug")]);
    // `child.stderr` stays open and unread for the whole test.
    let started = Instant::now();
    let served = tokio::time::timeout(Duration::from_secs(120), async {
        for _ in 0..sessions / 4 {
            let batch = (0..4).map(|_| async {
                let session = open_session(kind, &url).await;
                client_close(session.ws).await
            });
            futures_util::future::join_all(batch).await;
        }
    })
    .await;
    assert!(
        served.is_ok(),
        "{kind:?} stalled with its stderr unread (after {:?})",
        started.elapsed()
    );
    println!(
        "{kind:?}: {sessions} sessions with an unread stderr in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    send_signal(child.id(), "TERM");
    let stopping = Instant::now();
    wait_exit(child, Duration::from_secs(10));
    println!(
        "{kind:?} ended {:.2} s after SIGTERM",
        stopping.elapsed().as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mock_serves_with_an_unread_stderr() {
    serves_with_an_unread_stderr(Kind::Mock, 800).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridge_serves_with_an_unread_stderr() {
    serves_with_an_unread_stderr(Kind::Bridge, 400).await;
}

// ---------------------------------------------------------------------------------------------
// Protocol violations and the closing handshake (item 13)
// ---------------------------------------------------------------------------------------------

/// A client frame header (clients must mask) for `opcode`.
fn masked(opcode: OpCode) -> FrameHeader {
    FrameHeader {
        opcode,
        mask: Some([0x12, 0x34, 0x56, 0x78]),
        ..FrameHeader::default()
    }
}

/// A whole frame with `header` and `payload` on the wire.
fn frame(header: FrameHeader, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    Frame::from_payload(header, payload.to_vec().into())
        .format(&mut out)
        .unwrap();
    out
}

/// Sends `bytes` raw after the upgrade and returns the Close the server answers with.
async fn close_after(kind: Kind, base: &str, bytes: &[u8]) -> CloseFrame {
    let (mut ws, _) = tokio_tungstenite::connect_async(client_url(kind, base))
        .await
        .unwrap();
    ws.get_mut().write_all(bytes).await.unwrap();
    loop {
        match tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("an answer within the wait")
        {
            Some(Ok(Message::Close(Some(frame)))) => return frame,
            // The bridge explains a too-large message in a GEMINI_ERROR first.
            Some(Ok(Message::Text(_))) => continue,
            other => panic!("{kind:?} answered {other:?} instead of a Close frame"),
        }
    }
}

async fn protocol_violations_get_close_codes(kind: Kind) {
    let (base, _server) = in_process(kind, ConnectionLimits::default(), |options| {
        options.max_message_bytes = 1024;
    })
    .await;
    let text = OpCode::Data(Data::Text);

    let invalid_utf8 = frame(masked(text), &[0xff, 0xfe, 0xfd]);
    let close = close_after(kind, &base, &invalid_utf8).await;
    assert_eq!(close.code, CloseCode::Invalid, "{close:?}");

    let reserved_bits = frame(
        FrameHeader {
            rsv1: true,
            ..masked(text)
        },
        b"{}",
    );
    let close = close_after(kind, &base, &reserved_bits).await;
    assert_eq!(close.code, CloseCode::Protocol, "{close:?}");

    let unmasked = frame(
        FrameHeader {
            opcode: text,
            ..FrameHeader::default()
        },
        b"{}",
    );
    let close = close_after(kind, &base, &unmasked).await;
    assert_eq!(close.code, CloseCode::Protocol, "{close:?}");

    let unknown_control = frame(masked(OpCode::Control(Control::Reserved(0xb))), b"");
    let close = close_after(kind, &base, &unknown_control).await;
    assert_eq!(close.code, CloseCode::Protocol, "{close:?}");

    // Only the header of a frame far over the limit: it is refused before its payload.
    let mut oversized = Vec::new();
    masked(OpCode::Data(Data::Binary))
        .format(64 << 20, &mut oversized)
        .unwrap();
    let close = close_after(kind, &base, &oversized).await;
    assert_eq!(close.code, CloseCode::Size, "{close:?}");
    assert!(
        close
            .reason
            .starts_with("A message of 64.0 MiB is more than the ")
            && close.reason.ends_with(" this server reads at once."),
        "{close:?}"
    );

    // A client's Close is echoed, and the connection then ends cleanly (no 1006).
    let session = open_session(kind, &base).await;
    let (echo, clean) = client_close(session.ws).await;
    assert_eq!(echo.map(|f| f.code), Some(CloseCode::Normal));
    assert!(
        clean,
        "{kind:?} ended without completing the closing handshake"
    );
    // Also before any setup, straight after the upgrade.
    let (ws, _) = tokio_tungstenite::connect_async(client_url(kind, &base))
        .await
        .unwrap();
    let (echo, clean) = client_close(ws).await;
    assert_eq!(echo.map(|f| f.code), Some(CloseCode::Normal));
    assert!(clean);
}

#[tokio::test]
async fn mock_answers_protocol_violations_and_closes_cleanly() {
    protocol_violations_get_close_codes(Kind::Mock).await;
}

#[tokio::test]
async fn bridge_answers_protocol_violations_and_closes_cleanly() {
    protocol_violations_get_close_codes(Kind::Bridge).await;
}
