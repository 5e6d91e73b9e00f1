//! A `recv` line read back: the recorded server message, its audio put back from the WAV
//! file its references point into, decoded as the original frame was, and the session events
//! it produced in the original run: how the readers of formats 1, 2 and 4 take their `recv`
//! lines.

use base64::Engine as _;
use serde_json::Value;

use crate::record::{AudioFiles, AudioRef};
use livetalk_live::ServerEvent;
use livetalk_live::codec::{DecodedServerFrame, decode_server};
use livetalk_live::events::events_from;

/// Puts the audio back into a recorded server message (each `inlineData.data` that is an
/// [`AudioRef`] becomes base64 again), so it decodes like the original frame.
pub(in crate::record) fn inline_audio(message: &mut Value, audio: &mut AudioFiles) {
    let Some(parts) = message
        .pointer_mut("/serverContent/modelTurn/parts")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for part in parts {
        let Some(blob) = part.get_mut("inlineData").and_then(Value::as_object_mut) else {
            continue;
        };
        let Some(reference) = blob
            .get("data")
            .and_then(|d| serde_json::from_value::<AudioRef>(d.clone()).ok())
        else {
            continue;
        };
        let pcm = audio.samples(&reference);
        blob.insert(
            "data".to_owned(),
            Value::String(base64::engine::general_purpose::STANDARD.encode(pcm)),
        );
    }
}

/// The session events one `recv` line produced in the original run.
pub(in crate::record) fn recv_events(
    setup: bool,
    message: Option<&Value>,
    skipped: Option<&str>,
    audio: &mut AudioFiles,
) -> Vec<ServerEvent> {
    let decoded = message.and_then(|value| {
        let mut value = value.clone();
        inline_audio(&mut value, audio);
        let bytes = serde_json::to_vec(&value).ok()?;
        match decode_server(&bytes) {
            Ok(DecodedServerFrame::Message(message)) => Some(message),
            _ => None,
        }
    });
    if setup {
        // Before setupComplete the session only looks for setupComplete; the rest is dropped.
        return match decoded.and_then(|m| m.setup_complete) {
            Some(setup) => vec![ServerEvent::SetupComplete {
                session_id: setup.session_id,
            }],
            None => Vec::new(),
        };
    }
    match (decoded, skipped) {
        (Some(message), _) => events_from(message),
        (None, Some(reason)) => vec![ServerEvent::FrameSkipped {
            reason: reason.to_owned(),
        }],
        (None, None) => Vec::new(),
    }
}
