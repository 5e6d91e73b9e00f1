//! Logging with `tracing`: to a file in the data directory for conversations (never to the
//! terminal a UI owns), to stderr for the standalone mock server.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;

use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt::MakeWriter;

use crate::echo;

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
        .with_writer(BoundedLines(Mutex::new(file)))
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

/// Writers whose lines are cut at [`echo::LOG_LINE`]: the fmt layer formats an event whole
/// and writes it at once, so each write is one line. What a server sends is bounded where it
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
        if buf.len() <= echo::LOG_LINE {
            return self.0.write(buf);
        }
        let text = String::from_utf8_lossy(buf);
        let line = echo::bounded(text.trim_end_matches('\n'), echo::LOG_LINE);
        self.0.write_all(line.as_bytes())?;
        self.0.write_all(b"\n")?;
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
