//! The session as the app sees it: whether it has a connection, what the server said
//! (applied to the transcript, the floor, the tools and the figures) and how the session moved
//! between connections.

use super::{
    App, Effect, Entry, Floor, ModelTurnStatus, NoticeLevel, SessionEffect, ToolCallRecord,
    ToolEffect, ToolState,
};
use crate::tools::{CallKey, KeyedCall};
use livetalk_live::ServerEvent;
use livetalk_live::excerpt::{self, bounded};
use livetalk_live::session::SessionChange;

/// Whether the session has a connection, as the status line shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectionState {
    Connecting,
    Connected,
    Reconnecting,
    Disconnected { reason: String },
}

/// Where the conversation stands, as the status badge (and anything else that names the
/// state) says it. One word per state, and never one the link contradicts: while there is no
/// connection the badge says so, whatever the floor was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Badge {
    Connecting,
    Listening,
    /// A turn was sent and nothing of the reply has arrived yet.
    Thinking,
    Speaking,
    /// Tool calls run, or the model goes on with the interaction after its turn (3.8 Live).
    Working,
    Reconnecting,
    Disconnected,
    /// The session was ended on purpose (`end_session`, the end of input).
    Ended,
}

impl Badge {
    /// The badge's words, after its symbol.
    pub fn label(self) -> &'static str {
        match self {
            Badge::Connecting => "Connecting…",
            Badge::Listening => "Gemini is listening…",
            Badge::Thinking => "Gemini is thinking…",
            Badge::Speaking => "Gemini is speaking…",
            Badge::Working => "Gemini is working…",
            Badge::Reconnecting => "Reconnecting…",
            Badge::Disconnected => "Disconnected",
            Badge::Ended => "Session ended",
        }
    }

    /// A short word for the state, for lines and JSON.
    pub fn word(self) -> &'static str {
        match self {
            Badge::Connecting => "connecting",
            Badge::Listening => "listening",
            Badge::Thinking => "thinking",
            Badge::Speaking => "speaking",
            Badge::Working => "working",
            Badge::Reconnecting => "reconnecting",
            Badge::Disconnected => "disconnected",
            Badge::Ended => "ended",
        }
    }
}

impl App {
    pub fn connection(&self) -> &ConnectionState {
        &self.connection
    }

    /// What the status badge says now.
    pub fn badge(&self) -> Badge {
        match &self.connection {
            ConnectionState::Connecting => Badge::Connecting,
            ConnectionState::Reconnecting => Badge::Reconnecting,
            ConnectionState::Disconnected { .. } if self.ended_cleanly() => Badge::Ended,
            ConnectionState::Disconnected { .. } => Badge::Disconnected,
            ConnectionState::Connected if self.floor == Floor::Speaking => Badge::Speaking,
            ConnectionState::Connected if self.model_working() || self.running_tools() > 0 => {
                Badge::Working
            }
            // Sent, or tools answered, and nothing of what follows has come yet.
            ConnectionState::Connected
                if self.reply.unanswered() || self.reply.only_tool_work() =>
            {
                Badge::Thinking
            }
            ConnectionState::Connected => Badge::Listening,
        }
    }

    /// True when the model has finished with the last input and no tool call is running.
    pub fn ready_for_user(&self) -> bool {
        self.connection == ConnectionState::Connected
            && !self.reply.awaited()
            && self.running_tools() == 0
            && !self.audio.playing_out
            && !self.model_turn_streaming()
            && !self.image_pending
    }

    /// True once the session is over (closed by us or lost).
    pub fn is_finished(&self) -> bool {
        matches!(self.connection, ConnectionState::Disconnected { .. })
    }

    /// User turns lost with a connection and not sent again (see `SessionChange::TurnLost`).
    pub fn turns_lost(&self) -> u32 {
        self.turns_lost
    }

    /// True when the session ended because we closed it (end of input or `end_session`).
    pub fn ended_cleanly(&self) -> bool {
        self.closing && self.is_finished()
    }

    /// True when the connection was lost for good and the user may ask to retry.
    pub fn can_retry(&self) -> bool {
        self.is_finished() && !self.closing
    }

    /// The model said `IN_PROGRESS` after its `turnComplete` and has not said `IDLE` yet: it
    /// is still working on the interaction (3.8 Live), though nothing streams right now.
    pub fn model_working(&self) -> bool {
        self.reply.model_busy() && self.connection == ConnectionState::Connected
    }

    /// After `end_session`, the session closes once the goodbye turn is over: its
    /// `turnComplete`, or on models with asynchronous turns its `IDLE`.
    pub(super) fn end_if_asked(&mut self) -> Vec<Effect> {
        if self.end_after_turn
            && !self.closing
            && self.running_tools() == 0
            && !self.reply.model_busy()
        {
            self.closing = true;
            return vec![Effect::Session(SessionEffect::CloseSession)];
        }
        Vec::new()
    }

    /// `arrived_at`: when a replayed event arrived in the original run (else it is now).
    /// The reply's searches and sources, read as the service's message is read; kept with the
    /// reply they ground (after a barge-in, the rest of the turn is dropped).
    fn on_grounding(&mut self, metadata: &serde_json::Value) -> Vec<Effect> {
        let found = livetalk_live::reading::Grounding::of(metadata);
        if !found.is_empty() && !self.audio.discard_turn && !self.closing {
            self.open_grounding().absorb(found);
        }
        Vec::new()
    }

    pub(super) fn on_session(
        &mut self,
        event: ServerEvent,
        arrived_at: Option<jiff::civil::Time>,
    ) -> Vec<Effect> {
        self.reply.observe(&event);
        self.note_clip_speech(&event);
        match event {
            ServerEvent::SetupComplete { .. } => {
                self.connection = ConnectionState::Connected;
                self.floor = Floor::Listening;
                self.share_video_at_start()
            }
            // Normal replies come in parts of a few words; a part past `excerpt::TEXT` is not
            // a reply, and is cut so no screen or line has to hold it.
            ServerEvent::ModelText(text) => {
                if !self.audio.discard_turn && !self.closing {
                    self.wire_speaking();
                    super::transcript::append_bounded(
                        self.open_model_entry().0,
                        &bounded(&text, excerpt::TEXT),
                    );
                }
                Vec::new()
            }
            ServerEvent::OutputTranscription { text, .. } => {
                if !self.audio.discard_turn && !self.closing {
                    self.wire_speaking();
                    super::transcript::append_bounded(
                        self.open_model_entry().1,
                        &bounded(&text, excerpt::TEXT),
                    );
                }
                Vec::new()
            }
            ServerEvent::ModelAudio { pcm, .. } => self.on_model_audio(pcm),
            ServerEvent::InputTranscription { text, .. } => {
                self.append_user_speech(&bounded(&text, excerpt::TEXT));
                Vec::new()
            }
            ServerEvent::GenerationComplete => Vec::new(),
            ServerEvent::Interrupted => {
                // Only the service's interruption can be Gemini hearing itself: a local
                // barge-in has already finished the entry (and silenced the speaker). The
                // verdict comes from the audio worker once it has silenced the speaker: by
                // then it has seen every mic frame that could have made the service interrupt.
                let heard = self.audio.audible;
                let echo = self.audio.echo_suspected();
                let index = self.streaming_model_entry();
                if index.is_some() {
                    self.figures.on_server_interruption();
                }
                if let Some(Entry::Model { echo_suspected, .. }) =
                    self.finish_model_entry(ModelTurnStatus::Interrupted)
                {
                    *echo_suspected = echo;
                }
                self.echo_check = index.filter(|_| heard && !echo);
                self.floor = Floor::Listening;
                self.end_model_audio(true)
            }
            ServerEvent::TurnComplete { .. } => {
                self.finish_model_entry(ModelTurnStatus::Complete);
                // With a speaker, Gemini speaks until the last sample has been heard.
                if !(self.audio.playback_drives_speaking() && self.audio.audible) {
                    self.floor = Floor::Listening;
                }
                let mut effects = self.end_model_audio(false);
                effects.extend(self.end_if_asked());
                effects
            }
            // The reply watch has it; a goodbye turn may have been waiting for it.
            ServerEvent::Interaction { .. } => self.end_if_asked(),
            ServerEvent::ToolCall(calls) => {
                self.fold_user_speech();
                let started_at = arrived_at.unwrap_or_else(self.clock);
                let mut keyed = Vec::with_capacity(calls.len());
                for call in calls {
                    let index = self.tool_calls.len();
                    self.tool_calls.push(ToolCallRecord {
                        id: call.id.clone(),
                        name: call.name.clone(),
                        args: call.args.clone(),
                        state: ToolState::Running,
                        duration: None,
                        response: None,
                        truncated: false,
                        started_at,
                        slow: false,
                        progress: None,
                        edited_from: None,
                        unasked: None,
                    });
                    self.transcript.push(Entry::Tool(index));
                    keyed.push(KeyedCall {
                        key: CallKey(index as u64),
                        call,
                    });
                }
                vec![Effect::Tools(ToolEffect::RunTools(keyed))]
            }
            ServerEvent::ToolCallCancelled(ids) => {
                // Remembered because the call may finish before the cancel reaches it.
                self.withdrawn_calls.extend(ids.iter().cloned());
                vec![Effect::Tools(ToolEffect::CancelTools(ids))]
            }
            ServerEvent::GoAway { time_left } => {
                self.figures.on_go_away(time_left);
                let when = time_left
                    .map(|t| format!(" in {:.0} s", t.as_secs_f64()))
                    .unwrap_or_default();
                self.notice(
                    NoticeLevel::Warning,
                    format!("The server will end this connection{when} (goAway)."),
                );
                Vec::new()
            }
            ServerEvent::ResumptionUpdate { handle, .. } => {
                if handle.is_some() {
                    self.figures.on_handle();
                }
                Vec::new()
            }
            ServerEvent::Usage(usage) => {
                // The one count of the session's tokens every place shows.
                self.figures.on_usage(&usage);
                self.last_usage = Some(usage);
                Vec::new()
            }
            ServerEvent::VoiceActivity { .. } => Vec::new(),
            ServerEvent::Grounding(metadata) => self.on_grounding(&metadata),
            ServerEvent::FrameSkipped { reason } => {
                self.notice(NoticeLevel::Warning, reason);
                Vec::new()
            }
            ServerEvent::Closed(_) if self.gave_up => Vec::new(),
            ServerEvent::Closed(close) => {
                self.finish_model_entry(ModelTurnStatus::Interrupted);
                self.floor = Floor::Listening;
                // Audio of a reply cut off by the close is still heard to its end, like text
                // already printed; only a barge-in silences it.
                if !close.initiated_by_client {
                    self.notice(NoticeLevel::Error, close.message.clone());
                }
                self.disconnect(close.message);
                self.reply.forget();
                Vec::new()
            }
        }
    }

    pub(super) fn on_session_change(&mut self, event: SessionChange) -> Vec<Effect> {
        match event {
            SessionChange::Reconnecting {
                planned,
                attempt,
                reason,
                retry_in,
            } => {
                if self.connection != ConnectionState::Reconnecting {
                    if planned {
                        self.handovers += 1;
                    } else {
                        self.reconnects += 1;
                    }
                    self.calls_before_reconnect = self.tool_calls.len();
                    self.reply.connection_replaced();
                    // A reply cut off by the loss stays in the history as interrupted.
                    self.finish_model_entry(ModelTurnStatus::Interrupted);
                    self.floor = Floor::Listening;
                }
                self.connection = ConnectionState::Reconnecting;
                // A planned hand-over only shows in the status line; losses are explained.
                if !planned {
                    let when = if retry_in.is_zero() {
                        String::new()
                    } else {
                        format!(" in {:.1} s", retry_in.as_secs_f64())
                    };
                    let text = if attempt <= 1 {
                        format!("Connection lost: {reason} Reconnecting{when}…")
                    } else {
                        format!("Reconnect attempt {attempt}{when} ({reason})")
                    };
                    self.notice(NoticeLevel::Warning, text);
                }
                Vec::new()
            }
            SessionChange::Reconnected { resumed } => {
                // The new connection declared the tools as they are now.
                self.tools_pending = false;
                let text = if resumed {
                    "Reconnected; the conversation continues."
                } else {
                    "Reconnected with a new session."
                };
                self.notice(NoticeLevel::Info, text.to_owned());
                Vec::new()
            }
            SessionChange::ResumeRejected { message } => {
                self.notice(
                    NoticeLevel::Warning,
                    format!(
                        "{message} Starting a fresh session: the model no longer knows the conversation so far."
                    ),
                );
                Vec::new()
            }
            SessionChange::TurnLost => {
                self.turns_lost += 1;
                self.reply.forget();
                self.notice(
                    NoticeLevel::Warning,
                    livetalk_live::session::TURN_LOST.to_owned(),
                );
                Vec::new()
            }
            SessionChange::AnswerDropped { id, name } => {
                let id = id.map(|id| format!(" ({id})")).unwrap_or_default();
                self.notice(
                    NoticeLevel::Warning,
                    format!(
                        "The result of {name}{id} was not sent: the connection that asked for it has ended or the call was withdrawn."
                    ),
                );
                Vec::new()
            }
        }
    }

    /// The session is over, for this reason (which may quote the server, so it is bounded).
    pub(super) fn disconnect(&mut self, reason: String) {
        self.connection = ConnectionState::Disconnected {
            reason: excerpt::into_bounded(reason, excerpt::SUMMARY),
        };
    }
}
