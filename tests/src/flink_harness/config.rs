//! The cluster's settings and the `config.yaml` written from them. Everything binds to
//! 127.0.0.1. Flink's defaults are kept except where a test needs otherwise (notably the
//! MetricFetcher interval and the adaptive scheduler's cooldown/stabilization stay Flink's).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_yaml::{Mapping, Value};

use super::HarnessError;

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
    /// Extra `key: value` settings, added last (they win over the ones above).
    pub extra: Vec<(String, String)>,
    /// Cap on how long to wait for the REST API and the TaskManagers.
    pub startup_timeout: Duration,
    /// The watchdog stops the cluster after this long even if the test process hangs.
    pub max_lifetime: Duration,
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
            extra: Vec::new(),
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

/// Renders `config.yaml` (flat keys, which Flink 1.19+ and 2.x accept). `java_opts` is the
/// `env.java.opts.all` value of the distribution's own config (`--add-opens` for Java 17).
pub fn render(
    settings: &ClusterSettings,
    ports: Ports,
    run_dir: &Path,
    java_opts: &str,
) -> Result<String, HarnessError> {
    let dir = |name: &str| run_dir.join(name).display().to_string();
    let mut map = Mapping::new();
    let mut put = |key: &str, value: Value| {
        map.insert(Value::from(key), value);
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
    put(
        "execution.checkpointing.dir",
        Value::from(format!("file://{}", dir("checkpoints"))),
    );
    put(
        "execution.checkpointing.savepoint-dir",
        Value::from(format!("file://{}", dir("savepoints"))),
    );
    for (key, value) in &settings.extra {
        put(key, Value::from(value.as_str()));
    }
    serde_yaml::to_string(&map)
        .map_err(|e| HarnessError::new("start", format!("cannot render config.yaml: {e}")))
}

/// Reads `env.java.opts.all` from the distribution's shipped `conf/config.yaml` (nested or
/// flat); empty when absent.
pub fn shipped_java_opts(flink_home: &Path) -> Result<String, HarnessError> {
    let path = flink_home.join("conf").join("config.yaml");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| HarnessError::new("start", format!("cannot read {}: {e}", path.display())))?;
    let yaml: Value = serde_yaml::from_str(&text)
        .map_err(|e| HarnessError::new("start", format!("{} is not YAML: {e}", path.display())))?;
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
        let text = render(&settings, ports, Path::new("/r"), "--add-opens=x").expect("renders");
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
        assert!(
            yaml.get("metrics.fetcher.update-interval").is_none(),
            "Flink's default stays"
        );
    }
}
