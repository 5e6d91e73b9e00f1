//! Where a recording is, from what the user typed: its folder, its `session.jsonl`, or its
//! name as `livetalk sessions` lists it (a folder in the sessions folder). And where
//! `--record NAME` writes: a bare name is a folder in the sessions folder, so `sessions` lists
//! it; anything with a path in it is taken as the path it is.

use std::path::{Component, Path, PathBuf};

use super::LOG_FILE;

/// True for a name with no folder in it (`bug-1234`, not `./bug-1234` or `out/bug-1234`).
pub fn is_bare_name(path: &Path) -> bool {
    let mut components = path.components();
    matches!(
        (components.next(), components.next()),
        (Some(Component::Normal(_)), None)
    )
}

/// The folder `--record PATH` writes into.
pub fn record_folder(given: &Path, sessions_dir: &Path) -> PathBuf {
    if is_bare_name(given) {
        sessions_dir.join(given)
    } else {
        given.to_owned()
    }
}

/// The recording folder `given` names. `sessions_dir` is asked for only when `given` is a bare
/// name that is not a folder here.
pub fn recording_folder(
    given: &Path,
    sessions_dir: impl FnOnce() -> Option<PathBuf>,
) -> Result<PathBuf, String> {
    if given.is_dir() {
        return Ok(given.to_owned());
    }
    if given.file_name().is_some_and(|name| name == LOG_FILE) {
        return match given.parent() {
            Some(parent) if given.exists() => Ok(if parent.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                parent.to_owned()
            }),
            _ => Err(format!("{} does not exist.", given.display())),
        };
    }
    if given.exists() {
        return Err(format!(
            "{} is not a recording: give its folder (the one holding {LOG_FILE}), that {LOG_FILE}, or its name as `livetalk sessions` lists it.",
            given.display()
        ));
    }
    if is_bare_name(given)
        && let Some(root) = sessions_dir()
    {
        let named = root.join(given);
        if named.is_dir() {
            return Ok(named);
        }
        return Err(format!(
            "No recording named {} here or in {} (`livetalk sessions` lists them).",
            given.display(),
            root.display()
        ));
    }
    Err(format!("{} does not exist.", given.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_names_go_to_the_sessions_folder_paths_stay_paths() {
        let sessions = Path::new("/data/sessions");
        assert_eq!(
            record_folder(Path::new("bug-1234"), sessions),
            sessions.join("bug-1234")
        );
        for path in ["./bug-1234", "out/bug-1234", "/tmp/bug-1234", "..", "."] {
            assert_eq!(record_folder(Path::new(path), sessions), Path::new(path));
        }
    }

    #[test]
    fn a_recording_is_found_by_folder_file_or_name() {
        let scratch = tempfile::tempdir().unwrap();
        let sessions = scratch.path().join("sessions");
        let folder = sessions.join("bug-1234");
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join(LOG_FILE), "").unwrap();
        let root = || Some(sessions.clone());
        assert_eq!(recording_folder(&folder, root), Ok(folder.clone()));
        assert_eq!(
            recording_folder(&folder.join(LOG_FILE), root),
            Ok(folder.clone())
        );
        assert_eq!(
            recording_folder(Path::new("bug-1234"), root),
            Ok(folder.clone())
        );
        let missing = recording_folder(Path::new("bug-9999"), root).unwrap_err();
        assert!(missing.contains("No recording named bug-9999"), "{missing}");
        let other = folder.join("notes.txt");
        std::fs::write(&other, "").unwrap();
        let not = recording_folder(&other, root).unwrap_err();
        assert!(not.contains("is not a recording"), "{not}");
        let gone = recording_folder(&scratch.path().join("nope/x"), root).unwrap_err();
        assert!(gone.contains("does not exist"), "{gone}");
    }
}
