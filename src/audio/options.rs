//! What the audio system is asked for: devices or WAV files, push-to-talk, and how the model's
//! voice is kept out of the microphone.

use std::path::PathBuf;
use std::time::Duration;

use super::device::AudioHost;

/// How the model's voice is kept out of the microphone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EchoMode {
    /// Cancel the speaker's echo from the mic (WebRTC's AEC3), so the model does not hear
    /// itself and a person can still talk over it: barge-in by voice on laptop speakers.
    #[default]
    Aec,
    /// Send silence while the model is heard, so it does not hear (and interrupt) itself
    /// through the speakers; barge in with the key or by typing.
    Gate,
    /// Always send the mic as it is (headphones, or a system echo canceller).
    Off,
}

impl EchoMode {
    pub fn parse(text: &str) -> Option<EchoMode> {
        match text.trim().to_ascii_lowercase().as_str() {
            "aec" => Some(EchoMode::Aec),
            "gate" => Some(EchoMode::Gate),
            "off" => Some(EchoMode::Off),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            EchoMode::Aec => "aec",
            EchoMode::Gate => "gate",
            EchoMode::Off => "off",
        }
    }

    /// The next mode in the order the echo key steps through them.
    pub fn next(self) -> EchoMode {
        match self {
            EchoMode::Aec => EchoMode::Gate,
            EchoMode::Gate => EchoMode::Off,
            EchoMode::Off => EchoMode::Aec,
        }
    }
}

/// How audio is set up for a conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct AudioOptions {
    /// Use the sound devices (`--no-audio` turns them off; WAV files still work).
    pub devices: bool,
    /// Open the microphone too (a replay only plays).
    pub microphone: bool,
    pub host: AudioHost,
    pub input_device: Option<String>,
    pub output_device: Option<String>,
    /// Length of one mic frame sent to the session (20–100 ms).
    pub frame: Duration,
    /// Audio buffered before playback starts, so bursts do not stutter.
    pub startup_buffer: Duration,
    pub echo: EchoMode,
    /// Noise suppression on a device microphone.
    pub noise_suppression: bool,
    /// Server VAD off; a key brackets speech with activityStart / activityEnd.
    pub push_to_talk: bool,
    /// Stream this WAV as the microphone, in real time, then silence.
    pub input_wav: Option<PathBuf>,
    /// Also write model audio to this 24 kHz mono WAV.
    pub output_wav: Option<PathBuf>,
    /// The output WAV stops growing at this size (bytes, header included).
    pub output_wav_max_bytes: u64,
}

impl Default for AudioOptions {
    fn default() -> Self {
        AudioOptions {
            devices: true,
            microphone: true,
            host: AudioHost::default(),
            input_device: None,
            output_device: None,
            frame: Duration::from_millis(20),
            startup_buffer: Duration::from_millis(40),
            echo: EchoMode::default(),
            noise_suppression: true,
            push_to_talk: false,
            input_wav: None,
            output_wav: None,
            output_wav_max_bytes: 512 << 20,
        }
    }
}

impl AudioOptions {
    /// True when nothing audio-related is asked for.
    pub fn is_off(&self) -> bool {
        !self.devices && self.input_wav.is_none() && self.output_wav.is_none()
    }
}
