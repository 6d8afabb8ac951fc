//! `flink-autoscale-agent run --config FILE` as a daemon next to the cluster, as operators run
//! it: started under the cluster's watchdog, observed through its HTTP server (`/metrics`) and
//! its JSON log lines, stopped by pid when dropped.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use flink_autoscale_testkit::listening_url;
use hyper::Method;
use serde_json::Value;

use super::{Daemon, FlinkCluster, FlinkRest, HarnessError};

const STEP: &str = "agent daemon";
const ANNOUNCE_TIMEOUT: Duration = Duration::from_secs(30);

/// A running agent daemon.
#[derive(Debug)]
pub struct AgentDaemon {
    process: Daemon,
    server: FlinkRest,
}

impl AgentDaemon {
    /// Runs `<agent> run --config <config>` under `cluster`'s watchdog (the config must log
    /// JSON and listen on a loopback port) and waits until it announces its HTTP address.
    pub async fn start(
        cluster: &FlinkCluster,
        agent: &Path,
        config: &Path,
    ) -> Result<Self, HarnessError> {
        Self::start_as(cluster, "agent", agent, config).await
    }

    /// Like [`Self::start`], logging to `<run>/log/<role>/`, so that agents running at once
    /// keep apart.
    pub async fn start_as(
        cluster: &FlinkCluster,
        role: &str,
        agent: &Path,
        config: &Path,
    ) -> Result<Self, HarnessError> {
        let mut command = Command::new(agent);
        command.arg("run").arg("--config").arg(config);
        let mut process = cluster.spawn_helper(role, command)?;
        let console = process.console_log();
        let deadline = Instant::now() + ANNOUNCE_TIMEOUT;
        loop {
            let text = std::fs::read_to_string(&console).unwrap_or_default();
            if let Some(url) = text.lines().find_map(listening_url) {
                return Ok(Self {
                    server: FlinkRest::new(url),
                    process,
                });
            }
            if let Some(status) = process.exit_status() {
                return Err(HarnessError::new(
                    STEP,
                    format!("the agent exited ({status}):\n{}", process.log_tail(40)),
                ));
            }
            if Instant::now() >= deadline {
                return Err(HarnessError::new(
                    STEP,
                    format!(
                        "the agent did not announce its address within {ANNOUNCE_TIMEOUT:?}:\n{}",
                        process.log_tail(40)
                    ),
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// True while the agent process has not exited.
    pub fn is_running(&mut self) -> bool {
        self.process.exit_status().is_none()
    }

    /// The agent's Prometheus text from `/metrics`.
    pub async fn metrics(&self) -> Result<String, HarnessError> {
        let (status, body) = self
            .server
            .send_raw(Method::GET, "/metrics", None, Bytes::new())
            .await?;
        if !status.is_success() {
            return Err(HarnessError::new(
                STEP,
                format!("GET /metrics answered {status}"),
            ));
        }
        Ok(String::from_utf8_lossy(&body).into_owned())
    }

    /// Every JSON log event the agent wrote so far (`[log] format = "json"`), in order.
    pub fn log_events(&self) -> Vec<Value> {
        std::fs::read_to_string(self.process.console_log())
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(Value::is_object)
            .collect()
    }

    /// The log events whose message is `message`.
    pub fn events_with_message(&self, message: &str) -> Vec<Value> {
        self.log_events()
            .into_iter()
            .filter(|event| event["message"] == message)
            .collect()
    }

    /// The last lines of the agent's output, for assertion messages.
    pub fn log_tail(&self, max_lines: usize) -> String {
        self.process.log_tail(max_lines)
    }
}

/// The sum of every sample of metric `name` in Prometheus text whose labels include all of
/// `labels` (0 when there is none).
pub fn metric_sum(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (metric, label_text) = match series.split_once('{') {
                Some((metric, rest)) => (metric, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            let wanted = metric == name
                && labels
                    .iter()
                    .all(|(k, v)| label_text.contains(&format!("{k}=\"{v}\"")));
            wanted.then(|| value.parse::<f64>().ok()).flatten()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::metric_sum;

    #[test]
    fn sums_the_matching_series() {
        let text = "# TYPE a counter\na{kind=\"x\",job_id=\"j\"} 2\na{kind=\"y\"} 3\nab 7\na 1\n";
        assert_eq!(metric_sum(text, "a", &[]), 6.0);
        assert_eq!(metric_sum(text, "a", &[("kind", "x")]), 2.0);
        assert_eq!(metric_sum(text, "a", &[("kind", "z")]), 0.0);
        assert_eq!(metric_sum(text, "ab", &[]), 7.0);
    }
}
