//! Session recordings: the folder layout, the `session.jsonl` line types, and reading a
//! recording back (tolerating corrupted lines and WAV files cut short by a crash).
//!
//! A recording holds two things: every message the app applied (`applied` lines, model audio
//! by reference into `model.wav`), which replay feeds to the same `App` so it shows exactly
//! what the screen showed; and the wire tap (every frame both ways, mic audio in `mic.wav`),
//! which `inspect` reads. The lines are types of their own ([`format`]), converted from and to
//! the app's messages; recordings of earlier formats are turned into the same messages by
//! [`legacy`].

pub mod format;
pub mod inspect;
pub mod legacy;
pub mod locate;
pub mod recorder;
pub mod replay;
pub mod wire_recorder;

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::app::Msg;

pub use format::v3::{AudioRef, Line, Meta, Record};
pub use format::{FORMAT_VERSION, WIRE_FORMAT_VERSION};
pub use recorder::Recorder;
pub use wire_recorder::{WireMeta, WireRecorder};

/// The log, one JSON object per line.
pub const LOG_FILE: &str = "session.jsonl";
/// Model audio as received: 24 kHz mono PCM16.
pub const MODEL_WAV: &str = "model.wav";
/// Microphone audio as sent: 16 kHz mono PCM16 (only when some was sent).
pub const MIC_WAV: &str = "mic.wav";
/// The latest time a line may carry, in seconds from the start (thirty days): a later one is
/// damage, not a session.
pub const MAX_LINE_TIME_SECS: f64 = 30.0 * 24.0 * 3600.0;

/// A recording read back.
#[derive(Debug, Clone)]
pub struct Recording {
    pub dir: PathBuf,
    pub meta: Meta,
    /// Every readable line after the metadata, in file order.
    pub lines: Vec<Line>,
    /// Lines that could not be read, one message each.
    pub warnings: Vec<String>,
    /// Size of the folder's files in bytes.
    pub size_bytes: u64,
}

impl Recording {
    /// Reads `dir/session.jsonl`. Unreadable lines are skipped with a warning; only a missing
    /// file or a missing metadata line is an error.
    pub fn load(dir: &Path) -> anyhow::Result<Recording> {
        let path = dir.join(LOG_FILE);
        let bytes =
            livetalk_live::file::read_bounded(&path, livetalk_live::file::FileKind::RECORDING)?;
        // A crash can cut a line (or a UTF-8 sequence) short; read what is valid.
        let text = String::from_utf8_lossy(&bytes);
        let mut meta = None;
        let mut lines = Vec::new();
        let mut warnings = Vec::new();
        for (index, raw) in text.lines().enumerate() {
            if raw.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Line>(raw) {
                Ok(Line {
                    record: Record::Meta(m),
                    ..
                }) if meta.is_none() => meta = Some(*m),
                Ok(mut line) => {
                    // A time no session reaches (a hand-edited or corrupted line) is taken as
                    // the previous line's, so replay, inspect and durations stay sane.
                    if !(0.0..=MAX_LINE_TIME_SECS).contains(&line.t) {
                        let previous = lines.last().map_or(0.0, |l: &Line| l.t);
                        warnings.push(format!(
                            "{}: line {}: its time ({} s) is not one a session reaches; taken as {previous} s",
                            path.display(),
                            index + 1,
                            line.t
                        ));
                        line.t = previous;
                    }
                    lines.push(line);
                }
                Err(e) => warnings.push(format!(
                    "{}: line {}: skipped an unreadable line ({e})",
                    path.display(),
                    index + 1
                )),
            }
        }
        let meta = meta.with_context(|| {
            format!(
                "{} has no metadata line; is it a livetalk recording?",
                path.display()
            )
        })?;
        Ok(Recording {
            dir: dir.to_path_buf(),
            meta,
            lines,
            warnings,
            size_bytes: folder_size(dir),
        })
    }

    /// Seconds from the start to the last line.
    pub fn duration_secs(&self) -> f64 {
        self.lines.iter().map(|l| l.t).fold(0.0, f64::max)
    }

    /// Typed user turns (without reading the audio).
    pub fn user_turns(&self) -> usize {
        self.lines
            .iter()
            .filter(|l| {
                matches!(
                    l.record,
                    Record::UserText { .. }
                        | Record::Applied {
                            msg: format::v3::Msg::UserText(_),
                            ..
                        }
                )
            })
            .count()
    }

    /// The messages the app applied, in order, with the times they were applied; and
    /// warnings (audio missing from a WAV file cut short, say).
    pub fn applied(&self) -> (Vec<Applied>, Vec<String>) {
        if self.meta.format < 3 {
            return legacy::applied(self);
        }
        if self.meta.format == WIRE_FORMAT_VERSION {
            return format::v4::applied(self);
        }
        let mut audio = AudioFiles::new(&self.dir);
        let applied = self
            .lines
            .iter()
            .filter_map(|line| match &line.record {
                Record::Applied { msg, audio: at } => {
                    let mut msg = Msg::from(msg.clone());
                    if let (Some(pcm), Some(at)) = (msg.model_audio_mut(), at) {
                        *pcm = audio.samples(at);
                    }
                    Some(Applied { t: line.t, msg })
                }
                _ => None,
            })
            .collect();
        (applied, audio.warnings(&self.dir))
    }
}

/// A message the app applied, `t` seconds into the recording.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    pub t: f64,
    pub msg: Msg,
}

/// Samples of a recording's WAV files, read once, handed out by [`AudioRef`].
pub(crate) struct AudioFiles {
    dir: PathBuf,
    model: Option<Vec<i16>>,
    mic: Option<Vec<i16>>,
    /// Some reference pointed past the end of its file (cut short by a crash).
    short: bool,
}

impl AudioFiles {
    pub(crate) fn new(dir: &Path) -> Self {
        AudioFiles {
            dir: dir.to_path_buf(),
            model: None,
            mic: None,
            short: false,
        }
    }

    /// The referenced samples as PCM16 LE bytes (as many as the file still has).
    pub(crate) fn samples(&mut self, reference: &AudioRef) -> Vec<u8> {
        let (slot, name) = match reference.file.as_str() {
            MIC_WAV => (&mut self.mic, MIC_WAV),
            _ => (&mut self.model, MODEL_WAV),
        };
        let dir = &self.dir;
        let all = slot.get_or_insert_with(|| {
            read_wav(&dir.join(name))
                .map(|(_, s)| s)
                .unwrap_or_default()
        });
        let start = usize::try_from(reference.sample_offset).unwrap_or(usize::MAX);
        let count = usize::try_from(reference.sample_count).unwrap_or(usize::MAX);
        let end = start.saturating_add(count).min(all.len());
        if end < start.saturating_add(count) {
            self.short = true;
        }
        all.get(start.min(end)..end)
            .unwrap_or_default()
            .iter()
            .flat_map(|s| s.to_le_bytes())
            .collect()
    }

    pub(crate) fn warnings(&self, dir: &Path) -> Vec<String> {
        if self.short {
            vec![format!(
                "{}: some audio the log refers to is missing from the WAV files (cut short?)",
                dir.display()
            )]
        } else {
            Vec::new()
        }
    }
}

/// A recording's WAV file, opened as a stream (hound reads what the header says is there).
const WAV_FILE: livetalk_live::file::FileKind = livetalk_live::file::FileKind {
    what: "recorded audio file",
    max_bytes: u64::MAX,
};

fn folder_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// The samples of a recorded WAV file. A file whose header was not updated after the last
/// write (a crash) is repaired on read: the samples are what the file holds.
pub fn read_wav(path: &Path) -> Option<(u32, Vec<i16>)> {
    wav_contents(path).ok().flatten()
}

/// A recording's WAV file: `None` when there is none, an error saying what is wrong with one
/// that cannot be read (for `inspect`, which must not call a damaged file missing).
pub fn wav_contents(path: &Path) -> Result<Option<(u32, Vec<i16>)>, String> {
    if !path.exists() {
        return Ok(None);
    }
    // A regular file only: a FIFO in its place must not hang a replay.
    let file = livetalk_live::file::open_regular(path, WAV_FILE).map_err(|e| e.to_string())?;
    let reader = hound::WavReader::new(std::io::BufReader::new(file))
        .map_err(|e| format!("not a readable WAV file ({e})"))?;
    let rate = reader.spec().sample_rate;
    let samples: Vec<i16> = reader.into_samples::<i16>().map_while(Result::ok).collect();
    Ok(Some((rate, samples)))
}

#[cfg(test)]
mod golden_tests;
#[cfg(test)]
mod tests;
