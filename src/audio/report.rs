//! What the audio system reports to the app: the devices and files it opened, device
//! failures, levels, the echo canceller's state, and the figures of the whole run.

use std::time::Duration;

use super::aec::EchoFigures;
use super::device::Direction;

/// One opened endpoint as the status panel shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StreamInfo {
    /// The device's name, or the WAV file's.
    pub name: String,
    /// The resampling path, e.g. "48 kHz → 16 kHz".
    pub path: String,
}

/// What opening the audio gave.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct AudioSetup {
    pub input: Option<StreamInfo>,
    pub output: Option<StreamInfo>,
    /// Why a device is missing (empty when both opened or none was asked for).
    pub problems: Vec<String>,
}

#[cfg(test)]
impl AudioSetup {
    /// Both devices open, as the rig's are: for the app's and the screen's tests.
    pub fn mic_and_speaker() -> AudioSetup {
        AudioSetup {
            input: Some(StreamInfo {
                name: "mic".into(),
                path: "48 kHz → 16 kHz".into(),
            }),
            output: Some(StreamInfo {
                name: "spk".into(),
                path: "24 kHz → 48 kHz".into(),
            }),
            problems: Vec::new(),
        }
    }
}

/// A latency measured many times: the latest and the worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Latency {
    pub last: Duration,
    pub worst: Duration,
    pub count: u32,
}

impl Latency {
    pub fn record(&mut self, value: Duration) {
        self.last = value;
        self.worst = self.worst.max(value);
        self.count = self.count.saturating_add(1);
    }

    pub fn measured(&self) -> bool {
        self.count > 0
    }
}

/// Counters and latencies for the debug view and the end-of-session summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct AudioFigures {
    /// Mic frames handed to the session.
    pub frames_sent: u64,
    /// Mic frames dropped because the network was slower than the mic.
    pub frames_dropped: u64,
    /// Mic frames sent as silence by the echo gate.
    pub frames_gated: u64,
    /// Mic samples lost because the capture worker fell behind the device.
    pub mic_overflow: u64,
    /// Mic audio lost before it reached livetalk (the sound server or the device dropped it),
    /// sent as silence in its place.
    pub mic_gaps: Duration,
    /// Output callbacks that ran dry mid-turn.
    pub underruns: u64,
    /// Model audio heard, in device time.
    pub played: Duration,
    /// Sample captured → its frame handed to the socket writer.
    pub mic_to_socket: Latency,
    /// First audio of a turn received → first sample out of the output callback.
    pub socket_to_speaker: Latency,
    /// Interrupt (or barge-in) → the output callback writing silence.
    pub interrupt_to_silence: Latency,
}

/// What the audio system tells the app.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AudioEvent {
    /// Devices (and files) opened, or why not.
    Opened(AudioSetup),
    /// A device failed mid-session; it is closed and can be re-opened.
    DeviceFailed {
        direction: Direction,
        message: String,
    },
    /// Model audio started or stopped being heard.
    Audible(bool),
    /// Peak levels (0..1) of the mic and the output since the last report.
    Levels {
        mic: f32,
        output: f32,
    },
    Figures(AudioFigures),
    /// The echo canceller's state (sent when it changes, a few times a second at most).
    Echo(EchoFigures),
    /// The speaker was silenced (an interruption or a barge-in). `echo_heard`: the mic had been
    /// carrying the speaker's echo, judged 300 ms later, once every mic frame that could have
    /// made the service interrupt, and the echo of the last audio played, had been seen.
    Silenced {
        echo_heard: bool,
    },
    /// The `--input-wav` clip has been streamed to its end.
    InputClipEnded,
    /// The `--output-wav` file reached its size cap: it is finished, and the rest of the
    /// model's audio is not written to it.
    OutputWavFull {
        path: String,
        max_bytes: u64,
    },
}
