//! An agent of the previous release (protocol before `pending`, pauses and approvals) against
//! today's coordinator binary: it still gets and reads its approvals, and it can never act on
//! a verdict it does not know. Its wire types and its reading of an answer are frozen below,
//! as released (commit 9a001a9, `shared/src/protocol.rs` and `agent/src/coordinator_client.rs`).

mod support;

use hyper::StatusCode;
use serde_json::json;
use support::{job, proposal, Db, Server, ADMIN, AGENT};

/// The previous release's decision types, unchanged.
mod previous {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    #[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
    #[serde(rename_all = "lowercase")]
    pub enum Verdict {
        Approved,
        Refused,
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum GateName {
        RegionFailover,
        DiskCapacity,
        StandbyBuffer,
        RateLimit,
    }

    #[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Reason {
        pub gate: GateName,
        pub code: String,
        pub message: String,
    }

    #[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Plan {
        pub task_managers: u32,
        pub standby_task_managers: u32,
        pub parallelism: BTreeMap<String, u32>,
    }

    #[derive(Debug, Clone, PartialEq, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Decision {
        pub proposal_id: String,
        pub verdict: Verdict,
        pub reasons: Vec<Reason>,
        #[serde(default)]
        pub plan: Option<Plan>,
    }

    /// How the previous agent read a `200` answer to its proposal: anything it cannot read,
    /// or an approval without a plan, is an error (`GateError::Unavailable`), and its control
    /// loop never actuates on an error.
    pub fn read_answer(proposal_id: &str, body: &[u8]) -> Result<Decision, String> {
        let decision: Decision = serde_json::from_slice(body)
            .map_err(|e| format!("unreadable verdict from the coordinator: {e}"))?;
        if decision.proposal_id != proposal_id
            || (decision.verdict == Verdict::Approved) != decision.plan.is_some()
        {
            return Err(format!("inconsistent verdict for {proposal_id}"));
        }
        Ok(decision)
    }
}

async fn propose_as_previous_agent(
    s: &Server,
    id: &str,
    job_n: u32,
) -> Result<previous::Decision, String> {
    let (status, _, body) = s
        .raw_with_headers(
            "POST",
            "/v1/proposals",
            Some(AGENT),
            Some(serde_json::to_vec(&proposal(id, &job(job_n), 4, 8)).unwrap()),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    previous::read_answer(id, body.as_bytes())
}

#[tokio::test]
async fn a_previous_agent_reads_approvals_and_fails_closed_on_pending() {
    let db = Db::sqlite();
    let s = Server::start(
        &db,
        &[
            "--min-interval",
            "0s",
            "--max-in-flight-per-cluster",
            "100",
            "--max-in-flight-per-region",
            "100",
        ],
    );

    // No rule: the gates alone approve, and the previous agent reads the plan.
    let approved = propose_as_previous_agent(&s, "old-1", 1)
        .await
        .expect("an approval stays readable");
    assert_eq!(approved.verdict, previous::Verdict::Approved);
    assert_eq!(
        approved.plan.expect("a plan").parallelism[&support::vertex_id(2)],
        8
    );

    // A manual rule: `pending` is unknown to it, so it is an error, never an approval.
    let rules = json!({ "rules": [{ "name": "by-hand", "jobs": [job(2)], "action": "manual" }]});
    let (status, body) = s
        .call("PUT", "/v1/policies", Some(ADMIN), Some(rules))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let pending = propose_as_previous_agent(&s, "old-2", 2).await;
    let err = pending.expect_err("pending must not read as a decision");
    assert!(err.contains("unknown variant `pending`"), "{err}");
    let (_, today) = s
        .call("GET", "/v1/proposals/old-2", Some(AGENT), None)
        .await;
    assert_eq!(today["verdict"], "pending", "{today}");

    // A refusal by a gate it does not know (a pause) is an error as well: fail closed.
    let (status, body) = s
        .call(
            "PUT",
            "/v1/pauses/fleet",
            Some(ADMIN),
            Some(json!({"reason": "freeze"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let paused = propose_as_previous_agent(&s, "old-3", 3).await;
    let err = paused.expect_err("an unknown gate must not read as a decision");
    assert!(err.contains("unknown variant `pause`"), "{err}");
}
