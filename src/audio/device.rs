//! cpal hosts and devices: choosing the host (`alsa` or `pulseaudio`), listing devices for
//! `livetalk devices`, finding one by name, and building the input and output streams around
//! the real-time callbacks in [`super::callbacks`].

use std::fmt;
use std::sync::Arc;

use cpal::traits::{DeviceTrait, HostTrait, StreamTrait};
use cpal::{SampleFormat, SizedSample, StreamConfig};

use super::callbacks::{CaptureCallback, OutputCallback};
use super::shared::{CaptureShared, Clock, PlaybackShared};

/// Which cpal host livetalk talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AudioHost {
    /// ALSA (its `default` device follows PulseAudio/PipeWire where those are set up).
    #[default]
    Alsa,
    /// A PulseAudio (or PipeWire-Pulse) server, reached natively; honours `PULSE_SERVER`.
    Pulseaudio,
}

impl AudioHost {
    pub fn name(self) -> &'static str {
        match self {
            AudioHost::Alsa => "alsa",
            AudioHost::Pulseaudio => "pulseaudio",
        }
    }

    pub fn parse(text: &str) -> Option<AudioHost> {
        match text.trim().to_ascii_lowercase().as_str() {
            "alsa" => Some(AudioHost::Alsa),
            "pulseaudio" | "pulse" => Some(AudioHost::Pulseaudio),
            _ => None,
        }
    }

    pub fn open(self) -> Result<cpal::Host, DeviceError> {
        let id = match self {
            AudioHost::Alsa => cpal::HostId::Alsa,
            AudioHost::Pulseaudio => cpal::HostId::PulseAudio,
        };
        cpal::host_from_id(id).map_err(|e| {
            // Without a cookie the client sends zeros, as libpulse does: enough for servers
            // that let anyone in, refused by those that want their own.
            let wants_cookie =
                self == AudioHost::Pulseaudio && e.kind() == cpal::ErrorKind::PermissionDenied;
            let hint = if wants_cookie {
                " (the server wants its cookie: set PULSE_COOKIE to its cookie file, or use \
                 --audio-host alsa)"
            } else {
                ""
            };
            DeviceError::new(format!("{} audio: {e}{hint}", self.name()))
        })
    }
}

impl fmt::Display for AudioHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What to do when a host has no devices (a machine without a sound card, a container), said
/// by `livetalk devices` when it finds none.
pub const NO_DEVICES_HINT: &str = "no sound card here? `livetalk --no-audio` talks in text only; \
    `--audio-host alsa` or `--audio-host pulseaudio` tries the other audio system; \
    docs/audio.md makes a virtual microphone and speaker to try voice";

/// What to do when a session in the full-screen app opened no device, said with the warning.
pub const NO_DEVICES_IN_SESSION: &str = "Text chat works. F6 opens the devices again, \
    `livetalk devices` lists them, --no-audio starts without audio, and docs/audio.md makes a \
    virtual microphone and speaker";

/// The same for a run without the app's keys (headless, a replay): no key to press.
pub const NO_DEVICES_IN_A_RUN: &str = "Text chat works. `livetalk devices` lists the devices, \
    --no-audio starts without audio, and docs/audio.md makes a virtual microphone and speaker";

/// Why a device could not be used, in words for the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceError(pub String);

impl DeviceError {
    pub fn new(message: impl Into<String>) -> Self {
        DeviceError(message.into())
    }
}

impl fmt::Display for DeviceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DeviceError {}

/// Input or output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Input,
    Output,
}

impl Direction {
    fn noun(self) -> &'static str {
        match self {
            Direction::Input => "microphone",
            Direction::Output => "speaker",
        }
    }
}

/// One device as `livetalk devices` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceListing {
    pub direction: Direction,
    /// What `--input-device` / `--output-device` accept.
    pub name: String,
    pub description: String,
    pub is_default: bool,
    /// Default rate, channels and sample format.
    pub rate: u32,
    pub channels: u16,
    pub format: String,
}

/// The name a device is chosen by: its host-specific id (e.g. `spk.monitor`, `hw:CARD=PCH`).
fn device_name(device: &cpal::Device) -> String {
    device
        .id()
        .map(|id| id.id().to_string())
        .or_else(|_| device.description().map(|d| d.name().to_owned()))
        .unwrap_or_else(|_| "unknown device".to_owned())
}

fn device_description(device: &cpal::Device) -> String {
    device
        .description()
        .map(|d| d.name().to_owned())
        .unwrap_or_default()
}

/// What `livetalk devices` shows of a host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceList {
    /// Every usable input and output, defaults first.
    pub listings: Vec<DeviceListing>,
    /// How many more entries the host names that cannot be opened now (ALSA lists every
    /// plugin it knows).
    pub unusable: usize,
    /// The names of the host's default input and output, whether usable or not.
    pub default_input: Option<String>,
    pub default_output: Option<String>,
}

/// Every usable input and output device of the host, defaults marked and first.
pub fn list(host: AudioHost) -> Result<DeviceList, DeviceError> {
    let cpal_host = host.open()?;
    let defaults = [
        (Direction::Input, cpal_host.default_input_device()),
        (Direction::Output, cpal_host.default_output_device()),
    ];
    let mut devices: Vec<cpal::Device> = cpal_host
        .devices()
        .map_err(|e| DeviceError::new(format!("listing {host} devices: {e}")))?
        .collect();
    // ALSA's `default` is not among its hints; list it too.
    for (_, device) in &defaults {
        if let Some(device) = device
            && !devices
                .iter()
                .any(|d| device_name(d) == device_name(device))
        {
            devices.insert(0, device.clone());
        }
    }
    let mut listings = Vec::new();
    let mut unusable = 0;
    for device in devices {
        let name = device_name(&device);
        for direction in [Direction::Input, Direction::Output] {
            let config = match direction {
                Direction::Input if device.supports_input() => device.default_input_config(),
                Direction::Output if device.supports_output() => device.default_output_config(),
                _ => continue,
            };
            let Ok(config) = config else {
                unusable += 1;
                continue;
            };
            let is_default = defaults.iter().any(|(d, default)| {
                *d == direction && default.as_ref().is_some_and(|x| device_name(x) == name)
            });
            listings.push(DeviceListing {
                direction,
                name: name.clone(),
                description: device_description(&device),
                is_default,
                rate: config.sample_rate(),
                channels: config.channels(),
                format: config.sample_format().to_string(),
            });
        }
    }
    listings.sort_by_key(|l| !l.is_default);
    let [(_, default_input), (_, default_output)] = defaults;
    Ok(DeviceList {
        listings,
        unusable,
        default_input: default_input.as_ref().map(device_name),
        default_output: default_output.as_ref().map(device_name),
    })
}

/// `livetalk devices`: inputs then outputs, one line each, defaults marked with `*`; a
/// default that cannot be opened is said, not silently left unmarked.
pub fn listing_table(host: AudioHost) -> Result<String, DeviceError> {
    // Opening every device to read its format makes C libraries talk on stderr: alsa-lib about
    // cards it probes, and libjack, which ALSA's jack plugin loads, about the JACK server it
    // cannot reach. alsa-lib's error handler catches only the first; libjack's own
    // jack_set_error_function would need libjack linked and called over FFI, which this crate
    // forbids. So fd 2 is caught for the moment: `devices` is a one-shot command with nothing
    // else to print meanwhile.
    let list =
        crate::output::catching_stderr("audio libraries while listing devices", || list(host))?;
    let mut table = format!("Audio devices on the {host} host (* = default):\n");
    for (direction, title, default) in [
        (Direction::Input, "Input", &list.default_input),
        (Direction::Output, "Output", &list.default_output),
    ] {
        table.push_str(&format!("{title}:\n"));
        let rows: Vec<&DeviceListing> = list
            .listings
            .iter()
            .filter(|l| l.direction == direction)
            .collect();
        if rows.is_empty() {
            table.push_str("  (none)\n");
        }
        let width = rows
            .iter()
            .map(|l| l.name.chars().count())
            .max()
            .unwrap_or(0);
        for l in &rows {
            let mark = if l.is_default { '*' } else { ' ' };
            let format = format!(
                "{:>8}  {} ch  {:<4}",
                super::pcm::rate_path(l.rate, l.rate),
                l.channels,
                l.format
            );
            table.push_str(&format!(
                "{mark} {:<width$}  {format}  {}\n",
                l.name, l.description
            ));
        }
        if !rows.iter().any(|l| l.is_default) {
            let noun = direction.noun();
            table.push_str(&match default {
                Some(name) => format!("  (no default {noun}: {name:?} cannot be opened now)\n"),
                None => format!("  (no default {noun}: the {host} host names none)\n"),
            });
        }
    }
    if list.unusable > 0 {
        table.push_str(&format!(
            "({} more entries the {host} host knows cannot be opened now and are not listed.)\n",
            list.unusable
        ));
    }
    if list.listings.is_empty() {
        table.push_str(&format!("({NO_DEVICES_HINT}.)\n"));
    }
    Ok(table)
}

/// Finds a device: the default when `wanted` is `None`, else by exact name, then by a
/// case-insensitive match on name or description.
pub fn find(
    host: &cpal::Host,
    host_kind: AudioHost,
    direction: Direction,
    wanted: Option<&str>,
) -> Result<cpal::Device, DeviceError> {
    let Some(wanted) = wanted else {
        let device = match direction {
            Direction::Input => host.default_input_device(),
            Direction::Output => host.default_output_device(),
        };
        return device.ok_or_else(|| {
            DeviceError::new(format!(
                "no default {} on the {host_kind} audio host",
                direction.noun()
            ))
        });
    };
    let candidates: Vec<cpal::Device> = host
        .devices()
        .map_err(|e| DeviceError::new(format!("listing {host_kind} devices: {e}")))?
        .filter(|d| match direction {
            Direction::Input => d.supports_input(),
            Direction::Output => d.supports_output(),
        })
        .collect();
    let wanted_lower = wanted.to_lowercase();
    let exact = candidates
        .iter()
        .position(|d| device_name(d) == wanted || d.id().is_ok_and(|id| id.to_string() == wanted));
    let loose = || {
        candidates.iter().position(|d| {
            device_name(d).to_lowercase().contains(&wanted_lower)
                || device_description(d).to_lowercase().contains(&wanted_lower)
        })
    };
    match exact.or_else(loose) {
        Some(i) => Ok(candidates[i].clone()),
        None => Err(DeviceError::new(format!(
            "no {} named {wanted:?} on the {host_kind} audio host (`livetalk devices` lists them)",
            direction.noun()
        ))),
    }
}

/// An open stream and what it runs at.
pub struct OpenStream {
    pub stream: cpal::Stream,
    pub name: String,
    pub rate: u32,
    pub channels: u16,
}

/// A stream error as the device's thread reports it (not the data callback).
#[derive(Debug, Clone)]
pub struct StreamFault {
    pub message: String,
    pub severity: Severity,
}

/// What a stream error means for the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// The stream goes on by the host's word: an overrun or underrun (a glitch), a refused
    /// real-time priority, a default device followed to its replacement.
    Passing,
    /// The stream may or may not go on: the host could not say (ALSA's PulseAudio plugin
    /// fails hundreds of calls while its stream connects, then plays on).
    Doubtful,
    /// The stream is gone: the device vanished, its configuration no longer holds, access
    /// was taken away.
    Fatal,
}

impl StreamFault {
    fn new(error: &cpal::Error) -> StreamFault {
        use cpal::ErrorKind::*;
        let severity = match error.kind() {
            Xrun | RealtimeDenied | DeviceChanged => Severity::Passing,
            DeviceNotAvailable | StreamInvalidated | HostUnavailable | PermissionDenied => {
                Severity::Fatal
            }
            _ => Severity::Doubtful,
        };
        StreamFault {
            message: error.to_string(),
            severity,
        }
    }
}

/// Reports a stream error from the device's thread (not the data callback).
pub type ErrorSink = Arc<dyn Fn(StreamFault) + Send + Sync>;

/// The period (ms) asked of a stream: short periods keep barge-in and mic latency low.
const PERIOD_MS: u32 = 10;

/// The microphone's period on `host`.
///
/// On ALSA it is 40 ms: each period wakes cpal's thread, ALSA's PulseAudio plugin (its
/// mainloop thread and the sound server behind it) and the audio worker. On the bench's rig,
/// connected and silent, 40 ms periods took livetalk from 4.5–4.9 % of a core to 3.2 % and the
/// sound server from 2.5–3.0 % to 2.0 %, against 20 ms (the mic frame). 10 ms had cost 8.8 %
/// and 6.4 %. Longer periods would delay barge-in by voice: a frame goes to the socket when
/// the callback that delivered its newest sample runs, so a frame's oldest samples can be a
/// period old then.
///
/// On the PulseAudio host it is 30 ms. cpal had the server hold at most one period of recorded
/// audio, and the server silently drops what does not fit when the client reads a few
/// milliseconds late: with 10 ms, about half the echo rig's starts lost 60–380 ms of mic audio
/// (and the echo canceller its alignment). The patched cpal leaves that buffer at the server's
/// size (`patches/README.md`); 30 ms stays for the wake-ups it saves.
fn input_period_ms(host: AudioHost) -> u32 {
    match host {
        AudioHost::Pulseaudio => 30,
        AudioHost::Alsa => 40,
    }
}

fn stream_config(
    device: &cpal::Device,
    direction: Direction,
    period_ms: u32,
) -> Result<(StreamConfig, SampleFormat), DeviceError> {
    let supported = match direction {
        Direction::Input => device.default_input_config(),
        Direction::Output => device.default_output_config(),
    }
    .map_err(|e| DeviceError::new(format!("{}: {e}", device_name(device))))?;
    let supported = match direction {
        Direction::Input => mono_input(device, &supported).unwrap_or(supported),
        Direction::Output => supported,
    };
    let mut config = supported.config();
    // The host may round it.
    let wanted = (config.sample_rate * period_ms / 1000).max(64);
    config.buffer_size = match supported.buffer_size() {
        cpal::SupportedBufferSize::Range { min, max } if (*min..=*max).contains(&wanted) => {
            cpal::BufferSize::Fixed(wanted)
        }
        cpal::SupportedBufferSize::Unknown => cpal::BufferSize::Fixed(wanted),
        _ => cpal::BufferSize::Default,
    };
    Ok((config, supported.sample_format()))
}

/// The device's default input configuration in mono, when it offers mono at the same rate and
/// format. The capture callback downmixes to mono first thing, so a stereo stream only moves
/// twice the samples through the sound server, ALSA's PulseAudio plugin and the callback (a
/// mono source is upmixed for it), and the server does the downmix as cheaply where it must.
fn mono_input(
    device: &cpal::Device,
    default: &cpal::SupportedStreamConfig,
) -> Option<cpal::SupportedStreamConfig> {
    if default.channels() == 1 {
        return None;
    }
    device
        .supported_input_configs()
        .ok()?
        .filter(|r| r.channels() == 1 && r.sample_format() == default.sample_format())
        .find_map(|r| r.try_with_sample_rate(default.sample_rate()))
}

/// Calls `$build::<T>` with the sample type of `$format`: one list of the formats livetalk
/// converts, for input and output alike. `Err` for a format it does not.
macro_rules! for_sample_format {
    ($format:expr, $device:expr, $build:ident, $($arg:expr),*) => {
        match $format {
            SampleFormat::F32 => Ok($build::<f32>($device, $($arg),*)),
            SampleFormat::I16 => Ok($build::<i16>($device, $($arg),*)),
            SampleFormat::U16 => Ok($build::<u16>($device, $($arg),*)),
            SampleFormat::I32 => Ok($build::<i32>($device, $($arg),*)),
            SampleFormat::F64 => Ok($build::<f64>($device, $($arg),*)),
            SampleFormat::U8 => Ok($build::<u8>($device, $($arg),*)),
            SampleFormat::I8 => Ok($build::<i8>($device, $($arg),*)),
            other => Err(DeviceError::new(format!(
                "{}: unsupported sample format {other}",
                device_name($device)
            ))),
        }
    };
}

fn open_error(device: &cpal::Device, e: cpal::Error) -> DeviceError {
    DeviceError::new(format!("cannot open {}: {e}", device_name(device)))
}

/// Opens the microphone; returns the stream and the ring the callback fills.
pub fn open_input(
    device: &cpal::Device,
    host: AudioHost,
    shared: Arc<CaptureShared>,
    clock: Clock,
    on_error: ErrorSink,
) -> Result<(OpenStream, rtrb::Consumer<f32>), DeviceError> {
    let period = input_period_ms(host);
    let (config, format) = stream_config(device, Direction::Input, period)?;
    // A second of audio: the worker drains it every few milliseconds.
    let (producer, consumer) = rtrb::RingBuffer::new(config.sample_rate as usize);
    let callback = CaptureCallback {
        producer,
        channels: usize::from(config.channels),
        shared,
        clock,
        written: 0,
    };
    let stream = for_sample_format!(format, device, build_input, config, callback, on_error)?
        .map_err(|e| open_error(device, e))?;
    stream.play().map_err(|e| open_error(device, e))?;
    Ok((
        OpenStream {
            stream,
            name: device_name(device),
            rate: config.sample_rate,
            channels: config.channels,
        },
        consumer,
    ))
}

fn build_input<T>(
    device: &cpal::Device,
    config: StreamConfig,
    mut callback: CaptureCallback,
    on_error: ErrorSink,
) -> Result<cpal::Stream, cpal::Error>
where
    T: SizedSample,
    f32: cpal::FromSample<T>,
{
    device.build_input_stream(
        config,
        move |data: &[T], info: &cpal::InputCallbackInfo| {
            let at = info.timestamp();
            callback.process(data, at.callback.checked_duration_since(at.capture));
        },
        move |e| on_error(StreamFault::new(&e)),
        None,
    )
}

/// What the output stream needs besides the device.
pub struct OutputParts {
    pub consumer: rtrb::Consumer<f32>,
    /// Where the callback copies what it played (the echo canceller's far end).
    pub reference: rtrb::Producer<f32>,
    pub startup_frames: usize,
    pub shared: Arc<PlaybackShared>,
    pub clock: Clock,
}

/// The config an output device will be opened with: (rate, channels).
pub fn output_format(device: &cpal::Device) -> Result<(u32, u16), DeviceError> {
    let (config, _) = stream_config(device, Direction::Output, PERIOD_MS)?;
    Ok((config.sample_rate, config.channels))
}

/// Opens the speaker around a ring the feeder fills (mono at the device rate).
pub fn open_output(
    device: &cpal::Device,
    parts: OutputParts,
    on_error: ErrorSink,
) -> Result<OpenStream, DeviceError> {
    let (config, format) = stream_config(device, Direction::Output, PERIOD_MS)?;
    let callback = OutputCallback::new(
        parts.consumer,
        parts.reference,
        usize::from(config.channels),
        parts.startup_frames,
        parts.shared,
        parts.clock,
    );
    let stream = for_sample_format!(format, device, build_output, config, callback, on_error)?
        .map_err(|e| open_error(device, e))?;
    stream.play().map_err(|e| open_error(device, e))?;
    Ok(OpenStream {
        stream,
        name: device_name(device),
        rate: config.sample_rate,
        channels: config.channels,
    })
}

fn build_output<T>(
    device: &cpal::Device,
    config: StreamConfig,
    mut callback: OutputCallback,
    on_error: ErrorSink,
) -> Result<cpal::Stream, cpal::Error>
where
    T: SizedSample + cpal::FromSample<f32>,
    f32: cpal::FromSample<T>,
{
    device.build_output_stream(
        config,
        move |data: &mut [T], info: &cpal::OutputCallbackInfo| {
            let at = info.timestamp();
            callback.process(data, at.playback.checked_duration_since(at.callback));
        },
        move |e| on_error(StreamFault::new(&e)),
        None,
    )
}
