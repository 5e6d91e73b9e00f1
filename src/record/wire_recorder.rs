//! The recorder of recording format 4 (docs/recording-format.md): what went over a Live
//! session's connections and nothing of an app: every frame both ways (`send`, `recv`, with
//! `connect` and `close`), what the session did on its own (`link`), how it ended (`ended`) and
//! what its owner had to say (`warning`); the microphone's audio in `mic.wav` at 16 kHz and the
//! model's in `model.wav` at 24 kHz, whatever rate a chunk came at. For whoever carries a
//! session for others: `livetalk serve --record` records each app session with it. The same
//! `inspect`, `replay` and `check` read it ([`super::format::v4`]).

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use super::format::v3::Meta;
use super::recorder::Recorder;
use super::{Record, WIRE_FORMAT_VERSION};
use livetalk_live::CloseInfo;
use livetalk_live::connection::{TappedFrame, WireTap};
use livetalk_live::events::Inbound;
use livetalk_live::session::SessionChange;
use livetalk_live::wire::ClientMessage;

/// What a format-4 recording says about itself on its first line.
#[derive(Debug, Clone)]
pub struct WireMeta {
    /// The model and voice the session was set up with.
    pub model: String,
    pub voice: String,
    /// The Live server's host, or `offline demo model`.
    pub endpoint_host: String,
    pub offline: bool,
    /// Who recorded it (`livetalk serve`), for people reading the file.
    pub recorded_by: &'static str,
    /// More about the session, for people (the bridge's session id, say); never a secret.
    pub details: Value,
}

/// Records one session in format 4. Cheap to clone; all clones write to the same folder.
#[derive(Clone)]
pub struct WireRecorder {
    core: Recorder,
}

impl WireRecorder {
    /// Creates the folder and writes the metadata line; refuses a folder that already holds a
    /// recording.
    pub fn create(dir: &Path, meta: WireMeta) -> anyhow::Result<WireRecorder> {
        let mut config = serde_json::json!({ "recorded_by": meta.recorded_by });
        if let (Some(config), Value::Object(details)) = (config.as_object_mut(), meta.details) {
            config.extend(details);
        }
        let meta = Meta {
            format: WIRE_FORMAT_VERSION,
            livetalk_version: env!("CARGO_PKG_VERSION").to_owned(),
            started_at: jiff::Zoned::now().to_string(),
            model: meta.model,
            voice: meta.voice,
            endpoint_host: meta.endpoint_host,
            offline: meta.offline,
            devices: Vec::new(),
            config,
            audio: None,
        };
        Ok(WireRecorder {
            core: Recorder::start(dir, meta, true)?,
        })
    }

    /// The recording folder.
    pub fn dir(&self) -> &Path {
        self.core.dir()
    }

    /// A frame the session read, stamped with when it was read: its message, or why it could
    /// not be used. The session's end is [`Self::ended`]'s, not a frame.
    pub fn received(&self, inbound: &Inbound) {
        self.core.inbound(inbound);
    }

    /// What the session did on its own.
    pub fn link(&self, change: &SessionChange) {
        self.core.write(Record::Link {
            change: change.into(),
        });
    }

    /// The session is over for good.
    pub fn ended(&self, close: &CloseInfo) {
        self.core.write(Record::Ended {
            code: close.code,
            reason: close.reason.clone(),
            message: close.message.clone(),
            initiated_by_client: close.initiated_by_client,
        });
    }

    /// Something the recording's owner said about the session.
    pub fn warning(&self, message: &str) {
        self.core.write(Record::Warning {
            message: message.to_owned(),
        });
    }
}

impl WireTap for WireRecorder {
    fn connecting(&self, host: &str) {
        self.core.connecting(host);
    }

    fn sent(&self, message: &Arc<ClientMessage>, bytes: usize) {
        self.core.sent(message, bytes);
    }

    fn handshake(&self, frame: TappedFrame<'_>, bytes: usize) {
        self.core.handshake(frame, bytes);
    }

    fn closed(&self, close: &CloseInfo) {
        self.core.closed(close);
    }
}
