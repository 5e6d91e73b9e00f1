//! Energy-based voice activity detection for the mock's audio turns: where the user's speech starts and ends.

use std::time::Duration;

/// Analysis frame length: short enough to react quickly, long enough to span a pitch period.
const FRAME: Duration = Duration::from_millis(20);
const DEFAULT_THRESHOLD_DBFS: f64 = -40.0;
const DEFAULT_START_AFTER: Duration = Duration::from_millis(100);
const DEFAULT_END_AFTER: Duration = Duration::from_millis(600);

/// A change in whether the user is speaking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VadEvent {
    /// Enough voiced audio has arrived to call it speech.
    SpeechStarted,
    /// Enough silence followed the speech; `speech` runs from its first to its last voiced frame.
    SpeechEnded { speech: Duration },
}

/// Splits a PCM16 stream into speech and silence by frame energy.
#[derive(Debug, Clone)]
pub(crate) struct EnergyVad {
    frame_len: usize,
    frame_duration: Duration,
    threshold_dbfs: f64,
    start_frames: u64,
    end_frames: u64,
    /// Samples of the frame still being filled, carried between `push` calls.
    partial: Vec<i16>,
    /// Index of the next frame to be analysed.
    frame_index: u64,
    state: State,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    Silence { voiced_run: u64 },
    Speech { first_voiced: u64, last_voiced: u64 },
}

impl EnergyVad {
    /// A detector for PCM16 mono at `sample_rate`: a frame is voiced above -40 dBFS, 100 ms of
    /// voiced frames start speech and 600 ms of silence end it.
    pub(crate) fn new(sample_rate: u32) -> Self {
        let frame_len =
            ((u64::from(sample_rate) * FRAME.as_millis() as u64) / 1000).max(1) as usize;
        let frame_duration =
            Duration::from_secs_f64(frame_len as f64 / f64::from(sample_rate.max(1)));
        Self {
            frame_len,
            frame_duration,
            threshold_dbfs: DEFAULT_THRESHOLD_DBFS,
            start_frames: frames_in(DEFAULT_START_AFTER),
            end_frames: frames_in(DEFAULT_END_AFTER),
            partial: Vec::with_capacity(frame_len),
            frame_index: 0,
            state: State::Silence { voiced_run: 0 },
        }
    }

    /// Feeds audio of any length; returns the events it completed, in order.
    pub(crate) fn push(&mut self, pcm: &[i16]) -> Vec<VadEvent> {
        let mut events = Vec::new();
        let mut rest = pcm;
        while !rest.is_empty() {
            let wanted = self.frame_len - self.partial.len();
            let (head, tail) = rest.split_at(wanted.min(rest.len()));
            rest = tail;
            if self.partial.is_empty() && head.len() == self.frame_len {
                events.extend(self.frame(head));
            } else {
                self.partial.extend_from_slice(head);
                if self.partial.len() == self.frame_len {
                    let frame = std::mem::take(&mut self.partial);
                    events.extend(self.frame(&frame));
                    self.partial = frame;
                    self.partial.clear();
                }
            }
        }
        events
    }

    /// Whether the detector is inside speech (after `SpeechStarted`, before `SpeechEnded`).
    #[cfg(test)]
    pub(crate) fn in_speech(&self) -> bool {
        matches!(self.state, State::Speech { .. })
    }

    /// Ends speech that is still open because the stream stopped (e.g. `audioStreamEnd`).
    pub(crate) fn end_of_stream(&mut self) -> Option<VadEvent> {
        self.partial.clear();
        match self.state {
            State::Speech {
                first_voiced,
                last_voiced,
            } => {
                self.state = State::Silence { voiced_run: 0 };
                Some(self.ended(first_voiced, last_voiced))
            }
            State::Silence { .. } => {
                self.state = State::Silence { voiced_run: 0 };
                None
            }
        }
    }

    fn frame(&mut self, frame: &[i16]) -> Option<VadEvent> {
        let index = self.frame_index;
        self.frame_index += 1;
        let voiced = dbfs(frame) > self.threshold_dbfs;
        match (self.state, voiced) {
            (State::Silence { voiced_run }, true) => {
                let run = voiced_run + 1;
                if run >= self.start_frames {
                    // Speech began with the first frame of the run, not when we became sure.
                    self.state = State::Speech {
                        first_voiced: index + 1 - run,
                        last_voiced: index,
                    };
                    Some(VadEvent::SpeechStarted)
                } else {
                    self.state = State::Silence { voiced_run: run };
                    None
                }
            }
            (State::Silence { .. }, false) => {
                self.state = State::Silence { voiced_run: 0 };
                None
            }
            (State::Speech { first_voiced, .. }, true) => {
                self.state = State::Speech {
                    first_voiced,
                    last_voiced: index,
                };
                None
            }
            (
                State::Speech {
                    first_voiced,
                    last_voiced,
                },
                false,
            ) => {
                if index - last_voiced >= self.end_frames {
                    self.state = State::Silence { voiced_run: 0 };
                    Some(self.ended(first_voiced, last_voiced))
                } else {
                    None
                }
            }
        }
    }

    fn ended(&self, first_voiced: u64, last_voiced: u64) -> VadEvent {
        let frames = u32::try_from(last_voiced - first_voiced + 1).unwrap_or(u32::MAX);
        VadEvent::SpeechEnded {
            speech: self.frame_duration * frames,
        }
    }
}

fn frames_in(duration: Duration) -> u64 {
    (duration.as_millis() as u64)
        .div_ceil(FRAME.as_millis() as u64)
        .max(1)
}

/// Frame level relative to full scale; silence is -inf.
fn dbfs(frame: &[i16]) -> f64 {
    if frame.is_empty() {
        return f64::NEG_INFINITY;
    }
    let energy: f64 = frame.iter().map(|&s| f64::from(s) * f64::from(s)).sum();
    let rms = (energy / frame.len() as f64).sqrt();
    20.0 * (rms / 32_768.0).log10()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::XorShift;
    use crate::voice::{self, SAMPLE_RATE};

    fn silence(duration: Duration) -> Vec<i16> {
        vec![0; (duration.as_secs_f64() * f64::from(SAMPLE_RATE)) as usize]
    }

    /// White noise at about `level` RMS, the same on every run.
    fn noise(duration: Duration, level: f64) -> Vec<i16> {
        let mut rng = XorShift::new(0x2545_f491_4f6c_dd1d);
        (0..(duration.as_secs_f64() * f64::from(SAMPLE_RATE)) as usize)
            // Uniform noise in [-a, a] has RMS a/√3.
            .map(|_| ((rng.unit() * 2.0 - 1.0) * level * 3_f64.sqrt()) as i16)
            .collect()
    }

    fn feed(vad: &mut EnergyVad, pcm: &[i16], chunk: usize) -> Vec<VadEvent> {
        pcm.chunks(chunk)
            .flat_map(|piece| vad.push(piece))
            .collect()
    }

    /// One second of the synthetic voice (its speaking time is 1.2 s; cut to exactly 1 s).
    fn one_second_of_voice() -> Vec<i16> {
        let mut speech = voice::synthetic_speech("please turn on");
        speech.truncate(SAMPLE_RATE as usize);
        assert_eq!(speech.len(), SAMPLE_RATE as usize);
        speech
    }

    fn voice_between_silences(speech: &[i16]) -> Vec<i16> {
        let mut pcm = silence(Duration::from_millis(500));
        pcm.extend_from_slice(speech);
        pcm.extend(silence(Duration::from_millis(1_000)));
        pcm
    }

    fn assert_one_utterance(events: &[VadEvent], truth: Duration) {
        let [VadEvent::SpeechStarted, VadEvent::SpeechEnded { speech }] = events else {
            panic!("expected start then end, got {events:?}");
        };
        let error = speech.as_secs_f64() - truth.as_secs_f64();
        assert!(error.abs() <= 0.15, "speech {speech:?} vs truth {truth:?}");
    }

    #[test]
    fn silence_produces_nothing() {
        let mut vad = EnergyVad::new(SAMPLE_RATE);
        assert!(feed(&mut vad, &silence(Duration::from_secs(3)), 480).is_empty());
        assert!(!vad.in_speech());
    }

    #[test]
    fn one_second_of_voice_between_silences() {
        let mut vad = EnergyVad::new(SAMPLE_RATE);
        let pcm = voice_between_silences(&one_second_of_voice());
        let events = feed(&mut vad, &pcm, 480);
        assert_one_utterance(&events, Duration::from_secs(1));
        assert!(!vad.in_speech());
    }

    #[test]
    fn in_speech_follows_the_events() {
        let mut vad = EnergyVad::new(SAMPLE_RATE);
        let mut events = vad.push(&silence(Duration::from_millis(300)));
        assert!(!vad.in_speech());
        events.extend(vad.push(&one_second_of_voice()));
        assert_eq!(events, vec![VadEvent::SpeechStarted]);
        assert!(vad.in_speech());
        // Less silence than the end delay keeps the turn open.
        assert!(vad.push(&silence(Duration::from_millis(300))).is_empty());
        assert!(vad.in_speech());
        let ended = vad.push(&silence(Duration::from_millis(500)));
        assert!(
            matches!(ended.as_slice(), [VadEvent::SpeechEnded { .. }]),
            "{ended:?}"
        );
        assert!(!vad.in_speech());
    }

    #[test]
    fn odd_chunk_sizes_give_the_same_events() {
        let pcm = voice_between_silences(&one_second_of_voice());
        let mut reference = EnergyVad::new(SAMPLE_RATE);
        let expected = reference.push(&pcm);
        assert_one_utterance(&expected, Duration::from_secs(1));
        for chunk in [1, 7, 333, 479, 481, 4_097] {
            let mut vad = EnergyVad::new(SAMPLE_RATE);
            assert_eq!(feed(&mut vad, &pcm, chunk), expected, "chunk size {chunk}");
        }
    }

    #[test]
    fn low_noise_below_the_threshold_is_ignored() {
        let mut vad = EnergyVad::new(SAMPLE_RATE);
        // RMS 100 is about -50 dBFS, well under the -40 dBFS threshold.
        assert!(feed(&mut vad, &noise(Duration::from_secs(3), 100.0), 480).is_empty());
        // The same noise under a real utterance doesn't hide it.
        let speech = one_second_of_voice();
        let floor = noise(Duration::from_millis(2_500), 100.0);
        let mut pcm = voice_between_silences(&speech);
        for (sample, hiss) in pcm.iter_mut().zip(floor) {
            *sample = sample.saturating_add(hiss);
        }
        let mut vad = EnergyVad::new(SAMPLE_RATE);
        assert_one_utterance(&feed(&mut vad, &pcm, 480), Duration::from_secs(1));
    }

    #[test]
    fn short_clicks_do_not_start_speech() {
        let mut vad = EnergyVad::new(SAMPLE_RATE);
        let mut pcm = silence(Duration::from_millis(200));
        pcm.extend(noise(Duration::from_millis(60), 5_000.0));
        pcm.extend(silence(Duration::from_millis(800)));
        assert!(feed(&mut vad, &pcm, 480).is_empty());
    }

    #[test]
    fn synthesized_reply_is_one_utterance() {
        // Whichever voice is installed (espeak-ng or synthetic), a short reply is one turn.
        let speech = voice::synthesize("Is the living room lamp on?");
        let mut vad = EnergyVad::new(SAMPLE_RATE);
        let events = feed(&mut vad, &voice_between_silences(&speech), 960);
        let clip = Duration::from_secs_f64(speech.len() as f64 / f64::from(SAMPLE_RATE));
        let [
            VadEvent::SpeechStarted,
            VadEvent::SpeechEnded { speech: heard },
        ] = events.as_slice()
        else {
            panic!("expected start then end, got {events:?}");
        };
        assert!(
            *heard <= clip + FRAME,
            "{heard:?} longer than the {clip:?} clip"
        );
        assert!(
            *heard >= clip / 2,
            "{heard:?} is much shorter than the {clip:?} clip"
        );
    }

    #[test]
    fn end_of_stream_closes_open_speech() {
        let mut vad = EnergyVad::new(16_000);
        let tone: Vec<i16> = (0..16_000)
            .map(|i| {
                (8_000.0 * (std::f64::consts::TAU * 200.0 * f64::from(i) / 16_000.0).sin()) as i16
            })
            .collect();
        assert_eq!(vad.push(&tone), vec![VadEvent::SpeechStarted]);
        assert_eq!(
            vad.end_of_stream(),
            Some(VadEvent::SpeechEnded {
                speech: Duration::from_secs(1)
            })
        );
        assert_eq!(vad.end_of_stream(), None);
    }
}
