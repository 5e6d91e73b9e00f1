//! `livetalk doctor`: what livetalk sees on this machine — config, key, route, network, a real
//! connection, audio, the demo model's voice, terminal, MCP servers, the data folder — one
//! line each with what to do about a problem, or one JSON object for a bug report.
//!
//! It reuses what a session uses (settings, the connect path and its deadline, the MCP hub,
//! the device listing), so what it says is what a session would meet. Every line leaves
//! through `output`, which scrubs secrets; the key itself is never read into a line.

use std::io::IsTerminal as _;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::audio::device::{self, Direction};
use crate::cli::DoctorArgs;
use crate::config::{FlagOverrides, Route, RouteKind, Settings};
use crate::engine::launch::{TRUST_FIX, auth, build_setup, resolve_endpoint, trust_problems};
use crate::tools::mcp::{McpEvent, McpHub};
use crate::tools::{SmartHome, builtin_registry};
use livetalk_live::{ConnectOptions, Outbox as _};

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    /// Worth knowing, but a session still runs (text only, say).
    Warn,
    /// A session would not start, or not get far.
    Fail,
}

impl Status {
    fn symbol(self) -> &'static str {
        match self {
            Status::Ok => "✔",
            Status::Warn => "⚠",
            Status::Fail => "✖",
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// What was checked, in a word or two.
    pub check: String,
    pub status: Status,
    /// What livetalk found.
    pub found: String,
    /// What to do about it (for a warning or a failure).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Check {
    fn ok(check: &str, found: impl Into<String>) -> Check {
        Check {
            check: check.to_owned(),
            status: Status::Ok,
            found: found.into(),
            fix: None,
        }
    }

    fn warn(check: &str, found: impl Into<String>, fix: impl Into<String>) -> Check {
        Check {
            check: check.to_owned(),
            status: Status::Warn,
            found: found.into(),
            fix: Some(fix.into()),
        }
    }

    fn fail(check: &str, found: impl Into<String>, fix: impl Into<String>) -> Check {
        Check {
            check: check.to_owned(),
            status: Status::Fail,
            found: found.into(),
            fix: Some(fix.into()),
        }
    }

    /// `✔ config: …` and, for a problem, ` → what to do`.
    pub fn line(&self) -> String {
        let mut line = format!("{} {}: {}", self.status.symbol(), self.check, self.found);
        if let Some(fix) = &self.fix {
            line.push_str(" → ");
            line.push_str(fix);
        }
        line
    }
}

/// Every check, in the order a session meets them.
pub async fn checks(args: &DoctorArgs, mut flags: FlagOverrides) -> Vec<Check> {
    if args.offline {
        flags.offline = true;
        flags.endpoint = None;
        flags.bridge = None;
        flags.vertex = false;
    }
    let mut checks = Vec::new();
    let settings = match Settings::load(&flags) {
        Ok(settings) => {
            checks.push(config_check(&settings));
            Some(settings)
        }
        Err(error) => {
            checks.push(Check::fail(
                "config",
                error.to_string(),
                "fix that key (config.example.toml documents every key), or start from an empty file",
            ));
            None
        }
    };
    if let Some(settings) = &settings {
        checks.push(key_check(settings));
        checks.extend(route_check(settings));
        checks.extend(network_checks(settings));
        checks.push(connection_check(settings).await);
        checks.extend(audio_checks(settings));
    }
    checks.push(voice_check());
    checks.extend(terminal_checks());
    if let Some(settings) = &settings {
        checks.extend(mcp_checks(settings).await);
        checks.push(data_check(settings));
    }
    checks
}

/// The report as lines; the exit code is 1 when a check failed.
pub fn report(checks: &[Check]) -> String {
    let mut text = String::new();
    for check in checks {
        text.push_str(&check.line());
        text.push('\n');
    }
    let failed = checks.iter().filter(|c| c.status == Status::Fail).count();
    let warned = checks.iter().filter(|c| c.status == Status::Warn).count();
    text.push_str(&match (failed, warned) {
        (0, 0) => "Nothing stands in the way of a session.\n".to_owned(),
        (0, w) => format!("A session can start; {w} warning(s) above say what will not work.\n"),
        (f, _) => format!("{f} problem(s) above would stop a session.\n"),
    });
    text
}

/// The report as one JSON object: `{"ok": …, "checks": [{check, status, found, fix}]}`.
pub fn json(checks: &[Check]) -> String {
    let ok = !blocked(checks);
    serde_json::json!({
        "livetalk": env!("CARGO_PKG_VERSION"),
        "ok": ok,
        "checks": checks,
    })
    .to_string()
}

/// True when a check failed: a session would not start or get far.
pub fn blocked(checks: &[Check]) -> bool {
    checks.iter().any(|c| c.status == Status::Fail)
}

fn config_check(settings: &Settings) -> Check {
    match &settings.config_file {
        Some(file) => Check::ok("config", format!("{} parses", file.display())),
        None => Check::ok(
            "config",
            match crate::paths::default_config_path() {
                Some(path) => format!(
                    "no config file ({} does not exist): the built-in defaults",
                    path.display()
                ),
                None => "no config file: the built-in defaults".to_owned(),
            },
        ),
    }
}

/// Where the key comes from, the way the settings read it; never its value.
fn key_check(settings: &Settings) -> Check {
    let set = |name: &str| std::env::var(name).is_ok_and(|v| !v.trim().is_empty());
    let from = if set("GEMINI_API_KEY") {
        "GEMINI_API_KEY"
    } else if set("GOOGLE_API_KEY") {
        "GOOGLE_API_KEY"
    } else {
        "api_key in the config file"
    };
    if let Err(error) = settings.key_usable() {
        return Check::fail(
            "API key",
            error.to_string(),
            "export GEMINI_API_KEY=… (from https://aistudio.google.com/apikey), or unset it",
        );
    }
    match (&settings.api_key, &settings.vertex, &settings.target) {
        (_, Some(_), _) => Check::ok(
            "API key",
            "not used: Vertex AI signs in with Application Default Credentials",
        ),
        (Some(_), None, _) => Check::ok("API key", format!("set, from {from} (not shown)")),
        (None, None, Route::Google(_)) => Check::fail(
            "API key",
            "none, and the route is Google's service",
            "export GEMINI_API_KEY=… (from https://aistudio.google.com/apikey)",
        ),
        (None, None, _) => Check::ok(
            "API key",
            "none set (not needed for this route; set GEMINI_API_KEY to talk to Gemini)",
        ),
    }
}

fn route_check(settings: &Settings) -> Vec<Check> {
    let model = &settings.model;
    let (kind, route) = settings.route_name();
    let check = match (kind, &settings.vertex) {
        (RouteKind::Demo, _) => Check::ok("route", format!("{route} (no network, no key)")),
        (RouteKind::Bridge, _) => Check::ok("route", route),
        (RouteKind::Vertex, Some(vertex)) => {
            match livetalk_live::adc::Credentials::find(&|name| std::env::var(name).ok()) {
                Ok(credentials) => Check::ok(
                    "route",
                    format!(
                        "{route}, model {model}, with the {}",
                        credentials.describe()
                    ),
                ),
                Err(error) => Check::fail(
                    "route",
                    format!(
                        "Vertex AI, project {}, location {}: {error}",
                        vertex.project, vertex.location
                    ),
                    "run `gcloud auth application-default login`, or point GOOGLE_APPLICATION_CREDENTIALS at a service-account key file",
                ),
            }
        }
        _ => Check::ok("route", format!("{route}, model {model}")),
    };
    vec![check]
}

fn network_checks(settings: &Settings) -> Vec<Check> {
    let report = match livetalk_live::network::report() {
        Ok(report) => report,
        Err(error) => {
            return vec![Check::fail(
                "proxy",
                error,
                "fix the proxy variable: http://[user:password@]host[:port]",
            )];
        }
    };
    let direct_anyway = settings.is_offline();
    let proxy = match &report.proxy {
        Some(proxy) if direct_anyway => Check::ok(
            "proxy",
            format!("{proxy}; not used for the offline demo model (loopback goes direct)"),
        ),
        Some(proxy) => Check::ok(
            "proxy",
            format!("{proxy}, except the hosts in NO_PROXY and loopback"),
        ),
        None => Check::ok(
            "proxy",
            "none (HTTPS_PROXY and ALL_PROXY are not set): direct connections",
        ),
    };
    let trust = if report.trust_problems.is_empty() {
        Check::ok(
            "certificates",
            format!("trusting the bundled web roots and {}", report.trust),
        )
    } else {
        Check::warn("certificates", trust_problems(&report), TRUST_FIX)
    };
    vec![proxy, trust]
}

/// A real connection along the session's route, under the session's own connect deadline:
/// `setup` sent, its answer awaited, then closed.
async fn connection_check(settings: &Settings) -> Check {
    if let Route::Bridge(_) = settings.target {
        return Check::warn(
            "connection",
            "not tried: a bridge holds the Live session itself",
            "run `livetalk doctor` on the bridge's machine",
        );
    }
    let (auth, _) = match auth(settings) {
        Ok(auth) => auth,
        Err(error) => {
            return Check::fail(
                "connection",
                format!("not tried: {error:#}"),
                "fix the route above first",
            );
        }
    };
    if matches!(settings.target, Route::Google(_))
        && settings.api_key.is_none()
        && settings.vertex.is_none()
    {
        return Check::fail(
            "connection",
            "not tried: no API key",
            "set GEMINI_API_KEY, or try `livetalk doctor --offline`",
        );
    }
    let (endpoint, mock) = match resolve_endpoint(settings).await {
        Ok(found) => found,
        Err(error) => {
            return Check::fail(
                "connection",
                format!("{error:#}"),
                "see docs/troubleshooting.md",
            );
        }
    };
    let mut registry = match builtin_registry(
        &settings.tools_enabled,
        settings.tool_limits,
        SmartHome::new(),
    ) {
        Ok(registry) => registry,
        Err(error) => {
            return Check::fail(
                "connection",
                format!("not tried: the built-in tools: {error:#}"),
                "fix [tools] in the config",
            );
        }
    };
    registry.declare_google_search(settings.google_search);
    let setup = build_setup(settings, &registry);
    let host = endpoint.host().to_owned();
    let started = Instant::now();
    let result = livetalk_live::connect(ConnectOptions {
        endpoint,
        auth,
        setup,
        connect_timeout: settings.connect_timeout,
    })
    .await;
    let took = started.elapsed();
    let check = match result {
        Ok(connection) => {
            connection.handle.close().await;
            let by = if mock.is_some() {
                "the embedded offline demo model".to_owned()
            } else {
                host
            };
            Check::ok(
                "connection",
                format!("setup answered by {by} in {}", milliseconds(took)),
            )
        }
        Err(error) => Check::fail(
            "connection",
            format!("{error} (after {})", milliseconds(took)),
            connection_fix(settings),
        ),
    };
    drop(mock);
    check
}

fn connection_fix(settings: &Settings) -> String {
    format!(
        "check the endpoint, the proxy and the certificates above (docs/networks.md); the deadline is [session] connect_timeout_secs ({} s); `livetalk doctor --offline` tries the demo model",
        settings.connect_timeout.as_secs_f32()
    )
}

fn milliseconds(took: Duration) -> String {
    if took < Duration::from_secs(1) {
        format!("{} ms", took.as_millis())
    } else {
        format!("{:.1} s", took.as_secs_f32())
    }
}

const AUDIO_FIX: &str = "run with --no-audio for text only, pick a device from `livetalk devices` with --input-device/--output-device, or press F6 in the app once one is plugged in; docs/audio.md makes a virtual mic and speaker";

fn audio_checks(settings: &Settings) -> Vec<Check> {
    let audio = &settings.audio;
    if audio.is_off() {
        return vec![Check::ok(
            "audio",
            "off (--no-audio or audio.enabled = false): text only",
        )];
    }
    if !audio.devices {
        return vec![Check::ok(
            "audio",
            "WAV files only, no devices (--input-wav/--output-wav)",
        )];
    }
    let host = audio.host;
    // Probing devices makes C libraries talk on stderr; that goes to the log.
    let listed = crate::output::catching_stderr("audio devices", || device::list(host));
    let list = match listed {
        Ok(list) => list,
        Err(error) => {
            return vec![Check::warn(
                "audio",
                format!("{host}: {error}; a session runs in text only"),
                AUDIO_FIX,
            )];
        }
    };
    let mut checks = Vec::new();
    for (direction, what, wanted, default) in [
        (
            Direction::Input,
            "microphone",
            audio.input_device.as_deref(),
            &list.default_input,
        ),
        (
            Direction::Output,
            "speaker",
            audio.output_device.as_deref(),
            &list.default_output,
        ),
    ] {
        let name = wanted.map(str::to_owned).or_else(|| default.clone());
        let found = name.as_ref().and_then(|name| {
            list.listings
                .iter()
                .find(|l| l.direction == direction && &l.name == name)
        });
        let label = format!("audio {what}");
        checks.push(match (name, found) {
            (_, Some(l)) => Check::ok(
                &label,
                format!(
                    "{} on {host} opens ({} Hz, {} channel(s), {})",
                    l.name, l.rate, l.channels, l.format
                ),
            ),
            (Some(name), None) => Check::warn(
                &label,
                format!("{name} on {host} cannot be opened; a session runs without it"),
                AUDIO_FIX,
            ),
            (None, None) => Check::warn(
                &label,
                format!("{host} has no default {what}; a session runs without it"),
                AUDIO_FIX,
            ),
        });
    }
    checks
}

fn voice_check() -> Check {
    if livetalk_mock::voice::espeak_available() {
        Check::ok(
            "demo voice",
            "espeak-ng speaks the offline demo model's replies",
        )
    } else {
        Check::warn(
            "demo voice",
            "espeak-ng is not installed: the offline demo model hums instead of speaking",
            "install espeak-ng (sudo apt-get install espeak-ng)",
        )
    }
}

fn terminal_checks() -> Vec<Check> {
    let locale = ["LC_ALL", "LC_CTYPE", "LANG"].iter().find_map(|var| {
        std::env::var(var)
            .ok()
            .filter(|v| !v.is_empty())
            .map(|v| (*var, v))
    });
    let utf8 = |v: &str| {
        let v = v.to_ascii_lowercase();
        v.contains("utf-8") || v.contains("utf8")
    };
    let locale_check = match locale {
        Some((var, value)) if utf8(&value) => Check::ok("locale", format!("{var}={value}")),
        Some((var, value)) => Check::warn(
            "locale",
            format!("{var}={value} is not UTF-8: the screen's symbols may show as garbage"),
            "export LANG=C.UTF-8 (or another UTF-8 locale)",
        ),
        None => Check::warn(
            "locale",
            "LANG, LC_CTYPE and LC_ALL are not set: the screen's symbols may show as garbage",
            "export LANG=C.UTF-8 (or another UTF-8 locale)",
        ),
    };
    let terminal = if std::io::stdout().is_terminal() && std::io::stdin().is_terminal() {
        match crossterm::terminal::size() {
            Ok((columns, rows)) if columns >= 80 && rows >= 24 => {
                Check::ok("terminal", format!("{columns}×{rows}"))
            }
            Ok((columns, rows)) => Check::warn(
                "terminal",
                format!("{columns}×{rows}: smaller than 80×24, panes are hidden or cut"),
                "make the window larger",
            ),
            Err(error) => Check::warn(
                "terminal",
                format!("its size cannot be read: {error}"),
                "use --headless, or a real terminal",
            ),
        }
    } else {
        Check::ok(
            "terminal",
            "not a terminal here (a pipe or a file): livetalk runs as a line console; --headless for scripts",
        )
    };
    vec![locale_check, terminal]
}

async fn mcp_checks(settings: &Settings) -> Vec<Check> {
    let specs: Vec<_> = settings
        .mcp_servers
        .iter()
        .filter(|spec| spec.enabled)
        .cloned()
        .collect();
    if specs.is_empty() {
        return vec![Check::ok("MCP servers", "none configured")];
    }
    let names: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
    let (hub, mut events) = McpHub::start(specs).await;
    let mut up = std::collections::HashMap::new();
    let mut down = std::collections::HashMap::new();
    let mut trimmed = std::collections::HashMap::new();
    while let Ok(event) = events.try_recv() {
        match event {
            McpEvent::Up { server, tools } | McpEvent::ToolsChanged { server, tools } => {
                up.insert(server, tools);
            }
            McpEvent::Down { server, message } => {
                down.insert(server, message);
            }
            McpEvent::Trimmed { server, message } => {
                trimmed.insert(server, message);
            }
        }
    }
    drop(hub);
    names
        .into_iter()
        .map(|name| {
            let label = format!("MCP server {name}");
            if let Some(message) = down.get(&name) {
                Check::fail(
                    &label,
                    message.clone(),
                    format!(
                        "fix [mcp_servers.{name}] in the config (command, args, url), or set enabled = false; its stderr is in the log"
                    ),
                )
            } else if let Some(tools) = up.get(&name) {
                match trimmed.get(&name) {
                    Some(message) => Check::warn(
                        &label,
                        format!("started and listed {tools} tool(s); {message}"),
                        "choose tools with enabled_tools",
                    ),
                    None => Check::ok(&label, format!("started and listed {tools} tool(s)")),
                }
            } else {
                Check::fail(
                    &label,
                    "did not say whether it started",
                    "see the log file",
                )
            }
        })
        .collect()
}

fn data_check(settings: &Settings) -> Check {
    let data = crate::paths::data_dir();
    let mut problems = Vec::new();
    for dir in [data.as_path(), settings.sessions_dir.as_path()] {
        if let Err(error) = writable(dir) {
            problems.push(format!("{}: {error}", dir.display()));
        }
    }
    if problems.is_empty() {
        Check::ok(
            "data folder",
            format!(
                "{} (the log) and {} (recordings) are writable",
                data.display(),
                settings.sessions_dir.display()
            ),
        )
    } else {
        Check::warn(
            "data folder",
            format!("cannot write {}", problems.join("; ")),
            "make it writable, or set XDG_DATA_HOME (the log) and record.dir (recordings)",
        )
    }
}

/// Creates `dir` if need be and writes, then removes, a file in it.
fn writable(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let probe = dir.join(format!(".livetalk-doctor-{}", std::process::id()));
    std::fs::write(&probe, b"")?;
    std::fs::remove_file(&probe)
}
