//! `[control]`: how the agent asks for approval and acts on it. Every key is optional; a new
//! install recommends only (`realizer = "none"`) and runs the gates locally.

use std::path::PathBuf;

use flink_autoscale_shared::gates::GateConfig;
use flink_autoscale_shared::protocol::{validate_identifier, GateName};
use serde::{Deserialize, Serialize};

use crate::config::{ConfigError, Dur};

/// How an approved decision is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RealizerKind {
    /// Recommend only: proposals and verdicts are recorded and exported, nothing is applied.
    #[default]
    None,
    /// `PUT /jobs/:jid/resource-requirements` on the local JobManager (adaptive scheduler).
    AdaptiveScheduler,
    /// Run a command with the approved decision as JSON on stdin.
    Exec,
}

impl RealizerKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RealizerKind::None => "none",
            RealizerKind::AdaptiveScheduler => "adaptive-scheduler",
            RealizerKind::Exec => "exec",
        }
    }
}

/// The whole `[control]` section.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ControlConfig {
    pub realizer: RealizerKind,
    /// Per-job scaling history, restart times and the in-flight action (JSON, written
    /// atomically). Required unless `realizer = "none"`; without it nothing survives a restart.
    pub state_file: Option<PathBuf>,
    /// Identity sent with every proposal.
    pub agent_id: String,
    pub cluster_id: String,
    pub region: String,
    /// Sizing facts sent with every proposal (the disk-capacity gate uses them).
    pub slots_per_task_manager: u32,
    /// Local disk per TaskManager; 0 = unknown (a coordinator can fill it in per cluster).
    /// With local gates it is required unless `realizer = "none"`, where the disk gate is
    /// then skipped.
    pub disk_bytes_per_task_manager: u64,
    /// How long to watch an actuated job for the approved parallelism before reporting a
    /// timeout.
    pub verify_deadline: Dur,
    /// Wait before retrying an actuation the JobManager answered with 409 (update in flight).
    pub conflict_retry: Dur,
    /// No new proposal for a job this long after a refusal.
    pub refusal_backoff: Dur,
    /// An approval that arrives later than this after its proposal is not applied (the
    /// evidence is stale); the outcome says so.
    pub approval_max_age: Dur,
    /// Retry bounds (jittered exponential) for coordinator calls.
    pub retry_initial: Dur,
    pub retry_max: Dur,
    /// Approval by a coordinator; without this section the gates run locally.
    pub coordinator: Option<CoordinatorConfig>,
    /// Local gates (no coordinator): a file whose existence flags this region as evacuating.
    pub evacuation_flag_file: Option<PathBuf>,
    /// Local gates (no coordinator): thresholds and order, as the coordinator's `[gates]`.
    pub gates: GateConfig,
    /// `realizer = "exec"`.
    pub exec: Option<ExecConfig>,
}

impl Default for ControlConfig {
    fn default() -> Self {
        ControlConfig {
            realizer: RealizerKind::None,
            state_file: None,
            agent_id: "flink-autoscale-agent".into(),
            cluster_id: "default".into(),
            region: "default".into(),
            slots_per_task_manager: 1,
            disk_bytes_per_task_manager: 0,
            verify_deadline: Dur::secs(600),
            conflict_retry: Dur::secs(30),
            refusal_backoff: Dur::secs(300),
            approval_max_age: Dur::secs(900),
            retry_initial: Dur::secs(1),
            retry_max: Dur::secs(120),
            coordinator: None,
            evacuation_flag_file: None,
            gates: GateConfig::default(),
            exec: None,
        }
    }
}

/// `[control.coordinator]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CoordinatorConfig {
    /// `http://host:port` or `https://host:port` of the coordinator.
    pub url: String,
    /// File holding the agent's bearer token (first non-empty line).
    pub token_file: Option<PathBuf>,
    /// PEM file of the CA(s) an `https://` coordinator's certificate must chain to; without
    /// it the system's roots are trusted.
    pub ca_file: Option<PathBuf>,
    pub request_timeout: Dur,
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        CoordinatorConfig {
            url: String::new(),
            token_file: None,
            ca_file: None,
            request_timeout: Dur::secs(5),
        }
    }
}

/// `[control.exec]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExecConfig {
    /// Program and arguments (no shell); the decision arrives as JSON on stdin.
    pub command: Vec<String>,
    /// The command is killed after this long and the actuation counts as failed.
    pub timeout: Dur,
}

impl Default for ExecConfig {
    fn default() -> Self {
        ExecConfig {
            command: Vec::new(),
            timeout: Dur::secs(300),
        }
    }
}

fn err(key: &str, message: impl Into<String>) -> ConfigError {
    ConfigError {
        key: key.to_string(),
        message: message.into(),
    }
}

impl ControlConfig {
    /// Cross-field rules; each failure names the key to fix.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (key, value) in [
            ("control.agent_id", &self.agent_id),
            ("control.cluster_id", &self.cluster_id),
            ("control.region", &self.region),
        ] {
            validate_identifier(key, value).map_err(|e| err(key, e.message))?;
        }
        if self.slots_per_task_manager == 0 {
            return Err(err("control.slots_per_task_manager", "must be at least 1"));
        }
        for (key, d) in [
            ("control.verify_deadline", self.verify_deadline),
            ("control.conflict_retry", self.conflict_retry),
            ("control.approval_max_age", self.approval_max_age),
            ("control.retry_initial", self.retry_initial),
        ] {
            if d.0.is_zero() {
                return Err(err(key, "must be greater than zero"));
            }
        }
        if self.retry_max < self.retry_initial {
            return Err(err(
                "control.retry_max",
                format!(
                    "{} is shorter than control.retry_initial ({})",
                    self.retry_max, self.retry_initial
                ),
            ));
        }
        if self.realizer != RealizerKind::None && self.state_file.is_none() {
            return Err(err(
                "control.state_file",
                format!(
                    "required when control.realizer is {:?}: an action in flight must survive an agent restart",
                    self.realizer.as_str()
                ),
            ));
        }
        if let Some(c) = &self.coordinator {
            let url = c.url.trim();
            let https = url.starts_with("https://");
            if !(url.starts_with("http://") || https) || url.parse::<http::Uri>().is_err() {
                return Err(err(
                    "control.coordinator.url",
                    format!("{url:?} is not an http:// or https:// URL"),
                ));
            }
            if let Some(path) = &c.ca_file {
                if !https {
                    return Err(err(
                        "control.coordinator.ca_file",
                        "set, but control.coordinator.url is not https://",
                    ));
                }
                crate::control::http_client::trusted_roots(Some(path))
                    .map_err(|e| err("control.coordinator.ca_file", e.to_string()))?;
            }
            if c.request_timeout.0.is_zero() {
                return Err(err(
                    "control.coordinator.request_timeout",
                    "must be greater than zero",
                ));
            }
        }
        self.gates
            .validate("control.gates.")
            .map_err(|e| err(&e.field, e.message))?;
        match (&self.exec, self.realizer) {
            (None, RealizerKind::Exec) => {
                return Err(err(
                    "control.exec.command",
                    "required when control.realizer is \"exec\"",
                ))
            }
            (Some(e), _) => {
                if e.command.is_empty() || e.command[0].trim().is_empty() {
                    return Err(err(
                        "control.exec.command",
                        "must name a program, e.g. [\"/usr/local/bin/rescale\"]",
                    ));
                }
                if e.timeout.0.is_zero() {
                    return Err(err("control.exec.timeout", "must be greater than zero"));
                }
            }
            (None, _) => {}
        }
        if self.coordinator.is_none()
            && self.realizer != RealizerKind::None
            && self.disk_bytes_per_task_manager == 0
            && self.gates.order.contains(&GateName::DiskCapacity)
        {
            return Err(err(
                "control.disk_bytes_per_task_manager",
                "required with local gates when control.realizer applies changes (the disk-capacity gate needs it)",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ControlConfig, String> {
        let c: ControlConfig = toml::from_str(text).map_err(|e| e.to_string())?;
        c.validate().map_err(|e| e.to_string())?;
        Ok(c)
    }

    #[test]
    fn defaults_recommend_only_with_local_gates() {
        let c = parse("").unwrap();
        assert_eq!(c.realizer, RealizerKind::None);
        assert!(c.coordinator.is_none());
    }

    #[test]
    fn full_configuration_parses() {
        let c = parse(
            r#"
            realizer = "adaptive-scheduler"
            state_file = "/var/lib/flink-autoscale-agent/state.json"
            disk_bytes_per_task_manager = 10737418240
            region = "eu-west-1"
            verify_deadline = "5min"
            [coordinator]
            url = "http://127.0.0.1:8470"
            token_file = "/etc/flink-autoscale/agent.token"
            [gates]
            min_interval_seconds = 0
            "#,
        )
        .unwrap();
        assert_eq!(c.realizer, RealizerKind::AdaptiveScheduler);
        assert_eq!(c.gates.min_interval_seconds, 0);
        assert_eq!(c.verify_deadline, Dur::secs(300));
    }

    #[test]
    fn bad_values_name_their_key() {
        let cases = [
            (
                "realizer = \"exec\"\nstate_file = \"s\"",
                "control.exec.command",
            ),
            ("realizer = \"adaptive-scheduler\"", "control.state_file"),
            (
                "realizer = \"adaptive-scheduler\"\nstate_file = \"s\"",
                "control.disk_bytes_per_task_manager",
            ),
            ("region = \"eu west\"", "control.region"),
            (
                "slots_per_task_manager = 0",
                "control.slots_per_task_manager",
            ),
            (
                "[coordinator]\nurl = \"ftp://x\"",
                "control.coordinator.url",
            ),
            (
                "retry_initial = \"10s\"\nretry_max = \"1s\"",
                "control.retry_max",
            ),
            (
                "[gates]\ndisk_headroom = -1.0",
                "control.gates.disk_headroom",
            ),
            ("[exec]\ncommand = []", "control.exec.command"),
        ];
        for (text, key) in cases {
            let e = parse(text).unwrap_err();
            assert!(e.starts_with(key), "{text:?}: {e}");
        }
        let not_pem = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(not_pem.path(), "no certificate here\n").unwrap();
        let ca =
            |url: &str, path: &str| format!("[coordinator]\nurl = \"{url}\"\nca_file = \"{path}\"");
        let path = not_pem.path().display().to_string();
        for (text, message) in [
            (ca("http://c:1", &path), "not https://"),
            (ca("https://c:1", "/nonexistent/ca.pem"), "cannot read"),
            (ca("https://c:1", &path), "holds no PEM certificate"),
        ] {
            let e = parse(&text).unwrap_err();
            assert!(
                e.starts_with("control.coordinator.ca_file") && e.contains(message),
                "{text:?}: {e}"
            );
        }
        assert!(parse("realiser = \"none\"")
            .unwrap_err()
            .contains("unknown field"));
    }
}
