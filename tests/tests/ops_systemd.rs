//! The systemd units in `systemd/`: `systemd-analyze verify` and `security` on both, their
//! command lines against the real binaries, the `Type=notify` protocol end to end (READY=1,
//! WATCHDOG=1, STOPPING=1, exit 0 on SIGTERM within `TimeoutStopSec`), and — where this
//! machine runs systemd — a real start and stop of each unit.
//!
//! Checks that need a tool or a running systemd print `SKIPPED <test>: <reason>` and return.

#[allow(dead_code)]
mod ops_support;

use std::collections::BTreeMap;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use ops_support::{binary, read_repo_file, run, skip, tool_available, Daemon};

/// The highest `systemd-analyze security` exposure the issue accepts ("OK").
const MAX_EXPOSURE: f64 = 2.5;

/// A parsed unit file: section → key → values in order (keys may repeat).
struct Unit {
    sections: BTreeMap<String, BTreeMap<String, Vec<String>>>,
}

impl Unit {
    fn parse(text: &str) -> Unit {
        let mut sections: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
        let mut current = String::new();
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                current = name.to_string();
                continue;
            }
            let (key, value) = line
                .split_once('=')
                .unwrap_or_else(|| panic!("not KEY=VALUE in [{current}]: {line}"));
            sections
                .entry(current.clone())
                .or_default()
                .entry(key.trim().to_string())
                .or_default()
                .push(value.trim().to_string());
        }
        Unit { sections }
    }

    /// The last value of `key` in `[Service]`, which is the one systemd applies.
    fn service(&self, key: &str) -> Option<&str> {
        self.get("Service", key)
    }

    fn get(&self, section: &str, key: &str) -> Option<&str> {
        self.sections
            .get(section)?
            .get(key)?
            .last()
            .map(String::as_str)
    }
}

/// One daemon and its unit.
struct Service {
    /// `agent` or `coordinator`.
    short: &'static str,
    binary_name: &'static str,
}

const SERVICES: [Service; 2] = [
    Service {
        short: "agent",
        binary_name: ops_support::AGENT_BIN,
    },
    Service {
        short: "coordinator",
        binary_name: ops_support::COORDINATOR_BIN,
    },
];

impl Service {
    fn unit_name(&self) -> String {
        format!("{}.service", self.binary_name)
    }

    fn unit_text(&self) -> String {
        read_repo_file(&format!("systemd/{}", self.unit_name()))
    }

    fn unit(&self) -> Unit {
        Unit::parse(&self.unit_text())
    }

    fn installed_binary(&self) -> String {
        format!("/usr/bin/{}", self.binary_name)
    }

    fn installed_config(&self) -> String {
        format!("/etc/flink-autoscale/{}.toml", self.short)
    }

    fn environment_file(&self) -> String {
        format!("/etc/default/{}", self.binary_name)
    }

    /// The unit text with the installed paths replaced by the built binary and `config`.
    fn unit_text_for(&self, binary: &Path, config: &Path) -> String {
        self.unit_text()
            .replace(&self.installed_binary(), &binary.display().to_string())
            .replace(&self.installed_config(), &config.display().to_string())
    }
}

/// Splits an `Exec*=` line into words, dropping systemd's `-`/`@`/`+` prefixes.
fn exec_words(line: &str) -> Vec<String> {
    line.trim_start_matches(['-', '@', '+', '!', ':'])
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// Parses a systemd time span such as `30s`, `5min` or `300` (seconds).
fn timespan(text: &str) -> Duration {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: u64 = number
        .parse()
        .unwrap_or_else(|_| panic!("bad time span {text:?}"));
    let secs = match unit {
        "" | "s" | "sec" => n,
        "min" | "m" => n * 60,
        "h" => n * 3600,
        other => panic!("unhandled time unit {other:?} in {text:?}"),
    };
    Duration::from_secs(secs)
}

#[test]
fn units_carry_the_required_directives() {
    for svc in &SERVICES {
        let unit = svc.unit();
        let name = svc.unit_name();
        let expect = |key: &str, want: &str| {
            assert_eq!(unit.service(key), Some(want), "{name}: {key}=");
        };
        expect("Type", "notify");
        // Each unit describes its own daemon (the coordinator's once carried the agent's).
        let description = unit.get("Unit", "Description").expect("Description=");
        let other = if svc.short == "agent" {
            "coordinator"
        } else {
            "agent"
        };
        assert!(
            description.starts_with(&format!("flink-autoscale {}", svc.short))
                && !description.contains(other),
            "{name}: Description={description}"
        );
        let header = svc.unit_text();
        let first = header.lines().next().unwrap_or("");
        assert!(
            first.starts_with(&format!("# {}: ", svc.binary_name)),
            "{name}: header comment {first:?}"
        );
        assert!(
            !header
                .lines()
                .take_while(|l| l.starts_with('#'))
                .any(|l| l.contains("Flink JobManager") && svc.short == "coordinator"),
            "{name}: header describes the agent"
        );
        expect("EnvironmentFile", &format!("-{}", svc.environment_file()));
        expect("Restart", "on-failure");
        expect("NoNewPrivileges", "yes");
        expect("PrivateTmp", "yes");
        expect("ProtectHome", "yes");
        expect("ProtectSystem", "strict");
        expect("StateDirectory", svc.binary_name);
        expect("RestrictAddressFamilies", "AF_INET AF_INET6 AF_UNIX");
        assert!(
            unit.service("DynamicUser") == Some("yes") || unit.service("User").is_some(),
            "{name}: runs as DynamicUser= or a system user"
        );
        // Both daemons hold many sockets; the default soft limit (1024) is too low.
        let nofile: u64 = unit
            .service("LimitNOFILE")
            .expect("LimitNOFILE=")
            .parse()
            .expect("LimitNOFILE= is a number");
        assert!(nofile >= 16_384, "{name}: LimitNOFILE={nofile}");
        for key in ["StartLimitIntervalSec", "StartLimitBurst"] {
            assert!(unit.get("Unit", key).is_some(), "{name}: [Unit] {key}=");
        }
        // The daemons drain for at most their shutdown grace (10 s at most by default);
        // systemd must wait longer before SIGKILL.
        let stop = timespan(unit.service("TimeoutStopSec").expect("TimeoutStopSec="));
        let watchdog = timespan(unit.service("WatchdogSec").expect("WatchdogSec="));
        assert!(
            watchdog >= Duration::from_secs(10),
            "{name}: WatchdogSec={watchdog:?}"
        );
        assert!(
            stop >= Duration::from_secs(30),
            "{name}: TimeoutStopSec={stop:?}"
        );
        if svc.short == "coordinator" {
            // SIGHUP rereads tokens and the certificate.
            expect("ExecReload", "/bin/kill -HUP $MAINPID");
        }
        let pre = exec_words(unit.service("ExecStartPre").expect("ExecStartPre="));
        assert_eq!(
            pre,
            [
                svc.installed_binary(),
                "check-config".into(),
                "--config".into(),
                svc.installed_config()
            ],
            "{name}: ExecStartPre="
        );
        let start = exec_words(unit.service("ExecStart").expect("ExecStart="));
        assert_eq!(
            start,
            [
                svc.installed_binary(),
                "run".into(),
                "--config".into(),
                svc.installed_config()
            ],
            "{name}: ExecStart="
        );
    }
}

#[test]
fn units_pass_systemd_analyze_verify() {
    if !tool_available("systemd-analyze") {
        return skip(
            "units_pass_systemd_analyze_verify",
            "systemd-analyze is not installed (scripts/setup-ops.sh installs it)",
        );
    }
    for svc in &SERVICES {
        // `verify` needs the executables to exist: point the unit at the built binary.
        let dir = tempfile::tempdir().expect("temp dir");
        let unit_path = dir.path().join(svc.unit_name());
        let config = ops_support::repo_root().join(format!("packaging/{}.toml", svc.short));
        std::fs::write(
            &unit_path,
            svc.unit_text_for(&binary(svc.binary_name), &config),
        )
        .expect("write unit");
        let (status, stdout, stderr) = run(Command::new("systemd-analyze")
            .arg("verify")
            .arg(&unit_path)
            .env("SYSTEMD_LOG_COLOR", "0"));
        assert!(
            status.success() && stderr.trim().is_empty(),
            "systemd-analyze verify {} reported problems:\n{stdout}{stderr}",
            svc.unit_name()
        );
    }
}

#[test]
fn units_are_hardened_to_an_ok_exposure() {
    if !tool_available("systemd-analyze") {
        return skip(
            "units_are_hardened_to_an_ok_exposure",
            "systemd-analyze is not installed (scripts/setup-ops.sh installs it)",
        );
    }
    for svc in &SERVICES {
        let path = ops_support::repo_root().join(format!("systemd/{}", svc.unit_name()));
        let (status, stdout, stderr) = run(Command::new("systemd-analyze")
            .args(["security", "--offline=true", "--no-pager"])
            .arg(&path)
            .env("SYSTEMD_LOG_COLOR", "0"));
        assert!(
            status.success(),
            "systemd-analyze security failed: {stderr}"
        );
        let marker = format!("Overall exposure level for {}:", svc.unit_name());
        let score: f64 = stdout
            .lines()
            .find_map(|l| l.split_once(&marker).map(|(_, rest)| rest.to_string()))
            .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("no exposure score in:\n{stdout}"));
        eprintln!(
            "{}: systemd-analyze security exposure {score}",
            svc.unit_name()
        );
        assert!(
            score <= MAX_EXPOSURE,
            "{} exposure {score} > {MAX_EXPOSURE}:\n{stdout}",
            svc.unit_name()
        );
    }
}

#[test]
fn exec_lines_use_flags_the_binaries_accept() {
    for svc in &SERVICES {
        let bin = binary(svc.binary_name);
        let unit = svc.unit();
        let start = exec_words(unit.service("ExecStart").expect("ExecStart="));
        let flags = ops_support::cli_flags(&bin, &start[1]);
        for word in start.iter().filter(|w| w.starts_with("--")) {
            assert!(
                flags.contains(word),
                "{}: ExecStart passes {word}, which `{} {} --help` does not list ({flags:?})",
                svc.unit_name(),
                svc.binary_name,
                start[1]
            );
        }
        // ExecStartPre must accept the annotated example config the package installs, once
        // the operator has done what it asks (token files for the coordinator).
        let dir = tempfile::tempdir().expect("temp dir");
        let example = ops_support::daemon_test_config(svc.short, dir.path());
        let env =
            ops_support::daemon_test_env(svc.short, dir.path(), "127.0.0.1:8081".parse().unwrap());
        let pre = exec_words(unit.service("ExecStartPre").expect("ExecStartPre="));
        let (status, stdout, stderr) = run(Command::new(&bin)
            .args(&pre[1..pre.len() - 1])
            .arg(&example)
            .envs(env));
        assert!(
            status.success(),
            "{}: ExecStartPre rejects the packaged example config:\n{stdout}{stderr}",
            svc.unit_name()
        );
    }
}

/// `NAME=value` lines of an environment file, commented out (`#NAME=value`) or not.
fn environment_examples(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(|l| l.trim().trim_start_matches('#'))
        .filter_map(|l| l.split_once('='))
        .filter(|(name, _)| {
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        })
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect()
}

#[test]
fn environment_files_name_real_variables() {
    for svc in &SERVICES {
        let file = format!("systemd/{}.default", svc.binary_name);
        let examples = environment_examples(&read_repo_file(&file));
        assert!(!examples.is_empty(), "{file}: no examples");
        let bin = binary(svc.binary_name);
        let flag_vars = ops_support::cli_env_vars(&bin, "run");
        let dir = tempfile::tempdir().expect("temp dir");
        let config = ops_support::daemon_test_config(svc.short, dir.path());
        let base =
            ops_support::daemon_test_env(svc.short, dir.path(), "127.0.0.1:8081".parse().unwrap());
        for (name, value) in examples {
            if name == "RUST_LOG" {
                continue;
            }
            let prefix = format!(
                "{}__",
                svc.binary_name.replace('-', "_").to_ascii_uppercase()
            );
            assert!(
                flag_vars.contains(&name) || name.starts_with(&prefix),
                "{file}: {name} is neither a flag variable ({flag_vars:?}) nor {prefix}<SECTION>__<KEY>"
            );
            // The real loader must know the variable and accept the example value (the
            // database example names a server that is not there; its syntax is checked).
            if name.ends_with("_DATABASE") || name.ends_with("TOKENS_FILE") {
                continue;
            }
            let (status, stdout, stderr) = run(Command::new(&bin)
                .args(["check-config", "--config"])
                .arg(&config)
                .envs(base.iter().cloned())
                .env(&name, &value));
            assert!(
                status.success(),
                "{file}: {name}={value} is rejected:\n{stdout}{stderr}"
            );
        }
    }
}

/// A `NOTIFY_SOCKET` the test listens on, as systemd does for `Type=notify` units.
struct NotifySocket {
    socket: UnixDatagram,
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl NotifySocket {
    fn bind() -> NotifySocket {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("notify.sock");
        let socket = UnixDatagram::bind(&path).expect("bind notify socket");
        NotifySocket {
            socket,
            path,
            _dir: dir,
        }
    }

    /// Waits at most `timeout` for a message containing the line `want`; returns every
    /// message received meanwhile.
    fn wait_for(&self, want: &str, timeout: Duration) -> Result<Vec<String>, Vec<String>> {
        let deadline = Instant::now() + timeout;
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            self.socket
                .set_read_timeout(Some(left.max(Duration::from_millis(1))))
                .expect("socket timeout");
            let Ok(n) = self.socket.recv(&mut buf) else {
                break;
            };
            let message = String::from_utf8_lossy(&buf[..n]).into_owned();
            let found = message.lines().any(|l| l == want);
            seen.push(message);
            if found {
                return Ok(seen);
            }
        }
        Err(seen)
    }
}

#[test]
fn daemons_follow_the_notify_protocol_and_stop_cleanly() {
    let sim = ops_support::start_simulator();
    for svc in &SERVICES {
        let unit = svc.unit();
        let bin = binary(svc.binary_name);
        let state = tempfile::tempdir().expect("state dir");
        let config = ops_support::daemon_test_config(svc.short, state.path());
        let start = exec_words(
            svc.unit_text_for(&bin, &config)
                .lines()
                .find_map(|l| l.strip_prefix("ExecStart="))
                .expect("ExecStart="),
        );
        // What an operator would set in /etc/default/<daemon>: loopback, free port.
        let env = ops_support::daemon_test_env(svc.short, state.path(), sim.addr());
        let notify = NotifySocket::bind();
        let mut cmd = Command::new(&start[0]);
        cmd.args(&start[1..])
            .envs(env)
            .current_dir(state.path())
            .env("NOTIFY_SOCKET", &notify.path)
            // What systemd sets for WatchdogSec=, shortened so a keep-alive shows quickly.
            .env("WATCHDOG_USEC", "2000000")
            .env("STATE_DIRECTORY", state.path());
        let start_timeout = timespan(unit.service("TimeoutStartSec").unwrap_or("90s"));
        let mut daemon = Daemon::start(svc.binary_name, &mut cmd, start_timeout).expect("start");
        let ready = notify.wait_for("READY=1", Duration::from_secs(20));
        assert!(
            ready.is_ok(),
            "{}: no READY=1 (got {:?}); stderr:\n{}",
            svc.binary_name,
            ready,
            daemon.stderr()
        );
        assert_eq!(
            daemon.get("/healthz").status,
            200,
            "{}: /healthz after READY=1",
            svc.binary_name
        );
        let pinged = notify.wait_for("WATCHDOG=1", Duration::from_secs(5));
        assert!(
            pinged.is_ok(),
            "{}: no WATCHDOG=1 within 5 s with WATCHDOG_USEC=2s; got {pinged:?}",
            svc.binary_name
        );
        let stop_timeout = timespan(unit.service("TimeoutStopSec").expect("TimeoutStopSec="));
        let began = Instant::now();
        let status = daemon.stop(stop_timeout);
        let stopping = notify.wait_for("STOPPING=1", Duration::from_millis(500));
        assert!(
            stopping.is_ok(),
            "{}: no STOPPING=1 after SIGTERM (got {stopping:?})",
            svc.binary_name
        );
        let status = status.unwrap_or_else(|| {
            panic!(
                "{}: still running {stop_timeout:?} after SIGTERM (TimeoutStopSec)",
                svc.binary_name
            )
        });
        assert!(
            status.success(),
            "{}: exit status {status} after SIGTERM; stderr:\n{}",
            svc.binary_name,
            daemon.stderr()
        );
        eprintln!(
            "{}: READY=1, WATCHDOG=1, STOPPING=1, exit 0 in {:?} after SIGTERM",
            svc.binary_name,
            began.elapsed()
        );
    }
}

/// Whether this machine's PID 1 is a running systemd that this test may install units into.
fn systemd_is_running() -> Result<(), String> {
    if !Path::new("/run/systemd/system").exists() {
        return Err("/run/systemd/system does not exist (PID 1 is not systemd)".into());
    }
    let (_, state, _) = run(Command::new("systemctl").arg("is-system-running"));
    let state = state.trim().to_string();
    if !matches!(state.as_str(), "running" | "degraded") {
        return Err(format!("systemctl is-system-running says {state:?}"));
    }
    // Installing a runtime unit needs root.
    let (_, uid, _) = run(Command::new("id").arg("-u"));
    if uid.trim() != "0" {
        return Err("not root: cannot install a runtime unit".into());
    }
    Ok(())
}

/// A unit installed under /run/systemd/system for the test; stopped and removed on drop.
struct RuntimeUnit {
    name: String,
    path: PathBuf,
    config_dir: PathBuf,
}

impl Drop for RuntimeUnit {
    fn drop(&mut self) {
        let _ = run(Command::new("systemctl").args(["stop", &self.name]));
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_dir_all(&self.config_dir);
        // The unit's StateDirectory= (named after it), under DynamicUser='s private tree.
        let state = self.name.trim_end_matches(".service");
        let _ = std::fs::remove_dir_all(format!("/var/lib/private/{state}"));
        let _ = std::fs::remove_file(format!("/var/lib/{state}"));
        let _ = run(Command::new("systemctl").arg("daemon-reload"));
        let _ = run(Command::new("systemctl").args(["reset-failed", &self.name]));
    }
}

#[test]
fn units_start_and_stop_under_systemd() {
    if let Err(reason) = systemd_is_running() {
        return skip(
            "units_start_and_stop_under_systemd",
            &format!("no usable systemd on this machine: {reason}"),
        );
    }
    let sim = ops_support::start_simulator();
    for svc in &SERVICES {
        let bin = binary(svc.binary_name);
        // Outside /tmp (PrivateTmp= hides it) and readable by the unit's dynamic user.
        let config_dir = PathBuf::from(format!(
            "/run/flink-autoscale-ops-test-{}-{}",
            svc.short,
            std::process::id()
        ));
        std::fs::create_dir_all(&config_dir).expect("config dir");
        let config = ops_support::daemon_test_config(svc.short, &config_dir);
        let _ = run(Command::new("chmod").args(["-R", "a+rX"]).arg(&config_dir));
        let name = format!(
            "{}-ops-test-{}.service",
            svc.binary_name,
            std::process::id()
        );
        let unit = RuntimeUnit {
            path: PathBuf::from("/run/systemd/system").join(&name),
            name: name.clone(),
            config_dir,
        };
        // Its own state directory, so a real installation's data is never touched; the
        // coordinator's SQLite file goes there, as with the packaged default.
        let state_dir = name.trim_end_matches(".service").to_string();
        let env_file = unit.config_dir.join("environment");
        let env: String = ops_support::daemon_test_env(svc.short, &unit.config_dir, sim.addr())
            .into_iter()
            .map(|(k, v)| match k.as_str() {
                "FLINK_AUTOSCALE_COORDINATOR_DATABASE" => {
                    format!("{k}=sqlite:/var/lib/{state_dir}/coordinator.db\n")
                }
                _ => format!("{k}={v}\n"),
            })
            .collect();
        std::fs::write(&env_file, env).expect("environment file");
        let text = svc
            .unit_text_for(&bin, &config)
            .replace(
                &format!("EnvironmentFile=-{}", svc.environment_file()),
                &format!("EnvironmentFile={}", env_file.display()),
            )
            .replace(
                &format!("StateDirectory={}", svc.binary_name),
                &format!("StateDirectory={state_dir}"),
            )
            .replace(
                &format!("WorkingDirectory=%S/{}", svc.binary_name),
                &format!("WorkingDirectory=%S/{state_dir}"),
            );
        std::fs::write(&unit.path, text).expect("write runtime unit");
        let (status, _, stderr) = run(Command::new("systemctl").arg("daemon-reload"));
        assert!(status.success(), "daemon-reload: {stderr}");
        // For Type=notify, `systemctl start` returns once READY=1 arrived (or failed).
        let (status, _, stderr) =
            run(Command::new("timeout").args(["90", "systemctl", "start", &name]));
        let (_, journal, _) =
            run(Command::new("journalctl").args(["-u", &name, "--no-pager", "-n", "50"]));
        assert!(
            status.success(),
            "systemctl start {name}: {stderr}\n{journal}"
        );
        let (_, active, _) = run(Command::new("systemctl").args(["is-active", &name]));
        assert_eq!(active.trim(), "active", "{name} after start:\n{journal}");
        let (status, _, stderr) =
            run(Command::new("timeout").args(["60", "systemctl", "stop", &name]));
        assert!(status.success(), "systemctl stop {name}: {stderr}");
        let (_, show, _) = run(Command::new("systemctl").args([
            "show",
            &name,
            "-p",
            "Result",
            "-p",
            "ExecMainStatus",
        ]));
        assert!(
            show.contains("Result=success") && show.contains("ExecMainStatus=0"),
            "{name} did not stop cleanly: {show}"
        );
        drop(unit);
    }
}
