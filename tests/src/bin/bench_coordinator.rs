//! Load generator for the coordinator: concurrent agents over loopback HTTP keep-alive
//! connections, each sending proposals back to back. Prints proposals/s and latency
//! percentiles.
//!
//! By default it starts the coordinator binary that sits next to this one (build both with
//! `cargo build --release -p flink-autoscale-coordinator -p flink-autoscale-tests --bin
//! bench_coordinator`) on a fresh SQLite file, or on PostgreSQL with `--database postgres://…`
//! (a fresh schema per run). `--url` drives an already running coordinator instead.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use clap::Parser;
use flink_autoscale_shared::protocol::{Proposal, VertexProposal};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use rand::{Rng, SeedableRng};
use std::io::BufRead;

#[derive(Parser, Debug)]
#[command(
    about = "Drive the coordinator with concurrent agents and report proposals/s and latency"
)]
struct Args {
    /// Store for the coordinator this tool starts: `sqlite` (a fresh temporary file) or a
    /// postgres:// URL (a fresh schema is created for the run).
    #[arg(long, default_value = "sqlite")]
    database: String,
    /// Drive a running coordinator at this base URL (http://HOST:PORT) instead of starting one.
    #[arg(long)]
    url: Option<String>,
    /// Agent token for --url.
    #[arg(long, env = "BENCH_AGENT_TOKEN")]
    token: Option<String>,
    /// Coordinator binary (default: next to this binary).
    #[arg(long)]
    coordinator_bin: Option<PathBuf>,
    /// Concurrent agents (one keep-alive connection each).
    #[arg(long, default_value_t = 64)]
    agents: usize,
    /// Measured seconds (after warm-up).
    #[arg(long, default_value_t = 20)]
    seconds: u64,
    /// Warm-up seconds, not measured.
    #[arg(long, default_value_t = 2)]
    warmup_seconds: u64,
    /// Distinct jobs the agents propose for.
    #[arg(long, default_value_t = 30_000)]
    jobs: u32,
    /// Clusters the jobs are spread over.
    #[arg(long, default_value_t = 300)]
    clusters: u32,
    /// Extra flags passed to `flink-autoscale-coordinator run`.
    #[arg(long, allow_hyphen_values = true, num_args = 1..)]
    coordinator_args: Vec<String>,
}

const TOKEN: &str = "bench-agent-token-0123456789abcdef";

/// A coordinator process this tool started; killed on drop.
struct Coordinator {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Coordinator {
    fn drop(&mut self) {
        flink_autoscale_shared::lifecycle::terminate_child(
            &mut self.child,
            Duration::from_secs(10),
        );
    }
}

fn start_coordinator(args: &Args) -> Result<Coordinator> {
    let bin = match &args.coordinator_bin {
        Some(b) => b.clone(),
        None => std::env::current_exe()?
            .parent()
            .context("binary has no directory")?
            .join("flink-autoscale-coordinator"),
    };
    if !bin.exists() {
        bail!(
            "{} not found: build it with `cargo build --release -p flink-autoscale-coordinator` or pass --coordinator-bin",
            bin.display()
        );
    }
    let dir = tempfile::tempdir()?;
    let agent_file = dir.path().join("agent.tokens");
    let admin_file = dir.path().join("admin.tokens");
    std::fs::write(&agent_file, format!("{TOKEN}\n"))?;
    std::fs::write(&admin_file, "bench-admin-token-0123456789abcdef\n")?;
    let mut cmd = Command::new(&bin);
    cmd.arg("run")
        .arg("--listen")
        .arg("127.0.0.1:0")
        .arg("--agent-tokens-file")
        .arg(&agent_file)
        .arg("--admin-tokens-file")
        .arg(&admin_file)
        .arg("--log-level")
        .arg("warn");
    if args.database == "sqlite" {
        cmd.arg("--database").arg(format!(
            "sqlite:{}",
            dir.path().join("coordinator.db").display()
        ));
    } else {
        let schema = format!("bench_{}_{}", std::process::id(), unix_ms());
        eprintln!(
            "using PostgreSQL schema {schema} (drop it afterwards: DROP SCHEMA {schema} CASCADE)"
        );
        cmd.arg("--database")
            .arg(&args.database)
            .arg("--database-schema")
            .arg(schema);
    }
    cmd.args(&args.coordinator_args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let stdout = child.stdout.take().context("no stdout")?;
    let mut line = String::new();
    std::io::BufReader::new(stdout).read_line(&mut line)?;
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .with_context(|| format!("unexpected first line from the coordinator: {line:?}"))?
        .to_string();
    Ok(Coordinator {
        child,
        url,
        _dir: dir,
    })
}

fn unix_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

/// A realistic proposal: a three-vertex job, one vertex moving by one step.
fn proposal(id: String, job: u32, clusters: u32, rng: &mut impl Rng) -> Proposal {
    let cluster = job % clusters;
    let vertex = |n: u32, name: &str, cur: u32, new: u32| VertexProposal {
        id: format!("{job:016x}{n:016x}"),
        name: name.to_string(),
        slot_sharing_group: None,
        current_parallelism: cur,
        proposed_parallelism: new,
        evidence: None,
    };
    let current = rng.random_range(2..=16);
    let proposed = if rng.random_bool(0.5) {
        current + 1
    } else {
        current - 1
    };
    Proposal {
        proposal_id: id,
        agent_id: format!("agent-{cluster}"),
        cluster_id: format!("cluster-{cluster}"),
        region: format!("region-{}", cluster % 4),
        job_id: format!("{job:032x}"),
        job_name: format!("job-{job}"),
        vertices: vec![
            vertex(1, "Source", current, current),
            vertex(2, "Map", current, proposed),
            vertex(3, "Sink", current, current),
        ],
        checkpoint_state_bytes: Some(1 << 30),
        slots_per_task_manager: 4,
        disk_bytes_per_task_manager: 20 << 30,
        current_task_managers: current.div_ceil(4),
    }
}

struct Totals {
    measuring: AtomicBool,
    stop: AtomicBool,
    errors: AtomicU64,
}

async fn agent(
    index: usize,
    addr: String,
    host: String,
    token: String,
    args: Arc<Args>,
    totals: Arc<Totals>,
) -> Result<Vec<u32>> {
    let stream = tokio::net::TcpStream::connect(&addr).await?;
    stream.set_nodelay(true)?;
    let (mut sender, conn) = http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let mut rng = rand::rngs::StdRng::from_rng(&mut rand::rng());
    let mut latencies_us = Vec::with_capacity(200_000);
    let mut n: u64 = 0;
    let run = unix_ms();
    while !totals.stop.load(Ordering::Relaxed) {
        n += 1;
        let job = rng.random_range(0..args.jobs);
        let body = serde_json::to_vec(&proposal(
            format!("bench-{run}-{index}-{n}"),
            job,
            args.clusters,
            &mut rng,
        ))?;
        let req = hyper::Request::post("/v1/proposals")
            .header(hyper::header::HOST, &host)
            .header(hyper::header::AUTHORIZATION, format!("Bearer {token}"))
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))?;
        let started = Instant::now();
        sender.ready().await?;
        let resp = sender.send_request(req).await?;
        let status = resp.status();
        let _ = resp.into_body().collect().await?;
        let elapsed = started.elapsed();
        if status != hyper::StatusCode::OK {
            totals.errors.fetch_add(1, Ordering::Relaxed);
        }
        if totals.measuring.load(Ordering::Relaxed) {
            latencies_us.push(u32::try_from(elapsed.as_micros()).unwrap_or(u32::MAX));
        }
    }
    Ok(latencies_us)
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    f64::from(sorted[rank]) / 1000.0
}

fn main() -> Result<()> {
    let args = Arc::new(Args::parse());
    let (coordinator, base, token) = match &args.url {
        Some(url) => (
            None,
            url.clone(),
            args.token
                .clone()
                .context("--url needs --token (or BENCH_AGENT_TOKEN)")?,
        ),
        None => {
            let c = start_coordinator(&args)?;
            let url = c.url.clone();
            (Some(c), url, TOKEN.to_string())
        }
    };
    let host = base
        .strip_prefix("http://")
        .with_context(|| format!("only http:// URLs are supported, got {base}"))?
        .trim_end_matches('/')
        .to_string();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let totals = Arc::new(Totals {
        measuring: AtomicBool::new(false),
        stop: AtomicBool::new(false),
        errors: AtomicU64::new(0),
    });
    let (mut latencies, measured) = runtime.block_on(async {
        let workers: Vec<_> = (0..args.agents)
            .map(|i| {
                tokio::spawn(agent(
                    i,
                    host.clone(),
                    host.clone(),
                    token.clone(),
                    Arc::clone(&args),
                    Arc::clone(&totals),
                ))
            })
            .collect();
        tokio::time::sleep(Duration::from_secs(args.warmup_seconds)).await;
        totals.measuring.store(true, Ordering::Relaxed);
        let started = Instant::now();
        tokio::time::sleep(Duration::from_secs(args.seconds)).await;
        totals.measuring.store(false, Ordering::Relaxed);
        let measured = started.elapsed();
        totals.stop.store(true, Ordering::Relaxed);
        let mut all = Vec::new();
        for w in workers {
            all.extend(w.await??);
        }
        Ok::<_, anyhow::Error>((all, measured))
    })?;
    drop(coordinator);
    latencies.sort_unstable();
    let count = latencies.len();
    let backend = if args.url.is_some() {
        "external"
    } else if args.database == "sqlite" {
        "sqlite"
    } else {
        "postgres"
    };
    println!(
        "backend={backend} agents={} seconds={:.1} proposals={count} proposals_per_second={:.0} p50_ms={:.2} p99_ms={:.2} max_ms={:.2} non_200={}",
        args.agents,
        measured.as_secs_f64(),
        count as f64 / measured.as_secs_f64(),
        percentile(&latencies, 50.0),
        percentile(&latencies, 99.0),
        percentile(&latencies, 100.0),
        totals.errors.load(Ordering::Relaxed),
    );
    Ok(())
}
