//! One setting, run: the scenario's model on a manual clock with the real agent in lockstep
//! (adaptive-scheduler realizer, local gates, its state in a temporary directory), recorded
//! minute by minute.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use flink_autoscale_agent::control::LoopEvent;
use flink_autoscale_core::engine::{parse_config, ConfigValue, Decision, PredictionStatus};
use flink_autoscale_core::protocol::OutcomeStatus;
use flink_autoscale_simulator::Scenario;
use serde::Serialize;

use crate::harness::{local_control, Harness};

/// A named set of autoscaler keys (`job.autoscaler.*` or `flink-autoscale.*`, full names).
#[derive(Debug, Clone, Serialize)]
pub struct Setting {
    pub label: String,
    pub keys: Vec<(String, String)>,
}

/// The deprecated and current names of one upstream key, so a setting replaces both.
const ALIASES: &[&[&str]] = &[
    &[
        "job.autoscaler.utilization.target",
        "job.autoscaler.target.utilization",
    ],
    &[
        "job.autoscaler.scale-down.interval",
        "job.autoscaler.scale-up.grace-period",
    ],
];

/// `utilization.target` becomes `job.autoscaler.utilization.target`; our keys stay.
pub fn full_key(key: &str) -> String {
    let key = key.trim();
    if key.starts_with("job.autoscaler.") || key.starts_with("flink-autoscale.") {
        key.to_string()
    } else {
        format!("job.autoscaler.{key}")
    }
}

impl Setting {
    /// Our extensions' keys go to the agent's `[autoscaler]` table: the agent reads only
    /// `job.autoscaler.*` keys from a job's configuration.
    pub fn fleet_lines(&self) -> String {
        self.keys
            .iter()
            .filter(|(k, _)| !k.starts_with("job.autoscaler."))
            .map(|(k, v)| format!("{k:?} = {:?}\n", v))
            .collect()
    }

    /// The scenario with this setting's `job.autoscaler.*` keys in every job's configuration
    /// (so they win over the scenario's own, as a job's settings win in the agent).
    pub fn apply(&self, scenario: &Scenario) -> Scenario {
        let mut s = scenario.clone();
        for (key, value) in self
            .keys
            .iter()
            .filter(|(k, _)| k.starts_with("job.autoscaler."))
        {
            let aliases: Vec<&str> = ALIASES
                .iter()
                .find(|names| names.contains(&key.as_str()))
                .map(|names| names.iter().copied().filter(|n| n != key).collect())
                .unwrap_or_default();
            s.set_job_config(key, value, &aliases);
        }
        s
    }
}

/// One recorded minute.
#[derive(Debug, Clone, Serialize)]
pub struct Minute {
    /// Seconds since the start.
    pub t_s: f64,
    /// Records/s arriving at the sources (summed).
    pub input_rate: f64,
    /// Per vertex, topological order.
    pub parallelism: Vec<u32>,
    /// Source backlog (summed), in seconds of input at the current rate.
    pub lag_s: f64,
    /// Whether the latest decision in this minute acted on the forecast (None: no decision).
    pub forecast_used: Option<bool>,
}

/// One applied rescale and the decision behind it.
#[derive(Debug, Clone, Serialize)]
pub struct Rescale {
    /// Seconds since the start, when the outcome was known.
    pub t_s: f64,
    /// Per vertex (topological order), before and after.
    pub from: Vec<u32>,
    pub to: Vec<u32>,
    pub prediction: PredictionStatus,
    /// The changed vertices' reasons.
    pub reasons: Vec<String>,
}

/// A finished run.
#[derive(Debug, Clone)]
pub struct Run {
    pub setting: Setting,
    pub job_id: String,
    pub vertex_names: Vec<String>,
    pub target_utilization: f64,
    pub minutes: Vec<Minute>,
    pub rescales: Vec<Rescale>,
}

/// Runs `scenario` (its first job) with `setting` for `hours` of simulated time, polling
/// every `poll`; `progress` gets the share done now and then.
pub async fn run(
    scenario: &Scenario,
    setting: &Setting,
    hours: f64,
    poll: Duration,
    mut progress: impl FnMut(f64),
) -> anyhow::Result<Run> {
    let scenario = setting.apply(scenario);
    let job_id = scenario
        .job_ids()
        .first()
        .cloned()
        .context("the scenario has no job")?;
    let (vertex_ids, vertex_names, target_utilization) = {
        let truth = scenario.truth(&job_id).context("the scenario's job")?;
        let map: BTreeMap<String, ConfigValue> = truth
            .config()
            .iter()
            .map(|(k, v)| (k.clone(), ConfigValue::String(v.clone())))
            .collect();
        let config =
            parse_config(&map).map_err(|e| anyhow::anyhow!("setting {}: {e}", setting.label))?;
        (
            truth.vertex_ids(),
            truth.vertex_names(),
            config.utilization_target,
        )
    };
    let dir = tempfile::tempdir().context("a temporary directory for the agent's state")?;
    let extra = format!(
        "[autoscaler]\nenabled = true\n{}{}",
        setting.fleet_lines(),
        local_control(dir.path())
    );
    let mut h = Harness::start_scenario(scenario, poll, &extra).await?;
    h.only_jobs = Some([job_id.clone()].into());
    let start = h.now_ms;
    let end = start + (hours * 3.6e6) as u64;
    let mut minutes = Vec::new();
    let mut rescales = Vec::new();
    let mut next_minute = start;
    let mut last_report = start;
    // The latest decision that would scale, until its outcome comes.
    let mut pending: Option<Decision> = None;
    let mut forecast_used = None;
    while h.now_ms < end {
        h.tick().await;
        for (t, event) in h.log.drain(..) {
            match event {
                LoopEvent::Evaluated { decision, .. } => {
                    forecast_used = Some(decision.prediction.status == PredictionStatus::Used);
                    if decision.scale {
                        pending = Some(decision);
                    }
                }
                LoopEvent::Outcome { outcome, .. } if outcome.status == OutcomeStatus::Applied => {
                    if let Some(d) = pending.take() {
                        rescales.push(rescale(&d, &vertex_ids, (t - start) as f64 / 1000.0));
                    }
                }
                _ => {}
            }
        }
        // Only the records above are needed; a week of ticks would otherwise pile up.
        h.ticks.clear();
        if h.now_ms >= next_minute {
            let model = h.control.model(&job_id);
            let input_rate: f64 = model.iter().filter_map(|v| v.input_rate).sum();
            let lag: f64 = model.iter().map(|v| v.lag).sum();
            let by_id: BTreeMap<&str, u32> = model
                .iter()
                .map(|v| (v.id.as_str(), v.parallelism))
                .collect();
            minutes.push(Minute {
                t_s: (h.now_ms - start) as f64 / 1000.0,
                input_rate,
                parallelism: vertex_ids
                    .iter()
                    .map(|id| by_id.get(id.as_str()).copied().unwrap_or(0))
                    .collect(),
                lag_s: if input_rate > 0.0 {
                    lag / input_rate
                } else {
                    0.0
                },
                forecast_used: forecast_used.take(),
            });
            next_minute += 60_000;
        }
        if h.now_ms - last_report >= 3_600_000 {
            last_report = h.now_ms;
            progress((h.now_ms - start) as f64 / (end - start) as f64);
        }
    }
    h.shutdown().await;
    Ok(Run {
        setting: setting.clone(),
        job_id,
        vertex_names,
        target_utilization,
        minutes,
        rescales,
    })
}

/// The applied `decision`, vertices in `order`.
fn rescale(decision: &Decision, order: &[String], t_s: f64) -> Rescale {
    let vertex = |id: &String| decision.vertices.iter().find(|v| &v.id == id);
    Rescale {
        t_s,
        from: order
            .iter()
            .map(|id| vertex(id).map_or(0, |v| v.current))
            .collect(),
        to: order
            .iter()
            .map(|id| decision.parallelism.get(id).copied().unwrap_or(0))
            .collect(),
        prediction: decision.prediction.status,
        reasons: decision
            .vertices
            .iter()
            .filter(|v| decision.parallelism.get(&v.id) != Some(&v.current))
            .map(|v| v.reason.clone())
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_keys_go_to_the_job_and_extension_keys_to_the_agent() {
        let setting = Setting {
            label: "x".into(),
            keys: vec![
                (full_key("utilization.target"), "0.45".into()),
                (
                    full_key("flink-autoscale.prediction.enabled"),
                    "false".into(),
                ),
            ],
        };
        assert_eq!(
            setting.fleet_lines(),
            "\"flink-autoscale.prediction.enabled\" = \"false\"\n"
        );
        let scenario = Scenario::from_toml_str(
            r#"
[[job]]
name = "j"
config = { "job.autoscaler.target.utilization" = "0.7" }
[[job.vertex]]
name = "Source: S"
parallelism = 1
capacity = 100
source = { rate = { kind = "constant", value = 10 } }
"#,
        )
        .unwrap();
        let applied = setting.apply(&scenario);
        let truth = applied.truth("j").unwrap();
        // The deprecated alias is replaced, not left to compete.
        assert_eq!(
            truth.config(),
            [(
                "job.autoscaler.utilization.target".to_string(),
                "0.45".to_string()
            )]
        );
    }
}
