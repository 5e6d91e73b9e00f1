//! Shell completion: the script `livetalk completions SHELL` prints has the shell ask livetalk
//! itself what the word under the cursor can be (clap_complete's dynamic completion), so Tab
//! offers what each argument takes now: the prebuilt voices, the model ids, the recorded
//! sessions by name, and paths only where a path goes.

use std::ffi::OsStr;
use std::path::Path;

use clap_complete::engine::{CompletionCandidate, PathCompleter, ValueCompleter as _};
use clap_complete::env::{Bash, EnvCompleter, Fish, Powershell, Shells, Zsh};

use crate::config::{FlagOverrides, Settings};

/// The variable a script sets when it asks livetalk for the words that fit.
const ASKED_BY: &str = "LIVETALK_COMPLETE";

/// Recorded sessions offered at most (a sessions folder can hold thousands).
const SESSIONS_OFFERED: usize = 500;

/// Entries of the sessions folder looked at, at most.
const SESSIONS_READ: usize = 10_000;

/// The shells livetalk completes in; docs/configuration.md installs each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
    Powershell,
}

/// The same shells, as clap_complete answers them.
const SHELLS: Shells<'static> = Shells(&[&Bash, &Zsh, &Fish, &Powershell]);

impl Shell {
    fn completer(self) -> &'static dyn EnvCompleter {
        match self {
            Shell::Bash => &Bash,
            Shell::Zsh => &Zsh,
            Shell::Fish => &Fish,
            Shell::Powershell => &Powershell,
        }
    }
}

/// When a completion script asks (its variable is set), prints the words that fit `command`
/// (the CLI's definitions, `cli::Cli`) and exits; otherwise returns at once. Called before
/// anything else reads the command line.
pub fn answer_if_asked(command: fn() -> clap::Command) {
    clap_complete::CompleteEnv::with_factory(command)
        .var(ASKED_BY)
        .shells(SHELLS)
        .complete();
}

/// `livetalk completions SHELL`: the script that makes this livetalk the completer of
/// `livetalk` in `shell`. Run by its name (from the `PATH`) it names itself so; run by a path
/// (`~/.cargo/bin/livetalk`, `target/release/livetalk`) it names that path, made absolute.
pub fn script(shell: Shell) -> std::io::Result<Vec<u8>> {
    let invoked = std::env::args_os()
        .next()
        .unwrap_or_else(|| "livetalk".into());
    let mut completer = std::path::PathBuf::from(invoked);
    if completer.components().count() > 1
        && let Ok(here) = std::env::current_dir()
    {
        completer = here.join(completer);
    }
    let mut script = Vec::new();
    shell.completer().write_registration(
        ASKED_BY,
        "livetalk",
        "livetalk",
        &completer.to_string_lossy(),
        &mut script,
    )?;
    Ok(script)
}

/// `--voice`: the prebuilt voices.
pub fn voices() -> Vec<CompletionCandidate> {
    livetalk_live::models::VOICES
        .iter()
        .map(|voice| CompletionCandidate::new(*voice))
        .collect()
}

/// `--model`: the model ids `/model` offers.
pub fn models() -> Vec<CompletionCandidate> {
    crate::app::MODEL_IDS
        .iter()
        .map(|id| CompletionCandidate::new(*id))
        .collect()
}

/// A recording (`replay`, `inspect`): the sessions `livetalk sessions` lists, by name, newest
/// first, then the folders here. The sessions folder is the config's (`LIVETALK_CONFIG` or the
/// default file; a `--config` on the line being completed is not seen yet).
pub fn recordings(current: &OsStr) -> Vec<CompletionCandidate> {
    let typed = current.to_string_lossy();
    let mut candidates = Vec::new();
    if !typed.contains('/')
        && let Ok(settings) = Settings::load(&FlagOverrides::default())
    {
        candidates = session_names(&settings.sessions_dir, &typed)
            .into_iter()
            .map(CompletionCandidate::new)
            .collect();
    }
    candidates.extend(PathCompleter::dir().complete(current));
    candidates
}

/// The names of the recordings directly under `root` that start with `typed`, newest first
/// (their names start with the local time they were made, or were given by the user; both
/// sort by name after the folder's time).
fn session_names(root: &Path, typed: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut found: Vec<(std::time::SystemTime, String)> = entries
        .take(SESSIONS_READ)
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let path = entry.path();
            (name.starts_with(typed) && path.join(crate::record::LOG_FILE).is_file()).then(|| {
                let made = entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .unwrap_or(std::time::UNIX_EPOCH);
                (made, name)
            })
        })
        .collect();
    found.sort_by(|a, b| b.cmp(a));
    found
        .into_iter()
        .take(SESSIONS_OFFERED)
        .map(|(_, name)| name)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_named_newest_first_and_other_folders_left_out() {
        let root = tempfile::tempdir().unwrap();
        for (made, name) in ["2026-11-25_10-00-00", "bug-1234", "2026-11-26_09-00-00"]
            .into_iter()
            .enumerate()
        {
            let folder = root.path().join(name);
            std::fs::create_dir(&folder).unwrap();
            std::fs::write(folder.join(crate::record::LOG_FILE), "").unwrap();
            let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1000 * made as u64);
            std::fs::File::open(&folder)
                .unwrap()
                .set_modified(when)
                .unwrap();
        }
        std::fs::create_dir(root.path().join("not-a-recording")).unwrap();
        assert_eq!(
            session_names(root.path(), ""),
            ["2026-11-26_09-00-00", "bug-1234", "2026-11-25_10-00-00"]
        );
        assert_eq!(session_names(root.path(), "bug"), ["bug-1234"]);
        assert!(session_names(&root.path().join("missing"), "").is_empty());
    }
}
