//! [`Daemon`]: one of the workspace's servers run as a process. It is bound once it prints
//! `listening on <url>` on stdout; its output is captured (so it never blocks on a full pipe
//! and a failure can quote it), and it is stopped when dropped.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::child::{ChildGuard, Signal};
use crate::http::{http_get, HttpResponse};
use crate::Error;

/// What every server of this workspace prints on stdout once it is bound.
const ANNOUNCEMENT: &str = "listening on ";
/// How much of a daemon's stderr an error message quotes.
const STDERR_TAIL_LINES: usize = 40;
/// How long to wait for the last of an exited daemon's stderr.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);

/// The URL of a `listening on <url>` line, if `line` is one.
pub fn listening_url(line: &str) -> Option<&str> {
    line.trim()
        .strip_prefix(ANNOUNCEMENT)
        .map(str::trim)
        .filter(|url| !url.is_empty())
}

/// A running daemon. Dropping it kills the process (see [`Daemon::stop_on_drop`]).
///
/// Its stderr is kept (see [`Daemon::stderr`]) and echoed line by line as `[name] line` to
/// this process's stderr, which the test harness shows for a failing test only; with
/// [`Daemon::start_logged`] it goes to a file instead.
pub struct Daemon {
    name: String,
    child: ChildGuard,
    /// The announced URL and its address, once the `listening on` line has come.
    listening: Option<(String, SocketAddr)>,
    stdout: Arc<Captured>,
    stderr: Arc<Captured>,
}

impl Daemon {
    /// Starts `command` (stdin closed, stdout and stderr captured) and waits at most `timeout`
    /// for its `listening on <url>` line. Fails, quoting its stderr, when it exits first or
    /// stays silent; the process is then killed.
    pub fn start(name: &str, command: &mut Command, timeout: Duration) -> Result<Daemon, Error> {
        let mut daemon = Self::spawn(name, command)?;
        daemon.wait_listening(timeout)?;
        Ok(daemon)
    }

    /// Like [`Daemon::start`], but its stderr is appended to `log` as it arrives, for a
    /// person to follow, instead of being echoed.
    pub fn start_logged(
        name: &str,
        command: &mut Command,
        timeout: Duration,
        log: &Path,
    ) -> Result<Daemon, Error> {
        let file = File::create(log).map_err(|source| Error::Spawn {
            name: name.to_owned(),
            program: format!("its log {}", log.display()),
            source,
        })?;
        let mut daemon = Self::launch(name, command, Some(file))?;
        daemon.wait_listening(timeout)?;
        Ok(daemon)
    }

    /// Starts `command` like [`Daemon::start`] but returns at once, for a test of what the
    /// daemon does before it announces itself; [`Daemon::wait_listening`] waits later.
    pub fn spawn(name: &str, command: &mut Command) -> Result<Daemon, Error> {
        Self::launch(name, command, None)
    }

    fn launch(name: &str, command: &mut Command, log: Option<File>) -> Result<Daemon, Error> {
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| Error::Spawn {
                name: name.to_owned(),
                program: command.get_program().to_string_lossy().into_owned(),
                source,
            })?;
        let mut child = ChildGuard::new(child);
        let stdout = Arc::new(Captured::default());
        let stderr = Arc::new(Captured::default());
        if let Some(pipe) = child.child_mut().stdout.take() {
            let out = Arc::clone(&stdout);
            std::thread::spawn(move || out.read_lines(pipe, |_| {}));
        }
        if let Some(pipe) = child.child_mut().stderr.take() {
            let err = Arc::clone(&stderr);
            let prefix = format!("[{name}] ");
            let mut log = log;
            std::thread::spawn(move || {
                err.read_lines(pipe, |line| match &mut log {
                    Some(file) => {
                        let _ = file.write_all(line.as_bytes());
                    }
                    None => eprintln!("{prefix}{}", line.trim_end_matches('\n')),
                })
            });
        }
        Ok(Daemon {
            name: name.to_owned(),
            child,
            listening: None,
            stdout,
            stderr,
        })
    }

    /// Waits at most `timeout` for the `listening on <url>` line and returns the URL. Fails,
    /// quoting its stderr, when the daemon exits first or stays silent (it is then killed).
    pub fn wait_listening(&mut self, timeout: Duration) -> Result<&str, Error> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(line) = self.stdout.wait_announcement(Duration::from_millis(50)) {
                return self.take_announcement(line);
            }
            if let Some(status) = self.child.exit_status() {
                self.stderr.wait_closed(DRAIN_TIMEOUT);
                return Err(Error::ExitedEarly {
                    name: self.name.clone(),
                    status,
                    stderr: self.stderr.tail(STDERR_TAIL_LINES),
                });
            }
            if Instant::now() >= deadline {
                self.kill();
                return Err(Error::NotListening {
                    name: self.name.clone(),
                    timeout,
                    stderr: self.stderr.tail(STDERR_TAIL_LINES),
                });
            }
        }
    }

    /// The announced URL if the `listening on` line has come, without waiting.
    pub fn announced(&mut self) -> Option<&str> {
        if self.listening.is_none() {
            let line = self.stdout.announcement()?;
            return self.take_announcement(line).ok();
        }
        self.listening.as_ref().map(|(url, _)| url.as_str())
    }

    fn take_announcement(&mut self, line: String) -> Result<&str, Error> {
        let url = listening_url(&line).unwrap_or_default().to_owned();
        let addr = url
            .split_once("://")
            .map_or(url.as_str(), |(_, rest)| rest)
            .trim_end_matches('/')
            .parse()
            .map_err(|_| Error::BadAnnouncement {
                name: self.name.clone(),
                line: line.trim().to_owned(),
            });
        match addr {
            Ok(addr) => Ok(&self.listening.insert((url, addr)).0),
            Err(err) => {
                self.kill();
                Err(err)
            }
        }
    }

    /// Dropping the daemon stops it with SIGTERM first and SIGKILL only after `grace`
    /// (the default is SIGKILL at once).
    pub fn stop_on_drop(mut self, grace: Duration) -> Self {
        self.child.drop_grace = grace;
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The URL it announced, e.g. `http://127.0.0.1:40123`.
    ///
    /// # Panics
    /// Before the announcement (only possible after [`Daemon::spawn`]).
    pub fn url(&self) -> &str {
        &self.announcement().0
    }

    /// The address of [`Daemon::url`]. Panics like it.
    pub fn addr(&self) -> SocketAddr {
        self.announcement().1
    }

    fn announcement(&self) -> &(String, SocketAddr) {
        self.listening.as_ref().unwrap_or_else(|| {
            panic!(
                "{} has not announced its address yet (call wait_listening)",
                self.name
            )
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.pid()
    }

    /// Everything it printed on stdout so far.
    pub fn stdout(&self) -> String {
        self.stdout.text()
    }

    /// Everything it printed on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.text()
    }

    /// The exit status once it has ended, without waiting.
    pub fn exit_status(&mut self) -> Option<ExitStatus> {
        self.child.exit_status()
    }

    /// Sends `signal` (unless it has ended); returns whether it was delivered.
    pub fn signal(&mut self, signal: Signal) -> bool {
        self.child.signal(signal)
    }

    /// SIGTERM, then SIGKILL if it has not exited within `grace`. Returns the exit status
    /// when it stopped by itself, `None` when it had to be killed.
    pub fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        let status = self.child.stop(grace);
        self.drain();
        status
    }

    /// SIGKILL: no chance to flush or drain.
    pub fn kill(&mut self) -> Option<ExitStatus> {
        let status = self.child.kill();
        self.drain();
        status
    }

    /// Once the process has ended: waits (bounded) for the last of its output, so that
    /// [`Daemon::stderr`] holds everything it wrote.
    fn drain(&self) {
        self.stdout.wait_closed(DRAIN_TIMEOUT);
        self.stderr.wait_closed(DRAIN_TIMEOUT);
    }

    /// `GET path` on the daemon's address.
    pub fn get(&self, path: &str) -> HttpResponse {
        http_get(self.addr(), path)
    }
}

/// What a daemon has written to one pipe so far, filled by a reader thread.
#[derive(Default)]
struct Captured {
    state: Mutex<CapturedText>,
    changed: Condvar,
}

#[derive(Default)]
struct CapturedText {
    text: String,
    /// The first `listening on` line.
    announcement: Option<String>,
    closed: bool,
}

impl Captured {
    /// Reads `pipe` to its end line by line, keeping each line, then handing it to `on_line`.
    fn read_lines(&self, pipe: impl Read, mut on_line: impl FnMut(&str)) {
        let mut reader = BufReader::new(pipe);
        let mut bytes = Vec::new();
        while matches!(reader.read_until(b'\n', &mut bytes), Ok(n) if n > 0) {
            let line = String::from_utf8_lossy(&bytes);
            {
                let mut state = self.lock();
                state.text.push_str(&line);
                if state.announcement.is_none() && listening_url(&line).is_some() {
                    state.announcement = Some(line.clone().into_owned());
                }
            }
            self.changed.notify_all();
            on_line(&line);
            bytes.clear();
        }
        self.lock().closed = true;
        self.changed.notify_all();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CapturedText> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn text(&self) -> String {
        self.lock().text.clone()
    }

    fn tail(&self, lines: usize) -> String {
        let state = self.lock();
        let all: Vec<&str> = state.text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    fn announcement(&self) -> Option<String> {
        self.lock().announcement.clone()
    }

    /// The `listening on` line, waiting at most `timeout` for it.
    fn wait_announcement(&self, timeout: Duration) -> Option<String> {
        let state = self.lock();
        let (state, _) = self
            .changed
            .wait_timeout_while(state, timeout, |s| s.announcement.is_none())
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        state.announcement.clone()
    }

    fn wait_closed(&self, timeout: Duration) {
        let state = self.lock();
        let _ = self
            .changed
            .wait_timeout_while(state, timeout, |s| !s.closed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bash(script: &str) -> Command {
        let mut command = Command::new("bash");
        command.args(["-c", script]);
        command
    }

    const TIMEOUT: Duration = Duration::from_secs(20);

    #[test]
    fn reads_the_announced_url_and_address() {
        let mut daemon = Daemon::start(
            "announcer",
            &mut bash("echo starting; echo 'listening on http://127.0.0.1:4321' ; echo oops >&2; exec sleep 60"),
            TIMEOUT,
        )
        .unwrap();
        assert_eq!(daemon.url(), "http://127.0.0.1:4321");
        assert_eq!(daemon.addr(), "127.0.0.1:4321".parse().unwrap());
        assert!(daemon.stdout().starts_with("starting\nlistening on"));
        let status = daemon.stop(TIMEOUT).expect("sleep obeys SIGTERM");
        assert!(!status.success());
        assert_eq!(daemon.stderr(), "oops\n");
    }

    #[test]
    fn spawn_returns_at_once_and_wait_listening_waits() {
        let mut daemon = Daemon::spawn(
            "late",
            &mut bash("sleep 0.3; echo 'listening on https://127.0.0.1:5'; exec sleep 60"),
        )
        .unwrap();
        assert_eq!(daemon.announced(), None);
        assert_eq!(
            daemon.wait_listening(TIMEOUT).unwrap(),
            "https://127.0.0.1:5"
        );
        assert_eq!(daemon.announced(), Some("https://127.0.0.1:5"));
        assert_eq!(daemon.addr().port(), 5);
    }

    #[test]
    fn an_early_exit_quotes_stderr() {
        let err = Daemon::start(
            "quitter",
            &mut bash("echo 'bad key: x.y' >&2; exit 2"),
            TIMEOUT,
        )
        .err()
        .expect("fails");
        assert!(matches!(err, Error::ExitedEarly { .. }), "{err}");
        let text = err.to_string();
        assert!(text.contains("quitter exited (exit status: 2)"), "{text}");
        assert!(text.contains("bad key: x.y"), "{text}");
    }

    #[test]
    fn silence_past_the_deadline_is_an_error_and_the_process_is_killed() {
        let pid_file = tempfile_path("silent.pid");
        let script = format!("echo $$ > {}; echo waiting >&2; exec sleep 60", pid_file);
        let err = Daemon::start("mute", &mut bash(&script), Duration::from_millis(500))
            .err()
            .expect("fails");
        let text = err.to_string();
        assert!(
            text.contains("mute printed no `listening on <url>` line"),
            "{text}"
        );
        assert!(text.contains("waiting"), "{text}");
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        let _ = std::fs::remove_file(&pid_file);
        assert!(!Path::new(&format!("/proc/{}", pid.trim())).exists());
    }

    #[test]
    fn an_announcement_without_an_address_is_an_error() {
        let err = Daemon::start(
            "vague",
            &mut bash("echo 'listening on somewhere'; exec sleep 60"),
            TIMEOUT,
        )
        .err()
        .expect("fails");
        assert!(matches!(err, Error::BadAnnouncement { .. }), "{err}");
    }

    #[test]
    fn a_missing_program_is_named() {
        let err = Daemon::start(
            "ghost",
            &mut Command::new("/nonexistent/ghost-daemon"),
            TIMEOUT,
        )
        .err()
        .expect("fails");
        assert!(
            err.to_string().contains("/nonexistent/ghost-daemon"),
            "{err}"
        );
    }

    #[test]
    fn start_logged_writes_stderr_to_the_log() {
        let log = tempfile_path("daemon.log");
        let mut daemon = Daemon::start_logged(
            "logger",
            &mut bash("echo one >&2; echo 'listening on 127.0.0.1:1'; echo two >&2; exec sleep 60"),
            TIMEOUT,
            Path::new(&log),
        )
        .unwrap();
        let deadline = Instant::now() + TIMEOUT;
        while std::fs::read_to_string(&log).unwrap_or_default() != "one\ntwo\n" {
            assert!(
                Instant::now() < deadline,
                "log: {:?}",
                std::fs::read_to_string(&log)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        daemon.kill();
        let _ = std::fs::remove_file(&log);
    }

    fn tempfile_path(name: &str) -> String {
        std::env::temp_dir()
            .join(format!("testkit-{}-{name}", std::process::id()))
            .display()
            .to_string()
    }

    #[test]
    fn listening_url_reads_only_announcements() {
        assert_eq!(
            listening_url("listening on https://[::1]:8443\n"),
            Some("https://[::1]:8443")
        );
        assert_eq!(
            listening_url("  listening on 127.0.0.1:9 "),
            Some("127.0.0.1:9")
        );
        assert_eq!(listening_url("listening on "), None);
        assert_eq!(listening_url("not listening on x"), None);
    }
}
