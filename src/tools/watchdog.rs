//! The tool-call watchdog: notices a call that has been running longer than expected, so the
//! user sees it long before the dispatcher's timeout answers it with an error.

use std::time::Duration;

use tokio::time::Instant;

use crate::live::wire::FunctionCall;

/// A call that has run past the watchdog's limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlowCall {
    pub id: Option<String>,
    pub name: String,
    pub elapsed: Duration,
}

struct Watched {
    id: Option<String>,
    name: String,
    started: Instant,
    reported: bool,
}

/// Running calls and when each becomes "slow"; every call is reported at most once.
pub struct Watchdog {
    slow_after: Duration,
    running: Vec<Watched>,
}

impl Watchdog {
    /// Calls running longer than a third of the tool timeout are slow: early enough to show,
    /// late enough that normal calls never are.
    pub fn for_timeout(timeout: Duration) -> Watchdog {
        Watchdog::new(timeout / 3)
    }

    pub fn new(slow_after: Duration) -> Watchdog {
        Watchdog {
            slow_after,
            running: Vec::new(),
        }
    }

    pub fn slow_after(&self) -> Duration {
        self.slow_after
    }

    pub fn started(&mut self, calls: &[FunctionCall]) {
        let now = Instant::now();
        self.running.extend(calls.iter().map(|call| Watched {
            id: call.id.clone(),
            name: call.name.clone(),
            started: now,
            reported: false,
        }));
    }

    /// The call ended (answered or cancelled).
    pub fn ended(&mut self, id: Option<&str>, name: &str) {
        if let Some(index) = self.running.iter().position(|w| match id {
            Some(id) => w.id.as_deref() == Some(id),
            None => w.id.is_none() && w.name == name,
        }) {
            self.running.swap_remove(index);
        }
    }

    /// When the next unreported call becomes slow.
    pub fn next_due(&self) -> Option<Instant> {
        self.running
            .iter()
            .filter(|w| !w.reported)
            .map(|w| w.started + self.slow_after)
            .min()
    }

    /// Calls that became slow by `now`, each reported once.
    pub fn due(&mut self, now: Instant) -> Vec<SlowCall> {
        let mut slow = Vec::new();
        for watched in &mut self.running {
            let elapsed = now.saturating_duration_since(watched.started);
            if !watched.reported && elapsed >= self.slow_after {
                watched.reported = true;
                slow.push(SlowCall {
                    id: watched.id.clone(),
                    name: watched.name.clone(),
                    elapsed,
                });
            }
        }
        slow
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str) -> FunctionCall {
        FunctionCall {
            id: Some(id.into()),
            name: "get_device_status".into(),
            args: serde_json::json!({}),
        }
    }

    #[test]
    fn a_call_is_reported_once_when_it_runs_past_the_limit() {
        let mut watchdog = Watchdog::for_timeout(Duration::from_secs(9));
        assert_eq!(watchdog.slow_after(), Duration::from_secs(3));
        assert_eq!(watchdog.next_due(), None);
        watchdog.started(&[call("a"), call("b")]);
        let due = watchdog.next_due().unwrap();
        watchdog.ended(Some("b"), "get_device_status");
        assert!(watchdog.due(due - Duration::from_millis(1)).is_empty());
        let slow = watchdog.due(due);
        assert_eq!(slow.len(), 1);
        assert_eq!(slow[0].id.as_deref(), Some("a"));
        assert!(
            watchdog.due(due + Duration::from_secs(5)).is_empty(),
            "once"
        );
        assert_eq!(watchdog.next_due(), None);
        watchdog.ended(Some("a"), "get_device_status");
        assert!(watchdog.running.is_empty());
    }
}
