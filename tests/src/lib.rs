//! Support code for the end-to-end tests and benchmarks: the lockstep driver for
//! accelerated-time convergence runs, the coordinator process launcher and the real-Flink
//! harness.

pub mod convergence;
pub mod coordinator_process;
pub mod flink_harness;
pub mod lockstep;
