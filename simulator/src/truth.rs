//! The model's true figures, for tools that judge an autoscaler against it (the what-if
//! command): what flows into each vertex at a given time, and what a vertex can process at
//! a given parallelism. Read-only views of a parsed [`Scenario`].

use crate::model::vertex_runtime;
use crate::rate::RateProfile;
use crate::scenario::{JobSpec, Scenario};

/// One job of a scenario, as the model sees it.
pub struct JobTruth<'a> {
    spec: &'a JobSpec,
}

impl Scenario {
    /// The job with this id or name.
    pub fn truth(&self, job: &str) -> Option<JobTruth<'_>> {
        self.jobs
            .iter()
            .find(|j| j.id == job || j.name == job)
            .map(|spec| JobTruth { spec })
    }

    /// Replaces the input rate of the source vertex named `source` (or of the job's only
    /// source when `source` is `None`) in every job that has it.
    pub fn replace_source_rate(
        &mut self,
        source: Option<&str>,
        rate: RateProfile,
    ) -> Result<(), String> {
        let mut replaced = 0;
        for job in &mut self.jobs {
            let sources: Vec<usize> = (0..job.vertices.len())
                .filter(|&i| job.vertices[i].source.is_some())
                .filter(|&i| source.is_none_or(|name| job.vertices[i].name == name))
                .collect();
            if source.is_none() && sources.len() > 1 {
                return Err(format!(
                    "job {} has {} sources; name the columns after them ({})",
                    job.name,
                    sources.len(),
                    sources
                        .iter()
                        .map(|&i| job.vertices[i].name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            for i in sources {
                if let Some(s) = job.vertices[i].source.as_mut() {
                    s.rate = rate.clone();
                    replaced += 1;
                }
            }
        }
        if replaced == 0 {
            return Err(match source {
                Some(name) => format!("no source vertex is named {name:?}"),
                None => "the scenario has no source".into(),
            });
        }
        Ok(())
    }

    /// Sets a key of every job's configuration (what `/jobs/:jid/jobmanager/config` shows,
    /// and what an agent reads as the job's own settings); `aliases` are removed first.
    pub fn set_job_config(&mut self, key: &str, value: &str, aliases: &[&str]) {
        for job in &mut self.jobs {
            job.config
                .retain(|(k, _)| k != key && !aliases.contains(&k.as_str()));
            job.config.push((key.to_string(), value.to_string()));
        }
    }

    /// The simulated start (epoch ms) when run with a manual clock.
    pub fn manual_start_ms(&self) -> u64 {
        self.cluster
            .start_epoch_ms
            .unwrap_or(crate::world::MANUAL_EPOCH_MS)
    }
}

impl JobTruth<'_> {
    pub fn id(&self) -> &str {
        &self.spec.id
    }

    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Vertex ids in topological order.
    pub fn vertex_ids(&self) -> Vec<String> {
        self.spec.vertices.iter().map(|v| v.id.clone()).collect()
    }

    pub fn vertex_names(&self) -> Vec<String> {
        self.spec.vertices.iter().map(|v| v.name.clone()).collect()
    }

    pub fn max_parallelism(&self, v: usize) -> u32 {
        self.spec.vertices[v].max_parallelism
    }

    pub fn is_source(&self, v: usize) -> bool {
        self.spec.vertices[v].source.is_some()
    }

    /// Records/s arriving at each source's external system `t_s` seconds after the start
    /// (0 for other vertices).
    pub fn input_rates(&self, t_s: f64) -> Vec<f64> {
        self.spec
            .vertices
            .iter()
            .map(|v| v.source.as_ref().map_or(0.0, |s| s.rate.rate_at(t_s)))
            .collect()
    }

    /// Records/s into each vertex when the sources read `input` (from [`Self::input_rates`]):
    /// every edge carries its producer's whole output.
    pub fn flows(&self, input: &[f64]) -> Vec<f64> {
        let n = self.spec.vertices.len();
        let mut flow = vec![0.0; n];
        for v in 0..n {
            flow[v] = if self.is_source(v) {
                input[v]
            } else {
                self.spec
                    .inputs_of(v)
                    .map(|e| flow[e.from] * self.spec.vertices[e.from].selectivity)
                    .sum()
            };
        }
        flow
    }

    /// Records/s vertex `v` processes at parallelism `p` with its hottest subtask 100 % busy
    /// (skew, partition assignment and a sink's write limit included).
    pub fn capacity(&self, v: usize, p: u32) -> f64 {
        vertex_runtime(&self.spec.vertices[v], p.max(1)).capacity
    }

    /// The smallest parallelism at which `flow` keeps vertex `v` at most `utilization` busy;
    /// when none does (a write-limited sink), the smallest that reaches its best capacity.
    pub fn ideal_parallelism(&self, v: usize, flow: f64, utilization: f64) -> u32 {
        let max = self.max_parallelism(v).max(1);
        let best = self.capacity(v, max);
        if flow > utilization * best {
            // Out of reach: the least parallelism that gets (nearly) all there is.
            return self.first_parallelism(v, max, |c| c >= best * (1.0 - 1e-9));
        }
        self.first_parallelism(v, max, |c| flow <= utilization * c)
    }

    /// The least `p <= max` whose capacity passes `enough` (true at `max`), by bisection: a
    /// vertex's capacity never falls as its parallelism grows (each subtask's share, of
    /// records or of partitions, only shrinks).
    fn first_parallelism(&self, v: usize, max: u32, enough: impl Fn(f64) -> bool) -> u32 {
        let (mut lo, mut hi) = (1, max);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if enough(self.capacity(v, mid)) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        lo
    }

    /// The job's configuration keys, as the JobManager shows them.
    pub fn config(&self) -> &[(String, String)] {
        &self.spec.config
    }

    /// A rescale's downtime in this job (ms).
    pub fn downtime_ms(&self) -> u64 {
        self.spec.downtime_ms
    }
}
