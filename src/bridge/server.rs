//! `livetalk serve`: the bridge's listener: its options and limits, HTTP/1.1 on the listen port
//! (hyper): the WebSocket upgrade with the token and origin checks, then one session loop
//! (`app_connection.rs`) per app over the WebSocket transport, each with its own upstream Live
//! session (the real service with the server's key, or the mock); and beside it the plain
//! routes a fleet needs (`/healthz`, `/readyz`, `/metrics`, `POST /drain`: `fleet.rs`).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{CONNECTION, CONTENT_TYPE, HeaderValue, RETRY_AFTER, WWW_AUTHENTICATE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use livetalk_live::budget::InputBudget;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tracing::{Instrument as _, debug, info, info_span};

use super::app_connection::{self, Shared};
use super::fleet::Fleet;
use super::metrics;
use super::recordings::{RecordOptions, Recordings};
use super::transport::WebSocketTransport;
use super::upstream::Upstream;
use super::webrtc::{MediaHub, WebRtcOptions};
use livetalk_mock::ws_server::{self, Admission, ConnectionLimits};

/// Default largest client message: room for a large base64 image frame.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 << 20;

/// How long a drain lets sessions finish their turns by default (`--drain-timeout`).
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

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
    /// How long a drain lets each session finish the model's turn before it closes it anyway.
    pub drain_timeout: Duration,
    /// Record every app session (format 4) into its own folder here.
    pub record: Option<RecordOptions>,
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
    fleet: Arc<Fleet>,
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
        let fleet = Arc::new(Fleet::new(
            options.limits.max_connections,
            options.drain_timeout,
        ));
        let recordings = match options.record {
            Some(record) => Some(Arc::new(Recordings::open(record)?)),
            None => None,
        };
        let shared = Arc::new(Shared {
            upstream: options.upstream,
            token: options.token,
            max_message_bytes: options.max_message_bytes.max(1024),
            media: Some(media),
            fleet: fleet.clone(),
            recordings,
            sessions: Default::default(),
        });
        let (shutdown_tx, shutdown_rx) = oneshot::channel::<()>();
        ws_server::spawn_accept_loop(
            "bridge",
            listener,
            options.limits,
            shutdown_rx,
            move |stream, peer, admission| serve_http(stream, peer, admission, shared.clone()),
        );
        info!(%local_addr, webrtc_port, "bridge listening");
        Ok(BridgeServer {
            local_addr,
            webrtc_port,
            fleet,
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

    /// Starts draining (what SIGTERM and `POST /drain` do); `false` when already draining.
    pub fn drain(&self) -> bool {
        self.fleet.start_drain()
    }

    /// Resolves once a drain has started and every app connection has gone.
    pub async fn emptied(&self) {
        self.fleet.emptied().await
    }

    /// App connections open now.
    pub fn connections(&self) -> usize {
        self.fleet.connections()
    }

    /// The metrics, as `/metrics` answers them.
    pub fn metrics_text(&self) -> String {
        self.fleet.metrics.encode()
    }
}

pub(crate) type Body = Full<Bytes>;

/// A plain text answer.
pub(crate) fn text(status: StatusCode, body: impl Into<String>) -> Response<Body> {
    let mut body: String = body.into();
    if !body.ends_with('\n') {
        body.push('\n');
    }
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    // One request a connection: it holds a place under --max-connections while open.
    headers.insert(CONNECTION, HeaderValue::from_static("close"));
    response
}

/// One accepted connection: HTTP/1.1, one request (hyper). A WebSocket upgrade becomes the
/// app's session, returned to the accept loop to run; the plain routes are answered here.
async fn serve_http(
    stream: TcpStream,
    peer: SocketAddr,
    admission: Admission,
    shared: Arc<Shared>,
) -> Option<impl Future<Output = ()> + Send + 'static> {
    let (upgrade_tx, upgrade_rx) = oneshot::channel::<hyper::upgrade::OnUpgrade>();
    let upgrade_slot = Arc::new(Mutex::new(Some(upgrade_tx)));
    let service = {
        let shared = shared.clone();
        service_fn(move |request: Request<Incoming>| {
            let response = route(request, peer, admission, &shared, &upgrade_slot);
            async move { Ok::<_, Infallible>(response) }
        })
    };
    // The hard limit protects memory; the soft limit (checked per message) keeps the
    // connection usable when a client sends something too large. No message past the input
    // budget is read at all (its bytes could not be held for), and the socket's frames are
    // paid for from the budget before they are read, so many apps sending at once are read in
    // turn. The gate goes under hyper: it passes the request's head as it is and pays for
    // every WebSocket frame after it, the bytes hyper had read past the head (handed over with
    // the upgrade) included. A plain request is answered and its connection closed (`text`)
    // before anything past its head matters; whatever the gate held goes with the connection.
    let hard_limit = shared
        .max_message_bytes
        .saturating_mul(4)
        .min(livetalk_live::budget::INPUT_BUDGET);
    let (stream, gate) = InputBudget::process().gate(stream, hard_limit);
    // Keep-alive stays on: off, hyper would answer an upgrade `Connection: close` rather than
    // `Upgrade`. Every plain answer closes the connection itself (`text`).
    let connection = http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades();
    if let Err(e) = connection.await {
        debug!(%peer, "HTTP connection ended: {e}");
    }
    // Without an upgrade the service (and the sender) is gone by now.
    let on_upgrade = upgrade_rx.await.ok()?;
    let upgraded = match on_upgrade.await {
        Ok(upgraded) => upgraded,
        Err(e) => {
            debug!(%peer, "upgrade failed: {e}");
            return None;
        }
    };
    let config = WebSocketConfig::default()
        .max_message_size(Some(hard_limit))
        .max_frame_size(Some(hard_limit))
        .write_buffer_size(0);
    let socket =
        WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, Some(config)).await;
    let id = shared.new_session_id();
    Some(async move {
        let presence = shared.fleet.enter();
        let span = info_span!("session", id = %id);
        async {
            debug!(%peer, "app connected");
            let transport = WebSocketTransport::new(
                socket,
                gate,
                peer,
                shared.max_message_bytes,
                shared.fleet.clone(),
            );
            app_connection::run(shared.clone(), peer, id.clone(), transport).await;
            debug!(%peer, "app gone");
        }
        .instrument(span)
        .await;
        drop(presence);
    })
}

/// What a request is answered with. A WebSocket upgrade is answered 101 (and its upgrade
/// handed over through `upgrade`) once admitted, not draining and authorized.
fn route(
    mut request: Request<Incoming>,
    peer: SocketAddr,
    admission: Admission,
    shared: &Shared,
    upgrade: &Mutex<Option<oneshot::Sender<hyper::upgrade::OnUpgrade>>>,
) -> Response<Body> {
    let wants_websocket = request
        .headers()
        .get(hyper::header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    if wants_websocket {
        if let Some(refusal) = admission.refusal() {
            let mut response = text(StatusCode::SERVICE_UNAVAILABLE, refusal);
            response
                .headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from_static("5"));
            return response;
        }
        if shared.fleet.draining().is_some() {
            debug!(%peer, "upgrade refused: draining");
            let mut response = text(
                StatusCode::SERVICE_UNAVAILABLE,
                "This bridge instance is draining (shutting down) and takes no new apps: connect again to reach another instance.",
            );
            response
                .headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from_static("1"));
            return response;
        }
        if let Err(refusal) = authorize(&request, shared.token.as_deref()) {
            return refused(peer, refusal);
        }
        let accepted = tokio_tungstenite::tungstenite::handshake::server::create_response_with_body(
            &request,
            || Full::new(Bytes::new()),
        );
        return match accepted {
            Ok(response) => {
                let on_upgrade = hyper::upgrade::on(&mut request);
                if let Some(slot) = upgrade
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .take()
                {
                    let _ = slot.send(on_upgrade);
                }
                response
            }
            Err(e) => text(
                StatusCode::BAD_REQUEST,
                format!("This is not a WebSocket upgrade this bridge can take: {e}."),
            ),
        };
    }
    let read = request.method() == Method::GET || request.method() == Method::HEAD;
    match request.uri().path() {
        "/healthz" if read => text(StatusCode::OK, "ok"),
        "/readyz" if read => match shared.fleet.readiness() {
            Ok(()) => text(StatusCode::OK, "ready"),
            Err(why) => text(StatusCode::SERVICE_UNAVAILABLE, why),
        },
        "/metrics" if read => match authorize(&request, shared.token.as_deref()) {
            Ok(()) => {
                let mut response = text(StatusCode::OK, shared.fleet.metrics.encode());
                response.headers_mut().insert(
                    CONTENT_TYPE,
                    HeaderValue::from_static(metrics::CONTENT_TYPE),
                );
                response
            }
            Err(refusal) => refused(peer, refusal),
        },
        "/drain" if request.method() == Method::POST => {
            match authorize(&request, shared.token.as_deref()) {
                Ok(()) => {
                    if shared.fleet.start_drain() {
                        info!(%peer, "drain asked for (POST /drain)");
                        text(
                            StatusCode::ACCEPTED,
                            "draining: no new apps; each session finishes its turn, gets its handle and is closed",
                        )
                    } else {
                        text(StatusCode::ACCEPTED, "already draining")
                    }
                }
                Err(refusal) => refused(peer, refusal),
            }
        }
        path @ ("/healthz" | "/readyz" | "/metrics" | "/drain") => {
            let allow = if path == "/drain" {
                "POST"
            } else {
                "GET, HEAD"
            };
            let mut response = text(
                StatusCode::METHOD_NOT_ALLOWED,
                format!("{path} takes {allow}."),
            );
            if let Ok(value) = HeaderValue::from_str(allow) {
                response.headers_mut().insert(hyper::header::ALLOW, value);
            }
            response
        }
        _ => text(
            StatusCode::UPGRADE_REQUIRED,
            "This is a livetalk bridge: apps connect with a WebSocket (docs/bridge-protocol.md). /healthz, /readyz, /metrics and POST /drain answer plain HTTP.",
        ),
    }
}

/// The answer to a request without the token (401) or from a foreign page (403).
pub(crate) fn refused(
    peer: SocketAddr,
    (status, sentence): (StatusCode, &'static str),
) -> Response<Body> {
    debug!(%peer, %status, "request refused");
    let mut response = text(status, sentence);
    if status == StatusCode::UNAUTHORIZED {
        response
            .headers_mut()
            .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    response
}

/// Checks the upgrade request: the token when one is configured; without one, browser pages
/// from other origins are refused (any web page could otherwise spend the server's key
/// through a loopback bridge or proxy). The bridge and `livetalk proxy` both ask it.
pub(crate) fn authorize<B>(
    request: &Request<B>,
    token: Option<&str>,
) -> Result<(), (StatusCode, &'static str)> {
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
                    "This server needs its token: add ?token=... to the URL or send Authorization: Bearer ....",
                ))
            }
        }
        None => match request.headers().get("origin") {
            Some(origin) if !origin_is_loopback(origin.to_str().unwrap_or("")) => Err((
                StatusCode::FORBIDDEN,
                "This server has no token, so it only accepts pages served from localhost. Start it with --token to allow other origins.",
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
pub(crate) fn percent_decode(text: &str) -> String {
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
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
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

    fn request(uri: &str, headers: &[(&str, &str)]) -> Request<()> {
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
                offline: false,
            },
            token: None,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            limits: ConnectionLimits::default(),
            webrtc: Default::default(),
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
            record: None,
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
