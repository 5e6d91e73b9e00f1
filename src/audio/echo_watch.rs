//! The self-interruption detector: whether what the microphone sends follows what the speaker
//! plays, frame by frame, the way an echo does and a person talking over the model does not.
//! It compares the loudness envelopes (10 ms frames, in dB) of the two over the last
//! second and a half, at the best lag an echo path could have.

use std::collections::VecDeque;

use super::pcm::energy_dbfs;

/// Frames compared (10 ms each).
const WINDOW: usize = 150;
/// The shortest window judged (just after the devices open).
const MIN_WINDOW: usize = 40;
/// Echo paths up to 400 ms: device buffers, the room, a Bluetooth speaker.
const MAX_LAG: usize = 40;
/// How often the comparison runs, in microphone frames.
const EVERY: u64 = 5;
/// The speaker counts as loud when it was above [`LOUD_DBFS`] for this share of a full window
/// (150 ms, however long the window is so far): a model that hears itself interrupts itself a
/// quarter of a second into its reply.
const LOUD_SHARE: f32 = 0.1;
const LOUD_DBFS: f32 = -40.0;
/// Below this the microphone sends nothing worth comparing; it must send something for at
/// least this share of a full window (75 ms).
const SOUND_DBFS: f32 = -55.0;
const SOUND_SHARE: f32 = 0.05;
/// Envelope correlation at and above which the microphone is taken to carry the speaker. An
/// echo alone scores about 1; a person talking over a cancelled echo stayed under 0.65, and
/// over an uncancelled one of equal level, about 0.8 (see the canceller's tests).
const TRACKING: f32 = 0.75;
/// How long a verdict of "echo" holds after it was last reached, in microphone frames: the
/// service's `interrupted` arrives a few hundred milliseconds after the audio that caused it.
const HOLD: u64 = 100;
/// Envelope floor, so silence is a level and not minus infinity.
const FLOOR_DBFS: f32 = -80.0;

/// The envelopes and the latest verdict.
#[derive(Debug, Clone)]
pub struct EchoWatch {
    speaker: VecDeque<f32>,
    microphone: VecDeque<f32>,
    mic_frames: u64,
    /// Mic frame until which the latest "echo" verdict holds.
    heard_until: u64,
    /// The best envelope correlation of the latest comparison.
    tracking: f32,
    /// The latest comparison's shares of loud speaker and of mic sound, for the log.
    shares: (f32, f32),
}

impl Default for EchoWatch {
    fn default() -> Self {
        Self::new()
    }
}

impl EchoWatch {
    pub fn new() -> Self {
        EchoWatch {
            speaker: VecDeque::with_capacity(WINDOW + MAX_LAG + 1),
            microphone: VecDeque::with_capacity(WINDOW + 1),
            mic_frames: 0,
            heard_until: 0,
            tracking: 0.0,
            shares: (0.0, 0.0),
        }
    }

    /// One 10 ms frame's mean-square energy of what the speaker played.
    pub fn reference(&mut self, energy: f32) {
        if self.speaker.len() > WINDOW + MAX_LAG {
            self.speaker.pop_front();
        }
        self.speaker.push_back(energy_dbfs(energy).max(FLOOR_DBFS));
    }

    /// One 10 ms frame's mean-square energy of what the microphone sends.
    pub fn microphone(&mut self, energy: f32) {
        if self.microphone.len() >= WINDOW {
            self.microphone.pop_front();
        }
        self.microphone
            .push_back(energy_dbfs(energy).max(FLOOR_DBFS));
        self.mic_frames += 1;
        if self.mic_frames.is_multiple_of(EVERY) && self.judge() {
            self.heard_until = self.mic_frames + HOLD;
        }
    }

    /// The speaker was loud and the microphone followed it, lately.
    pub fn echo_heard(&self) -> bool {
        self.mic_frames < self.heard_until
    }

    /// [`EchoWatch::echo_heard`], judged again on everything seen up to now: for the moment
    /// the service interrupts, when every mic frame that could have caused it has been seen.
    pub fn echo_heard_now(&mut self) -> bool {
        if self.judge() {
            self.heard_until = self.mic_frames + HOLD;
        }
        self.echo_heard()
    }

    /// The best envelope correlation of the latest comparison (−1…1).
    pub fn tracking(&self) -> f32 {
        self.tracking
    }

    /// The latest comparison's shares of the window with a loud speaker and with mic sound.
    pub fn shares(&self) -> (f32, f32) {
        self.shares
    }

    /// Compares the envelopes now.
    fn judge(&mut self) -> bool {
        self.tracking = 0.0;
        self.shares = (0.0, 0.0);
        // Right after the devices open the window is shorter: a model can hear itself in its
        // first reply.
        let n = self.microphone.len().min(self.speaker.len());
        if n < MIN_WINDOW {
            return false;
        }
        let share = |values: &mut dyn Iterator<Item = f32>, above: f32| {
            values.filter(|&v| v > above).count() as f32 / n as f32
        };
        let loud = share(
            &mut self.speaker.iter().skip(self.speaker.len() - n).copied(),
            LOUD_DBFS,
        );
        let sound = share(
            &mut self
                .microphone
                .iter()
                .skip(self.microphone.len() - n)
                .copied(),
            SOUND_DBFS,
        );
        self.shares = (loud, sound);
        if loud * (n as f32) < LOUD_SHARE * WINDOW as f32
            || sound * (n as f32) < SOUND_SHARE * WINDOW as f32
        {
            return false;
        }
        // Mic frame i (of the window) lines up with speaker frame i - lag, counted from the
        // newest end of both. Compared as linear RMS envelopes: a person's voice added to an
        // echo weighs as much as it is loud, where in dB a quiet echo under it would still
        // line up.
        let rms = |db: &f32| 10f32.powf(db / 20.0);
        let mic: Vec<f32> = self.microphone.iter().map(rms).collect();
        let speaker: Vec<f32> = self.speaker.iter().map(rms).collect();
        let mut best = f32::MIN;
        for lag in 0..=MAX_LAG {
            // While the history is short, a longer lag compares fewer frames.
            let end = speaker.len().saturating_sub(lag);
            let m = n.min(end);
            if m < MIN_WINDOW {
                break;
            }
            best = best.max(correlation(&mic[mic.len() - m..], &speaker[end - m..end]));
        }
        self.tracking = best;
        best >= TRACKING
    }
}

/// Pearson correlation of two equal-length series (0 when either is flat).
pub(super) fn correlation(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len()) as f32;
    if n == 0.0 {
        return 0.0;
    }
    let mean_a = a.iter().sum::<f32>() / n;
    let mean_b = b.iter().sum::<f32>() / n;
    let (mut ab, mut aa, mut bb) = (0.0f32, 0.0f32, 0.0f32);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (x - mean_a, y - mean_b);
        ab += x * y;
        aa += x * x;
        bb += y * y;
    }
    if aa <= f32::EPSILON || bb <= f32::EPSILON {
        0.0
    } else {
        ab / (aa * bb).sqrt()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A speech-like loudness pattern: syllables of varying length and level with pauses.
    fn syllables(seed: u64, frames: usize) -> Vec<f32> {
        let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % 1000) as f32 / 1000.0
        };
        let mut out = Vec::with_capacity(frames);
        while out.len() < frames {
            let length = 8 + (next() * 20.0) as usize;
            let level = if next() < 0.25 {
                0.0
            } else {
                0.02 + next() * 0.2
            };
            out.extend(std::iter::repeat_n(level * level, length));
        }
        out.truncate(frames);
        out
    }

    fn run(speaker: &[f32], microphone: &[f32]) -> EchoWatch {
        let mut watch = EchoWatch::new();
        for (s, m) in speaker.iter().zip(microphone) {
            watch.reference(*s);
            watch.microphone(*m);
        }
        watch
    }

    #[test]
    fn a_delayed_quieter_copy_of_the_speaker_is_echo() {
        let speaker = syllables(1, 400);
        // 120 ms later and 20 dB down, over a little noise.
        let microphone: Vec<f32> = (0..speaker.len())
            .map(|i| i.checked_sub(12).map_or(0.0, |j| speaker[j] * 0.01) + 1e-7)
            .collect();
        let watch = run(&speaker, &microphone);
        assert!(watch.echo_heard(), "tracking {:.2}", watch.tracking());
        assert!(watch.tracking() > 0.9);
    }

    /// A model that hears itself in its first reply, under a second after the devices opened:
    /// the history is short, and the echo lags by more frames than it has of overlap to spare.
    #[test]
    fn an_echo_right_after_the_devices_open_is_echo() {
        let mut speaker = vec![0.0; 30];
        speaker.extend(syllables(3, 25));
        speaker.extend(vec![0.0; 28]);
        let microphone: Vec<f32> = (0..speaker.len())
            .map(|i| i.checked_sub(16).map_or(0.0, |j| speaker[j] * 0.1))
            .collect();
        let mut watch = EchoWatch::new();
        for (s, m) in speaker.iter().zip(&microphone) {
            watch.reference(*s);
            watch.microphone(*m);
        }
        assert!(watch.echo_heard_now(), "tracking {:.2}", watch.tracking());
    }

    #[test]
    fn a_person_talking_over_the_speaker_is_not_echo() {
        let speaker = syllables(1, 400);
        for seed in 2..12 {
            let person = syllables(seed, 400);
            let watch = run(&speaker, &person);
            assert!(
                !watch.echo_heard(),
                "seed {seed}: tracking {:.2}",
                watch.tracking()
            );
        }
    }

    #[test]
    fn a_quiet_speaker_or_a_silent_microphone_is_never_echo() {
        let speaker = syllables(1, 400);
        let silent = vec![0.0; 400];
        assert!(!run(&speaker, &silent).echo_heard(), "gated or cancelled");
        let quiet: Vec<f32> = speaker.iter().map(|e| e * 1e-6).collect();
        assert!(!run(&quiet, &quiet).echo_heard(), "the speaker is quiet");
    }

    #[test]
    fn the_verdict_holds_for_a_second_then_lapses() {
        let speaker = syllables(1, 300);
        let mut watch = run(&speaker, &speaker);
        assert!(watch.echo_heard());
        let silence = |watch: &mut EchoWatch, frames: u64| {
            for _ in 0..frames {
                watch.reference(0.0);
                watch.microphone(0.0);
            }
        };
        // A window of silence: no new verdict, but the last one (reached while the echo was
        // still a third of the window) holds, as for an `interrupted` still on its way.
        silence(&mut watch, WINDOW as u64);
        assert!(watch.echo_heard());
        silence(&mut watch, HOLD);
        assert!(!watch.echo_heard());
    }
}
