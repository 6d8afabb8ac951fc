//! `adaptive-scheduler`: `PUT /jobs/:jid/resource-requirements` on the local JobManager
//! (Flink 1.18+, `jobmanager.scheduler: adaptive`). Every vertex is listed with lower bound 1
//! and upper bound the approved parallelism. A 409 means an earlier update is still in
//! progress: the caller retries later, never stacking a second request on top.

use std::time::Duration;

use flink_autoscale_shared::protocol::{Plan, Proposal};
use http::Method;
use serde_json::{json, Map, Value};

use super::{full_parallelism, Actuation, ActuationError, Realizer};
use crate::control::http_client::{HttpError, JsonClient};
use crate::daemon::clock::BoxFuture;

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
