//! A plain WebSocket client that speaks JSON over raw frames (no livetalk client code): the
//! Live protocol to the mock, or the bridge protocol to `livetalk serve` and the bridge.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// How long a client waits for the next message unless told otherwise.
pub const WAIT: Duration = Duration::from_secs(20);

/// How the server ended a connection: its Close frame.
#[derive(Debug)]
pub struct Closed {
    pub code: u16,
    pub reason: String,
}

/// A connected client; every message it receives is kept.
pub struct JsonSocket {
    /// The socket itself, for what is not JSON (raw frames, a Close).
    pub ws: Socket,
    /// Everything received, in order.
    pub seen: Vec<Value>,
    /// The server's Close frame, once one came.
    closed: Option<CloseFrame>,
    wait: Duration,
    text_only: bool,
}

impl JsonSocket {
    /// Connects (a URL, or a request with headers) or panics.
    pub async fn connect(request: impl IntoClientRequest + Unpin) -> JsonSocket {
        let (ws, _) = tokio_tungstenite::connect_async(request).await.unwrap();
        JsonSocket {
            ws,
            seen: Vec::new(),
            closed: None,
            wait: WAIT,
            text_only: false,
        }
    }

    /// Waits up to `wait` for each message instead of [`WAIT`].
    pub fn waiting(self, wait: Duration) -> JsonSocket {
        JsonSocket { wait, ..self }
    }

    /// Fails on a binary message: for a server that must send text only (the bridge).
    pub fn text_only(self) -> JsonSocket {
        JsonSocket {
            text_only: true,
            ..self
        }
    }

    /// Sends `message` as a text frame.
    pub async fn send(&mut self, message: Value) {
        self.ws
            .send(Message::text(message.to_string()))
            .await
            .unwrap();
    }

    /// The next message; `None` once the connection has ended (see [`JsonSocket::until`]
    /// for how). Pings and pongs are not messages; panics after the wait.
    pub async fn next(&mut self) -> Option<Value> {
        loop {
            let frame = tokio::time::timeout(self.wait, self.ws.next())
                .await
                .unwrap_or_else(|_| {
                    panic!("no message within {:?}; seen: {:#?}", self.wait, self.seen)
                });
            let message: Value = match frame {
                Some(Ok(Message::Text(text))) => serde_json::from_str(&text).unwrap(),
                Some(Ok(Message::Binary(bytes))) if !self.text_only => {
                    serde_json::from_slice(&bytes).unwrap()
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                Some(Ok(Message::Close(frame))) => {
                    self.closed = frame;
                    return None;
                }
                None | Some(Err(_)) => return None,
                Some(Ok(other)) => panic!("unexpected frame {other:?}"),
            };
            self.seen.push(message.clone());
            return Some(message);
        }
    }

    /// Reads until a message satisfies `pred`: everything read, that message last; or the
    /// Close frame the server ended the connection with first (panics if it sent none).
    pub async fn until(&mut self, pred: impl Fn(&Value) -> bool) -> Result<Vec<Value>, Closed> {
        let mut read = Vec::new();
        loop {
            let Some(message) = self.next().await else {
                let frame = self.closed.take().unwrap_or_else(|| {
                    panic!("the connection ended without a Close frame; read: {read:#?}")
                });
                return Err(Closed {
                    code: frame.code.into(),
                    reason: frame.reason.to_string(),
                });
            };
            read.push(message);
            if pred(read.last().expect("just read")) {
                return Ok(read);
            }
        }
    }

    /// The first message that satisfies `pred`; panics if the connection ends first.
    pub async fn wait_for(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        let mut read = self.until(pred).await.unwrap();
        read.pop().expect("the message that satisfied it")
    }
}

/// An answer for each of `calls` (a `toolCall`'s `functionCalls`), all with `response`: the
/// `functionResponses` a client sends back.
pub fn function_responses(calls: &Value, response: &Value) -> Vec<Value> {
    calls
        .as_array()
        .unwrap()
        .iter()
        .map(|c| json!({"id": c["id"], "name": c["name"], "response": response}))
        .collect()
}

/// The model's words in one `serverContent`: its output transcription and the text of its
/// parts that are not thoughts.
pub fn words(server_content: &Value) -> String {
    let mut text = String::new();
    if let Some(t) = server_content["outputTranscription"]["text"].as_str() {
        text.push_str(t);
    }
    for part in server_content["modelTurn"]["parts"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if part["thought"] != true
            && let Some(t) = part["text"].as_str()
        {
            text.push_str(t);
        }
    }
    text
}
