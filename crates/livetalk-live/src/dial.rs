//! Dialling a WebSocket server in named stages (look-up, TCP, the proxy's tunnel, TLS,
//! upgrade) under one deadline, so a server that stalls at any of them costs a bounded wait
//! and the user is told the host, the port and the stage it stalled at.

use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::handshake::client::{Request, Response};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{self};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::address::Address;
use super::budget::{Gate, Gated, InputBudget};
use super::close::describe_io_error;
use super::network::{Network, network};

/// An upgraded socket, plain or TLS, read through the process's input budget.
pub(crate) type Socket = WebSocketStream<Gated<MaybeTlsStream<TcpStream>>>;

/// The steps of getting a session, in order; the deadline names the one it ran out in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    Resolve,
    Tcp,
    /// Asking an HTTP proxy for a tunnel (CONNECT).
    Proxy,
    Tls,
    Upgrade,
    Setup,
}

impl Stage {
    /// What the stage is, for "… while {what}".
    pub(crate) fn doing(self) -> &'static str {
        match self {
            Stage::Resolve => "looking up the host",
            Stage::Tcp => "opening the TCP connection",
            Stage::Proxy => "waiting for the proxy to open a tunnel",
            Stage::Tls => "in the TLS handshake",
            Stage::Upgrade => "waiting for the WebSocket upgrade",
            Stage::Setup => "waiting for the session to be set up",
        }
    }

    /// The likely reason a server stalls here.
    fn hint(self) -> &'static str {
        match self {
            Stage::Resolve => "Check the host name and your DNS.",
            Stage::Tcp => "A firewall may be dropping the connection.",
            Stage::Proxy => {
                "Check the proxy in HTTPS_PROXY (or ALL_PROXY); hosts in NO_PROXY are reached directly."
            }
            Stage::Tls => {
                "The server may not speak TLS: for a plain server use ws:// instead of wss://."
            }
            Stage::Upgrade => {
                "It accepted the connection but never answered the upgrade; is it a WebSocket server?"
            }
            Stage::Setup => "The server may be overloaded or not a Live API endpoint.",
        }
    }
}

/// Why dialling failed: the deadline ran out in a stage, or a stage failed (its message names
/// what failed, so the stage itself is not kept).
#[derive(Debug)]
pub(crate) enum DialError {
    Deadline(Stage),
    /// The server answered the upgrade with an HTTP error status.
    Http(u16),
    Failed(String),
}

/// The sentence for a deadline that ran out `timeout` after the start, in `stage`.
pub(crate) fn deadline_message(target: &Address, stage: Stage, timeout: Duration) -> String {
    format!(
        "No answer from {target} within {} s ({}). {}",
        timeout.as_secs_f32(),
        stage.doing(),
        stage.hint()
    )
}

/// Runs one stage under the deadline.
async fn stage<T>(
    stage: Stage,
    deadline: Instant,
    work: impl Future<Output = Result<T, String>>,
) -> Result<T, DialError> {
    match tokio::time::timeout_at(deadline, work).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(message)) => Err(DialError::Failed(message)),
        Err(_) => Err(DialError::Deadline(stage)),
    }
}

/// Looks up, connects (through the proxy when one applies), shakes hands and upgrades, all
/// before `deadline`. The socket's frames are paid for from the input budget before they are
/// read; the [`Gate`] has what was held for the message read last.
pub(crate) async fn dial(
    request: Request,
    target: &Address,
    config: WebSocketConfig,
    deadline: Instant,
) -> Result<(Socket, Response, Gate), DialError> {
    let network = network().map_err(DialError::Failed)?;
    let proxy = network.proxy.as_ref().filter(|p| p.applies_to(target));
    // With a proxy, the proxy resolves the target's name.
    let (hop, hop_name) = match proxy {
        Some(proxy) => (&proxy.address, format!("the proxy {}", proxy.address)),
        None => (target, target.to_string()),
    };
    let addresses = stage(Stage::Resolve, deadline, async {
        let found: Vec<_> = tokio::net::lookup_host((hop.host.as_str(), hop.port))
            .await
            .map_err(|e| crate::excerpt::sentence(&format!("Could not resolve {}: {e}", hop.host)))?
            .collect();
        if found.is_empty() {
            return Err(format!("{} has no address.", hop.host));
        }
        Ok(found)
    })
    .await?;
    let mut tcp = stage(Stage::Tcp, deadline, async {
        let mut last = None;
        for address in addresses {
            match TcpStream::connect(address).await {
                Ok(stream) => return Ok(stream),
                Err(e) => last = Some(e),
            }
        }
        Err(match last {
            Some(e) => describe_io_error(&e, &hop_name),
            None => format!("Could not connect to {hop_name}."),
        })
    })
    .await?;
    if let Some(proxy) = proxy {
        stage(Stage::Proxy, deadline, proxy.open_tunnel(&mut tcp, target)).await?;
    }
    // Frames are small and latency matters more than packing them.
    let _ = tcp.set_nodelay(true);
    let stream = if target.tls {
        let tls = stage(Stage::Tls, deadline, async {
            let name = rustls::pki_types::ServerName::try_from(target.host.clone())
                .map_err(|e| format!("{} is not a valid TLS server name: {e}", target.host))?;
            tokio_rustls::TlsConnector::from(network.tls().clone())
                .connect(name, tcp)
                .await
                .map_err(|e| tls_failure(target, &e, network))
        })
        .await?;
        MaybeTlsStream::Rustls(tls)
    } else {
        MaybeTlsStream::Plain(tcp)
    };
    let max_frame = config.max_frame_size.unwrap_or(usize::MAX);
    let (stream, gate) = InputBudget::process().gate(stream, max_frame);
    match tokio::time::timeout_at(
        deadline,
        tokio_tungstenite::client_async_with_config(request, stream, Some(config)),
    )
    .await
    {
        Ok(Ok((socket, response))) => Ok((socket, response, gate)),
        Ok(Err(tungstenite::Error::Http(response))) => {
            Err(DialError::Http(response.status().as_u16()))
        }
        Ok(Err(e)) => Err(DialError::Failed(upgrade_failure(target, e))),
        Err(_) => Err(DialError::Deadline(Stage::Upgrade)),
    }
}

/// A failed handshake; a plain server answering a TLS hello is the usual cause, and says so
/// by resetting, hanging up or sending bytes that are no TLS record. A certificate from an
/// unknown authority is often a company proxy's, whose CA the user can name.
fn tls_failure(target: &Address, error: &std::io::Error, network: &Network) -> String {
    use std::io::ErrorKind;
    let plain_server = matches!(
        error.kind(),
        ErrorKind::ConnectionReset | ErrorKind::UnexpectedEof | ErrorKind::ConnectionAborted
    ) || error.to_string().contains("corrupt message");
    if let Some(problem) = certificate_problem(target, error) {
        format!("The TLS handshake with {target} failed: {problem}")
    } else if plain_server {
        format!(
            "The TLS handshake with {target} failed ({error}). The server may not speak TLS: for a plain server use ws:// instead of wss://."
        )
    } else if error.to_string().contains("UnknownIssuer") {
        let unread = if network.trust_problems().is_empty() {
            String::new()
        } else {
            format!(
                " (Some trusted certificates could not be read: {}.)",
                network.trust_problems().join("; ")
            )
        };
        format!(
            "The TLS handshake with {target} failed: its certificate is not signed by an authority livetalk trusts. If a company proxy inspects TLS, give its CA certificate in SSL_CERT_FILE (or a folder in SSL_CERT_DIR).{unread}"
        )
    } else {
        crate::excerpt::sentence(&format!("The TLS handshake with {target} failed: {error}"))
    }
}

/// What is wrong with the certificate a server presented, in words (rustls names its checks by
/// Rust type; the unknown authority is left to the caller, which knows the trust store).
fn certificate_problem(target: &Address, error: &std::io::Error) -> Option<String> {
    use rustls::CertificateError as Bad;
    let rustls::Error::InvalidCertificate(bad) =
        error.get_ref()?.downcast_ref::<rustls::Error>()?
    else {
        return None;
    };
    let host = &target.host;
    Some(match bad {
        Bad::UnknownIssuer => return None,
        Bad::Expired | Bad::ExpiredContext { .. } => {
            "its certificate has expired (or this machine's clock is wrong).".to_owned()
        }
        Bad::NotValidYet | Bad::NotValidYetContext { .. } => {
            "its certificate is not valid yet: check this machine's clock.".to_owned()
        }
        Bad::NotValidForName | Bad::NotValidForNameContext { .. } => {
            format!("its certificate is not for {host}. Check the host name in the URL.")
        }
        Bad::Revoked => "its certificate has been revoked.".to_owned(),
        Bad::BadEncoding | Bad::BadSignature => "its certificate is damaged.".to_owned(),
        Bad::Other(other) if format!("{other:?}").contains("CaUsedAsEndEntity") => {
            "it presented a certificate authority's own certificate instead of a server \
             certificate. The server needs a certificate of its own, signed by that authority \
             (the authority's certificate is what SSL_CERT_FILE names)."
                .to_owned()
        }
        _ => "livetalk does not accept its certificate (it fails a check rustls makes).".to_owned(),
    })
}

/// A failed upgrade; a TLS server answering plain HTTP is the usual cause of garbage.
fn upgrade_failure(target: &Address, error: tungstenite::Error) -> String {
    match error {
        tungstenite::Error::Io(e) => crate::excerpt::sentence(&format!(
            "{target} hung up during the WebSocket upgrade ({e})"
        )),
        tungstenite::Error::HttpFormat(_)
        | tungstenite::Error::Protocol(tungstenite::error::ProtocolError::HttparseError(_)) => {
            format!(
                "{target} did not answer the WebSocket upgrade with HTTP. If it speaks TLS, use wss:// instead of ws://."
            )
        }
        tungstenite::Error::ConnectionClosed | tungstenite::Error::AlreadyClosed => {
            format!("{target} hung up during the WebSocket upgrade.")
        }
        // tungstenite's words for an answer past its 64 KiB of headers (or in too many
        // pieces): nothing a WebSocket server sends.
        tungstenite::Error::AttackAttempt => format!(
            "{target} answered the WebSocket upgrade with more than the 64 KiB of headers livetalk reads; it is not a WebSocket server livetalk can use."
        ),
        other => crate::excerpt::sentence(&format!(
            "The WebSocket upgrade with {target} failed: {other}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;

    fn target(url: &str) -> Address {
        Address::of(&url.into_client_request().unwrap()).unwrap()
    }

    #[test]
    fn targets_name_host_and_port_with_the_schemes_default() {
        assert_eq!(
            target("wss://example.com/ws").to_string(),
            "example.com:443"
        );
        assert_eq!(
            target("ws://127.0.0.1:9000?x=1").to_string(),
            "127.0.0.1:9000"
        );
        assert_eq!(target("ws://[::1]:9000/").to_string(), "[::1]:9000");
        assert!(!target("ws://localhost").tls);
    }

    #[test]
    fn every_stage_has_a_deadline_sentence_naming_the_target() {
        let t = target("wss://example.com/ws");
        for stage in [
            Stage::Resolve,
            Stage::Tcp,
            Stage::Proxy,
            Stage::Tls,
            Stage::Upgrade,
            Stage::Setup,
        ] {
            let text = deadline_message(&t, stage, Duration::from_secs(10));
            assert!(
                text.starts_with("No answer from example.com:443 within 10 s"),
                "{text}"
            );
            assert!(text.contains(stage.doing()), "{text}");
        }
    }
}
