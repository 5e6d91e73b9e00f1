//! How an app's messages reach the bridge and the bridge's reach the app: the [`Transport`]
//! the session loop runs over, and the WebSocket one (`livetalk serve`). The loop and the
//! translator know nothing of the socket; a transport knows nothing of the Live API. The
//! WebRTC media transport (`webrtc/`) goes beside it: an app's signalling comes through its
//! transport, and its audio on the peer connection the session loop holds.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::error::CapacityError;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, Bytes, Message};
use tracing::debug;

use super::fleet::Fleet;
use super::metrics::Way;
use super::protocol::{AppMessage, BridgeMessage};
use livetalk_live::budget::{Gate, Held, InputBudget, Refused};
use livetalk_live::excerpt::human_size;
use livetalk_mock::ws_server::{self, Ending};

/// What the app did next.
#[derive(Debug)]
pub enum Received {
    /// One message (boxed: a config makes it large).
    Message(Box<AppMessage>),
    /// Something that could not be used: the sentence to answer with (`GEMINI_ERROR`). The
    /// connection goes on.
    Refused(String),
    /// The app's side is over: it left, closed, or broke the transport's rules. `last_words`
    /// is what the app should still be told (`GEMINI_ERROR`) before the transport closes.
    Ended { last_words: Option<String> },
}

/// One app's connection, as the session loop uses it.
pub trait Transport: Send {
    /// The app's next message. Cancel-safe: the loop selects over it and the Live session, and
    /// nothing the app sent is lost when it drops the future before it is ready.
    fn receive(&mut self) -> impl Future<Output = Received> + Send;

    /// Sends one message, secrets scrubbed (any of it may quote upstream text) through
    /// `livetalk_live::redact`. `false` when the app is gone: the loop then ends.
    fn send(&mut self, message: &BridgeMessage) -> impl Future<Output = bool> + Send;

    /// Ends the connection: its own close (with `code` and `reason`) when the app has not
    /// ended it, else whatever the app's ending calls for.
    fn close(self, code: u16, reason: &str) -> impl Future<Output = ()> + Send;
}

/// A WebSocket the bridge's HTTP server upgraded: the accepted socket, read through the input
/// budget (`livetalk_live::budget::Gated`) from before hyper read its request.
pub type AppSocket = TokioIo<Upgraded>;

/// The WebSocket transport: one JSON text message per bridge message, either kind from the
/// app. Messages over `max_message_bytes` are refused one by one; the socket's hard limit
/// (set at the upgrade) ends the connection. Bytes both ways count in the fleet's metrics.
/// Each message holds what it costs of the process's input budget (`livetalk_live::budget`)
/// from before it is decoded until the loop asks for the next one (its bytes from before they
/// are read: see `Gated`), so many apps sending at once wait for each other instead of each
/// holding its decoded copies.
pub struct WebSocketTransport<S = AppSocket> {
    sink: Option<SplitSink<WebSocketStream<S>, Message>>,
    stream: SplitStream<WebSocketStream<S>>,
    /// What the socket held of the budget for the message read last.
    gate: Gate,
    peer: SocketAddr,
    max_message_bytes: usize,
    fleet: Arc<Fleet>,
    /// How the app's side ended, once it has.
    ending: Option<Ending>,
    /// A message read and waiting for the budget, with what its bytes hold: kept here so a
    /// `receive` dropped while it waits loses nothing.
    pending: Option<(Bytes, Option<Held>)>,
    /// What the last message holds of the budget, until the loop has handled it.
    held: Option<Held>,
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send> WebSocketTransport<S> {
    /// `gate` is the one the socket under `socket` was read through (`InputBudget::gate`);
    /// a socket read straight gives `Gate::default()`, which never holds anything.
    pub fn new(
        socket: WebSocketStream<S>,
        gate: Gate,
        peer: SocketAddr,
        max_message_bytes: usize,
        fleet: Arc<Fleet>,
    ) -> Self {
        let (sink, stream) = socket.split();
        WebSocketTransport {
            sink: Some(sink),
            stream,
            gate,
            peer,
            max_message_bytes,
            fleet,
            ending: None,
            pending: None,
            held: None,
        }
    }

    fn decode(&self, frame: &[u8]) -> Received {
        self.fleet.metrics.app_message(Way::received, frame.len());
        if frame.len() > self.max_message_bytes {
            return Received::Refused(format!(
                "The message of {} bytes is larger than this bridge's limit of {} bytes and was dropped. Send large images as smaller JPEG frames.",
                frame.len(),
                self.max_message_bytes
            ));
        }
        match AppMessage::decode(frame) {
            Ok(message) => Received::Message(Box::new(message)),
            Err(e) => Received::Refused(e.to_string()),
        }
    }

    fn ended(&mut self, ending: Ending, last_words: Option<String>) -> Received {
        self.ending = Some(ending);
        Received::Ended { last_words }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Transport for WebSocketTransport<S> {
    async fn receive(&mut self) -> Received {
        // Asked for the next message: the last one has been handled.
        self.held = None;
        if self.sink.is_none() {
            return self.ended(Ending::Gone, None);
        }
        // Two awaits, both cancel-safe: the stream's, and the budget's, whose message waits
        // in `pending` meanwhile.
        if self.pending.is_none() {
            let frame = loop {
                break match self.stream.next().await {
                    Some(Ok(Message::Text(text))) => Bytes::from(text),
                    Some(Ok(Message::Binary(bytes))) => bytes,
                    Some(Ok(Message::Close(_))) => return self.ended(Ending::PeerClosed, None),
                    None => return self.ended(Ending::Gone, None),
                    // Pings are answered by tungstenite as we keep reading.
                    Some(Ok(_)) => continue,
                    Some(Err(tungstenite::Error::Capacity(e))) => {
                        let size = match &e {
                            CapacityError::MessageTooLong { size, max_size } => format!(
                                " ({} where this bridge reads {} at most)",
                                human_size(*size as u64),
                                human_size(*max_size as u64)
                            ),
                            CapacityError::TooManyHeaders => String::new(),
                        };
                        let words = format!(
                            "The message was far larger than this bridge accepts{size}; closing the connection. Messages up to {} bytes are allowed.",
                            self.max_message_bytes
                        );
                        return self.ended(
                            Ending::ReadFailed(tungstenite::Error::Capacity(e)),
                            Some(words),
                        );
                    }
                    Some(Err(e)) => {
                        debug!(peer = %self.peer, "client read error: {e}");
                        // A frame that waited too long for the budget: the app is told why.
                        let words = match &e {
                            tungstenite::Error::Io(io) => Refused::of_read_error(io).map(|refused| {
                                format!("The message was not read: {refused}; closing the connection.")
                            }),
                            _ => None,
                        };
                        return self.ended(Ending::ReadFailed(e), words);
                    }
                };
            };
            self.pending = Some((frame, self.gate.take()));
        }
        let Some((frame, reserved)) = &mut self.pending else {
            return self.ended(Ending::Gone, None);
        };
        let frame = frame.clone();
        if frame.len() > self.max_message_bytes {
            self.pending = None;
            return self.decode(&frame);
        }
        let held = InputBudget::process().hold_after(&frame, reserved).await;
        self.pending = None;
        match held {
            Ok(held) => {
                self.held = Some(held);
                self.decode(&frame)
            }
            Err(refused) => Received::Refused(format!("The message was dropped: {refused}.")),
        }
    }

    async fn send(&mut self, message: &BridgeMessage) -> bool {
        let Some(sink) = &mut self.sink else {
            return false;
        };
        let text = message.encode();
        let text = livetalk_live::redact::scrub(&text).into_owned();
        self.fleet.metrics.app_message(Way::sent, text.len());
        if let Err(e) = sink.send(Message::text(text)).await {
            debug!(peer = %self.peer, "client send failed: {e}");
            self.sink = None;
            return false;
        }
        true
    }

    async fn close(mut self, code: u16, reason: &str) {
        let Some(mut sink) = self.sink.take() else {
            return;
        };
        let ending = match self.ending.take() {
            Some(ending) => ending,
            None => {
                let frame = CloseFrame {
                    code: CloseCode::from(code),
                    reason: ws_server::truncate_reason(reason).into(),
                };
                let _ = sink.send(Message::Close(Some(frame))).await;
                Ending::CloseSent
            }
        };
        ws_server::end(sink, self.stream, ending).await;
    }
}
