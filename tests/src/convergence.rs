//! The diurnal convergence run shared by `tests/tests/loop_diurnal.rs` and the
//! `bench_convergence` binary: the simulator's 24-hour curve (2,000 to 20,000 records/s with
//! noise) with the agent in lockstep, the adaptive-scheduler realizer and local gates.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::lockstep::{local_control, scenario_text, Harness, Tick};

pub const DAY: Duration = Duration::from_secs(24 * 3600);
/// `job.autoscaler.catch-up.duration` default, seconds.
pub const CATCH_UP_S: f64 = 1800.0;

/// What one simulated day of the loop looked like.
#[derive(Debug, Clone, Serialize)]
pub struct DayStats {
    /// 1-based day number.
    pub day: usize,
    pub target_utilization: f64,
    pub rescales: usize,
    /// Hours into the day of each applied rescale.
    pub rescale_hours: Vec<f64>,
    /// Each change of the observed parallelism during the day: hours into the day and the
    /// vertices' parallelism before and after, in vertex-id order (`6/13/1 -> 6/12/1`).
    pub parallelism_changes: Vec<(f64, String)>,
    /// Time-weighted average of the summed vertex parallelism.
    pub avg_parallelism: f64,
    /// Summed parallelism of a static job sized for the day's peak: every vertex at the
    /// largest parallelism the loop needed for it.
    pub peak_sized_parallelism: u32,
    /// Largest source backlog, in seconds of input at the current rate.
    pub max_lag_s: f64,
}

impl DayStats {
    /// Share of the static peak-sized job's parallelism saved on average.
    pub fn saving(&self) -> f64 {
        1.0 - self.avg_parallelism / f64::from(self.peak_sized_parallelism.max(1))
    }
}

/// Runs `days` simulated days of `simulator/scenarios/diurnal.toml` at `target` utilization
/// (the scenario's 0.7 replaced), polling every `poll`. `autoscaler` holds extra fleet
/// settings (`key = value` TOML lines without the `job.autoscaler.` prefix).
pub async fn diurnal_days(
    target: &str,
    days: usize,
    poll: Duration,
    autoscaler: &str,
) -> Vec<DayStats> {
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = scenario_text("diurnal.toml").replace(
        "\"job.autoscaler.target.utilization\" = \"0.7\"",
        &format!("\"job.autoscaler.target.utilization\" = \"{target}\""),
    );
    let extra = format!("[autoscaler]\n{autoscaler}\n{}", local_control(dir.path()));
    let mut h = Harness::start(&scenario, poll, &extra).await;
    let start = h.now_ms;
    let day_ms = DAY.as_millis() as u64;
    for _ in 0..days {
        h.run_for(DAY).await;
    }
    let applied = h.applied_times();
    let stats = (0..days)
        .map(|d| {
            let (from, to) = (start + d as u64 * day_ms, start + (d as u64 + 1) * day_ms);
            let ticks: Vec<&Tick> = h
                .ticks
                .iter()
                .filter(|t| t.now_ms > from && t.now_ms <= to)
                .collect();
            let hours: Vec<f64> = applied
                .iter()
                .filter(|t| **t > from && **t <= to)
                .map(|t| ((t - from) as f64 / 3.6e6 * 10.0).round() / 10.0)
                .collect();
            let mut stats = day_stats(d + 1, target.parse().unwrap_or(f64::NAN), &ticks, hours);
            stats.parallelism_changes = parallelism_changes(&h.ticks, from, to);
            stats
        })
        .collect();
    h.shutdown().await;
    stats
}

fn day_stats(day: usize, target: f64, ticks: &[&Tick], rescale_hours: Vec<f64>) -> DayStats {
    let mut peak: BTreeMap<&String, u32> = BTreeMap::new();
    let mut total = 0.0;
    let mut max_lag_s: f64 = 0.0;
    for t in ticks {
        for (id, p) in &t.parallelism {
            let e = peak.entry(id).or_default();
            *e = (*e).max(*p);
        }
        total += t.parallelism.values().sum::<u32>() as f64;
        if t.input_rate > 0.0 {
            max_lag_s = max_lag_s.max(t.lag / t.input_rate);
        }
    }
    DayStats {
        day,
        target_utilization: target,
        rescales: rescale_hours.len(),
        rescale_hours,
        parallelism_changes: Vec::new(),
        avg_parallelism: total / ticks.len().max(1) as f64,
        peak_sized_parallelism: peak.values().sum(),
        max_lag_s,
    }
}

/// Changes of the observed parallelism between consecutive ticks in `(from, to]`.
fn parallelism_changes(ticks: &[Tick], from: u64, to: u64) -> Vec<(f64, String)> {
    let shape = |t: &Tick| {
        t.parallelism
            .values()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join("/")
    };
    ticks
        .windows(2)
        .filter(|w| w[1].now_ms > from && w[1].now_ms <= to)
        .filter(|w| w[0].parallelism != w[1].parallelism)
        .map(|w| {
            let hour = ((w[1].now_ms - from) as f64 / 3.6e6 * 10.0).round() / 10.0;
            (hour, format!("{} -> {}", shape(&w[0]), shape(&w[1])))
        })
        .collect()
}

/// The Markdown table of BENCHMARKS.md.
pub fn markdown_table(rows: &[DayStats]) -> String {
    let mut out = String::from(
        "| target utilization | day | rescales | avg parallelism (sum of vertices) | static peak-sized | saving | max lag (s of input) |\n|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {} | {:.2} | {} | {:.0} % | {:.0} |\n",
            r.target_utilization,
            r.day,
            r.rescales,
            r.avg_parallelism,
            r.peak_sized_parallelism,
            100.0 * r.saving(),
            r.max_lag_s
        ));
    }
    out
}
