//! What-if: the simulator's model of a job and the real agent code in lockstep simulated
//! time, for each setting asked, judged against baselines computed from the model's true
//! capacities (a static job sized for the peak, the oracle, and the best plan with the same
//! number of rescales). The `flink-autoscale-whatif` binary prints the table and writes a
//! chart and a JSON file of every figure; the convergence benchmark calls the same library.
//! It links the simulator, so it is a binary of its own: the sidecar agent never does.

pub mod baselines;
pub mod chart;
pub mod harness;
pub mod report;
pub mod run;
pub mod session;
