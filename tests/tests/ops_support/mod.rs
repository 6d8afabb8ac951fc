//! Helpers shared by the operations tests (`ops_*.rs`): where the repository and the built
//! daemons are, running a daemon until it prints its address, plain HTTP GETs over loopback,
//! and skipping with a printed reason when a tool the check needs is absent.
//!
//! Each test file uses a subset, hence the `dead_code` allowance at the `mod` declaration.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::{Duration, Instant};

pub const AGENT_BIN: &str = "flink-autoscale-agent";
pub const COORDINATOR_BIN: &str = "flink-autoscale-coordinator";
pub const SIMULATOR_BIN: &str = "flink-sim";

/// The repository root (the workspace).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests package lives inside the workspace")
        .to_path_buf()
}

/// Reads a repository file as text, naming it on failure.
pub fn read_repo_file(relative: &str) -> String {
    let path = repo_root().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The cargo profile directory this test binary was built into (`target/debug`): the test
/// executable lives in `<profile dir>/deps/`.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current test executable");
    exe.parent()
        .and_then(Path::parent)
        .expect("test executables live in <target>/<profile>/deps")
        .to_path_buf()
}

/// Path of a workspace binary, built once per test process with `cargo build` into the same
/// target directory and profile as the tests themselves, so it is never stale.
pub fn binary(name: &str) -> PathBuf {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let profile = profile_dir();
        let target_dir = profile.parent().expect("profile dir has a parent");
        let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        cargo
            .current_dir(repo_root())
            .env("CARGO_TARGET_DIR", target_dir)
            .args(["build", "--quiet", "--bins"])
            .args(["-p", AGENT_BIN, "-p", COORDINATOR_BIN, "-p"])
            .arg("flink-autoscale-simulator");
        if profile.file_name().is_some_and(|n| n == "release") {
            cargo.arg("--release");
        }
        let output = cargo
            .output()
            .map_err(|e| format!("cannot run cargo: {e}"))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&output.stderr).into_owned())
        }
    });
    if let Err(err) = built {
        panic!("building the daemons failed:\n{err}");
    }
    profile_dir().join(name)
}

/// Prints why a check is skipped. The tests call it and return, so the reason shows up in
/// `cargo test -- --nocapture` output and in the captured output of the test.
pub fn skip(test: &str, reason: &str) {
    eprintln!("SKIPPED {test}: {reason}");
}

/// Whether `program` can be run (it is on PATH and answers `--version`).
pub fn tool_available(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs a command to completion, returning (status, stdout, stderr) as text.
pub fn run(cmd: &mut Command) -> (ExitStatus, String, String) {
    let output = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    (
        output.status,
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The long flags (`--name`) a subcommand accepts, read from its real `--help` output.
pub fn cli_flags(binary: &Path, subcommand: &str) -> Vec<String> {
    let (status, stdout, stderr) = run(Command::new(binary).args([subcommand, "--help"]));
    assert!(
        status.success(),
        "{} {subcommand} --help failed: {stderr}",
        binary.display()
    );
    let mut flags: Vec<String> = stdout
        .split(|c: char| c.is_whitespace() || c == ',' || c == '[' || c == ']' || c == '=')
        .filter(|word| word.starts_with("--") && word.len() > 2)
        .map(|word| {
            word.trim_end_matches(|c: char| !c.is_alphanumeric())
                .to_string()
        })
        .collect();
    flags.sort();
    flags.dedup();
    flags
}

/// The environment variables a subcommand reads for its flags, from clap's `[env: NAME=]`.
pub fn cli_env_vars(binary: &Path, subcommand: &str) -> Vec<String> {
    let (_, stdout, _) = run(Command::new(binary).args([subcommand, "--help"]));
    let mut vars: Vec<String> = stdout
        .match_indices("[env: ")
        .map(|(at, marker)| {
            stdout[at + marker.len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        })
        .collect();
    vars.sort();
    vars.dedup();
    vars
}

/// A daemon started for a test; stopped (SIGTERM, then SIGKILL) when dropped.
pub struct Daemon {
    pub name: String,
    pub child: Child,
    /// The address from its `listening on http://HOST:PORT` line.
    pub addr: SocketAddr,
    stderr_path: PathBuf,
    _stderr_dir: tempfile::TempDir,
}

impl Daemon {
    /// Starts `cmd` and waits (at most `timeout`) for its `listening on` line on stdout.
    pub fn start(name: &str, cmd: &mut Command, timeout: Duration) -> Daemon {
        let stderr_dir = tempfile::tempdir().expect("temp dir");
        let stderr_path = stderr_dir.path().join("stderr.log");
        let stderr = File::create(&stderr_path).expect("stderr log");
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        // Keeps draining stdout for the daemon's whole life so it never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(addr) = line
                    .trim()
                    .strip_prefix("listening on http://")
                    .and_then(|a| a.trim_end_matches('/').parse::<SocketAddr>().ok())
                {
                    let _ = tx.send(addr);
                }
            }
        });
        let mut daemon = Daemon {
            name: name.to_string(),
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            stderr_path,
            _stderr_dir: stderr_dir,
        };
        // Wait for the address, failing fast if the daemon exits first.
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(addr) = rx.recv_timeout(Duration::from_millis(100)) {
                daemon.addr = addr;
                break;
            }
            if let Ok(Some(status)) = daemon.child.try_wait() {
                panic!(
                    "{name} exited ({status}) before serving; stderr:\n{}",
                    daemon.stderr()
                );
            }
            assert!(
                Instant::now() < deadline,
                "{name} printed no `listening on` line within {timeout:?}; stderr:\n{}",
                daemon.stderr()
            );
        }
        daemon
    }

    /// What the daemon wrote to stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// Sends SIGTERM and waits at most `timeout` for the exit status.
    pub fn terminate(&mut self, timeout: Duration) -> Option<ExitStatus> {
        send_sigterm(&self.child);
        wait_with_timeout(&mut self.child, timeout)
    }

    /// GET `path` on the daemon.
    pub fn get(&self, path: &str) -> HttpResponse {
        http_get(self.addr, path)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None))
            && self.terminate(Duration::from_secs(15)).is_none()
        {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Sends SIGTERM to a child process (through kill(1), which keeps the tests free of `unsafe`).
pub fn send_sigterm(child: &Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
}

/// Waits for a child to exit, at most `timeout`.
pub fn wait_with_timeout(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A buffered HTTP response.
pub struct HttpResponse {
    pub status: u16,
    pub body: String,
}

/// One HTTP/1.1 GET over loopback with `Connection: close`, bounded by a 10 s timeout.
pub fn http_get(addr: SocketAddr, path: &str) -> HttpResponse {
    http_request(addr, "GET", path, None, None)
}

/// One HTTP/1.1 request over loopback with `Connection: close`, an optional bearer token and
/// an optional JSON body, bounded by a 10 s timeout.
pub fn http_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    bearer: Option<&str>,
    json: Option<&str>,
) -> HttpResponse {
    let timeout = Duration::from_secs(10);
    let mut stream = TcpStream::connect_timeout(&addr, timeout)
        .unwrap_or_else(|e| panic!("cannot connect to {addr}: {e}"));
    stream.set_read_timeout(Some(timeout)).expect("timeout");
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some(token) = bearer {
        head.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    let body = json.unwrap_or_default();
    if json.is_some() {
        head.push_str("Content-Type: application/json\r\n");
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(body.as_bytes()))
        .expect("send request");
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .unwrap_or_else(|e| panic!("reading {method} {path} from {addr}: {e}"));
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{method} {path} from {addr}: no status line in {head:?}"));
    let chunked = head.lines().any(|l| {
        l.to_ascii_lowercase()
            .starts_with("transfer-encoding: chunked")
    });
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_string()
    };
    HttpResponse { status, body }
}

/// Decodes a chunked transfer-encoded body.
fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size_line, after)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size_line.split(';').next().unwrap_or("").trim(), 16)
            .unwrap_or(0);
        if size == 0 || after.len() < size {
            break;
        }
        out.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    out
}

/// The scenario the operations tests run the simulated JobManager on.
pub const SIM_SCENARIO: &str = "simulator/scenarios/three-vertex.toml";

/// Starts `flink-sim` on a free loopback port.
pub fn start_simulator() -> Daemon {
    Daemon::start(
        SIMULATOR_BIN,
        Command::new(binary(SIMULATOR_BIN))
            .arg("--scenario")
            .arg(repo_root().join(SIM_SCENARIO))
            .args(["--listen", "127.0.0.1:0"]),
        Duration::from_secs(30),
    )
}

/// An agent token and an admin token the tests give the coordinator (at least 16 characters,
/// different from each other).
pub const AGENT_TOKEN: &str = "ops-test-agent-token-0123456789";
pub const ADMIN_TOKEN: &str = "ops-test-admin-token-0123456789";

/// Writes what a daemon needs next to its packaged example config in `dir`: a copy of
/// `packaging/<short>.toml` (returned) and, for the coordinator, token files.
pub fn daemon_test_config(short: &str, dir: &Path) -> PathBuf {
    let config = dir.join(format!("{short}.toml"));
    std::fs::copy(repo_root().join(format!("packaging/{short}.toml")), &config)
        .unwrap_or_else(|e| panic!("copying packaging/{short}.toml: {e}"));
    if short == "coordinator" {
        std::fs::write(dir.join("agent-tokens"), format!("{AGENT_TOKEN}\n")).expect("tokens");
        std::fs::write(dir.join("admin-tokens"), format!("{ADMIN_TOKEN}\n")).expect("tokens");
    }
    config
}

/// Environment that points a daemon at loopback-only resources in `dir` (written by
/// [`daemon_test_config`]) and a free port: what an operator would put in the unit's
/// `/etc/default/<daemon>` file.
pub fn daemon_test_env(short: &str, dir: &Path, jobmanager: SocketAddr) -> Vec<(String, String)> {
    let path = |name: &str| dir.join(name).display().to_string();
    let pairs: Vec<(&str, String)> = match short {
        "agent" => vec![
            (
                "FLINK_AUTOSCALE_AGENT__SERVER__LISTEN",
                "127.0.0.1:0".into(),
            ),
            (
                "FLINK_AUTOSCALE_AGENT__JOBMANAGER__URL",
                format!("http://{jobmanager}"),
            ),
        ],
        "coordinator" => vec![
            ("FLINK_AUTOSCALE_COORDINATOR_LISTEN", "127.0.0.1:0".into()),
            (
                "FLINK_AUTOSCALE_COORDINATOR_DATABASE",
                format!("sqlite:{}", path("coordinator.db")),
            ),
            (
                "FLINK_AUTOSCALE_COORDINATOR_AGENT_TOKENS_FILE",
                path("agent-tokens"),
            ),
            (
                "FLINK_AUTOSCALE_COORDINATOR_ADMIN_TOKENS_FILE",
                path("admin-tokens"),
            ),
        ],
        other => panic!("unknown daemon {other}"),
    };
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}
