//! The tool round trip on loopback: a fake Live server sends `toolCall`s for `get_current_time`
//! to the real livetalk binary (`--headless --no-audio`, no API key) and times each one until
//! the matching `toolResponse` is back, one call at a time.
//!
//! `cargo bench --bench tool_roundtrip` runs 200 warm-up calls and then 2,000 timed ones, and
//! prints p50 and p99. It first runs the same server against a minimal in-process client that
//! answers each call at once: that floor is the harness's own share (the server's work, the
//! loopback socket and the wake-ups on both ends), the rest is livetalk's.
//!
//! `-- --against PATH --rounds 3` also times another livetalk binary (a build from before a
//! change), in turn with this one, and prints each one's median p50 and their ratio, and the
//! same for the CPU time each spent on a call (all its threads, from `schedstat`): latency on
//! loopback moves with where the scheduler puts four busy threads on the cores, CPU time far
//! less.
//!
//! `-- --sdk PYTHON` also times the official Python SDK's own receive-and-respond loop
//! (`benches/sdk_tool_loop.py`, run by a Python with `google-genai`: the test setup's
//! `.venv/bin/python`) against the same server, in turn with livetalk, and prints SDK ÷
//! livetalk for p50, p99 and CPU a call. The SDK dials `wss://` only, so with `--sdk` (or
//! `--wss`) every client goes over TLS, to a certificate a throwaway test CA signed (trusted
//! through `SSL_CERT_FILE`). `--livetalk PATH` times that binary as this build (a release
//! build made apart, say, when the bench itself is built with a quicker profile).

// A bench prints its own figures; it holds no secrets.
#![allow(clippy::disallowed_macros)]

// The integration tests' helpers, for the isolated `livetalk` command; test code, so unwraps.
#[allow(clippy::unwrap_used)]
#[path = "../tests/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader, Read};
use std::process::Stdio;
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures_util::{SinkExt, StreamExt};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};

const WARM_UP_CALLS: usize = 200;
const TIMED_CALLS: usize = 2_000;
/// How long one answer may take before the run is called broken.
const ANSWER_DEADLINE: Duration = Duration::from_secs(10);

/// What one timed run measured, per call.
struct Figures {
    /// `toolCall` written → matching `toolResponse` read, as the server sees it.
    round_trip: Vec<Duration>,
    /// The server's own work on the critical path: encoding and writing the call, then
    /// parsing the answer it read.
    server_work: Vec<Duration>,
    /// The client's CPU time (all its threads) over the timed calls, per call; `None` for the
    /// floor, which runs inside the bench.
    cpu_per_call: Option<Duration>,
    /// The times its threads went to sleep over the timed calls, per call: each is a wake-up
    /// later.
    sleeps_per_call: Option<f64>,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

impl Figures {
    /// The median round trip.
    fn p50(&self) -> Duration {
        self.quantile(0.5)
    }

    fn p99(&self) -> Duration {
        self.quantile(0.99)
    }

    fn quantile(&self, q: f64) -> Duration {
        let mut rt = self.round_trip.clone();
        rt.sort();
        rt[((rt.len() as f64 * q) as usize).min(rt.len() - 1)]
    }

    fn report(&mut self, label: &str) {
        let (rt, work) = (&mut self.round_trip, &mut self.server_work);
        rt.sort();
        work.sort();
        let at = |v: &[Duration], q: f64| v[((v.len() as f64 * q) as usize).min(v.len() - 1)];
        let cpu = self
            .cpu_per_call
            .map(|cpu| format!(", CPU {:.1} µs a call", cpu.as_secs_f64() * 1e6))
            .unwrap_or_default()
            + &self
                .sleeps_per_call
                .map(|n| format!(", {n:.2} sleeps a call"))
                .unwrap_or_default();
        println!(
            "  {label}: {} calls, p50 {:.3} ms, p90 {:.3} ms, p99 {:.3} ms, max {:.3} ms (server's own work p50 {:.3} ms){cpu}",
            rt.len(),
            ms(at(rt, 0.50)),
            ms(at(rt, 0.90)),
            ms(at(rt, 0.99)),
            ms(at(rt, 1.0)),
            ms(at(work, 0.50)),
        );
    }
}

/// The fake server's TLS for `wss://`: a certificate a throwaway test CA signed, and the CA
/// each client trusts (through `SSL_CERT_FILE` for the programs, a root store for the floor).
struct Tls {
    acceptor: tokio_rustls::TlsAcceptor,
    client: Arc<rustls::ClientConfig>,
    ca: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Tls {
    fn new() -> anyhow::Result<Tls> {
        let dir = tempfile::tempdir()?;
        common::test_ca(dir.path());
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chain = CertificateDer::pem_file_iter(dir.path().join("leaf.pem"))?
            .collect::<Result<Vec<_>, _>>()?;
        let key = PrivateKeyDer::from_pem_file(dir.path().join("leaf.key"))?;
        let server = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
        let ca = dir.path().join("ca.pem");
        let mut roots = rustls::RootCertStore::empty();
        for certificate in CertificateDer::pem_file_iter(&ca)? {
            roots.add(certificate?)?;
        }
        let client = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Tls {
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(server)),
            client: Arc::new(client),
            ca,
            _dir: dir,
        })
    }

    /// The scheme a client dials: `wss` or, without TLS, `ws`.
    fn scheme(tls: Option<&Tls>) -> &'static str {
        if tls.is_some() { "wss" } else { "ws" }
    }
}

/// The fake server: upgrade, read `setup`, answer `setupComplete`, then call the tool
/// `warm_up + timed` times, timing the last `timed` (and the CPU the process `client` spent on
/// them, when it is another process).
async fn serve(
    listener: TcpListener,
    tls: Option<&Tls>,
    warm_up: usize,
    timed: usize,
    client: Option<u32>,
) -> anyhow::Result<Figures> {
    let (stream, _) = tokio::time::timeout(ANSWER_DEADLINE, listener.accept())
        .await
        .context("nobody connected")??;
    stream.set_nodelay(true)?;
    match tls {
        Some(tls) => {
            let stream = tls.acceptor.accept(stream).await?;
            let socket = tokio_tungstenite::accept_async(stream).await?;
            call(socket, warm_up, timed, client).await
        }
        None => {
            let socket = tokio_tungstenite::accept_async(stream).await?;
            call(socket, warm_up, timed, client).await
        }
    }
}

/// [`serve`]'s calls, over a socket already upgraded.
async fn call<S>(
    mut socket: WebSocketStream<S>,
    warm_up: usize,
    timed: usize,
    client: Option<u32>,
) -> anyhow::Result<Figures>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let setup = next_json(&mut socket).await?;
    if setup.get("setup").is_none() {
        bail!("the first client message was not setup: {setup}");
    }
    // Binary and pretty, as the service sends its messages.
    socket
        .send(Message::binary(b"{\n  \"setupComplete\": {}\n}\n".to_vec()))
        .await?;

    let mut figures = Figures {
        round_trip: Vec::with_capacity(timed),
        server_work: Vec::with_capacity(timed),
        cpu_per_call: None,
        sleeps_per_call: None,
    };
    let mut cpu_before = None;
    for n in 0..warm_up + timed {
        if n == warm_up {
            cpu_before = client.map(cpu_time).transpose()?;
        }
        let id = format!("function-call-{n}");
        let started = Instant::now();
        let call = json!({"toolCall": {"functionCalls": [
            {"id": id, "name": "get_current_time", "args": {}}
        ]}});
        socket
            .send(Message::binary(serde_json::to_vec_pretty(&call)?))
            .await?;
        let sent = Instant::now();
        let (answered, parsed) = loop {
            let (frame, read_at) = next_frame(&mut socket).await?;
            let message: Value = serde_json::from_slice(&frame)?;
            let parsed = Instant::now();
            // The SDK writes the protocol's field names in either spelling.
            let answers = ["toolResponse", "tool_response"]
                .iter()
                .find_map(|k| message.get(*k))
                .and_then(|r| {
                    ["functionResponses", "function_responses"]
                        .iter()
                        .find_map(|k| r.get(*k))
                });
            if answers
                .and_then(Value::as_array)
                .is_some_and(|a| a.iter().any(|r| r["id"] == id.as_str()))
            {
                break (read_at, parsed);
            }
        };
        if n >= warm_up {
            figures.round_trip.push(answered - started);
            figures
                .server_work
                .push((sent - started) + (parsed - answered));
        }
    }
    if let (Some(pid), Some((cpu, sleeps))) = (client, cpu_before) {
        let (cpu_after, sleeps_after) = cpu_time(pid)?;
        figures.cpu_per_call = Some((cpu_after - cpu) / timed.max(1) as u32);
        figures.sleeps_per_call = Some((sleeps_after - sleeps) as f64 / timed.max(1) as f64);
    }
    // A clean goodbye: close, then read until the client has closed too.
    socket.send(Message::Close(None)).await?;
    while let Ok(Some(Ok(_))) = tokio::time::timeout(ANSWER_DEADLINE, socket.next()).await {}
    Ok(figures)
}

/// The CPU time every thread of process `pid` has had so far (the first field of each
/// thread's `schedstat`, in nanoseconds: the tick counts of `stat` are too coarse for a few
/// thousand calls of tens of microseconds), and how many times they went to sleep (their
/// voluntary context switches).
fn cpu_time(pid: u32) -> anyhow::Result<(Duration, u64)> {
    let (mut total, mut sleeps) = (0u64, 0u64);
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let task = task?.path();
        let stat = std::fs::read_to_string(task.join("schedstat"))?;
        let ns = stat.split_whitespace().next().unwrap_or("0");
        total += ns.parse::<u64>().context("a thread's schedstat")?;
        let status = std::fs::read_to_string(task.join("status"))?;
        let voluntary = status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .unwrap_or("0");
        sleeps += voluntary
            .trim()
            .parse::<u64>()
            .context("a thread's status")?;
    }
    Ok((Duration::from_nanos(total), sleeps))
}

/// The next data frame's payload and when it was read.
async fn next_frame<S>(socket: &mut WebSocketStream<S>) -> anyhow::Result<(Vec<u8>, Instant)>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    loop {
        let frame = tokio::time::timeout(ANSWER_DEADLINE, socket.next())
            .await
            .context("no answer in time")?
            .context("the client went away")??;
        let at = Instant::now();
        match frame {
            Message::Text(text) => return Ok((text.as_bytes().to_vec(), at)),
            Message::Binary(bytes) => return Ok((bytes.to_vec(), at)),
            Message::Close(close) => bail!("the client closed: {close:?}"),
            _ => {}
        }
    }
}

async fn next_json<S>(socket: &mut WebSocketStream<S>) -> anyhow::Result<Value>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (frame, _) = next_frame(socket).await?;
    Ok(serde_json::from_slice(&frame)?)
}

/// The floor: a client that answers every call the moment it reads it, on its own thread.
async fn echo_client(url: String, tls: Option<Arc<rustls::ClientConfig>>) -> anyhow::Result<()> {
    let (mut socket, _): (WebSocketStream<MaybeTlsStream<TcpStream>>, _) =
        tokio_tungstenite::connect_async_tls_with_config(
            url,
            None,
            false,
            tls.map(Connector::Rustls),
        )
        .await?;
    socket
        .send(Message::text(r#"{"setup":{"model":"models/echo"}}"#))
        .await?;
    loop {
        let frame = match socket.next().await {
            Some(Ok(Message::Text(text))) => text.as_bytes().to_vec(),
            Some(Ok(Message::Binary(bytes))) => bytes.to_vec(),
            Some(Ok(Message::Close(_))) | None => return Ok(()),
            Some(Ok(_)) => continue,
            Some(Err(e)) => return Err(e.into()),
        };
        let message: Value = serde_json::from_slice(&frame)?;
        let Some(calls) = message["toolCall"]["functionCalls"].as_array() else {
            continue;
        };
        let responses: Vec<Value> = calls
            .iter()
            .map(|c| json!({"id": c["id"], "name": c["name"], "response": {"output": "now"}}))
            .collect();
        let answer = json!({"toolResponse": {"functionResponses": responses}});
        socket.send(Message::text(answer.to_string())).await?;
    }
}

async fn floor(tls: Option<&Tls>, warm_up: usize, timed: usize) -> anyhow::Result<Figures> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("{}://{}", Tls::scheme(tls), listener.local_addr()?);
    let config = tls.map(|tls| tls.client.clone());
    let client = std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(anyhow::Error::from)
            .and_then(|runtime| runtime.block_on(echo_client(url, config)))
    });
    let figures = serve(listener, tls, warm_up, timed, None).await?;
    match client.join() {
        Ok(result) => result?,
        Err(_) => bail!("the echo client panicked"),
    }
    Ok(figures)
}

/// Keeps the last lines a child wrote, to show if the run breaks; the receiver hears when the
/// child has closed the stream (it has exited, in practice).
fn drain(from: impl Read + Send + 'static) -> (Arc<Mutex<Vec<String>>>, mpsc::Receiver<()>) {
    let tail = Arc::new(Mutex::new(Vec::new()));
    let keep = Arc::clone(&tail);
    let (closed, closed_rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines().map_while(Result::ok) {
            let mut tail = keep.lock().unwrap_or_else(|e| e.into_inner());
            if tail.len() == 20 {
                tail.remove(0);
            }
            tail.push(line);
        }
        let _ = closed.send(());
    });
    (tail, closed_rx)
}

/// Kills `child` when dropped: a run that breaks leaves no client behind.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Times a client program against the fake server: livetalk (`binary`, this build's when
/// `None`), or the SDK's loop run by `python`.
async fn client(
    who: &Client,
    tls: Option<&Tls>,
    warm_up: usize,
    timed: usize,
) -> anyhow::Result<Figures> {
    let scratch = tempfile::tempdir()?;
    // An empty config: every setting at its default.
    std::fs::write(scratch.path().join("config.toml"), "")?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    let mut command = match who {
        Client::Livetalk { binary, .. } => {
            let mut command = match binary {
                Some(path) => {
                    let mut command = std::process::Command::new(path);
                    common::isolate(&mut command, scratch.path());
                    command
                }
                None => common::livetalk(scratch.path()),
            };
            let endpoint = format!("{}://{address}", Tls::scheme(tls));
            command.args(["--headless", "--no-audio", "--endpoint", &endpoint]);
            command
        }
        Client::Sdk { python } => {
            let mut command = std::process::Command::new(python);
            command
                .arg(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/benches/sdk_tool_loop.py"
                ))
                .arg(format!("https://{address}"));
            command
        }
    };
    if let Some(tls) = tls {
        command.env("SSL_CERT_FILE", &tls.ca);
    }
    let mut child = Reaped(
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("start {}", who.label()))?,
    );
    // Held open and silent: the session runs on the server's calls alone.
    let stdin = child.0.stdin.take();
    let (stdout, exited) = drain(child.0.stdout.take().context("stdout")?);
    let (stderr, _) = drain(child.0.stderr.take().context("stderr")?);

    let served = serve(listener, tls, warm_up, timed, Some(child.0.id())).await;
    // End of input and a closed session: livetalk exits by itself; anything else is stopped.
    drop(stdin);
    let _ = exited.recv_timeout(Duration::from_secs(5));
    drop(child);
    served.map_err(|e| {
        let lines = |tail: &Arc<Mutex<Vec<String>>>| {
            tail.lock().unwrap_or_else(|e| e.into_inner()).join("\n")
        };
        e.context(format!(
            "{}'s stdout:\n{}\nstderr:\n{}",
            who.label(),
            lines(&stdout),
            lines(&stderr)
        ))
    })
}

/// A client program the bench times.
enum Client {
    /// A livetalk binary (this build's when `None`), and what the report calls it.
    Livetalk {
        label: &'static str,
        binary: Option<String>,
    },
    /// The official Python SDK's loop, run by this Python.
    Sdk { python: String },
}

impl Client {
    fn label(&self) -> String {
        match self {
            Client::Livetalk { label, .. } => format!("livetalk --headless --no-audio ({label})"),
            Client::Sdk { .. } => "the Python SDK's loop (google-genai)".to_owned(),
        }
    }
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // Test runners list a target's tests first (`cargo nextest run --all-targets` in CI): this
    // target is one test, not an ignored one.
    if args.iter().any(|a| a == "--list") {
        if !args.iter().any(|a| a == "--ignored") {
            println!("tool_roundtrip: test");
        }
        return Ok(());
    }
    // Run as a test (no `--bench`), a few calls prove the harness works.
    let benching = args.iter().any(|a| a == "--bench");
    // `--against PATH`: another build of livetalk, timed in turn with this one, `--rounds N`
    // times each (a change's cost measured side by side, on the same machine at the same time).
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
    };
    let against = value("--against").cloned();
    let sdk = value("--sdk").cloned();
    let mut clients = vec![Client::Livetalk {
        label: "this build",
        binary: value("--livetalk").cloned(),
    }];
    if let Some(binary) = against {
        clients.push(Client::Livetalk {
            label: "--against",
            binary: Some(binary),
        });
    }
    if let Some(python) = sdk {
        clients.push(Client::Sdk { python });
    }
    let rounds: usize = match value("--rounds") {
        Some(n) => n.parse().context("--rounds takes a number")?,
        None => 1,
    };
    let (warm_up, timed) = if benching {
        (WARM_UP_CALLS, TIMED_CALLS)
    } else {
        (5, 20)
    };
    // The SDK dials wss only: with it, every client goes over TLS alike.
    let wss = args.iter().any(|a| a == "--wss")
        || clients.iter().any(|c| matches!(c, Client::Sdk { .. }));
    let tls = if wss { Some(Tls::new()?) } else { None };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let tls = tls.as_ref();
        println!(
            "tool round trip on loopback over {}, {warm_up} warm-up calls, then one call at a time:",
            Tls::scheme(tls)
        );
        floor(tls, warm_up, timed)
            .await?
            .report("floor (a client that answers at once)");
        // Per client, each round's p50, p99 and CPU a call.
        let mut seen = vec![(Vec::new(), Vec::new(), Vec::new()); clients.len()];
        for _ in 0..rounds.max(1) {
            for (who, (p50s, p99s, cpus)) in clients.iter().zip(&mut seen) {
                let mut figures = client(who, tls, warm_up, timed).await?;
                figures.report(&who.label());
                p50s.push(figures.p50());
                p99s.push(figures.p99());
                cpus.extend(figures.cpu_per_call);
            }
        }
        if clients.len() > 1 || rounds > 1 {
            let median = |v: &[Duration]| {
                let mut v = v.to_vec();
                v.sort();
                v[v.len() / 2]
            };
            let medians: Vec<[Duration; 3]> = seen
                .iter()
                .map(|(p50s, p99s, cpus)| [median(p50s), median(p99s), median(cpus)])
                .collect();
            println!("  medians of {rounds} rounds:");
            for (index, (who, [p50, p99, cpu])) in clients.iter().zip(&medians).enumerate() {
                print!(
                    "    {}: p50 {:.3} ms, p99 {:.3} ms, CPU {:.1} µs a call",
                    who.label(),
                    ms(*p50),
                    ms(*p99),
                    cpu.as_secs_f64() * 1e6
                );
                // Each other client beside this build: above 1, this build does it in less.
                if index > 0 {
                    let ratio = |i: usize| {
                        medians[index][i].as_secs_f64() / medians[0][i].as_secs_f64()
                    };
                    print!(
                        "; ÷ this build: p50 {:.2}×, p99 {:.2}×, CPU {:.2}×",
                        ratio(0),
                        ratio(1),
                        ratio(2)
                    );
                }
                println!();
            }
        }
        Ok(())
    })
}
