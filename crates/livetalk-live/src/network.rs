//! What the network asks of every connection livetalk opens, read from the environment once:
//! the certificates trusted (the operating system's store, or `SSL_CERT_FILE` /
//! `SSL_CERT_DIR` when set, together with the bundled web roots) in the one TLS client
//! configuration, and the proxy. The WebSocket dial and the token requests both use it, so a
//! company's TLS-inspecting proxy and its CA work the same for both.

use std::sync::{Arc, OnceLock};

use tracing::{info, warn};

use super::proxy::Proxy;

/// The TLS settings and the proxy of this process.
#[derive(Debug)]
pub(crate) struct Network {
    pub(crate) tls: Arc<rustls::ClientConfig>,
    /// `None` when no proxy variable is set.
    pub(crate) proxy: Option<Proxy>,
    /// Why certificates from the system store or `SSL_CERT_FILE` / `SSL_CERT_DIR` could not
    /// be read (empty when all were), for the message of a certificate that is not trusted.
    pub(crate) trust_problems: Vec<String>,
}

/// This process's network settings, read at first use; an unusable proxy variable is an error
/// every connection reports (never a silent direct connection).
pub(crate) fn network() -> Result<&'static Network, String> {
    static NETWORK: OnceLock<Result<Network, String>> = OnceLock::new();
    NETWORK
        .get_or_init(|| {
            let proxy = Proxy::from_env(&|name| std::env::var(name).ok())?;
            if let Some(proxy) = &proxy {
                info!(proxy = %proxy.address, from = proxy.var, "connections go through a proxy");
            }
            let (tls, trust_problems) = tls_config();
            Ok(Network {
                tls,
                proxy,
                trust_problems,
            })
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// The client TLS settings: the bundled web roots and the system's (or `SSL_CERT_FILE` /
/// `SSL_CERT_DIR`'s) certificates, TLS 1.2 and 1.3. A store that cannot be read leaves the
/// web roots, and says why in the log.
fn tls_config() -> (Arc<rustls::ClientConfig>, Vec<String>) {
    install_crypto_provider();
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let native = rustls_native_certs::load_native_certs();
    let (added, ignored) = roots.add_parsable_certificates(native.certs);
    let problems: Vec<String> = native.errors.iter().map(ToString::to_string).collect();
    for problem in &problems {
        warn!("trusted certificates: {problem}");
    }
    info!(
        added,
        ignored, "trusting the bundled web roots and the system's certificates"
    );
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    (Arc::new(config), problems)
}

/// Installs ring as rustls's process-wide crypto provider (no cmake, no OpenSSL), once.
/// [`connect`](crate::connect) does this itself; a program that builds its own rustls
/// configuration first (a TLS server beside the client, as the mock is) calls it before.
pub fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
