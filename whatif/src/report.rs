//! The figures of one run over the days it is judged on, and the table that shows them.

use flink_autoscale_simulator::JobTruth;
use serde::Serialize;

use crate::baselines::{BestPlan, NeedCurve};
use crate::run::{Rescale, Run};

/// The best plan is searched over blocks of this many minutes.
pub const PLAN_BLOCK_MINUTES: usize = 5;

/// Every figure of one setting.
#[derive(Debug, Clone, Serialize)]
pub struct Figures {
    pub setting: String,
    pub keys: Vec<(String, String)>,
    pub target_utilization: f64,
    /// The judged span: from this hour of the run to its end (the first day is learning).
    pub from_hour: f64,
    pub days: f64,
    pub rescales: usize,
    pub rescales_per_day: f64,
    /// Rescales in each judged day (a last partial day included).
    pub rescales_by_day: Vec<usize>,
    pub subtask_hours: f64,
    pub static_subtask_hours: f64,
    /// 1 − run / static peak-sized job (from the model's true capacities).
    pub saving: f64,
    pub oracle_subtask_hours: f64,
    pub ratio_to_oracle: f64,
    pub best_plan: BestPlan,
    pub ratio_to_best_plan: f64,
    pub max_lag_s: f64,
    pub p99_lag_s: f64,
    pub lag_threshold_s: f64,
    pub minutes_over_lag_threshold: usize,
    /// Minutes in which some vertex ran above the target utilization (by the model). The
    /// baselines never do; a run that does can cost less than them.
    pub minutes_above_target_utilization: usize,
    /// Share of the judged decisions that acted on a confident forecast.
    pub forecast_used_share: f64,
    /// Every applied rescale of the run (the first day's too), with its reasons.
    pub rescale_log: Vec<Rescale>,
}

/// Judges `run` from `from_hour` on against the model.
pub fn figures(run: &Run, truth: &JobTruth, from_hour: f64, lag_threshold_s: f64) -> Figures {
    let from_s = from_hour * 3600.0;
    let minutes: Vec<_> = run.minutes.iter().filter(|m| m.t_s > from_s).collect();
    let to_s = minutes.last().map_or(from_s, |m| m.t_s);
    let hours = minutes.len() as f64 / 60.0;
    let days = hours / 24.0;
    let judged: Vec<f64> = run
        .rescales
        .iter()
        .map(|r| r.t_s)
        .filter(|t| *t > from_s && *t <= to_s)
        .collect();
    let rescales = judged.len();
    let rescales_by_day = (0..days.ceil() as usize)
        .map(|d| {
            let start = from_s + d as f64 * 86_400.0;
            judged
                .iter()
                .filter(|t| **t > start && **t <= start + 86_400.0)
                .count()
        })
        .collect();
    let above_target = minutes
        .iter()
        .filter(|m| {
            let flows = truth.flows(&truth.input_rates(m.t_s));
            m.parallelism.iter().enumerate().any(|(v, p)| {
                flows[v] > run.target_utilization * truth.capacity(v, *p) * (1.0 + 1e-9)
            })
        })
        .count();
    let decided: Vec<bool> = minutes.iter().filter_map(|m| m.forecast_used).collect();
    let subtask_hours = minutes
        .iter()
        .map(|m| f64::from(m.parallelism.iter().sum::<u32>()))
        .sum::<f64>()
        / 60.0;
    let curve = NeedCurve::of(truth, from_s, to_s, run.target_utilization);
    let static_h = curve.static_subtask_hours();
    let oracle = curve.oracle_subtask_hours();
    let best = curve.best_plan(rescales, PLAN_BLOCK_MINUTES);
    let mut lags: Vec<f64> = minutes.iter().map(|m| m.lag_s).collect();
    lags.sort_by(f64::total_cmp);
    let p99 = lags
        .get(((lags.len() as f64) * 0.99).floor() as usize)
        .or(lags.last())
        .copied()
        .unwrap_or(0.0);
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
    Figures {
        setting: run.setting.label.clone(),
        keys: run.setting.keys.clone(),
        target_utilization: run.target_utilization,
        from_hour,
        days,
        rescales,
        rescales_per_day: if days > 0.0 {
            rescales as f64 / days
        } else {
            0.0
        },
        rescales_by_day,
        subtask_hours,
        static_subtask_hours: static_h,
        saving: 1.0 - ratio(subtask_hours, static_h),
        oracle_subtask_hours: oracle,
        ratio_to_oracle: ratio(subtask_hours, oracle),
        best_plan: best,
        ratio_to_best_plan: ratio(subtask_hours, best.subtask_hours),
        max_lag_s: lags.last().copied().unwrap_or(0.0),
        p99_lag_s: p99,
        lag_threshold_s,
        minutes_over_lag_threshold: minutes.iter().filter(|m| m.lag_s > lag_threshold_s).count(),
        minutes_above_target_utilization: above_target,
        forecast_used_share: ratio(
            decided.iter().filter(|u| **u).count() as f64,
            decided.len() as f64,
        ),
        rescale_log: run.rescales.clone(),
    }
}

/// The table, one column per setting: the rows are what the JSON file holds, rounded.
pub fn table(all: &[Figures]) -> String {
    let mut rows: Vec<(String, Vec<String>)> = vec![
        (
            "target utilization".into(),
            all.iter()
                .map(|f| format!("{}", f.target_utilization))
                .collect(),
        ),
        (
            "days judged".into(),
            all.iter().map(|f| format!("{:.2}", f.days)).collect(),
        ),
        (
            "rescales per day".into(),
            all.iter()
                .map(|f| format!("{:.2}", f.rescales_per_day))
                .collect(),
        ),
        (
            "rescales, day by day".into(),
            all.iter()
                .map(|f| {
                    f.rescales_by_day
                        .iter()
                        .map(usize::to_string)
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .collect(),
        ),
        (
            "subtask-hours".into(),
            all.iter()
                .map(|f| format!("{:.1}", f.subtask_hours))
                .collect(),
        ),
        (
            "static peak-sized, subtask-hours".into(),
            all.iter()
                .map(|f| format!("{:.1}", f.static_subtask_hours))
                .collect(),
        ),
        (
            "saving vs static peak-sized".into(),
            all.iter()
                .map(|f| format!("{:.1} %", 100.0 * f.saving))
                .collect(),
        ),
        (
            "oracle, subtask-hours".into(),
            all.iter()
                .map(|f| format!("{:.1}", f.oracle_subtask_hours))
                .collect(),
        ),
        (
            "ratio to the oracle".into(),
            all.iter()
                .map(|f| format!("{:.2}", f.ratio_to_oracle))
                .collect(),
        ),
        (
            "best plan with as many rescales, subtask-hours".into(),
            all.iter()
                .map(|f| format!("{:.1}", f.best_plan.subtask_hours))
                .collect(),
        ),
        (
            "ratio to the best plan".into(),
            all.iter()
                .map(|f| format!("{:.2}", f.ratio_to_best_plan))
                .collect(),
        ),
        (
            "max lag (s of input)".into(),
            all.iter().map(|f| format!("{:.1}", f.max_lag_s)).collect(),
        ),
        (
            "p99 lag (s of input)".into(),
            all.iter().map(|f| format!("{:.1}", f.p99_lag_s)).collect(),
        ),
        (
            "minutes over the lag threshold".into(),
            all.iter()
                .map(|f| {
                    format!(
                        "{} (> {} s)",
                        f.minutes_over_lag_threshold, f.lag_threshold_s
                    )
                })
                .collect(),
        ),
        (
            "minutes above the target utilization".into(),
            all.iter()
                .map(|f| f.minutes_above_target_utilization.to_string())
                .collect(),
        ),
        (
            "decisions on a confident forecast".into(),
            all.iter()
                .map(|f| format!("{:.0} %", 100.0 * f.forecast_used_share))
                .collect(),
        ),
    ];
    let mut out = format!(
        "| | {} |\n|---|{}\n",
        all.iter()
            .map(|f| f.setting.as_str())
            .collect::<Vec<_>>()
            .join(" | "),
        "---|".repeat(all.len())
    );
    for (name, cells) in rows.drain(..) {
        out.push_str(&format!("| {name} | {} |\n", cells.join(" | ")));
    }
    out
}
