//! Simulated Flink JobManager.
