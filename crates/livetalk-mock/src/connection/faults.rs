//! The frames scenario faults put on the wire in place of the service's messages: truncated
//! JSON, a message no client knows, a huge audio chunk, bytes that are not UTF-8, raw text,
//! and JSON nested deeper than any parser should follow.

use livetalk_live::wire::{Blob, Content, OUTPUT_AUDIO_MIME, Part, ServerContent};
use tokio_tungstenite::tungstenite::Message;

use super::messages::{Outgoing, server_content};
use crate::random::XorShift;
use crate::scenario::FaultAction;

/// The frame a fault sends, for the actions that only send one; `seed` makes garbage of this
/// connection's own.
pub(super) fn fault_frame(action: &FaultAction, seed: u64) -> Option<Outgoing> {
    let frame = match action {
        FaultAction::MalformedJson => Outgoing::Frame(Message::text(
            "{\"serverContent\": {\"modelTurn\": {\"parts\": [",
        )),
        FaultAction::UnknownMessage => Outgoing::Frame(Message::text(
            "{\"mockSurprise\": {\"note\": \"a message type no client knows\"}}",
        )),
        FaultAction::HugeMessage { bytes } => {
            // Base64 grows the audio by 4/3, so this much silence makes a frame that big.
            let silence = vec![0u8; bytes / 4 * 3 / 2 * 2];
            Outgoing::Message(Box::new(server_content(ServerContent {
                model_turn: Some(Content {
                    role: None,
                    parts: vec![Part {
                        inline_data: Some(Blob {
                            mime_type: OUTPUT_AUDIO_MIME.to_owned(),
                            data: silence,
                        }),
                        ..Part::default()
                    }],
                }),
                ..ServerContent::default()
            })))
        }
        FaultAction::Garbage { bytes } => {
            let mut rng = XorShift::new(seed);
            let garbage: Vec<u8> = std::iter::once(0xff)
                .chain((1..(*bytes).max(1)).map(|_| (rng.next_u64() >> 24) as u8))
                .collect();
            Outgoing::Frame(Message::binary(garbage))
        }
        FaultAction::Raw { text } => Outgoing::Frame(Message::text(text.clone())),
        FaultAction::DeepJson { depth } => {
            let text = format!(
                "{{\"serverContent\": {{\"modelTurn\": {{\"parts\": [{{\"text\": \"deep\", \"x\": {}{}}}]}}}}}}",
                "[".repeat(*depth),
                "]".repeat(*depth)
            );
            Outgoing::Frame(Message::text(text))
        }
        _ => return None,
    };
    Some(frame)
}
