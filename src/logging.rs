//! Logging with `tracing`: to a file in the data directory for conversations (never to the
//! terminal a UI owns), to stderr for the servers (`livetalk mock`, `livetalk serve`) through
//! a writer that never blocks them. Every line is cut to a bounded length and scrubbed of
//! secrets on its way out.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;

use tracing_appender::non_blocking::{ErrorCounter, WorkerGuard};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt::MakeWriter;

use livetalk_live::{excerpt, redact};

fn level() -> LevelFilter {
    std::env::var("LIVETALK_LOG")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(LevelFilter::INFO)
}

/// Logs to `<data dir>/livetalk.log`; returns its path, or `None` if it cannot be opened
/// (logging is then off rather than spilling onto the terminal).
pub fn to_data_dir() -> Option<PathBuf> {
    let dir = crate::paths::data_dir();
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
        .with_writer(BoundedLines(Mutex::new(file)))
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
        .with_writer(BoundedLines(writer))
        .try_init()
        .ok()?;
    Some(StderrLog {
        dropped,
        _worker: worker,
    })
}

/// Writers whose lines are cut at [`excerpt::LOG_LINE`] and scrubbed of secrets: the fmt layer
/// formats an event whole and writes it at once, so each write is one line. What a server sends is bounded where it
/// is logged; this is the backstop for a path that forgot.
struct BoundedLines<M>(M);

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for BoundedLines<M> {
    type Writer = BoundedLine<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        BoundedLine(self.0.make_writer())
    }
}

struct BoundedLine<W>(W);

impl<W: Write> Write for BoundedLine<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let line = if buf.len() <= excerpt::LOG_LINE {
            text
        } else {
            let cut = excerpt::bounded(text.trim_end_matches('\n'), excerpt::LOG_LINE);
            format!("{cut}\n").into()
        };
        // Every log line passes here, so this is where secrets leave it.
        self.0.write_all(redact::scrub(&line).as_bytes())?;
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
        let mut line = BoundedLine(&mut out);
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
}
