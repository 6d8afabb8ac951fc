//! Child processes the harness owns: each Flink JVM runs in a process group of its own and is
//! stopped by signalling that group (SIGTERM, then SIGKILL after a grace period, with the test
//! kit's `ChildGuard`) from Drop, so a failing or panicking test still stops it. A watchdog script covers the cases Drop
//! cannot: the test process killed or hung past a deadline.

use std::fs::{self, File};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use flink_autoscale_testkit::{self as testkit, ChildGuard};

use super::HarnessError;

/// Flink's shutdown hooks finish in 1–3 s here; SIGKILL after this.
const STOP_GRACE: Duration = Duration::from_secs(10);

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
    /// Killed (its whole group) on drop.
    _child: ChildGuard,
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
        Ok(Self {
            _child: ChildGuard::group_leader(child),
            groups,
        })
    }
}

/// One Flink JVM (`jobmanager.sh start-foreground` or `taskmanager.sh start-foreground`,
/// which exec the JVM, so the child's pid is the JVM's).
#[derive(Debug)]
pub struct Daemon {
    role: String,
    child: ChildGuard,
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
            child: ChildGuard::group_leader(child),
            log_dir: log_dir.to_owned(),
            groups: watchdog.groups.clone(),
            exit: None,
        })
    }

    pub fn role(&self) -> &str {
        &self.role
    }

    pub fn pid(&self) -> u32 {
        self.child.pid()
    }

    /// Where the process's stdout and stderr go.
    pub fn console_log(&self) -> PathBuf {
        self.log_dir.join("console.log")
    }

    /// The exit status once the process has ended (and is reaped), else `None`.
    pub fn exit_status(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            self.exit = self.child.exit_status();
            if self.exit.is_some() {
                self.groups.remove(self.child.pid());
            }
        }
        self.exit
    }

    /// SIGKILL to the process group, as a crash would, and reap.
    pub fn kill(&mut self) {
        self.child.kill();
        self.exit_status();
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
    let mut children: Vec<&mut ChildGuard> = daemons.iter_mut().map(|d| &mut d.child).collect();
    let stopped = testkit::stop_together(&mut children, STOP_GRACE);
    for (daemon, by_itself) in daemons.iter_mut().zip(stopped) {
        if !by_itself {
            eprintln!(
                "[flink-harness] the {} (pid {}) did not stop within {STOP_GRACE:?} of SIGTERM; killed it",
                daemon.role(),
                daemon.pid()
            );
        }
        daemon.exit_status();
    }
}
