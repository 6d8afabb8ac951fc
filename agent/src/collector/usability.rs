//! Why a poll's data must not be used by any decision.

use serde::Serialize;

/// The reasons data is unusable, each with a stable metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unusable {
    /// The job is not RUNNING.
    NotRunning,
    /// The job restarted, was rescaled or changed topology: the window starts over.
    Restarted,
    /// The values did not change since the previous poll (the JobManager's metric fetcher
    /// has not refreshed), or the poll came sooner than the fetcher's interval.
    Stale,
    /// A needed value is missing for a vertex.
    MissingValue,
    /// A value covers fewer subtasks than the vertex has (`*-complete: false`).
    Incomplete,
}

impl Unusable {
    pub fn label(self) -> &'static str {
        match self {
            Unusable::NotRunning => "not_running",
            Unusable::Restarted => "restarted",
            Unusable::Stale => "stale",
            Unusable::MissingValue => "missing_value",
            Unusable::Incomplete => "incomplete",
        }
    }
}
