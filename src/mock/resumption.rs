//! The mock's session resumption: handles it issued map to saved conversations, so a client
//! that reconnects with one finds the model as it left it (the lamp is still blue).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::model::ScriptedModel;
use super::random;

/// How many handles are kept; older ones are stale, as expired handles are on the service.
const KEPT_HANDLES: usize = 256;

/// A conversation as it was when a handle was issued.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub model: ScriptedModel,
    pub prompt_tokens: f64,
}

/// Saved conversations by handle, shared by all connections of one mock server.
#[derive(Debug)]
pub struct SessionStore {
    saved: Mutex<Saved>,
    prefix: u64,
    counter: AtomicU64,
}

#[derive(Debug, Default)]
struct Saved {
    by_handle: HashMap<String, Snapshot>,
    order: VecDeque<String>,
}

impl Default for SessionStore {
    fn default() -> Self {
        SessionStore {
            saved: Mutex::default(),
            // Handles from different mock runs differ, so one from an earlier run is stale.
            prefix: random::per_run(),
            counter: AtomicU64::new(0),
        }
    }
}

impl SessionStore {
    /// Saves a snapshot and returns its new handle.
    pub fn save(&self, snapshot: Snapshot) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed) + 1;
        let handle = format!("mock-session-{:016x}-{n}", self.prefix);
        let mut saved = self.lock();
        saved.by_handle.insert(handle.clone(), snapshot);
        saved.order.push_back(handle.clone());
        while saved.order.len() > KEPT_HANDLES {
            if let Some(old) = saved.order.pop_front() {
                saved.by_handle.remove(&old);
            }
        }
        handle
    }

    /// The conversation saved under `handle`, if the handle is known and not expired. Like the
    /// service's, a handle may be used more than once.
    pub fn restore(&self, handle: &str) -> Option<Snapshot> {
        self.lock().by_handle.get(handle).cloned()
    }

    /// Forgets every handle (the `fail_resumption` fault).
    pub fn clear(&self) {
        let mut saved = self.lock();
        saved.by_handle.clear();
        saved.order.clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Saved> {
        self.saved
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_restore_until_forgotten_or_pushed_out() {
        let store = SessionStore::default();
        let first = store.save(Snapshot {
            model: ScriptedModel::default(),
            prompt_tokens: 7.0,
        });
        assert_eq!(store.restore(&first).map(|s| s.prompt_tokens), Some(7.0));
        assert!(store.restore("mock-session-unknown").is_none());
        for _ in 0..KEPT_HANDLES {
            store.save(Snapshot {
                model: ScriptedModel::default(),
                prompt_tokens: 0.0,
            });
        }
        assert!(store.restore(&first).is_none(), "the oldest handle expired");
        let last = store.save(Snapshot {
            model: ScriptedModel::default(),
            prompt_tokens: 1.0,
        });
        store.clear();
        assert!(store.restore(&last).is_none());
    }
}
