//! `livetalk serve`: the bridge's listener: its options and limits, the upgrade with the token
//! and origin checks, and one session loop (`app_connection.rs`) per app over the
//! WebSocket transport, each with its own upstream Live session (the real service with the
//! server's key, or the mock).

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use livetalk_live::budget::InputBudget;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::{HeaderValue, StatusCode, Uri};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tracing::{Instrument as _, debug, debug_span, info};

use super::app_connection::{self, Shared, Upstream};
use super::transport::WebSocketTransport;
use super::webrtc::{MediaHub, WebRtcOptions};
use livetalk_mock::ws_server::{self, Admission, ConnectionLimits};

/// Default largest client message: room for a large base64 image frame.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 << 20;

/// How to run the bridge.
#[derive(Debug, Clone)]
pub struct BridgeOptions {
    pub listen: SocketAddr,
    pub upstream: Upstream,
    /// Required from clients when set (`?token=` or `Authorization: Bearer`); required to be
    /// set when listening on anything but loopback.
    pub token: Option<String>,
    /// Larger client messages are answered with `GEMINI_ERROR` and dropped; the connection
    /// stays usable. Messages over four times this close the connection (1009), since they
    /// have to be read whole before they can be refused.
    pub max_message_bytes: usize,
    /// Open connections held at once, and the time a new one has to upgrade (token included).
    pub limits: ConnectionLimits,
    /// The WebRTC transport's port, announced address and bounds.
    pub webrtc: WebRtcOptions,
}

/// Why the bridge refuses to start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BridgeStartError {
    #[error(
        "refusing to listen on {0} without --token: any host that can reach it could use the server's API key. Pass --token (or set LIVETALK_BRIDGE_TOKEN), or listen on 127.0.0.1"
    )]
    TokenRequired(SocketAddr),
    #[error("--token must not be empty")]
    EmptyToken,
}

/// A running bridge; it stops accepting when dropped (open sessions run to their end).
pub struct BridgeServer {
    local_addr: SocketAddr,
    webrtc_port: u16,
    _shutdown: oneshot::Sender<()>,
}

impl BridgeServer {
    pub async fn start(options: BridgeOptions) -> anyhow::Result<BridgeServer> {
        if options
            .token
            .as_deref()
            .is_some_and(|t| t.trim().is_empty())
        {
            return Err(BridgeStartError::EmptyToken.into());
        }
        if !options.listen.ip().is_loopback() && options.token.is_none() {
            return Err(BridgeStartError::TokenRequired(options.listen).into());
        }
        let listener = TcpListener::bind(options.listen)
            .await
            .with_context(|| format!("cannot listen on {}", options.listen))?;
        let local_addr = listener.local_addr()?;
        let media = MediaHub::bind(options.listen.ip(), options.webrtc).await?;
        let webrtc_port = media.port();
        let shared = Arc::new(Shared {
            upstream: options.upstream,
            token: options.token,
            max_message_bytes: options.max_message_bytes.max(1024),
            media: Some(media),
        });
        let (shutdown_tx, shutdown_rx) = oneshot::channel::<()>();
        ws_server::spawn_accept_loop(
            "bridge",
            listener,
            options.limits,
            shutdown_rx,
            move |stream, peer, admission| upgrade(stream, peer, admission, shared.clone()),
        );
        info!(%local_addr, webrtc_port, "bridge listening");
        Ok(BridgeServer {
            local_addr,
            webrtc_port,
            _shutdown: shutdown_tx,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The UDP port of every WebRTC peer connection.
    pub fn webrtc_port(&self) -> u16 {
        self.webrtc_port
    }

    /// `ws://host:port`.
    pub fn url(&self) -> String {
        format!("ws://{}", self.local_addr)
    }
}

/// The WebSocket upgrade with the token check; the client's session when it succeeds.
async fn upgrade(
    stream: TcpStream,
    peer: SocketAddr,
    admission: Admission,
    shared: Arc<Shared>,
) -> Option<impl Future<Output = ()> + Send + 'static> {
    #[allow(clippy::result_large_err)] // the type is fixed by tungstenite
    let callback = |request: &Request, response: Response| -> Result<Response, ErrorResponse> {
        admission.check()?;
        match authorize(request, shared.token.as_deref()) {
            Ok(()) => Ok(response),
            Err((status, text)) => {
                debug!(%peer, %status, "upgrade refused");
                let mut error = ErrorResponse::new(Some(text.to_owned()));
                *error.status_mut() = status;
                if status == StatusCode::UNAUTHORIZED {
                    error
                        .headers_mut()
                        .insert("www-authenticate", HeaderValue::from_static("Bearer"));
                }
                Err(error)
            }
        }
    };
    // The hard limit protects memory; the soft limit (checked per message) keeps the
    // connection usable when a client sends something too large. No message past the input
    // budget is read at all (its bytes could not be held for), and the socket's frames are
    // paid for from the budget before they are read, so many apps sending at once are read in
    // turn.
    let hard_limit = shared
        .max_message_bytes
        .saturating_mul(4)
        .min(livetalk_live::budget::INPUT_BUDGET);
    let config = WebSocketConfig::default()
        .max_message_size(Some(hard_limit))
        .max_frame_size(Some(hard_limit))
        .write_buffer_size(0);
    let (stream, gate) = InputBudget::process().gate(stream, hard_limit);
    match tokio_tungstenite::accept_hdr_async_with_config(stream, callback, Some(config)).await {
        Ok(socket) => Some(async move {
            debug!(%peer, "client connected");
            let transport = WebSocketTransport::new(socket, gate, peer, shared.max_message_bytes);
            app_connection::run(shared, peer, transport)
                .instrument(debug_span!("bridge app", %peer))
                .await;
            debug!(%peer, "client gone");
        }),
        Err(e) => {
            debug!(%peer, "upgrade failed: {e}");
            None
        }
    }
}

/// Checks the upgrade request: the token when one is configured; without one, browser pages
/// from other origins are refused (any web page could otherwise spend the server's key
/// through a loopback bridge).
fn authorize(request: &Request, token: Option<&str>) -> Result<(), (StatusCode, &'static str)> {
    match token {
        Some(expected) => {
            let from_query = request.uri().query().into_iter().flat_map(|q| {
                q.split('&')
                    .filter_map(|pair| pair.strip_prefix("token="))
                    .map(percent_decode)
            });
            let from_header = request
                .headers()
                .get_all("authorization")
                .iter()
                .filter_map(|v| v.to_str().ok())
                .filter_map(|v| {
                    v.strip_prefix("Bearer ")
                        .or_else(|| v.strip_prefix("bearer "))
                })
                .map(|v| v.trim().to_owned());
            if from_query
                .chain(from_header)
                .any(|given| constant_time_eq(given.as_bytes(), expected.as_bytes()))
            {
                Ok(())
            } else {
                Err((
                    StatusCode::UNAUTHORIZED,
                    "This bridge needs its token: add ?token=... to the URL or send Authorization: Bearer ....",
                ))
            }
        }
        None => match request.headers().get("origin") {
            Some(origin) if !origin_is_loopback(origin.to_str().unwrap_or("")) => Err((
                StatusCode::FORBIDDEN,
                "This bridge has no token, so it only accepts pages served from localhost. Start it with --token to allow other origins.",
            )),
            _ => Ok(()),
        },
    }
}

fn origin_is_loopback(origin: &str) -> bool {
    let Ok(uri) = origin.parse::<Uri>() else {
        return false;
    };
    match uri.host() {
        Some("localhost") => true,
        Some(host) => host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback()),
        None => false,
    }
}

/// Minimal `%XX` decoding for the token query parameter. A `+` is a plus sign, as in any URL
/// query (only HTML form encoding reads it as a space), so a token with `+` works as typed.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Some(byte) = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Compares without an early exit, so response timing does not reveal the token.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use livetalk_live::Endpoint;

    fn request(uri: &str, headers: &[(&str, &str)]) -> Request {
        let mut builder = Request::builder().uri(uri);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(()).unwrap()
    }

    #[test]
    fn token_is_accepted_from_query_or_bearer_header_only() {
        let token = Some("s3cret/+");
        assert!(authorize(&request("/?token=s3cret%2F%2B", &[]), token).is_ok());
        // A raw `+` is a plus, not a space.
        assert!(authorize(&request("/?token=s3cret%2F+", &[]), token).is_ok());
        assert!(authorize(&request("/?token=s3cret%2F%20", &[]), token).is_err());
        assert!(
            authorize(
                &request("/", &[("authorization", "Bearer s3cret/+")]),
                token
            )
            .is_ok()
        );
        let refused = authorize(&request("/?token=wrong", &[]), token).unwrap_err();
        assert_eq!(refused.0, StatusCode::UNAUTHORIZED);
        assert!(authorize(&request("/", &[]), token).is_err());
        assert!(authorize(&request("/", &[("authorization", "Basic s3cret/+")]), token).is_err());
    }

    #[test]
    fn without_a_token_only_loopback_origins_are_accepted() {
        assert!(authorize(&request("/", &[]), None).is_ok());
        for origin in [
            "http://localhost:5173",
            "http://127.0.0.1:8080",
            "http://[::1]:3000",
        ] {
            assert!(
                authorize(&request("/", &[("origin", origin)]), None).is_ok(),
                "{origin}"
            );
        }
        for origin in ["https://evil.example", "null", "http://192.168.1.2"] {
            let refused = authorize(&request("/", &[("origin", origin)]), None).unwrap_err();
            assert_eq!(refused.0, StatusCode::FORBIDDEN, "{origin}");
        }
    }

    #[test]
    fn constant_time_eq_compares_whole_values() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
    }

    #[tokio::test]
    async fn non_loopback_listen_requires_a_token() {
        let options = BridgeOptions {
            listen: SocketAddr::from(([0, 0, 0, 0], 0)),
            upstream: Upstream {
                endpoint: Endpoint::parse("ws://127.0.0.1:1", livetalk_live::ApiVersion::V1)
                    .unwrap(),
                api_key: None,
                connect_timeout: Duration::from_secs(1),
            },
            token: None,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            limits: ConnectionLimits::default(),
            webrtc: Default::default(),
        };
        let error = BridgeServer::start(options.clone())
            .await
            .err()
            .expect("refused");
        assert!(error.to_string().contains("--token"), "{error}");
        let with_empty = BridgeOptions {
            token: Some(" ".into()),
            ..options
        };
        assert!(BridgeServer::start(with_empty).await.is_err());
    }
}
