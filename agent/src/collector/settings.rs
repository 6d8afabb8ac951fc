//! The collector's knobs, derived from the agent's configuration once and shared by every
//! job's collector.

use crate::config::{BusyAggregator, Config};

/// The collector's knobs, derived from the configuration.
#[derive(Debug, Clone)]
pub struct CollectorSettings {
    pub busy_aggregator: BusyAggregator,
    pub max_request_line_bytes: usize,
    pub names_refresh_ms: u64,
    pub slow_refresh_ms: u64,
    pub fetcher_interval_ms: u64,
    pub window_ms: u64,
    pub window_capacity: usize,
    pub poll_interval_ms: u64,
    /// Jobs with more subtasks are read in slices (see [`super::slices`]).
    pub slice_above_subtasks: u32,
    pub slice_passes_per_window: u32,
}

impl CollectorSettings {
    pub fn from_config(c: &Config) -> Self {
        let ms = |d: crate::config::Dur| u64::try_from(d.0.as_millis()).unwrap_or(u64::MAX);
        CollectorSettings {
            busy_aggregator: c.collector.busy_time_aggregator,
            max_request_line_bytes: c.jobmanager.max_request_line_bytes,
            names_refresh_ms: ms(c.collector.names_refresh_interval),
            slow_refresh_ms: ms(c.collector.slow_refresh_interval),
            fetcher_interval_ms: ms(c.jobmanager.fetcher_update_interval),
            window_ms: c
                .metrics_window()
                .map(|d| d.as_millis() as u64)
                .unwrap_or(15 * 60_000),
            window_capacity: c.window_capacity(),
            poll_interval_ms: ms(c.collector.poll_interval),
            slice_above_subtasks: c.collector.slice_above_subtasks,
            slice_passes_per_window: c.collector.slice_passes_per_window,
        }
    }

    /// Reads every job whole, whatever its size: for one-shot reads such as `collect --once`.
    pub fn without_slicing(mut self) -> Self {
        self.slice_above_subtasks = u32::MAX;
        self
    }

    /// Slices per vertex for a job of `subtasks` whose window is `window_ms` long: the polls
    /// in one window over the passes wanted, or 1 (whole) for jobs up to the threshold.
    pub fn slices_for(&self, subtasks: u64, window_ms: u64) -> u32 {
        if subtasks <= u64::from(self.slice_above_subtasks) {
            return 1;
        }
        let polls = window_ms / self.poll_interval_ms.max(1);
        let slices = polls / u64::from(self.slice_passes_per_window.max(1));
        u32::try_from(slices).unwrap_or(u32::MAX).max(1)
    }
}
