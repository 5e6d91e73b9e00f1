//! The one connection runner behind every session: upgrade, opening frame, the setup wait under
//! a timeout, then a writer and a reader task. A [`Protocol`] (the Live API, or a bridge) says
//! what its frames mean; everything else is the same for both.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::handshake::client::Request;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::{self, Message};
use tracing::{Instrument as _, debug, info, warn};

use super::address::Address;
use super::budget::{Held, InputBudget, Refused};
use super::close::{describe_close, describe_http_status, describe_io_error};
use super::dial::{DialError, Stage, deadline_message, dial};
use super::events::{CloseInfo, Inbound, ServerEvent};
use super::wire::{
    ClientContent, ClientMessage, FunctionResponse, ServerMessage, Setup, ToolResponse,
};

/// Largest server message we accept (the service's audio frames are far smaller).
pub const MAX_MESSAGE_BYTES: usize = 32 << 20;
/// Outbound messages buffered before `send` waits.
const OUTBOUND_CAPACITY: usize = 64;
/// Frames buffered before the reader stops reading the socket.
const EVENT_CAPACITY: usize = 512;

/// Why a connection could not be opened. `Display` is the human message; the variant says
/// what a caller can do about it (retry a network failure or a timeout, not a refused key).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnectError {
    /// The server could not be reached (refused, DNS, TLS, the proxy).
    #[error("{0}")]
    Connect(String),
    /// The server answered the upgrade with an HTTP error.
    #[error("{message}")]
    Rejected {
        /// The HTTP status (401 for a bad key, 429 for rate limiting, …).
        status: u16,
        /// What it means, naming the host.
        message: String,
    },
    /// The connect deadline ran out (the message names the stage it ran out in).
    #[error("{0}")]
    TimedOut(String),
    /// The server closed the connection during setup.
    #[error("{}", .0.message)]
    Closed(CloseInfo),
}

/// What a [`ConnectionHandle`] asks of the connection behind it (the runner's writer task, or
/// anything else that stands behind a handle, such as a relay made with
/// [`ConnectionHandle::channel`]).
#[derive(Debug)]
pub enum Outbound {
    /// Send this message.
    Message(Box<ClientMessage>),
    /// Send this text frame as it is: one of the protocol's own that stands for no Live
    /// message (a bridge's WebRTC signalling). The wire tap does not see it.
    Frame(String),
    /// Close cleanly.
    Close,
}

/// Sends client messages on one open connection (see [`Outbox`]). Cheap to clone; the
/// connection's writer task sends in the order the messages were handed over.
#[derive(Clone)]
pub struct ConnectionHandle {
    outbound: mpsc::Sender<Outbound>,
}

/// The connection is closed; nothing more can be sent on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the session is closed")]
pub struct ConnectionClosed;

impl ConnectionHandle {
    /// A handle whose requests arrive on the returned receiver (the writer task's end, or a
    /// relay's that passes them on to another connection's handle after a look at them).
    pub fn channel(capacity: usize) -> (ConnectionHandle, mpsc::Receiver<Outbound>) {
        let (outbound, requests) = mpsc::channel(capacity);
        (ConnectionHandle { outbound }, requests)
    }
}

impl ConnectionHandle {
    /// Sends a text frame of the protocol's own as it is (see [`Outbound::Frame`]).
    pub async fn send_frame(&self, text: String) -> Result<(), ConnectionClosed> {
        self.outbound
            .send(Outbound::Frame(text))
            .await
            .map_err(|_| ConnectionClosed)
    }
}

impl Outbox for ConnectionHandle {
    type Closed = ConnectionClosed;

    async fn send(&self, message: ClientMessage) -> Result<(), ConnectionClosed> {
        self.outbound
            .send(Outbound::Message(Box::new(message)))
            .await
            .map_err(|_| ConnectionClosed)
    }

    /// Starts a clean close; the event stream ends with `Closed` once the server agrees.
    async fn close(&self) {
        let _ = self.outbound.send(Outbound::Close).await;
    }
}

/// Sends client messages: a connection's [`ConnectionHandle`], or a session's
/// [`SessionHandle`](crate::session::SessionHandle), which sends on whichever connection is
/// current. The shorthands for what an app sends most are written here once for both.
pub trait Outbox {
    /// What a send fails with once nothing more can be sent.
    type Closed;

    /// Sends one client message.
    fn send(&self, message: ClientMessage)
    -> impl Future<Output = Result<(), Self::Closed>> + Send;

    /// Ends cleanly; the event stream ends with `Closed`.
    fn close(&self) -> impl Future<Output = ()> + Send;

    /// Sends a complete user text turn (interrupts any model output, per the protocol).
    fn send_user_text(&self, text: &str) -> impl Future<Output = Result<(), Self::Closed>> + Send {
        self.send(ClientMessage::ClientContent(ClientContent::user_text(text)))
    }

    /// Answers tool calls, each response carrying the `id` of the call it answers.
    fn send_tool_responses(
        &self,
        responses: Vec<FunctionResponse>,
    ) -> impl Future<Output = Result<(), Self::Closed>> + Send {
        self.send(ClientMessage::ToolResponse(ToolResponse {
            function_responses: responses,
        }))
    }
}

/// An open connection: the handle to send with and what the server says. Dropping both ends
/// the connection's tasks; [`Outbox::close`] ends it cleanly first.
pub struct Connection {
    /// Sends on this connection.
    pub handle: ConnectionHandle,
    /// What the server said, frame by frame, in order: [`ServerEvent::SetupComplete`] (with
    /// the session id when the server gives one) first, [`ServerEvent::Closed`] last, each on
    /// its own.
    pub inbound: mpsc::Receiver<Inbound>,
}

/// Sees what only the connection knows: each attempt, the handshake, every frame sent, the
/// close. It is the one place outbound frames pass (every consumer of them reads it); what the
/// server says once the session is set up reaches consumers as [`Inbound`] values instead, in
/// order, so nothing has to join two streams back together. Called from the runner's tasks: it
/// must be quick and must never block on the network.
pub trait WireTap: Send + Sync {
    /// A connection attempt to `host` starts (reconnects included).
    fn connecting(&self, host: &str);
    /// A client message, just before it is written to the socket as `bytes` bytes; shared, so
    /// a consumer can keep it without a copy.
    fn sent(&self, message: &Arc<ClientMessage>, bytes: usize);
    /// A server frame of `bytes` bytes read before `setupComplete` (the setup answer
    /// included), as decoded.
    fn handshake(&self, frame: TappedFrame<'_>, bytes: usize);
    /// The connection ended (also when setup failed).
    fn closed(&self, close: &CloseInfo);
}

/// A server frame as the tap sees it.
pub enum TappedFrame<'a> {
    /// A message, as decoded.
    Message(&'a ServerMessage),
    /// A frame that produced no message (malformed or unknown), with the reason logged.
    Skipped(&'a str),
}

/// What a frame read while waiting for the setup answer amounts to.
pub enum SetupStep {
    /// The session is set up; its event stream starts with `SetupComplete` carrying this id.
    Done {
        /// The session's id, when the far end gives one.
        session_id: Option<String>,
    },
    /// Not the answer; keep waiting.
    Wait,
    /// The far end refused the setup; the connection ends with this.
    Failed(CloseInfo),
}

/// What a frame read from an open connection amounts to.
pub enum Read {
    /// The frame, decoded, to pass on.
    Inbound(Inbound),
    /// The connection is over (the socket may still be open).
    End(CloseInfo),
}

impl Read {
    /// Notes the size of the frame read (the runner knows it; the protocol need not).
    fn sized(self, bytes: usize) -> Read {
        match self {
            Read::Inbound(inbound) => Read::Inbound(inbound.sized(bytes)),
            end => end,
        }
    }
}

/// Reads `payload` with `read` once the process's input budget holds what it costs (its bytes
/// were held while it was read: `reserved`); the value read carries the hold until its last
/// copy is dropped. A frame the budget refuses is skipped, saying why, and the connection goes
/// on.
async fn budgeted(
    payload: &[u8],
    reserved: Option<Held>,
    read: impl FnOnce(&[u8]) -> Read,
) -> Read {
    match InputBudget::process()
        .hold_after(payload, &mut { reserved })
        .await
    {
        Ok(held) => match read(payload) {
            Read::Inbound(inbound) => Read::Inbound(inbound.holding(held)),
            end => end,
        },
        Err(refused) => {
            warn!("skipped a frame: {refused}");
            Read::Inbound(Inbound::news(ServerEvent::FrameSkipped {
                reason: refused.to_string(),
            }))
        }
    }
}

/// What differs between the ways livetalk talks to a model. The reader task owns the protocol,
/// so state kept between frames (such as an error that explains a later close) lives in it.
pub trait Protocol: Send + 'static {
    /// What the far end is called in logs.
    const PEER: &'static str;

    /// The host, for messages and the tap (never a secret).
    fn host(&self) -> &str;

    /// The upgrade request with this protocol's own headers; the runner adds the user agent.
    fn request(&self) -> Result<Request, ConnectError>;

    /// The first frame: ask for a session set up as `setup`.
    fn opening(setup: &Setup) -> Message;

    /// Judges a frame read before the session is set up; shows `tap` what it decoded.
    fn setup_frame(&mut self, payload: &[u8], tap: Option<&dyn WireTap>) -> SetupStep;

    /// An app message on the wire.
    fn encode(message: &ClientMessage) -> Message;

    /// The last frame the writer sends when the app closes the connection.
    fn farewell() -> Message;

    /// Decodes a frame of an open connection. `closing` is true once the app has asked to
    /// close.
    fn frame(&mut self, payload: &[u8], closing: bool) -> Read;

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

/// A WebSocket opened by [`dial_socket`]: plain or TLS, its frames paid for from the process's
/// input budget before tungstenite reads them ([`Gate::take`](crate::budget::Gate::take) hands
/// over what the last message held).
pub type RawSocket = tokio_tungstenite::WebSocketStream<
    crate::budget::Gated<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
>;

/// Opens a WebSocket to `request`'s URL with its headers as given, through the proxy and the
/// trust store a connection uses, every stage under `timeout`, and sends nothing: for whoever
/// relays another program's frames (`livetalk proxy`). A server that answers the upgrade with
/// an HTTP error is [`ConnectError::Rejected`] with its status. `max_message` bounds one
/// message (and frame) read.
pub async fn dial_socket(
    request: Request,
    max_message: usize,
    timeout: Duration,
) -> Result<(RawSocket, crate::budget::Gate), ConnectError> {
    super::network::install_crypto_provider();
    let deadline = tokio::time::Instant::now() + timeout;
    let config = WebSocketConfig::default()
        .max_message_size(Some(max_message))
        .max_frame_size(Some(max_message))
        .write_buffer_size(0);
    let target = Address::of(&request).map_err(ConnectError::Connect)?;
    let (socket, _response, gate) =
        dial(request, &target, config, deadline)
            .await
            .map_err(|e| match e {
                DialError::Deadline(stage) => {
                    ConnectError::TimedOut(deadline_message(&target, stage, timeout))
                }
                DialError::Http(status) => ConnectError::Rejected {
                    status,
                    message: describe_http_status(status, &target.to_string()),
                },
                DialError::Failed(message) => ConnectError::Connect(message),
            })?;
    Ok((socket, gate))
}

/// Connects with `protocol` and asks for `setup`; every stage, from the host look-up to the
/// setup answer, must be done within `timeout`. `tap` sees the attempt, every app message
/// sent, and the close (also of a failed setup).
pub async fn run<P: Protocol>(
    protocol: P,
    setup: &Setup,
    timeout: Duration,
    tap: Option<Arc<dyn WireTap>>,
) -> Result<Connection, ConnectError> {
    let deadline = tokio::time::Instant::now() + timeout;
    run_until(protocol, setup, timeout, deadline, tap).await
}

/// [`run`] under a deadline that started earlier (the caller spent part of `timeout` getting
/// credentials); messages still name the whole `timeout`.
pub(crate) async fn run_until<P: Protocol>(
    mut protocol: P,
    setup: &Setup,
    timeout: Duration,
    deadline: tokio::time::Instant,
    tap: Option<Arc<dyn WireTap>>,
) -> Result<Connection, ConnectError> {
    super::network::install_crypto_provider();
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
    let target = Address::of(&request).map_err(ConnectError::Connect)?;
    info!(address = %target, "connecting to the {}", P::PEER);
    let timed_out = |stage| ConnectError::TimedOut(deadline_message(&target, stage, timeout));
    let (socket, _response, gate) =
        dial(request, &target, config, deadline)
            .await
            .map_err(|e| match e {
                DialError::Deadline(stage) => timed_out(stage),
                DialError::Http(status) => ConnectError::Rejected {
                    status,
                    message: protocol.rejected(status),
                },
                DialError::Failed(message) => ConnectError::Connect(message),
            })?;
    let (mut sink, mut stream) = socket.split();

    let opening = P::opening(setup);
    if let Some(tap) = &tap {
        tap.sent(
            &Arc::new(ClientMessage::Setup(Box::new(setup.clone()))),
            opening.len(),
        );
    }
    sink.send(opening)
        .await
        .map_err(|e| connect_error(&protocol, &target, e))?;

    let wait = async {
        loop {
            let frame = stream.next().await;
            // What a message's bytes held while they were read, until it has been read.
            let _held = matches!(frame, Some(Ok(Message::Text(_) | Message::Binary(_))))
                .then(|| gate.take());
            let frame = match frame {
                Some(Ok(frame)) => frame,
                Some(Err(e)) => return Err(connect_error(&protocol, &target, e)),
                None => {
                    return Err(ConnectError::Closed(protocol.socket_closed(
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
                    return Err(ConnectError::Closed(
                        protocol.socket_closed(code, reason, false),
                    ));
                }
                _ => SetupStep::Wait,
            };
            match step {
                SetupStep::Done { session_id } => return Ok(session_id),
                SetupStep::Wait => {}
                SetupStep::Failed(close) => return Err(ConnectError::Closed(close)),
            }
        }
    };
    let waited = tokio::time::timeout_at(deadline, wait)
        .await
        .map_err(|_| timed_out(Stage::Setup))
        .and_then(|result| result);
    if let (Err(ConnectError::Closed(close)), Some(tap)) = (&waited, &tap) {
        tap.closed(close);
    }
    let session_id = waited?;
    info!(host = %host, "{} session set up", P::PEER);

    let (handle, mut outbound) = ConnectionHandle::channel(OUTBOUND_CAPACITY);
    let (inbound_tx, inbound_rx) = mpsc::channel(EVENT_CAPACITY);
    let closing = Arc::new(AtomicBool::new(false));

    // Writer: owns the sink; sink sends never sit in a select! arm that could drop them. Both
    // tasks log in the span of whoever opened the connection (a bridge's session).
    let writer_closing = closing.clone();
    let writer_tap = tap.clone();
    tokio::spawn(
        async move {
            while let Some(item) = outbound.recv().await {
                let (frame, last) = match item {
                    Outbound::Message(message) => {
                        let frame = P::encode(&message);
                        if let Some(tap) = &writer_tap {
                            tap.sent(&Arc::from(message), frame.len());
                        }
                        (frame, false)
                    }
                    Outbound::Frame(text) => (Message::text(text), false),
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
        }
        .in_current_span(),
    );

    // Reader: every frame is decoded once and passed on until the socket or the protocol ends
    // the session.
    tokio::spawn(
        async move {
            let inbound = inbound_tx;
            if inbound
                .send(Inbound::news(ServerEvent::SetupComplete { session_id }))
                .await
                .is_err()
            {
                return;
            }
            let close = loop {
                let frame = stream.next().await;
                let by_client = closing.load(Ordering::SeqCst);
                // What the frame costs is held from the process's input budget until its value
                // has been dealt with (see `budget`).
                let read = match frame {
                    Some(Ok(Message::Text(text))) => {
                        budgeted(text.as_bytes(), gate.take(), |payload| {
                            protocol.frame(payload, by_client)
                        })
                        .await
                        .sized(text.len())
                    }
                    Some(Ok(Message::Binary(bytes))) => budgeted(&bytes, gate.take(), |payload| {
                        protocol.frame(payload, by_client)
                    })
                    .await
                    .sized(bytes.len()),
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
                    Read::Inbound(frame) => {
                        if frame.events.is_empty() && frame.message.is_none() {
                            continue;
                        }
                        if inbound.send(frame).await.is_err() {
                            return;
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
                crate::excerpt::bounded(&close.message, crate::excerpt::SUMMARY)
            );
            if let Some(tap) = &tap {
                tap.closed(&close);
            }
            let _ = inbound
                .send(Inbound::news(ServerEvent::Closed(close)))
                .await;
        }
        .in_current_span(),
    );

    Ok(Connection {
        handle,
        inbound: inbound_rx,
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
                crate::excerpt::human_size(*size as u64),
                crate::excerpt::human_size(*max_size as u64)
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
        // The app took in nothing of what was read for that long: reading on would hold more.
        tungstenite::Error::Io(e) => match Refused::of_read_error(e) {
            Some(refused) => (
                1013,
                crate::excerpt::sentence(&format!(
                    "livetalk stopped reading the server: {refused}. The connection was closed"
                )),
            ),
            None => return None,
        },
        _ => return None,
    };
    Some(CloseInfo::failed(Some(code), message))
}

/// A WebSocket close as the Live API means it.
pub fn close_info(code: Option<u16>, reason: String, initiated_by_client: bool) -> CloseInfo {
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
    target: &Address,
    error: tungstenite::Error,
) -> ConnectError {
    match error {
        tungstenite::Error::Http(response) => {
            let status = response.status().as_u16();
            ConnectError::Rejected {
                status,
                message: protocol.rejected(status),
            }
        }
        tungstenite::Error::Io(e) => {
            ConnectError::Connect(describe_io_error(&e, &target.to_string()))
        }
        // Sending the setup: livetalk's own message was too large to send.
        tungstenite::Error::Capacity(tungstenite::error::CapacityError::MessageTooLong {
            size,
            max_size,
        }) => ConnectError::Connect(format!(
            "livetalk did not send its setup to {target}: at {} it is over the {} a message may be (a system instruction or tool declarations that large cannot be sent).",
            crate::excerpt::human_size(size as u64),
            crate::excerpt::human_size(max_size as u64)
        )),
        other => ConnectError::Connect(protocol.unreachable(other)),
    }
}
