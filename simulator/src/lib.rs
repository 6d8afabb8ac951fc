//! Simulated Flink JobManager: Flink 2.x's REST API over a dataflow model.
//!
//! A [`Scenario`] (TOML) describes jobs as vertices with per-subtask capacity, selectivity,
//! skew and source input rates. [`start`] serves the REST endpoints an autoscaler uses on a
//! loopback port; [`SimControl`] moves simulated time, changes load, restarts jobs and
//! injects faults. The same actions are exposed over HTTP under `/_sim/...` (see
//! `docs/simulator.md`).
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use flink_autoscale_simulator::{start, Scenario, SimOptions};
//! let scenario = Scenario::from_file("simulator/scenarios/three-vertex.toml".as_ref()).expect("valid scenario");
//! let sim = start(scenario, "127.0.0.1:0".parse().unwrap(), SimOptions { manual_clock: true, ..Default::default() }).await?;
//! let control = sim.control();
//! control.advance(std::time::Duration::from_secs(60));
//! println!("{} serves {:?}", sim.url(), control.job_ids());
//! sim.shutdown().await;
//! # Ok(()) }
//! ```

mod api;
mod catalog;
mod cost;
mod fetcher;
mod format;
mod ids;
mod job;
mod model;
mod naming;
mod poll_gaps;
mod rate;
mod rescales;
mod scenario;
mod server;
mod truth;
mod view;
mod world;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

pub use cost::{fit, CostCounts, CostModel, JobManagerCpu, Observation, Term, CALIBRATED_TERMS};
pub use poll_gaps::{JobReads, PollGapsReport};
pub use rate::RateProfile;
pub use scenario::{Scenario, ScenarioError, ShipStrategy, Staleness};
pub use truth::JobTruth;
pub use world::{EndpointStats, Fault, SimStats};

use server::Shared;
use world::World;

/// How the simulator runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimOptions {
    /// Simulated seconds per wall-clock second (ignored with a manual clock).
    pub speed: f64,
    /// Time moves only through [`SimControl::advance`] (or `POST /_sim/clock/advance`).
    pub manual_clock: bool,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            speed: 1.0,
            manual_clock: false,
        }
    }
}

/// Binds `listen` and serves the scenario until [`RunningSim::shutdown`].
pub async fn start(
    scenario: Scenario,
    listen: SocketAddr,
    opts: SimOptions,
) -> std::io::Result<RunningSim> {
    let listener = tokio::net::TcpListener::bind(listen).await?;
    let addr = listener.local_addr()?;
    let shared = Arc::new(Shared::new(World::new(
        scenario,
        opts.speed,
        opts.manual_clock,
    )));
    let (tx, rx) = watch::channel(false);
    let task = tokio::spawn(server::serve(listener, shared.clone(), rx));
    tracing::info!(%addr, "simulated JobManager serving");
    Ok(RunningSim {
        addr,
        control: SimControl { shared },
        shutdown: tx,
        task,
    })
}

/// A running simulator. Dropping it without [`RunningSim::shutdown`] leaves the server task
/// running until the runtime stops.
pub struct RunningSim {
    addr: SocketAddr,
    control: SimControl,
    shutdown: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl RunningSim {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Base URL, e.g. `http://127.0.0.1:8081`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn control(&self) -> SimControl {
        self.control.clone()
    }

    /// Stops accepting, lets open requests finish (at most a few seconds), and returns.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        if let Err(e) = self.task.await {
            tracing::warn!(error = %e, "simulator server task ended abnormally");
        }
    }
}

/// The model's view of one vertex right now, without any staleness.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct VertexModel {
    pub id: String,
    pub name: String,
    pub parallelism: u32,
    pub max_parallelism: u32,
    /// For sources: records per second arriving in the external system (the load).
    pub input_rate: Option<f64>,
    /// Records per second into the vertex (for sources: read from outside).
    pub in_rate: f64,
    pub out_rate: f64,
    /// Highest busy time (ms/s) over its subtasks.
    pub max_busy: f64,
    pub backpressured: bool,
    /// Source backlog in records (0 for other vertices).
    pub lag: f64,
}

/// A cheap, cloneable handle to drive a running simulator.
///
/// Every method is synchronous: it takes a short lock on the simulated world, so it is fine
/// to call from async code. Unknown job ids are ignored by setters and give empty results.
#[derive(Clone)]
pub struct SimControl {
    shared: Arc<Shared>,
}

impl SimControl {
    /// Job ids (32 hex characters, derived from the scenario's job names).
    pub fn job_ids(&self) -> Vec<String> {
        self.shared
            .world()
            .jobs
            .iter()
            .map(|j| j.id().to_string())
            .collect()
    }

    /// Vertex ids of `job` in topological order.
    pub fn vertex_ids(&self, job: &str) -> Vec<String> {
        let world = self.shared.world();
        world
            .job_index(job)
            .map(|j| {
                world.jobs[j]
                    .spec
                    .vertices
                    .iter()
                    .map(|v| v.id.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Moves simulated time forward (with any clock) and integrates the model.
    pub fn advance(&self, d: Duration) {
        self.shared.world().advance(d);
    }

    /// Simulated time in epoch milliseconds.
    pub fn now_ms(&self) -> u64 {
        self.shared.world().sync()
    }

    /// Scales every source's input rate of `job` (1.0 = the scenario's profile).
    pub fn set_rate_multiplier(&self, job: &str, m: f64) {
        let mut world = self.shared.world();
        world.sync();
        if let Some(j) = world.job_index(job) {
            world.jobs[j].set_rate_multiplier(m);
        }
    }

    /// A failover restart: tasks go down for the scenario's downtime, counters reset.
    pub fn restart_job(&self, job: &str) {
        let mut world = self.shared.world();
        world.sync();
        if let Some(j) = world.job_index(job) {
            world.jobs[j].restart();
        }
    }

    /// Injects a fault into Flink-path responses for `job` (`None` = every request);
    /// `fault: None` removes it.
    pub fn set_fault(&self, job: Option<&str>, fault: Option<Fault>) {
        let mut world = self.shared.world();
        match (job, fault) {
            (None, f) => world.global_fault = f,
            (Some(j), Some(f)) => {
                world.job_faults.insert(j.to_ascii_lowercase(), f);
            }
            (Some(j), None) => {
                world.job_faults.remove(&j.to_ascii_lowercase());
            }
        }
    }

    /// Current parallelism per vertex id.
    pub fn parallelism(&self, job: &str) -> BTreeMap<String, u32> {
        let mut world = self.shared.world();
        world.sync();
        world
            .job_index(job)
            .map(|j| {
                let job = &world.jobs[j];
                job.spec
                    .vertices
                    .iter()
                    .zip(job.parallelism())
                    .map(|(v, p)| (v.id.clone(), p))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Job status as Flink reports it (`RUNNING`, `RESTARTING`, `FINISHED`).
    pub fn job_status(&self, job: &str) -> Option<String> {
        let mut world = self.shared.world();
        world.sync();
        world
            .job_index(job)
            .map(|j| world.jobs[j].phase.job_status().to_string())
    }

    /// The model's current per-vertex values (true rates, busy, lag), ignoring staleness.
    pub fn model(&self, job: &str) -> Vec<VertexModel> {
        let mut world = self.shared.world();
        world.sync();
        match world.job_index(job) {
            Some(j) => world.jobs[j].vertex_models(),
            None => Vec::new(),
        }
    }

    /// Per-endpoint accounting (same as `GET /_sim/stats`).
    pub fn stats(&self) -> SimStats {
        self.shared.world().stats.clone()
    }

    /// Resets the accounting and the record of reads (same as `DELETE /_sim/stats`).
    pub fn reset_stats(&self) {
        self.shared.world().reset_stats();
    }

    /// When each job's metric values were read since the last reset (same as
    /// `GET /_sim/polls`).
    pub fn poll_gaps(&self) -> PollGapsReport {
        self.shared.world().polls.report()
    }

    /// Forgets `job`: it leaves `/jobs/overview` and its endpoints answer as for an unknown
    /// job (same as `DELETE /_sim/jobs/:jid`). False if it was not known.
    pub fn remove_job(&self, job: &str) -> bool {
        self.shared.world().remove_job(&job.to_ascii_lowercase())
    }
}
