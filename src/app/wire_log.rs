//! The session's frames in both directions, as they went over the wire: what the event
//! inspector draws from. Bounded in bytes: beyond [`WIRE_LOG_BYTES`] the oldest go, and are
//! counted. Never recorded (a recording has its own wire lines), so it costs a push per frame.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use livetalk_live::ServerEvent;
use livetalk_live::events::Inbound;
use livetalk_live::reading::{AudioPart, Reading};
use livetalk_live::wire::{Blob, ClientMessage, ServerMessage};

/// What the frames kept may weigh in all (see [`WireFrame::weight`]): a bound in bytes, not
/// frames, since a server can send megabytes of text in each of them. A voice turn's frames
/// weigh about 3 KiB each (their audio is not kept), so this is a few minutes of talk.
pub const WIRE_LOG_BYTES: usize = 16 << 20;

/// What keeping a frame costs besides its text: the message's structs and the log's own.
const FRAME_OVERHEAD: usize = 512;

/// One frame of the session, either way.
#[derive(Debug, Clone, PartialEq)]
pub struct WireFrame {
    /// When it was read, or written.
    pub at: Instant,
    /// Its size on the wire.
    pub bytes: usize,
    /// Read before the session was set up (the setup answer included).
    pub handshake: bool,
    /// Bytes of audio and images the log's copy leaves out (see [`WireLog`]).
    pub elided: usize,
    /// Frames the wire tap could not pass to the app just before this one (the app was
    /// behind): the log counts them with the frames it dropped.
    pub missed_before: u64,
    /// What it said.
    pub body: WireBody,
}

/// What a frame said.
#[derive(Debug, Clone, PartialEq)]
pub enum WireBody {
    /// A server message, as decoded, its model audio described by `audio` (the samples went
    /// to the app in the frame's events; see [`Inbound`]).
    Received {
        message: Arc<ServerMessage>,
        audio: Vec<AudioPart>,
    },
    /// A server frame that could not be used, and why.
    Unreadable(String),
    /// A client message, as sent.
    Sent(Arc<ClientMessage>),
}

impl WireBody {
    /// A server message as a frame's body: its model audio moved out (the samples are
    /// dropped), as a session's frames come. For frames read in a handshake, and tests.
    pub fn received(mut message: ServerMessage) -> WireBody {
        let (audio, _samples) = livetalk_live::reading::take_audio(&mut message);
        WireBody::Received {
            message: Arc::new(message),
            audio,
        }
    }
}

impl WireFrame {
    /// The frame an inbound value was read from; `None` for the connection's own news (its
    /// set-up as the runner reports it, its close), which came in no frame of its own.
    pub fn received(inbound: &Inbound) -> Option<WireFrame> {
        let body = match (&inbound.message, inbound.events.as_slice()) {
            (Some(message), _) => WireBody::Received {
                message: message.clone(),
                audio: inbound.audio.clone(),
            },
            (None, [ServerEvent::FrameSkipped { reason }]) => WireBody::Unreadable(reason.clone()),
            _ => return None,
        };
        Some(WireFrame {
            at: inbound.at,
            bytes: inbound.bytes,
            handshake: false,
            elided: inbound.audio.iter().map(|part| part.bytes).sum(),
            missed_before: 0,
            body,
        })
    }

    /// A client message just written as `bytes` bytes.
    pub fn sent(message: &Arc<ClientMessage>, bytes: usize) -> WireFrame {
        WireFrame {
            at: Instant::now(),
            bytes,
            handshake: false,
            elided: 0,
            missed_before: 0,
            body: WireBody::Sent(message.clone()),
        }
    }

    /// What a received frame's message means; `None` for the other frames.
    pub fn reading(&self) -> Option<Reading<'_>> {
        match &self.body {
            WireBody::Received { message, audio } => Some(Reading::of(message, audio)),
            _ => None,
        }
    }
}

impl WireFrame {
    /// The frame as the log keeps it: the data of its mic audio and images left out, counted
    /// in `elided` (a received frame's model audio is out of its message already). The
    /// inspector shows their sizes and durations, never their bytes, and a few thousand frames
    /// of a voice turn would otherwise hold megabytes. Done in place when the log holds the
    /// only copy (the recorder has written the samples by then).
    fn kept(mut self) -> WireFrame {
        let elided = match &mut self.body {
            WireBody::Sent(message) => {
                let ClientMessage::RealtimeInput(input) = message.as_ref() else {
                    return self;
                };
                if input.audio.is_none() && input.video.is_none() && input.media_chunks.is_empty() {
                    return self;
                }
                let ClientMessage::RealtimeInput(input) = Arc::make_mut(message) else {
                    return self;
                };
                let blobs = input.audio.iter_mut().chain(&mut input.video);
                blobs.chain(&mut input.media_chunks).map(elide).sum()
            }
            WireBody::Received { .. } | WireBody::Unreadable(_) => 0,
        };
        self.elided += elided;
        self
    }
}

impl WireFrame {
    /// What the log counts a kept frame as: its size on the wire less the audio and images
    /// left out (what its text and structure hold, near enough), plus a fixed overhead.
    pub fn weight(&self) -> usize {
        self.bytes.saturating_sub(self.elided) + FRAME_OVERHEAD
    }
}

/// Empties a blob's data; returns how many bytes it held.
fn elide(blob: &mut Blob) -> usize {
    std::mem::take(&mut blob.data).len()
}

/// The frames of the session, oldest first, in the order they crossed the wire. Audio and
/// images are left out of what it keeps (see [`WireFrame::elided`]).
#[derive(Debug, Clone)]
pub struct WireLog {
    frames: VecDeque<WireFrame>,
    /// What the frames kept weigh, and the most they may.
    weight: usize,
    budget: usize,
    /// Each frame's number in the order it was taken in, beside it: what the inspector's
    /// selection holds on to while frames come and go.
    numbers: VecDeque<u64>,
    taken_in: u64,
    dropped: u64,
    /// When the earliest frame crossed the wire: the inspector's times count from it.
    origin: Option<Instant>,
}

impl Default for WireLog {
    fn default() -> Self {
        WireLog::with_budget(WIRE_LOG_BYTES)
    }
}

impl WireLog {
    /// A log whose frames weigh at most `budget` bytes in all.
    pub fn with_budget(budget: usize) -> Self {
        WireLog {
            frames: VecDeque::new(),
            weight: 0,
            budget,
            numbers: VecDeque::new(),
            taken_in: 0,
            dropped: 0,
            origin: None,
        }
    }

    /// Adds a frame in time order: the two directions reach the app by different roads, so a
    /// frame may come a little after one that crossed the wire later. The oldest frames go
    /// while the log would weigh more than its budget; a frame heavier than the whole budget
    /// is counted as dropped and not kept.
    pub(super) fn push(&mut self, frame: WireFrame) {
        let frame = frame.kept();
        self.dropped += frame.missed_before;
        self.origin = Some(self.origin.map_or(frame.at, |origin| origin.min(frame.at)));
        let weight = frame.weight();
        if weight > self.budget {
            self.dropped += 1;
            self.taken_in += 1;
            return;
        }
        while self.weight + weight > self.budget {
            let Some(oldest) = self.frames.pop_front() else {
                break;
            };
            self.weight -= oldest.weight();
            self.numbers.pop_front();
            self.dropped += 1;
        }
        self.weight += weight;
        let at = self
            .frames
            .iter()
            .rposition(|kept| kept.at <= frame.at)
            .map_or(0, |i| i + 1);
        self.frames.insert(at, frame);
        self.numbers.insert(at, self.taken_in);
        self.taken_in += 1;
    }

    /// When the earliest frame crossed the wire, dropped ones included.
    pub fn origin(&self) -> Option<Instant> {
        self.origin
    }

    /// The number the frame at `index` was taken in as: it stays the frame's while older
    /// frames go.
    pub fn number(&self, index: usize) -> Option<u64> {
        self.numbers.get(index).copied()
    }

    /// Where the frame taken in as `number` is now, if it is still kept.
    pub fn index_of(&self, number: u64) -> Option<usize> {
        self.numbers.iter().position(|n| *n == number)
    }

    /// The frames kept, oldest first.
    pub fn frames(&self) -> &VecDeque<WireFrame> {
        &self.frames
    }

    /// What the frames kept weigh (see [`WireFrame::weight`]); at most the log's budget.
    pub fn weight(&self) -> usize {
        self.weight
    }

    /// Frames dropped to keep the log bounded, and frames that never reached it (the app was
    /// behind the wire tap).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

impl super::App {
    /// The session's frames both ways, oldest first (what the event inspector shows).
    pub fn wire(&self) -> &WireLog {
        &self.wire
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn sent_at(at: Instant, text: &str) -> WireFrame {
        WireFrame {
            at,
            bytes: text.len(),
            handshake: false,
            elided: 0,
            missed_before: 0,
            body: WireBody::Unreadable(text.to_owned()),
        }
    }

    fn texts(log: &WireLog) -> Vec<String> {
        log.frames()
            .iter()
            .map(|f| match &f.body {
                WireBody::Unreadable(text) => text.clone(),
                _ => unreachable!(),
            })
            .collect()
    }

    #[test]
    fn frames_are_kept_in_wire_order_and_the_oldest_beyond_the_bound_are_counted() {
        let start = Instant::now();
        let mut log = WireLog::default();
        log.push(sent_at(start + Duration::from_millis(2), "b"));
        // Read earlier, taken in later: it goes before.
        log.push(sent_at(start + Duration::from_millis(1), "a"));
        log.push(sent_at(start + Duration::from_millis(2), "c"));
        assert_eq!(texts(&log), ["a", "b", "c"]);
        let fits = WIRE_LOG_BYTES / sent_at(start, "n").weight();
        for i in 0..fits {
            log.push(sent_at(start + Duration::from_millis(3 + i as u64), "n"));
        }
        assert_eq!(log.frames().len(), fits);
        assert_eq!(log.dropped(), 3);
        assert!(log.weight() <= WIRE_LOG_BYTES);
        assert!(
            log.frames()
                .iter()
                .all(|f| f.at >= start + Duration::from_millis(3))
        );
    }

    #[test]
    fn the_log_is_bounded_in_bytes_whatever_the_frames_hold() {
        let start = Instant::now();
        let mut log = WireLog::default();
        // A server streaming megabyte text parts: the log keeps the newest that fit.
        let text = "t".repeat(1 << 20);
        for i in 0..64 {
            let mut frame = sent_at(start + Duration::from_millis(i), &text);
            frame.bytes = text.len();
            log.push(frame);
        }
        assert!(log.weight() <= WIRE_LOG_BYTES, "{}", log.weight());
        assert_eq!(log.frames().len(), 15);
        assert_eq!(log.dropped(), 64 - 15);
        assert_eq!(log.number(0), Some(64 - 15));
        // One frame heavier than the whole budget is counted, not kept, and keeps nothing out.
        let mut huge = sent_at(start + Duration::from_secs(1), "h");
        huge.bytes = WIRE_LOG_BYTES + 1;
        log.push(huge);
        assert_eq!((log.frames().len(), log.dropped()), (15, 64 - 15 + 1));
        log.push(sent_at(start + Duration::from_secs(2), "after"));
        assert_eq!(log.number(log.frames().len() - 1), Some(65));
    }

    #[test]
    fn frames_the_tap_could_not_pass_on_are_counted_with_those_dropped() {
        let start = Instant::now();
        let mut log = WireLog::default();
        let mut frame = sent_at(start, "a");
        frame.missed_before = 7;
        log.push(frame);
        log.push(sent_at(start, "b"));
        assert_eq!((log.frames().len(), log.dropped()), (2, 7));
        assert_eq!((log.number(0), log.number(1)), (Some(0), Some(1)));
        assert_eq!(log.origin(), Some(start));
    }

    #[test]
    fn the_log_keeps_no_audio_or_images_only_how_much_there_was() {
        use livetalk_live::wire::RealtimeInput;
        let audio: ServerMessage = serde_json::from_value(serde_json::json!({
            "serverContent": {"modelTurn": {"parts": [
                {"text": "hi"},
                {"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": "AQACAAMA"}}
            ]}}
        }))
        .unwrap();
        let mut log = WireLog::default();
        log.push(WireFrame::received(&Inbound::message(audio)).unwrap());
        let mut mic = RealtimeInput::mic_audio(vec![7; 640]);
        mic.media_chunks.push(Blob {
            mime_type: "image/jpeg".into(),
            data: vec![1; 100],
        });
        log.push(WireFrame::sent(
            &Arc::new(ClientMessage::RealtimeInput(mic)),
            900,
        ));
        let [received, sent] = [&log.frames()[0], &log.frames()[1]];
        assert_eq!((received.elided, sent.elided), (6, 740));
        let WireBody::Received { message, .. } = &received.body else {
            panic!("{received:?}")
        };
        let parts = &message
            .server_content
            .as_ref()
            .unwrap()
            .model_turn
            .as_ref()
            .unwrap()
            .parts;
        assert_eq!(parts[0].text.as_deref(), Some("hi"));
        let blob = parts[1].inline_data.as_ref().unwrap();
        assert_eq!(
            (blob.mime_type.as_str(), blob.data.len()),
            ("audio/pcm;rate=24000", 0)
        );
        let WireBody::Sent(message) = &sent.body else {
            panic!("{sent:?}")
        };
        let ClientMessage::RealtimeInput(input) = message.as_ref() else {
            panic!("{message:?}")
        };
        assert!(input.audio.as_ref().unwrap().data.is_empty());
        assert!(input.media_chunks[0].data.is_empty());
    }

    #[test]
    fn news_that_came_in_no_frame_is_not_a_frame() {
        let closed = Inbound::news(ServerEvent::Closed(
            livetalk_live::CloseInfo::ended_by_client(),
        ));
        assert!(WireFrame::received(&closed).is_none());
        let skipped = Inbound::news(ServerEvent::FrameSkipped {
            reason: "bad".into(),
        })
        .sized(3);
        let frame = WireFrame::received(&skipped).unwrap();
        assert_eq!(frame.bytes, 3);
        assert!(matches!(frame.body, WireBody::Unreadable(ref why) if why == "bad"));
    }
}
