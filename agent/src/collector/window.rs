//! The sample window: the bounded, time-ordered run of usable samples a job keeps over
//! `metrics.window` (the only thing "window" means in the collector). Trimmed to the window
//! length and hard-capped in count, so memory stays bounded whatever the clock does.

use std::collections::VecDeque;

use flink_autoscale_core::samples::Sample;

/// A bounded, time-ordered window of samples.
#[derive(Debug, Clone)]
pub struct SampleWindow {
    window_ms: u64,
    capacity: usize,
    samples: VecDeque<Sample>,
}

impl SampleWindow {
    /// A window spanning `window_ms`, holding at most `capacity` samples.
    pub fn new(window_ms: u64, capacity: usize) -> Self {
        SampleWindow {
            window_ms,
            capacity: capacity.max(2),
            samples: VecDeque::new(),
        }
    }

    /// Appends a sample and drops what fell out of the window. A sample older than the
    /// newest one is refused (the clock went backwards), returning false.
    pub fn push(&mut self, sample: Sample) -> bool {
        if self
            .samples
            .back()
            .is_some_and(|last| sample.time_ms <= last.time_ms)
        {
            return false;
        }
        let horizon = sample.time_ms.saturating_sub(self.window_ms);
        self.samples.push_back(sample);
        // Keep one sample at or before the horizon so a full window spans the whole length.
        while self.samples.len() > 2 && self.samples[1].time_ms <= horizon {
            self.samples.pop_front();
        }
        while self.samples.len() > self.capacity {
            self.samples.pop_front();
        }
        true
    }

    /// Changes the length and the cap (a job's own `metrics.window`), dropping what no longer
    /// fits. Returns whether anything changed.
    pub fn resize(&mut self, window_ms: u64, capacity: usize) -> bool {
        let capacity = capacity.max(2);
        if (window_ms, capacity) == (self.window_ms, self.capacity) {
            return false;
        }
        self.window_ms = window_ms;
        self.capacity = capacity;
        if let Some(newest) = self.samples.back().map(|s| s.time_ms) {
            let horizon = newest.saturating_sub(window_ms);
            while self.samples.len() > 2 && self.samples[1].time_ms <= horizon {
                self.samples.pop_front();
            }
        }
        while self.samples.len() > self.capacity {
            self.samples.pop_front();
        }
        true
    }

    /// Forgets every sample (restart, rescale, not running).
    pub fn clear(&mut self) {
        self.samples.clear();
    }

    /// True once the samples span the whole window length.
    pub fn is_full(&self) -> bool {
        match (self.samples.front(), self.samples.back()) {
            (Some(first), Some(last)) => last.time_ms - first.time_ms >= self.window_ms,
            _ => false,
        }
    }

    pub fn len(&self) -> usize {
        self.samples.len()
    }

    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    pub fn latest(&self) -> Option<&Sample> {
        self.samples.back()
    }

    pub fn samples(&self) -> impl ExactSizeIterator<Item = &Sample> {
        self.samples.iter()
    }

    /// The window as the `evaluate` command's input list.
    pub fn to_vec(&self) -> Vec<Sample> {
        self.samples.iter().cloned().collect()
    }

    pub fn window_ms(&self) -> u64 {
        self.window_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t: u64) -> Sample {
        Sample {
            time_ms: t,
            ..Default::default()
        }
    }

    #[test]
    fn trims_to_the_window_and_the_cap() {
        let mut w = SampleWindow::new(100, 1000);
        for t in (0..=300).step_by(10) {
            assert!(w.push(at(t)));
        }
        assert!(w.is_full());
        let times: Vec<u64> = w.samples().map(|s| s.time_ms).collect();
        assert_eq!(times.first(), Some(&200));
        assert_eq!(times.last(), Some(&300));
        assert!(!w.push(at(300)), "time must move forward");

        let mut capped = SampleWindow::new(1_000_000, 5);
        for t in 0..100 {
            capped.push(at(t));
        }
        assert_eq!(capped.len(), 5);
        assert!(!capped.is_full());
        capped.clear();
        assert!(capped.is_empty());

        assert!(w.resize(50, 1000));
        assert_eq!(w.samples().next().map(|s| s.time_ms), Some(250));
        assert!(!w.resize(50, 1000));
    }
}
