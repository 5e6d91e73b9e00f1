//! Application Default Credentials for Vertex AI: the credentials file (the one
//! `GOOGLE_APPLICATION_CREDENTIALS` names, else gcloud's), and the OAuth access tokens it
//! yields from its own `token_uri`, kept until shortly before they expire. Only files are
//! read: a command-line tool must not spend seconds probing a metadata server that is not
//! there. Service-account files sign an RS256 assertion (ring, already built for rustls);
//! authorized-user files (`gcloud auth application-default login`) send their refresh token.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::signature::RsaKeyPair;
use rustls::pki_types::PrivatePkcs8KeyDer;
use rustls::pki_types::pem::PemObject;
use serde::Deserialize;
use tokio::sync::Mutex;
use tokio::time::Instant;
use tracing::info;

use super::address::Address;

/// The scope Vertex AI needs.
const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";
/// Where a file without its own `token_uri` gets tokens.
const GOOGLE_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";
/// A token with less than this left is renewed before it is used for a new connection.
const RENEW_BEFORE: Duration = Duration::from_secs(300);
/// The lifetime asked for in a service account's assertion (Google's maximum).
const ASSERTION_LIFETIME: u64 = 3600;
/// The longest lifetime a token is taken to have, whatever the endpoint says (Google's are an
/// hour; a day covers any real endpoint).
const MAX_TOKEN_LIFETIME: u64 = 24 * 3600;
/// The largest answer read from a token endpoint (a token answer is a few KiB).
const MAX_TOKEN_ANSWER_BYTES: usize = 1 << 20;
/// Redirects followed within the token endpoint's own origin.
const MAX_REDIRECTS: usize = 5;

/// Why credentials or an access token for Vertex AI could not be had. `Display` is the whole
/// human message; the variant says which step failed, for a caller that reacts to it (no file:
/// say how to log in; a bad file: name it; no token: the account, the network or the service).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdcError {
    /// No credentials file is named by `GOOGLE_APPLICATION_CREDENTIALS`, and gcloud's is not
    /// there.
    #[error("{0}")]
    NotFound(String),
    /// The credentials file cannot be read, or is not a credentials file livetalk can use.
    #[error("{message}")]
    File {
        /// The file.
        file: PathBuf,
        /// What is wrong with it, as one sentence naming the file.
        message: String,
        /// Nothing is at the path.
        missing: bool,
    },
    /// No access token: the request could not be made, or the token endpoint refused it or
    /// answered without a usable token.
    #[error("{0}")]
    Token(String),
}

/// How the file proves who it is.
enum Grant {
    ServiceAccount {
        email: String,
        key_id: Option<String>,
        key: Arc<RsaKeyPair>,
    },
    AuthorizedUser {
        client_id: String,
        client_secret: String,
        refresh_token: String,
    },
}

/// A credentials file, read and checked.
pub struct Credentials {
    grant: Grant,
    token_uri: String,
    file: PathBuf,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

/// The fields of the file types we read; the rest is ignored.
#[derive(Deserialize)]
struct CredentialsFile {
    #[serde(rename = "type")]
    kind: Option<String>,
    token_uri: Option<String>,
    client_email: Option<String>,
    private_key_id: Option<String>,
    private_key: Option<String>,
    client_id: Option<String>,
    client_secret: Option<String>,
    refresh_token: Option<String>,
}

impl Credentials {
    /// The file `GOOGLE_APPLICATION_CREDENTIALS` names, else gcloud's application default
    /// credentials; `env` reads a variable. No file is one clear error saying how to get one.
    pub fn find(env: &dyn Fn(&str) -> Option<String>) -> Result<Credentials, AdcError> {
        if let Some(named) = env("GOOGLE_APPLICATION_CREDENTIALS").filter(|v| !v.trim().is_empty())
        {
            return Credentials::from_file(
                Path::new(named.trim()),
                "GOOGLE_APPLICATION_CREDENTIALS",
            );
        }
        let gcloud = gcloud_file(env);
        match gcloud
            .as_deref()
            .map(|file| Credentials::from_file(file, "gcloud"))
        {
            Some(Err(AdcError::File { missing: true, .. })) | None => {
                Err(AdcError::NotFound(format!(
                    "No Google Cloud credentials for Vertex AI: set GOOGLE_APPLICATION_CREDENTIALS to a service-account key file, or run `gcloud auth application-default login`{}.",
                    gcloud
                        .map(|f| format!(" (which writes {})", f.display()))
                        .unwrap_or_default()
                )))
            }
            Some(found) => found,
        }
    }

    /// Reads a service-account or authorized-user file; `named_by` says who named it.
    fn from_file(file: &Path, named_by: &str) -> Result<Credentials, AdcError> {
        let shown = file.display();
        let bad = |message: String| AdcError::File {
            file: file.to_owned(),
            message,
            missing: false,
        };
        let text =
            crate::file::read_text(file, crate::file::FileKind::CREDENTIALS).map_err(|e| {
                AdcError::File {
                    file: file.to_owned(),
                    message: format!(
                        "The credentials file {shown} ({named_by}) {}.",
                        match &e {
                            crate::file::FileError::Missing { .. } =>
                                "cannot be read: it does not exist".to_owned(),
                            other => other.problem(),
                        }
                    ),
                    missing: e.is_missing(),
                }
            })?;
        let parsed: CredentialsFile = serde_json::from_str(&text).map_err(|e| {
            bad(format!(
                "The credentials file {shown} is not a credentials JSON file: {e}."
            ))
        })?;
        let missing = |field: &str| bad(format!("The credentials file {shown} has no `{field}`."));
        let token_uri = parsed
            .token_uri
            .filter(|u| !u.trim().is_empty())
            .unwrap_or_else(|| GOOGLE_TOKEN_URI.to_owned());
        let grant = match parsed.kind.as_deref() {
            Some("service_account") => {
                let pem = parsed.private_key.ok_or_else(|| missing("private_key"))?;
                crate::redact::remember(&pem);
                let der = PrivatePkcs8KeyDer::from_pem_slice(pem.as_bytes()).map_err(|e| {
                    bad(format!(
                        "The private key in {shown} is not a PEM PKCS#8 key: {e}."
                    ))
                })?;
                let key = RsaKeyPair::from_pkcs8(der.secret_pkcs8_der()).map_err(|e| {
                    bad(format!(
                        "The private key in {shown} is not a usable RSA key: {e}."
                    ))
                })?;
                Grant::ServiceAccount {
                    email: parsed.client_email.ok_or_else(|| missing("client_email"))?,
                    key_id: parsed.private_key_id,
                    key: Arc::new(key),
                }
            }
            Some("authorized_user") => {
                let client_secret = parsed
                    .client_secret
                    .ok_or_else(|| missing("client_secret"))?;
                let refresh_token = parsed
                    .refresh_token
                    .ok_or_else(|| missing("refresh_token"))?;
                crate::redact::remember(&client_secret);
                crate::redact::remember(&refresh_token);
                Grant::AuthorizedUser {
                    client_id: parsed.client_id.ok_or_else(|| missing("client_id"))?,
                    client_secret,
                    refresh_token,
                }
            }
            Some(other) => {
                return Err(bad(format!(
                    "The credentials file {shown} holds `{other}` credentials; livetalk reads service_account and authorized_user files."
                )));
            }
            None => return Err(missing("type")),
        };
        Ok(Credentials {
            grant,
            token_uri,
            file: file.to_owned(),
        })
    }

    /// Who the credentials are, for people: the kind, the account and the file. No secret.
    pub fn describe(&self) -> String {
        match &self.grant {
            Grant::ServiceAccount { email, .. } => {
                format!("service account {email} ({})", self.file.display())
            }
            Grant::AuthorizedUser { .. } => {
                format!("gcloud user credentials ({})", self.file.display())
            }
        }
    }

    /// The form that asks `token_uri` for an access token.
    fn token_request(&self) -> Result<Vec<(&'static str, String)>, AdcError> {
        match &self.grant {
            Grant::ServiceAccount { email, key_id, key } => Ok(vec![
                (
                    "grant_type",
                    "urn:ietf:params:oauth:grant-type:jwt-bearer".to_owned(),
                ),
                ("assertion", self.assertion(email, key_id.as_deref(), key)?),
            ]),
            Grant::AuthorizedUser {
                client_id,
                client_secret,
                refresh_token,
            } => Ok(vec![
                ("grant_type", "refresh_token".to_owned()),
                ("client_id", client_id.clone()),
                ("client_secret", client_secret.clone()),
                ("refresh_token", refresh_token.clone()),
            ]),
        }
    }

    /// The signed JWT a service account trades for a token: RS256, addressed to `token_uri`.
    fn assertion(
        &self,
        email: &str,
        key_id: Option<&str>,
        key: &RsaKeyPair,
    ) -> Result<String, AdcError> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_err(|_| AdcError::Token("The system clock is before 1970.".to_owned()))?
            .as_secs();
        let mut header = serde_json::json!({"alg": "RS256", "typ": "JWT"});
        if let Some(kid) = key_id {
            header["kid"] = kid.into();
        }
        let claims = serde_json::json!({
            "iss": email,
            "scope": SCOPE,
            "aud": self.token_uri,
            "iat": now,
            "exp": now + ASSERTION_LIFETIME,
        });
        let signed = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let mut signature = vec![0u8; key.public().modulus_len()];
        key.sign(
            &ring::signature::RSA_PKCS1_SHA256,
            &ring::rand::SystemRandom::new(),
            signed.as_bytes(),
            &mut signature,
        )
        .map_err(|_| {
            AdcError::Token(format!(
                "Signing with the key in {} failed.",
                self.file.display()
            ))
        })?;
        let assertion = format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature));
        // The signed assertion is a credential for its lifetime: a token endpoint that quotes
        // the request must not get it printed.
        crate::redact::remember(&assertion);
        Ok(assertion)
    }
}

/// gcloud's application default credentials file.
fn gcloud_file(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(dir) = env("CLOUDSDK_CONFIG").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(dir).join("application_default_credentials.json"));
    }
    let config = if cfg!(windows) {
        PathBuf::from(env("APPDATA")?)
    } else {
        PathBuf::from(env("HOME")?).join(".config")
    };
    Some(
        config
            .join("gcloud")
            .join("application_default_credentials.json"),
    )
}

/// An access token and when to stop starting connections with it.
struct Token {
    value: String,
    renew_at: Instant,
}

/// Access tokens from one credentials file: the last one while it has more than five minutes
/// left, else a new one. Shared by every connection of a process (reconnects included).
pub struct TokenSource {
    credentials: Credentials,
    token: Mutex<Option<Token>>,
    client: OnceLock<Result<reqwest::Client, AdcError>>,
}

impl std::fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TokenSource({})", self.credentials.describe())
    }
}

/// The token endpoint's answer.
#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    expires_in: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct TokenRefusal {
    error: Option<String>,
    error_description: Option<String>,
}

impl TokenSource {
    /// A source that has no token yet: the first connection asks for one.
    pub fn new(credentials: Credentials) -> Self {
        TokenSource {
            credentials,
            token: Mutex::new(None),
            client: OnceLock::new(),
        }
    }

    /// The credentials the tokens are for.
    pub fn credentials(&self) -> &Credentials {
        &self.credentials
    }

    /// A token to connect with: the last one, or a new one once it has less than five
    /// minutes left. The caller bounds the wait.
    pub async fn token(&self) -> Result<String, AdcError> {
        let mut held = self.token.lock().await;
        if let Some(token) = held.as_ref()
            && Instant::now() < token.renew_at
        {
            return Ok(token.value.clone());
        }
        // The lifetime counts from the request: the answer may have taken a while.
        let asked = Instant::now();
        let (value, lifetime) = self.fetch().await?;
        info!(
            lifetime_secs = lifetime.as_secs(),
            "obtained an access token for {}",
            self.credentials.describe()
        );
        *held = Some(Token {
            value: value.clone(),
            renew_at: renew_at(asked, lifetime),
        });
        Ok(value)
    }

    /// The HTTP client for token requests: our TLS settings and proxy, no other.
    fn client(&self) -> Result<&reqwest::Client, AdcError> {
        self.client
            .get_or_init(|| {
                let network = super::network::network().map_err(AdcError::Token)?;
                let mut builder = reqwest::Client::builder()
                    .tls_backend_preconfigured((**network.tls()).clone())
                    .user_agent(concat!("livetalk/", env!("CARGO_PKG_VERSION")))
                    .no_proxy();
                if let Some(proxy) = &network.proxy {
                    builder = builder.proxy(reqwest::Proxy::custom(move |url| {
                        let target = Address {
                            host: url
                                .host_str()?
                                .trim_start_matches('[')
                                .trim_end_matches(']')
                                .to_owned(),
                            port: url.port_or_known_default()?,
                            tls: url.scheme() == "https",
                        };
                        proxy
                            .applies_to(&target)
                            .then(|| proxy.expose_url().to_owned())
                    }));
                }
                // Credentials are sent on only to the origin they were meant for: a redirect
                // elsewhere comes back as the answer, and is refused.
                builder = builder.redirect(reqwest::redirect::Policy::custom(|attempt| {
                    let same_origin = attempt
                        .previous()
                        .first()
                        .is_some_and(|first| origin_of(first) == origin_of(attempt.url()));
                    if same_origin && attempt.previous().len() <= MAX_REDIRECTS {
                        attempt.follow()
                    } else {
                        attempt.stop()
                    }
                }));
                builder.build().map_err(|e| {
                    AdcError::Token(format!(
                        "Could not set up the HTTP client for tokens: {}",
                        chain(&e)
                    ))
                })
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    async fn fetch(&self) -> Result<(String, Duration), AdcError> {
        let uri = &self.credentials.token_uri;
        let endpoint = reqwest::Url::parse(uri)
            .ok()
            .and_then(|u| {
                u.host_str().map(|h| match u.port() {
                    Some(port) => format!("{h}:{port}"),
                    None => h.to_owned(),
                })
            })
            .ok_or_else(|| AdcError::File {
                file: self.credentials.file.clone(),
                message: format!(
                    "The token_uri {uri:?} in {} is not a URL.",
                    self.credentials.file.display()
                ),
                missing: false,
            })?;
        let form = self.credentials.token_request()?;
        let mut response = self
            .client()?
            .post(uri)
            .form(&form)
            .send()
            .await
            .map_err(|e| AdcError::Token(self.request_failed(&endpoint, &e)))?;
        let status = response.status();
        if status.is_redirection() {
            // Same-origin redirects were followed; this one leads elsewhere (or too far).
            let to = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .and_then(|l| response.url().join(l).ok())
                .map(|u| origin_of(&u))
                .unwrap_or_else(|| "another address".to_owned());
            return Err(AdcError::Token(format!(
                "The token endpoint {endpoint} redirected the token request to {to}; livetalk does not send credentials on to another address. Set token_uri in {} to the address that answers.",
                self.credentials.file.display()
            )));
        }
        if status == reqwest::StatusCode::PROXY_AUTHENTICATION_REQUIRED {
            return Err(AdcError::Token(proxy_wants_credentials(&endpoint)));
        }
        let body = read_body(&mut response, MAX_TOKEN_ANSWER_BYTES)
            .await
            .map_err(|why| {
                AdcError::Token(match why {
                    BodyError::TooLarge => format!(
                        "The token endpoint {endpoint} sent an answer larger than {} KiB; that is not a token answer.",
                        MAX_TOKEN_ANSWER_BYTES >> 10
                    ),
                    BodyError::Broken(e) => format!(
                        "The token endpoint {endpoint} broke off its answer: {}.",
                        chain(&e)
                    ),
                })
            })?;
        let body = String::from_utf8_lossy(&body);
        if !status.is_success() {
            let why = serde_json::from_str::<TokenRefusal>(&body)
                .ok()
                .and_then(|r| match (r.error, r.error_description) {
                    (Some(e), Some(d)) => Some(format!("{e}: {d}")),
                    (e, d) => e.or(d),
                })
                .unwrap_or_else(|| status.to_string())
                // One line, whatever the endpoint's text was laid out as.
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            return Err(AdcError::Token(crate::excerpt::sentence(&format!(
                "The token endpoint {endpoint} refused the {} ({})",
                self.credentials.describe(),
                // Scrubbed before it is cut: a secret cut in half is no longer recognised.
                crate::excerpt::bounded(&crate::redact::scrub(&why), crate::excerpt::SUMMARY)
            ))));
        }
        let answer: TokenAnswer = serde_json::from_str(&body).map_err(|e| {
            AdcError::Token(format!(
                "The token endpoint {endpoint} answered without an access token: {e}."
            ))
        })?;
        crate::redact::remember(&answer.access_token);
        if answer.access_token.trim().is_empty() {
            return Err(AdcError::Token(format!(
                "The token endpoint {endpoint} answered with an empty access token."
            )));
        }
        // Google sends a number; some servers a string of one. A lifetime past any real one
        // is taken as the longest real one, so no deadline computed from it overflows.
        let lifetime = match &answer.expires_in {
            Some(serde_json::Value::Number(n)) => n.as_u64(),
            Some(serde_json::Value::String(s)) => s.trim().parse().ok(),
            _ => None,
        }
        .unwrap_or(ASSERTION_LIFETIME)
        .min(MAX_TOKEN_LIFETIME);
        Ok((answer.access_token, Duration::from_secs(lifetime)))
    }
}

/// When a token obtained at `now` and valid for `lifetime` stops being used for new
/// connections: five minutes before it expires (at once for shorter-lived ones).
fn renew_at(now: Instant, lifetime: Duration) -> Instant {
    let left = lifetime
        .min(Duration::from_secs(MAX_TOKEN_LIFETIME))
        .saturating_sub(RENEW_BEFORE);
    now.checked_add(left).unwrap_or(now)
}

impl TokenSource {
    /// Why the token request could not be made, in the user's words: a proxy that wants
    /// credentials is named as such, not as a refusal by the token endpoint.
    fn request_failed(&self, endpoint: &str, error: &reqwest::Error) -> String {
        let text = chain(error);
        let lower = text.to_ascii_lowercase();
        if lower.contains("407") || lower.contains("proxy auth") {
            return proxy_wants_credentials(endpoint);
        }
        format!("Could not get an access token from {endpoint}: {text}.")
    }
}

/// A 407 on the way to the token endpoint: the proxy, not the endpoint, wants something.
fn proxy_wants_credentials(endpoint: &str) -> String {
    match super::network::network()
        .ok()
        .and_then(|n| n.proxy.as_ref())
    {
        Some(proxy) if proxy.has_credentials() => format!(
            "The proxy {} refused the user and password in {} for the token request to {endpoint} (407 Proxy Authentication Required).",
            proxy.address, proxy.var
        ),
        Some(proxy) => format!(
            "The proxy {} asks for a user and password for the token request to {endpoint} (407 Proxy Authentication Required): give them in {} as http://user:password@{}.",
            proxy.address, proxy.var, proxy.address
        ),
        None => format!(
            "A proxy between livetalk and the token endpoint {endpoint} asks for a user and password (407 Proxy Authentication Required): name it in HTTPS_PROXY as http://user:password@host:port."
        ),
    }
}

/// Why a body was not read whole.
enum BodyError {
    TooLarge,
    Broken(reqwest::Error),
}

/// The body of `response`, refused once it passes `limit` bytes (an endless body is not
/// buffered; the caller's deadline bounds a slow one).
async fn read_body(response: &mut reqwest::Response, limit: usize) -> Result<Vec<u8>, BodyError> {
    if response
        .content_length()
        .is_some_and(|declared| declared > limit as u64)
    {
        return Err(BodyError::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(BodyError::Broken)? {
        if body.len() + chunk.len() > limit {
            return Err(BodyError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// `scheme://host:port` of a URL: what a credential may be sent on to.
fn origin_of(url: &reqwest::Url) -> String {
    format!(
        "{}://{}:{}",
        url.scheme(),
        url.host_str().unwrap_or(""),
        url.port_or_known_default().unwrap_or(0)
    )
}

/// An error and its causes in one line (reqwest's own text stops at "error sending request").
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    #[test]
    fn no_file_is_one_error_saying_how_to_get_one() {
        let home = tempfile::tempdir().unwrap();
        let error =
            Credentials::find(&env_of(&[("HOME", home.path().to_str().unwrap())])).unwrap_err();
        assert!(matches!(error, AdcError::NotFound(_)), "{error:?}");
        let error = error.to_string();
        assert!(
            error.starts_with("No Google Cloud credentials for Vertex AI"),
            "{error}"
        );
        assert!(error.contains("GOOGLE_APPLICATION_CREDENTIALS"), "{error}");
        assert!(
            error.contains("gcloud auth application-default login"),
            "{error}"
        );
        let missing = home.path().join("nope.json");
        let error = Credentials::find(&env_of(&[(
            "GOOGLE_APPLICATION_CREDENTIALS",
            missing.to_str().unwrap(),
        )]))
        .unwrap_err();
        assert!(
            matches!(&error, AdcError::File { file, .. } if *file == missing),
            "{error:?}"
        );
        assert!(
            error
                .to_string()
                .contains("nope.json (GOOGLE_APPLICATION_CREDENTIALS) cannot be read"),
            "{error}"
        );
    }

    #[test]
    fn authorized_user_files_default_to_googles_token_uri_and_hide_their_secrets() {
        let dir = tempfile::tempdir().unwrap();
        let gcloud = dir.path().join("gcloud");
        std::fs::create_dir_all(&gcloud).unwrap();
        std::fs::write(
            gcloud.join("application_default_credentials.json"),
            r#"{"type":"authorized_user","client_id":"cid","client_secret":"adc-client-SECRET","refresh_token":"adc-refresh-SECRET"}"#,
        )
        .unwrap();
        let credentials =
            Credentials::find(&env_of(&[("CLOUDSDK_CONFIG", gcloud.to_str().unwrap())])).unwrap();
        assert_eq!(credentials.token_uri, GOOGLE_TOKEN_URI);
        assert!(!format!("{credentials:?}").contains("SECRET"));
        assert_eq!(
            crate::redact::scrub("adc-client-SECRET adc-refresh-SECRET"),
            "[redacted] [redacted]"
        );
        let form = credentials.token_request().unwrap();
        assert!(form.contains(&("grant_type", "refresh_token".to_owned())));
    }

    #[test]
    fn other_credential_types_are_named_not_misread() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ext.json");
        std::fs::write(&file, r#"{"type":"external_account"}"#).unwrap();
        let error = Credentials::from_file(&file, "test")
            .unwrap_err()
            .to_string();
        assert!(error.contains("`external_account` credentials"), "{error}");
    }

    #[test]
    fn tokens_are_renewed_five_minutes_before_they_expire() {
        let now = Instant::now();
        assert_eq!(
            renew_at(now, Duration::from_secs(3600)),
            now + Duration::from_secs(3300)
        );
        assert_eq!(renew_at(now, Duration::from_secs(60)), now);
        // An endpoint's lifetime of 2^63-1 seconds is taken as a day, not an overflow.
        assert_eq!(
            renew_at(now, Duration::from_secs(i64::MAX as u64)),
            now + Duration::from_secs(MAX_TOKEN_LIFETIME) - RENEW_BEFORE
        );
        assert_eq!(
            renew_at(now, Duration::MAX),
            now + Duration::from_secs(MAX_TOKEN_LIFETIME) - RENEW_BEFORE
        );
    }

    #[test]
    fn a_credentials_file_that_is_no_file_is_named_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo.json");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let huge = dir.path().join("huge.json");
        std::fs::File::create(&huge)
            .unwrap()
            .set_len(2 << 20)
            .unwrap();
        for (path, says) in [
            ("/dev/zero".into(), "is a character device, not a file"),
            (fifo, "is a FIFO (named pipe), not a file"),
            (dir.path().to_owned(), "is a folder, not a file"),
            (huge, "is larger than the 1 MiB livetalk reads"),
        ] {
            let error = Credentials::find(&env_of(&[(
                "GOOGLE_APPLICATION_CREDENTIALS",
                path.to_str().unwrap(),
            )]))
            .unwrap_err()
            .to_string();
            assert!(
                error.starts_with(&format!(
                    "The credentials file {} (GOOGLE_APPLICATION_CREDENTIALS) {says}",
                    path.display()
                )),
                "{error}"
            );
        }
    }
}
