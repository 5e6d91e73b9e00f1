//! Where the reply to the user's latest turn stands, judged from the server's events in the
//! order they arrive: one state machine for the app (is a reply still coming?) and the
//! reconnect supervisor (must the turn be sent again on a new connection?).
//!
//! The subtle part is a turn sent while the model's previous turn is still streaming: the
//! rest of that old turn (and its `interrupted` / `turnComplete`) arrives before anything of
//! the reply, and must not be taken for it. Both sides judge "still streaming" from the
//! events they have seen, so they agree on which events belong to which turn.
//!
//! On models with asynchronous turns (3.8 Live), `turnComplete` no longer means the model is
//! done: `serverContent.interactionStatus` says `IN_PROGRESS` (tool calls or speech follow)
//! until `IDLE`. A reply then ends at `IDLE`, or at a `turnComplete` that is not marked in
//! progress; models that never send the status end replies at `turnComplete` as before.

use super::ServerEvent;

/// The reply to the latest user turn, from "sent" to "over", and the model's own turn as the
/// events show it (to tell the rest of an older turn from the reply).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReplyWatch {
    reply: Reply,
    model_turn: ModelTurn,
    /// The service said the interaction is in progress and has not said `IDLE` since.
    busy: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Reply {
    /// No user turn awaits a reply.
    #[default]
    Idle,
    /// The turn went out while the model's previous turn was open; the rest of that turn
    /// comes first.
    BehindOldTurn,
    /// The previous turn was interrupted; its `turnComplete` may still follow.
    AfterInterrupt,
    /// Nothing of the reply has arrived yet.
    Waiting,
    /// Only tool calls of the reply have arrived (and perhaps been answered): nothing the user
    /// saw or heard, and work a lost connection takes with it.
    Working,
    /// The reply is arriving: the model speaks or writes.
    Started,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum ModelTurn {
    #[default]
    Ended,
    Open,
    /// Cut off by `interrupted`; a `turnComplete` may still close it.
    Interrupted,
}

impl ReplyWatch {
    /// A user turn was sent.
    pub fn sent(&mut self) {
        self.reply = match self.model_turn {
            ModelTurn::Open => Reply::BehindOldTurn,
            ModelTurn::Interrupted => Reply::AfterInterrupt,
            ModelTurn::Ended => Reply::Waiting,
        };
    }

    /// A tool answer was sent: the model's turn goes on, so a reply is under way.
    pub fn continued(&mut self) {
        if self.reply == Reply::Idle {
            self.reply = Reply::Started;
        }
    }

    /// Nothing is awaited any more (the session ended).
    pub fn forget(&mut self) {
        *self = ReplyWatch::default();
    }

    /// A reply is still to come (nothing of it yet, or part of it).
    pub fn awaited(self) -> bool {
        self.reply != Reply::Idle
    }

    /// Something of the reply has arrived (tool calls included).
    pub fn started(self) -> bool {
        matches!(self.reply, Reply::Working | Reply::Started)
    }

    /// Nothing of the reply has arrived: a lost connection must send the turn again.
    pub fn unanswered(self) -> bool {
        self.awaited() && !self.started()
    }

    /// Only tool calls of the reply have arrived: a lost connection loses the model's work on
    /// the turn, and only a resumed session can take the turn again without losing its place.
    pub fn only_tool_work(self) -> bool {
        self.reply == Reply::Working
    }

    /// The model is still working on the interaction after a `turnComplete` (it said
    /// `IN_PROGRESS` and not yet `IDLE`).
    pub fn model_busy(self) -> bool {
        self.busy
    }

    /// Moves on by one server event.
    pub fn observe(&mut self, event: &ServerEvent) {
        use Reply::*;
        let work = matches!(event, ServerEvent::ToolCall(_));
        let speech = matches!(
            event,
            ServerEvent::ModelText(_)
                | ServerEvent::ModelAudio { .. }
                | ServerEvent::OutputTranscription { .. }
                | ServerEvent::GenerationComplete
        );
        let content = work || speech;
        let interrupted = matches!(event, ServerEvent::Interrupted);
        let turn_complete = matches!(event, ServerEvent::TurnComplete { .. });
        if let ServerEvent::Interaction { idle } = event {
            self.busy = !idle;
            // The interaction is over: so is a reply that had started. The model's turn is
            // not, until its turnComplete (which comes beside an IDLE, after it): a user turn
            // sent in between must not take that turnComplete for its reply's.
            if *idle && self.reply == Started {
                self.reply = Idle;
            }
            return;
        }
        let ends_reply = turn_complete && !self.busy;
        self.reply = match self.reply {
            Idle => Idle,
            BehindOldTurn if interrupted => AfterInterrupt,
            BehindOldTurn | AfterInterrupt if turn_complete => Waiting,
            BehindOldTurn => BehindOldTurn,
            AfterInterrupt | Waiting | Working | Started if speech => Started,
            AfterInterrupt | Waiting | Working if work => Working,
            // The reply ended, whole or cut short.
            Waiting | Working | Started if ends_reply => Idle,
            Working | Started if interrupted => Idle,
            state => state,
        };
        self.model_turn = match self.model_turn {
            _ if content => ModelTurn::Open,
            _ if turn_complete => ModelTurn::Ended,
            ModelTurn::Open if interrupted => ModelTurn::Interrupted,
            state => state,
        };
    }

    /// The connection was replaced. A reply that had started is cut off for good; one that
    /// had not is still coming, because the turn is sent again on the new connection (and
    /// whatever was left of an older turn died with the old one).
    pub fn connection_replaced(&mut self) {
        self.reply = match self.reply {
            Reply::Idle | Reply::Started => Reply::Idle,
            _ => Reply::Waiting,
        };
        self.model_turn = ModelTurn::Ended;
        self.busy = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text() -> ServerEvent {
        ServerEvent::ModelText("x".into())
    }

    fn turn_complete() -> ServerEvent {
        ServerEvent::TurnComplete {
            reason: None,
            waiting_for_input: false,
        }
    }

    fn run(mut watch: ReplyWatch, events: &[ServerEvent]) -> ReplyWatch {
        for event in events {
            watch.observe(event);
        }
        watch
    }

    /// The watch after `before`, then a user turn.
    fn sent_after(before: &[ServerEvent]) -> ReplyWatch {
        let mut watch = run(ReplyWatch::default(), before);
        watch.sent();
        watch
    }

    #[test]
    fn a_turn_sent_between_turns_is_answered_by_the_next_content() {
        let watch = sent_after(&[text(), turn_complete()]);
        assert!(watch.unanswered());
        assert!(run(watch, &[text()]).started());
        assert!(!run(watch, &[text(), turn_complete()]).awaited());
        // An empty reply is a reply too.
        assert!(!run(watch, &[turn_complete()]).awaited());
    }

    #[test]
    fn a_reply_of_tool_calls_only_is_work_a_lost_connection_takes_with_it() {
        let call = ServerEvent::ToolCall(Vec::new());
        let watch = sent_after(&[]);
        let working = run(watch, std::slice::from_ref(&call));
        assert!(working.only_tool_work() && working.started() && working.awaited());
        // More calls: still only work; then the model speaks: the reply is under way.
        assert!(run(working, &[call.clone(), call.clone()]).only_tool_work());
        let speaking = run(working, &[text()]);
        assert!(speaking.started() && !speaking.only_tool_work());
        assert!(!run(speaking, std::slice::from_ref(&call)).only_tool_work());
        // A turn of tool calls only ends like any other.
        assert!(!run(working, &[turn_complete()]).awaited());
        // A lost connection: the turn goes again, so the reply is awaited afresh.
        let mut replaced = working;
        replaced.connection_replaced();
        assert!(replaced.unanswered());
    }

    #[test]
    fn the_rest_of_an_older_turn_is_not_taken_for_the_reply() {
        let watch = sent_after(&[text()]);
        // The old turn streams on, is interrupted, and ends: still unanswered.
        let after = run(
            watch,
            &[text(), text(), ServerEvent::Interrupted, turn_complete()],
        );
        assert!(after.unanswered());
        // Or it ends without an interruption.
        assert!(run(watch, &[text(), turn_complete()]).unanswered());
        // Interrupted without a turnComplete: the next content is the reply.
        assert!(run(watch, &[ServerEvent::Interrupted, text()]).started());
        assert!(run(watch, &[ServerEvent::Interrupted, turn_complete(), text()]).started());
    }

    #[test]
    fn a_turn_sent_after_an_interruption_waits_for_the_interrupted_turns_end() {
        // The reply to an earlier turn was interrupted; its turnComplete is still to come.
        let watch = sent_after(&[text(), ServerEvent::Interrupted]);
        assert!(run(watch, &[turn_complete()]).unanswered());
        assert!(!run(watch, &[turn_complete(), text(), turn_complete()]).awaited());
    }

    #[test]
    fn a_lost_connection_keeps_an_unanswered_turn_and_ends_a_started_reply() {
        for (before, during, awaited_after) in [
            (vec![], vec![], true),
            (vec![text()], vec![text()], true),
            (vec![], vec![text()], false),
        ] {
            let mut watch = run(sent_after(&before), &during);
            watch.connection_replaced();
            assert_eq!(watch.awaited(), awaited_after, "{before:?} then {during:?}");
            assert!(!watch.started());
        }
        let mut idle = ReplyWatch::default();
        idle.connection_replaced();
        assert!(!idle.awaited());
    }

    #[test]
    fn a_tool_answer_continues_the_turn() {
        let mut watch = run(ReplyWatch::default(), &[ServerEvent::ToolCall(vec![])]);
        watch.continued();
        assert!(watch.started());
        assert!(!run(watch, &[text(), turn_complete()]).awaited());
    }

    #[test]
    fn on_asynchronous_turns_the_reply_ends_at_idle_not_at_turn_complete() {
        let in_progress = ServerEvent::Interaction { idle: false };
        let idle = ServerEvent::Interaction { idle: true };
        let call = ServerEvent::ToolCall(vec![]);
        let watch = sent_after(&[]);
        // A spoken acknowledgement, then turnComplete marked in progress: not over.
        let mid = run(watch, &[text(), in_progress.clone(), turn_complete()]);
        assert!(mid.awaited() && mid.started() && mid.model_busy());
        // A tool call and the rest of the reply after it; still not over.
        let later = run(mid, &[call, text()]);
        assert!(later.awaited());
        // IDLE beside the last turnComplete ends it.
        let over = run(later, &[idle.clone(), turn_complete()]);
        assert!(!over.awaited() && !over.model_busy());
        // IDLE on its own ends it too.
        assert!(!run(later, std::slice::from_ref(&idle)).awaited());
        // An empty reply: IDLE and turnComplete together.
        assert!(!run(watch, &[idle.clone(), turn_complete()]).awaited());
        // An IDLE of an earlier interaction does not end a reply that has not begun.
        assert!(run(watch, std::slice::from_ref(&idle)).unanswered());
        // A turn sent between an IDLE and the turnComplete beside it is not answered by it.
        let mut between = run(
            sent_after(&[]),
            &[text(), ServerEvent::Interrupted, idle.clone()],
        );
        between.sent();
        assert!(run(between, &[turn_complete()]).unanswered());
        let mut between = run(sent_after(&[]), &[text(), idle.clone()]);
        between.sent();
        assert!(run(between, &[turn_complete()]).unanswered());
        // A lost connection forgets the interaction.
        let mut replaced = mid;
        replaced.connection_replaced();
        assert!(!replaced.model_busy());
    }

    #[test]
    fn events_that_say_nothing_of_the_reply_change_nothing() {
        for watch in [
            sent_after(&[]),
            sent_after(&[text()]),
            run(sent_after(&[]), &[text()]),
        ] {
            let events = [
                ServerEvent::GoAway { time_left: None },
                ServerEvent::ResumptionUpdate {
                    handle: None,
                    resumable: false,
                },
                ServerEvent::VoiceActivity { speaking: true },
            ];
            assert_eq!(run(watch, &events), watch);
        }
    }
}
