//! Every example scenario loads, and recorded CSV traces drive a source.

mod common;

use std::io::Write;

use common::Sim;
use flink_autoscale_simulator::Scenario;

#[test]
fn every_example_scenario_is_valid() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .map(|p| {
            Scenario::from_file(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            p.file_name().unwrap().to_string_lossy().into_owned()
        })
        .collect();
    names.sort();
    let expected = [
        "demo",
        "diurnal",
        "fleet-10k",
        "forward-chain",
        "large-10k",
        "session-cluster",
        "sink-limited",
        "three-vertex",
        "weekly",
    ];
    assert_eq!(names, expected.map(|n| format!("{n}.toml")));
    let session = Scenario::from_file(&dir.join("session-cluster.toml")).unwrap();
    assert_eq!(session.job_ids().len(), 3);
    let large = Scenario::from_file(&dir.join("large-10k.toml")).unwrap();
    assert_eq!(large.total_subtasks(), 10_000);
    let fleet = Scenario::from_file(&dir.join("fleet-10k.toml")).unwrap();
    assert_eq!(fleet.job_ids().len(), 10_000);
    assert_eq!(fleet.total_subtasks(), 100_000);
}

const TRACE_JOB: &str = r#"
[[job]]
name = "traced"
[[job.vertex]]
name = "Source: S"
parallelism = 1
capacity = 100000
source = { rate = { kind = "csv", path = "PATH", repeat = false } }
[[job.vertex]]
name = "Sink: W"
parallelism = 1
capacity = 100000
[[job.edge]]
from = "Source: S"
to = "Sink: W"
ship_strategy = "FORWARD"
"#;

#[tokio::test]
async fn csv_traces_relative_to_the_scenario_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("trace.csv"),
        "seconds,rate\n# a ramp\n0,100\n100,1100\n",
    )
    .unwrap();
    let scenario_path = dir.path().join("traced.toml");
    std::fs::File::create(&scenario_path)
        .unwrap()
        .write_all(TRACE_JOB.replace("PATH", "trace.csv").as_bytes())
        .unwrap();
    let sim = Sim::start(Scenario::from_file(&scenario_path).unwrap()).await;
    sim.advance_s(50);
    assert!((sim.control.model(&sim.job())[0].input_rate.unwrap() - 600.0).abs() < 1e-9);
    sim.advance_s(500);
    assert_eq!(
        sim.control.model(&sim.job())[0].input_rate,
        Some(1100.0),
        "holds the last rate"
    );
    sim.stop().await;

    std::fs::write(dir.path().join("bad.csv"), "0,100\n5,fast\n").unwrap();
    let bad = Scenario::from_toml_str(
        &TRACE_JOB.replace("PATH", dir.path().join("bad.csv").to_str().unwrap()),
    )
    .unwrap_err();
    assert_eq!(
        bad.field(),
        Some("job[0].vertex[0].source.rate.path"),
        "{bad}"
    );
    assert!(bad.to_string().contains("line 2"), "{bad}");
}

#[tokio::test]
async fn pending_records_can_register_on_the_first_record() {
    let text = common::chain_toml(100.0, 1000.0, "").replace(
        "topic = \"in\",",
        "topic = \"in\", lazy_pending_records = true,",
    );
    let sim = Sim::from_toml(&text).await;
    let base = format!(
        "/jobs/{}/vertices/{}/subtasks/metrics",
        sim.job(),
        sim.vertex(0)
    );
    let listed = |v: &serde_json::Value| {
        v.as_array()
            .unwrap()
            .iter()
            .any(|e| e["id"] == "Source__Kafka_Source.pendingRecords")
    };
    assert!(
        !listed(&sim.get_ok(&base).await),
        "not before the first record"
    );
    let get = format!("{base}?get=Source__Kafka_Source.pendingRecords");
    assert_eq!(sim.get_ok(&get).await, serde_json::json!([]));
    sim.advance_s(1);
    assert!(listed(&sim.get_ok(&base).await));
    assert_eq!(
        common::agg(
            &sim.get_ok(&get).await,
            "Source__Kafka_Source.pendingRecords",
            "sum"
        ),
        0.0
    );
    sim.stop().await;
}
