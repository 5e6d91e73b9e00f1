//! The Live API: wire types, frame codec, connection and session, close-code meanings.

pub mod codec;
pub mod lenient;
pub mod wire;
