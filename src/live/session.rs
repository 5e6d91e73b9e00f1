//! A Live API connection: upgrade, `setup` → `setupComplete`, then a reader and a writer task
//! that turn frames into one continuous stream of [`SessionEvent`]s.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{self, Message};
use tracing::{debug, info, warn};

use super::close::{describe_close, describe_http_status, describe_io_error};
use super::codec::{DecodedServerFrame, decode_server, encode_client};
use super::endpoint::{ApiKey, Endpoint};
use super::events::{CloseInfo, SessionEvent, events_from};
use super::wire::{
    ClientContent, ClientMessage, FunctionResponse, ServerMessage, Setup, ToolResponse,
};

/// Largest server message we accept (the service's audio frames are far smaller).
pub const MAX_MESSAGE_BYTES: usize = 32 << 20;
/// Outbound messages buffered before `send` waits.
const OUTBOUND_CAPACITY: usize = 64;
/// Events buffered before the reader stops reading the socket.
const EVENT_CAPACITY: usize = 512;

/// What to connect to and how to set the session up.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    pub endpoint: Endpoint,
    pub api_key: Option<ApiKey>,
    pub setup: Setup,
    /// How long to wait for `setupComplete`.
    pub setup_timeout: Duration,
}

/// Why a session could not be started. `Display` is the human message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// The server could not be reached (refused, DNS, TLS).
    #[error("{0}")]
    Connect(String),
    /// The server answered the upgrade with an HTTP error.
    #[error("{message}")]
    Rejected { status: u16, message: String },
    /// No `setupComplete` in time.
    #[error("No setupComplete from {host} within {} s; the server may be overloaded or not a Live API endpoint.", .timeout.as_secs_f32())]
    SetupTimeout { host: String, timeout: Duration },
    /// The server closed the connection during setup.
    #[error("{}", .0.message)]
    Closed(CloseInfo),
}

/// What a [`SessionHandle`] asks of the connection behind it. Public so that another
/// transport (the bridge client) can stand behind a handle.
pub enum Outbound {
    Message(Box<ClientMessage>),
    Close,
}

/// Sends client messages on an open session. Cheap to clone.
#[derive(Clone)]
pub struct SessionHandle {
    outbound: mpsc::Sender<Outbound>,
}

/// The session is closed; nothing more can be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the session is closed")]
pub struct SessionClosed;

impl SessionHandle {
    /// A handle whose requests arrive on the returned receiver instead of a Live socket.
    pub fn channel(capacity: usize) -> (SessionHandle, mpsc::Receiver<Outbound>) {
        let (outbound, requests) = mpsc::channel(capacity);
        (SessionHandle { outbound }, requests)
    }

    pub async fn send(&self, message: ClientMessage) -> Result<(), SessionClosed> {
        self.outbound
            .send(Outbound::Message(Box::new(message)))
            .await
            .map_err(|_| SessionClosed)
    }

    /// Sends a complete user text turn (interrupts any model output, per the protocol).
    pub async fn send_user_text(&self, text: &str) -> Result<(), SessionClosed> {
        self.send(ClientMessage::ClientContent(ClientContent::user_text(text)))
            .await
    }

    pub async fn send_tool_responses(
        &self,
        responses: Vec<FunctionResponse>,
    ) -> Result<(), SessionClosed> {
        self.send(ClientMessage::ToolResponse(ToolResponse {
            function_responses: responses,
        }))
        .await
    }

    /// Starts a clean close; the event stream ends with `Closed` once the server agrees.
    pub async fn close(&self) {
        let _ = self.outbound.send(Outbound::Close).await;
    }
}

/// An open session: the handle to send with and the event stream to read (which starts with
/// `SetupComplete`, carrying the session id when the server gives one).
pub struct Session {
    pub handle: SessionHandle,
    pub events: mpsc::Receiver<SessionEvent>,
}

/// Observes every frame of a session in both directions (the recorder's wire tap). Called
/// from the reader and writer tasks, so it must be quick and must never block on the network.
pub trait WireTap: Send + Sync {
    /// A connection attempt to `host` starts (reconnects included).
    fn connecting(&self, host: &str);
    /// A client message, just before it is written to the socket.
    fn sent(&self, message: &ClientMessage);
    /// A server frame as decoded; `during_setup` is true until `setupComplete` has arrived.
    fn received(&self, frame: TappedFrame<'_>, during_setup: bool);
    /// The connection ended (also when setup failed).
    fn closed(&self, close: &CloseInfo);
}

/// A server frame as the tap sees it.
pub enum TappedFrame<'a> {
    Message(&'a ServerMessage),
    /// A frame that produced no message (malformed or unknown), with the reason logged.
    Skipped(&'a str),
}

/// rustls needs one process-wide crypto provider; we use ring (no cmake, no OpenSSL).
pub fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Opens the WebSocket, sends `setup` and waits for `setupComplete`.
pub async fn connect(options: SessionOptions) -> Result<Session, SessionError> {
    connect_tapped(options, None).await
}

/// [`connect`], with every frame both ways also shown to `tap`.
pub async fn connect_tapped(
    options: SessionOptions,
    tap: Option<Arc<dyn WireTap>>,
) -> Result<Session, SessionError> {
    install_crypto_provider();
    let host = options.endpoint.host().to_owned();
    if let Some(tap) = &tap {
        tap.connecting(&host);
    }
    let redact = |text: String| match &options.api_key {
        Some(key) => key.redact(&text),
        None => text,
    };

    let mut request = options
        .endpoint
        .url()
        .into_client_request()
        .map_err(|e| SessionError::Connect(redact(format!("Invalid endpoint URL: {e}"))))?;
    let headers = request.headers_mut();
    if let Some(key) = &options.api_key {
        let mut value = HeaderValue::from_str(key.expose()).map_err(|_| {
            SessionError::Connect("The API key contains characters not allowed in a header.".into())
        })?;
        value.set_sensitive(true);
        headers.insert("x-goog-api-key", value);
    }
    headers.insert(
        "user-agent",
        HeaderValue::from_static(concat!("livetalk/", env!("CARGO_PKG_VERSION"))),
    );

    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_MESSAGE_BYTES))
        .max_frame_size(Some(MAX_MESSAGE_BYTES))
        .write_buffer_size(0);
    info!(endpoint = %options.endpoint.host(), "connecting");
    let (socket, _response) =
        tokio_tungstenite::connect_async_tls_with_config(request, Some(config), true, None)
            .await
            .map_err(|e| connect_error(e, &host, &redact))?;
    let (mut sink, mut stream) = socket.split();

    let setup_message = ClientMessage::Setup(Box::new(options.setup.clone()));
    if let Some(tap) = &tap {
        tap.sent(&setup_message);
    }
    let setup = encode_client(&setup_message);
    sink.send(Message::text(setup))
        .await
        .map_err(|e| connect_error(e, &host, &redact))?;

    // Wait for setupComplete; anything else first is logged and skipped.
    let wait = async {
        loop {
            match stream.next().await {
                Some(Ok(Message::Text(text))) => {
                    if let Some(id) = setup_complete(text.as_bytes(), tap.as_deref()) {
                        return Ok(id);
                    }
                }
                Some(Ok(Message::Binary(bytes))) => {
                    if let Some(id) = setup_complete(&bytes, tap.as_deref()) {
                        return Ok(id);
                    }
                }
                Some(Ok(Message::Close(frame))) => {
                    let (code, reason) = frame
                        .map(|f| (Some(u16::from(f.code)), f.reason.to_string()))
                        .unwrap_or((None, String::new()));
                    return Err(SessionError::Closed(close_info(
                        code,
                        redact(reason),
                        false,
                    )));
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(connect_error(e, &host, &redact)),
                None => return Err(SessionError::Closed(close_info(None, String::new(), false))),
            }
        }
    };
    let waited = tokio::time::timeout(options.setup_timeout, wait)
        .await
        .map_err(|_| SessionError::SetupTimeout {
            host: host.clone(),
            timeout: options.setup_timeout,
        })
        .and_then(|result| result);
    if let (Err(SessionError::Closed(close)), Some(tap)) = (&waited, &tap) {
        tap.closed(close);
    }
    let session_id = waited?;
    info!(endpoint = %host, "setup complete");

    let (outbound_tx, mut outbound_rx) = mpsc::channel::<Outbound>(OUTBOUND_CAPACITY);
    let (events_tx, events_rx) = mpsc::channel(EVENT_CAPACITY);
    let closing = Arc::new(AtomicBool::new(false));

    // Writer: owns the sink; sink sends never sit in a select! arm that could drop them.
    let writer_closing = closing.clone();
    let writer_tap = tap.clone();
    tokio::spawn(async move {
        while let Some(item) = outbound_rx.recv().await {
            match item {
                Outbound::Message(message) => {
                    if let Some(tap) = &writer_tap {
                        tap.sent(&message);
                    }
                    let text = encode_client(&message);
                    if let Err(e) = sink.send(Message::text(text)).await {
                        debug!("send failed, the reader reports the close: {e}");
                        break;
                    }
                }
                Outbound::Close => {
                    writer_closing.store(true, Ordering::SeqCst);
                    let _ = sink.send(Message::Close(None)).await;
                    break;
                }
            }
        }
    });

    // Reader: every frame becomes events; bad frames are skipped with a reason.
    let first_event = SessionEvent::SetupComplete { session_id };
    tokio::spawn(async move {
        let events = events_tx;
        let _ = events.send(first_event).await;
        let close = loop {
            let frame = match stream.next().await {
                Some(Ok(frame)) => frame,
                Some(Err(e)) => {
                    debug!("websocket read error: {e}");
                    break close_info(None, String::new(), closing.load(Ordering::SeqCst));
                }
                None => break close_info(None, String::new(), closing.load(Ordering::SeqCst)),
            };
            let payload = match frame {
                Message::Text(text) => text.as_bytes().to_vec(),
                Message::Binary(bytes) => bytes.to_vec(),
                Message::Close(frame) => {
                    let (code, reason) = frame
                        .map(|f| (Some(u16::from(f.code)), f.reason.to_string()))
                        .unwrap_or((Some(1005), String::new()));
                    break close_info(code, reason, closing.load(Ordering::SeqCst));
                }
                _ => continue,
            };
            let decoded = match decode_server(&payload) {
                Ok(DecodedServerFrame::Message(message)) => {
                    if let Some(tap) = &tap {
                        tap.received(TappedFrame::Message(&message), false);
                    }
                    events_from(message)
                }
                Ok(DecodedServerFrame::Unknown { keys }) => {
                    let reason = format!("skipped an unknown server message ({})", keys.join(", "));
                    warn!("{reason}");
                    if let Some(tap) = &tap {
                        tap.received(TappedFrame::Skipped(&reason), false);
                    }
                    vec![SessionEvent::FrameSkipped { reason }]
                }
                Err(e) => {
                    let reason = format!(
                        "skipped a malformed server frame ({} bytes): {e}",
                        payload.len()
                    );
                    warn!("{reason}");
                    if let Some(tap) = &tap {
                        tap.received(TappedFrame::Skipped(&reason), false);
                    }
                    vec![SessionEvent::FrameSkipped { reason }]
                }
            };
            for event in decoded {
                if events.send(event).await.is_err() {
                    return;
                }
            }
        };
        info!(code = ?close.code, "session closed: {}", close.message);
        if let Some(tap) = &tap {
            tap.closed(&close);
        }
        let _ = events.send(SessionEvent::Closed(close)).await;
    });

    Ok(Session {
        handle: SessionHandle {
            outbound: outbound_tx,
        },
        events: events_rx,
    })
}

fn setup_complete(payload: &[u8], tap: Option<&dyn WireTap>) -> Option<Option<String>> {
    let decoded = decode_server(payload);
    if let Some(tap) = tap {
        match &decoded {
            Ok(DecodedServerFrame::Message(message)) => {
                tap.received(TappedFrame::Message(message), true)
            }
            Ok(DecodedServerFrame::Unknown { .. }) | Err(_) => {
                tap.received(TappedFrame::Skipped("ignored before setupComplete"), true)
            }
        }
    }
    match decoded {
        Ok(DecodedServerFrame::Message(message)) => match message.setup_complete {
            Some(setup) => Some(setup.session_id),
            None => {
                warn!("ignored a server message that arrived before setupComplete");
                None
            }
        },
        Ok(DecodedServerFrame::Unknown { keys }) => {
            warn!(
                "ignored an unknown server message before setupComplete ({})",
                keys.join(", ")
            );
            None
        }
        Err(e) => {
            warn!("ignored a malformed frame before setupComplete: {e}");
            None
        }
    }
}

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

fn connect_error(
    error: tungstenite::Error,
    host: &str,
    redact: &dyn Fn(String) -> String,
) -> SessionError {
    match error {
        tungstenite::Error::Http(response) => {
            let status = response.status().as_u16();
            SessionError::Rejected {
                status,
                message: describe_http_status(status, host),
            }
        }
        tungstenite::Error::Io(e) => SessionError::Connect(describe_io_error(&e, host)),
        tungstenite::Error::Tls(e) => {
            SessionError::Connect(redact(format!("TLS handshake with {host} failed: {e}")))
        }
        other => SessionError::Connect(redact(format!("Could not connect to {host}: {other}"))),
    }
}
