//! A client for Google's Gemini Live API.
//!
//! - [`wire`]: the Live API's messages as serde types, once, for client and server alike;
//!   [`codec`] puts them on the wire (canonical JSON out, lenient JSON in) and [`events`]
//!   turns what a server said into [`ServerEvent`]s.
//! - [`connection`]: one connection (one WebSocket): the runner that dials under one deadline
//!   (through the [`network`]'s proxy and trust store), sends `setup`, waits for the
//!   answer and runs a reader and a writer; [`client`] is the Live API's side of it, with how a
//!   connection authenticates ([`endpoint`]'s API key, or [`adc`]'s Vertex AI tokens).
//! - [`session`]: one conversation across connections: resumption, goAway hand-overs,
//!   reconnects, and one answer per tool call; [`reply`] judges whether a turn's reply is
//!   still coming.
//! - [`models`]: what differs between Live models; [`close`]: what close codes mean.
//! - [`redact`]: secrets kept out of every output; [`excerpt`]: bounded excerpts of what a
//!   peer sent; [`wav`]: model audio written to a WAV file.

pub mod adc;
mod address;
pub mod client;
pub mod close;
pub mod codec;
pub mod connection;
mod dial;
pub mod endpoint;
pub mod events;
pub mod excerpt;
pub mod lenient;
pub mod models;
pub mod network;
mod proxy;
pub mod redact;
pub mod reply;
pub mod session;
pub mod wav;
pub mod wire;

pub use client::{Auth, ConnectOptions, connect};
pub use connection::{ConnectError, Connection, ConnectionHandle, Outbox};
pub use endpoint::{ApiKey, ApiVersion, Endpoint};
pub use events::{CloseInfo, ServerEvent};
