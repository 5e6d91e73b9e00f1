//! CLI entry: parse flags, load the config, dispatch a command; nothing else. Each command
//! has a small function of its own.

use std::process::ExitCode;

use clap::CommandFactory as _;
use livetalk::cli::{
    Cli, Command, DevicesArgs, DoctorArgs, InspectArgs, MockArgs, ProxyArgs, ReplayArgs,
    SessionFlags,
};
use livetalk::config::Settings;
use livetalk::headless::{self, OutputFormat};
use livetalk::record::{inspect, replay};
use livetalk::{logging, serve, tui};
use tokio::runtime::Runtime;

/// mimalloc, not glibc's malloc: large frames freed on one tokio thread and allocated on
/// another stayed with glibc's per-thread arenas, so a session that had held a burst of
/// input kept its memory after; mimalloc gives it back (docs/security.md has the figures).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // Memory held is memory freed and given back: with the kernel's transparent huge pages
    // set to `always`, the allocator's arenas were backed by 2 MiB pages and a burst of input
    // left each one it had touched resident (docs/security.md has the figures). Before any
    // thread starts, so the whole process is covered.
    #[cfg(target_os = "linux")]
    let _ = rustix::thread::disable_transparent_huge_pages(true);
    // A completion script asking what a word can be: answered, and nothing else runs.
    livetalk::completion::answer_if_asked(Cli::command);
    let cli = match Cli::parse_args() {
        Ok(cli) => cli,
        Err(error) => match livetalk::cli::refused_value(&error) {
            Some(message) => {
                livetalk::output::err(&format!("livetalk: {message}"));
                return ExitCode::from(2);
            }
            None => error.exit(),
        },
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            livetalk::output::err(&format!(
                "livetalk: error: cannot start the async runtime: {e}"
            ));
            return ExitCode::from(1);
        }
    };
    let session = &cli.session;
    match cli.command {
        Some(Command::Mock(args)) => mock(runtime, args, session),
        Some(Command::Serve(args)) => {
            let _log = logging::to_stderr_as(args.log_format);
            let result = runtime.block_on(serve::bridge(args, session.config.clone()));
            exit(result.map(|stopped| match stopped {
                serve::Stopped::Drained => 0,
                serve::Stopped::Forced => 1,
            }))
        }
        Some(Command::Proxy(args)) => proxy(runtime, args, session),
        Some(Command::Replay(args)) => replay(runtime, args, session),
        Some(Command::Inspect(args)) => inspect_recording(&args, session),
        Some(Command::Check(args)) => {
            let _log = logging::to_data_dir();
            let code = runtime.block_on(livetalk::check::run(args, session.overrides()));
            runtime.shutdown_background();
            ExitCode::from(code)
        }
        Some(Command::Devices(args)) => devices(&args, session),
        Some(Command::Doctor(args)) => doctor(runtime, &args, session),
        Some(Command::Completions(args)) => print_generated(
            livetalk::completion::script(args.shell),
            "the completion script",
        ),
        Some(Command::Man) => print_generated(livetalk::cli::man_page(), "the manual page"),
        Some(Command::Sessions) => match Settings::load(&session.overrides()) {
            Ok(settings) => {
                let _ = livetalk::output::out_raw(&inspect::sessions_table(&settings.sessions_dir));
                ExitCode::SUCCESS
            }
            Err(e) => {
                livetalk::output::err(&format!("livetalk: {e}"));
                ExitCode::from(2)
            }
        },
        None => live_session(runtime, session),
    }
}

/// `livetalk mock`.
fn mock(runtime: Runtime, mut args: MockArgs, session: &SessionFlags) -> ExitCode {
    let _log = logging::to_stderr();
    if let Some(given) = &args.replay {
        match recording_folder(given, session) {
            Ok(dir) => args.replay = Some(dir),
            Err(message) => {
                livetalk::output::err(&format!("livetalk: error: {message}"));
                return ExitCode::from(1);
            }
        }
    }
    match runtime.block_on(serve::mock(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            livetalk::output::err(&format!("livetalk: error: {e:#}"));
            ExitCode::from(1)
        }
    }
}

/// `livetalk proxy`: the route and output flags are taken before the command as well as after it.
fn proxy(runtime: Runtime, mut args: ProxyArgs, session: &SessionFlags) -> ExitCode {
    use livetalk::proxy::Presentation;
    args.offline |= session.offline;
    if args.endpoint.is_none() {
        args.endpoint = session.endpoint.clone();
    }
    if args.offline && args.endpoint.is_some() {
        livetalk::output::err(
            "livetalk: --offline and --endpoint each name the upstream: give one of them",
        );
        return ExitCode::from(2);
    }
    if args.record.is_none()
        && let Some(Some(dir)) = &session.record
    {
        args.record = Some(dir.clone());
    }
    let presentation = match (args.headless || session.headless, args.json || session.json) {
        (true, true) => Presentation::Json,
        (true, false) => Presentation::Lines,
        (false, _) => Presentation::Screen,
    };
    // The screen owns the terminal: the log goes to the data folder then.
    let _log = match presentation {
        Presentation::Screen => {
            logging::to_data_dir();
            None
        }
        _ => logging::to_stderr(),
    };
    let result = runtime.block_on(livetalk::proxy::run(
        args,
        session.config.clone(),
        presentation,
    ));
    runtime.shutdown_background();
    exit(result)
}

/// `livetalk replay`: against an endpoint, headless, or in the full-screen app.
fn replay(runtime: Runtime, mut args: ReplayArgs, session: &SessionFlags) -> ExitCode {
    args.dir = match recording_folder(&args.dir, session) {
        Ok(dir) => dir,
        Err(message) => {
            livetalk::output::err(&format!("livetalk: error: {message}"));
            return ExitCode::from(1);
        }
    };
    let format = if args.json {
        OutputFormat::Json
    } else {
        OutputFormat::Text
    };
    // A bad graphics setting is refused however the replay runs, as a session refuses it.
    let graphics = match replay_graphics(session) {
        Ok(graphics) => graphics,
        Err(e) => {
            livetalk::output::err(&format!("livetalk: {e}"));
            return ExitCode::from(2);
        }
    };
    let result = match &args.against {
        Some(endpoint) => runtime.block_on(headless::replay_against(
            &args.dir,
            endpoint,
            session.overrides(),
            format,
        )),
        None => {
            let pacing = if args.instant {
                replay::Pacing::Instant
            } else {
                replay::Pacing::Speed(args.speed)
            };
            if args.headless || !tui::terminal_available() {
                runtime.block_on(headless::replay_recording(&args.dir, format, pacing))
            } else {
                let log_file = logging::to_data_dir();
                let audio = replay_audio(session, &args);
                runtime.block_on(tui::replay(
                    &args.dir,
                    pacing,
                    log_file.as_deref(),
                    audio,
                    graphics,
                ))
            }
        }
    };
    runtime.shutdown_background();
    exit(result)
}

/// `livetalk inspect`.
fn inspect_recording(args: &InspectArgs, session: &SessionFlags) -> ExitCode {
    let recording = recording_folder(&args.dir, session)
        .map_err(anyhow::Error::msg)
        .and_then(|dir| livetalk::record::Recording::load(&dir));
    match recording {
        Ok(recording) => {
            for warning in &recording.warnings {
                livetalk::output::err(&format!("livetalk: warning: {warning}"));
            }
            if args.markdown {
                let _ = livetalk::output::out_raw(&inspect::markdown(&recording));
            } else if args.json {
                let json = inspect::json(&recording);
                let _ = livetalk::output::out_json(&json.to_string());
            } else {
                let _ = livetalk::output::out_raw(&inspect::report(&recording));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            livetalk::output::err(&format!("livetalk: error: {e:#}"));
            ExitCode::from(1)
        }
    }
}

/// `livetalk devices`.
fn devices(args: &DevicesArgs, session: &SessionFlags) -> ExitCode {
    let mut overrides = session.overrides();
    if args.audio_host.is_some() {
        overrides.audio_host = args.audio_host.clone();
    }
    match Settings::load(&overrides) {
        Ok(settings) => match livetalk::audio::device::listing_table(settings.audio.host) {
            Ok(table) => {
                let _ = livetalk::output::out_raw(&table);
                ExitCode::SUCCESS
            }
            Err(e) => {
                livetalk::output::err(&format!(
                    "livetalk: {e}\nlivetalk: {}",
                    livetalk::audio::device::NO_DEVICES_HINT
                ));
                ExitCode::from(1)
            }
        },
        Err(e) => {
            livetalk::output::err(&format!("livetalk: {e}"));
            ExitCode::from(2)
        }
    }
}

/// `livetalk doctor`.
fn doctor(runtime: Runtime, args: &DoctorArgs, session: &SessionFlags) -> ExitCode {
    let checks = runtime.block_on(livetalk::doctor::checks(args, session.overrides()));
    let _ = if args.json {
        livetalk::output::out_json(&livetalk::doctor::json(&checks))
    } else {
        livetalk::output::out_raw(&livetalk::doctor::report(&checks))
    };
    runtime.shutdown_background();
    if livetalk::doctor::blocked(&checks) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// Prints what a generator wrote (the completion script, the manual page), or says it could not.
fn print_generated(generated: std::io::Result<Vec<u8>>, what: &str) -> ExitCode {
    match generated {
        Ok(bytes) => {
            let _ = livetalk::output::out_raw(&String::from_utf8_lossy(&bytes));
            ExitCode::SUCCESS
        }
        Err(e) => {
            livetalk::output::err(&format!("livetalk: error: cannot write {what}: {e}"));
            ExitCode::from(1)
        }
    }
}

/// `livetalk` with no command: a live session, in the full-screen app or the line console.
fn live_session(runtime: Runtime, session: &SessionFlags) -> ExitCode {
    let settings = match Settings::load_for_session(&session.overrides()) {
        Ok(settings) => settings,
        Err(e) => {
            livetalk::output::err(&format!("livetalk: {e}"));
            return ExitCode::from(2);
        }
    };
    let log_file = logging::to_data_dir();
    let result = if !session.headless && tui::terminal_available() {
        runtime.block_on(tui::run(settings, log_file.as_deref()))
    } else {
        let format = if session.json {
            OutputFormat::Json
        } else {
            OutputFormat::Text
        };
        // Without a terminal on both ends (piped input, say) the line console runs.
        let banner = (!session.headless).then(|| {
            format!(
                "Line console: type a message and press Enter; Ctrl-D ends the session.{}",
                log_file
                    .map(|p| format!(" Log: {}", p.display()))
                    .unwrap_or_default()
            )
        });
        runtime.block_on(headless::run(settings, format, banner.as_deref()))
    };
    // A stdin reader may sit in a blocking read; don't wait for it at exit.
    runtime.shutdown_background();
    exit(result)
}

fn exit(result: anyhow::Result<u8>) -> ExitCode {
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) if e.is::<livetalk::engine::launch::Interrupted>() => {
            livetalk::output::err(&format!("livetalk: {e}"));
            ExitCode::SUCCESS
        }
        // A bad setting is exit 2, wherever it is found.
        Err(e) if e.is::<livetalk::config::ConfigError>() => {
            livetalk::output::err(&format!("livetalk: {e}"));
            ExitCode::from(2)
        }
        Err(e) => {
            livetalk::output::err(&format!("livetalk: error: {e:#}"));
            ExitCode::from(1)
        }
    }
}

/// How a TUI replay plays the recorded model audio: the configured speaker, at the recorded
/// pace only (`--speed 1`, not `--instant`), and never with `--mute` or audio turned off.
/// How a replay in the terminal UI draws pictures: as the config and `--graphics` say. Only a
/// bad graphics setting stops it; the rest of the config is a live session's business.
fn replay_graphics(
    session: &SessionFlags,
) -> Result<livetalk::config::Graphics, livetalk::config::ConfigError> {
    match Settings::load(&session.overrides()) {
        Ok(settings) => Ok(settings.graphics),
        Err(e) if e.key == "terminal.graphics" => Err(e),
        Err(_) => Ok(livetalk::config::Graphics::Auto),
    }
}

fn replay_audio(
    session: &SessionFlags,
    args: &ReplayArgs,
) -> Option<livetalk::audio::AudioOptions> {
    if args.mute || args.instant || args.speed != 1.0 {
        return None;
    }
    let mut overrides = session.overrides();
    overrides.audio_host = args.audio_host.clone().or(overrides.audio_host);
    overrides.output_device = args.output_device.clone().or(overrides.output_device);
    let settings = Settings::load(&overrides).ok()?;
    let mut audio = settings.audio;
    if !audio.devices {
        return None;
    }
    audio.microphone = false;
    audio.input_wav = None;
    audio.output_wav = None;
    audio.push_to_talk = false;
    Some(audio)
}

/// The recording folder `replay` and `inspect` were given: a folder, its `session.jsonl`, or a
/// name in the sessions folder (which needs the config only then).
fn recording_folder(
    given: &std::path::Path,
    session: &SessionFlags,
) -> Result<std::path::PathBuf, String> {
    livetalk::record::locate::recording_folder(given, || {
        Settings::load(&session.overrides())
            .ok()
            .map(|settings| settings.sessions_dir)
    })
}
