//! Support code for the end-to-end tests and benchmarks: the lockstep driver for
//! accelerated-time convergence runs, the coordinator as a process (started by the test kit), the real-Flink
//! harness and the reference collectors the agent's is compared with.

pub mod convergence;
pub mod coordinator_process;
pub mod flink_harness;
pub mod jm_usage;
pub mod lockstep;
pub mod reference_collectors;
