//! The binary's interfaces: `check-config` names the bad key, `run` validates before binding,
//! prints `listening on http://HOST:PORT`, is ready once the first poll was attempted even
//! when the JobManager refuses connections, and stops cleanly on SIGTERM.

use std::process::Command;
use std::time::{Duration, Instant};

use flink_autoscale_testkit::Daemon;

const BIN: &str = env!("CARGO_BIN_EXE_flink-autoscale-agent");

fn write_config(dir: &tempfile::TempDir, text: &str) -> std::path::PathBuf {
    let path = dir.path().join("agent.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// A loopback port with nothing listening on it.
fn refused_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn check_config_names_the_bad_key() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write_config(&dir, "[collector]\npoll_interval = \"2s\"\n");
    let out = Command::new(BIN)
        .args(["check-config", "--config"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("collector.poll_interval"), "{err}");

    let good = write_config(&dir, "[jobmanager]\nurl = \"http://127.0.0.1:8081\"\n");
    let out = Command::new(BIN)
        .args(["check-config", "--config"])
        .arg(&good)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("configuration OK"));
}

#[test]
fn run_rejects_a_bad_config_before_binding() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write_config(&dir, "[jobmanager]\nmax_concurrent_requests = 0\n");
    // Hold the port: if the agent bound before validating, it would fail differently.
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let listen = held.local_addr().unwrap().to_string();
    let out = Command::new(BIN)
        .args(["run", "--listen", &listen, "--config"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("jobmanager.max_concurrent_requests"), "{err}");
}

#[test]
fn run_serves_is_ready_without_a_jobmanager_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        &dir,
        "[jobmanager]\nrequest_timeout = \"300ms\"\nfetcher_update_interval = \"1s\"\n[collector]\npoll_interval = \"1s\"\npoll_deadline = \"1s\"\n",
    );
    let mut agent = Daemon::start(
        "agent",
        Command::new(BIN)
            .args([
                "run",
                "--listen",
                "127.0.0.1:0",
                "--jobmanager",
                &format!("http://127.0.0.1:{}", refused_port()),
                "--config",
            ])
            .arg(&config),
        Duration::from_secs(30),
    )
    .expect("the agent serves");
    assert!(
        agent.stdout().starts_with("listening on http://"),
        "first line: {:?}",
        agent.stdout()
    );
    assert_ne!(agent.addr().port(), 0, "port 0 is resolved");

    assert_eq!(agent.get("/healthz").status, 200);
    let deadline = Instant::now() + Duration::from_secs(5);
    while agent.get("/readyz").status != 200 {
        assert!(Instant::now() < deadline, "not ready within 5 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    let metrics = agent.get("/metrics").body;
    assert!(
        metrics.contains("flink_autoscale_agent_errors_total{kind=\"connect\"}"),
        "{metrics}"
    );

    let status = agent
        .stop(Duration::from_secs(5))
        .expect("agent did not stop within 5 s of SIGTERM");
    assert!(status.success(), "{status:?}");
}
