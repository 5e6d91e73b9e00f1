//! The embedded mock Live server: a wire-compatible stand-in for the real service, with a
//! scripted smart-home model, speech-like audio and energy-based turn detection.

pub mod conversation;
pub mod model;
pub mod server;
pub mod vad;
pub mod voice;

pub use server::{MockOptions, MockServer, TlsFiles, live_path_flavor, serve_until_signal};
