//! Connecting to the Live API: where and how ([`ConnectOptions`], [`Auth`]), [`connect`], and
//! the Live API's side of the connection runner: `setup` → `setupComplete`, then server
//! messages as [`ServerEvent`]s.

use std::sync::Arc;
use std::time::Duration;

use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::handshake::client::Request;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, Message};
use tracing::warn;

use super::adc::TokenSource;
use super::codec::{DecodedServerFrame, decode_server, encode_client};
use super::connection::{
    self, ConnectError, Connection, Protocol, Read, SetupStep, TappedFrame, WireTap,
};
use super::endpoint::{ApiKey, Endpoint};
use super::events::{Inbound, ServerEvent};
use super::wire::{ClientMessage, Setup};
use crate::excerpt::{SUMMARY, bounded};

/// How a connection proves who it is.
#[derive(Debug, Clone, Default)]
pub enum Auth {
    /// Nothing (the mock, a private endpoint).
    #[default]
    None,
    /// The Gemini API's key, in `x-goog-api-key`.
    ApiKey(ApiKey),
    /// Vertex AI: an OAuth access token from Application Default Credentials, in
    /// `Authorization: Bearer`, obtained (or renewed) for each connection.
    Bearer(Arc<TokenSource>),
}

impl From<Option<ApiKey>> for Auth {
    fn from(key: Option<ApiKey>) -> Self {
        key.map_or(Auth::None, Auth::ApiKey)
    }
}

/// What to connect to and how to set the session up. A session keeps them to reconnect with.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// Where the Live API is.
    pub endpoint: Endpoint,
    /// How the connection proves who it is.
    pub auth: Auth,
    /// The first message of the connection.
    pub setup: Setup,
    /// One deadline for every stage, from the host look-up (and the access token) to
    /// `setupComplete`; running out names the stage it ran out in.
    pub connect_timeout: Duration,
}

/// Opens a connection: dials (through the proxy the environment names, trusting the
/// operating system's certificates), sends `setup` and waits for `setupComplete`, all within
/// `connect_timeout`.
pub async fn connect(options: ConnectOptions) -> Result<Connection, ConnectError> {
    connect_tapped(options, None).await
}

/// [`connect`], with every frame both ways also shown to `tap`.
pub async fn connect_tapped(
    options: ConnectOptions,
    tap: Option<Arc<dyn WireTap>>,
) -> Result<Connection, ConnectError> {
    let deadline = tokio::time::Instant::now() + options.connect_timeout;
    let header = match &options.auth {
        Auth::None => None,
        Auth::ApiKey(key) => Some(("x-goog-api-key", key.expose().to_owned())),
        Auth::Bearer(tokens) => {
            let token = tokio::time::timeout_at(deadline, tokens.token())
                .await
                .map_err(|_| {
                    ConnectError::TimedOut(format!(
                        "No access token within {} s for the {}.",
                        options.connect_timeout.as_secs_f32(),
                        tokens.credentials().describe()
                    ))
                })?
                .map_err(|e| ConnectError::Connect(e.to_string()))?;
            Some(("authorization", format!("Bearer {token}")))
        }
    };
    let live = LiveApi {
        endpoint: options.endpoint,
        header,
        bearer_of: match &options.auth {
            Auth::Bearer(tokens) => Some(tokens.credentials().describe()),
            _ => None,
        },
    };
    connection::run_until(live, &options.setup, options.connect_timeout, deadline, tap).await
}

/// The Live API's side of a connection: `setup` → `setupComplete`, then server messages.
struct LiveApi {
    endpoint: Endpoint,
    /// The credential's header and its value (a secret).
    header: Option<(&'static str, String)>,
    /// Whose access token is sent, for a refusal's message.
    bearer_of: Option<String>,
}

impl Protocol for LiveApi {
    const PEER: &'static str = "Live API";

    fn host(&self) -> &str {
        self.endpoint.host()
    }

    fn request(&self) -> Result<Request, ConnectError> {
        let mut request = self
            .endpoint
            .url()
            .into_client_request()
            .map_err(|e| ConnectError::Connect(format!("Invalid endpoint URL: {e}")))?;
        if let Some((name, secret)) = &self.header {
            let mut value = HeaderValue::from_str(secret).map_err(|_| {
                ConnectError::Connect(
                    "The API key or access token contains characters not allowed in a header."
                        .into(),
                )
            })?;
            value.set_sensitive(true);
            request.headers_mut().insert(*name, value);
        }
        Ok(request)
    }

    fn opening(setup: &Setup) -> Message {
        Self::encode(&ClientMessage::Setup(Box::new(setup.clone())))
    }

    /// Anything before `setupComplete` is shown to the tap, logged and skipped.
    fn setup_frame(&mut self, payload: &[u8], tap: Option<&dyn WireTap>) -> SetupStep {
        let decoded = decode_server(payload);
        if let Some(tap) = tap {
            match &decoded {
                Ok(DecodedServerFrame::Message(message)) => {
                    tap.handshake(TappedFrame::Message(message), payload.len())
                }
                Ok(DecodedServerFrame::Unknown { .. }) | Err(_) => tap.handshake(
                    TappedFrame::Skipped("ignored before setupComplete"),
                    payload.len(),
                ),
            }
        }
        match decoded {
            Ok(DecodedServerFrame::Message(message)) => match message.setup_complete {
                Some(setup) => SetupStep::Done {
                    session_id: setup.session_id,
                },
                None => {
                    warn!("ignored a server message that arrived before setupComplete");
                    SetupStep::Wait
                }
            },
            Ok(DecodedServerFrame::Unknown { keys }) => {
                warn!(
                    "ignored an unknown server message before setupComplete ({})",
                    bounded(&keys.join(", "), SUMMARY)
                );
                SetupStep::Wait
            }
            Err(e) => {
                warn!(
                    "ignored a malformed frame before setupComplete: {}",
                    bounded(&e.to_string(), SUMMARY)
                );
                SetupStep::Wait
            }
        }
    }

    fn encode(message: &ClientMessage) -> Message {
        Message::text(encode_client(message))
    }

    /// A normal closure with a reason, as the official SDKs send: without a code the far end
    /// reads 1005, "no status", and may take it for an error.
    fn farewell() -> Message {
        Message::Close(Some(CloseFrame {
            code: CloseCode::Normal,
            reason: "session ended".into(),
        }))
    }

    /// Every frame is decoded once; bad frames are skipped with a reason.
    fn frame(&mut self, payload: &[u8], _closing: bool) -> Read {
        let reason = match decode_server(payload) {
            Ok(DecodedServerFrame::Message(message)) => {
                return Read::Inbound(Inbound::message(message));
            }
            Ok(DecodedServerFrame::Unknown { keys }) => {
                format!("skipped an unknown server message ({})", keys.join(", "))
            }
            Err(e) => format!(
                "skipped a malformed server frame ({} bytes): {e}",
                payload.len()
            ),
        };
        // The reason may quote the frame (serde quotes a bad value whole): the log gets a
        // summary, the recording and the app the whole reason (the app bounds its notices).
        warn!("{}", bounded(&reason, SUMMARY));
        Read::Inbound(Inbound::news(ServerEvent::FrameSkipped { reason }))
    }

    /// A refused access token names the credentials, not the API key.
    fn rejected(&self, status: u16) -> String {
        match (&self.bearer_of, status) {
            (Some(whose), 401 | 403) => format!(
                "{} refused the access token of the {whose} (HTTP {status}). Check that it may use Vertex AI in this project and location.",
                self.host()
            ),
            _ => super::close::describe_http_status(status, self.host()),
        }
    }

    fn unreachable(&self, error: tungstenite::Error) -> String {
        let host = self.host();
        match error {
            tungstenite::Error::Tls(e) => format!("TLS handshake with {host} failed: {e}"),
            other => format!("Could not connect to {host}: {other}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::protocol::CloseFrame;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

    use super::*;
    use crate::connection::Outbox;
    use crate::endpoint::ApiVersion;
    use crate::events::CloseInfo;
    use livetalk_mock::far_end::{FarEnd as Far, listen};

    const WAIT: Duration = Duration::from_secs(10);
    const KEY: &str = "fake-key-session-0123456789";

    /// A tap that writes down what it is shown, one line a call.
    #[derive(Default)]
    struct Tape(Mutex<Vec<String>>);

    impl Tape {
        fn lines(&self) -> Vec<String> {
            self.0.lock().unwrap().clone()
        }

        fn push(&self, line: String) {
            self.0.lock().unwrap().push(line);
        }
    }

    impl WireTap for Tape {
        fn connecting(&self, host: &str) {
            self.push(format!("connecting {host}"));
        }

        fn sent(&self, message: &Arc<ClientMessage>, bytes: usize) {
            let text = encode_client(message);
            assert_eq!(bytes, text.len(), "the size on the wire of {text}");
            self.push(format!("sent {text}"));
        }

        fn handshake(&self, frame: TappedFrame<'_>, _bytes: usize) {
            let seen = match frame {
                TappedFrame::Message(message) => serde_json::to_string(message).unwrap(),
                TappedFrame::Skipped(reason) => format!("skipped: {reason}"),
            };
            self.push(format!("received in setup {seen}"));
        }

        fn closed(&self, close: &CloseInfo) {
            self.push(format!("closed {:?} {}", close.code, close.reason));
        }
    }

    /// Connects with a key and a tape; hands back the far end once it has read the setup.
    async fn open() -> (
        tokio::task::JoinHandle<Result<Connection, ConnectError>>,
        Far,
        Arc<Tape>,
    ) {
        let (url, accepted) = listen().await.unwrap();
        let tape = Arc::new(Tape::default());
        let options = ConnectOptions {
            endpoint: Endpoint::parse(&url, ApiVersion::V1).unwrap(),
            auth: ApiKey::new(KEY).into(),
            setup: Setup {
                model: "models/m".into(),
                ..Setup::default()
            },
            connect_timeout: WAIT,
        };
        let tap = tape.clone() as Arc<dyn WireTap>;
        let connecting = tokio::spawn(connect_tapped(options, Some(tap)));
        let mut far = tokio::time::timeout(WAIT, accepted)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let setup = tokio::time::timeout(WAIT, far.next()).await.unwrap();
        assert!(
            matches!(&setup, Some(Ok(Message::Text(t))) if t.starts_with(r#"{"setup":"#)),
            "{setup:?}"
        );
        (connecting, far, tape)
    }

    async fn close_quoting_the_key(far: &mut Far, code: CloseCode) {
        far.close(Some(CloseFrame {
            code,
            reason: format!("API key {KEY} not valid").into(),
        }))
        .await
        .unwrap();
    }

    #[tokio::test]
    async fn the_tap_sees_a_failed_setup_to_its_close_and_the_key_never_shows() {
        let (connecting, mut far, tape) = open().await;
        far.send(Message::text(
            r#"{"serverContent": {"turnComplete": true}}"#,
        ))
        .await
        .unwrap();
        far.send(Message::text("not json")).await.unwrap();
        close_quoting_the_key(&mut far, CloseCode::Policy).await;

        let result = tokio::time::timeout(WAIT, connecting)
            .await
            .unwrap()
            .unwrap();
        let Err(ConnectError::Closed(close)) = result else {
            panic!("expected a close during setup");
        };
        assert_eq!(close.code, Some(1008));
        // The reason is kept as sent; every output scrubs the key (it became a secret when read).
        assert_eq!(
            crate::redact::scrub(&close.reason),
            "API key [redacted] not valid"
        );
        assert!(
            close.message.contains("The API key was rejected (1008)"),
            "{close:?}"
        );
        let lines: Vec<String> = tape
            .lines()
            .iter()
            .map(|l| crate::redact::scrub(l).into_owned())
            .collect();
        assert_eq!(
            lines,
            [
                "connecting 127.0.0.1".to_owned(),
                r#"sent {"setup":{"model":"models/m"}}"#.to_owned(),
                r#"received in setup {"serverContent":{"turnComplete":true}}"#.to_owned(),
                "received in setup skipped: ignored before setupComplete".to_owned(),
                "closed Some(1008) API key [redacted] not valid".to_owned(),
            ]
        );
    }

    #[tokio::test]
    async fn the_tap_sees_the_handshake_and_what_was_sent_and_the_session_reads_the_rest() {
        let (connecting, mut far, tape) = open().await;
        far.send(Message::text(r#"{"setupComplete": {"sessionId": "s-1"}}"#))
            .await
            .unwrap();
        let mut session = tokio::time::timeout(WAIT, connecting)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        session.handle.send_user_text("hi").await.unwrap();
        tokio::time::timeout(WAIT, far.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let turn_complete = r#"{"serverContent": {"turnComplete": true}}"#;
        far.send(Message::text(turn_complete)).await.unwrap();
        far.send(Message::text(r#"{"somethingNew": {}}"#))
            .await
            .unwrap();
        far.send(Message::binary(b"\xff".to_vec())).await.unwrap();
        close_quoting_the_key(&mut far, CloseCode::Error).await;

        let mut events = Vec::new();
        let mut frames = Vec::new();
        while let Some(frame) = tokio::time::timeout(WAIT, session.inbound.recv())
            .await
            .unwrap()
        {
            frames.push((frame.message.clone(), frame.bytes, frame.at));
            events.extend(frame);
        }
        // Each frame's message comes whole with its size and when it was read, in order.
        let (message, bytes, _) = &frames[1];
        assert_eq!(
            serde_json::to_string(message.as_deref().unwrap()).unwrap(),
            r#"{"serverContent":{"turnComplete":true}}"#
        );
        assert_eq!(*bytes, turn_complete.len());
        assert!(frames.windows(2).all(|w| w[0].2 <= w[1].2));
        assert_eq!(frames[3].1, 1, "the malformed frame's size");
        assert_eq!(
            events.first(),
            Some(&ServerEvent::SetupComplete {
                session_id: Some("s-1".into())
            })
        );
        let skipped = events
            .iter()
            .filter(|e| matches!(e, ServerEvent::FrameSkipped { .. }))
            .count();
        assert_eq!(skipped, 2, "{events:?}");
        let Some(ServerEvent::Closed(close)) = events.last() else {
            panic!("{events:?}");
        };
        assert_eq!(close.code, Some(1011));
        assert!(!close.initiated_by_client);

        // The tap saw the handshake, what was sent and the close: the session's own frames
        // reach consumers once, as above, not through it.
        let lines = tape.lines();
        assert_eq!(
            lines[..4],
            [
                "connecting 127.0.0.1".to_owned(),
                r#"sent {"setup":{"model":"models/m"}}"#.to_owned(),
                r#"received in setup {"setupComplete":{"sessionId":"s-1"}}"#.to_owned(),
                r#"sent {"clientContent":{"turns":[{"role":"user","parts":[{"text":"hi"}]}],"turnComplete":true}}"#.to_owned(),
            ],
            "{lines:#?}"
        );
        assert_eq!(
            crate::redact::scrub(&lines[4]),
            "closed Some(1011) API key [redacted] not valid"
        );
        assert_eq!(lines.len(), 5, "{lines:#?}");
    }
}
