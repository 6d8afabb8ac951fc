//! Load generator for the coordinator: concurrent agents over loopback HTTP keep-alive
//! connections, each sending proposals back to back. Prints proposals/s and latency
//! percentiles.
//!
//! By default it starts the coordinator binary that sits next to this one (build both with
//! `cargo build --release -p flink-autoscale-coordinator -p flink-autoscale-tests --bin
//! bench_coordinator`) on a fresh SQLite file, or on PostgreSQL with `--database postgres://…`
//! (a fresh schema per run). `--url` drives an already running coordinator instead.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bytes::Bytes;
use clap::Parser;
use flink_autoscale_core::protocol::{Proposal, VertexProposal};
use flink_autoscale_testkit::Daemon;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use rand::{Rng, SeedableRng};

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
    /// Run twice, each on a fresh coordinator: without approval rules, then with 20 rules in
    /// the configuration that every proposal is evaluated against (none asks for a person,
    /// so the gates' work is the same), and print the throughput ratio.
    #[arg(long)]
    compare_policies: bool,
    /// Instead of the throughput run: make this many proposals pending (a `manual` rule for
    /// every job), then time reads of the pending queue (`GET /v1/pending`).
    #[arg(long)]
    pending_queue: Option<u32>,
}

/// Approval rules that match nothing the bench sends but must each be tried, then one that
/// matches every proposal with `auto`.
fn policy_config(dir: &std::path::Path) -> Result<PathBuf> {
    let mut text = String::from("[approval]\nttl = \"1h\"\n");
    for i in 0..19 {
        text.push_str(&format!(
            "[[approval.rules]]\nname = \"rule-{i}\"\nregions = [\"zone-{i}-*\"]\nclusters = [\"cluster-9{i}*\"]\njobs = [\"payments-{i}-*\"]\nscale_down_percent_at_least = 50\naction = \"manual\"\n"
        ));
    }
    text.push_str("[[approval.rules]]\nname = \"everything-else\"\naction = \"auto\"\n");
    let path = dir.join("policies.toml");
    std::fs::write(&path, text)?;
    Ok(path)
}

const TOKEN: &str = "bench-agent-token-0123456789abcdef";

/// A coordinator process this tool started; stopped (SIGTERM, then SIGKILL) on drop.
struct Coordinator {
    daemon: Daemon,
    _dir: tempfile::TempDir,
}

fn start_coordinator(args: &Args, config: Option<&std::path::Path>) -> Result<Coordinator> {
    let bin = match &args.coordinator_bin {
        Some(b) => b.clone(),
        None => flink_autoscale_testkit::binary("flink-autoscale-coordinator")
            .context("or pass --coordinator-bin")?,
    };
    let dir = tempfile::tempdir()?;
    let agent_file = dir.path().join("agent.tokens");
    let admin_file = dir.path().join("admin.tokens");
    flink_autoscale_testkit::write_private(&agent_file, &format!("{TOKEN}\n"))?;
    flink_autoscale_testkit::write_private(&admin_file, "bench-admin-token-0123456789abcdef\n")?;
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
    if let Some(config) = config {
        cmd.arg("--config").arg(config);
    }
    cmd.args(&args.coordinator_args);
    let daemon = Daemon::start("coordinator", &mut cmd, Duration::from_secs(30))?
        .stop_on_drop(Duration::from_secs(10));
    Ok(Coordinator { daemon, _dir: dir })
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

/// One measured run: proposals/s, p50 and p99 in ms.
struct Measured {
    per_second: f64,
    p50_ms: f64,
    p99_ms: f64,
}

fn main() -> Result<()> {
    let args = Arc::new(Args::parse());
    if let Some(n) = args.pending_queue {
        return pending_queue(&args, n);
    }
    let off = run(&args, None)?;
    if args.compare_policies {
        let dir = tempfile::tempdir()?;
        let on = run(&args, Some(&policy_config(dir.path())?))?;
        println!(
            "policies_on/off throughput_ratio={:.3} p50_ratio={:.3} p99_ratio={:.3}",
            on.per_second / off.per_second,
            on.p50_ms / off.p50_ms,
            on.p99_ms / off.p99_ms
        );
    }
    Ok(())
}

fn run(args: &Arc<Args>, config: Option<&std::path::Path>) -> Result<Measured> {
    let args = Arc::clone(args);
    let (coordinator, base, token) = match &args.url {
        Some(url) => (
            None,
            url.clone(),
            args.token
                .clone()
                .context("--url needs --token (or BENCH_AGENT_TOKEN)")?,
        ),
        None => {
            let c = start_coordinator(&args, config)?;
            let url = c.daemon.url().to_string();
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
    let policies = if config.is_some() { "on" } else { "off" };
    println!(
        "backend={backend} policies={policies} agents={} seconds={:.1} proposals={count} proposals_per_second={:.0} p50_ms={:.2} p99_ms={:.2} max_ms={:.2} non_200={}",
        args.agents,
        measured.as_secs_f64(),
        count as f64 / measured.as_secs_f64(),
        percentile(&latencies, 50.0),
        percentile(&latencies, 99.0),
        percentile(&latencies, 100.0),
        totals.errors.load(Ordering::Relaxed),
    );
    Ok(Measured {
        per_second: count as f64 / measured.as_secs_f64(),
        p50_ms: percentile(&latencies, 50.0),
        p99_ms: percentile(&latencies, 99.0),
    })
}

const ADMIN_TOKEN: &str = "bench-admin-token-0123456789abcdef";

/// One request on a fresh connection; the status and the body.
async fn call(
    host: &str,
    method: &str,
    path: &str,
    token: &str,
    body: Vec<u8>,
) -> Result<(hyper::StatusCode, Bytes)> {
    let stream = tokio::net::TcpStream::connect(host).await?;
    let (mut sender, conn) = http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let req = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header(hyper::header::HOST, host)
        .header(hyper::header::AUTHORIZATION, format!("Bearer {token}"))
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body)))?;
    let resp = sender.send_request(req).await?;
    let status = resp.status();
    Ok((status, resp.into_body().collect().await?.to_bytes()))
}

/// `n` pending proposals (one per job, so none supersedes another), then timed reads of
/// the pending queue's first page at several page sizes and of a page deep in it.
fn pending_queue(args: &Arc<Args>, n: u32) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("manual.toml");
    std::fs::write(
        &config,
        "[approval]\nttl = \"1h\"\n[[approval.rules]]\nname = \"all\"\naction = \"manual\"\n[gates]\nmax_in_flight_per_cluster = 1000000\nmax_in_flight_per_region = 1000000\n",
    )?;
    let c = start_coordinator(args, Some(&config))?;
    let host = c
        .daemon
        .url()
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let filled = Instant::now();
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut tasks = tokio::task::JoinSet::new();
        for chunk in (0..n)
            .collect::<Vec<_>>()
            .chunks(n.div_ceil(32).max(1) as usize)
        {
            let chunk = chunk.to_vec();
            let host = host.clone();
            let seed: u64 = rng.random();
            tasks.spawn(async move {
                let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
                for job in chunk {
                    let p = proposal(format!("pending-{job}"), job, 300, &mut rng);
                    let (status, body) = call(
                        &host,
                        "POST",
                        "/v1/proposals",
                        TOKEN,
                        serde_json::to_vec(&p)?,
                    )
                    .await?;
                    anyhow::ensure!(
                        status == hyper::StatusCode::OK
                            && body.windows(9).any(|w| w == b"\"pending\""),
                        "proposal {job}: {status} {}",
                        String::from_utf8_lossy(&body)
                    );
                }
                Ok::<_, anyhow::Error>(())
            });
        }
        while let Some(done) = tasks.join_next().await {
            done??;
        }
        println!(
            "pending_proposals={n} filled_in_s={:.1}",
            filled.elapsed().as_secs_f64()
        );
        for (label, path) in [
            ("limit=50", "/v1/pending?limit=50".to_string()),
            ("limit=100", "/v1/pending?limit=100".to_string()),
            ("limit=1000", "/v1/pending?limit=1000".to_string()),
            (
                "cluster_filter",
                "/v1/pending?cluster=cluster-7&limit=100".to_string(),
            ),
        ] {
            let mut times = Vec::new();
            for _ in 0..30 {
                let started = Instant::now();
                let (status, body) = call(&host, "GET", &path, ADMIN_TOKEN, Vec::new()).await?;
                times.push(started.elapsed().as_secs_f64() * 1000.0);
                anyhow::ensure!(status == hyper::StatusCode::OK, "{path}: {status}");
                anyhow::ensure!(
                    body.len() > 100,
                    "{path}: {}",
                    String::from_utf8_lossy(&body)
                );
            }
            times.sort_by(f64::total_cmp);
            println!(
                "pending_read {label} p50_ms={:.2} p99_ms={:.2} max_ms={:.2}",
                times[times.len() / 2],
                times[(times.len() * 99) / 100],
                times[times.len() - 1]
            );
        }
        Ok::<_, anyhow::Error>(())
    })?;
    drop(c);
    Ok(())
}
