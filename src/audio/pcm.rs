//! Sample conversions shared by capture, playback, the WAV files and the benches: PCM16 LE
//! bytes to and from `f32`, downmixing, peak and energy levels, fixed-size framing, the
//! microphone rate the Live API takes, and how a rate conversion is shown.

/// The Live API's input rate.
pub const INPUT_RATE: u32 = 16_000;

/// `f32` in [-1, 1] per PCM16 step.
const I16_SCALE: f32 = 32_768.0;

/// One PCM16 sample as `f32` in [-1, 1).
pub fn i16_to_f32(sample: i16) -> f32 {
    f32::from(sample) / I16_SCALE
}

/// One `f32` sample as PCM16, clipped rather than wrapped.
pub fn f32_to_i16(sample: f32) -> i16 {
    (sample * I16_SCALE).round().clamp(-32_768.0, 32_767.0) as i16
}

/// Appends little-endian PCM16 bytes as `f32` samples (a trailing odd byte is ignored).
pub fn extend_f32_from_pcm16_le(bytes: &[u8], out: &mut Vec<f32>) {
    out.extend(
        bytes
            .chunks_exact(2)
            .map(|b| i16_to_f32(i16::from_le_bytes([b[0], b[1]]))),
    );
}

/// Appends `f32` samples as little-endian PCM16 bytes.
pub fn extend_pcm16_le_from_f32(samples: &[f32], out: &mut Vec<u8>) {
    out.reserve(samples.len() * 2);
    for &s in samples {
        out.extend_from_slice(&f32_to_i16(s).to_le_bytes());
    }
}

/// The mean of one interleaved frame's channels: mono without clipping.
#[inline]
pub fn downmix(frame: &[f32]) -> f32 {
    if frame.len() == 1 {
        return frame[0];
    }
    frame.iter().sum::<f32>() / frame.len().max(1) as f32
}

/// The largest absolute sample, 0 for no samples.
#[inline]
pub fn peak(samples: &[f32]) -> f32 {
    samples.iter().fold(0.0f32, |m, s| m.max(s.abs()))
}

/// The largest absolute sample of PCM16 little-endian bytes, 0 to 1 (0 for none): a frame's
/// level as it went over the wire, read in place.
pub fn peak_pcm16_le(bytes: &[u8]) -> f32 {
    let peak = bytes
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]).unsigned_abs())
        .max()
        .unwrap_or(0);
    peak as f32 / 32768.0
}

/// A level in dBFS for meters and logs (-inf clamped to -96).
pub fn dbfs(level: f32) -> f32 {
    if level <= 0.0 {
        -96.0
    } else {
        (20.0 * level.log10()).max(-96.0)
    }
}

/// Cuts a stream of samples into frames of a fixed length, carrying the remainder.
#[derive(Debug, Clone)]
pub struct Framer {
    frame_len: usize,
    partial: Vec<f32>,
}

impl Framer {
    pub fn new(frame_len: usize) -> Self {
        let frame_len = frame_len.max(1);
        Framer {
            frame_len,
            partial: Vec::with_capacity(frame_len),
        }
    }

    pub fn frame_len(&self) -> usize {
        self.frame_len
    }

    /// Samples held back waiting for a full frame.
    pub fn pending(&self) -> usize {
        self.partial.len()
    }

    /// Adds samples; calls `frame` with every frame they complete, in order.
    pub fn push(&mut self, mut samples: &[f32], mut frame: impl FnMut(&[f32])) {
        while !samples.is_empty() {
            if self.partial.is_empty() && samples.len() >= self.frame_len {
                let (whole, rest) = samples.split_at(self.frame_len);
                frame(whole);
                samples = rest;
                continue;
            }
            let take = (self.frame_len - self.partial.len()).min(samples.len());
            self.partial.extend_from_slice(&samples[..take]);
            samples = &samples[take..];
            if self.partial.len() == self.frame_len {
                frame(&self.partial);
                self.partial.clear();
            }
        }
    }

    /// Drops the partial frame.
    pub fn clear(&mut self) {
        self.partial.clear();
    }
}

/// The best normalised cross-correlation of `reference` inside `signal`, searching lags
/// around `near` (± `span` samples): how the tests and benches measure that a voice came
/// through.
pub fn best_correlation(signal: &[f32], reference: &[f32], near: usize, span: usize) -> f64 {
    let energy = |x: &[f32]| x.iter().map(|v| f64::from(*v) * f64::from(*v)).sum::<f64>();
    let ref_energy = energy(reference);
    let mut best = 0.0f64;
    for lag in near.saturating_sub(span)..=near + span {
        if lag + reference.len() > signal.len() {
            break;
        }
        let window = &signal[lag..lag + reference.len()];
        let dot: f64 = window
            .iter()
            .zip(reference)
            .map(|(a, b)| f64::from(*a) * f64::from(*b))
            .sum();
        let norm = (energy(window) * ref_energy).sqrt();
        if norm > 0.0 {
            best = best.max(dot / norm);
        }
    }
    best
}

/// Mean-square energy as dBFS (a full-scale sine is −3 dBFS), floored at −100.
pub fn energy_dbfs(energy: f32) -> f32 {
    10.0 * energy.max(1e-10).log10()
}

/// Mean power of the 10 ms windows louder than −40 dBFS, in dBFS: the level of speech while it
/// sounds, not diluted by its pauses (how the echo rigs set and compare levels). `None` when
/// no window is that loud.
pub fn speech_level_dbfs(samples: &[f32], rate: u32) -> Option<f64> {
    let window = (rate / 100).max(1) as usize;
    let powers: Vec<f64> = samples
        .chunks_exact(window)
        .map(|w| w.iter().map(|v| f64::from(*v).powi(2)).sum::<f64>() / window as f64)
        .filter(|p| *p > 1e-4)
        .collect();
    (!powers.is_empty()).then(|| 10.0 * (powers.iter().sum::<f64>() / powers.len() as f64).log10())
}

/// "48 kHz → 16 kHz" (or just "16 kHz" when no conversion is needed).
pub fn rate_path(from: u32, to: u32) -> String {
    fn khz(rate: u32) -> String {
        if rate.is_multiple_of(1000) {
            format!("{} kHz", rate / 1000)
        } else {
            format!("{:.1} kHz", f64::from(rate) / 1000.0)
        }
    }
    if from == to {
        khz(from)
    } else {
        format!("{} → {}", khz(from), khz(to))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcm16_round_trips_through_f32() {
        let samples: Vec<i16> = vec![0, 1, -1, 12_345, -32_768, 32_767];
        let bytes: Vec<u8> = samples.iter().flat_map(|s| s.to_le_bytes()).collect();
        let mut floats = Vec::new();
        extend_f32_from_pcm16_le(&bytes, &mut floats);
        let mut back = Vec::new();
        extend_pcm16_le_from_f32(&floats, &mut back);
        assert_eq!(back, bytes);
    }

    #[test]
    fn f32_beyond_full_scale_clips() {
        assert_eq!(f32_to_i16(1.5), 32_767);
        assert_eq!(f32_to_i16(-1.5), -32_768);
    }

    #[test]
    fn downmix_averages_channels() {
        assert_eq!(downmix(&[0.5, -0.5]), 0.0);
        assert_eq!(downmix(&[0.25]), 0.25);
        assert!((downmix(&[0.2, 0.4, 0.6]) - 0.4).abs() < 1e-6);
    }

    #[test]
    fn framer_emits_whole_frames_in_order_and_keeps_the_rest() {
        let mut framer = Framer::new(320);
        let input: Vec<f32> = (0..1000).map(|i| i as f32).collect();
        let mut frames: Vec<Vec<f32>> = Vec::new();
        // Uneven pushes, as the capture ring delivers them.
        for piece in input.chunks(137) {
            framer.push(piece, |f| frames.push(f.to_vec()));
        }
        assert_eq!(frames.len(), 3);
        assert!(frames.iter().all(|f| f.len() == 320));
        let joined: Vec<f32> = frames.concat();
        assert_eq!(joined, input[..960]);
        assert_eq!(framer.pending(), 40);
    }

    #[test]
    fn levels_in_dbfs() {
        assert_eq!(dbfs(0.0), -96.0);
        assert!((dbfs(1.0)).abs() < 1e-6);
        assert!((dbfs(0.5) + 6.02).abs() < 0.01);
        assert_eq!(peak(&[0.1, -0.7, 0.3]), 0.7);
    }
}
