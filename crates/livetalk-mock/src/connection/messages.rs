//! The frames a connection sends, as it queues them: a server message, or raw bytes a fault
//! wants on the wire, and shorthands for the messages it sends from more than one place.

use livetalk_live::wire::{ServerContent, ServerMessage, SessionResumptionUpdate};
use tokio_tungstenite::tungstenite::Message;

/// A frame to send: a server message, or raw bytes a fault wants on the wire.
pub(super) enum Outgoing {
    Message(Box<ServerMessage>),
    Frame(Message),
}

/// A `serverContent` message.
pub(super) fn server_content(content: ServerContent) -> ServerMessage {
    ServerMessage {
        server_content: Some(content),
        ..ServerMessage::default()
    }
}

/// A `sessionResumptionUpdate`: a new handle, or none (`Some("")`, as the service sends it
/// while calls are open).
pub(super) fn resumption_update(new_handle: Option<String>, resumable: bool) -> ServerMessage {
    ServerMessage {
        session_resumption_update: Some(SessionResumptionUpdate {
            new_handle,
            resumable: Some(resumable),
            ..SessionResumptionUpdate::default()
        }),
        ..ServerMessage::default()
    }
}
