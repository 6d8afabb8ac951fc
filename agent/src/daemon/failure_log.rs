//! How much a failing job may log: its first failure, each change of error kind, then one
//! summary line per [`SUMMARY_EVERY`] with how many failures it left out, and one line when
//! it answers again. Ten thousand failing jobs then log ten thousand lines once, not one per
//! job per retry. Pure: the caller passes the time and writes the line.

use std::time::Duration;

/// At most one summary line per failing job this often.
pub const SUMMARY_EVERY: Duration = Duration::from_secs(300);

/// What to log for a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureLine {
    /// The first failure after answers (or ever), or a different kind of error than before.
    Full,
    /// Still failing: `failures` in a row since `since_ms`, `left_out` of them not logged.
    Summary {
        failures: u64,
        left_out: u64,
        since_ms: u64,
    },
    /// Counted, not logged.
    Quiet,
}

/// One job's failures in a row.
#[derive(Debug, Clone, Default)]
pub struct FailureLog {
    kind: Option<&'static str>,
    since_ms: u64,
    failures: u64,
    left_out: u64,
    last_line_ms: u64,
}

impl FailureLog {
    /// A failure of `kind` at `now_ms`.
    pub fn failure(&mut self, kind: &'static str, now_ms: u64) -> FailureLine {
        if self.failures == 0 {
            self.since_ms = now_ms;
        }
        self.failures += 1;
        if self.kind != Some(kind) {
            self.kind = Some(kind);
            self.left_out = 0;
            self.last_line_ms = now_ms;
            return FailureLine::Full;
        }
        let every = u64::try_from(SUMMARY_EVERY.as_millis()).unwrap_or(u64::MAX);
        if now_ms.saturating_sub(self.last_line_ms) >= every {
            let line = FailureLine::Summary {
                failures: self.failures,
                left_out: self.left_out,
                since_ms: self.since_ms,
            };
            self.left_out = 0;
            self.last_line_ms = now_ms;
            return line;
        }
        self.left_out += 1;
        FailureLine::Quiet
    }

    /// An answer. Returns the failures in a row it ends, if any (for one line).
    pub fn answered(&mut self) -> Option<u64> {
        let failures = self.failures;
        *self = FailureLog::default();
        (failures > 0).then_some(failures)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: u64 = 60_000;

    #[test]
    fn logs_the_first_failure_changes_and_a_summary_every_five_minutes() {
        let mut log = FailureLog::default();
        assert_eq!(log.failure("timeout", 0), FailureLine::Full);
        for t in 1..100 {
            assert_eq!(log.failure("timeout", t * 1_000), FailureLine::Quiet);
        }
        assert_eq!(log.failure("http_5xx", 100_000), FailureLine::Full);
        assert_eq!(log.failure("http_5xx", 101_000), FailureLine::Quiet);
        assert_eq!(
            log.failure("http_5xx", 100_000 + 5 * MIN),
            FailureLine::Summary {
                failures: 103,
                left_out: 1,
                since_ms: 0
            }
        );
        assert_eq!(
            log.failure("http_5xx", 100_000 + 6 * MIN),
            FailureLine::Quiet
        );
        assert_eq!(log.answered(), Some(104));
        assert_eq!(log.answered(), None);
        assert_eq!(log.failure("http_5xx", 200 * MIN), FailureLine::Full);
    }

    #[test]
    fn a_job_failing_every_second_for_an_hour_logs_at_most_thirteen_lines() {
        let mut log = FailureLog::default();
        let lines = (0..3_600)
            .map(|s| log.failure("deadline", s * 1_000))
            .filter(|l| *l != FailureLine::Quiet)
            .count();
        assert!(lines <= 13, "{lines}");
    }
}
