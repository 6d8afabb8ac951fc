//! The async edge of the loop: after each successful poll, [`ControlLoop`] reads the job's
//! record, asks [`core::next`] what to do, does it (engine, gatekeeper, realizer), folds the
//! result back in and persists the record before the next side effect.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use flink_autoscale_shared::protocol::{Decision, GateName, Outcome, Plan, Proposal, Verdict};
use serde::Serialize;
use tokio::sync::broadcast;

use super::config::{ControlConfig, RealizerKind};
use super::core::{self, Next, Observation, Timing, Verification};
use super::engine_input::{evaluate_input, fleet_defaults, job_config};
use super::{metrics, proposal};
use crate::actuation::{
    Actuation, ActuationError, AdaptiveScheduler, ExecRealizer, Realizer, RecommendOnly,
};
use crate::collector::{JobCollector, PollReport};
use crate::config::{Config, ConfigError};
use crate::coordinator_client::{
    read_token_file, CoordinatorClient, GateError, Gatekeeper, LocalGates, TokenFileError,
};
use crate::daemon::clock::BoxFuture;
use crate::daemon::hook::DecisionStep;
use crate::engine::{evaluate_and_decide, ConfigValue};
use crate::flink::client::normalize_base_url;
use crate::state_store::{JobRecord, Stage, StateStore, StoreError};

/// Most loop transitions in one poll (evaluate → propose → actuate is three).
const MAX_TRANSITIONS_PER_POLL: usize = 6;
/// Buffered events per subscriber; a slow subscriber loses the oldest.
const EVENT_BUFFER: usize = 1024;

/// Something the loop did, for live displays and tests.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum LoopEvent {
    /// The engine ran over a complete window (every poll while idle).
    Evaluated {
        job_id: String,
        decision: crate::engine::Decision,
    },
    Proposed {
        job_id: String,
        proposal: Proposal,
    },
    Verdict {
        job_id: String,
        decision: Decision,
    },
    GatekeeperError {
        job_id: String,
        proposal_id: String,
        error: String,
    },
    Actuating {
        job_id: String,
        proposal_id: String,
        realizer: &'static str,
        plan: Plan,
    },
    Outcome {
        job_id: String,
        proposal_id: String,
        outcome: Outcome,
        /// From handing the plan to the realizer until the outcome was known.
        rescaling_ms: Option<u64>,
    },
    Reported {
        job_id: String,
        proposal_id: String,
    },
}

/// The loop could not be built from the configuration.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("control.state_file: {0}")]
    Store(#[from] StoreError),
    #[error(transparent)]
    Token(#[from] TokenFileError),
    #[error("control.coordinator.ca_file: {0}")]
    Tls(#[from] crate::control::http_client::TlsSetupError),
}

/// The parts of a loop; [`ControlLoop::from_config`] builds them from `agent.toml`, tests may
/// assemble their own.
pub struct Parts {
    pub settings: ControlConfig,
    pub fleet_defaults: BTreeMap<String, ConfigValue>,
    pub store: Arc<StateStore>,
    pub gatekeeper: Arc<dyn Gatekeeper>,
    pub realizer: Arc<dyn Realizer>,
}

/// The propose → approve → actuate → verify loop, one instance for all jobs.
pub struct ControlLoop {
    settings: ControlConfig,
    timing: Timing,
    fleet: BTreeMap<String, ConfigValue>,
    store: Arc<StateStore>,
    gatekeeper: Arc<dyn Gatekeeper>,
    realizer: Arc<dyn Realizer>,
    events: broadcast::Sender<LoopEvent>,
    /// Per job, what held vertices back at the last evaluation; logged when it changes.
    last_limits: Mutex<HashMap<String, String>>,
}

fn ms(d: crate::config::Dur) -> u64 {
    u64::try_from(d.0.as_millis()).unwrap_or(u64::MAX)
}

/// Checks what only the loop reads: `[control]` and the `[autoscaler]` fleet defaults.
pub fn validate(config: &Config) -> Result<(), ConfigError> {
    config.control.validate()?;
    fleet_defaults(&config.autoscaler).map(|_| ())
}

impl ControlLoop {
    pub fn from_config(config: &Config) -> Result<Self, ControlError> {
        validate(config)?;
        let c = &config.control;
        let store = match &c.state_file {
            Some(path) => StateStore::open(path)?,
            None => {
                tracing::warn!("control.state_file is not set: scaling history and restart times will not survive an agent restart");
                StateStore::in_memory()
            }
        };
        let gatekeeper: Arc<dyn Gatekeeper> = match &c.coordinator {
            Some(coord) => {
                let token = coord
                    .token_file
                    .as_deref()
                    .map(read_token_file)
                    .transpose()?;
                if token.is_none() {
                    tracing::warn!("control.coordinator.token_file is not set: proposals are sent without a bearer token");
                }
                let roots = crate::control::http_client::trusted_roots(coord.ca_file.as_deref())?;
                Arc::new(CoordinatorClient::new(
                    &coord.url,
                    token,
                    coord.request_timeout.0,
                    roots,
                )?)
            }
            None => {
                let mut gates = c.gates.clone();
                if c.disk_bytes_per_task_manager == 0 {
                    // Only reachable with realizer "none" (validated): recommend without it.
                    gates.order.retain(|g| *g != GateName::DiskCapacity);
                    tracing::warn!("control.disk_bytes_per_task_manager is not set: the local disk-capacity gate is skipped");
                }
                Arc::new(LocalGates::new(gates, c.evacuation_flag_file.clone()))
            }
        };
        let realizer: Arc<dyn Realizer> = match c.realizer {
            RealizerKind::None => Arc::new(RecommendOnly),
            RealizerKind::AdaptiveScheduler => {
                let base = normalize_base_url(&config.jobmanager.url).map_err(|e| ConfigError {
                    key: "jobmanager.url".into(),
                    message: e.to_string(),
                })?;
                Arc::new(AdaptiveScheduler::new(
                    &base,
                    config.jobmanager.request_timeout.0,
                ))
            }
            RealizerKind::Exec => {
                let exec = c.exec.clone().unwrap_or_default();
                Arc::new(ExecRealizer::new(exec.command, exec.timeout.0))
            }
        };
        Ok(Self::new(Parts {
            settings: c.clone(),
            fleet_defaults: fleet_defaults(&config.autoscaler)?,
            store,
            gatekeeper,
            realizer,
        }))
    }

    pub fn new(parts: Parts) -> Self {
        let s = &parts.settings;
        let timing = Timing {
            verify_deadline_ms: ms(s.verify_deadline),
            conflict_retry_ms: ms(s.conflict_retry),
            refusal_backoff_ms: ms(s.refusal_backoff),
            approval_max_age_ms: ms(s.approval_max_age),
            retry_initial_ms: ms(s.retry_initial),
            retry_max_ms: ms(s.retry_max),
        };
        for job_id in parts.store.job_ids() {
            if let Some(flight) = parts.store.get(&job_id).in_flight {
                tracing::info!(job_id = %job_id, proposal_id = %flight.proposal.proposal_id, stage = flight.stage.label(), "resuming the action in flight from the state file");
            }
        }
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        ControlLoop {
            settings: parts.settings,
            timing,
            fleet: parts.fleet_defaults,
            store: parts.store,
            gatekeeper: parts.gatekeeper,
            realizer: parts.realizer,
            events,
            last_limits: Mutex::new(HashMap::new()),
        }
    }

    /// Live events (proposals, verdicts, actuations, outcomes).
    pub fn subscribe(&self) -> broadcast::Receiver<LoopEvent> {
        self.events.subscribe()
    }

    pub fn store(&self) -> &Arc<StateStore> {
        &self.store
    }

    fn emit(&self, event: LoopEvent) {
        // No subscriber is fine.
        let _ = self.events.send(event);
    }

    /// One poll's worth of the loop for one job.
    pub async fn run_step(&self, job: &mut JobCollector, report: &PollReport, now_ms: u64) {
        let job_id = job.job_id().to_string();
        let mut record = self.store.get(&job_id);
        for _ in 0..MAX_TRANSITIONS_PER_POLL {
            let obs = observe(job, report, now_ms);
            let step = core::next(&record, &obs);
            let before = record.clone();
            match step {
                Next::Wait(_) => break,
                Next::Evaluate => {
                    if !self.evaluate(job, &obs, &mut record) {
                        self.persist(&job_id, &record).await;
                        break;
                    }
                }
                Next::SendProposal => self.send_proposal(&job_id, now_ms, &mut record).await,
                Next::Actuate => self.actuate(job, &obs, &mut record).await,
                Next::Verify => self.verify(job, &obs, &mut record),
                Next::Report => self.report(&job_id, now_ms, &mut record).await,
            }
            self.persist(&job_id, &record).await;
            if record == before {
                break;
            }
        }
        metrics::job_status(
            &job_id,
            record.last_action_ms.map(|t| now_ms.saturating_sub(t)),
            record.in_flight.is_some(),
            record.restarts.last().map(|r| r.duration_ms),
        );
    }

    /// Writes the record; false when the file could not be written (the record stays current
    /// in memory and the next change writes it again).
    async fn persist(&self, job_id: &str, record: &JobRecord) -> bool {
        match self.store.put(job_id, record.clone()).await {
            Ok(()) => true,
            Err(e) => {
                tracing::error!(job_id = %job_id, error = %e, "cannot persist the agent state");
                crate::telemetry::record_error("state_file");
                false
            }
        }
    }

    /// Runs the engine; returns true when a proposal was started.
    fn evaluate(&self, job: &JobCollector, obs: &Observation, record: &mut JobRecord) -> bool {
        let snapshot = job.snapshot();
        let job_id = &snapshot.job_id;
        let config = match job_config(
            &self.fleet,
            &snapshot.autoscaler_overrides,
            &record.restarts,
        ) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(job_id = %job_id, error = %e, "the job's job.autoscaler.* settings are invalid; not deciding");
                crate::telemetry::record_error("engine_config");
                return false;
            }
        };
        let input = evaluate_input(
            obs.now_ms,
            config,
            snapshot,
            job.window().to_vec(),
            record.scaling.clone(),
        );
        let output = match evaluate_and_decide(&input) {
            Ok(o) => o,
            Err(e) => {
                tracing::warn!(job_id = %job_id, error = %e, "the engine could not use this window");
                crate::telemetry::record_error("engine");
                return false;
            }
        };
        crate::telemetry::record_decision(job_id, &output.decision);
        // Upstream applies nothing before stabilization + a full window after a restart.
        if !output.evaluated.window_complete {
            return false;
        }
        self.log_limits(job_id, &output.decision);
        self.emit(LoopEvent::Evaluated {
            job_id: job_id.clone(),
            decision: output.decision.clone(),
        });
        if !output.decision.scale {
            record.scaling = output.decision.state;
            return false;
        }
        let proposal = proposal::build(&self.settings, snapshot, &output, obs.now_ms);
        for v in output.decision.vertices.iter().filter(|v| {
            v.current
                != output
                    .decision
                    .parallelism
                    .get(&v.id)
                    .copied()
                    .unwrap_or(v.current)
        }) {
            tracing::info!(job_id = %job_id, vertex_id = %v.id, current = v.current, proposed = output.decision.parallelism.get(&v.id).copied().unwrap_or(v.current), reason = %v.reason, "proposing a rescale");
        }
        self.emit(LoopEvent::Proposed {
            job_id: job_id.clone(),
            proposal: proposal.clone(),
        });
        core::begin(record, proposal, output.decision.state, obs.now_ms);
        true
    }

    /// Logs, once per change, which vertices are held back and why (sink limit, bounds, ...).
    fn log_limits(&self, job_id: &str, decision: &crate::engine::Decision) {
        let held: Vec<&str> = decision
            .vertices
            .iter()
            .filter(|v| !v.limited_by.is_empty())
            .map(|v| v.reason.as_str())
            .collect();
        let summary = held.join(" | ");
        let mut last = self.last_limits.lock().unwrap_or_else(|e| e.into_inner());
        if last.get(job_id) != Some(&summary) {
            if !summary.is_empty() {
                tracing::info!(job_id = %job_id, scale = decision.scale, "decision limits: {summary}");
            }
            last.insert(job_id.to_string(), summary);
        }
    }

    async fn send_proposal(&self, job_id: &str, now_ms: u64, record: &mut JobRecord) {
        let Some(flight) = record.in_flight.as_ref() else {
            return;
        };
        let proposal = flight.proposal.clone();
        match self.gatekeeper.propose(&proposal, now_ms).await {
            Ok(decision) => {
                metrics::gatekeeper(job_id, None);
                metrics::proposal(job_id, decision.verdict.as_str());
                match decision.verdict {
                    Verdict::Approved => {
                        tracing::info!(job_id = %job_id, proposal_id = %proposal.proposal_id, gatekeeper = self.gatekeeper.label(), "proposal approved")
                    }
                    Verdict::Refused => {
                        let reasons: Vec<String> = decision
                            .reasons
                            .iter()
                            .map(|r| format!("{}/{}: {}", r.gate, r.code, r.message))
                            .collect();
                        tracing::info!(job_id = %job_id, proposal_id = %proposal.proposal_id, gatekeeper = self.gatekeeper.label(), reasons = %reasons.join("; "), "proposal refused");
                    }
                }
                core::on_verdict(record, &decision, now_ms, &self.timing);
                self.emit(LoopEvent::Verdict {
                    job_id: job_id.to_string(),
                    decision,
                });
                if let Some(Stage::Reporting { outcome, .. }) =
                    record.in_flight.as_ref().map(|f| &f.stage)
                {
                    metrics::actuation(job_id, "not_applied");
                    self.emit_outcome(job_id, &proposal.proposal_id, outcome, None);
                }
            }
            Err(e) => {
                metrics::gatekeeper(job_id, Some(e.kind()));
                self.emit(LoopEvent::GatekeeperError {
                    job_id: job_id.to_string(),
                    proposal_id: proposal.proposal_id.clone(),
                    error: e.to_string(),
                });
                match e {
                    GateError::Unavailable(_) => {
                        core::on_verdict_unavailable(record, now_ms, &self.timing, rand::random());
                        tracing::warn!(job_id = %job_id, proposal_id = %proposal.proposal_id, error = %e, "no verdict; nothing is applied, retrying with the same proposal id");
                    }
                    GateError::Rejected { .. } => {
                        core::on_proposal_rejected(record, now_ms, &self.timing);
                        tracing::error!(job_id = %job_id, proposal_id = %proposal.proposal_id, error = %e, "the coordinator rejected the proposal; dropping it");
                    }
                }
            }
        }
    }

    async fn actuate(&self, job: &mut JobCollector, obs: &Observation, record: &mut JobRecord) {
        let job_id = job.job_id().to_string();
        let Some(flight) = record.in_flight.as_ref() else {
            return;
        };
        let proposal = flight.proposal.clone();
        let Stage::Approved { plan, .. } = &flight.stage else {
            return;
        };
        let plan = plan.clone();
        if let Some(outcome) = core::actuation_precheck(record, obs, &self.timing) {
            tracing::warn!(job_id = %job_id, proposal_id = %proposal.proposal_id, error = outcome.error.as_deref().unwrap_or(""), "approved plan not applied");
            metrics::actuation(&job_id, "not_applied");
            self.conclude(job, record, outcome, obs.now_ms, None);
            return;
        }
        core::mark_actuating(record, obs.now_ms, &self.timing);
        // Persisted before the realizer runs: after a crash the agent verifies, never repeats.
        // If that cannot be recorded, do not actuate.
        if !self.persist(&job_id, record).await {
            core::on_actuation_retry_later(record, obs.now_ms, &self.timing);
            return;
        }
        self.emit(LoopEvent::Actuating {
            job_id: job_id.clone(),
            proposal_id: proposal.proposal_id.clone(),
            realizer: self.realizer.label(),
            plan: plan.clone(),
        });
        match self.realizer.apply(&proposal, &plan).await {
            Ok(Actuation::Started) => {
                tracing::info!(job_id = %job_id, proposal_id = %proposal.proposal_id, realizer = self.realizer.label(), parallelism = ?plan.parallelism, "rescale started; watching for the approved parallelism");
            }
            Ok(Actuation::NotApplied(message)) => {
                tracing::info!(job_id = %job_id, proposal_id = %proposal.proposal_id, "{message}");
                metrics::actuation(&job_id, "not_applied");
                let outcome = core::failed(message, obs.parallelism.clone());
                self.conclude(job, record, outcome, obs.now_ms, None);
            }
            Err(ActuationError::RetryLater(message)) => {
                tracing::warn!(job_id = %job_id, proposal_id = %proposal.proposal_id, error = %message, "actuation not possible now; retrying later, never stacked");
                metrics::actuation(&job_id, "retry_later");
                core::on_actuation_retry_later(record, obs.now_ms, &self.timing);
            }
            Err(ActuationError::Unknown(message)) => {
                tracing::warn!(job_id = %job_id, proposal_id = %proposal.proposal_id, error = %message, "actuation result unknown; watching the job to find out");
            }
            Err(ActuationError::Failed(message)) => {
                tracing::error!(job_id = %job_id, proposal_id = %proposal.proposal_id, error = %message, "actuation failed");
                metrics::actuation(&job_id, "failed");
                let outcome = core::failed(message, obs.parallelism.clone());
                self.conclude(job, record, outcome, obs.now_ms, None);
            }
        }
    }

    fn verify(&self, job: &mut JobCollector, obs: &Observation, record: &mut JobRecord) {
        let result = core::verify(record, obs);
        let (label, restart_ms) = match &result {
            Verification::Pending => return,
            Verification::Applied { restart_ms } => ("applied", Some(*restart_ms)),
            Verification::TimedOut => ("timed_out", None),
        };
        let job_id = job.job_id().to_string();
        let proposal_id = record
            .in_flight
            .as_ref()
            .map(|f| f.proposal.proposal_id.clone())
            .unwrap_or_default();
        let spent = core::on_verified(record, &result, obs);
        metrics::actuation(&job_id, label);
        metrics::rescaling_time(&job_id, spent);
        if let Some(r) = restart_ms {
            metrics::restart_duration(&job_id, r);
            tracing::info!(job_id = %job_id, proposal_id = %proposal_id, restart_ms = r, rescaling_ms = spent, "rescale applied");
        } else {
            tracing::warn!(job_id = %job_id, proposal_id = %proposal_id, observed = ?obs.parallelism, "rescale timed out");
        }
        job.reset_window();
        if let Some(Stage::Reporting { outcome, .. }) = record.in_flight.as_ref().map(|f| &f.stage)
        {
            self.emit_outcome(&job_id, &proposal_id, outcome, Some(spent));
        }
    }

    /// Ends the action with `outcome` (to be reported) and starts the window over.
    fn conclude(
        &self,
        job: &mut JobCollector,
        record: &mut JobRecord,
        outcome: Outcome,
        now_ms: u64,
        rescaling_ms: Option<u64>,
    ) {
        let proposal_id = record
            .in_flight
            .as_ref()
            .map(|f| f.proposal.proposal_id.clone())
            .unwrap_or_default();
        self.emit_outcome(job.job_id(), &proposal_id, &outcome, rescaling_ms);
        core::finish(record, outcome, now_ms);
        job.reset_window();
    }

    fn emit_outcome(
        &self,
        job_id: &str,
        proposal_id: &str,
        outcome: &Outcome,
        rescaling_ms: Option<u64>,
    ) {
        self.emit(LoopEvent::Outcome {
            job_id: job_id.to_string(),
            proposal_id: proposal_id.to_string(),
            outcome: outcome.clone(),
            rescaling_ms,
        });
    }

    async fn report(&self, job_id: &str, now_ms: u64, record: &mut JobRecord) {
        let Some(flight) = record.in_flight.as_ref() else {
            return;
        };
        let Stage::Reporting { outcome, .. } = &flight.stage else {
            return;
        };
        let proposal_id = flight.proposal.proposal_id.clone();
        match self.gatekeeper.report(job_id, &proposal_id, outcome).await {
            Ok(()) => {
                metrics::gatekeeper(job_id, None);
                tracing::info!(job_id = %job_id, proposal_id = %proposal_id, status = outcome.status.as_str(), "outcome reported");
                core::on_reported(record);
                self.emit(LoopEvent::Reported {
                    job_id: job_id.to_string(),
                    proposal_id,
                });
            }
            Err(e @ GateError::Unavailable(_)) => {
                metrics::gatekeeper(job_id, Some(e.kind()));
                tracing::warn!(job_id = %job_id, proposal_id = %proposal_id, error = %e, "outcome not delivered; retrying (no new proposal until it is)");
                core::on_report_unavailable(record, now_ms, &self.timing, rand::random());
            }
            Err(e @ GateError::Rejected { .. }) => {
                metrics::gatekeeper(job_id, Some(e.kind()));
                tracing::error!(job_id = %job_id, proposal_id = %proposal_id, error = %e, "the coordinator will not take this outcome; giving up on reporting it");
                core::on_reported(record);
            }
        }
    }
}

/// What the loop needs from the collector's latest poll.
fn observe(job: &JobCollector, report: &PollReport, now_ms: u64) -> Observation {
    let s = job.snapshot();
    Observation {
        now_ms,
        running: s.state == "RUNNING",
        running_since_ms: s.running_since_ms.and_then(|t| u64::try_from(t).ok()),
        parallelism: s
            .topology
            .iter()
            .map(|v| (v.id.clone(), v.parallelism))
            .collect(),
        window_ready: report.unusable.is_none() && job.window().is_full(),
    }
}

impl DecisionStep for ControlLoop {
    fn step<'a>(
        &'a self,
        job: &'a mut JobCollector,
        report: &'a PollReport,
        now_ms: u64,
    ) -> BoxFuture<'a, ()> {
        Box::pin(self.run_step(job, report, now_ms))
    }
}
