//! The agent ↔ coordinator wire protocol (HTTP/1.1 + JSON, paths under `/v1`).
//!
//! Request bodies reject unknown fields so a typo never silently changes a decision; the
//! proposal may only grow by optional fields. Every input type has a `validate` method whose
//! error names the offending field with a JSON path such as `vertices[2].proposed_parallelism`.

use std::collections::{BTreeMap, HashSet};
use std::fmt;

use serde::{Deserialize, Serialize};

/// Largest parallelism Flink accepts (`pipeline.max-parallelism` upper bound, 2^15).
pub const MAX_PARALLELISM: u32 = 32_768;
/// Upper bound on vertices in one proposal; real job graphs have tens, never thousands.
pub const MAX_VERTICES: usize = 4_096;
/// Upper bound on free-text identifiers (proposal, agent, cluster, region, names).
pub const MAX_TEXT_LEN: usize = 256;
/// Upper bound on free-text explanations (evidence reason, outcome error, evacuation reason).
pub const MAX_MESSAGE_LEN: usize = 4_096;
/// Slot-sharing group Flink uses when none is set.
pub const DEFAULT_SLOT_SHARING_GROUP: &str = "default";

/// The smallest valid `POST /v1/proposals` body: every optional field left out and the
/// state size unknown. For documentation and for tests of decoders.
pub const MINIMAL_PROPOSAL_JSON: &str = r#"{"proposal_id":"x","agent_id":"a","cluster_id":"c","region":"r",
 "job_id":"0123456789abcdef0123456789abcdef","job_name":"j",
 "vertices":[{"id":"0123456789abcdef0123456789abcdef","name":"Map",
   "current_parallelism":1,"proposed_parallelism":2}],
 "checkpoint_state_bytes":null,"slots_per_task_manager":1,
 "disk_bytes_per_task_manager":0,"current_task_managers":1}"#;

/// `POST /v1/proposals`: one proposed parallelism change for one job.
///
/// `vertices` must list every vertex of the job (unchanged ones with
/// `proposed_parallelism == current_parallelism`) so the slot count is right.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Proposal {
    /// Idempotency key: the same id always gets the same verdict and one audit record.
    pub proposal_id: String,
    pub agent_id: String,
    pub cluster_id: String,
    pub region: String,
    /// Flink JobID, 32 lowercase or uppercase hex digits.
    pub job_id: String,
    pub job_name: String,
    #[serde(deserialize_with = "objects")]
    pub vertices: Vec<VertexProposal>,
    /// Size of the latest completed checkpoint; `null` when unknown.
    #[serde(default)]
    pub checkpoint_state_bytes: Option<u64>,
    pub slots_per_task_manager: u32,
    pub disk_bytes_per_task_manager: u64,
    pub current_task_managers: u32,
}

impl Proposal {
    /// The one spelling of a proposal, so that equal proposals compare equal (idempotent
    /// retries): Flink ids in lowercase (they are case-insensitive hex) and Flink's `default`
    /// slot-sharing group as absent.
    pub fn normalize(&mut self) {
        self.job_id.make_ascii_lowercase();
        for v in &mut self.vertices {
            v.id.make_ascii_lowercase();
            if v.slot_sharing_group.as_deref() == Some(DEFAULT_SLOT_SHARING_GROUP) {
                v.slot_sharing_group = None;
            }
        }
    }
}

/// One vertex of a [`Proposal`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VertexProposal {
    /// Flink JobVertexID, 32 hex digits.
    pub id: String,
    pub name: String,
    /// Missing means Flink's `default` group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot_sharing_group: Option<String>,
    pub current_parallelism: u32,
    pub proposed_parallelism: u32,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "optional_object"
    )]
    pub evidence: Option<Evidence>,
}

impl VertexProposal {
    /// The slot-sharing group, with Flink's default filled in.
    pub fn slot_sharing_group(&self) -> &str {
        self.slot_sharing_group
            .as_deref()
            .unwrap_or(DEFAULT_SLOT_SHARING_GROUP)
    }
}

/// Why the agent proposes this parallelism (recorded in the audit, not used by the gates).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Evidence {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub true_processing_rate: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_data_rate: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_ratio: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Approved, refused, or pending: the gates passed and an approval policy wants a person
/// to approve or deny it. A pending verdict is not final; `GET /v1/proposals/{id}` tells
/// when it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Approved,
    Refused,
    Pending,
}

impl Verdict {
    pub const ALL: [Verdict; 3] = [Verdict::Approved, Verdict::Refused, Verdict::Pending];

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Approved => "approved",
            Verdict::Refused => "refused",
            Verdict::Pending => "pending",
        }
    }

    pub fn parse(s: &str) -> Option<Verdict> {
        Verdict::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// Approved or refused: nothing will change it any more.
    pub fn is_final(self) -> bool {
        self != Verdict::Pending
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The name of a gate, as it appears in reasons, configuration and metrics.
///
/// [`GateName::ALL`] are the configurable gates of `gates.order`. Two more names only appear
/// in reasons and are always on: `pause` (an admin's pause switch covers the proposal) and
/// `approval` (an approval policy asked for a person: waiting, denied, expired or
/// superseded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateName {
    RegionFailover,
    DiskCapacity,
    StandbyBuffer,
    RateLimit,
    Pause,
    Approval,
}

impl GateName {
    /// The configurable gates, in their default order.
    pub const ALL: [GateName; 4] = [
        GateName::RegionFailover,
        GateName::DiskCapacity,
        GateName::StandbyBuffer,
        GateName::RateLimit,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            GateName::RegionFailover => "region_failover",
            GateName::DiskCapacity => "disk_capacity",
            GateName::StandbyBuffer => "standby_buffer",
            GateName::RateLimit => "rate_limit",
            GateName::Pause => "pause",
            GateName::Approval => "approval",
        }
    }

    /// True for the gates `gates.order` may list.
    pub fn is_configurable(self) -> bool {
        GateName::ALL.contains(&self)
    }
}

impl fmt::Display for GateName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for GateName {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        GateName::ALL
            .into_iter()
            .find(|g| g.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown gate {s:?} (expected one of region_failover, disk_capacity, standby_buffer, rate_limit)"
                )
            })
    }
}

/// Why a gate refused (one per refusing check). `code` is stable and machine-readable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reason {
    pub gate: GateName,
    pub code: String,
    pub message: String,
}

/// What an approval lets the agent do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// TaskManagers the job needs for the proposed parallelism (slot sharing applied).
    pub task_managers: u32,
    /// Extra idle TaskManagers to keep as a buffer on large clusters.
    pub standby_task_managers: u32,
    /// Vertex id → parallelism to apply.
    pub parallelism: BTreeMap<String, u32>,
}

/// The answer to `POST /v1/proposals`. `plan` is present exactly when approved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Decision {
    pub proposal_id: String,
    pub verdict: Verdict,
    pub reasons: Vec<Reason>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Plan>,
}

/// Result of applying an approved plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutcomeStatus {
    Applied,
    Failed,
}

impl OutcomeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            OutcomeStatus::Applied => "applied",
            OutcomeStatus::Failed => "failed",
        }
    }
}

/// `POST /v1/proposals/{id}/outcome`: what happened after an approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Outcome {
    pub status: OutcomeStatus,
    /// Vertex id → parallelism observed after the rescale (may be partial or empty).
    #[serde(default)]
    pub observed_parallelism: BTreeMap<String, u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Applied: milliseconds from the actuation to the job running at the new parallelism
    /// (the downtime the rescale cost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_ms: Option<u64>,
    /// What Flink's own rescale history said about this rescale (Flink 2.3+ with
    /// `web.adaptive-scheduler.rescale-history.size` > 0); absent when it was not served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rescale: Option<RescaleReport>,
}

/// One rescale as Flink's rescale history (`/jobs/:jid/rescales/details/:uuid`) ended it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RescaleReport {
    pub rescale_uuid: String,
    /// `COMPLETED`, `FAILED` or `IGNORED`.
    pub terminal_state: String,
    /// Why it ended: `SUCCEEDED`, `EXCEPTION_OCCURRED`, `RESOURCE_REQUIREMENTS_UPDATED`,
    /// `NO_RESOURCES_OR_PARALLELISMS_CHANGE`, `JOB_FAILED`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminated_reason: Option<String>,
    /// What started it; the agent's own rescales are `UPDATE_REQUIREMENT`.
    pub trigger_cause: String,
    /// From its start to its end on the JobManager, when both are known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

/// An [`Outcome`] as recorded, with the time the coordinator received it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedOutcome {
    pub status: OutcomeStatus,
    pub observed_parallelism: BTreeMap<String, u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rescale: Option<RescaleReport>,
    /// Unix time in milliseconds.
    pub reported_at: i64,
}

impl RecordedOutcome {
    pub fn new(outcome: Outcome, reported_at: i64) -> Self {
        RecordedOutcome {
            status: outcome.status,
            observed_parallelism: outcome.observed_parallelism,
            error: outcome.error,
            restart_ms: outcome.restart_ms,
            rescale: outcome.rescale,
            reported_at,
        }
    }

    /// The outcome as the agent reported it (for idempotent re-reports).
    pub fn outcome(&self) -> Outcome {
        Outcome {
            status: self.status,
            observed_parallelism: self.observed_parallelism.clone(),
            error: self.error.clone(),
            restart_ms: self.restart_ms,
            rescale: self.rescale.clone(),
        }
    }
}

/// One audit record, as returned by `GET /v1/decisions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecord {
    pub proposal_id: String,
    pub agent_id: String,
    pub job_id: String,
    pub job_name: String,
    pub cluster_id: String,
    pub region: String,
    pub verdict: Verdict,
    pub reasons: Vec<Reason>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Plan>,
    /// Unix time in milliseconds.
    pub received_at: i64,
    pub outcome: Option<RecordedOutcome>,
    /// The proposal as the agent sent it: every vertex with its evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposal: Option<Proposal>,
    /// Set when an approval policy asked a person to decide (kept once decided).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalRequest>,
    /// Who approved or denied it, when and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<Review>,
}

/// Why and until when a proposal waits for a person.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// The approval rule that matched.
    pub rule: String,
    /// Unix time in milliseconds after which it is refused (`approval_expired`).
    pub expires_at: i64,
}

/// What a person decided about a pending proposal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReviewAction {
    Approve,
    Deny,
}

impl ReviewAction {
    pub fn as_str(self) -> &'static str {
        match self {
            ReviewAction::Approve => "approve",
            ReviewAction::Deny => "deny",
        }
    }
}

/// A person's approval or denial, as recorded in the audit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Review {
    pub action: ReviewAction,
    /// The admin's name (from the token file).
    pub by: String,
    /// Unix time in milliseconds.
    pub at: i64,
    pub comment: String,
}

/// `POST /v1/proposals/{id}/approve` and `/deny` body. A denial needs a comment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReviewRequest {
    #[serde(default)]
    pub comment: String,
}

impl ReviewRequest {
    pub fn validate(&self, action: ReviewAction) -> Result<(), FieldError> {
        if action == ReviewAction::Deny && self.comment.trim().is_empty() {
            return Err(FieldError::new(
                "comment",
                "a denial needs a comment saying why",
            ));
        }
        validate_message("comment", &self.comment)
    }
}

/// `GET /v1/decisions`: newest first; pass `cursor=<next>` for the next page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionPage {
    pub decisions: Vec<DecisionRecord>,
    pub next: Option<String>,
}

/// One row of `GET /v1/jobs`: the latest proposal and verdict for a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobView {
    pub job_id: String,
    pub job_name: String,
    pub cluster_id: String,
    pub region: String,
    pub last_proposal_id: String,
    pub last_verdict: Verdict,
    /// Unix time in milliseconds.
    pub last_received_at: i64,
    /// Unix time in milliseconds of the latest approval, if any.
    pub last_approved_at: Option<i64>,
    /// Proposal id of the approved action still waiting for its outcome, if any.
    pub open_action: Option<String>,
    /// Proposal id of the proposal waiting for a person's approval, if any.
    #[serde(default)]
    pub pending: Option<String>,
    /// The latest proposal's vertices: current and proposed parallelism, with evidence.
    #[serde(default)]
    pub vertices: Vec<VertexProposal>,
    /// The outcome of the latest proposal, if reported.
    #[serde(default)]
    pub last_outcome: Option<RecordedOutcome>,
    /// Slots the job uses now: the latest proposal's, at its proposed parallelism once
    /// applied, else at its current parallelism (widest vertex per slot-sharing group).
    #[serde(default)]
    pub slots_now: u64,
    /// Slots at the job's first proposal, before any autoscaling.
    #[serde(default)]
    pub slots_before_autoscaling: Option<u64>,
}

/// `GET /v1/jobs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobsPage {
    pub jobs: Vec<JobView>,
}

/// `PUT /v1/regions/{region}/evacuation` body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvacuationRequest {
    pub reason: String,
}

/// A region under evacuation (failover in progress).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegionEvacuation {
    pub region: String,
    pub reason: String,
    /// Unix time in milliseconds when the flag was set.
    pub since: i64,
    /// The admin who set it (absent for flags set before admins had names).
    #[serde(default)]
    pub set_by: Option<String>,
}

/// `GET /v1/regions`: the regions currently evacuating.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegionsPage {
    pub regions: Vec<RegionEvacuation>,
}

/// `PUT /v1/clusters/{cluster}/overrides`: per-cluster settings that win over the fleet
/// defaults and over what agents report. Absent fields keep the fleet default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterOverrides {
    /// Local disk per TaskManager; replaces the agent-reported value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_bytes_per_task_manager: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_headroom: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standby_min_cluster_task_managers: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standby_fraction: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standby_min_task_managers: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_interval_seconds: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_in_flight_per_cluster: Option<u32>,
}

/// One row of `GET /v1/clusters`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterOverridesView {
    pub cluster_id: String,
    pub overrides: ClusterOverrides,
    /// Unix time in milliseconds.
    pub updated_at: i64,
    /// The admin who set them (absent for overrides set before admins had names).
    #[serde(default)]
    pub updated_by: Option<String>,
}

/// `GET /v1/clusters`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClustersPage {
    pub clusters: Vec<ClusterOverridesView>,
}

/// `PUT /v1/pauses/{scope}` body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PauseRequest {
    pub reason: String,
    /// Unix time in milliseconds when the pause lifts by itself; absent: until deleted.
    #[serde(default)]
    pub expires_at: Option<i64>,
}

impl PauseRequest {
    /// `now_ms`: an expiry must lie in the future.
    pub fn validate(&self, now_ms: i64) -> Result<(), FieldError> {
        if self.reason.trim().is_empty() {
            return Err(FieldError::new("reason", "must not be empty"));
        }
        validate_message("reason", &self.reason)?;
        if let Some(at) = self.expires_at {
            if at <= now_ms {
                return Err(FieldError::new(
                    "expires_at",
                    "must be in the future (Unix milliseconds)",
                ));
            }
        }
        Ok(())
    }
}

/// A pause switch: while it is on, proposals in its scope are refused (`paused`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pause {
    /// `fleet`, `region/R`, `cluster/C` or `job/J` (see `pause::PauseScope`).
    pub scope: String,
    pub reason: String,
    /// The admin who set it.
    pub set_by: String,
    /// Unix time in milliseconds.
    pub since: i64,
    /// Unix time in milliseconds when it lifts by itself, if set.
    #[serde(default)]
    pub expires_at: Option<i64>,
}

/// `GET /v1/pauses`: the pauses in force, broadest scope first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PausesPage {
    pub pauses: Vec<Pause>,
}

/// One admin action, as `GET /v1/admin-actions` lists them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdminAction {
    /// Unix time in milliseconds.
    pub at: i64,
    /// The admin's name.
    pub admin: String,
    /// `flag_region`, `unflag_region`, `set_overrides`, `delete_overrides`, `approve`,
    /// `deny`, `pause`, `unpause`, `set_policy`.
    pub action: String,
    /// What it was about: a region, cluster, proposal id, pause scope or `policy`.
    pub target: String,
    /// The request as given (reason, comment, overrides, rules).
    pub detail: serde_json::Value,
}

/// `GET /v1/admin-actions`: newest first; pass `cursor=<next>` for the next page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdminActionPage {
    pub actions: Vec<AdminAction>,
    pub next: Option<String>,
}

/// Body of every 4xx/5xx answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// Stable machine-readable class, e.g. `invalid_field`, `unauthorized`.
    pub error: String,
    /// JSON path of the offending input, when one field is to blame.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    pub message: String,
}

/// An input value that is well-typed but not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// A request body that must be a JSON object. Serde's derived structs also accept a JSON
/// array and fill the fields by position (`[1, 0.5]` would set the first two overrides);
/// decoding through `Object<T>` refuses anything but an object: "expected a JSON object".
#[derive(Debug, Clone, PartialEq)]
pub struct Object<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjectVisitor<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for ObjectVisitor<T> {
            type Value = T;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }
        deserializer
            .deserialize_map(ObjectVisitor(std::marker::PhantomData))
            .map(Object)
    }
}

/// A list of objects (each element as [`Object`]).
fn objects<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    let items = Vec::<Object<T>>::deserialize(deserializer)?;
    Ok(items.into_iter().map(|o| o.0).collect())
}

/// An optional object (`null` or absent is `None`).
fn optional_object<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Object<T>>::deserialize(deserializer)?.map(|o| o.0))
}

/// True for a Flink id: exactly 32 hex digits.
pub fn is_flink_id(s: &str) -> bool {
    s.len() == 32 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Checks a short identifier: non-empty, at most [`MAX_TEXT_LEN`] bytes, printable ASCII
/// without spaces or `/`, and not a dot segment (`.` or `..`): it ends up in URL paths,
/// where clients resolve dot segments away (`/v1/regions/../evacuation` becomes
/// `/v1/evacuation`).
pub fn validate_identifier(field: &str, value: &str) -> Result<(), FieldError> {
    if value.is_empty() {
        return Err(FieldError::new(field, "must not be empty"));
    }
    if value == "." || value == ".." {
        return Err(FieldError::new(
            field,
            "must not be a dot segment (\".\" or \"..\")",
        ));
    }
    if value.len() > MAX_TEXT_LEN {
        return Err(FieldError::new(
            field,
            format!("must be at most {MAX_TEXT_LEN} bytes"),
        ));
    }
    if !value.bytes().all(|b| b.is_ascii_graphic() && b != b'/') {
        return Err(FieldError::new(
            field,
            "must be printable ASCII without spaces or '/'",
        ));
    }
    Ok(())
}

fn validate_name(field: &str, value: &str) -> Result<(), FieldError> {
    if value.len() > MAX_TEXT_LEN {
        return Err(FieldError::new(
            field,
            format!("must be at most {MAX_TEXT_LEN} bytes"),
        ));
    }
    if value.chars().any(char::is_control) {
        return Err(FieldError::new(
            field,
            "must not contain control characters",
        ));
    }
    Ok(())
}

pub fn validate_message(field: &str, value: &str) -> Result<(), FieldError> {
    if value.len() > MAX_MESSAGE_LEN {
        return Err(FieldError::new(
            field,
            format!("must be at most {MAX_MESSAGE_LEN} bytes"),
        ));
    }
    Ok(())
}

fn validate_flink_id(field: &str, value: &str) -> Result<(), FieldError> {
    if is_flink_id(value) {
        Ok(())
    } else {
        Err(FieldError::new(field, "must be a Flink id: 32 hex digits"))
    }
}

fn validate_parallelism(field: &str, value: u32) -> Result<(), FieldError> {
    if (1..=MAX_PARALLELISM).contains(&value) {
        Ok(())
    } else {
        Err(FieldError::new(
            field,
            format!("must be between 1 and {MAX_PARALLELISM}"),
        ))
    }
}

fn validate_rate(field: &str, value: Option<f64>) -> Result<(), FieldError> {
    match value {
        Some(v) if !v.is_finite() || v < 0.0 => {
            Err(FieldError::new(field, "must be a finite number >= 0"))
        }
        _ => Ok(()),
    }
}

impl Proposal {
    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<(), FieldError> {
        validate_identifier("proposal_id", &self.proposal_id)?;
        validate_identifier("agent_id", &self.agent_id)?;
        validate_identifier("cluster_id", &self.cluster_id)?;
        validate_identifier("region", &self.region)?;
        validate_flink_id("job_id", &self.job_id)?;
        validate_name("job_name", &self.job_name)?;
        if self.vertices.is_empty() {
            return Err(FieldError::new("vertices", "must list at least one vertex"));
        }
        if self.vertices.len() > MAX_VERTICES {
            return Err(FieldError::new(
                "vertices",
                format!("must list at most {MAX_VERTICES} vertices"),
            ));
        }
        let mut seen = HashSet::with_capacity(self.vertices.len());
        for (i, v) in self.vertices.iter().enumerate() {
            v.validate(i)?;
            if !seen.insert(v.id.to_ascii_lowercase()) {
                return Err(FieldError::new(
                    format!("vertices[{i}].id"),
                    "duplicate vertex id",
                ));
            }
        }
        if self.slots_per_task_manager == 0 {
            return Err(FieldError::new("slots_per_task_manager", "must be >= 1"));
        }
        Ok(())
    }

    /// True when some vertex would run with fewer subtasks than now.
    pub fn lowers_any_parallelism(&self) -> bool {
        self.vertices
            .iter()
            .any(|v| v.proposed_parallelism < v.current_parallelism)
    }
}

impl VertexProposal {
    fn validate(&self, index: usize) -> Result<(), FieldError> {
        let field = |name: &str| format!("vertices[{index}].{name}");
        validate_flink_id(&field("id"), &self.id)?;
        validate_name(&field("name"), &self.name)?;
        if let Some(group) = &self.slot_sharing_group {
            validate_identifier(&field("slot_sharing_group"), group)?;
        }
        validate_parallelism(&field("current_parallelism"), self.current_parallelism)?;
        validate_parallelism(&field("proposed_parallelism"), self.proposed_parallelism)?;
        if let Some(e) = &self.evidence {
            validate_rate(
                &field("evidence.true_processing_rate"),
                e.true_processing_rate,
            )?;
            validate_rate(&field("evidence.target_data_rate"), e.target_data_rate)?;
            validate_rate(&field("evidence.busy_ratio"), e.busy_ratio)?;
            if let Some(reason) = &e.reason {
                validate_message(&field("evidence.reason"), reason)?;
            }
        }
        Ok(())
    }
}

impl Outcome {
    pub fn validate(&self) -> Result<(), FieldError> {
        for (id, p) in &self.observed_parallelism {
            let field = format!("observed_parallelism.{id}");
            validate_flink_id(&field, id)?;
            validate_parallelism(&field, *p)?;
        }
        if let Some(error) = &self.error {
            validate_message("error", error)?;
        }
        if let Some(r) = &self.rescale {
            validate_identifier("rescale.rescale_uuid", &r.rescale_uuid)?;
            validate_identifier("rescale.terminal_state", &r.terminal_state)?;
            validate_identifier("rescale.trigger_cause", &r.trigger_cause)?;
            if let Some(reason) = &r.terminated_reason {
                validate_identifier("rescale.terminated_reason", reason)?;
            }
        }
        Ok(())
    }
}

impl EvacuationRequest {
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.reason.trim().is_empty() {
            return Err(FieldError::new("reason", "must not be empty"));
        }
        validate_message("reason", &self.reason)
    }
}

impl ClusterOverrides {
    pub fn validate(&self) -> Result<(), FieldError> {
        if let Some(h) = self.disk_headroom {
            if !h.is_finite() || h < 0.0 {
                return Err(FieldError::new(
                    "disk_headroom",
                    "must be a finite number >= 0",
                ));
            }
        }
        if let Some(f) = self.standby_fraction {
            if !f.is_finite() || !(0.0..=1.0).contains(&f) {
                return Err(FieldError::new(
                    "standby_fraction",
                    "must be between 0 and 1",
                ));
            }
        }
        if self.max_in_flight_per_cluster == Some(0) {
            return Err(FieldError::new("max_in_flight_per_cluster", "must be >= 1"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Proposal {
        Proposal {
            proposal_id: "p-1".into(),
            agent_id: "agent-1".into(),
            cluster_id: "c1".into(),
            region: "eu-west-1".into(),
            job_id: "0123456789abcdef0123456789abcdef".into(),
            job_name: "orders".into(),
            vertices: vec![VertexProposal {
                id: "fedcba9876543210fedcba9876543210".into(),
                name: "Map".into(),
                slot_sharing_group: None,
                current_parallelism: 4,
                proposed_parallelism: 2,
                evidence: Some(Evidence {
                    true_processing_rate: Some(1000.0),
                    target_data_rate: Some(300.0),
                    busy_ratio: Some(0.3),
                    reason: Some("underused".into()),
                }),
            }],
            checkpoint_state_bytes: Some(1 << 30),
            slots_per_task_manager: 4,
            disk_bytes_per_task_manager: 10 << 30,
            current_task_managers: 2,
        }
    }

    #[test]
    fn proposal_round_trips() {
        let p = sample();
        let text = serde_json::to_string(&p).unwrap();
        assert_eq!(serde_json::from_str::<Proposal>(&text).unwrap(), p);
        assert!(p.validate().is_ok());
    }

    #[test]
    fn documented_example_parses_with_optional_fields_missing() {
        let p: Proposal = serde_json::from_str(MINIMAL_PROPOSAL_JSON).unwrap();
        assert_eq!(p.vertices[0].slot_sharing_group(), "default");
        assert_eq!(p.checkpoint_state_bytes, None);
        p.validate().unwrap();
    }

    #[test]
    fn unknown_fields_are_rejected() {
        let mut v = serde_json::to_value(sample()).unwrap();
        v["surprise"] = serde_json::json!(1);
        let err = serde_json::from_value::<Proposal>(v).unwrap_err();
        assert!(err.to_string().contains("surprise"), "{err}");
    }

    #[test]
    fn validation_names_the_field() {
        type Case = (fn(&mut Proposal), &'static str);
        let cases: Vec<Case> = vec![
            (|p| p.job_id = "xyz".into(), "job_id"),
            (|p| p.proposal_id.clear(), "proposal_id"),
            (|p| p.region = "a b".into(), "region"),
            (|p| p.vertices.clear(), "vertices"),
            (
                |p| p.vertices[0].proposed_parallelism = 0,
                "vertices[0].proposed_parallelism",
            ),
            (|p| p.vertices[0].id = "1".into(), "vertices[0].id"),
            (
                |p| {
                    let v = p.vertices[0].clone();
                    p.vertices.push(v);
                },
                "vertices[1].id",
            ),
            (|p| p.slots_per_task_manager = 0, "slots_per_task_manager"),
            (
                |p| p.vertices[0].evidence.as_mut().unwrap().busy_ratio = Some(f64::NAN),
                "vertices[0].evidence.busy_ratio",
            ),
        ];
        for (mutate, field) in cases {
            let mut p = sample();
            mutate(&mut p);
            assert_eq!(p.validate().unwrap_err().field, field);
        }
    }

    #[test]
    fn decision_omits_plan_when_refused() {
        let d = Decision {
            proposal_id: "p".into(),
            verdict: Verdict::Refused,
            reasons: vec![Reason {
                gate: GateName::RegionFailover,
                code: "region_evacuating".into(),
                message: "m".into(),
            }],
            plan: None,
        };
        let v = serde_json::to_value(&d).unwrap();
        assert_eq!(v["verdict"], "refused");
        assert_eq!(v["reasons"][0]["gate"], "region_failover");
        assert!(v.get("plan").is_none());
        assert_eq!(serde_json::from_value::<Decision>(v).unwrap(), d);
    }

    #[test]
    fn outcome_round_trips_and_validates() {
        let o = Outcome {
            status: OutcomeStatus::Applied,
            observed_parallelism: [("fedcba9876543210fedcba9876543210".to_string(), 2)].into(),
            error: None,
            restart_ms: Some(5_400),
            rescale: Some(RescaleReport {
                rescale_uuid: "7f55c8b72e131394b399cfb2ee41d16a".into(),
                terminal_state: "COMPLETED".into(),
                terminated_reason: Some("SUCCEEDED".into()),
                trigger_cause: "UPDATE_REQUIREMENT".into(),
                duration_ms: Some(8_883),
            }),
        };
        let rec = RecordedOutcome::new(o.clone(), 5);
        assert_eq!(rec.outcome(), o);
        let text = serde_json::to_string(&rec).unwrap();
        assert!(text.contains(r#""restart_ms":5400"#), "{text}");
        assert_eq!(serde_json::from_str::<RecordedOutcome>(&text).unwrap(), rec);
        // Records written before the field existed still read.
        let old: RecordedOutcome = serde_json::from_str(
            r#"{"status":"failed","observed_parallelism":{},"reported_at":1}"#,
        )
        .unwrap();
        assert_eq!(old.restart_ms, None);
        assert_eq!(old.rescale, None);
        assert!(text.contains(r#""terminal_state":"COMPLETED""#), "{text}");
        o.validate().unwrap();
        let mut forged = o.clone();
        if let Some(r) = forged.rescale.as_mut() {
            r.terminal_state = "COMPLETED\nforged".into();
        }
        assert_eq!(
            forged.validate().unwrap_err().field,
            "rescale.terminal_state"
        );
        let bad = Outcome {
            observed_parallelism: [("nope".to_string(), 2)].into(),
            ..o
        };
        assert_eq!(
            bad.validate().unwrap_err().field,
            "observed_parallelism.nope"
        );
    }

    #[test]
    fn bodies_must_be_objects_at_every_level() {
        let decode = |text: &str| serde_json::from_str::<Object<Proposal>>(text).map(|o| o.0);
        assert!(decode(MINIMAL_PROPOSAL_JSON).is_ok());
        let positional_vertex = MINIMAL_PROPOSAL_JSON.replace(
            r#"{"id":"0123456789abcdef0123456789abcdef","name":"Map",
   "current_parallelism":1,"proposed_parallelism":2}"#,
            r#"["0123456789abcdef0123456789abcdef","Map",null,1,2,null]"#,
        );
        assert_ne!(positional_vertex, MINIMAL_PROPOSAL_JSON);
        let with_evidence = MINIMAL_PROPOSAL_JSON.replace(
            r#""proposed_parallelism":2}"#,
            r#""proposed_parallelism":2,"evidence":[1.0,2.0,0.5,"why"]}"#,
        );
        assert_ne!(with_evidence, MINIMAL_PROPOSAL_JSON);
        let cases = [
            "[]".to_string(),
            r#"["x","a","c","r"]"#.to_string(),
            positional_vertex,
            with_evidence,
        ];
        for text in &cases {
            let err = decode(text).unwrap_err().to_string();
            assert!(err.contains("expected a JSON object"), "{text}: {err}");
        }
        let overrides = |text: &str| serde_json::from_str::<Object<ClusterOverrides>>(text);
        assert!(overrides("[1, 0.5]").is_err());
        assert!(overrides("[]").is_err());
        assert_eq!(overrides("{}").unwrap().0, ClusterOverrides::default());
    }

    #[test]
    fn normalized_proposals_compare_equal() {
        let mut written_out = sample();
        written_out.job_id.make_ascii_uppercase();
        written_out.vertices[0].slot_sharing_group = Some("default".into());
        written_out.vertices[0].id.make_ascii_uppercase();
        assert_ne!(written_out, sample());
        written_out.normalize();
        let mut plain = sample();
        plain.normalize();
        assert_eq!(written_out, plain);
        let mut other_group = sample();
        other_group.vertices[0].slot_sharing_group = Some("heavy".into());
        other_group.normalize();
        assert_ne!(other_group, plain);
    }

    #[test]
    fn dot_segments_are_not_identifiers() {
        for bad in [".", ".."] {
            assert!(validate_identifier("region", bad).is_err(), "{bad}");
        }
        for good in ["...", ".a", "a..b", "eu-west-1"] {
            assert!(validate_identifier("region", good).is_ok(), "{good}");
        }
    }
}
