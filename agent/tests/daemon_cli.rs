//! The binary's interfaces: `check-config` names the bad key, `run` validates before binding,
//! prints `listening on http://HOST:PORT`, is ready once the first poll was attempted even
//! when the JobManager refuses connections, and stops cleanly on SIGTERM.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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

fn http_get(addr: &str, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, text)
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
    let mut child = Command::new(BIN)
        .args([
            "run",
            "--listen",
            "127.0.0.1:0",
            "--jobmanager",
            &format!("http://127.0.0.1:{}", refused_port()),
            "--config",
        ])
        .arg(&config)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("first line: {line:?}"))
        .to_string();
    assert_ne!(addr.rsplit(':').next(), Some("0"), "port 0 is resolved");

    assert_eq!(http_get(&addr, "/healthz").0, 200);
    let deadline = Instant::now() + Duration::from_secs(5);
    while http_get(&addr, "/readyz").0 != 200 {
        assert!(Instant::now() < deadline, "not ready within 5 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (_, metrics) = http_get(&addr, "/metrics");
    assert!(
        metrics.contains("flink_autoscale_agent_errors_total{kind=\"connect\"}"),
        "{metrics}"
    );

    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("agent did not stop within 5 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
}
