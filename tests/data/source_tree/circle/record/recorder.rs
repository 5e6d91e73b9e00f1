//! The recorder.

use crate::config::Settings;
use super::{locate::record_folder, Recorder as _};

pub struct Recorder(Settings);
