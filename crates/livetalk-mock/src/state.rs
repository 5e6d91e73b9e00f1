//! What all connections of one mock server share: the saved sessions, the fault clock, and the
//! counters a test reads to check what its client did.

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use crate::model::sight::Seen;
use crate::resumption::SessionStore;
use crate::scenario::{FaultClock, Scenario};

/// What all connections of one mock server share: saved sessions, the fault clock, counters.
///
/// [`MockServer::state`](crate::MockServer::state) hands it out; its counters are what a test
/// reads to check what its client did on the wire.
#[derive(Debug, Default)]
pub struct MockState {
    pub(crate) sessions: SessionStore,
    pub(crate) clock: FaultClock,
    /// `setup` messages received (one per connection that got that far).
    pub(crate) connections: AtomicU32,
    /// Connections that resumed a saved session.
    pub(crate) resumptions: AtomicU32,
    /// Tool responses for calls the connection never made or that were already answered.
    pub(crate) stray_tool_responses: AtomicU32,
    /// Where connections save the mic audio they receive (`--save-input`).
    pub(crate) save_input: Option<PathBuf>,
    /// Connections accepted, to number the saved input files.
    pub(crate) accepted: AtomicU32,
    /// What each `setup` declared, in the order they came.
    pub(crate) declared: Mutex<Vec<Declared>>,
    /// The pictures clients showed (`realtimeInput.video`), in the order they came: the newest
    /// [`PICTURES_KEPT`], so a server left running for days holds a bounded list.
    pub(crate) pictures: Mutex<std::collections::VecDeque<PictureReceived>>,
}

/// How many of the pictures clients showed a server keeps for [`MockState::pictures`] (the
/// newest): over an hour of a screen shared at a frame a second.
pub const PICTURES_KEPT: usize = 4_096;

/// A picture a client showed the model (a `realtimeInput.video` frame), as the demo model
/// made it out, and when it came: what a test checks a client sent, on the server's side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PictureReceived {
    /// When the server took it in.
    pub at: Instant,
    /// Its width and height in pixels; `None` when it was not a JPEG the model could read.
    pub size: Option<(u32, u32)>,
    /// The colour most of it is, in plain words ("red"); empty when it was not readable.
    pub colour: String,
}

/// The tools one `setup` declared.
#[derive(Debug, Clone, Default)]
pub(crate) struct Declared {
    /// The function names.
    pub(crate) functions: Vec<String>,
    /// It turned on Google Search (`googleSearch`).
    pub(crate) google_search: bool,
}

impl MockState {
    /// The state of a server that runs `scenario` and saves input audio in `save_input`.
    pub(crate) fn new(scenario: Scenario, save_input: Option<PathBuf>) -> Self {
        MockState {
            clock: FaultClock::new(scenario),
            save_input,
            ..MockState::default()
        }
    }

    /// Connections that sent a `setup` so far.
    pub fn connections(&self) -> u32 {
        self.connections.load(Ordering::Relaxed)
    }

    /// Connections that resumed a saved session so far.
    pub fn resumptions(&self) -> u32 {
        self.resumptions.load(Ordering::Relaxed)
    }

    /// Tool responses that answered no open call of their connection (a client bug if > 0).
    pub fn stray_tool_responses(&self) -> u32 {
        self.stray_tool_responses.load(Ordering::Relaxed)
    }

    /// The function names each `setup` so far declared, in order (one list per setup).
    pub fn declared_tools(&self) -> Vec<Vec<String>> {
        self.declared()
            .iter()
            .map(|setup| setup.functions.clone())
            .collect()
    }

    /// Whether each `setup` so far turned on Google Search (`googleSearch`), in order.
    pub fn search_declared(&self) -> Vec<bool> {
        self.declared()
            .iter()
            .map(|setup| setup.google_search)
            .collect()
    }

    fn declared(&self) -> std::sync::MutexGuard<'_, Vec<Declared>> {
        self.declared
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records the tools one `setup` declared.
    pub(crate) fn record_declared(&self, declared: Declared) {
        self.declared().push(declared);
    }

    /// The pictures clients showed so far (`realtimeInput.video` frames), in order: the
    /// newest [`PICTURES_KEPT`].
    pub fn pictures(&self) -> Vec<PictureReceived> {
        self.pictures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .cloned()
            .collect()
    }

    /// Records a picture a client showed, as the model made it out.
    pub(crate) fn record_picture(&self, seen: Seen) {
        let (size, colour) = match seen {
            Seen::Picture {
                width,
                height,
                colour,
            } => (Some((width, height)), colour),
            Seen::Unreadable => (None, String::new()),
        };
        let mut pictures = self
            .pictures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if pictures.len() >= PICTURES_KEPT {
            pictures.pop_front();
        }
        pictures.push_back(PictureReceived {
            at: Instant::now(),
            size,
            colour,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pictures_kept_are_the_newest_and_bounded() {
        let state = MockState::default();
        for width in 0..=PICTURES_KEPT as u32 {
            state.record_picture(Seen::Picture {
                width,
                height: 1,
                colour: "red".to_owned(),
            });
        }
        state.record_picture(Seen::Unreadable);
        let pictures = state.pictures();
        assert_eq!(pictures.len(), PICTURES_KEPT);
        assert_eq!(pictures[0].size, Some((2, 1)), "the oldest went first");
        let last = pictures.last().unwrap();
        assert_eq!((last.size, last.colour.as_str()), (None, ""));
    }
}
