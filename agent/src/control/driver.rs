//! The async edge of the loop: after each successful poll, [`ControlLoop`] reads the job's
//! record, asks [`core::next`] what to do, does it (engine, gatekeeper, realizer), folds the
//! result back in and persists the record before the next side effect.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use flink_autoscale_core::protocol::{Decision, GateName, Outcome, Plan, Proposal, Verdict};
use serde::Serialize;
use tokio::sync::broadcast;

use super::config::{ControlConfig, RealizerKind};
use super::core::{self, Next, Observation, Timing, Verification};
use super::engine_input::{evaluate_input, fleet_defaults, job_config};
use super::{metrics, proposal};
use crate::actuation::kubernetes::KubeAccess;
use crate::actuation::{
    Actuation, ActuationError, AdaptiveScheduler, ExecRealizer, HistoryFinding, KubernetesOperator,
    Realizer, RecommendOnly,
};
use crate::collector::{JobCollector, PollReport};
use crate::config::{Config, ConfigError};
use crate::daemon::clock::BoxFuture;
use crate::daemon::hook::{AfterStep, DecisionStep};
use crate::flink::client::normalize_base_url;
use crate::gatekeeper::{
    read_token_file, CoordinatorClient, GateError, Gatekeeper, LocalGates, TokenFileError,
};
use crate::state_store::{JobRecord, Stage, StateStore, StoreError};
use flink_autoscale_core::engine::{evaluate_and_decide, ConfigValue};

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
        decision: flink_autoscale_core::engine::Decision,
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
                    .map(|path| read_token_file(path, coord.token_file_permissions()))
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
                Arc::new(LocalGates::new(
                    gates,
                    c.evacuation_flag_file.clone(),
                    c.pause_file.clone(),
                ))
            }
        };
        // The JobManager's resource-requirements endpoint, over TLS if it serves https.
        let in_place = |base: &str| -> Result<AdaptiveScheduler, ConfigError> {
            let timeout = config.jobmanager.request_timeout.0;
            Ok(
                match crate::flink::tls::client_config(&config.jobmanager)? {
                    Some(tls) => AdaptiveScheduler::with_tls(base, timeout, tls),
                    None => AdaptiveScheduler::new(base, timeout),
                },
            )
        };
        let realizer: Arc<dyn Realizer> = match c.realizer {
            RealizerKind::None => Arc::new(RecommendOnly),
            RealizerKind::AdaptiveScheduler => {
                let base = normalize_base_url(&config.jobmanager.url).map_err(|e| ConfigError {
                    key: "jobmanager.url".into(),
                    message: e.to_string(),
                })?;
                Arc::new(in_place(&base)?)
            }
            RealizerKind::Exec => {
                let exec = c.exec.clone().unwrap_or_default();
                Arc::new(ExecRealizer::new(exec.command, exec.timeout.0))
            }
            RealizerKind::KubernetesOperator => {
                let base = normalize_base_url(&config.jobmanager.url).map_err(|e| ConfigError {
                    key: "jobmanager.url".into(),
                    message: e.to_string(),
                })?;
                let k = c.kubernetes.clone().unwrap_or_default();
                let access = KubeAccess::resolve(&k, &|name| std::env::var(name).ok())?;
                Arc::new(KubernetesOperator::new(
                    access,
                    &k.deployment,
                    k.request_timeout.0,
                    in_place(&base)?,
                )?)
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
            pending_poll_max_ms: s
                .coordinator
                .as_ref()
                .map(|c| ms(c.pending_poll_max))
                .unwrap_or_else(|| ms(s.retry_max)),
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

    /// One poll's worth of the loop for one job; what the collector should change after it.
    pub async fn run_step(
        &self,
        job: &JobCollector,
        report: &PollReport,
        now_ms: u64,
    ) -> AfterStep {
        let mut after = AfterStep::default();
        let job_id = job.job_id().to_string();
        let mut record = self.store.get(&job_id);
        if let Err(e) =
            super::engine_input::observe_poll(&self.store, &self.fleet, job, &mut record, now_ms)
                .await
        {
            tracing::error!(job_id = %job_id, error = %e, "cannot persist the agent state");
            crate::telemetry::record_error("state_file");
        }
        for _ in 0..MAX_TRANSITIONS_PER_POLL {
            let mut obs = observe(job, report, now_ms);
            // A window about to start over is not ready, whatever it holds now.
            obs.window_ready &= !after.reset_window;
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
                Next::PollVerdict => self.poll_verdict(&job_id, now_ms, &mut record).await,
                Next::Actuate => self.actuate(job, &obs, &mut record, &mut after).await,
                Next::Verify => self.verify(job, &obs, &mut record, &mut after).await,
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
        after
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
        let input = super::engine_input::with_evidence(
            evaluate_input(
                obs.now_ms,
                config,
                snapshot,
                job.window().to_vec(),
                record.scaling.clone(),
            ),
            record,
            &self.store.profile(job_id),
        );
        let output = match evaluate_and_decide(&input) {
            Ok(o) => o,
            Err(e) => {
                tracing::warn!(job_id = %job_id, error = %e, "the engine could not use this window");
                crate::telemetry::record_error("engine");
                return false;
            }
        };
        crate::telemetry::record_engine_figures(job_id, &output);
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
    fn log_limits(&self, job_id: &str, decision: &flink_autoscale_core::engine::Decision) {
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
            Ok(decision) => self.fold_verdict(job_id, &proposal, decision, now_ms, record),
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

    /// Asks whether a pending verdict is final. Meanwhile nothing is proposed or applied for
    /// the job (collection goes on).
    async fn poll_verdict(&self, job_id: &str, now_ms: u64, record: &mut JobRecord) {
        let Some(flight) = record.in_flight.as_ref() else {
            return;
        };
        let proposal = flight.proposal.clone();
        match self.gatekeeper.verdict(&proposal.proposal_id).await {
            Ok(decision) => self.fold_verdict(job_id, &proposal, decision, now_ms, record),
            Err(e) => {
                metrics::gatekeeper(job_id, Some(e.kind()));
                self.emit(LoopEvent::GatekeeperError {
                    job_id: job_id.to_string(),
                    proposal_id: proposal.proposal_id.clone(),
                    error: e.to_string(),
                });
                match e {
                    GateError::Unavailable(_) => {
                        core::on_poll_unavailable(record, now_ms, &self.timing, rand::random());
                        tracing::warn!(job_id = %job_id, proposal_id = %proposal.proposal_id, error = %e, "pending verdict not read; nothing is applied, polling again later");
                    }
                    GateError::Rejected { .. } => {
                        core::on_proposal_rejected(record, now_ms, &self.timing);
                        tracing::error!(job_id = %job_id, proposal_id = %proposal.proposal_id, error = %e, "the coordinator no longer knows the pending proposal; dropping it");
                    }
                }
            }
        }
    }

    /// Folds a verdict from the gatekeeper into the record: logs, metrics, events.
    fn fold_verdict(
        &self,
        job_id: &str,
        proposal: &Proposal,
        decision: Decision,
        now_ms: u64,
        record: &mut JobRecord,
    ) {
        let was_pending = matches!(
            record.in_flight.as_ref().map(|f| &f.stage),
            Some(Stage::Pending { .. })
        );
        metrics::gatekeeper(job_id, None);
        if !(was_pending && decision.verdict == Verdict::Pending) {
            metrics::proposal(job_id, decision.verdict.as_str());
        }
        let reasons = || -> String {
            decision
                .reasons
                .iter()
                .map(|r| format!("{}/{}: {}", r.gate, r.code, r.message))
                .collect::<Vec<_>>()
                .join("; ")
        };
        let (id, gatekeeper) = (&proposal.proposal_id, self.gatekeeper.label());
        match decision.verdict {
            Verdict::Approved => {
                tracing::info!(job_id = %job_id, proposal_id = %id, gatekeeper, after_pending = was_pending, "proposal approved")
            }
            Verdict::Refused => {
                tracing::info!(job_id = %job_id, proposal_id = %id, gatekeeper, reasons = %reasons(), "proposal refused")
            }
            Verdict::Pending if !was_pending => {
                tracing::info!(job_id = %job_id, proposal_id = %id, gatekeeper, reasons = %reasons(), "proposal pending a person's approval; polling, nothing is applied meanwhile")
            }
            Verdict::Pending => {}
        }
        core::on_verdict(record, &decision, now_ms, &self.timing, rand::random());
        if !(was_pending && decision.verdict == Verdict::Pending) {
            self.emit(LoopEvent::Verdict {
                job_id: job_id.to_string(),
                decision,
            });
        }
        if let Some(Stage::Reporting { outcome, .. }) = record.in_flight.as_ref().map(|f| &f.stage)
        {
            metrics::actuation(job_id, "not_applied");
            self.emit_outcome(job_id, &proposal.proposal_id, outcome, None);
        }
    }

    async fn actuate(
        &self,
        job: &JobCollector,
        obs: &Observation,
        record: &mut JobRecord,
        after: &mut AfterStep,
    ) {
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
            self.conclude(job, record, outcome, obs.now_ms, None, after);
            return;
        }
        let scheduler = job.snapshot().scheduler.clone();
        match self.realizer.check(&job_id, scheduler.as_ref()).await {
            Ok(()) => {}
            Err(ActuationError::RetryLater(message)) => {
                tracing::warn!(job_id = %job_id, proposal_id = %proposal.proposal_id, error = %message, "cannot tell now whether the job can be rescaled; retrying later");
                metrics::actuation(&job_id, "retry_later");
                core::on_actuation_retry_later(record, obs.now_ms, &self.timing);
                return;
            }
            Err(e) => {
                self.not_applicable(
                    job,
                    record,
                    obs,
                    &proposal.proposal_id,
                    e.to_string(),
                    after,
                );
                return;
            }
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
                self.conclude(job, record, outcome, obs.now_ms, None, after);
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
                self.conclude(job, record, outcome, obs.now_ms, None, after);
            }
            Err(ActuationError::NotApplicable(message)) => {
                self.not_applicable(job, record, obs, &proposal.proposal_id, message, after);
            }
        }
    }

    /// The realizer cannot rescale this job at all (it does not run the adaptive
    /// scheduler): nothing is sent to the JobManager, and the outcome says why.
    fn not_applicable(
        &self,
        job: &JobCollector,
        record: &mut JobRecord,
        obs: &Observation,
        proposal_id: &str,
        reason: String,
        after: &mut AfterStep,
    ) {
        let job_id = job.job_id().to_string();
        tracing::warn!(job_id = %job_id, proposal_id = %proposal_id, realizer = self.realizer.label(), reason = %reason, "approved plan not applied: the realizer cannot rescale this job");
        metrics::actuation(&job_id, "not_applicable");
        let outcome = core::failed(reason, obs.parallelism.clone());
        self.conclude(job, record, outcome, obs.now_ms, None, after);
    }

    async fn verify(
        &self,
        job: &JobCollector,
        obs: &Observation,
        record: &mut JobRecord,
        after: &mut AfterStep,
    ) {
        // Flink 2.3 keeps a rescale history: ask it how the rescale stands.
        let history = match record.in_flight.as_ref() {
            Some(flight) => match &flight.stage {
                Stage::Actuating {
                    plan,
                    actuated_at_ms,
                    ..
                } => {
                    let wanted = crate::actuation::full_parallelism(&flight.proposal, plan);
                    self.realizer
                        .rescale_status(job.job_id(), &wanted, *actuated_at_ms)
                        .await
                }
                _ => HistoryFinding::Unknown,
            },
            None => HistoryFinding::Unknown,
        };
        let result = core::verify(record, obs, &history);
        let label = match &result {
            Verification::Pending => return,
            Verification::Applied { .. } => "applied",
            Verification::Rejected { .. } => "rejected",
            Verification::TimedOut => "timed_out",
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
        match &result {
            Verification::Applied {
                restart_ms,
                rescale,
            } => {
                metrics::restart_duration(&job_id, *restart_ms);
                let flink = rescale.as_ref().map(|r| {
                    format!(
                        "{} {} ({})",
                        r.rescale_uuid,
                        r.terminal_state,
                        r.terminated_reason.as_deref().unwrap_or("")
                    )
                });
                tracing::info!(job_id = %job_id, proposal_id = %proposal_id, restart_ms, rescaling_ms = spent, flink_rescale = flink.as_deref().unwrap_or("not in a rescale history"), "rescale applied");
            }
            Verification::Rejected { reason, .. } => {
                tracing::warn!(job_id = %job_id, proposal_id = %proposal_id, observed = ?obs.parallelism, reason = %reason, "rescale ended without reaching the approved plan");
            }
            Verification::TimedOut | Verification::Pending => {
                tracing::warn!(job_id = %job_id, proposal_id = %proposal_id, observed = ?obs.parallelism, "rescale timed out");
            }
        }
        after.reset_window = true;
        if let Some(Stage::Reporting { outcome, .. }) = record.in_flight.as_ref().map(|f| &f.stage)
        {
            self.emit_outcome(&job_id, &proposal_id, outcome, Some(spent));
        }
    }

    /// Ends the action with `outcome` (to be reported); the window is to start over.
    fn conclude(
        &self,
        job: &JobCollector,
        record: &mut JobRecord,
        outcome: Outcome,
        now_ms: u64,
        rescaling_ms: Option<u64>,
        after: &mut AfterStep,
    ) {
        let proposal_id = record
            .in_flight
            .as_ref()
            .map(|f| f.proposal.proposal_id.clone())
            .unwrap_or_default();
        self.emit_outcome(job.job_id(), &proposal_id, &outcome, rescaling_ms);
        core::finish(record, outcome, now_ms);
        after.reset_window = true;
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
                let rescale = outcome.rescale.as_ref();
                tracing::info!(
                    job_id = %job_id,
                    proposal_id = %proposal_id,
                    status = outcome.status.as_str(),
                    rescale_uuid = rescale.map(|r| r.rescale_uuid.as_str()),
                    rescale_terminal_state = rescale.map(|r| r.terminal_state.as_str()),
                    rescale_terminated_reason = rescale.and_then(|r| r.terminated_reason.as_deref()),
                    rescale_duration_ms = rescale.and_then(|r| r.duration_ms),
                    "outcome reported"
                );
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
        job: &'a JobCollector,
        report: &'a PollReport,
        now_ms: u64,
    ) -> BoxFuture<'a, AfterStep> {
        Box::pin(self.run_step(job, report, now_ms))
    }
}
