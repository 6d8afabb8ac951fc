//! The harness's one error type: which step failed and why, in words an operator can act on.

use std::fmt;

#[derive(Debug)]
pub struct HarnessError {
    step: &'static str,
    detail: String,
}

impl HarnessError {
    pub(crate) fn new(step: &'static str, detail: impl Into<String>) -> Self {
        Self {
            step,
            detail: detail.into(),
        }
    }

    /// The step that failed, e.g. `"prepare"` when Java or the Flink wheels could not be had.
    pub fn step(&self) -> &'static str {
        self.step
    }
}

impl fmt::Display for HarnessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "real-Flink harness, step '{}': {}",
            self.step, self.detail
        )
    }
}

impl std::error::Error for HarnessError {}

/// A workspace binary the harness runs (the agent, the coordinator) is not built.
impl From<flink_autoscale_testkit::Error> for HarnessError {
    fn from(err: flink_autoscale_testkit::Error) -> Self {
        Self::new("locate a workspace binary", err.to_string())
    }
}
