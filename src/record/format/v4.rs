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

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use livetalk_live::wire::{ClientMessage, FunctionCall};
use livetalk_live::{CloseInfo, ServerEvent};

use super::recv::recv_events;
use crate::app::Msg;
#[cfg(doc)]
use crate::record::Recording;
use crate::record::{Applied, AudioFiles, Line, Record};
use crate::tools::{ToolEvent, ToolOutcome, ToolStatus};

/// The messages a format-4 recording stands for, made from its lines one at a time as they
/// are read (a `recv` line can stand for several): how [`Recording::steps`] goes through it
/// without holding it. What is kept between lines is the calls not answered yet.
pub(in crate::record) struct Applying<L> {
    lines: L,
    /// Calls by id, with when they came, for the answers that follow.
    calls: HashMap<String, (f64, FunctionCall)>,
    /// What the line read last stands for, not handed out yet.
    ready: VecDeque<Applied>,
}

impl<L: Iterator<Item = Line>> Applying<L> {
    pub(in crate::record) fn new(lines: L) -> Self {
        Applying {
            lines,
            calls: HashMap::new(),
            ready: VecDeque::new(),
        }
    }

    /// The next message, its audio (if any) from `audio`; `None` at the end.
    pub(in crate::record) fn next(&mut self, audio: &mut AudioFiles) -> Option<Applied> {
        loop {
            if let Some(applied) = self.ready.pop_front() {
                return Some(applied);
            }
            let line = self.lines.next()?;
            self.read(line, audio);
        }
    }

    /// What one line stands for, into `ready`.
    fn read(&mut self, line: Line, audio: &mut AudioFiles) {
        let t = line.t;
        let ready = &mut self.ready;
        let mut apply = |msg: Msg| ready.push_back(Applied { t, msg });
        match line.record {
            Record::Recv {
                setup,
                message,
                skipped,
            } => {
                for event in recv_events(setup, message.as_ref(), skipped.as_deref(), audio) {
                    if let ServerEvent::ToolCall(list) = &event {
                        for call in list {
                            if let Some(id) = &call.id {
                                self.calls.insert(id.clone(), (t, call.clone()));
                            }
                        }
                    }
                    apply(Msg::Server(event));
                }
            }
            Record::Send { message } => {
                // A picture sent (kept in `frames/`) is shown as the app showed it.
                if let Some(shown) = crate::record::pictures::shown(&message, &audio.dir) {
                    apply(Msg::Image(shown));
                    return;
                }
                // Audio is in mic.wav (its `data` is a reference): such lines say nothing the
                // app applied.
                let Ok(message) = serde_json::from_value::<ClientMessage>(message) else {
                    return;
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
                            let called = answer.id.as_ref().and_then(|id| self.calls.remove(id));
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
            Record::Link { change } => apply(Msg::SessionChange(change.into())),
            Record::Ended {
                code,
                reason,
                message,
                initiated_by_client,
            } => {
                // Ended by its owner (the app left, a drain handed it on): as an app's own
                // end of the session is applied.
                if initiated_by_client {
                    apply(Msg::EndSession);
                }
                apply(Msg::Server(ServerEvent::Closed(CloseInfo {
                    code,
                    reason,
                    message,
                    initiated_by_client,
                })));
            }
            Record::Warning { message } => {
                apply(Msg::Server(ServerEvent::FrameSkipped { reason: message }))
            }
            _ => {}
        }
    }
}
