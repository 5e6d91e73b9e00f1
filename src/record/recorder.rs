//! The recorder: writes one session into a folder as it happens (every message the app
//! applied, every frame, and what only the connection knows from its wire tap), crash-safe:
//! every line is written whole and at once, and WAV headers are updated after every chunk,
//! before the line that refers to it. Model audio is written once: a received frame's line says
//! where in `model.wav` its chunks go, and the events the app applies from that frame, which
//! come next and in the same order and hold the samples, put them there and refer to them.
//! (A frame's message no longer holds its samples: the app's events do, so a chunk is held
//! once. Should the app never apply a chunk, its place is filled with silence before the next
//! frame's, so every later reference stays true.)

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context as _;
use serde_json::Value;
use tracing::warn;

use super::format::{self, convert, v3};
use super::pictures;
use super::{AudioRef, FORMAT_VERSION, LOG_FILE, Line, MIC_WAV, MODEL_WAV, Meta, Record};
use crate::app::{AudioAsked, Msg, WireBody, WireFrame};
use crate::audio::resample::StreamResampler;
use crate::config::{RecordTo, Settings};
use crate::tools::Device;
use livetalk_live::connection::{TappedFrame, WireTap};
use livetalk_live::reading::{AudioPart, take_audio};
use livetalk_live::wire::{ClientMessage, INPUT_SAMPLE_RATE, OUTPUT_SAMPLE_RATE, ServerMessage};
use livetalk_live::{CloseInfo, Inbound, ServerEvent};

/// Records one session. Cheap to clone; all clones write to the same folder.
#[derive(Clone)]
pub struct Recorder {
    inner: Arc<Mutex<Inner>>,
    started: Instant,
    dir: PathBuf,
}

struct Inner {
    log: File,
    dir: PathBuf,
    model: Option<WavTrack>,
    mic: Option<WavTrack>,
    /// Redacted from every line, whatever quotes it (a server close reason, say).
    /// After a write error the recording stops (once, with a warning); the session goes on.
    failed: bool,
    /// Where the model audio of the frame received last goes, in the order its events carry
    /// it to the app: reserved in `model.wav` by its line, written when the app applies it.
    unclaimed: VecDeque<AudioRef>,
    /// Format 4: each track is written at one rate (the mic at 16 kHz, the model at 24 kHz),
    /// whatever rate a chunk came at. Format 3 writes chunks as they came.
    fixed_rates: bool,
    /// Pictures written to `frames/` so far.
    pictures: u32,
}

struct WavTrack {
    writer: hound::WavWriter<BufWriter<File>>,
    samples: u64,
    /// With fixed rates: the converter from the rate the last chunk came at.
    resampler: Option<StreamResampler>,
}

/// Which WAV file an audio payload goes to.
#[derive(Clone, Copy)]
enum Track {
    Model,
    Mic,
}

impl Recorder {
    /// The folder a recording goes to, as the settings asked: a folder named by its path, or
    /// by a bare name in `sessions_dir` (`record.dir`); or a new timestamped one.
    pub fn folder(to: &RecordTo, sessions_dir: &Path) -> PathBuf {
        match to {
            RecordTo::Folder(dir) => super::locate::record_folder(dir, sessions_dir),
            RecordTo::NewUnder(root) => {
                let stamp = jiff::Zoned::now().strftime("%Y-%m-%d_%H-%M-%S").to_string();
                let mut dir = root.join(&stamp);
                let mut n = 2;
                while dir.exists() {
                    dir = root.join(format!("{stamp}-{n}"));
                    n += 1;
                }
                dir
            }
        }
    }

    /// Creates the folder and writes the metadata line. Refuses a folder that already holds a
    /// recording rather than mixing two sessions.
    pub fn create(dir: &Path, settings: &Settings, devices: Vec<Device>) -> anyhow::Result<Self> {
        let meta = Meta {
            format: FORMAT_VERSION,
            livetalk_version: env!("CARGO_PKG_VERSION").to_owned(),
            started_at: jiff::Zoned::now().to_string(),
            model: settings.model.clone(),
            voice: settings.voice.clone(),
            endpoint_host: settings.endpoint_label(),
            offline: settings.is_offline(),
            devices: convert::devices_to(&devices),
            audio: (!settings.audio.is_off()).then(|| AudioAsked::from(&settings.audio).into()),
            config: serde_json::json!({
                "api_version": settings.api_version.as_str(),
                "tools_enabled": settings.tools_enabled,
                "tool_timeout_secs": settings.tool_limits.timeout.as_secs_f64(),
                "tool_max_response_bytes": settings.tool_limits.max_response_bytes,
                "input_transcription": settings.input_transcription,
                "output_transcription": settings.output_transcription,
                "connect_timeout_secs": settings.connect_timeout.as_secs_f64(),
                "turn_timeout_secs": settings.turn_timeout.as_secs_f64(),
                "system_instruction_chars": settings.system_instruction.chars().count(),
                "api_key_set": settings.api_key.is_some(),
                // What the session's tokens cost, so `inspect` and a replay price them alike.
                "pricing": settings.pricing,
            }),
        };
        Recorder::start(dir, meta, false)
    }

    /// Creates the folder and writes `meta` as the first line; with `fixed_rates`, each WAV
    /// file is written at its track's one rate (format 4).
    pub(super) fn start(dir: &Path, meta: Meta, fixed_rates: bool) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the recording folder {}", dir.display()))?;
        let path = dir.join(LOG_FILE);
        let log = File::options()
            .write(true)
            .create_new(true)
            .open(&path)
            .with_context(|| {
                format!(
                    "creating {} (a folder can hold one recording)",
                    path.display()
                )
            })?;
        let recorder = Recorder {
            inner: Arc::new(Mutex::new(Inner {
                log,
                dir: dir.to_path_buf(),
                model: None,
                mic: None,
                failed: false,
                unclaimed: VecDeque::new(),
                fixed_rates,
                pictures: 0,
            })),
            started: Instant::now(),
            dir: dir.to_path_buf(),
        };
        recorder.write(Record::Meta(Box::new(meta)));
        Ok(recorder)
    }

    /// The recording folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Appends one line, stamped with the time since the recording started.
    pub fn write(&self, record: Record) {
        let line = Line {
            t: self.now(),
            record,
        };
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        inner.write_line(&line);
    }

    /// Records a message the app applied (raw input and ticks are not recorded); a received
    /// frame becomes its wire line. Model audio refers to the samples its frame put in
    /// `model.wav` (written now if no frame did); the samples are borrowed, never copied into
    /// the line.
    pub fn applied(&self, msg: &Msg) {
        if let Msg::Wire(frame) = msg {
            self.received(frame);
            return;
        }
        let Some(recorded) = v3::Msg::recorded(msg) else {
            return;
        };
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        let audio = convert::model_audio(msg).and_then(|pcm| {
            // A chunk that is not the one reserved (a recorder fed by hand) goes after it.
            if inner
                .unclaimed
                .front()
                .is_some_and(|at| at.sample_count != (pcm.len() / 2) as u64)
            {
                inner.fill_unclaimed();
            }
            inner.unclaimed.pop_front();
            Recorder::audio(&mut inner, Track::Model, pcm, OUTPUT_SAMPLE_RATE)
        });
        let line = Line {
            t: self.now(),
            record: Record::Applied {
                msg: recorded,
                audio,
            },
        };
        inner.write_line(&line);
    }

    /// A frame the session read, stamped with when it was read: its line, with its model
    /// audio moved into `model.wav`. Frames sent and the handshake are the tap's to record, as
    /// they happen.
    fn received(&self, frame: &WireFrame) {
        if frame.handshake {
            return;
        }
        let (message, audio, skipped) = match &frame.body {
            WireBody::Received { message, audio } => {
                (Some(message.as_ref()), audio.as_slice(), None)
            }
            WireBody::Unreadable(reason) => (None, &[][..], Some(reason.clone())),
            WireBody::Sent(_) => return,
        };
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        inner.fill_unclaimed();
        let message =
            message.and_then(|message| Recorder::server_value(&mut inner, message, audio));
        let line = Line {
            t: self.since_start(frame.at),
            record: Record::Recv {
                setup: false,
                message,
                skipped,
            },
        };
        inner.write_line(&line);
    }

    /// A frame a session read, recorded whole at once (format 4, where no app applies its
    /// audio later): its line, its model audio written into `model.wav` from the frame's
    /// events and referred to where the message had it; or why it could not be used.
    pub(super) fn inbound(&self, inbound: &Inbound) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        let (message, skipped) = match &inbound.message {
            Some(message) => (serde_json::to_value(message.as_ref()).ok(), None),
            None => {
                let reason = inbound.events.iter().find_map(|event| match event {
                    ServerEvent::FrameSkipped { reason } => Some(reason.clone()),
                    _ => None,
                });
                if reason.is_none() {
                    // The session's own news, not a frame.
                    return;
                }
                (None, reason)
            }
        };
        let mut message = message;
        let mut samples = inbound.events.iter().filter_map(|event| match event {
            ServerEvent::ModelAudio { pcm, .. } => Some(pcm),
            _ => None,
        });
        if let Some(message) = &mut message {
            put_audio_refs(message, &inbound.audio, |part| {
                Recorder::audio(&mut inner, Track::Model, samples.next()?, part.sample_rate)
            });
        }
        let line = Line {
            t: self.since_start(inbound.at),
            record: Record::Recv {
                setup: false,
                message,
                skipped,
            },
        };
        inner.write_line(&line);
    }

    fn now(&self) -> f64 {
        self.since_start(Instant::now())
    }

    fn since_start(&self, at: Instant) -> f64 {
        (at.saturating_duration_since(self.started).as_micros() as f64) / 1e6
    }

    /// Writes the audio of `blob_data` to a track and returns where it went.
    fn audio(inner: &mut Inner, track: Track, pcm: &[u8], rate: u32) -> Option<AudioRef> {
        if inner.failed {
            return None;
        }
        let fixed_rates = inner.fixed_rates;
        let (slot, file, track_rate) = match track {
            Track::Model => (&mut inner.model, MODEL_WAV, OUTPUT_SAMPLE_RATE),
            Track::Mic => (&mut inner.mic, MIC_WAV, INPUT_SAMPLE_RATE),
        };
        if slot.is_none() {
            let spec = hound::WavSpec {
                channels: 1,
                sample_rate: if fixed_rates { track_rate } else { rate },
                bits_per_sample: 16,
                sample_format: hound::SampleFormat::Int,
            };
            match hound::WavWriter::create(inner.dir.join(file), spec) {
                Ok(writer) => {
                    *slot = Some(WavTrack {
                        writer,
                        samples: 0,
                        resampler: None,
                    })
                }
                Err(e) => {
                    warn!("recording stopped: cannot create {file}: {e}");
                    inner.failed = true;
                    return None;
                }
            }
        }
        let wav = slot.as_mut()?;
        let converted =
            (fixed_rates && rate != track_rate).then(|| wav.converted(pcm, rate, track_rate));
        let samples: Box<dyn Iterator<Item = i16>> = match &converted {
            Some(samples) => Box::new(samples.iter().copied()),
            None => Box::new(
                pcm.chunks_exact(2)
                    .map(|chunk| i16::from_le_bytes([chunk[0], chunk[1]])),
            ),
        };
        let offset = wav.samples;
        let mut written = 0u64;
        for sample in samples {
            if wav.writer.write_sample(sample).is_err() {
                break;
            }
            written += 1;
        }
        // Updates the header now, so the file is valid if we are killed after this line.
        if let Err(e) = wav.writer.flush() {
            warn!("recording stopped: writing {file} failed: {e}");
            inner.failed = true;
        }
        wav.samples += written;
        Some(AudioRef {
            file: file.to_owned(),
            sample_offset: offset,
            sample_count: written,
        })
    }
}

impl WavTrack {
    /// `pcm` (PCM16 LE at `rate`) at the track's `to` rate, through a streaming resampler
    /// kept from chunk to chunk while the rate stays the same; what it still holds back comes
    /// out with the next chunk.
    fn converted(&mut self, pcm: &[u8], rate: u32, to: u32) -> Vec<i16> {
        if self.resampler.as_ref().is_none_or(|r| r.rate_in() != rate) {
            self.resampler = StreamResampler::new(rate, to)
                .map_err(|e| warn!("recording: {e:#}"))
                .ok();
        }
        let Some(resampler) = &mut self.resampler else {
            return Vec::new();
        };
        let input: Vec<f32> = pcm
            .chunks_exact(2)
            .map(|c| f32::from(i16::from_le_bytes([c[0], c[1]])) / 32768.0)
            .collect();
        let mut out = Vec::with_capacity(input.len() * to as usize / rate.max(1) as usize + 16);
        resampler.push(&input, &mut out);
        out.iter()
            .map(|s| (s * 32768.0).round().clamp(-32768.0, 32767.0) as i16)
            .collect()
    }
}

impl Drop for Inner {
    /// The last frame's chunks that were never applied leave silence in their place, so its
    /// line's references hold.
    fn drop(&mut self) {
        self.fill_unclaimed();
    }
}

impl Inner {
    /// The place in `model.wav` for `part`'s samples, after those already reserved.
    fn reserve(&mut self, part: &AudioPart) -> Option<AudioRef> {
        // Creates the file at the chunk's rate, as writing it would.
        let end = match &self.model {
            Some(wav) => wav.samples,
            None => Recorder::audio(self, Track::Model, &[], part.sample_rate)?.sample_offset,
        };
        let reserved: u64 = self.unclaimed.iter().map(|at| at.sample_count).sum();
        Some(AudioRef {
            file: MODEL_WAV.to_owned(),
            sample_offset: end + reserved,
            sample_count: (part.bytes / 2) as u64,
        })
    }

    /// Fills the places reserved for chunks the app never applied with silence.
    fn fill_unclaimed(&mut self) {
        while let Some(at) = self.unclaimed.pop_front() {
            let silence = vec![0u8; usize::try_from(at.sample_count * 2).unwrap_or(0)];
            Recorder::audio(self, Track::Model, &silence, OUTPUT_SAMPLE_RATE);
        }
    }

    /// Writes a picture sent to its own file in `frames/`; the reference its line holds
    /// instead. A picture that cannot be written stops the recording, as a line would.
    fn picture(&mut self, blob: &livetalk_live::wire::Blob) -> Option<pictures::PictureRef> {
        if self.failed {
            return None;
        }
        self.pictures += 1;
        match pictures::keep(&self.dir, self.pictures, &blob.mime_type, &blob.data) {
            Ok(reference) => Some(reference),
            Err(e) => {
                warn!(
                    "recording stopped: writing a picture to {}/ failed: {e}",
                    pictures::FRAMES_DIR
                );
                self.failed = true;
                None
            }
        }
    }

    fn write_line(&mut self, line: &Line) {
        if self.failed {
            return;
        }
        let Some(text) = format::encode(line) else {
            warn!("recording: could not encode a line");
            return;
        };
        // One write per line, unbuffered: a crash leaves at most the last line cut short.
        if let Err(e) = self.log.write_all(text.as_bytes()) {
            warn!("recording stopped: writing {LOG_FILE} failed: {e}");
            self.failed = true;
        }
    }
}

/// Replaces `value[path…].data` with the audio reference.
/// Puts into a server message (as JSON) where each of its model audio parts went: the
/// reference `place` gives the part (none: the part is left as it is).
fn put_audio_refs(
    message: &mut Value,
    audio: &[AudioPart],
    mut place: impl FnMut(&AudioPart) -> Option<AudioRef>,
) {
    for part in audio {
        let Some(at) = place(part) else {
            continue;
        };
        if let Some(part_value) = message
            .pointer_mut("/serverContent/modelTurn/parts")
            .and_then(|parts| parts.get_mut(part.part))
        {
            put_ref(part_value, &["inlineData"], &at);
        }
    }
}

fn put_ref(value: &mut Value, path: &[&str], audio: &AudioRef) {
    let mut at = value;
    for key in path {
        match at.get_mut(*key) {
            Some(next) => at = next,
            None => return,
        }
    }
    if let (Some(object), Ok(reference)) = (at.as_object_mut(), serde_json::to_value(audio)) {
        object.insert("data".to_owned(), reference);
    }
}

/// Puts a picture's reference where its base64 was (the message at `path`, a list's items by
/// index).
fn put_picture(value: &mut Value, path: &[&str], picture: Option<pictures::PictureRef>) {
    let Some(picture) = picture else { return };
    let at = path.iter().try_fold(value, |at, key| match at {
        Value::Array(items) => items.get_mut(key.parse::<usize>().ok()?),
        _ => at.get_mut(*key),
    });
    if let (Some(Value::Object(blob)), Ok(reference)) = (at, serde_json::to_value(picture)) {
        blob.insert("data".to_owned(), reference);
    }
}

impl WireTap for Recorder {
    fn connecting(&self, host: &str) {
        self.write(Record::Connect {
            host: host.to_owned(),
        });
    }

    fn sent(&self, message: &Arc<ClientMessage>, _bytes: usize) {
        let Ok(mut value) = serde_json::to_value(message) else {
            return;
        };
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        if let ClientMessage::RealtimeInput(input) = message.as_ref() {
            if let Some(blob) = &input.audio {
                let rate = blob.declared_rate().unwrap_or(INPUT_SAMPLE_RATE);
                if let Some(audio) = Recorder::audio(&mut inner, Track::Mic, &blob.data, rate) {
                    put_ref(&mut value, &["realtimeInput", "audio"], &audio);
                }
            }
            if let Some(blob) = &input.video {
                let picture = inner.picture(blob);
                put_picture(&mut value, &["realtimeInput", "video"], picture);
            }
            for (i, blob) in input.media_chunks.iter().enumerate() {
                if blob.mime_type.starts_with("image/") {
                    let picture = inner.picture(blob);
                    put_picture(
                        &mut value,
                        &["realtimeInput", "mediaChunks", &i.to_string()],
                        picture,
                    );
                }
                if blob.mime_type.starts_with("audio/") {
                    let rate = blob.declared_rate().unwrap_or(INPUT_SAMPLE_RATE);
                    if let Some(audio) = Recorder::audio(&mut inner, Track::Mic, &blob.data, rate)
                        && let Some(chunk) = value
                            .get_mut("realtimeInput")
                            .and_then(|v| v.get_mut("mediaChunks"))
                            .and_then(|v| v.get_mut(i))
                    {
                        put_ref(chunk, &[], &audio);
                    }
                }
            }
        }
        let line = Line {
            t: self.now(),
            record: Record::Send { message: value },
        };
        inner.write_line(&line);
    }

    fn handshake(&self, frame: TappedFrame<'_>, _bytes: usize) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        inner.fill_unclaimed();
        let (message, skipped) = match frame {
            TappedFrame::Message(message) => {
                // Nothing the app applies refers to audio of the handshake: its samples, still
                // in the message, are written at once.
                let mut message = message.clone();
                let (audio, samples) = take_audio(&mut message);
                let value = Recorder::server_value(&mut inner, &message, &audio);
                for (part, pcm) in audio.iter().zip(samples) {
                    inner.unclaimed.pop_front();
                    Recorder::audio(&mut inner, Track::Model, &pcm, part.sample_rate);
                }
                (value, None)
            }
            TappedFrame::Skipped(reason) => (None, Some(reason.to_owned())),
        };
        let line = Line {
            t: self.now(),
            record: Record::Recv {
                setup: true,
                message,
                skipped,
            },
        };
        inner.write_line(&line);
    }

    fn closed(&self, close: &CloseInfo) {
        self.write(Record::Close {
            code: close.code,
            reason: close.reason.clone(),
            message: close.message.clone(),
            initiated_by_client: close.initiated_by_client,
        });
    }
}

impl Recorder {
    /// The server message as JSON, each of its audio parts a reference to where in
    /// `model.wav` its samples go; the places are reserved for the chunks the app applies
    /// next.
    fn server_value(
        inner: &mut Inner,
        message: &ServerMessage,
        audio: &[AudioPart],
    ) -> Option<Value> {
        let mut value = serde_json::to_value(message).ok()?;
        put_audio_refs(&mut value, audio, |part| {
            let at = inner.reserve(part)?;
            inner.unclaimed.push_back(at.clone());
            Some(at)
        });
        Some(value)
    }
}
