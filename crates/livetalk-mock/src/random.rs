//! The mock's randomness: a deterministic xorshift generator for synthetic voice, noise and
//! garbage frames, a number that differs on every run, for call ids, and unguessable tokens
//! from the operating system, for resumption handles.

use std::hash::{BuildHasher, Hasher};

/// A tiny deterministic generator (xorshift64): the same seed gives the same numbers on every
/// run and platform.
pub(crate) struct XorShift(u64);

impl XorShift {
    /// Zero would stay zero forever, so the low bit is always set.
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed | 1)
    }

    /// Seeded from a text with FNV-1a: stable across runs and platforms, unlike the std hasher.
    pub(crate) fn from_text(text: &str) -> Self {
        Self::new(text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
        }))
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in [0, 1).
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1_u64 << 53) as f64
    }
}

/// A number that differs on every run of the mock, so ids and handles from an earlier run
/// never match.
pub(crate) fn per_run() -> u64 {
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

/// 128 bits from the operating system's random source, as hex: a token nobody can guess from
/// the ones they have seen. `None` when the source fails (then nothing should be issued).
pub(crate) fn unguessable_token() -> Option<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).ok()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
