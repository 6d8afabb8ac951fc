//! The job-level decision: every vertex decided with upstream semantics, then our extensions
//! (scale-down caution, prediction, sink limits, forward-connected groups), the job-level
//! band gate, the cost-aware scale-down (scale-down caution), and the state for the next call.

use std::collections::BTreeMap;

use super::config::AutoscalerConfig;
use super::error::EngineError;
use super::forward_groups::{forward_groups, group_parallelism, Member};
use super::model::{DecideInput, DecideVertex, Decision, Limit, PredictionReport, VertexDecision};
use super::prediction::ForecastNeeds;
use super::reasons::{reason, ReasonFacts};
use super::rescale_cost::{Evidence, RescaleCost, ScaleDownCase};
use super::sink_limits::{sink_caps, SinkCap};
use super::state::{trim_history, HistoryEntry, ScalingState};
use super::thresholds::{band, Band, Rates};
use super::topology::{check_parallelism, Topology};
use super::vertex_scaler::{
    parallelism_cap, scale_vertex, target_parallelism, usable_source_cap, VertexFacts,
    VertexOutcome,
};
use crate::samples::FlinkF64;
use predicted::{apply_prediction, forecast_needs};

mod predicted;

/// One vertex on its way through the job-level steps.
struct Plan {
    rates: Rates,
    band: Band,
    outcome: VertexOutcome,
    /// The parallelism this vertex would get so far.
    wanted: u32,
    limits: Vec<Limit>,
    /// Must keep its parallelism (excluded).
    pinned: bool,
    sink: Option<SinkCap>,
    /// Raised ahead of a predicted rise: passes the band gate like a vertex outside its band.
    predicted: bool,
    /// Extra sentences for the reason (prediction, the cost-aware scale-down).
    notes: Vec<String>,
}

pub fn decide(input: &DecideInput) -> Result<Decision, EngineError> {
    let config = &input.config;
    let vertices = &input.vertices;
    check_parallelism(vertices.iter().map(|v| (v.parallelism, v.max_parallelism)))?;
    let topology = Topology::build(
        vertices
            .iter()
            .map(|v| (v.id.as_str(), v.inputs.as_slice())),
    )?;
    let mut state = prepared_state(&input.state, vertices, input.now_ms, config);
    let mut plans = vertex_plans(input, &topology, &mut state);
    let cost = RescaleCost::of(input.observed_rescale.as_ref(), config);
    let (needs, prediction) = forecast_needs(input, &topology, &state, &plans);
    apply_scale_down_caution(input, &mut plans);
    if let Some(needs) = &needs {
        apply_prediction(input, needs, &cost, &mut plans);
    }
    if config.extensions.sink_limits_enabled {
        apply_sink_limits(input, &topology, &state, &mut plans);
    }
    if config.extensions.forward_groups_enabled {
        apply_forward_groups(vertices, &topology, config, &mut plans);
    }
    apply_band_gate(vertices, &mut plans);
    apply_rescale_cost(input, needs.as_ref(), &cost, &mut state, &mut plans);
    let blocked =
        !config.enabled || !config.scaling_enabled || config.in_excluded_period(input.now_ms);
    let mut scale = false;
    for (v, plan) in vertices.iter().zip(plans.iter_mut()) {
        if plan.wanted != v.parallelism {
            if blocked {
                plan.wanted = v.parallelism;
                plan.limits.push(Limit::ScalingDisabled);
            } else {
                scale = true;
            }
        }
    }
    if scale {
        record_scaling(input, &plans, &mut state);
    }
    if !config.enabled {
        // Upstream clears all state of a job whose autoscaler is disabled.
        state = ScalingState::default();
    }
    Ok(decision(vertices, plans, state, scale, prediction))
}

/// The input history trimmed as upstream does on load, without vertices that no longer
/// exist. Delayed scale-downs are carried over by [`vertex_plans`].
fn prepared_state(
    state: &ScalingState,
    vertices: &[DecideVertex],
    now_ms: u64,
    config: &AutoscalerConfig,
) -> ScalingState {
    let mut prepared = ScalingState::default();
    for v in vertices {
        if let Some(entries) = state.history.get(&v.id) {
            let mut entries = entries.clone();
            trim_history(
                &mut entries,
                now_ms,
                config.history_max_age_ms,
                config.history_max_count,
            );
            if !entries.is_empty() {
                prepared.history.insert(v.id.clone(), entries);
            }
        }
    }
    prepared
}

fn rates_of(v: &DecideVertex) -> Rates {
    Rates {
        true_processing_rate: v.true_processing_rate.0,
        target_data_rate: v.target_data_rate.0,
        catch_up_data_rate: v.catch_up_data_rate.0,
    }
}

fn facts_of<'a>(
    v: &DecideVertex,
    index: usize,
    topology: &Topology,
    state: &'a ScalingState,
) -> VertexFacts<'a> {
    VertexFacts {
        current: v.parallelism,
        max_parallelism: v.max_parallelism,
        source_partitions: v.source_partitions,
        has_hash_input: topology.has_hash_input(index),
        history: state.history.get(&v.id).map_or(&[], Vec::as_slice),
    }
}

/// Upstream's per-vertex decisions; records the delayed scale-down state in `state`.
fn vertex_plans(input: &DecideInput, topology: &Topology, state: &mut ScalingState) -> Vec<Plan> {
    let config = &input.config;
    let mut delayed_states = BTreeMap::new();
    let plans = input
        .vertices
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let rates = rates_of(v);
            let band = band(&rates, input.processing_backlog, config);
            let outside = band.is_outside(rates.true_processing_rate);
            let pinned = config.vertex_exclude_ids.contains(&v.id);
            let mut delayed = input.state.delayed_scale_down.get(&v.id).cloned();
            let mut outcome = if pinned {
                VertexOutcome {
                    recommended: v.parallelism,
                    outside_band: outside,
                    expected_processing_rate: rates.true_processing_rate,
                    limits: vec![Limit::Excluded],
                    ineffective_scale_up: false,
                }
            } else {
                let facts = facts_of(v, i, topology, state);
                scale_vertex(&facts, &rates, outside, &mut delayed, input.now_ms, config)
            };
            if let Some(d) = delayed {
                delayed_states.insert(v.id.clone(), d);
            }
            let mut notes = Vec::new();
            if outcome.limits.contains(&Limit::SourcePartitions) {
                notes.push(source_cap_note(v, config));
            }
            Plan {
                rates,
                band,
                wanted: outcome.recommended,
                limits: std::mem::take(&mut outcome.limits),
                outcome,
                pinned,
                sink: None,
                predicted: false,
                notes,
            }
        })
        .collect();
    state.delayed_scale_down = delayed_states;
    plans
}

/// Our extension: no scale-down during a backlog or on an incomplete window.
fn apply_scale_down_caution(input: &DecideInput, plans: &mut [Plan]) {
    let cautious = input.config.extensions.scale_down_caution_enabled
        && (input.processing_backlog || !input.window_complete);
    if !cautious {
        return;
    }
    for (v, plan) in input.vertices.iter().zip(plans) {
        if plan.wanted < v.parallelism {
            plan.wanted = v.parallelism;
            plan.limits.push(Limit::ScaleDownCaution);
        }
    }
}

/// Our extension: scale-ups only as far as the flow a limited sink downstream can absorb.
fn apply_sink_limits(
    input: &DecideInput,
    topology: &Topology,
    state: &ScalingState,
    plans: &mut [Plan],
) {
    let caps = sink_caps(topology, &input.vertices, state, &input.config);
    for (i, (v, plan)) in input.vertices.iter().zip(plans.iter_mut()).enumerate() {
        let Some(cap) = caps[i] else { continue };
        if plan.wanted <= v.parallelism {
            continue;
        }
        // A sink at a detected limit is held back by something outside Flink: more
        // parallelism there does not help. Everything else sizes for the capped flow.
        let limited = if cap.sink == i && cap.detected {
            v.parallelism
        } else {
            let facts = facts_of(v, i, topology, state);
            target_parallelism(&facts, &plan.rates.scaled_flow(cap.factor), &input.config)
                .parallelism
                .max(v.parallelism)
        };
        if limited < plan.wanted {
            plan.wanted = limited;
            plan.limits.push(Limit::SinkLimit);
            plan.sink = Some(cap);
        }
    }
}

/// Our extension: FORWARD-connected vertices get one parallelism. A source member with
/// known partitions or splits caps the group: the vertices it feeds through FORWARD edges
/// cannot use more subtasks than it can.
fn apply_forward_groups(
    vertices: &[DecideVertex],
    topology: &Topology,
    config: &AutoscalerConfig,
    plans: &mut [Plan],
) {
    for group in forward_groups(topology) {
        let cap_of = |i: usize| {
            let v = &vertices[i];
            let bounds = parallelism_cap(v.parallelism, v.max_parallelism, config);
            usable_source_cap(v.parallelism, v.source_partitions, config)
                .map_or(bounds, |c| c.min(bounds))
        };
        let members = group.iter().map(|&i| Member {
            current: vertices[i].parallelism,
            wanted: plans[i].wanted,
            cap: cap_of(i),
            pinned: plans[i].pinned,
        });
        let value = group_parallelism(members);
        // The source whose partitions or splits hold the group back, if one does.
        let capping_source = group.iter().copied().find(|&i| {
            let v = &vertices[i];
            usable_source_cap(v.parallelism, v.source_partitions, config) == Some(value)
                && plans
                    .iter()
                    .enumerate()
                    .any(|(j, p)| group.contains(&j) && p.wanted > value)
        });
        for &i in &group {
            if !plans[i].pinned && plans[i].wanted != value {
                plans[i].wanted = value;
                plans[i].limits.push(Limit::ForwardGroup);
                if let Some(source) = capping_source.filter(|&s| s != i) {
                    let note = source_cap_note(&vertices[source], config);
                    plans[i].notes.push(format!("forward group: {note}"));
                }
            }
        }
    }
}

/// Names a source's cap: `` `Source: X` can use at most 2 subtasks (its 2 partitions or splits) ``.
fn source_cap_note(v: &DecideVertex, config: &AutoscalerConfig) -> String {
    let name = if v.name.is_empty() { &v.id } else { &v.name };
    let cap = usable_source_cap(v.parallelism, v.source_partitions, config)
        .unwrap_or(v.source_partitions);
    format!(
        "`{name}` can use at most {cap} subtasks (it reads {} partitions or splits)",
        v.source_partitions
    )
}

/// Upstream's job-level gate: apply only if some changed vertex is outside its band, and
/// then apply every changed vertex. A vertex raised ahead of a predicted rise passes it too,
/// but then only for scale-ups: the forecast never makes a vertex smaller than the reactive
/// decision would.
fn apply_band_gate(vertices: &[DecideVertex], plans: &mut [Plan]) {
    let changed = |v: &DecideVertex, plan: &Plan| plan.wanted != v.parallelism;
    let reactive = vertices
        .iter()
        .zip(plans.iter())
        .any(|(v, plan)| changed(v, plan) && plan.outcome.outside_band);
    if reactive {
        return;
    }
    let predicted = vertices
        .iter()
        .zip(plans.iter())
        .any(|(v, plan)| changed(v, plan) && plan.predicted);
    for (v, plan) in vertices.iter().zip(plans) {
        if plan.wanted < v.parallelism || (!predicted && plan.wanted != v.parallelism) {
            plan.wanted = v.parallelism;
            plan.limits.push(Limit::BandGate);
        }
    }
}

/// Our extension (scale-down caution): a scale-down on its own is applied when the subtasks
/// it frees, over the time the lower load is expected to last, save more than the rescale
/// costs; otherwise it is held (without a forecast, for at most `max-hold`). Runs on what
/// would be applied, after the band gate.
fn apply_rescale_cost(
    input: &DecideInput,
    needs: Option<&ForecastNeeds>,
    cost: &RescaleCost,
    state: &mut ScalingState,
    plans: &mut [Plan],
) {
    let (config, vertices) = (&input.config, &input.vertices);
    let now = input.now_ms;
    let pairs = || vertices.iter().zip(plans.iter());
    let any_down = pairs().any(|(v, plan)| plan.wanted < v.parallelism);
    let any_up = pairs().any(|(v, plan)| plan.wanted > v.parallelism);
    if !config.extensions.scale_down_caution_enabled || !any_down || any_up {
        state.scale_down_held_since_ms = None;
        return;
    }
    let freed: u32 = pairs().map(|(v, p)| v.parallelism - p.wanted).sum();
    let total: u32 = vertices.iter().map(|v| v.parallelism).sum();
    // The lower load has lasted at least since every vertex going down first asked for it.
    let low_since = pairs()
        .filter(|(v, p)| p.wanted < v.parallelism)
        .map(|(v, _)| {
            input
                .state
                .delayed_scale_down
                .get(&v.id)
                .map_or(now, |d| d.first_trigger_ms.min(now))
        })
        .max()
        .unwrap_or(now);
    let since = input
        .state
        .scale_down_held_since_ms
        .unwrap_or(low_since)
        .min(now);
    let held_s = (now - since) as f64 / 1000.0;
    let (expected_s, evidence) = match needs {
        Some(needs) => {
            let planned: Vec<u32> = plans.iter().map(|p| p.wanted).collect();
            match needs.first_need_above(&planned, now) {
                Some(t) => (
                    (t - now) as f64 / 1000.0,
                    Evidence::Forecast { within_range: true },
                ),
                None => (
                    needs.forecast.end_ms().saturating_sub(now) as f64 / 1000.0,
                    Evidence::Forecast {
                        within_range: false,
                    },
                ),
            }
        }
        // The window itself shows the lower load for its whole length.
        None => (
            held_s.max(config.metrics_window_ms as f64 / 1000.0),
            Evidence::History,
        ),
    };
    let weighed = ScaleDownCase {
        freed,
        total,
        expected_s,
        evidence,
        cost: *cost,
        held_s,
        max_hold_s: config.extensions.scale_down_max_hold_ms as f64 / 1000.0,
    }
    .weigh();
    for (v, plan) in vertices.iter().zip(plans.iter_mut()) {
        if plan.wanted >= v.parallelism {
            continue;
        }
        if weighed.apply {
            plan.notes
                .push(format!("scale-down applied: {}", weighed.text));
        } else {
            plan.wanted = v.parallelism;
            plan.limits.push(Limit::ScaleDownCost);
            plan.notes
                .push(format!("scale-down held: {}", weighed.text));
        }
    }
    state.scale_down_held_since_ms = (!weighed.apply).then_some(since);
}

/// An applied scaling: history entries for the changed vertices; pending scale-downs end.
fn record_scaling(input: &DecideInput, plans: &[Plan], state: &mut ScalingState) {
    let config = &input.config;
    for (v, plan) in input.vertices.iter().zip(plans) {
        if plan.wanted == v.parallelism {
            continue;
        }
        let tpr = plan.rates.true_processing_rate;
        let entries = state.history.entry(v.id.clone()).or_default();
        entries.push(HistoryEntry {
            time_ms: input.now_ms,
            current: v.parallelism,
            new: plan.wanted,
            true_processing_rate: FlinkF64(tpr),
            expected_processing_rate: FlinkF64(
                tpr / f64::from(v.parallelism) * f64::from(plan.wanted),
            ),
        });
        trim_history(
            entries,
            input.now_ms,
            config.history_max_age_ms,
            config.history_max_count,
        );
    }
    state.history.retain(|_, entries| !entries.is_empty());
    state.delayed_scale_down.clear();
}

fn decision(
    vertices: &[DecideVertex],
    plans: Vec<Plan>,
    state: ScalingState,
    scale: bool,
    prediction: PredictionReport,
) -> Decision {
    let mut parallelism = BTreeMap::new();
    let decisions = vertices
        .iter()
        .zip(plans)
        .map(|(v, plan)| {
            parallelism.insert(v.id.clone(), plan.wanted);
            let name = if v.name.is_empty() { &v.id } else { &v.name };
            let reason = reason(&ReasonFacts {
                name,
                current: v.parallelism,
                recommended: plan.outcome.recommended,
                applied: plan.wanted,
                rates: &plan.rates,
                band: &plan.band,
                outside_band: plan.outcome.outside_band,
                limits: &plan.limits,
                sink: plan.sink.map(|c| {
                    let sink = &vertices[c.sink];
                    (
                        if sink.name.is_empty() {
                            sink.id.as_str()
                        } else {
                            sink.name.as_str()
                        },
                        c.capacity,
                    )
                }),
                notes: &plan.notes,
                ineffective_scale_up: plan.outcome.ineffective_scale_up,
            });
            VertexDecision {
                id: v.id.clone(),
                current: v.parallelism,
                recommended: plan.outcome.recommended,
                outside_band: plan.outcome.outside_band,
                expected_processing_rate: FlinkF64(plan.outcome.expected_processing_rate),
                true_processing_rate: FlinkF64(plan.rates.true_processing_rate),
                target_data_rate: FlinkF64(plan.rates.target_data_rate),
                scale_up_rate_threshold: FlinkF64(plan.band.scale_up_rate_threshold),
                scale_down_rate_threshold: FlinkF64(plan.band.scale_down_rate_threshold),
                limited_by: plan.limits,
                reason,
            }
        })
        .collect();
    Decision {
        scale,
        vertices: decisions,
        parallelism,
        state,
        prediction,
    }
}
