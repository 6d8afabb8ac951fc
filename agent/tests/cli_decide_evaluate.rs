//! Process-level tests of `flink-autoscale-agent decide` and `evaluate`: the JSON contract,
//! stdin with `-`, and exit code 2 with a message naming the field on invalid input.

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_flink-autoscale-agent");

/// Runs the agent with `args`, feeding `stdin`; kills it if it runs longer than 20 s.
fn run(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the agent");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("{args:?} did not finish within 20 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

fn with_file(contents: &str, command: &str) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("input.json");
    std::fs::write(&path, contents).unwrap();
    run(&[command, "--input", path.to_str().unwrap()], "")
}

fn decide_input() -> Value {
    json!({
        "now_ms": 0,
        "config": {"job.autoscaler.enabled": "true", "job.autoscaler.utilization.target": "0.5",
                   "job.autoscaler.catch-up.duration": "0s"},
        "processing_backlog": false,
        "vertices": [
            {"id": "s", "name": "Source", "parallelism": 2, "max_parallelism": 128, "source_partitions": 0,
             "inputs": [], "true_processing_rate": 1000.0, "target_data_rate": 500.0, "catch_up_data_rate": 0.0},
            {"id": "a", "name": "Map", "parallelism": 4, "max_parallelism": 128,
             "inputs": [{"id": "s", "ship_strategy": "HASH"}],
             "true_processing_rate": 400.0, "target_data_rate": 500.0, "catch_up_data_rate": 0.0}
        ],
        "state": {"history": {}, "delayed_scale_down": {}}
    })
}

fn evaluate_input() -> Value {
    let sample = |t: u64, k: f64| {
        json!({"time_ms": t, "vertices": {
            "s": {"busy_time_ms_per_second": {"min": 90, "max": 100, "avg": 95}, "backpressured_time_ms_per_second": 0,
                  "num_records_in": 5000.0 * k, "num_records_out": 5000.0 * k, "num_records_in_per_second": 500,
                  "pending_records": 0, "accumulated_busy_time_ms": 0},
            "a": {"busy_time_ms_per_second": {"max": 950}, "num_records_in": 5000.0 * k, "num_records_in_per_second": 500}}})
    };
    json!({
        "now_ms": 2000, "config": {"job.autoscaler.enabled": true}, "job_running_since_ms": 0,
        "vertices": [
            {"id": "s", "name": "Source", "parallelism": 1, "max_parallelism": 128, "source_partitions": 0, "inputs": []},
            {"id": "a", "name": "Map", "parallelism": 1, "max_parallelism": 128, "inputs": [{"id": "s", "ship_strategy": "HASH"}]}
        ],
        "samples": [sample(0, 0.0), sample(2000, 0.2)]
    })
}

fn stdout_json(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "exit {:?}, stderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object on stdout")
}

#[test]
fn decide_reads_a_file_and_prints_one_decision() {
    let out = with_file(&decide_input().to_string(), "decide");
    let d = stdout_json(&out);
    assert_eq!(d["scale"], json!(true));
    assert_eq!(d["parallelism"], json!({"a": 11, "s": 2}));
    let a = &d["vertices"][1];
    assert_eq!(
        (
            a["id"].as_str(),
            a["current"].as_u64(),
            a["recommended"].as_u64()
        ),
        (Some("a"), Some(4), Some(11))
    );
    assert_eq!(a["outside_band"], json!(true));
    assert_eq!(a["limited_by"], json!(["alignment"]));
    assert!(a["reason"].as_str().unwrap().starts_with("Map: 4 -> 11"));
    assert_eq!(d["state"]["history"]["a"][0]["new"], json!(11));
}

#[test]
fn decide_reads_stdin_and_its_state_feeds_the_next_call() {
    let first = stdout_json(&run(
        &["decide", "--input", "-"],
        &decide_input().to_string(),
    ));
    let mut next = decide_input();
    next["now_ms"] = json!(60_000);
    next["state"] = first["state"].clone();
    next["vertices"][1]["parallelism"] = json!(11);
    next["vertices"][1]["true_processing_rate"] = json!(1100.0);
    let second = stdout_json(&run(&["decide", "--input", "-"], &next.to_string()));
    assert_eq!(
        second["scale"],
        json!(false),
        "no oscillation at the recommended parallelism"
    );
    assert_eq!(second["parallelism"]["a"], json!(11));
}

#[test]
fn evaluate_prints_figures_and_the_decision() {
    let out = stdout_json(&with_file(&evaluate_input().to_string(), "evaluate"));
    let s = &out["evaluated"]["vertices"]["s"];
    assert_eq!(s["load"], json!(0.1));
    assert_eq!(s["true_processing_rate"], json!(5000.0));
    assert_eq!(s["target_data_rate"], json!(500.0));
    assert_eq!(s["lag"], json!(0.0));
    assert_eq!(out["evaluated"]["processing_backlog"], json!(false));
    assert!(out["decision"]["parallelism"].is_object());
    assert!(out["decision"]["vertices"].is_array());
}

#[test]
fn invalid_input_exits_2_naming_the_field() {
    let mut unknown_top = decide_input();
    unknown_top["now"] = json!(1);
    let mut unknown_vertex_field = decide_input();
    unknown_vertex_field["vertices"][0]["paralelism"] = json!(1);
    let mut wrong_type = decide_input();
    wrong_type["vertices"][1]["parallelism"] = json!("four");
    let mut bad_config = decide_input();
    bad_config["config"]["job.autoscaler.utilization.target"] = json!("1.5");
    let mut unknown_input = decide_input();
    unknown_input["vertices"][1]["inputs"][0]["id"] = json!("ghost");
    let mut missing = decide_input();
    missing["vertices"][0]
        .as_object_mut()
        .unwrap()
        .remove("true_processing_rate");
    let mut bad_float = decide_input();
    bad_float["vertices"][0]["target_data_rate"] = json!("lots");
    let mut bad_state = decide_input();
    bad_state["state"]["histroy"] = json!({});
    let cases = [
        ("decide", unknown_top.to_string(), "now"),
        ("decide", unknown_vertex_field.to_string(), "paralelism"),
        ("decide", wrong_type.to_string(), "vertices[1].parallelism"),
        (
            "decide",
            bad_config.to_string(),
            "job.autoscaler.utilization.target",
        ),
        (
            "decide",
            unknown_input.to_string(),
            "vertices[1].inputs[0].id",
        ),
        ("decide", missing.to_string(), "true_processing_rate"),
        (
            "decide",
            bad_float.to_string(),
            "vertices[0].target_data_rate",
        ),
        ("decide", bad_state.to_string(), "histroy"),
        ("decide", "{ not json".to_owned(), "line 1"),
        ("decide", format!("{} {{}}", decide_input()), "trailing"),
    ];
    for (command, input, field) in cases {
        let out = run(&[command, "--input", "-"], &input);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{field}: stderr {stderr}");
        assert!(
            stderr.contains(field),
            "stderr `{stderr}` does not name `{field}`"
        );
        assert!(out.stdout.is_empty(), "{field}: nothing on stdout");
    }
}

#[test]
fn invalid_evaluate_input_exits_2_naming_the_field() {
    let mut unknown_metric = evaluate_input();
    unknown_metric["samples"][0]["vertices"]["s"]["busy_time"] = json!(1);
    let mut bad_aggregate = evaluate_input();
    bad_aggregate["samples"][1]["vertices"]["a"]["busy_time_ms_per_second"]["p99"] = json!(1);
    let mut unordered = evaluate_input();
    unordered["samples"][1]["time_ms"] = json!(0);
    let mut no_counter = evaluate_input();
    for sample in no_counter["samples"].as_array_mut().unwrap() {
        sample["vertices"]["s"]
            .as_object_mut()
            .unwrap()
            .remove("num_records_in");
    }
    let cases = [
        (
            unknown_metric.to_string(),
            "samples[0].vertices.s.busy_time",
        ),
        (bad_aggregate.to_string(), "p99"),
        (unordered.to_string(), "samples[1].time_ms"),
        (no_counter.to_string(), "num_records_in"),
    ];
    for (input, field) in cases {
        let out = run(&["evaluate", "--input", "-"], &input);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{field}: stderr {stderr}");
        assert!(
            stderr.contains(field),
            "stderr `{stderr}` does not name `{field}`"
        );
    }
    let missing = run(&["evaluate", "--input", "/nonexistent/window.json"], "");
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("--input"));
}
