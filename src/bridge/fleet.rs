//! What one `livetalk serve` instance tells the load balancer and the operator, and how it
//! leaves the fleet: whether it is draining, whether it is ready for new apps (`/readyz`), how
//! many app connections it holds, how its last upstream connection went, and its metrics.
//!
//! A drain (SIGTERM, or `POST /drain`) stops new apps and tells every session loop, which lets
//! its model turn finish and then hands the app its session handle and closes (1012); the
//! instance is done when the last connection has gone ([`Fleet::emptied`]).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tracing::info;

use super::metrics::BridgeMetrics;

/// How old the last upstream connection's outcome may be and still count for `/readyz`.
pub const UPSTREAM_MEMORY: Duration = Duration::from_secs(30);

/// A drain under way: when every connection must be closed, turn or no turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drain {
    pub deadline: Instant,
}

/// One instance's standing; shared by its listener and every session loop.
pub struct Fleet {
    pub metrics: BridgeMetrics,
    drain: watch::Sender<Option<Drain>>,
    drain_timeout: Duration,
    max_connections: usize,
    /// App connections (upgraded) open now.
    open: watch::Sender<usize>,
    /// The last upstream connection attempt: when, and why it failed (`None`: it succeeded).
    upstream: Mutex<Option<(Instant, Option<String>)>>,
}

/// An app connection's place in the count; dropping it leaves.
pub struct Presence {
    fleet: Arc<Fleet>,
}

impl Drop for Presence {
    fn drop(&mut self) {
        self.fleet
            .open
            .send_modify(|open| *open = open.saturating_sub(1));
        self.fleet.metrics.connections_open.dec();
    }
}

impl Fleet {
    pub fn new(max_connections: usize, drain_timeout: Duration) -> Fleet {
        Fleet {
            metrics: BridgeMetrics::default(),
            drain: watch::Sender::new(None),
            drain_timeout,
            max_connections: max_connections.max(1),
            open: watch::Sender::new(0),
            upstream: Mutex::new(None),
        }
    }

    /// Starts the drain; `false` when one was already under way.
    pub fn start_drain(&self) -> bool {
        let started = self.drain.send_if_modified(|drain| {
            if drain.is_some() {
                return false;
            }
            *drain = Some(Drain {
                deadline: Instant::now() + self.drain_timeout,
            });
            true
        });
        if started {
            self.metrics.drains.inc();
            info!(
                connections = *self.open.borrow(),
                timeout_secs = self.drain_timeout.as_secs_f64(),
                "draining: no new apps; each session finishes its turn, gets its handle and is closed"
            );
        }
        started
    }

    /// The drain under way, if any.
    pub fn draining(&self) -> Option<Drain> {
        *self.drain.borrow()
    }

    /// What a session loop watches for the drain.
    pub fn drain_signal(&self) -> watch::Receiver<Option<Drain>> {
        self.drain.subscribe()
    }

    /// An app connection starts (it upgraded); it counts until the returned value is dropped.
    pub fn enter(self: &Arc<Self>) -> Presence {
        self.open.send_modify(|open| *open += 1);
        self.metrics.connections_open.inc();
        self.metrics.connections.inc();
        Presence {
            fleet: self.clone(),
        }
    }

    /// App connections open now.
    pub fn connections(&self) -> usize {
        *self.open.borrow()
    }

    /// Resolves once a drain has started and no app connection is left.
    pub async fn emptied(&self) {
        let mut drain = self.drain.subscribe();
        let _ = drain.wait_for(Option::is_some).await;
        let mut open = self.open.subscribe();
        let _ = open.wait_for(|open| *open == 0).await;
    }

    /// How an upstream connection attempt went (`Err`: why it failed).
    pub fn upstream_attempt(&self, outcome: Result<(), String>) {
        *self
            .upstream
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some((Instant::now(), outcome.err()));
    }

    /// `/readyz`: `Ok` while this instance takes new apps, else why not. It dials nothing.
    pub fn readiness(&self) -> Result<(), String> {
        self.readiness_at(Instant::now())
    }

    fn readiness_at(&self, now: Instant) -> Result<(), String> {
        if self.draining().is_some() {
            return Err("draining: this instance is shutting down and takes no new apps".into());
        }
        let open = self.connections();
        if open >= self.max_connections {
            return Err(format!(
                "full: {open} app connections, the limit is {} (--max-connections)",
                self.max_connections
            ));
        }
        let last = self
            .upstream
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if let Some((at, Some(why))) = last {
            let ago = now.saturating_duration_since(at);
            if ago <= UPSTREAM_MEMORY {
                return Err(format!(
                    "the last upstream connection, {:.0} s ago, failed: {why}",
                    ago.as_secs_f64()
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn readiness_follows_the_drain_the_count_and_the_upstream() {
        let fleet = Arc::new(Fleet::new(2, Duration::from_secs(30)));
        assert_eq!(fleet.readiness(), Ok(()));
        fleet.upstream_attempt(Err("refused".into()));
        assert!(fleet.readiness().unwrap_err().contains("refused"));
        fleet.upstream_attempt(Ok(()));
        assert_eq!(fleet.readiness(), Ok(()));
        let a = fleet.enter();
        let b = fleet.enter();
        assert!(fleet.readiness().unwrap_err().contains("full"));
        drop(a);
        assert_eq!(fleet.readiness(), Ok(()));
        assert!(fleet.start_drain());
        assert!(!fleet.start_drain(), "once");
        assert!(fleet.readiness().unwrap_err().starts_with("draining"));
        let emptied = fleet.emptied();
        tokio::pin!(emptied);
        assert!(
            futures_util::poll!(&mut emptied).is_pending(),
            "a connection is still open"
        );
        drop(b);
        tokio::time::timeout(Duration::from_secs(5), emptied)
            .await
            .expect("empty once the last connection left");
        assert!(
            fleet
                .metrics
                .encode()
                .contains("livetalk_bridge_drains_total 1")
        );
    }

    #[test]
    fn an_upstream_failure_is_forgotten_after_thirty_seconds() {
        let fleet = Fleet::new(2, Duration::from_secs(30));
        fleet.upstream_attempt(Err("refused".into()));
        let later = Instant::now() + UPSTREAM_MEMORY + Duration::from_secs(1);
        assert_eq!(fleet.readiness_at(later), Ok(()));
    }
}
