//! A mock Gemini Live API server: a wire-compatible stand-in for the real service, with a
//! scripted smart-home model, speech-like audio, energy-based turn detection, session
//! resumption and scripted fault scenarios. [`ws_server`] is the accept loop and connection
//! ending it runs on, which other WebSocket servers can share.

mod connection;
mod flavor;
pub mod model;
mod random;
pub mod resumption;
pub mod scenario;
pub mod server;
mod state;
pub mod vad;
pub mod voice;
pub mod ws_server;

pub use scenario::{Fault, FaultAction, Moment, Scenario};
pub use server::{MockOptions, MockServer, TlsFiles};
pub use state::MockState;
