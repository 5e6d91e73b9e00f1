//! A recorded session's service side, served to whichever app connects
//! ([`MockServer::start_recorded`](crate::MockServer::start_recorded)): the setup answered as
//! recorded, the app's n-th turn answered with the frames the service sent for the recorded
//! n-th turn at their recorded pace, and the connection ended as the recorded one ended. What
//! the app sends that the recording does not hold (other text, another tool result, a turn too
//! many) is a [`Difference`]: reported, or with [`RecordedOptions::strict`] the connection's
//! end (1008, the difference as its reason).
//!
//! This crate knows nothing of how a session was recorded: whoever holds a recording (the
//! `livetalk` app reads its own recordings) builds a [`RecordedSession`] from it, in the Live
//! API's own terms.

mod serving;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use livetalk_live::wire::{ClientMessage, FunctionResponse};
use serde_json::Value;
use tokio_tungstenite::tungstenite::Bytes;

pub(crate) use serving::ServedConnection;

/// A recorded session's service side: the connections it went over, in order.
#[derive(Debug, Clone, Default)]
pub struct RecordedSession {
    /// Each connection the session went over, from its setup to its end.
    pub connections: Vec<Connection>,
}

/// One recorded connection: what answered its setup, its turns, how it ended.
#[derive(Debug, Clone, Default)]
pub struct Connection {
    /// The resumption handle its setup resumed with; an app whose setup names it is served
    /// this connection (every other app gets the first).
    pub resumed_with: Option<String>,
    /// What the service sent after the setup, before the app's first turn (`setupComplete`,
    /// a first `sessionResumptionUpdate`…), each timed from the setup.
    pub opening: Vec<Frame>,
    /// The app's turns, each with what answered it.
    pub turns: Vec<Turn>,
    /// How the connection ended, timed from the start of its last turn (from the setup when
    /// it had none).
    pub ending: Ending,
    /// When it ended, from the start of its last turn (or its setup).
    pub ended_after: Duration,
}

/// One frame the service sent: its JSON, and when, from the start of the turn it answers.
#[derive(Debug, Clone)]
pub struct Frame {
    /// From the start of its turn (the app's message that began it) to the frame.
    pub after: Duration,
    /// The frame as it goes on the wire (a server message's JSON; audio inline).
    pub payload: Bytes,
}

impl Frame {
    /// A frame of `message`'s JSON, `after` from the start of its turn.
    pub fn new(after: Duration, message: &Value) -> Frame {
        // The service sends pretty-printed JSON; so does the mock.
        let payload = serde_json::to_vec_pretty(message).unwrap_or_default();
        Frame {
            after,
            payload: Bytes::from(payload),
        }
    }
}

/// One turn of the app and what the service sent for it.
#[derive(Debug, Clone)]
pub struct Turn {
    /// What the app sent that began it.
    pub input: TurnInput,
    /// What the service sent for it, in order.
    pub frames: Vec<Frame>,
}

/// What begins a turn of the app: a typed turn, tool answers, or speech that ended.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnInput {
    /// A `clientContent` that completes the turn (its texts joined by newlines), or
    /// `realtimeInput.text`.
    Text(String),
    /// A `toolResponse`: its answers.
    ToolResponse(Vec<FunctionResponse>),
    /// Speech that ended: an `activityEnd`, the end of the mic stream, or the server's voice
    /// detection hearing the user stop.
    Spoken,
}

impl TurnInput {
    /// The turn a client message begins, if it begins one (audio alone does not: speech ends
    /// where voice detection says, which a recording's reader finds by the service's answer).
    pub fn of(message: &ClientMessage) -> Option<TurnInput> {
        match message {
            ClientMessage::ClientContent(content) if content.turn_complete != Some(false) => {
                let text: Vec<&str> = content.texts().collect();
                (!text.is_empty()).then(|| TurnInput::Text(text.join("\n")))
            }
            ClientMessage::RealtimeInput(input) => {
                if let Some(text) = input.text.as_deref().filter(|t| !t.trim().is_empty()) {
                    Some(TurnInput::Text(text.to_owned()))
                } else if input.activity_end.is_some() {
                    Some(TurnInput::Spoken)
                } else {
                    None
                }
            }
            ClientMessage::ToolResponse(response) => {
                Some(TurnInput::ToolResponse(response.function_responses.clone()))
            }
            _ => None,
        }
    }

    /// How it differs from `recorded`, in a few words (`None`: the same).
    fn differs_from(&self, recorded: &TurnInput) -> Option<String> {
        match (self, recorded) {
            (TurnInput::Text(sent), TurnInput::Text(held)) if sent != held => Some(format!(
                "the app sent the text {}, the recording has {}",
                quoted(sent),
                quoted(held)
            )),
            (TurnInput::ToolResponse(sent), TurnInput::ToolResponse(held)) => {
                answers_differ(sent, held)
            }
            (TurnInput::Spoken, TurnInput::Spoken) => None,
            (sent, held) if std::mem::discriminant(sent) != std::mem::discriminant(held) => {
                Some(format!(
                    "the app sent {}, the recording has {}",
                    sent.described(),
                    held.described()
                ))
            }
            _ => None,
        }
    }

    /// A few words for it.
    fn described(&self) -> String {
        match self {
            TurnInput::Text(text) => format!("the text {}", quoted(text)),
            TurnInput::ToolResponse(answers) => match answers.first() {
                Some(first) => format!(
                    "tool results ({} for {})",
                    answers.len(),
                    quoted(&first.name)
                ),
                None => "an empty tool response".to_owned(),
            },
            TurnInput::Spoken => "speech".to_owned(),
        }
    }
}

/// How the app's tool answers differ from the recorded ones (`None`: the same ids, names and
/// results, in any order).
fn answers_differ(sent: &[FunctionResponse], held: &[FunctionResponse]) -> Option<String> {
    for answer in sent {
        let Some(recorded) = held
            .iter()
            .find(|r| r.id == answer.id && r.name == answer.name)
        else {
            return Some(format!(
                "the app answered call {} ({}), which the recording does not answer here",
                quoted(answer.id.as_deref().unwrap_or("")),
                quoted(&answer.name)
            ));
        };
        if recorded.response != answer.response {
            // The call's id only where its name does not say which call it was.
            let which = if held.iter().filter(|r| r.name == answer.name).count() > 1 {
                format!(
                    "{} ({})",
                    quoted(&answer.name),
                    quoted(answer.id.as_deref().unwrap_or(""))
                )
            } else {
                quoted(&answer.name)
            };
            return Some(format!(
                "the app answered {which} with {}, the recording with {}",
                short_json(&answer.response),
                short_json(&recorded.response)
            ));
        }
    }
    held.iter()
        .find(|r| !sent.iter().any(|a| a.id == r.id && a.name == r.name))
        .map(|missing| {
            format!(
                "the app did not answer {} ({}), which the recording answers here",
                quoted(&missing.name),
                quoted(missing.id.as_deref().unwrap_or(""))
            )
        })
}

/// Text from the app or the recording as a difference line quotes it: one line, at most 40
/// characters, quoted with its control characters escaped, so it is safe on a terminal and
/// fits a close reason.
fn quoted(text: &str) -> String {
    format!("{:?}", livetalk_live::excerpt::one_line(text, 40))
}

/// A JSON value as a difference line shows it: at most 30 characters of its text (JSON
/// escapes control characters).
fn short_json(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= 30 {
        return text;
    }
    let mut cut: String = text.chars().take(29).collect();
    cut.push('…');
    cut
}

/// How a recorded connection ended.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Ending {
    /// The app closed it: the served connection waits for the app to close.
    #[default]
    ByApp,
    /// The service closed it with this code and reason.
    Closed {
        /// The close code.
        code: u16,
        /// The close reason.
        reason: String,
    },
    /// It was lost without a close frame: the served connection is dropped.
    Dropped,
}

/// What an app sent that the recording does not hold, on one served connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// The served connection, counted from 1 across the server's life.
    pub connection: u32,
    /// The turn of the recorded session, counted from 1.
    pub turn: usize,
    /// What differs, in a few words.
    pub what: String,
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "turn {}: {}", self.turn, self.what)
    }
}

/// Told of each difference, as it is found.
pub type DifferenceSink = Arc<dyn Fn(&Difference) + Send + Sync>;

/// How a recorded session is served.
#[derive(Clone)]
pub struct RecordedOptions {
    /// The recorded session.
    pub session: Arc<RecordedSession>,
    /// Close a connection at its first difference, with 1008 and the difference as the reason.
    pub strict: bool,
    /// Told of each difference (with `strict`, just before the connection closes).
    pub on_difference: DifferenceSink,
}

impl fmt::Debug for RecordedOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordedOptions")
            .field("connections", &self.session.connections.len())
            .field("strict", &self.strict)
            .finish_non_exhaustive()
    }
}

impl RecordedSession {
    /// The recorded connection an app's setup resumes: the one whose setup named `handle`,
    /// else the first: its index, and how many recorded turns came before it.
    pub(crate) fn connection_for(&self, handle: Option<&str>) -> Option<(usize, usize)> {
        let index = handle
            .and_then(|h| {
                self.connections
                    .iter()
                    .position(|c| c.resumed_with.as_deref() == Some(h))
            })
            .unwrap_or(0);
        self.connections.get(index)?;
        let before = self.connections[..index]
            .iter()
            .map(|c| c.turns.len())
            .sum();
        Some((index, before))
    }

    /// Bytes of frames it holds.
    pub fn size_bytes(&self) -> usize {
        self.connections
            .iter()
            .flat_map(|c| {
                c.opening
                    .iter()
                    .chain(c.turns.iter().flat_map(|t| &t.frames))
            })
            .map(|f| f.payload.len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(id: &str, name: &str, response: Value) -> FunctionResponse {
        FunctionResponse {
            id: Some(id.to_owned()),
            name: name.to_owned(),
            response,
            ..FunctionResponse::default()
        }
    }

    #[test]
    fn inputs_are_compared_exactly_and_said_safely() {
        let hi = TurnInput::Text("Hi".into());
        assert_eq!(hi.differs_from(&TurnInput::Text("Hi".into())), None);
        let other = TurnInput::Text("Hi\x1b[2J there".into())
            .differs_from(&hi)
            .unwrap();
        assert!(!other.contains('\x1b'), "{other}");
        assert!(other.contains(r#"the recording has "Hi""#), "{other}");
        let ok = json!({"ok": true});
        let sent = TurnInput::ToolResponse(vec![answer("c1", "lamp", json!({"ok": false}))]);
        let held = TurnInput::ToolResponse(vec![answer("c1", "lamp", ok.clone())]);
        let said = sent.differs_from(&held).unwrap();
        assert!(said.contains(r#"{"ok":false}"#), "{said}");
        assert_eq!(held.differs_from(&held), None);
        let missing = TurnInput::ToolResponse(vec![]).differs_from(&held).unwrap();
        assert!(missing.contains("did not answer"), "{missing}");
        let kind = hi.differs_from(&held).unwrap();
        assert!(kind.contains("tool results (1 for \"lamp\")"), "{kind}");
    }

    use serde_json::json;
}
