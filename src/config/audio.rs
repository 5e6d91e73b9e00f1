//! The `[audio]` table: microphone, speaker, frame size, echo handling, noise suppression,
//! push-to-talk and the `--output-wav` cap.

use std::time::Duration;

use super::ConfigError;
use super::file::AudioLayer;
use crate::audio::{AudioHost, AudioOptions, EchoMode};

/// One layer's `[audio]` table over `audio`.
pub(super) fn apply(
    audio: &mut AudioOptions,
    a: AudioLayer,
    source: &str,
) -> Result<(), ConfigError> {
    audio.devices = a.enabled.unwrap_or(audio.devices);
    audio.push_to_talk = a.push_to_talk.unwrap_or(audio.push_to_talk);
    audio.noise_suppression = a.noise_suppression.unwrap_or(audio.noise_suppression);
    if let Some(host) = a.host {
        audio.host = audio_host(&host, source)?;
    }
    if let Some(echo) = a.echo {
        audio.echo = echo_mode(&echo, source)?;
    }
    // An empty name means the default device.
    if let Some(name) = a.input_device {
        audio.input_device = Some(name.trim().to_owned()).filter(|n| !n.is_empty());
    }
    if let Some(name) = a.output_device {
        audio.output_device = Some(name.trim().to_owned()).filter(|n| !n.is_empty());
    }
    if let Some(ms) = a.frame_ms {
        if !(20..=100).contains(&ms) {
            return Err(ConfigError::new(
                source,
                "audio.frame_ms",
                format!("{ms} is out of range; use 20 to 100"),
            ));
        }
        audio.frame = Duration::from_millis(ms);
    }
    if let Some(ms) = a.startup_buffer_ms {
        if ms > 1000 {
            return Err(ConfigError::new(
                source,
                "audio.startup_buffer_ms",
                format!("{ms} is too long; use 0 to 1000"),
            ));
        }
        audio.startup_buffer = Duration::from_millis(ms);
    }
    if let Some(mb) = a.output_wav_max_mb {
        audio.output_wav_max_bytes = wav_megabytes(mb, source)?;
    }
    Ok(())
}

pub(super) fn audio_host(value: &str, source: &str) -> Result<AudioHost, ConfigError> {
    AudioHost::parse(value).ok_or_else(|| {
        ConfigError::new(
            source,
            "audio.host",
            format!("{value:?} is not one of alsa, pulseaudio"),
        )
    })
}

/// The `--output-wav` cap in bytes: whole MiB, up to what a WAV file can hold.
pub(super) fn wav_megabytes(mb: u64, source: &str) -> Result<u64, ConfigError> {
    let max_mb = livetalk_live::wav::WAV_MAX_BYTES >> 20;
    if !(1..=max_mb).contains(&mb) {
        return Err(ConfigError::new(
            source,
            "audio.output_wav_max_mb",
            format!("{mb} is out of range; use 1 to {max_mb} (MiB)"),
        ));
    }
    Ok(mb << 20)
}

pub(super) fn echo_mode(value: &str, source: &str) -> Result<EchoMode, ConfigError> {
    EchoMode::parse(value).ok_or_else(|| {
        ConfigError::new(
            source,
            "audio.echo",
            format!("{value:?} is not one of aec, gate, off"),
        )
    })
}
