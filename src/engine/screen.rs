//! The engine's screen part: what `/screen` and `--video` share, a frame a second. Each share
//! runs as a task of its own that takes a frame every second (the first at once) on a
//! blocking thread, scales it so its longest side is at most 1,024 pixels, and hands it to the
//! app only when it differs from the last one handed on (a mean absolute difference of at
//! least 1/255 over the scaled pixels: a blinking cursor does not count). Stopping a share
//! aborts its task: no frame is taken after it. It carries out the [`ScreenEffect`]s.

use std::path::{Path, PathBuf};
use std::time::Duration;

use image::{DynamicImage, RgbImage};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::warn;

use super::capture::{self, X11Capture};
use super::picture;
use crate::app::{Msg, ScreenEffect, ScreenNews, ShareSource};

/// How often a frame is taken: the service takes about one a second.
pub const FRAME_EVERY: Duration = Duration::from_secs(1);

/// The least mean absolute difference, in 1/255ths of a channel's range, for a frame to
/// count as changed.
const CHANGED_AT_LEAST: f64 = 1.0;

/// The most pictures of a `--video` folder taken, in name order.
const FOLDER_FRAMES_MAX: usize = 10_000;

/// News waiting to be taken: a frame a second, so a few are plenty.
const NEWS_WAITING: usize = 8;

/// See the module doc.
pub(super) struct Screen {
    news: mpsc::Receiver<Msg>,
    news_tx: mpsc::Sender<Msg>,
    share: Option<JoinHandle<()>>,
}

impl Screen {
    pub(super) fn new() -> Self {
        let (news_tx, news) = mpsc::channel(NEWS_WAITING);
        Screen {
            news,
            news_tx,
            share: None,
        }
    }

    /// The next news of a share. Cancel-safe.
    pub(super) async fn next(&mut self) -> Option<Msg> {
        self.news.recv().await
    }

    /// Carries out one of the app's screen effects.
    pub(super) fn carry_out(&mut self, effect: ScreenEffect) {
        match effect {
            ScreenEffect::Start { share, source } => {
                self.stop();
                let news = self.news_tx.clone();
                self.share = Some(tokio::spawn(run_share(share, source, news)));
            }
            ScreenEffect::Stop => self.stop(),
            ScreenEffect::List(typed) => {
                let news = self.news_tx.clone();
                tokio::task::spawn_blocking(move || {
                    let names = capture::names().unwrap_or_default();
                    if news.try_send(Msg::SharedChoices { typed, names }).is_err() {
                        warn!("the list of windows to share was dropped: too much news waiting");
                    }
                });
            }
        }
    }

    fn stop(&mut self) {
        if let Some(task) = self.share.take() {
            task.abort();
        }
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One share: opens the source, then takes a frame every [`FRAME_EVERY`] and hands on the
/// ones that changed, until it is aborted or the source fails.
async fn run_share(share: u32, source: ShareSource, news: mpsc::Sender<Msg>) {
    let opened = tokio::task::spawn_blocking(move || Frames::open(&source)).await;
    let mut frames = match opened {
        Ok(Ok(frames)) => frames,
        Ok(Err(problem)) => {
            let _ = news
                .send(Msg::Screen(ScreenNews::Failed { share, problem }))
                .await;
            return;
        }
        Err(_) => return,
    };
    let what = frames.what.clone();
    if news
        .send(Msg::Screen(ScreenNews::Started { share, what }))
        .await
        .is_err()
    {
        return;
    }
    let mut ticks = tokio::time::interval(FRAME_EVERY);
    // A frame that took long to take is not made up for with a burst.
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let taken = tokio::task::spawn_blocking(move || {
            let taken = frames.next_changed();
            (frames, taken)
        })
        .await;
        let Ok((back, taken)) = taken else { return };
        frames = back;
        let msg = match taken {
            Ok(None) => continue,
            Ok(Some(frame)) => ScreenNews::Frame { share, frame },
            Err(problem) => ScreenNews::Failed { share, problem },
        };
        let failed = matches!(msg, ScreenNews::Failed { .. });
        if news.send(Msg::Screen(msg)).await.is_err() || failed {
            return;
        }
        // The next frame is taken a whole second after this one was handed on, however long
        // this one took: the service never gets two within a second.
        ticks.reset();
    }
}

/// Where frames come from.
enum Grab {
    /// Boxed: a connection is large beside a folder's list.
    Screen(Box<X11Capture>),
    /// A folder's pictures in name order; the next one to take.
    Folder { files: Vec<PathBuf>, next: usize },
}

/// A source of frames and the last frame handed on, to tell a change by.
pub(super) struct Frames {
    grab: Grab,
    /// What is shared, as the user reads it.
    what: String,
    last: Option<RgbImage>,
}

impl Frames {
    /// Opens what is to be shared, or says in one sentence why it cannot be.
    pub(super) fn open(source: &ShareSource) -> Result<Frames, String> {
        let (grab, what) = match source {
            ShareSource::Screen(name) => {
                let capture = X11Capture::open(name.as_deref())?;
                let what = capture.what().to_owned();
                (Grab::Screen(Box::new(capture)), what)
            }
            ShareSource::Folder(folder) => {
                let files = folder_frames(folder)?;
                let what = format!(
                    "the {} in {}",
                    if files.len() == 1 {
                        "picture".to_owned()
                    } else {
                        format!("{} pictures", files.len())
                    },
                    folder.display()
                );
                (Grab::Folder { files, next: 0 }, what)
            }
        };
        Ok(Frames {
            grab,
            what,
            last: None,
        })
    }

    /// Takes a frame and, when it differs from the last one handed on, makes it ready to
    /// send; `None` when nothing changed.
    pub(super) fn next_changed(&mut self) -> Result<Option<crate::app::ImageSent>, String> {
        let (picture, name, file_bytes) = match &mut self.grab {
            Grab::Screen(capture) => {
                let picture = capture.grab()?;
                (picture, capture.what().to_owned(), 0)
            }
            Grab::Folder { files, next } => {
                // The last picture is held: nothing new to take.
                let Some(path) = files.get(*next) else {
                    return Ok(None);
                };
                *next += 1;
                let (picture, file_bytes) = picture::decode(path)?;
                let name = file_name(path);
                (picture, name, file_bytes)
            }
        };
        Ok(self
            .offer(picture)
            .map(|(rgb, jpeg)| crate::app::ImageSent {
                name,
                file_bytes: if file_bytes == 0 {
                    jpeg.len() as u64
                } else {
                    file_bytes
                },
                width: rgb.width(),
                height: rgb.height(),
                jpeg,
                at: std::time::Instant::now(),
            }))
    }

    /// Scales `picture`; when it differs from the last one handed on, keeps it as the last and
    /// returns it with its JPEG.
    fn offer(&mut self, picture: DynamicImage) -> Option<(RgbImage, Vec<u8>)> {
        let rgb = picture::fit(picture);
        if self.last.as_ref().is_some_and(|last| !differs(last, &rgb)) {
            return None;
        }
        let jpeg = picture::jpeg(&rgb).ok()?;
        self.last = Some(rgb.clone());
        Some((rgb, jpeg))
    }
}

/// True when two scaled frames differ enough to send the second: another size, or a mean
/// absolute difference of at least [`CHANGED_AT_LEAST`] over every channel of every pixel.
pub(super) fn differs(a: &RgbImage, b: &RgbImage) -> bool {
    if a.dimensions() != b.dimensions() {
        return true;
    }
    let values = a.as_raw().len();
    if values == 0 {
        return false;
    }
    let total: u64 = a
        .as_raw()
        .iter()
        .zip(b.as_raw())
        .map(|(x, y)| u64::from(x.abs_diff(*y)))
        .sum();
    total as f64 / values as f64 >= CHANGED_AT_LEAST
}

/// The PNG and JPEG files of a `--video` folder (or a `check` turn's), in name order.
pub(crate) fn folder_frames(folder: &Path) -> Result<Vec<PathBuf>, String> {
    let entries = std::fs::read_dir(folder)
        .map_err(|e| format!("the video folder {} cannot be read: {e}", folder.display()))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| {
            path.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| matches!(e.to_ascii_lowercase().as_str(), "png" | "jpg" | "jpeg"))
        })
        .take(FOLDER_FRAMES_MAX)
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(format!(
            "the video folder {} holds no PNG or JPEG pictures",
            folder.display()
        ));
    }
    Ok(files)
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::Rgb;

    fn plain(width: u32, height: u32, rgb: [u8; 3]) -> RgbImage {
        RgbImage::from_pixel(width, height, Rgb(rgb))
    }

    #[test]
    fn a_blinking_cursor_is_no_change_but_a_new_window_is() {
        let screen = plain(1024, 768, [30, 30, 30]);
        let mut cursor = screen.clone();
        for y in 100..116 {
            for x in 200..208 {
                cursor.put_pixel(x, y, Rgb([255, 255, 255]));
            }
        }
        assert!(!differs(&screen, &cursor), "a cursor's 8×16 cell");
        assert!(!differs(&screen, &screen.clone()));
        let mut window = screen.clone();
        for y in 0..300 {
            for x in 0..400 {
                window.put_pixel(x, y, Rgb([200, 40, 40]));
            }
        }
        assert!(differs(&screen, &window), "a 400×300 window opened");
        // The threshold is a mean of 1/255: every value one step brighter is a change, all
        // but one of them is not.
        let base = plain(16, 16, [30, 30, 30]);
        let brighter = plain(16, 16, [31, 31, 31]);
        assert!(differs(&base, &brighter));
        let mut all_but_one = brighter.clone();
        all_but_one.put_pixel(0, 0, Rgb([31, 31, 30]));
        assert!(!differs(&base, &all_but_one));
        assert!(
            differs(&plain(10, 10, [0; 3]), &plain(20, 10, [0; 3])),
            "another size"
        );
    }

    #[test]
    fn a_folder_is_taken_in_name_order_changes_only_and_the_last_is_held() {
        let dir = tempfile::tempdir().unwrap();
        let save = |name: &str, w, h, rgb| {
            DynamicImage::ImageRgb8(plain(w, h, rgb))
                .save(dir.path().join(name))
                .unwrap();
        };
        save("02-blue.png", 640, 480, [30, 60, 220]);
        save("00-red.png", 2048, 1152, [220, 30, 30]);
        save("01-red-again.png", 2048, 1152, [220, 30, 30]);
        std::fs::write(dir.path().join("notes.txt"), "not a frame").unwrap();
        let mut frames = Frames::open(&ShareSource::Folder(dir.path().to_owned())).unwrap();
        assert!(
            frames.what.starts_with("the 3 pictures in "),
            "{}",
            frames.what
        );
        let first = frames
            .next_changed()
            .unwrap()
            .expect("the first frame is sent");
        assert_eq!(
            (first.name.as_str(), first.width, first.height),
            ("00-red.png", 1024, 576)
        );
        assert_eq!(
            frames.next_changed().unwrap(),
            None,
            "the same picture again"
        );
        let third = frames.next_changed().unwrap().expect("a change is sent");
        assert_eq!((third.width, third.height), (640, 480));
        for _ in 0..3 {
            assert_eq!(frames.next_changed().unwrap(), None, "the last is held");
        }
        let empty = tempfile::tempdir().unwrap();
        let Err(problem) = Frames::open(&ShareSource::Folder(empty.path().to_owned())) else {
            panic!("an empty folder opened");
        };
        assert!(
            problem.contains("holds no PNG or JPEG pictures"),
            "{problem}"
        );
    }
}
