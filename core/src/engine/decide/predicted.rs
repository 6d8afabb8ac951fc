//! Our extension "prediction" in the job-level decision: whether the forecast takes part,
//! the floor it puts under scale-downs, scaling up ahead of a predicted rise, and scale-downs
//! that follow the forecast's plan. The forecast's per-vertex needs are computed in
//! `engine::prediction`, the plan in `engine::forecast_plan`.

use super::super::forecast_plan::{first_move, FirstMove, PlanProblem};
use super::super::model::{DecideInput, Limit, PredictionReport, PredictionStatus};
use super::super::prediction::ForecastNeeds;
use super::super::rescale_cost::{hours, RescaleCost};
use super::super::state::ScalingState;
use super::super::thresholds::Rates;
use super::super::topology::Topology;
use super::super::vertex_scaler::VertexFacts;
use super::{facts_of, Plan};
use crate::forecast::clock_time;

/// The forecast's needs, when prediction is on and the forecast confident, and how
/// prediction stood.
pub(super) fn forecast_needs<'a>(
    input: &'a DecideInput,
    topology: &Topology,
    state: &ScalingState,
    plans: &[Plan],
) -> (Option<ForecastNeeds<'a>>, PredictionReport) {
    let report = |status, detail: String| PredictionReport { status, detail };
    if !input.config.extensions.prediction_enabled {
        let detail = "flink-autoscale.prediction.enabled is false: purely reactive".into();
        return (None, report(PredictionStatus::Off, detail));
    }
    let Some(forecast) = &input.forecast else {
        let detail = "no load forecast: purely reactive".into();
        return (None, report(PredictionStatus::NoForecast, detail));
    };
    if !forecast.confident {
        let detail = format!("purely reactive: {}", forecast.detail);
        return (None, report(PredictionStatus::NotConfident, detail));
    }
    let vertices = &input.vertices;
    let facts: Vec<VertexFacts> = vertices
        .iter()
        .enumerate()
        .map(|(i, v)| facts_of(v, i, topology, state))
        .collect();
    let rates: Vec<Rates> = plans.iter().map(|p| p.rates).collect();
    let ids: Vec<&str> = vertices.iter().map(|v| v.id.as_str()).collect();
    let needs = ForecastNeeds::new(forecast, topology, &ids, &facts, &rates, &input.config);
    let mut detail = forecast.detail.clone();
    let horizon_end = input.now_ms + input.config.extensions.prediction_horizon_ms;
    if let Some(peak) = needs.peak(input.now_ms, horizon_end) {
        detail.push_str("; ");
        detail.push_str(&peak.describe());
    }
    (Some(needs), report(PredictionStatus::Used, detail))
}

/// Our extension (prediction): no scale-down below what the forecast needs within the
/// horizon; when the forecast takes a vertex above its band within the lead time (or a
/// scale-up happens anyway), every vertex goes up to what the horizon needs; a scale-down on
/// its own follows the forecast's plan.
pub(super) fn apply_prediction(
    input: &DecideInput,
    needs: &ForecastNeeds,
    cost: &RescaleCost,
    plans: &mut [Plan],
) {
    let config = &input.config;
    let now = input.now_ms;
    let horizon_end = now + config.extensions.prediction_horizon_ms;
    // A scale-up started now shows in a full window only after the restart, the
    // stabilization interval and one window.
    let lead_ms = (cost.restart_s * 1000.0) as u64
        + config.stabilization_interval_ms
        + config.metrics_window_ms;
    let peak = needs
        .peak(now, horizon_end)
        .map(|p| p.describe())
        .unwrap_or_default();
    let horizon = hours(config.extensions.prediction_horizon_ms as f64 / 1000.0);
    let vertices = &input.vertices;
    for (i, (v, plan)) in vertices.iter().zip(plans.iter_mut()).enumerate() {
        let Some(floor) = needs.max_need(i, now, horizon_end) else {
            continue;
        };
        if !plan.pinned && plan.wanted < v.parallelism && floor > plan.wanted {
            plan.wanted = floor.min(v.parallelism);
            plan.limits.push(Limit::Forecast);
            plan.notes.push(format!(
                "the forecast needs {floor} within flink-autoscale.prediction.horizon ({horizon}; {peak})"
            ));
        }
    }
    let ahead = needs.first_over_band(now, now + lead_ms);
    let scaling_up = vertices
        .iter()
        .zip(plans.iter())
        .any(|(v, plan)| plan.wanted > v.parallelism);
    if ahead.is_none() && !scaling_up {
        follow_plan_down(input, needs, cost, lead_ms, plans);
        return;
    }
    // What the horizon needs at the target utilization, and at least enough to stay halfway
    // between the target and the band's upper edge until the predicted rise ends: a rise
    // longer than the horizon is then met by one rescale, not by one per horizon.
    let rise_end = needs.rise_end_ms(now);
    for (i, (v, plan)) in vertices.iter().zip(plans.iter_mut()).enumerate() {
        let Some(floor) = needs.max_need(i, now, horizon_end) else {
            continue;
        };
        let floor = floor.max(needs.max_headroom_need(i, now, rise_end).unwrap_or(0));
        if plan.pinned || floor <= plan.wanted || floor <= v.parallelism {
            continue;
        }
        plan.wanted = floor;
        plan.predicted |= ahead.is_some();
        plan.notes.push(match ahead {
            Some(at) => format!(
                "scaled up ahead: the forecast leaves the band at {} UTC, within the lead time of {} (restart + stabilization.interval + metrics.window); sized for the {peak} within {horizon} and to stay halfway within the band until the predicted rise ends at {} UTC",
                clock_time(at),
                hours(lead_ms as f64 / 1000.0),
                clock_time(rise_end)
            ),
            None => format!(
                "raised with the scale-up for the {peak} within {horizon} and to stay halfway within the band until the predicted rise ends at {} UTC",
                clock_time(rise_end)
            ),
        });
    }
}

/// The forecast's plan from now on, for the job as it stands.
fn plan_problem(
    input: &DecideInput,
    needs: &ForecastNeeds,
    cost: &RescaleCost,
    lead_ms: u64,
    plans: &[Plan],
) -> PlanProblem {
    let current: Vec<u32> = input.vertices.iter().map(|v| v.parallelism).collect();
    let fixed: Vec<bool> = plans.iter().map(|p| p.pinned).collect();
    let total: u32 = current.iter().sum();
    let step_s = needs.forecast.step_ms as f64 / 1000.0;
    needs.plan_problem(
        input.now_ms,
        lead_ms,
        &current,
        &fixed,
        cost.subtask_seconds(total) / step_s,
        input.config.extensions.prediction_max_rescales_per_day as usize,
    )
}

/// Our extension (prediction): a scale-down on its own follows the cheapest plan over the
/// forecast that uses at most `prediction.max-rescales-per-day` rescales. When the plan keeps
/// the current parallelism for now, the scale-down waits for the plan's deeper one instead of
/// stepping down with the falling load; when the plan rescales now, no vertex goes below the
/// plan's level. The reactive decision still bounds it from below.
fn follow_plan_down(
    input: &DecideInput,
    needs: &ForecastNeeds,
    cost: &RescaleCost,
    lead_ms: u64,
    plans: &mut [Plan],
) {
    let (config, vertices, now) = (&input.config, &input.vertices, input.now_ms);
    let pairs = || vertices.iter().zip(plans.iter());
    if !pairs().any(|(v, plan)| !plan.pinned && plan.wanted < v.parallelism) {
        return;
    }
    let budget = config.extensions.prediction_max_rescales_per_day as usize;
    let current: Vec<u32> = vertices.iter().map(|v| v.parallelism).collect();
    let problem = plan_problem(input, needs, cost, lead_ms, plans);
    let plan_text = format!("the forecast's plan (at most {budget} rescales a day)");
    let when = |step: usize| clock_time(needs.step_from_now_ms(now, step));
    match first_move(&problem) {
        None => {}
        Some(FirstMove::Keep { next }) => {
            let then = match &next {
                Some((step, level)) => format!("until {} UTC, then {}", when(*step), levels(level)),
                None => "through the forecast's 24 h".to_string(),
            };
            for (v, plan) in vertices.iter().zip(plans.iter_mut()) {
                if plan.pinned || plan.wanted >= v.parallelism {
                    continue;
                }
                plan.wanted = v.parallelism;
                plan.limits.push(Limit::Forecast);
                plan.notes.push(format!(
                    "scale-down held: {plan_text} keeps {} {then}",
                    levels(&current)
                ));
            }
        }
        Some(FirstMove::Rescale { level, until }) => {
            let until = if until >= problem.need.first().map_or(0, Vec::len) {
                "through the forecast's 24 h".to_string()
            } else {
                format!("until {} UTC", when(until))
            };
            // While the forecast says the load keeps falling through the next scale-down
            // interval, a step that frees much less than the plan's level would is held: it
            // would spend a rescale of the budget and leave the rest for another an interval
            // later. Once the fall flattens (or under a flat forecast) nothing is held here.
            let unpinned = || {
                vertices
                    .iter()
                    .zip(plans.iter())
                    .zip(&level)
                    .filter(|((_, plan), _)| !plan.pinned)
            };
            let planned: u32 = unpinned()
                .map(|((v, _), l)| v.parallelism.saturating_sub(*l))
                .sum();
            let achieved: u32 = unpinned()
                .filter(|((v, plan), _)| plan.wanted < v.parallelism)
                .map(|((v, plan), l)| v.parallelism - plan.wanted.max(*l).min(v.parallelism))
                .sum();
            let interval = config.scale_down_interval_ms.max(lead_ms);
            let falling = needs.still_falling(now, now + interval);
            let shallow = falling && 2 * achieved < planned;
            for ((v, plan), want) in vertices.iter().zip(plans.iter_mut()).zip(&level) {
                if plan.pinned || plan.wanted >= v.parallelism {
                    continue;
                }
                if shallow {
                    plan.wanted = v.parallelism;
                    plan.limits.push(Limit::Forecast);
                    plan.notes.push(format!(
                        "scale-down held: it frees {achieved} subtasks of the {planned} that {plan_text} frees now; waiting for the deeper step"
                    ));
                } else if *want > plan.wanted {
                    plan.wanted = (*want).min(v.parallelism);
                    plan.limits.push(Limit::Forecast);
                    plan.notes.push(format!("{plan_text} needs {want} {until}"));
                }
            }
        }
    }
}

/// `2/4/1`: the parallelism of every vertex, in the job's order.
fn levels(level: &[u32]) -> String {
    level
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join("/")
}
