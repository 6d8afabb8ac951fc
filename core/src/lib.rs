//! The pure core of flink-autoscale: plain data in, plain data out, no clock and no I/O.
//! Time is always an input. The agent, the coordinator, the simulator and the tests build on
//! it; everything that talks to a network, a disk or a clock lives outside.
//!
//! - [`backoff`]: the jittered exponential backoff of every retry.
//! - [`samples`]: the metric samples the collector produces and the engine evaluates.
//! - [`duration`]: the duration type of both daemons' configuration files.
//! - [`engine`]: Flink Autoscaler semantics plus our extensions (evaluate, then decide).
//! - [`forecast`]: the learned load profile and the forecast predictive scaling acts on.
//! - [`protocol`]: the agent–coordinator wire types.
//! - [`gates`]: the coordinator's safety gates.
//! - [`ledger`]: the bookkeeping both gatekeepers keep after a verdict.
//! - [`policy`]: approval rules (which proposals a person must approve).
//! - [`pause`]: pause switches (which proposals an admin has stopped).
//! - [`duration`]: durations as configuration writes them (`"15s"`, `"30min"`).

pub mod backoff;
pub mod duration;
pub mod engine;
pub mod forecast;
pub mod gates;
pub mod ledger;
pub mod pause;
pub mod policy;
pub mod protocol;
pub mod samples;
