//! `adaptive-scheduler`: `PUT /jobs/:jid/resource-requirements` on the local JobManager
//! (Flink 1.18+, `jobmanager.scheduler: adaptive`). Every vertex is listed with lower bound 1
//! and upper bound the approved parallelism. A 409 means an earlier update is still in
//! progress: the caller retries later, never stacking a second request on top.
//!
//! A job that does not run the adaptive scheduler is refused before any PUT
//! ([`Realizer::check`]). On Flink 2.3 the rescale history tells how the rescale ended
//! ([`Realizer::rescale_status`]); elsewhere the control loop watches the job.

use std::collections::BTreeMap;
use std::time::Duration;

use flink_autoscale_core::protocol::{Plan, Proposal};
use http::Method;
use serde_json::{json, Map, Value};

use super::rescale_history::{asked_for, candidates, finding, HistoryFinding};
use super::{full_parallelism, Actuation, ActuationError, Realizer};
use crate::control::http_client::{HttpError, JsonClient};
use crate::daemon::clock::BoxFuture;
use crate::flink::client::parse_json;
use crate::flink::ids::path_segment;
use crate::flink::model::Rescale;
use crate::flink::scheduler::{from_requirements_answer, Scheduler};
use crate::flink::Endpoint;

/// The adaptive scheduler's resource-requirements endpoint.
pub struct AdaptiveScheduler {
    base: String,
    http: JsonClient,
}

impl AdaptiveScheduler {
    /// `jobmanager_url`: the normalized REST base URL (no trailing slash).
    pub fn new(jobmanager_url: &str, timeout: Duration) -> Self {
        AdaptiveScheduler {
            base: jobmanager_url.trim_end_matches('/').to_string(),
            http: JsonClient::plain(timeout),
        }
    }

    /// For an `https://` JobManager: `tls` as [`crate::flink::tls::client_config`] builds it.
    pub fn with_tls(jobmanager_url: &str, timeout: Duration, tls: rustls::ClientConfig) -> Self {
        AdaptiveScheduler {
            base: jobmanager_url.trim_end_matches('/').to_string(),
            http: JsonClient::with_tls(timeout, tls),
        }
    }
}

impl AdaptiveScheduler {
    fn job_url(&self, job_id: &str, rest: &str) -> String {
        format!("{}/jobs/{}{rest}", self.base, path_segment(job_id))
    }

    /// One GET; `None` when it got no answer (the rescale history is a bonus, never needed).
    async fn get(&self, url: &str) -> Option<crate::control::http_client::HttpAnswer> {
        match self.http.send(Method::GET, url, None, Vec::new()).await {
            Ok(answer) => Some(answer),
            Err(e) => {
                tracing::debug!(url = %url, error = %e, "no answer");
                None
            }
        }
    }

    /// `GET /jobs/:jid/resource-requirements`: which scheduler runs the job, if it tells.
    async fn probe_scheduler(&self, job_id: &str) -> Result<Option<Scheduler>, ActuationError> {
        let url = self.job_url(job_id, "/resource-requirements");
        let answer = self
            .http
            .send(Method::GET, &url, None, Vec::new())
            .await
            .map_err(|e| match e {
                HttpError::Connect { .. } | HttpError::InvalidUrl { .. } => {
                    ActuationError::RetryLater(e.to_string())
                }
                // No answer in time: nothing was changed; the PUT will tell.
                HttpError::Timeout { .. } | HttpError::Transport { .. } => {
                    ActuationError::RetryLater(e.to_string())
                }
            })?;
        Ok(from_requirements_answer(answer.status, &answer.body))
    }

    /// The agent's rescale in the job's rescale history, and how it stands.
    async fn history_finding(
        &self,
        job_id: &str,
        wanted: &BTreeMap<String, u32>,
        since_ms: u64,
    ) -> HistoryFinding {
        let Some(answer) = self.get(&self.job_url(job_id, "/rescales/history")).await else {
            return HistoryFinding::Unknown;
        };
        // 404: Flink before 2.3, or the history is off for this job.
        if answer.status != 200 {
            return HistoryFinding::Unknown;
        }
        let history: Vec<Rescale> = match parse_json(Endpoint::RescaleHistory, &answer.body) {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!(job_id = %job_id, error = %e, "unreadable rescale history; verifying by watching the job");
                return HistoryFinding::Unknown;
            }
        };
        for candidate in candidates(&history, since_ms) {
            let url = self.job_url(
                job_id,
                &format!(
                    "/rescales/details/{}",
                    path_segment(&candidate.rescale_uuid)
                ),
            );
            let Some(answer) = self.get(&url).await.filter(|a| a.status == 200) else {
                continue;
            };
            match parse_json::<Rescale>(Endpoint::RescaleDetails, &answer.body) {
                Ok(details) if asked_for(&details, wanted) => return finding(&details),
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(job_id = %job_id, error = %e, "unreadable rescale details");
                }
            }
        }
        HistoryFinding::Unknown
    }
}

/// The request body: `{ "<vertex id>": { "parallelism": { "lowerBound": 1, "upperBound": p } } }`.
pub fn requirements_body(proposal: &Proposal, plan: &Plan) -> Value {
    let mut body = Map::new();
    for (id, p) in full_parallelism(proposal, plan) {
        body.insert(
            id,
            json!({ "parallelism": { "lowerBound": 1, "upperBound": p } }),
        );
    }
    Value::Object(body)
}

impl Realizer for AdaptiveScheduler {
    fn apply<'a>(
        &'a self,
        proposal: &'a Proposal,
        plan: &'a Plan,
    ) -> BoxFuture<'a, Result<Actuation, ActuationError>> {
        Box::pin(async move {
            let url = format!(
                "{}/jobs/{}/resource-requirements",
                self.base, proposal.job_id
            );
            let body = serde_json::to_vec(&requirements_body(proposal, plan)).unwrap_or_default();
            let answer = self
                .http
                .send(Method::PUT, &url, None, body)
                .await
                .map_err(|e| match e {
                    HttpError::Connect { .. } | HttpError::InvalidUrl { .. } => {
                        ActuationError::RetryLater(e.to_string())
                    }
                    HttpError::Timeout { .. } | HttpError::Transport { .. } => {
                        ActuationError::Unknown(e.to_string())
                    }
                })?;
            match answer.status {
                200..=299 => Ok(Actuation::Started),
                409 => Err(ActuationError::RetryLater(format!(
                    "the JobManager has another resource-requirements update in progress (409): {}",
                    answer.excerpt()
                ))),
                // The job's scheduler cannot rescale in place (when nothing told earlier).
                500 if from_requirements_answer(500, &answer.body).is_some_and(|s| !s.adaptive) => {
                    let scheduler = from_requirements_answer(500, &answer.body);
                    Err(ActuationError::NotApplicable(
                        scheduler.and_then(|s| s.refusal()).unwrap_or_default(),
                    ))
                }
                status => Err(ActuationError::Failed(format!(
                    "PUT {url} answered {status}: {}",
                    answer.excerpt()
                ))),
            }
        })
    }

    fn label(&self) -> &'static str {
        "adaptive-scheduler"
    }

    /// Refuses a job known not to run the adaptive scheduler; when nothing told the agent
    /// yet (Flink before 2.3 without `jobmanager.scheduler` in the job's configuration),
    /// asks `GET /jobs/:jid/resource-requirements`, which changes nothing.
    fn check<'a>(
        &'a self,
        job_id: &'a str,
        scheduler: Option<&'a Scheduler>,
    ) -> BoxFuture<'a, Result<(), ActuationError>> {
        Box::pin(async move {
            let scheduler = match scheduler {
                Some(known) => Some(known.clone()),
                None => self.probe_scheduler(job_id).await?,
            };
            match scheduler.and_then(|s| s.refusal()) {
                Some(reason) => Err(ActuationError::NotApplicable(reason)),
                None => Ok(()),
            }
        })
    }

    fn rescale_status<'a>(
        &'a self,
        job_id: &'a str,
        wanted: &'a BTreeMap<String, u32>,
        since_ms: u64,
    ) -> BoxFuture<'a, HistoryFinding> {
        Box::pin(self.history_finding(job_id, wanted, since_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actuation::test_support::proposal;

    #[test]
    fn every_vertex_is_listed_with_lower_bound_one() {
        let proposal = proposal(&[("aa", 2, 2), ("bb", 3, 3)], 1);
        let plan = Plan {
            task_managers: 5,
            standby_task_managers: 0,
            parallelism: [("aa".to_string(), 5)].into(),
        };
        assert_eq!(
            requirements_body(&proposal, &plan),
            json!({
                "aa": { "parallelism": { "lowerBound": 1, "upperBound": 5 } },
                "bb": { "parallelism": { "lowerBound": 1, "upperBound": 3 } },
            })
        );
    }
}
