//! The engine's side of the audio worker: its events for the app, its mic frames for the
//! session, and the figures only the sending side knows (frames sent and dropped, the latency
//! from capture to the socket), folded into the worker's figures.

use std::time::Duration;

use tokio::sync::{broadcast, mpsc};
use tracing::warn;

use super::report::{AudioEvent, Latency};
use super::{Audio, AudioFeeds, MicFrame};

/// What the audio worker produced next.
pub enum AudioOutput {
    /// For the app.
    Event(AudioEvent),
    /// For the session.
    Frame(MicFrame),
}

/// The audio worker as the engine holds it.
pub struct AudioWorker {
    audio: Audio,
    events: Option<mpsc::UnboundedReceiver<AudioEvent>>,
    frames: Option<broadcast::Receiver<MicFrame>>,
    sent: u64,
    dropped: u64,
    to_socket: Latency,
}

impl AudioWorker {
    pub fn new(audio: Audio, feeds: AudioFeeds) -> Self {
        AudioWorker {
            audio,
            events: Some(feeds.events),
            frames: Some(feeds.frames),
            sent: 0,
            dropped: 0,
            to_socket: Latency::default(),
        }
    }

    /// The worker's command side (play, flush, mute…).
    pub fn audio(&self) -> &Audio {
        &self.audio
    }

    /// The next event or mic frame; `None` once the worker has nothing more to say. Without
    /// `frames_wanted` (no session to send to yet) mic frames wait in their queue, which keeps
    /// the newest two seconds, so the first words spoken while connecting are not lost.
    /// Cancel-safe: both halves are channel receives.
    pub async fn next(&mut self, frames_wanted: bool) -> Option<AudioOutput> {
        loop {
            if self.events.is_none() && self.frames.is_none() {
                return None;
            }
            let events_open = self.events.is_some();
            let frames_open = self.frames.is_some() && frames_wanted;
            if !events_open && !frames_open {
                // Only frames are left, and nobody wants them yet.
                return std::future::pending().await;
            }
            tokio::select! {
                event = async { self.events.as_mut()?.recv().await }, if events_open => match event {
                    Some(event) => return Some(AudioOutput::Event(self.complete(event))),
                    None => self.events = None,
                },
                frame = async {
                    match self.frames.as_mut() {
                        Some(frames) => frames.recv().await,
                        None => std::future::pending().await,
                    }
                }, if frames_open => match frame {
                    Ok(frame) => return Some(AudioOutput::Frame(frame)),
                    // The session fell behind the mic: the oldest frames were dropped.
                    Err(broadcast::error::RecvError::Lagged(n)) => self.dropped += n,
                    Err(broadcast::error::RecvError::Closed) => self.frames = None,
                },
            }
        }
    }

    /// A frame captured at `captured_at` (on the audio clock) went to the session.
    pub fn frame_sent(&mut self, captured_at: u64) {
        self.sent += 1;
        if let Some(latency) = super::shared::span(captured_at, self.audio.clock().now()) {
            self.to_socket.record(latency);
        }
    }

    /// A frame was dropped because the session could not take it now (late audio is worse than
    /// none).
    pub fn frame_dropped(&mut self) {
        self.dropped += 1;
    }

    /// The worker's figures completed with the sending side's.
    fn complete(&self, event: AudioEvent) -> AudioEvent {
        match event {
            AudioEvent::Figures(mut figures) => {
                figures.frames_sent = self.sent;
                figures.frames_dropped += self.dropped;
                figures.mic_to_socket = self.to_socket;
                AudioEvent::Figures(figures)
            }
            other => other,
        }
    }

    /// Asks for the final figures and returns the events still queued up to them; gives up
    /// after half a second.
    pub async fn settle(&mut self) -> Vec<AudioEvent> {
        let Some(events) = &mut self.events else {
            return Vec::new();
        };
        self.audio.request_figures();
        let deadline = tokio::time::Instant::now() + Duration::from_millis(500);
        let mut settled = Vec::new();
        while let Ok(Some(event)) = tokio::time::timeout_at(deadline, events.recv()).await {
            let last = matches!(event, AudioEvent::Figures(_));
            settled.push(event);
            if last {
                break;
            }
        }
        if settled.is_empty() {
            warn!("the audio worker sent no final figures within 500 ms");
        }
        settled.into_iter().map(|e| self.complete(e)).collect()
    }
}
