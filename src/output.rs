//! What livetalk writes to the terminal: lines on stdout and stderr, and the TUI's frames,
//! each scrubbed of secrets through [`livetalk_live::redact`] on the way out. `clippy.toml`
//! forbids `println!` and friends so that nothing prints around it.

use std::io::Write;

use livetalk_live::redact::{scrub, scrub_keeping_width};

/// Writes a line to stdout, scrubbed; the error (a closed pipe) is the caller's to judge.
pub fn out(line: &str) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{}", scrub(line))?;
    stdout.flush()
}

/// Writes text to stdout as it is (no newline added), scrubbed.
pub fn out_raw(text: &str) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(scrub(text).as_bytes())?;
    stdout.flush()
}

/// Writes a line to stderr, scrubbed. Nothing is left to do if stderr is gone.
pub fn err(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{}", scrub(line));
}

/// The terminal under the TUI: a frame is gathered until it is flushed, then scrubbed with
/// masks of the same width (so the layout stays put) and written in one go.
pub struct Screen<W: Write> {
    inner: W,
    frame: Vec<u8>,
}

impl<W: Write> Screen<W> {
    pub fn new(inner: W) -> Self {
        Screen {
            inner,
            frame: Vec::with_capacity(16 * 1024),
        }
    }
}

impl<W: Write> Write for Screen<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.frame.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let frame = std::mem::take(&mut self.frame);
        match std::str::from_utf8(&frame) {
            Ok(text) => self.inner.write_all(scrub_keeping_width(text).as_bytes())?,
            Err(_) => self.inner.write_all(&frame)?,
        }
        self.frame = frame;
        self.frame.clear();
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_screen_keeps_its_width_and_writes_a_frame_at_flush() {
        livetalk_live::redact::remember("screen-secret-123");
        let mut screen = Screen::new(Vec::new());
        screen.write_all(b"[screen-sec").unwrap();
        screen.write_all(b"ret-123]").unwrap();
        assert!(
            screen.inner.is_empty(),
            "nothing is written before the flush"
        );
        screen.flush().unwrap();
        let shown = String::from_utf8(screen.inner.clone()).unwrap();
        assert_eq!(shown, format!("[{}]", "*".repeat(17)));
    }
}
