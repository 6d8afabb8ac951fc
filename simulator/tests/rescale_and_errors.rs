//! The adaptive-scheduler rescale flow, stop-with-savepoint, failover restarts, and the
//! error answers of the operation endpoints, over real HTTP.

mod common;

use common::{chain_toml, Sim};
use serde_json::{json, Value};

fn requirements(sim: &Sim, uppers: &[u32]) -> Value {
    let mut m = serde_json::Map::new();
    for (vid, up) in sim.control.vertex_ids(&sim.job()).iter().zip(uppers) {
        m.insert(
            vid.clone(),
            json!({ "parallelism": { "lowerBound": 1, "upperBound": up } }),
        );
    }
    Value::Object(m)
}

fn error_text(body: &Value) -> String {
    body["errors"]
        .as_array()
        .expect("Flink error body")
        .iter()
        .filter_map(Value::as_str)
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn rescale_goes_through_restarting_to_the_new_parallelism() {
    let sim = Sim::from_toml(&chain_toml(1000.0, 1000.0, "")).await;
    let (job, src, map) = (sim.job(), sim.vertex(0), sim.vertex(1));
    sim.advance_s(20);
    let rr_path = format!("/jobs/{job}/resource-requirements");
    let current = sim.get_ok(&rr_path).await;
    assert_eq!(current, requirements(&sim, &[2, 2, 1]));

    let (status, body) = sim
        .send("PUT", &rr_path, &requirements(&sim, &[2, 4, 1]).to_string())
        .await;
    assert_eq!((status, body), (200, json!({})));
    // During the downtime the job is RESTARTING and subtask metrics vanish.
    assert_eq!(
        sim.get_ok(&format!("/jobs/{job}/status")).await,
        json!({ "status": "RESTARTING" })
    );
    let gone = sim
        .get_ok(&format!(
            "/jobs/{job}/vertices/{map}/subtasks/metrics?get=busyTimeMsPerSecond"
        ))
        .await;
    assert_eq!(gone, json!([]));
    assert_eq!(
        sim.get_ok(&format!("/jobs/{job}/vertices/{map}/subtasks/metrics"))
            .await,
        json!([])
    );
    // A second update while the first is in flight: 409 with Flink's literal message.
    let (status, body) = sim
        .send("PUT", &rr_path, &requirements(&sim, &[2, 3, 1]).to_string())
        .await;
    assert_eq!(status, 409);
    assert!(
        error_text(&body)
            .contains("Another update to the job [%s] resource requirements is in progress."),
        "{body}"
    );

    sim.advance_s(2); // downtime_ms = 2000
    let details = sim.get_ok(&format!("/jobs/{job}")).await;
    assert_eq!(details["state"], "RUNNING");
    assert_eq!(details["vertices"][1]["parallelism"], 4);
    assert_eq!(
        details["timestamps"]["RUNNING"], details["now"],
        "RUNNING timestamp marks the rescale"
    );
    assert_eq!(sim.control.parallelism(&job)[&map], 4);
    assert_eq!(sim.get_ok(&rr_path).await, requirements(&sim, &[2, 4, 1]));
    // FORWARD with unequal parallelism is shown as REBALANCE, as Flink does.
    let plan = sim.get_ok(&format!("/jobs/{job}/plan")).await;
    assert_eq!(
        plan["plan"]["nodes"][1]["inputs"][0]["ship_strategy"],
        "REBALANCE"
    );
    let m = sim
        .get_ok(&format!("/jobs/{job}/metrics?get=numRescales,numRestarts"))
        .await;
    assert_eq!(common::plain(&m, "numRescales"), 1.0);
    assert_eq!(common::plain(&m, "numRestarts"), 1.0);
    // New incarnation: counters start again, and 4 subtasks report.
    assert_eq!(details["vertices"][1]["metrics"]["read-records"], 0);
    let names = sim
        .get_ok(&format!(
            "/jobs/{job}/vertices/{map}/subtasks/3/metrics?get=busyTimeMsPerSecond"
        ))
        .await;
    assert_eq!(names.as_array().unwrap().len(), 1);
    // The 2 s of downtime left a backlog that the job now drains.
    let lag = sim.control.model(&job)[0].lag;
    assert!((lag - 2000.0).abs() < 1e-6, "lag {lag}");
    sim.advance_s(60);
    assert_eq!(sim.control.model(&job)[0].lag, 0.0);
    // Unchanged requirements answer 200 and do not restart.
    let (status, _) = sim
        .send("PUT", &rr_path, &requirements(&sim, &[2, 4, 1]).to_string())
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        sim.get_ok(&format!("/jobs/{job}/status")).await["status"],
        "RUNNING"
    );
    let _ = src;
    sim.stop().await;
}

#[tokio::test]
async fn invalid_requirements_are_rejected() {
    let sim = Sim::from_toml(&chain_toml(100.0, 1000.0, "")).await;
    let job = sim.job();
    let rr_path = format!("/jobs/{job}/resource-requirements");
    let check = |status: u16, needle: &'static str| {
        move |(s, b): (u16, Value)| {
            assert_eq!(s, status, "{b}");
            assert!(
                error_text(&b).contains(needle),
                "expected \"{needle}\" in {b}"
            );
        }
    };
    check(400, "exceeds its maximum parallelism 32")(
        sim.send(
            "PUT",
            &rr_path,
            &requirements(&sim, &[2, 33, 1]).to_string(),
        )
        .await,
    );
    let mut unknown = requirements(&sim, &[2, 2, 1]);
    unknown["0123456789abcdef0123456789abcdef"] =
        json!({ "parallelism": { "lowerBound": 1, "upperBound": 1 } });
    check(400, "unknown job vertex")(sim.send("PUT", &rr_path, &unknown.to_string()).await);
    let mut missing = requirements(&sim, &[2, 2, 1]);
    missing.as_object_mut().unwrap().remove(&sim.vertex(1));
    check(400, "missing job vertex")(sim.send("PUT", &rr_path, &missing.to_string()).await);
    let mut inverted = requirements(&sim, &[2, 2, 1]);
    inverted[sim.vertex(1)]["parallelism"]["lowerBound"] = 3.into();
    check(400, "is higher than the upper bound")(
        sim.send("PUT", &rr_path, &inverted.to_string()).await,
    );
    check(
        400,
        "Request did not match expected format JobResourceRequirementsBody.",
    )(sim.send("PUT", &rr_path, r#"{"x":1}"#).await);
    check(400, "does not specify resource requirements")(sim.send("PUT", &rr_path, "{}").await);
    let zero = "00000000000000000000000000000000";
    check(500, "FlinkJobNotFoundException")(
        sim.send("PUT", &format!("/jobs/{zero}/resource-requirements"), "{}")
            .await,
    );
    check(500, "FlinkJobNotFoundException")(
        sim.get(&format!("/jobs/{zero}/resource-requirements"))
            .await,
    );
    check(503, "Rescaling is temporarily disabled")(
        sim.send("PATCH", &format!("/jobs/{job}/rescaling?parallelism=4"), "")
            .await,
    );
    // Nothing was applied.
    assert_eq!(sim.control.job_status(&job).as_deref(), Some("RUNNING"));
    assert_eq!(
        sim.control
            .parallelism(&job)
            .values()
            .copied()
            .collect::<Vec<_>>()
            .iter()
            .sum::<u32>(),
        5
    );
    sim.stop().await;
}

#[tokio::test]
async fn default_scheduler_has_no_resource_requirements() {
    let sim = Sim::from_toml(&chain_toml(
        100.0,
        1000.0,
        "[cluster]\nscheduler = \"default\"",
    ))
    .await;
    let path = format!("/jobs/{}/resource-requirements", sim.job());
    let (status, body) = sim.get(&path).await;
    assert_eq!(status, 500);
    assert!(
        error_text(&body).contains("DefaultScheduler does not support"),
        "{body}"
    );
    let (status, _) = sim
        .send("PUT", &path, &requirements(&sim, &[2, 4, 1]).to_string())
        .await;
    assert_eq!(status, 500);
    assert_eq!(
        sim.get_ok(&format!("/jobs/{}", sim.job())).await["schedulerType"],
        "Default"
    );
    sim.stop().await;
}

#[tokio::test]
async fn stop_with_savepoint_finishes_the_job() {
    let sim = Sim::from_toml(&chain_toml(100.0, 1000.0, "")).await;
    let job = sim.job();
    sim.advance_s(15);
    let (status, body) = sim
        .send(
            "POST",
            &format!("/jobs/{job}/stop"),
            r#"{"targetDirectory":"file:/tmp/sp","drain":false}"#,
        )
        .await;
    assert_eq!(status, 202);
    let trigger = body["request-id"].as_str().unwrap().to_string();
    assert_eq!(trigger.len(), 32);
    let status_path = format!("/jobs/{job}/savepoints/{trigger}");
    assert_eq!(
        sim.get_ok(&status_path).await,
        json!({ "status": { "id": "IN_PROGRESS" } })
    );
    sim.advance_s(1);
    let done = sim.get_ok(&status_path).await;
    assert_eq!(done["status"]["id"], "COMPLETED");
    assert!(
        done["operation"]["location"]
            .as_str()
            .unwrap()
            .starts_with("file:/tmp/sp/savepoint-"),
        "{done}"
    );
    assert_eq!(
        sim.get_ok(&format!("/jobs/{job}")).await["state"],
        "FINISHED"
    );
    assert_eq!(sim.get_ok("/overview").await["jobs-finished"], 1);
    let cps = sim.get_ok(&format!("/jobs/{job}/checkpoints")).await;
    assert_eq!(cps["latest"]["savepoint"]["is_savepoint"], true);
    let (status, _) = sim
        .get(&format!(
            "/jobs/{job}/savepoints/0123456789abcdef0123456789abcdef"
        ))
        .await;
    assert_eq!(status, 404);
    let (status, _) = sim.get(&format!("/jobs/{job}/savepoints/xyz")).await;
    assert_eq!(status, 400);
    // A plain savepoint (hyphenated keys) leaves another job running.
    sim.stop().await;

    let sim = Sim::from_toml(&chain_toml(100.0, 1000.0, "")).await;
    let (status, body) = sim
        .send(
            "POST",
            &format!("/jobs/{}/savepoints", sim.job()),
            r#"{"target-directory":"file:/tmp/x","cancel-job":false}"#,
        )
        .await;
    assert_eq!(status, 202, "{body}");
    sim.advance_s(2);
    assert_eq!(
        sim.control.job_status(&sim.job()).as_deref(),
        Some("RUNNING")
    );
    sim.stop().await;
}

#[tokio::test]
async fn failover_restart_resets_counters() {
    let sim = Sim::from_toml(&chain_toml(500.0, 1000.0, "")).await;
    let job = sim.job();
    sim.advance_s(10);
    let (status, _) = sim
        .send("POST", &format!("/_sim/jobs/{job}/restart"), "")
        .await;
    assert_eq!(status, 200);
    assert_eq!(sim.control.job_status(&job).as_deref(), Some("RESTARTING"));
    let details = sim.get_ok(&format!("/jobs/{job}")).await;
    assert_eq!(details["vertices"][1]["status"], "SCHEDULED");
    sim.advance_s(3);
    let details = sim.get_ok(&format!("/jobs/{job}")).await;
    assert_eq!(details["state"], "RUNNING");
    // 1 s after the 2 s downtime, at 500 records/s (plus the backlog drained at full speed).
    let read = details["vertices"][1]["metrics"]["read-records"]
        .as_f64()
        .unwrap();
    assert!(read > 0.0 && read < 2_000.0, "counters restarted: {read}");
    let m = sim
        .get_ok(&format!("/jobs/{job}/metrics?get=numRestarts,numRescales"))
        .await;
    assert_eq!(common::plain(&m, "numRestarts"), 1.0);
    assert_eq!(common::plain(&m, "numRescales"), 0.0);
    // The control API: rate multiplier and clock over HTTP.
    let (status, _) = sim
        .send(
            "POST",
            &format!("/_sim/jobs/{job}/rate"),
            r#"{"multiplier":2}"#,
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(sim.control.model(&job)[0].input_rate, Some(1000.0));
    let before = sim.control.now_ms();
    let (status, body) = sim
        .send("POST", "/_sim/clock/advance", r#"{"ms":1500}"#)
        .await;
    assert_eq!(status, 200);
    assert_eq!(body["now_ms"].as_u64().unwrap(), before + 1500);
    let (status, _) = sim
        .send(
            "POST",
            "/_sim/jobs/00000000000000000000000000000000/rate",
            r#"{"multiplier":2}"#,
        )
        .await;
    assert_eq!(status, 404);
    let (status, _) = sim
        .send(
            "POST",
            &format!("/_sim/jobs/{job}/rate"),
            r#"{"multiplier":-1}"#,
        )
        .await;
    assert_eq!(status, 400);
    sim.stop().await;
}
