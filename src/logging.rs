//! Logging with `tracing`: to a file in the data directory for conversations (never to the
//! terminal a UI owns), to stderr for the standalone mock server.

use std::path::PathBuf;
use std::sync::Mutex;

use tracing_subscriber::filter::LevelFilter;

fn level() -> LevelFilter {
    std::env::var("LIVETALK_LOG")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(LevelFilter::INFO)
}

/// Logs to `<data dir>/livetalk.log`; returns its path, or `None` if it cannot be opened
/// (logging is then off rather than spilling onto the terminal).
pub fn to_data_dir() -> Option<PathBuf> {
    let dir = crate::config::data_dir();
    std::fs::create_dir_all(&dir).ok()?;
    let path = dir.join("livetalk.log");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .ok()?;
    tracing_subscriber::fmt()
        .with_max_level(level())
        .with_ansi(false)
        .with_writer(Mutex::new(file))
        .try_init()
        .ok()?;
    Some(path)
}

/// Logs to stderr (the mock server's own terminal).
pub fn to_stderr() {
    let _ = tracing_subscriber::fmt()
        .with_max_level(level())
        .with_writer(std::io::stderr)
        .try_init();
}
