//! From the collector's view of a job to the engine's input: the effective
//! `job.autoscaler.*` configuration (fleet defaults from `[autoscaler]`, then the job's own
//! settings, then the tracked restart time), the captured window, and the evidence our
//! extensions weigh: the job's observed rescale cost and its load forecast. Every poll also
//! feeds the job's load profile and notes when the job caught up after a restart.

use std::collections::BTreeMap;

use crate::collector::{JobCollector, JobSnapshot};
use crate::config::ConfigError;
use crate::state_store::{
    CatchUpObservation, JobRecord, RestartObservation, StateStore, StoreError,
    MAX_RESTART_OBSERVATIONS,
};
use flink_autoscale_core::engine::config::{EXTENSION_PREFIX, LEGACY_PREFIX};
use flink_autoscale_core::engine::{
    parse_config, AutoscalerConfig, ConfigValue, EvaluateInput, ObservedRescale, ScalingState,
};
use flink_autoscale_core::forecast::{LoadProfile, BUCKET_MS};
use flink_autoscale_core::samples::Sample;

use super::core::restart_time_ms;

const PREFIX: &str = "job.autoscaler.";

/// The `[autoscaler]` table as Flink keys: `metrics.window` becomes
/// `job.autoscaler.metrics.window`; fully prefixed keys and our `flink-autoscale.*`
/// extension keys stay as written. Validated here, so errors name the `[autoscaler]` key.
pub fn fleet_defaults(table: &toml::Table) -> Result<BTreeMap<String, ConfigValue>, ConfigError> {
    let mut map = BTreeMap::new();
    for (key, value) in table {
        let name = || format!("autoscaler.\"{key}\"");
        let value = match value {
            toml::Value::String(s) => ConfigValue::String(s.clone()),
            toml::Value::Integer(i) => ConfigValue::Number(*i as f64),
            toml::Value::Float(f) => ConfigValue::Number(*f),
            toml::Value::Boolean(b) => ConfigValue::Bool(*b),
            other => {
                return Err(ConfigError {
                    key: name(),
                    message: format!(
                        "expected a string, number or boolean, got {}",
                        other.type_str()
                    ),
                })
            }
        };
        let full = if [PREFIX, LEGACY_PREFIX, EXTENSION_PREFIX]
            .iter()
            .any(|p| key.starts_with(p))
        {
            key.clone()
        } else {
            format!("{PREFIX}{key}")
        };
        map.insert(full, value);
    }
    parse_config(&map).map_err(|e| ConfigError {
        key: format!(
            "autoscaler.\"{}\"",
            e.key.strip_prefix(PREFIX).unwrap_or(&e.key)
        ),
        message: e.message,
    })?;
    Ok(map)
}

/// The job's effective configuration.
pub fn job_config(
    fleet: &BTreeMap<String, ConfigValue>,
    job_overrides: &BTreeMap<String, String>,
    restarts: &[RestartObservation],
) -> Result<AutoscalerConfig, flink_autoscale_core::engine::ConfigError> {
    let mut merged = fleet.clone();
    for (k, v) in job_overrides {
        merged.insert(k.clone(), ConfigValue::String(v.clone()));
    }
    let mut config = parse_config(&merged)?;
    config.restart_time_ms = restart_time_ms(
        restarts,
        config.restart_time_tracking_enabled,
        config.restart_time_tracking_limit_ms,
        config.restart_time_ms,
    );
    Ok(config)
}

/// Both engine stages' input for the job's current window.
pub fn evaluate_input(
    now_ms: u64,
    config: AutoscalerConfig,
    snapshot: &JobSnapshot,
    samples: Vec<Sample>,
    state: ScalingState,
) -> EvaluateInput {
    EvaluateInput {
        now_ms,
        config,
        job_running_since_ms: snapshot
            .running_since_ms
            .and_then(|t| u64::try_from(t).ok())
            .unwrap_or(0),
        vertices: snapshot.topology.clone(),
        samples,
        state,
        observed_rescale: None,
        forecast: None,
    }
}

/// Every poll, whatever the loop does next: the sources' input rates go into the job's load
/// profile, and a catch-up after a restart is noted. Persists what changed.
pub async fn observe_poll(
    store: &StateStore,
    fleet: &BTreeMap<String, ConfigValue>,
    job: &JobCollector,
    record: &mut JobRecord,
    now_ms: u64,
) -> Result<(), StoreError> {
    let snapshot = job.snapshot();
    let samples: Vec<&Sample> = job.window().samples().collect();
    if observe_catch_up(record, snapshot, &samples, now_ms) {
        store.put(&snapshot.job_id, record.clone()).await?;
    }
    let half_life_ms = job_config(fleet, &snapshot.autoscaler_overrides, &record.restarts)
        .map(|c| c.extensions.prediction_half_life_ms)
        .unwrap_or(
            AutoscalerConfig::default()
                .extensions
                .prediction_half_life_ms,
        );
    store
        .update_profile(&snapshot.job_id, |p| {
            observe_load(p, snapshot, &samples, half_life_ms)
        })
        .await
}

/// A day of forecast, in the profile's 15-minute steps.
const FORECAST_STEPS: usize = (24 * 3_600_000 / BUCKET_MS) as usize;
/// A catch-up that has not ended after this long is recorded as this long.
const MAX_CATCH_UP_MS: u64 = 2 * 3_600_000;

/// Adds what our extensions weigh: the observed rescale cost and the load forecast.
pub fn with_evidence(
    mut input: EvaluateInput,
    record: &JobRecord,
    profile: &LoadProfile,
) -> EvaluateInput {
    input.observed_rescale = observed_rescale(record, &input.config);
    let ext = &input.config.extensions;
    if ext.prediction_enabled {
        input.forecast =
            Some(profile.forecast(input.now_ms, FORECAST_STEPS, ext.prediction_max_error));
    }
    input
}

/// The rescale cost seen on this job: the longest observed restart (upstream's tracking
/// rule: whole seconds, capped by `restart.time-tracking.limit`) and the longest observed
/// catch-up. `None` before the first rescale: the engine then assumes `restart.time`.
pub fn observed_rescale(record: &JobRecord, config: &AutoscalerConfig) -> Option<ObservedRescale> {
    let restart_ms = record
        .restarts
        .iter()
        .map(|r| r.duration_ms / 1000 * 1000)
        .max()?
        .min(config.restart_time_tracking_limit_ms);
    let catch_up_ms = record
        .catch_ups
        .iter()
        .map(|c| c.duration_ms)
        .max()
        .unwrap_or(0);
    Some(ObservedRescale {
        restart_ms,
        catch_up_ms,
    })
}

/// The sources' input rates (records/s by source id) over `(from_ms, to_ms]`.
struct InputRates<'a> {
    from_ms: u64,
    to_ms: u64,
    rates: Vec<(&'a str, f64)>,
}

/// The sources' input rate (records/s arriving in the external system: read plus backlog
/// growth) between the two newest samples of the current run.
fn newest_input_rates<'a>(
    snapshot: &'a JobSnapshot,
    samples: &[&Sample],
) -> Option<InputRates<'a>> {
    let since = snapshot
        .running_since_ms
        .and_then(|t| u64::try_from(t).ok())
        .unwrap_or(0);
    let [.., a, b] = samples else { return None };
    if a.time_ms < since || b.time_ms <= a.time_ms {
        return None;
    }
    let dt_s = (b.time_ms - a.time_ms) as f64 / 1000.0;
    let rates = snapshot
        .topology
        .iter()
        .filter(|v| v.is_source())
        .filter_map(|v| {
            let (sa, sb) = (a.vertices.get(&v.id)?, b.vertices.get(&v.id)?);
            let read = sb.num_records_in?.0 - sa.num_records_in?.0;
            let lag = |s: &flink_autoscale_core::samples::VertexSample| {
                s.pending_records.map_or(0.0, |l| l.0)
            };
            let rate = (read + lag(sb) - lag(sa)) / dt_s;
            (read >= 0.0 && rate.is_finite() && rate >= 0.0).then_some((v.id.as_str(), rate))
        })
        .collect();
    Some(InputRates {
        from_ms: a.time_ms,
        to_ms: b.time_ms,
        rates,
    })
}

/// Folds this poll's source input rates into the job's profile; true when a finished bucket
/// changed it (worth persisting).
pub fn observe_load(
    profile: &mut LoadProfile,
    snapshot: &JobSnapshot,
    samples: &[&Sample],
    half_life_ms: u64,
) -> bool {
    let mut changed = profile.retain_sources(|id| {
        snapshot
            .topology
            .iter()
            .any(|v| v.id == id && v.is_source())
    });
    if let Some(r) = newest_input_rates(snapshot, samples) {
        for (id, rate) in r.rates {
            changed |= profile.observe(id, r.from_ms, r.to_ms, rate, half_life_ms);
        }
    }
    changed
}

/// After an applied rescale, the job has caught up once its sources' backlog no longer
/// falls. Records how long that took, once per restart; true when the record changed.
pub fn observe_catch_up(
    record: &mut JobRecord,
    snapshot: &JobSnapshot,
    samples: &[&Sample],
    now_ms: u64,
) -> bool {
    let Some(restart) = record.restarts.last().copied() else {
        return false;
    };
    if record
        .catch_ups
        .last()
        .is_some_and(|c| c.restart_at_ms == restart.at_ms)
    {
        return false;
    }
    let running_at = restart.at_ms + restart.duration_ms;
    let backlog = |s: &Sample| -> f64 {
        snapshot
            .topology
            .iter()
            .filter(|v| v.is_source())
            .filter_map(|v| s.vertices.get(&v.id)?.pending_records.map(|l| l.0))
            .sum()
    };
    let recent: Vec<&&Sample> = samples.iter().filter(|s| s.time_ms >= running_at).collect();
    let caught_up = recent.windows(2).find_map(|w| {
        let (a, b) = (w[0], w[1]);
        let input = newest_input_rates(snapshot, &[a, b])
            .map(|r| r.rates.iter().map(|x| x.1).sum::<f64>())
            .unwrap_or(0.0);
        let dt_s = (b.time_ms - a.time_ms) as f64 / 1000.0;
        // Still catching up while the backlog falls by more than 1 % of the input.
        (backlog(b) - backlog(a) >= -0.01 * input * dt_s).then_some(b.time_ms)
    });
    let duration_ms = match caught_up {
        Some(t) => t - running_at,
        None if now_ms >= running_at + MAX_CATCH_UP_MS => MAX_CATCH_UP_MS,
        None => return false,
    };
    record.catch_ups.push(CatchUpObservation {
        restart_at_ms: restart.at_ms,
        duration_ms,
    });
    let excess = record
        .catch_ups
        .len()
        .saturating_sub(MAX_RESTART_OBSERVATIONS);
    record.catch_ups.drain(..excess);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_keys_get_the_prefix_and_errors_name_the_table_key() {
        let table: toml::Table = toml::from_str(
            "\"utilization.target\" = 0.5\n\"flink-autoscale.forward-groups.enabled\" = true",
        )
        .unwrap();
        let map = fleet_defaults(&table).unwrap();
        assert!(map.contains_key("job.autoscaler.utilization.target"));
        let bad: toml::Table = toml::from_str("\"utilization.target\" = \"lots\"").unwrap();
        let e = fleet_defaults(&bad).unwrap_err();
        assert_eq!(e.key, "autoscaler.\"utilization.target\"");
    }

    #[test]
    fn job_settings_win_and_tracked_restart_time_applies() {
        let table: toml::Table = toml::from_str(
            "\"utilization.target\" = 0.5\n\"restart.time-tracking.enabled\" = true",
        )
        .unwrap();
        let fleet = fleet_defaults(&table).unwrap();
        let job = [(
            "job.autoscaler.utilization.target".to_string(),
            "0.6".to_string(),
        )]
        .into();
        let restarts = [RestartObservation {
            at_ms: 0,
            duration_ms: 42_700,
        }];
        let c = job_config(&fleet, &job, &restarts).unwrap();
        assert_eq!(c.utilization_target, 0.6);
        assert_eq!(c.restart_time_ms, 42_000);
    }
}
