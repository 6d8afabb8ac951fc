//! The agent's configuration: a TOML file, overridden by environment variables
//! (`FLINK_AUTOSCALE_AGENT__<SECTION>__<KEY>`), overridden by command-line flags. Everything
//! is validated before any port is bound, and every error names the offending key.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

pub use flink_autoscale_core::duration::{parse_duration, Dur};
use flink_autoscale_shared::config_layers::{self, LayerError, Renamed};
use flink_autoscale_shared::telemetry::LogFormat;
use serde::{Deserialize, Serialize};

use crate::flink::client::normalize_base_url;

/// Prefix of environment overrides; `__` separates the section from the key.
pub const ENV_PREFIX: &str = "FLINK_AUTOSCALE_AGENT__";

/// Keys renamed in this release, still read under their old name (with a warning) until the
/// next one.
pub const RENAMED: &[Renamed] = &[Renamed {
    old: "control.gates.min_interval_seconds",
    new: "control.gates.min_interval",
    seconds_to_duration: true,
}];

/// The most any duration of the agent's own may be (the `[autoscaler]` keys have their own
/// ranges).
const MAX_TIMEOUT: Dur = Dur::secs(300);
const MAX_INTERVAL: Dur = Dur::secs(3600);
const MAX_REFRESH: Dur = Dur::secs(86_400);
/// After SIGTERM, the drain must end well within the unit's `TimeoutStopSec=30s` (and
/// Kubernetes' default `terminationGracePeriodSeconds` of 30).
pub const MAX_SHUTDOWN_GRACE: Dur = Dur::secs(25);

/// The key of the metric-window length inside `[autoscaler]`, as in Flink's
/// `job.autoscaler.metrics.window`.
pub const WINDOW_KEY: &str = "metrics.window";
const DEFAULT_WINDOW: Duration = Duration::from_secs(15 * 60);

/// A configuration problem, naming the key (`section.key`) it is about.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {message}")]
pub struct ConfigError {
    pub key: String,
    pub message: String,
}

impl From<LayerError> for ConfigError {
    fn from(e: LayerError) -> Self {
        ConfigError {
            key: e.key,
            message: e.message,
        }
    }
}

impl ConfigError {
    pub(crate) fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError {
            key: key.into(),
            message: message.into(),
        }
    }
}

/// The whole configuration.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub jobmanager: JobManagerConfig,
    pub collector: CollectorConfig,
    pub server: ServerConfig,
    pub log: LogConfig,
    /// Fleet defaults for the decision engine, keyed like Flink's `job.autoscaler.*` options
    /// without the prefix (for example `"metrics.window" = "15 min"`). Per-job
    /// `job.autoscaler.*` settings in a job's Flink configuration override them.
    pub autoscaler: toml::Table,
    /// `[control]`: approval, actuation and the loop's state file.
    pub control: crate::control::ControlConfig,
    /// `[scheduling]`: how polls share the JobManager's request budget when some hang.
    pub scheduling: crate::daemon::config::SchedulingConfig,
}

/// `[jobmanager]`: where and how to reach the JobManager.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct JobManagerConfig {
    pub url: String,
    pub request_timeout: Dur,
    pub connect_timeout: Dur,
    pub max_concurrent_requests: usize,
    pub max_response_bytes: u64,
    pub max_request_line_bytes: usize,
    /// The JobManager's `metrics.fetcher.update-interval`; the agent never polls faster.
    pub fetcher_update_interval: Dur,
    /// `https://` JobManagers: PEM file of the CA(s) its certificate must chain to; without it
    /// the system's roots are trusted.
    pub ca_file: Option<std::path::PathBuf>,
    /// `https://` JobManagers with `security.ssl.rest.authentication-enabled`: the agent's
    /// certificate chain and private key (PEM).
    pub client_cert_file: Option<std::path::PathBuf>,
    pub client_key_file: Option<std::path::PathBuf>,
    /// Accept any certificate from an `https://` JobManager (logged loudly at every start).
    pub insecure_skip_verify: bool,
}

impl Default for JobManagerConfig {
    fn default() -> Self {
        JobManagerConfig {
            url: "http://127.0.0.1:8081".into(),
            request_timeout: Dur::secs(5),
            connect_timeout: Dur::secs(2),
            max_concurrent_requests: 4,
            max_response_bytes: 16 << 20,
            max_request_line_bytes: 4096,
            fetcher_update_interval: Dur::secs(10),
            ca_file: None,
            client_cert_file: None,
            client_key_file: None,
            insecure_skip_verify: false,
        }
    }
}

/// How the busy time of a vertex is aggregated over its subtasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BusyAggregator {
    #[default]
    Max,
    Avg,
    Min,
}

/// `[collector]`: the poll schedule and its limits.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CollectorConfig {
    /// 60 s: each poll makes the JobManager refresh every metric of every subtask, so the
    /// cadence sets its cost (BENCHMARKS.md, "Real Flink at 1,024 subtasks"); the operator
    /// reconciles every 60 s too.
    pub poll_interval: Dur,
    /// Deadline for one whole poll of one job.
    pub poll_deadline: Dur,
    /// How often sources are re-listed while a lazily registered metric (`pendingRecords`)
    /// is missing, and how often partition counts are refreshed.
    pub names_refresh_interval: Dur,
    /// How often checkpoint sizes and the job's `job.autoscaler.*` overrides are read.
    pub slow_refresh_interval: Dur,
    pub backoff_initial: Dur,
    pub backoff_max: Dur,
    pub busy_time_aggregator: BusyAggregator,
    /// Jobs with more subtasks than this are read one slice of subtasks per vertex per poll
    /// instead of whole, to bound the JobManager's work per poll.
    pub slice_above_subtasks: u32,
    /// How many full passes over a sliced job's subtasks fit in one metric window: the slice
    /// count is the window's polls divided by this.
    pub slice_passes_per_window: u32,
    /// Job ids to watch; empty means every job of the JobManager.
    pub jobs: Vec<String>,
}

impl Default for CollectorConfig {
    fn default() -> Self {
        CollectorConfig {
            poll_interval: Dur::secs(60),
            poll_deadline: Dur::secs(10),
            names_refresh_interval: Dur::secs(600),
            slow_refresh_interval: Dur::secs(600),
            backoff_initial: Dur::secs(1),
            backoff_max: Dur::secs(120),
            busy_time_aggregator: BusyAggregator::Max,
            slice_above_subtasks: 1000,
            slice_passes_per_window: 2,
            jobs: Vec::new(),
        }
    }
}

/// `[server]`: the agent's own HTTP endpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    pub listen: String,
    pub shutdown_grace: Dur,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: "127.0.0.1:9249".into(),
            shutdown_grace: Dur::secs(5),
        }
    }
}

/// `[log]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    pub format: LogFormat,
    pub level: String,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            format: LogFormat::Text,
            level: "info".into(),
        }
    }
}

/// Command-line overrides, applied after the file and the environment.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub listen: Option<String>,
    pub jobmanager: Option<String>,
    pub poll_interval: Option<String>,
}

impl Config {
    /// Reads `path` (if given), applies environment and flag overrides, and validates.
    pub fn load(path: Option<&Path>, overrides: &Overrides) -> Result<Config, ConfigError> {
        Self::load_with_warnings(path, overrides).map(|(config, _)| config)
    }

    /// [`Config::load`], with the deprecation warnings to show once logging is set up.
    pub fn load_with_warnings(
        path: Option<&Path>,
        overrides: &Overrides,
    ) -> Result<(Config, Vec<String>), ConfigError> {
        let table = match path {
            Some(p) => config_layers::read_toml_file(p)?,
            None => toml::Table::new(),
        };
        let env: BTreeMap<String, String> = config_layers::environment(ENV_PREFIX)?
            .into_iter()
            .collect();
        Self::from_table(table, &env, overrides)
    }

    /// The pure core of [`Config::load`]: file text, environment, flags.
    pub fn from_layers(
        toml_text: &str,
        env: &BTreeMap<String, String>,
        overrides: &Overrides,
    ) -> Result<Config, ConfigError> {
        let table = config_layers::parse_toml(toml_text)?;
        Self::from_table(table, env, overrides).map(|(config, _)| config)
    }

    fn from_table(
        mut table: toml::Table,
        env: &BTreeMap<String, String>,
        overrides: &Overrides,
    ) -> Result<(Config, Vec<String>), ConfigError> {
        let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        config_layers::apply_environment(&mut table, ENV_PREFIX, &env, RENAMED)?;
        let flags = [
            (["server", "listen"], &overrides.listen, "--listen"),
            (["jobmanager", "url"], &overrides.jobmanager, "--jobmanager"),
            (
                ["collector", "poll_interval"],
                &overrides.poll_interval,
                "--poll-interval",
            ),
        ];
        for (path, value, flag) in flags {
            if let Some(v) = value {
                let path: Vec<String> = path.iter().map(|s| s.to_string()).collect();
                config_layers::set(
                    &mut table,
                    &path,
                    toml::Value::String(v.clone()),
                    flag,
                    RENAMED,
                )?;
            }
        }
        let mut warnings = config_layers::apply_renames(&mut table, RENAMED)?;
        let config: Config = config_layers::deserialize(table.clone())?;
        warnings.extend(config_layers::integer_durations(&table, &config));
        config.validate()?;
        warnings.extend(config.control.warnings());
        Ok((config, warnings))
    }

    /// Every rule `run` relies on, so `check-config` passes exactly when `run` starts: ranges,
    /// cross-field rules, and the files the configuration names (TLS material, the
    /// coordinator's token file, the state file). Each failure names the key to fix.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let jm = &self.jobmanager;
        let c = &self.collector;
        normalize_base_url(&jm.url)
            .map_err(|e| ConfigError::new("jobmanager.url", e.to_string()))?;
        crate::flink::tls::client_config(jm)?;
        within(
            "jobmanager.request_timeout",
            jm.request_timeout,
            MAX_TIMEOUT,
        )?;
        within(
            "jobmanager.connect_timeout",
            jm.connect_timeout,
            MAX_TIMEOUT,
        )?;
        within(
            "jobmanager.fetcher_update_interval",
            jm.fetcher_update_interval,
            MAX_INTERVAL,
        )?;
        count(
            "jobmanager.max_concurrent_requests",
            jm.max_concurrent_requests as u64,
            1,
            64,
        )?;
        count(
            "jobmanager.max_response_bytes",
            jm.max_response_bytes,
            64 << 10,
            1 << 30,
        )?;
        count(
            "jobmanager.max_request_line_bytes",
            jm.max_request_line_bytes as u64,
            256,
            64 << 10,
        )?;
        within("collector.poll_interval", c.poll_interval, MAX_INTERVAL)?;
        if c.poll_interval < jm.fetcher_update_interval {
            return Err(ConfigError::new("collector.poll_interval", format!(
                "{} is shorter than jobmanager.fetcher_update_interval ({}); the JobManager refreshes metrics no faster, so faster polls only read stale data",
                c.poll_interval, jm.fetcher_update_interval)));
        }
        within("collector.poll_deadline", c.poll_deadline, MAX_INTERVAL)?;
        if c.poll_deadline > c.poll_interval {
            return Err(ConfigError::new(
                "collector.poll_deadline",
                format!(
                    "{} exceeds collector.poll_interval ({})",
                    c.poll_deadline, c.poll_interval
                ),
            ));
        }
        if c.poll_deadline < jm.request_timeout {
            return Err(ConfigError::new(
                "collector.poll_deadline",
                format!(
                    "{} is shorter than jobmanager.request_timeout ({})",
                    c.poll_deadline, jm.request_timeout
                ),
            ));
        }
        within(
            "collector.names_refresh_interval",
            c.names_refresh_interval,
            MAX_REFRESH,
        )?;
        if c.names_refresh_interval < c.poll_interval {
            return Err(ConfigError::new("collector.names_refresh_interval", format!("{} is shorter than collector.poll_interval ({}); names must not be resolved on every poll", c.names_refresh_interval, c.poll_interval)));
        }
        within(
            "collector.slow_refresh_interval",
            c.slow_refresh_interval,
            MAX_REFRESH,
        )?;
        if c.slow_refresh_interval < c.poll_interval {
            return Err(ConfigError::new(
                "collector.slow_refresh_interval",
                format!(
                    "{} is shorter than collector.poll_interval ({})",
                    c.slow_refresh_interval, c.poll_interval
                ),
            ));
        }
        within("collector.backoff_initial", c.backoff_initial, MAX_INTERVAL)?;
        within("collector.backoff_max", c.backoff_max, MAX_INTERVAL)?;
        if c.backoff_max < c.backoff_initial {
            return Err(ConfigError::new(
                "collector.backoff_max",
                format!(
                    "{} is shorter than collector.backoff_initial ({})",
                    c.backoff_max, c.backoff_initial
                ),
            ));
        }
        count(
            "collector.slice_passes_per_window",
            c.slice_passes_per_window.into(),
            1,
            1000,
        )?;
        for (i, id) in c.jobs.iter().enumerate() {
            if id.len() != 32 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(ConfigError::new(
                    format!("collector.jobs[{i}]"),
                    format!("{id:?} is not a 32-character hex job id"),
                ));
            }
        }
        self.listen_addr()?;
        within(
            "server.shutdown_grace",
            self.server.shutdown_grace,
            MAX_SHUTDOWN_GRACE,
        )?;
        let window = self.metrics_window()?;
        if window < c.poll_interval.0 {
            return Err(ConfigError::new(
                format!("autoscaler.\"{WINDOW_KEY}\""),
                format!(
                    "{} is shorter than collector.poll_interval ({})",
                    Dur(window),
                    c.poll_interval
                ),
            ));
        }
        if self.window_capacity() > 100_000 {
            return Err(ConfigError::new(
                format!("autoscaler.\"{WINDOW_KEY}\""),
                "holds more than 100000 polls; raise collector.poll_interval or shorten the window",
            ));
        }
        flink_autoscale_shared::telemetry::check_log_filter(&self.log.level)
            .map_err(|m| ConfigError::new("log.level", m))?;
        crate::daemon::config::validate(self)?;
        crate::control::validate(self)
    }

    /// The address to serve on.
    pub fn listen_addr(&self) -> Result<SocketAddr, ConfigError> {
        self.server.listen.parse().map_err(|e| {
            ConfigError::new(
                "server.listen",
                format!("{:?} is not HOST:PORT: {e}", self.server.listen),
            )
        })
    }

    /// The metric window length (`[autoscaler] "metrics.window"`, default 15 min), read by
    /// the engine's parser so the collector's window and the engine's agree: Flink's syntax,
    /// where a bare number (`900`) is milliseconds.
    pub fn metrics_window(&self) -> Result<Duration, ConfigError> {
        if !self.autoscaler.contains_key(WINDOW_KEY) {
            return Ok(DEFAULT_WINDOW);
        }
        let fleet = crate::control::engine_input::fleet_defaults(&self.autoscaler)?;
        let config = flink_autoscale_core::engine::parse_config(&fleet)
            .map_err(|e| ConfigError::new(format!("autoscaler.\"{WINDOW_KEY}\""), e.message))?;
        Ok(Duration::from_millis(config.metrics_window_ms))
    }

    /// How long a per-job gauge stays exported without being set: long enough to outlast
    /// backoff between failing polls, short enough that a job that is gone leaves `/metrics`.
    pub fn gauge_expiry(&self) -> Duration {
        let slowest = self
            .collector
            .poll_interval
            .0
            .max(self.collector.backoff_max.0);
        (slowest * 5).max(Duration::from_secs(600))
    }

    /// How many samples the per-job window holds: the window over the poll interval, plus one
    /// so that a full window spans the whole length.
    pub fn window_capacity(&self) -> usize {
        window_capacity(
            self.metrics_window().unwrap_or(DEFAULT_WINDOW),
            self.collector.poll_interval.0,
        )
    }
}

/// Samples a window of `window` holds at one sample per `poll_interval`, plus one so that a
/// full window spans the whole length.
pub fn window_capacity(window: Duration, poll_interval: Duration) -> usize {
    let interval = poll_interval.as_millis().max(1);
    (window.as_millis().div_ceil(interval) + 1).min(usize::MAX as u128) as usize
}

/// A duration in a Flink configuration value, read by the engine's one Flink-syntax parser:
/// a bare number is milliseconds, as Flink reads it.
pub fn parse_flink_duration(text: &str) -> Result<Duration, String> {
    flink_autoscale_core::engine::parse_duration_ms(text.trim()).map(Duration::from_millis)
}

/// A duration above zero and at most `max`.
pub(crate) fn within(key: &str, d: Dur, max: Dur) -> Result<(), ConfigError> {
    if d.0.is_zero() {
        Err(ConfigError::new(key, "must be greater than zero"))
    } else if d > max {
        Err(ConfigError::new(
            key,
            format!("{d} is longer than the most allowed, {max}"),
        ))
    } else {
        Ok(())
    }
}

/// A number within `min..=max`.
pub(crate) fn count(key: &str, value: u64, min: u64, max: u64) -> Result<(), ConfigError> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(ConfigError::new(
            key,
            format!("must be between {min} and {max}, got {value}"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Config, ConfigError> {
        Config::from_layers(text, &BTreeMap::new(), &Overrides::default())
    }

    #[test]
    fn defaults_are_valid() {
        let c = load("").unwrap();
        assert_eq!(c.collector.poll_interval, Dur::secs(60));
        assert_eq!(c.window_capacity(), 16);
    }

    #[test]
    fn metrics_window_is_read_as_the_engine_reads_it() {
        // A TOML integer is a Flink duration without a unit: milliseconds.
        for (text, want) in [
            ("600000", Duration::from_secs(600)),
            ("\"10 min\"", Duration::from_secs(600)),
            ("\"600s\"", Duration::from_secs(600)),
        ] {
            let c = load(&format!("[autoscaler]\n\"metrics.window\" = {text}")).unwrap();
            assert_eq!(c.metrics_window().unwrap(), want, "{text}");
            let fleet = crate::control::engine_input::fleet_defaults(&c.autoscaler).unwrap();
            let engine = flink_autoscale_core::engine::parse_config(&fleet).unwrap();
            assert_eq!(engine.metrics_window_ms, want.as_millis() as u64, "{text}");
            assert_eq!(c.window_capacity(), 11, "{text}");
        }
    }

    #[test]
    fn errors_name_the_key() {
        let e = load("[collector]\npoll_interval = \"5s\"").unwrap_err();
        assert_eq!(e.key, "collector.poll_interval");
        let e = load("[jobmanager]\nmax_concurrent_requests = \"x\"").unwrap_err();
        assert_eq!(e.key, "jobmanager.max_concurrent_requests");
        let e = load("[jobmanager]\nbogus = 1").unwrap_err();
        assert_eq!(e.key, "jobmanager.bogus", "{e}");
        assert!(e.message.contains("bogus"), "{e}");
        let e = load("[server]\nlisten = \"nope\"").unwrap_err();
        assert_eq!(e.key, "server.listen");
        let e = load("[autoscaler]\n\"metrics.window\" = \"1s\"").unwrap_err();
        assert!(e.key.starts_with("autoscaler."), "{e}");
        // Flink's meaning of a bare number: 900 is 900 ms, shorter than the poll interval.
        let e = load("[autoscaler]\n\"metrics.window\" = 900").unwrap_err();
        assert!(e.key.starts_with("autoscaler."), "{e}");
        assert!(e.message.contains("shorter than"), "{e}");
        let e = load("[collector]\npoll_interval = \"15 fortnights\"").unwrap_err();
        assert_eq!(e.key, "collector.poll_interval");
        let e = load("[jobmanager]\nurl = \"ftp://jm\"").unwrap_err();
        assert_eq!(e.key, "jobmanager.url");
        let e = load("[jobmanager]\nurl = \"http://jm\"\nca_file = \"/ca.pem\"").unwrap_err();
        assert_eq!(e.key, "jobmanager.ca_file");
        let e =
            load("[jobmanager]\nurl = \"https://jm\"\nca_file = \"/no/such/ca.pem\"").unwrap_err();
        assert_eq!(e.key, "jobmanager.ca_file");
        let e =
            load("[jobmanager]\nurl = \"https://jm\"\nclient_cert_file = \"/c.pem\"").unwrap_err();
        assert_eq!(e.key, "jobmanager.client_key_file");
        let e = load("[collector]\njobs = [\"xyz\"]").unwrap_err();
        assert_eq!(e.key, "collector.jobs[0]");
    }

    #[test]
    fn every_key_has_a_range() {
        let cases = [
            (
                "[server]\nshutdown_grace = \"99999999999s\"",
                "server.shutdown_grace",
            ),
            (
                "[server]\nshutdown_grace = \"1min\"",
                "server.shutdown_grace",
            ),
            ("[server]\nshutdown_grace = \"0s\"", "server.shutdown_grace"),
            (
                "[jobmanager]\nrequest_timeout = \"1h\"",
                "jobmanager.request_timeout",
            ),
            (
                "[jobmanager]\nmax_response_bytes = 99999999999999",
                "jobmanager.max_response_bytes",
            ),
            (
                "[jobmanager]\nmax_request_line_bytes = 100",
                "jobmanager.max_request_line_bytes",
            ),
            (
                "[collector]\npoll_interval = \"2h\"",
                "collector.poll_interval",
            ),
            ("[collector]\nbackoff_max = \"1d\"", "collector.backoff_max"),
            (
                "[collector]\nslice_passes_per_window = 0",
                "collector.slice_passes_per_window",
            ),
            ("[log]\nlevel = \"nonsense==\"", "log.level"),
            (
                "[control.gates]\nmin_interval = \"90d\"",
                "control.gates.min_interval",
            ),
        ];
        for (text, key) in cases {
            let e = load(text).unwrap_err();
            assert_eq!(e.key, key, "{text}: {e}");
        }
    }

    #[test]
    fn old_spellings_still_read_with_a_warning() {
        let (c, warnings) = Config::from_table(
            config_layers::parse_toml(
                "[collector]\npoll_interval = 20\n[control.gates]\nmin_interval_seconds = 60\n",
            )
            .unwrap(),
            &BTreeMap::new(),
            &Overrides::default(),
        )
        .unwrap();
        assert_eq!(c.collector.poll_interval, Dur::secs(20));
        assert_eq!(c.control.gates.min_interval, Dur::secs(60));
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("control.gates.min_interval = \"1min\"")
                    || w.contains("control.gates.min_interval = \"60s\"")),
            "{warnings:?}"
        );
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("collector.poll_interval = \"20s\"")),
            "{warnings:?}"
        );
        // The new spelling from the environment replaces the old one in the file.
        let env = BTreeMap::from([(
            format!("{ENV_PREFIX}CONTROL__GATES__MIN_INTERVAL"),
            "5min".to_string(),
        )]);
        let c = Config::from_layers(
            "[control.gates]\nmin_interval_seconds = 60\n",
            &env,
            &Overrides::default(),
        )
        .unwrap();
        assert_eq!(c.control.gates.min_interval, Dur::secs(300));
    }

    #[test]
    fn env_then_flags_override_the_file() {
        let env = BTreeMap::from([
            (
                format!("{ENV_PREFIX}JOBMANAGER__MAX_CONCURRENT_REQUESTS"),
                "2".to_string(),
            ),
            (
                format!("{ENV_PREFIX}JOBMANAGER__URL"),
                "http://env:1".to_string(),
            ),
        ]);
        let flags = Overrides {
            jobmanager: Some("http://flag:2".into()),
            ..Default::default()
        };
        let c = Config::from_layers("[jobmanager]\nurl = \"http://file:0\"", &env, &flags).unwrap();
        assert_eq!(c.jobmanager.max_concurrent_requests, 2);
        assert_eq!(c.jobmanager.url, "http://flag:2");
        let bad = BTreeMap::from([(
            format!("{ENV_PREFIX}COLLECTOR__POLL_INTERVAL"),
            "1s".to_string(),
        )]);
        assert_eq!(
            Config::from_layers("", &bad, &Overrides::default())
                .unwrap_err()
                .key,
            "collector.poll_interval"
        );
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("15 min").unwrap(), Duration::from_secs(900));
        assert_eq!(parse_duration("20").unwrap(), Duration::from_secs(20));
        assert!(parse_duration("x").is_err());
        assert!(parse_duration("5 weeks").is_err());
        assert_eq!(
            parse_flink_duration("10000").unwrap(),
            Duration::from_secs(10)
        );
        assert_eq!(
            parse_flink_duration("5 min").unwrap(),
            Duration::from_secs(300)
        );
        assert_eq!(
            window_capacity(Duration::from_secs(60), Duration::from_secs(15)),
            5
        );
    }
}
