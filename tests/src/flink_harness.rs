//! A real Apache Flink standalone session cluster for end-to-end tests.
//!
//! [`FlinkCluster::start`] installs what is missing (Java 17 via apt, the pinned
//! `apache-flink`/`apache-flink-libraries` packages via pip, the load job via javac; all
//! cached), writes a loopback-only configuration with free ports in the file the version reads
//! (`config.yaml`, or `flink-conf.yaml` before 1.19), and starts one JobManager and the
//! configured TaskManagers. [`FlinkCluster::submit_load_job`] runs the load job. Every process
//! it started is stopped by process group when the cluster is dropped, also when a test
//! panics or is cancelled by a timeout; a watchdog stops them if the test process dies.
//! Nothing is ever skipped: a missing Java or wheel is an error that says so.

mod agent_collect;
mod agent_daemon;
mod answers;
mod config;
mod error;
mod install;
mod load_job;
pub mod per_subtask;
mod process;
mod recording_proxy;
mod rest;
mod rest_tls;
mod scaffold;
mod versions;
mod wide_job;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

pub use agent_collect::{job_in_round, run_collect, start_agent_setup, AgentSetup, Polls};
pub use agent_daemon::{metric_sum, AgentDaemon};
pub use answers::{
    aggregated, fully_running, job_status, listed_names, metric_number, plan_edges, single,
    VertexStatus,
};
pub use config::ClusterSettings;
pub use error::HarnessError;
pub use install::Installation;
pub use load_job::{vertex, LoadJob, LoadJobSpec};
pub use process::Daemon;
pub use recording_proxy::{RecordedRequest, RecordingProxy};
pub use rest::{FlinkRest, Reply};
pub use rest_tls::RestTls;
pub use scaffold::{alongside, must, within};
pub use versions::{ConfigFormat, FlinkVersion, FULL_SUITE, SMOKE};
pub use wide_job::{wide_vertex, WideJob, WideJobSpec};

use config::Ports;
use process::Watchdog;

const POLL: Duration = Duration::from_millis(200);
const METRIC_POLL: Duration = Duration::from_secs(1);

/// Run folders of failed or killed tests (logs, config) are kept this long for diagnosis.
const KEEP_FAILED_RUNS_FOR: Duration = Duration::from_secs(24 * 3600);

/// How long the steps of [`FlinkCluster::start`] took (wall clock).
#[derive(Debug, Clone, Copy)]
pub struct StartTimings {
    /// `prepare.sh`: install check, and on a cold cache apt/pip/javac.
    pub prepare: Duration,
    /// From spawning the JVMs until the REST API answered.
    pub rest_up: Duration,
    /// From spawning the JVMs until every TaskManager had registered its slots.
    pub cluster_ready: Duration,
}

/// CPU time and memory of one of the cluster's JVMs, from `/proc`.
#[derive(Debug, Clone)]
pub struct ProcessUsage {
    pub role: String,
    pub pid: u32,
    pub cpu_seconds: f64,
    pub rss_bytes: u64,
    pub peak_rss_bytes: u64,
}

/// CPU time of one thread of a process, from `/proc/<pid>/task/<tid>/stat`.
#[derive(Debug, Clone)]
pub struct ThreadUsage {
    pub tid: u32,
    /// The thread's name as the kernel keeps it (the JVM's, cut to 15 bytes).
    pub name: String,
    pub cpu_seconds: f64,
}

#[derive(Debug)]
pub struct FlinkCluster {
    settings: ClusterSettings,
    installation: Installation,
    version: FlinkVersion,
    rest: FlinkRest,
    run_dir: Option<tempfile::TempDir>,
    jobmanager: Option<Daemon>,
    taskmanagers: Vec<Daemon>,
    /// Dropped only after the daemons are stopped (see `shutdown`).
    watchdog: Option<Watchdog>,
    timings: StartTimings,
}

impl FlinkCluster {
    /// Installs what is missing, starts the cluster and waits until all TaskManagers have
    /// registered. The returned value owns the processes.
    pub async fn start(settings: ClusterSettings) -> Result<Self, HarnessError> {
        let t0 = Instant::now();
        let version = FlinkVersion::parse(&settings.flink_version)?;
        let installation =
            install::prepare(&settings.flink_version, settings.cache_dir.as_deref()).await?;
        let prepare = t0.elapsed();

        let runs = installation.cache_dir.join("runs");
        std::fs::create_dir_all(&runs).map_err(|e| {
            HarnessError::new("start", format!("cannot create {}: {e}", runs.display()))
        })?;
        prune_old_runs(&runs, KEEP_FAILED_RUNS_FOR);
        let run_dir = tempfile::Builder::new()
            .prefix("cluster-")
            .tempdir_in(&runs)
            .map_err(|e| HarnessError::new("start", format!("cannot create a run folder: {e}")))?;
        let ports = Ports::pick()?;
        write_conf_dir(
            &settings,
            &installation,
            version.config_format(),
            ports,
            run_dir.path(),
        )?;
        let watchdog = Watchdog::start(
            run_dir.path(),
            &install::scripts_dir(),
            settings.max_lifetime,
        )?;

        let rest = match &settings.rest_tls {
            None => FlinkRest::new(&format!("http://127.0.0.1:{}", ports.rest)),
            Some(tls) => FlinkRest::with_tls(
                &format!("https://127.0.0.1:{}", ports.rest),
                tls.client_config()?,
            ),
        };
        let mut cluster = Self {
            rest,
            settings,
            installation,
            version,
            run_dir: Some(run_dir),
            jobmanager: None,
            taskmanagers: Vec::new(),
            watchdog: Some(watchdog),
            timings: StartTimings {
                prepare,
                rest_up: Duration::ZERO,
                cluster_ready: Duration::ZERO,
            },
        };
        let spawned = Instant::now();
        // The TaskManagers retry registering, so all JVMs start at once to save seconds.
        cluster.jobmanager = Some(cluster.spawn_daemon("jobmanager", "jobmanager.sh")?);
        for index in 0..cluster.settings.task_managers {
            let daemon = cluster.spawn_daemon(&format!("taskmanager-{index}"), "taskmanager.sh")?;
            cluster.taskmanagers.push(daemon);
        }
        cluster.timings.rest_up = cluster.wait_for_overview(spawned, |_| true).await?;
        let slots = cluster.settings.task_managers as u64
            * u64::from(cluster.settings.slots_per_task_manager);
        let tms = cluster.settings.task_managers as u64;
        cluster.timings.cluster_ready = cluster
            .wait_for_overview(spawned, |o| {
                o["taskmanagers"].as_u64() >= Some(tms) && o["slots-total"].as_u64() >= Some(slots)
            })
            .await?;
        Ok(cluster)
    }

    pub fn rest(&self) -> &FlinkRest {
        &self.rest
    }

    pub fn rest_url(&self) -> &str {
        self.rest.base_url()
    }

    pub fn installation(&self) -> &Installation {
        &self.installation
    }

    pub fn version(&self) -> FlinkVersion {
        self.version
    }

    pub fn settings(&self) -> &ClusterSettings {
        &self.settings
    }

    pub fn timings(&self) -> StartTimings {
        self.timings
    }

    pub fn run_dir(&self) -> &Path {
        self.run_dir
            .as_ref()
            .map_or(Path::new(""), |dir| dir.path())
    }

    /// Uploads and runs the load job, then waits until every subtask is RUNNING.
    pub async fn submit_load_job(
        &mut self,
        spec: &LoadJobSpec,
        timeout: Duration,
    ) -> Result<LoadJob, HarnessError> {
        let jar = self.installation.load_job_jar.clone();
        let job = LoadJob::submit(&self.rest, &jar, spec, self.run_dir()).await?;
        self.wait_for_job(&job.job_id, timeout, |state, vertices| {
            fully_running(state, vertices)
        })
        .await?;
        Ok(job)
    }

    /// Runs `job` again under its job id (after a JobManager restart), restoring its latest
    /// completed checkpoint when there is one, and waits until every subtask is RUNNING.
    /// Returns the checkpoint restored.
    ///
    /// The TaskManagers keep the old incarnation's tasks until they notice its JobMaster is
    /// gone (`heartbeat.timeout`, 50 s by default); a job with the same id submitted before
    /// that fails with "different set of library BLOBs". So this first waits for every slot
    /// to be free.
    pub async fn resubmit_load_job(
        &mut self,
        job: &LoadJob,
        timeout: Duration,
    ) -> Result<Option<PathBuf>, HarnessError> {
        let deadline = Instant::now() + timeout;
        self.poll_until("/taskmanagers", timeout, |answer| {
            let tms = answer["taskmanagers"].as_array();
            tms.is_some_and(|tms| {
                !tms.is_empty() && tms.iter().all(|tm| tm["freeSlots"] == tm["slotsNumber"])
            })
        })
        .await?;
        let checkpoint = self.latest_checkpoint(&job.job_id);
        let jar = self.installation.load_job_jar.clone();
        job.resubmit(&self.rest, &jar, checkpoint.as_deref())
            .await?;
        let left = deadline.saturating_duration_since(Instant::now());
        self.wait_for_job(&job.job_id, left, |state, vertices| {
            fully_running(state, vertices)
        })
        .await?;
        Ok(checkpoint)
    }

    /// The newest completed checkpoint of `job_id` on disk (`chk-N` with a `_metadata`
    /// file), which outlives a killed JobManager.
    pub fn latest_checkpoint(&self, job_id: &str) -> Option<PathBuf> {
        let dir = self.run_dir().join("checkpoints").join(job_id);
        std::fs::read_dir(dir)
            .ok()?
            .filter_map(|entry| {
                let path = entry.ok()?.path();
                let number: u64 = path
                    .file_name()?
                    .to_str()?
                    .strip_prefix("chk-")?
                    .parse()
                    .ok()?;
                path.join("_metadata").is_file().then_some((number, path))
            })
            .max_by_key(|(number, _)| *number)
            .map(|(_, path)| path)
    }

    /// Polls `/jobs/:jid` every 200 ms until `done(state, vertices)` holds; returns the
    /// vertices at that moment. Fails on timeout, on a terminal job state, or when a JVM died.
    pub async fn wait_for_job(
        &mut self,
        job_id: &str,
        timeout: Duration,
        done: impl Fn(&str, &[VertexStatus]) -> bool,
    ) -> Result<Vec<VertexStatus>, HarnessError> {
        let deadline = Instant::now() + timeout;
        loop {
            self.check_alive()?;
            let last = match self.rest.get(&format!("/jobs/{job_id}")).await {
                Ok(details) => {
                    let (state, vertices) = job_status(&details);
                    if done(&state, &vertices) {
                        return Ok(vertices);
                    }
                    if matches!(state.as_str(), "FAILED" | "CANCELED" | "FINISHED") {
                        return Err(
                            self.failure("job", format!("job {job_id} ended in state {state}"))
                        );
                    }
                    describe(&state, &vertices)
                }
                Err(e) => e.to_string(),
            };
            if Instant::now() >= deadline {
                return Err(self.failure(
                    "job",
                    format!(
                        "job {job_id} not as expected within {} s; last: {last}",
                        timeout.as_secs()
                    ),
                ));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Polls `path` every second until `accept(answer)` holds (metric endpoints answer `[]` or
    /// stale values for a while; the JobManager refreshes them every few seconds); returns
    /// that answer.
    pub async fn poll_until(
        &mut self,
        path: &str,
        timeout: Duration,
        accept: impl Fn(&Value) -> bool,
    ) -> Result<Value, HarnessError> {
        let deadline = Instant::now() + timeout;
        loop {
            self.check_alive()?;
            let answer = self.rest.get(path).await?;
            if accept(&answer) {
                return Ok(answer);
            }
            if Instant::now() >= deadline {
                return Err(HarnessError::new(
                    "poll",
                    format!(
                        "GET {path} not as expected within {} s; last answer: {answer}",
                        timeout.as_secs()
                    ),
                ));
            }
            tokio::time::sleep(METRIC_POLL).await;
        }
    }

    /// Runs Flink's command-line client, `bin/flink <args>`, with this cluster's configuration
    /// folder (its REST address and any `security.ssl.rest.*` settings); returns its output.
    /// The client's log goes to `<run>/log/cli/`.
    pub async fn run_cli(&self, args: &[&str], timeout: Duration) -> Result<String, HarnessError> {
        let flink_home = &self.installation.flink_home;
        let run_dir = self.run_dir();
        let output = tokio::process::Command::new(flink_home.join("bin").join("flink"))
            .args(args)
            .env("FLINK_HOME", flink_home)
            .env("FLINK_CONF_DIR", run_dir.join("conf"))
            .env("FLINK_LOG_DIR", run_dir.join("log").join("cli"))
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output();
        let what = format!("bin/flink {}", args.join(" "));
        let output = tokio::time::timeout(timeout, output)
            .await
            .map_err(|_| HarnessError::new("cli", format!("{what}: not done within {timeout:?}")))?
            .map_err(|e| HarnessError::new("cli", format!("cannot run {what}: {e}")))?;
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        if output.status.success() {
            return Ok(stdout);
        }
        Err(HarnessError::new(
            "cli",
            format!(
                "{what} failed ({}):\n{stdout}{}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            ),
        ))
    }

    /// Uploads and runs the wide job, then waits until every subtask is RUNNING.
    pub async fn submit_wide_job(
        &mut self,
        spec: &WideJobSpec,
        timeout: Duration,
    ) -> Result<WideJob, HarnessError> {
        let jar = self.installation.load_job_jar.clone();
        let job = WideJob::submit(&self.rest, &jar, spec, self.run_dir()).await?;
        self.wait_for_job(&job.job_id, timeout, |state, vertices| {
            fully_running(state, vertices)
        })
        .await?;
        Ok(job)
    }

    /// Start times (epoch ms) of the JobManager's MetricFetcher refreshes so far; needs
    /// [`ClusterSettings::log_metric_fetches`] (else always empty).
    pub fn metric_fetches(&self) -> Vec<u64> {
        let dir = self.run_dir().join("log").join("jobmanager");
        let files = std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .filter_map(|e| Some(e.ok()?.path()))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        files
            .iter()
            .filter(|path| path.extension().is_some_and(|ext| ext == "fetches"))
            .flat_map(|path| {
                let text = std::fs::read_to_string(path).unwrap_or_default();
                parse_metric_fetches(&text)
            })
            .collect()
    }

    /// Kills the JobManager with SIGKILL, as a crash would. Without HA its jobs are lost.
    pub fn kill_jobmanager(&mut self) {
        if let Some(mut jobmanager) = self.jobmanager.take() {
            jobmanager.kill();
        }
    }

    /// Starts a JobManager again on the same ports and waits until the TaskManagers have
    /// registered with it again.
    pub async fn restart_jobmanager(&mut self) -> Result<Duration, HarnessError> {
        self.kill_jobmanager();
        let spawned = Instant::now();
        self.jobmanager = Some(self.spawn_daemon("jobmanager", "jobmanager.sh")?);
        let tms = self.settings.task_managers as u64;
        self.wait_for_overview(spawned, |o| o["taskmanagers"].as_u64() >= Some(tms))
            .await
    }

    /// CPU time and memory of each JVM that is still running.
    pub fn process_usage(&mut self) -> Vec<ProcessUsage> {
        let ticks = clock_ticks_per_second();
        self.daemons_mut()
            .filter_map(|d| match d.exit_status() {
                None => read_usage(d.role(), d.pid(), ticks),
                Some(_) => None,
            })
            .collect()
    }

    /// Stops every process now (Drop does the same).
    pub fn stop(mut self) {
        self.shutdown();
    }

    /// Starts a helper process of the test (for example the agent daemon) the way the
    /// JVMs are started: its own process group, output in `<run>/log/<role>/console.log`,
    /// stopped when the returned value is dropped, and by the watchdog if the test process
    /// dies first.
    pub fn spawn_helper(&self, role: &str, command: Command) -> Result<Daemon, HarnessError> {
        let log_dir = self.run_dir().join("log").join(role);
        let watchdog = self
            .watchdog
            .as_ref()
            .ok_or_else(|| HarnessError::new("start", "the cluster was already stopped"))?;
        Daemon::spawn(role, command, &log_dir, watchdog)
    }

    fn daemons_mut(&mut self) -> impl Iterator<Item = &mut Daemon> {
        self.jobmanager
            .iter_mut()
            .chain(self.taskmanagers.iter_mut())
    }

    fn spawn_daemon(&self, role: &str, script: &str) -> Result<Daemon, HarnessError> {
        let flink_home = &self.installation.flink_home;
        let run_dir = self.run_dir();
        let mut command = Command::new(flink_home.join("bin").join(script));
        command
            .arg("start-foreground")
            .env("FLINK_HOME", flink_home)
            .env("FLINK_CONF_DIR", run_dir.join("conf"))
            .env("FLINK_LOG_DIR", run_dir.join("log").join(role))
            .env("FLINK_PID_DIR", run_dir.join("pid"))
            .env("FLINK_IDENT_STRING", "autoscale-test");
        self.spawn_helper(role, command)
    }

    async fn wait_for_overview(
        &mut self,
        since: Instant,
        ready: impl Fn(&Value) -> bool,
    ) -> Result<Duration, HarnessError> {
        let deadline = since + self.settings.startup_timeout;
        loop {
            self.check_alive()?;
            if let Ok(overview) = self.rest.get("/overview").await {
                if ready(&overview) {
                    return Ok(since.elapsed());
                }
            }
            if Instant::now() >= deadline {
                return Err(self.failure(
                    "start",
                    format!(
                        "cluster at {} not ready within {} s",
                        self.rest.base_url(),
                        self.settings.startup_timeout.as_secs()
                    ),
                ));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// An error if any JVM this cluster should have has exited.
    fn check_alive(&mut self) -> Result<(), HarnessError> {
        let dead = self.daemons_mut().find_map(|d| {
            d.exit_status()
                .map(|status| format!("the {} exited ({status})", d.role()))
        });
        match dead {
            Some(what) => Err(self.failure("cluster", what)),
            None => Ok(()),
        }
    }

    /// An error whose text carries the tails of the JVMs' logs.
    fn failure(&self, step: &'static str, what: String) -> HarnessError {
        let mut text = what;
        for daemon in self.jobmanager.iter().chain(&self.taskmanagers) {
            text.push('\n');
            text.push_str(&daemon.log_tail(40));
        }
        HarnessError::new(step, text)
    }

    fn shutdown(&mut self) {
        let mut daemons: Vec<Daemon> = self.jobmanager.take().into_iter().collect();
        daemons.append(&mut self.taskmanagers);
        process::stop_together(&mut daemons);
        drop(daemons);
        self.watchdog.take();
        if let Some(run_dir) = self.run_dir.take() {
            if std::thread::panicking() {
                let kept = run_dir.keep();
                eprintln!(
                    "[flink-harness] test failed: logs and config kept in {}",
                    kept.display()
                );
            }
        }
    }
}

impl Drop for FlinkCluster {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn write_conf_dir(
    settings: &ClusterSettings,
    installation: &Installation,
    format: ConfigFormat,
    ports: Ports,
    run_dir: &Path,
) -> Result<(), HarnessError> {
    let conf = run_dir.join("conf");
    let io = |what: &str, e: std::io::Error| HarnessError::new("start", format!("{what}: {e}"));
    std::fs::create_dir_all(&conf).map_err(|e| io("cannot create conf dir", e))?;
    let shipped = installation.flink_home.join("conf");
    // The log4j/logback files select where the JVMs log; take the distribution's own.
    for entry in std::fs::read_dir(&shipped).map_err(|e| io("cannot list the shipped conf", e))? {
        let path = entry
            .map_err(|e| io("cannot list the shipped conf", e))?
            .path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if name.starts_with("log4j") || name.starts_with("logback") {
            std::fs::copy(&path, conf.join(name))
                .map_err(|e| io(&format!("cannot copy {name}"), e))?;
        }
        if settings.log_metric_fetches && name.starts_with("log4j") && name.ends_with(".properties")
        {
            let mut text = std::fs::read_to_string(&path)
                .map_err(|e| io(&format!("cannot read {name}"), e))?;
            text.push_str(config::METRIC_FETCH_LOGGING);
            std::fs::write(conf.join(name), text)
                .map_err(|e| io(&format!("cannot write {name}"), e))?;
        }
    }
    let java_opts = config::shipped_java_opts(&installation.flink_home)?;
    let text = config::render(settings, ports, run_dir, &java_opts, format)?;
    std::fs::write(conf.join(format.file_name()), text)
        .map_err(|e| io(&format!("cannot write {}", format.file_name()), e))?;
    std::fs::write(conf.join("masters"), format!("127.0.0.1:{}\n", ports.rest))
        .and_then(|()| std::fs::write(conf.join("workers"), "127.0.0.1\n"))
        .map_err(|e| io("cannot write masters/workers", e))
}

/// Removes run folders older than `age`; a live cluster's folder is younger than its
/// watchdog's lifetime, so only leftovers go.
fn prune_old_runs(runs: &Path, age: Duration) {
    let Ok(entries) = std::fs::read_dir(runs) else {
        return;
    };
    for entry in entries.flatten() {
        let old = entry
            .metadata()
            .and_then(|meta| meta.modified())
            .ok()
            .and_then(|modified| modified.elapsed().ok())
            .is_some_and(|elapsed| elapsed > age);
        if old {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The start times of the refreshes in a `.fetches` log (`<epoch ms> <message>` lines).
fn parse_metric_fetches(text: &str) -> Vec<u64> {
    text.lines()
        .filter_map(|line| {
            let (at, message) = line.split_once(' ')?;
            (message.trim() == config::METRIC_FETCH_STARTED)
                .then(|| at.parse().ok())
                .flatten()
        })
        .collect()
}

fn describe(state: &str, vertices: &[VertexStatus]) -> String {
    let parts: Vec<String> = vertices
        .iter()
        .map(|v| format!("{} {}/{}", v.name, v.running_subtasks, v.parallelism))
        .collect();
    format!("{state} [{}]", parts.join(", "))
}

fn clock_ticks_per_second() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8_lossy(&out.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// The CPU time of every live thread of `pid` (for example a JVM's), so a benchmark can tell
/// which of its threads did the work; empty when the process is gone.
pub fn thread_usage(pid: u32) -> Vec<ThreadUsage> {
    let ticks = clock_ticks_per_second();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|entry| {
            let tid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            let (head, rest) = stat.rsplit_once(')')?;
            let name = head.split_once('(')?.1.to_owned();
            let (utime, stime) = cpu_ticks(rest)?;
            Some(ThreadUsage {
                tid,
                name,
                cpu_seconds: (utime + stime) as f64 / ticks,
            })
        })
        .collect()
}

/// utime and stime from the part of a `stat` line after the command name.
fn cpu_ticks(after_name: &str) -> Option<(u64, u64)> {
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    Some((fields.get(11)?.parse().ok()?, fields.get(12)?.parse().ok()?))
}

/// utime + stime from `/proc/<pid>/stat`, VmRSS and VmHWM from `/proc/<pid>/status`.
fn read_usage(role: &str, pid: u32, ticks_per_second: f64) -> Option<ProcessUsage> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may contain spaces.
    let (utime, stime) = cpu_ticks(stat.rsplit_once(')')?.1)?;
    let ticks = utime + stime;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib = |key: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(key))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    Some(ProcessUsage {
        role: role.to_owned(),
        pid,
        cpu_seconds: ticks as f64 / ticks_per_second,
        rss_bytes: kib("VmRSS:")? * 1024,
        peak_rss_bytes: kib("VmHWM:")? * 1024,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_usage_reads_this_process_threads() {
        let pid = std::process::id();
        // Burn CPU on this thread until the kernel has counted a tick of it: on a loaded
        // machine 50 ms of wall clock can pass with no tick, so the wait is on the counter
        // (bounded), not on the clock.
        let mut x = 0u64;
        let t0 = Instant::now();
        let counted = || thread_usage(pid).iter().map(|t| t.cpu_seconds).sum::<f64>() > 0.0;
        while !counted() && t0.elapsed() < Duration::from_secs(20) {
            for _ in 0..1_000_000 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        }
        let threads = thread_usage(pid);
        assert!(!threads.is_empty(), "no threads read for pid {pid}");
        assert!(threads.iter().all(|t| !t.name.is_empty()));
        let total: f64 = threads.iter().map(|t| t.cpu_seconds).sum();
        assert!(total > 0.0, "CPU time of this process is {total}");
        assert!(thread_usage(u32::MAX).is_empty(), "no such process");
    }

    #[test]
    fn metric_fetches_are_the_refresh_start_lines() {
        let log = "1800000000000 Start fetching metrics.\n\
                   1800000000005 Query metrics for pekko://flink-metrics@127.0.0.1:1/user/x.\n\
                   1800000010001 Start fetching metrics.\n\
                   garbage\n";
        assert_eq!(
            parse_metric_fetches(log),
            vec![1_800_000_000_000, 1_800_000_010_001]
        );
    }

    #[test]
    fn cpu_ticks_are_fields_14_and_15_of_stat() {
        // `stat` after the command name: state, ppid, ... utime is the 12th field here.
        let after_name = " S 1 2 3 4 5 6 7 8 9 10 111 222 13 14";
        assert_eq!(cpu_ticks(after_name), Some((111, 222)));
        assert_eq!(cpu_ticks(" S 1 2"), None);
    }
}
