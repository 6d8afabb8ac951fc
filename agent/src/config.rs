//! The agent's configuration: a TOML file, overridden by environment variables
//! (`FLINK_AUTOSCALE_AGENT__<SECTION>__<KEY>`), overridden by command-line flags. Everything
//! is validated before any port is bound, and every error names the offending key.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use flink_autoscale_shared::telemetry::LogFormat;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::flink::client::normalize_base_url;

/// Prefix of environment overrides; `__` separates the section from the key.
pub const ENV_PREFIX: &str = "FLINK_AUTOSCALE_AGENT__";

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

impl ConfigError {
    fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
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
            poll_interval: Dur::secs(15),
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

/// A duration written as `"500ms"`, `"15s"`, `"10min"`, `"2h"` or a whole number of seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Dur(pub Duration);

impl Dur {
    pub const fn secs(s: u64) -> Self {
        Dur(Duration::from_secs(s))
    }
}

impl std::fmt::Display for Dur {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let ms = self.0.as_millis();
        if !ms.is_multiple_of(1000) {
            write!(f, "{ms}ms")
        } else {
            write!(f, "{}s", ms / 1000)
        }
    }
}

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Secs(u64),
            Text(String),
        }
        match Raw::deserialize(d).map_err(|_| {
            serde::de::Error::custom(
                "expected a duration such as \"15s\" or a whole number of seconds",
            )
        })? {
            Raw::Secs(s) => Ok(Dur::secs(s)),
            Raw::Text(t) => parse_duration(&t)
                .map(Dur)
                .map_err(serde::de::Error::custom),
        }
    }
}

/// Parses an agent duration: Flink's syntax (`500ms`, `15 s`, `10min`, `2h`, `1d`), except
/// that a bare number means seconds here.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return t
            .parse::<u64>()
            .map(Duration::from_secs)
            .map_err(|_| format!("{text:?} is too long a duration"));
    }
    crate::engine::parse_duration_ms(t).map(Duration::from_millis)
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
        let text = match path {
            Some(p) => std::fs::read_to_string(p).map_err(|e| {
                ConfigError::new("config", format!("cannot read {}: {e}", p.display()))
            })?,
            None => String::new(),
        };
        let env: BTreeMap<String, String> = std::env::vars()
            .filter(|(k, _)| k.starts_with(ENV_PREFIX))
            .collect();
        Self::from_layers(&text, &env, overrides)
    }

    /// The pure core of [`Config::load`]: file text, environment, flags.
    pub fn from_layers(
        toml_text: &str,
        env: &BTreeMap<String, String>,
        overrides: &Overrides,
    ) -> Result<Config, ConfigError> {
        let mut table: toml::Table = toml_text.parse().map_err(|e: toml::de::Error| {
            ConfigError::new("config", format!("invalid TOML: {}", e.message().trim()))
        })?;
        for (var, raw) in env {
            let path: Vec<String> = var[ENV_PREFIX.len()..]
                .split("__")
                .map(|p| p.to_ascii_lowercase())
                .collect();
            set_path(&mut table, &path, env_value(raw), var)?;
        }
        let flags = [
            (["server", "listen"], &overrides.listen),
            (["jobmanager", "url"], &overrides.jobmanager),
            (["collector", "poll_interval"], &overrides.poll_interval),
        ];
        for (path, value) in flags {
            if let Some(v) = value {
                let path: Vec<String> = path.iter().map(|s| s.to_string()).collect();
                set_path(&mut table, &path, toml::Value::String(v.clone()), "flag")?;
            }
        }
        let config: Config =
            serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|e| {
                let key = e.path().to_string();
                ConfigError::new(
                    if key == "." { "config".into() } else { key },
                    e.into_inner().to_string(),
                )
            })?;
        config.validate()?;
        Ok(config)
    }

    /// Cross-field rules; each failure names the key to fix.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let jm = &self.jobmanager;
        let c = &self.collector;
        normalize_base_url(&jm.url)
            .map_err(|e| ConfigError::new("jobmanager.url", e.to_string()))?;
        positive("jobmanager.request_timeout", jm.request_timeout)?;
        positive("jobmanager.connect_timeout", jm.connect_timeout)?;
        positive(
            "jobmanager.fetcher_update_interval",
            jm.fetcher_update_interval,
        )?;
        if !(1..=64).contains(&jm.max_concurrent_requests) {
            return Err(ConfigError::new(
                "jobmanager.max_concurrent_requests",
                format!("must be 1..=64, got {}", jm.max_concurrent_requests),
            ));
        }
        if jm.max_response_bytes < 64 << 10 {
            return Err(ConfigError::new(
                "jobmanager.max_response_bytes",
                format!("must be at least 65536, got {}", jm.max_response_bytes),
            ));
        }
        if jm.max_request_line_bytes < 256 {
            return Err(ConfigError::new(
                "jobmanager.max_request_line_bytes",
                format!("must be at least 256, got {}", jm.max_request_line_bytes),
            ));
        }
        if c.poll_interval < jm.fetcher_update_interval {
            return Err(ConfigError::new("collector.poll_interval", format!(
                "{} is shorter than jobmanager.fetcher_update_interval ({}); the JobManager refreshes metrics no faster, so faster polls only read stale data",
                c.poll_interval, jm.fetcher_update_interval)));
        }
        positive("collector.poll_deadline", c.poll_deadline)?;
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
        if c.names_refresh_interval < c.poll_interval {
            return Err(ConfigError::new("collector.names_refresh_interval", format!("{} is shorter than collector.poll_interval ({}); names must not be resolved on every poll", c.names_refresh_interval, c.poll_interval)));
        }
        if c.slow_refresh_interval < c.poll_interval {
            return Err(ConfigError::new(
                "collector.slow_refresh_interval",
                format!(
                    "{} is shorter than collector.poll_interval ({})",
                    c.slow_refresh_interval, c.poll_interval
                ),
            ));
        }
        positive("collector.backoff_initial", c.backoff_initial)?;
        if c.backoff_max < c.backoff_initial {
            return Err(ConfigError::new(
                "collector.backoff_max",
                format!(
                    "{} is shorter than collector.backoff_initial ({})",
                    c.backoff_max, c.backoff_initial
                ),
            ));
        }
        if c.slice_passes_per_window == 0 {
            return Err(ConfigError::new(
                "collector.slice_passes_per_window",
                "must be at least 1",
            ));
        }
        for (i, id) in c.jobs.iter().enumerate() {
            if id.len() != 32 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(ConfigError::new(
                    format!("collector.jobs[{i}]"),
                    format!("{id:?} is not a 32-character hex job id"),
                ));
            }
        }
        self.listen_addr()?;
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
        if self.log.level.trim().is_empty() {
            return Err(ConfigError::new("log.level", "must not be empty"));
        }
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

    /// The metric window length (`[autoscaler] "metrics.window"`, default 15 min).
    pub fn metrics_window(&self) -> Result<Duration, ConfigError> {
        let key = || format!("autoscaler.\"{WINDOW_KEY}\"");
        match self.autoscaler.get(WINDOW_KEY) {
            None => Ok(DEFAULT_WINDOW),
            // A Flink key, so Flink's syntax: a bare number is milliseconds.
            Some(toml::Value::String(s)) => crate::engine::parse_duration_ms(s)
                .map(Duration::from_millis)
                .map_err(|m| ConfigError::new(key(), m)),
            Some(toml::Value::Integer(s)) if *s > 0 => Ok(Duration::from_secs(*s as u64)),
            Some(other) => Err(ConfigError::new(
                key(),
                format!("expected a duration, got {other}"),
            )),
        }
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

/// A duration in a Flink configuration value: a bare number is milliseconds (as Flink reads
/// it), anything else as [`parse_duration`].
pub fn parse_flink_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return t
            .parse::<u64>()
            .map(Duration::from_millis)
            .map_err(|_| format!("{text:?} is too long"));
    }
    parse_duration(t)
}

fn positive(key: &str, d: Dur) -> Result<(), ConfigError> {
    if d.0.is_zero() {
        Err(ConfigError::new(key, "must be greater than zero"))
    } else {
        Ok(())
    }
}

/// An environment value as TOML if it parses as one (numbers, booleans, arrays), else a string.
fn env_value(raw: &str) -> toml::Value {
    format!("v = {raw}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_string()))
}

fn set_path(
    table: &mut toml::Table,
    path: &[String],
    value: toml::Value,
    origin: &str,
) -> Result<(), ConfigError> {
    let (last, parents) = match path.split_last() {
        Some((last, parents)) if !last.is_empty() && !parents.is_empty() => (last, parents),
        _ => {
            return Err(ConfigError::new(
                origin,
                format!("expected {ENV_PREFIX}<SECTION>__<KEY>"),
            ));
        }
    };
    let mut cur = table;
    for p in parents {
        let entry = cur
            .entry(p.clone())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        cur = entry.as_table_mut().ok_or_else(|| {
            ConfigError::new(
                format!("{origin} ({})", path.join(".")),
                format!("{p} is not a section"),
            )
        })?;
    }
    cur.insert(last.clone(), value);
    Ok(())
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
        assert_eq!(c.collector.poll_interval, Dur::secs(15));
        assert_eq!(c.window_capacity(), 61);
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
        let e = load("[collector]\npoll_interval = \"15 fortnights\"").unwrap_err();
        assert_eq!(e.key, "collector.poll_interval");
        let e = load("[jobmanager]\nurl = \"https://jm\"").unwrap_err();
        assert_eq!(e.key, "jobmanager.url");
        let e = load("[collector]\njobs = [\"xyz\"]").unwrap_err();
        assert_eq!(e.key, "collector.jobs[0]");
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
