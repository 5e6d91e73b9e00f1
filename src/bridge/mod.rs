//! The app-facing WebSocket bridge (docs/bridge-protocol.md): the protocol, the `livetalk serve`
//! server and the `--bridge` client that runs the normal app over a bridge.

pub mod client;
pub mod protocol;
pub mod server;

#[cfg(test)]
mod runner_tests;

pub use protocol::{AppMessage, BridgeMessage, LiveConfig};
pub use server::{BridgeOptions, BridgeServer, DEFAULT_MAX_MESSAGE_BYTES, Upstream};
