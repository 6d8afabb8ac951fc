//! What the simulator's accounting would cost a real JobManager's REST threads, in CPU ms:
//!
//! ```text
//! cost_ms = per_refresh_ms × fetcher_refreshes + per_fetched_entry_ms × fetched_entries
//!         + per_request_ms × requests + per_touched_entry_ms × entries_touched
//!         + per_response_byte_ms × response_bytes
//! ```
//!
//! The first two terms are the MetricFetcher refreshes (`fetcher.rs`), which fold every metric
//! of every subtask into the MetricStore; the rest is the requests' own work. Pure: counts
//! in, milliseconds out. [`fit`] derives the constants from real measurements;
//! `bench-collect` reruns that fit on the simulator's copies of the real jobs.

use serde::Serialize;

/// What a span of requests did, as `/_sim/stats` counts it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CostCounts {
    pub fetcher_refreshes: u64,
    pub fetched_entries: u64,
    pub requests: u64,
    pub entries_touched: u64,
    pub response_bytes: u64,
}

impl CostCounts {
    pub const fn new(
        fetcher_refreshes: u64,
        fetched_entries: u64,
        requests: u64,
        entries_touched: u64,
        response_bytes: u64,
    ) -> Self {
        CostCounts {
            fetcher_refreshes,
            fetched_entries,
            requests,
            entries_touched,
            response_bytes,
        }
    }

    fn features(&self) -> [f64; TERMS] {
        [
            self.fetcher_refreshes as f64,
            self.fetched_entries as f64,
            self.requests as f64,
            self.entries_touched as f64,
            self.response_bytes as f64,
        ]
    }
}

/// The model's constants (ms of JobManager REST-thread CPU per unit).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct CostModel {
    pub per_refresh_ms: f64,
    pub per_fetched_entry_ms: f64,
    pub per_request_ms: f64,
    pub per_touched_entry_ms: f64,
    pub per_response_byte_ms: f64,
}

/// The modeled cost and its parts (ms).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct JobManagerCpu {
    pub jobmanager_cpu_ms: f64,
    /// Refreshes: fixed part plus fetched entries.
    pub refresh_ms: f64,
    pub requests_ms: f64,
    pub touched_ms: f64,
    pub bytes_ms: f64,
}

/// One term of the model, for choosing what [`fit`] may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Term {
    Refresh,
    FetchedEntry,
    Request,
    TouchedEntry,
    ResponseByte,
}

const TERMS: usize = 5;
const ALL_TERMS: [Term; TERMS] = [
    Term::Refresh,
    Term::FetchedEntry,
    Term::Request,
    Term::TouchedEntry,
    Term::ResponseByte,
];

impl CostModel {
    /// Fitted on Flink 2.3's JobManager REST-thread CPU per poll, net of idle, in
    /// BENCHMARKS.md: `bench-jm-cpu` (126 subtasks, 5 vertices, 2 TaskManagers, every poller
    /// at 11 s: refresh-only 23.3 ms, agent 25.8, operator-like 31.4) and `bench-jm-scale`
    /// (1,024 subtasks, 8 × 128, 4 TaskManagers: refresh-only @ 60 s 215 ms, agent @ 15 s
    /// 258, operator-like @ 60 s 270), counted on the simulator's copies of those jobs.
    /// `bench-collect --jm-cpu-only` reruns the fit and says when these are out of date.
    /// The fit of all five terms keeps two ([`CALIBRATED_TERMS`]): a refresh's fixed part
    /// would be negative (two sizes, and the line through them passes below zero), the
    /// per-request part is lost in the noise, and bytes move with entries touched (both are
    /// mostly name listings), so those are 0.
    pub const CALIBRATED: CostModel = CostModel {
        per_refresh_ms: 0.0,
        per_fetched_entry_ms: 0.002_685,
        per_request_ms: 0.0,
        per_touched_entry_ms: 0.001_136,
        per_response_byte_ms: 0.0,
    };

    /// The modeled cost of `c`.
    pub fn cpu(&self, c: &CostCounts) -> JobManagerCpu {
        let refresh_ms = self.per_refresh_ms * c.fetcher_refreshes as f64
            + self.per_fetched_entry_ms * c.fetched_entries as f64;
        let requests_ms = self.per_request_ms * c.requests as f64;
        let touched_ms = self.per_touched_entry_ms * c.entries_touched as f64;
        let bytes_ms = self.per_response_byte_ms * c.response_bytes as f64;
        JobManagerCpu {
            jobmanager_cpu_ms: refresh_ms + requests_ms + touched_ms + bytes_ms,
            refresh_ms,
            requests_ms,
            touched_ms,
            bytes_ms,
        }
    }

    fn from_coefficients(k: [f64; TERMS]) -> Self {
        CostModel {
            per_refresh_ms: k[0],
            per_fetched_entry_ms: k[1],
            per_request_ms: k[2],
            per_touched_entry_ms: k[3],
            per_response_byte_ms: k[4],
        }
    }
}

/// The terms [`CostModel::CALIBRATED`] was fitted with.
pub const CALIBRATED_TERMS: &[Term] = &[Term::FetchedEntry, Term::TouchedEntry];

/// A real measurement: what a poller's polls did (as the simulator counts them on a copy of
/// the real job) and the CPU ms they cost the real JobManager, over the same span.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Observation {
    pub counts: CostCounts,
    pub measured_ms: f64,
}

/// The constants for `terms` (the others 0) that minimise the squared *relative* error over
/// `observations` (the targets are ratios, and small jobs count as much as large ones), none
/// negative: the best over every subset of `terms` solved by least squares. `None` when no
/// subset can be solved (no observations, or none with a positive measurement).
pub fn fit(observations: &[Observation], terms: &[Term]) -> Option<CostModel> {
    let rows: Vec<([f64; TERMS], f64)> = observations
        .iter()
        .filter(|o| o.measured_ms > 0.0)
        .map(|o| {
            let x = o.counts.features().map(|v| v / o.measured_ms);
            (x, 1.0)
        })
        .collect();
    let allowed: Vec<usize> = ALL_TERMS
        .iter()
        .enumerate()
        .filter(|(_, t)| terms.contains(t))
        .map(|(i, _)| i)
        .collect();
    let mut best: Option<(f64, [f64; TERMS])> = None;
    for mask in 1u32..(1 << allowed.len()) {
        let cols: Vec<usize> = (0..allowed.len())
            .filter(|b| mask & (1 << b) != 0)
            .map(|b| allowed[b])
            .collect();
        let Some(k) = least_squares(&rows, &cols) else {
            continue;
        };
        if k.iter().any(|v| *v < 0.0) {
            continue;
        }
        let mut coef = [0.0; TERMS];
        for (c, v) in cols.iter().zip(k) {
            coef[*c] = v;
        }
        let residual: f64 = rows
            .iter()
            .map(|(x, y)| {
                let fx: f64 = x.iter().zip(coef).map(|(a, b)| a * b).sum();
                (fx - y).powi(2)
            })
            .sum();
        // Ties (several exact fits) go to the subset found first: fewer, earlier terms.
        if best.is_none_or(|(r, _)| residual < r - 1e-12) {
            best = Some((residual, coef));
        }
    }
    best.map(|(_, k)| CostModel::from_coefficients(k))
}

/// Least squares over columns `cols`: the normal equations by Gaussian elimination.
/// `None` when they are singular.
fn least_squares(rows: &[([f64; TERMS], f64)], cols: &[usize]) -> Option<Vec<f64>> {
    let n = cols.len();
    let mut a = vec![vec![0.0; n + 1]; n];
    for (x, y) in rows {
        for i in 0..n {
            for j in 0..n {
                a[i][j] += x[cols[i]] * x[cols[j]];
            }
            a[i][n] += x[cols[i]] * y;
        }
    }
    for i in 0..n {
        let pivot = (i..n).max_by(|&p, &q| a[p][i].abs().total_cmp(&a[q][i].abs()))?;
        a.swap(i, pivot);
        let scale = a[i].iter().map(|v| v.abs()).fold(0.0, f64::max);
        if a[i][i].abs() <= 1e-12 * scale.max(f64::MIN_POSITIVE) {
            return None;
        }
        let pivot_row = a[i].clone();
        for (r, row) in a.iter_mut().enumerate() {
            if r != i {
                let f = row[i] / pivot_row[i];
                for (x, p) in row.iter_mut().zip(&pivot_row).skip(i) {
                    *x -= f * p;
                }
            }
        }
    }
    Some((0..n).map(|i| a[i][n] / a[i][i]).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(refreshes: u64, fetched: u64, requests: u64, ms: f64) -> Observation {
        Observation {
            counts: CostCounts {
                fetcher_refreshes: refreshes,
                fetched_entries: fetched,
                requests,
                ..Default::default()
            },
            measured_ms: ms,
        }
    }

    #[test]
    fn fit_recovers_the_constants_that_made_the_data() {
        // 2 ms per refresh, 0.001 ms per fetched entry, 0.5 ms per request.
        let data: Vec<Observation> = [(1, 10_000, 1), (1, 80_000, 9), (2, 20_000, 20)]
            .iter()
            .map(|&(r, f, q)| obs(r, f, q, 2.0 * r as f64 + 0.001 * f as f64 + 0.5 * q as f64))
            .collect();
        let k = fit(&data, &[Term::Refresh, Term::FetchedEntry, Term::Request]).expect("fits");
        assert!((k.per_refresh_ms - 2.0).abs() < 1e-9, "{k:?}");
        assert!((k.per_fetched_entry_ms - 0.001).abs() < 1e-12, "{k:?}");
        assert!((k.per_request_ms - 0.5).abs() < 1e-9, "{k:?}");
        assert_eq!(k.per_touched_entry_ms, 0.0);
    }

    #[test]
    fn fit_never_returns_a_negative_constant() {
        // The line through these runs below zero at no entries: the fixed part is dropped.
        let data = [obs(1, 10_000, 1, 20.0), obs(1, 80_000, 1, 215.0)];
        let k = fit(&data, &[Term::Refresh, Term::FetchedEntry]).expect("fits");
        assert_eq!(k.per_refresh_ms, 0.0, "{k:?}");
        assert!(k.per_fetched_entry_ms > 0.0, "{k:?}");
        assert!(fit(&[], &[Term::Refresh]).is_none());
    }

    #[test]
    fn cost_adds_up_its_parts() {
        let k = CostModel {
            per_refresh_ms: 1.0,
            per_fetched_entry_ms: 0.01,
            per_request_ms: 0.5,
            per_touched_entry_ms: 0.001,
            per_response_byte_ms: 0.0001,
        };
        let c = k.cpu(&CostCounts {
            fetcher_refreshes: 2,
            fetched_entries: 100,
            requests: 4,
            entries_touched: 1000,
            response_bytes: 10_000,
        });
        assert_eq!(c.refresh_ms, 3.0);
        assert_eq!(c.requests_ms, 2.0);
        assert_eq!(c.touched_ms, 1.0);
        assert_eq!(c.bytes_ms, 1.0);
        assert_eq!(c.jobmanager_cpu_ms, 7.0);
    }
}
