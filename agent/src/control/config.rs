//! `[control]`: how the agent asks for approval and acts on it. Every key is optional; a new
//! install recommends only (`realizer = "none"`) and runs the gates locally.

use std::path::PathBuf;

use flink_autoscale_core::gates::GateConfig;
use flink_autoscale_core::protocol::{validate_identifier, GateName};
use serde::{Deserialize, Serialize};

use flink_autoscale_shared::files::{is_low_entropy, SecretPermissions};

use crate::config::{count, within, ConfigError, Dur};

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
    /// Write the parallelism into the job's `FlinkDeployment` (Flink Kubernetes Operator),
    /// then apply it in place as `adaptive-scheduler` does.
    KubernetesOperator,
}

impl RealizerKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RealizerKind::None => "none",
            RealizerKind::AdaptiveScheduler => "adaptive-scheduler",
            RealizerKind::Exec => "exec",
            RealizerKind::KubernetesOperator => "kubernetes-operator",
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
    /// Local gates (no coordinator): pause switches, reread when the file changes (format in
    /// `gatekeeper/pause_file.rs` and docs/agent.md).
    pub pause_file: Option<PathBuf>,
    /// Local gates (no coordinator): thresholds and order, as the coordinator's `[gates]`.
    pub gates: GateConfig,
    /// `realizer = "exec"`.
    pub exec: Option<ExecConfig>,
    /// `realizer = "kubernetes-operator"`.
    pub kubernetes: Option<KubernetesConfig>,
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
            pause_file: None,
            gates: GateConfig::default(),
            exec: None,
            kubernetes: None,
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
    /// Accept a token file that other users can read (refused otherwise).
    pub allow_readable_token_file: bool,
    /// PEM file of the CA(s) an `https://` coordinator's certificate must chain to; without
    /// it the system's roots are trusted.
    pub ca_file: Option<PathBuf>,
    pub request_timeout: Dur,
    /// Longest wait between two polls of a verdict pending a person's approval (the polls
    /// start at `control.retry_initial` and double).
    pub pending_poll_max: Dur,
}

impl CoordinatorConfig {
    /// Who may read the token file besides the agent.
    pub fn token_file_permissions(&self) -> SecretPermissions {
        if self.allow_readable_token_file {
            SecretPermissions::Any
        } else {
            SecretPermissions::Strict
        }
    }
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        CoordinatorConfig {
            url: String::new(),
            token_file: None,
            allow_readable_token_file: false,
            ca_file: None,
            request_timeout: Dur::secs(5),
            pending_poll_max: Dur::secs(30),
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

/// `[control.kubernetes]`: the job's `FlinkDeployment` and how to reach the Kubernetes API.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KubernetesConfig {
    /// Name of the `FlinkDeployment` that runs this JobManager's job.
    pub deployment: String,
    /// Its namespace; default: the service account's (`<service_account_dir>/namespace`) or
    /// the kubeconfig context's.
    pub namespace: Option<String>,
    /// The API server, `https://host:port`; default: `KUBERNETES_SERVICE_HOST` and
    /// `KUBERNETES_SERVICE_PORT` in a pod, or the kubeconfig's server.
    pub api_url: Option<String>,
    /// Where the pod's service-account `token`, `ca.crt` and `namespace` are mounted.
    pub service_account_dir: PathBuf,
    /// A kubeconfig (its current context) for use outside a pod, instead of the service
    /// account.
    pub kubeconfig: Option<PathBuf>,
    pub request_timeout: Dur,
}

impl Default for KubernetesConfig {
    fn default() -> Self {
        KubernetesConfig {
            deployment: String::new(),
            namespace: None,
            api_url: None,
            service_account_dir: PathBuf::from("/var/run/secrets/kubernetes.io/serviceaccount"),
            kubeconfig: None,
            request_timeout: Dur::secs(10),
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
    /// What is allowed but unwise, to be logged at start: a token file others may read, a
    /// guessable token.
    pub fn warnings(&self) -> Vec<String> {
        let Some(c) = &self.coordinator else {
            return Vec::new();
        };
        let mut warnings = Vec::new();
        if c.allow_readable_token_file {
            warnings.push("control.coordinator.allow_readable_token_file is on: the token file's permissions are not checked".to_string());
        }
        let token = c
            .token_file
            .as_deref()
            .and_then(|p| crate::gatekeeper::read_token_file(p, SecretPermissions::Any).ok());
        if token.is_some_and(|t| is_low_entropy(&t)) {
            warnings.push("control.coordinator.token_file: the token looks guessable (too few distinct characters); use a random one, e.g. `openssl rand -base64 32`".to_string());
        }
        warnings
    }

    /// Cross-field rules; each failure names the key to fix.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (key, value) in [
            ("control.agent_id", &self.agent_id),
            ("control.cluster_id", &self.cluster_id),
            ("control.region", &self.region),
        ] {
            validate_identifier(key, value).map_err(|e| err(key, e.message))?;
        }
        count(
            "control.slots_per_task_manager",
            self.slots_per_task_manager.into(),
            1,
            1024,
        )?;
        let day = Dur::secs(86_400);
        for (key, d, max) in [
            ("control.verify_deadline", self.verify_deadline, day),
            (
                "control.conflict_retry",
                self.conflict_retry,
                Dur::secs(3600),
            ),
            ("control.approval_max_age", self.approval_max_age, day),
            ("control.retry_initial", self.retry_initial, Dur::secs(3600)),
            ("control.retry_max", self.retry_max, Dur::secs(3600)),
        ] {
            within(key, d, max)?;
        }
        if self.refusal_backoff > day {
            return Err(err(
                "control.refusal_backoff",
                format!(
                    "{} is longer than the most allowed, {day}",
                    self.refusal_backoff
                ),
            ));
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
        if let Some(path) = &self.state_file {
            // As `run` opens it: readable if present, in a directory that exists.
            crate::state_store::StateStore::check(path)
                .map_err(|e| err("control.state_file", e.to_string()))?;
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
            within(
                "control.coordinator.request_timeout",
                c.request_timeout,
                Dur::secs(300),
            )?;
            if let Some(path) = &c.token_file {
                // As `run` reads it: present, private, small, holding a token.
                crate::gatekeeper::read_token_file(path, c.token_file_permissions()).map_err(
                    |e| {
                        err(
                            "control.coordinator.token_file",
                            format!("{}: {}", e.path.display(), e.message),
                        )
                    },
                )?;
            }
            if c.pending_poll_max < self.retry_initial {
                return Err(err(
                    "control.coordinator.pending_poll_max",
                    format!(
                        "{} is shorter than control.retry_initial ({})",
                        c.pending_poll_max, self.retry_initial
                    ),
                ));
            }
        }
        self.gates
            .validate("control.gates.")
            .map_err(|e| err(&e.field, e.message))?;
        if let Some(path) = &self.pause_file {
            if self.coordinator.is_some() {
                return Err(err(
                    "control.pause_file",
                    "local gates only: with [control.coordinator] pauses are set on the coordinator (PUT /v1/pauses/{scope})",
                ));
            }
            crate::gatekeeper::pause_file::check(path).map_err(|e| err("control.pause_file", e))?;
        }
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
                within("control.exec.timeout", e.timeout, day)?;
            }
            (None, _) => {}
        }
        match (&self.kubernetes, self.realizer) {
            (None, RealizerKind::KubernetesOperator) => {
                return Err(err(
                    "control.kubernetes.deployment",
                    "required when control.realizer is \"kubernetes-operator\"",
                ))
            }
            (Some(k), _) => {
                crate::actuation::kubernetes::validate_name(&k.deployment, 253).map_err(|m| {
                    err(
                        "control.kubernetes.deployment",
                        format!("{:?} {m}", k.deployment),
                    )
                })?;
                within(
                    "control.kubernetes.request_timeout",
                    k.request_timeout,
                    Dur::secs(300),
                )?;
                if self.realizer == RealizerKind::KubernetesOperator {
                    // Loads the token, CA and kubeconfig, so that check-config checks them.
                    crate::actuation::kubernetes::KubeAccess::resolve(k, &|name| {
                        std::env::var(name).ok()
                    })?;
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
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("agent.token");
        std::fs::write(&token, "Zk3u9PqL0xW7yT2mB5nV8c\n").unwrap();
        set_mode(&token, 0o600);
        let text = format!(
            r#"
            realizer = "adaptive-scheduler"
            state_file = "{state}"
            disk_bytes_per_task_manager = 10737418240
            region = "eu-west-1"
            verify_deadline = "5min"
            [coordinator]
            url = "http://127.0.0.1:8470"
            token_file = "{token}"
            [gates]
            min_interval = "0s"
            "#,
            state = dir.path().join("state.json").display(),
            token = token.display(),
        );
        let c = parse(&text).unwrap();
        assert_eq!(c.realizer, RealizerKind::AdaptiveScheduler);
        assert_eq!(c.gates.min_interval, Dur::secs(0));
        assert_eq!(c.verify_deadline, Dur::secs(300));
        assert!(c.warnings().is_empty(), "{:?}", c.warnings());

        // As `run` reads them: the token file must exist, be private and hold a token;
        // the state file's directory must exist.
        let cases = [
            (
                text.replace(&token.display().to_string(), "/nonexistent/agent.token"),
                "control.coordinator.token_file",
                "cannot read",
            ),
            (
                text.replace(
                    &dir.path().join("state.json").display().to_string(),
                    "/nonexistent/state.json",
                ),
                "control.state_file",
                "does not exist",
            ),
        ];
        for (text, key, message) in cases {
            let e = parse(&text).unwrap_err();
            assert!(e.starts_with(key) && e.contains(message), "{e}");
        }
        set_mode(&token, 0o644);
        let e = parse(&text).unwrap_err();
        assert!(
            e.starts_with("control.coordinator.token_file") && e.contains("0644"),
            "{e}"
        );
        let relaxed = text.replace("[gates]", "allow_readable_token_file = true\n[gates]");
        let c = parse(&relaxed).unwrap();
        assert_eq!(c.warnings().len(), 1, "{:?}", c.warnings());
        set_mode(&token, 0o600);
        std::fs::write(&token, "aaaaaaaaaaaaaaaaaaaa\n").unwrap();
        let warnings = parse(&text).unwrap().warnings();
        assert!(warnings[0].contains("guessable"), "{warnings:?}");
    }

    fn set_mode(path: &std::path::Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
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
                "slots_per_task_manager = 5000",
                "control.slots_per_task_manager",
            ),
            ("verify_deadline = \"2d\"", "control.verify_deadline"),
            ("refusal_backoff = \"30d\"", "control.refusal_backoff"),
            (
                "[exec]\ncommand = [\"x\"]\ntimeout = \"0s\"",
                "control.exec.timeout",
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
