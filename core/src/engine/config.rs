//! The autoscaler configuration: every `job.autoscaler.*` key of the Flink Autoscaler with
//! its upstream default and validation range, the legacy `kubernetes.operator.job.autoscaler.*`
//! prefix, and the keys of our extensions (`flink-autoscale.*`).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Deserializer, Serialize};

use super::config_syntax::{parse_duration_ms, parse_list, parse_map, parse_memory_bytes};
use super::excluded_periods::ExcludedPeriod;

/// Prefix of the upstream keys.
pub const PREFIX: &str = "job.autoscaler.";
/// Legacy prefix (Kubernetes operator before 1.5); used only when the new key is absent.
pub const LEGACY_PREFIX: &str = "kubernetes.operator.job.autoscaler.";
/// Prefix of the keys of our extensions.
pub const EXTENSION_PREFIX: &str = "flink-autoscale.";

/// Our former fixed-share rule, replaced by the cost-aware scale-down; named in its error.
const REPLACED_MIN_SAVING: &str = "flink-autoscale.scale-down-caution.min-saving";

/// A configuration value as it appears in JSON: Flink keys take strings, numbers or booleans.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ConfigValue {
    Bool(bool),
    Number(f64),
    String(String),
}

impl ConfigValue {
    /// The value as Flink would read it from a configuration file.
    fn as_text(&self) -> String {
        match self {
            ConfigValue::Bool(b) => b.to_string(),
            ConfigValue::Number(n) => n.to_string(),
            ConfigValue::String(s) => s.trim().to_owned(),
        }
    }
}

impl From<&str> for ConfigValue {
    fn from(s: &str) -> Self {
        ConfigValue::String(s.to_owned())
    }
}

/// An invalid configuration: the key (as given) and what is wrong with its value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{key}: {message}")]
pub struct ConfigError {
    pub key: String,
    pub message: String,
}

/// How subtask busy times are aggregated (`metrics.busy-time.aggregator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum BusyTimeAggregator {
    Max,
    Min,
    Avg,
}

/// Alignment of a new parallelism to key groups or source partitions (section 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AlignmentMode {
    /// `scaling.parallelism-alignment.mode: BALANCED` (the default on `main`).
    Balanced,
    /// `scaling.parallelism-alignment.mode: EVENLY_SPREAD`.
    EvenlySpread,
    /// `scaling.parallelism-alignment.mode: OFF`.
    Off,
    /// Deprecated `scaling.key-group.partitions.adjust.mode: EVENLY_SPREAD` (blocking).
    LegacyEvenlySpread,
    /// Deprecated `scaling.key-group.partitions.adjust.mode: MAXIMIZE_UTILISATION`.
    LegacyMaximizeUtilisation,
}

/// Memory and resource keys (section 2.2). Validated and kept for the daemon; the engine
/// itself has no TaskManager metrics to apply them to.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryConfig {
    pub gc_pressure_threshold: f64,
    pub heap_usage_threshold: f64,
    pub tuning_enabled: bool,
    pub tuning_overhead: f64,
    pub tuning_maximize_managed_memory: bool,
    pub tuning_scale_down_compensation_enabled: bool,
    pub quota_cpu: Option<f64>,
    pub quota_memory_bytes: Option<u64>,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            gc_pressure_threshold: 1.0,
            heap_usage_threshold: 1.0,
            tuning_enabled: false,
            tuning_overhead: 0.2,
            tuning_maximize_managed_memory: false,
            tuning_scale_down_compensation_enabled: true,
            quota_cpu: None,
            quota_memory_bytes: None,
        }
    }
}

/// Our extensions; each is on by default.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtensionConfig {
    /// `flink-autoscale.forward-groups.enabled`: FORWARD-connected vertices get one parallelism.
    pub forward_groups_enabled: bool,
    /// `flink-autoscale.sink-limits.enabled`: no scale-up beyond what a limited sink absorbs.
    pub sink_limits_enabled: bool,
    /// `flink-autoscale.sink-limits.max-rates`: configured sink capacities (records/s by vertex id).
    pub sink_max_rates: BTreeMap<String, f64>,
    /// `flink-autoscale.sink-limits.detection.enabled`: detect sinks at capacity.
    pub sink_detection_enabled: bool,
    /// `flink-autoscale.sink-limits.detection.backpressure-threshold`: share of time (0..1) the
    /// upstream of a sink must be backpressured.
    pub sink_detection_backpressure_threshold: f64,
    /// `flink-autoscale.sink-limits.detection.busy-threshold`: a sink busy at most this share of
    /// time (0..1) while its upstream is backpressured is at capacity.
    pub sink_detection_busy_threshold: f64,
    /// `flink-autoscale.scale-down-caution.enabled`: scale down only on a full, complete window
    /// and never while the job processes a backlog.
    pub scale_down_caution_enabled: bool,
    /// `flink-autoscale.scale-down-caution.max-hold`: a scale-down alone (nothing scales up)
    /// is applied when its expected saving exceeds the rescale's cost; without a forecast, a
    /// held scale-down is applied at the latest after this long.
    pub scale_down_max_hold_ms: u64,
    /// `flink-autoscale.prediction.enabled`: scale ahead of the learned daily and weekly load.
    pub prediction_enabled: bool,
    /// `flink-autoscale.prediction.horizon`: never scale down below what the forecast needs
    /// this far ahead; a predictive scale-up sizes for it.
    pub prediction_horizon_ms: u64,
    /// `flink-autoscale.prediction.max-rescales-per-day`: the most rescales the plan over the
    /// confident forecast (its next 24 hours) may use; reactive scaling above the forecast
    /// is not limited by it.
    pub prediction_max_rescales_per_day: u32,
    /// `flink-autoscale.prediction.max-error`: the forecast is acted on only while its
    /// relative error over the last day and the last two hours stays at or below this.
    pub prediction_max_error: f64,
    /// `flink-autoscale.prediction.half-life`: an observation's weight in the profile halves
    /// this often, so a changed pattern is relearned within a few half-lives.
    pub prediction_half_life_ms: u64,
}

impl Default for ExtensionConfig {
    fn default() -> Self {
        ExtensionConfig {
            forward_groups_enabled: true,
            sink_limits_enabled: true,
            sink_max_rates: BTreeMap::new(),
            sink_detection_enabled: true,
            sink_detection_backpressure_threshold: 0.5,
            sink_detection_busy_threshold: 0.3,
            scale_down_caution_enabled: true,
            scale_down_max_hold_ms: 6 * 3_600_000,
            prediction_enabled: true,
            prediction_horizon_ms: 2 * 3_600_000,
            prediction_max_rescales_per_day: 4,
            prediction_max_error: 0.15,
            prediction_half_life_ms: 24 * 3_600_000,
        }
    }
}

/// The parsed and validated configuration. Durations are in milliseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct AutoscalerConfig {
    pub enabled: bool,
    pub scaling_enabled: bool,
    pub metrics_window_ms: u64,
    pub stabilization_interval_ms: u64,
    pub utilization_target: f64,
    pub utilization_boundary: f64,
    pub utilization_max: Option<f64>,
    pub utilization_min: Option<f64>,
    pub scale_down_interval_ms: u64,
    pub vertex_min_parallelism: u32,
    pub vertex_max_parallelism: u32,
    pub scale_down_max_factor: f64,
    pub scale_up_max_factor: f64,
    pub catch_up_duration_ms: u64,
    pub restart_time_ms: u64,
    pub restart_time_tracking_enabled: bool,
    pub restart_time_tracking_limit_ms: u64,
    pub backlog_lag_threshold_ms: u64,
    pub observed_tpr_lag_threshold_ms: u64,
    pub observed_tpr_switch_threshold: f64,
    pub observed_tpr_min_observations: u32,
    pub busy_time_aggregator: BusyTimeAggregator,
    pub effectiveness_detection_enabled: bool,
    pub effectiveness_threshold: f64,
    pub history_max_count: u32,
    pub history_max_age_ms: u64,
    pub vertex_exclude_ids: BTreeSet<String>,
    pub excluded_periods: Vec<ExcludedPeriod>,
    pub scaling_event_interval_ms: u64,
    pub rest_client_timeout_ms: u64,
    pub alignment_mode: AlignmentMode,
    pub observed_scalability_enabled: bool,
    pub observed_scalability_min_observations: u32,
    pub observed_scalability_coefficient_min: f64,
    pub memory: MemoryConfig,
    pub extensions: ExtensionConfig,
}

impl Default for AutoscalerConfig {
    fn default() -> Self {
        const MIN: u64 = 60_000;
        AutoscalerConfig {
            enabled: false,
            scaling_enabled: true,
            metrics_window_ms: 15 * MIN,
            stabilization_interval_ms: 5 * MIN,
            utilization_target: 0.7,
            utilization_boundary: 0.3,
            utilization_max: None,
            utilization_min: None,
            scale_down_interval_ms: 60 * MIN,
            vertex_min_parallelism: 1,
            vertex_max_parallelism: 200,
            scale_down_max_factor: 0.6,
            scale_up_max_factor: 100_000.0,
            catch_up_duration_ms: 30 * MIN,
            restart_time_ms: 5 * MIN,
            restart_time_tracking_enabled: false,
            restart_time_tracking_limit_ms: 15 * MIN,
            backlog_lag_threshold_ms: 5 * MIN,
            observed_tpr_lag_threshold_ms: 30_000,
            observed_tpr_switch_threshold: 0.15,
            observed_tpr_min_observations: 2,
            busy_time_aggregator: BusyTimeAggregator::Max,
            effectiveness_detection_enabled: false,
            effectiveness_threshold: 0.1,
            history_max_count: 3,
            history_max_age_ms: 24 * 60 * MIN,
            vertex_exclude_ids: BTreeSet::new(),
            excluded_periods: Vec::new(),
            scaling_event_interval_ms: 30 * MIN,
            rest_client_timeout_ms: 10_000,
            alignment_mode: AlignmentMode::Balanced,
            observed_scalability_enabled: false,
            observed_scalability_min_observations: 3,
            observed_scalability_coefficient_min: 0.5,
            memory: MemoryConfig::default(),
            extensions: ExtensionConfig::default(),
        }
    }
}

/// Whole seconds of a duration, truncated, as upstream converts durations in formulas.
pub fn whole_seconds(ms: u64) -> f64 {
    (ms / 1000) as f64
}

impl AutoscalerConfig {
    pub fn catch_up_duration_s(&self) -> f64 {
        whole_seconds(self.catch_up_duration_ms)
    }

    pub fn restart_time_s(&self) -> f64 {
        whole_seconds(self.restart_time_ms)
    }

    /// The utilization band edges `(min, max)` outside a backlog.
    pub fn utilization_band(&self) -> (f64, f64) {
        let max = self
            .utilization_max
            .unwrap_or(self.utilization_target + self.utilization_boundary);
        let min = self
            .utilization_min
            .unwrap_or(self.utilization_target - self.utilization_boundary);
        (min, max)
    }

    /// Whether nothing may be applied at `now_ms` because of `excluded.periods`.
    pub fn in_excluded_period(&self, now_ms: u64) -> bool {
        self.excluded_periods.iter().any(|p| p.contains(now_ms))
    }
}

/// Deserializes a `config` object of Flink keys straight into a validated configuration.
pub fn deserialize_config<'de, D: Deserializer<'de>>(d: D) -> Result<AutoscalerConfig, D::Error> {
    let map = BTreeMap::<String, ConfigValue>::deserialize(d)?;
    parse_config(&map).map_err(serde::de::Error::custom)
}

/// Parses and validates Flink configuration keys. Keys outside the autoscaler prefixes are
/// ignored (a full Flink configuration may be passed); unknown keys inside them are errors,
/// so a typo cannot pass silently.
pub fn parse_config(map: &BTreeMap<String, ConfigValue>) -> Result<AutoscalerConfig, ConfigError> {
    let mut r = Reader {
        map,
        used: BTreeSet::new(),
    };
    let d = AutoscalerConfig::default();
    let c = AutoscalerConfig {
        enabled: r.read("enabled", parse_bool)?.unwrap_or(d.enabled),
        scaling_enabled: r
            .read("scaling.enabled", parse_bool)?
            .unwrap_or(d.scaling_enabled),
        metrics_window_ms: r
            .read("metrics.window", parse_duration)?
            .unwrap_or(d.metrics_window_ms),
        stabilization_interval_ms: r
            .read("stabilization.interval", parse_duration)?
            .unwrap_or(d.stabilization_interval_ms),
        utilization_target: r
            .float_with_alias("utilization.target", "target.utilization")?
            .unwrap_or(d.utilization_target),
        utilization_boundary: r
            .read("target.utilization.boundary", parse_float)?
            .unwrap_or(d.utilization_boundary),
        utilization_max: r.read("utilization.max", parse_float)?,
        utilization_min: r.read("utilization.min", parse_float)?,
        scale_down_interval_ms: r
            .duration_with_alias("scale-down.interval", "scale-up.grace-period")?
            .unwrap_or(d.scale_down_interval_ms),
        vertex_min_parallelism: r
            .read("vertex.min-parallelism", parse_int)?
            .unwrap_or(d.vertex_min_parallelism),
        vertex_max_parallelism: r
            .read("vertex.max-parallelism", parse_int)?
            .unwrap_or(d.vertex_max_parallelism),
        scale_down_max_factor: r
            .read("scale-down.max-factor", parse_float)?
            .unwrap_or(d.scale_down_max_factor),
        scale_up_max_factor: r
            .read("scale-up.max-factor", parse_float)?
            .unwrap_or(d.scale_up_max_factor),
        catch_up_duration_ms: r
            .read("catch-up.duration", parse_duration)?
            .unwrap_or(d.catch_up_duration_ms),
        restart_time_ms: r
            .read("restart.time", parse_duration)?
            .unwrap_or(d.restart_time_ms),
        restart_time_tracking_enabled: r
            .read("restart.time-tracking.enabled", parse_bool)?
            .unwrap_or(d.restart_time_tracking_enabled),
        restart_time_tracking_limit_ms: r
            .read("restart.time-tracking.limit", parse_duration)?
            .unwrap_or(d.restart_time_tracking_limit_ms),
        backlog_lag_threshold_ms: r
            .read("backlog-processing.lag-threshold", parse_duration)?
            .unwrap_or(d.backlog_lag_threshold_ms),
        observed_tpr_lag_threshold_ms: r
            .read(
                "observed-true-processing-rate.lag-threshold",
                parse_duration,
            )?
            .unwrap_or(d.observed_tpr_lag_threshold_ms),
        observed_tpr_switch_threshold: r
            .read(
                "observed-true-processing-rate.switch-threshold",
                parse_float,
            )?
            .unwrap_or(d.observed_tpr_switch_threshold),
        observed_tpr_min_observations: r
            .read("observed-true-processing-rate.min-observations", parse_int)?
            .unwrap_or(d.observed_tpr_min_observations),
        busy_time_aggregator: r
            .busy_time_aggregator("metrics.busy-time.aggregator")?
            .unwrap_or(d.busy_time_aggregator),
        effectiveness_detection_enabled: r
            .read("scaling.effectiveness.detection.enabled", parse_bool)?
            .unwrap_or(d.effectiveness_detection_enabled),
        effectiveness_threshold: r
            .read("scaling.effectiveness.threshold", parse_float)?
            .unwrap_or(d.effectiveness_threshold),
        history_max_count: r
            .read("history.max.count", parse_int)?
            .unwrap_or(d.history_max_count),
        history_max_age_ms: r
            .read("history.max.age", parse_duration)?
            .unwrap_or(d.history_max_age_ms),
        vertex_exclude_ids: r
            .text("vertex.exclude.ids")
            .map(|(_, v)| parse_list(&v).into_iter().collect())
            .unwrap_or_default(),
        excluded_periods: r.excluded_periods("excluded.periods")?,
        scaling_event_interval_ms: r
            .read("scaling.event.interval", parse_duration)?
            .unwrap_or(d.scaling_event_interval_ms),
        rest_client_timeout_ms: r
            .read("flink.rest-client.timeout", parse_duration)?
            .unwrap_or(d.rest_client_timeout_ms),
        alignment_mode: r.alignment_mode()?,
        observed_scalability_enabled: r
            .read("observed-scalability.enabled", parse_bool)?
            .unwrap_or(d.observed_scalability_enabled),
        observed_scalability_min_observations: r
            .read("observed-scalability.min-observations", parse_int)?
            .unwrap_or(d.observed_scalability_min_observations),
        observed_scalability_coefficient_min: r
            .read("observed-scalability.coefficient-min", parse_float)?
            .unwrap_or(d.observed_scalability_coefficient_min),
        memory: MemoryConfig {
            gc_pressure_threshold: r
                .read("memory.gc-pressure.threshold", parse_float)?
                .unwrap_or(d.memory.gc_pressure_threshold),
            heap_usage_threshold: r
                .read("memory.heap-usage.threshold", parse_float)?
                .unwrap_or(d.memory.heap_usage_threshold),
            tuning_enabled: r
                .read("memory.tuning.enabled", parse_bool)?
                .unwrap_or(d.memory.tuning_enabled),
            tuning_overhead: r
                .read("memory.tuning.overhead", parse_float)?
                .unwrap_or(d.memory.tuning_overhead),
            tuning_maximize_managed_memory: r
                .read("memory.tuning.maximize-managed-memory", parse_bool)?
                .unwrap_or(d.memory.tuning_maximize_managed_memory),
            tuning_scale_down_compensation_enabled: r
                .read("memory.tuning.scale-down-compensation.enabled", parse_bool)?
                .unwrap_or(d.memory.tuning_scale_down_compensation_enabled),
            quota_cpu: r.read("quota.cpu", parse_float)?,
            quota_memory_bytes: r.read("quota.memory", parse_memory_size)?,
        },
        extensions: ExtensionConfig {
            forward_groups_enabled: r
                .ext_read("forward-groups.enabled", parse_bool)?
                .unwrap_or(d.extensions.forward_groups_enabled),
            sink_limits_enabled: r
                .ext_read("sink-limits.enabled", parse_bool)?
                .unwrap_or(d.extensions.sink_limits_enabled),
            sink_max_rates: r.ext_rate_map("sink-limits.max-rates")?,
            sink_detection_enabled: r
                .ext_read("sink-limits.detection.enabled", parse_bool)?
                .unwrap_or(d.extensions.sink_detection_enabled),
            sink_detection_backpressure_threshold: r
                .ext_read("sink-limits.detection.backpressure-threshold", parse_float)?
                .unwrap_or(d.extensions.sink_detection_backpressure_threshold),
            sink_detection_busy_threshold: r
                .ext_read("sink-limits.detection.busy-threshold", parse_float)?
                .unwrap_or(d.extensions.sink_detection_busy_threshold),
            scale_down_caution_enabled: r
                .ext_read("scale-down-caution.enabled", parse_bool)?
                .unwrap_or(d.extensions.scale_down_caution_enabled),
            scale_down_max_hold_ms: r
                .ext_read("scale-down-caution.max-hold", parse_duration)?
                .unwrap_or(d.extensions.scale_down_max_hold_ms),
            prediction_enabled: r
                .ext_read("prediction.enabled", parse_bool)?
                .unwrap_or(d.extensions.prediction_enabled),
            prediction_horizon_ms: r
                .ext_read("prediction.horizon", parse_duration)?
                .unwrap_or(d.extensions.prediction_horizon_ms),
            prediction_max_rescales_per_day: r
                .ext_read("prediction.max-rescales-per-day", parse_int)?
                .unwrap_or(d.extensions.prediction_max_rescales_per_day),
            prediction_max_error: r
                .ext_read("prediction.max-error", parse_float)?
                .unwrap_or(d.extensions.prediction_max_error),
            prediction_half_life_ms: r
                .ext_read("prediction.half-life", parse_duration)?
                .unwrap_or(d.extensions.prediction_half_life_ms),
        },
    };
    r.reject_unknown_keys()?;
    validate(&c, &r)?;
    Ok(c)
}

/// Upstream's validation ranges, plus contradictions between keys.
fn validate(c: &AutoscalerConfig, r: &Reader) -> Result<(), ConfigError> {
    let in_range =
        |suffix: &str, v: f64, lo: f64, hi: f64| check_range(r.key_name(suffix), v, lo, hi);
    let at_least = |suffix: &str, v: f64, lo: f64| check_at_least(r.key_name(suffix), v, lo);
    let target_key = if r.is_set("utilization.target") {
        "utilization.target"
    } else {
        "target.utilization"
    };
    in_range(target_key, c.utilization_target, 0.0, 1.0)?;
    at_least("target.utilization.boundary", c.utilization_boundary, 0.0)?;
    if let Some(max) = c.utilization_max {
        in_range("utilization.max", max, c.utilization_target, 1.0)?;
    }
    if let Some(min) = c.utilization_min {
        in_range("utilization.min", min, 0.0, c.utilization_target)?;
    }
    at_least("scale-down.max-factor", c.scale_down_max_factor, 0.0)?;
    at_least("scale-up.max-factor", c.scale_up_max_factor, 0.0)?;
    at_least(
        "observed-true-processing-rate.switch-threshold",
        c.observed_tpr_switch_threshold,
        0.0,
    )?;
    at_least(
        "vertex.min-parallelism",
        f64::from(c.vertex_min_parallelism),
        1.0,
    )?;
    at_least(
        "vertex.max-parallelism",
        f64::from(c.vertex_max_parallelism),
        1.0,
    )?;
    if c.vertex_min_parallelism > c.vertex_max_parallelism {
        return Err(ConfigError {
            key: r.key_name("vertex.min-parallelism"),
            message: format!(
                "{} is above {} ({}); the minimum parallelism cannot exceed the maximum",
                c.vertex_min_parallelism,
                r.key_name("vertex.max-parallelism"),
                c.vertex_max_parallelism
            ),
        });
    }
    if c.effectiveness_detection_enabled {
        in_range(
            "scaling.effectiveness.threshold",
            c.effectiveness_threshold,
            0.0,
            1.0,
        )?;
    }
    if c.observed_scalability_enabled {
        in_range(
            "observed-scalability.coefficient-min",
            c.observed_scalability_coefficient_min,
            0.01,
            1.0,
        )?;
    }
    at_least("memory.tuning.overhead", c.memory.tuning_overhead, 0.0)?;
    if let Some(cpu) = c.memory.quota_cpu {
        at_least("quota.cpu", cpu, 0.0)?;
    }
    let ext = &c.extensions;
    check_range(
        format!("{EXTENSION_PREFIX}sink-limits.detection.backpressure-threshold"),
        ext.sink_detection_backpressure_threshold,
        0.0,
        1.0,
    )?;
    check_range(
        format!("{EXTENSION_PREFIX}sink-limits.detection.busy-threshold"),
        ext.sink_detection_busy_threshold,
        0.0,
        1.0,
    )?;
    check_at_least(
        format!("{EXTENSION_PREFIX}prediction.max-error"),
        ext.prediction_max_error,
        0.0,
    )?;
    check_range(
        format!("{EXTENSION_PREFIX}prediction.max-rescales-per-day"),
        f64::from(ext.prediction_max_rescales_per_day),
        1.0,
        96.0,
    )?;
    if ext.prediction_half_life_ms == 0 {
        return Err(ConfigError {
            key: format!("{EXTENSION_PREFIX}prediction.half-life"),
            message: "must be longer than 0".into(),
        });
    }
    Ok(())
}

fn check_range(key: String, v: f64, lo: f64, hi: f64) -> Result<(), ConfigError> {
    if (lo..=hi).contains(&v) {
        Ok(())
    } else {
        Err(ConfigError {
            key,
            message: format!("must be between {lo} and {hi}, got {v}"),
        })
    }
}

fn check_at_least(key: String, v: f64, lo: f64) -> Result<(), ConfigError> {
    if v >= lo {
        Ok(())
    } else {
        Err(ConfigError {
            key,
            message: format!("must be at least {lo}, got {v}"),
        })
    }
}

/// Reads keys under the new prefix, falling back to the legacy prefix, and remembers which
/// keys it consumed.
struct Reader<'a> {
    map: &'a BTreeMap<String, ConfigValue>,
    used: BTreeSet<String>,
}

impl Reader<'_> {
    /// The full key that is set for `suffix` (new prefix first), or the new-prefix name.
    fn key_name(&self, suffix: &str) -> String {
        let new = format!("{PREFIX}{suffix}");
        let legacy = format!("{LEGACY_PREFIX}{suffix}");
        if !self.map.contains_key(&new) && self.map.contains_key(&legacy) {
            legacy
        } else {
            new
        }
    }

    fn is_set(&self, suffix: &str) -> bool {
        self.map.contains_key(&format!("{PREFIX}{suffix}"))
            || self.map.contains_key(&format!("{LEGACY_PREFIX}{suffix}"))
    }

    /// The raw text of `suffix` and the key it was found under.
    fn text(&mut self, suffix: &str) -> Option<(String, String)> {
        for prefix in [PREFIX, LEGACY_PREFIX] {
            let key = format!("{prefix}{suffix}");
            self.used.insert(key.clone());
        }
        let key = self.key_name(suffix);
        self.map.get(&key).map(|v| (key, v.as_text()))
    }

    fn ext_text(&mut self, suffix: &str) -> Option<(String, String)> {
        let key = format!("{EXTENSION_PREFIX}{suffix}");
        self.used.insert(key.clone());
        self.map.get(&key).map(|v| (key, v.as_text()))
    }

    /// Reads and parses `suffix` under the upstream prefixes.
    fn read<T>(
        &mut self,
        suffix: &str,
        parse: fn(&str, &str) -> Result<T, ConfigError>,
    ) -> Result<Option<T>, ConfigError> {
        self.text(suffix).map(|(k, v)| parse(&k, &v)).transpose()
    }

    /// Reads and parses `suffix` under our extension prefix.
    fn ext_read<T>(
        &mut self,
        suffix: &str,
        parse: fn(&str, &str) -> Result<T, ConfigError>,
    ) -> Result<Option<T>, ConfigError> {
        self.ext_text(suffix)
            .map(|(k, v)| parse(&k, &v))
            .transpose()
    }

    /// A key with a deprecated alias: the current key wins when both are set.
    fn float_with_alias(&mut self, suffix: &str, alias: &str) -> Result<Option<f64>, ConfigError> {
        let current = self.read(suffix, parse_float)?;
        let deprecated = self.read(alias, parse_float)?;
        Ok(current.or(deprecated))
    }

    fn duration_with_alias(
        &mut self,
        suffix: &str,
        alias: &str,
    ) -> Result<Option<u64>, ConfigError> {
        let current = self.read(suffix, parse_duration)?;
        let deprecated = self.read(alias, parse_duration)?;
        Ok(current.or(deprecated))
    }

    fn busy_time_aggregator(
        &mut self,
        suffix: &str,
    ) -> Result<Option<BusyTimeAggregator>, ConfigError> {
        self.text(suffix)
            .map(|(key, v)| match v.to_ascii_uppercase().as_str() {
                "MAX" => Ok(BusyTimeAggregator::Max),
                "MIN" => Ok(BusyTimeAggregator::Min),
                "AVG" => Ok(BusyTimeAggregator::Avg),
                _ => Err(ConfigError {
                    key,
                    message: format!("`{v}` is not one of MAX, MIN, AVG"),
                }),
            })
            .transpose()
    }

    /// The new alignment key wins when set; otherwise an explicitly set deprecated key keeps
    /// its legacy (blocking) semantics; otherwise BALANCED.
    fn alignment_mode(&mut self) -> Result<AlignmentMode, ConfigError> {
        let current = self.text("scaling.parallelism-alignment.mode");
        let legacy = self.text("scaling.key-group.partitions.adjust.mode");
        if let Some((key, v)) = current {
            return match v.to_ascii_uppercase().as_str() {
                "BALANCED" => Ok(AlignmentMode::Balanced),
                "EVENLY_SPREAD" => Ok(AlignmentMode::EvenlySpread),
                "OFF" => Ok(AlignmentMode::Off),
                _ => Err(ConfigError {
                    key,
                    message: format!(
                        "`{v}` is not one of BALANCED, EVENLY_SPREAD, OFF (custom modes are Java plugins and not supported)"
                    ),
                }),
            };
        }
        match legacy {
            None => Ok(AlignmentMode::Balanced),
            Some((key, v)) => match v.to_ascii_uppercase().as_str() {
                "EVENLY_SPREAD" => Ok(AlignmentMode::LegacyEvenlySpread),
                "MAXIMIZE_UTILISATION" => Ok(AlignmentMode::LegacyMaximizeUtilisation),
                _ => Err(ConfigError {
                    key,
                    message: format!("`{v}` is not one of EVENLY_SPREAD, MAXIMIZE_UTILISATION"),
                }),
            },
        }
    }

    fn excluded_periods(&mut self, suffix: &str) -> Result<Vec<ExcludedPeriod>, ConfigError> {
        let Some((key, v)) = self.text(suffix) else {
            return Ok(Vec::new());
        };
        parse_list(&v)
            .iter()
            .map(|item| {
                ExcludedPeriod::parse(item).map_err(|message| ConfigError {
                    key: key.clone(),
                    message,
                })
            })
            .collect()
    }

    fn ext_rate_map(&mut self, suffix: &str) -> Result<BTreeMap<String, f64>, ConfigError> {
        let Some((key, v)) = self.ext_text(suffix) else {
            return Ok(BTreeMap::new());
        };
        let pairs = parse_map(&v).map_err(|message| ConfigError {
            key: key.clone(),
            message,
        })?;
        pairs
            .into_iter()
            .map(|(id, rate)| {
                let rate = parse_float(&key, &rate)?;
                if rate > 0.0 {
                    Ok((id, rate))
                } else {
                    Err(ConfigError {
                        key: key.clone(),
                        message: format!("the rate of `{id}` must be above 0, got {rate}"),
                    })
                }
            })
            .collect()
    }

    fn reject_unknown_keys(&self) -> Result<(), ConfigError> {
        let unknown = self.map.keys().find(|k| {
            (k.starts_with(PREFIX)
                || k.starts_with(LEGACY_PREFIX)
                || k.starts_with(EXTENSION_PREFIX))
                && !self.used.contains(k.as_str())
        });
        match unknown {
            None => Ok(()),
            Some(key) if key.as_str() == REPLACED_MIN_SAVING => Err(ConfigError {
                key: key.clone(),
                message: "was replaced by the cost-aware scale-down (flink-autoscale.scale-down-caution.max-hold); remove it".into(),
            }),
            Some(key) => Err(ConfigError {
                key: key.clone(),
                message: "unknown key (see docs/decision-engine.md for the supported keys)".into(),
            }),
        }
    }
}

fn parse_duration(key: &str, v: &str) -> Result<u64, ConfigError> {
    parse_duration_ms(v).map_err(|message| ConfigError {
        key: key.to_owned(),
        message,
    })
}

fn parse_memory_size(key: &str, v: &str) -> Result<u64, ConfigError> {
    parse_memory_bytes(v).map_err(|message| ConfigError {
        key: key.to_owned(),
        message,
    })
}

fn parse_bool(key: &str, v: &str) -> Result<bool, ConfigError> {
    match v.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(ConfigError {
            key: key.to_owned(),
            message: format!("`{v}` is not a boolean (true or false)"),
        }),
    }
}

fn parse_float(key: &str, v: &str) -> Result<f64, ConfigError> {
    v.parse::<f64>()
        .ok()
        .filter(|f| f.is_finite())
        .ok_or_else(|| ConfigError {
            key: key.to_owned(),
            message: format!("`{v}` is not a finite number"),
        })
}

fn parse_int(key: &str, v: &str) -> Result<u32, ConfigError> {
    v.parse::<u32>().map_err(|_| ConfigError {
        key: key.to_owned(),
        message: format!("`{v}` is not a whole number between 0 and {}", u32::MAX),
    })
}
