//! The Live API: wire types, frame codec, connection and session, close-code meanings, and
//! the supervisor that keeps a conversation alive across connections.

pub mod adc;
pub mod close;
pub mod codec;
pub mod connection;
pub mod dial;
pub mod endpoint;
pub mod events;
pub mod lenient;
pub mod models;
pub mod network;
pub mod proxy;
pub mod reconnect;
pub mod reply;
pub mod session;
pub mod wire;

pub use endpoint::{ApiKey, ApiVersion, Endpoint};
pub use events::{CloseInfo, SessionEvent};
pub use session::{Auth, Session, SessionError, SessionHandle, SessionOptions, connect};
