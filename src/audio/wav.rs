//! WAV files as the microphone: `--input-wav` (any rate and channel count, 8/16/24/32-bit
//! integer or 32-bit float) read as mono `f32`. (`--output-wav` is written by
//! [`livetalk_live::wav`].)

use std::path::Path;

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

/// The largest `--input-wav` read: about 20 minutes of 48 kHz stereo 16-bit audio (held in
/// memory as samples, so a file past this would cost gigabytes).
const INPUT_WAV: livetalk_live::file::FileKind = livetalk_live::file::FileKind {
    what: "WAV file",
    max_bytes: 256 << 20,
};

/// Reads a WAV file of any common format as mono `f32`.
pub fn read_mono(path: &Path) -> anyhow::Result<MonoClip> {
    // A regular file of a bounded size: a FIFO must not hang the start, nor /dev/zero fill
    // the memory.
    let file = livetalk_live::file::open_regular(path, INPUT_WAV)?;
    if file.metadata().map(|m| m.len()).unwrap_or(0) > INPUT_WAV.max_bytes {
        anyhow::bail!(livetalk_live::file::FileError::TooLarge {
            path: path.to_owned(),
            kind: INPUT_WAV,
        });
    }
    let reader = hound::WavReader::new(std::io::BufReader::new(file))
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
}
