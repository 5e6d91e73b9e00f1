//! What livetalk writes to the terminal: lines on stdout and stderr, and the TUI's frames,
//! each scrubbed of secrets through [`livetalk_live::redact`] on the way out (`clippy.toml`
//! forbids `println!` and friends so that nothing prints around it), and every line made safe
//! for a terminal through [`livetalk_live::excerpt::terminal_safe`] (model text, a recording's
//! lines, a file's name: ESC and the other controls shown escaped, on a terminal or not); what
//! C libraries write to stderr behind its back, caught; and whether the user asked for no
//! colour.

use std::io::{Read as _, Seek as _, Write};
use std::os::fd::{AsFd, OwnedFd};

use livetalk_live::excerpt::{json_terminal_safe, terminal_safe};
use livetalk_live::redact::{scrub, scrub_keeping_width};

/// Writes a line to stdout, scrubbed and made safe for a terminal; the error (a closed pipe)
/// is the caller's to judge.
pub fn out(line: &str) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{}", terminal_safe(&scrub(line)))?;
    stdout.flush()
}

/// Writes one line of JSON to stdout, scrubbed, with DEL and the C1 controls escaped as JSON
/// escapes (serde_json escapes C0 itself), so it stays the same JSON.
pub fn out_json(line: &str) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{}", json_terminal_safe(&scrub(line)))?;
    stdout.flush()
}

/// Writes text to stdout as it is (no newline added), scrubbed and made safe for a terminal.
pub fn out_raw(text: &str) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(terminal_safe(&scrub(text)).as_bytes())?;
    stdout.flush()
}

/// Writes a line to stderr, scrubbed and made safe for a terminal. Nothing is left to do if
/// stderr is gone.
pub fn err(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{}", terminal_safe(&scrub(line)));
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

/// fd 2 pointed at another file until dropped. C libraries (alsa-lib, and libjack, which
/// ALSA's jack plugin loads) write to stderr themselves, past the log and any Rust handler.
pub struct StderrRedirect {
    saved: OwnedFd,
}

impl StderrRedirect {
    pub fn to(target: impl AsFd) -> std::io::Result<Self> {
        let saved = rustix::io::dup(std::io::stderr())?;
        rustix::stdio::dup2_stderr(target)?;
        Ok(StderrRedirect { saved })
    }
}

impl Drop for StderrRedirect {
    fn drop(&mut self) {
        let _ = rustix::stdio::dup2_stderr(&self.saved);
    }
}

/// Runs `f` with what is written to stderr meanwhile caught and logged at debug level, as
/// `what`. If `f` panics, the caught text, the panic message with it, goes to the real stderr.
/// fd 2 belongs to the whole process: for one-shot commands, where nothing else is printing.
pub fn catching_stderr<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let caught = rustix::fs::memfd_create("livetalk-stderr", rustix::fs::MemfdFlags::CLOEXEC)
        .map(std::fs::File::from)
        .ok();
    let redirect = caught
        .as_ref()
        .and_then(|file| StderrRedirect::to(file).ok());
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    drop(redirect);
    let mut bytes = Vec::new();
    if let Some(mut file) = caught {
        let _ = file.rewind().and_then(|()| file.read_to_end(&mut bytes));
    }
    let text = String::from_utf8_lossy(&bytes);
    match result {
        Ok(value) => {
            if !text.trim().is_empty() {
                tracing::debug!("{what}: {}", text.trim());
            }
            value
        }
        Err(panic) => {
            err(text.trim_end());
            std::panic::resume_unwind(panic)
        }
    }
}

/// True when the user asked for no colour (`NO_COLOR` set and not empty, as no-color.org says).
pub fn no_color() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

/// True when the terminal on stdout shows OSC 8 hyperlinks, as the `supports-hyperlinks` crate
/// judges from the environment (the terminal's own variables: iTerm2, WezTerm, kitty, VTE
/// terminals, Windows Terminal, Konsole, …); `FORCE_HYPERLINK=1` says yes, `=0` no. A terminal
/// that does not know the sequence would print it, so unknown means no.
pub fn hyperlinks() -> bool {
    supports_hyperlinks::on(supports_hyperlinks::Stream::Stdout)
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
