//! Turn timing: how long each reply took to start, defined once for a live session, a
//! recording (`inspect`) and `livetalk check`. Pure: it is fed what went over the wire and
//! what the speaker did, each with a [`Stamp`], and reads no clock, so the same frames give
//! the same figures wherever they come from.
//!
//! Every figure of a turn is measured from the end of the user's turn ([`TurnEnd`]):
//! - `first_message`: to the first frame the server sent after it, whatever it said (an
//!   input transcription, a tool call, the model's first words);
//! - `first_audio`: to the first server frame that carries model audio;
//! - `first_audible`: to the first sample of that audio the speaker played (the audio
//!   worker's word, which comes after the bytes; none without a speaker);
//! - `underruns`: the times the speaker ran dry mid-reply (silence written while more audio
//!   was due), from that end until the next user turn ends.
//!
//! A tool call in between is part of the wait: the user waits for the model's voice either
//! way.

use std::collections::VecDeque;
use std::time::Duration;

use livetalk_live::reading::Reading;
use livetalk_live::wire::ClientMessage;

/// A moment, as the time since an origin the caller picks (a session's first frame, a
/// recording's start). Only differences between stamps are reported.
pub type Stamp = Duration;

/// How the user's turn ended: where a turn's figures are measured from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnEnd {
    /// A typed turn was sent (`clientContent` with `turnComplete`).
    Typed,
    /// Push-to-talk was released: `realtimeInput.activityEnd` was sent.
    ActivityEnd,
    /// The server's voice activity detection heard the user stop (a `voiceActivity` end, or
    /// the older `voiceActivityDetectionSignal` end of speech).
    VoiceEnd,
}

impl TurnEnd {
    /// A short word for it, for lines and JSON.
    pub fn word(self) -> &'static str {
        match self {
            TurnEnd::Typed => "typed",
            TurnEnd::ActivityEnd => "activity_end",
            TurnEnd::VoiceEnd => "voice_end",
        }
    }
}

/// One turn's figures; `None` where that point has not been reached (yet, or ever).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnTiming {
    /// How the user's turn ended.
    pub ended_by: TurnEnd,
    /// When it ended.
    pub ended_at: Stamp,
    /// End of the user's turn → the first frame the server sent after it.
    pub first_message: Option<Duration>,
    /// End of the user's turn → the first server frame carrying model audio.
    pub first_audio: Option<Duration>,
    /// End of the user's turn → the first sample of the reply's audio the speaker played.
    pub first_audible: Option<Duration>,
    /// Times the speaker ran dry mid-reply, from the end of this turn to the next one's.
    pub underruns: u64,
}

impl TurnTiming {
    /// The figure a person waits on: the first audible sample where a speaker played the
    /// reply, else the first audio byte (headless, or no speaker).
    pub fn wait(&self) -> Option<Duration> {
        self.first_audible.or(self.first_audio)
    }
}

/// What a server frame means to the turn timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReceivedMarks {
    /// It carries model audio.
    pub audio: bool,
    /// The server heard the user stop speaking.
    pub voice_end: bool,
}

/// What a server frame means to the turn timing.
pub fn received_marks(reading: &Reading<'_>) -> ReceivedMarks {
    ReceivedMarks {
        audio: reading.has_audio(),
        voice_end: reading.voice_ended(),
    }
}

/// Whether a client frame ends the user's turn, and how.
pub fn sent_mark(message: &ClientMessage) -> Option<TurnEnd> {
    match message {
        ClientMessage::ClientContent(content) if content.turn_complete == Some(true) => {
            Some(TurnEnd::Typed)
        }
        ClientMessage::RealtimeInput(input) if input.activity_end.is_some() => {
            Some(TurnEnd::ActivityEnd)
        }
        _ => None,
    }
}

/// Marks kept to place a frame that is taken in after a later one (see [`TurnClock`]).
const MARKS_KEPT: usize = 512;

/// Something that happened after a turn's end, for one of its figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mark {
    /// A server frame; `true` when it carries model audio.
    Frame(bool),
    /// The speaker started playing model audio.
    Audible,
}

/// The figures of the latest turns, brought up to date as frames and the speaker's news are
/// fed in.
///
/// The order they are fed in does not matter, their stamps do: a live session takes in the
/// frames it sent together with the next frame the server sends, after it, and a recording
/// keeps them as they were taken in. Each mark counts for the turn whose end it follows, and
/// a turn's end that arrives late takes back the marks after it from the turn before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnClock {
    /// In the order of their ends; the newest is still being measured.
    turns: VecDeque<TurnTiming>,
    /// At most this many are kept (the oldest go).
    keep: usize,
    /// Turns measured in all, those no longer kept included.
    measured: u64,
    /// The latest marks, bounded by [`MARKS_KEPT`].
    marks: VecDeque<(Stamp, Mark)>,
    /// The audio system's running count of underruns, as last reported.
    underruns_total: u64,
    /// That count when the newest turn ended.
    underruns_at_end: u64,
}

impl TurnClock {
    /// A clock that keeps the figures of the last `keep` turns (at least one).
    pub fn new(keep: usize) -> Self {
        TurnClock {
            turns: VecDeque::new(),
            keep: keep.max(1),
            measured: 0,
            marks: VecDeque::new(),
            underruns_total: 0,
            underruns_at_end: 0,
        }
    }

    /// The user's turn ended at `at`: a new turn is measured from there.
    pub fn user_turn_ended(&mut self, ended_by: TurnEnd, at: Stamp) {
        let turn = TurnTiming {
            ended_by,
            ended_at: at,
            first_message: None,
            first_audio: None,
            first_audible: None,
            underruns: 0,
        };
        let place = self.turns.partition_point(|t| t.ended_at <= at);
        if place == 0 && self.turns.len() == self.keep {
            // Older than every turn kept, and no room: it would be dropped at once.
            self.measured += 1;
            return;
        }
        self.turns.insert(place, turn);
        self.measured += 1;
        if place + 1 == self.turns.len() {
            self.underruns_at_end = self.underruns_total;
        }
        // The turn before gives back what came after this end.
        if let Some(before) = place.checked_sub(1) {
            let earlier = &mut self.turns[before];
            let ended = earlier.ended_at;
            for figure in [
                &mut earlier.first_message,
                &mut earlier.first_audio,
                &mut earlier.first_audible,
            ] {
                if figure.is_some_and(|f| ended + f > at) {
                    *figure = None;
                }
            }
            self.settle(before);
        }
        self.settle(place);
        if self.turns.len() > self.keep {
            self.turns.pop_front();
        }
    }

    /// The server sent a frame at `at`; `audio`: it carries model audio.
    pub fn server_frame(&mut self, audio: bool, at: Stamp) {
        self.mark(at, Mark::Frame(audio));
    }

    /// The speaker started playing model audio at `at`. It counts for a turn only at or
    /// after that turn's first audio frame: before, it is an earlier reply still heard.
    pub fn audible(&mut self, at: Stamp) {
        self.mark(at, Mark::Audible);
    }

    /// The audio system's running count of playback underruns. A count that goes back (the
    /// devices were re-opened) starts afresh.
    pub fn underruns(&mut self, total: u64) {
        if total < self.underruns_total {
            self.underruns_at_end = 0;
        }
        self.underruns_total = total;
        if let Some(turn) = self.turns.back_mut() {
            turn.underruns = total.saturating_sub(self.underruns_at_end);
        }
    }

    /// A client frame was sent at `at`.
    pub fn sent(&mut self, message: &ClientMessage, at: Stamp) {
        if let Some(ended_by) = sent_mark(message) {
            self.user_turn_ended(ended_by, at);
        }
    }

    /// A server frame was read at `at`. It counts for the turn before it, then (if it says
    /// the user stopped speaking) a new turn is measured from it.
    pub fn received(&mut self, reading: Reading<'_>, at: Stamp) {
        let marks = received_marks(&reading);
        self.server_frame(marks.audio, at);
        if marks.voice_end {
            self.user_turn_ended(TurnEnd::VoiceEnd, at);
        }
    }

    /// The turns kept, oldest first; the last is still being measured.
    pub fn turns(&self) -> impl DoubleEndedIterator<Item = &TurnTiming> + ExactSizeIterator {
        self.turns.iter()
    }

    /// The newest turn.
    pub fn last(&self) -> Option<&TurnTiming> {
        self.turns.back()
    }

    /// Turns measured in all, those no longer kept included.
    pub fn measured(&self) -> u64 {
        self.measured
    }

    fn mark(&mut self, at: Stamp, mark: Mark) {
        if self.marks.len() == MARKS_KEPT {
            self.marks.pop_front();
        }
        self.marks.push_back((at, mark));
        // The turn whose end it follows.
        if let Some(owner) = self
            .turns
            .partition_point(|t| t.ended_at < at)
            .checked_sub(1)
        {
            self.settle(owner);
        }
    }

    /// Brings the turn at `index` up to date with the marks kept: each figure is the earliest
    /// mark of its kind between the turn's end and the next turn's. Figures only move earlier,
    /// so a mark no longer kept is never lost.
    fn settle(&mut self, index: usize) {
        let until = self.turns.get(index + 1).map(|t| t.ended_at);
        let turn = &mut self.turns[index];
        let ended = turn.ended_at;
        // A frame read at the very moment a turn ended (the server's own voice end) is the
        // reply to the turn before.
        let within = |at: Stamp| at > ended && until.is_none_or(|until| at <= until);
        let earliest = |figure: &mut Option<Duration>, since: Duration| {
            if figure.is_none_or(|f| since < f) {
                *figure = Some(since);
            }
        };
        for &(at, mark) in self.marks.iter().filter(|(at, _)| within(*at)) {
            if let Mark::Frame(audio) = mark {
                earliest(&mut turn.first_message, at - ended);
                if audio {
                    earliest(&mut turn.first_audio, at - ended);
                }
            }
        }
        let Some(first_audio) = turn.first_audio else {
            return;
        };
        if turn.first_audible.is_some_and(|f| f < first_audio) {
            turn.first_audible = None;
        }
        for &(at, mark) in self.marks.iter().filter(|(at, _)| within(*at)) {
            if mark == Mark::Audible && at - ended >= first_audio {
                earliest(&mut turn.first_audible, at - ended);
            }
        }
    }
}

/// A figure in whole milliseconds, for lines and JSON.
pub fn millis(figure: Option<Duration>) -> Option<u64> {
    figure.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use livetalk_live::Inbound;

    fn ms(n: u64) -> Stamp {
        Duration::from_millis(n)
    }

    fn client(json: &str) -> ClientMessage {
        serde_json::from_str(json).unwrap()
    }

    fn server(json: &str) -> Inbound {
        Inbound::message(serde_json::from_str(json).unwrap())
    }

    fn typed() -> ClientMessage {
        client(
            r#"{"clientContent":{"turns":[{"role":"user","parts":[{"text":"hi"}]}],"turnComplete":true}}"#,
        )
    }

    fn activity_end() -> ClientMessage {
        client(r#"{"realtimeInput":{"activityEnd":{}}}"#)
    }

    fn mic_audio() -> ClientMessage {
        client(r#"{"realtimeInput":{"audio":{"mimeType":"audio/pcm;rate=16000","data":"AAAA"}}}"#)
    }

    fn model_audio() -> Inbound {
        server(
            r#"{"serverContent":{"modelTurn":{"parts":[{"inlineData":{"mimeType":"audio/pcm;rate=24000","data":"AAAA"}}]}}}"#,
        )
    }

    fn transcription() -> Inbound {
        server(r#"{"serverContent":{"inputTranscription":{"text":"hi"}}}"#)
    }

    fn voice(kind: &str) -> Inbound {
        server(&format!(r#"{{"voiceActivity":{{"type":"{kind}"}}}}"#))
    }

    #[test]
    fn a_typed_turn_is_measured_from_the_turn_sent() {
        let mut clock = TurnClock::new(20);
        clock.received(model_audio().reading().unwrap(), ms(50)); // nothing asked yet: no turn
        assert_eq!(clock.last(), None);
        clock.sent(&typed(), ms(1000));
        clock.received(transcription().reading().unwrap(), ms(1120));
        clock.received(model_audio().reading().unwrap(), ms(1400));
        clock.received(model_audio().reading().unwrap(), ms(1450));
        clock.audible(ms(1480));
        clock.audible(ms(1900)); // heard again after a pause: still the first
        let turn = clock.last().unwrap();
        assert_eq!(turn.ended_by, TurnEnd::Typed);
        assert_eq!(turn.first_message, Some(ms(120)));
        assert_eq!(turn.first_audio, Some(ms(400)));
        assert_eq!(turn.first_audible, Some(ms(480)));
        assert_eq!(turn.wait(), Some(ms(480)));
        assert_eq!(clock.measured(), 1);
    }

    #[test]
    fn a_spoken_turn_ends_at_the_servers_voice_end_or_at_activity_end() {
        let mut clock = TurnClock::new(20);
        clock.sent(&mic_audio(), ms(10));
        clock.received(voice("ACTIVITY_START").reading().unwrap(), ms(100));
        assert_eq!(clock.last(), None, "speech starting ends nothing");
        clock.received(voice("ACTIVITY_END").reading().unwrap(), ms(900));
        clock.received(model_audio().reading().unwrap(), ms(1250));
        let turn = *clock.last().unwrap();
        assert_eq!(turn.ended_by, TurnEnd::VoiceEnd);
        assert_eq!(
            turn.first_message,
            Some(ms(350)),
            "the voice end is not its own reply"
        );
        assert_eq!(turn.first_audio, Some(ms(350)));
        assert_eq!(turn.first_audible, None, "no speaker");

        clock.sent(&activity_end(), ms(3000));
        clock.received(model_audio().reading().unwrap(), ms(3200));
        let turn = clock.last().unwrap();
        assert_eq!(turn.ended_by, TurnEnd::ActivityEnd);
        assert_eq!(turn.first_audio, Some(ms(200)));
        assert_eq!(turn.wait(), Some(ms(200)));
        assert_eq!(clock.turns().len(), 2);
    }

    #[test]
    fn the_older_vad_signal_ends_a_turn_too() {
        let signal =
            server(r#"{"voiceActivityDetectionSignal":{"vadSignalType":"VAD_SIGNAL_TYPE_EOS"}}"#);
        assert_eq!(
            received_marks(&signal.reading().unwrap()),
            ReceivedMarks {
                audio: false,
                voice_end: true
            }
        );
    }

    #[test]
    fn audio_still_heard_from_an_earlier_reply_is_not_this_turns() {
        let mut clock = TurnClock::new(20);
        clock.sent(&typed(), ms(0));
        clock.audible(ms(30));
        assert_eq!(clock.last().unwrap().first_audible, None);
        clock.received(model_audio().reading().unwrap(), ms(300));
        clock.audible(ms(360));
        assert_eq!(clock.last().unwrap().first_audible, Some(ms(360)));
    }

    #[test]
    fn a_turn_without_a_reply_keeps_its_gaps_and_the_next_one_starts_fresh() {
        let mut clock = TurnClock::new(20);
        clock.sent(&typed(), ms(0));
        clock.sent(&typed(), ms(500));
        clock.received(model_audio().reading().unwrap(), ms(700));
        let turns: Vec<_> = clock.turns().copied().collect();
        assert_eq!(turns[0].first_message, None);
        assert_eq!(turns[0].first_audio, None);
        assert_eq!(turns[1].first_audio, Some(ms(200)));
    }

    #[test]
    fn underruns_count_from_the_end_of_the_turn() {
        let mut clock = TurnClock::new(20);
        clock.underruns(4); // an earlier reply's
        clock.sent(&typed(), ms(0));
        clock.received(model_audio().reading().unwrap(), ms(100));
        clock.underruns(4);
        assert_eq!(clock.last().unwrap().underruns, 0);
        clock.underruns(7);
        assert_eq!(clock.last().unwrap().underruns, 3);
        clock.sent(&typed(), ms(5000));
        clock.underruns(8);
        let turns: Vec<_> = clock.turns().map(|t| t.underruns).collect();
        assert_eq!(turns, [3, 1]);
        // The devices were opened again: their count starts at zero.
        clock.underruns(2);
        assert_eq!(clock.last().unwrap().underruns, 2);
    }

    #[test]
    fn only_the_last_turns_are_kept_but_all_are_counted() {
        let mut clock = TurnClock::new(3);
        for i in 0..5 {
            clock.sent(&typed(), ms(i * 1000));
            clock.received(
                model_audio().reading().unwrap(),
                ms(i * 1000 + 10 * (i + 1)),
            );
        }
        let waits: Vec<_> = clock.turns().map(|t| millis(t.wait())).collect();
        assert_eq!(waits, [Some(30), Some(40), Some(50)]);
        assert_eq!(clock.measured(), 5);
    }

    #[test]
    fn a_frame_sent_before_but_taken_in_after_the_reply_still_starts_the_turn() {
        let mut clock = TurnClock::new(20);
        clock.sent(&typed(), ms(0));
        clock.received(model_audio().reading().unwrap(), ms(300));
        // The next turn was sent at 1000 ms; the engine takes it in after the reply's first
        // frames (1100 ms, 1250 ms with audio), and the speaker after those.
        clock.received(transcription().reading().unwrap(), ms(1100));
        clock.received(model_audio().reading().unwrap(), ms(1250));
        clock.sent(&typed(), ms(1000));
        clock.audible(ms(1300));
        let turns: Vec<_> = clock.turns().copied().collect();
        assert_eq!(turns.len(), 2);
        assert_eq!(turns[0].first_message, Some(ms(300)));
        assert_eq!(turns[0].first_audio, Some(ms(300)));
        assert_eq!(turns[1].first_message, Some(ms(100)));
        assert_eq!(turns[1].first_audio, Some(ms(250)));
        assert_eq!(turns[1].first_audible, Some(ms(300)));
        // A frame read before this turn ended counts for the one before it.
        clock.received(transcription().reading().unwrap(), ms(200));
        let turns: Vec<_> = clock.turns().copied().collect();
        assert_eq!(turns[0].first_message, Some(ms(200)));
        assert_eq!(turns[1].first_message, Some(ms(100)));
    }

    #[test]
    fn a_late_end_takes_back_what_the_turn_before_had_counted() {
        let mut clock = TurnClock::new(20);
        clock.sent(&typed(), ms(0));
        // No reply to the first turn; the second turn's reply is taken in before its end.
        clock.received(model_audio().reading().unwrap(), ms(700));
        assert_eq!(clock.last().unwrap().first_audio, Some(ms(700)));
        clock.sent(&typed(), ms(500));
        let turns: Vec<_> = clock.turns().copied().collect();
        assert_eq!(turns[0].first_audio, None);
        assert_eq!(turns[0].first_message, None);
        assert_eq!(turns[1].first_audio, Some(ms(200)));
    }

    #[test]
    fn a_frame_before_every_turn_counts_for_none() {
        let mut clock = TurnClock::new(1);
        clock.sent(&typed(), ms(1000));
        clock.received(model_audio().reading().unwrap(), ms(990));
        assert_eq!(clock.last().unwrap().first_audio, None);
        // Older than the one turn kept, with no room for it: counted, not kept.
        clock.sent(&typed(), ms(10));
        assert_eq!(clock.turns().len(), 1);
        assert_eq!(clock.measured(), 2);
    }

    #[test]
    fn other_frames_end_no_turn() {
        assert_eq!(sent_mark(&mic_audio()), None);
        let partial = client(r#"{"clientContent":{"turnComplete":false}}"#);
        assert_eq!(sent_mark(&partial), None);
        assert_eq!(
            received_marks(&transcription().reading().unwrap()),
            ReceivedMarks::default()
        );
    }
}
