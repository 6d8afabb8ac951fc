//! `bench-collect`: what one poll of one job costs the JobManager and the agent, for three
//! collectors side by side, against the simulated JobManager's own accounting:
//!
//! - `naive`: per subtask, list the names and read the values (`/subtasks/:i/metrics`);
//! - `operator`: behaves like the Flink Kubernetes Operator's collector: job details, each
//!   source's names listed twice, one value query per vertex without `agg`, slot and
//!   TaskManager metrics;
//! - `agent`: this project's collector with its default settings (cached names, one
//!   filtered, aggregated request per vertex, plus the shared `/jobs/overview`; jobs above
//!   1,000 subtasks are read one slice of subtasks per vertex per poll);
//! - `agent_unsliced`: the same collector reading every subtask on every poll;
//! - `agent_batch`: the same, on a simulated JobManager that serves the batch endpoints
//!   proposed in FLINK-39617, which the agent then picks: one request per group of
//!   vertices asking for the same names instead of one per vertex.
//!
//! `naive` and `operator` live in `flink_autoscale_tests::reference_collectors`.
//!
//! Sizes: 100, 1,000, 3,000 and 10,000 subtasks over 10 vertices. Each collector runs on its
//! own thread with its own single-threaded runtime, so its CPU time (from
//! `/proc/thread-self/schedstat`) excludes the simulator's. Finally the real agent binary
//! watches 50 jobs of 1,000 subtasks and its peak RSS is read from `/proc/<pid>/status`.
//!
//! Then the JobManager's CPU (`jm_cpu`): the simulator's cost model is fitted on copies of
//! the jobs measured on real Flink and checked against them, and predicts each collector's
//! JobManager CPU per minute at its cadence (`--jm-cpu-only` runs just that part).
//! The entries-touched ratios of the per-poll table are not JobManager CPU: every poll also
//! starts a MetricFetcher refresh, which at these cadences dominates.
//! With `--json`, the last line printed is one JSON object.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;
use flink_autoscale_agent::collector::{CollectorSettings, JobCollector};
use flink_autoscale_agent::config::{Config, Overrides};
use flink_autoscale_agent::daemon::client_from_config;
use flink_autoscale_agent::flink::{Endpoint, FlinkClient};
use flink_autoscale_simulator::{start, CostModel, RunningSim, Scenario, SimControl, SimOptions};
use flink_autoscale_testkit::Daemon;
use flink_autoscale_tests::reference_collectors::{naive_poll, OperatorLike};
use serde::Serialize;

#[path = "bench_collect/jm_cpu.rs"]
mod jm_cpu;

const VERTICES: u32 = 10;
/// Kafka client metrics per source subtask: with them a source subtask holds about 350
/// metrics, the estimate for a Kafka source with client metrics in
/// /work/shared/reference/flink-rest-api.md §6 ("M_s ≈ 350").
const KAFKA_CLIENT_METRICS: u32 = 275;

#[derive(Parser)]
#[command(about = "Per-poll cost of three metric collectors against the simulated JobManager")]
struct Args {
    /// Print a single JSON object as the last line.
    #[arg(long)]
    json: bool,
    /// Job sizes in subtasks (spread evenly over 10 vertices).
    #[arg(long, value_delimiter = ',', default_value = "100,1000,3000,10000")]
    sizes: Vec<u32>,
    /// Measured polls per collector and size (after warming up to the first usable poll).
    #[arg(long, default_value_t = 3)]
    polls: u32,
    /// The agent binary for the RSS measurement (default: next to this binary).
    #[arg(long)]
    agent_bin: Option<PathBuf>,
    /// How long the agent watches the 50 jobs before its peak RSS is read.
    #[arg(long, default_value = "12")]
    rss_seconds: u64,
    /// Only the JobManager CPU part: the calibration on the real runs and the per-minute
    /// predictions (no per-poll table, no RSS).
    #[arg(long)]
    jm_cpu_only: bool,
    /// Sizes (subtasks) the per-minute prediction extrapolates to, on the job above.
    #[arg(long, value_delimiter = ',', default_value = "3000,10000")]
    extrapolate: Vec<u32>,
}

#[derive(Debug, Clone, Copy, Default, Serialize)]
struct Cost {
    requests: u64,
    response_bytes: u64,
    entries_touched: u64,
    fetcher_refreshes: u64,
    fetched_entries: u64,
    /// The simulator's modeled JobManager REST-thread CPU (`CostModel::CALIBRATED`).
    jobmanager_cpu_ms: f64,
    wall_ms: f64,
    cpu_ms: f64,
}

#[derive(Serialize)]
struct SizeResult {
    subtasks: u32,
    vertices: u32,
    collectors: BTreeMap<&'static str, Cost>,
}

#[derive(Serialize)]
struct Report {
    sizes: Vec<SizeResult>,
    rss_mib_50_jobs_1000_subtasks: Option<f64>,
    jobmanager_cpu: jm_cpu::JmCpuReport,
}

fn main() -> Result<()> {
    let args = Args::parse();
    // Record metrics as the daemon does, so the agent's CPU time includes that work.
    flink_autoscale_shared::telemetry::install_prometheus()?;
    let sim_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let mut sizes = Vec::new();
    let per_poll_sizes: &[u32] = if args.jm_cpu_only { &[] } else { &args.sizes };
    for &subtasks in per_poll_sizes {
        let p = (subtasks / VERTICES).max(1);
        let sim = start_manual(&sim_rt, &job_toml("bench", p))?;
        let ctl = sim.control();
        let url = sim.url();
        let mut collectors = BTreeMap::new();
        for kind in ["naive", "operator", "agent", "agent_unsliced"] {
            let cost = measure(kind, &url, &ctl, args.polls, POLL_SECONDS)?;
            eprintln!("{subtasks:>6} subtasks  {kind:<14} {cost:?}");
            collectors.insert(kind, cost);
        }
        sim_rt.block_on(sim.shutdown());
        // The same job on a JobManager with the batch endpoints (FLINK-39617).
        let batch = format!("[server]\nbatch_metrics = true\n{}", job_toml("bench", p));
        let sim = start_manual(&sim_rt, &batch)?;
        let ctl = sim.control();
        let cost = measure("agent_batch", &sim.url(), &ctl, args.polls, POLL_SECONDS)?;
        eprintln!("{subtasks:>6} subtasks  agent_batch    {cost:?}");
        collectors.insert("agent_batch", cost);
        sim_rt.block_on(sim.shutdown());
        sizes.push(SizeResult {
            subtasks: p * VERTICES,
            vertices: VERTICES,
            collectors,
        });
    }
    let jobmanager_cpu = jm_cpu::run(&sim_rt, &args)?;
    let rss = if args.jm_cpu_only {
        None
    } else {
        Some(measure_rss(&sim_rt, &args)?)
    };
    let report = Report {
        sizes,
        rss_mib_50_jobs_1000_subtasks: rss,
        jobmanager_cpu,
    };
    print_table(&report);
    jm_cpu::print(&report.jobmanager_cpu);
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    }
    Ok(())
}

/// A simulator serving `toml` on a manual clock, 2 simulated minutes in (rates settled).
fn start_manual(sim_rt: &tokio::runtime::Runtime, toml: &str) -> Result<RunningSim> {
    let scenario = Scenario::from_toml_str(toml).map_err(|e| anyhow!("{e}"))?;
    let sim = sim_rt.block_on(start(
        scenario,
        "127.0.0.1:0".parse()?,
        SimOptions {
            manual_clock: true,
            ..Default::default()
        },
    ))?;
    sim.control().advance(Duration::from_secs(120));
    Ok(sim)
}

/// One job: a Kafka source, eight processing vertices and a sink, `p` subtasks each.
fn job_toml(name: &str, p: u32) -> String {
    let mut s = format!(
        "[[job]]\nname = \"{name}\"\n[[job.vertex]]\nname = \"Source: {name} events\"\nparallelism = {p}\nmax_parallelism = 32768\ncapacity = 2000.0\nextra_metrics = {KAFKA_CLIENT_METRICS}\n[job.vertex.source]\npartitions = {p}\ntopic = \"{name}\"\nrate = {{ kind = \"constant\", value = {} }}\n",
        f64::from(p) * 500.0
    );
    for i in 1..VERTICES - 1 {
        s += &format!("[[job.vertex]]\nname = \"stage-{i}\"\nparallelism = {p}\nmax_parallelism = 32768\ncapacity = 1500.0\n");
    }
    s += &format!("[[job.vertex]]\nname = \"Sink: {name} out\"\nparallelism = {p}\nmax_parallelism = 32768\ncapacity = 5000.0\n");
    let names: Vec<String> = std::iter::once(format!("Source: {name} events"))
        .chain((1..VERTICES - 1).map(|i| format!("stage-{i}")))
        .chain(std::iter::once(format!("Sink: {name} out")))
        .collect();
    for (i, pair) in names.windows(2).enumerate() {
        let ship = if i % 2 == 0 { "HASH" } else { "REBALANCE" };
        s += &format!(
            "[[job.edge]]\nfrom = \"{}\"\nto = \"{}\"\nship_strategy = \"{ship}\"\n",
            pair[0], pair[1]
        );
    }
    s
}

/// Simulated seconds between polls in the per-poll table: the agent's default interval.
const POLL_SECONDS: u64 = 15;

/// The agent's settings: defaults, except `poll_secs` and the name and slow refreshes moved
/// out of the measured polls (the real runs' phases held none either).
fn bench_config(url: &str, poll_secs: u64) -> Result<Config> {
    let deadline = poll_secs.min(15);
    let toml = format!(
        "[jobmanager]\nurl = \"{url}\"\nrequest_timeout = \"{deadline}s\"\nmax_response_bytes = 268435456\nfetcher_update_interval = \"1s\"\n[collector]\npoll_interval = \"{poll_secs}s\"\npoll_deadline = \"{deadline}s\"\nnames_refresh_interval = \"1h\"\nslow_refresh_interval = \"1h\""
    );
    Config::from_layers(&toml, &Default::default(), &Overrides::default())
        .map_err(|e| anyhow!("{e}"))
}

/// CPU time of the calling thread in nanoseconds.
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// Runs one collector on its own thread: warm-up polls until its data is usable, then
/// `polls` measured polls, each after `every_s` of simulated time (so the simulated
/// MetricFetcher refreshes as often as at that cadence). Returns the average per poll.
fn measure(
    kind: &'static str,
    url: &str,
    ctl: &SimControl,
    polls: u32,
    every_s: u64,
) -> Result<Cost> {
    let url = url.to_string();
    let ctl = ctl.clone();
    std::thread::spawn(move || -> Result<Cost> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(async move {
            let cfg = bench_config(&url, every_s)?;
            let client = client_from_config(&cfg)?;
            let job = ctl.job_ids()[0].clone();
            let mut collector = Collector::new(kind, &job, &cfg);
            let mut now_ms = 1_000_000;
            // Warm up to steady state: names resolved and, for a sliced job, every slice read.
            let mut warm_up = 0;
            while !collector.poll(&client, now_ms).await? {
                warm_up += 1;
                if warm_up > 100 {
                    bail!("{kind}: no usable poll after 100 warm-up polls");
                }
                ctl.advance(Duration::from_secs(every_s));
                now_ms += every_s * 1000;
            }
            let mut total = Cost::default();
            for _ in 0..polls {
                ctl.advance(Duration::from_secs(every_s));
                now_ms += every_s * 1000;
                ctl.reset_stats();
                let (cpu0, t0) = (thread_cpu_ns(), Instant::now());
                let usable = collector.poll(&client, now_ms).await?;
                let (cpu1, wall) = (thread_cpu_ns(), t0.elapsed());
                if !usable {
                    bail!("{kind}: a measured poll was unusable");
                }
                let stats = ctl.stats();
                total.requests += stats.requests;
                total.response_bytes += stats.response_bytes;
                total.entries_touched += stats.entries_touched;
                total.fetcher_refreshes += stats.fetcher_refreshes;
                total.fetched_entries += stats.fetched_entries;
                total.jobmanager_cpu_ms +=
                    CostModel::CALIBRATED.cpu(&stats.counts()).jobmanager_cpu_ms;
                total.wall_ms += wall.as_secs_f64() * 1000.0;
                total.cpu_ms += (cpu1 - cpu0) as f64 / 1e6;
            }
            let n = u64::from(polls.max(1));
            Ok(Cost {
                requests: total.requests / n,
                response_bytes: total.response_bytes / n,
                entries_touched: total.entries_touched / n,
                fetcher_refreshes: total.fetcher_refreshes / n,
                fetched_entries: total.fetched_entries / n,
                jobmanager_cpu_ms: total.jobmanager_cpu_ms / n as f64,
                wall_ms: total.wall_ms / n as f64,
                cpu_ms: total.cpu_ms / n as f64,
            })
        })
    })
    .join()
    .map_err(|_| anyhow!("{kind} collector thread panicked"))?
}

enum Collector {
    /// One `GET /jobmanager/metrics?get=taskSlotsTotal` per poll: the MetricFetcher refresh
    /// any metric request starts, and nearly nothing else (the real runs' refresh-only poller).
    RefreshOnly,
    Naive {
        job: String,
    },
    Operator(OperatorLike),
    Agent {
        job: String,
        inner: Box<JobCollector>,
    },
}

impl Collector {
    fn new(kind: &str, job: &str, cfg: &Config) -> Self {
        match kind {
            "refresh" => Collector::RefreshOnly,
            "naive" => Collector::Naive { job: job.into() },
            "operator" => Collector::Operator(OperatorLike::new(job)),
            _ => {
                let settings = CollectorSettings::from_config(cfg);
                let settings = if kind == "agent_unsliced" || kind == "agent_batch" {
                    settings.without_slicing()
                } else {
                    settings
                };
                Collector::Agent {
                    job: job.into(),
                    inner: Box::new(JobCollector::new(job, Arc::new(settings))),
                }
            }
        }
    }

    /// One poll; false when the agent's data was not usable yet (the others always are).
    async fn poll(&mut self, client: &FlinkClient, now_ms: u64) -> Result<bool> {
        match self {
            Collector::RefreshOnly => {
                let path = "/jobmanager/metrics?get=taskSlotsTotal";
                client.get(Endpoint::JobManagerConfig, path).await?;
                Ok(true)
            }
            Collector::Naive { job } => {
                naive_poll(client, job).await?;
                Ok(true)
            }
            Collector::Operator(op) => {
                op.poll(client).await?;
                Ok(true)
            }
            Collector::Agent { job, inner } => {
                let (overview, _) = client.jobs_overview().await?;
                let entry = overview
                    .jobs
                    .iter()
                    .find(|j| &j.jid == job)
                    .context("job listed")?;
                let report = inner.poll(client, entry, now_ms).await?;
                Ok(report.unusable.is_none())
            }
        }
    }
}

/// Peak RSS of the real agent binary watching 50 jobs of 1,000 subtasks (10 vertices × 100).
fn measure_rss(sim_rt: &tokio::runtime::Runtime, args: &Args) -> Result<f64> {
    let bin = match &args.agent_bin {
        Some(b) => b.clone(),
        None => flink_autoscale_testkit::binary("flink-autoscale-agent")
            .context("or pass --agent-bin")?,
    };
    let toml: String = (0..50)
        .map(|i| job_toml(&format!("job{i:02}"), 100))
        .collect();
    let scenario = Scenario::from_toml_str(&toml).map_err(|e| anyhow!("{e}"))?;
    let sim = sim_rt.block_on(start(
        scenario,
        "127.0.0.1:0".parse()?,
        SimOptions::default(),
    ))?;
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("agent.toml");
    std::fs::write(
        &config,
        format!(
            "[jobmanager]\nurl = \"{}\"\nrequest_timeout = \"2s\"\nfetcher_update_interval = \"1s\"\n[collector]\npoll_interval = \"2s\"\npoll_deadline = \"2s\"\n[server]\nlisten = \"127.0.0.1:0\"\n[log]\nlevel = \"warn\"\n",
            sim.url()
        ),
    )?;
    let mut agent = Daemon::start(
        "agent",
        Command::new(&bin).args(["run", "--config"]).arg(&config),
        Duration::from_secs(30),
    )?;
    let pid = agent.pid();
    let addr = agent.addr();
    let result = (|| -> Result<f64> {
        std::thread::sleep(Duration::from_secs(args.rss_seconds));
        let metrics = sim_rt.block_on(http_get(&format!("http://{addr}/metrics")))?;
        let watched = metrics
            .lines()
            .find_map(|l| l.strip_prefix("flink_autoscale_agent_jobs_watched "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0);
        let polled = metrics
            .lines()
            .filter(|l| {
                l.starts_with("flink_autoscale_agent_last_successful_poll_timestamp_seconds{")
            })
            .count();
        eprintln!("RSS run: {watched} jobs watched, {polled} polled successfully");
        if watched < 50.0 || polled < 50 {
            bail!("the agent watched {watched} jobs and polled {polled}; expected 50");
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        let hwm_kib: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .context("VmHWM in /proc/<pid>/status")?;
        Ok(hwm_kib / 1024.0)
    })();
    agent.stop(Duration::from_secs(10));
    sim_rt.block_on(sim.shutdown());
    result
}

async fn http_get(url: &str) -> Result<String> {
    use http_body_util::BodyExt;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Empty<bytes::Bytes>>();
    let resp = tokio::time::timeout(Duration::from_secs(10), client.get(url.parse()?)).await??;
    Ok(String::from_utf8_lossy(&resp.into_body().collect().await?.to_bytes()).into_owned())
}

fn print_table(r: &Report) {
    if r.sizes.is_empty() {
        return;
    }
    println!("| subtasks | collector | requests/poll | response bytes/poll | entries touched/poll | modeled JM CPU ms/poll (refresh incl.) | wall ms/poll | agent CPU ms/poll |");
    println!("|---:|---|---:|---:|---:|---:|---:|---:|");
    for s in &r.sizes {
        for (name, c) in &s.collectors {
            println!(
                "| {} | {name} | {} | {} | {} | {:.1} | {:.2} | {:.3} |",
                s.subtasks,
                c.requests,
                c.response_bytes,
                c.entries_touched,
                c.jobmanager_cpu_ms,
                c.wall_ms,
                c.cpu_ms
            );
        }
        let (o, n) = (s.collectors["operator"], s.collectors["naive"]);
        for name in ["agent", "agent_unsliced", "agent_batch"] {
            let a = s.collectors[name];
            println!(
                "| {} | ratio | {name}/operator entries touched = 1/{:.0} (not JobManager CPU) | {name}/naive entries touched = 1/{:.0} | | | | |",
                s.subtasks,
                o.entries_touched as f64 / a.entries_touched.max(1) as f64,
                n.entries_touched as f64 / a.entries_touched.max(1) as f64
            );
        }
    }
    if let Some(rss) = r.rss_mib_50_jobs_1000_subtasks {
        println!();
        println!("peak RSS of the agent watching 50 jobs x 1,000 subtasks: {rss:.1} MiB");
    }
}
