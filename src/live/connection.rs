//! The one connection runner behind every session: upgrade, opening frame, the setup wait under
//! a timeout, then a writer and a reader task. A [`Protocol`] (the Live API, or a bridge) says
//! what its frames mean; everything else is the same for both.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::handshake::client::Request;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::{self, Message};
use tracing::{debug, info};

use super::close::{describe_close, describe_http_status, describe_io_error};
use super::dial::{DialError, Stage, Target, deadline_message, dial};
use super::events::{CloseInfo, SessionEvent};
use super::session::{Outbound, Session, SessionError, SessionHandle, WireTap};
use super::wire::{ClientMessage, Setup};

/// Largest server message we accept (the service's audio frames are far smaller).
pub const MAX_MESSAGE_BYTES: usize = 32 << 20;
/// Outbound messages buffered before `send` waits.
const OUTBOUND_CAPACITY: usize = 64;
/// Events buffered before the reader stops reading the socket.
const EVENT_CAPACITY: usize = 512;

/// rustls needs one process-wide crypto provider; we use ring (no cmake, no OpenSSL).
pub fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// What a frame read while waiting for the setup answer amounts to.
pub enum SetupStep {
    /// The session is set up; its event stream starts with `SetupComplete` carrying this id.
    Done { session_id: Option<String> },
    /// Not the answer; keep waiting.
    Wait,
    /// The far end refused the setup; the connection ends with this.
    Failed(CloseInfo),
}

/// What a frame read from an open session amounts to.
pub enum Read {
    Events(Vec<SessionEvent>),
    /// The session is over (the socket may still be open).
    End(CloseInfo),
}

/// What differs between the ways livetalk talks to a model. The reader task owns the protocol,
/// so state kept between frames (such as an error that explains a later close) lives in it.
pub trait Protocol: Send + 'static {
    /// What the far end is called in logs.
    const PEER: &'static str;

    /// The host, for messages and the tap (never a secret).
    fn host(&self) -> &str;

    /// The upgrade request with this protocol's own headers; the runner adds the user agent.
    fn request(&self) -> Result<Request, SessionError>;

    /// The first frame: ask for a session set up as `setup`.
    fn opening(setup: &Setup) -> Message;

    /// Judges a frame read before the session is set up; shows `tap` what it decoded.
    fn setup_frame(&mut self, payload: &[u8], tap: Option<&dyn WireTap>) -> SetupStep;

    /// An app message on the wire.
    fn encode(message: ClientMessage) -> Message;

    /// The last frame the writer sends when the app closes the session.
    fn farewell() -> Message;

    /// Turns a frame of an open session into events; shows `tap` what it decoded. `closing`
    /// is true once the app has asked to close.
    fn frame(&mut self, payload: &[u8], closing: bool, tap: Option<&dyn WireTap>) -> Read;

    /// The socket ended (`code` is `None` when it just dropped).
    fn socket_closed(&mut self, code: Option<u16>, reason: String, by_client: bool) -> CloseInfo {
        close_info(code, reason, by_client)
    }

    /// The message for an upgrade refused with an HTTP status.
    fn rejected(&self, status: u16) -> String {
        describe_http_status(status, self.host())
    }

    /// The message for a failure that is neither a refusal nor a network error (TLS, protocol).
    fn unreachable(&self, error: tungstenite::Error) -> String;
}

/// Connects with `protocol` and asks for `setup`; every stage, from the host look-up to the
/// setup answer, must be done within `timeout`. `tap` sees the attempt, every app message
/// sent, and the close (also of a failed setup).
pub async fn run<P: Protocol>(
    protocol: P,
    setup: &Setup,
    timeout: Duration,
    tap: Option<Arc<dyn WireTap>>,
) -> Result<Session, SessionError> {
    let deadline = tokio::time::Instant::now() + timeout;
    run_until(protocol, setup, timeout, deadline, tap).await
}

/// [`run`] under a deadline that started earlier (the caller spent part of `timeout` getting
/// credentials); messages still name the whole `timeout`.
pub async fn run_until<P: Protocol>(
    mut protocol: P,
    setup: &Setup,
    timeout: Duration,
    deadline: tokio::time::Instant,
    tap: Option<Arc<dyn WireTap>>,
) -> Result<Session, SessionError> {
    install_crypto_provider();
    let host = protocol.host().to_owned();
    if let Some(tap) = &tap {
        tap.connecting(&host);
    }
    let mut request = protocol.request()?;
    request.headers_mut().insert(
        "user-agent",
        HeaderValue::from_static(concat!("livetalk/", env!("CARGO_PKG_VERSION"))),
    );
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_MESSAGE_BYTES))
        .max_frame_size(Some(MAX_MESSAGE_BYTES))
        .write_buffer_size(0);
    let target = Target::of(&request).map_err(SessionError::Connect)?;
    info!(%target, "connecting to the {}", P::PEER);
    let timed_out = |stage| SessionError::TimedOut(deadline_message(&target, stage, timeout));
    let (socket, _response) =
        dial(request, &target, config, deadline)
            .await
            .map_err(|e| match e {
                DialError::Deadline(stage) => timed_out(stage),
                DialError::Http(status) => SessionError::Rejected {
                    status,
                    message: protocol.rejected(status),
                },
                DialError::Failed { message, .. } => SessionError::Connect(message),
            })?;
    let (mut sink, mut stream) = socket.split();

    if let Some(tap) = &tap {
        tap.sent(&ClientMessage::Setup(Box::new(setup.clone())));
    }
    sink.send(P::opening(setup))
        .await
        .map_err(|e| connect_error(&protocol, &target, e))?;

    let wait = async {
        loop {
            let frame = match stream.next().await {
                Some(Ok(frame)) => frame,
                Some(Err(e)) => return Err(connect_error(&protocol, &target, e)),
                None => {
                    return Err(SessionError::Closed(protocol.socket_closed(
                        None,
                        String::new(),
                        false,
                    )));
                }
            };
            let step = match &frame {
                Message::Text(text) => protocol.setup_frame(text.as_bytes(), tap.as_deref()),
                Message::Binary(bytes) => protocol.setup_frame(bytes, tap.as_deref()),
                Message::Close(frame) => {
                    let (code, reason) = close_frame(frame, None);
                    return Err(SessionError::Closed(
                        protocol.socket_closed(code, reason, false),
                    ));
                }
                _ => SetupStep::Wait,
            };
            match step {
                SetupStep::Done { session_id } => return Ok(session_id),
                SetupStep::Wait => {}
                SetupStep::Failed(close) => return Err(SessionError::Closed(close)),
            }
        }
    };
    let waited = tokio::time::timeout_at(deadline, wait)
        .await
        .map_err(|_| timed_out(Stage::Setup))
        .and_then(|result| result);
    if let (Err(SessionError::Closed(close)), Some(tap)) = (&waited, &tap) {
        tap.closed(close);
    }
    let session_id = waited?;
    info!(host = %host, "{} session set up", P::PEER);

    let (handle, mut outbound) = SessionHandle::channel(OUTBOUND_CAPACITY);
    let (events_tx, events_rx) = mpsc::channel(EVENT_CAPACITY);
    let closing = Arc::new(AtomicBool::new(false));

    // Writer: owns the sink; sink sends never sit in a select! arm that could drop them.
    let writer_closing = closing.clone();
    let writer_tap = tap.clone();
    tokio::spawn(async move {
        while let Some(item) = outbound.recv().await {
            let (frame, last) = match item {
                Outbound::Message(message) => {
                    if let Some(tap) = &writer_tap {
                        tap.sent(&message);
                    }
                    (P::encode(*message), false)
                }
                Outbound::Close => {
                    writer_closing.store(true, Ordering::SeqCst);
                    (P::farewell(), true)
                }
            };
            if let Err(e) = sink.send(frame).await {
                debug!(
                    "send to the {} failed, the reader reports the close: {e}",
                    P::PEER
                );
                break;
            }
            if last {
                break;
            }
        }
    });

    // Reader: every frame becomes events until the socket or the protocol ends the session.
    tokio::spawn(async move {
        let events = events_tx;
        if events
            .send(SessionEvent::SetupComplete { session_id })
            .await
            .is_err()
        {
            return;
        }
        let close = loop {
            let frame = stream.next().await;
            let by_client = closing.load(Ordering::SeqCst);
            let read =
                match frame {
                    Some(Ok(Message::Text(text))) => {
                        protocol.frame(text.as_bytes(), by_client, tap.as_deref())
                    }
                    Some(Ok(Message::Binary(bytes))) => {
                        protocol.frame(&bytes, by_client, tap.as_deref())
                    }
                    Some(Ok(Message::Close(frame))) => {
                        let (code, reason) = close_frame(&frame, Some(1005));
                        Read::End(protocol.socket_closed(code, reason, by_client))
                    }
                    Some(Ok(_)) => continue,
                    Some(Err(e)) => {
                        debug!("{} read error: {e}", P::PEER);
                        Read::End(broken_frame(&e).unwrap_or_else(|| {
                            protocol.socket_closed(None, String::new(), by_client)
                        }))
                    }
                    None => Read::End(protocol.socket_closed(None, String::new(), by_client)),
                };
            match read {
                Read::Events(decoded) => {
                    for event in decoded {
                        if events.send(event).await.is_err() {
                            return;
                        }
                    }
                }
                Read::End(close) => break close,
            }
        };
        // A bridge's close message is its own text, of any length.
        info!(
            code = ?close.code,
            "{} session closed: {}",
            P::PEER,
            crate::echo::bounded(&close.message, crate::echo::SUMMARY)
        );
        if let Some(tap) = &tap {
            tap.closed(&close);
        }
        let _ = events.send(SessionEvent::Closed(close)).await;
    });

    Ok(Session {
        handle,
        events: events_rx,
    })
}

/// A close frame's code and its reason; `code` stands in when the frame carried none.
fn close_frame(frame: &Option<CloseFrame>, code: Option<u16>) -> (Option<u16>, String) {
    match frame {
        Some(frame) => (Some(u16::from(frame.code)), frame.reason.to_string()),
        None => (code, String::new()),
    }
}

/// What a frame the far end should never have sent amounts to: the end of the connection,
/// with the code a receiver closes with for it, said plainly, and never retried (the server
/// would send the same again). `None` for a connection that merely dropped.
fn broken_frame(error: &tungstenite::Error) -> Option<CloseInfo> {
    use tungstenite::error::CapacityError;
    let (code, message) = match error {
        tungstenite::Error::Capacity(CapacityError::MessageTooLong { size, max_size }) => (
            1009,
            format!(
                "The server sent a message of {}, over the {} livetalk accepts (1009). The connection was closed; not retrying, as it would happen again.",
                crate::echo::human_size(*size as u64),
                crate::echo::human_size(*max_size as u64)
            ),
        ),
        tungstenite::Error::Utf8(_) => (
            1007,
            "The server sent a text frame that is not valid UTF-8 (1007). The connection was closed; not retrying."
                .to_owned(),
        ),
        // A reset is a connection that dropped, not a broken frame.
        tungstenite::Error::Protocol(
            tungstenite::error::ProtocolError::ResetWithoutClosingHandshake
            | tungstenite::error::ProtocolError::SendAfterClosing
            | tungstenite::error::ProtocolError::ReceivedAfterClosing,
        ) => return None,
        tungstenite::Error::Protocol(violation) => (
            1002,
            format!(
                "The server broke the WebSocket protocol: {violation} (1002). The connection was closed; not retrying."
            ),
        ),
        _ => return None,
    };
    Some(CloseInfo::failed(Some(code), message))
}

/// A WebSocket close as the Live API means it.
pub(crate) fn close_info(
    code: Option<u16>,
    reason: String,
    initiated_by_client: bool,
) -> CloseInfo {
    let message = if initiated_by_client {
        "Session ended.".to_owned()
    } else {
        match code {
            Some(1005) => "The server closed the connection without a status code.".to_owned(),
            Some(code) => describe_close(code, &reason),
            None => describe_close(1006, ""),
        }
    };
    CloseInfo {
        code,
        reason,
        message,
        initiated_by_client,
    }
}

fn connect_error<P: Protocol>(
    protocol: &P,
    target: &Target,
    error: tungstenite::Error,
) -> SessionError {
    match error {
        tungstenite::Error::Http(response) => {
            let status = response.status().as_u16();
            SessionError::Rejected {
                status,
                message: protocol.rejected(status),
            }
        }
        tungstenite::Error::Io(e) => {
            SessionError::Connect(describe_io_error(&e, &target.to_string()))
        }
        other => SessionError::Connect(protocol.unreachable(other)),
    }
}

/// A far end on loopback for the runner's tests.
#[cfg(test)]
pub(crate) mod loopback {
    use tokio::net::{TcpListener, TcpStream};
    use tokio::task::JoinHandle;
    use tokio_tungstenite::WebSocketStream;

    pub type Far = WebSocketStream<TcpStream>;

    /// A `ws://` URL and the socket of the one connection accepted on it.
    pub async fn listen() -> (String, JoinHandle<Far>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}", listener.local_addr().unwrap());
        let accepted = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            tokio_tungstenite::accept_async(stream).await.unwrap()
        });
        (url, accepted)
    }
}

#[cfg(test)]
mod tests {
    use super::loopback::{Far, listen};
    use super::*;
    use crate::bridge::client as bridge;
    use crate::bridge::protocol::{BridgeMessage, SetupCompleteDetails};
    use crate::live::endpoint::{ApiVersion, Endpoint};
    use crate::live::session::{self, SessionOptions};
    use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

    const WAIT: Duration = Duration::from_secs(10);

    /// Each protocol the runner serves, as the app connects with it.
    #[derive(Clone, Copy, Debug)]
    enum Peer {
        Live,
        Bridge,
    }

    const PEERS: [Peer; 2] = [Peer::Live, Peer::Bridge];

    impl Peer {
        async fn connect(
            self,
            url: String,
            connect_timeout: Duration,
        ) -> Result<Session, SessionError> {
            let setup = Setup {
                model: "models/m".into(),
                ..Setup::default()
            };
            match self {
                Peer::Live => {
                    session::connect(SessionOptions {
                        endpoint: Endpoint::parse(&url, ApiVersion::V1).unwrap(),
                        auth: session::Auth::None,
                        setup,
                        connect_timeout,
                    })
                    .await
                }
                Peer::Bridge => bridge::connect(&url, &setup, connect_timeout).await,
            }
        }

        /// The far end's answer to a good setup.
        fn set_up(self) -> Message {
            match self {
                Peer::Live => Message::text(r#"{"setupComplete": {}}"#),
                Peer::Bridge => Message::text(
                    BridgeMessage::SetupComplete(SetupCompleteDetails {
                        success: true,
                        error: None,
                    })
                    .encode(),
                ),
            }
        }

        /// Connects and hands back the far end once it has read the opening frame.
        async fn open(
            self,
            connect_timeout: Duration,
        ) -> (
            tokio::task::JoinHandle<Result<Session, SessionError>>,
            Far,
            String,
        ) {
            let (connecting, mut far) = self.upgraded(connect_timeout).await;
            let opening = next_text(&mut far).await;
            (connecting, far, opening)
        }

        /// Connects and hands back the far end once the WebSocket upgrade is done, before it
        /// reads anything: a far end that keeps quiet.
        async fn upgraded(
            self,
            connect_timeout: Duration,
        ) -> (tokio::task::JoinHandle<Result<Session, SessionError>>, Far) {
            let (url, accepted) = listen().await;
            let connecting = tokio::spawn(self.connect(url, connect_timeout));
            let far = tokio::time::timeout(WAIT, accepted).await.unwrap().unwrap();
            (connecting, far)
        }
    }

    async fn next_text(far: &mut Far) -> String {
        match tokio::time::timeout(WAIT, far.next()).await.unwrap() {
            Some(Ok(Message::Text(text))) => text.to_string(),
            other => panic!("expected a text frame, got {other:?}"),
        }
    }

    async fn joined(
        connecting: tokio::task::JoinHandle<Result<Session, SessionError>>,
    ) -> Result<Session, SessionError> {
        tokio::time::timeout(WAIT, connecting)
            .await
            .unwrap()
            .unwrap()
    }

    #[tokio::test]
    async fn the_opening_frame_asks_for_the_setup_in_each_protocols_words() {
        for peer in PEERS {
            let (_connecting, _far, opening) = peer.open(WAIT).await;
            let expected = match peer {
                Peer::Live => r#"{"setup":{"model":"models/m""#,
                Peer::Bridge => r#""type":"CONNECT_GEMINI""#,
            };
            assert!(opening.contains(expected), "{peer:?}: {opening}");
            assert!(opening.contains("models/m"), "{peer:?}: {opening}");
        }
    }

    #[tokio::test]
    async fn a_setup_that_is_never_answered_times_out_naming_host_port_and_stage() {
        for peer in PEERS {
            // Long enough for the upgrade on a loaded machine; the far end never reads (had it
            // to read the setup first, a client already gone would reset it under the test).
            let timeout = Duration::from_secs(1);
            let (connecting, far) = peer.upgraded(timeout).await;
            let port = far.get_ref().local_addr().unwrap().port();
            let Err(SessionError::TimedOut(message)) = joined(connecting).await else {
                panic!("{peer:?}: a silent far end must not set a session up");
            };
            assert!(
                message.starts_with(&format!(
                    "No answer from 127.0.0.1:{port} within 1 s (waiting for the session to be set up)."
                )),
                "{peer:?}: {message}"
            );
        }
    }

    /// A server that accepts TCP and then says nothing, whatever is asked of it.
    async fn mute_server() -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let held = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                open.push(stream);
            }
        });
        (address, held)
    }

    #[tokio::test]
    async fn every_stage_is_under_the_one_deadline() {
        let (address, _held) = mute_server().await;
        let timeout = Duration::from_millis(300);
        for (url, stage) in [
            (
                format!("ws://{address}"),
                "waiting for the WebSocket upgrade",
            ),
            (
                format!("wss://localhost:{}", address.port()),
                "in the TLS handshake",
            ),
        ] {
            for peer in PEERS {
                let started = std::time::Instant::now();
                let result = tokio::time::timeout(WAIT, peer.connect(url.clone(), timeout))
                    .await
                    .expect("the deadline holds");
                let Err(SessionError::TimedOut(message)) = result else {
                    panic!("{peer:?} {url}: expected a timeout");
                };
                assert!(started.elapsed() < Duration::from_secs(2), "{peer:?} {url}");
                assert!(
                    message.contains(&format!(":{} within 0.3 s", address.port())),
                    "{message}"
                );
                assert!(message.contains(stage), "{peer:?} {url}: {message}");
            }
        }
    }

    #[tokio::test]
    async fn tls_to_a_plain_server_and_a_closed_port_say_what_is_likely_wrong() {
        // A plain server (a TLS hello is no HTTP request), asked for TLS.
        for peer in PEERS {
            let (address, plain) = {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let address = listener.local_addr().unwrap();
                let plain = tokio::spawn(async move {
                    let (stream, _) = listener.accept().await.unwrap();
                    // Refuses what is not an upgrade request, as WebSocket servers do.
                    let _ = tokio_tungstenite::accept_async(stream).await;
                });
                (address, plain)
            };
            let tls_url = format!("wss://localhost:{}", address.port());
            let Err(SessionError::Connect(message)) = peer.connect(tls_url.clone(), WAIT).await
            else {
                panic!("{peer:?}: TLS to a plain server must fail");
            };
            assert!(
                message.contains("use ws:// instead of wss://"),
                "{peer:?}: {message}"
            );
            plain.await.unwrap();
        }
        // Nobody listening: the port is named.
        let port = {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            probe.local_addr().unwrap().port()
        };
        for peer in PEERS {
            let Err(SessionError::Connect(message)) =
                peer.connect(format!("ws://127.0.0.1:{port}"), WAIT).await
            else {
                panic!("{peer:?}: a closed port must fail");
            };
            assert!(
                message.contains(&format!("127.0.0.1:{port}: connection refused")),
                "{peer:?}: {message}"
            );
        }
    }

    #[tokio::test]
    async fn a_close_during_setup_is_a_close_info_that_says_why() {
        for peer in PEERS {
            let (connecting, mut far, _) = peer.open(WAIT).await;
            far.close(Some(CloseFrame {
                code: CloseCode::Policy,
                reason: "models/m is not found".into(),
            }))
            .await
            .unwrap();
            let Err(SessionError::Closed(close)) = joined(connecting).await else {
                panic!("{peer:?}: expected a close during setup");
            };
            assert_eq!(close.code, Some(1008), "{peer:?}");
            assert_eq!(close.reason, "models/m is not found", "{peer:?}");
            assert!(!close.initiated_by_client, "{peer:?}");
            assert!(
                close.message.contains("The model is not available (1008)"),
                "{peer:?}: {close:?}"
            );
        }
    }

    #[tokio::test]
    async fn an_open_session_sends_app_messages_and_ends_with_the_apps_close() {
        for peer in PEERS {
            let (connecting, mut far, _) = peer.open(WAIT).await;
            far.send(peer.set_up()).await.unwrap();
            let mut session = joined(connecting).await.unwrap();
            assert_eq!(
                session.events.recv().await,
                Some(SessionEvent::SetupComplete { session_id: None }),
                "{peer:?}"
            );

            session.handle.send_user_text("hello").await.unwrap();
            let sent = next_text(&mut far).await;
            assert!(sent.contains(r#""text":"hello""#), "{peer:?}: {sent}");

            session.handle.close().await;
            // The far end hears the farewell, then (as both far ends do) closes the socket.
            match tokio::time::timeout(WAIT, far.next()).await.unwrap() {
                Some(Ok(Message::Close(Some(frame)))) if matches!(peer, Peer::Live) => {
                    assert_eq!(u16::from(frame.code), 1000, "a normal closure, not 1005");
                    assert!(!frame.reason.is_empty());
                }
                Some(Ok(Message::Text(text)))
                    if matches!(peer, Peer::Bridge) && text.contains("DISCONNECT_GEMINI") =>
                {
                    far.close(None).await.unwrap();
                }
                other => panic!("{peer:?}: expected the farewell, got {other:?}"),
            }
            while let Some(Ok(_)) = tokio::time::timeout(WAIT, far.next()).await.unwrap() {}

            let Some(SessionEvent::Closed(close)) =
                tokio::time::timeout(WAIT, session.events.recv())
                    .await
                    .unwrap()
            else {
                panic!("{peer:?}: the stream must end with Closed");
            };
            assert!(close.initiated_by_client, "{peer:?}: {close:?}");
            assert_eq!(close.message, "Session ended.", "{peer:?}");
            assert_eq!(
                tokio::time::timeout(WAIT, session.events.recv())
                    .await
                    .unwrap(),
                None,
                "{peer:?}"
            );
        }
    }
}
