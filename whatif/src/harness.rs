//! Lockstep harness: the simulator runs on a manual clock and the agent's collector and
//! control loop run with the same simulated time. Each tick advances both by one poll
//! interval, then polls every job over real HTTP on loopback and runs the loop step, exactly
//! as the daemon's job task does. Deterministic and fast: hours of simulated time take
//! seconds. The what-if command and the convergence tests both drive the agent this way.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use flink_autoscale_agent::collector::{CollectorSettings, JobCollector};
use flink_autoscale_agent::config::{Config, Overrides};
use flink_autoscale_agent::control::{ControlLoop, LoopEvent};
use flink_autoscale_agent::daemon::client_from_config;
use flink_autoscale_agent::flink::FlinkClient;
use flink_autoscale_core::protocol::OutcomeStatus;
use flink_autoscale_simulator::{start, Fault, RunningSim, Scenario, SimControl, SimOptions};
use tokio::sync::broadcast;

/// The agent configuration of the tests: `poll` interval, the JobManager at `jm_url`, plus
/// `extra` TOML (an `[autoscaler]` and a `[control]` section, typically).
pub fn agent_config(jm_url: &str, poll: Duration, extra: &str) -> Config {
    Config::from_layers(
        &agent_text(jm_url, poll, extra),
        &BTreeMap::new(),
        &Overrides::default(),
    )
    .expect("valid agent config")
}

fn agent_text(jm_url: &str, poll: Duration, extra: &str) -> String {
    format!(
        r#"
[jobmanager]
url = "{jm_url}"
request_timeout = "3s"
connect_timeout = "1s"
fetcher_update_interval = "10s"
[collector]
poll_interval = "{poll}s"
poll_deadline = "5s"
names_refresh_interval = "1h"
slow_refresh_interval = "1h"
backoff_initial = "1s"
backoff_max = "1min"
{extra}
"#,
        poll = poll.as_secs()
    )
}

/// `[autoscaler]` with a short metric window and stabilization, so tests converge in little
/// simulated time.
pub const SHORT_WINDOW: &str = "[autoscaler]\nenabled = true\n\"metrics.window\" = \"5min\"\n\"stabilization.interval\" = \"1min\"\n";

/// The simulator on a loopback port with a manual clock.
pub async fn start_manual_sim(scenario: &str) -> RunningSim {
    let scenario = Scenario::from_toml_str(scenario).expect("valid scenario");
    start_manual_scenario(scenario)
        .await
        .expect("simulator starts")
}

/// A parsed scenario on a loopback port with a manual clock.
pub async fn start_manual_scenario(scenario: Scenario) -> std::io::Result<RunningSim> {
    start(
        scenario,
        "127.0.0.1:0".parse().expect("addr"),
        SimOptions {
            manual_clock: true,
            ..Default::default()
        },
    )
    .await
}

/// One sample of what the simulator's model shows, for the test's own accounting.
#[derive(Debug, Clone)]
pub struct Tick {
    pub now_ms: u64,
    pub parallelism: BTreeMap<String, u32>,
    /// Source backlog, summed over sources.
    pub lag: f64,
    /// External input rate, summed over sources.
    pub input_rate: f64,
    pub running: bool,
}

pub struct Harness {
    sim: Option<RunningSim>,
    pub control: SimControl,
    pub client: FlinkClient,
    pub agent: Arc<ControlLoop>,
    pub config: Config,
    collectors: BTreeMap<String, JobCollector>,
    events: broadcast::Receiver<LoopEvent>,
    /// Every loop event so far, in order, with the simulated time of the tick it came in.
    pub log: Vec<(u64, LoopEvent)>,
    pub ticks: Vec<Tick>,
    pub now_ms: u64,
    pub poll: Duration,
    /// Set to false to keep ticking without polling (for example while the JobManager is
    /// down on purpose).
    pub polling: bool,
    /// A JobManager fault that applies between the poll and the loop step of the next tick
    /// only: it hits what the loop itself sends (the actuation), not the poll.
    pub step_fault: Option<Fault>,
    /// When set, only these jobs are polled, stepped and recorded: the what-if judges one
    /// job, and a fleet scenario serves thousands.
    pub only_jobs: Option<std::collections::BTreeSet<String>>,
    settings: Arc<CollectorSettings>,
}

impl Harness {
    /// Starts the simulator with `scenario` on a manual clock and builds the agent from
    /// `extra` (with `{jm}` replaced by the simulator's URL).
    pub async fn start(scenario: &str, poll: Duration, extra: &str) -> Harness {
        let scenario = Scenario::from_toml_str(scenario).expect("valid scenario");
        Self::start_scenario(scenario, poll, extra)
            .await
            .expect("simulator and agent start")
    }

    /// As [`Harness::start`], for a parsed scenario; errors instead of panics.
    pub async fn start_scenario(
        scenario: Scenario,
        poll: Duration,
        extra: &str,
    ) -> anyhow::Result<Harness> {
        let sim = start_manual_scenario(scenario).await?;
        let text = agent_text(&sim.url(), poll, &extra.replace("{jm}", &sim.url()));
        let config = Config::from_layers(&text, &BTreeMap::new(), &Overrides::default())
            .map_err(|e| anyhow::anyhow!("agent settings: {e}"))?;
        let agent =
            Arc::new(ControlLoop::from_config(&config).map_err(|e| anyhow::anyhow!("{e}"))?);
        Ok(Self::with_agent(sim, config, agent, poll))
    }

    pub fn with_agent(
        sim: RunningSim,
        config: Config,
        agent: Arc<ControlLoop>,
        poll: Duration,
    ) -> Harness {
        let control = sim.control();
        let client = client_from_config(&config).expect("client");
        let events = agent.subscribe();
        let now_ms = control.now_ms();
        Harness {
            settings: Arc::new(CollectorSettings::from_config(&config)),
            sim: Some(sim),
            control,
            client,
            agent,
            config,
            collectors: BTreeMap::new(),
            events,
            log: Vec::new(),
            ticks: Vec::new(),
            now_ms,
            poll,
            polling: true,
            step_fault: None,
            only_jobs: None,
        }
    }

    pub fn url(&self) -> String {
        self.sim.as_ref().map(|s| s.url()).unwrap_or_default()
    }

    pub fn job_ids(&self) -> Vec<String> {
        let mut ids = self.control.job_ids();
        if let Some(only) = &self.only_jobs {
            ids.retain(|j| only.contains(j));
        }
        ids
    }

    /// Replaces the agent (an agent restart: same state file, fresh memory and collectors).
    pub fn restart_agent(&mut self, agent: Arc<ControlLoop>) {
        self.events = agent.subscribe();
        self.agent = agent;
        self.collectors.clear();
    }

    /// Advances simulated time by one poll interval, then polls every job and runs the loop.
    pub async fn tick(&mut self) {
        self.control.advance(self.poll);
        self.now_ms = self.control.now_ms();
        if self.polling {
            self.poll_all().await;
        }
        self.drain_events();
        for job in self.job_ids() {
            let model = self.control.model(&job);
            self.ticks.push(Tick {
                now_ms: self.now_ms,
                parallelism: self.control.parallelism(&job),
                lag: model.iter().map(|v| v.lag).sum(),
                input_rate: model.iter().filter_map(|v| v.input_rate).sum(),
                running: self.control.job_status(&job).as_deref() == Some("RUNNING"),
            });
        }
    }

    /// Ticks until `d` of simulated time has passed.
    pub async fn run_for(&mut self, d: Duration) {
        let end = self.now_ms + d.as_millis() as u64;
        while self.now_ms < end {
            self.tick().await;
        }
    }

    async fn poll_all(&mut self) {
        let overview = match self.client.jobs_overview().await {
            Ok((o, _)) => o,
            Err(_) => return,
        };
        for job in overview.jobs {
            if self
                .only_jobs
                .as_ref()
                .is_some_and(|only| !only.contains(&job.jid))
            {
                continue;
            }
            let collector = self
                .collectors
                .entry(job.jid.clone())
                .or_insert_with(|| JobCollector::new(job.jid.clone(), Arc::clone(&self.settings)));
            let polled = tokio::time::timeout(
                Duration::from_secs(10),
                collector.poll(&self.client, &job, self.now_ms),
            )
            .await;
            if let Ok(Ok(report)) = polled {
                let fault = self.step_fault.take();
                let faulted = fault.is_some();
                if faulted {
                    self.control.set_fault(Some(&job.jid), fault);
                }
                let after = self.agent.run_step(collector, &report, self.now_ms).await;
                if after.reset_window {
                    collector.reset_window();
                }
                if faulted {
                    self.control.set_fault(Some(&job.jid), None);
                }
            }
        }
    }

    fn drain_events(&mut self) {
        loop {
            match self.events.try_recv() {
                Ok(e) => self.log.push((self.now_ms, e)),
                Err(broadcast::error::TryRecvError::Lagged(n)) => {
                    panic!("the test lost {n} loop events")
                }
                Err(_) => break,
            }
        }
    }

    /// Outcome events with `status`, with their simulated time.
    pub fn outcomes(&self, status: OutcomeStatus) -> Vec<(u64, &LoopEvent)> {
        self.log
            .iter()
            .filter(|(_, e)| matches!(e, LoopEvent::Outcome { outcome, .. } if outcome.status == status))
            .map(|(t, e)| (*t, e))
            .collect()
    }

    /// Simulated times (ms) of applied rescales.
    pub fn applied_times(&self) -> Vec<u64> {
        self.outcomes(OutcomeStatus::Applied)
            .into_iter()
            .map(|(t, _)| t)
            .collect()
    }

    /// Time-weighted average of the summed parallelism of the job over the ticks after
    /// `from_ms`.
    pub fn average_parallelism(&self, from_ms: u64) -> f64 {
        let ticks: Vec<&Tick> = self.ticks.iter().filter(|t| t.now_ms >= from_ms).collect();
        if ticks.is_empty() {
            return 0.0;
        }
        ticks
            .iter()
            .map(|t| t.parallelism.values().sum::<u32>() as f64)
            .sum::<f64>()
            / ticks.len() as f64
    }

    pub async fn shutdown(mut self) {
        if let Some(sim) = self.sim.take() {
            sim.shutdown().await;
        }
    }
}

/// `[control]` for the tests: the adaptive-scheduler realizer, a state file in `dir`, local
/// gates with no minimum interval (the coordinator's rate limit runs on wall time).
pub fn local_control(dir: &Path) -> String {
    format!(
        r#"
[control]
realizer = "adaptive-scheduler"
state_file = "{}"
region = "test-region"
disk_bytes_per_task_manager = 10737418240
verify_deadline = "10min"
[control.gates]
min_interval = "0s"
"#,
        dir.join("agent-state.json").display()
    )
}
