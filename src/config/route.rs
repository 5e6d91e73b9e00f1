//! The route: where a session goes (Google's Gemini API, Vertex AI, an endpoint, a bridge, the
//! offline demo model), from the route's keys in every layer, and the API key.

use super::ConfigError;
use super::file::FileLayer;
use livetalk_live::{ApiKey, ApiVersion, Endpoint};

/// The environment variables an API key is read from, the first one set winning.
pub(super) const KEY_VARS: [&str; 2] = ["GEMINI_API_KEY", "GOOGLE_API_KEY"];

/// Vertex AI's project and location (the credentials are found when a session starts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vertex {
    pub project: String,
    pub location: String,
}

impl Vertex {
    /// The resource name Vertex takes as `setup.model`: a model id, `models/ID` or
    /// `publishers/P/models/ID` becomes `projects/…/locations/…/publishers/…/models/ID`;
    /// a full resource name is kept.
    pub fn model_name(&self, model: &str) -> String {
        if model.starts_with("projects/") {
            return model.to_owned();
        }
        let publisher_model = if model.starts_with("publishers/") {
            model.to_owned()
        } else {
            let id = model.rsplit('/').next().unwrap_or(model);
            format!("publishers/google/models/{id}")
        };
        format!(
            "projects/{}/locations/{}/{publisher_model}",
            self.project, self.location
        )
    }
}

/// Where the session goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Google's service (a key is set, no endpoint given).
    Google(Endpoint),
    /// A user-given endpoint (key optional).
    Custom(Endpoint),
    /// The embedded mock, started in-process.
    OfflineMock,
    /// A livetalk bridge (`livetalk serve`) at this ws:// or wss:// URL; it holds the key.
    Bridge(String),
}

/// The kinds of route, as reports name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteKind {
    /// The embedded offline demo model.
    Demo,
    /// Google's Gemini API.
    Google,
    /// Vertex AI.
    Vertex,
    /// An endpoint the user gave.
    Endpoint,
    /// A livetalk bridge.
    Bridge,
}

impl RouteKind {
    /// Its word in JSON and JUnit: `demo`, `google`, `vertex`, `endpoint`, `bridge`.
    pub fn word(self) -> &'static str {
        match self {
            RouteKind::Demo => "demo",
            RouteKind::Google => "google",
            RouteKind::Vertex => "vertex",
            RouteKind::Endpoint => "endpoint",
            RouteKind::Bridge => "bridge",
        }
    }
}

/// What the layers said of the route so far, each value with where it came from.
#[derive(Debug, Default)]
pub(super) struct RouteChoice {
    pub(super) endpoint: Option<(String, String)>,
    pub(super) vertex: bool,
    pub(super) project: Option<(String, String)>,
    pub(super) location: Option<(String, String)>,
    pub(super) api_version: ApiVersion,
    pub(super) api_key: Option<ApiKey>,
}

impl RouteChoice {
    /// The route's keys of one file layer, taken out of it.
    pub(super) fn apply(&mut self, layer: &mut FileLayer, source: &str) -> Result<(), ConfigError> {
        if let Some(v) = layer.endpoint.take() {
            self.set_endpoint(v, source)?;
        }
        if let Some(v) = layer.vertex.take() {
            self.vertex = v;
        }
        for (value, slot) in [
            (layer.project.take(), &mut self.project),
            (layer.location.take(), &mut self.location),
        ] {
            if let Some(value) = value.filter(|v| !v.trim().is_empty()) {
                *slot = Some((value.trim().to_owned(), source.to_owned()));
            }
        }
        if let Some(v) = layer.api_version.take() {
            self.api_version = v;
        }
        Ok(())
    }

    pub(super) fn set_endpoint(&mut self, value: String, source: &str) -> Result<(), ConfigError> {
        let value = value.trim().to_owned();
        if value.is_empty() {
            return Err(ConfigError::new(source, "endpoint", "must not be empty"));
        }
        self.endpoint = Some((value, source.to_owned()));
        Ok(())
    }

    /// `v1`, `v1beta` or `v1alpha`, in any case.
    pub(super) fn set_api_version(&mut self, value: &str, source: &str) -> Result<(), ConfigError> {
        let value = value.trim();
        self.api_version = match value.to_ascii_lowercase().as_str() {
            "v1" => ApiVersion::V1,
            "v1beta" => ApiVersion::V1beta,
            "v1alpha" => ApiVersion::V1alpha,
            _ => {
                return Err(ConfigError::new(
                    source,
                    "api_version",
                    format!("{value:?} is not one of v1, v1beta, v1alpha"),
                ));
            }
        };
        Ok(())
    }

    /// Vertex's project and location, checked: both are needed, and both go into a URL.
    fn vertex_settings(&self) -> Result<Vertex, ConfigError> {
        let take = |slot: &Option<(String, String)>, key: &str, flag: &str, var: &str| {
            let Some((value, source)) = slot else {
                return Err(ConfigError::new(
                    "--vertex",
                    key,
                    format!(
                        "Vertex AI needs a {key}: give {flag}, `{key}` in the config, or {var}"
                    ),
                ));
            };
            let fits = !value.is_empty()
                && value
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'));
            if !fits {
                return Err(ConfigError::new(
                    source,
                    key,
                    format!("{value:?} is not a Google Cloud {key} (letters, digits and -)"),
                ));
            }
            Ok(value.clone())
        };
        Ok(Vertex {
            project: take(
                &self.project,
                "project",
                "--project",
                "GOOGLE_CLOUD_PROJECT",
            )?,
            location: take(
                &self.location,
                "location",
                "--location",
                "GOOGLE_CLOUD_LOCATION",
            )?,
        })
    }

    /// Where sessions go, and Vertex AI's project and location when they go there: `bridge`
    /// (`--bridge`) beats everything, `offline` (`--offline`) refuses an endpoint, an endpoint
    /// beats Google, and with neither a key nor Vertex AI the offline demo model answers.
    pub(super) fn resolve(
        &self,
        bridge: Option<&str>,
        offline: bool,
    ) -> Result<(Route, Option<Vertex>), ConfigError> {
        let bridge = bridge
            .map(|url| bridge_url(url, "flag --bridge"))
            .transpose()?;
        // A bridge holds its own credentials, and the offline model needs none.
        let vertex = (self.vertex && bridge.is_none() && !offline)
            .then(|| self.vertex_settings())
            .transpose()?;
        let parse = |url: &str| match vertex {
            Some(_) => Endpoint::parse_vertex(url, self.api_version),
            None => Endpoint::parse(url, self.api_version),
        };
        let target = match (&self.endpoint, offline, bridge, &vertex) {
            // The flag beats an endpoint from the config file or environment.
            (_, _, Some(url), _) => Route::Bridge(url),
            (Some((_, source)), true, None, _) => {
                return Err(ConfigError::new(
                    source,
                    "endpoint",
                    "--offline uses the embedded demo model; drop one of --offline and the endpoint",
                ));
            }
            (None, true, None, _) => Route::OfflineMock,
            (Some((url, source)), false, None, _) => Route::Custom(
                parse(url).map_err(|e| ConfigError::new(source, "endpoint", e.to_string()))?,
            ),
            (None, false, None, Some(vertex)) => Route::Google(
                Endpoint::vertex(&vertex.location, self.api_version)
                    .map_err(|e| ConfigError::new("--vertex", "location", e.to_string()))?,
            ),
            (None, false, None, None) if self.api_key.is_some() => {
                Route::Google(Endpoint::google_ai(self.api_version))
            }
            (None, false, None, None) => Route::OfflineMock,
        };
        Ok((target, vertex))
    }
}

/// Host of a bridge URL for messages (never the token in its query).
pub fn bridge_host(url: &str) -> String {
    url.parse::<tokio_tungstenite::tungstenite::http::Uri>()
        .ok()
        .and_then(|u| u.host().map(str::to_owned))
        .unwrap_or_else(|| "the bridge".to_owned())
}

fn bridge_url(url: &str, source: &str) -> Result<String, ConfigError> {
    let url = url.trim();
    let parsed: tokio_tungstenite::tungstenite::http::Uri = url
        .parse()
        .map_err(|_| ConfigError::new(source, "bridge", format!("{url:?} is not a valid URL")))?;
    match (parsed.scheme_str(), parsed.host()) {
        (Some("ws") | Some("wss"), Some(host)) if !host.is_empty() => Ok(url.to_owned()),
        _ => Err(ConfigError::new(
            source,
            "bridge",
            format!("{url:?} must be a ws:// or wss:// URL, e.g. ws://127.0.0.1:3001"),
        )),
    }
}
