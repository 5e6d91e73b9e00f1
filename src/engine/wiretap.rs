//! The engine's wire tap: what only the connection knows (each attempt, the handshake, every
//! frame sent, the close) goes to the recorder as it happens, and every frame sent and read in
//! the handshake also goes to the app, where it joins the frames the session reads. A frame
//! the app cannot take (it is behind) is counted, and the count rides on the next frame that
//! gets through, so the inspector's log says how many it never saw.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::mpsc;
use tracing::debug;

use crate::app::{WireBody, WireFrame};
use crate::record::Recorder;
use livetalk_live::CloseInfo;
use livetalk_live::connection::{TappedFrame, WireTap};
use livetalk_live::wire::ClientMessage;

/// Frames the app has not taken yet: twenty seconds of a voice turn. Beyond it they are
/// dropped for the inspector (the recorder has them already) and counted, never waited for:
/// the tap runs on the connection's tasks.
pub(super) const FRAMES_WAITING: usize = 1024;

/// See the module doc.
pub(super) struct EngineTap {
    recorder: Option<Recorder>,
    frames: mpsc::Sender<WireFrame>,
    /// Frames not passed on since the last one that was.
    missed: AtomicU64,
}

impl EngineTap {
    /// The tap a session is opened with.
    pub(super) fn shared(
        recorder: Option<Recorder>,
        frames: mpsc::Sender<WireFrame>,
    ) -> Arc<dyn WireTap> {
        Arc::new(EngineTap {
            recorder,
            frames,
            missed: AtomicU64::new(0),
        })
    }

    fn to_app(&self, mut frame: WireFrame) {
        // Both connection tasks tap: a count taken here and not passed on is put back.
        let missed = self.missed.swap(0, Ordering::Relaxed);
        frame.missed_before = missed;
        if self.frames.try_send(frame).is_err() {
            self.missed.fetch_add(missed + 1, Ordering::Relaxed);
            debug!("a frame was not passed to the app: it is behind or gone");
        }
    }
}

impl WireTap for EngineTap {
    fn connecting(&self, host: &str) {
        if let Some(recorder) = &self.recorder {
            recorder.connecting(host);
        }
    }

    fn sent(&self, message: &Arc<ClientMessage>, bytes: usize) {
        if let Some(recorder) = &self.recorder {
            recorder.sent(message, bytes);
        }
        self.to_app(WireFrame::sent(message, bytes));
    }

    fn handshake(&self, frame: TappedFrame<'_>, bytes: usize) {
        let body = match &frame {
            TappedFrame::Message(message) => WireBody::received((*message).clone()),
            TappedFrame::Skipped(reason) => WireBody::Unreadable((*reason).to_owned()),
        };
        if let Some(recorder) = &self.recorder {
            recorder.handshake(frame, bytes);
        }
        let elided = match &body {
            WireBody::Received { audio, .. } => audio.iter().map(|part| part.bytes).sum(),
            _ => 0,
        };
        self.to_app(WireFrame {
            at: std::time::Instant::now(),
            bytes,
            handshake: true,
            elided,
            missed_before: 0,
            body,
        });
    }

    fn closed(&self, close: &CloseInfo) {
        if let Some(recorder) = &self.recorder {
            recorder.closed(close);
        }
    }
}
