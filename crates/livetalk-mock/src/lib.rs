//! A mock Gemini Live API server to start in-process in any Rust test: it speaks the service's
//! wire protocol (and the official SDKs' variants of it) on a free loopback port, so a Live
//! client can be tested offline, with no API key.
//!
//! What it offers:
//!
//! - **The service's wire.** `setupComplete` first, pretty-printed JSON in binary frames, tool
//!   call ids like `function-call-<digits>`, replies as 24 kHz PCM16 speech (espeak-ng when it
//!   is installed, otherwise a synthetic voice) with transcription, `generationComplete`, then
//!   `turnComplete` with `usageMetadata`; barge-in with `interrupted` and
//!   `toolCallCancellation`. It reads camelCase and snake_case and both base64 alphabets, at
//!   the URL paths and key placements the official SDKs use ([`MockServer::endpoint`]).
//! - **A demo model.** It understands plain-English smart-home requests ("is the living room
//!   lamp on?", "dim it to 30%", "lock the front door", "what time is it?", "goodbye"), calls
//!   only the tools the client declared, phrases its reply from their results, errors
//!   included, and calls any declared tool by name ("call echo with message hi"). When the
//!   setup turns on Google Search (`googleSearch`), "search the web for …" gets a grounded
//!   reply with `groundingMetadata` naming two made-up sources; without it, the model says it
//!   cannot search.
//! - **Per-model behaviour**, from the table in `livetalk_live::models`: native-audio models
//!   refuse a TEXT modality, 3.1 and later refuse `mediaChunks` and report voice activity, 3.8
//!   Live has asynchronous turns, and retired models are not found.
//! - **Session resumption**: handles it issues restore the conversation, for the same key only.
//! - **Faults**: a [`Scenario`] of goAways, drops, closes, malformed frames, stalls, slow
//!   replies, cancellations and floods of tool calls, at chosen [`Moment`]s.
//! - **`wss://`** with a certificate of your own ([`TlsFiles`]), for clients that only dial TLS.
//!
//! [`MockServer::state`] counts what clients did (setups, resumptions, stray tool responses,
//! the tools each setup declared, whether it turned on Google Search, the pictures shown), for tests to assert on. [`ws_server`] is the accept loop and
//! connection ending the mock runs on, which other WebSocket servers can share.
//!
//! # Example
//!
//! Start the mock on a free port and hold one text turn with raw JSON frames (the
//! `raw_frames` example goes on to a tool call and its answer):
//!
//! ```
//! use std::time::Duration;
//!
//! use futures_util::{SinkExt, StreamExt};
//! use livetalk_mock::{MockOptions, MockServer};
//! use serde_json::{Value, json};
//! use tokio_tungstenite::tungstenite::Message;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Replies stream 50 times faster than they would be spoken.
//! let server = MockServer::start(MockOptions { speed: 50.0, ..MockOptions::loopback() }).await?;
//! let url = format!(
//!     "{}/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent",
//!     server.base_url()
//! );
//! let (mut socket, _) = tokio_tungstenite::connect_async(url).await?;
//! let setup = json!({"setup": {
//!     "model": "models/gemini-3.8-live",
//!     "generationConfig": {"responseModalities": ["TEXT"]}
//! }});
//! let turn = json!({"clientContent": {
//!     "turns": [{"role": "user", "parts": [{"text": "Hello!"}]}],
//!     "turnComplete": true
//! }});
//! socket.send(Message::text(setup.to_string())).await?;
//! socket.send(Message::text(turn.to_string())).await?;
//!
//! // The server's JSON comes in binary frames, as the service's does.
//! let mut reply = String::new();
//! tokio::time::timeout(Duration::from_secs(10), async {
//!     while let Some(Ok(frame)) = socket.next().await {
//!         let message: Value = serde_json::from_slice(&frame.into_data()).unwrap_or_default();
//!         let content = &message["serverContent"];
//!         for part in content["modelTurn"]["parts"].as_array().into_iter().flatten() {
//!             reply.push_str(part["text"].as_str().unwrap_or_default());
//!         }
//!         if content["turnComplete"] == json!(true) {
//!             break;
//!         }
//!     }
//! })
//! .await?;
//! assert!(reply.starts_with("Hello!"), "{reply}");
//! assert_eq!(server.connections(), 1);
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]
#![warn(missing_debug_implementations)]

mod connection;
pub mod far_end;
mod flavor;
mod model;
mod random;
pub mod recorded;
mod resumption;
mod scenario;
mod server;
mod state;
mod vad;
pub mod voice;
pub mod ws_server;

/// The service's per-model rules as the mock follows them: what it refuses, and how it closes.
pub mod rules {
    pub use crate::connection::{message_refusal, refusal};
}
pub use model::{DEMO_PROMPTS, SEARCH_PROMPT};
pub use recorded::{Difference, RecordedOptions, RecordedSession};

/// The demo model answers a picture at once unless it comes within this long of the picture
/// before it: then it is a frame of a stream (a screen shared at a frame a second), taken in
/// silently, and "what do you see?" is answered from the newest.
pub const PICTURE_STREAM_GAP: std::time::Duration = std::time::Duration::from_secs(10);
pub use scenario::{Fault, FaultAction, Moment, Scenario, ScenarioError};
pub use server::{
    MAX_SPEED, MIN_SPEED, MockOptions, MockServer, StartError, TlsFiles, tls_acceptor,
};
pub use state::{MockState, PICTURES_KEPT, PictureReceived};
