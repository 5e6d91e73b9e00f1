//! Logging with `tracing`: to a file in the data directory for conversations (never to the
//! terminal a UI owns), kept at most [`LOG_FILE_CAP`] twice over; to stderr for the servers
//! (`livetalk mock`, `livetalk serve`) through a writer that never blocks them. Every line is
//! cut to a bounded length, scrubbed of secrets and made safe for a terminal on its way out.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tracing_appender::non_blocking::{ErrorCounter, WorkerGuard};
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::cli::LogFormat;
use livetalk_live::{excerpt, redact};

fn level() -> LevelFilter {
    std::env::var("LIVETALK_LOG")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(LevelFilter::INFO)
}

/// What is logged at `level`: everything of livetalk's own, but the MCP library only from
/// warnings up unless debugging was asked for, because it logs every message a server sends
/// at INFO (a server's notification flood became hundreds of MB of log).
fn filter(level: LevelFilter) -> Targets {
    let rmcp = if level >= LevelFilter::DEBUG {
        level
    } else {
        level.min(LevelFilter::WARN)
    };
    Targets::new().with_default(level).with_target("rmcp", rmcp)
}

/// The most the log file holds before it is moved to `livetalk.log.1` (replacing the one
/// before) and begun again: the log is appended to across runs, so without a cap it grows for
/// ever.
pub const LOG_FILE_CAP: u64 = 10 << 20;

/// Logs to `<data dir>/livetalk.log`; returns its path, or `None` if it cannot be opened
/// (logging is then off rather than spilling onto the terminal).
pub fn to_data_dir() -> Option<PathBuf> {
    let dir = crate::paths::data_dir();
    std::fs::create_dir_all(&dir).ok()?;
    let path = dir.join("livetalk.log");
    let file = CappedFile::open(path.clone(), LOG_FILE_CAP).ok()?;
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(BoundedLines(Mutex::new(file), LogFormat::Text)),
        )
        .with(filter(level()))
        .try_init()
        .ok()?;
    Some(path)
}

/// A log file that is moved aside to `<name>.1` once it would pass its cap, so the log takes at
/// most twice the cap on disk. Writing stays a plain append to a local file, as before; the
/// move is one rename.
struct CappedFile {
    path: PathBuf,
    file: Option<File>,
    len: u64,
    cap: u64,
}

impl CappedFile {
    /// Opens `path` for appending, first moving it aside if it is already at its cap (a log
    /// left by earlier runs).
    fn open(path: PathBuf, cap: u64) -> std::io::Result<CappedFile> {
        let mut capped = CappedFile {
            path,
            file: None,
            len: 0,
            cap,
        };
        capped.reopen()?;
        if capped.len >= cap {
            capped.rotate()?;
        }
        Ok(capped)
    }

    fn reopen(&mut self) -> std::io::Result<()> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        self.len = file.metadata()?.len();
        self.file = Some(file);
        Ok(())
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        self.file = None;
        std::fs::rename(&self.path, previous(&self.path))?;
        self.reopen()
    }
}

/// `livetalk.log.1` beside `livetalk.log`.
fn previous(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".1");
    PathBuf::from(name)
}

impl Write for CappedFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.len > 0 && self.len.saturating_add(buf.len() as u64) > self.cap {
            // Another run may have moved it already: then this one starts a fresh file too.
            if let Err(error) = self.rotate()
                && self.file.is_none()
            {
                return Err(error);
            }
        }
        let Some(file) = self.file.as_mut() else {
            return Err(std::io::Error::other("the log file is not open"));
        };
        let written = file.write(buf)?;
        self.len = self.len.saturating_add(written as u64);
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.as_mut().map_or(Ok(()), Write::flush)
    }
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
    to_stderr_as(LogFormat::Text)
}

/// [`to_stderr`] in `format`: text lines, or one JSON object per line (`--log-format json`),
/// with the fields of the spans it was logged in (a bridge session's `id`) at its top level.
pub fn to_stderr_as(format: LogFormat) -> Option<StderrLog> {
    let (writer, worker) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .lossy(true)
        .buffered_lines_limit(STDERR_BACKLOG_LINES)
        .thread_name("livetalk-log")
        .finish(std::io::stderr());
    let dropped = writer.error_counter();
    let writer = BoundedLines(writer, format);
    let layer = match format {
        LogFormat::Text => tracing_subscriber::fmt::layer().with_writer(writer).boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(true)
            .with_writer(writer)
            .boxed(),
    };
    tracing_subscriber::registry()
        .with(layer)
        .with(filter(level()))
        .try_init()
        .ok()?;
    Some(StderrLog {
        dropped,
        _worker: worker,
    })
}

/// Writers whose lines are cut at [`excerpt::LOG_LINE`], scrubbed of secrets and made safe for
/// a terminal in the lines' format: the fmt layer formats an event whole and writes it at once,
/// so each write is one line. What a server sends is bounded where it is logged; this is the
/// backstop for a path that forgot.
struct BoundedLines<M>(M, LogFormat);

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for BoundedLines<M> {
    type Writer = BoundedLine<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        BoundedLine(self.0.make_writer(), self.1)
    }
}

struct BoundedLine<W>(W, LogFormat);

impl<W: Write> Write for BoundedLine<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let line = if buf.len() <= excerpt::LOG_LINE {
            text
        } else {
            let cut = excerpt::bounded(text.trim_end_matches('\n'), excerpt::LOG_LINE);
            format!("{cut}\n").into()
        };
        // Every log line passes here, so this is where secrets leave it, and where what a
        // peer sent is made safe for the terminal the log is read on (the servers' is one):
        // a JSON line with JSON's escapes, so it stays JSON.
        let line = redact::scrub(&line);
        let safe = match self.1 {
            LogFormat::Text => excerpt::terminal_safe(&line),
            LogFormat::Json => excerpt::json_terminal_safe(&line),
        };
        self.0.write_all(safe.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_line_is_cut_and_says_its_size() {
        let mut out = Vec::new();
        let mut line = BoundedLine(&mut out, LogFormat::Text);
        line.write_all(b"short\n").unwrap();
        let long = format!("{}\n", "x".repeat(10 << 20));
        line.write_all(long.as_bytes()).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "short");
        assert!(
            lines[1].ends_with("x… (10.0 MiB, shown 16.0 KiB)"),
            "{}",
            &lines[1][16000..]
        );
        assert_eq!(lines.len(), 2);
        assert!(text.ends_with('\n'));
    }

    #[test]
    fn what_a_peer_sent_reaches_the_log_escaped_and_a_json_line_stays_json() {
        let said = "\u{1b}]52;c;aGk=\u{7}\u{9b}2J\u{7f}";
        let mut out = Vec::new();
        BoundedLine(&mut out, LogFormat::Text)
            .write_all(format!("peer said {said}\n").as_bytes())
            .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "peer said \\x1b]52;c;aGk=\\x07\\x9b2J\\x7f\n"
        );
        let mut out = Vec::new();
        let json = serde_json::json!({"message": format!("peer said {said}")}).to_string();
        BoundedLine(&mut out, LogFormat::Json)
            .write_all(format!("{json}\n").as_bytes())
            .unwrap();
        let line = String::from_utf8(out).unwrap();
        assert!(
            !line.chars().any(|c| c.is_control() && c != '\n'),
            "{line:?}"
        );
        let read: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(read["message"], format!("peer said {said}"));
    }

    #[test]
    fn the_mcp_library_logs_only_warnings_unless_debugging() {
        use tracing::Level;
        let info = filter(LevelFilter::INFO);
        assert!(!info.would_enable("rmcp::service", &Level::INFO));
        assert!(info.would_enable("rmcp::service", &Level::WARN));
        assert!(info.would_enable("livetalk::tools::mcp", &Level::INFO));
        let debug = filter(LevelFilter::DEBUG);
        assert!(debug.would_enable("rmcp::service", &Level::DEBUG));
        assert!(!filter(LevelFilter::ERROR).would_enable("rmcp::service", &Level::WARN));
    }

    #[test]
    fn the_log_file_is_kept_twice_at_most() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("livetalk.log");
        let old = dir.path().join("livetalk.log.1");
        // A log an earlier run left at its cap is moved aside at once.
        std::fs::write(&path, vec![b'a'; 1000]).unwrap();
        let mut file = CappedFile::open(path.clone(), 1000).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
        assert_eq!(std::fs::metadata(&old).unwrap().len(), 1000);
        let mut line = vec![b'b'; 99];
        line.push(b'\n');
        for _ in 0..100 {
            file.write_all(&line).unwrap();
        }
        let now = std::fs::read(&path).unwrap();
        let before = std::fs::read(&old).unwrap();
        assert!(
            now.len() <= 1000 && before.len() <= 1000,
            "{} {}",
            now.len(),
            before.len()
        );
        assert!(now.iter().all(|b| *b != b'a') && before.iter().all(|b| *b != b'a'));
        assert!(
            now.len().is_multiple_of(100) && before.len() == 1000,
            "lines are never split across the two files"
        );
    }
}
