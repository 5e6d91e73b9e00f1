//! `livetalk` in a real pseudo-terminal: a tmux server of its own, one pane, driven by keys
//! and read back from the screen.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// How often a pane's screen is read while waiting: nothing announces a redraw.
const LOOK_EVERY: Duration = Duration::from_millis(50);

/// `livetalk` with `args` as one line a shell runs, each word quoted.
pub fn livetalk_line(args: &[&str]) -> String {
    let words: Vec<String> = std::iter::once(env!("CARGO_BIN_EXE_livetalk"))
        .chain(args.iter().copied())
        .map(|word| format!("'{}'", word.replace('\'', r"'\''")))
        .collect();
    words.join(" ")
}

/// A tmux server of our own (its own socket), running one pane.
pub struct Pane {
    /// Holds the socket and tmux's config; gone with the pane.
    dir: tempfile::TempDir,
}

impl Pane {
    /// Starts `livetalk` in a `width`×`height` pane, isolated in `scratch`; the pane stays
    /// after it exits so the exit code and the terminal modes it left behind can be read.
    pub fn start(scratch: &Path, width: u16, height: u16) -> Pane {
        Pane::start_with(scratch, width, height, &[], |_| {})
    }

    /// [`Pane::start`] with arguments for `livetalk`, and `adjust` for what tmux (and so
    /// livetalk) is started with besides the isolation, such as an audio server.
    pub fn start_with(
        scratch: &Path,
        width: u16,
        height: u16,
        args: &[&str],
        adjust: impl FnOnce(&mut Command),
    ) -> Pane {
        let pane = Pane {
            dir: tempfile::tempdir().expect("a folder for tmux"),
        };
        let conf = pane.dir.path().join("tmux.conf");
        // `set-clipboard on`: what a program copies with OSC 52 becomes tmux's paste buffer.
        std::fs::write(
            &conf,
            "set -g remain-on-exit on\nset -g status off\nset -s set-clipboard on\n",
        )
        .expect("write tmux.conf");
        let script = format!("{}; echo LIVETALK_EXIT=$?; stty -a", livetalk_line(args));
        let mut tmux = Command::new("tmux");
        super::isolate(&mut tmux, scratch);
        adjust(&mut tmux);
        let status = tmux
            .env("TERM", "xterm-256color")
            .arg("-S")
            .arg(pane.socket())
            .arg("-f")
            .arg(&conf)
            .args(["new-session", "-d", "-s", "lt"])
            .args(["-x", &width.to_string(), "-y", &height.to_string()])
            .args(["sh", "-c", &script])
            .status()
            .expect("tmux runs (the test command installs it)");
        assert!(status.success(), "tmux new-session failed");
        pane
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("tmux.sock")
    }

    fn tmux(&self, args: &[&str]) -> String {
        let output = Command::new("tmux")
            .arg("-S")
            .arg(self.socket())
            .args(args)
            .output()
            .expect("run tmux");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    pub fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", "lt"])
    }

    /// The screen with its colours and attributes, as escape sequences (`capture-pane -e`).
    pub fn screen_with_colours(&self) -> String {
        self.tmux(&["capture-pane", "-e", "-p", "-t", "lt"])
    }

    /// The screen and its scrollback: what the shell printed after livetalk exited.
    pub fn transcript(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-S", "-", "-t", "lt"])
    }

    /// Waits for livetalk to exit; returns the pane's full text.
    pub fn wait_exit(&self, timeout: Duration) -> String {
        // Dead first, then read: everything the shell printed is on the pane by then.
        let exited = super::poll(timeout, LOOK_EVERY, || {
            (self.format("#{pane_dead}") == "1").then(|| self.transcript())
        });
        exited.unwrap_or_else(|| {
            panic!(
                "timed out waiting for livetalk to exit; the screen:\n{}",
                self.screen()
            )
        })
    }

    pub fn format(&self, format: &str) -> String {
        self.tmux(&["display-message", "-p", "-t", "lt", format])
            .trim()
            .to_owned()
    }

    pub fn type_line(&self, text: &str) {
        self.tmux(&["send-keys", "-t", "lt", "-l", text]);
        self.tmux(&["send-keys", "-t", "lt", "Enter"]);
    }

    /// From now on, everything written to the pane's terminal, escape sequences and all, goes
    /// to the file returned (read it with [`super::poll`]: it lags the screen a little).
    pub fn pipe_output(&self) -> PathBuf {
        let file = self.dir.path().join("output.raw");
        let command = format!("cat >> '{}'", file.display());
        self.tmux(&["pipe-pane", "-O", "-t", "lt", &command]);
        file
    }

    /// What livetalk last copied to the clipboard (OSC 52), as tmux keeps it: its newest
    /// paste buffer; empty while there is none.
    pub fn clipboard(&self) -> String {
        self.tmux(&["show-buffer"])
    }

    /// Pastes `text` as a terminal does: bracketed (`ESC [200~ … ESC [201~`), since livetalk
    /// asks for it, in one go from a tmux buffer.
    pub fn paste(&self, text: &str) {
        let file = self.dir.path().join("paste.txt");
        std::fs::write(&file, text).expect("write the paste");
        self.tmux(&[
            "load-buffer",
            "-b",
            "paste",
            file.to_str().expect("a UTF-8 path"),
        ]);
        self.tmux(&["paste-buffer", "-p", "-b", "paste", "-t", "lt"]);
    }

    pub fn keys(&self, keys: &str) {
        self.tmux(&["send-keys", "-t", "lt", keys]);
    }

    /// Waits until the screen satisfies `ready`, reading it again and again; panics with the
    /// screen on timeout.
    pub fn wait_for(&self, what: &str, timeout: Duration, ready: impl Fn(&str) -> bool) -> String {
        let mut screen = String::new();
        let found = super::poll(timeout, LOOK_EVERY, || {
            screen = self.screen();
            ready(&screen).then_some(())
        });
        assert!(
            found.is_some(),
            "timed out waiting for {what}; the screen:\n{screen}"
        );
        screen
    }

    /// The pid of livetalk, the shell's child.
    pub fn livetalk_pid(&self) -> u32 {
        let shell: u32 = self.format("#{pane_pid}").parse().expect("a pane pid");
        let children = std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children"))
            .expect("the shell's children");
        children
            .split_whitespace()
            .next()
            .and_then(|pid| pid.parse().ok())
            .expect("livetalk runs under the shell")
    }
}

impl Drop for Pane {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(self.socket())
            .arg("kill-server")
            .status();
    }
}
