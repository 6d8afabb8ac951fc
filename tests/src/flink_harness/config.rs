//! The cluster's settings and the configuration file written from them. Everything binds to
//! 127.0.0.1. Flink's defaults are kept except where a test needs otherwise (notably the
//! MetricFetcher interval and the adaptive scheduler's cooldown/stabilization stay Flink's).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_yaml::{Mapping, Value};

use super::versions::ConfigFormat;
use super::{HarnessError, RestTls};

/// Settings for one cluster. `Default` gives what the real-Flink tests use.
#[derive(Debug, Clone)]
pub struct ClusterSettings {
    /// PyPI version of `apache-flink` and `apache-flink-libraries`. Env `FLINK_VERSION`.
    pub flink_version: String,
    /// Install cache; `None` lets `prepare.sh` pick `<repo>/.tmp/flink`. Env `FLINK_HARNESS_CACHE`.
    pub cache_dir: Option<PathBuf>,
    /// `jobmanager.scheduler`; in-place rescaling needs `adaptive`.
    pub scheduler: String,
    pub task_managers: usize,
    /// Slots per TaskManager. With one slot sharing group a job needs as many slots as its
    /// highest vertex parallelism, so this bounds the tests' scale-ups.
    pub slots_per_task_manager: u32,
    pub jobmanager_memory: String,
    pub taskmanager_memory: String,
    /// Serve REST over https with mutual authentication (`security.ssl.rest.*`); the
    /// harness's own REST client then uses these files too.
    pub rest_tls: Option<RestTls>,
    /// Extra `key: value` settings, added last (they win over the ones above).
    pub extra: Vec<(String, String)>,
    /// Log every MetricFetcher refresh of the JobManager (one line with its start time in
    /// `<Flink log file>.fetches`), so a benchmark can count them
    /// ([`super::FlinkCluster::metric_fetches`]).
    pub log_metric_fetches: bool,
    /// Cap on how long to wait for the REST API and the TaskManagers.
    pub startup_timeout: Duration,
    /// The watchdog stops the cluster after this long even if the test process hangs.
    pub max_lifetime: Duration,
}

impl ClusterSettings {
    /// The default settings on Flink `version` (whatever `FLINK_VERSION` says).
    pub fn on(version: &str) -> Self {
        Self {
            flink_version: version.to_owned(),
            ..Self::default()
        }
    }
}

impl Default for ClusterSettings {
    fn default() -> Self {
        Self {
            flink_version: std::env::var("FLINK_VERSION").unwrap_or_else(|_| "2.3.0".to_owned()),
            cache_dir: std::env::var_os("FLINK_HARNESS_CACHE").map(PathBuf::from),
            scheduler: "adaptive".to_owned(),
            task_managers: 1,
            slots_per_task_manager: 8,
            jobmanager_memory: "1024m".to_owned(),
            taskmanager_memory: "1536m".to_owned(),
            rest_tls: None,
            extra: Vec::new(),
            log_metric_fetches: false,
            startup_timeout: Duration::from_secs(120),
            max_lifetime: Duration::from_secs(15 * 60),
        }
    }
}

/// Ports chosen for one cluster (free at the time they were chosen).
#[derive(Debug, Clone, Copy)]
pub struct Ports {
    pub rest: u16,
    pub rpc: u16,
}

impl Ports {
    /// Asks the kernel for two free loopback ports. Another process could take one before
    /// Flink binds it; the JobManager then fails to start with a clear log line.
    pub fn pick() -> Result<Self, HarnessError> {
        let first = std::net::TcpListener::bind("127.0.0.1:0");
        let second = std::net::TcpListener::bind("127.0.0.1:0");
        let port = |listener: std::io::Result<std::net::TcpListener>| {
            listener
                .and_then(|l| l.local_addr())
                .map(|addr| addr.port())
                .map_err(|e| HarnessError::new("start", format!("cannot find a free port: {e}")))
        };
        Ok(Self {
            rest: port(first)?,
            rpc: port(second)?,
        })
    }
}

/// Renders the cluster's configuration file in `format` (`config.yaml` or, before 1.19,
/// `flink-conf.yaml`). `java_opts` is the `env.java.opts.all` value of the distribution's own
/// config (the `--add-opens` list Java 17 needs); `settings.extra` is added last and wins.
pub fn render(
    settings: &ClusterSettings,
    ports: Ports,
    run_dir: &Path,
    java_opts: &str,
    format: ConfigFormat,
) -> Result<String, HarnessError> {
    let dir = |name: &str| run_dir.join(name).display().to_string();
    let mut entries: Vec<(String, Value)> = Vec::new();
    let mut put = |key: &str, value: Value| {
        entries.retain(|(k, _)| k != key);
        entries.push((key.to_owned(), value));
    };
    put("env.java.opts.all", Value::from(java_opts));
    put("jobmanager.bind-host", Value::from("127.0.0.1"));
    put("jobmanager.rpc.address", Value::from("127.0.0.1"));
    put("jobmanager.rpc.port", Value::from(ports.rpc));
    put(
        "jobmanager.memory.process.size",
        Value::from(settings.jobmanager_memory.as_str()),
    );
    put(
        "jobmanager.scheduler",
        Value::from(settings.scheduler.as_str()),
    );
    put("taskmanager.bind-host", Value::from("127.0.0.1"));
    put("taskmanager.host", Value::from("127.0.0.1"));
    put(
        "taskmanager.numberOfTaskSlots",
        Value::from(settings.slots_per_task_manager),
    );
    put(
        "taskmanager.memory.process.size",
        Value::from(settings.taskmanager_memory.as_str()),
    );
    put("rest.address", Value::from("127.0.0.1"));
    put("rest.bind-address", Value::from("127.0.0.1"));
    put("rest.port", Value::from(ports.rest));
    put("io.tmp.dirs", Value::from(dir("tmp")));
    put("web.tmpdir", Value::from(dir("tmp")));
    // File storage makes checkpoints addressable, so rescales and restarts restore from them.
    // The 1.x names (state.checkpoints.dir, state.savepoints.dir) are still read by 2.x's
    // deprecated-key fallback, but 2.x's own names are not read by 1.x: set both.
    let checkpoints = format!("file://{}", dir("checkpoints"));
    let savepoints = format!("file://{}", dir("savepoints"));
    put(
        "execution.checkpointing.dir",
        Value::from(checkpoints.as_str()),
    );
    put("state.checkpoints.dir", Value::from(checkpoints));
    put(
        "execution.checkpointing.savepoint-dir",
        Value::from(savepoints.as_str()),
    );
    put("state.savepoints.dir", Value::from(savepoints));
    let tls = settings.rest_tls.iter().flat_map(RestTls::flink_settings);
    for (key, value) in tls.chain(settings.extra.iter().cloned()) {
        put(&key, Value::from(value));
    }
    match format {
        ConfigFormat::Standard => {
            let map: Mapping = entries
                .into_iter()
                .map(|(k, v)| (Value::from(k), v))
                .collect();
            serde_yaml::to_string(&map)
                .map_err(|e| HarnessError::new("start", format!("cannot render config.yaml: {e}")))
        }
        ConfigFormat::Legacy => entries.iter().map(|(k, v)| legacy_line(k, v)).collect(),
    }
}

/// One `key: value` line of a `flink-conf.yaml`, which Flink reads line by line: everything
/// after `#` is a comment and the value is taken verbatim (quotes would be kept).
fn legacy_line(key: &str, value: &Value) -> Result<String, HarnessError> {
    let text = match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => {
            return Err(HarnessError::new(
                "start",
                format!("flink-conf.yaml: {key} must be a plain value, got {other:?}"),
            ))
        }
    };
    if [key, text.as_str()]
        .iter()
        .any(|part| part.contains(['#', '\n', '\r']))
    {
        return Err(HarnessError::new(
            "start",
            format!(
                "flink-conf.yaml cannot hold {key}: {text:?} (no '#' or line breaks in a line)"
            ),
        ));
    }
    Ok(format!("{key}: {text}\n"))
}

/// Log4j 2 settings appended to the distribution's `log4j*.properties` when refreshes are
/// counted: `MetricFetcherImpl` logs "Start fetching metrics." at DEBUG once per refresh. It
/// goes to a file of its own beside each JVM's log, with the time in epoch milliseconds.
pub const METRIC_FETCH_LOGGING: &str = "
# Added by the flink-autoscale harness: one line per MetricFetcher refresh.
logger.flinkautoscalefetches.name = org.apache.flink.runtime.rest.handler.legacy.metrics.MetricFetcherImpl
logger.flinkautoscalefetches.level = DEBUG
logger.flinkautoscalefetches.additivity = false
logger.flinkautoscalefetches.appenderRef.fetches.ref = FlinkAutoscaleFetches
appender.flinkautoscalefetches.name = FlinkAutoscaleFetches
appender.flinkautoscalefetches.type = File
appender.flinkautoscalefetches.fileName = ${sys:log.file}.fetches
appender.flinkautoscalefetches.layout.type = PatternLayout
appender.flinkautoscalefetches.layout.pattern = %d{UNIX_MILLIS} %m%n
";

/// The line `MetricFetcherImpl` logs when a refresh starts.
pub const METRIC_FETCH_STARTED: &str = "Start fetching metrics.";

/// Reads `env.java.opts.all` from the distribution's shipped configuration: `conf/config.yaml`
/// (nested or flat keys) when it has one, else the `conf/flink-conf.yaml` of 1.18 and older;
/// empty when absent.
pub fn shipped_java_opts(flink_home: &Path) -> Result<String, HarnessError> {
    let conf = flink_home.join("conf");
    let standard = conf.join(ConfigFormat::Standard.file_name());
    let legacy = conf.join(ConfigFormat::Legacy.file_name());
    let read = |path: &Path| {
        std::fs::read_to_string(path)
            .map_err(|e| HarnessError::new("start", format!("cannot read {}: {e}", path.display())))
    };
    if !standard.exists() {
        let text = read(&legacy)?;
        return Ok(legacy_value(&text, "env.java.opts.all").unwrap_or_default());
    }
    let text = read(&standard)?;
    let yaml: Value = serde_yaml::from_str(&text).map_err(|e| {
        HarnessError::new("start", format!("{} is not YAML: {e}", standard.display()))
    })?;
    let nested = yaml
        .get("env")
        .and_then(|v| v.get("java"))
        .and_then(|v| v.get("opts"))
        .and_then(|v| v.get("all"));
    let flat = yaml.get("env.java.opts.all");
    Ok(nested
        .or(flat)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned())
}

/// `key`'s value in a `flink-conf.yaml`, read as Flink reads it (last occurrence wins).
fn legacy_value(text: &str, key: &str) -> Option<String> {
    text.lines().rev().find_map(|line| {
        let line = line.split('#').next()?.trim();
        let (k, v) = line.split_once(": ")?;
        (k.trim() == key).then(|| v.trim().to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_loopback_ports_dirs_and_extras_last() {
        let mut settings = ClusterSettings::default();
        settings
            .extra
            .push(("rest.port".to_owned(), "1".to_owned()));
        let ports = Ports {
            rest: 40001,
            rpc: 40002,
        };
        let text = render(
            &settings,
            ports,
            Path::new("/r"),
            "--add-opens=x",
            ConfigFormat::Standard,
        )
        .expect("renders");
        let yaml: Value = serde_yaml::from_str(&text).expect("valid YAML");
        assert_eq!(yaml["jobmanager.rpc.port"], Value::from(40002));
        assert_eq!(yaml["rest.bind-address"], Value::from("127.0.0.1"));
        assert_eq!(yaml["io.tmp.dirs"], Value::from("/r/tmp"));
        assert_eq!(
            yaml["execution.checkpointing.dir"],
            Value::from("file:///r/checkpoints")
        );
        assert_eq!(yaml["env.java.opts.all"], Value::from("--add-opens=x"));
        assert_eq!(yaml["rest.port"], Value::from("1"), "an extra setting wins");
        assert_eq!(
            yaml["state.checkpoints.dir"],
            Value::from("file:///r/checkpoints"),
            "1.x's name too"
        );
        assert!(
            yaml.get("metrics.fetcher.update-interval").is_none(),
            "Flink's default stays"
        );
    }

    #[test]
    fn renders_flink_conf_yaml_as_flat_lines_flink_reads_verbatim() {
        let settings = ClusterSettings::default();
        let ports = Ports {
            rest: 40001,
            rpc: 40002,
        };
        let opts = "--add-opens=java.base/java.lang=ALL-UNNAMED --add-opens=java.base/java.util=ALL-UNNAMED";
        let text = render(
            &settings,
            ports,
            Path::new("/r"),
            opts,
            ConfigFormat::Legacy,
        )
        .expect("renders");
        assert!(
            text.lines()
                .any(|l| l == format!("env.java.opts.all: {opts}")),
            "unquoted: {text}"
        );
        assert!(
            text.lines().any(|l| l == "jobmanager.rpc.port: 40002"),
            "{text}"
        );
        assert!(
            text.lines().any(|l| l == "rest.bind-address: 127.0.0.1"),
            "{text}"
        );
        assert_eq!(legacy_value(&text, "rest.port").as_deref(), Some("40001"));
        assert_eq!(
            legacy_value(&text, "env.java.opts.all").as_deref(),
            Some(opts)
        );
    }

    #[test]
    fn refuses_a_value_flink_conf_yaml_cannot_hold() {
        let mut settings = ClusterSettings::default();
        settings
            .extra
            .push(("metrics.scope.jm".to_owned(), "a#b".to_owned()));
        let ports = Ports { rest: 1, rpc: 2 };
        let err = render(&settings, ports, Path::new("/r"), "", ConfigFormat::Legacy)
            .expect_err("a '#' would start a comment");
        assert!(err.to_string().contains("metrics.scope.jm"), "{err}");
    }

    #[test]
    fn reads_java_opts_from_either_shipped_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let conf = dir.path().join("conf");
        std::fs::create_dir_all(&conf).expect("conf dir");
        std::fs::write(
            conf.join("flink-conf.yaml"),
            "# comment\nenv.java.opts.all: --add-opens=a=ALL-UNNAMED\njobmanager.rpc.port: 6123\n",
        )
        .expect("write");
        assert_eq!(
            shipped_java_opts(dir.path()).expect("legacy"),
            "--add-opens=a=ALL-UNNAMED"
        );
        std::fs::write(
            conf.join("config.yaml"),
            "env:\n  java:\n    opts:\n      all: --add-opens=b=ALL-UNNAMED\n",
        )
        .expect("write");
        assert_eq!(
            shipped_java_opts(dir.path()).expect("standard wins"),
            "--add-opens=b=ALL-UNNAMED"
        );
    }
}
