pub mod placeholder {}
pub mod convergence;
pub mod coordinator_process;
pub mod flink_harness;
pub mod lockstep;
