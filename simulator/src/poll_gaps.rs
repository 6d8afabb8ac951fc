//! When each job's metric values were read, as the JobManager sees it: per job the reads,
//! the first and last read and the longest wait between two reads, in wall-clock time since
//! the accounting was last reset. A poller's fairness measured from the server side, not
//! from what the poller says about itself (`GET /_sim/polls`).

use std::collections::HashMap;
use std::time::Instant;

use serde::Serialize;

/// One job's reads since the reset; times in ms since the reset.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct JobReads {
    pub reads: u64,
    pub first_ms: u64,
    pub last_ms: u64,
    /// Longest time between two consecutive reads.
    pub max_gap_ms: u64,
}

/// What `GET /_sim/polls` answers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PollGapsReport {
    /// Wall-clock ms since the reset.
    pub elapsed_ms: u64,
    pub jobs: HashMap<String, JobReads>,
}

impl PollGapsReport {
    /// The longest a job went without a read over the whole span: between reads, before
    /// the first and after the last. `None` for a job never read.
    pub fn longest_wait_ms(&self, job: &str) -> Option<u64> {
        self.jobs.get(job).map(|r| {
            r.max_gap_ms
                .max(r.first_ms)
                .max(self.elapsed_ms.saturating_sub(r.last_ms))
        })
    }
}

/// The running record.
#[derive(Debug)]
pub(crate) struct PollGaps {
    since: Instant,
    jobs: HashMap<String, JobReads>,
}

impl Default for PollGaps {
    fn default() -> Self {
        PollGaps {
            since: Instant::now(),
            jobs: HashMap::new(),
        }
    }
}

impl PollGaps {
    /// One answered read of `job`'s metric values, now.
    pub fn record(&mut self, job: &str) {
        let now = self.since.elapsed().as_millis() as u64;
        match self.jobs.get_mut(job) {
            Some(r) => {
                r.max_gap_ms = r.max_gap_ms.max(now.saturating_sub(r.last_ms));
                r.last_ms = now;
                r.reads += 1;
            }
            None => {
                self.jobs.insert(
                    job.to_string(),
                    JobReads {
                        reads: 1,
                        first_ms: now,
                        last_ms: now,
                        max_gap_ms: 0,
                    },
                );
            }
        }
    }

    pub fn report(&self) -> PollGapsReport {
        PollGapsReport {
            elapsed_ms: self.since.elapsed().as_millis() as u64,
            jobs: self.jobs.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_wait_counts_the_edges_of_the_span() {
        let mut report = PollGapsReport {
            elapsed_ms: 10_000,
            ..Default::default()
        };
        let reads = |first_ms, last_ms, max_gap_ms| JobReads {
            reads: 3,
            first_ms,
            last_ms,
            max_gap_ms,
        };
        report.jobs.insert("a".into(), reads(500, 9_000, 4_000));
        report.jobs.insert("late".into(), reads(6_000, 9_900, 100));
        report.jobs.insert("gone".into(), reads(10, 2_000, 100));
        assert_eq!(report.longest_wait_ms("a"), Some(4_000));
        assert_eq!(report.longest_wait_ms("late"), Some(6_000));
        assert_eq!(report.longest_wait_ms("gone"), Some(8_000));
        assert_eq!(report.longest_wait_ms("never"), None);
    }

    #[test]
    fn records_gaps_between_reads() {
        let mut gaps = PollGaps::default();
        gaps.record("a");
        std::thread::sleep(std::time::Duration::from_millis(30));
        gaps.record("a");
        gaps.record("a");
        let r = gaps.report().jobs["a"];
        assert_eq!(r.reads, 3);
        assert!(r.max_gap_ms >= 30, "{r:?}");
        assert!(r.last_ms >= r.first_ms + 30);
    }
}
