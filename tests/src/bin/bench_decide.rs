//! Benchmark of the decision engine's `decide` on a 200-vertex job (the target), the same
//! job with a confident 24-hour load forecast (prediction and the forecast's plan), plus
//! `evaluate` on a 15-minute window of the same job for the daemon's budget.
//!
//! `cargo run --release -p flink-autoscale-tests --bin bench_decide [-- --iterations N]`
//!
//! Prints median and p99 wall time per call in microseconds, next to a trivial baseline
//! measured in the same run (cloning the input), and the ratio between the two.

use std::hint::black_box;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use flink_autoscale_core::engine::{
    decide, evaluate, DecideInput, EvaluateInput, PredictionStatus,
};
use flink_autoscale_core::forecast::Forecast;
use serde_json::{json, Value};

const VERTICES: usize = 200;
const TARGET_US: f64 = 200.0;

fn main() -> Result<()> {
    let iterations = iterations_from_args()?;
    let input = job(VERTICES)?;
    let decision = decide(&input).context("the benchmark job must be valid")?;
    let changed = decision
        .vertices
        .iter()
        .filter(|v| decision.parallelism[&v.id] != v.current)
        .count();
    println!(
        "job: {VERTICES} vertices, {} edges, scale={}, {changed} vertices changed",
        input.vertices.iter().map(|v| v.inputs.len()).sum::<usize>(),
        decision.scale
    );

    let warmup = iterations / 10 + 1;
    let baseline = measure(warmup, iterations, || {
        black_box(black_box(&input).clone());
    });
    let engine = measure(warmup, iterations, || {
        black_box(decide(black_box(&input)).expect("valid input"));
    });

    // The same job with a confident forecast (its scale-ups sized ahead), and at a tenth of
    // its load, where the decision is mostly scale-downs, weighed by the forecast's plan; each
    // next to the same input without the forecast.
    let low = with_load(&input, 0.1);
    let mut cases = Vec::new();
    for (label, job) in [("today's load", &input), ("load at 10 %", &low)] {
        let forecasted = with_forecast(job);
        let d = decide(&forecasted).context("the forecast job must be valid")?;
        if d.prediction.status != PredictionStatus::Used {
            bail!("the forecast was not used: {}", d.prediction.detail);
        }
        let count = |f: &dyn Fn(u32, u32) -> bool| {
            d.vertices
                .iter()
                .filter(|v| f(d.parallelism[&v.id], v.current))
                .count()
        };
        println!(
            "{label} with the forecast: {} vertices up, {} down",
            count(&|new, current| new > current),
            count(&|new, current| new < current),
        );
        let without = measure(warmup, iterations, || {
            black_box(decide(black_box(job)).expect("valid input"));
        });
        let with = measure(warmup, iterations, || {
            black_box(decide(black_box(&forecasted)).expect("valid input"));
        });
        cases.push((label, without, with));
    }

    let window = window_of(&input)?;
    evaluate(&window).context("the benchmark window must be valid")?;
    let evaluate_iterations = (iterations / 20).max(10);
    let evaluated = measure(evaluate_iterations / 10 + 1, evaluate_iterations, || {
        black_box(evaluate(black_box(&window)).expect("valid window"));
    });

    println!("iterations: {iterations} (evaluate: {evaluate_iterations})");
    println!("| measurement | median µs | p99 µs |");
    println!("|---|---:|---:|");
    println!(
        "| baseline: clone the input | {:.1} | {:.1} |",
        baseline.median, baseline.p99
    );
    println!(
        "| decide (200 vertices) | {:.1} | {:.1} |",
        engine.median, engine.p99
    );
    for (label, without, with) in &cases {
        println!(
            "| decide, {label}, no forecast | {:.1} | {:.1} |",
            without.median, without.p99
        );
        println!(
            "| decide, {label}, confident 96-step forecast | {:.1} | {:.1} |",
            with.median, with.p99
        );
    }
    println!(
        "| evaluate ({VERTICES} vertices x {} samples) | {:.1} | {:.1} |",
        window.samples.len(),
        evaluated.median,
        evaluated.p99
    );
    println!(
        "ratio decide/baseline: median {:.1}x, p99 {:.1}x",
        engine.median / baseline.median,
        engine.p99 / baseline.p99
    );
    for (label, without, with) in &cases {
        println!(
            "ratio decide with/without the forecast, {label}: median {:.1}x",
            with.median / without.median
        );
    }
    let verdict = if engine.median <= TARGET_US {
        "met"
    } else {
        "MISSED"
    };
    println!("target: median <= {TARGET_US} µs: {verdict}");
    Ok(())
}

fn iterations_from_args() -> Result<usize> {
    let mut args = std::env::args().skip(1);
    let mut iterations = 20_000;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--iterations" => {
                iterations = args
                    .next()
                    .context("--iterations needs a number")?
                    .parse()
                    .context("--iterations needs a whole number")?;
            }
            other => bail!("unknown argument `{other}` (usage: bench_decide [--iterations N])"),
        }
    }
    Ok(iterations.max(10))
}

struct Percentiles {
    median: f64,
    p99: f64,
}

fn measure(warmup: usize, iterations: usize, mut f: impl FnMut()) -> Percentiles {
    for _ in 0..warmup {
        f();
    }
    let mut micros: Vec<f64> = (0..iterations)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    micros.sort_by(f64::total_cmp);
    let at = |q: f64| micros[((micros.len() - 1) as f64 * q).round() as usize];
    Percentiles {
        median: at(0.5),
        p99: at(0.99),
    }
}

/// A realistic large job: 10 pipelines of 20 vertices each (source, keyed stages, forward
/// chains broken by `disableChaining`, a join and a sink), with scaling history for every
/// vertex, pending scale-downs, a configured sink limit, and mixed load so that vertices
/// scale up, scale down and stay.
fn job(vertices: usize) -> Result<DecideInput> {
    let mut specs = Vec::with_capacity(vertices);
    let mut history = serde_json::Map::new();
    let mut delayed = serde_json::Map::new();
    for i in 0..vertices {
        let stage = i % 20;
        let id = format!("{i:032x}");
        let inputs: Vec<Value> = match stage {
            0 => vec![],
            5 | 6 | 12 => {
                vec![json!({"id": format!("{:032x}", i - 1), "ship_strategy": "FORWARD"})]
            }
            10 => vec![
                json!({"id": format!("{:032x}", i - 1), "ship_strategy": "HASH"}),
                json!({"id": format!("{:032x}", i - 5), "ship_strategy": "HASH"}),
            ],
            s if s % 3 == 0 => {
                vec![json!({"id": format!("{:032x}", i - 1), "ship_strategy": "REBALANCE"})]
            }
            _ => vec![json!({"id": format!("{:032x}", i - 1), "ship_strategy": "HASH"})],
        };
        let parallelism = 4 + (i % 13) as u32;
        // Load varies so that some vertices are under- and some over-provisioned.
        let tpr = 1000.0 + (i % 7) as f64 * 400.0;
        let tdr = 300.0 + (i % 11) as f64 * 250.0;
        specs.push(json!({
            "id": id, "name": format!("stage-{stage} of pipeline {}", i / 20),
            "parallelism": parallelism, "max_parallelism": if stage == 0 { 128 } else { 720 },
            "source_partitions": if stage == 0 { 24 } else { 0 },
            "inputs": inputs,
            "true_processing_rate": tpr, "target_data_rate": tdr, "catch_up_data_rate": if stage == 0 { 50.0 } else { 0.0 }
        }));
        history.insert(
            id.clone(),
            json!([
                {"time_ms": 1_000, "current": parallelism - 2, "new": parallelism - 1,
                 "true_processing_rate": tpr * 0.8, "expected_processing_rate": tpr * 0.9},
                {"time_ms": 2_000, "current": parallelism - 1, "new": parallelism,
                 "true_processing_rate": tpr * 0.9, "expected_processing_rate": tpr}
            ]),
        );
        if i % 4 == 0 {
            delayed.insert(
                id,
                json!({"first_trigger_ms": 3_000, "recommendations": [
                    {"time_ms": 3_000, "parallelism": parallelism - 1, "outside_band": true}]}),
            );
        }
    }
    let input = json!({
        "now_ms": 3_600_000,
        "config": {
            "job.autoscaler.enabled": "true",
            "job.autoscaler.utilization.target": "0.7",
            "job.autoscaler.scale-down.interval": "30 min",
            "job.autoscaler.observed-scalability.enabled": "true",
            "job.autoscaler.scaling.effectiveness.detection.enabled": "true",
            "flink-autoscale.sink-limits.max-rates": format!("{:032x}:1500,{:032x}:900", 19, 39)
        },
        "vertices": specs,
        "state": {"history": history, "delayed_scale_down": delayed}
    });
    serde_json::from_value(input).context("benchmark input")
}

/// The job with every vertex's incoming rate scaled by `factor`.
fn with_load(job: &DecideInput, factor: f64) -> DecideInput {
    let mut scaled = job.clone();
    for v in &mut scaled.vertices {
        v.target_data_rate.0 *= factor;
        v.catch_up_data_rate.0 *= factor;
    }
    scaled
}

/// The job with a confident forecast for its sources: a day's cosine around today's rate,
/// falling first, so the forecast's plan weighs the job's scale-downs.
fn with_forecast(job: &DecideInput) -> DecideInput {
    const STEP_MS: u64 = 15 * 60_000;
    let sources = job
        .vertices
        .iter()
        .filter(|v| v.inputs.is_empty())
        .map(|v| {
            let curve = (0..96)
                .map(|s| {
                    let phase = f64::from(s) / 96.0 * std::f64::consts::TAU;
                    v.target_data_rate.0 * (0.7 + 0.3 * phase.cos())
                })
                .collect();
            (v.id.clone(), curve)
        })
        .collect();
    let mut forecasted = job.clone();
    forecasted.forecast = Some(Forecast {
        start_ms: job.now_ms - job.now_ms % STEP_MS,
        step_ms: STEP_MS,
        sources,
        confident: true,
        detail: "benchmark forecast".into(),
    });
    forecasted
}

/// A 15-minute window of the job: 61 samples, 15 s apart, with counters that grow at each
/// vertex's target rate and busy times that match its load.
fn window_of(job: &DecideInput) -> Result<EvaluateInput> {
    let specs: Vec<Value> = job
        .vertices
        .iter()
        .map(|v| {
            json!({"id": v.id, "name": v.name, "parallelism": v.parallelism,
                   "max_parallelism": v.max_parallelism, "source_partitions": v.source_partitions,
                   "inputs": v.inputs})
        })
        .collect();
    let samples: Vec<Value> = (0..=60u64)
        .map(|k| {
            let seconds = (k * 15) as f64;
            let vertices: serde_json::Map<String, Value> = job
                .vertices
                .iter()
                .map(|v| {
                    let rate = v.target_data_rate.0;
                    let busy = (rate / v.true_processing_rate.0 * 1000.0).min(1000.0);
                    let source = v.inputs.is_empty();
                    (
                        v.id.clone(),
                        json!({
                            "busy_time_ms_per_second": {"min": busy * 0.8, "max": busy, "avg": busy * 0.9},
                            "backpressured_time_ms_per_second": 0.0,
                            "num_records_in": rate * seconds,
                            "num_records_out": rate * seconds,
                            "num_records_in_per_second": rate,
                            "pending_records": if source { 1000.0 + seconds } else { 0.0 },
                            "accumulated_busy_time_ms": busy * seconds * f64::from(v.parallelism)
                        }),
                    )
                })
                .collect();
            json!({"time_ms": 1_000_000 + k * 15_000, "vertices": vertices})
        })
        .collect();
    serde_json::from_value(json!({
        "now_ms": 1_000_000 + 60 * 15_000,
        "config": {"job.autoscaler.enabled": "true"},
        "job_running_since_ms": 0,
        "vertices": specs,
        "samples": samples
    }))
    .context("benchmark window")
}
