//! The `[record]` table and `--record`: whether a session is recorded, and where recordings
//! go (the sessions folder). Which folder a recording is then written to is the recorder's
//! business (`record::locate`).

use std::path::PathBuf;

use super::file::RecordLayer;
use crate::paths::data_dir;

/// Where a recording goes, as asked for; the recorder finds the folder
/// (`record::Recorder::folder`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordTo {
    /// The folder `--record DIR` names, as given: a bare name is a folder in the sessions
    /// folder, anything with a path in it is that path.
    Folder(PathBuf),
    /// A new `<local timestamp>` folder under this one (`--record`, `record.enabled`).
    NewUnder(PathBuf),
}

/// What the layers said of recording so far.
#[derive(Debug, Default)]
pub(super) struct RecordChoice {
    pub(super) enabled: bool,
    pub(super) dir: Option<PathBuf>,
}

impl RecordChoice {
    /// One layer's `[record]` table.
    pub(super) fn apply(&mut self, layer: RecordLayer) {
        self.enabled = layer.enabled.unwrap_or(self.enabled);
        if let Some(dir) = layer.dir.filter(|d| !d.as_os_str().is_empty()) {
            self.dir = Some(dir);
        }
    }

    /// Where timestamped recordings go and `livetalk sessions` looks (`record.dir`).
    pub(super) fn sessions_dir(&self) -> PathBuf {
        self.dir
            .clone()
            .unwrap_or_else(|| data_dir().join("sessions"))
    }

    /// Whether to record, and where: `--record [DIR]` (`flag`) over `record.enabled`.
    pub(super) fn record_to(
        &self,
        flag: &Option<Option<PathBuf>>,
        sessions_dir: &std::path::Path,
    ) -> Option<RecordTo> {
        match flag {
            Some(Some(dir)) => Some(RecordTo::Folder(dir.clone())),
            Some(None) => Some(RecordTo::NewUnder(sessions_dir.to_owned())),
            None if self.enabled => Some(RecordTo::NewUnder(sessions_dir.to_owned())),
            None => None,
        }
    }
}
