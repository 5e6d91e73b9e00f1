//! Where a connection goes: host, port and whether it speaks TLS, as a URL names them and as
//! messages show them (`host:port`).

use tokio_tungstenite::tungstenite::handshake::client::Request;

/// Where a request goes, as the user should read it: `host:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Address {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) tls: bool,
}

impl Address {
    pub(crate) fn of(request: &Request) -> Result<Address, String> {
        let uri = request.uri();
        let tls = match uri.scheme_str() {
            Some("wss") => true,
            Some("ws") => false,
            other => {
                return Err(format!(
                    "Unsupported URL scheme {:?}: use ws:// or wss://.",
                    other.unwrap_or("")
                ));
            }
        };
        let host = uri
            .host()
            .ok_or_else(|| "The URL has no host.".to_owned())?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
        Ok(Address { host, port, tls })
    }
}

impl std::fmt::Display for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}
