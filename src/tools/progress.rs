//! Where a running call reports how far it has come: a tool is handed a [`CallProgress`] and
//! reports through it; whoever runs the call (the dispatcher) decides where the reports go, and
//! that a call that has ended reports nothing more.

use std::sync::Arc;

/// The progress so far, the total when known, and what the tool says it is doing.
type Report = dyn Fn(f64, Option<f64>, Option<String>) + Send + Sync;

/// Where a running call reports its progress. Cheap to clone.
#[derive(Clone)]
pub struct CallProgress {
    to: Option<Arc<Report>>,
}

impl CallProgress {
    /// Reports to nobody (a call outside a dispatcher).
    pub fn none() -> Self {
        CallProgress { to: None }
    }

    /// Reports go to `report`.
    pub fn to(report: impl Fn(f64, Option<f64>, Option<String>) + Send + Sync + 'static) -> Self {
        CallProgress {
            to: Some(Arc::new(report)),
        }
    }

    /// Tells the user how far the call has come.
    pub fn report(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        if let Some(report) = &self.to {
            report(progress, total, message);
        }
    }
}
