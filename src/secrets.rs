//! Secrets kept out of every output. The API key, bearer tokens and bridge tokens are
//! remembered here when they are read; every sink — the terminal (headless lines, the TUI's
//! frames, messages on stderr), JSON lines, the log, recordings and what the bridge sends
//! apps — passes its text through [`scrub`] on the way out. Text from a server (a close
//! reason quoting the key, a skipped frame) can take any path to a sink, so the sinks are the
//! one place that cannot be bypassed; `clippy.toml` forbids `println!` and friends so that
//! terminal output goes through [`out`] and [`err`].

use std::borrow::Cow;
use std::io::Write;
use std::sync::{PoisonError, RwLock};

/// What a secret becomes.
pub const MASK: &str = "[redacted]";

/// Shorter secrets are not searched for: they would mask ordinary words.
const MIN_LEN: usize = 6;

/// The secrets in their written forms (as given, and percent-encoded as in a URL query),
/// longest first so a secret containing another is masked whole.
static KNOWN: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Remembers a secret from now on (a blank or very short one is ignored).
pub fn remember(secret: &str) {
    let secret = secret.trim();
    if secret.len() < MIN_LEN {
        return;
    }
    let mut known = KNOWN.write().unwrap_or_else(PoisonError::into_inner);
    for form in [secret.to_owned(), percent_encoded(secret)] {
        if !known.contains(&form) {
            known.push(form);
        }
    }
    known.sort_by_key(|s| std::cmp::Reverse(s.len()));
}

/// `text` with every remembered secret replaced by [`MASK`].
pub fn scrub(text: &str) -> Cow<'_, str> {
    replace_with(text, |_| MASK.to_owned())
}

/// `text` with every remembered secret replaced by as many `*` as it has characters, for a
/// screen whose layout must not move.
pub fn scrub_keeping_width(text: &str) -> Cow<'_, str> {
    replace_with(text, |secret| "*".repeat(secret.chars().count()))
}

fn replace_with(text: &str, mask: impl Fn(&str) -> String) -> Cow<'_, str> {
    let known = KNOWN.read().unwrap_or_else(PoisonError::into_inner);
    if !known.iter().any(|s| text.contains(s.as_str())) {
        return Cow::Borrowed(text);
    }
    let mut out = text.to_owned();
    for secret in known.iter() {
        if out.contains(secret.as_str()) {
            out = out.replace(secret.as_str(), &mask(secret));
        }
    }
    Cow::Owned(out)
}

fn percent_encoded(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

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
    fn remembered_secrets_are_masked_in_every_written_form() {
        remember("sk-test-SECRET/with+plus");
        let text =
            "closed: key=sk-test-SECRET%2Fwith%2Bplus bad, and sk-test-SECRET/with+plus again";
        let scrubbed = scrub(text);
        assert!(!scrubbed.contains("SECRET"), "{scrubbed}");
        assert_eq!(scrubbed.matches(MASK).count(), 2);
        assert!(matches!(scrub("nothing to hide"), Cow::Borrowed(_)));
    }

    #[test]
    fn the_screen_keeps_its_width_and_writes_a_frame_at_flush() {
        remember("screen-secret-123");
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

    #[test]
    fn short_secrets_are_not_searched_for() {
        remember("abc");
        assert_eq!(scrub("abc abc"), "abc abc");
    }
}
