//! Sharing the screen with the model: `/screen [NAME]` and `--video PATH` start a share, `/screen`
//! again or `/stop` ends it; each frame the screen part found changed is sent as
//! `realtimeInput.video` while the session is open, counted, and kept for the preview; what
//! the preview pane shows (the newest picture the model was shown) and `/preview`.

use std::time::Instant;

use super::{
    App, ConnectionState, Effect, Entry, ImageSent, NoticeLevel, ScreenEffect, ScreenNews,
    SessionEffect, ShareSource,
};
use livetalk_live::excerpt;

/// How long the service lets a session with video run when the context is not compressed.
pub const VIDEO_MINUTES_UNCOMPRESSED: u32 = 2;

/// One share: what is shared, and what of it went to the model.
#[derive(Debug, Clone)]
pub struct Sharing {
    share: u32,
    source: ShareSource,
    /// What is shared, as the user reads it (once the screen part has opened it).
    what: Option<String>,
    frames: u64,
    bytes: u64,
    first_at: Option<Instant>,
    last_at: Option<Instant>,
    /// The last frame sent, for the preview.
    last: Option<ImageSent>,
}

impl Sharing {
    /// "screen" or "video": what the status line says is shared.
    pub fn kind(&self) -> &'static str {
        match self.source {
            ShareSource::Screen(_) => "screen",
            ShareSource::Folder(_) => "video",
        }
    }

    /// What is shared, as the user reads it.
    pub fn what(&self) -> Option<&str> {
        self.what.as_deref()
    }

    /// Frames sent in this share.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// JPEG bytes sent in this share.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The last frame sent.
    pub fn last_frame(&self) -> Option<&ImageSent> {
        self.last.as_ref()
    }

    /// Frames and bytes a second, over the time from the first frame sent to the last (`None`
    /// before two frames).
    pub fn rates(&self) -> Option<(f64, f64)> {
        let seconds = self
            .last_at?
            .saturating_duration_since(self.first_at?)
            .as_secs_f64();
        (seconds > 0.0).then(|| {
            (
                (self.frames.saturating_sub(1)) as f64 / seconds,
                self.bytes as f64 / seconds,
            )
        })
    }
}

/// What the preview pane shows: the newest picture the model was shown.
#[derive(Debug, Clone, Copy)]
pub enum Previewed<'a> {
    /// The share going on, and the last frame it sent.
    Share(&'a Sharing, &'a ImageSent),
    /// The picture `/image` sent last.
    Image(&'a ImageSent),
}

impl Previewed<'_> {
    /// The picture itself.
    pub fn picture(&self) -> &ImageSent {
        match self {
            Previewed::Share(_, frame) => frame,
            Previewed::Image(image) => image,
        }
    }
}

impl App {
    /// What the preview pane shows, if anything: the newest picture sent (a share's last
    /// frame, or the last `/image` picture), unless `/preview` hid it.
    pub fn preview(&self) -> Option<Previewed<'_>> {
        if self.preview_hidden {
            return None;
        }
        if let Some(image) = &self.picture_shown {
            return Some(Previewed::Image(image));
        }
        let sharing = self.sharing.as_ref()?;
        Some(Previewed::Share(sharing, sharing.last.as_ref()?))
    }

    /// `/preview`: hides the preview pane, or shows it again.
    pub(super) fn toggle_preview(&mut self) {
        let hidden = self.preview_hidden;
        self.preview_hidden = false;
        if self.preview().is_none() {
            self.notice(
                NoticeLevel::Info,
                "Nothing to preview: the picture the model sees (/screen, /image) shows here."
                    .to_owned(),
            );
            return;
        }
        self.preview_hidden = !hidden;
    }

    /// A picture `/image` sent: the preview shows it (again, if `/preview` hid it).
    pub(super) fn preview_picture(&mut self, image: ImageSent) {
        self.picture_shown = Some(image);
        self.preview_hidden = false;
    }

    /// The share going on, if any.
    pub fn sharing(&self) -> Option<&Sharing> {
        self.sharing.as_ref()
    }

    /// Frames sent to the model in the whole session, every share together.
    pub fn frames_sent(&self) -> u64 {
        self.frames_sent
    }

    /// `/screen [NAME]`: shares the screen, or stops the share going on.
    pub(super) fn toggle_screen(&mut self, name: Option<&str>) -> Vec<Effect> {
        if self.sharing.is_some() {
            return self.stop_sharing();
        }
        self.start_sharing(ShareSource::Screen(name.map(str::to_owned)))
    }

    /// `--video PATH` is shared from the session's start (its first connection).
    pub(super) fn share_video_at_start(&mut self) -> Vec<Effect> {
        match self.video.take() {
            Some(folder) => self.start_sharing(ShareSource::Folder(folder)),
            None => Vec::new(),
        }
    }

    /// Starts sharing `source` (stopping nothing: there is no share going on).
    pub(super) fn start_sharing(&mut self, source: ShareSource) -> Vec<Effect> {
        if self.replay.is_some() {
            return Vec::new();
        }
        self.shares += 1;
        // A new share is shown in the preview, even where `/preview` hid the last one.
        self.preview_hidden = false;
        self.sharing = Some(Sharing {
            share: self.shares,
            source: source.clone(),
            what: None,
            frames: 0,
            bytes: 0,
            first_at: None,
            last_at: None,
            last: None,
        });
        // Video fills the context fast: without compression the service ends the session.
        if self.figures.context().1.is_none() {
            self.notice(
                NoticeLevel::Warning,
                format!(
                    "Context compression is off in the config: with video, the service ends the session after about {VIDEO_MINUTES_UNCOMPRESSED} minutes (turn session.context_compression on for longer)."
                ),
            );
        }
        vec![Effect::Screen(ScreenEffect::Start {
            share: self.shares,
            source,
        })]
    }

    /// `/stop` (or `/screen` again): no frame is sent after this.
    pub(super) fn stop_sharing(&mut self) -> Vec<Effect> {
        let Some(sharing) = self.sharing.take() else {
            self.notice(
                NoticeLevel::Info,
                "Nothing is being shared (/screen shares the screen).".to_owned(),
            );
            return Vec::new();
        };
        self.transcript.push(Entry::Change(format!(
            "Stopped sharing the {}: {} sent in {}",
            sharing.kind(),
            frame_count(sharing.frames),
            excerpt::human_size(sharing.bytes)
        )));
        vec![Effect::Screen(ScreenEffect::Stop)]
    }

    /// What the screen part says of a share.
    pub(super) fn on_screen(&mut self, news: ScreenNews) -> Vec<Effect> {
        let share = match &news {
            ScreenNews::Started { share, .. }
            | ScreenNews::Frame { share, .. }
            | ScreenNews::Failed { share, .. } => *share,
        };
        // News of a share that has stopped: its frames are not sent.
        let Some(sharing) = self.sharing.as_mut().filter(|s| s.share == share) else {
            return Vec::new();
        };
        match news {
            ScreenNews::Started { what, .. } => {
                sharing.what = Some(what.clone());
                self.transcript.push(Entry::Change(format!(
                    "Sharing {what} with the model: a frame a second while it changes (/stop stops)"
                )));
                Vec::new()
            }
            ScreenNews::Frame { frame, .. } => {
                let at = frame.at;
                let open = matches!(
                    self.connection,
                    ConnectionState::Connected | ConnectionState::Reconnecting
                );
                if !open || self.closing {
                    return Vec::new();
                }
                sharing.frames += 1;
                sharing.bytes += frame.jpeg.len() as u64;
                sharing.first_at.get_or_insert(at);
                sharing.last_at = Some(at);
                let jpeg = frame.jpeg.clone();
                sharing.last = Some(frame);
                // The preview shows this frame now (hidden still, if `/preview` hid it).
                self.picture_shown = None;
                self.frames_sent += 1;
                self.last_picture_at = Some(at);
                vec![Effect::Session(SessionEffect::SendImage(jpeg))]
            }
            ScreenNews::Failed { problem, .. } => {
                self.sharing = None;
                self.notice(NoticeLevel::Warning, problem);
                vec![Effect::Screen(ScreenEffect::Stop)]
            }
        }
    }
}

/// "1 frame", "12 frames".
fn frame_count(frames: u64) -> String {
    if frames == 1 {
        "1 frame".to_owned()
    } else {
        format!("{frames} frames")
    }
}
