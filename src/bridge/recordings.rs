//! `serve --record DIR`: each app session recorded (format 4, [`WireRecorder`]) into a folder
//! of its own, `DIR/<session id>/`, and `--record-keep N` keeping only the newest N there.
//!
//! Instances of a fleet may share DIR: a folder is created whole or not at all (a session that
//! finds its name taken takes the next free `-2`, `-3`…), and pruning never removes a
//! recording this instance is still writing. Another instance's session still being written
//! is among the newest (its log was just written to) unless more than N are open at once.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use anyhow::Context as _;
use tracing::{debug, info, warn};

use crate::record::{LOG_FILE, WireMeta, WireRecorder};

/// `serve --record DIR [--record-keep N]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordOptions {
    pub dir: PathBuf,
    /// Keep only the newest this many recordings in `dir`.
    pub keep: Option<usize>,
}

/// The recording folder of one instance.
pub struct Recordings {
    options: RecordOptions,
    /// The folders this instance's sessions are writing.
    open: Mutex<HashSet<PathBuf>>,
}

/// A session's recording; its folder counts as open until this is dropped.
pub struct SessionRecording {
    pub recorder: WireRecorder,
    recordings: Arc<Recordings>,
}

impl Drop for SessionRecording {
    fn drop(&mut self) {
        self.recordings.lock().remove(self.recorder.dir());
        self.recordings.prune();
    }
}

impl Recordings {
    /// Checks that DIR can be made and written to (a bridge that cannot record says so at
    /// start, not per session).
    pub fn open(options: RecordOptions) -> anyhow::Result<Recordings> {
        std::fs::create_dir_all(&options.dir).with_context(|| {
            format!(
                "--record {}: cannot create the recordings folder",
                options.dir.display()
            )
        })?;
        writable(&options.dir)?;
        Ok(Recordings {
            options,
            open: Mutex::new(HashSet::new()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<PathBuf>> {
        self.open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Starts the recording of session `id`; `None` (with a warning) when it cannot be
    /// created: the session goes on unrecorded.
    pub fn start(self: &Arc<Self>, id: &str, meta: WireMeta) -> Option<SessionRecording> {
        for n in 1..=64 {
            let name = if n == 1 {
                id.to_owned()
            } else {
                format!("{id}-{n}")
            };
            let dir = self.options.dir.join(&name);
            // Made whole or found taken: two instances never share a folder.
            match std::fs::create_dir(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    warn!(
                        "session {id} is not recorded: cannot create {}: {e}",
                        dir.display()
                    );
                    return None;
                }
            }
            return match WireRecorder::create(&dir, meta) {
                Ok(recorder) => {
                    info!(folder = %dir.display(), "recording the session");
                    self.lock().insert(dir);
                    self.prune();
                    Some(SessionRecording {
                        recorder,
                        recordings: self.clone(),
                    })
                }
                Err(e) => {
                    warn!("session {id} is not recorded: {e:#}");
                    None
                }
            };
        }
        warn!("session {id} is not recorded: its folder names are all taken");
        None
    }

    /// Removes all but the newest `--record-keep` recordings (by when their log was last
    /// written), never one this instance is writing.
    fn prune(&self) {
        let Some(keep) = self.options.keep else {
            return;
        };
        let mut recordings = recordings_in(&self.options.dir);
        if recordings.len() <= keep {
            return;
        }
        recordings.sort_by_key(|(_, written)| std::cmp::Reverse(*written));
        let open = self.lock().clone();
        for (dir, _) in recordings.into_iter().skip(keep) {
            if open.contains(&dir) {
                continue;
            }
            match std::fs::remove_dir_all(&dir) {
                Ok(()) => debug!(folder = %dir.display(), "old recording removed (--record-keep)"),
                Err(e) => warn!("--record-keep: cannot remove {}: {e}", dir.display()),
            }
        }
    }
}

/// Every recording folder directly in `dir`, with when its log was last written.
fn recordings_in(dir: &Path) -> Vec<(PathBuf, SystemTime)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| {
            let log = e.path().join(LOG_FILE);
            let written = std::fs::symlink_metadata(&log)
                .ok()
                .filter(|m| m.is_file())?
                .modified()
                .ok()?;
            Some((e.path(), written))
        })
        .collect()
}

/// Creates and removes a file in `dir`, to learn at start whether it can be written to.
fn writable(dir: &Path) -> anyhow::Result<()> {
    let probe = dir.join(format!(".livetalk-probe-{}", std::process::id()));
    std::fs::write(&probe, b"")
        .with_context(|| format!("--record {}: cannot write there", dir.display()))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> WireMeta {
        WireMeta {
            model: "models/m".into(),
            voice: "Puck".into(),
            endpoint_host: "127.0.0.1".into(),
            offline: true,
            recorded_by: "livetalk serve",
            details: serde_json::json!({}),
        }
    }

    #[test]
    fn a_taken_name_gets_the_next_and_only_the_newest_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let recordings = Arc::new(
            Recordings::open(RecordOptions {
                dir: dir.path().to_path_buf(),
                keep: Some(2),
            })
            .unwrap(),
        );
        // Something that is not a recording is never touched.
        std::fs::create_dir(dir.path().join("notes")).unwrap();
        let first = recordings.start("s-1", meta()).unwrap();
        let again = recordings.start("s-1", meta()).unwrap();
        assert_eq!(again.recorder.dir(), dir.path().join("s-1-2"));
        let third = recordings.start("s-3", meta()).unwrap();
        // All three are open: none is removed, though the limit is two.
        assert_eq!(recordings_in(dir.path()).len(), 3);
        drop(first);
        let mut left: Vec<String> = recordings_in(dir.path())
            .into_iter()
            .map(|(d, _)| d.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["s-1-2", "s-3"]);
        drop((again, third));
        assert!(dir.path().join("notes").is_dir());
    }
}
