//! The session's own settings: model, voice, system instruction, transcription, and the
//! `[session]` table (deadlines, resumption, compression, reconnects, the bridge transport).

use std::time::Duration;

use super::file::{SessionLayer, TranscriptionLayer};
use super::{ConfigError, seconds, turn_seconds};
use livetalk_live::models::{VOICES, model_name, voice_name};

/// How the voice travels on the `--bridge` route (`session.bridge_transport`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum BridgeTransport {
    /// `SEND_REALTIME_INPUT` and `AUDIO_CHUNK` on the bridge WebSocket.
    #[default]
    WebSocket,
    /// An Opus track on a WebRTC peer connection beside the WebSocket.
    WebRtc,
}

impl BridgeTransport {
    pub(super) fn parse(value: &str, source: &str, key: &str) -> Result<Self, ConfigError> {
        match value.trim().to_ascii_lowercase().as_str() {
            "websocket" => Ok(BridgeTransport::WebSocket),
            "webrtc" => Ok(BridgeTransport::WebRtc),
            _ => Err(ConfigError::new(
                source,
                key,
                format!("{value:?} is not one of websocket, webrtc"),
            )),
        }
    }
}

/// What the layers said of the session so far.
#[derive(Debug, Default)]
pub(super) struct SessionChoice {
    pub(super) model: String,
    pub(super) voice: String,
    pub(super) system_instruction: String,
    pub(super) input_transcription: bool,
    pub(super) output_transcription: bool,
    pub(super) connect_timeout: Duration,
    pub(super) turn_timeout: Duration,
    pub(super) resumption: bool,
    pub(super) context_compression: bool,
    pub(super) reconnect_attempts: u32,
    pub(super) bridge_transport: BridgeTransport,
}

impl SessionChoice {
    /// A model id, checked and written as the API takes it (`models/ID`).
    pub(super) fn set_model(&mut self, value: &str, source: &str) -> Result<(), ConfigError> {
        self.model = model_name(value.trim())
            .map_err(|e| ConfigError::new(source, "model", e.to_string()))?;
        Ok(())
    }

    /// One of the prebuilt voices, in any case.
    pub(super) fn set_voice(&mut self, value: &str, source: &str) -> Result<(), ConfigError> {
        let value = value.trim();
        let canonical = voice_name(value).ok_or_else(|| {
            ConfigError::new(
                source,
                "voice",
                format!("unknown voice {value:?}; voices: {}", VOICES.join(", ")),
            )
        })?;
        self.voice = canonical.to_owned();
        Ok(())
    }

    pub(super) fn set_transcription(&mut self, layer: Option<TranscriptionLayer>) {
        if let Some(t) = layer {
            self.input_transcription = t.input.unwrap_or(self.input_transcription);
            self.output_transcription = t.output.unwrap_or(self.output_transcription);
        }
    }

    /// One layer's `[session]` table.
    pub(super) fn apply(&mut self, layer: SessionLayer, source: &str) -> Result<(), ConfigError> {
        if let Some(secs) = layer.connect_timeout_secs {
            self.connect_timeout = seconds(secs, source, "session.connect_timeout_secs")?;
        }
        if let Some(secs) = layer.turn_timeout_secs {
            self.turn_timeout = turn_seconds(secs, source, "session.turn_timeout_secs")?;
        }
        self.resumption = layer.resumption.unwrap_or(self.resumption);
        self.context_compression = layer
            .context_compression
            .unwrap_or(self.context_compression);
        if let Some(attempts) = layer.reconnect_attempts {
            if attempts > 100 {
                return Err(ConfigError::new(
                    source,
                    "session.reconnect_attempts",
                    format!("{attempts} is too many; use 0 to 100"),
                ));
            }
            self.reconnect_attempts = attempts;
        }
        if let Some(transport) = layer.bridge_transport {
            self.bridge_transport =
                BridgeTransport::parse(&transport, source, "session.bridge_transport")?;
        }
        Ok(())
    }
}
