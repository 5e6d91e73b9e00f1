//! The embedded mock Live server: a wire-compatible stand-in for the real service, with a
//! scripted smart-home model, speech-like audio, energy-based turn detection, session
//! resumption and scripted fault scenarios.

pub mod connection;
pub mod model;
mod random;
pub mod resumption;
pub mod scenario;
pub mod server;
pub mod vad;
pub mod voice;

pub use scenario::{Fault, FaultAction, Moment, Scenario};
pub use server::{
    MockOptions, MockServer, MockState, TlsFiles, live_path_flavor, serve_until_signal,
};
