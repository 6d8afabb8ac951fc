//! What the gates need to know about a set of proposals, read in one statement inside the
//! deciding transaction: earlier records of their ids, their jobs' open actions (approved or
//! pending a person) and last approvals, in-flight counts of their clusters and regions,
//! region flags, pauses, cluster overrides and the approval rules set through the API.
//! Used by the proposal writer (a batch) and by reviews (one pending proposal).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use flink_autoscale_core::gates::{GateConfig, Switches};
use flink_autoscale_core::ledger::{Ledger, OpenAction};
use flink_autoscale_core::pause;
use flink_autoscale_core::policy::{Policy, Rule};
use flink_autoscale_core::protocol::{ApprovalRequest, ClusterOverrides, Pause, Proposal};
use sqlx::any::AnyArguments;
use sqlx::query::Query;
use sqlx::{Any, AnyConnection, Row};

use super::{parse_json, StoreError};

/// Bind-parameter syntax for generated statements. SQLite resolves `$N` names with a linear
/// string search per occurrence (quadratic in a batch-sized statement); `?N` is numeric.
#[derive(Clone, Copy)]
pub(super) struct Params {
    pub sqlite: bool,
}

impl Params {
    pub fn one(self, n: usize) -> String {
        if self.sqlite {
            format!("?{n}")
        } else {
            format!("${n}")
        }
    }

    /// Parameters `first, first+1, …` for `n` values, comma-separated.
    pub fn list(self, first: usize, n: usize) -> String {
        (first..first + n)
            .map(|i| self.one(i))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A statement whose text depends on the batch: not worth a cached prepared statement.
pub(super) fn one_shot(sql: &str) -> Query<'_, Any, AnyArguments<'_>> {
    sqlx::query(sql).persistent(false)
}

pub(super) fn distinct<'a>(values: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut seen = HashSet::new();
    values.filter(|v| seen.insert(*v)).collect()
}

fn bind_all<'q>(
    mut query: Query<'q, Any, AnyArguments<'q>>,
    values: &[&'q str],
) -> Query<'q, Any, AnyArguments<'q>> {
    for v in values {
        query = query.bind(*v);
    }
    query
}

/// Advisory-lock namespaces (the first key of `pg_advisory_xact_lock(int, int)`).
const CLUSTER_LOCK_SPACE: i32 = 0x4641_0001;
const REGION_LOCK_SPACE: i32 = 0x4641_0002;

/// Makes the per-cluster and per-region caps exact across writers and replicas on
/// PostgreSQL: takes a transaction-scoped advisory lock per cluster and region of the
/// proposals, in one sorted order (no deadlock between batches), before the in-flight counts
/// are read. A concurrent batch for the same cluster or region waits until this one commits,
/// and its count then includes this batch's approvals. (SQLite has a single writer already.)
pub(super) async fn lock_scopes(
    conn: &mut AnyConnection,
    proposals: &[&Proposal],
) -> Result<(), StoreError> {
    let mut keys: Vec<(i32, i32)> = proposals
        .iter()
        .flat_map(|p| {
            [
                (CLUSTER_LOCK_SPACE, lock_key(&p.cluster_id)),
                (REGION_LOCK_SPACE, lock_key(&p.region)),
            ]
        })
        .collect();
    keys.sort_unstable();
    keys.dedup();
    let values: Vec<String> = (0..keys.len())
        .map(|i| format!("(${}, ${})", 2 * i + 1, 2 * i + 2))
        .collect();
    let sql = format!(
        "SELECT COUNT(*) FROM (SELECT pg_advisory_xact_lock(space, id) FROM (VALUES {}) \
         AS scope (space, id) ORDER BY space, id) AS locked",
        values.join(", ")
    );
    let mut query = one_shot(&sql);
    for (space, id) in keys {
        query = query.bind(space).bind(id);
    }
    query.execute(&mut *conn).await?;
    Ok(())
}

/// A stable 32-bit key for a cluster or region id (FNV-1a). Two ids sharing a key only
/// serialize each other's batches.
fn lock_key(id: &str) -> i32 {
    let mut hash: u32 = 0x811c_9dc5;
    for b in id.bytes() {
        hash ^= u32::from(b);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    i32::from_ne_bytes(hash.to_ne_bytes())
}

/// A proposal of one of the jobs that waits for a person (live or past its expiry).
#[derive(Debug, Clone)]
pub(super) struct PendingAction {
    pub proposal_id: String,
    pub approval: ApprovalRequest,
    /// The proposal as stored (JSON), for notifications.
    pub proposal: String,
}

/// What the database knows about a set of proposals, their jobs, clusters and regions.
#[derive(Default)]
pub(super) struct Facts {
    /// proposal id → (stored proposal JSON, stored decision JSON)
    pub recorded: HashMap<String, (String, String)>,
    /// Live open actions (approved or pending) and last approvals of the jobs, in-flight
    /// counts of the clusters and regions.
    pub ledger: Ledger,
    /// job id → its proposal waiting for a person, also when expired but not swept yet.
    pub pending: HashMap<String, PendingAction>,
    pub evacuating: HashSet<String>,
    pub overrides: HashMap<String, ClusterOverrides>,
    /// Pauses in force.
    pub pauses: Vec<Pause>,
    /// The approval rules set through the API (JSON), if any.
    pub api_rules: Option<String>,
}

impl Facts {
    /// The region flag and the pause that bear on `p`.
    pub fn switches(&self, p: &Proposal, now_ms: i64) -> Switches {
        Switches {
            region_evacuating: self.evacuating.contains(&p.region),
            pause: pause::in_force(&self.pauses, p, now_ms).cloned(),
        }
    }

    /// The gate configuration for `p`'s cluster.
    pub fn gates(&self, fleet: &GateConfig, p: &Proposal) -> GateConfig {
        match self.overrides.get(&p.cluster_id) {
            Some(o) => fleet.with_overrides(o),
            None => fleet.clone(),
        }
    }
}

/// Reads every fact the proposals need in a single statement (one round trip matters more
/// than anything else here): a UNION of tagged rows, all columns as text.
///
/// An open action is live while it is approved and younger than the open-action timeout
/// (`approved_at > expired_before`), or pending and before its expiry.
pub(super) async fn load(
    conn: &mut AnyConnection,
    params: Params,
    proposals: &[&Proposal],
    now: i64,
    expired_before: i64,
) -> Result<Facts, StoreError> {
    let ids = distinct(proposals.iter().map(|p| p.proposal_id.as_str()));
    let jobs = distinct(proposals.iter().map(|p| p.job_id.as_str()));
    let clusters = distinct(proposals.iter().map(|p| p.cluster_id.as_str()));
    let regions = distinct(proposals.iter().map(|p| p.region.as_str()));
    // Parameters 1 and 2 are the expiry bound and now; then the id, job, cluster and region
    // lists.
    let (expiry, now_p) = (params.one(1), params.one(2));
    let ids_in = params.list(3, ids.len());
    let jobs_in = params.list(3 + ids.len(), jobs.len());
    let clusters_in = params.list(3 + ids.len() + jobs.len(), clusters.len());
    let regions_in = params.list(3 + ids.len() + jobs.len() + clusters.len(), regions.len());
    const NULL: &str = "CAST(NULL AS TEXT)";
    let live =
        format!("((pending_until IS NULL AND approved_at > {expiry}) OR pending_until > {now_p})");
    let sql = format!(
        "SELECT 'd', proposal_id, proposal, decision, {NULL}, {NULL} FROM decisions \
           WHERE proposal_id IN ({ids_in}) \
         UNION ALL SELECT 'j', job_id, CAST(last_approved_at AS TEXT), {NULL}, {NULL}, {NULL} FROM jobs \
           WHERE last_approved_at IS NOT NULL AND job_id IN ({jobs_in}) \
         UNION ALL SELECT 'o', job_id, proposal_id, cluster_id, region, \
           CASE WHEN pending_until IS NULL THEN 'approved' ELSE 'pending' END FROM open_actions \
           WHERE {live} AND job_id IN ({jobs_in}) \
         UNION ALL SELECT 'p', o.job_id, o.proposal_id, d.approval, d.proposal, {NULL} \
           FROM open_actions o JOIN decisions d ON d.proposal_id = o.proposal_id \
           WHERE o.pending_until IS NOT NULL AND o.job_id IN ({jobs_in}) \
         UNION ALL SELECT 'c', cluster_id, CAST(COUNT(*) AS TEXT), {NULL}, {NULL}, {NULL} FROM open_actions \
           WHERE {live} AND cluster_id IN ({clusters_in}) GROUP BY cluster_id \
         UNION ALL SELECT 'r', region, CAST(COUNT(*) AS TEXT), {NULL}, {NULL}, {NULL} FROM open_actions \
           WHERE {live} AND region IN ({regions_in}) GROUP BY region \
         UNION ALL SELECT 'e', region, {NULL}, {NULL}, {NULL}, {NULL} FROM evacuations \
           WHERE region IN ({regions_in}) \
         UNION ALL SELECT 'v', cluster_id, overrides, {NULL}, {NULL}, {NULL} FROM cluster_overrides \
           WHERE cluster_id IN ({clusters_in}) \
         UNION ALL SELECT 'a', scope, reason, set_by, CAST(since AS TEXT), CAST(expires_at AS TEXT) \
           FROM pauses WHERE expires_at IS NULL OR expires_at > {now_p} \
         UNION ALL SELECT 'y', updated_by, rules, {NULL}, {NULL}, {NULL} FROM approval_policy"
    );
    let mut query = one_shot(&sql).bind(expired_before).bind(now);
    for list in [&ids, &jobs, &clusters, &regions] {
        query = bind_all(query, list);
    }
    let mut facts = Facts::default();
    for row in query.fetch_all(&mut *conn).await? {
        let kind: String = row.try_get(0)?;
        let key: String = row.try_get(1)?;
        // Absent values only occur where the kind has none; elsewhere an empty string fails
        // to parse and is reported as corruption.
        let text = |i: usize| -> Result<String, StoreError> {
            Ok(row.try_get::<Option<String>, _>(i)?.unwrap_or_default())
        };
        let optional = |i: usize| -> Result<Option<String>, StoreError> {
            Ok(row.try_get::<Option<String>, _>(i)?)
        };
        let a = text(2)?;
        match kind.as_str() {
            "d" => {
                facts.recorded.insert(key, (a, text(3)?));
            }
            "j" => facts.ledger.restore_last_approval(&key, parse_int(&a)?),
            "o" => {
                let action = OpenAction {
                    proposal_id: a,
                    cluster_id: text(3)?,
                    region: text(4)?,
                    pending: text(5)? == "pending",
                };
                facts.ledger.restore_open_action(&key, action);
            }
            "p" => {
                let approval = parse_json(&text(3)?, "decisions.approval")?;
                facts.pending.insert(
                    key,
                    PendingAction {
                        proposal_id: a,
                        approval,
                        proposal: text(4)?,
                    },
                );
            }
            "c" => facts
                .ledger
                .restore_cluster_in_flight(&key, count(parse_int(&a)?)),
            "r" => facts
                .ledger
                .restore_region_in_flight(&key, count(parse_int(&a)?)),
            "e" => {
                facts.evacuating.insert(key);
            }
            "v" => {
                facts
                    .overrides
                    .insert(key, parse_json(&a, "cluster_overrides")?);
            }
            "a" => facts.pauses.push(Pause {
                scope: key,
                reason: a,
                set_by: text(3)?,
                since: parse_int(&text(4)?)?,
                expires_at: optional(5)?.map(|t| parse_int(&t)).transpose()?,
            }),
            "y" => facts.api_rules = Some(a),
            other => return Err(StoreError::Corrupt(format!("unknown fact kind {other:?}"))),
        }
    }
    Ok(facts)
}

pub(super) fn parse_int(text: &str) -> Result<i64, StoreError> {
    text.parse()
        .map_err(|_| StoreError::Corrupt(format!("expected an integer, found {text:?}")))
}

fn count(n: i64) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}

/// The approval policy in force: the configuration's rules, then those set through the API;
/// compiled again only when the stored rules change.
pub(super) struct Policies {
    config_rules: Vec<Rule>,
    approval_ttl_ms: i64,
    compiled: Mutex<(Option<String>, Arc<Policy>)>,
}

impl Policies {
    pub fn new(config_rules: Vec<Rule>, approval_ttl_ms: i64) -> Result<Policies, StoreError> {
        let policy = Policy::new(&config_rules, approval_ttl_ms)
            .map_err(|e| StoreError::Corrupt(format!("approval.rules: {e}")))?;
        Ok(Policies {
            config_rules,
            approval_ttl_ms,
            compiled: Mutex::new((None, Arc::new(policy))),
        })
    }

    pub fn config_rules(&self) -> &[Rule] {
        &self.config_rules
    }

    pub fn approval_ttl_ms(&self) -> i64 {
        self.approval_ttl_ms
    }

    /// The policy for the API rules read with the facts (their JSON, if any).
    pub fn current(&self, api_rules: Option<&str>) -> Result<Arc<Policy>, StoreError> {
        let mut compiled = self.compiled.lock().unwrap_or_else(|e| e.into_inner());
        if compiled.0.as_deref() == api_rules {
            return Ok(Arc::clone(&compiled.1));
        }
        let mut rules = self.config_rules.clone();
        if let Some(json) = api_rules {
            rules.extend(parse_json::<Vec<Rule>>(json, "approval_policy.rules")?);
        }
        let policy = Arc::new(
            Policy::new(&rules, self.approval_ttl_ms)
                .map_err(|e| StoreError::Corrupt(format!("approval_policy.rules: {e}")))?,
        );
        *compiled = (api_rules.map(str::to_string), Arc::clone(&policy));
        Ok(policy)
    }
}
