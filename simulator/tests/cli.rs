//! The `flink-sim` binary as a process: scenario errors, the listening line, signals.

use std::io::Write;
use std::process::Command;
use std::time::Duration;

use flink_autoscale_testkit::Daemon;

const BIN: &str = env!("CARGO_BIN_EXE_flink-sim");

fn scenario_file(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f
}

/// Runs the binary on a scenario text; returns exit code and stderr.
fn run_bad(text: &str) -> (Option<i32>, String) {
    let f = scenario_file(text);
    let out = Command::new(BIN)
        .args([
            "--scenario",
            f.path().to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ])
        .output()
        .expect("flink-sim runs");
    assert!(
        out.stdout.is_empty(),
        "nothing may be served: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const GOOD: &str = r#"
[[job]]
name = "cli"
[[job.vertex]]
name = "Source: S"
parallelism = 1
capacity = 100
source = { rate = { kind = "constant", value = 10 } }
[[job.vertex]]
name = "Sink: W"
parallelism = 1
capacity = 100
[[job.edge]]
from = "Source: S"
to = "Sink: W"
ship_strategy = "FORWARD"
"#;

#[test]
fn bad_scenarios_exit_64_naming_the_field() {
    for (edit, field) in [
        (
            ("capacity = 100\nsource", "capacity = -5\nsource"),
            "job[0].vertex[0].capacity",
        ),
        (
            (
                "ship_strategy = \"FORWARD\"",
                "ship_strategy = \"SIDEWAYS\"",
            ),
            "job[0].edge[0].ship_strategy",
        ),
        (
            ("to = \"Sink: W\"", "to = \"Nowhere\""),
            "job[0].edge[0].to",
        ),
        (("value = 10", "value = \"fast\""), "value"),
        (
            ("capacity = 100\nsource", "capacityy = 100\nsource"),
            "capacityy",
        ),
        (
            (
                "parallelism = 1\ncapacity = 100\nsource",
                "parallelism = 0\ncapacity = 100\nsource",
            ),
            "job[0].vertex[0].parallelism",
        ),
    ] {
        let text = GOOD.replacen(edit.0, edit.1, 1);
        assert_ne!(text, GOOD, "edit applies: {edit:?}");
        let (code, stderr) = run_bad(&text);
        assert_eq!(code, Some(64), "{edit:?}: {stderr}");
        assert!(
            stderr.contains(field),
            "{edit:?}: stderr does not name {field}: {stderr}"
        );
    }
    let out = Command::new(BIN)
        .args(["--scenario", "/nonexistent/scenario.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/scenario.toml"));
}

#[test]
fn serves_then_stops_on_sigterm() {
    let f = scenario_file(GOOD);
    let mut sim = Daemon::start(
        "flink-sim",
        Command::new(BIN).args([
            "--scenario",
            f.path().to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--manual-clock",
        ]),
        Duration::from_secs(30),
    )
    .expect("flink-sim serves");
    assert!(
        sim.stdout().starts_with("listening on http://"),
        "unexpected first line: {:?}",
        sim.stdout()
    );
    let addr = sim.addr();
    assert!(addr.ip().is_loopback() && addr.port() != 0, "{addr}");

    let resp = sim.get("/v1/jobs");
    assert_eq!(resp.status, 200, "{}", resp.body);
    assert!(
        resp.body.contains("\"status\":\"RUNNING\""),
        "{}",
        resp.body
    );

    let exit = sim
        .stop(Duration::from_secs(10))
        .expect("flink-sim did not stop within 10 s of SIGTERM");
    assert!(exit.success(), "{exit:?}");
}

#[test]
fn check_mode_validates_without_serving() {
    let f = scenario_file(GOOD);
    let out = Command::new(BIN)
        .args(["--scenario", f.path().to_str().unwrap(), "--check"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("is valid"));
}
