//! `bench-jm-scale`: what polling a real Flink job of 1,000+ subtasks costs the JobManager,
//! for each poller alone at its own default cadence: nobody (the baseline), the
//! operator-like collector (`reference_collectors::OperatorLike`, every 60 s: the Flink
//! Kubernetes Operator's `kubernetes.operator.reconcile.interval` default, which drives its
//! autoscaler's metric collection), the real agent daemon (`flink-autoscale-agent run`) at
//! its default poll interval, and a refresh-only poller (one
//! `GET /jobmanager/metrics?get=taskSlotsTotal` per poll: the MetricFetcher refresh any
//! metric request starts, and nearly nothing else). `--cadences` adds the agent at other
//! poll intervals.
//!
//! The cluster: one JobManager, several TaskManagers, the wide job (`WideJob.java`: 8
//! vertices × 128 subtasks by default, FORWARD, REBALANCE and HASH edges, a few hundred
//! records per second), so the JobManager's metric work dominates. Its MetricFetcher logs
//! each refresh, which gives refreshes per minute.
//!
//! One run, interleaved rounds. A round has CPU phases (each poller alone; the order rotates
//! between rounds) and latency phases (none, operator, agent, each with a prober sending the
//! web UI's `GET /jobs/:jid` every `--probe-interval-ms`; that request also starts refreshes,
//! so it runs only in its own phases). A poller's phase starts half an interval after one of
//! its steady-state polls and lasts whole intervals, so it holds a known number of polls.
//! Net JobManager CPU = the phase's minus the round's idle rate over the phase's length,
//! reported per minute for the whole JVM, the REST threads (handlers, which also fold the
//! fetched dumps into the MetricStore, and Netty workers) and the metrics RPC threads (which
//! receive the dumps). Everything started is stopped at the end, also on error.
//!
//! `cargo run --release -p flink-autoscale-tests --bin bench-jm-scale -- [--json]`

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use clap::Parser;
use flink_autoscale_agent::flink::{ClientOptions, Endpoint, FlinkClient};
use flink_autoscale_tests::flink_harness::{
    aggregated, job_status, metric_sum, single, AgentDaemon, ClusterSettings, FlinkCluster,
    FlinkRest, VertexStatus, WideJob, WideJobSpec,
};
use flink_autoscale_tests::jm_usage::{epoch_ms, load_average, UsageDelta, UsageSnapshot};
use flink_autoscale_tests::reference_collectors::OperatorLike;
use serde::Serialize;

const JOB_START_TIMEOUT: Duration = Duration::from_secs(900);
const METRICS_FLOW_TIMEOUT: Duration = Duration::from_secs(300);
const FIRST_POLL_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Parser)]
#[command(about = "JobManager cost of each poller alone on a real Flink job of 1,000+ subtasks")]
struct Args {
    /// Print a single JSON object as the last line.
    #[arg(long)]
    json: bool,
    /// Parallelism of every vertex of the wide job.
    #[arg(long, default_value_t = 128)]
    parallelism: u32,
    /// Job vertices (the source, `vertices - 2` stages, the sink).
    #[arg(long, default_value_t = 8)]
    vertices: u32,
    /// The job's max parallelism (above the parallelism, so a scale-up is possible).
    #[arg(long, default_value_t = 256)]
    max_parallelism: u32,
    #[arg(long, default_value_t = 4)]
    task_managers: usize,
    /// `taskmanager.memory.process.size` of each TaskManager.
    #[arg(long, default_value = "1536m")]
    taskmanager_memory: String,
    /// Network memory of each TaskManager (min = max); with 8 KiB buffers.
    #[arg(long, default_value = "256m")]
    network_memory: String,
    #[arg(long, default_value = "1536m")]
    jobmanager_memory: String,
    /// Records per second over all source subtasks.
    #[arg(long, default_value_t = 256.0)]
    rate: f64,
    /// Wait per record in stage-1 (µs): busy time without CPU.
    #[arg(long, default_value_t = 100_000)]
    sleep_micros: u64,
    /// Checkpoint interval of the job (0: none, which keeps the JobManager's baseline quiet).
    #[arg(long, default_value_t = 0)]
    checkpoint_ms: u64,
    /// Rounds of every phase.
    #[arg(long, default_value_t = 2)]
    rounds: u32,
    /// Length of every CPU phase (whole poll intervals of the poller are measured within it).
    #[arg(long, default_value_t = 360)]
    phase_seconds: u64,
    /// Length of every latency phase.
    #[arg(long, default_value_t = 360)]
    latency_phase_seconds: u64,
    /// Leave out the latency phases.
    #[arg(long)]
    no_latency: bool,
    /// Leave out the refresh-only poller.
    #[arg(long)]
    no_refresh: bool,
    /// The web UI's request, `GET /jobs/:jid`, every this many ms in the latency phases.
    #[arg(long, default_value_t = 500)]
    probe_interval_ms: u64,
    /// The operator-like collector's poll interval: the Flink Kubernetes Operator's
    /// `kubernetes.operator.reconcile.interval` default.
    #[arg(long, default_value_t = 60)]
    operator_interval_seconds: u64,
    /// The agent's poll interval in its default phases (default: the agent's own default,
    /// as a user who sets nothing gets).
    #[arg(long)]
    agent_interval_seconds: Option<u64>,
    /// More CPU phases of the agent, at these poll intervals (seconds).
    #[arg(long, value_delimiter = ',')]
    cadences: Vec<u64>,
    /// Also measure the agent reading every subtask on every poll (no slices) at its default
    /// interval.
    #[arg(long)]
    agent_whole: bool,
    /// Unmeasured polling by the operator-like collector and the agent before the first
    /// round (the JobManager's JIT compiles the handlers meanwhile).
    #[arg(long, default_value_t = 300)]
    warmup_seconds: u64,
    /// The agent binary (default: the one beside this binary; build it with
    /// `cargo build --release -p flink-autoscale-agent`).
    #[arg(long)]
    agent_bin: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Kind {
    None,
    Refresh,
    Operator,
    Agent,
    /// The agent with slicing off (every subtask on every poll).
    AgentWhole,
}

/// A poller and its interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Poller {
    kind: Kind,
    /// `None`: the agent's own default (no setting given).
    interval: Option<Duration>,
}

impl Poller {
    fn label(&self) -> String {
        let name = match self.kind {
            Kind::None => return "none".to_owned(),
            Kind::Refresh => "refresh",
            Kind::Operator => "operator",
            Kind::Agent => "agent",
            Kind::AgentWhole => "agent-whole",
        };
        match self.interval {
            Some(i) => format!("{name}@{}s", i.as_secs()),
            None => format!("{name}@default"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Mode {
    Cpu,
    Latency,
}

#[derive(Debug, Clone, Serialize)]
struct Probe {
    count: usize,
    errors: usize,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
}

#[derive(Debug, Clone, Serialize)]
struct Phase {
    round: u32,
    poller: String,
    kind: Kind,
    mode: Mode,
    interval_seconds: f64,
    usage: UsageDelta,
    jm_rest_threads_s: f64,
    jm_metrics_rpc_threads_s: f64,
    polls: u64,
    requests: u64,
    response_bytes: u64,
    /// MetricFetcher refreshes the JobManager started during the phase.
    refreshes: u64,
    /// Errors the poller reported (agent: `errors_total`).
    poller_errors: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    probe: Option<Probe>,
    /// Every probe latency (ms), for pooled percentiles.
    #[serde(skip)]
    probe_samples: Vec<f64>,
}

/// One poller's CPU phases, net of the same round's idle rate.
#[derive(Debug, Clone, Serialize)]
struct Summary {
    poller: String,
    rounds: usize,
    polls_per_minute: f64,
    refreshes_per_minute: f64,
    requests_per_poll: f64,
    response_bytes_per_poll: f64,
    /// Net JobManager CPU seconds per minute: mean, min and max over rounds.
    jvm_s_per_min: [f64; 3],
    rest_threads_s_per_min: [f64; 3],
    metrics_rpc_threads_s_per_min: [f64; 3],
    /// Net whole-JVM CPU per poll (ms), over all rounds.
    jvm_ms_per_poll: f64,
    rest_threads_ms_per_poll: f64,
    tm_s_per_min: f64,
}

#[derive(Debug, Clone, Serialize)]
struct Latency {
    poller: String,
    count: usize,
    p50_ms: f64,
    p99_ms: f64,
    /// p99 of each round.
    p99_ms_per_round: Vec<f64>,
    refreshes_per_minute: f64,
}

#[derive(Debug, Serialize)]
struct Report {
    flink_version: String,
    task_managers: usize,
    slots_per_task_manager: u32,
    parallelism: u32,
    vertices: usize,
    subtasks: u64,
    rate: f64,
    agent_default_interval_seconds: f64,
    operator_interval_seconds: u64,
    load_average_at_start: String,
    load_average_at_end: String,
    job_restarts: f64,
    phases: Vec<Phase>,
    summaries: Vec<Summary>,
    latencies: Vec<Latency>,
    /// Agent (default) / operator-like, net JobManager CPU per minute, whole JVM and REST
    /// threads, over all rounds.
    agent_over_operator_jvm: Option<f64>,
    agent_over_operator_rest_threads: Option<f64>,
    /// Per round, whole JVM.
    agent_over_operator_jvm_per_round: Vec<Option<f64>>,
    /// One MetricFetcher refresh: the refresh-only poller's net cost per refresh (ms).
    refresh_jvm_ms: Option<f64>,
    refresh_rest_threads_ms: Option<f64>,
    refresh_metrics_rpc_threads_ms: Option<f64>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    if args.vertices < 4 {
        bail!("--vertices must be at least 4");
    }
    if args.max_parallelism < args.parallelism {
        bail!("--max-parallelism must be at least --parallelism");
    }
    if args.operator_interval_seconds < 11 || args.cadences.iter().any(|c| *c < 11) {
        bail!("poll intervals must be at least 11 s (above the 10 s MetricFetcher interval)");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let report = runtime.block_on(run(&args))?;
    print_report(&report);
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    }
    Ok(())
}

/// The pollers of the CPU phases, in the first round's order.
fn cpu_pollers(args: &Args) -> Vec<Poller> {
    let operator = Some(Duration::from_secs(args.operator_interval_seconds));
    let agent = args.agent_interval_seconds.map(Duration::from_secs);
    let mut pollers = vec![
        Poller {
            kind: Kind::Operator,
            interval: operator,
        },
        Poller {
            kind: Kind::Agent,
            interval: agent,
        },
    ];
    if !args.no_refresh {
        pollers.push(Poller {
            kind: Kind::Refresh,
            interval: operator,
        });
    }
    if args.agent_whole {
        pollers.push(Poller {
            kind: Kind::AgentWhole,
            interval: agent,
        });
    }
    for &c in &args.cadences {
        let poller = Poller {
            kind: Kind::Agent,
            interval: Some(Duration::from_secs(c)),
        };
        if !pollers.contains(&poller) {
            pollers.push(poller);
        }
    }
    pollers
}

async fn run(args: &Args) -> Result<Report> {
    let tms = args.task_managers.max(1);
    let slots = args.parallelism.div_ceil(tms as u32);
    let spec = WideJobSpec {
        name: "bench-jm-scale".to_owned(),
        rate: args.rate,
        sleep_micros: args.sleep_micros,
        vertices: args.vertices,
        parallelism: args.parallelism,
        max_parallelism: args.max_parallelism,
        checkpoint_interval_ms: args.checkpoint_ms,
    };
    let cpu = cpu_pollers(args);
    let latency_kinds = if args.no_latency { 0 } else { 3 };
    let per_round = cpu.len() as u64 * (args.phase_seconds + 180)
        + args.phase_seconds
        + latency_kinds * (args.latency_phase_seconds + 180);
    let lifetime =
        Duration::from_secs(1800 + 3 * args.warmup_seconds + u64::from(args.rounds) * per_round);
    let settings = ClusterSettings {
        task_managers: tms,
        slots_per_task_manager: slots,
        jobmanager_memory: args.jobmanager_memory.clone(),
        taskmanager_memory: args.taskmanager_memory.clone(),
        extra: large_job_settings(&args.network_memory),
        log_metric_fetches: true,
        max_lifetime: lifetime,
        startup_timeout: Duration::from_secs(300),
        ..ClusterSettings::default()
    };
    let load_at_start = load_average();
    eprintln!(
        "starting Flink: {tms} TaskManagers x {slots} slots, wide job {} vertices x {}: {} subtasks; load average {load_at_start}",
        args.vertices,
        args.parallelism,
        spec.subtasks()
    );
    let agent_bin = match &args.agent_bin {
        Some(path) => path.clone(),
        None => flink_autoscale_testkit::binary("flink-autoscale-agent")?,
    };
    let mut cluster = FlinkCluster::start(settings).await?;
    // From here on the cluster is owned: an error returns through Drop, which stops it.
    let job = cluster.submit_wide_job(&spec, JOB_START_TIMEOUT).await?;
    let (_, vertices) = job_status(&cluster.rest().get(&format!("/jobs/{}", job.job_id)).await?);
    let subtasks: u64 = vertices.iter().map(|v| v.parallelism).sum();
    eprintln!(
        "job {} RUNNING: {subtasks} subtasks over {} vertices",
        job.job_id,
        vertices.len()
    );
    wait_for_metrics(&mut cluster, &job, &vertices).await?;
    let restarts_before = job_restarts(&cluster, &job.job_id).await?;
    let agent_default = agent_default_interval()?;

    let mut bench = Bench {
        cluster: &mut cluster,
        job: &job,
        agent_bin: &agent_bin,
        agent_default,
        probe_every: Duration::from_millis(args.probe_interval_ms.max(1)),
    };
    if args.warmup_seconds > 0 {
        eprintln!("warm-up: {} s of each collector", args.warmup_seconds);
        let warm = Duration::from_secs(args.warmup_seconds);
        for poller in cpu.iter().take(2) {
            bench.phase(0, *poller, Mode::Cpu, warm).await?;
        }
    }
    let phase = Duration::from_secs(args.phase_seconds);
    let latency_phase = Duration::from_secs(args.latency_phase_seconds);
    let mut measured = Vec::new();
    for round in 1..=args.rounds {
        let mut order = cpu.clone();
        let n = order.len();
        order.rotate_left((round as usize - 1) % n);
        let mut steps: Vec<(Poller, Mode, Duration)> = vec![(
            Poller {
                kind: Kind::None,
                interval: None,
            },
            Mode::Cpu,
            phase,
        )];
        steps.extend(order.into_iter().map(|p| (p, Mode::Cpu, phase)));
        if !args.no_latency {
            let mut probed = vec![
                Poller {
                    kind: Kind::None,
                    interval: None,
                },
                cpu[0],
                cpu[1],
            ];
            probed.rotate_left((round as usize - 1) % 3);
            steps.extend(
                probed
                    .into_iter()
                    .map(|p| (p, Mode::Latency, latency_phase)),
            );
        }
        for (poller, mode, length) in steps {
            let p = bench.phase(round, poller, mode, length).await?;
            print_phase_line(&p);
            measured.push(p);
        }
    }
    let restarts_after = job_restarts(bench.cluster, &job.job_id).await?;
    let (state, _) = job_status(&cluster.rest().get(&format!("/jobs/{}", job.job_id)).await?);
    if state != "RUNNING" {
        bail!("the job ended the run in state {state}");
    }
    let installation = cluster.installation().clone();
    cluster.stop();
    Ok(summarize(
        args,
        &installation.flink_version,
        (tms, slots),
        vertices.len(),
        subtasks,
        agent_default,
        load_at_start,
        restarts_after - restarts_before,
        measured,
    ))
}

/// Cluster settings a job of 1,000+ subtasks needs on this machine: network buffers for
/// its all-to-all channels (8 KiB segments, so 256 MiB holds 32,768), no managed memory
/// (heap state), RPC timeouts that survive deploying 1,000 tasks on 2 shared cores, a
/// restart strategy for the same reason, and a 1 s output flush (the 100 ms default wakes
/// one thread per task ten times a second, which alone cost ~30 % of a core here).
fn large_job_settings(network_memory: &str) -> Vec<(String, String)> {
    [
        ("taskmanager.memory.network.min", network_memory),
        ("taskmanager.memory.network.max", network_memory),
        ("taskmanager.memory.segment-size", "8kb"),
        ("taskmanager.memory.managed.size", "0m"),
        ("pekko.ask.timeout", "60s"),
        // The JobManager's actor system failed its 10 s default start on a loaded machine.
        ("pekko.startup-timeout", "120s"),
        ("heartbeat.timeout", "120000"),
        ("restart-strategy.type", "fixed-delay"),
        ("restart-strategy.fixed-delay.attempts", "20"),
        ("restart-strategy.fixed-delay.delay", "10s"),
        ("execution.buffer-timeout.interval", "1s"),
        ("execution.buffer-timeout", "1s"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// The agent's default `collector.poll_interval`, as a user who sets nothing gets it.
fn agent_default_interval() -> Result<Duration> {
    let config = flink_autoscale_agent::config::Config::from_layers(
        "",
        &Default::default(),
        &Default::default(),
    )
    .map_err(|e| anyhow!("{e}"))?;
    Ok(config.collector.poll_interval.0)
}

/// Waits until every vertex reports busy time and the source's output rate is above zero.
async fn wait_for_metrics(
    cluster: &mut FlinkCluster,
    job: &WideJob,
    vertices: &[VertexStatus],
) -> Result<()> {
    let jid = &job.job_id;
    for v in vertices {
        cluster
            .poll_until(
                &format!(
                    "/jobs/{jid}/vertices/{}/subtasks/metrics?get=busyTimeMsPerSecond&agg=max",
                    v.id
                ),
                METRICS_FLOW_TIMEOUT,
                |answer| aggregated(answer, "busyTimeMsPerSecond", "max").is_some(),
            )
            .await?;
    }
    eprintln!("metrics flow");
    Ok(())
}

async fn job_restarts(cluster: &FlinkCluster, jid: &str) -> Result<f64> {
    let answer = cluster
        .rest()
        .get(&format!("/jobs/{jid}/metrics?get=numRestarts"))
        .await?;
    single(&answer, "numRestarts").ok_or_else(|| anyhow!("no numRestarts in {answer}"))
}

struct Bench<'a> {
    cluster: &'a mut FlinkCluster,
    job: &'a WideJob,
    agent_bin: &'a Path,
    agent_default: Duration,
    probe_every: Duration,
}

/// Requests, bytes, polls and errors a poller reported so far.
#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    polls: u64,
    requests: u64,
    response_bytes: u64,
    errors: u64,
}

impl Bench<'_> {
    /// One phase of `poller`, about `length` long (whole intervals of the poller).
    async fn phase(
        &mut self,
        round: u32,
        poller: Poller,
        mode: Mode,
        length: Duration,
    ) -> Result<Phase> {
        match poller.kind {
            Kind::None => {
                let interval = Duration::ZERO;
                self.measured(round, poller, mode, interval, length, |_| async {
                    Ok(Counts::default())
                })
                .await
            }
            Kind::Refresh | Kind::Operator => self.in_process(round, poller, mode, length).await,
            Kind::Agent | Kind::AgentWhole => self.agent(round, poller, mode, length).await,
        }
    }

    /// Snapshots around `length` (with the prober in latency mode); `counts(at_end)` reads
    /// the poller's own counts at the start (false) and the end (true).
    async fn measured<F, Fut>(
        &mut self,
        round: u32,
        poller: Poller,
        mode: Mode,
        interval: Duration,
        length: Duration,
        counts: F,
    ) -> Result<Phase>
    where
        F: Fn(bool) -> Fut,
        Fut: std::future::Future<Output = Result<Counts>>,
    {
        let before = counts(false).await?;
        let fetches_before = self.cluster.metric_fetches().len();
        let start = UsageSnapshot::take(self.cluster)?;
        let samples = match mode {
            Mode::Cpu => {
                tokio::time::sleep(length).await;
                Vec::new()
            }
            Mode::Latency => {
                probe_job(
                    self.cluster.rest_url(),
                    &self.job.job_id,
                    self.probe_every,
                    length,
                )
                .await
            }
        };
        let end = UsageSnapshot::take(self.cluster)?;
        let refreshes = (self.cluster.metric_fetches().len() - fetches_before) as u64;
        let after = counts(true).await?;
        let usage = UsageDelta::between(&start, &end);
        let ok: Vec<f64> = samples.iter().filter_map(|s| *s).collect();
        let probe = (mode == Mode::Latency).then(|| Probe {
            count: ok.len(),
            errors: samples.len() - ok.len(),
            p50_ms: percentile(&ok, 0.50),
            p99_ms: percentile(&ok, 0.99),
            max_ms: percentile(&ok, 1.0),
        });
        Ok(Phase {
            round,
            poller: poller.label(),
            kind: poller.kind,
            mode,
            interval_seconds: interval.as_secs_f64(),
            jm_rest_threads_s: usage.rest_threads_s(),
            jm_metrics_rpc_threads_s: usage.metrics_rpc_threads_s(),
            usage,
            polls: after.polls - before.polls,
            requests: after.requests - before.requests,
            response_bytes: after.response_bytes - before.response_bytes,
            refreshes,
            poller_errors: after.errors - before.errors,
            probe,
            probe_samples: ok,
        })
    }

    /// The operator-like collector or the refresh-only poller in this process, fixed-rate
    /// like the operator's control loop.
    async fn in_process(
        &mut self,
        round: u32,
        poller: Poller,
        mode: Mode,
        length: Duration,
    ) -> Result<Phase> {
        let interval = poller
            .interval
            .context("an in-process poller needs an interval")?;
        let client = FlinkClient::new(ClientOptions {
            base_url: self.cluster.rest_url().to_owned(),
            request_timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(5),
            max_body_bytes: 256 << 20,
            max_concurrent_requests: 1,
            tls: None,
            has_client_cert: false,
        })?;
        let mut collector = InProcess::new(poller.kind, &self.job.job_id);
        let what = poller.label();
        // The operator's first poll lists every vertex; Flink may answer a listing with `[]`.
        let waited = Instant::now();
        loop {
            match collector.poll(&client).await {
                Ok(()) => break,
                Err(e) if waited.elapsed() < FIRST_POLL_TIMEOUT => {
                    eprintln!("{what} first poll: {e:#}; retrying");
                    tokio::time::sleep(Duration::from_secs(2)).await;
                }
                Err(e) => return Err(e).context(format!("{what} first poll")),
            }
        }
        let first = tokio::time::Instant::now();
        tokio::time::sleep_until(first + interval / 2).await;
        let polls = whole_intervals(length, interval);
        let (stats_tx, stats_rx) = tokio::sync::watch::channel(Counts::default());
        let poll_client = client.clone();
        let poll_what = what.clone();
        let task = tokio::spawn(async move {
            let mut next = first + interval;
            let mut counts = Counts::default();
            loop {
                tokio::time::sleep_until(next).await;
                match collector.poll(&poll_client).await {
                    Ok(()) => counts.polls += 1,
                    Err(e) => {
                        eprintln!("{poll_what} poll failed: {e:#}");
                        counts.errors += 1;
                    }
                }
                let _ = stats_tx.send(counts);
                next += interval;
            }
        });
        let result = self
            .measured(round, poller, mode, interval, interval * polls, |_| {
                let stats = client.stats();
                let counts = *stats_rx.borrow();
                async move {
                    Ok(Counts {
                        requests: stats.requests,
                        response_bytes: stats.response_bytes,
                        ..counts
                    })
                }
            })
            .await;
        task.abort();
        result
    }

    /// The real agent daemon (`run`), configured as a user who sets only the JobManager's
    /// address (and the poll interval, for the cadence phases).
    async fn agent(
        &mut self,
        round: u32,
        poller: Poller,
        mode: Mode,
        length: Duration,
    ) -> Result<Phase> {
        let interval = poller.interval.unwrap_or(self.agent_default);
        let mut toml = format!(
            "[jobmanager]\nurl = \"{}\"\n[server]\nlisten = \"127.0.0.1:0\"\n[log]\nformat = \"json\"\n",
            self.cluster.rest_url()
        );
        if poller.interval.is_some() || poller.kind == Kind::AgentWhole {
            toml += &format!("[collector]\npoll_interval = \"{}s\"\n", interval.as_secs());
            if poller.kind == Kind::AgentWhole {
                toml += "slice_above_subtasks = 1000000000\n";
            }
        }
        let config = self.cluster.run_dir().join(format!(
            "agent-{}-{round}-{}.toml",
            poller.label(),
            epoch_ms()
        ));
        std::fs::write(&config, toml)?;
        let agent = AgentDaemon::start(self.cluster, self.agent_bin, &config).await?;
        // The first poll lists names; measure from half an interval after a later one.
        let waited = Instant::now();
        let last_poll_ms = loop {
            let text = agent.metrics().await?;
            let polls = metric_sum(
                &text,
                "flink_autoscale_agent_poll_duration_seconds_count",
                &[],
            );
            if polls >= 2.0 {
                break last_successful_poll_ms(&text);
            }
            if waited.elapsed() > 2 * interval + FIRST_POLL_TIMEOUT {
                bail!(
                    "the agent polled {polls} times in {:?}:\n{}",
                    waited.elapsed(),
                    agent.log_tail(40)
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let mut start_ms = last_poll_ms + interval.as_millis() as u64 / 2;
        while start_ms < epoch_ms() {
            start_ms += interval.as_millis() as u64;
        }
        tokio::time::sleep(Duration::from_millis(start_ms - epoch_ms())).await;
        let polls = whole_intervals(length, interval);
        let daemon = &agent;
        let result = self
            .measured(
                round,
                poller,
                mode,
                interval,
                interval * polls,
                move |_| async move {
                    let text = daemon.metrics().await?;
                    let sum = |name: &str| metric_sum(&text, name, &[]) as u64;
                    Ok(Counts {
                        polls: sum("flink_autoscale_agent_poll_duration_seconds_count"),
                        requests: sum("flink_autoscale_agent_jobmanager_requests_total"),
                        response_bytes: sum(
                            "flink_autoscale_agent_jobmanager_response_bytes_total",
                        ),
                        errors: sum("flink_autoscale_agent_errors_total"),
                    })
                },
            )
            .await;
        drop(agent);
        result
    }
}

/// How many whole `interval`s fit in `length` (at least one).
fn whole_intervals(length: Duration, interval: Duration) -> u32 {
    ((length.as_secs_f64() / interval.as_secs_f64()).floor() as u32).max(1)
}

/// The newest `last_successful_poll_timestamp_seconds` of any job, in epoch ms.
fn last_successful_poll_ms(metrics: &str) -> u64 {
    let seconds = metrics
        .lines()
        .filter(|l| l.starts_with("flink_autoscale_agent_last_successful_poll_timestamp_seconds"))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .fold(0.0, f64::max);
    (seconds * 1000.0) as u64
}

/// A poller that runs in this process.
enum InProcess {
    Operator(Box<OperatorLike>),
    /// `GET /jobmanager/metrics?get=taskSlotsTotal`: like every metric request it makes the
    /// JobManager refresh its MetricStore from every TaskManager when the last refresh is
    /// older than `metrics.fetcher.update-interval`; the answer itself is one number.
    Refresh,
}

impl InProcess {
    fn new(kind: Kind, job: &str) -> Self {
        match kind {
            Kind::Operator => InProcess::Operator(Box::new(OperatorLike::new(job))),
            _ => InProcess::Refresh,
        }
    }

    async fn poll(&mut self, client: &FlinkClient) -> Result<()> {
        match self {
            InProcess::Operator(collector) => Ok(collector.poll(client).await?),
            InProcess::Refresh => {
                client
                    .get(
                        Endpoint::JobManagerConfig,
                        "/jobmanager/metrics?get=taskSlotsTotal",
                    )
                    .await?;
                Ok(())
            }
        }
    }
}

/// `GET /jobs/:jid` every `every` for `length` (fixed rate; a slow answer delays the next
/// one); the latency of each in ms, `None` for a failed one.
async fn probe_job(
    base_url: &str,
    jid: &str,
    every: Duration,
    length: Duration,
) -> Vec<Option<f64>> {
    let rest = FlinkRest::new(base_url);
    let path = format!("/jobs/{jid}");
    let end = tokio::time::Instant::now() + length;
    let mut next = tokio::time::Instant::now();
    let mut samples = Vec::new();
    while next < end {
        tokio::time::sleep_until(next).await;
        let t0 = Instant::now();
        let answer = rest
            .send_raw(hyper::Method::GET, &path, None, Bytes::new())
            .await;
        let ms = t0.elapsed().as_secs_f64() * 1000.0;
        samples.push(match answer {
            Ok((status, _)) if status.is_success() => Some(ms),
            _ => None,
        });
        next += every;
        let now = tokio::time::Instant::now();
        if next < now {
            next = now;
        }
    }
    samples
}

/// The `q` quantile (nearest rank) of `values`; 0 when empty.
fn percentile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn print_phase_line(p: &Phase) {
    let probe = p.probe.as_ref().map_or(String::new(), |x| {
        format!(
            "  probe p50 {:.1} ms p99 {:.1} ms ({} ok, {} failed)",
            x.p50_ms, x.p99_ms, x.count, x.errors
        )
    });
    eprintln!(
        "round {} {:<7} {:<18} {:>6.1} s  JM CPU {:>6.2} s (REST {:.2}, metrics RPC {:.2})  TM {:>6.1} s  polls {:>3}  requests {:>4}  bytes {:>8}  refreshes {:>3}  errors {}{probe}",
        p.round,
        format!("{:?}", p.mode).to_lowercase(),
        p.poller,
        p.usage.seconds,
        p.usage.jm_cpu_s,
        p.jm_rest_threads_s,
        p.jm_metrics_rpc_threads_s,
        p.usage.tm_cpu_s,
        p.polls,
        p.requests,
        p.response_bytes,
        p.refreshes,
        p.poller_errors,
    );
    let mut busiest: Vec<(&String, &f64)> = p.usage.jm_threads.iter().collect();
    busiest.sort_by(|a, b| b.1.total_cmp(a.1));
    let top: Vec<String> = busiest
        .iter()
        .take(6)
        .map(|(g, cpu)| format!("{g} {cpu:.2}"))
        .collect();
    eprintln!("    JM threads: {}", top.join(", "));
}

/// Net CPU of one phase: (whole JVM, REST threads, metrics RPC threads, TaskManagers), in
/// seconds, minus the round's idle rate over the phase's length.
fn net_of_idle(p: &Phase, idle: &Phase) -> [f64; 4] {
    let rate = |x: f64| x / idle.usage.seconds * p.usage.seconds;
    [
        p.usage.jm_cpu_s - rate(idle.usage.jm_cpu_s),
        p.jm_rest_threads_s - rate(idle.jm_rest_threads_s),
        p.jm_metrics_rpc_threads_s - rate(idle.jm_metrics_rpc_threads_s),
        p.usage.tm_cpu_s - rate(idle.usage.tm_cpu_s),
    ]
}

fn mean_min_max(values: &[f64]) -> [f64; 3] {
    if values.is_empty() {
        return [0.0; 3];
    }
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    [mean, min, max]
}

#[allow(clippy::too_many_arguments)]
fn summarize(
    args: &Args,
    flink_version: &str,
    (task_managers, slots): (usize, u32),
    vertices: usize,
    subtasks: u64,
    agent_default: Duration,
    load_at_start: String,
    job_restarts: f64,
    phases: Vec<Phase>,
) -> Report {
    let idle_of = |round: u32| {
        phases
            .iter()
            .find(|p| p.round == round && p.kind == Kind::None && p.mode == Mode::Cpu)
    };
    // Per poller label: per-round nets and totals.
    let mut by_poller: BTreeMap<String, Vec<(&Phase, [f64; 4])>> = BTreeMap::new();
    for p in phases
        .iter()
        .filter(|p| p.mode == Mode::Cpu && p.kind != Kind::None && p.round > 0)
    {
        if let Some(idle) = idle_of(p.round) {
            by_poller
                .entry(p.poller.clone())
                .or_default()
                .push((p, net_of_idle(p, idle)));
        }
    }
    let per_min = |net: f64, p: &Phase| net * 60.0 / p.usage.seconds;
    let mut summaries = Vec::new();
    for (label, rows) in &by_poller {
        let minutes: f64 = rows.iter().map(|(p, _)| p.usage.seconds / 60.0).sum();
        let polls: u64 = rows.iter().map(|(p, _)| p.polls).sum();
        let sum = |f: &dyn Fn(&Phase) -> u64| rows.iter().map(|(p, _)| f(p)).sum::<u64>() as f64;
        let per_poll = |x: f64| if polls == 0 { 0.0 } else { x / polls as f64 };
        let net_total = |i: usize| rows.iter().map(|(_, n)| n[i]).sum::<f64>();
        let series =
            |i: usize| -> Vec<f64> { rows.iter().map(|(p, n)| per_min(n[i], p)).collect() };
        summaries.push(Summary {
            poller: label.clone(),
            rounds: rows.len(),
            polls_per_minute: polls as f64 / minutes,
            refreshes_per_minute: sum(&|p| p.refreshes) / minutes,
            requests_per_poll: per_poll(sum(&|p| p.requests)),
            response_bytes_per_poll: per_poll(sum(&|p| p.response_bytes)),
            jvm_s_per_min: mean_min_max(&series(0)),
            rest_threads_s_per_min: mean_min_max(&series(1)),
            metrics_rpc_threads_s_per_min: mean_min_max(&series(2)),
            jvm_ms_per_poll: per_poll(net_total(0) * 1000.0),
            rest_threads_ms_per_poll: per_poll(net_total(1) * 1000.0),
            tm_s_per_min: net_total(3) / minutes,
        });
    }
    let agent_label = Poller {
        kind: Kind::Agent,
        interval: args.agent_interval_seconds.map(Duration::from_secs),
    }
    .label();
    let operator_label = Poller {
        kind: Kind::Operator,
        interval: Some(Duration::from_secs(args.operator_interval_seconds)),
    }
    .label();
    let summary = |label: &str| summaries.iter().find(|s| s.poller == label);
    let ratio = |a: f64, o: f64| (a > 0.0 && o > 0.0).then(|| a / o);
    let (agent_over_operator_jvm, agent_over_operator_rest_threads) =
        match (summary(&agent_label), summary(&operator_label)) {
            (Some(a), Some(o)) => (
                ratio(a.jvm_s_per_min[0], o.jvm_s_per_min[0]),
                ratio(a.rest_threads_s_per_min[0], o.rest_threads_s_per_min[0]),
            ),
            _ => (None, None),
        };
    let agent_over_operator_jvm_per_round = (1..=args.rounds)
        .map(|round| {
            let net = |label: &str| {
                by_poller.get(label).and_then(|rows| {
                    rows.iter()
                        .find(|(p, _)| p.round == round)
                        .map(|(p, n)| per_min(n[0], p))
                })
            };
            match (net(&agent_label), net(&operator_label)) {
                (Some(a), Some(o)) => ratio(a, o),
                _ => None,
            }
        })
        .collect();
    // One refresh: the refresh-only poller's net cost over its refreshes.
    let refresh_cost = |i: usize| {
        let rows = by_poller.get(
            &Poller {
                kind: Kind::Refresh,
                interval: Some(Duration::from_secs(args.operator_interval_seconds)),
            }
            .label(),
        )?;
        let refreshes: u64 = rows.iter().map(|(p, _)| p.refreshes).sum();
        (refreshes > 0)
            .then(|| rows.iter().map(|(_, n)| n[i]).sum::<f64>() * 1000.0 / refreshes as f64)
    };
    let mut latencies = Vec::new();
    for label in [
        "none".to_owned(),
        operator_label.clone(),
        agent_label.clone(),
    ] {
        let rows: Vec<&Phase> = phases
            .iter()
            .filter(|p| p.mode == Mode::Latency && p.poller == label)
            .collect();
        if rows.is_empty() {
            continue;
        }
        let pooled: Vec<f64> = rows.iter().flat_map(|p| p.probe_samples.clone()).collect();
        let minutes: f64 = rows.iter().map(|p| p.usage.seconds / 60.0).sum();
        latencies.push(Latency {
            poller: label,
            count: pooled.len(),
            p50_ms: percentile(&pooled, 0.5),
            p99_ms: percentile(&pooled, 0.99),
            p99_ms_per_round: rows
                .iter()
                .map(|p| p.probe.as_ref().map_or(0.0, |x| x.p99_ms))
                .collect(),
            refreshes_per_minute: rows.iter().map(|p| p.refreshes).sum::<u64>() as f64 / minutes,
        });
    }
    let (refresh_jvm_ms, refresh_rest_threads_ms, refresh_metrics_rpc_threads_ms) =
        (refresh_cost(0), refresh_cost(1), refresh_cost(2));
    Report {
        flink_version: flink_version.to_owned(),
        task_managers,
        slots_per_task_manager: slots,
        parallelism: args.parallelism,
        vertices,
        subtasks,
        rate: args.rate,
        agent_default_interval_seconds: agent_default.as_secs_f64(),
        operator_interval_seconds: args.operator_interval_seconds,
        load_average_at_start: load_at_start,
        load_average_at_end: load_average(),
        job_restarts,
        phases,
        summaries,
        latencies,
        agent_over_operator_jvm,
        agent_over_operator_rest_threads,
        agent_over_operator_jvm_per_round,
        refresh_jvm_ms,
        refresh_rest_threads_ms,
        refresh_metrics_rpc_threads_ms,
    }
}

fn print_report(r: &Report) {
    println!(
        "Flink {}, {} TaskManagers x {} slots, wide job {} subtasks over {} vertices (parallelism {}), {} records/s; agent default poll interval {} s, operator-like every {} s",
        r.flink_version,
        r.task_managers,
        r.slots_per_task_manager,
        r.subtasks,
        r.vertices,
        r.parallelism,
        r.rate,
        r.agent_default_interval_seconds,
        r.operator_interval_seconds
    );
    println!(
        "load average at start {}, at end {}; job restarts during the run: {}",
        r.load_average_at_start, r.load_average_at_end, r.job_restarts
    );
    println!();
    println!("| round | mode | poller | seconds | polls | requests | response bytes | refreshes | JM CPU s | REST threads s | metrics RPC s | TM CPU s | probe p50 ms | probe p99 ms |");
    println!("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for p in &r.phases {
        let (p50, p99) = p
            .probe
            .as_ref()
            .map_or((String::new(), String::new()), |x| {
                (format!("{:.1}", x.p50_ms), format!("{:.1}", x.p99_ms))
            });
        println!(
            "| {} | {} | {} | {:.1} | {} | {} | {} | {} | {:.2} | {:.2} | {:.2} | {:.1} | {p50} | {p99} |",
            p.round,
            format!("{:?}", p.mode).to_lowercase(),
            p.poller,
            p.usage.seconds,
            p.polls,
            p.requests,
            p.response_bytes,
            p.refreshes,
            p.usage.jm_cpu_s,
            p.jm_rest_threads_s,
            p.jm_metrics_rpc_threads_s,
            p.usage.tm_cpu_s
        );
    }
    println!();
    println!("Net of idle, per minute (mean [min, max] over rounds):");
    println!("| poller | polls/min | refreshes/min | requests/poll | bytes/poll | JM JVM s/min | REST threads s/min | metrics RPC s/min | JVM ms/poll | TM s/min |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let range = |x: &[f64; 3]| format!("{:.3} [{:.3}, {:.3}]", x[0], x[1], x[2]);
    for s in &r.summaries {
        println!(
            "| {} | {:.2} | {:.2} | {:.1} | {:.0} | {} | {} | {} | {:.1} | {:.2} |",
            s.poller,
            s.polls_per_minute,
            s.refreshes_per_minute,
            s.requests_per_poll,
            s.response_bytes_per_poll,
            range(&s.jvm_s_per_min),
            range(&s.rest_threads_s_per_min),
            range(&s.metrics_rpc_threads_s_per_min),
            s.jvm_ms_per_poll,
            s.tm_s_per_min
        );
    }
    if !r.latencies.is_empty() {
        println!();
        println!("`GET /jobs/:jid` while each poller runs (pooled over rounds):");
        println!("| poller | probes | p50 ms | p99 ms | p99 per round | refreshes/min |");
        println!("|---|---:|---:|---:|---|---:|");
        for l in &r.latencies {
            let rounds: Vec<String> = l
                .p99_ms_per_round
                .iter()
                .map(|x| format!("{x:.1}"))
                .collect();
            println!(
                "| {} | {} | {:.1} | {:.1} | {} | {:.2} |",
                l.poller,
                l.count,
                l.p50_ms,
                l.p99_ms,
                rounds.join(", "),
                l.refreshes_per_minute
            );
        }
    }
    println!();
    let show = |x: Option<f64>| x.map_or_else(|| "n/a".to_owned(), |x| format!("{x:.3}"));
    println!(
        "agent (default) / operator-like, net JobManager CPU per minute: whole JVM {} (per round: {}), REST threads {}",
        show(r.agent_over_operator_jvm),
        r.agent_over_operator_jvm_per_round
            .iter()
            .map(|x| show(*x))
            .collect::<Vec<_>>()
            .join(", "),
        show(r.agent_over_operator_rest_threads)
    );
    println!(
        "one MetricFetcher refresh (refresh-only poller, net per refresh): whole JVM {} ms, REST threads {} ms, metrics RPC threads {} ms",
        show(r.refresh_jvm_ms),
        show(r.refresh_rest_threads_ms),
        show(r.refresh_metrics_rpc_threads_ms)
    );
}
