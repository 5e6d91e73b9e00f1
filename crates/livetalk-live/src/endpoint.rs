//! Where the Live API lives: endpoint URLs (the Gemini API's and Vertex AI's), API versions,
//! and the API key kept out of sight.

use std::fmt;

use tokio_tungstenite::tungstenite::http::Uri;

/// The Google AI (Gemini Developer API) WebSocket host.
const GOOGLE_AI_BASE: &str = "wss://generativelanguage.googleapis.com";

/// API version in the BidiGenerateContent path. The official SDK uses `v1` since 3.x.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ApiVersion {
    /// `v1`, the stable API.
    #[default]
    V1,
    /// `v1beta`.
    V1beta,
    /// `v1alpha`, where some preview features come first.
    V1alpha,
}

impl ApiVersion {
    /// As it appears in the URL path: `v1`, `v1beta`, `v1alpha`.
    pub fn as_str(self) -> &'static str {
        match self {
            ApiVersion::V1 => "v1",
            ApiVersion::V1beta => "v1beta",
            ApiVersion::V1alpha => "v1alpha",
        }
    }
}

impl fmt::Display for ApiVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The standard BidiGenerateContent path for an API version.
pub fn standard_path(version: ApiVersion) -> String {
    format!("/ws/google.ai.generativelanguage.{version}.GenerativeService.BidiGenerateContent")
}

/// Vertex AI's BidiGenerateContent path for an API version (Vertex has no alpha; its beta is
/// `v1beta1`).
fn vertex_path(version: ApiVersion) -> String {
    let version = match version {
        ApiVersion::V1 => "v1",
        ApiVersion::V1beta | ApiVersion::V1alpha => "v1beta1",
    };
    format!("/ws/google.cloud.aiplatform.{version}.LlmBidiService/BidiGenerateContent")
}

/// Vertex AI's WebSocket host for a location, as the official SDKs choose it.
fn vertex_base(location: &str) -> String {
    if location == "global" {
        "wss://aiplatform.googleapis.com".to_owned()
    } else {
        format!("wss://{location}-aiplatform.googleapis.com")
    }
}

/// A Gemini API key. It is only ever read by [`ApiKey::expose`] when the upgrade request is
/// built; `Debug` and `Display` print a placeholder so it cannot leak through logs or errors.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key; blank keys count as no key. From here on no output shows it.
    pub fn new(key: impl Into<String>) -> Option<Self> {
        let key = key.into().trim().to_owned();
        crate::redact::remember(&key);
        (!key.is_empty()).then_some(ApiKey(key))
    }

    /// The key itself, for the `x-goog-api-key` header only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey([redacted])")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// A full `ws://` or `wss://` URL of a BidiGenerateContent endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    url: String,
    host: String,
    /// Vertex AI's Live API (bearer tokens, resource-name models) rather than the Gemini API.
    vertex: bool,
}

/// Why an endpoint URL was refused. `Display` is the human message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    /// Not a URL, or a URL without a host.
    #[error("endpoint {0:?} is not a valid URL")]
    Invalid(String),
    /// Not a WebSocket URL.
    #[error("endpoint {0:?} must start with ws:// or wss://")]
    Scheme(String),
    /// The URL carries a credential, which would then show wherever the URL is shown.
    #[error(
        "endpoint URLs must not carry an API key (`key=`/`access_token=`); set GEMINI_API_KEY instead"
    )]
    KeyInUrl,
    /// The URL names a port no server listens on (0, or past 65535): never replaced by the
    /// scheme's default port.
    #[error("endpoint {url:?} names port {port}, which is not a port (1 to 65535)")]
    Port {
        /// The URL as given.
        url: String,
        /// The port as written.
        port: String,
    },
}

impl Endpoint {
    /// The real service for an API version.
    pub fn google_ai(version: ApiVersion) -> Self {
        Endpoint::parse(GOOGLE_AI_BASE, version).expect("the built-in endpoint is valid")
    }

    /// Vertex AI's service in `location`.
    pub fn vertex(location: &str, version: ApiVersion) -> Result<Self, EndpointError> {
        Endpoint::parse_vertex(&vertex_base(location), version)
    }

    /// A `ws://` or `wss://` base URL; the standard path is appended when the URL has none.
    pub fn parse(base: &str, version: ApiVersion) -> Result<Self, EndpointError> {
        Endpoint::parse_with(base, standard_path(version), false)
    }

    /// [`Endpoint::parse`] for a Vertex AI endpoint: Vertex's path is appended when the URL
    /// has none.
    pub fn parse_vertex(base: &str, version: ApiVersion) -> Result<Self, EndpointError> {
        Endpoint::parse_with(base, vertex_path(version), true)
    }

    fn parse_with(base: &str, path: String, vertex: bool) -> Result<Self, EndpointError> {
        let base = base.trim();
        let uri: Uri = base
            .parse()
            .map_err(|_| EndpointError::Invalid(base.to_owned()))?;
        match uri.scheme_str() {
            Some("ws") | Some("wss") => {}
            _ => return Err(EndpointError::Scheme(base.to_owned())),
        }
        let host = uri
            .host()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| EndpointError::Invalid(base.to_owned()))?
            .to_owned();
        // The URL library reads a port past 65535 as no port at all, which would dial 80 or
        // 443: the port as written is checked here.
        let host_and_port = uri
            .authority()
            .map(|a| a.as_str().rsplit('@').next().unwrap_or_default());
        if let Some((_, port)) = host_and_port.and_then(|h| h.rsplit_once(':'))
            && !port.contains(']')
            && !port.parse::<u16>().is_ok_and(|p| p != 0)
        {
            return Err(EndpointError::Port {
                url: base.to_owned(),
                port: port.to_owned(),
            });
        }
        if let Some(query) = uri.query()
            && query
                .split('&')
                .any(|p| p.starts_with("key=") || p.starts_with("access_token="))
        {
            return Err(EndpointError::KeyInUrl);
        }
        let has_path = !matches!(uri.path(), "" | "/");
        let url = if has_path {
            base.to_owned()
        } else {
            let authority = uri.authority().map(|a| a.as_str()).unwrap_or(&host);
            let scheme = uri.scheme_str().unwrap_or("wss");
            let query = uri.query().map(|q| format!("?{q}")).unwrap_or_default();
            format!("{scheme}://{authority}{path}{query}")
        };
        Ok(Endpoint { url, host, vertex })
    }

    /// The whole URL, path included.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Host name only, for logs, recordings and the status line.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Whether this is Vertex AI's Live API.
    pub fn is_vertex(&self) -> bool {
        self.vertex
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.url)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_that_is_not_one_is_refused_not_replaced() {
        for (url, port) in [
            ("ws://host:99999", "99999"),
            ("ws://host:0", "0"),
            ("wss://[::1]:70000/x", "70000"),
        ] {
            let error = Endpoint::parse(url, ApiVersion::V1).unwrap_err();
            assert_eq!(
                error.to_string(),
                format!("endpoint {url:?} names port {port}, which is not a port (1 to 65535)")
            );
        }
        assert!(Endpoint::parse("ws://[::1]:9000", ApiVersion::V1).is_ok());
        assert!(Endpoint::parse("ws://host:65535", ApiVersion::V1).is_ok());
    }

    #[test]
    fn default_endpoint_uses_v1() {
        assert_eq!(
            Endpoint::google_ai(ApiVersion::V1).url(),
            "wss://generativelanguage.googleapis.com/ws/google.ai.generativelanguage.v1.GenerativeService.BidiGenerateContent"
        );
        assert!(
            Endpoint::google_ai(ApiVersion::V1beta)
                .url()
                .contains(".v1beta.")
        );
    }

    #[test]
    fn base_urls_get_the_standard_path() {
        let e = Endpoint::parse("ws://127.0.0.1:9000", ApiVersion::V1).unwrap();
        assert_eq!(
            e.url(),
            "ws://127.0.0.1:9000/ws/google.ai.generativelanguage.v1.GenerativeService.BidiGenerateContent"
        );
        assert_eq!(e.host(), "127.0.0.1");
        let e = Endpoint::parse("ws://localhost:9000/", ApiVersion::V1alpha).unwrap();
        assert!(
            e.url()
                .ends_with(".v1alpha.GenerativeService.BidiGenerateContent")
        );
        let custom = "wss://proxy.example/custom/live";
        assert_eq!(
            Endpoint::parse(custom, ApiVersion::V1).unwrap().url(),
            custom
        );
    }

    #[test]
    fn vertex_endpoints_use_the_location_host_and_the_llm_bidi_service_path() {
        let e = Endpoint::vertex("us-central1", ApiVersion::V1).unwrap();
        assert_eq!(
            e.url(),
            "wss://us-central1-aiplatform.googleapis.com/ws/google.cloud.aiplatform.v1.LlmBidiService/BidiGenerateContent"
        );
        assert!(e.is_vertex());
        assert_eq!(
            Endpoint::vertex("global", ApiVersion::V1beta)
                .unwrap()
                .url(),
            "wss://aiplatform.googleapis.com/ws/google.cloud.aiplatform.v1beta1.LlmBidiService/BidiGenerateContent"
        );
        let local = Endpoint::parse_vertex("ws://127.0.0.1:9000", ApiVersion::V1).unwrap();
        assert!(
            local.url().ends_with(
                ":9000/ws/google.cloud.aiplatform.v1.LlmBidiService/BidiGenerateContent"
            )
        );
        assert!(
            !Endpoint::parse("ws://127.0.0.1:9000", ApiVersion::V1)
                .unwrap()
                .is_vertex()
        );
    }

    #[test]
    fn bad_endpoints_are_rejected_clearly() {
        assert_eq!(
            Endpoint::parse("http://x", ApiVersion::V1),
            Err(EndpointError::Scheme("http://x".into()))
        );
        assert!(matches!(
            Endpoint::parse("not a url", ApiVersion::V1),
            Err(EndpointError::Invalid(_))
        ));
        assert_eq!(
            Endpoint::parse("wss://h/ws/x?key=secret", ApiVersion::V1),
            Err(EndpointError::KeyInUrl)
        );
    }

    #[test]
    fn api_key_never_prints() {
        let key = ApiKey::new("fake-test-SECRET").unwrap();
        assert!(!format!("{key:?} {key}").contains("SECRET"));
        assert_eq!(
            crate::redact::scrub("bad key fake-test-SECRET!"),
            "bad key [redacted]!",
            "a key is remembered as a secret as soon as it is read"
        );
        assert_eq!(ApiKey::new("  "), None);
    }
}
