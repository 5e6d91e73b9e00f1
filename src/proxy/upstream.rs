//! The request an app's upgrade becomes upstream: the same path, API version and query, the
//! app's own key or token as it sent them (`key=`, `x-goog-api-key`, `access_token=`,
//! `Authorization`), the proxy's own key only when the app sent none, and nothing of the
//! proxy's (its `--token`, the hop's WebSocket headers). Every credential seen is remembered by
//! `livetalk_live::redact` before anything can quote it.

use hyper::HeaderMap;
use hyper::http::HeaderValue;
use livetalk_live::redact;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::handshake::client::Request;

use crate::bridge::server::{constant_time_eq, percent_decode};

/// Headers that belong to the hop between the app and the proxy, never passed on.
const HOP_HEADERS: [&str; 11] = [
    "host",
    "connection",
    "upgrade",
    "sec-websocket-key",
    "sec-websocket-version",
    "sec-websocket-extensions",
    "sec-websocket-protocol",
    "sec-websocket-accept",
    "content-length",
    "transfer-encoding",
    "keep-alive",
];

/// Query parameters that carry a credential for the Live API.
const CREDENTIAL_PARAMETERS: [&str; 2] = ["key", "access_token"];

/// An app's upgrade, ready to go upstream.
#[derive(Debug)]
pub struct Forward {
    pub request: Request,
    /// The path and query as the app asked, its credentials masked: for people.
    pub shown: String,
    /// `v1`, `v1beta` or `v1alpha`, read from the path (`v1beta` when it names none).
    pub api_version: String,
    /// The app sent no key or token, so the proxy's own key went instead.
    pub proxy_key: bool,
}

/// The upstream request for an app that asked for `path_and_query` with `headers`, on the
/// Live server at `base` (`wss://host[:port]`). `token` is the proxy's `--token`, taken out of
/// the query and the `Authorization` header wherever it was; `key` the proxy's own key.
pub fn forward(
    base: &str,
    path_and_query: &str,
    headers: &HeaderMap,
    token: Option<&str>,
    key: Option<&str>,
) -> Result<Forward, String> {
    let (path, query) = path_and_query
        .split_once('?')
        .unwrap_or((path_and_query, ""));
    redact::remember_url_credentials(path_and_query);
    let is_token = |given: &str| {
        token.is_some_and(|t| constant_time_eq(given.trim().as_bytes(), t.as_bytes()))
    };
    let mut kept = Vec::new();
    let mut shown = Vec::new();
    let mut has_credential = false;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        if name == "token" && is_token(&percent_decode(value)) {
            continue;
        }
        let credential = CREDENTIAL_PARAMETERS.contains(&name);
        has_credential |= credential && !value.is_empty();
        kept.push(pair);
        shown.push(if credential {
            format!("{name}=[redacted]")
        } else {
            pair.to_owned()
        });
    }
    let join = |parts: Vec<String>| {
        if parts.is_empty() {
            path.to_owned()
        } else {
            format!("{path}?{}", parts.join("&"))
        }
    };
    let upstream_path = join(kept.iter().map(|p| (*p).to_owned()).collect());
    let url = format!("{}{upstream_path}", base_of(base));
    let mut request = url
        .as_str()
        .into_client_request()
        .map_err(|e| format!("The path {} cannot go upstream: {e}", redact::scrub(path)))?;
    for (name, value) in headers {
        let lower = name.as_str();
        if HOP_HEADERS.contains(&lower) {
            continue;
        }
        let text = value.to_str().unwrap_or_default();
        if lower == "authorization" {
            let credential = text
                .split_once(' ')
                .map_or(text, |(_, credential)| credential);
            if is_token(credential) {
                continue;
            }
            redact::remember(credential);
            has_credential = true;
        } else if lower == "x-goog-api-key" {
            redact::remember(text);
            has_credential |= !text.trim().is_empty();
        } else if lower.contains("key") || lower.contains("token") || lower.contains("auth") {
            redact::remember(text);
        }
        request.headers_mut().append(name.clone(), value.clone());
    }
    let proxy_key = !has_credential && key.is_some();
    if let Some(key) = key.filter(|_| proxy_key)
        && let Ok(value) = HeaderValue::from_str(key)
    {
        request.headers_mut().insert("x-goog-api-key", value);
    }
    if !request.headers().contains_key("user-agent") {
        request.headers_mut().insert(
            "user-agent",
            HeaderValue::from_static(concat!("livetalk-proxy/", env!("CARGO_PKG_VERSION"))),
        );
    }
    Ok(Forward {
        request,
        shown: join(shown),
        api_version: api_version(path).to_owned(),
        proxy_key,
    })
}

/// The API version a Live API path names (`…generativelanguage.v1alpha.GenerativeService…`).
fn api_version(path: &str) -> &'static str {
    for (name, version) in [
        (".v1alpha.", "v1alpha"),
        (".v1beta.", "v1beta"),
        (".v1.", "v1"),
    ] {
        if path.contains(name) {
            return version;
        }
    }
    "v1beta"
}

/// `scheme://authority` of an endpoint URL: the app's own path goes after it.
pub fn base_of(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("wss", url));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    format!("{scheme}://{authority}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATH: &str =
        "/ws/google.ai.generativelanguage.v1alpha.GenerativeService.BidiGenerateContentConstrained";

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn the_apps_path_and_credential_go_up_as_sent_and_the_proxy_token_does_not() {
        let forward = forward(
            "wss://example.com",
            &format!("{PATH}?access_token=auth_tokens%2Fabc123&token=proxy-secret"),
            &headers(&[("host", "127.0.0.1:9100"), ("sec-websocket-key", "x")]),
            Some("proxy-secret"),
            Some("proxy-own-key"),
        )
        .unwrap();
        assert_eq!(
            forward.request.uri().to_string(),
            format!("wss://example.com{PATH}?access_token=auth_tokens%2Fabc123")
        );
        assert_eq!(forward.api_version, "v1alpha");
        assert!(!forward.proxy_key);
        assert!(forward.request.headers().get("x-goog-api-key").is_none());
        assert_eq!(forward.shown, format!("{PATH}?access_token=[redacted]"));
        assert_eq!(forward.request.headers()["host"], "example.com");
    }

    #[test]
    fn an_app_without_a_credential_gets_the_proxys_key_in_a_header() {
        let forward = forward(
            "ws://127.0.0.1:9000/ignored",
            "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent",
            &headers(&[("authorization", "Bearer proxy-secret")]),
            Some("proxy-secret"),
            Some("proxy-own-key"),
        )
        .unwrap();
        assert!(forward.proxy_key);
        assert_eq!(forward.request.headers()["x-goog-api-key"], "proxy-own-key");
        assert!(forward.request.headers().get("authorization").is_none());
        let with_header = super::forward(
            "ws://127.0.0.1:9000",
            "/x",
            &headers(&[("x-goog-api-key", "apps-own-key")]),
            None,
            Some("proxy-own-key"),
        )
        .unwrap();
        assert!(!with_header.proxy_key);
        assert_eq!(
            with_header.request.headers()["x-goog-api-key"],
            "apps-own-key"
        );
        assert_eq!(base_of("wss://h:1/a/b?c"), "wss://h:1");
    }
}
