//! What both WebSocket servers (`livetalk mock`, `livetalk serve`) share about their
//! connections: the accept loop (a cap on open connections, a deadline for the upgrade, and
//! backoff when the process runs out of file descriptors) and how a connection ends (the
//! peer's Close echoed, protocol violations answered with the matching close code).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use livetalk_live::budget::Refused;
use livetalk_live::excerpt::human_size;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, oneshot};
use tokio::time::Instant;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::error::{CapacityError, ProtocolError};
use tokio_tungstenite::tungstenite::handshake::server::ErrorResponse;
use tokio_tungstenite::tungstenite::http::{HeaderValue, StatusCode};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{Error, Message};
use tracing::{debug, info, warn};

/// Open connections a server holds by default; past it new ones get HTTP 503.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
/// Time a client has to complete the upgrade (TLS, WebSocket handshake and, on the bridge,
/// its token) before it is dropped.
pub const UPGRADE_TIMEOUT: Duration = Duration::from_secs(10);
/// Refusals (503) under way at once; past this, over-cap connections are closed unanswered so
/// a flood cannot hold more descriptors than the cap allows for.
const REFUSALS_IN_FLIGHT: usize = 32;
/// First wait after an accept failed for want of resources; it doubles up to the next.
const BACKOFF_FIRST: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// How long a closing connection waits for the peer's side of the closing handshake.
const LINGER: Duration = Duration::from_secs(2);
/// Bytes a failed connection reads and discards while its Close reaches the peer.
const LINGER_DRAIN_BYTES: usize = 1 << 20;

/// How many connections a server holds and how long a new one may take to upgrade.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Connections held open at once; past it new ones get HTTP 503 (at least 1).
    pub max_connections: usize,
    /// Time a new connection has to complete its upgrade before it is dropped.
    pub upgrade_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            upgrade_timeout: UPGRADE_TIMEOUT,
        }
    }
}

/// Whether the accept loop let a connection in; a server's upgrade callback starts with
/// [`Admission::check`], so a refused client reads why instead of a reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Under the cap: the connection may go on.
    Admitted,
    /// The server already holds this many connections.
    Full(usize),
}

impl Admission {
    /// Why a connection over the cap is refused (the body of its HTTP 503); `None` when it
    /// was admitted.
    pub fn refusal(self) -> Option<String> {
        match self {
            Admission::Admitted => None,
            Admission::Full(max) => Some(format!(
                "This server is at its limit of {max} open connections; try again later."
            )),
        }
    }

    /// `Err` is the HTTP 503 answer for a connection over the cap.
    #[allow(clippy::result_large_err)] // the type is fixed by tungstenite
    pub fn check(self) -> Result<(), ErrorResponse> {
        match self.refusal() {
            None => Ok(()),
            Some(sentence) => {
                let mut refusal = ErrorResponse::new(Some(sentence));
                *refusal.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                refusal
                    .headers_mut()
                    .insert("retry-after", HeaderValue::from_static("5"));
                Err(refusal)
            }
        }
    }
}

/// Accepts connections on `listener` until `shutdown` fires or its sender is dropped. Each
/// connection runs `upgrade` under [`ConnectionLimits::upgrade_timeout`]; the session it
/// returns then runs without a deadline, holding its place under the cap until it ends.
/// `label` names the server in log lines.
pub fn spawn_accept_loop<F, U, S>(
    label: &'static str,
    listener: TcpListener,
    limits: ConnectionLimits,
    shutdown: oneshot::Receiver<()>,
    upgrade: F,
) where
    F: Fn(TcpStream, SocketAddr, Admission) -> U + Send + Sync + 'static,
    U: Future<Output = Option<S>> + Send + 'static,
    S: Future<Output = ()> + Send + 'static,
{
    tokio::spawn(accept_loop(label, listener, limits, shutdown, upgrade));
}

async fn accept_loop<F, U, S>(
    label: &'static str,
    listener: TcpListener,
    limits: ConnectionLimits,
    mut shutdown: oneshot::Receiver<()>,
    upgrade: F,
) where
    F: Fn(TcpStream, SocketAddr, Admission) -> U + Send + Sync + 'static,
    U: Future<Output = Option<S>> + Send + 'static,
    S: Future<Output = ()> + Send + 'static,
{
    let upgrade = Arc::new(upgrade);
    let max = limits.max_connections.max(1);
    let open = Arc::new(Semaphore::new(max));
    let refusing = Arc::new(Semaphore::new(REFUSALS_IN_FLIGHT));
    let mut starved: Option<Starved> = None;
    // Connections refused since the server was last under its cap (`None`: under it).
    let mut refused: Option<u64> = None;
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = &mut shutdown => break,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) if is_per_connection(&e) => {
                debug!(
                    server = label,
                    "a connection failed before it was accepted: {e}"
                );
                continue;
            }
            Err(e) => {
                // Out of descriptors or memory: the pending connection stays queued and accept
                // would fail again at once, so wait, longer each time, until something closes.
                let episode = starved.get_or_insert_with(|| {
                    warn!(
                        server = label,
                        "cannot accept connections: {e}; retrying with backoff (up to {} s) and serving the {} connections already open",
                        BACKOFF_MAX.as_secs(),
                        max - open.available_permits(),
                    );
                    Starved::new()
                });
                let delay = episode.failed();
                tokio::select! {
                    _ = tokio::time::sleep(delay) => continue,
                    _ = &mut shutdown => break,
                }
            }
        };
        if let Some(episode) = starved.take() {
            info!(
                server = label,
                "accepting connections again after {:.1} s; {} accepts failed meanwhile",
                episode.since.elapsed().as_secs_f64(),
                episode.failures,
            );
        }
        let (admission, permit) = match open.clone().try_acquire_owned() {
            Ok(permit) => {
                if let Some(count) = refused.take() {
                    info!(
                        server = label,
                        "under the limit of {max} connections again; {count} were refused"
                    );
                }
                (Admission::Admitted, permit)
            }
            Err(_) => {
                let count = refused.get_or_insert_with(|| {
                    warn!(
                        server = label,
                        "at the limit of {max} open connections: refusing new ones with HTTP 503 (see --max-connections)"
                    );
                    0
                });
                *count += 1;
                match refusing.clone().try_acquire_owned() {
                    Ok(permit) => (Admission::Full(max), permit),
                    Err(_) => {
                        debug!(server = label, %peer, "over the limit; closed unanswered");
                        continue;
                    }
                }
            }
        };
        debug!(server = label, %peer, "connection accepted");
        let upgrade = upgrade.clone();
        let deadline = limits.upgrade_timeout;
        tokio::spawn(async move {
            // Held until the session ends: it is the connection's place under the cap.
            let _permit = permit;
            let _ = stream.set_nodelay(true);
            match tokio::time::timeout(deadline, upgrade(stream, peer, admission)).await {
                Ok(Some(session)) => session.await,
                Ok(None) => {}
                Err(_) => debug!(
                    server = label,
                    %peer,
                    "dropped: no complete upgrade within {:.1} s",
                    deadline.as_secs_f64()
                ),
            }
        });
    }
}

/// Errors of one pending connection (the peer gave up before it was accepted), not of the
/// listener: accepting the next one may well work.
fn is_per_connection(error: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        error.kind(),
        ConnectionAborted | ConnectionReset | ConnectionRefused | Interrupted | TimedOut
    )
}

/// An episode of failing accepts.
struct Starved {
    since: Instant,
    failures: u64,
    next_delay: Duration,
}

impl Starved {
    fn new() -> Self {
        Starved {
            since: Instant::now(),
            failures: 0,
            next_delay: BACKOFF_FIRST,
        }
    }

    /// Counts a failure; returns how long to wait before the next try.
    fn failed(&mut self) -> Duration {
        self.failures += 1;
        let delay = self.next_delay;
        self.next_delay = (delay * 2).min(BACKOFF_MAX);
        delay
    }
}

/// How a served WebSocket ends; see [`end`].
#[derive(Debug)]
pub enum Ending {
    /// The peer sent Close: tungstenite has queued the echo, which still has to go out.
    PeerClosed,
    /// The server closes with this frame.
    Close(CloseFrame),
    /// The server has sent its Close already; the peer's reply is still due.
    CloseSent,
    /// Reading failed: a protocol violation is answered with its close code, a vanished
    /// peer with nothing.
    ReadFailed(Error),
    /// The peer is gone (end of stream) or the session already finished the handshake.
    Gone,
}

/// The Close a read error calls for, when the peer broke the protocol (RFC 6455 §7.4.1):
/// 1007 for text that is not UTF-8, 1009 for a message over the limit, 1002 for bad framing,
/// and 1013 for a message that waited too long for the process's input budget (see
/// `livetalk_live::budget`), each said in livetalk's words. `None` when the peer is simply
/// gone and there is no one to tell.
pub fn close_for_read_error(error: &Error) -> Option<CloseFrame> {
    let (code, reason) = match error {
        Error::Utf8(_) => (CloseCode::Invalid, error.to_string()),
        Error::Capacity(CapacityError::MessageTooLong { size, max_size }) => (
            CloseCode::Size,
            format!(
                "A message of {} is more than the {} this server reads at once.",
                human_size(*size as u64),
                human_size(*max_size as u64)
            ),
        ),
        Error::Capacity(_) => (CloseCode::Size, error.to_string()),
        Error::Protocol(ProtocolError::ResetWithoutClosingHandshake) => return None,
        Error::Protocol(_) => (CloseCode::Protocol, error.to_string()),
        Error::Io(e) => match Refused::of_read_error(e) {
            Some(refused) => (CloseCode::Again, refused.sentence()),
            None => return None,
        },
        _ => return None,
    };
    Some(CloseFrame {
        code,
        reason: truncate_reason(&reason).into(),
    })
}

/// Ends a connection the way RFC 6455 asks, so the peer sees a clean close rather than 1006:
/// the peer's Close is echoed, ours waits (up to 2 s) for the peer's reply, and after a
/// protocol violation the Close goes out before the TCP connection is shut down without a
/// reset (what the peer sent meanwhile is read and discarded).
pub async fn end<S>(
    sink: SplitSink<WebSocketStream<S>, Message>,
    stream: SplitStream<WebSocketStream<S>>,
    ending: Ending,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let Ok(mut socket) = stream.reunite(sink) else {
        return;
    };
    let _ = tokio::time::timeout(LINGER, finish(&mut socket, ending)).await;
}

async fn finish<S>(socket: &mut WebSocketStream<S>, ending: Ending)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    match ending {
        // Reading on flushes the echo, after which tungstenite ends the stream.
        Ending::PeerClosed => while let Some(Ok(_)) = socket.next().await {},
        Ending::Close(frame) => {
            if socket.send(Message::Close(Some(frame))).await.is_ok() {
                while let Some(Ok(_)) = socket.next().await {}
            }
        }
        Ending::CloseSent => while let Some(Ok(_)) = socket.next().await {},
        Ending::ReadFailed(error) => {
            let Some(frame) = close_for_read_error(&error) else {
                return;
            };
            debug!(
                code = u16::from(frame.code),
                "closing after a protocol error: {error}"
            );
            if socket.send(Message::Close(Some(frame))).await.is_err() {
                return;
            }
            // The frame reader may be mid-frame, so the peer's reply cannot be read as
            // WebSocket; but closing with unread bytes would reset the connection and could
            // destroy the Close in flight. Shut down our side and drain until the peer hangs up.
            let raw = socket.get_mut();
            let _ = raw.shutdown().await;
            let mut buffer = [0u8; 4096];
            let mut drained = 0;
            while drained < LINGER_DRAIN_BYTES {
                match raw.read(&mut buffer).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => drained += n,
                }
            }
            return;
        }
        Ending::Gone => return,
    }
    // The server closes TCP first (RFC 6455 §7.1.1); over TLS this also says close_notify.
    let _ = socket.get_mut().shutdown().await;
}

/// Close reasons are limited to 123 bytes by the WebSocket protocol.
pub fn truncate_reason(reason: &str) -> String {
    let mut end = reason.len().min(123);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    reason[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_its_ceiling() {
        let mut episode = Starved::new();
        let delays: Vec<Duration> = (0..10).map(|_| episode.failed()).collect();
        assert_eq!(delays[0], BACKOFF_FIRST);
        assert_eq!(delays[1], BACKOFF_FIRST * 2);
        assert_eq!(*delays.last().unwrap_or(&Duration::ZERO), BACKOFF_MAX);
        assert_eq!(episode.failures, 10);
    }

    #[test]
    fn read_errors_map_to_close_codes() {
        let code = |e: Error| close_for_read_error(&e).map(|f| f.code);
        assert_eq!(code(Error::Utf8("bad".into())), Some(CloseCode::Invalid));
        assert_eq!(
            code(Error::Protocol(ProtocolError::NonZeroReservedBits)),
            Some(CloseCode::Protocol)
        );
        assert_eq!(
            code(Error::Capacity(
                tokio_tungstenite::tungstenite::error::CapacityError::MessageTooLong {
                    size: 2,
                    max_size: 1
                }
            )),
            Some(CloseCode::Size)
        );
        assert_eq!(
            code(Error::Protocol(ProtocolError::ResetWithoutClosingHandshake)),
            None
        );
        assert_eq!(code(Error::ConnectionClosed), None);
    }

    #[test]
    fn close_reasons_fit_the_frame() {
        let long = "é".repeat(100);
        let cut = truncate_reason(&long);
        assert!(cut.len() <= 123);
        assert!(long.starts_with(&cut));
    }

    #[test]
    fn over_the_cap_is_a_503_with_a_reason() {
        assert!(Admission::Admitted.check().is_ok());
        let Err(refusal) = Admission::Full(3).check() else {
            panic!("a full server must refuse");
        };
        assert_eq!(refusal.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            refusal
                .body()
                .as_deref()
                .unwrap_or("")
                .contains("limit of 3")
        );
    }
}
