//! `livetalk proxy`: any Live API app's session seen, flagged and recorded on its way to the
//! service. Apps connect as they would to Google (the same path, API version and key), over
//! `ws://` or `wss://` on one port (the first byte tells a TLS hello from HTTP); each upgrade
//! is checked as the bridge checks its own (loopback or `--token`, foreign origins refused),
//! dialled upstream before it is answered (a refusal reaches the app with the service's
//! status), then relayed (`relay.rs`) and watched (`watch.rs`). What it saw reaches the
//! presenter as [`ProxyEvent`]s (`events.rs`): lines, JSON or the terminal UI (`run.rs`).

mod cert;
pub mod events;
mod relay;
mod run;
mod screen;
mod upstream;
pub mod watch;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use livetalk_live::budget::{Gate, InputBudget, LARGEST_MESSAGE};
use livetalk_live::connection::{RawSocket, dial_socket};
use livetalk_live::{ConnectError, redact};
use livetalk_mock::ws_server::{self, Admission, ConnectionLimits};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tracing::debug;

use crate::bridge::server::{Body, authorize, refused, text};
pub use cert::{CertFiles, self_signed};
pub use events::{DelayFigures, Direction, EventKind, ProxyEvent, WarningKind};
pub use run::{Presentation, run};
pub use watch::{DEFAULT_STALL, WatchOptions};

/// How long a write may wait for a reader that stopped reading before the proxy closes the
/// connection both ways.
pub const DEFAULT_WRITE_STALL: Duration = Duration::from_secs(10);

/// Events held for the presenter before new ones are counted as dropped.
const EVENT_QUEUE: usize = 8192;

/// How to run the proxy.
#[derive(Debug, Clone)]
pub struct ProxyOptions {
    pub listen: SocketAddr,
    /// The certificate `wss://` apps are served (the self-signed one when none is given).
    pub tls: CertFiles,
    /// The Live server: `wss://host[:port]` (the app's path goes after it).
    pub upstream: String,
    /// The proxy's own key, sent for apps that send none.
    pub api_key: Option<String>,
    /// The upstream is the embedded offline demo model.
    pub offline: bool,
    pub connect_timeout: Duration,
    /// Required from apps when set (`?token=` or `Authorization: Bearer`); required to be set
    /// when listening on anything but loopback.
    pub token: Option<String>,
    pub max_connections: usize,
    /// Record each app connection (format 4) into a folder of its own here.
    pub record: Option<PathBuf>,
    pub watch: WatchOptions,
    /// How long a write waits for a side that stopped reading.
    pub write_stall: Duration,
}

/// What every connection shares.
pub(crate) struct Shared {
    options: ProxyOptions,
    acceptor: tokio_rustls::TlsAcceptor,
    events: mpsc::Sender<ProxyEvent>,
    dropped: AtomicU64,
    /// App connections opened so far (their ids are 1, 2, …).
    opened: AtomicU64,
    started: Instant,
}

impl Shared {
    /// Hands the presenter an event; one it cannot take now is counted and said later.
    pub(crate) fn emit(&self, conn: u64, kind: EventKind) {
        let t = self.started.elapsed().as_secs_f64();
        let dropped = self.dropped.swap(0, Ordering::SeqCst);
        if dropped > 0
            && self
                .events
                .try_send(ProxyEvent {
                    conn: 0,
                    t,
                    kind: EventKind::Dropped(dropped),
                })
                .is_err()
        {
            self.dropped.fetch_add(dropped, Ordering::SeqCst);
        }
        if self.events.try_send(ProxyEvent { conn, t, kind }).is_err() {
            self.dropped.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// A running proxy; it stops accepting when dropped (open connections run to their end).
pub struct ProxyServer {
    local_addr: SocketAddr,
    _shutdown: oneshot::Sender<()>,
}

/// Why the proxy refuses to start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProxyStartError {
    #[error(
        "refusing to listen on {0} without --token: any host that can reach it could use the proxy (and its API key). Pass --token (or set LIVETALK_PROXY_TOKEN), or listen on 127.0.0.1"
    )]
    TokenRequired(SocketAddr),
    #[error("--token must not be empty")]
    EmptyToken,
}

impl ProxyServer {
    /// Listens; every event of every connection comes out of the receiver.
    pub async fn start(
        options: ProxyOptions,
    ) -> anyhow::Result<(ProxyServer, mpsc::Receiver<ProxyEvent>)> {
        if options
            .token
            .as_deref()
            .is_some_and(|t| t.trim().is_empty())
        {
            return Err(ProxyStartError::EmptyToken.into());
        }
        if !options.listen.ip().is_loopback() && options.token.is_none() {
            return Err(ProxyStartError::TokenRequired(options.listen).into());
        }
        if let Some(token) = &options.token {
            redact::remember(token);
        }
        if let Some(key) = &options.api_key {
            redact::remember(key);
        }
        let acceptor = livetalk_mock::tls_acceptor(&options.tls.cert, &options.tls.key)?;
        let listener = TcpListener::bind(options.listen)
            .await
            .with_context(|| format!("cannot listen on {}", options.listen))?;
        let local_addr = listener.local_addr()?;
        let (events, receiver) = mpsc::channel(EVENT_QUEUE);
        let limits = ConnectionLimits {
            max_connections: options.max_connections.max(1),
            // The upstream is dialled before the app's upgrade is answered.
            upgrade_timeout: ws_server::UPGRADE_TIMEOUT + options.connect_timeout,
        };
        let shared = Arc::new(Shared {
            options,
            acceptor,
            events,
            dropped: AtomicU64::new(0),
            opened: AtomicU64::new(0),
            started: Instant::now(),
        });
        let (shutdown_tx, shutdown_rx) = oneshot::channel::<()>();
        ws_server::spawn_accept_loop(
            "proxy",
            listener,
            limits,
            shutdown_rx,
            move |stream, peer, admission| accept(stream, peer, admission, shared.clone()),
        );
        Ok((
            ProxyServer {
                local_addr,
                _shutdown: shutdown_tx,
            },
            receiver,
        ))
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }
}

/// A boxed session future, whichever stream it runs on.
type Session = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;

/// TLS or not (a TLS hello starts with byte 22), then HTTP.
async fn accept(
    stream: TcpStream,
    peer: SocketAddr,
    admission: Admission,
    shared: Arc<Shared>,
) -> Option<Session> {
    let _ = stream.set_nodelay(true);
    let mut first = [0u8; 1];
    let tls = matches!(stream.peek(&mut first).await, Ok(1) if first[0] == 0x16);
    if tls {
        let stream = match shared.acceptor.accept(stream).await {
            Ok(stream) => stream,
            Err(e) => {
                debug!(%peer, "TLS handshake failed: {e}");
                return None;
            }
        };
        serve_http(stream, peer, admission, shared).await
    } else {
        serve_http(stream, peer, admission, shared).await
    }
}

/// What an accepted upgrade hands the session: the upstream, and what the app asked.
struct Dialled {
    socket: RawSocket,
    gate: Gate,
    /// The path the app asked for, credentials masked.
    shown: String,
    api_version: String,
    host: String,
    proxy_key: bool,
}

type Slot<T> = Arc<Mutex<Option<T>>>;

fn put<T>(slot: &Slot<T>, value: T) {
    *slot
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(value);
}

fn take<T>(slot: &Slot<T>) -> Option<T> {
    slot.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take()
}

/// One accepted connection: HTTP/1.1, one request (hyper), as the bridge serves it.
async fn serve_http<S>(
    stream: S,
    peer: SocketAddr,
    admission: Admission,
    shared: Arc<Shared>,
) -> Option<Session>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let upgraded_slot: Slot<hyper::upgrade::OnUpgrade> = Arc::default();
    let dialled_slot: Slot<Dialled> = Arc::default();
    let service = {
        let shared = shared.clone();
        let upgraded_slot = upgraded_slot.clone();
        let dialled_slot = dialled_slot.clone();
        service_fn(move |request: Request<Incoming>| {
            let shared = shared.clone();
            let upgraded_slot = upgraded_slot.clone();
            let dialled_slot = dialled_slot.clone();
            async move {
                Ok::<_, Infallible>(
                    route(
                        request,
                        peer,
                        admission,
                        &shared,
                        &upgraded_slot,
                        &dialled_slot,
                    )
                    .await,
                )
            }
        })
    };
    // Every frame the app sends is paid for from the process's input budget before it is read
    // (the gate under hyper, as on the bridge); a message past the bound is refused from its
    // header (1009).
    let (stream, gate) = InputBudget::process().gate(stream, LARGEST_MESSAGE);
    let connection = http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades();
    if let Err(e) = connection.await {
        debug!(%peer, "HTTP connection ended: {e}");
    }
    let on_upgrade = take(&upgraded_slot)?;
    let dialled = take(&dialled_slot)?;
    let upgraded = match on_upgrade.await {
        Ok(upgraded) => upgraded,
        Err(e) => {
            debug!(%peer, "upgrade failed: {e}");
            return None;
        }
    };
    let socket = WebSocketStream::from_raw_socket(
        TokioIo::new(upgraded),
        Role::Server,
        Some(socket_config()),
    )
    .await;
    let id = shared.opened.fetch_add(1, Ordering::SeqCst) + 1;
    Some(Box::pin(async move {
        let Dialled {
            socket: up,
            gate: up_gate,
            shown,
            api_version,
            host: upstream_host,
            proxy_key,
        } = dialled;
        shared.emit(
            id,
            EventKind::Opened {
                peer,
                path: shown,
                upstream: if shared.options.offline {
                    "the offline demo model".to_owned()
                } else {
                    upstream_host.clone()
                },
                proxy_key,
            },
        );
        let conn = relay::Conn {
            id,
            watch: watch::Watch::new(shared.options.watch, &api_version),
            shared: shared.clone(),
            upstream_host,
            recorder: None,
            recording_tried: false,
            send_delay: Default::default(),
            recv_delay: Default::default(),
        };
        relay::run(conn, socket, gate, up, up_gate).await;
    }))
}

/// Frames bounded as the mock's are, both ways; nothing buffered for writing.
fn socket_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(LARGEST_MESSAGE))
        .max_frame_size(Some(LARGEST_MESSAGE))
        .write_buffer_size(0)
}

/// What a request is answered with: a WebSocket upgrade, once admitted and authorized and
/// once the upstream took it, 101; the upstream's refusal with its status; anything else a
/// sentence saying what this is.
async fn route(
    mut request: Request<Incoming>,
    peer: SocketAddr,
    admission: Admission,
    shared: &Shared,
    upgraded: &Slot<hyper::upgrade::OnUpgrade>,
    dialled: &Slot<Dialled>,
) -> Response<Body> {
    let wants_websocket = request
        .headers()
        .get(hyper::header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    if !wants_websocket {
        return text(
            StatusCode::UPGRADE_REQUIRED,
            "This is livetalk proxy: point a Live API app at it (its WebSocket URL, or the SDK's base URL); it relays to the Live API and shows the session.",
        );
    }
    if let Some(refusal) = admission.refusal() {
        let mut response = text(StatusCode::SERVICE_UNAVAILABLE, refusal);
        response
            .headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from_static("5"));
        return response;
    }
    if let Err(refusal) = authorize(&request, shared.options.token.as_deref()) {
        return refused(peer, refusal);
    }
    let path = request
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    let forward = match upstream::forward(
        &shared.options.upstream,
        &path,
        request.headers(),
        shared.options.token.as_deref(),
        shared.options.api_key.as_deref(),
    ) {
        Ok(forward) => forward,
        Err(e) => return text(StatusCode::BAD_REQUEST, e),
    };
    let accepted =
        match tokio_tungstenite::tungstenite::handshake::server::create_response_with_body(
            &request,
            || Full::new(Bytes::new()),
        ) {
            Ok(response) => response,
            Err(e) => {
                return text(
                    StatusCode::BAD_REQUEST,
                    format!("This is not a WebSocket upgrade livetalk proxy can take: {e}."),
                );
            }
        };
    let upstream::Forward {
        request: upstream_request,
        shown,
        api_version,
        proxy_key,
    } = forward;
    let host = upstream_request.uri().host().unwrap_or_default().to_owned();
    match dial_socket(
        upstream_request,
        LARGEST_MESSAGE,
        shared.options.connect_timeout,
    )
    .await
    {
        Ok((socket, gate)) => {
            put(upgraded, hyper::upgrade::on(&mut request));
            put(
                dialled,
                Dialled {
                    socket,
                    gate,
                    shown,
                    api_version,
                    host,
                    proxy_key,
                },
            );
            accepted
        }
        Err(error) => {
            let (status, sentence) = match &error {
                ConnectError::Rejected { status, message } => (
                    StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_GATEWAY),
                    message.clone(),
                ),
                ConnectError::TimedOut(message) => (StatusCode::GATEWAY_TIMEOUT, message.clone()),
                other => (StatusCode::BAD_GATEWAY, other.to_string()),
            };
            let sentence = format!("livetalk proxy could not reach the Live server: {sentence}");
            // Not a connection yet: the proxy's own event.
            shared.emit(
                0,
                EventKind::Warning {
                    kind: WarningKind::SetupRefused,
                    message: format!(
                        "The app from {peer} asked for {} and the Live server did not take it: {}",
                        shown,
                        redact::scrub(&sentence)
                    ),
                },
            );
            let mut response = text(status, redact::scrub(&sentence).into_owned());
            response.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            response
        }
    }
}

/// Ctrl-C or SIGTERM.
pub(crate) async fn stop_signal() {
    #[cfg(unix)]
    if let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
    {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        return;
    }
    let _ = tokio::signal::ctrl_c().await;
}
