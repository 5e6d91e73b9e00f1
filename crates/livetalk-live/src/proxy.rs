//! HTTP proxies: which connections go through one (`HTTPS_PROXY` / `https_proxy`, else
//! `ALL_PROXY` / `all_proxy`, minus the hosts in `NO_PROXY`, matched as curl does), and the
//! CONNECT request that opens a tunnel through it. tokio-tungstenite has no proxy support, so
//! the tunnel is opened here, before the TLS handshake, as other WebSocket clients do.

use hyper_util::client::proxy::matcher::Matcher;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::http::{HeaderValue, Uri};

use super::address::Address;

/// The variables naming the proxy, in the order they are looked at.
const PROXY_VARS: [&str; 4] = ["HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"];
const NO_PROXY_VARS: [&str; 2] = ["NO_PROXY", "no_proxy"];
/// curl's default proxy port.
const DEFAULT_PORT: u16 = 1080;
/// A proxy's answer to CONNECT larger than this is not an answer.
const MAX_ANSWER_BYTES: usize = 16 * 1024;

/// The proxy named by the environment and the hosts it is not used for.
pub(crate) struct Proxy {
    /// Where the proxy listens (never with the credentials).
    pub(crate) address: Address,
    /// The variable it came from, for messages.
    pub(crate) var: &'static str,
    /// `http://[user:password@]host:port`: the proxy as the token requests' client takes it.
    url: String,
    authorization: Option<HeaderValue>,
    matcher: Matcher,
    /// `NO_PROXY=*`: curl goes direct to every host, IP addresses included (the matcher's
    /// `*` covers names only).
    bypass_all: bool,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("address", &self.address)
            .field("var", &self.var)
            .field("credentials", &self.authorization.is_some())
            .finish()
    }
}

impl Proxy {
    /// The proxy the environment names, if any; `env` reads a variable. A proxy that is named
    /// but cannot be used is an error, never a silent direct connection. Its password is
    /// remembered as a secret as soon as it is read.
    pub(crate) fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<Option<Proxy>, String> {
        let Some((var, value)) = PROXY_VARS.iter().find_map(|var| {
            env(var)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
                .map(|v| (*var, v))
        }) else {
            return Ok(None);
        };
        let no_proxy = NO_PROXY_VARS
            .iter()
            .find_map(|var| env(var))
            .unwrap_or_default();
        Proxy::parse(var, &value, &no_proxy).map(Some)
    }

    fn parse(var: &'static str, value: &str, no_proxy: &str) -> Result<Proxy, String> {
        let unusable = |why: &str| format!("{var} is not a usable proxy URL: {why}.");
        let uri: Uri = value
            .parse()
            .map_err(|_| unusable("it does not parse as a URL"))?;
        match uri.scheme_str() {
            None | Some("http") => {}
            Some(other) => {
                return Err(unusable(&format!(
                    "livetalk speaks to proxies in plain HTTP (http://host:port), not {other}://"
                )));
            }
        }
        let authority = uri
            .authority()
            .ok_or_else(|| unusable("it names no host"))?;
        let userinfo = authority
            .as_str()
            .rsplit_once('@')
            .map(|(userinfo, _)| userinfo);
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        if host.is_empty() {
            return Err(unusable("it names no host"));
        }
        // The `http` crate parses any digits as a port and gives none for one past 65535:
        // such a proxy must be refused, not reached on the default port.
        let host_and_port = authority.as_str().rsplit('@').next().unwrap_or_default();
        let port = match host_and_port.rsplit_once(':') {
            Some((_, port)) if !host_and_port.ends_with(']') && !port.is_empty() => {
                match port.parse::<u16>() {
                    Ok(port) if port > 0 => port,
                    _ => {
                        return Err(unusable(&format!(
                            "its port {port} is not a port (1 to 65535)"
                        )));
                    }
                }
            }
            _ => DEFAULT_PORT,
        };
        let address = Address {
            host,
            port,
            tls: false,
        };
        let authorization = match userinfo {
            Some(userinfo) => {
                let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
                let decode = |text: &str| {
                    percent_encoding::percent_decode_str(text)
                        .decode_utf8()
                        .map(|t| t.into_owned())
                        .map_err(|_| unusable("its user or password is not UTF-8 once decoded"))
                };
                let (user, decoded) = (decode(user)?, decode(password)?);
                crate::redact::remember(password);
                crate::redact::remember(&decoded);
                let encoded = base64::Engine::encode(
                    &base64::engine::general_purpose::STANDARD,
                    format!("{user}:{decoded}"),
                );
                crate::redact::remember(&encoded);
                let mut value = HeaderValue::from_str(&format!("Basic {encoded}"))
                    .map_err(|_| unusable("its credentials cannot be sent in a header"))?;
                value.set_sensitive(true);
                Some(value)
            }
            None => None,
        };
        let url = match userinfo {
            Some(userinfo) => format!("http://{userinfo}@{address}"),
            None => format!("http://{address}"),
        };
        let bypass_all = no_proxy.split(',').any(|entry| entry.trim() == "*");
        let matcher = Matcher::builder()
            .http(url.clone())
            .https(url.clone())
            .no(no_proxy.to_owned())
            .build();
        Ok(Proxy {
            address,
            var,
            url,
            authorization,
            matcher,
            bypass_all,
        })
    }

    /// Whether a connection to `target` goes through the proxy: not to the hosts in
    /// `NO_PROXY`, and never to a loopback address (the proxy could not reach this machine's;
    /// the embedded demo model lives there).
    pub(crate) fn applies_to(&self, target: &Address) -> bool {
        let loopback = target
            .host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
        !self.bypass_all
            && !loopback
            && format!("https://{target}/")
                .parse::<Uri>()
                .is_ok_and(|uri| self.matcher.intercept(&uri).is_some())
    }

    /// Whether the proxy URL carries a user and password.
    pub(crate) fn has_credentials(&self) -> bool {
        self.authorization.is_some()
    }

    /// The proxy URL with its credentials, for the token requests' HTTP client only.
    pub(crate) fn expose_url(&self) -> &str {
        &self.url
    }

    /// Asks the proxy for a tunnel to `target` on `stream`. Only the answer's header is read,
    /// a byte at a time, so whatever follows it stays in the socket for the TLS handshake or
    /// the upgrade.
    pub(crate) async fn open_tunnel(
        &self,
        stream: &mut TcpStream,
        target: &Address,
    ) -> Result<(), String> {
        let mut request = format!(
            "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\nUser-Agent: livetalk/{}\r\n",
            env!("CARGO_PKG_VERSION")
        );
        if let Some(value) = &self.authorization {
            request.push_str("Proxy-Authorization: ");
            request.push_str(value.to_str().unwrap_or_default());
            request.push_str("\r\n");
        }
        request.push_str("\r\n");
        let proxy = &self.address;
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|e| super::close::describe_io_error(&e, &format!("the proxy {proxy}")))?;
        let mut answer = Vec::with_capacity(256);
        let status = loop {
            let mut byte = [0u8; 1];
            let read = stream
                .read(&mut byte)
                .await
                .map_err(|e| super::close::describe_io_error(&e, &format!("the proxy {proxy}")))?;
            if read == 0 {
                return Err(format!(
                    "The proxy {proxy} ({}) hung up instead of answering the request for a tunnel to {target}.",
                    self.var
                ));
            }
            answer.push(byte[0]);
            if answer.ends_with(b"\r\n\r\n") || answer.ends_with(b"\n\n") {
                let mut headers = [httparse::EMPTY_HEADER; 64];
                let mut response = httparse::Response::new(&mut headers);
                match response.parse(&answer) {
                    Ok(httparse::Status::Complete(_)) => {
                        break (
                            response.code.unwrap_or(0),
                            response.reason.unwrap_or("").to_owned(),
                        );
                    }
                    Ok(httparse::Status::Partial) => {}
                    Err(_) => return Err(self.not_http(target)),
                }
            }
            if answer.len() > MAX_ANSWER_BYTES {
                return Err(format!(
                    "The proxy {proxy} ({}) sent more than {} KiB without ending its answer to the request for a tunnel to {target}; is it an HTTP proxy?",
                    self.var,
                    MAX_ANSWER_BYTES >> 10
                ));
            }
        };
        match status {
            (200..=299, _) => Ok(()),
            (407, _) if self.authorization.is_some() => Err(format!(
                "The proxy {proxy} refused the user and password in {} (407 Proxy Authentication Required).",
                self.var
            )),
            (407, _) => Err(format!(
                "The proxy {proxy} asks for a user and password (407 Proxy Authentication Required): give them in {} as http://user:password@{proxy}.",
                self.var
            )),
            (code, reason) => Err(crate::excerpt::sentence(&format!(
                "The proxy {proxy} refused a tunnel to {target}: {code} {}",
                crate::excerpt::bounded(reason.trim(), crate::excerpt::SUMMARY)
            ))),
        }
    }

    fn not_http(&self, target: &Address) -> String {
        format!(
            "The proxy {} ({}) did not answer the request for a tunnel to {target} in HTTP; is it an HTTP proxy?",
            self.address, self.var
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proxy(vars: &[(&str, &str)]) -> Result<Option<Proxy>, String> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Proxy::from_env(&|name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
    }

    fn target(host: &str, port: u16) -> Address {
        Address {
            host: host.to_owned(),
            port,
            tls: true,
        }
    }

    #[test]
    fn https_proxy_comes_before_all_proxy_and_no_proxy_is_matched_as_curl_does() {
        assert!(proxy(&[]).unwrap().is_none());
        assert!(proxy(&[("HTTP_PROXY", "http://p:1")]).unwrap().is_none());
        let p = proxy(&[
            ("ALL_PROXY", "http://all:2"),
            ("https_proxy", "http://corp.example:3128"),
            (
                "NO_PROXY",
                "localhost, .internal.example,10.0.0.0/8, exact.example",
            ),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(p.var, "https_proxy");
        assert_eq!(p.address.to_string(), "corp.example:3128");
        assert!(p.applies_to(&target("generativelanguage.googleapis.com", 443)));
        for direct in [
            "localhost",
            "a.internal.example",
            "internal.example",
            "10.1.2.3",
            "exact.example",
            "sub.exact.example",
        ] {
            assert!(!p.applies_to(&target(direct, 443)), "{direct}");
        }
        assert!(p.applies_to(&target("notexact.example", 443)));
        assert!(p.applies_to(&target("11.1.2.3", 443)));
        assert!(p.applies_to(&target("localhost.example", 443)));
        for loopback in ["127.0.0.1", "127.9.9.9", "::1"] {
            assert!(!p.applies_to(&target(loopback, 9000)), "{loopback}");
        }
        let everything = proxy(&[("ALL_PROXY", "p.example"), ("no_proxy", "*")])
            .unwrap()
            .unwrap();
        assert_eq!(everything.address.to_string(), "p.example:1080");
        assert!(!everything.applies_to(&target("anything.example", 443)));
        assert!(!everything.applies_to(&target("192.0.2.1", 443)));
    }

    /// A proxy that reads one request head and writes `answer` in pieces; hands back the head.
    async fn proxy_answering(
        answer: &'static [&'static [u8]],
    ) -> (u16, tokio::task::JoinHandle<String>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let served = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            while !head.ends_with(b"\r\n\r\n") {
                let mut byte = [0u8; 1];
                assert_eq!(stream.read(&mut byte).await.unwrap(), 1);
                head.push(byte[0]);
            }
            for piece in answer {
                stream.write_all(piece).await.unwrap();
                stream.flush().await.unwrap();
                tokio::task::yield_now().await;
            }
            String::from_utf8(head).unwrap()
        });
        (port, served)
    }

    #[tokio::test]
    async fn the_tunnel_takes_any_2xx_in_pieces_and_leaves_what_follows_in_the_socket() {
        let (port, served) = proxy_answering(&[
            b"HTTP/1.0 2",
            b"04 Whatever\r\nVia: x\r",
            b"\n\r\nfirst bytes of the server",
        ])
        .await;
        let p = Proxy::parse(
            "HTTPS_PROXY",
            &format!("http://u:pw-123456@127.0.0.1:{port}"),
            "",
        )
        .unwrap();
        let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let target = target("live.example", 443);
        p.open_tunnel(&mut stream, &target).await.unwrap();
        let mut rest = String::new();
        stream.read_to_string(&mut rest).await.unwrap();
        assert_eq!(rest, "first bytes of the server");
        let head = served.await.unwrap();
        assert!(
            head.starts_with("CONNECT live.example:443 HTTP/1.1\r\nHost: live.example:443\r\n"),
            "{head}"
        );
        assert!(
            head.contains("Proxy-Authorization: Basic dTpwdy0xMjM0NTY=\r\n"),
            "{head}"
        );
    }

    #[tokio::test]
    async fn refusals_and_garbage_are_said_plainly() {
        for (answer, expected) in [
            (
                &[b"HTTP/1.1 403 Forbidden by policy\r\n\r\n" as &[u8]]
                    as &'static [&'static [u8]],
                "refused a tunnel to live.example:443: 403 Forbidden by policy.",
            ),
            (
                &[b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n"],
                "asks for a user and password (407 Proxy Authentication Required): give them in HTTPS_PROXY",
            ),
            (
                &[b"SSH-2.0-OpenSSH\r\n\r\n"],
                "did not answer the request for a tunnel to live.example:443 in HTTP",
            ),
            (&[b"HTTP/1.1 200"], "hung up instead of answering"),
            (
                &[b"HTTP/1.1 200 OK\r\n", &[b'X'; 20 << 10]],
                "sent more than 16 KiB without ending its answer to the request for a tunnel to live.example:443",
            ),
        ] {
            let (port, _served) = proxy_answering(answer).await;
            let p = Proxy::parse("HTTPS_PROXY", &format!("127.0.0.1:{port}"), "").unwrap();
            let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
            let error = p
                .open_tunnel(&mut stream, &target("live.example", 443))
                .await
                .unwrap_err();
            assert!(error.contains(expected), "{error}");
            assert!(
                error.contains(&format!("The proxy 127.0.0.1:{port}")),
                "{error}"
            );
        }
    }

    #[test]
    fn a_named_proxy_that_cannot_be_used_is_an_error_not_a_direct_connection() {
        for bad in ["socks5://p:1080", "https://p:443", "http://"] {
            let error = proxy(&[("HTTPS_PROXY", bad)]).unwrap_err();
            assert!(
                error.starts_with("HTTPS_PROXY is not a usable proxy URL"),
                "{error}"
            );
        }
        for bad in ["http://p:99999", "p:0", "http://u:pw@[::1]:65536"] {
            let error = proxy(&[("HTTPS_PROXY", bad)]).unwrap_err();
            assert!(error.contains("is not a port (1 to 65535)"), "{error}");
        }
        for good in ["http://p:65535", "http://[::1]", "http://u:p@h:8080"] {
            assert!(proxy(&[("HTTPS_PROXY", good)]).is_ok(), "{good}");
        }
    }

    #[test]
    fn credentials_are_percent_decoded_sent_as_basic_and_remembered_as_secrets() {
        let p = proxy(&[("HTTPS_PROXY", "http://me%40corp:pa%3Ass-w0rd@[::1]:8080")])
            .unwrap()
            .unwrap();
        assert_eq!(p.address.to_string(), "[::1]:8080");
        let header = p.authorization.clone().unwrap();
        assert!(header.is_sensitive());
        let encoded = header.to_str().unwrap().strip_prefix("Basic ").unwrap();
        let decoded =
            base64::Engine::decode(&base64::engine::general_purpose::STANDARD, encoded).unwrap();
        assert_eq!(decoded, b"me@corp:pa:ss-w0rd");
        for shown in [
            format!("{p:?}"),
            crate::redact::scrub("pa:ss-w0rd pa%3Ass-w0rd").into(),
        ] {
            assert!(!shown.contains("ss-w0rd"), "{shown}");
        }
    }
}
