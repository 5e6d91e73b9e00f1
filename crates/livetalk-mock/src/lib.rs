//! A mock Gemini Live API server: a wire-compatible stand-in for the real service, with a
//! scripted smart-home model, speech-like audio, energy-based turn detection, session
//! resumption and scripted fault scenarios. [`ws_server`] is the accept loop and connection
//! ending it runs on, which other WebSocket servers can share.

#![deny(missing_docs)]

mod connection;
mod flavor;
mod model;
mod random;
mod resumption;
mod scenario;
mod server;
mod state;
mod vad;
pub mod voice;
pub mod ws_server;

pub use scenario::{Fault, FaultAction, Moment, Scenario, ScenarioError};
pub use server::{MockOptions, MockServer, StartError, TlsFiles};
pub use state::MockState;
