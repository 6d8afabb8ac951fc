//! Who approves a proposal: the [`Gatekeeper`] seam, like `actuation/` for realizers.
//! - [`CoordinatorClient`]: asks the coordinator over HTTP with the agent's bearer token; the
//!   proposal id makes every retry idempotent.
//! - [`LocalGates`]: no coordinator; runs the same pure gates from `core` with inputs from the
//!   agent's configuration (region, evacuation flag file, disk per TaskManager).
//!
//! Either way the caller fails closed: an error is never an approval, and neither is a
//! `pending` verdict (the loop polls [`Gatekeeper::verdict`] until it is final).

pub mod coordinator;
pub mod local;
pub mod pause_file;

use flink_autoscale_core::protocol::{Decision, Outcome, Proposal};

pub use coordinator::{read_token_file, CoordinatorClient, TokenFileError};
pub use local::LocalGates;

use crate::daemon::clock::BoxFuture;

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
    /// The current verdict for a proposal this gatekeeper answered `pending` (a person has
    /// to approve it); asked again until it is final.
    fn verdict<'a>(&'a self, proposal_id: &'a str) -> BoxFuture<'a, Result<Decision, GateError>>;
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
