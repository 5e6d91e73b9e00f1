//! Where companies run livetalk, end to end with local fakes: an HTTP CONNECT proxy with basic
//! auth in front of a `wss://` mock whose certificate a local CA signed (trusted through
//! `SSL_CERT_FILE`), `NO_PROXY`, a wrong proxy password; and Vertex AI: a token endpoint that
//! verifies service-account assertions and refresh tokens, and a fake Vertex Live endpoint in
//! front of the mock that checks the path, the bearer token and the model's resource name, and
//! gives tool calls UUID ids as Vertex does.

// Test output is the test runner's, not livetalk's: it may print directly.
#![allow(clippy::disallowed_macros)]
#![allow(clippy::unwrap_used)]
// tungstenite's upgrade callback returns its error response by value.
#![allow(clippy::result_large_err)]

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use common::*;
use futures_util::{SinkExt, StreamExt};
use livetalk_live::{ApiVersion, Endpoint};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};

const PROXY_USER: &str = "alice@corp";
const PROXY_PASSWORD: &str = "proxy:pass-SECRET-1";
const API_KEY: &str = "fake-api-key-SECRET-2";
const PROJECT: &str = "test-proj";
const LOCATION: &str = "us-central1";
const SERVICE_ACCOUNT: &str = "livetalk-test@test-proj.iam.gserviceaccount.com";
const CLIENT_SECRET: &str = "client-SECRET-3";
const REFRESH_TOKEN: &str = "refresh-SECRET-4";
/// Issued tokens live a minute: under the five minutes livetalk keeps in hand, so every new
/// connection must renew its token.
const TOKEN_LIFETIME_SECS: u64 = 60;

// ---------------------------------------------------------------------------------------
// Certificates and keys (the openssl command, as the SDK compatibility tests use it).

/// A local CA, a server certificate it signed for localhost and 127.0.0.1, and a service
/// account's RSA key with its public half.
struct Pki {
    dir: PathBuf,
}

impl Pki {
    fn create(dir: &Path) -> Pki {
        let dir = dir.join("pki");
        common::test_ca(&dir);
        common::openssl(
            &dir,
            &[
                "genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out sa.pem",
                "rsa -in sa.pem -RSAPublicKey_out -outform DER -out sa.der",
            ],
        );
        Pki { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).to_str().unwrap().to_owned()
    }

    /// `livetalk mock` over TLS with the certificate this CA signed, 20× faster than real time.
    fn tls_mock(&self, scratch: &Path) -> MockProcess {
        MockProcess::start(
            scratch,
            &[
                "--speed",
                "20",
                "--tls-cert",
                &self.path("leaf.pem"),
                "--tls-key",
                &self.path("leaf.key"),
            ],
        )
    }
}

// ---------------------------------------------------------------------------------------
// An HTTP CONNECT proxy with basic auth.

/// What the proxy was asked: each CONNECT's target and whether it let it through.
#[derive(Clone, Default)]
struct ProxyLog(Arc<Mutex<Vec<(String, bool)>>>);

impl ProxyLog {
    fn tunnels(&self) -> Vec<(String, bool)> {
        self.0.lock().unwrap().clone()
    }
}

/// Starts a proxy on loopback wanting `user:password`; returns its port and log.
fn start_proxy(user: &str, password: &str) -> (u16, ProxyLog) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let expected = format!("Basic {}", STANDARD.encode(format!("{user}:{password}")));
    let log = ProxyLog::default();
    let seen = log.clone();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { break };
            let (expected, seen) = (expected.clone(), seen.clone());
            std::thread::spawn(move || tunnel(client, &expected, &seen));
        }
    });
    (port, log)
}

fn tunnel(mut client: TcpStream, expected: &str, log: &ProxyLog) {
    let Some(head) = read_head(&mut client) else {
        return;
    };
    let mut lines = head.lines();
    let target = lines
        .next()
        .and_then(|l| l.strip_prefix("CONNECT "))
        .and_then(|l| l.split(' ').next())
        .unwrap_or_default()
        .to_owned();
    let authorized = lines.any(|l| {
        l.split_once(':').is_some_and(|(name, value)| {
            name.eq_ignore_ascii_case("proxy-authorization") && value.trim() == expected
        })
    });
    log.0.lock().unwrap().push((target.clone(), authorized));
    if !authorized {
        let _ = client.write_all(
            b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"corp\"\r\nContent-Length: 0\r\n\r\n",
        );
        return;
    }
    let Ok(server) = TcpStream::connect(&target) else {
        let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n");
        return;
    };
    // The answer comes in pieces, as a real proxy's may.
    let _ = client.write_all(b"HTTP/1.1 200 Connection established\r\n");
    let _ = client.flush();
    let _ = client.write_all(b"Via: 1.1 test-proxy\r\n\r\n");
    let (mut client_read, mut server_write) =
        (client.try_clone().unwrap(), server.try_clone().unwrap());
    let upstream = std::thread::spawn(move || {
        let _ = std::io::copy(&mut client_read, &mut server_write);
        let _ = server_write.shutdown(std::net::Shutdown::Write);
    });
    let (mut server_read, mut client_write) = (server, client);
    let _ = std::io::copy(&mut server_read, &mut client_write);
    let _ = client_write.shutdown(std::net::Shutdown::Write);
    let _ = upstream.join();
}

/// One HTTP request: its head and its body (as long as its `Content-Length` says).
fn read_request(stream: &mut impl Read) -> Option<(String, Vec<u8>)> {
    let head = read_head(stream)?;
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).ok()?;
    Some((head, body))
}

/// An HTTP request's head, read a byte at a time so nothing after it is consumed.
fn read_head(stream: &mut impl Read) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).ok()? == 0 || head.len() > 16 * 1024 {
            return None;
        }
        head.push(byte[0]);
    }
    String::from_utf8(head).ok()
}

// ---------------------------------------------------------------------------------------
// A token endpoint.

/// What the token endpoint did: the tokens it issued, the grants it accepted, and why it
/// refused any request.
#[derive(Default)]
struct TokenLog {
    issued: Vec<String>,
    grants: Vec<String>,
    refused: Vec<String>,
    /// The `expires_in` issued tokens carry (`TOKEN_LIFETIME_SECS` unless set).
    lifetime: Option<serde_json::Value>,
}

/// What the endpoint accepts.
enum Accepts {
    /// Assertions signed by the key whose public half (PKCS#1 DER) this is.
    ServiceAccount(Vec<u8>),
    /// This client and refresh token.
    AuthorizedUser,
}

/// Starts a token endpoint on loopback, over TLS with the PKI's server certificate when one
/// is given (then by the name `localhost`); returns its URL and log.
fn start_token_endpoint(accepts: Accepts, tls: Option<&Pki>) -> (String, Arc<Mutex<TokenLog>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let url = match tls {
        Some(_) => format!("https://localhost:{port}/token"),
        None => format!("http://127.0.0.1:{port}/token"),
    };
    let tls = tls.map(|pki| {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let chain = CertificateDer::pem_file_iter(pki.path("leaf.pem"))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let key = PrivateKeyDer::from_pem_file(pki.path("leaf.key")).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        Arc::new(
            rustls::ServerConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(chain, key)
                .unwrap(),
        )
    });
    let log = Arc::new(Mutex::new(TokenLog::default()));
    let (accepts, seen, token_uri) = (Arc::new(accepts), log.clone(), url.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { break };
            match &tls {
                Some(config) => {
                    let connection = rustls::ServerConnection::new(config.clone()).unwrap();
                    let mut stream = rustls::StreamOwned::new(connection, stream);
                    answer_token_request(&mut stream, &accepts, &token_uri, &seen);
                    stream.conn.send_close_notify();
                    let _ = stream.flush();
                }
                None => answer_token_request(&mut { stream }, &accepts, &token_uri, &seen),
            }
        }
    });
    (url, log)
}

/// Reads one token request from `stream` and answers it.
fn answer_token_request(
    stream: &mut (impl Read + Write),
    accepts: &Accepts,
    token_uri: &str,
    seen: &Mutex<TokenLog>,
) {
    let Some((head, body)) = read_request(stream) else {
        return;
    };
    let form = parse_form(&String::from_utf8_lossy(&body));
    let verdict = if !head.starts_with("POST /token ") {
        Err(format!(
            "not a POST to /token: {}",
            head.lines().next().unwrap_or("")
        ))
    } else {
        judge(accepts, &form, token_uri)
    };
    let mut log = seen.lock().unwrap();
    let (status, answer) = match verdict {
        Ok(grant) => {
            let token = format!("ya29.fake-{}-TOKEN-SECRET", log.issued.len() + 1);
            log.issued.push(token.clone());
            log.grants.push(grant);
            (
                "200 OK",
                serde_json::json!({"access_token": token, "expires_in": log.lifetime.clone().unwrap_or(TOKEN_LIFETIME_SECS.into()), "token_type": "Bearer"}),
            )
        }
        Err(why) => {
            log.refused.push(why.clone());
            (
                "400 Bad Request",
                serde_json::json!({"error": "invalid_grant", "error_description": why}),
            )
        }
    };
    drop(log);
    let body = answer.to_string();
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.flush();
}

fn parse_form(body: &str) -> Vec<(String, String)> {
    body.split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| {
            let decode = |s: &str| {
                percent_encoding::percent_decode_str(&s.replace('+', " "))
                    .decode_utf8_lossy()
                    .into_owned()
            };
            (decode(k), decode(v))
        })
        .collect()
}

/// Checks a token request; the grant type when it is good, else why not.
fn judge(accepts: &Accepts, form: &[(String, String)], token_uri: &str) -> Result<String, String> {
    let field = |name: &str| {
        form.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .ok_or_else(|| format!("no {name}"))
    };
    let grant = field("grant_type")?;
    match accepts {
        Accepts::ServiceAccount(public_key) => {
            if grant != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
                return Err(format!("grant {grant}"));
            }
            let assertion = field("assertion")?;
            let parts: Vec<&str> = assertion.split('.').collect();
            let [header, claims, signature] = parts[..] else {
                return Err("not a JWT".into());
            };
            let signature = URL_SAFE_NO_PAD
                .decode(signature)
                .map_err(|e| e.to_string())?;
            ring::signature::UnparsedPublicKey::new(
                &ring::signature::RSA_PKCS1_2048_8192_SHA256,
                public_key,
            )
            .verify(format!("{header}.{claims}").as_bytes(), &signature)
            .map_err(|_| "Invalid JWT Signature.".to_owned())?;
            let header: serde_json::Value =
                serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).unwrap()).unwrap();
            let claims: serde_json::Value =
                serde_json::from_slice(&URL_SAFE_NO_PAD.decode(claims).unwrap()).unwrap();
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs();
            let good = header["alg"] == "RS256"
                && header["kid"] == "key-1"
                && claims["iss"] == SERVICE_ACCOUNT
                && claims["aud"] == token_uri
                && claims["scope"] == "https://www.googleapis.com/auth/cloud-platform"
                && claims["iat"].as_u64().is_some_and(|iat| iat <= now + 5)
                && claims["exp"].as_u64().is_some_and(|exp| exp > now);
            if !good {
                return Err(format!("bad claims {header} {claims}"));
            }
        }
        Accepts::AuthorizedUser => {
            let good = grant == "refresh_token"
                && field("client_id")? == "client-1"
                && field("client_secret")? == CLIENT_SECRET
                && field("refresh_token")? == REFRESH_TOKEN;
            if !good {
                return Err("bad refresh request".into());
            }
        }
    }
    Ok(grant.to_owned())
}

// ---------------------------------------------------------------------------------------
// A fake Vertex Live endpoint: checks what Vertex checks, then lets the mock answer.

/// One connection the fake Vertex endpoint took.
#[derive(Debug, Clone)]
struct VertexConnection {
    bearer: String,
    api_key_sent: bool,
    model: String,
}

struct FakeVertex {
    url: String,
    connections: Arc<Mutex<Vec<VertexConnection>>>,
    /// Tool calls answered with the UUID id Vertex gave them.
    uuid_answers: Arc<Mutex<usize>>,
    _runtime: tokio::runtime::Runtime,
}

/// Vertex's way with call ids: the mock's `function-call-N` ids go out as UUIDs, and answers
/// must come back with those; `ids` maps them back for the mock.
fn vertex_call_ids(frame: Message, ids: &mut Vec<(String, String)>) -> Message {
    let Ok(text) = frame.to_text() else {
        return frame;
    };
    let Ok(mut message) = serde_json::from_str::<serde_json::Value>(text) else {
        return frame;
    };
    let Some(calls) = message["toolCall"]["functionCalls"].as_array_mut() else {
        return frame;
    };
    for call in calls {
        let Some(id) = call["id"].as_str().map(str::to_owned) else {
            continue;
        };
        let uuid = format!("8acdafcd-9c55-44be-84da-{:012x}", ids.len() + 1);
        call["id"] = uuid.clone().into();
        ids.push((uuid, id));
    }
    Message::text(message.to_string())
}

/// An answer to a Vertex call id, given back the mock's id; counts the answers it mapped.
fn mock_call_ids(frame: Message, ids: &[(String, String)], mapped: &Mutex<usize>) -> Message {
    let Ok(text) = frame.to_text() else {
        return frame;
    };
    let Ok(mut message) = serde_json::from_str::<serde_json::Value>(text) else {
        return frame;
    };
    let Some(responses) = message["toolResponse"]["functionResponses"].as_array_mut() else {
        return frame;
    };
    for response in responses {
        let original = ids
            .iter()
            .find(|(uuid, _)| response["id"] == uuid.as_str())
            .map(|(_, original)| original.clone());
        if let Some(original) = original {
            response["id"] = original.into();
            *mapped.lock().unwrap() += 1;
        }
    }
    Message::text(message.to_string())
}

const VERTEX_PATH: &str = "/ws/google.cloud.aiplatform.v1.LlmBidiService/BidiGenerateContent";

/// Serves Vertex's Live path on loopback: a connection must carry a bearer token `tokens`
/// issued, and ask for the model by its resource name; the mock at `mock_url` answers, its
/// call ids turned into UUIDs.
fn start_fake_vertex(mock_url: &str, tokens: Arc<Mutex<TokenLog>>) -> FakeVertex {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    let connections = Arc::new(Mutex::new(Vec::new()));
    let uuid_answers = Arc::new(Mutex::new(0));
    let answers = uuid_answers.clone();
    let mock = Endpoint::parse(mock_url, ApiVersion::V1)
        .unwrap()
        .url()
        .to_owned();
    let seen = connections.clone();
    runtime.spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (tokens, seen, mock) = (tokens.clone(), seen.clone(), mock.clone());
            let answers = answers.clone();
            tokio::spawn(async move {
                let mut checked = None;
                let check = |request: &Request, response: Response| {
                    let refuse = |status: u16| -> Result<Response, ErrorResponse> {
                        let mut refusal = ErrorResponse::new(None);
                        *refusal.status_mut() = status.try_into().unwrap();
                        Err(refusal)
                    };
                    if request.uri().path() != VERTEX_PATH {
                        return refuse(404);
                    }
                    let bearer = request
                        .headers()
                        .get("authorization")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.strip_prefix("Bearer "))
                        .unwrap_or_default()
                        .to_owned();
                    if !tokens.lock().unwrap().issued.contains(&bearer) {
                        return refuse(401);
                    }
                    checked = Some((bearer, request.headers().contains_key("x-goog-api-key")));
                    Ok(response)
                };
                let Ok(mut client) = tokio_tungstenite::accept_hdr_async(stream, check).await
                else {
                    return;
                };
                let Some((bearer, api_key_sent)) = checked else {
                    return;
                };
                let Some(Ok(Message::Text(setup))) = client.next().await else {
                    return;
                };
                let mut setup: serde_json::Value = serde_json::from_str(&setup).unwrap();
                let model = setup["setup"]["model"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                seen.lock().unwrap().push(VertexConnection {
                    bearer,
                    api_key_sent,
                    model: model.clone(),
                });
                let prefix =
                    format!("projects/{PROJECT}/locations/{LOCATION}/publishers/google/models/");
                let Some(id) = model.strip_prefix(&prefix) else {
                    let _ = client.close(None).await;
                    return;
                };
                setup["setup"]["model"] = format!("models/{id}").into();
                let Ok((mut upstream, _)) = tokio_tungstenite::connect_async(&mock).await else {
                    return;
                };
                if upstream
                    .send(Message::text(setup.to_string()))
                    .await
                    .is_err()
                {
                    return;
                }
                // Frames both ways until either side ends; then both connections drop, as a
                // lost connection does.
                let mut ids = Vec::new();
                loop {
                    tokio::select! {
                        frame = client.next() => match frame {
                            Some(Ok(frame)) if !frame.is_close() => {
                                let frame = mock_call_ids(frame, &ids, &answers);
                                if upstream.send(frame).await.is_err() { break; }
                            }
                            _ => break,
                        },
                        frame = upstream.next() => match frame {
                            Some(Ok(frame)) if !frame.is_close() => {
                                let frame = vertex_call_ids(frame, &mut ids);
                                if client.send(frame).await.is_err() { break; }
                            }
                            _ => break,
                        },
                    }
                }
            });
        }
    });
    FakeVertex {
        url,
        connections,
        uuid_answers,
        _runtime: runtime,
    }
}

// ---------------------------------------------------------------------------------------
// Checks shared by the tests.

/// The percent-encoded proxy URL with the user and password.
fn proxy_url(port: u16, password: &str) -> String {
    let encode = |s: &str| {
        percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
    };
    format!(
        "http://{}:{}@127.0.0.1:{port}",
        encode(PROXY_USER),
        encode(password)
    )
}

/// `SSL_CERT_FILE` naming a file that does not exist, beside an `SSL_CERT_DIR` that trusts
/// the server: the session works, and says at its start what `doctor` says, in its words.
#[test]
fn a_session_warns_of_a_certificate_file_it_cannot_read_as_doctor_does() {
    let scratch = tempfile::tempdir().unwrap();
    let pki = Pki::create(scratch.path());
    let mock = pki.tls_mock(scratch.path());
    let wss = mock.url.replace("ws://127.0.0.1", "wss://localhost");
    let trusted = scratch.path().join("trusted");
    std::fs::create_dir(&trusted).unwrap();
    std::fs::copy(pki.path("ca.pem"), trusted.join("ca.pem")).unwrap();
    let missing = scratch.path().join("no-such-bundle.pem");
    let missing = missing.to_str().unwrap();
    let trusted = trusted.to_str().unwrap();
    let envs = [("SSL_CERT_FILE", missing), ("SSL_CERT_DIR", trusted)];
    let run = run_livetalk(
        scratch.path(),
        &["--headless", "--endpoint", &wss],
        &envs,
        &[SMART_HOME_LINES[0]],
    );
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("Gemini: "), "{}", run.stdout);
    let warning = run
        .stderr
        .lines()
        .find(|l| l.starts_with("livetalk: warning: Certificates: "))
        .unwrap_or_else(|| panic!("no warning about the certificates:\n{}", run.stderr));
    assert!(warning.contains(missing), "{warning}");
    let doctor = run_livetalk(scratch.path(), &["--endpoint", &wss, "doctor"], &envs, &[]);
    let found = doctor
        .stdout
        .lines()
        .find(|l| l.contains("certificates: "))
        .unwrap_or_else(|| panic!("{}", doctor.stdout));
    let said = found
        .split("certificates: ")
        .nth(1)
        .and_then(|rest| rest.split(" → ").next())
        .unwrap();
    assert!(found.starts_with('⚠'), "{found}");
    assert!(warning.contains(said), "doctor: {said}\nsession: {warning}");
    // A route without TLS reads no certificate and warns of none.
    let offline = run_livetalk(
        scratch.path(),
        &["--headless", "--offline"],
        &envs,
        &[SMART_HOME_LINES[0]],
    );
    assert_eq!(offline.code, Some(0), "{}", offline.stderr);
    assert!(
        !offline.stderr.contains("Certificates"),
        "{}",
        offline.stderr
    );
}

// ---------------------------------------------------------------------------------------
// The tests.

#[test]
fn the_dialogue_goes_through_an_authenticating_proxy_to_a_server_a_local_ca_signed() {
    let scratch = tempfile::tempdir().unwrap();
    let pki = Pki::create(scratch.path());
    let mock = pki.tls_mock(scratch.path());
    // By name: loopback addresses are never sent to a proxy.
    let endpoint = mock.url.replace("127.0.0.1", "localhost");
    assert!(endpoint.starts_with("wss://localhost:"), "{}", mock.url);
    let (port, proxy) = start_proxy(PROXY_USER, PROXY_PASSWORD);
    let url = proxy_url(port, PROXY_PASSWORD);
    let ca = pki.path("ca.pem");
    let args = ["--headless", "--endpoint", &endpoint];

    let run = run_livetalk(
        scratch.path(),
        &args,
        &[("https_proxy", &url), ("SSL_CERT_FILE", &ca)],
        &SMART_HOME_LINES,
    );
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    assert_smart_home_dialogue(&run.stdout);
    let mock_address = endpoint.trim_start_matches("wss://").trim_end_matches('/');
    assert_eq!(proxy.tunnels(), vec![(mock_address.to_owned(), true)]);
    assert_no_secrets(
        &run,
        scratch.path(),
        &[PROXY_PASSWORD, &url],
        &[&pki.dir, &scratch.path().join("config.toml")],
    );

    // Without the CA the server is not trusted, and the message says where a CA goes.
    let untrusted = run_livetalk(
        scratch.path(),
        &args,
        &[("HTTPS_PROXY", &url)],
        &SMART_HOME_LINES,
    );
    assert_ne!(untrusted.code, Some(0), "{}", untrusted.stdout);
    assert!(
        untrusted
            .stderr
            .contains("not signed by an authority livetalk trusts")
            && untrusted.stderr.contains("SSL_CERT_FILE"),
        "{}",
        untrusted.stderr
    );
    assert_eq!(proxy.tunnels().len(), 2, "it went through the proxy too");
}

#[test]
fn a_server_presenting_its_authoritys_certificate_is_told_in_words() {
    // A common mistake with a home-made CA: the server is given the CA's own certificate.
    let scratch = tempfile::tempdir().unwrap();
    let pki = Pki::create(scratch.path());
    let mock = MockProcess::start(
        scratch.path(),
        &[
            "--tls-cert",
            &pki.path("ca.pem"),
            "--tls-key",
            &pki.path("ca.key"),
        ],
    );
    let endpoint = mock.url.replace("127.0.0.1", "localhost");
    let run = run_livetalk(
        scratch.path(),
        &["--headless", "--endpoint", &endpoint],
        &[("SSL_CERT_FILE", &pki.path("ca.pem"))],
        &["hello"],
    );
    assert_ne!(run.code, Some(0), "{}", run.stdout);
    assert!(
        run.stderr.contains("authority's own certificate") && run.stderr.contains("SSL_CERT_FILE"),
        "{}",
        run.stderr
    );
    for jargon in ["OtherError", "CaUsedAsEndEntity", "Other("] {
        assert!(!run.stderr.contains(jargon), "{jargon} in {}", run.stderr);
    }
}

#[test]
fn no_proxy_goes_direct_a_wrong_password_is_one_message_a_mute_proxy_costs_the_deadline() {
    let scratch = tempfile::tempdir().unwrap();
    let mock = MockProcess::start(scratch.path(), &["--speed", "20"]);
    let (port, proxy) = start_proxy(PROXY_USER, PROXY_PASSWORD);
    let endpoint = mock.url.replace("127.0.0.1", "localhost");
    let args = ["--headless", "--endpoint", &endpoint];

    let direct = run_livetalk(
        scratch.path(),
        &args,
        &[
            ("HTTPS_PROXY", &proxy_url(port, PROXY_PASSWORD)),
            ("NO_PROXY", "example.com, localhost"),
        ],
        &SMART_HOME_LINES,
    );
    assert_eq!(direct.code, Some(0), "{}\n{}", direct.stdout, direct.stderr);
    assert_smart_home_dialogue(&direct.stdout);
    assert!(proxy.tunnels().is_empty(), "{:?}", proxy.tunnels());

    let wrong_password = "wrong-pass-SECRET-5";
    let wrong_url = proxy_url(port, wrong_password);
    let started = Instant::now();
    let refused = run_livetalk(
        scratch.path(),
        &args,
        &[("ALL_PROXY", &wrong_url)],
        &SMART_HOME_LINES,
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_ne!(refused.code, Some(0), "{}", refused.stdout);
    assert_eq!(
        proxy.tunnels().len(),
        1,
        "asked once, not retried: {:?}",
        proxy.tunnels()
    );
    assert!(!proxy.tunnels()[0].1);
    let errors: Vec<&str> = refused
        .stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(
        errors,
        vec![format!(
            "livetalk: error: The proxy 127.0.0.1:{port} refused the user and password in ALL_PROXY (407 Proxy Authentication Required)."
        )],
        "{}",
        refused.stderr
    );
    assert!(!refused.stdout.contains("Gemini:"), "{}", refused.stdout);
    assert_no_secrets(
        &refused,
        scratch.path(),
        &[wrong_password, &wrong_url],
        &[&scratch.path().join("config.toml")],
    );

    // A proxy that takes the connection and never answers costs the connect deadline, and the
    // message names the stage (the kernel accepts for a listener nobody reads).
    let mute = TcpListener::bind("127.0.0.1:0").unwrap();
    let mute_proxy = format!("http://127.0.0.1:{}", mute.local_addr().unwrap().port());
    std::fs::write(
        scratch.path().join("config.toml"),
        "[audio]\nenabled = false\n[session]\nconnect_timeout_secs = 1\n",
    )
    .unwrap();
    let started = Instant::now();
    let stalled = run_livetalk(
        scratch.path(),
        &args,
        &[("HTTPS_PROXY", &mute_proxy)],
        &[SMART_HOME_LINES[0]],
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    let target = endpoint.trim_start_matches("ws://").trim_end_matches('/');
    assert!(
        stalled.stderr.contains(&format!(
            "No answer from {target} within 1 s (waiting for the proxy to open a tunnel). Check the proxy in HTTPS_PROXY"
        )),
        "{}",
        stalled.stderr
    );
}

/// A service-account key file for the test account, its `token_uri` at `token_uri`.
fn service_account_file(scratch: &Path, pki: &Pki, token_uri: &str) -> PathBuf {
    let file = scratch.join("sa.json");
    let key = std::fs::read_to_string(pki.dir.join("sa.pem")).unwrap();
    let json = serde_json::json!({
        "type": "service_account",
        "project_id": PROJECT,
        "private_key_id": "key-1",
        "private_key": key,
        "client_email": SERVICE_ACCOUNT,
        "client_id": "1234",
        "token_uri": token_uri,
    });
    std::fs::write(&file, json.to_string()).unwrap();
    file
}

/// A mock that drops the connection when the second question arrives: the link reconnects,
/// with a new token, and asks again.
fn mock_dropping_at_the_second_question(scratch: &Path) -> MockProcess {
    let scenario = scratch.join("drop.toml");
    std::fs::write(
        &scenario,
        "[[fault]]\nat = \"user_turn\"\nnth = 2\naction = \"drop\"\n",
    )
    .unwrap();
    MockProcess::start(
        scratch,
        &["--speed", "20", "--scenario", scenario.to_str().unwrap()],
    )
}

#[test]
fn vertex_with_a_service_account_completes_the_tool_calls_and_renews_its_token() {
    let scratch = tempfile::tempdir().unwrap();
    let pki = Pki::create(scratch.path());
    let public_key = std::fs::read(pki.dir.join("sa.der")).unwrap();
    let (token_uri, tokens) = start_token_endpoint(Accepts::ServiceAccount(public_key), None);
    let mock = mock_dropping_at_the_second_question(scratch.path());
    let vertex = start_fake_vertex(&mock.url, tokens.clone());
    let credentials = service_account_file(scratch.path(), &pki, &token_uri);

    let run = run_livetalk(
        scratch.path(),
        &[
            "--headless",
            "--vertex",
            "--location",
            LOCATION,
            "--endpoint",
            &vertex.url,
        ],
        &[
            (
                "GOOGLE_APPLICATION_CREDENTIALS",
                credentials.to_str().unwrap(),
            ),
            ("GOOGLE_CLOUD_PROJECT", PROJECT),
            ("GEMINI_API_KEY", API_KEY),
        ],
        &SMART_HOME_LINES,
    );
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    assert_smart_home_dialogue(&run.stdout);
    assert!(
        run.stderr.contains("livetalk: info: An API key is set, but --vertex uses Application Default Credentials; the key is not used."),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("Reconnected; the conversation continues."),
        "{}",
        run.stderr
    );

    assert_eq!(
        *vertex.uuid_answers.lock().unwrap(),
        3,
        "each of the three calls was answered with its UUID id"
    );
    let tokens = tokens.lock().unwrap();
    assert!(tokens.refused.is_empty(), "{:?}", tokens.refused);
    assert_eq!(
        tokens.issued.len(),
        2,
        "one token per connection: it was renewed"
    );
    let connections = vertex.connections.lock().unwrap().clone();
    assert_eq!(connections.len(), 2, "{connections:?}");
    for (connection, token) in connections.iter().zip(&tokens.issued) {
        assert_eq!(
            &connection.bearer, token,
            "each connection had a fresh token"
        );
        assert!(!connection.api_key_sent);
        assert_eq!(
            connection.model,
            format!(
                "projects/{PROJECT}/locations/{LOCATION}/publishers/google/models/gemini-3.8-live"
            )
        );
    }
    let mut secrets: Vec<&str> = tokens.issued.iter().map(String::as_str).collect();
    secrets.push(API_KEY);
    assert_no_secrets(
        &run,
        scratch.path(),
        &secrets,
        &[&pki.dir, &credentials, &scratch.path().join("config.toml")],
    );
}

#[test]
fn vertex_with_gcloud_user_credentials_and_without_any() {
    let scratch = tempfile::tempdir().unwrap();
    let (token_uri, tokens) = start_token_endpoint(Accepts::AuthorizedUser, None);
    let mock = MockProcess::start(scratch.path(), &["--speed", "20"]);
    let vertex = start_fake_vertex(&mock.url, tokens.clone());
    // Where `gcloud auth application-default login` writes it.
    let gcloud = scratch.path().join(".config").join("gcloud");
    std::fs::create_dir_all(&gcloud).unwrap();
    let credentials = gcloud.join("application_default_credentials.json");
    std::fs::write(
        &credentials,
        serde_json::json!({
            "type": "authorized_user",
            "client_id": "client-1",
            "client_secret": CLIENT_SECRET,
            "refresh_token": REFRESH_TOKEN,
            "token_uri": token_uri,
        })
        .to_string(),
    )
    .unwrap();
    let config = scratch.path().join("config.toml");
    std::fs::write(
        &config,
        format!("vertex = true\nproject = \"{PROJECT}\"\nlocation = \"{LOCATION}\"\n[audio]\nenabled = false\n"),
    )
    .unwrap();

    let run = run_livetalk(
        scratch.path(),
        &["--headless", "--endpoint", &vertex.url],
        &[],
        &[SMART_HOME_LINES[0]],
    );
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("Tool: get_device_status {\"device_name\":\"living room lamp\"} -> ok"),
        "{}",
        run.stdout
    );
    {
        let tokens = tokens.lock().unwrap();
        assert!(tokens.refused.is_empty(), "{:?}", tokens.refused);
        assert_eq!(tokens.grants, vec!["refresh_token"]);
        let mut secrets: Vec<&str> = tokens.issued.iter().map(String::as_str).collect();
        secrets.extend([CLIENT_SECRET, REFRESH_TOKEN]);
        assert_no_secrets(&run, scratch.path(), &secrets, &[&credentials, &config]);
    }

    // No credentials anywhere: one message, at once, and nothing is dialled.
    std::fs::remove_file(&credentials).unwrap();
    let started = Instant::now();
    let bare = run_livetalk(
        scratch.path(),
        &["--headless", "--endpoint", &vertex.url],
        &[],
        &[SMART_HOME_LINES[0]],
    );
    let took = started.elapsed();
    assert!(took < Duration::from_secs(1), "took {took:?}");
    assert_eq!(bare.code, Some(1), "{}", bare.stdout);
    let lines: Vec<&str> = bare.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{}", bare.stderr);
    assert!(
        lines[0].starts_with("livetalk: error: No Google Cloud credentials for Vertex AI: set GOOGLE_APPLICATION_CREDENTIALS")
            && lines[0].contains("gcloud auth application-default login"),
        "{}",
        lines[0]
    );
    assert_eq!(vertex.connections.lock().unwrap().len(), 1);
}

#[test]
fn vertex_behind_the_company_proxy_gets_its_token_and_its_session_through_the_tunnel() {
    let scratch = tempfile::tempdir().unwrap();
    let pki = Pki::create(scratch.path());
    let public_key = std::fs::read(pki.dir.join("sa.der")).unwrap();
    // The token endpoint speaks TLS with the local CA's certificate: the token request must
    // trust SSL_CERT_FILE and go through the proxy as the WebSocket does.
    let (token_uri, tokens) = start_token_endpoint(Accepts::ServiceAccount(public_key), Some(&pki));
    let mock = MockProcess::start(scratch.path(), &["--speed", "20"]);
    let vertex = start_fake_vertex(&mock.url, tokens.clone());
    let credentials = service_account_file(scratch.path(), &pki, &token_uri);
    let (port, proxy) = start_proxy(PROXY_USER, PROXY_PASSWORD);
    let url = proxy_url(port, PROXY_PASSWORD);
    let endpoint = vertex.url.replace("127.0.0.1", "localhost");

    let run = run_livetalk(
        scratch.path(),
        &[
            "--headless",
            "--vertex",
            "--project",
            PROJECT,
            "--location",
            LOCATION,
            "--endpoint",
            &endpoint,
        ],
        &[
            (
                "GOOGLE_APPLICATION_CREDENTIALS",
                credentials.to_str().unwrap(),
            ),
            ("HTTPS_PROXY", &url),
            ("SSL_CERT_FILE", &pki.path("ca.pem")),
        ],
        &[SMART_HOME_LINES[0]],
    );
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("Tool: get_device_status {\"device_name\":\"living room lamp\"} -> ok"),
        "{}",
        run.stdout
    );
    let token_address = token_uri
        .trim_start_matches("https://")
        .trim_end_matches("/token");
    let vertex_address = endpoint.trim_start_matches("ws://");
    assert_eq!(
        proxy.tunnels(),
        vec![
            (token_address.to_owned(), true),
            (vertex_address.to_owned(), true)
        ]
    );
    let tokens = tokens.lock().unwrap();
    assert!(tokens.refused.is_empty(), "{:?}", tokens.refused);
    assert_eq!(tokens.issued.len(), 1);
    assert_eq!(
        vertex.connections.lock().unwrap()[0].bearer,
        tokens.issued[0]
    );
    let mut secrets: Vec<&str> = tokens.issued.iter().map(String::as_str).collect();
    secrets.extend([PROXY_PASSWORD, url.as_str()]);
    assert_no_secrets(
        &run,
        scratch.path(),
        &secrets,
        &[&pki.dir, &credentials, &scratch.path().join("config.toml")],
    );
}

// ---------------------------------------------------------------------------------------
// Hostile token endpoints.

/// How a hostile token endpoint answers a token request.
#[derive(Clone, Copy, Debug)]
enum Hostile {
    /// 200, then a body that never ends.
    EndlessBody,
    /// 400, quoting the whole request (its form holds the credentials).
    Echo,
    /// 307 to another origin (the port given), where credentials must not follow.
    RedirectElsewhere(u16),
    /// 407, as a proxy on the way would answer.
    ProxyWantsCredentials,
}

/// Starts a hostile token endpoint on loopback; returns its URL and the forms it was sent.
fn start_hostile_token_endpoint(hostile: Hostile) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "http://127.0.0.1:{}/token",
        listener.local_addr().unwrap().port()
    );
    let forms = Arc::new(Mutex::new(Vec::new()));
    let seen = forms.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { break };
            let seen = seen.clone();
            std::thread::spawn(move || {
                let Some((head, body)) = read_request(&mut stream) else {
                    return;
                };
                let form = String::from_utf8_lossy(&body).into_owned();
                seen.lock().unwrap().push(form.clone());
                let _ = match hostile {
                    Hostile::EndlessBody => {
                        let _ = stream.write_all(
                            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{\"access_token\": \"",
                        );
                        let chunk = vec![b'A'; 64 << 10];
                        while stream.write_all(&chunk).is_ok() {}
                        Ok(())
                    }
                    Hostile::Echo => {
                        let answer = serde_json::json!({
                            "error": "invalid_request",
                            "error_description": format!("you sent: {head}{form}"),
                        })
                        .to_string();
                        write!(
                            stream,
                            "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{answer}",
                            answer.len()
                        )
                    }
                    Hostile::RedirectElsewhere(port) => write!(
                        stream,
                        "HTTP/1.1 307 Temporary Redirect\r\nLocation: http://127.0.0.1:{port}/steal\r\nContent-Length: 0\r\n\r\n"
                    ),
                    Hostile::ProxyWantsCredentials => stream.write_all(
                        b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"corp\"\r\nContent-Length: 0\r\n\r\n",
                    ),
                };
            });
        }
    });
    (url, forms)
}

/// A listener that keeps whatever anyone sends it: where a redirect would carry credentials.
fn start_thief() -> (u16, Arc<Mutex<Vec<u8>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let stolen = Arc::new(Mutex::new(Vec::new()));
    let kept = stolen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { break };
            let mut bytes = Vec::new();
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let _ = stream.read_to_end(&mut bytes);
            kept.lock().unwrap().extend(b"<connection>");
            kept.lock().unwrap().extend(bytes);
        }
    });
    (port, stolen)
}

/// A token endpoint that sends for ever, quotes the request, redirects elsewhere or answers
/// 407: each is one message in the user's words within the deadline, in little memory; no
/// credential (client secret, refresh token, the signed assertion) is printed or logged, or
/// sent on to another origin. And a token that says it lives 2^63-1 seconds is used, not a
/// panic.
#[test]
fn hostile_token_endpoints_get_no_secret_and_cost_no_memory() {
    let scratch = tempfile::tempdir().unwrap();
    let pki = Pki::create(scratch.path());
    let config = scratch.path().join("config.toml");
    std::fs::write(
        &config,
        format!("vertex = true\nproject = \"{PROJECT}\"\nlocation = \"{LOCATION}\"\n[audio]\nenabled = false\n"),
    )
    .unwrap();
    let (thief_port, stolen) = start_thief();
    let user_file = scratch.path().join("user.json");
    let peak = scratch.path().join("peak");
    for hostile in [
        Hostile::EndlessBody,
        Hostile::Echo,
        Hostile::RedirectElsewhere(thief_port),
        Hostile::ProxyWantsCredentials,
    ] {
        let (token_uri, forms) = start_hostile_token_endpoint(hostile);
        std::fs::write(
            &user_file,
            serde_json::json!({
                "type": "authorized_user",
                "client_id": "client-1",
                "client_secret": CLIENT_SECRET,
                "refresh_token": REFRESH_TOKEN,
                "token_uri": token_uri,
            })
            .to_string(),
        )
        .unwrap();
        let service_file = service_account_file(scratch.path(), &pki, &token_uri);
        for credentials in [&user_file, &service_file] {
            let log_before = log_bytes(scratch.path());
            let mut command = livetalk_measured(scratch.path(), &peak);
            command
                .args(["--headless", "--endpoint", "ws://127.0.0.1:9"])
                .env("GOOGLE_APPLICATION_CREDENTIALS", credentials);
            let started = Instant::now();
            let run = run_command(command, &[SMART_HOME_LINES[0]], Duration::from_secs(60));
            let took = started.elapsed();
            let peak_mib = peak_mib(&peak);
            let grown = log_bytes(scratch.path()) - log_before;
            println!(
                "{hostile:?}: exit {:?} in {took:?}, peak {peak_mib:.1} MiB, log +{grown} B: {}",
                run.code,
                run.stderr.trim()
            );
            assert_eq!(
                run.code,
                Some(1),
                "{hostile:?}\n{}\n{}",
                run.stdout,
                run.stderr
            );
            let says = match hostile {
                Hostile::EndlessBody => {
                    "sent an answer larger than 1024 KiB; that is not a token answer".to_owned()
                }
                Hostile::Echo => "refused the".to_owned(),
                Hostile::RedirectElsewhere(port) => format!(
                    "redirected the token request to http://127.0.0.1:{port}; livetalk does not send credentials on to another address"
                ),
                Hostile::ProxyWantsCredentials => {
                    "asks for a user and password (407 Proxy Authentication Required)".to_owned()
                }
            };
            assert!(
                run.stderr.contains(&says),
                "{hostile:?}: wanted {says:?} in\n{}",
                run.stderr
            );
            assert!(took < Duration::from_secs(10), "{hostile:?}: took {took:?}");
            assert!(peak_mib < 150.0, "{hostile:?}: peak {peak_mib:.0} MiB");
            assert!(
                grown < 1 << 20,
                "{hostile:?}: the log grew by {grown} bytes"
            );

            // What the endpoint was sent is every secret it could quote back.
            let forms = forms.lock().unwrap().clone();
            assert!(!forms.is_empty(), "{hostile:?}: the endpoint was asked");
            let mut secrets = vec![CLIENT_SECRET.to_owned(), REFRESH_TOKEN.to_owned()];
            for form in &forms {
                for (key, value) in parse_form(form) {
                    if key == "assertion" {
                        secrets.push(value.clone());
                        // The signature alone is the secret part.
                        secrets.push(value.rsplit('.').next().unwrap().to_owned());
                    }
                }
            }
            let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
            assert_no_secrets(
                &run,
                scratch.path(),
                &secrets,
                &[&user_file, &service_file, &config, &peak],
            );
        }
    }
    assert!(
        stolen.lock().unwrap().is_empty(),
        "a redirect carried the request to another origin: {}",
        String::from_utf8_lossy(&stolen.lock().unwrap())
    );

    // A TLS token endpoint behind a proxy that refuses the password: the proxy is named, not
    // the token endpoint, and the password is not printed.
    let (token_uri, tokens) = start_token_endpoint(Accepts::AuthorizedUser, Some(&pki));
    let (proxy_port, proxy_log) = start_proxy(PROXY_USER, PROXY_PASSWORD);
    std::fs::write(
        &user_file,
        serde_json::json!({
            "type": "authorized_user",
            "client_id": "client-1",
            "client_secret": CLIENT_SECRET,
            "refresh_token": REFRESH_TOKEN,
            "token_uri": token_uri,
        })
        .to_string(),
    )
    .unwrap();
    let wrong = "wrong-pass-SECRET-5";
    let run = run_livetalk(
        scratch.path(),
        &["--headless", "--endpoint", "wss://live.example.invalid"],
        &[
            (
                "GOOGLE_APPLICATION_CREDENTIALS",
                user_file.to_str().unwrap(),
            ),
            ("SSL_CERT_FILE", &pki.path("ca.pem")),
            ("HTTPS_PROXY", &proxy_url(proxy_port, wrong)),
        ],
        &[SMART_HOME_LINES[0]],
    );
    println!("407 from the proxy: {}", run.stderr.trim());
    assert_eq!(run.code, Some(1), "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "The proxy 127.0.0.1:{proxy_port} refused the user and password in HTTPS_PROXY for the token request"
        )),
        "{}",
        run.stderr
    );
    assert_eq!(proxy_log.tunnels().len(), 1);
    assert!(tokens.lock().unwrap().issued.is_empty());
    assert_no_secrets(
        &run,
        scratch.path(),
        &[wrong, CLIENT_SECRET, REFRESH_TOKEN],
        &[&user_file, &config, &peak],
    );

    // A lifetime of 2^63-1 seconds: the token is used, and the session runs.
    let (token_uri, tokens) = start_token_endpoint(Accepts::AuthorizedUser, None);
    tokens.lock().unwrap().lifetime = Some(i64::MAX.into());
    let mock = MockProcess::start(scratch.path(), &["--speed", "20"]);
    let vertex = start_fake_vertex(&mock.url, tokens.clone());
    std::fs::write(
        &user_file,
        serde_json::json!({
            "type": "authorized_user",
            "client_id": "client-1",
            "client_secret": CLIENT_SECRET,
            "refresh_token": REFRESH_TOKEN,
            "token_uri": token_uri,
        })
        .to_string(),
    )
    .unwrap();
    let run = run_livetalk(
        scratch.path(),
        &["--headless", "--endpoint", &vertex.url],
        &[(
            "GOOGLE_APPLICATION_CREDENTIALS",
            user_file.to_str().unwrap(),
        )],
        &[SMART_HOME_LINES[0]],
    );
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    assert_eq!(tokens.lock().unwrap().issued.len(), 1);
}

/// `SSL_CERT_FILE` naming `/dev/zero` (which aborted the process), a FIFO, a folder, a huge
/// file or a file with no certificate: the bundled roots are still trusted, and when the
/// server's certificate is not, the message says why the named file was not read.
#[test]
fn a_certificate_file_that_cannot_be_read_is_named_when_trust_fails() {
    let scratch = tempfile::tempdir().unwrap();
    let pki = Pki::create(scratch.path());
    let mock = pki.tls_mock(scratch.path());
    let wss = mock.url.replace("ws://127.0.0.1", "wss://localhost");
    let dir = scratch.path().join("hostile");
    std::fs::create_dir(&dir).unwrap();
    let zero = PathBuf::from("/dev/zero");
    let fifo = dir.join("bundle.fifo");
    mkfifo(&fifo);
    let huge = dir.join("huge.pem");
    sparse_file(&huge, 1 << 30);
    let empty = dir.join("empty.pem");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    let peak = scratch.path().join("peak");
    for (path, says) in [
        (&zero, "is a character device, not a file (SSL_CERT_FILE)"),
        (&fifo, "is a FIFO (named pipe), not a file (SSL_CERT_FILE)"),
        (&dir, "is a folder, not a file (SSL_CERT_FILE)"),
        (
            &huge,
            "is larger than the 16 MiB livetalk reads of a certificate file (SSL_CERT_FILE)",
        ),
        (&empty, "(SSL_CERT_FILE) holds no certificate"),
    ] {
        let mut command = livetalk_measured(scratch.path(), &peak);
        command
            .args(["--headless", "--endpoint", &wss])
            .env("SSL_CERT_FILE", path);
        let started = Instant::now();
        let run = run_command(command, &[SMART_HOME_LINES[0]], Duration::from_secs(60));
        let took = started.elapsed();
        let peak_mib = peak_mib(&peak);
        println!(
            "SSL_CERT_FILE={}: exit {:?} in {took:?}, peak {peak_mib:.1} MiB",
            path.display(),
            run.code
        );
        assert_eq!(run.code, Some(1), "{}\n{}", run.stdout, run.stderr);
        assert!(
            run.stderr
                .contains("not signed by an authority livetalk trusts")
                && run
                    .stderr
                    .contains(&format!("certificate file {}", path.display()))
                && run.stderr.contains(says),
            "wanted {says:?} in\n{}",
            run.stderr
        );
        assert!(took < Duration::from_secs(10), "took {took:?}");
        assert!(peak_mib < 150.0, "peak {peak_mib:.0} MiB");
    }
}
