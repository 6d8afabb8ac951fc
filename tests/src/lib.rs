pub mod placeholder {}
pub mod flink_harness;
pub mod coordinator_process;
pub mod lockstep;
pub mod convergence;
