//! The model's audio written to a WAV file: 24 kHz (or any rate) mono PCM16, with its header
//! kept valid as it grows and a cap on its size (a server can send audio far faster than real
//! time, and for as long as it likes).

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

/// Why a WAV file could not be written; the cause is its [`source`](std::error::Error::source).
#[derive(Debug, thiserror::Error)]
#[error("{doing} {}", path.display())]
pub struct WavError {
    doing: &'static str,
    path: PathBuf,
    #[source]
    source: hound::Error,
}

impl WavError {
    fn new(doing: &'static str, path: &Path) -> impl FnOnce(hound::Error) -> WavError + use<> {
        let path = path.to_owned();
        move |source| WavError {
            doing,
            path,
            source,
        }
    }

    /// The file it is about.
    pub fn path(&self) -> &Path {
        &self.path
    }
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
    /// The file.
    pub path: PathBuf,
    /// The cap it reached, header included.
    pub max_bytes: u64,
}

impl WavSink {
    /// A sink capped only by the format ([`WAV_MAX_BYTES`]); see [`WavSink::with_max_bytes`].
    pub fn create(path: &Path, rate: u32) -> Result<Self, WavError> {
        let spec = hound::WavSpec {
            channels: 1,
            sample_rate: rate,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        let writer =
            hound::WavWriter::create(path, spec).map_err(WavError::new("cannot create", path))?;
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
    pub fn write_pcm16_le(&mut self, bytes: &[u8]) -> Result<Option<WavFull>, WavError> {
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
            .map_err(WavError::new("writing", &self.path))?;
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
    pub fn sync(&mut self) -> Result<(), WavError> {
        if let Some(writer) = &mut self.writer {
            writer
                .flush()
                .map_err(WavError::new("writing", &self.path))?;
        }
        Ok(())
    }

    /// Finishes the file (also done on drop); later writes do nothing.
    pub fn finish(&mut self) -> Result<(), WavError> {
        if let Some(writer) = self.writer.take() {
            writer
                .finalize()
                .map_err(WavError::new("finishing", &self.path))?;
        }
        Ok(())
    }
}

impl Drop for WavSink {
    fn drop(&mut self) {
        if let Err(e) = self.finish() {
            tracing::warn!("{e}: {}", e.source);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
