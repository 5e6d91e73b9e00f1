//! The engine's media part: what the model hears and what it says aloud. It owns the audio
//! worker (the mic's frames and the devices' news are its inputs) and carries out the
//! [`MediaEffect`]s: model audio played, flushed and ended, the mic opened or muted, the
//! devices reopened, the echo mode switched.

use crate::app::{MediaEffect, Msg};
use crate::audio::{AudioEvent, AudioOutput, AudioWorker, MicFrame};

/// What the part took in that concerns another part.
pub(super) enum MediaNews {
    /// A message for the app; `opened` when it says the devices are open (the session may
    /// connect now).
    Msg { msg: Msg, opened: bool },
    /// The audio system's news, preceded by the time it came (the app reads no clock: it is
    /// told when the speaker started, for the turn's time to the first audible sample).
    Timed(Msg),
    /// A mic frame for the session.
    Frame(MicFrame),
    /// The worker is gone; the session goes on without it.
    Gone,
}

/// See the module doc.
#[derive(Default)]
pub(super) struct Media {
    audio: Option<AudioWorker>,
}

impl Media {
    /// Uses this audio worker for the session's mic and model audio.
    pub(super) fn attach(&mut self, audio: AudioWorker) {
        self.audio = Some(audio);
    }

    /// True while it has audio devices (open, or being opened).
    pub(super) fn has_devices(&self) -> bool {
        self.audio.is_some()
    }

    /// The next thing the audio worker has (`frames_wanted`: the session can take mic frames
    /// now); `None` when there is no worker. Cancel-safe.
    pub(super) async fn next(&mut self, frames_wanted: bool) -> Option<MediaNews> {
        let audio = self.audio.as_mut()?;
        Some(match audio.next(frames_wanted).await {
            Some(AudioOutput::Event(event)) => {
                let opened = matches!(event, AudioEvent::Opened(_));
                if matches!(event, AudioEvent::Audible(true)) {
                    MediaNews::Timed(Msg::Audio(event))
                } else {
                    MediaNews::Msg {
                        msg: Msg::Audio(event),
                        opened,
                    }
                }
            }
            Some(AudioOutput::Frame(frame)) => MediaNews::Frame(frame),
            None => {
                self.audio = None;
                MediaNews::Gone
            }
        })
    }

    /// How the session took a mic frame captured at `captured_at`: `Some(true)` sent,
    /// `Some(false)` dropped (it could not take it now), `None` no session.
    pub(super) fn frame_taken(&mut self, captured_at: u64, taken: Option<bool>) {
        let Some(audio) = &mut self.audio else {
            return;
        };
        match taken {
            Some(true) => audio.frame_sent(captured_at),
            Some(false) => audio.frame_dropped(),
            None => {}
        }
    }

    /// Carries out one of the app's media effects (nothing without devices).
    pub(super) fn carry_out(&mut self, effect: MediaEffect) {
        let Some(audio) = self.audio.as_ref().map(AudioWorker::audio) else {
            return;
        };
        match effect {
            MediaEffect::PlayAudio(pcm) => audio.play(pcm, std::time::Instant::now()),
            MediaEffect::EndPlaybackTurn => audio.end_turn(),
            MediaEffect::StopPlayback => audio.flush(std::time::Instant::now()),
            MediaEffect::SetMicOpen(open) => audio.set_mic_open(open),
            MediaEffect::ReopenAudio => audio.reopen(),
            MediaEffect::SetEcho(mode) => audio.set_echo(mode),
        }
    }

    /// The audio system's last figures, once the loop is over.
    pub(super) async fn settle(&mut self) -> Vec<Msg> {
        match &mut self.audio {
            Some(audio) => audio.settle().await.into_iter().map(Msg::Audio).collect(),
            None => Vec::new(),
        }
    }
}
