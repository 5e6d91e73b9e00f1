//! The one connection runner under both protocols the app connects with, the Live API and a
//! bridge: the same deadlines, the same messages, the same clean close.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use livetalk_live::client::{self, ConnectOptions};
use livetalk_live::endpoint::{ApiVersion, Endpoint};
use livetalk_live::wire::Setup;
use livetalk_live::{ConnectError, Connection, ServerEvent};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use livetalk_mock::far_end::{FarEnd as Far, listen};

use super::client as bridge;
use super::protocol::{BridgeMessage, SetupCompleteDetails};
use livetalk_live::Outbox;

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
    ) -> Result<Connection, ConnectError> {
        let setup = Setup {
            model: "models/m".into(),
            ..Setup::default()
        };
        match self {
            Peer::Live => {
                client::connect(ConnectOptions {
                    endpoint: Endpoint::parse(&url, ApiVersion::V1).unwrap(),
                    auth: client::Auth::None,
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
        tokio::task::JoinHandle<Result<Connection, ConnectError>>,
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
    ) -> (
        tokio::task::JoinHandle<Result<Connection, ConnectError>>,
        Far,
    ) {
        let (url, accepted) = listen().await.unwrap();
        let connecting = tokio::spawn(self.connect(url, connect_timeout));
        let far = tokio::time::timeout(WAIT, accepted)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
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
    connecting: tokio::task::JoinHandle<Result<Connection, ConnectError>>,
) -> Result<Connection, ConnectError> {
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
        let Err(ConnectError::TimedOut(message)) = joined(connecting).await else {
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
            let Err(ConnectError::TimedOut(message)) = result else {
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
        let Err(ConnectError::Connect(message)) = peer.connect(tls_url.clone(), WAIT).await else {
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
        let Err(ConnectError::Connect(message)) =
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
        let Err(ConnectError::Closed(close)) = joined(connecting).await else {
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
            session.inbound.recv().await.map(|frame| frame.events),
            Some(vec![ServerEvent::SetupComplete { session_id: None }]),
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

        let frame = tokio::time::timeout(WAIT, session.inbound.recv())
            .await
            .unwrap();
        let Some(close) = frame.as_ref().and_then(|frame| frame.closed()) else {
            panic!("{peer:?}: the stream must end with Closed");
        };
        assert!(close.initiated_by_client, "{peer:?}: {close:?}");
        assert_eq!(close.message, "Session ended.", "{peer:?}");
        assert!(
            tokio::time::timeout(WAIT, session.inbound.recv())
                .await
                .unwrap()
                .is_none(),
            "{peer:?}"
        );
    }
}
