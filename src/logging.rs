//! Logging with `tracing`: to a file in the data directory for conversations (never to the
//! terminal a UI owns), to stderr for the servers (`livetalk mock`, `livetalk serve`) through
//! a writer that never blocks them.

use std::path::PathBuf;
use std::sync::Mutex;

use tracing_appender::non_blocking::{ErrorCounter, WorkerGuard};
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

/// Lines held for stderr while it is slow or not read at all; past this, new lines are dropped
/// (and counted) rather than stalling the server.
const STDERR_BACKLOG_LINES: usize = 4096;

/// Keeps the stderr log writing until dropped; dropping it writes what is still queued (waiting
/// about a second at most when nobody reads stderr).
pub struct StderrLog {
    dropped: ErrorCounter,
    _worker: WorkerGuard,
}

impl Drop for StderrLog {
    fn drop(&mut self) {
        let dropped = self.dropped.dropped_lines();
        if dropped > 0 {
            tracing::warn!(dropped, "log lines were dropped: stderr was not being read");
        }
    }
}

/// Logs to stderr, as servers do. A dedicated thread does the writing, so a stderr that is a
/// full pipe nobody reads costs log lines, never a stalled server or an ignored SIGTERM.
pub fn to_stderr() -> Option<StderrLog> {
    let (writer, worker) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .lossy(true)
        .buffered_lines_limit(STDERR_BACKLOG_LINES)
        .thread_name("livetalk-log")
        .finish(std::io::stderr());
    let dropped = writer.error_counter();
    tracing_subscriber::fmt()
        .with_max_level(level())
        .with_writer(writer)
        .try_init()
        .ok()?;
    Some(StderrLog {
        dropped,
        _worker: worker,
    })
}
