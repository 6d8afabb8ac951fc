//! Child processes the harness owns: each Flink JVM runs in a process group of its own and is
//! stopped by signalling that group (SIGTERM, then SIGKILL after a grace period) from Drop,
//! so a failing or panicking test still stops it. A watchdog script covers the cases Drop
//! cannot: the test process killed or hung past a deadline.

use std::fs::{self, File};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::HarnessError;

/// Flink's shutdown hooks finish in 1–3 s here; SIGKILL after this.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// Sends `signal` (a name such as `TERM`) to every process in group `pgid`. Uses bash's
/// builtin `kill`, which a minimal machine has even without procps.
fn signal_group(pgid: u32, signal: &str) -> bool {
    Command::new("bash")
        .args(["-c", "kill -s \"$0\" -- \"-$1\" 2>/dev/null"])
        .arg(signal)
        .arg(pgid.to_string())
        .stdin(Stdio::null())
        .status()
        .map(|status| status.success())
        .unwrap_or(false)
}

/// The list of process groups the watchdog must stop, one id per line.
#[derive(Debug, Clone)]
struct GroupFile(PathBuf);

impl GroupFile {
    fn ids(&self) -> Vec<u32> {
        fs::read_to_string(&self.0)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.trim().parse().ok())
            .collect()
    }

    fn write(&self, ids: &[u32]) {
        let text: String = ids.iter().map(|id| format!("{id}\n")).collect();
        let tmp = self.0.with_extension("tmp");
        // Written whole and renamed, so the watchdog never reads half a list.
        if fs::write(&tmp, text).is_ok() {
            let _ = fs::rename(&tmp, &self.0);
        }
    }

    fn add(&self, pgid: u32) {
        let mut ids = self.ids();
        ids.push(pgid);
        self.write(&ids);
    }

    fn remove(&self, pgid: u32) {
        let ids: Vec<u32> = self.ids().into_iter().filter(|id| *id != pgid).collect();
        self.write(&ids);
    }
}

/// Stops every registered process group once this process is gone or the deadline passed.
#[derive(Debug)]
pub struct Watchdog {
    child: Child,
    groups: GroupFile,
}

impl Watchdog {
    pub fn start(
        run_dir: &Path,
        scripts_dir: &Path,
        lifetime: Duration,
    ) -> Result<Self, HarnessError> {
        let groups = GroupFile(run_dir.join("process-groups"));
        groups.write(&[]);
        let deadline = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .saturating_add(lifetime)
            .as_secs();
        let child = Command::new("bash")
            .arg(scripts_dir.join("watchdog.sh"))
            .arg(std::process::id().to_string())
            .arg(deadline.to_string())
            .arg(&groups.0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| HarnessError::new("start", format!("cannot start watchdog.sh: {e}")))?;
        Ok(Self { child, groups })
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        signal_group(self.child.id(), "KILL");
        let _ = self.child.wait();
    }
}

/// One Flink JVM (`jobmanager.sh start-foreground` or `taskmanager.sh start-foreground`,
/// which exec the JVM, so the child's pid is the JVM's).
#[derive(Debug)]
pub struct Daemon {
    role: String,
    child: Child,
    log_dir: PathBuf,
    groups: GroupFile,
    exit: Option<ExitStatus>,
}

impl Daemon {
    /// Spawns `command` in a new process group and registers the group with the watchdog.
    /// Its stdout and stderr go to `<log_dir>/console.log`; Flink's own log is beside it.
    pub fn spawn(
        role: &str,
        mut command: Command,
        log_dir: &Path,
        watchdog: &Watchdog,
    ) -> Result<Self, HarnessError> {
        let step = "start";
        fs::create_dir_all(log_dir).map_err(|e| {
            HarnessError::new(step, format!("cannot create {}: {e}", log_dir.display()))
        })?;
        let console_path = log_dir.join("console.log");
        let console = File::create(&console_path).map_err(|e| {
            HarnessError::new(
                step,
                format!("cannot create {}: {e}", console_path.display()),
            )
        })?;
        let console_err = console.try_clone().map_err(|e| {
            HarnessError::new(
                step,
                format!("cannot reuse {}: {e}", console_path.display()),
            )
        })?;
        let child = command
            .stdin(Stdio::null())
            .stdout(console)
            .stderr(console_err)
            .process_group(0)
            .spawn()
            .map_err(|e| HarnessError::new(step, format!("cannot start the {role}: {e}")))?;
        watchdog.groups.add(child.id());
        eprintln!("[flink-harness] started the {role} (pid {})", child.id());
        Ok(Self {
            role: role.to_owned(),
            child,
            log_dir: log_dir.to_owned(),
            groups: watchdog.groups.clone(),
            exit: None,
        })
    }

    pub fn role(&self) -> &str {
        &self.role
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Where the process's stdout and stderr go.
    pub fn console_log(&self) -> PathBuf {
        self.log_dir.join("console.log")
    }

    /// The exit status once the process has ended (and is reaped), else `None`.
    pub fn exit_status(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            self.exit = self.child.try_wait().ok().flatten();
            if self.exit.is_some() {
                self.groups.remove(self.child.id());
            }
        }
        self.exit
    }

    /// SIGKILL to the process group, as a crash would, and reap.
    pub fn kill(&mut self) {
        if self.exit_status().is_none() {
            signal_group(self.pid(), "KILL");
            let _ = self.child.wait();
            self.exit_status();
        }
    }

    /// The last `max_lines` lines of Flink's log file and the console output, for error
    /// messages.
    pub fn log_tail(&self, max_lines: usize) -> String {
        let mut files: Vec<PathBuf> = fs::read_dir(&self.log_dir)
            .map(|entries| entries.filter_map(|e| Some(e.ok()?.path())).collect())
            .unwrap_or_default();
        files.retain(|path| path.extension().is_some_and(|ext| ext == "log"));
        files.sort();
        let mut out = String::new();
        for path in files {
            let text = fs::read_to_string(&path).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let start = lines.len().saturating_sub(max_lines);
            out.push_str(&format!(
                "--- {} (last {} lines)\n",
                path.display(),
                lines.len() - start
            ));
            for line in &lines[start..] {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        stop_together(std::slice::from_mut(self));
    }
}

/// Stops all `daemons` at once: SIGTERM to each group, wait up to the grace period, then
/// SIGKILL to the groups still alive, and reap. Idempotent.
pub fn stop_together(daemons: &mut [Daemon]) {
    let mut running: Vec<&mut Daemon> = daemons
        .iter_mut()
        .filter_map(|d| {
            if d.exit_status().is_none() {
                Some(d)
            } else {
                None
            }
        })
        .collect();
    for daemon in &running {
        signal_group(daemon.pid(), "TERM");
    }
    let deadline = Instant::now() + STOP_GRACE;
    while Instant::now() < deadline {
        running.retain_mut(|d| d.exit_status().is_none());
        if running.is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    for daemon in running {
        eprintln!(
            "[flink-harness] the {} (pid {}) did not stop on SIGTERM; sending SIGKILL",
            daemon.role(),
            daemon.pid()
        );
        daemon.kill();
    }
}
