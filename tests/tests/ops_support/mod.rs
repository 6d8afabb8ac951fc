//! Helpers shared by the operations tests (`ops_*.rs`): where the repository is, the daemons'
//! test configuration, and skipping with a printed reason when a tool the check needs is
//! absent. Running the daemons and plain HTTP over loopback come from the test kit
//! (re-exported here).
//!
//! Each test file uses a subset, hence the `dead_code` allowance at the `mod` declaration.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

// Each test file uses a subset (see the `dead_code` allowance above).
#[allow(unused_imports)]
pub use flink_autoscale_testkit::{http_get, http_request, Daemon, HttpResponse};

pub mod dashboard;
pub mod walkthrough;

pub const AGENT_BIN: &str = "flink-autoscale-agent";
pub const COORDINATOR_BIN: &str = "flink-autoscale-coordinator";
pub const SIMULATOR_BIN: &str = "flink-sim";
/// How long a daemon may take to print its `listening on` line.
pub const DAEMON_START_TIMEOUT: Duration = Duration::from_secs(30);

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

/// Path of a workspace binary, as `scripts/test.sh` builds them before the tests.
pub fn binary(name: &str) -> PathBuf {
    flink_autoscale_testkit::binary(name).expect("a workspace binary")
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
        DAEMON_START_TIMEOUT,
    )
    .expect("start the simulator")
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
        flink_autoscale_testkit::write_private(
            &dir.join("agent-tokens"),
            &format!("{AGENT_TOKEN}\n"),
        )
        .expect("tokens");
        flink_autoscale_testkit::write_private(
            &dir.join("admin-tokens"),
            &format!("{ADMIN_TOKEN}\n"),
        )
        .expect("tokens");
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
            ("FLINK_AUTOSCALE_COORDINATOR__LISTEN", "127.0.0.1:0".into()),
            (
                "FLINK_AUTOSCALE_COORDINATOR__DATABASE__URL",
                format!("sqlite:{}", path("coordinator.db")),
            ),
            (
                "FLINK_AUTOSCALE_COORDINATOR__AUTH__AGENT_TOKENS_FILE",
                path("agent-tokens"),
            ),
            (
                "FLINK_AUTOSCALE_COORDINATOR__AUTH__ADMIN_TOKENS_FILE",
                path("admin-tokens"),
            ),
        ],
        other => panic!("unknown daemon {other}"),
    };
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}
