//! Runs `flink-autoscale-agent collect` against a cluster, as a user would, and returns the
//! JSON rounds it prints (one line per poll).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

use super::{ClusterSettings, FlinkCluster, HarnessError, LoadJob, LoadJobSpec};

const STEP: &str = "agent collect";
const JOB_START_TIMEOUT: Duration = Duration::from_secs(120);

/// How `collect` runs: one poll and exit, or polling every `interval` (a duration such as
/// `11s`; at least Flink's 10 s MetricFetcher interval, or polls see stale data) until the
/// rounds read so far satisfy `done`; the agent is then killed.
pub enum Polls<'a> {
    Once,
    Until {
        interval: &'a str,
        done: &'a dyn Fn(&[Value]) -> bool,
    },
}

/// Runs `<agent> collect --jobmanager <url>` and returns its rounds. Fails when the agent
/// cannot start, prints something other than JSON lines, exits early, or `timeout` passes
/// first (the error then carries the rounds read so far).
pub async fn run_collect(
    agent: &Path,
    url: &str,
    polls: Polls<'_>,
    timeout: Duration,
) -> Result<Vec<Value>, HarnessError> {
    let mut command = tokio::process::Command::new(agent);
    command.args(["collect", "--jobmanager", url]);
    match polls {
        Polls::Once => command.arg("--once"),
        Polls::Until { interval, .. } => command.args(["--poll-interval", interval]),
    };
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| HarnessError::new(STEP, format!("cannot start {}: {e}", agent.display())))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| HarnessError::new(STEP, "the agent's stdout is not piped"))?;
    let mut lines = BufReader::new(stdout).lines();
    let mut rounds: Vec<Value> = Vec::new();
    let finished = |rounds: &[Value]| match polls {
        Polls::Once => !rounds.is_empty(),
        Polls::Until { done, .. } => done(rounds),
    };
    let read = async {
        while !finished(&rounds) {
            let line = lines
                .next_line()
                .await
                .map_err(|e| HarnessError::new(STEP, format!("reading the agent's output: {e}")))?
                .ok_or_else(|| {
                    HarnessError::new(
                        STEP,
                        format!("the agent exited after {} rounds", rounds.len()),
                    )
                })?;
            let round = serde_json::from_str(&line).map_err(|e| {
                HarnessError::new(
                    STEP,
                    format!("the agent printed a line that is not JSON ({e}): {line}"),
                )
            })?;
            rounds.push(round);
        }
        Ok::<(), HarnessError>(())
    };
    let outcome = tokio::time::timeout(timeout, read).await;
    let _ = child.start_kill();
    let _ = child.wait().await;
    match outcome {
        Ok(Ok(())) => Ok(rounds),
        Ok(Err(e)) => Err(e),
        Err(_) => {
            Err(HarnessError::new(
                STEP,
                format!(
                "the agent's rounds did not reach the goal within {timeout:?}; {} rounds, the last: {}",
                rounds.len(),
                rounds.last().map_or_else(|| "none".to_owned(), Value::to_string)
            ),
            ))
        }
    }
}

/// The entry for job `jid` in a round, if the agent reported it.
pub fn job_in_round<'a>(round: &'a Value, jid: &str) -> Option<&'a Value> {
    round["jobs"]
        .as_array()?
        .iter()
        .find(|job| job["job_id"] == jid)
}

/// A running load job and an agent binary, ready for an agent test.
#[derive(Debug)]
pub struct AgentSetup {
    pub agent: PathBuf,
    pub cluster: FlinkCluster,
    pub job: LoadJob,
}

/// Locates `flink-autoscale-agent` and starts the cluster, then runs the load job with
/// `spec` and waits until it is RUNNING.
pub async fn start_agent_setup(
    settings: ClusterSettings,
    spec: &LoadJobSpec,
) -> Result<AgentSetup, HarnessError> {
    let agent = flink_autoscale_testkit::binary("flink-autoscale-agent")?;
    let t0 = Instant::now();
    let mut cluster = FlinkCluster::start(settings).await?;
    eprintln!(
        "[timing] cluster start: {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    let job = cluster.submit_load_job(spec, JOB_START_TIMEOUT).await?;
    Ok(AgentSetup {
        agent,
        cluster,
        job,
    })
}
