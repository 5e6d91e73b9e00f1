//! Streaming mono sample-rate conversion on rubato's FFT resampler: arbitrary-length pushes
//! in, output aligned with the input (the filter delay trimmed), a flush for the tail of a
//! stream and a reset for barge-in. Allocation happens only while buffers grow.

use rubato::audioadapter_buffers::direct::InterleavedSlice;
use rubato::{Fft, FixedSync, Resampler};

/// Converts a mono `f32` stream from one rate to another.
pub struct StreamResampler {
    rate_in: u32,
    rate_out: u32,
    /// `None` when the rates are equal: samples pass through.
    fft: Option<Fft<f32>>,
    /// Input waiting for a whole chunk.
    pending: Vec<f32>,
    /// One chunk's output.
    scratch: Vec<f32>,
    /// Leading output frames still to drop (the filter's delay).
    trim: usize,
    /// Input frames accepted and output frames emitted since the last reset.
    frames_in: u64,
    frames_out: u64,
}

impl std::fmt::Debug for StreamResampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamResampler")
            .field("rate_in", &self.rate_in)
            .field("rate_out", &self.rate_out)
            .finish_non_exhaustive()
    }
}

impl StreamResampler {
    /// A resampler from `rate_in` to `rate_out` Hz working in 10 ms chunks.
    pub fn new(rate_in: u32, rate_out: u32) -> anyhow::Result<Self> {
        anyhow::ensure!(
            rate_in > 0 && rate_out > 0,
            "cannot resample {rate_in} Hz to {rate_out} Hz"
        );
        let fft = if rate_in == rate_out {
            None
        } else {
            let chunk = (rate_in as usize / 100).max(1);
            Some(
                Fft::<f32>::new(
                    rate_in as usize,
                    rate_out as usize,
                    chunk,
                    1,
                    FixedSync::Input,
                )
                .map_err(|e| {
                    anyhow::anyhow!("cannot resample {rate_in} Hz to {rate_out} Hz: {e}")
                })?,
            )
        };
        let (trim, scratch) = match &fft {
            Some(fft) => (fft.output_delay(), vec![0.0; fft.output_frames_max()]),
            None => (0, Vec::new()),
        };
        Ok(StreamResampler {
            rate_in,
            rate_out,
            pending: Vec::with_capacity(fft.as_ref().map_or(0, |f| f.input_frames_max() * 2)),
            fft,
            scratch,
            trim,
            frames_in: 0,
            frames_out: 0,
        })
    }

    pub fn rate_in(&self) -> u32 {
        self.rate_in
    }

    pub fn rate_out(&self) -> u32 {
        self.rate_out
    }

    /// The filter's delay in output frames (trimmed from the output, but still latency).
    pub fn delay_frames(&self) -> usize {
        self.fft.as_ref().map_or(0, |f| f.output_delay())
    }

    /// Converts `input`, appending whatever output is ready to `out`.
    pub fn push(&mut self, input: &[f32], out: &mut Vec<f32>) {
        self.frames_in += input.len() as u64;
        if self.fft.is_none() {
            out.extend_from_slice(input);
            self.frames_out += input.len() as u64;
            return;
        }
        self.pending.extend_from_slice(input);
        self.drain_chunks(out);
    }

    /// Emits the rest of the stream: pads with silence until every input frame has come out,
    /// so the tail of a turn is never cut off. The resampler is then ready for a new stream.
    pub fn flush(&mut self, out: &mut Vec<f32>) {
        if self.fft.is_some() {
            let expected = self.expected_out();
            let chunk = self.fft.as_ref().map_or(1, |f| f.input_frames_next());
            // Each padding chunk brings out at least one chunk of output; bounded either way.
            let mut guard = 0;
            while self.frames_out < expected && guard < 64 {
                let need = chunk - self.pending.len() % chunk;
                self.pending.extend(std::iter::repeat_n(0.0, need));
                let before = out.len();
                self.drain_chunks(out);
                let over = self.frames_out.saturating_sub(expected) as usize;
                let keep = (out.len() - before).saturating_sub(over);
                out.truncate(before + keep);
                self.frames_out = self.frames_out.min(expected);
                guard += 1;
            }
        }
        self.reset();
    }

    /// A whole clip from `rate_in` to `rate_out` Hz, its tail included (a file, a test's
    /// phrase).
    pub fn whole(samples: &[f32], rate_in: u32, rate_out: u32) -> anyhow::Result<Vec<f32>> {
        let mut resampler = StreamResampler::new(rate_in, rate_out)?;
        let mut out = Vec::with_capacity(
            (samples.len() as u64 * u64::from(rate_out) / u64::from(rate_in.max(1))) as usize + 1,
        );
        resampler.push(samples, &mut out);
        resampler.flush(&mut out);
        Ok(out)
    }

    /// Forgets everything buffered (barge-in): the next push starts a fresh stream.
    pub fn reset(&mut self) {
        if let Some(fft) = &mut self.fft {
            fft.reset();
            self.trim = fft.output_delay();
        }
        self.pending.clear();
        self.frames_in = 0;
        self.frames_out = 0;
    }

    fn expected_out(&self) -> u64 {
        (self.frames_in as f64 * f64::from(self.rate_out) / f64::from(self.rate_in)).round() as u64
    }

    fn drain_chunks(&mut self, out: &mut Vec<f32>) {
        let Some(fft) = &mut self.fft else { return };
        let mut offset = 0;
        loop {
            let need = fft.input_frames_next();
            if self.pending.len() - offset < need {
                break;
            }
            let input = &self.pending[offset..offset + need];
            let produced = match (
                InterleavedSlice::new(input, 1, need),
                InterleavedSlice::new_mut(&mut self.scratch, 1, fft.output_frames_max()),
            ) {
                (Ok(adapter_in), Ok(mut adapter_out)) => fft
                    .process_into_buffer(&adapter_in, &mut adapter_out, None)
                    .map(|(_, produced)| produced)
                    .unwrap_or(0),
                _ => 0,
            };
            offset += need;
            let skip = self.trim.min(produced);
            self.trim -= skip;
            out.extend_from_slice(&self.scratch[skip..produced]);
            self.frames_out += (produced - skip) as u64;
        }
        self.pending.drain(..offset);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone(rate: u32, hz: f32, seconds: f32) -> Vec<f32> {
        let n = (rate as f32 * seconds) as usize;
        (0..n)
            .map(|i| 0.5 * (std::f32::consts::TAU * hz * i as f32 / rate as f32).sin())
            .collect()
    }

    /// Frequency by counting rising zero crossings (enough for a clean tone).
    fn frequency(samples: &[f32], rate: u32) -> f32 {
        let crossings = samples
            .windows(2)
            .filter(|w| w[0] < 0.0 && w[1] >= 0.0)
            .count();
        crossings as f32 * rate as f32 / samples.len() as f32
    }

    fn resample_all(rate_in: u32, rate_out: u32, input: &[f32], piece: usize) -> Vec<f32> {
        let mut resampler = StreamResampler::new(rate_in, rate_out).unwrap();
        let mut out = Vec::new();
        for chunk in input.chunks(piece) {
            resampler.push(chunk, &mut out);
        }
        resampler.flush(&mut out);
        out
    }

    #[test]
    fn output_length_matches_the_rate_ratio_exactly() {
        for (rate_in, rate_out) in [
            (48_000, 16_000),
            (44_100, 16_000),
            (24_000, 48_000),
            (24_000, 44_100),
            (16_000, 16_000),
        ] {
            let input = tone(rate_in, 440.0, 1.234);
            let out = resample_all(rate_in, rate_out, &input, 333);
            let expected =
                (input.len() as f64 * f64::from(rate_out) / f64::from(rate_in)).round() as usize;
            assert_eq!(out.len(), expected, "{rate_in} -> {rate_out}");
        }
    }

    #[test]
    fn a_1khz_tone_stays_1khz_at_16khz() {
        let input = tone(48_000, 1000.0, 1.0);
        let out = resample_all(48_000, 16_000, &input, 480);
        // Skip the edges, where the filter rings.
        let f = frequency(&out[800..out.len() - 800], 16_000);
        assert!((f - 1000.0).abs() < 5.0, "measured {f} Hz");
        let level = super::super::pcm::peak(&out[800..out.len() - 800]);
        assert!((level - 0.5).abs() < 0.02, "level {level}");
    }

    #[test]
    fn output_is_aligned_with_input_no_leading_delay() {
        // A click at 100 ms must come out at 100 ms, not 100 ms plus the filter delay.
        let mut input = vec![0.0f32; 24_000];
        input[2400] = 1.0;
        let out = resample_all(24_000, 48_000, &input, 240);
        let at = out
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
            .map(|(i, _)| i)
            .unwrap();
        assert!((at as i64 - 4800).abs() <= 2, "click at {at}");
    }

    #[test]
    fn reset_drops_everything_buffered() {
        let mut resampler = StreamResampler::new(24_000, 48_000).unwrap();
        let mut out = Vec::new();
        resampler.push(&tone(24_000, 440.0, 0.105), &mut out);
        resampler.reset();
        out.clear();
        resampler.push(&vec![0.0; 2400], &mut out);
        resampler.flush(&mut out);
        assert_eq!(out.len(), 4800);
        assert!(super::super::pcm::peak(&out) < 1e-4, "old audio leaked");
    }
}
