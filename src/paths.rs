//! Where livetalk keeps its files on this machine: the user's config file and the data folder
//! (the log, recorded sessions), in the platform's usual places.

use std::path::PathBuf;

/// The user config file: `LIVETALK_CONFIG`, else the platform config dir.
pub fn default_config_path() -> Option<PathBuf> {
    directories::ProjectDirs::from("", "", "livetalk").map(|d| d.config_dir().join("config.toml"))
}

/// The data folder: the log, and recorded sessions unless the config says otherwise.
pub fn data_dir() -> PathBuf {
    directories::ProjectDirs::from("", "", "livetalk")
        .map(|d| d.data_dir().to_path_buf())
        .unwrap_or_else(|| std::env::temp_dir().join("livetalk"))
}
