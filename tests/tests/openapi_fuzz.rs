//! The coordinator's API fuzzed from its OpenAPI description (`docs/openapi.yaml`) by
//! schemathesis, an independent fuzzer from PyPI (installed into `.tmp/schemathesis` by
//! `scripts/setup-fuzz.sh`). A real coordinator on SQLite takes generated valid and invalid
//! requests, once with an agent token and once with an admin token, each run bounded in time.
//! The check is the one the API promises for any input: no server error. The coordinator's
//! own request metrics must then show no 5xx either.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use flink_autoscale_tests::coordinator_process::{Coordinator, ADMIN_TOKEN, AGENT_TOKEN};

/// Time budget of one schemathesis run (it fuzzes until it is spent).
const RUN_SECONDS: u64 = 30;
/// Hard bound on one run, start-up and shrinking included.
const RUN_DEADLINE: Duration = Duration::from_secs(240);

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repository root")
        .to_path_buf()
}

fn schemathesis() -> PathBuf {
    let bin = repo_root().join(".tmp/schemathesis/bin/schemathesis");
    assert!(
        bin.exists(),
        "{} is missing: scripts/setup-fuzz.sh installs it (scripts/test.sh runs it)",
        bin.display()
    );
    bin
}

/// Runs schemathesis against `url` with `token`; answers (success, output).
fn fuzz(url: &str, token: &str, report_dir: &std::path::Path) -> (bool, String) {
    let mut child = Command::new(schemathesis())
        .arg("run")
        .arg(repo_root().join("docs/openapi.yaml"))
        .args(["--url", url])
        .args(["--checks", "not_a_server_error"])
        .args(["--max-time", &RUN_SECONDS.to_string()])
        .args(["--request-timeout", "10"])
        .args(["--suppress-health-check", "all"])
        // One worker: hypothesis's lambda-source cache is not thread-safe on Python 3.11
        // ("AST constructor recursion depth mismatch" seen with two).
        .args(["--workers", "1"])
        .args(["--header", &format!("Authorization: Bearer {token}")])
        .env("SCHEMATHESIS_HOOKS", "")
        .env("NO_COLOR", "1")
        .current_dir(report_dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start schemathesis");
    let started = std::time::Instant::now();
    loop {
        if child.try_wait().expect("wait for schemathesis").is_some() {
            break;
        }
        if started.elapsed() > RUN_DEADLINE {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = child.wait_with_output().expect("schemathesis output");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Sum of the coordinator's request counts with a 5xx status, from `/metrics`.
fn server_errors(url: &str) -> (u64, u64) {
    let body = Command::new("curl")
        .args(["-sS", "--max-time", "10", &format!("{url}/metrics")])
        .output()
        .expect("curl /metrics");
    let text = String::from_utf8_lossy(&body.stdout).to_string();
    let mut total = 0;
    let mut errors = 0;
    for line in text.lines() {
        if !line.starts_with("flink_autoscale_coordinator_http_request_duration_seconds_count") {
            continue;
        }
        let count: f64 = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        total += count as u64;
        if line.contains("status=\"5") {
            errors += count as u64;
        }
    }
    (total, errors)
}

#[test]
fn schemathesis_finds_no_server_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    let coordinator = Coordinator::start(dir.path(), &["--min-interval", "0s"]);
    for (role, token) in [("agent", AGENT_TOKEN), ("admin", ADMIN_TOKEN)] {
        let (ok, output) = fuzz(&coordinator.url, token, dir.path());
        let tail: String = output
            .lines()
            .rev()
            .take(60)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n");
        println!("schemathesis as {role}:\n{tail}");
        assert!(ok, "schemathesis as {role} failed:\n{output}");
    }
    let (requests, errors) = server_errors(&coordinator.url);
    println!("coordinator: {requests} requests, {errors} answered 5xx");
    assert!(requests > 100, "schemathesis sent only {requests} requests");
    assert_eq!(
        errors, 0,
        "the coordinator answered {errors} requests with 5xx"
    );
}
