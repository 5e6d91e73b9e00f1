//! Format 4 read back: a recording of the wire alone (written by
//! [`WireRecorder`](crate::record::WireRecorder)) as the messages an app would have applied,
//! so `replay`, `inspect` and `check` take it like any other. Its lines are format 3's wire
//! tap (`connect`, `send`, `recv`, `close`) and three kinds of its own, in
//! [`v3::Record`](super::v3::Record): `link`, `ended` and `warning`.
//!
//! What the frames say becomes the app's messages in the order they went: each `recv` line's
//! events; a typed turn sent (`clientContent` that completes the turn) as the user's text; each
//! tool answer sent as the call's result (its arguments from the `toolCall` it answers, its
//! duration from that call to the answer); a `link` line as the session's news, `ended` as its
//! close (after the app's own end of the session, when its owner ended it), a `warning` as a
//! warning notice.

use std::collections::HashMap;
use std::time::Duration;

use livetalk_live::wire::{ClientMessage, FunctionCall};
use livetalk_live::{CloseInfo, ServerEvent};

use super::recv::recv_events;
use crate::app::Msg;
use crate::record::{Applied, AudioFiles, Record, Recording};
use crate::tools::{ToolEvent, ToolOutcome, ToolStatus};

/// The messages a format-4 recording stands for, with warnings (audio missing from a WAV file
/// cut short).
pub fn applied(recording: &Recording) -> (Vec<Applied>, Vec<String>) {
    let mut audio = AudioFiles::new(&recording.dir);
    // Calls by id, with when they came, for the answers that follow.
    let mut calls: HashMap<String, (f64, FunctionCall)> = HashMap::new();
    let mut out = Vec::new();
    for line in &recording.lines {
        let t = line.t;
        let mut apply = |msg: Msg| out.push(Applied { t, msg });
        match &line.record {
            Record::Recv {
                setup,
                message,
                skipped,
            } => {
                for event in recv_events(*setup, message.as_ref(), skipped.as_deref(), &mut audio) {
                    if let ServerEvent::ToolCall(list) = &event {
                        for call in list {
                            if let Some(id) = &call.id {
                                calls.insert(id.clone(), (t, call.clone()));
                            }
                        }
                    }
                    apply(Msg::Server(event));
                }
            }
            Record::Send { message } => {
                // Audio is in mic.wav (its `data` is a reference): such lines say nothing the
                // app applied.
                let Ok(message) = serde_json::from_value::<ClientMessage>(message.clone()) else {
                    continue;
                };
                match message {
                    ClientMessage::ClientContent(content)
                        if content.turn_complete != Some(false) =>
                    {
                        let text: Vec<&str> = content.texts().collect();
                        if !text.is_empty() {
                            apply(Msg::UserText(text.join("\n")));
                        }
                    }
                    ClientMessage::ToolResponse(response) => {
                        for answer in response.function_responses {
                            let called = answer.id.as_ref().and_then(|id| calls.remove(id));
                            let (duration, args) = match called {
                                Some((at, call)) => (
                                    Duration::try_from_secs_f64(t - at).unwrap_or_default(),
                                    call.args,
                                ),
                                None => (Duration::ZERO, serde_json::Value::Null),
                            };
                            let status = match answer.response.get("error") {
                                Some(error) => ToolStatus::Error(match error.as_str() {
                                    Some(text) => text.to_owned(),
                                    None => error.to_string(),
                                }),
                                None => ToolStatus::Ok,
                            };
                            apply(Msg::Tool(ToolEvent::Finished(ToolOutcome {
                                key: None,
                                id: answer.id.clone(),
                                name: answer.name.clone(),
                                args,
                                status,
                                response: answer,
                                duration,
                                truncated: false,
                                unasked: None,
                            })));
                        }
                    }
                    _ => {}
                }
            }
            Record::Link { change } => apply(Msg::SessionChange(change.clone().into())),
            Record::Ended {
                code,
                reason,
                message,
                initiated_by_client,
            } => {
                // Ended by its owner (the app left, a drain handed it on): as an app's own
                // end of the session is applied.
                if *initiated_by_client {
                    apply(Msg::EndSession);
                }
                apply(Msg::Server(ServerEvent::Closed(CloseInfo {
                    code: *code,
                    reason: reason.clone(),
                    message: message.clone(),
                    initiated_by_client: *initiated_by_client,
                })));
            }
            Record::Warning { message } => apply(Msg::Server(ServerEvent::FrameSkipped {
                reason: message.clone(),
            })),
            _ => {}
        }
    }
    (out, audio.warnings(&recording.dir))
}
