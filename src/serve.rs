//! The two server commands, `livetalk mock` and `livetalk serve`: start the server from the
//! flags, say where it listens (the first line on stdout), and serve until Ctrl-C or SIGTERM
//! (the bridge drains first: a second signal stops it at once).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use livetalk_mock::ws_server::ConnectionLimits;
// The mock's fault scenario (`--scenario`); a scenario in this app is `check`'s.
use livetalk_mock::Scenario as FaultScenario;
use livetalk_mock::{Difference, MockOptions, MockServer, RecordedOptions, TlsFiles};
use tracing::{info, warn};

use crate::bridge::{BridgeOptions, BridgeServer, RecordOptions, Upstream};
use crate::cli::{MockArgs, ServeArgs};
use crate::config::{FlagOverrides, Route, Settings};
use crate::{output, record};

/// `livetalk mock`: serve until Ctrl-C or SIGTERM. The first stdout line is the URL.
pub async fn mock(args: MockArgs) -> anyhow::Result<()> {
    let tls = match (args.tls_cert, args.tls_key) {
        (Some(cert), Some(key)) => Some(TlsFiles { cert, key }),
        _ => None,
    };
    let scenario = match &args.scenario {
        Some(path) => FaultScenario::load(path)?,
        None => FaultScenario::default(),
    };
    let faults = scenario.faults.len();
    let recorded = match &args.replay {
        Some(dir) => Some(recorded_options(dir, args.strict)?),
        None => None,
    };
    let speed = args
        .speed
        .unwrap_or(if recorded.is_some() { 1.0 } else { DEMO_SPEED });
    let options = MockOptions {
        listen: args.listen,
        tls,
        speed,
        scenario,
        save_input: args.save_input,
        limits: ConnectionLimits {
            max_connections: args.max_connections as usize,
            ..ConnectionLimits::default()
        },
    };
    let server = match recorded {
        Some(recorded) => MockServer::start_recorded(options, recorded).await?,
        None => MockServer::start(options).await?,
    };
    if faults > 0 {
        info!(faults, "fault scenario loaded");
    }
    // Said before the address, so whoever waits for the address has seen it.
    if !server.local_addr().ip().is_loopback() {
        output::err(&open_bind_warning(server.local_addr()));
    }
    output::out(&format!(
        "livetalk mock listening on {} (paths for API versions v1, v1beta, v1alpha)",
        server.base_url()
    ))?;
    use std::io::Write as _;
    std::io::stdout().flush()?;
    wait_for_signal().await;
    info!("mock Live server stopping");
    Ok(())
}

/// How fast the demo model streams its speech when `--speed` is not given.
const DEMO_SPEED: f64 = 4.0;

/// `--replay`: the recording's service side, read once and shared by every connection; each
/// difference an app makes is one line on stdout.
fn recorded_options(dir: &Path, strict: bool) -> anyhow::Result<RecordedOptions> {
    let recording = record::Recording::load(dir)?;
    let (session, warnings) = record::service_side::service_side(&recording)?;
    for warning in warnings {
        output::err(&format!("livetalk: warning: {warning}"));
    }
    let turns: usize = session.connections.iter().map(|c| c.turns.len()).sum();
    output::err(&format!(
        "livetalk: replaying {} ({} connection{}, {turns} turn{} of the app){}",
        dir.display(),
        session.connections.len(),
        if session.connections.len() == 1 {
            ""
        } else {
            "s"
        },
        if turns == 1 { "" } else { "s" },
        if strict { "; strict" } else { "" }
    ));
    Ok(RecordedOptions {
        session: Arc::new(session),
        strict,
        on_difference: difference_printer(),
    })
}

/// Difference lines waiting for stdout, at most; past it they are counted, not held.
const DIFFERENCES_QUEUED: usize = 1024;

/// Prints each difference as one stdout line, on a thread of its own: a connection never
/// waits on stdout (nobody reading it cannot stall the server), and what did not fit while
/// it was not read is counted and said once it is.
fn difference_printer() -> livetalk_mock::recorded::DifferenceSink {
    use std::sync::atomic::{AtomicU64, Ordering};
    let (lines, queued) = std::sync::mpsc::sync_channel::<String>(DIFFERENCES_QUEUED);
    let missed = Arc::new(AtomicU64::new(0));
    let counted = missed.clone();
    let printer = std::thread::Builder::new()
        .name("differences".into())
        .spawn(move || {
            for line in queued {
                let unsaid = counted.swap(0, Ordering::Relaxed);
                if unsaid > 0 {
                    let _ = output::out(&format!(
                        "difference: {unsaid} more differences were not printed (stdout was not read)"
                    ));
                }
                if output::out(&line).is_err() {
                    break;
                }
            }
        });
    if let Err(e) = printer {
        warn!("differences will not be printed: cannot start a thread ({e})");
    }
    Arc::new(move |difference: &Difference| {
        let line = format!(
            "difference: connection {}, {difference}",
            difference.connection
        );
        if lines.try_send(line).is_err() {
            missed.fetch_add(1, Ordering::Relaxed);
        }
    })
}

/// What the mock says when it listens beyond loopback: it holds no secret, but whoever can
/// reach the address can use it, which should never be a surprise.
fn open_bind_warning(addr: SocketAddr) -> String {
    format!(
        "livetalk: warning: the mock listens on {addr}, reachable from the network, not just this machine (the default is 127.0.0.1)."
    )
}

async fn wait_for_signal() {
    Signals::new().next().await;
}

/// Ctrl-C and SIGTERM, as one stream: each signal is one `next`.
struct Signals {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    fn new() -> Signals {
        Signals {
            #[cfg(unix)]
            term: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok(),
        }
    }

    async fn next(&mut self) {
        #[cfg(unix)]
        if let Some(term) = &mut self.term {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// `livetalk serve`: resolve the upstream from the normal config (key from config or env),
/// serve until Ctrl-C or SIGTERM. The first stdout line names the URL.
pub async fn bridge(
    args: ServeArgs,
    config: Option<std::path::PathBuf>,
) -> anyhow::Result<Stopped> {
    let settings = Settings::load_for_session(&FlagOverrides {
        config,
        endpoint: args.endpoint.clone(),
        api_version: args.api_version.map(Into::into),
        offline: args.offline,
        ..FlagOverrides::default()
    })?;
    if settings.vertex.is_some() {
        anyhow::bail!(
            "livetalk serve does not reach Vertex AI yet; turn `vertex` off in the config for the bridge"
        );
    }
    let token = args
        .token
        .clone()
        .or_else(|| std::env::var("LIVETALK_BRIDGE_TOKEN").ok());
    if let Some(token) = &token {
        livetalk_live::redact::remember(token);
    }
    let limits = ConnectionLimits {
        max_connections: args.max_connections as usize,
        ..ConnectionLimits::default()
    };

    let (endpoint, api_key, _mock, upstream_label, offline) = match &settings.target {
        Route::Google(endpoint) | Route::Custom(endpoint) => (
            endpoint.clone(),
            settings.api_key.clone(),
            None,
            endpoint.host().to_owned(),
            false,
        ),
        // The mock needs no key; don't hand it the real one.
        _ => {
            let mock = MockServer::start(MockOptions {
                speed: args.speed,
                // One upstream per client, and room for the old one still closing while a
                // reconnect (UPDATE_CONFIG) opens the next.
                limits: ConnectionLimits {
                    max_connections: limits.max_connections.saturating_mul(2),
                    ..ConnectionLimits::default()
                },
                ..MockOptions::loopback()
            })
            .await
            .context("starting the embedded offline demo model")?;
            (
                mock.endpoint(settings.api_version),
                None,
                Some(mock),
                "the offline demo model".to_owned(),
                true,
            )
        }
    };
    let server = BridgeServer::start(BridgeOptions {
        listen: args.listen,
        upstream: Upstream {
            endpoint,
            api_key,
            connect_timeout: settings.connect_timeout,
            offline,
        },
        token,
        max_message_bytes: args.max_message_bytes,
        limits,
        webrtc: crate::bridge::WebRtcOptions {
            announce_ip: args.webrtc_ip,
            port: args.webrtc_port,
            ..Default::default()
        },
        drain_timeout: Duration::from_secs(args.drain_timeout),
        record: args.record.map(|dir| RecordOptions {
            dir,
            keep: args.record_keep.map(|n| n as usize),
        }),
    })
    .await?;
    output::out(&format!(
        "livetalk bridge listening on {} (upstream: {upstream_label})",
        server.url()
    ))?;
    use std::io::Write as _;
    std::io::stdout().flush()?;
    // The first signal (or POST /drain) drains: no new apps, each session finishes its turn,
    // gets its handle and is closed; the process ends when the last has gone. A second
    // signal ends it at once.
    let mut signals = Signals::new();
    tokio::select! {
        _ = signals.next() => {
            server.drain();
        }
        _ = server.emptied() => {}
    }
    // Said in the log, which never blocks: a stderr nobody reads must not hold up a drain.
    info!(
        connections = server.connections(),
        "draining; a second Ctrl-C or SIGTERM stops at once"
    );
    tokio::select! {
        _ = server.emptied() => {
            info!("drained: every app connection has gone; stopping");
            Ok(Stopped::Drained)
        }
        _ = signals.next() => {
            warn!(
                connections = server.connections(),
                "stopped by a second signal with app connections still open"
            );
            Ok(Stopped::Forced)
        }
    }
}

/// How `livetalk serve` ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// Every app connection had gone (exit status 0).
    Drained,
    /// A second signal ended the drain (exit status 1; the log says so).
    Forced,
}
