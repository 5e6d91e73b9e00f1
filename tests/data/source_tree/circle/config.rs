//! Settings.

pub struct Settings;

// crate::record::recorder::Recorder named in a comment is no path.
pub fn sessions_dir() -> String {
    let _ = "crate::record::recorder";
    crate::record::locate::record_folder()
}
