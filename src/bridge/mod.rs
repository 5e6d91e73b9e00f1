//! The app-facing bridge (docs/bridge-protocol.md): the protocol, the translator, the transports
//! (the WebSocket, and WebRTC media beside it) and the session loop over them, the `livetalk
//! serve` server with what a fleet of them needs (drains, health, metrics, recordings), and the
//! `--bridge` client that runs the normal app over a bridge (its voice on a WebRTC track with
//! `--bridge-transport webrtc`: `client_track`).

mod app_connection;
pub mod client;
mod client_track;
pub mod fleet;
pub mod live_config;
pub mod metrics;
mod payload;
pub mod protocol;
mod recordings;
pub mod server;
pub mod translator;
pub mod transport;
mod turn_watch;
mod upstream;
pub mod webrtc;

#[cfg(test)]
mod runner_tests;

pub use live_config::LiveConfig;
pub use protocol::{AppMessage, BridgeMessage};
pub use recordings::RecordOptions;
pub use server::{BridgeOptions, BridgeServer, DEFAULT_DRAIN_TIMEOUT, DEFAULT_MAX_MESSAGE_BYTES};
pub use translator::Translator;
pub use transport::{Received, Transport};
pub use upstream::Upstream;
pub use webrtc::WebRtcOptions;
