//! Recordings.
pub mod locate;
mod recorder;

pub use recorder::Recorder;
