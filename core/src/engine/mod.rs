//! The decision engine: Flink Autoscaler parity on `job.autoscaler.*` plus our extensions
//! (forward-connected groups, sink limits, scale-down caution, prediction). Pure and synchronous: no
//! clock and no I/O; time is an input.
//!
//! Two stages, each plain data in and plain data out:
//! - [`evaluate`]: a metric window becomes per-vertex figures;
//! - [`decide`]: figures, per-job state and configuration become parallelisms and new state.

mod alignment;
pub mod config;
mod config_syntax;
mod cron;
mod decide;
mod effectiveness;
pub mod error;
mod evaluate;
mod excluded_periods;
mod forecast_plan;
mod forward_groups;
pub mod model;
mod numeric;
mod prediction;
mod reasons;
mod rescale_cost;
mod sample_math;
mod scalability;
mod scale_down_delay;
mod sink_limits;
mod source_cap;
pub mod state;
mod thresholds;
mod topology;
mod vertex_scaler;

pub use config::{
    parse_config, AlignmentMode, AutoscalerConfig, BusyTimeAggregator, ConfigError, ConfigValue,
};
pub use config_syntax::parse_duration_ms;
pub use cron::{civil_from_days, days_from_civil, utc_text};
pub use decide::decide;
pub use error::EngineError;
pub use evaluate::{decide_input, evaluate};
pub use excluded_periods::ExcludedPeriod;
pub use model::{
    DecideInput, DecideVertex, Decision, EvaluateInput, EvaluateOutput, Evaluated, EvaluatedVertex,
    Limit, ObservedRescale, PredictionReport, PredictionStatus, VertexDecision,
};
pub use state::{DelayedRecommendation, DelayedScaleDown, HistoryEntry, ScalingState};

/// Both stages over one captured window, as the `evaluate` command and the daemon run them.
pub fn evaluate_and_decide(input: &EvaluateInput) -> Result<EvaluateOutput, EngineError> {
    let evaluated = evaluate(input)?;
    let decision = decide(&decide_input(input, &evaluated))?;
    Ok(EvaluateOutput {
        evaluated,
        decision,
    })
}
