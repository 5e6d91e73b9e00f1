//! A client for Google's Gemini Live API: the wire messages as Rust types, connections that
//! open under one deadline (through proxies, trusting the system's certificates, with an API
//! key or Vertex AI credentials), and sessions that outlive their connections.
//!
//! # Words
//!
//! - A *connection* is one WebSocket. [`connect`] opens one with [`ConnectOptions`] and hands
//!   back a [`Connection`]: a [`ConnectionHandle`] to send with, and what its server said,
//!   from `SetupComplete` to `Closed`, as [`Inbound`] values: each frame decoded once, the
//!   message kept beside the [`ServerEvent`]s it amounts to (its model audio moved into them,
//!   so a chunk is held once), and what it means read through [`Inbound::reading`].
//! - A *session* is the conversation across connections. [`session::supervise`] keeps one
//!   going: it resumes by handle after a `goAway` or a dropped connection, queues what is
//!   sent meanwhile, and lets each tool call be answered once, on the connection that asked.
//!   Its [`SessionHandle`](session::SessionHandle) sends on whichever connection is current;
//!   its [`SessionEvent`](session::SessionEvent)s are the servers' frames, passed on whole and
//!   in order, plus what the session did.
//! - Both handles are an [`Outbox`]: `send`, `close`, and the shorthands `send_user_text` and
//!   `send_tool_responses`.
//!
//! # Example
//!
//! One typed turn whose reply needs a tool, against the mock Live server of the
//! [`livetalk-mock`](https://docs.rs/livetalk-mock) crate, started in this process: no key, no
//! network but loopback. Against the service, the endpoint is
//! [`Endpoint::google_ai`] and the auth an [`ApiKey`].
//!
//! ```
//! use std::time::Duration;
//!
//! use livetalk_live::wire::{
//!     FunctionDeclaration, FunctionResponse, GenerationConfig, Modality, Setup, ToolSet,
//! };
//! use livetalk_live::{ApiVersion, Auth, ConnectOptions, Outbox, ServerEvent, connect};
//! use livetalk_mock::{MockOptions, MockServer};
//! use serde_json::json;
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let mock = MockServer::start(MockOptions::loopback()).await?;
//!     let mut connection = connect(ConnectOptions {
//!         endpoint: mock.endpoint(ApiVersion::V1),
//!         auth: Auth::None,
//!         setup: Setup {
//!             model: "models/gemini-3.8-live".into(),
//!             generation_config: Some(GenerationConfig {
//!                 response_modalities: vec![Modality::Text],
//!                 ..GenerationConfig::default()
//!             }),
//!             tools: vec![ToolSet {
//!                 function_declarations: vec![FunctionDeclaration {
//!                     name: "get_device_status".into(),
//!                     description: Some("Whether a device is on, and its settings.".into()),
//!                     ..FunctionDeclaration::default()
//!                 }],
//!                 ..ToolSet::default()
//!             }],
//!             ..Setup::default()
//!         },
//!         connect_timeout: Duration::from_secs(10),
//!     })
//!     .await?;
//!
//!     connection.handle.send_user_text("Is the living room lamp on?").await?;
//!     let mut reply = String::new();
//!     'reply: loop {
//!         let frame = tokio::time::timeout(Duration::from_secs(10), connection.inbound.recv())
//!             .await?
//!             .ok_or("the connection ended")?;
//!         // One frame of the server's; its message is `frame.message`, its events:
//!         for event in frame {
//!         match event {
//!             // Each call is answered once, with its own id and name.
//!             ServerEvent::ToolCall(calls) => {
//!                 let answers = calls
//!                     .into_iter()
//!                     .map(|call| FunctionResponse {
//!                         response: json!({"device_name": call.args["device_name"], "status": "off"}),
//!                         id: call.id,
//!                         name: call.name,
//!                         ..FunctionResponse::default()
//!                     })
//!                     .collect();
//!                 connection.handle.send_tool_responses(answers).await?;
//!             }
//!             ServerEvent::ModelText(text) => reply.push_str(&text),
//!             ServerEvent::TurnComplete { .. } => break 'reply,
//!             ServerEvent::Closed(close) => return Err(close.message.into()),
//!             _ => {}
//!         }
//!         }
//!     }
//!     assert_eq!(reply, "No, the living room lamp is currently off.");
//!     connection.handle.close().await;
//!     Ok(())
//! }
//! ```
//!
//! The crate's `examples/` run the same way: `text_turn` (a supervised session, a tool call
//! answered) and `voice_barge_in` (audio both ways, and speaking over the model).
//!
//! # Modules
//!
//! - [`wire`]: the Live API's messages as serde types, once, for client and server alike;
//!   [`codec`] puts them on the wire (canonical JSON out, [`lenient`] JSON in), [`reading`]
//!   says what one server message means (its kinds, turn signals, calls, usage, audio,
//!   grounding) in one place, and [`events`] turns what a server said into [`ServerEvent`]s.
//! - [`connection`]: one connection: the runner that dials under one deadline (DNS, TCP,
//!   the proxy's tunnel, TLS, the upgrade and the setup answer, the stage it stalled in
//!   named), through the [`network`]'s proxy and trust store, then runs a reader and a
//!   writer; [`client`] is the Live API's side of it, with how a connection authenticates
//!   ([`endpoint`]'s API key, or [`adc`]'s Vertex AI tokens).
//! - [`session`]: one conversation across connections: resumption, goAway hand-overs,
//!   reconnects with backoff, and one answer per tool call; [`reply`] judges whether a
//!   turn's reply is still coming.
//! - [`models`]: what differs between Live models; [`close`]: what close codes mean.
//! - [`redact`]: secrets kept out of every output; [`excerpt`]: bounded excerpts of what a
//!   peer sent; [`file`](mod@file): files named from outside, read with bounds; [`wav`]: model audio
//!   written to a WAV file.

#![deny(missing_docs)]

pub mod adc;
mod address;
pub mod budget;
pub mod client;
pub mod close;
pub mod codec;
pub mod connection;
mod dial;
pub mod endpoint;
pub mod events;
pub mod excerpt;
pub mod file;
pub mod lenient;
pub mod models;
pub mod network;
mod proxy;
pub mod reading;
pub mod redact;
pub mod reply;
pub mod session;
pub mod wav;
pub mod wire;

pub use client::{Auth, ConnectOptions, connect};
pub use connection::{ConnectError, Connection, ConnectionHandle, Outbox};
pub use endpoint::{ApiKey, ApiVersion, Endpoint};
pub use events::{CloseInfo, Inbound, ServerEvent};
pub use reading::{AudioPart, Reading};
