//! Everything the simulated JobManager knows, behind one lock: the clock, the jobs, the
//! cluster, per-endpoint accounting and injected faults.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::cost::CostCounts;
use crate::fetcher::MetricFetcher;
use crate::ids::stable_id;
use crate::job::JobSim;
use crate::poll_gaps::PollGaps;
use crate::scenario::{ClusterSpec, Scenario};

/// Simulated start time used with a manual clock, so test runs are reproducible.
pub(crate) const MANUAL_EPOCH_MS: u64 = 1_800_000_000_000;

/// A fault injected into Flink-path responses (never into `/_sim/...`).
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// Never answer (until the simulator shuts down).
    Hang,
    /// Answer with this status and a Flink error body.
    Status(u16),
    /// Answer 200 with an HTML page (a proxy's error page, say).
    Html,
    /// Promise a longer body than is sent, then drop the connection.
    Truncated,
    /// Answer 200 with a body that is not JSON.
    MalformedJson,
    /// Answer 200 with a JSON array of about this many bytes.
    HugeBody(usize),
    /// Answer 302 to another path on this server.
    Redirect,
    /// Answer normally after this much wall-clock time.
    Delay(Duration),
}

/// Requests, bytes and metric entries one endpoint (or all) cost the JobManager, and the
/// MetricFetcher refreshes its requests started (see `fetcher.rs`) with the entries those
/// fetched.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct EndpointStats {
    pub requests: u64,
    pub response_bytes: u64,
    pub entries_touched: u64,
    pub fetcher_refreshes: u64,
    pub fetched_entries: u64,
}

/// Per-endpoint accounting, as served by `GET /_sim/stats`. Endpoints are keyed by method and
/// route template, e.g. `GET /jobs/:jobid/vertices/:vertexid/subtasks/metrics`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SimStats {
    pub requests: u64,
    pub response_bytes: u64,
    pub entries_touched: u64,
    /// MetricFetcher refreshes started by requests.
    pub fetcher_refreshes: u64,
    /// Metric entries those refreshes pulled from the TaskManagers: every metric of every
    /// running subtask of every job, plus job, JobManager and TaskManager scope.
    pub fetched_entries: u64,
    pub by_endpoint: BTreeMap<String, EndpointStats>,
}

impl SimStats {
    /// What the cost model needs (see `cost.rs`).
    pub fn counts(&self) -> CostCounts {
        let s = self;
        CostCounts::new(
            s.fetcher_refreshes,
            s.fetched_entries,
            s.requests,
            s.entries_touched,
            s.response_bytes,
        )
    }

    /// One request; `fetched` is the entries of the refresh it started, if it started one.
    pub(crate) fn record(
        &mut self,
        endpoint: &str,
        bytes: u64,
        entries: u64,
        fetched: Option<u64>,
    ) {
        let refreshes = u64::from(fetched.is_some());
        let fetched = fetched.unwrap_or(0);
        self.requests += 1;
        self.response_bytes += bytes;
        self.entries_touched += entries;
        self.fetcher_refreshes += refreshes;
        self.fetched_entries += fetched;
        let e = self.by_endpoint.entry(endpoint.to_string()).or_default();
        e.requests += 1;
        e.response_bytes += bytes;
        e.entries_touched += entries;
        e.fetcher_refreshes += refreshes;
        e.fetched_entries += fetched;
    }
}

/// Simulated time: wall time scaled by `speed`, plus explicit advances.
#[derive(Debug)]
pub(crate) struct Clock {
    manual: bool,
    speed: f64,
    wall_base: Instant,
    sim_base_ms: u64,
    offset_ms: u64,
}

impl Clock {
    pub fn now_ms(&self) -> u64 {
        let scaled = if self.manual {
            0.0
        } else {
            self.wall_base.elapsed().as_secs_f64() * 1000.0 * self.speed
        };
        self.sim_base_ms + self.offset_ms + scaled as u64
    }

    pub fn manual(&self) -> bool {
        self.manual
    }

    pub fn speed(&self) -> f64 {
        self.speed
    }
}

pub(crate) struct World {
    pub cluster: ClusterSpec,
    pub entry_delay_us: u64,
    /// Serve the batch metric endpoints (FLINK-39617).
    pub batch_metrics: bool,
    pub clock: Clock,
    pub start_ms: u64,
    pub jobs: Vec<JobSim>,
    /// Position of each job in `jobs` by id (sessions serve thousands of jobs).
    index: HashMap<String, usize>,
    pub stats: SimStats,
    /// When each job's metric values were read (reset with `stats`).
    pub polls: PollGaps,
    /// When the JobManager's MetricStore was last refreshed (for the accounting).
    pub fetcher: MetricFetcher,
    pub global_fault: Option<Fault>,
    pub job_faults: HashMap<String, Fault>,
    initial_taskmanagers: u32,
}

impl World {
    pub fn new(scenario: Scenario, speed: f64, manual: bool) -> Self {
        let start_ms = scenario.cluster.start_epoch_ms.unwrap_or_else(|| {
            if manual {
                MANUAL_EPOCH_MS
            } else {
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(MANUAL_EPOCH_MS, |d| d.as_millis() as u64)
            }
        });
        let staleness = scenario.staleness;
        let history_size = if scenario.cluster.serves_rescale_history() {
            scenario.cluster.rescale_history_size
        } else {
            0
        };
        let jobs: Vec<JobSim> = scenario
            .jobs
            .into_iter()
            .map(|j| JobSim::new(j, start_ms, staleness, history_size))
            .collect();
        let slots_needed: u32 = jobs.iter().map(JobSim::slots_used).sum();
        let per_tm = scenario.cluster.slots_per_taskmanager;
        let fetcher = MetricFetcher::new(scenario.cluster.fetcher_update_interval_ms);
        let initial_taskmanagers = scenario
            .cluster
            .taskmanagers
            .unwrap_or_else(|| slots_needed.div_ceil(per_tm).max(1));
        let index = index_of(&jobs);
        World {
            cluster: scenario.cluster,
            entry_delay_us: scenario.entry_delay_us,
            batch_metrics: scenario.batch_metrics,
            clock: Clock {
                manual,
                speed: if speed.is_finite() && speed > 0.0 {
                    speed
                } else {
                    1.0
                },
                wall_base: Instant::now(),
                sim_base_ms: start_ms,
                offset_ms: 0,
            },
            start_ms,
            jobs,
            index,
            stats: SimStats::default(),
            polls: PollGaps::default(),
            fetcher,
            global_fault: None,
            job_faults: HashMap::new(),
            initial_taskmanagers,
        }
    }

    /// Brings every job up to the clock's current time.
    pub fn sync(&mut self) -> u64 {
        let now = self.clock.now_ms();
        for job in &mut self.jobs {
            job.advance_to(now);
        }
        now
    }

    /// Brings one job up to the clock's current time: a request about one job needs no
    /// other job integrated (jobs share nothing that changes with time).
    pub fn sync_job(&mut self, j: usize) -> u64 {
        let now = self.clock.now_ms();
        if let Some(job) = self.jobs.get_mut(j) {
            job.advance_to(now);
        }
        now
    }

    pub fn advance(&mut self, d: Duration) -> u64 {
        self.clock.offset_ms += d.as_millis() as u64;
        self.sync()
    }

    pub fn job_index(&self, id: &str) -> Option<usize> {
        self.index.get(id).copied()
    }

    /// Forgets a job, as a JobManager does when a job leaves its history: it is no longer
    /// listed and its endpoints answer as for an unknown job. False if it was not known.
    pub fn remove_job(&mut self, id: &str) -> bool {
        let Some(j) = self.job_index(id) else {
            return false;
        };
        self.jobs.remove(j);
        self.index = index_of(&self.jobs);
        self.job_faults.remove(id);
        true
    }

    /// Resets the accounting and the record of reads.
    pub fn reset_stats(&mut self) {
        self.stats = SimStats::default();
        self.polls = PollGaps::default();
    }

    /// Task managers registered: fixed by the scenario, or just enough for every job.
    pub fn taskmanager_count(&self) -> u32 {
        if let Some(n) = self.cluster.taskmanagers {
            return n;
        }
        let used: u32 = self.jobs.iter().map(JobSim::slots_used).sum();
        self.initial_taskmanagers
            .max(used.div_ceil(self.cluster.slots_per_taskmanager))
    }

    pub fn slots_total(&self) -> u32 {
        self.taskmanager_count() * self.cluster.slots_per_taskmanager
    }

    pub fn slots_used(&self) -> u32 {
        self.jobs.iter().map(JobSim::slots_used).sum()
    }

    pub fn taskmanager_ids(&self) -> Vec<String> {
        (0..self.taskmanager_count())
            .map(|i| {
                let suffix = &stable_id(&["taskmanager", &i.to_string()])[..6];
                format!("10.0.{}.{}:6122-{suffix}", i / 250, i % 250 + 1)
            })
            .collect()
    }

    /// Each task manager's id and how many of its slots are in use (filled in order).
    pub fn taskmanager_slots(&self) -> Vec<(String, u32)> {
        let per_tm = self.cluster.slots_per_taskmanager;
        let mut used = self.slots_used();
        self.taskmanager_ids()
            .into_iter()
            .map(|id| {
                let busy = used.min(per_tm);
                used -= busy;
                (id, busy)
            })
            .collect()
    }

    /// The fault that applies to a request for `job` (job-specific wins over global).
    pub fn fault_for(&self, job: Option<&str>) -> Option<Fault> {
        job.and_then(|j| self.job_faults.get(j).cloned())
            .or_else(|| self.global_fault.clone())
    }
}

fn index_of(jobs: &[JobSim]) -> HashMap<String, usize> {
    jobs.iter()
        .enumerate()
        .map(|(i, j)| (j.id().to_string(), i))
        .collect()
}
