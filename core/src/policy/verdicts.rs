//! The verdicts a person-in-the-loop proposal can get besides the gates' own: waiting for a
//! person, denied by one, expired, or superseded by a newer proposal for the job. Each
//! carries one reason of the always-on `approval` gate with a stable code.

use crate::engine::utc_text;
use crate::protocol::{ApprovalRequest, Decision, GateName, Reason, Verdict};

/// The pending answer: the gates passed and `request.rule` wants a person to decide.
pub fn pending(proposal_id: &str, request: &ApprovalRequest) -> Decision {
    Decision {
        proposal_id: proposal_id.to_string(),
        verdict: Verdict::Pending,
        reasons: vec![reason(
            "manual_approval",
            format!(
                "approval rule {} asks for a person's approval; refused if not approved by {}",
                request.rule,
                utc_text(request.expires_at)
            ),
        )],
        plan: None,
    }
}

/// An admin denied it.
pub fn denied(proposal_id: &str, by: &str, comment: &str) -> Decision {
    refused(proposal_id, "denied", format!("denied by {by}: {comment}"))
}

/// Nobody decided within the approval TTL.
pub fn expired(proposal_id: &str, request: &ApprovalRequest) -> Decision {
    refused(
        proposal_id,
        "approval_expired",
        format!(
            "no one approved it before {}, as approval rule {} required",
            utc_text(request.expires_at),
            request.rule
        ),
    )
}

/// A newer proposal for the same job replaced it.
pub fn superseded(proposal_id: &str, newer_proposal_id: &str) -> Decision {
    refused(
        proposal_id,
        "superseded",
        format!("superseded by the newer proposal {newer_proposal_id} for this job"),
    )
}

fn refused(proposal_id: &str, code: &str, message: String) -> Decision {
    Decision {
        proposal_id: proposal_id.to_string(),
        verdict: Verdict::Refused,
        reasons: vec![reason(code, message)],
        plan: None,
    }
}

fn reason(code: &str, message: String) -> Reason {
    Reason {
        gate: GateName::Approval,
        code: code.to_string(),
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_stable_and_only_pending_is_not_final() {
        let request = ApprovalRequest {
            rule: "big-downs".into(),
            expires_at: 1_000,
        };
        let cases = [
            (pending("p", &request), Verdict::Pending, "manual_approval"),
            (denied("p", "alice", "not now"), Verdict::Refused, "denied"),
            (expired("p", &request), Verdict::Refused, "approval_expired"),
            (superseded("p", "q"), Verdict::Refused, "superseded"),
        ];
        for (decision, verdict, code) in cases {
            assert_eq!(decision.verdict, verdict);
            assert_eq!(decision.reasons.len(), 1);
            assert_eq!(decision.reasons[0].gate, GateName::Approval);
            assert_eq!(decision.reasons[0].code, code);
            assert!(decision.plan.is_none());
            assert_eq!(decision.verdict.is_final(), verdict != Verdict::Pending);
        }
        assert!(pending("p", &request).reasons[0]
            .message
            .contains("big-downs"));
        assert!(denied("p", "alice", "not now").reasons[0]
            .message
            .contains("alice: not now"));
    }
}
