//! What a connection hears of the user: the mic audio, saved when the server was asked to,
//! and where speech starts and ends, found by energy VAD or told by the client's own activity
//! signals when it turned automatic detection off.

use std::sync::atomic::Ordering;
use std::time::Duration;

use livetalk_live::events::pcm16_from_le_bytes;
use livetalk_live::wav::WavSink;
use livetalk_live::wire::{Blob, INPUT_SAMPLE_RATE};

use crate::state::MockState;
use crate::vad::{EnergyVad, VadEvent};

/// The user's side of one connection's audio.
pub(crate) struct Hearing {
    /// The detector, for the rate the audio comes at.
    vad: Option<(u32, EnergyVad)>,
    /// Between the client's `activityStart` and `activityEnd`: the rate and samples heard.
    activity: Option<(u32, usize)>,
    /// The mic audio received, saved when the server was started with `--save-input`.
    saved_input: Option<WavSink>,
}

/// What one chunk of mic audio was.
pub(crate) struct Heard {
    /// How long it lasts, in seconds.
    pub(crate) seconds: f64,
    /// Where the detector found speech starting or ending in it.
    pub(crate) events: Vec<VadEvent>,
}

impl Hearing {
    /// Numbers the connection and opens its input file, when the server saves input.
    pub(crate) fn new(state: &MockState) -> Self {
        let saved_input = state.save_input.as_ref().and_then(|dir| {
            let n = state.accepted.fetch_add(1, Ordering::Relaxed) + 1;
            WavSink::create(&dir.join(format!("input-{n}.wav")), INPUT_SAMPLE_RATE)
                .map_err(|e| tracing::warn!("{e:#}"))
                .ok()
        });
        Hearing {
            vad: None,
            activity: None,
            saved_input,
        }
    }

    /// The client says the user started speaking.
    pub(crate) fn activity_start(&mut self) {
        self.activity = Some((INPUT_SAMPLE_RATE, 0));
    }

    /// Takes a chunk of mic audio: saves it, then counts it toward the client's activity when
    /// `manual`, or feeds it to the detector.
    pub(crate) fn audio(&mut self, blob: &Blob, manual: bool) -> Heard {
        let rate = blob.declared_rate().unwrap_or(INPUT_SAMPLE_RATE);
        if let Some(sink) = &mut self.saved_input
            && rate == INPUT_SAMPLE_RATE
        {
            // Header kept current, so the file is complete whenever it is read.
            let saved = sink
                .write_pcm16_le(&blob.data)
                .and_then(|_full| sink.sync());
            if let Err(e) = saved {
                tracing::warn!("{e:#}");
                self.saved_input = None;
            }
        }
        let samples = pcm16_from_le_bytes(&blob.data);
        let seconds = samples.len() as f64 / f64::from(rate);
        let events = if manual {
            if let Some((_, count)) = &mut self.activity {
                *count += samples.len();
            }
            Vec::new()
        } else {
            if self.vad.as_ref().map(|(r, _)| *r) != Some(rate) {
                self.vad = Some((rate, EnergyVad::new(rate)));
            }
            match &mut self.vad {
                Some((_, vad)) => vad.push(&samples),
                None => Vec::new(),
            }
        };
        Heard { seconds, events }
    }

    /// The client says the user stopped speaking: how long they spoke, if they had started.
    pub(crate) fn activity_end(&mut self) -> Option<Duration> {
        let (rate, count) = self.activity.take()?;
        Some(Duration::from_secs_f64(count as f64 / f64::from(rate)))
    }

    /// The mic stopped (`audioStreamEnd`): an utterance still open ends here.
    pub(crate) fn stream_end(&mut self) -> Option<Duration> {
        match self.vad.as_mut().and_then(|(_, vad)| vad.end_of_stream()) {
            Some(VadEvent::SpeechEnded { speech }) => Some(speech),
            _ => None,
        }
    }
}
