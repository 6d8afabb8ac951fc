//! Who approves a proposal. With a coordinator configured, [`CoordinatorClient`] asks it over
//! HTTP with the agent's bearer token; the proposal id makes every retry idempotent. Without
//! one, [`LocalGates`] runs the same pure gates from `shared` with inputs from the agent's
//! configuration (region, evacuation flag file, disk per TaskManager).
//!
//! Either way the caller fails closed: an error is never an approval.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use flink_autoscale_shared::gates::{self, Facts, GateConfig};
use flink_autoscale_shared::protocol::{Decision, ErrorBody, Outcome, Proposal, Verdict};
use http::Method;

use crate::control::http_client::{HttpError, JsonClient, TlsSetupError};
use crate::daemon::clock::BoxFuture;

/// Local decisions remembered for idempotent retries.
const LOCAL_DECISIONS_KEPT: usize = 4096;

/// Why no verdict (or no outcome receipt) was obtained.
#[derive(Debug, Clone, thiserror::Error)]
pub enum GateError {
    /// Worth retrying: unreachable, timed out, 5xx, 429.
    #[error("coordinator unavailable: {0}")]
    Unavailable(String),
    /// The coordinator refused to consider the request (4xx): retrying the same request
    /// cannot help.
    #[error("coordinator rejected the request ({status}): {message}")]
    Rejected { status: u16, message: String },
}

impl GateError {
    pub fn kind(&self) -> &'static str {
        match self {
            GateError::Unavailable(_) => "unavailable",
            GateError::Rejected { .. } => "rejected",
        }
    }
}

/// Approves or refuses proposals and takes outcome reports.
pub trait Gatekeeper: Send + Sync + 'static {
    /// The verdict for `proposal`. The same proposal id always gets the same verdict.
    fn propose<'a>(
        &'a self,
        proposal: &'a Proposal,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<Decision, GateError>>;
    /// Records what happened after an approval. Reporting the same outcome twice is fine.
    fn report<'a>(
        &'a self,
        job_id: &'a str,
        proposal_id: &'a str,
        outcome: &'a Outcome,
    ) -> BoxFuture<'a, Result<(), GateError>>;
    /// `coordinator` or `local`, for logs and metrics.
    fn label(&self) -> &'static str;
}

/// The coordinator over HTTP.
pub struct CoordinatorClient {
    base: String,
    token: Option<String>,
    http: JsonClient,
}

/// The token file could not be used.
#[derive(Debug, thiserror::Error)]
#[error("control.coordinator.token_file: {path}: {message}")]
pub struct TokenFileError {
    pub path: PathBuf,
    pub message: String,
}

/// The first non-empty line of `path`, trimmed.
pub fn read_token_file(path: &Path) -> Result<String, TokenFileError> {
    let text = std::fs::read_to_string(path).map_err(|e| TokenFileError {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_string)
        .ok_or_else(|| TokenFileError {
            path: path.to_path_buf(),
            message: "holds no token".into(),
        })
}

impl CoordinatorClient {
    /// `roots`: what an `https://` coordinator's certificate must chain to.
    pub fn new(
        base_url: &str,
        token: Option<String>,
        timeout: Duration,
        roots: rustls::RootCertStore,
    ) -> Result<Self, TlsSetupError> {
        Ok(CoordinatorClient {
            base: base_url.trim().trim_end_matches('/').to_string(),
            token,
            http: JsonClient::new(timeout, roots)?,
        })
    }

    async fn post(&self, path: &str, body: Vec<u8>) -> Result<bytes::Bytes, GateError> {
        let url = format!("{}{path}", self.base);
        let answer = self
            .http
            .send(Method::POST, &url, self.token.as_deref(), body)
            .await
            .map_err(|e: HttpError| GateError::Unavailable(e.to_string()))?;
        match answer.status {
            200..=299 => Ok(answer.body),
            429 | 500..=599 => Err(GateError::Unavailable(format!(
                "{url} answered {}: {}",
                answer.status,
                answer.excerpt()
            ))),
            status => Err(GateError::Rejected {
                status,
                message: serde_json::from_slice::<ErrorBody>(&answer.body)
                    .map(|b| match b.field {
                        Some(f) => format!("{}: {}", f, b.message),
                        None => b.message,
                    })
                    .unwrap_or_else(|_| answer.excerpt()),
            }),
        }
    }
}

impl Gatekeeper for CoordinatorClient {
    fn propose<'a>(
        &'a self,
        proposal: &'a Proposal,
        _now_ms: u64,
    ) -> BoxFuture<'a, Result<Decision, GateError>> {
        Box::pin(async move {
            let body = serde_json::to_vec(proposal).unwrap_or_default();
            let bytes = self.post("/v1/proposals", body).await?;
            let decision: Decision = serde_json::from_slice(&bytes).map_err(|e| {
                GateError::Unavailable(format!("unreadable verdict from the coordinator: {e}"))
            })?;
            if decision.proposal_id != proposal.proposal_id
                || (decision.verdict == Verdict::Approved) != decision.plan.is_some()
            {
                return Err(GateError::Unavailable(format!(
                    "inconsistent verdict from the coordinator for {}",
                    proposal.proposal_id
                )));
            }
            Ok(decision)
        })
    }

    fn report<'a>(
        &'a self,
        _job_id: &'a str,
        proposal_id: &'a str,
        outcome: &'a Outcome,
    ) -> BoxFuture<'a, Result<(), GateError>> {
        Box::pin(async move {
            let path = format!(
                "/v1/proposals/{}/outcome",
                percent_encoding::utf8_percent_encode(
                    proposal_id,
                    percent_encoding::NON_ALPHANUMERIC
                )
            );
            let body = serde_json::to_vec(outcome).unwrap_or_default();
            self.post(&path, body).await.map(|_| ())
        })
    }

    fn label(&self) -> &'static str {
        "coordinator"
    }
}

/// The gates run inside the agent. Facts the coordinator would know from its store come from
/// this agent's own memory; the region flag comes from a file an operator (or automation)
/// creates during a failover.
pub struct LocalGates {
    config: GateConfig,
    evacuation_flag_file: Option<PathBuf>,
    memory: Mutex<LocalMemory>,
}

#[derive(Default)]
struct LocalMemory {
    decisions: HashMap<String, Decision>,
    order: VecDeque<String>,
    /// Job id → approved proposal id still waiting for its outcome.
    open: HashMap<String, String>,
    last_approved_ms: HashMap<String, i64>,
}

impl LocalGates {
    pub fn new(config: GateConfig, evacuation_flag_file: Option<PathBuf>) -> Self {
        LocalGates {
            config,
            evacuation_flag_file,
            memory: Mutex::new(LocalMemory::default()),
        }
    }

    fn region_evacuating(&self) -> bool {
        self.evacuation_flag_file
            .as_deref()
            .is_some_and(|p| p.exists())
    }
}

impl Gatekeeper for LocalGates {
    fn propose<'a>(
        &'a self,
        proposal: &'a Proposal,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<Decision, GateError>> {
        let evacuating = self.region_evacuating();
        let result = (|| {
            proposal.validate().map_err(|e| GateError::Rejected {
                status: 400,
                message: e.to_string(),
            })?;
            let mut memory = self.memory.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(d) = memory.decisions.get(&proposal.proposal_id) {
                return Ok(d.clone());
            }
            let now = i64::try_from(now_ms).unwrap_or(i64::MAX);
            let in_flight = u32::try_from(memory.open.len()).unwrap_or(u32::MAX);
            let facts = Facts {
                region_evacuating: evacuating,
                job_open_action: memory.open.get(&proposal.job_id).cloned(),
                job_last_approved_at_ms: memory.last_approved_ms.get(&proposal.job_id).copied(),
                cluster_in_flight: in_flight,
                region_in_flight: in_flight,
            };
            let decision = gates::evaluate(proposal, &facts, &self.config, now);
            if decision.verdict == Verdict::Approved {
                memory
                    .open
                    .insert(proposal.job_id.clone(), proposal.proposal_id.clone());
                memory.last_approved_ms.insert(proposal.job_id.clone(), now);
            }
            memory
                .decisions
                .insert(proposal.proposal_id.clone(), decision.clone());
            memory.order.push_back(proposal.proposal_id.clone());
            while memory.order.len() > LOCAL_DECISIONS_KEPT {
                if let Some(old) = memory.order.pop_front() {
                    memory.decisions.remove(&old);
                }
            }
            Ok(decision)
        })();
        Box::pin(async move { result })
    }

    fn report<'a>(
        &'a self,
        job_id: &'a str,
        proposal_id: &'a str,
        _outcome: &'a Outcome,
    ) -> BoxFuture<'a, Result<(), GateError>> {
        let mut memory = self.memory.lock().unwrap_or_else(|e| e.into_inner());
        if memory.open.get(job_id).is_some_and(|id| id == proposal_id) {
            memory.open.remove(job_id);
        }
        Box::pin(async { Ok(()) })
    }

    fn label(&self) -> &'static str {
        "local"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flink_autoscale_shared::protocol::{OutcomeStatus, VertexProposal};

    fn proposal(id: &str, current: u32, proposed: u32) -> Proposal {
        Proposal {
            proposal_id: id.into(),
            agent_id: "a".into(),
            cluster_id: "c".into(),
            region: "r".into(),
            job_id: "0123456789abcdef0123456789abcdef".into(),
            job_name: "job".into(),
            vertices: vec![VertexProposal {
                id: "fedcba9876543210fedcba9876543210".into(),
                name: "Map".into(),
                slot_sharing_group: None,
                current_parallelism: current,
                proposed_parallelism: proposed,
                evidence: None,
            }],
            checkpoint_state_bytes: Some(0),
            slots_per_task_manager: 1,
            disk_bytes_per_task_manager: 1 << 30,
            current_task_managers: current,
        }
    }

    fn no_interval() -> GateConfig {
        GateConfig {
            min_interval_seconds: 0,
            ..GateConfig::default()
        }
    }

    #[tokio::test]
    async fn local_gates_follow_the_evacuation_flag_file() {
        let dir = tempfile::tempdir().unwrap();
        let flag = dir.path().join("evacuating");
        let gates = LocalGates::new(no_interval(), Some(flag.clone()));
        std::fs::write(&flag, "failover").unwrap();
        let d = gates.propose(&proposal("p1", 4, 2), 0).await.unwrap();
        assert_eq!(d.verdict, Verdict::Refused);
        assert_eq!(d.reasons[0].gate.as_str(), "region_failover");
        // Scale-ups still pass while evacuating.
        let up = gates.propose(&proposal("p2", 4, 6), 0).await.unwrap();
        assert_eq!(up.verdict, Verdict::Approved);
        std::fs::remove_file(&flag).unwrap();
        let outcome = Outcome {
            status: OutcomeStatus::Applied,
            observed_parallelism: Default::default(),
            error: None,
            restart_ms: Some(3_000),
        };
        gates.report(&up_job(), "p2", &outcome).await.unwrap();
        let d = gates.propose(&proposal("p3", 6, 2), 0).await.unwrap();
        assert_eq!(d.verdict, Verdict::Approved);
    }

    fn up_job() -> String {
        "0123456789abcdef0123456789abcdef".into()
    }

    #[tokio::test]
    async fn local_gates_are_idempotent_and_allow_one_open_action_per_job() {
        let gates = LocalGates::new(no_interval(), None);
        let first = gates.propose(&proposal("p1", 1, 2), 0).await.unwrap();
        assert_eq!(first.verdict, Verdict::Approved);
        assert_eq!(
            gates.propose(&proposal("p1", 1, 2), 5).await.unwrap(),
            first
        );
        let second = gates.propose(&proposal("p2", 1, 3), 5).await.unwrap();
        assert_eq!(second.verdict, Verdict::Refused);
        assert_eq!(second.reasons[0].gate.as_str(), "rate_limit");
    }

    #[test]
    fn token_file_errors_name_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "\n  \n").unwrap();
        let e = read_token_file(&path).unwrap_err().to_string();
        assert!(e.starts_with("control.coordinator.token_file"), "{e}");
        std::fs::write(&path, "\n secret \n").unwrap();
        assert_eq!(read_token_file(&path).unwrap(), "secret");
    }
}
