//! From the collector's view of a job to the engine's input: the effective
//! `job.autoscaler.*` configuration (fleet defaults from `[autoscaler]`, then the job's own
//! settings, then the tracked restart time) and the captured window.

use std::collections::BTreeMap;

use crate::collector::JobSnapshot;
use crate::config::ConfigError;
use crate::engine::config::{EXTENSION_PREFIX, LEGACY_PREFIX};
use crate::engine::{parse_config, AutoscalerConfig, ConfigValue, EvaluateInput, ScalingState};
use crate::state_store::RestartObservation;
use crate::window::Sample;

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
) -> Result<AutoscalerConfig, crate::engine::ConfigError> {
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
    }
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
