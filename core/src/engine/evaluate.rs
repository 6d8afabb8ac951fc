//! The evaluate stage (reference sections 3.5, 3.6 and 4): a job's metric window becomes
//! per-vertex figures, namely load, true processing rate, target data rate propagated
//! through the DAG, catch-up rate and the band thresholds, plus the job's backlog flag.

use std::collections::BTreeMap;

use super::config::{whole_seconds, AutoscalerConfig, BusyTimeAggregator};
use super::error::EngineError;
use super::model::{DecideInput, DecideVertex, EvaluateInput, Evaluated, EvaluatedVertex};
use super::numeric::{java_max, round3};
use super::sample_math::{average, rate};
use super::thresholds::{band, Rates};
use super::topology::{check_parallelism, Topology};
use crate::samples::{FlinkF64, Sample, VertexSample};

/// Per-sample values of one vertex, derived as upstream derives them at collection time.
#[derive(Debug, Clone, Copy)]
struct Derived {
    time_ms: u64,
    load: f64,
    records_in: f64,
    records_out: f64,
    lag: f64,
    observed_tpr: f64,
    records_in_per_second: f64,
    accumulated_busy_ms: f64,
    backpressured_ms_per_second: f64,
}

pub fn evaluate(input: &EvaluateInput) -> Result<Evaluated, EngineError> {
    let config = &input.config;
    check_parallelism(
        input
            .vertices
            .iter()
            .map(|v| (v.parallelism, v.max_parallelism)),
    )?;
    let topology = Topology::build(
        input
            .vertices
            .iter()
            .map(|v| (v.id.as_str(), v.inputs.as_slice())),
    )?;
    let window = window_of(input)?;
    let series: Vec<Vec<Derived>> = input
        .vertices
        .iter()
        .enumerate()
        .map(|(i, v)| derive_series(&window, &v.id, topology.is_source(i), config))
        .collect();
    let in_rate: Vec<f64> = series
        .iter()
        .map(|s| rate(s.iter().map(|d| (d.time_ms, d.records_in))))
        .collect();
    let out_rate: Vec<f64> = series
        .iter()
        .map(|s| rate(s.iter().map(|d| (d.time_ms, d.records_out))))
        .collect();
    let flow = propagate_target_rates(input, &topology, &series, &in_rate, &out_rate)?;
    let processing_backlog = processing_backlog(&topology, &flow.lag, &in_rate, config);

    let mut vertices = BTreeMap::new();
    let mut excluded_vertices = Vec::new();
    let mut complete = true;
    for (v, spec) in input.vertices.iter().enumerate() {
        let s = &series[v];
        let (load, tpr) = load_and_true_processing_rate(
            s,
            topology.is_source(v),
            spec.parallelism,
            in_rate[v],
            config,
        );
        complete &= s.iter().all(|d| d.load.is_finite());
        // A vertex whose subtasks all FINISHED does no work: never scaled (as upstream).
        if spec.is_finished() || s.last().is_some_and(|d| !d.load.is_finite()) {
            excluded_vertices.push(spec.id.clone());
        }
        let rates = Rates {
            true_processing_rate: tpr,
            target_data_rate: flow.target[v],
            catch_up_data_rate: flow.catch_up[v],
        };
        let band = band(&rates, processing_backlog, config);
        let sink_limit_rate = detect_sink_limit(&topology, &series, &in_rate, v, load, config);
        vertices.insert(
            spec.id.clone(),
            EvaluatedVertex {
                load: FlinkF64(load),
                true_processing_rate: FlinkF64(tpr),
                target_data_rate: FlinkF64(flow.target[v]),
                catch_up_data_rate: FlinkF64(flow.catch_up[v]),
                lag: FlinkF64(flow.lag[v]),
                scale_up_rate_threshold: FlinkF64(round3(band.scale_up_rate_threshold)),
                scale_down_rate_threshold: FlinkF64(round3(band.scale_down_rate_threshold)),
                sink_limit_rate: sink_limit_rate.map(FlinkF64),
            },
        );
    }
    Ok(Evaluated {
        processing_backlog,
        window_complete: complete && window_full(input, &window),
        vertices,
        excluded_vertices,
    })
}

/// Per-vertex target data rate, catch-up rate and (sources) lag, indexed like the vertices.
struct Flow {
    target: Vec<f64>,
    catch_up: Vec<f64>,
    lag: Vec<f64>,
}

/// Target data and catch-up rates: measured at the sources, then carried through the DAG
/// in topological order with edge ratios (reference 4.2).
fn propagate_target_rates(
    input: &EvaluateInput,
    topology: &Topology,
    series: &[Vec<Derived>],
    in_rate: &[f64],
    out_rate: &[f64],
) -> Result<Flow, EngineError> {
    let catch_up_s = input.config.catch_up_duration_s();
    let n = input.vertices.len();
    let mut flow = Flow {
        target: vec![0.0; n],
        catch_up: vec![0.0; n],
        lag: vec![0.0; n],
    };
    for &v in &topology.order {
        if topology.is_source(v) {
            let latest_lag = series[v].last().map_or(0.0, |d| d.lag);
            let lag_rate = rate(series[v].iter().map(|d| (d.time_ms, d.lag)));
            // Java's max keeps NaN, and upstream fails the evaluation on it.
            let tdr = java_max(0.0, in_rate[v] + lag_rate);
            if tdr.is_nan() {
                return Err(EngineError::NoTargetDataRate {
                    vertex: input.vertices[v].id.clone(),
                });
            }
            flow.target[v] = round3(tdr);
            flow.catch_up[v] = round3(if catch_up_s > 0.0 {
                latest_lag / catch_up_s
            } else {
                0.0
            });
            flow.lag[v] = round3(latest_lag);
        } else {
            let (mut tdr, mut catch_up) = (0.0, 0.0);
            for &(u, _) in &topology.inputs[v] {
                let ratio = edge_ratio(topology, in_rate, out_rate, u, v);
                tdr += flow.target[u] * ratio;
                catch_up += flow.catch_up[u] * ratio;
            }
            flow.target[v] = round3(tdr);
            flow.catch_up[v] = round3(catch_up);
        }
    }
    Ok(flow)
}

/// Whether some source has more lag than `backlog-processing.lag-threshold` worth of input
/// (lag with no input counts: `lag / 0` is infinite).
fn processing_backlog(
    topology: &Topology,
    lag: &[f64],
    in_rate: &[f64],
    config: &AutoscalerConfig,
) -> bool {
    let threshold_s = whole_seconds(config.backlog_lag_threshold_ms);
    (0..lag.len())
        .filter(|&v| topology.is_source(v) && !in_rate[v].is_nan())
        .any(|v| lag[v] / in_rate[v] > threshold_s)
}

/// The decide-stage input for an evaluated window: vertices without busy time in the newest
/// sample, and vertices whose subtasks all finished, are excluded for this cycle, as
/// upstream does.
pub fn decide_input(input: &EvaluateInput, evaluated: &Evaluated) -> DecideInput {
    let mut config = input.config.clone();
    config
        .vertex_exclude_ids
        .extend(evaluated.excluded_vertices.iter().cloned());
    DecideInput {
        now_ms: input.now_ms,
        config,
        processing_backlog: evaluated.processing_backlog,
        window_complete: evaluated.window_complete,
        vertices: input
            .vertices
            .iter()
            .filter_map(|spec| {
                evaluated
                    .vertices
                    .get(&spec.id)
                    .map(|f| DecideVertex::new(spec, f))
            })
            .collect(),
        state: input.state.clone(),
        observed_rescale: input.observed_rescale,
        forecast: input.forecast.clone(),
    }
}

/// The samples of the current run, validated: in time order, not after `now_ms`, naming
/// only known vertices. Samples before `job_running_since_ms` belong to an earlier run.
fn window_of(input: &EvaluateInput) -> Result<Vec<&Sample>, EngineError> {
    let mut previous: Option<u64> = None;
    for (i, sample) in input.samples.iter().enumerate() {
        let field = || format!("samples[{i}].time_ms");
        if previous.is_some_and(|p| sample.time_ms <= p) {
            return Err(EngineError::invalid(
                field(),
                "samples must be in strictly increasing time order",
            ));
        }
        if sample.time_ms > input.now_ms {
            return Err(EngineError::invalid(
                field(),
                format!("{} is after now_ms ({})", sample.time_ms, input.now_ms),
            ));
        }
        previous = Some(sample.time_ms);
        if let Some(unknown) = sample
            .vertices
            .keys()
            .find(|id| !input.vertices.iter().any(|v| &v.id == *id))
        {
            return Err(EngineError::invalid(
                format!("samples[{i}].vertices.{unknown}"),
                "unknown vertex id",
            ));
        }
    }
    let window: Vec<&Sample> = input
        .samples
        .iter()
        .filter(|s| s.time_ms >= input.job_running_since_ms)
        .collect();
    if window.len() < 2 {
        return Err(EngineError::invalid(
            "samples",
            format!(
                "need at least 2 samples at or after job_running_since_ms, got {}",
                window.len()
            ),
        ));
    }
    Ok(window)
}

/// Upstream's timing rule: the window is full once `metrics.window` has passed since the
/// first sample taken after the stabilization interval.
fn window_full(input: &EvaluateInput, window: &[&Sample]) -> bool {
    let config = &input.config;
    let stable = input
        .job_running_since_ms
        .saturating_add(config.stabilization_interval_ms);
    window
        .iter()
        .find(|s| s.time_ms >= stable)
        .is_some_and(|s| input.now_ms >= s.time_ms.saturating_add(config.metrics_window_ms))
}

fn value(v: Option<FlinkF64>) -> f64 {
    v.map_or(f64::NAN, |f| f.0)
}

fn derive_series(
    window: &[&Sample],
    id: &str,
    is_source: bool,
    config: &AutoscalerConfig,
) -> Vec<Derived> {
    let missing = VertexSample::default();
    let lag_threshold_s = whole_seconds(config.observed_tpr_lag_threshold_ms);
    let mut series: Vec<Derived> = Vec::with_capacity(window.len());
    for sample in window {
        let vs = sample.vertices.get(id).unwrap_or(&missing);
        let busy = vs
            .busy_time_ms_per_second
            .and_then(|a| match config.busy_time_aggregator {
                BusyTimeAggregator::Max => a.max,
                BusyTimeAggregator::Min => a.min,
                BusyTimeAggregator::Avg => a.avg,
            });
        let busy = value(busy);
        let load = if busy.is_finite() {
            java_max(0.0, busy) / 1000.0
        } else {
            f64::NAN
        };
        let lag = if is_source {
            vs.pending_records.map_or(0.0, |p| p.0)
        } else {
            f64::NAN
        };
        let records_in_per_second = value(vs.num_records_in_per_second);
        let backpressured = value(vs.backpressured_time_ms_per_second);
        let observed_tpr = if is_source {
            observed_true_processing_rate(
                &series,
                records_in_per_second,
                lag,
                backpressured,
                lag_threshold_s,
                config,
            )
        } else {
            f64::NAN
        };
        series.push(Derived {
            time_ms: sample.time_ms,
            load: round3(load),
            records_in: round3(java_max(0.0, value(vs.num_records_in))),
            records_out: round3(value(vs.num_records_out)),
            lag: round3(lag),
            observed_tpr: round3(observed_tpr),
            records_in_per_second: round3(if is_source {
                f64::NAN
            } else {
                records_in_per_second
            }),
            accumulated_busy_ms: round3(value(vs.accumulated_busy_time_ms)),
            backpressured_ms_per_second: round3(backpressured),
        });
    }
    series
}

/// A source's observed TPR at one sample: its input rate, corrected for backpressure, while
/// it is catching up on enough lag; otherwise the average of earlier observations.
fn observed_true_processing_rate(
    earlier: &[Derived],
    records_in_per_second: f64,
    lag: f64,
    backpressured: f64,
    lag_threshold_s: f64,
    config: &AutoscalerConfig,
) -> f64 {
    let r = records_in_per_second;
    if r.is_nan() {
        return f64::NAN;
    }
    if r == 0.0 {
        return f64::INFINITY;
    }
    if lag >= lag_threshold_s * r && backpressured < 1000.0 {
        return r / (1.0 - backpressured / 1000.0);
    }
    average(
        earlier.iter().map(|d| d.observed_tpr),
        config.observed_tpr_min_observations,
    )
}

/// (LOAD, TRUE_PROCESSING_RATE) of a vertex over the window (reference 4.3).
fn load_and_true_processing_rate(
    s: &[Derived],
    is_source: bool,
    parallelism: u32,
    in_rate: f64,
    config: &AutoscalerConfig,
) -> (f64, f64) {
    let busy_avg = match config.busy_time_aggregator {
        BusyTimeAggregator::Max | BusyTimeAggregator::Min => {
            average(s.iter().map(|d| d.load), 1) * 1000.0
        }
        BusyTimeAggregator::Avg => {
            rate(s.iter().map(|d| (d.time_ms, d.accumulated_busy_ms))) / f64::from(parallelism)
        }
    };
    let tpr_in = match config.busy_time_aggregator {
        BusyTimeAggregator::Max | BusyTimeAggregator::Min if !is_source => {
            let per_second = average(s.iter().map(|d| d.records_in_per_second), 1);
            if per_second.is_finite() {
                per_second
            } else {
                in_rate
            }
        }
        _ => in_rate,
    };
    let busy_tpr = if tpr_in == 0.0 {
        f64::INFINITY
    } else {
        tpr_in / (busy_avg / 1000.0)
    };
    let observed = average(
        s.iter().map(|d| d.observed_tpr),
        config.observed_tpr_min_observations,
    );
    let tpr = if observed.is_nan() {
        busy_tpr
    } else if !busy_tpr.is_finite()
        || busy_tpr > observed * (1.0 + config.observed_tpr_switch_threshold)
    {
        observed
    } else {
        busy_tpr
    };
    (round3(busy_avg / 1000.0), round3(tpr))
}

/// Records arriving at `v` per record read by its input `u` (reference 4.2), from the
/// vertices' own counters since Flink has no per-edge metric.
fn edge_ratio(topology: &Topology, in_rate: &[f64], out_rate: &[f64], u: usize, v: usize) -> f64 {
    let u_in = in_rate[u];
    if u_in.is_nan() || u_in <= 0.0 {
        return 0.0;
    }
    let others = || {
        topology.inputs[v]
            .iter()
            .map(|&(w, _)| w)
            .filter(|&w| w != u)
    };
    let edge = if topology.inputs[v].len() == 1 {
        in_rate[v]
    } else if others().all(|w| topology.outputs[w].len() == 1) {
        in_rate[v] - others().map(|w| out_rate[w]).sum::<f64>()
    } else {
        out_rate[u]
    };
    if edge > 0.0 {
        edge / u_in
    } else {
        0.0
    }
}

/// Our sink-limit detection: a sink whose upstream is backpressured while the sink itself is
/// mostly not busy is at capacity; what it absorbs now is its limit.
fn detect_sink_limit(
    topology: &Topology,
    series: &[Vec<Derived>],
    in_rate: &[f64],
    v: usize,
    load: f64,
    config: &AutoscalerConfig,
) -> Option<f64> {
    let ext = &config.extensions;
    if !ext.sink_detection_enabled || !topology.is_sink(v) || topology.is_source(v) {
        return None;
    }
    let upstream_backpressured = topology.inputs[v].iter().any(|&(u, _)| {
        average(series[u].iter().map(|d| d.backpressured_ms_per_second), 1) / 1000.0
            >= ext.sink_detection_backpressure_threshold
    });
    let absorbed = in_rate[v];
    (upstream_backpressured
        && load <= ext.sink_detection_busy_threshold
        && absorbed.is_finite()
        && absorbed > 0.0)
        .then(|| round3(absorbed))
}
