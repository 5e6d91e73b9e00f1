//! What a server sends unasked, kept to a pace livetalk can take: progress coalesced to about
//! ten reports a second per server (the latest of each call wins), tool-list changes to one
//! listing every few seconds, stderr lines to a budget per window. What was
//! held back is counted and said in the log once per window, never line by line: a server
//! that floods must not flood the screen, the recording or the log.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rmcp::model::ProgressToken;

/// Progress reports passed on per server at most once in this interval.
pub const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// A server's tool list is listed again at most once in this interval, however often it says
/// it changed.
pub const RELIST_INTERVAL: Duration = Duration::from_secs(3);

/// The window what was held back is counted over and summarised once.
pub const WINDOW: Duration = Duration::from_secs(5);

/// Bytes of a server's stderr written to the log per window, each line counted with
/// [`LOG_LINE_OVERHEAD`]; the rest is counted. A flood that lasts grows the log by about
/// 6 KB a second (and the log's own cap holds it).
pub const LOG_BYTES_PER_WINDOW: usize = 32 << 10;

/// What the log adds to each line (time, level, where, which server).
pub const LOG_LINE_OVERHEAD: usize = 128;

/// Counts what passed and what was held back in the current window.
pub(super) struct Tally {
    /// What is counted, in the plural ("progress notifications").
    what: &'static str,
    /// What became of those held back ("merged", "not logged").
    fate: &'static str,
    started: Option<Instant>,
    passed: u64,
    held: u64,
}

impl Tally {
    pub fn new(what: &'static str, fate: &'static str) -> Tally {
        Tally {
            what,
            fate,
            started: None,
            passed: 0,
            held: 0,
        }
    }

    /// Counts one more; when a window with something held back has just ended, the line that
    /// says so. When this is the first held back in its window, also how long until the window
    /// ends: the caller then asks [`Tally::close`], so a flood that stops is still said.
    pub fn count(&mut self, passed: bool, now: Instant) -> (Option<String>, Option<Duration>) {
        let summary = self.close(now);
        let started = *self.started.get_or_insert(now);
        let mut close_in = None;
        if passed {
            self.passed += 1;
        } else {
            if self.held == 0 {
                close_in = Some(WINDOW.saturating_sub(now.saturating_duration_since(started)));
            }
            self.held += 1;
        }
        (summary, close_in)
    }

    /// The summary of the current window if it is over (a new one then begins).
    pub fn close(&mut self, now: Instant) -> Option<String> {
        let started = self.started?;
        if now.saturating_duration_since(started) < WINDOW {
            return None;
        }
        self.finish(now)
    }

    /// The summary of what was counted since the window began, whether or not it is over (the
    /// stream ended); counting begins again.
    pub fn finish(&mut self, now: Instant) -> Option<String> {
        let started = self.started.take()?;
        let summary = (self.held > 0).then(|| {
            format!(
                "{} {} in {:.0} s, {} {}",
                self.passed + self.held,
                self.what,
                now.saturating_duration_since(started).as_secs_f64(),
                self.held,
                self.fate
            )
        });
        self.passed = 0;
        self.held = 0;
        summary
    }
}

/// One progress report.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Report {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// What to do with a progress report.
#[derive(Debug, PartialEq)]
pub(super) enum Offer {
    /// Pass it on now.
    Now,
    /// Held; the latest of each call goes out when the interval is over.
    Held,
    /// Held, and nothing is scheduled yet: flush the held ones after this long.
    HeldFlushIn(Duration),
}

/// One server's progress reports, at most one every [`PROGRESS_INTERVAL`].
pub(super) struct ProgressGate {
    last: Option<Instant>,
    /// The latest held report of each call: as many entries as calls running.
    pending: HashMap<ProgressToken, Report>,
    flush_scheduled: bool,
    pub tally: Tally,
}

impl Default for ProgressGate {
    fn default() -> Self {
        ProgressGate {
            last: None,
            pending: HashMap::new(),
            flush_scheduled: false,
            tally: Tally::new("progress notifications", "merged into later ones"),
        }
    }
}

impl ProgressGate {
    pub fn offer(&mut self, token: ProgressToken, report: Report, now: Instant) -> Offer {
        let due = self
            .last
            .is_none_or(|last| now.saturating_duration_since(last) >= PROGRESS_INTERVAL);
        if due && !self.flush_scheduled {
            self.last = Some(now);
            self.pending.remove(&token);
            return Offer::Now;
        }
        self.pending.insert(token, report);
        if self.flush_scheduled {
            return Offer::Held;
        }
        self.flush_scheduled = true;
        let since = self
            .last
            .map_or(Duration::ZERO, |last| now.saturating_duration_since(last));
        Offer::HeldFlushIn(PROGRESS_INTERVAL.saturating_sub(since))
    }

    /// The held reports, to pass on now.
    pub fn flush(&mut self, now: Instant) -> Vec<(ProgressToken, Report)> {
        self.flush_scheduled = false;
        self.last = Some(now);
        self.pending.drain().collect()
    }
}

/// A budget of log bytes per [`WINDOW`], for a server's stderr.
pub(super) struct LogBudget {
    started: Option<Instant>,
    left: usize,
    pub tally: Tally,
}

impl LogBudget {
    pub fn new(what: &'static str) -> LogBudget {
        LogBudget {
            started: None,
            left: LOG_BYTES_PER_WINDOW,
            tally: Tally::new(what, "not logged"),
        }
    }

    /// Whether a line of `len` bytes may be logged now, and the summary of a window that has
    /// just ended with lines held back.
    /// What was held back since the window began, once the stream has ended.
    pub fn finish(&mut self, now: Instant) -> Option<String> {
        self.tally.finish(now)
    }

    pub fn admit(&mut self, len: usize, now: Instant) -> (bool, Option<String>) {
        let len = len.saturating_add(LOG_LINE_OVERHEAD);
        let started = *self.started.get_or_insert(now);
        if now.saturating_duration_since(started) >= WINDOW {
            self.started = Some(now);
            self.left = LOG_BYTES_PER_WINDOW;
        }
        let admitted = len <= self.left;
        if admitted {
            self.left -= len;
        } else {
            self.left = 0;
        }
        (admitted, self.tally.count(admitted, now).0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(progress: f64) -> Report {
        Report {
            progress,
            total: None,
            message: None,
        }
    }

    #[test]
    fn progress_is_passed_at_most_every_interval_and_the_latest_is_kept() {
        let mut gate = ProgressGate::default();
        let token = ProgressToken(rmcp::model::NumberOrString::Number(1));
        let start = Instant::now();
        assert_eq!(gate.offer(token.clone(), report(1.0), start), Offer::Now);
        let Offer::HeldFlushIn(wait) = gate.offer(token.clone(), report(2.0), start) else {
            panic!("the second within the interval is held")
        };
        assert_eq!(wait, PROGRESS_INTERVAL);
        for i in 3..1000 {
            assert_eq!(
                gate.offer(token.clone(), report(f64::from(i)), start),
                Offer::Held
            );
        }
        let flushed = gate.flush(start + PROGRESS_INTERVAL);
        assert_eq!(flushed, vec![(token.clone(), report(999.0))]);
        assert_eq!(
            gate.offer(token, report(1000.0), start + PROGRESS_INTERVAL * 2),
            Offer::Now
        );
    }

    #[test]
    fn a_tally_says_once_per_window_what_it_held_back() {
        let mut tally = Tally::new("things", "held back");
        let start = Instant::now();
        assert_eq!(tally.count(true, start), (None, None));
        let second = start + Duration::from_secs(1);
        assert_eq!(
            tally.count(false, second),
            (None, Some(WINDOW - Duration::from_secs(1))),
            "the first held back asks to be closed when the window ends"
        );
        for _ in 0..98 {
            assert_eq!(tally.count(false, second), (None, None));
        }
        assert_eq!(tally.close(second), None, "the window is not over");
        assert_eq!(
            tally.close(start + WINDOW).as_deref(),
            Some("100 things in 5 s, 99 held back")
        );
        assert_eq!(tally.close(start + WINDOW * 3), None, "said once");
        // A window with nothing held back says nothing; one cut short by the end says its part.
        assert_eq!(tally.count(true, start + WINDOW * 4), (None, None));
        assert_eq!(tally.close(start + WINDOW * 5), None);
        tally.count(false, start + WINDOW * 6);
        assert_eq!(
            tally
                .finish(start + WINDOW * 6 + Duration::from_secs(2))
                .as_deref(),
            Some("1 things in 2 s, 1 held back")
        );
    }

    #[test]
    fn the_log_budget_refills_each_window() {
        let mut budget = LogBudget::new("lines");
        let start = Instant::now();
        assert!(
            budget
                .admit(LOG_BYTES_PER_WINDOW - LOG_LINE_OVERHEAD - 10, start)
                .0
        );
        assert!(!budget.admit(100, start).0);
        assert!(
            !budget.admit(5, start).0,
            "once over, the window holds the rest"
        );
        let (admitted, summary) = budget.admit(100, start + WINDOW);
        assert!(admitted);
        assert_eq!(summary.as_deref(), Some("3 lines in 5 s, 2 not logged"));
    }
}
