//! Code the agent and the coordinator truly share: the wire protocol between them, the
//! safety gates (pure functions, so an agent without a coordinator can run them locally),
//! and the small HTTP, telemetry and lifecycle plumbing of both daemons.

pub mod gates;
pub mod http;
pub mod lifecycle;
pub mod protocol;
pub mod telemetry;
