//! `livetalk proxy` from its flags: the upstream (Google's Live API, `--endpoint`, or the
//! embedded demo model with `--offline`), the certificate (given, or the self-signed one for the
//! listen address), the limits; then the presenter until Ctrl-C or SIGTERM: the terminal UI, or
//! `--headless` lines, or `--json` objects.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use livetalk_live::{ApiVersion, Endpoint};
use livetalk_mock::ws_server::ConnectionLimits;
use livetalk_mock::{MockOptions, MockServer};
use tokio::sync::mpsc;

use super::{
    CertFiles, DEFAULT_WRITE_STALL, ProxyEvent, ProxyOptions, ProxyServer, WatchOptions, upstream,
};
use crate::cli::ProxyArgs;
use crate::config::{FlagOverrides, Route, Settings};
use crate::output;

/// How the proxy shows what it sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presentation {
    Screen,
    Lines,
    Json,
}

/// Runs the proxy until a signal; the exit code.
pub async fn run(
    args: ProxyArgs,
    config: Option<PathBuf>,
    presentation: Presentation,
) -> anyhow::Result<u8> {
    let settings = Settings::load_for_session(&FlagOverrides {
        config,
        endpoint: args.endpoint.clone(),
        offline: args.offline,
        ..FlagOverrides::default()
    })?;
    // Apps bring their own keys: the proxy goes to Google's Live API even when it has no key
    // of its own, unless told otherwise.
    let (base, upstream_label, mock) = if args.offline {
        let mock = MockServer::start(MockOptions {
            limits: ConnectionLimits {
                max_connections: (args.max_connections as usize).saturating_mul(2),
                ..ConnectionLimits::default()
            },
            ..MockOptions::loopback()
        })
        .await
        .context("starting the embedded offline demo model")?;
        (
            mock.base_url(),
            "the offline demo model".to_owned(),
            Some(mock),
        )
    } else {
        let endpoint = match &settings.target {
            Route::Custom(endpoint) | Route::Google(endpoint) => endpoint.clone(),
            _ => Endpoint::google_ai(ApiVersion::V1beta),
        };
        let base = upstream::base_of(endpoint.url());
        (base, endpoint.host().to_owned(), None)
    };
    let token = args
        .token
        .clone()
        .or_else(|| std::env::var("LIVETALK_PROXY_TOKEN").ok());
    let (tls, made) = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => (
            CertFiles {
                cert: cert.clone(),
                key: key.clone(),
            },
            None,
        ),
        _ => {
            let (files, made) = super::self_signed(&crate::paths::data_dir(), args.listen.ip())?;
            (files, Some(made))
        }
    };
    let tool_timeout = args
        .tool_timeout
        .map(Duration::from_secs_f64)
        .unwrap_or(settings.tool_limits.timeout);
    let options = ProxyOptions {
        listen: args.listen,
        tls: tls.clone(),
        upstream: base,
        api_key: if mock.is_some() {
            None
        } else {
            settings.api_key.as_ref().map(|k| k.expose().to_owned())
        },
        offline: mock.is_some(),
        connect_timeout: settings.connect_timeout,
        token,
        max_connections: args.max_connections as usize,
        record: args.record.clone(),
        watch: WatchOptions {
            tool_timeout,
            stall: Duration::from_secs_f64(args.stall_secs),
        },
        write_stall: DEFAULT_WRITE_STALL,
    };
    let (server, events) = ProxyServer::start(options).await?;
    let addr = server.local_addr();
    let certificate_line = match made {
        Some(true) => format!(
            "livetalk proxy: made a self-signed certificate for {}: {} (apps trust it: docs/proxy.md)",
            args.listen.ip(),
            tls.cert.display()
        ),
        Some(false) => format!(
            "livetalk proxy: self-signed certificate for {}: {} (apps trust it: docs/proxy.md)",
            args.listen.ip(),
            tls.cert.display()
        ),
        None => format!("livetalk proxy: certificate {}", tls.cert.display()),
    };
    let listening = format!(
        "livetalk proxy listening on {addr} (ws:// and wss://; upstream: {upstream_label})"
    );
    match presentation {
        Presentation::Json => {
            output::out_json(
                &serde_json::json!({
                    "event": "listening",
                    "address": addr.to_string(),
                    "ws": format!("ws://{addr}"),
                    "wss": format!("wss://{addr}"),
                    "upstream": upstream_label,
                    "certificate": tls.cert.display().to_string(),
                    "certificate_made": made == Some(true),
                })
                .to_string(),
            )?;
        }
        Presentation::Lines => {
            output::out(&listening)?;
            output::out(&certificate_line)?;
        }
        Presentation::Screen => {}
    }
    let code = match presentation {
        Presentation::Screen => {
            super::screen::run(events, vec![listening, certificate_line]).await?
        }
        _ => print_events(events, presentation).await,
    };
    drop(server);
    drop(mock);
    Ok(code)
}

/// Prints every event until a signal (or a closed stdout).
async fn print_events(mut events: mpsc::Receiver<ProxyEvent>, presentation: Presentation) -> u8 {
    let signal = super::stop_signal();
    tokio::pin!(signal);
    loop {
        tokio::select! {
            event = events.recv() => {
                let Some(event) = event else { return 0 };
                let printed = match presentation {
                    Presentation::Json => output::out_json(&event.json().to_string()),
                    _ => match event.line() {
                        Some(line) => output::out(&line),
                        None => Ok(()),
                    },
                };
                if printed.is_err() {
                    return 0;
                }
            }
            _ = &mut signal => return 0,
        }
    }
}
