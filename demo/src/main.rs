//! The one-command demo: a simulated JobManager, the coordinator (SQLite in a temporary
//! folder) and the agent with the adaptive-scheduler realizer, all on loopback. The terminal
//! shows each job's vertices and every proposal, verdict and rescale as it happens.
//!
//! It runs the three real binaries as child processes, so the sidecar binary stays free of
//! simulator and database code; the test kit starts and stops them. Build them first
//! (`scripts/demo.sh` does): `cargo build --release --bins`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use bytes::Bytes;
use clap::Parser;
use flink_autoscale_testkit::Daemon;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

#[derive(Parser, Debug)]
#[command(
    name = "demo",
    about = "Run simulator + coordinator + agent locally and watch them work"
)]
struct Args {
    /// Scenario for the simulated JobManager.
    #[arg(long, default_value = "simulator/scenarios/demo.toml")]
    scenario: PathBuf,
    /// Where the three binaries are (default: Cargo's target directory this one is in).
    #[arg(long)]
    bin_dir: Option<PathBuf>,
    /// Print the screen once after this many seconds and exit (for scripted checks).
    #[arg(long)]
    exit_after: Option<u64>,
}

const ADMIN_TOKEN: &str = "demo-admin-token";
const AGENT_TOKEN: &str = "demo-agent-token";
/// Least time between two approved rescales of the job, fitted to the demo's compressed day
/// (one load cycle per 15 minutes instead of 24 hours).
const DEMO_MIN_INTERVAL: &str = "60s";

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("demo: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("demo: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// How long each daemon gets to drain after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Starts one of the three daemons with its stderr in `<dir>/<name>.log`; stopped with
/// SIGTERM (SIGKILL after the grace) when dropped.
fn start(name: &str, command: &mut Command, dir: &Path) -> Result<Daemon> {
    let log = dir.join(format!("{name}.log"));
    Ok(Daemon::start_logged(name, command, START_TIMEOUT, &log)?.stop_on_drop(STOP_GRACE))
}

/// The demo's scratch folder, removed on exit.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One of the three binaries: in `--bin-dir`, or beside this one.
fn binary(dir: Option<&Path>, name: &str) -> Result<PathBuf> {
    let Some(dir) = dir else {
        return Ok(flink_autoscale_testkit::binary(name)?);
    };
    let path = dir.join(name);
    if path.is_file() {
        Ok(path)
    } else {
        bail!("{} not found", path.display())
    }
}

async fn run(args: Args) -> Result<()> {
    // Installed first and once: a Ctrl-C or SIGTERM while the daemons start or a screen is
    // drawn is seen at the next tick, and the daemons are stopped, not orphaned.
    let shutdown = flink_autoscale_shared::lifecycle::shutdown_signal();
    tokio::pin!(shutdown);
    let bin_dir = args.bin_dir.as_deref();
    let sim_bin = binary(bin_dir, "flink-sim")?;
    let coordinator_bin = binary(bin_dir, "flink-autoscale-coordinator")?;
    let agent_bin = binary(bin_dir, "flink-autoscale-agent")?;
    if !args.scenario.is_file() {
        bail!(
            "scenario {} not found (run from the repository root)",
            args.scenario.display()
        );
    }

    let scratch =
        Scratch(std::env::temp_dir().join(format!("flink-autoscale-demo-{}", std::process::id())));
    std::fs::create_dir_all(&scratch.0)?;
    let dir = &scratch.0;
    flink_autoscale_testkit::write_private(&dir.join("agent.tokens"), &format!("{AGENT_TOKEN}\n"))?;
    flink_autoscale_testkit::write_private(&dir.join("admin.tokens"), &format!("{ADMIN_TOKEN}\n"))?;

    let mut sim_cmd = Command::new(&sim_bin);
    sim_cmd
        .arg("--scenario")
        .arg(&args.scenario)
        .args(["--listen", "127.0.0.1:0"]);
    let sim = start("flink-sim", &mut sim_cmd, dir)?;

    let coordinator_config = dir.join("coordinator.toml");
    std::fs::write(&coordinator_config, COORDINATOR_TOML)?;
    let mut coordinator_cmd = Command::new(&coordinator_bin);
    coordinator_cmd
        .arg("run")
        .arg("--config")
        .arg(&coordinator_config)
        .args(["--listen", "127.0.0.1:0"])
        // The demo's day lasts 15 minutes: a 10-minute pause between two rescales of one job
        // (the production default) would block most of it.
        .args(["--min-interval", DEMO_MIN_INTERVAL])
        .arg("--database")
        .arg(format!("sqlite:{}", dir.join("coordinator.db").display()))
        .arg("--agent-tokens-file")
        .arg(dir.join("agent.tokens"))
        .arg("--admin-tokens-file")
        .arg(dir.join("admin.tokens"));
    let coordinator = start("coordinator", &mut coordinator_cmd, dir)?;

    let agent_config = dir.join("agent.toml");
    std::fs::write(&agent_config, agent_toml(sim.url(), coordinator.url(), dir))?;
    let mut agent_cmd = Command::new(&agent_bin);
    agent_cmd.arg("run").arg("--config").arg(&agent_config);
    let agent = start("agent", &mut agent_cmd, dir)?;

    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let started = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            _ = tick.tick() => {}
        }
        let screen = render(&client, &sim, &coordinator, &agent, dir, started.elapsed()).await;
        let mut out = std::io::stdout().lock();
        if args.exit_after.is_none() {
            let _ = write!(out, "\x1b[2J\x1b[H");
        }
        let _ = out.write_all(screen.as_bytes());
        let _ = out.flush();
        if let Some(after) = args.exit_after {
            if started.elapsed() >= Duration::from_secs(after) {
                break;
            }
        }
    }
    println!("\nstopping: agent, coordinator, simulator");
    for mut daemon in [agent, coordinator, sim] {
        if daemon.stop(STOP_GRACE).is_none() {
            eprintln!(
                "demo: {} did not stop in {STOP_GRACE:?}; killed it",
                daemon.name()
            );
        }
    }
    Ok(())
}

/// One `manual` rule: every scale-up of the demo job waits for a person, so a newcomer
/// approves the first rescale with a click in the console; scale-downs pass on the gates
/// alone. The rest comes from flags below.
const COORDINATOR_TOML: &str = r#"[approval]
ttl = "10min"

[[approval.rules]]
name = "demo-scale-ups-by-hand"
jobs = ["demo-*"]
direction = "up"
action = "manual"
"#;

/// Short windows so that something happens within a minute or two of wall time.
fn agent_toml(jobmanager: &str, coordinator: &str, dir: &Path) -> String {
    format!(
        r#"[jobmanager]
url = "{jobmanager}"
# The simulator refreshes its metrics on every request (no staleness in this scenario).
fetcher_update_interval = "1s"
request_timeout = "1s"

[collector]
poll_interval = "2s"
poll_deadline = "2s"

[server]
listen = "127.0.0.1:0"

[autoscaler]
"metrics.window" = "40s"
"stabilization.interval" = "20s"
"scale-down.interval" = "2m"

[control]
realizer = "adaptive-scheduler"
state_file = "{state}"
cluster_id = "demo-cluster"
region = "local"
agent_id = "demo-agent"
# Compressed time: after a refusal, propose again within a minute, not five.
refusal_backoff = "30s"

[control.coordinator]
url = "{coordinator}"
token_file = "{tokens}"
"#,
        state = dir.join("agent-state.json").display(),
        tokens = dir.join("agent.tokens").display(),
    )
}

async fn get(
    client: &Client<hyper_util::client::legacy::connect::HttpConnector, Empty<Bytes>>,
    url: &str,
    token: Option<&str>,
) -> Result<String> {
    let mut req = hyper::Request::get(url);
    if let Some(token) = token {
        req = req.header("authorization", format!("Bearer {token}"));
    }
    let resp = tokio::time::timeout(
        Duration::from_secs(2),
        client.request(req.body(Empty::new())?),
    )
    .await
    .map_err(|_| anyhow!("timeout"))??;
    let status = resp.status();
    let body = resp.into_body().collect().await?.to_bytes();
    if !status.is_success() {
        bail!("{url}: HTTP {status}");
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// One Prometheus sample: metric name, labels, value.
struct PromSample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

fn parse_prometheus(text: &str) -> Vec<PromSample> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let value: f64 = value.parse().ok()?;
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => (name, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            let labels = labels
                .split("\",")
                .filter_map(|kv| {
                    let (k, v) = kv.split_once('=')?;
                    Some((k.trim().to_string(), v.trim_matches('"').to_string()))
                })
                .collect();
            Some(PromSample {
                name: name.to_string(),
                labels,
                value,
            })
        })
        .collect()
}

/// Per vertex: the figures shown in the table.
#[derive(Default)]
struct VertexRow {
    name: String,
    busy: Option<f64>,
    true_rate: Option<f64>,
    target_rate: Option<f64>,
    lag: Option<f64>,
    parallelism: Option<f64>,
    recommended: Option<f64>,
}

async fn render(
    client: &Client<hyper_util::client::legacy::connect::HttpConnector, Empty<Bytes>>,
    sim: &Daemon,
    coordinator: &Daemon,
    agent: &Daemon,
    dir: &Path,
    elapsed: Duration,
) -> String {
    let mut out = String::new();
    let secs = elapsed.as_secs();
    out.push_str(&format!(
        "flink-autoscale demo — {:02}:{:02} elapsed — Ctrl-C stops everything\n\
         simulator {}   coordinator {}   agent {}/metrics\n\
         console   {}/ui/   sign in with the admin token {ADMIN_TOKEN}\n\
         logs in {}\n\n",
        secs / 60,
        secs % 60,
        sim.url(),
        coordinator.url(),
        agent.url(),
        coordinator.url(),
        dir.display()
    ));

    match get(client, &format!("{}/metrics", agent.url()), None).await {
        Ok(text) => {
            let mut jobs: BTreeMap<String, BTreeMap<String, VertexRow>> = BTreeMap::new();
            for s in parse_prometheus(&text) {
                let (Some(job), Some(vertex)) = (s.labels.get("job_id"), s.labels.get("vertex_id"))
                else {
                    continue;
                };
                let row = jobs
                    .entry(job.clone())
                    .or_default()
                    .entry(vertex.clone())
                    .or_default();
                if let Some(name) = s.labels.get("vertex_name") {
                    row.name = name.clone();
                }
                let field = match s.name.as_str() {
                    "flink_autoscale_agent_vertex_busy_ratio" => &mut row.busy,
                    "flink_autoscale_agent_vertex_true_processing_rate_records_per_second" => {
                        &mut row.true_rate
                    }
                    "flink_autoscale_agent_vertex_target_data_rate_records_per_second" => {
                        &mut row.target_rate
                    }
                    "flink_autoscale_agent_vertex_lag_records" => &mut row.lag,
                    "flink_autoscale_agent_vertex_parallelism" => &mut row.parallelism,
                    "flink_autoscale_agent_vertex_recommended_parallelism" => &mut row.recommended,
                    _ => continue,
                };
                *field = Some(s.value);
            }
            if jobs.is_empty() {
                out.push_str("waiting for the agent's first polls...\n");
            }
            for (job, mut vertices) in jobs {
                let details = get(client, &format!("{}/jobs/{job}", sim.url()), None).await;
                let details: serde_json::Value = details
                    .ok()
                    .and_then(|t| serde_json::from_str(&t).ok())
                    .unwrap_or_default();
                for v in details["vertices"].as_array().into_iter().flatten() {
                    if let (Some(id), Some(name)) = (v["id"].as_str(), v["name"].as_str()) {
                        if let Some(row) = vertices.get_mut(id) {
                            row.name = name.to_string();
                        }
                    }
                }
                let job_name = details["name"].as_str().unwrap_or("");
                out.push_str(&format!("job {job} {job_name}\n"));
                out.push_str(&format!(
                    "  {:<28} {:>6} {:>14} {:>14} {:>10} {:>5} {:>6}\n",
                    "vertex", "busy", "true rate/s", "target rate/s", "lag", "p", "wants"
                ));
                for (id, row) in vertices {
                    let name = if row.name.is_empty() {
                        id[..8.min(id.len())].to_string()
                    } else {
                        row.name.clone()
                    };
                    out.push_str(&format!(
                        "  {:<28} {:>6} {:>14} {:>14} {:>10} {:>5} {:>6}\n",
                        truncate(&name, 28),
                        fmt(row.busy.map(|b| b * 100.0), "%"),
                        fmt(row.true_rate, ""),
                        fmt(row.target_rate, ""),
                        fmt(row.lag, ""),
                        fmt(row.parallelism, ""),
                        fmt(row.recommended, ""),
                    ));
                }
                out.push('\n');
            }
        }
        Err(e) => out.push_str(&format!("agent metrics unavailable: {e}\n\n")),
    }

    out.push_str("proposals (newest first)\n");
    match get(
        client,
        &format!("{}/v1/decisions?limit=8", coordinator.url()),
        Some(ADMIN_TOKEN),
    )
    .await
    {
        Ok(text) => {
            let page: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
            let decisions = page["decisions"].as_array().cloned().unwrap_or_default();
            if decisions.is_empty() {
                out.push_str("  none yet: the agent proposes once a metric window is full\n");
            }
            for d in decisions {
                out.push_str(&decision_line(&d));
            }
        }
        Err(e) => out.push_str(&format!("  coordinator audit unavailable: {e}\n")),
    }
    out
}

/// One audit record: time, job, verdict, the outcome where there can be one, and the
/// refusal reasons.
fn decision_line(d: &serde_json::Value) -> String {
    let reasons: Vec<&str> = d["reasons"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["message"].as_str())
        .collect();
    let outcome = outcome_text(d)
        .map(|o| format!("  outcome: {o}"))
        .unwrap_or_default();
    format!(
        "  {}  job {}  {}{outcome}{}\n",
        clock_time(&d["received_at"]),
        truncate(d["job_id"].as_str().unwrap_or("?"), 8),
        d["verdict"].as_str().unwrap_or("?"),
        if reasons.is_empty() {
            String::new()
        } else {
            format!("  ({})", reasons.join("; "))
        },
    )
}

/// What became of a decision, only where something can follow it: a refusal has no outcome;
/// an approval is applied by the agent, which then reports; a pending proposal waits for a
/// person in the console.
fn outcome_text(d: &serde_json::Value) -> Option<String> {
    match d["verdict"].as_str()? {
        "approved" => Some(match d["outcome"]["status"].as_str() {
            Some(status) => match d["outcome"]["restart_ms"].as_u64() {
                Some(ms) => format!("{status} ({:.1} s restart)", ms as f64 / 1000.0),
                None => status.to_string(),
            },
            None => "applying (waiting for the agent's report)".to_string(),
        }),
        "pending" => Some("waiting for approval: console → Pending → Approve".to_string()),
        _ => None,
    }
}

fn truncate(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

fn fmt(v: Option<f64>, suffix: &str) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v:.0}{suffix}"),
        Some(_) => "NaN".into(),
        None => "-".into(),
    }
}

/// A decision's `received_at` (Unix milliseconds, or text) as `HH:MM:SS` UTC.
fn clock_time(v: &serde_json::Value) -> String {
    match v.as_u64() {
        Some(ms) => {
            let secs = (ms / 1000) % 86_400;
            format!(
                "{:02}:{:02}:{:02} UTC",
                secs / 3600,
                (secs / 60) % 60,
                secs % 60
            )
        }
        None => v.as_str().unwrap_or("?").to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_approvals_and_pending_proposals_have_an_outcome() {
        let refused = json!({"verdict": "refused", "outcome": null, "received_at": 0,
            "job_id": "0123456789abcdef", "reasons": [{"message": "too soon"}]});
        assert_eq!(outcome_text(&refused), None);
        assert_eq!(
            decision_line(&refused),
            "  00:00:00 UTC  job 01234567  refused  (too soon)\n"
        );
        let approved = json!({"verdict": "approved", "outcome": null});
        assert_eq!(
            outcome_text(&approved).as_deref(),
            Some("applying (waiting for the agent's report)")
        );
        let applied = json!({"verdict": "approved",
            "outcome": {"status": "applied", "restart_ms": 3000}});
        assert_eq!(
            outcome_text(&applied).as_deref(),
            Some("applied (3.0 s restart)")
        );
        let pending = json!({"verdict": "pending", "outcome": null});
        assert_eq!(
            outcome_text(&pending).as_deref(),
            Some("waiting for approval: console → Pending → Approve")
        );
    }
}
