//! Stopping child processes the way systemd does (SIGTERM, then SIGKILL after a grace period),
//! and [`ChildGuard`], which kills its child when dropped so that a failing test never leaves
//! a process behind.

use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How often a stop looks whether the children have exited.
const POLL: Duration = Duration::from_millis(20);

/// The signals tests send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Term,
    Kill,
    Hup,
    Int,
}

impl Signal {
    fn name(self) -> &'static str {
        match self {
            Signal::Term => "TERM",
            Signal::Kill => "KILL",
            Signal::Hup => "HUP",
            Signal::Int => "INT",
        }
    }
}

/// Sends `signal` to process `pid`, or to every process in group `pid` when `group`. Returns
/// whether it was delivered. (The workspace forbids `unsafe`, so this runs bash's builtin
/// `kill`, which a minimal machine has even without procps.)
pub fn send_signal(pid: u32, signal: Signal, group: bool) -> bool {
    let target = if group {
        format!("-{pid}")
    } else {
        pid.to_string()
    };
    Command::new("bash")
        .args(["-c", "kill -s \"$0\" -- \"$1\" 2>/dev/null"])
        .arg(signal.name())
        .arg(target)
        .stdin(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// A child process that is killed (SIGKILL, or a graceful stop, see
/// [`ChildGuard::stop_on_drop`]) and reaped when the guard is dropped, panics included.
#[derive(Debug)]
pub struct ChildGuard {
    child: Child,
    /// The child leads its own process group: signals go to the whole group.
    group: bool,
    exit: Option<ExitStatus>,
    pub(crate) drop_grace: Duration,
}

impl ChildGuard {
    pub fn new(child: Child) -> Self {
        Self {
            child,
            group: false,
            exit: None,
            drop_grace: Duration::ZERO,
        }
    }

    /// For a child spawned with `process_group(0)`: every signal, SIGKILL included, goes to
    /// its whole process group, so what it started stops with it.
    pub fn group_leader(child: Child) -> Self {
        let mut guard = Self::new(child);
        guard.group = true;
        guard
    }

    /// Dropping the guard stops the child with SIGTERM first and SIGKILL only after `grace`,
    /// giving it the chance to drain (the default is SIGKILL at once).
    pub fn stop_on_drop(mut self, grace: Duration) -> Self {
        self.drop_grace = grace;
        self
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The child itself, for its pipes.
    pub fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }

    /// The exit status once the child has ended (it is then reaped), without waiting.
    pub fn exit_status(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            self.exit = self.child.try_wait().ok().flatten();
        }
        self.exit
    }

    /// Sends `signal` unless the child has already ended; returns whether it was delivered.
    pub fn signal(&mut self, signal: Signal) -> bool {
        self.exit_status().is_none() && send_signal(self.pid(), signal, self.group)
    }

    /// SIGKILL, as a crash would, and reap. Returns the exit status.
    pub fn kill(&mut self) -> Option<ExitStatus> {
        if self.exit_status().is_none() {
            if self.group {
                send_signal(self.pid(), Signal::Kill, true);
            } else {
                let _ = self.child.kill();
            }
            self.exit = self.child.wait().ok();
        }
        self.exit
    }

    /// SIGTERM, then SIGKILL if the child has not exited within `grace`. Returns the exit
    /// status when it stopped by itself, `None` when it had to be killed.
    pub fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        if stop_together(&mut [&mut *self], grace)[0] {
            self.exit
        } else {
            None
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if self.drop_grace.is_zero() {
            self.kill();
        } else {
            self.stop(self.drop_grace);
        }
    }
}

/// Stops several children at once: SIGTERM to each that still runs, up to `grace` for all of
/// them to exit, then SIGKILL to the rest. Reaps them all and answers, in order, whether each
/// stopped by itself (a child that had already exited did).
pub fn stop_together(children: &mut [&mut ChildGuard], grace: Duration) -> Vec<bool> {
    for child in children.iter_mut() {
        child.signal(Signal::Term);
    }
    let deadline = Instant::now() + grace;
    while children.iter_mut().any(|c| c.exit_status().is_none()) && Instant::now() < deadline {
        std::thread::sleep(POLL);
    }
    children
        .iter_mut()
        .map(|child| {
            let by_itself = child.exit_status().is_some();
            child.kill();
            by_itself
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::CommandExt;

    fn alive(pid: u32) -> bool {
        // A reaped child's /proc entry is gone; a zombie's state is Z.
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|stat| stat.rsplit(')').next().is_some_and(|s| !s.contains(" Z ")))
    }

    fn bash(script: &str) -> Command {
        let mut command = Command::new("bash");
        command.args(["-c", script]).stdin(Stdio::null());
        command
    }

    /// A child that ignores SIGTERM, returned once the trap is set.
    fn ignoring_sigterm() -> ChildGuard {
        let mut command = bash("trap '' TERM; echo ready; exec sleep 60");
        command.stdout(Stdio::piped());
        let mut guard = ChildGuard::new(command.spawn().unwrap());
        let mut line = String::new();
        BufReader::new(guard.child_mut().stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready");
        guard
    }

    #[test]
    fn stop_returns_the_status_of_a_child_that_obeys_sigterm() {
        let mut guard = ChildGuard::new(bash("exec sleep 60").spawn().unwrap());
        let status = guard
            .stop(Duration::from_secs(10))
            .expect("stops on SIGTERM");
        assert!(!status.success(), "killed by SIGTERM: {status}");
        assert!(!alive(guard.pid()));
    }

    #[test]
    fn stop_kills_a_child_that_ignores_sigterm_after_the_grace() {
        let mut guard = ignoring_sigterm();
        let started = Instant::now();
        assert_eq!(guard.stop(Duration::from_millis(300)), None);
        assert!(started.elapsed() >= Duration::from_millis(300));
        assert!(!alive(guard.pid()));
    }

    #[test]
    fn dropping_the_guard_kills_the_child() {
        let guard = ChildGuard::new(bash("exec sleep 60").spawn().unwrap());
        let pid = guard.pid();
        drop(guard);
        assert!(!alive(pid));
    }

    #[test]
    fn a_group_leader_takes_its_whole_group_with_it() {
        let mut command = bash("sleep 60 & echo $!; wait");
        command.stdout(Stdio::piped()).process_group(0);
        let mut guard = ChildGuard::group_leader(command.spawn().unwrap());
        let mut line = String::new();
        BufReader::new(guard.child_mut().stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let grandchild: u32 = line.trim().parse().unwrap();
        assert!(alive(grandchild));
        drop(guard);
        let deadline = Instant::now() + Duration::from_secs(5);
        while alive(grandchild) {
            assert!(Instant::now() < deadline, "the group's sleep survived");
            std::thread::sleep(POLL);
        }
    }

    #[test]
    fn stop_together_answers_for_each_child() {
        let mut obeys = ChildGuard::new(bash("exec sleep 60").spawn().unwrap());
        let mut ignores = ignoring_sigterm();
        let mut done = ChildGuard::new(bash("exit 3").spawn().unwrap());
        while done.exit_status().is_none() {
            std::thread::sleep(POLL);
        }
        let stopped = stop_together(
            &mut [&mut obeys, &mut ignores, &mut done],
            Duration::from_millis(500),
        );
        assert_eq!(stopped, [true, false, true]);
        assert_eq!(done.exit_status().and_then(|s| s.code()), Some(3));
    }
}
