//! Flink's MetricFetcher as a cost: the JobManager's MetricStore is refreshed on demand.
//! Every metric-reading handler (all `*/metrics`, `/backpressure`, `/jobs/:jobid`,
//! `/vertices/:vertexid`, the batch metric endpoints) calls `MetricFetcher.update()`; when
//! more than `metrics.fetcher.update-interval` has passed since the last refresh started,
//! it starts one, which pulls every metric of every subtask of every job (and the
//! JobManager's and TaskManagers' own) from the TaskManagers, whatever the request asked for.
//! Nobody asking means no refresh. (`MetricFetcherImpl.update` in Flink; the simulator's
//! per-job value snapshots under `[staleness] fetcher_interval_ms` are a separate layer.)

/// Flink's default `metrics.fetcher.update-interval`.
pub(crate) const DEFAULT_UPDATE_INTERVAL_MS: u64 = 10_000;

/// When the store was last refreshed.
#[derive(Debug, Clone)]
pub(crate) struct MetricFetcher {
    interval_ms: u64,
    /// Start of the last refresh; 0 before the first, as in Flink (so the first request
    /// refreshes).
    last_update_ms: u64,
}

impl MetricFetcher {
    pub fn new(interval_ms: u64) -> Self {
        MetricFetcher {
            interval_ms,
            last_update_ms: 0,
        }
    }

    pub fn interval_ms(&self) -> u64 {
        self.interval_ms
    }

    /// A metric-reading request at `now_ms`: true when it starts a refresh (more than the
    /// interval since the last one started, strictly, as Flink compares).
    pub fn update(&mut self, now_ms: u64) -> bool {
        if now_ms.saturating_sub(self.last_update_ms) > self.interval_ms {
            self.last_update_ms = now_ms;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refreshes_at_most_once_per_interval_and_only_strictly_after_it() {
        let mut f = MetricFetcher::new(10_000);
        assert!(f.update(1_000_000), "the first request refreshes");
        assert!(!f.update(1_000_000));
        assert!(!f.update(1_005_000));
        assert!(
            !f.update(1_010_000),
            "exactly the interval later: still fresh"
        );
        assert!(f.update(1_010_001));
        assert!(
            !f.update(1_020_001),
            "the interval counts from the last refresh's start"
        );
        assert!(f.update(1_020_002));
        assert!(
            f.update(1_090_000),
            "a long pause: one refresh, not several"
        );
        assert!(!f.update(1_090_001));
    }
}
