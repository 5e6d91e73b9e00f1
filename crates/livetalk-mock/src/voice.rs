//! The mock model's voice: 24 kHz mono PCM16 for reply text, from espeak-ng when installed or else a synthetic speech-like voice.

use std::f64::consts::{PI, TAU};
use std::io::Cursor;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use rubato::audioadapter_buffers::direct::InterleavedSlice;
use rubato::{Fft, FixedSync, Resampler};

use crate::random::XorShift;

/// The Live API's output rate: what the mock's audio chunks carry.
pub(crate) const SAMPLE_RATE: u32 = 24_000;

const WORDS_PER_MINUTE: f64 = 150.0;
const MIN_SPEAKING_SECS: f64 = 0.5;
/// Synthetic speech peaks here, leaving headroom like real recorded speech.
const SYNTHETIC_PEAK: f64 = 0.6 * 32_767.0;

/// How long the text takes to say (about 150 words per minute, at least ~0.5 s).
pub(crate) fn speaking_time(text: &str) -> Duration {
    let words = spoken_words(text).count();
    Duration::from_secs_f64((words as f64 * 60.0 / WORDS_PER_MINUTE).max(MIN_SPEAKING_SECS))
}

/// 24 kHz mono PCM16 speech for the text: espeak-ng when it is installed, otherwise a
/// synthetic speech-like voice as long as the text takes to say. Never silent and never
/// panics; a failing espeak-ng is logged at debug level and replaced by the synthetic voice.
///
/// Blocking (it may run a process): call it from `spawn_blocking` in async code.
pub fn synthesize(text: &str) -> Vec<i16> {
    if espeak_available() {
        match espeak(text) {
            Ok(pcm) if is_audible(&pcm) => return pcm,
            Ok(_) => {
                tracing::debug!("espeak-ng produced no audible speech; using the synthetic voice")
            }
            Err(error) => {
                tracing::debug!(%error, "espeak-ng failed; using the synthetic voice");
            }
        }
    }
    synthetic_speech(text)
}

/// Whether espeak-ng is available (checked once per process).
pub fn espeak_available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        Command::new("espeak-ng")
            .arg("--version")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    })
}

/// Speech-like audio lasting exactly [`speaking_time`]: voiced syllables (a harmonic tone with a
/// wandering pitch, shaped by vowel formants, with a consonant burst at the onset) separated by
/// short pauses between words. Deterministic for a given text, so tests can rely on it.
pub(crate) fn synthetic_speech(text: &str) -> Vec<i16> {
    let total = (speaking_time(text).as_secs_f64() * f64::from(SAMPLE_RATE)).round() as usize;
    let mut words = plan_words(text);
    if words.is_empty() {
        words.push(PlannedWord {
            syllables: vec![Syllable {
                vowel: 'a',
                onset: false,
            }],
            pause_after: 0.0,
        });
    }
    if let Some(last) = words.last_mut() {
        last.pause_after = 0.0;
    }

    let rate = f64::from(SAMPLE_RATE);
    let total_secs = total as f64 / rate;
    // Keep most of the time voiced even for text full of punctuation.
    let pauses: f64 = words.iter().map(|word| word.pause_after).sum();
    let pause_scale = if pauses > 0.35 * total_secs {
        0.35 * total_secs / pauses
    } else {
        1.0
    };
    let voiced_secs = total_secs - pauses * pause_scale;

    let mut rng = XorShift::from_text(text);
    let syllable_count: usize = words.iter().map(|word| word.syllables.len()).sum();
    let weights: Vec<f64> = (0..syllable_count)
        .map(|_| 0.8 + 0.4 * rng.unit())
        .collect();
    let weight_sum: f64 = weights.iter().sum();

    let mut out = vec![0.0_f64; total];
    let mut cursor = 0.0_f64;
    let mut weight_index = 0;
    let mut phase = 0.0_f64;
    for word in &words {
        for syllable in &word.syllables {
            let weight = weights.get(weight_index).copied().unwrap_or(1.0);
            weight_index += 1;
            let duration = voiced_secs * weight / weight_sum;
            let start = (cursor * rate).round() as usize;
            let end = (((cursor + duration) * rate).round() as usize).min(total);
            cursor += duration;
            if let Some(span) = out.get_mut(start..end) {
                let context = SyllableContext {
                    start_secs: start as f64 / rate,
                    total_secs,
                    accent: -10.0 + 30.0 * rng.unit(),
                    loudness: 0.75 + 0.25 * rng.unit(),
                };
                render_syllable(span, syllable, &context, &mut phase, &mut rng);
            }
        }
        cursor += word.pause_after * pause_scale;
    }

    let peak = out
        .iter()
        .fold(0.0_f64, |peak, sample| peak.max(sample.abs()));
    let gain = if peak > 0.0 {
        SYNTHETIC_PEAK / peak
    } else {
        0.0
    };
    out.iter()
        .map(|sample| (sample * gain).round().clamp(-32_768.0, 32_767.0) as i16)
        .collect()
}

fn spoken_words(text: &str) -> impl Iterator<Item = &str> {
    text.split_whitespace()
        .filter(|word| word.chars().any(char::is_alphanumeric))
}

fn is_audible(pcm: &[i16]) -> bool {
    // About -50 dBFS: anything quieter is silence for a listener.
    rms(pcm) > 100.0
}

fn rms(pcm: &[i16]) -> f64 {
    if pcm.is_empty() {
        return 0.0;
    }
    let energy: f64 = pcm.iter().map(|&s| f64::from(s) * f64::from(s)).sum();
    (energy / pcm.len() as f64).sqrt()
}

// ---------------------------------------------------------------------------------------------
// espeak-ng

fn espeak(text: &str) -> Result<Vec<i16>, String> {
    // The text is an argument, never shell input; "--" keeps a leading "-" from reading as a flag.
    let output = Command::new("espeak-ng")
        .args(["--stdout", "-v", "en-us", "--"])
        .arg(text)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("could not run espeak-ng: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "espeak-ng exited with {}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let (pcm, rate) = decode_wav(&output.stdout)?;
    resample_to_output(&pcm, rate)
}

/// Mono PCM16 and its rate from a 16-bit WAV.
fn decode_wav(bytes: &[u8]) -> Result<(Vec<i16>, u32), String> {
    let mut reader = hound::WavReader::new(Cursor::new(bytes))
        .map_err(|e| format!("espeak-ng did not write a WAV: {e}"))?;
    let spec = reader.spec();
    if spec.sample_format != hound::SampleFormat::Int || spec.bits_per_sample != 16 {
        return Err(format!(
            "espeak-ng wrote {}-bit {:?} samples, expected 16-bit integers",
            spec.bits_per_sample, spec.sample_format
        ));
    }
    // Written to a pipe, espeak-ng cannot go back to fix the header, so the data length it claims
    // is huge: read samples until the bytes run out.
    let samples: Vec<i16> = reader.samples::<i16>().map_while(Result::ok).collect();
    let channels = usize::from(spec.channels.max(1));
    let mono = samples
        .chunks(channels)
        .map(|frame| {
            let sum: i32 = frame.iter().map(|&s| i32::from(s)).sum();
            (sum / frame.len() as i32) as i16
        })
        .collect();
    Ok((mono, spec.sample_rate))
}

fn resample_to_output(pcm: &[i16], rate: u32) -> Result<Vec<i16>, String> {
    if rate == SAMPLE_RATE || pcm.is_empty() {
        return Ok(pcm.to_vec());
    }
    let input: Vec<f32> = pcm.iter().map(|&s| f32::from(s) / 32_768.0).collect();
    let mut resampler = Fft::<f32>::new(
        rate as usize,
        SAMPLE_RATE as usize,
        1024,
        1,
        FixedSync::Input,
    )
    .map_err(|e| format!("cannot resample {rate} Hz to {SAMPLE_RATE} Hz: {e}"))?;
    let adapter = InterleavedSlice::new(&input, 1, input.len())
        .map_err(|e| format!("resampler input: {e}"))?;
    let resampled = resampler
        .process_all(&adapter, input.len(), None)
        .map_err(|e| format!("resampling espeak-ng output: {e}"))?;
    Ok(resampled
        .take_data()
        .into_iter()
        .map(|x| (f64::from(x) * 32_768.0).round().clamp(-32_768.0, 32_767.0) as i16)
        .collect())
}

// ---------------------------------------------------------------------------------------------
// The synthetic voice

struct Syllable {
    vowel: char,
    /// Starts with a consonant, heard as a short noise burst.
    onset: bool,
}

struct PlannedWord {
    syllables: Vec<Syllable>,
    pause_after: f64,
}

/// Splits text into words of syllables (one per vowel group) and the pause each word leaves.
fn plan_words(text: &str) -> Vec<PlannedWord> {
    spoken_words(text)
        .map(|word| {
            let mut syllables = Vec::new();
            let mut in_vowel = false;
            let mut after_consonant = false;
            for c in word.chars().flat_map(char::to_lowercase) {
                if c.is_ascii_digit() {
                    // Each digit is roughly a syllable: "22" is "twen-ty-two"-ish.
                    syllables.push(Syllable {
                        vowel: 'e',
                        onset: true,
                    });
                    in_vowel = false;
                } else if "aeiouy".contains(c) {
                    if !in_vowel {
                        syllables.push(Syllable {
                            vowel: c,
                            onset: after_consonant,
                        });
                    }
                    in_vowel = true;
                    after_consonant = false;
                } else if c.is_alphabetic() {
                    in_vowel = false;
                    after_consonant = true;
                }
            }
            if syllables.is_empty() {
                syllables.push(Syllable {
                    vowel: 'a',
                    onset: true,
                });
            }
            syllables.truncate(6);
            let pause_after = match word.chars().last() {
                Some('.' | '!' | '?') => 0.28,
                Some(',' | ';' | ':') => 0.16,
                _ => 0.07,
            };
            PlannedWord {
                syllables,
                pause_after,
            }
        })
        .collect()
}

struct SyllableContext {
    start_secs: f64,
    total_secs: f64,
    /// Pitch accent in Hz at the syllable's peak.
    accent: f64,
    loudness: f64,
}

/// First three formants (Hz) of a vowel, after Peterson & Barney's averages.
fn formants(vowel: char) -> [f64; 3] {
    match vowel {
        'e' => [530.0, 1840.0, 2480.0],
        'i' | 'y' => [300.0, 2250.0, 3000.0],
        'o' => [570.0, 840.0, 2410.0],
        'u' => [320.0, 900.0, 2250.0],
        _ => [730.0, 1090.0, 2440.0],
    }
}

fn formant_gain(frequency: f64, vowel: char) -> f64 {
    const BANDWIDTHS: [f64; 3] = [90.0, 120.0, 180.0];
    const GAINS: [f64; 3] = [1.0, 0.6, 0.3];
    let resonances: f64 = formants(vowel)
        .iter()
        .zip(BANDWIDTHS)
        .zip(GAINS)
        .map(|((centre, bandwidth), gain)| {
            let offset = (frequency - centre) / (bandwidth / 2.0);
            gain / (1.0 + offset * offset)
        })
        .sum();
    resonances + 0.02
}

fn render_syllable(
    span: &mut [f64],
    syllable: &Syllable,
    context: &SyllableContext,
    phase: &mut f64,
    rng: &mut XorShift,
) {
    let rate = f64::from(SAMPLE_RATE);
    let len = span.len();
    if len == 0 {
        return;
    }
    // A falling sentence pitch (declination) with a rise-and-fall accent on each syllable.
    let base_pitch = 135.0 - 30.0 * (context.start_secs / context.total_secs.max(1e-6));
    let nominal_pitch = base_pitch + context.accent.max(0.0);
    let harmonics = ((3_800.0 / nominal_pitch) as usize).clamp(1, 40);
    let amplitudes: Vec<f64> = (1..=harmonics)
        .map(|k| formant_gain(k as f64 * nominal_pitch, syllable.vowel) / (k as f64).sqrt())
        .collect();
    let burst_len = if syllable.onset {
        (0.035 * rate).min(len as f64 * 0.25) as usize
    } else {
        0
    };
    let mut previous_noise = 0.0;

    for (i, sample) in span.iter_mut().enumerate() {
        let x = i as f64 / len as f64;
        let t = context.start_secs + i as f64 / rate;
        let vibrato = 1.0 + 0.012 * (TAU * 5.5 * t).sin();
        let pitch = (base_pitch + context.accent * (PI * x).sin()) * vibrato;
        *phase = (*phase + TAU * pitch / rate) % TAU;

        // sin(k·φ) for every harmonic from one sin and one cos (Chebyshev recurrence).
        let (sin1, cos1) = phase.sin_cos();
        let (mut previous, mut current) = (0.0, sin1);
        let mut voiced = 0.0;
        for amplitude in &amplitudes {
            voiced += amplitude * current;
            let next = 2.0 * cos1 * current - previous;
            previous = current;
            current = next;
        }

        let voice_start = burst_len as f64 / len as f64;
        let envelope = syllable_envelope(x, voice_start);
        let mut value = voiced * envelope * context.loudness;
        if i < burst_len {
            // High-passed noise fading out: a rough stand-in for a consonant.
            let noise = rng.unit() * 2.0 - 1.0;
            let fade = 1.0 - i as f64 / burst_len as f64;
            value += 0.35 * (noise - previous_noise) * fade;
            previous_noise = noise;
        }
        *sample = value;
    }
}

/// Raised-cosine attack after the consonant, a sustain, and a longer release.
fn syllable_envelope(x: f64, voice_start: f64) -> f64 {
    const ATTACK: f64 = 0.2;
    const RELEASE: f64 = 0.3;
    if x < voice_start {
        return 0.0;
    }
    let voiced = (x - voice_start) / (1.0 - voice_start).max(1e-6);
    if voiced < ATTACK {
        0.5 - 0.5 * (PI * voiced / ATTACK).cos()
    } else if voiced > 1.0 - RELEASE {
        0.5 - 0.5 * (PI * (1.0 - voiced) / RELEASE).cos()
    } else {
        1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seconds(pcm: &[i16]) -> f64 {
        pcm.len() as f64 / f64::from(SAMPLE_RATE)
    }

    fn peak(pcm: &[i16]) -> i32 {
        pcm.iter().map(|&s| i32::from(s).abs()).max().unwrap_or(0)
    }

    #[test]
    fn speaking_time_is_about_150_words_per_minute() {
        assert_eq!(
            speaking_time("one two three four five"),
            Duration::from_secs(2)
        );
        assert_eq!(speaking_time("Hi"), Duration::from_millis(500));
        assert_eq!(speaking_time(""), Duration::from_millis(500));
        assert_eq!(speaking_time("  ...  "), Duration::from_millis(500));
    }

    #[test]
    fn synthetic_speech_lasts_its_speaking_time_and_is_loud_but_not_clipped() {
        for text in [
            "No, the living room lamp is currently off.",
            "Alright, I've turned on the living room lamp and set its color to blue.",
            "Hi",
            "",
            "It's 3:04 PM on Wednesday, May 1 (Europe/Paris).",
        ] {
            let pcm = synthetic_speech(text);
            let expected = speaking_time(text).as_secs_f64();
            let actual = seconds(&pcm);
            assert!(
                (actual - expected).abs() <= 0.1 * expected,
                "{text:?}: {actual:.3}s vs {expected:.3}s"
            );
            let level = rms(&pcm);
            assert!(level > 1_000.0, "{text:?}: RMS {level:.0} is too quiet");
            assert!(peak(&pcm) < 32_000, "{text:?}: peak {} clips", peak(&pcm));
        }
    }

    #[test]
    fn synthetic_speech_is_deterministic_and_varies_with_text() {
        assert_eq!(
            synthetic_speech("hello there"),
            synthetic_speech("hello there")
        );
        assert_ne!(
            synthetic_speech("hello there"),
            synthetic_speech("hello where")
        );
    }

    #[test]
    fn synthetic_speech_pauses_between_words() {
        let pcm = synthetic_speech("one, two, three, four");
        // 5 ms windows: a real pause shows up as a run of near-silent windows.
        let window = SAMPLE_RATE as usize / 200;
        let quiet = pcm.chunks(window).filter(|chunk| rms(chunk) < 50.0).count();
        assert!(quiet >= 6, "only {quiet} quiet windows");
    }

    #[test]
    fn synthesize_is_never_silent() {
        for text in ["", "-v", "Goodbye! Ending the session now.", "\u{0}nul"] {
            let pcm = synthesize(text);
            assert!(is_audible(&pcm), "{text:?} gave silence");
            assert!(peak(&pcm) < 32_768);
        }
    }

    #[test]
    fn decode_wav_reads_a_header_with_a_streaming_length() {
        // What espeak-ng writes to a pipe: the data length is a placeholder far past the end.
        let mut bytes = Vec::new();
        bytes.extend_from_slice(b"RIFF");
        bytes.extend_from_slice(&0x7fff_f024_u32.to_le_bytes());
        bytes.extend_from_slice(b"WAVEfmt ");
        bytes.extend_from_slice(&16_u32.to_le_bytes());
        bytes.extend_from_slice(&1_u16.to_le_bytes());
        bytes.extend_from_slice(&1_u16.to_le_bytes());
        bytes.extend_from_slice(&22_050_u32.to_le_bytes());
        bytes.extend_from_slice(&44_100_u32.to_le_bytes());
        bytes.extend_from_slice(&2_u16.to_le_bytes());
        bytes.extend_from_slice(&16_u16.to_le_bytes());
        bytes.extend_from_slice(b"data");
        bytes.extend_from_slice(&0x7fff_f000_u32.to_le_bytes());
        for sample in [100_i16, -200, 300] {
            bytes.extend_from_slice(&sample.to_le_bytes());
        }
        let (pcm, rate) = decode_wav(&bytes).expect("decodes");
        assert_eq!(rate, 22_050);
        assert_eq!(pcm, vec![100, -200, 300]);
        assert!(decode_wav(b"not a wav").is_err());
    }

    #[test]
    fn resampling_keeps_duration_and_level() {
        let rate = 22_050_u32;
        let tone: Vec<i16> = (0..rate)
            .map(|i| (10_000.0 * (TAU * 440.0 * f64::from(i) / f64::from(rate)).sin()) as i16)
            .collect();
        let out = resample_to_output(&tone, rate).expect("resamples");
        assert!(
            (out.len() as i64 - i64::from(SAMPLE_RATE)).abs() < 100,
            "{} samples",
            out.len()
        );
        let ratio = rms(&out) / rms(&tone);
        assert!((0.9..1.1).contains(&ratio), "level changed by {ratio:.3}");
    }

    #[test]
    fn espeak_speech_when_installed() {
        assert!(
            espeak_available(),
            "espeak-ng is not installed (scripts/test.sh installs it)"
        );
        let text = "Alright, I've turned on the living room lamp and set its color to blue.";
        let pcm = espeak(text).expect("espeak-ng speaks");
        assert!(is_audible(&pcm));
        assert!(peak(&pcm) < 32_768);
        // Real speech for 14 words: somewhere between half and twice the nominal speaking time.
        let nominal = speaking_time(text).as_secs_f64();
        let actual = seconds(&pcm);
        assert!(
            actual > nominal * 0.5 && actual < nominal * 2.0,
            "{actual:.2}s vs {nominal:.2}s"
        );
        assert_eq!(synthesize(text), pcm, "synthesize prefers espeak-ng");
    }
}
