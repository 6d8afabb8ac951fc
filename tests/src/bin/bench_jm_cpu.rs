//! `bench-jm-cpu`: the JobManager CPU time spent serving the agent's polls versus an
//! operator-like collector's, on a real Flink cluster (one JobManager, two TaskManagers) that
//! runs the load job at high parallelism.
//!
//! The JobManager JVM's CPU seconds (utime + stime from `/proc/<pid>/stat`) are read at the
//! start and end of fixed phases, in one run: idle (nobody polls: the baseline), the real
//! `flink-autoscale-agent collect` binary, and `reference_collectors::OperatorLike`, both at
//! the same poll interval; and `refresh`, one tiny metric request per poll, which costs the
//! JobManager the MetricFetcher refresh that any metric request triggers (at most one per
//! 10 s) and little else: the part of a collector's cost that is not its own requests. A
//! round is idle + refresh + agent + operator; even rounds swap agent and operator, so a
//! drift of the baseline does not favour either. Each collector's
//! first poll (topology and name discovery) happens half an interval before its phase
//! starts, so a phase holds `phase / interval` steady-state polls. The net cost of a
//! collector is its phase's JobManager CPU minus the idle rate of the same round times the
//! phase's length; the ratio is operator / agent. Per-thread CPU shows where the
//! JobManager spent it. Everything started is stopped at the end, also on error.
//!
//! `cargo run --release -p flink-autoscale-tests --bin bench-jm-cpu -- [--json]`

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;
use flink_autoscale_agent::flink::{ClientOptions, Endpoint, FlinkClient};
use flink_autoscale_tests::flink_harness::{
    aggregated, fully_running, job_status, single, vertex, ClusterSettings, FlinkCluster, LoadJob,
    LoadJobSpec, VertexStatus,
};
use flink_autoscale_tests::jm_usage::{load_average, UsageDelta, UsageSnapshot};
use flink_autoscale_tests::reference_collectors::OperatorLike;
use serde::Serialize;
use serde_json::Value;

const JOB_START_TIMEOUT: Duration = Duration::from_secs(300);
const METRICS_FLOW_TIMEOUT: Duration = Duration::from_secs(180);
const FIRST_POLL_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Parser)]
#[command(
    about = "JobManager CPU time serving the agent versus an operator-like collector, real Flink"
)]
struct Args {
    /// Print a single JSON object as the last line.
    #[arg(long)]
    json: bool,
    /// Parallelism of the load job's source, cpu-map, filter and keyed-sum; the job needs
    /// this many slots (one slot sharing group).
    #[arg(long, default_value_t = 28)]
    parallelism: u32,
    /// Parallelism of the sink (default: half of --parallelism). It must differ from
    /// keyed-sum's, or Flink chains the two into one vertex.
    #[arg(long)]
    sink_parallelism: Option<u32>,
    #[arg(long, default_value_t = 2)]
    task_managers: usize,
    /// `taskmanager.memory.process.size` of each TaskManager.
    #[arg(long, default_value = "2048m")]
    taskmanager_memory: String,
    /// Length of every measured phase.
    #[arg(long, default_value_t = 120)]
    phase_seconds: u64,
    /// Poll interval of both collectors. Flink's MetricFetcher refreshes at most every 10 s,
    /// triggered by a metric request; 11 s makes every poll of either collector trigger one
    /// (at exactly 10 s, a poll that comes a few ms early finds the cache fresh).
    #[arg(long, default_value_t = 11)]
    poll_interval_seconds: u64,
    /// Rounds of idle + refresh + agent + operator.
    #[arg(long, default_value_t = 2)]
    rounds: u32,
    /// Leave out the `refresh` phase.
    #[arg(long)]
    no_refresh: bool,
    /// Unmeasured polling by each collector before the first round (the JobManager's JIT
    /// compiles the handlers meanwhile).
    #[arg(long, default_value_t = 60)]
    warmup_seconds: u64,
    /// Records per second over all source subtasks.
    #[arg(long, default_value_t = 1200.0)]
    rate: f64,
    /// LCG iterations per record in cpu-map.
    #[arg(long, default_value_t = 20_000)]
    work: u32,
    /// The agent binary (default: the one in this binary's target dir and profile; build it
    /// with `cargo build --release -p flink-autoscale-agent`).
    #[arg(long)]
    agent_bin: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
enum Kind {
    Idle,
    Refresh,
    Agent,
    Operator,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Idle => "idle",
            Kind::Refresh => "refresh",
            Kind::Agent => "agent",
            Kind::Operator => "operator",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
struct Phase {
    round: u32,
    kind: Kind,
    seconds: f64,
    jm_cpu_s: f64,
    /// The JobManager's REST threads only (see `REST_THREAD_GROUPS`): no JIT, GC or
    /// checkpoint coordination, so less noise, but also not all of the cost.
    jm_rest_threads_cpu_s: f64,
    /// Both TaskManagers together (they serve the MetricFetcher's dumps, and run the job).
    tm_cpu_s: f64,
    polls: u32,
    requests_per_poll: f64,
    response_bytes_per_poll: f64,
    /// JobManager CPU seconds per thread group (thread name without its number) that did
    /// any work.
    jm_threads: BTreeMap<String, f64>,
}

#[derive(Debug, Clone, Serialize)]
struct Net {
    kind: Kind,
    round: u32,
    /// JobManager CPU beyond the round's idle rate.
    jm_cpu_s: f64,
    jm_cpu_ms_per_poll: f64,
    jm_rest_threads_cpu_s: f64,
    jm_rest_threads_cpu_ms_per_poll: f64,
    tm_cpu_s: f64,
}

#[derive(Debug, Serialize)]
struct Report {
    flink_version: String,
    task_managers: usize,
    slots_per_task_manager: u32,
    parallelism: u32,
    sink_parallelism: u32,
    vertices: usize,
    subtasks: u32,
    phase_seconds: u64,
    poll_interval_seconds: u64,
    load_average_at_start: String,
    load_average_at_end: String,
    job_restarts: f64,
    phases: Vec<Phase>,
    net: Vec<Net>,
    /// Operator / agent net JobManager CPU per round, when both are above zero.
    ratio_per_round: Vec<Option<f64>>,
    /// Over all rounds: sum of the operator's net CPU over the sum of the agent's.
    ratio: Option<f64>,
    agent_ms_per_poll: f64,
    operator_ms_per_poll: f64,
    /// The same for the REST threads alone.
    rest_threads_ratio_per_round: Vec<Option<f64>>,
    rest_threads_ratio: Option<f64>,
    agent_rest_threads_ms_per_poll: f64,
    operator_rest_threads_ms_per_poll: f64,
    /// The refresh-only poller, net of idle.
    refresh_ms_per_poll: f64,
    refresh_rest_threads_ms_per_poll: f64,
    /// REST threads per poll beyond the refresh-only poller's: the collector's own requests.
    agent_own_rest_threads_ms_per_poll: Option<f64>,
    operator_own_rest_threads_ms_per_poll: Option<f64>,
    own_requests_ratio: Option<f64>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let sink = args.sink_parallelism.unwrap_or(args.parallelism / 2).max(1);
    if args.parallelism == 0 || args.parallelism > 128 || sink > 128 {
        bail!("parallelism must be 1..=128 (the job's max parallelism is 128)");
    }
    if sink == args.parallelism {
        bail!("--sink-parallelism must differ from --parallelism, or keyed-sum and the sink chain");
    }
    if args.poll_interval_seconds == 0 || args.phase_seconds < args.poll_interval_seconds {
        bail!("--phase-seconds must be at least --poll-interval-seconds (> 0)");
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

async fn run(args: &Args) -> Result<Report> {
    let tms = args.task_managers.max(1);
    let p = args.parallelism;
    let sink = args.sink_parallelism.unwrap_or(p / 2).max(1);
    let slots = p.max(sink).div_ceil(tms as u32);
    let phases = u64::from(args.rounds) * 3;
    // Start-up, warm-up and every phase with slack; the watchdog stops the cluster after it.
    let lifetime = Duration::from_secs(
        900 + 2 * args.warmup_seconds + phases * (args.phase_seconds + args.poll_interval_seconds),
    );
    let settings = ClusterSettings {
        task_managers: tms,
        slots_per_task_manager: slots,
        taskmanager_memory: args.taskmanager_memory.clone(),
        max_lifetime: lifetime,
        startup_timeout: Duration::from_secs(240),
        ..ClusterSettings::default()
    };
    let load_at_start = load_average();
    eprintln!(
        "starting Flink: {tms} TaskManagers x {slots} slots, load job at parallelism {p} (sink {sink}): {} subtasks; load average {load_at_start}",
        4 * p + sink
    );
    let agent = match &args.agent_bin {
        Some(path) => path.clone(),
        None => flink_autoscale_testkit::binary("flink-autoscale-agent")?,
    };
    let mut cluster = FlinkCluster::start(settings).await?;
    // From here on the cluster is owned: an error returns through Drop, which stops it.
    let spec = LoadJobSpec {
        name: "bench-jm-cpu".to_owned(),
        rate: args.rate,
        work: args.work,
        source_parallelism: p,
        map_parallelism: p,
        keyed_parallelism: p,
        sink_parallelism: sink,
        ..LoadJobSpec::default()
    };
    let job = cluster.submit_load_job(&spec, JOB_START_TIMEOUT).await?;
    let vertices = cluster
        .wait_for_job(&job.job_id, JOB_START_TIMEOUT, fully_running)
        .await?;
    let subtasks: u64 = vertices.iter().map(|v| v.parallelism).sum();
    eprintln!(
        "job {} RUNNING: {subtasks} subtasks over {} vertices",
        job.job_id,
        vertices.len()
    );
    wait_for_metrics(&mut cluster, &job, &vertices).await?;
    let restarts_before = job_restarts(&cluster, &job.job_id).await?;

    let interval = Duration::from_secs(args.poll_interval_seconds);
    if args.warmup_seconds > 0 {
        let warm = Duration::from_secs(args.warmup_seconds);
        eprintln!("warm-up: {} s of each collector", args.warmup_seconds);
        measure(&mut cluster, &agent, &job, Kind::Agent, 0, interval, warm).await?;
        measure(
            &mut cluster,
            &agent,
            &job,
            Kind::Operator,
            0,
            interval,
            warm,
        )
        .await?;
    }
    let phase = Duration::from_secs(args.phase_seconds);
    let mut measured = Vec::new();
    for round in 1..=args.rounds {
        let pair = if round % 2 == 1 {
            [Kind::Agent, Kind::Operator]
        } else {
            [Kind::Operator, Kind::Agent]
        };
        let refresh = (!args.no_refresh).then_some(Kind::Refresh);
        let order = std::iter::once(Kind::Idle).chain(refresh).chain(pair);
        for kind in order {
            let result = measure(&mut cluster, &agent, &job, kind, round, interval, phase).await?;
            eprintln!(
                "round {round} {:<8} {:>6.1} s  JM CPU {:>6.2} s  TM CPU {:>6.2} s  polls {:>3}  requests/poll {:>5.1}",
                kind.name(),
                result.seconds,
                result.jm_cpu_s,
                result.tm_cpu_s,
                result.polls,
                result.requests_per_poll
            );
            let mut busiest: Vec<(&String, &f64)> = result.jm_threads.iter().collect();
            busiest.sort_by(|a, b| b.1.total_cmp(a.1));
            let top: Vec<String> = busiest
                .iter()
                .take(6)
                .map(|(g, cpu)| format!("{g} {cpu:.2}"))
                .collect();
            eprintln!("    JM threads: {}", top.join(", "));
            measured.push(result);
        }
    }
    let restarts_after = job_restarts(&cluster, &job.job_id).await?;
    let (state, _) = job_status(&cluster.rest().get(&format!("/jobs/{}", job.job_id)).await?);
    if state != "RUNNING" {
        bail!("the job ended the run in state {state}");
    }
    let installation = cluster.installation().clone();
    cluster.stop();
    Ok(summarize(
        args,
        &installation.flink_version,
        tms,
        slots,
        (sink, vertices.len()),
        subtasks as u32,
        load_at_start,
        restarts_after - restarts_before,
        measured,
    ))
}

/// Waits until every vertex reports busy time and the source's output rate is above zero
/// (Flink answers `[]` or zeros for a while after the job starts).
async fn wait_for_metrics(
    cluster: &mut FlinkCluster,
    job: &LoadJob,
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
    let source = vertices
        .iter()
        .find(|v| v.name == vertex::SOURCE)
        .ok_or_else(|| anyhow!("the job has no vertex named {}", vertex::SOURCE))?;
    let metric = "Source__datagen-source.numRecordsOutPerSecond";
    cluster
        .poll_until(
            &format!(
                "/jobs/{jid}/vertices/{}/subtasks/metrics?get={metric}&agg=sum",
                source.id
            ),
            METRICS_FLOW_TIMEOUT,
            |answer| aggregated(answer, metric, "sum").is_some_and(|r| r > 0.0),
        )
        .await?;
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

/// One phase of `kind`, `length` long.
async fn measure(
    cluster: &mut FlinkCluster,
    agent: &Path,
    job: &LoadJob,
    kind: Kind,
    round: u32,
    interval: Duration,
    length: Duration,
) -> Result<Phase> {
    match kind {
        Kind::Idle => {
            let start = UsageSnapshot::take(cluster)?;
            tokio::time::sleep(length).await;
            let end = UsageSnapshot::take(cluster)?;
            Ok(phase(round, kind, &start, &end, 0, 0, 0))
        }
        Kind::Agent => agent_phase(cluster, agent, round, interval, length).await,
        Kind::Operator | Kind::Refresh => {
            in_process_phase(cluster, job, kind, round, interval, length).await
        }
    }
}

/// The real agent binary, `collect` mode: the daemon's collector, printing one JSON line per
/// poll with the requests it made.
async fn agent_phase(
    cluster: &mut FlinkCluster,
    agent: &Path,
    round: u32,
    interval: Duration,
    length: Duration,
) -> Result<Phase> {
    let mut command = Command::new(agent);
    command
        .args(["collect", "--jobmanager", cluster.rest_url()])
        .args(["--poll-interval", &format!("{}s", interval.as_secs())]);
    let mut process = cluster.spawn_helper(&format!("agent-round-{round}"), command)?;
    let console = process.console_log();
    let waited = Instant::now();
    while agent_rounds(&console).is_empty() {
        if let Some(status) = process.exit_status() {
            bail!("the agent exited ({status}):\n{}", process.log_tail(40));
        }
        if waited.elapsed() > FIRST_POLL_TIMEOUT {
            bail!(
                "the agent printed no round within {FIRST_POLL_TIMEOUT:?}:\n{}",
                process.log_tail(40)
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(interval / 2).await;
    let start = UsageSnapshot::take(cluster)?;
    tokio::time::sleep(length).await;
    let end = UsageSnapshot::take(cluster)?;
    if let Some(status) = process.exit_status() {
        bail!(
            "the agent exited during the phase ({status}):\n{}",
            process.log_tail(40)
        );
    }
    drop(process);
    let rounds: Vec<Value> = agent_rounds(&console)
        .into_iter()
        .filter(|r| {
            let at = r["polled_at_ms"].as_u64().unwrap_or(0);
            at >= start.epoch_ms && at < end.epoch_ms
        })
        .collect();
    for r in &rounds {
        if r["errors"].as_array().is_some_and(|e| !e.is_empty()) {
            bail!("an agent poll failed: {}", r["errors"]);
        }
        if r["jobs"].as_array().is_none_or(|jobs| jobs.is_empty()) {
            bail!("an agent poll saw no job: {r}");
        }
    }
    let sum = |key: &str| rounds.iter().map(|r| r[key].as_u64().unwrap_or(0)).sum();
    Ok(phase(
        round,
        Kind::Agent,
        &start,
        &end,
        rounds.len() as u32,
        sum("requests"),
        sum("response_bytes"),
    ))
}

/// The JSON rounds `collect` printed so far (its console also holds its log lines).
fn agent_rounds(console: &Path) -> Vec<Value> {
    std::fs::read_to_string(console)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|v| v.get("polled_at_ms").is_some())
        .collect()
}

/// A poller that runs in this process.
enum InProcess {
    Operator(OperatorLike),
    /// `GET /jobmanager/metrics?get=taskSlotsTotal`: like every metric request it makes the
    /// JobManager refresh its MetricStore from every TaskManager when the last refresh is
    /// older than `metrics.fetcher.update-interval`; the answer itself is one number.
    Refresh,
}

impl InProcess {
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

/// The operator-like collector (or the refresh-only poller) in this process, fixed-rate like
/// the operator's control loop.
async fn in_process_phase(
    cluster: &mut FlinkCluster,
    job: &LoadJob,
    kind: Kind,
    round: u32,
    interval: Duration,
    length: Duration,
) -> Result<Phase> {
    let client = FlinkClient::new(ClientOptions {
        base_url: cluster.rest_url().to_owned(),
        request_timeout: Duration::from_secs(30),
        connect_timeout: Duration::from_secs(5),
        max_body_bytes: 256 << 20,
        max_concurrent_requests: 1,
        tls: None,
        has_client_cert: false,
    })?;
    let mut collector = match kind {
        Kind::Refresh => InProcess::Refresh,
        _ => InProcess::Operator(OperatorLike::new(&job.job_id)),
    };
    let what = kind.name();
    // The operator's first poll lists every vertex; Flink may still answer a listing with `[]`.
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
    tokio::time::sleep(interval / 2).await;
    let start = UsageSnapshot::take(cluster)?;
    let before = client.stats();
    let end_at = tokio::time::Instant::now() + length;
    let mut polls = 0u32;
    let mut next = first + interval;
    while next < end_at {
        tokio::time::sleep_until(next).await;
        collector
            .poll(&client)
            .await
            .with_context(|| format!("{what} poll"))?;
        polls += 1;
        next += interval;
    }
    tokio::time::sleep_until(end_at).await;
    let end = UsageSnapshot::take(cluster)?;
    let after = client.stats();
    Ok(phase(
        round,
        kind,
        &start,
        &end,
        polls,
        after.requests - before.requests,
        after.response_bytes - before.response_bytes,
    ))
}

fn phase(
    round: u32,
    kind: Kind,
    start: &UsageSnapshot,
    end: &UsageSnapshot,
    polls: u32,
    requests: u64,
    response_bytes: u64,
) -> Phase {
    let per_poll = |total: u64| {
        if polls == 0 {
            0.0
        } else {
            total as f64 / f64::from(polls)
        }
    };
    let usage = UsageDelta::between(start, end);
    Phase {
        round,
        kind,
        seconds: usage.seconds,
        jm_cpu_s: usage.jm_cpu_s,
        jm_rest_threads_cpu_s: usage.rest_threads_s(),
        tm_cpu_s: usage.tm_cpu_s,
        polls,
        requests_per_poll: per_poll(requests),
        response_bytes_per_poll: per_poll(response_bytes),
        jm_threads: usage.jm_threads,
    }
}

#[allow(clippy::too_many_arguments)]
fn summarize(
    args: &Args,
    flink_version: &str,
    task_managers: usize,
    slots: u32,
    (sink_parallelism, vertices): (u32, usize),
    subtasks: u32,
    load_at_start: String,
    job_restarts: f64,
    phases: Vec<Phase>,
) -> Report {
    let mut net = Vec::new();
    let mut ratio_per_round = Vec::new();
    let mut rest_threads_ratio_per_round = Vec::new();
    // (net JM CPU, net REST-thread CPU, polls) over all rounds, agent and operator.
    let mut totals: HashMap<Kind, (f64, f64, u32)> = HashMap::new();
    for round in 1..=args.rounds {
        let of = |kind| phases.iter().find(|p| p.round == round && p.kind == kind);
        let Some(idle) = of(Kind::Idle) else { continue };
        let per_second = |cpu: f64| cpu / idle.seconds;
        let (jm_rate, rest_rate, tm_rate) = (
            per_second(idle.jm_cpu_s),
            per_second(idle.jm_rest_threads_cpu_s),
            per_second(idle.tm_cpu_s),
        );
        let mut this_round: HashMap<Kind, (f64, f64)> = HashMap::new();
        for kind in [Kind::Refresh, Kind::Agent, Kind::Operator] {
            let Some(p) = of(kind) else { continue };
            let jm = p.jm_cpu_s - jm_rate * p.seconds;
            let rest = p.jm_rest_threads_cpu_s - rest_rate * p.seconds;
            net.push(Net {
                kind,
                round,
                jm_cpu_s: jm,
                jm_cpu_ms_per_poll: ms_per_poll(jm, p.polls),
                jm_rest_threads_cpu_s: rest,
                jm_rest_threads_cpu_ms_per_poll: ms_per_poll(rest, p.polls),
                tm_cpu_s: p.tm_cpu_s - tm_rate * p.seconds,
            });
            let total = totals.entry(kind).or_default();
            total.0 += jm;
            total.1 += rest;
            total.2 += p.polls;
            this_round.insert(kind, (jm, rest));
        }
        let pair = |pick: fn(&(f64, f64)) -> f64| {
            ratio(
                this_round.get(&Kind::Operator).map(pick),
                this_round.get(&Kind::Agent).map(pick),
            )
        };
        ratio_per_round.push(pair(|x| x.0));
        rest_threads_ratio_per_round.push(pair(|x| x.1));
    }
    let total = |kind| totals.get(&kind).copied().unwrap_or_default();
    let (agent, operator, refresh) = (
        total(Kind::Agent),
        total(Kind::Operator),
        total(Kind::Refresh),
    );
    // What a collector's own requests cost beyond the refresh every poller triggers.
    let own = |kind: (f64, f64, u32)| {
        (refresh.2 > 0 && kind.2 > 0)
            .then(|| ms_per_poll(kind.1, kind.2) - ms_per_poll(refresh.1, refresh.2))
    };
    Report {
        flink_version: flink_version.to_owned(),
        task_managers,
        slots_per_task_manager: slots,
        parallelism: args.parallelism,
        sink_parallelism,
        vertices,
        subtasks,
        phase_seconds: args.phase_seconds,
        poll_interval_seconds: args.poll_interval_seconds,
        load_average_at_start: load_at_start,
        load_average_at_end: load_average(),
        job_restarts,
        phases,
        net,
        ratio_per_round,
        ratio: ratio(Some(operator.0), Some(agent.0)),
        agent_ms_per_poll: ms_per_poll(agent.0, agent.2),
        operator_ms_per_poll: ms_per_poll(operator.0, operator.2),
        rest_threads_ratio_per_round,
        rest_threads_ratio: ratio(Some(operator.1), Some(agent.1)),
        agent_rest_threads_ms_per_poll: ms_per_poll(agent.1, agent.2),
        operator_rest_threads_ms_per_poll: ms_per_poll(operator.1, operator.2),
        refresh_ms_per_poll: ms_per_poll(refresh.0, refresh.2),
        refresh_rest_threads_ms_per_poll: ms_per_poll(refresh.1, refresh.2),
        agent_own_rest_threads_ms_per_poll: own(agent),
        operator_own_rest_threads_ms_per_poll: own(operator),
        own_requests_ratio: ratio(own(operator), own(agent)),
    }
}

fn ms_per_poll(cpu_seconds: f64, polls: u32) -> f64 {
    if polls == 0 {
        0.0
    } else {
        cpu_seconds * 1000.0 / f64::from(polls)
    }
}

/// `operator / agent`, only when both are above zero (below it, noise exceeds the signal).
fn ratio(operator: Option<f64>, agent: Option<f64>) -> Option<f64> {
    match (operator, agent) {
        (Some(o), Some(a)) if o > 0.0 && a > 0.0 => Some(o / a),
        _ => None,
    }
}

fn print_report(r: &Report) {
    println!(
        "Flink {}, {} TaskManagers x {} slots, load job {} subtasks over {} vertices (parallelism {}, sink {}), phases {} s, poll interval {} s",
        r.flink_version,
        r.task_managers,
        r.slots_per_task_manager,
        r.subtasks,
        r.vertices,
        r.parallelism,
        r.sink_parallelism,
        r.phase_seconds,
        r.poll_interval_seconds
    );
    println!(
        "load average at start {}, at end {}; job restarts during the run: {}",
        r.load_average_at_start, r.load_average_at_end, r.job_restarts
    );
    println!();
    println!("| round | phase | seconds | polls | requests/poll | response bytes/poll | JM CPU s | net of idle | net ms/poll | JM REST threads s | net ms/poll | TM CPU s |");
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for p in &r.phases {
        let net = r
            .net
            .iter()
            .find(|n| n.round == p.round && n.kind == p.kind);
        let (net_s, per_poll, rest_per_poll) = match net {
            Some(n) => (
                format!("{:.2}", n.jm_cpu_s),
                format!("{:.1}", n.jm_cpu_ms_per_poll),
                format!("{:.1}", n.jm_rest_threads_cpu_ms_per_poll),
            ),
            None => (String::new(), String::new(), String::new()),
        };
        println!(
            "| {} | {} | {:.1} | {} | {:.1} | {:.0} | {:.2} | {net_s} | {per_poll} | {:.2} | {rest_per_poll} | {:.2} |",
            p.round,
            p.kind.name(),
            p.seconds,
            p.polls,
            p.requests_per_poll,
            p.response_bytes_per_poll,
            p.jm_cpu_s,
            p.jm_rest_threads_cpu_s,
            p.tm_cpu_s
        );
    }
    println!();
    println!("JobManager CPU seconds by thread group (groups above 0.05 s in any phase):");
    let mut groups: Vec<&String> = r
        .phases
        .iter()
        .flat_map(|p| {
            p.jm_threads
                .iter()
                .filter(|(_, s)| **s > 0.05)
                .map(|(g, _)| g)
        })
        .collect();
    groups.sort();
    groups.dedup();
    let header: Vec<String> = r
        .phases
        .iter()
        .map(|p| format!("{} {}", p.round, p.kind.name()))
        .collect();
    println!("| thread group | {} |", header.join(" | "));
    println!("|---|{}", "---:|".repeat(r.phases.len()));
    for g in groups {
        let cells: Vec<String> = r
            .phases
            .iter()
            .map(|p| format!("{:.2}", p.jm_threads.get(g).copied().unwrap_or(0.0)))
            .collect();
        println!("| {g} | {} |", cells.join(" | "));
    }
    println!();
    let show = |x: Option<f64>| {
        x.map_or_else(
            || "n/a (net CPU not above zero)".to_owned(),
            |x| format!("{x:.2}"),
        )
    };
    for (i, (x, y)) in r
        .ratio_per_round
        .iter()
        .zip(&r.rest_threads_ratio_per_round)
        .enumerate()
    {
        println!(
            "round {}: operator/agent JobManager CPU = {}; REST threads only = {}",
            i + 1,
            show(*x),
            show(*y)
        );
    }
    println!(
        "all rounds: JobManager CPU net of idle: agent {:.1} ms/poll, operator-like {:.1} ms/poll, operator/agent = {}",
        r.agent_ms_per_poll,
        r.operator_ms_per_poll,
        show(r.ratio)
    );
    println!(
        "all rounds: REST threads net of idle: agent {:.1} ms/poll, operator-like {:.1} ms/poll, operator/agent = {}",
        r.agent_rest_threads_ms_per_poll,
        r.operator_rest_threads_ms_per_poll,
        show(r.rest_threads_ratio)
    );
    if let (Some(a), Some(o)) = (
        r.agent_own_rest_threads_ms_per_poll,
        r.operator_own_rest_threads_ms_per_poll,
    ) {
        println!(
            "refresh-only poller net of idle: {:.1} ms/poll (REST threads {:.1}); beyond it, REST threads: agent {a:.1} ms/poll, operator-like {o:.1} ms/poll, operator/agent = {}",
            r.refresh_ms_per_poll,
            r.refresh_rest_threads_ms_per_poll,
            show(r.own_requests_ratio)
        );
    }
}
