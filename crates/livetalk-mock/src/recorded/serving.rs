//! One app's connection to a recorded session: its setup answered with the recorded
//! connection it resumes (or the first), each of its turns answered with the recorded turn's
//! frames at their recorded pace, what it sends compared with what the recording holds, and
//! the end as recorded.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use livetalk_live::budget::{Gate, Held};
use livetalk_live::wire::{ClientMessage, RealtimeInput};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{Bytes, Message};
use tracing::debug;

use super::{Difference, Ending, Frame, RecordedOptions, TurnInput};
use crate::connection::hearing::Hearing;
use crate::connection::{INVALID_ARGUMENT, manual_activity, read_client_message};
use crate::state::MockState;
use crate::vad::VadEvent;
use crate::ws_server::{self, truncate_reason};

/// What handling one message leaves the connection at.
enum Next {
    Continue,
    Close(u16, String),
    /// The recording's connection was lost without a close: so is this one.
    Drop,
}

/// The server side of one app's connection to a recorded session.
pub(crate) struct ServedConnection {
    options: RecordedOptions,
    speed: f64,
    state: Arc<MockState>,
    hearing: Hearing,
    /// This connection's number (from 1), once its setup came.
    number: u32,
    /// The recorded connection served (its index) and the recorded turns before it.
    served: Option<(usize, usize)>,
    /// The app's turns so far.
    turns_taken: usize,
    /// The client turned automatic activity detection off.
    manual: bool,
    /// Frames due, in order, with when.
    due: VecDeque<(Instant, Bytes)>,
    /// When the connection ends as the recorded one did.
    end_at: Option<Instant>,
}

impl ServedConnection {
    pub(crate) fn new(options: RecordedOptions, speed: f64, state: Arc<MockState>) -> Self {
        ServedConnection {
            options,
            speed,
            hearing: Hearing::new(&state),
            state,
            number: 0,
            served: None,
            turns_taken: 0,
            manual: false,
            due: VecDeque::new(),
            end_at: None,
        }
    }

    /// Serves one connection to its end; `gate` has what its socket held of the input budget
    /// for the message read last.
    pub(crate) async fn run<S>(mut self, socket: WebSocketStream<S>, gate: Gate)
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let (mut sink, mut stream) = socket.split();
        let ending = loop {
            let next_frame = self.due.front().map(|(at, _)| *at);
            let end_at = self.end_at;
            let next = tokio::select! {
                frame = stream.next() => match frame {
                    Some(Ok(Message::Text(text))) => self.on_frame(text.as_bytes(), gate.take()).await,
                    Some(Ok(Message::Binary(bytes))) => self.on_frame(&bytes, gate.take()).await,
                    Some(Ok(Message::Close(_))) => break ws_server::Ending::PeerClosed,
                    None => break ws_server::Ending::Gone,
                    Some(Ok(_)) => Next::Continue,
                    Some(Err(e)) => {
                        debug!("recorded session's connection ended: {e}");
                        drop(gate.take());
                        break ws_server::Ending::ReadFailed(e);
                    }
                },
                _ = tokio::time::sleep_until(next_frame.unwrap_or_else(Instant::now)), if next_frame.is_some() => Next::Continue,
                _ = tokio::time::sleep_until(end_at.unwrap_or_else(Instant::now)), if end_at.is_some() && next_frame.is_none() => {
                    self.end_at = None;
                    self.recorded_end()
                }
            };
            let now = Instant::now();
            // Whatever is due goes out first; a close waits for the frames before it.
            let closing = !matches!(next, Next::Continue);
            while let Some((at, _)) = self.due.front() {
                if *at > now && !closing {
                    break;
                }
                let Some((_, payload)) = self.due.pop_front() else {
                    break;
                };
                if sink.send(Message::Binary(payload)).await.is_err() {
                    return;
                }
            }
            match next {
                Next::Continue => {}
                Next::Drop => {
                    debug!("recorded session: dropping the connection as the recording's was");
                    return;
                }
                Next::Close(code, reason) => {
                    break ws_server::Ending::Close(CloseFrame {
                        code: CloseCode::from(code),
                        reason: truncate_reason(&reason).into(),
                    });
                }
            }
        };
        ws_server::end(sink, stream, ending).await;
    }

    /// How the recorded connection ended, now that its time has come.
    fn recorded_end(&self) -> Next {
        let Some((index, _)) = self.served else {
            return Next::Continue;
        };
        match &self.options.session.connections[index].ending {
            Ending::ByApp => Next::Continue,
            Ending::Closed { code, reason } => Next::Close(*code, reason.clone()),
            Ending::Dropped => Next::Drop,
        }
    }

    async fn on_frame(&mut self, payload: &[u8], read: Option<Held>) -> Next {
        let (_held, message) = match read_client_message(payload, read).await {
            Ok(read) => read,
            Err((code, reason)) => return Next::Close(code, reason),
        };
        match (message, self.served.is_some()) {
            (ClientMessage::Setup(setup), false) => {
                self.number = self.state.connections.fetch_add(1, Ordering::Relaxed) + 1;
                self.manual = manual_activity(&setup);
                let handle = setup
                    .session_resumption
                    .and_then(|r| r.handle)
                    .filter(|h| !h.is_empty());
                let Some((index, before)) = self.options.session.connection_for(handle.as_deref())
                else {
                    return Next::Close(1011, "The recording holds no connection to serve.".into());
                };
                if handle.is_some() && index > 0 {
                    self.state.resumptions.fetch_add(1, Ordering::Relaxed);
                }
                self.served = Some((index, before));
                let session = self.options.session.clone();
                let connection = &session.connections[index];
                let now = Instant::now();
                self.schedule(now, &connection.opening);
                if connection.turns.is_empty() {
                    self.end_at = Some(now + self.paced(connection.ended_after));
                }
                Next::Continue
            }
            (ClientMessage::Setup(_), true) | (_, false) => {
                Next::Close(1007, INVALID_ARGUMENT.into())
            }
            (ClientMessage::RealtimeInput(input), true) => self.on_realtime_input(input),
            (message, true) => match TurnInput::of(&message) {
                Some(input) => self.turn(input),
                None => Next::Continue,
            },
        }
    }

    /// Realtime input: text begins a turn; audio is heard, and speech that ends (as the
    /// client says, or as voice detection hears it) begins one.
    fn on_realtime_input(&mut self, input: RealtimeInput) -> Next {
        let mut ended = Vec::new();
        if let Some(text) = input.text.as_deref().filter(|t| !t.trim().is_empty()) {
            ended.push(TurnInput::Text(text.to_owned()));
        }
        if input.activity_start.is_some() {
            self.hearing.activity_start();
        }
        let audio = input.audio.as_ref().or(input.media_chunks.first());
        if let Some(blob) = audio.filter(|b| b.mime_type.starts_with("audio/")) {
            let heard = self.hearing.audio(blob, self.manual);
            for event in heard.events {
                if let VadEvent::SpeechEnded { .. } = event {
                    ended.push(TurnInput::Spoken);
                }
            }
        }
        if input.activity_end.is_some() {
            self.hearing.activity_end();
            ended.push(TurnInput::Spoken);
        }
        if input.audio_stream_end == Some(true) && self.hearing.stream_end().is_some() {
            ended.push(TurnInput::Spoken);
        }
        for input in ended {
            let next = self.turn(input);
            if !matches!(next, Next::Continue) {
                return next;
            }
        }
        Next::Continue
    }

    /// The app began its next turn with `input`: compared with the recorded turn, which is
    /// then served (what the previous turn had still to send goes out first).
    fn turn(&mut self, input: TurnInput) -> Next {
        let Some((index, before)) = self.served else {
            return Next::Continue;
        };
        let session = self.options.session.clone();
        let connection = &session.connections[index];
        let taken = self.turns_taken;
        self.turns_taken += 1;
        let number = before + taken + 1;
        let Some(turn) = connection.turns.get(taken) else {
            let what = format!(
                "the app began a turn the recording does not have (with {}; the recording ends after turn {})",
                input.described(),
                before + connection.turns.len()
            );
            return self.differs(number, what);
        };
        if let Some(what) = input.differs_from(&turn.input) {
            let next = self.differs(number, what);
            if !matches!(next, Next::Continue) {
                return next;
            }
        }
        let now = Instant::now();
        for (at, _) in &mut self.due {
            *at = now;
        }
        self.schedule(now, &turn.frames);
        if taken + 1 == connection.turns.len() {
            self.end_at = Some(now + self.paced(connection.ended_after));
        }
        Next::Continue
    }

    /// Reports a difference; with `strict`, ends the connection with it.
    fn differs(&self, turn: usize, what: String) -> Next {
        let difference = Difference {
            connection: self.number,
            turn,
            what,
        };
        (self.options.on_difference)(&difference);
        if self.options.strict {
            Next::Close(1008, difference.to_string())
        } else {
            Next::Continue
        }
    }

    /// Queues `frames` at their recorded pace from `start`.
    fn schedule(&mut self, start: Instant, frames: &[Frame]) {
        for frame in frames {
            let at = start + self.paced(frame.after);
            // Never before a frame queued earlier: order is the recording's.
            let at = self.due.back().map_or(at, |(last, _)| at.max(*last));
            self.due.push_back((at, frame.payload.clone()));
        }
    }

    /// A recorded span at this server's speed.
    fn paced(&self, span: Duration) -> Duration {
        span.div_f64(self.speed)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use serde_json::{Value, json};

    use super::*;
    use crate::recorded::{Connection, RecordedSession, Turn};

    /// A session of one connection: a setupComplete at once, then one text turn answered by
    /// a frame 2 s after it and another 6 s after it, the service closing 8 s after it.
    fn session() -> RecordedSession {
        let frame = |secs, message: Value| Frame::new(Duration::from_secs(secs), &message);
        RecordedSession {
            connections: vec![Connection {
                resumed_with: None,
                opening: vec![frame(0, json!({"setupComplete": {}}))],
                turns: vec![Turn {
                    input: TurnInput::Text("Hi".into()),
                    frames: vec![
                        frame(
                            2,
                            json!({"serverContent": {"outputTranscription": {"text": "Hello"}}}),
                        ),
                        frame(6, json!({"serverContent": {"turnComplete": true}})),
                    ],
                }],
                ending: Ending::Closed {
                    code: 1000,
                    reason: "bye".into(),
                },
                ended_after: Duration::from_secs(8),
            }],
        }
    }

    /// `--speed` scales the recorded pace: at speed 4, what came 2 s and 6 s after the app's
    /// turn is due 0.5 s and 1.5 s after it, and the recorded close 2 s after it; what the
    /// previous turn had still to send is due at once, before them.
    #[test]
    fn a_turn_is_served_at_the_recorded_pace_scaled_by_speed() {
        let differences = Arc::new(Mutex::new(Vec::new()));
        let said = differences.clone();
        let options = RecordedOptions {
            session: Arc::new(session()),
            strict: false,
            on_difference: Arc::new(move |d: &Difference| said.lock().unwrap().push(d.clone())),
        };
        let mut connection = ServedConnection::new(options, 4.0, Arc::new(MockState::default()));
        connection.served = Some((0, 0));
        let earlier = Instant::now();
        connection
            .due
            .push_back((earlier + Duration::from_secs(60), Bytes::new()));
        assert!(matches!(
            connection.turn(TurnInput::Text("Hi".into())),
            Next::Continue
        ));
        let start = connection.due[0].0;
        assert!(start >= earlier && start < earlier + Duration::from_secs(60));
        let due: Vec<Duration> = connection.due.iter().map(|(at, _)| *at - start).collect();
        assert_eq!(
            due,
            [
                Duration::ZERO,
                Duration::from_millis(500),
                Duration::from_millis(1500)
            ]
        );
        assert_eq!(
            connection.end_at.map(|at| at - start),
            Some(Duration::from_secs(2))
        );
        assert!(differences.lock().unwrap().is_empty());
        // A turn the recording does not have: said, and (not strict) nothing more is due.
        assert!(matches!(
            connection.turn(TurnInput::Text("More".into())),
            Next::Continue
        ));
        let said = differences.lock().unwrap().clone();
        assert_eq!(said.len(), 1);
        assert_eq!(
            said[0].to_string(),
            "turn 2: the app began a turn the recording does not have (with the text \"More\"; the recording ends after turn 1)"
        );
    }

    /// Speech the mock's voice detection hears end begins the app's spoken turn: its
    /// recorded frames follow (a goAway among them), then the recorded close, over a socket.
    #[tokio::test]
    async fn speech_that_ends_is_answered_as_recorded_then_the_recorded_close() {
        use livetalk_live::budget::{InputBudget, LARGEST_MESSAGE};
        use livetalk_live::codec::encode_client;
        use tokio_tungstenite::tungstenite::protocol::Role;

        let frame = |message: Value| Frame::new(Duration::ZERO, &message);
        let session = RecordedSession {
            connections: vec![Connection {
                resumed_with: None,
                opening: vec![
                    frame(json!({"setupComplete": {}})),
                    frame(
                        json!({"sessionResumptionUpdate": {"newHandle": "h-1", "resumable": true}}),
                    ),
                ],
                turns: vec![Turn {
                    input: TurnInput::Spoken,
                    frames: vec![frame(json!({"goAway": {"timeLeft": "5s"}}))],
                }],
                ending: Ending::Closed {
                    code: 1011,
                    reason: "as recorded".into(),
                },
                ended_after: Duration::ZERO,
            }],
        };
        let options = RecordedOptions {
            session: Arc::new(session),
            strict: true,
            on_difference: Arc::new(|d: &Difference| panic!("no difference expected: {d}")),
        };
        let (server, client) = tokio::io::duplex(1 << 20);
        let (server, gate) = InputBudget::process().gate(server, LARGEST_MESSAGE);
        let server = WebSocketStream::from_raw_socket(server, Role::Server, None).await;
        let state = Arc::new(MockState::default());
        tokio::spawn(ServedConnection::new(options, 1.0, state).run(server, gate));
        let mut client = WebSocketStream::from_raw_socket(client, Role::Client, None).await;
        let setup = json!({"setup": {"model": "models/gemini-3.8-live"}});
        client.send(Message::text(setup.to_string())).await.unwrap();
        let mut read = Vec::new();
        read.push(next(&mut client).await.unwrap());
        read.push(next(&mut client).await.unwrap());
        assert_eq!(read[1]["sessionResumptionUpdate"]["newHandle"], "h-1");
        // 0.6 s of a 220 Hz tone, then 0.8 s of silence, in 100 ms chunks.
        let pcm: Vec<u8> = (0..16_000 * 14 / 10)
            .flat_map(|i: i32| {
                let tone = i < 16_000 * 6 / 10;
                let sample = if tone {
                    (f64::from(i) * 220.0 * std::f64::consts::TAU / 16_000.0).sin() * 12_000.0
                } else {
                    0.0
                };
                (sample as i16).to_le_bytes()
            })
            .collect();
        for chunk in pcm.chunks(3_200) {
            let audio = ClientMessage::RealtimeInput(RealtimeInput::mic_audio(chunk.to_vec()));
            client
                .send(Message::text(encode_client(&audio)))
                .await
                .unwrap();
        }
        assert_eq!(
            next(&mut client).await.unwrap(),
            json!({"goAway": {"timeLeft": "5s"}})
        );
        let close = next(&mut client).await.unwrap_err();
        assert_eq!(
            (u16::from(close.code), close.reason.as_str()),
            (1011, "as recorded")
        );
    }

    /// The next message the server sent, or its Close; panics after 10 s without either.
    async fn next<S: AsyncRead + AsyncWrite + Unpin>(
        client: &mut WebSocketStream<S>,
    ) -> Result<Value, CloseFrame> {
        let frame = tokio::time::timeout(Duration::from_secs(10), client.next()).await;
        match frame.expect("a frame within 10 s") {
            Some(Ok(Message::Binary(bytes))) => Ok(serde_json::from_slice(&bytes).unwrap()),
            Some(Ok(Message::Close(frame))) => Err(frame.unwrap()),
            other => panic!("{other:?}"),
        }
    }
}
