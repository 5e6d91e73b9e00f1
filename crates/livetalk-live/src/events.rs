//! What a connection's server said, as one continuous stream of typed [`ServerEvent`]s, and
//! how server messages map onto it.

use std::time::Duration;

use serde_json::Value;

use super::wire::{FunctionCall, ServerMessage, Text, UsageMetadata};
use crate::reading::{AudioPart, Interaction, Reading, take_audio};

/// Everything a connection's server said, decoded, in arrival order. Turn boundaries are
/// events, not iterator ends: the stream runs until [`ServerEvent::Closed`].
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerEvent {
    /// `setupComplete`: the session is ready for input.
    SetupComplete {
        /// The session's id, when the server gives one (Vertex AI does).
        session_id: Option<String>,
    },
    /// Text part of a model turn (TEXT modality, or text beside audio), shared with the
    /// message it came in.
    ModelText(Text),
    /// A chunk of model audio: PCM16 little-endian mono. (A recording keeps the samples in
    /// its WAV file, not in the line.)
    ModelAudio {
        /// The samples, two bytes each.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pcm: Vec<u8>,
        /// Their rate as the MIME type declares it (24 kHz when it declares none).
        sample_rate: u32,
    },
    /// Transcription of the user's speech (fragment).
    InputTranscription {
        /// The fragment; fragments join without separators.
        text: Text,
        /// The last fragment of the utterance.
        finished: bool,
    },
    /// Transcription of the model's speech (fragment).
    OutputTranscription {
        /// The fragment; fragments join without separators.
        text: Text,
        /// The last fragment of the utterance.
        finished: bool,
    },
    /// The model finished generating this turn (playback may still be running).
    GenerationComplete,
    /// Where the interaction stands, on models whose turns go on after `turnComplete`
    /// (`serverContent.interactionStatus`): `idle` once the model has nothing more to do,
    /// else it is still working (tool calls or speech may follow).
    Interaction {
        /// `IDLE`: the model has nothing more to do.
        idle: bool,
    },
    /// The model's turn is over (on models that send [`ServerEvent::Interaction`], the
    /// interaction may go on).
    TurnComplete {
        /// Why the turn ended, when it is not simply done (`NEED_MORE_INPUT`, a safety
        /// reason, …).
        reason: Option<String>,
        /// The model is silent because it expects the user to go on.
        waiting_for_input: bool,
    },
    /// The user's input cut the model off; discard queued audio.
    Interrupted,
    /// Function calls to run and answer.
    ToolCall(Vec<FunctionCall>),
    /// Calls the server abandoned; they must not be answered.
    ToolCallCancelled(Vec<String>),
    /// The server will close this connection soon.
    GoAway {
        /// How long the connection has left, when the server says.
        time_left: Option<Duration>,
    },
    /// A new session resumption handle (or that none is available right now).
    ResumptionUpdate {
        /// The handle that resumes the session as it is now (`None` for an empty one).
        handle: Option<String>,
        /// Whether the session can be resumed at this point.
        resumable: bool,
    },
    /// Token usage reported beside a message.
    Usage(UsageMetadata),
    /// Server-side voice activity: the user started (`true`) or stopped speaking.
    VoiceActivity {
        /// `true` at the start of speech, `false` at its end.
        speaking: bool,
    },
    /// Google Search grounding for the current turn: its `groundingMetadata` as sent (what
    /// it searched and the web sources it drew on), read through
    /// [`reading::Grounding::of`](crate::reading::Grounding::of). A turn's grounding may come
    /// in more than one message.
    Grounding(Value),
    /// A frame that could not be used (malformed or unknown); logged and skipped.
    FrameSkipped {
        /// What was wrong with it; may quote the frame, so bound it before showing it.
        reason: String,
    },
    /// The connection is over. Always the last event.
    Closed(CloseInfo),
}

/// How and why a connection ended.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CloseInfo {
    /// WebSocket close code, if the server sent one.
    pub code: Option<u16>,
    /// The server's reason text, verbatim.
    pub reason: String,
    /// One human sentence saying what happened.
    pub message: String,
    /// True when we asked for the close (end of session), false when it happened to us.
    pub initiated_by_client: bool,
}

impl CloseInfo {
    /// The end of a session we closed ourselves.
    pub fn ended_by_client() -> CloseInfo {
        CloseInfo {
            code: None,
            reason: String::new(),
            message: "Session ended.".to_owned(),
            initiated_by_client: true,
        }
    }

    /// An end decided on this side for what the far end did (or failed to do): no reason
    /// from it, `code` when one applies.
    pub fn failed(code: Option<u16>, message: String) -> CloseInfo {
        CloseInfo {
            code,
            reason: String::new(),
            message,
            initiated_by_client: false,
        }
    }
}

/// One thing the server said: a frame decoded once, kept whole, with the events it amounts to.
/// A connection hands these out in arrival order, and a session passes each on whole, so a
/// consumer that wants the message as the service sent it (a bridge, an inspector, a
/// recorder) and one that wants the events read the same value, in the same order.
///
/// The message's model audio is held once: its samples are moved into the `ModelAudio`
/// events, and the message keeps each audio part with an empty `data`, described by
/// [`Inbound::audio`]. What the message means is read through [`Inbound::reading`].
#[derive(Debug, Clone)]
pub struct Inbound {
    /// The message as decoded, its model audio moved into the events; `None` for a frame
    /// that could not be used ([`ServerEvent::FrameSkipped`]) and for the connection's own
    /// news: its set-up as the runner reports it, its close.
    pub message: Option<std::sync::Arc<ServerMessage>>,
    /// The model audio the message carried, chunk by chunk (the samples are in the events).
    pub audio: Vec<AudioPart>,
    /// What it amounts to, in the order to apply them (none for a message that says nothing
    /// new).
    pub events: Vec<ServerEvent>,
    /// When the frame was read (consumers may take it later: latency is measured from here).
    pub at: std::time::Instant,
    /// The frame's size on the wire; 0 for news that came in no frame.
    pub bytes: usize,
    /// What the frame holds of the process's input budget ([`crate::budget`]) until the
    /// last copy of this value is dropped: a frame is input in flight until whoever reads
    /// it last is done with it, however many queues it waits in on the way.
    pub held: Option<std::sync::Arc<crate::budget::Held>>,
}

impl Inbound {
    /// A server message and its events, read once (see [`Reading`]).
    pub fn message(mut message: ServerMessage) -> Inbound {
        let (audio, samples) = take_audio(&mut message);
        let events = events_of(&Reading::of(&message, &audio), samples);
        Inbound {
            message: Some(std::sync::Arc::new(message)),
            audio,
            events,
            at: std::time::Instant::now(),
            bytes: 0,
            held: None,
        }
    }

    /// The same, read from a frame of `bytes` bytes.
    pub fn sized(mut self, bytes: usize) -> Inbound {
        self.bytes = bytes;
        self
    }

    /// The same, holding `held` of the input budget for as long as it lives.
    pub fn holding(mut self, held: crate::budget::Held) -> Inbound {
        self.held = Some(std::sync::Arc::new(held));
        self
    }

    /// An event that stands for no message of the server's (set up, skipped, closed).
    pub fn news(event: ServerEvent) -> Inbound {
        Inbound {
            message: None,
            audio: Vec::new(),
            events: vec![event],
            at: std::time::Instant::now(),
            bytes: 0,
            held: None,
        }
    }

    /// What the message means; `None` for the connection's own news.
    pub fn reading(&self) -> Option<Reading<'_>> {
        Some(Reading::of(self.message.as_deref()?, &self.audio))
    }

    /// The close, when this is the connection's last word.
    pub fn closed(&self) -> Option<&CloseInfo> {
        match self.events.as_slice() {
            [ServerEvent::Closed(close)] => Some(close),
            _ => None,
        }
    }
}

impl IntoIterator for Inbound {
    type Item = ServerEvent;
    type IntoIter = std::vec::IntoIter<ServerEvent>;

    fn into_iter(self) -> Self::IntoIter {
        self.events.into_iter()
    }
}

/// Splits one server message into events, in the order a reader should apply them (its
/// model audio moved into them, not copied). See [`Inbound::message`].
pub fn events_from(message: ServerMessage) -> Vec<ServerEvent> {
    Inbound::message(message).events
}

/// The events a message amounts to, in the order a reader applies them, from its reading.
/// `audio` holds the samples of each [`AudioPart`], in order; each becomes one `ModelAudio`
/// event.
fn events_of(reading: &Reading<'_>, audio: Vec<Vec<u8>>) -> Vec<ServerEvent> {
    let mut events = Vec::new();
    if let Some(session_id) = reading.set_up() {
        events.push(ServerEvent::SetupComplete {
            session_id: session_id.map(str::to_owned),
        });
    }
    if !reading.calls().is_empty() {
        events.push(ServerEvent::ToolCall(reading.calls().to_vec()));
    }
    if !reading.cancelled().is_empty() {
        events.push(ServerEvent::ToolCallCancelled(reading.cancelled().to_vec()));
    }
    if let Some(heard) = reading.heard() {
        events.push(ServerEvent::InputTranscription {
            text: heard.text.clone(),
            finished: heard.finished,
        });
    }
    // Text and audio in the order of the model turn's parts.
    let mut samples = reading.audio().iter().zip(audio);
    let mut next_audio = samples.next();
    for (index, part) in reading.parts().enumerate() {
        if part.thought == Some(true) {
            continue;
        }
        if let Some(text) = &part.text
            && !text.is_empty()
        {
            events.push(ServerEvent::ModelText(text.clone()));
        }
        if let Some((chunk, _)) = &next_audio
            && chunk.part == index
            && let Some((chunk, pcm)) = next_audio.take()
        {
            events.push(ServerEvent::ModelAudio {
                pcm,
                sample_rate: chunk.sample_rate,
            });
            next_audio = samples.next();
        }
    }
    if let Some(said) = reading.said() {
        events.push(ServerEvent::OutputTranscription {
            text: said.text.to_owned(),
            finished: said.finished,
        });
    }
    if let Some(grounding) = reading
        .content()
        .and_then(|c| c.grounding_metadata.as_ref())
    {
        events.push(ServerEvent::Grounding(grounding.clone()));
    }
    let turn = reading.turn();
    if turn.generation_complete {
        events.push(ServerEvent::GenerationComplete);
    }
    if turn.interrupted {
        events.push(ServerEvent::Interrupted);
    }
    // Before the turnComplete beside it: that turnComplete ends the interaction or not.
    match reading.interaction() {
        Some(Interaction::Idle) => events.push(ServerEvent::Interaction { idle: true }),
        Some(Interaction::Working(_)) => events.push(ServerEvent::Interaction { idle: false }),
        Some(Interaction::Other(_)) | None => {}
    }
    if turn.turn_complete {
        events.push(ServerEvent::TurnComplete {
            reason: reading.turn_complete_reason().map(str::to_owned),
            waiting_for_input: turn.waiting_for_input,
        });
    }
    if let Some(usage) = reading.usage() {
        events.push(ServerEvent::Usage(usage.clone()));
    }
    if let Some(time_left) = reading.go_away() {
        events.push(ServerEvent::GoAway { time_left });
    }
    if let Some(update) = reading.resumption() {
        events.push(ServerEvent::ResumptionUpdate {
            handle: update.handle.map(str::to_owned),
            resumable: update.resumable,
        });
    }
    for voice in [reading.voice_activity(), reading.voice_signal()]
        .into_iter()
        .flatten()
    {
        if let Some(speaking) = voice.speaking {
            events.push(ServerEvent::VoiceActivity { speaking });
        }
    }
    events
}

/// PCM16 little-endian bytes to samples (an odd trailing byte is dropped).
pub fn pcm16_from_le_bytes(bytes: &[u8]) -> Vec<i16> {
    bytes
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
        .collect()
}

/// Samples to PCM16 little-endian bytes.
pub fn pcm16_to_le_bytes(samples: &[i16]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(samples.len() * 2);
    for s in samples {
        bytes.extend_from_slice(&s.to_le_bytes());
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{DecodedServerFrame, decode_server};

    fn events(json: &str) -> Vec<ServerEvent> {
        match decode_server(json.as_bytes()) {
            Ok(DecodedServerFrame::Message(m)) => events_from(m),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn one_message_with_several_fields_yields_ordered_events() {
        let got = events(
            r#"{"serverContent": {"modelTurn": {"parts": [{"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": "AQACAA=="}}, {"text": "thinking", "thought": true}]},
                "outputTranscription": {"text": "Hi"}, "generationComplete": true, "turnComplete": true},
               "usageMetadata": {"totalTokenCount": 5}}"#,
        );
        assert_eq!(
            got,
            vec![
                ServerEvent::ModelAudio {
                    pcm: vec![1, 0, 2, 0],
                    sample_rate: 24_000
                },
                ServerEvent::OutputTranscription {
                    text: "Hi".into(),
                    finished: false
                },
                ServerEvent::GenerationComplete,
                ServerEvent::TurnComplete {
                    reason: None,
                    waiting_for_input: false
                },
                ServerEvent::Usage(UsageMetadata {
                    total_token_count: Some(5),
                    ..Default::default()
                }),
            ]
        );
    }

    #[test]
    fn interrupted_comes_before_turn_complete() {
        assert_eq!(
            events(r#"{"serverContent": {"interrupted": true, "turnComplete": true}}"#),
            vec![
                ServerEvent::Interrupted,
                ServerEvent::TurnComplete {
                    reason: None,
                    waiting_for_input: false
                }
            ]
        );
    }

    #[test]
    fn interaction_status_comes_before_the_turn_complete_beside_it() {
        assert_eq!(
            events(
                r#"{"serverContent": {"turnComplete": true, "interactionStatus": "IN_PROGRESS"}}"#
            ),
            vec![
                ServerEvent::Interaction { idle: false },
                ServerEvent::TurnComplete {
                    reason: None,
                    waiting_for_input: false
                }
            ]
        );
        assert_eq!(
            events(r#"{"serverContent": {"interactionStatus": "IDLE"}}"#),
            vec![ServerEvent::Interaction { idle: true }]
        );
        assert_eq!(
            events(r#"{"serverContent": {"interactionStatus": "INTERACTION_STATUS_UNSPECIFIED"}}"#),
            vec![]
        );
    }

    #[test]
    fn control_messages_map_to_events() {
        assert_eq!(
            events(r#"{"goAway": {"timeLeft": "50s"}}"#),
            vec![ServerEvent::GoAway {
                time_left: Some(Duration::from_secs(50))
            }]
        );
        assert_eq!(
            events(r#"{"sessionResumptionUpdate": {"newHandle": "", "resumable": false}}"#),
            vec![ServerEvent::ResumptionUpdate {
                handle: None,
                resumable: false
            }]
        );
        assert_eq!(
            events(r#"{"toolCallCancellation": {"ids": ["function-call-1"]}}"#),
            vec![ServerEvent::ToolCallCancelled(vec![
                "function-call-1".into()
            ])]
        );
        assert_eq!(
            events(r#"{"voiceActivity": {"type": "ACTIVITY_START"}}"#),
            vec![ServerEvent::VoiceActivity { speaking: true }]
        );
    }

    #[test]
    fn a_grounding_event_reads_as_its_message_does() {
        let json = r#"{"serverContent": {"groundingMetadata": {
            "webSearchQueries": ["weather Paris", 7],
            "groundingChunks": [
                {"web": {"uri": "https://a.example/1", "title": "A", "domain": "a.example"}},
                {"retrievedContext": {"uri": "gs://b"}},
                {"web": {"title": "untitled link"}}
            ]}}}"#;
        let message = match decode_server(json.as_bytes()) {
            Ok(DecodedServerFrame::Message(m)) => m,
            other => panic!("{other:?}"),
        };
        let from_message = Reading::of(&message, &[]).grounding().unwrap();
        let events = events(json);
        let [ServerEvent::Grounding(metadata)] = events.as_slice() else {
            panic!("one grounding event")
        };
        let from_event = crate::reading::Grounding::of(metadata);
        assert_eq!(from_event, from_message);
        assert_eq!(from_event.queries, ["weather Paris"]);
        assert_eq!(from_event.sources.len(), 2, "the web chunks only");
        assert_eq!(
            from_event.sources[0].uri.as_deref(),
            Some("https://a.example/1")
        );
        assert_eq!(from_event.sources[1].uri, None);
        // The Python SDK's casing reads the same.
        let snake = serde_json::json!({"web_search_queries": ["q"], "grounding_chunks": [{"web": {"uri": "u"}}]});
        let snake = crate::reading::Grounding::of(&snake);
        assert_eq!(snake.queries, ["q"]);
        assert_eq!(snake.sources[0].uri.as_deref(), Some("u"));
        let chip_only = serde_json::json!({"searchEntryPoint": {}});
        assert!(crate::reading::Grounding::of(&chip_only).is_empty());
    }

    #[test]
    fn pcm16_round_trips() {
        let samples = [0i16, 1, -1, i16::MAX, i16::MIN];
        assert_eq!(pcm16_from_le_bytes(&pcm16_to_le_bytes(&samples)), samples);
    }
}
