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
pub mod pictures;
pub mod recorder;
pub mod replay;
pub mod service_side;
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

/// A recording read back: its metadata and what one pass over its lines found. The lines
/// themselves are never all held: [`Recording::lines`] reads them again from the file, one at a
/// time, so a recording of millions of lines costs a line's worth of memory, not the file's.
#[derive(Debug, Clone)]
pub struct Recording {
    pub dir: PathBuf,
    pub meta: Meta,
    /// What could not be read, one message each (the first [`WARNINGS_KEPT`], then a count).
    pub warnings: Vec<String>,
    /// Size of the folder's files in bytes.
    pub size_bytes: u64,
    /// Seconds from the start to the last line.
    duration_secs: f64,
    /// Typed user turns.
    user_turns: usize,
    /// Messages the app applied (format 3 and later).
    applied: usize,
    /// Where the latest audio the applied lines refer to ends, in samples of `model.wav`
    /// and `mic.wav`.
    audio_ends: [u64; 2],
}

/// Warnings about unreadable lines said one by one; the rest are counted in one more.
pub const WARNINGS_KEPT: usize = 100;

/// The longest line read: longer ones are skipped with a warning, never held.
pub const LINE_MAX: usize = 32 << 20;

impl Recording {
    /// Reads `dir/session.jsonl` once, line by line. Unreadable lines are skipped with a
    /// warning; only a missing file or a missing metadata line is an error.
    pub fn load(dir: &Path) -> anyhow::Result<Recording> {
        let path = dir.join(LOG_FILE);
        let mut lines = Lines::open(dir)?;
        let mut meta = None;
        let mut warnings = Vec::new();
        let mut unsaid = 0usize;
        let (mut duration_secs, mut user_turns, mut applied) = (0.0f64, 0, 0);
        let mut audio_ends = [0u64; 2];
        while let Some(read) = lines.next_read() {
            let warned = lines.time_warning.take();
            if let Some(warning) = warned {
                if warnings.len() < WARNINGS_KEPT {
                    warnings.push(warning);
                } else {
                    unsaid += 1;
                }
            }
            let line = match read {
                Ok(line) => line,
                Err(warning) => {
                    if warnings.len() < WARNINGS_KEPT {
                        warnings.push(warning);
                    } else {
                        unsaid += 1;
                    }
                    continue;
                }
            };
            match line.record {
                Record::Meta(m) if meta.is_none() => {
                    meta = Some(*m);
                    continue;
                }
                Record::UserText { .. }
                | Record::Applied {
                    msg: format::v3::Msg::UserText(_),
                    ..
                } => user_turns += 1,
                _ => {}
            }
            if let Record::Send { message } = &line.record
                && !pictures::sent(message).is_empty()
            {
                applied += 1;
            }
            if let Record::Applied { audio, .. } = &line.record {
                applied += 1;
                if let Some(at) = audio {
                    let end = at.sample_offset.saturating_add(at.sample_count);
                    let slot = usize::from(at.file == MIC_WAV);
                    audio_ends[slot] = audio_ends[slot].max(end);
                }
            }
            duration_secs = duration_secs.max(line.t);
        }
        if unsaid > 0 {
            warnings.push(format!(
                "{}: {unsaid} more warnings like these are not shown",
                path.display()
            ));
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
            warnings,
            size_bytes: folder_size(dir),
            duration_secs,
            user_turns,
            applied,
            audio_ends,
        })
    }

    /// A warning when the WAV files hold less audio than the lines refer to (a crash cut them
    /// short), found by counting their samples, not holding them.
    pub fn audio_warnings(&self) -> Vec<String> {
        let short = [MODEL_WAV, MIC_WAV]
            .iter()
            .zip(self.audio_ends)
            .filter(|(_, end)| *end > 0)
            .any(|(name, end)| wav_samples(&self.dir.join(name)) < end);
        if short {
            AudioFiles {
                dir: self.dir.clone(),
                model: None,
                mic: None,
                short: true,
            }
            .warnings(&self.dir)
        } else {
            Vec::new()
        }
    }

    /// The readable lines after the metadata, in file order, read again from the file one at
    /// a time (what [`Recording::load`] warned about is skipped in silence). A file that can
    /// no longer be read ends them early.
    pub fn lines(&self) -> impl Iterator<Item = Line> + use<> {
        let lines = Lines::open(&self.dir).ok();
        let mut meta_seen = false;
        lines
            .into_iter()
            .flat_map(|mut lines| std::iter::from_fn(move || lines.next_read()))
            .filter_map(Result::ok)
            .filter(move |line| {
                if matches!(line.record, Record::Meta(_)) && !meta_seen {
                    meta_seen = true;
                    return false;
                }
                true
            })
    }

    /// Seconds from the start to the last line.
    pub fn duration_secs(&self) -> f64 {
        self.duration_secs
    }

    /// Typed user turns (without reading the audio).
    pub fn user_turns(&self) -> usize {
        self.user_turns
    }

    /// The messages the app applied, in order, with the times they were applied; and
    /// warnings (audio missing from a WAV file cut short, say).
    pub fn applied(&self) -> (Vec<Applied>, Vec<String>) {
        let mut steps = self.steps();
        let applied = steps.by_ref().collect();
        (applied, steps.warnings())
    }

    /// [`Recording::applied`] as it is read, one message at a time: how replay and inspect
    /// go through a recording without holding it. [`Steps::warnings`] once it has ended.
    pub fn steps(&self) -> Steps {
        if self.meta.format < 3 {
            let (applied, warnings) = legacy::applied(self);
            return Steps {
                total: applied.len(),
                inner: StepsFrom::Held(applied.into_iter()),
                audio: AudioFiles::new(&self.dir),
                warnings,
            };
        }
        if self.meta.format == WIRE_FORMAT_VERSION {
            // How many messages the wire stands for is known only by reading it through: once
            // to count (which also finds audio cut short, said before the messages are), once
            // to hand them out, neither holding more than a line's worth.
            let mut audio = AudioFiles::new(&self.dir);
            let mut counting = format::v4::Applying::new(self.lines());
            let total = std::iter::from_fn(|| counting.next(&mut audio)).count();
            return Steps {
                total,
                inner: StepsFrom::Wire(format::v4::Applying::new(Box::new(self.lines()))),
                audio: AudioFiles::new(&self.dir),
                warnings: audio.warnings(&self.dir),
            };
        }
        Steps {
            total: self.applied,
            inner: StepsFrom::File(Box::new(self.lines())),
            audio: AudioFiles::new(&self.dir),
            warnings: Vec::new(),
        }
    }
}

/// The messages a recording's app applied, read one at a time (see [`Recording::steps`]).
pub struct Steps {
    total: usize,
    inner: StepsFrom,
    audio: AudioFiles,
    warnings: Vec<String>,
}

enum StepsFrom {
    /// Format 3: its `applied` lines, read from the file as they come.
    File(Box<dyn Iterator<Item = Line>>),
    /// Format 4: the wire's lines, read from the file as they come, made into messages.
    Wire(format::v4::Applying<Box<dyn Iterator<Item = Line>>>),
    /// Earlier formats, whose messages are rebuilt from the whole file.
    Held(std::vec::IntoIter<Applied>),
}

impl Steps {
    /// How many messages there are in all.
    pub fn total(&self) -> usize {
        self.total
    }

    /// What went wrong reading them (audio missing from a WAV file cut short, say).
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = self.warnings.clone();
        for warning in self.audio.warnings(&self.audio.dir) {
            if !warnings.contains(&warning) {
                warnings.push(warning);
            }
        }
        warnings
    }
}

impl Iterator for Steps {
    type Item = Applied;

    fn next(&mut self) -> Option<Applied> {
        match &mut self.inner {
            StepsFrom::Held(steps) => steps.next(),
            StepsFrom::Wire(wire) => wire.next(&mut self.audio),
            StepsFrom::File(lines) => lines.find_map(|line| match line.record {
                Record::Applied { msg, audio: at } => {
                    let mut msg = Msg::from(msg);
                    if let (Some(pcm), Some(at)) = (msg.model_audio_mut(), at) {
                        *pcm = self.audio.samples(&at);
                    }
                    Some(Applied { t: line.t, msg })
                }
                // A picture sent (kept in `frames/`) is shown as the app showed it.
                Record::Send { message } => {
                    let shown = pictures::shown(&message, &self.audio.dir)?;
                    Some(Applied {
                        t: line.t,
                        msg: Msg::Image(shown),
                    })
                }
                _ => None,
            }),
        }
    }
}

/// A recording's `session.jsonl` read line by line, each line bounded and weighed against the
/// process's input budget before it is parsed.
struct Lines {
    file: livetalk_live::file::Streamed,
    path: PathBuf,
    buffer: Vec<u8>,
    number: usize,
    /// The previous line's time, for a line whose own is not one a session reaches.
    previous_t: f64,
    /// The last line read had its time replaced: why (for `load` to warn).
    time_warning: Option<String>,
}

impl Lines {
    fn open(dir: &Path) -> anyhow::Result<Lines> {
        let path = dir.join(LOG_FILE);
        let file =
            livetalk_live::file::Streamed::open(&path, livetalk_live::file::FileKind::RECORDING)?;
        Ok(Lines {
            file,
            path,
            buffer: Vec::new(),
            number: 0,
            previous_t: 0.0,
            time_warning: None,
        })
    }

    /// The next line, or a warning saying why it could not be read; `None` at the end.
    fn next_read(&mut self) -> Option<Result<Line, String>> {
        use livetalk_live::file::{LineRead, read_line_bounded};
        loop {
            let read = match read_line_bounded(&mut self.file, &mut self.buffer, LINE_MAX) {
                Ok(read) => read,
                Err(e) => {
                    let error = self.file.error(&e);
                    return Some(Err(format!(
                        "{error}; the lines after line {} are not read",
                        self.number
                    )));
                }
            };
            self.number += 1;
            let index = self.number;
            let skipped =
                |why: String| format!("{}: line {index}: skipped {why}", self.path.display());
            match read {
                LineRead::End => return None,
                LineRead::TooLong(bytes) => {
                    return Some(Err(skipped(format!(
                        "a line of {}, longer than the {} livetalk reads",
                        livetalk_live::excerpt::human_size(bytes),
                        livetalk_live::excerpt::human_size(LINE_MAX as u64)
                    ))));
                }
                LineRead::Line => {}
            }
            // A crash can cut a line (or a UTF-8 sequence) short; read what is valid.
            let text = String::from_utf8_lossy(&self.buffer);
            if text.trim().is_empty() {
                continue;
            }
            if let Err(refused) =
                livetalk_live::budget::InputBudget::process().weigh(text.as_bytes())
            {
                return Some(Err(skipped(format!(
                    "a line that is too costly to read: {refused}"
                ))));
            }
            return Some(match serde_json::from_str::<Line>(&text) {
                Ok(mut line) => {
                    // A time no session reaches (a hand-edited or corrupted line) is taken as
                    // the previous line's, so replay, inspect and durations stay sane. The
                    // warning comes with the line, which is read all the same.
                    if !(0.0..=MAX_LINE_TIME_SECS).contains(&line.t) {
                        self.time_warning = Some(format!(
                            "{}: line {index}: its time ({} s) is not one a session reaches; taken as {} s",
                            self.path.display(),
                            line.t,
                            self.previous_t
                        ));
                        line.t = self.previous_t;
                    }
                    if !matches!(line.record, Record::Meta(_)) {
                        self.previous_t = line.t;
                    }
                    Ok(line)
                }
                Err(e) => Err(skipped(format!("an unreadable line ({e})"))),
            });
        }
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

/// How many samples a recorded WAV file holds, counted as they are read (0 when it cannot be).
fn wav_samples(path: &Path) -> u64 {
    let Ok(file) = livetalk_live::file::open_regular(path, WAV_FILE) else {
        return 0;
    };
    hound::WavReader::new(std::io::BufReader::new(file)).map_or(0, |reader| {
        reader.into_samples::<i16>().map_while(Result::ok).count() as u64
    })
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
