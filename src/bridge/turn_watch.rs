//! What a drain waits for before it closes an app's connection: the session between turns
//! (no turn of the user's or the model's under way, no call unanswered) with a resumption
//! handle that holds all of it, so the app resumes the conversation whole elsewhere.

use livetalk_live::ServerEvent;
use livetalk_live::reply::ReplyWatch;
use livetalk_live::wire::ClientMessage;

/// Whether the session is between turns, with a handle that holds all of it: what a drain
/// waits for before it closes the connection, so the app resumes the conversation whole.
#[derive(Debug, Default)]
pub(super) struct TurnWatch {
    /// The reply to the app's latest typed turn.
    reply: ReplyWatch,
    /// The model's turn is under way (something of it came, its `turnComplete` not yet).
    model_turn: bool,
    /// The service has given this session resumption handles.
    pub(super) handles: bool,
    /// The newest handle came after the last change to the conversation.
    handle_current: bool,
}

impl TurnWatch {
    /// What the app had sent upstream.
    pub(super) fn sent(&mut self, message: &ClientMessage) {
        match message {
            ClientMessage::ClientContent(content) => {
                if content.turn_complete != Some(false) {
                    self.reply.sent();
                }
                self.handle_current = false;
            }
            ClientMessage::ToolResponse(_) => {
                self.reply.continued();
                self.handle_current = false;
            }
            ClientMessage::ContextUpdate(_) | ClientMessage::Setup(_) => {
                self.handle_current = false
            }
            // Audio streams all the time; what it changes shows in the service's answer.
            ClientMessage::RealtimeInput(input) => {
                if input.text.is_some() {
                    self.handle_current = false;
                }
            }
        }
    }

    /// What the service said.
    pub(super) fn observe(&mut self, event: &ServerEvent) {
        self.reply.observe(event);
        match event {
            ServerEvent::ResumptionUpdate {
                handle: Some(handle),
                resumable: true,
            } if !handle.is_empty() => {
                self.handles = true;
                self.handle_current = true;
            }
            ServerEvent::ModelText(_)
            | ServerEvent::ModelAudio { .. }
            | ServerEvent::OutputTranscription { .. }
            | ServerEvent::GenerationComplete
            | ServerEvent::ToolCall(_)
            | ServerEvent::InputTranscription { .. }
            | ServerEvent::Interrupted
            | ServerEvent::VoiceActivity { speaking: true } => {
                self.model_turn = true;
                self.handle_current = false;
            }
            ServerEvent::TurnComplete { .. } => {
                self.model_turn = self.reply.model_busy();
                self.handle_current = false;
            }
            _ => {}
        }
    }

    /// The session moved to a new upstream connection: what the old one owed is not coming.
    pub(super) fn connection_replaced(&mut self) {
        self.reply.connection_replaced();
        self.model_turn = false;
    }

    /// A turn is under way: the user's or the model's, from its first sign to its end.
    pub(super) fn under_way(&self) -> bool {
        self.model_turn || self.reply.awaited()
    }

    /// No turn is under way and the newest handle holds everything (or the service gives
    /// none, so there is nothing to wait for).
    pub(super) fn between_turns(&self, calls_pending: bool) -> bool {
        !self.under_way() && !calls_pending && (self.handle_current || !self.handles)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use livetalk_live::wire::{ClientContent, FunctionCall, RealtimeInput, ToolResponse};

    fn handle(text: &str) -> ServerEvent {
        ServerEvent::ResumptionUpdate {
            handle: Some(text.into()),
            resumable: true,
        }
    }

    fn turn_complete() -> ServerEvent {
        ServerEvent::TurnComplete {
            reason: None,
            waiting_for_input: false,
        }
    }

    #[test]
    fn a_typed_turn_with_a_call_is_over_at_the_handle_after_its_end() {
        let mut watch = TurnWatch::default();
        assert!(
            watch.between_turns(false),
            "a session that never had a handle"
        );
        watch.observe(&handle("h0"));
        assert!(watch.between_turns(false));
        watch.sent(&ClientMessage::ClientContent(ClientContent::user_text(
            "hi",
        )));
        assert!(watch.under_way() && !watch.between_turns(false));
        watch.observe(&ServerEvent::ToolCall(vec![FunctionCall {
            id: Some("c".into()),
            name: "f".into(),
            args: serde_json::json!({}),
        }]));
        // Not resumable while the call is open, as the service says.
        watch.observe(&ServerEvent::ResumptionUpdate {
            handle: Some(String::new()),
            resumable: false,
        });
        watch.sent(&ClientMessage::ToolResponse(ToolResponse::default()));
        watch.observe(&ServerEvent::ModelText("The lamp is off.".into()));
        watch.observe(&turn_complete());
        assert!(!watch.under_way());
        assert!(
            !watch.between_turns(false),
            "the handle of before the turn would lose it"
        );
        watch.observe(&handle("h1"));
        assert!(watch.between_turns(false));
        assert!(!watch.between_turns(true), "a call still unanswered");
    }

    #[test]
    fn a_spoken_turn_is_under_way_from_the_first_sign_of_speech() {
        let mut watch = TurnWatch::default();
        watch.observe(&handle("h0"));
        // The microphone streams all the time: that alone is no turn.
        watch.sent(&ClientMessage::RealtimeInput(RealtimeInput::mic_audio(
            vec![0; 640],
        )));
        assert!(watch.between_turns(false));
        watch.observe(&ServerEvent::VoiceActivity { speaking: true });
        assert!(watch.under_way());
        watch.observe(&ServerEvent::VoiceActivity { speaking: false });
        watch.observe(&ServerEvent::ModelAudio {
            pcm: vec![0; 4],
            sample_rate: 24_000,
        });
        watch.observe(&ServerEvent::Interrupted);
        watch.observe(&turn_complete());
        watch.observe(&handle("h1"));
        assert!(watch.between_turns(false));
        // A lost connection's turn does not hold the drain on the new one.
        watch.observe(&ServerEvent::ModelText("half".into()));
        watch.connection_replaced();
        watch.observe(&handle("h2"));
        assert!(watch.between_turns(false));
    }
}
