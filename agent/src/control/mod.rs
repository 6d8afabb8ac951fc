//! Closing the loop: propose → approve → actuate → verify, per job.
//!
//! - [`core`]: the per-job state machine, pure (time and jitter are inputs);
//! - [`driver`]: [`ControlLoop`], the async edge that plugs into the daemon as its
//!   [`crate::daemon::DecisionStep`], calling the engine, the gatekeeper
//!   ([`crate::gatekeeper`]) and the realizer ([`crate::actuation`]), and persisting
//!   every step in the [`crate::state_store`];
//! - [`config`]: the `[control]` section.
//!
//! Rules it keeps: propose only on a full, usable window when the engine says scale; never
//! actuate without an approval (fail closed); never two actions in flight for one job; after
//! actuating, watch until the job runs at the approved parallelism or a deadline passes, report
//! the outcome, reset the window, and feed history and restart times back to the engine.

pub mod config;
pub mod core;
pub mod driver;
pub mod engine_input;
pub mod http_client;
pub mod metrics;
pub mod proposal;

pub use config::{ControlConfig, CoordinatorConfig, ExecConfig, RealizerKind};
pub use driver::{validate, ControlError, ControlLoop, LoopEvent, Parts};
