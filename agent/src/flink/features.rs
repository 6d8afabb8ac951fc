//! What the agent has learned about its JobManager's REST API beyond the stock endpoints:
//! today, whether it serves the batch metric endpoints proposed in FLINK-39617. Learned by one
//! probe, shared by every job's collector, and forgotten whenever the JobManager could not be
//! reached (it may come back as another version), so the next poll probes again. A "not
//! served" also expires after [`RECHECK_UNSERVED`], in case a restart went unseen.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long "the batch endpoints are not served" stands without another probe.
pub const RECHECK_UNSERVED: Duration = Duration::from_secs(3600);

/// Whether the batch metric endpoints are served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Batch {
    Unknown,
    /// One collector is probing; the others read per vertex meanwhile.
    Probing,
    Known {
        served: bool,
        at: Instant,
    },
}

/// What a collector should do about the batch endpoints this poll.
#[derive(Debug)]
pub enum BatchAnswer<'a> {
    /// Served (`true`) or not (`false`), as last probed.
    Known(bool),
    /// Another collector is probing right now.
    Pending,
    /// Probe now and [`ProbeTicket::settle`] the result. Dropping the ticket unsettled (the
    /// probe failed inconclusively, or its poll was cancelled) lets a later poll probe again.
    Probe(ProbeTicket<'a>),
}

/// The learned features of one JobManager.
#[derive(Debug)]
pub struct Features {
    batch: Mutex<Batch>,
    recheck_unserved: Duration,
}

impl Default for Features {
    fn default() -> Self {
        Features::with_recheck(RECHECK_UNSERVED)
    }
}

impl Features {
    /// What is known about the batch endpoints, handing out the one probe ticket when
    /// nothing is known and nobody is probing.
    pub fn batch_metrics(&self) -> BatchAnswer<'_> {
        let mut state = self.lock();
        match *state {
            Batch::Known { served: false, at } if at.elapsed() >= self.recheck_unserved => {
                *state = Batch::Probing;
                BatchAnswer::Probe(ProbeTicket {
                    features: self,
                    settled: false,
                })
            }
            Batch::Known { served, .. } => BatchAnswer::Known(served),
            Batch::Probing => BatchAnswer::Pending,
            Batch::Unknown => {
                *state = Batch::Probing;
                BatchAnswer::Probe(ProbeTicket {
                    features: self,
                    settled: false,
                })
            }
        }
    }

    /// Features whose "not served" expires after `recheck_unserved`.
    pub fn with_recheck(recheck_unserved: Duration) -> Self {
        Features {
            batch: Mutex::new(Batch::Unknown),
            recheck_unserved,
        }
    }

    /// The batch endpoints stopped answering (404 after a successful probe).
    pub fn batch_metrics_gone(&self) {
        *self.lock() = Batch::Known {
            served: false,
            at: Instant::now(),
        };
    }

    /// The JobManager could not be reached: forget what was learned about it.
    pub fn connection_lost(&self) {
        let mut state = self.lock();
        if *state != Batch::Probing {
            *state = Batch::Unknown;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Batch> {
        self.batch.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The right to probe the batch endpoints; see [`BatchAnswer::Probe`].
#[derive(Debug)]
pub struct ProbeTicket<'a> {
    features: &'a Features,
    settled: bool,
}

impl ProbeTicket<'_> {
    /// Records the probe's result.
    pub fn settle(mut self, served: bool) {
        self.settled = true;
        *self.features.lock() = Batch::Known {
            served,
            at: Instant::now(),
        };
    }
}

impl Drop for ProbeTicket<'_> {
    fn drop(&mut self) {
        if !self.settled {
            let mut state = self.features.lock();
            if *state == Batch::Probing {
                *state = Batch::Unknown;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(f: &Features) -> Option<bool> {
        match f.batch_metrics() {
            BatchAnswer::Known(served) => Some(served),
            _ => None,
        }
    }

    #[test]
    fn one_probe_at_a_time_and_forgotten_when_the_jobmanager_is_lost() {
        let f = Features::default();
        let ticket = match f.batch_metrics() {
            BatchAnswer::Probe(t) => t,
            other => panic!("expected a probe, got {other:?}"),
        };
        assert!(matches!(f.batch_metrics(), BatchAnswer::Pending));
        f.connection_lost(); // during the probe: the probe's own result decides
        ticket.settle(true);
        assert_eq!(known(&f), Some(true));
        f.batch_metrics_gone();
        assert_eq!(known(&f), Some(false));
        f.connection_lost();
        assert!(matches!(f.batch_metrics(), BatchAnswer::Probe(_)));
        // The ticket above was dropped unsettled: the next poll probes again.
        let BatchAnswer::Probe(t) = f.batch_metrics() else {
            panic!("an unsettled probe is retried");
        };
        t.settle(false);
        assert_eq!(known(&f), Some(false));
    }

    #[test]
    fn not_served_is_checked_again_later() {
        let f = Features::with_recheck(Duration::ZERO);
        let BatchAnswer::Probe(t) = f.batch_metrics() else {
            panic!("first probe");
        };
        t.settle(true);
        assert_eq!(known(&f), Some(true), "served stands");
        f.batch_metrics_gone();
        assert!(
            matches!(f.batch_metrics(), BatchAnswer::Probe(_)),
            "not served expires"
        );
    }
}
