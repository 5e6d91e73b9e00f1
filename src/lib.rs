//! livetalk: a terminal voice console for the Gemini Live API.

pub mod live;
pub mod mock;
pub mod tools;
