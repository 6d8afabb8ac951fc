//! JobManager CPU per minute of each collector at its cadence, from the simulator's cost
//! model (`flink_autoscale_simulator::CostModel`), checked against the real runs first.
//!
//! 1. The simulator serves copies of the two real jobs measured in BENCHMARKS.md (same
//!    vertices, parallelism, edges and TaskManagers), and each poller of those runs polls
//!    them at that run's cadence: per-poll counts, refreshes included.
//! 2. The model is fitted on one real size and predicts the other (holdout), then on both.
//! 3. Per minute, each collector at the cadence of the real runs (operator-like 60 s, agent
//!    15 s, the agent's default until 2026-12-06)
//!    and the agent at 30 s and 60 s: the ratio agent / operator-like against the real one,
//!    then the same at sizes never measured for real (the 10-vertex Kafka job above).

use anyhow::{anyhow, Result};
use flink_autoscale_simulator::{fit, CostCounts, CostModel, Observation, Term, CALIBRATED_TERMS};
use serde::Serialize;

use super::{job_toml, measure, start_manual, Args, Cost, VERTICES};

/// A real run's poller: its kind here, its cadence there, and the JobManager REST-thread
/// CPU per poll measured there (ms, net of idle).
struct RealPoller {
    kind: &'static str,
    every_s: u64,
    measured_ms: f64,
}

/// One real run from BENCHMARKS.md and the simulator's copy of its job.
struct RealRun {
    name: &'static str,
    toml: fn() -> String,
    pollers: [RealPoller; 3],
    /// JobManager REST CPU per minute, agent at 15 s over operator-like at 60 s, measured.
    real_ratio: f64,
    real_ratio_source: &'static str,
}

const REAL_RUNS: [RealRun; 2] = [
    // "Real Flink: JobManager CPU, our agent versus an operator-like collector"
    // (`bench-jm-cpu`, 2026-11-30): every poller at 11 s, so one refresh per poll; means
    // over 3 rounds.
    RealRun {
        name: "bench-jm-cpu (LoadJob, 5 vertices, 126 subtasks)",
        toml: load_job_126,
        pollers: [
            RealPoller {
                kind: "refresh",
                every_s: 11,
                measured_ms: 23.3,
            },
            RealPoller {
                kind: "agent",
                every_s: 11,
                measured_ms: 25.8,
            },
            RealPoller {
                kind: "operator",
                every_s: 11,
                measured_ms: 31.4,
            },
        ],
        // Not measured per minute: its per-poll figures at the default cadences (one
        // refresh per poll at 11, 15 and 60 s alike), 4 × 25.8 / (1 × 31.4).
        real_ratio: 4.0 * 25.8 / 31.4,
        real_ratio_source: "4 x 25.8 / 31.4 ms per poll",
    },
    // "Real Flink at 1,024 subtasks" (`bench-jm-scale`, 2026-12-06): each poller at its
    // default cadence, means over 2 rounds.
    RealRun {
        name: "bench-jm-scale (WideJob, 8 x 128 = 1,024 subtasks)",
        toml: wide_job_1024,
        pollers: [
            RealPoller {
                kind: "refresh",
                every_s: 60,
                measured_ms: 215.0,
            },
            RealPoller {
                kind: "agent",
                every_s: 15,
                measured_ms: 258.0,
            },
            RealPoller {
                kind: "operator",
                every_s: 60,
                measured_ms: 270.0,
            },
        ],
        real_ratio: 1.030 / 0.270,
        real_ratio_source: "1.030 / 0.270 s per minute",
    },
];

/// Each collector at the real runs' cadence (the agent at 15 s), then the agent at 30 s and
/// 60 s (its default since 2026-12-06).
const PER_MINUTE: [(&str, u64); 5] = [
    ("operator", 60),
    ("agent", 15),
    ("agent", 30),
    ("agent", 60),
    ("refresh", 60),
];

const ALL_TERMS: [Term; 5] = [
    Term::Refresh,
    Term::FetchedEntry,
    Term::Request,
    Term::TouchedEntry,
    Term::ResponseByte,
];

/// The alternative the data cannot rule out: response bytes instead of entries touched.
const BYTES_TERMS: [Term; 2] = [Term::FetchedEntry, Term::ResponseByte];

/// How far a prediction may be off the real ratio.
const TOLERANCE: f64 = 0.25;

/// `bench-jm-cpu`'s job: LoadJob at parallelism 28, sink 14, on 2 TaskManagers × 14 slots.
fn load_job_126() -> String {
    real_job(
        "[cluster]\ntaskmanagers = 2\nslots_per_taskmanager = 14\n",
        "flink-autoscale-load",
        1200.0,
        &[
            ("Source: datagen-source", 28, ""),
            ("cpu-map", 28, "FORWARD"),
            ("filter", 28, "FORWARD"),
            ("keyed-sum", 28, "HASH"),
            ("discard-sink: Writer", 14, "REBALANCE"),
        ],
    )
}

/// `bench-jm-scale`'s job: WideJob, 8 vertices × 128, on 4 TaskManagers × 32 slots.
fn wide_job_1024() -> String {
    real_job(
        "[cluster]\ntaskmanagers = 4\nslots_per_taskmanager = 32\n",
        "flink-autoscale-wide",
        256.0,
        &[
            ("Source: datagen-source", 128, ""),
            ("stage-1", 128, "FORWARD"),
            ("stage-2", 128, "REBALANCE"),
            ("stage-3", 128, "FORWARD"),
            ("stage-4", 128, "HASH"),
            ("stage-5", 128, "FORWARD"),
            ("stage-6", 128, "FORWARD"),
            ("discard-sink", 128, "FORWARD"),
        ],
    )
}

/// A chain of vertices `(name, parallelism, ship strategy of the edge into it)`, the first
/// a sequence source (not Kafka); chaining is off in both real jobs, so one operator each.
fn real_job(cluster: &str, name: &str, rate: f64, vertices: &[(&str, u32, &str)]) -> String {
    let mut s = format!("{cluster}[[job]]\nname = \"{name}\"\n");
    for (i, (v, p, _)) in vertices.iter().enumerate() {
        s += &format!(
            "[[job.vertex]]\nname = \"{v}\"\nparallelism = {p}\nmax_parallelism = 256\ncapacity = 100000.0\n"
        );
        if i == 0 {
            // One split per subtask, as the real sequence source: each subtask then holds the
            // 75 names of a real source subtask plus its split's 7 watermark metrics.
            s += &format!("[job.vertex.source]\nsplits = {p}\nrate = {{ kind = \"constant\", value = {rate} }}\n");
        }
    }
    for pair in vertices.windows(2) {
        s += &format!(
            "[[job.edge]]\nfrom = \"{}\"\nto = \"{}\"\nship_strategy = \"{}\"\n",
            pair[0].0, pair[1].0, pair[1].2
        );
    }
    s
}

/// One observation: a real poller, what the simulator counted per poll, the real and the
/// predicted ms per poll.
#[derive(Debug, Clone, Serialize)]
pub struct PollRow {
    run: &'static str,
    subtasks: u32,
    poller: &'static str,
    every_s: u64,
    counts: CostCounts,
    measured_ms: f64,
    /// Under the fit this row belongs to.
    predicted_ms: f64,
    error_pct: f64,
    /// Not among the observations the fit used.
    holdout: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct FitReport {
    fitted_on: String,
    model: CostModel,
    polls: Vec<PollRow>,
    /// Predicted per-minute ratio agent@15 s / operator@60 s at each real size, and its error.
    ratios: Vec<RatioRow>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RatioRow {
    subtasks: u32,
    predicted: f64,
    real: f64,
    error_pct: f64,
    within_tolerance: bool,
}

/// One collector at one cadence, per minute, under `CostModel::CALIBRATED`.
#[derive(Debug, Clone, Serialize)]
pub struct MinuteRow {
    poller: &'static str,
    every_s: u64,
    polls_per_min: f64,
    /// Per poll, as the simulator counted them.
    per_poll: CostCounts,
    refresh_ms_per_min: f64,
    requests_ms_per_min: f64,
    jobmanager_cpu_ms_per_min: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SizeMinutes {
    subtasks: u32,
    job: String,
    rows: Vec<MinuteRow>,
    /// agent@15 s / operator@60 s.
    ratio_predicted: f64,
    /// Measured on real Flink at this size, if it was.
    ratio_real: Option<f64>,
    ratio_real_source: Option<&'static str>,
    within_tolerance: Option<bool>,
    /// The same ratio under the fit with response bytes instead of entries touched.
    ratio_predicted_bytes_model: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct JmCpuReport {
    calibrated: CostModel,
    /// `calibrated` is the fit on both sizes (within 1 %), i.e. the constants are current.
    calibrated_is_the_fit: bool,
    /// The fit on both real sizes, which should equal `calibrated` (rounded).
    fits: Vec<FitReport>,
    per_minute: Vec<SizeMinutes>,
}

fn counts(c: &Cost) -> CostCounts {
    CostCounts::new(
        c.fetcher_refreshes,
        c.fetched_entries,
        c.requests,
        c.entries_touched,
        c.response_bytes,
    )
}

/// What one size's pollers cost per poll: the real run's pollers at its cadences (if it is a
/// real size) and the per-minute set.
struct Measured {
    subtasks: u32,
    job: String,
    real: Vec<(&'static str, u64, Cost)>,
    minute: Vec<(&'static str, u64, Cost)>,
}

fn measure_size(
    sim_rt: &tokio::runtime::Runtime,
    toml: &str,
    job: String,
    real: &[(&'static str, u64)],
    polls: u32,
) -> Result<Measured> {
    let sim = start_manual(sim_rt, toml)?;
    let ctl = sim.control();
    let url = sim.url();
    let run = |set: &[(&'static str, u64)]| -> Result<Vec<(&'static str, u64, Cost)>> {
        set.iter()
            .map(|&(kind, every)| {
                let cost = measure(kind, &url, &ctl, polls, every)?;
                eprintln!("{job}  {kind:<9} @{every:>2}s {cost:?}");
                Ok((kind, every, cost))
            })
            .collect()
    };
    let real = run(real)?;
    let minute = run(&PER_MINUTE)?;
    let total = sim_rt.block_on(sim_subtasks(&url))?;
    sim_rt.block_on(sim.shutdown());
    Ok(Measured {
        subtasks: total,
        job,
        real,
        minute,
    })
}

/// Subtasks of the simulator's one job, from `/jobs/:jid`.
async fn sim_subtasks(url: &str) -> Result<u32> {
    let overview = super::http_get(&format!("{url}/jobs/overview")).await?;
    let v: serde_json::Value = serde_json::from_str(&overview)?;
    let total = v["jobs"][0]["tasks"]["total"]
        .as_u64()
        .ok_or_else(|| anyhow!("no task count in {overview}"))?;
    Ok(total as u32)
}

pub fn run(sim_rt: &tokio::runtime::Runtime, args: &Args) -> Result<JmCpuReport> {
    let mut sizes = Vec::new();
    for r in &REAL_RUNS {
        let set: Vec<(&'static str, u64)> = r.pollers.iter().map(|p| (p.kind, p.every_s)).collect();
        sizes.push(measure_size(
            sim_rt,
            &(r.toml)(),
            r.name.to_string(),
            &set,
            args.polls,
        )?);
    }
    for &n in &args.extrapolate {
        let p = (n / VERTICES).max(1);
        let job = format!("bench job (Kafka source, {VERTICES} x {p})");
        sizes.push(measure_size(
            sim_rt,
            &job_toml("bench", p),
            job,
            &[],
            args.polls,
        )?);
    }
    let observations = |run: usize| -> Vec<Observation> {
        sizes[run]
            .real
            .iter()
            .zip(&REAL_RUNS[run].pollers)
            .map(|((_, _, c), p)| Observation {
                counts: counts(c),
                measured_ms: p.measured_ms,
            })
            .collect()
    };
    let (small, large) = (observations(0), observations(1));
    let both: Vec<Observation> = small.iter().chain(&large).copied().collect();
    let mut fits = Vec::new();
    for (label, used, on, terms) in [
        ("126 subtasks", &small, [true, false], CALIBRATED_TERMS),
        ("1,024 subtasks", &large, [false, true], CALIBRATED_TERMS),
        ("both sizes", &both, [true, true], CALIBRATED_TERMS),
        (
            "both sizes, all five terms",
            &both,
            [true, true],
            &ALL_TERMS[..],
        ),
        (
            "both sizes, bytes for entries touched",
            &both,
            [true, true],
            &BYTES_TERMS[..],
        ),
    ] {
        let model = fit(used, terms).ok_or_else(|| anyhow!("no fit on {label}"))?;
        fits.push(fit_report(label, model, &sizes, on));
    }
    let calibrated = CostModel::CALIBRATED;
    let bytes_model = fits[4].model;
    let per_minute = sizes
        .iter()
        .enumerate()
        .map(|(i, m)| minutes(m, &calibrated, &bytes_model, REAL_RUNS.get(i)))
        .collect();
    let both_fit = fits[2].model;
    let calibrated_is_the_fit = [
        (
            calibrated.per_fetched_entry_ms,
            both_fit.per_fetched_entry_ms,
        ),
        (
            calibrated.per_touched_entry_ms,
            both_fit.per_touched_entry_ms,
        ),
        (
            calibrated.per_response_byte_ms,
            both_fit.per_response_byte_ms,
        ),
        (calibrated.per_request_ms, both_fit.per_request_ms),
        (calibrated.per_refresh_ms, both_fit.per_refresh_ms),
    ]
    .iter()
    .all(|(a, b)| (a - b).abs() <= 0.01 * b.abs().max(1e-9));
    Ok(JmCpuReport {
        calibrated,
        calibrated_is_the_fit,
        fits,
        per_minute,
    })
}

fn error_pct(predicted: f64, real: f64) -> f64 {
    (predicted / real - 1.0) * 100.0
}

fn cost_per_min(
    model: &CostModel,
    set: &[(&'static str, u64, Cost)],
    kind: &str,
    every: u64,
) -> f64 {
    set.iter()
        .find(|(k, e, _)| *k == kind && *e == every)
        .map_or(f64::NAN, |(_, _, c)| {
            model.cpu(&counts(c)).jobmanager_cpu_ms * 60.0 / every as f64
        })
}

/// agent@15 s / operator@60 s per minute under `model`.
fn default_ratio(model: &CostModel, m: &Measured) -> f64 {
    cost_per_min(model, &m.minute, "agent", 15) / cost_per_min(model, &m.minute, "operator", 60)
}

fn fit_report(label: &str, model: CostModel, sizes: &[Measured], used: [bool; 2]) -> FitReport {
    let mut polls = Vec::new();
    let mut ratios = Vec::new();
    for (i, r) in REAL_RUNS.iter().enumerate() {
        let m = &sizes[i];
        for ((kind, every, c), p) in m.real.iter().zip(&r.pollers) {
            let predicted = model.cpu(&counts(c)).jobmanager_cpu_ms;
            polls.push(PollRow {
                run: r.name,
                subtasks: m.subtasks,
                poller: kind,
                every_s: *every,
                counts: counts(c),
                measured_ms: p.measured_ms,
                predicted_ms: predicted,
                error_pct: error_pct(predicted, p.measured_ms),
                holdout: !used[i],
            });
        }
        let predicted = default_ratio(&model, m);
        let err = error_pct(predicted, r.real_ratio);
        ratios.push(RatioRow {
            subtasks: m.subtasks,
            predicted,
            real: r.real_ratio,
            error_pct: err,
            within_tolerance: err.abs() <= TOLERANCE * 100.0,
        });
    }
    FitReport {
        fitted_on: label.to_string(),
        model,
        polls,
        ratios,
    }
}

fn minutes(
    m: &Measured,
    model: &CostModel,
    bytes_model: &CostModel,
    real: Option<&RealRun>,
) -> SizeMinutes {
    let rows = m
        .minute
        .iter()
        .map(|(kind, every, c)| {
            let per_min = 60.0 / *every as f64;
            let cpu = model.cpu(&counts(c));
            MinuteRow {
                poller: kind,
                every_s: *every,
                polls_per_min: per_min,
                per_poll: counts(c),
                refresh_ms_per_min: cpu.refresh_ms * per_min,
                requests_ms_per_min: (cpu.jobmanager_cpu_ms - cpu.refresh_ms) * per_min,
                jobmanager_cpu_ms_per_min: cpu.jobmanager_cpu_ms * per_min,
            }
        })
        .collect();
    let predicted = default_ratio(model, m);
    SizeMinutes {
        subtasks: m.subtasks,
        job: m.job.clone(),
        rows,
        ratio_predicted: predicted,
        ratio_real: real.map(|r| r.real_ratio),
        ratio_real_source: real.map(|r| r.real_ratio_source),
        within_tolerance: real
            .map(|r| error_pct(predicted, r.real_ratio).abs() <= TOLERANCE * 100.0),
        ratio_predicted_bytes_model: default_ratio(bytes_model, m),
    }
}

fn print_model(k: &CostModel) -> String {
    format!(
        "per refresh {:.3} ms + {:.4} µs per fetched entry; per request {:.3} ms; {:.4} µs per entry touched; {:.4} µs per response byte",
        k.per_refresh_ms,
        k.per_fetched_entry_ms * 1000.0,
        k.per_request_ms,
        k.per_touched_entry_ms * 1000.0,
        k.per_response_byte_ms * 1000.0
    )
}

pub fn print(r: &JmCpuReport) {
    println!();
    println!("JobManager REST-thread CPU, modeled (simulator) against measured (real Flink 2.3)");
    println!("CostModel::CALIBRATED: {}", print_model(&r.calibrated));
    if !r.calibrated_is_the_fit {
        println!(
            "  NOTE: CostModel::CALIBRATED differs from the fit on both sizes below; update it"
        );
    }
    for f in &r.fits {
        println!();
        println!("fit on {}: {}", f.fitted_on, print_model(&f.model));
        println!("| subtasks | poller | every | refreshes | fetched entries | requests | bytes | entries touched | real ms/poll | predicted ms/poll | error |");
        println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for p in &f.polls {
            let c = &p.counts;
            println!(
                "| {} | {} | {} s | {} | {} | {} | {} | {} | {:.1} | {:.1} | {:+.0} %{} |",
                p.subtasks,
                p.poller,
                p.every_s,
                c.fetcher_refreshes,
                c.fetched_entries,
                c.requests,
                c.response_bytes,
                c.entries_touched,
                p.measured_ms,
                p.predicted_ms,
                p.error_pct,
                if p.holdout { " (holdout)" } else { "" }
            );
        }
        for q in &f.ratios {
            println!(
                "  {} subtasks: per-minute ratio agent@15s / operator@60s predicted {:.2}, real {:.2}: {:+.0} % ({})",
                q.subtasks,
                q.predicted,
                q.real,
                q.error_pct,
                if q.within_tolerance { "within 25 %" } else { "NOT within 25 %" }
            );
        }
    }
    println!();
    println!("Per minute, CostModel::CALIBRATED:");
    println!("| subtasks | poller | every | refreshes/min | requests/min | bytes/min | refresh ms/min | requests' own ms/min | JM REST CPU ms/min |");
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    for s in &r.per_minute {
        for row in &s.rows {
            let c = &row.per_poll;
            println!(
                "| {} | {} | {} s | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |",
                s.subtasks,
                row.poller,
                row.every_s,
                c.fetcher_refreshes as f64 * row.polls_per_min,
                c.requests as f64 * row.polls_per_min,
                c.response_bytes as f64 * row.polls_per_min,
                row.refresh_ms_per_min,
                row.requests_ms_per_min,
                row.jobmanager_cpu_ms_per_min
            );
        }
        match (s.ratio_real, s.within_tolerance) {
            (Some(real), Some(ok)) => println!(
                "  {} subtasks ({}): agent@15s / operator@60s predicted {:.2} ({:.2} with bytes), real {:.2} ({}): {}",
                s.subtasks,
                s.job,
                s.ratio_predicted,
                s.ratio_predicted_bytes_model,
                real,
                s.ratio_real_source.unwrap_or(""),
                if ok { "within 25 %" } else { "NOT within 25 %" }
            ),
            _ => println!(
                "  {} subtasks ({}): agent@15s / operator@60s predicted {:.2} ({:.2} with bytes; extrapolated, never measured)",
                s.subtasks, s.job, s.ratio_predicted, s.ratio_predicted_bytes_model
            ),
        }
    }
}
