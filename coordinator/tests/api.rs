//! The coordinator API over real HTTP on loopback, against SQLite and PostgreSQL.

#[macro_use]
mod support;

use futures_util::future::join_all;
use hyper::StatusCode;
use serde_json::{json, Value};
use support::{job, proposal, Db, Server, ADMIN, AGENT, JOB};

on_both_backends!(
    idempotent_retries,
    auth_and_roles,
    bad_input,
    gates_and_outcomes,
    audit_pagination_and_filters,
    restart_loses_nothing,
);

async fn idempotent_retries(db: Db) {
    let server = Server::start(&db, &[]);
    let p = proposal("retry-1", JOB, 4, 6);
    let (status, first) = server
        .call("POST", "/v1/proposals", Some(AGENT), Some(p.clone()))
        .await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(first["verdict"], "approved", "{first}");
    assert_eq!(first["plan"]["parallelism"][support::vertex_id(2)], 6);

    // Retries, sequential and concurrent, get the very same answer.
    let (_, again) = server
        .call("POST", "/v1/proposals", Some(AGENT), Some(p.clone()))
        .await;
    assert_eq!(again, first);
    let retries =
        (0..8).map(|_| server.call("POST", "/v1/proposals", Some(AGENT), Some(p.clone())));
    for (status, answer) in join_all(retries).await {
        assert_eq!(status, StatusCode::OK);
        assert_eq!(answer, first);
    }

    // Concurrent first attempts of one new id: one decision, everyone sees it.
    let q = proposal("retry-2", &job(2), 4, 6);
    let racers = (0..8).map(|_| server.call("POST", "/v1/proposals", Some(AGENT), Some(q.clone())));
    let answers = join_all(racers).await;
    assert!(answers.windows(2).all(|w| w[0] == w[1]), "{answers:?}");

    // The same id with a different body is a conflict, not a second record.
    let mut changed = p.clone();
    changed["vertices"][1]["proposed_parallelism"] = json!(7);
    let (status, err) = server
        .call("POST", "/v1/proposals", Some(AGENT), Some(changed))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{err}");
    assert_eq!(err["field"], "proposal_id");

    let audit = server.all_decisions().await;
    let ids: Vec<_> = audit
        .iter()
        .map(|d| d["proposal_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["retry-2", "retry-1"], "one record per proposal id");
}

async fn auth_and_roles(db: Db) {
    let server = Server::start(&db, &[]);
    let p = proposal("auth-1", JOB, 4, 6);
    type Case = (
        &'static str,
        &'static str,
        Option<&'static str>,
        Option<Value>,
        StatusCode,
    );
    let cases: &[Case] = &[
        (
            "POST",
            "/v1/proposals",
            None,
            Some(p.clone()),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "POST",
            "/v1/proposals",
            Some("wrong-token-0123456789abcdef"),
            Some(p.clone()),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "POST",
            "/v1/proposals",
            Some(ADMIN),
            Some(p.clone()),
            StatusCode::FORBIDDEN,
        ),
        (
            "GET",
            "/v1/decisions",
            Some(AGENT),
            None,
            StatusCode::FORBIDDEN,
        ),
        ("GET", "/v1/jobs", Some(AGENT), None, StatusCode::FORBIDDEN),
        ("GET", "/v1/regions", None, None, StatusCode::UNAUTHORIZED),
        (
            "PUT",
            "/v1/regions/eu-west-1/evacuation",
            Some(AGENT),
            Some(json!({"reason": "x"})),
            StatusCode::FORBIDDEN,
        ),
        (
            "PUT",
            "/v1/clusters/c1/overrides",
            Some(AGENT),
            Some(json!({})),
            StatusCode::FORBIDDEN,
        ),
        ("GET", "/v1/decisions", Some(ADMIN), None, StatusCode::OK),
        ("GET", "/v1/jobs", Some(ADMIN), None, StatusCode::OK),
        ("GET", "/v1/regions", Some(ADMIN), None, StatusCode::OK),
        ("GET", "/v1/clusters", Some(ADMIN), None, StatusCode::OK),
        (
            "POST",
            "/v1/proposals",
            Some(AGENT),
            Some(p.clone()),
            StatusCode::OK,
        ),
        ("GET", "/healthz", None, None, StatusCode::OK),
        ("GET", "/readyz", None, None, StatusCode::OK),
        ("GET", "/metrics", None, None, StatusCode::OK),
        (
            "GET",
            "/v1/proposals",
            Some(AGENT),
            None,
            StatusCode::METHOD_NOT_ALLOWED,
        ),
        (
            "GET",
            "/v2/anything",
            Some(AGENT),
            None,
            StatusCode::NOT_FOUND,
        ),
        // Paths are taken as written: no empty segments, no trailing slash.
        (
            "GET",
            "//v1/decisions",
            Some(ADMIN),
            None,
            StatusCode::NOT_FOUND,
        ),
        (
            "GET",
            "/v1/decisions/",
            Some(ADMIN),
            None,
            StatusCode::NOT_FOUND,
        ),
        (
            "PATCH",
            "/v1/regions/eu-west-1/evacuation",
            Some(ADMIN),
            None,
            StatusCode::METHOD_NOT_ALLOWED,
        ),
    ];
    for (method, path, token, body, want) in cases {
        let (status, answer) = server.call(method, path, *token, body.clone()).await;
        assert_eq!(status, *want, "{method} {path} with {token:?}: {answer}");
        if status.is_client_error() {
            assert!(
                answer["error"].is_string(),
                "{method} {path}: JSON error body, got {answer}"
            );
        }
    }
    let (_, headers, _) = server
        .raw_with_headers("GET", "/v1/regions", None, None)
        .await;
    assert_eq!(headers["www-authenticate"], "Bearer");
    // The rejected attempts left no record; the agent's proposal did.
    assert_eq!(server.all_decisions().await.len(), 1);
}

async fn bad_input(db: Db) {
    let server = Server::start(&db, &[]);
    let valid = proposal("bad-0", JOB, 4, 6);
    let with = |path: &[&str], value: Value| {
        let mut p = valid.clone();
        let mut target = &mut p;
        for (i, key) in path.iter().enumerate() {
            if i + 1 == path.len() {
                target[*key] = value.clone();
            } else {
                target = match key.parse::<usize>() {
                    Ok(idx) => &mut target[idx],
                    Err(_) => &mut target[*key],
                };
            }
        }
        serde_json::to_vec(&p).unwrap()
    };
    let mut unknown = valid.clone();
    unknown["surprise"] = json!(true);
    let mut unknown_nested = valid.clone();
    unknown_nested["vertices"][1]["evidence"]["mood"] = json!("sad");
    let mut missing = valid.clone();
    missing.as_object_mut().unwrap().remove("job_id");
    let cases: Vec<(&str, Vec<u8>, &str, &str)> = vec![
        (
            "malformed JSON",
            b"{\"proposal_id\": ".to_vec(),
            "malformed_json",
            "body",
        ),
        (
            "not JSON at all",
            b"hello".to_vec(),
            "malformed_json",
            "body",
        ),
        ("empty body", Vec::new(), "malformed_json", "body"),
        (
            "unknown field",
            serde_json::to_vec(&unknown).unwrap(),
            "invalid_field",
            "surprise",
        ),
        (
            "unknown nested field",
            serde_json::to_vec(&unknown_nested).unwrap(),
            "invalid_field",
            "vertices[1].evidence.mood",
        ),
        (
            "missing field",
            serde_json::to_vec(&missing).unwrap(),
            "invalid_field",
            "job_id",
        ),
        (
            "string parallelism",
            with(&["vertices", "1", "proposed_parallelism"], json!("6")),
            "invalid_field",
            "vertices[1].proposed_parallelism",
        ),
        (
            "negative state size",
            with(&["checkpoint_state_bytes"], json!(-1)),
            "invalid_field",
            "checkpoint_state_bytes",
        ),
        (
            "fractional slots",
            with(&["slots_per_task_manager"], json!(1.5)),
            "invalid_field",
            "slots_per_task_manager",
        ),
        (
            "huge parallelism",
            with(&["vertices", "0", "current_parallelism"], json!(1u64 << 40)),
            "invalid_field",
            "vertices[0].current_parallelism",
        ),
        (
            "vertices not a list",
            with(&["vertices"], json!({})),
            "invalid_field",
            "vertices",
        ),
        (
            "short job id",
            with(&["job_id"], json!("abc")),
            "invalid_field",
            "job_id",
        ),
        (
            "non-hex job id",
            with(&["job_id"], json!("zz23456789abcdef0123456789abcdef")),
            "invalid_field",
            "job_id",
        ),
        (
            "bad vertex id",
            with(&["vertices", "1", "id"], json!("map")),
            "invalid_field",
            "vertices[1].id",
        ),
        (
            "parallelism zero",
            with(&["vertices", "1", "proposed_parallelism"], json!(0)),
            "invalid_field",
            "vertices[1].proposed_parallelism",
        ),
        (
            "parallelism above Flink's max",
            with(&["vertices", "1", "proposed_parallelism"], json!(40_000)),
            "invalid_field",
            "vertices[1].proposed_parallelism",
        ),
        (
            "no vertices",
            with(&["vertices"], json!([])),
            "invalid_field",
            "vertices",
        ),
        (
            "empty proposal id",
            with(&["proposal_id"], json!("")),
            "invalid_field",
            "proposal_id",
        ),
        (
            "slots zero",
            with(&["slots_per_task_manager"], json!(0)),
            "invalid_field",
            "slots_per_task_manager",
        ),
        (
            "NaN-like busy ratio",
            with(&["vertices", "1", "evidence", "busy_ratio"], json!(-0.5)),
            "invalid_field",
            "vertices[1].evidence.busy_ratio",
        ),
    ];
    for (name, body, error, field) in cases {
        let (status, answer) = server
            .raw("POST", "/v1/proposals", Some(AGENT), Some(body))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{name}: {answer}");
        assert_eq!(answer["error"], error, "{name}: {answer}");
        assert_eq!(answer["field"], field, "{name}: {answer}");
        assert!(
            answer["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{name}"
        );
    }

    // A body declared larger than the cap is refused before it is read.
    let (status, answer) = server
        .declared_oversize("/v1/proposals", AGENT, 2 << 20)
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "oversize body: {answer}");
    assert_eq!(answer["error"], "body_too_large", "oversize body: {answer}");
    assert_eq!(answer["field"], "body", "oversize body: {answer}");

    // Other endpoints validate too.
    let other: Vec<(&str, &str, &str, Option<Value>, &str)> = vec![
        (
            "POST",
            "/v1/proposals/bad-0/outcome",
            AGENT,
            Some(json!({"status": "maybe"})),
            "status",
        ),
        (
            "POST",
            "/v1/proposals/bad-0/outcome",
            AGENT,
            Some(json!({"status": "applied", "observed_parallelism": {"nope": 1}})),
            "observed_parallelism.nope",
        ),
        (
            "POST",
            "/v1/proposals/has%20space/outcome",
            AGENT,
            Some(json!({"status": "applied"})),
            "proposal_id",
        ),
        (
            "PUT",
            "/v1/regions/eu-west-1/evacuation",
            ADMIN,
            Some(json!({"reason": ""})),
            "reason",
        ),
        (
            "PUT",
            "/v1/regions/eu-west-1/evacuation",
            ADMIN,
            Some(json!({"reason": "x", "until": 5})),
            "until",
        ),
        (
            "PUT",
            "/v1/regions/eu%2Fwest/evacuation",
            ADMIN,
            Some(json!({"reason": "x"})),
            "region",
        ),
        (
            "PUT",
            "/v1/clusters/c1/overrides",
            ADMIN,
            Some(json!({"disk_headroom": -1.0})),
            "disk_headroom",
        ),
        (
            "PUT",
            "/v1/clusters/c1/overrides",
            ADMIN,
            Some(json!({"disk_bytes_per_task_manager": "lots"})),
            "disk_bytes_per_task_manager",
        ),
        ("GET", "/v1/decisions?job=xyz", ADMIN, None, "job"),
        ("GET", "/v1/decisions?limit=0", ADMIN, None, "limit"),
        ("GET", "/v1/decisions?limit=5000", ADMIN, None, "limit"),
        ("GET", "/v1/decisions?since=-4", ADMIN, None, "since"),
        ("GET", "/v1/decisions?cursor=abc", ADMIN, None, "cursor"),
        ("GET", "/v1/decisions?verdict=maybe", ADMIN, None, "verdict"),
        ("GET", "/v1/jobs?cursor=nope", ADMIN, None, "cursor"),
    ];
    for (method, path, token, body, field) in other {
        let (status, answer) = server.call(method, path, Some(token), body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{method} {path}: {answer}");
        assert_eq!(answer["field"], field, "{method} {path}: {answer}");
    }

    // Nothing was recorded and the server is healthy.
    assert!(server.all_decisions().await.is_empty());
    let (status, _) = server.call("GET", "/healthz", None, None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = server
        .call("POST", "/v1/proposals", Some(AGENT), Some(valid))
        .await;
    assert_eq!(status, StatusCode::OK);
}

async fn gates_and_outcomes(db: Db) {
    let server = Server::start(&db, &["--min-interval", "0s"]);
    let post = |p: Value| server.call("POST", "/v1/proposals", Some(AGENT), Some(p));

    // Flag the region: scale-down refused (naming its gate), scale-up approved.
    let (status, regions) = server
        .call(
            "PUT",
            "/v1/regions/eu-west-1/evacuation",
            Some(ADMIN),
            Some(json!({"reason": "failover to eu-central-1"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{regions}");
    assert_eq!(regions["regions"][0]["region"], "eu-west-1");
    let (_, down) = post(proposal("g-down", &job(1), 8, 4)).await;
    assert_eq!(down["verdict"], "refused", "{down}");
    assert_eq!(down["reasons"][0]["gate"], "region_failover");
    assert_eq!(down["reasons"][0]["code"], "region_evacuating");
    assert!(down.get("plan").is_none());
    let (_, up) = post(proposal("g-up", &job(2), 4, 8)).await;
    assert_eq!(up["verdict"], "approved", "{up}");
    assert_eq!(up["plan"]["task_managers"], 2);
    let (_, other_region) = post({
        let mut p = proposal("g-other", &job(3), 8, 4);
        p["region"] = json!("us-east-1");
        p
    })
    .await;
    assert_eq!(other_region["verdict"], "approved", "{other_region}");

    // Clear the flag: the scale-down now passes.
    let (status, regions) = server
        .call(
            "DELETE",
            "/v1/regions/eu-west-1/evacuation",
            Some(ADMIN),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(regions["regions"], json!([]));
    let (status, _) = server
        .call(
            "DELETE",
            "/v1/regions/eu-west-1/evacuation",
            Some(ADMIN),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, down) = post(proposal("g-down-2", &job(1), 8, 4)).await;
    assert_eq!(down["verdict"], "approved", "{down}");

    // One action per job in flight until its outcome arrives.
    let (_, busy) = post(proposal("g-busy", &job(1), 4, 5)).await;
    assert_eq!(busy["verdict"], "refused");
    assert_eq!(busy["reasons"][0]["code"], "job_action_in_flight");
    let outcome = json!({"status": "applied", "observed_parallelism": {support::vertex_id(2): 4}});
    let (status, record) = server.report_outcome("g-down-2", outcome.clone()).await;
    assert_eq!(status, StatusCode::OK, "{record}");
    assert_eq!(record["outcome"]["status"], "applied");
    let (status, _) = server.report_outcome("g-down-2", outcome).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "re-reporting the same outcome is idempotent"
    );
    let (status, _) = server
        .report_outcome("g-down-2", json!({"status": "failed", "error": "boom"}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (status, _) = server
        .report_outcome("g-busy", json!({"status": "applied"}))
        .await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "refused proposals have no outcome"
    );
    let (status, _) = server
        .report_outcome("nobody", json!({"status": "applied"}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, next) = post(proposal("g-next", &job(1), 4, 5)).await;
    assert_eq!(next["verdict"], "approved", "{next}");

    // A cluster override of the disk per TaskManager makes the state not fit.
    let (status, clusters) = server
        .call(
            "PUT",
            "/v1/clusters/c1/overrides",
            Some(ADMIN),
            Some(json!({"disk_bytes_per_task_manager": 1024})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{clusters}");
    assert_eq!(
        clusters["clusters"][0]["overrides"]["disk_bytes_per_task_manager"],
        1024
    );
    let (_, tight) = post(proposal("g-disk", &job(4), 4, 8)).await;
    assert_eq!(tight["verdict"], "refused", "{tight}");
    assert_eq!(tight["reasons"][0]["gate"], "disk_capacity");
    assert_eq!(tight["reasons"][0]["code"], "insufficient_disk");
    let (status, _) = server
        .call("DELETE", "/v1/clusters/c1/overrides", Some(ADMIN), None)
        .await;
    assert_eq!(status, StatusCode::OK);

    // Unknown state size: shrinking the cluster is refused, growing is not.
    let mut unknown = proposal("g-unknown", &job(5), 8, 4);
    unknown["vertices"][0]["proposed_parallelism"] = json!(4);
    unknown["checkpoint_state_bytes"] = Value::Null;
    let (_, refused) = post(unknown).await;
    assert_eq!(
        refused["reasons"][0]["code"], "state_size_unknown",
        "{refused}"
    );

    // The fleet view shows the latest per job, with open actions.
    let (_, jobs) = server.call("GET", "/v1/jobs", Some(ADMIN), None).await;
    let jobs = jobs["jobs"].as_array().unwrap().clone();
    assert_eq!(jobs.len(), 5);
    let first = jobs.iter().find(|j| j["job_id"] == job(1)).unwrap();
    assert_eq!(first["last_proposal_id"], "g-next");
    assert_eq!(first["open_action"], "g-next");

    // Metrics count verdicts by reason.
    let (_, _, metrics) = server.raw_with_headers("GET", "/metrics", None, None).await;
    assert!(
        metrics.contains("flink_autoscale_coordinator_proposals_total{verdict=\"refused\",reason=\"region_evacuating\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("flink_autoscale_coordinator_http_request_duration_seconds_bucket"));
    assert!(metrics.contains("flink_autoscale_coordinator_store_operation_duration_seconds_bucket"));
}

async fn audit_pagination_and_filters(db: Db) {
    let server = Server::start(&db, &[]);
    for i in 0..25 {
        let mut p = proposal(&format!("page-{i:02}"), &job(i % 5), 4, 6);
        p["cluster_id"] = json!(if i % 2 == 0 { "even" } else { "odd" });
        let (status, _) = server
            .call("POST", "/v1/proposals", Some(AGENT), Some(p))
            .await;
        assert_eq!(status, StatusCode::OK);
    }
    let mut seen = Vec::new();
    let mut path = "/v1/decisions?limit=10".to_string();
    let mut pages = 0;
    loop {
        let (status, page) = server.call("GET", &path, Some(ADMIN), None).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        pages += 1;
        seen.extend(
            page["decisions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d["proposal_id"].as_str().unwrap().to_string()),
        );
        match page["next"].as_str() {
            Some(next) => path = format!("/v1/decisions?limit=10&cursor={next}"),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    let expected: Vec<String> = (0..25).rev().map(|i| format!("page-{i:02}")).collect();
    assert_eq!(seen, expected, "newest first, each exactly once");

    let (_, by_job) = server
        .call(
            "GET",
            &format!("/v1/decisions?job={}", job(3)),
            Some(ADMIN),
            None,
        )
        .await;
    let ids: Vec<_> = by_job["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["proposal_id"].clone())
        .collect();
    assert_eq!(
        ids,
        [
            json!("page-23"),
            json!("page-18"),
            json!("page-13"),
            json!("page-08"),
            json!("page-03")
        ]
    );
    let (_, odd) = server
        .call(
            "GET",
            "/v1/decisions?cluster=odd&region=eu-west-1",
            Some(ADMIN),
            None,
        )
        .await;
    assert_eq!(odd["decisions"].as_array().unwrap().len(), 12);
    let (_, future) = server
        .call(
            "GET",
            "/v1/decisions?since=99999999999999",
            Some(ADMIN),
            None,
        )
        .await;
    assert_eq!(future["decisions"], json!([]));
    assert_eq!(future["next"], Value::Null);
}

async fn restart_loses_nothing(db: Db) {
    let server = Server::start(&db, &[]);
    let (status, _) = server
        .call(
            "PUT",
            "/v1/regions/ap-south-1/evacuation",
            Some(ADMIN),
            Some(json!({"reason": "drill"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = server
        .call(
            "PUT",
            "/v1/clusters/c9/overrides",
            Some(ADMIN),
            Some(json!({"min_interval_seconds": 30})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let mut answers = Vec::new();
    for i in 0..10 {
        let p = proposal(&format!("keep-{i}"), &job(i % 3), 4, 6);
        let (status, answer) = server
            .call("POST", "/v1/proposals", Some(AGENT), Some(p.clone()))
            .await;
        assert_eq!(status, StatusCode::OK);
        answers.push((p, answer));
    }
    let (status, _) = server
        .report_outcome(
            "keep-0",
            json!({"status": "failed", "error": "TaskManager lost"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let audit_before = server.all_decisions().await;
    let (_, jobs_before) = server.call("GET", "/v1/jobs", Some(ADMIN), None).await;
    let status = server.terminate();
    assert!(status.success(), "SIGTERM must exit 0, got {status:?}");

    let server = Server::start(&db, &[]);
    assert_eq!(server.all_decisions().await, audit_before);
    let (_, jobs_after) = server.call("GET", "/v1/jobs", Some(ADMIN), None).await;
    assert_eq!(jobs_after, jobs_before);
    let (_, regions) = server.call("GET", "/v1/regions", Some(ADMIN), None).await;
    assert_eq!(regions["regions"][0]["region"], "ap-south-1");
    let (_, clusters) = server.call("GET", "/v1/clusters", Some(ADMIN), None).await;
    assert_eq!(
        clusters["clusters"][0]["overrides"]["min_interval_seconds"],
        30
    );
    for (p, answer) in answers {
        let (_, replay) = server
            .call("POST", "/v1/proposals", Some(AGENT), Some(p))
            .await;
        assert_eq!(
            replay, answer,
            "a retry after restart gets the recorded verdict"
        );
    }
    // Open actions survived too: job 1's approval still blocks it.
    let (_, blocked) = server
        .call(
            "POST",
            "/v1/proposals",
            Some(AGENT),
            Some(proposal("keep-new", &job(1), 6, 8)),
        )
        .await;
    assert_eq!(blocked["verdict"], "refused", "{blocked}");
    assert_eq!(server.all_decisions().await.len(), 11);
    assert!(server.terminate().success());
}

#[test]
fn check_config_validates_without_binding() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("agent.tokens");
    flink_autoscale_testkit::write_private(&tokens, &format!("{AGENT}\n")).unwrap();
    let config = dir.path().join("coordinator.toml");
    std::fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:0\"\n[database]\nurl = \"sqlite:{}/c.db\"\n[auth]\nagent_tokens_file = \"{}\"\n[gates]\nmin_interval = \"1min\"\n",
            dir.path().display(),
            tokens.display()
        ),
    )
    .unwrap();
    let bin = env!("CARGO_BIN_EXE_flink-autoscale-coordinator");
    let ok = std::process::Command::new(bin)
        .args(["check-config", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(String::from_utf8_lossy(&ok.stdout).contains("configuration OK"));

    let cases: &[(&[&str], &str)] = &[
        (&["--disk-headroom=-1"], "gates.disk_headroom"),
        (&["--database", "mysql://x"], "database.url"),
        (
            &["--agent-tokens-file", "/nonexistent/tokens"],
            "auth.agent_tokens_file",
        ),
        (
            &["--tls-cert-file", "/nonexistent/cert.pem"],
            "tls.key_file",
        ),
    ];
    for (flags, setting) in cases {
        let out = std::process::Command::new(bin)
            .args(["check-config", "--config"])
            .arg(&config)
            .args(*flags)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{flags:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(setting), "{flags:?}: {stderr}");
    }
    std::fs::write(
        dir.path().join("bad.toml"),
        "listen = \"127.0.0.1:0\"\nlisten_port = 5\n",
    )
    .unwrap();
    let out = std::process::Command::new(bin)
        .args(["run", "--config"])
        .arg(dir.path().join("bad.toml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("listen_port"));
    assert!(out.stdout.is_empty(), "a bad configuration never binds");
}
