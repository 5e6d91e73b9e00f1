//! The mock's listener: plain `ws://` or `wss://`, every URL path and key placement the
//! service and the official SDKs use, each connection served by its own `MockConnection`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::future::BoxFuture;
use rustls::pki_types::pem;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::StatusCode;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tracing::debug;

use crate::connection::MockConnection;
use crate::flavor::{Flavor, live_path_flavor};
use crate::recorded::{RecordedOptions, ServedConnection};
use crate::scenario::Scenario;
use crate::state::MockState;
use crate::ws_server::{self, Admission, ConnectionLimits};
use livetalk_live::budget::{InputBudget, LARGEST_MESSAGE};
use livetalk_live::network::install_crypto_provider;
use livetalk_live::{ApiKey, ApiVersion, Endpoint};

/// PEM files for serving `wss://`.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The certificate chain, leaf first. The official Python SDK checks it against the host
    /// it dials, so a certificate for `127.0.0.1` needs that IP address as a SAN.
    pub cert: PathBuf,
    /// The certificate's private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// The slowest [`MockOptions::speed`]: a hundred times slower than real time.
pub const MIN_SPEED: f64 = 0.01;
/// The fastest [`MockOptions::speed`].
pub const MAX_SPEED: f64 = 1000.0;

/// How to run the mock.
#[derive(Debug, Clone)]
pub struct MockOptions {
    /// The address to listen on; port 0 takes a free port ([`MockServer::local_addr`] says
    /// which).
    pub listen: SocketAddr,
    /// Serve `wss://` with these files instead of plain `ws://`.
    pub tls: Option<TlsFiles>,
    /// How much faster than real time reply audio is streamed, from [`MIN_SPEED`] to
    /// [`MAX_SPEED`] (taken as the nearer end beyond them; 1 when not a positive number).
    pub speed: f64,
    /// Faults to inject (none by default).
    pub scenario: Scenario,
    /// Save the mic audio each connection sends as `input-<n>.wav` in this folder.
    pub save_input: Option<PathBuf>,
    /// Open connections held at once, and the time a new one has to upgrade.
    pub limits: ConnectionLimits,
}

impl MockOptions {
    /// Plain `ws://` on a free loopback port: what the app embeds and tests use.
    pub fn loopback() -> Self {
        MockOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            tls: None,
            speed: 4.0,
            scenario: Scenario::default(),
            save_input: None,
            limits: ConnectionLimits::default(),
        }
    }
}

/// Why the mock could not start. `Display` is the whole message, cause included.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {error}")]
    Listen {
        /// The address asked for.
        addr: SocketAddr,
        /// What the system said.
        error: std::io::Error,
    },
    /// The folder for saved input could not be created.
    #[error("cannot create {}: {error}", dir.display())]
    SaveInput {
        /// The folder.
        dir: PathBuf,
        /// What the system said.
        error: std::io::Error,
    },
    /// The certificate file for `wss://` could not be read.
    #[error("cannot read certificate {}: {error}", path.display())]
    ReadCertificate {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        error: pem::Error,
    },
    /// The certificate file for `wss://` holds no valid PEM certificate chain.
    #[error("invalid PEM certificate {}: {error}", path.display())]
    InvalidCertificate {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        error: pem::Error,
    },
    /// The private key for `wss://` could not be read.
    #[error("cannot read private key {}: {error}", path.display())]
    ReadKey {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        error: pem::Error,
    },
    /// The certificate and the key were read but do not belong together (or rustls refuses
    /// them).
    #[error("certificate and key do not form a valid TLS identity: {0}")]
    TlsIdentity(rustls::Error),
}

/// A running mock server; it stops when dropped.
///
/// Connections already open when it is dropped are served to their end.
#[derive(Debug)]
pub struct MockServer {
    local_addr: SocketAddr,
    tls: bool,
    state: Arc<MockState>,
    _shutdown: oneshot::Sender<()>,
}

impl MockServer {
    /// Binds and starts accepting connections in the background (on the current tokio
    /// runtime, which must be running).
    pub async fn start(options: MockOptions) -> Result<MockServer, StartError> {
        Self::serve(options, None).await
    }

    /// Like [`MockServer::start`], but each app that connects is served `recorded`, a
    /// recorded session, instead of the demo model: its setup answered as recorded, its turns
    /// with the recorded frames at their recorded pace (`options.speed` scales it), and the
    /// end as recorded; what it sends that the recording does not hold is a
    /// [`Difference`](crate::Difference). `options.scenario` is not used.
    pub async fn start_recorded(
        options: MockOptions,
        recorded: RecordedOptions,
    ) -> Result<MockServer, StartError> {
        Self::serve(options, Some(recorded)).await
    }

    async fn serve(
        options: MockOptions,
        recorded: Option<RecordedOptions>,
    ) -> Result<MockServer, StartError> {
        let acceptor = match &options.tls {
            Some(files) => Some(tls_acceptor(&files.cert, &files.key)?),
            None => None,
        };
        let listen_error = |error| StartError::Listen {
            addr: options.listen,
            error,
        };
        let listener = TcpListener::bind(options.listen)
            .await
            .map_err(listen_error)?;
        let local_addr = listener.local_addr().map_err(listen_error)?;
        let (shutdown_tx, shutdown_rx) = oneshot::channel::<()>();
        let speed = if options.speed.is_finite() && options.speed > 0.0 {
            options.speed.clamp(MIN_SPEED, MAX_SPEED)
        } else {
            1.0
        };
        let tls = acceptor.is_some();
        if let Some(dir) = &options.save_input {
            std::fs::create_dir_all(dir).map_err(|error| StartError::SaveInput {
                dir: dir.clone(),
                error,
            })?;
        }
        let state = Arc::new(MockState::new(options.scenario, options.save_input));
        let shared = state.clone();
        ws_server::spawn_accept_loop(
            "mock",
            listener,
            options.limits,
            shutdown_rx,
            move |stream, peer, admission| {
                upgrade(
                    stream,
                    peer,
                    admission,
                    acceptor.clone(),
                    Serving {
                        speed,
                        state: shared.clone(),
                        recorded: recorded.clone(),
                    },
                )
            },
        );
        // Debug, not info: the embedded mock behind `serve` would otherwise be heard saying it
        // listens before the bridge in front of it refuses to start; `livetalk mock` says where
        // it listens on stdout.
        debug!(%local_addr, tls, "mock Live server listening");
        Ok(MockServer {
            local_addr,
            tls,
            state,
            _shutdown: shutdown_tx,
        })
    }

    /// What the server's connections share; its counters say what clients did so far.
    pub fn state(&self) -> &MockState {
        &self.state
    }

    /// Connections that sent a `setup` so far.
    pub fn connections(&self) -> u32 {
        self.state.connections()
    }

    /// Connections that resumed a saved session so far.
    pub fn resumptions(&self) -> u32 {
        self.state.resumptions()
    }

    /// The function names each `setup` so far declared, in order (one list per setup).
    pub fn declared_tools(&self) -> Vec<Vec<String>> {
        self.state.declared_tools()
    }

    /// Whether each `setup` so far turned on Google Search (`googleSearch`), in order.
    pub fn search_declared(&self) -> Vec<bool> {
        self.state.search_declared()
    }

    /// Tool responses that answered no open call of their connection (a client bug if > 0).
    pub fn stray_tool_responses(&self) -> u32 {
        self.state.stray_tool_responses()
    }

    /// The address the server listens on, with the port it was given.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// `ws://host:port` or `wss://host:port`.
    pub fn base_url(&self) -> String {
        let scheme = if self.tls { "wss" } else { "ws" };
        format!("{scheme}://{}", self.local_addr)
    }

    /// The full endpoint for an API version.
    pub fn endpoint(&self, version: ApiVersion) -> Endpoint {
        Endpoint::parse(&self.base_url(), version).expect("the mock's own URL is valid")
    }
}

/// A TLS acceptor from a PEM certificate chain and key, read with the bounds of every file
/// named from outside (the mock's `wss://`, and any other server of the workspace).
pub fn tls_acceptor(cert: &Path, key: &Path) -> Result<tokio_rustls::TlsAcceptor, StartError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    install_crypto_provider();
    // Read with bounds (a regular file, at most 16 MiB, within 5 s), then parsed.
    let read = |path: &Path| {
        livetalk_live::file::read_bounded(path, livetalk_live::file::FileKind::CERTIFICATES)
            .map_err(|e| pem::Error::Io(std::io::Error::other(e.problem())))
    };
    let cert_pem = read(cert).map_err(|error| StartError::ReadCertificate {
        path: cert.to_owned(),
        error,
    })?;
    let key_pem = read(key).map_err(|error| StartError::ReadKey {
        path: key.to_owned(),
        error,
    })?;
    let certs = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| StartError::InvalidCertificate {
            path: cert.to_owned(),
            error,
        })?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|error| StartError::ReadKey {
        path: key.to_owned(),
        error,
    })?;
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(StartError::TlsIdentity)?;
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// What a connection is served: the demo model, or a recorded session.
struct Serving {
    speed: f64,
    state: Arc<MockState>,
    recorded: Option<RecordedOptions>,
}

/// TLS (for `wss://`) and the WebSocket upgrade; the connection's session when both succeed.
async fn upgrade(
    stream: TcpStream,
    peer: SocketAddr,
    admission: Admission,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    serving: Serving,
) -> Option<BoxFuture<'static, ()>> {
    match acceptor {
        Some(acceptor) => match acceptor.accept(stream).await {
            Ok(tls) => upgrade_websocket(tls, peer, admission, serving).await,
            Err(e) => {
                debug!(%peer, "TLS handshake failed: {e}");
                None
            }
        },
        None => upgrade_websocket(stream, peer, admission, serving).await,
    }
}

async fn upgrade_websocket<S>(
    stream: S,
    peer: SocketAddr,
    admission: Admission,
    serving: Serving,
) -> Option<BoxFuture<'static, ()>>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut flavor = Flavor::GoogleAi;
    let mut version = "v1beta";
    let mut key = None;
    #[allow(clippy::result_large_err)] // the type is fixed by tungstenite
    let callback = |request: &Request, response: Response| -> Result<Response, ErrorResponse> {
        admission.check()?;
        match live_path_flavor(request.uri().path()) {
            Some(found) => {
                (flavor, version) = found;
                let given = client_key(request);
                // Where the key was, never the key.
                let placement = given.as_ref().map_or("none", |(placement, _)| *placement);
                debug!(%peer, path = request.uri().path(), key = placement, "upgrade");
                key = given.map(|(_, key)| key);
                Ok(response)
            }
            None => {
                let mut error = ErrorResponse::new(Some(format!(
                    "No Live API at {}; expected /ws/google.ai.generativelanguage.{{v1,v1beta,v1alpha}}.GenerativeService.BidiGenerateContent",
                    request.uri().path()
                )));
                *error.status_mut() = StatusCode::NOT_FOUND;
                Err(error)
            }
        }
    };
    // A message whose bytes alone would cost more than the process's input budget is refused
    // (1009) from its frame's header, before it is read; the socket's frames are paid for from
    // the budget before they are read, so many clients sending at once are read in turn.
    let config = WebSocketConfig::default()
        .max_message_size(Some(LARGEST_MESSAGE))
        .max_frame_size(Some(LARGEST_MESSAGE))
        .write_buffer_size(0);
    let (stream, gate) = InputBudget::process().gate(stream, LARGEST_MESSAGE);
    match tokio_tungstenite::accept_hdr_async_with_config(stream, callback, Some(config)).await {
        Ok(socket) => {
            let session: BoxFuture<'static, ()> = match serving.recorded {
                Some(recorded) => Box::pin(
                    ServedConnection::new(recorded, serving.speed, serving.state).run(socket, gate),
                ),
                None => Box::pin(
                    MockConnection::new(flavor, version, serving.speed, serving.state, key)
                        .run(socket, gate),
                ),
            };
            Some(session)
        }
        Err(e) => {
            debug!(%peer, "upgrade refused: {e}");
            None
        }
    }
}

/// Where the client put its key, and the key: the `x-goog-api-key` header or the `key` query
/// parameter (the SDKs use one or the other), or a Vertex client's access token. Its
/// resumption handles are bound to the key, compared as sent (API keys need no
/// percent-encoding).
fn client_key(request: &Request) -> Option<(&'static str, ApiKey)> {
    let header = |name: &str| {
        request
            .headers()
            .get(name)
            .and_then(|value| value.to_str().ok())
    };
    let query = |name: &str| {
        request
            .uri()
            .query()
            .into_iter()
            .flat_map(|q| q.split('&'))
            .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
    };
    [
        ("x-goog-api-key header", header("x-goog-api-key")),
        ("key query parameter", query("key")),
        ("access_token query parameter", query("access_token")),
        ("authorization header", header("authorization")),
    ]
    .into_iter()
    .find_map(|(placement, given)| Some((placement, ApiKey::new(given?)?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_read_where_the_sdks_put_it() {
        let key_of = |uri: &str, headers: &[(&str, &str)]| {
            let mut builder = Request::builder().uri(uri);
            for (name, value) in headers {
                builder = builder.header(*name, *value);
            }
            client_key(&builder.body(()).unwrap())
        };
        let path = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent";
        let a = ApiKey::new("key-A");
        let found = key_of(&format!("{path}?alt=x&key=key-A"), &[]).unwrap();
        assert_eq!((found.0, Some(found.1)), ("key query parameter", a.clone()));
        let found = key_of(path, &[("x-goog-api-key", "key-A")]).unwrap();
        assert_eq!((found.0, Some(found.1)), ("x-goog-api-key header", a));
        // `keys=` is not `key=`; an empty key is no key.
        assert!(key_of(&format!("{path}?keys=x&key="), &[]).is_none());
        assert_eq!(
            key_of(&format!("{path}?access_token=t"), &[]).map(|f| f.0),
            Some("access_token query parameter")
        );
        assert!(key_of(path, &[]).is_none());
    }
}
