//! The Live API: wire types, frame codec, connection and session, close-code meanings.

pub mod close;
pub mod codec;
pub mod endpoint;
pub mod events;
pub mod lenient;
pub mod session;
pub mod wire;

pub use endpoint::{ApiKey, ApiVersion, Endpoint};
pub use events::{CloseInfo, SessionEvent};
pub use session::{Session, SessionError, SessionHandle, SessionOptions, connect};
