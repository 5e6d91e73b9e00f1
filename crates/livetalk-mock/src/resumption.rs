//! The mock's session resumption: handles it issued map to saved conversations, so a client
//! that reconnects with one finds the model as it left it (the lamp is still blue).
//!
//! As on the service, a handle is unguessable and resumes only the conversation it was issued
//! for, and only for a client that connects with the same API key; anything else is "session
//! not found".

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use crate::model::ScriptedModel;
use crate::random;
use livetalk_live::ApiKey;

/// How many handles are kept; older ones are stale, as expired handles are on the service.
const KEPT_HANDLES: usize = 256;

/// What every handle starts with; the rest is 128 random bits.
const HANDLE_PREFIX: &str = "mock-session-";

/// A conversation as it was when a handle was issued.
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    pub(crate) model: ScriptedModel,
    pub(crate) prompt_tokens: f64,
}

/// Saved conversations by handle, shared by all connections of one mock server.
#[derive(Debug, Default)]
pub(crate) struct SessionStore {
    saved: Mutex<Saved>,
}

#[derive(Debug, Default)]
struct Saved {
    by_handle: HashMap<String, Owned>,
    order: VecDeque<String>,
}

/// A snapshot and the key of the client it was issued to (`None`: a client without a key).
#[derive(Debug)]
struct Owned {
    snapshot: Snapshot,
    key: Option<ApiKey>,
}

impl SessionStore {
    /// Saves a snapshot for the client connected with `key` and returns its new handle; `None`
    /// when the system has no randomness to give (then the session is simply not resumable).
    pub(crate) fn save(&self, snapshot: Snapshot, key: Option<ApiKey>) -> Option<String> {
        let handle = format!("{HANDLE_PREFIX}{}", random::unguessable_token()?);
        let mut saved = self.lock();
        saved
            .by_handle
            .insert(handle.clone(), Owned { snapshot, key });
        saved.order.push_back(handle.clone());
        while saved.order.len() > KEPT_HANDLES {
            if let Some(old) = saved.order.pop_front() {
                saved.by_handle.remove(&old);
            }
        }
        Some(handle)
    }

    /// The conversation saved under `handle`, if the handle is known, not expired and was
    /// issued to a client with the same `key`. Like the service's, a handle may be used more
    /// than once.
    pub(crate) fn restore(&self, handle: &str, key: Option<&ApiKey>) -> Option<Snapshot> {
        self.lock()
            .by_handle
            .get(handle)
            .filter(|owned| owned.key.as_ref() == key)
            .map(|owned| owned.snapshot.clone())
    }

    /// Forgets every handle (the `fail_resumption` fault).
    pub(crate) fn clear(&self) {
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

    fn snapshot(prompt_tokens: f64) -> Snapshot {
        Snapshot {
            model: ScriptedModel::default(),
            prompt_tokens,
        }
    }

    #[test]
    fn handles_restore_until_forgotten_or_pushed_out() {
        let store = SessionStore::default();
        let first = store.save(snapshot(7.0), None).unwrap();
        assert_eq!(
            store.restore(&first, None).map(|s| s.prompt_tokens),
            Some(7.0)
        );
        assert!(store.restore("mock-session-unknown", None).is_none());
        for _ in 0..KEPT_HANDLES {
            store.save(snapshot(0.0), None).unwrap();
        }
        assert!(
            store.restore(&first, None).is_none(),
            "the oldest handle expired"
        );
        let last = store.save(snapshot(1.0), None).unwrap();
        store.clear();
        assert!(store.restore(&last, None).is_none());
    }

    #[test]
    fn handles_are_random_not_counted() {
        let store = SessionStore::default();
        let values: Vec<u128> = (0..64)
            .map(|_| {
                let handle = store.save(snapshot(0.0), None).unwrap();
                let hex = handle.strip_prefix(HANDLE_PREFIX).unwrap();
                assert_eq!(hex.len(), 32, "{handle}");
                u128::from_str_radix(hex, 16).unwrap()
            })
            .collect();
        let mut distinct = values.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), values.len(), "no handle repeats");
        // Every one of the 128 bits is 0 in some handles and 1 in others: nothing is a counter
        // or a fixed prefix. (A fair bit stays the same in 64 handles with chance 2^-63.)
        let (ones, zeros) = values
            .iter()
            .fold((0u128, 0u128), |(ones, zeros), v| (ones | v, zeros | !v));
        assert_eq!(
            ones & zeros,
            u128::MAX,
            "bits that never change: {:#x}",
            !(ones & zeros)
        );
        assert!(
            values.windows(2).all(|w| w[1].abs_diff(w[0]) > 1),
            "not sequential"
        );
    }

    #[test]
    fn a_handle_resumes_only_under_the_key_it_was_issued_for() {
        let store = SessionStore::default();
        let a = ApiKey::new("key-A");
        let b = ApiKey::new("key-B");
        let handle = store.save(snapshot(3.0), a.clone()).unwrap();
        assert!(store.restore(&handle, b.as_ref()).is_none(), "another key");
        assert!(store.restore(&handle, None).is_none(), "no key");
        // Refusing a stranger does not spend it: the owner still resumes, more than once.
        for _ in 0..2 {
            assert_eq!(
                store.restore(&handle, a.as_ref()).map(|s| s.prompt_tokens),
                Some(3.0)
            );
        }
        // And a keyless client's handle is not anyone's.
        let keyless = store.save(snapshot(4.0), None).unwrap();
        assert!(store.restore(&keyless, a.as_ref()).is_none());
        assert!(store.restore(&keyless, None).is_some());
    }
}
