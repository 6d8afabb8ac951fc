//! The job-level decision: every vertex decided with upstream semantics, then our extensions
//! (scale-down caution, sink limits, forward-connected groups), the job-level band gate, the
//! minimum worthwhile scale-down (scale-down caution), and the state for the next call.

use std::collections::BTreeMap;

use super::config::AutoscalerConfig;
use super::error::EngineError;
use super::forward_groups::{forward_groups, group_parallelism, Member};
use super::model::{DecideInput, DecideVertex, Decision, Limit, VertexDecision};
use super::reasons::{reason, ReasonFacts};
use super::scale_down_saving::{hold_small_scale_down, scale_down_floor, Change, HeldScaleDown};
use super::sink_limits::{sink_caps, SinkCap};
use super::state::{trim_history, HistoryEntry, ScalingState};
use super::thresholds::{band, Band, Rates};
use super::topology::{check_parallelism, Topology};
use super::vertex_scaler::{
    parallelism_cap, scale_vertex, target_parallelism, VertexFacts, VertexOutcome,
};
use crate::window::FlinkF64;

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
    apply_scale_down_caution(input, &mut plans);
    if config.extensions.sink_limits_enabled {
        apply_sink_limits(input, &topology, &state, &mut plans);
    }
    if config.extensions.forward_groups_enabled {
        apply_forward_groups(vertices, &topology, config, &mut plans);
    }
    apply_band_gate(vertices, &mut plans);
    let held = apply_min_scale_down_saving(input, &topology, &state, &mut plans);
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
    Ok(decision(vertices, plans, state, scale, held))
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
            Plan {
                rates,
                band,
                wanted: outcome.recommended,
                limits: std::mem::take(&mut outcome.limits),
                outcome,
                pinned,
                sink: None,
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

/// Our extension: FORWARD-connected vertices get one parallelism.
fn apply_forward_groups(
    vertices: &[DecideVertex],
    topology: &Topology,
    config: &AutoscalerConfig,
    plans: &mut [Plan],
) {
    for group in forward_groups(topology) {
        let members = group.iter().map(|&i| Member {
            current: vertices[i].parallelism,
            wanted: plans[i].wanted,
            cap: parallelism_cap(vertices[i].parallelism, vertices[i].max_parallelism, config),
            pinned: plans[i].pinned,
        });
        let value = group_parallelism(members);
        for &i in &group {
            if !plans[i].pinned && plans[i].wanted != value {
                plans[i].wanted = value;
                plans[i].limits.push(Limit::ForwardGroup);
            }
        }
    }
}

/// Upstream's job-level gate: apply only if some changed vertex is outside its band, and
/// then apply every changed vertex.
fn apply_band_gate(vertices: &[DecideVertex], plans: &mut [Plan]) {
    let any_outside = vertices
        .iter()
        .zip(plans.iter())
        .any(|(v, plan)| plan.wanted != v.parallelism && plan.outcome.outside_band);
    if any_outside {
        return;
    }
    for (v, plan) in vertices.iter().zip(plans) {
        if plan.wanted != v.parallelism {
            plan.wanted = v.parallelism;
            plan.limits.push(Limit::BandGate);
        }
    }
}

/// Our extension (scale-down caution): a scale-down alone that frees too small a share of
/// the job's parallelism is not worth a restart. Runs on what would be applied, after the
/// band gate. The delayed scale-down state is kept, so a later, larger step can go through.
fn apply_min_scale_down_saving(
    input: &DecideInput,
    topology: &Topology,
    state: &ScalingState,
    plans: &mut [Plan],
) -> Option<HeldScaleDown> {
    let (config, vertices) = (&input.config, &input.vertices);
    let ext = &config.extensions;
    let any_down = vertices
        .iter()
        .zip(plans.iter())
        .any(|(v, plan)| plan.wanted < v.parallelism);
    if !ext.scale_down_caution_enabled || !any_down {
        return None;
    }
    let changes = vertices
        .iter()
        .zip(plans.iter())
        .enumerate()
        .map(|(i, (v, plan))| Change {
            current: v.parallelism,
            planned: plan.wanted,
            // A vertex that cannot be scaled this cycle cannot add to a later, deeper step.
            floor: if plan.pinned || plan.rates.true_processing_rate.is_nan() {
                v.parallelism
            } else {
                scale_down_floor(&facts_of(v, i, topology, state), config)
            },
        });
    let held = hold_small_scale_down(changes, ext.scale_down_min_saving)?;
    for (v, plan) in vertices.iter().zip(plans) {
        if plan.wanted < v.parallelism {
            plan.wanted = v.parallelism;
            plan.limits.push(Limit::ScaleDownSaving);
        }
    }
    Some(held)
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
    held: Option<HeldScaleDown>,
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
                held,
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
    }
}
