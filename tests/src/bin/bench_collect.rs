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
use flink_autoscale_agent::flink::FlinkClient;
use flink_autoscale_simulator::{start, Scenario, SimControl, SimOptions};
use flink_autoscale_testkit::Daemon;
use flink_autoscale_tests::reference_collectors::{naive_poll, OperatorLike};
use serde::Serialize;

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
}

#[derive(Debug, Clone, Copy, Default, Serialize)]
struct Cost {
    requests: u64,
    response_bytes: u64,
    entries_touched: u64,
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
    rss_mib_50_jobs_1000_subtasks: f64,
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
    for &subtasks in &args.sizes {
        let p = (subtasks / VERTICES).max(1);
        let scenario =
            Scenario::from_toml_str(&job_toml("bench", p)).map_err(|e| anyhow!("{e}"))?;
        let sim = sim_rt.block_on(start(
            scenario,
            "127.0.0.1:0".parse()?,
            SimOptions {
                manual_clock: true,
                ..Default::default()
            },
        ))?;
        let ctl = sim.control();
        ctl.advance(Duration::from_secs(120));
        let url = sim.url();
        let mut collectors = BTreeMap::new();
        for kind in ["naive", "operator", "agent", "agent_unsliced"] {
            let cost = measure(kind, &url, &ctl, args.polls)?;
            eprintln!("{subtasks:>6} subtasks  {kind:<14} {cost:?}");
            collectors.insert(kind, cost);
        }
        sim_rt.block_on(sim.shutdown());
        // The same job on a JobManager with the batch endpoints (FLINK-39617).
        let batch = format!("[server]\nbatch_metrics = true\n{}", job_toml("bench", p));
        let scenario = Scenario::from_toml_str(&batch).map_err(|e| anyhow!("{e}"))?;
        let sim = sim_rt.block_on(start(
            scenario,
            "127.0.0.1:0".parse()?,
            SimOptions {
                manual_clock: true,
                ..Default::default()
            },
        ))?;
        let ctl = sim.control();
        ctl.advance(Duration::from_secs(120));
        let cost = measure("agent_batch", &sim.url(), &ctl, args.polls)?;
        eprintln!("{subtasks:>6} subtasks  agent_batch    {cost:?}");
        collectors.insert("agent_batch", cost);
        sim_rt.block_on(sim.shutdown());
        sizes.push(SizeResult {
            subtasks: p * VERTICES,
            vertices: VERTICES,
            collectors,
        });
    }
    let rss = measure_rss(&sim_rt, &args)?;
    let report = Report {
        sizes,
        rss_mib_50_jobs_1000_subtasks: rss,
    };
    print_table(&report);
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    }
    Ok(())
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

fn bench_config(url: &str) -> Result<Config> {
    let toml = format!(
        "[jobmanager]\nurl = \"{url}\"\nrequest_timeout = \"15s\"\nmax_response_bytes = 268435456\nfetcher_update_interval = \"1s\"\n[collector]\npoll_interval = \"15s\"\npoll_deadline = \"15s\"\nnames_refresh_interval = \"1h\"\nslow_refresh_interval = \"1h\""
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
/// `polls` measured polls, each after 15 s of simulated time. Returns the average per poll.
fn measure(kind: &'static str, url: &str, ctl: &SimControl, polls: u32) -> Result<Cost> {
    let url = url.to_string();
    let ctl = ctl.clone();
    std::thread::spawn(move || -> Result<Cost> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(async move {
            let cfg = bench_config(&url)?;
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
                ctl.advance(Duration::from_secs(15));
                now_ms += 15_000;
            }
            let mut total = Cost::default();
            for _ in 0..polls {
                ctl.advance(Duration::from_secs(15));
                now_ms += 15_000;
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
                total.wall_ms += wall.as_secs_f64() * 1000.0;
                total.cpu_ms += (cpu1 - cpu0) as f64 / 1e6;
            }
            let n = u64::from(polls.max(1));
            Ok(Cost {
                requests: total.requests / n,
                response_bytes: total.response_bytes / n,
                entries_touched: total.entries_touched / n,
                wall_ms: total.wall_ms / n as f64,
                cpu_ms: total.cpu_ms / n as f64,
            })
        })
    })
    .join()
    .map_err(|_| anyhow!("{kind} collector thread panicked"))?
}

enum Collector {
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
    println!("| subtasks | collector | requests/poll | response bytes/poll | entries touched/poll | wall ms/poll | agent CPU ms/poll |");
    println!("|---:|---|---:|---:|---:|---:|---:|");
    for s in &r.sizes {
        for (name, c) in &s.collectors {
            println!(
                "| {} | {name} | {} | {} | {} | {:.2} | {:.3} |",
                s.subtasks, c.requests, c.response_bytes, c.entries_touched, c.wall_ms, c.cpu_ms
            );
        }
        let (o, n) = (s.collectors["operator"], s.collectors["naive"]);
        for name in ["agent", "agent_unsliced", "agent_batch"] {
            let a = s.collectors[name];
            println!(
                "| {} | ratio | {name}/operator entries = 1/{:.0} | {name}/naive entries = 1/{:.0} | | | |",
                s.subtasks,
                o.entries_touched as f64 / a.entries_touched.max(1) as f64,
                n.entries_touched as f64 / a.entries_touched.max(1) as f64
            );
        }
    }
    println!();
    println!(
        "peak RSS of the agent watching 50 jobs x 1,000 subtasks: {:.1} MiB",
        r.rss_mib_50_jobs_1000_subtasks
    );
}
