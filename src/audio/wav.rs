//! WAV files as audio endpoints: `--input-wav` (any rate and channel count, 8/16/24/32-bit
//! integer or 32-bit float) read as mono `f32`, and `--output-wav`, the model's audio as
//! 24 kHz mono PCM16, with its header kept valid as it grows and a cap on its size (a server
//! can send audio far faster than real time, and for as long as it likes).

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use super::pcm::downmix;

/// A WAV file's audio, downmixed to mono.
#[derive(Debug, Clone)]
pub struct MonoClip {
    pub samples: Vec<f32>,
    pub rate: u32,
}

impl MonoClip {
    pub fn duration(&self) -> std::time::Duration {
        std::time::Duration::from_secs_f64(self.samples.len() as f64 / f64::from(self.rate.max(1)))
    }
}

/// Reads a WAV file of any common format as mono `f32`.
pub fn read_mono(path: &Path) -> anyhow::Result<MonoClip> {
    let reader = hound::WavReader::open(path)
        .with_context(|| format!("cannot read {} as a WAV file", path.display()))?;
    let spec = reader.spec();
    let channels = usize::from(spec.channels.max(1));
    let interleaved: Vec<f32> = match (spec.sample_format, spec.bits_per_sample) {
        (hound::SampleFormat::Float, 32) => reader
            .into_samples::<f32>()
            .collect::<Result<_, _>>()
            .with_context(|| format!("{} is damaged", path.display()))?,
        (hound::SampleFormat::Int, bits @ 1..=32) => {
            let scale = 2f32.powi(i32::from(bits) - 1);
            reader
                .into_samples::<i32>()
                .map(|s| s.map(|s| s as f32 / scale))
                .collect::<Result<_, _>>()
                .with_context(|| format!("{} is damaged", path.display()))?
        }
        (format, bits) => anyhow::bail!(
            "{}: unsupported WAV sample format ({bits}-bit {format:?}); use 16-bit PCM or 32-bit float",
            path.display()
        ),
    };
    anyhow::ensure!(
        spec.sample_rate > 0,
        "{}: the WAV header gives a sample rate of 0",
        path.display()
    );
    Ok(MonoClip {
        samples: interleaved.chunks_exact(channels).map(downmix).collect(),
        rate: spec.sample_rate,
    })
}

/// The most a WAV file can be: its sizes are 32-bit.
pub const WAV_MAX_BYTES: u64 = u32::MAX as u64;

/// The header hound writes for mono PCM16. The cap counts it, so the file never passes it.
const HEADER_BYTES: u64 = 44;

/// Writes model audio to a 24 kHz mono PCM16 WAV file, up to a size cap.
pub struct WavSink {
    /// `None` once finished (at the end, at the cap, or after a write failed).
    writer: Option<hound::WavWriter<BufWriter<File>>>,
    path: PathBuf,
    max_bytes: u64,
    /// Audio bytes written so far.
    data_bytes: u64,
}

/// The sink reached its cap: the file is finished with what fit, and takes nothing more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WavFull {
    pub path: PathBuf,
    pub max_bytes: u64,
}

impl WavSink {
    /// A sink capped only by the format ([`WAV_MAX_BYTES`]); see [`WavSink::with_max_bytes`].
    pub fn create(path: &Path, rate: u32) -> anyhow::Result<Self> {
        let spec = hound::WavSpec {
            channels: 1,
            sample_rate: rate,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        let writer = hound::WavWriter::create(path, spec)
            .with_context(|| format!("cannot create {}", path.display()))?;
        Ok(WavSink {
            writer: Some(writer),
            path: path.to_owned(),
            max_bytes: WAV_MAX_BYTES,
            data_bytes: 0,
        })
    }

    /// The file stops growing at `max_bytes`, header included.
    pub fn with_max_bytes(mut self, max_bytes: u64) -> Self {
        self.max_bytes = max_bytes.clamp(HEADER_BYTES, WAV_MAX_BYTES);
        self
    }

    /// Appends little-endian PCM16 samples, as many as fit under the cap. The write that
    /// reaches the cap finishes the file (its header then says what it holds), logs it and
    /// returns `Some`; that happens once, and later writes do nothing.
    pub fn write_pcm16_le(&mut self, bytes: &[u8]) -> anyhow::Result<Option<WavFull>> {
        let Some(writer) = &mut self.writer else {
            return Ok(None);
        };
        let whole = bytes.len() / 2 * 2;
        let room = self
            .max_bytes
            .saturating_sub(HEADER_BYTES + self.data_bytes)
            / 2
            * 2;
        let fit = whole.min(usize::try_from(room).unwrap_or(usize::MAX));
        let mut samples = writer.get_i16_writer(fit as u32 / 2);
        for b in bytes[..fit].chunks_exact(2) {
            samples.write_sample(i16::from_le_bytes([b[0], b[1]]));
        }
        samples
            .flush()
            .with_context(|| format!("writing {}", self.path.display()))?;
        self.data_bytes += fit as u64;
        if fit == whole {
            return Ok(None);
        }
        self.finish()?;
        tracing::warn!(
            path = %self.path.display(),
            max_bytes = self.max_bytes,
            "the output WAV reached its size cap; the rest of the model's audio is not written to it"
        );
        Ok(Some(WavFull {
            path: self.path.clone(),
            max_bytes: self.max_bytes,
        }))
    }

    /// Brings the header up to date, so the file is playable even if livetalk is killed.
    pub fn sync(&mut self) -> anyhow::Result<()> {
        if let Some(writer) = &mut self.writer {
            writer
                .flush()
                .with_context(|| format!("writing {}", self.path.display()))?;
        }
        Ok(())
    }

    pub fn finish(&mut self) -> anyhow::Result<()> {
        if let Some(writer) = self.writer.take() {
            writer
                .finalize()
                .with_context(|| format!("finishing {}", self.path.display()))?;
        }
        Ok(())
    }
}

impl Drop for WavSink {
    fn drop(&mut self) {
        if let Err(e) = self.finish() {
            tracing::warn!("{e:#}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write<S: hound::Sample + Copy>(
        path: &Path,
        channels: u16,
        rate: u32,
        bits: u16,
        format: hound::SampleFormat,
        frames: &[S],
    ) {
        let spec = hound::WavSpec {
            channels,
            sample_rate: rate,
            bits_per_sample: bits,
            sample_format: format,
        };
        let mut w = hound::WavWriter::create(path, spec).unwrap();
        for &s in frames {
            w.write_sample(s).unwrap();
        }
        w.finalize().unwrap();
    }

    #[test]
    fn reads_16_bit_stereo_float_and_24_bit_as_mono() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.wav");
        write(
            &a,
            2,
            44_100,
            16,
            hound::SampleFormat::Int,
            &[16_384i16, 0, -16_384, -16_384],
        );
        let clip = read_mono(&a).unwrap();
        assert_eq!(clip.rate, 44_100);
        assert_eq!(clip.samples, vec![0.25, -0.5]);

        let b = dir.path().join("b.wav");
        write(
            &b,
            1,
            48_000,
            32,
            hound::SampleFormat::Float,
            &[0.5f32, -0.25],
        );
        assert_eq!(read_mono(&b).unwrap().samples, vec![0.5, -0.25]);

        let c = dir.path().join("c.wav");
        write(
            &c,
            1,
            16_000,
            24,
            hound::SampleFormat::Int,
            &[4_194_304i32, -8_388_608],
        );
        assert_eq!(read_mono(&c).unwrap().samples, vec![0.5, -1.0]);
    }

    #[test]
    fn a_file_that_is_not_a_wav_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.wav");
        std::fs::write(&p, b"not a wav").unwrap();
        let error = format!("{:#}", read_mono(&p).unwrap_err());
        assert!(
            error.contains("cannot read") && error.contains("x.wav"),
            "{error}"
        );
    }

    #[test]
    fn the_sink_stops_at_its_cap_once_with_a_valid_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("capped.wav");
        let mut sink = WavSink::create(&p, 24_000).unwrap().with_max_bytes(1_000);
        let chunk: Vec<u8> = (0..300i16).flat_map(|s| s.to_le_bytes()).collect();
        assert_eq!(
            sink.write_pcm16_le(&chunk).unwrap(),
            None,
            "600 of 956 bytes"
        );
        let full = sink.write_pcm16_le(&chunk).unwrap();
        assert_eq!(
            full,
            Some(WavFull {
                path: p.clone(),
                max_bytes: 1_000
            })
        );
        assert_eq!(sink.write_pcm16_le(&chunk).unwrap(), None, "reported once");
        drop(sink);
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 1_000);
        let reader = hound::WavReader::open(&p).unwrap();
        assert_eq!(reader.duration(), 478);
        let samples: Vec<i16> = reader.into_samples().map(Result::unwrap).collect();
        assert_eq!(
            samples[299..302],
            [299, 0, 1],
            "the second chunk follows the first"
        );
    }

    #[test]
    fn the_sink_header_is_valid_before_finish() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.wav");
        let mut sink = WavSink::create(&p, 24_000).unwrap();
        let bytes: Vec<u8> = (0..2400i16).flat_map(|s| s.to_le_bytes()).collect();
        sink.write_pcm16_le(&bytes).unwrap();
        sink.sync().unwrap();
        let reader = hound::WavReader::open(&p).unwrap();
        assert_eq!(reader.duration(), 2400);
        assert_eq!(reader.spec().sample_rate, 24_000);
        std::mem::forget(sink);
    }
}
